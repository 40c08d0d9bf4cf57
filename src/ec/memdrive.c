/* The in-memory drive: see memdrive.h. */
#include "ec/memdrive.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/locktab.h"

struct md_version {
    struct ol_shard_meta sm;
    uint8_t *meta; /* the blob, sm.meta_len bytes (NULL when none) */
    uint8_t *data;
    uint64_t len;
    uint32_t *crc; /* one per OL_MEMDRIVE_BLOCK_BYTES block */
};

struct md_obj {
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    uint32_t klen;
    char key[OL_DRIVE_MAX_KEY];
    unsigned nver, cap;
    struct md_version *ver; /* newest first */
};

/* A bucket and its settings (ec/drive.h's bucket ops), kept apart from
 * the shards: as on a store, shards may sit in a bucket the drive does not
 * list (shard_begin does not need one). */
struct md_setting {
    struct md_setting *next;
    char name[65];
    size_t len;
    uint8_t val[]; /* len bytes */
};

struct md_bucket {
    struct md_bucket *next; /* name order */
    char name[OL_DRIVE_MAX_BUCKET + 1];
    int64_t ctime_ns;
    struct md_setting *cfg;
};

struct ol_memdrive {
    pthread_mutex_t mu;
    struct md_bucket *buckets;
    struct md_obj **objs; /* sorted by (bucket, key) */
    size_t nobjs, cap;
    bool offline;
    uint64_t fail_in; /* mutating calls until the injected failure; 0: none */
    unsigned latency_us;
    struct ol_memdrive_stats st;
    uint64_t free_bytes, total_bytes; /* what space answers (set by the tests) */
    struct ol_locktab *locks; /* drive.h's locks (wipe forgets them too) */
};

struct md_writer {
    struct ol_memdrive *md;
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    uint32_t klen;
    char key[OL_DRIVE_MAX_KEY];
    uint8_t *buf;
    size_t len, cap;
};

static int key_cmp(const char *b1, const char *k1, size_t l1, const char *b2, const char *k2,
                   size_t l2)
{
    int c = strcmp(b1, b2);
    if (c)
        return c;
    c = memcmp(k1, k2, l1 < l2 ? l1 : l2);
    if (c)
        return c;
    return l1 < l2 ? -1 : l1 > l2;
}

