using System.Buffers.Binary;
using BenchmarkDotNet.Attributes;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Wire;

namespace QuickSilver.Benchmarks;

/// <summary>
/// What choosing a region's key costs per datagram (docs/security.md, "Keys per region and view"), through the whole
/// <see cref="SecureTransport"/> (not just the sealer): sending and receiving one 1,000-byte datagram sealed under the
/// cluster key (a type no layer scopes) against one of a scoped type sealed under its region's key, with keys for
/// <see cref="Regions"/> regions held. The difference is the scope read, one dictionary lookup by region on sending and
/// one by key id on receiving, and the check that the key covers the datagram.
/// </summary>
[MemoryDiagnoser]
public class RegionKeyBenchmarks
{
    private const PacketType Scoped = (PacketType)5;
    private const PacketType Unscoped = (PacketType)9;
    private readonly Loop _senderWire = new(NetAddress.Loopback(5201));
    private readonly Loop _receiverWire = new(NetAddress.Loopback(5202));
    private SecureTransport? _sender;
    private SecureTransport? _receiver;
    private readonly byte[] _scoped = new byte[1000];
    private readonly byte[] _unscoped = new byte[1000];
    private byte[] _sealedScoped = [];
    private byte[] _sealedUnscoped = [];

    [Params(DatagramSecurity.Authenticate, DatagramSecurity.Encrypt)]
    public DatagramSecurity Mode { get; set; }

    [Params(16)]
    public int Regions { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        var options = new DatagramSecurityOptions { Mode = Mode, ClusterSecret = DatagramSecurityOptions.GenerateSecret(), ReplayWindow = 0 };
        _sender = new SecureTransport(_senderWire, options);
        _receiver = new SecureTransport(_receiverWire, options);
        var keys = Enumerable.Range(0, Regions).Select(_ => DatagramSecurityOptions.GenerateSecret()).ToArray();
        foreach (var side in new[] { _sender, _receiver })
        {
            side.ScopeByField(Scoped, PacketHeader.Size);
            for (uint region = 1; region <= Regions; region++)
            {
                side.ScopedKeys.Install(region, region * 10, keys[region - 1]);
            }
        }

        _receiver.SetHandler(new Sink());
        new PacketHeader(Scoped, 1, 1000).Write(_scoped);
        BinaryPrimitives.WriteUInt32LittleEndian(_scoped.AsSpan(PacketHeader.Size), (uint)Regions / 2);
        new PacketHeader(Unscoped, 1, 1000).Write(_unscoped);
        _sender.TrySend(_receiverWire.LocalAddress, _scoped);
        _sealedScoped = _senderWire.Last.ToArray();
        _sender.TrySend(_receiverWire.LocalAddress, _unscoped);
        _sealedUnscoped = _senderWire.Last.ToArray();
    }

    [Benchmark(Baseline = true)]
    public bool SendClusterKey() => _sender!.TrySend(_receiverWire.LocalAddress, _unscoped);

    [Benchmark]
    public bool SendRegionKey() => _sender!.TrySend(_receiverWire.LocalAddress, _scoped);

    [Benchmark]
    public void ReceiveClusterKey() => _receiverWire.Deliver(_senderWire.LocalAddress, _sealedUnscoped);

    [Benchmark]
    public void ReceiveRegionKey() => _receiverWire.Deliver(_senderWire.LocalAddress, _sealedScoped);

    [GlobalCleanup]
    public void Cleanup()
    {
        if (_receiver!.Counters.Rejected > 0)
        {
            throw new InvalidOperationException($"The receiver rejected datagrams: {_receiver.Counters}");
        }
    }

    private sealed class Sink : IDatagramHandler
    {
        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
        {
        }
    }

    /// <summary>An endpoint that keeps the last datagram committed and hands received ones to its handler.</summary>
    private sealed class Loop(NetAddress local) : IDatagramTransport
    {
        private readonly byte[] _slot = new byte[1472];
        private IDatagramHandler? _handler;

        public NetAddress LocalAddress { get; } = local;

        public int MaxDatagramSize => 1472;

        public ReadOnlySpan<byte> Last => _slot.AsSpan(0, LastLength);

        public int LastLength { get; private set; }

        public Span<byte> ClaimedSlot => _slot;

        public void SetHandler(IDatagramHandler handler) => _handler = handler;

        public void Deliver(NetAddress from, ReadOnlySpan<byte> datagram) => _handler!.OnDatagram(from, datagram);

        public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
        {
            datagram.CopyTo(_slot);
            LastLength = datagram.Length;
            return true;
        }

        public bool TryClaim(out Span<byte> slot)
        {
            slot = _slot;
            return true;
        }

        public void Commit(NetAddress to, int length) => LastLength = length;

        public IFeedChannel RegisterFeed(IDatagramFeed feed) => throw new NotSupportedException();

        public void JoinGroup(NetAddress group)
        {
        }

        public void LeaveGroup(NetAddress group)
        {
        }
    }
}
