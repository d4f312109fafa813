using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// Flow status datagrams on their way out. A report goes straight into the transport when it has a free send slot; when
/// it has none (this node is also sending data as fast as its transport takes it), the report waits here, a datagram feed
/// the transport pulls in turn with the data feeds, so a sender's own partition report is not lost behind its data.
/// A newer report to the same place about the same sender replaces one still waiting (only the latest position
/// matters). At most <see cref="Capacity"/> wait; beyond that the oldest is dropped and counted (its member repeats it).
/// Core thread only; no allocation after construction.
/// </summary>
internal sealed class StatusOutbox : IDatagramFeed
{
    public const int Capacity = 64;
    private readonly IDatagramTransport _transport;
    private readonly IFeedChannel _feed;
    private readonly Pending[] _pending = new Pending[Capacity];
    private readonly byte[] _buffer = new byte[RegionWire.MaxStatusSize];
    private int _head;
    private int _count;

    public StatusOutbox(IDatagramTransport transport)
    {
        _transport = transport;
        _feed = transport.RegisterFeed(this);
    }

    /// <summary>Reports dropped because <see cref="Capacity"/> were already waiting.</summary>
    public long Dropped { get; private set; }

    /// <summary>Reports that had to wait for a send slot.</summary>
    public long Queued { get; private set; }

    public void Send(NetAddress to, in FlowStatus status)
    {
        if (_count == 0)
        {
            int length = RegionWire.WriteStatus(_buffer, status);
            if (_transport.TrySend(to, _buffer.AsSpan(0, length)))
            {
                return;
            }
        }

        Queued++;
        for (int i = 0; i < _count; i++)
        {
            ref var waiting = ref _pending[(_head + i) % Capacity];
            if (waiting.To == to && waiting.Status.Sender == status.Sender && waiting.Status.Region == status.Region
                && waiting.Status.Aggregate == status.Aggregate)
            {
                waiting.Status = status; // the newer report supersedes it
                return;
            }
        }

        if (_count == Capacity)
        {
            _head = (_head + 1) % Capacity;
            _count--;
            Dropped++;
        }

        _pending[(_head + _count) % Capacity] = new Pending(to, status);
        _count++;
        _feed.Signal();
    }

    public void Stop() => _feed.Dispose();

    int IDatagramFeed.Pull(Span<byte> slot, out NetAddress to)
    {
        if (_count == 0)
        {
            to = default;
            return 0;
        }

        ref var next = ref _pending[_head];
        to = next.To;
        int length = RegionWire.WriteStatus(slot, next.Status);
        _head = (_head + 1) % Capacity;
        _count--;
        return length;
    }

    private struct Pending(NetAddress to, FlowStatus status)
    {
        public NetAddress To = to;
        public FlowStatus Status = status;
    }
}
