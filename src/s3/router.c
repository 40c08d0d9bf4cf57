/* From an HTTP request to one S3 handler.
 *
 * ol_s3_handle() is the HTTP handler of the S3 listener: it finds the bucket
 * and key (path-style, or virtual-hosted when a domain is configured),
 * decodes the query, authenticates (auth.c), picks the operation from the
 * method, the presence of bucket and key, and the sub-resource parameters,
 * and calls its handler.  It only dispatches: the helpers every handler
 * uses (parameters, headers, responses, error documents, body reading) are
 * request.c's.
 */
#include "s3/router.h"
#include "s3/sse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "s3/auth.h"
#include "access/access.h"
#include "access/ratelimit.h"
#include "s3/authz.h"
#include "obj/obj.h"
#include "s3/s3.h"
#include "s3/sigv4.h"
#include "users/users.h"
/* ---- parsing the request ---- */

/* Percent-decodes into out and NUL-terminates; '+' stays '+' in paths and
 * becomes ' ' in queries (form encoding, which some clients use for query
 * values; the SigV4 canonical query decodes it the same way, so a signed
 * "a%2Bb" cannot be turned into "a+b").  out has room for n + 1 bytes. */
static ssize_t pct_decode(const char *s, size_t n, char *out, bool plus_is_space)
{
    ssize_t o = ol_pct_decode(s, n, out, n, plus_is_space);
    if (o >= 0)
        out[o] = 0;
    return o;
}

static int parse_query(struct ol_s3_req *r, char *scratch, size_t cap)
{
    struct ol_slice q = r->http->head.query;
    size_t used = 0;
    const char *p = q.p, *end = q.p + q.n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if (e > p) {
            if (r->nparams >= OL_S3_MAX_PARAMS)
                return -E2BIG;
            const char *eq = memchr(p, '=', (size_t)(e - p));
            const char *ne = eq ? eq : e;
            size_t need = (size_t)(e - p) + 2;
            if (used + need > cap)
                return -E2BIG;
            struct ol_s3_param *prm = &r->params[r->nparams];
            prm->name = scratch + used;
            ssize_t nl = pct_decode(p, (size_t)(ne - p), prm->name, true);
            /* Names are compared as C strings: "prefix%00x" must not pass
             * for prefix. */
            if (nl < 0 || memchr(prm->name, 0, (size_t)nl) != NULL)
                return -EINVAL;
            /* A repeated parameter is refused: the signature covers every
             * copy (sorted, so their order is not signed) while handlers
             * read the first, so reordering copies would change the meaning
             * of a signed request. */
            for (size_t k = 0; k < r->nparams; k++)
                if (strcmp(r->params[k].name, prm->name) == 0)
                    return -EINVAL;
            used += (size_t)nl + 1;
            prm->value = scratch + used;
            ssize_t vl = eq ? pct_decode(eq + 1, (size_t)(e - eq - 1), prm->value, true) : 0;
            if (vl < 0)
                return -EINVAL;
            if (!eq)
                prm->value[0] = 0;
            prm->value_len = (size_t)vl;
            used += (size_t)vl + 1;
            r->nparams++;
        }
        p = e + 1;
    }
    return 0;
}

/* Bucket from a virtual-hosted Host header ("bucket.domain[:port]"). */
static bool host_bucket(const struct ol_s3_req *r, const char *domain, char out[64])
{
    const struct ol_slice *host = ol_s3_header(r, "host");
    if (!host || !domain[0])
        return false;
    size_t hn = host->n;
    const char *colon = memrchr(host->p, ':', hn);
    if (colon && !memchr(host->p, ']', hn))
        hn = (size_t)(colon - host->p);
    size_t dl = strlen(domain);
    if (hn <= dl + 1 || host->p[hn - dl - 1] != '.' ||
        strncasecmp(host->p + hn - dl, domain, dl) != 0)
        return false;
    size_t bl = hn - dl - 1;
    if (bl >= 64)
        return false;
    memcpy(out, host->p, bl);
    out[bl] = 0;
    return true;
}

