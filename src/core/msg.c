#include "core/msg.h"

#include <errno.h>
#include <stdlib.h>

struct ol_msg_slot {
    uint64_t seq; /* atomic: == position when free for that lap, position+1 when full */
    ol_msg_fn fn;
    void *arg;
};

int ol_msg_ring_init(struct ol_msg_ring *r, uint32_t nslots)
{
    uint64_t n = 2;
    while (n < nslots)
        n <<= 1;
    r->slots = calloc(n, sizeof(*r->slots));
    if (!r->slots)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        r->slots[i].seq = i;
    r->mask = n - 1;
    r->head = 0;
    r->tail = 0;
    return 0;
}

void ol_msg_ring_free(struct ol_msg_ring *r)
{
    free(r->slots);
    r->slots = NULL;
}

int ol_msg_push(struct ol_msg_ring *r, ol_msg_fn fn, void *arg)
{
    uint64_t pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    /* Bounded: each failed compare-exchange means another producer progressed. */
    for (;;) {
        struct ol_msg_slot *s = &r->slots[pos & r->mask];
        uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        int64_t diff = (int64_t)seq - (int64_t)pos;
        if (diff == 0) {
            if (__atomic_compare_exchange_n(&r->head, &pos, pos + 1, true, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
                s->fn = fn;
                s->arg = arg;
                __atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
                return 0;
            }
        } else if (diff < 0) {
            return -EAGAIN; /* full: the consumer has not freed this slot yet */
        } else {
            pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
        }
    }
}

bool ol_msg_pop(struct ol_msg_ring *r, ol_msg_fn *fn, void **arg)
{
    struct ol_msg_slot *s = &r->slots[r->tail & r->mask];
    uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (seq != r->tail + 1)
        return false;
    *fn = s->fn;
    *arg = s->arg;
    __atomic_store_n(&s->seq, r->tail + r->mask + 1, __ATOMIC_RELEASE);
    r->tail++;
    return true;
}

bool ol_msg_empty(struct ol_msg_ring *r)
{
    struct ol_msg_slot *s = &r->slots[r->tail & r->mask];
    return __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != r->tail + 1;
}
