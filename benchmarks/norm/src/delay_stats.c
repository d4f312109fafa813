/* Per-message delay statistics: see delay_stats.h for the definitions. */
#define _POSIX_C_SOURCE 200809L
#include "delay_stats.h"
#include <stdlib.h>
#include <time.h>

int64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int delay_log_init(delay_log *log, long capacity)
{
    log->count = 0;
    log->capacity = capacity;
    log->send_us = malloc(sizeof(int64_t) * (size_t)capacity);
    log->delay_us = malloc(sizeof(int64_t) * (size_t)capacity);
    return log->send_us != NULL && log->delay_us != NULL;
}

void delay_log_add(delay_log *log, int64_t send_us, int64_t recv_us)
{
    if (log->count < log->capacity) {
        log->send_us[log->count] = send_us;
        log->delay_us[log->count] = recv_us - send_us;
        log->count++;
    }
}

void delay_log_free(delay_log *log)
{
    free(log->send_us);
    free(log->delay_us);
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of a sorted array by nearest rank; 0 when empty. */
static double quantile_ms(const int64_t *sorted, long n, double q)
{
    if (n == 0) {
        return 0;
    }
    long rank = (long)(q * (double)n + 0.999999) - 1;
    if (rank < 0) {
        rank = 0;
    }
    if (rank >= n) {
        rank = n - 1;
    }
    return (double)sorted[rank] / 1000.0;
}

void delay_log_print_json(const delay_log *log, FILE *out, double floor_window_ms, double margin_ms)
{
    long n = log->count;
    int64_t window = (int64_t)(floor_window_ms * 1000.0), margin = (int64_t)(margin_ms * 1000.0);
    int64_t *sorted = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    int64_t *extra = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    long *deque = malloc(sizeof(long) * (size_t)(n > 0 ? n : 1));
    if (sorted == NULL || extra == NULL || deque == NULL) {
        fprintf(out, "\"error\":\"out of memory\"");
        free(sorted); free(extra); free(deque);
        return;
    }
    /* Sliding minimum over send time [t - window, t + window]: a monotonic deque; send stamps never decrease. */
    long head = 0, tail = 0, next = 0, late = 0;
    double extra_sum = 0;
    for (long i = 0; i < n; i++) {
        while (next < n && log->send_us[next] <= log->send_us[i] + window) {
            while (tail > head && log->delay_us[deque[tail - 1]] >= log->delay_us[next]) {
                tail--;
            }
            deque[tail++] = next++;
        }
        while (log->send_us[deque[head]] < log->send_us[i] - window) {
            head++;
        }
        int64_t e = log->delay_us[i] - log->delay_us[deque[head]];
        if (e > margin) {
            extra[late++] = e;
            extra_sum += (double)e;
        }
        sorted[i] = log->delay_us[i];
    }
    qsort(sorted, (size_t)n, sizeof(int64_t), compare_i64);
    qsort(extra, (size_t)late, sizeof(int64_t), compare_i64);
    fprintf(out,
            "\"delay_p50_ms\":%.2f,\"delay_p95_ms\":%.2f,\"delay_max_ms\":%.2f,\"late\":%ld,"
            "\"extra_mean_ms\":%.2f,\"extra_p50_ms\":%.2f,\"extra_p95_ms\":%.2f,\"extra_max_ms\":%.2f",
            quantile_ms(sorted, n, 0.5), quantile_ms(sorted, n, 0.95), quantile_ms(sorted, n, 1.0), late,
            late == 0 ? 0.0 : extra_sum / (double)late / 1000.0, quantile_ms(extra, late, 0.5),
            quantile_ms(extra, late, 0.95), quantile_ms(extra, late, 1.0));
    free(sorted);
    free(extra);
    free(deque);
}
