using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>
/// An AER repair server (§4.1, §4.1.1): a member of the group that caches the packets it sees (a
/// <see cref="RepairCache"/>, bounded in bytes) and serves its children (receivers and lower repair servers, from
/// configuration). It rewrites the SPM of its upstream with its own address and subcasts it, so its children NAK it.
/// On a child's NAK it subcasts the repair if it holds the packet; if not, it subcasts the NAK (its children suppress
/// theirs) and fetches the packet from upstream once, through its own <see cref="NakScheduler"/>; a repair that arrives
/// is cached and subcast further only when a NAK for it is pending here. It detects its own losses too and fetches them
/// at once (after a short random wait), announcing each with a NAK subcast. For NCA it forwards the worst of its
/// children's CSMs upstream (<see cref="NomineeSelection"/>). Subcast is unicast fan-out to the children.
/// </summary>
public sealed class RepairServer : AerRole
{
    private readonly NetAddress[] _children;
    private readonly HashSet<NetAddress> _childSet;
    private readonly UpstreamLink _up;
    private readonly HashSet<long> _pendingDown = new();
    private readonly HoldoffTable _repairHoldoff = new();
    private readonly HoldoffTable _nakHoldoff = new();
    private readonly NomineeSelection _selection;
    private long _known;
    private long _scanned = -1;

    internal RepairServer(AerLayer layer, uint session, NetAddress group, NetAddress source, IReadOnlyList<NetAddress> children) : base(layer, session, group)
    {
        ArgumentNullException.ThrowIfNull(children);
        if (children.Count > Options.MaxChildren)
        {
            throw new ArgumentException($"A repair server takes at most AerOptions.MaxChildren ({Options.MaxChildren}) children, got {children.Count}.", nameof(children));
        }

        _children = children.ToArray();
        _childSet = new HashSet<NetAddress>(_children);
        _up = new UpstreamLink(layer, this, source, Options.MaxPendingNaks, Options.RepairServerNakDelayMax, FetchFromUpstream, IsMissingHere, OnCsmTimer);
        Cache = new RepairCache(Options.RepairCacheBytes);
        _selection = new NomineeSelection(Math.Max(1, _children.Length), Options.CsmTimeout);
    }

    public RepairCache Cache { get; }

    public IReadOnlyList<NetAddress> Children => _children;

    public int PendingNaks => _up.Naks.Count;

    public int PendingDownstream => _pendingDown.Count;

    internal override void Start() => _up.Start();

    private protected override void OnStop()
    {
        _up.Stop();
        Cache.Clear();
    }

