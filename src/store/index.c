/* Index record encodings and the long-key layer over LMDB. */
#include "store/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

int ol_mdb_err(int rc)
{
    if (rc == 0)
        return 0;
    if (rc == MDB_NOTFOUND)
        return -OL_ENOKEY;
    if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
        return -ENOSPC;
    if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND)
        return -OL_ECORRUPT;
    if (rc == MDB_READERS_FULL)
        return -EAGAIN;
    if (rc > 0)
        return -rc;
    return -EIO;
}

/* ---- entries ---- */

static uint32_t entry_crc(const uint8_t *buf, size_t hdr_and_meta, const uint8_t *tail,
                          size_t tail_len)
{
    struct ol_entry_hdr h;
    memcpy(&h, buf, sizeof(h));
    h.crc = 0;
    uint32_t c = ol_crc32c(&h, sizeof(h));
    c = ol_crc32c_extend(c, buf + sizeof(h), hdr_and_meta - sizeof(h));
    return ol_crc32c_extend(c, tail, tail_len);
}

int ol_entry_decode(const void *vbuf, size_t len, struct ol_entry *e)
{
    const uint8_t *buf = vbuf;
    if (len < sizeof(e->h))
        return -OL_ECORRUPT;
    memcpy(&e->h, buf, sizeof(e->h));
    const struct ol_entry_hdr *h = &e->h;
    if (h->magic != OL_ENTRY_MAGIC)
        return -OL_ECORRUPT;
    if (h->version != OL_ENTRY_VERSION &&
        !(h->version == OL_ENTRY_VERSION_ATTRS && h->attr_len > 0))
        return -OL_ECORRUPT;
    if (h->version == OL_ENTRY_VERSION && h->attr_len != 0)
        return -OL_ECORRUPT;
    if (h->block_bytes == 0 || h->block_bytes % 4096 != 0 || h->etag[63] != '\0')
        return -OL_ECORRUPT;
    size_t pos = sizeof(*h);
    if (h->meta_len > len - pos)
        return -OL_ECORRUPT;
    e->meta = buf + pos;
    pos += h->meta_len;
    if (h->attr_len > len - pos)
        return -OL_ECORRUPT;
    e->attrs = buf + pos;
    pos += h->attr_len;
    size_t meta_end = pos;
    size_t tail_len;
    if (h->flags & OL_ENTRY_INLINE) {
        if (h->nextents != 0 || h->ncrc != 0 || h->size != len - pos)
            return -OL_ECORRUPT;
        e->data = buf + pos;
        e->ext = NULL;
        e->crcs = NULL;
        tail_len = 0;
    } else {
        uint64_t need = (uint64_t)h->nextents * OL_EXTENT_BYTES + (uint64_t)h->ncrc * 4;
        if (need != len - pos)
            return -OL_ECORRUPT;
        e->data = NULL;
        e->ext = buf + pos;
        e->crcs = buf + pos + (size_t)h->nextents * OL_EXTENT_BYTES;
        tail_len = (size_t)need;
    }
    if (entry_crc(buf, meta_end, buf + meta_end, tail_len) != h->crc)
        return -OL_ECORRUPT;
    if (!(h->flags & OL_ENTRY_INLINE)) {
        /* The extent table must agree with the size and the CRC count, so
         * that readers can index it without further checks. */
        uint64_t total = 0, ncrc = 0;
        for (uint32_t i = 0; i < h->nextents; i++) {
            struct ol_extent x;
            ol_entry_get_ext(e, i, &x);
            if (x.len == 0 || x.off % 4096 != 0 || x.off < 4096 || x.off + x.len < x.off)
                return -OL_ECORRUPT;
            total += x.len;
            ncrc += ol_blocks(x.len, h->block_bytes);
        }
        if (total != h->size || ncrc != h->ncrc)
            return -OL_ECORRUPT;
    }
    return 0;
}

