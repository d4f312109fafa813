using Microsoft.Extensions.Options;

namespace QuickSilver.Hosting;

/// <summary>
/// Validates <see cref="QuickSilverHostOptions"/> by calling the options' own <see cref="QuickSilverNodeOptions.Validate"/>
/// (one set of rules, the one <see cref="QuickSilverNode.StartAsync"/> applies) and turning its first failure into an
/// options-validation failure that names the configuration key as well as the option, e.g.
/// "QuickSilver:PublishBuffer: QuickSilverNodeOptions.PublishBuffer must be between 1 and 16777216, got 0."
/// </summary>
internal sealed class QuickSilverHostOptionsValidator(string? sectionPath) : IValidateOptions<QuickSilverHostOptions>
{
    public ValidateOptionsResult Validate(string? name, QuickSilverHostOptions options)
    {
        var failures = new List<string>();
        if (options.Node is null)
        {
            failures.Add(Key("Node") + "QuickSilverHostOptions.Node must not be null.");
        }
        else
        {
            try
            {
                options.Node.Validate();
            }
            catch (ArgumentException e)
            {
                failures.Add(Key(e.ParamName) + FirstLine(e.Message));
            }
        }

        if (options.StartTimeout <= TimeSpan.Zero)
        {
            failures.Add(Key(nameof(options.StartTimeout)) + $"QuickSilverHostOptions.StartTimeout must be positive, got {options.StartTimeout}.");
        }

        var seen = new HashSet<string>(StringComparer.Ordinal);
        for (int i = 0; i < options.Groups.Count; i++)
        {
            var group = options.Groups[i];
            if (string.IsNullOrEmpty(group))
            {
                failures.Add(Key($"Groups:{i}") + $"QuickSilverHostOptions.Groups[{i}] must not be empty.");
            }
            else if (System.Text.Encoding.UTF8.GetByteCount(group) > QuickSilverNode.MaxGroupNameBytes)
            {
                failures.Add(Key($"Groups:{i}") + $"QuickSilverHostOptions.Groups[{i}] has more than {QuickSilverNode.MaxGroupNameBytes} UTF-8 bytes.");
            }
            else if (!seen.Add(group))
            {
                failures.Add(Key($"Groups:{i}") + $"QuickSilverHostOptions.Groups[{i}] repeats group '{group}'.");
            }
        }

        return failures.Count == 0 ? ValidateOptionsResult.Success : ValidateOptionsResult.Fail(failures);
    }

    /// <summary>"Section:Key: " for options bound from configuration; nothing for options set in code.</summary>
    private string Key(string? option)
        => sectionPath is null || ConfigurationKey(option) is not { } key ? string.Empty : $"{sectionPath}:{key}: ";

    /// <summary>Maps the option name a Validate method reports ("QuickSilverNodeOptions.PublishBuffer",
    /// "RegionOptions.TokenInterval", "GmsOptions.MaxNodes", "QuickSilverNodeOptions.Security.ClusterSecret") to its
    /// key under the section ("PublishBuffer", "Region:TokenInterval", "GmsServer:MaxNodes", "Security:ClusterSecret").</summary>
    internal static string? ConfigurationKey(string? option)
    {
        if (string.IsNullOrEmpty(option))
        {
            return null;
        }

        foreach (var (prefix, key) in Prefixes)
        {
            if (option.StartsWith(prefix, StringComparison.Ordinal))
            {
                option = key + option[prefix.Length..];
                break;
            }
        }

        return option.Replace('.', ':');
    }

    private static readonly (string Prefix, string Key)[] Prefixes =
    [
        ("QuickSilverNodeOptions.", ""),
        ("RegionOptions.", "Region:"),
        ("RateControlOptions.", "RateControl:"),
        ("GmsOptions.", "GmsServer:"),
        ("DatagramSecurityOptions.", "Security:"),
    ];

    // ArgumentException appends " (Parameter '…')" and ArgumentOutOfRangeException "Actual value was …"; the option's own text is the first part.
    private static string FirstLine(string message)
    {
        int cut = message.IndexOf(" (Parameter '", StringComparison.Ordinal);
        message = cut >= 0 ? message[..cut] : message;
        int line = message.IndexOf('\n', StringComparison.Ordinal);
        return (line >= 0 ? message[..line] : message).TrimEnd();
    }
}
