using QuickSilver.Core.Io;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Membership.Service;

/// <summary>The GMS's control channel over the reliable unicast protocol (real UDP or the simulated network).</summary>
public sealed class ReliableControlChannel : IControlChannel
{
    private readonly ReliableUnicast _reliable;
    private Action<NetAddress, ReadOnlySpan<byte>>? _onMessage;
    private Action<NetAddress>? _onPeerFailed;

    public ReliableControlChannel(ReliableUnicast reliable)
    {
        _reliable = reliable ?? throw new ArgumentNullException(nameof(reliable));
        _reliable.MessageReceived += (peer, message) => _onMessage?.Invoke(peer, message);
        _reliable.PeerFailed += (peer, _) => _onPeerFailed?.Invoke(peer);
    }

    public int MaxMessageBytes => _reliable.MaxMessageBytes;

    public bool Send(NetAddress peer, ReadOnlySpan<byte> message) => _reliable.TrySend(peer, message);

    public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed)
    {
        _onMessage = onMessage ?? throw new ArgumentNullException(nameof(onMessage));
        _onPeerFailed = onPeerFailed ?? throw new ArgumentNullException(nameof(onPeerFailed));
    }

    public void Forget(NetAddress peer) => _reliable.Forget(peer);
}
