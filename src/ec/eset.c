/* The erasure set: see eset.h for the contract and docs/EC.md for the design. */
#include "ec/eset.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/codec.h"
#include "ec/placement.h"
#include "ec/stripe.h"

enum {
    /* Versions asked of each drive per key.  A drive keeps at most a few
     * incomplete versions beside the complete one (memdrive: 6), so 16 sees
     * them all. */
    ESET_MAX_VERSIONS = 16,
    /* ... for ol_eset_versions and a read of a version not among those:
     * versioned keys keep every version. */
    ESET_ALL_VERSIONS = 1024,
    ESET_LIST_PAGE = 32,          /* keys per list_keys call */
    ESET_HEAL_CHUNK = 256 * 1024, /* shard bytes per heal step */
    ESET_READ_RETRIES = 3,        /* re-resolutions when a version vanishes mid-read */
    ESET_MAX_BUCKETS = 100000,    /* heal_all's bound on buckets */
    ESET_BLOB_FIRST = 16 * 1024,  /* blob bytes a versions call takes at once */
    ESET_SHARD_FIRST = 4 * 1024,  /* shard bytes a GET's versions call takes with them */
};

struct ol_eset {
    unsigned k, m, n;
    unsigned quorum; /* shards that must commit for a PUT */
    uint32_t unit;
    struct ol_drive drive[OL_EC_MAX_UNITS];
    struct ol_hlc *hlc;
    struct ol_ec_placement place;
    struct ol_ec_codec *codec;
    pthread_mutex_t codec_mu; /* ol_ec_reconstruct is single-threaded per codec */
    _Atomic bool heal_on_read;
    _Atomic bool parallel;
    _Atomic unsigned read_timeout_ms;
    uint64_t grace_ms;
    uint64_t start_ms; /* HLC milliseconds when this set was opened */
    struct {
        _Atomic uint64_t reads, degraded_reads, heals_on_read, shards_healed_on_read;
        _Atomic uint64_t puts, puts_failed, list_slow_keys, list_skipped;
        _Atomic uint64_t read_timeouts, puts_full;
        _Atomic uint64_t copies, copies_failed;
    } st;
    /* ol_eset_set_missed_hook: told of writes that committed without some
     * drives.  Set before the set is shared. */
    ol_eset_missed_fn missed_fn;
    void *missed_ctx;
    unsigned missed_tag;
};

/* What the drives say about one key: every drive's versions, and the winner. */
struct eset_res {
    unsigned cap;              /* versions asked of each drive */
    struct ol_shard_meta *vers; /* cap per slot: VERS(r, s)[i] */
    int nv[OL_EC_MAX_UNITS];   /* count, or the drive's error */
    /* With want_blob (set before resolve): each drive's blob of its newest
     * version (or of `want`), bufs owned here. */
    bool want_blob;
    /* With want_blob and want_shard: each drive's shard bytes of that
     * version too, when small (ol_drive_blob's shard_*): a small object's
     * GET reads them instead of a read round. */
    bool want_shard;
    /* Reads of the latest version: try resolve_first's step first. */
    bool first_step;
    /* Resolved by that step: the slots not asked have no answer here (a
     * degraded read completes the resolution first, res_complete). */
    uint32_t unasked;
    struct ol_drive_blob blob[OL_EC_MAX_UNITS];
    uint8_t *blob_buf[OL_EC_MAX_UNITS]; /* blob_free */
    size_t blob_bytes[OL_EC_MAX_UNITS];
    uint32_t answered;       /* slots whose versions call succeeded */
    bool found;
    struct ol_shard_meta win; /* the winner's metadata (shard, flags of one drive) */
    uint32_t have;            /* slots holding a consistent shard of the winner */
    uint32_t complete;        /* ... marked COMPLETE */
    uint32_t healed;          /* heal_res: slots holding the winner after the heal */
};

#define VERS(r, s) ((r)->vers + (size_t)(s) * (r)->cap)

static unsigned popcount(uint32_t x)
{
    return (unsigned)__builtin_popcount(x);
}

/* A versions call's room for a blob and shard bytes comes from the
 * thread's buffer pool (core/buf.h): a GET takes one of 20 KiB per drive,
 * and malloc's large chunks cost it more than a drive's index lookup. */
static uint8_t *blob_alloc(size_t bytes)
{
    return ol_buf_alloc(bytes);
}

static void blob_free(uint8_t *p, size_t bytes)
{
    if (p)
        ol_buf_free(p, bytes);
}

static unsigned slot_of(const struct ol_eset *es, unsigned rotation, unsigned shard)
{
    return (shard + rotation) % es->n;
}

static uint32_t all_slots(const struct ol_eset *es)
{
    return es->n >= 32 ? UINT32_MAX : (1u << es->n) - 1;
}

void ol_eset_cfg_default(struct ol_eset_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->unit_bytes = OL_EC_DEFAULT_UNIT_BYTES;
    cfg->heal_on_read = true;
    cfg->incomplete_grace_ms = 3600 * 1000;
    cfg->parallel = true;
    cfg->read_timeout_ms = 0;
}

int ol_eset_create(const struct ol_eset_cfg *cfg, struct ol_eset **out)
{
    struct ol_eset *es = NULL;
    int rc = ol_ec_check_geometry(cfg->k, cfg->m);
    if (rc < 0 || !cfg->drives || !cfg->hlc || cfg->unit_bytes < 1 ||
        cfg->unit_bytes > OL_EC_MAX_UNIT_BYTES)
        return -EINVAL;
    es = calloc(1, sizeof(*es));
    if (!es)
        return -ENOMEM;
    es->k = cfg->k;
    es->m = cfg->m;
    es->n = cfg->k + cfg->m;
    /* k+1 lets the set lose one more drive after the acknowledgement without
     * losing the object; with m = 0 there is no spare drive to ask for. */
    es->quorum = cfg->m > 0 ? cfg->k + 1 : cfg->k;
    es->unit = cfg->unit_bytes;
    for (unsigned i = 0; i < es->n; i++) {
        if (!cfg->drives[i].ops) {
            rc = -EINVAL;
            goto out;
        }
        es->drive[i] = cfg->drives[i];
    }
    es->hlc = cfg->hlc;
    es->heal_on_read = cfg->heal_on_read;
    es->parallel = cfg->parallel;
    es->read_timeout_ms = cfg->read_timeout_ms;
    es->grace_ms = cfg->incomplete_grace_ms;
    es->start_ms = ol_hlc_stamp_ms(ol_hlc_now(es->hlc));
    rc = ol_ec_placement_init(&es->place, es->n, es->k, es->m, cfg->deployment_id);
    if (rc < 0)
        goto out;
    rc = ol_ec_codec_create(es->k, es->m, &es->codec);
    if (rc < 0)
        goto out;
    pthread_mutex_init(&es->codec_mu, NULL);
    *out = es;
    es = NULL;
out:
    free(es);
    return rc;
}

void ol_eset_destroy(struct ol_eset *es)
{
    if (!es)
        return;
    ol_ec_codec_destroy(es->codec);
    pthread_mutex_destroy(&es->codec_mu);
    free(es);
}

void ol_eset_set_heal_on_read(struct ol_eset *es, bool on)
{
    es->heal_on_read = on;
}

void ol_eset_set_read_timeout_ms(struct ol_eset *es, unsigned ms)
{
    es->read_timeout_ms = ms;
}

void ol_eset_set_parallel(struct ol_eset *es, bool on)
{
    es->parallel = on;
}

void ol_eset_set_missed_hook(struct ol_eset *es, ol_eset_missed_fn fn, void *ctx, unsigned tag)
{
    es->missed_fn = fn;
    es->missed_ctx = ctx;
    es->missed_tag = tag;
}

/* A write committed with its quorum: the drives outside `done` (slots)
 * missed it, and only a heal gives it to them. */
static void note_missed(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        uint32_t done)
{
    uint32_t missed = all_slots(es) & ~done;
    if (missed && es->missed_fn)
        es->missed_fn(es->missed_ctx, es->missed_tag, missed, bucket, key, klen);
}

unsigned ol_eset_drives(const struct ol_eset *es, const struct ol_drive **out)
{
    *out = es->drive;
    return es->n;
}

void ol_eset_stats(struct ol_eset *es, struct ol_eset_stats *out)
{
    out->reads = es->st.reads;
    out->degraded_reads = es->st.degraded_reads;
    out->heals_on_read = es->st.heals_on_read;
    out->shards_healed_on_read = es->st.shards_healed_on_read;
    out->puts = es->st.puts;
    out->puts_failed = es->st.puts_failed;
    out->list_slow_keys = es->st.list_slow_keys;
    out->list_skipped = es->st.list_skipped;
    out->read_timeouts = es->st.read_timeouts;
    out->puts_full = es->st.puts_full;
    out->copies = es->st.copies;
    out->copies_failed = es->st.copies_failed;
}

static bool valid_name(const char *bucket, size_t klen)
{
    size_t bl = bucket ? strlen(bucket) : 0;
    return bl >= 1 && bl <= OL_DRIVE_MAX_BUCKET && klen >= 1 && klen <= OL_DRIVE_MAX_KEY;
}

static unsigned rotation_of(const struct ol_eset *es, const char *bucket, const char *key,
                            size_t klen)
{
    struct ol_ec_target t;
    ol_ec_place(&es->place, bucket, key, klen, &t);
    return t.rotation;
}

static void obj_from_meta(const struct ol_shard_meta *sm, unsigned shards, struct ol_eset_obj *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->vid = sm->vid;
    o->meta_len = sm->meta_len;
    o->flags = sm->flags & (OL_SHARD_DELETE_MARKER | OL_SHARD_KEEP_OLDER | OL_SHARD_NULL);
    o->size = sm->size;
    o->mtime_ns = sm->mtime_ns;
    memcpy(o->etag, sm->etag, sizeof(o->etag));
    o->etag[sizeof(o->etag) - 1] = '\0';
    o->shards = shards;
}

/* ---- fan-out: one drive call per fiber ---- */

/* A batch of drive calls, one per drive at most.  Called from a fiber with
 * `parallel` on, each call runs in its own fiber on the current loop, so a
 * batch costs one drive latency instead of k+m; the caller parks until all
 * are done or, with a timeout, until the timer fires (reads only: calls left
 * running then are stragglers).  Outside a fiber (tests, plain threads) or
 * when no fiber can be spawned, the calls run one after another in the
 * caller.
 *
 * Lifetime.  The batch is on the heap with a reference per running fiber: a
 * straggler may finish after its caller returned, so everything a call
 * touches lives in the batch (the names, the vid, its read buffer), except
 * what calls without a timeout borrow from the caller, which it keeps until
 * every call is done.  Shard writers are not fanned out here: see the
 * per-shard writer fibers of the PUT below.  Every field is
 * touched by fibers of one loop only, so no atomics are needed. */
enum fan_op { FAN_VERSIONS, FAN_MARK, FAN_READ, FAN_DELETE, FAN_SETMETA, FAN_COPY };

struct fan;
struct copy_src;

struct fan_call {
    struct fan *f;
    uint8_t op;
    bool done;
    unsigned slot;  /* drive slot */
    unsigned shard; /* the caller's index (shard number) */
    uint64_t off;   /* READ */
    size_t len;
    uint8_t *buf; /* READ, VERSIONS: the answer, owned until taken */
    struct ol_drive_blob blob; /* VERSIONS with blob_cap: the blob answer */
    uint8_t *blob_buf;         /* ... its bytes, owned until taken (blob_free) */
    size_t blob_bytes;
    int rc;
};

struct fan {
    struct ol_eset *es;
    unsigned n, ndone, refs;
    struct ol_fiber *waiter;
    bool finished, timed_out;
    unsigned timeout_ms;
    size_t klen;
    struct ol_version_id vid;
    unsigned vcap;   /* VERSIONS: versions asked */
    size_t blob_cap; /* VERSIONS: 0, or ask for a blob (of vid when has_vid) */
    size_t shard_cap; /* VERSIONS with blob_cap: room for the blob copy's shard too */
    bool has_vid;
    /* SETMETA: the blob (borrowed: set_meta calls run without a timeout, so
     * the caller outlives them) and its stamp. */
    const void *meta;
    size_t meta_len;
    uint64_t meta_stamp;
    /* COPY: the source and the new version (borrowed, as SETMETA's blob);
     * the fan's bucket and key are the destination. */
    const struct copy_src *copy;
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    char key[OL_DRIVE_MAX_KEY];
    struct fan_call c[OL_EC_MAX_UNITS];
};

static struct fan *fan_new(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                           const struct ol_version_id *vid)
{
    struct fan *f = malloc(sizeof(*f));
    if (!f)
        return NULL;
    f->es = es;
    f->n = f->ndone = 0;
    f->refs = 1;
    f->waiter = NULL;
    f->finished = f->timed_out = false;
    f->timeout_ms = 0;
    f->klen = klen;
    f->has_vid = vid != NULL;
    f->vcap = ESET_MAX_VERSIONS;
    f->blob_cap = 0;
    f->shard_cap = 0;
    f->meta = NULL;
    f->meta_len = 0;
    f->meta_stamp = 0;
    f->copy = NULL;
    if (vid)
        f->vid = *vid;
    snprintf(f->bucket, sizeof(f->bucket), "%s", bucket);
    memcpy(f->key, key, klen);
    return f;
}

static struct fan_call *fan_add(struct fan *f, uint8_t op, unsigned slot, unsigned shard)
{
    OL_ASSERT(f->n < OL_EC_MAX_UNITS);
    struct fan_call *c = &f->c[f->n++];
    memset(c, 0, sizeof(*c));
    c->f = f;
    c->op = op;
    c->slot = slot;
    c->shard = shard;
    return c;
}

static void fan_unref(struct fan *f)
{
    OL_ASSERT(f->refs > 0);
    if (--f->refs > 0)
        return;
    for (unsigned i = 0; i < f->n; i++) {
        free(f->c[i].buf);
        blob_free(f->c[i].blob_buf, f->c[i].blob_bytes);
    }
    free(f);
}

static int fan_copy_exec(const struct fan *f, const struct fan_call *c, const struct ol_drive *d);

static void fan_exec(struct fan_call *c)
{
    struct fan *f = c->f;
    const struct ol_drive *d = &f->es->drive[c->slot];
    switch (c->op) {
    case FAN_VERSIONS: {
        struct ol_drive_blob *bl = NULL;
        c->buf = malloc(sizeof(struct ol_shard_meta) * f->vcap);
        if (f->blob_cap) {
            c->blob_bytes = f->blob_cap + f->shard_cap;
            c->blob_buf = blob_alloc(c->blob_bytes);
            bl = &c->blob;
            bl->want = f->has_vid ? &f->vid : NULL;
            bl->buf = c->blob_buf;
            bl->cap = f->blob_cap;
            bl->got = false;
            bl->len = 0;
            bl->shard_buf = c->blob_buf && f->shard_cap ? c->blob_buf + f->blob_cap : NULL;
            bl->shard_cap = bl->shard_buf ? f->shard_cap : 0;
            bl->shard_got = false;
            bl->shard_len = 0;
        }
        c->rc = c->buf && (!f->blob_cap || c->blob_buf)
                    ? d->ops->versions(d->d, f->bucket, f->key, f->klen,
                                       (struct ol_shard_meta *)c->buf, f->vcap, bl)
                    : -ENOMEM;
        if (c->rc < 0)
            c->blob.got = c->blob.shard_got = false;
        break;
    }
    case FAN_SETMETA:
        c->rc = d->ops->set_meta(d->d, f->bucket, f->key, f->klen, &f->vid, f->meta, f->meta_len,
                                 f->meta_stamp);
        break;
    case FAN_MARK:
        c->rc = d->ops->mark_complete(d->d, f->bucket, f->key, f->klen, &f->vid);
        break;
    case FAN_READ:
        c->buf = malloc(c->len ? c->len : 1);
        c->rc = c->buf ? d->ops->read_shard(d->d, f->bucket, f->key, f->klen, &f->vid, c->off,
                                            c->len, c->buf)
                       : -ENOMEM;
        break;
    case FAN_DELETE:
        c->rc = d->ops->delete_version(d->d, f->bucket, f->key, f->klen, &f->vid);
        break;
    case FAN_COPY:
        c->rc = fan_copy_exec(f, c, d);
        break;
    default:
        OL_ASSERT(0);
    }
}

