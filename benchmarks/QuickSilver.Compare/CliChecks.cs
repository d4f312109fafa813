using System.CommandLine;

namespace QuickSilver.Compare;

/// <summary>Command-line validation: a bad option (not a number, out of range, unknown) ends the run with exit code 2
/// and a message that names the option, before anything starts.</summary>
internal static class CliChecks
{
    public const int UsageError = 2;

    /// <summary>Refuses values of <paramref name="option"/> below <paramref name="minimum"/>, naming the option.</summary>
    public static void AtLeast<T>(Option<T?> option, long minimum)
        where T : struct, IConvertible
    {
        option.Validators.Add(r =>
        {
            if (TryValue<T>(r) is { } value && Convert.ToInt64(value, System.Globalization.CultureInfo.InvariantCulture) < minimum)
            {
                r.AddError($"{option.Name} must be at least {minimum}; got {value}.");
            }
        });
    }

    /// <summary>The option's value, or null when it is absent or did not parse (the parser reports that error itself,
    /// naming the option).</summary>
    public static T? TryValue<T>(System.CommandLine.Parsing.OptionResult result)
        where T : struct
    {
        try
        {
            return result.GetValueOrDefault<T?>();
        }
        catch (InvalidOperationException)
        {
            return null;
        }
    }

    /// <summary>Parses <paramref name="args"/>; on any parse or validation error prints the errors (each names its
    /// option) to stderr and returns <see cref="UsageError"/>; otherwise runs the command.</summary>
    public static async Task<int> InvokeAsync(RootCommand root, string[] args, TextWriter? error = null)
    {
        var parse = root.Parse(args);
        if (parse.Errors.Count > 0)
        {
            error ??= Console.Error;
            foreach (var e in parse.Errors)
            {
                await error.WriteLineAsync(e.Message);
            }

            await error.WriteLineAsync("Run with --help for the options.");
            return UsageError;
        }

        return await parse.InvokeAsync();
    }
}
