/* Authentication of S3 requests (see auth.h). */
#include "s3/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "s3/sigv2.h"
#include "users/users.h"

static bool slice_eq(const struct ol_slice *s, const char *lit)
{
    size_t n = strlen(lit);
    return s && s->n == n && memcmp(s->p, lit, n) == 0;
}

static bool is_hex64(const struct ol_slice *s)
{
    if (!s || s->n != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        char c = s->p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

#define FAIL(c, m)                                                                                 \
    do {                                                                                           \
        *code = (c);                                                                               \
        *msg = (m);                                                                                \
        return -1;                                                                                 \
    } while (0)

/* The secret of access key ak (users/users.h: configuration and run-time
 * users); on success the key is copied for r->access_key. */
static int find_user(struct ol_s3_req *r, struct ol_slice ak, char secret[OL_USERS_KEY_MAX + 1],
                     enum ol_s3_code *code, const char **msg)
{
    int rc;
    if (r->ctx->users) {
        rc = ol_users_lookup(r->ctx->users, ak.p, ak.n, secret, NULL);
    } else {
        /* No users store (a router embedded without one: the fuzz harness):
         * the configuration's users alone. */
        const struct ol_cfg_user *u = ol_cfg_find_user(r->ctx->cfg, ak.p, ak.n);
        rc = u ? 0 : -ENOENT;
        if (u)
            snprintf(secret, OL_USERS_KEY_MAX + 1, "%s", u->secret_key);
    }
    if (rc == -EAGAIN)
        FAIL(OL_S3_ServiceUnavailable, "The users of this node are not known now; retry.");
    if (rc < 0 || ak.n >= sizeof(r->access_key_buf))
        FAIL(OL_S3_InvalidAccessKeyId,
             "The AWS Access Key Id you provided does not exist in our records.");
    memcpy(r->access_key_buf, ak.p, ak.n);
    r->access_key_buf[ak.n] = 0;
    return 0;
}

/* Copies at most 64 bytes of an attacker's value for an error message:
 * printable ASCII only, anything else as '?', since the message goes into
 * an XML document. */
static void quote_value(char out[68], struct ol_slice v)
{
    size_t n = v.n > 64 ? 64 : v.n, o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v.p[i];
        out[o++] = c >= 0x20 && c < 0x7f && c != '"' ? (char)c : '?';
    }
    if (v.n > n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* The message of a malformed-scope error, naming the part that is wrong as
 * S3 does; the code is AuthorizationHeaderMalformed for the header form and
 * AuthorizationQueryParametersError for presigned URLs. */
static const char *scope_message(const struct ol_sigv4_auth *auth)
{
    static __thread char m[320];
    char v[68];
    const char *pre = auth->presigned ? "Error parsing the X-Amz-Credential parameter; "
                                      : "The authorization header is malformed; ";
    quote_value(v, auth->bad_value);
    switch (auth->bad) {
    case OL_SIGV4_BAD_SCOPE_DATE:
        snprintf(m, sizeof(m),
                 "%sincorrect date format \"%s\". This date in the credential must be in the "
                 "format \"yyyyMMdd\".",
                 pre, v);
        break;
    case OL_SIGV4_BAD_DATE_MISMATCH:
        snprintf(m, sizeof(m),
                 "%sInvalid credential date \"%s\". This date is not the same as X-Amz-Date: "
                 "\"%.8s\".",
                 pre, v, auth->amz_date);
        break;
    case OL_SIGV4_BAD_SERVICE:
        snprintf(m, sizeof(m), "%sincorrect service \"%s\". This endpoint belongs to \"s3\".", pre,
                 v);
        break;
    case OL_SIGV4_BAD_TERMINATOR:
        snprintf(m, sizeof(m), "%sincorrect terminal \"%s\". This endpoint uses \"aws4_request\".",
                 pre, v);
        break;
    case OL_SIGV4_BAD_EXPIRES_NEGATIVE:
        return "X-Amz-Expires must be non-negative";
    case OL_SIGV4_BAD_EXPIRES_RANGE:
        return "X-Amz-Expires must be less than a week (in seconds); that is, the given "
               "X-Amz-Expires must be less than 604800 seconds";
    case OL_SIGV4_BAD_CREDENTIAL:
        snprintf(m, sizeof(m),
                 "%sthe Credential is mal-formed; expecting "
                 "\"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".",
                 pre);
        break;
    default:
        return auth->presigned ? "Query-string authentication parameters are missing or malformed."
                               : "The authorization header is malformed.";
    }
    return m;
}

bool ol_s3_hoisted_param(const char *name)
{
    /* The SigV4 query-authentication parameters are not headers. */
    static const char *const auth_params[] = {
        "x-amz-algorithm", "x-amz-credential", "x-amz-date",     "x-amz-expires",
        "x-amz-signedheaders", "x-amz-signature", "x-amz-security-token",
    };
    if (strncasecmp(name, "x-amz-", 6) != 0 || !name[6])
        return false;
    for (size_t i = 0; i < sizeof(auth_params) / sizeof(*auth_params); i++)
        if (strcasecmp(name, auth_params[i]) == 0)
            return false;
    return true;
}

/* Longest presigned lifetime, as SigV4's X-Amz-Expires allows: S3 sets no
 * limit for SigV2 URLs, but a URL that works for years is a credential that
 * cannot be revoked short of the key, so the same week applies to both. */
#define V2_MAX_EXPIRES_SEC 604800

/* Signature Version 2 (sigv2.h): the "AWS AKID:sig" header when authz is
 * set, else the AWSAccessKeyId/Expires/Signature query.  As strict as the
 * SigV4 path: every x-amz-* header (and x-amz-* query parameter, which the
 * router treats as a header) is in the string to sign, so none can be
 * added to a captured request; a repeated one is refused as in SigV4; a
 * signed payload hash is checked; aws-chunked bodies need SigV4. */
static int authenticate_v2(struct ol_s3_req *r, const struct ol_slice *authz,
                           enum ol_s3_code *code, const char **msg)
{
    const struct ol_cfg *cfg = r->ctx->cfg;
    const struct ol_http_request *h = &r->http->head;
    struct ol_slice akid, sig, date = {"", 0};
    char given[OL_SIGV2_SIG_LEN + 8];
    int64_t now = ol_wall_ns() / 1000000000;
    if (authz) {
        const char *p = authz->p + 4;
        size_t n = authz->n - 4;
        while (n && *p == ' ') {
            p++;
            n--;
        }
        const char *colon = memchr(p, ':', n);
        if (!colon || colon == p || colon + 1 == p + n)
            FAIL(OL_S3_InvalidArgument,
                 "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature");
        akid = (struct ol_slice){p, (size_t)(colon - p)};
        sig = (struct ol_slice){colon + 1, (size_t)(p + n - colon - 1)};
    } else {
        const struct ol_s3_param *ak = ol_s3_param(r, "AWSAccessKeyId");
        const struct ol_s3_param *sg = ol_s3_param(r, "Signature");
        const struct ol_s3_param *ex = ol_s3_param(r, "Expires");
        if (!ak || !sg || !ex || !ak->value_len || !sg->value_len || !ex->value_len)
            FAIL(OL_S3_AccessDenied, "Query-string authentication requires the Signature, "
                                     "Expires and AWSAccessKeyId parameters");
        if (sg->value_len >= sizeof(given))
            FAIL(OL_S3_SignatureDoesNotMatch, "The request signature we calculated does not "
                                              "match the signature you provided.");
        /* The router decodes a raw '+' in the query as a space; base64 has
         * no spaces, so a client that left its '+' unescaped means '+'. */
        for (size_t i = 0; i < sg->value_len; i++)
            given[i] = sg->value[i] == ' ' ? '+' : sg->value[i];
        akid = (struct ol_slice){ak->value, ak->value_len};
        sig = (struct ol_slice){given, sg->value_len};
        date = (struct ol_slice){ex->value, ex->value_len};
    }

    char secret[OL_USERS_KEY_MAX + 1];
    if (find_user(r, akid, secret, code, msg) < 0)
        return -1;

    if (authz) {
        /* x-amz-date takes precedence over Date, and then the Date line of
         * the string to sign is empty (S3's rule: the value is signed in
         * the amz headers). */
        const struct ol_slice *xd = ol_s3_header(r, "x-amz-date");
        const struct ol_slice *d = ol_s3_header(r, "date");
        char amz_date[17];
        int64_t t;
        if ((!xd && !d) || ol_sigv4_parse_date(xd ? *xd : *d, amz_date, &t) != 0)
            FAIL(OL_S3_AccessDenied, "AWS authentication requires a valid Date or x-amz-date "
                                     "header");
        if (now - t > cfg->clock_skew_sec || t - now > cfg->clock_skew_sec)
            FAIL(OL_S3_RequestTimeTooSkewed,
                 "The difference between the request time and the server's time is too large.");
        if (!xd)
            date = *d;
    } else {
        int64_t expires = 0;
        for (size_t i = 0; i < date.n; i++) {
            if (date.p[i] < '0' || date.p[i] > '9' || i >= 12)
                FAIL(OL_S3_AccessDenied, "Invalid date (should be seconds since epoch)");
            expires = expires * 10 + (date.p[i] - '0');
        }
        if (now > expires)
            FAIL(OL_S3_AccessDenied, "Request has expired");
        if (expires - now > V2_MAX_EXPIRES_SEC + cfg->clock_skew_sec)
            FAIL(OL_S3_AccessDenied, "Expires must be less than a week (604800 seconds) in the "
                                     "future");
    }

    /* A payload hash, when sent, is signed (an x-amz header) and checked. */
    const struct ol_slice *sha = ol_s3_header(r, "x-amz-content-sha256");
    bool hex = is_hex64(sha);
    if (sha && !hex && !slice_eq(sha, "UNSIGNED-PAYLOAD"))
        FAIL(OL_S3_InvalidRequest, "The authorization mechanism you have provided is not "
                                   "supported for this payload. Please use AWS4-HMAC-SHA256.");

    struct ol_sigv2_amz amz[OL_SIGV2_MAX_AMZ];
    size_t namz = 0, cap = h->target.n + sizeof(r->bucket) + 256;
    static __thread char hdr_msg[200];
    for (size_t i = 0; i < h->nheaders; i++) {
        struct ol_slice name = h->headers[i].name;
        cap += name.n + h->headers[i].value.n + 2;
        if (name.n < 6 || strncasecmp(name.p, "x-amz-", 6) != 0)
            continue;
        for (size_t k = 0; k < namz; k++) {
            if (amz[k].name.n == name.n && strncasecmp(amz[k].name.p, name.p, name.n) == 0) {
                /* The name is a token (the parser checked it). */
                snprintf(hdr_msg, sizeof(hdr_msg),
                         "The header '%.*s' appears more than once; a signed header must "
                         "appear once.",
                         (int)(name.n > 64 ? 64 : name.n), name.p);
                FAIL(OL_S3_InvalidArgument, hdr_msg);
            }
        }
        if (namz == OL_SIGV2_MAX_AMZ)
            FAIL(OL_S3_InvalidArgument, "Too many x-amz- headers.");
        amz[namz++] = (struct ol_sigv2_amz){name, h->headers[i].value};
    }
    size_t nreal = namz;
    for (size_t i = 0; i < r->nparams; i++) {
        const struct ol_s3_param *q = &r->params[i];
        if (!ol_s3_hoisted_param(q->name))
            continue;
        bool header = false;
        for (size_t k = 0; k < nreal && !header; k++)
            header = amz[k].name.n == strlen(q->name) &&
                     strncasecmp(amz[k].name.p, q->name, amz[k].name.n) == 0;
        if (header)
            continue; /* the router refuses a parameter that differs from its header */
        if (namz == OL_SIGV2_MAX_AMZ)
            FAIL(OL_S3_InvalidArgument, "Too many x-amz- headers.");
        amz[namz++] = (struct ol_sigv2_amz){{q->name, strlen(q->name)}, {q->value, q->value_len}};
    }

    const struct ol_slice *md5 = ol_s3_header(r, "content-md5");
    const struct ol_slice *type = ol_s3_header(r, "content-type");
    struct ol_sigv2_request sreq = {
        .method = h->method,
        .content_md5 = md5 ? *md5 : (struct ol_slice){"", 0},
        .content_type = type ? *type : (struct ol_slice){"", 0},
        .date = date,
        .amz = amz,
        .namz = namz,
        .bucket = r->virtual_host ? (struct ol_slice){r->bucket, strlen(r->bucket)}
                                  : (struct ol_slice){"", 0},
        .path = h->path,
        .query = h->query,
    };
    char *sts = malloc(cap);
    if (!sts)
        FAIL(OL_S3_InternalError, "out of memory");
    /* A path-style request for a bucket ("/b") is signed by botocore as
     * "/b/" (its auth_path), by others as sent: both name the same
     * resource, so both are accepted. */
    char bucket_path[sizeof(r->bucket) + 2];
    bool slash_too = !r->virtual_host && r->bucket[0] && !r->key && h->path.n &&
                     h->path.p[h->path.n - 1] != '/';
    int rc = 0;
    bool match = false;
    for (int pass = 0; pass < (slash_too ? 2 : 1) && rc == 0 && !match; pass++) {
        if (pass == 1) {
            snprintf(bucket_path, sizeof(bucket_path), "/%s/", r->bucket);
            sreq.path = (struct ol_slice){bucket_path, strlen(bucket_path)};
        }
        size_t sts_len = 0;
        char want[OL_SIGV2_SIG_LEN + 1];
        rc = ol_sigv2_string_to_sign(&sreq, sts, cap, &sts_len);
        if (rc == 0)
            rc = ol_sigv2_sign(secret, strlen(secret), sts, sts_len, want);
        match = rc == 0 && ol_sigv2_sig_equal(want, sig);
    }
    free(sts);
    if (rc == -EINVAL)
        FAIL(OL_S3_InvalidArgument, "Bad percent-encoding in a signed sub-resource.");
    if (rc < 0)
        FAIL(OL_S3_InternalError, "out of memory");
    if (!match)
        FAIL(OL_S3_SignatureDoesNotMatch, "The request signature we calculated does not match "
                                          "the signature you provided. Check your key and "
                                          "signing method.");
    if (hex) {
        char sha_hex[65];
        memcpy(sha_hex, sha->p, 64);
        sha_hex[64] = 0;
        if (ol_s3_body_setup(r, false, false, false, NULL, NULL, NULL, sha_hex) < 0)
            FAIL(OL_S3_InternalError, "out of memory");
    }
    r->access_key = r->access_key_buf;
    return 0;
}

int ol_s3_authenticate(struct ol_s3_req *r, enum ol_s3_code *code, const char **msg,
                       const char **not_signed)
{
    const struct ol_cfg *cfg = r->ctx->cfg;
    struct ol_sigv4_auth auth;
    memset(&auth, 0, sizeof(auth));
    *not_signed = NULL;
    const struct ol_slice *authz = ol_s3_header(r, "authorization");
    int rc;
    if (authz) {
        if (authz->n >= 4 && memcmp(authz->p, "AWS ", 4) == 0)
            return authenticate_v2(r, authz, code, msg);
        const struct ol_slice *date = ol_s3_header(r, "x-amz-date");
        if (!date)
            date = ol_s3_header(r, "date");
        if (!date)
            FAIL(OL_S3_AccessDenied, "AWS authentication requires a valid Date or x-amz-date header");
        rc = ol_sigv4_parse_header(*authz, *date, &auth);
        if (rc == OL_SIGV4_EUNSUPPORTED)
            FAIL(OL_S3_InvalidRequest, "The authorization mechanism you have provided is not "
                                       "supported. Please use AWS4-HMAC-SHA256.");
        if (rc != OL_SIGV4_OK)
            FAIL(OL_S3_AuthorizationHeaderMalformed, scope_message(&auth));
    } else {
        rc = ol_sigv4_parse_query(r->http->head.query, &auth);
        if (rc == 1 && (ol_s3_param(r, "Signature") || ol_s3_param(r, "AWSAccessKeyId")))
            return authenticate_v2(r, NULL, code, msg);
        if (rc == 1)
            FAIL(OL_S3_AccessDenied, "Access Denied");
        /* The parser leaves presigned unset on failure; the message needs it. */
        auth.presigned = true;
        if (rc != OL_SIGV4_OK)
            FAIL(OL_S3_AuthorizationQueryParametersError, scope_message(&auth));
    }

    /* The scope's region must be ours: a client configured for another
     * region gets told which one to use, as S3 does. */
    if (auth.region.n != strlen(cfg->region) ||
        memcmp(auth.region.p, cfg->region, auth.region.n) != 0) {
        static __thread char region_msg[256];
        char v[68];
        quote_value(v, auth.region);
        snprintf(region_msg, sizeof(region_msg), "%sthe region '%s' is wrong; expecting '%s'",
                 auth.presigned ? "Error parsing the X-Amz-Credential parameter; "
                                : "The authorization header is malformed; ",
                 v, cfg->region);
        FAIL(auth.presigned ? OL_S3_AuthorizationQueryParametersError
                            : OL_S3_AuthorizationHeaderMalformed,
             region_msg);
    }

    char secret[OL_USERS_KEY_MAX + 1];
    if (find_user(r, auth.access_key, secret, code, msg) < 0)
        return -1;

    int64_t now = ol_wall_ns() / 1000000000;
    if (auth.presigned) {
        if (auth.request_time > now + cfg->clock_skew_sec)
            FAIL(OL_S3_AccessDenied, "Request is not valid yet");
        /* X-Amz-Expires=0 is over as soon as it is signed. */
        if (auth.expires_sec == 0 || now > auth.request_time + auth.expires_sec)
            FAIL(OL_S3_AccessDenied, "Request has expired");
    } else {
        int64_t d = now - auth.request_time;
        if (d > cfg->clock_skew_sec || -d > cfg->clock_skew_sec)
            FAIL(OL_S3_RequestTimeTooSkewed,
                 "The difference between the request time and the server's time is too large.");
    }

    /* The payload hash that was signed decides how the body is read. */
    const struct ol_slice *sha = ol_s3_header(r, "x-amz-content-sha256");
    struct ol_slice unsigned_payload = {"UNSIGNED-PAYLOAD", 16};
    if (!sha) {
        if (!auth.presigned)
            FAIL(OL_S3_InvalidRequest,
                 "Missing required header for this request: x-amz-content-sha256");
        sha = &unsigned_payload;
    }
    bool streaming_signed = slice_eq(sha, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    bool streaming_signed_trailer = slice_eq(sha, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER");
    bool streaming_unsigned_trailer = slice_eq(sha, "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
    bool hex = is_hex64(sha);
    if (!hex && !streaming_signed && !streaming_signed_trailer && !streaming_unsigned_trailer &&
        !slice_eq(sha, "UNSIGNED-PAYLOAD"))
        FAIL(OL_S3_InvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                                    "STREAMING-..., or a SHA-256 hex digest");

    struct ol_sigv4_request sreq = {
        .method = r->http->head.method,
        .path = r->http->head.path,
        .query = r->http->head.query,
        .headers = r->http->head.headers,
        .nheaders = r->http->head.nheaders,
        .payload_hash = *sha,
    };
    /* The signature covers only the headers it names: an x-amz-* header
     * added to a presigned URL (x-amz-copy-source turns a PUT into a copy)
     * or to a captured request would otherwise be obeyed unsigned. */
    static __thread char names[256];
    static __thread char hdr_msg[400];
    rc = ol_sigv4_check_headers(&sreq, &auth, names, sizeof(names));
    if (rc == OL_SIGV4_EUNSIGNED) {
        *not_signed = names;
        FAIL(OL_S3_AccessDenied, "There were headers present in the request which were not signed");
    }
    if (rc == OL_SIGV4_EABSENT) {
        snprintf(hdr_msg, sizeof(hdr_msg),
                 "The header '%s' is named in SignedHeaders but is not in the request.", names);
        FAIL(OL_S3_AccessDenied, hdr_msg);
    }
    if (rc == OL_SIGV4_EREPEATED) {
        snprintf(hdr_msg, sizeof(hdr_msg),
                 "The signed header '%s' appears more than once; a signed header must appear "
                 "once.",
                 names);
        FAIL(OL_S3_InvalidArgument, hdr_msg);
    }
    char seed[65];
    if (rc == OL_SIGV4_OK)
        rc = ol_sigv4_verify(&sreq, &auth, secret, strlen(secret), seed);
    if (rc == OL_SIGV4_EMALFORMED)
        FAIL(auth.presigned ? OL_S3_AuthorizationQueryParametersError
                            : OL_S3_AuthorizationHeaderMalformed,
             scope_message(&auth));
    if (rc != OL_SIGV4_OK)
        FAIL(OL_S3_SignatureDoesNotMatch, "The request signature we calculated does not match "
                                          "the signature you provided. Check your key and "
                                          "signing method.");
    r->access_key = r->access_key_buf;

    bool aws_chunked = streaming_signed || streaming_signed_trailer || streaming_unsigned_trailer;
    if (aws_chunked || hex) {
        char sha_hex[65];
        if (hex) {
            memcpy(sha_hex, sha->p, 64);
            sha_hex[64] = 0;
        }
        rc = ol_s3_body_setup(r, aws_chunked, streaming_signed || streaming_signed_trailer,
                              streaming_signed_trailer || streaming_unsigned_trailer, &auth,
                              secret, seed, hex ? sha_hex : NULL);
        if (rc < 0)
            FAIL(OL_S3_InternalError, "out of memory");
    }
    return 0;
}
