/* The object layer's dispatch: see obj/obj.h.  One drive goes straight to
 * the store; erasure sets go to obj/ec.c.  Encrypted objects' sealing and
 * opening (obj/sse.c) wrap both here, so every mode and every caller gets
 * them the same way. */
#include "obj/obj.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "deploy/deploy.h"
#include "obj/ec.h"
#include "obj/sse.h"
#include "s3/meta.h"

struct ol_obj {
    struct ol_store *st;   /* one drive, or NULL */
    struct ol_deploy *dp;  /* erasure sets, or NULL */
    bool has_master;
    uint8_t master[OL_SSE_KEY]; /* SSE-S3's master key */
};

struct ol_obj_reader {
    struct ol_store_reader *sd;
    struct ol_ec_reader *ec;
    struct ol_sse_reader *sse;  /* an encrypted object: its plaintext */
    struct ol_obj_info info;    /* with sse: the backend's, plaintext size */
};

struct ol_obj_writer {
    struct ol_store_writer *sd;
    struct ol_ec_writer *ec;
    struct ol_sse_writer *sse;  /* sealing the bytes on their way to sd/ec */
    /* The target, for the one drive's commit: copied (a caller's key may
     * be gone by then: the native port's PUT sessions commit in a later
     * request), the key's bytes after the struct. */
    char bucket[64];
    const char *key;
    size_t key_len;
    char upload_id[40];
    uint32_t part_no;
    char key_bytes[];
};

struct ol_obj_iter {
    struct ol_store_iter *sd;
    struct ol_ec_iter *ec;
};

struct ol_obj_viter {
    struct ol_store_viter *sd;
    struct ol_ec_viter *ec;
};

static int obj_new(struct ol_store *st, struct ol_deploy *dp, struct ol_obj **out)
{
    struct ol_obj *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    o->st = st;
    o->dp = dp;
    *out = o;
    return 0;
}

int ol_obj_open_store(struct ol_store *st, struct ol_obj **out)
{
    return obj_new(st, NULL, out);
}

int ol_obj_open_ec(struct ol_deploy *dp, struct ol_obj **out)
{
    return obj_new(NULL, dp, out);
}

void ol_obj_close(struct ol_obj *o)
{
    if (o)
        OPENSSL_cleanse(o->master, sizeof(o->master));
    free(o);
}

void ol_obj_set_sse_master(struct ol_obj *o, const uint8_t key[OL_SSE_KEY])
{
    memcpy(o->master, key, OL_SSE_KEY);
    o->has_master = true;
}

const uint8_t *ol_obj_sse_master(const struct ol_obj *o)
{
    return o->has_master ? o->master : NULL;
}

struct ol_deploy *ol_obj_deploy(const struct ol_obj *o)
{
    return o->dp;
}

/* ---- buckets ---- */

int ol_obj_bucket_create(struct ol_obj *o, const char *name, int64_t ctime_ns)
{
    return o->st ? ol_store_bucket_create(o->st, name, ctime_ns)
                 : ol_ec_bucket_create(o->dp, name, ctime_ns);
}

int ol_obj_bucket_delete(struct ol_obj *o, const char *name)
{
    return o->st ? ol_store_bucket_delete(o->st, name) : ol_ec_bucket_delete(o->dp, name);
}

int ol_obj_bucket_get(struct ol_obj *o, const char *name, struct ol_bucket_info *out)
{
    return o->st ? ol_store_bucket_get(o->st, name, out) : ol_ec_bucket_get(o->dp, name, out);
}

int ol_obj_bucket_list(struct ol_obj *o, int (*fn)(void *ctx, const struct ol_bucket_info *b),
                       void *ctx)
{
    return o->st ? ol_store_bucket_list(o->st, fn, ctx) : ol_ec_bucket_list(o->dp, fn, ctx);
}

int ol_obj_bucket_config_put(struct ol_obj *o, const char *bucket, const char *name,
                             const void *val, size_t len)
{
    return o->st ? ol_store_bucket_config_put(o->st, bucket, name, val, len)
                 : ol_deploy_bucket_config_put(o->dp, bucket, name, val, len);
}

ssize_t ol_obj_bucket_config_get(struct ol_obj *o, const char *bucket, const char *name,
                                 void *buf, size_t cap)
{
    return o->st ? ol_store_bucket_config_get(o->st, bucket, name, buf, cap)
                 : ol_deploy_bucket_config_get(o->dp, bucket, name, buf, cap);
}

