/* The operating system: mappings, time, stderr (os.c). */
#ifndef HAKMEM_OS_H
#define HAKMEM_OS_H

#include "base.h"

void *hak_os_map_aligned(size_t size, size_t align);  /* NULL on failure */
void  hak_os_unmap(void *p, size_t size);
void  hak_os_purge(void *p, size_t size);             /* give pages back, keep range */
void  hak_os_hugepage(void *p, size_t size);          /* prefer THP there */
void  hak_os_hugepage_off(void *p, size_t size);      /* take that back (THP madvise mode) */
bool  hak_os_huge_only_advised(void);                 /* a range without that advice has 4 KiB pages */
void  hak_os_populate(void *p, size_t size);          /* commit the pages now, writable */
bool  hak_os_residency(const void *p, size_t size, unsigned char *vec); /* mincore: bit 0 of vec[i], page i resident */
size_t hak_os_count_resident(const unsigned char *vec, size_t from, size_t to);  /* of pages [from, to) */
void  hak_os_protect(void *p, size_t size, bool access); /* read+write, or no access */
bool  hak_os_grow_in_place(void *p, size_t old, size_t new_size);
bool  hak_os_move(void *from, size_t size, void *dst);  /* page tables only */
uint64_t hak_os_now_ms(void);
int   hak_os_cpu(void);   /* the CPU the calling thread runs on now, -1 if unknown */
int   hak_os_tid(void);   /* the calling thread's kernel thread id */
/* Read a small file with open/read (no stdio, errno kept): its first
 * size - 1 bytes at most, NUL-terminated; its length, 0 on failure. */
size_t hak_os_read_file(const char *path, char *buf, size_t size);
/* A doorbell for one waiter (the purger thread, purge.c): it arms the bell,
 * looks for work, and if there is none sleeps until the bell rings or ms
 * pass (ms == 0: until it rings).  Any thread rings after publishing work. */
void  hak_os_bell_arm(void);
void  hak_os_bell_wait(uint64_t ms);
void  hak_os_bell_ring(void);
/* hak_os_bell_ring for a caller that published its work with a seq_cst
 * read-modify-write (a locked instruction: already the fence the ring needs). */
void  hak_os_bell_ring_after_rmw(void);
void  hak_os_bell_wake(void);  /* a ring that also wakes a waiter with a deadline */
void  hak_write_stderr(const char *s);
_Noreturn void hak_fatal(const char *what, const void *p);

#endif /* HAKMEM_OS_H */
