/* unit_stats: the statistics API and the HAKMEM_STATS=2 exit report.
 *
 *   unit_stats            the checks below (ctest sets HAKMEM_STATS=2)
 *   unit_stats scenario   the named-thread scenario alone (run as a child)
 *
 * 1. Exact per-class counts (hak_stats_get_classes) and the new hak_stats_t
 *    fields for a known sequence on one thread; hak_stats_print's output.
 * 2. The exit report of a child running `scenario` with HAKMEM_STATS=2:
 *    named threads allocate, others free them (every thread joined before
 *    the next starts, so counts are exact); the remote-free matrix must
 *    name the threads (pthread_setname_np, set after the thread's first
 *    malloc: read again at exit) and hold the exact counts; the threads
 *    that exited keep their rows.  With HAKMEM_STATS=1 the report is the one
 *    summary line only; with HAKMEM_STATS unset, nothing.
 * 3. Snapshots while threads exit: a thread's exit folds its heap's counts
 *    into the process totals, and a snapshot taken meanwhile must count
 *    them once: allocs and frees never go down from one snapshot to the
 *    next while threads come and go.
 * stdio and pthreads use the C library's malloc here (hakmem serves only
 * hak_*), so the counts are the test's own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/child.h"
#include "support/clock.h"
#include "support/hak.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAX_CLASSES 64

static size_t class_of(const hak_class_stats_t *cs, size_t n, size_t size)
{
  for (size_t c = 0; c < n; c++)
    if (cs[c].block_size >= size) return c;
  return n;
}

/* ------------------------------------------------------------ 1. in process */

static void test_classes(void)
{
  ts_check_section("classes");
  hak_class_stats_t a[MAX_CLASSES], b[MAX_CLASSES];
  size_t n = hak_stats_get_classes(a, MAX_CLASSES);
  REQUIRE(n > 8 && n <= MAX_CLASSES, "hak_stats_get_classes returned %zu", n);
  size_t c = class_of(a, n, 40);
  CHECK(a[c].block_size == 48, "40 bytes: class of %llu-byte blocks, expected 48",
        (unsigned long long)a[c].block_size);
  /* The large cache starts cold (a freed large block is discarded): one
   * large block freed, the next large allocation (below) turns it warm. */
  hak_free(hak_malloc(3 * MiB));
  hak_stats_t s0 = ts_stats_now();

  enum { N = 100, F = 30 };
  void *p[N];
  for (int i = 0; i < N; i++) REQUIRE((p[i] = hak_malloc(40)) != NULL, "hak_malloc(40)");
  hak_stats_get_classes(b, n);
  CHECK(b[c].allocs - a[c].allocs == N, "allocs +%llu, expected %d",
        (unsigned long long)(b[c].allocs - a[c].allocs), N);
  CHECK(b[c].frees == a[c].frees, "frees moved by %llu", (unsigned long long)(b[c].frees - a[c].frees));
  CHECK(b[c].live_blocks - a[c].live_blocks == N, "live +%llu, expected %d",
        (unsigned long long)(b[c].live_blocks - a[c].live_blocks), N);
  CHECK(b[c].slabs == a[c].slabs + 1, "slabs %llu -> %llu, expected one more (a fresh class)",
        (unsigned long long)a[c].slabs, (unsigned long long)b[c].slabs);
  for (int i = 0; i < F; i++) hak_free(p[i]);
  hak_stats_get_classes(b, n);
  CHECK(b[c].frees - a[c].frees == F, "frees +%llu, expected %d", (unsigned long long)(b[c].frees - a[c].frees), F);
  CHECK(b[c].live_blocks - a[c].live_blocks == N - F, "live +%llu, expected %d",
        (unsigned long long)(b[c].live_blocks - a[c].live_blocks), N - F);
  for (size_t k = 0; k < n; k++)
    if (k != c) CHECK(b[k].allocs == a[k].allocs && b[k].frees == a[k].frees, "class %zu moved", k);

  /* A large block: counted, then cached when freed, then trimmed. */
  void *big = hak_malloc(3 * MiB);
  REQUIRE(big != NULL, "hak_malloc(3 MiB)");
  memset(big, 1, 3 * MiB);
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.large_allocs == s0.large_allocs + 1, "large_allocs %llu -> %llu", (unsigned long long)s0.large_allocs,
        (unsigned long long)s1.large_allocs);
  CHECK(s1.large_live_bytes >= s0.large_live_bytes + 3 * MiB, "large_live_bytes %llu -> %llu",
        (unsigned long long)s0.large_live_bytes, (unsigned long long)s1.large_live_bytes);
  CHECK(s1.peak_rss_bytes >= 3 * MiB, "peak_rss_bytes %llu after touching 3 MiB",
        (unsigned long long)s1.peak_rss_bytes);
  CHECK(s1.slabs >= 1, "slabs %llu", (unsigned long long)s1.slabs);
  hak_free(big);
  hak_stats_t s2 = ts_stats_now();
  CHECK(s2.large_frees == s1.large_frees + 1, "large_frees %llu -> %llu", (unsigned long long)s1.large_frees,
        (unsigned long long)s2.large_frees);
  CHECK(s2.large_live_bytes == s0.large_live_bytes, "large_live_bytes %llu, was %llu",
        (unsigned long long)s2.large_live_bytes, (unsigned long long)s0.large_live_bytes);
  CHECK(s2.large_cached_bytes >= 3 * MiB, "large_cached_bytes %llu after freeing a written 3 MiB block",
        (unsigned long long)s2.large_cached_bytes);

  for (int i = F; i < N; i++) hak_free(p[i]);
  hak_collect();  /* the empty current slab goes, its pages are purged, the cache trimmed */
  hak_stats_t s3 = ts_stats_now();
  hak_stats_get_classes(b, n);
  CHECK(b[c].live_blocks == a[c].live_blocks && b[c].slabs == a[c].slabs,
        "after freeing all and hak_collect: live %llu slabs %llu, expected %llu and %llu",
        (unsigned long long)b[c].live_blocks, (unsigned long long)b[c].slabs,
        (unsigned long long)a[c].live_blocks, (unsigned long long)a[c].slabs);
  CHECK(s3.large_cached_bytes == 0, "large_cached_bytes %llu after hak_collect",
        (unsigned long long)s3.large_cached_bytes);
  CHECK(s3.superslabs_purged > s0.superslabs_purged && s3.purged_bytes > s0.purged_bytes,
        "hak_collect purged nothing: superslabs_purged %llu -> %llu, purged_bytes %llu -> %llu",
        (unsigned long long)s0.superslabs_purged, (unsigned long long)s3.superslabs_purged,
        (unsigned long long)s0.purged_bytes, (unsigned long long)s3.purged_bytes);
  CHECK(s3.allocs - s0.allocs == N + 1 && s3.frees - s0.frees == N + 1, "allocs +%llu frees +%llu, expected %d",
        (unsigned long long)(s3.allocs - s0.allocs), (unsigned long long)(s3.frees - s0.frees), N + 1);
}