int ol_obj_versioning_put(struct ol_obj *o, const char *bucket, enum ol_versioning v)
{
    return o->st ? ol_store_versioning_put(o->st, bucket, v) : ol_ec_versioning_put(o->dp, bucket, v);
}

int ol_obj_versioning_get(struct ol_obj *o, const char *bucket, enum ol_versioning *out)
{
    if (o->st)
        return ol_store_versioning_get(o->st, bucket, out);
    int rc = ol_ec_bucket_get(o->dp, bucket, NULL);
    return rc < 0 ? rc : ol_ec_versioning_get(o->dp, bucket, out);
}

/* ---- writing ---- */

uint64_t ol_obj_write_buffer_bytes(struct ol_obj *o, const struct ol_obj_target *t,
                                   int64_t size_hint)
{
    uint64_t extra = 0;
    if (t->sse && t->sse->mode != OL_SSE_NONE) {
        extra = ol_sse_writer_bytes();
        if (size_hint >= 0)
            size_hint = (int64_t)ol_sse_sealed_len((uint64_t)size_hint);
    }
    return extra + (o->st ? ol_store_write_buffer_bytes(o->st, size_hint)
                          : ol_ec_write_buffer_bytes(o->dp, t, size_hint));
}

/* The backend append that a sealing writer hands its sealed bytes to. */
static int backend_write(void *arg, const void *buf, size_t len)
{
    struct ol_obj_writer *w = arg;
    return w->sd ? ol_store_write(w->sd, buf, len) : ol_ec_write(w->ec, buf, len);
}

