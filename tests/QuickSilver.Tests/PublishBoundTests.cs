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

    /// <summary>A group's publish queue (<c>PublishBuffer</c> slots, 393 KB at the default) is made by its first publish: a
    /// node in 1,024 groups that only receives held 400 MB of them before (docs/qsm.md, "The group layer").</summary>
    [Fact]
    public async Task A_group_holds_no_publish_queue_until_it_first_publishes()
    {
        var gms = NodeTests.FreeGmsAddress();
        await using var node = await QuickSilverNode.StartAsync(NodeTests.Options(gms, embedded: true));
        var quiet = await node.JoinGroupAsync("quiet");
        var busy = await node.JoinGroupAsync("busy");
        Assert.False(quiet.HasPublishQueue);
        Assert.False(busy.HasPublishQueue);

        await busy.PublishAsync(new byte[] { 42 });
        Assert.True(busy.HasPublishQueue);
        Assert.False(quiet.HasPublishQueue);
        using var cts = new CancellationTokenSource(Patience);
        await foreach (var message in busy.ReadAllAsync(cts.Token))
        {
            Assert.Equal(new byte[] { 42 }, message.Payload);
            break;
        }
    }
}