/* What hak_stats_print prints, in a buffer to free; NULL if none. */
static char *stats_text(void)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL) return NULL;
  hak_stats_print(f);
  fclose(f);
  return text;
}

/* hak_stats_print: the summary line first, then the class table holding
 * the class just used with its exact counts. */
static void test_print(void)
{
  ts_check_section("print");
  void *p[7];
  for (int i = 0; i < 7; i++) p[i] = hak_malloc(3000);  /* 3072-byte class */
  hak_class_stats_t cs[MAX_CLASSES];
  size_t n = hak_stats_get_classes(cs, MAX_CLASSES);
  size_t c = class_of(cs, n, 3000);
  char *text = stats_text();
  REQUIRE(text != NULL, "open_memstream");
  CHECK(strncmp(text, "hakmem: allocs=", 15) == 0, "first line: %.80s", text);
  char want[128];
  snprintf(want, sizeof want, "\nhakmem: %7zu%8llu%14llu%14llu%14llu", c, (unsigned long long)cs[c].block_size,
           (unsigned long long)cs[c].allocs, (unsigned long long)cs[c].frees,
           (unsigned long long)cs[c].live_blocks);
  CHECK(strstr(text, want) != NULL, "no class line '%s' in:\n%s", want + 1, text);
  CHECK(cs[c].live_blocks == 7, "live blocks of class %zu: %llu", c, (unsigned long long)cs[c].live_blocks);
  CHECK(strstr(text, "peak_rss_kb=") != NULL && strstr(text, "hakmem: remote frees") != NULL,
        "sections missing in:\n%s", text);
  free(text);
  for (int i = 0; i < 7; i++) hak_free(p[i]);
}

