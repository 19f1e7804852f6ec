/* The thread heap: creation, refill (the malloc slow path), local-free
 * bookkeeping, adoption of abandoned SuperSlabs, and parking (or
 * abandonment) at thread exit.  The fast paths are hak_heap_pop (heap.h)
 * and free.c's free_local_fast. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "heap.h"
#include "os.h"
#include "size_class.h"
#include "options.h"
#include "stats.h"
#include "registry.h"
#include "handoff.h"
#include "superslab.h"
#include "remote.h"
#include "xfer.h"
#include "large.h"
#include "partial.h"
#include "tcache.h"
#include "prof.h"
#include "tprobe.h"

#define SENTINEL_CUR { [0 ... HAK_NUM_CLASSES - 1] = &hak_slab_sentinel }
#define NONE_OWNED { [0 ... HAK_OWNED_SLOTS - 1] = HAK_OWNED_NONE }

hak_slab_t hak_slab_sentinel;  /* free == NULL forever: every pop misses */
hak_heap_t hak_heap_unstarted = { .owned = NONE_OWNED, .cur = SENTINEL_CUR, .tag = HAK_TAG_NONE,
                              .state = HAK_HEAP_UNSTARTED, .pend_key = HAK_OWNED_NONE,
                              .prof_left = INT64_MAX };
hak_heap_t hak_heap_dead = { .owned = NONE_OWNED, .cur = SENTINEL_CUR, .tag = HAK_TAG_NONE,
                             .state = HAK_HEAP_DEAD, .pend_key = HAK_OWNED_NONE,
                             .prof_left = INT64_MAX };
__thread _Atomic(hak_heap_t *) hak_tls_heap = &hak_heap_unstarted;
/* The heap the calling thread owns, or NULL: hak_tls_heap too but while the
 * purger has taken it (see "idle heaps"); this thread's alone. */
static __thread hak_heap_t *hak_tls_home;
__thread void *hak_heap_fresh_block;

/* Heaps come from mmap'd chunks and are never unmapped; a heap whose thread
 * exited waits on `pool` for the next new thread.  chunk_lock serialises
 * chunk carving (thread creation: a rare path). */
static hak_handoff_t pool = HAK_HANDOFF_INITIALIZER;
static pthread_mutex_t chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t *chunk_next, *chunk_end;          /* under chunk_lock */
static _Atomic(hak_heap_t *) all_heaps;             /* every heap, for stats */
static pthread_key_t heap_key;

#define HEAP_CHUNK ((size_t)256 * 1024)
#define ABANDON_SWEEP 2     /* abandoned SuperSlabs an exiting thread looks at */
#define ADOPT_PER_REFILL 4  /* abandoned SuperSlabs one refill may adopt */
#define ABANDON_KEEP_DIRTY ((size_t)8 << 20)  /* free pages an exiting heap may leave */
/* hak_heap_inherit: how long a thread may take the heap it wanted, and how
 * many remote frees it makes first (a thread that frees a few blocks and
 * exits, as in a thread-per-task server, is not worth the move). */
#define HEIR_WINDOW_MS 1000
#define HEIR_MIN_FREES 4096
/* park_steal: how many of the parked heaps it looks at (the oldest), and
 * how many units of a SuperSlab must be free for it to take that one. */
#define STEAL_HEAPS 2
#define STEAL_MIN_FREE (HAK_UNITS / 2)

/* The slabs of a SuperSlab in use, in unit order. */
#define FOR_EACH_SLAB(ss, s)                                              \
  for (unsigned u_ = 0; u_ < HAK_UNITS; u_ += (ss)->slabs[u_].span)      \
    if (((ss)->free_units & (1u << u_)) == 0 && ((s) = &(ss)->slabs[u_]))


hak_heap_t *hak_heap_list(void) { return atomic_load_explicit(&all_heaps, memory_order_acquire); }

size_t hak_heap_kept_bytes(size_t *runs)
{
  size_t bytes = 0, n = 0;
  for (hak_heap_t *h = hak_heap_list(); h != NULL; h = h->all_next) {
    size_t b = atomic_load_explicit(&h->large_kept_bytes, memory_order_relaxed);
    bytes += b;
    n += b != 0;
  }
  if (runs != NULL) *runs = n;
  return bytes;
}

/* ------------------------------------------------------------ parked heaps */

/* A thread that exits parks its heap instead of abandoning it: the heap keeps
 * its SuperSlabs, slabs and lists, and the next thread that starts takes it
 * whole.  A thread pool that retires and respawns its workers, or a server
 * that spawns a thread per task, then costs no adoption, no fresh slab per
 * size class and no page faults on purged memory per thread (abandoning
 * spreads the blocks of such threads over many more SuperSlabs and
 * refaults their pages).  Parking gives back what abandoning did:
 * remote frees are collected, empty slabs and SuperSlabs released; its free
 * pages stay while a purger thread runs (the next thread reuses them: the
 * purger abandons the heap once it has been parked for park_delay_ms,
 * and its pages go back then, hak_heap_expire_parked), else beyond
 * ABANDON_KEEP_DIRTY they are purged.  While parked, remote freers go on as if
 * the thread were alive (remote stacks; the delayed list of full slabs, which
 * the heap's next owner drains); nobody else touches the heap.  A heap
 * parked longer than park_delay_ms, or beyond hak_opt.parked_heaps of them, is
 * abandoned (handed to the living threads as before) by the purger or the
 * next thread that parks, maintains its heap or collects, so its memory and
 * the blocks freed into it are not kept from the living threads.  A living
 * thread whose heap has no free unit left takes a mostly free SuperSlab of
 * one of the heaps parked longest before it maps one (park_steal), so the
 * pages of threads that finished early serve those still running.
 * Invariants: a heap is on the list (newest first through park_next) iff it
 * was parked and not taken since; its state is then HAK_HEAP_DEAD; the list
 * and every parked heap's fields belong to the holder of park_lock (a
 * steal holds it, and the heap's lock, while it detaches a SuperSlab), and a
 * heap taken off the list to its taker.  park_count mirrors the list's length
 * (written under the lock; read without it only as a hint). */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t *park_newest, *park_oldest;      /* under park_lock */
static _Atomic(uint32_t) park_count;

/* Under park_lock. */
static void park_unlink(hak_heap_t *h)
{
  if (h->park_prev) h->park_prev->park_next = h->park_next;
  else park_newest = h->park_next;
  if (h->park_next) h->park_next->park_prev = h->park_prev;
  else park_oldest = h->park_prev;
  h->park_prev = h->park_next = NULL;
  atomic_store_explicit(&h->parked, 0, memory_order_relaxed);
  atomic_store_explicit(&h->claimed, 0, memory_order_relaxed);
  atomic_store_explicit(&park_count, atomic_load_explicit(&park_count, memory_order_relaxed) - 1,
                        memory_order_relaxed);
}

