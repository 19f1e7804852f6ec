/* HAKMEM_SECURE=1 (secure.c). */
#ifndef HAKMEM_SECURE_H
#define HAKMEM_SECURE_H

#include "types.h"

/* HAKMEM_SECURE=1 (secure.c): trailers, padding and zeroing of small blocks. */

/* The class of a secure block of n bytes aligned to align (every block
 * has a trailer), or -1 if none (a large block, zeroed). */
int    hak_secure_class(size_t n, size_t align);
/* Make block, just allocated from class c (hak_secure_class(n, ...)), a
 * secure block of n bytes: checked still zero (no write after free), its
 * padding and trailer written; zeroed (calloc needs nothing more). */
void  *hak_secure_prepare(void *block, size_t n, size_t c);
void   hak_secure_free(hak_slab_t *s, void *p, bool owner);
size_t hak_secure_usable(hak_slab_t *s, const void *p);

#endif /* HAKMEM_SECURE_H */
