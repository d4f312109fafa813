using System.Buffers;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// One peer's conversation. It starts with a handshake (docs/reliable-unicast.md, "Handshake and conversations"): the
/// side that opens it sends connects, first without a cookie, then echoing the challenge's, until the peer's first
/// acknowledgement or data names this side's conversation number; until then messages wait in the send buffer. The
/// side that answers keeps nothing until a valid cookie comes back. Then: the send side (a bounded buffer of numbered
/// segments, a window of segments in flight, RTO timers, fast retransmit of SACKed holes) and the receive side
/// (in-order, exactly-once delivery through a bounded reorder buffer, delayed acknowledgements). A message larger than one segment is cut into consecutive segments and
/// reassembled before delivery (docs/reliable-unicast.md). Buffers are rented from <see cref="ArrayPool{T}.Shared"/> and
/// returned on acknowledgement or delivery. Core thread only.
/// </summary>
internal sealed class ReliableConnection
{
    private readonly ReliableUnicast _owner;
    private readonly ReliableUnicastOptions _options;
    private Segment[] _send = [];           // ring indexed by seq % capacity, allocated on the first send
    private readonly Segment[] _reorder;    // ring indexed by seq % window
    private readonly Alarm _rtoAlarm;
    private readonly Alarm _ackAlarm;
    private ulong _sendBase;                // oldest unacknowledged seq
    private ulong _nextSeq;                 // next seq to assign
    private ulong _nextToTransmit;          // first seq never transmitted
    private ulong _expected;                // receive side: next seq to deliver
    private TimeSpan _srtt;
    private TimeSpan _rttvar;
    private TimeSpan _rto;
    private int _timeouts;
    private int _unackedArrivals;
    private int _neededSpace;               // segments a refused TrySend needed (0: nobody waits)
    private byte[]? _assembly;              // receive side: the fragments of a message so far
    private int _assemblyLength;
    private bool _assembling;
    private bool _discarding;               // receive side: skipping the rest of an oversized message
    private UInt128 _cookie;                // opening side: the cookie of the last challenge (0: none yet)
    private bool _baseStartsMessage = true; // _sendBase is the first segment of a message
    private TimeSpan _connectSentAt;        // opening side: when this phase's connect was first sent
    private bool _connectResent;            // ... and whether it was repeated since (no RTT sample then)

    internal ReliableConnection(ReliableUnicast owner, NetAddress peer, ReliableUnicastOptions options, bool inbound)
    {
        _owner = owner;
        _options = options;
        Peer = peer;
        Inbound = inbound;
        _reorder = new Segment[options.Window];
        _rto = options.HandshakeRto; // the first connect; data starts from a handshake sample or InitialRto
        LocalEpoch = owner.NextConversationEpoch();
        OpenedAt = LastHeard = owner.Scheduler.Now;
        _rtoAlarm = new Alarm(_ => OnRetransmitTimeout());
        _ackAlarm = new Alarm(_ => SendAck());
    }

    public NetAddress Peer { get; }

    /// <summary>This side's conversation number: fresh for every connection object (a failed, replaced or expired
    /// connection is replaced by a new one), unpredictable, never 0. Data and acknowledgements must name it.</summary>
    public uint LocalEpoch { get; private set; }

    /// <summary>The peer's conversation number once the handshake is done (0 before).</summary>
    public uint PeerEpoch { get; private set; }

    /// <summary>The handshake is done: both numbers are known and data flows.</summary>
    public bool IsEstablished { get; private set; }

    /// <summary>The peer opened this conversation (its cookie was valid); false when this side did.</summary>
    public bool Inbound { get; }

    internal TimeSpan OpenedAt { get; }

    /// <summary>When the last datagram of this conversation arrived from the peer (or the connection was opened).</summary>
    internal TimeSpan LastHeard { get; set; }

    /// <summary>A message was sent or delivered on this connection (a connection a peer opened and never used is
    /// half-open: it expires after HalfOpenTimeout).</summary>
    internal bool Used { get; private set; }

    /// <summary>Whether the send ring has been allocated (on the first message sent): a connection that only receives,
    /// or only completed a handshake, costs a few kilobytes, not SendBufferSegments segments.</summary>
    internal bool HasSendBuffer => _send.Length > 0;

