using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Scheduling;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>Server counters (read on the owning thread, or after the simulation stops).</summary>
public sealed class ServerCounters
{
    public long Transmissions { get; internal set; }
    public long RepairOnlyTransmissions { get; internal set; }
    public long SourcePacketsSent { get; internal set; }
    public long RepairPacketsSent { get; internal set; }

    /// <summary>Repair packets added by the redundancy rule (the seed's or the adaptive one) beyond what NAKs asked for.</summary>
    public long ProactiveRepairPackets { get; internal set; }
    public long DataBytesSent { get; internal set; }
    public long AnnounceDatagrams { get; internal set; }
    public long AnnounceBytes { get; internal set; }
    public long FramesReceived { get; internal set; }
    public long RequestBytesReceived { get; internal set; }
    public long ReplyBytesSent { get; internal set; }
    public long NaksAccepted { get; internal set; }

    /// <summary>Accepted NAKs for a transmission the server had not finished sending (the client NAKed packets still
    /// queued here: a schedule the server did not keep).</summary>
    public long EarlyNaks { get; internal set; }
    public long ClientsRefused { get; internal set; }

    /// <summary>Datagrams the transport refused (its send ring full); the clients NAK what they miss.</summary>
    public long SendFailures { get; internal set; }

    /// <summary>Times a data channel fell more than <see cref="ServerOptions.MaxSendLag"/> behind its schedule and slowed
    /// to the rate its core achieved (<see cref="SendPacer"/>), and the schedule time those slips forgave.</summary>
    public long PacingSlips { get; internal set; }

    /// <summary>A data channel's pacing interval, µs, when the counters were read (the cap's, or longer).</summary>
    public double ChannelIntervalMicros { get; internal set; }

    /// <summary>Pages taken ahead and given back to the book unsent when the pacer re-timed their channel's queue and
    /// found them too far off.</summary>
    public long Untaken { get; internal set; }
    public TimeSpan PacingForgiven { get; internal set; }

    /// <summary>Scheduler decisions, and (client, item) pairs the decisions read: the scheduler's work.</summary>
    public long Decisions { get; internal set; }

    /// <summary>Ticks of <see cref="DisseminationServer.WorkTimer"/> spent inside the server's handlers (0 without a timer).</summary>
    public long BusyTicks { get; internal set; }
    public long PairsExamined { get; internal set; }

    /// <summary>A copy (read on the server's thread, handed to another).</summary>
    public ServerCounters Snapshot() => (ServerCounters)MemberwiseClone();

    internal ServerCounters WithInterval(TimeSpan interval)
    {
        ChannelIntervalMicros = interval.TotalMicroseconds;
        return this;
    }
}

/// <summary>
/// The dissemination server (seed 001, Figure 2) as a state machine without I/O: request frames arrive through
/// <see cref="OnFrame"/>, time through alarms on an <see cref="IAlarmScheduler"/>, and it acts only by sending
/// multicast datagrams on an <see cref="IDatagramTransport"/> and frames through <see cref="IClientLinks"/>.
/// One thread drives it (the core thread, or the simulator).
/// </summary>
/// <remarks>
/// Per data channel: when the channel's current page is within <see cref="ServerOptions.AnnounceDelay"/> of its end
/// (or the channel is idle), its scheduler picks the next item; every request for it is taken at once (silence will
/// mean success), the redundancy rule sizes it from R, it is announced, and its packets go out paced at the channel's
/// cap from max(now + AnnounceDelay, end of the current page). A valid NAK puts the page back in the book for that
/// client, remembering how many packets it still lacks; a page whose requesters all hold part of it is sent as
/// repair packets only (fresh code indices; the Cauchy code's rows do not depend on n, so packets of different
/// transmissions of a page combine at the client).
/// </remarks>
public sealed class DisseminationServer
{
    private readonly ServerOptions _options;
    private readonly FileCatalog _catalog;
    private readonly IPageSource _source;
    private readonly IAlarmScheduler _clock;
    private readonly IDatagramTransport _transport;
    private readonly IClientLinks _links;
    private readonly RequestBook _book;
    private readonly Channel[] _channels;
    private readonly SendPacer _pacer;
    private readonly Dictionary<int, ClientState> _clients = new();
    private readonly Dictionary<int, ReedSolomon> _codes = new();

    /// <summary>Transmissions taken and not yet wholly sent (being sent, or queued ahead on their channel).</summary>
    private readonly Dictionary<uint, Transmission> _inFlight = new();
    private readonly byte[] _repairCursor;
    private readonly FrameWriter _writer = new();
    private readonly List<int> _taken = new();
    private readonly List<PageRun> _runs = new();
    private readonly List<(AnnounceEntry Entry, TimeSpan Start, TimeSpan End, int CopiesLeft, TimeSpan Due)> _announcements = new();

