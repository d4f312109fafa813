using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// The region layer as a whole (dispatcher, reliable unicast, region member and sender) fed hostile datagrams: forged
/// data packets from members and strangers with sequences at the limits, tokens, pulls, NAKs and ACKs carrying hostile
/// numbers (inside in-order reliable segments, as a peer with a conversation can send them), raw reliable segments and
/// noise, with virtual time passing between bursts. Nothing may throw, no single datagram may make the layer walk the
/// sequence space (a hang guard turns such a loop into a failure), and what the layer holds stays within its bounds.
/// </summary>
public sealed class RegionLayerProperties
{
    private static readonly TimeSpan HangGuard = TimeSpan.FromMinutes(2);

    private static readonly Gen<uint> SenderId = Gen.OneOf(Gen.Const(1u), Gen.Const(2u), Gen.Const(3u), Gen.Const(777u), Hostile.U32);

    private static readonly Gen<NetAddress> From = Gen.Frequency(
        (4, Gen.OneOf(Gen.Const(RegionRig.Peer2), Gen.Const(RegionRig.Peer3))),
        (1, Gen.Const(RegionRig.Self)),
        (1, Gen.UShort[1, 64].Select(port => new NetAddress(0x0A000001, port))));

    private static readonly Gen<uint> RegionId = Gen.Frequency((6, Gen.Const(1u)), (1, Hostile.U32));

    private static readonly Gen<uint> ViewNumber = Gen.Frequency((4, Gen.Const(1u)), (1, Gen.Const(0u)), (1, Gen.Const(2u)), (1, Hostile.U32));

    /// <summary>Sequence numbers near the start of a stream, where they drive the protocol, and at the limits.</summary>
    private static readonly Gen<ulong> Seq = Gen.Frequency((3, Gen.ULong[1, 64]), (1, Gen.ULong[1, 4000]), (2, Hostile.U64));

    private abstract record Input;

    private sealed record DataInput(NetAddress From, uint Sender, uint Region, uint View, ulong ViewStart, ulong Seq, int Payload) : Input;

    private sealed record ControlInput(NetAddress From, byte[] Message) : Input;

    private sealed record RawInput(NetAddress From, byte[] Datagram) : Input;

    private sealed record TimeInput(int Milliseconds) : Input;

    /// <summary>Where data comes from: mostly a member sending as itself (the only data a member takes, so the only data
    /// that drives its streams), else any address claiming any sender id.</summary>
    private static readonly Gen<(NetAddress From, uint Sender)> DataSource = Gen.Frequency(
        (3, Gen.OneOf(Gen.Const((RegionRig.Peer2, 2u)), Gen.Const((RegionRig.Peer3, 3u)))),
        (1, Gen.Select(From, SenderId)));

    private static readonly Gen<Input> Data =
        Gen.Select(DataSource, RegionId, ViewNumber, Gen.Select(Seq, Seq), Gen.Int[0, 300], (source, region, view, seqs, payload) =>
            (Input)new DataInput(source.From, source.Sender, region, view, Math.Min(seqs.Item1, seqs.Item2), Math.Max(seqs.Item1, seqs.Item2), payload));

    private static readonly Gen<byte[]> NakSetBytes = QsmGen.RawNakSet(8);

