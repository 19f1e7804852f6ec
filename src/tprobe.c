/* The thread probe: whether another thread of the process is blocked in
 * the kernel outside hakmem's code (heap.c, "idle heaps", takes an idle
 * thread's thread cache and current slabs only then).
 *
 * What it reads, all Linux's own accounts of a thread:
 *   - /proc/self/task/TID/syscall: "running" while the thread is on a CPU
 *     (the kernel then declines to sample it); else the number of the
 *     system call it is blocked in (or, blocked in a page fault, the fault's
 *     error code; -1 when stopped elsewhere), its arguments, and its user
 *     stack pointer and program counter, read while the thread stays off
 *     the CPU;
 *   - /proc/self/task/TID/status: voluntary_ctxt_switches and
 *     nonvoluntary_ctxt_switches, which grow each time the thread leaves a
 *     CPU: unchanged across the look, with the thread off a CPU at both
 *     ends, the thread did not run in between;
 *   - the thread's stack, from its stack pointer to the end of the mapping
 *     that holds it (/proc/self/maps), read with process_vm_readv, which
 *     fails on an unmapped page instead of faulting.
 * A thread interrupted inside hakmem (a fast path that a signal handler
 * interrupted, the handler then blocked; a slow path blocked in mmap) has
 * hakmem's address on that stack: the interrupted program counter in the
 * signal frame, or a return address.  A thread whose stack pointer is not
 * in the mapping of the stack it took its heap on is refused: a handler on
 * an alternate signal stack (the frames it interrupted stay on the
 * thread's stack, unread), a coroutine's stack.  What the probe cannot
 * tell apart, an alternate stack carved out of the thread's own stack
 * above the frames it interrupted, leaves one case: a signal that arrives
 * while hakmem's lock-free path is in a call out of hakmem (the RCU read
 * lock, memcpy) has no hakmem address in the frames read; so no such path
 * uses its heap after such a call without reading hak_tls_heap again
 * (free.c, alloc.c).  Words that only look like
 * hakmem's addresses make the probe say no: a missed chance, never a wrong
 * yes.  hakmem's code is the executable segment of the shared object that
 * holds it (dl_iterate_phdr); linked into the program, hakmem's code is not
 * told apart from the program's, and the probe is not used.
 *
 * The probe takes no lock of its own and allocates nothing; it runs on the
 * purger thread only (holding an idle heap's lock), a few times a second at
 * most.  Finding hakmem's code (hak_tprobe_init) takes the loader's lock,
 * so the purger does it once, at its start, holding nothing. */
#include "tprobe.h"
#include "os.h"

#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define STACK_SCAN_MAX ((size_t)16 << 20)   /* a deeper stack: no */

/* hakmem's code, found once by hak_tprobe_init; the purger's alone.
 * text_state: 0 not looked yet, 1 found in a shared object, 2 none usable. */
static uintptr_t text_lo, text_hi;
static int text_state;

