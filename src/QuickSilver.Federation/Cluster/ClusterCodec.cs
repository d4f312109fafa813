using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Cluster;

/// <summary>
/// Encodes and decodes control↔data-node frames (docs/federation.md, "Clustered gateway"): [u8 version = 2][u8 type]
/// [u32 node][u32 term], then the type's fields; little-endian integers, strings as u16 length + UTF-8. Like <see cref="PeerCodec"/> the decoder never throws, checks
/// every count against its bound and the bytes left before allocating, and refuses trailing bytes; the reason is a
/// <see cref="FrameError"/> so the receiver counts it.
/// </summary>
public static class ClusterCodec
{
    public const byte Version = 2;

    /// <summary>Bytes of the common header: version, type, node, term.</summary>
    public const int HeaderBytes = 10;

    /// <summary>Sessions in one REPORT (a u16 count; the frame bound stops it first with long names).</summary>
    public const int MaxReportSessions = 1024;

    /// <summary>Largest control↔data frame.</summary>
    public const int MaxFrameBytes = 65_536;

    /// <summary>Downstream peers in one ASSIGN (a u8 count).</summary>
    public const int MaxDownstream = 255;

    /// <summary>Bytes of one native address.</summary>
    public const int MaxAddressBytes = 256;

    public static byte[] Heartbeat(HeartbeatMessage m)
        => Start(ClusterFrameType.Heartbeat, m).U32(m.Sessions).U32(m.Forwarded).U8(m.LeaderHeard ? (byte)1 : (byte)0).Written.ToArray();

    public static byte[] Release(ReleaseMessage m) => Start(ClusterFrameType.Release, m).String(m.Session.Text).Written.ToArray();

    public static byte[] Reset(ResetMessage m) => Start(ClusterFrameType.Reset, m).Written.ToArray();

    public static byte[] Lead(LeadMessage m) => Start(ClusterFrameType.Lead, m).Written.ToArray();

    public static byte[] Report(ReportMessage m)
    {
        var w = Start(ClusterFrameType.Report, m).U32(m.NextSequence).U16(checked((ushort)m.Sessions.Length));
        foreach (var s in m.Sessions)
        {
            w.String(s.Session.Text);
            Labels(w, s.Labels);
            Addresses(w, s.LocalAddresses);
        }

        return w.Written.ToArray();
    }

    /// <summary>The sessions as REPORT frames, each at most <see cref="MaxFrameBytes"/> less <paramref name="reserve"/>
    /// bytes (room for an authentication trailer) and <see cref="MaxReportSessions"/> sessions; one empty REPORT when
    /// there are none.</summary>
    public static List<byte[]> Reports(uint node, uint term, uint nextSequence, IReadOnlyList<ReportedSession> sessions, int reserve = 0)
    {
        var frames = new List<byte[]>();
        var chunk = new List<ReportedSession>();
        int bytes = HeaderBytes + 6;
        foreach (var s in sessions)
        {
            int size = 2 + System.Text.Encoding.UTF8.GetByteCount(s.Session.Text) + 1 + (4 * s.Labels.Length)
                + 1 + s.LocalAddresses.Sum(a => 2 + System.Text.Encoding.UTF8.GetByteCount(a));
            if (chunk.Count > 0 && (bytes + size > MaxFrameBytes - reserve || chunk.Count == MaxReportSessions))
            {
                frames.Add(Report(new ReportMessage(node, nextSequence, [.. chunk]) { Term = term }));
                chunk.Clear();
                bytes = HeaderBytes + 6;
            }

            chunk.Add(s);
            bytes += size;
        }

        if (chunk.Count > 0 || frames.Count == 0)
        {
            frames.Add(Report(new ReportMessage(node, nextSequence, [.. chunk]) { Term = term }));
        }

        return frames;
    }

    public static byte[] Assign(AssignMessage m)
    {
        var w = Start(ClusterFrameType.Assign, m).U32(m.SequenceBase).String(m.Session.Text).U8(m.Root ? (byte)1 : (byte)0);
        Labels(w, m.Labels);
        w.U32(m.Upstream.Value).U32(m.UpstreamEndpoint);
        Labels(w, m.UpstreamLabels);
        w.U8(checked((byte)m.Downstream.Length));
        foreach (var d in m.Downstream)
        {
            w.U32(d.Gateway.Value).U32(d.Endpoint);
        }

        Addresses(w, m.LocalAddresses);
        Addresses(w, m.RootAddresses);
        w.U8(checked((byte)m.PeerNodes.Length));
        foreach (var p in m.PeerNodes)
        {
            EndpointCodec.Write(w.U32(p.Gateway.Value).U32(p.Node), p.Address);
        }

        return w.Written.ToArray();
    }

