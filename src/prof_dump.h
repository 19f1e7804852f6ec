/* The heap profiler's output (prof_dump.c): profiles in the heap-profile
 * text format of gperftools' pprof, the leak report. */
#ifndef HAKMEM_PROF_DUMP_H
#define HAKMEM_PROF_DUMP_H

#include "base.h"

/* Once the profiler runs (init.c): note the process and install the
 * HAKMEM_PROF_SIGNAL handler. */
void hak_prof_dump_init(void);

/* Write the profile to path (NULL: the default path) and the remote frees
 * to path.remote; 0, or -1 with errno (ENOTSUP: the profiler is off).
 * Async-signal-safe. */
int hak_prof_write(const char *path);

#endif /* HAKMEM_PROF_DUMP_H */
