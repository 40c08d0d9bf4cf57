/* The catch-up log (ec/catchup.h): a FIFO of keys owed to drives, a hash to
 * fold repeated misses of one key into its entry, and per drive an UP/DOWN
 * state with a probe backoff. */
#include "ec/catchup.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/eset.h"

struct cu_entry {
    struct cu_entry *prev, *next; /* FIFO (oldest first) */
    struct cu_entry *hnext;       /* hash chain */
    uint32_t hash;
    unsigned set;
    uint32_t missed; /* slots still owed the key */
    bool busy;       /* a drain is healing it (the lock is released) */
    bool renoted;    /* ... and a new miss came meanwhile */
    unsigned tries;  /* heals that left an answering slot behind */
    unsigned backoff_ms;
    uint64_t due_ms; /* not before */
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    size_t klen;
    char key[];
};

struct cu_drive {
    bool down;
    unsigned backoff_ms;
    uint64_t due_ms; /* DOWN: the next probe */
};

struct ol_catchup {
    pthread_mutex_t mu;
    struct ol_eset *const *sets;
    const struct ol_drive *drives;
    unsigned nsets, width, max, retry_min, retry_max;
    struct cu_entry *head, *tail;
    struct cu_entry **tab;
    uint32_t tab_mask;
    unsigned count;
    struct cu_drive *drv; /* nsets * width */
    uint32_t *full;       /* per set: slots owed a whole-set heal */
    _Atomic bool draining;
    struct {
        uint64_t queued, merged, healed, retries, dropped, overflowed, full_heals;
    } st;
};

static uint32_t hash_of(unsigned set, const char *bucket, const char *key, size_t klen)
{
    /* FNV-1a over the set, the bucket and the key (NUL included). */
    uint32_t h = 2166136261u ^ set;
    h *= 16777619u;
    for (const char *p = bucket; *p; p++) {
        h ^= (uint8_t)*p;
        h *= 16777619u;
    }
    h ^= 0xff;
    h *= 16777619u;
    for (size_t i = 0; i < klen; i++) {
        h ^= (uint8_t)key[i];
        h *= 16777619u;
    }
    return h;
}

