namespace QuickSilver.Core;

/// <summary>Start-up validation helpers: every failure names the option.</summary>
internal static class OptionChecks
{
    public static void Positive(TimeSpan value, string option)
    {
        if (value <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(option, value, $"{option} must be positive, got {value}.");
        }
    }

    public static void InRange(long value, long min, long max, string option)
    {
        if (value < min || value > max)
        {
            throw new ArgumentOutOfRangeException(option, value, $"{option} must be between {min} and {max}, got {value}.");
        }
    }

    public static void InRange(double value, double min, double max, string option)
    {
        if (double.IsNaN(value) || value < min || value > max)
        {
            throw new ArgumentOutOfRangeException(option, value, $"{option} must be between {min} and {max}, got {value}.");
        }
    }
}
