using System.Buffers.Binary;
using QuickSilver.Aer.Simulation;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using Xunit.Abstractions;

namespace QuickSilver.Aer.Tests;

/// <summary>The same layer on the real core and real sockets: a source, a repair server and two receivers, each on its
/// own core thread, over loopback IP multicast with loss injected at the receivers' sockets.</summary>
public sealed class RealCoreTests(ITestOutputHelper output)
{
    [Fact]
    public async Task Aer_runs_on_real_cores_over_loopback_multicast_and_repairs_injected_loss()
    {
        const int messages = 3000;
        var random = new Random();
        var group = new NetAddress(0xEFFF0000u | (uint)random.Next(1, 65535), (ushort)random.Next(40_000, 60_000));
        var nodes = new List<(QuickSilverCore Core, ProtocolStack Stack, AerLayer Layer)>();
        try
        {
            (QuickSilverCore, ProtocolStack, AerLayer) Start(double loss, int seed)
            {
                var core = QuickSilverCore.Start(new CoreOptions { Name = $"aer-{nodes.Count}" });
                var endpoint = core.OpenUdp(new UdpEndpointOptions { InjectedLossRate = loss, InjectedLossSeed = seed });
                var layer = new AerLayer(new AerOptions(), new Random(seed));
                ProtocolStack? stack = null;
                core.Invoke(() => stack = new StackBuilder(endpoint, core).Add(layer).Build());
                nodes.Add((core, stack!, layer));
                return (core, stack!, layer);
            }

            var source = Start(0, 1);
            var server = Start(0, 2);
            var r1 = Start(0.03, 3);
            var r2 = Start(0.03, 4);
            var sourceAddress = source.Item2.Transport.LocalAddress;
            var receiverAddresses = new[] { r1.Item2.Transport.LocalAddress, r2.Item2.Transport.LocalAddress };
            long[] delivered = new long[2];
            long[] disorder = new long[2];
            server.Item1.Invoke(() => server.Item3.AddRepairServer(1, group, sourceAddress, receiverAddresses));
            for (int i = 0; i < 2; i++)
            {
                int k = i;
                var node = i == 0 ? r1 : r2;
                node.Item1.Invoke(() => node.Item3.AddReceiver(1, group, sourceAddress, (seq, payload) =>
                {
                    if (BinaryPrimitives.ReadInt64LittleEndian(payload) != seq || seq != Volatile.Read(ref delivered[k]) + 1)
                    {
                        Interlocked.Increment(ref disorder[k]);
                    }

                    Interlocked.Increment(ref delivered[k]);
                }));
            }

            // Let the SPMs reach the repair server and the receivers before the data starts.
            source.Item1.Invoke(() => source.Item3.AddSender(1, group, new CountingFeed(messages, 1000), [server.Item2.Transport.LocalAddress]));
            var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(60);
            while (DateTime.UtcNow < deadline && (Volatile.Read(ref delivered[0]) < messages || Volatile.Read(ref delivered[1]) < messages))
            {
                await Task.Delay(50);
            }

            foreach (var (core, stack, _) in nodes)
            {
                output.WriteLine(await core.InvokeAsync(stack.Describe));
            }

            Assert.Equal(messages, Volatile.Read(ref delivered[0]));
            Assert.Equal(messages, Volatile.Read(ref delivered[1]));
            Assert.Equal(0, disorder[0] + disorder[1]);
            Assert.True(r1.Item3.Counters.RepairsReceived + r2.Item3.Counters.RepairsReceived > 50, "the injected loss was repaired");
            Assert.True(server.Item3.Counters.NaksReceived > 0, "the receivers NAKed their repair server");
        }
        finally
        {
            foreach (var (core, stack, _) in nodes)
            {
                core.Invoke(stack.Stop);
                core.Dispose();
            }
        }
    }
}
