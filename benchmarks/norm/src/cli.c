/* Option parsing and the payload's little-endian fields, shared by norm-send and norm-recv. */
#include "cli.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

long cli_long(const char *tool, const char *option, const char *value, long min, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "%s: %s must be an integer in %ld..%ld; got '%s'\n", tool, option, min, max, value);
        exit(2);
    }
    return v;
}

double cli_double(const char *tool, const char *option, const char *value, double min, double max)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || !(v >= min && v <= max)) {
        fprintf(stderr, "%s: %s must be a number in %g..%g; got '%s'\n", tool, option, min, max, value);
        exit(2);
    }
    return v;
}

const char *cli_value(const char *tool, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", tool, argv[*i]);
        exit(2);
    }
    *i += 1;
    return argv[*i];
}

void put_u64(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) {
        p[k] = (unsigned char)(v >> (8 * k));
    }
}

uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) {
        v = (v << 8) | p[k];
    }
    return v;
}
