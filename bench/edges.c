/* edges.c - allocation shapes at the edges of what the other workloads
 * exercise, each a fixed amount of work timed whole.
 *
 *   edges aligned ALIGN SIZE [BLOCKS [ROUNDS]]
 *       ROUNDS (20) times: BLOCKS (1000) blocks from posix_memalign(ALIGN,
 *       SIZE), the first 16 bytes of each written, then all freed.
 *       Reports ns a pair.
 *   edges large SIZE THREADS [ITERS]
 *       THREADS threads, each ITERS (200000) times malloc(SIZE), a write to
 *       its first byte, free.  Reports ns a pair (wall time / ITERS).
 *   edges touch BLOCKS SIZE BYTES [ROUNDS]
 *       ROUNDS (200) times: BLOCKS blocks of SIZE bytes, the first BYTES of
 *       each written (a buffer sized for the largest message), then all
 *       freed.  Reports ns a pair; peak RSS shows what the untouched rest
 *       costs.
 *   edges cycle BLOCKS SIZE ROUNDS [random]
 *       BLOCKS blocks of SIZE bytes, each written whole; then ROUNDS times
 *       all freed and allocated again, written whole (a round of work), or
 *       with `random`, BLOCKS times a random one freed and replaced by a
 *       block of SIZE/2 .. 3*SIZE/2 bytes written whole.  Reports ns a
 *       pair.
 *   edges calloc SIZE ITERS [whole]
 *       ITERS times calloc(1, SIZE), its first and middle bytes written
 *       (with `whole`, every byte), free.  Reports ns a pair.
 *   edges grow MAX ITERS [whole]
 *       ITERS times a buffer grown by realloc from 1 KiB, doubling, to MAX
 *       bytes, each new half's last byte written (with `whole`, every byte
 *       of it), then freed.  Reports ns a round.
 *   edges shrink MAX MIN ITERS
 *       A buffer of MIN bytes, written; ITERS times grown by realloc to MAX
 *       bytes, the new part written whole (a big message), and shrunk back
 *       to MIN.  Reports ns a cycle.
 *   edges batch BLOCKS [ROUNDS]
 *       ROUNDS (300) times: two threads start, allocate BLOCKS and 2 x
 *       BLOCKS blocks of 16 .. 511 bytes, write the first byte of each, free
 *       them in order and exit; the main thread joins them.  A thread per
 *       task, or a pool that respawns its workers.  Reports us a round.
 *
 * Prints one line, `RESULT edges mode=... ops=N secs=S ns_per_op=X` (for
 * batch, `us_per_round=X`).  Not part of bench/scaling.sh: these are fixed
 * workloads to compare allocators on one shape each (bench/README.md).  The
 * calls are plain malloc/free/posix_memalign; the allocator under test is
 * chosen with LD_PRELOAD.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/clock.h"

static void usage(void)
{
  fprintf(stderr, "usage: edges aligned ALIGN SIZE [BLOCKS [ROUNDS]]\n"
                  "       edges large SIZE THREADS [ITERS]\n"
                  "       edges touch BLOCKS SIZE BYTES [ROUNDS]\n"
                  "       edges cycle BLOCKS SIZE ROUNDS [random]\n"
                  "       edges calloc SIZE ITERS [whole]\n"
                  "       edges grow MAX ITERS [whole]\n"
                  "       edges shrink MAX MIN ITERS\n"
                  "       edges batch BLOCKS [ROUNDS]\n");
  exit(2);
}

static long arg(int argc, char **argv, int i, long dflt)
{
  if (i >= argc) return dflt;
  char *end;
  long v = strtol(argv[i], &end, 0);
  if (*end != '\0' || v <= 0) usage();
  return v;
}

static void oom(size_t n)
{
  fprintf(stderr, "edges: allocation of %zu bytes failed\n", n);
  exit(1);
}

static int run_aligned(size_t align, size_t size, long blocks, long rounds)
{
  void **p = malloc((size_t)blocks * sizeof *p);
  if (p == NULL) oom((size_t)blocks * sizeof *p);
  double t0 = ts_now();
  for (long r = 0; r < rounds; r++) {
    for (long i = 0; i < blocks; i++) {
      if (posix_memalign(&p[i], align, size) != 0) oom(size);
      memset(p[i], 1, size < 16 ? size : 16);
    }
    for (long i = 0; i < blocks; i++) free(p[i]);
  }
  double secs = ts_now() - t0;
  long ops = blocks * rounds;
  printf("RESULT edges mode=aligned align=%zu size=%zu ops=%ld secs=%.3f ns_per_op=%.1f\n", align, size, ops,
         secs, secs * 1e9 / (double)ops);
  free(p);
  return 0;
}

static void **blocks_array(long blocks)
{
  void **p = malloc((size_t)blocks * sizeof *p);
  if (p == NULL) oom((size_t)blocks * sizeof *p);
  return p;
}

static void *written(size_t size, size_t bytes)
{
  void *p = malloc(size);
  if (p == NULL) oom(size);
  memset(p, 1, bytes < size ? bytes : size);
  return p;
}

static int run_touch(size_t size, size_t bytes, long blocks, long rounds)
{
  void **p = blocks_array(blocks);
  double t0 = ts_now();
  for (long r = 0; r < rounds; r++) {
    for (long i = 0; i < blocks; i++) p[i] = written(size, bytes);
    for (long i = 0; i < blocks; i++) free(p[i]);
  }
  double secs = ts_now() - t0;
  long ops = blocks * rounds;
  printf("RESULT edges mode=touch size=%zu bytes=%zu ops=%ld secs=%.3f ns_per_op=%.1f\n", size, bytes, ops, secs,
         secs * 1e9 / (double)ops);
  free(p);
  return 0;
}

static int run_cycle(size_t size, long blocks, long rounds, bool random)
{
  void **p = blocks_array(blocks);
  uint32_t x = 7;
  double t0 = ts_now();
  for (long i = 0; i < blocks; i++) p[i] = written(size, size);
  for (long r = 0; r < rounds; r++) {
    if (!random) {
      for (long i = 0; i < blocks; i++) free(p[i]);
      for (long i = 0; i < blocks; i++) p[i] = written(size, size);
      continue;
    }
    for (long k = 0; k < blocks; k++) {
      x = x * 1103515245u + 12345u;
      long i = (long)((x >> 8) % (uint32_t)blocks);
      size_t n = size / 2 + (size_t)(x >> 4) % size;
      free(p[i]);
      p[i] = written(n, n);
    }
  }
  double secs = ts_now() - t0;
  long ops = blocks * rounds;
  printf("RESULT edges mode=cycle size=%zu blocks=%ld order=%s ops=%ld secs=%.3f ns_per_op=%.1f\n", size, blocks,
         random ? "random" : "rounds", ops, secs, secs * 1e9 / (double)ops);
  for (long i = 0; i < blocks; i++) free(p[i]);
  free(p);
  return 0;
}

static size_t large_size;
static long large_iters;

static void *large_worker(void *arg)
{
  (void)arg;
  for (long i = 0; i < large_iters; i++) {
    char *p = malloc(large_size);
    if (p == NULL) oom(large_size);
    p[0] = 1;
    free(p);
  }
  return NULL;
}

static int run_large(size_t size, long threads, long iters)
{
  pthread_t t[64];
  if (threads > 64) usage();
  large_size = size;
  large_iters = iters;
  double t0 = ts_now();
  for (long i = 0; i < threads; i++)
    if (pthread_create(&t[i], NULL, large_worker, NULL) != 0) oom(0);
  for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double secs = ts_now() - t0;
  printf("RESULT edges mode=large size=%zu threads=%ld ops=%ld secs=%.3f ns_per_op=%.1f\n", size, threads,
         iters * threads, secs, secs * 1e9 / (double)iters);
  return 0;
}

/* The writes into p are the program's: a compiler must not drop them as
 * dead before p's free. */
