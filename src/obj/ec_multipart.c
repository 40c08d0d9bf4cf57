/* Multipart uploads over erasure sets: see obj/ec_multipart.h. */
#include "obj/ec_multipart.h"

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/eset.h"
#include "deploy/deploy.h"
#include "obj/ec.h"
#include "store/store.h"

#define MP_MAX_PARTS 10000u /* S3's limit */
#define MP_ID_LEN 32u                            /* hex digits of an upload id */
#define MP_UKEY_LEN (4u + MP_ID_LEN)             /* "\0mu\0" + id */
#define MP_XKEY_LEN (4u + MP_ID_LEN)             /* "\0mx\0" + id: parts to remove */
#define MP_CLEAN_BATCH 64u   /* parts the cleaner removes before it pauses */
#define MP_CLEAN_PAUSE_MS 1u /* its pause: requests go first */
#define MP_CLEAN_PASS_MS 10000u /* a full pass over every bucket at least this often */
#define MP_CLEAN_IDS 256u    /* cleanup records one pass takes per bucket */
#define MP_CLEAN_GRACE_MS 2000u /* a cleanup record this young waits (a GET still loading) */
#define MP_CLEAN_RETRY_MS 1000u /* the next pass after one that left records for later */
#define MP_PPREFIX_LEN (4u + MP_ID_LEN + 1u)     /* "\0mp\0" + id + "\0" */
#define MP_PKEY_LEN (MP_PPREFIX_LEN + 5u)        /* ... + part number, 5 digits */
#define MP_LIST_PAGE 256u                        /* keys per ol_eset_list call */
#define MP_MAX_UPLOADS 10000u                    /* uploads one listing looks at */
#define MP_COMPLETE_DOC_MAX (4u << 20)
#define OL_S3_MAX_KEY_BYTES 1024u                 /* the router's key limit */
#define MP_REC_MAX (sizeof(struct up_head) + OL_S3_MAX_KEY_BYTES + OL_EC_META_MAX)

/* ---- on-drive records (little-endian hosts; docs/EC.md, section 7) ---- */

#define UP_MAGIC 0x554d4c4fu /* "OLMU" */
#define MF_MAGIC 0x464d4c4fu /* "OLMF" */
#define MP_REC_VERSION 1

/* The upload record: this head, then the key, then the S3 metadata blob. */
struct up_head {
    uint32_t magic;
    uint16_t version;
    uint16_t reserved0;
    uint32_t key_len;
    uint32_t meta_len;
    int64_t ctime_ns;
    uint32_t crc; /* CRC32C of the head (this field zero), the key and the blob */
    uint32_t reserved1;
};
_Static_assert(sizeof(struct up_head) == 32, "upload record head size is on-disk format");

/* The manifest record (after the object's metadata blob): this head, then
 * nparts entries in ascending part number. */
struct mf_head {
    uint32_t magic;
    uint16_t version;
    uint16_t reserved0;
    uint32_t nparts;
    uint32_t crc; /* CRC32C of the head (this field zero) and the entries */
    uint64_t size; /* the object's size: the sum of the part sizes */
    char upload_id[MP_ID_LEN];
    uint8_t reserved1[8];
};
_Static_assert(sizeof(struct mf_head) == 64, "manifest head size is on-disk format");

struct mf_part {
    uint32_t part_no;
    uint32_t reserved;
    uint64_t size;
    uint8_t vid[OL_VERSION_ID_BYTES]; /* the part object's version */
    uint8_t md5[16];
};
_Static_assert(sizeof(struct mf_part) == 48, "manifest entry size is on-disk format");

struct ol_ec_manifest {
    struct ol_deploy *ec;
    char bucket[64];
    char id[MP_ID_LEN + 1];
    uint32_t n;
    uint64_t size;
    struct mf_part *parts;
    uint64_t *offs; /* object offset of each part's first byte */
    /* The part the last read was in, resolved once (ec/eset.h's reader):
     * a GET walks the parts in order, so each part costs one versions round
     * instead of one per read step, and its pieces can leave zero-copy. */
    struct ol_eset_reader *rd;
    size_t rd_part;
    uint8_t *rd_blob; /* the part's blob, which reads do not use */
    bool held;        /* ol_ec_manifest_hold: a GET reads it */
};

/* ---- names ---- */

