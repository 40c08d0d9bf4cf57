/* The erasure-set backend of the object layer (obj/ec.c, obj/ec_multipart.c):
 * internal to src/obj.  Each function has the contract of its ol_obj_*
 * namesake in obj/obj.h, served by the erasure sets of a deployment
 * (deploy/deploy.h).
 *
 * Object layout.  An erasure set stores each object version as its body,
 * with a blob beside every shard (ec/eset.h "Metadata") that holds the S3
 * metadata (s3/meta.h) and the object's attributes (tags), so a GET gets
 * them with the version's resolution, and PutObjectTagging rewrites the
 * blob alone.  The etag field is the ETag.  A completed multipart upload is
 * a manifest of its parts ("<etag>:0:<size>", obj/ec_multipart.c).  Objects
 * written before blobs existed hold their metadata before the body
 * ("<etag>:<length>") and still read.  docs/EC.md, section 6, has the bytes.
 */
#ifndef OL_OBJ_EC_H
#define OL_OBJ_EC_H

#include "obj/obj.h"

struct ol_eset;
struct ol_ec_reader;
struct ol_ec_writer;
struct ol_ec_iter;

/* The most versions of one key a call looks at. */
#define OL_EC_MAX_VERSIONS 1024u
/* The S3 metadata blob's bound in a stored object. */
#define OL_EC_META_MAX (64u << 10)

/* Splits a stored etag field ("<etag>[:<prefix length>[:<manifest size>]]"):
 * the etag, the length of the metadata that leads the stored bytes (objects
 * written before versions had blobs, and manifests), and a manifest's object
 * size (UINT64_MAX when the object is not a manifest). */
void ol_ec_etag_split(const char *field, char etag[64], uint64_t *meta_len,
                      uint64_t *manifest_size);
/* An encrypted object's plaintext size (obj/sse.h) from the field's fourth
 * part ("etag:0:[manifest size]:s" or ":<sealing overhead, hex>") and the
 * version's stored size, or UINT64_MAX: what a listing reports, since it
 * sees the field and not the blob. */
uint64_t ol_ec_etag_plain(const char *field, uint64_t size);
/* Composes a version's etag field: the etag; ":0:manifest_size" for a
 * manifest (UINT64_MAX: none); and for a blob with an ":sse" entry the
 * plaintext size of `stored` sealed bytes as the fourth part. */
void ol_ec_field(char *out, size_t cap, const char *etag, uint64_t manifest_size,
                 const uint8_t *meta, size_t meta_len, uint64_t stored);
/* The blob of a version with info's metadata and attributes (malloc'ed). */
int ol_ec_blob_of(const struct ol_obj_info *info, uint8_t **out, size_t *len);
/* Conditional commits of one key, one at a time across every node that
 * shares its set es (obj/ec.c: this node's table, then the quorum lock of
 * ec/qlock.h): lock (0, -EBUSY when not had in time: 503 SlowDown,
 * -EINVAL), check cond against the key's current version (0,
 * -OL_EPRECONDITION, -OL_ENOKEY), right before the commit make sure the
 * lock is still held (ol_ec_cond_held; false: fail with -EBUSY, commit
 * nothing), commit, unlock.  A zeroed hold unlocks as a no-op. */
struct ol_qlock;
struct ol_ec_cond_hold {
    uint64_t h;          /* this node's table (0: not held) */
    struct ol_qlock *ql; /* the set's (NULL: drives without locks) */
};
int ol_ec_cond_lock(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                    struct ol_ec_cond_hold *out);
bool ol_ec_cond_held(const struct ol_ec_cond_hold *h);
void ol_ec_cond_unlock(struct ol_ec_cond_hold *h);
int ol_ec_cond_check(struct ol_deploy *dp, struct ol_eset *es, const char *bucket,
                     const char *key, size_t klen, const struct ol_store_cond *cond);

int ol_ec_bucket_create(struct ol_deploy *dp, const char *name, int64_t ctime_ns);
int ol_ec_bucket_delete(struct ol_deploy *dp, const char *name);
int ol_ec_bucket_get(struct ol_deploy *dp, const char *name, struct ol_bucket_info *out);
int ol_ec_bucket_list(struct ol_deploy *dp, int (*fn)(void *ctx, const struct ol_bucket_info *b),
                      void *ctx);

uint64_t ol_ec_write_buffer_bytes(struct ol_deploy *dp, const struct ol_obj_target *t,
                                  int64_t size_hint);
int ol_ec_write_begin(struct ol_deploy *dp, const struct ol_obj_target *t, int64_t size_hint,
                      struct ol_ec_writer **out);
int ol_ec_write(struct ol_ec_writer *w, const void *buf, size_t len);
void ol_ec_write_hold(struct ol_ec_writer *w, uint64_t reserved_bytes);
void ol_ec_write_set_release(struct ol_ec_writer *w, ol_store_release_fn fn, void *ctx);
int ol_ec_write_room(struct ol_ec_writer *w, uint8_t **p, size_t *len);
int ol_ec_write_advance(struct ol_ec_writer *w, size_t n);
int ol_ec_write_commit_object(struct ol_ec_writer *w, const struct ol_obj_info *info,
                              const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);
