/* Statistics: per-thread counters in each heap (written only by its thread),
 * folded into the process totals when the thread exits, summed on demand
 * (hak_stats_get, hak_stats_get_classes), and reported: with HAKMEM_STATS=1
 * one summary line at exit, with HAKMEM_STATS=2 also the per-class table,
 * the SuperSlab and large-block counters, peak RSS and the remote-free
 * matrix (hak_stats_print prints the same on a FILE).
 *
 * The remote-free matrix (HAKMEM_STATS=2 only).  A free by a thread that
 * does not own the block is counted on the remote-free path only, in a small
 * table of the freeing heap keyed by the owner's heap id (hak_remote_row_t,
 * no lock, no shared write).  The owner id is the slab's (set when the slab
 * was carved) or the large mapping's: a slab adopted from an exited thread
 * keeps its carver's id.  At thread exit the table is added to `folded`, a
 * lock-free process-wide table keyed by (freer id, owner id), and the
 * thread's name to `names`.  The report ranks threads by blocks freed (rows)
 * and by blocks freed by others (columns), shows the busiest REPORT_TOP of
 * each and sums the rest as "other".  A thread is labelled by the name given
 * with pthread_setname_np (read at heap start, at exit, and for a running
 * thread at report time from /proc/self/task/TID/comm), or "main", or #id.
 *
 * Everything here avoids malloc and stdio, except hak_stats_print and the
 * glibc-compatible entry points (called by the program). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stats.h"
#include "options.h"
#include "os.h"

hak_global_stats_t hak_gstats;

/* The exit report goes to a duplicate of stderr taken at start-up: many
 * programs (coreutils, xz) close stderr in an atexit handler, which runs
 * before this library's destructor. */
static int report_fd = 2;
int hak_stats_report_fd(void) { return report_fd; }

/* The name threads have unless renamed (the process's, inherited by every
 * thread it creates), two words of a char[16]; read at start-up. */
static uint64_t default_name[2];


/* ------------------------------------------------------------------ names */

void hak_stats_name_pack(const char *s, uint64_t w[2])
{
  char b[16] = { 0 };
  for (size_t i = 0; i < 15 && s[i] && s[i] != '\n'; i++) b[i] = s[i];
  memcpy(w, b, 16);
}

void hak_stats_name_unpack(const uint64_t w[2], char out[16])
{
  memcpy(out, w, 16);
  out[15] = 0;
}

/* The calling thread's name (prctl: no allocation). */
static void self_name(uint64_t w[2])
{
  char b[17] = { 0 };
  int saved = errno;
  if (prctl(PR_GET_NAME, b, 0, 0, 0) != 0) b[0] = 0;
  errno = saved;
  hak_stats_name_pack(b, w);
}

bool hak_stats_name_is_set(const uint64_t w[2])
{
  return (w[0] | w[1]) != 0 && (w[0] != default_name[0] || w[1] != default_name[1]);
}

/* Names of exited threads, by heap id: insert-only, lock-free (a slot is
 * claimed by a CAS on its id, then its name is stored; a reader that sees
 * the id before the name falls back to the thread number).  When full,
 * further names are dropped. */
#define NAME_SLOTS 1024
static struct {
  _Atomic(uint32_t) id;
  _Atomic(uint64_t) name[2];
  _Atomic(int32_t) tid;
} names[NAME_SLOTS];


static void names_put(uint32_t id, const uint64_t w[2], int32_t tid)
{
  unsigned i = hak_id_hash(id, 10);
  for (unsigned n = 0; n < NAME_SLOTS; n++, i = (i + 1) % NAME_SLOTS) {
    uint32_t cur = atomic_load_explicit(&names[i].id, memory_order_relaxed);
    if (cur == 0 && atomic_compare_exchange_strong_explicit(&names[i].id, &cur, id, memory_order_relaxed,
                                                            memory_order_relaxed)) {
      atomic_store_explicit(&names[i].tid, tid, memory_order_relaxed);
      atomic_store_explicit(&names[i].name[0], w[0], memory_order_relaxed);
      atomic_store_explicit(&names[i].name[1], w[1], memory_order_relaxed);
      return;
    }
    if (cur == id) return;
  }
}


/* The name and thread number of exited heap id, as folded at its exit;
 * false (*tid and w untouched) if none was kept. */
