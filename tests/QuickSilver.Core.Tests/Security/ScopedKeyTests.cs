using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Tests.Security;

/// <summary>
/// Keys per scope (a region) on top of the cluster key (docs/security.md, "Keys per region and view"): the table's
/// bounds; a scoped datagram sealed under its region's current key and accepted only under a key of that region once the
/// receiver holds one (the cluster key, another region's key, a retired or unknown key are all refused and counted);
/// the datagram limit per key; scoped control messages; the key wrap; option validation.
/// </summary>
public sealed class ScopedKeyTests
{
    private static readonly NetAddress A = NetAddress.Loopback(5101);
    private static readonly NetAddress B = NetAddress.Loopback(5102);
    private static readonly byte[] Secret = Enumerable.Range(1, 32).Select(i => (byte)i).ToArray();
    private const PacketType Scoped = (PacketType)5;
    private const PacketType Plain = (PacketType)9;

    public static TheoryData<DatagramSecurity> Modes => new() { DatagramSecurity.Authenticate, DatagramSecurity.Encrypt };

    private static DatagramSecurityOptions Options(DatagramSecurity mode, long maxPerKey = 1L << 30)
        => new() { Mode = mode, ClusterSecret = Secret, MaxDatagramsPerKey = maxPerKey };

    private static byte[] Key(byte fill) => Enumerable.Repeat(fill, DatagramKeyRing.KeyBytes).ToArray();

