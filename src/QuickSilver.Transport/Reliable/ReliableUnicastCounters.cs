namespace QuickSilver.Transport.Reliable;

/// <summary>
/// What the reliable-unicast handshake and the peer table did (docs/security.md): each bound's counter, and the
/// datagrams that claimed a conversation they could not prove. Written on the core thread; read anywhere (a reader may
/// see a slightly stale value).
/// </summary>
internal sealed class ReliableUnicastCounters
{
    /// <summary>Challenges sent: answers to connects without a valid cookie and to datagrams of unknown conversations.</summary>
    public long ChallengesSent;

    /// <summary>Contacts not answered because the endpoint's challenge budget (MaxChallengesPerSecond) was spent.</summary>
    public long ChallengesSuppressed;

    /// <summary>Connects whose cookie was not one this endpoint made for that address and epoch (forged or expired).</summary>
    public long CookiesRejected;

    /// <summary>Conversations started by a peer's valid cookie.</summary>
    public long HandshakesAccepted;

    /// <summary>Conversations this side started that completed.</summary>
    public long HandshakesCompleted;

    /// <summary>Valid handshakes refused because the peer table was full (MaxPeers), and sends to new peers refused.</summary>
    public long RefusedTableFull;

    /// <summary>Valid handshakes refused because their source IP had MaxConnectionsPerIp connections already.</summary>
    public long RefusedPerSource;

    /// <summary>Datagrams that named a conversation this side does not have, or a wrong epoch of one it has: answered
    /// by a challenge at most, never able to end or reset a conversation.</summary>
    public long UnknownConversation;

    /// <summary>Conversations ended because the peer proved it had started a new one or lost ours (a restart).</summary>
    public long ConversationsReplaced;

    /// <summary>Connections dropped by IdleTimeout or HalfOpenTimeout.</summary>
    public long Expired;

    /// <summary>Messages refused because their connection's send buffer (SendBufferSegments, queued plus
    /// unacknowledged) had no room for all their segments; what follows is the caller's (docs/security.md, "Bounds").</summary>
    public long SendBufferFull;

    public override string ToString() =>
        $"challenges {ChallengesSent} (suppressed {ChallengesSuppressed}), bad cookies {CookiesRejected}, accepted {HandshakesAccepted}, "
        + $"completed {HandshakesCompleted}, refused full {RefusedTableFull} per-source {RefusedPerSource}, unknown conversation "
        + $"{UnknownConversation}, replaced {ConversationsReplaced}, expired {Expired}, send buffer full {SendBufferFull}";
}
