/* Allocation-free text output (fmt.c). */
#ifndef HAKMEM_FMT_H
#define HAKMEM_FMT_H

#include "base.h"

/* Allocation-free text output (fmt.c): a buffer flushed with write(2) to fd,
 * or with fwrite to file when file is set. */
typedef struct hak_out {
  int fd;
  void *file;        /* FILE *, or NULL */
  size_t len;
  char buf[1024];
  int err;           /* the first write(2) error (errno), 0 if none: the rest is dropped */
} hak_out_t;
void hak_out_flush(hak_out_t *o);
void hak_out_str(hak_out_t *o, const char *s);
void hak_out_bytes(hak_out_t *o, const char *s, size_t n);
void hak_out_hex(hak_out_t *o, uint64_t v);                 /* 0x... */
void hak_out_strw(hak_out_t *o, const char *s, int width);  /* < 0: right-aligned */
void hak_out_u64(hak_out_t *o, uint64_t v, int width);      /* right-aligned */
void hak_out_kv(hak_out_t *o, const char *name, uint64_t v); /* " name=v" */

#endif /* HAKMEM_FMT_H */
