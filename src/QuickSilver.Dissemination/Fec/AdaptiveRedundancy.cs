namespace QuickSilver.Dissemination.Fec;

/// <summary>The options of <see cref="AdaptiveRedundancy"/> (docs/dissemination.md, "Adaptive redundancy").</summary>
public sealed record AdaptiveRedundancyOptions
{
    /// <summary>What one NAK costs, in data packets, against a proactive repair packet that every requester receives:
    /// its request-channel frame, its announcement and a round of delay before the page is whole. Larger values buy
    /// more proactive repair for fewer NAKs. Default 1.</summary>
    public double NakCostPackets { get; init; } = 1.0;

    /// <summary>How long after a transmission's end a requester that has not NAKed it counts as having lost nothing
    /// it needed (longer than the clients' NAK delay; seed silence-means-success).</summary>
    public TimeSpan ResolveAfter { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>Observations (one per requester of a transmission) after which an observation weighs half: how fast
    /// the estimate forgets. Default 2,000.</summary>
    public int HalfLife { get; init; } = 2_000;

    public void Validate()
    {
        if (!(NakCostPackets >= 0 && NakCostPackets <= 1_000))
        {
            throw new ArgumentOutOfRangeException(nameof(NakCostPackets), NakCostPackets, "AdaptiveRedundancyOptions.NakCostPackets must be between 0 and 1000.");
        }

        if (ResolveAfter <= TimeSpan.Zero || ResolveAfter > TimeSpan.FromMinutes(10))
        {
            throw new ArgumentOutOfRangeException(nameof(ResolveAfter), ResolveAfter, "AdaptiveRedundancyOptions.ResolveAfter must be positive and at most 10 minutes.");
        }

        if (HalfLife < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(HalfLife), HalfLife, "AdaptiveRedundancyOptions.HalfLife must be at least 1.");
        }
    }
}

/// <summary>
/// Proactive redundancy sized by the loss the clients report, not by how many wait (the seed's
/// <see cref="RedundancyRule"/>, whose 1 % per requester sends repair packets that nobody needs on a lossless network).
/// </summary>
/// <remarks>
/// <para><b>Estimate.</b> Each requester of a full transmission of n = k + m packets (m proactive repair packets) is
/// one observation of its packet losses X ~ Binomial(n, p). A NAK reports the packets still lacking, L, so the client
/// lost exactly X = m + L; silence means X ≤ m (censored: a client that lost no more than the repair packets says
/// nothing). p̂ maximises the likelihood Π P(X = x) over NAKs × Π P(X ≤ m) over silences, on a grid of 0 and 64
/// log-spaced values from 10⁻⁴ to 0.5, with exponentially decaying weights (<see cref="AdaptiveRedundancyOptions.HalfLife"/>).
/// With no NAK weight left the estimate is 0; the censoring is why silences at m &gt; 0 do not bias it towards 0 as
/// a plain "lost over sent" would.</para>
/// <para><b>Choice.</b> For a page of k packets and R requesters, m minimises the expected packets sent for the page:
/// m + E[max over the R clients of (X − m)⁺] (the repair-only retransmission that NAKs ask for) + c · P(some client
/// NAKs) (c = <see cref="AdaptiveRedundancyOptions.NakCostPackets"/>), X ~ Binomial(k + m, p̂), clients independent;
/// m from 0 up to the cap of the seed's rule (⌊k · CapPercent / 100⌋, and 255 − k). With p̂ = 0 it is 0: no repair
/// packet on a network that loses nothing.</para>
/// <para>Bounded: one weight per (n, m) and per (n, x), both below 256, so at most 2 · 65,536 cells; entries that
/// decay below 10⁻³ are removed. One thread (the server's).</para>
/// </remarks>
public sealed class AdaptiveRedundancy
{
    private const int GridSize = 65;
    private const double MinWeight = 1e-3;
    private static readonly double[] Grid = BuildGrid();
    private static readonly double[] LogFactorial = BuildLogFactorial();