static void fan_fiber(void *arg)
{
    struct fan_call *c = arg;
    struct fan *f = c->f;
    fan_exec(c);
    c->done = true;
    f->ndone++;
    if (f->waiter)
        ol_fiber_wake(f->waiter);
    fan_unref(f);
}

enum { FAN_TIMER_SLICE_MS = 10 };

/* Sleeps in short slices so that it ends soon after the batch does (an
 * io_uring timeout cannot be cancelled from here). */
static void fan_timer(void *arg)
{
    struct fan *f = arg;
    uint64_t end = ol_now_ms() + f->timeout_ms;
    for (unsigned guard = 0; guard < 1000000 && !f->finished; guard++) {
        uint64_t now = ol_now_ms();
        if (now >= end)
            break;
        ol_io_sleep_ms(end - now < FAN_TIMER_SLICE_MS ? (unsigned)(end - now)
                                                      : FAN_TIMER_SLICE_MS);
    }
    if (!f->finished) {
        f->timed_out = true;
        if (f->waiter)
            ol_fiber_wake(f->waiter);
    }
    fan_unref(f);
}

/* Runs the batch; returns when every call is done, or (timeout_ms > 0, in a
 * fiber) when the timer fired: then the calls not `done` are left running. */
static void fan_run(struct fan *f, unsigned timeout_ms)
{
    struct ol_loop *loop = ol_loop_current();
    struct ol_fiber *me = ol_fiber_current();
    if (!me || !loop || !f->es->parallel || f->n <= 1) {
        for (unsigned i = 0; i < f->n; i++) {
            fan_exec(&f->c[i]);
            f->c[i].done = true;
            f->ndone++;
        }
        f->finished = true;
        return;
    }
    uint64_t start_ms = timeout_ms > 0 ? ol_now_ms() : 0;
    unsigned spawned = 0;
    for (unsigned i = 0; i < f->n; i++) {
        f->refs++;
        if (ol_fiber_spawn(loop, fan_fiber, &f->c[i]) != 0) {
            /* No fiber left: the call runs here (backpressure, not failure). */
            f->refs--;
            fan_exec(&f->c[i]);
            f->c[i].done = true;
            f->ndone++;
        } else {
            spawned++;
        }
    }
    /* The calls run first (the ready queue is FIFO): a local drive answers
     * without waiting, and then no timer is needed (its fiber and io_uring
     * timeouts were a fixed cost of every GET).  f->waiter is still NULL,
     * so no call wakes this fiber while it is queued. */
    if (spawned > 0)
        ol_fiber_yield();
    if (timeout_ms > 0 && f->ndone < f->n) {
        uint64_t spent = ol_now_ms() - start_ms;
        f->timeout_ms = spent < timeout_ms ? timeout_ms - (unsigned)spent : 1;
        f->refs++;
        if (ol_fiber_spawn(loop, fan_timer, f) != 0)
            f->refs--;
    }
    f->waiter = me;
    /* Each round is woken by a finished call or the timer. */
    for (unsigned guard = 0; f->ndone < f->n && !f->timed_out && guard < (1u << 20); guard++)
        ol_fiber_park();
    OL_ASSERT(f->ndone == f->n || f->timed_out);
    f->waiter = NULL;
    f->finished = true;
}

/* ---- resolving a key: the read rule ---- */

static int vid_desc(const void *a, const void *b)
{
    return -ol_version_id_cmp(a, b);
}

/* Whether drive slot `slot`'s entry e is a shard of the version described by
 * ref: the same version and object, and the shard that belongs on that slot. */
static bool consistent(const struct ol_eset *es, const struct ol_shard_meta *ref, unsigned slot,
                       const struct ol_shard_meta *e)
{
    return ol_version_id_cmp(&e->vid, &ref->vid) == 0 && e->k == ref->k && e->m == ref->m &&
           e->rotation == ref->rotation && e->unit_bytes == ref->unit_bytes &&
           e->size == ref->size && e->mtime_ns == ref->mtime_ns &&
           strncmp(e->etag, ref->etag, sizeof(e->etag)) == 0 &&
           (e->flags & OL_SHARD_DELETE_MARKER) == (ref->flags & OL_SHARD_DELETE_MARKER) &&
           e->shard == (slot + es->n - e->rotation % es->n) % es->n;
}

static const struct ol_shard_meta *entry_of(const struct eset_res *r, unsigned slot,
                                            const struct ol_version_id *vid)
{
    for (int i = 0; i < r->nv[slot]; i++)
        if (ol_version_id_cmp(&VERS(r, slot)[i].vid, vid) == 0)
            return &VERS(r, slot)[i];
    return NULL;
}

/* Counts the slots agreeing with ref; fills the masks. */
static unsigned votes(const struct ol_eset *es, const struct eset_res *r,
                      const struct ol_shard_meta *ref, uint32_t *have, uint32_t *complete)
{
    *have = *complete = 0;
    for (unsigned s = 0; s < es->n; s++) {
        const struct ol_shard_meta *e = entry_of(r, s, &ref->vid);
        if (e && consistent(es, ref, s, e)) {
            *have |= 1u << s;
            if (e->flags & OL_SHARD_COMPLETE)
                *complete |= 1u << s;
        }
    }
    return popcount(*have);
}


/* The vote on vid: each drive's entry for it proposes its metadata; the
 * proposal most drives agree with wins, and drives that disagree count as
 * not holding the version.  Returns the votes of the winning proposal
 * (*ref, *have, *complete: its entry and masks; *ref NULL when none). */
static unsigned vote(const struct ol_eset *es, const struct eset_res *r,
                     const struct ol_version_id *vid, const struct ol_shard_meta **ref,
                     uint32_t *have, uint32_t *complete)
{
    unsigned top = 0;
    *ref = NULL;
    *have = *complete = 0;
    for (unsigned s = 0; s < es->n; s++) {
        const struct ol_shard_meta *e = entry_of(r, s, vid);
        if (!e || e->k != es->k || e->m != es->m || e->rotation >= es->n || e->unit_bytes == 0)
            continue;
        uint32_t h, c;
        unsigned v = votes(es, r, e, &h, &c);
        if (v > top) {
            top = v;
            *have = h;
            *complete = c;
            *ref = e;
        }
    }
    return top;
}

/* Every vid any drive reported, newest first, each once.  Returns the count
 * (vids has room for n * r->cap). */
static unsigned all_vids(const struct ol_eset *es, const struct eset_res *r,
                         struct ol_version_id *vids)
{
    unsigned n = 0;
    for (unsigned s = 0; s < es->n; s++)
        for (int i = 0; i < r->nv[s]; i++)
            vids[n++] = VERS(r, s)[i].vid;
    qsort(vids, n, sizeof(vids[0]), vid_desc);
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++)
        if (m == 0 || ol_version_id_cmp(&vids[i], &vids[m - 1]) != 0)
            vids[m++] = vids[i];
    return m;
}

/* Asks the drives of the slots in `ask` for their versions of the key (and,
 * with r->want_blob, the blob of its newest version or of want) and fills
 * their part of r; the other slots' answers stay as they are.  0 or
 * -ENOMEM. */
static int ask_versions(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *want, struct eset_res *r, uint32_t ask)
{
    r->answered &= ~ask;
    r->unasked &= ~ask;
    r->found = false;
    for (unsigned s = 0; s < es->n; s++) {
        if (!(ask & (1u << s)))
            continue;
        blob_free(r->blob_buf[s], r->blob_bytes[s]);
        r->blob_buf[s] = NULL;
        r->blob[s].got = r->blob[s].shard_got = false;
    }
    struct fan *f = fan_new(es, bucket, key, klen, r->want_blob ? want : NULL);
    if (!f)
        return -ENOMEM;
    f->vcap = r->cap;
    /* Room for the blobs most versions have: a buffer of the largest
     * possible blob per drive and GET costs more in the allocator than it
     * saves; a larger blob is fetched by winner_blob's second step. */
    f->blob_cap = r->want_blob ? ESET_BLOB_FIRST : 0;
    f->shard_cap = r->want_blob && r->want_shard ? ESET_SHARD_FIRST : 0;
    for (unsigned s = 0; s < es->n; s++)
        if (ask & (1u << s))
            fan_add(f, FAN_VERSIONS, s, s);
    /* A drive that does not answer within the read timeout counts as silent,
     * as an offline one does: the read rule copes with silent drives. */
    fan_run(f, es->read_timeout_ms);
    bool slow = false;
    for (unsigned x = 0; x < f->n; x++) {
        struct fan_call *c = &f->c[x];
        unsigned s = c->slot;
        r->nv[s] = c->done ? c->rc : -ETIMEDOUT;
        slow |= !c->done;
        if (c->done && c->rc > 0)
            memcpy(VERS(r, s), c->buf, sizeof(struct ol_shard_meta) * (size_t)c->rc);
        if (c->done && c->rc >= 0) {
            r->answered |= 1u << s;
            if (r->want_blob && (c->blob.got || c->blob.shard_got)) {
                /* The shard bytes (shard_buf) live in the same buffer. */
                blob_free(r->blob_buf[s], r->blob_bytes[s]);
                r->blob[s] = c->blob;
                r->blob_buf[s] = c->blob_buf;
                r->blob_bytes[s] = c->blob_bytes;
                r->blob[s].buf = c->blob_buf;
                c->blob_buf = NULL;
            }
        }
    }
    fan_unref(f);
    if (slow)
        atomic_fetch_add(&es->st.read_timeouts, 1);
    return 0;
}

/* The first step of a read of the latest version (r->first_step): ask only
 * f = max(k, m) drives, those of the key's first f shards.  A version that
 * was acknowledged is durable on k+1 drives, and f + k+1 > n, so at least
 * one of the f holds it.  So when every one of them answers, all name the
 * same newest version and hold it consistently, and it is readable from
 * them (its k data shards among them), nothing newer was acknowledged: it is
 * the answer the full rule would give but for a newer unacknowledged write
 * in flight (which either answer may show).  Otherwise the remaining drives
 * are asked and the full rule decides.  A GET or HEAD of a healthy key then
 * costs f calls instead of n.  Returns whether it resolved. */
static bool resolve_first(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                          struct eset_res *r, uint32_t *asked)
{
    unsigned f = es->k > es->m ? es->k : es->m;
    if (es->m == 0 || f >= es->n)
        return false;
    unsigned rot = rotation_of(es, bucket, key, klen);
    uint32_t ask = 0;
    for (unsigned i = 0; i < f; i++)
        ask |= 1u << slot_of(es, rot, i);
    for (unsigned s = 0; s < es->n; s++)
        if (!(ask & (1u << s)))
            r->nv[s] = -ENODATA; /* not asked (yet) */
    *asked = ask;
    if (ask_versions(es, bucket, key, klen, NULL, r, ask) < 0 || r->answered != ask)
        return false;
    const struct ol_shard_meta *top = NULL;
    for (unsigned s = 0; s < es->n; s++) {
        if (!(ask & (1u << s)))
            continue;
        if (r->nv[s] <= 0)
            return false;
        const struct ol_shard_meta *e = &VERS(r, s)[0];
        if (!top)
            top = e;
        else if (ol_version_id_cmp(&e->vid, &top->vid) != 0)
            return false;
    }
    const struct ol_shard_meta *ref;
    uint32_t have, complete;
    if (vote(es, r, &top->vid, &ref, &have, &complete) < es->k || !ref || have != ask)
        return false;
    for (unsigned j = 0; j < es->k; j++)
        if (!(have & (1u << slot_of(es, ref->rotation, j))))
            return false;
    r->found = true;
    r->win = *ref;
    r->have = have;
    r->complete = complete;
    r->unasked = all_slots(es) & ~ask;
    return true;
}

/* Asks the drives resolve_first left out, and counts those that hold the
 * resolved version: a read that lost a shard needs parity from them.  The
 * version stays the one resolved (it was readable; newer ones are not this
 * read's business). */
static int res_complete(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        struct eset_res *r)
{
    uint32_t ask = r->unasked;
    if (!ask)
        return 0;
    struct ol_shard_meta win = r->win;
    int rc = ask_versions(es, bucket, key, klen, NULL, r, ask);
    r->found = true; /* ask_versions clears it; the version is still win */
    r->unasked = 0;
    if (rc < 0)
        return rc;
    uint32_t have, complete;
    votes(es, r, &win, &have, &complete);
    r->have |= have;
    r->complete |= complete;
    return 0;
}

/* Asks every drive for its versions of the key and picks the newest readable
 * version (or `want`).  0 with r->found, -OL_ENOKEY, -OL_EQUORUM. */
static int resolve(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                   const struct ol_version_id *want, struct eset_res *r)
{
    uint32_t asked = 0;
    if (!want && r->first_step && resolve_first(es, bucket, key, klen, r, &asked))
        return (r->win.flags & OL_SHARD_DELETE_MARKER) ? -OL_ENOKEY : 0;
    int rc = ask_versions(es, bucket, key, klen, want, r, all_slots(es) & ~asked);
    if (rc < 0)
        return rc;
    struct ol_version_id *vids = malloc(sizeof(*vids) * es->n * r->cap);
    if (!vids)
        return -ENOMEM;
    unsigned nvids = all_vids(es, r, vids);
    bool any_complete = false;
    unsigned best_votes = 0;
    for (unsigned i = 0; i < nvids; i++) {
        if (want && ol_version_id_cmp(&vids[i], want) != 0)
            continue;
        const struct ol_shard_meta *top_ref;
        uint32_t top_have, top_complete;
        unsigned top = vote(es, r, &vids[i], &top_ref, &top_have, &top_complete);
        any_complete |= top_complete != 0;
        if (top > best_votes)
            best_votes = top;
        if (top >= es->k) {
            r->found = true;
            r->win = *top_ref;
            r->have = top_have;
            r->complete = top_complete;
            break;
        }
    }
    free(vids);
    if (r->found)
        return (r->win.flags & OL_SHARD_DELETE_MARKER) ? -OL_ENOKEY : 0;
    /* Nothing readable.  "Not there" only when no version seen could have
     * been acknowledged and no drive shows a version that was ever completed
     * (an acknowledged object must not read as absent because too many of its
     * drives are unreachable or lost).  A PUT is acknowledged only once k+1
     * shards are durable (k when m = 0), so a version whose visible shards
     * plus the silent drives stay below that was never acknowledged: it is
     * the leftover of a failed or interrupted PUT (kill -9), and the key reads
     * as absent rather than unavailable. */
    unsigned silent = es->n - popcount(r->answered);
    unsigned ack_quorum = es->k + (es->m > 0 ? 1 : 0);
    if (silent >= es->k || best_votes + silent >= ack_quorum || any_complete)
        return -OL_EQUORUM;
    return -OL_ENOKEY;
}

static void res_free(struct eset_res *r)
{
    if (!r)
        return;
    for (unsigned s = 0; s < OL_EC_MAX_UNITS; s++)
        blob_free(r->blob_buf[s], r->blob_bytes[s]);
    free(r->vers);
    free(r);
}

/* A resolution asking each drive of es for up to cap versions. */
static struct eset_res *res_alloc_cap(const struct ol_eset *es, unsigned cap)
{
    struct eset_res *r = calloc(1, sizeof(struct eset_res));
    if (!r)
        return NULL;
    r->cap = cap;
    r->vers = malloc(sizeof(struct ol_shard_meta) * es->n * cap);
    if (!r->vers) {
        free(r);
        return NULL;
    }
    return r;
}

static struct eset_res *res_alloc(const struct ol_eset *es)
{
    return res_alloc_cap(es, ESET_MAX_VERSIONS);
}

/* Whether a resolution pinned to `want` that did not find it may have missed
 * it because a drive had more versions than asked (a versioned key). */