/* Every query parameter this server understands.  Anything else names an S3
 * feature (a sub-resource such as ?acl or ?metadataTable, or a new argument)
 * that is not implemented: it gets NotImplemented, never a plain GET, PUT or
 * DELETE that would do something else (a DELETE ?metadataTable must not
 * delete the bucket). */
static const char *const known_params[] = {
    /* sub-resources */
    "location", "uploads", "uploadId", "partNumber", "versionId", "delete", "tagging",
    "versioning", "versions", "cors", "lifecycle", "attributes", "acl", "policy",
    "ownershipControls", "encryption",
    /* listing arguments */
    "list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after",
    "encoding-type", "fetch-owner", "marker", "key-marker", "upload-id-marker", "max-uploads",
    "version-id-marker", "part-number-marker", "max-parts", "max-buckets", "bucket-region",
    /* GetObject response overrides */
    "response-content-type", "response-content-language", "response-expires",
    "response-cache-control", "response-content-disposition", "response-content-encoding",
    /* botocore's operation hint (?x-id=PutObject) */
    "x-id",
};

/* Request headers that ask for features this server does not have.  Ignoring
 * them would be a wrong success (an object meant to be encrypted or locked
 * stored as a plain one). */
static const char *const unsupported_headers[] = {
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-object-lock-mode",
    "x-amz-object-lock-retain-until-date",
    "x-amz-object-lock-legal-hold",
    "x-amz-write-offset-bytes",
    "x-amz-website-redirect-location",
};

static const char *unknown_param(const struct ol_s3_req *r)
{
    for (size_t i = 0; i < r->nparams; i++) {
        const char *n = r->params[i].name;
        if (strncmp(n, "X-Amz-", 6) == 0) /* presigned-URL authentication */
            continue;
        if (ol_s3_hoisted_param(n)) /* a header (hoist_params) */
            continue;
        /* SigV2 presigned-URL authentication (auth.c) */
        if (strcmp(n, "AWSAccessKeyId") == 0 || strcmp(n, "Signature") == 0 ||
            strcmp(n, "Expires") == 0)
            continue;
        bool known = false;
        for (size_t k = 0; !known && k < sizeof(known_params) / sizeof(*known_params); k++)
            known = strcmp(n, known_params[k]) == 0;
        if (!known)
            return n;
    }
    return NULL;
}

/* 0 when the request asks for nothing unsupported; else the error was sent. */
static int refuse_unsupported(struct ol_s3_req *r, bool *refused)
{
    static __thread char msg[200];
    *refused = true;
    const char *p = unknown_param(r);
    if (p) {
        snprintf(msg, sizeof(msg), "The query parameter '%.64s' is not implemented by OpenLake.",
                 p);
        return ol_s3_error(r, OL_S3_NotImplemented, msg);
    }
    for (size_t i = 0; i < sizeof(unsupported_headers) / sizeof(*unsupported_headers); i++) {
        if (ol_s3_header(r, unsupported_headers[i])) {
            snprintf(msg, sizeof(msg), "The header '%s' is not implemented by OpenLake.",
                     unsupported_headers[i]);
            return ol_s3_error(r, OL_S3_NotImplemented, msg);
        }
    }
    const struct ol_slice *lock = ol_s3_header(r, "x-amz-bucket-object-lock-enabled");
    if (lock && !(lock->n == 5 && strncasecmp(lock->p, "false", 5) == 0))
        return ol_s3_error(r, OL_S3_NotImplemented, "Object lock is not implemented by OpenLake.");
    const struct ol_slice *sc = ol_s3_header(r, "x-amz-storage-class");
    if (sc && !(sc->n == 8 && memcmp(sc->p, "STANDARD", 8) == 0))
        return ol_s3_error(r, OL_S3_NotImplemented,
                           "Only the STANDARD storage class is implemented by OpenLake.");
    *refused = false;
    return 0;
}

