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
 * Live set: the member reads the nodes prefix, then watches it from the
 * revision read; on_live (if set) is called on the member's thread with the
 * sorted set of registered nodes whenever it changes, and again after every
 * re-read (a broken or compacted watch, or coming back from a fence).  While
 * fenced the member does not watch: its view would be stale anyway.
 */
#ifndef OL_CLUSTER_MEMBER_H
#define OL_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/map.h"

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
};
/* A snapshot of the counters; any thread (each field is read atomically,
 * not the set as a whole). */
void ol_member_stats(const struct ol_member *m, struct ol_member_stats *st);

#endif
