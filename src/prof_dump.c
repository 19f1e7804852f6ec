/* The heap profiler's output: at exit, on hak_prof_dump, and from the
 * HAKMEM_PROF_SIGNAL handler, in the text format gperftools' heap profiler
 * writes (heap-profile-table.cc) and `google-pprof` reads:
 *
 *   heap profile: <live blocks>: <live bytes> [<alloc blocks>: <alloc bytes>] @ heapprofile
 *   <live blocks>: <live bytes> [<alloc blocks>: <alloc bytes>] @ 0xpc1 0xpc2 ...   (one line per site)
 *
 *   MAPPED_LIBRARIES:
 *   <a copy of /proc/self/maps>   (of /proc/thread-self/maps: see w_maps)
 *
 * The figures are the profiler's estimates (prof.c), already scaled for the
 * sampling: the type "heapprofile" tells pprof not to scale them again.
 * The remote file (<file>.remote) has the same format; both pairs of a
 * site's line hold the bytes and blocks of its blocks that a thread other
 * than the allocating one freed.
 *
 * hak_prof_dump (alloc.c, the API) calls hak_prof_write.
 *
 * Everything that writes a profile is async-signal-safe: open, read,
 * write, close, getpid, atomic loads and a buffer on the stack (no stdio,
 * no malloc).  The leak report (at exit only) also calls dladdr. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "prof_dump.h"
#include "fmt.h"
#include "os.h"
#include "options.h"
#include "prof.h"

static pid_t start_pid;                 /* written by hak_prof_dump_init, read-only after */
static _Atomic(uint32_t) signal_dumps;  /* profiles written by the signal handler */

/* ------------------------------------------------------------- profiles */

/* A site's figures: live or remote, bytes and blocks. */
typedef struct {
  uint64_t live_blocks, live_bytes, alloc_blocks, alloc_bytes;
} figures_t;

static uint64_t blocks_of(uint64_t fx) { return (fx + HAK_PROF_FX / 2) / HAK_PROF_FX; }

static uint64_t load(_Atomic(uint64_t) *c) { return atomic_load_explicit(c, memory_order_relaxed); }

/* The site i if it is written (its key a hash: acquire, then its stack may
 * be read), with its figures; NULL otherwise. */
static const hak_prof_site_t *site_figures(hak_prof_tables_t *t, size_t i, bool remote, figures_t *f)
{
  hak_prof_site_t *s = &t->sites[i];
  if (atomic_load_explicit(&s->key, memory_order_acquire) < 2) return NULL;
  if (remote) {
    f->live_bytes = f->alloc_bytes = load(&s->remote_bytes);
    f->live_blocks = f->alloc_blocks = blocks_of(load(&s->remote_fx));
  } else {
    f->live_bytes = load(&s->live_bytes);
    f->live_blocks = blocks_of(load(&s->live_fx));
    f->alloc_bytes = load(&s->alloc_bytes);
    f->alloc_blocks = blocks_of(load(&s->alloc_fx));
  }
  return s;
}

static void w_figures(hak_out_t *w, const figures_t *f)
{
  hak_out_u64(w, f->live_blocks, 6);
  hak_out_str(w, ": ");
  hak_out_u64(w, f->live_bytes, 8);
  hak_out_str(w, " [");
  hak_out_u64(w, f->alloc_blocks, 6);
  hak_out_str(w, ": ");
  hak_out_u64(w, f->alloc_bytes, 8);
  hak_out_str(w, "] @");
}

/* Copy the process's maps: /proc/thread-self/maps, which a process whose
 * main thread has exited (pthread_exit) still has (/proc/self/maps is then
 * empty). */
