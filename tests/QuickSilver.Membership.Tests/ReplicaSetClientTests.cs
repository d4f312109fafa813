using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>A node follows a leader it was not given (a replica added to the set at run time) when a replica it was given
/// names it in a redirect; virtual time on <see cref="SimulatedGmsCluster"/>.</summary>
public sealed class ReplicaSetClientTests
{
    private static readonly NetAddress[] Replicas = [NetAddress.Loopback(7001), NetAddress.Loopback(7002), NetAddress.Loopback(7003)];

    [Fact]
    public void A_node_follows_a_redirect_to_a_replica_it_was_not_given()
    {
        var world = new VirtualWorld();
        var gms = new SimulatedGmsCluster(world, new GmsOptions(), Replicas);
        gms.Elect(gms[2]);
        var client = new GmsClient(world, world.Channel(NetAddress.Loopback(8000)), Replicas[0], 100, new GmsClientOptions { Replicas = Replicas[..2] });
        client.Start();
        client.Join("g");
        Assert.True(world.RunUntil(() => client.FindGroup("g") is not null, TimeSpan.FromSeconds(5)));
        Assert.Equal(Replicas[2], client.CurrentGms);
        Assert.Equal(1, client.ReplicasLearned);
        Assert.Equal(Replicas, client.Replicas);

        // A redirect to a multicast or empty address is not learned.
        world.Inject(Replicas[0], NetAddress.Loopback(8000), GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Redirect, Number = LeaderAddress.Pack(new NetAddress(0xEF000001, 9)) }));
        world.RunFor(TimeSpan.FromMilliseconds(10));
        Assert.Equal(3, client.Replicas.Count);
    }
}
