/* The object layer over erasure sets: see obj/ec.h. */
#include "obj/ec.h"
#include "obj/sse.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/md5.h"
#include "deploy/deploy.h"
#include "ec/eset.h"
#include "ec/qlock.h"
#include "ec/storedrive.h"
#include "obj/ec_multipart.h"
#include "s3/meta.h"

#define EC_CHUNK_BYTES (1u << 20) /* bytes per read step */
#define EC_ITER_PAGE 128u         /* keys per set per listing step */
/* What a store writer under each drive holds: one buffer of
 * EC_WRITER_BUF_BYTES, up to two more in flight to the disk: what the body
 * memory budget reserves per drive for a large shard. */
#define EC_WRITER_BUF_BYTES (1u << 20)
#define EC_WRITER_BUFS 3u

static unsigned dp_wait_ms(const struct ol_deploy *dp)
{
    return dp->body_wait_ms;
}

static uint64_t page_up(uint64_t n)
{
    return (n + 4095) / 4096 * 4096;
}

/* Counts the answers that say too few drives were there (metrics). */
static int quorum_err(struct ol_deploy *dp, int rc)
{
    if (rc == -OL_EQUORUM || rc == -EIO || rc == -ENOSPC)
        atomic_fetch_add(&dp->st.quorum_errors, 1);
    if (rc == -EIO || rc == -EAGAIN)
        rc = -OL_EQUORUM;
    return rc;
}

void ol_ec_etag_split(const char *field, char etag[64], uint64_t *meta_len,
                      uint64_t *manifest_size)
{
    *meta_len = 0;
    *manifest_size = UINT64_MAX;
    const char *sep = strchr(field, ':');
    size_t n = sep ? (size_t)(sep - field) : strlen(field);
    if (n > 63)
        n = 63;
    memcpy(etag, field, n);
    etag[n] = 0;
    if (!sep)
        return;
    char *end = NULL;
    *meta_len = strtoull(sep + 1, &end, 10);
    if (end && *end == ':' && end[1] >= '0' && end[1] <= '9')
        *manifest_size = strtoull(end + 1, NULL, 10);
}

uint64_t ol_ec_etag_plain(const char *field, uint64_t size)
{
    const char *p = field;
    for (int i = 0; i < 3; i++) {
        p = strchr(p, ':');
        if (!p)
            return UINT64_MAX;
        p++;
    }
    if (p[0] == 's' && p[1] == 0) {
        int64_t plain = ol_sse_plain_len(size);
        return plain < 0 ? 0 : (uint64_t)plain;
    }
    char *end = NULL;
    uint64_t overhead = strtoull(p, &end, 16);
    if (end == p || *end || overhead > size)
        return UINT64_MAX;
    return size - overhead;
}

void ol_ec_field(char *out, size_t cap, const char *etag, uint64_t manifest_size,
                 const uint8_t *meta, size_t meta_len, uint64_t stored)
{
    const uint8_t *v;
    size_t vl;
    bool sealed = meta && ol_s3_meta_get(meta, meta_len, OL_SSE_META, &v, &vl) == 0;
    char ms[24] = "";
    if (manifest_size != UINT64_MAX)
        snprintf(ms, sizeof(ms), "%" PRIu64, manifest_size);
    if (!sealed) {
        if (manifest_size != UINT64_MAX)
            snprintf(out, cap, "%s:0:%s", etag, ms);
        else
            snprintf(out, cap, "%s", etag);
        return;
    }
    /* The field is at most 63 bytes on the drives (struct ol_shard_meta):
     * a one-stream object says only "s" (its plaintext size follows from
     * its stored size), a manifest the sealing overhead in hex. */
    enum ol_sse_mode mode;
    char layout = 's';
    (void)ol_sse_entry_peek(v, vl, &mode, &layout);
    if (layout == 's')
        snprintf(out, cap, "%s:0:%s:s", etag, ms);
    else
        snprintf(out, cap, "%s:0:%s:%" PRIx64, etag, ms,
                 stored - ol_sse_object_size(meta, meta_len, stored));
}

/* ---- buckets ---- */

int ol_ec_bucket_create(struct ol_deploy *dp, const char *name, int64_t ctime_ns)
{
    int ex = ol_deploy_bucket_exists(dp, name);
    if (ex < 0)
        return quorum_err(dp, ex);
    /* An existing bucket is spread to drives that lack it (a replaced one)
     * all the same. */
    unsigned ok = ol_deploy_bucket_spread(dp, name, ctime_ns);
    if (ex > 0)
        return -OL_EBUCKETEXISTS;
    if (ok < dp->ndrives / 2 + 1)
        return quorum_err(dp, -OL_EQUORUM);
    return 0;
}

int ol_ec_bucket_get(struct ol_deploy *dp, const char *name, struct ol_bucket_info *out)
{
    int ex = ol_deploy_bucket_exists(dp, name);
    if (ex < 0)
        return quorum_err(dp, ex);
    if (ex == 0)
        return -OL_ENOBUCKET;
    if (out) {
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", name);
    }
    return 0;
}

int ol_ec_bucket_list(struct ol_deploy *dp, int (*fn)(void *ctx, const struct ol_bucket_info *b),
                      void *ctx)
{
    return quorum_err(dp, ol_deploy_bucket_list(dp, fn, ctx));
}

static int first_key(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)key;
    (void)klen;
    (void)o;
    *(bool *)ctx = true;
    return 1;
}

int ol_ec_bucket_delete(struct ol_deploy *dp, const char *name)
{
    int ex = ol_deploy_bucket_exists(dp, name);
    if (ex < 0)
        return quorum_err(dp, ex);
    if (ex == 0)
        return -OL_ENOBUCKET;
    /* Any key (objects, uploads) on any set keeps it; the parts of aborted
     * uploads the cleaner has not reached yet are removed now. */
    for (int round = 0; round < 2; round++) {
        bool any = false;
        for (unsigned s = 0; s < dp->nsets && !any; s++) {
            int rc = ol_eset_list(dp->sets[s], name, NULL, 0, 1, first_key, &any);
            if (rc < 0)
                return quorum_err(dp, rc);
        }
        if (!any)
            break;
        if (round == 1)
            return -OL_EBUCKETNOTEMPTY;
        int rc = ol_ec_mp_clean_now(dp, name);
        if (rc < 0)
            return quorum_err(dp, rc);
    }
    unsigned gone = 0, nd = dp->ndrives; /* loaded once: pools may join */
    for (unsigned i = 0; i < nd; i++) {
        const struct ol_drive *d = &dp->drv[i];
        gone += d->ops->bucket_delete && d->ops->bucket_delete(d->d, name) == 0;
    }
    return gone >= nd / 2 + 1 ? 0 : quorum_err(dp, -OL_EQUORUM);
}

/* ---- conditional commits ----
 *
 * A conditional commit (If-None-Match, If-Match) checks the key's current
 * version and commits its own with no other conditional commit of the same
 * key in between, on this node or any other that shares the key's set:
 *
 *  - first this node's table: the keys being committed so are held in a
 *    small table, and a second one waits (yielding its fiber) until the
 *    first is done: cheap, and local contenders do not fight over the
 *    drives' votes;
 *  - then the quorum lock over the key's set (ec/qlock.h): a majority of
 *    the set's drives grant "bucket\0key" to this commit, so two nodes
 *    never hold it together.  No coordinator: it works while etcd is down.
 *
 * So of N racing create-only PUTs exactly one wins, whichever nodes they
 * reach; the others see its version and fail their precondition.  A lock
 * not had in OL_QLOCK_WAIT_MS is -EBUSY (503 SlowDown). */

#define COND_SLOTS 64u

static struct {
    pthread_mutex_t mu;
    uint64_t held[COND_SLOTS]; /* hashes of keys being committed; 0 = free */
} cond_tab = {PTHREAD_MUTEX_INITIALIZER, {0}};

static uint64_t key_hash(const char *bucket, const char *key, size_t klen)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = bucket; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
    return h | 1;
}

static uint64_t local_lock(const char *bucket, const char *key, size_t klen)
{
    uint64_t h = key_hash(bucket, key, klen);
    for (;;) {
        pthread_mutex_lock(&cond_tab.mu);
        bool busy = false;
        unsigned free_slot = COND_SLOTS;
        for (unsigned i = 0; i < COND_SLOTS; i++) {
            busy |= cond_tab.held[i] == h;
            if (!cond_tab.held[i] && free_slot == COND_SLOTS)
                free_slot = i;
        }
        if (!busy && free_slot < COND_SLOTS) {
            cond_tab.held[free_slot] = h;
            pthread_mutex_unlock(&cond_tab.mu);
            return h;
        }
        pthread_mutex_unlock(&cond_tab.mu);
        ol_io_sleep_ms(1);
    }
}

