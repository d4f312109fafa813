using QuickSilver.WanLink;

namespace QuickSilver.Testbed.Tests;

/// <summary>The testbed's delay stage on virtual time: the caller's tick count is the clock.</summary>
public sealed class DelayLineTests
{
    private static byte[] Frame(int length, byte fill) => Enumerable.Repeat(fill, length).ToArray();

    [Fact]
    public void A_frame_comes_out_exactly_after_the_delay_and_not_before()
    {
        var line = new DelayLine(delayTicks: 50, maxFrames: 8, maxBytes: 8 * 100, maxFrameBytes: 100);
        var output = new byte[100];
        Assert.True(line.TryEnqueue(Frame(60, 7), now: 1000));
        Assert.Equal(1050, line.NextDue);
        Assert.Equal(-1, line.TryDequeue(1049, output));
        Assert.Equal(60, line.TryDequeue(1050, output));
        Assert.All(output.Take(60), b => Assert.Equal(7, b));
        Assert.Null(line.NextDue);
        Assert.Equal(-1, line.TryDequeue(5000, output));
    }

    [Fact]
    public void Frames_keep_their_order_and_each_its_own_due_time()
    {
        var line = new DelayLine(100, 16, 1600, 100);
        var output = new byte[100];
        for (int i = 0; i < 5; i++)
        {
            Assert.True(line.TryEnqueue(Frame(10 + i, (byte)i), now: i * 30));
        }

        var released = new List<(long At, byte Fill, int Length)>();
        for (long now = 0; now <= 300; now++)
        {
            int n;
            while ((n = line.TryDequeue(now, output)) >= 0)
            {
                released.Add((now, output[0], n));
            }
        }

        Assert.Equal([(100, 0, 10), (130, 1, 11), (160, 2, 12), (190, 3, 13), (220, 4, 14)], released);
        Assert.Equal(5, line.Accepted);
        Assert.Equal(5, line.Released);
        Assert.Equal(0, line.Bytes);
    }

    [Fact]
    public void A_clock_that_steps_back_never_reorders_frames()
    {
        var line = new DelayLine(10, 4, 400, 100);
        var output = new byte[100];
        line.TryEnqueue(Frame(1, 1), now: 100);
        line.TryEnqueue(Frame(1, 2), now: 50); // earlier than the first: still released after it
        Assert.Equal(110, line.NextDue);
        Assert.Equal(1, line.TryDequeue(110, output));
        Assert.Equal(1, output[0]);
        Assert.Equal(1, line.TryDequeue(110, output));
        Assert.Equal(2, output[0]);
    }

    [Fact]
    public void The_line_is_bounded_in_frames_and_bytes_and_counts_what_it_drops()
    {
        var byFrames = new DelayLine(10, maxFrames: 3, maxBytes: 10_000, maxFrameBytes: 100);
        for (int i = 0; i < 5; i++)
        {
            byFrames.TryEnqueue(Frame(10, 0), 0);
        }

        Assert.Equal(3, byFrames.Count);
        Assert.Equal(2, byFrames.Overflow);

        var byBytes = new DelayLine(10, maxFrames: 100, maxBytes: 250, maxFrameBytes: 100);
        Assert.True(byBytes.TryEnqueue(Frame(100, 0), 0));
        Assert.True(byBytes.TryEnqueue(Frame(100, 0), 0));
        Assert.False(byBytes.TryEnqueue(Frame(100, 0), 0));
        Assert.True(byBytes.TryEnqueue(Frame(50, 0), 0));
        Assert.Equal(250, byBytes.Bytes);
        Assert.Equal(1, byBytes.Overflow);
        Assert.False(byBytes.TryEnqueue(Frame(101, 0), 0));
        Assert.Equal(1, byBytes.Oversize);

        // Space freed by a release is usable again: the ring wraps.
        var output = new byte[100];
        Assert.Equal(100, byBytes.TryDequeue(10, output));
        Assert.True(byBytes.TryEnqueue(Frame(100, 9), 5));
        Assert.Equal(3, byBytes.Count);
    }

    [Fact]
    public void Many_frames_through_a_small_ring_come_out_in_order_after_the_delay()
    {
        var random = new Random(5);
        var line = new DelayLine(37, 8, 8 * 64, 64);
        var output = new byte[64];
        long now = 0, nextIn = 0, nextOut = 0;
        var sentAt = new Dictionary<long, long>();
        for (int step = 0; step < 20_000; step++)
        {
            now += random.Next(0, 10);
            if (random.Next(2) == 0 && line.Count < 8)
            {
                var frame = BitConverter.GetBytes(nextIn);
                Assert.True(line.TryEnqueue(frame, now));
                sentAt[nextIn++] = now;
            }

            int n;
            while ((n = line.TryDequeue(now, output)) >= 0)
            {
                long id = BitConverter.ToInt64(output, 0);
                Assert.Equal(nextOut++, id);
                Assert.True(now - sentAt[id] >= 37, $"frame {id} released after {now - sentAt[id]} ticks");
            }
        }

        Assert.True(nextOut > 5_000);
        Assert.Equal(0, line.Overflow);
    }

    [Fact]
    public void Bad_arguments_name_themselves()
    {
        Assert.Equal("delayTicks", Assert.Throws<ArgumentOutOfRangeException>(() => new DelayLine(-1, 1, 10, 10)).ParamName);
        Assert.Equal("maxFrames", Assert.Throws<ArgumentOutOfRangeException>(() => new DelayLine(0, 0, 10, 10)).ParamName);
        Assert.Equal("maxBytes", Assert.Throws<ArgumentOutOfRangeException>(() => new DelayLine(0, 1, 5, 10)).ParamName);
        var line = new DelayLine(0, 1, 10, 10);
        line.TryEnqueue(Frame(10, 0), 0);
        Assert.Throws<ArgumentException>(() => line.TryDequeue(0, new byte[5]));
    }
}
