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
        else if (ValidateAer(options.Node) is { } aerFailure)
        {
            failures.Add(aerFailure); // before Node.Validate, which reports the same failure without the key's index
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

        ValidateAerGroups(options, failures);
        return failures.Count == 0 ? ValidateOptionsResult.Success : ValidateOptionsResult.Fail(failures);
    }

    /// <summary>The node's AER options and in-node repair servers, each failure under its key
    /// (<c>Aer:SpmInterval</c>, <c>RepairServers:1:Children</c>); null when they are valid.</summary>
    private string? ValidateAer(QuickSilverNodeOptions node)
    {
        try
        {
            node.Aer?.Validate();
        }
        catch (ArgumentException e)
        {
            return RawKey($"Aer:{e.ParamName}") + FirstLine(e.Message);
        }

        for (int i = 0; i < (node.RepairServers?.Count ?? 0); i++)
        {
            if (node.RepairServers![i] is not { } server)
            {
                return RawKey($"RepairServers:{i}") + $"QuickSilverNodeOptions.RepairServers[{i}] must not be null.";
            }

            try
            {
                server.Validate();
            }
            catch (ArgumentException e)
            {
                return RawKey($"RepairServers:{i}:{Capitalized(e.ParamName)}") + $"QuickSilverNodeOptions.RepairServers[{i}]: " + FirstLine(e.Message);
            }
        }

        return null;
    }

    /// <summary>Each AER group: a name that may be a group, not also a QSM group, valid <see cref="AerGroupOptions"/>,
    /// and a session no other AER group or in-node repair server of this node takes.</summary>
    private void ValidateAerGroups(QuickSilverHostOptions options, List<string> failures)
    {
        var sessions = new Dictionary<uint, string>();
        foreach (var server in options.Node?.RepairServers ?? [])
        {
            if (server is not null)
            {
                sessions.TryAdd(server.Session, "an in-node repair server (QuickSilverNodeOptions.RepairServers)");
            }
        }

        foreach (var (name, aer) in options.AerGroups)
        {
            string key = $"AerGroups:{name}";
            if (string.IsNullOrEmpty(name) || System.Text.Encoding.UTF8.GetByteCount(name) > QuickSilverNode.MaxGroupNameBytes)
            {
                failures.Add(RawKey(key) + $"QuickSilverHostOptions.AerGroups names a group '{name}' that is empty or has more than {QuickSilverNode.MaxGroupNameBytes} UTF-8 bytes.");
            }
            else if (options.Groups.Contains(name, StringComparer.Ordinal))
            {
                failures.Add(RawKey(key) + $"QuickSilverHostOptions.AerGroups['{name}']: '{name}' is also in QuickSilverHostOptions.Groups (a QSM group); a group is QSM or AER, not both.");
            }
            else if (aer is null)
            {
                failures.Add(RawKey(key) + $"QuickSilverHostOptions.AerGroups['{name}'] must not be null.");
            }
            else
            {
                try
                {
                    aer.Validate();
                    if (!sessions.TryAdd(aer.Session, $"AER group '{name}'"))
                    {
                        failures.Add(RawKey($"{key}:Session") + $"QuickSilverHostOptions.AerGroups['{name}']: AER session {aer.Session} is taken by {sessions[aer.Session]}: a node takes one role per session.");
                    }
                }
                catch (ArgumentException e)
                {
                    failures.Add(RawKey($"{key}:{Capitalized(e.ParamName)}") + $"QuickSilverHostOptions.AerGroups['{name}']: " + FirstLine(e.Message));
                }
            }
        }
    }

    private static string? Capitalized(string? name) => string.IsNullOrEmpty(name) ? name : char.ToUpperInvariant(name[0]) + name[1..];

    /// <summary>"Section:Key: " for options bound from configuration; nothing for options set in code.</summary>
    private string Key(string? option)
        => sectionPath is null || ConfigurationKey(option) is not { } key ? string.Empty : $"{sectionPath}:{key}: ";

    /// <summary>"Section:Key: " for a key given as it is in configuration (group names may hold '.'); nothing for options set in code.</summary>
    private string RawKey(string key) => sectionPath is null ? string.Empty : $"{sectionPath}:{key}: ";

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
