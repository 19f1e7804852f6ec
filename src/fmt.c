/* Text output without allocation: start-up messages and the statistics
 * report are built in a buffer on the caller's stack and written with
 * write(2) (or, for hak_stats_print(FILE *), fwrite), so they can run inside
 * initialisation or a destructor, where malloc may not be usable. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"

void hak_out_flush(hak_out_t *o)
{
  if (o->len == 0) return;
  if (o->file != NULL) {
    (void)!fwrite(o->buf, 1, o->len, (FILE *)o->file);
  } else {
    int saved = errno;
    const char *p = o->buf;
    size_t n = o->len;
    while (n > 0 && o->err == 0) {
      ssize_t w = write(o->fd, p, n);
      if (w <= 0) {
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EBADF && o->fd != 2) { o->fd = 2; continue; }  /* closed: stderr itself */
        o->err = w < 0 ? errno : EIO;
        break;
      }
      p += w;
      n -= (size_t)w;
    }
    errno = saved;
  }
  o->len = 0;
}

void hak_out_bytes(hak_out_t *o, const char *s, size_t n)
{
  while (n > 0) {
    if (o->len == sizeof o->buf) hak_out_flush(o);
    size_t k = sizeof o->buf - o->len;
    if (k > n) k = n;
    memcpy(o->buf + o->len, s, k);
    o->len += k;
    s += k;
    n -= k;
  }
}

static void out_pad(hak_out_t *o, int n)
{
  for (; n > 0; n--) hak_out_bytes(o, " ", 1);
}

void hak_out_str(hak_out_t *o, const char *s) { hak_out_bytes(o, s, strlen(s)); }

/* s left-aligned in width columns (negative width: right-aligned). */
void hak_out_strw(hak_out_t *o, const char *s, int width)
{
  int n = (int)strlen(s);
  if (width < 0) out_pad(o, -width - n);
  hak_out_bytes(o, s, (size_t)n);
  if (width > 0) out_pad(o, width - n);
}

/* v right-aligned in width columns (0: no padding). */
void hak_out_u64(hak_out_t *o, uint64_t v, int width)
{
  char d[24];
  int n = 0;
  do { d[sizeof d - 1 - n++] = (char)('0' + v % 10); v /= 10; } while (v != 0);
  out_pad(o, width - n);
  hak_out_bytes(o, d + sizeof d - n, (size_t)n);
}

/* " name=v" */
void hak_out_kv(hak_out_t *o, const char *name, uint64_t v)
{
  hak_out_bytes(o, " ", 1);
  hak_out_str(o, name);
  hak_out_bytes(o, "=", 1);
  hak_out_u64(o, v, 0);
}

void hak_out_hex(hak_out_t *o, uint64_t v)
{
  char d[18];
  int n = 0;
  do { d[sizeof d - 1 - n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v != 0);
  hak_out_bytes(o, "0x", 2);
  hak_out_bytes(o, d + sizeof d - n, (size_t)n);
}
