/* Cluster membership and self-fencing over an etcd lease.
 *
 * A member registers its node as /openlake/<cluster>/nodes/<name> (a JSON
 * value: name, S3 and UCX addresses, lease id) attached to a lease of TTL
 * seconds, renews the lease every TTL/3 from its own thread (the cluster
 * thread: every etcd call blocks), and watches the nodes prefix so that the
 * process learns which nodes are alive: a node whose lease expires loses its
 * key (etcd deletes a lease's keys when it expires), and the watch reports
 * the delete.
 *
 * Self-fencing.  A node that cannot renew its lease must stop acknowledging
 * writes before the rest of the cluster can decide that it is gone, or two
 * nodes could each believe they own the same work.  ol_member_may_ack() says
 * whether the node may acknowledge a write *now*; it reads one atomic and the
 * monotonic clock, so any thread (a loop thread on every PUT) may call it.
 *
 * The timing argument.  Let s be the local CLOCK_MONOTONIC time taken just
 * before a renewal (or the grant) is sent, and r >= s the real time at which
 * etcd's leader applies it.  etcd then keeps the lease, and so the node's
 * key, until at least r + TTL as its own monotonic clock measures it; no
 * other node can see the key deleted before then.  The member allows acks
 * until
 *        deadline = s + TTL - margin
 * and only after etcd answered the renewal (a renewal that fails or times out
 * moves nothing).  Because s <= r, deadline <= r + TTL - margin: the node
 * stops acknowledging at least `margin` before etcd can expire the lease,
 * however slow the network or etcd was (a slow answer only shortens the
 * node's own window).  The margin has to cover:
 *   - the rate difference of the two monotonic clocks over TTL (quartz
 *     drifts by ~1e-4: well under a millisecond over 6 s);
 *   - the time between a caller's ol_member_may_ack() and its ack leaving
 *     the process (the check belongs right before the reply is sent);
 *   - scheduling delays of the checking thread.
 * It cannot cover a process paused for longer than the margin between its
 * check and its send (a stopped VM, a swapped-out page): that needs fencing
 * at the storage side as well (the map's epoch carried by writes; not built).
 * Leader changes in etcd only extend leases (a new leader restarts every TTL),
 * which is the safe direction; an etcd that loses its data entirely loses
 * every key and the cluster restarts from its map anyway.
 *
 * With the defaults (TTL 6 s, renewal every 2 s, margin 1 s, per-call
 * timeout 2 s, a failed renewal retried after 250 ms), an etcd that is
 * silent for up to about TTL - margin - TTL/3 = 3 s causes no fence; past
 * that the node fences 5 s after sending the last renewal etcd answered,
 * while the rest of the cluster sees its key vanish no earlier than 6 s
 * after that renewal.
 *
 * Recovery: while fenced the member keeps renewing the old lease; if etcd
 * still has it (it came back within TTL) the member simply unfences.  If etcd
 * says the lease is gone, the member grants a new lease and registers again
 * (create-only: if another process holds the name it waits for that key to
 * go, logging it).  A fence is logged once and counted (stats.fences).
 *
 * When etcd is down (vouching).  The fence above cannot tell "etcd is down"
 * from "this node is cut off": either way the renewals fail.  With
 * opts.vouch set, a node whose lease deadline has passed may still
 * acknowledge writes while a MAJORITY of the map's nodes, itself included,
 * say, freshly, that they are without etcd too (cluster/vouch.h has the
 * counting rule and the wire form).  Concretely: once etcd has not answered
 * this node for quiet = TTL/3 + margin/2 (one renewal period and then some:
 * a healthy node never gets there), a second thread of the member, the vouch
 * thread, asks the map's other nodes every OL_VOUCH_ROUND_MS (opts.vouch,
 * over UCX: the member knows nothing of the network) how long etcd has been
 * silent for them; a peer silent for quiet or longer vouches, and its vouch
 * counts for vouch_period_ms from the moment the question was sent.  Acks
 * are then allowed while CLOCK_MONOTONIC < vouch deadline, the last instant
 * at which 1 + the counting vouches > nmap / 2.  A peer that hears from etcd
 * does not vouch, and its earlier vouches stop counting at once; etcd that
 * answers this node again ends vouching (the lease deadline takes over).
 * ol_member_may_ack() is "lease deadline not passed, or vouch deadline not
 * passed"; ol_member_ack_state() says which ("etcd_down_vouched").
 *
 * What the lease protects, and why vouched acks are safe.  Nothing in
 * OpenLake moves ownership when a lease expires: the map thread
 * (deploy/cluster.c) marks the node down in the map, which only informs
 * (the admin's view); every set keeps its drives, every node keeps
 * coordinating writes.  Data safety rests elsewhere: a write is acknowledged
 * only once k+1 of its set's k+m drives committed it, and the version that
 * wins is the one with the highest HLC stamp (core/hlc.h), so two nodes
 * writing the same key at once never lose an acknowledged write nor tear an
 * object, whether or not either holds a lease.  What the fence adds is
 * hygiene: a node that is cut off from the cluster (its link down, a
 * partition) stops answering clients "done" for work it cannot reach its
 * peers about, and a lease that etcd will expire is not outlived by acks.
 * Vouching keeps exactly that: a cut-off node cannot reach a majority of
 * peers, so it gets no vouches and fences as before (TTL - margin after its
 * last renewal); a node that alone lost etcd while its peers still reach it
 * gets no vouches either (they are not quiet) and fences as before.  Only
 * when a majority shares the outage, i.e. etcd is down (or partitioned away)
 * for the cluster, do writes go on; map changes (pools, node states) wait
 * for etcd, since they are etcd transactions.
 *
 * What remains.  (1) A minority that still reaches etcd keeps acknowledging
 * on its leases while a majority acknowledges on vouches: both sides go on,
 * which is safe for the data because each side's writes still need k+1
 * drives of the set (with m < k + 2, two sides cannot both have k+1 of the
 * same k+m drives, so at most one side writes a given set; with more parity
 * both may, and HLC order decides between their versions as it does between
 * any concurrent writers).  (2) Vouched acks are not bounded by etcd's
 * expiry of this node's lease: when etcd comes back, the peers stop
 * vouching once they have renewed (their next retry: up to one etcd call
 * timeout, TTL/3, later) and this node's vouches lapse vouch_period_ms after
 * that, i.e. within TTL/3 + period (3.5 s with the defaults), inside the TTL
 * that a restarted etcd grants every lease afresh; an etcd that comes back
 * but stays unreachable for the peers too has nothing to hand a lease to
 * anyway (no lease expiry moves anything, above).  (3) A round asks the
 * peers one by one, so with many silent peers a round may take longer than
 * the period (see deploy/cluster.c's per-question timeout): vouches then
 * lapse and the node fences, the safe direction.
 *
 * Live set: the member reads the nodes prefix, then watches it from the
 * revision read; on_live (if set) is called on the member's thread with the
 * sorted set of registered nodes whenever it changes, and again after every
 * re-read (a broken or compacted watch, or coming back from a fence).  While
 * its lease is not live the member does not watch: its view would be stale
 * anyway (and etcd calls would hold up the renewals).
 */
