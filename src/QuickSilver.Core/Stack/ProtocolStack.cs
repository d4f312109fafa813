using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Stack;

/// <summary>
/// A node's protocol stack: one datagram endpoint, one dispatcher that parses the common header once and routes each
/// datagram by its packet type, and an ordered list of layers, bottom first (docs/architecture.md draws it). Made by
/// <see cref="StackBuilder"/>; every stack in QuickSilver (the real node, the embedded GMS, both simulations) is one.
/// Core thread only.
/// </summary>
public sealed class ProtocolStack
{
    private readonly List<IProtocolLayer> _layers = new();
    private bool _stopped;

    internal ProtocolStack(IDatagramTransport transport, IAlarmScheduler scheduler, RateLimitedLog? log)
    {
        Transport = transport;
        Scheduler = scheduler;
        Log = log;
        Dispatcher = new PacketDispatcher(Drops, log);
    }

    /// <summary>What the layers send and receive through: the endpoint, or the <see cref="Security"/> decorator around it.</summary>
    public IDatagramTransport Transport { get; }

    /// <summary>The decorator that seals and verifies every datagram, when the stack was built with security on.</summary>
    public SecureTransport? Security => Transport as SecureTransport;

    public IAlarmScheduler Scheduler { get; }

    internal RateLimitedLog? Log { get; }

    /// <summary>Datagrams the dispatcher rejected: a bad common header, or a packet type no layer registered.</summary>
    public DropCounters Drops { get; } = new();

    public PacketDispatcher Dispatcher { get; }

    /// <summary>The layers, bottom first.</summary>
    public IReadOnlyList<IProtocolLayer> Layers => _layers;

    /// <summary>The layer of type <typeparamref name="T"/>; <see cref="InvalidOperationException"/> when the stack has none.</summary>
    public T Get<T>() where T : class
        => Find<T>() ?? throw new InvalidOperationException($"This stack has no {typeof(T).Name} layer (it has: {string.Join(", ", _layers.Select(l => l.Name))}).");

    public T? Find<T>() where T : class
    {
        foreach (var layer in _layers)
        {
            if (layer is T found)
            {
                return found;
            }
        }

        return null;
    }

    internal void Attach(IProtocolLayer layer)
    {
        _layers.Add(layer);
        layer.Attach(new LayerContext(this, layer, _layers.Count - 1));
    }

    /// <summary>Stops every layer, top first. Idempotent.</summary>
    public void Stop()
    {
        if (_stopped)
        {
            return;
        }

        _stopped = true;
        for (int i = _layers.Count - 1; i >= 0; i--)
        {
            _layers[i].Stop();
        }
    }

    /// <summary>The stack as one list, bottom first, each layer with its state.</summary>
    public string Describe() =>
        $"transport {Transport.LocalAddress} (dispatcher drops {Drops.Total}" +
        (Security is { } security ? $"; {security.Mode}: {security.Counters}; region control messages {security.MessageCounters})" : "; security off)") +
        string.Concat(_layers.Select(l => $" | {l.Name}: {l.Describe()}"));
}
