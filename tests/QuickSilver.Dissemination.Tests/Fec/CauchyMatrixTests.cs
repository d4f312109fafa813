using CsCheck;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Dissemination.Tests.Fec;

public class CauchyMatrixTests
{
    /// <summary>A code's k, then m distinct repair rows and m distinct source columns of it.</summary>
    private static readonly Gen<(int K, int[] Rows, int[] Columns)> Submatrices =
        Gen.Select(Gen.Int[1, 254], Gen.Int).Select(t =>
        {
            var (k, seed) = t;
            var random = new Random(seed);
            int repairs = ReedSolomon.MaxPackets - k;
            int m = random.Next(1, Math.Min(k, repairs) + 1);
            int[] rows = [.. Enumerable.Range(0, repairs).OrderBy(_ => random.Next()).Take(m)];
            int[] columns = [.. Enumerable.Range(0, k).OrderBy(_ => random.Next()).Take(m)];
            return (k, rows, columns);
        });

    [Fact]
    public void TheClosedFormInverseEqualsGaussJordanAndUndoesTheSubmatrix() =>
        Property.ForAll(Submatrices, 400, seed: 41, t =>
        {
            var (k, rows, columns) = t;
            int m = rows.Length;
            var matrix = new byte[m * m];
            for (int a = 0; a < m; a++)
            {
                for (int b = 0; b < m; b++)
                {
                    matrix[(a * m) + b] = CauchyMatrix.Coefficient(k, rows[a], columns[b]);
                }
            }

            byte[] original = [.. matrix];
            var closedForm = new byte[m * m];
            CauchyMatrix.InvertSubmatrix(k, rows, columns, closedForm, new byte[4 * m]);
            var reference = new byte[m * m];
            Assert.True(GaussJordan.TryInvert(matrix, reference, m, GaloisKernel.Scalar), "Gauss–Jordan found the submatrix singular");
            Assert.Equal(reference, closedForm);

            // inverse · submatrix = I
            for (int b = 0; b < m; b++)
            {
                for (int col = 0; col < m; col++)
                {
                    byte sum = 0;
                    for (int a = 0; a < m; a++)
                    {
                        sum ^= GaloisField.Multiply(closedForm[(b * m) + a], original[(a * m) + col]);
                    }

                    Assert.Equal(b == col ? 1 : 0, sum);
                }
            }
        }, t => $"k={t.K} rows=[{string.Join(',', t.Rows)}] columns=[{string.Join(',', t.Columns)}]");
}
