using System.CommandLine;
using System.Text.Json;
using QuickSilver.Federation.CoreCast;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary><c>qs corecast-transit</c>: runs CoreCast's data plane (Algorithms 1 and 2: <see cref="IngressRouter"/>,
/// <see cref="EgressRouter"/>) for 1, 10 and 100 receivers per remote domain and prints the transit bytes measured
/// against per-receiver unicast and against the model's equation 3. Exact counts: no network, no clock.</summary>
internal static class CoreCastTransitVerb
{
    private static readonly JsonSerializerOptions Json = new(JsonSerializerDefaults.Web);
    private static readonly int[] PerDomain = [1, 10, 100];

    public static Command Create(Option<bool> json)
    {
        var domains = Cli.Int("--domains", "Remote domains (j)", 3, 1, 1000);
        var chunks = Cli.Int("--chunks", "Chunks sent", 100, 1, 100_000);
        var chunk = Cli.Int("--chunk", "Chunk size in bytes (D)", 1200, 1, 65_000);
        var lisp = Cli.Int("--lisp-header", "Core encapsulation header per packet (H_L), bytes", 20, 0, 1000);
        var command = new Command("corecast-transit", "Measure CoreCast's transit bytes (its data plane, run in memory) against per-receiver unicast and the model, for 1, 10 and 100 receivers per domain.")
        {
            domains, chunks, chunk, lisp,
        };
        command.SetAction((parse, cancellationToken) =>
        {
            var rows = PerDomain.Select(r => TransitExperiment.Run(parse.GetValue(domains), r, parse.GetValue(chunks), parse.GetValue(chunk), parse.GetValue(lisp))).ToList();
            if (parse.GetValue(json))
            {
                Console.WriteLine(JsonSerializer.Serialize(rows, Json));
                return Task.FromResult(0);
            }

            Console.WriteLine($"payload packet {CoreCastWire.PayloadOverhead} + {parse.GetValue(chunk)} B, header packet {CoreCastWire.HeaderBytes} B, + {parse.GetValue(lisp)} B core header each; {parse.GetValue(domains)} domains, {parse.GetValue(chunks)} chunks");
            Console.WriteLine("receivers/domain  receivers  CoreCast transit B  unicast transit B  CoreCast/unicast  model (eq. 3) B  all delivered once");
            foreach (var r in rows)
            {
                Console.WriteLine($"{r.ReceiversPerDomain,16}  {r.Domains * r.ReceiversPerDomain,9}  {r.CoreCastTransitBytes,18:N0}  {r.UnicastTransitBytes,17:N0}  {r.MeasuredRatio,16:F4}  {r.ModelTransitBytes,15:N0}  {(r.EveryReceiverGotEveryChunkOnce ? "yes" : "NO")}");
            }

            return Task.FromResult(rows.All(r => r.EveryReceiverGotEveryChunkOnce) ? 0 : 1);
        });
        return command;
    }
}
