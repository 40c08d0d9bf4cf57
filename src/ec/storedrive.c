/* An erasure-set drive over one local store: see ec/storedrive.h.
 *
 * Entry meta blob of a shard version (little-endian, docs/FORMAT.md):
 *   "OLS1" vid[16] k m shard rotation flags unit_bytes:u32 size:u64
 *   mtime_ns:i64 etag_len:u8 etag[etag_len]
 * or, for a version with a metadata blob, "OLS2" and the same fields
 * followed by meta_stamp:u64 meta_crc:u32 meta_len:u32 meta[meta_len].
 * The store's own fields of the entry (size, etag, mtime) are the shard's
 * length, "" and the object's mtime; the drive ignores them.
 *
 * flags: bit 1 DELETE_MARKER, bit 0 COMPLETE (the stored phase-2 mark), bit 7
 * EXPLICIT (the entry carries the mark in bit 0).  Entries written before the
 * mark was stored lack EXPLICIT: they are COMPLETE when no older version of
 * the key is on the drive (the old, derived rule).  mark_complete sets the
 * mark in place: it patches the flags byte of the shard's store version
 * (ol_store_patch_meta_v, one put of the same index key, conditional on the
 * byte it scanned) and, in the same index commit, deletes the other copies
 * of the vid and the older versions it frees; a crash leaves the mark and
 * the deletes together or neither.  set_meta copies the shard version onto
 * its own key by reference with the new meta blob (one atomic store write,
 * no data copied), on condition that the flags byte is still the one it
 * scanned (so it never copies a mark back to unset), then deletes the older
 * copies: a crash in between leaves two copies of one vid.  Of several
 * copies of one vid the one reported is the one whose blob wins
 * (ol_shard_meta_newer), and among equal blobs the most recently written.
 * Each of these deletes only copies it saw before writing, so of two racing
 * writers at least one copy stays.  (Entries marked before the in-place
 * mark was a second, newer copy of the version; they read the same.) */
#include "ec/storedrive.h"

#include "core/crc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/locktab.h"
#include "store/store.h"

enum {
    SD_SCAN_MAX = 4096,        /* store versions of one key a scan looks at */
    SD_SCAN_INLINE = 4,        /* versions a scan holds without allocating (then doubles) */
    SD_META_MIN = 4 + 16 + 5 + 4 + 8 + 8 + 1,
    SD_META_HEAD_MAX = SD_META_MIN + 63,
    SD_META_TAIL = 8 + 4 + 4, /* OLS2: stamp, crc, length of the blob */
    SD_META_FLAGS_AT = 4 + 16 + 4, /* the flags byte: after magic, vid, k m shard rotation */
    SD_META_MAX = SD_META_HEAD_MAX + SD_META_TAIL + OL_DRIVE_META_MAX,
    SD_LIST_SCAN_MAX = 1u << 20, /* store versions one list_keys call looks at */
};

enum {
    SD_FLAG_EXPLICIT = 1u << 7, /* meta blob flags: the COMPLETE bit is stored */
    SD_FLAG_MASK =
        OL_SHARD_DELETE_MARKER | OL_SHARD_COMPLETE | OL_SHARD_KEEP_OLDER | OL_SHARD_NULL,
};

enum {
    SD_MAX_OWNED = 16, /* stores a drive may open itself (replaced directories) */
    SD_PATH_MAX = 4096,
    SD_WHY_MAX = 512,  /* a refusal message */
};

enum {
    SD_SHAPE_BUCKETS_MAX = 4096, /* buckets ol_storedrive_holds_shards looks at */
    SD_SHAPE_VERSIONS = 8,       /* entries it decodes per bucket */
};

const uint8_t ol_storedrive_legacy_id[16] = "openlake-ec-dep1";

struct ol_storedrive {
    _Atomic(struct ol_store *) st;
    atomic_bool offline; /* the admin's switch */
    atomic_int state;    /* OL_SD_ONLINE, OL_SD_OFFLINE, OL_SD_FULL */
    atomic_uint errors;  /* consecutive drive failures */
    atomic_uint backoff_ms;
    _Atomic uint64_t retry_at_ms;
    atomic_int last_err;
    struct ol_storedrive_policy pol;
    struct {
        _Atomic uint64_t failures, offline_events, online_events, reopens, probes;
    } n;
    atomic_bool came_back; /* consumed by ol_storedrive_take_came_back */
    /* Identity of the directory (set_path): the FORMAT file's device and
     * inode.  Only the thread that calls ol_storedrive_check touches these. */
    char *path;
    struct ol_store_opts opts;
    bool have_id;
    dev_t dev;
    ino_t ino;
    struct ol_store *owned[SD_MAX_OWNED]; /* closed by destroy */
    unsigned nowned;
    /* The membership a store opened by the monitor must pass (set_member),
     * and the last refusal logged (so a drive that keeps failing the check
     * is logged once, not at every probe). */
    bool have_member;
    struct ol_storedrive_member member;
    char refused[SD_WHY_MAX];
    /* drive.h's locks: memory only, shared by the local set and the drive
     * server's peers (they call this same drive). */
    struct ol_locktab *locks;
};

struct sd_writer {
    struct ol_storedrive *sd;
    struct ol_store_writer *w;
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    size_t klen;
    char key[OL_DRIVE_MAX_KEY];
};

/* One store version of a key, decoded. */
struct sd_ver {
    char svid[OL_STORE_VID_MAX];
    struct ol_shard_meta sm;
    bool legacy;     /* written before the COMPLETE mark was stored */
    uint8_t flags_b; /* the flags byte as stored (the mark patches it) */
};

/* ---- the meta blob ---- */

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Encodes the entry meta blob of sm with the version's blob (meta,
 * sm->meta_len bytes, sm->meta_stamp, sm->meta_crc) into out (SD_META_MAX
 * bytes). */
static size_t meta_encode(const struct ol_shard_meta *sm, const void *meta, uint8_t *out)
{
    size_t el = strnlen(sm->etag, sizeof(sm->etag) - 1);
    uint8_t *p = out;
    memcpy(p, sm->meta_len ? "OLS2" : "OLS1", 4);
    p += 4;
    memcpy(p, sm->vid.b, 16);
    p += 16;
    *p++ = sm->k;
    *p++ = sm->m;
    *p++ = sm->shard;
    *p++ = sm->rotation;
    *p++ = (uint8_t)((sm->flags & SD_FLAG_MASK) | SD_FLAG_EXPLICIT);
    put_le(p, sm->unit_bytes, 4);
    p += 4;
    put_le(p, sm->size, 8);
    p += 8;
    put_le(p, (uint64_t)sm->mtime_ns, 8);
    p += 8;
    *p++ = (uint8_t)el;
    memcpy(p, sm->etag, el);
    p += el;
    if (sm->meta_len) {
        OL_ASSERT(sm->meta_len <= OL_DRIVE_META_MAX);
        put_le(p, sm->meta_stamp, 8);
        p += 8;
        put_le(p, sm->meta_crc, 4);
        p += 4;
        put_le(p, sm->meta_len, 4);
        p += 4;
        memcpy(p, meta, sm->meta_len);
        p += sm->meta_len;
    }
    return (size_t)(p - out);
}

/* Decodes a meta blob; *legacy (may be NULL) says the blob predates the
 * stored COMPLETE mark (its COMPLETE bit then means nothing); *meta (may be
 * NULL) gets the version's blob inside b (sm->meta_len bytes). */
static int meta_decode(const uint8_t *b, size_t len, struct ol_shard_meta *sm, bool *legacy,
                       const uint8_t **meta)
{
    if (!b || len < SD_META_MIN)
        return -OL_ECORRUPT;
    bool v2 = memcmp(b, "OLS2", 4) == 0;
    if (!v2 && memcmp(b, "OLS1", 4) != 0)
        return -OL_ECORRUPT;
    memset(sm, 0, sizeof(*sm));
    const uint8_t *p = b + 4;
    memcpy(sm->vid.b, p, 16);
    p += 16;
    sm->k = *p++;
    sm->m = *p++;
    sm->shard = *p++;
    sm->rotation = *p++;
    uint8_t fl = *p++;
    sm->flags = fl & SD_FLAG_MASK;
    if (!(fl & SD_FLAG_EXPLICIT))
        sm->flags &= (uint8_t)~OL_SHARD_COMPLETE;
    if (legacy)
        *legacy = !(fl & SD_FLAG_EXPLICIT);
    sm->unit_bytes = (uint32_t)get_le(p, 4);
    p += 4;
    sm->size = get_le(p, 8);
    p += 8;
    sm->mtime_ns = (int64_t)get_le(p, 8);
    p += 8;
    size_t el = *p++;
    if (el > sizeof(sm->etag) - 1 || (size_t)(p - b) + el > len)
        return -OL_ECORRUPT;
    memcpy(sm->etag, p, el);
    p += el;
    size_t rest = len - (size_t)(p - b);
    if (meta)
        *meta = NULL;
    if (!v2)
        return rest == 0 ? 0 : -OL_ECORRUPT;
    if (rest < SD_META_TAIL)
        return -OL_ECORRUPT;
    sm->meta_stamp = get_le(p, 8);
    sm->meta_crc = (uint32_t)get_le(p + 8, 4);
    sm->meta_len = (uint32_t)get_le(p + 12, 4);
    if (sm->meta_len > OL_DRIVE_META_MAX || rest - SD_META_TAIL != sm->meta_len)
        return -OL_ECORRUPT;
    if (meta)
        *meta = p + SD_META_TAIL;
    return 0;
}

