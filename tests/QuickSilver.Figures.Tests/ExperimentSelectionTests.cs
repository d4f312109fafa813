using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Figures.Tests;

/// <summary>What the runner adds for issue 11: <c>--only</c> lists, Jain's index, and the arrival and fairness series
/// in the plots.</summary>
public sealed class ExperimentSelectionTests
{
    [Fact]
    public void Only_runs_the_listed_prefixes_once_each_in_the_order_given()
    {
        Assert.Equal(["recovery_latency.csv", "ack_latency.csv", "token_interval.csv"],
            Experiments.Selected("recovery, ack,token,recovery", FigurePlots.Files));
        Assert.Equal(FigurePlots.Files, Experiments.Selected(null, FigurePlots.Files));
        Assert.Empty(Experiments.Selected("nothing", FigurePlots.Files));
    }

    [Fact]
    public void Jains_index_is_one_for_equal_shares_and_one_over_n_when_one_takes_all()
    {
        Assert.Equal(1, JainFairness.Index([500, 500, 500, 500]), 12);
        Assert.Equal(0.25, JainFairness.Index([2000, 0, 0, 0]), 12);
        Assert.Equal(0.9, JainFairness.Index([1, 2]), 12); // 9 / (2 · 5)
        Assert.True(double.IsNaN(JainFairness.Index([])));
        Assert.True(double.IsNaN(JainFairness.Index([0, 0])));
    }

    [Fact]
    public void Recovery_and_senders_charts_draw_the_arrival_and_fairness_columns_when_the_csv_has_them()
    {
        var recovery = FigurePlots.Chart("recovery_latency.csv", CsvTable.Parse(
            "nodes,loss per link,recovery ms,recovery rounds,paper rounds,median ms,repaired %,msgs/s,NAK resends,timeout resends,window s,wall s,arrival ms,arrival rounds\n" +
            "25,0.005,88,0.09,2.5,83,1.02,5796,0,0,60,62.4,76,0.08\n"))!;
        var senders = FigurePlots.Chart("senders.csv", CsvTable.Parse(
            "senders,total msgs/s,vs 1 sender %,paper %,recv-queue drops,window s,wall s,Jain's index\n1,9593,100,,0,60,1,1\n10,6478,68,80,0,60,1,0.993\n"))!;

        Assert.Contains(recovery.Series, s => s.Label.Contains("arrival", StringComparison.Ordinal) && s.Points.Any());
        Assert.Contains(senders.Series, s => s.Label.Contains("Jain", StringComparison.Ordinal) && s.RightAxis && s.Points.Any());
        Assert.Equal("Jain's fairness index over the senders", senders.RightLabel);
    }
}
