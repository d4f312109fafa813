using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Runtime.CompilerServices;
using System.Threading.Channels;
using QuickSilver.Core.Feeds;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Group;

namespace QuickSilver;

/// <summary>A message delivered in a group, as <see cref="QuickSilverGroup.ReadAllAsync"/> yields it: the sending node's
/// id, its per-sender group sequence, and a copy of the payload the application owns.</summary>
public sealed record GroupMessage(uint Sender, ulong Sequence, byte[] Payload);

/// <summary>
/// Receives a group message on the node's core thread, without a copy: <paramref name="payload"/> lies in the node's
/// receive buffer and is valid only during the call (copy what must outlive it). Keep it short: the core thread runs
/// the whole protocol. <paramref name="sender"/> is the sending node's id and <paramref name="sequence"/> its
/// per-sender sequence number in the group (1, 2, 3, … in order; a sender that left the group and joined it again
/// numbers on above every number it used before, so the sequence may jump there).
/// </summary>
public delegate void GroupMessageHandler(uint sender, ulong sequence, ReadOnlySpan<byte> payload);

/// <summary>
/// A group (topic) this node has joined. Publishing is the push interface: <see cref="TryPublish"/> refuses and
/// <see cref="PublishAsync"/> waits when the node's publish buffer for the group is full. Messages arrive through
/// <see cref="OnMessage"/> (called on the core thread with a span over the receive buffer: no copy, no allocation; keep
/// it short) and, unless <see cref="QueueMessages"/> is off, through <see cref="ReadAllAsync"/> (for ordinary
/// application code: a copy per message, queued up to <see cref="QuickSilverNodeOptions.ReceiveBuffer"/>; while the
/// queue is full, delivery in the group pauses rather than drop or grow). Thread-safe.
/// </summary>
// SemaphoreSlim needs disposing only when its AvailableWaitHandle is used, which it never is here.
#pragma warning disable CA1001
public sealed class QuickSilverGroup : IGroupOwner
#pragma warning restore CA1001
{
    private readonly QuickSilverNode _node;
    private readonly SemaphoreSlim _space;
    // Bounded by _space (PublishBuffer), not by its own size: a ConcurrentQueue grows in segments as messages wait and
    // holds one small segment when they do not. A ring of PublishBuffer slots (393 KB at the default, every slot written
    // when made) per group cost a node in 1,024 groups 400 MB (docs/qsm.md, "The group layer").
    private readonly ConcurrentQueue<ReadOnlyMemory<byte>> _published = new();
    private int _wakePosted;
    private readonly Channel<GroupMessage> _messages;
    private readonly TaskCompletionSource _ready = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly int _receiveBuffer;
    private readonly int _resumeAt;
    private long _delivered;
    private long _skipped;
    private int _queued;  // messages in _messages: raised by the core before it writes, lowered by a reader after it reads
    private int _paused;  // 1 while the group layer holds this group's packets until a reader drains to _resumeAt
    private long _pauses;
    private long _publishesRefused;
    private long _publishWaits;
    private IFeed<ReadOnlyMemory<byte>>? _feed;
    private volatile bool _left;
    private volatile bool _queueMessages = true;
    private readonly bool _tracing;

    internal QuickSilverGroup(QuickSilverNode node, string name, QuickSilverNodeOptions options, GroupOptions groupOptions)
    {
        _node = node;
        Name = name;
        Options = groupOptions;
        MaxMessageBytes = node.MaxMessageBytes;
        _space = new SemaphoreSlim(options.PublishBuffer, options.PublishBuffer);
        _receiveBuffer = options.ReceiveBuffer;
        _resumeAt = options.ReceiveBuffer / 2;
        _tracing = options.Tracing;

        // The true capacity: the bound plus one packet's records, since a packet the group layer accepts is delivered
        // whole. The group layer stops offering packets once the bound is reached, so a write never finds it full.
        _messages = Channel.CreateBounded<GroupMessage>(new BoundedChannelOptions(options.ReceiveBuffer + node.Groups.MaxRecordsPerPacket)
        {
            SingleWriter = true,
            FullMode = BoundedChannelFullMode.Wait,
        });
    }

    /// <summary>The group's name (at most <see cref="QuickSilverNode.MaxGroupNameBytes"/> UTF-8 bytes).</summary>
    public string Name { get; }

    /// <summary>The options the group was joined with: its transport (QSM or AER) and, for AER, its session.</summary>
    public GroupOptions Options { get; }

    /// <summary>How the group's messages travel: <see cref="GroupTransport.Qsm"/> or <see cref="GroupTransport.Aer"/>.</summary>
    public GroupTransport Transport => Options.Transport;

    /// <summary>The largest message this group carries, in bytes (a QSM group: the node's largest group message; an AER
    /// group: the datagram less AER's data header).</summary>
    public int MaxMessageBytes { get; internal set; }

    /// <summary>The latest group view this node received (QSM groups; an AER group has none: null).</summary>
    public GroupView? View { get; private set; }

    /// <summary>Messages delivered to this node in this group so far.</summary>
    public long Delivered => Volatile.Read(ref _delivered);

    /// <summary>Messages this node will never deliver in this group: a sender told it to skip ahead because it had held
    /// that sender back for <c>RegionOptions.LaggardTimeout</c> (only with <c>RegionOptions.SlowReceivers =
    /// SkipAhead</c>; with the default, back-pressure, it stays 0 and nothing is ever skipped). See docs/qsm.md, "Slow
    /// receivers".</summary>
    public long SkippedMessages => Interlocked.Read(ref _skipped);

    /// <summary>Called on the core thread for every message, before it is queued for <see cref="ReadAllAsync"/>, with a
    /// span valid only during the call (see <see cref="GroupMessageHandler"/>). Allocates nothing; with
    /// <see cref="QueueMessages"/> off it is the whole receive path.</summary>
    public GroupMessageHandler? OnMessage { get; set; }

    /// <summary>Raised (on the core thread) when a new view of the group arrives.</summary>
    public event Action<GroupView>? ViewChanged;

    /// <summary>Whether to queue messages for <see cref="ReadAllAsync"/> (on by default); turn off when only
    /// <see cref="OnMessage"/> is used: then nothing is copied or queued, and delivery never pauses for this group.</summary>
    public bool QueueMessages
    {
        get => _queueMessages;
        set
        {
            _queueMessages = value;
            if (!value && Interlocked.CompareExchange(ref _paused, 0, 1) == 1)
            {
                PostResume(); // nobody may read the queue any more: do not leave delivery waiting for it
            }
        }
    }

    /// <summary>Messages waiting in the queue for <see cref="ReadAllAsync"/>.</summary>
    public int QueuedMessages => Math.Max(0, Volatile.Read(ref _queued));

    /// <summary>Times the queue reached <see cref="QuickSilverNodeOptions.ReceiveBuffer"/> and delivery in this group
    /// paused until a reader had taken half of it.</summary>
    public long DeliveryPauses => Interlocked.Read(ref _pauses);

    internal NodeGroup? State { get; set; }

    /// <summary>The AER session of an AER group, set on the core thread when it is joined.</summary>
    internal AerGroupSession? Aer { get; set; }

    /// <summary>An AER group's role is running: <see cref="QuickSilverNode.JoinGroupAsync(string, GroupOptions, CancellationToken)"/>
    /// returns (an AER group has no view to wait for).</summary>
    internal void OnAerJoined() => _ready.TrySetResult();

    internal Task Ready => _ready.Task;

    /// <summary>Queues <paramref name="message"/> for the group; false when the publish buffer is full (counted in
    /// <see cref="PublishesRefused"/>).</summary>
    public bool TryPublish(ReadOnlySpan<byte> message)
    {
        Check(message.Length, nameof(message));
        if (!_space.Wait(0))
        {
            Interlocked.Increment(ref _publishesRefused);
            return false;
        }

        using var activity = QuickSilverTelemetry.Start(_tracing, "qs.publish", System.Diagnostics.ActivityKind.Producer, Name, message.Length);
        Post(message);
        return true;
    }

    /// <summary>Queues <paramref name="message"/> for the group, waiting for room in the publish buffer.</summary>
    public async ValueTask PublishAsync(ReadOnlyMemory<byte> message, CancellationToken cancellationToken = default)
    {
        Check(message.Length, nameof(message));
        using var activity = QuickSilverTelemetry.Start(_tracing, "qs.publish", System.Diagnostics.ActivityKind.Producer, Name, message.Length);
        if (!_space.Wait(0, CancellationToken.None))
        {
            Interlocked.Increment(ref _publishWaits); // the publish buffer is full: wait for room (back-pressure)
            await _space.WaitAsync(cancellationToken).ConfigureAwait(false);
        }

        Post(message.Span);
    }

    /// <summary>Times <see cref="TryPublish"/> refused a message because the publish buffer
    /// (<see cref="QuickSilverNodeOptions.PublishBuffer"/>) was full.</summary>
    public long PublishesRefused => Interlocked.Read(ref _publishesRefused);

    /// <summary>Times <see cref="PublishAsync"/> found the publish buffer full and waited for room.</summary>
    public long PublishWaits => Interlocked.Read(ref _publishWaits);

    /// <summary>Times a region asked this group for its next message while the group's outbox
    /// (<c>NodeGroup.OutboxCapacity</c>, 4,096 numbered messages not yet written by every region of the group) was full:
    /// the fastest region waits for the slowest (back-pressure to the publisher). Written on the core thread.</summary>
    public long OutboxFull => State is { } state ? Volatile.Read(ref state.OutboxFullCount) : 0;

    /// <summary>
    /// Registers the pull interface, the fast path (§2.5): the node calls <paramref name="feed"/> on its core thread
    /// whenever every region of the group can take another message, until the feed returns false ("nothing now"); it
    /// is not called again until the returned channel is signalled (<see cref="IFeedChannel.Signal"/>, callable from any
    /// thread). Items larger than the largest group message are dropped and counted. One feed per group.
    /// </summary>
    public IFeedChannel RegisterFeed(IFeed<ReadOnlyMemory<byte>> feed)
    {
        ArgumentNullException.ThrowIfNull(feed);
        Check(-1, nameof(feed));
        if (Interlocked.CompareExchange(ref _feed, feed, null) is not null)
        {
            throw new InvalidOperationException($"Group '{Name}' already has a feed.");
        }

        var channel = new GroupFeedChannel(this);
        _node.SetFeed(this, feed);
        return channel;
    }

    /// <summary>The group's messages, in per-sender order, until the group is left (one reader at a time is the usual use;
    /// several share the messages). A reader that falls <see cref="QuickSilverNodeOptions.ReceiveBuffer"/> messages
    /// behind pauses delivery in the group until it has taken half of them: nothing is lost, and the node reports the
    /// lag to the region (docs/qsm.md, "Receive buffering").</summary>
    public async IAsyncEnumerable<GroupMessage> ReadAllAsync([EnumeratorCancellation] CancellationToken cancellationToken = default)
    {
        var reader = _messages.Reader;
        while (await reader.WaitToReadAsync(cancellationToken).ConfigureAwait(false))
        {
            while (reader.TryRead(out var message))
            {
                Taken();
                yield return message;
            }
        }
    }

    /// <summary>Leaves the group. Publishing afterwards throws <see cref="InvalidOperationException"/>.</summary>
    public Task LeaveAsync() => _node.LeaveAsync(this);

    /// <summary>The misuse checks of every publishing call; <paramref name="length"/> -1: a feed (no message yet).</summary>
    private void Check(int length, string paramName)
    {
        if (_left)
        {
            throw new InvalidOperationException($"This node has left group '{Name}'; it cannot publish in it.");
        }

        if (Options.Aer is { } aer)
        {
            if (Aer is { IsSource: false })
            {
                throw new InvalidOperationException(
                    $"Group '{Name}' is an AER group whose only publisher is its source, {aer.Source} (AerGroupOptions.Source); this node ({_node.Address}) is a receiver.");
            }

            if (length == 0)
            {
                throw new ArgumentException($"AER group '{Name}' carries messages of 1 to {MaxMessageBytes} bytes; an empty message cannot be sent.", paramName);
            }
        }

        if (length > MaxMessageBytes)
        {
            throw new ArgumentException($"A message of {length} bytes exceeds the largest message of group '{Name}', {MaxMessageBytes} bytes.", paramName);
        }
    }

    /// <summary>Copies the message into a pooled buffer, queues it for the core, and wakes the core once per burst
    /// (no allocation per message in steady state: the buffer returns to the pool when every region has sent it).</summary>
    private void Post(ReadOnlySpan<byte> message)
    {
        var buffer = _node.PublishPool.Rent(Math.Max(1, message.Length));
        message.CopyTo(buffer);
        _published.Enqueue(new ReadOnlyMemory<byte>(buffer, 0, message.Length));

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
        if (Aer is { } aer)
        {
            aer.Signal();
        }
        else if (State is { } state)
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

    void IGroupOwner.OnSkipped(uint sender, ulong sequence) => Interlocked.Increment(ref _skipped);

    bool IGroupOwner.Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload)
    {
        Volatile.Write(ref _delivered, _delivered + 1); // the core thread is its only writer: no locked instruction per message
        using var activity = QuickSilverTelemetry.Start(_tracing, "qs.deliver", System.Diagnostics.ActivityKind.Consumer, Name, payload.Length);
        OnMessage?.Invoke(sender, sequence, payload);
        if (!_queueMessages)
        {
            return true;
        }

        int queued = Interlocked.Increment(ref _queued);
        if (!_messages.Writer.TryWrite(new GroupMessage(sender, sequence, payload.ToArray())))
        {
            // Only once the group was left (the queue is complete): while it is in use the group layer stops offering
            // packets at the bound, and the channel's capacity has room for the rest of the packet that reached it.
            System.Diagnostics.Debug.Assert(_left, "a group's receive queue was full although delivery is gated");
            Interlocked.Decrement(ref _queued);
            return true;
        }

        return queued < _receiveBuffer || !Pause();
    }

    /// <summary>Core thread, the queue at its bound: marks the group paused, unless a reader drained the queue meanwhile.
    /// True: the group layer must hold the group's packets, and a reader will post the resume.</summary>
    private bool Pause()
    {
        // Dekker-style with Taken(): each side writes its variable with a full fence, then reads the other's. Either this
        // thread sees the reader's drain and takes the pause back, or the reader sees the pause and posts the resume.
        if (Interlocked.Exchange(ref _paused, 1) == 1)
        {
            return true; // paused already (more records of the packet that filled the queue)
        }

        if (Volatile.Read(ref _queued) <= _resumeAt && Interlocked.CompareExchange(ref _paused, 0, 1) == 1)
        {
            return false;
        }

        Interlocked.Increment(ref _pauses);
        return true;
    }

    /// <summary>A reader took a message: below the low-water mark, a paused group is resumed (once: the CAS).</summary>
    private void Taken()
    {
        if (Interlocked.Decrement(ref _queued) <= _resumeAt && Volatile.Read(ref _paused) == 1
            && Interlocked.CompareExchange(ref _paused, 0, 1) == 1)
        {
            PostResume();
        }
    }

    /// <summary>The downcall that tells the group layer this group has room: the node re-offers its held packets.</summary>
    private void PostResume()
    {
        var core = _node.Core;
        var spin = default(SpinWait);
        while (!core.TryPost(static state => ((QuickSilverGroup)state!).ResumeOnCore(), this))
        {
            if (core.Completion.IsCompleted)
            {
                return;
            }

            spin.SpinOnce();
        }
    }

    private void ResumeOnCore()
    {
        if (Aer is { } aer)
        {
            aer.Resume();
        }
        else if (State is { } state)
        {
            _node.Groups.ResumeDelivery(state);
        }
    }

    void IGroupOwner.OnJoinRefused(GmsRefusedException refusal, int discarded)
    {
        // JoinGroupAsync throws it; a group that was in already (refused when re-joined after losing the GMS) ends, and
        // ReadAllAsync throws it.
        _ready.TrySetException(refusal);
        _messages.Writer.TryComplete(refusal);
        ((IGroupOwner)this).OnLeft(discarded);
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
