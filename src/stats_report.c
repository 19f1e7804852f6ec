/* The statistics' sums and reports: hak_stats_get, the exit report,
 * HAKMEM_STATS=2's tables and remote-free matrix, and glibc's inspection
 * calls (mallinfo2, malloc_info, malloc_stats) with hakmem's numbers.  The
 * counters they sum are stats.c's.  Everything here avoids malloc and
 * stdio, except hak_stats_print and the glibc-compatible entry points
 * (called by the program). */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats_report.h"
#include "fmt.h"
#include "os.h"
#include "size_class.h"
#include "options.h"
#include "stats.h"
#include "large.h"
#include "heap.h"
#include "purge.h"
#include "init.h"
#include "registry.h"
#include "superslab.h"
#include "xfer.h"
#include "hakmem.h"


/* Call f for every (freer, owner) pair counted: live heaps' rows, then the
 * folded table. */
static void for_each_pair(hak_pair_fn f, void *ctx)
{
  for (hak_heap_t *h = hak_heap_list(); h != NULL; h = h->all_next) {
    uint32_t id = atomic_load_explicit(&h->id, memory_order_relaxed);
    for (unsigned i = 0; i < HAK_RROW_SLOTS; i++) {
      uint32_t owner = atomic_load_explicit(&h->rrow.slot[i].owner, memory_order_acquire);
      uint64_t n = hak_counter_read(&h->rrow.slot[i].count);
      if (owner != 0 && n != 0) f(id, owner, n, ctx);
    }
    uint64_t n = hak_counter_read(&h->rrow.overflow);
    if (n != 0) f(id, 0, n, ctx);
  }
  hak_stats_for_each_folded(f, ctx);
}

/* The label of thread id: its name if it was given one, "main" for the
 * process's first thread, else "#id".  Running threads' names are read
 * again now (/proc/self/task/TID/comm). */
static void thread_label(uint32_t id, char out[24])
{
  uint64_t w[2] = { 0, 0 };
  int32_t tid = 0;
  for (hak_heap_t *h = hak_heap_list(); h != NULL && id != 0; h = h->all_next) {
    if (atomic_load_explicit(&h->id, memory_order_relaxed) != id || h->state != HAK_HEAP_LIVE) continue;
    tid = atomic_load_explicit(&h->tid, memory_order_relaxed);
    w[0] = atomic_load_explicit(&h->name[0], memory_order_relaxed);
    w[1] = atomic_load_explicit(&h->name[1], memory_order_relaxed);
    if (tid > 0) {
      hak_out_t path = { .fd = -1 };
      hak_out_str(&path, "/proc/self/task/");
      hak_out_u64(&path, (uint64_t)tid, 0);
      hak_out_str(&path, "/comm");
      path.buf[path.len] = 0;
      char b[32];
      if (hak_os_read_file(path.buf, b, sizeof b) > 0) hak_stats_name_pack(b, w);
    }
    break;
  }
  if (tid == 0) hak_stats_name_find(id, &tid, w);
  if (hak_stats_name_is_set(w)) {
    hak_stats_name_unpack(w, out);
    for (char *c = out; *c; c++)
      if (*c == ' ' || (unsigned char)*c < 32) *c = '_';  /* one word: the columns stay readable */
    return;
  }
  if (tid != 0 && tid == getpid()) {  /* now: a fork child's main thread too */
    strcpy(out, "main");
    return;
  }
  hak_out_t o = { .fd = -1 };
  hak_out_str(&o, "#");
  hak_out_u64(&o, id, 0);
  memcpy(out, o.buf, o.len);
  out[o.len] = 0;
}

/* ------------------------------------------------------------------- sums */

#define TOTALS_TRIES 100  /* sums begun again while threads fold; then the last is taken */

typedef struct {
  uint64_t allocs[HAK_NUM_CLASSES], frees[HAK_NUM_CLASSES], slabs[HAK_NUM_CLASSES];
  uint64_t remote, large_allocs, large_frees, large_in, large_out, foreign, trail_in, trail_out;
} totals_t;

static void add_stats(totals_t *t, const hak_heap_stats_t *s)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    t->allocs[c] += hak_counter_read(&s->allocs[c]);
    t->frees[c] += hak_counter_read(&s->frees[c]);
    t->slabs[c] += hak_counter_read(&s->slabs[c]);  /* deltas: the sum wraps back to the count */
  }
  t->remote += hak_counter_read(&s->remote_frees);
  t->large_allocs += hak_counter_read(&s->large_allocs);
  t->large_frees += hak_counter_read(&s->large_frees);
  t->large_in += hak_counter_read(&s->large_bytes_alloc);
  t->large_out += hak_counter_read(&s->large_bytes_free);
  t->foreign += hak_counter_read(&s->foreign_frees);
  t->trail_in += hak_counter_read(&s->trail_in);
  t->trail_out += hak_counter_read(&s->trail_out);
}

/* Every heap's counts and the folded ones, each block once: summed again
 * if a thread folded its heap meanwhile (hak_stats_sum_again). */
