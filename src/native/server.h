/* The native port: serves the client protocol (native/proto.h) of
 * libopenlake over UCX, through the one object layer (obj/obj.h), so that
 * a native GET or PUT sees and makes exactly what the S3 port does (same
 * objects, ETags, versions, content types).
 *
 * The server owns opts.lanes ol_nets (net/net.h), its lanes: each its own
 * UCX worker and net thread, listening on its own port (lane 0 on
 * opts.port, the others on free ports, ol_native_server_lanes), so that
 * one node's native traffic is not bounded by one thread's copies.  A
 * client opens one connection per lane (HELLO's lane table, native/proto.h)
 * and spreads its calls; the requests of every lane go to the one queue and
 * pool of workers, and each reply goes back on the lane its request came
 * by.  Every lane authenticates every request the same way: a per-request key (ol_net_opts.key_fn): the access key that
 * opens every request's control bytes names the user, whose secret (from
 * the lookup callback, the S3 users) gives the key the request must be
 * signed with.  A request that names no known user or fails its MAC never
 * reaches a handler.  Each op is then authorized as the S3 port authorizes
 * its request (access/access.h, ol_access_check: GET/HEAD and every item
 * of a GET_BATCH as s3:GetObject, PUT as s3:PutObject, DELETE as
 * s3:DeleteObject, LIST as s3:ListBucket with its prefix): -EACCES when
 * denied.  The client's address is not known to the check (UCX does not
 * say it): policies conditioned on aws:SourceIp never match here, so a
 * policy Allow that needs one does not apply and a Deny that needs one does
 * not either (use a Deny without conditions to shut the native port).
 *
 * The net thread only queues requests; a pool of worker threads decodes
 * them and calls the object layer (which may block on disk or on other
 * nodes' drives).  At most OL_NATIVE_SERVER_QUEUE requests wait; beyond,
 * -EAGAIN at once.
 *
 * PUT sessions (OL_COP_PUT_BEGIN...) hold an object writer across
 * requests; a session is the access key's and the connection's that began
 * it, and is aborted when unused for OL_NATIVE_PUT_IDLE_MS, when its
 * connection goes away, and when the server is destroyed.
 *
 * Threads: create and destroy from one thread; the object layer must
 * accept calls from plain threads (it does: obj/obj.h).
 */
#ifndef OL_NATIVE_SERVER_H
#define OL_NATIVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_obj;
struct ol_hlc;
struct ol_kv;
struct ol_rl;
struct ol_native_server;

enum {
    OL_NATIVE_SERVER_WORKERS = 4, /* default */
    OL_NATIVE_SERVER_QUEUE = 8192,
    /* The net thread's and the workers' polling before they sleep
     * (net/net.h, spin_us): a small GET's round trip is mostly wakeups. */
    OL_NATIVE_SERVER_SPIN_US = 50,
    OL_NATIVE_MAX_LANES = 16,
};

struct ol_native_server_opts {
    const char *host; /* listening address */
    uint16_t port;    /* 0: any free one (ol_native_server_port) */
    struct ol_obj *obj;
    /* Who may do what (access/access.h: owners, policies, ACLs), the same
     * rules as the S3 port's; NULL: every authenticated user may do
     * everything (tests of the protocol alone). */
    const struct ol_cfg *cfg;
    /* The secret of an access key: 0 with it in secret (NUL-terminated),
     * or -ENOENT.  Called on the net thread for every request: must not
     * block, and sees users added or removed at once. */
    int (*secret)(void *arg, const char *access_key, char secret[129]);
    void *secret_arg;
    /* The native addresses of the other nodes that serve the same objects
     * ("host:port", the node's lane 0, then optionally ",port" for each
     * further lane of that node, on the same host), for HELLO's node list
     * and lane table: writes up to max of them into
     * out and returns how many.  NULL: a single node. */
    unsigned (*peers)(void *arg, char (*out)[128], unsigned max);
    void *peers_arg;
    /* Whether a write may be acknowledged now (a cluster node holding its
     * lease, cluster/member.h); NULL: always. */
    bool (*may_ack_write)(void);
    struct ol_hlc *hlc; /* borrowed; NULL: none */
    /* The node's KV-cache store for the OL_COP_KV_* ops (kv/kv.h); borrowed,
     * outlives the server; NULL: those ops answer -ENOTSUP. */
    struct ol_kv *kv;
    /* Direct reads (native/direct.h): a cluster node's native address by
     * node name, for LAYOUT's answers.  NULL (one node): LAYOUT answers "not
     * direct", SHARD_GET -ENOTSUP. */
    int (*node_addr)(void *arg, const char *node, char out[128]);
    void *node_addr_arg;
    unsigned workers;   /* 0: OL_NATIVE_SERVER_WORKERS */
    unsigned lanes;     /* net threads (above); 0: 1; at most OL_NATIVE_MAX_LANES */
    /* Per-user limits (access/ratelimit.h), shared with the S3 port;
     * borrowed, outlives the server; NULL: none.  A request (all but HELLO)
     * over its user's request rate, or made while the user's bandwidth is
     * in debt, is answered -EBUSY before any work; the bytes of a request
     * and its reply are charged after it (no pacing: a worker never
     * sleeps for one user). */
    struct ol_rl *rl;
};

/* Starts listening.  -EADDRINUSE, -EIO (UCX cannot start), -ENOMEM. */
int ol_native_server_create(const struct ol_native_server_opts *opts,
                            struct ol_native_server **out);
uint16_t ol_native_server_port(const struct ol_native_server *s); /* lane 0's */
/* The lanes' ports, lane 0 first: writes up to max, returns how many. */
unsigned ol_native_server_lanes(const struct ol_native_server *s, uint16_t *ports, unsigned max);
/* Stops listening, answers what is queued with -ESHUTDOWN, aborts the
 * open PUT sessions and frees the server. */
void ol_native_server_destroy(struct ol_native_server *s);

struct ol_native_server_stats {
    uint64_t requests, gets, puts, get_bytes, put_bytes, errors, sessions_aborted;
    uint64_t layouts, shard_gets, shard_get_bytes; /* direct reads (native/direct.h) */
    unsigned lanes;
    uint64_t lane_requests[OL_NATIVE_MAX_LANES]; /* requests received by each lane */
};
void ol_native_server_stats(struct ol_native_server *s, struct ol_native_server_stats *out);

#endif
