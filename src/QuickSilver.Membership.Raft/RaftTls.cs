using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using DotNext.Net.Security;
using Microsoft.Extensions.Logging;

namespace QuickSilver.Membership.Raft;

/// <summary>
/// Authenticated, encrypted replica-to-replica traffic (docs/membership.md, "Replica traffic"): every Raft connection is
/// TLS 1.3 with a certificate on both sides, and each side accepts the other only if its certificate's public key is
/// the cluster's. The key is an ECDSA P-256 key derived from the cluster secret (HKDF-SHA256 with its own info string,
/// so it is none of the datagram keys), so every replica given the secret holds the same key and nothing else needs
/// distributing; the certificate around it is self-signed and only carries it (names, chains and dates are not checked:
/// the pinned key is the trust). A peer without the secret cannot complete a handshake in either direction: it can
/// neither vote, nor stand for election, nor receive or send log entries. Each refused certificate is counted and
/// logged (at most once per 10 s).
/// </summary>
internal sealed class RaftTls : IDisposable
{
    private readonly X509Certificate2 _certificate;
    private readonly byte[] _publicKey;
    private readonly ILogger _log;
    private readonly uint _replica;
    private long _refused;
    private long _lastLogged = long.MinValue / 2; // "long ago", without overflowing now - _lastLogged

    private RaftTls(X509Certificate2 certificate, ILogger log, uint replica)
    {
        _certificate = certificate;
        _publicKey = certificate.PublicKey.ExportSubjectPublicKeyInfo();
        _log = log;
        _replica = replica;
    }

    /// <summary>Peer certificates refused (none, or not the cluster's key): connections from, or to, a peer without the
    /// secret.</summary>
    public long Refused => Interlocked.Read(ref _refused);

    /// <summary>The public key every replica's certificate carries (SubjectPublicKeyInfo, DER), for tests.</summary>
    public ReadOnlySpan<byte> PublicKey => _publicKey;

    /// <summary>Credentials from <paramref name="clusterSecret"/> (at least 32 bytes).</summary>
    public static RaftTls FromSecret(ReadOnlySpan<byte> clusterSecret, ILogger log, uint replica)
    {
        if (clusterSecret.Length < Core.Security.DatagramSecurityOptions.MinSecretBytes)
        {
            throw new ArgumentException($"RaftGmsOptions.ClusterSecret must be at least {Core.Security.DatagramSecurityOptions.MinSecretBytes} bytes; got {clusterSecret.Length}.", nameof(clusterSecret));
        }

        using var key = DeriveKey(clusterSecret);
        var request = new CertificateRequest("CN=QuickSilver GMS replica", key, HashAlgorithmName.SHA256);
        // Fixed dates: the certificate only carries the pinned key, and a replica's clock must not make it invalid.
        using var selfSigned = request.CreateSelfSigned(new DateTimeOffset(2020, 1, 1, 0, 0, 0, TimeSpan.Zero), new DateTimeOffset(2120, 1, 1, 0, 0, 0, TimeSpan.Zero));
        // Through PKCS #12 so the private key is usable by SslStream on every platform (Windows wants a persisted key).
        var certificate = X509CertificateLoader.LoadPkcs12(selfSigned.Export(X509ContentType.Pkcs12), password: null);
        return new RaftTls(certificate, log, replica);
    }

    /// <summary>The cluster's P-256 key: HKDF-SHA256 of the secret as the private scalar (tried again with a counter in
    /// the info in the negligible case it is not below the curve order).</summary>
    internal static ECDsa DeriveKey(ReadOnlySpan<byte> clusterSecret)
    {
        Span<byte> d = stackalloc byte[32];
        for (byte attempt = 0; ; attempt++)
        {
            byte[] info = [.. "QuickSilver GMS Raft TLS key v1 "u8, attempt];
            HKDF.DeriveKey(HashAlgorithmName.SHA256, clusterSecret, d, "QuickSilver cluster secret"u8, info);
            try
            {
                var key = ECDsa.Create();
                key.ImportParameters(new ECParameters { Curve = ECCurve.NamedCurves.nistP256, D = d.ToArray() });
                return key;
            }
            catch (CryptographicException) when (attempt < 8)
            {
                // D was zero or not below the order: derive again.
            }
            finally
            {
                CryptographicOperations.ZeroMemory(d);
            }
        }
    }

    /// <summary>The engine's TLS options: our certificate on both sides, a client certificate required, TLS 1.3, and the
    /// peer accepted only with the cluster's public key.</summary>
    public SslOptions CreateOptions()
    {
        var options = new SslOptions();
        options.ServerOptions.ServerCertificate = _certificate;
        options.ServerOptions.ClientCertificateRequired = true;
        options.ServerOptions.EnabledSslProtocols = SslProtocols.Tls13;
        options.ServerOptions.CertificateRevocationCheckMode = X509RevocationMode.NoCheck;
        options.ServerOptions.RemoteCertificateValidationCallback = Validate;
        options.ClientOptions.ClientCertificates = [_certificate];
        options.ClientOptions.EnabledSslProtocols = SslProtocols.Tls13;
        options.ClientOptions.CertificateRevocationCheckMode = X509RevocationMode.NoCheck;
        options.ClientOptions.RemoteCertificateValidationCallback = Validate;
        options.ClientOptions.TargetHost = "quicksilver-gms";
        return options;
    }

    /// <summary>Accepts a peer certificate only if it carries the cluster's public key; chain and name errors are expected
    /// (self-signed, no host name) and ignored, since the key is what is trusted.</summary>
    internal bool Validate(object sender, X509Certificate? certificate, X509Chain? chain, SslPolicyErrors errors)
    {
        if (certificate is not null)
        {
            using var peer = X509CertificateLoader.LoadCertificate(certificate.GetRawCertData());
            if (peer.PublicKey.ExportSubjectPublicKeyInfo().AsSpan().SequenceEqual(_publicKey))
            {
                return true;
            }
        }

        long refused = Interlocked.Increment(ref _refused);
        long now = Environment.TickCount64;
        long last = Interlocked.Read(ref _lastLogged);
        if (now - last >= 10_000 && Interlocked.CompareExchange(ref _lastLogged, now, last) == last)
        {
            RaftLog.PeerRefused(_log, _replica, certificate is null ? "no certificate" : "a certificate without the cluster's key", refused);
        }

        return false;
    }

    public void Dispose() => _certificate.Dispose();
}
