using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Pages;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>One file's progress at a client.</summary>
public sealed record FileProgress(string Name, long Size, int PagesHeld, int Pages, bool Verified);

/// <summary>Client counters.</summary>
public sealed class ClientCounters
{
    public long DataPackets { get; internal set; }
    public long UsefulPackets { get; internal set; }
    public long PagesDecoded { get; internal set; }
    public long PagesRebuilt { get; internal set; }
    public long NaksSent { get; internal set; }
    public long SkippedForCapacity { get; internal set; }
    /// <summary>Incomplete pages dropped (their packets forgotten; the next NAK asks for the whole page).</summary>
    public long PartialsEvicted { get; internal set; }

    /// <summary>Incomplete pages moved from memory to the store (<see cref="ClientOptions.MaxPartialPages"/>).</summary>
    public long PartialsSpilled { get; internal set; }
    public long TrackedOverflow { get; internal set; }
    public long WantRefreshes { get; internal set; }

    /// <summary>NAK checks put off because the alarm fired more than <see cref="ClientOptions.LateAlarm"/> late.</summary>
    public long LateAlarms { get; internal set; }
    public long VerifyFailures { get; internal set; }
    public long AnnounceDatagrams { get; internal set; }
    public long AnnounceGaps { get; internal set; }
    public long RequestBytesSent { get; internal set; }

    /// <summary>Followed transmissions the server withdrew (announced with 0 packets: given back unsent).</summary>
    public long Withdrawn { get; internal set; }

    /// <summary>Announcements that moved a followed page later by more than <see cref="ClientOptions.EndGrace"/> (the
    /// server re-timed its queue).</summary>
    public long Retimed { get; internal set; }

    /// <summary>A copy (read on the client's thread, handed to another).</summary>
    public ClientCounters Snapshot() => (ClientCounters)MemberwiseClone();
}

/// <summary>
/// The dissemination client as a state machine without I/O: it sends frames through an <see cref="IRequestLink"/>,
/// takes replies through <see cref="OnFrame"/> and multicast datagrams through <see cref="OnDatagram"/>, joins and
/// leaves groups on its <see cref="IDatagramTransport"/>, and keeps time with alarms. Pages go to an
/// <see cref="IPageStore"/> as they decode; each file is verified (SHA-256) when its last page is written.
/// </summary>
/// <remarks>
/// It stays on the announcement channel, joins a data channel when a page it lacks is announced there and it has
/// capacity left, and leaves when no page it lacks is due on it. When a transmission of a page it lacks ends (its
/// announced end plus <see cref="ClientOptions.EndGrace"/>, plus a random delay up to
/// <see cref="ClientOptions.NakDelayMax"/>), it NAKs with the count of packets it still needs; a page it skipped for
/// capacity is NAKed as wholly lost. Packets of a page are kept across transmissions (<see cref="PartialPages"/>: in
/// memory, then spilled to the store), so a repair-only retransmission completes it.
/// </remarks>
public sealed class DisseminationClient : IDatagramHandler
{
    private readonly ClientOptions _options;
    private readonly IReadOnlyList<string> _names;
    private readonly IAlarmScheduler _clock;
    private readonly IDatagramTransport _transport;
    private readonly IRequestLink _link;
    private readonly IPageStore _store;
    private readonly Random _random;
    private readonly FrameWriter _writer = new();
    private readonly Dictionary<ulong, FileState> _files = new();
    private readonly Dictionary<ushort, FileState> _byNumber = new();
    private readonly Dictionary<uint, Tracked> _tracked = new();
    private readonly List<uint> _due = new();
    private readonly Alarm _alarm;
    private readonly byte[] _nakBuffer = new byte[24];
    private WelcomeMessage? _welcome;
    private PageOptions? _pages;
    private PartialPages? _partials;
    private int[] _channelUse = Array.Empty<int>();
    private bool[] _channelJoined = Array.Empty<bool>();
    private TimeSpan[] _channelIdleSince = Array.Empty<TimeSpan>();
    private TimeSpan[] _channelLag = Array.Empty<TimeSpan>();
    private int _joined;
    private TimeSpan _interval;
    private TimeSpan _lastProgress;
    private uint _lastAnnounceSeq;
    private bool _announceSeen;
    private int _filesLeft = -1;