static bool id_valid(const char *s, size_t n)
{
    if (n != MP_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static void upload_key(const char *id, char out[MP_UKEY_LEN])
{
    memcpy(out, "\0mu\0", 4);
    memcpy(out + 4, id, MP_ID_LEN);
}

static void part_key(const char *id, uint32_t part_no, char out[MP_PKEY_LEN + 1])
{
    memcpy(out, "\0mp\0", 4);
    memcpy(out + 4, id, MP_ID_LEN);
    out[MP_PPREFIX_LEN - 1] = 0;
    OL_ASSERT(part_no <= MP_MAX_PARTS);
    for (unsigned i = 0; i < 5; i++) {
        out[MP_PKEY_LEN - 1 - i] = (char)('0' + part_no % 10);
        part_no /= 10;
    }
    out[MP_PKEY_LEN] = 0;
}

static int new_upload_id(char out[MP_ID_LEN + 1])
{
    static const char d[] = "0123456789abcdef";
    uint8_t b[MP_ID_LEN / 2];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return -EIO;
    for (unsigned i = 0; i < sizeof(b); i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[MP_ID_LEN] = 0;
    return 0;
}

/* ---- upload records ---- */

struct upload {
    char id[MP_ID_LEN + 1];
    char key[OL_S3_MAX_KEY_BYTES];
    size_t klen;
    int64_t ctime_ns;
    uint32_t meta_len;
    uint8_t meta[OL_EC_META_MAX];
};

/* Loads the record of upload id in bucket: 0, -OL_ENOUPLOAD, -OL_EQUORUM,
 * -OL_ECORRUPT. */
static int upload_load(struct ol_deploy *ec, const char *bucket, const char *id,
                       struct upload *u)
{
    char k[MP_UKEY_LEN];
    upload_key(id, k);
    struct ol_eset *es = ol_deploy_set_of(ec, bucket, k, sizeof(k));
    struct ol_eset_obj o;
    uint8_t *rec = NULL;
    int rc = ol_eset_stat(es, bucket, k, sizeof(k), NULL, &o);
    if (rc == -OL_ENOKEY)
        return -OL_ENOUPLOAD;
    if (rc < 0)
        return rc;
    if (o.size < sizeof(struct up_head) || o.size > MP_REC_MAX)
        return -OL_ECORRUPT;
    rec = malloc(o.size);
    if (!rec)
        return -ENOMEM;
    rc = ol_eset_read(es, bucket, k, sizeof(k), &o.vid, 0, o.size, rec, NULL);
    if (rc == -OL_ENOKEY)
        rc = -OL_ENOUPLOAD;
    if (rc < 0)
        goto out;
    struct up_head h;
    memcpy(&h, rec, sizeof(h));
    uint32_t crc = h.crc;
    memset(rec + offsetof(struct up_head, crc), 0, sizeof(h.crc));
    rc = -OL_ECORRUPT;
    if (h.magic != UP_MAGIC || h.version != MP_REC_VERSION || h.key_len == 0 ||
        h.key_len > OL_S3_MAX_KEY_BYTES || h.meta_len > OL_EC_META_MAX ||
        sizeof(h) + h.key_len + h.meta_len != o.size || ol_crc32c(rec, o.size) != crc)
        goto out;
    memcpy(u->id, id, MP_ID_LEN);
    u->id[MP_ID_LEN] = 0;
    memcpy(u->key, rec + sizeof(h), h.key_len);
    u->klen = h.key_len;
    u->ctime_ns = h.ctime_ns;
    u->meta_len = h.meta_len;
    memcpy(u->meta, rec + sizeof(h) + h.key_len, h.meta_len);
    rc = 0;
out:
    free(rec);
    return rc;
}

/* ---- listing internal keys across the sets ---- */

/* Calls fn for every key of the bucket that starts with prefix and sorts
 * after (after, alen), set by set (each set in key order, the sets one after
 * another: callers sort).  fn returns non-zero to stop. */
struct prefix_walk {
    const char *prefix;
    size_t plen;
    int (*fn)(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o);
    void *ctx;
    bool stop;
    char last[64];
    size_t last_len;
};

static int walk_cb(void *arg, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    struct prefix_walk *w = arg;
    if (klen < w->plen || klen > sizeof(w->last) || memcmp(key, w->prefix, w->plen) != 0) {
        w->stop = true;
        return 1;
    }
    memcpy(w->last, key, klen);
    w->last_len = klen;
    if (w->fn(w->ctx, key, klen, o) != 0) {
        w->stop = true;
        return 1;
    }
    return 0;
}

static int walk_prefix(struct ol_deploy *ec, const char *bucket, const char *prefix, size_t plen,
                       const char *after, size_t alen,
                       int (*fn)(void *ctx, const char *key, size_t klen,
                                 const struct ol_eset_obj *o),
                       void *ctx)
{
    OL_ASSERT(alen <= 64 && plen <= alen);
    for (unsigned s = 0; s < ol_deploy_nsets(ec); s++) {
        struct prefix_walk w = {.prefix = prefix, .plen = plen, .fn = fn, .ctx = ctx};
        memcpy(w.last, after, alen);
        w.last_len = alen;
        /* Each round lists one page; a set holds at most the part or upload
         * keys the bounds allow, so the rounds are bounded too. */
        for (unsigned round = 0; round < 4 * (MP_MAX_PARTS + MP_MAX_UPLOADS) / MP_LIST_PAGE;
             round++) {
            int rc = ol_eset_list(ol_deploy_set(ec, s), bucket, w.last, w.last_len, MP_LIST_PAGE,
                                  walk_cb, &w);
            if (rc < 0)
                return rc;
            if (w.stop || (unsigned)rc < MP_LIST_PAGE)
                break;
        }
    }
    return 0;
}

struct part_ent {
    uint32_t part_no;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64]; /* as stored: the S3 layer's part ETag (MD5, maybe with a checksum) */
    struct ol_version_id vid;
};

struct part_set {
    struct part_ent *v;
    unsigned n, cap;
    uint32_t after;
};

static int part_cb(void *arg, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    struct part_set *ps = arg;
    if (klen != MP_PKEY_LEN)
        return 0;
    uint32_t pn = 0;
    for (unsigned i = MP_PPREFIX_LEN; i < MP_PKEY_LEN; i++) {
        if (key[i] < '0' || key[i] > '9')
            return 0;
        pn = pn * 10 + (uint32_t)(key[i] - '0');
    }
    if (pn < 1 || pn > MP_MAX_PARTS || pn <= ps->after)
        return 0;
    if (ps->n == ps->cap) {
        unsigned cap = ps->cap ? ps->cap * 2 : 64;
        void *nv = realloc(ps->v, cap * sizeof(*ps->v));
        if (!nv)
            return 1;
        ps->v = nv;
        ps->cap = cap;
    }
    struct part_ent *e = &ps->v[ps->n++];
    e->part_no = pn;
    e->size = o->size;
    e->mtime_ns = o->mtime_ns;
    e->vid = o->vid;
    /* A part's etag field is the S3 layer's, whole (it may hold ':'). */
    snprintf(e->etag, sizeof(e->etag), "%s", o->etag);
    return 0;
}

static int part_cmp(const void *a, const void *b)
{
    const struct part_ent *x = a, *y = b;
    return x->part_no < y->part_no ? -1 : x->part_no > y->part_no;
}

/* The stored parts of upload id with a number above after, ascending. */
static int parts_collect(struct ol_deploy *ec, const char *bucket, const char *id, uint32_t after,
                         struct part_set *ps)
{
    char prefix[MP_PKEY_LEN + 1];
    part_key(id, 0, prefix);
    memset(ps, 0, sizeof(*ps));
    ps->after = after;
    size_t alen = MP_PPREFIX_LEN;
    if (after > 0) {
        part_key(id, after, prefix);
        alen = MP_PKEY_LEN;
    }
    int rc = walk_prefix(ec, bucket, prefix, MP_PPREFIX_LEN, prefix, alen, part_cb, ps);
    if (rc < 0) {
        free(ps->v);
        ps->v = NULL;
        ps->n = 0;
        return rc;
    }
    if (ps->n > 1)
        qsort(ps->v, ps->n, sizeof(*ps->v), part_cmp);
    return 0;
}

static const struct part_ent *part_find(const struct part_set *ps, uint32_t pn)
{
    size_t lo = 0, hi = ps->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ps->v[mid].part_no == pn)
            return &ps->v[mid];
        if (ps->v[mid].part_no < pn)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- manifests ---- */

/* The uploads whose parts GETs of this process are reading: the cleaner
 * leaves their parts until the last such GET ends (an overwrite or DELETE
 * of a multipart object releases its manifest at once, and the parts of a
 * large object would otherwise go while a GET that began before is still
 * sending them).  Few at a time: a list. */
struct mp_hold {
    char id[MP_ID_LEN + 1];
    unsigned n;
    struct mp_hold *next;
};
static pthread_mutex_t holds_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mp_hold *holds;

static struct mp_hold **hold_find(const char *id)
{
    struct mp_hold **pp = &holds;
    while (*pp && strcmp((*pp)->id, id) != 0)
        pp = &(*pp)->next;
    return pp;
}

static bool upload_held(const char *id)
{
    pthread_mutex_lock(&holds_mu);
    bool held = *hold_find(id) != NULL;
    pthread_mutex_unlock(&holds_mu);
    return held;
}

int ol_ec_manifest_hold(struct ol_ec_manifest *m)
{
    if (m->held)
        return 0;
    pthread_mutex_lock(&holds_mu);
    struct mp_hold **pp = hold_find(m->id);
    if (!*pp && (*pp = calloc(1, sizeof(**pp))) != NULL)
        memcpy((*pp)->id, m->id, sizeof((*pp)->id));
    if (*pp)
        (*pp)->n++;
    m->held = *pp != NULL;
    pthread_mutex_unlock(&holds_mu);
    return m->held ? 0 : -ENOMEM;
}

void ol_ec_manifest_free(struct ol_ec_manifest *m)
{
    if (!m)
        return;
    if (m->held) {
        pthread_mutex_lock(&holds_mu);
        struct mp_hold **pp = hold_find(m->id), *h = *pp;
        if (h && --h->n == 0) {
            *pp = h->next;
            free(h);
        }
        pthread_mutex_unlock(&holds_mu);
    }
    ol_eset_reader_close(m->rd);
    free(m->rd_blob);
    free(m->parts);
    free(m->offs);
    free(m);
}

static bool manifest_has(const struct ol_ec_manifest *m, uint32_t pn)
{
    size_t lo = 0, hi = m ? m->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->parts[mid].part_no == pn)
            return true;
        if (m->parts[mid].part_no < pn)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Checks the entries and fills the offsets. */
static int manifest_index(struct ol_ec_manifest *m)
{
    m->offs = malloc(sizeof(*m->offs) * (m->n ? m->n : 1));
    if (!m->offs)
        return -ENOMEM;
    uint64_t off = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->parts[i].part_no < 1 || m->parts[i].part_no > MP_MAX_PARTS ||
            (i > 0 && m->parts[i].part_no <= m->parts[i - 1].part_no))
            return -OL_ECORRUPT;
        m->offs[i] = off;
        off += m->parts[i].size;
    }
    return off == m->size ? 0 : -OL_ECORRUPT;
}

