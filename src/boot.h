/* The bootstrap area: blocks handed out while hakmem initialises (boot.c). */
#ifndef HAKMEM_BOOT_H
#define HAKMEM_BOOT_H

#include "base.h"

void *hak_boot_alloc(size_t n);
bool hak_boot_owns(const void *p);
size_t hak_boot_size(const void *p);

#endif /* HAKMEM_BOOT_H */
