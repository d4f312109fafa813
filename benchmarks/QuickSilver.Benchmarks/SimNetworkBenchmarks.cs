using BenchmarkDotNet.Attributes;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Benchmarks;

/// <summary>
/// Simulated network speed: one sender multicasts 100-byte datagrams to 20 receivers with a counting handler.
/// One operation = one datagram delivered to one receiver, so Mean is wall time per simulated delivery
/// (1 / Mean = deliveries per second). Target: at least 1,000,000 deliveries per second.
/// </summary>
[MemoryDiagnoser]
[Config(typeof(ThroughputConfig))]
public class SimNetworkBenchmarks
{
    private const int Receivers = 20;
    private const int Datagrams = 5_000;

    private SimNetwork? _net;
    private IDatagramTransport? _sender;
    private readonly byte[] _payload = new byte[100];
    private readonly NetAddress _group = new(0xEF000001, 7);
    private Counter? _counter;

    [GlobalSetup]
    public void Setup()
    {
        _net = new SimNetwork(1, new LinkOptions { QueueLimitPackets = 1_000_000 });
        _sender = _net.AddNode().Open(7);
        _counter = new Counter();
        for (int i = 0; i < Receivers; i++)
        {
            var r = _net.AddNode().Open(7);
            r.SetHandler(_counter);
            r.JoinGroup(_group);
        }
    }

    [Benchmark(OperationsPerInvoke = Receivers * Datagrams)]
    public long MulticastFanOut()
    {
        long before = _counter!.Count;
        for (int i = 0; i < Datagrams; i++)
        {
            _sender!.TrySend(_group, _payload);
            if (i % 100 == 99)
            {
                _net!.RunFor(TimeSpan.FromMilliseconds(1));
            }
        }

        _net!.RunFor(TimeSpan.FromSeconds(1));
        long delivered = _counter.Count - before;
        if (delivered != Receivers * Datagrams)
        {
            throw new InvalidOperationException($"{delivered} deliveries, expected {Receivers * Datagrams}");
        }

        return delivered;
    }

    private sealed class Counter : IDatagramHandler
    {
        public long Count;

        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram) => Count++;
    }
}
