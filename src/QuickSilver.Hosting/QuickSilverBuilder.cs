using Microsoft.Extensions.DependencyInjection;

namespace QuickSilver.Hosting;

/// <summary>What <c>AddQuickSilver</c> returns: joins groups from dependency injection.</summary>
public sealed class QuickSilverBuilder
{
    internal QuickSilverBuilder(IServiceCollection services) => Services = services;

    /// <summary>The service collection <c>AddQuickSilver</c> registered into.</summary>
    public IServiceCollection Services { get; }

    /// <summary>Joins <paramref name="name"/> when the host starts (an AER group if <see cref="QuickSilverHostOptions.AerGroups"/>
    /// names it, a QSM group otherwise) and then calls <paramref name="onJoined"/> (on the
    /// starting thread, with the host's services) to attach handlers. Messages that arrive between the join and the
    /// call wait in the group's <see cref="QuickSilverGroup.ReadAllAsync"/> queue (<see cref="QuickSilverGroup.OnMessage"/> misses them).</summary>
    public QuickSilverBuilder JoinGroup(string name, Action<QuickSilverGroup, IServiceProvider>? onJoined = null)
    {
        ArgumentException.ThrowIfNullOrEmpty(name);
        Services.AddSingleton(new GroupRegistration(name, onJoined));
        return this;
    }
}
