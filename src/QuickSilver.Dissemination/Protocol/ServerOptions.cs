using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Scheduling;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>The dissemination server's options, with the seed's values where it gives them (Table 1).</summary>
public sealed record ServerOptions
{
    public PageOptions Pages { get; init; } = new();

    /// <summary>d: data channels, equal rate, each with a static disjoint subset of the pages (item i goes to
    /// channel i mod d). Seed's runs: 1.</summary>
    public int DataChannels { get; init; } = 1;

    /// <summary>The bandwidth cap of each data channel, header bytes included (seed: 10,000 B/s).</summary>
    public int ChannelBytesPerSecond { get; init; } = 10_000;

    public SchedulerKind Scheduler { get; init; } = SchedulerKind.RQ;

    /// <summary>How the proactive repair packets of a page are counted: <see cref="RedundancyMode.Adaptive"/> (the
    /// default) from the loss the clients report, bounded by <see cref="Redundancy"/>'s cap; or
    /// <see cref="RedundancyMode.Paper"/>, the seed's rule <see cref="Redundancy"/> as it stands (the simulation
    /// figures use it).</summary>
    public RedundancyMode RedundancyMode { get; init; } = RedundancyMode.Adaptive;

    /// <summary>The seed's rule (1 % per requesting client, capped at 120 %): the count in
    /// <see cref="RedundancyMode.Paper"/> mode, and its cap bounds <see cref="RedundancyMode.Adaptive"/>.</summary>
    public RedundancyRule Redundancy { get; init; } = RedundancyRule.Paper;

    /// <summary>The adaptive mode's options.</summary>
    public AdaptiveRedundancyOptions Adaptive { get; init; } = new();

    /// <summary>Time between the first announcement of a page and its first data packet, so clients can join the
    /// data channel (seed: "a delay"; not given).</summary>
    public TimeSpan AnnounceDelay { get; init; } = TimeSpan.FromMilliseconds(100);

    /// <summary>Announcement datagrams that carry each announcement (seed: "send the data redundantly").</summary>
    public int AnnounceCopies { get; init; } = 3;

    /// <summary>Gap between the copies.</summary>
    public TimeSpan AnnounceSpacing { get; init; } = TimeSpan.FromMilliseconds(20);

    /// <summary>An empty announcement goes out when the channel has been quiet this long (seed: "heartbeat").</summary>
    public TimeSpan HeartbeatInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>How far a data channel may fall behind its pacing schedule (its core busy) and still catch up in a
    /// burst; past it the channel slows to the rate its core achieves and announces pages at that rate
    /// (docs/dissemination.md, "Pacing to the achieved rate").</summary>
    public TimeSpan MaxSendLag { get; init; } = TimeSpan.FromMilliseconds(20);

