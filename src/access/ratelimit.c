/* Per-user token buckets (access/ratelimit.h). */
#include "access/ratelimit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/loop.h"

/* ---- the bucket ---- */

void ol_rl_bucket_init(struct ol_rl_bucket *b, uint64_t per_sec)
{
    __atomic_store_n(&b->tat_ns, 0, __ATOMIC_RELAXED);
    b->per_sec = per_sec;
}

/* cost / per_sec seconds in ns, capped far below overflow of the sums
 * made with it (a cost of many seconds' worth is simply a long debt). */
static int64_t cost_ns(const struct ol_rl_bucket *b, uint64_t cost)
{
    unsigned __int128 ns = (unsigned __int128)cost * 1000000000u / b->per_sec;
    return ns > (unsigned __int128)(INT64_MAX / 4) ? INT64_MAX / 4 : (int64_t)ns;
}

bool ol_rl_take(struct ol_rl_bucket *b, uint64_t cost, int64_t now_ns)
{
    if (!b->per_sec)
        return true;
    int64_t inc = cost_ns(b, cost);
    int64_t tat = __atomic_load_n(&b->tat_ns, __ATOMIC_RELAXED);
    for (int i = 0; i < OL_RL_CAS_TRIES; i++) {
        int64_t base = tat > now_ns ? tat : now_ns;
        if (base + inc - now_ns > OL_RL_BURST_NS)
            return false;
        if (__atomic_compare_exchange_n(&b->tat_ns, &tat, base + inc, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return true;
    }
    /* Every failed try was another thread's success: so many at once are
     * more than the rate anyway. */
    return false;
}

int64_t ol_rl_charge(struct ol_rl_bucket *b, uint64_t cost, int64_t now_ns)
{
    if (!b->per_sec)
        return 0;
    int64_t inc = cost_ns(b, cost);
    int64_t tat = __atomic_load_n(&b->tat_ns, __ATOMIC_RELAXED);
    int64_t next;
    int i = 0;
    do {
        int64_t base = tat > now_ns ? tat : now_ns;
        next = base + inc;
        if (++i == OL_RL_CAS_TRIES) {
            /* Lost every race: charge on top of whatever is there (the
             * debt cannot be skipped, only placed a little late). */
            next = __atomic_add_fetch(&b->tat_ns, inc, __ATOMIC_RELAXED);
            break;
        }
    } while (!__atomic_compare_exchange_n(&b->tat_ns, &tat, next, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    int64_t wait = next - now_ns - OL_RL_BURST_NS;
    return wait > 0 ? wait : 0;
}

bool ol_rl_in_debt(const struct ol_rl_bucket *b, int64_t now_ns)
{
    return b->per_sec && __atomic_load_n(&b->tat_ns, __ATOMIC_RELAXED) - now_ns > OL_RL_BURST_NS;
}

/* ---- the table ---- */

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

/* A cache line or more each: two users' buckets never share one. */
struct ol_rl_user {
    struct ol_rl_bucket req, bytes;
    size_t chunk;
    uint32_t state; /* atomic: SLOT_* */
    uint32_t hash;
    char key[130]; /* "" for anonymous (never an access key) */
} __attribute__((aligned(64)));

struct ol_rl {
    struct ol_rl_user slots[OL_RL_MAX_USERS];
    struct ol_rl_user overflow; /* the default limits, shared past the slots */
    int64_t def_rps, def_bps;
    struct ol_cfg_limit limits[OL_CFG_MAX_LIMITS];
    size_t nlimits;
    uint64_t throttled[2]; /* atomic, by enum ol_rl_port */
    uint64_t paced_ns;     /* atomic */
};

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void user_init(struct ol_rl_user *u, int64_t rps, int64_t bps)
{
    ol_rl_bucket_init(&u->req, (uint64_t)rps);
    ol_rl_bucket_init(&u->bytes, (uint64_t)bps);
    uint64_t c = (uint64_t)bps / 8;
    u->chunk = bps == 0              ? SIZE_MAX
               : c < OL_RL_CHUNK_MIN ? OL_RL_CHUNK_MIN
               : c > OL_RL_CHUNK_MAX ? OL_RL_CHUNK_MAX
                                     : (size_t)c;
}

static bool bps_ok(const struct ol_cfg *cfg, int64_t bps, const char *who, char *err, size_t errlen)
{
    if (bps == 0 || bps >= cfg->min_body_rate_bytes_per_sec)
        return true;
    snprintf(err, errlen,
             "%s: a bandwidth limit of %" PRId64 " bytes/s is below min_body_rate_bytes_per_sec "
             "(%" PRId64 "): a response paced to it would be cut as a slow reader; raise the "
             "limit or lower min_body_rate_bytes_per_sec",
             who, bps, cfg->min_body_rate_bytes_per_sec);
    return false;
}

int ol_rl_create(const struct ol_cfg *cfg, struct ol_rl **out, char *err, size_t errlen)
{
    *out = NULL;
    bool any = cfg->user_requests_per_sec || cfg->user_bytes_per_sec;
    if (!bps_ok(cfg, cfg->user_bytes_per_sec, "user_bytes_per_sec", err, errlen))
        return -EINVAL;
    for (size_t i = 0; i < cfg->nlimits; i++) {
        const struct ol_cfg_limit *l = &cfg->limits[i];
        char who[160];
        snprintf(who, sizeof(who), "limit %s", l->access_key);
        if (!bps_ok(cfg, l->bytes_per_sec, who, err, errlen))
            return -EINVAL;
        any |= l->requests_per_sec || l->bytes_per_sec;
    }
    if (!any)
        return 0;
    struct ol_rl *rl = aligned_alloc(64, sizeof(*rl));
    if (!rl)
        return -ENOMEM;
    memset(rl, 0, sizeof(*rl));
    rl->def_rps = cfg->user_requests_per_sec;
    rl->def_bps = cfg->user_bytes_per_sec;
    rl->nlimits = cfg->nlimits;
    memcpy(rl->limits, cfg->limits, cfg->nlimits * sizeof(cfg->limits[0]));
    user_init(&rl->overflow, rl->def_rps, rl->def_bps);
    *out = rl;
    return 0;
}

void ol_rl_destroy(struct ol_rl *rl)
{
    free(rl);
}

/* The limits of key ("" = anonymous): its "limit" line, else the defaults. */
static void limits_of(const struct ol_rl *rl, const char *key, int64_t *rps, int64_t *bps)
{
    const char *name = key[0] ? key : OL_CFG_ANONYMOUS;
    *rps = rl->def_rps;
    *bps = rl->def_bps;
    for (size_t i = 0; i < rl->nlimits; i++)
        if (strcmp(rl->limits[i].access_key, name) == 0) {
            *rps = rl->limits[i].requests_per_sec;
            *bps = rl->limits[i].bytes_per_sec;
        }
}

static struct ol_rl_user *usable(struct ol_rl_user *u)
{
    return u->req.per_sec || u->bytes.per_sec ? u : NULL;
}

struct ol_rl_user *ol_rl_user_get(struct ol_rl *rl, const char *access_key)
{
    if (!rl)
        return NULL;
    const char *key = access_key ? access_key : "";
    size_t len = strlen(key);
    if (len >= sizeof(rl->slots[0].key))
        return usable(&rl->overflow);
    uint32_t h = fnv1a(key);
    /* Linear probing; a slot, once READY, never changes its key. */
    for (unsigned i = 0; i < OL_RL_MAX_USERS; i++) {
        struct ol_rl_user *u = &rl->slots[(h + i) & (OL_RL_MAX_USERS - 1)];
        uint32_t st = __atomic_load_n(&u->state, __ATOMIC_ACQUIRE);
        if (st == SLOT_EMPTY) {
            if (__atomic_compare_exchange_n(&u->state, &st, SLOT_FILLING, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_ACQUIRE)) {
                int64_t rps, bps;
                limits_of(rl, key, &rps, &bps);
                user_init(u, rps, bps);
                u->hash = h;
                memcpy(u->key, key, len + 1);
                __atomic_store_n(&u->state, SLOT_READY, __ATOMIC_RELEASE);
                return usable(u);
            }
            /* Lost the slot to another thread: st holds what it is now. */
        }
        /* Another thread is writing this slot's key: a few hundred bytes,
         * so the wait is short; bounded all the same. */
        for (int spin = 0; st == SLOT_FILLING && spin < 1000000; spin++)
            st = __atomic_load_n(&u->state, __ATOMIC_ACQUIRE);
        if (st != SLOT_READY)
            continue; /* still filling after all that: not ours to wait for */
        if (u->hash == h && strcmp(u->key, key) == 0)
            return usable(u);
    }
    return usable(&rl->overflow);
}

bool ol_rl_request(struct ol_rl *rl, struct ol_rl_user *u, enum ol_rl_port port)
{
    if (!u)
        return true;
    int64_t now = (int64_t)ol_mono_ns();
    bool ok =
        (port != OL_RL_NATIVE || !ol_rl_in_debt(&u->bytes, now)) && ol_rl_take(&u->req, 1, now);
    if (!ok)
        __atomic_fetch_add(&rl->throttled[port], 1, __ATOMIC_RELAXED);
    return ok;
}

int64_t ol_rl_bytes(struct ol_rl_user *u, uint64_t n)
{
    if (!u || !u->bytes.per_sec || n == 0)
        return 0;
    return ol_rl_charge(&u->bytes, n, (int64_t)ol_mono_ns());
}

size_t ol_rl_chunk(const struct ol_rl_user *u)
{
    return u ? u->chunk : SIZE_MAX;
}

void ol_rl_pace(struct ol_rl *rl, struct ol_rl_user *u, uint64_t n)
{
    int64_t wait = ol_rl_bytes(u, n);
    if (wait <= 0)
        return;
    /* Whole milliseconds, rounded up: a little late, never early. */
    int64_t t0 = (int64_t)ol_mono_ns();
    ol_io_sleep_ms((unsigned)((wait + 999999) / 1000000));
    __atomic_fetch_add(&rl->paced_ns, (uint64_t)((int64_t)ol_mono_ns() - t0), __ATOMIC_RELAXED);
}

void ol_rl_stats(const struct ol_rl *rl, struct ol_rl_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!rl)
        return;
    out->throttled_s3 = __atomic_load_n(&rl->throttled[OL_RL_S3], __ATOMIC_RELAXED);
    out->throttled_native = __atomic_load_n(&rl->throttled[OL_RL_NATIVE], __ATOMIC_RELAXED);
    out->paced_ns = __atomic_load_n(&rl->paced_ns, __ATOMIC_RELAXED);
}
