/* Hand-off stacks between threads (handoff.c). */
#ifndef HAKMEM_HANDOFF_H
#define HAKMEM_HANDOFF_H

#include "base.h"
#include "types.h"

void hak_handoff_push(hak_handoff_t *q, ck_stack_entry_t *e);
ck_stack_entry_t *hak_handoff_pop(hak_handoff_t *q);
uint32_t hak_handoff_count(hak_handoff_t *q);
void hak_handoff_before_fork(hak_handoff_t *q);
void hak_handoff_after_fork(hak_handoff_t *q, bool child);

extern HAK_HIDDEN hak_handoff_t hak_abandoned;   /* SuperSlabs of exited threads */
void hak_handoff_abandon(hak_superslab_t *ss);
hak_superslab_t *hak_handoff_take(void);

#endif /* HAKMEM_HANDOFF_H */
