using System.Globalization;
using System.Text;

namespace QuickSilver.Qsm.Simulation;

/// <summary>A table of measured figures, written as CSV (RFC 4180 quoting) or Markdown, always in the invariant
/// culture. NaN (nothing measured) is written as an empty cell.</summary>
public sealed class ResultTable(string title, params string[] columns)
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

    public void WriteCsv(TextWriter writer)
    {
        ArgumentNullException.ThrowIfNull(writer);
        writer.Write(string.Join(',', Columns.Select(Quote)) + "\n");
        foreach (var row in _rows)
        {
            writer.Write(string.Join(',', row.Select(Quote)) + "\n");
        }
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

    private static string Quote(string cell)
        => cell.IndexOfAny([',', '"', '\n', '\r']) < 0 ? cell : "\"" + cell.Replace("\"", "\"\"", StringComparison.Ordinal) + "\"";
}
