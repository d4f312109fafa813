using CsCheck;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Membership.Service;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Membership.Tests.Fuzz;

/// <summary>
/// The GMS server and client fed hostile GMS messages as they arrive on their control channel (well-formed messages
/// of every kind with hostile fields, from members and strangers, and noise), with virtual time passing. Nothing may
/// throw; the server registers at most one node per source address, and nodes that stop talking are removed.
/// </summary>
public sealed class GmsServiceProperties
{
    /// <summary>A control channel double: the test calls the receiver; what is sent is counted.</summary>
    private sealed class Channel : IControlChannel
    {
        public Action<NetAddress, ReadOnlySpan<byte>>? Receive;

        public long Sent;

        public int MaxMessageBytes => 256 * 1024;

        public bool Send(NetAddress peer, ReadOnlySpan<byte> message)
        {
            Sent++;
            return true;
        }

        public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed) => Receive = onMessage;

        public void Forget(NetAddress peer)
        {
        }
    }

    private static readonly Gen<string?> Name = Gen.OneOf(Gen.Const(default(string)), Gen.Const(""), Gen.Const("prices"), Gen.Const("orders"), Gen.String[0, 30].Select(s => (string?)s));

    private static readonly Gen<byte[]> Message = Gen.Frequency(
        (6, Gen.Select(Gen.Frequency((6, Gen.Byte[1, 7]), (1, Gen.Byte)), Hostile.U64, Name, Gen.Int, Hostile.U64, (kind, number, name, heartbeat, epoch) =>
            GmsCodec.Encode(new GmsMessage
            {
                Kind = (GmsMessageKind)kind,
                Number = number,
                GroupName = name,
                HeartbeatMs = heartbeat,
                Epoch = epoch,
                Update = new WireUpdate
                {
                    Groups = [new WireGroupView { Group = 1, Name = name ?? "", ViewNumber = (uint)number, Regions = [1, 1] }],
                    Regions = [new WireRegionView { Region = 1, ViewNumber = 1, Members = [1, 0x7F000001, 5000], MulticastIp = 0xEFFF0100, MulticastPort = 47000 }],
                },
            }))),
        (1, Hostile.Noise));

    private static readonly Gen<(int Source, byte[] Message, int Wait)[]> Inputs =
        Gen.Select(Gen.Int[0, 12], Message, Gen.Frequency((5, Gen.Const(0)), (1, Gen.Int[1, 3000]))).Array[1, 120];

    private static NetAddress Source(int index) => new(0x0A000001 + (uint)index, (ushort)(7000 + index));

    [Fact]
    public void Hostile_messages_leave_the_server_bounded_by_its_sources()
    {
        Property.ForAll(Inputs, 300, seed: 211, inputs =>
        {
            var time = new VirtualScheduler();
            var channel = new Channel();
            var server = new GmsServer(time, channel, epoch: 7, new GmsOptions());
            foreach (var (source, message, wait) in inputs)
            {
                channel.Receive!(Source(source), message);
                time.RunFor(TimeSpan.FromMilliseconds(wait));
                Assert.True(server.State.NodeCount <= 13, $"{server.State.NodeCount} nodes from 13 sources");
            }

            time.RunFor(TimeSpan.FromSeconds(30)); // no heartbeats: every node is declared dead and removed
            Assert.Equal(0, server.State.NodeCount);
        });
    }

    [Fact]
    public void Hostile_messages_never_make_the_client_throw()
    {
        var gms = Source(0);
        Property.ForAll(Inputs, 300, seed: 212, inputs =>
        {
            var time = new VirtualScheduler();
            var channel = new Channel();
            var client = new GmsClient(time, channel, gms, incarnation: 99);
            client.Start();
            foreach (var (source, message, wait) in inputs)
            {
                channel.Receive!(source < 8 ? gms : Source(source), message); // mostly as if from the GMS's address (spoofed)
                time.RunFor(TimeSpan.FromMilliseconds(wait));
            }

            time.RunFor(TimeSpan.FromSeconds(5));
        });
    }

    [Fact]
    public void A_welcome_naming_a_heartbeat_interval_beyond_the_bound_is_dropped()
    {
        // A Welcome saying "heartbeat every 24 days" made the node go silent and the GMS declare it dead.
        var gms = Source(0);
        var time = new VirtualScheduler();
        var channel = new Channel();
        var client = new GmsClient(time, channel, gms, incarnation: 99);
        client.Start();
        channel.Receive!(gms, GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Welcome, Number = 5, HeartbeatMs = int.MaxValue, Epoch = 1 }));
        Assert.False(client.IsRegistered);
        Assert.Equal(1, client.Drops[DropReason.Malformed]);

        channel.Receive!(gms, GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Welcome, Number = 5, HeartbeatMs = 500, Epoch = 1 }));
        Assert.True(client.IsRegistered);
    }

    [Fact]
    public void A_heartbeat_interval_beyond_the_bound_fails_validation_naming_the_option()
    {
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => new GmsOptions { HeartbeatInterval = TimeSpan.FromMinutes(2), FailureTimeout = TimeSpan.FromMinutes(5) }.Validate());
        Assert.Contains("GmsOptions.HeartbeatInterval", error.Message);
    }
}
