using System.Buffers;
using System.Buffers.Binary;
using System.Diagnostics;
using System.IO.Pipelines;
using System.Net.Sockets;

namespace QuickSilver.Transport.Framing;

/// <summary>A frame handed to a reader: valid only during the call (it points into the connection's receive buffer).</summary>
public delegate void FrameSpanHandler(ReadOnlySpan<byte> frame);

/// <summary>
/// A framed TCP connection: each frame is a u32 little-endian length then the frame, read and written with
/// System.IO.Pipelines. A length of 0 or above the connection's maximum frame size ends the connection.
/// <para>Sending: <see cref="TrySend(ReadOnlySpan{byte}, bool)"/> copies the length prefix and the frame straight into an outgoing
/// <see cref="Pipe"/> (pooled 64 KiB segments, no allocation per frame); one write loop takes everything queued since its
/// last write and hands it to the socket in one write per segment, so a burst of small frames costs a few system calls,
/// not one each. The queue is bounded in bytes (<see cref="OutgoingByteLimit"/>, prefixes included): when a frame does not
/// fit, the connection is closed (a peer that does not read cannot make us grow), or, for frames sent with
/// <c>dropWhenFull</c>, the frame is dropped and counted (<see cref="DroppedFrames"/>).</para>
/// <para>Receiving: <see cref="RunAsync(FrameSpanHandler, CancellationToken)"/> hands each frame to the reader as a span
/// into the receive pipe (a frame split across two pipe segments is first assembled in one reusable buffer), so a
/// reader that copies the frame where it needs it costs no copy or allocation here.</para>
/// <para>Sealing: after <see cref="Seal"/> (a peering link once its handshake has derived keys) every frame sent is
/// encrypted and tagged (<see cref="FrameSealer"/>, the length prefix then counting the tag) and every frame received
/// must open, or it is counted (<see cref="RejectedFrames"/>) and the connection ends.</para>
/// Shared by the dissemination request channel and the federation's peering links and bulk data channels.
/// </summary>
public sealed class FramedConnection : IAsyncDisposable
{
    /// <summary>Frames a caller may keep waiting for a connection being dialled (bulk data channels); the connection
    /// itself bounds its queue in bytes.</summary>
    public const int OutgoingLimit = 4096;

    /// <summary>The default bound of the outgoing queue in bytes (length prefixes included): 8 MiB, about 8,000 frames
    /// of 1,000 B or 60,000 of 100 B.</summary>
    public const int DefaultOutgoingByteLimit = 8 << 20;

    private const int SegmentBytes = 64 << 10;

    private const int FrameSealerMaxOverhead = 32; // the longest tag of a DatagramCipherSuite

    private readonly Socket _socket;
    private readonly NetworkStream _stream;
    private readonly PipeReader _reader;
    private readonly Pipe _outgoing = new(new PipeOptions(pauseWriterThreshold: 0, resumeWriterThreshold: 0, minimumSegmentSize: SegmentBytes, useSynchronizationContext: false));
    private readonly Lock _sendLock = new();
    private readonly CancellationTokenSource _closed = new();
    private readonly int _maxFrameBytes;
    private bool _sendClosed; // under _sendLock
    private long _queuedBytes;
    private long _dropped;
    private long _writes;
    private byte[]? _assembly; // a frame split across receive segments, put together
    private FrameSealer? _sendSealer; // under _sendLock
    private FrameSealer? _receiveSealer; // the reader's
    private byte[]? _plaintext; // an opened frame
    private long _rejected;
    private Task? _writeLoop;