#ifndef OL_CLUSTER_MEMBER_H
#define OL_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/map.h"
#include "cluster/vouch.h"

#define OL_MEMBER_PREFIX_FMT "/openlake/%s/nodes/"

struct ol_member_peer {
    char name[OL_MAP_MAX_NAME + 1];
    char s3_addr[OL_MAP_MAX_ADDR + 1];
    char ucx_addr[OL_MAP_MAX_ADDR + 1];
    int64_t lease;
};

/* Called on the member's thread; peers is borrowed for the call. */
typedef void (*ol_member_live_fn)(void *arg, const struct ol_member_peer *peers, size_t n);

struct ol_member_opts {
    const char *endpoints; /* etcd, as ol_etcd_create takes them */
    const char *cluster;   /* cluster name (a map name) */
    const char *name;      /* this node's name */
    const char *s3_addr;   /* may be NULL */
    const char *ucx_addr;  /* may be NULL */
    unsigned ttl_s;        /* lease TTL, >= 2 (etcd's minimum); 0: 6 */
    unsigned margin_ms;    /* see above, <= ttl/3; 0: max(500 ms, ttl/6) */
    bool bind_process;     /* this member answers ol_member_may_ack_writes() */
    ol_member_live_fn on_live;
    void *arg;
    /* Vouching (above): NULL, no vouching (the lease alone decides).  Called
     * on the member's vouch thread only while etcd has been silent for
     * quiet, after the first registration. */
    ol_vouch_fn vouch;
    void *vouch_arg;
    unsigned vouch_period_ms; /* 0: OL_VOUCH_PERIOD_MS */
    unsigned vouch_round_ms;  /* 0: OL_VOUCH_ROUND_MS */
};