    /// <summary>The last alarm fired late and was put off (the next one runs whatever its lateness).</summary>
    private bool _putOff;

    public DisseminationClient(ClientOptions options, IReadOnlyList<string> names, IAlarmScheduler clock, IDatagramTransport transport, IRequestLink link, IPageStore store, Random random)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        ArgumentNullException.ThrowIfNull(names);
        if (names.Count == 0 || names.Count > Wire.MaxNamesPerRequest)
        {
            throw new ArgumentOutOfRangeException(nameof(names), names.Count, $"A client requests between 1 and {Wire.MaxNamesPerRequest} files.");
        }

        _options = options;
        _names = names;
        _clock = clock ?? throw new ArgumentNullException(nameof(clock));
        _transport = transport ?? throw new ArgumentNullException(nameof(transport));
        _link = link ?? throw new ArgumentNullException(nameof(link));
        _store = store ?? throw new ArgumentNullException(nameof(store));
        _random = random ?? throw new ArgumentNullException(nameof(random));
        _alarm = new Alarm(_ => OnAlarm());
        _transport.SetHandler(this);
    }

    public ClientCounters Counters { get; } = new();

    public EnumCounters<DisseminationDrop> Drops { get; } = new();

    /// <summary>Every requested file that exists is written and verified.</summary>
    public bool IsComplete => _filesLeft == 0;

    /// <summary>Names the server does not have.</summary>
    public IReadOnlyList<string> NotFound { get; private set; } = Array.Empty<string>();

    /// <summary>Virtual (or core) time at which the client completed.</summary>
    public TimeSpan CompletedAt { get; private set; }

    /// <summary>Virtual (or core) time of the first data packet of a requested file, or null before one came: from
    /// here to <see cref="CompletedAt"/> is the data phase, the client's transfer rate without its start-up, the
    /// request round trip and the server's announcement delay.</summary>
    public TimeSpan? FirstDataAt { get; private set; }

    /// <summary>Raised when a file is written and verified.</summary>
    public event Action<FileEntry>? FileCompleted;

    /// <summary>Pages held and pages in all over the requested files (progress).</summary>
    public (long Held, long Total) Progress
    {
        get
        {
            long held = 0, total = 0;
            foreach (var f in _files.Values)
            {
                held += f.PageCount - f.Missing;
                total += f.PageCount;
            }

            return (held, total);
        }
    }

    /// <summary>Per file: name, pages held, pages in all, verified (progress bars).</summary>
    public IEnumerable<FileProgress> Files => _files.Values.Select(f => new FileProgress(f.Entry.Name, f.Entry.Size, f.PageCount - f.Missing, f.PageCount, f.Verified));

    /// <summary>Sends the request (the request channel has just opened).</summary>
    public void Start()
    {
        Wire.WriteRequest(_writer, new RequestMessage((byte)_options.Capacity, _names));
        Send(_writer.Written);
        _lastProgress = _clock.Now;
    }

    private void Send(ReadOnlySpan<byte> frame)
    {
        Counters.RequestBytesSent += frame.Length;
        _link.Send(frame);
    }

    /// <summary>One frame from the server.</summary>
    public void OnFrame(ReadOnlySpan<byte> frame)
    {
        if (Wire.PeekType(frame, out var type) is { } error)
        {
            Drops.Increment(error);
            return;
        }

        if (type != MessageType.Welcome)
        {
            Drops.Increment(DisseminationDrop.BadType);
            return;
        }

        if (_welcome is not null)
        {
            Drops.Increment(DisseminationDrop.OutOfOrder);
            return;
        }

        if (!Wire.TryReadWelcome(frame, out var welcome) || welcome.Files.Count != _names.Count)
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        _welcome = welcome;
        _pages = new PageOptions { PacketPayload = welcome.PacketPayload, PageSize = welcome.PageSize };
        _partials = new PartialPages(_options, _pages, _store, Counters);
        _interval = TimeSpan.FromTicks(Math.Max(1, (Wire.DataHeaderBytes + welcome.PacketPayload) * TimeSpan.TicksPerSecond / welcome.ChannelBytesPerSecond));
        _channelUse = new int[welcome.Channels.Count];
        _channelJoined = new bool[welcome.Channels.Count];
        _channelIdleSince = new TimeSpan[welcome.Channels.Count];
        _channelLag = new TimeSpan[welcome.Channels.Count];
        var notFound = new List<string>();
        _filesLeft = 0;
        for (int i = 0; i < welcome.Files.Count; i++)
        {
            var wf = welcome.Files[i];
            if (!wf.Found || wf.Name != _names[i])
            {
                notFound.Add(_names[i]);
                continue;
            }

            var entry = new FileEntry(wf.Name, wf.Size, wf.Sha256);
            if (entry.FileId != wf.FileId || _files.ContainsKey(entry.FileId) || _byNumber.ContainsKey(wf.Number))
            {
                Drops.Increment(DisseminationDrop.OutOfRange);
                notFound.Add(_names[i]);
                continue;
            }

            var state = new FileState(entry, (ushort)i, (int)_pages.PageCount(wf.Size));
            _store.Prepare(entry, _pages);
            for (int p = 0; p < state.PageCount; p++)
            {
                state.Held[p] = _store.HasPage(entry, p);
                if (!state.Held[p])
                {
                    state.Missing++;
                }
            }

            _files.Add(entry.FileId, state);
            _byNumber.Add(wf.Number, state);
            _filesLeft++;
        }

        NotFound = notFound;
        _transport.JoinGroup(welcome.Announce);
        if (_filesLeft > 0)
        {
            // Subscribe up to capacity at once (seed §3.2.1: "as many data channels as its capacity allows"), so the
            // first pages find the client listening; a channel with nothing for it is left after LeaveAfter.
            var now = _clock.Now;
            for (int c = 0; c < _channelJoined.Length && _joined < _options.Capacity; c++)
            {
                _transport.JoinGroup(welcome.Channels[c]);
                _channelJoined[c] = true;
                _channelIdleSince[c] = now;
                _joined++;
            }
        }
        foreach (var state in _files.Values)
        {
            if (state.Missing == 0)
            {
                FinishFile(state);
            }
            else
            {
                SendWant(state);
            }
        }

        CheckComplete();
        Rearm();
    }

    private void SendWant(FileState state)
    {
        var runs = new List<PageRun>();
        int p = 0;
        while (p < state.PageCount)
        {
            if (state.Held[p])
            {
                p++;
                continue;
            }

            int first = p;
            while (p < state.PageCount && !state.Held[p])
            {
                p++;
            }

            runs.Add(new PageRun((uint)first, (uint)(p - first)));
            if (runs.Count == Wire.MaxRunsPerWant)
            {
                Wire.WriteWant(_writer, state.Ordinal, runs.ToArray());
                Send(_writer.Written);
                runs.Clear();
            }
        }

        if (runs.Count > 0)
        {
            Wire.WriteWant(_writer, state.Ordinal, runs.ToArray());
            Send(_writer.Written);
        }
    }

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (_welcome is null)
        {
            Drops.Increment(DisseminationDrop.OutOfOrder);
            return;
        }

        if (Wire.PeekType(datagram, out var type) is { } error)
        {
            Drops.Increment(error);
            return;
        }

        if (type == MessageType.Announce)
        {
            OnAnnounce(datagram);
        }
        else if (type == MessageType.Data)
        {
            OnData(datagram);
        }
        else
        {
            Drops.Increment(DisseminationDrop.BadType);
        }
    }

    private void OnAnnounce(ReadOnlySpan<byte> datagram)
    {
        if (!Wire.TryReadAnnounce(datagram, out int count, out uint seq))
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        Counters.AnnounceDatagrams++;
        if (_announceSeen && seq != _lastAnnounceSeq + 1 && (int)(seq - _lastAnnounceSeq) > 0)
        {
            Counters.AnnounceGaps++;
        }

        if (!_announceSeen || (int)(seq - _lastAnnounceSeq) > 0)
        {
            _lastAnnounceSeq = seq;
            _announceSeen = true;
        }

        var now = _clock.Now;
        for (int i = 0; i < count; i++)
        {
            var e = Wire.ReadAnnounceEntry(datagram, i);
            if (e.Channel >= _channelUse.Length || !Locate(e.FileId, e.Offset, out var file, out int page, out int k) || e.K != k)
            {
                Drops.Increment(DisseminationDrop.OutOfRange);
                continue;
            }

            if (e.Count == 0)
            {
                // Withdrawn: the server gave the page back unsent (its pacer re-timed the queue); it will be announced
                // again under a new transmission. Nothing to NAK.
                if (_tracked.Remove(e.Transmission, out var withdrawn))
                {
                    Release(withdrawn);
                    Counters.Withdrawn++;
                }

                continue;
            }

            if (file.Held[page])
            {
                continue;
            }

            var start = now + TimeSpan.FromTicks((long)e.StartDelayMicros * 10);
            var end = start + TimeSpan.FromTicks((long)e.DurationMicros * 10);
            if (Track(e.Transmission, e.Channel, file, page, k, end) is not { } t)
            {
                continue;
            }

            if (!t.HasStart)
            {
                t.Start = start;
                t.HasStart = true;
            }
            else if (end > t.End)
            {
                // Announced again, later: the server's core could not keep the schedule and re-timed its queue. The
                // page, its NAK and the schedule its packets are measured against move later, by at most
                // MaxScheduleLag in all (as a data packet's own lag is bounded), so forged announcements cannot put
                // a NAK off for long.
                var left = _options.MaxScheduleLag - t.Retimed;
                var by = end - t.End < left ? end - t.End : left;
                if (by <= TimeSpan.Zero)
                {
                    continue;
                }

                t.Retimed += by;
                t.End += by;
                t.NakAt += by;
                if (start > t.Start)
                {
                    t.Start = start < t.Start + by ? start : t.Start + by;
                }

                if (by > _options.EndGrace)
                {
                    Counters.Retimed++; // not the copies' own jitter (each copy's times are relative to when it left)
                }
            }
        }

        Rearm();
    }

    /// <summary>Starts following a transmission of a page this client lacks (from its announcement, or its first
    /// packet when every announcement copy was lost).</summary>
    private Tracked? Track(uint transmission, int channel, FileState file, int page, int k, TimeSpan end)
    {
        if (_tracked.TryGetValue(transmission, out var t))
        {
            return t;
        }

        if (_tracked.Count >= _options.MaxTracked)
        {
            Counters.TrackedOverflow++;
            return null;
        }

        // A page already followed on another transmission (a NAK crossed a new transmission): follow both.
        t = new Tracked(transmission, channel, file, page, k, end);
        if (!_channelJoined[channel])
        {
            if (_joined >= _options.Capacity)
            {
                LeaveOneIdleChannel();
            }

            if (_joined >= _options.Capacity)
            {
                t.Skipped = true;
                Counters.SkippedForCapacity++;
            }
            else
            {
                _transport.JoinGroup(_welcome!.Channels[channel]);
                _channelJoined[channel] = true;
                _joined++;
            }
        }

        if (!t.Skipped)
        {
            _channelUse[channel]++;
        }

        t.NakAt = end + _options.EndGrace + TimeSpan.FromTicks((long)(_random.NextDouble() * _options.NakDelayMax.Ticks));
        _tracked.Add(transmission, t);
        return t;
    }

    private bool Locate(ulong fileId, ulong offset, out FileState file, out int page, out int k)
    {
        page = 0;
        k = 0;
        if (!_files.TryGetValue(fileId, out file!) || offset % (ulong)_pages!.PageSize != 0 || offset >= (ulong)file.Entry.Size)
        {
            return false;
        }

        page = (int)(offset / (ulong)_pages.PageSize);
        k = _pages.PacketsIn(_pages.PageLength(file.Entry.Size, page));
        return true;
    }

    private void OnData(ReadOnlySpan<byte> datagram)
    {
        Counters.DataPackets++;
        var pages = _pages!;
        if (!Wire.TryReadDataHeader(datagram, out var h) || datagram.Length != Wire.DataHeaderBytes + pages.PacketPayload)
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        if (!_byNumber.TryGetValue(h.File, out var file))
        {
            Drops.Increment(DisseminationDrop.Unknown);
            return;
        }

        if (h.Page >= (uint)file.PageCount || h.Channel >= _channelUse.Length)
        {
            Drops.Increment(DisseminationDrop.OutOfRange);
            return;
        }

        FirstDataAt ??= _clock.Now;
        int page = (int)h.Page;
        int k = pages.PacketsIn(pages.PageLength(file.Entry.Size, page));

        if (file.Held[page])
        {
            return;
        }

        var now = _clock.Now;
        var packetsEnd = now + (_interval * (h.Count - h.Seq));
        bool known = _tracked.TryGetValue(h.Transmission, out var tracked);
        if (known && tracked!.HasStart)
        {
            // How far behind its announced schedule this channel's packets arrive (the server's core or this one busy):
            // NAKs and leaving the channel wait that much longer (bounded: a forged packet cannot postpone them long).
            var lag = now - (tracked.Start + (_interval * h.Seq));
            _channelLag[h.Channel] = lag <= TimeSpan.Zero ? TimeSpan.Zero : lag < _options.MaxScheduleLag ? lag : _options.MaxScheduleLag;
        }

        if (!known)
        {
            // Missed every announcement copy: follow it from here (the end is as far as the packets left).
            tracked = Track(h.Transmission, h.Channel, file, page, k, packetsEnd);
            known = tracked is not null;
            if (known)
            {
                Rearm();
            }
        }
        else if (packetsEnd > tracked!.End)
        {
            // The server runs behind its announced schedule (a busy core): the transmission ends when its packets say,
            // so the NAK waits for them instead of asking for packets still on their way. Moved later only, so the
            // alarm armed for the old time fires early and re-arms itself.
            tracked.NakAt += packetsEnd - tracked.End;
            tracked.End = packetsEnd;
        }

        if (_partials!.Receive(file.Entry, page, k, h.Index, datagram[Wire.DataHeaderBytes..]))
        {
            if (known)
            {
                // Held: nothing to NAK, so stop following this transmission now rather than at its NAK time (a
                // table full of finished pages would turn new ones away, TrackedOverflow).
                Release(tracked!);
                _tracked.Remove(h.Transmission);
            }

            file.Held[page] = true;
            file.Missing--;
            Counters.PagesDecoded++;
            _lastProgress = _clock.Now;
            if (file.Missing == 0)
            {
                FinishFile(file);
                CheckComplete();
            }
        }
    }

    private void FinishFile(FileState file)
    {
        if (_store.Verify(file.Entry))
        {
            file.Verified = true;
            _filesLeft--;
            FileCompleted?.Invoke(file.Entry);
            return;
        }

        // The pages decoded but the whole does not match the list's SHA-256: start the file again.
        Counters.VerifyFailures++;
        _store.Discard(file.Entry);
        Array.Clear(file.Held);
        file.Missing = file.PageCount;
        SendWant(file);
    }

    private void CheckComplete()
    {
        if (_filesLeft == 0 && CompletedAt == TimeSpan.Zero)
        {
            CompletedAt = _clock.Now;
            Send(_nakBuffer.AsSpan(0, Wire.WriteDone(_nakBuffer)));
            foreach (var t in _tracked.Values)
            {
                Release(t);
            }

            _tracked.Clear();
            for (int c = 0; c < _channelJoined.Length; c++)
            {
                Leave(c);
            }

            _transport.LeaveGroup(_welcome!.Announce);
            _clock.Cancel(_alarm);
        }
    }

    private void Release(Tracked t)
    {
        if (t.Skipped || t.Released)
        {
            return;
        }

        t.Released = true;
        if (--_channelUse[t.Channel] == 0)
        {
            // Not left at once: the next page on it is usually announced a moment later, and a socket closed between
            // two pages loses what it had queued (a busy core reads it late) and misses what comes before the join.
            _channelIdleSince[t.Channel] = _clock.Now;
        }
    }

    private void Leave(int channel)
    {
        if (_channelJoined[channel])
        {
            _transport.LeaveGroup(_welcome!.Channels[channel]);
            _channelJoined[channel] = false;
            _joined--;
        }
    }

    /// <summary>At capacity, a channel joined but idle makes room for one with a page this client lacks.</summary>
    private void LeaveOneIdleChannel()
    {
        for (int c = 0; c < _channelJoined.Length; c++)
        {
            if (_channelJoined[c] && _channelUse[c] == 0)
            {
                Leave(c);
                return;
            }
        }
    }

    /// <summary>Leaves the channels idle for <see cref="ClientOptions.LeaveAfter"/>; returns the next such deadline.</summary>
    private TimeSpan LeaveIdleChannels(TimeSpan now, TimeSpan next)
    {
        for (int c = 0; c < _channelJoined.Length; c++)
        {
            if (_channelJoined[c] && _channelUse[c] == 0)
            {
                var at = _channelIdleSince[c] + _options.LeaveAfter;
                if (now >= at)
                {
                    Leave(c);
                }
                else if (at < next)
                {
                    next = at;
                }
            }
        }

        return next;
    }

    private void OnAlarm()
    {
        if (IsComplete)
        {
            return;
        }

        var now = _clock.Now;
        if (now - _alarm.Deadline > _options.LateAlarm && !_putOff)
        {
            // The alarm fired late: this core was held up, and the datagrams that came meanwhile are probably still
            // waiting to be read. NAKing now would ask for packets already here; look again once they are read.
            // Once: a core late at every alarm would otherwise never NAK at all.
            Counters.LateAlarms++;
            _putOff = true;
            _clock.Cancel(_alarm);
            _clock.Schedule(_alarm, now + _options.LateAlarm);
            return;
        }

        _putOff = false;

        _due.Clear();
        foreach (var (id, t) in _tracked)
        {
            var lag = _channelLag[t.Channel];
            if (now >= t.End + _options.EndGrace + lag)
            {
                Release(t);
            }

            if (now >= t.NakAt + lag)
            {
                _due.Add(id);
            }
        }

        foreach (uint id in _due)
        {
            _tracked.Remove(id, out var t);
            if (!t!.File.Held[t.Page])
            {
                int held = _partials!.Held(t.File.Entry.FileId, (ulong)t.Page * (ulong)_pages!.PageSize);
                int lost = Math.Clamp(t.K - held, 1, t.K);
                int length = Wire.WriteNak(_nakBuffer, new NakMessage(t.File.Entry.FileId, (ulong)t.Page * (ulong)_pages.PageSize, t.Id, (byte)lost));
                Send(_nakBuffer.AsSpan(0, length));
                Counters.NaksSent++;
            }
        }

        if (now - _lastProgress >= _options.StallTimeout)
        {
            _lastProgress = now;
            foreach (var f in _files.Values)
            {
                if (f.Missing > 0)
                {
                    Counters.WantRefreshes++;
                    SendWant(f);
                }
            }
        }

        Rearm();
    }

    private void Rearm()
    {
        if (IsComplete || _welcome is null)
        {
            return;
        }

        var next = LeaveIdleChannels(_clock.Now, _lastProgress + _options.StallTimeout);
        foreach (var t in _tracked.Values)
        {
            var lag = _channelLag[t.Channel];
            if (!t.Released && !t.Skipped && t.End + _options.EndGrace + lag < next)
            {
                next = t.End + _options.EndGrace + lag;
            }

            if (t.NakAt + lag < next)
            {
                next = t.NakAt + lag;
            }
        }

        if (!_alarm.IsScheduled || _alarm.Deadline != next)
        {
            _clock.Cancel(_alarm);
            _clock.Schedule(_alarm, next);
        }
    }

    private sealed class FileState(FileEntry entry, ushort ordinal, int pageCount)
    {
        public FileEntry Entry { get; } = entry;
        public ushort Ordinal { get; } = ordinal;
        public int PageCount { get; } = pageCount;
        public bool[] Held { get; } = new bool[pageCount];
        public int Missing { get; set; }
        public bool Verified { get; set; }
    }

    private sealed class Tracked(uint id, int channel, FileState file, int page, int k, TimeSpan end)
    {
        public uint Id { get; } = id;
        public int Channel { get; } = channel;
        public FileState File { get; } = file;
        public int Page { get; } = page;
        public int K { get; } = k;
        public TimeSpan End { get; set; } = end;
        public TimeSpan NakAt { get; set; }

        /// <summary>The announced start of its first packet (known when an announcement was seen).</summary>
        public TimeSpan Start { get; set; }
        public bool HasStart { get; set; }

        /// <summary>How much later re-announcements have moved it (at most <see cref="ClientOptions.MaxScheduleLag"/>).</summary>
        public TimeSpan Retimed { get; set; }
        public bool Skipped { get; set; }
        public bool Released { get; set; }
    }
}