    public FramedConnection(Socket socket, int maxFrameBytes, int outgoingByteLimit = DefaultOutgoingByteLimit)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxFrameBytes, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(outgoingByteLimit, maxFrameBytes + 4, nameof(outgoingByteLimit));
        _maxFrameBytes = maxFrameBytes;
        OutgoingByteLimit = outgoingByteLimit;
        _socket = socket ?? throw new ArgumentNullException(nameof(socket));
        _socket.NoDelay = true;
        _stream = new NetworkStream(socket, ownsSocket: true);
        _reader = PipeReader.Create(_stream);
    }

    /// <summary>The outgoing queue's bound in bytes (each frame counts its length and its 4-byte prefix).</summary>
    public int OutgoingByteLimit { get; }

    /// <summary>Bytes queued and not yet handed to the socket.</summary>
    public long QueuedBytes => Interlocked.Read(ref _queuedBytes);

    /// <summary>Frames refused because the length prefix was 0 or too large (the connection then ends).</summary>
    public long OversizedFrames { get; private set; }

    /// <summary>Frames dropped because the outgoing queue was full (sent with <c>dropWhenFull</c>).</summary>
    public long DroppedFrames => Interlocked.Read(ref _dropped);

    /// <summary>Socket writes the write loop made (each carries every frame queued since the previous one, up to a
    /// 64 KiB segment): frames sent / writes is the batching.</summary>
    public long Writes => Interlocked.Read(ref _writes);

    /// <summary>Sealed frames that did not open (forged, altered, replayed, another key); the first one ends the
    /// connection.</summary>
    public long RejectedFrames => Interlocked.Read(ref _rejected);

    /// <summary>Whether <see cref="Seal"/> was called.</summary>
    public bool IsSealed => Volatile.Read(ref _receiveSealer) is not null;

    /// <summary>Seals the connection from now on: every frame queued after this call is sealed with
    /// <paramref name="sealer"/>, and every frame received after the one being handled must open under it. Call it from
    /// the frame handler of <see cref="RunAsync(FrameSpanHandler, CancellationToken)"/> (the reader), so the switch
    /// falls exactly after the frame that completed the handshake. Once only; the connection disposes the sealer.</summary>
    public void Seal(FrameSealer sealer)
    {
        ArgumentNullException.ThrowIfNull(sealer);
        lock (_sendLock)
        {
            if (_sendSealer is not null)
            {
                throw new InvalidOperationException("the connection is sealed already");
            }

            _sendSealer = sealer;
        }

        Volatile.Write(ref _receiveSealer, sealer);
    }

    /// <summary>Queues a frame (copied); false when the queue is full or closed. A full queue closes the connection
    /// unless <paramref name="dropWhenFull"/>, which drops the frame instead (best-effort data). A frame above the maximum
    /// frame size is dropped and counted. Any thread.</summary>
    public bool TrySend(ReadOnlySpan<byte> frame, bool dropWhenFull = false) => TrySend(frame, default, dropWhenFull);

    /// <summary>As <see cref="TrySend(ReadOnlySpan{byte}, bool)"/>, the frame being <paramref name="head"/> then
    /// <paramref name="body"/>, gathered straight into the queue: a sender that adds a fixed header to a payload (the
    /// TCP fan-out hub's PUB) needs no array per frame.</summary>
    public bool TrySend(ReadOnlySpan<byte> head, ReadOnlySpan<byte> body, bool dropWhenFull = false)
    {
        int frameLength = head.Length + body.Length;
        if (frameLength > _maxFrameBytes)
        {
            Interlocked.Increment(ref _dropped); // the peer would close the connection on it
            return false;
        }

        lock (_sendLock)
        {
            if (_sendClosed)
            {
                return false;
            }

            int sealedLength = frameLength + (_sendSealer?.Overhead ?? 0);
            int bytes = 4 + sealedLength;
            if (Interlocked.Read(ref _queuedBytes) + bytes <= OutgoingByteLimit)
            {
                var writer = _outgoing.Writer;
                var span = writer.GetSpan(bytes);
                BinaryPrimitives.WriteUInt32LittleEndian(span, (uint)sealedLength);
                head.CopyTo(span[4..]);
                body.CopyTo(span[(4 + head.Length)..]);
                _sendSealer?.Seal(span.Slice(4, sealedLength), frameLength);
                writer.Advance(bytes);
                Interlocked.Add(ref _queuedBytes, bytes);
                // Never pauses (pauseWriterThreshold 0): completes at once and wakes the write loop if it waits.
                var flushed = writer.FlushAsync();
                Debug.Assert(flushed.IsCompleted, "a pipe without a pause threshold flushes synchronously");
                _ = flushed.IsCompleted ? flushed.Result : default;
                return true;
            }
        }

        if (dropWhenFull && !_closed.IsCancellationRequested)
        {
            Interlocked.Increment(ref _dropped);
            return false;
        }

        Close();
        return false;
    }

    public void Close()
    {
        lock (_sendLock)
        {
            if (!_sendClosed)
            {
                _sendClosed = true;
                _outgoing.Writer.Complete();
            }
        }

        if (!_closed.IsCancellationRequested)
        {
            _closed.Cancel();
        }
    }

    /// <summary>Reads frames until the peer closes, a frame is malformed, or <see cref="Close"/>; each frame is handed
    /// to <paramref name="onFrame"/> as a copy it may keep. Also starts the write loop.</summary>
    public Task RunAsync(Action<byte[]> onFrame, CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(onFrame);
        return RunAsync(new FrameSpanHandler(frame => onFrame(frame.ToArray())), cancellationToken);
    }

    /// <summary>Reads frames until the peer closes, a frame is malformed, or <see cref="Close"/>; each frame is handed
    /// to <paramref name="onFrame"/> as a span valid only during the call. Also starts the write loop.</summary>
    public async Task RunAsync(FrameSpanHandler onFrame, CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(onFrame);
        using var linked = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, _closed.Token);
        _writeLoop = WriteLoopAsync(linked.Token);
        try
        {
            while (true)
            {
                var result = await _reader.ReadAsync(linked.Token).ConfigureAwait(false);
                var buffer = result.Buffer;
                Deliver(ref buffer, onFrame);
                if (BadFrame)
                {
                    break;
                }

                _reader.AdvanceTo(buffer.Start, buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
        }
        catch (OperationCanceledException)
        {
        }
        catch (IOException)
        {
        }
        catch (SocketException)
        {
        }
        finally
        {
            Close();
            // Completing the reader disposes the stream (PipeReader.Create does not leave it open), which a write still
            // in flight then reports as ObjectDisposedException: the connection is over either way.
            await _reader.CompleteAsync().ConfigureAwait(false);
            try
            {
                await _writeLoop.ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
            }
            catch (IOException)
            {
            }
            catch (SocketException)
            {
            }
            catch (ObjectDisposedException)
            {
            }
        }
    }

    private bool BadFrame { get; set; }

    // Every whole frame in the buffer, in order; the buffer is left at the first byte not consumed.
    private void Deliver(ref ReadOnlySequence<byte> buffer, FrameSpanHandler onFrame)
    {
        Span<byte> prefix = stackalloc byte[4];
        while (!BadFrame && buffer.Length >= 4)
        {
            buffer.Slice(0, 4).CopyTo(prefix);
            uint length = BinaryPrimitives.ReadUInt32LittleEndian(prefix);
            var sealer = _receiveSealer;
            if (length == 0 || length > _maxFrameBytes + (sealer?.Overhead ?? 0))
            {
                OversizedFrames++;
                BadFrame = true;
                return;
            }

            if (buffer.Length < 4 + length)
            {
                return;
            }

            var frame = buffer.Slice(4, length);
            ReadOnlySpan<byte> whole;
            if (frame.IsSingleSegment)
            {
                whole = frame.FirstSpan;
            }
            else
            {
                _assembly ??= new byte[_maxFrameBytes + FrameSealerMaxOverhead];
                frame.CopyTo(_assembly);
                whole = _assembly.AsSpan(0, (int)length);
            }

            if (sealer is null)
            {
                onFrame(whole);
            }
            else if (sealer.Open(whole, _plaintext ??= new byte[_maxFrameBytes], out int opened))
            {
                onFrame(_plaintext.AsSpan(0, opened));
            }
            else
            {
                Interlocked.Increment(ref _rejected);
                BadFrame = true;
                return;
            }

            buffer = buffer.Slice(4 + length);
        }
    }

    private async Task WriteLoopAsync(CancellationToken cancellationToken)
    {
        var reader = _outgoing.Reader;
        try
        {
            while (true)
            {
                var result = await reader.ReadAsync(cancellationToken).ConfigureAwait(false);
                var buffer = result.Buffer;
                foreach (var segment in buffer)
                {
                    await _stream.WriteAsync(segment, cancellationToken).ConfigureAwait(false);
                    Interlocked.Increment(ref _writes);
                }

                Interlocked.Add(ref _queuedBytes, -buffer.Length);
                reader.AdvanceTo(buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
        }
        finally
        {
            await reader.CompleteAsync().ConfigureAwait(false);
            try
            {
                _socket.Shutdown(SocketShutdown.Both);
            }
            catch (SocketException)
            {
            }
            catch (ObjectDisposedException)
            {
            }
        }
    }

    public async ValueTask DisposeAsync()
    {
        Close();
        await _stream.DisposeAsync().ConfigureAwait(false);
        _closed.Dispose();
        lock (_sendLock)
        {
            _sendSealer?.Dispose();
        }
    }
}