/* Treats the x-amz-* query parameters as the headers they stand for (a
 * presigner may move any x-amz-* header into the URL, where the signature
 * covers it as a parameter): after authentication, which must see the
 * request as signed, they are added to the request's header list, so every
 * handler reads them as headers.  A header of the same name wins, and must
 * then say the same: two values, one signed as a header and one as a
 * parameter, would leave the meaning to whichever a handler read.  The new
 * list lives in *owned (the caller frees it; the request's own list is put
 * back by the caller).  0, or the error was sent (*refused). */
static int hoist_params(struct ol_s3_req *r, struct ol_http_header **owned, bool *refused)
{
    struct ol_http_request *h = &r->http->head;
    size_t extra = 0;
    *refused = false;
    for (size_t i = 0; i < r->nparams; i++) {
        const struct ol_s3_param *q = &r->params[i];
        if (!ol_s3_hoisted_param(q->name))
            continue;
        const struct ol_slice *v = ol_s3_header(r, q->name);
        if (!v) {
            extra++;
        } else if (v->n != q->value_len || memcmp(v->p, q->value, v->n) != 0) {
            static __thread char msg[200];
            snprintf(msg, sizeof(msg),
                     "The query parameter '%.64s' and the header of that name disagree.",
                     q->name);
            *refused = true;
            return ol_s3_error(r, OL_S3_InvalidArgument, msg);
        }
    }
    if (!extra)
        return 0;
    struct ol_http_header *hs = malloc((h->nheaders + extra) * sizeof(*hs));
    if (!hs) {
        *refused = true;
        return ol_s3_error(r, OL_S3_InternalError, "out of memory");
    }
    memcpy(hs, h->headers, h->nheaders * sizeof(*hs));
    size_t n = h->nheaders;
    for (size_t i = 0; i < r->nparams; i++) {
        const struct ol_s3_param *q = &r->params[i];
        if (ol_s3_hoisted_param(q->name) && !ol_http_find_header(h, q->name))
            hs[n++] = (struct ol_http_header){{q->name, strlen(q->name)},
                                              {q->value, q->value_len}};
    }
    OL_ASSERT(n == h->nheaders + extra);
    *owned = hs;
    h->headers = hs;
    h->nheaders = n;
    return 0;
}

/* No Authorization header and no presigned-URL parameters (SigV4's
 * X-Amz-Algorithm..., SigV2's Signature/AWSAccessKeyId): auth.c would
 * answer AccessDenied for want of credentials. */
static bool anonymous_request(struct ol_s3_req *r)
{
    if (ol_s3_header(r, "authorization"))
        return false;
    struct ol_sigv4_auth a;
    memset(&a, 0, sizeof(a));
    return ol_sigv4_parse_query(r->http->head.query, &a) == 1 && !ol_s3_param(r, "Signature") &&
           !ol_s3_param(r, "AWSAccessKeyId");
}

static int not_allowed(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_MethodNotAllowed,
                       "The specified method is not allowed against this resource.");
}

/* The sub-resources are tested in an order that s3/authz.c's action_of
 * repeats: change both together. */
