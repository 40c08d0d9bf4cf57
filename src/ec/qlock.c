/* Quorum locks over a set's drives: see ec/qlock.h. */
#include "ec/qlock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/log.h"
#include "core/loop.h"
#include "ec/codec.h"

struct ol_qlock {
    const struct ol_drive *drives;
    unsigned n, need;
    uint32_t ttl_ms;
    uint64_t began_ms; /* when the winning attempt began */
    unsigned granted, attempts;
    uint64_t rng;
    uint8_t owner[OL_DRIVE_LOCK_OWNER];
    size_t nlen;
    uint8_t name[OL_DRIVE_LOCK_NAME_MAX];
};

/* ---- one round: a call to every drive ---- */

struct round;

struct rcall {
    struct round *r;
    unsigned i;
    int rc;
};

/* Lives on the caller's stack: the caller waits for every call, so no
 * call outlives it (the drives time out themselves, ec/drive.h). */
struct round {
    struct ol_qlock *l;
    bool unlock;
    unsigned ndone;
    struct ol_fiber *waiter;
    struct rcall c[OL_EC_MAX_UNITS];
};

static void rcall_exec(struct rcall *c)
{
    struct ol_qlock *l = c->r->l;
    const struct ol_drive *d = &l->drives[c->i];
    if (!d->ops || !d->ops->lock || !d->ops->unlock)
        c->rc = -EOPNOTSUPP;
    else if (c->r->unlock)
        c->rc = d->ops->unlock(d->d, l->name, l->nlen, l->owner);
    else
        c->rc = d->ops->lock(d->d, l->name, l->nlen, l->owner, l->ttl_ms);
}

static void rcall_fiber(void *arg)
{
    struct rcall *c = arg;
    struct round *r = c->r;
    rcall_exec(c);
    r->ndone++;
    if (r->waiter)
        ol_fiber_wake(r->waiter);
}

/* Runs the lock (or unlock) call on every drive; returns the grants. */
static unsigned round_run(struct ol_qlock *l, bool unlock)
{
    struct round r = {.l = l, .unlock = unlock};
    struct ol_loop *loop = ol_loop_current();
    struct ol_fiber *me = ol_fiber_current();
    for (unsigned i = 0; i < l->n; i++) {
        r.c[i].r = &r;
        r.c[i].i = i;
    }
    bool spawn = me && loop && l->n > 1;
    for (unsigned i = 0; i < l->n; i++) {
        if (!spawn || ol_fiber_spawn(loop, rcall_fiber, &r.c[i]) != 0) {
            /* No fiber (or none left: backpressure): the call runs here. */
            rcall_exec(&r.c[i]);
            r.ndone++;
        }
    }
    if (r.ndone < l->n) {
        r.waiter = me;
        for (unsigned guard = 0; r.ndone < l->n && guard < (1u << 20); guard++)
            ol_fiber_park();
        r.waiter = NULL;
    }
    OL_ASSERT(r.ndone == l->n);
    unsigned granted = 0;
    for (unsigned i = 0; i < l->n; i++)
        granted += r.c[i].rc == 0;
    return granted;
}

/* ---- acquisition ---- */

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: the backoff's jitter only. */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static int draw_owner(struct ol_qlock *l)
{
    for (unsigned tries = 0; tries < 8; tries++) {
        if (getrandom(l->owner, sizeof(l->owner), 0) != (ssize_t)sizeof(l->owner))
            return -EIO;
        uint64_t a, b;
        memcpy(&a, l->owner, 8);
        memcpy(&b, l->owner + 8, 8);
        if (a | b) {
            l->rng = (a ^ b) | 1;
            return 0;
        }
    }
    return -EIO;
}

int ol_qlock_acquire(const struct ol_drive *drives, unsigned n, const void *name, size_t nlen,
                     const struct ol_qlock_opts *opts, struct ol_qlock **out)
{
    if (!drives || n == 0 || n > OL_EC_MAX_UNITS || !name || nlen == 0 ||
        nlen > OL_DRIVE_LOCK_NAME_MAX)
        return -EINVAL;
    struct ol_qlock_opts o = opts ? *opts : (struct ol_qlock_opts){0};
    if (!o.ttl_ms)
        o.ttl_ms = OL_QLOCK_TTL_MS;
    if (o.ttl_ms > OL_DRIVE_LOCK_TTL_MAX_MS)
        o.ttl_ms = OL_DRIVE_LOCK_TTL_MAX_MS;
    if (!o.wait_ms)
        o.wait_ms = OL_QLOCK_WAIT_MS;
    if (!o.backoff_min_ms)
        o.backoff_min_ms = OL_QLOCK_BACKOFF_MIN_MS;
    if (!o.backoff_max_ms)
        o.backoff_max_ms = OL_QLOCK_BACKOFF_MAX_MS;
    if (o.backoff_max_ms < o.backoff_min_ms)
        o.backoff_max_ms = o.backoff_min_ms;

    unsigned need = n / 2 + 1, able = 0;
    for (unsigned i = 0; i < n; i++)
        able += drives[i].ops && drives[i].ops->lock && drives[i].ops->unlock;
    if (able < need)
        return -EOPNOTSUPP;

    struct ol_qlock *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->drives = drives;
    l->n = n;
    l->need = need;
    l->ttl_ms = o.ttl_ms;
    l->nlen = nlen;
    memcpy(l->name, name, nlen);
    int rc = draw_owner(l);
    if (rc < 0) {
        free(l);
        return rc;
    }
    uint64_t deadline = ol_now_ms() + o.wait_ms;
    uint32_t cap = o.backoff_min_ms;
    /* Bounded by the deadline; the guard bounds it when the clock does not
     * move (each round sleeps at least backoff_min_ms). */
    for (unsigned guard = 0; guard < 1000000; guard++) {
        l->attempts++;
        l->began_ms = ol_now_ms();
        l->granted = round_run(l, false);
        if (l->granted >= need) {
            *out = l;
            return 0;
        }
        /* Lost (another owner holds it, or the votes split, or drives are
         * down): give back every vote, granted or maybe granted. */
        (void)round_run(l, true);
        uint64_t now = ol_now_ms();
        if (now >= deadline)
            break;
        uint32_t ms =
            o.backoff_min_ms + (uint32_t)(rng_next(&l->rng) % (cap - o.backoff_min_ms + 1));
        if (now + ms > deadline)
            ms = (uint32_t)(deadline - now);
        cap = (uint64_t)cap * 2 > o.backoff_max_ms ? o.backoff_max_ms : cap * 2;
        ol_io_sleep_ms(ms ? ms : 1);
    }
    free(l);
    return -EBUSY;
}

bool ol_qlock_valid(const struct ol_qlock *l)
{
    return ol_now_ms() < l->began_ms + l->ttl_ms - l->ttl_ms / 10;
}

unsigned ol_qlock_granted(const struct ol_qlock *l)
{
    return l->granted;
}

unsigned ol_qlock_attempts(const struct ol_qlock *l)
{
    return l->attempts;
}

void ol_qlock_release(struct ol_qlock *l)
{
    if (!l)
        return;
    (void)round_run(l, true);
    free(l);
}
