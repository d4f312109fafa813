namespace QuickSilver.Dissemination.Scheduling;

/// <summary>
/// The seed's default "null" scheduler (001 §2.3): "transmits each data item in turn as long as it is requested".
/// The channel's items stand in a fixed circle; <see cref="Next"/> returns the first requested item after the last
/// one returned. O(items of the channel) per decision in the worst case, nothing per client.
/// </summary>
public sealed class CircularScheduler : IChannelScheduler
{
    private readonly RequestBook _book;
    private readonly int[] _items;
    private int _cursor = -1;

    public long Work { get; private set; }

    /// <param name="book">The shared requests.</param>
    /// <param name="items">This channel's items, in circle order.</param>
    public CircularScheduler(RequestBook book, int[] items)
    {
        _book = book ?? throw new ArgumentNullException(nameof(book));
        _items = items ?? throw new ArgumentNullException(nameof(items));
    }

    public int Next()
    {
        for (int step = 1; step <= _items.Length; step++)
        {
            int position = (_cursor + step) % _items.Length;
            Work++;
            if (_book.Requesters(_items[position]) > 0)
            {
                _cursor = position;
                return _items[position];
            }
        }

        return -1;
    }
}