    /// <summary>A datagram of <paramref name="type"/> naming region <paramref name="region"/> right after the common header.</summary>
    private static byte[] Datagram(PacketType type, uint region, int length = 100)
    {
        var bytes = new byte[length];
        new PacketHeader(type, 42, (ushort)length).Write(bytes);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes.AsSpan(PacketHeader.Size), region);
        return bytes;
    }

    private sealed class Side
    {
        public Side(NetAddress address, DatagramSecurityOptions options)
        {
            Wire = new WireDouble(address);
            Transport = new SecureTransport(Wire, options);
            Transport.ScopeByField(Scoped, PacketHeader.Size);
            Transport.SetHandler(Stack);
        }

        public WireDouble Wire { get; }

        public SecureTransport Transport { get; }

        public Received Stack { get; } = new();
    }

    /// <summary>Sends <paramref name="datagram"/> from <paramref name="from"/> to <paramref name="to"/>; true when the
    /// receiver's stack got it.</summary>
    private static bool Carry(Side from, Side to, byte[] datagram)
    {
        int before = to.Stack.Count;
        Assert.True(from.Transport.TrySend(B, datagram));
        to.Wire.Deliver(A, from.Wire.Last.ToArray());
        return to.Stack.Count == before + 1;
    }

    [Fact]
    public void The_table_holds_four_keys_a_scope_the_newest_current_and_retires_older_ones()
    {
        using var table = new ScopedKeyTable();
        Assert.False(table.TryCurrent(7, out _));
        for (uint id = 1; id <= 5; id++)
        {
            Assert.True(table.Install(7, id, Key((byte)id)));
            Assert.True(table.TryCurrent(7, out var current));
            Assert.Equal(id, current.Id);
        }

        Assert.Equal([2u, 3, 4, 5], table.IdsOf(7)); // the fifth pushed the first out
        Assert.Equal(1, table.Overflowed);
        Assert.False(table.TryGet(1, out _));
        Assert.False(table.Install(7, 5, Key(9))); // the same id again: nothing changes
        Assert.Equal(2, table.RetireBefore(7, 4));
        Assert.Equal([4u, 5], table.IdsOf(7));
        Assert.True(table.Install(8, 4, Key(1))); // an id reused for another scope (a restarted GMS) moves there
        Assert.Equal([5u], table.IdsOf(7));
        Assert.Equal([4u], table.IdsOf(8));
        table.RemoveScope(8);
        Assert.False(table.HasScope(8));
        Assert.Equal(1, table.Count);
        Assert.Throws<ArgumentException>(() => table.Install(7, DatagramKeyRing.ClusterKeyId, Key(1)));
        Assert.Throws<ArgumentException>(() => table.Install(7, 9, new byte[16]));
    }

    [Theory]
    [MemberData(nameof(Modes))]
    public void A_region_datagram_is_taken_only_under_a_key_of_its_region_once_the_receiver_holds_one(DatagramSecurity mode)
    {
        var sender = new Side(A, Options(mode));
        var receiver = new Side(B, Options(mode));

        // Nobody holds region keys: the cluster key covers everything, as before keys were handed out.
        Assert.True(Carry(sender, receiver, Datagram(Scoped, 3)));

        // The receiver holds region 3's key: the cluster key no longer covers region 3, but still other regions and types.
        receiver.Transport.ScopedKeys.Install(3, 10, Key(1));
        Assert.False(Carry(sender, receiver, Datagram(Scoped, 3)));
        Assert.Equal(1, receiver.Transport.Counters[DatagramRejection.WrongKey]);
        Assert.True(Carry(sender, receiver, Datagram(Scoped, 4)));
        Assert.True(Carry(sender, receiver, Datagram(Plain, 3)));

        // The sender gets the key too: region 3 is sealed under it and taken, byte for byte.
        sender.Transport.ScopedKeys.Install(3, 10, Key(1));
        var datagram = Datagram(Scoped, 3);
        Assert.True(Carry(sender, receiver, datagram));
        Assert.Equal(10u, BinaryPrimitives.ReadUInt32LittleEndian(sender.Wire.Last[^DatagramSealer.HeaderBytes..]));
        Assert.Equal(datagram, receiver.Stack.Datagrams[^1]);

        // A key of region 3 on a datagram of region 4, or of another type, is the wrong key.
        receiver.Wire.Deliver(A, SealedUnder(sender, 3, Datagram(Scoped, 4)));
        receiver.Wire.Deliver(A, SealedUnder(sender, 3, Datagram(Plain, 3)));
        Assert.Equal(3, receiver.Transport.Counters[DatagramRejection.WrongKey]);

        // The same id with other bytes fails the tag; an id the receiver does not hold is unknown; a retired one too.
        var guesser = new Side(A, Options(mode));
        guesser.Transport.ScopedKeys.Install(3, 10, Key(2));
        Assert.False(Carry(guesser, receiver, Datagram(Scoped, 3)));
        Assert.Equal(1, receiver.Transport.Counters[DatagramRejection.BadTag]);
        receiver.Transport.ScopedKeys.Install(3, 11, Key(3));
        Assert.True(Carry(sender, receiver, Datagram(Scoped, 3))); // key 10 is still held (not yet retired)
        receiver.Transport.ScopedKeys.RetireBefore(3, 11);
        Assert.False(Carry(sender, receiver, Datagram(Scoped, 3)));
        Assert.Equal(1, receiver.Transport.Counters[DatagramRejection.UnknownKey]);
        sender.Transport.ScopedKeys.Install(3, 11, Key(3));
        Assert.True(Carry(sender, receiver, Datagram(Scoped, 3)));
    }

    /// <summary><paramref name="datagram"/> sealed under <paramref name="scope"/>'s current key of <paramref name="side"/>,
    /// whatever region it names (what a holder of region 3's key could send to pass a datagram of region 4 off).</summary>
    private static byte[] SealedUnder(Side side, uint scope, byte[] datagram)
    {
        var sealer = new DatagramSealer(side.Transport.Mode, side.Transport.Keys);
        Assert.True(side.Transport.ScopedKeys.TryCurrent(scope, out var key));
        var buffer = new byte[datagram.Length + sealer.Overhead];
        datagram.CopyTo(buffer, 0);
        return buffer[..sealer.Seal(buffer, datagram.Length, key.Cipher, key.Id)];
    }

    [Fact]
    public void A_key_reports_itself_worn_out_at_the_limit_and_again_every_eighth_of_it()
    {
        var sender = new Side(A, Options(DatagramSecurity.Authenticate, maxPerKey: 1_000));
        sender.Transport.ScopedKeys.Install(3, 10, Key(1));
        var reports = new List<(uint Scope, uint Key, long At)>();
        sender.Transport.KeyWornOut += (scope, key) => reports.Add((scope, key, sender.Transport.Counters.Sealed));
        for (int i = 0; i < 1_300; i++)
        {
            Assert.True(sender.Transport.TrySend(B, Datagram(Scoped, 3)));
            Assert.True(sender.Transport.TrySend(B, Datagram(Scoped, 4))); // no key: the cluster key, not counted
        }

        Assert.Equal([(3u, 10u, 1_999L), (3u, 10u, 2_249L), (3u, 10u, 2_499L)], reports);
    }

    [Theory]
    [MemberData(nameof(Modes))]
    public void Scoped_control_messages_are_sealed_under_their_regions_key_and_refused_otherwise(DatagramSecurity mode)
    {
        var sender = new Side(A, Options(mode));
        var receiver = new Side(B, Options(mode));
        var wire = new ChannelDouble();
        var outgoing = new ScopedControlChannel(wire, sender.Transport, scopeOffset: 1);
        var incoming = new ScopedControlChannel(wire.Peer, receiver.Transport, scopeOffset: 1);
        var got = new List<byte[]>();
        incoming.SetReceiver((_, message) => got.Add(message.ToArray()), _ => { });
        byte[] Message(uint region) => [1, .. BitConverter.GetBytes(region), 9, 9, 9];

        Assert.True(outgoing.Send(B, Message(3))); // no keys: plain
        receiver.Transport.ScopedKeys.Install(3, 10, Key(1));
        Assert.True(outgoing.Send(B, Message(3))); // the receiver holds region 3's key: refused
        sender.Transport.ScopedKeys.Install(3, 10, Key(1));
        Assert.True(outgoing.Send(B, Message(3))); // sealed
        Assert.Equal(Message(3), wire.Last[1..^receiver.Transport.Overhead]);
        var forged = (byte[])wire.Last.Clone();
        forged[3] ^= 1; // the region's bytes
        wire.Peer.Deliver(A, forged);
        var stale = new Side(A, Options(mode));
        stale.Transport.ScopedKeys.Install(3, 12, Key(1));
        var staleChannel = new ScopedControlChannel(wire, stale.Transport, 1);
        Assert.True(staleChannel.Send(B, Message(3))); // a key id the receiver lacks (yet): parked
        Assert.Equal(1, incoming.Parked);
        wire.Peer.Deliver(A, [2, 1, 2]); // neither plain nor sealed
        Assert.True(outgoing.Send(B, Message(4))); // the sender holds no key for region 4: plain, and taken

        Assert.Equal([Message(3), Message(3), Message(4)], got);
        var counters = receiver.Transport.MessageCounters;
        Assert.Equal(3, counters.Opened);
        Assert.Equal(1, counters[DatagramRejection.WrongKey]);
        Assert.Equal(1, counters[DatagramRejection.BadTag]);
        Assert.Equal(0, counters[DatagramRejection.UnknownKey]);
        Assert.Equal(1, counters[DatagramRejection.Truncated]);

        receiver.Transport.ScopedKeys.Install(3, 12, Key(1)); // the rotated key arrives: the parked message opens
        Assert.Equal(0, incoming.Parked);
        Assert.Equal([Message(3), Message(3), Message(4), Message(3)], got);
        Assert.Equal(4, counters.Opened);

        // Parking is bounded: past MaxParked the oldest are dropped and counted.
        var never = new Side(A, Options(mode));
        never.Transport.ScopedKeys.Install(3, 99, Key(1));
        var neverChannel = new ScopedControlChannel(wire, never.Transport, 1);
        for (int i = 0; i < ScopedControlChannel.MaxParked + 5; i++)
        {
            Assert.True(neverChannel.Send(B, Message(3)));
        }

        Assert.Equal(ScopedControlChannel.MaxParked, incoming.Parked);
        Assert.Equal(5, counters[DatagramRejection.UnknownKey]);
    }

    [Fact]
    public void A_wrapped_key_unwraps_only_under_the_same_secret_id_region_and_view()
    {
        using var wrap = new RegionKeyWrap(Secret);
        var key = Key(5);
        var wrapped = wrap.Wrap(10, 3, 7, key);
        Assert.Equal(RegionKeyWrap.WrappedBytes, wrapped.Length);
        Assert.True(wrapped.AsSpan().IndexOf(key) < 0, "the key travels in clear");
        var back = new byte[32];
        Assert.True(wrap.TryUnwrap(10, 3, 7, wrapped, back));
        Assert.Equal(key, back);
        Assert.False(wrap.TryUnwrap(11, 3, 7, wrapped, back));
        Assert.False(wrap.TryUnwrap(10, 4, 7, wrapped, back));
        Assert.False(wrap.TryUnwrap(10, 3, 8, wrapped, back));
        Assert.False(wrap.TryUnwrap(10, 3, 7, wrapped.AsSpan(0, wrapped.Length - 1), back));
        using var other = new RegionKeyWrap(DatagramSecurityOptions.GenerateSecret());
        Assert.False(other.TryUnwrap(10, 3, 7, wrapped, back));
    }

    [Fact]
    public void Bad_key_options_are_refused_naming_the_option()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => (Options(DatagramSecurity.Authenticate) with { MaxDatagramsPerKey = 999 }).Validate("QuickSilverNodeOptions.Security"));
        Assert.Equal("QuickSilverNodeOptions.Security.MaxDatagramsPerKey", e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => (Options(DatagramSecurity.Authenticate) with { MaxDatagramsPerKey = (1L << 32) + 1 }).Validate());
        Assert.Equal("DatagramSecurityOptions.MaxDatagramsPerKey", e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => (Options(DatagramSecurity.Authenticate) with { KeyRetireDelay = TimeSpan.Zero }).Validate());
        Assert.Equal("DatagramSecurityOptions.KeyRetireDelay", e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => (Options(DatagramSecurity.Authenticate) with { KeyRetireDelay = TimeSpan.FromMinutes(2) }).Validate());
        Assert.Contains("KeyRetireDelay", e.Message);
        Options(DatagramSecurity.Encrypt, maxPerKey: 1L << 32).Validate();
    }

    /// <summary>One side of a control channel: what is sent is kept and handed to the peer's receiver.</summary>
    private sealed class ChannelDouble : IControlChannel
    {
        private Action<NetAddress, ReadOnlySpan<byte>>? _receiver;

        public ChannelDouble(ChannelDouble? peer = null) => Peer = peer ?? new ChannelDouble(this);

        public ChannelDouble Peer { get; }

        public byte[] Last { get; private set; } = [];

        public int MaxMessageBytes => 1024;

        public bool Send(NetAddress peer, ReadOnlySpan<byte> message)
        {
            Last = message.ToArray();
            Peer.Deliver(A, Last);
            return true;
        }

        public void Deliver(NetAddress from, byte[] message) => _receiver?.Invoke(from, message);

        public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed) => _receiver = onMessage;

        public void Forget(NetAddress peer)
        {
        }
    }
}
