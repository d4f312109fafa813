/* norm-recv: a NORM receiver of the AER/NORM comparison (docs/aer.md, "NORM comparison").
 * Reads the sender's stream as fixed-size records of --size bytes, checks that the message numbers run 1, 2, 3...
 * with none missing, records each message's one-way delay from its send stamp (delay_stats.h), and stops at
 * --expect messages or after --seconds. Prints one JSON line; exits 0 only if all --expect arrived in order. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "delay_stats.h"
#include "norm_session.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tool = "norm-recv";

static void usage(void)
{
    fprintf(stderr, "usage: norm-recv --addr GROUP --port PORT --expect N [--iface IF] [--id NODE] [--size S]\n"
                    "                 [--buffer BYTES] [--seconds S] [--floor-window-ms W] [--margin-ms M] [--rx-loss PCT]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    session_options session_opts = { .addr = NULL, .iface = NULL, .port = 0, .id = 2, .size = 1000 };
    long expect = 0, buffer = 16 << 20, seconds = 120;
    double floor_window_ms = 2000, margin_ms = 5, rx_loss = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (session_option(tool, argc, argv, &i, &session_opts)) continue;
        else if (!strcmp(o, "--expect")) expect = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 100000000);
        else if (!strcmp(o, "--buffer")) buffer = cli_long(tool, o, cli_value(tool, argc, argv, &i), 65536, 1L << 30);
        else if (!strcmp(o, "--seconds")) seconds = cli_long(tool, o, cli_value(tool, argc, argv, &i), 1, 86400);
        else if (!strcmp(o, "--floor-window-ms")) floor_window_ms = cli_double(tool, o, cli_value(tool, argc, argv, &i), 1, 60000);
        else if (!strcmp(o, "--rx-loss")) rx_loss = cli_double(tool, o, cli_value(tool, argc, argv, &i), 0, 50);
        else if (!strcmp(o, "--margin-ms")) margin_ms = cli_double(tool, o, cli_value(tool, argc, argv, &i), 0, 60000);
        else {
            fprintf(stderr, "%s: unknown option '%s'\n", tool, o);
            usage();
        }
    }
    const char *addr = session_opts.addr;
    long port = session_opts.port, id = session_opts.id, size = session_opts.size;
    if (addr == NULL || port == 0 || expect == 0) {
        fprintf(stderr, "%s: --addr, --port and --expect are required\n", tool);
        usage();
    }
    stop_on_signals();
    delay_log log;
    if (!delay_log_init(&log, expect)) {
        fprintf(stderr, "%s: cannot allocate the delay log for --expect %ld\n", tool, expect);
        return 1;
    }

    NormInstanceHandle instance;
    NormSessionHandle session = open_session(tool, &session_opts, &instance);
    /* Loss injected by NORM itself (tests over loopback); the testbed uses nftables instead. */
    if (rx_loss > 0) {
        NormSetRxLoss(session, rx_loss);
    }
    NormSetRxSocketBuffer(session, 8u << 20);
    NormSetDefaultSyncPolicy(session, NORM_SYNC_STREAM);
    if (!NormStartReceiver(session, (UINT32)buffer)) {
        fprintf(stderr, "%s: NormStartReceiver failed\n", tool);
        return 1;
    }
    printf("norm-recv %s:%ld node %ld ready\n", addr, port, id);
    fflush(stdout);

    unsigned char *record = malloc((size_t)size);
    long have = 0, delivered = 0, disorder = 0, breaks = 0;
    uint64_t last_seq = 0;
    int64_t first_send_us = 0, last_recv_us = 0, deadline = monotonic_us() + seconds * 1000000L;
    struct pollfd pfd = { .fd = NormGetDescriptor(instance), .events = POLLIN };
    while (!stop_requested && delivered < expect && monotonic_us() < deadline) {
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        NormEvent event;
        while (delivered < expect && NormGetNextEvent(instance, &event, false)) {
            if (event.type != NORM_RX_OBJECT_UPDATED || NormObjectGetType(event.object) != NORM_OBJECT_STREAM) {
                continue;
            }
            for (;;) {
                unsigned int n = (unsigned int)(size - have);
                if (!NormStreamRead(event.object, (char *)record + have, &n)) {
                    /* A break in the stream: NORM gave up on some data. Count it; resynchronise on a message start. */
                    breaks++;
                    have = 0;
                    NormStreamSeekMsgStart(event.object);
                    break;
                }
                if (n == 0) {
                    break;
                }
                have += n;
                if (have < size) {
                    continue;
                }
                have = 0;
                int64_t now = monotonic_us();
                uint64_t seq = get_u64(record);
                int64_t sent_us = (int64_t)(get_u64(record + 8) / 1000);
                if (seq != last_seq + 1) {
                    disorder++;
                }
                last_seq = seq;
                if (delivered == 0) {
                    first_send_us = sent_us;
                }
                delivered++;
                last_recv_us = now;
                delay_log_add(&log, sent_us, now);
                if (delivered >= expect) {
                    break;
                }
            }
        }
    }
    double span = (double)(last_recv_us - first_send_us) / 1e6;
    int ok = delivered == expect && disorder == 0 && breaks == 0;
    printf("{\"tool\":\"norm-recv\",\"node\":%ld,\"expect\":%ld,\"delivered\":%ld,\"in_order\":%s,\"breaks\":%ld,"
           "\"span_s\":%.3f,\"mbytes_per_s\":%.3f,",
           id, expect, delivered, disorder == 0 ? "true" : "false", breaks, span,
           span > 0 ? (double)delivered * (double)size / span / 1e6 : 0.0);
    delay_log_print_json(&log, stdout, floor_window_ms, margin_ms);
    printf("}\n");
    fflush(stdout);
    NormStopReceiver(session);
    NormDestroySession(session);
    NormDestroyInstance(instance);
    delay_log_free(&log);
    free(record);
    return ok ? 0 : 1;
}
