using System.Security.Cryptography;
using QuickSilver.Dissemination.Hosting;
using QuickSilver.Dissemination.Pages;

namespace QuickSilver.Dissemination.Tests.Pages;

public sealed class DiskPageStoreTests : IDisposable
{
    private readonly string _dir = Path.Combine(Path.GetTempPath(), "qs-store-" + Guid.NewGuid().ToString("N"));

    [Fact]
    public void PagesSurviveARestartAndTheFileAppearsWhenItVerifies()
    {
        var pages = new PageOptions();
        var content = new byte[75_000];
        new Random(3).NextBytes(content);
        var entry = new FileEntry("sub/x.bin", content.Length, SHA256.HashData(content));
        using (var store = new DiskPageStore(_dir))
        {
            store.Prepare(entry, pages);
            Assert.False(store.HasPage(entry, 0));
            store.WritePage(entry, 0, 0, content.AsSpan(0, 30_000));
            store.WritePage(entry, 2, 60_000, content.AsSpan(60_000));
        }

        using (var store = new DiskPageStore(_dir)) // a restarted client
        {
            store.Prepare(entry, pages);
            Assert.True(store.HasPage(entry, 0));
            Assert.False(store.HasPage(entry, 1));
            Assert.True(store.HasPage(entry, 2));
            Assert.False(store.Verify(entry));
            store.WritePage(entry, 1, 30_000, content.AsSpan(30_000, 30_000));
            Assert.True(store.Verify(entry));
        }

        Assert.Equal(content, File.ReadAllBytes(Path.Combine(_dir, "sub", "x.bin")));
        Assert.False(File.Exists(Path.Combine(_dir, "sub", "x.bin.part")));
        Assert.False(File.Exists(Path.Combine(_dir, "sub", "x.bin.qsparts")));
        using (var store = new DiskPageStore(_dir)) // a complete file already there counts as held
        {
            store.Prepare(entry, pages);
            Assert.True(store.HasPage(entry, 1));
        }
    }

    [Fact]
    public void PacketsOfAnIncompletePageAreKeptButNotTrustedAfterARestart()
    {
        var pages = new PageOptions();
        var content = new byte[45_000];
        new Random(4).NextBytes(content);
        var entry = new FileEntry("z.bin", content.Length, SHA256.HashData(content));
        using (var store = new DiskPageStore(_dir))
        {
            store.Prepare(entry, pages);
            Assert.True(store.CanHoldPartials);
            store.WritePartial(entry, 30_500, content.AsSpan(30_500, 500));
            store.WritePartial(entry, 44_500, content.AsSpan(44_500, 500));
            var back = new byte[15_000];
            store.ReadPartial(entry, 30_000, back);
            Assert.True(back.AsSpan(0, 500).IndexOfAnyExcept((byte)0) < 0, "never-written bytes read as zero");
            Assert.Equal(content.AsSpan(30_500, 500).ToArray(), back.AsSpan(500, 500).ToArray());
            Assert.Equal(content.AsSpan(44_500, 500).ToArray(), back.AsSpan(14_500, 500).ToArray());
            Assert.False(store.HasPage(entry, 1));
            var past = new byte[100];
            past.AsSpan().Fill(7);
            store.ReadPartial(entry, 45_000, past); // past the end of the .part file
            Assert.True(past.AsSpan().IndexOfAnyExcept((byte)0) < 0);
        }

        using (var store = new DiskPageStore(_dir)) // a restarted client: the page is still missing
        {
            store.Prepare(entry, pages);
            Assert.False(store.HasPage(entry, 0));
            Assert.False(store.HasPage(entry, 1));
            store.WritePage(entry, 0, 0, content.AsSpan(0, 30_000));
            store.WritePage(entry, 1, 30_000, content.AsSpan(30_000));
            Assert.True(store.Verify(entry));
        }

        Assert.Equal(content, File.ReadAllBytes(Path.Combine(_dir, "z.bin")));
    }

    [Fact]
    public void MarksForAnotherPageSizeAreNotTrusted()
    {
        var content = new byte[40_000];
        var entry = new FileEntry("y.bin", content.Length, SHA256.HashData(content));
        using (var store = new DiskPageStore(_dir))
        {
            store.Prepare(entry, new PageOptions { PageSize = 10_000 });
            store.WritePage(entry, 1, 10_000, content.AsSpan(10_000, 10_000));
        }

        using var again = new DiskPageStore(_dir);
        again.Prepare(entry, new PageOptions { PageSize = 20_000 });
        Assert.False(again.HasPage(entry, 0));
        Assert.False(again.HasPage(entry, 1));
    }

    /// <summary>The store hashes pages as the written prefix grows (pages written out of order are read back); the
    /// result is the same check as hashing the whole file at the end, a wrong page included.</summary>
    [Fact]
    public void PagesHashedAsTheyArriveVerifyLikeTheWholeFile()
    {
        var pages = new PageOptions();
        var content = new byte[130_000];
        new Random(4).NextBytes(content);
        var wrong = (byte[])content.Clone();
        wrong[65_000] ^= 1;
        static void Write(DiskPageStore store, FileEntry entry, byte[] bytes, params int[] order)
        {
            foreach (int p in order)
            {
                int offset = p * 30_000;
                store.WritePage(entry, p, offset, bytes.AsSpan(offset, Math.Min(30_000, bytes.Length - offset)));
            }
        }

        var entry = new FileEntry("y.bin", content.Length, SHA256.HashData(content));
        var other = new FileEntry("z.bin", content.Length, SHA256.HashData(content));
        using (var store = new DiskPageStore(_dir))
        {
            store.Prepare(entry, pages);
            Write(store, entry, content, 3, 1, 0, 4, 2);
            Assert.True(store.Verify(entry));
            store.Prepare(other, pages);
            Write(store, other, wrong, 3, 1, 0, 4, 2);
            Assert.False(store.Verify(other));
            store.Discard(other);
            Write(store, other, content, 0, 1, 2, 3, 4);
            Assert.True(store.Verify(other));
        }

        Assert.Equal(content, File.ReadAllBytes(Path.Combine(_dir, "y.bin")));
        Assert.Equal(content, File.ReadAllBytes(Path.Combine(_dir, "z.bin")));
    }

    [Fact]
    public void NamesThatLeaveTheDirectoryAreRefused()
    {
        using var store = new DiskPageStore(_dir);
        Assert.Throws<ArgumentException>(() => store.PathOf("../outside"));
        Assert.Throws<ArgumentException>(() => store.PathOf("/etc/passwd"));
    }

    public void Dispose()
    {
        try
        {
            Directory.Delete(_dir, recursive: true);
        }
        catch (IOException)
        {
        }
    }
}
