using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;

namespace QuickSilver.Hosting;

/// <summary>
/// Health of the hosted node's membership: Healthy while its core runs and the GMS has it registered; Unhealthy before
/// start, after stop or a core fault, and while it is not registered (the GMS was lost or refused it: the client keeps
/// trying, so this can return to Healthy). Data: the node id and how many groups the GMS gave it views of.
/// </summary>
internal sealed class QuickSilverHealthCheck(QuickSilverService service) : IHealthCheck
{
    public async Task<HealthCheckResult> CheckHealthAsync(HealthCheckContext context, CancellationToken cancellationToken = default)
    {
        QuickSilverNode node;
        try
        {
            node = service.Node;
        }
        catch (InvalidOperationException)
        {
            return HealthCheckResult.Unhealthy("The QuickSilver node is not running (not started yet, or stopped).");
        }

        NodeStatus status;
        try
        {
            status = await node.GetStatusAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (ObjectDisposedException)
        {
            return HealthCheckResult.Unhealthy("The QuickSilver node has stopped.");
        }

        var data = new Dictionary<string, object>
        {
            ["registered"] = status.Registered,
            ["groups"] = status.Groups,
        };
        if (status.Id is { } id)
        {
            data["id"] = id;
        }

        return !status.CoreRunning ? HealthCheckResult.Unhealthy("The QuickSilver node's core has stopped.", data: data)
            : !status.Registered ? HealthCheckResult.Unhealthy("The QuickSilver node is not registered with the GMS (lost or refused; it keeps trying).", data: data)
            : HealthCheckResult.Healthy($"Registered with the GMS as node {status.Id}, in {status.Groups} group(s).", data);
    }
}

/// <summary>Adds the membership health check.</summary>
public static class QuickSilverHealthCheckExtensions
{
    /// <summary>Adds a health check of the hosted node's membership (registered with the GMS, core running).</summary>
    public static IHealthChecksBuilder AddQuickSilver(this IHealthChecksBuilder builder, string name = "quicksilver", IEnumerable<string>? tags = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        builder.Services.AddSingleton<QuickSilverHealthCheck>();
        return builder.Add(new HealthCheckRegistration(name, sp => sp.GetRequiredService<QuickSilverHealthCheck>(), HealthStatus.Unhealthy, tags));
    }
}