int ol_ec_manifest_load(struct ol_deploy *ec, const char *bucket, const char *key,
                           size_t klen, const struct ol_eset_obj *o, uint64_t meta_len,
                           struct ol_ec_manifest **out)
{
    *out = NULL;
    if (o->size < meta_len + sizeof(struct mf_head) ||
        o->size - meta_len > sizeof(struct mf_head) + MP_MAX_PARTS * sizeof(struct mf_part))
        return -OL_ECORRUPT;
    size_t len = (size_t)(o->size - meta_len);
    uint8_t *rec = malloc(len);
    struct ol_ec_manifest *m = calloc(1, sizeof(*m));
    int rc = -ENOMEM;
    if (!rec || !m)
        goto out;
    struct ol_eset *es = ol_deploy_set_of(ec, bucket, key, klen);
    rc = ol_eset_read(es, bucket, key, klen, &o->vid, meta_len, len, rec, NULL);
    if (rc < 0)
        goto out;
    struct mf_head h;
    memcpy(&h, rec, sizeof(h));
    uint32_t crc = h.crc;
    memset(rec + offsetof(struct mf_head, crc), 0, sizeof(h.crc));
    rc = -OL_ECORRUPT;
    if (h.magic != MF_MAGIC || h.version != MP_REC_VERSION || h.nparts == 0 ||
        h.nparts > MP_MAX_PARTS ||
        sizeof(h) + (size_t)h.nparts * sizeof(struct mf_part) != len || ol_crc32c(rec, len) != crc || !id_valid(h.upload_id, MP_ID_LEN))
        goto out;
    m->ec = ec;
    snprintf(m->bucket, sizeof(m->bucket), "%s", bucket);
    memcpy(m->id, h.upload_id, MP_ID_LEN);
    m->id[MP_ID_LEN] = 0;
    m->n = h.nparts;
    m->size = h.size;
    m->parts = malloc(sizeof(*m->parts) * m->n);
    if (!m->parts) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(m->parts, rec + sizeof(h), sizeof(*m->parts) * m->n);
    rc = manifest_index(m);
    if (rc < 0)
        goto out;
    *out = m;
    m = NULL;
out:
    if (rc == -OL_ECORRUPT)
        ol_log_limited(OL_LOG_ERROR, "EC multipart: bad manifest in bucket %s", bucket);
    ol_ec_manifest_free(m);
    free(rec);
    return rc;
}

uint32_t ol_ec_manifest_nparts(const struct ol_ec_manifest *m)
{
    return (uint32_t)m->n;
}

/* The index of the first part whose end lies beyond off (off < m->size). */
static size_t part_at(const struct ol_ec_manifest *m, uint64_t off)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->offs[mid] + m->parts[mid].size <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Part i's reader, opened on first use and kept until another part is read
 * (or the manifest is freed).  A part that is gone must never read as a
 * shorter object: -OL_ECORRUPT for it. */
static int part_reader(struct ol_ec_manifest *m, size_t i, struct ol_eset_reader **out)
{
    if (m->rd && m->rd_part == i) {
        *out = m->rd;
        return 0;
    }
    ol_eset_reader_close(m->rd);
    m->rd = NULL;
    if (!m->rd_blob && !(m->rd_blob = malloc(OL_ESET_META_MAX)))
        return -ENOMEM;
    char k[MP_PKEY_LEN + 1];
    part_key(m->id, m->parts[i].part_no, k);
    struct ol_version_id vid;
    memcpy(vid.b, m->parts[i].vid, sizeof(vid.b));
    struct ol_eset_obj o;
    size_t blen;
    int rc = ol_eset_reader_open(ol_deploy_set_of(m->ec, m->bucket, k, MP_PKEY_LEN), m->bucket, k,
                                 MP_PKEY_LEN, &vid, &o, m->rd_blob, OL_ESET_META_MAX, &blen,
                                 &m->rd);
    if (rc < 0) {
        ol_eset_reader_close(m->rd);
        m->rd = NULL;
        ol_log_limited(OL_LOG_ERROR, "EC multipart: part %u of upload %s in %s: %s",
                       m->parts[i].part_no, m->id, m->bucket, ol_strerror(rc));
        return rc == -OL_ENOKEY || rc == -EINVAL ? -OL_ECORRUPT : rc;
    }
    m->rd_part = i;
    *out = m->rd;
    return 0;
}

