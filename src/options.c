/* HAKMEM_* environment options: one table, read once at initialisation
 * without allocating (getenv does not allocate; messages are written with
 * write(2) from a stack buffer).
 *
 * Each option has a name, a field of hak_opt, a unit, a default and a
 * range.  A value is a plain decimal number (no sign, no spaces, no
 * suffix); an empty value counts as unset.  A value that does not parse,
 * overflows or is out of range is reported once on stderr:
 *   hakmem: ignoring HAKMEM_X=<value>: <why>; using <default>
 * and the default is kept.  HAKMEM_VERBOSE=1 prints the options in force at
 * start-up, one line each; HAKMEM_VERBOSE=2 prints this table as the
 * markdown table of docs/tuning.md (tests/unit/readme_options.sh checks that
 * the document holds exactly that table). */
#include <stdlib.h>

#include "options.h"
#include "fmt.h"
#include "size_class.h"

/* The options.  X(field, name, unit, shift, default, min, max, meaning):
 * hak_opt.field = value << shift (value in unit; KiB options are kept in
 * bytes).  default/min/max are in unit.  The meaning is one markdown
 * table cell (no '|'). */
#define HAK_OPTIONS(X)                                                                                    \
  X(stats, "HAKMEM_STATS", "", 0, 0, 0, 2,                                                                 \
    "`1`: count blocks per thread (exact totals, exited threads included) and at exit print "             \
    "`hakmem: allocs=N frees=N remote_frees=N live_bytes=N ...` on stderr; `2`: also the per-class "      \
    "table, SuperSlab and large-block counters, peak RSS and the remote-free matrix (docs/statistics.md). "\
    "At `0` the block counts of `hak_stats_get` stay 0 (mapping counters are always kept): counting "     \
    "costs two counter updates per malloc+free")                                                          \
  X(verbose, "HAKMEM_VERBOSE", "", 0, 0, 0, 2,                                                             \
    "`1`: print the options in force at start-up on stderr, one line each; `2`: print this table")        \
  X(secure, "HAKMEM_SECURE", "", 0, 0, 0, 1,                                                               \
    "`1`: the misuse checks that cost (docs/hardening.md): small blocks get a checked trailer and "      \
    "are zeroed when freed and checked zero when reused; freed large mappings become inaccessible and "   \
    "reused ones are zeroed, without huge pages")                                                         \
  X(purge_delay_ms, "HAKMEM_PURGE_DELAY_MS", "ms", 0, 50, 0, 3600000,                                      \
    "free pages stay committed this long (SuperSlab units: one to two times it, up to 16 times in a "      \
    "heap that faults its purged units back in) before `MADV_DONTNEED` "                                  \
    "(SuperSlab units and cached large mappings)")                                                        \
  X(purge_threshold, "HAKMEM_PURGE_THRESHOLD_KB", "KiB", 10, 16384, 0, 1073741824,                         \
    "... unless a heap holds more free pages than this: then after a quarter of the delay")               \
  X(ss_reserve, "HAKMEM_SS_RESERVE", "", 0, 1, 0, 1024, "empty SuperSlabs (2 MiB) each heap keeps")       \
  X(ss_cache, "HAKMEM_SS_CACHE", "", 0, 16, 0, 65536,                                                      \
    "empty (purged) SuperSlabs kept mapped for reuse by any thread instead of unmapped")                  \
  X(parked_heaps, "HAKMEM_PARKED_HEAPS", "", 0, 8, 0, 4096,                                              \
    "heaps of exited threads kept whole (SuperSlabs, slabs, free pages) for the next threads to start, "  \
    "each for at most the purge delay (with the purge thread, `HAKMEM_CACHE_DELAY_MS`; without it, free " \
    "pages beyond 8 MiB go back at once); `0`: a thread's SuperSlabs are handed to the "                 \
    "living threads when it exits")                                                                      \
  X(retire_batch, "HAKMEM_RETIRE_BATCH", "", 0, 16, 1, 65536,                                              \
    "regions unmapped per RCU grace period")                                                              \
  X(large_cache, "HAKMEM_LARGE_CACHE_KB", "KiB", 10, 65536, 0, 1073741824,                                 \
    "committed pages of freed large mappings kept for reuse (128 mappings at most, registered; above a "  \
    "quarter of this, at most half the large bytes still live, up to all of this); with the page "       \
    "arenas, their free pages count too, up to all of this; with the purge thread, the two may also "    \
    "keep what the live large bytes leave of their peak over the last one to two seconds; pages idle "   \
    "past the purge delay are given back (`HAKMEM_CACHE_DELAY_MS` while the program takes them)")        \
  X(large_arena, "HAKMEM_LARGE_ARENA", "", 0, 1, 0, 1,                                                      \
    "`1`: once the program reuses large blocks (a large "                                                \
    "block freed, then another allocated), those up "                                                    \
    "to 8 MiB (aligned to at most 2 MiB) come from shared page arenas, split and merged by the page, so "   \
    "freed pages serve the next "                                                                       \
    "blocks of any size without a system call; `0`: every large block has its own mapping")               \
  X(hugepages, "HAKMEM_HUGEPAGES", "", 0, 0, 0, 1,                                                        \
    "`1`: large blocks of a program seen writing them whole get transparent huge pages "                 \
    "(`MADV_HUGEPAGE`: one fault maps 2 MiB); `0`: 4 KiB pages, committed with one system call a block " \
    "where the program writes its blocks whole.  Off by default: on a VM that reports free memory to "    \
    "its host (virtio-balloon free page reporting, which hands back free 2 MiB blocks) a fresh huge page " \
    "cost three times the 4 KiB pages it replaces (docs/tuning.md)")                                      \
  X(prof, "HAKMEM_PROF", "", 0, 0, 0, 1,                                                                   \
    "`1`: the sampling heap profiler (docs/profiler.md): call stacks of sampled blocks, written at exit " \
    "in the heap-profile format of `google-pprof` to `HAKMEM_PROF_FILE`, and the remote frees per "      \
    "allocation site to that file's `.remote`.  Sampled blocks of up to a page live in the profiler's 256 MiB reservation")              \
  X(prof_sample, "HAKMEM_PROF_SAMPLE", "bytes", 0, 524288, 1, 1099511627776,                               \
    "the profiler samples one block per this many bytes allocated, on average (random exponential "     \
    "intervals)")                                                                                         \
  X(prof_signal, "HAKMEM_PROF_SIGNAL", "", 0, 0, 0, 64,                                                    \
    "with the profiler: this signal (e.g. 12, SIGUSR2) writes the profile to `HAKMEM_PROF_FILE.N` "      \
    "(N = 1, 2, ...) from the signal handler, the program running on; `0`: none")                        \
  X(prof_leaks, "HAKMEM_PROF_LEAKS", "", 0, 0, 0, 1,                                                       \
    "with the profiler: at exit, list the allocation sites of sampled blocks still live on stderr, "     \
    "largest first, symbolised")                                                                              \
  X(purge_thread, "HAKMEM_PURGE_THREAD", "", 0, 1, 0, 1,                                                    \
    "`1`: once the process has mapped 32 MiB, taken back 4 empty SuperSlabs whose pages it had given "     \
    "back, or seen 64 threads exit, a thread (`hakmem-purge`, started lazily, asleep while "         \
    "nothing is due) gives back free pages that empty SuperSlabs and freed large mappings keep, after "    \
    "the purge delay, so they are reused meanwhile and still returned when the program goes idle, and "   \
    "reclaims the heaps of threads idle for the purge delay (the blocks other threads freed into them, "  \
    "their free pages), and waits out the RCU grace periods before regions are unmapped (a free then "    \
    "never sleeps in one); `0`: no thread, and those pages go back as they are freed")                     \
  X(cache_delay_ms, "HAKMEM_CACHE_DELAY_MS", "ms", 0, 250, 0, 1000,                                        \
    "with the purge thread: empty SuperSlabs keep their free pages while their cache is in use (a "       \
    "SuperSlab put in or taken out) and this long after it was last used, 10 s at most; freed large "    \
    "pages keep theirs this long after the program last took from their cache or arenas")                \
  X(idle_take, "HAKMEM_IDLE_TAKE", "", 0, 1, 0, 1,                                                         \
    "with the purge thread: `1`: a thread idle for two purge delays and blocked in the kernel outside "   \
    "hakmem (read from Linux's /proc) also has its thread cache and current slabs taken back, so the "   \
    "blocks other threads freed into them and the pages they pin are returned too; the thread's next "   \
    "call takes its heap back; `0`: those stay until the thread's next call")

