using QuickSilver.Core.Io;

namespace QuickSilver.Tests;

public sealed class NodeOptionsTests
{
    [Fact]
    public void The_datagram_size_fits_the_interface_unless_given()
    {
        Assert.Equal(16 * 1024, new QuickSilverNodeOptions().DatagramSize);                                     // loopback
        Assert.Equal(1472, new QuickSilverNodeOptions { Bind = new NetAddress(0x0A000001, 0) }.DatagramSize);   // 10.0.0.1: Ethernet
        Assert.Equal(1472, new QuickSilverNodeOptions { Bind = new NetAddress(0, 0) }.DatagramSize);            // any interface
        Assert.Equal(9000, new QuickSilverNodeOptions { Bind = new NetAddress(0x0A000001, 0), MaxDatagramSize = 9000 }.DatagramSize);
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new QuickSilverNodeOptions { MaxDatagramSize = 100 }.Validate());
        Assert.Contains("MaxDatagramSize", e.Message, StringComparison.Ordinal);
    }
}