int ol_ec_manifest_read(struct ol_ec_manifest *m, uint64_t off, size_t len, void *buf)
{
    if (off > m->size || len > m->size - off)
        return -EINVAL;
    uint8_t *p = buf;
    /* Each round reads from one part. */
    for (size_t i = len ? part_at(m, off) : 0; len > 0; i++) {
        if (i >= m->n)
            return -OL_ECORRUPT;
        uint64_t in = off - m->offs[i];
        if (m->parts[i].size == 0)
            continue;
        size_t take = m->parts[i].size - in < len ? (size_t)(m->parts[i].size - in) : len;
        struct ol_eset_reader *rd;
        int rc = part_reader(m, i, &rd);
        if (rc == 0)
            rc = ol_eset_reader_read(rd, in, take, p);
        if (rc < 0)
            return rc == -OL_ENOKEY || rc == -EINVAL ? -OL_ECORRUPT : rc;
        p += take;
        off += take;
        len -= take;
    }
    return 0;
}

ssize_t ol_ec_manifest_map(struct ol_ec_manifest *m, uint64_t off, size_t max, bool check,
                           const uint8_t **data)
{
    if (off >= m->size || max == 0)
        return -EAGAIN;
    size_t i = part_at(m, off);
    if (i >= m->n)
        return -EAGAIN;
    uint64_t in = off - m->offs[i];
    uint64_t left = m->parts[i].size - in;
    struct ol_eset_reader *rd;
    if (part_reader(m, i, &rd) < 0)
        return -EAGAIN; /* the copy path reports it */
    return ol_eset_reader_map(rd, in, max < left ? max : (size_t)left, check, data);
}

int ol_ec_manifest_prev(struct ol_deploy *ec, const char *bucket, const char *key,
                           size_t klen, struct ol_ec_manifest **out)
{
    *out = NULL;
    struct ol_eset_obj o;
    int rc = ol_eset_stat(ol_deploy_set_of(ec, bucket, key, klen), bucket, key, klen, NULL, &o);
    if (rc == -OL_ENOKEY)
        return 0;
    if (rc < 0)
        return rc;
    char etag[64];
    uint64_t ml, msize;
    ol_ec_etag_split(o.etag, etag, &ml, &msize);
    if (msize == UINT64_MAX)
        return 0;
    return ol_ec_manifest_load(ec, bucket, key, klen, &o, ml, out);
}

static void part_delete(struct ol_deploy *ec, const char *bucket, const char *id, uint32_t pn)
{
    char k[MP_PKEY_LEN + 1];
    part_key(id, pn, k);
    int rc = ol_eset_delete(ol_deploy_set_of(ec, bucket, k, MP_PKEY_LEN), bucket, k, MP_PKEY_LEN);
    if (rc < 0)
        ol_log_limited(OL_LOG_WARN, "EC multipart: cannot free part %u of upload %s in %s: %s",
                       pn, id, bucket, ol_strerror(rc));
}

/* ---- background removal of parts ----
 *
 * Removing the parts of a big upload costs a quorum write per part (about 3
 * ms each: 30 s for 10,000 parts), too long for a request.  Abort and the
 * release of a manifest (DELETE or overwrite of a multipart object)
 * therefore only write a cleanup record "\0mx\0<upload id>" in the bucket
 * (one quorum write) and return; the cleaner, a fiber on loop 0, removes
 * every part "\0mp\0<id>\0..." in batches of MP_CLEAN_BATCH, pausing
 * between batches, and deletes the record last.  The record is on the
 * drives, so a restart in the middle resumes (the cleaner's first pass runs
 * at start and then every MP_CLEAN_PASS_MS); an abort or a delete kicks it
 * at once.  Every part of an id that has a cleanup record is garbage: an
 * abort writes one only when no object uses the upload's parts, and a
 * released manifest was the only user of its upload's parts (Complete
 * removed the upload record and every part it did not list). */

static atomic_uint clean_kicks;

static void xkey(const char *id, char out[MP_XKEY_LEN])
{
    memcpy(out, "\0mx\0", 4);
    memcpy(out + 4, id, MP_ID_LEN);
}

/* Writes the cleanup record of upload id: from now on its parts are the
 * cleaner's. */
static int clean_mark(struct ol_deploy *ec, const char *bucket, const char *id)
{
    char k[MP_XKEY_LEN];
    xkey(id, k);
    return ol_eset_put(ol_deploy_set_of(ec, bucket, k, sizeof(k)), bucket, k, sizeof(k), NULL, 0,
                       "cleanup", NULL);
}

static void clean_kick(void)
{
    atomic_fetch_add(&clean_kicks, 1);
}

/* Removes every part of upload id, then its cleanup record.  Stops early
 * (record kept: the next pass resumes) on an error or when the loop stops. */
static int clean_upload(struct ol_deploy *ec, const char *bucket, const char *id,
                        const struct ol_loop *loop)
{
    /* Each round lists the parts left and removes them in batches; a part
     * whose delete failed is tried again in the next round (at most 3). */
    for (unsigned round = 0;; round++) {
        struct part_set ps;
        int rc = parts_collect(ec, bucket, id, 0, &ps);
        if (rc < 0)
            return rc;
        unsigned n = ps.n;
        for (unsigned i = 0; i < n; i++) {
            part_delete(ec, bucket, id, ps.v[i].part_no);
            if ((i + 1) % MP_CLEAN_BATCH == 0) {
                if (loop && ol_loop_stopping(loop)) {
                    free(ps.v);
                    return -OL_ESHUTDOWN;
                }
                ol_io_sleep_ms(MP_CLEAN_PAUSE_MS);
            }
        }
        free(ps.v);
        if (n == 0)
            break;
        if (round == 3)
            return -EAGAIN;
    }
    char k[MP_XKEY_LEN];
    xkey(id, k);
    int rc = ol_eset_delete(ol_deploy_set_of(ec, bucket, k, sizeof(k)), bucket, k, sizeof(k));
    if (rc == 0)
        ol_info("EC multipart: removed the parts of upload %s in %s", id, bucket);
    return rc;
}