int ol_obj_write_begin(struct ol_obj *o, const struct ol_obj_target *t, int64_t size_hint,
                       struct ol_obj_writer **out)
{
    size_t kl = t->key ? t->key_len : 0;
    struct ol_obj_writer *w = calloc(1, sizeof(*w) + kl + 1);
    if (!w)
        return -ENOMEM;
    snprintf(w->bucket, sizeof(w->bucket), "%s", t->bucket);
    if (kl)
        memcpy(w->key_bytes, t->key, kl);
    w->key = t->key ? w->key_bytes : NULL;
    w->key_len = kl;
    if (t->upload_id)
        snprintf(w->upload_id, sizeof(w->upload_id), "%s", t->upload_id);
    w->part_no = t->part_no;
    bool sealed = t->sse && t->sse->mode != OL_SSE_NONE;
    if (sealed && size_hint >= 0)
        size_hint = (int64_t)ol_sse_sealed_len((uint64_t)size_hint);
    int rc = sealed ? ol_sse_writer_new(t->sse, &w->sse) : 0;
    if (rc == 0)
        rc = o->st ? ol_store_write_begin(o->st, size_hint, &w->sd)
                   : ol_ec_write_begin(o->dp, t, size_hint, &w->ec);
    if (rc < 0) {
        ol_sse_writer_free(w->sse);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int ol_obj_write(struct ol_obj_writer *w, const void *buf, size_t len)
{
    if (w->sse)
        return ol_sse_write(w->sse, backend_write, w, buf, len);
    return backend_write(w, buf, len);
}

void ol_obj_write_hold(struct ol_obj_writer *w, uint64_t reserved_bytes)
{
    if (w->sd)
        ol_store_write_hold(w->sd, reserved_bytes);
    else
        ol_ec_write_hold(w->ec, reserved_bytes);
}

void ol_obj_write_set_release(struct ol_obj_writer *w, ol_store_release_fn fn, void *ctx)
{
    /* Sealed: the caller's bytes are in the sealing writer's stage, and the
     * backend's buffers hold only sealed bytes nobody reads back. */
    if (w->sse)
        ol_sse_writer_set_release(w->sse, fn, ctx);
    else if (w->sd)
        ol_store_write_set_release(w->sd, fn, ctx);
    else
        ol_ec_write_set_release(w->ec, fn, ctx);
}

int ol_obj_write_room(struct ol_obj_writer *w, uint8_t **p, size_t *len)
{
    if (w->sse)
        return ol_sse_write_room(w->sse, backend_write, w, p, len);
    return w->sd ? ol_store_write_room(w->sd, p, len) : ol_ec_write_room(w->ec, p, len);
}

int ol_obj_write_advance(struct ol_obj_writer *w, size_t n)
{
    if (w->sse)
        return ol_sse_write_advance(w->sse, n);
    return w->sd ? ol_store_write_advance(w->sd, n) : ol_ec_write_advance(w->ec, n);
}

/* Seals the last package of an encrypted write before its commit. */
static int seal_finish(struct ol_obj_writer *w)
{
    if (!w->sse)
        return 0;
    int rc = ol_sse_write_finish(w->sse, backend_write, w);
    ol_sse_writer_set_release(w->sse, NULL, NULL);
    return rc;
}

int ol_obj_write_commit_object_v(struct ol_obj_writer *w, const struct ol_obj_info *info,
                                 const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    int rc = seal_finish(w);
    if (rc < 0) {
        ol_obj_write_abort(w);
        return rc;
    }
    if (w->sd) {
        rc = ol_store_write_commit_object_v(w->sd, w->bucket, w->key, w->key_len, info, cond,
                                            vid);
    } else {
        rc = ol_ec_write_commit_object(w->ec, info, cond, vid);
    }
    ol_sse_writer_free(w->sse);
    free(w);
    return rc;
}

int ol_obj_write_commit_part(struct ol_obj_writer *w, const char *etag)
{
    int rc = seal_finish(w);
    if (rc < 0) {
        ol_obj_write_abort(w);
        return rc;
    }
    rc = w->sd ? ol_store_write_commit_part(w->sd, w->upload_id, w->part_no, etag)
                   : ol_ec_write_commit_part(w->ec, etag);
    ol_sse_writer_free(w->sse);
    free(w);
    return rc;
}

void ol_obj_write_abort(struct ol_obj_writer *w)
{
    ol_sse_writer_free(w->sse);
    if (w->sd)
        ol_store_write_abort(w->sd);
    else
        ol_ec_write_abort(w->ec);
    free(w);
}

/* ---- reading ---- */

int ol_obj_read_open(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                     struct ol_obj_reader **out)
{
    return ol_obj_read_open_v(o, bucket, key, key_len, NULL, out);
}

int ol_obj_read_open_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                       const char *vid, struct ol_obj_reader **out)
{
    struct ol_obj_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    int rc = o->st ? ol_store_read_open_v(o->st, bucket, key, key_len, vid, &r->sd)
                   : ol_ec_read_open(o->dp, bucket, key, key_len, vid, &r->ec);
    if (rc < 0) {
        free(r);
        return rc;
    }
    const struct ol_obj_info *bi = r->sd ? ol_store_read_info(r->sd) : ol_ec_read_info(r->ec);
    const uint8_t *v;
    size_t vl;
    if (bi->meta && ol_s3_meta_get(bi->meta, bi->meta_len, OL_SSE_META, &v, &vl) == 0) {
        rc = ol_sse_reader_new(bi->meta, bi->meta_len, bi->size, ol_obj_sse_master(o), &r->sse);
        if (rc < 0) {
            ol_obj_read_close(r);
            return rc;
        }
        r->info = *bi;
        r->info.size = ol_sse_reader_size(r->sse);
    }
    *out = r;
    return 0;
}

const struct ol_obj_info *ol_obj_read_info(const struct ol_obj_reader *r)
{
    if (r->sse)
        return &r->info;
    return r->sd ? ol_store_read_info(r->sd) : ol_ec_read_info(r->ec);
}

int ol_obj_read_direct(const struct ol_obj_reader *r, unsigned *set, struct ol_eset_geom *g)
{
    if (!r->ec || r->sse)
        return -ENOTSUP;
    return ol_ec_read_direct(r->ec, set, g);
}

enum ol_sse_mode ol_obj_read_sse(const struct ol_obj_reader *r)
{
    return r->sse ? ol_sse_reader_mode(r->sse) : OL_SSE_NONE;
}

int ol_obj_read_unlock(struct ol_obj_reader *r, const uint8_t ckey[OL_SSE_KEY])
{
    return r->sse ? ol_sse_reader_unlock(r->sse, ckey) : 0;
}

/* An encrypted object's sealed bytes: on one drive straight from the page
 * cache's mapping when they are there (verified, no copy), else read. */
static ssize_t backend_read(void *arg, uint64_t off, size_t max, const uint8_t **data)
{
    struct ol_obj_reader *r = arg;
    if (!r->sd)
        return ol_ec_read(r->ec, off, max, data);
    ssize_t n = ol_store_read_map(r->sd, off, max, data);
    return n == -EAGAIN ? ol_store_read(r->sd, off, max, data) : n;
}

/* The same for the sealed reader, whose GCM tags authenticate every byte
 * it opens: without check, the mapping's bytes are not CRC-checked first
 * (store.h, ol_store_read_map_sealed; ec/eset.h, ol_eset_reader_map), a
 * pass over memory less per GET; a window that fails its tags comes back
 * with check (sse.h, ol_sse_src_fn), and what the checks refuse is read as
 * a plain GET reads it (an erasure set rebuilds it from parity). */
static ssize_t sealed_read(void *arg, uint64_t off, size_t max, bool check,
                           const uint8_t **data, bool *pinned)
{
    struct ol_obj_reader *r = arg;
    ssize_t n;
    if (!r->sd) {
        /* An erasure set's local data shard piece in place (at most one
         * stripe unit: a window across two is taken as two pinned pieces
         * by the sealed reader, sse.c win_fetch), else the set's read. */
        n = ol_ec_read_map(r->ec, off, max, check, data);
        if (n == -EAGAIN)
            return ol_ec_read(r->ec, off, max, data);
    } else {
        n = check ? ol_store_read_map(r->sd, off, max, data)
                  : ol_store_read_map_sealed(r->sd, off, max, data);
        if (n == -EAGAIN)
            return ol_store_read(r->sd, off, max, data);
    }
    /* The mappings stay valid while the reader lives (store.h). */
    if (n > 0)
        *pinned = true;
    return n;
}

int ol_obj_read_attr(const struct ol_obj_reader *r, const char *name, const uint8_t **val,
                     size_t *len)
{
    return r->sd ? ol_store_read_attr(r->sd, name, val, len) : ol_ec_read_attr(r->ec, name, val, len);
}

int ol_obj_read_vid(const struct ol_obj_reader *r, char vid[OL_STORE_VID_MAX])
{
    return r->sd ? ol_store_read_vid(r->sd, vid) : ol_ec_read_vid(r->ec, vid);
}

ssize_t ol_obj_read(struct ol_obj_reader *r, uint64_t off, size_t max, const uint8_t **data)
{
    if (r->sse)
        return ol_sse_read(r->sse, sealed_read, r, off, max, data);
    return backend_read(r, off, max, data);
}

ssize_t ol_obj_read_file(struct ol_obj_reader *r, uint64_t off, size_t max, int *fd,
                         uint64_t *foff)
{
    if (r->sse)
        return -EAGAIN; /* the file holds sealed bytes */
    return r->sd ? ol_store_read_file(r->sd, off, max, fd, foff)
                 : ol_ec_read_file(r->ec, off, max, fd, foff);
}

ssize_t ol_obj_read_map(struct ol_obj_reader *r, uint64_t off, size_t max, const uint8_t **data)
{
    if (r->sse)
        return -EAGAIN;
    return r->sd ? ol_store_read_map(r->sd, off, max, data)
                 : ol_ec_read_map(r->ec, off, max, true, data);
}

void ol_obj_read_close(struct ol_obj_reader *r)
{
    if (!r)
        return;
    ol_sse_reader_free(r->sse);
    if (r->sd)
        ol_store_read_close(r->sd);
    else if (r->ec)
        ol_ec_read_close(r->ec);
    free(r);
}

/* ---- deleting ---- */

int ol_obj_delete(struct ol_obj *o, const char *bucket, const char *key, size_t key_len)
{
    return o->st ? ol_store_delete(o->st, bucket, key, key_len)
                 : ol_ec_delete(o->dp, bucket, key, key_len);
}

int ol_obj_delete_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                    const char *vid, struct ol_store_del_res *res)
{
    if (o->st)
        return ol_store_delete_v(o->st, bucket, key, key_len, vid, res);
    return ol_ec_delete_v(o->dp, bucket, key, key_len, vid, res);
}

