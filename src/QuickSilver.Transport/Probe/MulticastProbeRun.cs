using System.Diagnostics;
using System.Net.Sockets;
using QuickSilver.Core;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Probe;

/// <summary>Parameters of a <see cref="MulticastProbeRun"/>.</summary>
public sealed record MulticastProbeOptions
{
    public IoBackendKind Backend { get; init; } = IoBackendKind.Auto;

    /// <summary>Receiver cores (each with its own endpoint joined to the group). The sender is one more core.</summary>
    public int Receivers { get; init; } = 2;

    /// <summary>Datagrams the sender multicasts.</summary>
    public int Datagrams { get; init; } = 100_000;

    /// <summary>Datagram size in bytes, headers included.</summary>
    public int DatagramBytes { get; init; } = 100;

    /// <summary>Stop waiting after this long even if datagrams are missing (the result then says so).</summary>
    public TimeSpan Timeout { get; init; } = TimeSpan.FromMinutes(3);

    /// <summary>Multicast group; null picks a random group in 239.255.0.0/16 and a random port, so parallel runs don't mix.</summary>
    public NetAddress? Group { get; init; }

    /// <summary>How the receivers' group sockets bind (tests force the Windows way on Linux). Auto follows the OS.</summary>
    internal GroupBindStrategy GroupBind { get; init; }

    public void Validate()
    {
        OptionChecks.InRange(Receivers, 1, 64, $"MulticastProbeOptions.{nameof(Receivers)}");
        OptionChecks.InRange(Datagrams, 1, 100_000_000, $"MulticastProbeOptions.{nameof(Datagrams)}");
        OptionChecks.InRange(DatagramBytes, ProbeWire.MinSize, 1472, $"MulticastProbeOptions.{nameof(DatagramBytes)}");
        OptionChecks.Positive(Timeout, $"MulticastProbeOptions.{nameof(Timeout)}");
        if (Group is { IsMulticast: false } g)
        {
            throw new ArgumentException($"MulticastProbeOptions.Group must be a multicast address, got {g}.", nameof(Group));
        }
    }
}

/// <summary>What a <see cref="MulticastProbeRun"/> measured.</summary>
public sealed record MulticastProbeResult(
    IoBackendKind Backend,
    int Datagrams,
    int DatagramBytes,
    int Window,
    int AckEvery,
    IReadOnlyList<long> ReceivedPerReceiver,
    IReadOnlyList<int> MissingPerReceiver,
    TimeSpan Elapsed)
{
    public bool Complete => MissingPerReceiver.All(m => m == 0);

    /// <summary>Datagrams per second delivered to each receiver (the sender's rate once all arrive).</summary>
    public double DatagramsPerSecond => ReceivedPerReceiver.Min() / Elapsed.TotalSeconds;
}

/// <summary>
/// One sender core multicasting <see cref="ProbeSender"/> traffic over loopback IP multicast to several receiver
/// cores in this process, flow-controlled so that every datagram should arrive. Used by the core demo, the
/// transport tests and the UDP benchmarks.
/// </summary>
public static class MulticastProbeRun
{
    /// <summary>Runs the exchange. <paramref name="progress"/> is called about every <paramref name="progressInterval"/>
    /// with the per-receiver counts so far (from the calling thread).</summary>
    public static MulticastProbeResult Execute(MulticastProbeOptions options, Action<IReadOnlyList<long>, TimeSpan>? progress = null,
        TimeSpan? progressInterval = null)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        (int window, int ackEvery) = SizeWindow(options.DatagramBytes);
        var group = options.Group ?? new NetAddress(0xEFFF0000u | (uint)Random.Shared.Next(1, 0xFFFF), (ushort)Random.Shared.Next(20000, 60000));

        var cores = new List<QuickSilverCore>();
        try
        {
            var senderCore = QuickSilverCore.Start(new CoreOptions { Name = "sender", Backend = options.Backend });
            cores.Add(senderCore);
            var senderEndpoint = senderCore.OpenUdp();
            var receivers = new List<ProbeReceiver>();
            for (int i = 0; i < options.Receivers; i++)
            {
                var core = QuickSilverCore.Start(new CoreOptions { Name = $"receiver{i}", Backend = options.Backend });
                cores.Add(core);
                var endpoint = core.OpenUdp(new UdpEndpointOptions { GroupBind = options.GroupBind });
                var receiver = new ProbeReceiver(endpoint, senderEndpoint.LocalAddress, options.Datagrams, ackEvery, core.Counters.Drops);
                core.Invoke(() =>
                {
                    endpoint.SetHandler(receiver);
                    endpoint.JoinGroup(group);
                });
                receivers.Add(receiver);
            }

            var sender = new ProbeSender(group, options.Datagrams, window, options.DatagramBytes, options.Receivers);
            var clock = Stopwatch.StartNew();
            senderCore.Invoke(() =>
            {
                senderEndpoint.SetHandler(sender);
                sender.Channel = senderEndpoint.RegisterFeed(sender);
            });

            var interval = progressInterval ?? TimeSpan.FromSeconds(1);
            var nextProgress = interval;
            while (receivers.Any(r => r.Received < options.Datagrams) && clock.Elapsed < options.Timeout)
            {
                Thread.Sleep(5);
                if (progress is not null && clock.Elapsed >= nextProgress)
                {
                    progress(receivers.Select(r => r.Received).ToArray(), clock.Elapsed);
                    nextProgress += interval;
                }
            }

            var elapsed = clock.Elapsed;
            foreach (var core in cores)
            {
                core.Stop();
            }

            return new MulticastProbeResult(
                senderCore.Backend, options.Datagrams, options.DatagramBytes, window, ackEvery,
                receivers.Select(r => r.Received).ToArray(),
                receivers.Select(r => r.CountMissing()).ToArray(),
                elapsed);
        }
        finally
        {
            foreach (var core in cores)
            {
                core.Dispose();
            }
        }
    }

    /// <summary>
    /// A window the receive buffer can always queue whole: the kernel's granted SO_RCVBUF divided by 2 KiB per
    /// datagram (an over-estimate of loopback's per-datagram overhead for datagrams up to 1 KiB, and twice the size
    /// beyond). Acknowledgements every half window, at most every 1,000 datagrams.
    /// </summary>
    public static (int Window, int AckEvery) SizeWindow(int datagramBytes)
    {
        using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        probe.ReceiveBufferSize = new UdpEndpointOptions().SocketReceiveBufferBytes;
        int granted = probe.ReceiveBufferSize;
        int perDatagram = Math.Max(2048, datagramBytes * 2);
        int window = Math.Clamp(granted / perDatagram, 16, 4000);
        return (window, Math.Min(1000, window / 2));
    }
}
