/* The erasure set: objects striped with Reed-Solomon over k+m drives.
 *
 * An erasure set stores each object version as k+m shards (ec/stripe.h), one
 * per drive of the set, through the drive interface (ec/drive.h).  Shard i of
 * a version is on drive slot (i + r) % (k+m), r being its rotation: for a PUT
 * the key's, from ec/placement.h (deployment id, "bucket/key"); a version made
 * by ol_eset_copy keeps its source's.  Every version records its rotation in
 * its shard metadata, and reads, listings and heals take it from there, never
 * from the key.  docs/EC.md, section 5, is the design; this header is the
 * contract.
 *
 * Versions.  Every PUT and DELETE writes a new version with a fresh version id
 * from the node's hybrid logical clock (core/hlc.h), taken when the PUT
 * commits (after its last byte is written, right before the shards are
 * committed): version ids order versions, and of two concurrent PUTs of one
 * key the one that completes last wins, as S3 says.  A version is *readable*
 * when at least k drives hold a committed shard of it whose metadata agree
 * (the same vid, geometry, rotation, size, etag, and the shard index that the
 * drive's slot implies under the rotation they record).  Reads take the
 * newest readable version: a newer version that reached fewer than k drives
 * (a failed PUT, or one still in flight) never hides an older readable one,
 * and every byte of one read comes from one version.  The drives' COMPLETE
 * flag (phase 2) is not needed for a version to be read: a PUT acknowledged
 * with k+1 shards must stay readable even if the drives that would have marked
 * it complete fail right after.  COMPLETE only lets drives free older
 * versions.
 *
 * PUT.  put_begin / put_write / put_commit stream an object of any size: the
 * set buffers one stripe (k units) at a time, encodes its m parity units and
 * writes unit i to shard i's drive.  put_commit commits the shard on every
 * drive still writing; the PUT succeeds when k+1 drives committed (all k when
 * m = 0), and the shards are then marked COMPLETE, which frees the older
 * versions the new one replaces (all of them, unless its flags say
 * otherwise: "Versioned keys" below); called from a fiber, the marks run in
 * a fiber of their own after put_commit returned (docs/EC.md 5.3, step 4).  With fewer, the written shards are deleted (best effort) and
 * -OL_EQUORUM is returned: the previous version stays readable.  (As in every
 * quorum store, a failed PUT whose rollback also failed on a drive that held
 * one of exactly k shards may still become readable; S3 leaves the outcome
 * of a failed request undefined.)  A drive that fails during a PUT is dropped
 * from that PUT only.  Concurrent PUTs of one key need no lock: the newest
 * version id that reaches k drives wins.
 *
 * Metadata.  Each version carries an opaque blob of up to OL_ESET_META_MAX
 * bytes (the S3 layer's serialised metadata: content-type, x-amz-meta-*,
 * checksums, tags, a multipart manifest), given at commit
 * (ol_eset_put_commit2) and stored whole by every drive with its shard
 * (replicated, not striped), with a CRC32C and an HLC stamp in the shard
 * metadata.  A copy that fails its CRC is never returned.  ol_eset_stat_meta
 * resolves a version and returns its blob in the same drive round trip (the
 * drives' versions answer carries their newest version's blob; only when
 * that is not the readable version, or every copy that came is damaged, are
 * the holders asked once more).  ol_eset_set_meta replaces the blob of a
 * version without rewriting its data (PutObjectTagging); of two blobs the
 * newer stamp wins (on the drives and in reads).  Versions written before
 * blobs existed read with none (meta_len 0).  Heal writes the winning blob
 * with the shards it rebuilds and onto holders whose copy is stale or
 * damaged.
 *
 * Versioned keys.  A commit flag OL_SHARD_KEEP_OLDER (S3 versioning enabled)
 * makes the drives keep the older versions when the new one is marked
 * COMPLETE, and heal keep (and heal) the older readable ones; OL_SHARD_NULL
 * marks S3's "null" version (versioning suspended): its mark frees the older
 * NULL versions only.  Reads without a vid take the newest readable version
 * as always; a vid reads an older one.  ol_eset_versions lists the readable
 * versions of a key (delete markers flagged), ol_eset_delete_marker writes a
 * marker with those flags and returns its vid, ol_eset_delete_version
 * removes one version for good.  ListObjectVersions of a bucket is built by
 * the caller: ol_eset_list_markers gives every key with a readable newest
 * version (delete markers included, flagged), and ol_eset_versions each
 * key's versions; ol_eset_list (ListObjects) skips keys whose newest
 * version is a marker.  (A key all of whose readable versions are older
 * than a newer unreadable leftover still lists: the rule is the read's.)
 *
 * DELETE writes a delete marker version (no bytes) with the PUT quorum; a
 * marker that wins hides the key.  Healing removes a marker once all k+m
 * drives hold it and nothing else of the key.
 *
 * GET.  ol_eset_stat resolves the version (one metadata call per drive, no
 * data I/O); ol_eset_read reads a byte range of it.  A healthy read reads only
 * the data shards the range touches, each one contiguous span.  A data shard
 * that is missing, corrupt (-OL_ECORRUPT) or failing is rebuilt: the same
 * span is read from other shards (data first, then parity) until k are at
 * hand and only the lost data units are reconstructed.  Pass the vid that
 * ol_eset_stat returned to read one version in several calls: the reads then
 * fail rather than switch to another version.
 *
 * Healing.  ol_eset_heal_object checks every shard of the newest readable
 * version of a key (every byte read: the drives verify their checksums),
 * rebuilds the missing and corrupt shards on the drives that answer, marks
 * the version COMPLETE everywhere, removes older versions and newer versions
 * that stayed below k drives for longer than `incomplete_grace_ms`.
 * ol_eset_heal_all does so for every key of every bucket found on any drive.
 * With heal_on_read, a read that met a missing or corrupt shard (or learned
 * from the metadata that a drive lacks the version) heals the object before
 * returning; drives that did not answer at all are left alone.
 *
 * LIST.  ol_eset_list merges the drives' sorted listings and lists a key iff a
 * read would find it now (its newest readable version is not a delete marker).
 * When all drives that list a key report the same newest version, on at least
 * k of them, and fewer than k drives failed to answer, that version is the
 * read's answer without further calls (no newer version can be readable: it
 * would need k drives, and every drive that answered shows nothing newer).
 * Otherwise (a wiped, stale or offline drive, a PUT in flight, a failed one)
 * the key is resolved as ol_eset_stat does.  A key that exists is missing
 * from at most m drives' listings, so the listing needs at least max(k, m+1)
 * drives answering, else -OL_EQUORUM.  Keys whose newest version is not
 * readable now (fewer than k drives) are skipped, as a read would fail.
 *
 * Calls and threads.  Called from a fiber (core/loop.h) with `parallel` on,
 * each step of an operation (the versions calls, shard_begin, each stripe's
 * writes, the commits, the marks, the shard reads, the rollback) calls the
 * drives at once, one fiber per drive call on the current loop, and gathers:
 * a PUT or GET costs about one drive latency per step, not k+m.  A data
 * shard read slower than `read_timeout_ms` is given up (left to finish on
 * its own) and the range is rebuilt from other shards.  Outside a fiber the
 * drives are called one after another from the calling thread.  Every
 * function may be called from any number of threads at once.  The codec's
 * decode cache is shared behind a mutex (thread-per-core will give each core
 * its own codec).  Memory per call: one stripe (k+m units) per PUT, the
 * requested spans per read, k+m chunks of up to 256 KiB per heal.
 *
 * Errors: 0 or a negative errno / -OL_E*: -OL_ENOKEY (no such key, or a
 * delete marker), -OL_EQUORUM (fewer than the needed drives answered or hold
 * the data: retry later), -ENOSPC (a PUT or DELETE that lost its quorum
 * because drives are full; nothing of it stays readable, the previous
 * version is intact), -EINVAL, -ENOMEM, -EAGAIN (drives hold too many
 * incomplete versions of the key).
 */