int ol_obj_latest_marker(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                         char vid[OL_STORE_VID_MAX], int64_t *mtime_ns)
{
    return o->st ? ol_store_latest_marker(o->st, bucket, key, key_len, vid, mtime_ns)
                 : ol_ec_latest_marker(o->dp, bucket, key, key_len, vid, mtime_ns);
}

/* ---- listing ---- */

int ol_obj_iter_open(struct ol_obj *o, const char *bucket, const char *from, size_t from_len,
                     bool inclusive, struct ol_obj_iter **out)
{
    struct ol_obj_iter *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    int rc = o->st ? ol_store_iter_open(o->st, bucket, from, from_len, inclusive, &it->sd)
                   : ol_ec_iter_open(o->dp, bucket, from, from_len, inclusive, &it->ec);
    if (rc < 0) {
        free(it);
        return rc;
    }
    *out = it;
    return 0;
}

int ol_obj_iter_next(struct ol_obj_iter *it, const char **key, size_t *key_len,
                     struct ol_obj_info *info)
{
    if (!it->sd)
        return ol_ec_iter_next(it->ec, key, key_len, info); /* plaintext sizes already */
    int rc = ol_store_iter_next(it->sd, key, key_len, info);
    if (rc == 0)
        info->size = ol_sse_object_size(info->meta, info->meta_len, info->size);
    return rc;
}

