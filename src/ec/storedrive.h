/* A drive of an erasure set over one local store (docs/EC.md, section 5.2).
 *
 * Implements `struct ol_drive_ops` (ec/drive.h) over one `struct ol_store`
 * (one directory) using only the store's public API: every bucket of an EC
 * drive has store versioning ENABLED, so each shard version of a key is one
 * store version of that key.  The store picks its own version ids; the
 * erasure set's version id and the rest of `struct ol_shard_meta` travel in
 * the store entry's meta blob (docs/FORMAT.md, "EC shard entries"), so the
 * drive maps an eset vid to a store version by scanning the key's versions
 * (a handful: older ones are freed by mark_complete).
 *
 * COMPLETE is stored in the meta blob: mark_complete copies the shard's store
 * version onto its own key by reference with the flag set (one atomic store
 * write, no data copied), then deletes the unmarked copy and every older
 * version.  Entries written before the flag was stored (no EXPLICIT bit) are
 * COMPLETE when the drive holds no older version of the key, as that format
 * defined it.  So the leftover of a cut-off first PUT of a key is not
 * COMPLETE, and the set can call it absent (docs/EC.md, 6.1).  shard_commit
 * never answers OL_DRIVE_SUPERSEDED: it always keeps the shard, which is safe
 * (an older version is freed by the newer one's mark).
 *
 * shard_copy (a copy by reference) copies the source shard's store version
 * onto the destination key with ol_store_copy_object_v and the new version's
 * entry meta (unmarked): one store write, the shard's extents shared, no byte
 * read or written.
 *
 * A bucket is created (with versioning ENABLED) on demand by shard_begin and
 * shard_copy, so a replaced, empty drive accepts shards during a heal.
 *
 * Drive states (docs/EC.md, section 5.5).  A drive is ONLINE, OFFLINE or
 * FULL (and the admin's switch, ol_storedrive_set_offline, takes it out
 * whatever its state).
 *   - Calls that fail in a way that says the drive is failing (-EIO, -EROFS,
 *     -ENOENT, -ENOTDIR, -ETIMEDOUT, -ESTALE, -OL_EFORMAT...) are counted;
 *     after `fail_after` in a row the drive goes OFFLINE.  Answers about
 *     the data (-OL_ENOKEY, -OL_ECORRUPT, -EINVAL) reset the count.
 *   - An OFFLINE drive answers every call with -EIO at once (the set skips
 *     it without waiting).  ol_storedrive_check, called periodically by one
 *     thread (the server's drive monitor), probes it after a backoff that
 *     starts at backoff_min_ms and doubles to backoff_max_ms: the same
 *     directory (FORMAT's device and inode unchanged) must take a tiny
 *     synced write; an empty directory in its place (a replaced drive) or
 *     another drive's is opened as a fresh store (formatting the empty one)
 *     and must pass the membership check below before it is used.
 *     Success: ONLINE, and ol_storedrive_take_came_back says so once, so
 *     that the caller heals the set.
 *   - ol_storedrive_check also notices an ONLINE drive whose directory was
 *     removed, replaced or turned into a file (the store's open files would
 *     hide that) and takes it OFFLINE.
 *   - -ENOSPC (or -EDQUOT) makes the drive FULL: calls that write answer
 *     -ENOSPC at once until the backoff ends, then the next write is tried;
 *     its success makes the drive ONLINE.  Reads go on.
 * The state is a handful of atomics: calls from any thread read it without
 * a lock.
 */
#ifndef OL_EC_STOREDRIVE_H
#define OL_EC_STOREDRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ec/drive.h"

struct ol_store;
struct ol_store_opts;
struct ol_storedrive;

enum ol_storedrive_state {
    OL_SD_ONLINE = 0,
    OL_SD_OFFLINE = 1,
    OL_SD_FULL = 2,
    OL_SD_ADMIN_OFFLINE = 3, /* only reported by ol_storedrive_info */
};

struct ol_storedrive_policy {
    unsigned fail_after;     /* consecutive failures that take a drive offline (3) */
    unsigned backoff_min_ms; /* first probe after this (100) */
    unsigned backoff_max_ms; /* doubling up to this (30000) */
};
void ol_storedrive_policy_default(struct ol_storedrive_policy *p);

struct ol_storedrive_info {
    int state;        /* enum ol_storedrive_state */
    int last_err;     /* the last failure (0 once back online) */
    unsigned consecutive_errors, backoff_ms;
    uint64_t retry_in_ms; /* until the next probe (offline) or write (full) */
    uint64_t failures, offline_events, online_events, reopens, probes;
};

extern const struct ol_drive_ops ol_storedrive_ops;

