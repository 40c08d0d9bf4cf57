/* AWS Signature Version 4: parsing, canonicalisation, signing, verification.
 *
 * Pure functions over slices: no I/O, no clock (the caller passes "now"), no
 * user lookup (the caller passes the secret).  auth.c puts these together
 * with the configured users and maps failures to S3 error codes.
 */
#ifndef OL_S3_SIGV4_H
#define OL_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/parser.h"

enum ol_sigv4_result {
    OL_SIGV4_OK = 0,
    OL_SIGV4_EMALFORMED = -1,     /* AuthorizationHeaderMalformed / AuthorizationQueryParametersError (400) */
    OL_SIGV4_EMISMATCH = -2,      /* SignatureDoesNotMatch (403) */
    OL_SIGV4_EEXPIRED = -3,       /* presigned URL expired: AccessDenied "Request has expired" (403) */
    OL_SIGV4_ESKEW = -4,          /* RequestTimeTooSkewed (403) */
    OL_SIGV4_EUNSUPPORTED = -5,   /* algorithm other than AWS4-HMAC-SHA256 (400) */
    OL_SIGV4_EPAYLOAD = -6,       /* XAmzContentSHA256Mismatch (400) */
    OL_SIGV4_ECHUNK = -7,         /* aws-chunked framing broken: IncompleteBody / malformed (400) */
    OL_SIGV4_EUNSIGNED = -8,      /* an x-amz-* (or host) header not signed: AccessDenied (403) */
    OL_SIGV4_EABSENT = -9,        /* a header named in SignedHeaders is not in the request (403) */
    OL_SIGV4_EREPEATED = -10,     /* a signed header appears more than once (400) */
};

/* The part of the signing information a parser refused, so that the error
 * message can name it as S3's does (auth.c). */
enum ol_sigv4_bad {
    OL_SIGV4_BAD_NONE = 0,
    OL_SIGV4_BAD_CREDENTIAL,    /* not "AK/date/region/service/terminator" */
    OL_SIGV4_BAD_SCOPE_DATE,    /* the scope's date is not yyyymmdd */
    OL_SIGV4_BAD_DATE_MISMATCH, /* the scope's date is not the date of X-Amz-Date */
    OL_SIGV4_BAD_SERVICE,       /* the scope's service is not "s3" */
    OL_SIGV4_BAD_TERMINATOR,    /* the scope does not end with "aws4_request" */
    OL_SIGV4_BAD_EXPIRES_NEGATIVE, /* X-Amz-Expires below 0 */
    OL_SIGV4_BAD_EXPIRES_RANGE,    /* X-Amz-Expires above 604800 (a week) */
};

/* The credential and signature parts of a request, from either the
 * Authorization header or presigned query parameters.  Slices point into the
 * request buffer. */
struct ol_sigv4_auth {
    struct ol_slice access_key;
    struct ol_slice date;           /* yyyymmdd from the credential scope */
    struct ol_slice region;
    struct ol_slice service;        /* "s3" */
    struct ol_slice signed_headers; /* "host;x-amz-date", lowercase, ';'-separated; in
                                     * the presigned form it is the raw query value, so the
                                     * separator may also be "%3B" (both are accepted) */
    struct ol_slice signature;      /* 64 hex */
    char amz_date[17];              /* yyyymmddTHHMMSSZ, NUL-terminated */
    int64_t request_time;           /* amz_date as Unix seconds */
    bool presigned;
    int64_t expires_sec;            /* X-Amz-Expires (presigned only), 0..604800 */
    /* Set by the parsers when they return OL_SIGV4_EMALFORMED because of one
     * part of the credential scope: which part, and its raw text (a slice of
     * the request, for the message); OL_SIGV4_BAD_NONE otherwise. */
    enum ol_sigv4_bad bad;
    struct ol_slice bad_value;
};

/* Parses "AWS4-HMAC-SHA256 Credential=AK/yyyymmdd/region/s3/aws4_request,
 * SignedHeaders=...,Signature=..." (whitespace after commas tolerated).
 * amz_date comes from the request's x-amz-date (or Date) header, which the
 * caller passes.  Every part of the scope is checked but the region (which
 * the caller compares with its own): the date must be 8 digits and the date
 * of amz_date, the service "s3", the terminator "aws4_request"; a failure
 * there sets out->bad. */
int ol_sigv4_parse_header(struct ol_slice authorization, struct ol_slice amz_date,
                          struct ol_sigv4_auth *out);
