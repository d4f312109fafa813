using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Peering;

/// <summary>
/// Encodes and decodes peering-link frames (docs/federation.md, "Wire formats"). Every frame starts
/// [u8 version = 1][u8 type]; integers are little-endian; a string is u16 length + UTF-8; a gateway list is u8 count +
/// u32 each. The decoder never throws and never allocates more than the frame's own length allows: every count is
/// checked against <see cref="MaxPath"/>, <see cref="MaxEntries"/> or the bytes left before anything is allocated, and
/// a frame with bytes left over is refused too.
/// </summary>
public static class PeerCodec
{
    public const byte Version = 1;

    /// <summary>Largest frame a peering link accepts (the TCP framing refuses a longer length prefix).</summary>
    public const int MaxFrameBytes = 65_536;

    public const int MaxPath = 32;

    public const int MaxEntries = 1024;

    public static byte[] Hello(GatewayId gateway, IslandId island, ushort udpPort = 0)
        => Start(FrameType.Hello).U32(gateway.Value).U32(island.Value).U16(udpPort).Written.ToArray();

    public static byte[] KeepAlive() => Start(FrameType.KeepAlive).Written.ToArray();

    public static byte[] Routes(RouteUpdate update)
    {
        var w = Start(FrameType.RouteUpdate).U16((ushort)update.Withdrawals.Count);
        foreach (var x in update.Withdrawals)
        {
            w.U8((byte)x.Metric).U32(x.Destination.Value);
        }

        w.U16((ushort)update.Adverts.Count);
        foreach (var a in update.Adverts)
        {
            w.U8((byte)a.Metric).U32(a.Destination.Value).U32(a.DestinationIsland.Value).U32(a.Cost);
            Path(w, a.Path);
        }

        return w.Written.ToArray();
    }

    public static byte[] SrouteRequest(SrouteRequestMessage m)
    {
        var w = Start(FrameType.SrouteRequest).U32(m.RequestId).String(m.Session.Text).U32(m.Target.Value);
        Path(w, m.OwnerGateways);
        Path(w, m.Trail);
        return w.Written.ToArray();
    }

    public static byte[] SrouteResponse(SrouteResponseMessage m)
    {
        var w = Start(FrameType.SrouteResponse).U32(m.RequestId).String(m.Session.Text).U8((byte)m.Costs.Length);
        foreach (var c in m.Costs)
        {
            w.U32(c.Gateway.Value).U32(c.Cost);
        }

        Path(w, m.Trail);
        return w.Written.ToArray();
    }

    public static byte[] Join(JoinMessage m)
    {
        var w = Start(FrameType.Join).String(m.Session.Text).U32(m.TargetOwner.Value);
        Path(w, m.Trail);
        return w.Written.ToArray();
    }

    public static byte[] Translation(TranslationMessage m)
    {
        var w = Start(FrameType.Translation).String(m.Session.Text).U8((byte)m.Labels.Length);
        foreach (var l in m.Labels)
        {
            w.U32(l.Value);
        }

        return w.Written.ToArray();
    }

    public static byte[] Leave(SessionName session) => Start(FrameType.Leave).String(session.Text).Written.ToArray();

    public static byte[] NoRoute(SessionName session) => Start(FrameType.NoRoute).String(session.Text).Written.ToArray();

    /// <summary>Receivers in one RECEIVERS frame at most.</summary>
    public const int MaxReceivers = 1024;

    public static byte[] Capabilities(uint flags) => Start(FrameType.Capabilities).U32(flags).Written.ToArray();

    public static byte[] Receivers(SessionName session, IReadOnlyList<ReceiverId> receivers)
    {
        var w = Start(FrameType.Receivers).String(session.Text).U16(checked((ushort)receivers.Count));
        foreach (var r in receivers)
        {
            w.U32(r.Egress.Value).U32(r.Receiver);
        }

        return w.Written.ToArray();
    }

