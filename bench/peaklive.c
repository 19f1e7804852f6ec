/* peaklive.c - the most memory a program holds at once: a floor for peak
 * RSS that no allocator can go below.
 *
 *   LD_PRELOAD=build/bench/libpeaklive.so PROGRAM ARGS...
 *
 * Runs the program on glibc's malloc (its __libc_ entry points) and adds up
 * the usable size of every live block.  At exit it prints on stderr
 *
 *   peaklive: peak_kb=N big_kb=N blocks=N
 *
 * peak_kb: the largest sum of live blocks at any moment; big_kb: how much of
 * it was in blocks above 256 KiB (hakmem's large blocks, beyond its largest
 * size class) at that moment; blocks: the live blocks then.  A block counts
 * its usable size, a little above the size asked for.  What an allocator's
 * peak RSS holds above peak_kb is its own: the program's code and stacks
 * (the RSS of a run that allocates nothing), free memory it keeps, and
 * metadata.  Not a benchmark: the counters are shared lines every call
 * writes.
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define BIG_BLOCK ((size_t)256 << 10)

/* live: bytes and blocks held now; big: bytes of them in big blocks.  The
 * peak fields are written together by the call that raised the peak (a
 * CAS on peak_bytes); relaxed: exact enough for a report read at exit. */
static _Atomic(int64_t) live_bytes, live_blocks, big_bytes;
static _Atomic(int64_t) peak_bytes, peak_big, peak_blocks;

/* A block of `bytes` usable bytes came (sign 1) or went (-1). */
static void count(size_t bytes, int sign)
{
  int64_t n = (int64_t)bytes * sign;
  int64_t big = (size_t)(n < 0 ? -n : n) > BIG_BLOCK ? n : 0;
  int64_t b = atomic_fetch_add_explicit(&big_bytes, big, memory_order_relaxed) + big;
  int64_t k = atomic_fetch_add_explicit(&live_blocks, sign, memory_order_relaxed) + sign;
  int64_t v = atomic_fetch_add_explicit(&live_bytes, n, memory_order_relaxed) + n;
  int64_t peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
  while (v > peak) {
    if (atomic_compare_exchange_weak_explicit(&peak_bytes, &peak, v, memory_order_relaxed, memory_order_relaxed)) {
      atomic_store_explicit(&peak_big, b, memory_order_relaxed);
      atomic_store_explicit(&peak_blocks, k, memory_order_relaxed);
      break;
    }
  }
}

static void note(void *p, int sign)
{
  if (p != NULL) count(malloc_usable_size(p), sign);
}

void *malloc(size_t n)
{
  void *p = __libc_malloc(n);
  note(p, 1);
  return p;
}

void *calloc(size_t n, size_t size)
{
  void *p = __libc_calloc(n, size);
  note(p, 1);
  return p;
}

void *realloc(void *old, size_t n)
{
  size_t before = old != NULL ? malloc_usable_size(old) : 0;
  void *p = __libc_realloc(old, n);
  if (p == NULL && n != 0) return NULL;  /* old is still live */
  if (old != NULL) count(before, -1);  /* old is gone (or is p): its size as it was */
  note(p, 1);
  return p;
}

void free(void *p)
{
  note(p, -1);
  __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
  void *p = __libc_memalign(align, n);
  note(p, 1);
  return p;
}

void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
void *valloc(size_t n) { return memalign(4096, n); }

int posix_memalign(void **out, size_t align, size_t n)
{
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return 22;  /* EINVAL */
  void *p = memalign(align, n);
  if (p == NULL) return 12;  /* ENOMEM */
  *out = p;
  return 0;
}

__attribute__((destructor)) static void report(void)
{
  fprintf(stderr, "peaklive: peak_kb=%lld big_kb=%lld blocks=%lld\n",
          (long long)(atomic_load_explicit(&peak_bytes, memory_order_relaxed) >> 10),
          (long long)(atomic_load_explicit(&peak_big, memory_order_relaxed) >> 10),
          (long long)atomic_load_explicit(&peak_blocks, memory_order_relaxed));
}