#define HAK_OPT_INIT(field, name, unit, shift, def, min, max, doc) \
  .field = (__typeof__(((hak_options_t *)0)->field))((uint64_t)(def) << (shift)),
hak_options_t hak_opt = { HAK_OPTIONS(HAK_OPT_INIT) };

/* The options that hold a path.  S(field, name, default, meaning): the
 * value is copied into hak_opt.field (at most its size less one byte: a
 * longer one is reported and ignored); the default is the meaning of an
 * empty field, as the README shows it. */
#define HAK_STR_OPTIONS(S)                                                                                \
  S(prof_file, "HAKMEM_PROF_FILE", "`hakmem.PID.heap`",                                                    \
    "with the profiler: the profile written at exit (a fork child writing to a file named here writes "  \
    "to `FILE.PID`)")

typedef struct hak_str_option_def {
  const char *name;
  char *field;
  size_t size;
  const char *def, *doc;
} hak_str_option_def_t;

#define HAK_STR_OPT_DEF(f, name, def, doc) { name, hak_opt.f, sizeof hak_opt.f, def, doc },
static const hak_str_option_def_t str_options[] = { HAK_STR_OPTIONS(HAK_STR_OPT_DEF) };
#define N_STR_OPTIONS (sizeof str_options / sizeof *str_options)

