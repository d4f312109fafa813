using System.Net;
using QuickSilver.Compare.RawUdp;

namespace QuickSilver.Compare.Tests;

/// <summary>The raw UDP pair over loopback multicast. The window (32 datagrams of 100 B) is far below any receive
/// buffer Linux grants by default (the 208 KiB rmem default), so nothing can be lost to overrun and every datagram
/// must arrive; the timeouts are hang guards, not speed requirements.</summary>
public sealed class RawUdpSmokeTests
{
    [Fact]
    public async Task Every_receiver_gets_every_warmup_and_measured_datagram_round_robin_over_two_groups()
    {
        var options = new UdpPassOptions
        {
            Receivers = 2,
            Groups = 2,
            Size = 100,
            Messages = 2_000,
            Warmup = 300,
            Window = 32,
            Port = Random.Shared.Next(30_000, 60_000),
            Tag = (byte)Random.Shared.Next(1, 250),
            Timeout = TimeSpan.FromSeconds(60),
            Idle = TimeSpan.FromSeconds(60),
        };
        using var blaster = new UdpBlaster();
        var receivers = Enumerable.Range(0, options.Receivers)
            .Select(i => Task.Run(() => UdpReceiver.RunAsync(options, i, blaster.AckEndPoint, CancellationToken.None)))
            .ToList();
        var sent = await Task.Run(() => blaster.Run(options, CancellationToken.None));
        var results = await Task.WhenAll(receivers);

        Assert.True(sent.ReceiversReady);
        Assert.Equal(options.Total, sent.Sent);
        Assert.InRange(sent.MeasuredStartMicros, sent.StartMicros, sent.EndMicros);
        Assert.All(results, r => Assert.Equal((options.Total, options.Messages), (r.Received, r.Count.Measured)));
    }

    [Fact]
    public void Groups_get_distinct_multicast_addresses_on_one_port()
    {
        var options = new UdpPassOptions { Groups = 256, Tag = 7, Port = 40_000 };
        var addresses = Enumerable.Range(0, options.Groups).Select(options.Group).ToList();
        Assert.Equal(256, addresses.Distinct().Count());
        Assert.All(addresses, a => Assert.True(a.Address.GetAddressBytes()[0] == 239 && a.Port == 40_000));
        Assert.Equal(IPAddress.Parse("239.254.7.255"), addresses[255].Address);
        Assert.Throws<ArgumentOutOfRangeException>(() => (options with { Groups = 257 }).Validate());
    }
}