/* ---- helpers ---- */

/* ---- drive states (docs/EC.md, section 5.5) ---- */

static uint64_t now_ms(void)
{
    return ol_now_ms();
}

/* Whether an error says the drive itself is failing (as opposed to an answer
 * about the data: no such key, a corrupt block, a bad argument). */
static bool drive_failure(int rc)
{
    switch (-rc) {
    case EIO:
    case EROFS:
    case ENOENT:
    case ENOTDIR:
    case ETIMEDOUT:
    case EBADF:
    case ESTALE:
    case ENXIO:
    case ENODEV:
    case EACCES:
    case EPERM:
    case OL_EFORMAT:
        return true;
    default:
        return false;
    }
}

static void go_offline(struct ol_storedrive *sd, int why)
{
    int was = atomic_exchange(&sd->state, OL_SD_OFFLINE);
    atomic_store(&sd->last_err, why);
    if (was == OL_SD_OFFLINE)
        return;
    atomic_store(&sd->backoff_ms, sd->pol.backoff_min_ms);
    atomic_store(&sd->retry_at_ms, now_ms() + sd->pol.backoff_min_ms);
    atomic_fetch_add(&sd->n.offline_events, 1);
    ol_warn("ec drive %s: offline (%s)", sd->path ? sd->path : "?", ol_strerror(why));
}

/* Records the outcome of a drive call; returns rc. */
static int sd_note(struct ol_storedrive *sd, int rc)
{
    if (rc == -ENOSPC || rc == -EDQUOT) {
        /* Full: writes are refused without trying until the backoff ends; the
         * next write after it is the probe.  Reads go on. */
        unsigned b = atomic_load(&sd->backoff_ms);
        if (atomic_exchange(&sd->state, OL_SD_FULL) != OL_SD_FULL)
            b = sd->pol.backoff_min_ms;
        else
            b = b * 2 > sd->pol.backoff_max_ms ? sd->pol.backoff_max_ms : b * 2;
        atomic_store(&sd->backoff_ms, b);
        atomic_store(&sd->retry_at_ms, now_ms() + b);
        atomic_store(&sd->last_err, rc);
        return -ENOSPC;
    }
    if (drive_failure(rc)) {
        atomic_fetch_add(&sd->n.failures, 1);
        atomic_store(&sd->last_err, rc);
        if (atomic_fetch_add(&sd->errors, 1) + 1 >= sd->pol.fail_after)
            go_offline(sd, rc);
        return rc;
    }
    atomic_store(&sd->errors, 0);
    return rc;
}

/* The store to use for a call, or NULL when the drive is out (the caller
 * answers -EIO at once: an offline drive costs no waiting). */
static struct ol_store *sd_store(struct ol_storedrive *sd)
{
    if (atomic_load(&sd->offline) || atomic_load(&sd->state) == OL_SD_OFFLINE)
        return NULL;
    return atomic_load(&sd->st);
}

/* As sd_store, for calls that write: a full drive refuses them (-ENOSPC)
 * until its backoff ends. */
static int sd_store_w(struct ol_storedrive *sd, struct ol_store **st)
{
    *st = sd_store(sd);
    if (!*st)
        return -EIO;
    if (atomic_load(&sd->state) == OL_SD_FULL && now_ms() < atomic_load(&sd->retry_at_ms))
        return -ENOSPC;
    return 0;
}

/* A write that worked on a full drive ends the FULL state. */
static void sd_wrote(struct ol_storedrive *sd)
{
    int full = OL_SD_FULL;
    if (atomic_compare_exchange_strong(&sd->state, &full, OL_SD_ONLINE))
        atomic_store(&sd->backoff_ms, sd->pol.backoff_min_ms);
}

/* Store versions of one key, decoded (store order: newest written first). */
struct sd_scan {
    struct sd_ver *v; /* first, or allocated when more came */
    int n, cap;
    int blob_at; /* the copy whose blob versions() answers, or -1 */
    /* A key's first few versions, without an allocation: a drive holds one
     * or two of most keys (a mark frees the older ones). */
    struct sd_ver first[SD_SCAN_INLINE];
};

static void scan_free(struct sd_scan *sc)
{
    if (sc->v != sc->first)
        free(sc->v);
    sc->v = NULL;
    sc->n = sc->cap = 0;
}

/* Whether copy x of a version is reported rather than copy y written after
 * it (y comes first in the scan): the winning blob, else the later write. */
static bool copy_wins(const struct ol_shard_meta *x, const struct ol_shard_meta *y)
{
    return ol_shard_meta_newer(x->meta_stamp, x->meta_crc, y->meta_stamp, y->meta_crc);
}

/* Offers a decoded entry to a blob request: taken when it is the version
 * asked for (or, want NULL, a newer one than taken so far) and its blob wins
 * over the copy taken. */
static bool blob_offer(struct ol_drive_blob *bl, const struct ol_shard_meta *sm,
                       const uint8_t *meta, bool *taken)
{
    if (bl->want && ol_version_id_cmp(&sm->vid, bl->want) != 0)
        return false;
    if (*taken) {
        int c = ol_version_id_cmp(&sm->vid, &bl->sm.vid);
        if (c < 0 || (c == 0 && !copy_wins(sm, &bl->sm)))
            return false;
    }
    *taken = true;
    bl->sm = *sm;
    bl->len = sm->meta_len;
    bl->got = sm->meta_len > 0 && sm->meta_len <= bl->cap;
    if (bl->got)
        memcpy(bl->buf, meta, sm->meta_len);
    return true;
}

/* versions()'s shard bytes (struct ol_drive_blob): the whole shard of the
 * copy blob_offer just took, when the store keeps it in the index entry
 * (inline_bytes: the small shards this is for) and it fits the caller's
 * room; checked here, as a store read would.  Taken during the scan, so the
 * small GET costs no second index lookup.  Anything else leaves shard_got
 * false: the set then reads with read_shard, which reports what is wrong. */
static void blob_shard(struct ol_drive_blob *bl, const struct ol_shard_meta *sm,
                       const struct ol_version_info *vi)
{
    bl->shard_got = false;
    bl->shard_len = 0;
    if (!bl->shard_buf || !bl->shard_cap || (sm->flags & OL_SHARD_DELETE_MARKER) ||
        sm->k == 0 || sm->size > (uint64_t)sm->k * bl->shard_cap || !vi->inline_data ||
        vi->info.size > bl->shard_cap ||
        ol_crc32c(vi->inline_data, (size_t)vi->info.size) != vi->inline_crc)
        return;
    memcpy(bl->shard_buf, vi->inline_data, (size_t)vi->info.size);
    bl->shard_got = true;
    bl->shard_len = (size_t)vi->info.size;
}

/* scan()'s walk over the store versions of one key. */
struct scan_ctx {
    struct sd_scan *sc;
    const struct ol_version_id *stop;
    struct ol_drive_blob *blob;
    bool taken;
};

static int scan_one(void *arg, const struct ol_version_info *vi)
{
    struct scan_ctx *x = arg;
    struct sd_scan *sc = x->sc;
    if (sc->n >= SD_SCAN_MAX)
        return 1;
    if (sc->n == sc->cap) {
        int ncap = sc->cap * 2;
        bool moved = sc->v == sc->first;
        struct sd_ver *nv = realloc(moved ? NULL : sc->v, sizeof(*nv) * (size_t)ncap);
        if (!nv)
            return -ENOMEM;
        if (moved)
            memcpy(nv, sc->first, sizeof(sc->first));
        sc->v = nv;
        sc->cap = ncap;
    }
    struct sd_ver *v = &sc->v[sc->n];
    const uint8_t *meta;
    if (vi->is_marker ||
        meta_decode(vi->info.meta, vi->info.meta_len, &v->sm, &v->legacy, &meta) != 0)
        return 0;
    memcpy(v->svid, vi->vid, sizeof(v->svid));
    v->flags_b = vi->info.meta[SD_META_FLAGS_AT];
    sc->n++;
    if (x->blob && blob_offer(x->blob, &v->sm, meta, &x->taken)) {
        sc->blob_at = sc->n - 1;
        blob_shard(x->blob, &v->sm, vi);
    }
    return x->stop && ol_version_id_cmp(&v->sm.vid, x->stop) == 0;
}

/* Scans the store versions of one key (at most SD_SCAN_MAX) into sc (freed
 * by the caller, also on error); entries that are not shard versions are
 * skipped.  stop (may be NULL): ends at the first copy of that vid.  blob
 * (may be NULL) is served on the way.  Returns the count, or an error (a
 * missing bucket reads as no versions). */
