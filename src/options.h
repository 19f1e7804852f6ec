/* HAKMEM_* options (options.c). */
#ifndef HAKMEM_OPTIONS_H
#define HAKMEM_OPTIONS_H

#include "base.h"
#include "types.h"

extern HAK_HIDDEN hak_options_t hak_opt;
void hak_options_init(void);

/* The fast paths (alloc.c's hak_malloc_inline, free.c's hak_free_inline):
 * malloc serves sizes below hak_fast_limit with hak_heap_pop, and free frees
 * blocks that owned[] proves local with free_local_fast.  Both are off
 * (limit 0, owned[] empty) before initialisation, in secure mode and with
 * statistics: those calls take the out-of-line paths, which check and
 * count.  Written once by hak_init_slow. */
extern HAK_HIDDEN size_t hak_fast_limit;
static inline bool hak_fast_on(void) { return hak_fast_limit != 0; }

#endif /* HAKMEM_OPTIONS_H */