#ifndef OL_EC_ESET_H
#define OL_EC_ESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/hlc.h"
#include "ec/drive.h"

struct ol_eset;
struct ol_eset_put;

struct ol_eset_cfg {
    unsigned k, m;                 /* ol_ec_check_geometry */
    uint32_t unit_bytes;           /* stripe unit (default 1 MiB) */
    const struct ol_drive *drives; /* k+m drives in slot order; copied */
    struct ol_hlc *hlc;            /* borrowed: must outlive the set */
    uint8_t deployment_id[16];     /* the placement key */
    bool heal_on_read;             /* default true */
    uint64_t incomplete_grace_ms;  /* default 3600000 (one hour) */
    /* Called from a fiber, issue the drive calls of one step to all drives at
     * once, one fiber each (default true); see "Calls and threads". */
    bool parallel;
    /* A data shard read not answered in this long (in a fiber, parallel on)
     * is given up: the read fetches other shards and reconstructs.  0 = wait
     * (default). */
    unsigned read_timeout_ms;
};
/* Fills the defaults; the caller sets k, m, drives, hlc, deployment_id. */
void ol_eset_cfg_default(struct ol_eset_cfg *cfg);

int ol_eset_create(const struct ol_eset_cfg *cfg, struct ol_eset **out);
void ol_eset_destroy(struct ol_eset *es);
void ol_eset_set_heal_on_read(struct ol_eset *es, bool on);
void ol_eset_set_parallel(struct ol_eset *es, bool on);
void ol_eset_set_read_timeout_ms(struct ol_eset *es, unsigned ms);
/* The set's k+m drives, in slot order (borrowed: valid while es lives);
 * returns k+m.  Callers use them for what the set does not do itself (the
 * quorum lock of ec/qlock.h). */
