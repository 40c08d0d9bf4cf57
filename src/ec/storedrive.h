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
 * COMPLETE is not stored: a shard version is reported COMPLETE when the
 * drive holds no older version of the key.  mark_complete frees every older
 * version, which makes the marked version the oldest, so the flag follows;
 * the only difference from a stored flag is that the first version a drive
 * ever holds of a key reads as COMPLETE before its phase 2 (harmless: phase 2
 * of such a version has nothing to free).  shard_commit never answers
 * OL_DRIVE_SUPERSEDED: it always keeps the shard, which is safe (an older
 * version is freed by the newer one's mark).
 *
 * A bucket is created (with versioning ENABLED) on demand by shard_begin, so
 * a replaced, empty drive accepts shards during a heal.
 *
 * Offline: ol_storedrive_set_offline makes every call fail with -EIO (the
 * admin's "take this drive out", and the tests' unavailable drive).
 */
#ifndef OL_EC_STOREDRIVE_H
#define OL_EC_STOREDRIVE_H

#include <stdbool.h>

#include "ec/drive.h"

struct ol_store;
struct ol_storedrive;

extern const struct ol_drive_ops ol_storedrive_ops;

/* Wraps an open store (borrowed: the caller closes it after the drive). */
int ol_storedrive_create(struct ol_store *st, struct ol_storedrive **out);
void ol_storedrive_destroy(struct ol_storedrive *sd);
struct ol_drive ol_storedrive_drive(struct ol_storedrive *sd);
/* Swaps the store underneath (tests: a wiped and reopened directory).  No
 * call may be in flight. */
void ol_storedrive_set_store(struct ol_storedrive *sd, struct ol_store *st);
struct ol_store *ol_storedrive_store(const struct ol_storedrive *sd);
void ol_storedrive_set_offline(struct ol_storedrive *sd, bool offline);
bool ol_storedrive_offline(const struct ol_storedrive *sd);

/* Creates bucket on the drive with versioning ENABLED; 0 also when it
 * exists. */
int ol_storedrive_bucket_create(struct ol_storedrive *sd, const char *bucket, int64_t ctime_ns);
/* Removes bucket and every shard version left in it (the erasure set checked
 * that no key reads as present).  0 also when it did not exist. */
int ol_storedrive_bucket_delete(struct ol_storedrive *sd, const char *bucket);

#endif