/* Index of the first object >= (bucket, key). */
static size_t lower_bound(struct ol_memdrive *md, const char *bucket, const char *key, size_t klen)
{
    size_t lo = 0, hi = md->nobjs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct md_obj *o = md->objs[mid];
        if (key_cmp(o->bucket, o->key, o->klen, bucket, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct md_obj *find_obj(struct ol_memdrive *md, const char *bucket, const char *key,
                               size_t klen, size_t *pos)
{
    size_t i = lower_bound(md, bucket, key, klen);
    if (pos)
        *pos = i;
    if (i < md->nobjs &&
        key_cmp(md->objs[i]->bucket, md->objs[i]->key, md->objs[i]->klen, bucket, key, klen) == 0)
        return md->objs[i];
    return NULL;
}

static int find_ver(const struct md_obj *o, const struct ol_version_id *vid)
{
    for (unsigned i = 0; i < o->nver; i++)
        if (ol_version_id_cmp(&o->ver[i].sm.vid, vid) == 0)
            return (int)i;
    return -1;
}

static void free_ver(struct md_version *v)
{
    free(v->meta);
    free(v->data);
    free(v->crc);
    memset(v, 0, sizeof(*v));
}

/* Removes version i of o (freeing it) and o itself when it held no other. */
static void remove_ver(struct ol_memdrive *md, struct md_obj *o, unsigned i)
{
    OL_ASSERT(i < o->nver);
    free_ver(&o->ver[i]);
    memmove(&o->ver[i], &o->ver[i + 1], (o->nver - i - 1) * sizeof(o->ver[0]));
    o->nver--;
    if (o->nver > 0)
        return;
    size_t pos;
    struct md_obj *found = find_obj(md, o->bucket, o->key, o->klen, &pos);
    OL_ASSERT(found == o);
    memmove(&md->objs[pos], &md->objs[pos + 1], (md->nobjs - pos - 1) * sizeof(md->objs[0]));
    md->nobjs--;
    free(o->ver);
    free(o);
}

static bool valid_name(const char *bucket, size_t klen)
{
    return bucket && strlen(bucket) <= OL_DRIVE_MAX_BUCKET && klen >= 1 && klen <= OL_DRIVE_MAX_KEY;
}

/* Common entry of every call: the latency knob and the offline knob.  Takes
 * the lock on success. */
static int enter(struct ol_memdrive *md, bool mutating)
{
    pthread_mutex_lock(&md->mu);
    unsigned us = md->latency_us;
    pthread_mutex_unlock(&md->mu);
    if (us && ol_fiber_current()) {
        /* In a fiber, sleep on the loop (whole ms) so that the other fibers
         * of the loop, the erasure set's fan-out among them, run meanwhile. */
        ol_io_sleep_ms((us + 999) / 1000);
    } else if (us) {
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&md->mu);
    bool fail = md->offline;
    if (mutating && md->fail_in > 0 && --md->fail_in == 0)
        fail = true;
    if (fail) {
        md->st.failed++;
        pthread_mutex_unlock(&md->mu);
        return -EIO;
    }
    return 0;
}

static int md_shard_begin(void *d, const char *bucket, const char *key, size_t klen, void **w)
{
    struct ol_memdrive *md = d;
    if (!valid_name(bucket, klen))
        return -EINVAL;
    int rc = enter(md, true);
    if (rc < 0)
        return rc;
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    unsigned incomplete = 0;
    for (unsigned i = 0; o && i < o->nver; i++)
        incomplete += !(o->ver[i].sm.flags & OL_SHARD_COMPLETE);
    pthread_mutex_unlock(&md->mu);
    if (incomplete >= OL_MEMDRIVE_MAX_INCOMPLETE)
        return -EAGAIN;
    struct md_writer *wr = calloc(1, sizeof(*wr));
    if (!wr)
        return -ENOMEM;
    wr->md = md;
    strcpy(wr->bucket, bucket);
    memcpy(wr->key, key, klen);
    wr->klen = (uint32_t)klen;
    *w = wr;
    return 0;
}

static int md_shard_write(void *w, const void *buf, size_t len)
{
    struct md_writer *wr = w;
    int rc = enter(wr->md, true);
    if (rc < 0)
        return rc;
    pthread_mutex_unlock(&wr->md->mu);
    if (wr->len + len > wr->cap) {
        size_t cap = wr->cap ? wr->cap : 4096;
        while (cap < wr->len + len)
            cap *= 2;
        uint8_t *nb = realloc(wr->buf, cap);
        if (!nb)
            return -ENOMEM;
        wr->buf = nb;
        wr->cap = cap;
    }
    if (len)
        memcpy(wr->buf + wr->len, buf, len);
    wr->len += len;
    return 0;
}

static void md_shard_abort(void *w)
{
    struct md_writer *wr = w;
    free(wr->buf);
    free(wr);
}

/* Stores shard version sm of bucket/key (md locked): a new version, or the
 * rewrite of an existing one of the same vid (heal).  On success takes
 * *mcopy (the blob, meta_len bytes), *data (len bytes) and *crc (one per
 * block), setting them NULL.  0, OL_DRIVE_SUPERSEDED, -EAGAIN, -ENOMEM. */
static int store_locked(struct ol_memdrive *md, const char *bucket, const char *key, size_t klen,
                        const struct ol_shard_meta *sm, uint8_t **mcopy, size_t meta_len,
                        uint8_t **data, uint64_t len, uint32_t **crc)
{
    size_t pos;
    struct md_obj *o = find_obj(md, bucket, key, klen, &pos);
    for (unsigned i = 0; o && i < o->nver; i++) {
        if ((o->ver[i].sm.flags & OL_SHARD_COMPLETE) &&
            ol_version_id_cmp(&o->ver[i].sm.vid, &sm->vid) > 0 && ol_shard_frees(&o->ver[i].sm, sm))
            return OL_DRIVE_SUPERSEDED;
    }
    if (!o) {
        if (md->nobjs == md->cap) {
            size_t ncap = md->cap ? md->cap * 2 : 64;
            struct md_obj **no = realloc(md->objs, ncap * sizeof(*no));
            if (!no)
                return -ENOMEM;
            md->objs = no;
            md->cap = ncap;
        }
        o = calloc(1, sizeof(*o));
        if (!o)
            return -ENOMEM;
        strcpy(o->bucket, bucket);
        memcpy(o->key, key, klen);
        o->klen = (uint32_t)klen;
        memmove(&md->objs[pos + 1], &md->objs[pos], (md->nobjs - pos) * sizeof(md->objs[0]));
        md->objs[pos] = o;
        md->nobjs++;
    }
    struct md_version *v;
    int at = find_ver(o, &sm->vid);
    uint8_t keep_flags = 0;
    if (at >= 0) {
        /* A rewrite of the same version (heal): same object, new bytes. */
        v = &o->ver[at];
        keep_flags = v->sm.flags & OL_SHARD_COMPLETE;
        free_ver(v);
    } else {
        if (o->nver == OL_MEMDRIVE_MAX_VERSIONS)
            return -EAGAIN;
        if (o->nver == o->cap) {
            unsigned ncap = o->cap ? o->cap * 2 : 4;
            struct md_version *nv = realloc(o->ver, ncap * sizeof(*nv));
            if (!nv)
                return -ENOMEM;
            o->ver = nv;
            o->cap = ncap;
        }
        unsigned i = 0;
        while (i < o->nver && ol_version_id_cmp(&o->ver[i].sm.vid, &sm->vid) > 0)
            i++;
        memmove(&o->ver[i + 1], &o->ver[i], (o->nver - i) * sizeof(o->ver[0]));
        o->nver++;
        v = &o->ver[i];
        memset(v, 0, sizeof(*v));
    }
    v->sm = *sm;
    v->sm.flags = (uint8_t)((sm->flags & ~OL_SHARD_COMPLETE) | keep_flags);
    v->sm.meta_len = (uint32_t)meta_len;
    v->sm.meta_crc = meta_len ? ol_crc32c(*mcopy, meta_len) : 0;
    v->meta = *mcopy;
    *mcopy = NULL;
    v->data = *data;
    v->len = len;
    v->crc = *crc;
    *data = NULL;
    *crc = NULL;
    return 0;
}

static int md_shard_commit(void *w, const struct ol_shard_meta *sm, const void *meta,
                           size_t meta_len)
{
    struct md_writer *wr = w;
    struct ol_memdrive *md = wr->md;
    uint32_t *crc = NULL;
    uint8_t *mcopy = NULL;
    int rc = 0;
    if (meta_len > OL_DRIVE_META_MAX || (meta_len && !meta)) {
        rc = -EINVAL;
        goto out;
    }
    if (meta_len) {
        mcopy = malloc(meta_len);
        if (!mcopy) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(mcopy, meta, meta_len);
    }
    /* The block CRCs are computed before taking the lock; the store computes
     * them as the bytes arrive. */
    size_t nblocks = (wr->len + OL_MEMDRIVE_BLOCK_BYTES - 1) / OL_MEMDRIVE_BLOCK_BYTES;
    crc = malloc((nblocks ? nblocks : 1) * sizeof(*crc));
    if (!crc) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t b = 0; b < nblocks; b++) {
        size_t off = b * OL_MEMDRIVE_BLOCK_BYTES;
        size_t n =
            wr->len - off < OL_MEMDRIVE_BLOCK_BYTES ? wr->len - off : OL_MEMDRIVE_BLOCK_BYTES;
        crc[b] = ol_crc32c(wr->buf + off, n);
    }
    rc = enter(md, true);
    if (rc < 0)
        goto out;
    rc = store_locked(md, wr->bucket, wr->key, wr->klen, sm, &mcopy, meta_len, &wr->buf, wr->len,
                      &crc);
    md->st.commits += rc == 0;
    pthread_mutex_unlock(&md->mu);
out:
    free(crc);
    free(mcopy);
    md_shard_abort(wr);
    return rc;
}

/* Shares nothing (the bytes are in memory): the copy duplicates the shard,
 * which is what a test needs to see; the store drive shares extents. */
static int md_shard_copy(void *d, const char *src_bucket, const char *src_key, size_t src_klen,
                         const struct ol_version_id *src_vid, const char *bucket, const char *key,
                         size_t klen, const struct ol_shard_meta *sm, const void *meta,
                         size_t meta_len)
{
    struct ol_memdrive *md = d;
    uint8_t *mcopy = NULL, *data = NULL;
    uint32_t *crc = NULL;
    if (!valid_name(src_bucket, src_klen) || !valid_name(bucket, klen) ||
        meta_len > OL_DRIVE_META_MAX || (meta_len && !meta))
        return -EINVAL;
    if (meta_len) {
        mcopy = malloc(meta_len);
        if (!mcopy)
            return -ENOMEM;
        memcpy(mcopy, meta, meta_len);
    }
    int rc = enter(md, true);
    if (rc < 0)
        goto out;
    struct md_obj *so = find_obj(md, src_bucket, src_key, src_klen, NULL);
    int at = so ? find_ver(so, src_vid) : -1;
    if (at < 0) {
        rc = -OL_ENOKEY;
        goto unlock;
    }
    const struct md_version *v = &so->ver[at];
    const struct ol_shard_meta *s = &v->sm;
    if (s->k != sm->k || s->m != sm->m || s->shard != sm->shard || s->rotation != sm->rotation ||
        s->unit_bytes != sm->unit_bytes || s->size != sm->size) {
        rc = -EINVAL;
        goto unlock;
    }
    /* As shard_begin: a key with too many incomplete versions refuses. */
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    unsigned incomplete = 0;
    for (unsigned i = 0; o && i < o->nver; i++)
        incomplete += !(o->ver[i].sm.flags & OL_SHARD_COMPLETE);
    if (incomplete >= OL_MEMDRIVE_MAX_INCOMPLETE) {
        rc = -EAGAIN;
        goto unlock;
    }
    size_t nblocks = (v->len + OL_MEMDRIVE_BLOCK_BYTES - 1) / OL_MEMDRIVE_BLOCK_BYTES;
    data = malloc(v->len ? v->len : 1);
    crc = malloc((nblocks ? nblocks : 1) * sizeof(*crc));
    if (!data || !crc) {
        rc = -ENOMEM;
        goto unlock;
    }
    /* The stored bytes and their CRCs as they are: a corrupt source block
     * stays corrupt in the copy (the store's shared extents behave so). */
    memcpy(data, v->data, v->len);
    memcpy(crc, v->crc, nblocks * sizeof(*crc));
    rc = store_locked(md, bucket, key, klen, sm, &mcopy, meta_len, &data, v->len, &crc);
    md->st.copies += rc == 0;
unlock:
    pthread_mutex_unlock(&md->mu);
out:
    free(mcopy);
    free(data);
    free(crc);
    return rc;
}

static int md_mark_complete(void *d, const char *bucket, const char *key, size_t klen,
                            const struct ol_version_id *vid)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, true);
    if (rc < 0)
        return rc;
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? find_ver(o, vid) : -1;
    if (at < 0) {
        /* Gone: fine when a newer complete version freed it, which we can
         * only tell for a plain newer version (the flags of vid are lost). */
        rc = -OL_ENOKEY;
        for (unsigned i = 0; o && i < o->nver; i++)
            if ((o->ver[i].sm.flags & OL_SHARD_COMPLETE) &&
                ol_version_id_cmp(&o->ver[i].sm.vid, vid) > 0 &&
                !(o->ver[i].sm.flags & (OL_SHARD_KEEP_OLDER | OL_SHARD_NULL)))
                rc = 0;
        goto out;
    }
    o->ver[at].sm.flags |= OL_SHARD_COMPLETE;
    /* Free the older versions it replaces, oldest first: o stays alive
     * since version `at` remains. */
    for (unsigned i = o->nver; i > (unsigned)at + 1; i--)
        if (ol_shard_frees(&o->ver[at].sm, &o->ver[i - 1].sm))
            remove_ver(md, o, i - 1);
out:
    pthread_mutex_unlock(&md->mu);
    return rc;
}