int ol_entry_build(const struct ol_entry_src *s, uint8_t **out, size_t *out_len)
{
    size_t tail = s->is_inline ? (size_t)s->size
                               : (size_t)s->nextents * OL_EXTENT_BYTES + (size_t)s->ncrc * 4;
    uint32_t attr_len = s->attrs ? s->attr_len : 0;
    size_t len = sizeof(struct ol_entry_hdr) + s->meta_len + attr_len + tail;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    struct ol_entry_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = OL_ENTRY_MAGIC;
    h.version = attr_len ? OL_ENTRY_VERSION_ATTRS : OL_ENTRY_VERSION;
    h.attr_len = attr_len;
    h.flags = s->is_inline ? OL_ENTRY_INLINE : 0;
    h.size = s->size;
    h.mtime_ns = s->mtime_ns;
    if (s->etag)
        strncpy(h.etag, s->etag, sizeof(h.etag) - 1);
    h.nparts = s->nparts;
    h.meta_len = s->meta_len;
    h.nextents = s->is_inline ? 0 : s->nextents;
    h.ncrc = s->is_inline ? 0 : s->ncrc;
    h.block_bytes = s->block_bytes;
    size_t pos = sizeof(h);
    if (s->meta_len)
        memcpy(buf + pos, s->meta, s->meta_len);
    pos += s->meta_len;
    if (attr_len)
        memcpy(buf + pos, s->attrs, attr_len);
    pos += attr_len;
    size_t meta_end = pos;
    if (s->is_inline) {
        if (s->size)
            memcpy(buf + pos, s->inline_data, (size_t)s->size);
        h.inline_crc = ol_crc32c(s->inline_data, (size_t)s->size);
    } else {
        for (uint32_t i = 0; i < s->nextents; i++) {
            memcpy(buf + pos, &s->ext[i].seg, 8);
            memcpy(buf + pos + 8, &s->ext[i].off, 8);
            memcpy(buf + pos + 16, &s->ext[i].len, 8);
            pos += OL_EXTENT_BYTES;
        }
        if (s->ncrc)
            memcpy(buf + pos, s->crcs, (size_t)s->ncrc * 4);
    }
    memcpy(buf, &h, sizeof(h));
    h.crc = entry_crc(buf, meta_end, buf + meta_end, s->is_inline ? 0 : tail);
    memcpy(buf, &h, sizeof(h));
    *out = buf;
    *out_len = len;
    return 0;
}

void ol_entry_get_ext(const struct ol_entry *e, uint32_t i, struct ol_extent *x)
{
    const uint8_t *p = e->ext + (size_t)i * OL_EXTENT_BYTES;
    memcpy(&x->seg, p, 8);
    memcpy(&x->off, p + 8, 8);
    memcpy(&x->len, p + 16, 8);
}

uint32_t ol_entry_get_crc(const struct ol_entry *e, uint32_t i)
{
    uint32_t c;
    memcpy(&c, e->crcs + (size_t)i * 4, 4);
    return c;
}

void ol_entry_patch_ext(uint8_t *buf, size_t len, uint32_t i, uint64_t seg, uint64_t off)
{
    struct ol_entry e;
    int rc = ol_entry_decode(buf, len, &e);
    OL_ASSERT(rc == 0 && !(e.h.flags & OL_ENTRY_INLINE) && i < e.h.nextents);
    uint8_t *p = buf + (e.ext - buf) + (size_t)i * OL_EXTENT_BYTES;
    memcpy(p, &seg, 8);
    memcpy(p + 8, &off, 8);
    size_t meta_end = sizeof(struct ol_entry_hdr) + e.h.meta_len + e.h.attr_len;
    e.h.crc = entry_crc(buf, meta_end, buf + meta_end, len - meta_end);
    memcpy(buf, &e.h, sizeof(e.h));
}

int ol_entry_rewrite(const struct ol_entry *e, const struct ol_entry_over *over, uint8_t **out,
                     size_t *out_len)
{
    const struct ol_entry_hdr *h = &e->h;
    const uint8_t *meta = over->meta ? over->meta : e->meta;
    uint32_t meta_len = over->meta ? over->meta_len : h->meta_len;
    const uint8_t *attrs = over->attrs ? over->attrs : e->attrs;
    uint32_t attr_len = over->attrs ? over->attr_len : h->attr_len;
    bool inl = (h->flags & OL_ENTRY_INLINE) != 0;
    size_t tail = inl ? (size_t)h->size
                      : (size_t)h->nextents * OL_EXTENT_BYTES + (size_t)h->ncrc * 4;
    size_t len = sizeof(*h) + meta_len + attr_len + tail;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    struct ol_entry_hdr nh = *h;
    nh.version = attr_len ? OL_ENTRY_VERSION_ATTRS : OL_ENTRY_VERSION;
    nh.meta_len = meta_len;
    nh.attr_len = attr_len;
    memset(nh.reserved, 0, sizeof(nh.reserved));
    if (over->mtime_ns)
        nh.mtime_ns = over->mtime_ns;
    nh.crc = 0;
    size_t pos = sizeof(nh);
    if (meta_len)
        memcpy(buf + pos, meta, meta_len);
    pos += meta_len;
    if (attr_len)
        memcpy(buf + pos, attrs, attr_len);
    pos += attr_len;
    size_t meta_end = pos;
    /* The tail (inline bytes, or extent table then CRCs) is contiguous in
     * the decoded buffer. */
    const uint8_t *src_tail = inl ? e->data : e->ext;
    if (tail)
        memcpy(buf + pos, src_tail, tail);
    memcpy(buf, &nh, sizeof(nh));
    nh.crc = entry_crc(buf, meta_end, buf + meta_end, inl ? 0 : tail);
    memcpy(buf, &nh, sizeof(nh));
    *out = buf;
    *out_len = len;
    return 0;
}

