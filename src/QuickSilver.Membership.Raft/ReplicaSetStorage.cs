using System.Globalization;
using System.Net;
using DotNext.IO;
using DotNext.Net.Cluster.Consensus.Raft;
using DotNext.Net.Cluster.Consensus.Raft.Membership;
using Microsoft.Extensions.Logging;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Raft;

/// <summary>A replica set read from <see cref="ReplicaSetStorage.FileName"/>, sorted, with the log index of the
/// configuration entry it came from (0: none known, a file written before the index was kept, or <c>--peers</c>).</summary>
internal sealed record SavedReplicaSet(IReadOnlyList<NetAddress> Replicas, long Index);

/// <summary>
/// The replica set this replica belongs to, kept in its data directory (<see cref="FileName"/>): DotNext's own in-memory
/// configuration storage, which decodes configurations and versions them by the log index of their entry (it installs
/// one only if it is newer than the one it holds), with each configuration it installs written to the file, with that
/// index, before the engine acts on it. A restart seeds the storage from the file at that index (<see cref="SeedAsync"/>),
/// so a configuration entry that the log replays, or that a leader sends again, and that is not newer than the saved set
/// is refused by the engine's own rule, while a newer one replaces it.
/// <para>Before, the set was saved from the engine's member list at the 200 ms leader poll, without an index, and every
/// configuration entry the log replayed at start was installed over it while the engine was starting: a restarted replica
/// could come up with the set of four of an earlier entry instead of the set of three it had saved (and keep it, when
/// the engine loaded its configuration between the two entries; ReplicaSetChangeTests, 2 runs in 60).</para>
/// <para>The file is one address a line, then <c>index N</c>, written to a temporary file and renamed. Only a set this
/// replica belongs to is written, with others in it when it was given others (a joining replica not yet added must not
/// save itself alone: restarted, it would lead a GMS of one).</para>
/// </summary>
internal sealed class ReplicaSetStorage : IClusterConfigurationStorage<EndPoint>
{
    /// <summary>The file's name in the replica's data directory.</summary>
    public const string FileName = "replicas.txt";

    private const string IndexPrefix = "index ";

    private readonly InMemoryClusterConfigurationStorage<EndPoint> _engine;
    private readonly string _path;
    private readonly NetAddress _self;
    private readonly bool _givenOthers;
    private readonly ILogger _logger;
    private readonly uint _replicaId;
    private readonly SemaphoreSlim _saving = new(1, 1);
    private IReadOnlyList<NetAddress>? _written;

    /// <param name="directory">The replica's data directory.</param>
    /// <param name="self">This replica's address.</param>
    /// <param name="givenOthers">Whether the replica was given other replicas (<see cref="RaftGmsOptions.Peers"/>).</param>
    public ReplicaSetStorage(string directory, NetAddress self, bool givenOthers, ILogger logger, uint replicaId)
    {
        // The engine's own in-memory storage (it encodes addresses as the other replicas' engines do), from a
        // configuration made only to give it: the engine makes one when given none.
        _engine = (InMemoryClusterConfigurationStorage<EndPoint>)new RaftCluster.TcpConfiguration(self.ToIPEndPoint()) { ConfigurationStorage = null! }.ConfigurationStorage;
        _path = Path.Combine(directory, FileName);
        _self = self;
        _givenOthers = givenOthers;
        _logger = logger;
        _replicaId = replicaId;
    }

    /// <summary>The saved set; null when there is none (or it cannot be read: then <c>--peers</c> decides).</summary>
    public static SavedReplicaSet? Load(string directory)
    {
        string path = Path.Combine(directory, FileName);
        try
        {
            if (!File.Exists(path))
            {
                return null;
            }

            long index = 0;
            var list = new List<NetAddress>();
            foreach (var line in File.ReadAllLines(path).Select(l => l.Trim()).Where(l => l.Length > 0))
            {
                if (line.StartsWith(IndexPrefix, StringComparison.Ordinal))
                {
                    index = long.Parse(line.AsSpan(IndexPrefix.Length), NumberStyles.None, CultureInfo.InvariantCulture);
                }
                else
                {
                    list.Add(NetAddress.Parse(line));
                }
            }

            GmsOptions.ValidateReplicas(list, path);
            return list.Count > 0 ? new SavedReplicaSet([.. list.OrderBy(a => a.Ip).ThenBy(a => a.Port)], index) : null;
        }
        catch (Exception e) when (e is IOException or FormatException or OverflowException or ArgumentException or UnauthorizedAccessException)
        {
            return null;
        }
    }

