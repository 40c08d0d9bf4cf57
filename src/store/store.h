/* The per-drive storage engine: the contract.
 *
 * One ol_store owns one drive (a directory).  It holds:
 *   FORMAT          the format file (magic, version, deployment id, drive id, CRC)
 *   index/          an LMDB environment: buckets, objects, uploads, parts, segments
 *   seg/NNNNNNNNNNNNNNNN.seg   append-only segment files, written with O_DIRECT
 * docs/FORMAT.md describes every byte.
 *
 * Threads.  Any loop thread (fiber) or plain thread may call any function here.
 * Reads go straight to LMDB (MVCC readers never block) and to the segment
 * files through ol_io_pread.  Every index change goes to the drive's writer
 * thread, which batches the changes that arrive together into one LMDB write
 * transaction (group commit) and wakes the callers after the commit; the
 * caller's fiber is parked meanwhile (ol_completion), so no core's network
 * loop ever waits on an LMDB commit.  Each loop appends to its own active
 * segment (no lock on the data path).
 *
 * Durability order: a writer's data extents are written and fdatasync'ed
 * before the index entry that points at them is committed, and the call
 * returns only after that commit.  So a crash loses nothing that returned 0,
 * and nothing that did not return is visible.
 *
 * Checksums: data is cut into blocks of `block_bytes` (from the start of each
 * extent); every block has a CRC32C in the index entry; reads verify every
 * block they touch and fail with -OL_ECORRUPT on a mismatch, never returning
 * bad bytes (one exception: ol_store_read_map_sealed, for a caller that
 * authenticates the bytes itself).  Inline objects carry one CRC over the
 * inline bytes.
 *
 * Keys: bucket names are 3..63 bytes, object keys 1..1024 arbitrary bytes.
 * (LMDB keys are limited to 511 bytes; index.c handles longer keys so the
 * callers never see the limit.)
 *
 * Errors: 0 / count, or a negative errno or -OL_E* (core/err.h).
 */
#ifndef OL_STORE_STORE_H
#define OL_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ol_store;
struct ol_store_writer;
/* Room for a version id as text (section "versions" below). */
#define OL_STORE_VID_MAX 24
struct ol_store_reader;
struct ol_store_iter;

struct ol_store_opts {
    uint64_t segment_bytes;   /* roll to a new segment past this size (default 256 MiB) */
    uint32_t block_bytes;     /* checksum block (default 64 KiB; multiple of 4096) */
    uint32_t inline_bytes;    /* objects up to this size live in the index (default 128 KiB) */
    uint64_t map_bytes;       /* LMDB map size (default 64 GiB; sparse) */
    unsigned max_loops;       /* number of loops that may write (one active segment each) */
    unsigned compact_pct;     /* compact a sealed segment whose live share drops below this */
    unsigned commit_batch;    /* at most this many operations per write transaction */
    unsigned compact_interval_ms; /* how often the compactor looks for work (default 10000) */
};
void ol_store_opts_default(struct ol_store_opts *o);

/* Opens (formatting an empty directory) a drive.  Starts its writer and
 * compactor threads. */
int ol_store_open(struct ol_store **out, const char *dir, const struct ol_store_opts *opts);
/* Waits for queued commits, stops the threads, closes everything. */
void ol_store_close(struct ol_store *st);

/* ---- object information ---- */

/* One object attribute (section "object attributes" below) given with a
 * commit or a copy.  name: 1..OL_OBJ_ATTR_NAME_MAX bytes, NUL-terminated, not
 * starting with "ol." (reserved for the store's own attributes, such as the
 * version id).  val: len bytes (at most OL_OBJ_ATTR_VAL_MAX; len 0 is an
 * empty value), or NULL to remove the attribute (copies only: a new object
 * has none to remove).  All borrowed for the call. */
struct ol_obj_attr {
    const char *name;
    const void *val;
    size_t len;
};
#define OL_OBJ_ATTR_NAME_MAX 128u
#define OL_OBJ_ATTR_VAL_MAX (64u << 10)
#define OL_OBJ_ATTRS_MAX 16u /* attributes one commit or copy may carry */

