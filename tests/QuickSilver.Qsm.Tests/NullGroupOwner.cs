using QuickSilver.Membership;
using QuickSilver.Qsm.Group;

namespace QuickSilver.Qsm.Tests;

/// <summary>A group owner that takes every message and publishes nothing, for tests of the group layer's parts.</summary>
internal sealed class NullGroupOwner : IGroupOwner
{
    public void OnViewInstalled(GroupView view)
    {
    }

    public bool Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload) => true;

    public bool TryTakePublished(out ReadOnlyMemory<byte> message)
    {
        message = default;
        return false;
    }

    public void OnSent(ReadOnlyMemory<byte> message)
    {
    }

    public void OnLeft(int discarded)
    {
    }
}