static void totals(totals_t *t)
{
  for (int tries = 0;; tries++) {
    uint64_t token = hak_stats_sum_begin();
    memset(t, 0, sizeof *t);
    for (hak_heap_t *h = hak_heap_list(); h != NULL; h = h->all_next) add_stats(t, &h->stats);
    add_stats(t, &hak_gstats.folded);
    if (!hak_stats_sum_again(token) || tries == TOTALS_TRIES) break;
  }
  /* A twin (size_class.h, hak_class_twin) counts as its class. */
  for (size_t c = HAK_NUM_SIZES; c < HAK_NUM_CLASSES; c++) {
    size_t b = hak_size_class(hak_class_size[c]);
    t->allocs[b] += t->allocs[c];
    t->frees[b] += t->frees[c];
    t->slabs[b] += t->slabs[c];
    t->allocs[c] = t->frees[c] = t->slabs[c] = 0;
  }
}

static uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* VmHWM of /proc/self/status, in bytes (0 if unreadable). */
static uint64_t peak_rss(void)
{
  char b[4096];
  if (hak_os_read_file("/proc/self/status", b, sizeof b) == 0) return 0;
  const char *p = strstr(b, "VmHWM:");
  if (p == NULL) return 0;
  p += 6;
  while (*p == ' ' || *p == '\t') p++;
  uint64_t kb = 0;
  for (; *p >= '0' && *p <= '9'; p++) kb = kb * 10 + (uint64_t)(*p - '0');
  return kb << 10;
}

void hak_stats_get(hak_stats_t *out)
{
  totals_t t;
  totals(&t);
  memset(out, 0, sizeof *out);
  uint64_t in = t.large_in, o = t.large_out;
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    out->allocs += t.allocs[c];
    out->frees += t.frees[c];
    in += t.allocs[c] * hak_class_size[c];
    o += t.frees[c] * hak_class_size[c];
  }
  out->allocs += t.large_allocs;
  out->frees += t.large_frees;
  out->remote_frees = t.remote;
  out->live_bytes = sub0(in - t.trail_in, o - t.trail_out);
  out->large_allocs = t.large_allocs;
  out->superslabs_mapped = hak_counter_read(&hak_gstats.ss_mapped);
  out->superslabs_unmapped = hak_counter_read(&hak_gstats.ss_unmapped);
  out->mapped_bytes = hak_counter_read(&hak_gstats.mapped_bytes);
  out->heaps_abandoned = hak_counter_read(&hak_gstats.heaps_abandoned);
  out->superslabs_adopted = hak_counter_read(&hak_gstats.ss_adopted);
  out->idle_reclaims = hak_counter_read(&hak_gstats.idle_reclaims);
  out->idle_takes = hak_counter_read(&hak_gstats.idle_takes);
  out->foreign_frees = t.foreign;
  out->large_frees = t.large_frees;
  out->large_live_bytes = sub0(t.large_in, t.large_out);
  out->large_cached_bytes = hak_stats_large_cached();
  out->superslabs_purged = hak_counter_read(&hak_gstats.ss_purged);
  out->purged_bytes = hak_counter_read(&hak_gstats.purged_bytes);
  out->refaulted_bytes = hak_counter_read(&hak_gstats.refaulted_bytes);
  out->peak_rss_bytes = peak_rss();
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) out->slabs += t.slabs[c];
}

size_t hak_stats_get_classes(hak_class_stats_t *out, size_t n)
{
  totals_t t;
  totals(&t);
  for (size_t c = 0; c < n && c < HAK_NUM_SIZES; c++) {
    out[c].block_size = hak_class_size[c];
    out[c].allocs = t.allocs[c];
    out[c].frees = t.frees[c];
    out[c].live_blocks = sub0(t.allocs[c], t.frees[c]);
    out[c].slabs = t.slabs[c];
  }
  return HAK_NUM_SIZES;
}

/* ----------------------------------------------------------------- report */

static void report_summary(hak_out_t *o, const hak_stats_t *s)
{
  hak_out_str(o, "hakmem:");
  hak_out_kv(o, "allocs", s->allocs);
  hak_out_kv(o, "frees", s->frees);
  hak_out_kv(o, "remote_frees", s->remote_frees);
  hak_out_kv(o, "live_bytes", s->live_bytes);
  hak_out_kv(o, "large_allocs", s->large_allocs);
  hak_out_kv(o, "foreign_frees", s->foreign_frees);
  hak_out_kv(o, "superslabs_mapped", s->superslabs_mapped);
  hak_out_kv(o, "superslabs_unmapped", s->superslabs_unmapped);
  hak_out_kv(o, "mapped_kb", s->mapped_bytes >> 10);
  hak_out_kv(o, "heaps_abandoned", s->heaps_abandoned);
  hak_out_kv(o, "superslabs_adopted", s->superslabs_adopted);
  hak_out_str(o, "\n");
}

