/* The UCX transport of the native protocol: one net thread per ol_net.
 *
 * An ol_net owns a ucp_context and a ucp_worker, and one thread (the net
 * thread) that alone touches them: it progresses the worker, sends and
 * receives active messages (net/wire.h), accepts connections and times
 * calls out.  Everything else talks to it through a queue and a wakeup
 * (an eventfd next to the worker's own event fd), so any thread or fiber
 * may call in at any time, and the net thread never runs a handler that
 * could block: requests are handed to the serving side's own workers.
 *
 * Client side.  ol_net_call() sends one request to "host:port" and waits for
 * its reply (a fiber parks, a plain thread blocks; core/loop.h's
 * ol_completion).  Calls are concurrent: any number may be outstanding per
 * peer (up to OL_NET_MAX_INFLIGHT per ol_net), matched to their replies by a
 * request id.  The endpoint to a peer is made on first use and made again
 * on the next call after it failed.  Every call has a deadline: a peer that
 * does not answer in time gives -ETIMEDOUT, a peer that goes away
 * -ECONNRESET (or -ECONNREFUSED / -EHOSTUNREACH when it cannot be reached);
 * a reply that comes after its call timed out is dropped.  When a call
 * times out while UCX still moves its bytes (a send or a rendezvous
 * receive into the caller's buffers), the endpoint is reset so that UCX
 * lets go of those buffers before the call returns: the other calls in
 * flight on it fail with -ECONNRESET.
 *
 * Serving side.  ol_net_listen() accepts connections on a TCP address; each
 * request is received whole (control and data, rendezvous for large data)
 * and handed to the serve callback, which must not block (it queues the
 * request to a worker).  Whoever holds a request answers it exactly once with
 * ol_net_reply(), from any thread.  When a connection goes away, the gone
 * callback says which (its conn id, as ol_net_req_conn() gives), after the
 * requests received on it: replies to them are dropped.
 *
 * UCX picks the transports (UCX_TLS and the other UCX_* variables of the
 * environment): shared memory and cma between processes of one host, tcp
 * across hosts, verbs rc/dc where there is RDMA.  Connections are set up
 * through UCX's TCP connection manager (the listener's sockaddr).
 *
 * Integrity: data travels with its CRC32C (net/wire.h).  ol_net_call checks
 * a reply's data and answers -EIO when it differs; a server checks a
 * request's with ol_net_req_check.
 *
 * Clock.  With opts.hlc, every request and reply sent carries a fresh stamp
 * of that clock (ol_hlc_now), and the stamp of every request and reply
 * received is taken in (ol_hlc_update) on the net thread before the request
 * reaches the serve callback or the call's caller wakes: whatever a call's
 * caller does after it returns is stamped after everything the peer had seen
 * when it answered.  A stamp more than the clock's max_ahead_ms ahead of the
 * local wall clock is not adopted (the clock does not move; the message is
 * handled as any other): ol_net_stats counts it in hlc_refused, and a
 * rate-limited warning says by how much it was ahead.  A stamp of 0 is
 * ignored.  Without opts.hlc, messages carry the wall clock in the HLC's
 * form (ms << 16), which a receiver with a clock may take in.
 *
 * Authentication (net/auth.h).  Every request and reply is signed with
 * opts.key.  A request that fails its check (MAC or freshness) is answered
 * -EACCES and never reaches the serve callback; a reply that fails it makes
 * the call return -EACCES (its bytes are no answer).  Both are checked
 * before their clock stamp is taken in, counted in auth_failures and
 * warned about (rate-limited).
 *
 * Errors: 0 / a count, or a negative errno (-ENOMEM, -EINVAL, -EMSGSIZE for a
 * message past the limits of net/wire.h, -EAGAIN when OL_NET_MAX_INFLIGHT
 * calls are outstanding, -ESHUTDOWN when the ol_net is being destroyed,
 * -EACCES for a message that failed authentication).
 */
#ifndef OL_NET_NET_H
#define OL_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "native/rdma_token.h"
#include "net/auth.h"
#include "net/wire.h"

enum {
    OL_NET_TIMEOUT_MS = 5000, /* default deadline of a call */
    OL_NET_MAX_INFLIGHT = 4096,
    OL_NET_MAX_PEERS = 256,  /* client endpoints per ol_net */
    OL_NET_MAX_CONNS = 1024, /* accepted connections per ol_net */
    OL_NET_MAX_ADDR = 128,   /* "host:port" */
};

struct ol_net;
struct ol_net_req;