int ol_catchup_create(const struct ol_catchup_cfg *cfg, struct ol_catchup **out)
{
    if (!cfg->sets || !cfg->drives || cfg->nsets == 0 || cfg->width == 0 || cfg->width > 32)
        return -EINVAL;
    struct ol_catchup *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->sets = cfg->sets;
    c->drives = cfg->drives;
    c->nsets = cfg->nsets;
    c->width = cfg->width;
    c->max = cfg->max_entries ? cfg->max_entries : OL_CATCHUP_DEFAULT_MAX;
    c->retry_min = cfg->retry_min_ms ? cfg->retry_min_ms : 250;
    c->retry_max = cfg->retry_max_ms ? cfg->retry_max_ms : 5000;
    if (c->retry_max < c->retry_min)
        c->retry_max = c->retry_min;
    uint32_t size = 64;
    while (size < c->max && size < (1u << 24))
        size <<= 1;
    c->tab_mask = size - 1;
    c->tab = calloc(size, sizeof(*c->tab));
    c->drv = calloc((size_t)c->nsets * c->width, sizeof(*c->drv));
    c->full = calloc(c->nsets, sizeof(*c->full));
    if (!c->tab || !c->drv || !c->full) {
        ol_catchup_destroy(c);
        return -ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

void ol_catchup_destroy(struct ol_catchup *c)
{
    if (!c)
        return;
    OL_ASSERT(!atomic_load(&c->draining));
    for (struct cu_entry *e = c->head, *nx; e; e = nx) {
        nx = e->next;
        free(e);
    }
    if (c->tab)
        pthread_mutex_destroy(&c->mu);
    free(c->tab);
    free(c->drv);
    free(c->full);
    free(c);
}

/* The drive (set, slot) just failed a write or a heal: DOWN, probed after
 * its backoff (doubled when it was DOWN already). */
static void drive_down(struct ol_catchup *c, unsigned set, unsigned slot, uint64_t now_ms)
{
    struct cu_drive *d = &c->drv[set * c->width + slot];
    if (!d->down) {
        d->down = true;
        d->backoff_ms = c->retry_min;
    } else {
        d->backoff_ms = d->backoff_ms * 2 > c->retry_max ? c->retry_max : d->backoff_ms * 2;
    }
    d->due_ms = now_ms + d->backoff_ms;
}

static void drive_up(struct ol_catchup *c, unsigned set, unsigned slot)
{
    struct cu_drive *d = &c->drv[set * c->width + slot];
    d->down = false;
    d->backoff_ms = 0;
    d->due_ms = 0;
}

/* The slots of a set a drain may heal onto now: UP, or DOWN and due. */
static uint32_t ready_slots(const struct ol_catchup *c, unsigned set, uint64_t now_ms)
{
    uint32_t r = 0;
    for (unsigned j = 0; j < c->width; j++) {
        const struct cu_drive *d = &c->drv[set * c->width + j];
        if (!d->down || d->due_ms <= now_ms)
            r |= 1u << j;
    }
    return r;
}

void ol_catchup_note(void *arg, unsigned set, uint32_t missed, const char *bucket, const char *key,
                     size_t klen)
{
    struct ol_catchup *c = arg;
    if (set >= c->nsets || !missed)
        return;
    missed &= c->width >= 32 ? UINT32_MAX : (1u << c->width) - 1;
    size_t blen = strlen(bucket);
    uint32_t h = hash_of(set, bucket, key, klen);
    uint64_t now = ol_now_ms();
    pthread_mutex_lock(&c->mu);
    for (unsigned j = 0; j < c->width; j++)
        if ((missed & (1u << j)) && !c->drv[set * c->width + j].down)
            drive_down(c, set, j, now);
    struct cu_entry *e = c->tab[h & c->tab_mask];
    for (; e; e = e->hnext)
        if (e->hash == h && e->set == set && e->klen == klen && strcmp(e->bucket, bucket) == 0 &&
            memcmp(e->key, key, klen) == 0)
            break;
    if (e) {
        e->missed |= missed;
        e->renoted |= e->busy;
        c->st.merged++;
        goto out;
    }
    if (c->count >= c->max || blen > OL_DRIVE_MAX_BUCKET || !(e = malloc(sizeof(*e) + klen))) {
        c->full[set] |= missed;
        c->st.overflowed++;
        goto out;
    }
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->set = set;
    e->missed = missed;
    memcpy(e->bucket, bucket, blen + 1);
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->due_ms = 0; /* the drive's state decides when */
    e->hnext = c->tab[h & c->tab_mask];
    c->tab[h & c->tab_mask] = e;
    e->prev = c->tail;
    if (c->tail)
        c->tail->next = e;
    else
        c->head = e;
    c->tail = e;
    c->count++;
    c->st.queued++;
out:
    pthread_mutex_unlock(&c->mu);
}

static void entry_remove(struct ol_catchup *c, struct cu_entry *e)
{
    struct cu_entry **pp = &c->tab[e->hash & c->tab_mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    c->count--;
    free(e);
}

void ol_catchup_drive_back(struct ol_catchup *c, unsigned set, unsigned slot)
{
    if (set >= c->nsets || slot >= c->width)
        return;
    pthread_mutex_lock(&c->mu);
    struct cu_drive *d = &c->drv[set * c->width + slot];
    if (d->down)
        d->due_ms = 0;
    pthread_mutex_unlock(&c->mu);
}

void ol_catchup_kick(struct ol_catchup *c)
{
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->nsets * c->width; i++)
        if (c->drv[i].down)
            c->drv[i].due_ms = 0;
    pthread_mutex_unlock(&c->mu);
}

static int stop_at_first(void *ctx, const char *bucket)
{
    (void)ctx;
    (void)bucket;
    return 1;
}

/* Overflow marks: a whole-set heal once every marked drive of the set
 * answers a list_buckets call (the heal would skip a silent one). */
static void drain_full(struct ol_catchup *c, uint64_t now_ms)
{
    for (unsigned s = 0; s < c->nsets; s++) {
        pthread_mutex_lock(&c->mu);
        uint32_t want = c->full[s] & ready_slots(c, s, now_ms);
        pthread_mutex_unlock(&c->mu);
        if (!want)
            continue;
        uint32_t ok = 0;
        for (unsigned j = 0; j < c->width; j++) {
            if (!(want & (1u << j)))
                continue;
            const struct ol_drive *d = &c->drives[s * c->width + j];
            int rc = d->ops->list_buckets(d->d, stop_at_first, NULL);
            if (rc >= 0)
                ok |= 1u << j;
        }
        pthread_mutex_lock(&c->mu);
        for (unsigned j = 0; j < c->width; j++) {
            if (ok & (1u << j))
                drive_up(c, s, j);
            else if (want & (1u << j))
                drive_down(c, s, j, now_ms);
        }
        /* Misses noted from here on are owed again; those before are in
         * the heal below. */
        c->full[s] &= ~ok;
        pthread_mutex_unlock(&c->mu);
        if (!ok)
            continue;
        struct ol_eset_heal_stats hs = {0};
        int rc = ol_eset_heal_all(c->sets[s], &hs);
        pthread_mutex_lock(&c->mu);
        c->st.full_heals++;
        if (rc < 0) {
            /* Try again after the backoff. */
            c->full[s] |= ok;
            for (unsigned j = 0; j < c->width; j++)
                if (ok & (1u << j))
                    drive_down(c, s, j, now_ms);
        }
        pthread_mutex_unlock(&c->mu);
        OL_LOG(OL_LOG_INFO, "catch-up: set %u healed whole (log overflowed): %s", s,
               rc < 0 ? ol_strerror(rc) : "done");
    }
}

int ol_catchup_drain(struct ol_catchup *c, uint64_t now_ms, unsigned max_heals)
{
    bool expected = false;
    if (!atomic_compare_exchange_strong(&c->draining, &expected, true))
        return -EBUSY;
    drain_full(c, now_ms);
    int done = 0;
    unsigned heals = 0;
    uint8_t *kbuf = malloc(OL_DRIVE_MAX_KEY);
    if (!kbuf)
        goto out;
    pthread_mutex_lock(&c->mu);
    /* Drives probed in this pass: a second entry of a drive that did not
     * answer waits for its next probe. */
    for (struct cu_entry *e = c->head; e && heals < max_heals;) {
        uint32_t want = e->missed & ready_slots(c, e->set, now_ms);
        if (e->busy || e->due_ms > now_ms || !want) {
            e = e->next;
            continue;
        }
        e->busy = true;
        e->renoted = false;
        unsigned set = e->set;
        char bucket[OL_DRIVE_MAX_BUCKET + 1];
        memcpy(bucket, e->bucket, sizeof(bucket));
        size_t klen = e->klen;
        memcpy(kbuf, e->key, klen);
        pthread_mutex_unlock(&c->mu);

        struct ol_eset_heal_stats hs = {0};
        uint32_t answered = 0, caught = 0;
        (void)ol_eset_heal_object_slots(c->sets[set], bucket, (const char *)kbuf, klen, &hs,
                                        &answered, &caught);
        heals++;

        pthread_mutex_lock(&c->mu);
        e->busy = false;
        for (unsigned j = 0; j < c->width; j++) {
            if (!(want & (1u << j)))
                continue;
            if (answered & (1u << j))
                drive_up(c, set, j);
            else
                drive_down(c, set, j, now_ms);
        }
        /* A miss noted during the heal may be newer than what the heal
         * saw: keep every slot for another round. */
        if (!e->renoted)
            e->missed &= ~(want & caught);
        struct cu_entry *nx = e->next;
        if (e->missed == 0) {
            entry_remove(c, e);
            c->st.healed++;
            done++;
        } else if (want & answered & ~caught) {
            c->st.retries++;
            if (++e->tries >= OL_CATCHUP_MAX_TRIES) {
                ol_log_limited(OL_LOG_WARN, "catch-up: %s/%.*s given up after %u heals", bucket,
                               (int)(klen > 200 ? 200 : klen), (const char *)kbuf, e->tries);
                entry_remove(c, e);
                c->st.dropped++;
            } else {
                e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : c->retry_min;
                if (e->backoff_ms > c->retry_max)
                    e->backoff_ms = c->retry_max;
                e->due_ms = now_ms + e->backoff_ms;
            }
        }
        e = nx;
    }
    pthread_mutex_unlock(&c->mu);
out:
    free(kbuf);
    atomic_store(&c->draining, false);
    return done;
}

bool ol_catchup_due(struct ol_catchup *c, uint64_t now_ms)
{
    bool due = false;
    pthread_mutex_lock(&c->mu);
    for (unsigned s = 0; s < c->nsets && !due; s++)
        due = (c->full[s] & ready_slots(c, s, now_ms)) != 0;
    /* The first entry a drain would heal ends the walk: with a drive down
     * this costs a look at each entry, some nanoseconds each. */
    for (struct cu_entry *e = c->head; e && !due; e = e->next)
        due = !e->busy && e->due_ms <= now_ms && (e->missed & ready_slots(c, e->set, now_ms));
    pthread_mutex_unlock(&c->mu);
    return due;
}

void ol_catchup_stats(struct ol_catchup *c, struct ol_catchup_stats *out)
{
    pthread_mutex_lock(&c->mu);
    out->pending = c->count;
    out->queued = c->st.queued;
    out->merged = c->st.merged;
    out->healed = c->st.healed;
    out->retries = c->st.retries;
    out->dropped = c->st.dropped;
    out->overflowed = c->st.overflowed;
    out->full_heals = c->st.full_heals;
    out->drives_down = 0;
    for (unsigned i = 0; i < c->nsets * c->width; i++)
        out->drives_down += c->drv[i].down;
    pthread_mutex_unlock(&c->mu);
}

void ol_catchup_fiber(void *arg)
{
    struct ol_catchup *c = arg;
    struct ol_loop *loop = ol_loop_current();
    while (!ol_loop_stopping(loop)) {
        ol_io_sleep_ms(100);
        if (ol_loop_stopping(loop))
            break;
        /* Bounded passes: a long backlog yields to the stop check between
         * rounds of 64 heals. */
        if (ol_catchup_due(c, ol_now_ms()))
            (void)ol_catchup_drain(c, ol_now_ms(), 64);
    }
}
