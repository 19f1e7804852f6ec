/* threads.c - starting and stopping the test programs' threads (threads.h). */
#include "threads.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "report.h"

void ts_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int e = pthread_create(t, NULL, fn, arg);
    if (e)
        ts_die("pthread_create: %s", strerror(e));
}

void ts_team_start(ts_team *t, int n, void *workers, size_t worker_size, void *(*fn)(void *),
                   double seconds)
{
    t->n = n;
    atomic_store(&t->producers_done, 0);
    pthread_barrier_init(&t->start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        ts_worker *w = (ts_worker *)((char *)workers + (size_t)i * worker_size);
        w->id = (unsigned)i;
        ts_thread_create(&w->th, fn, w);
    }
    t->t0 = ts_now();
    t->deadline = t->t0 + seconds;
    pthread_barrier_wait(&t->start);
}

void ts_team_wait_start(ts_team *t)
{
    pthread_barrier_wait(&t->start);
}

bool ts_team_time_up(const ts_team *t)
{
    return ts_now() >= t->deadline || ts_has_failed();
}

/* A producer's pushes happen-before its release increment, and the last
 * increment is seen by our acquire load, so one drain after seeing all
 * producers done takes everything that was ever sent to us. */
void ts_team_drain_to_end(ts_team *t, ts_drain_fn drain, ts_worker *w, ts_rng *r, void *extra)
{
    atomic_fetch_add_explicit(&t->producers_done, 1, memory_order_release);
    for (;;) {
        bool all = atomic_load_explicit(&t->producers_done, memory_order_acquire) == t->n;
        if (drain(w, r, extra) == 0 && !all)
            ts_idle();
        if (all)
            break;
    }
}

double ts_team_join(ts_team *t, void *workers, size_t worker_size, ts_worker *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < t->n; i++) {
        ts_worker *w = (ts_worker *)((char *)workers + (size_t)i * worker_size);
        pthread_join(w->th, NULL);
        sum->ops += w->ops;
        sum->allocs += w->allocs;
        sum->frees += w->frees;
        sum->cross_frees += w->cross_frees;
    }
    double secs = ts_now() - t->t0;
    pthread_barrier_destroy(&t->start);
    return secs;
}

long ts_thread_tid(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    size_t n = strnlen(name, 15);
    long tid = -1;
    struct dirent *e;
    while (tid < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) != NULL && strncmp(comm, name, n) == 0 && (comm[n] == '\n' || comm[n] == '\0'))
            tid = strtol(e->d_name, NULL, 10);
        fclose(f);
    }
    closedir(d);
    return tid;
}

bool ts_thread_named(const char *name) { return ts_thread_tid(name) >= 0; }