static void local_unlock(uint64_t h)
{
    pthread_mutex_lock(&cond_tab.mu);
    for (unsigned i = 0; i < COND_SLOTS; i++)
        if (cond_tab.held[i] == h) {
            cond_tab.held[i] = 0;
            break;
        }
    pthread_mutex_unlock(&cond_tab.mu);
}

int ol_ec_cond_lock(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    struct ol_ec_cond_hold *out)
{
    memset(out, 0, sizeof(*out));
    size_t bl = strlen(bucket);
    if (bl > OL_DRIVE_MAX_BUCKET || klen == 0 || klen > OL_DRIVE_MAX_KEY)
        return -EINVAL;
    out->h = local_lock(bucket, key, klen);
    /* The name: the bucket, a NUL (no bucket name holds one), the key. */
    uint8_t name[OL_DRIVE_LOCK_NAME_MAX];
    memcpy(name, bucket, bl);
    name[bl] = 0;
    memcpy(name + bl + 1, key, klen);
    const struct ol_drive *drives;
    unsigned n = ol_eset_drives(es, &drives);
    int rc = ol_qlock_acquire(drives, n, name, bl + 1 + klen, NULL, &out->ql);
    if (rc == -EOPNOTSUPP)
        return 0; /* drives without locks: this process is the only writer */
    if (rc < 0) {
        if (rc == -EBUSY)
            ol_log_limited(OL_LOG_WARN, "EC: conditional commit of %s/%.*s: lock not had", bucket,
                           (int)(klen > 200 ? 200 : klen), key);
        local_unlock(out->h);
        out->h = 0;
        return rc;
    }
    return 0;
}

bool ol_ec_cond_held(const struct ol_ec_cond_hold *h)
{
    return h->h && (!h->ql || ol_qlock_valid(h->ql));
}

void ol_ec_cond_unlock(struct ol_ec_cond_hold *h)
{
    ol_qlock_release(h->ql);
    if (h->h)
        local_unlock(h->h);
    memset(h, 0, sizeof(*h));
}

/* Checks cond against the key's current version: 0, -OL_EPRECONDITION or
 * -OL_ENOKEY (If-Match on a missing key), or a read error. */
int ol_ec_cond_check(struct ol_deploy *dp, struct ol_eset *es, const char *bucket,
                      const char *key, size_t klen, const struct ol_store_cond *cond)
{
    struct ol_eset_obj o;
    int rc = ol_eset_stat(es, bucket, key, klen, NULL, &o);
    if (rc < 0 && rc != -OL_ENOKEY)
        return quorum_err(dp, rc);
    bool exists = rc == 0;
    if (cond->if_none_match && exists)
        return -OL_EPRECONDITION;
    if (cond->if_match) {
        if (!exists)
            return -OL_ENOKEY;
        char etag[64];
        uint64_t ml, ms;
        ol_ec_etag_split(o.etag, etag, &ml, &ms);
        if (strcmp(cond->if_match, "*") != 0 && strcmp(cond->if_match, etag) != 0)
            return -OL_EPRECONDITION;
    }
    return 0;
}

/* ---- versioning ----
 *
 * A bucket's state is a bucket setting ("ol.versioning": 'E' or 'S'; unset:
 * never versioned).  Each version records what it replaces in its flags
 * (ec/drive.h, ol_shard_frees): enabled keeps every older version;
 * suspended writes S3's "null" version, which replaces the older null one
 * (a version written before versioning was enabled is one). */

#define VER_SETTING "ol.versioning"

int ol_ec_versioning_get(struct ol_deploy *dp, const char *bucket, enum ol_versioning *out)
{
    char v = 0;
    ssize_t n = ol_deploy_bucket_config_get(dp, bucket, VER_SETTING, &v, 1);
    *out = OL_VERSIONING_OFF;
    if (n == -OL_ENOCONFIG)
        return 0;
    if (n < 0)
        return quorum_err(dp, (int)n);
    *out = v == 'E' ? OL_VERSIONING_ENABLED : v == 'S' ? OL_VERSIONING_SUSPENDED
                                                     : OL_VERSIONING_OFF;
    return 0;
}

int ol_ec_versioning_put(struct ol_deploy *dp, const char *bucket, enum ol_versioning v)
{
    if (v == OL_VERSIONING_OFF)
        return -EINVAL;
    char c = v == OL_VERSIONING_ENABLED ? 'E' : 'S';
    return quorum_err(dp, ol_deploy_bucket_config_put(dp, bucket, VER_SETTING, &c, 1));
}

/* The flags of a version written in state v. */
uint32_t ol_ec_ver_flags(enum ol_versioning v)
{
    return v == OL_VERSIONING_ENABLED ? OL_SHARD_KEEP_OLDER
           : v == OL_VERSIONING_SUSPENDED ? OL_SHARD_NULL : 0;
}

/* A version's S3 id: "null" for a null version or one written before
 * versioning, else its text form.  Returns whether it is S3's "null". */
static bool vid_text(const struct ol_eset_obj *o, char vid[OL_STORE_VID_MAX])
{
    if ((o->flags & OL_SHARD_NULL) || !(o->flags & OL_SHARD_KEEP_OLDER)) {
        snprintf(vid, OL_STORE_VID_MAX, "null");
        return true;
    }
    ol_version_id_format(&o->vid, vid);
    return false;
}

/* What a commit in state v tells the caller: "" (never versioned), "null"
 * (suspended) or the new version's id. */
void ol_ec_commit_vid(enum ol_versioning v, const struct ol_eset_obj *o,
                      char vid[OL_STORE_VID_MAX])
{
    if (!vid)
        return;
    if (v == OL_VERSIONING_OFF)
        vid[0] = 0;
    else
        vid_text(o, vid);
}

/* Resolves an S3 version id of a key to the set's: "null" is the newest
 * null version.  -OL_ENOVERSION when there is none. */
static int vid_resolve(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                       const char *vid, struct ol_eset_obj *out)
{
    if (strcmp(vid, "null") != 0) {
        struct ol_version_id want;
        if (ol_version_id_parse(&want, vid, strlen(vid)) < 0)
            return -OL_ENOVERSION;
        memset(out, 0, sizeof(*out));
        out->vid = want;
        return 0;
    }
    struct ol_eset_obj *v = malloc(sizeof(*v) * OL_EC_MAX_VERSIONS);
    if (!v)
        return -ENOMEM;
    int n = ol_eset_versions(es, bucket, key, klen, v, OL_EC_MAX_VERSIONS);
    int rc = n < 0 ? n : -OL_ENOVERSION;
    for (int i = 0; i < n; i++) {
        char t[OL_STORE_VID_MAX];
        if (vid_text(&v[i], t)) {
            *out = v[i];
            rc = 0;
            break;
        }
    }
    free(v);
    return rc;
}

/* ---- the version's blob ----
 *
 * What every drive keeps beside its shard of a version (ec/eset.h,
 * "Metadata"): "OLB1", the S3 metadata blob's length (u32) and bytes, the
 * attribute count (u16), then each attribute as its name's length (u16),
 * the name, its value's length (u32) and the value; little-endian. */

#define BLOB_MAGIC "OLB1"

struct blob_view {
    const uint8_t *meta;
    uint32_t meta_len;
    const uint8_t *attrs; /* the attribute list after the count */
    size_t attrs_len;
    uint16_t nattrs;
};

static int blob_parse(const uint8_t *b, size_t n, struct blob_view *v)
{
    memset(v, 0, sizeof(*v));
    if (n < 10 || memcmp(b, BLOB_MAGIC, 4) != 0)
        return -OL_ECORRUPT;
    uint32_t ml;
    memcpy(&ml, b + 4, 4);
    if (ml > n - 10)
        return -OL_ECORRUPT;
    v->meta = b + 8;
    v->meta_len = ml;
    memcpy(&v->nattrs, b + 8 + ml, 2);
    v->attrs = b + 10 + ml;
    v->attrs_len = n - 10 - ml;
    return 0;
}

