/* Process initialisation and fork (init.c). */
#ifndef HAKMEM_INIT_H
#define HAKMEM_INIT_H

#include "base.h"

extern HAK_HIDDEN _Atomic(int) hak_init_state;   /* 0 none, 1 running, 2 ready */
void hak_init_slow(void);
bool hak_init_recursing(void);      /* malloc re-entered during initialisation */
static inline void hak_init(void)
{
  if (HAK_UNLIKELY(atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2)) hak_init_slow();
}

#endif /* HAKMEM_INIT_H */