static int dispatch_bucket(struct ol_s3_req *r, bool get, bool head, bool put, bool del,
                           bool post)
{
    if (ol_s3_has_param(r, "versioning"))
        return get ? ol_s3_get_bucket_versioning(r)
                   : put ? ol_s3_put_bucket_versioning(r) : not_allowed(r);
    if (ol_s3_has_param(r, "versions"))
        return get ? ol_s3_list_object_versions(r) : not_allowed(r);
    if (ol_s3_has_param(r, "cors"))
        return get ? ol_s3_get_bucket_cors(r)
                   : put ? ol_s3_put_bucket_cors(r) : del ? ol_s3_delete_bucket_cors(r)
                                                          : not_allowed(r);
    if (ol_s3_has_param(r, "lifecycle"))
        return get ? ol_s3_get_bucket_lifecycle(r)
                   : put ? ol_s3_put_bucket_lifecycle(r)
                         : del ? ol_s3_delete_bucket_lifecycle(r) : not_allowed(r);
    if (ol_s3_has_param(r, "policy"))
        return get ? ol_s3_get_bucket_policy(r)
                   : put ? ol_s3_put_bucket_policy(r)
                         : del ? ol_s3_delete_bucket_policy(r) : not_allowed(r);
    if (ol_s3_has_param(r, "acl"))
        return get ? ol_s3_get_bucket_acl(r) : put ? ol_s3_put_bucket_acl(r) : not_allowed(r);
    if (ol_s3_has_param(r, "ownershipControls"))
        return get ? ol_s3_get_bucket_ownership(r)
                   : put ? ol_s3_put_bucket_ownership(r)
                         : del ? ol_s3_delete_bucket_ownership(r) : not_allowed(r);
    if (ol_s3_has_param(r, "encryption"))
        return get ? ol_s3_get_bucket_encryption(r)
                   : put ? ol_s3_put_bucket_encryption(r)
                         : del ? ol_s3_delete_bucket_encryption(r) : not_allowed(r);
    if (ol_s3_has_param(r, "tagging"))
        return get ? ol_s3_get_bucket_tagging(r)
                   : put ? ol_s3_put_bucket_tagging(r)
                         : del ? ol_s3_delete_bucket_tagging(r) : not_allowed(r);
    /* An object's sub-resource: never a plain bucket operation. */
    if (ol_s3_has_param(r, "attributes"))
        return not_allowed(r);
    if (post && ol_s3_has_param(r, "delete"))
        return ol_s3_delete_objects(r);
    if (put)
        return ol_s3_create_bucket(r);
    if (head)
        return ol_s3_head_bucket(r);
    if (del)
        return ol_s3_delete_bucket(r);
    if (get && ol_s3_has_param(r, "location"))
        return ol_s3_get_bucket_location(r);
    if (get && ol_s3_has_param(r, "uploads"))
        return ol_s3_list_uploads(r);
    if (get)
        return ol_s3_list_objects(r);
    return not_allowed(r);
}

static int dispatch_object(struct ol_s3_req *r, bool get, bool head, bool put, bool del,
                           bool post)
{
    if (ol_s3_has_param(r, "tagging"))
        return get ? ol_s3_get_object_tagging(r)
                   : put ? ol_s3_put_object_tagging(r)
                         : del ? ol_s3_delete_object_tagging(r) : not_allowed(r);
    if (ol_s3_has_param(r, "attributes"))
        return get ? ol_s3_get_object_attributes(r) : not_allowed(r);
    if (ol_s3_has_param(r, "acl"))
        return get ? ol_s3_get_object_acl(r) : put ? ol_s3_put_object_acl(r) : not_allowed(r);
    bool upload = ol_s3_has_param(r, "uploadId");
    if (put) {
        bool copy = ol_s3_header(r, "x-amz-copy-source") != NULL;
        if (upload || ol_s3_has_param(r, "partNumber"))
            return copy ? ol_s3_upload_part_copy(r) : ol_s3_upload_part(r);
        return copy ? ol_s3_copy_object(r) : ol_s3_put_object(r);
    }
    if (get && upload)
        return ol_s3_list_parts(r);
    if (get || head)
        return ol_s3_get_object(r);
    if (del)
        return upload ? ol_s3_abort_multipart(r) : ol_s3_delete_object(r);
    if (post && ol_s3_has_param(r, "uploads"))
        return ol_s3_create_multipart(r);
    if (post && upload)
        return ol_s3_complete_multipart(r);
    return not_allowed(r);
}

