/* The erasure-coded deployment: several data directories, grouped into
 * erasure sets (ec/placement.h), each set a group of drives (ec/storedrive.h)
 * behind ec/eset.h.  The object layer (obj/ec.c) serves S3 from it; this
 * module owns what is not one request's: opening the drives and checking
 * their identity (docs/EC.md 6.5), the buckets every drive holds, the
 * scrubber, the drive monitor, healing on the admin's request and the
 * metrics.  The admin's HTTP routes are s3/admin.c.
 */
#ifndef OL_DEPLOY_DEPLOY_H
#define OL_DEPLOY_DEPLOY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/hlc.h"
#include "ec/placement.h"

struct ol_cfg;
struct ol_eset;
struct ol_store;
struct ol_store_opts;
struct ol_storedrive;
struct ol_bucket_info;
struct ol_drive;
struct ol_catchup;

enum { OL_DEPLOY_MAX_POOLS = 64 /* = OL_MAP_MAX_POOLS */ };

/* A pool: a placement domain of consecutive sets (dp->sets[first_set ..
 * first_set + nsets)) over consecutive drives (dp->drv[first_drive ..
 * first_drive + ndrives)).  A key hashes to one set of a pool with the
 * pool's own placement (ec/placement.h over the pool's drives, keyed by the
 * deployment id): pool 0 of a deployment places exactly as a deployment of
 * one pool always did, and adding a pool moves no key.  Immutable once
 * published, except free_bytes. */
struct ol_deploy_pool {
    uint32_t id; /* the cluster map's pool id (0 outside a cluster) */
    unsigned first_set, nsets, first_drive, ndrives;
    struct ol_ec_placement place;
    /* Free bytes of the pool's drives (ol_deploy_refresh_space; a drive that
     * does not answer counts 0); UINT64_MAX: not measured yet. */
    _Atomic uint64_t free_bytes;
};

/* Read by s3/admin.c and obj/ec.c; written here and by the object layer
 * (the counters are atomics).
 *
 * Growing while serving.  A cluster adds pools to a running deployment
 * (ol_deploy_add_pool, one adder at a time) while loop threads serve
 * requests over it.  The arrays below are allocated at their capacity
 * (cap_drives, cap_sets) when the deployment is made and never move; a new
 * pool fills entries past the published counts and only then publishes
 * ndrives, nsets and npools (atomic stores, in that order).  A reader loads
 * a count once and uses the entries below it: those never change and are
 * never freed before ol_deploy_close.  So a request sees the old pools or
 * the new ones, never a half-built pool, and needs no lock.  A request that
 * loops over drives or sets takes the count once (a pool added meanwhile is
 * simply not part of that request). */
struct ol_deploy {
    _Atomic unsigned ndrives, nsets, npools;
    unsigned k, m;
    unsigned cap_drives, cap_sets;
    struct ol_deploy_pool pools[OL_DEPLOY_MAX_POOLS];
    /* The placement key: the deployment id recorded on the drives (docs/EC.md,
     * "Deployment identity"). */
    uint8_t deploy_id[16];
    struct ol_ec_placement place;
    char **paths;
    struct ol_store **stores;
    /* Each position's local drive; NULL where the drive is remote (a
     * cluster, deploy/cluster.h): the drive monitor, metrics and admin
     * routes only look at local ones. */
    struct ol_storedrive **drives;
    /* Every position's drive as the sets and the bucket rules use it
     * (local or remote). */
    struct ol_drive *drv;
    /* Whether each drive answered the last ol_deploy_refresh_space (1 yes,
     * 2 no, 0 not asked yet): how the admin routes see remote drives. */
    _Atomic unsigned char *seen;
    /* Opened by someone else (ol_deploy_assemble): close leaves them. */
    bool borrowed;
    /* In a cluster: this node, the cluster and the map's epoch the sets
     * were built from ("" / 0 otherwise). */
    char node[64], cluster[64];
    _Atomic uint64_t epoch;
    struct ol_eset **sets;
    /* The catch-up log of the sets' missed writes (ec/catchup.h): drained by
     * its fiber (started by the drive monitor) and by the monitor when a
     * local drive comes back. */
    struct ol_catchup *catchup;
    struct ol_hlc hlc;
    /* The clock the sets stamp versions with: &hlc, or the process clock a
     * cluster node shares with its drive service (ol_deploy_assemble). */
    struct ol_hlc *clock;
    int64_t scrub_interval_ms, scrub_per_sec;
    int64_t drive_check_ms; /* the drive monitor's period */
    unsigned body_wait_ms;  /* cfg body_memory_wait_ms (a GET's buffer reservation) */
    unsigned read_timeout_ms; /* cfg ec_read_timeout_ms, for the sets of pools added later */
    struct {
        _Atomic uint64_t heal_requests, healed_objects, healed_shards, corrupt_shards;
        _Atomic uint64_t scrub_passes, scrub_objects, scrub_shards, scrub_errors;
        _Atomic uint64_t quorum_errors;
        _Atomic uint64_t monitor_heals; /* heals after a drive came back */
        _Atomic uint64_t config_repairs; /* bucket settings written back on read */
    } st;
    /* The admin's deployment heal in progress (GET /_openlake/admin/heal/status):
     * written by the healing fiber after each key, read by any loop. */
    struct {
        _Atomic bool running;
        _Atomic uint64_t runs, started_ms, finished_ms;
        _Atomic uint64_t objects, shards_rebuilt, corrupt, versions_removed, unrecoverable;
    } hp;
};

