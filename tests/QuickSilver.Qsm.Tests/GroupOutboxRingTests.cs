using CsCheck;
using QuickSilver.Qsm.Group;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// The group outbox's ring (docs/qsm.md, "The group layer"): it starts at <see cref="GroupOutbox.InitialRing"/> slots and
/// doubles only when every slot holds a message, up to the capacity, so a group whose regions write what it takes at
/// once stays small; growing keeps every message and every region's place.
/// </summary>
public sealed class GroupOutboxRingTests
{
    private static ReadOnlyMemory<byte> M(ulong n) => new[] { (byte)n };

    [Fact]
    public void A_group_whose_region_writes_at_once_keeps_the_first_small_ring()
    {
        var outbox = new GroupOutbox(NodeGroup.OutboxCapacity);
        outbox.SetRegions([1]);
        for (ulong s = 1; s <= 100_000; s++)
        {
            outbox.Add(M(s), s, published: false);
            Assert.True(outbox.TryPeek(1, out _, out ulong peeked));
            Assert.Equal(s, peeked);
            outbox.Advance(1);
        }

        Assert.Equal(0, outbox.Count);
        Assert.Equal(GroupOutbox.InitialRing, outbox.RingSize);
    }

    [Fact]
    public void The_ring_grows_to_the_capacity_and_no_further_and_keeps_the_order()
    {
        var outbox = new GroupOutbox(100);
        outbox.SetRegions([1]);
        ulong s = 0;
        while (!outbox.IsFull)
        {
            outbox.Add(M(++s), s, published: false);
        }

        Assert.Equal(100ul, s);
        Assert.Equal(128, outbox.RingSize); // the capacity rounded up to a power of two
        Assert.Throws<InvalidOperationException>(() => outbox.Add(M(101), 101, published: false));
        for (ulong expected = 1; expected <= 100; expected++)
        {
            Assert.True(outbox.TryPeek(1, out var message, out ulong sequence));
            Assert.Equal(expected, sequence);
            Assert.Equal((byte)expected, message.Span[0]);
            outbox.Advance(1);
        }

        Assert.False(outbox.TryPeek(1, out _, out _));
    }

    [Fact]
    public void A_restart_that_puts_back_more_than_the_small_ring_holds_grows_it_and_keeps_the_order()
    {
        var outbox = new GroupOutbox(64);
        outbox.SetRegions([1]);
        for (ulong s = 41; s <= 43; s++)
        {
            outbox.Add(M(s), s, published: false);
        }

        var replay = Enumerable.Range(1, 40).Select(n => ((ulong)n, M((ulong)n))).ToList();
        Assert.Equal(0, outbox.Restart(replay));
        outbox.SetRegions([2]);
        var written = new List<ulong>();
        while (outbox.TryPeek(2, out _, out ulong sequence))
        {
            written.Add(sequence);
            outbox.Advance(2);
        }

        Assert.Equal(Enumerable.Range(1, 43).Select(n => (ulong)n), written);
        Assert.Equal(64, outbox.RingSize);
    }

    /// <summary>Random adds, writes by two regions at their own pace, and replays, against a plain model: each region
    /// writes exactly the messages added since it joined, in order, and a message leaves once both have written it.</summary>
    [Fact]
    public void Growing_never_loses_or_reorders_a_message_for_any_region() =>
        Property.ForAll(Gen.Int[0, 9].Array[1, 600], 200, seed: 1107, operations =>
        {
            const int capacity = 200;
            var outbox = new GroupOutbox(capacity);
            outbox.SetRegions([1, 2]);
            var pending = new Dictionary<uint, Queue<ulong>> { [1] = new(), [2] = new() };
            ulong next = 0;
            foreach (int op in operations)
            {
                if (op < 5)
                {
                    if (outbox.IsFull)
                    {
                        Assert.Equal(capacity, outbox.Count);
                        continue;
                    }

                    outbox.Add(M(++next), next, published: false);
                    pending[1].Enqueue(next);
                    pending[2].Enqueue(next);
                }
                else
                {
                    uint region = op < 8 ? 1u : 2u; // region 2 writes less often: the ring fills behind it
                    if (pending[region].TryDequeue(out ulong expected))
                    {
                        Assert.True(outbox.TryPeek(region, out var message, out ulong sequence));
                        Assert.Equal(expected, sequence);
                        Assert.Equal((byte)expected, message.Span[0]);
                        outbox.Advance(region);
                    }
                    else
                    {
                        Assert.False(outbox.TryPeek(region, out _, out _));
                    }
                }

                Assert.Equal(Math.Max(pending[1].Count, pending[2].Count), outbox.Count);
                Assert.True(outbox.RingSize <= 256);
            }
        });
}
