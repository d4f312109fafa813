using QuickSilver.Core.Feeds;

namespace QuickSilver.Core.Tests;

public sealed class FeedSetTests
{
    private sealed class NamedFeed(string name) : IFeed<int>
    {
        public Queue<int> Items { get; } = new();

        public string Name { get; } = name;

        public bool TryPull(out int item) => Items.TryDequeue(out item);

        public override string ToString() => Name;
    }

    private static (FeedSet<NamedFeed> Set, NamedFeed[] Feeds, IFeedChannel[] Channels) Create(int count)
    {
        var set = new FeedSet<NamedFeed>();
        var feeds = new NamedFeed[count];
        var channels = new IFeedChannel[count];
        for (int i = 0; i < count; i++)
        {
            feeds[i] = new NamedFeed(((char)('A' + i)).ToString());
            channels[i] = set.Register(feeds[i]);
        }

        return (set, feeds, channels);
    }

    private static string Next(FeedSet<NamedFeed> set, out IFeedChannel channel)
    {
        Assert.True(set.TryNext(out channel, out var feed));
        return feed.Name;
    }

    private static string Take(FeedSet<NamedFeed> set, int calls)
    {
        var names = new List<string>();
        for (int i = 0; i < calls; i++)
        {
            names.Add(Next(set, out _));
        }

        return string.Concat(names);
    }

    [Fact]
    public void RoundRobinAcrossThreeActiveFeeds()
    {
        var (set, _, channels) = Create(3);
        Assert.Equal(3, set.RegisteredCount);
        Assert.Equal(3, set.ActiveCount);
        Assert.All(channels, c => Assert.True(c.IsActive));
        Assert.Equal("ABCABCABC", Take(set, 9));
    }

    [Fact]
    public void EmptySetHasNoNext()
    {
        var set = new FeedSet<NamedFeed>();
        Assert.False(set.TryNext(out _, out _));
        Assert.Equal(0, set.ActiveCount);
    }

    [Fact]
    public void DeactivateRemovesFromTheRotation()
    {
        var (set, _, channels) = Create(3);
        set.Deactivate(channels[1]);
        Assert.False(channels[1].IsActive);
        Assert.Equal(2, set.ActiveCount);
        Assert.Equal(3, set.RegisteredCount);

        var taken = Take(set, 6);
        Assert.DoesNotContain("B", taken, StringComparison.Ordinal);
        Assert.Equal(3, taken.Count(c => c == 'A'));
        Assert.Equal(3, taken.Count(c => c == 'C'));

        // Idempotent, and channels of other sets are ignored.
        set.Deactivate(channels[1]);
        var (other, _, otherChannels) = Create(1);
        set.Deactivate(otherChannels[0]);
        Assert.Equal(2, set.ActiveCount);
        Assert.True(otherChannels[0].IsActive);
        Assert.Equal(1, other.ActiveCount);

        set.Deactivate(channels[0]);
        set.Deactivate(channels[2]);
        Assert.False(set.TryNext(out _, out _));
    }

    [Fact]
    public void SignalReactivatesAndRaisesBecameActiveOnlyOnZeroToOne()
    {
        var set = new FeedSet<NamedFeed>();
        int raised = 0;
        set.BecameActive += () => raised++;

        var a = set.Register(new NamedFeed("A"));
        Assert.Equal(1, raised); // registration makes the set go 0 -> 1
        var b = set.Register(new NamedFeed("B"));
        Assert.Equal(1, raised);

        set.Deactivate(a);
        set.Deactivate(b);
        Assert.Equal(0, set.ActiveCount);
        Assert.Equal(1, raised);

        b.Signal();
        Assert.True(b.IsActive);
        Assert.Equal(2, raised);
        b.Signal(); // idempotent
        Assert.Equal(1, set.ActiveCount);
        Assert.Equal(2, raised);
        a.Signal(); // 1 -> 2: no event
        Assert.Equal(2, set.ActiveCount);
        Assert.Equal(2, raised);

        Assert.Equal("BABA", Take(set, 4));
    }

    [Fact]
    public void DisposeRemovesAndDecrementsRegisteredCount()
    {
        var (set, _, channels) = Create(3);
        channels[1].Dispose();
        Assert.Equal(2, set.RegisteredCount);
        Assert.Equal(2, set.ActiveCount);
        Assert.False(channels[1].IsActive);
        Assert.DoesNotContain("B", Take(set, 6), StringComparison.Ordinal);

        // Twice is harmless; a disposed channel cannot be signalled back in.
        channels[1].Dispose();
        Assert.Equal(2, set.RegisteredCount);
        channels[1].Signal();
        Assert.False(channels[1].IsActive);
        Assert.Equal(2, set.ActiveCount);

        // Disposing an inactive channel only changes the registered count.
        set.Deactivate(channels[2]);
        channels[2].Dispose();
        Assert.Equal(1, set.RegisteredCount);
        Assert.Equal(1, set.ActiveCount);
        Assert.Equal("AA", Take(set, 2));
    }

