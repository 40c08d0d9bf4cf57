/* S3 over RDMA in the S3 handlers (docs/PROTOCOL.md "S3 over RDMA").
 *
 * A GetObject or PutObject that carries x-amz-rdma-token moves its body with
 * UCX one-sided operations (native/rdma.h) instead of over HTTP: the GET
 * handler writes the object's bytes (or its Range, or part) into the
 * client's memory and answers with headers only; the PUT handler reads the
 * body from the client's memory through the body source of s3.h
 * (ol_s3_body_set_source), so every check of a PUT (Content-MD5, checksums,
 * a signed payload hash, conditions) applies unchanged.
 *
 * The header must be covered by the request's signature: a SigV4 request
 * (header or presigned) must name x-amz-rdma-token in SignedHeaders; SigV2
 * signs every x-amz-* header; an anonymous request is refused.
 *
 * Fiber context (the handlers'); one ol_s3_rdma per request.
 */
#ifndef OL_S3_RDMA_H
#define OL_S3_RDMA_H

#include <stdint.h>

#include "native/rdma_token.h"
#include "s3/s3.h"

struct ol_s3_rdma {
    struct ol_rdma *engine;
    struct ol_rdma_token tok;
    uint64_t moved; /* bytes moved so far */
    uint8_t bin[OL_RDMA_TOKEN_MAX_BIN];
};

/* Looks for x-amz-rdma-token: 0 when absent; 1 with *out (malloc'd, the
 * caller frees) when present, signed, well-formed and confirmed by the
 * worker it names for the request's user (native/rdma_confirm.h); -1 when
 * refused, the error sent and its send's result in *sent (400
 * InvalidArgument for a malformed token or an unreachable worker, 403
 * AccessDenied when it is not signed or not confirmed, 503 when this server
 * cannot start UCX). */
int ol_s3_rdma_parse(struct ol_s3_req *r, struct ol_s3_rdma **out, int *sent);

/* Writes len bytes of buf at offset off of the client's region. */
int ol_s3_rdma_write(struct ol_s3_rdma *x, uint64_t off, const void *buf, size_t len);

/* Waits until the writes are in the client's memory. */
int ol_s3_rdma_flush(struct ol_s3_rdma *x);

/* Sends the S3 error for a failed transfer (ol_rdma_move's codes). */
int ol_s3_rdma_error(struct ol_s3_req *r, int rc);

/* PutObject/UploadPart: with a token, checks that the HTTP body is empty
 * (Content-Length 0, no chunking; x-amz-decoded-content-length, when
 * present, equal to the token's length) and makes the token's region the
 * body.  0 when there is no token, 1 when it is set up (the reply then
 * carries ol_s3_rdma_reply_hdrs), -1 when refused (error sent, *sent its
 * result). */
int ol_s3_rdma_put_setup(struct ol_s3_req *r, int *sent);

/* The two reply headers of a request served over RDMA: x-amz-rdma-reply
 * (the status, "200" or "206") and x-amz-rdma-bytes-transferred (bytes),
 * formatted into buf (64 bytes) and written to h[0..1].  Returns 2. */
struct ol_http_hdr;
size_t ol_s3_rdma_reply_hdrs(int status, uint64_t bytes, char buf[64], struct ol_http_hdr *h);

#endif
