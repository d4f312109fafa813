using System.Collections.Concurrent;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// A process running one of the repository's programs (qs or QuickStart) from its build output: the path is computed
/// from this test assembly's location (…/tests/QuickSilver.IntegrationTests/bin/CONFIG/TFM/) so it is the same
/// configuration the tests were built in. Disposing kills the process tree if it is still running.
/// </summary>
internal sealed class Tool : IDisposable
{
    private readonly Process _process;
    private readonly ConcurrentQueue<string> _stdout = new();
    private readonly ConcurrentQueue<string> _stderr = new();

    private Tool(Process process) => _process = process;

    public string Stdout => string.Join('\n', _stdout);

    public string Stderr => string.Join('\n', _stderr);

    public int ExitCode => _process.ExitCode;

    public int ProcessId => _process.Id;

    public bool HasExited => _process.HasExited;

    /// <summary>The last <paramref name="lines"/> lines of standard output.</summary>
    public string Tail(int lines) => string.Join('\n', _stdout.TakeLast(lines));

    public bool HasLine(string prefix) => _stdout.Any(l => l.StartsWith(prefix, StringComparison.Ordinal));

    public static Tool Qs(params string[] args) => Start(Program("tools/qs", "qs"), args);

    public static Tool QuickStart(params string[] args) => Start(Program("samples/QuickStart", "QuickStart"), args);

    public static Tool WorkerService(params string[] args) => Start(Program("samples/WorkerService", "WorkerService"), args);

    /// <summary>Waits for exit; false (and the process killed) if it has not exited within <paramref name="timeout"/>.</summary>
    public async Task<bool> WaitAsync(TimeSpan timeout)
    {
        try
        {
            await _process.WaitForExitAsync().WaitAsync(timeout);
            _process.WaitForExit(); // drains the redirected streams
            return true;
        }
        catch (TimeoutException)
        {
            Kill();
            return false;
        }
    }

    public async Task<bool> WaitForLineAsync(string prefix, TimeSpan timeout)
    {
        var clock = Stopwatch.StartNew();
        while (!HasLine(prefix) && !_process.HasExited && clock.Elapsed < timeout)
        {
            await Task.Delay(50);
        }

        return HasLine(prefix);
    }

    public static ushort FreeUdpPort()
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return (ushort)((IPEndPoint)socket.LocalEndPoint!).Port;
    }

    public void Dispose()
    {
        Kill();
        _process.Dispose();
    }

    private void Kill()
    {
        try
        {
            if (!_process.HasExited)
            {
                _process.Kill(entireProcessTree: true);
                _process.WaitForExit(5_000);
            }
        }
        catch (InvalidOperationException)
        {
            // Exited meanwhile.
        }
    }

    private static Tool Start(string dll, string[] args)
    {
        var start = new ProcessStartInfo(Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host ? host : "dotnet")
        {
            RedirectStandardInput = true,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        start.ArgumentList.Add(dll);
        foreach (var arg in args)
        {
            start.ArgumentList.Add(arg);
        }

        var process = new Process { StartInfo = start };
        var tool = new Tool(process);
        process.OutputDataReceived += (_, e) => { if (e.Data is not null) tool._stdout.Enqueue(e.Data); };
        process.ErrorDataReceived += (_, e) => { if (e.Data is not null) tool._stderr.Enqueue(e.Data); };
        process.Start();
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return tool;
    }

    private static string Program(string projectDir, string name)
    {
        var output = new DirectoryInfo(AppContext.BaseDirectory.TrimEnd(Path.DirectorySeparatorChar));
        string tfm = output.Name;
        string configuration = output.Parent!.Name;
        var root = output;
        while (root is not null && !File.Exists(Path.Combine(root.FullName, "QuickSilver.sln")))
        {
            root = root.Parent;
        }

        if (root is null)
        {
            throw new InvalidOperationException($"No QuickSilver.sln above {AppContext.BaseDirectory}.");
        }

        string dll = Path.Combine(root.FullName, projectDir, "bin", configuration, tfm, name + ".dll");
        return File.Exists(dll) ? dll : throw new FileNotFoundException($"{dll} is missing; build the solution in {configuration} first.", dll);
    }
}
