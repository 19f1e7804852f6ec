/* Counting: per-heap counters and the process totals (stats.c). */
#ifndef HAKMEM_STATS_H
#define HAKMEM_STATS_H

#include "options.h"

static inline void hak_count(hak_counter_t *c, uint64_t n)
{
  if (HAK_UNLIKELY(hak_opt.stats))
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

extern HAK_HIDDEN hak_global_stats_t hak_gstats;
static inline void hak_gcount(_Atomic(uint64_t) *c, uint64_t n)
{
  atomic_fetch_add_explicit(c, n, memory_order_relaxed);  /* statistics only */
}

/* Count n on counter `field` (of hak_heap_stats_t) of heap h, by h's
 * thread, or on the process totals when h is not live (a thread whose
 * heap is gone, or a heap made for one block): the one place that
 * chooses.  Nothing with the statistics off. */
#define HAK_COUNT(h, field, n) hak_count_at((h), offsetof(hak_heap_stats_t, field), (n))
static inline void hak_count_at(hak_heap_t *h, size_t offset, uint64_t n)
{
  if (HAK_LIKELY(!hak_opt.stats)) return;
  if (h->state == HAK_HEAP_LIVE) hak_count((hak_counter_t *)((char *)&h->stats + offset), n);
  else hak_gcount((hak_counter_t *)((char *)&hak_gstats.folded + offset), n);
}
void hak_stats_fold(hak_heap_t *h);        /* thread exit: into the totals */
/* A sum over the heaps' counters and the folded totals counts a heap that
 * folds meanwhile twice (its counters read before the fold, the totals
 * after).  hak_stats_sum_begin returns a token once no fold is under way;
 * after the sum, hak_stats_sum_again says whether one ran meanwhile (sum
 * again).  A reader gives up waiting after a while (a fork child whose
 * folding thread is gone) and takes the sum as it is. */
uint64_t hak_stats_sum_begin(void);
bool hak_stats_sum_again(uint64_t token);
void hak_stats_heap_start(hak_heap_t *h);  /* a heap starts serving a thread */
void hak_stats_init(void);   /* after options: keep a descriptor for the report */
/* HAKMEM_STATS=2, a free by heap h (maybe not live) of a block whose slab or
 * large mapping owner_id allocated: the remote-free path only. */
void hak_stats_count_remote(hak_heap_t *h, uint32_t owner_id);
/* HAKMEM_STATS: a trailed block's bytes beyond its usable size, handed out
 * (freed false) or returned, counted on the calling thread's heap h, so
 * that live_bytes is the sum of the live blocks' usable sizes. */
void  hak_stats_count_trail(hak_heap_t *h, uint64_t bytes, bool freed);

/* A counter's value (any thread; relaxed: statistics). */
static inline uint64_t hak_counter_read(const hak_counter_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }
/* A hash of a heap id to `bits` bits, for the small open-addressing tables. */
static inline unsigned hak_id_hash(uint32_t id, unsigned bits) { return (id * 0x9e3779b1u) >> (32 - bits); }

/* For the report (stats_report.c). */
typedef void (*hak_pair_fn)(uint32_t freer, uint32_t owner, uint64_t n, void *ctx);
void hak_stats_for_each_folded(hak_pair_fn f, void *ctx);  /* exited threads' (freer, owner) counts */
int hak_stats_report_fd(void);       /* the exit report's descriptor */
void hak_stats_name_pack(const char *s, uint64_t w[2]);    /* a thread name, two words of a char[16] */
void hak_stats_name_unpack(const uint64_t w[2], char out[16]);
bool hak_stats_name_is_set(const uint64_t w[2]);            /* given, not the process's default */
bool hak_stats_name_find(uint32_t id, int32_t *tid, uint64_t w[2]);  /* an exited heap's name */

#endif /* HAKMEM_STATS_H */
