using Serilog.Extensions.Logging;

namespace QuickSilver.Tools;

/// <summary>The nodes qs starts log through Microsoft.Extensions.Logging with Serilog as the provider: this factory
/// writes to the static <c>Serilog.Log.Logger</c> Program configures (its level is --log-level).</summary>
internal static class QsLogging
{
    public static SerilogLoggerFactory Factory { get; } = new();
}
