using System.Globalization;
using QuickSilver.Aer;
using QuickSilver.Aer.Simulation;

// AER/NCA figures on the simulated wide-area tree (docs/aer.md "Measured"). Virtual time: the numbers depend on the
// seed and the topology, not on this machine's speed.
//   dotnet run -c Release --project benchmarks/QuickSilver.AerSim -- naks [seeds]
//   dotnet run -c Release --project benchmarks/QuickSilver.AerSim -- latency [seeds]
//   dotnet run -c Release --project benchmarks/QuickSilver.AerSim -- testbed [seeds] [access %] [backbone %]
string command = args.Length > 0 ? args[0] : "help";
int seeds = args.Length > 1 ? int.Parse(args[1], CultureInfo.InvariantCulture) : 3;
var inv = CultureInfo.InvariantCulture;

switch (command)
{
    case "naks":
        // NAKs reaching the source vs group size: no repair servers; repair servers without suppression; with suppression.
        Console.WriteLine("receivers | NAKs at source: no RS | RS, no suppression | RS + suppression | NAKs sent by all nodes: RS, no suppression | RS + suppression");
        foreach (int perSite in new[] { 2, 4, 8, 16, 32 })
        {
            var rows = new[]
            {
                Mean(seeds, s => new AerScenarioOptions { Seed = s, ReceiversPerSite = perSite, Messages = 1000, RepairServers = false }),
                Mean(seeds, s => new AerScenarioOptions { Seed = s, ReceiversPerSite = perSite, Messages = 1000, Aer = new AerOptions { NakSuppression = false } }),
                Mean(seeds, s => new AerScenarioOptions { Seed = s, ReceiversPerSite = perSite, Messages = 1000 }),
            };
            Console.WriteLine(string.Create(inv, $"{3 * perSite,9} | {rows[0].NaksAtSource,21:0} | {rows[1].NaksAtSource,18:0} | {rows[2].NaksAtSource,16:0} | {rows[1].NaksSent,41:0} | {rows[2].NaksSent,16:0}"));
        }

        break;
    case "latency":
        // The seed's Table 2, in simulation: mean repair latency with and without repair servers, as a fraction of the
        // receivers' round trip to the source, for losses on the backbone, on the access links, and both.
        Console.WriteLine("loss on            | RTT to source | latency with RS | without RS | with/RTT | without/RTT | with/without");
        var access = new TreeLink { Latency = TimeSpan.FromMilliseconds(2), LossRate = 0.02, BandwidthBitsPerSecond = 100_000_000 };
        var backbone = new TreeLink { Latency = TimeSpan.FromMilliseconds(40), LossRate = 0.02, BandwidthBitsPerSecond = 100_000_000 };
        foreach (var (name, bb, ac) in new[]
        {
            ("backbone 2 %", backbone, access with { LossRate = 0 }),
            ("access 2 %", backbone with { LossRate = 0 }, access),
            ("both 2 %", backbone, access),
        })
        {
            var with = Mean(seeds, s => new AerScenarioOptions { Seed = s, Messages = 1000, BackboneLink = bb, AccessLink = ac });
            var without = Mean(seeds, s => new AerScenarioOptions { Seed = s, Messages = 1000, BackboneLink = bb, AccessLink = ac, RepairServers = false });
            double rtt = 2 * (1 + 40 + 2); // source link + backbone + access, both ways
            Console.WriteLine(string.Create(inv, $"{name,-18} | {rtt,10:0} ms | {with.Latency,12:0.0} ms | {without.Latency,7:0.0} ms | {with.Latency / rtt,8:0.00} | {without.Latency / rtt,11:0.00} | {with.Latency / without.Latency,12:0.00}"));
        }

        break;
    case "bandwidth":
    {
        // The seed's Figure 4 in simulation: bytes over all links of the tree (SPMs, CSMs and probes included) per
        // message delivered to every receiver, with and without repair servers, as the loss on every link grows.
        Console.WriteLine("loss per link | bytes/message with RS | without RS | saving");
        foreach (double p in new[] { 0.005, 0.01, 0.02, 0.05 })
        {
            var bb = new TreeLink { Latency = TimeSpan.FromMilliseconds(40), LossRate = p, BandwidthBitsPerSecond = 100_000_000 };
            var ac = new TreeLink { Latency = TimeSpan.FromMilliseconds(2), LossRate = p, BandwidthBitsPerSecond = 100_000_000 };
            var with = Mean(seeds, s => new AerScenarioOptions { Seed = s, Messages = 1000, ReceiversPerSite = 8, BackboneLink = bb, AccessLink = ac });
            var without = Mean(seeds, s => new AerScenarioOptions { Seed = s, Messages = 1000, ReceiversPerSite = 8, BackboneLink = bb, AccessLink = ac, RepairServers = false });
            Console.WriteLine(string.Create(inv, $"{p,13:P1} | {with.Bytes / 1000,21:0} | {without.Bytes / 1000,10:0} | {1 - with.Bytes / without.Bytes,6:P0}"));
        }

        break;
    }

    case "testbed":
    {
        // The namespace testbed's Table 2 scenario (tools/wan/aer-table2.sh) on virtual time: source link 5 ms, three
        // sites 5, 20 and 45 ms from the backbone (round trips 20, 50, 100 ms), a repair server and two receivers per
        // site on 0.1 ms links; loss on the receivers' access links and on the backbone links into the sites. Without
        // repair servers the source re-multicasts repairs (as the namespace run does). Link bytes leave out the repair
        // servers' own links (the seed's repair servers sit in the routers). Args: seeds, access %, backbone %.
        double accessLoss = args.Length > 2 ? double.Parse(args[2], inv) / 100 : 0.02;
        double backboneLoss = args.Length > 3 ? double.Parse(args[3], inv) / 100 : 0;
        int[] delays = [5, 20, 45];
        var fast = new TreeLink { Latency = TimeSpan.FromMilliseconds(0.1), BandwidthBitsPerSecond = 1_000_000_000 };
        AerScenarioOptions Make(int seed, bool rs) => new()
        {
            Seed = seed, Sites = 3, ReceiversPerSite = 2, Messages = 3000, RepairServers = rs, SourceSubcast = rs,
            SourceLink = fast with { Latency = TimeSpan.FromMilliseconds(5) },
            RepairServerLink = fast with { CountBytes = false }, AccessLink = fast with { LossRate = accessLoss },
            SiteBackboneLinks = Enumerable.Range(0, 3).ToDictionary(i => i, i => fast with { Latency = TimeSpan.FromMilliseconds(delays[i]), LossRate = backboneLoss }),
        };
        Console.WriteLine(string.Create(inv, $"access loss {accessLoss:P0}, backbone loss {backboneLoss:P0}, {seeds} seeds"));
        Console.WriteLine("site | RTT | latency with RS | without RS | with/RTT | without/RTT | with/without");
        var sums = new double[3, 2];
        double bytesWith = 0, bytesWithout = 0;
        for (int s = 1; s <= seeds; s++)
        {
            foreach (bool rs in new[] { true, false })
            {
                var scenario = new AerScenario(Make(s, rs));
                var result = scenario.Run();
                if (!result.AllDelivered)
                {
                    throw new InvalidOperationException($"seed {s}: not every receiver got every message");
                }

                for (int site = 0; site < 3; site++)
                {
                    sums[site, rs ? 0 : 1] += scenario.SiteRepairLatency(site).MeanMs / seeds;
                }

                if (rs) { bytesWith += result.LinkBytes / (double)seeds; } else { bytesWithout += result.LinkBytes / (double)seeds; }
            }
        }

        for (int site = 0; site < 3; site++)
        {
            double rtt = 2 * (5 + delays[site] + 0.1);
            Console.WriteLine(string.Create(inv, $"{"abc"[site]} | {rtt:0} ms | {sums[site, 0]:0.0} ms | {sums[site, 1]:0.0} ms | {sums[site, 0] / rtt:0.00} | {sums[site, 1] / rtt:0.00} | {sums[site, 0] / sums[site, 1]:0.00}"));
        }

        Console.WriteLine(string.Create(inv, $"link bytes with RS {bytesWith:0}, without {bytesWithout:0}, saving {1 - bytesWith / bytesWithout:P0}"));
        break;
    }

    default:
        Console.WriteLine("usage: QuickSilver.AerSim naks|latency|bandwidth|testbed [seeds] [access % [backbone %]]");
        return 2;
}

return 0;

static (double NaksAtSource, double NaksSent, double Latency, double Bytes) Mean(int seeds, Func<int, AerScenarioOptions> make)
{
    double naks = 0, sent = 0, latency = 0, bytes = 0;
    for (int s = 1; s <= seeds; s++)
    {
        var result = new AerScenario(make(s)).Run();
        if (!result.AllDelivered)
        {
            throw new InvalidOperationException($"seed {s}: not every receiver got every message");
        }

        naks += result.NaksAtSource;
        sent += result.Totals.NaksSent;
        latency += result.MeanRepairLatencyMs;
        bytes += result.LinkBytes;
    }

    return (naks / seeds, sent / seeds, latency / seeds, bytes / seeds);
}