/* What the S3 layer stores with an object and gets back.  `meta` is an opaque
 * blob (the S3 layer serialises content-type, x-amz-meta-* etc. into it). */
struct ol_obj_info {
    uint64_t size;
    int64_t mtime_ns;        /* wall clock, set by the caller at commit */
    char etag[64];           /* NUL-terminated, without quotes */
    uint32_t nparts;         /* 0 for a single PUT, else number of multipart parts */
    uint32_t meta_len;
    const uint8_t *meta;     /* borrowed: valid while the reader/iterator lives */
    /* Commits only (ol_store_write_commit_object*, ol_store_upload_complete*):
     * the object's initial attributes, nattrs (<= OL_OBJ_ATTRS_MAX) of them,
     * written into the new entry in the same writer transaction as the
     * object itself, so no reader ever sees the object without them and a
     * crash cannot separate them.  In a versioned bucket they sit beside the
     * version id, which the store adds.  Borrowed for the call; NULL/0 for
     * none.  Reads, listings and copy results leave them NULL/0.  A bad
     * attribute fails the commit with -EINVAL (name) or -OL_ETOOLARGE (value)
     * before anything is written. */
    const struct ol_obj_attr *attrs;
    uint32_t nattrs;
};

/* ---- buckets ---- */

struct ol_bucket_info {
    char name[64];
    int64_t ctime_ns;
};
int ol_store_bucket_create(struct ol_store *st, const char *name, int64_t ctime_ns);
/* -OL_ENOBUCKET, -OL_EBUCKETNOTEMPTY (objects or multipart uploads remain). */
int ol_store_bucket_delete(struct ol_store *st, const char *name);
int ol_store_bucket_get(struct ol_store *st, const char *name, struct ol_bucket_info *out);
/* Calls fn for each bucket in name order; fn returns non-zero to stop. */
int ol_store_bucket_list(struct ol_store *st,
                         int (*fn)(void *ctx, const struct ol_bucket_info *b), void *ctx);

/* ---- writing: PutObject and UploadPart ---- */

/* Begins a streamed write.  `size_hint` is the expected length (or -1): with it
 * a small object is kept for inlining instead of going to a segment. */
int ol_store_write_begin(struct ol_store *st, int64_t size_hint, struct ol_store_writer **out);
/* Appends bytes.  Data is checksummed and written to the loop's active
 * segment in large aligned O_DIRECT writes as it arrives; memory stays bounded
 * whatever the object's size. */
int ol_store_write(struct ol_store_writer *w, const void *buf, size_t len);
uint64_t ol_store_write_size(const struct ol_store_writer *w);
/* Receiving straight into the writer's buffer, without a copy.
 * ol_store_write_room lends the caller *len > 0 bytes of room at *p, the rest
 * of the writer's current buffer (flushing a full one first); the caller
 * fills a prefix of it and appends that prefix with ol_store_write_advance
 * (n <= *len), which may start writing a full buffer.  The room is valid
 * until the next call on w.  Both return 0 or the writer's sticky error.
 *
 * Appended bytes stay where they are until their buffer is written and
 * reused, so the caller may go on reading them (a deferred hash) after
 * ol_store_write_advance.  Before the writer overwrites or frees a buffer
 * that held appended bytes, it calls the hook set with
 * ol_store_write_set_release(w, fn, ctx): fn(ctx, p, len) must return only
 * once the caller has stopped reading [p, p + len); it may yield the fiber.
 * Commit and abort free the buffers without calling it: the caller must have
 * stopped reading by then.  Set fn NULL before ctx goes away. */
typedef void (*ol_store_release_fn)(void *ctx, const uint8_t *p, size_t len);
void ol_store_write_set_release(struct ol_store_writer *w, ol_store_release_fn fn, void *ctx);
int ol_store_write_room(struct ol_store_writer *w, uint8_t **p, size_t *len);
int ol_store_write_advance(struct ol_store_writer *w, size_t n);
/* Makes the data durable and commits it as object bucket/key, atomically
 * replacing any previous object of that key (whose space is freed).
 * info->size is ignored (the writer knows it); etag, mtime_ns, meta are used.
 * Consumes w, whatever the result.  -OL_ENOBUCKET if the bucket is gone. */
