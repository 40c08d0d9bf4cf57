/* The drive interface of the erasure-set layer (docs/EC.md, section 5.1).
 *
 * An erasure set (ec/eset.h) talks to each of its k+m drives only through
 * `struct ol_drive_ops`, so that a local per-drive store, the in-memory fake
 * of the tests (ec/memdrive.h) and later a remote drive plug in the same way.
 *
 * What a drive stores.  For each (bucket, key) a drive holds zero or more
 * *shard versions*, each named by a version id (core/hlc.h) and carrying
 * one shard of the object (the bytes of unit `shard` of every stripe,
 * ec/stripe.h) and its `struct ol_shard_meta`.  A shard version is first
 * written and committed (durable, not COMPLETE: phase 1), later marked
 * COMPLETE (phase 2), which also frees every older version of that key on
 * that drive.  A drive never frees an older version on phase 1, so a newer
 * version that failed to reach a quorum never destroys an older good one.
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

#include <stddef.h>
#include <stdint.h>

#include "core/hlc.h"

enum {
    OL_DRIVE_MAX_KEY = 1024,
    OL_DRIVE_MAX_BUCKET = 63,

    /* ol_shard_meta.flags */
    OL_SHARD_COMPLETE = 1u << 0,      /* phase 2 done on this drive */
    OL_SHARD_DELETE_MARKER = 1u << 1, /* a DELETE: no bytes, hides older versions */

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
    uint8_t reserved[3];
    uint32_t unit_bytes; /* unit of a full stripe */
    uint64_t size;       /* object bytes; shard length follows from ol_ec_layout */
    int64_t mtime_ns;
    char etag[64]; /* NUL-terminated */
};

/* One key of a drive's listing, with the drive's newest version of it
 * (whatever its state). */
struct ol_drive_entry {
    uint32_t key_len;
    char key[OL_DRIVE_MAX_KEY];
    struct ol_shard_meta newest;
};

struct ol_drive_ops {
    /* Begins writing a shard of version `vid` of bucket/key; *w is the
     * writer.  -EAGAIN when the drive already holds too many incomplete
     * versions of the key (retry later). */
    int (*shard_begin)(void *d, const char *bucket, const char *key, size_t klen,
                       const struct ol_version_id *vid, void **w);
    /* Appends shard bytes. */
    int (*shard_write)(void *w, const void *buf, size_t len);
    /* Makes the shard durable with its metadata (sm->vid must equal the vid
     * of shard_begin; the byte count must equal the layout's shard length).
     * Replaces an existing shard of the same vid (heal rewrites shards so).
     * 0, OL_DRIVE_SUPERSEDED, or an error.  Consumes w, whatever the result. */
    int (*shard_commit)(void *w, const struct ol_shard_meta *sm);
    /* Drops a writer.  Consumes w. */
    void (*shard_abort)(void *w);

    /* Marks version vid COMPLETE and frees every older version of the key, in
     * one step.  0 also when vid is gone because a newer version is already
     * complete; -OL_ENOKEY when neither vid nor a newer complete version is
     * there. */
    int (*mark_complete)(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid);
    /* Up to `cap` versions of the key, newest first; returns the count (0 when
     * the key is unknown). */
    int (*versions)(void *d, const char *bucket, const char *key, size_t klen,
                    struct ol_shard_meta *out, unsigned cap);
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
};

/* One drive of a set: its operations and their first argument. */
struct ol_drive {
    const struct ol_drive_ops *ops;
    void *d;
};

#endif
