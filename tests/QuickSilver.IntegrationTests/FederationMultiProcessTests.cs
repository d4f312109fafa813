using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text;

namespace QuickSilver.IntegrationTests;

/// <summary>Two islands on loopback (two multicast ranges), two <c>qs gateway</c> processes peering over TCP, a
/// <c>qs island-send</c> source in island 1 and a <c>qs island-recv</c> client in island 2 that joins through island 2's
/// mediator group: every message crosses. Waits are hang guards, not timing assertions.</summary>
public sealed class FederationMultiProcessTests
{
    [Fact]
    public async Task Publish_in_one_island_receive_in_the_other_through_two_gateway_processes()
    {
        var random = new Random();
        string Tcp() => string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{FreeTcpPort()}");
        string l1 = Tcp(), l2 = Tcp(), a1 = Tcp(), a2 = Tcp();
        int octet = random.Next(100, 200);
        string P(int port) => port.ToString(CultureInfo.InvariantCulture);
        ushort p1 = Tool.FreeUdpPort(), p2 = Tool.FreeUdpPort(), mediatorPort = Tool.FreeUdpPort(), nativePort = Tool.FreeUdpPort();
        string mediator = $"239.254.{octet}.2:{P(mediatorPort)}";
        string native = $"239.254.{octet}.9";
        using var g1 = Tool.Qs("gateway", "--id", "1", "--island", "1", "--listen", l1, "--admin", a1, "--peer", "2@" + l2,
            "--pool-base", $"239.254.{octet}.16", "--pool-size", "2", "--port-base", P(p1), "--seconds", "120");
        using var g2 = Tool.Qs("gateway", "--id", "2", "--island", "2", "--listen", l2, "--admin", a2, "--peer", "1@" + l1,
            "--pool-base", $"239.254.{octet}.32", "--pool-size", "2", "--port-base", P(p2), "--mediator", mediator, "--seconds", "120");
        Assert.True(await g1.WaitForLineAsync("gateway g1", TimeSpan.FromSeconds(30)), "g1 did not start: " + g1.Stderr);
        Assert.True(await g2.WaitForLineAsync("gateway g2", TimeSpan.FromSeconds(30)), "g2 did not start: " + g2.Stderr);
        Assert.True(await PollAsync(a2, "\"destination\":1,", TimeSpan.FromSeconds(30)), "g2 never learned a route to g1");

        const int Count = 500;
        using var recv = Tool.Qs("island-recv", "--mediator", mediator, "--session", $"bfed://1/{native}/{P(nativePort)}", "--count", P(Count), "--seconds", "60");
        Assert.True(await recv.WaitForLineAsync("joined", TimeSpan.FromSeconds(30)), "no TRANSLATION: " + recv.Stderr + recv.Stdout);
        Assert.True(await PollAsync(a1, "\"root\":true", TimeSpan.FromSeconds(30)), "the JOIN never reached g1");
        using var send = Tool.Qs("island-send", "--group", $"{native}:{P(nativePort)}", "--count", P(Count), "--size", "1000", "--rate", "1000");
        Assert.True(await send.WaitAsync(TimeSpan.FromSeconds(60)), "the source did not finish");
        Assert.True(await recv.WaitAsync(TimeSpan.FromSeconds(60)), "the client did not finish: " + recv.Tail(3));
        Assert.True(recv.ExitCode == 0, $"client exited {recv.ExitCode}: {recv.Tail(3)} {recv.Stderr}");
        Assert.True(recv.HasLine($"received {Count} distinct"), recv.Tail(3));
    }

    private static async Task<bool> PollAsync(string admin, string needle, TimeSpan limit)
    {
        var deadline = DateTime.UtcNow + limit;
        while (DateTime.UtcNow < deadline)
        {
            try
            {
                using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await socket.ConnectAsync(IPEndPoint.Parse(admin));
                await socket.SendAsync("sessions\n"u8.ToArray());
                var buffer = new byte[1 << 16];
                var text = new StringBuilder();
                int n;
                using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(5));
                while ((n = await socket.ReceiveAsync(buffer, SocketFlags.None, cts.Token)) > 0)
                {
                    text.Append(Encoding.UTF8.GetString(buffer, 0, n));
                }

                if (text.ToString().Contains(needle, StringComparison.Ordinal))
                {
                    return true;
                }
            }
            catch (Exception e) when (e is SocketException or OperationCanceledException)
            {
            }

            await Task.Delay(200);
        }

        return false;
    }

    private static int FreeTcpPort()
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        return ((IPEndPoint)listener.LocalEndpoint).Port;
    }
}
