namespace QuickSilver.Dissemination.Fec;

/// <summary>Square matrices over GF(2^8), row-major in caller-owned spans: the decoder's Gauss–Jordan inversion.</summary>
internal static class GaloisMatrix
{
    /// <summary>
    /// Inverts the m × m matrix in <paramref name="matrix"/> into <paramref name="inverse"/> by Gauss–Jordan
    /// elimination, destroying <paramref name="matrix"/>: O(m³) table multiplies, no allocation. Returns false if the
    /// matrix is singular (never for a square submatrix of the code's Cauchy matrix).
    /// </summary>
    public static bool TryInvert(Span<byte> matrix, Span<byte> inverse, int m)
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
            ScaleRow(matrix.Slice(col * m, m), scale);
            ScaleRow(inverse.Slice(col * m, m), scale);

            for (int row = 0; row < m; row++)
            {
                byte factor = matrix[(row * m) + col];
                if (row == col || factor == 0)
                {
                    continue;
                }

                AddScaledRow(matrix.Slice(row * m, m), matrix.Slice(col * m, m), factor);
                AddScaledRow(inverse.Slice(row * m, m), inverse.Slice(col * m, m), factor);
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

    private static void ScaleRow(Span<byte> row, byte scale)
    {
        for (int i = 0; i < row.Length; i++)
        {
            row[i] = GaloisField.Multiply(row[i], scale);
        }
    }

    private static void AddScaledRow(Span<byte> target, ReadOnlySpan<byte> row, byte factor)
    {
        for (int i = 0; i < target.Length; i++)
        {
            target[i] ^= GaloisField.Multiply(row[i], factor);
        }
    }
}
