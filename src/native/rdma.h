/* The one-sided UCX engine of S3 over RDMA (docs/PROTOCOL.md "S3 over RDMA").
 *
 * An ol_rdma owns a ucp_context (RMA and wakeup features) and one worker,
 * and one thread (the rdma thread) that alone touches them, as net/net.h's
 * net thread does: callers queue a transfer and wait on an ol_completion (a
 * fiber parks, a plain thread blocks), so the HTTP loops never call into
 * UCX.  The thread makes an endpoint to the client's worker from the
 * token's worker address, unpacks the token's rkey on it, issues one
 * ucp_put_nbx (into the client: GET) or ucp_get_nbx (out of it: PUT);
 * ol_rdma_flush flushes the endpoint, so that the puts are complete in the
 * client's memory (not just handed to the transport) before the server
 * answers.
 *
 * Endpoints are cached by worker address (OL_RDMA_MAX_EPS, least recently
 * used evicted; one that failed is dropped and made again on next use).
 * Endpoints use UCX's peer error handling, so that a client that dies or
 * lies fails its own transfer and nothing else.  UCX 1.13 offers it only
 * on transports that detect peer failure (tcp, verbs): on a host without
 * RDMA that means tcp for everything, RMA emulated over active messages
 * (shared memory and cma are refused: "no peer failure handler").
 *
 * OPENLAKE_RDMA_EP_INFO in the environment prints each new endpoint's
 * lanes (ucp_ep_print_info: which transport does what) to stderr.
 * Rkeys are unpacked per call and destroyed after it.
 *
 * Hostile input.  UCX parses worker addresses and packed rkeys without
 * being told their length, and aborts the process on some malformed ones
 * (UCX 1.13 asserts on an address's version byte).  So the bytes of a
 * token reach this process's UCX only after ol_rdma_vet has had them
 * parsed by openlake-rdma-check (native/rdma_check.c), a process of its
 * own with the same UCX and environment; pairs that passed are remembered
 * (OL_RDMA_MAX_VETTED, by SHA-256).  Both are also copied into zero-filled
 * scratch space of OL_RDMA_SCRATCH bytes, so a parser that runs past the
 * token's bytes reads zeros, not other memory.  The caller checks [off, off+len) against
 * the token's length (ol_rdma_move refuses otherwise); whether the client's
 * memory really spans the token's range is for UCX and the transport to
 * check (see docs/PROTOCOL.md "Security": verbs checks it in the NIC; the
 * shared-memory, cma and tcp transports do not).
 *
 * Limits: OL_RDMA_MAX_QUEUE transfers queued or in flight (-EAGAIN past
 * it); each has a deadline (timeout_ms): past it the endpoint is closed
 * with FORCE, which makes UCX fail the transfer and let go of the buffer,
 * and the call returns -ETIMEDOUT.
 *
 * ol_rdma_move refuses a token that ol_rdma_vet has not passed (-EINVAL).
 *
 * Whose worker.  On transports that do not check rkeys a token naming
 * another process's worker would reach that process's memory, so before
 * the first transfer the caller (s3/rdma.c) has the worker confirm the
 * token with ol_rdma_confirm (native/rdma_confirm.h): a challenge in an
 * active message on the endpoint to the worker, and an answer MACed with
 * the native key of the user who signed the request.  Confirmations are
 * remembered by (worker, rkey, user) with the region the worker confirmed
 * (OL_RDMA_MAX_CONFIRMED, for OL_RDMA_CONFIRM_TTL_MS), so a stream of
 * requests on one registered buffer pays the round trip once per TTL.
 * ol_rdma_move does not look for a confirmation (it has no user key):
 * its callers confirm first (s3/rdma.c, ol_s3_rdma_parse).
 *
 * Errors (ol_rdma_move): 0, or -EINVAL (range outside the token, rkey UCX
 * cannot unpack), -EHOSTUNREACH (no endpoint to the worker: address UCX
 * refuses, no common transport, peer gone), -EFAULT (the transfer failed
 * in the transport: the client's memory refused it), -ETIMEDOUT, -EAGAIN,
 * -ESHUTDOWN, -EIO (UCX cannot start, other UCX failures).
 */
