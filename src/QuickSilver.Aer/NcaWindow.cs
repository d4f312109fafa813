namespace QuickSilver.Aer;

/// <summary>What an ACK or a timeout did to the window.</summary>
public enum NcaEvent
{
    None,
    SlowStart,
    CongestionAvoidance,
    Loss,
    LossIgnored,
    Timeout,
}

/// <summary>
/// NCA's rate adjustment (§4.2.2), exactly as the seed gives it, over the nominee's per-packet ACKs:
/// <list type="bullet">
/// <item>on an ACK: if W &lt; Thresh, W ← W + 1 (slow start), else W ← W + 1/W (congestion avoidance);</item>
/// <item>on a loss: Thresh ← W/2, W ← W/2; a packet is lost when ACKs arrive for three packets sent after it; at most one
/// reduction per window: losses of packets sent before the last reduction (up to <see cref="RecoverPoint"/>) do not
/// reduce again (New Reno's recovery point);</item>
/// <item>on a timeout (no ACK for <c>RTO</c> since the later of the last send and the last ACK, while packets are
/// outstanding): Thresh ← W/2, W ← 1, and every outstanding packet is written off.</item>
/// </list>
/// W never goes below 1 (W/2 of 1 would stop the sender) nor above <c>maxWindow</c>; the window counts packets sent
/// since <see cref="Reset"/> (a new nominee). The source may send while <see cref="InFlight"/> &lt; ⌊W⌋. Retransmissions
/// are outside the window (AER repairs them; the window only paces new data). Pure state: the caller keeps time.
/// </summary>
public sealed class NcaWindow
{
    private const byte Unacked = 0;
    private const byte Acked = 1;
    private const byte Lost = 2;
    private readonly byte[] _state;
    private readonly int _maxWindow;
    private readonly double _initialThreshold;
    private long _base; // lowest sequence number neither acked nor written off
    private int _ackedAbove; // acked packets in (_base, HighestSent]

    public NcaWindow(double initialThreshold, int maxWindow)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxWindow, 2);
        _maxWindow = maxWindow;
        _initialThreshold = initialThreshold;
        _state = new byte[maxWindow + 8];
        Reset(1);
    }

    public double W { get; private set; }

    public double Thresh { get; private set; }

    /// <summary>The last packet sent (0 before any since <see cref="Reset"/>: then the window starts at <see cref="FirstSeq"/>).</summary>
    public long HighestSent { get; private set; }

    public long FirstSeq { get; private set; }

    /// <summary>Losses of packets up to here do not reduce the window again.</summary>
    public long RecoverPoint { get; private set; }

    public int InFlight { get; private set; }

    public long Losses { get; private set; }

    public long Reductions { get; private set; }

    public long Timeouts { get; private set; }

    public bool CanSend => InFlight < Math.Min((int)Math.Floor(W), _maxWindow);

    /// <summary>Starts over at <paramref name="firstSeq"/> (a new nominee): W = 1, Thresh = the initial threshold,
    /// nothing outstanding.</summary>
    public void Reset(long firstSeq)
    {
        W = 1;
        Thresh = _initialThreshold;
        FirstSeq = firstSeq;
        HighestSent = firstSeq - 1;
        RecoverPoint = firstSeq - 1;
        _base = firstSeq;
        _ackedAbove = 0;
        InFlight = 0;
        Array.Clear(_state);
    }

    /// <summary>Packet <paramref name="seq"/> (the next one, HighestSent + 1) went out.</summary>
    public void OnSent(long seq)
    {
        if (seq != HighestSent + 1)
        {
            throw new ArgumentException($"The window expects packet {HighestSent + 1} next, got {seq}.", nameof(seq));
        }

        if (!CanSend)
        {
            throw new InvalidOperationException($"The window is full ({InFlight} in flight, W = {W:0.##}).");
        }

        HighestSent = seq;
        _state[Slot(seq)] = Unacked;
        InFlight++;
    }

    /// <summary>The nominee ACKed <paramref name="seq"/>. Returns what changed (None for a duplicate or one out of range).</summary>
    public NcaEvent OnAck(long seq)
    {
        if (seq < _base || seq > HighestSent || _state[Slot(seq)] != Unacked)
        {
            return NcaEvent.None;
        }

        _state[Slot(seq)] = Acked;
        InFlight--;
        var result = W < Thresh ? NcaEvent.SlowStart : NcaEvent.CongestionAvoidance;
        W = Math.Min(_maxWindow, W < Thresh ? W + 1 : W + 1 / W);
        if (seq > _base)
        {
            _ackedAbove++;
        }

        // Slide past what is settled; three ACKs above the lowest unsettled packet mean it was lost.
        while (true)
        {
            Slide();
            if (_base > HighestSent || _ackedAbove < 3)
            {
                break;
            }

            _state[Slot(_base)] = Lost;
            InFlight--;
            Losses++;
            if (_base > RecoverPoint)
            {
                Thresh = Math.Max(1, W / 2);
                W = Math.Max(1, W / 2);
                RecoverPoint = HighestSent;
                Reductions++;
                result = NcaEvent.Loss;
            }
            else if (result != NcaEvent.Loss)
            {
                result = NcaEvent.LossIgnored;
            }
        }

        return result;
    }

    /// <summary>The timer fired with packets outstanding: Thresh = W/2, W = 1, everything outstanding written off.</summary>
    public void OnTimeout()
    {
        Thresh = Math.Max(1, W / 2);
        W = 1;
        for (long s = _base; s <= HighestSent; s++)
        {
            _state[Slot(s)] = Lost;
        }

        _base = HighestSent + 1;
        _ackedAbove = 0;
        InFlight = 0;
        RecoverPoint = HighestSent;
        Timeouts++;
    }

    private void Slide()
    {
        while (_base <= HighestSent && _state[Slot(_base)] != Unacked)
        {
            _base++;
            if (_base <= HighestSent && _state[Slot(_base)] == Acked)
            {
                _ackedAbove--;
            }
        }
    }

    private int Slot(long seq) => (int)(seq % _state.Length);
}
