/* The drive interface of the erasure-set layer (docs/EC.md, section 5.1).
 *
 * An erasure set (ec/eset.h) talks to each of its k+m drives only through
 * `struct ol_drive_ops`, so that a local per-drive store, the in-memory fake
 * of the tests (ec/memdrive.h) and later a remote drive plug in the same way.
 *
 * What a drive stores.  For each (bucket, key) a drive holds zero or more
 * *shard versions*, each named by a version id (core/hlc.h) and carrying
 * one shard of the object (the bytes of unit `shard` of every stripe,
 * ec/stripe.h), its `struct ol_shard_meta` and an opaque metadata blob of
 * the version (the S3 layer's: content-type, x-amz-meta-*, tags...; up to
 * OL_DRIVE_META_MAX bytes, the same on every drive of the version:
 * replicated, not striped).  A shard version is first written and committed
 * (durable, not COMPLETE: phase 1), later marked COMPLETE (phase 2), which
 * also frees the older versions of that key on that drive that the marked
 * version's flags say it replaces (ol_shard_frees).  A drive never frees an
 * older version on phase 1, so a newer version that failed to reach a
 * quorum never destroys an older good one.
 *
 * Version ids.  The erasure set takes a version's id when it commits (so
 * that of two concurrent writes of a key the one that completes last wins):
 * a writer is begun without one, and shard_commit's sm->vid names the
 * version.  Nothing a drive keeps refers to a writer's begin.
 *
 * The blob.  The drive stores it with the shard version, with its length,
 * its CRC32C (computed by the drive) and an HLC stamp (given by the set), in
 * ol_shard_meta.  set_meta replaces it without touching the shard, atomically
 * per drive; of two blobs of one version the one with the larger (stamp,
 * crc) wins, on the drive and in the set's reads.  The drive returns the
 * blob as stored: the erasure set checks the CRC and never uses a copy that
 * fails it.
 *
 * Integrity.  The drive checksums what it stores (the store: a CRC32C per
 * 64 KiB block) and verifies every read; a read touching a bad block fails
 * with -OL_ECORRUPT and never returns bad bytes.  The erasure set treats such
 * a shard as missing for the bytes it needed.
 *
 * Errors.  Every call returns 0 (or a count) or a negative errno / -OL_E*:
 * -OL_ENOKEY when the key or the version is not there, -OL_ECORRUPT for a
 * checksum failure, anything else (-EIO, -ETIMEDOUT, -ENOMEM...) for a drive
 * that could not answer.  The erasure set treats every drive independently:
 * any call on any drive may fail, and a failure only removes that drive from
 * the operation at hand.  Calls may be slow: a drive that cannot answer in
 * time returns -ETIMEDOUT itself (the erasure set does not time them out).
 *
 * Threads.  A drive's calls may be made from any number of threads at once.
 * A shard writer (void *w from shard_begin) is used by one thread at a time.
 *
 * Limits.  Keys are 1..OL_DRIVE_MAX_KEY bytes, arbitrary (NUL included);
 * bucket names are NUL-terminated, at most 63 bytes.
 */
#ifndef OL_EC_DRIVE_H
#define OL_EC_DRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/hlc.h"

enum {
    OL_DRIVE_MAX_KEY = 1024,
    OL_DRIVE_MAX_BUCKET = 63,

    /* ol_shard_meta.flags */
    OL_SHARD_COMPLETE = 1u << 0,      /* phase 2 done on this drive */
    OL_SHARD_DELETE_MARKER = 1u << 1, /* a DELETE: no bytes, hides older versions */
    /* Versioned buckets: marking this version COMPLETE frees no older
     * version (S3 versioning enabled). */
    OL_SHARD_KEEP_OLDER = 1u << 2,
    /* S3's "null" version (versioning suspended): marking it COMPLETE frees
     * the older NULL versions only, and keeps the others. */
    OL_SHARD_NULL = 1u << 3,