    private protected override void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now)
    {
        switch (header.Type)
        {
            case AerWire.DataType:
                if (_up.AdmitData(from, header, datagram, now, out var data, out _))
                {
                    OnData(data, datagram);
                }

                break;
            case AerWire.SpmType:
                if (_up.AdmitSpm(from, header, datagram, now, out var spm))
                {
                    OnSpm(from, spm, now);
                }

                break;
            case AerWire.NakType:
                if (!AerWire.TryReadNak(header, datagram, out var nak))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (nak.Downstream)
                {
                    _up.OnDownstreamNak(from, nak.Seq, now);
                }
                else if (!_childSet.Contains(from))
                {
                    NotAMember();
                }
                else if (nak.Seq > _known + Options.MaxPendingNaks)
                {
                    Layer.Malformed(from, header.Type); // far beyond anything announced: not a real loss
                }
                else
                {
                    OnChildNak(nak.Seq, now);
                }

                break;
            case AerWire.CsmType:
                if (!AerWire.TryReadCsm(header, datagram, out var csm))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!_childSet.Contains(from))
                {
                    NotAMember();
                }
                else
                {
                    _selection.OnCsm(from, csm, now);
                }

                break;
            case AerWire.ProbeType:
                if (_up.AdmitProbeRequest(from, header, datagram, now, out long ticks))
                {
                    if (_childSet.Contains(from))
                    {
                        SendProbe(from, ticks, reply: true);
                    }
                    else
                    {
                        NotAMember();
                    }
                }

                break;
            default:
                NotForThisNode();
                break;
        }
    }

    private void OnData(in AerData data, ReadOnlySpan<byte> datagram)
    {
        long seq = data.Seq;
        if (!Cache.Contains(seq))
        {
            long before = Cache.Evictions;
            Cache.Add(seq, datagram);
            Counters.CacheEvictions += Cache.Evictions - before;
        }
        else
        {
            Counters.Duplicates++;
        }

        _up.Naks.Received(seq, data.Repair);
        if (_pendingDown.Remove(seq))
        {
            // §4.1: a repair goes further down only where a NAK for it is pending.
            Subcast(seq);
            Counters.RepairsForwarded++;
        }

        if (_scanned < 0)
        {
            _scanned = seq; // start where the stream was when this server came up
        }

        Raise(seq);
    }

    private void OnSpm(NetAddress from, in SourcePathMessage spm, TimeSpan now)
    {
        if (_scanned < 0)
        {
            _scanned = spm.HighestSeq;
        }

        Raise(spm.HighestSeq);
        if (spm.LowestAvailable > 1)
        {
            _up.Naks.ForgetBelow(spm.LowestAvailable);
            long lowest = spm.LowestAvailable;
            _pendingDown.RemoveWhere(s => s < lowest);
        }

        var up = _up.Tracker.Upstream(now);
        if (up.Address != from)
        {
            return; // only the nearest upstream's SPMs are passed on
        }

        // §4.1.1: replace the address with ours and subcast it; the path round trip grows by ours to the upstream.
        int pathRtt = (int)Math.Min(int.MaxValue, (long)spm.PathRttMicros + Micros(_up.Rtt.Smoothed));
        var rewritten = spm with { Upstream = Local, Depth = spm.Depth + 1, PathRttMicros = pathRtt };
        if (rewritten.Depth > AerWire.MaxDepth)
        {
            return;
        }

        int n = AerWire.WriteSpm(Layer.Scratch, rewritten);
        foreach (var child in _children)
        {
            Layer.Send(child, n);
        }

        Counters.SpmsSent++;
    }

    private void OnChildNak(long seq, TimeSpan now)
    {
        Counters.NaksReceived++;
        if (seq < _up.Tracker.LowestAvailable)
        {
            return; // the source no longer has it either; its SPMs tell the children
        }

        if (Cache.Contains(seq))
        {
            if (_repairHoldoff.TryStart(seq, now, Options.RepairHoldoff))
            {
                Subcast(seq);
                Counters.RepairsSent++;
            }

            return;
        }

        // Not here: tell the children (they suppress theirs), and fetch it once.
        if (_pendingDown.Count < Options.MaxPendingNaks)
        {
            _pendingDown.Add(seq);
        }

        SubcastNak(seq, now);
        _up.Naks.Missing(seq);
    }

    private void FetchFromUpstream(long seq)
    {
        var now = Now;
        _up.NakUpstream(seq, now);

        // Our own loss is our children's too (they share our incoming link): tell them we are on it, and pass the repair on.
        if (_pendingDown.Count < Options.MaxPendingNaks)
        {
            _pendingDown.Add(seq);
        }

        SubcastNak(seq, now);
    }

    private void SubcastNak(long seq, TimeSpan now)
    {
        if (!_nakHoldoff.TryStart(seq, now, Options.RepairHoldoff))
        {
            return;
        }

        int n = AerWire.WriteNak(Layer.Scratch, new AerNak(Session, seq, Downstream: true));
        foreach (var child in _children)
        {
            Layer.Send(child, n);
        }

        Counters.NakSubcasts++;
    }

    private void Subcast(long seq)
    {
        int n = Cache.CopyTo(seq, Layer.Scratch);
        if (n == 0)
        {
            return;
        }

        AerWire.SetRepair(Layer.Scratch, repair: true);
        foreach (var child in _children)
        {
            Layer.Send(child, n);
        }
    }

    private void Raise(long highest)
    {
        if (highest > _known)
        {
            _known = highest;
        }

        if (_scanned < 0)
        {
            return;
        }

        long from = Math.Max(_scanned + 1, _known - Options.MaxPendingNaks + 1);
        for (long s = from; s <= _known; s++)
        {
            if (!Cache.Contains(s) && !_up.Naks.Missing(s))
            {
                break;
            }

            _scanned = s;
        }
    }

    /// <summary>A downstream NAK suppresses ours only for a packet not cached here and not far beyond what was announced.</summary>
    private bool IsMissingHere(long seq) => !Cache.Contains(seq) && seq <= _known + Options.MaxPendingNaks;

    private void OnCsmTimer(TimeSpan now, (NetAddress Address, int Depth, int PathRttMicros) up)
    {
        if (_selection.Worst(now) is { } worst)
        {
            SendCsm(up.Address, worst); // §4.2.1: only the worst child's CSM goes up
        }
    }

    public override string Describe() =>
        $"repair server s{Session}: children {_children.Length}, cache {Cache.Count} pkts/{Cache.Bytes} B, naks {_up.Naks.Count}, pending down {_pendingDown.Count}, upstream {_up.Tracker.Upstream(Now).Address}";
}