static bool res_truncated(const struct ol_eset *es, const struct eset_res *r)
{
    for (unsigned s = 0; s < es->n; s++)
        if (r->nv[s] >= (int)r->cap)
            return true;
    return false;
}

/* resolve, asking again for every version when a pinned version was not
 * among the newest ones.  *rp may be replaced. */
static int resolve_pinned(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                          const struct ol_version_id *want, struct eset_res **rp)
{
    int rc = resolve(es, bucket, key, klen, want, *rp);
    if (!want || (*rp)->found || !res_truncated(es, *rp) || (*rp)->cap >= ESET_ALL_VERSIONS)
        return rc;
    struct eset_res *big = res_alloc_cap(es, ESET_ALL_VERSIONS);
    if (!big)
        return -ENOMEM;
    big->want_blob = (*rp)->want_blob;
    big->want_shard = (*rp)->want_shard;
    big->first_step = (*rp)->first_step;
    res_free(*rp);
    *rp = big;
    return resolve(es, bucket, key, klen, want, big);
}

/* ---- PUT ---- */

/* Per-shard writer fibers.  The store's writer hands a full buffer to a
 * helper fiber and waits for it in its next call through a completion bound
 * to the calling fiber, so a writer must be used from one fiber for its whole
 * life.  Called from a fiber with `parallel` on, a PUT therefore gives each
 * shard its own fiber: it begins the shard, then runs every command the
 * request fiber posts to it (write, commit, abort) until the writer is
 * consumed.  The queue is one command deep: the request fiber posts a step to
 * every live shard and waits for all acknowledgements before reusing its
 * stripe buffers, so each step costs the slowest drive's latency instead of
 * the sum.  Workers never outlive the PUT: every command is waited for, and
 * the last one (commit or abort) ends the fiber.  A shard whose fiber cannot
 * be spawned (pool exhausted) is run inline by the request fiber instead. */
enum put_cmd { PW_IDLE, PW_WRITE, PW_COMMIT, PW_ABORT };

struct ol_eset_put;

struct put_worker {
    struct ol_eset_put *p;
    unsigned shard;
    struct ol_fiber *fiber; /* while the worker waits for commands */
    bool inline_w;          /* no fiber: the request fiber calls the drive */
    uint8_t cmd;            /* enum put_cmd; PW_IDLE when none is pending */
    const void *src;        /* PW_WRITE */
    size_t len;
    struct ol_shard_meta sm; /* PW_COMMIT */
    int rc;                  /* the last command's answer */
};

struct ol_eset_put {
    struct ol_eset *es;
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    char key[OL_DRIVE_MAX_KEY];
    uint32_t klen;
    unsigned rotation;
    uint8_t flags; /* OL_SHARD_DELETE_MARKER for a DELETE */
    /* Taken at commit, after the last stripe is written: of two concurrent
     * PUTs of a key the one that completes last gets the larger id, and
     * wins (S3: the last completed write wins). */
    struct ol_version_id vid;
    const void *meta; /* the version's blob during the commit (borrowed) */
    size_t meta_len;
    void *w[OL_EC_MAX_UNITS]; /* by shard index; NULL: dropped */
    unsigned live;
    uint8_t *stripe; /* k units of stripe_cap / k bytes; NULL until bytes come */
    uint8_t *parity; /* m units of parity_cap / m bytes; NULL until a flush */
    size_t stripe_cap, parity_cap;
    uint64_t expect; /* the announced size, or UINT64_MAX */
    uint64_t reserved; /* body memory budget held (ol_eset_put_hold) */
    size_t fill;
    uint64_t size;
    unsigned full; /* shards dropped because their drive is full */
    int sticky;    /* the first error; the PUT stays failed */
    bool workers;  /* shards run in put_worker fibers */
    unsigned pending;          /* commands posted and not yet acknowledged */
    struct ol_fiber *waiter;   /* the request fiber, while it waits */
    struct put_worker pw[OL_EC_MAX_UNITS];
};

static const struct ol_drive *put_drive(const struct ol_eset_put *p, unsigned shard)
{
    return &p->es->drive[slot_of(p->es, p->rotation, shard)];
}

/* Runs one command on a writer; returns the drive's answer.  Commit and
 * abort consume the writer. */
static int put_exec(struct ol_eset_put *p, struct put_worker *wk, void *w)
{
    const struct ol_drive *d = put_drive(p, wk->shard);
    switch (wk->cmd) {
    case PW_WRITE:
        return d->ops->shard_write(w, wk->src, wk->len);
    case PW_COMMIT:
        return d->ops->shard_commit(w, &wk->sm, p->meta, p->meta_len);
    case PW_ABORT:
        d->ops->shard_abort(w);
        return 0;
    default:
        OL_ASSERT(0);
        return -EINVAL;
    }
}

static void put_ack(struct ol_eset_put *p)
{
    OL_ASSERT(p->pending > 0);
    if (--p->pending == 0 && p->waiter)
        ol_fiber_wake(p->waiter);
}

static void put_worker_fiber(void *arg)
{
    struct put_worker *wk = arg;
    struct ol_eset_put *p = wk->p;
    const struct ol_drive *d = put_drive(p, wk->shard);
    void *w = NULL;
    int rc = d->ops->shard_begin(d->d, p->bucket, p->key, p->klen, &w);
    wk->rc = rc;
    p->w[wk->shard] = rc == 0 ? w : NULL;
    bool live = rc == 0;
    if (live)
        wk->fiber = ol_fiber_current();
    put_ack(p);
    /* Each round runs one command; the writer is consumed by the last. */
    for (unsigned guard = 0; live && guard < (1u << 30); guard++) {
        for (unsigned g = 0; wk->cmd == PW_IDLE && g < (1u << 30); g++)
            ol_fiber_park();
        OL_ASSERT(wk->cmd != PW_IDLE);
        bool last = wk->cmd != PW_WRITE;
        wk->rc = put_exec(p, wk, w);
        wk->cmd = PW_IDLE;
        if (last) {
            live = false;
            wk->fiber = NULL;
        }
        /* The request fiber runs only after this fiber returns or parks
         * (a wake just makes it ready), so nothing here touches p late. */
        put_ack(p);
    }
}

/* Posts a command to shard i (whose writer is live); inline shards run it now. */
static void put_post(struct ol_eset_put *p, unsigned i, uint8_t cmd)
{
    struct put_worker *wk = &p->pw[i];
    OL_ASSERT(p->w[i] != NULL && wk->cmd == PW_IDLE);
    wk->cmd = cmd;
    if (!p->workers || wk->inline_w) {
        wk->rc = put_exec(p, wk, p->w[i]);
        wk->cmd = PW_IDLE;
        return;
    }
    OL_ASSERT(wk->fiber != NULL);
    p->pending++;
    ol_fiber_wake(wk->fiber);
}

/* Waits until every posted command has been acknowledged. */
static void put_wait(struct ol_eset_put *p)
{
    if (p->pending == 0)
        return;
    p->waiter = ol_fiber_current();
    for (unsigned guard = 0; p->pending > 0 && guard < (1u << 30); guard++)
        ol_fiber_park();
    OL_ASSERT(p->pending == 0);
    p->waiter = NULL;
}

/* Drops a shard from the PUT after its drive failed with err.  When too few
 * are left, the PUT fails: -ENOSPC when full drives are why, else
 * -OL_EQUORUM. */
static void put_drop(struct ol_eset_put *p, unsigned shard, int err)
{
    struct ol_eset *es = p->es;
    if (!p->w[shard])
        return;
    put_post(p, shard, PW_ABORT);
    put_wait(p);
    p->w[shard] = NULL;
    p->live--;
    p->full += err == -ENOSPC;
    if (p->live < es->quorum && p->sticky == 0)
        p->sticky = p->full > 0 ? -ENOSPC : -OL_EQUORUM;
}

static void put_free(struct ol_eset_put *p)
{
    for (unsigned i = 0; i < p->es->n; i++)
        if (p->w[i])
            put_post(p, i, PW_ABORT);
    put_wait(p);
    ol_buf_free(p->stripe, p->stripe_cap);
    ol_buf_free(p->parity, p->parity_cap);
    /* After the writers (aborted or committed above) freed their buffers. */
    ol_bodymem_release(p->reserved);
    free(p);
}

/* Begins every shard: in its own fiber when possible, else inline. */
static void put_begin_shards(struct ol_eset_put *p)
{
    struct ol_eset *es = p->es;
    struct ol_loop *loop = ol_loop_current();
    p->workers = ol_fiber_current() != NULL && loop != NULL && es->parallel;
    for (unsigned i = 0; i < es->n; i++) {
        struct put_worker *wk = &p->pw[i];
        wk->p = p;
        wk->shard = i;
        wk->inline_w = !p->workers;
        if (p->workers) {
            p->pending++;
            if (ol_fiber_spawn(loop, put_worker_fiber, wk) == 0)
                continue;
            p->pending--;
            wk->inline_w = true;
        }
        const struct ol_drive *d = put_drive(p, i);
        void *w = NULL;
        wk->rc = d->ops->shard_begin(d->d, p->bucket, p->key, p->klen, &w);
        p->w[i] = wk->rc == 0 ? w : NULL;
    }
    put_wait(p);
}

static int put_begin(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                     uint8_t flags, struct ol_eset_put **out)
{
    if (!valid_name(bucket, klen))
        return -EINVAL;
    int rc = 0;
    struct ol_eset_put *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->es = es;
    strcpy(p->bucket, bucket);
    memcpy(p->key, key, klen);
    p->klen = (uint32_t)klen;
    p->flags = flags;
    p->rotation = rotation_of(es, bucket, key, klen);
    p->expect = UINT64_MAX;
    /* The stripe and parity buffers come with the first bytes (put_write),
     * sized to the object: a PUT whose body has not arrived holds none. */
    put_begin_shards(p);
    unsigned again = 0, full = 0;
    for (unsigned i = 0; i < es->n; i++) {
        int r = p->pw[i].rc;
        p->live += r == 0;
        again += r == -EAGAIN;
        full += r == -ENOSPC;
    }
    p->full = full;
    if (p->live < es->quorum) {
        rc = again > 0 ? -EAGAIN : full > 0 ? -ENOSPC : -OL_EQUORUM;
        goto out;
    }
    *out = p;
    p = NULL;
out:
    if (p)
        put_free(p);
    return rc;
}

int ol_eset_put_begin(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                      struct ol_eset_put **out)
{
    return put_begin(es, bucket, key, klen, 0, out);
}

/* The unit length of the stripe buffer of a PUT of size bytes: a full unit,
 * or the last unit of a smaller object (stripe.h). */
static size_t unit_for(const struct ol_eset *es, uint64_t size)
{
    if (size >= (uint64_t)es->k * es->unit)
        return es->unit;
    size_t u = (size_t)((size + es->k - 1) / es->k);
    return u ? u : 1;
}

void ol_eset_put_expect(struct ol_eset_put *p, uint64_t size)
{
    if (!p->stripe)
        p->expect = size;
}

uint64_t ol_eset_put_buffer_bytes(const struct ol_eset *es, int64_t size,
                                  uint64_t writer_buf_bytes, unsigned writer_bufs)
{
    size_t u = size < 0 ? es->unit : unit_for(es, (uint64_t)size);
    uint64_t page = 4096;
    uint64_t sb = ((uint64_t)es->k * u + page - 1) / page * page;
    uint64_t pb = ((uint64_t)(es->m ? es->m : 1) * u + page - 1) / page * page;
    /* Every shard has the same length: about size / k. */
    uint64_t shard = size < 0 ? UINT64_MAX : ((uint64_t)size + es->k - 1) / es->k;
    uint64_t wb = shard <= writer_buf_bytes ? (shard + page - 1) / page * page
                                            : writer_buf_bytes * writer_bufs;
    return sb + pb + (uint64_t)es->n * wb;
}

void ol_eset_put_hold(struct ol_eset_put *p, uint64_t reserved_bytes)
{
    p->reserved += reserved_bytes;
}

/* Replaces *buf (cap *cap) with a pool buffer of cap bytes (core/buf.h: big
 * buffers are mapped, reused while the pool keeps them, and given back to
 * the system beyond that), keeping its first `keep` bytes. */
static int regrow(uint8_t **buf, size_t *cap, size_t new_cap, size_t keep)
{
    uint8_t *nb = ol_buf_alloc(new_cap);
    if (!nb)
        return -ENOMEM;
    if (*buf && keep)
        memcpy(nb, *buf, keep);
    ol_buf_free(*buf, *cap);
    *buf = nb;
    *cap = new_cap;
    return 0;
}

/* Makes the stripe buffer hold at least `need` bytes (a multiple of k units
 * of at most a full unit), keeping what it holds. */
static int stripe_grow(struct ol_eset_put *p, size_t need)
{
    struct ol_eset *es = p->es;
    if (p->stripe && p->stripe_cap >= need)
        return 0;
    size_t u = need >= (size_t)es->k * es->unit ? es->unit : (need + es->k - 1) / es->k;
    return regrow(&p->stripe, &p->stripe_cap, (size_t)es->k * u, p->fill);
}

static int parity_grow(struct ol_eset_put *p, size_t u)
{
    struct ol_eset *es = p->es;
    size_t cap = (size_t)(es->m ? es->m : 1) * u;
    if (p->parity && p->parity_cap >= cap)
        return 0;
    return regrow(&p->parity, &p->parity_cap, cap, 0);
}

/* Encodes the buffered stripe with units of u bytes and writes unit i to
 * shard i's drive, all shards at once.  The bytes past p->fill up to k * u
 * are zeros (the shortened last stripe's padding, stripe.h). */
static void put_flush(struct ol_eset_put *p, size_t u)
{
    struct ol_eset *es = p->es;
    const uint8_t *data[OL_EC_MAX_K];
    uint8_t *par[OL_EC_MAX_M];
    OL_ASSERT(p->fill <= (size_t)es->k * u);
    if (stripe_grow(p, (size_t)es->k * u) < 0 || parity_grow(p, u) < 0) {
        if (p->sticky == 0)
            p->sticky = -ENOMEM;
        return;
    }
    memset(p->stripe + p->fill, 0, (size_t)es->k * u - p->fill);
    for (unsigned j = 0; j < es->k; j++)
        data[j] = p->stripe + (size_t)j * u;
    for (unsigned j = 0; j < es->m; j++)
        par[j] = p->parity + (size_t)j * u;
    int rc = ol_ec_encode(es->codec, u, data, par);
    OL_ASSERT(rc == 0);
    uint32_t posted = 0;
    for (unsigned i = 0; i < es->n; i++) {
        if (!p->w[i])
            continue;
        p->pw[i].src = i < es->k ? data[i] : par[i - es->k];
        p->pw[i].len = u;
        put_post(p, i, PW_WRITE);
        posted |= 1u << i;
    }
    put_wait(p);
    for (unsigned i = 0; i < es->n; i++)
        if ((posted & (1u << i)) && p->pw[i].rc < 0)
            put_drop(p, i, p->pw[i].rc);
    p->fill = 0;
}

/* The stripe buffer bytes a PUT of size bytes needs: k units of unit_for. */
static uint64_t es_k_units(const struct ol_eset *es, uint64_t size)
{
    return (uint64_t)es->k * unit_for(es, size);
}

int ol_eset_put_write(struct ol_eset_put *p, const void *buf, size_t len)
{
    const uint8_t *src = buf;
    size_t stripe_bytes = (size_t)p->es->k * p->es->unit;
    if (p->flags & OL_SHARD_DELETE_MARKER)
        return -EINVAL;
    if (len > 0 && !p->stripe && p->sticky == 0) {
        uint64_t want = p->expect != UINT64_MAX && p->expect > p->size ? p->expect : len;
        if (stripe_grow(p, (size_t)es_k_units(p->es, want)) < 0)
            p->sticky = -ENOMEM;
    }
    while (len > 0 && p->sticky == 0) {
        size_t n = stripe_bytes - p->fill;
        if (n > len)
            n = len;
        if (p->fill + n > p->stripe_cap) {
            /* More bytes than announced: a full stripe from now on. */
            if (stripe_grow(p, stripe_bytes) < 0) {
                p->sticky = -ENOMEM;
                break;
            }
        }
        memcpy(p->stripe + p->fill, src, n);
        p->fill += n;
        p->size += n;
        src += n;
        len -= n;
        /* A full stripe encodes the same whether or not it is the last one
         * (last_unit = unit then), so it can go now. */
        if (p->fill == stripe_bytes)
            put_flush(p, p->es->unit);
    }
    return p->sticky;
}