    /* Largest metadata blob of a version. */
    OL_DRIVE_META_MAX = 64 * 1024,

    /* Locks (lock / unlock below): a name is 1..OL_DRIVE_LOCK_NAME_MAX
     * bytes (a bucket, a NUL and a key fit), an owner OL_DRIVE_LOCK_OWNER
     * bytes, a ttl 1..OL_DRIVE_LOCK_TTL_MAX_MS. */
    OL_DRIVE_LOCK_NAME_MAX = OL_DRIVE_MAX_BUCKET + 1 + OL_DRIVE_MAX_KEY,
    OL_DRIVE_LOCK_OWNER = 16,
    OL_DRIVE_LOCK_TTL_MAX_MS = 600000,

    /* shard_commit's positive answer: a newer version of the key is already
     * COMPLETE on this drive, so this one was dropped.  The outcome equals
     * "this PUT, then the newer one", so the erasure set counts it as durable. */
    OL_DRIVE_SUPERSEDED = 1,
};

/* Stored with every shard; identical on all drives of a version except
 * `shard` and `flags`. */
struct ol_shard_meta {
    struct ol_version_id vid;
    uint8_t k, m;     /* geometry of the version */
    uint8_t shard;    /* which unit of each stripe this drive holds, 0..k+m-1 */
    uint8_t rotation; /* placement: shard i is on drive slot (i + rotation) % (k+m) */
    uint8_t flags;    /* OL_SHARD_*; COMPLETE is set by the drive, ignored on commit */
    /* In-memory only (never stored, never sent): OL_SHARD_HINT_* from the
     * caller of shard_commit to a local drive.  0 is always correct. */
    uint8_t hint;
    uint8_t reserved[2];
    uint32_t unit_bytes; /* unit of a full stripe */
    uint64_t size;       /* object bytes; shard length follows from ol_ec_layout */
    int64_t mtime_ns;
    char etag[64]; /* NUL-terminated */
    /* The metadata blob as this drive holds it (0/0/0: none, as in versions
     * written before blobs existed).  meta_len and meta_crc are the drive's
     * (set on commit and set_meta from the bytes given; ignored on commit);
     * meta_stamp is the set's (an HLC stamp: the newer blob wins). */
    uint32_t meta_len;
    uint32_t meta_crc; /* CRC32C of the blob */
    uint64_t meta_stamp;
};

/* ol_shard_meta.hint bits. */
enum {
    /* The version id was minted for this very commit (a PUT's, not a heal
     * rewriting a version that exists): the drive holds no older copy of it
     * written by this writer's caller, so the commit need not look for one
     * to replace.  A copy that a concurrent heal wrote is still possible; the
     * mark (mark_complete) frees every other copy of the vid, as it always
     * did for copies written after a commit's own look. */
    OL_SHARD_HINT_FRESH = 1u << 0,
};

/* Whether marking `newer` COMPLETE frees `older` (an older version of the
 * same key), by newer's flags: a plain version frees every older one; a
 * KEEP_OLDER one frees none; a NULL one frees the older NULL versions only. */
static inline bool ol_shard_frees(const struct ol_shard_meta *newer,
                                  const struct ol_shard_meta *older)
{
    /* S3's "null" version replaces the older null one: a version written
     * suspended, or before versioning (neither flag). */
    if (newer->flags & OL_SHARD_NULL)
        return (older->flags & OL_SHARD_NULL) || !(older->flags & OL_SHARD_KEEP_OLDER);
    return !(newer->flags & OL_SHARD_KEEP_OLDER);
}

/* Whether blob (stamp a, crc ca) wins over (stamp b, crc cb): the larger
 * stamp, the larger CRC on a tie (so that drives agree without talking). */
static inline bool ol_shard_meta_newer(uint64_t a, uint32_t ca, uint64_t b, uint32_t cb)
{
    return a > b || (a == b && ca > cb);
}

