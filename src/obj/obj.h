/* The object layer: what every S3 handler calls, whatever serves it.
 *
 * One `struct ol_obj` per server.  It has one of two backends, and no
 * handler knows which:
 *   - one drive: a `struct ol_store` (store/store.h), called straight through;
 *   - erasure sets of local drives (obj/ec.c over ec/eset.h and the
 *     deployment of deploy/deploy.h); drives of other nodes plug in under
 *     the erasure sets (ec/drive.h), not here.
 *
 * The calls mirror the store's (store/store.h is the reference for each
 * one's contract: arguments, snapshots, errors); they take the object layer
 * instead of a store, and the calls that create data name their target up
 * front (an erasure set places a write by its key before the first byte).
 * The data shapes (struct ol_obj_info, ol_store_cond, ol_version_info...)
 * are the store's.
 *
 * A call a backend cannot serve answers -ENOTSUP (the S3 layer: 501
 * NotImplemented), the same way in every mode that lacks it; docs/
 * S3-COMPATIBILITY.md lists what is left.
 *
 * Threads: as the store: any loop fiber or plain thread; readers, writers
 * and iterators are used by one thread at a time.
 */
#ifndef OL_OBJ_OBJ_H
#define OL_OBJ_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "obj/sse.h"
#include "store/store.h"

struct ol_obj;
struct ol_obj_reader;
struct ol_obj_writer;
struct ol_obj_iter;
struct ol_obj_viter;
struct ol_deploy;

/* ---- opening ---- */

/* One drive: the layer calls st (borrowed: it must outlive the layer). */
int ol_obj_open_store(struct ol_store *st, struct ol_obj **out);
/* Erasure sets: the layer serves the deployment dp (borrowed). */
int ol_obj_open_ec(struct ol_deploy *dp, struct ol_obj **out);
void ol_obj_close(struct ol_obj *o);
/* The deployment, or NULL on one drive (the admin routes only: no handler
 * may go around the layer). */
struct ol_deploy *ol_obj_deploy(const struct ol_obj *o);
/* SSE-S3's master key (obj/sse.h), set once at start before any request;
 * NULL while none is set (SSE-S3 writes then fail with -ENOKEY). */
void ol_obj_set_sse_master(struct ol_obj *o, const uint8_t key[OL_SSE_KEY]);
const uint8_t *ol_obj_sse_master(const struct ol_obj *o);

/* ---- buckets ---- */

int ol_obj_bucket_create(struct ol_obj *o, const char *name, int64_t ctime_ns);
int ol_obj_bucket_delete(struct ol_obj *o, const char *name);
int ol_obj_bucket_get(struct ol_obj *o, const char *name, struct ol_bucket_info *out);
int ol_obj_bucket_list(struct ol_obj *o, int (*fn)(void *ctx, const struct ol_bucket_info *b),
                       void *ctx);
int ol_obj_bucket_config_put(struct ol_obj *o, const char *bucket, const char *name,
                             const void *val, size_t len);
ssize_t ol_obj_bucket_config_get(struct ol_obj *o, const char *bucket, const char *name,
                                 void *buf, size_t cap);
int ol_obj_versioning_put(struct ol_obj *o, const char *bucket, enum ol_versioning v);
int ol_obj_versioning_get(struct ol_obj *o, const char *bucket, enum ol_versioning *out);

/* ---- writing ---- */

/* What a writer writes: an object (upload_id NULL) or part part_no of an
 * upload of bucket (key unused). */
struct ol_obj_target {
    const char *bucket;
    const char *key;
    size_t key_len;
    const char *upload_id;
    uint32_t part_no;
    /* Encryption (obj/sse.h): an opened ":sse" entry whose data key seals
     * the bytes (NULL or mode OL_SSE_NONE: stored as given).  The caller
     * puts the entry in the object's blob (an upload's, for a part); the
     * layer seals, and readers open, transparently. */
    const struct ol_sse_obj *sse;
};
/* The most buffer memory a writer of size_hint bytes (-1: unknown) holds. */
uint64_t ol_obj_write_buffer_bytes(struct ol_obj *o, const struct ol_obj_target *t,
                                   int64_t size_hint);
/* t (and the strings it names) is copied: the writer may outlive it. */
int ol_obj_write_begin(struct ol_obj *o, const struct ol_obj_target *t, int64_t size_hint,
                       struct ol_obj_writer **out);
int ol_obj_write(struct ol_obj_writer *w, const void *buf, size_t len);
void ol_obj_write_hold(struct ol_obj_writer *w, uint64_t reserved_bytes);
void ol_obj_write_set_release(struct ol_obj_writer *w, ol_store_release_fn fn, void *ctx);
int ol_obj_write_room(struct ol_obj_writer *w, uint8_t **p, size_t *len);
int ol_obj_write_advance(struct ol_obj_writer *w, size_t n);
/* Commits an object writer to its target (ol_store_write_commit_object_v). */
int ol_obj_write_commit_object_v(struct ol_obj_writer *w, const struct ol_obj_info *info,
                                 const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);
/* Commits a part writer (ol_store_write_commit_part). */
int ol_obj_write_commit_part(struct ol_obj_writer *w, const char *etag);
void ol_obj_write_abort(struct ol_obj_writer *w);

/* ---- reading ---- */

/* The current version (ol_store_read_open). */
int ol_obj_read_open(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                     struct ol_obj_reader **out);
int ol_obj_read_open_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                       const char *vid, struct ol_obj_reader **out);
const struct ol_obj_info *ol_obj_read_info(const struct ol_obj_reader *r);
int ol_obj_read_attr(const struct ol_obj_reader *r, const char *name, const uint8_t **val,
                     size_t *len);