static void report_classes(hak_out_t *o)
{
  hak_class_stats_t cs[HAK_NUM_SIZES];
  hak_stats_get_classes(cs, HAK_NUM_SIZES);
  hak_out_str(o, "hakmem: size classes (blocks; live = allocs - frees; slabs in use, abandoned ones included)\n");
  hak_out_str(o, "hakmem:   class    size        allocs         frees          live   slabs\n");
  for (size_t c = 0; c < HAK_NUM_SIZES; c++) {
    if ((cs[c].allocs | cs[c].frees | cs[c].slabs) == 0) continue;
    hak_out_str(o, "hakmem: ");
    hak_out_u64(o, c, 7);
    hak_out_u64(o, cs[c].block_size, 8);
    hak_out_u64(o, cs[c].allocs, 14);
    hak_out_u64(o, cs[c].frees, 14);
    hak_out_u64(o, cs[c].live_blocks, 14);
    hak_out_u64(o, cs[c].slabs, 8);
    hak_out_str(o, "\n");
  }
}

/* ---- the matrix: rank ids by total with small tables on the stack */

#define REPORT_TOP 8
#define RANK_SLOTS 256

typedef struct {
  uint32_t id[RANK_SLOTS];
  uint64_t n[RANK_SLOTS];
} rank_t;

typedef struct {
  rank_t rows, cols;
  uint32_t row_id[REPORT_TOP], col_id[REPORT_TOP];
  unsigned nrows, ncols;
  uint64_t m[REPORT_TOP + 1][REPORT_TOP + 1];  /* [REPORT_TOP]: other */
} matrix_t;

static void rank_add(rank_t *r, uint32_t id, uint64_t n)
{
  if (id == 0) return;  /* unknown: always "other" */
  unsigned i = hak_id_hash(id, 8);
  for (unsigned k = 0; k < RANK_SLOTS; k++, i = (i + 1) % RANK_SLOTS) {
    if (r->id[i] == id) { r->n[i] += n; return; }
    if (r->id[i] == 0) { r->id[i] = id; r->n[i] = n; return; }
  }
}

static unsigned rank_top(const rank_t *r, uint32_t *top)
{
  unsigned k = 0;
  bool used[RANK_SLOTS] = { false };
  for (; k < REPORT_TOP; k++) {
    int best = -1;
    for (unsigned i = 0; i < RANK_SLOTS; i++)
      if (r->id[i] != 0 && !used[i] && (best < 0 || r->n[i] > r->n[best] ||
                                        (r->n[i] == r->n[best] && r->id[i] < r->id[best])))
        best = (int)i;
    if (best < 0) break;
    used[best] = true;
    top[k] = r->id[best];
  }
  /* The busiest REPORT_TOP, shown in thread order (a stable layout). */
  for (unsigned i = 1; i < k; i++)
    for (unsigned j = i; j > 0 && top[j] < top[j - 1]; j--) {
      uint32_t x = top[j]; top[j] = top[j - 1]; top[j - 1] = x;
    }
  return k;
}

static void pair_rank(uint32_t freer, uint32_t owner, uint64_t n, void *ctx)
{
  matrix_t *m = ctx;
  rank_add(&m->rows, freer, n);
  rank_add(&m->cols, owner, n);
}

static unsigned index_of(const uint32_t *ids, unsigned k, uint32_t id)
{
  for (unsigned i = 0; i < k; i++)
    if (ids[i] == id && id != 0) return i;
  return REPORT_TOP;
}

static void pair_place(uint32_t freer, uint32_t owner, uint64_t n, void *ctx)
{
  matrix_t *m = ctx;
  m->m[index_of(m->row_id, m->nrows, freer)][index_of(m->col_id, m->ncols, owner)] += n;
}