static int md_versions(void *d, const char *bucket, const char *key, size_t klen,
                       struct ol_shard_meta *out, unsigned cap, struct ol_drive_blob *blob)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    md->st.versions++;
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    unsigned n = 0;
    for (; o && n < o->nver && n < cap; n++)
        out[n] = o->ver[n].sm;
    if (blob) {
        blob->got = false;
        blob->len = 0;
        int at = !o ? -1 : blob->want ? find_ver(o, blob->want) : 0;
        if (at >= 0) {
            const struct md_version *v = &o->ver[at];
            blob->sm = v->sm;
            blob->len = v->sm.meta_len;
            if (v->sm.meta_len > 0 && v->sm.meta_len <= blob->cap) {
                memcpy(blob->buf, v->meta, v->sm.meta_len);
                blob->got = true;
            }
        }
    }
    pthread_mutex_unlock(&md->mu);
    return (int)n;
}

static int md_set_meta(void *d, const char *bucket, const char *key, size_t klen,
                       const struct ol_version_id *vid, const void *meta, size_t len,
                       uint64_t stamp)
{
    struct ol_memdrive *md = d;
    if (len > OL_DRIVE_META_MAX || (len && !meta))
        return -EINVAL;
    uint32_t crc = len ? ol_crc32c(meta, len) : 0;
    uint8_t *copy = NULL;
    if (len) {
        copy = malloc(len);
        if (!copy)
            return -ENOMEM;
        memcpy(copy, meta, len);
    }
    int rc = enter(md, true);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? find_ver(o, vid) : -1;
    if (at < 0) {
        rc = -OL_ENOKEY;
    } else {
        struct md_version *v = &o->ver[at];
        if (!ol_shard_meta_newer(v->sm.meta_stamp, v->sm.meta_crc, stamp, crc)) {
            free(v->meta);
            v->meta = copy;
            copy = NULL;
            v->sm.meta_len = (uint32_t)len;
            v->sm.meta_crc = crc;
            v->sm.meta_stamp = stamp;
        }
    }
    pthread_mutex_unlock(&md->mu);
    free(copy);
    return rc;
}

