using QuickSilver.Dissemination.Scheduling;

namespace QuickSilver.Dissemination.Tests.Scheduling;

public class SchedulerTests
{
    [Fact]
    public void CircularSendsEachRequestedItemInTurn()
    {
        var book = new RequestBook(6);
        var s = new CircularScheduler(book, new[] { 0, 2, 4 });
        Assert.Equal(-1, s.Next());
        book.Add(1, 4);
        book.Add(2, 0);
        Assert.Equal(0, s.Next());
        Assert.Equal(4, s.Next()); // not taken: circles on
        Assert.Equal(0, s.Next());
        book.Add(3, 2);
        Assert.Equal(2, s.Next());
        Assert.Equal(4, s.Next());
    }

    [Fact]
    public void RqPrefersPopularItemsAndItemsThatFinishARequest()
    {
        var book = new RequestBook(10);
        var s = new RqScheduler(book, Enumerable.Range(0, 10).ToArray());

        // Client 1 wants items 0..4 (Q = 5); clients 2 and 3 want 6 only (Q = 1). Item 6: R = 2, Q = 1 → 2.
        for (int i = 0; i < 5; i++)
        {
            book.Add(1, i);
        }

        book.Add(2, 6);
        book.Add(3, 6);
        Assert.Equal(6, s.Next());

        // Item 7 wanted by one client whose request is one item: R/Q = 1; item 0 has R = 2 (clients 1, 5), Q = 4: 0.5.
        var taken = new List<int>();
        book.TakeAll(6, taken);
        book.Add(4, 7);
        for (int i = 0; i < 4; i++)
        {
            book.Add(5, i);
        }

        Assert.Equal(7, s.Next());
        book.TakeAll(7, taken);
        Assert.Equal(0, s.Next()); // R = 2, Q = 4 beats items 1..3 only by turn order; 4: R = 1, Q = 5
    }

    /// <summary>The seed's Figure 3 initialises Q to 0; no pending count is below 0, so every Q stays 0 and every
    /// item ties. With Q from +∞ the item that finishes a one-item request wins even when it is last in the scan.</summary>
    [Fact]
    public void QStartsAtInfinitySoTheSmallestRequestCounts()
    {
        var book = new RequestBook(3);
        var s = new RqScheduler(book, new[] { 0, 1, 2 });
        for (int i = 0; i < 3; i++)
        {
            book.Add(1, i); // client 1 wants all three (Q = 3)
        }

        book.Add(2, 2); // client 2 wants only item 2 (Q = 1): item 2 has R = 2, Q = 1
        Assert.Equal(2, s.Next());
    }

    [Fact]
    public void RqTiesTakeTurns()
    {
        var book = new RequestBook(4);
        var s = new RqScheduler(book, new[] { 0, 1, 2, 3 });
        for (int i = 0; i < 4; i++)
        {
            book.Add(i, i); // four one-item requests: all R/Q = 1
        }

        Assert.Equal(new[] { 0, 1, 2, 3, 0 }, Enumerable.Range(0, 5).Select(_ => s.Next()).ToArray());
    }

    [Fact]
    public void RqMatchesTheBruteForceDefinitionOnRandomBooks()
    {
        var random = new Random(17);
        for (int round = 0; round < 200; round++)
        {
            int items = random.Next(1, 30);
            var book = new RequestBook(items);
            var s = new RqScheduler(book, Enumerable.Range(0, items).ToArray());
            int clients = random.Next(1, 20);
            for (int c = 0; c < clients; c++)
            {
                int n = random.Next(0, items + 1);
                foreach (int i in Enumerable.Range(0, items).OrderBy(_ => random.Next()).Take(n))
                {
                    book.Add(c, i);
                }
            }

            int picked = s.Next();
            double Score(int i) => book.Requesters(i) == 0 ? -1 : book.Requesters(i) / (double)book.RequestersOf(i).Min(book.Pending);
            double best = Enumerable.Range(0, items).Max(Score);
            if (best < 0)
            {
                Assert.Equal(-1, picked);
            }
            else
            {
                Assert.Equal(best, Score(picked), 12);
            }
        }
    }

    [Fact]
    public void TheBookTakesAllRequestsAndForgetsClients()
    {
        var book = new RequestBook(3);
        Assert.True(book.Add(1, 0));
        Assert.False(book.Add(1, 0));
        book.Add(2, 0);
        book.Add(2, 1);
        Assert.Equal(3, book.Entries);
        var taken = new List<int>();
        book.TakeAll(0, taken);
        Assert.Equal(new[] { 1, 2 }, taken.Order().ToArray());
        Assert.Equal(0, book.Pending(1));
        Assert.Equal(1, book.Pending(2));
        book.RemoveClient(2);
        Assert.Equal(0, book.Entries);
        Assert.Equal(0, book.Requesters(1));
    }
}
