/* The erasure-coded deployment: see deploy/deploy.h. */
#include "deploy/deploy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/md5.h"
#include "ec/catchup.h"
#include "ec/eset.h"
#include "ec/placement.h"
#include "ec/storedrive.h"
#include "obj/ec.h"
#include "obj/ec_multipart.h"
#include "store/store.h"

#define EC_CHUNK_BYTES (1u << 20) /* body bytes per read or receive step */
#define EC_ITER_PAGE 128u         /* keys per set per listing step */
#define EC_MAX_BUCKETS 100000u

/* ---- the deployment ---- */

void ol_deploy_close(struct ol_deploy *ec)
{
    if (!ec)
        return;
    ol_catchup_destroy(ec->catchup);
    for (unsigned s = 0; s < ec->nsets && ec->sets; s++)
        if (ec->sets[s])
            ol_eset_destroy(ec->sets[s]);
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (ec->drives && ec->drives[i] && !ec->borrowed)
            ol_storedrive_destroy(ec->drives[i]);
        if (ec->stores && ec->stores[i] && !ec->borrowed)
            ol_store_close(ec->stores[i]);
        if (ec->paths)
            free(ec->paths[i]);
    }
    free(ec->drv);
    free((void *)ec->seen);
    free(ec->sets);
    free(ec->drives);
    free(ec->stores);
    free(ec->paths);
    free(ec);
}

/* The deployment's id for a start where no drive has joined: the legacy id
 * when a drive holds EC data without an identity (a deployment created by an
 * older build: its objects stay where they are), else a fresh random one. */
static int pick_new_id(struct ol_deploy *ec, const struct ol_store_identity *ids)
{
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (!ec->stores[i] || !ids[i].has_data)
            continue;
        int r = ol_storedrive_holds_shards(ec->stores[i]);
        if (r < 0)
            return r;
        if (r == 1) {
            memcpy(ec->deploy_id, ol_storedrive_legacy_id, 16);
            fprintf(stderr, "openlake: the drives hold erasure-coded data written before drive "
                            "identities: they join with the legacy placement id (docs/EC.md)\n");
            return 0;
        }
    }
    size_t got = 0;
    for (unsigned tries = 0; got < sizeof(ec->deploy_id) && tries < 100; tries++) {
        ssize_t r = getrandom(ec->deploy_id + got, sizeof(ec->deploy_id) - got, 0);
        if (r < 0 && errno != EINTR)
            return -errno;
        got += r > 0 ? (size_t)r : 0;
    }
    return got == sizeof(ec->deploy_id) ? 0 : -EIO;
}

/* Reads the identity of every drive that opened, settles the deployment's
 * id, checks that each drive belongs at its position (refusing the start
 * with a message naming the directory when one does not) and only then
 * writes the identity to the drives that join (new, replaced, or from an
 * older build).  Nothing is written when the start is refused.  Drives
 * offline now get the same check from the monitor when they come back. */
static int ec_identify(struct ol_deploy *ec, char *err, size_t errlen)
{
    unsigned n = ec->ndrives;
    struct ol_store_identity *ids = calloc(n, sizeof(*ids));
    bool *join = calloc(n, sizeof(*join));
    int rc = -ENOMEM;
    if (!ids || !join)
        goto out;
    unsigned opened = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i])
            continue;
        opened++;
        rc = ol_store_identity(ec->stores[i], &ids[i]);
        if (rc < 0) {
            snprintf(err, errlen, "cannot read the identity of drive %s: %s", ec->paths[i],
                     ol_strerror(rc));
            goto out;
        }
    }
    if (opened == 0) {
        rc = -EIO;
        snprintf(err, errlen, "none of the %u drives can be opened", n);
        goto out;
    }
    /* One directory listed twice (or reached through a bind mount) would
     * take two positions on a first start: its drive id gives it away. */
    for (unsigned i = 0; i < n; i++) {
        for (unsigned j = i + 1; j < n && ec->stores[i]; j++) {
            if (ec->stores[j] && memcmp(ids[i].drive_id, ids[j].drive_id, 16) == 0) {
                rc = -EINVAL;
                snprintf(err, errlen,
                         "drives %s and %s are the same drive (one FORMAT): "
                         "list each directory once",
                         ec->paths[i], ec->paths[j]);
                goto out;
            }
        }
    }
    /* The deployment is the one most joined drives name; a drive naming
     * another is refused below. */
    unsigned best = n, best_votes = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i] || !ids[i].ec_joined)
            continue;
        unsigned votes = 0;
        for (unsigned j = 0; j < n; j++)
            votes += ec->stores[j] && ids[j].ec_joined &&
                     memcmp(ids[j].deployment_id, ids[i].deployment_id, 16) == 0;
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    bool fresh = false;
    if (best < n) {
        memcpy(ec->deploy_id, ids[best].deployment_id, 16);
    } else {
        fresh = true;
        rc = pick_new_id(ec, ids);
        if (rc < 0) {
            snprintf(err, errlen, "cannot choose a deployment id: %s", ol_strerror(rc));
            goto out;
        }
    }
    struct ol_storedrive_member m = {.ndrives = n, .k = (uint8_t)ec->k, .m = (uint8_t)ec->m};
    memcpy(m.deployment_id, ec->deploy_id, 16);
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i])
            continue;
        m.index = i;
        rc = ol_storedrive_admit(ec->stores[i], ec->paths[i], &m, err, errlen);
        if (rc < 0)
            goto out;
        join[i] = rc == 1;
    }
    for (unsigned i = 0; i < n; i++) {
        m.index = i;
        if (join[i]) {
            rc = ol_storedrive_join(ec->stores[i], &m);
            if (rc < 0) {
                snprintf(err, errlen, "cannot write the identity of drive %s: %s", ec->paths[i],
                         ol_strerror(rc));
                goto out;
            }
            /* A drive joining a deployment that exists is new or replaced:
             * say so, since its shards come back only with a heal. */
            if (!fresh)
                fprintf(stderr,
                        "openlake: drive %s joins the deployment as drive %u of %u "
                        "(`openlake admin heal` rebuilds its shards)\n",
                        ec->paths[i], i + 1, n);
        }
        ol_storedrive_set_member(ec->drives[i], &m);
    }
    rc = 0;
out:
    free(join);
    free(ids);
    return rc;
}

/* One erasure set per k+m drives of ec->drv, sets[first_set + s] over the
 * drives from first_drive on. */
static int make_sets(struct ol_deploy *ec, unsigned first_set, unsigned first_drive, unsigned nsets,
                     char *err, size_t errlen)
{
    for (unsigned s = 0; s < nsets; s++) {
        unsigned size = ec->k + ec->m;
        struct ol_eset_cfg c;
        ol_eset_cfg_default(&c);
        c.k = ec->k;
        c.m = ec->m;
        c.drives = &ec->drv[first_drive + s * size];
        c.hlc = ec->clock;
        c.read_timeout_ms = ec->read_timeout_ms;
        memcpy(c.deployment_id, ec->deploy_id, 16);
        int rc = ol_eset_create(&c, &ec->sets[first_set + s]);
        if (rc < 0) {
            snprintf(err, errlen, "cannot create erasure set %u: %s", first_set + s,
                     ol_strerror(rc));
            for (unsigned t = 0; t < s; t++) {
                ol_eset_destroy(ec->sets[first_set + t]);
                ec->sets[first_set + t] = NULL;
            }
            return rc;
        }
    }
    /* One log for every set the deployment may ever hold: the sets and
     * drives arrays never move (a pool added later fills their entries). */
    if (!ec->catchup) {
        struct ol_catchup_cfg cc = {.sets = ec->sets,
                                    .nsets = ec->cap_sets ? ec->cap_sets : first_set + nsets,
                                    .width = ec->k + ec->m,
                                    .drives = ec->drv};
        int rc = ol_catchup_create(&cc, &ec->catchup);
        if (rc < 0) {
            snprintf(err, errlen, "cannot create the catch-up log: %s", ol_strerror(rc));
            return rc;
        }
    }
    for (unsigned s = first_set; s < first_set + nsets; s++)
        ol_eset_set_missed_hook(ec->sets[s], ol_catchup_note, ec->catchup, s);
    return 0;
}