static int md_read_shard(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, uint64_t off, size_t len, void *buf)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    md->st.reads++;
    md->st.read_bytes += len;
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? find_ver(o, vid) : -1;
    if (at < 0) {
        rc = -OL_ENOKEY;
        goto out;
    }
    const struct md_version *v = &o->ver[at];
    if (off > v->len || len > v->len - off) {
        rc = -EINVAL;
        goto out;
    }
    if (len == 0)
        goto out;
    /* Verify every block the read touches, as the store does. */
    for (uint64_t b = off / OL_MEMDRIVE_BLOCK_BYTES; b <= (off + len - 1) / OL_MEMDRIVE_BLOCK_BYTES;
         b++) {
        uint64_t boff = b * OL_MEMDRIVE_BLOCK_BYTES;
        uint64_t n =
            v->len - boff < OL_MEMDRIVE_BLOCK_BYTES ? v->len - boff : OL_MEMDRIVE_BLOCK_BYTES;
        if (ol_crc32c(v->data + boff, n) != v->crc[b]) {
            rc = -OL_ECORRUPT;
            goto out;
        }
    }
    memcpy(buf, v->data + off, len);
out:
    pthread_mutex_unlock(&md->mu);
    return rc;
}

static int md_delete_version(void *d, const char *bucket, const char *key, size_t klen,
                             const struct ol_version_id *vid)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, true);
    if (rc < 0)
        return rc;
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? find_ver(o, vid) : -1;
    if (at >= 0)
        remove_ver(md, o, (unsigned)at);
    pthread_mutex_unlock(&md->mu);
    return 0;
}