static void report_matrix(hak_out_t *o)
{
  static const char *title =
      "hakmem: remote frees (row: freeing thread; column: thread that allocated the block's slab)\n";
  if (hak_opt.stats < 2) {
    hak_out_str(o, "hakmem: remote-free matrix: not counted (needs HAKMEM_STATS=2 at start-up)\n");
    return;
  }
  matrix_t m;
  memset(&m, 0, sizeof m);
  for_each_pair(pair_rank, &m);
  m.nrows = rank_top(&m.rows, m.row_id);
  m.ncols = rank_top(&m.cols, m.col_id);
  for_each_pair(pair_place, &m);

  uint64_t row_sum[REPORT_TOP + 1] = { 0 }, col_sum[REPORT_TOP + 1] = { 0 }, all = 0;
  for (unsigned r = 0; r <= REPORT_TOP; r++)
    for (unsigned c = 0; c <= REPORT_TOP; c++) {
      row_sum[r] += m.m[r][c];
      col_sum[c] += m.m[r][c];
      all += m.m[r][c];
    }
  char col_label[REPORT_TOP][24];
  int width[REPORT_TOP + 2];
  for (unsigned c = 0; c < m.ncols; c++) {
    thread_label(m.col_id[c], col_label[c]);
    int w = (int)strlen(col_label[c]) + 2;
    width[c] = w < 10 ? 10 : w;
  }
  hak_out_str(o, title);
  hak_out_str(o, "hakmem:   ");
  hak_out_strw(o, "freed by \\ owner", 18);
  for (unsigned c = 0; c < m.ncols; c++) hak_out_strw(o, col_label[c], -width[c]);
  if (col_sum[REPORT_TOP] != 0) hak_out_strw(o, "other", -10);
  hak_out_strw(o, "total", -12);
  hak_out_str(o, "\n");
  for (unsigned r = 0; r <= m.nrows; r++) {
    unsigned ri = r < m.nrows ? r : REPORT_TOP;
    if (ri == REPORT_TOP && row_sum[REPORT_TOP] == 0) continue;
    char label[24];
    if (ri == REPORT_TOP) strcpy(label, "other");
    else thread_label(m.row_id[r], label);
    hak_out_str(o, "hakmem:   ");
    hak_out_strw(o, label, 18);
    for (unsigned c = 0; c < m.ncols; c++) hak_out_u64(o, m.m[ri][c], width[c]);
    if (col_sum[REPORT_TOP] != 0) hak_out_u64(o, m.m[ri][REPORT_TOP], 10);
    hak_out_u64(o, row_sum[ri], 12);
    hak_out_str(o, "\n");
  }
  hak_out_str(o, "hakmem:   ");
  hak_out_strw(o, "total", 18);
  for (unsigned c = 0; c < m.ncols; c++) hak_out_u64(o, col_sum[c], width[c]);
  if (col_sum[REPORT_TOP] != 0) hak_out_u64(o, col_sum[REPORT_TOP], 10);
  hak_out_u64(o, all, 12);
  hak_out_str(o, "\n");
}

/* f on every SuperSlab in the registry, under the RCU read lock (none is
 * unmapped meanwhile). */
static void walk_superslabs(void (*f)(hak_superslab_t *ss, void *ctx), void *ctx)
{
  hak_rcu_read_lock();
  hak_map_for_each_ss(f, ctx);
  hak_rcu_read_unlock();
}

/* Where the SuperSlabs' resident memory is (the "resident" line): the
 * pages the kernel has resident (mincore) of every SuperSlab in the
 * registry, split into the headers; the units of slabs that hold blocks
 * (blocks_kb: those blocks' bytes, handed out to the program or held
 * freed by a thread cache or a pending remote free: the rest of slabs_kb
 * is free space inside those slabs); and empty_kb, units of no slab or of
 * an empty one, which the purge policy gives back once idle (superslab.c).
 * Across that split, by owner: parked_kb, the SuperSlabs of heaps parked
 * by exited threads (heap.c), and unowned_kb, of none (abandoned, or in
 * the empty-SuperSlab cache); and per owner (the "resident heap" lines),
 * its SuperSlabs, their resident pages and of those the empty units', so
 * a heap holding committed units that another heap cannot use shows.
 * Read from what any thread may read (a slab's atomic used and class, the
 * size tables): a snapshot, while the owners work. */
#define PARKED_SEEN 64   /* parked heaps told apart (HAKMEM_PARKED_HEAPS is 8 by default) */
#define OWNERS_SEEN 32   /* owners told apart; the others are summed in `unseen` */
#define OWNERS_SHOWN 8   /* owner lines printed, largest first; then "others" */

typedef struct {
  hak_heap_t *heap;                /* NULL: no owner */
  uint64_t superslabs, pages, empty;
} owner_resident_t;

typedef struct {
  uint64_t pages, header, slab, empty, blocks;   /* pages; blocks in bytes */
  uint64_t parked, unowned;                      /* pages of SuperSlabs of parked heaps, of none */
  hak_heap_t *parked_heaps[PARKED_SEEN];
  size_t nparked;
  owner_resident_t owners[OWNERS_SEEN], unseen;
  size_t nowners;
} resident_t;

/* The entry of owner (NULL: none) in r; `unseen` once the table is full. */
static owner_resident_t *owner_entry(resident_t *r, hak_heap_t *owner)
{
  size_t i = 0;
  while (i < r->nowners && r->owners[i].heap != owner) i++;
  if (i == r->nowners) {
    if (i == OWNERS_SEEN) return &r->unseen;
    r->owners[i].heap = owner;
    r->nowners++;
  }
  return &r->owners[i];
}

static bool is_parked(const resident_t *r, const hak_heap_t *h)
{
  for (size_t i = 0; h != NULL && i < r->nparked; i++)
    if (r->parked_heaps[i] == h) return true;
  return false;
}

#define SS_PAGES (HAK_SS_SIZE / HAK_PAGE_SIZE)
#define UNIT_PAGES (HAK_UNIT_SIZE / HAK_PAGE_SIZE)
#define HEADER_PAGES (HAK_SS_HEADER_SIZE / HAK_PAGE_SIZE)

