/* AWS Signature Version 2 for S3 (HMAC-SHA1): the "Authorization: AWS
 * AKID:signature" header form and the presigned query form
 * (?AWSAccessKeyId=..&Expires=..&Signature=..).
 *
 * Pure functions over slices, as sigv4.h: no clock, no user lookup.  auth.c
 * puts them together with the configured users and the time rules.
 *
 * StringToSign = Verb\n Content-MD5\n Content-Type\n Date-or-Expires\n
 *                CanonicalizedAmzHeaders CanonicalizedResource
 * CanonicalizedAmzHeaders: every x-amz-* header, name lowercased, value
 * trimmed, sorted by name, one "name:value\n" each.  CanonicalizedResource:
 * "/bucket" when the bucket came from the Host (virtual-hosted), then the
 * raw (percent-encoded) path, then the signed sub-resources of the query
 * (ol_sigv2_subresource), sorted by name, values percent-decoded.
 */
#ifndef OL_S3_SIGV2_H
#define OL_S3_SIGV2_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http/parser.h"

/* The most x-amz-* headers one request may carry into a signature. */
#define OL_SIGV2_MAX_AMZ 64

/* Base64 of a 20-byte HMAC-SHA1: 28 characters. */
#define OL_SIGV2_SIG_LEN 28

struct ol_sigv2_amz {
    struct ol_slice name;  /* any case; written lowercase */
    struct ol_slice value; /* trimmed when written */
};

/* What the string to sign is made of.  Slices are borrowed for the call. */
struct ol_sigv2_request {
    struct ol_slice method;
    struct ol_slice content_md5;  /* header value, or n == 0 */
    struct ol_slice content_type; /* header value, or n == 0 */
    struct ol_slice date;         /* Date header, "" when x-amz-date is sent, or Expires */
    const struct ol_sigv2_amz *amz;
    size_t namz;                  /* <= OL_SIGV2_MAX_AMZ, names distinct */
    struct ol_slice bucket;       /* virtual-hosted bucket, or n == 0 for path style */
    struct ol_slice path;         /* raw, as received */
    struct ol_slice query;        /* raw, without '?' */
};

/* True when a query parameter name is one S3 signs in the
 * CanonicalizedResource (acl, uploads, versionId, response-*, ...). */
bool ol_sigv2_subresource(const char *name, size_t n);

/* Writes the string to sign to buf (not NUL-terminated) and its length to
 * *len.  Returns 0, -ENOSPC when cap is too small, or -EINVAL (too many amz
 * headers, a bad escape in a sub-resource value). */
int ol_sigv2_string_to_sign(const struct ol_sigv2_request *req, char *buf, size_t cap,
                            size_t *len);

/* Base64 HMAC-SHA1 of sts with secret, NUL-terminated.  0 or -ENOMEM. */
int ol_sigv2_sign(const char *secret, size_t secret_len, const char *sts, size_t sts_len,
                  char sig[OL_SIGV2_SIG_LEN + 1]);

/* Compares a computed signature with the one given, in time that depends
 * only on the lengths (which are not secret). */
bool ol_sigv2_sig_equal(const char *computed, struct ol_slice given);

#endif