struct ol_net_opts {
    unsigned timeout_ms; /* default deadline of a call; 0: OL_NET_TIMEOUT_MS */
    /* The process's clock, stamped on and moved by every message (above);
     * borrowed, outlives the ol_net; NULL: none. */
    struct ol_hlc *hlc;
    /* The cluster key (cluster/key.h) every message is signed and checked
     * with (net/auth.h): copied.  NULL: the all-zero key, which only tests
     * use (a node always passes its cluster's key). */
    const uint8_t *key;
    /* Serving side only: when set, the key a received request is checked
     * with (and its reply signed with) is the one key_fn gives for it
     * instead of opts.key: true with the key in *key, false to refuse the
     * request (-EACCES, as a failed MAC).  Called on the net thread with
     * the request's header and control bytes (unauthenticated yet: key_fn
     * only picks the key, e.g. by an access key in ctl); it must not
     * block.  The client ops of the native port use it (native/proto.h). */
    /* After each burst of work the net thread keeps polling this long
     * before it sleeps (0: sleeps at once).  A wakeup through the kernel
     * costs tens of microseconds on a VM, on each side of a round trip; a
     * latency-bound user (the native client, the native port) trades this
     * much CPU per quiet moment for it.  The drive protocol sleeps at once. */
    unsigned spin_us;
    /* Asks UCX for one-sided operations too (UCP_FEATURE_RMA), so that
     * memory mapped with ol_net_mem_map can be read and written by a peer
     * holding its packed rkey (S3 over RDMA: the native client sets it).
     * Off by default: the drive protocol and the native port move data by
     * active messages only, and the feature can change which transports
     * UCX picks. */
    bool rma;
    bool (*key_fn)(void *arg, const struct ol_wire_hdr *h, const void *ctl, size_t ctl_len,
                   uint8_t key[OL_NET_KEY_BYTES]);
    void *key_arg;
    /* With rma: the worker answers the confirmations of S3 over RDMA
     * (native/rdma_confirm.h), MACed with opts.key (the native client's is
     * its user's native key).  rma_confirm says whether [addr, addr+len)
     * under the packed rkey and the tag is memory this process made a token
     * for, and then its bounds in *base, *size; NULL: every challenge is answered
     * no.  Called on the net thread; must not block (a short lock is fine). */
    bool (*rma_confirm)(void *arg, const uint8_t *rkey, size_t rkey_len,
                        const uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES], uint64_t addr, uint64_t len,
                        uint64_t *base, uint64_t *size);
    void *rma_confirm_arg;
};

/* Starts the net thread.  -EIO when UCX cannot start (its reason logged). */
int ol_net_create(const struct ol_net_opts *opts, struct ol_net **out);
/* Stops the net thread: calls still in flight return -ESHUTDOWN; requests
 * handed out and not answered yet must be answered (their replies are
 * dropped) before their memory goes, so the serving side stops its workers
 * first. */
void ol_net_destroy(struct ol_net *net);

/* ---- client ---- */

struct ol_net_call {
    /* In (borrowed until ol_net_call returns). */
    const char *addr;    /* "host:port"; host numeric or a name */
    uint8_t op;          /* enum ol_wire_op */
    uint32_t drive;      /* the server's drive index */
    unsigned timeout_ms; /* 0: the ol_net's default */
    const void *ctl;
    size_t ctl_len; /* <= OL_WIRE_MAX_CTL */
    const void *data;
    size_t data_len; /* <= OL_WIRE_MAX_DATA */
    /* Where the reply goes: its control bytes into rep_ctl, its data into
     * rep_data (received there directly when UCX uses rendezvous).  A reply
     * larger than a cap fails the call with -EMSGSIZE. */
    void *rep_ctl;
    size_t rep_ctl_cap;
    void *rep_data;
    size_t rep_data_cap;
    /* Out. */
    size_t rep_ctl_len, rep_data_len;
};

/* Sends c's request and waits for the reply.  Returns the reply's status
 * (the server's answer: 0, a count, or an error) or a transport error
 * (-ETIMEDOUT, -ECONNRESET, -ECONNREFUSED, -EMSGSIZE, -EAGAIN, -ESHUTDOWN,
 * -EINVAL for a bad address).  Any thread or fiber, not the net thread. */
int ol_net_call(struct ol_net *net, struct ol_net_call *c);

/* The same call without waiting: many calls in flight from one thread (the
 * native client's batches).  Returns 0 when the call was taken, and then
 * cb(arg, c, result) runs exactly once, on the net thread, with what
 * ol_net_call would have returned (the reply's data CRC checked, -EIO when
 * it differs; -ESHUTDOWN for a call still queued when the ol_net stops, at
 * the latest during ol_net_destroy).  c and every buffer it names stay the
 * caller's and must stay valid until cb has run.  A negative return
 * (-EINVAL, -EMSGSIZE, -ENOMEM, -ESHUTDOWN) means the call was not taken
 * and cb never runs.  cb runs on the net thread, so it must be short and
 * must not block on the network: it must not call ol_net_call (it would
 * wait for itself); it may call ol_net_call_async (a retry, the next step
 * of a sequence) and take locks that are only held briefly. */
typedef void (*ol_net_call_cb)(void *arg, struct ol_net_call *c, int result);
int ol_net_call_async(struct ol_net *net, struct ol_net_call *c, ol_net_call_cb cb, void *arg);

/* ---- server ---- */