/* Walks the attributes: calls fn for each; stops at its non-zero answer. */
static int blob_attrs(const struct blob_view *v,
                      int (*fn)(void *ctx, const char *name, size_t nl, const uint8_t *val,
                                size_t vl),
                      void *ctx)
{
    const uint8_t *p = v->attrs, *e = v->attrs + v->attrs_len;
    for (unsigned i = 0; i < v->nattrs; i++) {
        uint16_t nl;
        uint32_t vl;
        if (e - p < 2)
            return -OL_ECORRUPT;
        memcpy(&nl, p, 2);
        if ((size_t)(e - p) < 2u + nl + 4u)
            return -OL_ECORRUPT;
        const char *name = (const char *)p + 2;
        memcpy(&vl, p + 2 + nl, 4);
        if ((size_t)(e - p) < 6u + nl + vl)
            return -OL_ECORRUPT;
        int rc = fn(ctx, name, nl, p + 6 + nl, vl);
        if (rc)
            return rc;
        p += 6u + nl + vl;
    }
    return 0;
}

struct blob_out {
    uint8_t *b;
    size_t n, cap;
    uint16_t nattrs;
    bool err;
};

static void out_put(struct blob_out *o, const void *p, size_t n)
{
    if (o->err || o->n + n > o->cap) {
        o->err = true;
        return;
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void out_attr(struct blob_out *o, const char *name, size_t nl, const void *val, size_t vl)
{
    uint16_t n16 = (uint16_t)nl;
    uint32_t v32 = (uint32_t)vl;
    out_put(o, &n16, 2);
    out_put(o, name, nl);
    out_put(o, &v32, 4);
    out_put(o, val, vl);
    o->nattrs++;
}

/* Starts a blob with the S3 metadata; attributes follow with out_attr, and
 * blob_end writes their count. */
static void blob_begin(struct blob_out *o, uint8_t *buf, size_t cap, const void *meta,
                       uint32_t ml)
{
    memset(o, 0, sizeof(*o));
    o->b = buf;
    o->cap = cap;
    out_put(o, BLOB_MAGIC, 4);
    out_put(o, &ml, 4);
    out_put(o, meta, ml);
    uint16_t zero = 0;
    out_put(o, &zero, 2); /* the count, set by blob_end */
}

static int blob_end(struct blob_out *o, uint32_t ml)
{
    if (o->err)
        return -OL_ETOOLARGE;
    memcpy(o->b + 8 + ml, &o->nattrs, 2);
    return 0;
}

int ol_ec_blob_of(const struct ol_obj_info *info, uint8_t **out, size_t *len)
{
    uint8_t *blob = malloc(OL_ESET_META_MAX);
    if (!blob)
        return -ENOMEM;
    struct blob_out bo;
    blob_begin(&bo, blob, OL_ESET_META_MAX, info->meta, info->meta_len);
    for (uint32_t i = 0; i < info->nattrs; i++)
        if (info->attrs[i].val)
            out_attr(&bo, info->attrs[i].name, strlen(info->attrs[i].name), info->attrs[i].val,
                     info->attrs[i].len);
    int rc = blob_end(&bo, info->meta_len);
    if (rc < 0) {
        free(blob);
        return rc;
    }
    *out = blob;
    *len = bo.n;
    return 0;
}

/* ---- writing ---- */

struct ol_ec_writer {
    struct ol_deploy *dp;
    struct ol_eset *es;
    struct ol_eset_put *p;
    char bucket[64];
    char *key; /* the object's key, or the part's key (obj/ec_multipart.h) */
    size_t klen;
    bool part;
    /* The caller's release hook (ol_store_write_set_release) and the span
     * of stripe buffer handed out since the last stripe was written. */
    ol_store_release_fn release;
    void *release_ctx;
    uint8_t *lo, *hi;
    size_t room;
    uint64_t bytes; /* appended so far (an encrypted object's field) */
};

uint64_t ol_ec_write_buffer_bytes(struct ol_deploy *dp, const struct ol_obj_target *t,
                                  int64_t size_hint)
{
    /* Every set has one geometry: any set answers for the target's. */
    (void)t;
    return ol_eset_put_buffer_bytes(dp->sets[0], size_hint, EC_WRITER_BUF_BYTES, EC_WRITER_BUFS);
}

int ol_ec_write_begin(struct ol_deploy *dp, const struct ol_obj_target *t, int64_t size_hint,
                      struct ol_ec_writer **out)
{
    struct ol_ec_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->dp = dp;
    snprintf(w->bucket, sizeof(w->bucket), "%s", t->bucket);
    int rc;
    if (t->upload_id) {
        w->part = true;
        rc = ol_ec_part_target(dp, t->bucket, t->upload_id, t->part_no, &w->key, &w->klen);
    } else {
        w->key = malloc(t->key_len ? t->key_len : 1);
        rc = w->key ? 0 : -ENOMEM;
        if (w->key) {
            memcpy(w->key, t->key, t->key_len);
            w->klen = t->key_len;
        }
    }
    if (rc == 0) {
        int ex = ol_deploy_bucket_exists(dp, w->bucket);
        rc = ex < 0 ? ex : ex == 0 ? -OL_ENOBUCKET : 0;
    }
    if (rc == 0) {
        w->es = ol_deploy_set_of(dp, w->bucket, w->key, w->klen);
        rc = ol_eset_put_begin(w->es, w->bucket, w->key, w->klen, &w->p);
    }
    if (rc < 0) {
        free(w->key);
        free(w);
        return quorum_err(dp, rc);
    }
    if (size_hint >= 0)
        ol_eset_put_expect(w->p, (uint64_t)size_hint);
    *out = w;
    return 0;
}

static void writer_free(struct ol_ec_writer *w)
{
    free(w->key);
    free(w);
}

/* The caller may still be reading the bytes handed out (a deferred hash):
 * they are given back before the set may reuse or move its stripe buffer,
 * which it does once a stripe is full. */
static void give_back(struct ol_ec_writer *w)
{
    if (w->release && w->lo && w->hi > w->lo)
        w->release(w->release_ctx, w->lo, (size_t)(w->hi - w->lo));
    w->lo = w->hi = NULL;
}

int ol_ec_write(struct ol_ec_writer *w, const void *buf, size_t len)
{
    give_back(w);
    w->bytes += len;
    return quorum_err(w->dp, ol_eset_put_write(w->p, buf, len));
}

void ol_ec_write_hold(struct ol_ec_writer *w, uint64_t reserved_bytes)
{
    ol_eset_put_hold(w->p, reserved_bytes);
}

void ol_ec_write_set_release(struct ol_ec_writer *w, ol_store_release_fn fn, void *ctx)
{
    w->release = fn;
    w->release_ctx = ctx;
    if (!fn)
        w->lo = w->hi = NULL;
}

int ol_ec_write_room(struct ol_ec_writer *w, uint8_t **p, size_t *len)
{
    int rc = ol_eset_put_room(w->p, p, len);
    if (rc < 0)
        return quorum_err(w->dp, rc);
    w->room = *len;
    if (!w->lo)
        w->lo = *p;
    return 0;
}

int ol_ec_write_advance(struct ol_ec_writer *w, size_t n)
{
    uint8_t *p;
    size_t len;
    /* The room's start, to record what was handed out. */
    if (ol_eset_put_room(w->p, &p, &len) == 0 && (!w->hi || p + n > w->hi))
        w->hi = p + n;
    if (n == w->room)
        give_back(w); /* this fills the stripe: it is written and reused */
    w->bytes += n;
    return quorum_err(w->dp, ol_eset_put_advance(w->p, n));
}

int ol_ec_write_commit_object(struct ol_ec_writer *w, const struct ol_obj_info *info,
                              const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    struct ol_deploy *dp = w->dp;
    give_back(w);
    uint8_t *blob = NULL;
    size_t blen = 0;
    enum ol_versioning ver;
    int rc = ol_ec_versioning_get(dp, w->bucket, &ver);
    if (rc == 0)
        rc = ol_ec_blob_of(info, &blob, &blen);
    struct ol_ec_cond_hold h = {0};
    if (rc == 0 && cond && (cond->if_none_match || cond->if_match)) {
        rc = ol_ec_cond_lock(w->es, w->bucket, w->key, w->klen, &h);
        if (rc == 0)
            rc = ol_ec_cond_check(dp, w->es, w->bucket, w->key, w->klen, cond);
    }
    /* A multipart object being replaced (not kept as an older version):
     * its parts are freed once the new version is in. */
    struct ol_ec_manifest *prev = NULL;
    if (rc == 0 && ver == OL_VERSIONING_OFF)
        (void)ol_ec_manifest_prev(dp, w->bucket, w->key, w->klen, &prev);
    struct ol_eset_obj o;
    if (rc == 0 && h.h && !ol_ec_cond_held(&h))
        rc = -EBUSY; /* the lock may have run out: commit nothing */
    if (rc == 0) {
        char field[112];
        ol_ec_field(field, sizeof(field), info->etag, UINT64_MAX, info->meta, info->meta_len,
                    w->bytes);
        struct ol_eset_commit ci = {.etag = field, .mtime_ns = info->mtime_ns,
                                    .meta = blob, .meta_len = blen, .flags = ol_ec_ver_flags(ver)};
        rc = ol_eset_put_commit2(w->p, &ci, &o);
        w->p = NULL;
        if (rc == 0)
            ol_ec_commit_vid(ver, &o, vid);
    }
    ol_ec_cond_unlock(&h);
    if (rc == 0)
        ol_ec_manifest_release(dp, prev);
    else
        ol_ec_manifest_free(prev);
    if (w->p)
        ol_eset_put_abort(w->p);
    free(blob);
    writer_free(w);
    return quorum_err(dp, rc);
}

int ol_ec_write_commit_part(struct ol_ec_writer *w, const char *etag)
{
    struct ol_deploy *dp = w->dp;
    give_back(w);
    int rc = ol_eset_put_commit(w->p, etag, ol_wall_ns(), NULL);
    writer_free(w);
    return quorum_err(dp, rc);
}

void ol_ec_write_abort(struct ol_ec_writer *w)
{
    ol_eset_put_abort(w->p);
    writer_free(w);
}

/* ---- reading ---- */

struct ol_ec_reader {
    struct ol_deploy *dp;
    struct ol_eset *es;
    char bucket[64];
    char *key;
    size_t klen;
    struct ol_eset_obj o;
    struct ol_obj_info info;
    uint8_t *blob;  /* the version's blob (or a legacy object's metadata) */
    struct blob_view bv;
    uint64_t data_off; /* where the body starts in the stored object */
    struct ol_ec_manifest *mf;
    struct ol_eset_reader *erd; /* the resolved version (NULL: a manifest's) */
    uint8_t *buf; /* one read step, reserved from the body memory budget */
    size_t cap;
    uint64_t reserved;
};

#define READ_BLOB_FIRST 8192u /* most blobs fit: one round trip */

/* The part count of an object stored whole but named as a multipart upload
 * of fixed-size parts (a native PUT, native/etag.h): the sum of the counts
 * of its ":parts" entry ("size*count,..."), 0 when there is none.  A single
 * drive keeps nparts in the object's entry; erasure sets only keep it in
 * manifests, so it is read back from the metadata here. */
static uint32_t parts_in_meta(const struct ol_obj_info *info)
{
    const uint8_t *v;
    size_t vl;
    if (ol_s3_meta_get(info->meta, info->meta_len, OL_S3_META_PARTS, &v, &vl) < 0 || vl > 200)
        return 0;
    char b[201];
    memcpy(b, v, vl);
    b[vl] = 0;
    uint64_t n = 0;
    for (char *p = b; p && *p;) {
        char *star = strchr(p, '*');
        if (!star)
            return 0;
        n += strtoull(star + 1, &p, 10);
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return n <= 10000 ? (uint32_t)n : 0;
}

int ol_ec_read_open(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                    const char *vid, struct ol_ec_reader **out)
{
    struct ol_version_id want;
    bool by_vid = vid != NULL;
    if (by_vid) {
        struct ol_eset_obj vo;
        int vr = vid_resolve(ol_deploy_set_of(dp, bucket, key, key_len), bucket, key, key_len,
                             vid, &vo);
        if (vr == -OL_ENOVERSION && ol_deploy_bucket_exists(dp, bucket) == 0)
            vr = -OL_ENOBUCKET;
        if (vr < 0)
            return quorum_err(dp, vr);
        want = vo.vid;
    }
    struct ol_ec_reader *r = calloc(1, sizeof(*r));
    if (!r || !(r->key = malloc(key_len ? key_len : 1))) {
        free(r);
        return -ENOMEM;
    }
    r->dp = dp;
    snprintf(r->bucket, sizeof(r->bucket), "%s", bucket);
    memcpy(r->key, key, key_len);
    r->klen = key_len;
    r->es = ol_deploy_set_of(dp, bucket, key, key_len);
    size_t cap = READ_BLOB_FIRST, bl = 0;
    r->blob = malloc(cap);
    /* The reader keeps what this resolved: the reads cost no more version
     * calls. */
    int rc = r->blob ? ol_eset_reader_open(r->es, bucket, key, key_len, by_vid ? &want : NULL,
                                           &r->o, r->blob, cap, &bl, &r->erd)
                     : -ENOMEM;
    if (rc == -ENOBUFS) {
        /* A large blob: read that version's again, whole. */
        free(r->blob);
        cap = bl;
        r->blob = malloc(cap);
        struct ol_version_id v = r->o.vid;
        rc = r->blob ? ol_eset_reader_open(r->es, bucket, key, key_len, &v, &r->o, r->blob, cap,
                                           &bl, &r->erd)
                     : -ENOMEM;
    }
    if (rc == -OL_ENOKEY && (r->o.flags & OL_SHARD_DELETE_MARKER) && by_vid)
        rc = -OL_EMARKER;
    else if (rc == -OL_ENOKEY && by_vid)
        rc = -OL_ENOVERSION;
    if (rc == -OL_ENOKEY && ol_deploy_bucket_exists(dp, bucket) == 0)
        rc = -OL_ENOBUCKET;
    char etag[64];
    uint64_t ml = 0, msize = UINT64_MAX;
    if (rc == 0) {
        ol_ec_etag_split(r->o.etag, etag, &ml, &msize);
        if (ml > r->o.size || ml > OL_EC_META_MAX)
            rc = -OL_ECORRUPT;
    }
    if (rc == 0 && bl > 0) {
        rc = blob_parse(r->blob, bl, &r->bv);
    } else if (rc == 0 && ml > 0) {
        /* An object written before versions had blobs: its metadata leads
         * its bytes.  Every read names the version stat resolved. */
        free(r->blob);
        r->blob = malloc(ml);
        rc = r->blob ? ol_eset_reader_read(r->erd, 0, ml, r->blob) : -ENOMEM;
        r->bv.meta = r->blob;
        r->bv.meta_len = (uint32_t)ml;
    }
    if (rc == 0 && msize != UINT64_MAX)
        rc = ol_ec_manifest_load(dp, bucket, key, key_len, &r->o, ml, &r->mf);
    if (rc == 0 && r->mf)
        rc = ol_ec_manifest_hold(r->mf);
    if (rc < 0) {
        ol_ec_read_close(r);
        return quorum_err(dp, rc);
    }
    r->data_off = ml;
    r->info.size = msize != UINT64_MAX ? msize : r->o.size - ml;
    r->info.mtime_ns = r->o.mtime_ns;
    memcpy(r->info.etag, etag, sizeof(r->info.etag));
    r->info.meta = r->bv.meta;
    r->info.meta_len = r->bv.meta_len;
    r->info.nparts = r->mf ? ol_ec_manifest_nparts(r->mf) : parts_in_meta(&r->info);
    *out = r;
    return 0;
}

struct attr_find {
    const char *name;
    const uint8_t *val;
    size_t len;
};

static int attr_find_cb(void *ctx, const char *name, size_t nl, const uint8_t *val, size_t vl)
{
    struct attr_find *f = ctx;
    if (strlen(f->name) != nl || memcmp(f->name, name, nl) != 0)
        return 0;
    f->val = val;
    f->len = vl;
    return 1;
}

int ol_ec_read_attr(const struct ol_ec_reader *r, const char *name, const uint8_t **val,
                    size_t *len)
{
    struct attr_find f = {name, NULL, 0};
    int rc = blob_attrs(&r->bv, attr_find_cb, &f);
    if (rc < 0)
        return rc;
    if (!f.val && rc == 0)
        return -OL_ENOCONFIG;
    *val = f.val;
    *len = f.len;
    return 0;
}

int ol_ec_read_vid(const struct ol_ec_reader *r, char vid[OL_STORE_VID_MAX])
{
    vid_text(&r->o, vid);
    /* Written before versioning: no id of its own (store.h's contract). */
    return r->o.flags & (OL_SHARD_KEEP_OLDER | OL_SHARD_NULL) ? 0 : -OL_ENOCONFIG;
}

const struct ol_obj_info *ol_ec_read_info(const struct ol_ec_reader *r)
{
    return &r->info;
}

ssize_t ol_ec_read(struct ol_ec_reader *r, uint64_t off, size_t max, const uint8_t **data)
{
    if (off >= r->info.size || max == 0)
        return 0;
    uint64_t left = r->info.size - off;
    size_t n = max < left ? max : (size_t)left;
    if (n > EC_CHUNK_BYTES)
        n = EC_CHUNK_BYTES;
    if (!r->buf) {
        /* Sized to what is read (a range or a small object needs less than
         * a step) and reserved from the body memory budget with what the
         * set's read of a step holds (the drives' spans, twice for a
         * degraded read): a crowd of stalled GETs holds at most the budget. */
        r->cap = n;
        r->reserved = 3 * page_up(n);
        int rc = ol_bodymem_reserve(r->reserved, dp_wait_ms(r->dp));
        if (rc < 0) {
            r->reserved = 0;
            return rc;
        }
        r->buf = ol_buf_alloc(r->cap);
        if (!r->buf)
            return -ENOMEM;
    }
    if (n > r->cap)
        n = r->cap;
    int rc = r->mf ? ol_ec_manifest_read(r->mf, off, n, r->buf)
                   : ol_eset_reader_read(r->erd, r->data_off + off, n, r->buf);
    if (rc < 0) {
        ol_log_limited(OL_LOG_ERROR, "EC read %s at %" PRIu64 ": %s", r->bucket, off,
                       ol_strerror(rc));
        return quorum_err(r->dp, rc);
    }
    *data = r->buf;
    return (ssize_t)n;
}

ssize_t ol_ec_read_file(struct ol_ec_reader *r, uint64_t off, size_t max, int *fd,
                        uint64_t *foff)
{
    if (r->mf || !r->erd || off >= r->info.size)
        return -EAGAIN;
    uint64_t left = r->info.size - off;
    return ol_eset_reader_file(r->erd, r->data_off + off, max < left ? max : (size_t)left, fd,
                               foff);
}

ssize_t ol_ec_read_map(struct ol_ec_reader *r, uint64_t off, size_t max, bool check,
                       const uint8_t **data)
{
    if (off >= r->info.size)
        return -EAGAIN;
    uint64_t left = r->info.size - off;
    size_t n = max < left ? max : (size_t)left;
    if (r->mf)
        return ol_ec_manifest_map(r->mf, off, n, check, data);
    return r->erd ? ol_eset_reader_map(r->erd, r->data_off + off, n, check, data) : -EAGAIN;
}

int ol_ec_read_direct(const struct ol_ec_reader *r, unsigned *set, struct ol_eset_geom *g)
{
    if (r->mf || !r->erd || r->data_off)
        return -ENOTSUP;
    unsigned ns = ol_deploy_nsets(r->dp);
    for (unsigned i = 0; i < ns; i++)
        if (ol_deploy_set(r->dp, i) == r->es) {
            *set = i;
            ol_eset_reader_geom(r->erd, g);
            return 0;
        }
    return -ENOTSUP;
}

void ol_ec_read_close(struct ol_ec_reader *r)
{
    if (!r)
        return;
    ol_eset_reader_close(r->erd);
    ol_ec_manifest_free(r->mf);
    if (r->buf)
        ol_buf_free(r->buf, r->cap);
    ol_bodymem_release(r->reserved);
    free(r->blob);
    free(r->key);
    free(r);
}

/* ---- object attributes ---- */

struct attr_copy {
    struct blob_out *o;
    const char *skip;
};

static int attr_copy_cb(void *ctx, const char *name, size_t nl, const uint8_t *val, size_t vl)
{
    struct attr_copy *a = ctx;
    if (strlen(a->skip) != nl || memcmp(a->skip, name, nl) != 0)
        out_attr(a->o, name, nl, val, vl);
    return 0;
}

int ol_ec_attr_put(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                   const char *vid, const char *name, const void *val, size_t len,
                   char vid_out[OL_STORE_VID_MAX])
{
    if (!name[0] || strncmp(name, "ol.", 3) == 0 || strlen(name) > OL_OBJ_ATTR_NAME_MAX)
        return -EINVAL;
    if (len > OL_OBJ_ATTR_VAL_MAX)
        return -OL_ETOOLARGE;
    struct ol_ec_reader *r;
    int rc = ol_ec_read_open(dp, bucket, key, key_len, vid, &r);
    if (rc < 0)
        return rc;
    uint8_t *blob = malloc(OL_ESET_META_MAX);
    struct blob_out bo;
    rc = blob ? 0 : -ENOMEM;
    if (rc == 0) {
        /* The whole blob is written again, with this attribute changed: the
         * drives keep the newest (ec/eset.h, ol_eset_set_meta). */
        blob_begin(&bo, blob, OL_ESET_META_MAX, r->bv.meta, r->bv.meta_len);
        struct attr_copy ac = {&bo, name};
        rc = blob_attrs(&r->bv, attr_copy_cb, &ac);
        if (rc == 0 && val)
            out_attr(&bo, name, strlen(name), val, len);
        if (rc == 0)
            rc = blob_end(&bo, r->bv.meta_len);
    }
    if (rc == 0)
        rc = ol_eset_set_meta(r->es, bucket, key, key_len, &r->o.vid, blob, bo.n);
    if (rc == 0 && vid_out) {
        if (ol_ec_read_vid(r, vid_out) < 0 && !vid)
            vid_out[0] = 0;
    }
    free(blob);
    ol_ec_read_close(r);
    return quorum_err(dp, rc);
}

/* ---- copies ----
 *
 * A copy whose source and destination keys are in the same erasure set is
 * made by reference: each drive shares its shard's extents with the new
 * version (ol_eset_copy), which keeps the source's rotation, so it costs a
 * few metadata writes per drive whatever the size.  A multipart source is
 * copied as a new manifest naming by-reference copies of its parts
 * (ol_ec_manifest_share).  Otherwise the source's bytes are streamed into a
 * new version of the target: another set, an object written before
 * versions had blobs (its metadata leads its bytes), a source on fewer
 * drives than a PUT needs (the streamed read reconstructs), or drives that
 * cannot copy by reference. */

struct copy_attrs {
    struct ol_obj_attr *v;
    uint32_t n;
    const struct ol_store_copy_opts *c;
};

static int copy_attr_cb(void *ctx, const char *name, size_t nl, const uint8_t *val, size_t vl)
{
    struct copy_attrs *a = ctx;
    for (uint32_t i = 0; i < a->c->nattrs; i++)
        if (strlen(a->c->attrs[i].name) == nl && memcmp(a->c->attrs[i].name, name, nl) == 0)
            return 0; /* changed by the copy */
    if (a->n >= OL_OBJ_ATTRS_MAX || nl > OL_OBJ_ATTR_NAME_MAX)
        return 0;
    char *nm = malloc(nl + 1);
    if (!nm)
        return -ENOMEM;
    memcpy(nm, name, nl);
    nm[nl] = 0;
    a->v[a->n++] = (struct ol_obj_attr){nm, val, vl};
    return 0;
}

static int copy_stream(struct ol_ec_reader *rd, struct ol_ec_writer *w, uint64_t off,
                       uint64_t len, struct ol_md5 *md)
{
    while (len > 0) {
        const uint8_t *data;
        ssize_t n = ol_ec_read(rd, off, len < EC_CHUNK_BYTES ? (size_t)len : EC_CHUNK_BYTES,
                               &data);
        if (n <= 0)
            return n < 0 ? (int)n : -OL_ECORRUPT;
        if (md)
            ol_md5_update(md, data, (size_t)n);
        int rc = ol_ec_write(w, data, (size_t)n);
        if (rc < 0)
            return rc;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Whether a by-reference copy failed in a way that streaming may not. */
static bool copy_ref_declined(int rc)
{
    return rc == -EXDEV || rc == -EOPNOTSUPP || rc == -OL_EQUORUM;
}

/* CopyObject by reference of the version rd has open onto db/dk with info's
 * metadata, attributes, ETag and mtime.  -EXDEV when it cannot be (another
 * set, a legacy object): the caller streams; -EOPNOTSUPP and -OL_EQUORUM
 * too (nothing was written). */
static int copy_ref(struct ol_deploy *dp, struct ol_ec_reader *rd, const char *db, const char *dk,
                    size_t dl, const struct ol_obj_info *info, const struct ol_store_cond *cond,
                    char vid[OL_STORE_VID_MAX])
{
    struct ol_eset *es = ol_deploy_set_of(dp, db, dk, dl);
    if (!rd->mf && (es != rd->es || rd->data_off != 0))
        return -EXDEV;
    int ex = ol_deploy_bucket_exists(dp, db);
    if (ex <= 0)
        return ex < 0 ? ex : -OL_ENOBUCKET;
    uint8_t *blob = NULL, *rec = NULL;
    size_t blen = 0, rlen = 0;
    char id[40] = "";
    struct ol_ec_cond_hold h = {0};
    struct ol_ec_manifest *prev = NULL;
    enum ol_versioning ver;
    int rc = ol_ec_versioning_get(dp, db, &ver);
    if (rc == 0)
        rc = ol_ec_blob_of(info, &blob, &blen);
    /* A manifest's parts first: they are no key's yet, so no lock is held
     * while they are copied. */
    if (rc == 0 && rd->mf)
        rc = ol_ec_manifest_share(dp, rd->mf, db, id, &rec, &rlen);
    if (rc < 0)
        goto out;
    if (cond && (cond->if_none_match || cond->if_match)) {
        rc = ol_ec_cond_lock(es, db, dk, dl, &h);
        if (rc == 0)
            rc = ol_ec_cond_check(dp, es, db, dk, dl, cond);
        if (rc < 0)
            goto out;
    }
    /* A multipart object being replaced (not kept as an older version):
     * its parts go once the copy is in. */
    if (ver == OL_VERSIONING_OFF)
        (void)ol_ec_manifest_prev(dp, db, dk, dl, &prev);
    struct ol_eset_obj o;
    if (h.h && !ol_ec_cond_held(&h)) {
        rc = -EBUSY; /* the lock may have run out: commit nothing */
        goto out;
    }
    if (rd->mf) {
        char field[112];
        ol_ec_field(field, sizeof(field), info->etag, info->size, info->meta, info->meta_len,
                    info->size);
        struct ol_eset_commit ci = {.etag = field, .mtime_ns = info->mtime_ns, .meta = blob,
                                    .meta_len = blen, .flags = ol_ec_ver_flags(ver)};
        struct ol_eset_put *p = NULL;
        rc = ol_eset_put_begin(es, db, dk, dl, &p);
        if (rc == 0) {
            ol_eset_put_expect(p, rlen);
            rc = ol_eset_put_write(p, rec, rlen);
            if (rc == 0)
                rc = ol_eset_put_commit2(p, &ci, &o);
            else
                ol_eset_put_abort(p);
        }
    } else {
        char field[112];
        ol_ec_field(field, sizeof(field), info->etag, UINT64_MAX, info->meta, info->meta_len,
                    info->size);
        struct ol_eset_commit ci = {.etag = field, .mtime_ns = info->mtime_ns,
                                    .meta = blob, .meta_len = blen,
                                    .flags = ol_ec_ver_flags(ver)};
        rc = ol_eset_copy(es, rd->bucket, rd->key, rd->klen, &rd->o.vid, db, dk, dl, &ci, &o);
    }
    if (rc == 0)
        ol_ec_commit_vid(ver, &o, vid);
out:
    ol_ec_cond_unlock(&h);
    if (rc == 0) {
        ol_ec_manifest_release(dp, prev);
    } else {
        ol_ec_manifest_free(prev);
        if (id[0])
            ol_ec_manifest_unshare(dp, db, id);
    }
    free(rec);
    free(blob);
    return rc;
}

int ol_ec_copy(struct ol_deploy *dp, const char *sb, const char *sk, size_t sl, const char *svid,
               const char *db, const char *dk, size_t dl, const struct ol_store_copy_opts *c,
               struct ol_obj_info *out, char vid[OL_STORE_VID_MAX])
{
    struct ol_ec_reader *rd = NULL;
    struct ol_ec_writer *w = NULL;
    struct ol_obj_attr attrs[OL_OBJ_ATTRS_MAX];
    struct copy_attrs ca = {attrs, 0, c};
    int rc = ol_ec_read_open(dp, sb, sk, sl, svid, &rd);
    if (rc < 0)
        return rc;
    const struct ol_obj_info *si = &rd->info;
    if (c->src_etag && strcmp(c->src_etag, si->etag) != 0) {
        rc = -OL_EPRECONDITION;
        goto out;
    }
    /* The copy's attributes: the source's, changed by c->attrs. */
    rc = blob_attrs(&rd->bv, copy_attr_cb, &ca);
    for (uint32_t i = 0; rc == 0 && i < c->nattrs && ca.n < OL_OBJ_ATTRS_MAX; i++)
        if (c->attrs[i].val)
            attrs[ca.n++] = (struct ol_obj_attr){strdup(c->attrs[i].name), c->attrs[i].val,
                                                 c->attrs[i].len};
    if (rc < 0)
        goto out;
    struct ol_obj_info info = {
        .size = si->size,
        .mtime_ns = c->mtime_ns,
        .nparts = si->nparts,
        .meta = c->replace_meta ? c->meta : si->meta,
        .meta_len = c->replace_meta ? c->meta_len : si->meta_len,
        .attrs = attrs,
        .nattrs = ca.n,
    };
    memcpy(info.etag, si->etag, sizeof(info.etag));
    rc = copy_ref(dp, rd, db, dk, dl, &info, c->dst_cond, vid);
    if (copy_ref_declined(rc)) {
        struct ol_obj_target t = {.bucket = db, .key = dk, .key_len = dl};
        rc = ol_ec_write_begin(dp, &t, (int64_t)si->size, &w);
        if (rc == 0)
            rc = copy_stream(rd, w, 0, si->size, NULL);
        if (rc < 0)
            goto out;
        rc = ol_ec_write_commit_object(w, &info, c->dst_cond, vid);
        w = NULL;
    } else if (rc < 0) {
        rc = quorum_err(dp, rc);
    }
    if (rc == 0 && out) {
        memset(out, 0, sizeof(*out));
        out->size = info.size;
        out->mtime_ns = info.mtime_ns;
        out->nparts = info.nparts;
        memcpy(out->etag, info.etag, sizeof(out->etag));
    }
out:
    for (uint32_t i = 0; i < ca.n; i++)
        free((char *)attrs[i].name);
    if (w)
        ol_ec_write_abort(w);
    ol_ec_read_close(rd);
    return rc;
}

static bool is_md5_hex(const char *s)
{
    size_t i = 0;
    for (; s[i] && i < 33; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return i == 32;
}

/* UploadPartCopy of the whole version rd has open, by reference: -EXDEV
 * when it cannot be (a manifest, a legacy object, an ETag that is not the
 * MD5 of the bytes, the part's key in another set). */
static int copy_part_ref(struct ol_deploy *dp, struct ol_ec_reader *rd, const char *bucket,
                         const char *upload_id, uint32_t part_no, char etag[64])
{
    if (rd->mf || rd->data_off != 0 || !is_md5_hex(rd->info.etag))
        return -EXDEV;
    char *key = NULL;
    size_t klen = 0;
    int rc = ol_ec_part_target(dp, bucket, upload_id, part_no, &key, &klen);
    if (rc < 0)
        return rc;
    int ex = ol_deploy_bucket_exists(dp, bucket);
    struct ol_eset *es = ol_deploy_set_of(dp, bucket, key, klen);
    if (ex <= 0) {
        rc = ex < 0 ? ex : -OL_ENOBUCKET;
    } else if (es != rd->es) {
        rc = -EXDEV;
    } else {
        struct ol_eset_commit ci = {.etag = rd->info.etag, .mtime_ns = ol_wall_ns()};
        rc = ol_eset_copy(es, rd->bucket, rd->key, rd->klen, &rd->o.vid, bucket, key, klen, &ci,
                          NULL);
    }
    if (rc == 0)
        snprintf(etag, 64, "%s", rd->info.etag);
    free(key);
    return rc;
}

int ol_ec_copy_part(struct ol_deploy *dp, const char *sb, const char *sk, size_t sl,
                    uint64_t off, uint64_t len, const char *src_etag, const char *bucket,
                    const char *upload_id, uint32_t part_no, char etag[64])
{
    struct ol_ec_reader *rd = NULL;
    struct ol_ec_writer *w = NULL;
    int rc = ol_ec_read_open(dp, sb, sk, sl, NULL, &rd);
    if (rc < 0)
        return rc;
    if (src_etag && strcmp(src_etag, rd->info.etag) != 0) {
        rc = -OL_EPRECONDITION;
        goto out;
    }
    if (len == 0 || off >= rd->info.size || len > rd->info.size - off) {
        rc = -ERANGE;
        goto out;
    }
    /* A whole single-PUT source (its ETag is the MD5 of its bytes, the
     * part's ETag) is copied by reference; a range, or a multipart source
     * whose part ETag must be computed, is streamed. */
    if (off == 0 && len == rd->info.size) {
        rc = copy_part_ref(dp, rd, bucket, upload_id, part_no, etag);
        if (!copy_ref_declined(rc)) {
            rc = quorum_err(dp, rc);
            goto out;
        }
    }
    struct ol_obj_target t = {.bucket = bucket, .upload_id = upload_id, .part_no = part_no};
    rc = ol_ec_write_begin(dp, &t, (int64_t)len, &w);
    struct ol_md5 md;
    ol_md5_init(&md);
    if (rc == 0)
        rc = copy_stream(rd, w, off, len, &md);
    if (rc < 0)
        goto out;
    uint8_t dig[16];
    ol_md5_final(&md, dig);
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        etag[2 * i] = hx[dig[i] >> 4];
        etag[2 * i + 1] = hx[dig[i] & 15];
    }
    etag[32] = 0;
    rc = ol_ec_write_commit_part(w, etag);
    w = NULL;
out:
    if (w)
        ol_ec_write_abort(w);
    ol_ec_read_close(rd);
    return rc;
}

/* ---- deleting ---- */

int ol_ec_delete(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len)
{
    int ex = ol_deploy_bucket_exists(dp, bucket);
    if (ex <= 0)
        return ex < 0 ? quorum_err(dp, ex) : -OL_ENOBUCKET;
    struct ol_ec_manifest *prev = NULL;
    (void)ol_ec_manifest_prev(dp, bucket, key, key_len, &prev);
    int rc = ol_eset_delete(ol_deploy_set_of(dp, bucket, key, key_len), bucket, key, key_len);
    if (rc < 0) {
        ol_ec_manifest_free(prev);
        return quorum_err(dp, rc);
    }
    /* After the delete, never before: a part must not go while an object
     * still refers to it. */
    ol_ec_manifest_release(dp, prev);
    return 0;
}

int ol_ec_delete_v(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                   const char *vid, struct ol_store_del_res *res)
{
    struct ol_store_del_res scratch;
    if (!res)
        res = &scratch;
    memset(res, 0, sizeof(*res));
    enum ol_versioning ver;
    int rc = ol_ec_versioning_get(dp, bucket, &ver);
    if (rc < 0)
        return rc;
    struct ol_eset *es = ol_deploy_set_of(dp, bucket, key, key_len);
    if (!vid) {
        if (ver == OL_VERSIONING_OFF)
            return ol_ec_delete(dp, bucket, key, key_len);
        int ex = ol_deploy_bucket_exists(dp, bucket);
        if (ex <= 0)
            return ex < 0 ? quorum_err(dp, ex) : -OL_ENOBUCKET;
        struct ol_eset_obj o;
        rc = ol_eset_delete_marker(es, bucket, key, key_len, ol_ec_ver_flags(ver), ol_wall_ns(), &o);
        if (rc < 0)
            return quorum_err(dp, rc);
        res->marker = true;
        vid_text(&o, res->vid);
        return 0;
    }
    struct ol_eset_obj o;
    rc = vid_resolve(es, bucket, key, key_len, vid, &o);
    if (rc == 0 && strcmp(vid, "null") != 0) {
        /* The version must exist: S3 answers an unknown id NoSuchVersion. */
        struct ol_eset_obj *v = malloc(sizeof(*v) * OL_EC_MAX_VERSIONS);
        int n = v ? ol_eset_versions(es, bucket, key, key_len, v, OL_EC_MAX_VERSIONS) : -ENOMEM;
        rc = n < 0 ? n : -OL_ENOVERSION;
        for (int i = 0; i < n; i++)
            if (memcmp(&v[i].vid, &o.vid, sizeof(o.vid)) == 0) {
                o = v[i];
                rc = 0;
            }
        free(v);
    }
    if (rc == -OL_ENOVERSION && ol_deploy_bucket_exists(dp, bucket) == 0)
        rc = -OL_ENOBUCKET;
    if (rc < 0)
        return quorum_err(dp, rc);
    /* A multipart version's parts go after it, never before. */
    struct ol_ec_manifest *mf = NULL;
    char etag[64];
    uint64_t ml, msize;
    ol_ec_etag_split(o.etag, etag, &ml, &msize);
    if (!(o.flags & OL_SHARD_DELETE_MARKER) && msize != UINT64_MAX)
        (void)ol_ec_manifest_load(dp, bucket, key, key_len, &o, ml, &mf);
    rc = ol_eset_delete_version(es, bucket, key, key_len, &o.vid);
    if (rc < 0) {
        ol_ec_manifest_free(mf);
        return quorum_err(dp, rc);
    }
    ol_ec_manifest_release(dp, mf);
    res->marker = (o.flags & OL_SHARD_DELETE_MARKER) != 0;
    snprintf(res->vid, sizeof(res->vid), "%s", vid);
    return 0;
}

int ol_ec_latest_marker(struct ol_deploy *dp, const char *bucket, const char *key,
                        size_t key_len, char vid[OL_STORE_VID_MAX], int64_t *mtime_ns)
{
    struct ol_eset_obj o;
    int n = ol_eset_versions(ol_deploy_set_of(dp, bucket, key, key_len), bucket, key, key_len,
                             &o, 1);
    if (n <= 0)
        return n < 0 ? quorum_err(dp, n) : 0;
    if (!(o.flags & OL_SHARD_DELETE_MARKER))
        return 0;
    vid_text(&o, vid);
    if (mtime_ns)
        *mtime_ns = o.mtime_ns;
    return 1;
}

/* ---- listing ----
 *
 * Keys of every set merged in byte order, a page of EC_ITER_PAGE keys per
 * set at a time, with ol_store_iter's contract (info->meta is NULL). */

struct ec_ent {
    uint32_t klen;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64];
    char key[OL_DRIVE_MAX_KEY];
};

struct ol_ec_iter {
    struct ol_deploy *ec;
    char bucket[64];
    struct ec_ent *ents; /* EC_ITER_PAGE per set */
    unsigned n, pos;
    bool done;
    /* Keys strictly after cur are next; with floor set, keys below floor
     * are skipped (an inclusive start). */
    char cur[OL_DRIVE_MAX_KEY];
    size_t cur_len;
    char floor[OL_DRIVE_MAX_KEY];
    size_t floor_len;
    struct ec_ent *tmp;
    unsigned ntmp;
    bool markers; /* keys whose newest version is a delete marker too */
    /* The sets at open (a pool added later is not part of this listing:
     * the pages are sized by it). */
    unsigned nsets;
};

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an < bn ? -1 : an > bn);
}

static int ent_cmp(const void *a, const void *b)
{
    const struct ec_ent *x = a, *y = b;
    return bytes_cmp(x->key, x->klen, y->key, y->klen);
}

static int iter_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    struct ol_ec_iter *it = ctx;
    if (klen > OL_DRIVE_MAX_KEY)
        return 0;
    struct ec_ent *e = &it->tmp[it->ntmp++];
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    uint64_t ml, msize;
    ol_ec_etag_split(o->etag, e->etag, &ml, &msize);
    e->size = msize != UINT64_MAX ? msize : o->size >= ml ? o->size - ml : 0;
    uint64_t plain = ol_ec_etag_plain(o->etag, e->size);
    if (plain != UINT64_MAX)
        e->size = plain; /* an encrypted object's plaintext size */
    e->mtime_ns = o->mtime_ns;
    return it->ntmp >= EC_ITER_PAGE * it->nsets ? 1 : 0;
}

/* Fills the page with the next keys of every set, merged. */
static int iter_fill(struct ol_ec_iter *it)
{
    it->n = it->pos = 0;
    it->ntmp = 0;
    const struct ec_ent *bound = NULL; /* the smallest last key of a full set page */
    for (unsigned s = 0; s < it->nsets; s++) {
        unsigned before = it->ntmp;
        int rc = it->markers ? ol_eset_list_markers(it->ec->sets[s], it->bucket, it->cur,
                                                    it->cur_len, EC_ITER_PAGE, iter_cb, it)
                             : ol_eset_list(it->ec->sets[s], it->bucket, it->cur, it->cur_len,
                                            EC_ITER_PAGE, iter_cb, it);
        if (rc < 0)
            return rc;
        if (it->ntmp - before == EC_ITER_PAGE) {
            const struct ec_ent *last = &it->tmp[it->ntmp - 1];
            if (!bound || ent_cmp(last, bound) < 0)
                bound = last;
        }
    }
    struct ec_ent b;
    if (bound)
        b = *bound;
    qsort(it->tmp, it->ntmp, sizeof(*it->tmp), ent_cmp);
    for (unsigned i = 0; i < it->ntmp; i++) {
        if (bound && ent_cmp(&it->tmp[i], &b) > 0)
            break;
        /* One key in two pools (two first writes raced, docs/EC.md 3.1):
         * listed once, as its newer copy (the one reads find). */
        if (it->n > 0 && ent_cmp(&it->ents[it->n - 1], &it->tmp[i]) == 0) {
            if (it->tmp[i].mtime_ns > it->ents[it->n - 1].mtime_ns)
                it->ents[it->n - 1] = it->tmp[i];
            continue;
        }
        it->ents[it->n++] = it->tmp[i];
    }
    it->done = !bound;
    if (it->n > 0) {
        const struct ec_ent *l = &it->ents[it->n - 1];
        memcpy(it->cur, l->key, l->klen);
        it->cur_len = l->klen;
    }
    return 0;
}

static void iter_position(struct ol_ec_iter *it, const char *from, size_t from_len,
                          bool inclusive)
{
    it->n = it->pos = 0;
    it->done = false;
    it->floor_len = 0;
    if (from_len > OL_DRIVE_MAX_KEY)
        from_len = OL_DRIVE_MAX_KEY;
    /* Keys that begin with NUL are the multipart namespace (uploads and
     * parts, s3/ec_multipart.h); S3 keys cannot hold NUL, so every listing
     * starts after all of them. */
    if (from_len == 0 || from[0] == 0) {
        memcpy(it->cur, OL_EC_MP_LIST_FLOOR, 2);
        it->cur_len = 2;
        return;
    }
    if (!inclusive) {
        memcpy(it->cur, from, from_len);
        it->cur_len = from_len;
        return;
    }
    /* Keys >= from: list after from without its last byte and skip what
     * sorts below from. */
    memcpy(it->cur, from, from_len - 1);
    it->cur_len = from_len - 1;
    memcpy(it->floor, from, from_len);
    it->floor_len = from_len;
}

int ol_ec_iter_open(struct ol_deploy *ec, const char *bucket, const char *from,
                       size_t from_len, bool inclusive, struct ol_ec_iter **out)
{
    int ex = ol_deploy_bucket_exists(ec, bucket);
    if (ex <= 0)
        return ex < 0 ? quorum_err(ec, ex) : -OL_ENOBUCKET;
    struct ol_ec_iter *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    it->ec = ec;
    snprintf(it->bucket, sizeof(it->bucket), "%s", bucket);
    it->nsets = ec->nsets;
    it->ents = malloc(sizeof(*it->ents) * EC_ITER_PAGE * it->nsets);
    it->tmp = malloc(sizeof(*it->tmp) * EC_ITER_PAGE * it->nsets);
    if (!it->ents || !it->tmp) {
        ol_ec_iter_close(it);
        return -ENOMEM;
    }
    iter_position(it, from ? from : "", from ? from_len : 0, inclusive);
    *out = it;
    return 0;
}

int ol_ec_iter_next(struct ol_ec_iter *it, const char **key, size_t *key_len,
                       struct ol_obj_info *info)
{
    /* Each round returns an entry, fills a page, or ends. */
    for (unsigned guard = 0; guard < (1u << 24); guard++) {
        if (it->pos == it->n) {
            if (it->done)
                return 1;
            int rc = iter_fill(it);
            if (rc < 0)
                return rc;
            if (it->n == 0)
                return 1;
        }
        const struct ec_ent *e = &it->ents[it->pos++];
        if (it->floor_len && bytes_cmp(e->key, e->klen, it->floor, it->floor_len) < 0)
            continue;
        memset(info, 0, sizeof(*info));
        info->size = e->size;
        info->mtime_ns = e->mtime_ns;
        memcpy(info->etag, e->etag, sizeof(info->etag));
        *key = e->key;
        *key_len = e->klen;
        return 0;
    }
    return -ELOOP;
}

int ol_ec_iter_seek(struct ol_ec_iter *it, const char *from, size_t from_len,
                       bool inclusive)
{
    iter_position(it, from, from_len, inclusive);
    return 0;
}

void ol_ec_iter_close(struct ol_ec_iter *it)
{
    if (!it)
        return;
    free(it->ents);
    free(it->tmp);
    free(it);
}


/* ---- every version (ListObjectVersions, lifecycle) ----
 *
 * The keys (delete markers included) in order, and each key's readable
 * versions newest first, from the set that holds it. */

struct ol_ec_viter {
    struct ol_deploy *dp;
    struct ol_ec_iter *keys;
    char key[OL_DRIVE_MAX_KEY];
    size_t klen;
    struct ol_eset_obj *v;
    int nv, pos;
};

int ol_ec_viter_open(struct ol_deploy *dp, const char *bucket, struct ol_ec_viter **out)
{
    struct ol_ec_viter *it = calloc(1, sizeof(*it));
    if (!it || !(it->v = malloc(sizeof(*it->v) * OL_EC_MAX_VERSIONS))) {
        free(it);
        return -ENOMEM;
    }
    it->dp = dp;
    int rc = ol_ec_iter_open(dp, bucket, NULL, 0, true, &it->keys);
    if (rc < 0) {
        free(it->v);
        free(it);
        return rc;
    }
    it->keys->markers = true;
    *out = it;
    return 0;
}

int ol_ec_viter_seek(struct ol_ec_viter *it, const char *from, size_t from_len)
{
    it->nv = it->pos = 0;
    return ol_ec_iter_seek(it->keys, from, from_len, true);
}

int ol_ec_viter_next(struct ol_ec_viter *it, const char **key, size_t *key_len,
                     struct ol_version_info *vi)
{
    /* Each round returns a version or moves to the next key. */
    while (it->pos >= it->nv) {
        const char *k;
        size_t kl;
        struct ol_obj_info info;
        int rc = ol_ec_iter_next(it->keys, &k, &kl, &info);
        if (rc != 0)
            return rc;
        memcpy(it->key, k, kl);
        it->klen = kl;
        struct ol_eset *es = ol_deploy_set_of(it->dp, it->keys->bucket, k, kl);
        it->nv = ol_eset_versions(es, it->keys->bucket, k, kl, it->v, OL_EC_MAX_VERSIONS);
        if (it->nv < 0)
            return quorum_err(it->dp, it->nv);
        it->pos = 0;
    }
    const struct ol_eset_obj *o = &it->v[it->pos];
    memset(vi, 0, sizeof(*vi));
    vi->is_latest = it->pos == 0;
    vi->is_marker = (o->flags & OL_SHARD_DELETE_MARKER) != 0;
    vid_text(o, vi->vid);
    if (!vi->is_marker) {
        uint64_t ml, msize;
        ol_ec_etag_split(o->etag, vi->info.etag, &ml, &msize);
        vi->info.size = msize != UINT64_MAX ? msize : o->size >= ml ? o->size - ml : 0;
        uint64_t plain = ol_ec_etag_plain(o->etag, vi->info.size);
        if (plain != UINT64_MAX)
            vi->info.size = plain;
    }
    vi->info.mtime_ns = o->mtime_ns;
    it->pos++;
    *key = it->key;
    *key_len = it->klen;
    return 0;
}

void ol_ec_viter_close(struct ol_ec_viter *it)
{
    if (!it)
        return;
    ol_ec_iter_close(it->keys);
    free(it->v);
    free(it);
}