int ol_obj_read_vid(const struct ol_obj_reader *r, char vid[OL_STORE_VID_MAX]);
ssize_t ol_obj_read(struct ol_obj_reader *r, uint64_t off, size_t max, const uint8_t **data);
/* Encrypted objects (an ":sse" entry in the blob): ol_obj_read_info's size
 * and ol_obj_read's bytes are the plaintext.  An SSE-S3 object opens with
 * the master key; ol_obj_read_open fails with -ENOKEY when there is none or
 * it is not the one the object was written under.  An SSE-C object's reads
 * fail with -OL_ESSENEEDKEY until ol_obj_read_unlock is given its key
 * (-OL_ESSEWRONGKEY for another).  Listings report plaintext sizes too. */
enum ol_sse_mode ol_obj_read_sse(const struct ol_obj_reader *r);
int ol_obj_read_unlock(struct ol_obj_reader *r, const uint8_t ckey[OL_SSE_KEY]);
/* -EAGAIN where the backend has no file to send from (read with ol_obj_read),
 * and for every encrypted object (the file holds sealed bytes). */
ssize_t ol_obj_read_file(struct ol_obj_reader *r, uint64_t off, size_t max, int *fd,
                         uint64_t *foff);
/* -EAGAIN where the backend cannot point at verified bytes in place
 * (ol_store_read_map; an erasure set's healthy local data shards can, pieces
 * of at most one stripe unit each; manifests and encrypted objects cannot):
 * read those with ol_obj_read. */
ssize_t ol_obj_read_map(struct ol_obj_reader *r, uint64_t off, size_t max, const uint8_t **data);
void ol_obj_read_close(struct ol_obj_reader *r);
/* Direct reads (native/direct.h): where a client may read the reader's
 * bytes from the shards themselves.  0 and *out when they are one
 * erasure-coded version stored as they are: set, the index of its erasure
 * set in the deployment (ol_deploy_set), g its layout.  -ENOTSUP where
 * they are not: one drive, an encrypted object, a multipart manifest, an
 * object whose metadata leads its bytes (written before blobs). */
struct ol_eset_geom;
int ol_obj_read_direct(const struct ol_obj_reader *r, unsigned *set, struct ol_eset_geom *g);

/* ---- deleting ---- */

int ol_obj_delete(struct ol_obj *o, const char *bucket, const char *key, size_t key_len);
int ol_obj_delete_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                    const char *vid, struct ol_store_del_res *res);
int ol_obj_latest_marker(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                         char vid[OL_STORE_VID_MAX], int64_t *mtime_ns);

/* ---- listing ---- */

int ol_obj_iter_open(struct ol_obj *o, const char *bucket, const char *from, size_t from_len,
                     bool inclusive, struct ol_obj_iter **out);
int ol_obj_iter_next(struct ol_obj_iter *it, const char **key, size_t *key_len,
                     struct ol_obj_info *info);
int ol_obj_iter_seek(struct ol_obj_iter *it, const char *from, size_t from_len, bool inclusive);
void ol_obj_iter_close(struct ol_obj_iter *it);
int ol_obj_viter_open(struct ol_obj *o, const char *bucket, struct ol_obj_viter **out);
int ol_obj_viter_seek(struct ol_obj_viter *it, const char *from, size_t from_len);
int ol_obj_viter_next(struct ol_obj_viter *it, const char **key, size_t *key_len,
                      struct ol_version_info *vi);
void ol_obj_viter_close(struct ol_obj_viter *it);

/* ---- multipart uploads (uploads are named by bucket and id) ---- */

int ol_obj_upload_create(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                         const uint8_t *meta, uint32_t meta_len, int64_t ctime_ns,
                         char upload_id[40]);
/* -OL_ENOUPLOAD also when the upload belongs to another bucket. */
int ol_obj_upload_get(struct ol_obj *o, const char *bucket, const char *upload_id,
                      int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);
int ol_obj_part_list(struct ol_obj *o, const char *bucket, const char *upload_id, uint32_t after,
                     int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx);
int ol_obj_upload_list(struct ol_obj *o, const char *bucket,
                       int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);
int ol_obj_upload_complete_if(struct ol_obj *o, const char *bucket, const char *upload_id,
                              const struct ol_complete_part *parts, uint32_t nparts,
                              uint64_t min_part_bytes, struct ol_obj_info *info,
                              const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);
int ol_obj_upload_abort(struct ol_obj *o, const char *bucket, const char *upload_id);

/* ---- copies ---- */

int ol_obj_copy_object_v(struct ol_obj *o, const char *src_bucket, const char *src_key,
                         size_t src_len, const char *src_vid, const char *dst_bucket,
                         const char *dst_key, size_t dst_len, const struct ol_store_copy_opts *c,
                         struct ol_obj_info *out, char vid[OL_STORE_VID_MAX]);
int ol_obj_copy_part(struct ol_obj *o, const char *src_bucket, const char *src_key,
                     size_t src_len, uint64_t off, uint64_t len, const char *src_etag,
                     const char *bucket, const char *upload_id, uint32_t part_no,
                     char etag[64]);

/* ---- object attributes ---- */

int ol_obj_attr_put_v(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                      const char *vid, const char *name, const void *val, size_t len,
                      char vid_out[OL_STORE_VID_MAX]);
ssize_t ol_obj_attr_get(struct ol_obj *o, const char *bucket, const char *key, size_t key_len,
                        const char *name, void *buf, size_t cap);

#endif
