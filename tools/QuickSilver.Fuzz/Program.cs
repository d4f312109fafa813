using QuickSilver.Fuzz;
using SharpFuzz;

// QuickSilver.Fuzz: coverage-guided fuzzing of the decoders (docs/fuzzing.md; tools/fuzz.sh runs it under afl-fuzz).
//   list                          the targets
//   seeds <target> <directory>    writes the target's seed inputs (valid encodings) for afl-fuzz's -i
//   run <target>                  the SharpFuzz fork server for afl-fuzz (outside afl-fuzz: one input from stdin)
//   replay <target> <file>...     runs each file once (a crash or hang afl-fuzz saved); exit 1 if any fails
if (args.Length == 0 || args[0] is "-h" or "--help")
{
    Console.WriteLine("usage: QuickSilver.Fuzz list | seeds <target> <dir> | run <target> | replay <target> <file>...");
    return args.Length == 0 ? 2 : 0;
}

if (args[0] == "list")
{
    foreach (var target in Catalog.All)
    {
        Console.WriteLine($"{target.Name,-14} {target.About}");
    }

    return 0;
}

if (args.Length < 2 || Catalog.Find(args[1]) is not { } chosen)
{
    Console.Error.WriteLine($"unknown or missing target; one of: {string.Join(", ", Catalog.All.Select(t => t.Name))}");
    return 2;
}

// The seeds once first, unchecked: static set-up (the targets' buffers, MessagePack's generated formatters, first
// calls) happens once per process and is not what a decoder allocates per input. Under afl-fuzz this happens inside
// the first run: instrumented code may only run once SharpFuzz has set up its coverage map.
if (args[0] is "replay")
{
    Expect.WarmUp(chosen);
}

switch (args[0])
{
    case "seeds" when args.Length == 3:
        Directory.CreateDirectory(args[2]);
        int n = 0;
        foreach (var seed in chosen.Seeds())
        {
            File.WriteAllBytes(Path.Combine(args[2], $"seed-{n++:D3}"), seed);
        }

        Console.WriteLine($"{n} seeds for {chosen.Name} in {args[2]}");
        return 0;
    case "run":
        // Every target calls into the instrumented assemblies even for an empty input: SharpFuzz reads the first input
        // before afl-fuzz has written it (it is empty), and afl-fuzz gives up if that run shows no coverage.
        var buffer = new MemoryStream();
        bool warm = false;
        Fuzzer.Run(stream =>
        {
            if (!warm)
            {
                Expect.WarmUp(chosen);
                warm = true;
            }

            buffer.SetLength(0);
            stream.CopyTo(buffer);
            Expect.Run(chosen, buffer.GetBuffer().AsSpan(0, (int)buffer.Length));
        });
        return 0;
    case "replay" when args.Length >= 3:
        int failed = 0;
        foreach (var file in args.Skip(2))
        {
            try
            {
                Expect.Run(chosen, File.ReadAllBytes(file));
                Console.WriteLine($"ok    {file}");
            }
            catch (Exception e)
            {
                failed++;
                Console.WriteLine($"FAIL  {file}: {e.GetType().Name}: {e.Message}");
                Console.WriteLine(e.StackTrace);
            }
        }

        return failed == 0 ? 0 : 1;
    default:
        Console.Error.WriteLine("usage: QuickSilver.Fuzz list | seeds <target> <dir> | run <target> | replay <target> <file>...");
        return 2;
}
