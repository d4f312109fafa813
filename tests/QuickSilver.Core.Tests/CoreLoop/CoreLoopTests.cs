using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using static QuickSilver.Core.Tests.CoreLoop.CoreTestKit;

namespace QuickSilver.Core.Tests.CoreLoop;

public sealed class CoreLoopTests
{
    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Alarms_fire_in_deadline_order_then_insertion_order(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var fired = new ConcurrentQueue<int>();
        var done = new ManualResetEventSlim();
        int[] delaysMs = [30, 10, 20, 10, 0, 40, 20];
        core.Invoke(() =>
        {
            var origin = core.Now;
            for (int i = 0; i < delaysMs.Length; i++)
            {
                var alarm = new Alarm(a =>
                {
                    fired.Enqueue((int)a.State!);
                    if (fired.Count == delaysMs.Length)
                    {
                        done.Set();
                    }
                }, i);
                core.Schedule(alarm, origin + TimeSpan.FromMilliseconds(delaysMs[i]));
            }
        });

        Assert.True(done.Wait(Patience), "alarms did not all fire");
        var expected = Enumerable.Range(0, delaysMs.Length).OrderBy(i => delaysMs[i]).ThenBy(i => i).ToArray();
        Assert.Equal(expected, fired.ToArray());
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Cancelled_alarm_does_not_fire_and_rescheduled_alarm_fires_once(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        int cancelledFired = 0, movedFired = 0;
        var marker = new ManualResetEventSlim();
        core.Invoke(() =>
        {
            var cancelled = new Alarm(_ => Interlocked.Increment(ref cancelledFired));
            var moved = new Alarm(_ => Interlocked.Increment(ref movedFired));
            var last = new Alarm(_ => marker.Set());
            core.ScheduleAfter(cancelled, TimeSpan.FromMilliseconds(5));
            core.ScheduleAfter(moved, TimeSpan.FromMilliseconds(5));
            core.ScheduleAfter(moved, TimeSpan.FromMilliseconds(15));
            core.ScheduleAfter(last, TimeSpan.FromMilliseconds(30));
            Assert.True(core.Cancel(cancelled));
            Assert.False(core.Cancel(cancelled));
        });

        Assert.True(marker.Wait(Patience));
        Assert.Equal(0, Volatile.Read(ref cancelledFired));
        Assert.Equal(1, Volatile.Read(ref movedFired));
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void A_ready_socket_is_drained_before_due_timers_run(IoBackendKind backend)
    {
        const int Datagrams = 200;
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var handler = new CountingHandler();
        var endpoint = core.OpenUdp();
        core.Invoke(() => endpoint.SetHandler(handler));
        long countWhenAlarmFired = -1;
        var alarmFired = new ManualResetEventSlim();
        var hold = new ManualResetEventSlim();
        var holding = new ManualResetEventSlim();

        // Hold the core inside a downcall, with an alarm already due, while the socket fills up.
        Assert.True(core.TryPost(_ =>
        {
            core.Schedule(new Alarm(_ =>
            {
                countWhenAlarmFired = handler.Count;
                alarmFired.Set();
            }), core.Now);
            holding.Set();
            hold.Wait();
        }, null));
        Assert.True(holding.Wait(Patience));

        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            sender.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            var payload = new byte[64];
            for (int i = 0; i < Datagrams; i++)
            {
                sender.SendTo(payload, endpoint.LocalAddress.ToIPEndPoint());
            }
        }

        if (backend != IoBackendKind.Epoll)
        {
            // The .NET-sockets backends learn about data through a completion posted by another thread; let it arrive
            // before releasing the core, so the test checks the core's order and not the thread pool's speed.
            Wait(() => core.HasPendingIoForTests, "the receive completion to be posted");
        }

        hold.Set();
        Assert.True(alarmFired.Wait(Patience));
        Assert.Equal(Datagrams, countWhenAlarmFired);
    }

    [Fact]
    public void Alarm_rounds_stop_at_the_alarm_quantum_and_let_downcalls_in()
    {
        var clock = new ManualClock();
        using var core = QuickSilverCore.Start(new CoreOptions
        {
            AlarmQuantum = TimeSpan.FromMilliseconds(50),
            TimeSource = () => clock.Now,
        });
        var order = new ConcurrentQueue<string>();
        var done = new ManualResetEventSlim();
        const int Alarms = 20;
        core.Invoke(() =>
        {
            for (int i = 0; i < Alarms; i++)
            {
                core.Schedule(new Alarm(a =>
                {
                    int index = (int)a.State!;
                    order.Enqueue($"alarm{index}");
                    if (index == 0)
                    {
                        core.TryPost(_ => order.Enqueue("downcall"), null);
                    }

                    clock.Advance(TimeSpan.FromMilliseconds(10)); // each alarm "takes" 10 ms of core time
                    if (index == Alarms - 1)
                    {
                        done.Set();
                    }
                }, i), TimeSpan.Zero);
            }
        });

        Assert.True(done.Wait(Patience));
        var list = order.ToList();

        // 50 ms quantum / 10 ms per alarm: the round ends after 5 alarms, then the downcall queue is served.
        Assert.Equal(5, list.IndexOf("downcall"));
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Io_rounds_stop_at_the_io_quantum_and_let_due_alarms_run(IoBackendKind backend)
    {
        var clock = new ManualClock();
        using var core = QuickSilverCore.Start(new CoreOptions
        {
            Backend = backend,
            IoQuantum = TimeSpan.FromMilliseconds(50),
            SyscallBatchSize = 1,
            TimeSource = () => clock.Now,
        });
        const int Datagrams = 20;
        var handler = new CountingHandler { OnEach = (_, _) => clock.Advance(TimeSpan.FromMilliseconds(10)) };
        var endpoint = core.OpenUdp();
        core.Invoke(() => endpoint.SetHandler(handler));
        long countWhenAlarmFired = -1;
        var alarmFired = new ManualResetEventSlim();
        var hold = new ManualResetEventSlim();
        var holding = new ManualResetEventSlim();
        Assert.True(core.TryPost(_ =>
        {
            core.Schedule(new Alarm(_ =>
            {
                countWhenAlarmFired = handler.Count;
                alarmFired.Set();
            }), core.Now);
            holding.Set();
            hold.Wait();
        }, null));
        Assert.True(holding.Wait(Patience));
        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            for (int i = 0; i < Datagrams; i++)
            {
                sender.SendTo(new byte[16], endpoint.LocalAddress.ToIPEndPoint());
            }
        }

        if (backend != IoBackendKind.Epoll)
        {
            Wait(() => core.HasPendingIoForTests, "the receive completion to be posted");
        }

        hold.Set();
        Assert.True(alarmFired.Wait(Patience));
        Wait(() => handler.Count == Datagrams, "all datagrams");

        // 50 ms quantum / 10 ms per datagram: the I/O round yields to the due alarm after 5 datagrams.
        Assert.Equal(5, countWhenAlarmFired);
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void A_downcall_wakes_a_blocked_core(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        core.Invoke(() => { }); // the core is running; with no alarms it now blocks with no timeout
        for (int i = 0; i < 50; i++)
        {
            using var ran = new ManualResetEventSlim();
            Thread.Sleep(2); // give the core time to go back to sleep between posts
            Assert.True(core.TryPost(s => ((ManualResetEventSlim)s!).Set(), ran));
            Assert.True(ran.Wait(Patience), $"downcall {i} did not wake the core");
        }

        Assert.Equal(0, core.ScheduledAlarms);
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public void Stop_joins_the_thread_closes_sockets_and_refuses_later_downcalls(IoBackendKind backend)
    {
        var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var endpoint = core.OpenUdp();
        var address = endpoint.LocalAddress;
        core.Invoke(() => core.ScheduleAfter(new Alarm(_ => { }), TimeSpan.FromHours(1)));
        core.Dispose();

        Assert.True(core.Completion.IsCompleted);
        Assert.False(core.TryPost(_ => { }, null));

        // The port is free again: binding it succeeds only if the core closed its socket.
        using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        probe.Bind(address.ToIPEndPoint());
    }

    [Fact]
    public void Protocol_calls_from_other_threads_are_refused_with_a_clear_error()
    {
        using var core = QuickSilverCore.Start();
        var endpoint = core.OpenUdp();
        var e1 = Assert.Throws<InvalidOperationException>(() => core.Schedule(new Alarm(_ => { }), TimeSpan.Zero));
        Assert.Contains("core", e1.Message, StringComparison.OrdinalIgnoreCase);
        Assert.Throws<InvalidOperationException>(() => endpoint.TrySend(endpoint.LocalAddress, new byte[1]));
    }

    [Fact]
    public void Invalid_options_fail_at_start_naming_the_option()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => QuickSilverCore.Start(new CoreOptions { IoQuantum = TimeSpan.Zero }));
        Assert.Contains("IoQuantum", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => QuickSilverCore.Start(new CoreOptions { DowncallQueueCapacity = 1 }));
        Assert.Contains("DowncallQueueCapacity", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => QuickSilverCore.Start(new CoreOptions { ReceiveCoalescing = TimeSpan.FromMilliseconds(-1) }));
        Assert.Contains("ReceiveCoalescing", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => QuickSilverCore.Start(new CoreOptions { ReceiveCoalescing = TimeSpan.FromMilliseconds(101) }));
        Assert.Contains("ReceiveCoalescing", e.Message, StringComparison.Ordinal);
        using var core = QuickSilverCore.Start();
        e = Assert.Throws<ArgumentOutOfRangeException>(() => core.OpenUdp(new UdpEndpointOptions { MaxDatagramSize = 70000 }));
        Assert.Contains("MaxDatagramSize", e.Message, StringComparison.Ordinal);
    }

    [Theory]
    [MemberData(nameof(CoreTestKit.Backends), MemberType = typeof(CoreTestKit))]
    public async Task A_throwing_handler_is_counted_and_the_core_carries_on(IoBackendKind backend)
    {
        using var core = QuickSilverCore.Start(new CoreOptions { Backend = backend });
        var endpoint = core.OpenUdp();
        var handler = new CountingHandler { OnEach = (_, _) => throw new InvalidDataException("boom") };
        core.Invoke(() => endpoint.SetHandler(handler));
        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            sender.SendTo(new byte[8], endpoint.LocalAddress.ToIPEndPoint());
        }

        Wait(() => core.Counters.UpcallFaultCount == 1, "the fault to be counted");
        Assert.True(await core.InvokeAsync(() => true).WaitAsync(Patience), "core stopped serving downcalls after a handler fault");

        // The socket still receives after the fault (the .NET-sockets backends re-arm their receive even so).
        using (var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            sender.SendTo(new byte[8], endpoint.LocalAddress.ToIPEndPoint());
        }

        Wait(() => core.Counters.UpcallFaultCount == 2, "the second datagram's fault to be counted");
    }
}