static void park_push(hak_heap_t *h)
{
  pthread_mutex_lock(&park_lock);
  h->park_prev = NULL;
  h->park_next = park_newest;
  if (park_newest) park_newest->park_prev = h;
  else park_oldest = h;
  park_newest = h;
  atomic_store_explicit(&h->parked, 1, memory_order_relaxed);
  atomic_store_explicit(&park_count, atomic_load_explicit(&park_count, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  pthread_mutex_unlock(&park_lock);
}

/* The heap for a new thread on this CPU: of the two heaps parked longest,
 * the older one whose thread exited on this CPU, if the units in its slabs
 * are within a quarter of the oldest's, else the oldest (which may be
 * claimed: park_take skips those).  Only the two oldest, and only a heap
 * of about the same size: threads created in a row mostly exit in the
 * order of their work, so first in, first out gives each new thread the
 * heap of a thread that needed as much memory; taking this CPU's heap from
 * further back, or of another size, gave bench/mstress's 4 threads (some
 * doing 4x the work of others) heaps of the wrong size, which grew and
 * purged in turn (0.92x and 1.6x the faults; with equal SuperSlab counts
 * as the only test, 0.98x and up to 1.2x the faults).  Under park_lock,
 * which owns a parked heap's fields: nobody changes its slabs meanwhile, so
 * the units are counted here, not recorded at parking. */
static uint32_t park_units(const hak_heap_t *h)
{
  uint32_t n = 0;
  for (const hak_superslab_t *ss = h->ss_list; ss != NULL; ss = ss->next) n += hak_ss_units_used(ss);
  return n;
}

static hak_heap_t *park_oldest_here(void)
{
  hak_heap_t *o = park_oldest, *h = o != NULL ? o->park_prev : NULL;
  int cpu = hak_os_cpu();
  if (o == NULL || cpu < 0 || o->parked_cpu == cpu) return o;
  if (h == NULL || h->parked_cpu != cpu || atomic_load_explicit(&h->claimed, memory_order_relaxed)) return o;
  uint32_t a = park_units(h), b = park_units(o);
  return (a > b ? a - b : b - a) * 4 <= b ? h : o;
}

/* A parked heap for a new thread, off the list: `want` if it is parked (the
 * heap that owns the block the thread freed first, see
 * hak_heap_thread_get), else the heap parked longest, or the next one if
 * its thread exited on this CPU (park_oldest_here).
 *  - First in, first out, so that with many threads exiting and starting
 *    none waits until it expires (taking the newest first lets the oldest
 *    expire and be abandoned, and more SuperSlabs get mapped).
 *  - This CPU's: a heap's slabs and lists sit in the cache of the CPU its
 *    last thread ran on, and a thread on another CPU that takes it pulls
 *    every line it reuses from there (bench/mstress at 2 threads, whose
 *    threads are replaced every round: 1.13x with this CPU's heap).
 *  - `want` wherever it is on the list: a thread that starts by freeing
 *    another's blocks (bench/larson's successors) frees them into its own
 *    heap instead of remotely, whichever threads parked after it; taking
 *    `want` only if it was parked last, larson at 4 threads gave 36 of 340
 *    successors another heap, which made 5 M more remote frees in 2 s
 *    (1.8% of the time, bench/results/history.md). */
static hak_heap_t *park_take(hak_heap_t *want)
{
  if (atomic_load_explicit(&park_count, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&park_lock);
  hak_heap_t *h = want != NULL && atomic_load_explicit(&want->parked, memory_order_relaxed) ? want : park_oldest_here();
  /* Not one an heir waits for (hak_heap_inherit). */
  while (h != NULL && h != want && atomic_load_explicit(&h->claimed, memory_order_relaxed)) h = h->park_prev;
  if (h != NULL) park_unlink(h);
  pthread_mutex_unlock(&park_lock);
  return h;
}

/* h, off the list, if it is parked; else NULL. */
static hak_heap_t *park_take_exact(hak_heap_t *h)
{
  if (!atomic_load_explicit(&h->parked, memory_order_relaxed)) return NULL;
  pthread_mutex_lock(&park_lock);
  bool parked = atomic_load_explicit(&h->parked, memory_order_relaxed);
  if (parked) park_unlink(h);
  pthread_mutex_unlock(&park_lock);
  return parked ? h : NULL;
}

size_t hak_heap_parked(hak_heap_t **out, size_t max)
{
  size_t n = 0;
  pthread_mutex_lock(&park_lock);
  for (hak_heap_t *h = park_newest; h != NULL && n < max; h = h->park_next) out[n++] = h;
  pthread_mutex_unlock(&park_lock);
  return n;
}

/* How long a heap stays parked: the purge delay, or while a purger thread
 * runs (the heap keeps its free pages, see "parked heaps") the SuperSlab
 * cache's delay, as long as an empty SuperSlab keeps its pages: the
 * threads of a program's next round of work take the heap and its pages
 * back. */
static uint64_t park_delay_ms(void)
{
  return hak_ss_purger() && hak_opt.cache_delay_ms > hak_opt.purge_delay_ms ? hak_opt.cache_delay_ms
                                                                           : hak_opt.purge_delay_ms;
}

/* The oldest parked heap if it is due (parked for park_delay_ms, too many
 * parked, or all), off the list; else NULL. */
static hak_heap_t *park_take_due(uint64_t now, bool all)
{
  if (atomic_load_explicit(&park_count, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&park_lock);
  hak_heap_t *h = park_oldest;
  if (h != NULL && !all && atomic_load_explicit(&park_count, memory_order_relaxed) <= hak_opt.parked_heaps &&
      now - h->parked_ms < park_delay_ms())
    h = NULL;
  if (h != NULL) park_unlink(h);
  pthread_mutex_unlock(&park_lock);
  return h;
}

static void heap_give_up(hak_heap_t *h, bool idle);
static void heap_park(hak_heap_t *h);

/* Abandon the parked heaps that are due (see park_take_due).  One parked
 * for the purge delay gives back all its free pages: nobody used them
 * meanwhile. */
static void park_expire(uint64_t now, bool all)
{
  for (hak_heap_t *p; (p = park_take_due(now, all)) != NULL;) {
    bool held = hak_heap_lock(p);
    p->state = HAK_HEAP_LIVE;  /* ours now: torn down as its owner would */
    heap_give_up(p, now - p->parked_ms >= hak_opt.purge_delay_ms);
    hak_heap_unlock(p, held);
    hak_handoff_push(&pool, &p->pool_link);
  }
}

/* --------------------------------------------------------------- adoption */

/* Make an abandoned SuperSlab ours: drain its slabs, sort them into our lists. */
static void heap_adopt(hak_heap_t *h, hak_superslab_t *ss)
{
  atomic_store_explicit(&ss->owner, h, memory_order_release);
  hak_map_set_range(ss, HAK_SS_SIZE, h->tag);  /* the leaf exists: cannot fail */
  hak_ss_link(h, ss);
  for (unsigned u = 0; u < HAK_UNITS;) {
    if (ss->free_units & (1u << u)) { u++; continue; }
    hak_slab_t *s = &ss->slabs[u];
    u += s->span;
    s->prev = s->next = NULL;
    hak_remote_collect(s, HAK_RS_NORMAL);
    for (;;) {
      if (hak_slab_used(s) == 0) {
        hak_ss_free_slab(h, s);
      } else if (s->free != NULL || s->rfree != NULL || s->capacity < s->reserved) {
        hak_partial_push(h, s);
      } else if (hak_remote_mark_full(s)) {
        s->state = HAK_SLAB_FULL;
      } else {
        hak_remote_collect(s, HAK_RS_KEEP_STATE);
        continue;
      }
      break;
    }
  }
  hak_gcount(&hak_gstats.ss_adopted, 1);
  if (hak_ss_unused(ss) && h->unused_ss > hak_opt.ss_reserve) hak_ss_release(h, ss);
}

static bool heap_try_adopt(hak_heap_t *h)
{
  hak_superslab_t *ss = hak_handoff_take();
  if (ss == NULL) return false;
  heap_adopt(h, ss);
  return true;
}

/* Does an abandoned SuperSlab hold blocks freed since it was abandoned? */
static bool ss_has_remote_frees(hak_superslab_t *ss)
{
  for (unsigned u = 0; u < HAK_UNITS; u++)
    if (atomic_load_explicit(&ss->remote_heads[u].head, memory_order_relaxed) & ~HAK_RS_MASK) return true;
  return false;
}

/* Exiting thread: look at a few abandoned SuperSlabs and drain those that
 * received frees after their owner left, so that memory comes back even when
 * no living thread refills; the others go back untouched.  (Pops rotate
 * through the stack: see handoff.c.) */
static void heap_sweep_abandoned(hak_heap_t *h)
{
  for (int i = 0; i < ABANDON_SWEEP; i++) {
    hak_superslab_t *ss = hak_handoff_take();
    if (ss == NULL) return;
    if (ss_has_remote_frees(ss)) heap_adopt(h, ss);
    else hak_handoff_abandon(ss);
  }
}

/* Every slab of ss (h's, out of h's lists) an orphan: its remote frees
 * taken, the empty ones freed; an adopter sorts the rest (heap_adopt). */
static void ss_orphan_slabs(hak_heap_t *h, hak_superslab_t *ss)
{
  hak_slab_t *s;
  FOR_EACH_SLAB(ss, s) {
    hak_remote_collect(s, HAK_RS_KEEP_STATE);
    s->prev = s->next = NULL;
    s->state = HAK_SLAB_ORPHAN;
    if (hak_slab_used(s) == 0) hak_ss_free_slab(h, s);
  }
}

/* ss leaves h and is nobody's.  Order: the tag changes before ss is
 * anyone else's to take, so an adopter's tag is never overwritten by ours. */
static void ss_disown(hak_heap_t *h, hak_superslab_t *ss)
{
  hak_ss_unlink(h, ss);
  atomic_store_explicit(&ss->owner, NULL, memory_order_relaxed);
  hak_map_set_range(ss, HAK_SS_SIZE, HAK_TAG_SS);
}

/* A SuperSlab of a parked heap, for a living thread whose heap has no free
 * unit left (park_steal).  A thread that exits early parks a heap whose
 * free pages wait for the next thread, while the threads still running map
 * more: bench/mstress, whose threads of unequal work are replaced every
 * round, held the heaps of its early finishers (mostly empty units) beside
 * the growing heaps of the others.  Taking one of their SuperSlabs before
 * mapping reuses those pages; its slabs with live blocks come along (one
 * owner per slab, as adoption), and the heap's next thread takes what it
 * still needs from the next parked heap, or maps.
 * ss of the parked heap p (both ours: park_lock and p's lock held) leaves
 * p: no remote freer hands a full slab of it to p's delayed list any more,
 * the blocks of ss already there go back to their slabs (the rest stay for
 * p's next owner), its slabs leave p's lists, and it is nobody's before
 * park_lock is released: a thread that takes p then reads the tag again
 * (hak_free_generic) and frees ss's blocks as remote frees. */
static void park_detach(hak_heap_t *p, hak_superslab_t *ss)
{
  hak_slab_t *s;
  FOR_EACH_SLAB(ss, s) hak_remote_set_state(s, HAK_RS_NEVER_DELAYED);
  hak_partial_drain_delayed_of(p, ss);  /* p is DEAD: no list moves (hak_slab_push_slow) */
  FOR_EACH_SLAB(ss, s) {
    if (s->state == HAK_SLAB_PARTIAL) hak_partial_remove(p, s);
    else if (s->state == HAK_SLAB_CUR) p->cur[s->cls] = &hak_slab_sentinel;
  }
  ss_orphan_slabs(p, ss);
  ss_disown(p, ss);
}

/* p's SuperSlab with the most free units, if at least STEAL_MIN_FREE. */
static hak_superslab_t *park_pick(const hak_heap_t *p)
{
  hak_superslab_t *best = NULL;
  int most = STEAL_MIN_FREE - 1;
  for (hak_superslab_t *ss = p->ss_list; ss != NULL && ss->free_units != 0; ss = ss->next) {
    int n = hak_popcount64(ss->free_units);
    if (n > most) {
      most = n;
      best = ss;
    }
  }
  return best;
}

/* park_pick's SuperSlab of the first of the STEAL_HEAPS heaps parked
 * longest that has one (not of a heap an heir waits for), detached and
 * adopted by h.  Returns whether h got one.  The heap stays parked, in its
 * place. */
static bool park_steal(hak_heap_t *h)
{
  if (atomic_load_explicit(&park_count, memory_order_relaxed) == 0) return false;
  hak_superslab_t *ss = NULL;
  pthread_mutex_lock(&park_lock);
  hak_heap_t *p = park_oldest;
  for (int i = 0; p != NULL && i < STEAL_HEAPS; i++, p = p->park_prev)
    if (!atomic_load_explicit(&p->claimed, memory_order_relaxed) && (ss = park_pick(p)) != NULL) break;
  if (ss != NULL) {
    bool held = hak_heap_lock(p);  /* the purger's reclaim pass may hold it a moment */
    park_detach(p, ss);
    hak_heap_unlock(p, held);
  }
  pthread_mutex_unlock(&park_lock);
  if (ss == NULL) return false;
  heap_adopt(h, ss);
  return true;
}

/* --------------------------------------------------------- maintenance */

/* h's thread no longer waits to inherit (hak_heap_inherit): the heap it
 * wanted is anyone's again.  A stale tag names a heap all the same (heaps
 * are never unmapped), at worst one that nobody waits for: the flag is a
 * hint. */
static void heir_forgo(hak_heap_t *h)
{
  hak_heap_t *want = (hak_heap_t *)(h->heir_tag & ~HAK_TAG_KIND);
  h->heir_tag = 0;
  atomic_store_explicit(&want->claimed, 0, memory_order_relaxed);
}

/* Now and then (at most every purge delay), take the remote frees waiting on
 * every partial slab that they would empty, so a slab whose blocks were all
 * freed by other threads goes back even if this thread never allocates its
 * class again (the others wait for a refill: collecting them now would walk
 * their lists). */
static void heap_maintain(hak_heap_t *h)
{
  uint64_t now = hak_os_now_ms();
  if (now - h->maintained_ms < hak_opt.purge_delay_ms) return;
  h->maintained_ms = now;
  if (h->heir_tag != 0 && now - h->heir_ms > HEIR_WINDOW_MS) heir_forgo(h);
  hak_tcache_relax(h);
  hak_xfer_drain(now, false);  /* classes unused for a purge delay */
  park_expire(now, false);
  hak_large_kept_release(h);  /* a kept run unused since the last pass goes back to the arenas */
  hak_large_decay();  /* large cache entries idle past the delay give their pages back */
  hak_partial_take_back(h);
  /* A purger that sleeps because every heap was idle looks again: this one
   * is busy (see "idle heaps"). */
  hak_os_bell_ring();
}

/* ------------------------------------------------------------ malloc slow */

/* Carve the next blocks of h's current slab s and pop the first, or NULL
 * if s is carved out.  The first block carved from a fresh slab is noted
 * for calloc (hak_heap_fresh_block). */
static void *heap_carve_pop(hak_heap_t *h, hak_slab_t *s)
{
  uint8_t *first = s->start + (size_t)s->capacity * s->block_size;
  if (!hak_slab_extend(s)) return NULL;
  void *p = hak_heap_pop(h, s->cls);
  if (s->fresh && p == first) hak_heap_fresh_block = p;
  return p;
}

/* Make s the current slab of its class and pop a block, or NULL if it has none. */
static void *heap_use_slab(hak_heap_t *h, hak_slab_t *s)
{
  s->state = HAK_SLAB_CUR;
  h->cur[s->cls] = s;
  if (s->free == NULL && !hak_slab_take_rfree(s) && hak_remote_collect(s, HAK_RS_KEEP_STATE) == 0)
    return heap_carve_pop(h, s);
  if (s->free == NULL) return NULL;
  return hak_heap_pop(h, s->cls);
}

static void *heap_refill(hak_heap_t *h, size_t cls)
{
  hak_remote_flush(h);  /* a refill is rare enough: what this thread held back goes now */
  /* Maintenance on any refill, not only when a class runs out of slabs: a
   * thread whose blocks other threads free keeps refilling from the slabs
   * they come back to and never runs out, so without this the slabs it
   * took at a peak stayed with it for good. */
  heap_maintain(h);
  int adopted = 0;
  for (;;) {
    hak_slab_t *s = h->cur[cls];
    if (s != &hak_slab_sentinel && (hak_slab_take_rfree(s) || hak_remote_collect(s, HAK_RS_KEEP_STATE) > 0))
      return hak_heap_pop(h, cls);
    /* A block other threads freed, of a class above 1 KiB, before this
     * heap's partial slabs and fresh pages (xfer.c). */
    if (hak_class_xfer(cls)) {
      void *p = hak_xfer_take(cls);
      if (p != NULL) return p;
    }
    if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) hak_partial_drain_delayed(h);
    if (s != &hak_slab_sentinel) {
      /* Free blocks of the partial slabs before fresh pages: a current slab
       * that could still carve goes behind them: fresh pages only when no
       * freed block is left, which keeps peak RSS down at no cost in time.
       * Full slabs that other threads freed into are partial ones too,
       * taken from the delayed list just above (a producer's blocks all
       * come back by remote frees). */
      if (h->partial[cls] != NULL && s->capacity < s->reserved) {
        hak_partial_push(h, s);
        h->cur[cls] = &hak_slab_sentinel;
      } else {
        void *p = heap_carve_pop(h, s);
        if (p != NULL) return p;
        if (!hak_remote_mark_full(s)) continue;  /* blocks arrived meanwhile */
        s->state = HAK_SLAB_FULL;
        h->cur[cls] = &hak_slab_sentinel;
      }
    }
    s = h->partial[cls];
    if (s != NULL) {
      hak_partial_remove(h, s);
      void *p = heap_use_slab(h, s);
      if (p != NULL) return p;
      continue;
    }
    hak_ss_purge(h, false);
    /* Memory exited threads left comes before fresh memory: adopt one of
     * their SuperSlabs (its partial slabs and free units become ours) and
     * look again; a few a refill at most, so the cost of one refill stays
     * bounded however much was abandoned. */
    if (adopted < ADOPT_PER_REFILL && hak_handoff_count(&hak_abandoned) != 0 && heap_try_adopt(h)) {
      adopted++;
      continue;
    }
    /* Then a SuperSlab of a parked heap before a cached or new one. */
    s = hak_ss_alloc_slab(h, cls, false);
    if (s == NULL && adopted < ADOPT_PER_REFILL && park_steal(h)) {
      adopted++;
      continue;
    }
    if (s == NULL) s = hak_ss_alloc_slab(h, cls, true);
    if (s == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    void *p = heap_use_slab(h, s);
    if (p != NULL) return p;
  }
}

void *hak_heap_refill(hak_heap_t *h, size_t cls)
{
  bool held = hak_heap_lock(h);
  void *p = heap_refill(h, cls);
  hak_heap_unlock(h, held);
  return p;
}

/* ------------------------------------------------------------- free slow */

void hak_heap_overflow(hak_heap_t *h, size_t cls)
{
  bool held = hak_heap_lock(h);
  hak_tcache_overflow(h, cls);
  hak_heap_unlock(h, held);
}

void hak_heap_push_block(hak_heap_t *h, hak_slab_t *s, hak_block_t *b)
{
  bool held = hak_heap_lock(h);
  hak_slab_push(h, s, b);
  hak_heap_unlock(h, held);
}

/* ----------------------------------------------------- heaps and threads */

static void heap_reset(hak_heap_t *h)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) h->cur[c] = &hak_slab_sentinel;
  hak_partial_reset(h);
  hak_tcache_reset(h);
  h->tag = (uintptr_t)h | HAK_TAG_SS;
  h->maintained_ms = 0;
  h->heir_tag = 0;
  hak_ss_heap_reset(h);
  hak_remote_heap_reset(h);
}

static hak_heap_t *heap_new(void)
{
  pthread_mutex_lock(&chunk_lock);
  if (chunk_next == NULL || chunk_next + 1 > chunk_end) {
    chunk_next = hak_os_map_aligned(HEAP_CHUNK, HAK_PAGE_SIZE);
    chunk_end = chunk_next ? (hak_heap_t *)((char *)chunk_next + HEAP_CHUNK) : NULL;
  }
  hak_heap_t *h = chunk_next ? chunk_next++ : NULL;
  pthread_mutex_unlock(&chunk_lock);
  if (h == NULL) return NULL;
  /* Publish on the stats list; release: a reader sees zeroed counters. */
  hak_heap_t *top = atomic_load_explicit(&all_heaps, memory_order_relaxed);
  do {
    h->all_next = top;
  } while (!atomic_compare_exchange_weak_explicit(&all_heaps, &top, h, memory_order_release,
                                                  memory_order_relaxed));
  return h;
}

/* A heap for a thread: a parked one as it is (warm; `want` if it is
 * parked), else an empty one. */
static hak_heap_t *heap_acquire(bool warm, hak_heap_t *want)
{
  hak_heap_t *p = warm ? park_take(want) : NULL;
  if (p != NULL) {
    bool held = hak_heap_lock(p);
    hak_stats_heap_start(p);
    p->heir_tag = 0;
    p->prof_left = hak_prof_next_left();   /* the first sampling interval */
    p->state = HAK_HEAP_LIVE;
    hak_heap_unlock(p, held);
    return p;
  }
  ck_stack_entry_t *e = hak_handoff_pop(&pool);
  hak_heap_t *h = e ? (hak_heap_t *)((char *)e - offsetof(hak_heap_t, pool_link)) : heap_new();
  if (h == NULL) return NULL;
  bool held = hak_heap_lock(h);
  heap_reset(h);
  hak_stats_heap_start(h);
  h->prof_left = hak_prof_next_left();     /* the first sampling interval */
  h->state = HAK_HEAP_LIVE;
  hak_heap_unlock(h, held);
  return h;
}

hak_heap_t *hak_heap_acquire(void) { return heap_acquire(false, NULL); }

/* h stops being a thread's own (parked or given up, the caller holding its
 * lock; or, in a fork child, its thread is gone, and the child's only
 * thread clears it): the purger no longer takes it from any thread (see
 * "idle heaps"). */
static void home_clear(hak_heap_t *h)
{
  h->home_tid = 0;
  h->home_slot = NULL;
  h->home_stack = 0;
}

/* h becomes the calling thread's own (see "idle heaps"). */
static void home_set(hak_heap_t *h)
{
  bool held = hak_heap_lock(h);
  h->home_tid = hak_os_tid();
  h->home_slot = &hak_tls_heap;
  h->home_stack = (uintptr_t)__builtin_frame_address(0);
  hak_heap_unlock(h, held);
  hak_tls_home = h;
  hak_tls_heap = h;
}

/* A thread whose heap the purger took while the thread idled (see "idle
 * heaps") takes it back, after the purger's pass over it; NULL if the
 * thread has no heap of its own. */
static hak_heap_t *home_take_back(void)
{
  hak_heap_t *h = hak_tls_home;
  if (h == NULL) return NULL;
  bool held = hak_heap_lock(h);   /* waits for the purger's pass */
  hak_tls_heap = h;
  hak_heap_unlock(h, held);
  return h;
}

/* hak_heap_thread_start, warm: a parked heap if there is one. */
static hak_heap_t *thread_start(bool warm, hak_heap_t *want)
{
  hak_heap_t *h = home_take_back();
  if (h != NULL) return h;
  h = heap_acquire(warm, want);
  if (h == NULL) return NULL;
  home_set(h);                           /* before setspecific, which may allocate */
  if (pthread_setspecific(heap_key, h) != 0) {  /* runs heap_thread_exit at thread exit */
    /* ENOMEM: glibc allocates the key's second-level array (keys >= 32) and
     * that failed.  Without the key the heap would never be abandoned, its
     * memory stranded when the thread exits: hand it over now and fail. */
    hak_tls_heap = &hak_heap_unstarted;
    hak_tls_home = NULL;
    hak_heap_abandon(h);
    return NULL;
  }
  return h;
}

hak_heap_t *hak_heap_thread_start(hak_heap_t *want) { return thread_start(true, want); }

/* The calling thread's heap, made live if the thread has none yet: a thread
 * whose first call is a free (a consumer that only frees) gets a heap, so
 * its counts stay in its own cache lines instead of every such thread
 * adding to the same global counters on every free.  `tag` is the registry
 * tag of the block being freed: if it names a parked heap, the thread
 * takes that one (park_take), so a thread that carries on with the
 * blocks of the thread that created it and exited (a server's connection
 * handed to a new thread; bench/larson) frees them into its own heap rather
 * than, having got another parked heap, into that heap's slabs remotely
 * (with many threads on few cores that happens often).  Returns h
 * itself when it cannot (after teardown, or ENOMEM).  The caller has
 * initialised hakmem and is not recursing into it. */
hak_heap_t *hak_heap_thread_get(hak_heap_t *h, uintptr_t tag)
{
  if (h->state != HAK_HEAP_UNSTARTED) return h;
  hak_heap_t *home = home_take_back();
  if (home != NULL) return home;
  /* A heap's address (heaps never unmap, so a stale tag names memory that
   * is still a heap; park_take checks it is parked, under the lock). */
  hak_heap_t *want = (tag & HAK_TAG_KIND) == HAK_TAG_SS ? (hak_heap_t *)(tag & ~HAK_TAG_KIND) : NULL;
  /* A live owner (not parked yet): another heap to wait with, parked
   * again once the wanted one is taken (see hak_heap_inherit). */
  bool heir = want != NULL && hak_opt.parked_heaps != 0 && !atomic_load_explicit(&want->parked, memory_order_relaxed);
  hak_heap_t *n = thread_start(true, want);
  if (n == NULL) return h;
  if (heir) {
    n->heir_tag = tag;
    n->heir_frees = 0;
    n->heir_ms = hak_os_now_ms();
    atomic_store_explicit(&want->claimed, 1, memory_order_relaxed);
  }
  return n;
}

/* A thread that started by freeing the blocks of a thread that had not yet
 * exited (a successor created by a thread that returns right after,
 * unjoined: bench/larson, a server's connection handed to a new thread)
 * would free those blocks remotely for its whole life, and so would its own
 * successors.  So it starts with another heap (parked, else empty), and when
 * the heap it wanted (heir_tag) is parked at last, within HEIR_WINDOW_MS of
 * the thread's start, the thread takes it: the heap follows the blocks.  The
 * heap it had (what it allocated meanwhile) is parked as an exited thread's
 * is, and the next thread that starts before its predecessor has parked
 * takes it to wait with: that one's waiting allocations land in pages
 * already touched.  Giving it up instead (its SuperSlabs to the refills of
 * the living threads) made every such thread carve a fresh or purged
 * SuperSlab: larson at 4 threads took 181 of them in 4 s, 21 now, and
 * faulted 1.5-1.8 times the pages (bench/results/history.md).  Adopting them
 * into the inherited heap added a SuperSlab of partial slabs, one per class
 * it had used, to that heap at every generation of threads: larson at 4
 * threads kept 493 slabs for 12 MB of live blocks, 288 this way.  Called on
 * the slow paths that see heir_tag (a free that took the registry, a
 * refill).  Returns the calling thread's heap, h or the inherited one. */
hak_heap_t *hak_heap_inherit(hak_heap_t *h)
{
  if (h->heir_frees < HEIR_MIN_FREES) return h;
  hak_heap_t *n = park_take_exact((hak_heap_t *)(h->heir_tag & ~HAK_TAG_KIND));
  if (n == NULL) return h;
  h->heir_tag = 0;
  bool held = hak_heap_lock(n);
  hak_stats_heap_start(n);
  n->heir_tag = 0;
  n->prof_left = h->prof_left;   /* the thread's countdown goes on */
  n->state = HAK_HEAP_LIVE;
  hak_heap_unlock(n, held);
  home_set(n);
  (void)pthread_setspecific(heap_key, n);  /* the key holds a value: no allocation, cannot fail */
  heap_park(h);
  return n;
}

void *hak_heap_alloc_orphan(size_t cls)
{
  hak_heap_t *t = hak_heap_acquire();
  if (t == NULL) { errno = ENOMEM; return NULL; }
  hak_tls_heap = t;
  void *p = hak_heap_get(t, cls);
  hak_tls_heap = &hak_heap_dead;
  hak_heap_abandon(t);
  return p;
}

/* Thread exit (or a heap left for an inherited one, hak_heap_inherit):
 * hand everything this heap owns to the living threads.
 * 1. No remote freer may touch this heap any more: every slab's state goes
 *    to NEVER_DELAYED (waiting out hand-overs in flight).
 * 2. Blocks already handed over through `delayed` go back to their slabs.
 * 3. Remote stacks are drained; empty slabs and SuperSlabs are released.
 * 4. SuperSlabs still holding live blocks are abandoned on the ck stack.
 * 5. Counters are folded into the totals; the caller pools the heap. */
static void heap_give_up(hak_heap_t *h, bool idle)
{
  bool held = hak_heap_lock(h);
  home_clear(h);
  hak_slab_t *s;
  hak_large_kept_release(h);
  hak_tcache_flush_all(h);
  hak_remote_flush(h);
  /* Blocks freed into SuperSlabs other exited threads left behind come back
   * (drained below with ours, released if empty). */
  heap_sweep_abandoned(h);
  h->state = HAK_HEAP_DEAD;
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) h->cur[c] = &hak_slab_sentinel;
  hak_partial_reset(h);
  for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = ss->next)
    FOR_EACH_SLAB(ss, s) hak_remote_set_state(s, HAK_RS_NEVER_DELAYED);
  hak_partial_drain_delayed(h);
  if (atomic_load_explicit(&h->delayed, memory_order_acquire) != NULL)
    hak_fatal("delayed frees left after abandon", h);

  hak_superslab_t *next;
  for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = next) {
    next = ss->next;
    ss_orphan_slabs(h, ss);
    if (hak_ss_unused(ss)) hak_ss_release(h, ss);
  }
  /* Free pages of SuperSlabs about to be abandoned: nobody owns them until an
   * adoption, so no delay can expire there.  Those idle past the delay go
   * back now, and all of them if they are many; the rest (recently freed:
   * a thread that comes next and adopts them reuses them without page
   * faults) stay, at most ABANDON_KEEP_DIRTY per exiting heap; none if
   * the heap idled for the delay (parked). */
  hak_ss_purge(h, idle || (size_t)h->dirty_units * HAK_UNIT_SIZE > ABANDON_KEEP_DIRTY);
  for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = next) {
    next = ss->next;
    ss_disown(h, ss);  /* before it is on the stack */
    hak_handoff_abandon(ss);
  }
  hak_stats_fold(h);
  hak_heap_unlock(h, held);
}

