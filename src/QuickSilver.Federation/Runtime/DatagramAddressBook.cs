using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Io;

namespace QuickSilver.Federation.Runtime;

/// <summary>
/// The addresses one runtime's UDP socket exchanges datagrams with (peer gateways, data nodes, the control node), each
/// converted once, so a datagram costs no allocation for its address either way (principle 5): a received datagram's
/// source (<see cref="DatagramReceiveBatch.Source"/>, as recvmmsg gives it) resolves to the runtime's own
/// <see cref="IPEndPoint"/> object for that address, which its tables are keyed by; a datagram sent goes through the
/// address's <see cref="SocketAddress"/>, serialised once (the <see cref="Socket.SendTo(ReadOnlySpan{byte}, SocketFlags, EndPoint)"/>
/// overload serialises the endpoint on every call: 72 bytes a datagram on .NET 10).
/// <para>The runtime replaces the whole set (<see cref="Replace"/>) when one of its tables changes (a peer's HELLO or
/// disconnection, a learnt data node): rare, on its loop thread. The receive loop reads the current set without a lock
/// (a published dictionary is never written again). A source not in the set (a stranger, refused by the runtime's
/// tables anyway) gets a new endpoint, counted in <see cref="Misses"/>; the set is bounded by the runtime's tables.</para>
/// </summary>
internal sealed class DatagramAddressBook
{
    private readonly AddressFamily _family;
    private volatile Entries _entries = new([], []);
    private long _misses;

    /// <param name="family">The socket's family: an IPv4 address is serialised as IPv4-mapped for an IPv6 socket.</param>
    public DatagramAddressBook(AddressFamily family) => _family = family;

    /// <summary>Received datagrams whose source was not in the book (an endpoint made for each).</summary>
    public long Misses => Interlocked.Read(ref _misses);

    /// <summary>Addresses in the book.</summary>
    public int Count => _entries.Serialized.Count;

    /// <summary>Makes <paramref name="endpoints"/> the book (duplicates allowed; the first object for an address is
    /// the one <see cref="Resolve"/> returns).</summary>
    public void Replace(IEnumerable<IPEndPoint> endpoints)
    {
        ArgumentNullException.ThrowIfNull(endpoints);
        var bySource = new Dictionary<DatagramReceiveBatch.Source, IPEndPoint>();
        var serialized = new Dictionary<IPEndPoint, SocketAddress>();
        foreach (var endpoint in endpoints)
        {
            if (serialized.ContainsKey(endpoint))
            {
                continue;
            }

            var target = _family == AddressFamily.InterNetworkV6 && endpoint.AddressFamily == AddressFamily.InterNetwork
                ? new IPEndPoint(endpoint.Address.MapToIPv6(), endpoint.Port)
                : endpoint;
            serialized[endpoint] = target.Serialize();
            if (endpoint.AddressFamily == AddressFamily.InterNetwork || endpoint.Address.IsIPv4MappedToIPv6)
            {
                bySource.TryAdd(DatagramReceiveBatch.Source.Of(endpoint), endpoint);
            }
        }

        _entries = new Entries(bySource, serialized);
    }

    /// <summary>The book's endpoint for <paramref name="source"/>, or a new one (counted) when it is not in the book.
    /// Any thread.</summary>
    public IPEndPoint Resolve(DatagramReceiveBatch.Source source)
    {
        if (_entries.BySource.TryGetValue(source, out var endpoint))
        {
            return endpoint;
        }

        Interlocked.Increment(ref _misses);
        return source.ToEndPoint();
    }

    /// <summary>Sends <paramref name="datagram"/> to <paramref name="target"/> through its serialised address when the
    /// book has it (no allocation), else through the endpoint. Returns the bytes sent; throws what the socket throws.</summary>
    public int SendTo(Socket socket, ReadOnlySpan<byte> datagram, IPEndPoint target)
    {
        ArgumentNullException.ThrowIfNull(socket);
        return _entries.Serialized.TryGetValue(target, out var address)
            ? socket.SendTo(datagram, SocketFlags.None, address)
            : socket.SendTo(datagram, SocketFlags.None, target);
    }

    private sealed record Entries(Dictionary<DatagramReceiveBatch.Source, IPEndPoint> BySource, Dictionary<IPEndPoint, SocketAddress> Serialized);
}
