using System.Runtime.InteropServices;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Security;

/// <summary>
/// Drops verified datagrams that are far older than what their sender has sent since: per sending endpoint (source
/// address and the salt of its sealer) the highest nonce counter verified so far; a datagram whose counter is more
/// than <see cref="Window"/> below it is a replay. Within the window nothing is remembered per datagram: duplicates
/// pass and the layers' own sequence numbers deal with them (docs/security.md says what that leaves open). Bounded:
/// at most <see cref="MaxSources"/> endpoints; at the bound the oldest-inserted is forgotten (FIFO, counted). One
/// dictionary lookup per datagram, no allocation once the table has grown. Core thread only.
/// </summary>
public sealed class ReplayWindow
{
    private readonly Dictionary<Source, ulong> _highest;
    private readonly Queue<Source> _order;

    public ReplayWindow(ulong window, int maxSources)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxSources, 1);
        Window = window;
        MaxSources = maxSources;
        _highest = new Dictionary<Source, ulong>(maxSources);
        _order = new Queue<Source>(maxSources);
    }

    public ulong Window { get; }

    public int MaxSources { get; }

    /// <summary>Endpoints remembered now.</summary>
    public int Sources => _highest.Count;

    /// <summary>Endpoints forgotten at the bound.</summary>
    public long Evicted { get; private set; }

    /// <summary>Records a verified datagram's counter; false when it is a replay (more than <see cref="Window"/> behind).</summary>
    public bool Accept(NetAddress from, uint salt, ulong counter)
    {
        var source = new Source(from, salt);
        ref ulong highest = ref CollectionsMarshal.GetValueRefOrNullRef(_highest, source);
        if (!System.Runtime.CompilerServices.Unsafe.IsNullRef(ref highest))
        {
            if (counter > highest)
            {
                highest = counter;
                return true;
            }

            return highest - counter <= Window;
        }

        if (_highest.Count >= MaxSources && _order.TryDequeue(out var oldest))
        {
            _highest.Remove(oldest);
            Evicted++;
        }

        _highest.Add(source, counter);
        _order.Enqueue(source);
        return true;
    }

    private readonly record struct Source(NetAddress Address, uint Salt);
}