/* versions()'s optional second answer: the blob of one version, in the
 * same call (a GET resolves the version and gets its blob in one drive
 * round trip). */
struct ol_drive_blob {
    /* In: whose blob; NULL: the drive's newest version's. */
    const struct ol_version_id *want;
    void *buf;
    size_t cap;
    /* Out: got says buf holds the blob (len bytes) of the copy described by
     * sm (sm.vid the version; sm.meta_len, meta_crc, meta_stamp the blob's).
     * A blob larger than cap is not copied: got false, len its length.  No
     * such version, or a version without a blob (meta_len 0): got false,
     * len 0. */
    bool got;
    size_t len;
    struct ol_shard_meta sm;
    /* In (optional): room for the same copy's shard bytes (NULL/0: not
     * asked).  Out: shard_got says shard_buf holds that copy's whole shard
     * (shard_len bytes), verified, as read_shard would return it.  A drive
     * gives them only when they fit and are cheap to get (a small shard kept
     * in its index): a small object's GET then needs no read round.  False
     * otherwise, whatever the reason: the set uses read_shard. */
    void *shard_buf;
    size_t shard_cap;
    bool shard_got;
    size_t shard_len;
};

/* One key of a drive's listing, with the drive's newest version of it
 * (whatever its state). */
struct ol_drive_entry {
    uint32_t key_len;
    char key[OL_DRIVE_MAX_KEY];
    struct ol_shard_meta newest;
};

struct ol_drive_ops {
    /* Begins writing a shard of bucket/key (the version id comes with the
     * commit); *w is the writer.  -EAGAIN when the drive already holds too
     * many incomplete versions of the key (retry later). */
    int (*shard_begin)(void *d, const char *bucket, const char *key, size_t klen, void **w);
    /* Appends shard bytes. */
    int (*shard_write)(void *w, const void *buf, size_t len);
    /* Makes the shard durable as version sm->vid, with its metadata and the
     * version's blob (meta, meta_len <= OL_DRIVE_META_MAX; NULL/0 for none;
     * borrowed for the call) stamped sm->meta_stamp (the byte count must
     * equal the layout's shard length).  Replaces an existing shard of the
     * same vid (heal rewrites shards so).  0, OL_DRIVE_SUPERSEDED (a newer
     * COMPLETE version that frees this one is there), or an error.  Consumes
     * w, whatever the result. */
    int (*shard_commit)(void *w, const struct ol_shard_meta *sm, const void *meta,
                        size_t meta_len);
    /* Drops a writer.  Consumes w. */
    void (*shard_abort)(void *w);
    /* Copy by reference (CopyObject): makes shard version sm->vid of
     * bucket/key out of this drive's shard of version src_vid of
     * src_bucket/src_key (the same or another key, bucket or both), sharing
     * its bytes (the store shares the shard's extents; nothing is read or
     * rewritten), with metadata sm and the blob meta (meta_len <=
     * OL_DRIVE_META_MAX, borrowed; NULL/0: none) stamped sm->meta_stamp.
     * The shard keeps what it is: sm's k, m, shard, rotation, unit_bytes and
     * size must equal the source shard's (-EINVAL otherwise), so a copied
     * version keeps the SOURCE's rotation, whatever the key's own placement
     * says (readers take a version's rotation from its metadata).  Phase 1
     * as shard_commit: durable, not COMPLETE, frees nothing; 0,
     * OL_DRIVE_SUPERSEDED, -OL_ENOKEY (no such source version here),
     * -EAGAIN (too many incomplete versions of the destination key), or an
     * error.  Optional: NULL when the drive cannot share bytes (the set then
     * answers -EOPNOTSUPP and the caller streams the copy). */
    int (*shard_copy)(void *d, const char *src_bucket, const char *src_key, size_t src_klen,
                      const struct ol_version_id *src_vid, const char *bucket, const char *key,
                      size_t klen, const struct ol_shard_meta *sm, const void *meta,
                      size_t meta_len);

