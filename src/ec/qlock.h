/* Quorum locks over the drives of an erasure set: mutual exclusion between
 * processes (the nodes of a cluster) that share the set's drives, with no
 * coordinator (etcd may be down while data writes go on).
 *
 * A lock is a name (the object layer uses "bucket\0key") held by one
 * owner, a random 128-bit id drawn per acquisition.  ol_qlock_acquire asks
 * every drive of the set for the name at once (ec/drive.h, lock); it holds
 * the lock when MORE THAN HALF of the n drives granted it (n/2 + 1, whatever
 * k and m are: two such majorities of one set always share a drive, and a
 * drive grants a name to one owner at a time, so two owners never hold the
 * lock together).  Otherwise it unlocks on every drive it asked (a request
 * that timed out may have been granted all the same: unlock is harmless on
 * a drive that did not grant) and tries again after a random backoff that
 * grows (so contenders that split the votes do not split them again in
 * step), until its deadline: then -EBUSY (the S3 layer answers 503
 * SlowDown).  In a fiber the drive calls run in one fiber each and the
 * waits yield the loop; elsewhere (tests, plain threads) they run one after
 * another and sleep.
 *
 * Expiry.  A drive forgets a grant ttl_ms after it gave it, so a holder that
 * crashed blocks the name for ttl_ms at most.  The price is the hazard of
 * every lease without fencing: a holder that stalls (a pause, a drive call
 * stuck) for longer than its ttl between ol_qlock_valid and the end of what
 * the lock guards can overlap with the next holder.  The ttl is therefore
 * far longer than what the lock guards (a conditional commit: a metadata
 * read and the shard commits, milliseconds to a few seconds on slow drives:
 * the default ttl is 30 s), and the holder checks ol_qlock_valid right
 * before it commits.
 *
 * Restarts.  A drive keeps its grants in memory: a process that restarts
 * while another node holds a lock forgets that node's votes on its drives,
 * and if those were needed for the majority a second owner can win within
 * the first one's ttl.  (Waiting ttl_ms after a start before granting would
 * close this; not done.)
 *
 * Limits: a name is 1..OL_DRIVE_LOCK_NAME_MAX bytes; a set of at most
 * OL_EC_MAX_UNITS drives.  Threads: a lock is acquired and released by one
 * thread (one fiber); any number of locks at once.
 */
#ifndef OL_EC_QLOCK_H
#define OL_EC_QLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ec/drive.h"

enum {
    OL_QLOCK_TTL_MS = 30000,  /* default ttl of a grant */
    OL_QLOCK_WAIT_MS = 15000, /* default deadline of an acquisition */
    OL_QLOCK_BACKOFF_MIN_MS = 2,
    OL_QLOCK_BACKOFF_MAX_MS = 200,
};

struct ol_qlock_opts {
    uint32_t ttl_ms;                         /* 0: OL_QLOCK_TTL_MS */
    uint32_t wait_ms;                        /* 0: OL_QLOCK_WAIT_MS */
    uint32_t backoff_min_ms, backoff_max_ms; /* 0: the defaults */
};

struct ol_qlock;

/* Acquires name over drives[0..n-1] (borrowed until release; n >= 1).
 * opts may be NULL (defaults).  0 and *out; -EBUSY (the deadline passed:
 * held by another owner, or too few drives answered); -EOPNOTSUPP (fewer
 * than a majority of the drives have lock ops: no lock is possible, at
 * once); -EINVAL, -ENOMEM. */
int ol_qlock_acquire(const struct ol_drive *drives, unsigned n, const void *name, size_t nlen,
                     const struct ol_qlock_opts *opts, struct ol_qlock **out);
/* Whether the lock is still surely held: less than 9/10 of its ttl has
 * passed since the attempt that won began (a drive's ttl starts when it
 * got the request, later).  Call right before doing what it guards. */
bool ol_qlock_valid(const struct ol_qlock *l);
/* Drives that granted the winning attempt (tests, logs). */
unsigned ol_qlock_granted(const struct ol_qlock *l);
/* Attempts made (1: won at once). */
unsigned ol_qlock_attempts(const struct ol_qlock *l);
/* Unlocks on every drive (in parallel in a fiber) and frees l.  NULL: no-op. */
void ol_qlock_release(struct ol_qlock *l);

#endif