/* Wraps an open store (borrowed: the caller closes it after the drive). */
int ol_storedrive_create(struct ol_store *st, struct ol_storedrive **out);
void ol_storedrive_destroy(struct ol_storedrive *sd);
struct ol_drive ol_storedrive_drive(struct ol_storedrive *sd);
/* Swaps the store underneath (tests: a wiped and reopened directory).  No
 * call may be in flight. */
void ol_storedrive_set_store(struct ol_storedrive *sd, struct ol_store *st);
struct ol_store *ol_storedrive_store(const struct ol_storedrive *sd);
/* The admin's switch (any thread).  Switching back on counts as coming
 * back (ol_storedrive_take_came_back). */
void ol_storedrive_set_offline(struct ol_storedrive *sd, bool offline);
/* True when calls would be refused: the admin's switch or OFFLINE. */
bool ol_storedrive_offline(const struct ol_storedrive *sd);
void ol_storedrive_set_policy(struct ol_storedrive *sd, const struct ol_storedrive_policy *p);
/* Tells the drive its directory and how to open a store there, so that
 * ol_storedrive_check can watch it and open a replacement.  Stores the drive
 * opens itself are closed by ol_storedrive_destroy; the one given to
 * ol_storedrive_create stays the caller's. */
int ol_storedrive_set_path(struct ol_storedrive *sd, const char *dir,
                           const struct ol_store_opts *opts);
/* Watches and probes (see above); one thread at a time; may open a store
 * (blocking: LMDB open, formatting).  Returns the state after the check. */
int ol_storedrive_check(struct ol_storedrive *sd);
/* Takes the drive OFFLINE now (err: why; e.g. its store could not be opened
 * at start: created with a NULL store and a path, it is opened by a later
 * probe). */
void ol_storedrive_set_failed(struct ol_storedrive *sd, int err);
/* True once after the drive came back online (probe or admin switch). */
bool ol_storedrive_take_came_back(struct ol_storedrive *sd);
void ol_storedrive_info(const struct ol_storedrive *sd, struct ol_storedrive_info *out);
const char *ol_storedrive_state_name(int state);

/* ---- membership of the deployment (docs/EC.md, "Deployment identity") ----
 *
 * Each drive's FORMAT records the deployment it belongs to, its position and
 * the geometry (ol_store_identity).  A store may serve as drive `index` when
 * it is that drive already, or when it may join: it never joined and holds
 * nothing (a new or replaced drive), or it never joined and holds only EC
 * shard entries while the deployment's id is the legacy one (a deployment
 * created before drive identities existed, whose drives all look like
 * that). */
struct ol_storedrive_member {
    uint8_t deployment_id[16]; /* the placement key */
    uint32_t index;            /* the drive's position, 0..ndrives-1 */
    uint32_t ndrives;
    uint8_t k, m;
};
/* The placement key of deployments created before drive identities: drives
 * that hold their EC data but no identity join with it, so that their
 * objects stay where they are. */
extern const uint8_t ol_storedrive_legacy_id[16];

/* Whether st may serve as drive want->index (path: for the message only):
 * 0 it is that drive; 1 it may join (ol_storedrive_join); -OL_EFORMAT when it
 * does not belong, with a message naming the directory and what is wrong in
 * why[cap]; another negative error when its identity cannot be read. */
int ol_storedrive_admit(struct ol_store *st, const char *path,
                        const struct ol_storedrive_member *want, char *why, size_t cap);
/* Writes the membership into st's FORMAT (durably). */
int ol_storedrive_join(struct ol_store *st, const struct ol_storedrive_member *want);
/* 1 when every bucket of st has versioning ENABLED and the entries looked at
 * are EC shard entries (the shape of an EC drive), 0 when not, or an error.
 * An empty store answers 1. */
int ol_storedrive_holds_shards(struct ol_store *st);
/* Sets the membership that ol_storedrive_check applies to a store it opens
 * (a drive offline at start, a replaced directory): one that does not
 * belong is closed and the drive stays OFFLINE, logged once per reason; one
 * that may join is joined.  Also re-reads the identity of the directory
 * (FORMAT's device and inode), which a join changes. */
void ol_storedrive_set_member(struct ol_storedrive *sd, const struct ol_storedrive_member *m);

/* Creates bucket on the drive with versioning ENABLED; 0 also when it
 * exists. */
int ol_storedrive_bucket_create(struct ol_storedrive *sd, const char *bucket, int64_t ctime_ns);
/* Removes bucket and every shard version left in it (the erasure set checked
 * that no key reads as present).  0 also when it did not exist. */
int ol_storedrive_bucket_delete(struct ol_storedrive *sd, const char *bucket);

#endif
