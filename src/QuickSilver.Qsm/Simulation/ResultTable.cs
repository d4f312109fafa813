using System.Globalization;
using System.Text;

namespace QuickSilver.Qsm.Simulation;

/// <summary>A table of measured figures, its cells formatted in the invariant culture (NaN, nothing measured, is an
/// empty cell), printed as Markdown; the figures runner writes it as CSV and plots it (benchmarks/QuickSilver.BenchmarkOutput).</summary>
internal sealed class ResultTable(string title, params string[] columns)
{
    private readonly List<string[]> _rows = new();

    public string Title { get; } = title;

    public IReadOnlyList<string> Columns { get; } = columns;

    public IReadOnlyList<string[]> Rows => _rows;

    /// <summary>Adds a row; numbers are formatted invariantly, so round them first.</summary>
    public void Add(params object?[] cells)
    {
        if (cells.Length != Columns.Count)
        {
            throw new ArgumentException($"Table '{Title}' has {Columns.Count} columns; got {cells.Length} cells.", nameof(cells));
        }

        _rows.Add([.. cells.Select(Format)]);
    }

    public string ToMarkdown()
    {
        var text = new StringBuilder();
        text.Append("| ").AppendJoin(" | ", Columns).Append(" |\n");
        text.Append('|').AppendJoin("", Columns.Select(_ => "---:|")).Append('\n');
        foreach (var row in _rows)
        {
            text.Append("| ").AppendJoin(" | ", row).Append(" |\n");
        }

        return text.ToString();
    }

    private static string Format(object? cell) => cell switch
    {
        null => "",
        double d when double.IsNaN(d) => "",
        IFormattable f => f.ToString(null, CultureInfo.InvariantCulture),
        _ => cell.ToString() ?? "",
    };
}