void hak_heap_abandon(hak_heap_t *h)
{
  heap_give_up(h, false);
  hak_gcount(&hak_gstats.heaps_abandoned, 1);
  hak_handoff_push(&pool, &h->pool_link);
}

/* Thread exit, or a heap left for an inherited one (hak_heap_inherit),
 * keeping the heap for the next thread (see "parked heaps"): give back what
 * abandoning would, then park it.  The caller counts a thread's exit. */
static void heap_park(hak_heap_t *h)
{
  bool held = hak_heap_lock(h);
  home_clear(h);
  hak_large_kept_release(h);
  hak_tcache_flush_all(h);
  hak_remote_flush(h);  /* blocks of other heaps' slabs go back now */
  heap_sweep_abandoned(h);
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) hak_partial_drain_delayed(h);
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    hak_slab_t *s = h->cur[c];
    if (s != &hak_slab_sentinel && hak_remote_pending(s) == hak_slab_used(s)) {
      hak_remote_collect(s, HAK_RS_KEEP_STATE);
      if (hak_slab_used(s) == 0) {
        h->cur[c] = &hak_slab_sentinel;
        hak_partial_release(h, s);
      }
    }
    hak_partial_sweep(h, c);
  }
  hak_superslab_t *next;
  for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = next) {
    next = ss->next;
    if (hak_ss_unused(ss) && h->unused_ss > hak_opt.ss_reserve) hak_ss_release(h, ss);
  }
  /* Free pages idle for the delay go; the rest stay for the next thread
   * if the purger will expire the heap (see "parked heaps"). */
  hak_ss_purge(h, !hak_ss_purger() && (size_t)h->dirty_units * HAK_UNIT_SIZE > ABANDON_KEEP_DIRTY);
  hak_stats_fold(h);
  uint64_t now = hak_os_now_ms();
  h->state = HAK_HEAP_DEAD;
  h->parked_ms = now;
  h->parked_cpu = hak_os_cpu();
  hak_heap_unlock(h, held);  /* before the heap is anyone else's to take */
  park_push(h);
  park_expire(now, false);
  hak_os_bell_ring();  /* a purger asleep without a deadline sets one for this heap */
}

