using System.CommandLine;
using QuickSilver.Core.Io;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// The AER flags of <c>qs node</c> (docs/aer.md, "In the generic host and <c>qs node</c>"): <c>--transport aer</c> makes
/// the first <c>--join</c> group an AER group (the others stay QSM) with <c>--aer-session</c>, <c>--aer-group</c>,
/// <c>--aer-source</c> and, on the source, <c>--aer-children</c>, named like <c>qs aer-send</c>'s --session, --group,
/// --source and --children. The node whose <c>--listen</c> is <c>--aer-source</c> is the source.
/// </summary>
internal sealed class AerNodeFlags
{
    private AerNodeFlags(Option<string> transport, Option<int> session, Option<string> group, Option<NetAddress> source, Option<string> children)
        => (Transport, Session, Group, Source, Children) = (transport, session, group, source, children);

    public Option<string> Transport { get; }

    public Option<int> Session { get; }

    public Option<string> Group { get; }

    public Option<NetAddress> Source { get; }

    public Option<string> Children { get; }

    public IEnumerable<Option> All => [Transport, Session, Group, Source, Children];

    public static AerNodeFlags Create()
    {
        var transport = new Option<string>("--transport")
        {
            Description = "How the first --join group travels: qsm (a QSM region, the default) or aer (wide area: one source, repair servers, NCA; needs --aer-source)",
            DefaultValueFactory = _ => "qsm",
        };
        transport.Validators.Add(r =>
        {
            if (r.GetValueOrDefault<string>() is { } text && text is not ("qsm" or "aer"))
            {
                r.AddError($"--transport must be qsm or aer; got '{text}'.");
            }
        });
        return new AerNodeFlags(
            transport,
            Cli.Int("--aer-session", "With --transport aer: the AER session number (as qs aer-send --session)", 1, 1, int.MaxValue),
            AerVerbs.MulticastOption("--aer-group"),
            Cli.Address("--aer-source", "With --transport aer: the source node's address (its --listen); the node listening there publishes", loopbackOnly: false),
            AerVerbs.ChildrenOption(required: false, "--aer-children"));
    }

    /// <summary>The first group's options (null: a QSM group), or false after printing to stderr what is wrong, naming the flag.</summary>
    public bool TryRead(ParseResult parse, NetAddress listen, int publish, out GroupOptions? options)
    {
        options = null;
        bool aer = parse.GetValue(Transport) == "aer";
        if (!aer)
        {
            if (All.Skip(1).FirstOrDefault(o => parse.GetResult(o) is { Implicit: false }) is { } stray)
            {
                Console.Error.WriteLine($"{stray.Name} applies only with --transport aer.");
                return false;
            }

            return true;
        }

        var source = parse.GetValue(Source);
        if (parse.GetResult(Source) is null or { Implicit: true })
        {
            Console.Error.WriteLine("--aer-source is required with --transport aer: the address (--listen) of the node that publishes.");
            return false;
        }

        bool isSource = listen == source;
        if (publish > 0 && !isSource)
        {
            Console.Error.WriteLine($"--publish with --transport aer: only the source publishes; give this node --listen {source} (the --aer-source).");
            return false;
        }

        if (parse.GetValue(Children) is { } children && !isSource)
        {
            Console.Error.WriteLine($"--aer-children applies only on the source (--listen equal to --aer-source {source}); got '{children}'.");
            return false;
        }

        options = GroupOptions.ForAer(new AerGroupOptions
        {
            Session = (uint)parse.GetValue(Session),
            Group = NetAddress.Parse(parse.GetValue(Group)!),
            Source = source,
            Children = parse.GetValue(Children) is { } list ? AerVerbs.ParseChildren(list) : [],
        });
        try
        {
            options.Validate();
            return true;
        }
        catch (ArgumentException e)
        {
            Console.Error.WriteLine($"--transport aer: {e.Message}");
            return false;
        }
    }
}