    /// <summary>Segments accepted by <see cref="TrySend(ReadOnlySpan{byte})"/> and not yet acknowledged (a message of n bytes takes
    /// ceil(n / MaxSegmentBytes) segments, at least one).</summary>
    public int Pending => (int)(_nextSeq - _sendBase);

    private int SegmentsFor(int bytes) => bytes <= _options.MaxSegmentBytes ? 1 : (bytes + _options.MaxSegmentBytes - 1) / _options.MaxSegmentBytes;

    public TimeSpan SmoothedRtt => _srtt;

    public TimeSpan RetransmissionTimeout => _rto;

    public long Retransmissions { get; private set; }

    public bool Failed { get; private set; }

    /// <summary>Queues <paramref name="message"/> (cut into segments of at most MaxSegmentBytes). False when the send
    /// buffer lacks room for all of its segments (wait for <see cref="ReliableUnicast.SpaceAvailable"/>).</summary>
    public bool TrySend(ReadOnlySpan<byte> message) => TrySend(message, hasPrefix: false, 0);

    /// <summary>Queues <paramref name="prefix"/> followed by <paramref name="message"/> as one message (a control
    /// channel's id in front of its message), without first copying the two together.</summary>
    public bool TrySend(byte prefix, ReadOnlySpan<byte> message) => TrySend(message, hasPrefix: true, prefix);

    private bool TrySend(ReadOnlySpan<byte> message, bool hasPrefix, byte prefix)
    {
        int total = message.Length + (hasPrefix ? 1 : 0);
        if (total > _options.MaxMessageBytes)
        {
            throw new ArgumentException($"Message of {total} bytes exceeds ReliableUnicastOptions.MaxMessageBytes ({_options.MaxMessageBytes}).", nameof(message));
        }

        if (Failed)
        {
            throw new InvalidOperationException($"The connection to {Peer} has failed; the peer was reported failed.");
        }

        int segments = SegmentsFor(total);
        if (_send.Length == 0)
        {
            _send = new Segment[_options.SendBufferSegments]; // a connection that only receives never needs it
        }

        if (_send.Length - Pending < segments)
        {
            _neededSpace = Math.Max(_neededSpace, segments);
            _owner.Counters.SendBufferFull++; // the caller decides: wait for SpaceAvailable, drop, or count its own loss
            return false;
        }

        for (int i = 0; i < segments; i++)
        {
            int offset = i * _options.MaxSegmentBytes;
            int length = Math.Min(_options.MaxSegmentBytes, total - offset);
            ref var segment = ref _send[_nextSeq % (ulong)_send.Length];
            segment.Buffer = ArrayPool<byte>.Shared.Rent(Math.Max(1, length));
            var into = segment.Buffer.AsSpan(0, length);
            if (hasPrefix)
            {
                // The logical message is prefix + message: segment i covers [offset, offset + length) of it.
                if (offset == 0)
                {
                    into[0] = prefix;
                    message[..(length - 1)].CopyTo(into[1..]);
                }
                else
                {
                    message.Slice(offset - 1, length).CopyTo(into);
                }
            }
            else
            {
                message.Slice(offset, length).CopyTo(into);
            }

            segment.Length = length;
            segment.Last = i == segments - 1;
            segment.Acked = false;
            segment.Retransmitted = false;
            segment.SentAt = TimeSpan.MinValue;
            _nextSeq++;
        }

        Used = true;
        _owner.WantsToTransmit(this);
        return true;
    }

    /// <summary>Opening side: sends a connect (with the cookie of the last challenge, if any) and keeps repeating it on
    /// the retransmission timer, backing off; MaxRetransmissions unanswered in a row report the peer failed.</summary>
    internal void StartHandshake()
    {
        _connectSentAt = _owner.Scheduler.Now;
        _connectResent = false;
        _owner.SendConnect(this, _cookie);
        if (!_rtoAlarm.IsScheduled)
        {
            _owner.Scheduler.ScheduleAfter(_rtoAlarm, _rto);
        }
    }

