using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Raft;

/// <summary>The Raft GMS log's messages, source-generated ([LoggerMessage]). Event ids 25x.</summary>
internal static partial class RaftLog
{
    [LoggerMessage(EventId = 250, Level = LogLevel.Information, Message = "GMS replica {Replica} at {Self}: Raft over TCP with {Peers}, data in {Directory}")]
    public static partial void Started(ILogger logger, uint replica, NetAddress self, IEnumerable<NetAddress> peers, string directory);

    [LoggerMessage(EventId = 251, Level = LogLevel.Debug, Message = "GMS replica {Replica}: proposal {Sequence} not committed: {Error}")]
    public static partial void NotCommitted(ILogger logger, uint replica, long sequence, string error);

    [LoggerMessage(EventId = 252, Level = LogLevel.Error, Message = "GMS replica {Replica}: log entry {Index} is not a GMS command; skipped")]
    public static partial void NotACommand(ILogger logger, uint replica, long index);

    [LoggerMessage(EventId = 253, Level = LogLevel.Information, Message = "GMS replica {Replica}: state restored from snapshot {File} ({Bytes} bytes)")]
    public static partial void Restored(ILogger logger, uint replica, string file, int bytes);

    [LoggerMessage(EventId = 254, Level = LogLevel.Warning, Message = "GMS replica {Replica}: refused a Raft peer that presented {What} (not the cluster secret's key); {Count} refused so far")]
    public static partial void PeerRefused(ILogger logger, uint replica, string what, long count);

    [LoggerMessage(EventId = 255, Level = LogLevel.Warning, Message = "GMS replica {Replica}: starting from the replica set saved on disk ({Saved}), not --peers ({Peers}): it changed at run time")]
    public static partial void ReplicaSetFromDisk(ILogger logger, uint replica, IEnumerable<NetAddress> saved, IEnumerable<NetAddress> peers);

    [LoggerMessage(EventId = 256, Level = LogLevel.Warning, Message = "GMS replica {Replica}: could not save the replica set in {File}: {Error}; a restart may start from an older set")]
    public static partial void ReplicaSetNotSaved(ILogger logger, uint replica, string file, string error);
}
