using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>The GMS's log messages, source-generated ([LoggerMessage]; nothing is formatted or boxed at a disabled
/// level). Event ids 2xx. (<see cref="IGmsLog"/> is the GMS's command log, a different thing.)</summary>
internal static partial class GmsLogMessages
{
    [LoggerMessage(EventId = 200, Level = LogLevel.Information, Message = "GMS: node {Node} at {Address} registered")]
    public static partial void Registered(ILogger logger, NodeId node, NetAddress address);

    [LoggerMessage(EventId = 201, Level = LogLevel.Warning, Message = "GMS: refused a request of {Address} (node {Node}): {Reason}, limit {Limit} ({Count} so far)")]
    public static partial void Refused(ILogger logger, NetAddress address, NodeId? node, GmsRefusal reason, long limit, long count);

    [LoggerMessage(EventId = 202, Level = LogLevel.Information, Message = "GMS: node {Node} at {Address} removed ({Why})")]
    public static partial void Removed(ILogger logger, NodeId? node, NetAddress address, string why);

    [LoggerMessage(EventId = 203, Level = LogLevel.Error, Message = "A single view for node {Node} needs {Bytes} bytes, more than the control channel's {Max}: not sent")]
    public static partial void ViewTooLarge(ILogger logger, NodeId node, int bytes, int max);

    [LoggerMessage(EventId = 204, Level = LogLevel.Information, Message = "GMS replica {Replica}: no longer leading (leader {Leader})")]
    public static partial void NoLongerLeading(ILogger logger, uint replica, NetAddress? leader);

    [LoggerMessage(EventId = 205, Level = LogLevel.Warning, Message = "GMS replica {Replica}: a proposal was not committed (leadership lost?)")]
    public static partial void ProposalLost(ILogger logger, uint replica);

    [LoggerMessage(EventId = 206, Level = LogLevel.Information, Message = "GMS replica {Replica}: leading, epoch {Epoch}, {Nodes} nodes adopted")]
    public static partial void Leading(ILogger logger, uint replica, ulong epoch, int nodes);

    [LoggerMessage(EventId = 207, Level = LogLevel.Information, Message = "GMS replica {Replica}: replica set change ({Change} {Address}) committed: {Committed}")]
    public static partial void ReplicaSetChanged(ILogger logger, uint replica, NetAddress address, string change, bool committed);

    [LoggerMessage(EventId = 208, Level = LogLevel.Warning, Message = "GMS epoch {Epoch}: a node registered with epoch {Earlier} says Hello, so this GMS restarted; joins and views wait {Grace} for the old members to register again")]
    public static partial void RestartGrace(ILogger logger, ulong epoch, ulong earlier, TimeSpan grace);
}