int ol_deploy_assemble(const struct ol_cfg *cfg, unsigned k, unsigned m, const uint8_t id[16],
                       struct ol_hlc *hlc, struct ol_deploy **out, char *err, size_t errlen)
{
    struct ol_deploy *ec = calloc(1, sizeof(*ec));
    if (!ec)
        return -ENOMEM;
    ec->borrowed = true;
    memcpy(ec->deploy_id, id, 16);
    struct ol_ec_placement probe;
    int rc = ol_ec_placement_init(&probe, k + m, k, m, id);
    if (rc < 0 || k == 0) {
        rc = -EINVAL;
        snprintf(err, errlen, "erasure sets of %u+%u are not possible", k, m);
        goto fail;
    }
    /* The placement of a deployment without pools is never used: set_of
     * needs a pool (the cluster adds one before it serves). */
    ec->place = probe;
    ec->k = k;
    ec->m = m;
    ec->scrub_interval_ms = cfg->scrub_interval_ms;
    ec->scrub_per_sec = cfg->scrub_objects_per_sec;
    ec->drive_check_ms = cfg->ec_drive_check_ms;
    ec->body_wait_ms = (unsigned)cfg->body_memory_wait_ms;
    ec->read_timeout_ms = (unsigned)cfg->ec_read_timeout_ms;
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    ol_hlc_init(&ec->hlc, 1, nonce, NULL, NULL);
    ec->clock = hlc ? hlc : &ec->hlc;
    /* At capacity from the start: a pool added later fills entries, never
     * moves them ("Growing while serving", deploy.h). */
    ec->cap_drives = OL_EC_MAX_DRIVES;
    ec->cap_sets = OL_EC_MAX_DRIVES / (k + m);
    rc = -ENOMEM;
    ec->paths = calloc(ec->cap_drives, sizeof(*ec->paths));
    ec->stores = calloc(ec->cap_drives, sizeof(*ec->stores));
    ec->drives = calloc(ec->cap_drives, sizeof(*ec->drives));
    ec->drv = calloc(ec->cap_drives, sizeof(*ec->drv));
    ec->sets = calloc(ec->cap_sets, sizeof(*ec->sets));
    ec->seen = calloc(ec->cap_drives, sizeof(*ec->seen));
    if (!ec->paths || !ec->stores || !ec->drives || !ec->drv || !ec->sets || !ec->seen)
        goto fail;
    *out = ec;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s", ol_strerror(rc));
    ol_deploy_close(ec);
    return rc;
}

int ol_deploy_add_pool(struct ol_deploy *ec, uint32_t pool_id, unsigned n,
                       const struct ol_drive *drives, struct ol_storedrive *const *local,
                       const char *const *names, char *err, size_t errlen)
{
    unsigned np = atomic_load(&ec->npools), nd = atomic_load(&ec->ndrives);
    unsigned ns = atomic_load(&ec->nsets);
    if (np >= OL_DEPLOY_MAX_POOLS || n > ec->cap_drives - nd) {
        snprintf(err, errlen, "a deployment holds at most %u pools and %u drives",
                 (unsigned)OL_DEPLOY_MAX_POOLS, ec->cap_drives);
        return -OL_ETOOLARGE;
    }
    struct ol_deploy_pool *p = &ec->pools[np];
    struct ol_ec_placement place;
    int rc = ol_ec_placement_init(&place, n, ec->k, ec->m, ec->deploy_id);
    if (rc < 0 || n == 0) {
        snprintf(err, errlen, "cannot group %u drives into erasure sets of %u+%u", n, ec->k, ec->m);
        return -EINVAL;
    }
    if (place.nsets > ec->cap_sets - ns)
        return -OL_ETOOLARGE;
    for (unsigned i = 0; i < n; i++) {
        ec->paths[nd + i] = strdup(names[i]);
        if (!ec->paths[nd + i]) {
            rc = -ENOMEM;
            goto fail;
        }
        ec->drv[nd + i] = drives[i];
        ec->drives[nd + i] = local[i];
        ec->stores[nd + i] = local[i] ? ol_storedrive_store(local[i]) : NULL;
    }
    rc = make_sets(ec, ns, nd, place.nsets, err, errlen);
    if (rc < 0)
        goto fail;
    p->id = pool_id;
    p->first_set = ns;
    p->nsets = place.nsets;
    p->first_drive = nd;
    p->ndrives = n;
    p->place = place;
    atomic_store(&p->free_bytes, UINT64_MAX);
    if (np == 0)
        ec->place = place;
    /* Publish: the entries first, then the counts, the pool count last. */
    atomic_store(&ec->ndrives, nd + n);
    atomic_store(&ec->nsets, ns + place.nsets);
    atomic_store(&ec->npools, np + 1);
    return 0;
fail:
    for (unsigned i = 0; i < n; i++) {
        free(ec->paths[nd + i]);
        ec->paths[nd + i] = NULL;
        ec->drives[nd + i] = NULL;
        ec->stores[nd + i] = NULL;
    }
    return rc;
}

