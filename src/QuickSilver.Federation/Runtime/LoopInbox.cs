namespace QuickSilver.Federation.Runtime;

/// <summary>One event in a <see cref="LoopInbox"/>: what it is (the owner's code), a number and an object the owner
/// gives it meaning by (a peer, a native channel, an action), and where its payload sits in the inbox.</summary>
internal struct InboxRecord
{
    public byte Kind;
    public uint Key;
    public object? Target;
    public int Offset;
    public int Length;
}

/// <summary>What a loop does with each event it drains.</summary>
internal interface IInboxHandler
{
    void Handle(in InboxRecord record, ReadOnlySpan<byte> payload);
}

/// <summary>
/// The queue into a runtime's loop thread (the core's shape, principle 2: one thread owns the state, other threads
/// reach it through a queue and a wake-up). Any thread writes an event: a kind, a key, an optional object and a payload
/// copied into the inbox's own buffer, so a packet crossing into the loop costs one copy and no allocation (no closure,
/// no array). The loop takes everything written since its last turn in one swap of two halves, and reads the payloads
/// in place. Events come out in the order they went in (one FIFO for data and control, so a peer's HELLO is handled
/// before its first DATA frame).
/// <para>Bounded (principle 4): each half holds at most <see cref="RecordCapacity"/> events and
/// <see cref="ByteCapacity"/> payload bytes. At the bound <see cref="TryWrite"/> refuses (the caller drops and counts:
/// datagrams), and <see cref="Write"/> waits until the loop has swapped (TCP readers: back-pressure on the
/// connection).</para>
/// </summary>
internal sealed class LoopInbox
{
    /// <summary>Events per half: 65,536 in both halves, the depth of the queue this replaced. A deeper queue would only
    /// add delay when a loop falls behind (at 100,000 packets a second, 65,536 waiting are 0.66 s).</summary>
    public const int DefaultRecords = 32_768;

    /// <summary>Payload bytes per half (about 8,000 packets of 1,000 B).</summary>
    public const int DefaultBytes = 8 << 20;

    private readonly object _lock = new(); // also the monitor the loop and blocked writers wait on
    private Half _fill;
    private Half _drain;
    private bool _loopWaiting; // under _lock
    private int _writersWaiting; // under _lock
    private bool _closed;

    public LoopInbox(int recordCapacity = DefaultRecords, int byteCapacity = DefaultBytes)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(recordCapacity, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(byteCapacity, 1);
        RecordCapacity = recordCapacity;
        ByteCapacity = byteCapacity;
        _fill = new Half(recordCapacity, byteCapacity);
        _drain = new Half(recordCapacity, byteCapacity);
    }

    public int RecordCapacity { get; }

    public int ByteCapacity { get; }

    /// <summary>Writes an event unless the inbox is full or closed. Any thread.</summary>
    public bool TryWrite(byte kind, uint key, object? target, ReadOnlySpan<byte> payload)
    {
        lock (_lock)
        {
            if (_closed || !_fill.TryAdd(kind, key, target, payload))
            {
                return false;
            }

            if (_loopWaiting)
            {
                _loopWaiting = false;
                Monitor.PulseAll(_lock);
            }

            return true;
        }
    }

    /// <summary>Writes an event, waiting for the loop to make room when the inbox is full; false when the inbox is
    /// closed or the payload can never fit. Never on the loop thread (it would wait for itself).</summary>
    public bool Write(byte kind, uint key, object? target, ReadOnlySpan<byte> payload)
    {
        if (payload.Length > ByteCapacity)
        {
            return false;
        }

        lock (_lock)
        {
            while (!_closed)
            {
                if (_fill.TryAdd(kind, key, target, payload))
                {
                    if (_loopWaiting)
                    {
                        _loopWaiting = false;
                        Monitor.PulseAll(_lock);
                    }

                    return true;
                }

                _writersWaiting++;
                Monitor.Wait(_lock, TimeSpan.FromMilliseconds(100));
                _writersWaiting--;
            }

            return false;
        }
    }

    /// <summary>Handles every event written before this call, in order, on the calling (loop) thread; returns how
    /// many.</summary>
    public int Drain<THandler>(ref THandler handler)
        where THandler : IInboxHandler
    {
        lock (_lock)
        {
            if (_fill.Count == 0)
            {
                return 0;
            }

            (_fill, _drain) = (_drain, _fill);
            if (_writersWaiting > 0)
            {
                Monitor.PulseAll(_lock); // room again
            }
        }

        var half = _drain;
        int count = half.Count;
        try
        {
            for (int i = 0; i < count; i++)
            {
                ref var record = ref half.Records[i];
                handler.Handle(record, half.Bytes.AsSpan(record.Offset, record.Length));
                record.Target = null;
            }
        }
        finally
        {
            half.Clear();
        }

        return count;
    }

    /// <summary>Waits until an event is written, <see cref="Close"/>, or <paramref name="timeout"/>; true when there is
    /// something to drain. The loop thread only.</summary>
    public bool WaitForWork(TimeSpan timeout)
    {
        lock (_lock)
        {
            if (_fill.Count == 0 && !_closed && timeout > TimeSpan.Zero)
            {
                _loopWaiting = true;
                Monitor.Wait(_lock, timeout);
                _loopWaiting = false;
            }

            return _fill.Count > 0;
        }
    }

    /// <summary>Refuses further writes and wakes the loop and any waiting writer.</summary>
    public void Close()
    {
        lock (_lock)
        {
            _closed = true;
            Monitor.PulseAll(_lock);
        }
    }

    private sealed class Half
    {
        public readonly InboxRecord[] Records;
        public readonly byte[] Bytes;
        public int Count;
        public int Used;

        public Half(int records, int bytes)
        {
            Records = new InboxRecord[records];
            Bytes = GC.AllocateUninitializedArray<byte>(bytes, pinned: false);
            // Touch every page now, so the first burst of packets does not pay the page faults.
            for (int i = 0; i < bytes; i += 4096)
            {
                Bytes[i] = 0;
            }
        }

        public bool TryAdd(byte kind, uint key, object? target, ReadOnlySpan<byte> payload)
        {
            if (Count == Records.Length || Used + payload.Length > Bytes.Length)
            {
                return false;
            }

            payload.CopyTo(Bytes.AsSpan(Used));
            Records[Count++] = new InboxRecord { Kind = kind, Key = key, Target = target, Offset = Used, Length = payload.Length };
            Used += payload.Length;
            return true;
        }

        public void Clear()
        {
            Count = 0;
            Used = 0;
        }
    }
}