    /// <summary>Opening side: the peer's challenge to our connect; echo its cookie at once. The first challenge to a
    /// connect sent once is a round-trip sample (Karn's rule), so a lost echo or a lost acceptance is repeated after
    /// the measured RTO rather than the initial one.</summary>
    internal void OnChallenge(UInt128 cookie)
    {
        if (_cookie == UInt128.Zero && !_connectResent)
        {
            SampleRtt(_owner.Scheduler.Now - _connectSentAt);
        }
        else
        {
            _rto = _srtt > TimeSpan.Zero ? ComputedRto() : _options.HandshakeRto; // an answer: undo the backoff
        }

        _cookie = cookie;
        _owner.Scheduler.Cancel(_rtoAlarm);
        StartHandshake();
    }

    /// <summary>The handshake is done: the peer's number is known (its acknowledgement or data named ours, or its
    /// valid cookie arrived). Queued messages start flowing. <paramref name="answersOurConnect"/>: the peer's first
    /// acknowledgement answers our connect (a round-trip sample if that was sent once).</summary>
    internal void Establish(uint peerEpoch, bool answersOurConnect = false)
    {
        if (answersOurConnect && _cookie != UInt128.Zero && !_connectResent)
        {
            SampleRtt(_owner.Scheduler.Now - _connectSentAt);
        }

        PeerEpoch = peerEpoch;
        IsEstablished = true;
        _cookie = UInt128.Zero;
        _timeouts = 0;
        _rto = _srtt > TimeSpan.Zero ? ComputedRto() : _options.InitialRto;
        _owner.Scheduler.Cancel(_rtoAlarm);
        if (_nextSeq > _sendBase)
        {
            _owner.WantsToTransmit(this);
        }
    }

    /// <summary>Whether the sweep drops this connection now: nothing of ours unacknowledged and the peer silent for
    /// IdleTimeout, or opened by the peer and never used for HalfOpenTimeout. A conversation still opening is left to
    /// its handshake timer.</summary>
    internal bool IsExpired(TimeSpan now)
    {
        if (!IsEstablished || Pending > 0)
        {
            return false;
        }

        return now - LastHeard >= _options.IdleTimeout || (Inbound && !Used && now - OpenedAt >= _options.HalfOpenTimeout);
    }

    /// <summary>Transmits new segments the window and the rate limit allow. Returns false when the rate limit stopped it.</summary>
    internal bool TransmitNew()
    {
        if (!IsEstablished)
        {
            return true; // sent once the handshake is done
        }

        while (_nextToTransmit < _nextSeq && _nextToTransmit < _sendBase + (ulong)_options.Window)
        {
            if (!Transmit(_nextToTransmit))
            {
                return false;
            }

            _nextToTransmit++;
        }

        return true;
    }

    private bool Transmit(ulong seq)
    {
        ref var segment = ref _send[seq % (ulong)_send.Length];
        if (!_owner.TrySendData(this, seq, segment.Buffer!.AsSpan(0, segment.Length), segment.Last))
        {
            return false;
        }

        if (segment.SentAt != TimeSpan.MinValue)
        {
            segment.Retransmitted = true;
            Retransmissions++;
        }

        segment.SentAt = _owner.Scheduler.Now;
        if (!_rtoAlarm.IsScheduled)
        {
            _owner.Scheduler.ScheduleAfter(_rtoAlarm, _rto);
        }

        return true;
    }