/* hak_malloc's fast path serves n below it: every class without a trailer
 * (HAK_UNTRAILED_MAX + 1) once initialised, 0 before (the first malloc
 * initialises), in secure mode and with statistics (options.h,
 * hak_fast_on): set with the options. */
_Alignas(HAK_CACHE_LINE) size_t hak_fast_limit = 0;  /* a line that only the options write (hak_keys_t) */

/* One option: where it lives and what it may be.  Immutable. */
typedef struct hak_option_def {
  const char *name;
  void *field;
  uint8_t size;       /* of the field: 1, 4 or 8 bytes */
  uint8_t shift;      /* field = value << shift */
  const char *unit;
  uint64_t def, min, max;
  const char *doc;
} hak_option_def_t;

#define HAK_OPT_DEF(f, name, unit, shift, def, min, max, doc) \
  { name, &hak_opt.f, sizeof hak_opt.f, shift, unit, def, min, max, doc },
static const hak_option_def_t options[] = { HAK_OPTIONS(HAK_OPT_DEF) };
#define N_OPTIONS (sizeof options / sizeof *options)

_Static_assert(sizeof(size_t) == 8, "KiB options are stored in 64-bit fields");

static void store(const hak_option_def_t *o, uint64_t v)
{
  v <<= o->shift;
  switch (o->size) {
  case 1: *(uint8_t *)o->field = (uint8_t)v; break;
  case 4: *(uint32_t *)o->field = (uint32_t)v; break;
  default: *(uint64_t *)o->field = v; break;
  }
}

static uint64_t load(const hak_option_def_t *o)
{
  uint64_t v;
  switch (o->size) {
  case 1: v = *(const uint8_t *)o->field; break;
  case 4: v = *(const uint32_t *)o->field; break;
  default: v = *(const uint64_t *)o->field; break;
  }
  return v >> o->shift;
}

/* Parse a plain decimal number; NULL on success, else why not. */
static const char *parse_u64(const char *s, uint64_t *out)
{
  if (*s < '0' || *s > '9') return "not a decimal number";
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return "too large";
    v = v * 10 + d;
  }
  if (*s != 0) return "trailing characters after the number";
  *out = v;
  return NULL;
}

/* The value as given, at most 40 characters, control characters as '?'. */
static void out_value(hak_out_t *o, const char *s)
{
  char buf[48];
  size_t n = 0;
  for (; *s && n < 40; s++) buf[n++] = (unsigned char)*s < 32 || *s == 127 ? '?' : *s;
  if (*s) { buf[n++] = '.'; buf[n++] = '.'; buf[n++] = '.'; }
  buf[n] = 0;
  hak_out_str(o, buf);
}

static void out_unit(hak_out_t *o, const hak_option_def_t *d)
{
  if (*d->unit == 0) return;
  hak_out_str(o, " ");
  hak_out_str(o, d->unit);
}

static void print_range(hak_out_t *o, const hak_option_def_t *d)
{
  hak_out_u64(o, d->min, 0);
  hak_out_str(o, "..");
  hak_out_u64(o, d->max, 0);
  out_unit(o, d);
}

