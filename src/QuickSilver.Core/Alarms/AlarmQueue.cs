namespace QuickSilver.Core.Alarms;

/// <summary>
/// The alarm queue of QSM §2.5: a splay tree of <see cref="Alarm"/> nodes keyed by (deadline, insertion order).
/// Schedule, cancel, reschedule and pop are O(log n) amortized. Not thread-safe: owned by one core (or the simulator).
/// </summary>
/// <remarks>
/// <para>
/// The tree is a bottom-up splay tree with parent pointers. The <see cref="Alarm"/> objects are the nodes, so no
/// operation allocates, and an arbitrary node can be removed (cancel, reschedule) by splaying it to the root from
/// where it sits, without a search. Every walk is iterative, so a degenerate tree (the shape sorted insertions
/// produce) costs time once but never stack depth.
/// </para>
/// <para>
/// The key is (<see cref="Alarm.Deadline"/>, <c>Sequence</c>), where the sequence is taken from a per-queue counter
/// on every (re)schedule, so keys are unique and alarms with equal deadlines fire in the order they were scheduled.
/// The minimum is cached: <see cref="TryPeekDeadline"/> is O(1) while the minimum has not been removed, and the first
/// peek or pop after removing it finds the new minimum and splays it to the root (an ordinary splay access).
/// </para>
/// </remarks>
public sealed class AlarmQueue
{
    private Alarm? _root;

    // The leftmost node, or null when unknown (after the cached minimum was removed) or the queue is empty.
    private Alarm? _min;
    private int _count;
    private long _nextSequence;

    /// <summary>Number of scheduled alarms.</summary>
    public int Count => _count;

    /// <summary>Inserts <paramref name="alarm"/> with <paramref name="deadline"/>. If it is already in this queue it is moved;
    /// if it is in another queue, throws InvalidOperationException. Ties on deadline fire in insertion order.</summary>
    public void Schedule(Alarm alarm, TimeSpan deadline)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        if (alarm.Owner is { } owner)
        {
            if (!ReferenceEquals(owner, this))
            {
                throw new InvalidOperationException(
                    "The alarm is scheduled in another AlarmQueue; cancel it there before scheduling it here.");
            }

            Unlink(alarm);
        }
        else
        {
            alarm.Owner = this;
            _count++;
        }

