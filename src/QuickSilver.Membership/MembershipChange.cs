using System.Collections.Immutable;

namespace QuickSilver.Membership;

/// <summary>
/// The result of applying one batch: the views that are new, the regions and groups that ended, and for each
/// affected live node the incremental update it must receive (only what concerns it).
/// </summary>
internal sealed record MembershipChange(
    ImmutableArray<RegionView> NewRegionViews,
    ImmutableArray<GroupView> NewGroupViews,
    ImmutableArray<RegionId> EndedRegions,
    ImmutableArray<GroupId> EndedGroups,
    ImmutableDictionary<NodeId, NodeUpdate> Updates)
{
    public bool IsEmpty => NewRegionViews.IsEmpty && NewGroupViews.IsEmpty && EndedRegions.IsEmpty && EndedGroups.IsEmpty;
}

/// <summary>
/// What one node learns from one batch: new views of the groups it is in, new views of the regions those groups map
/// to (including its own region), and the groups it no longer belongs to.
/// </summary>
internal sealed record NodeUpdate(NodeId Node, ImmutableArray<GroupView> GroupViews, ImmutableArray<RegionView> RegionViews, ImmutableArray<GroupId> LeftGroups);
