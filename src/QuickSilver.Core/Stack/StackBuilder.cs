using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Stack;

/// <summary>
/// Builds a <see cref="ProtocolStack"/> on one datagram endpoint: the layers are added bottom first and attached in that
/// order by <see cref="Build"/>, so each finds the layers below it already in place. The endpoint's handler becomes the
/// stack's dispatcher. Call on the core thread (the one that owns <paramref name="transport"/>).
/// </summary>
public sealed class StackBuilder(IDatagramTransport transport, IAlarmScheduler scheduler, RateLimitedLog? log = null)
{
    private readonly List<IProtocolLayer> _layers = new();
    private bool _built;

    /// <summary>Adds <paramref name="layer"/> above the ones added so far.</summary>
    public StackBuilder Add(IProtocolLayer layer)
    {
        ArgumentNullException.ThrowIfNull(layer);
        if (_built)
        {
            throw new InvalidOperationException("This stack is built already; layers are added before Build().");
        }

        if (_layers.Contains(layer))
        {
            throw new ArgumentException($"Layer '{layer.Name}' is in this stack already.", nameof(layer));
        }

        _layers.Add(layer);
        return this;
    }

    /// <summary>Attaches the layers bottom first and routes the endpoint's datagrams to the stack's dispatcher.</summary>
    public ProtocolStack Build()
    {
        ArgumentNullException.ThrowIfNull(transport);
        ArgumentNullException.ThrowIfNull(scheduler);
        if (_built)
        {
            throw new InvalidOperationException("Build() was called already.");
        }

        _built = true;
        var stack = new ProtocolStack(transport, scheduler, log);
        foreach (var layer in _layers)
        {
            stack.Attach(layer);
        }

        transport.SetHandler(stack.Dispatcher);
        return stack;
    }
}