struct ol_member;

/* Starts the member's thread, which registers the node (asynchronously: use
 * ol_member_wait to wait for it) and then keeps it registered.  -EINVAL for
 * bad options, -ENOMEM, or pthread_create's error. */
int ol_member_start(struct ol_member **out, const struct ol_member_opts *opts);

/* Stops the thread and frees the member; waits for an etcd call in flight
 * (at most TTL/3 per endpoint tried).  leave = true revokes the lease
 * (the key goes at once: a clean shutdown); false leaves it to expire, as a
 * crash would.  Either way the member may no longer ack, and a bound
 * process's ol_member_may_ack_writes() turns false for good. */
void ol_member_stop(struct ol_member *m, bool leave);

/* Whether this node may acknowledge writes now (see the timing argument).
 * Any thread; one atomic load and one clock read. */
bool ol_member_may_ack(const struct ol_member *m);

/* The bound member's answer (opts.bind_process); true when no member was
 * ever bound in this process (single-node mode has no lease to lose).  Any
 * thread. */
bool ol_member_may_ack_writes(void);

/* Why a node may or may not acknowledge writes now. */
enum ol_member_ack {
    OL_MEMBER_ACK_LEASE,   /* its lease is live ("lease") */
    OL_MEMBER_ACK_VOUCHED, /* on a majority's vouches ("etcd_down_vouched") */
    OL_MEMBER_FENCED,      /* neither ("fenced") */
};
const char *ol_member_ack_name(enum ol_member_ack a);
enum ol_member_ack ol_member_ack_state(const struct ol_member *m);
/* The bound member's state; OL_MEMBER_ACK_LEASE when none was ever bound
 * (as ol_member_may_ack_writes).  Any thread. */
enum ol_member_ack ol_member_ack_state_process(void);

/* The bound member's answer to a peer's question (cluster/vouch.h): fills
 * v->lease_live and v->since_etcd_ms (name and asked_ns are the caller's).
 * 0, or -ENOENT when no member is bound or it was stopped (a node shutting
 * down vouches for no one).  Any thread, never blocks: a few atomic loads
 * (the drive server answers on its net thread). */
int ol_member_vouch_answer(struct ol_vouch *v);

/* Waits up to timeout_ms for ol_member_may_ack(m).  0 or -ETIMEDOUT. */
int ol_member_wait(const struct ol_member *m, unsigned timeout_ms);

struct ol_member_stats {
    uint64_t registrations;  /* leases granted and keys created */
    uint64_t renewals;       /* renewals etcd answered */
    uint64_t renew_failures; /* renewals that failed or timed out */
    uint64_t fences;         /* times the node went from may-ack to fenced */
    uint64_t live_changes;   /* on_live calls */
    int64_t lease;           /* current lease id, 0 while unregistered */
    int64_t deadline_ns;     /* CLOCK_MONOTONIC time acks end, 0: not allowed */
    bool fenced;             /* as the member thread last saw it */
    /* vouching */
    uint64_t vouch_rounds;     /* rounds of questions asked */
    uint64_t vouched_spells;   /* times acks went on past the lease on vouches */
    int64_t vouch_deadline_ns; /* acks on vouches end then; 0: none */
    uint32_t since_etcd_ms;    /* since etcd last answered; OL_VOUCH_NEVER */
    uint32_t vouchers;         /* peers whose vouch counts now */
    enum ol_member_ack ack;
};
/* A snapshot of the counters; any thread (each field is read atomically,
 * not the set as a whole). */
void ol_member_stats(const struct ol_member *m, struct ol_member_stats *st);

#endif