/* The "resident" line of hak_stats_print. */
typedef struct { unsigned long long ss, headers, slabs, blocks, empty, parked, unowned; } resident_line_t;

static bool print_resident(resident_line_t *r)
{
  char *text = stats_text();
  if (text == NULL) return false;
  const char *line = strstr(text, "hakmem: resident");
  int n = line == NULL ? 0
                       : sscanf(line,
                                "hakmem: resident superslabs_kb=%llu headers_kb=%llu slabs_kb=%llu blocks_kb=%llu "
                                "empty_kb=%llu parked_kb=%llu unowned_kb=%llu",
                                &r->ss, &r->headers, &r->slabs, &r->blocks, &r->empty, &r->parked, &r->unowned);
  if (n != 7) fprintf(stderr, "no resident line in:\n%s", text);
  free(text);
  return n == 7;
}

/* The "resident heap" lines of hak_stats_print: the sum of their
 * resident_kb, and the largest of a parked heap's. */
typedef struct { unsigned long long sum, parked_max, lines; } owner_lines_t;

static bool print_owners(owner_lines_t *r)
{
  char *text = stats_text();
  if (text == NULL) return false;
  memset(r, 0, sizeof *r);
  bool ok = true;
  for (const char *line = strstr(text, "hakmem: resident heap "); line != NULL;
       line = strstr(line + 1, "hakmem: resident heap ")) {
    char label[32], kind[16];
    unsigned long long ss, kb, empty;
    if (sscanf(line, "hakmem: resident heap %31s %15s superslabs=%llu resident_kb=%llu empty_kb=%llu", label, kind,
               &ss, &kb, &empty) != 5 || empty > kb) {
      fprintf(stderr, "bad resident heap line in:\n%s", text);
      ok = false;
      break;
    }
    r->sum += kb;
    r->lines++;
    if (strcmp(kind, "parked") == 0 && kb > r->parked_max) r->parked_max = kb;
  }
  free(text);
  return ok && r->lines != 0;
}

enum { N_RES = 4096, SIZE_RES = 1000 };
static void *kept_by_exited[N_RES];

/* Allocates and writes blocks that outlive it: its heap is parked at exit. */
static void *keep_and_exit(void *arg)
{
  (void)arg;
  for (int i = 0; i < N_RES; i++) {
    kept_by_exited[i] = hak_malloc(SIZE_RES);
    if (kept_by_exited[i] != NULL) memset(kept_by_exited[i], 0x3c, SIZE_RES);
  }
  return NULL;
}

/* The resident line follows the program's blocks: 4 MiB of 1000-byte blocks,
 * written, show in blocks_kb and in the resident pages of their slabs;
 * freed, they leave blocks_kb (a thread cache keeps at most 128 KiB of a
 * class) and their pages stay resident as free space or empty units until
 * the purge delay.  4 MiB more kept by a thread that exited show in
 * parked_kb: its heap waits, parked, for the next thread. */
static void test_resident(void)
{
  ts_check_section("resident");
  enum { N = N_RES, SIZE = SIZE_RES };
  static void *p[N];
  resident_line_t before, live, after;
  REQUIRE(print_resident(&before), "resident line");
  for (int i = 0; i < N; i++) {
    p[i] = hak_malloc(SIZE);
    REQUIRE(p[i] != NULL, "malloc");
    memset(p[i], 0x5a, SIZE);
  }
  REQUIRE(print_resident(&live), "resident line");
  unsigned long long kb = (unsigned long long)N * SIZE / 1024;
  CHECK(live.blocks >= before.blocks + kb, "blocks_kb %llu -> %llu after %llu KiB of blocks", before.blocks,
        live.blocks, kb);
  CHECK(live.slabs >= before.slabs + kb * 9 / 10, "slabs_kb %llu -> %llu after %llu KiB written", before.slabs,
        live.slabs, kb);
  CHECK(live.ss == live.headers + live.slabs + live.empty, "%llu KiB resident != %llu + %llu + %llu", live.ss,
        live.headers, live.slabs, live.empty);
  for (int i = 0; i < N; i++) hak_free(p[i]);
  REQUIRE(print_resident(&after), "resident line");
  CHECK(after.blocks + kb - 160 <= live.blocks, "blocks_kb %llu -> %llu after freeing %llu KiB", live.blocks,
        after.blocks, kb);

  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, keep_and_exit, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  for (int i = 0; i < N; i++) REQUIRE(kept_by_exited[i] != NULL, "malloc in the thread");
  resident_line_t parked;
  REQUIRE(print_resident(&parked), "resident line");
  CHECK(parked.parked >= after.parked + kb * 9 / 10, "parked_kb %llu -> %llu after a thread left %llu KiB",
        after.parked, parked.parked, kb);
  CHECK(parked.parked <= parked.ss, "parked_kb %llu > superslabs_kb %llu", parked.parked, parked.ss);
  /* Per owner: the exited thread's heap holds its 4 MiB, and the owners'
   * lines add up to the SuperSlabs' resident pages (read again: the
   * snapshots differ by the pages touched in between, a few at most). */
  owner_lines_t owners;
  REQUIRE(print_owners(&owners), "resident heap lines");
  CHECK(owners.parked_max >= kb * 9 / 10, "largest parked heap %llu KiB after a thread left %llu KiB",
        owners.parked_max, kb);
  CHECK(owners.sum + 64 >= parked.ss && owners.sum <= parked.ss + 64,
        "resident heap lines sum to %llu KiB, superslabs_kb %llu", owners.sum, parked.ss);
  for (int i = 0; i < N; i++) hak_free(kept_by_exited[i]);
}

