using System.Diagnostics;
using System.Diagnostics.Metrics;
using Microsoft.Extensions.DependencyInjection;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Hosting.Tests;

/// <summary>The names a telemetry pipeline subscribes to, and the publish/deliver activities (on only when asked).
/// Real loopback nodes with an embedded GMS; the timeouts are hang guards. Alone: listeners see every node in the process.</summary>
[Collection(nameof(TelemetryTests))]
public sealed class TelemetryTests
{
    private static QuickSilverNodeOptions Options(bool tracing) => new()
    {
        Gms = NetAddress.Loopback((ushort)Random.Shared.Next(30000, 60000)),
        EmbeddedGms = true,
        Tracing = tracing,
        Region = new() { TokenInterval = TimeSpan.FromMilliseconds(100) },
        GmsServer = new GmsOptions
        {
            BatchInterval = TimeSpan.FromMilliseconds(20),
            MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
        },
    };

    [Fact]
    public async Task A_node_publishes_the_documented_instruments_on_its_meters_and_they_go_quiet_when_it_stops()
    {
        var seen = new Dictionary<string, string>();
        var values = new Dictionary<string, long>();
        // This node's meters come from a factory of its own, as in a host (where they outlive the node), so only its
        // instruments are counted: other tests' nodes in this process publish the same meter names.
        using var services = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var factory = services.GetRequiredService<IMeterFactory>();
        using var listener = new MeterListener
        {
            InstrumentPublished = (instrument, l) =>
            {
                if (QuickSilverTelemetry.MeterNames.Contains(instrument.Meter.Name) && ReferenceEquals(instrument.Meter.Scope, factory))
                {
                    lock (seen)
                    {
                        seen[instrument.Name] = instrument.Meter.Name;
                    }

                    l.EnableMeasurementEvents(instrument);
                }
            },
        };
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) =>
        {
            lock (values)
            {
                values[instrument.Name] = values.GetValueOrDefault(instrument.Name) + value;
            }
        });
        listener.Start();

        var node = await QuickSilverNode.StartAsync(Options(tracing: false) with { MeterFactory = factory });
        var group = await node.JoinGroupAsync("tests/meters");
        await group.PublishAsync(new byte[10]);
        await foreach (var _ in group.ReadAllAsync(new CancellationTokenSource(TimeSpan.FromSeconds(30)).Token))
        {
            break;
        }

        listener.RecordObservableInstruments();
        lock (seen)
        {
            foreach (var name in new[] { "qs.packets.in", "qs.bytes.in", "qs.packets.out", "qs.bytes.out", "qs.drops", "qs.io.batches", "qs.io.events", "qs.alarm.batches", "qs.alarms.fired", "qs.downcalls", "qs.downcall.queue.depth", "qs.send.errors", "qs.upcall.faults" })
            {
                Assert.Equal(QuickSilverTelemetry.CoreMeterName, seen[name]);
            }

            foreach (var name in new[] { "qs.qsm.receiver_rate", "qs.qsm.target_rate", "qs.qsm.credits", "qs.qsm.retransmitted.nak", "qs.qsm.retransmitted.status", "qs.qsm.retransmitted.lost_resend", "qs.qsm.window.blocked", "qs.qsm.report_delay", "qs.qsm.token.rounds", "qs.qsm.repairs", "qs.qsm.naks", "qs.security.opened", "qs.security.rejected" })
            {
                Assert.Equal(QuickSilverTelemetry.QsmMeterName, seen[name]);
            }

            foreach (var name in new[] { "qs.aer.naks.sent", "qs.aer.naks.received", "qs.aer.naks.suppressed", "qs.aer.repairs.sent", "qs.aer.cache.bytes", "qs.aer.nca.window", "qs.aer.dropped" })
            {
                Assert.Equal(QuickSilverTelemetry.AerMeterName, seen[name]);
            }
        }

        lock (values)
        {
            Assert.True(values["qs.packets.out"] > 0);
            Assert.True(values["qs.bytes.out"] > 0);
            values.Clear();
        }

        await node.DisposeAsync();
        listener.RecordObservableInstruments();
        lock (values)
        {
            Assert.Empty(values); // a stopped node reports nothing (its meter may outlive it in a host's factory)
        }
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task Publish_and_deliver_activities_are_started_only_when_tracing_is_on(bool tracing)
    {
        var activities = new List<Activity>();
        using var listener = new ActivityListener
        {
            ShouldListenTo = source => source.Name == QuickSilverTelemetry.ActivitySourceName,
            Sample = (ref ActivityCreationOptions<ActivityContext> _) => ActivitySamplingResult.AllDataAndRecorded,
            ActivityStopped = activity =>
            {
                lock (activities)
                {
                    activities.Add(activity);
                }
            },
        };
        ActivitySource.AddActivityListener(listener);

        await using var node = await QuickSilverNode.StartAsync(Options(tracing));
        var group = await node.JoinGroupAsync("tests/traces");
        await group.PublishAsync(new byte[10]);
        Assert.True(group.TryPublish(new byte[20]));
        int got = 0;
        await foreach (var _ in group.ReadAllAsync(new CancellationTokenSource(TimeSpan.FromSeconds(30)).Token))
        {
            if (++got == 2)
            {
                break;
            }
        }

        // A deliver activity stops on the core thread after the message is queued, so the reader can have both messages
        // before the second one is recorded: wait for it (bounded; the counts asserted below are unchanged).
        for (int i = 0; i < 200 && tracing && Count(activities, "qs.deliver") < 2; i++)
        {
            await Task.Delay(25);
        }

        lock (activities)
        {
            var mine = activities.Where(a => (string?)a.GetTagItem("messaging.destination.name") == "tests/traces").ToList();
            if (!tracing)
            {
                Assert.Empty(mine);
                return;
            }

            Assert.Equal(2, mine.Count(a => a.OperationName == "qs.publish" && a.Kind == ActivityKind.Producer));
            Assert.Equal(2, mine.Count(a => a.OperationName == "qs.deliver" && a.Kind == ActivityKind.Consumer));
            Assert.Contains(mine, a => a.OperationName == "qs.deliver" && (int?)a.GetTagItem("messaging.message.body.size") == 20);
        }
    }

    private static int Count(List<Activity> activities, string operation)
    {
        lock (activities)
        {
            return activities.Count(a => a.OperationName == operation && (string?)a.GetTagItem("messaging.destination.name") == "tests/traces");
        }
    }
}
