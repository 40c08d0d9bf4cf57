/* What every handler uses to read its request and send its response (s3/s3.h):
 * query parameters and headers, the body (Content-Length, chunked, aws-chunked
 * with its signatures and trailers, the signed payload's SHA-256), and the
 * responses (XML, empty, S3 error documents with CORS headers). */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access/ratelimit.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "s3/auth.h"
#include "s3/router.h"
#include "s3/s3.h"
#include "s3/sigv4.h"


#define BODY_STAGE_BYTES (64 * 1024)

/* Per-request body state for aws-chunked and signed payloads. */
struct s3_body {
    bool aws_chunked;
    struct ol_aws_chunked ac;
    EVP_MD_CTX *sha;         /* when the payload hash is signed */
    char expect_sha[65];
    uint64_t got;            /* decoded bytes handed out */
    int64_t decoded_len;     /* x-amz-decoded-content-length, or -1 */
    size_t s, e;             /* raw bytes staged: stage[s, e) */
    bool raw_eof;
    /* Another source of the body than the connection (S3 over RDMA,
     * s3/rdma.h): src_len bytes read through src, freed with src_free. */
    ssize_t (*src)(void *ctx, void *buf, size_t len, uint64_t off);
    void *src_ctx;
    void (*src_free)(void *ctx);
    int64_t src_len;
    char stage[BODY_STAGE_BYTES];
};

/* ---- small helpers ---- */

const struct ol_s3_param *ol_s3_param(const struct ol_s3_req *r, const char *name)
{
    for (size_t i = 0; i < r->nparams; i++)
        if (strcmp(r->params[i].name, name) == 0)
            return &r->params[i];
    return NULL;
}

bool ol_s3_has_param(const struct ol_s3_req *r, const char *name)
{
    return ol_s3_param(r, name) != NULL;
}

const struct ol_slice *ol_s3_header(const struct ol_s3_req *r, const char *name)
{
    return ol_http_find_header(&r->http->head, name);
}

int ol_s3_send_xml(struct ol_s3_req *r, int status, struct ol_xml *x)
{
    if (x->failed)
        return ol_s3_error(r, OL_S3_InternalError, "out of memory building the response");
    struct ol_http_hdr h[2 + OL_S3_CORS_MAX_HDRS] = {
        {"Content-Type", "application/xml"},
        {"x-amz-request-id", r->request_id},
    };
    char cors[OL_S3_CORS_STORE_BYTES];
    size_t n = 2 + ol_s3_cors_headers(r, h + 2, OL_S3_CORS_MAX_HDRS, cors, sizeof(cors));
    return ol_http_respond(r->conn, status, h, n, x->buf, x->len);
}

int ol_s3_send_empty(struct ol_s3_req *r, int status, const struct ol_http_hdr *hdrs,
                     size_t nhdrs)
{
    struct ol_http_hdr h[24 + OL_S3_CORS_MAX_HDRS];
    size_t n = 0;
    h[n++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    for (size_t i = 0; i < nhdrs && n < 24; i++)
        h[n++] = hdrs[i];
    char cors[OL_S3_CORS_STORE_BYTES];
    n += ol_s3_cors_headers(r, h + n, OL_S3_CORS_MAX_HDRS, cors, sizeof(cors));
    return ol_http_respond(r->conn, status, h, n, NULL, 0);
}

int ol_s3_error(struct ol_s3_req *r, enum ol_s3_code code, const char *message)
{
    return ol_s3_error_elem(r, code, message, NULL, NULL);
}

int ol_s3_error_elem(struct ol_s3_req *r, enum ol_s3_code code, const char *message,
                     const char *elem, const char *elem_value)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "Error");
    ol_xml_str(&x, "Code", ol_s3_code_name(code));
    ol_xml_str(&x, "Message", message ? message : ol_s3_code_name(code));
    if (elem && elem_value)
        ol_xml_str(&x, elem, elem_value);
    if (r->bucket[0])
        ol_xml_str(&x, "BucketName", r->bucket);
    if (r->key)
        ol_xml_text(&x, "Key", r->key, r->key_len);
    ol_xml_text(&x, "Resource", r->http->head.path.p, r->http->head.path.n);
    ol_xml_str(&x, "RequestId", r->request_id);
    ol_xml_end_doc(&x);
    int status = ol_s3_code_status(code);
    if (code == OL_S3_InternalError || code == OL_S3_ServiceUnavailable ||
        code == OL_S3_XOpenLakeStorageFull)
        ol_log_limited(OL_LOG_WARN, "%s %.*s -> %s: %s", r->request_id,
                       (int)r->http->head.path.n, r->http->head.path.p, ol_s3_code_name(code),
                       message ? message : "");
    struct ol_http_hdr h[2 + OL_S3_CORS_MAX_HDRS] = {
        {"Content-Type", "application/xml"},
        {"x-amz-request-id", r->request_id},
    };
    char cors[OL_S3_CORS_STORE_BYTES];
    size_t nh = 2 + ol_s3_cors_headers(r, h + 2, OL_S3_CORS_MAX_HDRS, cors, sizeof(cors));
    int rc;
    if (x.failed)
        rc = ol_http_respond(r->conn, status, h, nh, NULL, 0);
    else
        rc = ol_http_respond(r->conn, status, h, nh, x.buf, x.len);
    ol_xml_free(&x);
    /* After an error the body may be left unread: close unless it is done
     * or small (conn.c drains small bodies). */
    return rc;
}