static void ss_resident(hak_superslab_t *ss, void *ctx)
{
  resident_t *r = ctx;
  unsigned char vec[SS_PAGES];
  if (!hak_os_residency(ss, HAK_SS_SIZE, vec)) return;
  uint64_t all = hak_os_count_resident(vec, 0, SS_PAGES);
  r->pages += all;
  hak_heap_t *owner = atomic_load_explicit(&ss->owner, memory_order_relaxed);
  if (owner == NULL) r->unowned += all;
  if (is_parked(r, owner)) r->parked += all;
  uint64_t empty_before = r->empty;
  r->header += hak_os_count_resident(vec, 0, HEADER_PAGES);
  for (unsigned u = 0; u < HAK_UNITS;) {
    size_t from = u == 0 ? HEADER_PAGES : (size_t)u * UNIT_PAGES;
    hak_slab_t *s = &ss->slabs[u];
    uint32_t used = hak_slab_used(s);
    size_t c = atomic_load_explicit(&s->stat_cls, memory_order_relaxed);
    unsigned span = used != 0 && c < HAK_NUM_CLASSES ? hak_class_span(c) : 1;
    if (span > HAK_UNITS - u) span = HAK_UNITS - u;
    uint64_t n = hak_os_count_resident(vec, from, (size_t)(u + span) * UNIT_PAGES);
    if (span > 1 || (used != 0 && c < HAK_NUM_CLASSES)) {
      r->slab += n;
      r->blocks += (uint64_t)used * hak_class_size[c];
    } else {
      r->empty += n;
    }
    u += span;
  }
  owner_resident_t *e = owner_entry(r, owner);
  e->superslabs++;
  e->pages += all;
  e->empty += r->empty - empty_before;
}

/* r's owners, most resident pages first (insertion: a few dozen; qsort
 * may allocate). */
static void sort_owners(resident_t *r)
{
  for (size_t i = 1; i < r->nowners; i++) {
    owner_resident_t e = r->owners[i];
    size_t j = i;
    for (; j > 0 && r->owners[j - 1].pages < e.pages; j--) r->owners[j] = r->owners[j - 1];
    r->owners[j] = e;
  }
}

static void report_owner(hak_out_t *o, const char *label, const char *kind, const owner_resident_t *e)
{
  uint64_t kb = HAK_PAGE_SIZE >> 10;
  hak_out_str(o, "hakmem: resident heap ");
  hak_out_str(o, label);
  hak_out_str(o, " ");
  hak_out_str(o, kind);
  hak_out_kv(o, "superslabs", e->superslabs);
  hak_out_kv(o, "resident_kb", e->pages * kb);
  hak_out_kv(o, "empty_kb", e->empty * kb);
  hak_out_str(o, "\n");
}

/* One line per owner, largest first: its thread's label ("#id" for a
 * parked heap: its last thread's), live, parked or none. */
static void report_owners(hak_out_t *o, resident_t *r)
{
  sort_owners(r);
  owner_resident_t others = r->unseen;
  for (size_t i = 0; i < r->nowners; i++) {
    const owner_resident_t *e = &r->owners[i];
    if (i >= OWNERS_SHOWN) {
      others.superslabs += e->superslabs;
      others.pages += e->pages;
      others.empty += e->empty;
      continue;
    }
    char label[24];
    if (e->heap == NULL) strcpy(label, "-");
    else thread_label(atomic_load_explicit(&e->heap->id, memory_order_relaxed), label);
    report_owner(o, label, e->heap == NULL ? "none" : is_parked(r, e->heap) ? "parked" : "live", e);
  }
  if (others.superslabs != 0) report_owner(o, "others", "-", &others);
}

static void report_resident(hak_out_t *o)
{
  resident_t r;
  memset(&r, 0, sizeof r);
  r.nparked = hak_heap_parked(r.parked_heaps, PARKED_SEEN);
  walk_superslabs(ss_resident, &r);
  uint64_t kb = HAK_PAGE_SIZE >> 10;
  hak_out_str(o, "hakmem: resident");
  hak_out_kv(o, "superslabs_kb", r.pages * kb);
  hak_out_kv(o, "headers_kb", r.header * kb);
  hak_out_kv(o, "slabs_kb", r.slab * kb);
  hak_out_kv(o, "blocks_kb", r.blocks >> 10);
  hak_out_kv(o, "empty_kb", r.empty * kb);
  hak_out_kv(o, "parked_kb", r.parked * kb);
  hak_out_kv(o, "unowned_kb", r.unowned * kb);
  hak_out_str(o, "\n");
  report_owners(o, &r);
}

