using System.CommandLine;
using QuickSilver.Core.Io;

namespace QuickSilver.Samples;

/// <summary>Command-line helpers shared by the QuickStart sample and the qs tool: options that validate themselves
/// with a message naming the option, and a runner that turns any parse error into exit code 2.</summary>
internal static class Cli
{
    public const int BadOptions = 2;

    public static Option<int> Int(string name, string description, int defaultValue, int min, int max)
    {
        // Parsed and range-checked in one place: a validator that read the value crashed the program on a non-number
        // (exit 134) instead of naming the option.
        return new Option<int>(name)
        {
            Description = $"{description} ({min:N0}..{max:N0})",
            DefaultValueFactory = _ => defaultValue,
            CustomParser = result =>
            {
                string text = result.Tokens.Count > 0 ? result.Tokens[0].Value : "";
                if (!int.TryParse(text, System.Globalization.NumberStyles.Integer, System.Globalization.CultureInfo.InvariantCulture, out int value))
                {
                    result.AddError($"{name} must be a whole number between {min:N0} and {max:N0}; got '{text}'.");
                    return defaultValue;
                }

                if (value < min || value > max)
                {
                    result.AddError($"{name} must be between {min:N0} and {max:N0}; got {value:N0}.");
                }

                return value;
            },
        };
    }

    /// <summary>An "a.b.c.d:port" option; unicast with a non-zero port, and loopback only when <paramref name="loopbackOnly"/>.</summary>
    public static Option<NetAddress> Address(string name, string description, bool loopbackOnly, NetAddress? defaultValue = null)
    {
        var option = new Option<NetAddress>(name)
        {
            Description = description,
            CustomParser = result =>
            {
                string text = result.Tokens.Count > 0 ? result.Tokens[0].Value : "";
                try
                {
                    var address = NetAddress.Parse(text);
                    if (address.IsMulticast || address.Port == 0 || (loopbackOnly && !address.IsLoopback))
                    {
                        result.AddError($"{name} must be a {(loopbackOnly ? "loopback" : "unicast")} address with a non-zero port (e.g. 127.0.0.1:47001); got '{text}'.");
                    }

                    return address;
                }
                catch (FormatException e)
                {
                    result.AddError($"{name}: {e.Message}");
                    return default;
                }
            },
        };
        if (defaultValue is { } value)
        {
            option.DefaultValueFactory = _ => value;
        }

        return option;
    }

    /// <summary>Parses <paramref name="args"/>; on errors prints them to stderr and returns <see cref="BadOptions"/>.</summary>
    public static async Task<int> RunAsync(RootCommand root, string[] args)
    {
        var parse = root.Parse(args);
        if (parse.Errors.Count > 0)
        {
            foreach (var error in parse.Errors)
            {
                await Console.Error.WriteLineAsync(error.Message).ConfigureAwait(false);
            }

            await Console.Error.WriteLineAsync("Run with --help to list the options.").ConfigureAwait(false);
            return BadOptions;
        }

        return await parse.InvokeAsync().ConfigureAwait(false);
    }
}
