using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using Microsoft.Extensions.Logging;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary>Two secrets for the tests (32 fixed bytes each; real ones are random).</summary>
internal static class PeeringSecrets
{
    public static byte[] A { get; } = Enumerable.Range(1, 32).Select(i => (byte)i).ToArray();

    public static byte[] B { get; } = Enumerable.Range(101, 32).Select(i => (byte)i).ToArray();
}

/// <summary>Peering authentication on real sockets (docs/federation.md, "Peering authentication"): gateway 2 listens,
/// gateway 1 (or the test, acting as gateway 1) dials. Waits are bounded; nothing asserts a duration.</summary>
public class PeeringAuthenticationTests
{
    private static readonly int Ports = 44_000 + (Environment.ProcessId % 200) * 10;

    private static MulticastNativeNet Island(int k)
        => new(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse($"239.255.{80 + k}.0"), PortBase = Ports + (4 * k), PoolSize = 2 });

    private static GatewayRuntime Gateway(uint id, INativeNet native, IPEndPoint peerAddress, byte[]? secret, ILogger? logger = null)
        => new(new GatewayOptions { Gateway = new GatewayId(id), Island = new IslandId(id), PeeringSecret = secret }, native,
            new IPEndPoint(IPAddress.Loopback, 0), [new PeerConfig(new GatewayId(3 - id), peerAddress, LinkCosts.Default)])
        { Logger = logger ?? Microsoft.Extensions.Logging.Abstractions.NullLogger.Instance };

    private static async Task Until(Func<Task<bool>> condition, int seconds = 30) // returns as soon as it holds; 10 s ran out once on a loaded 2-core machine
    {
        var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(seconds);
        while (DateTime.UtcNow < deadline && !await condition())
        {
            await Task.Delay(50);
        }
    }

    [Fact]
    public async Task GatewaysWithAnotherSecretNeverPeerAndEveryAttemptIsCounted()
    {
        using var n1 = Island(0);
        using var n2 = Island(1);
        await using var g2 = Gateway(2, n2, new IPEndPoint(IPAddress.Loopback, 1), PeeringSecrets.A);
        await using var g1 = Gateway(1, n1, g2.ListenEndpoint, PeeringSecrets.B);
        g2.Start();
        g1.Start();
        // g1 redials every second; each attempt fails at both ends: neither opens the other's HELLO.
        await Until(() => Task.FromResult(g2.PeeringHandshakesFailed >= 2 && g1.PeeringHandshakesFailed >= 2));
        Assert.True(g2.PeeringHandshakesFailed >= 2, $"g2 counted {g2.PeeringHandshakesFailed} failed handshakes");
        Assert.True(g1.PeeringHandshakesFailed >= 2, $"g1 counted {g1.PeeringHandshakesFailed} failed handshakes");
        Assert.Empty((await g1.SnapshotAsync()).Peers);
        Assert.Empty((await g2.SnapshotAsync()).Peers);
        Assert.True((await g2.SnapshotAsync()).Counters["PeeringHandshakesFailed"] >= 2); // what qs sessions shows
        Assert.DoesNotContain((await g2.SnapshotAsync()).Routes, r => r.Destination == 1);
    }

    [Fact]
    public async Task APeerWithoutASecretAndOneWithItRefuseEachOtherWithAClearLog()
    {
        using var n1 = Island(2);
        using var n2 = Island(3);
        var log1 = new ListLogger();
        var log2 = new ListLogger();
        await using var g2 = Gateway(2, n2, new IPEndPoint(IPAddress.Loopback, 1), PeeringSecrets.A, log2);
        await using var g1 = Gateway(1, n1, g2.ListenEndpoint, null, log1);
        g2.Start();
        g1.Start();
        await Until(() => Task.FromResult(g2.PeeringUnauthenticated >= 1 && g1.PeeringUnauthenticated >= 1 && log1.Lines.Count > 0 && log2.Lines.Count > 0));
        Assert.True(g2.PeeringUnauthenticated >= 1);
        Assert.True(g1.PeeringUnauthenticated >= 1);
        Assert.Contains(log2.Lines, l => l.Contains("gateway 1", StringComparison.Ordinal) && l.Contains("HELLO in the clear", StringComparison.Ordinal) && l.Contains("PeeringSecret", StringComparison.Ordinal));
        Assert.Contains(log1.Lines, l => l.Contains("gateway 2", StringComparison.Ordinal) && l.Contains("asks for peering authentication", StringComparison.Ordinal) && l.Contains("no peering secret", StringComparison.Ordinal));
        Assert.Empty((await g1.SnapshotAsync()).Peers);
        Assert.Empty((await g2.SnapshotAsync()).Peers);
    }

    [Fact]
    public async Task ATamperedFrameClosesTheLinkAndIsCountedThenTheLinkComesBackSealed()
    {
        using var n1 = Island(4);
        using var n2 = Island(5);
        await using var g2 = Gateway(2, n2, new IPEndPoint(IPAddress.Loopback, 1), PeeringSecrets.A);
        // g1 → proxy → g2; the proxy flips one byte of the first frame g1 sends after its HELLO, on the first connection only.
        await using var proxy = new TamperingProxy(g2.ListenEndpoint, tamperFrame: 3);
        await using var g1 = Gateway(1, n1, proxy.Endpoint, PeeringSecrets.A);
        g2.Start();
        g1.Start();
        // Waits for g1's route too: it is announced over the link once the link is up, so a snapshot taken the moment
        // both ends list the peer could miss it (seen once in CI).
        await Until(async () => g2.PeeringFramesRejected >= 1 && (await g2.SnapshotAsync()).Peers.Count == 1 && (await g1.SnapshotAsync()).Peers.Count == 1
            && (await g2.SnapshotAsync()).Routes.Any(r => r.Destination == 1));
        Assert.Equal(1, proxy.Tampered);
        Assert.Equal(1, g2.PeeringFramesRejected); // one altered frame: counted, the link closed
        Assert.Equal(0, g2.PeeringHandshakesFailed);
        Assert.True(proxy.Connections >= 2); // g1 dialled again, and that link is up
        Assert.Single((await g2.SnapshotAsync()).Peers);
        Assert.Contains((await g2.SnapshotAsync()).Routes, r => r.Destination == 1);
    }

    [Fact]
    public async Task AReplayedHandshakeIsRefusedAndCounted()
    {
        using var n2 = Island(6);
        await using var g2 = Gateway(2, n2, new IPEndPoint(IPAddress.Loopback, 1), PeeringSecrets.A);
        g2.Start();

        // Connection 1: the test acts as gateway 1 with the right secret and records every byte it sends.
        var recorded = new List<byte[]>();
        using (var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
        {
            await s.ConnectAsync(g2.ListenEndpoint);
            var handshake = new PeeringHandshake(PeeringSecrets.A, new GatewayId(1));
            recorded.Add(Frame(handshake.AuthFrame));
            await s.SendAsync(recorded[0]);
            var theirs = await ReadFrameAsync(s);
            Assert.Equal(FrameError.None, PeerCodec.Decode(theirs, out var auth));
            using var sealer = handshake.Complete((PeerAuthMessage)auth!)!.Frames;
            var hello = PeerCodec.Hello(new GatewayId(1), new IslandId(1));
            var sealedHello = new byte[4 + hello.Length + sealer.Overhead];
            BinaryPrimitives.WriteUInt32LittleEndian(sealedHello, (uint)(hello.Length + sealer.Overhead));
            hello.CopyTo(sealedHello, 4);
            sealer.Seal(sealedHello.AsSpan(4), hello.Length);
            recorded.Add(sealedHello);
            await s.SendAsync(sealedHello);
            // g2's sealed HELLO opens: the handshake worked and g2 took us for gateway 1.
            var theirHello = await ReadFrameAsync(s);
            var plain = new byte[theirHello.Length];
            Assert.True(sealer.Open(theirHello, plain, out int length));
            Assert.Equal(FrameError.None, PeerCodec.Decode(plain.AsSpan(0, length), out var helloMessage));
            Assert.Equal(new GatewayId(2), ((HelloMessage)helloMessage!).Gateway);
            await Until(async () => (await g2.SnapshotAsync()).Peers.Count == 1);
            Assert.Single((await g2.SnapshotAsync()).Peers);
        }

        await Until(async () => (await g2.SnapshotAsync()).Peers.Count == 0);
        Assert.Equal(0, g2.PeeringHandshakesFailed);

        // Connection 2: the recording, replayed byte for byte. g2 drew a new nonce, so the old HELLO does not open.
        using (var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
        {
            await s.ConnectAsync(g2.ListenEndpoint);
            foreach (var bytes in recorded)
            {
                await s.SendAsync(bytes);
            }

            await DrainUntilClosedAsync(s);
        }

        await Until(() => Task.FromResult(g2.PeeringHandshakesFailed == 1));
        Assert.Equal(1, g2.PeeringHandshakesFailed);
        Assert.Empty((await g2.SnapshotAsync()).Peers);
    }

    [Fact]
    public void AShortSecretIsRefusedByName()
    {
        var options = new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1), PeeringSecret = new byte[31] };
        var e = Assert.Throws<ArgumentOutOfRangeException>(options.Validate);
        Assert.Equal(nameof(GatewayOptions.PeeringSecret), e.ParamName);
        Assert.Contains("at least 32 bytes", e.Message, StringComparison.Ordinal);
    }

    private static byte[] Frame(byte[] body)
    {
        var f = new byte[4 + body.Length];
        BinaryPrimitives.WriteUInt32LittleEndian(f, (uint)body.Length);
        body.CopyTo(f, 4);
        return f;
    }

    private static async Task<byte[]> ReadFrameAsync(Socket s)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        var prefix = new byte[4];
        await ReadExactlyAsync(s, prefix, cts.Token);
        var body = new byte[BinaryPrimitives.ReadUInt32LittleEndian(prefix)];
        await ReadExactlyAsync(s, body, cts.Token);
        return body;
    }

    private static async Task ReadExactlyAsync(Socket s, byte[] buffer, CancellationToken token)
    {
        for (int got = 0; got < buffer.Length;)
        {
            int n = await s.ReceiveAsync(buffer.AsMemory(got), SocketFlags.None, token);
            if (n == 0)
            {
                throw new IOException("closed");
            }

            got += n;
        }
    }

    private static async Task DrainUntilClosedAsync(Socket s)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        var buffer = new byte[4096];
        try
        {
            while (await s.ReceiveAsync(buffer, SocketFlags.None, cts.Token) > 0)
            {
            }
        }
        catch (SocketException)
        {
        }
    }

    /// <summary>A logger that keeps every line (any thread).</summary>
    private sealed class ListLogger : ILogger
    {
        private readonly List<string> _lines = [];

        public IReadOnlyList<string> Lines
        {
            get
            {
                lock (_lines)
                {
                    return [.. _lines];
                }
            }
        }

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            lock (_lines)
            {
                _lines.Add(formatter(state, exception));
            }
        }
    }

    /// <summary>A TCP relay in front of a gateway that, on the first connection only, flips one byte of the
    /// <c>tamperFrame</c>-th frame (1-based) the dialler sends; everything else passes unchanged.</summary>
    private sealed class TamperingProxy : IAsyncDisposable
    {
        private readonly Socket _listener = new(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        private readonly IPEndPoint _target;
        private readonly int _tamperFrame;
        private readonly CancellationTokenSource _stop = new();
        private readonly List<Task> _tasks = [];
        private readonly List<Socket> _sockets = [];
        private int _connections;
        private int _tampered;

        public TamperingProxy(IPEndPoint target, int tamperFrame)
        {
            _target = target;
            _tamperFrame = tamperFrame;
            _listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            _listener.Listen(8);
            Endpoint = (IPEndPoint)_listener.LocalEndPoint!;
            _tasks.Add(Task.Run(AcceptAsync));
        }

        public IPEndPoint Endpoint { get; }

        public int Connections => Volatile.Read(ref _connections);

        public int Tampered => Volatile.Read(ref _tampered);

        private async Task AcceptAsync()
        {
            while (!_stop.IsCancellationRequested)
            {
                Socket inbound;
                try
                {
                    inbound = await _listener.AcceptAsync(_stop.Token);
                }
                catch (Exception e) when (e is OperationCanceledException or ObjectDisposedException or SocketException)
                {
                    return;
                }

                var outbound = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await outbound.ConnectAsync(_target);
                lock (_sockets)
                {
                    _sockets.Add(inbound);
                    _sockets.Add(outbound);
                }

                bool first = Interlocked.Increment(ref _connections) == 1;
                _tasks.Add(Task.Run(() => RelayFramesAsync(inbound, outbound, first ? _tamperFrame : 0)));
                _tasks.Add(Task.Run(() => RelayAsync(outbound, inbound)));
            }
        }

        private async Task RelayFramesAsync(Socket from, Socket to, int tamper)
        {
            try
            {
                for (int k = 1; ; k++)
                {
                    var prefix = new byte[4];
                    await ReadExactlyAsync(from, prefix, _stop.Token);
                    var body = new byte[BinaryPrimitives.ReadUInt32LittleEndian(prefix)];
                    await ReadExactlyAsync(from, body, _stop.Token);
                    if (k == tamper)
                    {
                        body[body.Length / 2] ^= 0x01;
                        Interlocked.Increment(ref _tampered);
                    }

                    await to.SendAsync(prefix);
                    await to.SendAsync(body);
                }
            }
            catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
            {
            }
            finally
            {
                Shut(to);
            }
        }

        private async Task RelayAsync(Socket from, Socket to)
        {
            var buffer = new byte[65_536];
            try
            {
                int n;
                while ((n = await from.ReceiveAsync(buffer, SocketFlags.None, _stop.Token)) > 0)
                {
                    await to.SendAsync(buffer.AsMemory(0, n));
                }
            }
            catch (Exception e) when (e is SocketException or OperationCanceledException or ObjectDisposedException)
            {
            }
            finally
            {
                Shut(to);
            }
        }

        private static void Shut(Socket s)
        {
            try
            {
                s.Shutdown(SocketShutdown.Both);
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException)
            {
            }
        }

        public async ValueTask DisposeAsync()
        {
            await _stop.CancelAsync();
            _listener.Dispose();
            lock (_sockets)
            {
                foreach (var s in _sockets)
                {
                    s.Dispose();
                }
            }

            await Task.WhenAll(_tasks).WaitAsync(TimeSpan.FromSeconds(5));
            _stop.Dispose();
        }
    }
}
