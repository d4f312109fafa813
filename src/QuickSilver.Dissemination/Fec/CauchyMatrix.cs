namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// The code's generator, C[j, i] = (x_0 + y_i) / (x_j + y_i) with x_j = k + j (repair packet j) and y_i = i (source
/// packet i): a Cauchy matrix 1 / (x_j + y_i) with each column scaled so that row 0 is all ones. And the inverse of any
/// square submatrix of it in closed form, which is what the decoder needs.
/// </summary>
/// <remarks>
/// <para>Every square submatrix of a Cauchy matrix is invertible (its determinant is a product of the differences of
/// distinct points over a product of sums that are never 0), and scaling columns by non-zero factors keeps that true;
/// so every k × k submatrix of the systematic generator [I; C] is invertible, which is "any k of the n packets
/// decode". The points are distinct bytes as long as k + (n − k) ≤ 256; the code stops at n = 255.</para>
/// <para>Inverse of the m × m submatrix on rows (repair packets) a and columns (missing source packets) b, with
/// A = 1 / (x_a + y_b) the plain Cauchy part and s_b = x_0 + y_b the column scale (all sums are differences in
/// characteristic 2):
/// A⁻¹[b, a] = P_a · R_b / ((x_a + y_b) · Q_a · S_b), where P_a = ∏_c (x_a + y_c), Q_a = ∏_{c≠a} (x_a + x_c),
/// R_b = ∏_c (x_c + y_b), S_b = ∏_{c≠b} (y_b + y_c); and the scaled matrix's inverse is A⁻¹[b, a] / s_b.
/// O(m²) table operations, against O(m³) for Gauss–Jordan elimination (which the tests use as the reference).</para>
/// </remarks>
internal static class CauchyMatrix
{
    /// <summary>C[j, i] for a code with k source packets.</summary>
    public static byte Coefficient(int k, int repairIndex, int sourceIndex)
    {
        byte y = (byte)sourceIndex;
        return GaloisField.Divide(GaloisField.Add((byte)k, y), GaloisField.Add((byte)(k + repairIndex), y));
    }

    /// <summary>
    /// Writes into <paramref name="inverse"/> (m × m, row-major) the inverse of the submatrix of C on repair rows
    /// <paramref name="rows"/> and source columns <paramref name="columns"/>, m = rows.Length = columns.Length:
    /// inverse[b, a] is the multiple of the a-th repair packet in the b-th missing source packet. Uses
    /// <paramref name="scratch"/> (4·m bytes); allocates nothing.
    /// </summary>
    public static void InvertSubmatrix(int k, ReadOnlySpan<int> rows, ReadOnlySpan<int> columns, Span<byte> inverse, Span<byte> scratch)
    {
        int m = rows.Length;
        Span<byte> p = scratch[..m];
        Span<byte> q = scratch.Slice(m, m);
        Span<byte> r = scratch.Slice(2 * m, m);
        Span<byte> s = scratch.Slice(3 * m, m);
        for (int a = 0; a < m; a++)
        {
            byte x = X(k, rows[a]);
            byte pa = 1, qa = 1;
            for (int c = 0; c < m; c++)
            {
                pa = GaloisField.Multiply(pa, GaloisField.Add(x, Y(columns[c])));
                if (c != a)
                {
                    qa = GaloisField.Multiply(qa, GaloisField.Add(x, X(k, rows[c])));
                }
            }

            p[a] = pa;
            q[a] = qa;
        }

        for (int b = 0; b < m; b++)
        {
            byte y = Y(columns[b]);
            byte rb = 1, sb = 1;
            for (int c = 0; c < m; c++)
            {
                rb = GaloisField.Multiply(rb, GaloisField.Add(X(k, rows[c]), y));
                if (c != b)
                {
                    sb = GaloisField.Multiply(sb, GaloisField.Add(y, Y(columns[c])));
                }
            }

            // Fold the column scale s_b = x_0 + y_b into the denominator.
            r[b] = rb;
            s[b] = GaloisField.Multiply(sb, GaloisField.Add((byte)k, y));
        }

        for (int b = 0; b < m; b++)
        {
            byte y = Y(columns[b]);
            for (int a = 0; a < m; a++)
            {
                byte numerator = GaloisField.Multiply(p[a], r[b]);
                byte denominator = GaloisField.Multiply(GaloisField.Multiply(GaloisField.Add(X(k, rows[a]), y), q[a]), s[b]);
                inverse[(b * m) + a] = GaloisField.Divide(numerator, denominator);
            }
        }
    }

    private static byte X(int k, int repairIndex) => (byte)(k + repairIndex);

    private static byte Y(int sourceIndex) => (byte)sourceIndex;
}
