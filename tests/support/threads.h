/* threads.h - starting and stopping the test programs' threads.
 *
 *   - ts_thread_create: pthread_create that reports instead of crashing;
 *   - ts_idle: give the CPU to the thread we wait for;
 *   - ts_thread_named, ts_thread_tid: whether a thread of the process has a
 *     given name, and its id;
 *   - ts_team / ts_worker: worker threads that start together (a barrier
 *     releases them once the clock has started), run until a shared
 *     deadline, then drain what the others sent them until every one has
 *     stopped producing; joined and their common counters added up (the
 *     ring-based stress programs).
 */
#ifndef HAKMEM_TS_THREADS_H
#define HAKMEM_TS_THREADS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rng.h"

/* pthread_create; on failure "FAIL: pthread_create: ..." and the process ends
 * (ts_die). */
void ts_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* Nothing to do until another thread moves: give it the CPU (the suites run
 * more threads than cores).  Only a courtesy: correctness never depends on
 * it, every wait is a loop on an acquire load. */
static inline void ts_idle(void)
{
    sched_yield();
}

/* Whether a thread of this process is named `name` now (its comm, as
 * prctl(PR_SET_NAME) set it: at most 15 characters compared). */
bool ts_thread_named(const char *name);
/* The thread id of the process's thread of that name, -1 if none. */
long ts_thread_tid(const char *name);

/* ------------------------------------------------------------ worker teams */

/* The part of a worker-thread record the team knows; each program's own
 * worker type has it as its first member, `base`, so a worker pointer is also
 * a ts_worker pointer. */
typedef struct {
    unsigned id;
    pthread_t th;
    uint64_t ops, allocs, frees, cross_frees;
} ts_worker;

typedef struct {
    int n;                       /* worker threads */
    pthread_barrier_t start;     /* the n workers + main */
    _Atomic int producers_done;  /* workers that stopped producing */
    double t0, deadline;         /* start of the timed phase, its end */
} ts_team;

/* Create one thread running fn per worker record (`workers`: n records of
 * worker_size bytes, each starting with a ts_worker, numbered 0..n-1 here),
 * start the clock and release them together. */
void ts_team_start(ts_team *t, int n, void *workers, size_t worker_size, void *(*fn)(void *),
                   double seconds);

/* In a worker, before its first operation: wait for the start. */
void ts_team_wait_start(ts_team *t);

/* In a worker: the timed phase is over (deadline passed, or a failure). */
bool ts_team_time_up(const ts_team *t);

/* A worker's drain step: take what other workers sent, return how many. */
typedef unsigned (*ts_drain_fn)(ts_worker *w, ts_rng *r, void *extra);

/* In a worker, after its timed phase: stop producing, announce it, and drain
 * until every worker has announced and nothing is left. */
void ts_team_drain_to_end(ts_team *t, ts_drain_fn drain, ts_worker *w, ts_rng *r, void *extra);

/* In main: join every worker, add up their common counters into *sum and
 * return the run time since the start. */
double ts_team_join(ts_team *t, void *workers, size_t worker_size, ts_worker *sum);

#endif /* HAKMEM_TS_THREADS_H */
