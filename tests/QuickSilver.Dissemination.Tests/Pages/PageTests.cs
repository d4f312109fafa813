using System.Buffers.Binary;
using System.Security.Cryptography;
using System.Text;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;

namespace QuickSilver.Dissemination.Tests.Pages;

public class PageTests
{
    [Theory]
    [InlineData("abc")]
    [InlineData("music/track01.mp3")]
    [InlineData("")]
    public void TheFileIdIsTheLow64BitsOfSha1OfTheName(string name)
    {
#pragma warning disable CA5350
        var digest = SHA1.HashData(Encoding.UTF8.GetBytes(name));
#pragma warning restore CA5350
        Assert.Equal(BinaryPrimitives.ReadUInt64LittleEndian(digest.AsSpan(12)), PageId.FileIdOf(name));
    }

    [Fact]
    public void TheFileIdOfAbcMatchesTheKnownSha1Vector()
    {
        // SHA-1("abc") = a9993e36 4706816a ba3e2571 7850c26c 9cd0d89d; its last 8 bytes, little-endian.
        Assert.Equal(0x9dd8d09c6cc25078UL, PageId.FileIdOf("abc"));
    }

    [Fact]
    public void DefaultsAreTheSeeds()
    {
        var o = new PageOptions();
        o.Validate();
        Assert.Equal(30_000, o.PageSize);
        Assert.Equal(500, o.PacketPayload);
        Assert.Equal(60, o.PacketsPerPage);
        new PageOptions { PageSize = 58_000 }.Validate();
    }

    [Theory]
    [InlineData(30_100, 500, "PageSize")]   // not a multiple
    [InlineData(58_500, 500, "PageSize")]   // above the seed's largest page
    [InlineData(400, 500, "PageSize")]      // below one packet
    [InlineData(30_000, 8, "PacketPayload")]
    [InlineData(30_000, 1500, "PacketPayload")]
    [InlineData(57_600, 200, "PageSize")]   // 288 packets: more than the code holds
    public void BadOptionsFailNamingTheOption(int pageSize, int payload, string option)
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new PageOptions { PageSize = pageSize, PacketPayload = payload }.Validate());
        Assert.Equal(option, e.ParamName);
        Assert.Contains(option, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void BadHoldAndSpillOptionsFailNamingTheOption()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new ServerOptions { StartWhenClients = -1 }.Validate());
        Assert.Equal(nameof(ServerOptions.StartWhenClients), e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ServerOptions { StartWaitMax = TimeSpan.FromSeconds(-1) }.Validate());
        Assert.Equal(nameof(ServerOptions.StartWaitMax), e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ClientOptions { MaxSpilledPages = -1 }.Validate());
        Assert.Equal(nameof(ClientOptions.MaxSpilledPages), e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ClientOptions { MaxSpilledRepairBytes = -1 }.Validate());
        Assert.Contains(nameof(ClientOptions.MaxSpilledRepairBytes), e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ClientOptions { ReceiveCoalescing = TimeSpan.FromSeconds(1) }.Validate());
        Assert.Contains(nameof(ClientOptions.ReceiveCoalescing), e.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(0, 0)]
    [InlineData(1, 1)]
    [InlineData(30_000, 1)]
    [InlineData(30_001, 2)]
    [InlineData(90_000, 3)]
    public void FilesSplitIntoFixedPagesWithAShortLastOne(long size, long pages)
    {
        var o = new PageOptions();
        Assert.Equal(pages, o.PageCount(size));
        if (pages > 0)
        {
            long total = 0;
            for (long p = 0; p < pages; p++)
            {
                int length = o.PageLength(size, p);
                Assert.InRange(length, 1, o.PageSize);
                total += length;
            }

            Assert.Equal(size, total);
            Assert.Equal(1, o.PacketsIn(1));
            Assert.Equal(60, o.PacketsIn(30_000));
            Assert.Equal(2, o.PacketsIn(501));
        }
    }

    [Fact]
    public void TheCatalogNumbersPagesAndLocatesThem()
    {
        var catalog = new FileCatalog(new PageOptions());
        catalog.Add("a", new byte[65_000]);  // 3 pages
        catalog.Add("empty", Array.Empty<byte>());
        catalog.Add("b", new byte[30_000]);  // 1 page
        Assert.Equal(4, catalog.ItemCount);
        Assert.Equal((0, 2), catalog.Locate(2));
        Assert.Equal((2, 0), catalog.Locate(3));
        Assert.Equal(3, catalog.FirstItem(2));
        Assert.True(catalog.TryFindId(PageId.FileIdOf("b"), out int b));
        Assert.Equal(2, b);
        Assert.Throws<ArgumentException>(() => catalog.Add("a", new byte[1]));
    }

    [Fact]
    public void TheStoreVerifiesWholeFiles()
    {
        var content = new byte[40_000];
        new Random(1).NextBytes(content);
        var entry = new FileEntry("x", content.Length, SHA256.HashData(content));
        var store = new MemoryPageStore();
        store.WritePage(entry, 0, 0, content.AsSpan(0, 30_000));
        Assert.False(store.Verify(entry));
        store.WritePage(entry, 1, 30_000, content.AsSpan(30_000));
        Assert.True(store.Verify(entry));
        store.Corrupt("x", 12_345);
        Assert.False(store.Verify(entry));
    }
}