int ol_store_write_commit_object(struct ol_store_writer *w, const char *bucket,
                                 const char *key, size_t key_len,
                                 const struct ol_obj_info *info);
/* Commits the data as part `part_no` (1..10000) of an upload, replacing an
 * earlier upload of the same part number.  Consumes w.  -OL_ENOUPLOAD. */
int ol_store_write_commit_part(struct ol_store_writer *w, const char *upload_id,
                               uint32_t part_no, const char *etag);
/* Drops the write; its space becomes garbage for compaction.  Consumes w. */
void ol_store_write_abort(struct ol_store_writer *w);
/* Hands the writer a reservation of the body memory budget (core/buf.h),
 * consumed: released when w is freed (commit or abort), after its buffers.
 * The writer allocates its first buffer with the first bytes, sized to the
 * size hint (or, without one, to the first ol_store_write). */
void ol_store_write_hold(struct ol_store_writer *w, uint64_t reserved_bytes);
/* The most buffer memory a writer of a body of size_hint bytes (-1:
 * unknown) holds at once: its buffer and those in flight to the disk. */
uint64_t ol_store_write_buffer_bytes(const struct ol_store *st, int64_t size_hint);

/* ---- reading ---- */

/* Opens the current version of bucket/key.  The reader holds a consistent
 * snapshot of the entry: an overwrite or delete afterwards does not affect it
 * (segment files are never modified in place, and an open file survives its
 * unlink).  -OL_ENOBUCKET, -OL_ENOKEY. */
int ol_store_read_open(struct ol_store *st, const char *bucket, const char *key,
                       size_t key_len, struct ol_store_reader **out);
const struct ol_obj_info *ol_store_read_info(const struct ol_store_reader *r);
/* An object attribute from the reader's snapshot: 0 with *val (valid while
 * the reader lives) and *len, or -OL_ENOCONFIG when it is not set. */
int ol_store_read_attr(const struct ol_store_reader *r, const char *name, const uint8_t **val,
                       size_t *len);
/* Reads verified bytes at `off`: on success *data points at up to `max`
 * bytes inside the reader's own buffer (valid until the next call) and the
 * count is returned; 0 at end of object; -OL_ECORRUPT on a checksum failure. */
ssize_t ol_store_read(struct ol_store_reader *r, uint64_t off, size_t max, const uint8_t **data);
/* Zero-copy form for sendfile(2): checks the blocks holding up to `max`
 * bytes at `off` against their CRCs, as they are in the page cache now, and
 * returns how many (> 0, at most 1 MiB, within one extent) with the file
 * that holds them: *fd (valid while the reader lives) at *foff.  Send them at
 * once, without yielding in between.  0 at end of object; -EAGAIN when the
 * bytes are not all in the page cache, fail a check, or the object is inline:
 * read that window with ol_store_read instead (which waits for the device
 * and reports corruption). */
ssize_t ol_store_read_file(struct ol_store_reader *r, uint64_t off, size_t max, int *fd,
                           uint64_t *foff);
/* The checks of ol_store_read_file, but the answer is a pointer: *data
 * points at up to max verified bytes at off in the segment's read-only
 * mapping (segmap.c), not limited to a window, valid while the reader
 * lives (it holds the segment).  The bytes are the page cache's: a page
 * the kernel evicts is read again from the device when touched (an I/O
 * error then raises SIGBUS in whoever touches it), so a caller that sends
 * from here keeps a checksum of what it sends (the native port's replies
 * carry their CRC32C).  -EAGAIN as ol_store_read_file (inline, not cached,
 * a bad block: read with ol_store_read). */
ssize_t ol_store_read_map(struct ol_store_reader *r, uint64_t off, size_t max,
                          const uint8_t **data);
/* ol_store_read_map without the CRC checks, for bytes whose reader
 * authenticates every one of them itself, more strongly than a CRC32C
 * does (obj/sse.c: AES-GCM tags over sealed objects), and reports a
 * mismatch as -OL_ECORRUPT.  Checking them twice cost a pass over memory
 * per GET (bench/RESULTS.md, "Encryption at rest").  The scrubber still
 * checks the CRCs.  -EAGAIN as ol_store_read_map. */
