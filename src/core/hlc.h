/* Hybrid logical clock and version ids.
 *
 * A stamp is 64 bits: the top 48 are wall-clock milliseconds since the Unix
 * epoch (enough until the year 10889), the low 16 a logical counter.  Stamps
 * from one clock strictly increase, whatever the wall clock does: a stamp is
 * max(last + 1, wall_ms << 16), so while the wall clock stands still or goes
 * backwards the counter counts, and a counter overflow carries into the
 * millisecond part (the clock then runs at most 1 ms ahead of wall time per
 * 65536 stamps issued in one millisecond).  Receiving a stamp from another
 * node (ol_hlc_update) moves the clock past it, so causally later events get
 * larger stamps across nodes (Kulkarni et al., "Logical Physical Clocks",
 * 2014).  A remote stamp more than max_ahead_ms ahead of this node's wall
 * clock is refused (-ERANGE), so one node with a wild clock cannot drag the
 * whole cluster into the future.
 *
 * Threads: ol_hlc_now and ol_hlc_update may be called from any number of
 * threads at once; the state is one 64-bit atomic updated by a CAS loop, no
 * lock.  ol_hlc_init is not thread-safe.
 *
 * A version id is 16 bytes: the stamp (big-endian), the node id (big-endian,
 * 32 bits) and a 32-bit boot nonce (chosen at random when the process starts,
 * so that a node restarted with its clock set back cannot reissue an id of its
 * previous life).  Byte order (memcmp) is (stamp, node, nonce) order.  Its
 * text form is 22 characters of a 64-letter alphabet that is URL-safe and in
 * ASCII order ("-0-9A-Z_a-z"), 6 bits per character, most significant first,
 * the last 4 bits zero: text order (strcmp) equals byte order.  S3's "null"
 * version id cannot collide (4 characters).
 */
#ifndef OL_CORE_HLC_H
#define OL_CORE_HLC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum {
    OL_HLC_LOGICAL_BITS = 16,
    OL_VERSION_ID_BYTES = 16,
    OL_VERSION_ID_TEXT = 22,   /* characters, without the NUL */
};
#define OL_HLC_MAX_AHEAD_MS_DEFAULT 300000ull /* 5 minutes */

/* Returns wall-clock milliseconds since the epoch (tests inject their own). */
typedef int64_t (*ol_hlc_clock_fn)(void *ctx);

struct ol_hlc {
    _Atomic uint64_t last;     /* the last stamp issued or received */
    uint32_t node_id;
    uint32_t nonce;
    uint64_t max_ahead_ms;     /* remote stamps further ahead are refused */
    ol_hlc_clock_fn clock;
    void *clock_ctx;
};

/* Sets up a clock.  clock == NULL uses the system's real-time clock.  A wall
 * time before the epoch counts as 0. */
void ol_hlc_init(struct ol_hlc *c, uint32_t node_id, uint32_t nonce, ol_hlc_clock_fn clock,
                 void *clock_ctx);

/* A new stamp, larger than every stamp this clock issued or received. */
uint64_t ol_hlc_now(struct ol_hlc *c);

/* Takes in a stamp received from another node; on success *out (may be NULL)
 * is a new stamp larger than both it and every earlier one.  -ERANGE (clock
 * unchanged) when the remote stamp is more than max_ahead_ms ahead of the
 * local wall clock. */
int ol_hlc_update(struct ol_hlc *c, uint64_t remote, uint64_t *out);

static inline uint64_t ol_hlc_stamp_ms(uint64_t stamp)
{
    return stamp >> OL_HLC_LOGICAL_BITS;
}
static inline unsigned ol_hlc_stamp_logical(uint64_t stamp)
{
    return (unsigned)(stamp & ((1u << OL_HLC_LOGICAL_BITS) - 1));
}

struct ol_version_id {
    uint8_t b[OL_VERSION_ID_BYTES];
};

void ol_version_id_make(struct ol_version_id *v, uint64_t stamp, uint32_t node_id,
                        uint32_t nonce);
/* A fresh version id: ol_hlc_now() plus this clock's node id and nonce. */
void ol_hlc_version_id(struct ol_hlc *c, struct ol_version_id *v);
uint64_t ol_version_id_stamp(const struct ol_version_id *v);
uint32_t ol_version_id_node(const struct ol_version_id *v);
/* <0, 0, >0 like memcmp: newer versions compare greater. */
int ol_version_id_cmp(const struct ol_version_id *a, const struct ol_version_id *b);

/* Writes the 22-character text form and a NUL. */
void ol_version_id_format(const struct ol_version_id *v, char out[OL_VERSION_ID_TEXT + 1]);
/* Parses exactly the text that ol_version_id_format writes (22 characters,
 * canonical: the last character's low 4 bits zero).  0 or -EINVAL. */
int ol_version_id_parse(struct ol_version_id *v, const char *s, size_t len);

#endif
