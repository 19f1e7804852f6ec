/* HAKMEM_SECURE=1 (secure.c). */
#ifndef HAKMEM_SECURE_H
#define HAKMEM_SECURE_H

#include "types.h"

/* HAKMEM_SECURE=1 (secure.c): trailers, padding and zeroing of small blocks. */

void  *hak_secure_alloc(hak_heap_t *h, size_t n, size_t align, bool zero);
void   hak_secure_free(hak_slab_t *s, void *p, bool owner);
size_t hak_secure_usable(hak_slab_t *s, const void *p);

#endif /* HAKMEM_SECURE_H */