    public static byte[] DataEndpoint(SessionName session, uint node, System.Net.IPEndPoint? address = null)
        => EndpointCodec.Write(Start(FrameType.DataEndpoint).String(session.Text).U32(node), node == 0 ? null : address).Written.ToArray();

    /// <summary>The first frame on a bulk data channel (a TCP connection that carries only DATA frames, one way, from a
    /// data node or a gateway to a peer's data node or gateway): who sends, <paramref name="node"/> 0 for the gateway
    /// itself.</summary>
    public static byte[] DataChannel(GatewayId gateway, uint node) => Start(FrameType.DataChannel).U32(gateway.Value).U32(node).Written.ToArray();

    /// <summary>PEER_AUTH: the first frame both ways on a peering link between gateways that share a peering secret
    /// (<see cref="PeeringHandshake"/>): the cipher suite (0: AEGIS-128L), the sender's number and a fresh random
    /// nonce.</summary>
    public static byte[] PeerAuth(GatewayId gateway, ReadOnlySpan<byte> nonce)
    {
        if (nonce.Length != PeeringHandshake.NonceBytes)
        {
            throw new ArgumentException($"a PEER_AUTH nonce is {PeeringHandshake.NonceBytes} bytes, got {nonce.Length}", nameof(nonce));
        }

        return Start(FrameType.PeerAuth).U8(PeeringHandshake.Suite).U32(gateway.Value).Bytes(nonce).Written.ToArray();
    }

    /// <summary>Reads the type of a frame without decoding it (data frames take the fast path).</summary>
    public static FrameError PeekType(ReadOnlySpan<byte> frame, out FrameType type)
    {
        type = 0;
        if (frame.Length < 2)
        {
            return FrameError.Truncated;
        }

        if (frame[0] != Version)
        {
            return FrameError.BadVersion;
        }

        if (frame.Length > MaxFrameBytes)
        {
            return FrameError.TooLarge;
        }

        type = (FrameType)frame[1];
        return type is >= FrameType.Hello and <= FrameType.PeerAuth ? FrameError.None : FrameError.UnknownType;
    }

    /// <summary>Decodes a control frame. Returns <see cref="FrameError.None"/> and the message, or the reason it was refused.</summary>
    public static FrameError Decode(ReadOnlySpan<byte> frame, out PeerMessage? message)
    {
        message = null;
        var error = PeekType(frame, out var type);
        if (error != FrameError.None)
        {
            return error;
        }

        var r = new SpanReader(frame[2..]);
        error = type switch
        {
            FrameType.Hello => DecodeHello(ref r, out message),
            FrameType.KeepAlive => Ok(KeepAliveMessage.Instance, out message),
            FrameType.RouteUpdate => DecodeRoutes(ref r, out message),
            FrameType.SrouteRequest => DecodeSrouteRequest(ref r, out message),
            FrameType.SrouteResponse => DecodeSrouteResponse(ref r, out message),
            FrameType.Join => DecodeJoin(ref r, out message),
            FrameType.Translation => DecodeTranslation(ref r, out message),
            FrameType.Leave => DecodeSessionOnly(ref r, s => new LeaveMessage(s), out message),
            FrameType.NoRoute => DecodeSessionOnly(ref r, s => new NoRouteMessage(s), out message),
            FrameType.DataEndpoint => DecodeDataEndpoint(ref r, out message),
            FrameType.Capabilities => r.U32(out uint flags) ? Ok(new CapabilitiesMessage(flags), out message) : FrameError.Truncated,
            FrameType.Receivers => DecodeReceivers(ref r, out message),
            FrameType.DataChannel => DecodeDataChannel(ref r, out message),
            FrameType.PeerAuth => DecodePeerAuth(ref r, out message),
            _ => FrameError.UnknownType, // Data is not a control frame
        };
        if (error == FrameError.None && r.Remaining != 0)
        {
            message = null;
            return FrameError.TrailingBytes;
        }

        if (error != FrameError.None)
        {
            message = null;
        }

        return error;
    }

