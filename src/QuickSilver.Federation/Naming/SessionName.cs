using System.Globalization;
using System.Text;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Naming;

/// <summary>
/// A federation-wide session name (seed §3.2): <c>bfed://owner-island/native-name/flow1/flow2/.../?p1=v1&amp;p2=v2</c>.
/// The owner island is its 32-bit number in decimal (the seed also allows a DNS name; we do not resolve names). The
/// native name is opaque outside the owner island. At least one flow is required. Parameters may repeat
/// (<c>metric=latency&amp;metric=bandwidth</c>); the ones the gateway reads are <c>metric</c> (hops, latency,
/// bandwidth: the first one names the routing table), <c>multi-source</c> / <c>single-source</c> (bi- or
/// uni-directional trees) and <c>content</c> (kept, not interpreted). Unknown parameters are kept.
/// The whole text is the session's identity; <see cref="Text"/> is the canonical form.
/// </summary>
public sealed class SessionName : IEquatable<SessionName>
{
    public const string Scheme = "bfed://";

    /// <summary>Longest name accepted, in UTF-8 bytes (it travels in JOIN, LEAVE and SROUTE frames).</summary>
    public const int MaxBytes = 1024;

    public const int MaxFlows = 16;

    public const int MaxParameters = 16;

    private SessionName(IslandId owner, string nativeName, string[] flows, KeyValuePair<string, string>[] parameters)
    {
        Owner = owner;
        NativeName = nativeName;
        Flows = flows;
        Parameters = parameters;
        var text = new StringBuilder(Scheme).Append(owner.Value.ToString(CultureInfo.InvariantCulture)).Append('/').Append(nativeName).Append('/');
        foreach (var flow in flows)
        {
            text.Append(flow).Append('/');
        }

        if (parameters.Length > 0)
        {
            text.Append('?').AppendJoin('&', parameters.Select(p => p.Key + "=" + p.Value));
        }

        Text = text.ToString();
        Metric = RouteMetric.Hops;
        foreach (var (key, value) in parameters)
        {
            if (key == "metric")
            {
                Metric = value switch { "hops" => RouteMetric.Hops, "latency" => RouteMetric.Latency, _ => RouteMetric.Bandwidth };
                break;
            }
        }

        RealTime = parameters.Any(p => p.Key == "content" && p.Value is "real-time" or "RTP");
        Delivery = parameters.FirstOrDefault(p => p.Key == "delivery").Value switch
        {
            "unicast" => SessionDelivery.Unicast,
            "corecast" => SessionDelivery.CoreCast,
            _ => SessionDelivery.Tree,
        };
        MultiSource = parameters.Any(p => (p.Key == "multi-source" && p.Value == "true") || (p.Key == "single-source" && p.Value == "false"));
    }

    public IslandId Owner { get; }

    public string NativeName { get; }

    public IReadOnlyList<string> Flows { get; }

    public IReadOnlyList<KeyValuePair<string, string>> Parameters { get; }

    /// <summary>The routing table this session's JOINs and SROUTEs use (the first <c>metric=</c>; hops by default).</summary>
    public RouteMetric Metric { get; }

    /// <summary>True for a bi-directional tree (seed §5.3.3): data from any tree neighbour goes to all the others.</summary>
    public bool MultiSource { get; }

    public string Text { get; }

    /// <summary>True with <c>content=real-time</c> (or the seed's <c>content=RTP</c>): data crosses peering links as UDP
    /// datagrams instead of inside the TCP link (seed §5.3: "UDP for sessions with real-time or best-effort requirements").</summary>
    public bool RealTime { get; }

    /// <summary>How the session crosses peering links (<c>delivery=</c>): <see cref="SessionDelivery.Tree"/> (one DATA
    /// frame per downstream gateway, the default), or per receiver: <see cref="SessionDelivery.Unicast"/> (a full frame
    /// per receiver) or <see cref="SessionDelivery.CoreCast"/> (the payload once per downstream gateway, then a header
    /// per receiver; seed 004), the latter falling back to unicast toward a peer that did not announce CoreCast.</summary>
    public SessionDelivery Delivery { get; }

    public static SessionName Parse(string text)
        => TryParse(text, out var name, out var error) ? name : throw new FormatException(error);

