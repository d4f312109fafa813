using CsCheck;
using QuickSilver.Federation.CoreCast;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Federation.Tests.CoreCast;

public class BandwidthModelTests
{
    private static readonly BandwidthEstimate Seed = BandwidthModel.Evaluate(BandwidthParameters.Seed);

    [Fact]
    public void TheSeedsClientCountsAreTheFloorOfEquationsOneAndTwo()
    {
        // §5.3: 10 Gbit/s, 384 kbit/s, P = 20 + 1200, H = 20 + 60.
        Assert.Equal(1220, Seed.PayloadPacketBytes);
        Assert.Equal(80, Seed.HeaderPacketBytes);
        Assert.Equal(15.25, Seed.Gain, 12);
        Assert.Equal(397_135.4166, Seed.MaxClientsCoreCast, 3);
        Assert.Equal(26_041.6666, Seed.MaxClientsUnicast, 3);
        Assert.Equal(397_135, Seed.WholeClientsCoreCast);
        Assert.Equal(26_041, Seed.WholeClientsUnicast);
    }

    [Fact]
    public void EquationOnesTwoFormsDisagreeAtTheSeedsTwentyFiveMilliseconds()
    {
        // C·T/(8·H) with T = 25 ms: 10^10 · 0.025 / 640 = 390,625; the right-hand form assumes T = 8·P/BW = 25.42 ms.
        Assert.Equal(390_625, Seed.MaxClientsCoreCastFromInterval, 6);
        var consistent = BandwidthModel.Evaluate(BandwidthParameters.Seed with { T = 8.0 * 1220 / 384_000 });
        Assert.Equal(consistent.MaxClientsCoreCast, consistent.MaxClientsCoreCastFromInterval, 6);
    }

    [Fact]
    public void EquationNineGivesPointZeroSixFiveSixAt1200BytesAndPointOneNineNotPointOneSixAt400()
    {
        Assert.Equal(0.0656, Seed.AlphaThreshold, 4);                       // the seed's own 0.0656
        var small = BandwidthModel.Evaluate(BandwidthParameters.Seed with { PCC = 400 });
        Assert.Equal(80.0 / 420, small.AlphaThreshold, 12);
        Assert.Equal(0.19, Math.Round(small.AlphaThreshold, 2));            // the seed says 0.16
        Assert.NotEqual(0.16, Math.Round(small.AlphaThreshold, 2));
        // A P2P system with α between the two sends less transit traffic than CoreCast: the seed's 0.16 is no lower bound.
        var between = BandwidthModel.Evaluate(BandwidthParameters.Seed with { PCC = 400, Alpha = 0.17 });
        Assert.False(between.CoreCastSendsLessTransit);
        Assert.True(BandwidthModel.Evaluate(BandwidthParameters.Seed with { PCC = 400, Alpha = 0.20 }).CoreCastSendsLessTransit);
    }

    [Fact]
    public void TrafficEquationsForTableOnesCoreCastRow()
    {
        // Equation 3: 1220 · 202 + 80 · 1853 bytes per payload; equation 5: (20 + 1200) · 1853.
        Assert.Equal(394_680, Seed.TransitBytesPerPayload);
        Assert.Equal(2_260_660, Seed.LocalBytesPerPayload);
        Assert.Equal(394_680 / 0.025, Seed.TransitBytesPerSecond, 6);
        Assert.Equal(2_260_660 / 0.025, Seed.LocalBytesPerSecond, 6);
        // Over 2 h 45 min the local volume is Table 1's 895 GB; the transit volume is 156 GB where the table says 131.
        Assert.Equal(895, Math.Round(Seed.LocalBytesPerBroadcast / 1e9));
        Assert.Equal(156, Math.Round(Seed.TransitBytesPerBroadcast / 1e9));
        Assert.Null(Seed.P2pTransitBytesPerPayload);
        Assert.Null(Seed.CoreCastSendsLessTransit);
    }

    [Fact]
    public void EquationSevenCountsTheArcs()
    {
        var e = BandwidthModel.Evaluate(BandwidthParameters.Seed with { J = 3, K = 7, Alpha = 1 });
        Assert.Equal(10, e.P2pInterDomainArcs);
        Assert.Equal(12_200, e.P2pTransitBytesPerPayload);
        Assert.Equal((1220 * 3) + (80 * 7), e.TransitBytesPerPayload);
        Assert.True(e.CoreCastSendsLessTransit);
    }

    private static readonly Gen<BandwidthParameters> Parameters =
        Gen.Select(Gen.Double[1e3, 1e11], Gen.Double[1e3, 1e8], Gen.Double[1e-4, 1], Gen.Int[0, 100], Gen.Int[1, 9000], Gen.Int[1, 200], Gen.Int[1, 100_000], Gen.Double[0, 1])
            .SelectMany(t => Gen.Int[1, t.Item7].Select(j => new BandwidthParameters
            {
                C = t.Item1, BW = t.Item2, T = t.Item3, HL = t.Item4, PCC = t.Item5, HCC = t.Item6, K = t.Item7, J = j,
                Alpha = t.Item8 * (t.Item7 - 1),
            }));