static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t me = (uintptr_t)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (me >= lo && me < lo + ph->p_memsz) {
      /* The program itself ("" names it): its own code would count. */
      if (info->dlpi_name == NULL || info->dlpi_name[0] == 0) return 2;
      text_lo = lo;
      text_hi = lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

static bool in_text(uintptr_t a) { return a >= text_lo && a < text_hi; }

static bool task_file(char *path, size_t n, int tid, const char *name)
{
  int k = snprintf(path, n, "/proc/self/task/%d/%s", tid, name);
  return k > 0 && (size_t)k < n;
}

/* The thread's two switch counts. */
static bool read_switches(int tid, unsigned long sw[2])
{
  char path[64], buf[2048];
  if (!task_file(path, sizeof path, tid, "status") || hak_os_read_file(path, buf, sizeof buf) == 0) return false;
  static const char *const key[2] = { "\nvoluntary_ctxt_switches:", "\nnonvoluntary_ctxt_switches:" };
  for (int i = 0; i < 2; i++) {
    const char *at = strstr(buf, key[i]);
    if (at == NULL) return false;
    sw[i] = strtoul(at + strlen(key[i]), NULL, 10);
  }
  return true;
}

/* The syscall line of a thread blocked in the kernel (text kept in line,
 * to compare two samples), its stack pointer and program counter. */
static bool read_blocked(int tid, char *line, size_t n, uintptr_t *sp, uintptr_t *pc)
{
  char path[64];
  if (!task_file(path, sizeof path, tid, "syscall") || hak_os_read_file(path, line, n) == 0) return false;
  if (line[0] < '0' || line[0] > '9') return false;   /* "running", or -1: not blocked in the kernel */
  unsigned long long v[9];  /* number, six arguments, stack pointer, program counter */
  char *s = line;
  for (int i = 0; i < 9; i++) {
    char *e;
    v[i] = strtoull(s, &e, i == 0 ? 10 : 16);
    if (e == s) return false;
    s = e;
  }
  *sp = (uintptr_t)v[7];
  *pc = (uintptr_t)v[8];
  return true;
}

/* The mapping [start, end) that holds a, from /proc/self/maps. */
static bool mapping_of(uintptr_t a, uintptr_t *start, uintptr_t *end)
{
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool found = false, more = true;
  while (!found && more) {
    ssize_t k = read(fd, buf + have, sizeof buf - 1 - have);
    more = k > 0;
    if (k > 0) have += (size_t)k;
    buf[have] = 0;
    char *line = buf, *nl;
    while (!found && (nl = strchr(line, '\n')) != NULL) {
      char *e;
      unsigned long long lo = strtoull(line, &e, 16), hi = *e == '-' ? strtoull(e + 1, NULL, 16) : 0;
      if (a >= lo && a < hi) {
        *start = (uintptr_t)lo;
        *end = (uintptr_t)hi;
        found = true;
      }
      line = nl + 1;
    }
    have = strlen(line);
    if (have == sizeof buf - 1) break;  /* a line longer than the buffer */
    memmove(buf, line, have);
  }
  close(fd);
  return found;
}

/* No word of [sp, end) is an address in hakmem's code. */
static bool stack_clean(uintptr_t sp, uintptr_t end)
{
  uintptr_t w[256];
  sp &= ~(uintptr_t)(sizeof(uintptr_t) - 1);
  if (end <= sp || end - sp > STACK_SCAN_MAX) return false;
  pid_t self = getpid();
  for (uintptr_t a = sp; a < end;) {
    size_t n = end - a < sizeof w ? end - a : sizeof w;
    struct iovec local = { w, n }, remote = { (void *)a, n };
    if (process_vm_readv(self, &local, 1, &remote, 1, 0) != (ssize_t)n) return false;
    for (size_t i = 0; i < n / sizeof w[0]; i++)
      if (in_text(w[i])) return false;
    a += n;
  }
  return true;
}

void hak_tprobe_init(void)
{
  if (text_state == 0) text_state = dl_iterate_phdr(find_text, (void *)(uintptr_t)&hak_tprobe_init) == 1 ? 1 : 2;
}

bool hak_tprobe_usable(void) { return text_state == 1; }

bool hak_tprobe_blocked(int tid)
{
  char line[256];
  uintptr_t sp, pc;
  return tid > 0 && hak_tprobe_usable() && read_blocked(tid, line, sizeof line, &sp, &pc);
}

bool hak_tprobe_outside(int tid, uintptr_t on_stack)
{
  if (tid <= 0 || !hak_tprobe_usable()) return false;
  unsigned long before[2], after[2];
  char first[256], second[256];
  uintptr_t sp, pc, sp2, pc2, start = 0, end = 0;
  if (!read_switches(tid, before) || !read_blocked(tid, first, sizeof first, &sp, &pc)) return false;
  if (in_text(pc) || !mapping_of(sp, &start, &end) || on_stack < start || on_stack >= end || !stack_clean(sp, end))
    return false;
  /* The same call, and no switch between: the stack read was the stack. */
  if (!read_blocked(tid, second, sizeof second, &sp2, &pc2) || strcmp(first, second) != 0) return false;
  return read_switches(tid, after) && before[0] == after[0] && before[1] == after[1];
}
