using System.Diagnostics;
using System.Globalization;
using System.Text;

namespace QuickSilver.Samples.QuickStart;

/// <summary>Prints, once a second, how many messages were sent and each receiver's delivery rate and total.</summary>
internal sealed class Progress : IDisposable
{
    private readonly IReadOnlyList<ReceiverProcess> _receivers;
    private readonly long[] _last;
    private readonly Stopwatch _clock = Stopwatch.StartNew();
    private readonly Timer _timer;
    private TimeSpan _lastTime;
    private long _sent;
    private int _disposed;

    public Progress(IReadOnlyList<ReceiverProcess> receivers)
    {
        _receivers = receivers;
        _last = new long[receivers.Count];
        _timer = new Timer(_ => Print(), null, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(1));
    }

    public long Sent
    {
        get => Interlocked.Read(ref _sent);
        set => Interlocked.Exchange(ref _sent, value);
    }

    private void Print()
    {
        lock (_last)
        {
            if (_disposed != 0)
            {
                return;
            }

            var now = _clock.Elapsed;
            double dt = Math.Max((now - _lastTime).TotalSeconds, 1e-3);
            var line = new StringBuilder(string.Create(CultureInfo.InvariantCulture, $"[{now.TotalSeconds,5:F1}s] sent {Sent,9:N0} |"));
            foreach (var r in _receivers)
            {
                long delivered = r.Delivered;
                line.Append(CultureInfo.InvariantCulture, $" {r.Name} {(delivered - _last[r.Index]) / dt,7:N0}/s {delivered,9:N0} |");
                _last[r.Index] = delivered;
            }

            _lastTime = now;
            Console.WriteLine(line.ToString());
        }
    }

    public void Dispose()
    {
        lock (_last)
        {
            _disposed = 1;
        }

        _timer.Dispose();
    }
}