static int md_list_keys(void *d, const char *bucket, const char *after, size_t alen,
                        struct ol_drive_entry *out, unsigned cap)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    size_t i = lower_bound(md, bucket, after, alen);
    if (alen > 0 && i < md->nobjs &&
        key_cmp(md->objs[i]->bucket, md->objs[i]->key, md->objs[i]->klen, bucket, after, alen) == 0)
        i++;
    unsigned n = 0;
    for (; i < md->nobjs && n < cap && strcmp(md->objs[i]->bucket, bucket) == 0; i++, n++) {
        const struct md_obj *o = md->objs[i];
        out[n].key_len = o->klen;
        memcpy(out[n].key, o->key, o->klen);
        out[n].newest = o->ver[0].sm;
    }
    pthread_mutex_unlock(&md->mu);
    return (int)n;
}

static int md_list_buckets(void *d, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    struct ol_memdrive *md = d;
    char(*names)[OL_DRIVE_MAX_BUCKET + 1] = NULL;
    size_t n = 0;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    /* Copy the names out so that fn runs without the drive's lock. */
    names = malloc((md->nobjs ? md->nobjs : 1) * sizeof(*names));
    if (!names) {
        pthread_mutex_unlock(&md->mu);
        return -ENOMEM;
    }
    for (size_t i = 0; i < md->nobjs; i++)
        if (n == 0 || strcmp(names[n - 1], md->objs[i]->bucket) != 0)
            strcpy(names[n++], md->objs[i]->bucket);
    pthread_mutex_unlock(&md->mu);
    for (size_t i = 0; i < n; i++)
        if (fn(ctx, names[i]))
            break;
    free(names);
    return 0;
}

