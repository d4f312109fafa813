using System.Buffers.Binary;
using System.Globalization;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Core.Io;

/// <summary>
/// An IPv4 address and UDP port, as a small value type so the data path never allocates an <see cref="IPEndPoint"/>.
/// The address is held in host byte order (127.0.0.1 is 0x7F000001). Converts from "a.b.c.d:port" text
/// (<see cref="NetAddressConverter"/>), so configuration binding reads it.
/// </summary>
[System.ComponentModel.TypeConverter(typeof(NetAddressConverter))]
public readonly struct NetAddress : IEquatable<NetAddress>
{
    public NetAddress(uint ip, ushort port)
    {
        Ip = ip;
        Port = port;
    }

    /// <summary>IPv4 address in host byte order.</summary>
    public uint Ip { get; }

    public ushort Port { get; }

    /// <summary>True for 224.0.0.0/4.</summary>
    public bool IsMulticast => (Ip >> 28) == 0xE;

    /// <summary>True for 127.0.0.0/8.</summary>
    public bool IsLoopback => (Ip >> 24) == 127;

    public static NetAddress Loopback(ushort port) => new(0x7F000001, port);

    public static NetAddress FromIPEndPoint(IPEndPoint endPoint)
    {
        ArgumentNullException.ThrowIfNull(endPoint);
        if (endPoint.AddressFamily != AddressFamily.InterNetwork)
        {
            throw new ArgumentException($"Only IPv4 endpoints are supported, got {endPoint}.", nameof(endPoint));
        }

        Span<byte> bytes = stackalloc byte[4];
        endPoint.Address.TryWriteBytes(bytes, out _);
        return new NetAddress(BinaryPrimitives.ReadUInt32BigEndian(bytes), (ushort)endPoint.Port);
    }

    public IPAddress ToIPAddress()
    {
        Span<byte> bytes = stackalloc byte[4];
        BinaryPrimitives.WriteUInt32BigEndian(bytes, Ip);
        return new IPAddress(bytes);
    }

    public IPEndPoint ToIPEndPoint() => new(ToIPAddress(), Port);

    /// <summary>Parses "a.b.c.d:port".</summary>
    public static NetAddress Parse(string text)
    {
        ArgumentNullException.ThrowIfNull(text);
        if (!IPEndPoint.TryParse(text, out var ep) || ep.AddressFamily != AddressFamily.InterNetwork)
        {
            throw new FormatException($"'{text}' is not an IPv4 address with a port (a.b.c.d:port).");
        }

        return FromIPEndPoint(ep);
    }

    public bool Equals(NetAddress other) => Ip == other.Ip && Port == other.Port;

    public override bool Equals(object? obj) => obj is NetAddress other && Equals(other);

    public override int GetHashCode() => (int)(Ip * 2654435761u) ^ Port;

    public static bool operator ==(NetAddress left, NetAddress right) => left.Equals(right);

    public static bool operator !=(NetAddress left, NetAddress right) => !left.Equals(right);

    public override string ToString() => string.Create(CultureInfo.InvariantCulture,
        $"{Ip >> 24}.{(Ip >> 16) & 0xFF}.{(Ip >> 8) & 0xFF}.{Ip & 0xFF}:{Port}");
}