ssize_t ol_store_read_map_sealed(struct ol_store_reader *r, uint64_t off, size_t max,
                                 const uint8_t **data);
void ol_store_read_close(struct ol_store_reader *r);

/* ---- deleting ---- */

/* Removes bucket/key; 0 also when it did not exist (-OL_ENOBUCKET if the
 * bucket does not). */
int ol_store_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len);

/* ---- listing ---- */

/* An iterator over the keys of one bucket in byte order, starting at the
 * first key >= from (or > from when !inclusive).  It holds an LMDB read
 * snapshot: close it before the fiber sleeps for long. */
int ol_store_iter_open(struct ol_store *st, const char *bucket, const char *from,
                       size_t from_len, bool inclusive, struct ol_store_iter **out);
/* 0 and an entry, 1 at the end, or an error.  key/info stay valid until the
 * next call. */
int ol_store_iter_next(struct ol_store_iter *it, const char **key, size_t *key_len,
                       struct ol_obj_info *info);
/* Repositions the iterator (same snapshot). */
int ol_store_iter_seek(struct ol_store_iter *it, const char *from, size_t from_len,
                       bool inclusive);
void ol_store_iter_close(struct ol_store_iter *it);

/* ---- multipart uploads ---- */

struct ol_upload_info {
    char upload_id[40];       /* NUL-terminated */
    char bucket[64];
    const char *key;          /* borrowed */
    size_t key_len;
    int64_t ctime_ns;
    uint32_t meta_len;
    const uint8_t *meta;      /* borrowed */
};
struct ol_part_info {
    uint32_t part_no;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64];
};
/* Creates an upload and returns its id (NUL-terminated, < 40 bytes, URL-safe). */
int ol_store_upload_create(struct ol_store *st, const char *bucket, const char *key,
                           size_t key_len, const uint8_t *meta, uint32_t meta_len,
                           int64_t ctime_ns, char upload_id[40]);
/* Looks an upload up; fn gets the info (borrowed pointers valid during fn). */
int ol_store_upload_get(struct ol_store *st, const char *upload_id,
                        int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);
/* Lists parts with part_no > after, in order; fn returns non-zero to stop. */
int ol_store_part_list(struct ol_store *st, const char *upload_id, uint32_t after,
                       int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx);
/* Lists uploads of a bucket (ordered by key, then upload id). */
int ol_store_upload_list(struct ol_store *st, const char *bucket,
                         int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx);

struct ol_complete_part {
    uint32_t part_no;
    char etag[64]; /* without quotes */
};
/* Completes an upload: the object becomes the concatenation of the listed
 * parts, by reference (no data is copied).  Parts not listed are freed.
 * Checks: parts ascending (-OL_EPARTORDER), each exists with that etag
 * (-OL_EINVALIDPART), each but the last >= min_part_bytes (-OL_ETOOSMALL).
 * info->etag/mtime_ns/meta are the caller's; size is computed and returned in
 * info->size.  On success the upload is gone. */
int ol_store_upload_complete(struct ol_store *st, const char *upload_id,
                             const struct ol_complete_part *parts, uint32_t nparts,
                             uint64_t min_part_bytes, struct ol_obj_info *info);
/* Frees an upload and all its parts; never touches an existing object. */
int ol_store_upload_abort(struct ol_store *st, const char *upload_id);

/* ---- conditional commits ----
 *
 * Checked inside the writer's transaction, so two racing writers cannot both
 * pass: exactly one create-only PUT of a key wins.  Failure: -OL_EPRECONDITION
 * (the write's data is dropped), or -OL_ENOKEY when if_match is set and the
 * key has no current object (S3 answers that with 404 NoSuchKey). */
struct ol_store_cond {
    bool if_none_match;   /* commit only if the key has no current object */
    const char *if_match; /* commit only if the current object's etag equals this (no quotes;
                           * "*" matches any existing object) */
};
/* ol_store_write_commit_object with a precondition (cond may be NULL). */
int ol_store_write_commit_object_if(struct ol_store_writer *w, const char *bucket,
                                    const char *key, size_t key_len,
                                    const struct ol_obj_info *info,
                                    const struct ol_store_cond *cond);
