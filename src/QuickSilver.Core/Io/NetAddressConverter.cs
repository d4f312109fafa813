using System.ComponentModel;
using System.Globalization;

namespace QuickSilver.Core.Io;

/// <summary>Converts "a.b.c.d:port" text to and from <see cref="NetAddress"/>: what lets
/// Microsoft.Extensions.Configuration bind an address option from a string.</summary>
public sealed class NetAddressConverter : TypeConverter
{
    public override bool CanConvertFrom(ITypeDescriptorContext? context, Type sourceType)
        => sourceType == typeof(string) || base.CanConvertFrom(context, sourceType);

    public override object? ConvertFrom(ITypeDescriptorContext? context, CultureInfo? culture, object value)
        => value is string text ? NetAddress.Parse(text.Trim()) : base.ConvertFrom(context, culture, value);

    public override object? ConvertTo(ITypeDescriptorContext? context, CultureInfo? culture, object? value, Type destinationType)
        => destinationType == typeof(string) && value is NetAddress address ? address.ToString() : base.ConvertTo(context, culture, value, destinationType);
}
