using System.Buffers;
using DotNext.IO;
using DotNext.Net.Cluster.Consensus.Raft.StateMachine;

namespace QuickSilver.Membership.Raft;

/// <summary>
/// The engine's view of the GMS state: DotNext hands it committed log entries in order and asks it for snapshots; it
/// passes each to the replica's <see cref="Service.GmsServer"/> on the server's core thread (the one thread that owns
/// the state) and waits until that is done, so the state the engine snapshots is exactly the state at that entry.
/// A snapshot file is <see cref="GmsStateMachine.ExportSnapshot"/>'s bytes.
/// </summary>
internal sealed class GmsRaftStateMachine(DirectoryInfo location, RaftGmsLog log, int snapshotEvery) : SimpleStateMachine(location)
{
    protected override async ValueTask<bool> ApplyAsync(LogEntry entry, CancellationToken token)
    {
        long index = entry.Index;
        if (entry.IsConfiguration)
        {
            // The engine hands a configuration entry here only before it has started (it installs them itself after):
            // the log's replay at start. The replica-set storage installs it if it is newer than the set it holds, as the
            // engine would have.
            await log.ReplicaSet.SaveConfigurationAsync(entry, index, token).ConfigureAwait(false);
            await log.OnCoreAsync(server => server.OnApplied(index)).ConfigureAwait(false);
            return false;
        }

        if (!entry.TryGetPayload(out var payload) || payload.IsEmpty)
        {
            // The engine's own entries (a new leader's no-op, a configuration it installed itself): nothing to apply, but
            // reads count them (FollowerReadMaxLag compares log indices).
            await log.OnCoreAsync(server => server.OnApplied(index)).ConfigureAwait(false);
            return false;
        }

        var command = GmsStateMachine.TryDecode(payload.ToArray());
        if (command is null)
        {
            RaftLog.NotACommand(log.Logger, log.ReplicaId, entry.Index);
            await log.OnCoreAsync(server => server.OnApplied(index)).ConfigureAwait(false);
            return false;
        }

        await log.OnCoreAsync(server =>
        {
            server.OnCommitted(command);
            server.OnApplied(index);
        }).ConfigureAwait(false);
        return entry.Index % snapshotEvery == 0;
    }

    protected override async ValueTask PersistAsync(IAsyncBinaryWriter writer, CancellationToken token)
    {
        byte[] bytes = [];
        await log.OnCoreAsync(server => bytes = server.Machine.ExportSnapshot()).ConfigureAwait(false);
        await writer.Invoke(bytes, token).ConfigureAwait(false);
    }

    protected override async ValueTask RestoreAsync(FileInfo snapshotFile, CancellationToken token)
    {
        byte[] bytes = await File.ReadAllBytesAsync(snapshotFile.FullName, token).ConfigureAwait(false);
        await log.OnCoreAsync(server => server.Machine.ImportSnapshot(bytes)).ConfigureAwait(false);
        RaftLog.Restored(log.Logger, log.ReplicaId, snapshotFile.Name, bytes.Length);
    }
}
