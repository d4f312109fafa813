using System.CommandLine;
using QuickSilver.Core.Security;

namespace QuickSilver.Tools;

/// <summary>
/// The datagram-security flags both verbs take: <c>--secret-file PATH</c> (or the environment variable
/// <see cref="SecretFileVariable"/> naming the file), a file holding the cluster secret in base64, and
/// <c>--security off|authenticate|encrypt</c>, by default authenticate when a secret is given and off without one, and
/// <c>--cipher aegis128l|aesgcm</c> (default aegis128l).
/// The GMS and every node must be given the same secret and mode.
/// </summary>
internal sealed class SecurityFlags
{
    public const string SecretFileVariable = "QS_SECRET_FILE";

    private SecurityFlags(Option<string?> secretFile, Option<string?> mode, Option<string?> cipher)
    {
        SecretFile = secretFile;
        Mode = mode;
        Cipher = cipher;
    }

    public Option<string?> SecretFile { get; }

    public Option<string?> Mode { get; }

    public Option<string?> Cipher { get; }

    public static SecurityFlags Create()
    {
        var secretFile = new Option<string?>("--secret-file")
        {
            Description = $"File holding the cluster secret, base64 of at least {DatagramSecurityOptions.MinSecretBytes} random bytes " +
                          $"(e.g. 'head -c 32 /dev/urandom | base64 > secret'); default: the file ${SecretFileVariable} names, if set.",
        };
        var mode = new Option<string?>("--security") { Description = "off, authenticate or encrypt; default authenticate with a secret, off without." };
        mode.Validators.Add(r =>
        {
            if (r.GetValueOrDefault<string?>() is { } text && !Enum.TryParse<DatagramSecurity>(text, ignoreCase: true, out _))
            {
                r.AddError($"--security must be off, authenticate or encrypt; got '{text}'.");
            }
        });
        var cipher = new Option<string?>("--cipher") { Description = "aegis128l (default) or aesgcm: the AEAD that seals datagrams; the GMS and every node must agree." };
        cipher.Validators.Add(r =>
        {
            if (r.GetValueOrDefault<string?>() is { } text && (!Enum.TryParse<DatagramCipherSuite>(text, ignoreCase: true, out var suite) || !Enum.IsDefined(suite)))
            {
                r.AddError($"--cipher must be aegis128l or aesgcm; got '{text}'.");
            }
        });
        return new SecurityFlags(secretFile, mode, cipher);
    }

    /// <summary>The options the flags describe, or false after printing to stderr what is wrong (naming the flag).</summary>
    public bool TryRead(ParseResult parse, out DatagramSecurityOptions options)
    {
        try
        {
            options = Read(parse);
            return true;
        }
        catch (ArgumentException e)
        {
            Console.Error.WriteLine(e.Message);
            options = new DatagramSecurityOptions();
            return false;
        }
    }

    /// <summary>The options the flags describe; <see cref="ArgumentException"/> naming the flag when the secret file is
    /// missing, unreadable or not base64.</summary>
    public DatagramSecurityOptions Read(ParseResult parse)
    {
        string? path = parse.GetValue(SecretFile) ?? Environment.GetEnvironmentVariable(SecretFileVariable);
        string flag = parse.GetValue(SecretFile) is null && path is not null ? $"${SecretFileVariable} ({path})" : "--secret-file";
        byte[]? secret = null;
        if (!string.IsNullOrEmpty(path))
        {
            string text;
            try
            {
                text = File.ReadAllText(path);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                throw new ArgumentException($"{flag}: cannot read the secret file: {e.Message}", e);
            }

            secret = DatagramSecurityOptions.DecodeSecret(text, flag);
            if (secret.Length < DatagramSecurityOptions.MinSecretBytes)
            {
                throw new ArgumentException($"{flag}: the cluster secret must be at least {DatagramSecurityOptions.MinSecretBytes} bytes, the file holds {secret.Length}.");
            }
        }

        var mode = parse.GetValue(Mode) is { } given
            ? Enum.Parse<DatagramSecurity>(given, ignoreCase: true)
            : secret is null ? DatagramSecurity.Off : DatagramSecurity.Authenticate;
        if (mode != DatagramSecurity.Off && secret is null)
        {
            throw new ArgumentException($"--security {mode} needs the cluster secret: --secret-file or ${SecretFileVariable}.");
        }

        if (mode == DatagramSecurity.Off)
        {
            secret = null; // --security off with a secret: explicitly unprotected
        }

        var suite = parse.GetValue(Cipher) is { } named ? Enum.Parse<DatagramCipherSuite>(named, ignoreCase: true) : DatagramCipherSuite.Aegis128L;
        return new DatagramSecurityOptions { Mode = mode, ClusterSecret = secret, Cipher = suite };
    }
}
