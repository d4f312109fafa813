using QuickSilver.Transport.Framing;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Text.Json;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;

namespace QuickSilver.Federation.Runtime;

/// <summary>
/// A gateway's admin endpoint, loopback only: one request line per TCP connection, one JSON line back, then close.
/// <c>sessions</c> → the <see cref="GatewaySnapshot"/>; <c>join &lt;url&gt;</c> → the mediator's answer for a client of
/// this island (kind, addresses, reason); <c>leave &lt;url&gt;</c> → <c>{"ok":true}</c>. A line longer than 2,048 bytes,
/// an unknown verb or a bad session name gets <c>{"error":"…"}</c>. At most 8 requests at a time.
/// </summary>
public sealed class AdminEndpoint : IAsyncDisposable
{
    private const int MaxLine = 2048;
    private static readonly JsonSerializerOptions Json = new(JsonSerializerDefaults.Web);

    private readonly GatewayRuntime _runtime;
    private readonly Socket _listener;
    private readonly CancellationTokenSource _stop = new();
    private readonly SemaphoreSlim _slots = new(8);
    private Task? _accept;

    public AdminEndpoint(GatewayRuntime runtime, IPEndPoint listen)
    {
        ArgumentNullException.ThrowIfNull(listen);
        if (!IPAddress.IsLoopback(listen.Address))
        {
            throw new ArgumentOutOfRangeException(nameof(listen), $"the admin endpoint listens on loopback only; got {listen.Address}");
        }

        _runtime = runtime;
        _listener = new Socket(listen.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        _listener.Bind(listen);
        _listener.Listen(16);
        Endpoint = (IPEndPoint)_listener.LocalEndPoint!;
    }

    public IPEndPoint Endpoint { get; }

    public void Start() => _accept = Task.Run(AcceptLoopAsync);

    /// <summary>Sends one request line to a gateway's admin endpoint and returns the JSON line it answers.</summary>
    public static async Task<string> RequestAsync(IPEndPoint admin, string line, TimeSpan timeout)
    {
        using var cts = new CancellationTokenSource(timeout);
        using var socket = new Socket(admin.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        await socket.ConnectAsync(admin, cts.Token).ConfigureAwait(false);
        await socket.SendAsync(Encoding.UTF8.GetBytes(line + "\n"), cts.Token).ConfigureAwait(false);
        socket.Shutdown(SocketShutdown.Send);
        var stream = new MemoryStream();
        var buffer = new byte[16_384];
        int n;
        while ((n = await socket.ReceiveAsync(buffer, SocketFlags.None, cts.Token).ConfigureAwait(false)) > 0)
        {
            stream.Write(buffer, 0, n);
            if (stream.Length > 16 << 20)
            {
                throw new InvalidDataException("admin answer longer than 16 MiB");
            }
        }

        return Encoding.UTF8.GetString(stream.ToArray()).TrimEnd();
    }

    private Task AcceptLoopAsync() => TcpAcceptor.RunAsync(_listener, socket =>
    {
        if (!_slots.Wait(0))
        {
            socket.Dispose();
            return;
        }

        _ = Task.Run(async () =>
        {
            try
            {
                await ServeAsync(socket).ConfigureAwait(false);
            }
            finally
            {
                _slots.Release();
                socket.Dispose();
            }
        });
    }, _stop.Token);

    private async Task ServeAsync(Socket socket)
    {
        using var cts = CancellationTokenSource.CreateLinkedTokenSource(_stop.Token);
        cts.CancelAfter(TimeSpan.FromSeconds(10));
        string answer;
        try
        {
            string? line = await ReadLineAsync(socket, cts.Token).ConfigureAwait(false);
            answer = line is null ? Error($"request line missing or longer than {MaxLine} bytes") : await AnswerAsync(line.Trim()).ConfigureAwait(false);
            await socket.SendAsync(Encoding.UTF8.GetBytes(answer + "\n"), cts.Token).ConfigureAwait(false);
        }
        catch (Exception e) when (e is OperationCanceledException or SocketException or ObjectDisposedException)
        {
        }
    }

    private async Task<string> AnswerAsync(string line)
    {
        var parts = line.Split(' ', 2, StringSplitOptions.TrimEntries);
        switch (parts[0])
        {
            case "sessions":
                return JsonSerializer.Serialize(await _runtime.SnapshotAsync().ConfigureAwait(false), Json);
            case "join" or "leave" when parts.Length == 2:
                if (!SessionName.TryParse(parts[1], out var session, out string error))
                {
                    return Error(error);
                }

                if (parts[0] == "leave")
                {
                    _runtime.Post(() => _runtime.Gateway.RecvdLeaveRequest(session));
                    return "{\"ok\":true}";
                }

                var reply = new TaskCompletionSource<MediatorReply>(TaskCreationOptions.RunContinuationsAsynchronously);
                _runtime.Post(() => _runtime.Gateway.RecvdJoinRequest(new JoinRequest(session, r => reply.TrySetResult(r))));
                var done = await reply.Task.WaitAsync(TimeSpan.FromSeconds(8)).ConfigureAwait(false);
                return JsonSerializer.Serialize(new { kind = done.Kind.ToString(), addresses = done.Addresses, redirectTo = done.RedirectTo.Value, reason = done.Reason }, Json);
            default:
                return Error("expected 'sessions', 'join <bfed url>' or 'leave <bfed url>'");
        }
    }

    private static string Error(string message) => JsonSerializer.Serialize(new { error = message }, Json);

    private static async Task<string?> ReadLineAsync(Socket socket, CancellationToken token)
    {
        var buffer = new byte[MaxLine + 1];
        int length = 0;
        while (length <= MaxLine)
        {
            int n = await socket.ReceiveAsync(buffer.AsMemory(length), SocketFlags.None, token).ConfigureAwait(false);
            if (n == 0)
            {
                break;
            }

            length += n;
            int newline = Array.IndexOf(buffer, (byte)'\n', 0, length);
            if (newline >= 0)
            {
                return Encoding.UTF8.GetString(buffer, 0, newline);
            }
        }

        return length is > 0 and <= MaxLine ? Encoding.UTF8.GetString(buffer, 0, length) : null;
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync().ConfigureAwait(false);
        _listener.Dispose();
        if (_accept is not null)
        {
            await _accept.ConfigureAwait(false);
        }

        _stop.Dispose();
        _slots.Dispose();
    }
}