/* ---- buckets ---- */

static struct md_bucket **bucket_slot(struct ol_memdrive *md, const char *name)
{
    struct md_bucket **p = &md->buckets;
    while (*p && strcmp((*p)->name, name) < 0)
        p = &(*p)->next;
    return p;
}

static struct md_bucket *bucket_find(struct ol_memdrive *md, const char *name)
{
    struct md_bucket *b = *bucket_slot(md, name);
    return b && strcmp(b->name, name) == 0 ? b : NULL;
}

static void bucket_free(struct md_bucket *b)
{
    for (struct md_setting *c = b->cfg, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(b);
}

static int md_bucket_create(void *d, const char *bucket, int64_t ctime_ns)
{
    struct ol_memdrive *md = d;
    if (strlen(bucket) > OL_DRIVE_MAX_BUCKET || !bucket[0])
        return -EINVAL;
    int rc = enter(md, true);
    if (rc < 0)
        return rc;
    struct md_bucket **p = bucket_slot(md, bucket);
    if (!*p || strcmp((*p)->name, bucket) != 0) {
        struct md_bucket *b = calloc(1, sizeof(*b));
        if (!b) {
            rc = -ENOMEM;
        } else {
            snprintf(b->name, sizeof(b->name), "%s", bucket);
            b->ctime_ns = ctime_ns;
            b->next = *p;
            *p = b;
        }
    }
    pthread_mutex_unlock(&md->mu);
    return rc;
}

static int md_bucket_delete(void *d, const char *bucket)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, true);
    if (rc < 0)
        return rc;
    struct md_bucket **p = bucket_slot(md, bucket);
    if (*p && strcmp((*p)->name, bucket) == 0) {
        struct md_bucket *b = *p;
        *p = b->next;
        bucket_free(b);
    }
    /* The shards left in it go too (ec/drive.h). */
    size_t i = lower_bound(md, bucket, "", 0);
    while (i < md->nobjs && strcmp(md->objs[i]->bucket, bucket) == 0)
        remove_ver(md, md->objs[i], md->objs[i]->nver - 1);
    pthread_mutex_unlock(&md->mu);
    return 0;
}

static int md_bucket_get(void *d, const char *bucket, int64_t *ctime_ns)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    struct md_bucket *b = bucket_find(md, bucket);
    if (!b)
        rc = -OL_ENOBUCKET;
    else if (ctime_ns)
        *ctime_ns = b->ctime_ns;
    pthread_mutex_unlock(&md->mu);
    return rc;
}

static int md_bucket_list(void *d, int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns),
                          void *ctx)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    size_t n = 0;
    for (struct md_bucket *b = md->buckets; b; b = b->next)
        n++;
    /* Copied out, so that fn runs without the drive's lock. */
    struct md_bucket *copy = malloc((n ? n : 1) * sizeof(*copy));
    if (copy) {
        n = 0;
        for (struct md_bucket *b = md->buckets; b; b = b->next)
            copy[n++] = *b;
    }
    pthread_mutex_unlock(&md->mu);
    if (!copy)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (fn(ctx, copy[i].name, copy[i].ctime_ns))
            break;
    free(copy);
    return 0;
}