/* Opens every directory (formatting empty ones) with the store options `so`,
 * and groups them into sets (cfg->ec_data / ec_parity, 0 = automatic).
 * Checks each drive's deployment identity against its position, writing it
 * to drives that join (docs/EC.md 6.5).  On error (a drive that does not
 * belong included) writes a message naming the directory. */
int ol_deploy_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                   const struct ol_store_opts *so, struct ol_deploy **out, char *err,
                   size_t errlen);
void ol_deploy_close(struct ol_deploy *dp);
/* An empty deployment (no pool yet) of sets of k+m, placement keyed by
 * id, to which ol_deploy_add_pool adds the pools of drives someone else
 * opened (a cluster's, deploy/cluster.h), up to OL_EC_MAX_DRIVES drives in
 * all.  It must have a pool before it serves.  hlc: the clock to stamp
 * versions with (borrowed, outlives the deployment: a cluster's process
 * clock, which its remote drives and drive server carry on the wire), or
 * NULL for the deployment's own. */
int ol_deploy_assemble(const struct ol_cfg *cfg, unsigned k, unsigned m, const uint8_t id[16],
                       struct ol_hlc *hlc, struct ol_deploy **out, char *err, size_t errlen);
/* Adds (and publishes: see "Growing while serving") a pool of n drives, in
 * set order (set s of the pool is its drives s*(k+m) .. s*(k+m)+k+m-1, shard
 * slot j on the j-th), each with a name (names[i], copied: a local drive's
 * directory, which the admin routes look at, or "node:/dir"), local[i] its
 * storedrive when local (the monitor and metrics look at those) or NULL
 * when remote.  The drives and storedrives are borrowed: they outlive the
 * deployment, ol_deploy_close leaves them.  No identity check here (the
 * caller's business).  Buckets: the caller creates them on the new drives
 * first (every bucket rule counts every drive).  One adder at a time;
 * requests may run meanwhile.  -EINVAL (n not a multiple of k+m),
 * -OL_ETOOLARGE (past the capacity or OL_DEPLOY_MAX_POOLS), -ENOMEM. */
int ol_deploy_add_pool(struct ol_deploy *dp, uint32_t pool_id, unsigned n,
                       const struct ol_drive *drives, struct ol_storedrive *const *local,
                       const char *const *names, char *err, size_t errlen);
/* One line for the start-up banner ("6 drives, 1 set of 4+2"). */
void ol_deploy_describe(const struct ol_deploy *dp, char *buf, size_t cap);
/* The erasure set for bucket/key (reads and writes alike): with one pool,
 * the key's set of it (no I/O).  With several, the key's set in the pool
 * that holds it (ol_deploy_locate); a key no pool holds goes to a pool
 * chosen by free space; when no pool holds it and a pool could not answer,
 * that pool's set (the operation then fails there with its quorum error
 * rather than creating the key in a second pool).  May yield (a fiber) or
 * block (a thread): it asks every pool. */
struct ol_eset *ol_deploy_set_of(struct ol_deploy *dp, const char *bucket, const char *key,
                                 size_t klen);
/* The key's set within pool p (< npools), by the pool's placement. */
struct ol_eset *ol_deploy_set_in(struct ol_deploy *dp, unsigned p, const char *bucket,
                                 const char *key, size_t klen);
/* Which pool holds bucket/key: asks the key's set in every pool (at once,
 * a fiber each, when called from a fiber) for its newest version (delete
 * markers count: a key whose newest version is a marker still lives where
 * the marker is).  The pool with the newest version wins (two pools hold a
 * key only after a race of two first writes; the newer one is what reads
 * must see).  Returns 1 and *pool when a pool holds it; 0 and *pool =
 * ol_deploy_pick_pool's choice when none does; a negative error (the pool
 * that failed in *pool) when none holds it and a pool could not answer. */
