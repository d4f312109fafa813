using System.Buffers.Binary;
using BenchmarkDotNet.Attributes;
using MessagePack;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Benchmarks;

/// <summary>Encode + decode of one message: the class-id fast path against the MessagePack object wrapper.</summary>
[MemoryDiagnoser]
public class WireBenchmarks
{
    private readonly ScatterGatherList _message = new();
    private readonly byte[] _frame = new byte[2048];
    private ClassRegistry? _registry;
    private SampleCodec? _codec;
    private MessagePackObjectCodec<SampleObject>? _objectCodec;
    private SampleObject? _object;
    private long _sink;

    [Params(100, 1400)]
    public int PayloadBytes { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        _codec = new SampleCodec(new byte[PayloadBytes]);
        _registry = new ClassRegistry();
        _registry.Register(_codec, (NetAddress _, in Sample s, ReadOnlySpan<byte> _) => _sink += s.Id);
        _objectCodec = new MessagePackObjectCodec<SampleObject>(500);
        _registry.Register(_objectCodec, (NetAddress _, in SampleObject o, ReadOnlySpan<byte> _) => _sink += o.Id);
        _object = new SampleObject { Id = 1, Payload = new byte[PayloadBytes] };
    }

    [Benchmark(Baseline = true)]
    public int ClassIdCodec()
    {
        _message.Clear();
        ClassRegistry.WriteFrame(_codec!, new Sample(7), _message);
        int length = _message.CopyTo(_frame);
        return _registry!.Dispatch(default, _frame.AsSpan(0, length), out _);
    }

    [Benchmark]
    public int MessagePackWrapper()
    {
        _message.Clear();
        ClassRegistry.WriteFrame(_objectCodec!, _object!, _message);
        int length = _message.CopyTo(_frame);
        return _registry!.Dispatch(default, _frame.AsSpan(0, length), out _);
    }

    public readonly record struct Sample(long Id);

    public sealed class SampleCodec(ReadOnlyMemory<byte> payload) : IWireCodec<Sample>
    {
        public ushort ClassId => 400;

        public void Write(in Sample value, ScatterGatherList output)
        {
            BinaryPrimitives.WriteInt64LittleEndian(output.AppendHeader(8), value.Id);
            output.AppendSegment(payload);
        }

        public WireError TryRead(ReadOnlySpan<byte> body, out Sample value)
        {
            value = default;
            if (body.Length < 8)
            {
                return WireError.Truncated;
            }

            value = new Sample(BinaryPrimitives.ReadInt64LittleEndian(body));
            return WireError.None;
        }
    }

    [MessagePackObject]
    public sealed class SampleObject
    {
        [Key(0)] public long Id { get; set; }
        [Key(1)] public byte[] Payload { get; set; } = [];
    }
}
