using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Tests.Wire;

/// <summary><see cref="StreamingCopy"/>: the bytes arrive whole and unchanged whatever the length and the alignment of
/// either buffer (the streaming stores need a 32-byte aligned destination: the head and the tail are copied plainly),
/// and nothing past the length is written.</summary>
public sealed class StreamingCopyTests
{
    [Theory]
    [InlineData(0, 0, 0)]
    [InlineData(100, 3, 5)]
    [InlineData(StreamingCopy.MinimumBytes - 1, 1, 0)]
    [InlineData(StreamingCopy.MinimumBytes, 0, 0)]
    [InlineData(StreamingCopy.MinimumBytes + 1, 7, 13)]
    [InlineData(16_384, 0, 31)]
    [InlineData(16_384 - 77, 31, 1)]
    [InlineData(65_507, 16, 17)]
    public void Every_byte_is_copied_and_none_past_the_length(int length, int sourceOffset, int destinationOffset)
    {
        var random = new Random(length + (31 * sourceOffset) + destinationOffset);
        var source = new byte[sourceOffset + length];
        random.NextBytes(source);
        var destination = new byte[destinationOffset + length + 64];
        Array.Fill(destination, (byte)0xA5);

        StreamingCopy.Copy(source.AsSpan(sourceOffset, length), destination.AsSpan(destinationOffset));

        Assert.True(source.AsSpan(sourceOffset, length).SequenceEqual(destination.AsSpan(destinationOffset, length)));
        Assert.All(destination[..destinationOffset], b => Assert.Equal(0xA5, b));
        Assert.All(destination[(destinationOffset + length)..], b => Assert.Equal(0xA5, b));
    }

    [Theory]
    [InlineData(100)]
    [InlineData(StreamingCopy.MinimumBytes * 2)]
    public void A_destination_shorter_than_the_source_is_refused_whatever_the_length(int length)
    {
        var source = new byte[length];
        Assert.Throws<ArgumentOutOfRangeException>(() => StreamingCopy.Copy(source, new byte[length - 1]));
    }
}
