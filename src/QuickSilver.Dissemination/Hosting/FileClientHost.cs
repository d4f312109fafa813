using System.Net;
using System.Net.Sockets;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Dissemination.Hosting;

/// <summary>Progress of one client, read on its core.</summary>
/// <param name="DataTime">From the first data packet to completion (the data phase), or null before both.</param>
public sealed record ClientProgress(bool Complete, IReadOnlyList<FileProgress> Files, IReadOnlyList<string> NotFound, long PagesDecoded, long PagesRebuilt, long NaksSent, long DataPackets, ClientCounters Counters, TimeSpan? DataTime);

/// <summary>
/// The real client: a <see cref="DisseminationClient"/> on its own <see cref="QuickSilverCore"/>, its request channel
/// a framed TCP connection, its files in a <see cref="DiskPageStore"/> (resumable).
/// </summary>
public sealed class FileClientHost : IAsyncDisposable
{
    private readonly QuickSilverCore _core;
    private readonly FramedConnection _connection;
    private readonly DiskPageStore _store;
    private readonly CancellationTokenSource _stop = new();
    private DisseminationClient _client = null!;
    private Task _run = Task.CompletedTask;
    private readonly TaskCompletionSource _complete = new(TaskCreationOptions.RunContinuationsAsynchronously);

    private FileClientHost(QuickSilverCore core, FramedConnection connection, DiskPageStore store)
    {
        _core = core;
        _connection = connection;
        _store = store;
    }

    /// <summary>Connects to <paramref name="server"/> and requests <paramref name="names"/> into <paramref name="outDirectory"/>.</summary>
    public static async Task<FileClientHost> StartAsync(IPEndPoint server, IReadOnlyList<string> names, string outDirectory, ClientOptions options, NetAddress multicastInterface, CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        var store = new DiskPageStore(outDirectory);
        foreach (var name in names)
        {
            store.PathOf(name); // refuses names that would leave the directory, before anything starts
        }

        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        try
        {
            await socket.ConnectAsync(server, cancellationToken).ConfigureAwait(false);
        }
        catch
        {
            socket.Dispose();
            store.Dispose();
            throw;
        }

        var core = QuickSilverCore.Start(new CoreOptions { Name = "qs-files-client", ReceiveCoalescing = options.ReceiveCoalescing });
        var connection = new FramedConnection(socket, Wire.MaxFrameBytes);
        var host = new FileClientHost(core, connection, store);
        var udp = core.OpenUdp(new UdpEndpointOptions { Bind = new NetAddress(multicastInterface.Ip, 0), MulticastInterface = multicastInterface });
        await core.InvokeAsync(() =>
        {
            host._client = new DisseminationClient(options, names, core, udp, new Link(connection), store, new Random());
            host._client.FileCompleted += _ =>
            {
                if (host._client.IsComplete)
                {
                    host._complete.TrySetResult();
                }
            };
            return true;
        }).ConfigureAwait(false);
        host._run = connection.RunAsync(frame => core.TryPost(s => host._client.OnFrame((byte[])s!), frame), host._stop.Token);
        await core.InvokeAsync(() =>
        {
            host._client.Start();
            return true;
        }).ConfigureAwait(false);
        return host;
    }

    /// <summary>Completes when every requested file that exists is written and verified (a progress loop waits on it
    /// rather than noticing at its next poll).</summary>
    public Task Completion => _complete.Task;

    /// <summary>True once the request channel closed (the server went away or refused us).</summary>
    public bool Disconnected => _run.IsCompleted;

    public Task<ClientProgress> ProgressAsync() => _core.InvokeAsync(() =>
        new ClientProgress(_client.IsComplete, _client.Files.ToArray(), _client.NotFound, _client.Counters.PagesDecoded, _client.Counters.PagesRebuilt, _client.Counters.NaksSent, _client.Counters.DataPackets, _client.Counters.Snapshot(),
            _client.IsComplete && _client.FirstDataAt is { } first ? _client.CompletedAt - first : null));

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        _connection.Close();
        try
        {
            await _run.ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
        }

        _core.Dispose();
        await _connection.DisposeAsync().ConfigureAwait(false);
        _store.Dispose();
        _stop.Dispose();
    }

    private sealed class Link(FramedConnection connection) : IRequestLink
    {
        public void Send(ReadOnlySpan<byte> frame) => connection.TrySend(frame);
    }
}
