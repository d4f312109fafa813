using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Diagnostics;

/// <summary>The core's log messages, source-generated ([LoggerMessage]): each checks <see cref="ILogger.IsEnabled"/>
/// before it formats or boxes anything, so a disabled level costs one interface call. Event ids 1xx.</summary>
internal static partial class CoreLog
{
    [LoggerMessage(EventId = 100, Level = LogLevel.Error, Message = "A handler, feed, alarm or downcall threw on core {Core}; the core carries on")]
    public static partial void UpcallFault(ILogger logger, Exception exception, string core);

    [LoggerMessage(EventId = 105, Level = LogLevel.Critical, Message = "Core {Core} stopped on an unexpected fault")]
    public static partial void Faulted(ILogger logger, Exception exception, string core);

    [LoggerMessage(EventId = 101, Level = LogLevel.Debug, Message = "Core {Core} stopping with {Alarms} alarms pending")]
    public static partial void Stopping(ILogger logger, string core, int alarms);

    [LoggerMessage(EventId = 102, Level = LogLevel.Warning, Message = "UDP endpoint {Endpoint} closed with {Pending} datagrams unsent")]
    public static partial void ClosedWithUnsent(ILogger logger, NetAddress endpoint, int pending);

    [LoggerMessage(EventId = 103, Level = LogLevel.Warning, Message = "{Message}")]
    public static partial void RateLimited(ILogger logger, string message);

    [LoggerMessage(EventId = 104, Level = LogLevel.Warning, Message = "{Message} ({Suppressed} similar suppressed)")]
    public static partial void RateLimitedWithSuppressed(ILogger logger, string message, long suppressed);
}