    /* Marks version vid COMPLETE and frees the older versions of the key
     * that it replaces (ol_shard_frees), in one step.  0 also when vid is
     * gone because a newer version that frees it is already complete;
     * -OL_ENOKEY when neither vid nor such a newer version is there. */
    int (*mark_complete)(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid);
    /* Up to `cap` versions of the key, newest first; returns the count (0 when
     * the key is unknown).  blob (may be NULL) asks for one version's blob
     * too (see struct ol_drive_blob); the count does not depend on it. */
    int (*versions)(void *d, const char *bucket, const char *key, size_t klen,
                    struct ol_shard_meta *out, unsigned cap, struct ol_drive_blob *blob);
    /* Replaces the blob of version vid (meta, len <= OL_DRIVE_META_MAX,
     * borrowed) stamped `stamp`, keeping its shard and flags, atomically:
     * a reader sees the old blob or the new one.  Nothing changes when the
     * drive's blob of vid wins over (stamp, CRC32C of meta) (then 0 too).
     * -OL_ENOKEY when vid is not there. */
    int (*set_meta)(void *d, const char *bucket, const char *key, size_t klen,
                    const struct ol_version_id *vid, const void *meta, size_t len,
                    uint64_t stamp);
    /* Reads exactly `len` verified bytes at `off` of the shard of vid.
     * -OL_ENOKEY, -OL_ECORRUPT, -EINVAL past the shard's end. */
    int (*read_shard)(void *d, const char *bucket, const char *key, size_t klen,
                      const struct ol_version_id *vid, uint64_t off, size_t len, void *buf);
    /* Removes one version; 0 also when it was not there. */
    int (*delete_version)(void *d, const char *bucket, const char *key, size_t klen,
                          const struct ol_version_id *vid);
    /* Up to `cap` keys of the bucket strictly after (after, alen) in byte
     * order (alen = 0: from the first key), each with its newest version.
     * Returns the count; fewer than cap means the end. */
    int (*list_keys)(void *d, const char *bucket, const char *after, size_t alen,
                     struct ol_drive_entry *out, unsigned cap);
    /* Calls fn for each bucket that holds at least one key, in name order;
     * fn returns non-zero to stop.  0 or an error. */
    int (*list_buckets)(void *d, int (*fn)(void *ctx, const char *bucket), void *ctx);

    /* Optional (NULL: the drive has no files to offer; the erasure set then
     * copies with read_shard).  Zero-copy reads of a GET: open_reader opens
     * the shard of vid for the reader's life (-OL_ENOKEY when not there);
     * reader_file checks up to max bytes at off against the drive's
     * checksums and returns how many (> 0) can be sent from *fd at *foff,
     * or -EAGAIN (not cached, inline, failed a check: use read_shard, which
     * reports what is wrong); reader_map (optional within the group) is
     * reader_file's twin that points *data at the bytes in the page
     * cache's mapping instead, valid until reader_close: checked as
     * reader_file's when check, else not at all (store/store.h,
     * ol_store_read_map_sealed: for a caller that authenticates every byte
     * itself and rereads with read_shard what fails); reader_read
     * (optional within the group) is read_shard's twin on the reader's
     * shard: the bytes stay readable while the reader is open, even after
     * the version is freed on the drive (a newer version's mark), so a GET
     * that began on a version ends on it; reader_close ends it.  A reader
     * is used by one thread at a time. */
    int (*reader_open)(void *d, const char *bucket, const char *key, size_t klen,
                       const struct ol_version_id *vid, void **h);
    ssize_t (*reader_file)(void *h, uint64_t off, size_t max, int *fd, uint64_t *foff);
    ssize_t (*reader_map)(void *h, uint64_t off, size_t max, bool check, const uint8_t **data);
    int (*reader_read)(void *h, uint64_t off, size_t len, void *buf);
    void (*reader_close)(void *h);

