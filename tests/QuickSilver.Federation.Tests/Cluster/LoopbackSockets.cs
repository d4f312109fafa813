using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Plugins;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>What the clustered-gateway tests on real sockets share: multicast islands on loopback, free ports, bounded
/// waits, island receivers that collect numbered 100-byte messages, and raw peering frames.</summary>
internal static class LoopbackSockets
{
    public static MulticastNativeNet Island(string pool, int portBase, IPEndPoint? mediator = null)
        => new(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse(pool), PortBase = portBase, PoolSize = 2, Mediator = mediator });

    /// <summary>A loopback port free a moment ago for TCP and UDP (the runtimes bind both to it).</summary>
    public static IPEndPoint FreePort()
    {
        // Free for TCP and for UDP: the runtimes bind both on the port (SamePortSockets), and a UDP socket another test
        // holds on a port TCP thinks free made a bind fail with "Address already in use" (seen once in CI).
        for (int attempt = 0; ; attempt++)
        {
            using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            var endpoint = (IPEndPoint)probe.LocalEndPoint!;
            using var udp = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            try
            {
                udp.Bind(endpoint);
                return endpoint;
            }
            catch (SocketException) when (attempt < 100)
            {
            }
        }
    }

    /// <summary>Polls <paramref name="condition"/> every 50 ms for at most <paramref name="limit"/> (10 s by default).</summary>
    public static async Task<bool> WaitAsync(Func<Task<bool>> condition, TimeSpan? limit = null)
    {
        var end = DateTime.UtcNow + (limit ?? TimeSpan.FromSeconds(10));
        while (DateTime.UtcNow < end)
        {
            if (await condition())
            {
                return true;
            }

            await Task.Delay(50);
        }

        return await condition();
    }

    /// <summary>A socket joined to an island's multicast group on loopback.</summary>
    /// <summary>Sends <paramref name="count"/> datagrams of <paramref name="size"/> bytes numbered 0.. (little-endian i32)
    /// to <paramref name="group"/> on loopback, pausing 5 ms after every 20 so a gateway's socket is not overrun.</summary>
    public static async Task SendNumberedAsync(IPEndPoint group, int count, int size, CancellationToken cancellationToken = default)
    {
        using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        for (int i = 0; i < count; i++)
        {
            var p = new byte[size];
            BinaryPrimitives.WriteInt32LittleEndian(p, i);
            source.SendTo(p, group);
            if (i % 20 == 19)
            {
                await Task.Delay(5, cancellationToken);
            }
        }
    }

    public static Socket Receiver(IPEndPoint group)
    {
        var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        receiver.Bind(group);
        receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group.Address, IPAddress.Loopback));
        return receiver;
    }

    /// <summary>Receives ids [0, count) in arrival order until all came or nothing arrived for 3 s.</summary>
    public static async Task<List<int>> ReceiveAsync(Socket receiver, int count)
    {
        var got = new List<int>();
        var buffer = new byte[2048];
        while (got.Count < count)
        {
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(3));
            try
            {
                int n = await receiver.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                int id = BinaryPrimitives.ReadInt32LittleEndian(buffer);
                if (n == 100 && id >= 0 && id < count)
                {
                    got.Add(id);
                }
            }
            catch (OperationCanceledException)
            {
                break;
            }
        }

        return got;
    }

    /// <summary>A peering frame as it travels: u32 length, then the body.</summary>
    public static byte[] Frame(ReadOnlySpan<byte> body)
    {
        var f = new byte[4 + body.Length];
        BinaryPrimitives.WriteUInt32LittleEndian(f, (uint)body.Length);
        body.CopyTo(f.AsSpan(4));
        return f;
    }

    /// <summary>Reads one u32-length frame (10 s at most); null when the connection closed first.</summary>
    public static async Task<byte[]?> ReadFrameAsync(Socket s)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        var prefix = new byte[4];
        for (int got = 0; got < 4;)
        {
            int n = await s.ReceiveAsync(prefix.AsMemory(got), SocketFlags.None, cts.Token);
            if (n == 0)
            {
                return null;
            }

            got += n;
        }

        var body = new byte[BinaryPrimitives.ReadUInt32LittleEndian(prefix)];
        for (int got = 0; got < body.Length;)
        {
            int n = await s.ReceiveAsync(body.AsMemory(got), SocketFlags.None, cts.Token);
            if (n == 0)
            {
                return null;
            }

            got += n;
        }

        return body;
    }

    /// <summary>Reads and discards until the peer closes or resets the connection (10 s at most).</summary>
    public static async Task<bool> ClosedByPeerAsync(Socket s)
    {
        var buffer = new byte[4096];
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        try
        {
            while (await s.ReceiveAsync(buffer, SocketFlags.None, cts.Token) > 0)
            {
            }

            return true;
        }
        catch (SocketException)
        {
            return true; // reset
        }
    }
}