    private static FrameError Ok(PeerMessage m, out PeerMessage? message)
    {
        message = m;
        return FrameError.None;
    }

    private static FrameError DecodeHello(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        if (!r.U32(out uint g) || !r.U32(out uint i) || !r.U16(out ushort udp))
        {
            return FrameError.Truncated;
        }

        if (g == 0 || i == 0)
        {
            return FrameError.BadValue;
        }

        message = new HelloMessage(new GatewayId(g), new IslandId(i), udp);
        return FrameError.None;
    }

    private static FrameError DecodeRoutes(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        var update = new RouteUpdate();
        if (!r.U16(out ushort withdrawals))
        {
            return FrameError.Truncated;
        }

        if (withdrawals > MaxEntries || withdrawals * 5 > r.Remaining)
        {
            return withdrawals > MaxEntries ? FrameError.BadLength : FrameError.Truncated;
        }

        for (int i = 0; i < withdrawals; i++)
        {
            r.U8(out byte metric);
            r.U32(out uint destination);
            if (metric >= RouteCost.MetricCount || destination == 0)
            {
                return FrameError.BadValue;
            }

            update.Withdrawals.Add(new RouteWithdrawal((RouteMetric)metric, new GatewayId(destination)));
        }

        if (!r.U16(out ushort adverts))
        {
            return FrameError.Truncated;
        }

        if (adverts > MaxEntries || adverts * 14 > r.Remaining)
        {
            return adverts > MaxEntries ? FrameError.BadLength : FrameError.Truncated;
        }

        for (int i = 0; i < adverts; i++)
        {
            if (!r.U8(out byte metric) || !r.U32(out uint destination) || !r.U32(out uint island) || !r.U32(out uint cost))
            {
                return FrameError.Truncated;
            }

            if (metric >= RouteCost.MetricCount || destination == 0 || island == 0)
            {
                return FrameError.BadValue;
            }

            var error = ReadPath(ref r, out var path);
            if (error != FrameError.None)
            {
                return error;
            }

            if (path.Length == 0)
            {
                return FrameError.BadValue;
            }

            update.Adverts.Add(new RouteAdvert((RouteMetric)metric, new GatewayId(destination), new IslandId(island), cost, path));
        }

        message = new RouteUpdateMessage(update);
        return FrameError.None;
    }

    private static FrameError DecodeSrouteRequest(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        if (!r.U32(out uint id))
        {
            return FrameError.Truncated;
        }

        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U32(out uint target))
        {
            return FrameError.Truncated;
        }

        error = ReadPath(ref r, out var owners);
        if (error != FrameError.None)
        {
            return error;
        }

        error = ReadPath(ref r, out var trail);
        if (error != FrameError.None)
        {
            return error;
        }

        if (target == 0 || trail.Length == 0)
        {
            return FrameError.BadValue;
        }

