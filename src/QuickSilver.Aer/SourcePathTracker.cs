using QuickSilver.Core.Io;

namespace QuickSilver.Aer;

/// <summary>
/// What a receiver or repair server learns from SPMs (AER §4.1.1): its nearest upstream repair server is the node
/// that rewrote the deepest SPM it has heard within <see cref="AerOptions.SpmTimeout"/>; when none has been heard (no
/// repair server above it, or it crashed and its SPMs stopped) the upstream is the source itself. An upstream its owner
/// declared failed is passed over until its blacklisting ends. Bounded: one entry per depth (0..<see cref="AerWire.MaxDepth"/>).
/// </summary>
public sealed class SourcePathTracker
{
    private readonly NetAddress _source;
    private readonly TimeSpan _timeout;
    private readonly Hop?[] _byDepth = new Hop?[AerWire.MaxDepth + 1];
    private NetAddress _blacklisted;
    private TimeSpan _blacklistedUntil;

    public SourcePathTracker(NetAddress source, TimeSpan timeout)
    {
        _source = source;
        _timeout = timeout;
    }

    /// <summary>The highest sequence number any SPM announced.</summary>
    public long HighestSeq { get; private set; }

    /// <summary>The lowest packet the source can still repair (from its SPMs; 1 until one says otherwise).</summary>
    public long LowestAvailable { get; private set; } = 1;

    public bool HeardAny { get; private set; }

    /// <summary>Takes an SPM that <paramref name="from"/> sent; false when it is not plausible (the caller counts it).</summary>
    public bool OnSpm(NetAddress from, in SourcePathMessage spm, TimeSpan now)
    {
        if (spm.Source != _source || (spm.Depth == 0 ? from != _source : spm.Upstream != from))
        {
            return false;
        }

        var hop = _byDepth[spm.Depth];
        if (hop is not null && hop.Address == from && spm.SpmSeq < hop.SpmSeq)
        {
            return true; // an older one, overtaken
        }

        _byDepth[spm.Depth] = new Hop(from, spm.SpmSeq, now, spm.PathRttMicros);
        HighestSeq = Math.Max(HighestSeq, spm.HighestSeq);
        if (spm.Depth == 0)
        {
            LowestAvailable = Math.Max(LowestAvailable, spm.LowestAvailable);
        }

        HeardAny = true;
        return true;
    }

    /// <summary>The nearest live upstream: its address, depth (0 = the source) and the source's round trip to it.</summary>
    public (NetAddress Address, int Depth, int PathRttMicros) Upstream(TimeSpan now)
    {
        for (int d = _byDepth.Length - 1; d >= 1; d--)
        {
            var hop = _byDepth[d];
            if (hop is null)
            {
                continue;
            }

            if (now - hop.Heard > _timeout)
            {
                _byDepth[d] = null;
                continue;
            }

            if (hop.Address == _blacklisted && now < _blacklistedUntil)
            {
                continue;
            }

            return (hop.Address, d, hop.PathRttMicros);
        }

        return (_source, 0, 0);
    }

    /// <summary>Whether <paramref name="address"/> is the source or an upstream heard recently (data, repairs and NAK
    /// subcasts are accepted only from these).</summary>
    public bool IsUpstream(NetAddress address, TimeSpan now)
    {
        if (address == _source)
        {
            return true;
        }

        foreach (var hop in _byDepth)
        {
            if (hop is not null && hop.Address == address && now - hop.Heard <= _timeout * 4)
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>Passes over <paramref name="address"/> until <paramref name="until"/> (its owner saw it fail to repair).</summary>
    public void Blacklist(NetAddress address, TimeSpan until)
    {
        _blacklisted = address;
        _blacklistedUntil = until;
    }

    private sealed record Hop(NetAddress Address, long SpmSeq, TimeSpan Heard, int PathRttMicros);
}
