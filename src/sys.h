/* The system allocator, for pointers hakmem did not hand out (sys_glibc.c
 * in the preload library, sys_direct.c in the linked one). */
#ifndef HAKMEM_SYS_H
#define HAKMEM_SYS_H

#include "base.h"

/* The system allocator, for pointers hakmem did not hand out: glibc's own in
 * the preload library (sys_glibc.c), libc's (or the sanitizer's) otherwise
 * (sys_direct.c). */
void   hak_sys_free(void *p);
void  *hak_sys_realloc(void *p, size_t n);
size_t hak_sys_usable_size(void *p);
void hak_sys_init(void);            /* resolve the system allocator (may allocate) */

#endif /* HAKMEM_SYS_H */
