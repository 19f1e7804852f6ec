/* args.h - command-line options and environment switches of the test
 * programs.
 *
 *   - an option table (ts_opt) parsed from --name value / --name=value, with
 *     --help listing every option and its default (the stress programs);
 *   - ts_arg_*: the value after --name, scanned without a table and without
 *     the heap (the lifecycle programs, which run under the allocator they
 *     measure);
 *   - ts_env_flag: is an environment switch on.
 */
#ifndef HAKMEM_TS_ARGS_H
#define HAKMEM_TS_ARGS_H

#include <stdbool.h>

typedef enum { TS_OPT_INT, TS_OPT_DOUBLE, TS_OPT_U64 } ts_opt_type;

/* One option: int (0 .. 10^9), double (>= 0) or uint64_t, stored at dst. */
typedef struct {
    const char *name; /* without the leading "--" */
    ts_opt_type type;
    void *dst;
    const char *help;
} ts_opt;

/* Number of elements of an array (for option tables). */
#define TS_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* "usage: prog [options]" and one line per option with its current value as
 * the default, on stderr. */
void ts_usage(const char *prog, const ts_opt *opts, int n);

/* Parse argv against the n options.  -h/--help prints the usage and exits 0;
 * an unknown option, a missing or bad value prints why and exits 64. */
void ts_parse_opts(int argc, char **argv, const char *prog, const ts_opt *opts, int n);

/* The argument after `name` (e.g. "--threads"), or NULL. */
const char *ts_arg_str(int argc, char **argv, const char *name);

/* Is `name` (a flag without a value, e.g. "--large") among the arguments? */
bool ts_arg_flag(int argc, char **argv, const char *name);

/* The decimal long / double after `name`, or dflt when `name` is absent.  A
 * value that does not parse ends the process (TS_FAIL_EXIT, status 1). */
long ts_arg_long(int argc, char **argv, const char *name, long dflt);
double ts_arg_double(int argc, char **argv, const char *name, double dflt);

/* Is the environment variable set, not empty and not "0"? */
bool ts_env_flag(const char *name);

#endif /* HAKMEM_TS_ARGS_H */
