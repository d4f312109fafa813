using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Service;

namespace QuickSilver.Samples.QuickStart;

/// <summary>The demo's fixed shape: which groups each process joins and the node options every process uses.</summary>
internal static class Demo
{
    /// <summary>The group the publisher publishes in; every receiver is a member.</summary>
    public const string Published = "prices/all";

    private static readonly string[] Groups = ["prices/all", "prices/tech", "prices/energy"];

    /// <summary>The publisher is in {all, tech}.</summary>
    public static IReadOnlyList<string> PublisherGroups { get; } = Groups[..2];

    /// <summary>Receiver i is in the first (i mod 3) + 1 groups: {all}, {all, tech}, {all, tech, energy}, {all}, …
    /// so "prices/all" spans up to three regions of overlap.</summary>
    public static IReadOnlyList<string> GroupsOf(int receiver) => Groups[..((receiver % Groups.Length) + 1)];

    /// <summary>The environment variable through which the publisher hands its receivers the demo's cluster secret
    /// (base64): the publisher makes a new one each run, so there is nothing to configure.</summary>
    public const string SecretVariable = "QS_DEMO_CLUSTER_SECRET";

    /// <summary>The node logs through Microsoft.Extensions.Logging; Serilog (the static <c>Log.Logger</c> Program sets up) is the provider.</summary>
    public static readonly Serilog.Extensions.Logging.SerilogLoggerFactory Logging = new();

    /// <summary>A small publish buffer so that "sent" tracks what the protocol actually let out. Every datagram is
    /// authenticated under <paramref name="secret"/> (docs/security.md). With <paramref name="replicas"/> the node
    /// talks to a replicated GMS instead of <paramref name="gms"/>.</summary>
    public static QuickSilverNodeOptions NodeOptions(NetAddress gms, bool embeddedGms, byte[] secret, IReadOnlyList<NetAddress>? replicas = null) => new()
    {
        Gms = gms,
        GmsReplicas = replicas ?? [],
        EmbeddedGms = embeddedGms,
        PublishBuffer = 1_000,
        LoggerFactory = Logging,
        Security = new DatagramSecurityOptions { Mode = DatagramSecurity.Authenticate, ClusterSecret = secret },
        GmsServer = GmsOptions(RandomPool()),
    };

    /// <summary>The GMS timing of the demo (20 ms batches) and its multicast address pool.</summary>
    public static GmsOptions GmsOptions(NetAddress pool) => new() { BatchInterval = TimeSpan.FromMilliseconds(20), MulticastPoolStart = pool };

    /// <summary>A random pool, so that two demos (or a demo and the tests) on one machine do not share multicast groups.</summary>
    public static NetAddress RandomPool() => new(0xEFFD0000u | ((uint)Random.Shared.Next(1, 250) << 8), (ushort)Random.Shared.Next(20_000, 60_000));

    /// <summary>The secret the publisher put in this receiver's environment.</summary>
    public static byte[] SecretFromPublisher() => Environment.GetEnvironmentVariable(SecretVariable) is { Length: > 0 } text
        ? DatagramSecurityOptions.DecodeSecret(text, SecretVariable)
        : throw new InvalidOperationException($"{SecretVariable} is not set: receivers are started by the publisher, which hands them the demo's secret.");

    /// <summary>A UDP port on 127.0.0.1 that was free a moment ago.</summary>
    public static ushort FreeLoopbackPort()
    {
        using var socket = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork,
            System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp);
        socket.Bind(NetAddress.Loopback(0).ToIPEndPoint());
        return (ushort)((System.Net.IPEndPoint)socket.LocalEndPoint!).Port;
    }
}
