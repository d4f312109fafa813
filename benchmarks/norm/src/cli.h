/* Option parsing for the NORM harness: a bad value exits 2 with a message naming the option. */
#ifndef CLI_H
#define CLI_H
#include <stdint.h>

long cli_long(const char *tool, const char *option, const char *value, long min, long max);
double cli_double(const char *tool, const char *option, const char *value, double min, double max);
/* The value after argv[*i] (advancing *i), or exit 2 naming the option when it is missing. */
const char *cli_value(const char *tool, int argc, char **argv, int *i);
void put_u64(unsigned char *p, uint64_t v);
uint64_t get_u64(const unsigned char *p);
#endif