    /// <summary>Entries in one announcement datagram, at most.</summary>
    private const int MaxAnnounceEntries = 16;
    private readonly byte[] _announceBuffer;
    private readonly Alarm _announceAlarm;
    private readonly Alarm _startAlarm;
    private bool _holding;
    private int _clientsAsking;
    private uint _transmissionId;
    private uint _announceSeq;
    private TimeSpan _lastAnnounce;
    private readonly AdaptiveRedundancy? _adaptive;

    /// <summary>Full transmissions whose requesters may still NAK, for the adaptive estimate, oldest first.</summary>
    private readonly Queue<Observation> _observing = new();
    private readonly Dictionary<uint, Observation> _observations = new();
    private readonly Stack<Observation> _observationPool = new();

    /// <summary>Transmissions observed at once, at most; past it the oldest is resolved early.</summary>
    private const int MaxObserving = 65_536;

    public DisseminationServer(ServerOptions options, FileCatalog catalog, IPageSource source, IAlarmScheduler clock, IDatagramTransport transport, IClientLinks links)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        _options = options;
        _catalog = catalog ?? throw new ArgumentNullException(nameof(catalog));
        if (catalog.Pages != options.Pages)
        {
            throw new ArgumentException("The catalog's PageOptions must be the server's ServerOptions.Pages.", nameof(catalog));
        }

        _source = source ?? throw new ArgumentNullException(nameof(source));
        _clock = clock ?? throw new ArgumentNullException(nameof(clock));
        _transport = transport ?? throw new ArgumentNullException(nameof(transport));
        _links = links ?? throw new ArgumentNullException(nameof(links));
        if (transport.MaxDatagramSize < options.DatagramBytes)
        {
            throw new ArgumentException($"The transport's MaxDatagramSize ({transport.MaxDatagramSize}) is below a data datagram ({options.DatagramBytes} bytes).", nameof(transport));
        }

        if (options.RedundancyMode == RedundancyMode.Adaptive)
        {
            _adaptive = new AdaptiveRedundancy(options.Adaptive, options.Redundancy);
        }
        _book = new RequestBook(catalog.ItemCount);
        _pacer = new SendPacer(options.PacketInterval, options.MaxSendLag, BusyChannels);
        _repairCursor = new byte[catalog.ItemCount];
        _channels = new Channel[options.DataChannels];
        for (int c = 0; c < _channels.Length; c++)
        {
            var items = Enumerable.Range(0, catalog.ItemCount).Where(i => i % options.DataChannels == c).ToArray();
            IChannelScheduler scheduler = options.Scheduler == SchedulerKind.RQ ? new RqScheduler(_book, items) : new CircularScheduler(_book, items);
            _channels[c] = new Channel(this, c, scheduler, options.DataGroup(c), options);
        }

