/* The operating system: the only file that maps, purges and unmaps memory. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"

/* ------------------------------------------------------ fault injection */

#ifdef HAKMEM_FAULT_INJECTION
/* Test builds only (see fault.h).  kinds == 0: off.  The settings change
 * together only in tests, between phases; relaxed is enough for a counter
 * and the release/acquire on kinds publishes nth and every. */
#include "fault.h"
static _Atomic(unsigned) fault_kinds;
static _Atomic(long) fault_nth, fault_every, fault_attempts;
static _Atomic(uint64_t) fault_injected;
static _Atomic(int) fault_env_read;

void hak_test_fail_mmap(long nth, long every, unsigned kinds)
{
  atomic_store_explicit(&fault_env_read, 1, memory_order_relaxed);
  atomic_store_explicit(&fault_kinds, 0, memory_order_relaxed);
  atomic_store_explicit(&fault_nth, nth, memory_order_relaxed);
  atomic_store_explicit(&fault_every, every < 0 ? 0 : every, memory_order_relaxed);
  atomic_store_explicit(&fault_attempts, 0, memory_order_relaxed);
  atomic_store_explicit(&fault_kinds, nth > 0 ? kinds : 0, memory_order_release);
}

uint64_t hak_test_fail_mmap_injected(void)
{
  return atomic_load_explicit(&fault_injected, memory_order_relaxed);
}

static long env_long(const char *name)
{
  const char *s = getenv(name);
  long v = 0;
  for (; s != NULL && *s >= '0' && *s <= '9'; s++) v = v * 10 + (*s - '0');
  return v;
}

/* Should this attempt of kind fail? */
static bool fault_inject(unsigned kind)
{
  if (!atomic_load_explicit(&fault_env_read, memory_order_relaxed) &&
      !atomic_exchange_explicit(&fault_env_read, 1, memory_order_relaxed)) {
    long nth = env_long("HAKMEM_FAIL_MMAP"), every = env_long("HAKMEM_FAIL_MMAP_EVERY");
    if (nth > 0 || every > 0) hak_test_fail_mmap(nth > 0 ? nth : every, every, HAK_FAULT_ALL);
  }
  if ((atomic_load_explicit(&fault_kinds, memory_order_acquire) & kind) == 0) return false;
  long k = atomic_fetch_add_explicit(&fault_attempts, 1, memory_order_relaxed) + 1;
  long nth = atomic_load_explicit(&fault_nth, memory_order_relaxed);
  long every = atomic_load_explicit(&fault_every, memory_order_relaxed);
  if (k < nth || (every > 0 && (k - nth) % every != 0)) return false;
  atomic_fetch_add_explicit(&fault_injected, 1, memory_order_relaxed);
  return true;
}
#define HAK_FAULT(kind) fault_inject(kind)
#else
#define HAK_FAULT(kind) false   /* release: no test, no code */
#endif

/* Map size bytes aligned to align (a power of two >= page size).  Maps
 * size + align and trims both ends.  errno is preserved on success.
 * Without MAP_NORESERVE: the kernel's overcommit policy applies as to
 * glibc's mmapped chunks, so a request beyond what the machine could ever
 * back (vm.overcommit_memory=0: more than RAM + swap) fails with ENOMEM
 * as under glibc, instead of handing out address space that faults. */
void *hak_os_map_aligned(size_t size, size_t align)
{
  int saved = errno;
  if (size > SIZE_MAX - align || HAK_FAULT(HAK_FAULT_MAP)) return NULL;
  size_t total = size + align;
  void *raw = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) { errno = saved; return NULL; }
  uintptr_t base = hak_align_up((uintptr_t)raw, align);
  size_t head = base - (uintptr_t)raw, tail = total - head - size;
  if (head) munmap(raw, head);
  if (tail) munmap((void *)(base + size), tail);
  errno = saved;
  return (void *)base;
}

/* munmap fails with ENOMEM when unmapping part of a mapping would split it
 * past vm.max_map_count (hakmem unmaps 2 MiB pieces of regions the kernel
 * may have merged): the process is out of mappings, as it is out of memory
 * when mmap fails, and must go on.  The range is only abandoned then: its
 * pages are given back (MADV_DONTNEED never splits), its address space
 * stays mapped and unused (the callers no longer refer to it).  Any other
 * error is a bad range: a bug, fatal. */
void hak_os_unmap(void *p, size_t size)
{
  int saved = errno;
  int rc = HAK_FAULT(HAK_FAULT_UNMAP) ? (errno = ENOMEM, -1) : munmap(p, size);
  if (rc != 0) {
    if (errno != ENOMEM) hak_fatal("munmap failed", p);
    (void)madvise(p, size, MADV_DONTNEED);
  }
  errno = saved;
}

/* MADV_DONTNEED: the pages are returned at once (RSS drops) and read back as
 * zero; the address range stays ours.  Callers count on the zeroes (calloc
 * skips zeroing purged memory: superslab.c's clean units, large.c's
 * dirty_from), so where the kernel refuses (EINVAL on locked pages, in a
 * process that called mlockall) the range is zeroed here: its pages stay
 * resident, as locked pages must.  (ENOMEM: part of the range is not
 * mapped, a caller's bug that writing would turn into a crash.) */