int ol_deploy_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                   const struct ol_store_opts *so, struct ol_deploy **out, char *err, size_t errlen)
{
    struct ol_deploy *ec = calloc(1, sizeof(*ec));
    int rc = -ENOMEM;
    if (!ec)
        return rc;
    ec->ndrives = n;
    /* The geometry first (the key does not change it); the placement is set
     * up again with the deployment's id once the drives have told it. */
    rc = ol_ec_placement_init(&ec->place, n, (unsigned)cfg->ec_data, (unsigned)cfg->ec_parity,
                              ol_storedrive_legacy_id);
    if (rc < 0) {
        snprintf(err, errlen,
                 "cannot group %u drives into erasure sets with ec_data %" PRId64
                 " and ec_parity %" PRId64 " (k+m must divide the drive count)",
                 n, cfg->ec_data, cfg->ec_parity);
        goto fail;
    }
    ec->k = ec->place.k;
    ec->m = ec->place.m;
    ec->nsets = ec->place.nsets;
    ec->scrub_interval_ms = cfg->scrub_interval_ms;
    ec->scrub_per_sec = cfg->scrub_objects_per_sec;
    ec->read_timeout_ms = (unsigned)cfg->ec_read_timeout_ms;
    ec->cap_drives = n;
    ec->cap_sets = ec->nsets;
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    ol_hlc_init(&ec->hlc, 1, nonce, NULL, NULL);
    ec->clock = &ec->hlc;
    ec->paths = calloc(n, sizeof(*ec->paths));
    ec->stores = calloc(n, sizeof(*ec->stores));
    ec->drives = calloc(n, sizeof(*ec->drives));
    ec->drv = calloc(n, sizeof(*ec->drv));
    ec->sets = calloc(ec->nsets, sizeof(*ec->sets));
    ec->seen = calloc(n, sizeof(*ec->seen));
    rc = -ENOMEM;
    if (!ec->paths || !ec->stores || !ec->drives || !ec->drv || !ec->sets || !ec->seen)
        goto fail;
    struct ol_storedrive_policy pol;
    ol_storedrive_policy_default(&pol);
    pol.fail_after = (unsigned)cfg->ec_drive_fail_after;
    pol.backoff_max_ms = (unsigned)cfg->ec_drive_backoff_max_ms;
    ec->drive_check_ms = cfg->ec_drive_check_ms;
    ec->body_wait_ms = (unsigned)cfg->body_memory_wait_ms;
    for (unsigned i = 0; i < n; i++) {
        ec->paths[i] = strdup(dirs[i]);
        if (!ec->paths[i]) {
            rc = -ENOMEM;
            goto fail;
        }
        if (mkdir(dirs[i], 0755) != 0 && errno != EEXIST) {
            rc = -errno;
            snprintf(err, errlen, "cannot create %s: %s", dirs[i], strerror(-rc));
            goto fail;
        }
        /* A drive that cannot be opened (failed, read-only, not a
         * directory) starts OFFLINE: the sets serve without it while they
         * have enough drives, and the drive monitor opens it once it works. */
        int orc = ol_store_open(&ec->stores[i], dirs[i], so);
        if (orc == -EBUSY) {
            /* Locked: by this start (the directory is listed twice) or by
             * another process.  Starting it offline would look like a dead
             * drive and heal onto a directory someone else writes. */
            ec->stores[i] = NULL;
            rc = orc;
            snprintf(err, errlen,
                     "drive %s is in use: it is listed twice, or another OpenLake process "
                     "has it open",
                     dirs[i]);
            goto fail;
        }
        if (orc < 0) {
            ec->stores[i] = NULL;
            fprintf(stderr, "openlake: drive %s cannot be opened (%s): starting it offline\n",
                    dirs[i], ol_strerror(orc));
        }
        rc = ol_storedrive_create(ec->stores[i], &ec->drives[i]);
        if (rc == 0)
            ol_storedrive_set_policy(ec->drives[i], &pol);
        if (rc == 0)
            rc = ol_storedrive_set_path(ec->drives[i], dirs[i], so);
        if (rc == 0 && orc < 0)
            ol_storedrive_set_failed(ec->drives[i], orc);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the drive %s: %s", dirs[i], ol_strerror(rc));
            goto fail;
        }
    }
    rc = ec_identify(ec, err, errlen);
    if (rc < 0)
        goto fail;
    rc = ol_ec_placement_init(&ec->place, n, ec->k, ec->m, ec->deploy_id);
    OL_ASSERT(rc == 0 && ec->place.nsets == ec->nsets);
    for (unsigned i = 0; i < n; i++)
        ec->drv[i] = ol_storedrive_drive(ec->drives[i]);
    rc = make_sets(ec, 0, 0, ec->nsets, err, errlen);
    if (rc < 0)
        goto fail;
    /* One pool, every drive: placement as it always was. */
    ec->pools[0].first_set = 0;
    ec->pools[0].nsets = ec->nsets;
    ec->pools[0].first_drive = 0;
    ec->pools[0].ndrives = n;
    ec->pools[0].place = ec->place;
    atomic_store(&ec->pools[0].free_bytes, UINT64_MAX);
    atomic_store(&ec->npools, 1);
    *out = ec;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s", ol_strerror(rc));
    ol_deploy_close(ec);
    return rc;
}