int ol_ec_write_commit_part(struct ol_ec_writer *w, const char *etag);
void ol_ec_write_abort(struct ol_ec_writer *w);

int ol_ec_read_open(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                    const char *vid, struct ol_ec_reader **out);
const struct ol_obj_info *ol_ec_read_info(const struct ol_ec_reader *r);
int ol_ec_read_attr(const struct ol_ec_reader *r, const char *name, const uint8_t **val,
                    size_t *len);
int ol_ec_read_vid(const struct ol_ec_reader *r, char vid[OL_STORE_VID_MAX]);
ssize_t ol_ec_read(struct ol_ec_reader *r, uint64_t off, size_t max, const uint8_t **data);
/* Zero-copy (ol_store_read_file's contract): the file range of a healthy
 * data shard holding byte off, checked now; -EAGAIN: use ol_ec_read. */
ssize_t ol_ec_read_file(struct ol_ec_reader *r, uint64_t off, size_t max, int *fd,
                        uint64_t *foff);
/* The same bytes in the page cache's mapping (ol_store_read_map's
 * contract); !check: not CRC-checked, for sealed bytes (ec/eset.h,
 * ol_eset_reader_map). */
ssize_t ol_ec_read_map(struct ol_ec_reader *r, uint64_t off, size_t max, bool check,
                       const uint8_t **data);
void ol_ec_read_close(struct ol_ec_reader *r);
/* ol_obj_read_direct's answer for an erasure-coded reader. */
struct ol_eset_geom;
int ol_ec_read_direct(const struct ol_ec_reader *r, unsigned *set, struct ol_eset_geom *g);

int ol_ec_attr_put(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                   const char *vid, const char *name, const void *val, size_t len,
                   char vid_out[OL_STORE_VID_MAX]);

int ol_ec_copy(struct ol_deploy *dp, const char *sb, const char *sk, size_t sl, const char *svid,
               const char *db, const char *dk, size_t dl, const struct ol_store_copy_opts *c,
               struct ol_obj_info *out, char vid[OL_STORE_VID_MAX]);
int ol_ec_copy_part(struct ol_deploy *dp, const char *sb, const char *sk, size_t sl,
                    uint64_t off, uint64_t len, const char *src_etag, const char *bucket,
                    const char *upload_id, uint32_t part_no, char etag[64]);

int ol_ec_delete(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len);
int ol_ec_delete_v(struct ol_deploy *dp, const char *bucket, const char *key, size_t key_len,
                   const char *vid, struct ol_store_del_res *res);
int ol_ec_latest_marker(struct ol_deploy *dp, const char *bucket, const char *key,
                        size_t key_len, char vid[OL_STORE_VID_MAX], int64_t *mtime_ns);
int ol_ec_versioning_get(struct ol_deploy *dp, const char *bucket, enum ol_versioning *out);
int ol_ec_versioning_put(struct ol_deploy *dp, const char *bucket, enum ol_versioning v);
/* The flags of a version written in versioning state v, and the id a commit
 * in that state reports ("" unversioned, "null" suspended, else the id). */
struct ol_eset_obj;
uint32_t ol_ec_ver_flags(enum ol_versioning v);
void ol_ec_commit_vid(enum ol_versioning v, const struct ol_eset_obj *o,
                      char vid[OL_STORE_VID_MAX]);

int ol_ec_iter_open(struct ol_deploy *dp, const char *bucket, const char *from, size_t from_len,
                    bool inclusive, struct ol_ec_iter **out);
int ol_ec_iter_next(struct ol_ec_iter *it, const char **key, size_t *key_len,
                    struct ol_obj_info *info);
int ol_ec_iter_seek(struct ol_ec_iter *it, const char *from, size_t from_len, bool inclusive);
void ol_ec_iter_close(struct ol_ec_iter *it);

struct ol_ec_viter;
int ol_ec_viter_open(struct ol_deploy *dp, const char *bucket, struct ol_ec_viter **out);
int ol_ec_viter_seek(struct ol_ec_viter *it, const char *from, size_t from_len);
int ol_ec_viter_next(struct ol_ec_viter *it, const char **key, size_t *key_len,
                     struct ol_version_info *vi);
void ol_ec_viter_close(struct ol_ec_viter *it);

/* obj/ec_multipart.c */
int ol_ec_upload_create(struct ol_deploy *dp, const char *bucket, const char *key,
                        size_t key_len, const uint8_t *meta, uint32_t meta_len, int64_t ctime_ns,
                        char upload_id[40]);
int ol_ec_upload_get(struct ol_deploy *dp, const char *bucket, const char *upload_id,
                     int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);
int ol_ec_part_list(struct ol_deploy *dp, const char *bucket, const char *upload_id,
                    uint32_t after, int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx);
int ol_ec_upload_list(struct ol_deploy *dp, const char *bucket,
                      int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);
int ol_ec_upload_complete(struct ol_deploy *dp, const char *bucket, const char *upload_id,
                          const struct ol_complete_part *parts, uint32_t nparts,
                          uint64_t min_part_bytes, struct ol_obj_info *info,
                          const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);
int ol_ec_upload_abort(struct ol_deploy *dp, const char *bucket, const char *upload_id);

#endif