/* ---- object attributes ---- */

#define OL_ATTR_REC_HDR 8u

static int attr_rec(const uint8_t **p, const uint8_t *end, const uint8_t **name, size_t *nl,
                    const uint8_t **val, size_t *vl)
{
    if ((size_t)(end - *p) < OL_ATTR_REC_HDR)
        return -OL_ECORRUPT;
    uint16_t n16;
    uint32_t v32;
    memcpy(&n16, *p, 2);
    memcpy(&v32, *p + 4, 4);
    const uint8_t *q = *p + OL_ATTR_REC_HDR;
    if ((size_t)(end - q) < (size_t)n16 + v32 || n16 == 0)
        return -OL_ECORRUPT;
    *name = q;
    *nl = n16;
    *val = q + n16;
    *vl = v32;
    *p = q + n16 + v32;
    return 0;
}

int ol_attrs_find(const uint8_t *attrs, size_t len, const char *name, const uint8_t **val,
                  size_t *val_len)
{
    /* No attributes may come as NULL: NULL + 0 is undefined in C. */
    const uint8_t *p = attrs, *end = attrs ? attrs + len : attrs;
    size_t want = strlen(name);
    for (uint32_t guard = 0; p && p < end && guard < OL_ATTRS_MAX; guard++) {
        const uint8_t *n, *v;
        size_t nl, vl;
        int rc = attr_rec(&p, end, &n, &nl, &v, &vl);
        if (rc)
            return rc;
        if (nl == want && memcmp(n, name, nl) == 0) {
            *val = v;
            *val_len = vl;
            return 0;
        }
    }
    return -OL_ENOCONFIG;
}

static void attr_put_rec(uint8_t *dst, const void *name, size_t nl, const void *val, size_t vl)
{
    uint16_t n16 = (uint16_t)nl, zero = 0;
    uint32_t v32 = (uint32_t)vl;
    memcpy(dst, &n16, 2);
    memcpy(dst + 2, &zero, 2);
    memcpy(dst + 4, &v32, 4);
    memcpy(dst + OL_ATTR_REC_HDR, name, nl);
    if (vl)
        memcpy(dst + OL_ATTR_REC_HDR + nl, val, vl);
}

int ol_attrs_set(const uint8_t *attrs, size_t len, const char *name, const void *val,
                 size_t val_len, uint8_t **out, size_t *out_len)
{
    size_t want = strlen(name);
    if (want == 0 || want > OL_ATTR_NAME_MAX || val_len > OL_ATTR_VAL_MAX)
        return -EINVAL;
    size_t cap = len + (val ? OL_ATTR_REC_HDR + want + val_len : 0);
    if (cap > OL_ATTRS_MAX)
        return -OL_ETOOLARGE;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf)
        return -ENOMEM;
    size_t pos = 0;
    bool placed = false;
    const uint8_t *p = attrs, *end = attrs ? attrs + len : NULL;
    int rc = 0;
    /* Copies the records in name order, dropping name's old record and
     * placing its new one before the first name that sorts after it. */
    for (uint32_t guard = 0; guard <= OL_ATTRS_MAX; guard++) {
        const uint8_t *n = NULL, *v = NULL;
        size_t nl = 0, vl = 0;
        bool more = p && p < end;
        int c = 1;
        if (more) {
            rc = attr_rec(&p, end, &n, &nl, &v, &vl);
            if (rc)
                break;
            c = memcmp(n, name, nl < want ? nl : want);
            if (c == 0)
                c = nl < want ? -1 : nl > want ? 1 : 0;
        }
        if (c >= 0 && val && !placed) {
            attr_put_rec(buf + pos, name, want, val, val_len);
            pos += OL_ATTR_REC_HDR + want + val_len;
            placed = true;
        }
        if (!more)
            break;
        if (c == 0)
            continue;
        attr_put_rec(buf + pos, n, nl, v, vl);
        pos += OL_ATTR_REC_HDR + nl + vl;
    }
    if (rc || pos == 0) {
        free(buf);
        buf = NULL;
        pos = 0;
    }
    *out = buf;
    *out_len = pos;
    return rc;
}

_Static_assert(OL_OBJ_ATTR_NAME_MAX == OL_ATTR_NAME_MAX, "one attribute name limit");
_Static_assert(OL_OBJ_ATTR_VAL_MAX == OL_ATTR_VAL_MAX, "one attribute value limit");
/* Room kept for the store's own attributes (the 17-byte version tag and its
 * record), so that a caller's full list never makes a versioned commit fail. */