void ol_deploy_describe(const struct ol_deploy *ec, char *buf, size_t cap)
{
    char id[17];
    for (unsigned i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", ec->deploy_id[i]);
    snprintf(buf, cap, "%u drives, %u erasure set%s of %u+%u, deployment %s", ec->ndrives,
             ec->nsets, ec->nsets == 1 ? "" : "s", ec->k, ec->m, id);
}

/* ---- pools ---- */

/* Runs fn(ctx, i) for i in [0, n): at once, a fiber each, when parallel and
 * the caller is a fiber (the calls are network round trips); one after
 * another otherwise.  The fibers share the caller's loop thread, so fn needs
 * no lock; it must write only its own slot of ctx. */
struct par_state {
    unsigned left;
    struct ol_fiber *waiter; /* set once parked: a wake before that would
                              * hit a park inside the caller's own calls */
};
struct par_call {
    unsigned i;
    void (*fn)(void *ctx, unsigned i);
    void *ctx;
    struct par_state *st;
};

static void par_fiber(void *arg)
{
    struct par_call *c = arg;
    c->fn(c->ctx, c->i);
    if (--c->st->left == 0 && c->st->waiter)
        ol_fiber_wake(c->st->waiter);
}

static void par_run(unsigned n, void (*fn)(void *ctx, unsigned i), void *ctx, bool parallel)
{
    struct ol_loop *loop = ol_loop_current();
    struct ol_fiber *me = ol_fiber_current();
    struct par_call *c = parallel && loop && me && n > 1 ? calloc(n, sizeof(*c)) : NULL;
    if (!c) {
        for (unsigned i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    struct par_state st = {.left = 1}; /* 1: ours, until every call is started */
    for (unsigned i = 0; i < n; i++) {
        c[i] = (struct par_call){i, fn, ctx, &st};
        st.left++;
        if (ol_fiber_spawn(loop, par_fiber, &c[i]) != 0) {
            st.left--; /* no fiber left: here (backpressure, not failure) */
            fn(ctx, i);
        }
    }
    st.left--;
    for (unsigned guard = 0; st.left > 0 && guard < (1u << 20); guard++) {
        st.waiter = me;
        ol_fiber_park();
        st.waiter = NULL;
    }
    OL_ASSERT(st.left == 0);
    free(c);
}

struct ol_eset *ol_deploy_set_in(struct ol_deploy *ec, unsigned p, const char *bucket,
                                 const char *key, size_t klen)
{
    OL_ASSERT(p < atomic_load(&ec->npools));
    const struct ol_deploy_pool *pl = &ec->pools[p];
    if (pl->nsets == 1)
        return ec->sets[pl->first_set];
    struct ol_ec_target t;
    ol_ec_place(&pl->place, bucket, key, klen, &t);
    return ec->sets[pl->first_set + t.set];
}

unsigned ol_deploy_pick_weighted(const uint64_t *free_bytes, unsigned n, uint64_t r)
{
    OL_ASSERT(n >= 1);
    /* Weights in MiB (sums of up to 64 pools of exabytes fit 64 bits). */
    uint64_t w[OL_DEPLOY_MAX_POOLS], known = 0, total = 0;
    unsigned nknown = 0;
    if (n > OL_DEPLOY_MAX_POOLS)
        n = OL_DEPLOY_MAX_POOLS;
    for (unsigned i = 0; i < n; i++) {
        if (free_bytes[i] != UINT64_MAX) {
            known += free_bytes[i] >> 20;
            nknown++;
        }
    }
    uint64_t avg = nknown ? known / nknown : 1;
    for (unsigned i = 0; i < n; i++) {
        w[i] = free_bytes[i] == UINT64_MAX ? avg : free_bytes[i] >> 20;
        total += w[i];
    }
    if (total == 0) /* every pool full or unmeasured at 0: spread evenly */
        return (unsigned)(r % n);
    uint64_t x = r % total;
    for (unsigned i = 0; i < n; i++) {
        if (x < w[i])
            return i;
        x -= w[i];
    }
    return n - 1;
}

unsigned ol_deploy_pick_pool(struct ol_deploy *ec, const char *bucket, const char *key,
                             size_t klen)
{
    unsigned np = atomic_load(&ec->npools);
    if (np <= 1)
        return 0;
    uint64_t f[OL_DEPLOY_MAX_POOLS];
    for (unsigned i = 0; i < np; i++)
        f[i] = atomic_load(&ec->pools[i].free_bytes);
    /* The draw is the key's (FNV-1a 64 of the deployment id, the bucket and
     * the key), not a fresh random number: two first writes of one key
     * racing through different nodes then pick the same pool, as long as
     * the nodes' free-space views agree (they are refreshed every second). */
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned i = 0; i < sizeof(ec->deploy_id); i++)
        h = (h ^ ec->deploy_id[i]) * 0x100000001b3ull;
    for (const char *b = bucket; *b; b++)
        h = (h ^ (uint8_t)*b) * 0x100000001b3ull;
    h = (h ^ 0xffu) * 0x100000001b3ull;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (uint8_t)key[i]) * 0x100000001b3ull;
    /* The low bits of FNV mix poorly: fold the high ones in. */
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return ol_deploy_pick_weighted(f, np, h);
}

struct locate_q {
    struct ol_deploy *ec;
    const char *bucket, *key;
    size_t klen;
    int rc[OL_DEPLOY_MAX_POOLS];
    struct ol_eset_obj newest[OL_DEPLOY_MAX_POOLS];
};

static void q_locate(void *ctx, unsigned p)
{
    struct locate_q *q = ctx;
    q->rc[p] = ol_eset_versions(ol_deploy_set_in(q->ec, p, q->bucket, q->key, q->klen), q->bucket,
                                q->key, q->klen, &q->newest[p], 1);
}

int ol_deploy_locate(struct ol_deploy *ec, const char *bucket, const char *key, size_t klen,
                     unsigned *pool)
{
    unsigned np = atomic_load(&ec->npools);
    OL_ASSERT(np >= 1);
    *pool = 0;
    struct locate_q *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->ec = ec;
    q->bucket = bucket;
    q->key = key;
    q->klen = klen;
    par_run(np, q_locate, q, ec->borrowed);
    int best = -1, failed = -1, err = 0;
    for (unsigned p = 0; p < np; p++) {
        if (q->rc[p] < 0) {
            if (failed < 0) {
                failed = (int)p;
                err = q->rc[p];
            }
            continue;
        }
        if (q->rc[p] > 0 &&
            (best < 0 || ol_version_id_cmp(&q->newest[p].vid, &q->newest[best].vid) > 0))
            best = (int)p;
    }
    free(q);
    if (best >= 0) {
        *pool = (unsigned)best;
        return 1;
    }
    if (failed >= 0) {
        *pool = (unsigned)failed;
        return err;
    }
    *pool = ol_deploy_pick_pool(ec, bucket, key, klen);
    return 0;
}

struct ol_eset *ol_deploy_set_of(struct ol_deploy *ec, const char *bucket, const char *key,
                                 size_t klen)
{
    unsigned np = atomic_load(&ec->npools);
    if (np == 1) /* one pool: no question to ask (single-node mode always) */
        return ol_deploy_set_in(ec, 0, bucket, key, klen);
    unsigned p = 0;
    (void)ol_deploy_locate(ec, bucket, key, klen, &p);
    return ol_deploy_set_in(ec, p, bucket, key, klen);
}

unsigned ol_deploy_pool_of_set(const struct ol_deploy *ec, unsigned s)
{
    unsigned np = atomic_load(&ec->npools);
    for (unsigned p = 0; p < np; p++)
        if (s >= ec->pools[p].first_set && s < ec->pools[p].first_set + ec->pools[p].nsets)
            return p;
    return 0;
}

struct space_q {
    struct ol_deploy *ec;
    uint64_t *free;
};

static void q_space(void *ctx, unsigned i)
{
    struct space_q *q = ctx;
    const struct ol_drive *d = &q->ec->drv[i];
    uint64_t fr = 0, tot = 0;
    if (!d->ops->space)
        return;
    int rc = d->ops->space(d->d, &fr, &tot);
    if (rc == 0)
        q->free[i] = fr;
    atomic_store(&q->ec->seen[i], rc == 0 ? 1 : 2);
}

int ol_deploy_refresh_space(struct ol_deploy *ec)
{
    unsigned np = atomic_load(&ec->npools), nd = atomic_load(&ec->ndrives);
    uint64_t *fr = calloc(nd ? nd : 1, sizeof(*fr));
    if (!fr)
        return -ENOMEM;
    struct space_q q = {ec, fr};
    par_run(nd, q_space, &q, ec->borrowed);
    for (unsigned p = 0; p < np; p++) {
        const struct ol_deploy_pool *pl = &ec->pools[p];
        uint64_t sum = 0;
        for (unsigned i = 0; i < pl->ndrives && pl->first_drive + i < nd; i++)
            sum += fr[pl->first_drive + i];
        atomic_store(&ec->pools[p].free_bytes, sum == UINT64_MAX ? sum - 1 : sum);
    }
    free(fr);
    return 0;
}

unsigned ol_deploy_nsets(const struct ol_deploy *ec)
{
    return ec->nsets;
}

struct ol_eset *ol_deploy_set(struct ol_deploy *ec, unsigned i)
{
    OL_ASSERT(i < ec->nsets);
    return ec->sets[i];
}

/* ---- buckets ---- */

/* One call per drive, fn(ec, i, ctx).  A cluster's deployment (remote
 * drives: each call a network round trip, up to drive_timeout_ms for a hung
 * node) makes them at once, a fiber each, when the caller is a fiber; local
 * drives, or a caller outside a fiber, one after another as always.  The
 * fibers share the caller's loop thread, so fn needs no lock; it must
 * write only its own drive's slot of ctx (or what a cooperative loop
 * makes safe). */
struct each_call {
    struct ol_deploy *ec;
    unsigned lo;
    void (*fn)(struct ol_deploy *ec, unsigned i, void *ctx);
    void *ctx;
};

static void each_one(void *ctx, unsigned i)
{
    struct each_call *c = ctx;
    c->fn(c->ec, c->lo + i, c->ctx);
}

/* fn for drives lo..hi-1 (hi: a count the caller loaded once, see
 * "Growing while serving" in deploy.h). */
static void each_drive_range(struct ol_deploy *ec, unsigned lo, unsigned hi,
                             void (*fn)(struct ol_deploy *, unsigned, void *), void *ctx)
{
    struct each_call c = {ec, lo, fn, ctx};
    par_run(hi > lo ? hi - lo : 0, each_one, &c, ec->borrowed);
}

static void each_drive(struct ol_deploy *ec, unsigned n,
                       void (*fn)(struct ol_deploy *, unsigned, void *), void *ctx)
{
    each_drive_range(ec, 0, n, fn, ctx);
}

struct bucket_q {
    const char *bucket;
    int64_t now;
    int *rc; /* per drive */
};

static void q_get(struct ol_deploy *ec, unsigned i, void *ctx)
{
    struct bucket_q *q = ctx;
    const struct ol_drive *d = &ec->drv[i];
    q->rc[i] = d->ops->bucket_get ? d->ops->bucket_get(d->d, q->bucket, NULL) : -EOPNOTSUPP;
}

static void q_create(struct ol_deploy *ec, unsigned i, void *ctx)
{
    struct bucket_q *q = ctx;
    const struct ol_drive *d = &ec->drv[i];
    q->rc[i] = d->ops->bucket_create ? d->ops->bucket_create(d->d, q->bucket, q->now) : -EOPNOTSUPP;
}

/* A bucket exists when at least half of the drives that answer hold it (a
 * replaced, empty drive lacks it until a heal).  1, 0, or -OL_EQUORUM. */
static int bucket_exists(struct ol_deploy *ec, const char *bucket)
{
    unsigned nd = atomic_load(&ec->ndrives);
    unsigned answered = 0, have = 0;
    int *rcs = calloc(nd, sizeof(*rcs));
    if (!rcs)
        return -ENOMEM;
    struct bucket_q q = {.bucket = bucket, .rc = rcs};
    each_drive(ec, nd, q_get, &q);
    for (unsigned i = 0; i < nd; i++) {
        int rc = rcs[i];
        if (rc == 0 || rc == -OL_ENOBUCKET) {
            answered++;
            have += rc == 0;
        }
    }
    free(rcs);
    if (answered < (nd + 1) / 2)
        return -OL_EQUORUM;
    return have > 0 && 2 * have >= answered;
}

int ol_deploy_bucket_exists(struct ol_deploy *ec, const char *bucket)
{
    return bucket_exists(ec, bucket);
}

/* Creates the bucket on every drive that lacks it; returns how many hold it. */
unsigned ol_deploy_bucket_spread(struct ol_deploy *ec, const char *bucket, int64_t now)
{
    unsigned nd = atomic_load(&ec->ndrives);
    unsigned ok = 0;
    int *rcs = calloc(nd, sizeof(*rcs));
    if (!rcs)
        return 0;
    struct bucket_q q = {.bucket = bucket, .now = now, .rc = rcs};
    each_drive(ec, nd, q_create, &q);
    for (unsigned i = 0; i < nd; i++)
        ok += rcs[i] == 0;
    free(rcs);
    return ok;
}

/* Bucket settings live on every drive, each value stamped with the time it
 * was set (and a flag: set or removed), so that a drive that missed a
 * change (offline, replaced) never wins over the newer ones. */
#define CFG_HEAD 9u /* stamp (8, little-endian ns) + set flag (1) */

/* A setting's stamp: the deployment's clock (in a cluster, the process clock
 * the drive protocol carries).  A put overwrites the value on every drive it
 * reaches, so the stamps only decide between drives that disagree (one
 * missed a put); then a setting made through one node after another node's
 * was acknowledged must win even when that node's wall clock runs ahead (the
 * existence check before the put has taken the drives' clocks in).  Nanoseconds-like, milliseconds
 * * 10^6 + the logical counter (below 65536): in the same order as the HLC stamps and comparable
 * with the wall nanoseconds that earlier versions wrote. */
static int64_t cfg_stamp(struct ol_deploy *ec)
{
    uint64_t s = ol_hlc_now(ec->clock);
    return (int64_t)(ol_hlc_stamp_ms(s) * 1000000u + ol_hlc_stamp_logical(s));
}

struct cfg_q {
    const char *bucket, *name;
    uint8_t *v; /* put: the encoded value; get: the shared buffer (local drives) */
    size_t len; /* put: its length; get: the buffers' size */
    int *rc;
    /* get: the answers, folded in as they come (each_drive's fibers share
     * one thread, and the fold does not yield) */
    unsigned answered;
    int64_t best;
    ssize_t best_len;
    bool too_small;
    void *buf;
    /* get: each drive's stamp (CFG_NONE: no answer, CFG_MISSING: it holds
     * no value), and the newest answer's record as stored (read repair) */
    int64_t *stamps;
    uint8_t *best_raw;
    size_t best_raw_len;
};

#define CFG_NONE INT64_MIN
#define CFG_MISSING (INT64_MIN + 1)

static void q_cfg_put(struct ol_deploy *ec, unsigned i, void *ctx)
{
    struct cfg_q *q = ctx;
    const struct ol_drive *d = &ec->drv[i];
    q->rc[i] = d->ops->bucket_config_put
                   ? d->ops->bucket_config_put(d->d, q->bucket, q->name, q->v, q->len)
                   : -EOPNOTSUPP;
}

static void q_cfg_get(struct ol_deploy *ec, unsigned i, void *ctx)
{
    struct cfg_q *q = ctx;
    const struct ol_drive *d = &ec->drv[i];
    if (!d->ops->bucket_config_get)
        return;
    /* Calls at once (remote drives) need a buffer each. */
    uint8_t *v = ec->borrowed ? malloc(q->len) : q->v;
    if (!v)
        return;
    ssize_t n = d->ops->bucket_config_get(d->d, q->bucket, q->name, v, q->len);
    if (n == -OL_ENOCONFIG || n == -OL_ENOBUCKET) {
        q->answered++;
        if (n == -OL_ENOCONFIG && q->stamps)
            q->stamps[i] = CFG_MISSING;
    } else if (n == -ENOBUFS) {
        q->answered++;
        q->too_small = true;
    } else if (n >= (ssize_t)CFG_HEAD) {
        q->answered++;
        int64_t stamp;
        memcpy(&stamp, v, 8);
        if (q->stamps)
            q->stamps[i] = stamp;
        if (stamp > q->best) {
            q->best = stamp;
            if (q->best_raw) {
                memcpy(q->best_raw, v, (size_t)n);
                q->best_raw_len = (size_t)n;
            }
            if (!v[8]) {
                q->best_len = -OL_ENOCONFIG;
            } else {
                q->best_len = n - (ssize_t)CFG_HEAD;
                memcpy(q->buf, v + CFG_HEAD, (size_t)q->best_len);
            }
        }
    }
    if (v != q->v)
        free(v);
}

/* Read repair: the drives that answered without the newest record of a
 * setting (a drive replaced or offline when it was set) get it, as stored
 * (its stamp included, a removal's too), so that the setting keeps every
 * drive's vote.  One put per such drive, in the reader's fiber; errors are
 * left to the next read.  A put of a newer value racing with the repair may
 * see one drive set back to the older record: the newer stamp still wins on
 * every read that meets one of the other drives the put reached. */
static void cfg_repair(struct ol_deploy *ec, const char *bucket, const char *name,
                       const struct cfg_q *q, unsigned nd)
{
    for (unsigned i = 0; i < nd; i++) {
        if (q->stamps[i] == CFG_NONE || q->stamps[i] >= q->best)
            continue;
        const struct ol_drive *d = &ec->drv[i];
        if (!d->ops->bucket_config_put)
            continue;
        if (d->ops->bucket_config_put(d->d, bucket, name, q->best_raw, q->best_raw_len) == 0)
            atomic_fetch_add(&ec->st.config_repairs, 1);
    }
}

int ol_deploy_bucket_config_put(struct ol_deploy *ec, const char *bucket, const char *name,
                                const void *val, size_t len)
{
    unsigned nd = atomic_load(&ec->ndrives);
    int ex = bucket_exists(ec, bucket);
    if (ex <= 0)
        return ex < 0 ? ex : -OL_ENOBUCKET;
    uint8_t *v = malloc(CFG_HEAD + len);
    if (!v)
        return -ENOMEM;
    int64_t stamp = cfg_stamp(ec);
    memcpy(v, &stamp, 8);
    v[8] = val != NULL;
    if (val && len)
        memcpy(v + CFG_HEAD, val, len);
    unsigned ok = 0;
    int last = -OL_EQUORUM;
    int *rcs = calloc(nd, sizeof(*rcs));
    if (!rcs) {
        free(v);
        return -ENOMEM;
    }
    struct cfg_q q = {
        .bucket = bucket, .name = name, .v = v, .len = CFG_HEAD + (val ? len : 0), .rc = rcs};
    each_drive(ec, nd, q_cfg_put, &q);
    for (unsigned i = 0; i < nd; i++) {
        if (rcs[i] == -EOPNOTSUPP)
            continue; /* no bucket ops: not asked */
        if (rcs[i] == 0)
            ok++;
        else
            last = rcs[i];
    }
    free(rcs);
    free(v);
    if (ok >= nd / 2 + 1)
        return 0;
    return last == -OL_ETOOLARGE ? last : -OL_EQUORUM;
}

ssize_t ol_deploy_bucket_config_get(struct ol_deploy *ec, const char *bucket, const char *name,
                                    void *buf, size_t cap)
{
    unsigned nd = atomic_load(&ec->ndrives);
    int ex = bucket_exists(ec, bucket);
    if (ex <= 0)
        return ex < 0 ? ex : -OL_ENOBUCKET;
    size_t vcap = CFG_HEAD + cap;
    uint8_t *v = malloc(vcap);
    if (!v)
        return -ENOMEM;
    int64_t *stamps = malloc(sizeof(*stamps) * (nd ? nd : 1));
    uint8_t *raw = malloc(vcap);
    for (unsigned i = 0; stamps && i < nd; i++)
        stamps[i] = CFG_NONE;
    struct cfg_q q = {.bucket = bucket,
                      .name = name,
                      .v = v,
                      .len = vcap,
                      .best = INT64_MIN,
                      .best_len = -OL_ENOCONFIG,
                      .buf = buf,
                      .stamps = stamps && raw ? stamps : NULL,
                      .best_raw = stamps && raw ? raw : NULL};
    each_drive(ec, nd, q_cfg_get, &q);
    free(v);
    ssize_t rc = q.best_len;
    if (q.answered < (nd + 1) / 2)
        rc = -OL_EQUORUM;
    else if (q.too_small && q.best_len == -OL_ENOCONFIG)
        rc = -ENOBUFS;
    else if (q.stamps && q.best_raw_len)
        cfg_repair(ec, bucket, name, &q, nd);
    free(stamps);
    free(raw);
    return rc;
}

struct bucket_acc {
    char (*names)[64];
    unsigned *votes;
    int64_t *ctime;
    unsigned n, cap;
};

static int acc_bucket(struct bucket_acc *a, const char *name, int64_t ctime)
{
    for (unsigned i = 0; i < a->n; i++)
        if (strcmp(a->names[i], name) == 0) {
            a->votes[i]++;
            return 0;
        }
    if (a->n == a->cap) {
        unsigned cap = a->cap ? a->cap * 2 : 64;
        if (cap > EC_MAX_BUCKETS)
            return 1;
        void *nn = realloc(a->names, cap * sizeof(*a->names));
        if (nn)
            a->names = nn;
        void *nv = realloc(a->votes, cap * sizeof(*a->votes));
        if (nv)
            a->votes = nv;
        void *nc = realloc(a->ctime, cap * sizeof(*a->ctime));
        if (nc)
            a->ctime = nc;
        if (!nn || !nv || !nc)
            return 1;
        a->cap = cap;
    }
    snprintf(a->names[a->n], 64, "%s", name);
    a->votes[a->n] = 1;
    a->ctime[a->n] = ctime;
    a->n++;
    return 0;
}

static int acc_cb(void *ctx, const char *name, int64_t ctime_ns)
{
    return acc_bucket(ctx, name, ctime_ns);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

struct union_q {
    struct bucket_acc *a;
    unsigned answered;
};

/* A drive's list is taken whole into the accumulator: a remote drive
 * calls acc_cb only after its reply came, without yielding in between. */
static void q_list(struct ol_deploy *ec, unsigned i, void *ctx)
{
    struct union_q *q = ctx;
    const struct ol_drive *d = &ec->drv[i];
    if (d->ops->bucket_list && d->ops->bucket_list(d->d, acc_cb, q->a) >= 0)
        q->answered++;
}

/* The buckets held by at least half of the answering drives, sorted. */
static int bucket_union(struct ol_deploy *ec, struct bucket_acc *a, unsigned *answered)
{
    unsigned nd = atomic_load(&ec->ndrives);
    memset(a, 0, sizeof(*a));
    *answered = 0;
    struct union_q q = {a, 0};
    each_drive(ec, nd, q_list, &q);
    *answered = q.answered;
    if (*answered < (nd + 1) / 2)
        return -OL_EQUORUM;
    unsigned w = 0;
    for (unsigned i = 0; i < a->n; i++) {
        if (2 * a->votes[i] < *answered)
            continue;
        memmove(a->names[w], a->names[i], 64);
        a->ctime[w] = a->ctime[i];
        w++;
    }
    a->n = w;
    /* The creation times travel with their names only roughly after this
     * sort: they are informational (CreationDate). */
    if (a->n > 1) /* names is NULL when no drive knows a bucket */
        qsort(a->names, a->n, sizeof(*a->names), name_cmp);
    return 0;
}

static void acc_free(struct bucket_acc *a)
{
    free(a->names);
    free(a->votes);
    free(a->ctime);
}

int ol_deploy_bucket_list(struct ol_deploy *dp,
                          int (*fn)(void *ctx, const struct ol_bucket_info *b), void *ctx)
{
    struct bucket_acc a;
    unsigned answered;
    int rc = bucket_union(dp, &a, &answered);
    for (unsigned i = 0; rc == 0 && i < a.n; i++) {
        struct ol_bucket_info bi;
        memset(&bi, 0, sizeof(bi));
        snprintf(bi.name, sizeof(bi.name), "%s", a.names[i]);
        bi.ctime_ns = a.ctime[i];
        rc = fn(ctx, &bi);
    }
    acc_free(&a);
    return rc < 0 ? rc : 0;
}
/* ---- healing, the scrubber, administration ---- */

static void stats_add(struct ol_eset_heal_stats *a, const struct ol_eset_heal_stats *b)
{
    a->objects += b->objects;
    a->shards_rebuilt += b->shards_rebuilt;
    a->corrupt += b->corrupt;
    a->marked_complete += b->marked_complete;
    a->versions_removed += b->versions_removed;
    a->unrecoverable += b->unrecoverable;
}

struct key_page {
    unsigned n;
    char after[OL_DRIVE_MAX_KEY];
    size_t alen;
    char (*keys)[OL_DRIVE_MAX_KEY];
    uint32_t *lens;
};

static int page_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)o;
    struct key_page *p = ctx;
    if (klen > OL_DRIVE_MAX_KEY)
        return 0;
    memcpy(p->keys[p->n], key, klen);
    p->lens[p->n++] = (uint32_t)klen;
    return 0;
}