static void heap_thread_exit(void *arg)
{
  hak_heap_t *h = arg;
  /* hak_tls_heap may hold the placeholder (see "idle heaps"). */
  if (h == NULL || h != hak_tls_home || h->state != HAK_HEAP_LIVE) return;
  if (h->heir_tag != 0) heir_forgo(h);
  hak_tls_heap = &hak_heap_dead;
  hak_tls_home = NULL;
  if (hak_opt.parked_heaps != 0) {
    hak_gcount(&hak_gstats.heaps_abandoned, 1);  /* reported as threads_exited */
    heap_park(h);
  } else {
    hak_heap_abandon(h);
  }
}

/* Return what this heap caches: empty current slabs, delayed frees, free
 * pages; then unmap every retired region. */
void hak_heap_collect(hak_heap_t *h, bool force)
{
  /* Parked heaps are handed to the living threads (and purged). */
  if (force) {
    park_expire(hak_os_now_ms(), true);
    hak_xfer_drain(0, true);
  }
  if (h->state == HAK_HEAP_LIVE) {
    bool held = hak_heap_lock(h);
    hak_large_kept_release(h);
    hak_tcache_flush_all(h);
    hak_remote_flush(h);
    /* Adopt what exited threads left: their free blocks come back. */
    for (uint32_t n = force ? hak_handoff_count(&hak_abandoned) : 0; n > 0 && heap_try_adopt(h); n--) {
    }
    if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) hak_partial_drain_delayed(h);
    for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
      hak_slab_t *s = h->cur[c];
      if (s == &hak_slab_sentinel) continue;
      hak_remote_collect(s, HAK_RS_KEEP_STATE);
      if (hak_slab_used(s) != 0) continue;
      h->cur[c] = &hak_slab_sentinel;
      hak_ss_free_slab(h, s);
    }
    hak_superslab_t *next;
    for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = next) {
      next = ss->next;
      if (hak_ss_unused(ss) && (force || h->unused_ss > hak_opt.ss_reserve)) hak_ss_release(h, ss);
    }
    hak_ss_purge(h, true);
    hak_heap_unlock(h, held);
  }
  if (force) hak_ss_cache_decay(true);  /* the empty SuperSlabs cached: pages and mappings */
  hak_retire_flush();
}

