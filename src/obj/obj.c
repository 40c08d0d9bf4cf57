/* The object layer's dispatch: see obj/obj.h.  One drive goes straight to
 * the store; erasure sets go to obj/ec.c.  Nothing else lives here. */
#include "obj/obj.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "deploy/deploy.h"
#include "obj/ec.h"

struct ol_obj {
    struct ol_store *st;   /* one drive, or NULL */
    struct ol_deploy *dp;  /* erasure sets, or NULL */
};

struct ol_obj_reader {
    struct ol_store_reader *sd;
    struct ol_ec_reader *ec;
};

struct ol_obj_writer {
    struct ol_store_writer *sd;
    struct ol_ec_writer *ec;
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
    free(o);
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
    return o->st ? ol_store_write_buffer_bytes(o->st, size_hint)
                 : ol_ec_write_buffer_bytes(o->dp, t, size_hint);
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
    int rc = o->st ? ol_store_write_begin(o->st, size_hint, &w->sd)
                   : ol_ec_write_begin(o->dp, t, size_hint, &w->ec);
    if (rc < 0) {
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int ol_obj_write(struct ol_obj_writer *w, const void *buf, size_t len)
{
    return w->sd ? ol_store_write(w->sd, buf, len) : ol_ec_write(w->ec, buf, len);
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
    if (w->sd)
        ol_store_write_set_release(w->sd, fn, ctx);
    else
        ol_ec_write_set_release(w->ec, fn, ctx);
}

int ol_obj_write_room(struct ol_obj_writer *w, uint8_t **p, size_t *len)
{
    return w->sd ? ol_store_write_room(w->sd, p, len) : ol_ec_write_room(w->ec, p, len);
}

int ol_obj_write_advance(struct ol_obj_writer *w, size_t n)
{
    return w->sd ? ol_store_write_advance(w->sd, n) : ol_ec_write_advance(w->ec, n);
}

int ol_obj_write_commit_object_v(struct ol_obj_writer *w, const struct ol_obj_info *info,
                                 const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    int rc;
    if (w->sd) {
        rc = ol_store_write_commit_object_v(w->sd, w->bucket, w->key, w->key_len, info, cond,
                                            vid);
    } else {
        rc = ol_ec_write_commit_object(w->ec, info, cond, vid);
    }
    free(w);
    return rc;
}

int ol_obj_write_commit_part(struct ol_obj_writer *w, const char *etag)
{
    int rc = w->sd ? ol_store_write_commit_part(w->sd, w->upload_id, w->part_no, etag)
                   : ol_ec_write_commit_part(w->ec, etag);
    free(w);
    return rc;
}

void ol_obj_write_abort(struct ol_obj_writer *w)
{
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
    *out = r;
    return 0;
}

const struct ol_obj_info *ol_obj_read_info(const struct ol_obj_reader *r)
{
    return r->sd ? ol_store_read_info(r->sd) : ol_ec_read_info(r->ec);
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
    return r->sd ? ol_store_read(r->sd, off, max, data) : ol_ec_read(r->ec, off, max, data);
}

ssize_t ol_obj_read_file(struct ol_obj_reader *r, uint64_t off, size_t max, int *fd,
                         uint64_t *foff)
{
    return r->sd ? ol_store_read_file(r->sd, off, max, fd, foff)
                 : ol_ec_read_file(r->ec, off, max, fd, foff);
}

ssize_t ol_obj_read_map(struct ol_obj_reader *r, uint64_t off, size_t max, const uint8_t **data)
{
    return r->sd ? ol_store_read_map(r->sd, off, max, data) : -EAGAIN;
}

void ol_obj_read_close(struct ol_obj_reader *r)
{
    if (!r)
        return;
    if (r->sd)
        ol_store_read_close(r->sd);
    else
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
    return it->sd ? ol_store_iter_next(it->sd, key, key_len, info)
                  : ol_ec_iter_next(it->ec, key, key_len, info);
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
    return it->sd ? ol_store_viter_next(it->sd, key, key_len, vi)
                  : ol_ec_viter_next(it->ec, key, key_len, vi);
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

int ol_obj_part_list(struct ol_obj *o, const char *bucket, const char *upload_id, uint32_t after,
                     int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx)
{
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