struct id_list {
    char id[MP_CLEAN_IDS][MP_ID_LEN + 1];
    unsigned n;
    uint64_t now_ms; /* 0: no grace (a bucket being deleted) */
    unsigned young;  /* records left for a later pass (MP_CLEAN_GRACE_MS) */
};

static int xid_cb(void *arg, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    struct id_list *l = arg;
    if (klen != MP_XKEY_LEN || !id_valid(key + 4, MP_ID_LEN))
        return 0;
    /* A GET that resolved the released version may still be loading its
     * manifest, before it holds the upload (ol_ec_manifest_hold). */
    if (l->now_ms &&
        ol_hlc_stamp_ms(ol_version_id_stamp(&o->vid)) + MP_CLEAN_GRACE_MS > l->now_ms) {
        l->young++;
        return 0;
    }
    if (l->n == MP_CLEAN_IDS)
        return 1;
    memcpy(l->id[l->n], key + 4, MP_ID_LEN);
    l->id[l->n++][MP_ID_LEN] = 0;
    return 0;
}

struct clean_ctx {
    struct ol_deploy *ec;
    const struct ol_loop *loop;
    unsigned cleaned;
    unsigned deferred; /* records left for a later pass: young, or held by a GET */
    bool grace;        /* leave young records (the background passes) */
};

static int clean_bucket(void *arg, const char *bucket)
{
    struct clean_ctx *c = arg;
    struct id_list *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->now_ms = c->grace ? (uint64_t)(ol_wall_ns() / 1000000) : 0;
    static const char prefix[4] = {0, 'm', 'x', 0};
    int rc = walk_prefix(c->ec, bucket, prefix, sizeof(prefix), prefix, sizeof(prefix), xid_cb, l);
    c->deferred += l->young;
    for (unsigned i = 0; rc == 0 && i < l->n; i++) {
        if (upload_held(l->id[i])) {
            c->deferred++;
            continue;
        }
        int e = clean_upload(c->ec, bucket, l->id[i], c->loop);
        if (e == -OL_ESHUTDOWN)
            rc = e;
        else if (e < 0)
            ol_log_limited(OL_LOG_WARN, "EC multipart: cleanup of upload %s in %s: %s",
                           l->id[i], bucket, ol_strerror(e));
        else
            c->cleaned++;
    }
    free(l);
    return rc;
}

int ol_ec_mp_clean_now(struct ol_deploy *ec, const char *bucket)
{
    struct clean_ctx c = {.ec = ec};
    return clean_bucket(&c, bucket);
}

void ol_ec_mp_cleaner_fiber(void *arg)
{
    struct ol_deploy *ec = arg;
    struct ol_loop *loop = ol_loop_current();
    unsigned seen = atomic_load(&clean_kicks) + 1; /* a first pass at start */
    unsigned wait_ms = MP_CLEAN_PASS_MS;
    while (!ol_loop_stopping(loop)) {
        /* Waits for a kick or the periodic pass, in short slices so that a
         * stop is noticed. */
        for (unsigned slept = 0; slept < wait_ms && !ol_loop_stopping(loop) &&
                                 atomic_load(&clean_kicks) == seen;
             slept += 50)
            ol_io_sleep_ms(50);
        if (ol_loop_stopping(loop))
            break;
        seen = atomic_load(&clean_kicks);
        struct clean_ctx c = {.ec = ec, .loop = loop, .grace = true};
        (void)ol_deploy_each_bucket(ec, clean_bucket, &c);
        wait_ms = c.deferred ? MP_CLEAN_RETRY_MS : MP_CLEAN_PASS_MS;
        if (c.cleaned > 0)
            ol_debug("EC multipart: removed the parts of %u uploads", c.cleaned);
    }
}

void ol_ec_manifest_release(struct ol_deploy *ec, struct ol_ec_manifest *m)
{
    if (!m)
        return;
    /* The parts go in the background; if the record cannot be written,
     * they go now (the old, slow way) rather than leak. */
    if (clean_mark(ec, m->bucket, m->id) == 0) {
        clean_kick();
    } else {
        for (uint32_t i = 0; i < m->n; i++)
            part_delete(ec, m->bucket, m->id, m->parts[i].part_no);
    }
    ol_ec_manifest_free(m);
}

/* ---- copies of multipart objects ----
 *
 * Two manifests never share a part object: the release of one (an
 * overwrite, a DELETE) hands its upload's parts to the cleaner.  So a copy
 * of a multipart object copies every part by reference (ol_eset_copy: each
 * drive shares its shard's extents, no byte moves) to a part object of a
 * fresh upload id in the destination bucket, and the caller writes a new
 * manifest naming them.  The fresh id has no upload record: if the copy
 * fails, its parts are handed to the cleaner; a crash before the manifest
 * is in leaves them orphaned (garbage, as section 7 of docs/EC.md says of a
 * crash between the steps of Complete). */

#define MP_SHARE_FIBERS 8u /* part copies of one CopyObject in flight at once */

/* The part copies of one ol_ec_manifest_share, run by up to
 * MP_SHARE_FIBERS fibers on the caller's loop (each part costs a few drive
 * round trips of metadata; the store batches concurrent commits), or
 * inline outside a fiber.  Every field is touched by fibers of one loop. */
struct share_job {
    struct ol_deploy *ec;
    const struct ol_ec_manifest *m;
    const char *bucket;
    const char *nid;
    struct mf_part *np; /* the new manifest's entries: the copies' vids */
    uint32_t next;      /* the next part to copy */
    unsigned running;
    struct ol_fiber *waiter;
    int rc; /* the first error; no part is started after it */
};

static int share_part(struct share_job *j, uint32_t i)
{
    char sk[MP_PKEY_LEN + 1], dk[MP_PKEY_LEN + 1];
    part_key(j->m->id, j->m->parts[i].part_no, sk);
    part_key(j->nid, j->m->parts[i].part_no, dk);
    struct ol_version_id vid;
    memcpy(vid.b, j->m->parts[i].vid, sizeof(vid.b));
    struct ol_eset_commit ci = {.etag = NULL, .mtime_ns = ol_wall_ns()};
    struct ol_eset_obj o;
    int rc = ol_eset_copy(ol_deploy_set_of(j->ec, j->bucket, dk, MP_PKEY_LEN), j->m->bucket, sk,
                          MP_PKEY_LEN, &vid, j->bucket, dk, MP_PKEY_LEN, &ci, &o);
    if (rc == 0)
        memcpy(j->np[i].vid, o.vid.b, sizeof(j->np[i].vid));
    return rc;
}

