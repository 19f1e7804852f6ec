/* mc_load - a verifying load client for memcached (text protocol over TCP).
 *
 *   mc_load freeport              print a TCP port that is free on 127.0.0.1
 *   mc_load wait PORT SECS        wait until the server answers "version"
 *   mc_load load PORT [-t THREADS] [-d SECS] [-k KEYS] [-m MIN] [-M MAX] [-s SEED]
 *   mc_load stats PORT            print version and some counters on one line
 *
 * load: THREADS client threads (default 4), one connection each, run a
 * set/get/delete mix (35/50/15) for SECS seconds (default 10) over KEYS keys
 * per thread (default 256).  Each thread owns its keys, so it knows exactly
 * what the server must hold: every value is a function of (key, version) --
 * its length, log-uniform in [MIN, MAX] bytes (default 8 B .. 256 KiB), and
 * its bytes -- and the version travels in the item's flags.  Every reply is
 * checked: a value read back must match byte for byte, a stored key must be
 * found (the server is sized so that nothing is evicted), a deleted one must
 * not.  At the end each thread deletes all its keys, checking each reply
 * (DELETED if it held the key, NOT_FOUND otherwise).
 *
 * Output (stdout), one line:
 *   RESULT ops=N ops_per_s=R sets=N gets=N hits=N deletes=N bytes_out=N
 *          bytes_verified=N errors=N
 * Exit status: 0 if no error, 1 on any mismatch or protocol error (the first
 * few are described on stderr), 2 on usage or connection errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "support/clock.h"
#include "support/rng.h"

#define MC_IO_TIMEOUT_S 20 /* a reply slower than this is an error */
#define MC_MAX_REPORTS 10  /* errors described on stderr */

static atomic_int mc_reports;