    /// <summary>How long after a transmission ends a NAK for it is accepted.</summary>
    public TimeSpan NakWindow { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>For a batch distribution to a known set of clients: hold every data channel until this many clients
    /// have asked for pages (or <see cref="StartWaitMax"/> after the first asked), so a client that connects a moment
    /// later does not need pages sent again (udpcast's <c>--min-receivers</c>, uftp's registration). 0 (the default,
    /// the seed's open-ended service): start at the first request.</summary>
    public int StartWhenClients { get; init; }

    /// <summary>The longest <see cref="StartWhenClients"/> holds the channels, from the first request.</summary>
    public TimeSpan StartWaitMax { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>Connected clients at most; more are refused (their connection closed, counted).</summary>
    public int MaxClients { get; init; } = 10_000;

    public NetAddress AnnounceGroup { get; init; } = new(0xEFFF1101, 7170); // 239.255.17.1

    /// <summary>Data channel c is <see cref="DataGroupBase"/> with c added to the address's last byte(s).</summary>
    public NetAddress DataGroupBase { get; init; } = new(0xEFFF1110, 7171); // 239.255.17.16

    public NetAddress DataGroup(int channel) => new(DataGroupBase.Ip + (uint)channel, DataGroupBase.Port);

    /// <summary>Bytes of one data datagram: header and payload.</summary>
    public int DatagramBytes => Wire.DataHeaderBytes + Pages.PacketPayload;

    /// <summary>Time one data datagram takes at the channel's cap.</summary>
    public TimeSpan PacketInterval => TimeSpan.FromTicks(Math.Max(1, DatagramBytes * TimeSpan.TicksPerSecond / ChannelBytesPerSecond));

    /// <summary>Throws <see cref="ArgumentOutOfRangeException"/> naming the bad option.</summary>
    public void Validate()
    {
        ArgumentNullException.ThrowIfNull(Pages, nameof(Pages));
        Pages.Validate();
        ArgumentNullException.ThrowIfNull(Redundancy, nameof(Redundancy));
        Redundancy.Validate();
        ArgumentNullException.ThrowIfNull(Adaptive, nameof(Adaptive));
        Adaptive.Validate();
        Check(Enum.IsDefined(RedundancyMode), nameof(RedundancyMode), RedundancyMode, "Adaptive or Paper");
        Check(DataChannels >= 1 && DataChannels <= Wire.MaxChannels, nameof(DataChannels), DataChannels, $"between 1 and {Wire.MaxChannels}");
        Check(ChannelBytesPerSecond >= 1000, nameof(ChannelBytesPerSecond), ChannelBytesPerSecond, "at least 1000");
        Check(AnnounceDelay >= TimeSpan.Zero && AnnounceDelay <= TimeSpan.FromMinutes(1), nameof(AnnounceDelay), AnnounceDelay, "between 0 and 1 minute");
        Check(AnnounceCopies >= 1 && AnnounceCopies <= 16, nameof(AnnounceCopies), AnnounceCopies, "between 1 and 16");
        Check(AnnounceSpacing > TimeSpan.Zero, nameof(AnnounceSpacing), AnnounceSpacing, "positive");
        Check(HeartbeatInterval > TimeSpan.Zero, nameof(HeartbeatInterval), HeartbeatInterval, "positive");
        Check(NakWindow > TimeSpan.Zero, nameof(NakWindow), NakWindow, "positive");
        Check(MaxSendLag > TimeSpan.Zero && MaxSendLag <= TimeSpan.FromMinutes(1), nameof(MaxSendLag), MaxSendLag, "positive and at most 1 minute");
        Check(MaxClients >= 1, nameof(MaxClients), MaxClients, "at least 1");
        Check(StartWhenClients >= 0 && StartWhenClients <= MaxClients, nameof(StartWhenClients), StartWhenClients, "between 0 and MaxClients");
        Check(StartWaitMax >= TimeSpan.Zero && StartWaitMax <= TimeSpan.FromHours(1), nameof(StartWaitMax), StartWaitMax, "between 0 and 1 hour");
        Check(AnnounceGroup.IsMulticast, nameof(AnnounceGroup), AnnounceGroup, "an IPv4 multicast address");
        Check(DataGroupBase.IsMulticast && DataGroup(DataChannels - 1).IsMulticast, nameof(DataGroupBase), DataGroupBase, "an IPv4 multicast address with room for every channel");
    }

    private static void Check(bool ok, string name, object value, string what)
    {
        if (!ok)
        {
            throw new ArgumentOutOfRangeException(name, value, $"ServerOptions.{name} must be {what}, got {value}.");
        }
    }
}

/// <summary>How a page's proactive repair packets are counted (docs/dissemination.md, "The redundancy rule" and
/// "Adaptive redundancy").</summary>
public enum RedundancyMode
{
    /// <summary>From the clients' reported loss (<see cref="AdaptiveRedundancy"/>): none when nothing is lost.</summary>
    Adaptive,

    /// <summary>The seed's rule: ⌊0.01 · R · k⌋ capped at 1.2 · k, whatever the loss.</summary>
    Paper,
}

/// <summary>A client's options.</summary>
public sealed record ClientOptions
{
    /// <summary>Data channels the client can receive at once (its download capacity; seed §2.2, §3.2.1).</summary>
    public int Capacity { get; init; } = 255;

    /// <summary>A NAK waits a random delay up to this after the transmission's end (seed §3.3: against implosion).</summary>
    public TimeSpan NakDelayMax { get; init; } = TimeSpan.FromMilliseconds(200);

    /// <summary>Slack after a transmission's announced end before its NAK timer starts (reordering, latency).</summary>
    public TimeSpan EndGrace { get; init; } = TimeSpan.FromMilliseconds(50);

    /// <summary>With pages outstanding and nothing new for this long, the client sends its Want again (it may have
    /// missed every copy of an announcement; the server treats a Want as idempotent).</summary>
    public TimeSpan StallTimeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>Pages being assembled in memory at once (a buffer of two pages each); past it the oldest is spilled
    /// to the store (its received source packets written in place) where the store can hold incomplete pages, else
    /// dropped (counted) and NAKed as wholly lost.</summary>
    public int MaxPartialPages { get; init; } = 64;

    /// <summary>Spilled incomplete pages kept at once (about 600 bytes each besides their repair packets); past it
    /// the oldest is dropped (counted) and NAKed as wholly lost.</summary>
    public int MaxSpilledPages { get; init; } = 16_384;

    /// <summary>Bytes of repair packets kept in memory for spilled pages; past it the oldest spilled page is dropped.</summary>
    public long MaxSpilledRepairBytes { get; init; } = 16 << 20;

    /// <summary>A data channel with no page this client lacks due on it is left only after this long idle (or at once
    /// when its place is needed for another under <see cref="Capacity"/>): pages follow each other on a busy channel,
    /// and leaving between two loses what the socket had queued.</summary>
    public TimeSpan LeaveAfter { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>An alarm that fires later than this after its deadline means the client's core was held up: NAKs wait
    /// this long again, so the datagrams that arrived meanwhile are read first (real cores only; the simulator's
    /// alarms are on time).</summary>
    public TimeSpan LateAlarm { get; init; } = TimeSpan.FromMilliseconds(20);

    /// <summary>The most a channel's lag behind its announced schedule (measured from its data packets: a busy server
    /// or client core) postpones the client's NAKs and leaving the channel.</summary>
    public TimeSpan MaxScheduleLag { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>Transmissions tracked at once (announced or seen, not yet ended); more are ignored (counted).</summary>
    public int MaxTracked { get; init; } = 1024;

    /// <summary>The host's core sleeps this long after a round that received datagrams before it reads again
    /// (<c>CoreOptions.ReceiveCoalescing</c>), so a burst is read in one batch rather than each datagram waking the
    /// client: on the testbed it cut the four clients' CPU by about 38 % and the server's by about 25 % (the
    /// server's sends wake fewer sleeping receivers) (docs/dissemination.md, "Receive coalescing"). A bulk transfer
    /// does not mind the delay; 0 wakes per datagram. Real cores only (the simulator delivers in virtual time).</summary>
    public TimeSpan ReceiveCoalescing { get; init; } = TimeSpan.FromMilliseconds(1);

    public void Validate()
    {
        Check(Capacity >= 1 && Capacity <= 255, nameof(Capacity), Capacity, "between 1 and 255");
        Check(NakDelayMax >= TimeSpan.Zero, nameof(NakDelayMax), NakDelayMax, "non-negative");
        Check(EndGrace >= TimeSpan.Zero, nameof(EndGrace), EndGrace, "non-negative");
        Check(StallTimeout > TimeSpan.Zero, nameof(StallTimeout), StallTimeout, "positive");
        Check(MaxPartialPages >= 1, nameof(MaxPartialPages), MaxPartialPages, "at least 1");
        Check(MaxSpilledPages >= 0, nameof(MaxSpilledPages), MaxSpilledPages, "non-negative");
        Check(MaxSpilledRepairBytes >= 0, nameof(MaxSpilledRepairBytes), MaxSpilledRepairBytes, "non-negative");
        Check(LeaveAfter >= TimeSpan.Zero && LeaveAfter <= TimeSpan.FromMinutes(10), nameof(LeaveAfter), LeaveAfter, "between 0 and 10 minutes");
        Check(LateAlarm > TimeSpan.Zero && LateAlarm <= TimeSpan.FromMinutes(1), nameof(LateAlarm), LateAlarm, "positive and at most 1 minute");
        Check(MaxScheduleLag >= TimeSpan.Zero && MaxScheduleLag <= TimeSpan.FromMinutes(1), nameof(MaxScheduleLag), MaxScheduleLag, "between 0 and 1 minute");
        Check(MaxTracked >= 1, nameof(MaxTracked), MaxTracked, "at least 1");
        Check(ReceiveCoalescing >= TimeSpan.Zero && ReceiveCoalescing <= TimeSpan.FromMilliseconds(100), nameof(ReceiveCoalescing), ReceiveCoalescing, "between 0 and 100 ms");
    }

    private static void Check(bool ok, string name, object value, string what)
    {
        if (!ok)
        {
            throw new ArgumentOutOfRangeException(name, value, $"ClientOptions.{name} must be {what}, got {value}.");
        }
    }
}

/// <summary>The server's side of the request channels (TCP in the real path, a simulated in-order pipe in tests).</summary>
public interface IClientLinks
{
    void Send(int client, ReadOnlySpan<byte> frame);

    void Close(int client);
}

/// <summary>A client's side of its request channel.</summary>
public interface IRequestLink
{
    void Send(ReadOnlySpan<byte> frame);
}