/* Called on the net thread for each request received whole; must not
 * block.  The request is the callee's until it passes it to ol_net_reply. */
typedef void (*ol_net_serve_fn)(void *ctx, struct ol_net_req *req);
/* Called on the net thread when accepted connection conn_id is gone. */
typedef void (*ol_net_gone_fn)(void *ctx, uint64_t conn_id);

/* Listens on host:port (port 0: any free one; ol_net_port then says which).
 * One listener per ol_net.  -EADDRINUSE, -EINVAL, -EALREADY. */
int ol_net_listen(struct ol_net *net, const char *host, uint16_t port, ol_net_serve_fn serve,
                  ol_net_gone_fn gone, void *ctx);
/* Stops listening and drops every accepted connection (their clients see
 * -ECONNRESET); once it returns, serve and gone are never called again.
 * Requests handed out before stay the holder's to answer (the replies are
 * dropped).  A no-op when not listening. */
void ol_net_unlisten(struct ol_net *net);
/* The listening port, 0 when not listening. */
uint16_t ol_net_port(struct ol_net *net);

/* A received request: its header, control bytes and data (valid until
 * ol_net_reply), and the connection it came on (ids start at 1, unique per
 * ol_net). */
const struct ol_wire_hdr *ol_net_req_hdr(const struct ol_net_req *req);
const void *ol_net_req_ctl(const struct ol_net_req *req);
const void *ol_net_req_data(const struct ol_net_req *req);
uint64_t ol_net_req_conn(const struct ol_net_req *req);
/* Checks the request's data against the CRC32C its header carries: 0, or
 * -EIO (the handler must not use the bytes).  On the handler's thread, so
 * that the net thread computes no checksums. */
int ol_net_req_check(const struct ol_net_req *req);

/* Answers req with status and reply bytes, and frees it.  Consumes req, and
 * ctl and data (malloc'd by the caller, or NULL; freed after the send).
 * Any thread. */
void ol_net_reply(struct ol_net_req *req, int status, void *ctl, size_t ctl_len, void *data,
                  size_t data_len);
/* ol_net_reply, but data is the caller's: release(arg, data) is called
 * instead of free() once UCX is done with it (on the net thread, or on this
 * thread when the reply cannot be sent; it must not block), so that a
 * server can reuse large buffers (a fresh mapping costs a page fault per
 * page on every use) or send from memory it does not own. */
void ol_net_reply_ex(struct ol_net_req *req, int status, void *ctl, size_t ctl_len, void *data,
                     size_t data_len, void (*release)(void *arg, void *data), void *arg);

/* ---- memory ---- */

/* Registers [addr, addr+len) with the ol_net's UCX context (ucp_mem_map),
 * so transfers into or out of it skip registration; *memh is for
 * ol_net_mem_unmap.  Runs on the net thread; any other thread may call.
 * -EINVAL when UCX refuses the memory. */
int ol_net_mem_map(struct ol_net *net, void *addr, size_t len, void **memh);
void ol_net_mem_unmap(struct ol_net *net, void *memh);
/* The worker's UCX address (ucp_worker_get_address: the bytes a peer
 * passes to ucp_ep_create to reach this worker, with every transport it
 * listens on), copied into out.  The worker belongs to the net thread:
 * this runs there, any other thread may call.  Returns 0 with *len set;
 * -ENOSPC (*len = the size needed) when cap is too small; -EIO. */
int ol_net_worker_address(struct ol_net *net, void *out, size_t cap, size_t *len);
/* The packed remote key of memory mapped by ol_net_mem_map (ucp_rkey_pack),
 * copied into out: with it and the worker address a peer may read and
 * write that memory (only with opts.rma).  Runs on the net thread.  0,
 * -ENOSPC (*len = the size needed), -EINVAL (UCX refused). */
int ol_net_rkey_pack(struct ol_net *net, void *memh, void *out, size_t cap, size_t *len);
/* Whether the UCX found at run time moves CUDA device memory itself (it
 * was built with CUDA support and found a GPU). */
bool ol_net_cuda_memory(struct ol_net *net);

/* ---- tests ---- */

/* Makes the net thread sleep ms without progressing anything (a hung
 * peer), soon; returns at once. */
void ol_net_test_stall(struct ol_net *net, unsigned ms);
/* Makes the net thread sleep ms right after it sent its next reply (the
 * peer has the start of it, a rendezvous hangs half-way); returns once set. */
void ol_net_test_stall_after_reply(struct ol_net *net, unsigned ms);

struct ol_net_stats {
    uint64_t calls, timeouts, late_replies, resets, eps_created;
    uint64_t requests, rndv_in; /* rndv_in: messages received by rendezvous */
    uint64_t crc_errors;        /* replies whose data failed their CRC32C */
    uint64_t hlc_refused;       /* clock stamps received too far ahead (not adopted) */
    uint64_t auth_failures;     /* messages refused: bad MAC or stale stamp (net/auth.h) */
};
void ol_net_stats(struct ol_net *net, struct ol_net_stats *out);

#endif
