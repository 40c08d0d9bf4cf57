/* An in-memory drive (ec/drive.h) with fault injection, for tests.
 *
 * It keeps every shard version and its metadata blob in memory and behaves
 * as the drive contract says: phase-1 commits never free older versions,
 * mark_complete frees those the marked version replaces (ol_shard_frees), a
 * commit of a version that a newer COMPLETE one replaces answers
 * OL_DRIVE_SUPERSEDED, a key keeps at most OL_MEMDRIVE_MAX_VERSIONS versions
 * (commits answer -EAGAIN beyond), and at most OL_MEMDRIVE_MAX_INCOMPLETE incomplete
 * versions of one key are kept (shard_begin answers -EAGAIN beyond).  Like the
 * real store it computes a CRC32C per 64 KiB block of each shard at commit and
 * verifies the blocks a read touches, so flipped bytes read as -OL_ECORRUPT.
 * shard_copy duplicates the shard's bytes and block CRCs in memory (a
 * corrupt source block stays corrupt in the copy, as with the store's shared
 * extents) and counts it in stats.copies, not in reads or commits.
 *
 * Faults (any thread, any time):
 *   offline      every call fails with -EIO (writers already open fail too)
 *   fail_nth     the Nth mutating call from now (shard_begin, shard_write,
 *                shard_commit, mark_complete, delete_version) fails with -EIO,
 *                once
 *   corrupt      flips one stored byte of a shard (the CRC then catches it)
 *   corrupt_meta flips one byte of a version's blob (the set's CRC check
 *                catches it)
 *   wipe         loses everything, as a replaced empty drive (its locks too,
 *                as a restarted one)
 *   latency      sleeps this long in every call (in a fiber: on the loop, in
 *                whole milliseconds, so other fibers run meanwhile)
 *
 * Threads: every function may be called from any thread; one mutex per drive.
 * Memory: what is stored, plus one growing buffer per open writer.
 */
#ifndef OL_EC_MEMDRIVE_H
#define OL_EC_MEMDRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ec/drive.h"

enum {
    OL_MEMDRIVE_BLOCK_BYTES = 64 * 1024,
    OL_MEMDRIVE_MAX_INCOMPLETE = 6,
    OL_MEMDRIVE_MAX_VERSIONS = 256,
};

struct ol_memdrive;

extern const struct ol_drive_ops ol_memdrive_ops;

int ol_memdrive_create(struct ol_memdrive **out);
void ol_memdrive_destroy(struct ol_memdrive *md);
/* The drive as the erasure set takes it ({&ol_memdrive_ops, md}). */
struct ol_drive ol_memdrive_drive(struct ol_memdrive *md);

void ol_memdrive_set_offline(struct ol_memdrive *md, bool offline);
/* n >= 1: the nth mutating call from now fails; 0 cancels. */
void ol_memdrive_fail_nth(struct ol_memdrive *md, uint64_t n);
void ol_memdrive_set_latency_us(struct ol_memdrive *md, unsigned us);
/* What the space op answers (0/0 until set). */
void ol_memdrive_set_space(struct ol_memdrive *md, uint64_t free_bytes, uint64_t total_bytes);
void ol_memdrive_wipe(struct ol_memdrive *md);
/* Flips byte `off` of the shard of vid (NULL: the newest version) of
 * bucket/key.  0, -OL_ENOKEY, -EINVAL (off past the shard's end). */
int ol_memdrive_corrupt(struct ol_memdrive *md, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *vid, uint64_t off);

/* Flips one byte of the blob of vid (NULL: the newest version).  0,
 * -OL_ENOKEY, -EINVAL (the version has no blob). */
int ol_memdrive_corrupt_meta(struct ol_memdrive *md, const char *bucket, const char *key,
                             size_t klen, const struct ol_version_id *vid);

struct ol_memdrive_stats {
    uint64_t reads;      /* read_shard calls */
    uint64_t read_bytes; /* bytes they asked for */
    uint64_t commits;    /* shard_commit calls that stored a shard */
    uint64_t copies;     /* shard_copy calls that stored a shard */
    uint64_t versions;   /* versions calls */
    uint64_t failed;     /* calls that failed because of an injected fault */
};
void ol_memdrive_stats(struct ol_memdrive *md, struct ol_memdrive_stats *out);
void ol_memdrive_stats_reset(struct ol_memdrive *md);
/* Keys stored (all buckets) and shard versions stored. */
void ol_memdrive_count(struct ol_memdrive *md, uint64_t *keys, uint64_t *versions);

#endif
