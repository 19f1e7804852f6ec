/* The system allocator for the linked (non-preload) library: libc's own
 * functions, or the sanitizer's when one owns malloc. */
#include <malloc.h>
#include <stdlib.h>

#include "sys.h"

void hak_sys_init(void) {}
void hak_sys_free(void *p) { free(p); }
void *hak_sys_realloc(void *p, size_t n) { return realloc(p, n); }
size_t hak_sys_usable_size(void *p) { return malloc_usable_size(p); }