#define OL_ATTRS_RESERVED 256u

int ol_attrs_check(const struct ol_obj_attr *a, uint32_t n, bool allow_remove)
{
    if (n > OL_OBJ_ATTRS_MAX || (n && !a))
        return -EINVAL;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t nl = a[i].name ? strnlen(a[i].name, OL_ATTR_NAME_MAX + 1) : 0;
        if (nl == 0 || nl > OL_ATTR_NAME_MAX || strncmp(a[i].name, "ol.", 3) == 0)
            return -EINVAL;
        if (!a[i].val && !allow_remove)
            return -EINVAL;
        if (a[i].val && a[i].len > OL_ATTR_VAL_MAX)
            return -OL_ETOOLARGE;
        total += OL_ATTR_REC_HDR + nl + (a[i].val ? a[i].len : 0);
    }
    return total + OL_ATTRS_RESERVED > OL_ATTRS_MAX ? -OL_ETOOLARGE : 0;
}

int ol_attrs_apply(const uint8_t *attrs, size_t len, const struct ol_obj_attr *a, uint32_t n,
                   uint8_t **out, size_t *out_len)
{
    uint8_t *cur = NULL;
    size_t cur_len = 0;
    int rc = 0;
    *out = NULL;
    *out_len = 0;
    OL_ASSERT(n <= OL_OBJ_ATTRS_MAX);
    /* Each round replaces the working section with one more change. */
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *next = NULL;
        size_t next_len = 0;
        rc = ol_attrs_set(i ? cur : attrs, i ? cur_len : len, a[i].name, a[i].val,
                          a[i].val ? a[i].len : 0, &next, &next_len);
        free(cur);
        cur = next;
        cur_len = next_len;
        if (rc)
            break;
    }
    if (rc == 0 && n == 0 && len > 0) {
        cur = malloc(len);
        if (!cur)
            return -ENOMEM;
        memcpy(cur, attrs, len);
        cur_len = len;
    }
    if (rc) {
        free(cur);
        return rc;
    }
    *out = cur;
    *out_len = cur_len;
    return 0;
}

/* ---- bucket settings ---- */

int ol_bconf_key(uint8_t out[OL_BUCKET_MAX + 1 + OL_BCONF_NAME_MAX], const char *bucket,
                 const char *name)
{
    size_t bl = strlen(bucket), nl = strlen(name);
    if (bl == 0 || bl > OL_BUCKET_MAX || nl == 0 || nl > OL_BCONF_NAME_MAX)
        return -EINVAL;
    memcpy(out, bucket, bl);
    out[bl] = 0;
    memcpy(out + bl + 1, name, nl);
    return (int)(bl + 1 + nl);
}

int ol_bconf_build(const void *val, size_t len, uint8_t **out, size_t *out_len)
{
    if (len > OL_BCONF_VAL_MAX)
        return -OL_ETOOLARGE;
    uint8_t *buf = malloc(sizeof(struct ol_bconf_hdr) + len);
    if (!buf)
        return -ENOMEM;
    struct ol_bconf_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = OL_BCONF_MAGIC;
    h.version = 1;
    h.len = (uint32_t)len;
    memcpy(buf, &h, sizeof(h));
    if (len)
        memcpy(buf + sizeof(h), val, len);
    h.crc = ol_crc32c(buf, sizeof(h) + len);
    memcpy(buf, &h, sizeof(h));
    *out = buf;
    *out_len = sizeof(h) + len;
    return 0;
}

int ol_bconf_decode(const void *vbuf, size_t len, const uint8_t **val, size_t *val_len)
{
    const uint8_t *buf = vbuf;
    struct ol_bconf_hdr h;
    if (len < sizeof(h))
        return -OL_ECORRUPT;
    memcpy(&h, buf, sizeof(h));
    uint32_t crc = h.crc;
    h.crc = 0;
    uint32_t c = ol_crc32c(&h, sizeof(h));
    c = ol_crc32c_extend(c, buf + sizeof(h), len - sizeof(h));
    if (h.magic != OL_BCONF_MAGIC || h.version != 1 || h.len != len - sizeof(h) || c != crc)
        return -OL_ECORRUPT;
    *val = buf + sizeof(h);
    *val_len = h.len;
    return 0;
}

/* ---- buckets ---- */

void ol_bucket_rec_build(struct ol_bucket_rec *r, int64_t ctime_ns)
{
    memset(r, 0, sizeof(*r));
    r->magic = OL_BUCKET_MAGIC;
    r->version = 1;
    r->ctime_ns = ctime_ns;
    r->crc = ol_crc32c(r, sizeof(*r));
}

