namespace QuickSilver.Core.Stack;

/// <summary>
/// One protocol component of a <see cref="ProtocolStack"/> (DESIGN: "protocols stack as components"): a state machine
/// with no I/O of its own. The stack attaches layers bottom to top; in <see cref="Attach"/> a layer registers the
/// packet types (<see cref="LayerContext.RegisterPacketType"/>) and control channels
/// (<see cref="LayerContext.OpenControlChannel"/>) it owns and finds the layers below it that it uses
/// (<see cref="LayerContext.Below{T}"/>). From then on it acts only through what the context handed it: the transport
/// (send, pull feeds, multicast membership), the alarm scheduler (time), its counters and its log. Core thread only.
/// </summary>
public interface IProtocolLayer
{
    /// <summary>A short name for diagnostics and error messages ("reliable-unicast", "qsm-region", …).</summary>
    string Name { get; }

    /// <summary>Called once, on the core thread, after every layer below this one is attached.</summary>
    void Attach(LayerContext context);

    /// <summary>Called once when the stack stops, top layer first: say goodbye, cancel alarms. No more sends after it.</summary>
    void Stop();

    /// <summary>This layer's state in one line (diagnostics: a stalled transfer, a failing test).</summary>
    string Describe();
}