    private readonly AdaptiveRedundancyOptions _options;
    private readonly RedundancyRule _cap;
    private readonly Dictionary<int, double> _silent = new();   // (n << 8 | m) → weight: X ≤ m
    private readonly Dictionary<int, double> _lost = new();     // (n << 8 | x) → weight: X = x
    private readonly Dictionary<int, int> _choices = new();     // (k << 16 | min(R, 65535)) → m, for the current p̂
    private readonly List<int> _dead = new();
    private readonly double _decayPerObservation;
    private double _pendingDecay = 1;
    private int _sinceDecay;
    private bool _dirty;
    private double _p;

    public AdaptiveRedundancy(AdaptiveRedundancyOptions options, RedundancyRule cap)
    {
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(cap);
        options.Validate();
        cap.Validate();
        _options = options;
        _cap = cap;
        _decayPerObservation = Math.Pow(0.5, 1.0 / options.HalfLife);
    }

    /// <summary>The current estimate of the clients' packet loss probability.</summary>
    public double LossEstimate
    {
        get
        {
            Refresh();
            return _p;
        }
    }

    /// <summary><paramref name="clients"/> requesters of a transmission of <paramref name="packets"/> packets, of which
    /// <paramref name="repair"/> were proactive repair, said nothing: each lost at most <paramref name="repair"/>.</summary>
    public void ObserveSilent(int packets, int repair, int clients)
    {
        if (clients <= 0 || !InRange(packets, repair))
        {
            return;
        }

        Add(_silent, (packets << 8) | repair, clients);
    }

    /// <summary>A requester of a transmission of <paramref name="packets"/> packets (<paramref name="repair"/> of them
    /// proactive repair) NAKed it lacking <paramref name="lacking"/>: it lost repair + lacking. A NAK for the whole
    /// page (lacking = packets − repair) is not counted: the client did not receive the page at all (skipped for
    /// capacity, not yet listening, its socket closed), which no number of repair packets short of the page mends.</summary>
    public void ObserveNak(int packets, int repair, int lacking)
    {
        int lost = repair + lacking;
        if (!InRange(packets, repair) || lacking < 1 || lost >= packets)
        {
            return;
        }

        Add(_lost, (packets << 8) | lost, 1);
        _dirty = true;
    }

    /// <summary>Repair packets for a page of <paramref name="sourcePackets"/> packets that
    /// <paramref name="requesters"/> clients wait for.</summary>
    public int RepairCount(int sourcePackets, int requesters)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(sourcePackets, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(sourcePackets, ReedSolomon.MaxPackets);
        ArgumentOutOfRangeException.ThrowIfNegative(requesters);
        Refresh();
        if (_p <= 0 || requesters == 0)
        {
            return 0;
        }

        int key = (sourcePackets << 16) | Math.Min(requesters, ushort.MaxValue);
        if (!_choices.TryGetValue(key, out int m))
        {
            m = Choose(sourcePackets, requesters);
            _choices[key] = m;
        }

        return m;
    }

    private static bool InRange(int packets, int repair) => packets >= 1 && packets <= ReedSolomon.MaxPackets && repair >= 0 && repair < packets;

    private void Add(Dictionary<int, double> cells, int key, int count)
    {
        ApplyDecay(count);
        // Weights are stored divided by the decay still pending, so a new observation weighs 1 when it is applied.
        cells[key] = cells.GetValueOrDefault(key) + (count / _pendingDecay);
        if (cells == _silent && _p > 0)
        {
            _dirty = true;
        }
    }

    private void ApplyDecay(int observations)
    {
        _pendingDecay *= Math.Pow(_decayPerObservation, observations);
        _sinceDecay += observations;
        if (_sinceDecay < 256 && _pendingDecay > 1e-6)
        {
            return;
        }

        Scale(_silent, _pendingDecay);
        Scale(_lost, _pendingDecay);
        _pendingDecay = 1;
        _sinceDecay = 0;
        _dirty = true;
    }

    private void Scale(Dictionary<int, double> cells, double factor)
    {
        _dead.Clear();
        foreach (var key in cells.Keys)
        {
            double w = cells[key] * factor;
            if (w < MinWeight)
            {
                _dead.Add(key);
            }
            else
            {
                cells[key] = w;
            }
        }

        foreach (int key in _dead)
        {
            cells.Remove(key);
        }
    }

