using CsCheck;
using QuickSilver.Membership;
using QuickSilver.Qsm.Group;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// <see cref="NodeGroup.Advance"/> keeps its most recent sender in fields ahead of its dictionary (docs/qsm.md, "Memory
/// per group"): against a plain dictionary of last delivered sequences, over random deliveries from a few senders mixed
/// with forgetting and renumbering senders, it makes the same duplicate decisions and tracks the same senders.
/// </summary>
public sealed class NodeGroupAdvanceTests
{
    [Fact]
    public void The_recent_sender_fields_decide_like_a_dictionary_of_last_sequences() =>
        Property.ForAll(Gen.Select(Gen.Int[0, 9], Gen.UInt[1, 4], Gen.ULong[0, 30]).Array[1, 300], 300, seed: 1123, operations =>
        {
            foreach (bool fifo in new[] { true, false })
            {
                var group = new NodeGroup("g", new NullGroupOwner());
                var model = new Dictionary<uint, ulong>();
                foreach (var (op, sender, sequence) in operations)
                {
                    if (op == 0)
                    {
                        // The sender departed (docs/qsm.md, "Departed senders"): both forget it.
                        group.Forget(s => s != sender, []);
                        model.Remove(sender);
                    }
                    else if (op == 1)
                    {
                        // A new GMS epoch: sender 1 becomes 5 (kept at the larger progress), the others keep their ids.
                        group.RenumberSenders(s => s == 1 ? 5u : s);
                        var renumbered = new Dictionary<uint, ulong>();
                        foreach (var (s, last) in model)
                        {
                            uint id = s == 1 ? 5u : s;
                            renumbered[id] = Math.Max(last, renumbered.GetValueOrDefault(id));
                        }

                        model = renumbered;
                    }
                    else
                    {
                        bool expected = !(model.TryGetValue(sender, out ulong last) && sequence <= last) || !fifo;
                        if (!(model.TryGetValue(sender, out last) && sequence <= last))
                        {
                            model[sender] = sequence;
                        }

                        Assert.Equal(expected, group.Advance(sender, sequence, fifo));
                    }

                    Assert.Equal(model.Count, group.SendersTracked);
                }
            }
        });
}
