using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Federation.Peering;

/// <summary>An optional IP endpoint on the wire (DATA_ENDPOINT, ASSIGN): <c>u8 family</c> (0: none; 4: IPv4, then 4
/// address bytes; 6: IPv6, then 16), then, unless none, <c>u16 port</c> (not 0). Anything else is refused.</summary>
internal static class EndpointCodec
{
    public static FrameWriter Write(FrameWriter w, IPEndPoint? endpoint)
    {
        if (endpoint is null)
        {
            return w.U8(0);
        }

        Span<byte> bytes = stackalloc byte[16];
        if (!endpoint.Address.TryWriteBytes(bytes, out int n))
        {
            throw new ArgumentException($"cannot encode {endpoint}", nameof(endpoint));
        }

        return w.U8(endpoint.AddressFamily == AddressFamily.InterNetwork ? (byte)4 : (byte)6).Bytes(bytes[..n]).U16(checked((ushort)endpoint.Port));
    }

    public static FrameError Read(ref SpanReader r, out IPEndPoint? endpoint)
    {
        endpoint = null;
        if (!r.U8(out byte family))
        {
            return FrameError.Truncated;
        }

        if (family == 0)
        {
            return FrameError.None;
        }

        if (family is not (4 or 6))
        {
            return FrameError.BadValue;
        }

        if (!r.Bytes(family == 4 ? 4 : 16, out var bytes) || !r.U16(out ushort port))
        {
            return FrameError.Truncated;
        }

        if (port == 0)
        {
            return FrameError.BadValue;
        }

        endpoint = new IPEndPoint(new IPAddress(bytes), port);
        return FrameError.None;
    }
}