    [Fact]
    public void EquationNineAgreesWithComparingEquationsThreeAndSeven() =>
        Property.ForAll(Parameters, 3000, seed: 16, p =>
        {
            var e = BandwidthModel.Evaluate(p);
            double margin = p.Alpha!.Value - e.AlphaThreshold;
            if (Math.Abs(margin) > 1e-9)
            {
                Assert.Equal(margin > 0, e.CoreCastSendsLessTransit);
            }
        });

    [Fact]
    public void MoreLineMoreClientsAndBiggerPayloadsFavourCoreCast() =>
        Property.ForAll(Parameters, 3000, seed: 17, p =>
        {
            var e = BandwidthModel.Evaluate(p);
            var faster = BandwidthModel.Evaluate(p with { C = p.C * 2 });
            Assert.True(faster.MaxClientsCoreCast > e.MaxClientsCoreCast && faster.MaxClientsUnicast > e.MaxClientsUnicast);
            var heavier = BandwidthModel.Evaluate(p with { BW = p.BW * 2 });
            Assert.True(heavier.MaxClientsCoreCast < e.MaxClientsCoreCast && heavier.MaxClientsUnicast < e.MaxClientsUnicast);
            var bigger = BandwidthModel.Evaluate(p with { PCC = p.PCC + 1 });
            Assert.True(bigger.AlphaThreshold < e.AlphaThreshold && bigger.MaxClientsCoreCast > e.MaxClientsCoreCast);
            var fatter = BandwidthModel.Evaluate(p with { HCC = p.HCC + 1 });
            Assert.True(fatter.AlphaThreshold > e.AlphaThreshold && fatter.MaxClientsCoreCast < e.MaxClientsCoreCast);
            // Equation 1 over equation 2 is P/H: CoreCast beats unicast on clients per line exactly when P > H.
            Assert.Equal(e.Gain, e.MaxClientsCoreCast / e.MaxClientsUnicast, 9);
            // Transit grows with every client and every domain; it never exceeds per-receiver unicast of whole packets
            // plus a header each (j ≤ k).
            var more = BandwidthModel.Evaluate(p with { K = p.K + 1 });
            Assert.True(more.TransitBytesPerPayload > e.TransitBytesPerPayload && more.LocalBytesPerPayload > e.LocalBytesPerPayload);
            if (p.J < p.K)
            {
                Assert.True(BandwidthModel.Evaluate(p with { J = p.J + 1 }).TransitBytesPerPayload > e.TransitBytesPerPayload);
            }

            Assert.True(e.TransitBytesPerPayload <= ((double)e.PayloadPacketBytes + e.HeaderPacketBytes) * p.K);
        });

    public static TheoryData<BandwidthParameters, string> BadParameters => new()
    {
        { new BandwidthParameters { C = 0 }, "C" },
        { new BandwidthParameters { C = double.NaN }, "C" },
        { new BandwidthParameters { BW = -1 }, "BW" },
        { new BandwidthParameters { BW = double.PositiveInfinity }, "BW" },
        { new BandwidthParameters { T = 0 }, "T" },
        { new BandwidthParameters { HL = -1 }, "HL" },
        { new BandwidthParameters { PCC = 0 }, "PCC" },
        { new BandwidthParameters { PCC = 65_536 }, "PCC" },
        { new BandwidthParameters { HCC = 0 }, "HCC" },
        { new BandwidthParameters { HI = -1 }, "HI" },
        { new BandwidthParameters { D = 0 }, "D" },
        { new BandwidthParameters { K = 0 }, "K" },
        { new BandwidthParameters { J = 0 }, "J" },
        { new BandwidthParameters { J = 10, K = 9 }, "J" },
        { new BandwidthParameters { Alpha = -0.1 }, "Alpha" },
        { new BandwidthParameters { K = 5, J = 1, Alpha = 4.5 }, "Alpha" },
        { new BandwidthParameters { Alpha = double.NaN }, "Alpha" },
        { new BandwidthParameters { BroadcastSeconds = 0 }, "BroadcastSeconds" },
    };

    [Theory]
    [MemberData(nameof(BadParameters))]
    public void BadInputIsRejectedNamingTheParameter(BandwidthParameters parameters, string name)
    {
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => BandwidthModel.Evaluate(parameters));
        Assert.Equal(name, error.ParamName);
        Assert.Throws<ArgumentNullException>(() => BandwidthModel.Evaluate(null!));
    }
}