int ol_obj_iter_seek(struct ol_obj_iter *it, const char *from, size_t from_len, bool inclusive)
{
    return it->sd ? ol_store_iter_seek(it->sd, from, from_len, inclusive)
                  : ol_ec_iter_seek(it->ec, from, from_len, inclusive);
}

void ol_obj_iter_close(struct ol_obj_iter *it)
{
    if (!it)
        return;
    if (it->sd)
        ol_store_iter_close(it->sd);
    else
        ol_ec_iter_close(it->ec);
    free(it);
}

int ol_obj_viter_open(struct ol_obj *o, const char *bucket, struct ol_obj_viter **out)
{
    struct ol_obj_viter *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    int rc = o->st ? ol_store_viter_open(o->st, bucket, &it->sd)
                   : ol_ec_viter_open(o->dp, bucket, &it->ec);
    if (rc < 0) {
        free(it);
        return rc;
    }
    *out = it;
    return 0;
}

int ol_obj_viter_seek(struct ol_obj_viter *it, const char *from, size_t from_len)
{
    return it->sd ? ol_store_viter_seek(it->sd, from, from_len)
                  : ol_ec_viter_seek(it->ec, from, from_len);
}

int ol_obj_viter_next(struct ol_obj_viter *it, const char **key, size_t *key_len,
                      struct ol_version_info *vi)
{
    if (!it->sd)
        return ol_ec_viter_next(it->ec, key, key_len, vi);
    int rc = ol_store_viter_next(it->sd, key, key_len, vi);
    if (rc == 0 && !vi->is_marker)
        vi->info.size = ol_sse_object_size(vi->info.meta, vi->info.meta_len, vi->info.size);
    return rc;
}

void ol_obj_viter_close(struct ol_obj_viter *it)
{
    if (!it)
        return;
    if (it->sd)
        ol_store_viter_close(it->sd);
    else
        ol_ec_viter_close(it->ec);
    free(it);
}

/* ---- multipart uploads ---- */

int ol_obj_upload_create(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                         const uint8_t *meta, uint32_t meta_len, int64_t ctime_ns,
                         char upload_id[40])
{
    return o->st ? ol_store_upload_create(o->st, bucket, key, key_len, meta, meta_len, ctime_ns,
                                          upload_id)
                 : ol_ec_upload_create(o->dp, bucket, key, key_len, meta, meta_len, ctime_ns,
                                       upload_id);
}

/* The one drive's uploads are named by id alone: one of another bucket is
 * not this bucket's. */
struct upload_in {
    const char *bucket;
    int (*fn)(void *ctx, const struct ol_upload_info *u);
    void *ctx;
    bool other;
};

static int upload_in_cb(void *arg, const struct ol_upload_info *u)
{
    struct upload_in *a = arg;
    if (strcmp(u->bucket, a->bucket) != 0) {
        a->other = true;
        return 0;
    }
    return a->fn(a->ctx, u);
}

int ol_obj_upload_get(struct ol_obj *o, const char *bucket, const char *upload_id,
                      int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    if (!o->st)
        return ol_ec_upload_get(o->dp, bucket, upload_id, fn, ctx);
    struct upload_in a = {bucket, fn, ctx, false};
    int rc = ol_store_upload_get(o->st, upload_id, upload_in_cb, &a);
    return rc == 0 && a.other ? -OL_ENOUPLOAD : rc;
}

static int upload_sealed_cb(void *arg, const struct ol_upload_info *u)
{
    const uint8_t *v;
    size_t vl;
    *(bool *)arg = u->meta && ol_s3_meta_get(u->meta, u->meta_len, OL_SSE_META, &v, &vl) == 0;
    return 0;
}

struct part_plain {
    int (*fn)(void *ctx, const struct ol_part_info *p);
    void *ctx;
};

/* An encrypted upload's parts are sealed streams: their sizes are given as
 * the plaintext's (ListParts, and the sizes Complete records in ":parts"). */