int ol_eset_put_room(struct ol_eset_put *p, uint8_t **ptr, size_t *len)
{
    size_t stripe_bytes = (size_t)p->es->k * p->es->unit;
    if (p->flags & OL_SHARD_DELETE_MARKER)
        return -EINVAL;
    if (p->sticky)
        return p->sticky;
    if (!p->stripe) {
        uint64_t want = p->expect != UINT64_MAX && p->expect > p->size ? p->expect - p->size : 1;
        if (stripe_grow(p, (size_t)es_k_units(p->es, want)) < 0)
            return p->sticky = -ENOMEM;
    }
    if (p->fill == p->stripe_cap && p->stripe_cap < stripe_bytes &&
        stripe_grow(p, stripe_bytes) < 0)
        return p->sticky = -ENOMEM;
    OL_ASSERT(p->fill < p->stripe_cap);
    *ptr = p->stripe + p->fill;
    *len = p->stripe_cap - p->fill;
    return 0;
}

int ol_eset_put_advance(struct ol_eset_put *p, size_t n)
{
    if (p->sticky)
        return p->sticky;
    OL_ASSERT(p->stripe && n <= p->stripe_cap - p->fill);
    p->fill += n;
    p->size += n;
    if (p->fill == (size_t)p->es->k * p->es->unit)
        put_flush(p, p->es->unit);
    return p->sticky;
}

/* Deletes the version from the drives in `slots` (best effort). */
static void rollback(struct ol_eset_put *p, uint32_t slots)
{
    struct ol_eset *es = p->es;
    struct fan *f = fan_new(es, p->bucket, p->key, p->klen, &p->vid);
    if (!f)
        return;
    for (unsigned s = 0; s < es->n; s++)
        if (slots & (1u << s))
            fan_add(f, FAN_DELETE, s, s);
    fan_run(f, 0);
    fan_unref(f);
}

/* Phase 2 of a PUT, off the request's path (issue 11).  The PUT is durable
 * once its phase-1 commits are (k+1 drives); the mark only lets the drives
 * free older versions, and nothing that decides a read needs it (a version
 * with k consistent shards is readable, marked or not; a version committed
 * on k+1 drives is never taken for the leftover of a cut-off PUT by heal).
 * So in a fiber the marks run in a fiber of their own and the PUT answers
 * without waiting for their index commits: each mark then joins the drives'
 * next group commit with other requests' operations instead of adding a
 * round of commits to every PUT's latency.  A crash before they are durable
 * loses only the marks (a later read, heal or overwrite of the key marks or
 * frees those versions).  The loop keeps running until such a fiber ends
 * (it counts as a live fiber at shutdown).  Bounded: beyond
 * ESET_MARKS_DETACHED at once in the process, a PUT waits for its own
 * marks (backpressure when the drives' commits fall behind). */
enum { ESET_MARKS_DETACHED = 2048 };

static _Atomic unsigned eset_marks_pending;

static void mark_fiber(void *arg)
{
    struct fan *f = arg;
    fan_run(f, 0);
    fan_unref(f);
    atomic_fetch_sub(&eset_marks_pending, 1);
}

static void put_mark(struct ol_eset *es, struct ol_eset_put *p, uint32_t committed)
{
    struct fan *f = fan_new(es, p->bucket, p->key, p->klen, &p->vid);
    if (!f)
        return;
    for (unsigned s = 0; s < es->n; s++)
        if (committed & (1u << s))
            fan_add(f, FAN_MARK, s, s);
    struct ol_loop *loop = ol_loop_current();
    if (ol_fiber_current() && loop && es->parallel &&
        atomic_fetch_add(&eset_marks_pending, 1) < ESET_MARKS_DETACHED) {
        if (ol_fiber_spawn(loop, mark_fiber, f) == 0)
            return;
        atomic_fetch_sub(&eset_marks_pending, 1);
    } else if (ol_fiber_current() && loop && es->parallel) {
        atomic_fetch_sub(&eset_marks_pending, 1);
    }
    fan_run(f, 0);
    fan_unref(f);
}

int ol_eset_put_commit2(struct ol_eset_put *p, const struct ol_eset_commit *cm,
                        struct ol_eset_obj *out)
{
    struct ol_eset *es = p->es;
    int rc = p->sticky;
    uint32_t committed = 0, durable_slots = 0;
    unsigned durable = 0;
    if (rc < 0)
        goto out;
    if (cm->meta_len > OL_ESET_META_MAX || (cm->meta_len && !cm->meta) ||
        (cm->flags & ~(uint32_t)(OL_SHARD_KEEP_OLDER | OL_SHARD_NULL))) {
        rc = -EINVAL;
        goto out;
    }
    if (p->fill > 0)
        put_flush(p, (p->fill + es->k - 1) / es->k);
    if (p->sticky < 0) {
        rc = p->sticky;
        goto out;
    }
    /* The version id now, right before the shards are committed: vid order
     * is commit order. */
    ol_hlc_version_id(es->hlc, &p->vid);
    p->meta = cm->meta_len ? cm->meta : NULL;
    p->meta_len = cm->meta_len;
    struct ol_shard_meta sm;
    memset(&sm, 0, sizeof(sm));
    sm.vid = p->vid;
    sm.k = (uint8_t)es->k;
    sm.m = (uint8_t)es->m;
    sm.rotation = (uint8_t)p->rotation;
    sm.flags = (uint8_t)(p->flags | cm->flags);
    sm.hint = OL_SHARD_HINT_FRESH; /* minted just above */
    sm.unit_bytes = es->unit;
    sm.size = p->size;
    sm.mtime_ns = cm->mtime_ns;
    if (cm->etag)
        strncpy(sm.etag, cm->etag, sizeof(sm.etag) - 1);
    sm.meta_stamp = ol_version_id_stamp(&p->vid);
    sm.meta_len = (uint32_t)p->meta_len;
    sm.meta_crc = p->meta_len ? ol_crc32c(p->meta, p->meta_len) : 0;
    uint32_t posted = 0;
    for (unsigned i = 0; i < es->n; i++) {
        if (!p->w[i])
            continue;
        p->pw[i].sm = sm;
        p->pw[i].sm.shard = (uint8_t)i;
        put_post(p, i, PW_COMMIT);
        posted |= 1u << i;
    }
    put_wait(p);
    unsigned full = p->full;
    for (unsigned i = 0; i < es->n; i++) {
        if (!(posted & (1u << i)))
            continue;
        p->w[i] = NULL; /* the commit consumed it */
        int r = p->pw[i].rc;
        if (r == 0)
            committed |= 1u << slot_of(es, p->rotation, i);
        if (r == 0 || r == OL_DRIVE_SUPERSEDED)
            durable_slots |= 1u << slot_of(es, p->rotation, i);
        durable += r == 0 || r == OL_DRIVE_SUPERSEDED;
        full += r == -ENOSPC;
    }
    if (durable < es->quorum) {
        rollback(p, committed);
        rc = full > 0 ? -ENOSPC : -OL_EQUORUM;
        goto out;
    }
    note_missed(es, p->bucket, p->key, p->klen, durable_slots);
    /* Phase 2.  A drive that misses it keeps the older versions until a heal
     * or a later read marks it; reading does not depend on the flag. */
    put_mark(es, p, committed);
    sm.shard = 0;
    obj_from_meta(&sm, durable, out);
out:
    atomic_fetch_add(&es->st.puts, 1);
    if (rc < 0)
        atomic_fetch_add(&es->st.puts_failed, 1);
    if (rc == -ENOSPC)
        atomic_fetch_add(&es->st.puts_full, 1);
    put_free(p);
    return rc;
}

int ol_eset_put_commit(struct ol_eset_put *p, const char *etag, int64_t mtime_ns,
                       struct ol_eset_obj *out)
{
    struct ol_eset_commit cm = {.etag = etag, .mtime_ns = mtime_ns};
    return ol_eset_put_commit2(p, &cm, out);
}

void ol_eset_put_abort(struct ol_eset_put *p)
{
    /* Nothing was committed: dropping the writers drops every byte sent. */
    put_free(p);
}

int ol_eset_put(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                const void *buf, size_t len, const char *etag, struct ol_eset_obj *out)
{
    struct ol_eset_put *p;
    int rc = ol_eset_put_begin(es, bucket, key, klen, &p);
    if (rc < 0)
        return rc;
    rc = ol_eset_put_write(p, buf, len);
    if (rc < 0) {
        ol_eset_put_abort(p);
        atomic_fetch_add(&es->st.puts, 1);
        atomic_fetch_add(&es->st.puts_failed, 1);
        return rc;
    }
    return ol_eset_put_commit(p, etag, 0, out);
}

int ol_eset_delete(struct ol_eset *es, const char *bucket, const char *key, size_t klen)
{
    struct ol_eset_obj o;
    int rc = ol_eset_stat(es, bucket, key, klen, NULL, &o);
    if (rc == -OL_ENOKEY)
        return 0;
    struct ol_eset_put *p;
    rc = put_begin(es, bucket, key, klen, OL_SHARD_DELETE_MARKER, &p);
    if (rc < 0)
        return rc;
    return ol_eset_put_commit(p, "", 0, NULL);
}

int ol_eset_delete_marker(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                          uint32_t flags, int64_t mtime_ns, struct ol_eset_obj *out)
{
    struct ol_eset_put *p;
    int rc = put_begin(es, bucket, key, klen, OL_SHARD_DELETE_MARKER, &p);
    if (rc < 0)
        return rc;
    struct ol_eset_commit cm = {.etag = "", .mtime_ns = mtime_ns, .flags = flags};
    return ol_eset_put_commit2(p, &cm, out);
}

/* ---- metadata blobs ---- */

/* Whether a blob answer is an intact copy of the blob of vid. */
static bool blob_ok(const struct ol_drive_blob *bl, const struct ol_version_id *vid)
{
    return bl->got && ol_version_id_cmp(&bl->sm.vid, vid) == 0 && bl->len == bl->sm.meta_len &&
           bl->len <= OL_ESET_META_MAX && ol_crc32c(bl->buf, bl->len) == bl->sm.meta_crc;
}

/* The winner's blob: of the intact copies its holders give, the winning one
 * (ol_shard_meta_newer).  The blobs the versions calls brought
 * (r->want_blob) are used when one of them is the copy the holders' entries
 * say wins; otherwise the holders are asked (one parallel step).  With
 * `all`, every holder's copy is fetched and checked.  buf has room for
 * OL_ESET_META_MAX bytes; *bsm gets the chosen copy's meta_len, meta_crc and
 * meta_stamp (all 0: no blob); *good (may be NULL) the holder slots whose
 * copy is the chosen one and intact.  0, -OL_EQUORUM (no intact copy
 * answered), -ENOMEM. */
static int winner_blob(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                       const struct eset_res *r, bool all, uint8_t *buf,
                       struct ol_shard_meta *bsm, uint32_t *good)
{
    const struct ol_version_id *vid = &r->win.vid;
    const struct ol_shard_meta *claim = NULL;
    uint32_t ok = 0;
    memset(bsm, 0, sizeof(*bsm));
    for (unsigned s = 0; s < es->n; s++) {
        const struct ol_shard_meta *e = (r->have & (1u << s)) ? entry_of(r, s, vid) : NULL;
        if (e && (!claim || ol_shard_meta_newer(e->meta_stamp, e->meta_crc, claim->meta_stamp,
                                                claim->meta_crc)))
            claim = e;
    }
    if (!claim)
        return -OL_EQUORUM;
    if (claim->meta_len == 0) {
        /* No blob (a version from before blobs, or one set empty). */
        bsm->meta_stamp = claim->meta_stamp;
        for (unsigned s = 0; good && s < es->n; s++) {
            const struct ol_shard_meta *e = (r->have & (1u << s)) ? entry_of(r, s, vid) : NULL;
            if (e && e->meta_len == 0 && e->meta_stamp == claim->meta_stamp)
                ok |= 1u << s;
        }
        if (good)
            *good = ok;
        return 0;
    }
    /* Candidates: the answers in r, then (unless one of them is the claimed
     * copy, or with `all`) those of the holders asked now. */
    const struct ol_drive_blob *cand[OL_EC_MAX_UNITS];
    memset(cand, 0, sizeof(cand));
    bool claimed = false;
    for (unsigned s = 0; s < es->n; s++) {
        const struct ol_drive_blob *bl = &r->blob[s];
        if (!(r->have & (1u << s)) || !r->blob_buf[s] || !blob_ok(bl, vid))
            continue;
        cand[s] = bl;
        claimed |= bl->sm.meta_stamp == claim->meta_stamp && bl->sm.meta_crc == claim->meta_crc;
    }
    struct fan *f = NULL;
    if (!claimed || all) {
        f = fan_new(es, bucket, key, klen, vid);
        if (!f)
            return -ENOMEM;
        f->vcap = 1;
        f->blob_cap = OL_ESET_META_MAX;
        for (unsigned s = 0; s < es->n; s++)
            if ((r->have & (1u << s)) && !cand[s])
                fan_add(f, FAN_VERSIONS, s, s);
        fan_run(f, 0);
        for (unsigned i = 0; i < f->n; i++)
            if (f->c[i].rc >= 0 && blob_ok(&f->c[i].blob, vid))
                cand[f->c[i].slot] = &f->c[i].blob;
    }
    const struct ol_drive_blob *best = NULL;
    for (unsigned s = 0; s < es->n; s++)
        if (cand[s] && (!best || ol_shard_meta_newer(cand[s]->sm.meta_stamp, cand[s]->sm.meta_crc,
                                                     best->sm.meta_stamp, best->sm.meta_crc)))
            best = cand[s];
    int rc = -OL_EQUORUM;
    if (best) {
        memcpy(buf, best->buf, best->len);
        bsm->meta_len = (uint32_t)best->len;
        bsm->meta_crc = best->sm.meta_crc;
        bsm->meta_stamp = best->sm.meta_stamp;
        for (unsigned s = 0; s < es->n; s++)
            if (cand[s] && cand[s]->sm.meta_stamp == bsm->meta_stamp &&
                cand[s]->sm.meta_crc == bsm->meta_crc)
                ok |= 1u << s;
        rc = 0;
    }
    if (f)
        fan_unref(f);
    if (good)
        *good = ok;
    return rc;
}

/* ol_eset_stat_meta's work, keeping the resolution in *rp (the caller frees
 * it with res_free; NULL on failure): a GET's reader keeps it. */
static int stat_meta_res(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, bool want_shard,
                         struct ol_eset_obj *out, void *buf, size_t cap, size_t *len,
                         struct eset_res **rp)
{
    *rp = NULL;
    if (!valid_name(bucket, klen))
        return -EINVAL;
    struct eset_res *r = res_alloc(es);
    uint8_t *mb = blob_alloc(OL_ESET_META_MAX);
    int rc = -ENOMEM;
    if (!r || !mb)
        goto out;
    r->want_blob = true;
    r->want_shard = want_shard;
    r->first_step = vid == NULL;
    rc = resolve_pinned(es, bucket, key, klen, vid, &r);
    if (rc == -OL_ENOKEY && r->found)
        obj_from_meta(&r->win, popcount(r->have), out); /* a delete marker */
    if (rc < 0)
        goto out;
    struct ol_shard_meta bsm;
    rc = winner_blob(es, bucket, key, klen, r, false, mb, &bsm, NULL);
    if (rc < 0)
        goto out;
    obj_from_meta(&r->win, popcount(r->have), out);
    if (out)
        out->meta_len = bsm.meta_len;
    if (len)
        *len = bsm.meta_len;
    if (bsm.meta_len > cap) {
        rc = -ENOBUFS;
        goto out;
    }
    if (bsm.meta_len)
        memcpy(buf, mb, bsm.meta_len);
    *rp = r;
    r = NULL;
out:
    blob_free(mb, OL_ESET_META_MAX);
    res_free(r);
    return rc;
}