unsigned ol_eset_drives(const struct ol_eset *es, const struct ol_drive **out);

/* Missed writes.  A PUT, DELETE (marker), copy, set_meta or delete_version
 * that succeeds with its quorum while some drives of the set failed or were
 * not asked (offline) calls fn(ctx, tag, missed, bucket, key, klen) once,
 * after the commit and before the call returns, from the calling thread:
 * `missed` is the slots (bit j: drive slot j) that do not have the write.
 * Those drives get it only from a heal; the catch-up log (ec/catchup.h)
 * records them.  fn must be quick and must not call back into the set
 * (it may take a lock).  The strings are borrowed for the call.  Set it
 * before the set is shared between threads; NULL turns it off. */
typedef void (*ol_eset_missed_fn)(void *ctx, unsigned tag, uint32_t missed, const char *bucket,
                                  const char *key, size_t klen);
void ol_eset_set_missed_hook(struct ol_eset *es, ol_eset_missed_fn fn, void *ctx, unsigned tag);

/* What a read or a listing learns about a version. */
struct ol_eset_obj {
    struct ol_version_id vid;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64];
    unsigned shards;   /* drives holding a shard of it by their metadata (>= k) */
    uint32_t meta_len; /* its metadata blob's length (0: none) */
    /* OL_SHARD_DELETE_MARKER, OL_SHARD_KEEP_OLDER, OL_SHARD_NULL as
     * committed. */
    uint32_t flags;
};

enum {
    OL_ESET_META_MAX = OL_DRIVE_META_MAX, /* largest metadata blob of a version */
};

/* What a commit stores besides the bytes. */
struct ol_eset_commit {
    const char *etag;   /* stored as given (the S3 layer computes it); NULL: "" */
    int64_t mtime_ns;
    const void *meta;   /* the version's blob, borrowed for the call; NULL: none */
    size_t meta_len;    /* <= OL_ESET_META_MAX */
    uint32_t flags;     /* 0 or OL_SHARD_KEEP_OLDER and/or OL_SHARD_NULL */
};

/* ---- PUT ---- */

/* Begins a PUT of bucket/key (bucket: 1..63 bytes; key 1..OL_DRIVE_MAX_KEY
 * bytes).  -OL_EQUORUM when fewer than the write quorum of drives accept the
 * shard writers. */
int ol_eset_put_begin(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                      struct ol_eset_put **out);
/* Appends object bytes; encodes and writes each stripe as it fills.
 * -OL_EQUORUM once too many drives failed (the PUT is then doomed; commit or
 * abort it). */
int ol_eset_put_write(struct ol_eset_put *p, const void *buf, size_t len);
/* Receiving straight into the stripe buffer, without a copy: put_room lends
 * *len > 0 bytes of room at *ptr (valid until the next call on p), the
 * caller fills a prefix and appends it with put_advance (n <= *len), which
 * encodes and writes a full stripe.  The bytes stay readable until then. */
int ol_eset_put_room(struct ol_eset_put *p, uint8_t **ptr, size_t *len);
int ol_eset_put_advance(struct ol_eset_put *p, size_t n);
/* Says how many bytes the PUT will write in all (before the first write), so
 * that its stripe buffer is sized to the object: a 4 KiB object needs a
 * stripe of k units of 1 KiB, not of 1 MiB.  More bytes than announced still
 * work (the buffer grows to a full stripe).  The buffers are allocated when
 * the first bytes are written, not at put_begin. */
void ol_eset_put_expect(struct ol_eset_put *p, uint64_t size);
/* The most memory a PUT of `size` bytes holds at once (size < 0: unknown):
 * its stripe and parity buffers, plus on each of the k+m drives a writer
 * that buffers up to writer_buf_bytes, writer_bufs of them when the shard is
 * larger than one (the store's pipelined writes). */
