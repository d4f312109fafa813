using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using QuickSilver.Core;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Io.Completion;
using static QuickSilver.Core.Tests.CoreLoop.CoreTestKit;

namespace QuickSilver.Core.Tests.CoreLoop;

/// <summary>
/// The completion backend (SocketAsyncEventArgs; issue 14 item 5): no allocation per received datagram on the core
/// thread, the Windows way of joining a group (wildcard bind, drop by destination) forced on Linux, and a full socket
/// send buffer that parks the send ring without blocking the core.
/// </summary>
public sealed partial class CompletionBackendTests
{
    [Fact]
    public void Auto_keeps_epoll_on_linux_and_completion_is_chosen_by_name()
    {
        using var auto = QuickSilverCore.Start();
        Assert.Equal(OperatingSystem.IsLinux() ? IoBackendKind.Epoll : IoBackendKind.Completion, auto.Backend);
        using var completion = QuickSilverCore.Start(new CoreOptions { Backend = IoBackendKind.Completion });
        Assert.Equal(IoBackendKind.Completion, completion.Backend);
    }

    /// <summary>
    /// 20,000 datagrams received after a warm-up; the core thread's allocated bytes (GC.GetAllocatedBytesForCurrentThread,
    /// read on the core thread before and after) must stay under 64 KiB in all: one object per datagram (24 bytes at
    /// least) would be 480 KB, so the bound fails on any per-datagram allocation while leaving room for the runtime's
    /// one-off allocations (lazy initialisation, the two downcalls that take the readings, a sender change in the
    /// SocketAsyncEventArgs endpoint cache).
    /// </summary>
    [Fact]
    public void Receiving_allocates_nothing_per_datagram_on_the_core_thread()
    {
        const int Warmup = 2_000;
        const int Datagrams = 20_000;
        const int Chunk = 500; // paced, so the receive buffer never overflows and every datagram is counted
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = IoBackendKind.Completion });
        var endpoint = core.OpenUdp();
        var handler = new CountingHandler();
        core.Invoke(() => endpoint.SetHandler(handler));
        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var to = endpoint.LocalAddress.ToIPEndPoint();
        var payload = new byte[64];

        void Send(int count)
        {
            long target = handler.Count + count;
            for (int sent = 0; sent < count; sent += Chunk)
            {
                long before = handler.Count;
                int n = Math.Min(Chunk, count - sent);
                for (int i = 0; i < n; i++)
                {
                    sender.SendTo(payload, to);
                }

                Wait(() => handler.Count >= before + n, "a chunk of datagrams");
            }

            Assert.Equal(target, handler.Count);
        }

        Send(Warmup);
        long start = OnCore(core, GC.GetAllocatedBytesForCurrentThread);
        Send(Datagrams);
        long end = OnCore(core, GC.GetAllocatedBytesForCurrentThread);
        long allocated = end - start;
        Assert.True(allocated < 64 * 1024, $"the core thread allocated {allocated} bytes for {Datagrams} datagrams ({(double)allocated / Datagrams:F1} per datagram)");
    }

    /// <summary>
    /// The member's group socket binds 0.0.0.0 and the group's port (the Windows way). Linux then also hands it a
    /// datagram for another group on the same port (joined on this host by another socket) and unicast to that port:
    /// both must be dropped and counted, and only the group's own datagram delivered.
    /// </summary>
    [Fact]
    public void A_wildcard_bound_group_socket_delivers_only_datagrams_addressed_to_its_group()
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = IoBackendKind.Completion });
        ushort port = (ushort)Random.Shared.Next(20000, 60000);
        var group = new NetAddress(0xEFFC0000u | (uint)Random.Shared.Next(1, 0x7FFF), port);
        var other = new NetAddress(group.Ip + 0x8000u, port);
        var member = core.OpenUdp(new UdpEndpointOptions { GroupBind = GroupBindStrategy.Wildcard });
        var handler = new CountingHandler();
        var got = new List<byte>();
        handler.OnEach = (_, data) => got.Add(data[0]);
        core.Invoke(() =>
        {
            member.SetHandler(handler);
            member.JoinGroup(group);
        });

        // Another socket on this host joins the other group on the same port.
        using var bystander = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        bystander.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        bystander.Bind(other.ToIPEndPoint());
        bystander.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(other.ToIPAddress(), IPAddress.Loopback));

        long dropsBefore = core.Counters.Drops[DropReason.NotForThisNode];
        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            sender.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            sender.SendTo(new byte[] { 2 }, other.ToIPEndPoint());
            sender.SendTo(new byte[] { 3 }, new IPEndPoint(IPAddress.Loopback, port));
            sender.SendTo(new byte[] { 1 }, group.ToIPEndPoint());
        }

        Wait(() => core.Counters.Drops[DropReason.NotForThisNode] - dropsBefore >= 2, "the other group's datagram and the unicast dropped");
        Wait(() => handler.Count >= 1, "the group's datagram");
        core.Invoke(() => Assert.Equal(new byte[] { 1 }, got.ToArray()));
    }

    [Theory]
    [InlineData(IoBackendKind.Portable)]
    [InlineData(IoBackendKind.Epoll)]
    public void The_wildcard_strategy_on_a_backend_without_a_destination_filter_is_refused_naming_the_options(IoBackendKind backend)
    {
        if (backend == IoBackendKind.Epoll && !OperatingSystem.IsLinux())
        {
            return;
        }

        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var endpoint = core.OpenUdp(new UdpEndpointOptions { GroupBind = GroupBindStrategy.Wildcard });
        core.Invoke(() =>
        {
            var e = Assert.Throws<NotSupportedException>(() => endpoint.JoinGroup(new NetAddress(0xEFFC0001u, 40000)));
            Assert.Contains("UdpEndpointOptions.GroupBind", e.Message, StringComparison.Ordinal);
            Assert.Contains("CoreOptions.Backend", e.Message, StringComparison.Ordinal);
        });
    }

    /// <summary>
    /// A full socket send buffer. On loopback Linux never reports one (the kernel hands a UDP datagram to the receiver,
    /// or drops it, inside the send call, whether or not the receiver reads), so the test makes its own network
    /// namespace whose loopback holds packets in a token bucket at 1 kbit/s: with SO_SNDBUF at its minimum the socket
    /// fills after a few datagrams. The core must keep answering (an alarm fires, a downcall is served) while the ring is
    /// full, and once the link is opened every datagram the ring accepted arrives. Skipped where a namespace cannot be
    /// made (not root, no iproute2).
    /// </summary>
    [SkippableTheory]
    [InlineData(IoBackendKind.Completion)]
    [InlineData(IoBackendKind.Epoll)]
    public async Task A_full_send_buffer_backs_up_the_ring_and_never_blocks_the_core(IoBackendKind backend)
    {
        Skip.IfNot(OperatingSystem.IsLinux() && Environment.UserName == "root", "needs Linux and root for a network namespace");
        string ns = $"qswin{Environment.ProcessId % 100000}{(int)backend}";
        Skip.IfNot(Run("ip", $"netns add {ns}"), "cannot create a network namespace (ip netns add)");
        QuickSilverCore? core = null;
        bool responsive = false;
        try
        {
            Assert.True(Run("ip", $"netns exec {ns} ip link set lo up"));
            Assert.True(Run("ip", $"netns exec {ns} tc qdisc add dev lo root tbf rate 1kbit burst 1600 limit 1000000"), "tc tbf");
            core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
            using var nsHandle = File.OpenHandle($"/var/run/netns/{ns}");
            Assert.Equal(0, await OnCoreAsync(core, () => SetNs((int)nsHandle.DangerousGetHandle(), CloneNewNet))); // the core thread's sockets live there
            var sender = core.OpenUdp(new UdpEndpointOptions { SocketSendBufferBytes = 4096, SendQueueCapacity = 16 });
            var receiver = core.OpenUdp();
            var handler = new CountingHandler();
            int accepted = await OnCoreAsync(core, () =>
            {
                receiver.SetHandler(handler);
                var datagram = new byte[1000];
                int n = 0;
                while (n < 200 && sender.TrySend(receiver.LocalAddress, datagram))
                {
                    n++;
                }

                return n;
            });

            // Back-pressure: the socket took a few, the ring holds the rest and refuses more.
            Assert.InRange(accepted, 16, 199);
            Assert.True(core.Counters.Drops[DropReason.SendQueueFull] >= 1);

            // The core keeps answering while the ring is full: an alarm fires, then a downcall is served.
            using var fired = new ManualResetEventSlim();
            await OnCoreAsync(core, () =>
            {
                core.Schedule(new Alarm(_ => fired.Set(), null), core.Now + TimeSpan.FromMilliseconds(20));
                return 0;
            });
            Assert.True(fired.Wait(Patience), "the alarm did not fire while the send buffer was full");
            Assert.True(await OnCoreAsync(core, () => sender.PendingSends) > 0, "the ring should still be backed up (the link passes one datagram per 8 s)");
            if (backend == IoBackendKind.Completion)
            {
                Assert.True(await OnCoreAsync(core, () => ((CompletionUdpEndpoint)sender).ParkedSends) >= 1);
            }

            // Open the link: everything the ring accepted is sent and arrives (the bucket's timer set at the old rate
            // releases the queue within one datagram time, 8 s).
            Assert.True(Run("ip", $"netns exec {ns} tc qdisc change dev lo root tbf rate 1gbit burst 1mb limit 1000000"), "tc change");
            Wait(() => handler.Count == accepted, $"all {accepted} accepted datagrams to arrive");
            Assert.Equal(0, await OnCoreAsync(core, () => sender.PendingSends));
            responsive = true;
        }
        finally
        {
            if (responsive)
            {
                core?.Dispose(); // a core stuck in a blocking send could not be stopped; leave it to the process's end
            }

            Run("ip", $"netns del {ns}");
        }
    }

    /// <summary>Runs <paramref name="func"/> on the core, failing (not hanging) if the core does not answer in time.</summary>
    private static Task<T> OnCoreAsync<T>(QuickSilverCore core, Func<T> func) => core.InvokeAsync(func).WaitAsync(Patience);

    private const int CloneNewNet = 0x40000000;

    [LibraryImport("libc", EntryPoint = "setns", SetLastError = true)]
    private static partial int SetNs(int fd, int nstype);

    private static bool Run(string file, string arguments)
    {
        try
        {
            using var process = Process.Start(new ProcessStartInfo(file, arguments) { RedirectStandardOutput = true, RedirectStandardError = true });
            if (process is null)
            {
                return false;
            }

            if (!process.WaitForExit(TimeSpan.FromSeconds(20)))
            {
                process.Kill();
                return false;
            }

            return process.ExitCode == 0;
        }
        catch (System.ComponentModel.Win32Exception)
        {
            return false;
        }
    }
}