static int md_bucket_config_put(void *d, const char *bucket, const char *name, const void *val,
                                size_t len)
{
    struct ol_memdrive *md = d;
    size_t nl = strlen(name);
    if (nl == 0 || nl > 64)
        return -EINVAL;
    if (val && len > (1u << 20))
        return -OL_ETOOLARGE;
    struct md_setting *c = NULL;
    if (val) {
        c = malloc(sizeof(*c) + len);
        if (!c)
            return -ENOMEM;
        memcpy(c->name, name, nl + 1);
        c->len = len;
        memcpy(c->val, val, len);
    }
    int rc = enter(md, true);
    if (rc < 0) {
        free(c);
        return rc;
    }
    struct md_bucket *b = bucket_find(md, bucket);
    if (!b) {
        rc = -OL_ENOBUCKET;
    } else {
        for (struct md_setting **p = &b->cfg; *p; p = &(*p)->next) {
            if (strcmp((*p)->name, name) == 0) {
                struct md_setting *old = *p;
                *p = old->next;
                free(old);
                break;
            }
        }
        if (c) {
            c->next = b->cfg;
            b->cfg = c;
            c = NULL;
        }
    }
    pthread_mutex_unlock(&md->mu);
    free(c);
    return rc;
}

static ssize_t md_bucket_config_get(void *d, const char *bucket, const char *name, void *buf,
                                    size_t cap)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    ssize_t n = -OL_ENOBUCKET;
    struct md_bucket *b = bucket_find(md, bucket);
    if (b) {
        n = -OL_ENOCONFIG;
        for (struct md_setting *c = b->cfg; c; c = c->next) {
            if (strcmp(c->name, name) != 0)
                continue;
            if (c->len > cap) {
                n = -ENOBUFS;
            } else {
                memcpy(buf, c->val, c->len);
                n = (ssize_t)c->len;
            }
            break;
        }
    }
    pthread_mutex_unlock(&md->mu);
    return n;
}

static int md_space(void *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct ol_memdrive *md = d;
    pthread_mutex_lock(&md->mu);
    int rc = md->offline ? -EIO : 0;
    *free_bytes = md->free_bytes;
    *total_bytes = md->total_bytes;
    pthread_mutex_unlock(&md->mu);
    return rc;
}

void ol_memdrive_set_space(struct ol_memdrive *md, uint64_t free_bytes, uint64_t total_bytes)
{
    pthread_mutex_lock(&md->mu);
    md->free_bytes = free_bytes;
    md->total_bytes = total_bytes;
    pthread_mutex_unlock(&md->mu);
}

/* Locks: the offline knob and latency apply as to every call. */
static int md_lock(void *d, const void *name, size_t nlen, const uint8_t *owner, uint32_t ttl_ms)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    pthread_mutex_unlock(&md->mu);
    return ol_locktab_lock(md->locks, name, nlen, owner, ttl_ms, ol_now_ms());
}

static int md_unlock(void *d, const void *name, size_t nlen, const uint8_t *owner)
{
    struct ol_memdrive *md = d;
    int rc = enter(md, false);
    if (rc < 0)
        return rc;
    pthread_mutex_unlock(&md->mu);
    return ol_locktab_unlock(md->locks, name, nlen, owner);
}

const struct ol_drive_ops ol_memdrive_ops = {
    .space = md_space,
    .shard_begin = md_shard_begin,
    .shard_write = md_shard_write,
    .shard_commit = md_shard_commit,
    .shard_abort = md_shard_abort,
    .shard_copy = md_shard_copy,
    .mark_complete = md_mark_complete,
    .versions = md_versions,
    .set_meta = md_set_meta,
    .read_shard = md_read_shard,
    .delete_version = md_delete_version,
    .list_keys = md_list_keys,
    .list_buckets = md_list_buckets,
    .bucket_create = md_bucket_create,
    .bucket_delete = md_bucket_delete,
    .bucket_get = md_bucket_get,
    .bucket_list = md_bucket_list,
    .bucket_config_put = md_bucket_config_put,
    .bucket_config_get = md_bucket_config_get,
    .lock = md_lock,
    .unlock = md_unlock,
};

int ol_memdrive_create(struct ol_memdrive **out)
{
    struct ol_memdrive *md = calloc(1, sizeof(*md));
    if (!md)
        return -ENOMEM;
    if (ol_locktab_create(0, &md->locks) < 0) {
        free(md);
        return -ENOMEM;
    }
    pthread_mutex_init(&md->mu, NULL);
    *out = md;
    return 0;
}