    internal void OnAck(ulong next, ulong sack)
    {
        var now = _owner.Scheduler.Now;
        if (next > _nextToTransmit)
        {
            _owner.Drops.Increment(DropReason.Malformed); // acknowledges what was never sent
            return;
        }

        // RTT samples come from a segment's first acknowledgement (cumulative or selective), and only from segments
        // sent once (Karn's rule); a segment SACKed long before the hole below it fills gives no inflated sample later.
        bool progress = false;
        while (_sendBase < next)
        {
            ref var segment = ref _send[_sendBase % (ulong)_send.Length];
            if (!segment.Acked && !segment.Retransmitted && segment.SentAt != TimeSpan.MinValue)
            {
                SampleRtt(now - segment.SentAt);
            }

            _baseStartsMessage = segment.Last;
            Release(ref segment);
            _sendBase++;
            progress = true;
        }

        // Selective acknowledgements: mark, and fast-retransmit holes below the highest SACKed segment once per RTT.
        ulong highestSacked = 0;
        for (int i = 0; i < 64 && sack != 0; i++)
        {
            if ((sack & (1UL << i)) != 0)
            {
                ulong seq = next + 1 + (ulong)i;

                // A stale ack (next below our base) may name segments already released, whose ring slots now hold newer ones.
                if (seq >= _sendBase && seq < _nextToTransmit)
                {
                    ref var segment = ref _send[seq % (ulong)_send.Length];
                    if (!segment.Acked && !segment.Retransmitted)
                    {
                        SampleRtt(now - segment.SentAt);
                    }

                    segment.Acked = true;
                    highestSacked = seq;
                }
            }
        }

        if (highestSacked > 0)
        {
            var holdOff = _srtt > TimeSpan.Zero ? _srtt : _rto;
            for (ulong seq = _sendBase; seq < highestSacked; seq++)
            {
                ref var segment = ref _send[seq % (ulong)_send.Length];
                if (!segment.Acked && now - segment.SentAt >= holdOff && !Transmit(seq))
                {
                    break;
                }
            }
        }

        if (progress)
        {
            // New data got through: undo the exponential backoff (the estimate, not the backed-off value, applies).
            _timeouts = 0;
            if (_srtt > TimeSpan.Zero)
            {
                _rto = ComputedRto();
            }

            _owner.Scheduler.Cancel(_rtoAlarm);
            if (_sendBase < _nextToTransmit)
            {
                _owner.Scheduler.ScheduleAfter(_rtoAlarm, _rto);
            }

            _owner.WantsToTransmit(this);
            if (_neededSpace > 0 && _send.Length - Pending >= _neededSpace)
            {
                _neededSpace = 0;
                _owner.RaiseSpaceAvailable(this);
            }
        }
    }

    private void SampleRtt(TimeSpan sample)
    {
        if (_srtt == TimeSpan.Zero)
        {
            _srtt = sample;
            _rttvar = sample / 2;
        }
        else
        {
            var error = sample - _srtt;
            _rttvar = (_rttvar * 3 / 4) + (error.Duration() / 4);
            _srtt = (_srtt * 7 / 8) + (sample / 8);
        }

        _rto = ComputedRto();
    }

    private TimeSpan ComputedRto()
    {
        var rto = _srtt + (_rttvar * 4);
        return rto < _options.MinRto ? _options.MinRto : rto > _options.MaxRto ? _options.MaxRto : rto;
    }

    private void OnRetransmitTimeout()
    {
        if (!IsEstablished)
        {
            if (++_timeouts > _options.MaxRetransmissions)
            {
                _owner.ReportFailed(this);
                return;
            }

            _rto = _rto * 2 > _options.MaxRto ? _options.MaxRto : _rto * 2;
            _connectResent = true;
            _owner.SendConnect(this, _cookie);
            _owner.Scheduler.ScheduleAfter(_rtoAlarm, _rto);
            return;
        }

        if (_sendBase >= _nextToTransmit)
        {
            return;
        }

        if (++_timeouts > _options.MaxRetransmissions)
        {
            _owner.ReportFailed(this);
            return;
        }

        // Back off, then resend the oldest unacknowledged segments (those not SACKed) within the window.
        _rto = _rto * 2 > _options.MaxRto ? _options.MaxRto : _rto * 2;
        for (ulong seq = _sendBase; seq < _nextToTransmit; seq++)
        {
            if (!_send[seq % (ulong)_send.Length].Acked && !Transmit(seq))
            {
                break;
            }
        }

        _owner.Scheduler.ScheduleAfter(_rtoAlarm, _rto);
    }

