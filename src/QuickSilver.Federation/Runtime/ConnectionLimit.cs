using System.Net.Sockets;

namespace QuickSilver.Federation.Runtime;

/// <summary>Bounds the accepted TCP connections a runtime serves at once (peering links and bulk data channels): each
/// accepted socket is served on the thread pool while fewer than <c>bound()</c> are open, else closed at once.</summary>
internal sealed class ConnectionLimit(Func<int> bound)
{
    private int _open;

    /// <summary>Serves <paramref name="socket"/> with <paramref name="serve"/>; false (the socket closed) at the bound.</summary>
    public bool TryServe(Socket socket, Func<Socket, Task> serve)
    {
        if (Interlocked.Increment(ref _open) > bound())
        {
            Interlocked.Decrement(ref _open);
            socket.Dispose();
            return false;
        }

        _ = Task.Run(async () =>
        {
            try
            {
                await serve(socket).ConfigureAwait(false);
            }
            finally
            {
                Interlocked.Decrement(ref _open);
            }
        });
        return true;
    }
}
