using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;

namespace QuickSilver;

/// <summary>The node's log messages, source-generated ([LoggerMessage]). Event ids 3xx.</summary>
internal static partial class NodeLog
{
    [LoggerMessage(EventId = 300, Level = LogLevel.Warning, Message = "IP multicast is unavailable here (joining {Group} failed): regions will use unicast fan-out")]
    public static partial void MulticastUnavailable(ILogger logger, NetAddress group);
}
