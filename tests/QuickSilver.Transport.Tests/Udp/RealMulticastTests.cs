using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Probe;

namespace QuickSilver.Transport.Tests.Udp;

/// <summary>
/// Two cores in one process exchange 1,000,000 datagrams over loopback IP multicast, once per backend. The receiver
/// acknowledges over unicast and the sender keeps a window its socket buffer can hold, so no datagram may be lost to
/// a full buffer: the test checks that every one arrived, not how fast.
/// </summary>
public sealed class RealMulticastTests
{
    public static TheoryData<IoBackendKind> Backends()
    {
        var data = new TheoryData<IoBackendKind> { IoBackendKind.Portable, IoBackendKind.Completion };
        if (OperatingSystem.IsLinux())
        {
            data.Add(IoBackendKind.Epoll);
        }

        return data;
    }

    [Theory]
    [MemberData(nameof(Backends))]
    public void One_million_datagrams_all_arrive_over_loopback_multicast(IoBackendKind backend)
    {
        var result = MulticastProbeRun.Execute(new MulticastProbeOptions
        {
            Backend = backend,
            Receivers = 1,
            Datagrams = 1_000_000,
            DatagramBytes = 100,
        });

        Assert.Equal(backend, result.Backend);
        Assert.True(result.Complete,
            $"{backend}: {result.MissingPerReceiver[0]} of {result.Datagrams} datagrams missing (window {result.Window}, ack every {result.AckEvery})");
        Assert.Equal(result.Datagrams, result.ReceivedPerReceiver[0]);
    }

    /// <summary>The Windows way of joining (wildcard bind, join, drop by IP_PKTINFO destination), forced on Linux so its
    /// code path runs here: three receivers of the completion backend each get every datagram.</summary>
    [Fact]
    public void Wildcard_bound_group_sockets_on_the_completion_backend_get_every_datagram()
    {
        var result = MulticastProbeRun.Execute(new MulticastProbeOptions
        {
            Backend = IoBackendKind.Completion,
            GroupBind = GroupBindStrategy.Wildcard,
            Receivers = 3,
            Datagrams = 50_000,
        });

        Assert.Equal(IoBackendKind.Completion, result.Backend);
        Assert.True(result.Complete, $"missing per receiver: {string.Join(", ", result.MissingPerReceiver)}");
    }

    [Fact]
    public void Three_receivers_each_get_every_datagram()
    {
        var result = MulticastProbeRun.Execute(new MulticastProbeOptions { Receivers = 3, Datagrams = 50_000 });
        Assert.True(result.Complete, $"missing per receiver: {string.Join(", ", result.MissingPerReceiver)}");
    }
}
