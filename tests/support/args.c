/* args.c - command-line options and environment switches (args.h). */
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void ts_usage(const char *prog, const ts_opt *opts, int n)
{
    fprintf(stderr, "usage: %s [options]\n", prog);
    for (int i = 0; i < n; i++) {
        char def[32];
        switch (opts[i].type) {
        case TS_OPT_INT: snprintf(def, sizeof def, "%d", *(int *)opts[i].dst); break;
        case TS_OPT_U64: snprintf(def, sizeof def, "%" PRIu64, *(uint64_t *)opts[i].dst); break;
        case TS_OPT_DOUBLE: snprintf(def, sizeof def, "%g", *(double *)opts[i].dst); break;
        }
        fprintf(stderr, "  --%-18s %s (default %s)\n", opts[i].name, opts[i].help, def);
    }
}

void ts_parse_opts(int argc, char **argv, const char *prog, const ts_opt *opts, int n)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ts_usage(prog, opts, n);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
            ts_usage(prog, opts, n);
            exit(64);
        }
        a += 2;
        size_t len = strcspn(a, "=");
        const ts_opt *o = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]);
            ts_usage(prog, opts, n);
            exit(64);
        }
        if (a[len] == '=')
            val = a + len + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            fprintf(stderr, "%s: option --%s needs a value\n", prog, o->name);
            exit(64);
        }
        char *end;
        errno = 0;
        switch (o->type) {
        case TS_OPT_INT: {
            long v = strtol(val, &end, 0);
            if (*end || errno || v < 0 || v > 1000000000) goto bad;
            *(int *)o->dst = (int)v;
            break;
        }
        case TS_OPT_U64: {
            unsigned long long v = strtoull(val, &end, 0);
            if (*end || errno) goto bad;
            *(uint64_t *)o->dst = v;
            break;
        }
        case TS_OPT_DOUBLE: {
            double v = strtod(val, &end);
            if (*end || errno || v < 0) goto bad;
            *(double *)o->dst = v;
            break;
        }
        }
        continue;
    bad:
        fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, val, o->name);
        exit(64);
    }
}

const char *ts_arg_str(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

bool ts_arg_flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

/* The number after `name` into *l (strtol) or *d (strtod), which must take
 * all of it; false when `name` is absent. */
static bool arg_number(int argc, char **argv, const char *name, long *l, double *d)
{
    const char *s = ts_arg_str(argc, argv, name);
    if (!s)
        return false;
    char *end;
    errno = 0;
    if (l)
        *l = strtol(s, &end, 10);
    else
        *d = strtod(s, &end);
    if (errno || *end)
        TS_FAIL_EXIT("bad value for %s: %s", name, s);
    return true;
}

long ts_arg_long(int argc, char **argv, const char *name, long dflt)
{
    long v;
    return arg_number(argc, argv, name, &v, NULL) ? v : dflt;
}

double ts_arg_double(int argc, char **argv, const char *name, double dflt)
{
    double v;
    return arg_number(argc, argv, name, NULL, &v) ? v : dflt;
}

bool ts_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}
