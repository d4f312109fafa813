using System.Buffers.Binary;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Wire;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// Issue 12, item 8: the attacks the issue tried against running processes, replayed by this test process as a
/// hostile host on loopback while a <c>qs</c> GMS, a publisher and two receivers stream. It joins the regions'
/// multicast addresses, copies a real data packet and sends it back rewritten (sequence 2^62, 10,000,000 ahead, a
/// made-up sender 777), floods the groups and the publisher's port with garbage, and opens 2,000 first contacts with the
/// GMS from 2,000 ports. Every receiver must still get every message once, in order, and a node started afterwards
/// must register. Before the fixes, the first forgery alone stopped the group for good. Correctness only: the
/// timeouts are hang guards, and every load loop is bounded in count.
/// </summary>
public sealed class HostileHostTests(ITestOutputHelper output)
{
    private const int Messages = 10_000_000; // several seconds of stream, so the forgeries land while it flows
    private const int Receivers = 2;
    private const byte RegionData = 5;
    private const byte Connect = 32;
    private static readonly TimeSpan Guard = TimeSpan.FromMinutes(10);

    [Fact]
    public async Task Forged_packets_a_garbage_flood_and_fake_contacts_leave_every_receiver_with_every_message()
    {
        ushort port = (ushort)Random.Shared.Next(20_000, 60_000);
        var poolStart = new IPAddress([239, 254, (byte)Random.Shared.Next(1, 250), 0]);
        string gms = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{Tool.FreeUdpPort()}");
        string pool = string.Create(CultureInfo.InvariantCulture, $"{poolStart}:{port}");
        string guard = ((int)Guard.TotalSeconds).ToString(CultureInfo.InvariantCulture);
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();

        // The hostile host listens on the first addresses of the pool, where the regions' multicast will be.
        var groups = Enumerable.Range(0, Receivers + 1).Select(i => Offset(poolStart, i)).ToArray();
        using var spy = Spy(groups, port);
        var server = tools.Start(Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", guard));
        var (publisher, receivers) = await tools.StartLoadAsync(gms, Messages, Receivers, (int)Guard.TotalSeconds);

        // One real packet per region the publisher sends into (the publisher's own and each receiver's).
        var originals = await SniffDataAsync(spy, Receivers + 1, TimeSpan.FromSeconds(120));
        var from = originals[0].From;
        output.WriteLine($"copied data packets of {originals.Count} regions from {from} after {clock.Elapsed.TotalSeconds:F1} s");

        int sent = 0;
        for (int round = 0; round < 5; round++)
        {
            foreach (var (original, _) in originals)
            {
                foreach (var group in groups)
                {
                    var to = new IPEndPoint(group, port);
                    sent += SendTo(spy, Rewritten(original, seq: 1UL << 62), to);
                    sent += SendTo(spy, Rewritten(original, seq: Seq(original) + 10_000_000), to);
                    sent += SendTo(spy, Rewritten(original, seq: Seq(original) + 1, sender: 777), to);
                    sent += SendTo(spy, Rewritten(original, seq: 1, sender: 777), to);
                }
            }

            sent += Flood(spy, groups.Select(g => new IPEndPoint(g, port)).Append(from).ToArray(), 2_000, seed: round);
            await Task.Delay(200);
        }

        Assert.True(receivers.Any(r => !r.HasExited), "the stream ended before the forgeries did: the test needs more messages");
        int contacts = FakeContacts(IPEndPoint.Parse(gms), 2_000);
        output.WriteLine($"sent {sent:N0} forged or garbage datagrams and {contacts:N0} first contacts by {clock.Elapsed.TotalSeconds:F1} s");

        await ToolSet.AssertReceiversGotEverythingAsync(receivers, "load", Messages, Guard, clock, output);

        // After 2,000 fake first contacts, a new node still registers.
        var late = tools.Start(Tool.Qs("node", "--gms", gms, "--join", "late", "--seconds", "60"));
        Assert.True(await late.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"a node started after the attack did not register: {late.Stderr}");
        Assert.False(server.HasLine("Unhandled"), server.Stderr);
        Assert.False(publisher.HasLine("Unhandled"), publisher.Stderr);
    }

    /// <summary>A socket on the pool's port that has joined <paramref name="groups"/> on loopback: it sees the regions'
    /// multicast and sends from its own address.</summary>
    private static Socket Spy(IPAddress[] groups, ushort port)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        socket.Bind(new IPEndPoint(IPAddress.Any, port));
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
        foreach (var group in groups)
        {
            socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group, IPAddress.Loopback));
        }

        return socket;
    }

    /// <summary>One region data packet with a sequence above 100 from each of <paramref name="regions"/> regions, seen
    /// on the groups (docs/wire-format.md: common header, then <c>u32 region | u32 view | u64 viewStart | u64 seq</c>),
    /// and where each came from.</summary>
    private static async Task<List<(byte[] Packet, IPEndPoint From)>> SniffDataAsync(Socket socket, int regions, TimeSpan limit)
    {
        var buffer = new byte[65_536];
        var found = new Dictionary<uint, (byte[], IPEndPoint)>();
        using var cancel = new CancellationTokenSource(limit);
        for (int seen = 0; seen < 10_000_000 && found.Count < regions; seen++)
        {
            var result = await socket.ReceiveFromAsync(buffer, SocketFlags.None, new IPEndPoint(IPAddress.Any, 0), cancel.Token);
            var packet = buffer.AsSpan(0, result.ReceivedBytes);
            if (packet.Length >= 36 && BinaryPrimitives.ReadUInt16LittleEndian(packet) == PacketHeader.Magic && packet[3] == RegionData && Seq(packet) > 100)
            {
                found.TryAdd(BinaryPrimitives.ReadUInt32LittleEndian(packet[12..]), (packet.ToArray(), (IPEndPoint)result.RemoteEndPoint));
            }
        }

        return [.. found.Values];
    }

    private static ulong Seq(ReadOnlySpan<byte> packet) => BinaryPrimitives.ReadUInt64LittleEndian(packet[28..]);

    private static byte[] Rewritten(byte[] original, ulong seq, uint? sender = null)
    {
        var copy = (byte[])original.Clone();
        if (sender is { } id)
        {
            BinaryPrimitives.WriteUInt32LittleEndian(copy.AsSpan(4), id);
        }

        BinaryPrimitives.WriteUInt64LittleEndian(copy.AsSpan(20), seq); // viewStart: the packet starts its view
        BinaryPrimitives.WriteUInt64LittleEndian(copy.AsSpan(28), seq);
        return copy;
    }

    private static int SendTo(Socket socket, byte[] datagram, IPEndPoint to) => socket.SendTo(datagram, to) > 0 ? 1 : 0;

    /// <summary>Random bytes, truncated headers and valid headers with random bodies, <paramref name="count"/> in all.</summary>
    private static int Flood(Socket socket, IPEndPoint[] targets, int count, int seed)
    {
        var random = new Random(seed);
        var datagram = new byte[1_200];
        for (int i = 0; i < count; i++)
        {
            int length = random.Next(1, datagram.Length);
            random.NextBytes(datagram.AsSpan(0, length));
            if (i % 2 == 0 && length >= 12)
            {
                new PacketHeader((PacketType)random.Next(1, 40), (uint)random.Next(), (ushort)length, (ushort)random.Next(0x10000)).Write(datagram);
            }

            socket.SendTo(datagram.AsSpan(0, length), targets[i % targets.Length]);
        }

        return count;
    }

    /// <summary>One reliable-unicast connect (no cookie) from each of <paramref name="count"/> fresh ports: each costs the
    /// GMS a stateless challenge, never a table entry.</summary>
    private static int FakeContacts(IPEndPoint gms, int count)
    {
        var connect = new byte[36];
        new PacketHeader((PacketType)Connect, 0, (ushort)connect.Length).Write(connect);
        for (int i = 0; i < count; i++)
        {
            using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            BinaryPrimitives.WriteUInt32LittleEndian(connect.AsSpan(12), (uint)(i + 1));
            socket.SendTo(connect, gms);
        }

        return count;
    }

    private static IPAddress Offset(IPAddress start, int offset)
    {
        var bytes = start.GetAddressBytes();
        BinaryPrimitives.WriteUInt32BigEndian(bytes, BinaryPrimitives.ReadUInt32BigEndian(bytes) + (uint)offset);
        return new IPAddress(bytes);
    }
}
