using System.Runtime.InteropServices;
using System.Threading.Channels;
using QuickSilver.Core.Downcalls;
using QuickSilver.Core.Feeds;
using QuickSilver.Membership;
using QuickSilver.Qsm.Group;

namespace QuickSilver;

/// <summary>A message delivered in a group: the sending node's id, its per-sender group sequence, and the payload.</summary>
public sealed record GroupMessage(uint Sender, ulong Sequence, byte[] Payload);

/// <summary>
/// A group (topic) this node has joined. Publishing is the push interface: <see cref="TryPublish"/> refuses and
/// <see cref="PublishAsync"/> waits when the node's publish buffer for the group is full. Messages arrive through
/// <see cref="ReadAllAsync"/> (for ordinary application code) or <see cref="OnMessage"/> (called on the core thread:
/// keep it short). Thread-safe.
/// </summary>
// SemaphoreSlim needs disposing only when its AvailableWaitHandle is used, which it never is here.
#pragma warning disable CA1001
public sealed class QuickSilverGroup : IGroupOwner
#pragma warning restore CA1001
{
    private readonly QuickSilverNode _node;
    private readonly SemaphoreSlim _space;
    private readonly BoundedMpscQueue<ReadOnlyMemory<byte>> _published;
    private int _wakePosted;
    private readonly Channel<GroupMessage> _messages = Channel.CreateUnbounded<GroupMessage>(new UnboundedChannelOptions { SingleWriter = true });
    private readonly TaskCompletionSource _ready = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private long _delivered;
    private IFeed<ReadOnlyMemory<byte>>? _feed;
    private volatile bool _left;

    internal QuickSilverGroup(QuickSilverNode node, string name, int buffer)
    {
        _node = node;
        Name = name;
        _space = new SemaphoreSlim(buffer, buffer);
        _published = new BoundedMpscQueue<ReadOnlyMemory<byte>>(buffer); // never fuller than the semaphore allows
    }

    public string Name { get; }

    /// <summary>The latest group view this node received.</summary>
    public GroupView? View { get; private set; }

    /// <summary>Messages delivered to this node in this group so far.</summary>
    public long Delivered => Interlocked.Read(ref _delivered);

    /// <summary>Called on the core thread for every message, before it is queued for <see cref="ReadAllAsync"/>.</summary>
    public Action<GroupMessage>? OnMessage { get; set; }

    /// <summary>Raised (on the core thread) when a new view of the group arrives.</summary>
    public event Action<GroupView>? ViewChanged;

    /// <summary>Whether to queue messages for <see cref="ReadAllAsync"/>; turn off when only <see cref="OnMessage"/> is used.</summary>
    public bool QueueMessages { get; set; } = true;

    internal NodeGroup? State { get; set; }

    internal Task Ready => _ready.Task;

    /// <summary>Queues <paramref name="message"/> for the group; false when the publish buffer is full.</summary>
    public bool TryPublish(ReadOnlySpan<byte> message)
    {
        Check(message.Length, nameof(message));
        if (!_space.Wait(0))
        {
            return false;
        }

        Post(message);
        return true;
    }

    /// <summary>Queues <paramref name="message"/> for the group, waiting for room in the publish buffer.</summary>
    public async ValueTask PublishAsync(ReadOnlyMemory<byte> message, CancellationToken cancellationToken = default)
    {
        Check(message.Length, nameof(message));
        await _space.WaitAsync(cancellationToken).ConfigureAwait(false);
        Post(message.Span);
    }

    /// <summary>
    /// Registers the pull interface, the fast path (§2.5): the node calls <paramref name="feed"/> on its core thread
    /// whenever every region of the group can take another message, until the feed returns false ("nothing now"); it
    /// is not called again until the returned channel is signalled (<see cref="IFeedChannel.Signal"/>, callable from any
    /// thread). Items larger than the largest group message are dropped and counted. One feed per group.
    /// </summary>
    public IFeedChannel RegisterFeed(IFeed<ReadOnlyMemory<byte>> feed)
    {
        ArgumentNullException.ThrowIfNull(feed);
        Check(0, nameof(feed));
        if (Interlocked.CompareExchange(ref _feed, feed, null) is not null)
        {
            throw new InvalidOperationException($"Group '{Name}' already has a feed.");
        }

        var channel = new GroupFeedChannel(this);
        _node.SetFeed(this, feed);
        return channel;
    }

    /// <summary>The group's messages, in per-sender order, until the group is left or the node stops.</summary>
    public IAsyncEnumerable<GroupMessage> ReadAllAsync(CancellationToken cancellationToken = default)
        => _messages.Reader.ReadAllAsync(cancellationToken);

    /// <summary>Leaves the group. Publishing afterwards throws <see cref="InvalidOperationException"/>.</summary>
    public Task LeaveAsync() => _node.LeaveAsync(this);

    private void Check(int length, string paramName)
    {
        if (_left)
        {
            throw new InvalidOperationException($"This node has left group '{Name}'; it cannot publish in it.");
        }

        if (length > _node.MaxMessageBytes)
        {
            throw new ArgumentException($"A message of {length} bytes exceeds the largest group message, {_node.MaxMessageBytes} bytes.", paramName);
        }
    }

    /// <summary>Copies the message into a pooled buffer, queues it for the core, and wakes the core once per burst
    /// (no allocation per message in steady state: the buffer returns to the pool when every region has sent it).</summary>
    private void Post(ReadOnlySpan<byte> message)
    {
        var buffer = _node.PublishPool.Rent(Math.Max(1, message.Length));
        message.CopyTo(buffer);
        if (!_published.TryEnqueue(new ReadOnlyMemory<byte>(buffer, 0, message.Length)))
        {
            _node.PublishPool.Return(buffer);
            _space.Release();
            throw new InvalidOperationException("The publish queue is full although the publish buffer had room (a bug).");
        }

        if (Interlocked.CompareExchange(ref _wakePosted, 1, 0) == 0 && !_node.PostPublished(this))
        {
            throw new InvalidOperationException("The node has stopped.");
        }
    }

    /// <summary>On the core thread, after a wake-up: let the group layer pull what was published. Reset before the pull,
    /// so a message queued after it posts a new wake-up.</summary>
    internal void OnPublishedWake()
    {
        Volatile.Write(ref _wakePosted, 0);
        if (State is { } state)
        {
            _node.Groups.SignalPublished(state);
        }
    }

    // Core-thread callbacks from the group layer.
    bool IGroupOwner.TryTakePublished(out ReadOnlyMemory<byte> message) => _published.TryDequeue(out message);

    void IGroupOwner.OnSent(ReadOnlyMemory<byte> message)
    {
        if (MemoryMarshal.TryGetArray(message, out var segment) && segment.Array is { Length: > 0 } array)
        {
            _node.PublishPool.Return(array);
        }

        _space.Release();
    }

    void IGroupOwner.OnViewInstalled(GroupView view)
    {
        View = view;
        _ready.TrySetResult();
        ViewChanged?.Invoke(view);
    }

    void IGroupOwner.Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload)
    {
        Interlocked.Increment(ref _delivered);
        var message = new GroupMessage(sender, sequence, payload.ToArray());
        OnMessage?.Invoke(message);
        if (QueueMessages)
        {
            _messages.Writer.TryWrite(message);
        }
    }

    void IGroupOwner.OnLeft(int discarded)
    {
        _left = true;
        if (discarded > 0)
        {
            _space.Release(discarded);
        }

        while (_published.TryDequeue(out var unsent))
        {
            ((IGroupOwner)this).OnSent(unsent); // never sent: the buffer goes back and the slot frees
        }

        _messages.Writer.TryComplete();
    }

    private sealed class GroupFeedChannel(QuickSilverGroup group) : IFeedChannel
    {
        private volatile bool _disposed;

        public bool IsActive => !_disposed && !group._left;

        public void Signal()
        {
            if (!_disposed)
            {
                group._node.SignalFeed(group);
            }
        }

        public void Dispose()
        {
            _disposed = true;
            group._node.SetFeed(group, null);
        }
    }
}