/* Heals every listed key of a bucket in one set, pausing pause_ms between
 * keys (0: none).  Stops early when stop says so. */
static int heal_bucket_set(struct ol_deploy *ec, struct ol_eset *es, const char *bucket,
                           unsigned pause_ms, const struct ol_loop *stop,
                           struct ol_eset_heal_stats *hs)
{
    struct key_page p = {0};
    p.keys = malloc(sizeof(*p.keys) * 32);
    p.lens = malloc(sizeof(*p.lens) * 32);
    int rc = 0;
    if (!p.keys || !p.lens) {
        rc = -ENOMEM;
        goto out;
    }
    /* Each round heals one page of up to 32 keys. */
    for (unsigned round = 0; round < (1u << 26); round++) {
        p.n = 0;
        rc = ol_eset_list(es, bucket, p.after, p.alen, 32, page_cb, &p);
        if (rc < 0)
            goto out;
        for (unsigned i = 0; i < p.n; i++) {
            struct ol_eset_heal_stats one = {0};
            int e = ol_eset_heal_object(es, bucket, p.keys[i], p.lens[i], &one);
            if (e < 0 && e != -OL_ENOKEY)
                atomic_fetch_add(&ec->st.scrub_errors, 1);
            stats_add(hs, &one);
            if (pause_ms)
                ol_io_sleep_ms(pause_ms);
            if (stop && ol_loop_stopping(stop))
                goto out;
        }
        if (p.n < 32)
            break;
        memcpy(p.after, p.keys[p.n - 1], p.lens[p.n - 1]);
        p.alen = p.lens[p.n - 1];
    }
    rc = 0;
out:
    free(p.keys);
    free(p.lens);
    return rc;
}

