namespace QuickSilver.IntegrationTests;

/// <summary>The programs reject bad options with exit code 2 and a message that names the option.</summary>
public sealed class BadOptionTests
{
    public static TheoryData<string, string[], string> Cases => new()
    {
        { "qs", ["node", "--join", "g", "--size", "3"], "--size" },
        { "qs", ["node", "--join", "g", "--gms", "not-an-address"], "--gms" },
        { "qs", ["node", "--gms", "127.0.0.1:47001"], "--join" },
        { "qs", ["gms", "--multicast", "127.0.0.1:5000"], "--multicast" },
        { "qs", ["gms", "--id", "2"], "--peers" },
        { "qs", ["gms", "--peers", "127.0.0.1:47001,127.0.0.1:47001", "--data", "d"], "--peers" },
        { "qs", ["gms", "--peers", "127.0.0.1:47001,127.0.0.1:47002", "--id", "3", "--data", "d"], "--id" },
        { "qs", ["gms", "--peers", "127.0.0.1:47001,127.0.0.1:47002"], "--data" },
        { "qs", ["node", "--join", "g", "--gms-replicas", "127.0.0.1:47001,nowhere"], "--gms-replicas" },
        { "qs", ["corecast-model", "--line-rate", "0"], "--line-rate" },
        { "qs", ["corecast-model", "--interval", "soon"], "--interval" },
        { "qs", ["corecast-model", "--payload", "0"], "--payload" },
        { "qs", ["corecast-model", "--clients", "10", "--domains", "11"], "--domains" },
        { "qs", ["corecast-model", "--alpha", "-0.5"], "--alpha" },
        { "qs", ["gateway", "--id", "0", "--island", "1", "--listen", "127.0.0.1:47391"], "--id" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--peer", "2@nowhere"], "--peer" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--hold-seconds", "5"], "--hold-seconds" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--mediator", "127.0.0.1:5000"], "--mediator" },
        { "qs", ["gateway", "--data-node", "--id", "201", "--gateway", "2", "--island", "1", "--listen", "127.0.0.1:47391"], "--control" },
        { "qs", ["gateway", "--data-node", "--id", "201", "--island", "1", "--listen", "127.0.0.1:47391", "--control", "127.0.0.1:47392"], "--gateway" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@nowhere"], "--cluster-node" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--heartbeat-ms", "500", "--heartbeat-timeout-ms", "400"], "--heartbeat-timeout-ms" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--cluster-secret-file", "/nonexistent/cluster-secret"], "--cluster-secret-file" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--peering-secret-file", "/nonexistent/peering-secret"], "--peering-secret-file" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--peering-secret-file", "/dev/null"], "--peering-secret-file" },
        // A clustered gateway takes a peering secret (its bulk data channels and data nodes' datagrams are authenticated too),
        // so only a bad file is refused: on a control node and on a data node.
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--peering-secret-file", "/nonexistent/peering-secret"], "--peering-secret-file" },
        { "qs", ["gateway", "--data-node", "--id", "201", "--gateway", "2", "--island", "1", "--listen", "127.0.0.1:47391", "--control", "127.0.0.1:47392", "--peering-secret-file", "/dev/null"], "--peering-secret-file" },
        // A standby control node (issue 16): each bad or misplaced option is named.
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--standby"], "--standby" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--other-control", "127.0.0.1:47394", "--heartbeat-ms", "1000", "--takeover-ms", "1500"], "--takeover-ms" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--other-control", "127.0.0.1:47394"], "--other-control" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--cluster-node", "201@127.0.0.1:47393", "--other-control", "nowhere"], "--other-control" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--standby-control", "127.0.0.1:47394"], "--standby-control" },
        { "qs", ["gateway", "--data-node", "--id", "201", "--gateway", "2", "--island", "1", "--listen", "127.0.0.1:47391", "--control", "127.0.0.1:47392", "--standby-control", "127.0.0.1:47392"], "--standby-control" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--peer", "2@127.0.0.1:47392,127.0.0.1:47392"], "--peer" },
        { "qs", ["gateway", "--id", "1", "--island", "1", "--listen", "127.0.0.1:47391", "--peer", "2@127.0.0.1:47392,127.0.0.1:47393,127.0.0.1:47394"], "--peer" },
        { "qs", ["sessions", "--admin", "10.1.2.3:47000"], "--admin" },
        { "qs", ["island-recv", "--mediator", "239.255.0.1:40000", "--session", "bfed://x/y/z"], "--session" },
        { "qs", ["island-recv", "--mediator", "239.255.0.1:40000", "--session", "bfed://1/239.1.1.1/5000", "--receiver", "-1"], "--receiver" },
        { "QuickStart", ["--receivers", "0"], "--receivers" },
        { "QuickStart", ["--size", "100000"], "--size" },
        { "QuickStart", ["--gms-replicas", "2"], "--gms-replicas" },
        { "QuickStart", ["--receivers", "many"], "--receivers" }, // a non-number used to crash the program (exit 134)
        { "QuickStart", ["--gms-replicas", "x"], "--gms-replicas" },
        { "QuickStart", ["--kill-gms-leader"], "--kill-gms-leader" },
    };

    [Theory]
    [MemberData(nameof(Cases))]
    public async Task A_bad_option_exits_with_code_2_and_names_the_option(string program, string[] args, string option)
    {
        using var tool = program == "qs" ? Tool.Qs(args) : Tool.QuickStart(args);
        Assert.True(await tool.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, tool.ExitCode);
        Assert.Contains(option, tool.Stderr, StringComparison.Ordinal);
    }
}
