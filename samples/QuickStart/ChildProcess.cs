using System.Diagnostics;
using System.Reflection;

namespace QuickSilver.Samples.QuickStart;

/// <summary>What the demo's child processes (receivers, GMS replicas) share: how the parent starts this program again,
/// how it stops a child, and how a child notices that its parent is gone.</summary>
internal static class ChildProcess
{
    /// <summary>This program again, with <paramref name="args"/>, stdin/stdout/stderr redirected, and the demo's cluster
    /// secret in its environment (not on its command line, which other users of the machine can read).</summary>
    public static Process Create(IEnumerable<string> args, byte[] secret)
    {
        string host = Environment.ProcessPath ?? throw new InvalidOperationException("Cannot tell which executable is running.");
        var start = new ProcessStartInfo(host);
        if (Path.GetFileNameWithoutExtension(host).Equals("dotnet", StringComparison.OrdinalIgnoreCase))
        {
            start.ArgumentList.Add(Assembly.GetEntryAssembly()!.Location); // run through the dotnet host: "dotnet QuickStart.dll"
        }

        foreach (var arg in args)
        {
            start.ArgumentList.Add(arg);
        }

        start.Environment[Demo.SecretVariable] = Convert.ToBase64String(secret);
        start.RedirectStandardInput = true;
        start.RedirectStandardOutput = true;
        start.RedirectStandardError = true;
        start.UseShellExecute = false;
        return new Process { StartInfo = start, EnableRaisingEvents = true };
    }

    /// <summary>Closes the child's stdin (its signal to exit), kills it if it has not exited within a few seconds, and
    /// disposes it.</summary>
    public static void Stop(Process process)
    {
        try
        {
            if (!process.HasExited)
            {
                process.StandardInput.Close();
                if (!process.WaitForExit(TimeSpan.FromSeconds(5)))
                {
                    process.Kill(entireProcessTree: true);
                    process.WaitForExit(TimeSpan.FromSeconds(5));
                }
            }
        }
        catch (Exception e) when (e is InvalidOperationException or IOException or System.ComponentModel.Win32Exception)
        {
            // Already gone.
        }

        process.Dispose();
    }

    /// <summary>Child side: cancels <paramref name="stop"/> when stdin closes (the parent stopped or died).</summary>
    public static void CancelWhenStdinCloses(CancellationTokenSource stop)
    {
        var stdin = new Thread(() =>
        {
            while (Console.In.ReadLine() is not null)
            {
            }

            stop.Cancel();
        }) { IsBackground = true, Name = "stdin watch" };
        stdin.Start();
    }
}