int ol_s3_error_from(struct ol_s3_req *r, int err)
{
    switch (-err) {
    case OL_ESHA256:
        return ol_s3_error(r, OL_S3_XAmzContentSHA256Mismatch,
                           "The provided 'x-amz-content-sha256' header does not match what was computed.");
    case OL_ECHUNKSIG:
        return ol_s3_error(r, OL_S3_SignatureDoesNotMatch,
                           "A chunk signature of the aws-chunked body does not match.");
    case OL_EINCOMPLETE:
    case ECONNRESET: /* the client closed before the end of its body */
        return ol_s3_error(r, OL_S3_IncompleteBody,
                           "You did not provide the number of bytes specified by the Content-Length HTTP header.");
    case OL_EBADDIGEST:
        return ol_s3_error(r, OL_S3_BadDigest,
                           "The Content-MD5 you specified did not match what we received.");
    case OL_EBADREQUEST:
    case EPROTO: /* ol_http_body_read: broken chunked framing */
        return ol_s3_error(r, OL_S3_InvalidRequest, "The request body framing is malformed.");
    case ETIMEDOUT:
        return ol_s3_error(r, OL_S3_RequestTimeout,
                           "Your socket connection to the server was not read from or written to within the timeout period.");
    case ENOSPC:
    case EDQUOT:
        return ol_s3_error(r, OL_S3_XOpenLakeStorageFull,
                           "The drive is full (or over its quota): nothing was stored. Free "
                           "space or add capacity; retrying will not help until then.");
    default:
        break;
    }
    enum ol_s3_code code = ol_s3_code_from_err(err);
    return ol_s3_error(r, code, code == OL_S3_InternalError ? ol_strerror(err) : NULL);
}

/* ---- body reading ---- */

int64_t ol_s3_body_length(const struct ol_s3_req *r)
{
    const struct s3_body *b = r->body_decoder;
    if (b && b->src)
        return b->src_len;
    if (b && b->aws_chunked)
        return b->decoded_len;
    if (r->http->chunked)
        return -1;
    return (int64_t)r->http->content_length;
}

static ssize_t read_aws_chunked(struct ol_s3_req *r, struct s3_body *b, char *out, size_t len)
{
    for (unsigned rounds = 0; rounds < 1u << 20; rounds++) {
        if (ol_aws_chunked_done(&b->ac))
            return 0;
        size_t have = b->e - b->s;
        if (have) {
            size_t in = have < len ? have : len;
            size_t dlen = in;
            ssize_t used = ol_aws_chunked_decode(&b->ac, b->stage + b->s, &dlen);
            if (used == OL_SIGV4_EMISMATCH)
                return -OL_ECHUNKSIG;
            if (used < 0)
                return -OL_EBADREQUEST;
            if (dlen)
                memcpy(out, b->stage + b->s, dlen);
            b->s += (size_t)used;
            if (dlen)
                return (ssize_t)dlen;
            if (used > 0)
                continue;
            if (ol_aws_chunked_done(&b->ac))
                return 0;
        }
        if (b->raw_eof)
            return -OL_EINCOMPLETE;
        if (b->s > 0) {
            memmove(b->stage, b->stage + b->s, b->e - b->s);
            b->e -= b->s;
            b->s = 0;
        }
        if (b->e == sizeof(b->stage))
            return -OL_EBADREQUEST; /* a chunk line longer than the stage */
        ssize_t n = ol_http_body_read(r->conn, b->stage + b->e, sizeof(b->stage) - b->e);
        if (n < 0)
            return n;
        if (n == 0)
            b->raw_eof = true;
        b->e += (size_t)n;
    }
    return -OL_EBADREQUEST;
}

static ssize_t body_read(struct ol_s3_req *r, void *buf, size_t len);

/* Under a bandwidth limit (access/ratelimit.h) a body is read a chunk at a
 * time, each charged to the user and followed by the wait it calls for:
 * the client's sends then stall on a full socket, at the user's rate. */