static void mc_error(const char *fmt, ...)
{
  if (atomic_fetch_add_explicit(&mc_reports, 1, memory_order_relaxed) >= MC_MAX_REPORTS) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("mc_load: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ------------------------------------------------------------ values */

typedef struct {
  uint32_t min, max;  /* value sizes, min >= 1 */
  int lg_min, lg_max; /* floor(log2) of min and max */
} mc_sizes_t;

static int mc_lg(uint32_t v) { return 31 - __builtin_clz(v); }

/* Length of the value of (key seed, version): a power-of-two band chosen
 * uniformly, then a length uniform in that band, clamped to [min, max]. */
static uint32_t mc_value_len(const mc_sizes_t *sz, uint64_t h)
{
  int bands = sz->lg_max - sz->lg_min + 1;
  int b = sz->lg_min + (int)(h % (uint64_t)bands);
  uint64_t lo = (uint64_t)1 << b, span = lo; /* [2^b, 2^(b+1)) */
  uint64_t n = lo + (h >> 16) % span;
  if (n < sz->min) n = sz->min;
  if (n > sz->max) n = sz->max;
  return (uint32_t)n;
}

/* The bytes of a value: xorshift64* words from the (key, version) hash. */
static void mc_fill(unsigned char *dst, size_t n, uint64_t h)
{
  uint64_t x = h | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    uint64_t w = x * 0x2545f4914f6cdd1dULL;
    memcpy(dst + i, &w, 8);
  }
  if (i < n) {
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    uint64_t w = x * 0x2545f4914f6cdd1dULL;
    memcpy(dst + i, &w, n - i);
  }
}

/* ------------------------------------------------------------ sockets */

static int mc_connect(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {.tv_sec = MC_IO_TIMEOUT_S};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/* A buffered reader over one connection.
 * Invariant: buf[pos..len) holds received bytes not yet consumed. */
typedef struct {
  int fd;
  size_t pos, len;
  char buf[1 << 16];
} mc_reader_t;

static int mc_fill_buf(mc_reader_t *r)
{
  if (r->pos == r->len) r->pos = r->len = 0;
  if (r->len == sizeof r->buf) { /* compact */
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
  }
  ssize_t n;
  do n = read(r->fd, r->buf + r->len, sizeof r->buf - r->len);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1; /* EOF, error or timeout */
  r->len += (size_t)n;
  return 0;
}

/* One line without its "\r\n" into out (NUL-terminated); -1 on EOF or a
 * line longer than cap-1. */
static int mc_line(mc_reader_t *r, char *out, size_t cap)
{
  for (;;) {
    char *s = r->buf + r->pos;
    size_t avail = r->len - r->pos;
    char *nl = memchr(s, '\n', avail);
    if (nl != NULL) {
      size_t n = (size_t)(nl - s);
      if (n == 0 || s[n - 1] != '\r' || n > cap) return -1;
      memcpy(out, s, n - 1);
      out[n - 1] = '\0';
      r->pos += n + 1;
      return 0;
    }
    if (avail >= cap) return -1;
    if (r->pos > 0) { /* keep the partial line at the start */
      memmove(r->buf, s, avail);
      r->pos = 0;
      r->len = avail;
    }
    if (mc_fill_buf(r) != 0) return -1;
  }
}

static int mc_exact(mc_reader_t *r, unsigned char *dst, size_t n)
{
  while (n > 0) {
    if (r->pos == r->len && mc_fill_buf(r) != 0) return -1;
    size_t k = r->len - r->pos;
    if (k > n) k = n;
    memcpy(dst, r->buf + r->pos, k);
    r->pos += k;
    dst += k;
    n -= k;
  }
  return 0;
}

static int mc_write_all(int fd, struct iovec *iov, int cnt)
{
  while (cnt > 0) {
    ssize_t n = writev(fd, iov, cnt);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    while (cnt > 0 && (size_t)n >= iov->iov_len) {
      n -= (ssize_t)iov->iov_len;
      iov++;
      cnt--;
    }
    if (cnt > 0) {
      iov->iov_base = (char *)iov->iov_base + n;
      iov->iov_len -= (size_t)n;
    }
  }
  return 0;
}

static int mc_send_str(int fd, const char *s)
{
  struct iovec v = {.iov_base = (void *)s, .iov_len = strlen(s)};
  return mc_write_all(fd, &v, 1);
}

/* ------------------------------------------------------------ load */

/* One client thread: its inputs, then its counts.  Written only by that
 * thread until the main thread joins it and sums the counts. */
typedef struct {
  int port, tid, nkeys;
  double deadline;
  uint64_t seed;
  const mc_sizes_t *sz;
  uint64_t ops, sets, gets, hits, deletes, bytes_out, bytes_verified, errors;
} mc_thread_t;

/* Per key: the current version (0: never set) and whether the server holds
 * it.  Only the owning thread touches its keys, so this is exact. */
typedef struct {
  uint32_t version;
  uint8_t present;
} mc_key_t;

static uint64_t mc_key_hash(const mc_thread_t *t, int k, uint32_t version)
{
  return ts_mix64(t->seed ^ ts_mix64(((uint64_t)(uint32_t)t->tid << 40) ^ ((uint64_t)(uint32_t)k << 20) ^ 0x5bd1e995u) ^
                ts_mix64(version));
}

static int mc_key_name(const mc_thread_t *t, int k, char *out, size_t cap)
{
  return snprintf(out, cap, "hk:%016" PRIx64 ":%d:%d", t->seed, t->tid, k);
}

#define MC_FAIL(...) do { mc_error(__VA_ARGS__); t->errors++; return -1; } while (0)

static int mc_do_set(mc_thread_t *t, mc_reader_t *r, int k, mc_key_t *st, unsigned char *val)
{
  char key[64], hdr[128], line[256];
  uint32_t v = st->version + 1;
  uint64_t h = mc_key_hash(t, k, v);
  uint32_t len = mc_value_len(t->sz, h);
  mc_fill(val, len, h);
  mc_key_name(t, k, key, sizeof key);
  int hl = snprintf(hdr, sizeof hdr, "set %s %u 0 %u\r\n", key, v, len);
  struct iovec iov[3] = {{hdr, (size_t)hl}, {val, len}, {"\r\n", 2}};
  if (mc_write_all(r->fd, iov, 3) != 0) MC_FAIL("thread %d: set %s: send failed: %s", t->tid, key, strerror(errno));
  if (mc_line(r, line, sizeof line) != 0) MC_FAIL("thread %d: set %s (%u bytes): no reply", t->tid, key, len);
  if (strcmp(line, "STORED") != 0) MC_FAIL("thread %d: set %s (%u bytes): reply '%s'", t->tid, key, len, line);
  st->version = v;
  st->present = 1;
  t->sets++;
  t->bytes_out += len;
  return 0;
}

static int mc_do_get(mc_thread_t *t, mc_reader_t *r, int k, const mc_key_t *st, unsigned char *got,
                     unsigned char *want)
{
  char key[64], req[96], line[256], rkey[64];
  mc_key_name(t, k, key, sizeof key);
  snprintf(req, sizeof req, "get %s\r\n", key);
  if (mc_send_str(r->fd, req) != 0) MC_FAIL("thread %d: get %s: send failed: %s", t->tid, key, strerror(errno));
  if (mc_line(r, line, sizeof line) != 0) MC_FAIL("thread %d: get %s: no reply", t->tid, key);
  t->gets++;
  if (strcmp(line, "END") == 0) {
    if (st->present) MC_FAIL("thread %d: get %s: miss, but version %u was stored", t->tid, key, st->version);
    return 0;
  }
  unsigned flags;
  unsigned long len;
  if (sscanf(line, "VALUE %63s %u %lu", rkey, &flags, &len) != 3 || strcmp(rkey, key) != 0)
    MC_FAIL("thread %d: get %s: bad reply '%s'", t->tid, key, line);
  if (!st->present) MC_FAIL("thread %d: get %s: hit (flags %u), but the key was deleted", t->tid, key, flags);
  if (flags != st->version) MC_FAIL("thread %d: get %s: version %u, expected %u", t->tid, key, flags, st->version);
  uint64_t h = mc_key_hash(t, k, st->version);
  uint32_t want_len = mc_value_len(t->sz, h);
  if (len != want_len) MC_FAIL("thread %d: get %s: %lu bytes, expected %u", t->tid, key, len, want_len);
  if (mc_exact(r, got, len + 2) != 0) MC_FAIL("thread %d: get %s: short value", t->tid, key);
  mc_fill(want, len, h);
  if (memcmp(got, want, len) != 0 || got[len] != '\r' || got[len + 1] != '\n') {
    size_t i = 0;
    while (i < len && got[i] == want[i]) i++;
    MC_FAIL("thread %d: get %s (version %u, %lu bytes): content differs at byte %zu", t->tid, key, st->version,
            len, i);
  }
  if (mc_line(r, line, sizeof line) != 0 || strcmp(line, "END") != 0)
    MC_FAIL("thread %d: get %s: no END after the value", t->tid, key);
  t->hits++;
  t->bytes_verified += len;
  return 0;
}

static int mc_do_delete(mc_thread_t *t, mc_reader_t *r, int k, mc_key_t *st)
{
  char key[64], req[96], line[256];
  mc_key_name(t, k, key, sizeof key);
  snprintf(req, sizeof req, "delete %s\r\n", key);
  if (mc_send_str(r->fd, req) != 0) MC_FAIL("thread %d: delete %s: send failed: %s", t->tid, key, strerror(errno));
  if (mc_line(r, line, sizeof line) != 0) MC_FAIL("thread %d: delete %s: no reply", t->tid, key);
  const char *want = st->present ? "DELETED" : "NOT_FOUND";
  if (strcmp(line, want) != 0) MC_FAIL("thread %d: delete %s: reply '%s', expected %s", t->tid, key, line, want);
  st->present = 0;
  t->deletes++;
  return 0;
}

static void *mc_thread(void *arg)
{
  mc_thread_t *t = arg;
  mc_reader_t *r = malloc(sizeof *r);
  mc_key_t *keys = calloc((size_t)t->nkeys, sizeof *keys);
  unsigned char *got = malloc((size_t)t->sz->max + 2), *want = malloc(t->sz->max);
  if (r == NULL || keys == NULL || got == NULL || want == NULL) {
    mc_error("thread %d: out of memory", t->tid);
    t->errors++;
    goto out;
  }
  r->pos = r->len = 0;
  r->fd = mc_connect(t->port);
  if (r->fd < 0) {
    mc_error("thread %d: cannot connect to port %d: %s", t->tid, t->port, strerror(errno));
    t->errors++;
    goto out;
  }
  uint64_t rng = ts_mix64(t->seed ^ (uint64_t)(t->tid + 1) * 0x9e3779b97f4a7c15ULL);
  while (t->errors == 0) {
    if ((t->ops & 15) == 0 && ts_now() >= t->deadline) break;
    rng = ts_mix64(rng);
    int k = (int)(rng % (uint64_t)t->nkeys);
    unsigned dice = (unsigned)((rng >> 32) % 100);
    int rc;
    if (dice < 35) rc = mc_do_set(t, r, k, &keys[k], want);
    else if (dice < 85) rc = mc_do_get(t, r, k, &keys[k], got, want);
    else rc = mc_do_delete(t, r, k, &keys[k]);
    if (rc != 0) break;
    t->ops++;
  }
  /* Delete everything this thread stored, checking each reply. */
  for (int k = 0; k < t->nkeys && t->errors == 0; k++)
    if (keys[k].version != 0 && mc_do_delete(t, r, k, &keys[k]) == 0) t->ops++;
  close(r->fd);
out:
  free(r);
  free(keys);
  free(got);
  free(want);
  return NULL;
}

static int mc_load(int port, int argc, char **argv)
{
  int threads = 4, nkeys = 256, opt;
  double secs = 10;
  unsigned long min = 8, max = 256 * 1024;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  while ((opt = getopt(argc, argv, "t:d:k:m:M:s:")) != -1) {
    switch (opt) {
    case 't': threads = atoi(optarg); break;
    case 'd': secs = atof(optarg); break;
    case 'k': nkeys = atoi(optarg); break;
    case 'm': min = strtoul(optarg, NULL, 0); break;
    case 'M': max = strtoul(optarg, NULL, 0); break;
    case 's': seed = strtoull(optarg, NULL, 0); break;
    default: return 2;
    }
  }
  if (threads < 1 || threads > 256 || nkeys < 1 || secs <= 0 || min < 1 || max < min || max > (1u << 30)) {
    fprintf(stderr, "mc_load: bad load options\n");
    return 2;
  }
  mc_sizes_t sz = {.min = (uint32_t)min, .max = (uint32_t)max, .lg_min = mc_lg((uint32_t)min),
                   .lg_max = mc_lg((uint32_t)max)};
  mc_thread_t *ts = calloc((size_t)threads, sizeof *ts);
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  if (ts == NULL || ids == NULL) return 2;
  double start = ts_now();
  for (int i = 0; i < threads; i++) {
    ts[i] = (mc_thread_t){.port = port, .tid = i, .nkeys = nkeys, .deadline = start + secs, .seed = seed, .sz = &sz};
    if (pthread_create(&ids[i], NULL, mc_thread, &ts[i]) != 0) {
      fprintf(stderr, "mc_load: pthread_create failed\n");
      return 2;
    }
  }
  mc_thread_t sum = {0};
  for (int i = 0; i < threads; i++) {
    pthread_join(ids[i], NULL);
    sum.ops += ts[i].ops; sum.sets += ts[i].sets; sum.gets += ts[i].gets; sum.hits += ts[i].hits;
    sum.deletes += ts[i].deletes; sum.bytes_out += ts[i].bytes_out;
    sum.bytes_verified += ts[i].bytes_verified; sum.errors += ts[i].errors;
  }
  double el = ts_now() - start;
  printf("RESULT ops=%" PRIu64 " ops_per_s=%.0f sets=%" PRIu64 " gets=%" PRIu64 " hits=%" PRIu64
         " deletes=%" PRIu64 " bytes_out=%" PRIu64 " bytes_verified=%" PRIu64 " errors=%" PRIu64
         " threads=%d secs=%.2f\n",
         sum.ops, (double)sum.ops / el, sum.sets, sum.gets, sum.hits, sum.deletes, sum.bytes_out,
         sum.bytes_verified, sum.errors, threads, el);
  free(ts);
  free(ids);
  if (sum.errors != 0) return 1;
  if (sum.sets == 0 || sum.hits == 0) {
    fprintf(stderr, "mc_load: error: no set or no verified get in %.1f s\n", el);
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------ other modes */

static int mc_freeport(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
    perror("mc_load: freeport");
    return 2;
  }
  printf("%d\n", ntohs(a.sin_port));
  close(fd);
  return 0;
}

/* "version" on a fresh connection: 0 if the server answers VERSION. */
static int mc_version(int port, char *out, size_t cap)
{
  int fd = mc_connect(port);
  if (fd < 0) return -1;
  mc_reader_t *r = malloc(sizeof *r);
  int rc = -1;
  if (r != NULL) {
    r->fd = fd;
    r->pos = r->len = 0;
    if (mc_send_str(fd, "version\r\n") == 0 && mc_line(r, out, cap) == 0 && strncmp(out, "VERSION ", 8) == 0) rc = 0;
  }
  free(r);
  close(fd);
  return rc;
}

static int mc_wait(int port, double secs)
{
  char line[256];
  double end = ts_now() + secs;
  for (;;) {
    if (mc_version(port, line, sizeof line) == 0) return 0;
    if (ts_now() >= end) {
      fprintf(stderr, "mc_load: no memcached answering on port %d after %.0f s\n", port, secs);
      return 1;
    }
    struct timespec ts = {0, 50 * 1000 * 1000}; /* poll every 50 ms */
    nanosleep(&ts, NULL);
  }
}

/* Sends cmd and prints the values of the wanted STAT lines as name=value. */
static int mc_print_stats(mc_reader_t *r, const char *cmd, const char *const *names)
{
  char line[512], name[128], value[256];
  if (mc_send_str(r->fd, cmd) != 0) return -1;
  for (;;) {
    if (mc_line(r, line, sizeof line) != 0) return -1;
    if (strcmp(line, "END") == 0) return 0;
    if (sscanf(line, "STAT %127s %255s", name, value) != 2) return -1;
    for (const char *const *n = names; *n != NULL; n++)
      if (strcmp(*n, name) == 0) printf(" %s=%s", name, value);
  }
}

static int mc_stats(int port)
{
  static const char *const general[] = {"pid", "curr_items", "total_items", "bytes", "evictions",
                                        "curr_connections", "threads", "limit_maxbytes", NULL};
  static const char *const slabs[] = {"total_malloced", "active_slabs", NULL};
  char line[256];
  if (mc_version(port, line, sizeof line) != 0) {
    fprintf(stderr, "mc_load: stats: no answer to 'version' on port %d\n", port);
    return 1;
  }
  int fd = mc_connect(port);
  mc_reader_t *r = malloc(sizeof *r);
  if (fd < 0 || r == NULL) return 1;
  r->fd = fd;
  r->pos = r->len = 0;
  printf("STATS version=%s", line + 8);
  int rc = mc_print_stats(r, "stats\r\n", general) == 0 && mc_print_stats(r, "stats slabs\r\n", slabs) == 0 ? 0 : 1;
  printf("\n");
  if (rc != 0) fprintf(stderr, "mc_load: stats: bad reply\n");
  free(r);
  close(fd);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "freeport") == 0) return mc_freeport();
  if (argc >= 3) {
    int port = atoi(argv[2]);
    if (port <= 0 || port > 65535) {
      fprintf(stderr, "mc_load: bad port '%s'\n", argv[2]);
      return 2;
    }
    if (strcmp(argv[1], "wait") == 0 && argc == 4) return mc_wait(port, atof(argv[3]));
    if (strcmp(argv[1], "stats") == 0 && argc == 3) return mc_stats(port);
    if (strcmp(argv[1], "load") == 0) return mc_load(port, argc - 2, argv + 2);
  }
  fprintf(stderr,
          "usage: mc_load freeport | wait PORT SECS | stats PORT |\n"
          "       load PORT [-t THREADS] [-d SECS] [-k KEYS] [-m MIN] [-M MAX] [-s SEED]\n");
  return 2;
}