static void wipe_locked(struct ol_memdrive *md)
{
    for (size_t i = 0; i < md->nobjs; i++) {
        for (unsigned v = 0; v < md->objs[i]->nver; v++)
            free_ver(&md->objs[i]->ver[v]);
        free(md->objs[i]->ver);
        free(md->objs[i]);
    }
    free(md->objs);
    md->objs = NULL;
    md->nobjs = md->cap = 0;
    for (struct md_bucket *b = md->buckets, *n; b; b = n) {
        n = b->next;
        bucket_free(b);
    }
    md->buckets = NULL;
}

void ol_memdrive_destroy(struct ol_memdrive *md)
{
    if (!md)
        return;
    wipe_locked(md);
    ol_locktab_destroy(md->locks);
    pthread_mutex_destroy(&md->mu);
    free(md);
}

struct ol_drive ol_memdrive_drive(struct ol_memdrive *md)
{
    return (struct ol_drive){.ops = &ol_memdrive_ops, .d = md};
}

void ol_memdrive_set_offline(struct ol_memdrive *md, bool offline)
{
    pthread_mutex_lock(&md->mu);
    md->offline = offline;
    pthread_mutex_unlock(&md->mu);
}

void ol_memdrive_fail_nth(struct ol_memdrive *md, uint64_t n)
{
    pthread_mutex_lock(&md->mu);
    md->fail_in = n;
    pthread_mutex_unlock(&md->mu);
}

void ol_memdrive_set_latency_us(struct ol_memdrive *md, unsigned us)
{
    pthread_mutex_lock(&md->mu);
    md->latency_us = us;
    pthread_mutex_unlock(&md->mu);
}

void ol_memdrive_wipe(struct ol_memdrive *md)
{
    pthread_mutex_lock(&md->mu);
    wipe_locked(md);
    pthread_mutex_unlock(&md->mu);
    ol_locktab_clear(md->locks);
}

int ol_memdrive_corrupt(struct ol_memdrive *md, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *vid, uint64_t off)
{
    int rc = 0;
    pthread_mutex_lock(&md->mu);
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? (vid ? find_ver(o, vid) : 0) : -1;
    if (at < 0) {
        rc = -OL_ENOKEY;
        goto out;
    }
    if (off >= o->ver[at].len) {
        rc = -EINVAL;
        goto out;
    }
    o->ver[at].data[off] ^= 0x5a;
out:
    pthread_mutex_unlock(&md->mu);
    return rc;
}

int ol_memdrive_corrupt_meta(struct ol_memdrive *md, const char *bucket, const char *key,
                             size_t klen, const struct ol_version_id *vid)
{
    int rc = 0;
    pthread_mutex_lock(&md->mu);
    struct md_obj *o = find_obj(md, bucket, key, klen, NULL);
    int at = o ? (vid ? find_ver(o, vid) : 0) : -1;
    if (at < 0)
        rc = -OL_ENOKEY;
    else if (o->ver[at].sm.meta_len == 0)
        rc = -EINVAL;
    else
        o->ver[at].meta[o->ver[at].sm.meta_len / 2] ^= 0x5a;
    pthread_mutex_unlock(&md->mu);
    return rc;
}

void ol_memdrive_stats(struct ol_memdrive *md, struct ol_memdrive_stats *out)
{
    pthread_mutex_lock(&md->mu);
    *out = md->st;
    pthread_mutex_unlock(&md->mu);
}

void ol_memdrive_stats_reset(struct ol_memdrive *md)
{
    pthread_mutex_lock(&md->mu);
    memset(&md->st, 0, sizeof(md->st));
    pthread_mutex_unlock(&md->mu);
}

void ol_memdrive_count(struct ol_memdrive *md, uint64_t *keys, uint64_t *versions)
{
    pthread_mutex_lock(&md->mu);
    uint64_t nv = 0;
    for (size_t i = 0; i < md->nobjs; i++)
        nv += md->objs[i]->nver;
    *keys = md->nobjs;
    *versions = nv;
    pthread_mutex_unlock(&md->mu);
}
