using QuickSilver.Core;
using static QuickSilver.Core.Tests.CoreLoop.CoreTestKit;

namespace QuickSilver.Core.Tests.CoreLoop;

/// <summary>The core's downcall queue at its bound (issue 12 item 5; docs/security.md, "Bounds"): a refused downcall
/// is counted (<see cref="Diagnostics.CoreCounters.DowncallsRefusedCount"/>, meter <c>qs.downcalls.refused</c>).</summary>
public sealed class DowncallBoundTests
{
    [Fact]
    public void A_full_downcall_queue_refuses_and_counts_each_refusal_and_takes_posts_again_once_drained()
    {
        using var core = QuickSilverCore.Start(new CoreOptions { DowncallQueueCapacity = 4 });
        using var blocked = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        Assert.True(core.TryPost(_ => { blocked.Set(); release.Wait(Patience); }, null));
        Assert.True(blocked.Wait(Patience), "the core did not run the blocking downcall");

        // The core thread is held: the queue fills at its capacity, and every post beyond it is refused and counted.
        int accepted = 0, refused = 0;
        int ran = 0;
        for (int i = 0; i < 100; i++)
        {
            if (core.TryPost(_ => Interlocked.Increment(ref ran), null))
            {
                accepted++;
            }
            else
            {
                refused++;
            }
        }

        Assert.Equal(4, accepted);
        Assert.Equal(96, refused);
        Assert.Equal(96, core.Counters.DowncallsRefusedCount);

        release.Set();
        Assert.True(SpinWait.SpinUntil(() => Volatile.Read(ref ran) == 4, Patience), "the queued downcalls did not run");
        Assert.True(core.TryPost(_ => { }, null));
        Assert.Equal(96, core.Counters.DowncallsRefusedCount);
    }
}