int ol_eset_stat_meta(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                      const struct ol_version_id *vid, struct ol_eset_obj *out, void *buf,
                      size_t cap, size_t *len)
{
    struct eset_res *r;
    int rc = stat_meta_res(es, bucket, key, klen, vid, false, out, buf, cap, len, &r);
    res_free(r);
    return rc;
}

int ol_eset_set_meta(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                     const struct ol_version_id *vid, const void *meta, size_t len)
{
    if (!valid_name(bucket, klen) || len > OL_ESET_META_MAX || (len && !meta))
        return -EINVAL;
    struct eset_res *r = res_alloc(es);
    if (!r)
        return -ENOMEM;
    int rc = resolve_pinned(es, bucket, key, klen, vid, &r);
    if (rc < 0)
        goto out;
    struct fan *f = fan_new(es, bucket, key, klen, &r->win.vid);
    if (!f) {
        rc = -ENOMEM;
        goto out;
    }
    f->meta = len ? meta : NULL;
    f->meta_len = len;
    /* Later than the version's own stamp and than any earlier set_meta of
     * this node: the newest wins on every drive and in reads. */
    f->meta_stamp = ol_hlc_now(es->hlc);
    for (unsigned s = 0; s < es->n; s++)
        if (r->have & (1u << s))
            fan_add(f, FAN_SETMETA, s, s);
    fan_run(f, 0);
    unsigned done = 0, full = 0;
    uint32_t took = 0;
    for (unsigned i = 0; i < f->n; i++) {
        done += f->c[i].rc == 0;
        full += f->c[i].rc == -ENOSPC;
        if (f->c[i].rc == 0)
            took |= 1u << f->c[i].slot;
    }
    fan_unref(f);
    rc = done >= es->quorum ? 0 : full > 0 ? -ENOSPC : -OL_EQUORUM;
    if (rc == 0)
        note_missed(es, bucket, key, klen, took);
out:
    res_free(r);
    return rc;
}

/* ---- versions ---- */

int ol_eset_versions(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                     struct ol_eset_obj *out, unsigned cap)
{
    if (!valid_name(bucket, klen))
        return -EINVAL;
    unsigned vcap = cap + ESET_MAX_VERSIONS;
    struct eset_res *r = res_alloc_cap(es, vcap < ESET_ALL_VERSIONS ? vcap : ESET_ALL_VERSIONS);
    struct ol_version_id *vids = NULL;
    int rc = -ENOMEM;
    if (!r)
        goto out;
    rc = ask_versions(es, bucket, key, klen, NULL, r, all_slots(es));
    if (rc < 0)
        goto out;
    if (popcount(r->answered) < es->k) {
        rc = -OL_EQUORUM;
        goto out;
    }
    vids = malloc(sizeof(*vids) * es->n * r->cap);
    if (!vids) {
        rc = -ENOMEM;
        goto out;
    }
    unsigned nvids = all_vids(es, r, vids), n = 0;
    /* Newest first.  A version that a newer readable one replaces (drive.h,
     * ol_shard_frees) is gone for readers even before phase 2 has freed it
     * on the drives (the marks run after the PUT answers). */
    /* ol_shard_frees as two facts about the newer listed versions: one that
     * keeps nothing older, and one null version (which frees the older null
     * and unversioned ones). */
    struct ol_shard_meta plain = {.flags = 0}, null_v = {.flags = OL_SHARD_NULL};
    bool seen_plain = false, seen_null = false;
    for (unsigned i = 0; i < nvids && n < cap; i++) {
        const struct ol_shard_meta *ref;
        uint32_t have, complete;
        unsigned v = vote(es, r, &vids[i], &ref, &have, &complete);
        if (v < es->k)
            continue;
        if ((seen_plain && ol_shard_frees(&plain, ref)) ||
            (seen_null && ol_shard_frees(&null_v, ref)))
            continue;
        seen_null |= (ref->flags & OL_SHARD_NULL) != 0;
        seen_plain |= !(ref->flags & (OL_SHARD_NULL | OL_SHARD_KEEP_OLDER));
        obj_from_meta(ref, v, &out[n++]);
    }
    rc = (int)n;
out:
    free(vids);
    res_free(r);
    return rc;
}

int ol_eset_delete_version(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                           const struct ol_version_id *vid)
{
    if (!valid_name(bucket, klen) || !vid)
        return -EINVAL;
    struct fan *f = fan_new(es, bucket, key, klen, vid);
    if (!f)
        return -ENOMEM;
    for (unsigned s = 0; s < es->n; s++)
        fan_add(f, FAN_DELETE, s, s);
    fan_run(f, 0);
    unsigned gone = 0;
    uint32_t took = 0;
    for (unsigned i = 0; i < f->n; i++) {
        gone += f->c[i].rc == 0;
        if (f->c[i].rc == 0)
            took |= 1u << f->c[i].slot;
    }
    fan_unref(f);
    /* Gone from n-k+1 drives, it is on k-1 at most: never readable again.
     * The copies left on drives that did not answer are leftovers that a
     * heal removes. */
    if (gone < es->n - es->k + 1)
        return -OL_EQUORUM;
    note_missed(es, bucket, key, klen, took);
    return 0;
}

/* ---- healing ---- */

static int heal_res(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    struct eset_res *r, struct ol_eset_heal_stats *st);

/* ---- GET ---- */

int ol_eset_stat(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                 const struct ol_version_id *vid, struct ol_eset_obj *out)
{
    if (!valid_name(bucket, klen))
        return -EINVAL;
    struct eset_res *r = res_alloc(es);
    if (!r)
        return -ENOMEM;
    int rc = resolve_pinned(es, bucket, key, klen, vid, &r);
    if (rc == 0)
        obj_from_meta(&r->win, popcount(r->have), out);
    res_free(r);
    return rc;
}

/* Whether a failed shard read is worth healing: the shard is absent or bad on
 * a drive that answers (a drive that fails is left to the drive's state
 * machine and the scrubber). */
static bool healable(int err)
{
    return err == -OL_ENOKEY || err == -OL_ECORRUPT;
}

/* Slot s's whole shard of the winner when it came with the versions answer
 * (r->want_shard), or NULL. */
static const uint8_t *res_shard(const struct eset_res *r, const struct ol_ec_layout *l, unsigned s)
{
    const struct ol_drive_blob *bl = &r->blob[s];
    if (!r->blob_buf[s] || !bl->shard_got || !(r->have & (1u << s)) ||
        ol_version_id_cmp(&bl->sm.vid, &r->win.vid) != 0 || bl->shard_len != l->shard_bytes)
        return NULL;
    return bl->shard_buf;
}

/* A small object's healthy read: when every data shard that [off,
 * off+len) touches came whole with the versions answers, the pieces are
 * copied from there into dst, with no fan and no copy of each shard first.
 * Returns whether it read. */
static bool read_inline(const struct ol_eset *es, const struct eset_res *r,
                        const struct ol_ec_layout *l, uint64_t off, size_t len, uint8_t *dst)
{
    const uint8_t *sb[OL_EC_MAX_K];
    for (unsigned j = 0; j < es->k; j++) {
        uint64_t so, sl;
        int rc = ol_ec_layout_shard_span(l, off, len, j, &so, &sl);
        OL_ASSERT(rc == 0);
        sb[j] = sl ? res_shard(r, l, slot_of(es, r->win.rotation, j)) : NULL;
        if (sl && !sb[j])
            return false;
    }
    struct ol_ec_piece pc;
    uint64_t end = off + len;
    for (uint64_t o = off; o < end; o += pc.len) {
        int rc = ol_ec_layout_piece(l, o, end, &pc);
        OL_ASSERT(rc == 0 && sb[pc.shard] && pc.shard_off + pc.len <= l->shard_bytes);
        memcpy(dst + (o - off), sb[pc.shard] + pc.shard_off, pc.len);
    }
    return true;
}

/* Rebuilds the units in want over ulen bytes from the k in present
 * (ol_ec_reconstruct, under the set's codec lock), and counts the degraded
 * read. */
static int rebuild_units(struct ol_eset *es, size_t ulen, uint8_t *const *ubuf, uint32_t present,
                         uint32_t want)
{
    pthread_mutex_lock(&es->codec_mu);
    int rc = ol_ec_reconstruct(es->codec, ulen, ubuf, present, want);
    pthread_mutex_unlock(&es->codec_mu);
    if (rc == 0)
        atomic_fetch_add(&es->st.degraded_reads, 1);
    return rc;
}

/* Copies [off, off+len) of the object out of the data units' buffers:
 * ubuf[j] holds shard j's bytes from shard offset base[j]. */
static void gather(const struct ol_ec_layout *l, uint64_t off, size_t len,
                   uint8_t *const *ubuf, const uint64_t *base, uint8_t *dst)
{
    struct ol_ec_piece pc;
    uint64_t end = off + len;
    for (uint64_t o = off; o < end; o += pc.len) {
        int rc = ol_ec_layout_piece(l, o, end, &pc);
        OL_ASSERT(rc == 0 && ubuf[pc.shard] && pc.shard_off >= base[pc.shard]);
        memcpy(dst + (o - off), ubuf[pc.shard] + (pc.shard_off - base[pc.shard]), pc.len);
    }
}

/* Reads [off, off+len) of the resolved version.  0, -OL_EQUORUM, or
 * -OL_ENOKEY when too many shards vanished (a newer version completed and
 * the drives freed this one): the caller resolves again.  *heal is set when
 * a shard was found missing or corrupt. */
static int read_res(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    const struct eset_res *r, uint64_t off, size_t len, uint8_t *dst, bool *heal)
{
    const struct ol_shard_meta *w = &r->win;
    struct ol_ec_layout l;
    uint8_t *ubuf[OL_EC_MAX_UNITS] = {0};
    uint64_t so[OL_EC_MAX_K], sl[OL_EC_MAX_K];
    uint64_t base[OL_EC_MAX_UNITS];
    uint32_t failed = 0; /* shards (not slots) */
    unsigned vanished = 0;
    int rc = ol_ec_layout_init(&l, w->size, w->unit_bytes, es->k);
    if (rc < 0)
        return rc;
    if (read_inline(es, r, &l, off, len, dst))
        return 0;
    /* The healthy path: one span of each data shard the range touches, read
     * at once; a shard slower than the read timeout counts as failed. */
    struct fan *f = fan_new(es, bucket, key, klen, &w->vid);
    if (!f)
        return -ENOMEM;
    for (unsigned j = 0; j < es->k; j++) {
        rc = ol_ec_layout_shard_span(&l, off, len, j, &so[j], &sl[j]);
        OL_ASSERT(rc == 0);
        if (sl[j] == 0)
            continue;
        unsigned s = slot_of(es, w->rotation, j);
        if (!(r->have & (1u << s))) {
            failed |= 1u << j;
            *heal |= (r->answered & (1u << s)) != 0;
            continue;
        }
        const uint8_t *sb = res_shard(r, &l, s);
        if (sb) {
            /* It came with the versions answer. */
            ubuf[j] = malloc(sl[j]);
            if (!ubuf[j]) {
                fan_unref(f);
                rc = -ENOMEM;
                goto out;
            }
            memcpy(ubuf[j], sb + so[j], sl[j]);
            base[j] = so[j];
            continue;
        }
        struct fan_call *c = fan_add(f, FAN_READ, s, j);
        c->off = so[j];
        c->len = sl[j];
    }
    if (f->n > 0)
        fan_run(f, es->read_timeout_ms);
    bool slow = false;
    for (unsigned x = 0; x < f->n; x++) {
        struct fan_call *c = &f->c[x];
        unsigned j = c->shard;
        if (!c->done || c->rc < 0) {
            failed |= 1u << j;
            slow |= !c->done;
            if (c->done) {
                *heal |= healable(c->rc);
                vanished += c->rc == -OL_ENOKEY;
            }
            continue;
        }
        ubuf[j] = c->buf;
        c->buf = NULL;
        base[j] = so[j];
    }
    fan_unref(f);
    if (slow)
        atomic_fetch_add(&es->st.read_timeouts, 1);
    if (failed) {
        /* Degraded: rebuild the lost data shards over the union U of the
         * spans, from the same span of k other shards (the code is byte-wise
         * along the shard, stripe.h). */
        uint64_t ua = UINT64_MAX, ub = 0;
        for (unsigned j = 0; j < es->k; j++) {
            if (sl[j] == 0)
                continue;
            ua = so[j] < ua ? so[j] : ua;
            ub = so[j] + sl[j] > ub ? so[j] + sl[j] : ub;
        }
        size_t ulen = (size_t)(ub - ua);
        uint32_t present = 0;
        /* Data shards already read over exactly U are used as they are. */
        for (unsigned j = 0; j < es->k; j++)
            if (ubuf[j] && !(failed & (1u << j)) && so[j] == ua && sl[j] == ulen)
                present |= 1u << j;
        /* Rounds: ask as many more shards as are missing (data first, then
         * parity), all at once; each round asks at least one new shard or
         * ends. */
        for (unsigned round = 0; round < es->n && popcount(present) < es->k; round++) {
            f = fan_new(es, bucket, key, klen, &w->vid);
            if (!f) {
                rc = -ENOMEM;
                goto out;
            }
            unsigned need = es->k - popcount(present);
            for (unsigned i = 0; i < es->n && f->n < need; i++) {
                if ((present | failed) & (1u << i))
                    continue;
                unsigned s = slot_of(es, w->rotation, i);
                if (!(r->have & (1u << s))) {
                    failed |= 1u << i;
                    *heal |= (r->answered & (1u << s)) != 0;
                    continue;
                }
                struct fan_call *c = fan_add(f, FAN_READ, s, i);
                c->off = ua;
                c->len = ulen;
            }
            if (f->n == 0) {
                fan_unref(f);
                break;
            }
            fan_run(f, 0);
            for (unsigned x = 0; x < f->n; x++) {
                struct fan_call *c = &f->c[x];
                unsigned i = c->shard;
                if (c->rc < 0) {
                    failed |= 1u << i;
                    *heal |= healable(c->rc);
                    vanished += c->rc == -OL_ENOKEY;
                    continue;
                }
                free(ubuf[i]);
                ubuf[i] = c->buf;
                c->buf = NULL;
                base[i] = ua;
                present |= 1u << i;
            }
            fan_unref(f);
        }
        if (popcount(present) < es->k) {
            rc = vanished > es->n - es->k ? -OL_ENOKEY : -OL_EQUORUM;
            goto out;
        }
        uint32_t want = 0;
        for (unsigned j = 0; j < es->k; j++) {
            if (sl[j] == 0 || (present & (1u << j)))
                continue;
            /* Unit j is rebuilt over U into a fresh buffer. */
            free(ubuf[j]);
            ubuf[j] = malloc(ulen);
            if (!ubuf[j]) {
                rc = -ENOMEM;
                goto out;
            }
            base[j] = ua;
            want |= 1u << j;
        }
        rc = rebuild_units(es, ulen, ubuf, present, want);
        if (rc < 0)
            goto out;
    }
    gather(&l, off, len, ubuf, base, dst);
    rc = 0;
out:
    for (unsigned i = 0; i < es->n; i++)
        free(ubuf[i]);
    return rc;
}