    private static readonly Gen<byte[]> Ranges =
        Gen.Select(Gen.OneOf(Gen.Const(RegionControl.Nak), Gen.Const(RegionControl.Pull)), RegionId, SenderId, Gen.Select(Gen.UShort[0, 3], Gen.UShort[0, 4]), NakSetBytes,
            (kind, region, sender, partition, set) =>
            {
                var message = new byte[13 + set.Length];
                message[0] = (byte)kind;
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(1), region);
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(5), sender);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(9), partition.Item1);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(11), partition.Item2);
                set.CopyTo(message, 13);
                return message;
            });

    private static readonly Gen<byte[]> Ack =
        Gen.Select(RegionId, SenderId, ViewNumber, Gen.Select(Seq, Seq), Hostile.Double, Gen.Double[0, 1], (region, sender, view, seqs, rate, loss) =>
        {
            var message = new byte[RegionWire.AckSize];
            RegionWire.WriteAck(message, new RegionAck(region, sender, view, Math.Min(seqs.Item1, seqs.Item2), Math.Max(seqs.Item1, seqs.Item2), rate, loss));
            return message;
        });

    private static readonly Gen<byte[]> TokenMessage =
        Gen.Select(RegionId, ViewNumber, Gen.Select(Gen.UShort[0, 2], Gen.UShort[0, 3]), Gen.Select(SenderId, Seq, Seq, Seq, Seq).Array[0, 4], NakSetBytes,
            (region, view, position, sections, naks) =>
            {
                var token = new Token { Region = region, View = view, Round = 1, Partition = position.Item1, Step = position.Item2 };
                foreach (var (sender, cutoff, purge, stable, maxSeen) in sections)
                {
                    var section = new TokenSection(sender, 8) { Cutoff = cutoff, PurgeUpTo = purge, StableBefore = stable, MaxSeen = maxSeen };
                    section.PredecessorNaks.TryRead(naks);
                    section.PartitionNaks.TryRead(naks);
                    token.Sections.Add(section);
                }

                var message = new byte[64 * 1024];
                return message.AsSpan(0, token.Write(message)).ToArray();
            });

    private static readonly Gen<Input> Control =
        Gen.Select(From, Gen.Frequency((3, TokenMessage), (3, Ranges), (2, Ack), (1, Hostile.Noise)), (from, message) => (Input)new ControlInput(from, message));

    private static readonly Gen<Input> Raw = Gen.Select(From, Hostile.Noise, Gen.Byte[0, 7], (from, noise, type) =>
    {
        if (noise.Length >= 12 && type > 0)
        {
            // A valid common header in front of the noise: the reliable or region layer reads the body.
            new QuickSilver.Core.Wire.PacketHeader((QuickSilver.Core.Wire.PacketType)type, 2, (ushort)noise.Length).Write(noise);
        }

        return (Input)new RawInput(from, noise);
    });

    private static readonly Gen<Input[]> Inputs =
        Gen.Frequency((5, Data), (4, Control), (2, Raw), (1, Gen.Int[1, 300].Select(ms => (Input)new TimeInput(ms)))).Array[20, 80];

    private static void Feed(RegionRig rig, Input input)
    {
        switch (input)
        {
            case DataInput d:
                rig.Data(d.From, new DataHeader(d.Sender, d.Region, d.View, d.ViewStart, d.Seq), new byte[d.Payload]);
                break;
            case ControlInput c:
                rig.Control(c.From, c.Message);
                break;
            case RawInput r:
                rig.Datagram(r.From, r.Datagram);
                break;
            case TimeInput t:
                rig.Run(TimeSpan.FromMilliseconds(t.Milliseconds));
                break;
        }
    }

    private static void AssertBounded(RegionRig rig)
    {
        var options = rig.Options;
        foreach (var stream in rig.Member.Streams.Values)
        {
            Assert.True(stream.HeldCount <= options.MaxHeldPackets, $"sender {stream.Sender}: {stream.HeldCount} held");
            Assert.True(stream.Capacity <= 2 * options.MaxHeldPackets, $"sender {stream.Sender}: ring of {stream.Capacity}");
        }

        Assert.True(rig.Sender.Acknowledged <= rig.Sender.LastSequence);
        Assert.True(rig.Sender.Unacknowledged <= options.SenderWindow);
        Assert.True(rig.Reliable.ConnectionCount <= 64);
        Assert.True(rig.Member.TrackedSenders <= rig.Member.Streams.Count + options.MaxSenders);
    }

    [Fact]
    public void Hostile_datagrams_leave_the_region_layer_bounded_and_never_throw()
    {
        HangGuarded(() => Property.ForAll(Inputs, 300, seed: 901, inputs =>
        {
            var rig = new RegionRig();
            rig.Run(TimeSpan.FromMilliseconds(250), pulls: 64); // some real traffic first: the sender has numbered packets
            foreach (var input in inputs)
            {
                Feed(rig, input);
            }

            rig.Run(TimeSpan.FromSeconds(2), pulls: 64);
            AssertBounded(rig);
        }, print: inputs => string.Join("\n", inputs.Select(i => i.ToString()))));
    }

    [Fact]
    public void A_pull_naming_the_whole_sequence_space_repairs_only_what_is_held()
    {
        // Regression: a pull was answered by walking every index from the range's first up to the stream's highest seen
        // seq, so a packet numbered 2^62, then a pull for [1, 2^62] for that sender, spun the core thread for good (and a
        // long-lived stream cost a walk over its whole history per pull). Since only members' data is taken, the packet
        // is a member's (node 2, from its own address) and the pull another member's.
        HangGuarded(() =>
        {
            var rig = new RegionRig();
            ulong far = 1UL << 62;
            rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, far, far), new byte[10]);
            var ranges = new NakSet(8);
            ranges.AddRange(1, far);
            var message = new byte[64];
            int length = RegionWire.WriteRanges(message, RegionControl.Pull, 1, 2, 0, 1, ranges);
            rig.Open(RegionRig.Peer3);
            long sentBefore = rig.Transport.Sent;
            rig.Control(RegionRig.Peer3, message.AsSpan(0, length));
            Assert.True(rig.Transport.Sent - sentBefore <= 2, "one repair (the packet held) and an acknowledgement at most");
            Assert.Equal(1, rig.Member.RepairsSent);
        });
    }

    [Fact]
    public void Sequences_at_the_top_of_the_sequence_space_do_not_wrap_the_stream()
    {
        // Regression: a packet numbered 2^64 - 1, then a token whose section for that sender anchored its stream at
        // 2^64 - 2 and a second one purging up to 2^64 - 1: the purge loop's "seq <= 2^64 - 1; seq++" never ended, and
        // the core thread spun for good. (Both once came from anyone; now only members are heard, so a member's.)
        HangGuarded(() =>
        {
            var rig = new RegionRig();
            rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, ulong.MaxValue, ulong.MaxValue), new byte[10]);
            rig.Control(RegionRig.Peer3, rig.Token(2, purgeUpTo: ulong.MaxValue - 1, round: 1));
            rig.Control(RegionRig.Peer3, rig.Token(2, purgeUpTo: ulong.MaxValue, round: 2));
            rig.Run(TimeSpan.FromSeconds(1));
            AssertBounded(rig);
        });
    }

    /// <summary>Runs <paramref name="test"/> on its own thread and fails if it has not finished within a generous
    /// limit: not a timing assertion, a hang detector (a loop driven by a peer's number never ends).</summary>
    internal static void HangGuarded(Action test)
    {
        Exception? failure = null;
        var thread = new Thread(() =>
        {
            try
            {
                test();
            }
            catch (Exception e)
            {
                failure = e;
            }
        }, 16 << 20)
        { IsBackground = true };
        thread.Start();
        if (!thread.Join(HangGuard))
        {
            throw new PropertyFailedException($"Still running after {HangGuard}: a loop driven by a peer's number?");
        }

        if (failure is not null)
        {
            System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(failure).Throw();
        }
    }
}