/* Parses X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
 * X-Amz-SignedHeaders, X-Amz-Signature from a raw (percent-encoded) query.
 * Parameter names are matched by their decoded form (as the router and the
 * canonical query see them); a name given twice is malformed.  The scope is
 * checked as by ol_sigv4_parse_header.  Returns OL_SIGV4_EMALFORMED when any
 * is missing or bad; 1 when the query carries no X-Amz-Signature at all (not
 * a presigned request). */
int ol_sigv4_parse_query(struct ol_slice query, struct ol_sigv4_auth *out);

/* Parses a request time: the strict X-Amz-Date form yyyymmddTHHMMSSZ, or an
 * RFC 7231 HTTP-date (IMF-fixdate "Fri, 24 May 2013 00:00:00 GMT", the
 * obsolete RFC 850 and asctime forms).  Writes the time as yyyymmddTHHMMSSZ
 * (NUL-terminated) and as Unix seconds.  Returns 0 or OL_SIGV4_EMALFORMED. */
int ol_sigv4_parse_date(struct ol_slice s, char amz_date[17], int64_t *unix_sec);

/* What the verifier needs of the request. */
struct ol_sigv4_request {
    struct ol_slice method;
    struct ol_slice path;   /* raw, percent-encoded as received */
    struct ol_slice query;  /* raw, without '?' */
    const struct ol_http_header *headers;
    size_t nheaders;
    /* x-amz-content-sha256 value, or "UNSIGNED-PAYLOAD" for presigned */
    struct ol_slice payload_hash;
};

/* Checks the request's headers against its signed-headers list, as S3 does
 * before it looks at the signature.  Every x-amz-* header present must be
 * signed (x-amz-content-sha256 excepted: its value is the last line of the
 * canonical request whether signed or not), and so must host when present;
 * a signed header must be present, and only once (the S3 layer reads the
 * first of repeated headers, while the signature covers their values joined
 * with ','; refusing the repetition keeps what was signed and what is
 * obeyed the same).  Standard headers (Content-Type, Content-MD5...) need
 * not be signed: S3 accepts them unsigned, and clients rely on it.
 * Returns OL_SIGV4_OK, OL_SIGV4_EUNSIGNED (names: the unsigned headers,
 * lowercase, ", "-separated), OL_SIGV4_EABSENT or OL_SIGV4_EREPEATED (names:
 * that header), or OL_SIGV4_EMALFORMED (a bad signed-headers list).  names
 * (cap >= 1) is always NUL-terminated; a list that does not fit ends with
 * "...". */
int ol_sigv4_check_headers(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                           char *names, size_t cap);

/* Recomputes the signature with `secret` and compares it in constant time.
 * For a presigned request the X-Amz-Signature parameter is left out of the
 * canonical query.  On success writes the (hex, NUL-terminated) signature to
 * seed_signature (may be NULL): the seed for aws-chunked chunk signatures.
 * Returns OL_SIGV4_OK, OL_SIGV4_EMISMATCH, OL_SIGV4_EMALFORMED (host not
 * signed, signed headers not sorted, scope date != amz_date's date, empty
 * payload_hash, a bad escape in path or query, too many query parameters),
 * or -ENOMEM when OpenSSL fails.  Canonical URI: the path is decoded and
 * re-encoded (S3 does not double-encode or normalise it); a "%2F" stays
 * "%2F" so that a key holding an encoded slash keeps the client's meaning.
 * Canonical query: each name and value is decoded as the router decodes it
 * (a raw '+' is a space, "%2B" a plus) and re-encoded, so that two queries
 * with one canonical form always mean the same to the S3 layer.  The
 * caller checks the headers with ol_sigv4_check_headers first. */
int ol_sigv4_verify(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                    const char *secret, size_t secret_len, char seed_signature[65]);

/* Writes the canonical request (what gets hashed into the string to sign) to
 * buf, not NUL-terminated, and its length to *len: for tests, and for the
 * CanonicalRequest element of a SignatureDoesNotMatch error.  Returns 0,
 * OL_SIGV4_EMALFORMED, or -ENOSPC when cap is too small. */
int ol_sigv4_canonical_request(const struct ol_sigv4_request *req,
                               const struct ol_sigv4_auth *auth, char *buf, size_t cap,
                               size_t *len);

/* Signs (used by tests and the future client/bench tool): computes the
 * signature hex of a request whose auth fields are filled in (date, region,
 * service, signed_headers, amz_date, presigned).  Same errors as verify,
 * except that host need not be signed and there is no mismatch. */
int ol_sigv4_sign(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                  const char *secret, size_t secret_len, char signature[65]);