int ol_deploy_locate(struct ol_deploy *dp, const char *bucket, const char *key, size_t klen,
                     unsigned *pool);
/* The pool for a new key: pool i with probability free[i] / sum(free)
 * (pools not measured yet count as the average of those measured, or all
 * alike when none is); r is a uniform 64-bit number.  Pure: the unit
 * tests call it with their own numbers. */
unsigned ol_deploy_pick_weighted(const uint64_t *free_bytes, unsigned n, uint64_t r);
/* ol_deploy_pick_weighted over the pools' free bytes with r a hash of the
 * deployment id, bucket and key: the same key draws the same pool on every
 * node while their free-space views agree. */
unsigned ol_deploy_pick_pool(struct ol_deploy *dp, const char *bucket, const char *key,
                             size_t klen);
/* Measures the free bytes of every pool's drives (their `space` op, blocking
 * or yielding per drive) into pools[].free_bytes.  0 or -ENOMEM. */
int ol_deploy_refresh_space(struct ol_deploy *dp);
/* The pool of set s. */
unsigned ol_deploy_pool_of_set(const struct ol_deploy *dp, unsigned s);
unsigned ol_deploy_nsets(const struct ol_deploy *dp);
struct ol_eset *ol_deploy_set(struct ol_deploy *dp, unsigned i);

/* ---- buckets (every drive holds every bucket) ----
 *
 * Through the drives' bucket ops (ec/drive.h), local or remote alike; a
 * drive that does not answer (offline, unreachable) counts as not
 * answering, one without the ops is left out. */

/* 1 when at least half of the drives that answer hold the bucket, 0 when
 * not, or -OL_EQUORUM. */
int ol_deploy_bucket_exists(struct ol_deploy *dp, const char *bucket);
/* Creates the bucket on every drive that lacks it; returns how many hold it. */
unsigned ol_deploy_bucket_spread(struct ol_deploy *dp, const char *bucket, int64_t now_ns);
/* Calls fn for every bucket held by at least half of the answering drives,
 * in name order; -OL_EQUORUM when fewer than half answer. */
int ol_deploy_bucket_list(struct ol_deploy *dp,
                          int (*fn)(void *ctx, const struct ol_bucket_info *b), void *ctx);
/* A bucket setting (store/store.h's bucket settings), kept on every drive
 * with the time it was set: a put (val NULL: removal) needs a majority of
 * the drives; a get needs half of them to answer and returns the newest
 * value among them (ol_store_bucket_config_get's answers). */
int ol_deploy_bucket_config_put(struct ol_deploy *dp, const char *bucket, const char *name,
                                const void *val, size_t len);
ssize_t ol_deploy_bucket_config_get(struct ol_deploy *dp, const char *bucket, const char *name,
                                    void *buf, size_t cap);
/* Calls fn for every bucket any drive knows; stops at fn's first non-zero
 * answer and returns it (or the listing's error). */
int ol_deploy_each_bucket(struct ol_deploy *dp, int (*fn)(void *ctx, const char *bucket),
                          void *ctx);

/* ---- background work (fibers on loop 0; arg: the struct ol_deploy) ---- */

/* The scrubber: heals every key of every bucket each scrub_interval_ms. */
void ol_deploy_scrub_fiber(void *arg);
/* The drive monitor: checks, probes and reopens drives; when one came back,
 * heals what it missed from the catch-up log (ec/catchup.h), or the whole
 * set when its store was opened afresh (replaced, wiped, offline at start);
 * starts the multipart part cleaner (obj/ec_multipart.c) and the catch-up
 * log's fiber. */
void ol_deploy_monitor_fiber(void *arg);

/* Heals a key (bucket and key), a bucket (key NULL) or everything (bucket
 * NULL) now, on the calling fiber; *out gets the totals.  A deployment heal
 * reports its progress in dp->hp.  0, -OL_ENOBUCKET, -OL_EQUORUM... */
struct ol_eset_heal_stats;
int ol_deploy_heal(struct ol_deploy *dp, const char *bucket, const char *key, size_t klen,
                   int64_t now_ns, struct ol_eset_heal_stats *out);

/* Appends Prometheus lines to b[*n..cap). */
void ol_deploy_metrics(struct ol_deploy *dp, char *b, size_t cap, size_t *n);

#endif
