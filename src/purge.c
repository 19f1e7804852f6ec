/* The purger thread.  Free memory that leaves a heap for the global caches
 * (empty SuperSlabs, superslab.c; freed large mappings and the page bank,
 * large.c) keeps its pages until the cache has idled for its delay, so a
 * program that frees and allocates again meanwhile (threads of a pool
 * exiting and starting, big buffers replaced)
 * reuses them with no madvise and no page fault.  Something has to give
 * them back when the program goes idle and makes no call: this thread.  It
 * sleeps on a doorbell (os.c) until a cache holds dirty pages, then wakes
 * when the oldest of them fall due, purges what is due, and sleeps again.
 * It also waits out the grace periods of regions retired by other threads
 * (registry.c), so that a free never sleeps in synchronize_rcu.
 * The same thread abandons the heaps parked for their delay (heap.c,
 * "parked heaps": they keep their free pages meanwhile, for the next
 * thread) and reclaims the heaps of idle threads (heap.c, "idle
 * heaps"): while some heap is busy, or the last pass gave something back,
 * it looks again after a purge delay (RECLAIM_MIN_MS at least); once every
 * heap idles and there is nothing left to give, it sleeps until rung (a
 * heap's maintenance rings) or a cache falls due: no periodic wake-up in an
 * idle process.
 *
 * Started lazily, by a refill (alloc.c, holding nothing of hakmem's:
 * pthread_create allocates, which re-enters malloc safely there), once
 * the process has mapped PURGER_MIN_MAPPED, or has taken back from the
 * SuperSlab cache PURGER_MIN_REFAULTS SuperSlabs whose pages went back as
 * they entered it (superslab.c), or has had PURGER_MIN_BOUND_PURGES large
 * mappings purged whole at their free for want of it (large.c: a buffer
 * of 16 MiB or more freed and allocated again), or has seen
 * PURGER_MIN_EXITS threads exit: a small program that does not churn
 * SuperSlabs or threads never gets the thread, and one whose threads exit
 * and start (each exit releasing a SuperSlab its successor needs again)
 * stops faulting their pages in every time (lifecycle_refault: 489 minor faults a round
 * without it, 6 with it) and has the thread caches and current slabs of
 * its idle threads taken back (bench/turnover.c, whose main thread idles
 * in pthread_join, maps under 32 MiB: peak RSS at 2 threads 11.4 ->
 * 10.0 MB).  Until it runs, and if it cannot
 * start (HAKMEM_PURGE_THREAD=0, pthread_create failed), the caches give pages
 * back as they take them, as without it.  The thread blocks every signal,
 * never allocates, and takes only the caches' locks and, for a heap it
 * reclaims or abandons, that heap's lock and the park list's.  A forked child
 * has no purger until one of its refills starts one.  With statistics
 * on, the exit report stops it first (hak_purge_stop).
 *
 * hak_purger_state: written by the starter (CAS), hak_purge_stop and the
 * fork child handler; read relaxed as a hint by every refill (purge.h),
 * acquire by the stopper. */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/prctl.h>

#include "purge.h"
#include "tprobe.h"
#include "os.h"
#include "options.h"
#include "stats.h"
#include "superslab.h"
#include "large.h"
#include "heap.h"
#include "registry.h"

_Atomic(uint32_t) hak_purger_state;  /* HAK_PURGER_* (purge.h) */

#define PURGER_MIN_MAPPED ((uint64_t)32 << 20)
#define PURGER_MIN_REFAULTS 4
#define PURGER_MIN_BOUND_PURGES 4
#define PURGER_MIN_EXITS 64
#define PURGER_STACK ((size_t)256 * 1024)
#define RECLAIM_MIN_MS 10  /* the idle heaps' passes, at most this often */

static inline uint64_t earliest(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 || a < b ? a : b; }

/* Set by hak_purge_stop before it rings; the thread looks after arming the
 * bell (seq_cst on both sides, see os.c's bell). */
static _Atomic(bool) purger_stop;
static pthread_t purger_thread;  /* written by the starter before RUNNING */

static void *purger_main(void *arg)
{
  (void)arg;
  prctl(PR_SET_NAME, "hakmem-purge", 0, 0, 0);
  hak_tprobe_init();  /* here, holding nothing: it takes the loader's lock */
  for (;;) {
    /* Armed before looking: a cache that takes dirty pages after this look
     * rings, and the wait returns at once. */
    hak_os_bell_arm();
    if (atomic_load(&purger_stop)) return NULL;
    /* Regions retired meanwhile: their grace period is waited here. */
    if (hak_retire_pending()) hak_retire_flush();
    uint64_t due = hak_ss_cache_decay(false);
    hak_large_decay();
    due = earliest(due, hak_large_next_due());
    due = earliest(due, hak_heap_expire_parked());
    uint64_t now = hak_os_now_ms();
    if (hak_heap_reclaim_idle())
      due = earliest(due, now + (hak_opt.purge_delay_ms > RECLAIM_MIN_MS ? hak_opt.purge_delay_ms : RECLAIM_MIN_MS));
    hak_os_bell_wait(due == 0 ? 0 : due > now ? due - now : 1);
  }
  return NULL;
}

void hak_purge_start(void)
{
  if (!hak_opt.purge_thread ||
      (atomic_load_explicit(&hak_gstats.mapped_bytes, memory_order_relaxed) < PURGER_MIN_MAPPED &&
       hak_ss_cache_refaults() < PURGER_MIN_REFAULTS && hak_large_bound_purges() < PURGER_MIN_BOUND_PURGES &&
       atomic_load_explicit(&hak_gstats.heaps_abandoned, memory_order_relaxed) < PURGER_MIN_EXITS))
    return;
  uint32_t none = HAK_PURGER_NONE;
  if (!atomic_compare_exchange_strong_explicit(&hak_purger_state, &none, HAK_PURGER_STARTING, memory_order_relaxed,
                                               memory_order_relaxed))
    return;
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);  /* the thread inherits the mask */
  pthread_attr_t attr;
  pthread_t t;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    pthread_attr_setstacksize(&attr, PURGER_STACK);
    rc = pthread_create(&t, &attr, purger_main, NULL);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (rc == 0) purger_thread = t;
  /* release: hak_purge_stop's acquire load sees purger_thread. */
  atomic_store_explicit(&hak_purger_state, rc == 0 ? HAK_PURGER_RUNNING : HAK_PURGER_FAILED, memory_order_release);
  if (rc == 0) hak_ss_set_purger(true);
  if (rc == 0) hak_retire_set_async(true);
}

/* At exit with statistics on: the thread ends, so what glibc allocated for
 * it (its DTV, through malloc) is freed and the exit report balances. */
void hak_purge_stop(void)
{
  if (atomic_load_explicit(&hak_purger_state, memory_order_acquire) != HAK_PURGER_RUNNING) return;
  hak_ss_set_purger(false);
  hak_retire_set_async(false);
  atomic_store(&purger_stop, true);
  hak_os_bell_wake();
  /* Bounded: a signal handler that calls exit while its thread holds a
   * cache lock would otherwise hang the exit (the report then counts the
   * thread's block as live). */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 2;
  (void)pthread_timedjoin_np(purger_thread, NULL, &ts);
  atomic_store_explicit(&hak_purger_state, HAK_PURGER_FAILED, memory_order_relaxed);  /* never again */
}

/* The child of a fork has only the forking thread. */
void hak_purge_after_fork(bool child)
{
  if (child) atomic_store_explicit(&hak_purger_state, HAK_PURGER_NONE, memory_order_relaxed);
}