static int dispatch(struct ol_s3_req *r)
{
    struct ol_slice m = r->http->head.method;
#define IS(lit) (m.n == sizeof(lit) - 1 && memcmp(m.p, lit, m.n) == 0)
    bool get = IS("GET"), head = IS("HEAD"), put = IS("PUT"), del = IS("DELETE"), post = IS("POST");
#undef IS
    bool refused;
    int rc = refuse_unsupported(r, &refused);
    if (refused)
        return rc;
    /* Who may do this (s3/authz.c, access/access.h): before any handler. */
    rc = ol_s3_authorize(r, &refused);
    if (refused)
        return rc;
    if (!r->bucket[0]) {
        /* The bucket sub-resources name no operation on the service. */
        if ((get || head) && !ol_s3_has_param(r, "acl") && !ol_s3_has_param(r, "policy") &&
            !ol_s3_has_param(r, "ownershipControls"))
            return ol_s3_list_buckets(r);
        return not_allowed(r);
    }
    if (!r->key)
        return dispatch_bucket(r, get, head, put, del, post);
    return dispatch_object(r, get, head, put, del, post);
}

static void make_request_id(char out[24])
{
    static __thread uint64_t seq;
    static __thread uint32_t salt;
    if (!salt) {
        struct ol_loop *l = ol_loop_current();
        salt = (uint32_t)(ol_wall_ns() / 1000) ^ ((l ? ol_loop_id(l) + 1 : 0) << 24);
    }
    snprintf(out, 24, "%08" PRIX32 "%08" PRIX64, salt, ++seq);
}

static int admin_route(struct ol_s3_req *r, struct ol_server_hooks *hooks, bool authed)
{
    struct ol_slice p = r->http->head.path;
    bool health = p.n == 17 && memcmp(p.p, "/_openlake/health", 17) == 0;
    bool metrics = p.n == 18 && memcmp(p.p, "/_openlake/metrics", 18) == 0;
    /* Where the native client port is (libopenlake asks before it connects;
     * public, as the S3 port itself is: it tells no more than a port scan). */
    if (p.n == 17 && memcmp(p.p, "/_openlake/native", 17) == 0) {
        if (!r->ctx->native_port)
            return ol_s3_error(r, OL_S3_NotImplemented, "The native client port is off.");
        /* "port" is lane 0's (what older clients read), "ports" every
         * lane's, lane 0 first (native/server.h). */
        char body[256];
        int n = snprintf(body, sizeof(body), "{\"protocol\":1,\"port\":%u,\"ports\":[",
                         (unsigned)r->ctx->native_port);
        for (unsigned i = 0; i < r->ctx->native_lanes && i < 16; i++)
            n += snprintf(body + n, sizeof(body) - (size_t)n, "%s%u", i ? "," : "",
                          (unsigned)r->ctx->native_lane_ports[i]);
        n += snprintf(body + n, sizeof(body) - (size_t)n, "]}\n");
        struct ol_http_hdr h[] = {{"Content-Type", "application/json"}};
        return ol_http_respond(r->conn, 200, h, 1, body, (size_t)n);
    }
    /* Run-time users (users/users.h): every mode, admins only. */
    if (p.n >= 22 && memcmp(p.p, "/_openlake/admin/users", 22) == 0 &&
        (p.n == 22 || p.p[22] == '/'))
        return authed && ol_users_is_admin(r->ctx->users, r->access_key)
                   ? ol_s3_admin_users(r)
                   : ol_s3_error(r, OL_S3_AccessDenied, "Access Denied");
    /* The drive administration API is the admins' where admin_users names
     * any (access/access.h), else every configuration user's (never a
     * run-time user's: users/users.h). */
    if (ol_obj_deploy(r->ctx->obj) && p.n > 17 && memcmp(p.p, "/_openlake/admin/", 17) == 0)
        return authed && (r->ctx->cfg->admin_users[0]
                              ? ol_access_is_admin(r->ctx->cfg, r->access_key)
                              : ol_cfg_find_user(r->ctx->cfg, r->access_key,
                                                 strlen(r->access_key)) != NULL)
                   ? ol_s3_admin(r)
                   : ol_s3_error(r, OL_S3_AccessDenied, "Access Denied");
    if (!health && !metrics)
        return ol_s3_error(r, OL_S3_InvalidRequest, "Unknown administrative path.");
    bool pub = health ? r->ctx->cfg->health_public : r->ctx->cfg->metrics_public;
    if (!pub && !authed)
        return ol_s3_error(r, OL_S3_AccessDenied, "Access Denied");
    if (health) {
        struct ol_http_hdr h[] = {{"Content-Type", "text/plain"}};
        return ol_http_respond(r->conn, 200, h, 1, "ok\n", 3);
    }
    char *text = NULL;
    size_t len = 0;
    if (hooks && hooks->metrics)
        hooks->metrics(hooks->ctx, &text, &len);
    struct ol_http_hdr h[] = {{"Content-Type", "text/plain; version=0.0.4"}};
    int rc = ol_http_respond(r->conn, 200, h, 1, text ? text : "", text ? len : 0);
    free(text);
    return rc;
}

