using System.Net;
using QuickSilver.Compare.RawUdp;

namespace QuickSilver.Compare;

/// <summary>The hidden child roles of the runner; each prints one <c>RESULT</c> line.</summary>
internal static class Roles
{
    public const string UdpSend = "udp-send";
    public const string UdpReceive = "udp-recv";
    public const string QsReceive = "qs-recv";

    public static async Task<int> RunAsync(string role, string[] args)
    {
        var a = new RoleArgs(args);
        switch (role)
        {
            case UdpSend:
                {
                    var options = UdpPassOptions.FromArgs(a);
                    using var blaster = new UdpBlaster();
                    Console.WriteLine($"READY ack={blaster.AckEndPoint.Port}");
                    var s = blaster.Run(options, CancellationToken.None);
                    Console.WriteLine(ResultLine.Format("sender", ("sent", s.Sent), ("expected", options.Total), ("members", s.ReceiversReady),
                        ("stalls", s.Stalls), ("start_us", s.StartMicros), ("measured_start_us", s.MeasuredStartMicros), ("end_us", s.EndMicros)));
                    return s.Sent == options.Total ? 0 : 2;
                }

            case UdpReceive:
                {
                    var options = UdpPassOptions.FromArgs(a);
                    var blaster = new IPEndPoint(IPAddress.Loopback, a.Int("ack", 0));
                    var r = await UdpReceiver.RunAsync(options, a.Int("id", 0), blaster, CancellationToken.None);
                    Console.WriteLine(r.Count.ResultLine(options.Total, ("rcvbuf", r.ReceiveBuffer)));
                    return 0;
                }

            case QsReceive:
                return await QsReceiverRole.RunAsync(a);

            default:
                await Console.Error.WriteLineAsync($"unknown role '{role}'");
                return 64;
        }
    }
}