    public static FrameError Decode(ReadOnlySpan<byte> frame, out ClusterMessage? message)
    {
        message = null;
        if (frame.Length < HeaderBytes)
        {
            return frame.Length >= 1 && frame[0] != Version ? FrameError.BadVersion : FrameError.Truncated;
        }

        if (frame[0] != Version)
        {
            return FrameError.BadVersion;
        }

        if (frame.Length > MaxFrameBytes)
        {
            return FrameError.TooLarge;
        }

        var type = (ClusterFrameType)frame[1];
        var r = new SpanReader(frame[2..]);
        r.U32(out uint node);
        r.U32(out uint term);
        if (node == 0)
        {
            return FrameError.BadValue;
        }

        FrameError error;
        switch (type)
        {
            case ClusterFrameType.Heartbeat:
                uint forwarded = 0;
                byte heard = 0;
                error = r.U32(out uint sessions) && r.U32(out forwarded) && r.U8(out heard) ? FrameError.None : FrameError.Truncated;
                error = error == FrameError.None && heard > 1 ? FrameError.BadValue : error;
                message = error == FrameError.None ? new HeartbeatMessage(node, sessions, forwarded) { LeaderHeard = heard == 1 } : null;
                break;
            case ClusterFrameType.Lead:
                error = FrameError.None;
                message = new LeadMessage(node);
                break;
            case ClusterFrameType.Report:
                error = DecodeReport(ref r, node, out var report);
                message = report;
                break;
            case ClusterFrameType.Release:
                error = ReadSession(ref r, out var session);
                message = error == FrameError.None ? new ReleaseMessage(node, session!) : null;
                break;
            case ClusterFrameType.Reset:
                error = FrameError.None;
                message = new ResetMessage(node);
                break;
            case ClusterFrameType.Assign:
                error = DecodeAssign(ref r, node, out var assign);
                message = assign;
                break;
            default:
                return FrameError.UnknownType;
        }

        if (error == FrameError.None && r.Remaining != 0)
        {
            message = null;
            return FrameError.TrailingBytes;
        }

        if (error != FrameError.None)
        {
            message = null;
        }
        else
        {
            message = message! with { Term = term };
        }

        return error;
    }