int ol_deploy_each_bucket(struct ol_deploy *ec, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    struct bucket_acc a;
    unsigned answered;
    int rc = bucket_union(ec, &a, &answered);
    for (unsigned i = 0; rc == 0 && i < a.n; i++)
        rc = fn(ctx, a.names[i]);
    acc_free(&a);
    return rc;
}

/* Recreates every bucket of the deployment on drives that lack it. */
static void spread_buckets(struct ol_deploy *ec, int64_t now)
{
    struct bucket_acc a;
    unsigned answered;
    if (bucket_union(ec, &a, &answered) == 0)
        for (unsigned i = 0; i < a.n; i++)
            (void)ol_deploy_bucket_spread(ec, a.names[i], now);
    acc_free(&a);
}

static void count_heal(struct ol_deploy *ec, const struct ol_eset_heal_stats *hs)
{
    atomic_fetch_add(&ec->st.healed_objects, hs->objects);
    atomic_fetch_add(&ec->st.healed_shards, hs->shards_rebuilt);
    atomic_fetch_add(&ec->st.corrupt_shards, hs->corrupt);
}

void ol_deploy_scrub_fiber(void *arg)
{
    struct ol_deploy *ec = arg;
    struct ol_loop *loop = ol_loop_current();
    if (!ec || ec->scrub_interval_ms <= 0)
        return;
    unsigned pause = ec->scrub_per_sec >= 1000 ? 0 : (unsigned)(1000 / ec->scrub_per_sec);
    /* One pass per round: buckets, then every key of each, at the set rate. */
    while (!ol_loop_stopping(loop)) {
        /* Sleep in short slices so that a stop is noticed. */
        for (int64_t slept = 0; slept < ec->scrub_interval_ms && !ol_loop_stopping(loop);
             slept += 250)
            ol_io_sleep_ms(250);
        if (ol_loop_stopping(loop))
            break;
        spread_buckets(ec, ol_wall_ns());
        struct bucket_acc a;
        unsigned answered;
        if (bucket_union(ec, &a, &answered) == 0) {
            for (unsigned b = 0; b < a.n && !ol_loop_stopping(loop); b++) {
                for (unsigned s = 0; s < ec->nsets; s++) {
                    struct ol_eset_heal_stats hs = {0};
                    (void)heal_bucket_set(ec, ec->sets[s], a.names[b], pause, loop, &hs);
                    count_heal(ec, &hs);
                    atomic_fetch_add(&ec->st.scrub_objects, hs.objects);
                    atomic_fetch_add(&ec->st.scrub_shards, hs.shards_rebuilt);
                }
            }
        }
        acc_free(&a);
        atomic_fetch_add(&ec->st.scrub_passes, 1);
    }
}

