using QuickSilver.Aer;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Group;

namespace QuickSilver;

/// <summary>
/// An AER group on the core thread: binds a group's owner (<see cref="QuickSilverGroup"/>, or the simulation's recording
/// group) to this node's role in one AER session, as the QSM group layer binds it to regions. On the source it is the
/// session's <see cref="IAerFeed"/>: each pull takes the next published message, or else the next item of the
/// application's pull feed, and frees its publish slot once it is in a packet. On a receiver it hands the session's
/// in-order payloads to the owner (sender 0, sequence from 1) and holds delivery (<see cref="AerReceiver.Hold"/>) while
/// the owner's queue is full, until <see cref="Resume"/>. Core thread only.
/// </summary>
internal sealed class AerGroupSession : IAerFeed
{
    /// <summary>The sender id an AER group reports: AER names nodes by address, and a session has one source
    /// (<see cref="AerGroupOptions.Source"/>).</summary>
    public const uint SourceSender = 0;

    /// <summary>Empty or oversized feed items one pull drops before it yields (a feed of nothing but bad items cannot
    /// hold the core).</summary>
    private const int MaxDropsPerPull = 1024;

    private readonly AerLayer _layer;
    private readonly IGroupOwner _owner;
    private AerSender? _sender;
    private AerReceiver? _receiver;

    private AerGroupSession(AerLayer layer, string name, AerGroupOptions options, IGroupOwner owner, NetAddress local, int maxDatagramSize)
    {
        _layer = layer;
        _owner = owner;
        Name = name;
        Options = options;
        IsSource = options.Source == local;
        MaxMessageBytes = maxDatagramSize - AerWire.DataHeaderSize;
    }

    public string Name { get; }

    public AerGroupOptions Options { get; }

    /// <summary>Whether this node is the session's source (its address is <see cref="AerGroupOptions.Source"/>): the
    /// group's only publisher.</summary>
    public bool IsSource { get; }

    /// <summary>The largest message: the stack's datagram less AER's data header.</summary>
    public int MaxMessageBytes { get; }

    /// <summary>The application's pull feed (source only), or null.</summary>
    public IFeed<ReadOnlyMemory<byte>>? Feed { get; set; }

    /// <summary>Feed items (and queued messages) dropped because they were empty or larger than <see cref="MaxMessageBytes"/>.</summary>
    public long DroppedFeedItems { get; private set; }

    /// <summary>The source role, on the source.</summary>
    public AerSender? Sender => _sender;

    /// <summary>The receiver role, on every other member.</summary>
    public AerReceiver? Receiver => _receiver;

    /// <summary>Makes this node's role in the session (source or receiver) and starts it.</summary>
    public static AerGroupSession Start(AerLayer layer, string name, AerGroupOptions options, IGroupOwner owner, NetAddress local, int maxDatagramSize)
    {
        var session = new AerGroupSession(layer, name, options, owner, local, maxDatagramSize);
        if (session.IsSource)
        {
            session._sender = layer.AddSender(options.Session, options.Group, session, options.Children.Count > 0 ? options.Children : null);
        }
        else
        {
            session._receiver = layer.AddReceiver(options.Session, options.Group, options.Source, session.Deliver);
        }

        return session;
    }

    /// <summary>Something was published or the feed was signalled: the source pulls again.</summary>
    public void Signal() => _sender?.Signal();

    /// <summary>The owner's queue has room again: in-order delivery continues.</summary>
    public void Resume() => _receiver?.Resume();

    /// <summary>Stops the role (a receiver tells its upstream it leaves) and tells the owner; published messages not yet
    /// sent go back to it (the owner frees them).</summary>
    public void Stop()
    {
        _layer.Remove(Options.Session);
        _owner.OnLeft(0);
    }

    int IAerFeed.Pull(Span<byte> buffer)
    {
        while (_owner.TryTakePublished(out var message))
        {
            // The public API refuses empty and oversized messages before they are queued; a queue written some other way
            // (the simulation) is checked all the same, never trusted with the core thread.
            int length = message.Length;
            if (length > 0 && length <= buffer.Length)
            {
                message.Span.CopyTo(buffer);
            }
            else
            {
                DroppedFeedItems++;
                length = 0;
            }

            _owner.OnSent(message);
            if (length > 0)
            {
                return length;
            }
        }

        for (int dropped = 0; Feed is { } feed && feed.TryPull(out var item);)
        {
            if (item.Length > 0 && item.Length <= buffer.Length)
            {
                item.Span.CopyTo(buffer);
                return item.Length;
            }

            DroppedFeedItems++;
            if (++dropped == MaxDropsPerPull)
            {
                Signal(); // more may follow: pull again after the core has done other work
                return 0;
            }
        }

        return 0;
    }

    private void Deliver(long seq, ReadOnlySpan<byte> payload)
    {
        if (!_owner.Deliver(SourceSender, (ulong)seq, payload))
        {
            _receiver!.Hold();
        }
    }
}