int ol_bucket_rec_decode(const void *buf, size_t len, int64_t *ctime_ns)
{
    struct ol_bucket_rec r;
    if (len != sizeof(r))
        return -OL_ECORRUPT;
    memcpy(&r, buf, sizeof(r));
    uint32_t crc = r.crc;
    r.crc = 0;
    if (r.magic != OL_BUCKET_MAGIC || r.version != 1 || ol_crc32c(&r, sizeof(r)) != crc)
        return -OL_ECORRUPT;
    *ctime_ns = r.ctime_ns;
    return 0;
}

/* ---- uploads ---- */

int ol_upload_build(const char *bucket, const uint8_t *key, size_t key_len, const uint8_t *meta,
                    uint32_t meta_len, int64_t ctime_ns, uint8_t **out, size_t *out_len)
{
    size_t blen = strlen(bucket);
    size_t len = sizeof(struct ol_upload_hdr) + blen + key_len + meta_len;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    struct ol_upload_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = OL_UPLOAD_MAGIC;
    h.version = 1;
    h.ctime_ns = ctime_ns;
    h.bucket_len = (uint16_t)blen;
    h.key_len = (uint32_t)key_len;
    h.meta_len = meta_len;
    size_t pos = sizeof(h);
    memcpy(buf + pos, bucket, blen);
    pos += blen;
    memcpy(buf + pos, key, key_len);
    pos += key_len;
    if (meta_len)
        memcpy(buf + pos, meta, meta_len);
    memcpy(buf, &h, sizeof(h));
    h.crc = ol_crc32c(buf, len);
    memcpy(buf, &h, sizeof(h));
    *out = buf;
    *out_len = len;
    return 0;
}

int ol_upload_decode(const void *vbuf, size_t len, struct ol_upload_view *u)
{
    const uint8_t *buf = vbuf;
    struct ol_upload_hdr h;
    if (len < sizeof(h))
        return -OL_ECORRUPT;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != OL_UPLOAD_MAGIC || h.version != 1)
        return -OL_ECORRUPT;
    if ((uint64_t)h.bucket_len + h.key_len + h.meta_len != len - sizeof(h) ||
        h.bucket_len > OL_BUCKET_MAX || h.key_len > OL_KEY_MAX)
        return -OL_ECORRUPT;
    uint32_t crc = h.crc;
    h.crc = 0;
    uint32_t c = ol_crc32c(&h, sizeof(h));
    c = ol_crc32c_extend(c, buf + sizeof(h), len - sizeof(h));
    if (c != crc)
        return -OL_ECORRUPT;
    u->ctime_ns = h.ctime_ns;
    u->bucket = (const char *)buf + sizeof(h);
    u->bucket_len = h.bucket_len;
    u->key = buf + sizeof(h) + h.bucket_len;
    u->key_len = h.key_len;
    u->meta = u->key + h.key_len;
    u->meta_len = h.meta_len;
    return 0;
}

/* ---- segment records ---- */

static void be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

int ol_idx_seg_get(MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t *written, uint64_t *live)
{
    uint8_t kb[8];
    be64(kb, id);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(txn, dbi, &k, &v);
    if (rc)
        return ol_mdb_err(rc);
    struct ol_segrec r;
    if (v.mv_size != sizeof(r))
        return -OL_ECORRUPT;
    memcpy(&r, v.mv_data, sizeof(r));
    uint32_t crc = r.crc;
    r.crc = 0;
    if (r.magic != OL_SEGREC_MAGIC || r.version != 1 || ol_crc32c(&r, sizeof(r)) != crc)
        return -OL_ECORRUPT;
    *written = r.written;
    *live = r.live;
    return 0;
}