static int scan(struct ol_store *st, const char *bucket, const char *key, size_t klen,
                struct sd_scan *sc, const struct ol_version_id *stop, struct ol_drive_blob *blob)
{
    sc->v = sc->first;
    sc->n = 0;
    sc->cap = SD_SCAN_INLINE;
    sc->blob_at = -1;
    if (blob) {
        blob->got = false;
        blob->len = 0;
        blob->shard_got = false;
        blob->shard_len = 0;
        memset(&blob->sm, 0, sizeof(blob->sm));
    }
    struct scan_ctx x = {.sc = sc, .stop = stop, .blob = blob};
    int rc = ol_store_key_versions(st, bucket, key, klen, scan_one, &x);
    return rc < 0 ? rc : sc->n;
}

/* The copy of vid reported (see the top of this file), or -1. */
static int pick(const struct sd_scan *sc, const struct ol_version_id *vid)
{
    int at = -1;
    for (int i = 0; i < sc->n; i++)
        if (ol_version_id_cmp(&sc->v[i].sm.vid, vid) == 0 &&
            (at < 0 || copy_wins(&sc->v[i].sm, &sc->v[at].sm)))
            at = i;
    return at;
}

static int ver_desc(const void *a, const void *b)
{
    const struct ol_shard_meta *x = a, *y = b;
    return -ol_version_id_cmp(&x->vid, &y->vid);
}

/* Turns a scan into the drive's answer: one entry per eset vid (the copy
 * reported, see pick), newest vid first, COMPLETE as stored; an entry from
 * before the stored mark (legacy) is COMPLETE when it is the oldest version,
 * as that format defined it.  out has room for sc->n.  Returns the count. */
static int distinct(const struct sd_scan *sc, struct ol_shard_meta *out)
{
    int m = 0;
    bool legacy_s[SD_SCAN_INLINE];
    bool *legacy = sc->n <= SD_SCAN_INLINE ? legacy_s : malloc(sizeof(bool) * (size_t)sc->n);
    if (!legacy)
        return -ENOMEM;
    for (int i = 0; i < sc->n; i++) {
        const struct sd_ver *v = &sc->v[i];
        int j = 0;
        while (j < m && ol_version_id_cmp(&out[j].vid, &v->sm.vid) != 0)
            j++;
        if (j < m && !copy_wins(&v->sm, &out[j]))
            continue;
        legacy[j] = v->legacy;
        out[j] = v->sm;
        m += j == m;
    }
    int oldest = -1;
    for (int j = 0; j < m; j++)
        if (oldest < 0 || ol_version_id_cmp(&out[j].vid, &out[oldest].vid) < 0)
            oldest = j;
    if (oldest >= 0 && legacy[oldest])
        out[oldest].flags |= OL_SHARD_COMPLETE;
    if (legacy != legacy_s)
        free(legacy);
    qsort(out, (size_t)m, sizeof(out[0]), ver_desc);
    return m;
}

static int ensure_bucket(struct ol_store *st, const char *bucket)
{
    struct ol_bucket_info bi;
    int rc = ol_store_bucket_get(st, bucket, &bi);
    if (rc == -OL_ENOBUCKET) {
        rc = ol_store_bucket_create(st, bucket, 0);
        if (rc == -EEXIST || rc == -OL_EBUCKETEXISTS)
            rc = 0;
    }
    if (rc < 0)
        return rc;
    enum ol_versioning v;
    rc = ol_store_versioning_get(st, bucket, &v);
    if (rc == 0 && v != OL_VERSIONING_ENABLED)
        rc = ol_store_versioning_put(st, bucket, OL_VERSIONING_ENABLED);
    return rc;
}

/* ---- the operations ---- */

static int sd_shard_begin(void *d, const char *bucket, const char *key, size_t klen, void **w)
{
    struct ol_storedrive *sd = d;
    struct ol_store *st;
    *w = NULL;
    int rc = sd_store_w(sd, &st);
    if (rc < 0)
        return rc;
    if (klen == 0 || klen > OL_DRIVE_MAX_KEY || strlen(bucket) > OL_DRIVE_MAX_BUCKET)
        return -EINVAL;
    rc = sd_note(sd, ensure_bucket(st, bucket));
    if (rc < 0)
        return rc;
    struct sd_writer *sw = malloc(sizeof(*sw));
    if (!sw)
        return -ENOMEM;
    rc = sd_note(sd, ol_store_write_begin(st, -1, &sw->w));
    if (rc < 0) {
        free(sw);
        return rc;
    }
    sw->sd = sd;
    strcpy(sw->bucket, bucket);
    memcpy(sw->key, key, klen);
    sw->klen = klen;
    *w = sw;
    return 0;
}

static int sd_shard_write(void *w, const void *buf, size_t len)
{
    struct sd_writer *sw = w;
    if (!sd_store(sw->sd))
        return -EIO;
    return sd_note(sw->sd, ol_store_write(sw->w, buf, len));
}

static int sd_shard_commit(void *w, const struct ol_shard_meta *sm, const void *meta,
                           size_t meta_len)
{
    struct sd_writer *sw = w;
    struct ol_store *st = sd_store(sw->sd);
    struct sd_scan sc = {0};
    uint8_t *blob = NULL;
    int rc;
    if (!st || meta_len > OL_DRIVE_META_MAX || (meta_len && !meta)) {
        ol_store_write_abort(sw->w);
        rc = st ? -EINVAL : -EIO;
        goto out;
    }
    blob = malloc(SD_META_HEAD_MAX + SD_META_TAIL + meta_len);
    if (!blob) {
        ol_store_write_abort(sw->w);
        rc = -ENOMEM;
        goto out;
    }
    struct ol_obj_info info = {.mtime_ns = sm->mtime_ns};
    /* Phase 1 only: the mark comes from mark_complete, never from a commit. */
    struct ol_shard_meta unmarked = *sm;
    unmarked.flags &= (uint8_t)~OL_SHARD_COMPLETE;
    unmarked.meta_len = (uint32_t)meta_len;
    unmarked.meta_crc = meta_len ? ol_crc32c(meta, meta_len) : 0;
    info.meta = blob;
    info.meta_len = (uint32_t)meta_encode(&unmarked, meta, blob);
    char svid[OL_STORE_VID_MAX];
    rc = sd_note(sw->sd,
                 ol_store_write_commit_object_v(sw->w, sw->bucket, sw->key, sw->klen, &info,
                                                NULL, svid));
    if (rc < 0)
        goto out;
    sd_wrote(sw->sd);
    /* A heal rewrites a shard under the same vid: the new store version
     * replaces the old one, which goes now.  Only the copies written before
     * this one go (they follow it in the scan's newest-first order): two
     * heals rewriting one shard at once must not delete each other's copy
     * and leave none.  A PUT's freshly minted vid has no such copy to
     * replace (OL_SHARD_HINT_FRESH): no scan, which is a read transaction and
     * a walk of the key's versions on every drive of every PUT. */
    int n = (sm->hint & OL_SHARD_HINT_FRESH) ? 0
                                             : scan(st, sw->bucket, sw->key, sw->klen, &sc, NULL, NULL);
    bool older = false;
    for (int i = 0; i < n; i++) {
        if (strcmp(sc.v[i].svid, svid) == 0) {
            older = true;
            continue;
        }
        if (older && ol_version_id_cmp(&sc.v[i].sm.vid, &sm->vid) == 0)
            (void)ol_store_delete_v(st, sw->bucket, sw->key, sw->klen, sc.v[i].svid, NULL);
    }
    rc = 0;
out:
    scan_free(&sc);
    free(blob);
    free(sw);
    return rc;
}

static void sd_shard_abort(void *w)
{
    struct sd_writer *sw = w;
    ol_store_write_abort(sw->w);
    free(sw);
}

/* Copy by reference: the source shard's store version is copied onto the
 * destination key with ol_store_copy_object_v (its extents are shared, no
 * byte is read or written) and the new version's entry meta.  Phase 1: the
 * entry is written unmarked, as a commit's. */