/* ------------------------------------------------------------- idle heaps */

/* A thread that allocated and went idle (a server's main thread waiting in
 * pthread_join, a pool worker with nothing to do) makes no slow-path call,
 * so the blocks other threads free into its slabs would stay on their
 * remote stacks and its free pages committed for as long as it idles: the
 * living threads carve fresh memory meanwhile.  The purger thread
 * (purge.c) looks at the heaps once per purge delay.  A live heap whose lock
 * word has not changed since the last look made no slow-path call for at
 * least that long: the purger takes its lock (never waiting: a failed
 * compare-and-swap skips the heap) and does for it what the heap's own
 * maintenance would: the delayed list's blocks back to their slabs, the
 * partial slabs that remote frees emptied released, and the heap's free
 * pages given back.  What the owner's fast paths use without the lock (the
 * thread cache, the current slabs) it touches only after taking the heap
 * from the thread (heap_take_fast, on the second look in a row that finds
 * the heap idle): it swaps the heap for the placeholder hak_heap_unstarted
 * in the thread's hak_tls_heap (home_slot), then the probe (tprobe.h) must
 * find the thread blocked in the kernel with no hakmem code on its stack,
 * so that no call of the thread holds the heap and every later one finds
 * the placeholder and takes the heap back through home_take_back, which
 * waits for the pass.  Then the current slabs go to the partial lists and
 * the thread cache back to the slabs, as at the thread's exit, and the
 * slabs emptied so are released like the others.  The owned[] slots stay
 * (so it releases no SuperSlab: an emptied one keeps its header page until
 * the owner's next release).  The slabs stay the heap's: their blocks come
 * back to it, nothing moves between heaps.  If the thread wakes meanwhile,
 * its slow path waits for the purger's pass over that one heap.  The probe
 * reads Linux's /proc, and is not used where hakmem is linked into the
 * program (the unit tests, the ThreadSanitizer build): there only the slow
 * paths' part is done.  reclaim_lock: one pass at a time, and none across
 * a fork (the child's heaps must not be left locked). */