/* The drive monitor: checks and probes every drive (ec/storedrive.h) each
 * ec_drive_check_ms; when a drive came back (the same directory, or an empty
 * or other one in its place, or the admin's switch), heals everything so
 * that the set returns to full redundancy without waiting for the scrubber.
 * The heal runs here, in this fiber: the checks pause meanwhile, which only
 * delays noticing other drives. */
void ol_deploy_monitor_fiber(void *arg)
{
    struct ol_deploy *ec = arg;
    struct ol_loop *loop = ol_loop_current();
    if (!ec)
        return;
    /* The multipart cleaner (obj/ec_multipart.h) runs beside the monitor.
     * Without a fiber the cleanup records wait for the next start. */
    if (ol_fiber_spawn(loop, ol_ec_mp_cleaner_fiber, ec) < 0)
        ol_warn("EC multipart: cannot start the part cleaner");
    if (ol_fiber_spawn(loop, ol_catchup_fiber, ec->catchup) < 0)
        ol_warn("EC: cannot start the catch-up log's fiber");
    unsigned period = ec->drive_check_ms > 0 ? (unsigned)ec->drive_check_ms : 1000;
    /* Each local drive's count of fresh stores: one that grew since the
     * last look came back as a new store (replaced, wiped, or offline at
     * start), which the catch-up log knows nothing about. */
    uint64_t *reopens = calloc(ec->ndrives, sizeof(*reopens));
    if (!reopens) {
        ol_warn("EC: the drive monitor cannot start (no memory)");
        return;
    }
    while (!ol_loop_stopping(loop)) {
        /* Short slices so that a stop is noticed. */
        for (unsigned slept = 0; slept < period && !ol_loop_stopping(loop); slept += 100)
            ol_io_sleep_ms(period - slept < 100 ? period - slept : 100);
        if (ol_loop_stopping(loop))
            break;
        bool back = false, fresh = false;
        unsigned size = ec->k + ec->m;
        for (unsigned i = 0; i < ec->ndrives; i++) {
            if (!ec->drives[i])
                continue; /* remote: its own node checks it */
            (void)ol_storedrive_check(ec->drives[i]);
            struct ol_storedrive_info di;
            ol_storedrive_info(ec->drives[i], &di);
            if (!ol_storedrive_take_came_back(ec->drives[i]))
                continue;
            back = true;
            fresh |= di.reopens != reopens[i];
            reopens[i] = di.reopens;
            ol_catchup_drive_back(ec->catchup, i / size, i % size);
        }
        if (!back)
            continue;
        spread_buckets(ec, ol_wall_ns());
        if (!fresh) {
            /* The same store came back: what it lacks is what the log says
             * it missed.  Drained here so that the monitor's heal is done
             * when it is counted (the fiber may be draining: wait it out). */
            for (unsigned round = 0; round < 100000 && !ol_loop_stopping(loop); round++) {
                int rc = ol_catchup_drain(ec->catchup, ol_now_ms(), 256);
                if (rc == -EBUSY) {
                    ol_io_sleep_ms(10);
                    continue;
                }
                if (rc <= 0)
                    break;
            }
            atomic_fetch_add(&ec->st.monitor_heals, 1);
            continue;
        }
        struct ol_eset_heal_stats hs = {0};
        for (unsigned s = 0; s < ec->nsets && !ol_loop_stopping(loop); s++)
            if (ol_eset_heal_all(ec->sets[s], &hs) < 0)
                atomic_fetch_add(&ec->st.scrub_errors, 1);
        count_heal(ec, &hs);
        atomic_fetch_add(&ec->st.monitor_heals, 1);
        atomic_fetch_add(&ec->st.scrub_shards, hs.shards_rebuilt);
    }
    free(reopens);
}