int ol_eset_read(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                 const struct ol_version_id *vid, uint64_t off, size_t len, void *buf,
                 struct ol_eset_obj *out)
{
    if (!valid_name(bucket, klen))
        return -EINVAL;
    struct eset_res *r = res_alloc(es);
    if (!r)
        return -ENOMEM;
    int rc = 0;
    bool heal = false;
    for (unsigned attempt = 0; attempt < ESET_READ_RETRIES; attempt++) {
        heal = false;
        rc = resolve_pinned(es, bucket, key, klen, vid, &r);
        if (rc < 0)
            goto out;
        if (off > r->win.size || len > r->win.size - off) {
            rc = -EINVAL;
            goto out;
        }
        rc = len ? read_res(es, bucket, key, klen, r, off, len, buf, &heal) : 0;
        /* A pinned version that vanished is gone: no other version may be
         * substituted. */
        if (rc != -OL_ENOKEY || vid)
            break;
    }
    if (rc < 0)
        goto out;
    obj_from_meta(&r->win, popcount(r->have), out);
    atomic_fetch_add(&es->st.reads, 1);
    /* A drive that answered without the version is healed too: the
     * metadata showed it for free. */
    heal |= (r->answered & ~r->have) != 0;
    if (es->heal_on_read && heal) {
        struct ol_eset_heal_stats hs;
        memset(&hs, 0, sizeof(hs));
        /* Healing prunes around the version it heals, so it must be the
         * newest readable one: a read pinned to a vid resolves afresh. */
        int e = vid ? ol_eset_heal_object(es, bucket, key, klen, &hs)
                    : heal_res(es, bucket, key, klen, r, &hs);
        if (e == 0 && hs.shards_rebuilt > 0) {
            atomic_fetch_add(&es->st.heals_on_read, 1);
            atomic_fetch_add(&es->st.shards_healed_on_read, hs.shards_rebuilt);
        }
    } else if (es->heal_on_read && !vid && (r->have & ~r->complete)) {
        /* Only phase 2 is missing (the PUT's marks failed): finish it, which
         * needs no data I/O. */
        for (unsigned s = 0; s < es->n; s++)
            if (r->have & ~r->complete & (1u << s))
                (void)es->drive[s].ops->mark_complete(es->drive[s].d, bucket, key, klen,
                                                      &r->win.vid);
    }
out:
    res_free(r);
    return rc;
}

/* ---- healing ---- */

static uint64_t age_ms(struct ol_eset *es, const struct ol_version_id *vid)
{
    uint64_t now = ol_hlc_stamp_ms(ol_hlc_now(es->hlc));
    uint64_t then = ol_hlc_stamp_ms(ol_version_id_stamp(vid));
    return now > then ? now - then : 0;
}

/* Rebuilds the shards in `bad` (shard indexes) of the winner from the shards
 * in `src`, chunk by chunk, and commits them with the version's blob (meta,
 * described by bsm's meta_len and meta_stamp).  Returns the mask of shards
 * rewritten, or an error. */
static int rebuild(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                   const struct ol_shard_meta *w, const struct ol_shard_meta *bsm,
                   const uint8_t *meta, uint32_t bad, uint32_t src, uint32_t *done)
{
    struct ol_ec_layout l;
    uint8_t *buf[OL_EC_MAX_UNITS] = {0};
    void *wr[OL_EC_MAX_UNITS] = {0};
    int rc = ol_ec_layout_init(&l, w->size, w->unit_bytes, es->k);
    if (rc < 0)
        return rc;
    *done = 0;
    uint64_t total = (w->flags & OL_SHARD_DELETE_MARKER) ? 0 : l.shard_bytes;
    size_t chunk = total < ESET_HEAL_CHUNK ? (size_t)total : ESET_HEAL_CHUNK;
    for (unsigned i = 0; i < es->n && chunk > 0; i++) {
        if (!((bad | src) & (1u << i)))
            continue;
        buf[i] = malloc(chunk);
        if (!buf[i]) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (unsigned i = 0; i < es->n; i++) {
        if (!(bad & (1u << i)))
            continue;
        const struct ol_drive *d = &es->drive[slot_of(es, w->rotation, i)];
        if (d->ops->shard_begin(d->d, bucket, key, klen, &wr[i]) < 0) {
            wr[i] = NULL;
            bad &= ~(1u << i);
        }
    }
    uint64_t nchunks = chunk ? (total + chunk - 1) / chunk : 0;
    for (uint64_t c = 0; c < nchunks && bad; c++) {
        uint64_t x = c * chunk;
        size_t n = total - x < chunk ? (size_t)(total - x) : chunk;
        uint32_t present = 0;
        for (unsigned i = 0; i < es->n && popcount(present) < es->k; i++) {
            if (!(src & (1u << i)))
                continue;
            const struct ol_drive *d = &es->drive[slot_of(es, w->rotation, i)];
            if (d->ops->read_shard(d->d, bucket, key, klen, &w->vid, x, n, buf[i]) < 0) {
                src &= ~(1u << i);
                continue;
            }
            present |= 1u << i;
        }
        if (popcount(present) < es->k) {
            rc = -OL_EQUORUM;
            goto out;
        }
        pthread_mutex_lock(&es->codec_mu);
        rc = ol_ec_reconstruct(es->codec, n, buf, present, bad);
        pthread_mutex_unlock(&es->codec_mu);
        if (rc < 0)
            goto out;
        for (unsigned i = 0; i < es->n; i++) {
            if (!(bad & (1u << i)))
                continue;
            const struct ol_drive *d = &es->drive[slot_of(es, w->rotation, i)];
            if (d->ops->shard_write(wr[i], buf[i], n) < 0) {
                d->ops->shard_abort(wr[i]);
                wr[i] = NULL;
                bad &= ~(1u << i);
            }
        }
    }
    for (unsigned i = 0; i < es->n; i++) {
        if (!(bad & (1u << i)))
            continue;
        struct ol_shard_meta sm = *w;
        sm.shard = (uint8_t)i;
        sm.flags &= OL_SHARD_DELETE_MARKER | OL_SHARD_KEEP_OLDER | OL_SHARD_NULL;
        sm.hint = 0; /* a rewrite of an existing version: the drive may hold a copy */
        sm.meta_stamp = bsm->meta_stamp;
        const struct ol_drive *d = &es->drive[slot_of(es, w->rotation, i)];
        int e = d->ops->shard_commit(wr[i], &sm, bsm->meta_len ? meta : NULL, bsm->meta_len);
        wr[i] = NULL;
        if (e == 0)
            *done |= 1u << i;
    }
    rc = 0;
out:
    for (unsigned i = 0; i < es->n; i++) {
        if (wr[i])
            es->drive[slot_of(es, w->rotation, i)].ops->shard_abort(wr[i]);
        free(buf[i]);
    }
    return rc;
}

/* Finds the shards of the winner that are missing or corrupt on drives that
 * answer (every byte of every held shard is read: the drives verify their
 * checksums), and the shards usable as sources. */
static int verify(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                  const struct eset_res *r, uint32_t *bad, uint32_t *src, uint64_t *corrupt)
{
    const struct ol_shard_meta *w = &r->win;
    struct ol_ec_layout l;
    int rc = ol_ec_layout_init(&l, w->size, w->unit_bytes, es->k);
    if (rc < 0)
        return rc;
    uint64_t total = (w->flags & OL_SHARD_DELETE_MARKER) ? 0 : l.shard_bytes;
    size_t chunk = total < ESET_HEAL_CHUNK ? (size_t)total : ESET_HEAL_CHUNK;
    uint8_t *buf = chunk ? malloc(chunk) : NULL;
    if (chunk && !buf)
        return -ENOMEM;
    *bad = *src = 0;
    for (unsigned i = 0; i < es->n; i++) {
        unsigned s = slot_of(es, w->rotation, i);
        if (!(r->answered & (1u << s)))
            continue;
        if (!(r->have & (1u << s))) {
            *bad |= 1u << i;
            continue;
        }
        int e = 0;
        for (uint64_t x = 0; x < total && e == 0; x += chunk) {
            size_t n = total - x < chunk ? (size_t)(total - x) : chunk;
            e = es->drive[s].ops->read_shard(es->drive[s].d, bucket, key, klen, &w->vid, x, n, buf);
        }
        if (e == 0)
            *src |= 1u << i;
        else if (healable(e)) {
            *bad |= 1u << i;
            *corrupt += e == -OL_ECORRUPT;
        }
    }
    free(buf);
    return 0;
}

/* True for a version stamped before this set was opened: no PUT of this
 * process can still be writing it, so if it never reached the write quorum it
 * is the leftover of a PUT cut off by a crash or kill, not one in flight. */
static bool before_start(const struct ol_eset *es, const struct ol_version_id *vid)
{
    return ol_hlc_stamp_ms(ol_version_id_stamp(vid)) < es->start_ms;
}

/* Removes, on the drives that answered, the versions of the key that `win`
 * (NULL: no readable version) replaces and that were not freed yet (on the
 * slots in `marked`, mark_complete(win) freed them already); the older
 * versions it keeps (a versioned key) only when no longer readable and
 * abandoned; and the versions newer than `win` once abandoned (older than
 * the grace, or from before this process: failed PUTs).  Returns the number
 * of versions left besides win. */
static unsigned prune(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                      const struct eset_res *r, const struct ol_shard_meta *win, uint32_t marked,
                      struct ol_eset_heal_stats *st)
{
    unsigned left = 0;
    bool everyone = r->answered == (1u << es->n) - 1;
    for (unsigned s = 0; s < es->n; s++) {
        for (int i = 0; i < r->nv[s]; i++) {
            const struct ol_shard_meta *e = &VERS(r, s)[i];
            const struct ol_version_id *v = &e->vid;
            int c = win ? ol_version_id_cmp(v, &win->vid) : 1;
            if (c == 0)
                continue;
            bool abandoned = age_ms(es, v) >= es->grace_ms || before_start(es, v);
            if (c < 0 && ol_shard_frees(win, e)) {
                if (marked & (1u << s))
                    continue;
            } else if (c < 0) {
                /* Kept by the winner (versioned): it goes only as a leftover
                 * that no read can find, once every drive said so. */
                const struct ol_shard_meta *ref;
                uint32_t h, cm;
                if (!everyone || !abandoned || vote(es, r, v, &ref, &h, &cm) >= es->k) {
                    left++;
                    continue;
                }
            } else if (!abandoned) {
                left++;
                continue;
            }
            if (es->drive[s].ops->delete_version(es->drive[s].d, bucket, key, klen, v) == 0)
                st->versions_removed++;
            else
                left++;
        }
    }
    return left;
}

/* Heals version r->win (r->have, r->complete: its holders): rebuilds its
 * missing and corrupt shards with its blob, repairs the blob on holders
 * whose copy is stale or damaged, and marks it COMPLETE where it is not.
 * *holders and *marked get the slots holding it now and those marked.
 * 0, 1 when the version was a never-acknowledged leftover and was removed,
 * or an error. */
static int heal_one(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    struct eset_res *r, struct ol_eset_heal_stats *st, uint32_t *holders,
                    uint32_t *marked)
{
    const struct ol_shard_meta *w = &r->win;
    uint32_t bad, src, done = 0;
    *holders = *marked = 0;
    int rc = verify(es, bucket, key, klen, r, &bad, &src, &st->corrupt);
    if (rc < 0)
        return rc;
    if (bad && popcount(src) < es->k) {
        /* A version never completed anywhere, on fewer drives than a PUT
         * needs before it answers, from before this process started: a
         * cut-off PUT that was never acknowledged.  It goes, and the
         * previous version (if any) reads again. */
        unsigned ack_quorum = es->k + (es->m > 0 ? 1 : 0);
        if (r->complete == 0 && popcount(r->have) < ack_quorum && before_start(es, &w->vid) &&
            r->answered == (1u << es->n) - 1) {
            for (unsigned s = 0; s < es->n; s++)
                if (es->drive[s].ops->delete_version(es->drive[s].d, bucket, key, klen,
                                                     &w->vid) == 0)
                    st->versions_removed++;
            return 1;
        }
        st->unrecoverable++;
        ol_log_limited(OL_LOG_WARN,
                       "heal %s/%.*s: %u good shards of %u holders (complete %x), cannot rebuild",
                       bucket, (int)(klen > 200 ? 200 : klen), key, popcount(src),
                       popcount(r->have), r->complete);
        return -OL_EQUORUM;
    }
    /* The blob: every holder's copy is checked; the rebuilt shards get the
     * winning one, and holders with another copy (stale or damaged) get it
     * too.  A blob no holder has intact leaves the shards to be rebuilt
     * without one (the data matters more; the blob is lost either way). */
    uint8_t *mb = malloc(OL_ESET_META_MAX);
    if (!mb)
        return -ENOMEM;
    struct ol_shard_meta bsm;
    uint32_t bgood = 0;
    int brc = winner_blob(es, bucket, key, klen, r, true, mb, &bsm, &bgood);
    if (brc == -ENOMEM) {
        free(mb);
        return brc;
    }
    if (brc < 0)
        memset(&bsm, 0, sizeof(bsm));
    if (bad) {
        rc = rebuild(es, bucket, key, klen, w, &bsm, mb, bad, src, &done);
        if (rc < 0) {
            free(mb);
            return rc;
        }
        st->shards_rebuilt += popcount(done);
    }
    for (unsigned i = 0; brc == 0 && i < es->n; i++) {
        unsigned s = slot_of(es, w->rotation, i);
        if (!(src & (1u << i)) || (bgood & (1u << s)))
            continue;
        if (es->drive[s].ops->set_meta(es->drive[s].d, bucket, key, klen, &w->vid,
                                       bsm.meta_len ? mb : NULL, bsm.meta_len,
                                       bsm.meta_stamp) == 0)
            st->metas_repaired++;
    }
    free(mb);
    /* Phase 2 wherever the version now is and is not marked; it also frees
     * the older versions it replaces on those drives. */
    for (unsigned i = 0; i < es->n; i++) {
        unsigned s = slot_of(es, w->rotation, i);
        if (!((src | done) & (1u << i)))
            continue;
        *holders |= 1u << s;
        if ((r->complete & (1u << s)) && !(done & (1u << i))) {
            *marked |= 1u << s;
            continue;
        }
        if (es->drive[s].ops->mark_complete(es->drive[s].d, bucket, key, klen, &w->vid) == 0) {
            st->marked_complete++;
            *marked |= 1u << s;
        }
    }
    return 0;
}

static int heal_res(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    struct eset_res *r, struct ol_eset_heal_stats *st)
{
    OL_ASSERT(r->found);
    uint32_t holders, marked;
    int rc = heal_one(es, bucket, key, klen, r, st, &holders, &marked);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    const struct ol_shard_meta w = r->win;
    const uint32_t w_have = r->have, w_complete = r->complete;
    /* The older versions the winner keeps (a versioned key) and that are
     * readable are healed as well. */
    if (w.flags & (OL_SHARD_KEEP_OLDER | OL_SHARD_NULL)) {
        struct ol_version_id *vids = malloc(sizeof(*vids) * es->n * r->cap);
        if (!vids)
            return -ENOMEM;
        unsigned nvids = all_vids(es, r, vids);
        for (unsigned i = 0; i < nvids; i++) {
            const struct ol_shard_meta *ref;
            uint32_t h, c, hh, mm;
            if (ol_version_id_cmp(&vids[i], &w.vid) >= 0 ||
                vote(es, r, &vids[i], &ref, &h, &c) < es->k || ol_shard_frees(&w, ref))
                continue;
            r->win = *ref;
            r->have = h;
            r->complete = c;
            (void)heal_one(es, bucket, key, klen, r, st, &hh, &mm);
        }
        free(vids);
        r->win = w;
        r->have = w_have;
        r->complete = w_complete;
    }
    /* Versions the marks did not free: older ones on drives that hold no
     * good shard of the winner, newer abandoned ones. */
    r->healed = holders;
    unsigned left = prune(es, bucket, key, klen, r, &w, marked, st);
    /* A delete marker has done its work once every drive holds it and
     * nothing else: then the key can go entirely.  Not in a versioned
     * bucket, where the marker is a version of its own (S3 lists it). */
    if ((w.flags & OL_SHARD_DELETE_MARKER) && !(w.flags & (OL_SHARD_KEEP_OLDER | OL_SHARD_NULL)) &&
        holders == (1u << es->n) - 1 && left == 0) {
        for (unsigned s = 0; s < es->n; s++)
            if (es->drive[s].ops->delete_version(es->drive[s].d, bucket, key, klen, &w.vid) == 0)
                st->versions_removed++;
    }
    return 0;
}

int ol_eset_heal_object(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        struct ol_eset_heal_stats *st)
{
    uint32_t answered, caught;
    return ol_eset_heal_object_slots(es, bucket, key, klen, st, &answered, &caught);
}

int ol_eset_heal_object_slots(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                              struct ol_eset_heal_stats *st, uint32_t *answered, uint32_t *caught)
{
    *answered = *caught = 0;
    if (!valid_name(bucket, klen))
        return -EINVAL;
    struct eset_res *r = res_alloc(es);
    if (!r)
        return -ENOMEM;
    st->objects++;
    int rc = resolve(es, bucket, key, klen, NULL, r);
    if (res_truncated(es, r)) {
        /* A versioned key: look at every version. */
        struct eset_res *big = res_alloc_cap(es, ESET_ALL_VERSIONS);
        if (!big) {
            res_free(r);
            return -ENOMEM;
        }
        res_free(r);
        r = big;
        rc = resolve(es, bucket, key, klen, NULL, r);
    }
    if (r->found) {
        r->healed = 0;
        rc = heal_res(es, bucket, key, klen, r, st);
        /* heal_one's 1 (a cut-off PUT removed) leaves healed 0: nothing of
         * the key is owed to anyone then, so every drive that answered is
         * caught up. */
        if (rc == 0)
            *caught = r->healed ? r->healed & r->answered : r->answered;
    } else if (rc == -OL_ENOKEY && r->answered == (1u << es->n) - 1) {
        /* Leftovers of PUTs that never reached k drives. */
        (void)prune(es, bucket, key, klen, r, NULL, 0, st);
        *caught = r->answered;
    } else if (rc == -OL_EQUORUM && r->answered == (1u << es->n) - 1) {
        st->unrecoverable++;
        ol_log_limited(OL_LOG_WARN, "heal %s/%.*s: no version on enough drives to rebuild",
                       bucket, (int)(klen > 200 ? 200 : klen), key);
    }
    *answered = r->answered;
    res_free(r);
    return rc;
}

/* ---- the merged key space of the drives ---- */

struct merge_src {
    struct ol_drive_entry *page;
    int n, pos;
    bool end, failed;
};

struct merge {
    struct ol_eset *es;
    const char *bucket;
    struct merge_src src[OL_EC_MAX_UNITS];
    unsigned nfailed;
    char key[OL_DRIVE_MAX_KEY];
    size_t klen;
};

static void merge_close(struct merge *mg)
{
    for (unsigned s = 0; s < mg->es->n; s++)
        free(mg->src[s].page);
}

static int merge_open(struct merge *mg, struct ol_eset *es, const char *bucket, const char *after,
                      size_t alen)
{
    memset(mg, 0, sizeof(*mg));
    mg->es = es;
    mg->bucket = bucket;
    if (alen) /* after may be NULL then, and memcpy's arguments never may */
        memcpy(mg->key, after, alen);
    mg->klen = alen;
    for (unsigned s = 0; s < es->n; s++) {
        mg->src[s].page = malloc(ESET_LIST_PAGE * sizeof(struct ol_drive_entry));
        if (!mg->src[s].page) {
            merge_close(mg);
            return -ENOMEM;
        }
        mg->src[s].pos = mg->src[s].n = 0;
    }
    return 0;
}

/* The next key of the union of the drives' listings: *slots gets the drives
 * listing it and ent[s] their entries.  1 with a key, 0 at the end, or
 * -OL_EQUORUM when too few drives answer for the listing to be complete. */
static int merge_next(struct merge *mg, uint32_t *slots, const struct ol_drive_entry **ent)
{
    struct ol_eset *es = mg->es;
    unsigned need = es->k > es->m + 1 ? es->k : es->m + 1;
    const struct ol_drive_entry *min = NULL;
    for (unsigned s = 0; s < es->n; s++) {
        struct merge_src *ms = &mg->src[s];
        if (ms->failed || (ms->pos == ms->n && ms->end))
            continue;
        if (ms->pos == ms->n) {
            /* A page continues after the last key this drive gave, which is
             * the last key returned by the merge or one before it. */
            const char *after = ms->n ? ms->page[ms->n - 1].key : mg->key;
            size_t alen = ms->n ? ms->page[ms->n - 1].key_len : mg->klen;
            char tmp[OL_DRIVE_MAX_KEY];
            memcpy(tmp, after, alen);
            int n = es->drive[s].ops->list_keys(es->drive[s].d, mg->bucket, tmp, alen, ms->page,
                                                ESET_LIST_PAGE);
            if (n < 0) {
                ms->failed = true;
                mg->nfailed++;
                continue;
            }
            ms->n = n;
            ms->pos = 0;
            ms->end = n < ESET_LIST_PAGE;
            if (n == 0)
                continue;
        }
        const struct ol_drive_entry *e = &ms->page[ms->pos];
        if (!min) {
            min = e;
            continue;
        }
        size_t l = e->key_len < min->key_len ? e->key_len : min->key_len;
        int c = memcmp(e->key, min->key, l);
        if (c < 0 || (c == 0 && e->key_len < min->key_len))
            min = e;
    }
    if (es->n - mg->nfailed < need)
        return -OL_EQUORUM;
    if (!min)
        return 0;
    memcpy(mg->key, min->key, min->key_len);
    mg->klen = min->key_len;
    *slots = 0;
    for (unsigned s = 0; s < es->n; s++) {
        struct merge_src *ms = &mg->src[s];
        ent[s] = NULL;
        if (ms->failed || ms->pos == ms->n)
            continue;
        const struct ol_drive_entry *e = &ms->page[ms->pos];
        if (e->key_len == mg->klen && memcmp(e->key, mg->key, mg->klen) == 0) {
            ent[s] = e;
            *slots |= 1u << s;
            ms->pos++;
        }
    }
    return 1;
}

static int list_impl(struct ol_eset *es, const char *bucket, const char *after, size_t alen,
                     unsigned max, bool markers,
                     int (*fn)(void *ctx, const char *key, size_t klen,
                               const struct ol_eset_obj *obj),
                     void *ctx)
{
    if (!valid_name(bucket, 1) || alen > OL_DRIVE_MAX_KEY)
        return -EINVAL;
    struct merge mg;
    int rc = merge_open(&mg, es, bucket, after, alen);
    if (rc < 0)
        return rc;
    unsigned count = 0;
    const struct ol_drive_entry *ent[OL_EC_MAX_UNITS];
    uint32_t slots;
    /* Each step consumes at least one entry of one drive; the count bounds
     * the walk by the keys listed. */
    while (count < max && (rc = merge_next(&mg, &slots, ent)) == 1) {
        /* The fast rule (eset.h): every drive listing the key shows the same
         * newest version, on at least k drives, and fewer than k drives are
         * silent. */
        const struct ol_shard_meta *ref = NULL;
        unsigned agree = 0;
        bool same = true;
        for (unsigned s = 0; s < es->n; s++) {
            if (!ent[s])
                continue;
            if (!ref)
                ref = &ent[s]->newest;
            if (consistent(es, ref, s, &ent[s]->newest))
                agree++;
            else
                same = false;
        }
        struct ol_eset_obj obj;
        bool listed;
        if (same && agree >= es->k && mg.nfailed < es->k && ref->k == es->k && ref->m == es->m) {
            listed = markers || !(ref->flags & OL_SHARD_DELETE_MARKER);
            obj_from_meta(ref, agree, &obj);
        } else {
            atomic_fetch_add(&es->st.list_slow_keys, 1);
            int e = -ENOMEM;
            struct eset_res *r = res_alloc(es);
            if (r) {
                e = resolve(es, bucket, mg.key, mg.klen, NULL, r);
                if (r->found)
                    obj_from_meta(&r->win, popcount(r->have), &obj);
                if (e == -OL_ENOKEY && r->found && markers)
                    e = 0;
                res_free(r);
            }
            listed = e == 0;
            if (e == -OL_EQUORUM)
                atomic_fetch_add(&es->st.list_skipped, 1);
            else if (e < 0 && e != -OL_ENOKEY) {
                rc = e;
                break;
            }
        }
        if (!listed)
            continue;
        count++;
        if (fn(ctx, mg.key, mg.klen, &obj))
            break;
    }
    merge_close(&mg);
    return rc < 0 ? rc : (int)count;
}

int ol_eset_list(struct ol_eset *es, const char *bucket, const char *after, size_t alen,
                 unsigned max,
                 int (*fn)(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *obj),
                 void *ctx)
{
    return list_impl(es, bucket, after, alen, max, false, fn, ctx);
}

int ol_eset_list_markers(struct ol_eset *es, const char *bucket, const char *after, size_t alen,
                         unsigned max,
                         int (*fn)(void *ctx, const char *key, size_t klen,
                                   const struct ol_eset_obj *obj),
                         void *ctx)
{
    return list_impl(es, bucket, after, alen, max, true, fn, ctx);
}

struct bucket_names {
    char (*name)[OL_DRIVE_MAX_BUCKET + 1];
    size_t n, cap;
    int err;
};

static int add_bucket(void *ctx, const char *bucket)
{
    struct bucket_names *b = ctx;
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->name[i], bucket) == 0)
            return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        if (cap > ESET_MAX_BUCKETS) {
            b->err = -E2BIG;
            return 1;
        }
        void *nb = realloc(b->name, cap * sizeof(*b->name));
        if (!nb) {
            b->err = -ENOMEM;
            return 1;
        }
        b->name = nb;
        b->cap = cap;
    }
    strncpy(b->name[b->n], bucket, OL_DRIVE_MAX_BUCKET);
    b->name[b->n][OL_DRIVE_MAX_BUCKET] = '\0';
    b->n++;
    return 0;
}