        _book.ItemRequested += item => _channels[item % _channels.Length].Wake();
        _announceBuffer = new byte[Wire.AnnounceHeaderBytes + (MaxAnnounceEntries * Wire.AnnounceEntryBytes)];
        _announceAlarm = new Alarm(_ =>
        {
            long start = Enter();
            SendAnnouncement();
            Leave(start);
        });
        _clock.ScheduleAfter(_announceAlarm, options.HeartbeatInterval);
        _holding = options.StartWhenClients > 0;
        _startAlarm = new Alarm(_ =>
        {
            long start = Enter();
            StopHolding();
            Leave(start);
        });
    }

    /// <summary>Whether the data channels are held for <see cref="ServerOptions.StartWhenClients"/>.</summary>
    public bool IsHolding => _holding;

    private void StopHolding()
    {
        if (!_holding)
        {
            return;
        }

        _holding = false;
        _clock.Cancel(_startAlarm);
        foreach (var channel in _channels)
        {
            channel.Wake();
        }
    }

    public ServerCounters Counters { get; } = new();

    public EnumCounters<DisseminationDrop> Drops { get; } = new();

    public RequestBook Book => _book;

    /// <summary>A measurement hook for benchmarks: if set, the server reads it on entry to and exit from each
    /// handler (frames, channel and announcement alarms) and adds the difference to
    /// <see cref="ServerCounters.BusyTicks"/>. The protocol never reads it otherwise (no wall clock in the logic).</summary>
    public Func<long>? WorkTimer { get; set; }

    private long Enter() => WorkTimer?.Invoke() ?? 0;

    private void Leave(long start)
    {
        if (WorkTimer is { } timer)
        {
            Counters.BusyTicks += timer() - start;
        }
    }

    public int ClientCount => _clients.Count;

    private int BusyChannels()
    {
        int busy = 0;
        foreach (var channel in _channels)
        {
            busy += channel.IsBusy ? 1 : 0;
        }

        return busy;
    }

    /// <summary>A data channel's pacing interval now: the cap's, or longer while the core cannot keep it.</summary>
    public TimeSpan ChannelInterval => _pacer.Interval;

    /// <summary>The adaptive rule's estimate of the clients' packet loss (0 in <see cref="RedundancyMode.Paper"/> mode).</summary>
    public double LossEstimate => _adaptive?.LossEstimate ?? 0;

    /// <summary>Repair packets for a page (or a repair-only transmission of <paramref name="packets"/> lacking packets).</summary>
    private int RepairCount(int packets, int requesters) =>
        _adaptive is { } adaptive ? adaptive.RepairCount(packets, requesters) : _options.Redundancy.RepairCount(packets, requesters);

    /// <summary>Requesters that did not NAK a transmission within <see cref="AdaptiveRedundancyOptions.ResolveAfter"/>
    /// of its end lost no more than its repair packets: they go to the estimate as silences.</summary>
    private void ResolveObservations(TimeSpan now)
    {
        while (_observing.Count > 0 && (_observing.Peek().End + _options.Adaptive.ResolveAfter <= now || _observing.Count > MaxObserving))
        {
            var o = _observing.Dequeue();
            if (!o.Cancelled)
            {
                _observations.Remove(o.Id);
                _adaptive!.ObserveSilent(o.Packets, o.Repair, o.Requesters - o.Naks);
            }

            o.Cancelled = false;
            _observationPool.Push(o);
        }
    }

    /// <summary>A transmission re-timed by the pacer: its observation waits for its new end.</summary>
    private void Retimed(Transmission t)
    {
        if (_observations.TryGetValue(t.Id, out var o))
        {
            o.End = t.End;
        }
    }

    /// <summary>Gives back a page taken ahead that the pacer found too far off (never sent): its requests go back to the
    /// book as they were, it is announced as withdrawn (0 packets; clients stop following it, so they do not NAK it),
    /// and it is not observed. The scheduler picks it again in its turn, under a new transmission.</summary>
    private void Untake(Transmission t)
    {
        foreach (var (client, need) in t.Takers)
        {
            if (!_clients.TryGetValue(client, out var state))
            {
                continue;
            }

            if (state.Sent.TryGetValue(t.Item, out var sent) && sent.Transmission == t.Id)
            {
                state.Sent.Remove(t.Item);
            }

            if (need < t.K)
            {
                state.Need[t.Item] = need;
            }

            _book.Add(client, t.Item);
        }

        // Withdrawn: announced with 0 packets (replacing its copies not yet sent), so clients stop following it.
        Announce(new AnnounceEntry((byte)(t.Item % _channels.Length), t.FileId, t.Offset, t.Id, (byte)t.K, 0, 0, 0), _clock.Now, _clock.Now);
        if (_observations.Remove(t.Id, out var o))
        {
            o.Cancelled = true;
        }

        _inFlight.Remove(t.Id);
        Counters.Transmissions--;
        Counters.Untaken++;
    }

    private void Observe(Transmission t, int requesters)
    {
        var o = _observationPool.Count > 0 ? _observationPool.Pop() : new Observation();
        o.Id = t.Id;
        o.End = t.End;
        o.Packets = t.Count;
        o.Repair = t.Count - t.K;
        o.Requesters = requesters;
        o.Naks = 0;
        _observing.Enqueue(o);
        _observations[o.Id] = o;
    }

    /// <summary>A client's request channel opened.</summary>
    public void OnConnected(int client)
    {
        if (_clients.Count >= _options.MaxClients || _clients.ContainsKey(client))
        {
            Counters.ClientsRefused++;
            _links.Close(client);
            return;
        }

        _clients[client] = new ClientState();
    }

    /// <summary>A client's request channel closed (or the client said Done).</summary>
    public void OnDisconnected(int client)
    {
        if (_clients.Remove(client))
        {
            _book.RemoveClient(client);
        }
    }

    /// <summary>One request-channel frame from <paramref name="client"/>.</summary>
    public void OnFrame(int client, ReadOnlySpan<byte> frame)
    {
        long start = Enter();
        try
        {
            HandleFrame(client, frame);
        }
        finally
        {
            Leave(start);
        }
    }

    private void HandleFrame(int client, ReadOnlySpan<byte> frame)
    {
        Counters.FramesReceived++;
        Counters.RequestBytesReceived += frame.Length;
        if (!_clients.TryGetValue(client, out var state))
        {
            Drops.Increment(DisseminationDrop.OutOfOrder);
            return;
        }

        if (Wire.PeekType(frame, out var type) is { } error)
        {
            Drops.Increment(error);
            return;
        }

        switch (type)
        {
            case MessageType.Request:
                OnRequest(client, state, frame);
                break;
            case MessageType.Want:
                OnWant(client, state, frame);
                break;
            case MessageType.Nak:
                OnNak(client, state, frame);
                break;
            case MessageType.Done:
                if (frame.Length != 2)
                {
                    Drops.Increment(DisseminationDrop.Malformed);
                    return;
                }

                OnDisconnected(client);
                _links.Close(client);
                break;
            default:
                Drops.Increment(DisseminationDrop.BadType);
                break;
        }
    }

    private void OnRequest(int client, ClientState state, ReadOnlySpan<byte> frame)
    {
        if (state.Files is not null)
        {
            Drops.Increment(DisseminationDrop.OutOfOrder);
            return;
        }

        if (!Wire.TryReadRequest(frame, out var request))
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        state.Capacity = request.Capacity;
        state.Files = new int[request.Names.Count];
        var files = new List<WelcomeFile>(request.Names.Count);
        for (int i = 0; i < request.Names.Count; i++)
        {
            string name = request.Names[i];
            if (_catalog.TryFind(name, out int index) && index <= ushort.MaxValue)
            {
                var entry = _catalog.Files[index];
                state.Files[i] = index;
                files.Add(new WelcomeFile(true, name, (ushort)index, entry.FileId, entry.Size, entry.Sha256));
            }
            else
            {
                state.Files[i] = -1;
                files.Add(new WelcomeFile(false, name, 0, 0, 0, new byte[32]));
            }
        }

        var channels = new NetAddress[_channels.Length];
        for (int c = 0; c < channels.Length; c++)
        {
            channels[c] = _options.DataGroup(c);
        }

        Wire.WriteWelcome(_writer, new WelcomeMessage(_options.Pages.PacketPayload, _options.Pages.PageSize, _options.AnnounceGroup, _options.ChannelBytesPerSecond, channels, files));
        Counters.ReplyBytesSent += _writer.Length;
        _links.Send(client, _writer.Written);
    }

    private void OnWant(int client, ClientState state, ReadOnlySpan<byte> frame)
    {
        if (state.Files is null)
        {
            Drops.Increment(DisseminationDrop.OutOfOrder);
            return;
        }

        if (!Wire.TryReadWant(frame, out ushort ordinal, _runs))
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        if (ordinal >= state.Files.Length || state.Files[ordinal] < 0)
        {
            Drops.Increment(DisseminationDrop.OutOfRange);
            return;
        }

        int file = state.Files[ordinal];
        long pages = _catalog.PageCount(file);
        foreach (var run in _runs)
        {
            if ((long)run.First + run.Count > pages)
            {
                Drops.Increment(DisseminationDrop.OutOfRange);
                return;
            }
        }

        if (!state.Asked)
        {
            state.Asked = true;
            _clientsAsking++;
            if (_holding && _clientsAsking == 1)
            {
                _clock.ScheduleAfter(_startAlarm, _options.StartWaitMax);
            }
        }

        int first = _catalog.FirstItem(file);
        foreach (var run in _runs)
        {
            for (long p = run.First; p < run.First + run.Count; p++)
            {
                int item = first + (int)p;
                state.Need.Remove(item);
                state.Sent.Remove(item);
                _book.Add(client, item);
            }
        }

        if (_holding && _clientsAsking >= _options.StartWhenClients)
        {
            StopHolding();
        }
    }

    private void OnNak(int client, ClientState state, ReadOnlySpan<byte> frame)
    {
        if (!Wire.TryReadNak(frame, out var nak))
        {
            Drops.Increment(DisseminationDrop.Malformed);
            return;
        }

        if (!_catalog.TryFindId(nak.FileId, out int file) || state.Files is null || Array.IndexOf(state.Files, file) < 0)
        {
            Drops.Increment(DisseminationDrop.OutOfRange);
            return;
        }

        long size = _catalog.Files[file].Size;
        if (nak.Offset % (ulong)_options.Pages.PageSize != 0 || nak.Offset >= (ulong)size)
        {
            Drops.Increment(DisseminationDrop.OutOfRange);
            return;
        }

        int page = (int)(nak.Offset / (ulong)_options.Pages.PageSize);
        int k = _options.Pages.PacketsIn(_options.Pages.PageLength(size, page));
        if (nak.Lost > k)
        {
            Drops.Increment(DisseminationDrop.OutOfRange);
            return;
        }

        int item = _catalog.FirstItem(file) + page;
        if (_book.IsPending(client, item))
        {
            Drops.Increment(DisseminationDrop.NakStale);
            return;
        }

        if (!state.Sent.TryGetValue(item, out var sent) || sent.Transmission != nak.Transmission || _clock.Now > sent.End + _options.NakWindow)
        {
            Drops.Increment(DisseminationDrop.NakUnsolicited);
            return;
        }

        state.Sent.Remove(item);
        Counters.NaksAccepted++;
        if (_inFlight.ContainsKey(nak.Transmission))
        {
            Counters.EarlyNaks++;
        }

        if (_observations.TryGetValue(nak.Transmission, out var observed) && observed.Naks < observed.Requesters)
        {
            observed.Naks++;
            _adaptive!.ObserveNak(observed.Packets, observed.Repair, nak.Lost);
        }
        state.Need[item] = nak.Lost;
        _book.Add(client, item);
    }

    private ReedSolomon Code(int k)
    {
        if (!_codes.TryGetValue(k, out var code))
        {
            _codes[k] = code = new ReedSolomon(k, ReedSolomon.MaxPackets);
        }

        return code;
    }

    private void Announce(in AnnounceEntry entry, TimeSpan start, TimeSpan end)
    {
        for (int i = 0; i < _announcements.Count; i++)
        {
            if (_announcements[i].Entry.Transmission == entry.Transmission)
            {
                _announcements.RemoveAt(i); // announced again with new times: the old copies would contradict it
                break;
            }
        }

        var now = _clock.Now;
        _announcements.Add((entry, start, end, _options.AnnounceCopies, now));
        if (!_announceAlarm.IsScheduled || _announceAlarm.Deadline > now)
        {
            _clock.Schedule(_announceAlarm, now);
        }
    }

    /// <summary>Sends every announcement copy that is due, 16 entries a datagram (as many datagrams as that takes, so
    /// announcements keep up with any page rate; each entry's copies are <see cref="ServerOptions.AnnounceSpacing"/>
    /// apart), or a heartbeat when nothing was announced for <see cref="ServerOptions.HeartbeatInterval"/>.</summary>
    private void SendAnnouncement()
    {
        var now = _clock.Now;
        var next = _announceSeq == 0 ? now : _lastAnnounce + _options.HeartbeatInterval;
        int count = 0;
        bool any = false;
        for (int i = 0; i < _announcements.Count; i++)
        {
            var (entry, start, end, left, due) = _announcements[i];
            if (due > now)
            {
                next = due < next ? due : next;
                continue;
            }

            var from = start > now ? start : now;
            var e = entry with
            {
                StartDelayMicros = (uint)((from - now).Ticks / 10),
                DurationMicros = (uint)(Math.Max(0, (end - from).Ticks) / 10),
            };
            Wire.WriteAnnounceEntry(_announceBuffer.AsSpan(Wire.AnnounceHeaderBytes + (count * Wire.AnnounceEntryBytes)), e);
            count++;
            var again = now + _options.AnnounceSpacing;
            _announcements[i] = (entry, start, end, left - 1, again);
            if (left > 1)
            {
                next = again < next ? again : next;
            }

            if (count == MaxAnnounceEntries)
            {
                FlushAnnouncement(count, now);
                count = 0;
                any = true;
            }
        }

        if (count > 0 || (!any && now >= _lastAnnounce + _options.HeartbeatInterval) || _announceSeq == 0)
        {
            FlushAnnouncement(count, now); // the last entries, or a heartbeat
        }

        _announcements.RemoveAll(a => a.CopiesLeft <= 0);
        if (next <= now)
        {
            next = _lastAnnounce + _options.HeartbeatInterval;
        }

        _clock.Schedule(_announceAlarm, next);
    }

    private void FlushAnnouncement(int count, TimeSpan now)
    {
        Wire.WriteAnnounceHeader(_announceBuffer, (byte)count, _announceSeq++);
        int length = Wire.AnnounceHeaderBytes + (count * Wire.AnnounceEntryBytes);
        _transport.TrySend(_options.AnnounceGroup, _announceBuffer.AsSpan(0, length));
        Counters.AnnounceDatagrams++;
        Counters.AnnounceBytes += length;
        _lastAnnounce = now;
    }

    /// <summary>A full transmission whose requesters' NAKs are awaited (the adaptive estimate's observations).</summary>
    private sealed class Observation
    {
        public uint Id;
        public TimeSpan End;
        public int Packets;
        public int Repair;
        public int Requesters;
        public int Naks;
        public bool Cancelled;
    }

    private sealed class ClientState
    {
        public int[]? Files;
        public int Capacity;

        /// <summary>Has sent a Want (counts toward <see cref="ServerOptions.StartWhenClients"/>).</summary>
        public bool Asked;

        /// <summary>Items sent to this client recently: the transmission and its end (a NAK must match one).</summary>
        public readonly Dictionary<int, (uint Transmission, TimeSpan End)> Sent = new();

        /// <summary>Packets still lacking for items NAKed (absent: the whole page).</summary>
        public readonly Dictionary<int, int> Need = new();
    }

    /// <summary>One page going out on a channel.</summary>
    private sealed class Transmission
    {
        public int Item;
        public ushort File;
        public uint PageNumber;
        public uint Id;
        public ulong FileId;
        public ulong Offset;
        public int PageLength;
        public int K;
        public int Count;
        public int Sent;
        public int SourceCount;   // packets 0..SourceCount−1 are source packets 0..k−1 (a full transmission) or none
        public int RepairStart;   // the first repair number; then consecutive modulo 255 − k
        public TimeSpan Start;
        public TimeSpan End;

        /// <summary>The clients whose requests it took, and the packets each lacked (k: the whole page).</summary>
        public readonly List<(int Client, int Need)> Takers = new();
        public byte[] Page = Array.Empty<byte>();
        public readonly ReadOnlyMemory<byte>[] Sources = new ReadOnlyMemory<byte>[ReedSolomon.MaxPackets];
    }

    /// <summary>A data channel: its scheduler, its pacing alarm, its current and next page.</summary>
    private sealed class Channel
    {
        /// <summary>Datagrams one late alarm may send to catch up (a core thread descheduled for 20 ms at 25 MB/s owes
        /// about 1,000).</summary>
        private const int MaxBurst = 1024;

        /// <summary>Pages announced and taken ahead of the one being sent, at most.</summary>
        private const int MaxAhead = 256;

        /// <summary>Pages taken ahead per packet sent, at most: the queue grows a few pages a packet, so a core that
        /// cannot keep the rate shows it (the pacer) before a whole lead of pages is promised at a rate never met.</summary>
        private const int MaxTakenPerCall = 2;

        private readonly DisseminationServer _server;
        private readonly int _index;
        private readonly IChannelScheduler _scheduler;
        private readonly NetAddress _group;
        private readonly Alarm _alarm;
        private readonly SendPacer _pacer;
        private readonly byte[] _datagram;
        private Transmission? _current;
        private readonly Queue<Transmission> _ahead = new();
        private readonly Stack<Transmission> _pool = new();
        private TimeSpan _nextSend;
        private TimeSpan _due;

        public Channel(DisseminationServer server, int index, IChannelScheduler scheduler, NetAddress group, ServerOptions options)
        {
            _server = server;
            _index = index;
            _scheduler = scheduler;
            _group = group;
            _alarm = new Alarm(_ =>
            {
                long start = server.Enter();
                var clock = server._clock;
                // A core whose alarms fire late (coarse timers) catches up by sending the datagrams that were due,
                // at most MaxBurst per call; on time (the simulator) this is one Tick.
                for (int burst = 0; burst < MaxBurst; burst++)
                {
                    Tick();
                    if (!_alarm!.IsScheduled || _due > clock.Now || burst == MaxBurst - 1)
                    {
                        break;
                    }

                    clock.Cancel(_alarm);
                }

                server.Leave(start);
            });
            _datagram = new byte[options.DatagramBytes];
            _pacer = server._pacer;
        }

        /// <summary>The channel has pages to send (it shares the core with the other busy ones).</summary>
        public bool IsBusy => _current is not null || _ahead.Count > 0;

        private void ScheduleAt(TimeSpan deadline)
        {
            _due = deadline;
            _server._clock.Schedule(_alarm, deadline);
        }

        /// <summary>An item of this channel became requested: if the channel sleeps, start it.</summary>
        public void Wake()
        {
            if (_server._holding)
            {
                return;
            }

            if (_current is null && _ahead.Count == 0 && !_alarm.IsScheduled)
            {
                ScheduleAt(_server._clock.Now);
            }
        }

        private void Tick()
        {
            var now = _server._clock.Now;
            if (_current is null && _ahead.Count == 0)
            {
                var first = Prepare(now, now);
                if (first is null)
                {
                    return; // idle until Wake
                }

                _pacer.Resume(first.Start);

                _ahead.Enqueue(first);
            }

            if (_current is null || _current.Sent >= _current.Count)
            {
                if (_current is not null)
                {
                    Recycle(_current);
                }

                _current = _ahead.Count > 0 ? _ahead.Dequeue() : null;
                if (_current is null)
                {
                    ScheduleAt(now); // idle: pick again now
                    return;
                }

            }

            if (_current.Start > now)
            {
                // Waiting for the announcement delay to pass: keep announcing ahead meanwhile, once a packet time.
                FillAhead(now);
                var wake = now + _pacer.Interval;
                ScheduleAt(_current.Start < wake ? _current.Start : wake);
                return;
            }

            SendOne(_current, now);
            var forgiven = _pacer.OnSent(_due, now);
            if (forgiven > TimeSpan.Zero)
            {
                // The core cannot keep this channel's schedule: start again from now, at the rate it achieved.
                _due += forgiven;
                Retime(now);
                _server.Counters.PacingSlips = _pacer.Slips;
                _server.Counters.PacingForgiven = _pacer.Forgiven;
            }

            FillAhead(now);

            _nextSend = _due + _pacer.Interval; // from when this datagram was due, so late alarms catch up
            if (_current.Sent < _current.Count || _ahead.Count > 0)
            {
                ScheduleAt(_nextSend);
            }
            else
            {
                Recycle(_current);
                _current = null;
                ScheduleAt(_nextSend); // look for work when this packet has left
            }
        }

        /// <summary>Keeps pages announced AnnounceDelay ahead of the data: when a page lasts less than the delay (fast
        /// channels, small pages) several are announced ahead, each starting where the last ends, so the delay never
        /// throttles the channel. Called once per packet time, so the queue fills as time passes.</summary>
        /// <remarks>The next page is taken when the last one queued ends within twice the delay (plus a packet time), so it starts exactly
        /// where that one ends: taken at "within the delay", it would start at now + delay, up to a packet time after
        /// the end on time and as late as the alarm fired on a busy core, a gap after every page (measured: 7 % of the
        /// channel's time on the loaded 2-core testbed).</remarks>
        private void FillAhead(TimeSpan now)
        {
            var lastEnd = _current!.End;
            foreach (var t in _ahead)
            {
                lastEnd = t.End;
            }

            var lead = _server._options.AnnounceDelay + _server._options.AnnounceDelay + _pacer.Interval;
            for (int taken = 0; taken < MaxTakenPerCall && _ahead.Count < MaxAhead && lastEnd - now <= lead; taken++)
            {
                var next = Prepare(now, lastEnd);
                if (next is null)
                {
                    break;
                }

                _ahead.Enqueue(next);
                lastEnd = next.End;
            }
        }

        private void AnnounceAgain(Transmission t) =>
            _server.Announce(new AnnounceEntry((byte)_index, t.FileId, t.Offset, t.Id, (byte)t.K, (byte)t.Count, 0, 0), t.Start, t.End);

        /// <summary>The core could not keep this channel's schedule: the page being sent ends, and those taken ahead
        /// start and end, where the pacer's new interval puts them from <paramref name="now"/>, and each is announced
        /// again with its new times (clients move a page's end later when its announcement says so), so the schedule
        /// the clients hold stays what the core really does.</summary>
        private void Retime(TimeSpan now)
        {
            var interval = _pacer.Interval;
            var end = now;
            if (_current is { } current && current.Sent < current.Count)
            {
                current.End = now + (interval * (current.Count - current.Sent));
                end = current.End;
                _server.Retimed(current);
                AnnounceAgain(current);
            }

            // What is queued past the lead at the new interval is given back: a page promised seconds ahead would be
            // re-timed again and again, and NAKed by clients whose patience (MaxScheduleLag) it outlasts.
            var lead = _server._options.AnnounceDelay + _server._options.AnnounceDelay + interval;
            int keep = 0;
            foreach (var t in _ahead)
            {
                if (t.Start < end)
                {
                    t.Start = end;
                }

                if (keep > 0 && t.Start - now > lead)
                {
                    break;
                }

                t.End = t.Start + (interval * t.Count);
                end = t.End;
                keep++;
                _server.Retimed(t);
                AnnounceAgain(t);
            }

            if (keep < _ahead.Count)
            {
                // The queue's tail: the kept ones go round to the back in order, the rest go back to the book.
                int total = _ahead.Count;
                for (int i = 0; i < total; i++)
                {
                    var t = _ahead.Dequeue();
                    if (i < keep)
                    {
                        _ahead.Enqueue(t);
                    }
                    else
                    {
                        _server.Untake(t);
                        _pool.Push(t);
                    }
                }
            }
        }

        private void Recycle(Transmission t)
        {
            _server._inFlight.Remove(t.Id);
            _pool.Push(t);
        }

        private Transmission Rent() => _pool.Count > 0 ? _pool.Pop() : new Transmission();

        /// <summary>Picks, takes and announces the next item; it starts at max(now + delay, notBefore).</summary>
        private Transmission? Prepare(TimeSpan now, TimeSpan notBefore)
        {
            var s = _server;
            if (s._adaptive is not null)
            {
                s.ResolveObservations(now);
            }

            s.Counters.Decisions++;
            long before = _scheduler.Work;
            int item = _scheduler.Next();
            if (item < 0)
            {
                return null;
            }

            s.Counters.PairsExamined += _scheduler.Work - before;
            var taken = s._taken;
            taken.Clear();
            s._book.TakeAll(item, taken);
            var (file, page) = s._catalog.Locate(item);
            var entry = s._catalog.Files[file];
            var pages = s._options.Pages;
            int pageLength = pages.PageLength(entry.Size, page);
            int k = pages.PacketsIn(pageLength);
            int need = 0;
            var t = Rent();
            t.Takers.Clear();
            foreach (int c in taken)
            {
                var state = s._clients[c];
                int lacks = state.Need.Remove(item, out int n) ? n : k;
                t.Takers.Add((c, lacks));
                need = Math.Max(need, lacks);
            }

            int repair = s.RepairCount(need >= k ? k : Math.Max(need, 1), taken.Count);
            t.Item = item;
            t.File = (ushort)file;
            t.PageNumber = (uint)page;
            t.Id = ++s._transmissionId;
            s._inFlight[t.Id] = t;
            t.FileId = entry.FileId;
            t.Offset = (ulong)page * (ulong)pages.PageSize;
            t.PageLength = pageLength;
            t.K = k;
            t.Sent = 0;
            int repairSpace = ReedSolomon.MaxPackets - k;
            if (need >= k || repairSpace == 0)
            {
                t.SourceCount = k;
                t.Count = k + repair;
                s.Counters.ProactiveRepairPackets += repair;
            }
            else
            {
                t.SourceCount = 0;
                t.Count = Math.Min(need + repair, repairSpace);
                s.Counters.ProactiveRepairPackets += t.Count - need;
                s.Counters.RepairOnlyTransmissions++;
            }

            t.RepairStart = repairSpace == 0 ? 0 : s._repairCursor[item] % repairSpace;
            int repairsSent = t.Count - t.SourceCount;
            if (repairSpace > 0)
            {
                s._repairCursor[item] = (byte)((t.RepairStart + repairsSent) % repairSpace);
            }

            int bytes = k * pages.PacketPayload;
            if (t.Page.Length < bytes)
            {
                t.Page = new byte[pages.PageSize];
            }

            t.Page.AsSpan(0, bytes).Clear();
            s._source.Read(file, (long)t.Offset, t.Page.AsSpan(0, pageLength));
            for (int i = 0; i < k; i++)
            {
                t.Sources[i] = t.Page.AsMemory(i * pages.PacketPayload, pages.PacketPayload);
            }

            var start = now + s._options.AnnounceDelay;
            t.Start = start > notBefore ? start : notBefore;
            t.End = t.Start + (_pacer.Interval * t.Count);
            foreach (int c in taken)
            {
                s._clients[c].Sent[item] = (t.Id, t.End);
            }

            s.Counters.Transmissions++;
            if (s._adaptive is not null && t.SourceCount == k && taken.Count > 0)
            {
                s.Observe(t, taken.Count);
            }
            AnnounceAgain(t);
            return t;
        }

        private void SendOne(Transmission t, TimeSpan now)
        {
            var s = _server;
            int payload = s._options.Pages.PacketPayload;
            int seq = t.Sent++;
            int index;
            var body = _datagram.AsSpan(Wire.DataHeaderBytes, payload);
            if (seq < t.SourceCount)
            {
                index = seq;
                t.Page.AsSpan(seq * payload, payload).CopyTo(body);
                s.Counters.SourcePacketsSent++;
            }
            else
            {
                int repairSpace = ReedSolomon.MaxPackets - t.K;
                int repairNumber = (t.RepairStart + seq - t.SourceCount) % repairSpace;
                index = t.K + repairNumber;
                s.Code(t.K).EncodeRepair(t.Sources.AsSpan(0, t.K), repairNumber, body);
                s.Counters.RepairPacketsSent++;
            }

            Wire.WriteDataHeader(_datagram, new DataHeader((byte)_index, t.File, t.PageNumber, t.Id, (byte)index, (byte)seq, (byte)t.Count));
            if (!s._transport.TrySend(_group, _datagram))
            {
                s.Counters.SendFailures++;
            }

            s.Counters.DataBytesSent += _datagram.Length;
        }
    }
}
