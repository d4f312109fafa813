using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Transport.Tests.Reliable;

/// <summary>
/// The reliable-transfer check, independent of where it runs: <see cref="Sender"/> pushes numbered messages from a to b as
/// fast as the send buffer allows (resuming on SpaceAvailable); <see cref="Receiver"/> checks each arrives exactly once
/// and in order. Used in simulation and over real loopback UDP. Both run on their endpoint's core thread.
/// </summary>
internal sealed class ReliableTransferScenario
{
    private readonly ReliableUnicast _a;
    private readonly NetAddress _to;
    private readonly int _total;
    private readonly byte[] _message;
    private int _next;
    private long _received;

    public ReliableTransferScenario(ReliableUnicast a, ReliableUnicast b, int total, int messageBytes = 64)
    {
        _a = a;
        _to = b.LocalAddress;
        _total = total;
        _message = new byte[messageBytes];
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
            if (!_a.TrySend(_to, _message))
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

        Interlocked.Increment(ref _received);
    }
}