void hak_os_purge(void *p, size_t size)
{
  int saved = errno;
  if (madvise(p, size, MADV_DONTNEED) != 0 && errno != ENOMEM) memset(p, 0, size);
  errno = saved;
}

/* Ask for transparent huge pages on [p, p+size) (2 MiB aligned, whole huge
 * pages): one fault maps 2 MiB instead of 4 KiB.  Only for memory that will
 * be used whole (large blocks), never for SuperSlabs, whose pages are
 * committed one by one as slabs grow.  Harmless where THP is off. */
void hak_os_hugepage(void *p, size_t size)
{
  if (size == 0) return;
  int saved = errno;
  (void)madvise(p, size, MADV_HUGEPAGE);
  errno = saved;
}

/* The transparent huge pages' mode: 1 "madvise" (only advised ranges get
 * them), 2 "always", 3 "never" or no THP at all.  Read once; outside
 * "madvise" mode hakmem's advice is not what decides, and is never taken
 * back.  relaxed: the same value whoever reads it first. */
static _Atomic(int) thp_mode;  /* 0: not read yet */

static int thp_read_mode(void)
{
  int mode = atomic_load_explicit(&thp_mode, memory_order_relaxed);
  if (mode != 0) return mode;
  char buf[64] = { 0 };
  int saved = errno;
  int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!read(fd, buf, sizeof buf - 1);
    close(fd);
  }
  errno = saved;
  mode = strstr(buf, "[madvise]") != NULL ? 1 : strstr(buf, "[always]") != NULL ? 2 : 3;
  atomic_store_explicit(&thp_mode, mode, memory_order_relaxed);
  return mode;
}

static bool thp_madvise_mode(void) { return thp_read_mode() == 1; }

bool hak_os_huge_only_advised(void) { return thp_read_mode() != 2; }

/* Take back hak_os_hugepage's advice on [p, p+size) (2 MiB aligned), so
 * that a later touch there commits 4 KiB, not 2 MiB: in "madvise" mode
 * only, where MADV_NOHUGEPAGE means what no advice means. */
void hak_os_hugepage_off(void *p, size_t size)
{
  if (size == 0 || !thp_madvise_mode()) return;
  int saved = errno;
  (void)madvise(p, size, MADV_NOHUGEPAGE);
  errno = saved;
}

/* Commit the pages of [p, p+size) now, for writing (MADV_POPULATE_WRITE,
 * Linux 5.14): one system call maps them all, where the program's first
 * writes would take a page fault each (an exception and a return to user
 * space per 4 KiB page, the larger part of a fault's cost in a virtual
 * machine).  Pages already present are left as they are.  Where the kernel
 * lacks it (EINVAL) it is not tried again; other failures (out of memory)
 * leave the pages to fault in later, as without the call. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static _Atomic(bool) populate_missing;  /* relaxed: a latch, set once */

void hak_os_populate(void *p, size_t size)
{
  if (size == 0 || atomic_load_explicit(&populate_missing, memory_order_relaxed)) return;
  int saved = errno;
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    atomic_store_explicit(&populate_missing, true, memory_order_relaxed);
  errno = saved;
}

/* Which pages of [p, p+size) (p page-aligned) are resident: bit 0 of
 * vec[i] for page i (vec holds a byte per page); false if the kernel does
 * not say. */
bool hak_os_residency(const void *p, size_t size, unsigned char *vec)
{
  int saved = errno;
  int rc = mincore((void *)p, size, vec);
  errno = saved;
  return rc == 0;
}

/* How many of the pages [from, to) of a residency vector are resident. */
size_t hak_os_count_resident(const unsigned char *vec, size_t from, size_t to)
{
  size_t n = 0;
  for (size_t i = from; i < to; i++) n += vec[i] & 1;
  return n;
}

/* Make [p, p+size) readable and writable, or inaccessible (a guard: any
 * access faults).  Failure (the process is out of VMAs) is not an error
 * for a guard, which only catches misuse; but memory that must be
 * accessible and cannot be made so is fatal. */
void hak_os_protect(void *p, size_t size, bool access)
{
  if (size == 0) return;
  int saved = errno;
  if (mprotect(p, size, access ? PROT_READ | PROT_WRITE : PROT_NONE) != 0 && access)
    hak_fatal("mprotect failed", p);
  errno = saved;
}

/* Grow the mapping [p, p+old) to new bytes where it is (the address space
 * after it must be free).  false if it cannot. */
bool hak_os_grow_in_place(void *p, size_t old, size_t new)
{
  if (new > old && HAK_FAULT(HAK_FAULT_GROW)) return false;
  int saved = errno;
  void *r = mremap(p, old, new, 0);
  errno = saved;
  return r != MAP_FAILED;
}

