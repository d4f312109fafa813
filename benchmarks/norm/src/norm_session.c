/* The NORM session and stop flag shared by norm-send and norm-recv (norm_session.h). */
#define _POSIX_C_SOURCE 200809L
#include "norm_session.h"
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t stop_requested = 0;

int session_option(const char *tool, int argc, char **argv, int *i, session_options *options)
{
    const char *o = argv[*i];
    if (!strcmp(o, "--addr")) options->addr = cli_value(tool, argc, argv, i);
    else if (!strcmp(o, "--port")) options->port = cli_long(tool, o, cli_value(tool, argc, argv, i), 1, 65535);
    else if (!strcmp(o, "--iface")) options->iface = cli_value(tool, argc, argv, i);
    else if (!strcmp(o, "--id")) options->id = cli_long(tool, o, cli_value(tool, argc, argv, i), 1, 0x7ffffffe);
    else if (!strcmp(o, "--size")) options->size = cli_long(tool, o, cli_value(tool, argc, argv, i), 16, 8192);
    else if (!strcmp(o, "--debug")) NormSetDebugLevel((unsigned int)cli_long(tool, o, cli_value(tool, argc, argv, i), 0, 12));
    else return 0;
    return 1;
}

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

void stop_on_signals(void)
{
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
}

NormSessionHandle open_session(const char *tool, const session_options *options, NormInstanceHandle *instance)
{
    const char *addr = options->addr, *iface = options->iface;
    long port = options->port;
    *instance = NormCreateInstance(false);
    NormSessionHandle session = NormCreateSession(*instance, addr, (UINT16)port, (NormNodeId)options->id);
    if (session == NORM_SESSION_INVALID) {
        fprintf(stderr, "%s: cannot create a NORM session on %s:%ld\n", tool, addr, port);
        exit(1);
    }
    if (iface != NULL && !NormSetMulticastInterface(session, iface)) {
        fprintf(stderr, "%s: --iface '%s' cannot be used\n", tool, iface);
        exit(1);
    }
    NormSetRxPortReuse(session, true, NULL, NULL, 0);
    return session;
}
