using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Wire;

/// <summary>
/// A datagram feed that packs messages for one destination (QSM §2.5's batching component): each pull takes messages
/// from the upstream feed, frames them with their codec and packs as many as fit into one Batch datagram. A message
/// that does not fit waits for the next datagram; none is lost. A message too large for any datagram is refused at
/// <see cref="IFeed{T}"/>'s side by <see cref="MaxMessageBytes"/> (callers check before queueing).
/// </summary>
public sealed class BatchingFeed<T> : IDatagramFeed
{
    private readonly IFeed<T> _upstream;
    private readonly IWireCodec<T> _codec;
    private readonly NetAddress _destination;
    private readonly uint _sender;
    private readonly ScatterGatherList _message = new();
    private readonly byte[] _frame;
    private bool _hasHeld;
    private T _held = default!;

    public BatchingFeed(IFeed<T> upstream, IWireCodec<T> codec, NetAddress destination, uint sender, int maxDatagramSize)
    {
        _upstream = upstream ?? throw new ArgumentNullException(nameof(upstream));
        _codec = codec ?? throw new ArgumentNullException(nameof(codec));
        _destination = destination;
        _sender = sender;
        _frame = new byte[maxDatagramSize];
        MaxMessageBytes = maxDatagramSize - PacketHeader.Size - BatchWriter.FramePrefix - ClassRegistry.FrameHeaderSize;
    }

    /// <summary>The largest encoded message (codec output) that fits in a batch on its own.</summary>
    public int MaxMessageBytes { get; }

    /// <summary>Messages packed so far.</summary>
    public long Messages { get; private set; }

    /// <summary>Datagrams produced so far.</summary>
    public long Datagrams { get; private set; }

    public int Pull(Span<byte> buffer, out NetAddress to)
    {
        to = _destination;
        var batch = new BatchWriter(buffer, _sender);
        while (true)
        {
            T item;
            if (_hasHeld)
            {
                item = _held;
            }
            else if (!_upstream.TryPull(out item))
            {
                break;
            }

            _message.Clear();
            ClassRegistry.WriteFrame(_codec, item, _message);
            if (_message.TotalLength > MaxMessageBytes + ClassRegistry.FrameHeaderSize)
            {
                throw new InvalidOperationException(
                    $"A {typeof(T).Name} of {_message.TotalLength} bytes cannot fit in one datagram (at most {MaxMessageBytes + ClassRegistry.FrameHeaderSize}).");
            }

            int length = _message.CopyTo(_frame);
            if (!batch.TryAppend(_frame.AsSpan(0, length)))
            {
                _held = item; // the next datagram starts with it
                _hasHeld = true;
                break;
            }

            _hasHeld = false;
            _held = default!;
            Messages++;
        }

        int datagram = batch.Finish();
        if (datagram > 0)
        {
            Datagrams++;
        }

        return datagram;
    }
}
