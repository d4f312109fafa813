using QuickSilver.Compare;

// The comparison runner: QuickSilver vs JGroups vs raw UDP over loopback IP multicast, one process per member.
// "role" is the hidden entry of the runner's own child processes (Cli.cs). A bad option exits with code 2.
return await CliChecks.InvokeAsync(Cli.Build(), args);