uint64_t ol_eset_put_buffer_bytes(const struct ol_eset *es, int64_t size,
                                  uint64_t writer_buf_bytes, unsigned writer_bufs);
/* Hands the PUT a reservation of the body memory budget (core/buf.h)
 * (consumes it): it is released when the PUT ends, by commit or abort, after
 * every buffer it covers is freed. */
void ol_eset_put_hold(struct ol_eset_put *p, uint64_t reserved_bytes);
/* Writes the last stripe, commits (quorum), marks complete.  etag is stored
 * as given (the S3 layer computes it).  out (may be NULL) gets the version.
 * Consumes p, whatever the result. */
int ol_eset_put_commit(struct ol_eset_put *p, const char *etag, int64_t mtime_ns,
                       struct ol_eset_obj *out);
/* The same with a metadata blob and version flags (struct ol_eset_commit).
 * The version id is taken here.  -EINVAL for a blob over OL_ESET_META_MAX or
 * unknown flags.  Consumes p, whatever the result. */
int ol_eset_put_commit2(struct ol_eset_put *p, const struct ol_eset_commit *c,
                        struct ol_eset_obj *out);
/* Drops a PUT and deletes what it wrote (best effort).  Consumes p. */
void ol_eset_put_abort(struct ol_eset_put *p);
/* begin + write + commit in one call. */
int ol_eset_put(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                const void *buf, size_t len, const char *etag, struct ol_eset_obj *out);

/* ---- COPY ---- */

/* CopyObject by reference: makes a new version of bucket/key out of version
 * src_vid of src_bucket/src_key (NULL: its newest readable version) of the
 * same set, each drive sharing its own shard's bytes (drive.h, shard_copy):
 * no object byte is read or written, whatever the size.  The new version
 * has the source's size, geometry and ROTATION (not the destination key's:
 * a version's rotation is read from its metadata, so the copy reads, heals
 * and lists like any version), and cm's etag (NULL: the source's stored
 * etag), mtime, blob and flags.  As a PUT: the version id is taken right
 * before the shards are committed (of a copy and a PUT of one key, the one
 * that completes last wins), the copy succeeds when the write quorum of
 * drives (k+1; k when m = 0) committed, and is then marked COMPLETE (which
 * frees the older versions it replaces); with fewer it is rolled back.
 * Only drives holding a good shard of the source can copy: a source held by
 * fewer than the write quorum answers -OL_EQUORUM at once (stream the copy
 * then: a read reconstructs).  A drive that lacks the source shard gets the
 * copy's shard from the next heal.  out (may be NULL) gets the new version.
 * -OL_ENOKEY (no such source version, or a delete marker), -OL_EQUORUM,
 * -ENOSPC, -EOPNOTSUPP (a drive cannot copy by reference: stream), -EINVAL
 * (names, a blob over OL_ESET_META_MAX, unknown flags). */
int ol_eset_copy(struct ol_eset *es, const char *src_bucket, const char *src_key, size_t src_klen,
                 const struct ol_version_id *src_vid, const char *bucket, const char *key,
                 size_t klen, const struct ol_eset_commit *cm, struct ol_eset_obj *out);

/* ---- GET / HEAD ---- */

/* Resolves the newest readable version (vid == NULL) or the given one. */
int ol_eset_stat(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                 const struct ol_version_id *vid, struct ol_eset_obj *out);
/* Reads object bytes [off, off + len) of the newest readable version (vid ==
 * NULL) or of the given one into buf.  -EINVAL when the range exceeds the
 * version's size.  out (may be NULL) gets the version read. */
int ol_eset_read(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                 const struct ol_version_id *vid, uint64_t off, size_t len, void *buf,
                 struct ol_eset_obj *out);

/* Resolves as ol_eset_stat does and copies the version's metadata blob into
 * buf (cap bytes) in the same drive round trip; *len (may be NULL) gets its
 * length (0: none).  -ENOBUFS when cap is too small (out and *len are
 * filled).  A delete marker is -OL_ENOKEY with out filled (its vid, flags
 * with OL_SHARD_DELETE_MARKER: a GET of a marker's vid can say so);
 * -OL_EQUORUM also when no holder gives an intact copy of the blob. */
int ol_eset_stat_meta(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                      const struct ol_version_id *vid, struct ol_eset_obj *out, void *buf,
                      size_t cap, size_t *len);
