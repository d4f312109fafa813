using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Dissemination.Hosting;

/// <summary>
/// The real server: a <see cref="DisseminationServer"/> on its own <see cref="QuickSilverCore"/> (one thread owns
/// it), multicasting on a UDP endpoint of that core, with a TCP listener whose connections are framed request
/// channels. Network I/O threads only copy frames and post them to the core.
/// </summary>
public sealed class FileServerHost : IAsyncDisposable
{
    private readonly QuickSilverCore _core;
    private readonly DiskPageSource _source;
    private readonly TcpListener _listener;
    private readonly ConcurrentDictionary<int, FramedConnection> _connections = new();
    private readonly CancellationTokenSource _stop = new();
    private readonly List<Task> _tasks = new();
    private DisseminationServer _server = null!;
    private int _nextId;

    private FileServerHost(QuickSilverCore core, DiskPageSource source, TcpListener listener)
    {
        _core = core;
        _source = source;
        _listener = listener;
    }

    public IPEndPoint LocalEndPoint => (IPEndPoint)_listener.LocalEndpoint;

    public Pages.FileCatalog Catalog => _source.Catalog;

    /// <summary>Scans <paramref name="directory"/>, starts the core and the multicast endpoint, and listens on
    /// <paramref name="listen"/> (port 0 picks one).</summary>
    public static async Task<FileServerHost> StartAsync(string directory, ServerOptions options, IPEndPoint listen, NetAddress multicastInterface, CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        var source = await DiskPageSource.ScanAsync(directory, options.Pages, cancellationToken).ConfigureAwait(false);
        var core = QuickSilverCore.Start(new CoreOptions { Name = "qs-files-server" });
        var listener = new TcpListener(listen);
        var host = new FileServerHost(core, source, listener);
        try
        {
            var udp = core.OpenUdp(new UdpEndpointOptions { Bind = new NetAddress(multicastInterface.Ip, 0), MulticastInterface = multicastInterface, SendQueueCapacity = 4096 });
            await core.InvokeAsync(() => host._server = new DisseminationServer(options, source.Catalog, source, core, udp, new Links(host))).ConfigureAwait(false);
            listener.Start();
        }
        catch
        {
            await host.DisposeAsync().ConfigureAwait(false);
            throw;
        }

        host._tasks.Add(host.AcceptLoopAsync());
        return host;
    }

    /// <summary>A snapshot of the server's counters and client count, read on the core.</summary>
    public Task<(ServerCounters Counters, int Clients, IReadOnlyDictionary<string, long> Drops)> SnapshotAsync() => _core.InvokeAsync(() =>
    {
        var copy = _server.Counters.Snapshot().WithInterval(_server.ChannelInterval);
        var drops = Enum.GetValues<DisseminationDrop>().Where(r => _server.Drops[r] > 0).ToDictionary(r => r.ToString(), r => _server.Drops[r]);
        return (copy, _server.ClientCount, (IReadOnlyDictionary<string, long>)drops);
    });

    private async Task AcceptLoopAsync()
    {
        try
        {
            while (!_stop.IsCancellationRequested)
            {
                var socket = await _listener.AcceptSocketAsync(_stop.Token).ConfigureAwait(false);
                int id = Interlocked.Increment(ref _nextId);
                var connection = new FramedConnection(socket, Wire.MaxFrameBytes);
                _connections[id] = connection;
                _core.TryPost(s => _server.OnConnected((int)s!), id);
                lock (_tasks)
                {
                    _tasks.RemoveAll(t => t.IsCompleted);
                    _tasks.Add(ServeAsync(id, connection));
                }
            }
        }
        catch (OperationCanceledException)
        {
        }
        catch (SocketException)
        {
        }
        catch (ObjectDisposedException)
        {
        }
    }

    private async Task ServeAsync(int id, FramedConnection connection)
    {
        await connection.RunAsync(frame => _core.TryPost(s => _server.OnFrame(id, (byte[])s!), frame), _stop.Token).ConfigureAwait(false);
        _connections.TryRemove(id, out _);
        _core.TryPost(s => _server.OnDisconnected((int)s!), id);
        await connection.DisposeAsync().ConfigureAwait(false);
    }

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        _listener.Stop();
        foreach (var c in _connections.Values)
        {
            c.Close();
        }

        Task[] tasks;
        lock (_tasks)
        {
            tasks = _tasks.ToArray();
        }

        await Task.WhenAll(tasks).ConfigureAwait(false);
        _core.Dispose();
        _source.Dispose();
        _stop.Dispose();
    }

    /// <summary>Called on the core thread by the server.</summary>
    private sealed class Links(FileServerHost host) : IClientLinks
    {
        public void Send(int client, ReadOnlySpan<byte> frame)
        {
            if (host._connections.TryGetValue(client, out var c))
            {
                c.TrySend(frame);
            }
        }

        public void Close(int client)
        {
            if (host._connections.TryGetValue(client, out var c))
            {
                c.Close();
            }
        }
    }
}