int ol_eset_heal_all(struct ol_eset *es, struct ol_eset_heal_stats *st)
{
    return ol_eset_heal_all_cb(es, st, NULL, NULL);
}

int ol_eset_heal_all_cb(struct ol_eset *es, struct ol_eset_heal_stats *st,
                        void (*progress)(void *ctx, const struct ol_eset_heal_stats *st),
                        void *ctx)
{
    struct bucket_names b = {0};
    int rc = 0;
    for (unsigned s = 0; s < es->n && b.err == 0; s++)
        (void)es->drive[s].ops->list_buckets(es->drive[s].d, add_bucket, &b);
    if (b.err < 0) {
        rc = b.err;
        goto out;
    }
    for (size_t i = 0; i < b.n && rc == 0; i++) {
        struct merge mg;
        rc = merge_open(&mg, es, b.name[i], "", 0);
        if (rc < 0)
            break;
        const struct ol_drive_entry *ent[OL_EC_MAX_UNITS];
        uint32_t slots;
        /* Every key of any drive, readable or not: leftovers need healing
         * too.  Healing changes the drives behind the merge, which is fine:
         * each drive's listing resumes after the last key it gave. */
        int n;
        while ((n = merge_next(&mg, &slots, ent)) == 1) {
            int e = ol_eset_heal_object(es, b.name[i], mg.key, mg.klen, st);
            if (progress)
                progress(ctx, st);
            if (e < 0 && e != -OL_ENOKEY && e != -OL_EQUORUM) {
                rc = e;
                break;
            }
        }
        if (n < 0 && rc == 0)
            rc = n;
        merge_close(&mg);
    }
out:
    free(b.name);
    return rc;
}

/* ---- COPY by reference ----
 *
 * Each holder of the source version copies its own shard onto the
 * destination key (drive.h, shard_copy): the copy keeps the source's
 * rotation and each shard stays on its drive, so no byte moves.  The
 * destination key's own rotation does not matter: every reader takes a
 * version's rotation from its shard metadata (consistent, read_res, verify,
 * rebuild), only a PUT computes it from the key. */

struct copy_src {
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    const char *key;
    size_t klen;
    struct ol_version_id vid; /* the source version */
    struct ol_shard_meta sm;  /* the new version's (shard set per drive) */
    const void *meta;         /* its blob, sm.meta_len bytes */
};

static int fan_copy_exec(const struct fan *f, const struct fan_call *c, const struct ol_drive *d)
{
    const struct copy_src *cs = f->copy;
    if (!d->ops->shard_copy)
        return -EOPNOTSUPP;
    struct ol_shard_meta sm = cs->sm;
    sm.shard = (uint8_t)c->shard;
    return d->ops->shard_copy(d->d, cs->bucket, cs->key, cs->klen, &cs->vid, f->bucket, f->key,
                              f->klen, &sm, cs->meta, sm.meta_len);
}

/* One call of op (FAN_MARK or FAN_DELETE) of version vid of bucket/key on
 * the drives in `slots`, all at once (best effort). */
static void copy_fan_vid(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, uint8_t op, uint32_t slots)
{
    struct fan *f = fan_new(es, bucket, key, klen, vid);
    if (!f)
        return;
    for (unsigned s = 0; s < es->n; s++)
        if (slots & (1u << s))
            fan_add(f, op, s, s);
    fan_run(f, 0);
    fan_unref(f);
}

int ol_eset_copy(struct ol_eset *es, const char *src_bucket, const char *src_key, size_t src_klen,
                 const struct ol_version_id *src_vid, const char *bucket, const char *key,
                 size_t klen, const struct ol_eset_commit *cm, struct ol_eset_obj *out)
{
    if (!valid_name(src_bucket, src_klen) || !valid_name(bucket, klen) ||
        cm->meta_len > OL_ESET_META_MAX || (cm->meta_len && !cm->meta) ||
        (cm->flags & ~(uint32_t)(OL_SHARD_KEEP_OLDER | OL_SHARD_NULL)))
        return -EINVAL;
    for (unsigned s = 0; s < es->n; s++)
        if (!es->drive[s].ops->shard_copy)
            return -EOPNOTSUPP;
    struct copy_src *cs = calloc(1, sizeof(*cs));
    struct eset_res *r = res_alloc(es);
    struct fan *f = NULL;
    int rc = -ENOMEM;
    if (!cs || !r)
        goto out;
    rc = resolve_pinned(es, src_bucket, src_key, src_klen, src_vid, &r);
    if (rc < 0)
        goto out; /* -OL_ENOKEY also for a delete marker */
    /* Only the holders can share their shard; a copy on fewer than the
     * write quorum would be acknowledged with less redundancy than a PUT,
     * so it is refused and the caller streams (which reconstructs). */
    if (popcount(r->have) < es->quorum) {
        rc = -OL_EQUORUM;
        goto out;
    }
    snprintf(cs->bucket, sizeof(cs->bucket), "%s", src_bucket);
    cs->key = src_key;
    cs->klen = src_klen;
    cs->vid = r->win.vid;
    cs->meta = cm->meta_len ? cm->meta : NULL;
    struct ol_shard_meta *sm = &cs->sm;
    *sm = r->win; /* geometry, rotation, unit, size: the source's */
    /* The version id now, right before the shards are committed, as a
     * PUT's: of a copy and a PUT of one key, the one that completes last
     * wins. */
    ol_hlc_version_id(es->hlc, &sm->vid);
    sm->flags = (uint8_t)cm->flags;
    sm->mtime_ns = cm->mtime_ns;
    if (cm->etag) {
        memset(sm->etag, 0, sizeof(sm->etag));
        strncpy(sm->etag, cm->etag, sizeof(sm->etag) - 1);
    }
    sm->meta_stamp = ol_version_id_stamp(&sm->vid);
    sm->meta_len = (uint32_t)cm->meta_len;
    sm->meta_crc = cm->meta_len ? ol_crc32c(cm->meta, cm->meta_len) : 0;
    f = fan_new(es, bucket, key, klen, &sm->vid);
    if (!f) {
        rc = -ENOMEM;
        goto out;
    }
    f->copy = cs;
    for (unsigned s = 0; s < es->n; s++)
        if (r->have & (1u << s))
            fan_add(f, FAN_COPY, s, (s + es->n - r->win.rotation % es->n) % es->n);
    fan_run(f, 0);
    uint32_t committed = 0, durable_slots = 0;
    unsigned durable = 0, full = 0, unsupported = 0;
    for (unsigned i = 0; i < f->n; i++) {
        int e = f->c[i].rc;
        if (e == 0)
            committed |= 1u << f->c[i].slot;
        if (e == 0 || e == OL_DRIVE_SUPERSEDED)
            durable_slots |= 1u << f->c[i].slot;
        durable += e == 0 || e == OL_DRIVE_SUPERSEDED;
        full += e == -ENOSPC;
        unsupported += e == -EOPNOTSUPP;
    }
    fan_unref(f);
    f = NULL;
    if (durable < es->quorum) {
        copy_fan_vid(es, bucket, key, klen, &sm->vid, FAN_DELETE, committed);
        rc = unsupported ? -EOPNOTSUPP : full > 0 ? -ENOSPC : -OL_EQUORUM;
        goto out;
    }
    /* Phase 2, as a PUT's; a drive that missed the copy (it lacked the
     * source's shard, or failed) gets its shard from a heal, rebuilt with
     * the version's own rotation. */
    copy_fan_vid(es, bucket, key, klen, &sm->vid, FAN_MARK, committed);
    note_missed(es, bucket, key, klen, durable_slots);
    sm->shard = 0;
    obj_from_meta(sm, durable, out);
    rc = 0;
out:
    atomic_fetch_add(&es->st.copies, 1);
    if (rc < 0)
        atomic_fetch_add(&es->st.copies_failed, 1);
    res_free(r);
    free(cs);
    return rc;
}