int ol_s3_handle(void *vctx, struct ol_http_conn *c, struct ol_http_req *http)
{
    struct ol_s3_router *rt = vctx;
    struct ol_s3_req *r = calloc(1, sizeof(*r));
    /* Decoded path and query fit in twice the raw target plus terminators. */
    size_t scratch_cap = http->head.target.n * 2 + 2 * OL_S3_MAX_PARAMS + 16;
    char *scratch = malloc(scratch_cap);
    struct ol_http_header *hoisted = NULL, *orig_headers = NULL;
    size_t orig_nheaders = 0;
    int rc = 0;
    if (!r || !scratch) {
        ol_http_set_close(c);
        rc = ol_http_respond(c, 503, NULL, 0, NULL, 0);
        goto out;
    }
    r->ctx = &rt->ctx;
    r->conn = c;
    r->http = http;
    r->now_ns = ol_wall_ns();
    make_request_id(r->request_id);
    ol_router_count(rt, http);

    /* Path: "/bucket/key..." (or "/key..." when the Host names the bucket). */
    struct ol_slice path = http->head.path;
    if (path.n == 0 || path.p[0] != '/') {
        rc = ol_s3_error(r, OL_S3_InvalidRequest, "The request path must start with '/'.");
        goto out;
    }
    size_t used = 0;
    char *dec = scratch;
    ssize_t dl = pct_decode(path.p, path.n, dec, false);
    if (dl < 0) {
        rc = ol_s3_error(r, OL_S3_InvalidRequest, "Bad percent-encoding in the path.");
        goto out;
    }
    used = (size_t)dl + 1;
    if (parse_query(r, scratch + used, scratch_cap - used) != 0) {
        rc = ol_s3_error(r, OL_S3_InvalidArgument, "Malformed or too many query parameters.");
        goto out;
    }

    bool admin = path.n >= 11 && memcmp(path.p, "/_openlake/", 11) == 0;
    const char *rest = dec + 1;
    if (!admin && host_bucket(r, rt->ctx.cfg->domain, r->bucket)) {
        r->virtual_host = true;
        if (*rest) {
            r->key = (char *)rest;
            r->key_len = (size_t)dl - 1;
        }
    } else if (!admin && *rest) {
        const char *slash = strchr(rest, '/');
        size_t bl = slash ? (size_t)(slash - rest) : strlen(rest);
        if (bl >= sizeof(r->bucket)) {
            rc = ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
            goto out;
        }
        memcpy(r->bucket, rest, bl);
        r->bucket[bl] = 0;
        if (slash && slash[1]) {
            r->key = (char *)slash + 1;
            r->key_len = (size_t)dl - 1 - bl - 1;
        }
    }
    /* A name that starts with '.' is never an S3 bucket: such buckets are
     * the server's own (users/users.h, OL_USERS_BUCKET). */
    if (r->bucket[0] == '.') {
        rc = ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
        goto out;
    }
    if (r->key && memchr(r->key, 0, r->key_len)) {
        rc = ol_s3_error(r, OL_S3_InvalidArgument, "Object keys cannot contain NUL.");
        goto out;
    }
    /* Object keys are UTF-8 in S3: a key that is not (a stray %FF) could not
     * be listed in a UTF-8 XML document.  Amazon S3 answers 400 InvalidURI. */
    if (r->key && !ol_utf8_valid(r->key, r->key_len)) {
        rc = ol_s3_error(r, OL_S3_InvalidURI, "Couldn't parse the specified URI.");
        goto out;
    }

    /* CORS preflight requests carry no credentials by design (browsers send
     * them before the real request): cors.c answers them from the bucket's
     * CORS configuration alone. */
    if (!admin && http->head.method.n == 7 && memcmp(http->head.method.p, "OPTIONS", 7) == 0) {
        rc = ol_s3_cors_preflight(r);
        goto out;
    }
    enum ol_s3_code code;
    const char *msg = NULL, *not_signed = NULL;
    /* A request with no credentials at all is anonymous: it goes on with
     * no user, and only a bucket policy or ACL can let it through
     * (ol_s3_authorize).  Credentials that do not verify are refused here. */
    bool anonymous = anonymous_request(r);
    int arc = anonymous ? 0 : ol_s3_authenticate(r, &code, &msg, &not_signed);
    if (admin) {
        rc = admin_route(r, &rt->hooks, arc == 0 && !anonymous);
        goto out;
    }
    if (arc != 0) {
        rc = ol_s3_error_elem(r, code, msg, "HeadersNotSigned", not_signed);
        goto out;
    }
    /* The user's limits (access/ratelimit.h), once it is known who asks:
     * over the request rate, 503 SlowDown as Amazon S3 answers it; the
     * bandwidth limit paces the body (request.c, object.c). */
    if (rt->ctx.rl) {
        struct ol_rl_user *u = ol_rl_user_get(rt->ctx.rl, r->access_key);
        if (!ol_rl_request(rt->ctx.rl, u, OL_RL_S3)) {
            rc = ol_s3_error(r, OL_S3_SlowDown, "Please reduce your request rate.");
            goto out;
        }
        r->rl_user = u;
    }
    if (r->key && r->key_len > 1024) {
        rc = ol_s3_error(r, OL_S3_KeyTooLongError, "Your key is too long.");
        goto out;
    }
    bool refused;
    orig_headers = http->head.headers;
    orig_nheaders = http->head.nheaders;
    rc = hoist_params(r, &hoisted, &refused);
    if (!refused)
        rc = dispatch(r);
out:
    if (hoisted) {
        http->head.headers = orig_headers;
        http->head.nheaders = orig_nheaders;
        free(hoisted);
    }
    if (r)
        ol_s3_body_free(r);
    free(scratch);
    free(r);
    return rc;
}

void ol_router_count(struct ol_s3_router *rt, const struct ol_http_req *req)
{
    struct ol_loop *l = ol_loop_current();
    unsigned id = l ? ol_loop_id(l) : 0;
    if (id >= OL_ROUTER_MAX_LOOPS)
        return;
    struct ol_slice m = req->head.method;
    int k = OL_M_OTHER;
    if (m.n == 3 && !memcmp(m.p, "GET", 3))
        k = OL_M_GET;
    else if (m.n == 4 && !memcmp(m.p, "HEAD", 4))
        k = OL_M_HEAD;
    else if (m.n == 3 && !memcmp(m.p, "PUT", 3))
        k = OL_M_PUT;
    else if (m.n == 6 && !memcmp(m.p, "DELETE", 6))
        k = OL_M_DELETE;
    else if (m.n == 4 && !memcmp(m.p, "POST", 4))
        k = OL_M_POST;
    __atomic_fetch_add(&rt->requests[id][k], 1, __ATOMIC_RELAXED);
}
