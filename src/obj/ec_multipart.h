/* Multipart uploads over erasure sets (docs/EC.md, section 7): the object
 * layer's upload calls (obj/ec.h) and the manifest objects they make.
 *
 * Every uploaded part is an erasure-coded object of its own, and so is the
 * upload itself; both live in the real bucket under keys that begin with NUL,
 * which no S3 key can hold (the router refuses it), so they can never collide
 * with an S3 key, and the listing iterator (obj/ec.c) starts after them:
 *
 *   "\0mu\0<upload id>"                  the upload record: key, metadata, time
 *   "\0mp\0<upload id>\0<part, 5 digits>" a part's bytes, its MD5 as the etag
 *
 * The upload id is 32 lowercase hex digits (random).  Each key is placed on
 * its set by the ordinary placement hash, so the parts of one upload spread
 * over the sets.
 *
 * CompleteMultipartUpload writes the object as a *manifest*: an ordinary
 * erasure-coded object whose body is the S3 metadata blob followed by a
 * manifest record (the upload id and, per part, its number, size, MD5 and
 * the version id of the part object), and whose stored etag field is
 * "<md5-of-md5s>-<N>:<meta length>:<object size>" (the third field marks a
 * manifest and gives the listing its size).  No data is copied; a GET reads
 * the parts, each read pinned to the version the manifest names, so a part
 * that vanished fails the read loudly rather than returning a short object.
 *
 * Ordering (crash safety).  Parts go only after the index no longer needs
 * them: Complete writes the manifest, then deletes the upload record, then
 * the parts it did not list; an overwrite or delete of a manifest object
 * frees the old parts after the new version (or delete marker) is in; Abort
 * deletes the parts, then the record, keeping any part that the key's
 * current manifest refers to (a Complete that crashed before deleting its
 * record).  A crash between the steps leaves orphans (garbage, never a torn
 * object).
 *
 * Threads: every call runs on the caller's fiber, like obj/ec.c.
 */
#ifndef OL_OBJ_EC_MULTIPART_H
#define OL_OBJ_EC_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ol_deploy;
struct ol_eset_obj;

/* Listings start after this key: every internal key sorts below it. */
#define OL_EC_MP_LIST_FLOOR "\0\xff"

/* The key a part's writer writes (malloc'ed into *key): -OL_ENOUPLOAD for a
 * malformed id or part number. */
int ol_ec_part_target(struct ol_deploy *dp, const char *bucket, const char *upload_id,
                      uint32_t part_no, char **key, size_t *klen);

/* ---- manifest objects ---- */

struct ol_ec_manifest;
/* Reads the manifest of bucket/key's version o (its metadata blob is
 * meta_len bytes).  -OL_ECORRUPT when the record does not check. */
int ol_ec_manifest_load(struct ol_deploy *dp, const char *bucket, const char *key, size_t klen,
                        const struct ol_eset_obj *o, uint64_t meta_len,
                        struct ol_ec_manifest **out);
/* Reads object bytes [off, off + len) from the parts (exactly, or an error). */
int ol_ec_manifest_read(struct ol_ec_manifest *m, uint64_t off, size_t len, void *buf);
/* Zero-copy form (ec/eset.h, ol_eset_reader_map): the bytes from off,
 * within one part and one stripe unit, in the page cache's mapping,
 * checked unless !check (sealed bytes), valid until the manifest is freed
 * or reads another part; -EAGAIN: read them with ol_ec_manifest_read,
 * which also reports what is wrong. */
ssize_t ol_ec_manifest_map(struct ol_ec_manifest *m, uint64_t off, size_t max, bool check,
                           const uint8_t **data);
uint32_t ol_ec_manifest_nparts(const struct ol_ec_manifest *m);
/* Marks the manifest's upload as read by a GET of this process: the
 * background cleaner leaves its parts until the manifest is freed, even
 * after an overwrite or DELETE released it.  0 or -ENOMEM. */
int ol_ec_manifest_hold(struct ol_ec_manifest *m);
void ol_ec_manifest_free(struct ol_ec_manifest *m);
/* The manifest of bucket/key's current version, if it is one (*out NULL
 * otherwise, and on any error: the caller goes on, at worst leaving
 * orphaned parts).  Take it before replacing or deleting the key. */
int ol_ec_manifest_prev(struct ol_deploy *dp, const char *bucket, const char *key, size_t klen,
                        struct ol_ec_manifest **out);
/* Hands the parts of m to the cleaner (a cleanup record, one quorum write;
 * the parts are removed in the background) and frees m; NULL is a no-op.
 * Call it only once the key no longer refers to m. */
void ol_ec_manifest_release(struct ol_deploy *dp, struct ol_ec_manifest *m);
/* CopyObject of a multipart object: copies every part of m by reference
 * (ol_eset_copy) to a part object of a fresh upload id in bucket (the
 * destination's), and returns that id and the body of a manifest naming the
 * copies (*rec, malloc'ed, *len bytes): the caller writes it as the
 * destination object (etag field "<etag>:0:<size>", the blob beside), and
 * calls ol_ec_manifest_unshare(id) if that write fails.  -EXDEV, before
 * anything is written, when a part's copy would be in another erasure set
 * (stream the object then); on another error the parts copied so far are
 * handed to the cleaner (-OL_ECORRUPT: a part the manifest names is gone;
 * -OL_EQUORUM, -EOPNOTSUPP: stream instead). */
int ol_ec_manifest_share(struct ol_deploy *dp, const struct ol_ec_manifest *m, const char *bucket,
                         char id[40], uint8_t **rec, size_t *len);
/* Hands the parts of upload id (a copy that no object refers to) to the
 * cleaner. */
void ol_ec_manifest_unshare(struct ol_deploy *dp, const char *bucket, const char *id);
/* The cleaner (loop 0, started by the drive monitor; arg: the deployment):
 * removes the parts of aborted uploads and released manifests in bounded
 * batches, resuming after a restart from the cleanup records on the drives.
 * It leaves a record younger than two seconds, and the parts of an upload
 * a GET holds (ol_ec_manifest_hold), for a later pass. */
void ol_ec_mp_cleaner_fiber(void *arg);
/* Removes the parts of bucket's aborted uploads and released manifests now,
 * on the calling fiber (DeleteBucket of a bucket that holds nothing else):
 * young records too, held uploads not. */
int ol_ec_mp_clean_now(struct ol_deploy *dp, const char *bucket);

#endif
