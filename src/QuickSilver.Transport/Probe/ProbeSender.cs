using System.Buffers.Binary;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Probe;

/// <summary>
/// A flow-controlled multicast load generator for demos, benchmarks and transport tests (no loss recovery: that is
/// QSM's job). It multicasts numbered Raw packets from a pull feed and keeps at most <see cref="Window"/> datagrams
/// ahead of the slowest receiver's acknowledgement, so when the receivers' socket buffers can hold a window,
/// nothing is lost to buffer overflow. Core thread only.
/// </summary>
public sealed class ProbeSender : IDatagramFeed, IDatagramHandler
{
    private readonly NetAddress _group;
    private readonly int _payloadBytes;
    private readonly Dictionary<NetAddress, long> _acks = new();
    private readonly uint _senderId;
    private long _minAck;

    /// <param name="group">Multicast address (or a unicast address, for a single receiver) to send to.</param>
    /// <param name="total">Datagrams to send.</param>
    /// <param name="window">Datagrams allowed beyond the slowest receiver's acknowledgement.</param>
    /// <param name="payloadBytes">Datagram size including the probe header (at least <see cref="ProbeWire.MinSize"/>).</param>
    /// <param name="receivers">Number of receivers whose acknowledgements gate the window.</param>
    public ProbeSender(NetAddress group, long total, int window, int payloadBytes, int receivers, uint senderId = 1)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(total);
        ArgumentOutOfRangeException.ThrowIfLessThan(window, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(payloadBytes, ProbeWire.MinSize);
        ArgumentOutOfRangeException.ThrowIfLessThan(receivers, 1);
        _group = group;
        Total = total;
        Window = window;
        _payloadBytes = payloadBytes;
        Receivers = receivers;
        _senderId = senderId;
    }

    public long Total { get; private set; }

    public int Window { get; }

    public int Receivers { get; }

    /// <summary>Datagrams handed to the transport so far.</summary>
    public long Sent { get; private set; }

    /// <summary>The lowest count acknowledged by all receivers (0 until every receiver has acknowledged once).</summary>
    public long MinAcknowledged => _minAck;

    /// <summary>Sources whose acknowledgements a sender keeps at most for <paramref name="receivers"/> receivers: the
    /// receivers, and room for as many more (restarted receivers, forged sources); acknowledgements from further
    /// sources are ignored (<see cref="IgnoredAcks"/>), so a flood from many addresses cannot grow the sender.</summary>
    public static int MaxTrackedSources(int receivers) => (2 * receivers) + 16;

    /// <summary>Sources whose acknowledgements the sender keeps (at most <see cref="MaxTrackedSources"/>).</summary>
    public int TrackedSources => _acks.Count;

    /// <summary>Acknowledgements ignored because they came from a source beyond <see cref="MaxTrackedSources"/>.</summary>
    public long IgnoredAcks { get; private set; }

    /// <summary>Set by the owner after <see cref="IDatagramTransport.RegisterFeed"/>, so acknowledgements can re-activate the feed.</summary>
    public IFeedChannel? Channel { get; set; }

    /// <summary>Raises <see cref="Total"/> by <paramref name="more"/> datagrams and resumes sending. Core thread.</summary>
    public void Extend(long more)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(more);
        Total += more;
        Channel?.Signal();
    }

    public int Pull(Span<byte> buffer, out NetAddress to)
    {
        to = _group;
        if (Sent >= Total || Sent - _minAck >= Window)
        {
            return 0;
        }

        ProbeWire.WriteData(buffer[.._payloadBytes], _senderId, Sent);
        Sent++;
        return _payloadBytes;
    }

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (!ProbeWire.TryReadAck(datagram, out long count))
        {
            return;
        }

        if (!_acks.ContainsKey(from) && _acks.Count >= MaxTrackedSources(Receivers))
        {
            IgnoredAcks++;
            return;
        }

        // No receiver can have more than was sent: a count beyond it (forged, or from another run) must not open the window.
        count = Math.Min(count, Sent);
        _acks[from] = Math.Max(count, _acks.GetValueOrDefault(from));
        if (_acks.Count < Receivers)
        {
            return;
        }

        long min = long.MaxValue;
        foreach (var ack in _acks.Values)
        {
            min = Math.Min(min, ack);
        }

        if (min > _minAck)
        {
            _minAck = min;
            Channel?.Signal();
        }
    }
}

/// <summary>The probe's packets: packets of type 1 whose body starts with a 64-bit sequence number (data) or count (ack, flag 1).</summary>
public static class ProbeWire
{
    /// <summary>The probe's packet type (a load generator on its own endpoints, never on a protocol stack).</summary>
    public const PacketType Type = (PacketType)1;

    public const int MinSize = PacketHeader.Size + 8;
    private const ushort AckFlag = 1;

    public static void WriteData(Span<byte> datagram, uint sender, long sequence)
    {
        new PacketHeader(Type, sender, (ushort)datagram.Length).Write(datagram);
        BinaryPrimitives.WriteInt64LittleEndian(datagram[PacketHeader.Size..], sequence);
        datagram[MinSize..].Clear();
    }

    public static int WriteAck(Span<byte> datagram, uint sender, long count)
    {
        new PacketHeader(Type, sender, MinSize, AckFlag).Write(datagram);
        BinaryPrimitives.WriteInt64LittleEndian(datagram[PacketHeader.Size..], count);
        return MinSize;
    }

    public static bool TryReadData(ReadOnlySpan<byte> datagram, out long sequence)
    {
        sequence = -1;
        if (PacketHeader.TryRead(datagram, out var header) != WireError.None || header.Type != Type
            || header.Flags != 0 || datagram.Length < MinSize)
        {
            return false;
        }

        sequence = BinaryPrimitives.ReadInt64LittleEndian(datagram[PacketHeader.Size..]);
        return sequence >= 0;
    }

    public static bool TryReadAck(ReadOnlySpan<byte> datagram, out long count)
    {
        count = -1;
        if (PacketHeader.TryRead(datagram, out var header) != WireError.None || header.Type != Type
            || header.Flags != AckFlag || datagram.Length < MinSize)
        {
            return false;
        }

        count = BinaryPrimitives.ReadInt64LittleEndian(datagram[PacketHeader.Size..]);
        return count >= 0;
    }
}