static void w_maps(hak_out_t *w)
{
  int fd = open("/proc/thread-self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char b[1024];
  for (;;) {
    ssize_t n = read(fd, b, sizeof b);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    hak_out_bytes(w, b, (size_t)n);
  }
  close(fd);
}

/* Write the profile (or the remote-free profile) to path; 0, or -1 with
 * errno. */
static int write_profile(const char *path, bool remote)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  hak_out_t w = { .fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) };
  if (w.fd < 0) return -1;
  figures_t total = { 0, 0, 0, 0 }, f;
  for (size_t i = 0; i < HAK_PROF_SITES; i++) {
    if (site_figures(t, i, remote, &f) == NULL) continue;
    total.live_blocks += f.live_blocks;
    total.live_bytes += f.live_bytes;
    total.alloc_blocks += f.alloc_blocks;
    total.alloc_bytes += f.alloc_bytes;
  }
  hak_out_str(&w, "heap profile: ");
  w_figures(&w, &total);
  hak_out_str(&w, " heapprofile\n");
  for (size_t i = 0; i < HAK_PROF_SITES; i++) {
    const hak_prof_site_t *s = site_figures(t, i, remote, &f);
    if (s == NULL || f.alloc_bytes == 0) continue;
    w_figures(&w, &f);
    for (uint32_t d = 0; d < s->depth; d++) {
      hak_out_str(&w, " ");
      hak_out_hex(&w, s->pc[d]);
    }
    hak_out_str(&w, "\n");
  }
  hak_out_str(&w, "\nMAPPED_LIBRARIES:\n");
  w_maps(&w);
  hak_out_flush(&w);
  int err = w.err;
  if (close(w.fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err == 0) return 0;
  errno = err;
  return -1;
}

/* path + suffix (NULL: none) + ".n" (n = 0: none) into out; false if too long. */
static bool make_path(char *out, size_t size, const char *path, const char *suffix, uint64_t n)
{
  size_t len = 0;
  const char *parts[2] = { path, suffix };
  for (int k = 0; k < 2; k++)
    for (const char *c = parts[k]; c != NULL && *c; c++) {
      if (len + 1 >= size) return false;
      out[len++] = *c;
    }
  if (n != 0) {
    char b[24];
    int i = sizeof b;
    do {
      b[--i] = (char)('0' + n % 10);
      n /= 10;
    } while (n != 0);
    b[--i] = '.';
    for (; i < (int)sizeof b; i++) {
      if (len + 1 >= size) return false;
      out[len++] = b[i];
    }
  }
  out[len] = 0;
  return true;
}

/* The profile's path by default: HAKMEM_PROF_FILE (in a fork child:
 * FILE.PID), else hakmem.PID.heap in the working directory. */
static bool default_path(char *out, size_t size)
{
  pid_t pid = getpid();
  if (hak_opt.prof_file[0] != 0) return make_path(out, size, hak_opt.prof_file, NULL, pid != start_pid ? (uint64_t)pid : 0);
  if (!make_path(out, size, "hakmem", NULL, (uint64_t)pid)) return false;
  size_t len = strlen(out);
  if (len + 6 > size) return false;
  memcpy(out + len, ".heap", 6);
  return true;
}