ssize_t ol_s3_body_read(struct ol_s3_req *r, void *buf, size_t len)
{
    if (!r->rl_user)
        return body_read(r, buf, len);
    size_t chunk = ol_rl_chunk(r->rl_user);
    ssize_t n = body_read(r, buf, len < chunk ? len : chunk);
    if (n > 0)
        ol_rl_pace(r->ctx->rl, r->rl_user, (uint64_t)n);
    return n;
}

static ssize_t body_read(struct ol_s3_req *r, void *buf, size_t len)
{
    struct s3_body *b = r->body_decoder;
    if (!b)
        return ol_http_body_read(r->conn, buf, len);
    ssize_t n;
    if (b->src) {
        uint64_t left = (uint64_t)b->src_len - b->got;
        n = left == 0 ? 0 : b->src(b->src_ctx, buf, len < left ? len : (size_t)left, b->got);
    } else if (b->aws_chunked)
        n = read_aws_chunked(r, b, buf, len);
    else
        n = ol_http_body_read(r->conn, buf, len);
    if (n < 0)
        return n;
    if (n > 0) {
        b->got += (uint64_t)n;
        if (b->sha)
            EVP_DigestUpdate(b->sha, buf, (size_t)n);
        return n;
    }
    /* End of body: check what was promised. */
    if (b->aws_chunked && b->decoded_len >= 0 && b->got != (uint64_t)b->decoded_len)
        return -OL_EINCOMPLETE;
    if (b->sha) {
        unsigned char md[32];
        unsigned mdlen = 0;
        EVP_DigestFinal_ex(b->sha, md, &mdlen);
        EVP_MD_CTX_free(b->sha);
        b->sha = NULL;
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (strcasecmp(hex, b->expect_sha) != 0)
            return -OL_ESHA256;
    }
    return 0;
}

const char *ol_s3_body_trailer(const struct ol_s3_req *r, const char *name)
{
    const struct s3_body *b = r->body_decoder;
    if (!b || !b->aws_chunked || !ol_aws_chunked_done(&b->ac))
        return NULL;
    size_t n = strlen(name), pos = 0;
    /* Entries are "name:value\0", names lowercase; bounded by trailers_len. */
    while (pos < b->ac.trailers_len) {
        const char *e = b->ac.trailers + pos;
        size_t el = strnlen(e, b->ac.trailers_len - pos);
        if (el > n && e[n] == ':' && strncasecmp(e, name, n) == 0)
            return e + n + 1;
        pos += el + 1;
    }
    return NULL;
}

int ol_s3_body_setup(struct ol_s3_req *r, bool aws_chunked, bool signed_chunks, bool trailer,
                     const struct ol_sigv4_auth *auth, const char *secret, const char *seed,
                     const char *sha_hex)
{
    struct s3_body *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->decoded_len = -1;
    r->body_decoder = b;
    if (aws_chunked) {
        b->aws_chunked = true;
        int rc = ol_aws_chunked_init(&b->ac, signed_chunks, trailer, auth, secret,
                                     secret ? strlen(secret) : 0, seed);
        if (rc < 0)
            return rc;
        const struct ol_slice *dl = ol_s3_header(r, "x-amz-decoded-content-length");
        uint64_t v;
        if (dl && ol_http_parse_content_length(*dl, &v) == 0)
            b->decoded_len = (int64_t)v;
    }
    if (sha_hex) {
        b->sha = EVP_MD_CTX_new();
        if (!b->sha || !EVP_DigestInit_ex(b->sha, EVP_sha256(), NULL))
            return -ENOMEM;
        snprintf(b->expect_sha, sizeof(b->expect_sha), "%s", sha_hex);
    }
    return 0;
}

void ol_s3_body_free(struct ol_s3_req *r)
{
    struct s3_body *b = r->body_decoder;
    if (!b)
        return;
    if (b->aws_chunked)
        ol_aws_chunked_free(&b->ac);
    if (b->sha)
        EVP_MD_CTX_free(b->sha);
    if (b->src_free)
        b->src_free(b->src_ctx);
    free(b);
    r->body_decoder = NULL;
}

int ol_s3_body_set_source(struct ol_s3_req *r, int64_t len,
                          ssize_t (*src)(void *ctx, void *buf, size_t len, uint64_t off),
                          void *ctx, void (*src_free)(void *ctx))
{
    struct s3_body *b = r->body_decoder;
    if (!b) {
        int rc = ol_s3_body_setup(r, false, false, false, NULL, NULL, NULL, NULL);
        if (rc < 0) {
            src_free(ctx);
            return rc;
        }
        b = r->body_decoder;
    }
    if (b->aws_chunked || b->src) {
        src_free(ctx);
        return -EINVAL;
    }
    b->src = src;
    b->src_ctx = ctx;
    b->src_free = src_free;
    b->src_len = len;
    return 0;
}