/* Derives the signing key for (secret, date, region, service).  Secrets of any
 * length work.  Should OpenSSL fail (out of memory) the key is zeroed; the
 * verifier and the chunk decoder use a checked internal path instead. */
void ol_sigv4_signing_key(const char *secret, size_t secret_len, struct ol_slice date,
                          struct ol_slice region, struct ol_slice service, uint8_t key[32]);

/* Lowercase hex SHA-256 of buf (65 bytes with NUL).  Should OpenSSL fail it
 * writes an empty string, which matches no real hash. */
void ol_sha256_hex(const void *buf, size_t len, char out[65]);

/* ---- aws-chunked bodies (Content-Encoding: aws-chunked) ----
 *
 * Framing: "<hex-size>;chunk-signature=<64 hex>\r\n<data>\r\n" repeated, ending
 * with a zero-size chunk.  STREAMING-AWS4-HMAC-SHA256-PAYLOAD: every chunk's
 * signature is verified against the chain that starts with the seed
 * signature.  STREAMING-UNSIGNED-PAYLOAD-TRAILER: "<hex-size>\r\n<data>\r\n"
 * with no signatures, then trailer header lines (e.g. x-amz-checksum-crc32:...)
 * and an empty line.  The decoder is incremental and works in place, like
 * ol_http_chunked_decode. */
struct ol_aws_chunked {
    bool signed_chunks;     /* verify chunk-signature */
    bool trailer;           /* a trailer section follows the last chunk */
    uint8_t key[32];        /* signing key */
    char scope[128];        /* yyyymmdd/region/s3/aws4_request */
    char amz_date[17];
    char prev_sig[65];      /* seed, then each verified chunk's signature */
    uint64_t decoded_bytes; /* data bytes produced so far */
    /* trailer lines seen (name:value, NUL-separated, bounded) */
    char trailers[512];
    size_t trailers_len;
    /* private */
    int state;
    uint64_t remaining;
    char line[256];
    unsigned line_len;
    char chunk_sig[65];
    void *sha; /* EVP_MD_CTX hashing the current chunk (allocated by init, signed only) */
    bool trailer_sig_seen; /* x-amz-trailer-signature line read */
};
/* seed_signature may be NULL for unsigned chunks.  Returns 0, -ENOMEM, or
 * -EINVAL (signed without auth or a 64-hex seed, or a scope too long).
 * With signed_chunks && trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)
 * the trailer must carry x-amz-trailer-signature, which is verified; it is
 * not stored in `trailers`.  Trailer names are stored lowercase, values
 * trimmed.  Chunk data is handed out before its signature (which covers the
 * whole chunk) is checked: the caller must not commit anything until
 * ol_aws_chunked_done(). */
int ol_aws_chunked_init(struct ol_aws_chunked *c, bool signed_chunks, bool trailer,
                        const struct ol_sigv4_auth *auth, const char *secret,
                        size_t secret_len, const char *seed_signature);
void ol_aws_chunked_free(struct ol_aws_chunked *c);
/* Same contract as ol_http_chunked_decode: consumes input, leaves decoded data
 * at the front of buf with its count in *len, returns bytes consumed, or
 * OL_SIGV4_EMISMATCH (a chunk signature is wrong) / OL_SIGV4_ECHUNK /
 * -ENOMEM.  Input is consumed up to the end of the stream only: once done,
 * the rest of buf (a pipelined request) is left unconsumed.  Errors are
 * sticky; on an error *len still counts the data decoded before it. */
ssize_t ol_aws_chunked_decode(struct ol_aws_chunked *c, char *buf, size_t *len);
bool ol_aws_chunked_done(const struct ol_aws_chunked *c);

/* Helpers shared with the S3 layer. */
/* Percent-decodes src into dst (dst may be src); '+' is kept as '+'.
 * Returns decoded length or -1 on a bad escape. */
ssize_t ol_uri_decode(const char *src, size_t len, char *dst);
/* The general form: at most dst_cap bytes out (-1 past it); '+' becomes ' '
 * when plus_is_space (form encoding: query values, x-amz-tagging). */
ssize_t ol_pct_decode(const char *src, size_t len, char *dst, size_t dst_cap, bool plus_is_space);
/* Percent-encodes per SigV4 (unreserved A-Za-z0-9-._~ kept; '/' kept when
 * keep_slash).  Returns the length written, or -1 if dst_cap is too small. */
ssize_t ol_uri_encode(const char *src, size_t len, char *dst, size_t dst_cap, bool keep_slash);

#endif