static int sd_shard_copy(void *d, const char *src_bucket, const char *src_key, size_t src_klen,
                         const struct ol_version_id *src_vid, const char *bucket, const char *key,
                         size_t klen, const struct ol_shard_meta *sm, const void *meta,
                         size_t meta_len)
{
    struct ol_storedrive *sd = d;
    struct ol_store *st;
    struct sd_scan sc = {0};
    uint8_t *blob = NULL;
    int rc = sd_store_w(sd, &st);
    if (rc < 0)
        return rc;
    if (src_klen == 0 || src_klen > OL_DRIVE_MAX_KEY || klen == 0 || klen > OL_DRIVE_MAX_KEY ||
        strlen(src_bucket) > OL_DRIVE_MAX_BUCKET || strlen(bucket) > OL_DRIVE_MAX_BUCKET ||
        meta_len > OL_DRIVE_META_MAX || (meta_len && !meta))
        return -EINVAL;
    rc = ensure_bucket(st, bucket);
    if (rc < 0)
        goto out;
    blob = malloc(SD_META_HEAD_MAX + SD_META_TAIL + meta_len);
    if (!blob) {
        rc = -ENOMEM;
        goto out;
    }
    struct ol_shard_meta unmarked = *sm;
    unmarked.flags &= (uint8_t)~OL_SHARD_COMPLETE;
    unmarked.meta_len = (uint32_t)meta_len;
    unmarked.meta_crc = meta_len ? ol_crc32c(meta, meta_len) : 0;
    struct ol_store_copy_opts o = {
        .replace_meta = true,
        .meta = blob,
        .meta_len = (uint32_t)meta_encode(&unmarked, meta, blob),
        .mtime_ns = sm->mtime_ns,
    };
    /* A second round only when a concurrent rewrite of the source (its
     * mark_complete, a set_meta, a heal) replaced the store version picked. */
    for (unsigned round = 0; round < 3; round++) {
        scan_free(&sc);
        int n = scan(st, src_bucket, src_key, src_klen, &sc, NULL, NULL);
        rc = n < 0 ? n : 0;
        int at = rc == 0 ? pick(&sc, src_vid) : -1;
        if (rc == 0 && at < 0)
            rc = -OL_ENOKEY;
        if (rc < 0)
            break;
        const struct ol_shard_meta *s = &sc.v[at].sm;
        if (s->k != sm->k || s->m != sm->m || s->shard != sm->shard ||
            s->rotation != sm->rotation || s->unit_bytes != sm->unit_bytes || s->size != sm->size) {
            rc = -EINVAL;
            break;
        }
        struct ol_obj_info info;
        char svid[OL_STORE_VID_MAX];
        rc = ol_store_copy_object_v(st, src_bucket, src_key, src_klen, sc.v[at].svid, bucket, key,
                                    klen, &o, &info, svid);
        if (rc != -OL_ENOVERSION)
            break;
        rc = -OL_ENOKEY;
    }
    if (rc == -OL_EMARKER)
        rc = -OL_ENOKEY;
    if (rc == 0)
        sd_wrote(sd);
out:
    free(blob);
    scan_free(&sc);
    return sd_note(sd, rc);
}

/* Rewrites copy v as a new store version with metadata sm (and the blob
 * meta; NULL: v's own) and, once that is done, removes the store versions
 * drop[0..ndrop): queued together, so they share the rewrite's index commit
 * (ol_store_rewrite_v).  drop_rc gets each removal's result.  -EAGAIN when
 * v's flags byte is no longer the one scanned (a mark patched it in place
 * since: copying sm's flags would undo it). */
static int rewrite(struct ol_store *st, const char *bucket, const char *key, size_t klen,
                   const struct sd_ver *v, const struct ol_shard_meta *sm, const void *meta,
                   char svid[OL_STORE_VID_MAX], const char *const *drop, unsigned ndrop,
                   int *drop_rc)
{
    struct ol_store_reader *rd = NULL;
    struct ol_shard_meta nsm = *sm;
    int rc = 0;
    for (unsigned i = 0; i < ndrop; i++)
        drop_rc[i] = -ECANCELED;
    if (!meta && sm->meta_len > 0) {
        /* The blob is not in the scan (which keeps headers only): read the
         * entry back.  A copy whose blob changed since answers -EAGAIN. */
        rc = ol_store_read_open_v(st, bucket, key, klen, v->svid, &rd);
        if (rc < 0)
            return rc == -OL_ENOVERSION || rc == -OL_EMARKER ? -OL_ENOKEY : rc;
        const struct ol_obj_info *in = ol_store_read_info(rd);
        struct ol_shard_meta cur;
        const uint8_t *stored = NULL;
        rc = meta_decode(in->meta, in->meta_len, &cur, NULL, &stored);
        meta = stored;
        if (rc == 0 && (cur.meta_len != sm->meta_len || cur.meta_crc != sm->meta_crc))
            rc = -EAGAIN;
        if (rc < 0)
            goto out;
    }
    uint8_t *blob = malloc(SD_META_HEAD_MAX + SD_META_TAIL + nsm.meta_len);
    if (!blob) {
        rc = -ENOMEM;
        goto out;
    }
    struct ol_store_copy_opts o = {
        .replace_meta = true,
        .meta = blob,
        .meta_len = (uint32_t)meta_encode(&nsm, meta, blob),
        .mtime_ns = nsm.mtime_ns,
        .expect_off = SD_META_FLAGS_AT,
        .expect_len = 1,
        .expect = &v->flags_b,
    };
    unsigned chained = ndrop < OL_STORE_DROP_MAX ? ndrop : OL_STORE_DROP_MAX;
    rc = ol_store_rewrite_v(st, bucket, key, klen, v->svid, &o, svid, drop, chained, drop_rc);
    free(blob);
    for (unsigned i = chained; i < ndrop; i++)
        drop_rc[i] = rc < 0 ? -ECANCELED : ol_store_delete_v(st, bucket, key, klen, drop[i], NULL);
out:
    if (rd)
        ol_store_read_close(rd);
    return rc;
}

static int sd_mark_complete(void *d, const char *bucket, const char *key, size_t klen,
                            const struct ol_version_id *vid)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct sd_scan sc = {0};
    const char **drop = NULL;
    int *drop_rc = NULL;
    unsigned ndrop = 0;
    int n = 0, rc = 0;
    /* A second round only when a concurrent rewrite (heal, set_meta) deleted
     * the copy this one was about to mark, or another mark set it first. */
    for (unsigned round = 0; round < 3; round++) {
        scan_free(&sc);
        n = scan(st, bucket, key, klen, &sc, NULL, NULL);
        if (n < 0) {
            rc = n;
            goto out;
        }
        int at = pick(&sc, vid);
        if (at < 0) {
            /* Gone: fine when a newer complete version freed it. */
            rc = -OL_ENOKEY;
            for (int i = 0; i < n; i++)
                if (ol_version_id_cmp(&sc.v[i].sm.vid, vid) > 0 &&
                    (sc.v[i].sm.flags & OL_SHARD_COMPLETE) &&
                    !(sc.v[i].sm.flags & (OL_SHARD_KEEP_OLDER | OL_SHARD_NULL)))
                    rc = 0;
            goto out;
        }
        struct ol_shard_meta marked = sc.v[at].sm;
        marked.flags |= OL_SHARD_COMPLETE;
        bool done = sc.v[at].sm.flags & OL_SHARD_COMPLETE;
        /* What the mark frees: the other copies of vid and the older
         * versions it replaces (ol_shard_frees).  Copies written after this
         * scan (a heal rewriting the shard) are not in it and stay. */
        free(drop);
        free(drop_rc);
        drop = malloc(sizeof(*drop) * (size_t)n + 1);
        drop_rc = malloc(sizeof(*drop_rc) * (size_t)n + 1);
        if (!drop || !drop_rc) {
            rc = -ENOMEM;
            goto out;
        }
        ndrop = 0;
        for (int i = 0; i < n; i++) {
            int c = ol_version_id_cmp(&sc.v[i].sm.vid, vid);
            if (i == at || c > 0 || (c < 0 && !ol_shard_frees(&marked, &sc.v[i].sm)))
                continue;
            drop[ndrop++] = sc.v[i].svid;
        }
        if (done) {
            /* Marked already (a repeated mark): only the freeing is left. */
            for (unsigned i = 0; i < ndrop; i++)
                drop_rc[i] = ol_store_delete_v(st, bucket, key, klen, drop[i], NULL);
            rc = 0;
            break;
        }
        /* The mark sets the COMPLETE bit (and EXPLICIT: a legacy entry so
         * takes the stored format, with the same bytes meta_encode would
         * write) of the copy's flags byte in place, provided the byte is
         * still the one scanned: one put of the copy's own index key, where
         * a rewrite as a new store version cost a put of the new copy, the
         * old current one moved to the versions DB and its delete.  The
         * copy keeps its store vid and its place among the copies.  The
         * freeing shares the patch's index commit and is applied only once
         * the mark is in. */
        uint8_t was = sc.v[at].flags_b;
        uint8_t now =
            (uint8_t)((marked.flags & SD_FLAG_MASK) | OL_SHARD_COMPLETE | SD_FLAG_EXPLICIT);
        unsigned chained = ndrop < OL_STORE_DROP_MAX ? ndrop : OL_STORE_DROP_MAX;
        rc = ol_store_patch_meta_v(st, bucket, key, klen, sc.v[at].svid, SD_META_FLAGS_AT, &was,
                                   &now, 1, drop, chained, drop_rc);
        for (unsigned i = chained; i < ndrop; i++)
            drop_rc[i] =
                rc < 0 ? -ECANCELED : ol_store_delete_v(st, bucket, key, klen, drop[i], NULL);
        if (rc == -OL_EMARKER)
            rc = -OL_ENOVERSION; /* not a shard version any more: look again */
        if (rc != -OL_ENOVERSION && rc != -OL_ENOKEY && rc != -EAGAIN)
            break;
    }
    for (unsigned i = 0; rc == 0 && i < ndrop; i++)
        if (drop_rc[i] < 0 && drop_rc[i] != -OL_ENOVERSION)
            rc = drop_rc[i];
out:
    free(drop);
    free(drop_rc);
    scan_free(&sc);
    return sd_note(d, rc);
}

