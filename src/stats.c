/* Counters: per-thread in each heap (written only by its thread), folded into
 * the process totals when the thread exits, summed on demand, and printed at
 * exit with HAKMEM_STATS=1. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

hak_global_stats_t hak_gstats;

/* The exit report goes to a duplicate of stderr taken at start-up: many
 * programs (coreutils, xz) close stderr in an atexit handler, which runs
 * before this library's destructor. */
static int report_fd = 2;

void hak_stats_init(void)
{
  if (!hak_opt.stats) return;
  int saved = errno;
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
  if (fd >= 0) report_fd = fd;
  errno = saved;
}

static uint64_t rd(hak_counter_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

typedef struct {
  uint64_t allocs, frees, remote, in, out, large, foreign;
} heap_sum_t;

static heap_sum_t heap_sum(hak_heap_t *h)
{
  heap_sum_t s = {0};
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    uint64_t a = rd(&h->stats.allocs[c]), f = rd(&h->stats.frees[c]);
    s.allocs += a;
    s.frees += f;
    s.in += a * hak_class_size[c];
    s.out += f * hak_class_size[c];
  }
  s.large = rd(&h->stats.large_allocs);
  s.allocs += s.large;
  s.frees += rd(&h->stats.large_frees);
  s.in += rd(&h->stats.large_bytes_alloc);
  s.out += rd(&h->stats.large_bytes_free);
  s.remote = rd(&h->stats.remote_frees);
  s.foreign = rd(&h->stats.foreign_frees);
  return s;
}

/* Thread exit: move the heap's counts into the totals and zero them. */
void hak_stats_fold(hak_heap_t *h)
{
  heap_sum_t s = heap_sum(h);
  hak_gcount(&hak_gstats.allocs, s.allocs);
  hak_gcount(&hak_gstats.frees, s.frees);
  hak_gcount(&hak_gstats.remote_frees, s.remote);
  hak_gcount(&hak_gstats.live_bytes_in, s.in);
  hak_gcount(&hak_gstats.live_bytes_out, s.out);
  hak_gcount(&hak_gstats.large_allocs, s.large);
  hak_gcount(&hak_gstats.foreign_frees, s.foreign);
  hak_counter_t *c = (hak_counter_t *)&h->stats;
  for (size_t i = 0; i < sizeof h->stats / sizeof *c; i++) atomic_store_explicit(&c[i], 0, memory_order_relaxed);
}

void hak_stats_get(hak_stats_t *out)
{
  heap_sum_t t = {0};
  for (hak_heap_t *h = hak_heap_list(); h != NULL; h = h->all_next) {
    heap_sum_t s = heap_sum(h);
    t.allocs += s.allocs; t.frees += s.frees; t.remote += s.remote;
    t.in += s.in; t.out += s.out; t.large += s.large; t.foreign += s.foreign;
  }
  memset(out, 0, sizeof *out);
  out->allocs = t.allocs + rd(&hak_gstats.allocs);
  out->frees = t.frees + rd(&hak_gstats.frees);
  out->remote_frees = t.remote + rd(&hak_gstats.remote_frees);
  uint64_t in = t.in + rd(&hak_gstats.live_bytes_in), o = t.out + rd(&hak_gstats.live_bytes_out);
  out->live_bytes = in > o ? in - o : 0;
  out->large_allocs = t.large + rd(&hak_gstats.large_allocs);
  out->superslabs_mapped = rd(&hak_gstats.ss_mapped);
  out->superslabs_unmapped = rd(&hak_gstats.ss_unmapped);
  out->mapped_bytes = rd(&hak_gstats.mapped_bytes);
  out->heaps_abandoned = rd(&hak_gstats.heaps_abandoned);
  out->superslabs_adopted = rd(&hak_gstats.ss_adopted);
  out->foreign_frees = t.foreign + rd(&hak_gstats.foreign_frees);
}

static char *put_u64(char *p, const char *name, uint64_t v)
{
  char digits[24];
  int n = 0;
  do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v != 0);
  *p++ = ' ';
  while (*name) *p++ = *name++;
  *p++ = '=';
  while (n > 0) *p++ = digits[--n];
  return p;
}

/* One line on stderr, built without stdio or allocation. */
void hak_stats_print(void)
{
  hak_stats_t s;
  hak_stats_get(&s);
  char line[512], *p = line;
  memcpy(p, "hakmem:", 7);
  p += 7;
  p = put_u64(p, "allocs", s.allocs);
  p = put_u64(p, "frees", s.frees);
  p = put_u64(p, "remote_frees", s.remote_frees);
  p = put_u64(p, "live_bytes", s.live_bytes);
  p = put_u64(p, "large_allocs", s.large_allocs);
  p = put_u64(p, "foreign_frees", s.foreign_frees);
  p = put_u64(p, "superslabs_mapped", s.superslabs_mapped);
  p = put_u64(p, "superslabs_unmapped", s.superslabs_unmapped);
  p = put_u64(p, "mapped_kb", s.mapped_bytes >> 10);
  p = put_u64(p, "heaps_abandoned", s.heaps_abandoned);
  p = put_u64(p, "superslabs_adopted", s.superslabs_adopted);
  *p++ = '\n';
  size_t len = (size_t)(p - line);
  int saved = errno;
  if (write(report_fd, line, len) != (ssize_t)len && report_fd != 2) (void)!write(2, line, len);
  errno = saved;
}

__attribute__((destructor)) static void hak_stats_at_exit(void)
{
  if (atomic_load_explicit(&hak_init_state, memory_order_acquire) == 2 && hak_opt.stats) hak_stats_print();
}