    private static FrameError DecodeReport(ref SpanReader r, uint node, out ReportMessage? message)
    {
        message = null;
        if (!r.U32(out uint next) || !r.U16(out ushort count))
        {
            return FrameError.Truncated;
        }

        // Each session takes at least 2 (name length) + 1 (label count) + 1 (address count) bytes: refuse a count the
        // bytes cannot hold.
        if (count > MaxReportSessions)
        {
            return FrameError.BadValue;
        }

        if (count * 4 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        var sessions = new ReportedSession[count];
        for (int i = 0; i < count; i++)
        {
            var error = ReadSession(ref r, out var session);
            if (error != FrameError.None)
            {
                return error;
            }

            error = ReadLabels(ref r, session!.Flows.Count, allowEmpty: false, out var labels);
            if (error != FrameError.None)
            {
                return error;
            }

            error = ReadAddresses(ref r, session.Flows.Count, out var local);
            if (error != FrameError.None)
            {
                return error;
            }

            sessions[i] = new ReportedSession(session, labels, local);
        }

        message = new ReportMessage(node, next, sessions);
        return FrameError.None;
    }

    private static FrameError DecodeAssign(ref SpanReader r, uint node, out AssignMessage? message)
    {
        message = null;
        if (!r.U32(out uint sequenceBase))
        {
            return FrameError.Truncated;
        }

        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        int flows = session!.Flows.Count;
        if (!r.U8(out byte flags))
        {
            return FrameError.Truncated;
        }

        if (flags > 1)
        {
            return FrameError.BadValue;
        }

        error = ReadLabels(ref r, flows, allowEmpty: false, out var labels);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U32(out uint upstream) || !r.U32(out uint upstreamEndpoint))
        {
            return FrameError.Truncated;
        }

        error = ReadLabels(ref r, flows, allowEmpty: true, out var upstreamLabels);
        if (error != FrameError.None)
        {
            return error;
        }

        if ((upstream == 0 && (upstreamLabels.Length != 0 || upstreamEndpoint != 0)) || (flags == 1 && upstream != 0))
        {
            return FrameError.BadValue; // labels without an upstream, or a root with an upstream
        }

        if (!r.U8(out byte down))
        {
            return FrameError.Truncated;
        }

        if (down * 8 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        var downstream = new DownstreamPeer[down];
        for (int i = 0; i < down; i++)
        {
            r.U32(out uint g);
            r.U32(out uint e);
            if (g == 0 || g == upstream)
            {
                return FrameError.BadValue;
            }

            downstream[i] = new DownstreamPeer(new GatewayId(g), e);
        }

        error = ReadAddresses(ref r, flows, out var local);
        if (error != FrameError.None)
        {
            return error;
        }

        error = ReadAddresses(ref r, flows, out var roots);
        if (error != FrameError.None)
        {
            return error;
        }

        if ((flags == 1) != (roots.Length != 0))
        {
            return FrameError.BadValue; // a root needs its Up channels, and only a root has them
        }

        if (!r.U8(out byte known))
        {
            return FrameError.Truncated;
        }

        if (known > down + 1)
        {
            return FrameError.BadValue;
        }

        var peerNodes = new PeerDataNodeAddress[known];
        for (int i = 0; i < known; i++)
        {
            if (!r.U32(out uint g) || !r.U32(out uint n))
            {
                return FrameError.Truncated;
            }

            error = EndpointCodec.Read(ref r, out var address);
            if (error != FrameError.None)
            {
                return error;
            }

            // Only a data node the ASSIGN names (the upstream's, or a downstream's) may have an address here.
            bool named = n != 0 && ((g == upstream && n == upstreamEndpoint) || downstream.Any(d => d.Gateway.Value == g && d.Endpoint == n));
            if (address is null || !named)
            {
                return FrameError.BadValue;
            }

            peerNodes[i] = new PeerDataNodeAddress(new GatewayId(g), n, address);
        }

        message = new AssignMessage(node, sequenceBase, session, flags == 1, labels, new GatewayId(upstream), upstreamEndpoint, upstreamLabels, downstream, local, roots, peerNodes);
        return FrameError.None;
    }

    private static FrameError ReadSession(ref SpanReader r, out SessionName? session)
    {
        session = null;
        if (!r.String(SessionName.MaxBytes, out string text, out bool bad))
        {
            return bad ? FrameError.BadLength : FrameError.Truncated;
        }

        return SessionName.TryParse(text, out session, out _) ? FrameError.None : FrameError.BadSessionName;
    }

    private static FrameError ReadLabels(ref SpanReader r, int flows, bool allowEmpty, out FlowLabel[] labels)
    {
        labels = [];
        if (!r.U8(out byte count))
        {
            return FrameError.Truncated;
        }

        if (count != flows && !(allowEmpty && count == 0))
        {
            return FrameError.BadLength;
        }

        if (count * 4 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        labels = new FlowLabel[count];
        for (int i = 0; i < count; i++)
        {
            r.U32(out uint l);
            if (l == 0)
            {
                return FrameError.BadValue;
            }

            labels[i] = new FlowLabel(l);
        }

        return FrameError.None;
    }

    private static FrameError ReadAddresses(ref SpanReader r, int flows, out string[] addresses)
    {
        addresses = [];
        if (!r.U8(out byte count))
        {
            return FrameError.Truncated;
        }

        if (count != 0 && count != flows)
        {
            return FrameError.BadLength;
        }

        if (count * 2 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        addresses = new string[count];
        for (int i = 0; i < count; i++)
        {
            if (!r.String(MaxAddressBytes, out addresses[i], out bool bad))
            {
                return bad ? FrameError.BadLength : FrameError.Truncated;
            }

            if (addresses[i].Length == 0)
            {
                return FrameError.BadValue;
            }
        }

        return FrameError.None;
    }

    private static FrameWriter Start(ClusterFrameType type, ClusterMessage m) => new FrameWriter().U8(Version).U8((byte)type).U32(m.Node).U32(m.Term);

    private static void Labels(FrameWriter w, FlowLabel[] labels)
    {
        w.U8((byte)labels.Length);
        foreach (var l in labels)
        {
            w.U32(l.Value);
        }
    }

    private static void Addresses(FrameWriter w, string[] addresses)
    {
        w.U8((byte)addresses.Length);
        foreach (var a in addresses)
        {
            w.String(a);
        }
    }
}