int ol_idx_seg_add(MDB_txn *txn, MDB_dbi dbi, uint64_t id, int64_t delta, uint64_t end,
                   bool *zeroed)
{
    uint64_t written = 0, live = 0;
    int rc = ol_idx_seg_get(txn, dbi, id, &written, &live);
    if (rc && rc != -OL_ENOKEY)
        return rc;
    if (delta < 0 && (uint64_t)-delta > live) {
        /* Accounting must never go negative; if it would, an entry pointed at
         * space that was already freed, which is index damage. */
        ol_error("store: segment %016llx live bytes underflow (%llu - %llu)",
                 (unsigned long long)id, (unsigned long long)live,
                 (unsigned long long)-delta);
        live = 0;
    } else {
        live = (uint64_t)((int64_t)live + delta);
    }
    if (end > written)
        written = end;
    uint8_t kb[8];
    be64(kb, id);
    MDB_val k = {8, kb};
    if (live == 0) {
        if (zeroed)
            *zeroed = true;
        rc = mdb_del(txn, dbi, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : ol_mdb_err(rc);
    }
    struct ol_segrec r;
    memset(&r, 0, sizeof(r));
    r.magic = OL_SEGREC_MAGIC;
    r.version = 1;
    r.written = written;
    r.live = live;
    r.crc = ol_crc32c(&r, sizeof(r));
    MDB_val v = {sizeof(r), &r};
    return ol_mdb_err(mdb_put(txn, dbi, &k, &v, 0));
}

int ol_idx_meta_add(MDB_txn *txn, MDB_dbi dbi, const char *name, int64_t delta)
{
    uint64_t cur = ol_idx_meta_get(txn, dbi, name);
    if (delta < 0 && (uint64_t)-delta > cur)
        cur = 0;
    else
        cur = (uint64_t)((int64_t)cur + delta);
    MDB_val k = {strlen(name), (void *)name}, v = {8, &cur};
    return ol_mdb_err(mdb_put(txn, dbi, &k, &v, 0));
}

uint64_t ol_idx_meta_get(MDB_txn *txn, MDB_dbi dbi, const char *name)
{
    MDB_val k = {strlen(name), (void *)name}, v;
    uint64_t cur = 0;
    if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == 8)
        memcpy(&cur, v.mv_data, 8);
    return cur;
}

/* ---- long keys ----
 *
 * An index key of at most OL_IDX_PREFIX - 1 bytes is its own LMDB key, with
 * the entry as value.  Every longer key is stored in the group record whose
 * LMDB key is its first OL_IDX_PREFIX bytes: the group holds the remaining
 * suffixes (sorted) with their entries.  A key of exactly OL_IDX_PREFIX bytes
 * is the group member with the empty suffix.  Truncation keeps byte order (if
 * a < b then prefix(a) <= prefix(b)), so walking LMDB in order and expanding
 * each group in order walks the full keys in order.
 */

struct ol_group_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t reserved;
    uint32_t count;
    uint32_t crc; /* over this header (crc 0) and all records */
};
_Static_assert(sizeof(struct ol_group_hdr) == 16, "group header is 16 bytes");
#define OL_GROUP_REC_HDR 8u /* u16 suffix_len, u16 reserved, u32 entry_len */

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int group_check(const MDB_val *v, struct ol_group_hdr *h)
{
    if (v->mv_size < sizeof(*h))
        return -OL_ECORRUPT;
    memcpy(h, v->mv_data, sizeof(*h));
    uint32_t crc = h->crc;
    struct ol_group_hdr z = *h;
    z.crc = 0;
    uint32_t c = ol_crc32c(&z, sizeof(z));
    c = ol_crc32c_extend(c, (const uint8_t *)v->mv_data + sizeof(z), v->mv_size - sizeof(z));
    if (h->magic != OL_GROUP_MAGIC || h->version != 1 || c != crc)
        return -OL_ECORRUPT;
    return 0;
}

/* Reads the group record at *p; returns -OL_ECORRUPT if it overruns end. */
static int group_rec(const uint8_t **p, const uint8_t *end, const uint8_t **suf, size_t *suf_len,
                     const uint8_t **ent, size_t *ent_len)
{
    if ((size_t)(end - *p) < OL_GROUP_REC_HDR)
        return -OL_ECORRUPT;
    uint16_t sl;
    uint32_t el;
    memcpy(&sl, *p, 2);
    memcpy(&el, *p + 4, 4);
    const uint8_t *q = *p + OL_GROUP_REC_HDR;
    if ((size_t)(end - q) < (size_t)sl + el || sl > OL_IDX_KEY_MAX - OL_IDX_PREFIX)
        return -OL_ECORRUPT;
    *suf = q;
    *suf_len = sl;
    *ent = q + sl;
    *ent_len = el;
    *p = q + sl + el;
    return 0;
}

int ol_idx_key(uint8_t *out, const char *bucket, const char *key, size_t key_len)
{
    size_t bl = strlen(bucket);
    if (bl == 0 || bl > OL_BUCKET_MAX || key_len == 0)
        return -EINVAL;
    if (key_len > OL_KEY_MAX)
        return -OL_ETOOLARGE;
    memcpy(out, bucket, bl);
    out[bl] = 0;
    memcpy(out + bl + 1, key, key_len);
    return (int)(bl + 1 + key_len);
}