static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;
#define RECLAIM_BACKOFF_MAX 5   /* an idle heap is looked at every 32 passes at least */

void hak_heap_lock_wait(hak_heap_t *h)
{
  for (;;) {
    uint32_t v = atomic_load_explicit(&h->lock, memory_order_relaxed);
    if (!(v & HAK_HEAP_RECLAIM) &&
        atomic_compare_exchange_weak_explicit(&h->lock, &v, v | HAK_HEAP_OWNER, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    sched_yield();
  }
}

/* The purger's take of what h's fast paths use, on the second idle look in
 * a row and the fourth, eighth .. (a thread that runs its own code for a
 * while before it blocks is looked at again; nothing of h is read before
 * the probe, since the thread may be using it):
 * a thread that runs is left alone (a thread that only allocates large
 * blocks takes no heap lock, and looks idle while it works); else h is
 * swapped for the placeholder in its thread's hak_tls_heap (a CAS, so
 * a thread that changed its heap meanwhile keeps it), then, if the probe
 * finds the thread blocked outside hakmem (tprobe.h), no call of the
 * thread can be using h (one in flight would be on its stack) and every
 * later call finds the placeholder, whose empty caches send it to a slow
 * path that waits for this pass (home_take_back): the current slabs go to
 * the partial lists and the thread cache back to the slabs, as at the
 * thread's exit.  Else h goes back into hak_tls_heap (unless the thread
 * took it back itself) and nothing was touched. */
static bool heap_take_fast(hak_heap_t *h)
{
  uint32_t idle = h->reclaim_idle;
  if (!hak_opt.idle_take || idle == 0 || (idle & (idle - 1)) != 0 || h->home_slot == NULL ||
      !hak_tprobe_blocked(h->home_tid))
    return false;
  hak_heap_t *expect = h;
  /* seq_cst: the swap is visible before the probe looks at the thread. */
  if (!atomic_compare_exchange_strong(h->home_slot, &expect, &hak_heap_unstarted)) return false;
  if (!hak_tprobe_outside(h->home_tid, h->home_stack)) {
    expect = &hak_heap_unstarted;
    (void)atomic_compare_exchange_strong(h->home_slot, &expect, h);
    return false;
  }
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    hak_slab_t *s = h->cur[c];
    if (s == &hak_slab_sentinel) continue;
    h->cur[c] = &hak_slab_sentinel;
    hak_partial_push(h, s);
  }
  hak_tcache_flush_all(h);
  hak_remote_flush(h);
  hak_gcount(&hak_gstats.idle_takes, 1);
  return true;
}

/* The purger's work on the live heap h, whose lock it holds.  Returns
 * whether it had anything to give back.  The first look that finds the
 * heap idle gives back only the free pages its own sweep would (those
 * idle past their delay, hak_ss_purge): a thread that runs on its thread
 * caches makes no slow-path call for a purge delay and more, and its next
 * refill would fault in again what a full purge gave back
 * (bench/realloc_grow.c at 4 threads: 44 MB a second).  The next look in a
 * row gives back all. */
static bool heap_reclaim(hak_heap_t *h)
{
  bool took = heap_take_fast(h);
  uint32_t n = hak_partial_take_back(h);
  uint32_t dirty = h->dirty_units;
  hak_ss_purge(h, h->reclaim_idle++ != 0);
  return took || n != 0 || dirty != 0;
}

bool hak_heap_reclaim_idle(void)
{
  bool again = false;
  pthread_mutex_lock(&reclaim_lock);
  for (hak_heap_t *h = hak_heap_list(); h != NULL; h = h->all_next) {
    /* A kept large run (large.c) that two passes in a row found there went
     * unused for a pass: back to the arenas, busy heap or not (any thread
     * may take it: an exchange).  A busy thread that never refills would
     * keep it otherwise.  Only then, not at the first look that finds the
     * heap idle: a thread that only allocates large blocks takes no heap
     * lock, so it looks idle, and the put that kept the run rings the
     * purger; a run taken from its slot at that ring was in neither the
     * slot nor the arenas while the thread's next malloc looked for pages
     * (unit_large's split-and-merge test under TSan). */
    struct hak_large *kept = atomic_load_explicit(&h->large_kept, memory_order_relaxed);
    if (kept != NULL && kept == h->reclaim_kept && hak_large_kept_release(h)) kept = NULL;
    h->reclaim_kept = kept;
    if (kept != NULL) again = true;  /* look again */
    uint32_t v = atomic_load_explicit(&h->lock, memory_order_relaxed);
    if (v != h->reclaim_seen) {  /* busy since the last look */
      h->reclaim_seen = v;
      h->reclaim_skip = h->reclaim_backoff = h->reclaim_idle = 0;
      again = true;
      continue;
    }
    /* Held since the last look: a slow path that blocks (or, in a fork
     * child, one whose thread is gone): neither idle nor busy. */
    if (v & (HAK_HEAP_OWNER | HAK_HEAP_RECLAIM)) continue;
    if (h->reclaim_skip != 0) {
      h->reclaim_skip--;
      continue;
    }
    /* acquire: the owner's writes before its last release are seen. */
    if (!atomic_compare_exchange_strong_explicit(&h->lock, &v, v | HAK_HEAP_RECLAIM, memory_order_acquire,
                                                 memory_order_relaxed)) {
      again = true;
      continue;
    }
    bool gave = h->state == HAK_HEAP_LIVE && heap_reclaim(h);
    v += HAK_HEAP_HOLD;
    atomic_store_explicit(&h->lock, v, memory_order_release);
    h->reclaim_seen = v;
    if (gave) {
      hak_gcount(&hak_gstats.idle_reclaims, 1);
      again = true;
      h->reclaim_backoff = 0;
    } else {
      h->reclaim_skip = (1u << h->reclaim_backoff) - 1;
      if (h->reclaim_backoff < RECLAIM_BACKOFF_MAX) h->reclaim_backoff++;
    }
  }
  pthread_mutex_unlock(&reclaim_lock);
  return again;
}

/* Under reclaim_lock, which the fork handlers take: a heap the purger took
 * off the park list is never caught half given up by a fork. */
uint64_t hak_heap_expire_parked(void)
{
  if (atomic_load_explicit(&park_count, memory_order_relaxed) == 0) return 0;
  pthread_mutex_lock(&reclaim_lock);
  park_expire(hak_os_now_ms(), false);
  pthread_mutex_lock(&park_lock);
  uint64_t due = park_oldest != NULL ? park_oldest->parked_ms + park_delay_ms() : 0;
  pthread_mutex_unlock(&park_lock);
  pthread_mutex_unlock(&reclaim_lock);
  return due;
}

void hak_heap_init(void)
{
  pthread_key_create(&heap_key, heap_thread_exit);
}

void hak_heap_before_fork(void)
{
  pthread_mutex_lock(&reclaim_lock);
  pthread_mutex_lock(&chunk_lock);
  pthread_mutex_lock(&park_lock);
  hak_handoff_before_fork(&pool);
  hak_handoff_before_fork(&hak_abandoned);
}
void hak_heap_after_fork(bool child)
{
  hak_heap_t *h = hak_tls_home != NULL ? hak_tls_home : hak_tls_heap;  /* taken by the purger: still ours */
  hak_slab_t *s;
  if (child && h->state == HAK_HEAP_LIVE)
    for (hak_superslab_t *ss = h->ss_list; ss != NULL; ss = ss->next)
      FOR_EACH_SLAB(ss, s) hak_remote_after_fork_child(s);
  /* Parked heaps' slabs too: their freers may have been between the steps
   * of a delayed hand-over. */
  if (child)
    for (hak_heap_t *p = park_newest; p != NULL; p = p->park_next)
      for (hak_superslab_t *ss = p->ss_list; ss != NULL; ss = ss->next)
        FOR_EACH_SLAB(ss, s) hak_remote_after_fork_child(s);
  /* The other threads' heaps stay live in the child, their threads gone:
   * their hak_tls_heap slots went with the threads' stacks (glibc reuses
   * or unmaps them), so the purger must never swap them (see "idle
   * heaps").  This thread's heap keeps its slot, under a new thread id. */
  if (child)
    for (hak_heap_t *o = hak_heap_list(); o != NULL; o = o->all_next)
      if (o != h) home_clear(o);
  if (child && h == hak_tls_home) h->home_tid = hak_os_tid();
  hak_handoff_after_fork(&hak_abandoned, child);
  hak_handoff_after_fork(&pool, child);
  if (child) {
    pthread_mutex_init(&park_lock, NULL);
    pthread_mutex_init(&chunk_lock, NULL);
    pthread_mutex_init(&reclaim_lock, NULL);
  } else {
    pthread_mutex_unlock(&park_lock);
    pthread_mutex_unlock(&chunk_lock);
    pthread_mutex_unlock(&reclaim_lock);
  }
}
