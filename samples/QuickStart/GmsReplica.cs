using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Raft;

namespace QuickSilver.Samples.QuickStart;

/// <summary>
/// The GMS replica child role (<c>--gms-replicas N</c>): one replica of a replicated GMS on DotNext Raft
/// (docs/membership.md, "Replicated GMS"), its log and snapshots in a directory the parent made. Prints
/// "status leading" or "status following" every 200 ms on stdout; exits when its stdin closes or after <c>lifetime</c>.
/// </summary>
internal static class GmsReplica
{
    public static async Task<int> RunAsync(int id, IReadOnlyList<NetAddress> peers, string dataDirectory, NetAddress pool, TimeSpan lifetime)
    {
        using var stop = new CancellationTokenSource(lifetime);
        ChildProcess.CancelWhenStdinCloses(stop);
        var security = new DatagramSecurityOptions { Mode = DatagramSecurity.Authenticate, ClusterSecret = Demo.SecretFromPublisher() };
        try
        {
            await using var replica = await ReplicatedGms.StartAsync(
                new RaftGmsOptions { Id = id, Peers = peers, DataDirectory = dataDirectory }, Demo.GmsOptions(pool), security, Demo.Logging, stop.Token);
            while (!stop.IsCancellationRequested)
            {
                var status = await replica.GetStatusAsync();
                Console.WriteLine(status.IsLeading ? "status leading" : "status following");
                await Task.Delay(TimeSpan.FromMilliseconds(200), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
            }

            return 0;
        }
        catch (OperationCanceledException)
        {
            return 0;
        }
    }
}
