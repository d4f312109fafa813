using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;
using QuickSilver.Transport.Reliable;

namespace QuickSilver;

/// <summary>
/// Splits one reliable-unicast endpoint between the GMS (MessagePack messages, whose first byte is an array header,
/// 0x90 and above) and the QSM region protocol (first byte 1–4: token, pull, NAK, ACK). Core thread only.
/// </summary>
internal sealed class ControlDemux : IControlChannel
{
    private readonly ReliableUnicast _reliable;
    private Action<NetAddress, ReadOnlySpan<byte>>? _gms;
    private Action<NetAddress>? _gmsPeerFailed;

    public ControlDemux(ReliableUnicast reliable)
    {
        _reliable = reliable;
        reliable.MessageReceived += OnMessage;
        reliable.PeerFailed += (peer, _) => _gmsPeerFailed?.Invoke(peer);
    }

    /// <summary>Region control messages (first byte below 0x80).</summary>
    public ReliableMessageHandler? Region { get; set; }

    public int MaxMessageBytes => _reliable.MaxMessageBytes;

    public bool Send(NetAddress peer, ReadOnlySpan<byte> message) => _reliable.TrySend(peer, message);

    public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed)
    {
        _gms = onMessage;
        _gmsPeerFailed = onPeerFailed;
    }

    public void Forget(NetAddress peer) => _reliable.Forget(peer);

    private void OnMessage(NetAddress peer, ReadOnlySpan<byte> message)
    {
        if (message.IsEmpty)
        {
            return;
        }

        if (message[0] < 0x80)
        {
            Region?.Invoke(peer, message);
        }
        else
        {
            _gms?.Invoke(peer, message);
        }
    }
}