static inline void keep_writes(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static int run_calloc(size_t size, long iters, bool whole)
{
  double t0 = ts_now();
  for (long i = 0; i < iters; i++) {
    char *p = calloc(1, size);
    if (p == NULL) oom(size);
    if (whole) {
      memset(p, (int)i, size);
    } else {
      p[0] = 1;
      p[size / 2] = 1;
    }
    keep_writes(p);
    free(p);
  }
  double secs = ts_now() - t0;
  printf("RESULT edges mode=calloc size=%zu written=%s ops=%ld secs=%.3f ns_per_op=%.1f\n", size,
         whole ? "whole" : "two", iters, secs, secs * 1e9 / (double)iters);
  return 0;
}

static int run_grow(size_t max, long iters, bool whole)
{
  double t0 = ts_now();
  for (long i = 0; i < iters; i++) {
    size_t n = 1024;
    char *p = malloc(n);
    if (p == NULL) oom(n);
    p[0] = 1;
    while (n < max) {
      char *q = realloc(p, 2 * n);
      if (q == NULL) oom(2 * n);
      if (whole) memset(q + n, (int)i, n);
      else q[2 * n - 1] = 1;
      p = q;
      n *= 2;
    }
    keep_writes(p);
    free(p);
  }
  double secs = ts_now() - t0;
  printf("RESULT edges mode=grow max=%zu written=%s ops=%ld secs=%.3f ns_per_op=%.1f\n", max, whole ? "whole" : "byte",
         iters, secs, secs * 1e9 / (double)iters);
  return 0;
}

static int run_shrink(size_t max, size_t min, long iters)
{
  if (min == 0 || min >= max) usage();
  char *p = malloc(min);
  if (p == NULL) oom(min);
  memset(p, 1, min);
  double t0 = ts_now();
  for (long i = 0; i < iters; i++) {
    char *q = realloc(p, max);
    if (q == NULL) oom(max);
    memset(q + min, (int)i, max - min);
    keep_writes(q);
    p = realloc(q, min);
    if (p == NULL) oom(min);
  }
  double secs = ts_now() - t0;
  free(p);
  printf("RESULT edges mode=shrink max=%zu min=%zu ops=%ld secs=%.3f ns_per_op=%.1f\n", max, min, iters, secs,
         secs * 1e9 / (double)iters);
  return 0;
}

static void *batch_worker(void *arg)
{
  long n = (long)(size_t)arg;
  void **p = malloc((size_t)n * sizeof *p);
  if (p == NULL) oom((size_t)n * sizeof *p);
  for (long i = 0; i < n; i++) {
    size_t s = 16 + (size_t)(i * 7919) % 496;
    char *b = malloc(s);
    if (b == NULL) oom(s);
    b[0] = 1;
    p[i] = b;
  }
  for (long i = 0; i < n; i++) free(p[i]);
  free(p);
  return NULL;
}

static int run_batch(long blocks, long rounds)
{
  double t0 = ts_now();
  for (long r = 0; r < rounds; r++) {
    pthread_t t[2];
    for (long k = 0; k < 2; k++)
      if (pthread_create(&t[k], NULL, batch_worker, (void *)(size_t)(blocks * (k + 1))) != 0) oom(0);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  }
  double secs = ts_now() - t0;
  printf("RESULT edges mode=batch blocks=%ld ops=%ld secs=%.3f us_per_round=%.1f\n", blocks, 6 * blocks * rounds,
         secs, secs * 1e6 / (double)rounds);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 3) usage();
  if (strcmp(argv[1], "aligned") == 0 && argc >= 4)
    return run_aligned((size_t)arg(argc, argv, 2, 0), (size_t)arg(argc, argv, 3, 0), arg(argc, argv, 4, 1000),
                       arg(argc, argv, 5, 20));
  if (strcmp(argv[1], "large") == 0 && argc >= 4)
    return run_large((size_t)arg(argc, argv, 2, 0), arg(argc, argv, 3, 1), arg(argc, argv, 4, 200000));
  if (strcmp(argv[1], "touch") == 0 && argc >= 5)
    return run_touch((size_t)arg(argc, argv, 3, 0), (size_t)arg(argc, argv, 4, 0), arg(argc, argv, 2, 0),
                     arg(argc, argv, 5, 200));
  if (strcmp(argv[1], "cycle") == 0 && argc >= 5) {
    if (argc > 5 && strcmp(argv[5], "random") != 0) usage();
    return run_cycle((size_t)arg(argc, argv, 3, 0), arg(argc, argv, 2, 0), arg(argc, argv, 4, 0), argc > 5);
  }
  if ((strcmp(argv[1], "calloc") == 0 || strcmp(argv[1], "grow") == 0) && argc >= 4) {
    if (argc > 4 && strcmp(argv[4], "whole") != 0) usage();
    size_t size = (size_t)arg(argc, argv, 2, 0);
    long iters = arg(argc, argv, 3, 0);
    return argv[1][0] == 'c' ? run_calloc(size, iters, argc > 4) : run_grow(size, iters, argc > 4);
  }
  if (strcmp(argv[1], "shrink") == 0 && argc >= 5)
    return run_shrink((size_t)arg(argc, argv, 2, 0), (size_t)arg(argc, argv, 3, 0), arg(argc, argv, 4, 0));
  if (strcmp(argv[1], "batch") == 0)
    return run_batch(arg(argc, argv, 2, 5000), arg(argc, argv, 3, 300));
  usage();
  return 2;
}