    /// <summary>Parses <paramref name="text"/>; on failure <paramref name="error"/> says what is wrong and where.</summary>
    public static bool TryParse(string? text, [System.Diagnostics.CodeAnalysis.NotNullWhen(true)] out SessionName? name, out string error)
    {
        name = null;
        if (string.IsNullOrEmpty(text))
        {
            error = "session name is empty; expected bfed://<owner-island>/<native-name>/<flow>/...";
            return false;
        }

        if (Encoding.UTF8.GetByteCount(text) > MaxBytes)
        {
            error = $"session name is longer than {MaxBytes} bytes";
            return false;
        }

        if (!text.StartsWith(Scheme, StringComparison.Ordinal))
        {
            error = $"session name must start with '{Scheme}'; got '{Shorten(text)}'";
            return false;
        }

        string rest = text[Scheme.Length..];
        string query = "";
        int q = rest.IndexOf('?', StringComparison.Ordinal);
        if (q >= 0)
        {
            query = rest[(q + 1)..];
            rest = rest[..q];
        }

        if (rest.EndsWith('/'))
        {
            rest = rest[..^1];
        }

        var parts = rest.Split('/');
        if (parts.Length < 3)
        {
            error = $"session name needs an owner island, a native name and at least one flow: bfed://<owner-island>/<native-name>/<flow>/...; got '{Shorten(text)}'";
            return false;
        }

        if (!uint.TryParse(parts[0], NumberStyles.None, CultureInfo.InvariantCulture, out uint owner) || owner == 0)
        {
            error = $"owner island must be a number between 1 and {uint.MaxValue}; got '{Shorten(parts[0])}'";
            return false;
        }

        for (int i = 1; i < parts.Length; i++)
        {
            string what = i == 1 ? "native name" : $"flow {i - 1}";
            if (parts[i].Length == 0)
            {
                error = $"{what} is empty (two '/' in a row)";
                return false;
            }

            if (!IsPlain(parts[i], allowEquals: true))
            {
                error = $"{what} '{Shorten(parts[i])}' holds a character outside printable ASCII or one of '?&#% '";
                return false;
            }
        }

        var flows = parts[2..];
        if (flows.Length > MaxFlows)
        {
            error = $"at most {MaxFlows} flows; got {flows.Length}";
            return false;
        }

        if (flows.Distinct(StringComparer.Ordinal).Count() != flows.Length)
        {
            error = "flow names must be distinct";
            return false;
        }

        var parameters = new List<KeyValuePair<string, string>>();
        if (query.Length > 0)
        {
            foreach (var pair in query.Split('&'))
            {
                int eq = pair.IndexOf('=', StringComparison.Ordinal);
                if (eq <= 0 || eq == pair.Length - 1)
                {
                    error = $"parameter '{Shorten(pair)}' is not name=value";
                    return false;
                }

                string key = pair[..eq], value = pair[(eq + 1)..];
                if (!IsPlain(key, allowEquals: false) || !IsPlain(value, allowEquals: false))
                {
                    error = $"parameter '{Shorten(pair)}' holds a character outside printable ASCII or one of '?&#%= /'";
                    return false;
                }

                if (key == "metric" && value is not ("hops" or "latency" or "bandwidth"))
                {
                    error = $"parameter metric must be hops, latency or bandwidth; got '{Shorten(value)}'";
                    return false;
                }

                if (key is "multi-source" or "single-source" && value is not ("true" or "false"))
                {
                    error = $"parameter {key} must be true or false; got '{Shorten(value)}'";
                    return false;
                }

                if (key == "delivery" && value is not ("tree" or "unicast" or "corecast"))
                {
                    error = $"parameter delivery must be tree, unicast or corecast; got '{Shorten(value)}'";
                    return false;
                }

                parameters.Add(new(key, value));
            }
        }

        if (parameters.Count > MaxParameters)
        {
            error = $"at most {MaxParameters} parameters; got {parameters.Count}";
            return false;
        }

        if (parameters.Any(p => p.Key == "delivery" && p.Value != "tree")
            && parameters.Any(p => (p.Key == "multi-source" && p.Value == "true") || (p.Key == "single-source" && p.Value == "false")))
        {
            error = "parameter delivery=unicast or delivery=corecast needs a single-source session";
            return false;
        }

        name = new SessionName(new IslandId(owner), parts[1], flows, [.. parameters]);
        error = "";
        return true;
    }

    private static bool IsPlain(string s, bool allowEquals)
    {
        foreach (char c in s)
        {
            if (c <= ' ' || c >= 0x7f || c is '?' or '&' or '#' or '%' or '/' || (!allowEquals && c == '='))
            {
                return false;
            }
        }

        return true;
    }

    private static string Shorten(string s) => s.Length <= 64 ? s : s[..64] + "...";

    public bool Equals(SessionName? other) => other is not null && string.Equals(Text, other.Text, StringComparison.Ordinal);

    public override bool Equals(object? obj) => Equals(obj as SessionName);

    public override int GetHashCode() => StringComparer.Ordinal.GetHashCode(Text);

    public override string ToString() => Text;
}

/// <summary>How a session's packets cross peering links (the session name's <c>delivery=</c> parameter).</summary>
public enum SessionDelivery : byte
{
    /// <summary>One DATA frame per downstream gateway; the egress gateway hands it to its island once.</summary>
    Tree = 0,

    /// <summary>Per receiver: one full frame per receiver behind each downstream gateway (the seed 004 baseline).</summary>
    Unicast = 1,

    /// <summary>Per receiver with CoreCast (seed 004): the payload once per downstream gateway, a header per receiver.</summary>
    CoreCast = 2,
}