/* ---- a GET's reader (ec/eset.h, ol_eset_reader_*) ----
 *
 * Keeps the resolution of ol_eset_stat_meta: a GET asks every drive for its
 * versions once, not once more per read step.  The zero-copy path hands out
 * the file of one data shard's drive reader for a piece inside one stripe
 * unit; anything it cannot serve (degraded, not cached, a failed check) is
 * left to reader_read, which rebuilds and reports as ol_eset_read does. */

struct ol_eset_reader {
    struct ol_eset *es;
    struct eset_res *r;
    struct ol_ec_layout l;
    bool heal_done; /* heal-on-read was done once */
    bool counted;   /* a mapped piece counted the reader's read */
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    size_t klen;
    /* Drive readers by shard (reader_pin, at open): every data shard, and
     * as many parity shards as data shards went without one.  NULL: no
     * reader (the copy path by version id, or not needed). */
    void *h[OL_EC_MAX_UNITS];
    char key[];
};

/* Opens a drive reader for shard j: 1, 0 when its drive has none for it
 * (no readers, not a holder, failed), -1 when the shard is gone from a drive
 * that held it (a newer version's mark freed it). */
static int pin_one(struct ol_eset_reader *rd, unsigned j)
{
    struct ol_eset *es = rd->es;
    const struct eset_res *r = rd->r;
    unsigned s = slot_of(es, r->win.rotation, j);
    const struct ol_drive *d = &es->drive[s];
    /* A drive not asked yet (resolved from the first answers) may hold the
     * shard too: its reader says. */
    if (!((r->have | r->unasked) & (1u << s)) || !d->ops->reader_open || !d->ops->reader_read)
        return 0;
    int rc = d->ops->reader_open(d->d, rd->bucket, rd->key, rd->klen, &r->win.vid, &rd->h[j]);
    if (rc < 0) {
        rd->h[j] = NULL;
        return rc == -OL_ENOKEY ? -1 : 0;
    }
    return 1;
}

/* Opens the drive reader of every data shard, and of one parity shard for
 * each data shard without one (its drive lacks the shard, or a newer
 * version's mark freed it since the versions answers).  From then on the
 * bytes stay readable through them even when a newer version frees this
 * one on every drive (ec/drive.h, reader_read): a GET that began on a
 * version ends on it, as on one drive, instead of breaking off mid-body.
 * Drives without readers (memory, remote) keep the copy path only.
 * Returns whether to resolve again: fewer than k shards pinned and one was
 * freed since the answers. */
static bool reader_pin(struct ol_eset_reader *rd)
{
    struct ol_eset *es = rd->es;
    const struct eset_res *r = rd->r;
    if (r->win.size == 0)
        return false;
    unsigned missing = 0, inline_ = 0, gone = 0;
    for (unsigned j = 0; j < es->k; j++) {
        if (res_shard(r, &rd->l, slot_of(es, r->win.rotation, j))) {
            inline_++;
            continue;
        }
        int p = pin_one(rd, j);
        missing += p <= 0;
        gone += p < 0;
    }
    /* Shards that came with the answers are read from memory (read_inline
     * when all did, read_res when not); a degraded read of them keeps the
     * copy path. */
    if (inline_ > 0)
        return false;
    for (unsigned j = es->k; j < es->n && missing > 0; j++) {
        int p = pin_one(rd, j);
        missing -= p > 0;
        gone += p < 0;
    }
    return missing > 0 && gone > 0;
}

/* Closes the pinned readers and forgets the resolution. */
static void reader_unpin(struct ol_eset_reader *rd)
{
    for (unsigned j = 0; j < rd->es->n; j++) {
        if (rd->h[j] && rd->r) {
            const struct ol_drive *d = &rd->es->drive[slot_of(rd->es, rd->r->win.rotation, j)];
            d->ops->reader_close(rd->h[j]);
        }
        rd->h[j] = NULL;
    }
    res_free(rd->r);
    rd->r = NULL;
}

int ol_eset_reader_open(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *vid, struct ol_eset_obj *out, void *buf,
                        size_t cap, size_t *len, struct ol_eset_reader **rdp)
{
    if (!valid_name(bucket, klen))
        return -EINVAL;
    struct ol_eset_reader *rd = calloc(1, sizeof(*rd) + klen);
    if (!rd)
        return -ENOMEM;
    rd->es = es;
    snprintf(rd->bucket, sizeof(rd->bucket), "%s", bucket);
    memcpy(rd->key, key, klen);
    rd->klen = klen;
    int rc = 0;
    /* The current version can be replaced, and freed by the new one's mark,
     * between the versions answers and the pins: with fewer than k shards
     * pinned, resolve again (no byte has been served yet).  A named version
     * is read as it is. */
    for (unsigned attempt = 0; attempt < 3; attempt++) {
        if (rd->r)
            reader_unpin(rd);
        struct eset_res *r = NULL;
        rc = stat_meta_res(es, bucket, key, klen, vid, true, out, buf, cap, len, &r);
        rd->r = r;
        if (rc < 0)
            break;
        rc = ol_ec_layout_init(&rd->l, r->win.size, r->win.unit_bytes, es->k);
        if (rc < 0)
            break;
        /* The blobs came with the versions answers: not needed any more.
         * The winner's shard bytes that came with them are kept for the
         * reads. */
        for (unsigned s = 0; s < OL_EC_MAX_UNITS; s++) {
            if (res_shard(r, &rd->l, s))
                continue;
            blob_free(r->blob_buf[s], r->blob_bytes[s]);
            r->blob_buf[s] = NULL;
            r->blob[s].got = r->blob[s].shard_got = false;
        }
        if (!reader_pin(rd) || vid)
            break;
    }
    if (rc < 0) {
        if (rd->r)
            reader_unpin(rd);
        free(rd);
        return rc;
    }
    *rdp = rd;
    return 0;
}

/* Reads [off, off + len) through the pinned data shard readers, piece by
 * piece: 0, or < 0 when a piece's shard has no reader or its read failed. */
static int reader_read_pinned(struct ol_eset_reader *rd, uint64_t off, size_t len, uint8_t *dst)
{
    struct ol_eset *es = rd->es;
    const struct eset_res *r = rd->r;
    /* Every data shard the range touches needs its reader, checked before
     * any byte is read (a degraded read rebuilds the whole range). */
    for (unsigned j = 0; j < es->k; j++) {
        uint64_t so, sl;
        if (ol_ec_layout_shard_span(&rd->l, off, len, j, &so, &sl) < 0 || (sl && !rd->h[j]))
            return -EAGAIN;
    }
    struct ol_ec_piece pc;
    uint64_t end = off + len;
    for (uint64_t o = off; o < end; o += pc.len) {
        if (ol_ec_layout_piece(&rd->l, o, end, &pc) < 0 || pc.shard >= es->k)
            return -EAGAIN;
        /* pin_one opens readers only on drives with reader_read. */
        const struct ol_drive *d = &es->drive[slot_of(es, r->win.rotation, pc.shard)];
        int rc = d->ops->reader_read(rd->h[pc.shard], pc.shard_off, (size_t)pc.len,
                                     dst + (o - off));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Degraded, through the pinned readers only: the data shards [off, off +
 * len) touches are rebuilt over the union U of their spans from the same
 * span of k pinned shards (data first).  0, or < 0 when fewer than k pinned
 * shards read (the caller goes by version id). */
static int reader_read_rebuild(struct ol_eset_reader *rd, uint64_t off, size_t len, uint8_t *dst)
{
    struct ol_eset *es = rd->es;
    const struct eset_res *r = rd->r;
    uint8_t *ubuf[OL_EC_MAX_UNITS] = {0};
    uint64_t ua = UINT64_MAX, ub = 0;
    for (unsigned j = 0; j < es->k; j++) {
        uint64_t so, sl;
        int rc = ol_ec_layout_shard_span(&rd->l, off, len, j, &so, &sl);
        OL_ASSERT(rc == 0);
        if (sl == 0)
            continue;
        ua = so < ua ? so : ua;
        ub = so + sl > ub ? so + sl : ub;
    }
    if (ub <= ua)
        return -EAGAIN;
    size_t ulen = (size_t)(ub - ua);
    uint32_t present = 0, want = 0;
    int rc = 0;
    for (unsigned i = 0; i < es->n && popcount(present) < es->k; i++) {
        if (!rd->h[i])
            continue;
        const struct ol_drive *d = &es->drive[slot_of(es, r->win.rotation, i)];
        ubuf[i] = malloc(ulen);
        if (!ubuf[i]) {
            rc = -ENOMEM;
            goto out;
        }
        if (d->ops->reader_read(rd->h[i], ua, ulen, ubuf[i]) == 0)
            present |= 1u << i;
    }
    if (popcount(present) < es->k) {
        rc = -EAGAIN;
        goto out;
    }
    for (unsigned j = 0; j < es->k; j++) {
        if (present & (1u << j))
            continue;
        if (!ubuf[j] && !(ubuf[j] = malloc(ulen))) {
            rc = -ENOMEM;
            goto out;
        }
        want |= 1u << j;
    }
    rc = rebuild_units(es, ulen, ubuf, present, want);
    if (rc == 0) {
        uint64_t base[OL_EC_MAX_UNITS];
        for (unsigned j = 0; j < es->k; j++)
            base[j] = ua;
        gather(&rd->l, off, len, ubuf, base, dst);
    }
out:
    for (unsigned i = 0; i < es->n; i++)
        free(ubuf[i]);
    return rc;
}

/* After bytes were served: heal-on-read, once per reader, as ol_eset_read
 * does for a pinned version (a heal resolves afresh: it must heal the
 * newest readable version).  A read that found nothing to heal does not use
 * up the heal: a later one may meet a rotted piece (the mapped pieces
 * before it were not checked by read_res, or not at all: a sealed map). */
static void reader_heal(struct ol_eset_reader *rd, bool heal)
{
    struct ol_eset *es = rd->es;
    struct eset_res *r = rd->r;
    if (rd->heal_done)
        return;
    heal |= (r->answered & ~r->have) != 0;
    if (!es->heal_on_read || !heal)
        return;
    rd->heal_done = true;
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    int e = ol_eset_heal_object(es, rd->bucket, rd->key, rd->klen, &hs);
    if (e == 0 && hs.shards_rebuilt > 0) {
        atomic_fetch_add(&es->st.heals_on_read, 1);
        atomic_fetch_add(&es->st.shards_healed_on_read, hs.shards_rebuilt);
    }
}

int ol_eset_reader_read(struct ol_eset_reader *rd, uint64_t off, size_t len, void *buf)
{
    struct ol_eset *es = rd->es;
    struct eset_res *r = rd->r;
    if (off > r->win.size || len > r->win.size - off)
        return -EINVAL;
    bool heal = false;
    int rc = 0;
    if (len) {
        /* Healthy: straight through the data shards' pinned readers, as
         * the zero-copy path serves its pieces.  A data shard without a
         * reader, or whose read failed: rebuilt from the pinned shards (the
         * version stays readable even once freed); fewer than k of them:
         * by version id, which rebuilds and reports for the heal. */
        rc = reader_read_pinned(rd, off, len, buf);
        if (rc < 0) {
            heal |= rc != -EAGAIN && healable(rc);
            rc = reader_read_rebuild(rd, off, len, buf);
        }
        if (rc < 0)
            rc = read_res(es, rd->bucket, rd->key, rd->klen, r, off, len, buf, &heal);
    }
    if (rc == -OL_EQUORUM && r->unasked) {
        /* Resolved from max(k, m) drives and a shard failed: the others
         * hold the parity that rebuilds it. */
        rc = res_complete(es, rd->bucket, rd->key, rd->klen, r);
        if (rc == 0)
            rc = read_res(es, rd->bucket, rd->key, rd->klen, r, off, len, buf, &heal);
    }
    if (rc < 0)
        return rc;
    atomic_fetch_add(&es->st.reads, 1);
    reader_heal(rd, heal);
    return 0;
}

/* The local data shard's reader holding byte off, and where in it: for
 * ol_eset_reader_file and ol_eset_reader_map.  NULL when that shard has no
 * healthy local reader (the caller answers -EAGAIN). */
static void *reader_piece(struct ol_eset_reader *rd, uint64_t off, size_t max,
                          const struct ol_drive **dout, struct ol_ec_piece *pc)
{
    struct ol_eset *es = rd->es;
    const struct eset_res *r = rd->r;
    if (off >= r->win.size || max == 0)
        return NULL;
    uint64_t end = max < r->win.size - off ? off + max : r->win.size;
    if (ol_ec_layout_piece(&rd->l, off, end, pc) < 0 || pc->shard >= es->k)
        return NULL;
    unsigned j = pc->shard, s = slot_of(es, r->win.rotation, j);
    const struct ol_drive *d = &es->drive[s];
    /* The readers were opened with the reader (reader_pin). */
    if (!rd->h[j])
        return NULL;
    *dout = d;
    return rd->h[j];
}

/* A piece went out without ol_eset_reader_read: count the read and heal as
 * that would, once per reader. */
static void reader_served(struct ol_eset_reader *rd)
{
    if (!rd->counted) {
        rd->counted = true;
        atomic_fetch_add(&rd->es->st.reads, 1);
        reader_heal(rd, false);
    }
}

ssize_t ol_eset_reader_file(struct ol_eset_reader *rd, uint64_t off, size_t max, int *fd,
                            uint64_t *foff)
{
    const struct ol_drive *d;
    struct ol_ec_piece pc;
    void *h = reader_piece(rd, off, max, &d, &pc);
    if (!h)
        return -EAGAIN;
    ssize_t n = d->ops->reader_file(h, pc.shard_off, (size_t)pc.len, fd, foff);
    if (n <= 0)
        return -EAGAIN;
    reader_served(rd);
    return n;
}

ssize_t ol_eset_reader_map(struct ol_eset_reader *rd, uint64_t off, size_t max, bool check,
                           const uint8_t **data)
{
    const struct ol_drive *d;
    struct ol_ec_piece pc;
    void *h = reader_piece(rd, off, max, &d, &pc);
    if (!h || !d->ops->reader_map)
        return -EAGAIN;
    ssize_t n = d->ops->reader_map(h, pc.shard_off, (size_t)pc.len, check, data);
    if (n <= 0)
        return -EAGAIN;
    reader_served(rd);
    return n;
}

void ol_eset_reader_geom(const struct ol_eset_reader *rd, struct ol_eset_geom *out)
{
    const struct ol_shard_meta *w = &rd->r->win;
    memset(out, 0, sizeof(*out));
    out->vid = w->vid;
    out->k = w->k;
    out->m = w->m;
    out->rotation = w->rotation;
    out->unit_bytes = w->unit_bytes;
    out->size = w->size;
    out->have = rd->r->have;
    out->unasked = rd->r->unasked;
}

void ol_eset_reader_close(struct ol_eset_reader *rd)
{
    if (!rd)
        return;
    reader_unpin(rd);
    free(rd);
}
