using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// A deterministic virtual-time world for GMS tests: one alarm queue for everyone and an in-memory reliable control
/// network with a fixed one-way latency. Endpoints can be cut off (their messages vanish, and after
/// <see cref="FailureNotice"/> the other side is told the peer failed), as a crashed node or a broken link would.
/// </summary>
internal sealed class VirtualWorld : IAlarmScheduler
{
    private readonly VirtualScheduler _time = new();
    private readonly Dictionary<NetAddress, Endpoint> _endpoints = new();

    public TimeSpan Now => _time.Now;

    public TimeSpan Latency { get; set; } = TimeSpan.FromMilliseconds(1);

    public TimeSpan FailureNotice { get; set; } = TimeSpan.FromSeconds(2);

    /// <summary>The largest message an endpoint accepts (reliable unicast over one datagram has such a limit).</summary>
    public int MaxMessageBytes { get; set; } = 1 << 20;

    public void Schedule(Alarm alarm, TimeSpan deadline) => _time.Schedule(alarm, deadline);

    public bool Cancel(Alarm alarm) => _time.Cancel(alarm);

    public void RunFor(TimeSpan duration) => _time.RunFor(duration);

    public bool RunUntil(Func<bool> condition, TimeSpan limit) => _time.RunUntil(condition, limit);

    public IControlChannel Channel(NetAddress address)
    {
        var endpoint = new Endpoint(this, address);
        _endpoints[address] = endpoint;
        return endpoint;
    }

    /// <summary>Cuts <paramref name="address"/> off: nothing it sends or is sent arrives, and its peers are told it failed.</summary>
    public void CutOff(NetAddress address)
    {
        var endpoint = _endpoints[address];
        endpoint.Down = true;
        foreach (var other in _endpoints.Values.Where(e => e != endpoint && e.Peers.Contains(address)))
        {
            After(FailureNotice, () => other.OnPeerFailed?.Invoke(address));
        }
    }

    public void Restore(NetAddress address) => _endpoints[address].Down = false;

    /// <summary>Messages from the first address to the second for which this returns true vanish (a partition between
    /// two endpoints that both stay up; no failure is reported).</summary>
    public Func<NetAddress, NetAddress, bool>? Drop { get; set; }

    /// <summary>Delivers raw bytes to <paramref name="to"/> as if <paramref name="from"/> sent them.</summary>
    public void Inject(NetAddress from, NetAddress to, byte[] bytes)
        => After(Latency, () => _endpoints[to].OnMessage?.Invoke(from, bytes));

    private void After(TimeSpan delay, Action action) => _time.After(delay, action);

    private sealed class Endpoint(VirtualWorld world, NetAddress address) : IControlChannel
    {
        public bool Down { get; set; }
        public HashSet<NetAddress> Peers { get; } = new();
        public Action<NetAddress, ReadOnlySpan<byte>>? OnMessage;
        public Action<NetAddress>? OnPeerFailed;

        public int MaxMessageBytes => world.MaxMessageBytes;

        public bool Send(NetAddress peer, ReadOnlySpan<byte> message)
        {
            if (message.Length > world.MaxMessageBytes)
            {
                throw new ArgumentException($"Message of {message.Length} bytes exceeds the channel's {world.MaxMessageBytes}.", nameof(message));
            }

            if (Down)
            {
                return true; // the crashed side does not know it
            }

            Peers.Add(peer);
            var copy = message.ToArray();
            world.After(world.Latency, () =>
            {
                if (world._endpoints.TryGetValue(peer, out var target) && !target.Down && !Down && world.Drop?.Invoke(address, peer) != true)
                {
                    target.Peers.Add(address);
                    target.OnMessage?.Invoke(address, copy);
                }
            });
            return true;
        }

        public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed)
        {
            OnMessage = onMessage;
            OnPeerFailed = onPeerFailed;
        }

        public void Forget(NetAddress peer) => Peers.Remove(peer);
    }
}
