namespace QuickSilver.Dissemination.Scheduling;

/// <summary>
/// The R/Q heuristic (seed 001 §2.3, Figure 3): for each item of the channel, R = clients waiting for it and
/// Q = the smallest pending request (items still outstanding) among those clients; send the item with the largest
/// R/Q. It favours items many clients want and items that finish some client's request.
/// </summary>
/// <remarks>
/// <para><b>Q starts at +∞, not 0.</b> Figure 3 initialises Q_i ← 0 and then lowers it with "if Q &lt; Q_i".
/// A pending count is at least 1 for any client that requests the item, so the test never holds, every Q_i stays 0,
/// and R_i/Q_i is a division by zero for every requested item: all items tie at +∞ (or NaN), and the heuristic
/// degenerates into "the first requested item", ignoring both R and Q. Q is a minimum, so its identity is +∞; here
/// an item with no requester is skipped (its R/Q would be 0/∞ = 0) and Q is the minimum over the actual requesters.</para>
/// <para><b>Exact comparison.</b> R/Q values are compared as R_a·Q_b &gt; R_b·Q_a in 64-bit integers, so there is no
/// rounding; ties go to the first item after the last one sent in the channel's circle, which keeps equal items
/// taking turns (Figure 3 keeps the first in its scan order, which would starve the rest of a tie).</para>
/// <para><b>Cost.</b> A decision reads every pending (client, item) pair of the channel once: O(Σ R_i). The seed
/// suggests a heap updated when R or Q change; a page sent changes Q for every item its R clients want, so updates
/// cost as much as this scan when clients request much. The benchmark reports the scheduler's time per decision.</para>
/// </remarks>
public sealed class RqScheduler : IChannelScheduler
{
    private readonly RequestBook _book;
    private readonly int[] _items;
    private int _cursor = -1;

    public long Work { get; private set; }

    public RqScheduler(RequestBook book, int[] items)
    {
        _book = book ?? throw new ArgumentNullException(nameof(book));
        _items = items ?? throw new ArgumentNullException(nameof(items));
    }

    public int Next()
    {
        int best = -1;
        int bestPosition = -1;
        long bestR = 0;
        long bestQ = 1;
        for (int step = 1; step <= _items.Length; step++)
        {
            int position = (_cursor + step) % _items.Length;
            Work++;
            int item = _items[position];
            var requesters = _book.RequestersOf(item);
            long r = requesters.Count;
            if (r == 0)
            {
                continue;
            }

            long q = long.MaxValue; // +∞: the identity of a minimum (see remarks)
            foreach (int client in requesters)
            {
                q = Math.Min(q, _book.Pending(client));
                Work++;
            }

            if (best < 0 || r * bestQ > bestR * q)
            {
                best = item;
                bestPosition = position;
                bestR = r;
                bestQ = q;
            }
        }

        if (best >= 0)
        {
            _cursor = bestPosition;
        }

        return best;
    }
}