/* Copies parts until none is left or one failed. */
static void share_work(struct share_job *j)
{
    while (j->rc == 0 && j->next < j->m->n) {
        uint32_t i = j->next++;
        int rc = share_part(j, i);
        if (rc < 0 && j->rc == 0)
            j->rc = rc;
    }
}

static void share_fiber(void *arg)
{
    struct share_job *j = arg;
    share_work(j);
    if (--j->running == 0 && j->waiter)
        ol_fiber_wake(j->waiter);
}

static void share_run(struct share_job *j)
{
    struct ol_loop *loop = ol_loop_current();
    struct ol_fiber *me = ol_fiber_current();
    unsigned want = j->m->n < MP_SHARE_FIBERS ? j->m->n : MP_SHARE_FIBERS;
    for (unsigned f = 1; me && loop && f < want; f++) {
        j->running++;
        if (ol_fiber_spawn(loop, share_fiber, j) != 0) {
            j->running--;
            break; /* no fiber left: fewer helpers (backpressure) */
        }
    }
    share_work(j); /* the caller is one of the workers */
    j->waiter = me;
    for (unsigned guard = 0; j->running > 0 && guard < (1u << 20); guard++)
        ol_fiber_park();
    OL_ASSERT(j->running == 0);
    j->waiter = NULL;
}

int ol_ec_manifest_share(struct ol_deploy *ec, const struct ol_ec_manifest *m, const char *bucket,
                         char id[40], uint8_t **rec, size_t *len)
{
    char nid[MP_ID_LEN + 1], sk[MP_PKEY_LEN + 1], dk[MP_PKEY_LEN + 1];
    int rc = new_upload_id(nid);
    if (rc < 0)
        return rc;
    /* Every part's copy must be in its source's set, or nothing is copied. */
    for (uint32_t i = 0; i < m->n; i++) {
        part_key(m->id, m->parts[i].part_no, sk);
        part_key(nid, m->parts[i].part_no, dk);
        if (ol_deploy_set_of(ec, m->bucket, sk, MP_PKEY_LEN) !=
            ol_deploy_set_of(ec, bucket, dk, MP_PKEY_LEN))
            return -EXDEV;
    }
    size_t n = sizeof(struct mf_head) + (size_t)m->n * sizeof(struct mf_part);
    uint8_t *obj = malloc(n);
    if (!obj)
        return -ENOMEM;
    struct mf_head h = {
        .magic = MF_MAGIC, .version = MP_REC_VERSION, .nparts = m->n, .size = m->size};
    memcpy(h.upload_id, nid, MP_ID_LEN);
    memcpy(obj, &h, sizeof(h));
    struct mf_part *np = (struct mf_part *)(obj + sizeof(h));
    memcpy(np, m->parts, (size_t)m->n * sizeof(struct mf_part));
    struct share_job j = {.ec = ec, .m = m, .bucket = bucket, .nid = nid, .np = np};
    share_run(&j);
    rc = j.rc;
    if (rc < 0) {
        /* A part the manifest names that is gone reads as a damaged object,
         * as a GET of the source would. */
        if (rc == -OL_ENOKEY)
            rc = -OL_ECORRUPT;
        /* Also a copy that failed may have left shards (rolled back best
         * effort): every part started goes to the cleaner. */
        if (j.next > 0)
            ol_ec_manifest_unshare(ec, bucket, nid);
        free(obj);
        return rc;
    }
    uint32_t crc = ol_crc32c(obj, n);
    memcpy(obj + offsetof(struct mf_head, crc), &crc, sizeof(crc));
    snprintf(id, 40, "%s", nid);
    *rec = obj;
    *len = n;
    return 0;
}

void ol_ec_manifest_unshare(struct ol_deploy *ec, const char *bucket, const char *id)
{
    if (clean_mark(ec, bucket, id) == 0)
        clean_kick();
    else
        ol_log_limited(OL_LOG_WARN, "EC multipart: parts of copy %s in %s left orphaned", id,
                       bucket);
}

/* Deletes every stored part of upload id that keep (may be NULL) does not
 * list, then (with record) the upload record.  0 or the listing's error. */
static int upload_free(struct ol_deploy *ec, const char *bucket, const char *id,
                       const struct ol_ec_manifest *keep, bool record)
{
    struct part_set ps;
    int rc = parts_collect(ec, bucket, id, 0, &ps);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < ps.n; i++)
        if (!manifest_has(keep, ps.v[i].part_no))
            part_delete(ec, bucket, id, ps.v[i].part_no);
    free(ps.v);
    if (record) {
        char k[MP_UKEY_LEN];
        upload_key(id, k);
        rc = ol_eset_delete(ol_deploy_set_of(ec, bucket, k, sizeof(k)), bucket, k, sizeof(k));
    }
    return rc;
}

/* ---- handlers ---- */

/* ---- the object layer's calls (obj/ec.h) ---- */

int ol_ec_upload_create(struct ol_deploy *ec, const char *bucket, const char *key,
                        size_t key_len, const uint8_t *meta, uint32_t meta_len, int64_t ctime_ns,
                        char upload_id[40])
{
    int ex = ol_deploy_bucket_exists(ec, bucket);
    if (ex <= 0)
        return ex < 0 ? ex : -OL_ENOBUCKET;
    if (key_len > OL_S3_MAX_KEY_BYTES || meta_len > OL_EC_META_MAX)
        return -EINVAL;
    uint8_t *rec = malloc(MP_REC_MAX);
    if (!rec)
        return -ENOMEM;
    struct up_head h = {.magic = UP_MAGIC, .version = MP_REC_VERSION,
                        .key_len = (uint32_t)key_len, .meta_len = meta_len,
                        .ctime_ns = ctime_ns};
    memcpy(rec, &h, sizeof(h));
    memcpy(rec + sizeof(h), key, key_len);
    memcpy(rec + sizeof(h) + key_len, meta, meta_len);
    size_t len = sizeof(h) + key_len + meta_len;
    uint32_t crc = ol_crc32c(rec, len);
    memcpy(rec + offsetof(struct up_head, crc), &crc, sizeof(crc));
    char id[MP_ID_LEN + 1], k[MP_UKEY_LEN];
    int rc = new_upload_id(id);
    if (rc == 0) {
        upload_key(id, k);
        rc = ol_eset_put(ol_deploy_set_of(ec, bucket, k, sizeof(k)), bucket, k, sizeof(k), rec,
                         len, "upload", NULL);
    }
    free(rec);
    if (rc == 0)
        snprintf(upload_id, 40, "%s", id);
    return rc;
}

