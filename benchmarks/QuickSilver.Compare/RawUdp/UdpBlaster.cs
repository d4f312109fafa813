using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Compare.RawUdp;

/// <summary>The raw UDP blaster: waits for a hello from every receiver, then multicasts warm-up and then measured
/// datagrams (sequence numbers 0..Total-1; the first 8 bytes) round robin over the groups, never more than a window beyond the slowest receiver's ack. A window that makes no progress for
/// <see cref="StallLimit"/> is skipped (counted in <see cref="Summary.Stalls"/>), so a lost ack cannot hang it.</summary>
internal sealed class UdpBlaster : IDisposable
{
    private static readonly TimeSpan StallLimit = TimeSpan.FromMilliseconds(200);
    private readonly Socket _acks = new(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
    private readonly Dictionary<int, long> _acked = [];
    private readonly byte[] _ackBuffer = new byte[64];
    private long _minAcked;

    public UdpBlaster() => _acks.Bind(new IPEndPoint(IPAddress.Loopback, 0));

    public sealed record Summary(long Sent, long StartMicros, long MeasuredStartMicros, long EndMicros, bool ReceiversReady, int Stalls);

    /// <summary>Where receivers send hellos and acks.</summary>
    public IPEndPoint AckEndPoint => (IPEndPoint)_acks.LocalEndPoint!;

    public Summary Run(UdpPassOptions options, CancellationToken cancellationToken)
    {
        options.Validate();
        var deadline = DateTime.UtcNow + options.Timeout;
        bool ready = true;
        while (_acked.Count < options.Receivers && ready)
        {
            Drain(TimeSpan.FromMilliseconds(20));
            ready = DateTime.UtcNow < deadline && !cancellationToken.IsCancellationRequested;
        }

        using var send = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        send.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastTimeToLive, 1);
        send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
        send.SendBufferSize = 1 << 20;
        var groups = Enumerable.Range(0, options.Groups).Select(options.Group).ToArray();
        var payload = new byte[options.Size];
        long start = ResultLine.NowMicros();
        long seq = 0, measuredStart = 0;
        int stalls = 0;
        for (; ready && seq < options.Total && DateTime.UtcNow < deadline; seq++)
        {
            if (seq - _minAcked >= options.Window && !WaitForWindow(seq, options.Window))
            {
                stalls++;
            }

            if (seq == options.Warmup)
            {
                measuredStart = ResultLine.NowMicros();
            }

            BinaryPrimitives.WriteInt64LittleEndian(payload, seq);
            send.SendTo(payload, groups[seq % groups.Length]);
            if ((seq & 63) == 0)
            {
                Drain(TimeSpan.Zero);
            }
        }

        return new Summary(seq, start, measuredStart, ResultLine.NowMicros(), ready, stalls);
    }

    private bool WaitForWindow(long seq, int window)
    {
        var until = DateTime.UtcNow + StallLimit;
        while (seq - _minAcked >= window)
        {
            if (DateTime.UtcNow > until)
            {
                return false;
            }

            Drain(TimeSpan.FromMilliseconds(1));
        }

        return true;
    }

    /// <summary>Reads every ack already queued, waiting up to <paramref name="wait"/> for the first.</summary>
    private void Drain(TimeSpan wait)
    {
        if (!_acks.Poll(wait, SelectMode.SelectRead))
        {
            return;
        }

        while (_acks.Available > 0)
        {
            int n = _acks.Receive(_ackBuffer);
            if (n >= 12)
            {
                int id = BinaryPrimitives.ReadInt32LittleEndian(_ackBuffer);
                long highest = BinaryPrimitives.ReadInt64LittleEndian(_ackBuffer.AsSpan(4));
                _acked[id] = Math.Max(highest, _acked.GetValueOrDefault(id));
            }
        }

        _minAcked = _acked.Values.Min();
    }

    public void Dispose() => _acks.Dispose();
}