/* ------------------------------------------------------------ 2. scenario */

/* Sizes of distinct classes, so the class table shows each thread's blocks. */
#define A_SMALL 3000   /* producer-a: 64 B */
#define A_LARGE 10     /* producer-a: 300 KiB */
#define B_SMALL 500    /* producer-b: 200 B */
#define M_SMALL 700    /* main: 100 B */
#define X_SMALL 50     /* consumer-x: 1000 B */
#define X_FREES_A 2000 /* consumer-x frees 2000 of a's small, all its large, all main's */

static void *a_blocks[A_SMALL + A_LARGE], *b_blocks[B_SMALL], *m_blocks[M_SMALL], *x_blocks[X_SMALL];

static void *producer_a(void *arg)
{
  (void)arg;
  a_blocks[0] = hak_malloc(64);  /* the heap starts before the thread has its name */
  pthread_setname_np(pthread_self(), "producer-a");
  for (int i = 1; i < A_SMALL; i++) a_blocks[i] = hak_malloc(64);
  for (int i = 0; i < A_LARGE; i++) a_blocks[A_SMALL + i] = hak_malloc(300 * KiB);
  return NULL;
}

static void *producer_b(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "producer-b");
  for (int i = 0; i < B_SMALL; i++) b_blocks[i] = hak_malloc(200);
  return NULL;
}

static void *consumer_x(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "consumer-x");
  for (int i = 0; i < X_FREES_A; i++) hak_free(a_blocks[i]);
  for (int i = 0; i < A_LARGE; i++) hak_free(a_blocks[A_SMALL + i]);
  for (int i = 0; i < M_SMALL; i++) hak_free(m_blocks[i]);
  for (int i = 0; i < X_SMALL; i++) x_blocks[i] = hak_malloc(1000);
  return NULL;
}

static void *unnamed(void *arg)
{
  (void)arg;
  for (int i = X_FREES_A; i < A_SMALL; i++) hak_free(a_blocks[i]);
  for (int i = 0; i < B_SMALL; i++) hak_free(b_blocks[i]);
  return NULL;
}

static void run(void *(*fn)(void *))
{
  pthread_t t;
  if (pthread_create(&t, NULL, fn, NULL) != 0 || pthread_join(t, NULL) != 0) {
    perror("pthread");
    exit(2);
  }
}

static int scenario(void)
{
  for (int i = 0; i < M_SMALL; i++) m_blocks[i] = hak_malloc(100);
  run(producer_a);
  run(producer_b);
  run(consumer_x);
  run(unnamed);
  for (int i = 0; i < X_SMALL; i++) hak_free(x_blocks[i]);
  return 0;  /* the report comes from hakmem's destructor */
}

/* In the child: HAKMEM_STATS=level (NULL: unset). */
static void child_env(const void *level)
{
  /* Each thread of the scenario starts after the one before exited: with
   * parked heaps, each would take its predecessor's heap and free its blocks
   * as its own.  The matrix checked here is that of threads with heaps of
   * their own. */
  setenv("HAKMEM_PARKED_HEAPS", "0", 1);
  if (level) setenv("HAKMEM_STATS", level, 1);
  else unsetenv("HAKMEM_STATS");
}

/* Run `unit_stats scenario` with HAKMEM_STATS=level (NULL: unset); its
 * stderr into buf.  Returns the exit status. */
