/* libopenlake's insides (include/openlake/client.h is the contract): the
 * client, its node list and the one call path every op takes. */
#ifndef OL_CLIENT_INTERNAL_H
#define OL_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "native/proto.h"
#include "net/net.h"
#include "openlake/client.h"

#define OLC_API __attribute__((visibility("default")))

enum {
    OLC_MAX_NODES = 64,
    OLC_TIMEOUT_MS = 30000,
    OLC_POOL_THREADS = 8,    /* batch workers (ops of several messages) */
    OLC_ASYNC_MAX = 1024,    /* a batch's single-message calls in flight */
    OLC_SMALL_GET = 1 << 20, /* batch GETs up to this go in GET_BATCH messages */
    OLC_MAX_LANES = OL_CLIENT_MAX_LANES,
    OLC_DEFAULT_LANES = 4, /* opts.lanes 0: as many as the node has, up to this */
    OLC_SPREAD_MIN = 8 << 20, /* GETs into buffers from this size up spread over lanes */
    /* Direct reads pay a LAYOUT round trip before the SHARD_GETs: reads of
     * up to this many bytes come back in LAYOUT's reply instead (one round
     * trip, as a GET).  Measured: bench/RESULTS.md "Direct reads". */
    OLC_INLINE_MAX = 256 << 10,
};

struct olc_batch; /* batch.c */

struct ol_client {
    /* Lanes: one ol_net (UCX worker, net thread) each; a call goes on the
     * least busy, to the node's lane of the same index (its ports from
     * HELLO's lane table; a node without one: its one address).  net is
     * lane 0's: memory registration's rkeys and the worker address of S3
     * over RDMA are its. */
    struct ol_net *net;
    struct ol_net *lanes[OLC_MAX_LANES];
    unsigned nlanes;
    _Atomic unsigned lane_busy[OLC_MAX_LANES];
    _Atomic uint64_t lane_calls[OLC_MAX_LANES];
    atomic_uint lane_next;
    uint16_t node_ports[OLC_MAX_NODES][OLC_MAX_LANES]; /* mu */
    unsigned node_nlanes[OLC_MAX_NODES];               /* mu; 0: unknown */
    char access_key[OL_NATIVE_MAX_ACCESS_KEY + 1];
    pthread_mutex_t mu; /* nodes */
    char nodes[OLC_MAX_NODES][128];
    unsigned nnodes;
    atomic_uint next; /* round robin */
    unsigned timeout_ms;
    uint8_t *waddr; /* this client's UCX worker address, once asked (mu) */
    size_t waddr_len;
    _Atomic unsigned kv_replicas; /* ol_client_kv_replicas (1 or 2) */
    struct olc_batch *batch; /* started on first submit */
    pthread_mutex_t batch_mu;
    /* Registered memory that S3-over-RDMA tokens were made for: what the
     * worker confirms to a server (client.c rma_confirm, on the net
     * thread).  A list of struct ol_client_mem under mem_mu. */
    pthread_mutex_t mem_mu;
    struct ol_client_mem *tokened;
    /* Direct reads (direct.c): off once a node did not know LAYOUT, or
     * OPENLAKE_CLIENT_DIRECT=0; and ol_client_stats's counters. */
    atomic_bool direct_off;
    /* GETs of at most this many bytes are answered by LAYOUT inline
     * (OLC_INLINE_MAX, or OPENLAKE_CLIENT_INLINE_MAX; 0: never). */
    uint64_t inline_max;
    _Atomic uint64_t st_direct, st_shard_reads, st_shard_failures, st_rebuilt, st_fallbacks,
        st_inline;
    /* CUDA IPC reads (cuda_ipc.c): the first node serves GET_CUDA and runs
     * on this host (HELLO's flags and boot id); off once it refused one. */
    bool cuda_ipc_node;
    atomic_bool cuda_ipc_off;
    _Atomic uint64_t st_cuda_ipc;
};

/* One request: args (after the access key, which call() puts first), data
 * out, reply ctl and data in.  Tries the nodes in turn from a round-robin
 * start while the transport fails (a node down); node >= 0 pins one node.
 * Returns the reply's status or the last transport error. */
struct olc_call {
    uint8_t op;
    const void *args;
    size_t args_len;
    const void *data;
    size_t data_len;
    void *rctl;
    size_t rctl_cap, rctl_len;
    void *rdata;
    size_t rdata_cap, rdata_len;
    int node; /* -1: any */
    int used_node; /* out */
};
int olc_call(struct ol_client *c, struct olc_call *k);

/* Picks the lane for a call to the node at addr (the least busy lane, from
 * a round-robin start): its ol_net in *net and that node's address on that
 * lane in out (addr itself for a node whose lanes are not known).  The lane
 * counts as busy until olc_lane_done.  Any thread, the net threads too. */
unsigned olc_lane_pick(struct ol_client *c, const char *addr, char out[128], struct ol_net **net);
void olc_lane_done(struct ol_client *c, unsigned lane);

/* A GET of up to cap bytes (cap >= OLC_SPREAD_MIN, two lanes or more) in
 * pieces on every lane at once, to one node (lanes.c): true when it
 * answered (*result: bytes read or the error; info filled on success),
 * false when the caller must read it message by message (one lane, a small
 * buffer, a transport error, the object changed between the pieces). */
bool olc_get_spread(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                    void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result);

/* A GET into GPU memory through the node on this host (GET_CUDA): true
 * when it answered (*result: bytes or the error), false when buf is not
 * device memory or the node cannot (the caller goes on as for any
 * buffer). */
bool olc_cuda_get(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                  void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result);
/* Whether buf is CUDA device memory (false without CUDA in the process). */
bool olc_is_device_memory(const void *buf);

/* Decodes the object info of a reply (native/proto.h). */
int olc_info(const void *ctl, size_t len, struct ol_client_info *info);

bool olc_name_ok(const char *s, size_t max);

/* The errors after which a call is tried on the next node (a node down,
 * unreachable or fenced). */
bool olc_transport_error(int rc);

void olc_batch_stop(struct ol_client *c);

/* An object's LAYOUT (native/proto.h), addresses resolved ("" = the node
 * that answered). */
struct olc_layout {
    struct ol_client_info info;
    bool direct;
    bool inlined;        /* the bytes came in the reply (inline_len of them) */
    uint64_t inline_len;
    uint32_t set;
    struct ol_version_id vid;
    unsigned k, m;
    uint32_t unit;
    uint64_t size;
    uint8_t state[20];   /* OL_NATIVE_SHARD_* by shard index */
    char addr[20][128];
};
/* want (may be NULL: never inline): the range [offset, offset + cap) the
 * caller reads into buf, answered inline into buf when it holds at most
 * inline_max bytes (L->inlined). */
struct olc_want {
    uint64_t offset, cap, inline_max;
    void *buf;
};
int olc_get_layout(struct ol_client *c, const char *bucket, const char *key,
                   const struct olc_want *want, struct olc_layout *L);
/* One SHARD_GET of L's version: 0 (len bytes in buf) or the error. */
int olc_shard_get(struct ol_client *c, const char *bucket, const char *key,
                  const struct olc_layout *L, unsigned shard, uint64_t off, uint64_t len,
                  void *buf);

/* Whether GETs try direct reads: a cluster, not turned off.  Any thread. */
bool olc_direct_on(struct ol_client *c);

/* A GET by direct reads (direct.c) on a cluster: true when it answered
 * (*result: the bytes read or the error, info filled on success), false
 * when the caller must GET through a node (one node, an object that is not
 * direct, a node that does not know LAYOUT, too few shards). */
bool olc_direct_get(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                    void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result);

#endif
