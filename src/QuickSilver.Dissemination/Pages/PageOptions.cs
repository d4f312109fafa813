namespace QuickSilver.Dissemination.Pages;

/// <summary>How files are cut into pages and pages into packets (seed 001, Table 1 and §4.3).</summary>
public sealed record PageOptions
{
    /// <summary>The seed's largest page: 116 packets of 500 bytes, where 116 + ⌊1.2 · 116⌋ = 255 packets fill the code.</summary>
    public const int MaxPageSize = 58_000;

    /// <summary>Bytes of file data per data packet (seed: 500, so a packet with its header fits 544 bytes of UDP/IPv4).</summary>
    public int PacketPayload { get; init; } = 500;

    /// <summary>Bytes per page, a whole number of packets, at most <see cref="MaxPageSize"/> (seed: 30,000).</summary>
    public int PageSize { get; init; } = 30_000;

    /// <summary>Source packets in a full page (k).</summary>
    public int PacketsPerPage => PageSize / PacketPayload;

    /// <summary>Throws <see cref="ArgumentOutOfRangeException"/> naming the bad option.</summary>
    public void Validate()
    {
        if (PacketPayload < 16 || PacketPayload > Protocol.Wire.MaxPacketPayload)
        {
            throw new ArgumentOutOfRangeException(nameof(PacketPayload), PacketPayload, $"PageOptions.PacketPayload must be between 16 and {Protocol.Wire.MaxPacketPayload} bytes, got {PacketPayload}.");
        }

        if (PageSize < PacketPayload || PageSize > MaxPageSize)
        {
            throw new ArgumentOutOfRangeException(nameof(PageSize), PageSize, $"PageOptions.PageSize must be between PacketPayload ({PacketPayload}) and {MaxPageSize} bytes, got {PageSize}.");
        }

        if (PageSize % PacketPayload != 0)
        {
            throw new ArgumentOutOfRangeException(nameof(PageSize), PageSize, $"PageOptions.PageSize ({PageSize}) must be a multiple of PageOptions.PacketPayload ({PacketPayload}).");
        }

        if (PacketsPerPage > 255)
        {
            throw new ArgumentOutOfRangeException(nameof(PageSize), PageSize, $"PageOptions.PageSize ({PageSize}) is {PacketsPerPage} packets of {PacketPayload} bytes; the erasure code holds at most 255.");
        }
    }

    /// <summary>Pages in a file of <paramref name="size"/> bytes (the last may be short; an empty file has none).</summary>
    public long PageCount(long size) => size <= 0 ? 0 : ((size - 1) / PageSize) + 1;

    /// <summary>Bytes in page <paramref name="page"/> of a file of <paramref name="size"/> bytes.</summary>
    public int PageLength(long size, long page) => (int)Math.Min(PageSize, size - (page * PageSize));

    /// <summary>Source packets (k) of a page of <paramref name="pageLength"/> bytes; its last packet is zero-padded.</summary>
    public int PacketsIn(int pageLength) => (pageLength + PacketPayload - 1) / PacketPayload;
}
