using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Plugins;

/// <summary>
/// The NativeNet plug-in for an island that is a set of QuickSilver (QSM) groups, through the public
/// <see cref="QuickSilverNode"/> API only: the gateway's node joins groups like any application. A session owned by
/// the island names a group per flow: <c>bfed://&lt;island&gt;/&lt;native-name&gt;/&lt;flow&gt;</c> is the group
/// <c>native-name/flow</c>. Down channels are fresh groups <c>&lt;prefix&gt;/&lt;n&gt;</c> that clients join after
/// the TRANSLATION. allocate_channel starts the join (it completes asynchronously; send_data fails, counted by the
/// gateway, until it has); subscribe sets the group's message handler, which posts each message (a copy) to the
/// gateway's thread and skips the node's own; unsubscribe clears it; reclaim_channel leaves the group; refresh does
/// nothing (membership is the GMS's); get_sroutes returns null. This island has no mediator of its own: clients join
/// through the gateway's admin endpoint (<c>join &lt;url&gt;</c>).
/// </summary>
public sealed class QsmNativeNet(QuickSilverNode node, string downPrefix = "bfed-down") : IHostedNativeNet
{
    private INativeNetUpcalls? _upcalls;
    private INativeNetLoop? _loop;
    private int _next;
    private long _dropped;

    public long Dropped => Interlocked.Read(ref _dropped);

    public void Bind(INativeNetUpcalls upcalls, INativeNetLoop loop)
    {
        _upcalls = upcalls;
        _loop = loop;
    }

    public NativeChannel? AllocateChannel(SessionName session, int flow, ChannelDirection direction)
    {
        string name = direction == ChannelDirection.Up ? $"{session.NativeName}/{session.Flows[flow]}" : $"{downPrefix}/{session.Owner}/{++_next}";
        if (System.Text.Encoding.UTF8.GetByteCount(name) > QuickSilverNode.MaxGroupNameBytes)
        {
            return null;
        }

        var channel = new NativeChannel(session, flow, direction, name);
        channel.Handle = new State(node.JoinGroupAsync(name));
        return channel;
    }

    public void Subscribe(NativeChannel channel)
    {
        var state = (State)channel.Handle!;
        state.Subscribed = true;
        _ = state.Joining.ContinueWith(t =>
        {
            if (t.IsCompletedSuccessfully && state.Subscribed)
            {
                t.Result.OnMessage = (sender, sequence, payload) =>
                {
                    if (sender == node.Id || !state.Subscribed)
                    {
                        return;
                    }

                    if (_loop is null || !_loop.TryPostData(channel, payload))
                    {
                        Interlocked.Increment(ref _dropped);
                    }
                };
            }
        }, TaskScheduler.Default);
    }

    public void Refresh(NativeChannel channel)
    {
    }

    public void Unsubscribe(NativeChannel channel)
    {
        var state = (State)channel.Handle!;
        state.Subscribed = false;
        if (state.Joining.IsCompletedSuccessfully)
        {
            state.Joining.Result.OnMessage = null;
        }
    }

    public void ReclaimChannel(NativeChannel channel)
    {
        var state = (State)channel.Handle!;
        _ = state.Joining.ContinueWith(t =>
        {
            if (t.IsCompletedSuccessfully)
            {
                _ = t.Result.LeaveAsync();
            }
        }, TaskScheduler.Default);
    }

    public bool SendData(NativeChannel channel, ReadOnlySpan<byte> data)
    {
        var state = (State)channel.Handle!;
        return state.Joining.IsCompletedSuccessfully && state.Joining.Result.TryPublish(data);
    }

    public IReadOnlyList<SrouteCost>? GetSroutes(SessionName session, IReadOnlyList<GatewayId> gateways) => null;

    private sealed class State(Task<QuickSilverGroup> joining)
    {
        public Task<QuickSilverGroup> Joining { get; } = joining;

        public volatile bool Subscribed;
    }
}