static int set_meta_once(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, const void *meta, size_t len,
                         uint64_t stamp)
{
    struct ol_storedrive *sd = d;
    struct ol_store *st;
    int rc = sd_store_w(sd, &st);
    if (rc < 0)
        return rc;
    if (len > OL_DRIVE_META_MAX || (len && !meta))
        return -EINVAL;
    uint32_t crc = len ? ol_crc32c(meta, len) : 0;
    struct sd_scan sc = {0};
    const char **drop = NULL;
    int *drop_rc = NULL;
    char keep[OL_STORE_VID_MAX] = "";
    int n = scan(st, bucket, key, klen, &sc, NULL, NULL);
    rc = n < 0 ? n : 0;
    int at = rc == 0 ? pick(&sc, vid) : -1;
    if (rc == 0 && at < 0)
        rc = -OL_ENOKEY;
    if (rc < 0)
        goto out;
    if (ol_shard_meta_newer(sc.v[at].sm.meta_stamp, sc.v[at].sm.meta_crc, stamp, crc))
        goto out; /* the drive's blob wins already */
    struct ol_shard_meta nsm = sc.v[at].sm;
    nsm.meta_len = (uint32_t)len;
    nsm.meta_crc = crc;
    nsm.meta_stamp = stamp;
    /* Legacy entries are rewritten in the new format: their derived COMPLETE
     * must not be lost by the copy. */
    if (sc.v[at].legacy) {
        struct ol_shard_meta *all = malloc(sizeof(*all) * (size_t)n);
        if (!all) {
            rc = -ENOMEM;
            goto out;
        }
        int m = distinct(&sc, all);
        for (int i = 0; i < m; i++)
            if (ol_version_id_cmp(&all[i].vid, vid) == 0)
                nsm.flags = all[i].flags;
        free(all);
    }
    /* Every older copy of vid goes (they were all seen before the
     * rewrite), in the rewrite's index commit. */
    drop = malloc(sizeof(*drop) * (size_t)n + 1);
    drop_rc = malloc(sizeof(*drop_rc) * (size_t)n + 1);
    if (!drop || !drop_rc) {
        rc = -ENOMEM;
        goto out;
    }
    unsigned ndrop = 0;
    for (int i = 0; i < n; i++)
        if (ol_version_id_cmp(&sc.v[i].sm.vid, vid) == 0)
            drop[ndrop++] = sc.v[i].svid;
    rc = rewrite(st, bucket, key, klen, &sc.v[at], &nsm, len ? meta : "", keep, drop, ndrop,
                 drop_rc);
    if (rc < 0)
        goto out;
    sd_wrote(sd);
out:
    free(drop);
    free(drop_rc);
    scan_free(&sc);
    return sd_note(sd, rc);
}

/* A second round only when a mark set the copy's COMPLETE flag in place
 * between the scan and the rewrite (-EAGAIN: the rewrite would have copied
 * the flag back to unset). */
static int sd_set_meta(void *d, const char *bucket, const char *key, size_t klen,
                       const struct ol_version_id *vid, const void *meta, size_t len,
                       uint64_t stamp)
{
    int rc = -EAGAIN;
    for (unsigned round = 0; round < 3 && rc == -EAGAIN; round++)
        rc = set_meta_once(d, bucket, key, klen, vid, meta, len, stamp);
    return rc;
}

/* Copies bytes [off, off+len) of an open store reader into buf (verified by
 * the store).  0 or the read's error. */
static int read_all(struct ol_store_reader *rd, uint64_t off, size_t len, void *buf)
{
    size_t got = 0;
    /* Each round returns at least one byte or ends the loop. */
    while (got < len) {
        const uint8_t *p;
        ssize_t r = ol_store_read(rd, off + got, len - got, &p);
        if (r <= 0)
            return r < 0 ? (int)r : -EIO;
        memcpy((uint8_t *)buf + got, p, (size_t)r);
        got += (size_t)r;
    }
    return 0;
}

/* Opens the copy of version vid that reads use: the first in store order,
 * the most recently written (a heal's rewrite, whose bytes are the good
 * ones; every copy of a vid holds the same shard otherwise).  0 or
 * -OL_ENOKEY, or the store's error. */
static int open_copy(struct ol_store *st, const char *bucket, const char *key, size_t klen,
                     const struct ol_version_id *vid, struct ol_store_reader **rd)
{
    struct sd_scan sc = {0};
    int rc = scan(st, bucket, key, klen, &sc, vid, NULL);
    int at = -1;
    for (int i = 0; i < rc && at < 0; i++)
        if (ol_version_id_cmp(&sc.v[i].sm.vid, vid) == 0)
            at = i;
    if (rc >= 0)
        rc = at < 0 ? -OL_ENOKEY
                    : ol_store_read_open_v(st, bucket, key, klen, sc.v[at].svid, rd);
    if (rc == -OL_ENOVERSION || rc == -OL_ENOBUCKET || rc == -OL_EMARKER)
        rc = -OL_ENOKEY;
    scan_free(&sc);
    return rc < 0 ? rc : 0;
}

static int sd_versions(void *d, const char *bucket, const char *key, size_t klen,
                       struct ol_shard_meta *out, unsigned cap, struct ol_drive_blob *blob)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct sd_scan sc = {0};
    struct ol_shard_meta *all = NULL;
    int rc = scan(st, bucket, key, klen, &sc, NULL, blob);
    if (rc <= 0)
        goto out;
    /* distinct needs room for every copy; the caller's usually has it. */
    all = sc.n <= (int)cap ? NULL : malloc(sizeof(*all) * (size_t)sc.n);
    if (sc.n > (int)cap && !all) {
        rc = -ENOMEM;
        goto out;
    }
    int m = distinct(&sc, all ? all : out);
    if (m < 0) {
        rc = m;
        goto out;
    }
    const struct ol_shard_meta *got = all ? all : out;
    rc = m < (int)cap ? m : (int)cap;
    if (all)
        memcpy(out, all, sizeof(*out) * (size_t)rc);
    /* The blob's copy carries the flags of the answer (a legacy entry's
     * derived COMPLETE). */
    for (int i = 0; blob && i < m; i++)
        if (ol_version_id_cmp(&got[i].vid, &blob->sm.vid) == 0)
            blob->sm.flags = got[i].flags;
out:
    if (rc < 0 && blob)
        blob->got = blob->shard_got = false;
    free(all);
    scan_free(&sc);
    return sd_note(d, rc);
}

static int sd_read_shard(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, uint64_t off, size_t len, void *buf)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct ol_store_reader *rd = NULL;
    int rc = open_copy(st, bucket, key, klen, vid, &rd);
    if (rc < 0)
        return sd_note(d, rc);
    uint64_t size = ol_store_read_info(rd)->size;
    rc = off > size || len > size - off ? -EINVAL : read_all(rd, off, len, buf);
    ol_store_read_close(rd);
    return sd_note(d, rc);
}

static int sd_delete_version(void *d, const char *bucket, const char *key, size_t klen,
                             const struct ol_version_id *vid)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct sd_scan sc = {0};
    int rc = 0;
    /* A copy that is gone by the time its delete runs was rewritten (a
     * PUT's mark, which runs after the PUT answered, a heal, set_meta): the
     * rewrite's new copy of vid must go too, or the deleted version comes
     * back on this drive (seen: a DELETE right after a PUT, on a loaded
     * machine, left the object readable).  So scan again until a round
     * deletes every copy it saw; a rewrite queued after our delete finds its
     * source gone and writes nothing. */
    for (unsigned round = 0; round < 4; round++) {
        scan_free(&sc);
        int n = scan(st, bucket, key, klen, &sc, NULL, NULL);
        rc = n < 0 ? n : 0;
        bool raced = false;
        for (int i = 0; i < n && rc == 0; i++) {
            if (ol_version_id_cmp(&sc.v[i].sm.vid, vid) != 0)
                continue;
            int e = ol_store_delete_v(st, bucket, key, klen, sc.v[i].svid, NULL);
            if (e == -OL_ENOVERSION)
                raced = true;
            else if (e < 0)
                rc = e;
        }
        if (rc < 0 || !raced)
            break;
    }
    scan_free(&sc);
    return sd_note(d, rc);
}

/* list_keys: the key being gathered and its versions. */
struct sd_group {
    uint32_t klen;
    char key[OL_DRIVE_MAX_KEY];
    struct ol_shard_meta newest;
    bool legacy; /* newest predates the stored mark (see distinct) */
    unsigned nver;
};