int ol_ec_part_target(struct ol_deploy *ec, const char *bucket, const char *upload_id,
                      uint32_t part_no, char **key, size_t *klen)
{
    (void)ec;
    (void)bucket;
    if (!id_valid(upload_id, strlen(upload_id)) || part_no < 1 || part_no > MP_MAX_PARTS)
        return -OL_ENOUPLOAD;
    char *k = malloc(MP_PKEY_LEN + 1);
    if (!k)
        return -ENOMEM;
    part_key(upload_id, part_no, k);
    *key = k;
    *klen = MP_PKEY_LEN;
    return 0;
}

/* Builds the manifest of the listed parts (validated against the stored
 * ones) and its record.  -OL_EPARTORDER, -OL_EINVALIDPART, -OL_ETOOSMALL. */
static int manifest_build(const struct upload *u, const struct ol_complete_part *cp, uint32_t n,
                          const struct part_set *ps, uint64_t min_part,
                          struct ol_ec_manifest *m)
{
    for (uint32_t i = 1; i < n; i++)
        if (cp[i].part_no <= cp[i - 1].part_no)
            return -OL_EPARTORDER;
    m->parts = calloc(n, sizeof(*m->parts));
    if (!m->parts)
        return -ENOMEM;
    m->n = n;
    memcpy(m->id, u->id, sizeof(m->id));
    for (uint32_t i = 0; i < n; i++) {
        const struct part_ent *e = part_find(ps, cp[i].part_no);
        /* An MD5 in hex matches in either case; an encoded one exactly. */
        if (!e || (e->etag[0] == '~' ? strcmp(e->etag, cp[i].etag)
                                      : strcasecmp(e->etag, cp[i].etag)) != 0)
            return -OL_EINVALIDPART;
        struct mf_part *mp = &m->parts[i];
        mp->part_no = e->part_no;
        mp->size = e->size;
        memcpy(mp->vid, e->vid.b, sizeof(mp->vid));
        for (int k = 0; k < 16; k++) {
            unsigned v = 0;
            sscanf(e->etag + 2 * k, "%2x", &v); /* informational: the MD5 leads */
            mp->md5[k] = (uint8_t)v;
        }
        m->size += e->size;
    }
    for (uint32_t i = 0; i + 1 < n; i++)
        if (m->parts[i].size < min_part)
            return -OL_ETOOSMALL;
    return manifest_index(m);
}

int ol_ec_upload_complete(struct ol_deploy *ec, const char *bucket, const char *upload_id,
                          const struct ol_complete_part *cp, uint32_t n, uint64_t min_part_bytes,
                          struct ol_obj_info *info, const struct ol_store_cond *cond,
                          char vid[OL_STORE_VID_MAX])
{
    struct upload *u = NULL;
    struct ol_ec_cond_hold ch = {0};
    struct part_set ps = {0};
    struct ol_ec_manifest m = {.ec = ec}, *prev = NULL;
    uint8_t *obj = NULL, *blob = NULL;
    size_t blen = 0;
    int rc;
    if (!id_valid(upload_id, strlen(upload_id)))
        return -OL_ENOUPLOAD;
    u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    rc = upload_load(ec, bucket, upload_id, u);
    if (rc < 0)
        goto out;
    snprintf(m.bucket, sizeof(m.bucket), "%s", bucket);
    rc = parts_collect(ec, bucket, u->id, 0, &ps);
    if (rc == 0)
        rc = manifest_build(u, cp, n, &ps, min_part_bytes, &m);
    if (rc < 0)
        goto out;
    info->size = m.size;
    /* The object: the manifest record, with the metadata in its blob. */
    size_t len = sizeof(struct mf_head) + (size_t)n * sizeof(struct mf_part);
    obj = malloc(len);
    if (!obj) {
        rc = -ENOMEM;
        goto out;
    }
    struct mf_head h = {.magic = MF_MAGIC, .version = MP_REC_VERSION, .nparts = n,
                        .size = m.size};
    memcpy(h.upload_id, u->id, MP_ID_LEN);
    memcpy(obj, &h, sizeof(h));
    memcpy(obj + sizeof(h), m.parts, (size_t)n * sizeof(struct mf_part));
    uint32_t crc = ol_crc32c(obj, len);
    memcpy(obj + offsetof(struct mf_head, crc), &crc, sizeof(crc));
    char field[112];
    ol_ec_field(field, sizeof(field), info->etag, m.size, info->meta, info->meta_len, m.size);
    rc = ol_ec_blob_of(info, &blob, &blen);
    if (rc < 0)
        goto out;
    const char *key = u->key;
    size_t klen = u->klen;
    struct ol_eset *es = ol_deploy_set_of(ec, bucket, key, klen);
    if (cond && (cond->if_none_match || cond->if_match)) {
        rc = ol_ec_cond_lock(es, bucket, key, klen, &ch);
        if (rc == 0)
            rc = ol_ec_cond_check(ec, es, bucket, key, klen, cond);
        if (rc < 0)
            goto out;
    }
    enum ol_versioning ver;
    rc = ol_ec_versioning_get(ec, bucket, &ver);
    if (rc < 0)
        goto out;
    /* Replacing a multipart object (not kept as an older version): its
     * parts go once the new one is in. */
    if (ver == OL_VERSIONING_OFF)
        (void)ol_ec_manifest_prev(ec, bucket, key, klen, &prev);
    struct ol_eset_put *p = NULL;
    rc = ol_eset_put_begin(es, bucket, key, klen, &p);
    if (rc == 0) {
        ol_eset_put_expect(p, len);
        rc = ol_eset_put_write(p, obj, len);
        struct ol_eset_commit ci = {.etag = field, .mtime_ns = info->mtime_ns, .meta = blob,
                                    .meta_len = blen, .flags = ol_ec_ver_flags(ver)};
        struct ol_eset_obj o;
        if (rc == 0 && ch.h && !ol_ec_cond_held(&ch))
            rc = -EBUSY; /* the lock may have run out: commit nothing */
        if (rc == 0)
            rc = ol_eset_put_commit2(p, &ci, &o);
        else
            ol_eset_put_abort(p);
        if (rc == 0)
            ol_ec_commit_vid(ver, &o, vid);
    }
    if (rc < 0)
        goto out;
    /* The order keeps every step crash-safe (obj/ec_multipart.h): the record,
     * then the parts the object does not use, then the replaced object's. */
    int e = upload_free(ec, bucket, u->id, &m, true);
    if (e < 0)
        ol_log_limited(OL_LOG_WARN, "EC multipart: completed upload %s not cleaned up: %s",
                       u->id, ol_strerror(e));
    if (prev && strcmp(prev->id, u->id) != 0)
        ol_ec_manifest_release(ec, prev);
    else
        ol_ec_manifest_free(prev);
    prev = NULL;
out:
    ol_ec_cond_unlock(&ch);
    ol_ec_manifest_free(prev);
    free(m.parts);
    free(m.offs);
    free(ps.v);
    free(obj);
    free(blob);
    free(u);
    return rc;
}

