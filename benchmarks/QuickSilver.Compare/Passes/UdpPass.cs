using QuickSilver.Compare.RawUdp;

namespace QuickSilver.Compare.Passes;

/// <summary>Raw UDP: the blaster and each receiver are child processes of the runner (hidden roles udp-send/udp-recv).</summary>
internal static class UdpPass
{
    public static async Task<PassResult> RunAsync(PassContext context)
    {
        var p = context.Point;
        var (port, tag) = PassContext.FreshAddress();
        var options = new UdpPassOptions
        {
            Receivers = p.Receivers, Groups = p.Groups, Size = p.Size, Messages = p.Messages, Warmup = p.Warmup, Port = port, Tag = tag, Timeout = context.Timeout,
        };
        var children = new List<ChildProcess> { ChildProcess.StartSelf(Roles.UdpSend, options.ToArgs()) };
        try
        {
            using var cts = new CancellationTokenSource(context.Grace);
            var ready = ResultLine.TryParse(await children[0].WaitForLineAsync("READY", cts.Token) is { } line ? ResultLine.Prefix + line : null);
            if (ready is null)
            {
                return PassResult.Failed(Systems.RawUdp, p, "the blaster did not start");
            }

            for (int i = 0; i < p.Receivers; i++)
            {
                children.Add(ChildProcess.StartSelf(Roles.UdpReceive, [.. options.ToArgs(), $"id={i}", $"ack={ready.Long("ack")}"]));
            }

            var results = await context.ResultsAsync(children);
            var sender = results.Find(r => r.GetValueOrDefault("role") == "sender");
            if (sender is null)
            {
                return PassResult.Failed(Systems.RawUdp, p, "the blaster printed no result");
            }

            string note = sender.Long("stalls") > 0 ? $"{sender.Long("stalls")} window stall(s)" : "";
            return PassResult.From(Systems.RawUdp, p, sender.Long("measured_start_us"), results.Where(r => r.GetValueOrDefault("role") == "receiver").ToList(), note);
        }
        finally
        {
            await PassContext.EndAllAsync(children);
        }
    }
}
