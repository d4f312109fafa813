using System.Net;

namespace QuickSilver.Compare.RawUdp;

/// <summary>
/// Options of the raw UDP pair: one multicast address per group (239.254.Tag.g) on <see cref="Port"/>, joined on
/// loopback only. No reliability: the blaster keeps at most <see cref="Window"/> datagrams beyond the slowest
/// receiver's acknowledged sequence (receivers ack every <see cref="AckEvery"/> datagrams), so loopback's socket
/// buffers are not simply overrun; whatever is lost stays lost and is reported.
/// </summary>
internal sealed record UdpPassOptions
{
    public int Receivers { get; init; } = 1;

    public int Groups { get; init; } = 1;

    public int Size { get; init; } = 100;

    /// <summary>Measured datagrams, sent after <see cref="Warmup"/> untimed ones (sequence numbers below
    /// <see cref="Warmup"/> are warm-up).</summary>
    public long Messages { get; init; } = 1000;

    public long Warmup { get; init; }

    /// <summary>Every datagram the blaster sends: warm-up and measured.</summary>
    public long Total => Warmup + Messages;

    public int Port { get; init; } = 47100;

    public byte Tag { get; init; } = 1;

    public int Window { get; init; } = 512;

    public int AckEvery => Math.Max(1, Window / 8);

    public TimeSpan Timeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>How long a receiver waits after its last datagram before it counts the rest as lost.</summary>
    public TimeSpan Idle { get; init; } = TimeSpan.FromSeconds(1);

    public void Validate()
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(Receivers, 1, nameof(Receivers));
        ArgumentOutOfRangeException.ThrowIfLessThan(Groups, 1, nameof(Groups));
        ArgumentOutOfRangeException.ThrowIfGreaterThan(Groups, 256, nameof(Groups));
        ArgumentOutOfRangeException.ThrowIfLessThan(Size, 8, nameof(Size));
        ArgumentOutOfRangeException.ThrowIfGreaterThan(Size, 65_000, nameof(Size));
        ArgumentOutOfRangeException.ThrowIfLessThan(Messages, 1, nameof(Messages));
        ArgumentOutOfRangeException.ThrowIfNegative(Warmup, nameof(Warmup));
        ArgumentOutOfRangeException.ThrowIfLessThan(Window, 1, nameof(Window));
    }

    public IPEndPoint Group(int index) => new(new IPAddress([239, 254, Tag, (byte)index]), Port);

    public string[] ToArgs() => RoleArgs.Make(("receivers", Receivers), ("groups", Groups), ("size", Size), ("messages", Messages),
        ("warmup", Warmup), ("port", Port), ("tag", Tag), ("window", Window), ("timeout", (int)Timeout.TotalSeconds));

    public static UdpPassOptions FromArgs(RoleArgs a) => new()
    {
        Receivers = a.Int("receivers", 1),
        Groups = a.Int("groups", 1),
        Size = a.Int("size", 100),
        Messages = a.Long("messages", 1000),
        Warmup = a.Long("warmup", 0),
        Port = a.Int("port", 47100),
        Tag = (byte)a.Int("tag", 1),
        Window = a.Int("window", 512),
        Timeout = TimeSpan.FromSeconds(a.Int("timeout", 30)),
    };
}