static int run_child(const char *level, char *buf, size_t size)
{
  return ts_run_self("scenario", child_env, level, buf, size);
}

/* The matrix of a report: column labels and rows. */
#define MAXL 12
typedef struct {
  int ncols, nrows;
  char col[MAXL][24], row[MAXL][24];
  unsigned long long cell[MAXL][MAXL];
} matrix_t;

static bool parse_matrix(const char *text, matrix_t *m)
{
  memset(m, 0, sizeof *m);
  const char *p = strstr(text, "hakmem:   freed by \\ owner");
  if (p == NULL) return false;
  p += strlen("hakmem:   freed by \\ owner");
  const char *eol = strchr(p, '\n');
  char line[512];
  snprintf(line, sizeof line, "%.*s", (int)(eol - p), p);
  for (char *tok = strtok(line, " "); tok && m->ncols < MAXL; tok = strtok(NULL, " "))
    snprintf(m->col[m->ncols++], 24, "%s", tok);
  for (p = eol + 1; strncmp(p, "hakmem:   ", 10) == 0 && m->nrows < MAXL; p = strchr(p, '\n') + 1) {
    eol = strchr(p, '\n');
    snprintf(line, sizeof line, "%.*s", (int)(eol - p - 10), p + 10);
    char *tok = strtok(line, " ");
    snprintf(m->row[m->nrows], 24, "%s", tok);
    for (int c = 0; c < m->ncols && (tok = strtok(NULL, " ")); c++) m->cell[m->nrows][c] = strtoull(tok, NULL, 10);
    m->nrows++;
  }
  return true;
}

static int find(char (*labels)[24], int n, const char *want)
{
  for (int i = 0; i < n; i++)
    if (strcmp(labels[i], want) == 0) return i;
  return -1;
}