/* Move the pages of [from, from+size) to dst, which the caller mapped, by
 * remapping page tables (nothing is copied).  The old range stays mapped,
 * reading as zero, so a racing reader of it never faults; the caller
 * unmaps it after a grace period.  false if the kernel cannot (before Linux
 * 5.7, MREMAP_DONTUNMAP does not exist): then nothing moved.
 * (On failure the kernel may already have unmapped dst -- MREMAP_FIXED
 * unmaps it first -- but only for an error after its up-front checks, in
 * practice the kernel's own allocation failing; the caller's munmap of dst
 * is then a no-op.) */
bool hak_os_move(void *from, size_t size, void *dst)
{
#ifdef MREMAP_DONTUNMAP
  if (HAK_FAULT(HAK_FAULT_MOVE)) return false;
  int saved = errno;
  void *r = mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst);
  errno = saved;
  return r == dst;
#else
  (void)from; (void)size; (void)dst;
  return false;
#endif
}

uint64_t hak_os_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* sched_getcpu: the kernel's rseq area or the vDSO, no system call. */
int hak_os_cpu(void) { return sched_getcpu(); }

int hak_os_tid(void) { return (int)syscall(SYS_gettid); }

size_t hak_os_read_file(const char *path, char *buf, size_t size)
{
  int saved = errno;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t n = 0;
  if (fd >= 0) {
    while (n + 1 < size) {
      ssize_t r = read(fd, buf + n, size - 1 - n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      n += (size_t)r;
    }
    close(fd);
  }
  buf[n] = 0;
  errno = saved;
  return n;
}

/* The doorbell: 1 from the waiter's arm until it is rung, 0 otherwise, and
 * 2 while the waiter sleeps with a deadline.  The waiter arms (stores 1),
 * looks for work once more, then sleeps only while the word is still what
 * it left there; a ringer publishes its work, then reads the word and, if
 * it is 1, exchanges it to 0 and wakes the waiter.  Either the waiter's look
 * sees the work or the ringer sees the 1 and the sleep returns (the word
 * changed, or the wake reaches it).  The seq_cst store and fence keep the
 * arm before the look and the publication before the read (the
 * store-buffering pattern), which the waiter's and the ringer's own locks,
 * release and acquire only, would not.  A waiter with a deadline (2) is not
 * woken: it wakes by then and looks again, and the work rung for (pages
 * just cached) falls due after the work it already waits for, at most a
 * cache delay later.  So a program that frees large blocks in a loop makes
 * no futex call per free. */
static _Atomic(uint32_t) bell;

void hak_os_bell_arm(void)
{
  atomic_store(&bell, 1);
  atomic_thread_fence(memory_order_seq_cst);
}

void hak_os_bell_wait(uint64_t ms)
{
  struct timespec ts = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };
  uint32_t armed = 1;
  if (ms != 0) {
    if (!atomic_compare_exchange_strong(&bell, &armed, 2)) return;  /* rung meanwhile */
    armed = 2;
  }
  syscall(SYS_futex, &bell, FUTEX_WAIT_PRIVATE, armed, ms != 0 ? &ts : NULL, NULL, 0);
}

/* The bell was read as 1: wake the waiter unless another ringer did. */
static void bell_wake_armed(void)
{
  if (atomic_exchange(&bell, 0) == 1) syscall(SYS_futex, &bell, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void hak_os_bell_ring(void)
{
  atomic_thread_fence(memory_order_seq_cst);
  /* 0: nobody sleeps; 2: the waiter wakes by its deadline. */
  if (atomic_load_explicit(&bell, memory_order_relaxed) == 1) bell_wake_armed();
}

/* The caller's seq_cst read-modify-write and this seq_cst load are in the
 * single total order with the waiter's arm and fence: the same
 * store-buffering guarantee without a fence of its own (on x86 the load is
 * a plain move). */
void hak_os_bell_ring_after_rmw(void)
{
  if (atomic_load_explicit(&bell, memory_order_seq_cst) == 1) bell_wake_armed();
}

void hak_os_bell_wake(void)
{
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&bell, memory_order_relaxed) == 0) return;
  if (atomic_exchange(&bell, 0) != 0) syscall(SYS_futex, &bell, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void hak_write_stderr(const char *s)
{
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) { if (w < 0 && errno == EINTR) continue; return; }
    s += w;
    n -= (size_t)w;
  }
}

/* Detected heap corruption: a clear message and abort(), never silent damage. */
_Noreturn void hak_fatal(const char *what, const void *p)
{
  char buf[256], hex[19];
  uintptr_t a = (uintptr_t)p;
  hex[0] = '0'; hex[1] = 'x';
  for (int i = 0; i < 16; i++) hex[2 + i] = "0123456789abcdef"[(a >> (60 - 4 * i)) & 15];
  hex[18] = 0;
  buf[0] = 0;
  strcat(buf, "hakmem: fatal: ");
  strncat(buf, what, 200);
  strcat(buf, " (pointer ");
  strcat(buf, hex);
  strcat(buf, ")\n");
  hak_write_stderr(buf);
  abort();
}
