/* Copies by reference (CopyObject, UploadPartCopy), bucket settings and
 * object attributes.  The index changes run in the writer thread
 * (writer.c); this file prepares them. */
#include "store/store_internal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"

#define OL_COPY_PART_TRIES 4 /* the source moved or changed under us */

/* ---- CopyObject ---- */

int ol_store_copy_object(struct ol_store *st, const char *src_bucket, const char *src_key,
                         size_t src_len, const char *dst_bucket, const char *dst_key,
                         size_t dst_len, const struct ol_store_copy_opts *o,
                         struct ol_obj_info *out)
{
    /* The current version of the source; versions.c owns the one copy path. */
    return ol_store_copy_object_v(st, src_bucket, src_key, src_len, NULL, dst_bucket, dst_key,
                                  dst_len, o, out, NULL);
}

/* ---- UploadPartCopy ---- */

/* The pieces of a part copy, in order: shared ranges of the source and
 * copied runs (written by their own streamed writer each). */
struct piece {
    bool shared;
    struct ol_extent x;            /* shared: the source range */
    uint32_t crc0;                 /* shared: its first CRC in the reader's array */
    uint64_t obj_off, len;         /* the piece's bytes in the source object */
    struct ol_store_writer *w;     /* copied: the writer holding them */
};

struct cpart {
    struct piece *p;
    uint32_t n, cap;
};

static int piece_add(struct cpart *c, const struct piece *pc)
{
    /* Adjacent copied bytes join one run. */
    if (!pc->shared && c->n > 0 && !c->p[c->n - 1].shared) {
        c->p[c->n - 1].len += pc->len;
        return 0;
    }
    if (c->n == c->cap) {
        uint32_t nc = c->cap ? c->cap * 2 : 8;
        struct piece *np = realloc(c->p, (size_t)nc * sizeof(*np));
        if (!np)
            return -ENOMEM;
        c->p = np;
        c->cap = nc;
    }
    c->p[c->n++] = *pc;
    return 0;
}

/* Cuts [off, off+len) of the reader's object into shared whole blocks and
 * copied edges.  A block is whole when the range covers it entirely; an
 * extent's short last block counts as whole when the range reaches the
 * extent's end. */