static void test_report(void)
{
  static char out[64 * 1024];
  ts_check_section("report level 2");
  int rc = run_child("2", out, sizeof out);
  CHECK(rc == 0, "scenario exited with %d; stderr:\n%s", rc, out);
  unsigned long long total = A_SMALL + A_LARGE + B_SMALL + M_SMALL + X_SMALL;
  char want[160];
  snprintf(want, sizeof want, "hakmem: allocs=%llu frees=%llu remote_frees=%llu live_bytes=0 ", total, total, total);
  CHECK(strncmp(out, want, strlen(want)) == 0, "summary line: expected '%s...' in:\n%s", want, out);
  snprintf(want, sizeof want, "large_allocs=%d large_frees=%d large_live=0 ", A_LARGE, A_LARGE);
  CHECK(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
  /* class table: size, allocs, frees, live */
  static const struct { int size, n; } cls[] = { { 64, A_SMALL }, { 224, B_SMALL }, { 112, M_SMALL }, { 1024, X_SMALL } };
  for (size_t i = 0; i < sizeof cls / sizeof *cls; i++) {
    snprintf(want, sizeof want, "%8d%14d%14d%14d", cls[i].size, cls[i].n, cls[i].n, 0);
    CHECK(strstr(out, want) != NULL, "no class line '%s' in:\n%s", want, out);
  }

  matrix_t m;
  REQUIRE(parse_matrix(out, &m), "no remote-free matrix in:\n%s", out);
  int ca = find(m.col, m.ncols, "producer-a"), cb = find(m.col, m.ncols, "producer-b");
  int cm = find(m.col, m.ncols, "main"), cx = find(m.col, m.ncols, "consumer-x");
  int ct = find(m.col, m.ncols, "total");
  int rx = find(m.row, m.nrows, "consumer-x"), rm = find(m.row, m.nrows, "main");
  int rt = find(m.row, m.nrows, "total"), ru = -1;
  for (int r = 0; r < m.nrows; r++)
    if (m.row[r][0] == '#') ru = r;
  REQUIRE(ca >= 0 && cb >= 0 && cm >= 0 && cx >= 0 && ct == m.ncols - 1 && m.ncols == 5,
          "columns: expected producer-a producer-b main consumer-x total (any order, total last); report:\n%s", out);
  REQUIRE(rx >= 0 && rm >= 0 && ru >= 0 && rt == m.nrows - 1 && m.nrows == 4,
          "rows: expected consumer-x, main, #N (the unnamed thread) and total; report:\n%s", out);
  unsigned long long expect[MAXL][MAXL] = { { 0 } };
  expect[rx][ca] = X_FREES_A + A_LARGE;
  expect[rx][cm] = M_SMALL;
  expect[ru][ca] = A_SMALL - X_FREES_A;
  expect[ru][cb] = B_SMALL;
  expect[rm][cx] = X_SMALL;
  for (int r = 0; r < rt; r++) {
    unsigned long long sum = 0;
    for (int c = 0; c < ct; c++) {
      CHECK(m.cell[r][c] == expect[r][c], "cell %s -> %s: %llu, expected %llu", m.row[r], m.col[c], m.cell[r][c],
            expect[r][c]);
      sum += expect[r][c];
      expect[rt][c] += expect[r][c];
    }
    CHECK(m.cell[r][ct] == sum, "row total of %s: %llu, expected %llu", m.row[r], m.cell[r][ct], sum);
  }
  for (int c = 0; c < ct; c++)
    CHECK(m.cell[rt][c] == expect[rt][c], "column total of %s: %llu, expected %llu", m.col[c], m.cell[rt][c],
          expect[rt][c]);
  CHECK(m.cell[rt][ct] == total, "grand total %llu, expected %llu", m.cell[rt][ct], total);

  ts_check_section("report level 1");
  rc = run_child("1", out, sizeof out);
  CHECK(rc == 0, "scenario exited with %d", rc);
  snprintf(want, sizeof want, "hakmem: allocs=%llu frees=%llu remote_frees=%llu ", total, total, total);
  CHECK(strncmp(out, want, strlen(want)) == 0, "expected '%s...', got:\n%s", want, out);
  char *nl = strchr(out, '\n');
  CHECK(nl != NULL && nl[1] == 0, "HAKMEM_STATS=1 printed more than one line:\n%s", out);

  ts_check_section("report off");
  rc = run_child(NULL, out, sizeof out);
  CHECK(rc == 0 && out[0] == 0, "without HAKMEM_STATS: exit %d, stderr:\n%s", rc, out);
}

/* 3. Threads that allocate and free a few hundred blocks and exit, one
 * after another, while the main thread takes snapshots. */
static _Atomic(bool) churn_stop;

static void *churn_one(void *arg)
{
  (void)arg;
  void *b[256];
  for (int i = 0; i < 256; i++) b[i] = hak_malloc(16 + (size_t)i * 8);
  for (int i = 0; i < 256; i++) hak_free(b[i]);
  return NULL;
}

static void *churn_threads(void *arg)
{
  unsigned *made = arg;
  while (!atomic_load(&churn_stop)) {
    pthread_t t;
    if (pthread_create(&t, NULL, churn_one, NULL) != 0) continue;
    pthread_join(t, NULL);
    (*made)++;
  }
  return NULL;
}

static void test_snapshots_while_exiting(void)
{
  ts_check_begin("snapshots while threads exit count each thread's blocks once");
  unsigned made = 0;
  atomic_store(&churn_stop, false);
  pthread_t c;
  REQUIRE(pthread_create(&c, NULL, churn_threads, &made) == 0, "pthread_create");
  hak_stats_t last = ts_stats_now();
  unsigned long drops = 0, snapshots = 0;
  uint64_t worst = 0;
  double t0 = ts_now_ms();
  while (ts_now_ms() - t0 < 1000) {
    hak_stats_t s = ts_stats_now();
    snapshots++;
    if (s.allocs < last.allocs || s.frees < last.frees) {
      drops++;
      uint64_t d = s.frees < last.frees ? last.frees - s.frees : last.allocs - s.allocs;
      if (d > worst) worst = d;
    }
    last = s;
  }
  atomic_store(&churn_stop, true);
  pthread_join(c, NULL);
  CHECK(drops == 0, "%lu of %lu snapshots counted fewer blocks than the one before (by up to %llu): a thread's "
        "counts seen twice while it folded them", drops, snapshots, (unsigned long long)worst);
  printf("   %lu snapshots while %u threads came and went\n", snapshots, made);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "scenario") == 0) return scenario();
  const char *level = getenv("HAKMEM_STATS");
  if (level == NULL || strcmp(level, "2") != 0) {
    fprintf(stderr, "unit_stats: run with HAKMEM_STATS=2 (ctest does)\n");
    return 1;
  }
  test_classes();
  test_print();
  test_resident();
  test_report();
  test_snapshots_while_exiting();
  return ts_check_finish("unit_stats");
}
