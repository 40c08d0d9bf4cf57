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
};

struct olc_batch; /* batch.c */

struct ol_client {
    struct ol_net *net;
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

/* Decodes the object info of a reply (native/proto.h). */
int olc_info(const void *ctl, size_t len, struct ol_client_info *info);

bool olc_name_ok(const char *s, size_t max);

/* The errors after which a call is tried on the next node (a node down,
 * unreachable or fenced). */
bool olc_transport_error(int rc);

void olc_batch_stop(struct ol_client *c);

#endif
