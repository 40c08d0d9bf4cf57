/* The catch-up log: which drives missed which writes, so that a drive that
 * comes back is healed key by key instead of by a full scan.
 *
 * A write (PUT, DELETE, copy, set_meta, delete_version; a multipart
 * completion is a PUT) succeeds with its quorum even when some drives of
 * the set failed or were skipped (offline, a node cut off).  The erasure
 * set tells the log (ec/eset.h, ol_eset_set_missed_hook): ol_catchup_note
 * records (set, the slots that missed it, bucket, key).  One entry per
 * (set, bucket, key): a second miss of the key ORs its slots in.
 *
 * Draining.  ol_catchup_drain heals entries with ol_eset_heal_object_slots
 * and clears the slots the heal caught up; an entry with no slot left
 * goes.  Each drive of each set has a state: UP, or DOWN with a probe time
 * (a backoff from retry_min_ms doubling to retry_max_ms).  A slot missing a
 * write is taken for DOWN (it just failed) and is probed after retry_min_ms:
 * the probe is the heal of one of its entries (the heal asks every drive;
 * a down remote drive fails fast, ec/remotedrive.h), so a drive that did
 * not answer backs off without a separate ping.  ol_catchup_drive_back
 * (the drive monitor saw a local drive return, or the caller knows a
 * remote one answers) makes a drive's probe due at once.  A drive that
 * answered a heal without being caught up on the key (its write failed, the
 * key has too few good shards) leaves that entry to retry after its own
 * backoff; after OL_CATCHUP_MAX_TRIES such tries the entry is dropped
 * (counted: the scrubber is the backstop).
 *
 * Overflow.  The log holds at most max_entries keys.  A miss that would need
 * a new entry beyond that marks the (set, slots) as needing a whole-set
 * heal (counted): when such a drive answers (a list_buckets call is its
 * probe), the drain runs ol_eset_heal_all on that set, the full scan the
 * log saves in the common case.
 *
 * Not persistent.  The log lives in memory: a restart of the coordinator
 * (the node that took the writes) loses it, and its drives' misses are then
 * repaired by the scrubber or `openlake admin heal`.  A drive that was
 * opened fresh (replaced, wiped, or offline when the process started) is
 * healed whole by the drive monitor, not by this log.
 *
 * Threads.  ol_catchup_note, ol_catchup_drive_back and ol_catchup_stats may
 * be called from any thread (one mutex; note is O(1): a hash of the key).
 * ol_catchup_drain runs one at a time: a second caller gets -EBUSY at once
 * (both the catch-up fiber and the drive monitor drain); it heals with the
 * lock released, so writes are never held up by a heal.
 *
 * Memory: one entry (about 128 bytes plus the key) per key owed; a hash
 * table of max_entries heads.
 */
#ifndef OL_EC_CATCHUP_H
#define OL_EC_CATCHUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ec/drive.h"

struct ol_eset;
struct ol_catchup;

enum {
    OL_CATCHUP_DEFAULT_MAX = 65536, /* keys owed, all sets together */
    OL_CATCHUP_MAX_TRIES = 32,      /* answered-but-failed heals before an entry is dropped */
};

struct ol_catchup_cfg {
    struct ol_eset *const *sets; /* nsets sets, borrowed: outlive the log */
    unsigned nsets;
    unsigned width;                /* drives per set (k+m) */
    const struct ol_drive *drives; /* nsets * width, set order (the overflow probe); borrowed */
    unsigned max_entries;          /* 0: OL_CATCHUP_DEFAULT_MAX */
    unsigned retry_min_ms;         /* 0: 250 */
    unsigned retry_max_ms;         /* 0: 5000 */
};

int ol_catchup_create(const struct ol_catchup_cfg *cfg, struct ol_catchup **out);
/* No drain may be running. */
void ol_catchup_destroy(struct ol_catchup *c);

/* Records that the slots `missed` of set `set` lack the newest write of
 * bucket/key (the signature of ol_eset_missed_fn, ctx = the log, tag = the
 * set's index).  Never fails: without memory or room it falls back to the
 * whole-set mark (overflow). */
void ol_catchup_note(void *c, unsigned set, uint32_t missed, const char *bucket, const char *key,
                     size_t klen);
/* Drive `slot` of set `set` answers again: probe it at the next drain. */
void ol_catchup_drive_back(struct ol_catchup *c, unsigned set, unsigned slot);
/* The same for every drive of the log. */
void ol_catchup_kick(struct ol_catchup *c);

/* One pass at time now_ms (ol_now_ms): probes the due drives, runs the
 * whole-set heals of overflowed drives that answer, and heals up to
 * max_heals due entries.  Returns the number of keys it healed (an entry
 * done), or -EBUSY (another drain runs).  Blocks the caller for the heals;
 * in a fiber they run as any set call does. */
int ol_catchup_drain(struct ol_catchup *c, uint64_t now_ms, unsigned max_heals);
/* Whether anything is owed that a drain could do now (an entry or an
 * overflow mark whose drive is due or up). */
bool ol_catchup_due(struct ol_catchup *c, uint64_t now_ms);

struct ol_catchup_stats {
    uint64_t pending;     /* entries now */
    uint64_t queued;      /* notes that made a new entry */
    uint64_t merged;      /* notes folded into an existing entry */
    uint64_t healed;      /* entries done (every missed slot caught up) */
    uint64_t retries;     /* heals that left a slot behind */
    uint64_t dropped;     /* entries given up after OL_CATCHUP_MAX_TRIES */
    uint64_t overflowed;  /* notes that found no room: whole-set mark */
    uint64_t full_heals;  /* whole-set heals run for overflow marks */
    uint64_t drives_down; /* drives now taken for DOWN */
};
void ol_catchup_stats(struct ol_catchup *c, struct ol_catchup_stats *out);

/* The background fiber (arg: the log): a drain every 100 ms while there is
 * work, until the loop stops. */
void ol_catchup_fiber(void *arg);

#endif
