using System.Numerics;

namespace QuickSilver.Core.Alarms;

/// <summary>
/// The alarm queue of QSM §2.5: a splay tree of <see cref="Alarm"/> nodes keyed by (deadline, insertion order).
/// Schedule, cancel, reschedule and pop are O(log n) amortized. Not thread-safe: owned by one core (or the simulator).
/// </summary>
/// <remarks>
/// <para>
/// The <see cref="Alarm"/> objects are the nodes (left, right and parent links), so nothing allocates, and an alarm
/// is removed (cancel, reschedule) from where it sits, without a search. Every walk is a loop, so a degenerate tree
/// costs time, never stack depth.
/// </para>
/// <para>
/// The key is (<see cref="Alarm.Deadline"/>, <c>Sequence</c>), where the sequence comes from a per-queue counter on
/// every (re)schedule, so keys are unique and alarms with equal deadlines fire in the order they were scheduled.
/// The minimum is kept up to date, so <see cref="TryPeekDeadline"/> is O(1), and popping it is a splice plus a walk
/// to its successor.
/// </para>
/// <para>
/// Splaying is conditional (bottom-up, with parent pointers): an operation whose walk is longer than
/// <c>2·(⌊log2 n⌋ + 1)</c> splays the deepest node it touched to the root; shorter walks leave the tree alone. A
/// short operation costs O(log n) outright and raises the splay potential (Σ log subtree size) by at most O(log n)
/// (an insertion) or lowers it (a removal); a long one is paid for by the splay, by the access lemma. So every
/// operation stays O(log n) amortized, as with splaying on every access, while the common, shallow case skips the
/// rotations and their pointer writes. Degenerate input (sorted deadlines, the usual timer pattern) triggers the
/// splays that keep the paths short.
/// </para>
/// </remarks>
internal sealed class AlarmQueue
{
    private Alarm? _root;
    private Alarm? _min; // the leftmost node; null exactly when the queue is empty
    private int _count;
    private long _nextSequence;

    /// <summary>Number of scheduled alarms.</summary>
    public int Count => _count;

    /// <summary>How many times an operation's walk was long enough to splay (for tests and diagnostics).</summary>
    internal long SplayCount { get; private set; }

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
        if (_min is { } min)
        {
            deadline = min.Deadline;
            return true;
        }

