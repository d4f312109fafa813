using QuickSilver.Core.Alarms;
using QuickSilver.Core.Security;

namespace QuickSilver.Membership.Service;

/// <summary>
/// A node's side of the per-region keys (docs/security.md, "Keys per region and view"): installs into the stack's
/// <see cref="SecureTransport.ScopedKeys"/> the key of every region view the <see cref="GmsClient"/> accepts (its own
/// region's and those of the regions its groups map to, i.e. every region it receives from or sends into), so from then
/// on that region's datagrams are sealed under it and accepted only under that region's keys. Older keys of the region
/// stay accepted for <see cref="SecureTransport.KeyRetireDelay"/> after a newer one arrives (datagrams sealed before the
/// senders had the new view drain), then are retired; a region none of the node's groups maps to any more loses its
/// keys after the same delay. When the transport reports a key worn out (its datagram limit), asks the GMS for a new
/// one. When the GMS's epoch changes (a restarted single GMS numbers keys afresh) every key is dropped first.
/// Core thread only.
/// </summary>
internal sealed class RegionKeyKeeper
{
    private readonly SecureTransport _transport;
    private readonly GmsClient _client;
    private readonly IAlarmScheduler _scheduler;
    private readonly HashSet<uint> _removing = new();
    private ulong _epoch;

    public RegionKeyKeeper(SecureTransport transport, GmsClient client, IAlarmScheduler scheduler)
    {
        _transport = transport ?? throw new ArgumentNullException(nameof(transport));
        _client = client ?? throw new ArgumentNullException(nameof(client));
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _client.KeyWrap = transport.KeyWrap;
        _client.ViewsChanged += OnViewsChanged;
        _transport.KeyWornOut += (scope, _) => _client.RequestRekey(new RegionId(scope));
    }

    /// <summary>Keys installed so far.</summary>
    public long Installed { get; private set; }

    /// <summary>Keys not installed because the table held <see cref="ScopedKeyTable.MaxScopes"/> regions already.</summary>
    public long Refused { get; private set; }

    /// <summary>Keys retired after their delay (a newer key of their region had come).</summary>
    public long Retired { get; private set; }

    private void OnViewsChanged(NodeUpdate update)
    {
        var keys = _transport.ScopedKeys;
        if (_client.Epoch != _epoch)
        {
            if (_epoch != 0)
            {
                foreach (uint scope in keys.Scopes.ToList())
                {
                    keys.RemoveScope(scope);
                }
            }

            _epoch = _client.Epoch;
        }

        foreach (var view in update.RegionViews)
        {
            if (view.Key is not { } key || _client.FindRegion(view.Region) is not { } current || current.ViewNumber != view.ViewNumber)
            {
                continue; // no key, or an older view than the client holds
            }

            uint scope = view.Region.Value;
            bool hadKeys = keys.HasScope(scope);
            if (!hadKeys && keys.Scopes.Count >= ScopedKeyTable.MaxScopes)
            {
                Refused++; // the table's bound: this region's datagrams stay under the cluster key here
                continue;
            }

            if (!keys.Install(scope, key.Id, key.Material.AsSpan()))
            {
                continue;
            }

            Installed++;
            if (hadKeys)
            {
                uint keep = key.Id;
                _scheduler.ScheduleAfter(new Alarm(_ => Retired += keys.RetireBefore(scope, keep)), _transport.KeyRetireDelay);
            }
        }

        // Regions none of the node's groups maps to any more: their keys go after the same delay, if still unused then.
        var used = Used();
        foreach (uint scope in keys.Scopes)
        {
            if (!used.Contains(scope) && _removing.Add(scope))
            {
                _scheduler.ScheduleAfter(new Alarm(_ =>
                {
                    _removing.Remove(scope);
                    if (!Used().Contains(scope))
                    {
                        Retired += keys.IdsOf(scope).Length;
                        keys.RemoveScope(scope);
                    }
                }), _transport.KeyRetireDelay);
            }
        }
    }

    private HashSet<uint> Used()
    {
        var used = new HashSet<uint>();
        foreach (var group in _client.Groups)
        {
            foreach (var region in group.Regions)
            {
                used.Add(region.Region.Value);
            }
        }

        return used;
    }
}
