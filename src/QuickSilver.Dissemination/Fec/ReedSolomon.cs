namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// A systematic (n, k) Reed–Solomon erasure code over GF(2^8): a page of k equal source packets goes out unchanged as
/// packets 0..k−1, followed by up to n − k repair packets k..n−1; any k of the n packets rebuild the page.
/// </summary>
/// <remarks>
/// <para><b>Generator.</b> Repair packet j (packet k + j) is Σ_i C[j, i] · source_i with C a Cauchy matrix:
/// C[j, i] = 1 / (x_j + y_i) with x_j = k + j and y_i = i (distinct bytes, since k + j ≥ k &gt; i), each column then
/// scaled by (x_0 + y_i) so that row 0 is all ones: repair packet 0 is the XOR of the source packets, the cheapest
/// repair and the one a single loss uses. Every square submatrix of a Cauchy matrix is invertible, and scaling
/// columns keeps that true, so every k × k submatrix of [I; C] is invertible: any k packets decode. A row depends
/// only on k and j, never on n, so a page can get more repair packets later (for NAKs) without the earlier ones
/// changing, and a receiver needs only k and the packet index.</para>
/// <para><b>Decoding.</b> With m source packets missing, the decoder takes m received repair packets P and solves
/// for the missing sources M: repair_P = C[P, present] · source_present + C[P, M] · source_M, so
/// source_M = C[P, M]⁻¹ · (repair_P + C[P, present] · source_present). It inverts only the m × m Cauchy submatrix
/// C[P, M] (in closed form, O(m²): <see cref="CauchyMatrix"/>) and folds it into one coefficient row per missing
/// packet: these rows are exactly the rows, for the missing packets, of the inverse of the k × k matrix of the
/// received set, found without building it. Each missing packet is then written straight into its buffer with k
/// multiply-adds; received packets are only read. Work per page: m·k packet multiply-adds and m² multiply-adds of
/// k-byte coefficient rows, four terms per pass (<see cref="LinearCombination"/>), plus O(m²) table operations for
/// the inverse.</para>
/// <para><b>Cost and threads.</b> The generator and the decoder's scratch (for up to min(k, n − k) losses)
/// are allocated by the constructor; <see cref="Encode(ReadOnlySpan{ReadOnlyMemory{byte}}, ReadOnlySpan{Memory{byte}})"/>
/// and <see cref="Decode(ReadOnlySpan{Memory{byte}}, ReadOnlySpan{bool}, ReadOnlySpan{ReadOnlyMemory{byte}}, ReadOnlySpan{int})"/>
/// allocate nothing. Encoding only reads the instance and may run on several threads at once; decoding uses the
/// scratch, so one instance decodes on one thread at a time (the core thread that owns it).</para>
/// </remarks>
public sealed class ReedSolomon
{
    /// <summary>The largest n: GF(2^8) has 256 elements, and the Cauchy points x_j and y_i must all differ.</summary>
    public const int MaxPackets = 255;

    private readonly byte[] _generator;
    private readonly int[] _missing;
    private readonly int[] _repairRows;
    private readonly byte[] _inverse;
    private readonly byte[] _scratch;
    private readonly byte[] _rows;
    private GaloisKernel _kernel = GaloisRegion.Best;

    /// <summary>A code with <paramref name="k"/> source packets per page and at most <paramref name="n"/> packets in all.</summary>
    /// <exception cref="ArgumentOutOfRangeException">k &lt; 1, n &lt; k, or n &gt; 255.</exception>
    public ReedSolomon(int k, int n)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(k, 1);
        if (n < k)
        {
            throw new ArgumentOutOfRangeException(nameof(n), n, $"n ({n}) must be at least k ({k}): the page's k source packets are among the n.");
        }

        if (n > MaxPackets)
        {
            throw new ArgumentOutOfRangeException(nameof(n), n, $"n ({n}) must be at most {MaxPackets} for a code over GF(2^8).");
        }

        SourceCount = k;
        PacketCount = n;
        _generator = CreateGenerator(k, n - k);