    [Fact]
    public void CursorStaysFairAfterDeactivationInTheMiddle()
    {
        var (set, _, _) = Create(5);
        Assert.Equal("AB", Take(set, 2));
        Assert.Equal("C", Next(set, out var c));

        // C had nothing: deactivated in the middle of the round. D and E have not had their turn yet.
        set.Deactivate(c);
        var rest = Take(set, 4);
        Assert.Equal("DE", string.Concat(rest[..2].Order())); // D and E come first, in some order
        Assert.Equal("AB", rest[2..]);

        // And then a steady rotation over the four that are left.
        var round = Take(set, 8);
        Assert.Equal(round[..4], round[4..]);
        Assert.Equal("ABDE", string.Concat(round[..4].Order()));
    }

    /// <summary>
    /// The way a layer uses the set: pull from the feed TryNext returns and deactivate that same feed when it is empty;
    /// feeds get data at random and are signalled when they get it. No feed that stays active may starve: while a feed
    /// waits, the others get at most (active feeds when it started waiting - 1) + (activations meanwhile) +
    /// (empty pulls meanwhile) turns. (Each feed that was ahead of it or joined gets one turn, and each empty pull lets
    /// the last feed jump into the freed slot once.)
    /// </summary>
    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    [InlineData(5)]
    public void NoActiveFeedStarvesUnderRandomActivity(int seed)
    {
        const int FeedCount = 7;
        var rng = new Random(seed);
        var (set, feeds, channels) = Create(FeedCount);

        long turns = 0;
        long activations = 0;
        long emptyPulls = 0;
        var waitStart = new (long Turns, long Activations, long EmptyPulls, int Active)?[FeedCount];
        for (int f = 0; f < FeedCount; f++)
        {
            waitStart[f] = (0, 0, 0, FeedCount);
        }

        long longestWait = 0;
        for (int step = 0; step < 200_000; step++)
        {
            // Random arrivals: new data for a random feed, then a signal (as the feed's owner would do).
            int arrivals = rng.Next(3) == 0 ? rng.Next(1, 4) : 0;
            for (int a = 0; a < arrivals; a++)
            {
                int f = rng.Next(FeedCount);
                feeds[f].Items.Enqueue(1);
                if (!channels[f].IsActive)
                {
                    channels[f].Signal();
                    activations++;
                    waitStart[f] = (turns, activations, emptyPulls, set.ActiveCount);
                }
            }

            if (!set.TryNext(out var channel, out var feed))
            {
                continue;
            }

            int index = feed.Name[0] - 'A';
            var start = waitStart[index]!.Value;
            long waited = turns - start.Turns;
            long bound = (start.Active - 1) + (activations - start.Activations) + (emptyPulls - start.EmptyPulls);
            longestWait = Math.Max(longestWait, waited);
            if (waited > bound)
            {
                Assert.Fail($"seed {seed}, step {step}: feed {feed} waited {waited} turns, bound {bound}");
            }

            turns++;
            if (feed.TryPull(out _))
            {
                waitStart[index] = (turns, activations, emptyPulls, set.ActiveCount);
            }
            else
            {
                set.Deactivate(channel);
                emptyPulls++;
                waitStart[index] = null;
            }
        }

        Assert.True(longestWait >= FeedCount - 1, $"seed {seed}: the workload never had all feeds busy");
    }

    /// <summary>
    /// Strict round robin: a feed never gets a second turn while another feed that stayed active has had none.
    /// </summary>
    [Fact]
    public void StrictRoundRobinAcrossARoundBoundary()
    {
        var (set, feeds, channels) = Create(4);
        feeds[0].Items.Enqueue(1); // A has one item, B, C, D plenty
        for (int f = 1; f < 4; f++)
        {
            for (int i = 0; i < 10; i++)
            {
                feeds[f].Items.Enqueue(i);
            }
        }

        var served = new List<string>();
        for (int turn = 0; turn < 8; turn++)
        {
            Assert.True(set.TryNext(out var channel, out var feed));
            if (feed.TryPull(out _))
            {
                served.Add(feed.Name);
            }
            else
            {
                set.Deactivate(channel);
            }
        }

        // Round 1: A B C D; A is then empty and leaves; B C D take turns.
        Assert.Equal("ABCDBCD", string.Concat(served));
        Assert.Equal(3, set.ActiveCount);
        Assert.True(channels[3].IsActive);
    }
}
