using System.Globalization;
using System.Text;

namespace QuickSilver.BenchmarkOutput;

/// <summary>
/// A CSV table as the benchmark runners write it: a header row, then rows of cells, "\n" line ends, RFC 4180 quoting
/// (a cell holding a comma, a quote or a line break is quoted, quotes doubled). Cells are strings; callers format
/// numbers in the invariant culture (<see cref="Cell"/>). <see cref="Parse"/> reads the same format back, so a
/// written table round-trips.
/// </summary>
public sealed class CsvTable
{
    private readonly List<string[]> _rows = [];

    public CsvTable(IEnumerable<string> header)
    {
        Header = [.. header];
        if (Header.Count == 0)
        {
            throw new ArgumentException("A CSV table needs at least one column.", nameof(header));
        }
    }

    public IReadOnlyList<string> Header { get; }

    public IReadOnlyList<IReadOnlyList<string>> Rows => _rows;

    /// <summary>Adds a row of already formatted cells; it must have one cell per column.</summary>
    public void Add(IEnumerable<string> cells)
    {
        string[] row = [.. cells];
        if (row.Length != Header.Count)
        {
            throw new ArgumentException($"The table has {Header.Count} columns; the row has {row.Length} cells.", nameof(cells));
        }

        _rows.Add(row);
    }

    /// <summary>A cell in the invariant culture: null and NaN become empty, numbers use '.' and no group separators.</summary>
    public static string Cell(object? value) => value switch
    {
        null => "",
        double d when double.IsNaN(d) => "",
        bool b => b ? "true" : "false",
        IFormattable f => f.ToString(null, CultureInfo.InvariantCulture),
        _ => value.ToString() ?? "",
    };

    /// <summary>The index of a column, or -1.</summary>
    public int IndexOf(string column) => Header.ToList().IndexOf(column);

    /// <summary>The cells of <paramref name="column"/> as numbers; a cell that is empty or not a number (e.g. "57 (cut)"
    /// keeps its leading number 57; "did not settle" gives NaN).</summary>
    public double[] Numbers(string column)
    {
        int i = IndexOf(column);
        if (i < 0)
        {
            throw new KeyNotFoundException($"No column '{column}' in [{string.Join(", ", Header)}].");
        }

        return [.. _rows.Select(r => LeadingNumber(r[i]))];
    }

    /// <summary>The number a cell starts with ("57 (cut)" → 57), or NaN.</summary>
    public static double LeadingNumber(string cell)
    {
        string text = cell.Trim();
        int end = text.IndexOf(' ', StringComparison.Ordinal);
        string head = end < 0 ? text : text[..end];
        return double.TryParse(head, NumberStyles.Float, CultureInfo.InvariantCulture, out double value) ? value : double.NaN;
    }

    public string Format()
    {
        var text = new StringBuilder();
        AppendRow(text, Header);
        foreach (var row in _rows)
        {
            AppendRow(text, row);
        }

        return text.ToString();
    }

    public void Write(TextWriter writer)
    {
        ArgumentNullException.ThrowIfNull(writer);
        writer.Write(Format());
    }

    public void Write(string path) => File.WriteAllText(path, Format());

    public static CsvTable Read(string path) => Parse(File.ReadAllText(path));

    /// <summary>Parses CSV text (quoted cells may hold commas, doubled quotes and line breaks; "\r\n" is accepted).</summary>
    public static CsvTable Parse(string text)
    {
        ArgumentNullException.ThrowIfNull(text);
        var records = new List<List<string>>();
        var record = new List<string>();
        var cell = new StringBuilder();
        bool quoted = false, any = false;
        for (int i = 0; i < text.Length; i++)
        {
            char c = text[i];
            if (quoted)
            {
                if (c != '"')
                {
                    cell.Append(c);
                }
                else if (i + 1 < text.Length && text[i + 1] == '"')
                {
                    cell.Append('"');
                    i++;
                }
                else
                {
                    quoted = false;
                }

                continue;
            }

            switch (c)
            {
                case '"':
                    quoted = true;
                    any = true;
                    break;
                case ',':
                    record.Add(cell.ToString());
                    cell.Clear();
                    any = true;
                    break;
                case '\r':
                    break;
                case '\n':
                    record.Add(cell.ToString());
                    records.Add(record);
                    (record, any) = ([], false);
                    cell.Clear();
                    break;
                default:
                    cell.Append(c);
                    any = true;
                    break;
            }
        }

        if (quoted)
        {
            throw new FormatException("The CSV text ends inside a quoted cell.");
        }

        if (any || cell.Length > 0)
        {
            record.Add(cell.ToString());
            records.Add(record);
        }

        if (records.Count == 0)
        {
            throw new FormatException("The CSV text has no header row.");
        }

        var table = new CsvTable(records[0]);
        for (int r = 1; r < records.Count; r++)
        {
            if (records[r].Count != table.Header.Count)
            {
                throw new FormatException($"CSV row {r + 1} has {records[r].Count} cells; the header has {table.Header.Count}.");
            }

            table.Add(records[r]);
        }

        return table;
    }

    public static string Quote(string cell)
        => cell.IndexOfAny([',', '"', '\n', '\r']) < 0 ? cell : "\"" + cell.Replace("\"", "\"\"", StringComparison.Ordinal) + "\"";

    private static void AppendRow(StringBuilder text, IEnumerable<string> cells)
        => text.AppendJoin(',', cells.Select(Quote)).Append('\n');
}
