using CsCheck;

namespace QuickSilver.Testing.Fuzz;

/// <summary>
/// Runs a property over values drawn from a CsCheck generator, deterministically: a fixed seed makes a fixed sequence of
/// examples, each drawn from its own PCG stream, so a run takes the same inputs every time (CI), on one thread (the
/// allocation properties read the thread's own counter). A failure names the example's index and its CsCheck seed:
/// <c>Check.Sample(gen, property, seed: "...")</c> replays it and shrinks it to a smaller failing value.
/// </summary>
internal static class Property
{
    public static void ForAll<T>(Gen<T> gen, int iterations, ulong seed, Action<T> property, Func<T, string>? print = null)
    {
        ArgumentNullException.ThrowIfNull(gen);
        ArgumentNullException.ThrowIfNull(property);
        var master = new PCG(7, seed);
        for (int i = 0; i < iterations; i++)
        {
            uint stream = master.Next();
            ulong exampleSeed = master.Next64();
            var value = gen.Generate(new PCG(stream, exampleSeed), null!, out _);
            try
            {
                property(value);
            }
            catch (Exception e)
            {
                string shown;
                try
                {
                    shown = print is null ? Check.Print(value) : print(value);
                }
                catch (Exception printError)
                {
                    shown = $"(could not print: {printError.Message})";
                }

                throw new PropertyFailedException(
                    $"Property failed on example {i} of {iterations} (run seed {seed}; CsCheck replay seed \"{new PCG(stream, exampleSeed).ToString(exampleSeed)}\"): {e.GetType().Name}: {e.Message}\nvalue: {shown}",
                    e);
            }
        }
    }

    /// <summary>
    /// <see cref="ForAll"/> for a decoder property that returns whether the decoder accepted the example, checking that
    /// the generator exercised both sides: at least <paramref name="minFraction"/> of the examples accepted and as many
    /// rejected (a generator whose values all fail the first check tests nothing behind it).
    /// </summary>
    public static void Decodes<T>(Gen<T> gen, int iterations, ulong seed, Func<T, bool> property, double minFraction = 0.05)
    {
        ArgumentNullException.ThrowIfNull(property);
        int accepted = 0;
        ForAll(gen, iterations, seed, value =>
        {
            if (property(value))
            {
                accepted++;
            }
        });

        int least = (int)(iterations * minFraction);
        if (accepted < least || iterations - accepted < least)
        {
            throw new PropertyFailedException($"The generator is off target: {accepted} of {iterations} examples accepted, {iterations - accepted} rejected (at least {least} of each wanted).");
        }
    }

    /// <summary>Bytes allocated on this thread while <paramref name="action"/> ran.</summary>
    public static long Allocated(Action action)
    {
        ArgumentNullException.ThrowIfNull(action);
        long before = GC.GetAllocatedBytesForCurrentThread();
        action();
        return GC.GetAllocatedBytesForCurrentThread() - before;
    }

    /// <summary>The fewest bytes this thread allocated in any of <paramref name="windows"/> runs of
    /// <paramref name="window"/>: an allocation per event shows in every window, the runtime's own one-off allocations
    /// while code tiers up (seen in CI under load: thousands of bytes once) in one at most.</summary>
    public static long FewestAllocated(Action window, int windows = 3)
    {
        ArgumentNullException.ThrowIfNull(window);
        long fewest = long.MaxValue;
        for (int i = 0; i < windows; i++)
        {
            fewest = Math.Min(fewest, Allocated(window));
        }

        return fewest;
    }

    /// <summary>Runs <paramref name="decode"/> on <paramref name="input"/> and fails if it threw or allocated more than
    /// <paramref name="maxBytes"/>; returns its result. Over the bound, the same input is decoded once more and only the
    /// second count is held to it: the runtime's own one-off allocations on a first call (CI once saw 40 bytes over
    /// <c>NakSet.TryRead</c>'s bound on the very first example) are not the decoder's, and a decoder that allocates per
    /// input does so both times. Decoders here read into state they reset first, so a second call is the same call.</summary>
    public static TResult Decode<TResult>(byte[] input, long maxBytes, Func<byte[], TResult> decode, string what)
    {
        ArgumentNullException.ThrowIfNull(decode);
        var (result, allocated) = DecodeOnce(input, decode, what);
        if (allocated > maxBytes)
        {
            (result, allocated) = DecodeOnce(input, decode, what);
            if (allocated > maxBytes)
            {
                throw new PropertyFailedException($"{what} allocated {allocated} bytes on {input.Length} bytes of input, above its bound of {maxBytes}");
            }
        }

        return result;
    }

    private static (TResult Result, long Allocated) DecodeOnce<TResult>(byte[] input, Func<byte[], TResult> decode, string what)
    {
        long before = GC.GetAllocatedBytesForCurrentThread();
        try
        {
            var result = decode(input);
            return (result, GC.GetAllocatedBytesForCurrentThread() - before);
        }
        catch (Exception e)
        {
            throw new PropertyFailedException($"{what} threw on {input.Length} bytes [{Convert.ToHexString(input.AsSpan(0, Math.Min(input.Length, 96)))}]: {e.GetType().Name}: {e.Message}", e);
        }
    }
}

internal sealed class PropertyFailedException(string message, Exception? inner = null) : Exception(message, inner);
