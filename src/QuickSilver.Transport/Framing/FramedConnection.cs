using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using System.Net.Sockets;
using System.Threading.Channels;

namespace QuickSilver.Transport.Framing;

/// <summary>
/// A framed TCP connection: each frame is a u32 little-endian length then the frame, read and written with
/// System.IO.Pipelines. A length of 0 or above the connection's maximum frame size ends the connection. Outgoing frames
/// wait in a bounded queue; when it is full the connection is closed (a peer that does not read cannot make us grow),
/// or, for frames sent with <c>dropWhenFull</c>, the frame is dropped and counted. Shared by the dissemination request
/// channel and the federation's peering links (moved here from QuickSilver.Dissemination/Hosting).
/// </summary>
public sealed class FramedConnection : IAsyncDisposable
{
    /// <summary>Outgoing frames that may wait before the connection is given up.</summary>
    public const int OutgoingLimit = 4096;

    private readonly Socket _socket;
    private readonly NetworkStream _stream;
    private readonly PipeReader _reader;
    private readonly PipeWriter _writer;
    private readonly Channel<byte[]> _outgoing = Channel.CreateBounded<byte[]>(new BoundedChannelOptions(OutgoingLimit) { SingleReader = true, FullMode = BoundedChannelFullMode.Wait });
    private readonly CancellationTokenSource _closed = new();
    private Task? _writeLoop;

    private readonly int _maxFrameBytes;

    public FramedConnection(Socket socket, int maxFrameBytes)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxFrameBytes, 1);
        _maxFrameBytes = maxFrameBytes;
        _socket = socket ?? throw new ArgumentNullException(nameof(socket));
        _socket.NoDelay = true;
        _stream = new NetworkStream(socket, ownsSocket: true);
        _reader = PipeReader.Create(_stream);
        _writer = PipeWriter.Create(_stream);
    }

    /// <summary>Frames refused because the length prefix was 0 or too large (the connection then ends).</summary>
    public long OversizedFrames { get; private set; }

    /// <summary>Frames dropped because the outgoing queue was full (sent with <c>dropWhenFull</c>).</summary>
    public long DroppedFrames => Interlocked.Read(ref _dropped);

    private long _dropped;

    /// <summary>Queues a frame; false when the queue is full or closed. A full queue closes the connection unless
    /// <paramref name="dropWhenFull"/>, which drops the frame instead (best-effort data).</summary>
    public bool TrySend(ReadOnlySpan<byte> frame, bool dropWhenFull = false)
    {
        if (_outgoing.Writer.TryWrite(frame.ToArray()))
        {
            return true;
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
        _outgoing.Writer.TryComplete();
        if (!_closed.IsCancellationRequested)
        {
            _closed.Cancel();
        }
    }

    /// <summary>Reads frames until the peer closes, a frame is malformed, or <see cref="Close"/>; each frame is handed
    /// to <paramref name="onFrame"/> as a copy it may keep. Also starts the write loop.</summary>
    public async Task RunAsync(Action<byte[]> onFrame, CancellationToken cancellationToken)
    {
        using var linked = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, _closed.Token);
        _writeLoop = WriteLoopAsync(linked.Token);
        try
        {
            while (true)
            {
                var result = await _reader.ReadAsync(linked.Token).ConfigureAwait(false);
                var buffer = result.Buffer;
                while (TryReadFrame(ref buffer, out var frame))
                {
                    onFrame(frame);
                }

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
        }
    }

    private bool BadFrame { get; set; }

    private bool TryReadFrame(ref ReadOnlySequence<byte> buffer, out byte[] frame)
    {
        frame = Array.Empty<byte>();
        if (BadFrame || buffer.Length < 4)
        {
            return false;
        }

        Span<byte> prefix = stackalloc byte[4];
        buffer.Slice(0, 4).CopyTo(prefix);
        uint length = BinaryPrimitives.ReadUInt32LittleEndian(prefix);
        if (length == 0 || length > _maxFrameBytes)
        {
            OversizedFrames++;
            BadFrame = true;
            return false;
        }

        if (buffer.Length < 4 + length)
        {
            return false;
        }

        frame = buffer.Slice(4, length).ToArray();
        buffer = buffer.Slice(4 + length);
        return true;
    }

    private async Task WriteLoopAsync(CancellationToken cancellationToken)
    {
        try
        {
            await foreach (var frame in _outgoing.Reader.ReadAllAsync(cancellationToken).ConfigureAwait(false))
            {
                var span = _writer.GetSpan(4 + frame.Length);
                BinaryPrimitives.WriteUInt32LittleEndian(span, (uint)frame.Length);
                frame.CopyTo(span[4..]);
                _writer.Advance(4 + frame.Length);
                if (_outgoing.Reader.Count == 0)
                {
                    await _writer.FlushAsync(cancellationToken).ConfigureAwait(false);
                }
            }

            await _writer.FlushAsync(CancellationToken.None).ConfigureAwait(false);
        }
        finally
        {
            await _writer.CompleteAsync().ConfigureAwait(false);
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
    }
}