/* ol_store_upload_complete with a precondition on the destination key (cond
 * may be NULL), also returning the new version's id in vid (may be NULL; ""
 * when the bucket is unversioned). */
int ol_store_upload_complete_if(struct ol_store *st, const char *upload_id,
                                const struct ol_complete_part *parts, uint32_t nparts,
                                uint64_t min_part_bytes, struct ol_obj_info *info,
                                const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);

/* ---- copies by reference ----
 *
 * A copy shares the source's extents instead of rewriting the data (extents
 * are reference-counted; space is freed when the last reference goes), so it
 * costs the same for 1 KiB and 10 GiB. */
struct ol_store_copy_opts {
    const char *src_etag;        /* copy only if the source's etag still equals this */
    bool replace_meta;           /* false: keep the source's meta blob */
    const uint8_t *meta;         /* with replace_meta */
    uint32_t meta_len;
    int64_t mtime_ns;            /* the copy's Last-Modified */
    const struct ol_store_cond *dst_cond; /* precondition on the destination, or NULL */
    /* Changes to the source's attributes, applied in the copy's transaction
     * (an attribute with val NULL is removed; see struct ol_obj_attr): a
     * CopyObject with x-amz-tagging-directive REPLACE sets or removes "tags"
     * here instead of rewriting them after the copy.  NULL/0: the copy keeps
     * the source's attributes as they are. */
    const struct ol_obj_attr *attrs;
    uint32_t nattrs;
    /* Precondition on the source's meta blob: its bytes [expect_off,
     * expect_off + expect_len) equal expect, else -EAGAIN (also when the
     * blob is shorter).  expect_len 0: none.  It pairs with
     * ol_store_patch_meta_v: a caller that copies a version with meta
     * built from what it read earlier does not undo a patch made since. */
    uint32_t expect_off, expect_len;
    const uint8_t *expect;
};
/* Copies src to dst (same or another bucket; src == dst rewrites the
 * metadata only).  On success *out gets the new object's size, etag (the
 * source's), nparts and mtime (out->meta is NULL).  The copy keeps the
 * source's object attributes (S3 copies tags by default), changed by
 * o->attrs.  Source and
 * destination are read and written in one writer transaction, so the copy is
 * atomic.  -OL_ENOKEY / -OL_ENOBUCKET / -OL_EPRECONDITION (src_etag or
 * dst_cond). */
int ol_store_copy_object(struct ol_store *st, const char *src_bucket, const char *src_key,
                         size_t src_len, const char *dst_bucket, const char *dst_key,
                         size_t dst_len, const struct ol_store_copy_opts *o,
                         struct ol_obj_info *out);
/* UploadPartCopy: makes bytes [off, off+len) of the source part part_no of
 * an upload.  Whole checksum blocks are shared by reference; partial blocks
 * at the edges are copied.  The part's etag (MD5 of the range) is returned
 * in etag (computing it reads the range once, verified; a copy of a whole
 * single-PUT source takes the source's ETag, which is that MD5, without
 * reading).  -ERANGE when the range is empty or not within the source;
 * -OL_ENOKEY / -OL_ENOBUCKET / -OL_ENOUPLOAD / -OL_EPRECONDITION. */
int ol_store_copy_part(struct ol_store *st, const char *src_bucket, const char *src_key,
                       size_t src_len, uint64_t off, uint64_t len, const char *src_etag,
                       const char *upload_id, uint32_t part_no, char etag[64]);

/* ---- bucket settings ----
 *
 * Opaque named values per bucket (versioning state, CORS, lifecycle, tags):
 * the S3 layer owns their format.  Removed with the bucket. */
/* Sets (or, with val == NULL, removes) a setting.  Names are 1..64 bytes,
 * values at most 1 MiB (-OL_ETOOLARGE).  -OL_ENOBUCKET. */
int ol_store_bucket_config_put(struct ol_store *st, const char *bucket, const char *name,
                               const void *val, size_t len);