static int part_plain_cb(void *arg, const struct ol_part_info *p)
{
    struct part_plain *a = arg;
    struct ol_part_info q = *p;
    int64_t plain = ol_sse_plain_len(p->size);
    q.size = plain < 0 ? 0 : (uint64_t)plain;
    return a->fn(a->ctx, &q);
}

int ol_obj_part_list(struct ol_obj *o, const char *bucket, const char *upload_id, uint32_t after,
                     int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx)
{
    bool sealed = false;
    int rc = ol_obj_upload_get(o, bucket, upload_id, upload_sealed_cb, &sealed);
    if (rc < 0)
        return rc;
    struct part_plain a = {fn, ctx};
    if (sealed) {
        fn = part_plain_cb;
        ctx = &a;
    }
    return o->st ? ol_store_part_list(o->st, upload_id, after, fn, ctx)
                 : ol_ec_part_list(o->dp, bucket, upload_id, after, fn, ctx);
}

int ol_obj_upload_list(struct ol_obj *o, const char *bucket,
                       int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    return o->st ? ol_store_upload_list(o->st, bucket, fn, ctx)
                 : ol_ec_upload_list(o->dp, bucket, fn, ctx);
}

int ol_obj_upload_complete_if(struct ol_obj *o, const char *bucket, const char *upload_id,
                              const struct ol_complete_part *parts, uint32_t nparts,
                              uint64_t min_part_bytes, struct ol_obj_info *info,
                              const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    if (o->st)
        return ol_store_upload_complete_if(o->st, upload_id, parts, nparts, min_part_bytes, info,
                                           cond, vid);
    return ol_ec_upload_complete(o->dp, bucket, upload_id, parts, nparts, min_part_bytes, info,
                                 cond, vid);
}

int ol_obj_upload_abort(struct ol_obj *o, const char *bucket, const char *upload_id)
{
    return o->st ? ol_store_upload_abort(o->st, upload_id)
                 : ol_ec_upload_abort(o->dp, bucket, upload_id);
}

/* ---- copies ---- */

int ol_obj_copy_object_v(struct ol_obj *o, const char *src_bucket, const char *src_key,
                         size_t src_len, const char *src_vid, const char *dst_bucket,
                         const char *dst_key, size_t dst_len, const struct ol_store_copy_opts *c,
                         struct ol_obj_info *out, char vid[OL_STORE_VID_MAX])
{
    if (!o->st)
        return ol_ec_copy(o->dp, src_bucket, src_key, src_len, src_vid, dst_bucket, dst_key,
                          dst_len, c, out, vid);
    return ol_store_copy_object_v(o->st, src_bucket, src_key, src_len, src_vid, dst_bucket,
                                  dst_key, dst_len, c, out, vid);
}

int ol_obj_copy_part(struct ol_obj *o, const char *src_bucket, const char *src_key,
                     size_t src_len, uint64_t off, uint64_t len, const char *src_etag,
                     const char *bucket, const char *upload_id, uint32_t part_no, char etag[64])
{
    if (!o->st)
        return ol_ec_copy_part(o->dp, src_bucket, src_key, src_len, off, len, src_etag, bucket,
                               upload_id, part_no, etag);
    return ol_store_copy_part(o->st, src_bucket, src_key, src_len, off, len, src_etag, upload_id,
                              part_no, etag);
}

/* ---- object attributes ---- */

int ol_obj_attr_put_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                      const char *vid, const char *name, const void *val, size_t len,
                      char vid_out[OL_STORE_VID_MAX])
{
    if (!o->st)
        return ol_ec_attr_put(o->dp, bucket, key, key_len, vid, name, val, len, vid_out);
    return ol_store_object_attr_put_v(o->st, bucket, key, key_len, vid, name, val, len, vid_out);
}

ssize_t ol_obj_attr_get(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                        const char *name, void *buf, size_t cap)
{
    if (!o->st) {
        struct ol_obj_reader *r;
        int rc = ol_obj_read_open(o, bucket, key, key_len, &r);
        if (rc < 0)
            return rc;
        const uint8_t *v;
        size_t n;
        ssize_t got = ol_obj_read_attr(r, name, &v, &n);
        if (got == 0) {
            got = n <= cap ? (ssize_t)n : -ENOBUFS;
            if (n <= cap)
                memcpy(buf, v, n);
        }
        ol_obj_read_close(r);
        return got;
    }
    return ol_store_object_attr_get(o->st, bucket, key, key_len, name, buf, cap);
}