        alarm.Deadline = deadline;
        alarm.Sequence = _nextSequence++;
        Insert(alarm);
    }

    /// <summary>Removes <paramref name="alarm"/>. Returns false if it was not in this queue.</summary>
    public bool Cancel(Alarm alarm)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        if (!ReferenceEquals(alarm.Owner, this))
        {
            return false;
        }

        Remove(alarm);
        return true;
    }

    /// <summary>The earliest deadline, if any alarm is scheduled.</summary>
    public bool TryPeekDeadline(out TimeSpan deadline)
    {
        var min = FindMin();
        if (min is null)
        {
            deadline = default;
            return false;
        }

        deadline = min.Deadline;
        return true;
    }

    /// <summary>Removes and returns the earliest alarm if its deadline is at or before <paramref name="now"/>; otherwise null.
    /// The caller then calls <see cref="Alarm.Fire"/>.</summary>
    public Alarm? PopDue(TimeSpan now)
    {
        var min = FindMin();
        if (min is null || min.Deadline > now)
        {
            return null;
        }

        Remove(min);
        return min;
    }

    /// <summary>Removes and returns the earliest alarm, or null when empty.</summary>
    public Alarm? PopMin()
    {
        var min = FindMin();
        if (min is not null)
        {
            Remove(min);
        }

        return min;
    }

    /// <summary>Removes every alarm (each one's <see cref="Alarm.IsScheduled"/> becomes false). O(n).</summary>
    public void Clear()
    {
        // Post-order release without recursion: repeatedly detach a leaf.
        var node = _root;
        while (node is not null)
        {
            if (node.Left is { } left)
            {
                node = left;
            }
            else if (node.Right is { } right)
            {
                node = right;
            }
            else
            {
                var parent = node.Parent;
                if (parent is not null)
                {
                    if (ReferenceEquals(parent.Left, node))
                    {
                        parent.Left = null;
                    }
                    else
                    {
                        parent.Right = null;
                    }
                }

                node.Parent = null;
                node.Owner = null;
                node = parent;
            }
        }

        _root = null;
        _min = null;
        _count = 0;
    }

    /// <summary>
    /// Checks the tree's invariants (parent links, strict key order, owner, count, cached minimum) in O(n), without
    /// recursion. For tests; throws InvalidOperationException on the first violation.
    /// </summary>
    internal void Validate()
    {
        if (_root is not null && _root.Parent is not null)
        {
            throw new InvalidOperationException("root has a parent");
        }

        // Iterative in-order walk using the parent pointers.
        int seen = 0;
        Alarm? previous = null;
        Alarm? first = null;
        var node = _root;
        while (node?.Left is { } l)
        {
            node = l;
        }

        while (node is not null)
        {
            if (!ReferenceEquals(node.Owner, this))
            {
                throw new InvalidOperationException("node in tree is not owned by this queue");
            }

            if (node.Left is not null && !ReferenceEquals(node.Left.Parent, node))
            {
                throw new InvalidOperationException("left child's parent link is wrong");
            }

            if (node.Right is not null && !ReferenceEquals(node.Right.Parent, node))
            {
                throw new InvalidOperationException("right child's parent link is wrong");
            }

            if (previous is not null && !Less(previous, node))
            {
                throw new InvalidOperationException("in-order sequence is not strictly increasing");
            }

            first ??= node;
            previous = node;
            seen++;
            if (seen > _count)
            {
                throw new InvalidOperationException("more nodes in the tree than Count (cycle?)");
            }

            node = Successor(node);
        }

        if (seen != _count)
        {
            throw new InvalidOperationException($"tree holds {seen} nodes but Count is {_count}");
        }

        if (_min is not null && !ReferenceEquals(_min, first))
        {
            throw new InvalidOperationException("cached minimum is not the leftmost node");
        }
    }

    private static Alarm? Successor(Alarm node)
    {
        if (node.Right is { } right)
        {
            while (right.Left is { } l)
            {
                right = l;
            }

            return right;
        }

        var child = node;
        var parent = node.Parent;
        while (parent is not null && ReferenceEquals(parent.Right, child))
        {
            child = parent;
            parent = parent.Parent;
        }

        return parent;
    }

    private static bool Less(Alarm a, Alarm b)
        => a.Deadline < b.Deadline || (a.Deadline == b.Deadline && a.Sequence < b.Sequence);

    private Alarm? FindMin()
    {
        if (_min is not null || _root is null)
        {
            return _min;
        }

        var node = _root;
        while (node.Left is { } left)
        {
            node = left;
        }

        // Splay the minimum so the walk is paid for (splay access lemma) and the next pops find it near the root.
        Splay(node);
        _root = node;
        _min = node;
        return node;
    }

    private void Insert(Alarm node)
    {
        node.Left = null;
        node.Right = null;
        node.Parent = null;

        if (_root is null)
        {
            _root = node;
            _min = node;
            return;
        }

        var current = _root;
        while (true)
        {
            if (Less(node, current))
            {
                if (current.Left is null)
                {
                    current.Left = node;
                    break;
                }

                current = current.Left;
            }
            else
            {
                if (current.Right is null)
                {
                    current.Right = node;
                    break;
                }

                current = current.Right;
            }
        }

        node.Parent = current;
        Splay(node);
        _root = node;

        if (_min is not null && Less(node, _min))
        {
            _min = node;
        }
    }

    /// <summary>Removes a node of this queue and clears its links and owner.</summary>
    private void Remove(Alarm node)
    {
        Unlink(node);
        node.Owner = null;
        _count--;
    }

    /// <summary>Takes <paramref name="node"/> out of the tree (splaying it to the root first), leaving Owner and Count alone.</summary>
    private void Unlink(Alarm node)
    {
        if (ReferenceEquals(node, _min))
        {
            _min = null;
        }

        Splay(node);
        var left = node.Left;
        var right = node.Right;
        node.Left = null;
        node.Right = null;
        node.Parent = null;

        if (left is null)
        {
            _root = right;
            if (right is not null)
            {
                right.Parent = null;
            }

            return;
        }

        // Join: splay the largest node of the left subtree to its root; it then has no right child.
        left.Parent = null;
        var max = left;
        while (max.Right is { } r)
        {
            max = r;
        }

        Splay(max);
        max.Right = right;
        if (right is not null)
        {
            right.Parent = max;
        }

        _root = max;
    }

    /// <summary>Rotates <paramref name="x"/> up until it has no parent (the root of the tree or detached subtree it is in).
    /// The caller updates <see cref="_root"/>.</summary>
    private static void Splay(Alarm x)
    {
        while (x.Parent is { } p)
        {
            var g = p.Parent;
            if (g is null)
            {
                Rotate(x); // zig
            }
            else if (ReferenceEquals(g.Left, p) == ReferenceEquals(p.Left, x))
            {
                Rotate(p); // zig-zig
                Rotate(x);
            }
            else
            {
                Rotate(x); // zig-zag
                Rotate(x);
            }
        }
    }

    /// <summary>Rotates <paramref name="x"/> above its parent, keeping the in-order sequence.</summary>
    private static void Rotate(Alarm x)
    {
        var p = x.Parent!;
        var g = p.Parent;
        if (ReferenceEquals(p.Left, x))
        {
            var b = x.Right;
            p.Left = b;
            if (b is not null)
            {
                b.Parent = p;
            }

            x.Right = p;
        }
        else
        {
            var b = x.Left;
            p.Right = b;
            if (b is not null)
            {
                b.Parent = p;
            }

            x.Left = p;
        }

        p.Parent = x;
        x.Parent = g;
        if (g is not null)
        {
            if (ReferenceEquals(g.Left, p))
            {
                g.Left = x;
            }
            else
            {
                g.Right = x;
            }
        }
    }
}