static void heal_progress(void *ctx, const struct ol_eset_heal_stats *st)
{
    struct ol_deploy *ec = ctx;
    atomic_store(&ec->hp.objects, st->objects);
    atomic_store(&ec->hp.shards_rebuilt, st->shards_rebuilt);
    atomic_store(&ec->hp.corrupt, st->corrupt);
    atomic_store(&ec->hp.versions_removed, st->versions_removed);
    atomic_store(&ec->hp.unrecoverable, st->unrecoverable);
}

int ol_deploy_heal(struct ol_deploy *ec, const char *bucket, const char *key, size_t klen,
                   int64_t now_ns, struct ol_eset_heal_stats *out)
{
    struct ol_eset_heal_stats hs = {0};
    int rc = 0;
    atomic_fetch_add(&ec->st.heal_requests, 1);
    if (bucket) {
        int ex = bucket_exists(ec, bucket);
        if (ex <= 0)
            return ex < 0 ? ex : -OL_ENOBUCKET;
        (void)ol_deploy_bucket_spread(ec, bucket, now_ns);
        if (key) {
            rc = ol_eset_heal_object(ol_deploy_set_of(ec, bucket, key, klen), bucket, key, klen,
                                     &hs);
            if (rc == -OL_ENOKEY)
                rc = 0;
        } else {
            for (unsigned s = 0; s < ec->nsets && rc == 0; s++)
                rc = heal_bucket_set(ec, ec->sets[s], bucket, 0, NULL, &hs);
        }
    } else {
        spread_buckets(ec, now_ns);
        /* Two deployment heals at once would mix their totals; the second
         * one still heals, its progress just is not reported. */
        bool expected = false;
        bool report = atomic_compare_exchange_strong(&ec->hp.running, &expected, true);
        if (report) {
            struct ol_eset_heal_stats zero = {0};
            heal_progress(ec, &zero);
            atomic_store(&ec->hp.started_ms, ol_now_ms());
            atomic_fetch_add(&ec->hp.runs, 1);
        }
        for (unsigned s = 0; s < ec->nsets && rc == 0; s++)
            rc = ol_eset_heal_all_cb(ec->sets[s], &hs, report ? heal_progress : NULL, ec);
        if (report) {
            heal_progress(ec, &hs);
            atomic_store(&ec->hp.finished_ms, ol_now_ms());
            atomic_store(&ec->hp.running, false);
        }
    }
    count_heal(ec, &hs);
    *out = hs;
    return rc;
}

#define JS(...)                                                                                    \
    do {                                                                                           \
        int w_ = snprintf(b + n, cap - n, __VA_ARGS__);                                            \
        if (w_ > 0 && (size_t)w_ < cap - n)                                                        \
            n += (size_t)w_;                                                                       \
    } while (0)

void ol_deploy_metrics(struct ol_deploy *ec, char *b, size_t cap, size_t *np)
{
    size_t n = *np;
    struct ol_eset_stats t = {0};
    for (unsigned s = 0; s < ec->nsets; s++) {
        struct ol_eset_stats x;
        ol_eset_stats(ec->sets[s], &x);
        t.reads += x.reads;
        t.degraded_reads += x.degraded_reads;
        t.heals_on_read += x.heals_on_read;
        t.shards_healed_on_read += x.shards_healed_on_read;
        t.puts += x.puts;
        t.puts_failed += x.puts_failed;
        t.read_timeouts += x.read_timeouts;
        t.puts_full += x.puts_full;
    }
    unsigned offline = 0, full = 0;
    uint64_t corrupt = 0, failures = 0;
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (!ec->drives[i])
            continue;
        struct ol_storedrive_info di;
        ol_storedrive_info(ec->drives[i], &di);
        offline += di.state == OL_SD_OFFLINE || di.state == OL_SD_ADMIN_OFFLINE;
        full += di.state == OL_SD_FULL;
        failures += di.failures;
        struct ol_store_stats ss = {0};
        if (ol_storedrive_store(ec->drives[i]))
            ol_store_stats(ol_storedrive_store(ec->drives[i]), &ss);
        corrupt += ss.corrupt_blocks;
    }
    JS("# TYPE openlake_ec_reads_total counter\n");
    JS("openlake_ec_drives %u\nopenlake_ec_drives_offline %u\n", ec->ndrives, offline);
    JS("openlake_ec_drives_full %u\n", full);
    JS("openlake_ec_drive_failures_total %" PRIu64 "\n", failures);
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (!ec->drives[i])
            continue;
        struct ol_storedrive_info di;
        ol_storedrive_info(ec->drives[i], &di);
        JS("openlake_ec_drive_state{drive=\"%u\",state=\"%s\"} 1\n", i,
           ol_storedrive_state_name(di.state));
    }
    JS("openlake_ec_reads_total %" PRIu64 "\n", t.reads);
    JS("openlake_ec_degraded_reads_total %" PRIu64 "\n", t.degraded_reads);
    JS("openlake_ec_heals_on_read_total %" PRIu64 "\n", t.heals_on_read);
    JS("openlake_ec_shards_healed_on_read_total %" PRIu64 "\n", t.shards_healed_on_read);
    JS("openlake_ec_puts_total %" PRIu64 "\n", t.puts);
    JS("openlake_ec_puts_failed_total %" PRIu64 "\n", t.puts_failed);
    JS("openlake_ec_puts_full_total %" PRIu64 "\n", t.puts_full);
    JS("openlake_ec_read_timeouts_total %" PRIu64 "\n", t.read_timeouts);
    JS("openlake_ec_quorum_errors_total %" PRIu64 "\n", atomic_load(&ec->st.quorum_errors));
    JS("openlake_ec_heal_requests_total %" PRIu64 "\n", atomic_load(&ec->st.heal_requests));
    JS("openlake_ec_healed_objects_total %" PRIu64 "\n", atomic_load(&ec->st.healed_objects));
    JS("openlake_ec_healed_shards_total %" PRIu64 "\n", atomic_load(&ec->st.healed_shards));
    JS("openlake_ec_corrupt_shards_total %" PRIu64 "\n", atomic_load(&ec->st.corrupt_shards));
    JS("openlake_ec_scrub_passes_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_passes));
    JS("openlake_ec_scrub_objects_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_objects));
    JS("openlake_ec_scrub_shards_rebuilt_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_shards));
    JS("openlake_ec_scrub_errors_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_errors));
    JS("openlake_ec_monitor_heals_total %" PRIu64 "\n", atomic_load(&ec->st.monitor_heals));
    JS("openlake_ec_bucket_config_repairs_total %" PRIu64 "\n",
       atomic_load(&ec->st.config_repairs));
    if (ec->catchup) {
        struct ol_catchup_stats cs;
        ol_catchup_stats(ec->catchup, &cs);
        JS("openlake_ec_catchup_pending %" PRIu64 "\n", cs.pending);
        JS("openlake_ec_catchup_queued_total %" PRIu64 "\n", cs.queued);
        JS("openlake_ec_catchup_healed_total %" PRIu64 "\n", cs.healed);
        JS("openlake_ec_catchup_retries_total %" PRIu64 "\n", cs.retries);
        JS("openlake_ec_catchup_dropped_total %" PRIu64 "\n", cs.dropped);
        JS("openlake_ec_catchup_overflowed_total %" PRIu64 "\n", cs.overflowed);
        JS("openlake_ec_catchup_full_heals_total %" PRIu64 "\n", cs.full_heals);
    }
    JS("openlake_store_corrupt_blocks_total %" PRIu64 "\n", corrupt);
    *np = n;
}
#undef JS