        deadline = default;
        return false;
    }

    /// <summary>Removes and returns the earliest alarm if its deadline is at or before <paramref name="now"/>; otherwise null.
    /// The caller then calls <see cref="Alarm.Fire"/>.</summary>
    public Alarm? PopDue(TimeSpan now)
    {
        var min = _min;
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
        var min = _min;
        if (min is not null)
        {
            Remove(min);
        }

        return min;
    }

    /// <summary>Removes every alarm (each one's <see cref="Alarm.IsScheduled"/> becomes false). O(n).</summary>
    public void Clear()
    {
        // Post-order release without recursion: repeatedly detach a leaf and climb back up.
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
    /// recursion. For tests; throws InvalidOperationException on the first violation. Returns the height of the tree.
    /// </summary>
    internal int Validate()
    {
        if (_root is not null && _root.Parent is not null)
        {
            throw new InvalidOperationException("root has a parent");
        }

        // In-order walk over the parent links, tracking the depth.
        int seen = 0;
        int depth = 0;
        int height = 0;
        Alarm? previous = null;
        Alarm? first = null;
        var node = _root;
        while (node?.Left is { } l)
        {
            node = l;
            depth++;
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
            height = Math.Max(height, depth);
            if (++seen > _count)
            {
                throw new InvalidOperationException("more nodes in the tree than Count (cycle?)");
            }

            // Successor.
            if (node.Right is { } right)
            {
                node = right;
                depth++;
                while (node.Left is { } left)
                {
                    node = left;
                    depth++;
                }
            }
            else
            {
                var child = node;
                node = node.Parent;
                depth--;
                while (node is not null && ReferenceEquals(node.Right, child))
                {
                    child = node;
                    node = node.Parent;
                    depth--;
                }
            }
        }

        if (seen != _count)
        {
            throw new InvalidOperationException($"tree holds {seen} nodes but Count is {_count}");
        }

        if (!ReferenceEquals(_min, first))
        {
            throw new InvalidOperationException("cached minimum is not the leftmost node");
        }

        return height;
    }

    private static bool Less(Alarm a, Alarm b)
        => a.Deadline < b.Deadline || (a.Deadline == b.Deadline && a.Sequence < b.Sequence);

    /// <summary>The walk length beyond which an operation splays: 2·(⌊log2 n⌋ + 1).</summary>
    private int DeepWalk => 2 * (BitOperations.Log2((uint)_count) + 1);

    private void Insert(Alarm node)
    {
        node.Left = null;
        node.Right = null;

        var current = _root;
        if (current is null)
        {
            node.Parent = null;
            _root = node;
            _min = node;
            return;
        }

        int depth = 1;
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

            depth++;
        }

        node.Parent = current;
        if (Less(node, _min!))
        {
            _min = node;
        }

        if (depth > DeepWalk)
        {
            SplayToRoot(node);
        }
    }

    /// <summary>Removes a node of this queue and clears its owner.</summary>
    private void Remove(Alarm node)
    {
        Unlink(node);
        node.Owner = null;
        _count--;
    }

    /// <summary>Takes <paramref name="node"/> out of the tree and clears its links; leaves Owner and Count alone.</summary>
    private void Unlink(Alarm node)
    {
        var left = node.Left;
        var right = node.Right;
        Alarm? deepest = null; // the end of a walk this removal made, to splay if the walk was long
        int walk = 0;

        if (ReferenceEquals(node, _min))
        {
            // The minimum has no left child. Its successor is the leftmost node of its right subtree, else its parent.
            if (right is not null)
            {
                var next = right;
                while (next.Left is { } l)
                {
                    next = l;
                    walk++;
                }

                _min = next;
                deepest = next;
            }
            else
            {
                _min = node.Parent;
            }
        }

        if (left is null)
        {
            Replace(node, right);
        }
        else if (right is null)
        {
            Replace(node, left);
        }
        else
        {
            // Two children: the predecessor (rightmost of the left subtree) takes the node's place.
            var predecessor = left;
            while (predecessor.Right is { } r)
            {
                predecessor = r;
                walk++;
            }

            if (!ReferenceEquals(predecessor, left))
            {
                var above = predecessor.Parent!;
                var below = predecessor.Left;
                above.Right = below;
                if (below is not null)
                {
                    below.Parent = above;
                }

                predecessor.Left = left;
                left.Parent = predecessor;
                deepest = above;
            }

            predecessor.Right = right;
            right.Parent = predecessor;
            Replace(node, predecessor);
        }

        node.Left = null;
        node.Right = null;
        node.Parent = null;

        if (deepest is not null && walk > DeepWalk)
        {
            SplayToRoot(deepest);
        }
    }

    /// <summary>Puts <paramref name="replacement"/> (possibly null) where <paramref name="node"/> hangs from its parent.</summary>
    private void Replace(Alarm node, Alarm? replacement)
    {
        var parent = node.Parent;
        if (replacement is not null)
        {
            replacement.Parent = parent;
        }

        if (parent is null)
        {
            _root = replacement;
        }
        else if (ReferenceEquals(parent.Left, node))
        {
            parent.Left = replacement;
        }
        else
        {
            parent.Right = replacement;
        }
    }

    /// <summary>Bottom-up splay: rotates <paramref name="x"/> up (zig, zig-zig, zig-zag) until it is the root.</summary>
    private void SplayToRoot(Alarm x)
    {
        SplayCount++;
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

        _root = x;
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
