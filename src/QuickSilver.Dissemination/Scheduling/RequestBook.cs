namespace QuickSilver.Dissemination.Scheduling;

/// <summary>
/// Which client still waits for which item: the state both schedulers read. Per item the set of requesting clients
/// (R is its size), per client the number of items it still waits for (the "pending request" whose smallest value
/// among an item's requesters is the R/Q heuristic's Q). Clients are small integers the server assigns.
/// Bounded by the catalogue: at most items × clients entries, one per (client, item) pair.
/// </summary>
public sealed class RequestBook
{
    private readonly HashSet<int>?[] _requesters;
    private readonly Dictionary<int, HashSet<int>> _itemsOf = new();

    public RequestBook(int items)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(items);
        _requesters = new HashSet<int>?[items];
    }

    public int ItemCount => _requesters.Length;

    /// <summary>(client, item) pairs pending in all.</summary>
    public long Entries { get; private set; }

    /// <summary>Raised when an item's R goes from 0 to 1 (a scheduler that sleeps may wake).</summary>
    public event Action<int>? ItemRequested;

    /// <summary>R: clients waiting for <paramref name="item"/>.</summary>
    public int Requesters(int item) => _requesters[item]?.Count ?? 0;

    /// <summary>The clients waiting for <paramref name="item"/> (do not modify).</summary>
    public IReadOnlyCollection<int> RequestersOf(int item) => (IReadOnlyCollection<int>?)_requesters[item] ?? Array.Empty<int>();

    /// <summary>Items <paramref name="client"/> still waits for.</summary>
    public int Pending(int client) => _itemsOf.TryGetValue(client, out var items) ? items.Count : 0;

    public bool IsPending(int client, int item) => _requesters[item]?.Contains(client) == true;

    /// <summary>Records that <paramref name="client"/> waits for <paramref name="item"/>; false if it already did.</summary>
    public bool Add(int client, int item)
    {
        var set = _requesters[item] ??= new HashSet<int>();
        if (!set.Add(client))
        {
            return false;
        }

        if (!_itemsOf.TryGetValue(client, out var items))
        {
            _itemsOf[client] = items = new HashSet<int>();
        }

        items.Add(item);
        Entries++;
        if (set.Count == 1)
        {
            ItemRequested?.Invoke(item);
        }

        return true;
    }

    /// <summary>The item goes out: every request for it is taken (silence will mean success) and its requesters
    /// are appended to <paramref name="into"/>.</summary>
    public void TakeAll(int item, List<int> into)
    {
        var set = _requesters[item];
        if (set is null)
        {
            return;
        }

        foreach (int client in set)
        {
            into.Add(client);
            _itemsOf[client].Remove(item);
        }

        Entries -= set.Count;
        set.Clear();
    }

    /// <summary>Forgets a client that left.</summary>
    public void RemoveClient(int client)
    {
        if (_itemsOf.Remove(client, out var items))
        {
            foreach (int item in items)
            {
                _requesters[item]!.Remove(client);
            }

            Entries -= items.Count;
        }
    }
}
