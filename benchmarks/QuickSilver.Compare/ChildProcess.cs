using System.Diagnostics;
using System.Threading.Channels;

namespace QuickSilver.Compare;

/// <summary>A benchmark child process whose stdout lines arrive on a channel. Disposing kills it if it still runs.</summary>
internal sealed class ChildProcess : IDisposable
{
    private readonly Process _process;
    private readonly Channel<string> _lines = Channel.CreateUnbounded<string>();

    private ChildProcess(Process process, bool forwardStderr)
    {
        _process = process;
        _process.OutputDataReceived += (_, e) =>
        {
            if (e.Data is null)
            {
                _lines.Writer.TryComplete();
            }
            else
            {
                _lines.Writer.TryWrite(e.Data);
            }
        };
        // Drained so the child never blocks on a full pipe; this runner's own roles' diagnostics are passed on to the
        // run's log (JGroups' chatter about socket buffers is not).
        _process.ErrorDataReceived += (_, e) =>
        {
            if (forwardStderr && e.Data is { Length: > 0 } line)
            {
                Console.Error.WriteLine($"[child] {line}");
            }
        };
    }

    public static ChildProcess Start(string fileName, IEnumerable<string> arguments, bool forwardStderr = false)
    {
        var info = new ProcessStartInfo(fileName)
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            RedirectStandardInput = true,
            UseShellExecute = false,
        };
        foreach (var a in arguments)
        {
            info.ArgumentList.Add(a);
        }

        var child = new ChildProcess(new Process { StartInfo = info }, forwardStderr);
        child._process.Start();
        child._process.BeginOutputReadLine();
        child._process.BeginErrorReadLine();
        return child;
    }

    /// <summary>Starts this runner itself in a hidden role (<c>dotnet QuickSilver.Compare.dll role ...</c>).</summary>
    public static ChildProcess StartSelf(string role, IEnumerable<string> arguments)
    {
        string host = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } path ? path : "dotnet";
        return Start(host, [typeof(ChildProcess).Assembly.Location, "role", role, .. arguments], forwardStderr: true);
    }

    /// <summary>Runs a command to its end (killed after <paramref name="timeout"/>): its exit code (-1 if killed) and stdout lines.</summary>
    public static async Task<(int ExitCode, List<string> Lines)> RunToEndAsync(string fileName, IEnumerable<string> arguments, TimeSpan timeout)
    {
        using var child = Start(fileName, arguments);
        child.CloseInput();
        var lines = new List<string>();
        using var cts = new CancellationTokenSource(timeout);
        try
        {
            await foreach (var line in child._lines.Reader.ReadAllAsync(cts.Token))
            {
                lines.Add(line);
            }

            await child._process.WaitForExitAsync(cts.Token);
            return (child._process.ExitCode, lines);
        }
        catch (OperationCanceledException)
        {
            return (-1, lines);
        }
    }

    /// <summary>The next line starting with <paramref name="prefix"/>, or null when the child ended or time ran out.</summary>
    public async Task<string?> WaitForLineAsync(string prefix, CancellationToken cancellationToken)
    {
        try
        {
            await foreach (var line in _lines.Reader.ReadAllAsync(cancellationToken))
            {
                if (line.StartsWith(prefix, StringComparison.Ordinal))
                {
                    return line;
                }
            }
        }
        catch (OperationCanceledException)
        {
        }

        return null;
    }

    /// <summary>Sends the child SIGINT (<c>kill -INT</c>): tools that print their totals on Ctrl+C, such as sockperf's server.</summary>
    public async Task InterruptAsync()
    {
        if (_process.HasExited)
        {
            return;
        }

        await RunToEndAsync("kill", ["-INT", _process.Id.ToString(System.Globalization.CultureInfo.InvariantCulture)], TimeSpan.FromSeconds(5));
    }

    /// <summary>Closes the child's stdin: the QuickSilver receiver role takes it as "stop".</summary>
    public void CloseInput()
    {
        try
        {
            _process.StandardInput.Close();
        }
        catch (IOException)
        {
        }
    }

    public async Task WaitExitAsync(TimeSpan timeout)
    {
        using var cts = new CancellationTokenSource(timeout);
        try
        {
            await _process.WaitForExitAsync(cts.Token);
        }
        catch (OperationCanceledException)
        {
            Kill();
        }
    }

    private void Kill()
    {
        try
        {
            if (!_process.HasExited)
            {
                _process.Kill(entireProcessTree: true);
            }
        }
        catch (InvalidOperationException)
        {
        }
    }

    public void Dispose()
    {
        Kill();
        _process.Dispose();
    }
}