#ifndef OL_NATIVE_RDMA_H
#define OL_NATIVE_RDMA_H

#include <stddef.h>
#include <stdint.h>

#include "native/rdma_token.h"
#include "net/auth.h"

enum {
    OL_RDMA_MAX_EPS = 64,
    OL_RDMA_MAX_QUEUE = 1024,
    OL_RDMA_SCRATCH = 64 * 1024,
    OL_RDMA_TIMEOUT_MS = 10000,
    OL_RDMA_MAX_VETTED = 1024,
    OL_RDMA_VET_TIMEOUT_MS = 5000,
    OL_RDMA_MAX_CONFIRMED = 1024,
    OL_RDMA_CONFIRM_TIMEOUT_MS = 3000,
    /* How long a confirmation counts: the window in which memory the client
     * has deregistered since could still be named by the same user. */
    OL_RDMA_CONFIRM_TTL_MS = 60000,
};

enum ol_rdma_dir {
    OL_RDMA_WRITE, /* local buf -> client memory (ucp_put_nbx) */
    OL_RDMA_READ,  /* client memory -> local buf (ucp_get_nbx) */
};

struct ol_rdma;

/* Starts the rdma thread.  -EIO when UCX cannot start (logged). */
int ol_rdma_create(struct ol_rdma **out);
/* Stops it: transfers still queued or in flight fail with -ESHUTDOWN
 * (their callers must have returned before the memory goes). */
void ol_rdma_destroy(struct ol_rdma *rd);

/* The process's engine, made on first use (thread-safe); NULL when UCX
 * cannot start.  Lives until exit. */
struct ol_rdma *ol_rdma_global(void);

/* Vets t's worker address and rkey (above): 0 when they may be used,
 * -EINVAL when UCX refuses them (or the checker crashed or took more than
 * OL_RDMA_VET_TIMEOUT_MS), -EIO when the checker cannot run.  Costs a
 * process start (a few ms) the first time a pair is seen.  Fiber or
 * thread (a fiber parks while the checker runs). */
int ol_rdma_vet(struct ol_rdma *rd, const struct ol_rdma_token *t);

/* Has t's worker confirm that t is its own, for the user whose native key
 * (native/proto.h ol_native_key) is key: 0 when it answered yes with a MAC
 * under key and a region that covers t's range (or such an answer for the
 * same worker, rkey and key is remembered and still counts); -EACCES when
 * it answered no, with a wrong MAC, or a region that does not cover t;
 * -ETIMEDOUT when no answer came within OL_RDMA_CONFIRM_TIMEOUT_MS (a
 * client that does not speak the protocol); -EHOSTUNREACH, -EAGAIN,
 * -ESHUTDOWN, -EINVAL (t not vetted), -ENOMEM, -EIO.  Fiber or thread, not
 * the rdma thread. */
int ol_rdma_confirm(struct ol_rdma *rd, const struct ol_rdma_token *t,
                    const uint8_t key[OL_NET_KEY_BYTES]);

/* Moves len bytes between buf and the client's [t->addr + off, +len).
 * Waits until buf may be reused (any thread or fiber but the rdma thread):
 * a read has landed in buf; a write has left it, but is in the client's
 * memory only after ol_rdma_flush.  buf and t are borrowed until it
 * returns.  timeout_ms 0: OL_RDMA_TIMEOUT_MS. */
int ol_rdma_move(struct ol_rdma *rd, const struct ol_rdma_token *t, enum ol_rdma_dir dir,
                 uint64_t off, void *buf, size_t len, unsigned timeout_ms);
/* Waits until every write to t's worker before it is in the client's
 * memory (ucp_ep_flush_nbx). */
int ol_rdma_flush(struct ol_rdma *rd, const struct ol_rdma_token *t, unsigned timeout_ms);

struct ol_rdma_stats {
    uint64_t moves, bytes, errors, timeouts, eps_created, eps_evicted;
    uint64_t vetted, vet_refused; /* checker runs: passed, refused */
    uint64_t confirmed, confirm_refused; /* confirmation round trips (native/rdma_confirm.h) */
};
void ol_rdma_stats(struct ol_rdma *rd, struct ol_rdma_stats *out);

#endif
