namespace QuickSilver.Core.Feeds;

/// <summary>
/// A pull-model data feed (QSM §2.5): the layer below asks for the next item when it can send it.
/// Returning false means "nothing now"; the feed is then deactivated until its channel is signalled.
/// Called on the core thread only.
/// </summary>
public interface IFeed<T>
{
    bool TryPull(out T item);
}
