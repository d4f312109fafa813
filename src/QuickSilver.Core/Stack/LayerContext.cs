using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Stack;

/// <summary>
/// What a <see cref="ProtocolStack"/> hands one layer when it attaches it: everything the layer may act through. A layer
/// never opens a socket, starts a thread or reads the wall clock; it sends through <see cref="Transport"/> (a UDP
/// endpoint on the real core, a node's port in the simulated network), keeps time through <see cref="Scheduler"/>,
/// and receives only what the stack's dispatcher routes to it. Core thread only.
/// </summary>
public sealed class LayerContext
{
    private readonly ProtocolStack _stack;
    private readonly int _position;

    internal LayerContext(ProtocolStack stack, IProtocolLayer layer, int position)
    {
        _stack = stack;
        Layer = layer;
        _position = position;
    }

    /// <summary>The layer this context belongs to.</summary>
    public IProtocolLayer Layer { get; }

    /// <summary>Alarms and the clock (virtual time in simulation).</summary>
    public IAlarmScheduler Scheduler => _stack.Scheduler;

    /// <summary>The datagram endpoint: <see cref="IDatagramTransport.TrySend"/>, pull feeds
    /// (<see cref="IDatagramTransport.RegisterFeed"/>), multicast joins.</summary>
    public IDatagramTransport Transport => _stack.Transport;

    public NetAddress LocalAddress => _stack.Transport.LocalAddress;

    public int MaxDatagramSize => _stack.Transport.MaxDatagramSize;

    /// <summary>Where a layer reports malformed or hostile input (rate-limited); null in simulation.</summary>
    public RateLimitedLog? Log => _stack.Log;

    /// <summary>Routes every datagram whose header carries <paramref name="type"/> to <paramref name="handler"/>.
    /// Throws <see cref="ArgumentException"/> when another layer owns the type.</summary>
    public void RegisterPacketType(PacketType type, IPacketHandler handler) => _stack.Dispatcher.Register(type, handler, Layer.Name);

    /// <summary>Opens reliable control channel <paramref name="id"/> on the nearest layer below that offers channels
    /// (<see cref="IControlTransport"/>).</summary>
    public IControlChannel OpenControlChannel(byte id) => Below<IControlTransport>().OpenChannel(id, Layer.Name);

    /// <summary>The nearest layer below this one that is a <typeparamref name="T"/>. Throws
    /// <see cref="InvalidOperationException"/> naming the missing layer when there is none (a stack built in the wrong order).</summary>
    public T Below<T>() where T : class
    {
        for (int i = _position - 1; i >= 0; i--)
        {
            if (_stack.Layers[i] is T found)
            {
                return found;
            }
        }

        throw new InvalidOperationException($"Layer '{Layer.Name}' needs a {typeof(T).Name} below it in the stack, and there is none.");
    }

    /// <summary>Like <see cref="Below{T}"/>, but null when there is none (an optional collaborator).</summary>
    public T? FindBelow<T>() where T : class
    {
        for (int i = _position - 1; i >= 0; i--)
        {
            if (_stack.Layers[i] is T found)
            {
                return found;
            }
        }

        return null;
    }
}