bool hak_stats_name_find(uint32_t id, int32_t *tid, uint64_t w[2])
{
  unsigned i = hak_id_hash(id, 10);
  for (unsigned n = 0; n < NAME_SLOTS && id != 0; n++, i = (i + 1) % NAME_SLOTS) {
    uint32_t cur = atomic_load_explicit(&names[i].id, memory_order_relaxed);
    if (cur == 0) break;
    if (cur != id) continue;
    *tid = atomic_load_explicit(&names[i].tid, memory_order_relaxed);
    w[0] = atomic_load_explicit(&names[i].name[0], memory_order_relaxed);
    w[1] = atomic_load_explicit(&names[i].name[1], memory_order_relaxed);
    return true;
  }
  return false;
}

/* ------------------------------------------------------------- heap start */

static _Atomic(uint32_t) next_heap_id;

void hak_stats_heap_start(hak_heap_t *h)
{
  uint32_t id;
  do {
    id = (atomic_fetch_add_explicit(&next_heap_id, 1, memory_order_relaxed) + 1) & 0x7fffffffu;
  } while (id == 0);
  atomic_store_explicit(&h->id, id, memory_order_relaxed);
  if (hak_opt.stats < 2) return;
  uint64_t w[2];
  self_name(w);
  atomic_store_explicit(&h->tid, (int32_t)hak_os_tid(), memory_order_relaxed);
  atomic_store_explicit(&h->name[0], w[0], memory_order_relaxed);
  atomic_store_explicit(&h->name[1], w[1], memory_order_relaxed);
}

void hak_stats_init(void)
{
  if (!hak_opt.stats) return;
  int saved = errno;
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
  if (fd >= 0) report_fd = fd;
  errno = saved;
  char b[32];
  if (hak_os_read_file("/proc/self/comm", b, sizeof b) > 0) hak_stats_name_pack(b, default_name);
}

/* ------------------------------------------------------ remote-free matrix */

/* Folded rows of exited threads, by (freer id, owner id): insert-only,
 * lock-free (a slot is claimed by a CAS on its key, then counted with
 * fetch_add).  Id 0 means unknown (a thread without a live heap, a full
 * table): reported as "other".  Pairs that find no slot go to `lost`. */
#define PAIR_SLOTS 2048
static struct {
  _Atomic(uint64_t) key;   /* 1 << 63 | freer << 32 | owner, 0: free slot */
  hak_counter_t count;
} pairs[PAIR_SLOTS];
static hak_counter_t pairs_lost;

static uint64_t pair_key(uint32_t freer, uint32_t owner) { return 1ull << 63 | (uint64_t)freer << 32 | owner; }

static void pairs_add(uint32_t freer, uint32_t owner, uint64_t n)
{
  uint64_t key = pair_key(freer, owner);
  unsigned i = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 53);  /* 11 bits */
  for (unsigned k = 0; k < PAIR_SLOTS; k++, i = (i + 1) % PAIR_SLOTS) {
    uint64_t cur = atomic_load_explicit(&pairs[i].key, memory_order_relaxed);
    if (cur == 0 && !atomic_compare_exchange_strong_explicit(&pairs[i].key, &cur, key, memory_order_relaxed,
                                                             memory_order_relaxed)) {
      /* lost the slot to another pair (or the same one): cur is the winner's */
    }
    if (cur == 0 || cur == key) {
      hak_gcount(&pairs[i].count, n);
      return;
    }
  }
  hak_gcount(&pairs_lost, n);
}

void hak_stats_count_trail(hak_heap_t *h, uint64_t bytes, bool freed)
{
  if (freed) HAK_COUNT(h, trail_out, bytes);
  else HAK_COUNT(h, trail_in, bytes);
}

void hak_stats_count_remote(hak_heap_t *h, uint32_t owner)
{
  if (h->state != HAK_HEAP_LIVE) {  /* no table of its own: rare (exiting threads) */
    pairs_add(0, owner, 1);
    return;
  }
  hak_remote_row_t *r = &h->rrow;
  unsigned i = hak_id_hash(owner, 4);
  for (unsigned n = 0; owner != 0 && n < HAK_RROW_SLOTS; n++, i = (i + 1) % HAK_RROW_SLOTS) {
    uint32_t cur = atomic_load_explicit(&r->slot[i].owner, memory_order_relaxed);
    if (cur == owner) {
      hak_count(&r->slot[i].count, 1);
      return;
    }
    if (cur == 0) {
      atomic_store_explicit(&r->slot[i].count, 1, memory_order_relaxed);
      /* release: a reader that sees the owner sees the count */
      atomic_store_explicit(&r->slot[i].owner, owner, memory_order_release);
      return;
    }
  }
  hak_count(&r->overflow, 1);
}

