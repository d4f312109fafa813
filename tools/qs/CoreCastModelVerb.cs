using System.CommandLine;
using System.Globalization;
using System.Text.Json;
using QuickSilver.Federation.CoreCast;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary><c>qs corecast-model</c>: CoreCast's bandwidth model (seed 004, equations 1–9; docs/federation.md) for given
/// parameters, the seed's by default. Pure arithmetic: no network, no node.</summary>
internal static class CoreCastModelVerb
{
    private static readonly JsonSerializerOptions JsonOptions = new(JsonSerializerDefaults.Web);

    /// <param name="json">The tool's --json option (recursive, on the root): one JSON object instead of the table.</param>
    public static Command Create(Option<bool> json)
    {
        var seed = BandwidthParameters.Seed;
        var lineRate = Number("--line-rate", "C: the sender's line rate, bit/s", seed.C);
        var stream = Number("--stream-rate", "BW: the stream's bandwidth, bit/s", seed.BW);
        var interval = Number("--interval", "T: time between payloads, seconds", seed.T);
        var lisp = Whole("--lisp-header", "H_L: LISP header, bytes", seed.HL);
        var payload = Whole("--payload", "P_CC: CoreCast payload PDU, bytes", seed.PCC);
        var header = Whole("--header", "H_CC: CoreCast header packet PDU, bytes", seed.HCC);
        var ipHeader = Whole("--ip-header", "H_I: IP header of a rebuilt local packet, bytes", seed.HI);
        var chunk = Whole("--chunk", "D: multimedia chunk, bytes", seed.D);
        var domains = Whole("--domains", "j: remote domains (RLOCs) with clients", seed.J);
        var clients = Whole("--clients", "k: clients", seed.K);
        var alpha = new Option<double?>("--alpha") { Description = "α: a P2P system's non-essential inter-domain arcs per client, 0..k-1 (omit to skip the P2P comparison)" };
        var broadcast = Number("--broadcast-seconds", "Broadcast length for the traffic volumes, seconds", seed.BroadcastSeconds);
        var command = new Command("corecast-model", "Print CoreCast's bandwidth model (equations 1-9 of the CoreCast paper) for the given parameters; the defaults are the paper's.")
        {
            lineRate, stream, interval, lisp, payload, header, ipHeader, chunk, domains, clients, alpha, broadcast,
        };
        var optionOf = new Dictionary<string, Option>(StringComparer.Ordinal)
        {
            [nameof(BandwidthParameters.C)] = lineRate, [nameof(BandwidthParameters.BW)] = stream, [nameof(BandwidthParameters.T)] = interval,
            [nameof(BandwidthParameters.HL)] = lisp, [nameof(BandwidthParameters.PCC)] = payload, [nameof(BandwidthParameters.HCC)] = header,
            [nameof(BandwidthParameters.HI)] = ipHeader, [nameof(BandwidthParameters.D)] = chunk, [nameof(BandwidthParameters.J)] = domains,
            [nameof(BandwidthParameters.K)] = clients, [nameof(BandwidthParameters.Alpha)] = alpha, [nameof(BandwidthParameters.BroadcastSeconds)] = broadcast,
        };
        command.SetAction(async (parse, cancellationToken) =>
        {
            var parameters = new BandwidthParameters
            {
                C = parse.GetValue(lineRate), BW = parse.GetValue(stream), T = parse.GetValue(interval), HL = parse.GetValue(lisp),
                PCC = parse.GetValue(payload), HCC = parse.GetValue(header), HI = parse.GetValue(ipHeader), D = parse.GetValue(chunk),
                J = parse.GetValue(domains), K = parse.GetValue(clients), Alpha = parse.GetValue(alpha), BroadcastSeconds = parse.GetValue(broadcast),
            };
            BandwidthEstimate estimate;
            try
            {
                estimate = BandwidthModel.Evaluate(parameters);
            }
            catch (ArgumentOutOfRangeException e) when (e.ParamName is { } name && optionOf.ContainsKey(name))
            {
                string message = e.Message.Split(Environment.NewLine)[0].Split(" (Parameter")[0];
                await Console.Error.WriteLineAsync($"{optionOf[name].Name}: {message}");
                return Cli.BadOptions;
            }

            if (parse.GetValue(json))
            {
                Console.WriteLine(JsonSerializer.Serialize(estimate, JsonOptions));
            }
            else
            {
                Print(estimate);
            }

            return 0;
        });
        return command;
    }

