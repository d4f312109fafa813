namespace QuickSilver.Federation.Runtime;

/// <summary>Tests only: deterministic loss on a runtime's outgoing DATA datagrams (every n-th one never reaches the
/// socket), so a test can show what UDP loss does to a real-time flow and does not do to a bulk one. Off (n = 0) in
/// every product path.</summary>
internal static class LossInjection
{
    /// <summary>Counts a DATA datagram in <paramref name="sent"/>; true (and counted in <paramref name="dropped"/>) when
    /// it is the n-th and must be dropped.</summary>
    public static bool Drop(int everyNth, ref long sent, ref long dropped)
    {
        long n = Interlocked.Increment(ref sent);
        if (everyNth > 0 && n % everyNth == 0)
        {
            Interlocked.Increment(ref dropped);
            return true;
        }

        return false;
    }
}
