using QuickSilver.Core;
using QuickSilver.Core.Io;
using static QuickSilver.Core.Tests.CoreLoop.CoreTestKit;

namespace QuickSilver.Core.Tests.CoreLoop;

/// <summary>
/// On Linux a group socket drops, in the kernel, what its own endpoint multicast (UdpEndpointOptions.ReceiveOwnMulticast
/// off, the default), and still receives what any other socket on the host sends to the group.
/// </summary>
public sealed class OwnMulticastTests
{
    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void A_group_socket_drops_its_own_endpoints_multicast_and_receives_the_others(IoBackendKind backend)
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // the filter is Linux's; elsewhere the datagrams arrive as before
        }

        var (own, others, filtered) = Exchange(backend, receiveOwn: false);
        Assert.Equal(1, filtered);
        Assert.Equal([2], own);    // not its own 1, which the kernel queued for it before the other endpoint's 2
        Assert.Equal([1], others);
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void With_ReceiveOwnMulticast_a_group_socket_receives_its_own_endpoints_multicast(IoBackendKind backend)
    {
        var (own, others, filtered) = Exchange(backend, receiveOwn: true);
        Assert.Equal(0, filtered);
        Assert.Equal([1, 2], own);
        Assert.Equal([1], others);
    }

    /// <summary>Endpoint A (with <paramref name="receiveOwn"/>) multicasts 1; once B has it, B multicasts 2; once A has
    /// that, returns the first bytes A received, those B received from others (B's own datagrams set aside, since
    /// elsewhere than Linux they come back to it), and A's filtered group sockets.</summary>
    private static (List<byte> Own, List<byte> Others, int Filtered) Exchange(IoBackendKind backend, bool receiveOwn)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var group = new NetAddress(0xEFFD0000u | (uint)Random.Shared.Next(1, 0xFFFF), (ushort)Random.Shared.Next(20000, 60000));
        var a = core.OpenUdp(new UdpEndpointOptions { ReceiveOwnMulticast = receiveOwn });
        var b = core.OpenUdp();
        var own = new List<byte>();
        var others = new List<byte>();
        var atA = new CountingHandler { OnEach = (_, data) => own.Add(data[0]) };
        var atB = new CountingHandler { OnEach = (from, data) => { if (from != b.LocalAddress) { others.Add(data[0]); } } };
        core.Invoke(() =>
        {
            a.SetHandler(atA);
            b.SetHandler(atB);
            a.JoinGroup(group);
            b.JoinGroup(group);
            Assert.True(a.TrySend(group, [1]));
        });

        Wait(() => OnCore(core, () => others.Count) >= 1, "B has A's datagram");
        core.Invoke(() => Assert.True(b.TrySend(group, [2])));
        Wait(() => OnCore(core, () => own.Contains((byte)2)), "A has B's datagram");
        return OnCore(core, () => (own.ToList(), others.ToList(), a.OwnMulticastFiltered));
    }
}