/* The profile to path, the remote frees to path.remote. */
static int dump(const char *path)
{
  char remote[4200];
  if (!make_path(remote, sizeof remote, path, ".remote", 0)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  if (write_profile(path, false) != 0) return -1;
  return write_profile(remote, true);
}

int hak_prof_write(const char *path)
{
  if (!hak_prof_active()) {
    errno = ENOTSUP;   /* HAKMEM_PROF=1 was not set at start-up (or the profiler could not start) */
    return -1;
  }
  char def[4200];
  if (path == NULL) {
    if (!default_path(def, sizeof def)) {
      errno = ENAMETOOLONG;
      return -1;
    }
    path = def;
  }
  return dump(path);
}

/* ------------------------------------------------------------- signal */

/* HAKMEM_PROF_SIGNAL: write PATH.N and PATH.N.remote (N = 1, 2, ...) from
 * the handler itself, with async-signal-safe calls only. */
static void on_signal(int sig)
{
  (void)sig;
  int saved = errno;
  char path[4200];
  uint32_t n = atomic_fetch_add_explicit(&signal_dumps, 1, memory_order_relaxed) + 1;
  char base[4200];
  if (default_path(base, sizeof base) && make_path(path, sizeof path, base, NULL, n)) (void)dump(path);
  errno = saved;
}

void hak_prof_dump_init(void)
{
  start_pid = getpid();
  if (!hak_prof_active() || hak_opt.prof_signal == 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(hak_opt.prof_signal, &sa, NULL) != 0)
    hak_write_stderr("hakmem: HAKMEM_PROF_SIGNAL: cannot install the handler (not a catchable signal)\n");
}

/* ----------------------------------------------------------------- exit */

/* The leak report's frame: address, symbol+offset and object (dladdr). */
static void leak_frame(hak_out_t *o, unsigned i, uintptr_t pc)
{
  Dl_info info;
  hak_out_str(o, "hakmem:     #");
  hak_out_u64(o, i, 0);
  hak_out_str(o, " ");
  hak_out_hex(o, pc);
  if (dladdr((void *)(pc - (i > 0)), &info) != 0) {
    if (info.dli_sname != NULL) {
      hak_out_str(o, " ");
      hak_out_str(o, info.dli_sname);
      hak_out_str(o, "+");
      hak_out_hex(o, pc - (uintptr_t)info.dli_saddr);
    }
    if (info.dli_fname != NULL) {
      hak_out_str(o, " (");
      hak_out_str(o, info.dli_fname);
      hak_out_str(o, ")");
    }
  }
  hak_out_str(o, "\n");
}

#define LEAKS_SHOWN 20

/* HAKMEM_PROF_LEAKS=1: the sites with live sampled blocks, largest first. */
static void leak_report(hak_prof_tables_t *t)
{
  static uint16_t order[HAK_PROF_SITES];   /* exit only: one caller */
  size_t n = 0;
  uint64_t bytes = 0, blocks = 0;
  figures_t f;
  for (size_t i = 0; i < HAK_PROF_SITES; i++) {
    if (site_figures(t, i, false, &f) == NULL || f.live_bytes == 0) continue;
    size_t k = n++;
    for (; k > 0; k--) {   /* insertion: by live bytes, decreasing */
      figures_t g;
      site_figures(t, order[k - 1], false, &g);
      if (g.live_bytes >= f.live_bytes) break;
      order[k] = order[k - 1];
    }
    order[k] = (uint16_t)i;
    bytes += f.live_bytes;
    blocks += f.live_blocks;
  }
  hak_out_t o = { .fd = 2 };
  hak_out_str(&o, "hakmem: leaks: ");
  hak_out_u64(&o, n, 0);
  hak_out_str(&o, " sites with sampled blocks live at exit, about ");
  hak_out_u64(&o, bytes, 0);
  hak_out_str(&o, " bytes in ");
  hak_out_u64(&o, blocks, 0);
  hak_out_str(&o, " blocks (estimates)\n");
  for (size_t k = 0; k < n && k < LEAKS_SHOWN; k++) {
    const hak_prof_site_t *s = site_figures(t, order[k], false, &f);
    hak_out_str(&o, "hakmem: leak: about ");
    hak_out_u64(&o, f.live_bytes, 0);
    hak_out_str(&o, " bytes in ");
    hak_out_u64(&o, f.live_blocks, 0);
    hak_out_str(&o, " blocks, allocated at:\n");
    for (uint32_t d = 0; d < s->depth; d++) leak_frame(&o, d, s->pc[d]);
    hak_out_flush(&o);
  }
  if (n > LEAKS_SHOWN) {
    hak_out_str(&o, "hakmem: leaks: ");
    hak_out_u64(&o, n - LEAKS_SHOWN, 0);
    hak_out_str(&o, " more sites (the profile lists them all)\n");
  }
  hak_out_flush(&o);
}

static void summary(const char *path, int rc, int err)
{
  hak_prof_counts_t c;
  hak_prof_get_counts(&c);
  hak_out_t o = { .fd = 2 };
  hak_out_str(&o, "hakmem: prof:");
  hak_out_kv(&o, "samples", load(&c.samples));
  hak_out_kv(&o, "lost_sites", load(&c.lost_sites));
  hak_out_kv(&o, "lost_blocks", load(&c.lost_blocks));
  hak_out_kv(&o, "lost_fork", load(&c.lost_fork));
  hak_out_kv(&o, "recursions", load(&c.recursions));
  hak_out_str(&o, " file=");
  hak_out_str(&o, path);
  if (rc != 0) {
    hak_out_str(&o, " (not written: ");
    const char *name = strerrorname_np(err);   /* no locale, no allocation */
    hak_out_str(&o, name != NULL ? name : "error");
    hak_out_str(&o, ")");
  }
  hak_out_str(&o, "\n");
  hak_out_flush(&o);
}

__attribute__((destructor)) static void hak_prof_at_exit(void)
{
  if (!hak_prof_active()) return;   /* published once hakmem is ready */
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  char path[4200];
  int rc = -1, err = ENAMETOOLONG;
  if (default_path(path, sizeof path)) {
    rc = dump(path);
    err = errno;
  } else {
    path[0] = 0;
  }
  if (rc != 0 || hak_opt.prof_leaks || hak_opt.verbose) {
    hak_prof_capture_guard(true);   /* a malloc in dladdr would be counted */
    if (hak_opt.prof_leaks) leak_report(t);
    hak_prof_capture_guard(false);
    summary(path, rc, err);
  }
}