/* A GET's reader: ol_eset_stat_meta that keeps what it resolved, so that
 * the reads of one GET cost no further metadata round trips (a read of a
 * pinned vid with ol_eset_read asks every drive for its versions again).
 * Arguments and answers as ol_eset_stat_meta; *rd is set only on 0.  The
 * reads are pinned to the resolved version: one that vanished (a newer
 * version completed and the drives freed it) fails rather than switches.
 * Heal-on-read applies as in ol_eset_read (once per reader). */
struct ol_eset_reader;
int ol_eset_reader_open(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *vid, struct ol_eset_obj *out, void *buf,
                        size_t cap, size_t *len, struct ol_eset_reader **rd);
/* Object bytes [off, off + len) of the reader's version into buf (as
 * ol_eset_read: degraded shards are rebuilt). */
int ol_eset_reader_read(struct ol_eset_reader *rd, uint64_t off, size_t len, void *buf);
/* Zero-copy form (store/store.h, ol_store_read_file): when the healthy data
 * shard holding byte off offers its file, returns how many bytes from off
 * (> 0, at most max, never past the end of the stripe unit holding off)
 * can be sent from *fd at *foff, checked against the drive's checksums
 * now; the file stays valid until the reader is closed.  -EAGAIN when not
 * (the drive offers no file, the shard is missing, the pages are not
 * cached, a check failed): read those bytes with ol_eset_reader_read,
 * which also reports and repairs what is wrong. */
ssize_t ol_eset_reader_file(struct ol_eset_reader *rd, uint64_t off, size_t max, int *fd,
                            uint64_t *foff);
/* The same, pointing *data at the bytes in the page cache's mapping of the
 * shard's segment (store/store.h, ol_store_read_map), valid until the
 * reader is closed; -EAGAIN as ol_eset_reader_file.  !check skips the
 * drive's CRC pass (ol_store_read_map_sealed): only for a caller that
 * authenticates every byte itself (obj/sse.c, AES-GCM tags) and rereads
 * what fails with ol_eset_reader_read, which checks, rebuilds a rotted
 * piece from parity and heals it. */
ssize_t ol_eset_reader_map(struct ol_eset_reader *rd, uint64_t off, size_t max, bool check,
                           const uint8_t **data);
void ol_eset_reader_close(struct ol_eset_reader *rd);
/* The reader's version as stored, for a client that reads the shards
 * itself (native/direct.h): its vid, geometry, rotation (shard i is on slot
 * (i + rotation) % (k+m)), its stored size, and what the resolution saw of
 * the slots: have, those holding a consistent shard of it; unasked, those
 * not asked (a read of the latest version may resolve from fewer drives).
 * A slot in neither answered without it, or failed. */
struct ol_eset_geom {
    struct ol_version_id vid;
    unsigned k, m, rotation;
    uint32_t unit_bytes;
    uint64_t size;
    uint32_t have, unasked;
};
void ol_eset_reader_geom(const struct ol_eset_reader *rd, struct ol_eset_geom *out);

/* Replaces the blob of the readable version vid (NULL: the newest) by meta
 * (len <= OL_ESET_META_MAX bytes, borrowed) on every drive holding it,
 * without rewriting data.  0 when the write quorum of them (k+1; k when
 * m = 0) took it; -OL_EQUORUM (or -ENOSPC) when fewer did: the outcome is
 * then undefined (reads may see either blob until the next set_meta or
 * heal settles it); -OL_ENOKEY (no such version, or a delete marker). */
int ol_eset_set_meta(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                     const struct ol_version_id *vid, const void *meta, size_t len);

/* ---- DELETE ---- */

/* Deletes bucket/key: 0 also when it did not exist. */
int ol_eset_delete(struct ol_eset *es, const char *bucket, const char *key, size_t klen);
/* Writes a delete marker for bucket/key, whether or not the key reads as
 * present (a versioned bucket records one anyway), with flags 0 or
 * OL_SHARD_KEEP_OLDER and/or OL_SHARD_NULL (see "Versioned keys"); out (may
 * be NULL) gets the marker's version (its vid). */
int ol_eset_delete_marker(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                          uint32_t flags, int64_t mtime_ns, struct ol_eset_obj *out);
/* Removes version vid of the key for good (data, blob, or a delete marker)
 * from every drive that answers.  0 when it is gone from enough drives
 * (n-k+1) that no read can find it again, also when it did not exist; the
 * copies left on silent drives are removed by a later heal.  Removing the
 * newest version makes the previous readable one the key's.  -OL_EQUORUM. */
