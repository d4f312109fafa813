namespace QuickSilver.Tests;

/// <summary>
/// The publish buffer at its bound (issue 12 item 5; docs/security.md, "Bounds"): a refused <c>TryPublish</c> and a
/// <c>PublishAsync</c> that had to wait are counted. The node's core thread is held by a downcall while the test
/// publishes, so nothing frees a slot meanwhile and the counts do not depend on timing.
/// </summary>
public sealed class PublishBoundTests
{
    private static readonly TimeSpan Patience = TimeSpan.FromSeconds(60);

    [Fact]
    public async Task A_full_publish_buffer_refuses_TryPublish_and_makes_PublishAsync_wait_and_both_are_counted()
    {
        var gms = NodeTests.FreeGmsAddress();
        await using var node = await QuickSilverNode.StartAsync(NodeTests.Options(gms, embedded: true) with { PublishBuffer = 4 });
        var group = await node.JoinGroupAsync("bounded");
        Assert.Equal(0, group.PublishesRefused);

        using var held = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        Assert.True(node.Core.TryPost(_ => { held.Set(); release.Wait(Patience); }, null));
        Assert.True(held.Wait(Patience), "the core did not take the blocking downcall");
        try
        {
            for (int i = 0; i < 4; i++)
            {
                Assert.True(group.TryPublish(new byte[8]));
            }

            Assert.False(group.TryPublish(new byte[8]));
            Assert.False(group.TryPublish(new byte[8]));
            Assert.Equal(2, group.PublishesRefused);

            var waiting = group.PublishAsync(new byte[8]).AsTask();
            Assert.Equal(1, group.PublishWaits);
            Assert.False(waiting.IsCompleted);
            release.Set();
            await waiting.WaitAsync(Patience);
            Assert.Equal(1, group.PublishWaits);
            Assert.Equal(2, group.PublishesRefused);
        }
        finally
        {
            release.Set();
        }
    }
}
