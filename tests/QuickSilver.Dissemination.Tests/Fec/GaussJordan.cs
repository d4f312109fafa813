using QuickSilver.Dissemination.Fec;

namespace QuickSilver.Dissemination.Tests.Fec;

/// <summary>The reference model for the decoder's closed-form Cauchy inverse: Gauss–Jordan elimination over GF(2^8),
/// m × m row-major matrices.</summary>
internal static class GaussJordan
{
    /// <summary>
    /// Inverts the m × m matrix in <paramref name="matrix"/> into <paramref name="inverse"/> by Gauss–Jordan
    /// elimination, destroying <paramref name="matrix"/>: O(m²) row operations of m bytes, each by the packet kernel
    /// <paramref name="kernel"/>, no allocation. Returns false if the
    /// matrix is singular.
    /// </summary>
    public static bool TryInvert(Span<byte> matrix, Span<byte> inverse, int m, GaloisKernel kernel)
    {
        matrix = matrix[..(m * m)];
        inverse = inverse[..(m * m)];
        inverse.Clear();
        for (int i = 0; i < m; i++)
        {
            inverse[(i * m) + i] = 1;
        }

        for (int col = 0; col < m; col++)
        {
            int pivot = col;
            while (pivot < m && matrix[(pivot * m) + col] == 0)
            {
                pivot++;
            }

            if (pivot == m)
            {
                return false;
            }

            if (pivot != col)
            {
                SwapRows(matrix, m, pivot, col);
                SwapRows(inverse, m, pivot, col);
            }

            byte scale = GaloisField.Inverse(matrix[(col * m) + col]);
            GaloisRegion.Multiply(kernel, scale, matrix.Slice(col * m, m), matrix.Slice(col * m, m));
            GaloisRegion.Multiply(kernel, scale, inverse.Slice(col * m, m), inverse.Slice(col * m, m));

            for (int row = 0; row < m; row++)
            {
                byte factor = matrix[(row * m) + col];
                if (row == col || factor == 0)
                {
                    continue;
                }

                GaloisRegion.MultiplyAdd(kernel, factor, matrix.Slice(col * m, m), matrix.Slice(row * m, m));
                GaloisRegion.MultiplyAdd(kernel, factor, inverse.Slice(col * m, m), inverse.Slice(row * m, m));
            }
        }

        return true;
    }

    private static void SwapRows(Span<byte> matrix, int m, int a, int b)
    {
        Span<byte> rowA = matrix.Slice(a * m, m);
        Span<byte> rowB = matrix.Slice(b * m, m);
        for (int i = 0; i < m; i++)
        {
            (rowA[i], rowB[i]) = (rowB[i], rowA[i]);
        }
    }
}
