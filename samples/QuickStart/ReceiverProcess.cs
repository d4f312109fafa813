using System.Diagnostics;
using System.Globalization;
using QuickSilver.Core.Io;

namespace QuickSilver.Samples.QuickStart;

/// <summary>
/// A receiver child process seen from the parent: this same program started again with the hidden
/// <c>--role receiver</c>; stdout lines are parsed into counts, stderr lines are echoed with a prefix. Disposing closes
/// its stdin (the child's signal to exit) and kills it if it has not exited within a few seconds.
/// </summary>
internal sealed class ReceiverProcess : IDisposable
{
    private readonly Process _process;
    private readonly TaskCompletionSource<uint> _ready = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private long _delivered;
    private long _anomalies;
    private long _reports;
    private long _rate;

    private ReceiverProcess(int index, Process process)
    {
        Index = index;
        _process = process;
    }

    public int Index { get; }

    public string Name => string.Create(CultureInfo.InvariantCulture, $"r{Index}");

    public int ProcessId => _process.Id;

    /// <summary>Completes with the child's node id once it has joined its groups; fails if it exits first.</summary>
    public Task<uint> Ready => _ready.Task;

    public long Delivered => Interlocked.Read(ref _delivered);

    public long Anomalies => Interlocked.Read(ref _anomalies);

    /// <summary>Messages per second over the child's latest report interval, as the child measured it.</summary>
    public long Rate => Interlocked.Read(ref _rate);

    /// <summary>Report lines received so far.</summary>
    public long Reports => Interlocked.Read(ref _reports);

    public bool HasExited => _process.HasExited;

        public static ReceiverProcess Start(int index, NetAddress gms, IReadOnlyList<NetAddress> replicas, TimeSpan lifetime, byte[] secret)
    {
        var args = new List<string> { "--role", "receiver", "--gms", gms.ToString(), "--index", index.ToString(CultureInfo.InvariantCulture),
            "--lifetime", ((int)lifetime.TotalSeconds).ToString(CultureInfo.InvariantCulture) };
        if (replicas.Count > 0)
        {
            args.AddRange(["--replicas", string.Join(',', replicas)]);
        }

        var process = ChildProcess.Create(args, secret);
        var child = new ReceiverProcess(index, process);
        process.OutputDataReceived += (_, e) => child.OnLine(e.Data);
        process.ErrorDataReceived += (_, e) =>
        {
            if (e.Data is not null)
            {
                Console.Error.WriteLine($"[{child.Name}] {e.Data}");
            }
        };
        process.Exited += (_, _) => child._ready.TrySetException(new InvalidOperationException(
            $"receiver {child.Name} exited with code {process.ExitCode} before it was ready"));
        process.Start();
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return child;
    }

    private void OnLine(string? line)
    {
        var parts = line?.Split(' ');
        if (parts is ["ready", var id] && uint.TryParse(id, CultureInfo.InvariantCulture, out uint node))
        {
            _ready.TrySetResult(node);
        }
        else if (parts is ["report", var delivered, var anomalies, var rate]
                 && long.TryParse(delivered, CultureInfo.InvariantCulture, out long d)
                 && long.TryParse(anomalies, CultureInfo.InvariantCulture, out long a)
                 && long.TryParse(rate, CultureInfo.InvariantCulture, out long r))
        {
            Interlocked.Exchange(ref _delivered, d);
            Interlocked.Exchange(ref _anomalies, a);
            Interlocked.Exchange(ref _rate, r);
            Interlocked.Increment(ref _reports);
        }
    }

    public void Dispose() => ChildProcess.Stop(_process);
}