    /// <summary>Before the engine starts: the set it starts from, as if installed from the configuration entry at the
    /// saved index, or <paramref name="peers"/> at index 0 (older than any entry, so the log's own configurations
    /// replace it) when nothing was saved.</summary>
    public async Task SeedAsync(SavedReplicaSet? saved, IEnumerable<NetAddress> peers, CancellationToken token)
    {
        IClusterConfigurationStorage<EndPoint> engine = _engine;
        var configuration = await engine.LoadConfigurationAsync(token).ConfigureAwait(false);
        foreach (var replica in saved?.Replicas ?? peers)
        {
            configuration = configuration.Add(replica.ToIPEndPoint());
        }

        await engine.SaveConfigurationAsync(configuration, saved?.Index ?? 0, token).ConfigureAwait(false);
        _written = saved?.Replicas;
    }

    /// <summary>The engine installs a configuration (from a committed log entry, or a leader's snapshot): the engine's
    /// storage decides whether it is newer; if so, it is written to the file before the engine goes on.</summary>
    public async ValueTask<bool> SaveConfigurationAsync<TConfiguration>(TConfiguration configuration, long configurationVersion, CancellationToken token = default)
        where TConfiguration : IDataTransferObject
    {
        await _saving.WaitAsync(token).ConfigureAwait(false);
        try
        {
            IClusterConfigurationStorage<EndPoint> engine = _engine;
            if (!await engine.SaveConfigurationAsync(configuration, configurationVersion, token).ConfigureAwait(false))
            {
                return false;
            }

            Write(Sorted((await engine.LoadConfigurationAsync(token).ConfigureAwait(false)).Members), configurationVersion);
            return true;
        }
        finally
        {
            _saving.Release();
        }
    }

    private static List<NetAddress> Sorted(IEnumerable<EndPoint> members)
        => [.. members.OfType<IPEndPoint>().Select(NetAddress.FromIPEndPoint).OrderBy(a => a.Ip).ThenBy(a => a.Port)];

    private void Write(List<NetAddress> replicas, long index)
    {
        if (replicas.Count == 0 || !replicas.Contains(_self) || (replicas.Count == 1 && _givenOthers)
            || (_written is not null && replicas.SequenceEqual(_written)))
        {
            return;
        }

        try
        {
            string temporary = _path + ".tmp";
            File.WriteAllLines(temporary, [.. replicas.Select(a => a.ToString()), IndexPrefix + index.ToString(CultureInfo.InvariantCulture)]);
            File.Move(temporary, _path, overwrite: true);
            _written = replicas;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            RaftLog.ReplicaSetNotSaved(_logger, _replicaId, _path, e.Message);
        }
    }

    ValueTask<(IDataTransferObject Configuration, long Version)> IClusterConfigurationStorage.LoadConfigurationAsync(CancellationToken token)
        => ((IClusterConfigurationStorage)_engine).LoadConfigurationAsync(token);

    ValueTask<IClusterConfiguration<EndPoint>> IClusterConfigurationStorage<EndPoint>.LoadConfigurationAsync(CancellationToken token)
        => ((IClusterConfigurationStorage<EndPoint>)_engine).LoadConfigurationAsync(token);

    public event Func<IClusterConfiguration<EndPoint>, CancellationToken, ValueTask> ConfigurationChanged
    {
        add => _engine.ConfigurationChanged += value;
        remove => _engine.ConfigurationChanged -= value;
    }

    public void Dispose()
    {
        _engine.Dispose();
        _saving.Dispose();
    }
}