int ol_eset_delete_version(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                           const struct ol_version_id *vid);
/* The readable versions of the key, newest first, up to cap (delete markers
 * included: flags has OL_SHARD_DELETE_MARKER; meta_len tells whether each
 * has a blob).  Returns the count (0: none).  Versions whose shards are on
 * drives that did not answer may be missing; -OL_EQUORUM when fewer than k
 * drives answered. */
int ol_eset_versions(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                     struct ol_eset_obj *out, unsigned cap);

/* ---- LIST ---- */

/* Calls fn for up to max keys of the bucket after (after, alen) (alen = 0:
 * from the first key), in byte order; fn returns non-zero to stop.  The key
 * and obj are valid during the call.  Returns the number of keys passed to fn. */
int ol_eset_list(struct ol_eset *es, const char *bucket, const char *after, size_t alen,
                 unsigned max,
                 int (*fn)(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *obj),
                 void *ctx);

/* As ol_eset_list, but a key whose newest readable version is a delete
 * marker is listed too (obj->flags has OL_SHARD_DELETE_MARKER): the key
 * walk of ListObjectVersions (with ol_eset_versions per key). */
int ol_eset_list_markers(struct ol_eset *es, const char *bucket, const char *after, size_t alen,
                         unsigned max,
                         int (*fn)(void *ctx, const char *key, size_t klen,
                                   const struct ol_eset_obj *obj),
                         void *ctx);

/* ---- healing ---- */

struct ol_eset_heal_stats {
    uint64_t objects;          /* keys examined */
    uint64_t shards_rebuilt;   /* shards written back (missing or corrupt) */
    uint64_t corrupt;          /* shards found corrupt among them */
    uint64_t marked_complete;  /* mark_complete calls that finished phase 2 */
    uint64_t versions_removed; /* stale shard versions deleted, markers included */
    uint64_t unrecoverable;    /* keys with a version on drives but none readable */
    uint64_t metas_repaired;   /* holders given the winning blob (stale or damaged copy) */
};
/* Heals one key; adds to *st (which the caller zeroes).  0, -OL_ENOKEY (no
 * readable version: leftovers older than the grace were removed when every
 * drive answered), -OL_EQUORUM. */
int ol_eset_heal_object(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                        struct ol_eset_heal_stats *st);
/* ol_eset_heal_object that also says which drives are caught up on the key:
 * *answered (slots) gets the drives that answered the heal's versions
 * calls, *caught those of them that hold the key's readable version now
 * (rebuilt or already there), or, when the key has nothing readable left,
 * every drive that answered.  A drive that answered but is not in *caught
 * could not be rebuilt (its writes failed, or the key has too few good
 * shards): a heal later may do better (the catch-up log's rule,
 * ec/catchup.h).  Both 0 on errors before the drives were asked. */
int ol_eset_heal_object_slots(struct ol_eset *es, const char *bucket, const char *key, size_t klen,
                              struct ol_eset_heal_stats *st, uint32_t *answered, uint32_t *caught);
/* Heals every key of every bucket any drive knows; adds to *st.  0, or the
 * first error other than -OL_ENOKEY / -OL_EQUORUM of one key (those are
 * counted and the walk goes on). */
int ol_eset_heal_all(struct ol_eset *es, struct ol_eset_heal_stats *st);
/* The same, calling progress(ctx, st) after each key (st: the running
 * totals), from the calling thread; progress may be NULL. */
int ol_eset_heal_all_cb(struct ol_eset *es, struct ol_eset_heal_stats *st,
                        void (*progress)(void *ctx, const struct ol_eset_heal_stats *st),
                        void *ctx);

struct ol_eset_stats {
    uint64_t reads;          /* ol_eset_read calls that returned bytes */
    uint64_t degraded_reads; /* ... that had to reconstruct */
    uint64_t heals_on_read;  /* objects healed by reads */
    uint64_t shards_healed_on_read;
    uint64_t puts, puts_failed;
    uint64_t list_slow_keys; /* keys a listing had to resolve with version calls */
    uint64_t list_skipped;   /* keys a listing skipped as unreadable now */
    uint64_t read_timeouts;  /* reads that gave up on a slow shard (read_timeout_ms) */
    uint64_t puts_full;      /* PUTs failed with -ENOSPC */
    uint64_t copies;         /* ol_eset_copy calls */
    uint64_t copies_failed;  /* ... that failed */
};
void ol_eset_stats(struct ol_eset *es, struct ol_eset_stats *out);

#endif