static void report_details(hak_out_t *o, const hak_stats_t *s)
{
  report_classes(o);
  hak_out_str(o, "hakmem: large");
  hak_out_kv(o, "large_allocs", s->large_allocs);
  hak_out_kv(o, "large_frees", s->large_frees);
  hak_out_kv(o, "large_live", sub0(s->large_allocs, s->large_frees));
  hak_out_kv(o, "large_live_kb", s->large_live_bytes >> 10);
  hak_out_kv(o, "large_cached_kb", s->large_cached_bytes >> 10);
  hak_out_str(o, "\nhakmem: superslabs");
  hak_out_kv(o, "mapped", s->superslabs_mapped);
  hak_out_kv(o, "purged", s->superslabs_purged);
  hak_out_kv(o, "purged_kb", s->purged_bytes >> 10);
  hak_out_kv(o, "refaulted_kb", s->refaulted_bytes >> 10);
  hak_out_kv(o, "unmapped", s->superslabs_unmapped);
  hak_out_kv(o, "adopted", s->superslabs_adopted);
  hak_out_kv(o, "slabs", s->slabs);
  hak_out_str(o, "\nhakmem: memory");
  hak_out_kv(o, "mapped_kb", s->mapped_bytes >> 10);
  hak_out_kv(o, "peak_rss_kb", s->peak_rss_bytes >> 10);
  hak_out_kv(o, "remote_frees", s->remote_frees);
  hak_out_kv(o, "threads_exited", s->heaps_abandoned);
  hak_out_kv(o, "idle_reclaims", s->idle_reclaims);
  hak_out_kv(o, "idle_takes", s->idle_takes);
  hak_out_str(o, "\n");
  report_resident(o);
  report_matrix(o);
}

static void report(hak_out_t *o, bool details)
{
  hak_stats_t s;
  hak_stats_get(&s);
  report_summary(o, &s);
  if (details) report_details(o, &s);
  hak_out_flush(o);
}

void hak_stats_print(FILE *f)
{
  hak_init();
  hak_out_t o = { .fd = -1, .file = f };
  if (!hak_opt.stats)
    hak_out_str(&o, "hakmem: block counts are off (HAKMEM_STATS=1 or 2 at start-up counts them)\n");
  report(&o, true);
  fflush(f);
}

__attribute__((destructor)) static void hak_stats_at_exit(void)
{
  if (atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2 || !hak_opt.stats) return;
  hak_purge_stop();  /* its thread's memory is freed: the counts balance */
  hak_out_t o = { .fd = hak_stats_report_fd() };
  report(&o, hak_opt.stats >= 2);
}

/* ------------------------------------------------ glibc's inspection calls */

/* Exported by the preload library (preload.c), in glibc's formats with
 * hakmem's numbers.  mallinfo2's fields:
 *   arena     bytes mapped for SuperSlabs (cached empty ones included)
 *   ordblks   slabs in use (all classes; statistics off: slabs that hold
 *             a block, whose used count is not 0)
 *   smblks, fsmblks, usmblks   0 (no fastbins; usmblks is 0 in glibc too)
 *   hblks     large blocks live (each has its own mapping)
 *   hblkhd    bytes mapped for large blocks (live and cached)
 *   uordblks  bytes of live small blocks (block sizes): as in glibc, a
 *             block with a mapping of its own (hblks, hblkhd) is not in it
 *   fordblks  arena - uordblks (free blocks and free units of SuperSlabs)
 *   keepcost  committed bytes of freed large mappings (malloc_trim returns
 *             them)
 * malloc_stats' "in use bytes" and malloc_info's totals are the same live
 * blocks, large ones added where glibc adds its mmapped chunks.
 *
 * Where the live blocks come from.  With HAKMEM_STATS=1 or 2, from the
 * block counts (allocs - frees of each class, every thread's and the
 * exited threads' folded): exact once the threads are quiescent; a block
 * counts as free from the moment the program frees it.  With the
 * statistics off (the default) there are no block counts, and the figures
 * come from what the slabs count anyway (live_walk): every SuperSlab in the
 * registry, under the RCU read lock, each slab's used (blocks handed out
 * and not back on the slab's free list), less the blocks waiting on its
 * remote-free stack; then less the blocks the calling thread holds freed
 * (its thread cache and its held-back remote frees) and those in the
 * transfer cache.  What stays counted as live although the program freed
 * it: blocks in OTHER running threads' thread caches (at most some 512 KiB
 * a class and 4.8 MiB a thread, tcache.h; read only by their
 * thread, so not subtracted) and their held-back remote frees (32 runs a
 * thread), and blocks handed to a heap's delayed list.  None of these
 * outlives its thread: a thread's exit flushes them all, so the figure does
 * not grow with the number of threads that came and went.  Large blocks
 * are counted at their allocation in both modes.  A snapshot: the slabs'
 * counts are read while their owners work. */
typedef struct {
  uint64_t arena, slabs, large_live, large_mapped, small_live_bytes, small_live_blocks, cached, large_live_bytes;
} mallinfo_t;

/* Live blocks per class, statistics off (the comment above). */
typedef struct {
  uint64_t blocks[HAK_NUM_CLASSES];
  uint64_t slabs;
} live_walk_t;