        message = new SrouteRequestMessage(id, session!, new GatewayId(target), owners, trail);
        return FrameError.None;
    }

    private static FrameError DecodeSrouteResponse(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        if (!r.U32(out uint id))
        {
            return FrameError.Truncated;
        }

        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U8(out byte count))
        {
            return FrameError.Truncated;
        }

        if (count > MaxPath)
        {
            return FrameError.BadLength;
        }

        if (count * 8 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        var costs = new SrouteCost[count];
        for (int i = 0; i < count; i++)
        {
            r.U32(out uint g);
            r.U32(out uint c);
            costs[i] = new SrouteCost(new GatewayId(g), c);
        }

        error = ReadPath(ref r, out var trail);
        if (error != FrameError.None)
        {
            return error;
        }

        if (trail.Length == 0)
        {
            return FrameError.BadValue;
        }

        message = new SrouteResponseMessage(id, session!, costs, trail);
        return FrameError.None;
    }

    private static FrameError DecodeJoin(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U32(out uint target))
        {
            return FrameError.Truncated;
        }

        error = ReadPath(ref r, out var trail);
        if (error != FrameError.None)
        {
            return error;
        }

        message = new JoinMessage(session!, new GatewayId(target), trail);
        return FrameError.None;
    }

    private static FrameError DecodeTranslation(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U8(out byte count))
        {
            return FrameError.Truncated;
        }

        if (count != session!.Flows.Count)
        {
            return FrameError.BadLength;
        }

        if (count * 4 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        var labels = new FlowLabel[count];
        for (int i = 0; i < count; i++)
        {
            r.U32(out uint l);
            if (l == 0)
            {
                return FrameError.BadValue;
            }

            labels[i] = new FlowLabel(l);
        }

        message = new TranslationMessage(session, labels);
        return FrameError.None;
    }

    private static FrameError DecodeSessionOnly(ref SpanReader r, Func<SessionName, PeerMessage> make, out PeerMessage? message)
    {
        message = null;
        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        message = make(session!);
        return FrameError.None;
    }

    private static FrameError DecodeReceivers(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U16(out ushort count))
        {
            return FrameError.Truncated;
        }

        if (count > MaxReceivers)
        {
            return FrameError.BadLength;
        }

        if (count * 8 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        var receivers = new ReceiverId[count];
        for (int i = 0; i < count; i++)
        {
            r.U32(out uint g);
            r.U32(out uint id);
            if (g == 0 || id == 0)
            {
                return FrameError.BadValue;
            }

            receivers[i] = new ReceiverId(new GatewayId(g), id);
        }

        message = new ReceiversMessage(session!, receivers);
        return FrameError.None;
    }

    private static FrameError DecodeDataChannel(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        if (!r.U32(out uint gateway) || !r.U32(out uint node))
        {
            return FrameError.Truncated;
        }

        if (gateway == 0 || gateway == node)
        {
            return FrameError.BadValue;
        }

        message = new DataChannelMessage(new GatewayId(gateway), node);
        return FrameError.None;
    }

    private static FrameError DecodePeerAuth(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        if (!r.U8(out byte suite) || !r.U32(out uint gateway) || !r.Bytes(PeeringHandshake.NonceBytes, out var nonce))
        {
            return FrameError.Truncated;
        }

        if (suite != PeeringHandshake.Suite || gateway == 0)
        {
            return FrameError.BadValue;
        }

        message = new PeerAuthMessage(new GatewayId(gateway), nonce.ToArray());
        return FrameError.None;
    }

    private static FrameError DecodeDataEndpoint(ref SpanReader r, out PeerMessage? message)
    {
        message = null;
        var error = ReadSession(ref r, out var session);
        if (error != FrameError.None)
        {
            return error;
        }

        if (!r.U32(out uint node))
        {
            return FrameError.Truncated;
        }

        error = EndpointCodec.Read(ref r, out var address);
        if (error != FrameError.None)
        {
            return error;
        }

        if (node == 0 && address is not null)
        {
            return FrameError.BadValue; // the gateway itself has no data-node address
        }

        message = new DataEndpointMessage(session!, node, address);
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

    private static FrameError ReadPath(ref SpanReader r, out GatewayId[] path)
    {
        path = [];
        if (!r.U8(out byte count))
        {
            return FrameError.Truncated;
        }

        if (count > MaxPath)
        {
            return FrameError.BadLength;
        }

        if (count * 4 > r.Remaining)
        {
            return FrameError.Truncated;
        }

        path = new GatewayId[count];
        for (int i = 0; i < count; i++)
        {
            r.U32(out uint g);
            if (g == 0)
            {
                return FrameError.BadValue;
            }

            path[i] = new GatewayId(g);
        }

        return FrameError.None;
    }

    private static void Path(FrameWriter w, GatewayId[] path)
    {
        w.U8(checked((byte)path.Length));
        foreach (var g in path)
        {
            w.U32(g.Value);
        }
    }

    private static FrameWriter Start(FrameType type) => new FrameWriter().U8(Version).U8((byte)type);
}