static void print_verbose(hak_out_t *o, const bool *from_env)
{
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const hak_option_def_t *d = &options[i];
    hak_out_str(o, "hakmem: option ");
    hak_out_str(o, d->name);
    hak_out_str(o, "=");
    hak_out_u64(o, load(d), 0);
    out_unit(o, d);
    hak_out_str(o, from_env[i] ? " (from the environment; default " : " (default; ");
    if (from_env[i]) { hak_out_u64(o, d->def, 0); hak_out_str(o, ", "); }
    hak_out_str(o, "range ");
    print_range(o, d);
    hak_out_str(o, ")\n");
  }
  for (size_t i = 0; i < N_STR_OPTIONS; i++) {
    const hak_str_option_def_t *d = &str_options[i];
    hak_out_str(o, "hakmem: option ");
    hak_out_str(o, d->name);
    hak_out_str(o, "=");
    hak_out_str(o, d->field);
    hak_out_str(o, *d->field ? " (from the environment)\n" : " (default)\n");
  }
}

static void print_markdown(hak_out_t *o)
{
  hak_out_str(o, "| variable | default | range | meaning |\n|---|---|---|---|\n");
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const hak_option_def_t *d = &options[i];
    hak_out_str(o, "| `");
    hak_out_str(o, d->name);
    hak_out_str(o, "` | ");
    hak_out_u64(o, d->def, 0);
    hak_out_str(o, " | ");
    print_range(o, d);
    hak_out_str(o, " | ");
    hak_out_str(o, d->doc);
    hak_out_str(o, " |\n");
  }
  for (size_t i = 0; i < N_STR_OPTIONS; i++) {
    const hak_str_option_def_t *d = &str_options[i];
    hak_out_str(o, "| `");
    hak_out_str(o, d->name);
    hak_out_str(o, "` | ");
    hak_out_str(o, d->def);
    hak_out_str(o, " | a path | ");
    hak_out_str(o, d->doc);
    hak_out_str(o, " |\n");
  }
}

/* The path options: copied whole or not at all. */
static void init_str_options(hak_out_t *o)
{
  for (size_t i = 0; i < N_STR_OPTIONS; i++) {
    const hak_str_option_def_t *d = &str_options[i];
    d->field[0] = 0;
    const char *s = getenv(d->name);
    if (s == NULL) continue;
    size_t n = 0;
    while (s[n] != 0 && n < d->size) n++;
    if (n < d->size) {
      for (size_t k = 0; k <= n; k++) d->field[k] = s[k];
      continue;
    }
    hak_out_str(o, "hakmem: ignoring ");
    hak_out_str(o, d->name);
    hak_out_str(o, "=");
    out_value(o, s);
    hak_out_str(o, ": longer than ");
    hak_out_u64(o, d->size - 1, 0);
    hak_out_str(o, " bytes; using the default\n");
    hak_out_flush(o);
  }
}

void hak_options_init(void)
{
  hak_out_t o = { .fd = 2 };
  bool from_env[N_OPTIONS] = { false };
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const hak_option_def_t *d = &options[i];
    store(d, d->def);
    const char *s = getenv(d->name);
    if (s == NULL || *s == 0) continue;
    uint64_t v = 0;
    const char *why = parse_u64(s, &v);
    if (why == NULL && (v < d->min || v > d->max)) why = "out of range";
    if (why == NULL) {
      store(d, v);
      from_env[i] = true;
      continue;
    }
    hak_out_str(&o, "hakmem: ignoring ");
    hak_out_str(&o, d->name);
    hak_out_str(&o, "=");
    out_value(&o, s);
    hak_out_str(&o, ": ");
    hak_out_str(&o, why);
    if (why[0] == 'o') { hak_out_str(&o, " "); print_range(&o, d); }
    hak_out_str(&o, "; using ");
    hak_out_u64(&o, d->def, 0);
    hak_out_str(&o, "\n");
    hak_out_flush(&o);
  }
  init_str_options(&o);
  if (hak_opt.verbose == 1) print_verbose(&o, from_env);
  if (hak_opt.verbose == 2) print_markdown(&o);
  hak_out_flush(&o);
  hak_fast_limit = hak_opt.secure || hak_opt.stats ? 0 : HAK_UNTRAILED_MAX + 1;
}