static void ss_live(hak_superslab_t *ss, void *ctx)
{
  live_walk_t *w = ctx;
  for (unsigned u = 0; u < HAK_UNITS; u++) {
    /* Slab metadata is indexed by first unit; a unit inside a longer slab,
     * or in none, has used 0. */
    hak_slab_t *s = &ss->slabs[u];
    uint32_t used = hak_slab_used(s);
    if (used == 0) continue;
    w->slabs++;
    uint64_t waiting = atomic_load_explicit(&ss->remote_heads[u].head, memory_order_relaxed) >> HAK_RS_COUNT_SHIFT;
    size_t c = atomic_load_explicit(&s->stat_cls, memory_order_relaxed);
    if (c < HAK_NUM_CLASSES && waiting < used) w->blocks[c] += used - waiting;
  }
}

static void sub_blocks(live_walk_t *w, size_t c, uint64_t n) { w->blocks[c] = sub0(w->blocks[c], n); }

/* live_blocks of each size (twins counted as their class); returns the
 * slabs that hold a block. */
static uint64_t live_walk(hak_class_stats_t *cs)
{
  live_walk_t w;
  memset(&w, 0, sizeof w);
  walk_superslabs(ss_live, &w);
  hak_heap_t *h = hak_tls_heap;
  if (h->state == HAK_HEAP_LIVE) {  /* this thread's own: race-free */
    for (size_t c = 0; c < HAK_NUM_CLASSES; c++) sub_blocks(&w, c, hak_tcache_count(h, c));
    for (size_t i = 0; i < HAK_PEND_SLOTS; i++)
      if (h->pend[i].slab != NULL) sub_blocks(&w, h->pend[i].slab->cls, h->pend[i].n);
  }
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) sub_blocks(&w, c, hak_xfer_count(c));
  for (size_t c = 0; c < HAK_NUM_SIZES; c++) cs[c].live_blocks = 0;
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) cs[hak_size_class(hak_class_size[c])].live_blocks += w.blocks[c];
  return w.slabs;
}

static void get_mallinfo(mallinfo_t *m, hak_stats_t *s, hak_class_stats_t *cs)
{
  hak_stats_get(s);
  hak_stats_get_classes(cs, HAK_NUM_SIZES);
  memset(m, 0, sizeof *m);
  uint64_t ss = sub0(s->superslabs_mapped, s->superslabs_unmapped);
  m->arena = ss * HAK_SS_SIZE;
  m->slabs = s->slabs;
  m->large_live = sub0(s->large_allocs, s->large_frees);
  m->large_live_bytes = s->large_live_bytes;
  m->large_mapped = sub0(s->mapped_bytes, m->arena);
  if (!hak_opt.stats) {
    m->slabs = live_walk(cs);
    size_t n, kept_runs, kept = hak_heap_kept_bytes(&kept_runs);  /* freed blocks the live totals count */
    m->large_live_bytes = sub0(hak_large_live(&n), kept);
    m->large_live = sub0(n, kept_runs);
  }
  for (size_t c = 0; c < HAK_NUM_SIZES; c++) {
    m->small_live_blocks += cs[c].live_blocks;
    m->small_live_bytes += cs[c].live_blocks * cs[c].block_size;
  }
  if (m->small_live_bytes > m->arena) m->small_live_bytes = m->arena;
  m->cached = s->large_cached_bytes;
}

/* Everything the glibc-format calls print, taken once (hakmem initialised
 * first: a program may call them before its first malloc). */
typedef struct {
  hak_stats_t s;
  hak_class_stats_t cs[HAK_NUM_SIZES];
  mallinfo_t m;
} snapshot_t;

static void take_snapshot(snapshot_t *n)
{
  hak_init();
  get_mallinfo(&n->m, &n->s, n->cs);
}

size_t hak_stats_large_cached(void) { return hak_large_cached_bytes() + hak_heap_kept_bytes(NULL); }

void hak_stats_mallinfo2(struct mallinfo2 *out)
{
  snapshot_t n;
  take_snapshot(&n);
  memset(out, 0, sizeof *out);
  out->arena = n.m.arena;
  out->ordblks = n.m.slabs;
  out->hblks = n.m.large_live;
  out->hblkhd = n.m.large_mapped;
  out->uordblks = n.m.small_live_bytes;
  out->fordblks = n.m.arena - n.m.small_live_bytes;
  out->keepcost = n.m.cached;
}

static void xml_total(hak_out_t *o, const char *type, uint64_t count, uint64_t size)
{
  hak_out_str(o, "<total type=\"");
  hak_out_str(o, type);
  hak_out_str(o, "\" count=\"");
  hak_out_u64(o, count, 0);
  hak_out_str(o, "\" size=\"");
  hak_out_u64(o, size, 0);
  hak_out_str(o, "\"/>\n");
}

static void xml_size(hak_out_t *o, const char *elem, const char *type, uint64_t size)
{
  hak_out_str(o, "<");
  hak_out_str(o, elem);
  hak_out_str(o, " type=\"");
  hak_out_str(o, type);
  hak_out_str(o, "\" size=\"");
  hak_out_u64(o, size, 0);
  hak_out_str(o, "\"/>\n");
}

