/* What norm-send and norm-recv share around NORM: the session they open and the stop flag their signals set. */
#ifndef NORM_SESSION_H
#define NORM_SESSION_H
#include <normApi.h>
#include <signal.h>

/* The options both tools take: --addr GROUP, --port PORT, --iface IF, --id NODE, --size S, --debug LEVEL. */
typedef struct {
    const char *addr;
    const char *iface;
    long port;
    long id;
    long size;
} session_options;

/* Consumes argv[*i] (and its value) if it is one of the shared options and returns 1; else returns 0. */
int session_option(const char *tool, int argc, char **argv, int *i, session_options *options);

/* Set by SIGTERM or SIGINT once stop_on_signals() has run: the tools finish their loop and print their summary. */
extern volatile sig_atomic_t stop_requested;
void stop_on_signals(void);

/* A NORM instance and a session on --addr:--port as node --id, on --iface when given, with the receive port
 * shared (several tools on one host, as over loopback in the tests). Exits 1, saying why, when NORM refuses. */
NormSessionHandle open_session(const char *tool, const session_options *options, NormInstanceHandle *instance);
#endif
