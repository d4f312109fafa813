namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// The packets of one page as the codec reads them, whichever shape the caller keeps them in: a span of buffers
/// (<see cref="MemoryPackets"/>, <see cref="WritableMemoryPackets"/>) or one block of equal packets back to back
/// (<see cref="BlockPackets"/>, <see cref="ReadOnlyBlockPackets"/>). The codec's loops are generic over these ref
/// structs, so the JIT compiles one copy per shape with the indexer inlined: no interface call, no boxing.
/// </summary>
internal interface IReadPackets
{
    int Count { get; }

    ReadOnlySpan<byte> this[int index] { get; }
}

/// <summary>Packets the codec also writes (repair packets when encoding, the page's missing packets when decoding).</summary>
internal interface IWritePackets : IReadPackets
{
    Span<byte> Target(int index);
}

internal readonly ref struct MemoryPackets : IReadPackets
{
    private readonly ReadOnlySpan<ReadOnlyMemory<byte>> _items;

    public MemoryPackets(ReadOnlySpan<ReadOnlyMemory<byte>> items) => _items = items;

    public int Count => _items.Length;

    public ReadOnlySpan<byte> this[int index] => _items[index].Span;
}

internal readonly ref struct WritableMemoryPackets : IWritePackets
{
    private readonly ReadOnlySpan<Memory<byte>> _items;

    public WritableMemoryPackets(ReadOnlySpan<Memory<byte>> items) => _items = items;

    public int Count => _items.Length;

    public ReadOnlySpan<byte> this[int index] => _items[index].Span;

    public Span<byte> Target(int index) => _items[index].Span;
}

internal readonly ref struct BlockPackets : IWritePackets
{
    private readonly Span<byte> _block;
    private readonly int _length;

    public BlockPackets(Span<byte> block, int length, int count)
    {
        _block = block;
        _length = length;
        Count = count;
    }

    public int Count { get; }

    public ReadOnlySpan<byte> this[int index] => _block.Slice(index * _length, _length);

    public Span<byte> Target(int index) => _block.Slice(index * _length, _length);
}

internal readonly ref struct ReadOnlyBlockPackets : IReadPackets
{
    private readonly ReadOnlySpan<byte> _block;
    private readonly int _length;

    public ReadOnlyBlockPackets(ReadOnlySpan<byte> block, int length, int count)
    {
        _block = block;
        _length = length;
        Count = count;
    }

    public int Count { get; }

    public ReadOnlySpan<byte> this[int index] => _block.Slice(index * _length, _length);
}
