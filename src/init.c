/* Process initialisation and fork handling.
 *
 * Initialisation allocates nothing and calls no stdio: the first malloc may
 * come from the dynamic loader or a constructor.  Should anything recurse
 * into malloc while it runs on this thread, the block comes from the
 * bootstrap area (boot.c), which free recognises and ignores. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "init.h"
#include "size_class.h"
#include "sys.h"
#include "options.h"
#include "block.h"
#include "stats.h"
#include "registry.h"
#include "superslab.h"
#include "arena.h"
#include "heap.h"
#include "prof.h"
#include "prof_dump.h"
#include "purge.h"

_Atomic(int) hak_init_state;
static __thread bool tls_in_init;

bool hak_init_recursing(void)
{
  return atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2 && tls_in_init;
}

/* --------------------------------------------------------------------- fork */

/* Take every rare-path lock so no other thread holds one across fork; the
 * child reinitialises them.  Heaps of the parent's other threads stay owned
 * in the child (their threads do not exist there): their blocks can still be
 * freed by the child, their cached memory is not reused.
 * Signals are blocked from before the first lock is taken until after the
 * last is released, in the parent and in the child: a signal handler that
 * calls fork (async-signal-safe) would otherwise run fork_prepare again on
 * this thread and wait for a lock it holds.  liburcu's own fork hooks
 * restore the signal mask they found, which is then this all-blocked one.
 * The mask to restore is the forking thread's (two threads may fork at
 * once: the second waits for the first's locks). */
static __thread sigset_t fork_saved_mask;

static void fork_prepare(void)
{
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &fork_saved_mask);
  hak_prof_before_fork();
  hak_heap_before_fork();
  hak_ss_before_fork();
  hak_arena_before_fork();
  hak_registry_before_fork();
}
static void fork_parent(void)
{
  hak_registry_after_fork(false);
  hak_arena_after_fork(false);
  hak_ss_after_fork(false);
  hak_heap_after_fork(false);
  hak_prof_after_fork();
  pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
}
static void fork_child(void)
{
  hak_registry_after_fork(true);
  hak_arena_after_fork(true);
  hak_ss_after_fork(true);
  hak_heap_after_fork(true);
  hak_prof_after_fork();
  hak_purge_after_fork(true);
  pthread_sigmask(SIG_SETMASK, &fork_saved_mask, NULL);
}

/* ----------------------------------------------------------------------- init */

/* The profiler's slots enter the registry before the profiler starts (it
 * hands out none before): their frees then reach hak_prof_slot_free. */
static void prof_register(void)
{
  void *base;
  size_t size;
  if (hak_prof_region(&base, &size) && !hak_map_set_range(base, size, HAK_TAG_PROF))
    hak_prof_disable();
}

void hak_init_slow(void)
{
  int expected = 0;
  if (atomic_compare_exchange_strong_explicit(&hak_init_state, &expected, 1, memory_order_acq_rel,
                                              memory_order_acquire)) {
    int saved = errno;
    tls_in_init = true;
    hak_size_class_init();
#ifndef NDEBUG
    hak_size_class_check();
    hak_tcache_check();
#endif
    hak_options_init();
    hak_prof_init();
    hak_stats_init();
    hak_block_init();
    hak_heap_init();
    /* release: everything above is visible to a thread that sees 2. */
    atomic_store_explicit(&hak_init_state, 2, memory_order_release);
    tls_in_init = false;
    /* These may allocate: hakmem is ready now. */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    hak_sys_init();
    hak_rcu_register_thread();   /* liburcu maps its reader arena now, not out of memory */
    prof_register();
    hak_prof_start();            /* loads the unwinder */
    hak_prof_dump_init();
    errno = saved;
    return;
  }
  if (tls_in_init) return;  /* recursion on the initialising thread: bootstrap */
  while (atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2) sched_yield();
}