/* Copies a setting into buf; returns its length, -OL_ENOCONFIG when unset,
 * -ENOBUFS when cap is too small, -OL_ENOBUCKET. */
ssize_t ol_store_bucket_config_get(struct ol_store *st, const char *bucket, const char *name,
                                   void *buf, size_t cap);

/* ---- object attributes ----
 *
 * Small named values kept in an object's index entry beside its metadata
 * (object tags), changed without touching its data, ETag or Last-Modified.
 * Removed with the object; replaced when the object is overwritten.  A new
 * object gets its first attributes with its commit (ol_obj_info.attrs) and a
 * copy through ol_store_copy_opts.attrs; the calls below change them later
 * (PutObjectTagging), each in a transaction of its own.  Names starting
 * with "ol." are the store's own (-EINVAL). */
/* Sets (val == NULL: removes) attribute `name` (1..128 bytes, no NUL; value
 * at most 64 KiB, all of an object's attributes at most 256 KiB).
 * -OL_ENOKEY, -OL_ENOBUCKET, -OL_ETOOLARGE.  The get copies the value into
 * buf and returns its length; -OL_ENOCONFIG when unset, -ENOBUFS when cap is
 * too small. */
int ol_store_object_attr_put(struct ol_store *st, const char *bucket, const char *key,
                             size_t key_len, const char *name, const void *val, size_t len);
ssize_t ol_store_object_attr_get(struct ol_store *st, const char *bucket, const char *key,
                                 size_t key_len, const char *name, void *buf, size_t cap);

/* ---- object versions (versions.c) ----
 *
 * A bucket's versioning state is OFF until it is first set, then ENABLED or
 * SUSPENDED (never OFF again).  The current version of a key stays where an
 * unversioned object lives (listing pays nothing); older versions and delete
 * markers live in a separate versions database.  Every write path that
 * replaces or deletes a current object (PUT, Complete, Copy, delete) follows
 * the bucket's state in its writer transaction: ENABLED keeps the replaced
 * version and gives the new one a fresh id; SUSPENDED gives it the id "null"
 * (replacing an older "null" version); a delete adds a delete marker.
 *
 * Version ids are NUL-terminated text: "null" or the 22-character form of
 * core/hlc.h (text order = creation order).  OL_STORE_VID_MAX (above) holds
 * either. */
enum ol_versioning { OL_VERSIONING_OFF, OL_VERSIONING_ENABLED, OL_VERSIONING_SUSPENDED };
/* -OL_ENOBUCKET; -EINVAL for OFF (a bucket never goes back to unversioned). */
int ol_store_versioning_put(struct ol_store *st, const char *bucket, enum ol_versioning v);
int ol_store_versioning_get(struct ol_store *st, const char *bucket, enum ol_versioning *out);

/* ol_store_write_commit_object_if that also returns the new version's id
 * (vid may be NULL; "" when the bucket is unversioned). */
int ol_store_write_commit_object_v(struct ol_store_writer *w, const char *bucket,
                                   const char *key, size_t key_len,
                                   const struct ol_obj_info *info,
                                   const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX]);

/* Opens version `vid` of a key (NULL: the current version, as
 * ol_store_read_open).  -OL_ENOVERSION (unknown or malformed id), -OL_EMARKER
 * (the id names a delete marker), -OL_ENOKEY, -OL_ENOBUCKET.  An unversioned
 * object's id is "null". */
int ol_store_read_open_v(struct ol_store *st, const char *bucket, const char *key,
                         size_t key_len, const char *vid, struct ol_store_reader **out);
/* The reader's version id: 0, or -OL_ENOCONFIG with "null" for an object
 * written while its bucket was unversioned. */
int ol_store_read_vid(const struct ol_store_reader *r, char vid[OL_STORE_VID_MAX]);
/* 1 with the marker's id when the key has no current object and its latest
 * version is a delete marker; 0 when not; or an error. */
int ol_store_latest_marker(struct ol_store *st, const char *bucket, const char *key,
                           size_t key_len, char vid[OL_STORE_VID_MAX], int64_t *mtime_ns);