static int sd_list_keys(void *d, const char *bucket, const char *after, size_t alen,
                        struct ol_drive_entry *out, unsigned cap)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct ol_store_viter *it = NULL;
    struct sd_group *g = NULL;
    int rc = ol_store_viter_open_at(st, bucket, after, alen, &it);
    if (rc == -OL_ENOBUCKET)
        return 0;
    if (rc < 0)
        return sd_note(d, rc);
    g = calloc(1, sizeof(*g));
    if (!g) {
        rc = -ENOMEM;
        goto out;
    }
    unsigned n = 0;
    bool open = false; /* g holds a key with at least one shard version */
    for (unsigned guard = 0; guard < SD_LIST_SCAN_MAX && n < cap; guard++) {
        const char *k;
        size_t kl;
        struct ol_version_info vi;
        int r = ol_store_viter_next(it, &k, &kl, &vi);
        if (r < 0) {
            rc = r;
            goto out;
        }
        bool same = r == 0 && open && kl == g->klen && memcmp(k, g->key, kl) == 0;
        if (open && !same) {
            out[n].key_len = g->klen;
            memcpy(out[n].key, g->key, g->klen);
            out[n].newest = g->newest;
            if (g->legacy && g->nver == 1)
                out[n].newest.flags |= OL_SHARD_COMPLETE;
            n++;
            open = false;
        }
        if (r == 1 || n >= cap)
            break;
        if (kl == alen && alen > 0 && memcmp(k, after, kl) == 0)
            continue;
        struct ol_shard_meta sm;
        bool legacy;
        if (kl > OL_DRIVE_MAX_KEY || vi.is_marker ||
            meta_decode(vi.info.meta, vi.info.meta_len, &sm, &legacy, NULL) != 0)
            continue;
        if (!same) {
            g->klen = (uint32_t)kl;
            memcpy(g->key, k, kl);
            g->newest = sm;
            g->legacy = legacy;
            g->nver = 1;
            open = true;
            continue;
        }
        if (ol_version_id_cmp(&sm.vid, &g->newest.vid) != 0)
            g->nver++;
        if (ol_version_id_cmp(&sm.vid, &g->newest.vid) > 0) {
            g->newest = sm;
            g->legacy = legacy;
        }
    }
    rc = (int)n;
out:
    ol_store_viter_close(it);
    free(g);
    return sd_note(d, rc);
}

struct sd_blist {
    int (*fn)(void *ctx, const char *bucket);
    void *ctx;
};

static int sd_bucket_cb(void *ctx, const struct ol_bucket_info *b)
{
    struct sd_blist *bl = ctx;
    return bl->fn(bl->ctx, b->name);
}

static int sd_list_buckets(void *d, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct sd_blist bl = {fn, ctx};
    int rc = ol_store_bucket_list(st, sd_bucket_cb, &bl);
    return sd_note(d, rc < 0 ? rc : 0);
}

/* ---- zero-copy readers (ec/drive.h, reader_open) ---- */

struct sd_reader {
    struct ol_storedrive *sd;
    struct ol_store_reader *rd;
};

static int sd_reader_open(void *d, const char *bucket, const char *key, size_t klen,
                          const struct ol_version_id *vid, void **h)
{
    struct ol_storedrive *sd = d;
    struct ol_store *st = sd_store(sd);
    if (!st)
        return -EIO;
    /* The copy read_shard would read. */
    struct sd_reader *r = malloc(sizeof(*r));
    int rc = r ? open_copy(st, bucket, key, klen, vid, &r->rd) : -ENOMEM;
    if (rc < 0) {
        free(r);
        return sd_note(sd, rc);
    }
    r->sd = sd;
    *h = r;
    return sd_note(sd, 0);
}

static ssize_t sd_reader_file(void *h, uint64_t off, size_t max, int *fd, uint64_t *foff)
{
    struct sd_reader *r = h;
    /* A drive the admin or the monitor took out serves no more bytes. */
    if (!sd_store(r->sd))
        return -EAGAIN;
    ssize_t n = ol_store_read_file(r->rd, off, max, fd, foff);
    return n > 0 ? n : -EAGAIN;
}

static ssize_t sd_reader_map(void *h, uint64_t off, size_t max, bool check,
                             const uint8_t **data)
{
    struct sd_reader *r = h;
    if (!sd_store(r->sd))
        return -EAGAIN;
    ssize_t n = check ? ol_store_read_map(r->rd, off, max, data)
                      : ol_store_read_map_sealed(r->rd, off, max, data);
    return n > 0 ? n : -EAGAIN;
}

static int sd_reader_read(void *h, uint64_t off, size_t len, void *buf)
{
    struct sd_reader *r = h;
    if (!sd_store(r->sd))
        return -EIO;
    uint64_t size = ol_store_read_info(r->rd)->size;
    if (off > size || len > size - off)
        return -EINVAL;
    /* The store reader holds the entry and its segments: a version freed
     * since the open still reads (store.h, ol_store_read_open). */
    return sd_note(r->sd, read_all(r->rd, off, len, buf));
}

static void sd_reader_close(void *h)
{
    struct sd_reader *r = h;
    ol_store_read_close(r->rd);
    free(r);
}

/* ---- buckets (ec/drive.h: every drive holds every bucket) ----
 *
 * Straight over the store; unlike the shard ops these do not count errors
 * towards taking the drive offline (the deployment asks every drive about
 * buckets on many requests, and an answer about a bucket says nothing about
 * the drive's health). */

static int sd_bucket_create(void *d, const char *bucket, int64_t ctime_ns)
{
    return ol_storedrive_bucket_create(d, bucket, ctime_ns);
}

static int sd_bucket_delete(void *d, const char *bucket)
{
    return ol_storedrive_bucket_delete(d, bucket);
}

static int sd_bucket_get(void *d, const char *bucket, int64_t *ctime_ns)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct ol_bucket_info bi;
    int rc = ol_store_bucket_get(st, bucket, &bi);
    if (rc == 0 && ctime_ns)
        *ctime_ns = bi.ctime_ns;
    return rc;
}

struct sd_btlist {
    int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns);
    void *ctx;
};

static int sd_bucket_time_cb(void *ctx, const struct ol_bucket_info *b)
{
    struct sd_btlist *bl = ctx;
    return bl->fn(bl->ctx, b->name, b->ctime_ns);
}

static int sd_bucket_list(void *d, int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns),
                          void *ctx)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    struct sd_btlist bl = {fn, ctx};
    int rc = ol_store_bucket_list(st, sd_bucket_time_cb, &bl);
    return rc < 0 ? rc : 0;
}

static int sd_bucket_config_put(void *d, const char *bucket, const char *name, const void *val,
                                size_t len)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    return ol_store_bucket_config_put(st, bucket, name, val, len);
}

static ssize_t sd_bucket_config_get(void *d, const char *bucket, const char *name, void *buf,
                                    size_t cap)
{
    struct ol_store *st = sd_store(d);
    if (!st)
        return -EIO;
    return ol_store_bucket_config_get(st, bucket, name, buf, cap);
}

/* statvfs of the directory; the path is set before the drive serves and
 * stays until it is destroyed. */
static int sd_space(void *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct ol_storedrive *sd = d;
    if (!sd_store(sd) || !sd->path)
        return -EIO;
    struct statvfs v;
    if (statvfs(sd->path, &v) != 0)
        return -errno;
    *free_bytes = (uint64_t)v.f_bavail * v.f_frsize;
    *total_bytes = (uint64_t)v.f_blocks * v.f_frsize;
    return 0;
}

/* ---- locks (ec/drive.h): the votes of a quorum lock, in memory ---- */

static int sd_lock(void *d, const void *name, size_t nlen, const uint8_t *owner, uint32_t ttl_ms)
{
    struct ol_storedrive *sd = d;
    /* A drive that is out answers nothing, locks included, as the set
     * expects of a drive it counts as down. */
    if (!sd_store(sd))
        return -EIO;
    return ol_locktab_lock(sd->locks, name, nlen, owner, ttl_ms, ol_now_ms());
}

static int sd_unlock(void *d, const void *name, size_t nlen, const uint8_t *owner)
{
    struct ol_storedrive *sd = d;
    return ol_locktab_unlock(sd->locks, name, nlen, owner);
}

const struct ol_drive_ops ol_storedrive_ops = {
    .space = sd_space,
    .shard_begin = sd_shard_begin,
    .shard_write = sd_shard_write,
    .shard_commit = sd_shard_commit,
    .shard_abort = sd_shard_abort,
    .shard_copy = sd_shard_copy,
    .mark_complete = sd_mark_complete,
    .versions = sd_versions,
    .set_meta = sd_set_meta,
    .read_shard = sd_read_shard,
    .delete_version = sd_delete_version,
    .list_keys = sd_list_keys,
    .list_buckets = sd_list_buckets,
    .reader_open = sd_reader_open,
    .reader_file = sd_reader_file,
    .reader_map = sd_reader_map,
    .reader_read = sd_reader_read,
    .reader_close = sd_reader_close,
    .bucket_create = sd_bucket_create,
    .bucket_delete = sd_bucket_delete,
    .bucket_get = sd_bucket_get,
    .bucket_list = sd_bucket_list,
    .bucket_config_put = sd_bucket_config_put,
    .bucket_config_get = sd_bucket_config_get,
    .lock = sd_lock,
    .unlock = sd_unlock,
};

/* ---- management ---- */

void ol_storedrive_policy_default(struct ol_storedrive_policy *p)
{
    p->fail_after = 3;
    p->backoff_min_ms = 100;
    p->backoff_max_ms = 30000;
}