/* Calls f(freer, owner, count, ctx) for every remote-free count: running
 * threads' rows, then the folded ones. */
/* Call f for every folded (freer, owner) pair, and once with (0, 0) for
 * the pairs that found no slot. */
void hak_stats_for_each_folded(hak_pair_fn f, void *ctx)
{
  for (unsigned i = 0; i < PAIR_SLOTS; i++) {
    uint64_t key = atomic_load_explicit(&pairs[i].key, memory_order_relaxed);
    uint64_t n = hak_counter_read(&pairs[i].count);
    if (key != 0 && n != 0) f((uint32_t)(key >> 32) & 0x7fffffffu, (uint32_t)key, n, ctx);
  }
  uint64_t n = hak_counter_read(&pairs_lost);
  if (n != 0) f(0, 0, n, ctx);
}

/* Thread exit: the heap's row into the folded table, its name into names. */
static void fold_remote(hak_heap_t *h)
{
  uint32_t id = atomic_load_explicit(&h->id, memory_order_relaxed);
  hak_remote_row_t *r = &h->rrow;
  for (unsigned i = 0; i < HAK_RROW_SLOTS; i++) {
    uint32_t owner = atomic_load_explicit(&r->slot[i].owner, memory_order_relaxed);
    if (owner == 0) continue;
    pairs_add(id, owner, hak_counter_read(&r->slot[i].count));
    atomic_store_explicit(&r->slot[i].owner, 0, memory_order_relaxed);
    atomic_store_explicit(&r->slot[i].count, 0, memory_order_relaxed);
  }
  if (hak_counter_read(&r->overflow) != 0) pairs_add(id, 0, hak_counter_read(&r->overflow));
  atomic_store_explicit(&r->overflow, 0, memory_order_relaxed);
  if (hak_opt.stats < 2) return;
  uint64_t w[2];
  self_name(w);  /* on the exiting thread itself */
  int32_t tid = atomic_load_explicit(&h->tid, memory_order_relaxed);
  if (hak_stats_name_is_set(w) || tid == getpid()) names_put(id, w, tid);
}

/* Folds begun and ended (a sequence lock with any number of writers, whom
 * nothing else orders): a sum that began with the two equal and ends with
 * fold_begun unchanged saw no fold.  The release fence after the begin
 * pairs with the reader's acquire fence before its second look: a reader
 * that read any count a fold moved then sees that fold begun. */
static _Atomic(uint64_t) fold_begun, fold_ended;

#define SUM_WAIT_MS 100  /* how long a reader waits for folds under way */

uint64_t hak_stats_sum_begin(void)
{
  uint64_t deadline = 0;
  for (;;) {
    uint64_t ended = atomic_load_explicit(&fold_ended, memory_order_acquire);
    uint64_t begun = atomic_load_explicit(&fold_begun, memory_order_acquire);
    if (begun == ended) return begun;
    /* A folding thread may wait for a CPU for a scheduler tick or more. */
    if (deadline == 0) deadline = hak_os_now_ms() + SUM_WAIT_MS;
    else if (hak_os_now_ms() > deadline) return begun;
    sched_yield();
  }
}

bool hak_stats_sum_again(uint64_t token)
{
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&fold_begun, memory_order_relaxed) != token;
}

/* Thread exit: move the heap's counts into the totals and zero them. */
void hak_stats_fold(hak_heap_t *h)
{
  atomic_fetch_add_explicit(&fold_begun, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  hak_counter_t *c = (hak_counter_t *)&h->stats, *g = (hak_counter_t *)&hak_gstats.folded;
  for (size_t i = 0; i < sizeof h->stats / sizeof *c; i++) {
    uint64_t v = hak_counter_read(&c[i]);
    if (v != 0) hak_gcount(&g[i], v);
    atomic_store_explicit(&c[i], 0, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&fold_ended, 1, memory_order_release);
  fold_remote(h);
}

