using System.Diagnostics;
using System.Globalization;
using System.Text;

namespace QuickSilver.Samples.QuickStart;

/// <summary>Prints, once a second, how many messages the publishing node has accepted and each receiver's delivery rate (as the receiver measured it over its last second) and total.</summary>
internal sealed class Progress : IDisposable
{
    private readonly IReadOnlyList<ReceiverProcess> _receivers;
    private readonly Stopwatch _clock = Stopwatch.StartNew();
    private readonly Timer _timer;
    private long _sent;
    private int _disposed;

    public Progress(IReadOnlyList<ReceiverProcess> receivers)
    {
        _receivers = receivers;
        _timer = new Timer(_ => Print(), null, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(1));
    }

    public long Sent
    {
        get => Interlocked.Read(ref _sent);
        set => Interlocked.Exchange(ref _sent, value);
    }

    private void Print()
    {
        lock (_clock)
        {
            if (_disposed != 0)
            {
                return;
            }

            var line = new StringBuilder(string.Create(CultureInfo.InvariantCulture, $"[{_clock.Elapsed.TotalSeconds,5:F1}s] accepted {Sent,9:N0} |"));
            foreach (var r in _receivers)
            {
                line.Append(CultureInfo.InvariantCulture, $" {r.Name} {r.Rate,7:N0}/s {r.Delivered,9:N0} |");
            }

            Console.WriteLine(line.ToString());
        }
    }

    public void Dispose()
    {
        lock (_clock)
        {
            _disposed = 1;
        }

        _timer.Dispose();
    }
}