int ol_storedrive_create(struct ol_store *st, struct ol_storedrive **out)
{
    struct ol_storedrive *sd = calloc(1, sizeof(*sd));
    if (!sd)
        return -ENOMEM;
    atomic_init(&sd->st, st);
    atomic_init(&sd->offline, false);
    atomic_init(&sd->state, OL_SD_ONLINE);
    ol_storedrive_policy_default(&sd->pol);
    atomic_init(&sd->backoff_ms, sd->pol.backoff_min_ms);
    if (ol_locktab_create(0, &sd->locks) < 0) {
        free(sd);
        return -ENOMEM;
    }
    *out = sd;
    return 0;
}

void ol_storedrive_destroy(struct ol_storedrive *sd)
{
    if (!sd)
        return;
    for (unsigned i = 0; i < sd->nowned; i++)
        ol_store_close(sd->owned[i]);
    ol_locktab_destroy(sd->locks);
    free(sd->path);
    free(sd);
}

struct ol_drive ol_storedrive_drive(struct ol_storedrive *sd)
{
    struct ol_drive d = {&ol_storedrive_ops, sd};
    return d;
}

void ol_storedrive_set_store(struct ol_storedrive *sd, struct ol_store *st)
{
    atomic_store(&sd->st, st);
}

struct ol_store *ol_storedrive_store(const struct ol_storedrive *sd)
{
    return atomic_load(&((struct ol_storedrive *)sd)->st);
}

void ol_storedrive_set_offline(struct ol_storedrive *sd, bool offline)
{
    atomic_store(&sd->offline, offline);
    if (!offline) {
        /* The operator says it is back: probe an OFFLINE drive at the next
         * check instead of waiting out its backoff. */
        atomic_store(&sd->retry_at_ms, 0);
        atomic_store(&sd->came_back, true);
    }
}

bool ol_storedrive_offline(const struct ol_storedrive *sd)
{
    struct ol_storedrive *m = (struct ol_storedrive *)sd;
    return atomic_load(&m->offline) || atomic_load(&m->state) == OL_SD_OFFLINE;
}

void ol_storedrive_set_policy(struct ol_storedrive *sd, const struct ol_storedrive_policy *p)
{
    sd->pol = *p;
    if (sd->pol.fail_after < 1)
        sd->pol.fail_after = 1;
    if (sd->pol.backoff_min_ms < 1)
        sd->pol.backoff_min_ms = 1;
    if (sd->pol.backoff_max_ms < sd->pol.backoff_min_ms)
        sd->pol.backoff_max_ms = sd->pol.backoff_min_ms;
    atomic_store(&sd->backoff_ms, sd->pol.backoff_min_ms);
}

/* The identity of the directory: its FORMAT file's device and inode.  0,
 * -ENOENT (no FORMAT: an empty directory), -ENOTDIR, or another error. */
static int dir_identity(const char *path, dev_t *dev, ino_t *ino)
{
    char f[SD_PATH_MAX];
    struct stat sb;
    if (snprintf(f, sizeof(f), "%s/FORMAT", path) >= (int)sizeof(f))
        return -ENAMETOOLONG;
    if (stat(f, &sb) != 0) {
        int e = -errno;
        if (e != -ENOENT)
            return e;
        /* No FORMAT: an empty directory, or no directory at all. */
        if (stat(path, &sb) != 0)
            return -ENODEV;
        return S_ISDIR(sb.st_mode) ? -ENOENT : -ENOTDIR;
    }
    *dev = sb.st_dev;
    *ino = sb.st_ino;
    return 0;
}

int ol_storedrive_set_path(struct ol_storedrive *sd, const char *dir,
                           const struct ol_store_opts *opts)
{
    char *p = strdup(dir);
    if (!p)
        return -ENOMEM;
    free(sd->path);
    sd->path = p;
    sd->opts = *opts;
    sd->have_id = dir_identity(dir, &sd->dev, &sd->ino) == 0;
    return 0;
}

/* The probe of an offline drive: a tiny file written, synced and removed in
 * its directory (catches a read-only or dead file system, which a stat would
 * not). */
