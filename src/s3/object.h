/* Object-level helpers shared by the object and multipart handlers:
 * receiving a body with its checksums (body.c), and write preconditions
 * (object.c).
 */
#ifndef OL_S3_OBJECT_H
#define OL_S3_OBJECT_H

#include <stdbool.h>
#include <stdint.h>

#include "s3/checksum.h"
#include "s3/s3.h"

struct ol_store_cond;

/* The additional checksum of one request body (PutObject, UploadPart). */
struct ol_s3_body_ck {
    enum ol_ck_algo algo;       /* computed while streaming; OL_CK_NONE: none */
    bool from_trailer;          /* the expected value arrives in the aws-chunked trailer */
    bool have_expected;         /* a header gave the expected value */
    uint8_t expected[OL_CK_MAX_BYTES];
    uint8_t got[OL_CK_MAX_BYTES];  /* the computed digest, after a successful receive */
    char b64[OL_CK_B64_MAX];       /* the same, base64 */
    /* Why a parse or a receive failed (static strings), for ol_s3_receive_fail. */
    enum ol_s3_code err_code;
    const char *err_msg;
};

/* Reads the checksum headers (x-amz-checksum-*, x-amz-sdk-checksum-algorithm,
 * x-amz-trailer, Content-MD5's form).  `required` is the upload's algorithm
 * for UploadPart (OL_CK_NONE otherwise): it is computed even when the request
 * names none.  0, or -OL_EBADREQUEST with ck->err_code/err_msg set. */
int ol_s3_body_ck_parse(struct ol_s3_req *r, enum ol_ck_algo required, struct ol_s3_body_ck *ck);

/* Streams the request body into a new object-layer writer for target t,
 * computing its MD5 (hex into md5_hex), checking Content-MD5, and computing
 * and checking ck's checksum (ck from ol_s3_body_ck_parse; NULL for none).
 * On success the caller owns *out and must commit or abort it.  -EINVAL: no
 * length known; -OL_ETOOLARGE. */
struct ol_obj_target;
struct ol_obj_writer;
int ol_s3_receive_body_ck(struct ol_s3_req *r, const struct ol_obj_target *t,
                          struct ol_obj_writer **out, char md5_hex[33],
                          struct ol_s3_body_ck *ck);

/* Sends the error for a failed ol_s3_body_ck_parse or ol_s3_receive_body_ck
 * (closing the connection when the body was left unread). */
int ol_s3_receive_fail(struct ol_s3_req *r, int rc, const struct ol_s3_body_ck *ck);

/* Reads If-Match / If-None-Match of a write (PutObject,
 * CompleteMultipartUpload) into cond; etag_buf holds the If-Match value.
 * Returns 1 when there is a precondition, 0 when none, or sends the error
 * (NotImplemented for forms S3 does not support on writes) and returns -1. */
int ol_s3_write_cond(struct ol_s3_req *r, struct ol_store_cond *cond, char etag_buf[64]);

/* Sends the error for a write whose precondition failed: 412, or 404 when
 * If-Match named an object that does not exist (as S3 answers). */
int ol_s3_write_cond_fail(struct ol_s3_req *r, const struct ol_store_cond *cond);

/* Exported for the erasure-coded handlers (ec_object.c). */
struct ol_obj_info;
/* Checks Content-MD5 against a body's digest: 0, or -OL_EBADDIGEST. */
int ol_s3_check_content_md5(const struct ol_s3_req *r, const uint8_t md5[16]);
/* A Range header against an object size: 1 with [*start, *end], 0 to serve
 * the whole object (absent or ignored), -1 when unsatisfiable (416). */
int ol_s3_parse_range(const struct ol_slice *h, uint64_t size, uint64_t *start, uint64_t *end);
/* If-Match & co. of a GET/HEAD: 0 to serve, 304 or 412. */
int ol_s3_read_conditions(const struct ol_s3_req *r, const struct ol_obj_info *info);
/* Checks GetObject's response-* overrides: *any tells whether one is
 * present; a value that may not be a header value (a control byte: CR/LF
 * would split the response) gets 400 InvalidArgument, *refused set and the
 * send's result returned. */
int ol_s3_response_overrides_check(struct ol_s3_req *r, bool *any, bool *refused);
/* An error document with extra headers (416's Content-Range). */
int ol_s3_send_error_hdrs(struct ol_s3_req *r, int status, const char *code, const char *msg,
                          const struct ol_http_hdr *extra, size_t nextra);

/* ---- CompleteMultipartUpload pieces (multipart.c), shared with ec_multipart.c ---- */

#define OL_S3_MAX_PARTS 10000
struct ol_complete_part;
/* Parses a CompleteMultipartUpload document into parts (room for
 * OL_S3_MAX_PARTS), in document order, ETags unquoted.  0, or -EINVAL when the
 * document is malformed or lists no part. */
int ol_s3_complete_parse(const char *body, size_t len, struct ol_complete_part *parts,
                         uint32_t *n);
/* The multipart ETag "<md5 of the parts' binary MD5s>-<n>" of the parts'
 * (stored) ETags.  0, or -OL_EINVALIDPART when an ETag is not an MD5. */
int ol_s3_multipart_etag(const struct ol_complete_part *parts, uint32_t n, char out[64]);
/* Sends the S3 error of a failed completion (InvalidPart, InvalidPartOrder,
 * EntityTooSmall with S3's messages, else ol_s3_error_from). */
int ol_s3_complete_error(struct ol_s3_req *r, int rc);

#endif