int ol_idx_get(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen, MDB_val *val)
{
    if (klen < OL_IDX_PREFIX) {
        MDB_val mk = {klen, (void *)k};
        return ol_mdb_err(mdb_get(txn, dbi, &mk, val));
    }
    MDB_val mk = {OL_IDX_PREFIX, (void *)k}, gv;
    int rc = mdb_get(txn, dbi, &mk, &gv);
    if (rc)
        return ol_mdb_err(rc);
    struct ol_group_hdr h;
    rc = group_check(&gv, &h);
    if (rc)
        return rc;
    const uint8_t *p = (const uint8_t *)gv.mv_data + sizeof(h);
    const uint8_t *end = (const uint8_t *)gv.mv_data + gv.mv_size;
    for (uint32_t i = 0; i < h.count; i++) {
        const uint8_t *suf, *ent;
        size_t sl, el;
        rc = group_rec(&p, end, &suf, &sl, &ent, &el);
        if (rc)
            return rc;
        int c = keycmp(suf, sl, k + OL_IDX_PREFIX, klen - OL_IDX_PREFIX);
        if (c == 0) {
            val->mv_data = (void *)ent;
            val->mv_size = el;
            return 0;
        }
        if (c > 0)
            break;
    }
    return -OL_ENOKEY;
}

/* Rewrites the group of k: replaces or inserts k's entry (v != NULL) or
 * removes it (v == NULL). */
static int group_update(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen, const void *v,
                        size_t vlen)
{
    MDB_val mk = {OL_IDX_PREFIX, (void *)k}, gv;
    const uint8_t *suffix = k + OL_IDX_PREFIX;
    size_t suffix_len = klen - OL_IDX_PREFIX;
    uint8_t *nb = NULL;
    int rc = mdb_get(txn, dbi, &mk, &gv);
    struct ol_group_hdr h = {.count = 0};
    if (rc == MDB_NOTFOUND) {
        gv.mv_size = sizeof(h);
        gv.mv_data = NULL;
    } else if (rc) {
        return ol_mdb_err(rc);
    } else {
        rc = group_check(&gv, &h);
        if (rc)
            return rc;
    }
    size_t cap = gv.mv_size + (v ? OL_GROUP_REC_HDR + suffix_len + vlen : 0);
    nb = malloc(cap);
    if (!nb)
        return -ENOMEM;
    size_t pos = sizeof(h);
    uint32_t count = 0;
    bool found = false, placed = false;
    const uint8_t *p = gv.mv_data ? (const uint8_t *)gv.mv_data + sizeof(h) : NULL;
    const uint8_t *end = gv.mv_data ? (const uint8_t *)gv.mv_data + gv.mv_size : NULL;
    /* Copies the old records in order, dropping k's old record and inserting
     * its new one at the first suffix that sorts after it. */
    for (uint32_t i = 0; i <= h.count; i++) {
        const uint8_t *suf = NULL, *ent = NULL;
        size_t sl = 0, el = 0;
        int c = 1;
        if (i < h.count) {
            rc = group_rec(&p, end, &suf, &sl, &ent, &el);
            if (rc)
                goto out;
            c = keycmp(suf, sl, suffix, suffix_len);
        }
        if (c >= 0 && v && !placed) {
            uint16_t sl16 = (uint16_t)suffix_len, zero = 0;
            uint32_t el32 = (uint32_t)vlen;
            memcpy(nb + pos, &sl16, 2);
            memcpy(nb + pos + 2, &zero, 2);
            memcpy(nb + pos + 4, &el32, 4);
            memcpy(nb + pos + OL_GROUP_REC_HDR, suffix, suffix_len);
            memcpy(nb + pos + OL_GROUP_REC_HDR + suffix_len, v, vlen);
            pos += OL_GROUP_REC_HDR + suffix_len + vlen;
            count++;
            placed = true;
        }
        if (i == h.count)
            break;
        if (c == 0) {
            found = true;
            continue;
        }
        size_t rl = OL_GROUP_REC_HDR + sl + el;
        memcpy(nb + pos, suf - OL_GROUP_REC_HDR, rl);
        pos += rl;
        count++;
    }
    if (!v && !found) {
        rc = -OL_ENOKEY;
        goto out;
    }
    if (count == 0) {
        rc = ol_mdb_err(mdb_del(txn, dbi, &mk, NULL));
        goto out;
    }
    h.magic = OL_GROUP_MAGIC;
    h.version = 1;
    h.reserved = 0;
    h.count = count;
    h.crc = 0;
    memcpy(nb, &h, sizeof(h));
    h.crc = ol_crc32c(nb, pos);
    memcpy(nb, &h, sizeof(h));
    MDB_val nv = {pos, nb};
    rc = ol_mdb_err(mdb_put(txn, dbi, &mk, &nv, 0));
out:
    free(nb);
    return rc;
}

int ol_idx_put(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen, const void *v,
               size_t vlen)
{
    if (klen == 0 || klen > OL_IDX_KEY_MAX)
        return -EINVAL;
    if (klen < OL_IDX_PREFIX) {
        MDB_val mk = {klen, (void *)k}, mv = {vlen, (void *)v};
        return ol_mdb_err(mdb_put(txn, dbi, &mk, &mv, 0));
    }
    return group_update(txn, dbi, k, klen, v, vlen);
}