    // Range checks live in BandwidthParameters.Validate, whose error names the parameter; the verb maps it to the option.
    private static Option<double> Number(string name, string description, double defaultValue) =>
        new(name) { Description = string.Create(CultureInfo.InvariantCulture, $"{description} (default {defaultValue:G})"), DefaultValueFactory = _ => defaultValue };

    private static Option<int> Whole(string name, string description, int defaultValue) =>
        new(name) { Description = string.Create(CultureInfo.InvariantCulture, $"{description} (default {defaultValue:N0})"), DefaultValueFactory = _ => defaultValue };

    private static void Print(BandwidthEstimate e)
    {
        var p = e.Parameters;
        var c = CultureInfo.InvariantCulture;
        string Line(FormattableString s) => s.ToString(c);
        Console.WriteLine(Line($"CoreCast bandwidth model (seed 004, equations 1-9); C = {p.C:G} bit/s, BW = {p.BW:G} bit/s, T = {p.T:G} s"));
        Console.WriteLine(Line($"  H_L = {p.HL} B, P_CC = {p.PCC} B, H_CC = {p.HCC} B, H_I = {p.HI} B, D = {p.D} B, j = {p.J:N0} domains, k = {p.K:N0} clients{(p.Alpha is { } a ? Line($", alpha = {a:G}") : "")}"));
        Console.WriteLine(Line($"  P = H_L + P_CC = {e.PayloadPacketBytes} B, H = H_L + H_CC = {e.HeaderPacketBytes} B, P/H = {e.Gain:F4}"));
        Console.WriteLine(Line($"(1) clients per line, CoreCast   C/BW * P/H  = {e.MaxClientsCoreCast,16:N3}  -> {e.WholeClientsCoreCast:N0}"));
        Console.WriteLine(Line($"    the same from the interval   C*T/(8*H)   = {e.MaxClientsCoreCastFromInterval,16:N3}  -> {(long)Math.Floor(e.MaxClientsCoreCastFromInterval):N0}"));
        Console.WriteLine(Line($"(2) clients per line, unicast    C/BW        = {e.MaxClientsUnicast,16:N3}  -> {e.WholeClientsUnicast:N0}"));
        Console.WriteLine(Line($"(3) transit bytes per payload    TT_CC       = {e.TransitBytesPerPayload,16:N0} B"));
        Console.WriteLine(Line($"(4) transit bandwidth            TT_CC/T     = {e.TransitBytesPerSecond,16:N0} B/s ({e.TransitBytesPerSecond * 8 / 1e6:N3} Mbit/s); {e.TransitBytesPerBroadcast / 1e9:N1} GB in {p.BroadcastSeconds:G} s"));
        Console.WriteLine(Line($"(5) local bytes per payload      LT_CC       = {e.LocalBytesPerPayload,16:N0} B"));
        Console.WriteLine(Line($"(6) local bandwidth              LT_CC/T     = {e.LocalBytesPerSecond,16:N0} B/s ({e.LocalBytesPerSecond * 8 / 1e6:N3} Mbit/s); {e.LocalBytesPerBroadcast / 1e9:N1} GB in {p.BroadcastSeconds:G} s"));
        if (e.P2pTransitBytesPerPayload is { } p2p)
        {
            Console.WriteLine(Line($"(7) P2P transit bytes per payload TT_P2P     = {p2p,16:N0} B (i = j + alpha*k = {e.P2pInterDomainArcs:N2} arcs)"));
        }
        else
        {
            Console.WriteLine("(7) P2P transit bytes per payload: give --alpha");
        }

        Console.WriteLine(Line($"(8,9) CoreCast sends no more transit than P2P when alpha >= (H_L+H_CC)/(H_L+P_CC) = {e.AlphaThreshold:F4}"));
        if (e.CoreCastSendsLessTransit is { } less)
        {
            Console.WriteLine(Line($"      at alpha = {p.Alpha:G}: {(less ? "CoreCast sends less or equal transit" : "P2P sends less transit")}"));
        }
    }
}
