/* S3 over RDMA in the S3 handlers (s3/rdma.h). */
#include "s3/rdma.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/cfg.h"
#include "core/err.h"
#include "core/log.h"
#include "native/proto.h"
#include "native/rdma.h"
#include "s3/sigv4.h"
#include "users/users.h"

/* Whether a ';'-separated SignedHeaders list (the presigned form may also
 * separate with "%3B") names x-amz-rdma-token. */
static bool list_has(struct ol_slice l)
{
    static const char name[] = OL_RDMA_TOKEN_HEADER;
    size_t nl = sizeof(name) - 1, i = 0;
    while (i <= l.n) {
        size_t j = i;
        while (j < l.n && l.p[j] != ';' && !(l.n - j >= 3 && l.p[j] == '%' && l.p[j + 1] == '3' &&
                                               (l.p[j + 2] == 'B' || l.p[j + 2] == 'b')))
            j++;
        if (j - i == nl && strncasecmp(l.p + i, name, nl) == 0)
            return true;
        if (j >= l.n)
            break;
        i = j + (l.p[j] == ';' ? 1 : 3);
    }
    return false;
}

/* Whether the request's signature covers the token header (auth has
 * accepted the signature already). */
static bool token_signed(const struct ol_s3_req *r)
{
    if (!r->access_key)
        return false;
    struct ol_sigv4_auth auth;
    memset(&auth, 0, sizeof(auth));
    const struct ol_slice *authz = ol_s3_header(r, "authorization");
    if (authz) {
        if (authz->n >= 4 && memcmp(authz->p, "AWS ", 4) == 0)
            return true; /* SigV2 signs every x-amz-* header */
        const struct ol_slice *date = ol_s3_header(r, "x-amz-date");
        if (!date)
            date = ol_s3_header(r, "date");
        if (!date || ol_sigv4_parse_header(*authz, *date, &auth) != OL_SIGV4_OK)
            return false;
        return list_has(auth.signed_headers);
    }
    if (ol_sigv4_parse_query(r->http->head.query, &auth) != OL_SIGV4_OK)
        return ol_s3_param(r, "Signature") != NULL; /* SigV2 presigned: x-amz-* signed */
    return list_has(auth.signed_headers);
}

/* The native key (native/proto.h) of the request's user, which the
 * client's worker MACs its confirmation with.  0 or -ENOENT / -EAGAIN. */
static int user_key(const struct ol_s3_req *r, uint8_t key[OL_NET_KEY_BYTES])
{
    char secret[OL_USERS_KEY_MAX + 1];
    size_t n = strlen(r->access_key);
    int rc;
    if (r->ctx->users) {
        rc = ol_users_lookup(r->ctx->users, r->access_key, n, secret, NULL);
    } else {
        const struct ol_cfg_user *u = ol_cfg_find_user(r->ctx->cfg, r->access_key, n);
        rc = u ? 0 : -ENOENT;
        if (u)
            snprintf(secret, sizeof(secret), "%s", u->secret_key);
    }
    if (rc == 0)
        ol_native_key(r->access_key, secret, key);
    OPENSSL_cleanse(secret, sizeof(secret));
    return rc;
}

/* Has the token's worker confirm the token (native/rdma_confirm.h); sends
 * the error when it does not.  0 or -1. */
static int confirm(struct ol_s3_req *r, struct ol_s3_rdma *x, int *sent)
{
    uint8_t key[OL_NET_KEY_BYTES];
    int rc = user_key(r, key);
    if (rc == 0)
        rc = ol_rdma_confirm(x->engine, &x->tok, key);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc == 0)
        return 0;
    ol_log_limited(OL_LOG_INFO, "rdma: a token of %s was not confirmed by its worker: %s",
                   r->access_key, ol_strerror(rc));
    switch (rc) {
    case -EACCES:
    case -ETIMEDOUT:
    case -ENOENT:
        *sent = ol_s3_error(r, OL_S3_AccessDenied,
                            "x-amz-rdma-token: the UCX worker it names did not confirm it as its "
                            "own for this user.");
        break;
    case -EHOSTUNREACH:
        *sent = ol_s3_error(r, OL_S3_InvalidArgument,
                            "x-amz-rdma-token: the client's UCX worker cannot be reached.");
        break;
    case -EAGAIN:
        *sent = ol_s3_error(r, OL_S3_SlowDown, "Too many RDMA transfers in flight; retry.");
        break;
    default:
        *sent = ol_s3_error(r, OL_S3_ServiceUnavailable, "S3 over RDMA is not available here.");
        break;
    }
    return -1;
}

