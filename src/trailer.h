/* Trailers of the medium classes (trailer.c). */
#ifndef HAKMEM_TRAILER_H
#define HAKMEM_TRAILER_H

#include "base.h"

/* The class for a request of n bytes (> HAK_UNTRAILED_MAX) aligned to align
 * (a page at most), with room for the trailer; -1 if none (large). */
int hak_trailed_class(size_t n, size_t align);
void *hak_trailer_set(void *p, size_t n, size_t cls);  /* p (may be NULL), a block of cls, given n bytes */
size_t hak_trailer_size(const void *p, size_t cls);    /* n; aborts if the trailer word was overwritten */
size_t hak_trailer_check(const void *p, size_t cls);   /* the same, and aborts if the canary changed */

#endif /* HAKMEM_TRAILER_H */