    /// <summary>Receive side: a data segment arrived; <paramref name="last"/> when it ends its message.</summary>
    internal void OnData(ulong seq, ReadOnlySpan<byte> payload, bool last)
    {
        if (seq < _expected)
        {
            ScheduleAck(immediately: true); // a duplicate: our ack was probably lost
            return;
        }

        if (seq >= _expected + (ulong)_reorder.Length)
        {
            _owner.Drops.Increment(DropReason.ReceiveBufferFull); // beyond the window: the sender will resend
            ScheduleAck(immediately: true);
            return;
        }

        if (seq == _expected)
        {
            _expected++;
            Accept(payload, last);
            while (!Failed && _reorder[_expected % (ulong)_reorder.Length].Buffer is { } buffered
                   && _reorder[_expected % (ulong)_reorder.Length].Seq == _expected)
            {
                ref var slot = ref _reorder[_expected % (ulong)_reorder.Length];
                int length = slot.Length;
                bool slotLast = slot.Last;
                slot.Buffer = null;
                _expected++;
                Accept(buffered.AsSpan(0, length), slotLast);
                ArrayPool<byte>.Shared.Return(buffered);
            }

            ScheduleAck(immediately: false);
            return;
        }

        ref var hold = ref _reorder[seq % (ulong)_reorder.Length];
        if (hold.Buffer is null)
        {
            hold.Buffer = ArrayPool<byte>.Shared.Rent(Math.Max(1, payload.Length));
            payload.CopyTo(hold.Buffer);
            hold.Length = payload.Length;
            hold.Seq = seq;
            hold.Last = last;
        }

        ScheduleAck(immediately: true); // out of order: tell the sender about the hole now
    }

    /// <summary>Takes the next in-order segment: a whole message is delivered as it is; fragments are appended to the
    /// reassembly buffer (bounded by MaxMessageBytes: a peer that exceeds it has the message dropped and counted) and
    /// delivered when the last one arrives.</summary>
    private void Accept(ReadOnlySpan<byte> payload, bool last)
    {
        if (_discarding)
        {
            _discarding = !last;
            return;
        }

        Used = true;
        if (!_assembling && last)
        {
            _owner.Deliver(this, payload);
            return;
        }

        int length = _assemblyLength + payload.Length;
        if (length > _options.MaxMessageBytes)
        {
            _owner.Drops.Increment(DropReason.Oversized);
            ReleaseAssembly();
            _discarding = !last;
            return;
        }

        if (_assembly is null || _assembly.Length < length)
        {
            var grown = ArrayPool<byte>.Shared.Rent(Math.Min(_options.MaxMessageBytes, Math.Max(length, 2 * (_assembly?.Length ?? 0))));
            if (_assembly is not null)
            {
                _assembly.AsSpan(0, _assemblyLength).CopyTo(grown);
                ArrayPool<byte>.Shared.Return(_assembly);
            }

            _assembly = grown;
        }

        payload.CopyTo(_assembly.AsSpan(_assemblyLength));
        _assemblyLength = length;
        _assembling = true;
        if (last)
        {
            var message = _assembly;
            _assembly = null;
            _assemblyLength = 0;
            _assembling = false;
            _owner.Deliver(this, message.AsSpan(0, length));
            ArrayPool<byte>.Shared.Return(message);
        }
    }

    private void ReleaseAssembly()
    {
        if (_assembly is not null)
        {
            ArrayPool<byte>.Shared.Return(_assembly);
            _assembly = null;
        }

        _assemblyLength = 0;
        _assembling = false;
    }

    private void ScheduleAck(bool immediately)
    {
        if (immediately || ++_unackedArrivals >= 8)
        {
            SendAck();
        }
        else if (!_ackAlarm.IsScheduled)
        {
            _owner.Scheduler.ScheduleAfter(_ackAlarm, _options.AckDelay);
        }
    }

    private void SendAck()
    {
        _unackedArrivals = 0;
        _owner.Scheduler.Cancel(_ackAlarm);
        ulong sack = 0;
        for (int i = 0; i < 64 && i < _reorder.Length - 1; i++)
        {
            ulong seq = _expected + 1 + (ulong)i;
            ref var slot = ref _reorder[seq % (ulong)_reorder.Length];
            if (slot.Buffer is not null && slot.Seq == seq)
            {
                sack |= 1UL << i;
            }
        }

        _owner.SendAck(this, _expected, sack);
    }