static int plan(const struct ol_store_reader *r, uint64_t off, uint64_t len, struct cpart *c)
{
    uint64_t end = off + len;
    if (r->is_inline) {
        struct piece pc = {.obj_off = off, .len = len};
        return piece_add(c, &pc);
    }
    uint32_t bb = r->block_bytes;
    for (uint32_t i = 0; i < r->next; i++) {
        uint64_t es = r->ext_start[i], xl = r->ext[i].len;
        uint64_t a = off > es ? off : es, b = end < es + xl ? end : es + xl;
        if (a >= b)
            continue;
        uint64_t ra = a - es, rb = b - es;
        uint64_t ba = (ra + bb - 1) / bb * bb;
        uint64_t bz = rb == xl ? xl : rb / bb * bb;
        int rc = 0;
        if (ba >= bz) {
            struct piece pc = {.obj_off = a, .len = b - a};
            rc = piece_add(c, &pc);
            continue;
        }
        if (ba > ra) {
            struct piece pc = {.obj_off = a, .len = ba - ra};
            rc = piece_add(c, &pc);
        }
        struct piece sh = {.shared = true, .obj_off = es + ba, .len = bz - ba};
        sh.x = (struct ol_extent){.seg = r->ext[i].seg, .off = r->ext[i].off + ba, .len = bz - ba};
        sh.crc0 = r->crc_start[i] + (uint32_t)(ba / bb);
        if (rc == 0)
            rc = piece_add(c, &sh);
        if (rc == 0 && rb > bz) {
            struct piece pc = {.obj_off = es + bz, .len = rb - bz};
            rc = piece_add(c, &pc);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static bool is_md5_hex(const char *s)
{
    size_t n = strnlen(s, 64);
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return n == 32;
}

/* Reads the range once (verified by the reader), computing its MD5 and
 * feeding the copied pieces to their writers. */
static int read_range(struct ol_store *st, struct ol_store_reader *r, struct cpart *c,
                      bool want_md5, char etag[64])
{
    EVP_MD_CTX *md = NULL;
    int rc = 0;
    if (want_md5) {
        md = EVP_MD_CTX_new();
        if (!md || !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (uint32_t i = 0; i < c->n; i++) {
        struct piece *pc = &c->p[i];
        if (!pc->shared) {
            rc = ol_store_write_begin(st, (int64_t)pc->len, &pc->w);
            if (rc)
                goto out;
        }
        if (pc->shared && !want_md5)
            continue;
        uint64_t done = 0;
        for (uint64_t guard = 0; done < pc->len && guard < UINT32_MAX; guard++) {
            const uint8_t *d;
            uint64_t left = pc->len - done;
            ssize_t n = ol_store_read(r, pc->obj_off + done,
                                      left < OL_IO_BUF_BYTES ? (size_t)left : OL_IO_BUF_BYTES, &d);
            if (n <= 0) {
                rc = n ? (int)n : -OL_ECORRUPT;
                goto out;
            }
            if (md)
                EVP_DigestUpdate(md, d, (size_t)n);
            if (!pc->shared) {
                rc = ol_store_write(pc->w, d, (size_t)n);
                if (rc)
                    goto out;
            }
            done += (uint64_t)n;
        }
    }
    if (md) {
        unsigned char dig[EVP_MAX_MD_SIZE];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(md, dig, &dl);
        for (unsigned i = 0; i < dl && i < 16; i++)
            snprintf(etag + 2 * i, 3, "%02x", dig[i]);
    }
out:
    EVP_MD_CTX_free(md);
    return rc;
}

/* Builds the part's entry from the pieces: shared ranges keep the source's
 * CRCs, copied runs bring their writers' extents and CRCs. */
static int build_part(struct ol_store *st, const struct ol_store_reader *r, struct cpart *c,
                      uint64_t len, const char *etag, uint8_t **entry, size_t *entry_len,
                      struct ol_extent **shared, uint32_t *nshared)
{
    struct ol_extent *ext = NULL;
    uint32_t *crcs = NULL;
    uint32_t next = 0, ncrc = 0, cap_ext = 0, cap_crc = 0;
    int rc = 0;
    *shared = calloc(c->n ? c->n : 1, sizeof(**shared));
    if (!*shared)
        return -ENOMEM;
    for (uint32_t i = 0; i < c->n; i++) {
        struct piece *pc = &c->p[i];
        const struct ol_extent *px = &pc->x;
        const uint32_t *pcrc = NULL;
        uint32_t pn = 1, pncrc = ol_blocks(pc->len, st->o.block_bytes);
        if (pc->shared) {
            pcrc = r->crcs + pc->crc0;
            (*shared)[(*nshared)++] = pc->x;
        } else {
            rc = ol_writer_seal(pc->w, &px, &pn, &pcrc, &pncrc);
            if (rc)
                goto out;
        }
        if (next + pn > cap_ext) {
            cap_ext = (next + pn) * 2;
            struct ol_extent *ne = realloc(ext, (size_t)cap_ext * sizeof(*ne));
            if (!ne) {
                rc = -ENOMEM;
                goto out;
            }
            ext = ne;
        }
        if (ncrc + pncrc > cap_crc) {
            cap_crc = (ncrc + pncrc) * 2;
            uint32_t *nc = realloc(crcs, (size_t)cap_crc * sizeof(*nc));
            if (!nc) {
                rc = -ENOMEM;
                goto out;
            }
            crcs = nc;
        }
        memcpy(ext + next, px, (size_t)pn * sizeof(*ext));
        memcpy(crcs + ncrc, pcrc, (size_t)pncrc * sizeof(*crcs));
        next += pn;
        ncrc += pncrc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct ol_entry_src s;
    memset(&s, 0, sizeof(s));
    s.size = len;
    s.mtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    s.etag = etag;
    s.block_bytes = st->o.block_bytes;
    s.ext = ext;
    s.nextents = next;
    s.crcs = crcs;
    s.ncrc = ncrc;
    rc = ol_entry_build(&s, entry, entry_len);
out:
    free(ext);
    free(crcs);
    return rc;
}

static void cpart_free(struct cpart *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (c->p[i].w)
            ol_store_write_abort(c->p[i].w);
    free(c->p);
    memset(c, 0, sizeof(*c));
}

/* One attempt: -EAGAIN when the source changed before the commit. */
static int copy_part_once(struct ol_store *st, const char *src_bucket, const char *src_key,
                          size_t src_len, const uint8_t *sk, size_t skl, uint64_t off,
                          uint64_t len, const char *src_etag, const char *upload_id,
                          uint32_t part_no, const uint8_t *pk, size_t pkl, char etag[64])
{
    struct ol_store_reader *r = NULL;
    struct cpart c;
    memset(&c, 0, sizeof(c));
    uint8_t *entry = NULL;
    size_t entry_len = 0;
    struct ol_extent *shared = NULL;
    uint32_t nshared = 0;
    int rc = ol_store_read_open(st, src_bucket, src_key, src_len, &r);
    if (rc)
        goto out;
    const struct ol_obj_info *si = ol_store_read_info(r);
    if (src_etag && strncmp(si->etag, src_etag, sizeof(si->etag)) != 0) {
        rc = -OL_EPRECONDITION;
        goto out;
    }
    if (len == 0 || off > si->size || len > si->size - off) {
        rc = -ERANGE;
        goto out;
    }
    rc = plan(r, off, len, &c);
    if (rc)
        goto out;
    /* A whole single-PUT object's ETag is the MD5 of its bytes already. */
    char md5[64] = {0};
    bool whole = off == 0 && len == si->size && si->nparts == 0 && is_md5_hex(si->etag);
    if (whole)
        memcpy(md5, si->etag, sizeof(md5));
    rc = read_range(st, r, &c, !whole, md5);
    if (rc == 0)
        rc = build_part(st, r, &c, len, md5, &entry, &entry_len, &shared, &nshared);
    if (rc)
        goto out;
    struct ol_copy_part_req req = {.etag = si->etag, .shared = shared, .nshared = nshared};
    struct ol_op op = {
        .type = OL_OP_COPY_PART,
        .src_bucket = src_bucket,
        .src_ikey = sk,
        .src_ikey_len = skl,
        .upload_id = upload_id,
        .part_no = part_no,
        .ikey = pk,
        .ikey_len = pkl,
        .val = entry,
        .val_len = entry_len,
        .cpart = &req,
    };
    /* The reader and the writers keep their segments referenced until the
     * commit is done, so nothing this part points at can be unlinked. */
    rc = ol_commit_run(st, &op);
    if (rc == 0)
        memcpy(etag, md5, 64);
out:
    free(shared);
    free(entry);
    cpart_free(&c);
    ol_store_read_close(r);
    return rc;
}

int ol_store_copy_part(struct ol_store *st, const char *src_bucket, const char *src_key,
                       size_t src_len, uint64_t off, uint64_t len, const char *src_etag,
                       const char *upload_id, uint32_t part_no, char etag[64])
{
    uint8_t sk[OL_IDX_KEY_MAX];
    int skl = ol_idx_key(sk, src_bucket, src_key, src_len);
    if (skl < 0)
        return skl == -EINVAL && src_len > 0 ? -OL_ENOBUCKET : skl;
    if (part_no < 1 || part_no > 10000)
        return -EINVAL;
    uint8_t pk[40];
    size_t pkl = 0;
    int rc = ol_part_key(pk, upload_id, part_no, &pkl);
    if (rc)
        return rc;
    rc = -EAGAIN;
    for (int i = 0; i < OL_COPY_PART_TRIES && rc == -EAGAIN; i++)
        rc = copy_part_once(st, src_bucket, src_key, src_len, sk, (size_t)skl, off, len, src_etag,
                            upload_id, part_no, pk, pkl, etag);
    /* Still changing after several tries: report it as a failed condition
     * (the source is being rewritten). */
    return rc == -EAGAIN ? -OL_EPRECONDITION : rc;
}

/* ---- bucket settings ---- */

int ol_store_bucket_config_put(struct ol_store *st, const char *bucket, const char *name,
                               const void *val, size_t len)
{
    uint8_t k[OL_BUCKET_MAX + 1 + OL_BCONF_NAME_MAX];
    int kl = ol_bconf_key(k, bucket, name);
    if (kl < 0)
        return strlen(bucket) > OL_BUCKET_MAX ? -OL_ENOBUCKET : kl;
    uint8_t *rec = NULL;
    size_t rec_len = 0;
    if (val) {
        int rc = ol_bconf_build(val, len, &rec, &rec_len);
        if (rc)
            return rc;
    }
    struct ol_op op = {
        .type = OL_OP_BCONF_PUT,
        .bucket = bucket,
        .ikey = k,
        .ikey_len = (size_t)kl,
        .val = rec,
        .val_len = rec_len,
    };
    int rc = ol_commit_run(st, &op);
    free(rec);
    return rc;
}

ssize_t ol_store_bucket_config_get(struct ol_store *st, const char *bucket, const char *name,
                                   void *buf, size_t cap)
{
    uint8_t k[OL_BUCKET_MAX + 1 + OL_BCONF_NAME_MAX];
    int kl = ol_bconf_key(k, bucket, name);
    if (kl < 0)
        return strlen(bucket) > OL_BUCKET_MAX || !*bucket ? -OL_ENOBUCKET : kl;
    MDB_txn *txn = NULL;
    ssize_t rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val bk = {strlen(bucket), (void *)bucket}, bv;
    int mr = mdb_get(txn, st->db_buckets, &bk, &bv);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(mr);
        goto out;
    }
    MDB_val mk = {(size_t)kl, k}, mv;
    mr = mdb_get(txn, st->db_bconf, &mk, &mv);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOCONFIG : ol_mdb_err(mr);
        goto out;
    }
    const uint8_t *v;
    size_t vl;
    rc = ol_bconf_decode(mv.mv_data, mv.mv_size, &v, &vl);
    if (rc)
        goto out;
    if (vl > cap) {
        rc = -ENOBUFS;
        goto out;
    }
    if (vl)
        memcpy(buf, v, vl);
    rc = (ssize_t)vl;
out:
    ol_rd_end(st, txn);
    return rc;
}

/* ---- object attributes ---- */

int ol_store_object_attr_put(struct ol_store *st, const char *bucket, const char *key,
                             size_t key_len, const char *name, const void *val, size_t len)
{
    return ol_attr_op_run(st, OL_OP_ATTR_PUT, bucket, key, key_len, NULL, name, val, len, NULL);
}

ssize_t ol_store_object_attr_get(struct ol_store *st, const char *bucket, const char *key,
                                 size_t key_len, const char *name, void *buf, size_t cap)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    MDB_txn *txn = NULL;
    ssize_t rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val v;
    rc = ol_idx_get(txn, st->db_objects, ik, (size_t)kl, &v);
    if (rc == -OL_ENOKEY) {
        MDB_val bk = {strlen(bucket), (void *)bucket}, bv;
        if (mdb_get(txn, st->db_buckets, &bk, &bv) == MDB_NOTFOUND)
            rc = -OL_ENOBUCKET;
    }
    if (rc)
        goto out;
    struct ol_entry e;
    rc = ol_entry_decode(v.mv_data, v.mv_size, &e);
    if (rc)
        goto out;
    const uint8_t *val;
    size_t vl;
    rc = ol_attrs_find(e.attrs, e.h.attr_len, name, &val, &vl);
    if (rc)
        goto out;
    if (vl > cap) {
        rc = -ENOBUFS;
        goto out;
    }
    if (vl)
        memcpy(buf, val, vl);
    rc = (ssize_t)vl;
out:
    ol_rd_end(st, txn);
    return rc;
}