static void xml_attr(hak_out_t *o, const char *name, uint64_t v)
{
  hak_out_str(o, " ");
  hak_out_str(o, name);
  hak_out_str(o, "=\"");
  hak_out_u64(o, v, 0);
  hak_out_str(o, "\"");
}

/* glibc's layout: one <heap> (hakmem's totals over every thread), whose
 * <sizes> lists the live blocks of each size class (glibc lists free
 * chunks there); then a <hakmem .../> element with the summary counters. */
int hak_stats_malloc_info(int options, FILE *f)
{
  if (options != 0) return EINVAL;
  snapshot_t n;
  take_snapshot(&n);
  hak_out_t o = { .fd = -1, .file = f };
  hak_out_str(&o, "<malloc version=\"1\" allocator=\"hakmem\">\n<heap nr=\"0\">\n<sizes>\n");
  for (size_t c = 0; c < HAK_NUM_SIZES; c++) {
    if (n.cs[c].live_blocks == 0) continue;
    hak_out_str(&o, "  <size");
    xml_attr(&o, "from", c == 0 ? 1 : n.cs[c - 1].block_size + 1);
    xml_attr(&o, "to", n.cs[c].block_size);
    xml_attr(&o, "total", n.cs[c].live_blocks * n.cs[c].block_size);
    xml_attr(&o, "count", n.cs[c].live_blocks);
    hak_out_str(&o, "/>\n");
  }
  hak_out_str(&o, "</sizes>\n");
  xml_total(&o, "fast", 0, 0);
  xml_total(&o, "rest", n.m.small_live_blocks, n.m.small_live_bytes);
  xml_size(&o, "system", "current", n.m.arena);
  xml_size(&o, "system", "max", n.m.arena);
  xml_size(&o, "aspace", "total", n.m.arena);
  xml_size(&o, "aspace", "mprotect", n.m.arena);
  hak_out_str(&o, "</heap>\n");
  xml_total(&o, "fast", 0, 0);
  xml_total(&o, "rest", n.m.small_live_blocks, n.m.small_live_bytes);
  xml_total(&o, "mmap", n.m.large_live, n.m.large_mapped);
  xml_size(&o, "system", "current", n.s.mapped_bytes);
  xml_size(&o, "system", "max", n.s.mapped_bytes);
  xml_size(&o, "aspace", "total", n.s.mapped_bytes);
  xml_size(&o, "aspace", "mprotect", n.s.mapped_bytes);
  hak_out_str(&o, "<hakmem");
  xml_attr(&o, "stats", hak_opt.stats);
  xml_attr(&o, "allocs", n.s.allocs);
  xml_attr(&o, "frees", n.s.frees);
  xml_attr(&o, "remote_frees", n.s.remote_frees);
  xml_attr(&o, "live_bytes", n.s.live_bytes);
  xml_attr(&o, "large_allocs", n.s.large_allocs);
  xml_attr(&o, "large_frees", n.s.large_frees);
  xml_attr(&o, "large_cached_bytes", n.s.large_cached_bytes);
  xml_attr(&o, "superslabs_mapped", n.s.superslabs_mapped);
  xml_attr(&o, "superslabs_purged", n.s.superslabs_purged);
  xml_attr(&o, "superslabs_unmapped", n.s.superslabs_unmapped);
  xml_attr(&o, "slabs", n.s.slabs);
  xml_attr(&o, "mapped_bytes", n.s.mapped_bytes);
  xml_attr(&o, "peak_rss_bytes", n.s.peak_rss_bytes);
  hak_out_str(&o, "/>\n</malloc>\n");
  hak_out_flush(&o);
  return 0;
}

/* glibc's malloc_stats lines with hakmem's numbers, then the report. */
void hak_stats_malloc_stats(void)
{
  snapshot_t n;
  take_snapshot(&n);
  hak_out_t o = { .fd = -1, .file = stderr };
  static const char *label[] = { "system bytes     = ", "in use bytes     = " };
  hak_out_str(&o, "Arena 0 (hakmem: SuperSlabs of all threads):\n");
  hak_out_str(&o, label[0]); hak_out_u64(&o, n.m.arena, 10); hak_out_str(&o, "\n");
  hak_out_str(&o, label[1]); hak_out_u64(&o, n.m.small_live_bytes, 10); hak_out_str(&o, "\n");
  hak_out_str(&o, "Total (incl. mmap):\n");
  hak_out_str(&o, label[0]); hak_out_u64(&o, n.s.mapped_bytes, 10); hak_out_str(&o, "\n");
  hak_out_str(&o, label[1]); hak_out_u64(&o, n.m.small_live_bytes + n.m.large_live_bytes, 10); hak_out_str(&o, "\n");
  hak_out_str(&o, "max mmap regions = "); hak_out_u64(&o, n.m.large_live, 10); hak_out_str(&o, "\n");
  hak_out_str(&o, "max mmap bytes   = "); hak_out_u64(&o, n.m.large_mapped, 10); hak_out_str(&o, "\n");
  hak_out_flush(&o);
  hak_stats_print(stderr);
}
