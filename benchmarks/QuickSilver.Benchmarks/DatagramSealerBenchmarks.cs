using System.Security.Cryptography;
using BenchmarkDotNet.Attributes;
using QuickSilver.Core.Security;
using QuickSilver.Core.Wire;

namespace QuickSilver.Benchmarks;

/// <summary>
/// What datagram security costs per datagram (docs/security.md, "Datagram authentication"): sealing one datagram in
/// place and opening it, per mode and cipher suite, at 1,000 B (the comparison runner's message size) and 16 KiB (a full loopback
/// datagram of packed messages). HMAC-SHA256 over the same bytes is the alternative the design set aside.
/// </summary>
[MemoryDiagnoser]
public class DatagramSealerBenchmarks
{
    private readonly byte[] _plaintext = new byte[16 * 1024];
    private byte[] _buffer = [];
    private byte[] _sealed = [];
    private byte[] _hmacKey = [];
    private readonly byte[] _hmac = new byte[32];
    private DatagramSealer? _authenticate;
    private DatagramSealer? _encrypt;
    private int _authenticatedLength;
    private int _encryptedLength;
    private byte[] _encrypted = [];

    [Params(1000, 16 * 1024 - 48)] // 48: the larger suite's trailer
    public int Bytes { get; set; }

    [Params(DatagramCipherSuite.Aegis128L, DatagramCipherSuite.AesGcm)]
    public DatagramCipherSuite Suite { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        var secret = DatagramSecurityOptions.GenerateSecret();
        _authenticate = new DatagramSealer(DatagramSecurity.Authenticate, DatagramKeyRing.FromSecret(secret, DatagramSecurity.Authenticate, Suite));
        _encrypt = new DatagramSealer(DatagramSecurity.Encrypt, DatagramKeyRing.FromSecret(secret, DatagramSecurity.Encrypt, Suite));
        _buffer = new byte[Bytes + _authenticate.Overhead];
        _sealed = new byte[Bytes + _authenticate.Overhead];
        _encrypted = new byte[Bytes + _authenticate.Overhead];
        new PacketHeader((PacketType)5, 1, (ushort)Math.Min(Bytes, ushort.MaxValue)).Write(_buffer);
        RandomNumberGenerator.Fill(_buffer.AsSpan(PacketHeader.Size, Bytes - PacketHeader.Size));
        _buffer.AsSpan(0, Bytes).CopyTo(_sealed);
        _authenticatedLength = _authenticate.Seal(_sealed, Bytes);
        _buffer.AsSpan(0, Bytes).CopyTo(_encrypted);
        _encryptedLength = _encrypt.Seal(_encrypted, Bytes);
        _hmacKey = RandomNumberGenerator.GetBytes(32);
    }

    [Benchmark(Baseline = true)]
    public int SealAuthenticate() => _authenticate!.Seal(_buffer, Bytes);

    [Benchmark]
    public DatagramRejection OpenAuthenticate() => _authenticate!.Open(_sealed.AsSpan(0, _authenticatedLength), default, out _, out _, out _);

    [Benchmark]
    public int SealEncrypt() => _encrypt!.Seal(_buffer, Bytes);

    [Benchmark]
    public DatagramRejection OpenEncrypt() => _encrypt!.Open(_encrypted.AsSpan(0, _encryptedLength), _plaintext, out _, out _, out _);

    [Benchmark]
    public int HmacSha256() => HMACSHA256.HashData(_hmacKey, _buffer.AsSpan(0, Bytes + 16), _hmac);
}