    private void Refresh()
    {
        if (!_dirty)
        {
            return;
        }

        _dirty = false;
        _choices.Clear();
        double best = double.NegativeInfinity;
        double bestP = 0;
        if (_lost.Count == 0)
        {
            _p = 0;
            return;
        }

        for (int g = 1; g < GridSize; g++)
        {
            double p = Grid[g];
            double ll = 0;
            double logP = Math.Log(p), logQ = Math.Log(1 - p);
            foreach (var (key, w) in _lost)
            {
                int n = key >> 8, x = key & 0xFF;
                ll += w * (LogChoose(n, x) + (x * logP) + ((n - x) * logQ));
            }

            foreach (var (key, w) in _silent)
            {
                int n = key >> 8, m = key & 0xFF;
                ll += w * Math.Log(Math.Max(Cdf(n, p, m), 1e-300));
            }

            if (ll > best)
            {
                best = ll;
                bestP = p;
            }
        }

        _p = bestP;
    }

    private int Choose(int k, int requesters)
    {
        int cap = (int)Math.Min(Math.Min((long)k * _cap.CapPercent / 100, ReedSolomon.MaxPackets - k), int.MaxValue);
        int bestM = 0;
        double bestCost = double.PositiveInfinity;
        Span<double> cdf = stackalloc double[ReedSolomon.MaxPackets + 1];
        for (int m = 0; m <= cap; m++)
        {
            int n = k + m;
            FillCdf(n, _p, cdf);
            // E[max (X − m)⁺] = Σ_{j > m} P(max ≥ j) = Σ_{j > m} (1 − F(j − 1)^R)
            double excess = 0;
            for (int j = m + 1; j <= n; j++)
            {
                double none = Math.Exp(requesters * Math.Log(Math.Max(cdf[j - 1], 1e-300)));
                double term = 1 - none;
                excess += term;
                if (term < 1e-9)
                {
                    break;
                }
            }

            double anyNak = 1 - Math.Exp(requesters * Math.Log(Math.Max(cdf[m], 1e-300)));
            double cost = m + excess + (_options.NakCostPackets * anyNak);
            if (cost < bestCost - 1e-12)
            {
                bestCost = cost;
                bestM = m;
            }
            else if (m > bestM + 2)
            {
                break; // the cost has risen for three steps: each more packet now costs more than it saves
            }
        }

        return bestM;
    }

    /// <summary>P(X ≤ m) for X ~ Binomial(n, p).</summary>
    private static double Cdf(int n, double p, int m)
    {
        double pmf = Math.Exp(n * Math.Log(1 - p));
        double sum = pmf;
        double ratio = p / (1 - p);
        for (int x = 0; x < m && x < n; x++)
        {
            pmf *= (n - x) / (double)(x + 1) * ratio;
            sum += pmf;
        }

        return Math.Min(sum, 1);
    }

    private static void FillCdf(int n, double p, Span<double> cdf)
    {
        double pmf = Math.Exp(n * Math.Log(1 - p));
        double sum = pmf;
        double ratio = p / (1 - p);
        cdf[0] = Math.Min(sum, 1);
        for (int x = 0; x < n; x++)
        {
            pmf *= (n - x) / (double)(x + 1) * ratio;
            sum += pmf;
            cdf[x + 1] = Math.Min(sum, 1);
        }
    }

    private static double LogChoose(int n, int x) => LogFactorial[n] - LogFactorial[x] - LogFactorial[n - x];

    private static double[] BuildGrid()
    {
        var grid = new double[GridSize];
        for (int g = 1; g < GridSize; g++)
        {
            grid[g] = 1e-4 * Math.Pow(0.5 / 1e-4, (g - 1) / (double)(GridSize - 2));
        }

        return grid;
    }

    private static double[] BuildLogFactorial()
    {
        var table = new double[ReedSolomon.MaxPackets + 1];
        for (int i = 1; i < table.Length; i++)
        {
            table[i] = table[i - 1] + Math.Log(i);
        }

        return table;
    }
}
