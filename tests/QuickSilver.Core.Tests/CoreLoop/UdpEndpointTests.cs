using System.Diagnostics.Metrics;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using static QuickSilver.Core.Tests.CoreLoop.CoreTestKit;

namespace QuickSilver.Core.Tests.CoreLoop;

public sealed class UdpEndpointTests
{
    /// <summary>A feed that, while pulled, also tries to send on its own endpoint (misuse), then returns its datagram.</summary>
    private sealed class SelfSendingFeed(UdpEndpoint endpoint, NetAddress to) : IDatagramFeed
    {
        public int Pulls;

        public int Pull(Span<byte> buffer, out NetAddress destination)
        {
            destination = to;
            if (Pulls++ > 0)
            {
                return 0;
            }

            buffer[..3].Fill(9);
            endpoint.TrySend(to, [1, 2, 3]); // would take the slot this datagram is being written into
            return 3;
        }
    }

    [Fact]
    public void A_feed_that_sends_on_its_own_endpoint_while_pulled_is_refused_and_counted_not_allowed_to_overwrite_a_slot()
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = IoBackendKind.Portable });
        var a = core.OpenUdp();
        var b = core.OpenUdp();
        long faultsBefore = core.Counters.UpcallFaults;
        var handler = new CountingHandler();
        core.Invoke(() =>
        {
            b.SetHandler(handler);
            a.RegisterFeed(new SelfSendingFeed(a, b.LocalAddress));
        });

        Wait(() => core.Counters.UpcallFaults > faultsBefore, "the misuse reported as a fault");
        core.Invoke(() => Assert.True(a.TrySend(b.LocalAddress, [4, 5, 6]))); // the endpoint still works afterwards
        Wait(() => handler.Count >= 1, "a datagram after the misuse");
    }

    /// <summary>The kernel's count of datagrams dropped for a full receive buffer (QSM's congestion signal): with the
    /// core thread held, a burst of 20,000 datagrams of 1,400 bytes (28 MB) overflows the endpoint's buffer and the count
    /// grows; elsewhere than Linux the endpoint says it cannot tell (−1).</summary>
    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Receive_overflows_are_counted_from_the_kernel(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var b = core.OpenUdp();
        core.Invoke(() => b.SetHandler(new CountingHandler()));
        if (!OperatingSystem.IsLinux())
        {
            Assert.Equal(-1, b.ReceiveOverflows);
            return;
        }

        Assert.Equal(0, b.ReceiveOverflows);
        using var release = new ManualResetEventSlim();
        Assert.True(core.TryPost(_ => release.Wait(TimeSpan.FromSeconds(30)), null)); // hold the core thread: nothing drains the socket
        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        var to = new IPEndPoint(IPAddress.Loopback, b.LocalAddress.Port);
        var payload = new byte[1400];
        for (int i = 0; i < 20_000 && b.ReceiveOverflows == 0; i++)
        {
            sender.SendTo(payload, to);
        }

        long drops = b.ReceiveOverflows;
        release.Set();
        Assert.True(drops > 0, "no drop counted after 28 MB into a held endpoint");
    }

    /// <summary>Receive coalescing: a core that received sleeps before reading again (counted), and still delivers
    /// every datagram, in rounds of several; off (the default), it never naps.</summary>
    [Theory]
    [InlineData(0)]
    [InlineData(2_000)]
    public void A_coalescing_core_naps_after_receiving_and_loses_nothing(int coalesceMicros)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { ReceiveCoalescing = TimeSpan.FromMicroseconds(coalesceMicros) });
        var b = core.OpenUdp();
        var handler = new CountingHandler();
        core.Invoke(() => b.SetHandler(handler));
        using var sender = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp);
        var to = b.LocalAddress.ToIPEndPoint();
        for (int round = 0; round < 5; round++)
        {
            for (int i = 0; i < 100; i++)
            {
                sender.SendTo(new byte[100], to);
            }

            int expected = (round + 1) * 100;
            Wait(() => handler.Count == expected, $"{expected} datagrams");
        }

        if (coalesceMicros == 0)
        {
            Assert.Equal(0, core.Counters.CoalescingNapCount);
        }
        else
        {
            // Each round ends with the socket drained and the core about to block: it naps first.
            Assert.True(core.Counters.CoalescingNapCount >= 5, $"naps {core.Counters.CoalescingNapCount}");
        }
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Unicast_datagrams_arrive_with_the_senders_address_and_bytes(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var a = core.OpenUdp();
        var b = core.OpenUdp();
        var got = new List<(NetAddress From, byte[] Bytes)>();
        var handler = new CountingHandler { OnEach = (from, data) => got.Add((from, data.ToArray())) };
        core.Invoke(() =>
        {
            b.SetHandler(handler);
            for (byte i = 0; i < 10; i++)
            {
                Assert.True(a.TrySend(b.LocalAddress, [i, (byte)(i * 2), 7]));
            }
        });

        Wait(() => handler.Count == 10, "ten datagrams");
        core.Invoke(() =>
        {
            Assert.All(got, g => Assert.Equal(a.LocalAddress, g.From));
            Assert.Equal(Enumerable.Range(0, 10).Select(i => (byte)i), got.Select(g => g.Bytes[0]).Order());
            Assert.All(got, g => Assert.Equal(new byte[] { g.Bytes[0], (byte)(g.Bytes[0] * 2), 7 }, g.Bytes));
        });
        Assert.True(core.Counters.PacketsSent >= 10);
        Assert.True(core.Counters.PacketsReceived >= 10);
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Oversized_datagrams_are_dropped_and_counted(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var endpoint = core.OpenUdp(new UdpEndpointOptions { MaxDatagramSize = 100 });
        var handler = new CountingHandler();
        core.Invoke(() => endpoint.SetHandler(handler));
        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            sender.SendTo(new byte[101], endpoint.LocalAddress.ToIPEndPoint());
            sender.SendTo(new byte[5000], endpoint.LocalAddress.ToIPEndPoint());
            sender.SendTo(new byte[100], endpoint.LocalAddress.ToIPEndPoint()); // fits exactly
        }

        Wait(() => handler.Count == 1 && core.Counters.Drops[DropReason.Oversized] == 2, "one delivery and two oversize drops");
    }

    [Fact]
    public void A_datagram_larger_than_MaxDatagramSize_is_refused_naming_the_option()
    {
        using var core = QuickSilverCore.Start();
        var endpoint = core.OpenUdp(new UdpEndpointOptions { MaxDatagramSize = 64, SendQueueCapacity = 4 });
        core.Invoke(() =>
        {
            var e = Assert.Throws<ArgumentException>(() => endpoint.TrySend(endpoint.LocalAddress, new byte[65]));
            Assert.Contains("MaxDatagramSize", e.Message, StringComparison.Ordinal);
        });
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void A_left_group_no_longer_delivers_and_a_joined_one_does(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var group = new NetAddress(0xEFFD0000u | (uint)Random.Shared.Next(1, 0xFFFF), (ushort)Random.Shared.Next(20000, 60000));
        var sender = core.OpenUdp();
        var member = core.OpenUdp();
        var handler = new CountingHandler();
        core.Invoke(() =>
        {
            member.SetHandler(handler);
            member.JoinGroup(group);
            sender.TrySend(group, [1]);
        });
        Wait(() => handler.Count == 1, "the multicast datagram");

        // After leaving, a multicast datagram followed by a unicast marker: the marker arrives, the datagram must not.
        core.Invoke(() =>
        {
            member.LeaveGroup(group);
            sender.TrySend(group, [2]);
            sender.TrySend(member.LocalAddress, [3]);
        });
        // Loopback delivers inside the sender's system call, in send order, so once the marker is here a copy of the
        // multicast datagram would be too.
        Wait(() => handler.Count >= 2, "the unicast marker");
        Assert.Equal(2, handler.Count);
    }

    [Fact]
    public void Joining_a_unicast_address_is_refused()
    {
        using var core = QuickSilverCore.Start();
        var endpoint = core.OpenUdp();
        core.Invoke(() => Assert.Throws<ArgumentException>(() => endpoint.JoinGroup(NetAddress.Loopback(5000))));
    }

    [Fact]
    public void Counters_are_published_on_the_QuickSilver_meter()
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Name = "metrics-test" });
        var a = core.OpenUdp();
        var b = core.OpenUdp();
        var handler = new CountingHandler();
        core.Invoke(() =>
        {
            b.SetHandler(handler);
            a.TrySend(b.LocalAddress, new byte[40]);
        });
        Wait(() => handler.Count == 1, "one datagram");

        var seen = new Dictionary<string, long>();
        using var listener = new MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == CoreCounters.MeterName)
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<long>((instrument, value, tags, _) =>
        {
            foreach (var tag in tags)
            {
                if (tag.Key == "core" && (string?)tag.Value == "metrics-test" && !instrument.Name.Contains("drops", StringComparison.Ordinal))
                {
                    seen[instrument.Name] = value;
                }
            }
        });
        listener.Start();
        listener.RecordObservableInstruments();

        Assert.Equal(1, seen["qs.packets.in"]);
        Assert.Equal(1, seen["qs.packets.out"]);
        Assert.Equal(40, seen["qs.bytes.in"]);
        Assert.True(seen["qs.downcalls"] >= 1);
    }
}