    /// <summary>Drops all state (peer failed or restarted). Returns how many accepted messages were never acknowledged
    /// (a message counts when its last segment was not).</summary>
    internal int Reset()
    {
        int undelivered = 0;
        for (ulong seq = _sendBase; seq < _nextSeq; seq++)
        {
            ref var segment = ref _send[seq % (ulong)_send.Length];
            if (segment.Last)
            {
                undelivered++;
            }

            Release(ref segment);
        }

        _neededSpace = 0;
        _baseStartsMessage = true;
        DropReceiveState();
        _owner.Scheduler.Cancel(_rtoAlarm);
        _owner.Scheduler.Cancel(_ackAlarm);
        _sendBase = _nextSeq = _nextToTransmit = _expected = 0;
        IsEstablished = false;
        PeerEpoch = 0;
        _cookie = UInt128.Zero;
        _timeouts = 0;
        _rto = _options.InitialRto;
        _srtt = _rttvar = TimeSpan.Zero;
        return undelivered;
    }

    internal void MarkFailed() => Failed = true;

    /// <summary>
    /// The peer proved it no longer has this conversation (it expired it, or restarted): starts a new one under a new
    /// number <paramref name="localEpoch"/>, not yet established. Whole messages the peer had not acknowledged move to
    /// its start, renumbered from 0, and go out once the new handshake is done: when the peer expired the old
    /// conversation none of them reached it (it expires one only after hearing nothing for IdleTimeout while this side,
    /// with something unacknowledged, would have been retransmitting), so nothing is lost or duplicated; when it
    /// restarted, they may have reached its previous incarnation. A message whose first segments were acknowledged
    /// cannot be finished in a new conversation: it is dropped, and returned (0 or 1) as lost. Receive state is dropped
    /// (what the peer had not finished sending is its own to resend). No allocation: the send ring is rotated in place.
    /// </summary>
    internal int Renew(uint localEpoch)
    {
        int lost = 0;
        if (!_baseStartsMessage)
        {
            lost = 1;
            while (_sendBase < _nextSeq)
            {
                ref var segment = ref _send[_sendBase % (ulong)_send.Length];
                bool last = segment.Last;
                Release(ref segment);
                _sendBase++;
                if (last)
                {
                    break;
                }
            }
        }

        // Segment seq s sits at index s % capacity; renumbered s - base, it belongs base % capacity places earlier.
        if (_send.Length > 0)
        {
            var ring = _send.AsSpan();
            int shift = (int)(_sendBase % (ulong)_send.Length);
            ring[..shift].Reverse();
            ring[shift..].Reverse();
            ring.Reverse();
        }

        int carried = (int)(_nextSeq - _sendBase);
        for (int i = 0; i < carried; i++)
        {
            ref var segment = ref _send[i];
            segment.Acked = false;
            segment.Retransmitted = false;
            segment.SentAt = TimeSpan.MinValue;
        }

        _sendBase = _nextToTransmit = 0;
        _nextSeq = (ulong)carried;
        _baseStartsMessage = true;
        DropReceiveState();
        _owner.Scheduler.Cancel(_rtoAlarm);
        _owner.Scheduler.Cancel(_ackAlarm);
        _timeouts = 0;
        _rto = _srtt > TimeSpan.Zero ? ComputedRto() : _options.HandshakeRto; // the path is the same: keep its estimate
        IsEstablished = false;
        PeerEpoch = 0;
        _cookie = UInt128.Zero;
        LocalEpoch = localEpoch;
        return lost; // a sender waiting for room hears of it with the new conversation's first acknowledgement
    }

    /// <summary>Acknowledges at once: the answering side's acceptance of a handshake (its first acknowledgement tells
    /// the opener our number), repeated when the opener repeats its connect.</summary>
    internal void SendAckNow() => SendAck();

    private void DropReceiveState()
    {
        ReleaseAssembly();
        _discarding = false;
        _unackedArrivals = 0;
        _expected = 0;
        for (int i = 0; i < _reorder.Length; i++)
        {
            if (_reorder[i].Buffer is { } b)
            {
                ArrayPool<byte>.Shared.Return(b);
                _reorder[i].Buffer = null;
            }
        }
    }

    private static void Release(ref Segment segment)
    {
        if (segment.Buffer is { } buffer)
        {
            ArrayPool<byte>.Shared.Return(buffer);
            segment.Buffer = null;
        }
    }

    private struct Segment
    {
        public byte[]? Buffer;
        public int Length;
        public ulong Seq;
        public TimeSpan SentAt;
        public bool Acked;
        public bool Retransmitted;
        public bool Last;           // ends its message
    }
}
