/* Cross-thread message rings: a bounded multi-producer, single-consumer queue
 * of (function, argument) pairs.  Each loop owns one as its inbox; any thread
 * may push, only the owning loop pops.  Lock-free (a sequence number per
 * slot, after Dmitry Vyukov's bounded queue): producers claim a slot with one
 * atomic add-and-compare, the consumer never writes the producers' cursor. */
#ifndef OL_CORE_MSG_H
#define OL_CORE_MSG_H

#include <stdbool.h>
#include <stdint.h>

typedef void (*ol_msg_fn)(void *arg);

struct ol_msg_slot;

struct ol_msg_ring {
    struct ol_msg_slot *slots;
    uint64_t mask;
    _Alignas(64) uint64_t head; /* next slot producers claim (atomic) */
    _Alignas(64) uint64_t tail; /* next slot the consumer reads */
};

/* nslots is rounded up to a power of two.  0 or -ENOMEM. */
int ol_msg_ring_init(struct ol_msg_ring *r, uint32_t nslots);
void ol_msg_ring_free(struct ol_msg_ring *r);
/* Any thread.  0, or -EAGAIN when full. */
int ol_msg_push(struct ol_msg_ring *r, ol_msg_fn fn, void *arg);
/* Consumer only.  True and a message, or false when empty. */
bool ol_msg_pop(struct ol_msg_ring *r, ol_msg_fn *fn, void **arg);
bool ol_msg_empty(struct ol_msg_ring *r);

#endif