static int probe_write(const char *path)
{
    char f[SD_PATH_MAX];
    if (snprintf(f, sizeof(f), "%s/.probe", path) >= (int)sizeof(f))
        return -ENAMETOOLONG;
    int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (write(fd, "p", 1) != 1 || fsync(fd) != 0)
        rc = errno ? -errno : -EIO;
    close(fd);
    if (unlink(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* Applies the membership check to a store the monitor opened: 0 when it may
 * be used (joined now if it had to join), or an error (logged once per
 * reason) when it must not. */
static int admit_opened(struct ol_storedrive *sd, struct ol_store *st)
{
    if (!sd->have_member)
        return 0;
    char why[SD_WHY_MAX];
    why[0] = 0;
    int rc = ol_storedrive_admit(st, sd->path, &sd->member, why, sizeof(why));
    if (rc == 1) {
        rc = ol_storedrive_join(st, &sd->member);
        if (rc == 0)
            ol_info("ec drive %s: joined the deployment as drive %u of %u", sd->path,
                    (unsigned)sd->member.index + 1, (unsigned)sd->member.ndrives);
        else
            snprintf(why, sizeof(why), "cannot write the identity of drive %s: %s", sd->path,
                     ol_strerror(rc));
    }
    if (rc == 0) {
        sd->refused[0] = 0;
        return 0;
    }
    if (strcmp(why, sd->refused) != 0) {
        ol_error("%s; the drive stays offline", why);
        snprintf(sd->refused, sizeof(sd->refused), "%s", why);
    }
    return rc;
}

/* Opens the directory afresh (it was replaced: empty, or another drive's
 * FORMAT; or it could not be opened before) and makes it the drive's store
 * once it passes the membership check.  The old store stays open until
 * destroy, because calls that loaded it may still be running. */
static int reopen(struct ol_storedrive *sd)
{
    if (sd->nowned >= SD_MAX_OWNED)
        return -EMFILE;
    struct ol_store *st = NULL;
    int rc = ol_store_open(&st, sd->path, &sd->opts);
    if (rc < 0)
        return rc;
    rc = admit_opened(sd, st);
    if (rc < 0) {
        /* Nothing but this function has seen st: closing it is safe. */
        ol_store_close(st);
        return rc;
    }
    sd->owned[sd->nowned++] = st;
    atomic_store(&sd->st, st);
    sd->have_id = dir_identity(sd->path, &sd->dev, &sd->ino) == 0;
    atomic_fetch_add(&sd->n.reopens, 1);
    return 0;
}

static void back_online(struct ol_storedrive *sd)
{
    atomic_store(&sd->errors, 0);
    atomic_store(&sd->backoff_ms, sd->pol.backoff_min_ms);
    atomic_store(&sd->state, OL_SD_ONLINE);
    atomic_store(&sd->last_err, 0);
    atomic_fetch_add(&sd->n.online_events, 1);
    atomic_store(&sd->came_back, true);
    ol_info("ec drive %s: online again", sd->path ? sd->path : "?");
}

int ol_storedrive_check(struct ol_storedrive *sd)
{
    if (atomic_load(&sd->offline))
        return OL_SD_ONLINE; /* the admin's switch wins; nothing to probe */
    int state = atomic_load(&sd->state);
    if (!sd->path)
        goto out;
    dev_t dev = 0;
    ino_t ino = 0;
    if (state != OL_SD_OFFLINE) {
        /* A directory removed or replaced under a running store goes
         * unnoticed by the store (its files stay open): look for it. */
        int rc = dir_identity(sd->path, &dev, &ino);
        if (rc < 0 || (sd->have_id && (dev != sd->dev || ino != sd->ino)))
            go_offline(sd, rc < 0 ? rc : -OL_EFORMAT);
        goto out;
    }
    if (now_ms() < atomic_load(&sd->retry_at_ms))
        goto out;
    atomic_fetch_add(&sd->n.probes, 1);
    int rc = dir_identity(sd->path, &dev, &ino);
    if (rc == 0 && sd->have_id && dev == sd->dev && ino == sd->ino && atomic_load(&sd->st))
        rc = probe_write(sd->path); /* the same directory, its store open */
    else if (rc == 0 || rc == -ENOENT)
        rc = reopen(sd); /* a replacement (empty, or formatted elsewhere), or never opened */
    if (rc == 0) {
        back_online(sd);
    } else {
        unsigned b = atomic_load(&sd->backoff_ms) * 2;
        b = b > sd->pol.backoff_max_ms ? sd->pol.backoff_max_ms : b;
        atomic_store(&sd->backoff_ms, b);
        atomic_store(&sd->retry_at_ms, now_ms() + b);
        atomic_store(&sd->last_err, rc);
    }
out:
    return atomic_load(&sd->state);
}

void ol_storedrive_set_failed(struct ol_storedrive *sd, int err)
{
    go_offline(sd, err < 0 ? err : -EIO);
}

bool ol_storedrive_take_came_back(struct ol_storedrive *sd)
{
    return atomic_exchange(&sd->came_back, false);
}

void ol_storedrive_info(const struct ol_storedrive *sd, struct ol_storedrive_info *out)
{
    struct ol_storedrive *m = (struct ol_storedrive *)sd;
    memset(out, 0, sizeof(*out));
    out->state = atomic_load(&m->offline) ? OL_SD_ADMIN_OFFLINE : atomic_load(&m->state);
    out->last_err = atomic_load(&m->last_err);
    out->consecutive_errors = atomic_load(&m->errors);
    out->backoff_ms = atomic_load(&m->backoff_ms);
    uint64_t at = atomic_load(&m->retry_at_ms), now = now_ms();
    out->retry_in_ms = out->state == OL_SD_ONLINE || at <= now ? 0 : at - now;
    out->failures = atomic_load(&m->n.failures);
    out->offline_events = atomic_load(&m->n.offline_events);
    out->online_events = atomic_load(&m->n.online_events);
    out->reopens = atomic_load(&m->n.reopens);
    out->probes = atomic_load(&m->n.probes);
}

const char *ol_storedrive_state_name(int state)
{
    switch (state) {
    case OL_SD_ONLINE: return "online";
    case OL_SD_OFFLINE: return "offline";
    case OL_SD_FULL: return "full";
    case OL_SD_ADMIN_OFFLINE: return "offline-admin";
    default: return "?";
    }
}

int ol_storedrive_bucket_create(struct ol_storedrive *sd, const char *bucket, int64_t ctime_ns)
{
    struct ol_store *st = sd_store(sd);
    if (!st)
        return -EIO;
    int rc = ol_store_bucket_create(st, bucket, ctime_ns);
    if (rc < 0 && rc != -EEXIST && rc != -OL_EBUCKETEXISTS)
        return sd_note(sd, rc);
    return sd_note(sd, ensure_bucket(st, bucket));
}
int ol_storedrive_bucket_delete(struct ol_storedrive *sd, const char *bucket)
{
    struct ol_store *st = sd_store(sd);
    if (!st)
        return -EIO;
    /* Shard versions left (delete markers not yet healed away, stale
     * shards) go first: the store refuses to drop a bucket that holds any. */
    for (unsigned round = 0; round < (1u << 22); round++) {
        struct ol_store_viter *it = NULL;
        int rc = ol_store_viter_open(st, bucket, &it);
        if (rc == -OL_ENOBUCKET)
            return 0;
        if (rc < 0)
            return rc;
        char key[OL_DRIVE_MAX_KEY];
        size_t klen = 0;
        char svid[OL_STORE_VID_MAX];
        const char *k;
        struct ol_version_info vi;
        int r = ol_store_viter_next(it, &k, &klen, &vi);
        if (r == 0 && klen <= sizeof(key)) {
            memcpy(key, k, klen);
            memcpy(svid, vi.vid, sizeof(svid));
        }
        ol_store_viter_close(it);
        if (r < 0)
            return r;
        if (r == 1)
            break;
        rc = ol_store_delete_v(st, bucket, key, klen, svid, NULL);
        if (rc < 0 && rc != -OL_ENOVERSION)
            return rc;
    }
    int rc = ol_store_bucket_delete(st, bucket);
    return rc == -OL_ENOBUCKET ? 0 : rc;
}

/* ---- membership (docs/EC.md, "Deployment identity") ---- */

struct bucket_names {
    char (*name)[64];
    unsigned n, cap;
};

static int collect_bucket(void *ctx, const struct ol_bucket_info *b)
{
    struct bucket_names *bn = ctx;
    if (bn->n >= bn->cap)
        return 1;
    memcpy(bn->name[bn->n++], b->name, sizeof(b->name));
    return 0;
}

/* 1 when the bucket's first entries are all shard entries, 0 when not. */
static int bucket_holds_shards(struct ol_store *st, const char *bucket)
{
    enum ol_versioning v;
    int rc = ol_store_versioning_get(st, bucket, &v);
    if (rc == -OL_ENOBUCKET)
        return 1; /* removed meanwhile: nothing to judge */
    if (rc < 0)
        return rc;
    if (v != OL_VERSIONING_ENABLED)
        return 0;
    struct ol_store_viter *it = NULL;
    rc = ol_store_viter_open(st, bucket, &it);
    if (rc == -OL_ENOBUCKET)
        return 1;
    if (rc < 0)
        return rc;
    int verdict = 1;
    for (unsigned i = 0; i < SD_SHAPE_VERSIONS && verdict == 1; i++) {
        const char *k;
        size_t kl;
        struct ol_version_info vi;
        int r = ol_store_viter_next(it, &k, &kl, &vi);
        if (r != 0) {
            verdict = r < 0 ? r : 1;
            break;
        }
        struct ol_shard_meta sm;
        if (!vi.is_marker && meta_decode(vi.info.meta, vi.info.meta_len, &sm, NULL, NULL) != 0)
            verdict = 0;
    }
    ol_store_viter_close(it);
    return verdict;
}

int ol_storedrive_holds_shards(struct ol_store *st)
{
    struct bucket_names bn = {.cap = SD_SHAPE_BUCKETS_MAX};
    bn.name = malloc(sizeof(*bn.name) * bn.cap);
    if (!bn.name)
        return -ENOMEM;
    int rc = ol_store_bucket_list(st, collect_bucket, &bn);
    int verdict = 1;
    for (unsigned b = 0; rc == 0 && verdict == 1 && b < bn.n; b++)
        verdict = bucket_holds_shards(st, bn.name[b]);
    free(bn.name);
    if (rc < 0)
        return rc;
    return verdict;
}

/* The first 8 bytes of an id as hex (enough to tell deployments apart in a
 * message). */
static void id_hex(const uint8_t id[16], char out[17])
{
    for (unsigned i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

int ol_storedrive_admit(struct ol_store *st, const char *path,
                        const struct ol_storedrive_member *want, char *why, size_t cap)
{
    OL_ASSERT(st && want && want->index < want->ndrives);
    struct ol_store_identity id;
    int rc = ol_store_identity(st, &id);
    if (rc < 0) {
        snprintf(why, cap, "cannot read the identity of drive %s: %s", path, ol_strerror(rc));
        return rc;
    }
    char have[17], ours[17];
    id_hex(id.deployment_id, have);
    id_hex(want->deployment_id, ours);
    if (id.ec_joined) {
        if (memcmp(id.deployment_id, want->deployment_id, 16) != 0) {
            snprintf(why, cap,
                     "drive %s belongs to another deployment (%s..., where it is drive %u of "
                     "%u; this deployment is %s...): remove it from the list, or give an "
                     "empty directory in its place",
                     path, have, (unsigned)id.ec_index + 1, (unsigned)id.ec_ndrives, ours);
            return -OL_EFORMAT;
        }
        if (id.ec_ndrives != want->ndrives || id.ec_k != want->k || id.ec_m != want->m) {
            snprintf(why, cap,
                     "drive %s belongs to a deployment of %u drives in sets of %u+%u, but "
                     "this start has %u drives in sets of %u+%u: list every directory of "
                     "the deployment, with its ec_data and ec_parity",
                     path, (unsigned)id.ec_ndrives, (unsigned)id.ec_k, (unsigned)id.ec_m,
                     (unsigned)want->ndrives, (unsigned)want->k, (unsigned)want->m);
            return -OL_EFORMAT;
        }
        if (id.ec_index != want->index) {
            snprintf(why, cap,
                     "drive %s was drive %u of this deployment but is listed as drive %u; "
                     "list the directories in their original order",
                     path, (unsigned)id.ec_index + 1, (unsigned)want->index + 1);
            return -OL_EFORMAT;
        }
        return 0;
    }
    if (!id.has_data)
        return 1; /* a new or replaced drive: it joins, a heal fills it */
    rc = ol_storedrive_holds_shards(st);
    if (rc < 0) {
        snprintf(why, cap, "cannot read the buckets of drive %s: %s", path, ol_strerror(rc));
        return rc;
    }
    if (rc == 0) {
        snprintf(why, cap,
                 "drive %s holds data of a single-drive store (buckets that are not "
                 "erasure-coded): it cannot be a drive of an erasure-coded deployment; give "
                 "an empty directory in its place",
                 path);
        return -OL_EFORMAT;
    }
    if (memcmp(want->deployment_id, ol_storedrive_legacy_id, 16) != 0) {
        snprintf(why, cap,
                 "drive %s holds erasure-coded data but no deployment identity, while this "
                 "deployment's drives have one (%s...): it belongs to another deployment, "
                 "written by an older build; give an empty directory in its place",
                 path, ours);
        return -OL_EFORMAT;
    }
    return 1; /* a drive of the legacy deployment, from before identities */
}

int ol_storedrive_join(struct ol_store *st, const struct ol_storedrive_member *want)
{
    OL_ASSERT(want->index < want->ndrives);
    struct ol_store_identity id;
    memset(&id, 0, sizeof(id));
    memcpy(id.deployment_id, want->deployment_id, sizeof(id.deployment_id));
    id.ec_joined = true;
    id.ec_index = want->index;
    id.ec_ndrives = want->ndrives;
    id.ec_k = want->k;
    id.ec_m = want->m;
    return ol_store_set_identity(st, &id);
}

void ol_storedrive_set_member(struct ol_storedrive *sd, const struct ol_storedrive_member *m)
{
    sd->member = *m;
    sd->have_member = true;
    sd->refused[0] = 0;
    if (sd->path)
        sd->have_id = dir_identity(sd->path, &sd->dev, &sd->ino) == 0;
}
