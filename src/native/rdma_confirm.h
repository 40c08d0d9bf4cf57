/* The confirmation round trip of S3 over RDMA (docs/PROTOCOL.md "S3 over
 * RDMA", "Confirmation"): before the server moves bytes to or from the UCX
 * worker a token names, the worker proves that the token is its own.
 *
 * Why.  A token names a worker address, an rkey and a range.  On verbs the
 * NIC checks the rkey and the range; UCX's tcp, shared-memory and cma
 * transports emulate RMA with active messages and check neither, so a
 * token that names another process's worker would make the server write
 * into (or read from) that process.  The server cannot tell whose worker an
 * address is, so it asks the worker:
 *
 *   server -> worker  CHALLENGE: nonce, tag, addr, len, rkey  (the token's parts)
 *   worker -> server  ANSWER: nonce, verdict, region [base, base+size),
 *                     MAC = HMAC-SHA256(K, label, CHALLENGE, ANSWER-sans-MAC)
 *
 * The worker answers yes only when rkey is the packed key of memory it made
 * a token for, tag is the tag it put in that memory's tokens (a secret: on
 * transports that do not check rkeys, the rkey's bytes may be the same for
 * every process), and [addr, addr+len) lies inside that memory, whose
 * bounds it gives back.  K is the native key of the worker's user (native/proto.h
 * ol_native_key: derived from the access key and its secret), so the
 * server, which knows the secret of the user who signed the HTTP request,
 * accepts the answer only when the worker holds that user's secret.  The
 * nonce (16 random bytes per challenge) ties the answer to this challenge.
 *
 * Both messages are UCX active messages (ids below) on the endpoint the
 * server opened to the token's worker; the challenge is sent with
 * UCP_AM_SEND_FLAG_REPLY and the answer goes back on the receiver's reply
 * endpoint.  Each message is the AM's data; the AM header is empty.
 *
 * Wire form (little-endian):
 *
 *   CHALLENGE  u32 magic "OLRC", u8 version 1, u8 0, u16 rkey_len,
 *              16 nonce, u64 addr, u64 len, 16 tag, rkey_len bytes of rkey
 *   ANSWER     u32 magic "OLRA", u8 version 1, u8 verdict (1 yes, 0 no),
 *              u16 0, 16 nonce, u64 base, u64 size, 32 MAC
 *
 * Nothing may follow either.  The functions here are pure (no allocation,
 * no global state; the MAC uses core/sha256.h), any thread; decoders read
 * exactly the n bytes given and refuse anything else with -EINVAL.
 */
#ifndef OL_NATIVE_RDMA_CONFIRM_H
#define OL_NATIVE_RDMA_CONFIRM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "native/rdma_token.h"
#include "net/auth.h"

enum {
    /* UCX active message ids: apart from net/wire.h's (1, 2), on the
     * client's worker too. */
    OL_RDMA_AM_CHALLENGE = 0x31,
    OL_RDMA_AM_ANSWER = 0x32,
    OL_RDMA_CONFIRM_VERSION = 1,
    OL_RDMA_NONCE_BYTES = 16,
    OL_RDMA_CHALLENGE_FIXED = 4 + 4 + OL_RDMA_NONCE_BYTES + 16 + OL_RDMA_TOKEN_TAG_BYTES,
    OL_RDMA_CHALLENGE_MAX = OL_RDMA_CHALLENGE_FIXED + OL_RDMA_TOKEN_MAX_RKEY,
    OL_RDMA_ANSWER_BYTES = 4 + 4 + OL_RDMA_NONCE_BYTES + 16 + 32,
};

struct ol_rdma_challenge {
    uint8_t nonce[OL_RDMA_NONCE_BYTES];
    uint64_t addr, len;
    uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES];
    const uint8_t *rkey; /* borrowed (encode) / points into the message (decode) */
    size_t rkey_len;
};

struct ol_rdma_answer {
    uint8_t nonce[OL_RDMA_NONCE_BYTES];
    bool yes;
    uint64_t base, size; /* the confirmed region (0, 0 with a no) */
    uint8_t mac[32];
};

/* Writes c's message into out (cap >= OL_RDMA_CHALLENGE_FIXED + rkey_len).
 * Returns its length, -EINVAL (rkey empty or over OL_RDMA_TOKEN_MAX_RKEY),
 * -ENOSPC. */
int ol_rdma_challenge_encode(const struct ol_rdma_challenge *c, uint8_t *out, size_t cap);
/* Decodes m[0..n); c->rkey points into m.  0 or -EINVAL. */
int ol_rdma_challenge_decode(const void *m, size_t n, struct ol_rdma_challenge *c);

/* The worker's side: fills a's MAC under key for challenge msg (its exact
 * bytes, as received) and writes the answer's message into
 * out[OL_RDMA_ANSWER_BYTES].  a->nonce must be the challenge's. */
void ol_rdma_answer_encode(const uint8_t key[OL_NET_KEY_BYTES], const void *challenge,
                           size_t challenge_len, struct ol_rdma_answer *a,
                           uint8_t out[OL_RDMA_ANSWER_BYTES]);
/* Decodes an answer: 0 or -EINVAL. */
int ol_rdma_answer_decode(const void *m, size_t n, struct ol_rdma_answer *a);
/* The server's side: whether a (decoded from an answer) is a yes to the
 * challenge whose exact bytes are challenge, under key, and its region
 * covers [t_addr, t_addr+t_len).  Constant-time MAC comparison. */
bool ol_rdma_answer_confirms(const uint8_t key[OL_NET_KEY_BYTES], const void *challenge,
                             size_t challenge_len, const struct ol_rdma_answer *a, uint64_t t_addr,
                             uint64_t t_len);

#endif
