/* check.c - the check framework of the C unit tests (check.h). */
#include "check.h"

#include <stdarg.h>

#define MAX_PRINTED 60

static unsigned long checks;
static unsigned long failures;
static const char *section = "";

void ts_check_count(void)
{
    checks++;
}

void ts_check_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
    failures++;
    if (failures > MAX_PRINTED) {
        if (failures == MAX_PRINTED + 1)
            fprintf(stderr, "FAIL ... (further failures counted, not printed)\n");
        return;
    }
    fprintf(stderr, "FAIL [%s] %s:%d: %s: ", section, file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void ts_check_begin(const char *name)
{
    section = name;
    printf("-- %s\n", name);
    fflush(stdout);
}

void ts_check_section(const char *name)
{
    section = name;
}

int ts_check_finish(const char *prog)
{
    printf("%s: %lu checks, %lu failed\n", prog, checks, failures);
    fflush(stdout);
    return failures ? 1 : 0;
}