int ol_s3_rdma_parse(struct ol_s3_req *r, struct ol_s3_rdma **out, int *sent)
{
    *out = NULL;
    const struct ol_slice *h = ol_s3_header(r, OL_RDMA_TOKEN_HEADER);
    if (!h)
        return 0;
    if (!token_signed(r)) {
        *sent = ol_s3_error(r, OL_S3_AccessDenied,
                            "x-amz-rdma-token must be among the request's signed headers.");
        return -1;
    }
    struct ol_s3_rdma *x = malloc(sizeof(*x));
    if (!x) {
        *sent = ol_s3_error_from(r, -ENOMEM);
        return -1;
    }
    const char *why = NULL;
    if (ol_rdma_token_decode(h->p, h->n, x->bin, sizeof(x->bin), &x->tok, &why) < 0) {
        free(x);
        char msg[160];
        snprintf(msg, sizeof(msg), "x-amz-rdma-token: %s.", why ? why : "malformed");
        *sent = ol_s3_error(r, OL_S3_InvalidArgument, msg);
        return -1;
    }
    x->engine = ol_rdma_global();
    if (!x->engine) {
        free(x);
        *sent = ol_s3_error(r, OL_S3_ServiceUnavailable, "S3 over RDMA is not available here.");
        return -1;
    }
    int vrc = ol_rdma_vet(x->engine, &x->tok);
    if (vrc < 0) {
        free(x);
        *sent = vrc == -EINVAL
                    ? ol_s3_error(r, OL_S3_InvalidArgument,
                                  "x-amz-rdma-token: UCX refuses its worker address or memory key.")
                    : ol_s3_error(r, OL_S3_ServiceUnavailable,
                                  "S3 over RDMA is not available here.");
        return -1;
    }
    if (confirm(r, x, sent) < 0) {
        free(x);
        return -1;
    }
    x->moved = 0;
    *out = x;
    return 1;
}

int ol_s3_rdma_write(struct ol_s3_rdma *x, uint64_t off, const void *buf, size_t len)
{
    int rc = ol_rdma_move(x->engine, &x->tok, OL_RDMA_WRITE, off, (void *)buf, len, 0);
    if (rc == 0)
        x->moved += len;
    return rc;
}

int ol_s3_rdma_flush(struct ol_s3_rdma *x)
{
    return ol_rdma_flush(x->engine, &x->tok, 0);
}

int ol_s3_rdma_error(struct ol_s3_req *r, int rc)
{
    const char *msg;
    enum ol_s3_code code = OL_S3_InvalidArgument;
    switch (rc) {
    case -EINVAL:
        msg = "x-amz-rdma-token: the memory key cannot be used, or the transfer does not fit the "
              "token's region.";
        break;
    case -EHOSTUNREACH:
        msg = "x-amz-rdma-token: the client's UCX worker cannot be reached.";
        break;
    case -EFAULT:
        msg = "x-amz-rdma-token: the client's memory refused the transfer.";
        break;
    case -ETIMEDOUT:
        code = OL_S3_RequestTimeout;
        msg = "x-amz-rdma-token: the transfer did not complete in time.";
        break;
    case -EAGAIN:
        code = OL_S3_SlowDown;
        msg = "Too many RDMA transfers in flight; retry.";
        break;
    default:
        code = OL_S3_InternalError;
        msg = "The RDMA transfer failed.";
        break;
    }
    ol_log_limited(OL_LOG_INFO, "rdma: %s %s/%.*s: %s", r->http->head.method.n == 3 ? "GET" : "PUT",
                   r->bucket, (int)(r->key_len > 200 ? 200 : r->key_len), r->key ? r->key : "",
                   ol_strerror(rc));
    return ol_s3_error(r, code, msg);
}

static ssize_t put_src(void *ctx, void *buf, size_t len, uint64_t off)
{
    struct ol_s3_rdma *x = ctx;
    int rc = ol_rdma_move(x->engine, &x->tok, OL_RDMA_READ, off, buf, len, 0);
    if (rc < 0)
        return rc;
    x->moved += len;
    return (ssize_t)len;
}

int ol_s3_rdma_put_setup(struct ol_s3_req *r, int *sent)
{
    struct ol_s3_rdma *x;
    int rc = ol_s3_rdma_parse(r, &x, sent);
    if (rc <= 0)
        return rc;
    const struct ol_slice *dl = ol_s3_header(r, "x-amz-decoded-content-length");
    uint64_t v;
    if (r->http->chunked || r->http->content_length != 0) {
        free(x);
        *sent = ol_s3_error(r, OL_S3_InvalidRequest,
                            "A request with x-amz-rdma-token carries its body in the client's "
                            "memory: Content-Length must be 0.");
        return -1;
    }
    if (dl && (ol_http_parse_content_length(*dl, &v) != 0 || v != x->tok.len)) {
        free(x);
        *sent = ol_s3_error(r, OL_S3_InvalidArgument,
                            "x-amz-decoded-content-length differs from the x-amz-rdma-token "
                            "length.");
        return -1;
    }
    rc = ol_s3_body_set_source(r, (int64_t)x->tok.len, put_src, x, free);
    if (rc < 0) {
        *sent = ol_s3_error_from(r, rc);
        return -1;
    }
    return 1;
}

size_t ol_s3_rdma_reply_hdrs(int status, uint64_t bytes, char buf[64], struct ol_http_hdr *h)
{
    int n = snprintf(buf, 64, "%d", status);
    snprintf(buf + n + 1, (size_t)(64 - n - 1), "%" PRIu64, bytes);
    h[0] = (struct ol_http_hdr){OL_RDMA_REPLY_HEADER, buf};
    h[1] = (struct ol_http_hdr){OL_RDMA_BYTES_HEADER, buf + n + 1};
    return 2;
}