int ol_idx_del(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen)
{
    if (klen == 0 || klen > OL_IDX_KEY_MAX)
        return -EINVAL;
    if (klen < OL_IDX_PREFIX) {
        MDB_val mk = {klen, (void *)k};
        return ol_mdb_err(mdb_del(txn, dbi, &mk, NULL));
    }
    return group_update(txn, dbi, k, klen, NULL, 0);
}

/* ---- cursor ---- */

int ol_idx_cur_open(MDB_txn *txn, MDB_dbi dbi, struct ol_idx_cur *cur)
{
    memset(cur, 0, offsetof(struct ol_idx_cur, seek));
    cur->seek_len = 0;
    cur->key_len = 0;
    return ol_mdb_err(mdb_cursor_open(txn, dbi, &cur->c));
}

void ol_idx_cur_close(struct ol_idx_cur *cur)
{
    if (cur->c)
        mdb_cursor_close(cur->c);
    cur->c = NULL;
}

int ol_idx_cur_seek(struct ol_idx_cur *cur, const uint8_t *k, size_t klen, bool inclusive)
{
    if (klen > OL_IDX_KEY_MAX)
        return -EINVAL;
    if (klen)
        memcpy(cur->seek, k, klen);
    cur->seek_len = klen;
    cur->inclusive = inclusive;
    cur->skipping = true;
    cur->gleft = 0;
    cur->lk.mv_size = klen < OL_IDX_PREFIX ? klen : OL_IDX_PREFIX;
    cur->lk.mv_data = cur->seek;
    int rc;
    if (klen == 0)
        rc = mdb_cursor_get(cur->c, &cur->lk, &cur->lv, MDB_FIRST);
    else
        rc = mdb_cursor_get(cur->c, &cur->lk, &cur->lv, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) {
        cur->valid = false;
        cur->pending = false;
        return 0;
    }
    if (rc)
        return ol_mdb_err(rc);
    cur->valid = true;
    cur->pending = true;
    return 0;
}

/* Produces the next full key without the seek filter. */
static int cur_step(struct ol_idx_cur *cur, MDB_val *val)
{
    for (int guard = 0; guard < 1000000; guard++) {
        if (cur->gleft > 0) {
            const uint8_t *suf, *ent;
            size_t sl, el;
            int rc = group_rec(&cur->gp, cur->gend, &suf, &sl, &ent, &el);
            if (rc)
                return rc;
            cur->gleft--;
            memcpy(cur->key, cur->lk.mv_data, OL_IDX_PREFIX);
            memcpy(cur->key + OL_IDX_PREFIX, suf, sl);
            cur->key_len = OL_IDX_PREFIX + sl;
            val->mv_data = (void *)ent;
            val->mv_size = el;
            return 0;
        }
        if (!cur->valid)
            return 1;
        if (!cur->pending) {
            int rc = mdb_cursor_get(cur->c, &cur->lk, &cur->lv, MDB_NEXT);
            if (rc == MDB_NOTFOUND) {
                cur->valid = false;
                return 1;
            }
            if (rc)
                return ol_mdb_err(rc);
        }
        cur->pending = false;
        if (cur->lk.mv_size > OL_IDX_PREFIX)
            return -OL_ECORRUPT;
        if (cur->lk.mv_size < OL_IDX_PREFIX) {
            memcpy(cur->key, cur->lk.mv_data, cur->lk.mv_size);
            cur->key_len = cur->lk.mv_size;
            *val = cur->lv;
            return 0;
        }
        struct ol_group_hdr h;
        int rc = group_check(&cur->lv, &h);
        if (rc)
            return rc;
        cur->gp = (const uint8_t *)cur->lv.mv_data + sizeof(h);
        cur->gend = (const uint8_t *)cur->lv.mv_data + cur->lv.mv_size;
        cur->gleft = h.count;
    }
    return -OL_ECORRUPT;
}

int ol_idx_cur_next(struct ol_idx_cur *cur, const uint8_t **k, size_t *klen, MDB_val *val)
{
    /* Only the first LMDB record after a seek can hold keys below the seek
     * key (see the truncation argument above), so this skips at most one
     * group's worth of records. */
    for (uint32_t guard = 0; guard < 1000000; guard++) {
        int rc = cur_step(cur, val);
        if (rc)
            return rc;
        if (cur->skipping) {
            int c = keycmp(cur->key, cur->key_len, cur->seek, cur->seek_len);
            if (c < 0 || (c == 0 && !cur->inclusive))
                continue;
            cur->skipping = false;
        }
        *k = cur->key;
        *klen = cur->key_len;
        return 0;
    }
    return -OL_ECORRUPT;
}
