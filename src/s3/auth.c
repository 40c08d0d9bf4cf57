/* Authentication of S3 requests (see auth.h). */
#include "s3/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/cfg.h"
#include "core/clock.h"

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
            FAIL(OL_S3_InvalidRequest, "The authorization mechanism you have provided is not "
                                       "supported. Please use AWS4-HMAC-SHA256.");
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

    const struct ol_cfg_user *user = ol_cfg_find_user(cfg, auth.access_key.p, auth.access_key.n);
    if (!user)
        FAIL(OL_S3_InvalidAccessKeyId,
             "The AWS Access Key Id you provided does not exist in our records.");

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
        rc = ol_sigv4_verify(&sreq, &auth, user->secret_key, strlen(user->secret_key), seed);
    if (rc == OL_SIGV4_EMALFORMED)
        FAIL(auth.presigned ? OL_S3_AuthorizationQueryParametersError
                            : OL_S3_AuthorizationHeaderMalformed,
             scope_message(&auth));
    if (rc != OL_SIGV4_OK)
        FAIL(OL_S3_SignatureDoesNotMatch, "The request signature we calculated does not match "
                                          "the signature you provided. Check your key and "
                                          "signing method.");
    r->access_key = user->access_key;

    bool aws_chunked = streaming_signed || streaming_signed_trailer || streaming_unsigned_trailer;
    if (aws_chunked || hex) {
        char sha_hex[65];
        if (hex) {
            memcpy(sha_hex, sha->p, 64);
            sha_hex[64] = 0;
        }
        rc = ol_s3_body_setup(r, aws_chunked, streaming_signed || streaming_signed_trailer,
                              streaming_signed_trailer || streaming_unsigned_trailer, &auth,
                              user->secret_key, seed, hex ? sha_hex : NULL);
        if (rc < 0)
            FAIL(OL_S3_InternalError, "out of memory");
    }
    return 0;
}
