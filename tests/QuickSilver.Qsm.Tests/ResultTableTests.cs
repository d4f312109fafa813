using System.Globalization;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Qsm.Tests;

public sealed class ResultTableTests
{
    [Fact]
    public void Cells_are_formatted_in_the_invariant_culture_and_NaN_is_empty()
    {
        var previous = CultureInfo.CurrentCulture;
        CultureInfo.CurrentCulture = new CultureInfo("de-DE"); // a decimal comma must not leak into the tables
        try
        {
            var table = new ResultTable("t", "nodes", "msgs/s", "note");
            table.Add(25, 9850.5, "a note");
            table.Add(71, double.NaN, null);
            Assert.Equal(["25", "9850.5", "a note"], table.Rows[0]);
            Assert.Equal(["71", "", ""], table.Rows[1]);
            Assert.Equal("| nodes | msgs/s | note |\n|---:|---:|---:|\n| 25 | 9850.5 | a note |\n| 71 |  |  |\n", table.ToMarkdown());
        }
        finally
        {
            CultureInfo.CurrentCulture = previous;
        }
    }

    [Fact]
    public void A_row_must_have_one_cell_per_column()
    {
        var table = new ResultTable("t", "a", "b");
        Assert.Throws<ArgumentException>(() => table.Add(1));
    }
}
