using System.Buffers.Binary;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Wire;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// Issue 12, item 8, "a spoofed reset": the attack the issue found, replayed against running processes. A hostile host
/// on the same network sends reliable-unicast segments with the source address of a receiver (and of the publisher) to
/// the GMS, and with the GMS's source address to each node: data naming a new sender epoch (and receiver epoch 0),
/// connects, and challenges that echo guessed epochs. Before the cookie handshake, one such segment made the GMS remove
/// the node as unreachable and froze the group. Now each is answered by at most a challenge to the real owner of the
/// address, which ignores it: nobody is removed and every receiver gets every message. Source addresses are forged
/// with a raw socket (IP_HDRINCL), which needs root (CAP_NET_RAW), as this machine and CI have.
/// </summary>
public sealed class SpoofedResetTests(ITestOutputHelper output)
{
    private const int Messages = 4_000_000; // several seconds of stream, so the spoofed segments land while it flows
    private const int Receivers = 2;
    private static readonly TimeSpan Guard = TimeSpan.FromMinutes(10);

    [Fact]
    public async Task Segments_forged_from_members_addresses_evict_nobody_and_lose_nothing()
    {
        using var raw = new Socket(AddressFamily.InterNetwork, SocketType.Raw, ProtocolType.Udp);
        raw.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.HeaderIncluded, true);
        string gms = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{Tool.FreeUdpPort()}");
        string guard = ((int)Guard.TotalSeconds).ToString(CultureInfo.InvariantCulture);
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();
        var server = tools.Start(Tool.Qs("gms", "--listen", gms, "--seconds", guard, "--log-level", "Information"));
        var (publisher, receivers) = await tools.StartLoadAsync(gms, Messages, Receivers, (int)Guard.TotalSeconds);
        foreach (var receiver in receivers)
        {
            Assert.True(await receiver.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"receiver not ready: {receiver.Stderr}");
        }

        var gmsEnd = IPEndPoint.Parse(gms);
        var nodes = receivers.Append(publisher).Select(AddressOf).ToArray();
        var random = new Random(12);
        int sent = 0;
        for (int round = 0; round < 100; round++)
        {
            foreach (var node in nodes)
            {
                // As the node, to the GMS; and as the GMS, to the node.
                foreach (var (from, to) in new[] { (node, gmsEnd), (gmsEnd, node) })
                {
                    uint epoch = (uint)random.Next(1, int.MaxValue);
                    sent += Send(raw, from, to, Data(epoch, receiverEpoch: 0));
                    sent += Send(raw, from, to, Data(epoch, receiverEpoch: (uint)random.Next(1, int.MaxValue)));
                    sent += Send(raw, from, to, Handshake(Connect, epoch, 0, cookie: 0));
                    sent += Send(raw, from, to, Handshake(Connect, epoch, 0, cookie: ((ulong)random.NextInt64() << 1) | 1));
                    sent += Send(raw, from, to, Handshake(Challenge, (uint)random.Next(1, int.MaxValue), (uint)random.Next(1, int.MaxValue), cookie: 0));
                }
            }

            await Task.Delay(5);
        }

        Assert.True(receivers.Any(r => !r.HasExited), "the stream ended before the spoofed segments did: the test needs more messages");
        output.WriteLine($"sent {sent:N0} forged segments from {nodes.Length} nodes' and the GMS's addresses by {clock.Elapsed.TotalSeconds:F1} s; " +
            $"receivers then had {string.Join(", ", receivers.Select(r => r.Tail(1)))}");
        await ToolSet.AssertReceiversGotEverythingAsync(receivers, "load", Messages, Guard, clock, output);
        // The GMS's log is on: a removal would show. Receivers that finished say goodbye ("left"); nothing else may.
        Assert.Contains("registered", server.Stderr, StringComparison.Ordinal);
        var removals = server.Stderr.Split('\n').Where(l => l.Contains(" removed (", StringComparison.Ordinal) && !l.Contains("removed (left)", StringComparison.Ordinal)).ToList();
        Assert.True(removals.Count == 0, "the GMS removed a node: " + string.Join('\n', removals));
        Assert.False(publisher.HasLine("Unhandled"), publisher.Stderr);
    }

    private static IPEndPoint AddressOf(Tool node)
    {
        var ready = node.Stdout.Split('\n').First(l => l.StartsWith("ready", StringComparison.Ordinal));
        return IPEndPoint.Parse(ready[(ready.IndexOf("address=", StringComparison.Ordinal) + "address=".Length)..].Trim());
    }

    private const byte ReliableData = 3;
    private const byte Connect = 32;
    private const byte Challenge = 33;

    /// <summary>A reliable-unicast data segment (docs/wire-format.md): common header, then sender epoch, receiver epoch,
    /// seq, and a few payload bytes.</summary>
    private static byte[] Data(uint senderEpoch, uint receiverEpoch)
    {
        var segment = Header(ReliableData, 12 + 16 + 4);
        BinaryPrimitives.WriteUInt32LittleEndian(segment.AsSpan(12), senderEpoch);
        BinaryPrimitives.WriteUInt32LittleEndian(segment.AsSpan(16), receiverEpoch);
        BinaryPrimitives.WriteUInt64LittleEndian(segment.AsSpan(20), 0);
        return segment;
    }

    /// <summary>A connect or challenge: common header, two epochs, a 16-byte cookie.</summary>
    private static byte[] Handshake(byte type, uint first, uint second, ulong cookie)
    {
        var segment = Header(type, 12 + 8 + 16);
        BinaryPrimitives.WriteUInt32LittleEndian(segment.AsSpan(12), first);
        BinaryPrimitives.WriteUInt32LittleEndian(segment.AsSpan(16), second);
        BinaryPrimitives.WriteUInt64LittleEndian(segment.AsSpan(20), cookie);
        return segment;
    }

    private static byte[] Header(byte type, int length)
    {
        var bytes = new byte[length];
        new PacketHeader((PacketType)type, 4242, (ushort)length).Write(bytes);
        return bytes;
    }

    /// <summary>Sends <paramref name="payload"/> in a UDP datagram whose IP source is <paramref name="from"/> (the kernel
    /// fills in the IP checksum and id; the UDP checksum is left 0, "none", as IPv4 allows).</summary>
    private static int Send(Socket raw, IPEndPoint from, IPEndPoint to, byte[] payload)
    {
        var packet = new byte[20 + 8 + payload.Length];
        packet[0] = 0x45;
        BinaryPrimitives.WriteUInt16BigEndian(packet.AsSpan(2), (ushort)packet.Length);
        packet[8] = 64;
        packet[9] = (byte)ProtocolType.Udp;
        from.Address.GetAddressBytes().CopyTo(packet, 12);
        to.Address.GetAddressBytes().CopyTo(packet, 16);
        BinaryPrimitives.WriteUInt16BigEndian(packet.AsSpan(20), (ushort)from.Port);
        BinaryPrimitives.WriteUInt16BigEndian(packet.AsSpan(22), (ushort)to.Port);
        BinaryPrimitives.WriteUInt16BigEndian(packet.AsSpan(24), (ushort)(8 + payload.Length));
        payload.CopyTo(packet, 28);
        raw.SendTo(packet, new IPEndPoint(to.Address, 0));
        return 1;
    }
}
