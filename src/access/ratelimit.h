/* Per-user request-rate and bandwidth limits: token buckets.
 *
 * The bucket.  One token bucket is one atomic word: its "theoretical
 * arrival time" (GCRA, the generic cell rate algorithm), the monotonic time
 * at which the bucket would be full again.  A cost of c units at per_sec
 * units a second moves it c / per_sec seconds later (from now, when it lay
 * in the past: a full bucket holds no more than its capacity).  The
 * capacity, the burst, is one second's worth (per_sec units): the bucket
 * may run ahead of now by at most OL_RL_BURST_NS.  So a user at rest may
 * send per_sec requests (or bytes) at once, then per_sec a second.
 *
 *   ol_rl_take    admits a cost only if it fits (requests: over the rate,
 *                 the caller refuses the request, 503 SlowDown);
 *   ol_rl_charge  always admits and returns how long the caller must wait
 *                 before it moves more (bytes: the caller paces the body);
 *   ol_rl_in_debt whether a charge has run the bucket past its burst.
 *
 * Every update is a compare-and-swap on the one word, retried at most
 * OL_RL_CAS_TRIES times (each failure means another thread's update went
 * in, so the threads together always progress); no lock.  All the threads
 * of the server (the S3 loops and the native port's workers) share a user's
 * buckets: the one word per bucket is the only thing they write.
 *
 * The table.  ol_rl maps an access key to its user's two buckets (request
 * rate and bytes), with the limits of the config file (cfg.h:
 * user_requests_per_sec, user_bytes_per_sec, and the per-user "limit"
 * lines, core/cfg.h ol_cfg_limit) fixed when the user is first seen.
 * Anonymous requests share one entry (access key NULL).  The table has
 * OL_RL_MAX_USERS slots, filled lock-free and never emptied (a removed
 * user's slot stays; a re-added one finds it again); past them, users
 * share one overflow entry with the default limits.  Run-time users
 * (users/users.h) get the default limits, or their "limit" line.
 *
 * Threads: every function but create and destroy may be called from any
 * thread at once.  Nothing allocates after create; only ol_rl_pace waits.
 */
#ifndef OL_ACCESS_RATELIMIT_H
#define OL_ACCESS_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_cfg;

enum {
    OL_RL_MAX_USERS = 2048, /* slots (a power of two); above OL_USERS_MAX + OL_CFG_MAX_USERS */
    OL_RL_CAS_TRIES = 64,
    OL_RL_CHUNK_MIN = 4096, /* pacing granularity, bytes (ol_rl_chunk) */
    OL_RL_CHUNK_MAX = 256 << 10,
};

#define OL_RL_BURST_NS 1000000000LL /* a bucket holds one second's worth */

/* ---- one token bucket ---- */

struct ol_rl_bucket {
    int64_t tat_ns;   /* atomic: when the bucket is full again (monotonic ns) */
    uint64_t per_sec; /* units a second; 0: no limit (every call admits, waits 0) */
};

/* An empty-handed start: full (tat 0 lies in the past). */
void ol_rl_bucket_init(struct ol_rl_bucket *b, uint64_t per_sec);
/* Takes cost units at time now_ns if they fit in the burst: true; else
 * false and the bucket is unchanged.  A cost larger than one second's
 * worth never fits. */
bool ol_rl_take(struct ol_rl_bucket *b, uint64_t cost, int64_t now_ns);
/* Takes cost units whether or not they fit; returns the nanoseconds until
 * the bucket is back within its burst (0: it is), which a caller that
 * paces waits before it moves more. */
int64_t ol_rl_charge(struct ol_rl_bucket *b, uint64_t cost, int64_t now_ns);
/* Whether the bucket runs ahead of now_ns by more than its burst (a charge
 * made it owe time). */
bool ol_rl_in_debt(const struct ol_rl_bucket *b, int64_t now_ns);

/* ---- users ---- */

struct ol_rl;
struct ol_rl_user;

enum ol_rl_port { OL_RL_S3, OL_RL_NATIVE };

struct ol_rl_stats {
    uint64_t throttled_s3;     /* S3 requests refused with 503 SlowDown (rate) */
    uint64_t throttled_native; /* native requests refused with -EBUSY (rate or bytes in debt) */
    uint64_t paced_ns;         /* time S3 bodies waited for their user's bandwidth */
};

/* Builds the table from cfg (borrowed only during the call).  With no
 * limit anywhere (both defaults 0, no "limit" line) *out is NULL: every
 * caller treats a NULL table as "no limits" and pays nothing.  -EINVAL
 * with a message in err when a bandwidth limit is below
 * min_body_rate_bytes_per_sec (a paced response would be cut as a slow
 * reader), -ENOMEM. */
int ol_rl_create(const struct ol_cfg *cfg, struct ol_rl **out, char *err, size_t errlen);
void ol_rl_destroy(struct ol_rl *rl);

/* The entry of access_key (NUL-terminated; NULL: anonymous), created on
 * first sight.  NULL when rl is NULL or the user has no limit at all.
 * Valid until ol_rl_destroy. */
struct ol_rl_user *ol_rl_user_get(struct ol_rl *rl, const char *access_key);
/* One request by u (NULL: admitted): true when admitted.  A refusal is
 * counted under port.  On the native port a request is refused too while
 * the user's byte bucket is in debt (the native port does not pace). */
bool ol_rl_request(struct ol_rl *rl, struct ol_rl_user *u, enum ol_rl_port port);
/* Charges n bytes moved by u (NULL: nothing) and returns the nanoseconds
 * to wait before moving more (ol_rl_charge). */
int64_t ol_rl_bytes(struct ol_rl_user *u, uint64_t n);
/* How many bytes u should move between charges: about an eighth of a
 * second's worth, within OL_RL_CHUNK_MIN..OL_RL_CHUNK_MAX; SIZE_MAX when u
 * has no byte limit (or is NULL). */
size_t ol_rl_chunk(const struct ol_rl_user *u);
/* ol_rl_bytes, then waits what it says (ol_io_sleep_ms: a fiber yields its
 * loop, a plain thread sleeps) and counts the wait in the stats.  For the
 * S3 port, which paces bodies; the only call here that blocks. */
void ol_rl_pace(struct ol_rl *rl, struct ol_rl_user *u, uint64_t n);
/* Zeroes when rl is NULL. */
void ol_rl_stats(const struct ol_rl *rl, struct ol_rl_stats *out);

#endif
