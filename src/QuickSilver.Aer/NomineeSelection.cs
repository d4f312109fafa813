using QuickSilver.Core.Io;

namespace QuickSilver.Aer;

/// <summary>
/// NCA nominee selection (§4.2.1) at a repair server or the source: the latest CSM from each child (a receiver, or a
/// repair server forwarding the worst below it), forgotten after <see cref="AerOptions.CsmTimeout"/> or when it says it
/// is leaving; the worst is the one with the highest g = T·√p (equation 4.2; ties go to the larger T). Bounded by
/// <c>capacity</c> children (further ones are refused and counted by the caller). Core thread only.
/// </summary>
public sealed class NomineeSelection
{
    private readonly Dictionary<NetAddress, Entry> _byChild = new();
    private readonly int _capacity;
    private readonly TimeSpan _timeout;
    private NetAddress _excluded;
    private TimeSpan _excludedUntil;

    public NomineeSelection(int capacity, TimeSpan timeout)
    {
        _capacity = capacity;
        _timeout = timeout;
    }

    public int Count => _byChild.Count;

    /// <summary>Records <paramref name="csm"/> as <paramref name="child"/>'s latest; false when the table is full.</summary>
    public bool OnCsm(NetAddress child, in CongestionStateMessage csm, TimeSpan now)
    {
        if (csm.Leaving)
        {
            Forget(csm.Receiver);
            return true;
        }

        if (!_byChild.ContainsKey(child) && _byChild.Count >= _capacity)
        {
            Expire(now);
            if (_byChild.Count >= _capacity)
            {
                return false;
            }
        }

        _byChild[child] = new Entry(csm, now);
        return true;
    }

    /// <summary>Forgets every entry that names <paramref name="receiver"/> (it left, or as nominee it stopped answering).</summary>
    public void Forget(NetAddress receiver)
    {
        List<NetAddress>? gone = null;
        foreach (var (child, entry) in _byChild)
        {
            if (entry.Csm.Receiver == receiver)
            {
                (gone ??= new()).Add(child);
            }
        }

        if (gone is not null)
        {
            foreach (var child in gone)
            {
                _byChild.Remove(child);
            }
        }
    }

    /// <summary>Ignores CSMs naming <paramref name="receiver"/> until <paramref name="until"/> (a nominee that failed).</summary>
    public void Exclude(NetAddress receiver, TimeSpan until)
    {
        Forget(receiver);
        _excluded = receiver;
        _excludedUntil = until;
    }

    /// <summary>The worst receiver's CSM among the live entries, or null.</summary>
    public CongestionStateMessage? Worst(TimeSpan now)
    {
        Expire(now);
        CongestionStateMessage? worst = null;
        foreach (var entry in _byChild.Values)
        {
            var csm = entry.Csm;
            if (csm.Receiver == _excluded && now < _excludedUntil)
            {
                continue;
            }

            if (worst is not { } w || csm.G > w.G || (csm.G == w.G && csm.RttMicros > w.RttMicros))
            {
                worst = csm;
            }
        }

        return worst;
    }

    /// <summary>The latest CSM naming <paramref name="receiver"/>, or null.</summary>
    public CongestionStateMessage? Find(NetAddress receiver)
    {
        foreach (var entry in _byChild.Values)
        {
            if (entry.Csm.Receiver == receiver)
            {
                return entry.Csm;
            }
        }

        return null;
    }

    private void Expire(TimeSpan now)
    {
        List<NetAddress>? gone = null;
        foreach (var (child, entry) in _byChild)
        {
            if (now - entry.Heard > _timeout)
            {
                (gone ??= new()).Add(child);
            }
        }

        if (gone is not null)
        {
            foreach (var child in gone)
            {
                _byChild.Remove(child);
            }
        }
    }

    private readonly record struct Entry(CongestionStateMessage Csm, TimeSpan Heard);
}
