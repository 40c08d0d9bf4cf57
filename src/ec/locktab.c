/* A drive's lock table: see ec/locktab.h. */
#include "ec/locktab.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ec/drive.h"

struct slot {
    uint64_t hash;       /* the name's; 0: free */
    uint64_t expires_ms; /* free once now_ms >= this */
    uint8_t owner[OL_DRIVE_LOCK_OWNER];
};

struct ol_locktab {
    pthread_mutex_t mu;
    unsigned n;
    struct slot s[];
};

int ol_locktab_create(unsigned slots, struct ol_locktab **out)
{
    if (slots == 0)
        slots = OL_LOCKTAB_SLOTS;
    struct ol_locktab *t = calloc(1, sizeof(*t) + (size_t)slots * sizeof(struct slot));
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    t->n = slots;
    *out = t;
    return 0;
}

void ol_locktab_destroy(struct ol_locktab *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* FNV-1a over the length and the bytes; never 0 (0 marks a free slot). */
static uint64_t name_hash(const void *name, size_t nlen)
{
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = 0; i < 8; i++)
        h = (h ^ (uint8_t)((uint64_t)nlen >> (8 * i))) * 1099511628211ull;
    const uint8_t *p = name;
    for (size_t i = 0; i < nlen; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h ? h : 1;
}

static bool owner_ok(const uint8_t *owner)
{
    if (!owner)
        return false;
    for (unsigned i = 0; i < OL_DRIVE_LOCK_OWNER; i++)
        if (owner[i])
            return true;
    return false;
}

static bool args_ok(const void *name, size_t nlen, const uint8_t *owner)
{
    return name && nlen >= 1 && nlen <= OL_DRIVE_LOCK_NAME_MAX && owner_ok(owner);
}

int ol_locktab_lock(struct ol_locktab *t, const void *name, size_t nlen, const uint8_t *owner,
                    uint32_t ttl_ms, uint64_t now_ms)
{
    if (!args_ok(name, nlen, owner) || ttl_ms == 0 || ttl_ms > OL_DRIVE_LOCK_TTL_MAX_MS)
        return -EINVAL;
    uint64_t h = name_hash(name, nlen);
    int rc = -ENOLCK;
    pthread_mutex_lock(&t->mu);
    struct slot *mine = NULL, *free_slot = NULL;
    for (unsigned i = 0; i < t->n; i++) {
        struct slot *s = &t->s[i];
        bool live = s->hash && now_ms < s->expires_ms;
        if (!live) {
            if (!free_slot)
                free_slot = s;
            continue;
        }
        if (s->hash == h) {
            mine = s; /* one live slot per hash: the scan can stop */
            break;
        }
    }
    if (mine && memcmp(mine->owner, owner, OL_DRIVE_LOCK_OWNER) != 0) {
        rc = -EBUSY;
    } else {
        struct slot *s = mine ? mine : free_slot;
        if (s) {
            s->hash = h;
            s->expires_ms = now_ms + ttl_ms;
            memcpy(s->owner, owner, OL_DRIVE_LOCK_OWNER);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int ol_locktab_unlock(struct ol_locktab *t, const void *name, size_t nlen, const uint8_t *owner)
{
    if (!args_ok(name, nlen, owner))
        return -EINVAL;
    uint64_t h = name_hash(name, nlen);
    pthread_mutex_lock(&t->mu);
    for (unsigned i = 0; i < t->n; i++) {
        struct slot *s = &t->s[i];
        /* Every match: an expired slot of this owner may sit beside the
         * live one a later lock of the same owner took. */
        if (s->hash == h && memcmp(s->owner, owner, OL_DRIVE_LOCK_OWNER) == 0)
            memset(s, 0, sizeof(*s));
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

unsigned ol_locktab_held(struct ol_locktab *t, uint64_t now_ms)
{
    unsigned n = 0;
    pthread_mutex_lock(&t->mu);
    for (unsigned i = 0; i < t->n; i++)
        n += t->s[i].hash && now_ms < t->s[i].expires_ms;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void ol_locktab_clear(struct ol_locktab *t)
{
    pthread_mutex_lock(&t->mu);
    memset(t->s, 0, (size_t)t->n * sizeof(t->s[0]));
    pthread_mutex_unlock(&t->mu);
}