    /* Buckets (optional, all six or none: a drive without them takes no
     * part in the deployment's bucket rules, deploy/deploy.h).  Every drive
     * of a deployment holds every bucket and its settings; the majority
     * rules and the encoding of settings are the deployment's, the drive
     * only stores.  Any call may also fail as any drive call does (-EIO,
     * -ETIMEDOUT...: "did not answer").
     *
     * bucket_create: 0, also when the bucket exists (ctime_ns is then left
     * as it was).  bucket_delete: removes the bucket with every shard
     * version still in it (the caller checked, over the sets, that no key
     * reads as present: what is left are stale shards and markers); 0 also
     * when absent.  bucket_get: 0 and *ctime_ns (may be NULL), or
     * -OL_ENOBUCKET.  bucket_list: fn for every bucket, in name order, with
     * its creation time; fn returns non-zero to stop; 0 or an error.
     * bucket_config_put: stores an opaque value (len <= 1 MiB, else
     * -OL_ETOOLARGE) under name (1..64 bytes), or removes it when val is
     * NULL; -OL_ENOBUCKET.  bucket_config_get: copies the value into buf and
     * returns its length; -OL_ENOCONFIG when unset, -ENOBUFS when cap is too
     * small, -OL_ENOBUCKET. */
    int (*bucket_create)(void *d, const char *bucket, int64_t ctime_ns);
    int (*bucket_delete)(void *d, const char *bucket);
    int (*bucket_get)(void *d, const char *bucket, int64_t *ctime_ns);
    int (*bucket_list)(void *d, int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns),
                       void *ctx);
    int (*bucket_config_put)(void *d, const char *bucket, const char *name, const void *val,
                             size_t len);
    ssize_t (*bucket_config_get)(void *d, const char *bucket, const char *name, void *buf,
                                 size_t cap);

    /* Optional (NULL: unknown).  The drive's free and total bytes (the file
     * system's, for a directory: what an unprivileged writer may still
     * use).  A deployment weighs its pools by it when it places new keys
     * (deploy/deploy.h).  0 or an error. */
    int (*space)(void *d, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Locks (optional, both or none: a drive without them never grants
     * one, ec/qlock.h).  One vote of a quorum lock over the drives of a set:
     * the drive only keeps, per name (name, nlen bytes, compared whole),
     * which owner holds it until when.  In memory, per drive: a restart
     * forgets every lock (ec/qlock.h says what that costs).
     *
     * lock: grants name to owner (OL_DRIVE_LOCK_OWNER bytes, not all zero:
     * a random id the caller draws for each attempt) for ttl_ms from now
     * (1..OL_DRIVE_LOCK_TTL_MAX_MS): 0 when the name is free, its holder's
     * ttl has run out (a crashed holder never blocks the name for longer),
     * or owner already holds it (the ttl is then renewed from now:
     * idempotent, so a retried request is harmless).  -EBUSY when another
     * owner holds it; -ENOLCK when the drive holds too many locks (what it
     * keeps is bounded; expired ones are reclaimed first); -EINVAL for
     * arguments out of range.  The ttl runs on the drive's monotonic clock.
     *
     * unlock: frees name if owner holds it; 0 also when it does not (never
     * held, expired, or taken by another owner since: that one's lock
     * stays), so it may be sent to every drive asked, granted or not.
     *
     * Any other error (-EIO, -ETIMEDOUT...) is "did not answer": a lock
     * request that timed out may still have been granted, so the caller
     * unlocks it as well. */
    int (*lock)(void *d, const void *name, size_t nlen, const uint8_t *owner, uint32_t ttl_ms);
    int (*unlock)(void *d, const void *name, size_t nlen, const uint8_t *owner);
};

/* One drive of a set: its operations and their first argument. */
struct ol_drive {
    const struct ol_drive_ops *ops;
    void *d;
};

#endif