        int maxLost = Math.Min(k, n - k);
        _missing = new int[k];
        _repairRows = new int[maxLost];
        _inverse = new byte[maxLost * maxLost];
        _scratch = new byte[4 * maxLost];
        _rows = new byte[maxLost * k];
    }

    /// <summary>k: the source packets per page.</summary>
    public int SourceCount { get; }

    /// <summary>n: source plus repair packets at most.</summary>
    public int PacketCount { get; }

    /// <summary>n − k: the repair packets this code can make.</summary>
    public int RepairCount => PacketCount - SourceCount;

    /// <summary>The GF(2^8) kernel the codec multiplies packets with; <see cref="GaloisRegion.Best"/> unless set
    /// (the benchmarks set <see cref="GaloisKernel.Scalar"/> to compare).</summary>
    /// <exception cref="PlatformNotSupportedException">Set to a kernel this processor does not run.</exception>
    public GaloisKernel Kernel
    {
        get => _kernel;
        set => _kernel = GaloisRegion.IsSupported(value) ? value : throw new PlatformNotSupportedException($"This processor does not run the {value} GF(2^8) kernel.");
    }

    /// <summary>C[j, i]: the multiple of source packet <paramref name="sourceIndex"/> in repair packet
    /// <paramref name="repairIndex"/> (packet k + repairIndex).</summary>
    public byte Coefficient(int repairIndex, int sourceIndex)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(repairIndex);
        ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(repairIndex, RepairCount);
        ArgumentOutOfRangeException.ThrowIfNegative(sourceIndex);
        ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(sourceIndex, SourceCount);
        return _generator[(repairIndex * SourceCount) + sourceIndex];
    }

    /// <summary>
    /// Writes repair packets 0..repair.Length−1 (packets k..k+repair.Length−1) of the page whose k source packets are
    /// <paramref name="source"/>. Every buffer has the length of the first source packet.
    /// </summary>
    /// <exception cref="ArgumentException">Not k source packets, more than n − k repair buffers, or unequal lengths.</exception>
    public void Encode(ReadOnlySpan<ReadOnlyMemory<byte>> source, ReadOnlySpan<Memory<byte>> repair)
    {
        var sources = new MemoryPackets(source);
        int length = CheckSources(sources, nameof(source));
        var repairs = new WritableMemoryPackets(repair);
        CheckRepairBuffers(repairs, length, nameof(repair));
        for (int j = 0; j < repairs.Count; j++)
        {
            EncodeRow(sources, j, repairs.Target(j));
        }
    }

    /// <summary>
    /// The page as one block of k packets back to back (<paramref name="source"/>, length k·L) and its repair packets
    /// 0..m−1 as one block (<paramref name="repair"/>, length m·L, m ≤ n − k).
    /// </summary>
    /// <exception cref="ArgumentException">A block length that is not a whole number of packets, or m &gt; n − k.</exception>
    public void Encode(ReadOnlySpan<byte> source, Span<byte> repair)
    {
        int length = BlockPacketLength(source.Length, nameof(source));
        var sources = new ReadOnlyBlockPackets(source, length, SourceCount);
        var repairs = new BlockPackets(repair, length, RepairBlockCount(repair.Length, length, nameof(repair)));
        for (int j = 0; j < repairs.Count; j++)
        {
            EncodeRow(sources, j, repairs.Target(j));
        }
    }

    /// <summary>Writes repair packet <paramref name="repairIndex"/> (packet k + repairIndex) alone: a sender can
    /// encode each repair packet when it is about to go out, as the WebBase server did.</summary>
    /// <exception cref="ArgumentException">Not k source packets, or unequal lengths.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="repairIndex"/> is not in [0, n − k).</exception>
    public void EncodeRepair(ReadOnlySpan<ReadOnlyMemory<byte>> source, int repairIndex, Span<byte> repair)
    {
        var sources = new MemoryPackets(source);
        int length = CheckSources(sources, nameof(source));
        ArgumentOutOfRangeException.ThrowIfNegative(repairIndex);
        ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(repairIndex, RepairCount);
        CheckLength(repair.Length, length, nameof(repair));
        EncodeRow(sources, repairIndex, repair);
    }

    /// <summary>
    /// Rebuilds the page's missing source packets in place. <paramref name="source"/> holds the k source buffers, of
    /// which those with <paramref name="received"/>[i] set hold packet i and are only read; the others are overwritten
    /// with the rebuilt packets. <paramref name="repair"/> are received repair packets and
    /// <paramref name="repairIndices"/> their repair numbers (packet index − k), in any order; the first m are used,
    /// m being the number missing. Returns m.
    /// </summary>
    /// <exception cref="ArgumentException">Fewer than k packets in all (missing sources outnumber the repair
    /// packets), unequal lengths, counts that do not match, or a repair number given twice.</exception>
    /// <exception cref="ArgumentOutOfRangeException">A repair number outside [0, n − k).</exception>
    public int Decode(ReadOnlySpan<Memory<byte>> source, ReadOnlySpan<bool> received, ReadOnlySpan<ReadOnlyMemory<byte>> repair, ReadOnlySpan<int> repairIndices)
    {
        var sources = new WritableMemoryPackets(source);
        int length = CheckSources(sources, nameof(source));
        var repairs = new MemoryPackets(repair);
        for (int j = 0; j < repairs.Count; j++)
        {
            CheckLength(repairs[j].Length, length, nameof(repair));
        }

        return DecodeCore(sources, received, repairs, repairIndices);
    }

    /// <summary>
    /// <see cref="Decode(ReadOnlySpan{Memory{byte}}, ReadOnlySpan{bool}, ReadOnlySpan{ReadOnlyMemory{byte}}, ReadOnlySpan{int})"/>
    /// with the page as one block of k packets (length k·L) and the received repair packets as one block
    /// (length repairIndices.Length · L).
    /// </summary>
    public int Decode(Span<byte> source, ReadOnlySpan<bool> received, ReadOnlySpan<byte> repair, ReadOnlySpan<int> repairIndices)
    {
        int length = BlockPacketLength(source.Length, nameof(source));
        if (repair.Length != repairIndices.Length * length)
        {
            throw new ArgumentException($"The repair block has {repair.Length} bytes; {repairIndices.Length} repair numbers of {length}-byte packets need {repairIndices.Length * length}.", nameof(repair));
        }

        return DecodeCore(new BlockPackets(source, length, SourceCount), received, new ReadOnlyBlockPackets(repair, length, repairIndices.Length), repairIndices);
    }

    private void EncodeRow<TSource>(TSource source, int row, Span<byte> repair)
        where TSource : IReadPackets, allows ref struct
    {
        ReadOnlySpan<byte> coefficients = _generator.AsSpan(row * SourceCount, SourceCount);
        var sum = new LinearCombination(_kernel, repair);
        for (int i = 0; i < coefficients.Length; i++)
        {
            sum.Add(coefficients[i], source[i]);
        }

        sum.Finish();
    }

    private int DecodeCore<TSource, TRepair>(TSource source, ReadOnlySpan<bool> received, TRepair repair, ReadOnlySpan<int> repairIndices)
        where TSource : IWritePackets, allows ref struct
        where TRepair : IReadPackets, allows ref struct
    {
        int k = SourceCount;
        if (received.Length != k)
        {
            throw new ArgumentException($"{received.Length} received flags for {k} source packets; one per source packet is needed.", nameof(received));
        }

        if (repair.Count != repairIndices.Length)
        {
            throw new ArgumentException($"{repair.Count} repair packets but {repairIndices.Length} repair numbers; one per packet is needed.", nameof(repairIndices));
        }

        int m = 0;
        for (int i = 0; i < k; i++)
        {
            if (!received[i])
            {
                _missing[m++] = i;
            }
        }

        if (m > repair.Count)
        {
            throw new ArgumentException($"Fewer than k packets: {k - m} source and {repair.Count} repair packets received, and a page of this code needs any {k}.", nameof(repair));
        }

        CheckRepairNumbers(repairIndices);
        if (m == 0)
        {
            return 0;
        }

        // The inverse of the m × m submatrix C[P, M] (first m repair packets, missing sources), in closed form.
        repairIndices[..m].CopyTo(_repairRows);
        CauchyMatrix.InvertSubmatrix(k, _repairRows.AsSpan(0, m), _missing.AsSpan(0, m), _inverse, _scratch);

        for (int b = 0; b < m; b++)
        {
            // Row b of Inverse · C[P, ·]: the multiple of each received source packet in missing packet b (its entries
            // at missing columns are not used). A sum of m generator rows, k bytes each, done by the packet kernels.
            ReadOnlySpan<byte> inverse = _inverse.AsSpan(b * m, m);
            Span<byte> coefficients = _rows.AsSpan(b * k, k);
            var rowSum = new LinearCombination(_kernel, coefficients);
            for (int a = 0; a < m; a++)
            {
                rowSum.Add(inverse[a], _generator.AsSpan(repairIndices[a] * k, k));
            }

            rowSum.Finish();

            var sum = new LinearCombination(_kernel, source.Target(_missing[b]));
            for (int a = 0; a < m; a++)
            {
                sum.Add(inverse[a], repair[a]);
            }

            for (int i = 0; i < k; i++)
            {
                if (received[i])
                {
                    sum.Add(coefficients[i], source[i]);
                }
            }

            sum.Finish();
        }

        return m;
    }

    private void CheckRepairNumbers(ReadOnlySpan<int> repairIndices)
    {
        Span<ulong> seen = stackalloc ulong[4];
        seen.Clear();
        foreach (int index in repairIndices)
        {
            if ((uint)index >= (uint)RepairCount)
            {
                throw new ArgumentOutOfRangeException(nameof(repairIndices), index, $"A repair number must be in [0, {RepairCount}) for this ({PacketCount}, {SourceCount}) code.");
            }

            ulong bit = 1UL << (index & 63);
            if ((seen[index >> 6] & bit) != 0)
            {
                throw new ArgumentException($"Repair number {index} is given twice.", nameof(repairIndices));
            }

            seen[index >> 6] |= bit;
        }
    }

    private int CheckSources<TSource>(TSource source, string name)
        where TSource : IReadPackets, allows ref struct
    {
        if (source.Count != SourceCount)
        {
            throw new ArgumentException($"{source.Count} source packets for a code with k = {SourceCount}.", name);
        }

        int length = source[0].Length;
        for (int i = 1; i < source.Count; i++)
        {
            CheckLength(source[i].Length, length, name);
        }

        return length;
    }

    private void CheckRepairBuffers<TRepair>(TRepair repair, int length, string name)
        where TRepair : IWritePackets, allows ref struct
    {
        if (repair.Count > RepairCount)
        {
            throw new ArgumentException($"{repair.Count} repair buffers for a code that makes at most n − k = {RepairCount}.", name);
        }

        for (int j = 0; j < repair.Count; j++)
        {
            CheckLength(repair[j].Length, length, name);
        }
    }

    private int BlockPacketLength(int blockLength, string name)
    {
        if (blockLength % SourceCount != 0)
        {
            throw new ArgumentException($"The page block has {blockLength} bytes, not a multiple of k = {SourceCount} packets.", name);
        }

        return blockLength / SourceCount;
    }

    private int RepairBlockCount(int blockLength, int length, string name)
    {
        int count = length == 0 ? 0 : blockLength / length;
        if (length == 0 ? blockLength != 0 : blockLength % length != 0)
        {
            throw new ArgumentException($"The repair block has {blockLength} bytes, not a whole number of {length}-byte packets.", name);
        }

        if (count > RepairCount)
        {
            throw new ArgumentException($"The repair block holds {count} packets; this code makes at most n − k = {RepairCount}.", name);
        }

        return count;
    }

    private static void CheckLength(int actual, int expected, string name)
    {
        if (actual != expected)
        {
            throw new ArgumentException($"A packet has {actual} bytes where the first source packet has {expected}; all packets of a page have one length.", name);
        }
    }

    private static byte[] CreateGenerator(int k, int repairs)
    {
        var generator = new byte[repairs * k];
        for (int j = 0; j < repairs; j++)
        {
            for (int i = 0; i < k; i++)
            {
                generator[(j * k) + i] = CauchyMatrix.Coefficient(k, j, i);
            }
        }

        return generator;
    }
}
