using System.Diagnostics.Metrics;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;

namespace QuickSilver.Hosting;

/// <summary>
/// The hosted QuickSilver node: started with the host (the node, then every group of
/// <see cref="QuickSilverHostOptions.Groups"/>, <see cref="QuickSilverHostOptions.AerGroups"/> and of <see cref="QuickSilverBuilder.JoinGroup"/>), disposed when the host
/// stops (the GMS is told at once). Inject it to reach the node and its groups; hosted services registered after
/// <c>AddQuickSilver</c> start after it, so they find the node running. <see cref="GetNodeAsync"/> waits for the start
/// from anywhere else.
/// </summary>
public sealed class QuickSilverService : IHostedService, IAsyncDisposable
{
    private readonly IOptions<QuickSilverHostOptions> _options;
    private readonly IMeterFactory? _meterFactory;
    private readonly Microsoft.Extensions.Logging.ILoggerFactory? _loggerFactory;
    private readonly IEnumerable<GroupRegistration> _registrations;
    private readonly IServiceProvider _services;
    private readonly TaskCompletionSource<QuickSilverNode> _started = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly Dictionary<string, QuickSilverGroup> _groups = new(StringComparer.Ordinal);
    private QuickSilverNode? _node;

    internal QuickSilverService(IOptions<QuickSilverHostOptions> options, IEnumerable<GroupRegistration> registrations, IServiceProvider services, IMeterFactory? meterFactory,
        Microsoft.Extensions.Logging.ILoggerFactory? loggerFactory)
    {
        _loggerFactory = loggerFactory;
        _options = options; // read at start: a bad option fails the start (ValidateOnStart), not the resolution
        _registrations = registrations;
        _services = services;
        _meterFactory = meterFactory;
    }

    /// <summary>The running node; throws <see cref="InvalidOperationException"/> before the host has started it.</summary>
    public QuickSilverNode Node => _node ?? throw new InvalidOperationException("The QuickSilver node has not started yet (the host starts it; await GetNodeAsync to wait).");

    /// <summary>The groups joined at start, by name.</summary>
    public IReadOnlyDictionary<string, QuickSilverGroup> Groups => _groups;

    /// <summary>A group joined at start; throws <see cref="KeyNotFoundException"/> naming the group otherwise.</summary>
    public QuickSilverGroup Group(string name) => _groups.TryGetValue(name, out var group)
        ? group
        : throw new KeyNotFoundException($"Group '{name}' was not joined at start (add it to QuickSilver:Groups or call JoinGroup).");

    /// <summary>The node once the host has started it and joined its groups.</summary>
    public Task<QuickSilverNode> GetNodeAsync(CancellationToken cancellationToken = default) => _started.Task.WaitAsync(cancellationToken);

    /// <summary>Starts the node and joins the groups, within <see cref="QuickSilverHostOptions.StartTimeout"/>.</summary>
    public async Task StartAsync(CancellationToken cancellationToken)
    {
        var options = _options.Value;
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        timeout.CancelAfter(options.StartTimeout);
        var nodeOptions = options.Node with
        {
            MeterFactory = options.Node.MeterFactory ?? _meterFactory,     // the host's, unless the options name one
            LoggerFactory = options.Node.LoggerFactory ?? _loggerFactory,
        };
        try
        {
            _node = await QuickSilverNode.StartAsync(nodeOptions, timeout.Token).ConfigureAwait(false);
            foreach (var name in options.Groups.Concat(options.AerGroups.Keys).Concat(_registrations.Select(r => r.Name)).Distinct(StringComparer.Ordinal))
            {
                _groups[name] = options.AerGroups.TryGetValue(name, out var aer)
                    ? await _node.JoinGroupAsync(name, GroupOptions.ForAer(aer), timeout.Token).ConfigureAwait(false)
                    : await _node.JoinGroupAsync(name, timeout.Token).ConfigureAwait(false);
            }

            foreach (var registration in _registrations)
            {
                registration.OnJoined?.Invoke(_groups[registration.Name], _services);
            }
        }
        catch (OperationCanceledException) when (timeout.IsCancellationRequested && !cancellationToken.IsCancellationRequested)
        {
            var error = new TimeoutException($"The QuickSilver node did not start and join its groups within QuickSilverHostOptions.StartTimeout = {options.StartTimeout} (is the GMS at {options.Node.Gms} running?).");
            await FailAsync(error).ConfigureAwait(false);
            throw error;
        }
        catch (Exception e)
        {
            await FailAsync(e).ConfigureAwait(false);
            throw;
        }

        _started.TrySetResult(_node);
    }

    /// <summary>Disposes the node (the GMS hears at once that it left).</summary>
    public async Task StopAsync(CancellationToken cancellationToken)
    {
        _started.TrySetCanceled(CancellationToken.None);
        if (Interlocked.Exchange(ref _node, null) is { } node)
        {
            await node.DisposeAsync().AsTask().WaitAsync(cancellationToken).ConfigureAwait(false);
        }
    }

    /// <summary>Disposes the node if the host did not stop it.</summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _node, null) is { } node)
        {
            await node.DisposeAsync().ConfigureAwait(false);
        }
    }

    private async Task FailAsync(Exception error)
    {
        _started.TrySetException(error);
        if (Interlocked.Exchange(ref _node, null) is { } node)
        {
            await node.DisposeAsync().ConfigureAwait(false);
        }
    }
}

/// <summary>A group the hosted node joins at start, and what to do once joined (set <see cref="QuickSilverGroup.OnMessage"/>,
/// turn <see cref="QuickSilverGroup.QueueMessages"/> off…); registered by <see cref="QuickSilverBuilder.JoinGroup"/>.</summary>
internal sealed record GroupRegistration(string Name, Action<QuickSilverGroup, IServiceProvider>? OnJoined);
