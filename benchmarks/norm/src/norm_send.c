/* norm-send: the NORM source of the AER/NORM comparison (docs/aer.md, "NORM comparison").
 * Writes N messages of S bytes into one NORM stream (segment size S, so one message per NORM data packet); each
 * message carries its number (u64 LE, from 1) and its CLOCK_MONOTONIC send time in ns (u64 LE), stamped when NORM's
 * stream takes it, at most --batch messages before NORM has sent the previous ones. Congestion control is NORM's own (NORM-CC) unless --cc off, which sends at --rate-mbps. After
 * the last message it flushes actively and keeps answering NACKs for --linger seconds; it prints one JSON line. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "delay_stats.h"
#include "norm_session.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tool = "norm-send";

static void usage(void)
{
    fprintf(stderr, "usage: norm-send --addr GROUP --port PORT [--iface IF] [--id NODE] [--messages N] [--size S]\n"
                    "                 [--cc on|off] [--rate-mbps R] [--buffer BYTES] [--block K] [--parity P]\n"
                    "                 [--group-size G] [--backoff F] [--grtt-ms MS] [--batch K] [--linger S] [--seconds S] [--loopback]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    session_options session_opts = { .addr = NULL, .iface = NULL, .port = 0, .id = 1, .size = 1000 };
    long messages = 20000, buffer = 4 << 20, block = 64, parity = 16, group_size = 2;
    long linger = 3, seconds = 120, batch = 1;
    int cc = 1, loopback = 0;
    double rate_mbps = 8, backoff = -1, grtt_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (session_option(tool, argc, argv, &i, &session_opts)) continue;
        else if (!strcmp(o, "--messages")) messages = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 100000000);
        else if (!strcmp(o, "--rate-mbps")) rate_mbps = cli_double(tool, o, cli_value(tool, argc, argv, &i), 0.01, 10000);
        else if (!strcmp(o, "--buffer")) buffer = cli_long(tool, o, cli_value(tool, argc, argv, &i), 65536, 1L << 30);
        else if (!strcmp(o, "--block")) block = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 255);
        else if (!strcmp(o, "--parity")) parity = cli_long(tool, o, cli_value(tool, argc, argv, &i), 0, 128);
        else if (!strcmp(o, "--group-size")) group_size = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 1000000);
        else if (!strcmp(o, "--backoff")) backoff = cli_double(tool, o, cli_value(tool, argc, argv, &i), 0, 100);
        else if (!strcmp(o, "--grtt-ms")) grtt_ms = cli_double(tool, o, cli_value(tool, argc, argv, &i), 1, 60000);
        else if (!strcmp(o, "--batch")) batch = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 1000000);
        else if (!strcmp(o, "--linger")) linger = cli_long(tool, o, cli_value(tool, argc, argv, &i), 0, 3600);
        else if (!strcmp(o, "--seconds")) seconds = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 86400);
        else if (!strcmp(o, "--loopback")) loopback = 1;
        else if (!strcmp(o, "--cc")) {
            const char *v = cli_value(tool, argc, argv, &i);
            if (strcmp(v, "on") && strcmp(v, "off")) {
                fprintf(stderr, "%s: --cc must be on or off; got '%s'\n", tool, v);
                return 2;
            }
            cc = !strcmp(v, "on");
        } else {
            fprintf(stderr, "%s: unknown option '%s'\n", tool, o);
            usage();
        }
    }
    const char *addr = session_opts.addr;
    long port = session_opts.port, size = session_opts.size;
    if (addr == NULL || port == 0) {
        fprintf(stderr, "%s: --addr and --port are required\n", tool);
        usage();
    }
    stop_on_signals();

    NormInstanceHandle instance;
    NormSessionHandle session = open_session(tool, &session_opts, &instance);
    /* Receivers on this host (tests over lo) need our multicast looped back. */
    if (loopback) {
        NormSetMulticastLoopback(session, true);
    }
    NormSetGroupSize(session, (unsigned int)group_size);
    /* NACK backoff (NORM's default factor is 4 x GRTT) and the first GRTT estimate (default 0.5 s), when given. */
    if (backoff >= 0) {
        NormSetBackoffFactor(session, backoff);
    }
    if (grtt_ms > 0) {
        NormSetGrttEstimate(session, grtt_ms / 1000.0);
    }
    NormSetTxSocketBuffer(session, 4u << 20);
    NormSetTxRate(session, rate_mbps * 1e6);
    if (cc) {
        NormSetCongestionControl(session, true, true);
    }
    srand((unsigned int)monotonic_ns());
    if (!NormStartSender(session, (NormSessionId)rand(), (UINT32)(buffer * 4), (UINT16)size, (UINT16)block, (UINT16)parity, 0)) {
        fprintf(stderr, "%s: NormStartSender failed\n", tool);
        return 1;
    }
    NormObjectHandle stream = NormStreamOpen(session, (UINT32)buffer, NULL, 0);
    if (stream == NORM_OBJECT_INVALID) {
        fprintf(stderr, "%s: NormStreamOpen failed\n", tool);
        return 1;
    }

    unsigned char *msg = calloc(1, (size_t)size);
    long written = 0, offset = 0, vacancy_waits = 0, may_write = batch;
    int flushed = 0;
    int64_t start = monotonic_us(), deadline = start + seconds * 1000000L, linger_end = INT64_MAX, done_at = 0;
    struct pollfd pfd = { .fd = NormGetDescriptor(instance), .events = POLLIN };
    while (!stop_requested && monotonic_us() < deadline && monotonic_us() < linger_end) {
        /* Write at most --batch messages (default 1), then wait until NORM has sent them all (NORM_TX_QUEUE_EMPTY):
         * the send stamp, taken when a message's first byte goes in, is then at most a batch of NORM's packet
         * intervals ahead of its transmission (a stream buffer full of stamped messages would count the sender's
         * queue as path delay; a batch of 8 at 200 packets/s already adds up to 35 ms). */
        while (written < messages && (may_write > 0 || offset > 0)) {
            if (offset == 0) {
                put_u64(msg, (uint64_t)(written + 1));
                put_u64(msg + 8, monotonic_ns());
                memset(msg + 16, (int)((written + 1) & 0xff), (size_t)size - 16);
            }
            unsigned int n = NormStreamWrite(stream, (const char *)msg + offset, (unsigned int)(size - offset));
            offset += n;
            if (offset < size) {
                vacancy_waits++;
                break;
            }
            offset = 0;
            written++;
            may_write--;
        }
        if (written == messages && !flushed) {
            NormStreamFlush(stream, true, NORM_FLUSH_ACTIVE);
            flushed = 1;
            done_at = monotonic_us();
            linger_end = done_at + linger * 1000000L;
        }
        if (poll(&pfd, 1, 50) > 0) {
            NormEvent event;
            while (NormGetNextEvent(instance, &event, false)) {
                if (event.type == NORM_TX_QUEUE_EMPTY) {
                    may_write = batch;
                }
            }
        }
    }
    double write_s = (double)((done_at ? done_at : monotonic_us()) - start) / 1e6;
    printf("{\"tool\":\"norm-send\",\"messages\":%ld,\"size\":%ld,\"written\":%ld,\"cc\":%s,\"write_seconds\":%.3f,"
           "\"vacancy_waits\":%ld,\"final_rate_mbps\":%.3f,\"grtt_ms\":%.1f}\n",
           messages, size, written, cc ? "true" : "false", write_s, vacancy_waits, NormGetTxRate(session) / 1e6,
           NormGetGrttEstimate(session) * 1000.0);
    fflush(stdout);
    NormStreamClose(stream, false);
    NormStopSender(session);
    NormDestroySession(session);
    NormDestroyInstance(instance);
    free(msg);
    return written == messages ? 0 : 1;
}
