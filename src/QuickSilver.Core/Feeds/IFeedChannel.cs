namespace QuickSilver.Core.Feeds;

/// <summary>
/// The handle a component gets back when it registers a feed with the layer below.
/// Both members are called on the core thread; application threads reach them through a downcall.
/// </summary>
public interface IFeedChannel : IDisposable
{
    /// <summary>Marks the feed as having something to send, so the layer below pulls it again. Idempotent.</summary>
    void Signal();

    /// <summary>True while the feed is in the active set (it will be pulled when the layer below can send).</summary>
    bool IsActive { get; }
}
