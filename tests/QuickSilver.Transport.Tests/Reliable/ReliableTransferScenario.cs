using System.Buffers.Binary;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Tests.Reliable;

/// <summary>
/// The reliable-transfer check, independent of where it runs: <see cref="Sender"/> pushes numbered messages from a to b as
/// fast as the send buffer allows (resuming on SpaceAvailable); <see cref="Receiver"/> checks each arrives exactly once
/// and in order. Used in simulation and over real loopback UDP. Both run on their endpoint's core thread. With
/// <c>sizeOf</c>, message i has sizeOf(i) bytes (at least 4) filled with a pattern the receiver checks, so messages
/// cut into several segments must come back whole.
/// </summary>
internal sealed class ReliableTransferScenario
{
    private readonly TestEndpoint _a;
    private readonly NetAddress _to;
    private readonly int _total;
    private readonly byte[] _message;
    private readonly Func<int, int>? _sizeOf;
    private int _next;
    private long _received;

    public ReliableTransferScenario(TestEndpoint a, TestEndpoint b, int total, int messageBytes = 64, Func<int, int>? sizeOf = null)
    {
        _a = a;
        _to = b.LocalAddress;
        _total = total;
        _sizeOf = sizeOf;
        _message = new byte[sizeOf is null ? messageBytes : a.MaxMessageBytes];
        a.SpaceAvailable += _ => Pump();
        b.MessageReceived += OnMessage;
    }

    public long Received => Volatile.Read(ref _received);

    public int Sent => _next;

    /// <summary>The first delivery that was out of order or duplicated, if any.</summary>
    public string? Violation { get; private set; }

    public bool Done => Received == _total;

    /// <summary>Sends until the buffer is full or all are sent. Call on a's core thread.</summary>
    public void Pump()
    {
        while (_next < _total)
        {
            BinaryPrimitives.WriteInt32LittleEndian(_message, _next);
            int length = _sizeOf?.Invoke(_next) ?? _message.Length;
            for (int i = 4; _sizeOf is not null && i < length; i++)
            {
                _message[i] = Pattern(_next, i);
            }

            if (!_a.TrySend(_to, _message.AsSpan(0, length)))
            {
                return;
            }

            _next++;
        }
    }

    private void OnMessage(NetAddress from, ReadOnlySpan<byte> message)
    {
        int seq = BinaryPrimitives.ReadInt32LittleEndian(message);
        if (seq != _received)
        {
            Violation ??= $"expected message {_received}, got {seq}";
        }
        else if (_sizeOf is not null && message.Length != _sizeOf(seq))
        {
            Violation ??= $"message {seq} arrived with {message.Length} bytes, sent {_sizeOf(seq)}";
        }
        else if (_sizeOf is not null)
        {
            for (int i = 4; i < message.Length; i++)
            {
                if (message[i] != Pattern(seq, i))
                {
                    Violation ??= $"message {seq} differs at byte {i}";
                    break;
                }
            }
        }

        Interlocked.Increment(ref _received);
    }

    private static byte Pattern(int message, int index) => (byte)((message * 31) + (index * 7) + (index >> 8));
}