struct ol_store_del_res {
    char vid[OL_STORE_VID_MAX]; /* the marker made, or the version removed ("" if none) */
    bool marker;                /* a marker was made or removed */
};
/* Deletes a key.  vid == NULL: the current version (versioned buckets: adds
 * a delete marker).  Else removes that version permanently (freeing its
 * space; the previous version becomes current when it was the latest):
 * -OL_ENOVERSION when it does not exist.  res may be NULL. */
int ol_store_delete_v(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
                      const char *vid, struct ol_store_del_res *res);

/* Every version of a bucket's keys: keys in byte order, each key's versions
 * newest first (the current object first).  Holds a read snapshot. */
struct ol_store_viter;
struct ol_version_info {
    struct ol_obj_info info; /* size 0 and no etag for a marker */
    char vid[OL_STORE_VID_MAX];
    bool is_latest;
    bool is_marker;
    /* An object kept in its index entry (inline_bytes): its info.size bytes,
     * not yet checked against inline_crc (CRC32C), valid as info is; NULL
     * for one kept in segments. */
    const uint8_t *inline_data;
    uint32_t inline_crc;
};
int ol_store_viter_open(struct ol_store *st, const char *bucket, struct ol_store_viter **out);
/* The same, positioned as ol_store_viter_seek(from) would: a scan of one key
 * pays for one descent of the index, not two. */
int ol_store_viter_open_at(struct ol_store *st, const char *bucket, const char *from,
                           size_t from_len, struct ol_store_viter **out);
/* Positions at the first version of the first key >= from. */
int ol_store_viter_seek(struct ol_store_viter *it, const char *from, size_t from_len);
/* 0 with a version (key/info valid until the next call), 1 at the end. */
int ol_store_viter_next(struct ol_store_viter *it, const char **key, size_t *key_len,
                        struct ol_version_info *vi);
void ol_store_viter_close(struct ol_store_viter *it);
/* The versions of one key, newest first (the current object first): fn is
 * called with each (its pointers valid during the call only) until it
 * returns non-zero; a negative return ends the walk with that error.  One
 * read snapshot, one lookup of the current version and one short scan of
 * the others: what an erasure-set drive's versions() needs per GET.  0 (a
 * missing bucket or key: no call), or an error. */
typedef int (*ol_store_version_fn)(void *ctx, const struct ol_version_info *vi);
int ol_store_key_versions(struct ol_store *st, const char *bucket, const char *key,
                          size_t key_len, ol_store_version_fn fn, void *ctx);
/* ol_store_object_attr_put for version vid of a key (NULL: the current
 * object), current or not: PutObjectTagging / DeleteObjectTagging with a
 * versionId.  vid_out (may be NULL) gets the version's id ("null" for an
 * object written before versioning when asked by id; "" when vid is NULL and
 * the object has no id).  -OL_ENOVERSION (unknown or malformed id),
 * -OL_EMARKER (a delete marker has no attributes), -OL_ENOKEY, -OL_ENOBUCKET,
 * -OL_ETOOLARGE, -EINVAL. */
int ol_store_object_attr_put_v(struct ol_store *st, const char *bucket, const char *key,
                               size_t key_len, const char *vid, const char *name,
                               const void *val, size_t len, char vid_out[OL_STORE_VID_MAX]);
/* Copies version vid of a source (NULL: current) as ol_store_copy_object. */
int ol_store_copy_object_v(struct ol_store *st, const char *src_bucket, const char *src_key,
                           size_t src_len, const char *src_vid, const char *dst_bucket,
                           const char *dst_key, size_t dst_len,
                           const struct ol_store_copy_opts *o, struct ol_obj_info *out,
                           char vid[OL_STORE_VID_MAX]);
/* Rewrites version vid of a key as a new version of the same key (as
 * ol_store_copy_object_v with the key as source and destination: extents
 * shared, o's meta) and then removes the versions drop[0..ndrop) (as
 * ol_store_delete_v with a vid), queued together: the removals are applied
 * only when the rewrite succeeded, never become durable before it, and
 * usually share its index commit (one flush for all).  drop_rc (may be NULL)
 * gets each removal's result (-ECANCELED when the rewrite failed).  Returns
 * the rewrite's result; new_vid gets the new version's id.  At most
 * OL_STORE_DROP_MAX removals. */
