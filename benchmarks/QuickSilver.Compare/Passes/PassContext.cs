namespace QuickSilver.Compare.Passes;

/// <summary>What every pass gets: the point to measure and how long any one process may run.</summary>
/// <param name="QsMinRate">Overrides QuickSilver's RateControlOptions.MinRate (packets/s) at the sender; null keeps the default.</param>
/// <param name="QsSecurity">QuickSilver's datagram security in this pass (every process, under a secret made for the pass).</param>
/// <param name="SockperfSeconds">How long sockperf's unlimited sender runs at each point.</param>
/// <param name="TimelineFolder">QuickSilver only: each receiver writes its arrivals per millisecond to a file here (the ramp
/// measurement, <see cref="Output.RampOut"/>); null: none.</param>
internal sealed record PassContext(ExperimentPoint Point, TimeSpan Timeout, double? QsMinRate = null,
    QuickSilver.Core.Security.DatagramSecurity QsSecurity = QuickSilver.Core.Security.DatagramSecurity.Off, int SockperfSeconds = 5,
    string? TimelineFolder = null)
{
    /// <summary>The cipher suite when <see cref="QsSecurity"/> is not Off.</summary>
    public QuickSilver.Core.Security.DatagramCipherSuite QsCipher { get; init; }

    /// <summary>Children get <see cref="Timeout"/>; the runner waits this much longer before it gives up on them.</summary>
    public TimeSpan Grace => Timeout + TimeSpan.FromSeconds(15);

    /// <summary>A port and a multicast tag that differ from pass to pass, so a straggler of one cannot disturb the next.</summary>
    public static (int Port, byte Tag) FreshAddress() => (Random.Shared.Next(30_000, 60_000), (byte)Random.Shared.Next(1, 250));

    /// <summary>Reads the <c>RESULT</c> line of each child within <see cref="Grace"/>; children without one are left out.</summary>
    public async Task<List<IReadOnlyDictionary<string, string>>> ResultsAsync(IEnumerable<ChildProcess> children)
    {
        using var cts = new CancellationTokenSource(Grace);
        var lines = await Task.WhenAll(children.Select(c => c.WaitForLineAsync(ResultLine.Prefix, cts.Token)));
        return lines.Select(ResultLine.TryParse).OfType<IReadOnlyDictionary<string, string>>().ToList();
    }

    /// <summary>Waits for a line starting with <paramref name="prefix"/> from every child; false when one did not print it.</summary>
    public async Task<bool> AllSayAsync(IEnumerable<ChildProcess> children, string prefix)
    {
        using var cts = new CancellationTokenSource(Grace);
        var lines = await Task.WhenAll(children.Select(c => c.WaitForLineAsync(prefix, cts.Token)));
        return lines.All(l => l is not null);
    }

    public static async Task EndAllAsync(IReadOnlyList<ChildProcess> children)
    {
        foreach (var c in children)
        {
            c.CloseInput();
        }

        await Task.WhenAll(children.Select(c => c.WaitExitAsync(TimeSpan.FromSeconds(10))));
        foreach (var c in children)
        {
            c.Dispose();
        }
    }
}
