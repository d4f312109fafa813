using System.Diagnostics;
using System.Globalization;
using QuickSilver.Core.Io;

namespace QuickSilver.Samples.QuickStart;

/// <summary>
/// A GMS replica child process seen from the parent (<c>--gms-replicas N</c>): this program again with the hidden
/// <c>--role gms</c>. It prints "status leading" or "status following" several times a second; stderr lines are echoed
/// with a prefix.
/// </summary>
internal sealed class GmsReplicaProcess : IDisposable
{
    private readonly Process _process;
    private int _leading;

    private GmsReplicaProcess(int id, NetAddress address, Process process)
    {
        Id = id;
        Address = address;
        _process = process;
    }

    public int Id { get; }

    public NetAddress Address { get; }

    public string Name => string.Create(CultureInfo.InvariantCulture, $"gms{Id}");

    public int ProcessId => _process.Id;

    /// <summary>Whether the replica's latest status line said it leads.</summary>
    public bool IsLeading => Volatile.Read(ref _leading) == 1;

    public bool HasExited => _process.HasExited;

    public static GmsReplicaProcess Start(int id, IReadOnlyList<NetAddress> peers, string dataDirectory, NetAddress pool, TimeSpan lifetime, byte[] secret)
    {
        var process = ChildProcess.Create(
        [
            "--role", "gms", "--replica-id", id.ToString(CultureInfo.InvariantCulture), "--replicas", string.Join(',', peers),
            "--data", dataDirectory, "--pool", pool.ToString(), "--lifetime", ((int)lifetime.TotalSeconds).ToString(CultureInfo.InvariantCulture),
        ], secret);
        var child = new GmsReplicaProcess(id, peers[id - 1], process);
        process.OutputDataReceived += (_, e) =>
        {
            if (e.Data is "status leading" or "status following")
            {
                Volatile.Write(ref child._leading, e.Data == "status leading" ? 1 : 0);
            }
        };
        process.ErrorDataReceived += (_, e) =>
        {
            if (e.Data is not null)
            {
                Console.Error.WriteLine($"[{child.Name}] {e.Data}");
            }
        };
        process.Start();
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return child;
    }

    /// <summary>Kills the process at once (a crash, as far as the other replicas and the nodes can tell).</summary>
    public void Kill()
    {
        _process.Kill(entireProcessTree: true);
        _process.WaitForExit(TimeSpan.FromSeconds(5));
        Volatile.Write(ref _leading, 0);
    }

    public void Dispose() => ChildProcess.Stop(_process);
}
