using System.Globalization;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Qsm.Tests;

public sealed class ResultTableTests
{
    [Fact]
    public void Csv_has_the_header_then_the_rows_in_the_invariant_culture()
    {
        var previous = CultureInfo.CurrentCulture;
        CultureInfo.CurrentCulture = new CultureInfo("de-DE"); // a decimal comma must not leak into the file
        try
        {
            var table = new ResultTable("t", "nodes", "msgs/s", "note");
            table.Add(25, 9850.5, "a, \"quoted\" note");
            table.Add(71, double.NaN, null);
            var text = new StringWriter();
            table.WriteCsv(text);

            Assert.Equal("nodes,msgs/s,note\n25,9850.5,\"a, \"\"quoted\"\" note\"\n71,,\n", text.ToString());
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
