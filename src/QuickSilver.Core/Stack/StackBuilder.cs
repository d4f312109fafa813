using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;

namespace QuickSilver.Core.Stack;

/// <summary>
/// Builds a <see cref="ProtocolStack"/> on one datagram endpoint: the layers are added bottom first and attached in that
/// order by <see cref="Build"/>, so each finds the layers below it already in place. The endpoint's handler becomes the
/// stack's dispatcher. With <see cref="Secure"/> (a mode other than Off) the layers get the endpoint wrapped in a
/// <see cref="SecureTransport"/>, so every datagram they send is sealed and every one they receive was verified.
/// Call on the core thread (the one that owns <paramref name="transport"/>).
/// </summary>
public sealed class StackBuilder(IDatagramTransport transport, IAlarmScheduler scheduler, RateLimitedLog? log = null)
{
    private readonly List<IProtocolLayer> _layers = new();
    private DatagramSecurityOptions? _security;
    private bool _built;

    /// <summary>Authenticates (and, if asked, encrypts) every datagram of the stack; null or Off: nothing.</summary>
    public StackBuilder Secure(DatagramSecurityOptions? options)
    {
        options?.Validate();
        _security = options;
        return this;
    }

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
        var endpoint = _security is { Enabled: true } ? new SecureTransport(transport, _security, log) : transport;
        var stack = new ProtocolStack(endpoint, scheduler, log);
        foreach (var layer in _layers)
        {
            stack.Attach(layer);
        }

        stack.Transport.SetHandler(stack.Dispatcher); // through the security decorator, when there is one
        return stack;
    }
}
