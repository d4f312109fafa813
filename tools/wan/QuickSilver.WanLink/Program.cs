using System.Diagnostics;
using System.Globalization;
using System.Runtime.InteropServices;
using QuickSilver.WanLink;

// qs-wanlink: the testbed's delay stage (docs/testbed.md). Each --link A,B,MS forwards every Ethernet frame that
// arrives on interface A out of B and every one that arrives on B out of A, each held MS milliseconds (one way).
// Runs until --seconds pass or SIGTERM/SIGINT; prints its counters every --report seconds and at the end.
// Exit 2 on a bad option (naming it), 1 on a socket failure.
var links = new List<(string A, string B, double Ms)>();
int seconds = 3600, report = 0, maxFrames = 4096;
try
{
    for (int i = 0; i < args.Length; i++)
    {
        string Value() => i + 1 < args.Length ? args[++i] : throw new ArgumentException($"{args[i]} needs a value");
        switch (args[i])
        {
            case "--link":
                var parts = Value().Split(',');
                if (parts.Length != 3 || !double.TryParse(parts[2], NumberStyles.Float, CultureInfo.InvariantCulture, out double ms) || ms < 0 || ms > 10_000 || parts[0] == parts[1])
                {
                    throw new ArgumentException($"--link must be IFACE_A,IFACE_B,ONE_WAY_MS (0..10000, two different interfaces); got '{args[i]}'");
                }

                links.Add((parts[0], parts[1], ms));
                break;
            case "--seconds":
                seconds = int.Parse(Value(), CultureInfo.InvariantCulture);
                if (seconds < 1) { throw new ArgumentException("--seconds must be ≥ 1"); }
                break;
            case "--report":
                report = int.Parse(Value(), CultureInfo.InvariantCulture);
                if (report < 0) { throw new ArgumentException("--report must be ≥ 0"); }
                break;
            case "--max-frames":
                maxFrames = int.Parse(Value(), CultureInfo.InvariantCulture);
                if (maxFrames < 1) { throw new ArgumentException("--max-frames must be ≥ 1"); }
                break;
            default:
                throw new ArgumentException($"unknown option '{args[i]}' (--link A,B,MS [--link …] [--seconds N] [--report N] [--max-frames N])");
        }
    }

    if (links.Count == 0)
    {
        throw new ArgumentException("--link is required (IFACE_A,IFACE_B,ONE_WAY_MS)");
    }
}
catch (Exception e) when (e is ArgumentException or FormatException or OverflowException)
{
    Console.Error.WriteLine($"qs-wanlink: {e.Message}");
    return 2;
}

var stop = new CancellationTokenSource();
using var term = PosixSignalRegistration.Create(PosixSignal.SIGTERM, c => { c.Cancel = true; stop.Cancel(); });
using var intr = PosixSignalRegistration.Create(PosixSignal.SIGINT, c => { c.Cancel = true; stop.Cancel(); });
var directions = new List<Direction>();
var sockets = new List<PacketSocket>();
try
{
    foreach (var (a, b, ms) in links)
    {
        var sa = new PacketSocket(a);
        var sb = new PacketSocket(b);
        sockets.Add(sa);
        sockets.Add(sb);
        long delay = (long)(ms * Stopwatch.Frequency / 1000);
        directions.Add(new Direction(sa, sb, new DelayLine(delay, maxFrames, maxFrames * 1600L, 65_536)));
        directions.Add(new Direction(sb, sa, new DelayLine(delay, maxFrames, maxFrames * 1600L, 65_536)));
    }
}
catch (Exception e) when (e is ArgumentException or System.ComponentModel.Win32Exception)
{
    Console.Error.WriteLine($"qs-wanlink: {e.Message}");
    return e is ArgumentException ? 2 : 1;
}

var threads = directions.SelectMany(d => new[] { new Thread(() => d.ReceiveLoop(stop.Token)), new Thread(() => d.SendLoop(stop.Token)) }).ToList();
foreach (var t in threads)
{
    t.IsBackground = true;
    t.Start();
}

Console.WriteLine($"qs-wanlink: {string.Join("; ", links.Select(l => $"{l.A}<->{l.B} {l.Ms.ToString(CultureInfo.InvariantCulture)} ms"))}");
var end = DateTime.UtcNow.AddSeconds(seconds);
var nextReport = report > 0 ? DateTime.UtcNow.AddSeconds(report) : DateTime.MaxValue;
while (!stop.IsCancellationRequested && DateTime.UtcNow < end)
{
    stop.Token.WaitHandle.WaitOne(100);
    if (DateTime.UtcNow >= nextReport)
    {
        nextReport = DateTime.UtcNow.AddSeconds(report);
        foreach (var d in directions) { Console.WriteLine(d); }
    }
}

stop.Cancel();
foreach (var t in threads)
{
    t.Join(1000);
}

foreach (var d in directions) { Console.WriteLine(d); }
foreach (var s in sockets) { s.Dispose(); }
return 0;

/// <summary>Frames arriving on <c>From</c> held in <c>Line</c>, then sent out of <c>To</c>.</summary>
internal sealed class Direction(PacketSocket from, PacketSocket to, DelayLine line)
{
    private long _sendFailures;

    public void ReceiveLoop(CancellationToken stop)
    {
        var buffer = new byte[65_536 + 64];
        while (!stop.IsCancellationRequested)
        {
            int n = from.Receive(buffer);
            if (n <= 0)
            {
                continue;
            }

            lock (line)
            {
                bool wasEmpty = line.Count == 0;
                if (line.TryEnqueue(buffer.AsSpan(0, n), Stopwatch.GetTimestamp()) && wasEmpty)
                {
                    Monitor.Pulse(line);
                }
            }
        }
    }

    public void SendLoop(CancellationToken stop)
    {
        var buffer = new byte[65_536];
        while (!stop.IsCancellationRequested)
        {
            int n;
            lock (line)
            {
                long now = Stopwatch.GetTimestamp();
                n = line.TryDequeue(now, buffer);
                if (n < 0)
                {
                    // Sleep until the oldest frame is due (or a frame arrives in an empty line, or 100 ms pass).
                    long wait = line.NextDue is { } due ? (due - now) * 1000 / Stopwatch.Frequency : 100;
                    Monitor.Wait(line, (int)Math.Clamp(wait, 0, 100));
                    continue;
                }
            }

            if (!to.Send(buffer.AsSpan(0, n)))
            {
                Interlocked.Increment(ref _sendFailures);
            }
        }
    }

    public override string ToString() =>
        $"{from.Name}->{to.Name}: in {line.Accepted}, out {line.Released}, held {line.Count}, overflow {line.Overflow}, oversize {line.Oversize}, send-failures {Interlocked.Read(ref _sendFailures)}";
}
