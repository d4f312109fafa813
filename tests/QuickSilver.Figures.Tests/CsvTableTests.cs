using System.Globalization;
using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Figures.Tests;

/// <summary>The shared CSV writer and reader (QuickSilver.BenchmarkOutput) that both benchmark runners use.</summary>
public sealed class CsvTableTests
{
    [Fact]
    public void Header_and_rows_round_trip_through_text_with_quoting()
    {
        var table = new CsvTable(["nodes", "msgs/s", "note"]);
        table.Add(["25", "9850.5", "a, \"quoted\"\nnote"]);
        table.Add(["71", "", "57 (cut)"]);

        string text = table.Format();
        var back = CsvTable.Parse(text);

        Assert.Equal("nodes,msgs/s,note\n25,9850.5,\"a, \"\"quoted\"\"\nnote\"\n71,,57 (cut)\n", text);
        Assert.Equal(table.Header, back.Header);
        Assert.Equal(table.Rows, back.Rows);
        Assert.Equal(text, back.Format());
    }

    [Fact]
    public void Cells_are_invariant_whatever_the_current_culture()
    {
        var previous = CultureInfo.CurrentCulture;
        CultureInfo.CurrentCulture = CultureInfo.GetCultureInfo("de-DE");
        try
        {
            Assert.Equal(["1234.5", "", "", "true", "x"], new object?[] { 1234.5, double.NaN, null, true, "x" }.Select(CsvTable.Cell));
        }
        finally
        {
            CultureInfo.CurrentCulture = previous;
        }
    }

    [Fact]
    public void Numbers_keep_a_cells_leading_number_and_give_NaN_otherwise()
    {
        var table = CsvTable.Parse("groups,msgs/s,window s\r\n1,39390,60\r\n1024,did not settle,57 (cut)\r\n");

        Assert.Equal([39390, double.NaN], table.Numbers("msgs/s"));
        Assert.Equal([60, 57], table.Numbers("window s"));
        Assert.Throws<KeyNotFoundException>(() => table.Numbers("nodes"));
    }

    [Fact]
    public void Malformed_text_and_ragged_rows_are_refused()
    {
        Assert.Throws<FormatException>(() => CsvTable.Parse(""));
        Assert.Throws<FormatException>(() => CsvTable.Parse("a,b\n\"open"));
        Assert.Throws<FormatException>(() => CsvTable.Parse("a,b\n1,2,3\n"));
        Assert.Throws<ArgumentException>(() => new CsvTable(["a", "b"]).Add(["1"]));
    }

    [Fact]
    public void A_written_file_reads_back()
    {
        string path = Path.Combine(Path.GetTempPath(), $"figures-{Guid.NewGuid():N}.csv");
        try
        {
            var table = new CsvTable(["x", "y"]);
            table.Add(["1", "2"]);
            table.Write(path);

            Assert.Equal(table.Rows, CsvTable.Read(path).Rows);
        }
        finally
        {
            File.Delete(path);
        }
    }
}