int ol_ec_upload_abort(struct ol_deploy *ec, const char *bucket, const char *upload_id)
{
    if (!id_valid(upload_id, strlen(upload_id)))
        return -OL_ENOUPLOAD;
    struct upload *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    int rc = upload_load(ec, bucket, upload_id, u);
    if (rc < 0) {
        free(u);
        return rc;
    }
    /* A Complete that stopped before removing the record: the key's object
     * uses some of the parts, which stay. */
    struct ol_ec_manifest *cur = NULL;
    rc = ol_ec_manifest_prev(ec, bucket, u->key, u->klen, &cur);
    if (rc == 0) {
        bool keep = cur && strcmp(cur->id, u->id) == 0;
        if (keep) {
            rc = upload_free(ec, bucket, u->id, cur, true);
        } else {
            /* The cleanup record first, then the upload record: the upload
             * is gone for every later request (NoSuchUpload, not listed)
             * and its parts go in the background (the cleaner). */
            char k[MP_UKEY_LEN];
            upload_key(u->id, k);
            rc = clean_mark(ec, bucket, u->id);
            if (rc == 0)
                rc = ol_eset_delete(ol_deploy_set_of(ec, bucket, k, sizeof(k)), bucket, k,
                                    sizeof(k));
            clean_kick();
        }
    }
    ol_ec_manifest_free(cur);
    free(u);
    return rc;
}

/* ---- sources of list.c ---- */

static void upload_info(const char *bucket, const struct upload *u, struct ol_upload_info *ui)
{
    memset(ui, 0, sizeof(*ui));
    snprintf(ui->upload_id, sizeof(ui->upload_id), "%s", u->id);
    snprintf(ui->bucket, sizeof(ui->bucket), "%s", bucket);
    ui->key = u->key;
    ui->key_len = u->klen;
    ui->ctime_ns = u->ctime_ns;
    ui->meta = u->meta;
    ui->meta_len = u->meta_len;
}

int ol_ec_upload_get(struct ol_deploy *ec, const char *bucket, const char *upload_id,
                        int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    if (!id_valid(upload_id, strlen(upload_id)))
        return -OL_ENOUPLOAD;
    struct upload *u = malloc(sizeof(*u));
    if (!u)
        return -ENOMEM;
    int rc = upload_load(ec, bucket, upload_id, u);
    if (rc == 0) {
        struct ol_upload_info ui;
        upload_info(bucket, u, &ui);
        (void)fn(ctx, &ui);
    }
    free(u);
    return rc;
}

struct id_set {
    char (*ids)[MP_ID_LEN + 1];
    unsigned n, cap;
};

static int id_cb(void *arg, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)o;
    struct id_set *is = arg;
    if (klen != MP_UKEY_LEN || !id_valid(key + 4, MP_ID_LEN))
        return 0;
    if (is->n == MP_MAX_UPLOADS)
        return 1;
    if (is->n == is->cap) {
        unsigned cap = is->cap ? is->cap * 2 : 64;
        void *nv = realloc(is->ids, cap * sizeof(*is->ids));
        if (!nv)
            return 1;
        is->ids = nv;
        is->cap = cap;
    }
    memcpy(is->ids[is->n], key + 4, MP_ID_LEN);
    is->ids[is->n++][MP_ID_LEN] = 0;
    return 0;
}

struct up_ent {
    struct upload *u;
};

static int up_cmp(const void *a, const void *b)
{
    const struct upload *x = ((const struct up_ent *)a)->u, *y = ((const struct up_ent *)b)->u;
    int c = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);
    if (c == 0)
        c = x->klen < y->klen ? -1 : x->klen > y->klen;
    return c ? c : strcmp(x->id, y->id);
}

int ol_ec_upload_list(struct ol_deploy *ec, const char *bucket,
                         int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    struct id_set is = {0};
    struct up_ent *v = NULL;
    unsigned nv = 0;
    int rc = walk_prefix(ec, bucket, "\0mu\0", 4, "\0mu\0", 4, id_cb, &is);
    if (rc < 0)
        goto out;
    v = calloc(is.n ? is.n : 1, sizeof(*v));
    rc = -ENOMEM;
    if (!v)
        goto out;
    for (unsigned i = 0; i < is.n; i++) {
        struct upload *u = malloc(sizeof(*u));
        if (!u)
            goto out;
        int e = upload_load(ec, bucket, is.ids[i], u);
        if (e < 0) {
            /* Gone since the listing (completed or aborted), or unreadable
             * now: a listing shows what it can. */
            free(u);
            continue;
        }
        v[nv++].u = u;
    }
    qsort(v, nv, sizeof(*v), up_cmp);
    for (unsigned i = 0; i < nv; i++) {
        struct ol_upload_info ui;
        upload_info(bucket, v[i].u, &ui);
        if (fn(ctx, &ui) != 0)
            break;
    }
    rc = 0;
out:
    for (unsigned i = 0; i < nv; i++)
        free(v[i].u);
    free(v);
    free(is.ids);
    return rc;
}

int ol_ec_part_list(struct ol_deploy *ec, const char *bucket, const char *upload_id,
                       uint32_t after, int (*fn)(void *ctx, const struct ol_part_info *p),
                       void *ctx)
{
    if (!id_valid(upload_id, strlen(upload_id)))
        return -OL_ENOUPLOAD;
    struct part_set ps;
    int rc = parts_collect(ec, bucket, upload_id, after, &ps);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < ps.n; i++) {
        struct ol_part_info pi = {.part_no = ps.v[i].part_no, .size = ps.v[i].size,
                                  .mtime_ns = ps.v[i].mtime_ns};
        snprintf(pi.etag, sizeof(pi.etag), "%s", ps.v[i].etag);
        if (fn(ctx, &pi) != 0)
            break;
    }
    free(ps.v);
    return 0;
}
