/* Authentication of S3 requests: SigV4 and SigV2, header and presigned-query forms,
 * users from the config, clock-skew and expiry rules, and the choice of body
 * decoding (aws-chunked, signed payload hash). */
#ifndef OL_S3_AUTH_H
#define OL_S3_AUTH_H

#include <stdbool.h>

#include "s3/s3.h"
#include "s3/sigv4.h"

/* 0 when the request is authenticated (r->access_key set, body decoding set
 * up); otherwise the S3 error code and message to answer with, and in
 * *not_signed (else NULL) the value of the error document's
 * HeadersNotSigned element: the names of the x-amz-* headers present but
 * not signed.  The strings are static or thread-local: valid until this
 * thread's next call, so the caller builds the error before it yields. */
int ol_s3_authenticate(struct ol_s3_req *r, enum ol_s3_code *code, const char **msg,
                       const char **not_signed);

/* True when a query parameter stands for a request header: an x-amz-*
 * name (any case) other than the SigV4 query-authentication ones.  A
 * presigner may move any x-amz-* header into the URL (the JS SDK moves
 * x-amz-checksum-mode, x-amz-acl...); the router then treats the parameter
 * as that header, and SigV2 signs it as one. */
bool ol_s3_hoisted_param(const char *name);

/* Installs the body decoder for a request (router.c). */
int ol_s3_body_setup(struct ol_s3_req *r, bool aws_chunked, bool signed_chunks, bool trailer,
                     const struct ol_sigv4_auth *auth, const char *secret, const char *seed,
                     const char *sha_hex);

#endif
