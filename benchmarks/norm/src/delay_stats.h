/* Per-message one-way delay statistics shared by norm-recv (docs/aer.md, "NORM comparison").
 * The same definitions are implemented in C# by qs aer-receive (tools/qs/DelayStats.cs), so both peers of the
 * comparison are measured the same way:
 *   delay(i)  = receive time of message i - its send stamp (both CLOCK_MONOTONIC, one machine), microseconds;
 *   floor(i)  = the smallest delay among messages sent within FLOOR_WINDOW of message i (either side): the path's
 *               one-way delay plus whatever the sender queued it for, without any repair;
 *   extra(i)  = delay(i) - floor(i); a message is "late" (its delivery waited for a repair: it was lost, or came
 *               after a lost one in the stream's order) when extra(i) > MARGIN. */
#ifndef DELAY_STATS_H
#define DELAY_STATS_H
#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t *send_us;   /* send stamp of message i (monotonic, us) */
    int64_t *delay_us;  /* receive time - send stamp */
    long count;
    long capacity;
} delay_log;

int delay_log_init(delay_log *log, long capacity);
void delay_log_add(delay_log *log, int64_t send_us, int64_t recv_us);
void delay_log_free(delay_log *log);

/* Prints the summary fields (no braces) as JSON members: delay_p50_ms, delay_p95_ms, delay_max_ms, late,
 * extra_mean_ms, extra_p50_ms, extra_p95_ms, extra_max_ms. */
void delay_log_print_json(const delay_log *log, FILE *out, double floor_window_ms, double margin_ms);

int64_t monotonic_us(void);
uint64_t monotonic_ns(void);
#endif