enum { OL_STORE_DROP_MAX = 16 };
int ol_store_rewrite_v(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
                       const char *vid, const struct ol_store_copy_opts *o,
                       char new_vid[OL_STORE_VID_MAX], const char *const *drop, unsigned ndrop,
                       int *drop_rc);
/* Patches version vid of a key in place: bytes [off, off + len) of its entry
 * meta blob become val, provided they hold expect now.  One index write: no
 * new version is made, and the version keeps its id, its place among the
 * key's versions, its extents, attributes and mtime (the blob's length does
 * not change, so neither does space accounting).  Then removes the versions
 * drop[0..ndrop) as ol_store_rewrite_v does (applied only when the patch
 * succeeded, usually in its index commit; drop_rc as there).  Returns the
 * patch's result: 0, -EAGAIN (the bytes differ from expect, or the blob is
 * shorter than off + len), -OL_ENOVERSION, -OL_EMARKER, -OL_ENOKEY,
 * -OL_ENOBUCKET, -EINVAL (len 0 or over OL_STORE_PATCH_MAX, too many drops).
 * A flag in a caller's own meta format can so be set with the cost of one
 * put of the same index key, where a rewrite costs a new version and the
 * removal of the old one. */
enum { OL_STORE_PATCH_MAX = 64 };
int ol_store_patch_meta_v(struct ol_store *st, const char *bucket, const char *key,
                          size_t key_len, const char *vid, uint32_t off, const void *expect,
                          const void *val, uint32_t len, const char *const *drop, unsigned ndrop,
                          int *drop_rc);

/* ---- maintenance and statistics ---- */

struct ol_store_stats {
    uint64_t segments;
    uint64_t segment_bytes;   /* bytes in segment files */
    uint64_t live_bytes;      /* bytes referenced by objects and parts */
    uint64_t objects;
    uint64_t commits;         /* write transactions */
    uint64_t commit_ops;      /* operations in them (ops/commits = batching) */
    uint64_t compacted_bytes;
    uint64_t corrupt_blocks;  /* checksum failures seen by readers */
};
void ol_store_stats(struct ol_store *st, struct ol_store_stats *out);
/* Runs one compaction pass now and waits for it (tests, admin). */
int ol_store_compact_now(struct ol_store *st);

/* ---- drive identity (identity.c) ----
 *
 * What the drive's FORMAT file says about who it belongs to: its own id and,
 * once an erasure-coded deployment has taken it, that deployment's id, the
 * drive's position in it and the deployment's geometry (docs/FORMAT.md,
 * docs/EC.md "Deployment identity").  A drive formatted by a single-drive
 * store, or by a build older than these fields, is not joined. */
struct ol_store_identity {
    uint8_t deployment_id[16]; /* the deployment's id when ec_joined, else the drive's own */
    uint8_t drive_id[16];      /* read only: never changed by ol_store_set_identity */
    bool ec_joined;            /* a member of an erasure-coded deployment */
    uint32_t ec_index;         /* position 0..ec_ndrives-1 (when ec_joined) */
    uint32_t ec_ndrives;
    uint8_t ec_k, ec_m;
    bool has_data;             /* read only: at least one bucket exists on the drive */
};
/* Fills *out from the drive's FORMAT (as read at open or last set) and looks
 * whether any bucket exists.  0 or an LMDB error. */
int ol_store_identity(struct ol_store *st, struct ol_store_identity *out);
/* Rewrites FORMAT with in's deployment_id and EC fields (drive_id and
 * has_data are ignored), durably: temporary file, fsync, rename, directory
 * fsync.  On failure the drive keeps its old identity, on disk and in memory.
 * -EINVAL when the fields are inconsistent (joined with ec_index >=
 * ec_ndrives, ec_k == 0, or ec_k + ec_m > 255).  Any thread; calls are
 * serialised. */
int ol_store_set_identity(struct ol_store *st, const struct ol_store_identity *in);

#endif
