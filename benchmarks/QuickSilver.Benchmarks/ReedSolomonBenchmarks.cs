using System.Globalization;
using BenchmarkDotNet.Attributes;
using BenchmarkDotNet.Columns;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Reports;
using BenchmarkDotNet.Running;
using QuickSilver.Dissemination.Fec;

namespace QuickSilver.Benchmarks;

/// <summary>
/// Reed–Solomon encode and decode of one page of k = 60 source packets (the seed's 30,000-byte page of 500-byte
/// packets, and the same count of 1,400-byte packets), with 10 % and 20 % redundancy (6 and 12 repair packets), for
/// each GF(2^8) kernel this processor runs. One operation is one page; the <c>Source MB/s</c> column is the page's
/// source bytes over the mean time (10^6 bytes per second), on one core.
/// </summary>
/// <remarks>
/// Encode writes every repair packet. Decode is the worst case for the given redundancy: as many source packets lost
/// as there are repair packets, all of them used; each operation takes the next of 16 random loss patterns, so the
/// decoder builds and inverts its matrices every time as it would for real pages.
/// </remarks>
[MemoryDiagnoser]
[Config(typeof(Columns))]
public class ReedSolomonBenchmarks
{
    public const int K = 60;
    private const int Patterns = 16;

    private ReedSolomon _code = null!;
    private byte[] _page = [];
    private byte[] _repair = [];
    private bool[][] _received = [];
    private int[] _repairIndices = [];
    private int _next;

    [Params(500, 1400)]
    public int PacketBytes { get; set; }

    [Params(10, 20)]
    public int RedundancyPercent { get; set; }

    [ParamsSource(nameof(SupportedKernels))]
    public GaloisKernel Kernel { get; set; }

    public static IEnumerable<GaloisKernel> SupportedKernels() => Enum.GetValues<GaloisKernel>().Where(GaloisRegion.IsSupported);

    [GlobalSetup]
    public void Setup()
    {
        int repairs = K * RedundancyPercent / 100;
        _code = new ReedSolomon(K, K + repairs) { Kernel = Kernel };
        var random = new Random(42);
        _page = new byte[K * PacketBytes];
        random.NextBytes(_page);
        _repair = new byte[repairs * PacketBytes];
        _code.Encode(_page, _repair);
        _repairIndices = [.. Enumerable.Range(0, repairs)];
        _received = new bool[Patterns][];
        for (int p = 0; p < Patterns; p++)
        {
            _received[p] = Enumerable.Repeat(true, K).ToArray();
            foreach (int lost in Enumerable.Range(0, K).OrderBy(_ => random.Next()).Take(repairs))
            {
                _received[p][lost] = false;
            }
        }
    }

    [Benchmark]
    public void Encode() => _code.Encode(_page, _repair);

    [Benchmark]
    public int Decode()
    {
        _next = (_next + 1) % Patterns;
        return _code.Decode(_page, _received[_next], _repair, _repairIndices);
    }

    private sealed class Columns : ManualConfig
    {
        public Columns() => AddColumn(new SourceThroughputColumn());
    }

    /// <summary>Source MB/s: k · PacketBytes bytes per operation over the mean time.</summary>
    private sealed class SourceThroughputColumn : IColumn
    {
        public string Id => nameof(SourceThroughputColumn);

        public string ColumnName => "Source MB/s";

        public bool AlwaysShow => true;

        public ColumnCategory Category => ColumnCategory.Custom;

        public int PriorityInCategory => 0;

        public bool IsNumeric => true;

        public UnitType UnitType => UnitType.Dimensionless;

        public string Legend => "Source bytes of the page per second of the mean, in 10^6 B/s, one core";

        public bool IsDefault(Summary summary, BenchmarkCase benchmarkCase) => false;

        public bool IsAvailable(Summary summary) => true;

        public string GetValue(Summary summary, BenchmarkCase benchmarkCase) => GetValue(summary, benchmarkCase, SummaryStyle.Default);

        public string GetValue(Summary summary, BenchmarkCase benchmarkCase, SummaryStyle style)
        {
            double? meanNs = summary[benchmarkCase]?.ResultStatistics?.Mean;
            object? packet = benchmarkCase.Parameters["PacketBytes"];
            if (meanNs is not > 0 || packet is not int packetBytes)
            {
                return "-";
            }

            return (K * packetBytes / meanNs.Value * 1000).ToString("N0", CultureInfo.InvariantCulture);
        }
    }
}
