using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>The GMS's log messages, source-generated ([LoggerMessage]; nothing is formatted or boxed at a disabled
/// level). Event ids 2xx.</summary>
internal static partial class GmsLog
{
    [LoggerMessage(EventId = 200, Level = LogLevel.Information, Message = "GMS: node {Node} at {Address} registered")]
    public static partial void Registered(ILogger logger, NodeId node, NetAddress address);

    [LoggerMessage(EventId = 201, Level = LogLevel.Warning, Message = "GMS: refused a request of {Address} (node {Node}): {Reason}, limit {Limit} ({Count} so far)")]
    public static partial void Refused(ILogger logger, NetAddress address, NodeId? node, GmsRefusal reason, long limit, long count);

    [LoggerMessage(EventId = 202, Level = LogLevel.Information, Message = "GMS: node {Node} at {Address} removed ({Why})")]
    public static partial void Removed(ILogger logger, NodeId node, NetAddress address, string why);

    [LoggerMessage(EventId = 203, Level = LogLevel.Error, Message = "A single view for node {Node} needs {Bytes} bytes, more than the control channel's {Max}: not sent")]
    public static partial void ViewTooLarge(ILogger logger, NodeId node, int bytes, int max);
}
