/* Bucket policies: the JSON subset S3 clients use, parsed once (when a
 * policy is put, and when a cache loads it) and evaluated per request.
 *
 * The subset (anything else is refused as malformed, never ignored: an
 * ignored condition could widen an Allow or void a Deny):
 *   Version   "2012-10-17" or "2008-10-17" (optional); Id (optional)
 *   Statement one object or a list of them, each with
 *     Sid        optional string
 *     Effect     "Allow" | "Deny"
 *     Principal  "*", {"AWS": P} or {"CanonicalUser": P}, P a string or a
 *                list of "*", "arn:aws:iam::ACCOUNT:user/NAME" or a plain
 *                access key NAME
 *     Action     "s3:Name" patterns (string or list; '*' and '?' match,
 *                case-insensitively), or "*"
 *     Resource   "arn:aws:s3:::BUCKET" or "arn:aws:s3:::BUCKET/PATTERN"
 *                (string or list; BUCKET must be the policy's bucket)
 *     Condition  {OPERATOR: {KEY: value or list}}; operators StringEquals,
 *                StringNotEquals, StringEqualsIgnoreCase,
 *                StringNotEqualsIgnoreCase, StringLike, StringNotLike,
 *                IpAddress, NotIpAddress, Bool; keys aws:SourceIp (the Ip
 *                operators), aws:SecureTransport (Bool), s3:prefix and
 *                aws:username (the String operators).  Keys within an
 *                operator and operators within a block must all hold; the
 *                values of one key are alternatives (for the Not operators:
 *                none may match).  A key the request lacks (s3:prefix outside
 *                a listing, aws:username of an anonymous request) fails a
 *                positive operator and passes a Not one, as in IAM.
 *   NotAction, NotPrincipal and NotResource are refused.
 *
 * Evaluation: a matching Deny statement wins over any Allow; no matching
 * statement is "no opinion" (the caller decides: owner, ACLs, or deny).
 *
 * Threads: a parsed policy is immutable; any number of threads may
 * evaluate it at once.  No call blocks or yields.
 */
#ifndef OL_ACCESS_POLICY_H
#define OL_ACCESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* The largest policy document accepted (S3's limit). */
#define OL_POLICY_MAX_BYTES 20480u
/* Bounds of one parsed policy: statements, and entries of each list. */
#define OL_POLICY_MAX_STATEMENTS 128u
#define OL_POLICY_MAX_LIST 64u

enum ol_policy_effect {
    OL_POLICY_NONE = 0, /* no statement applies */
    OL_POLICY_ALLOW,
    OL_POLICY_DENY,
};

/* What a request is, for evaluation.  Borrowed strings, NUL-terminated. */
struct ol_policy_req {
    const char *user;   /* the authenticated access key; NULL: anonymous */
    const char *action; /* "s3:GetObject" */
    const char *bucket;
    const char *key; /* NULL: the request is on the bucket itself */
    size_t key_len;
    const char *source_ip; /* "192.0.2.7" or "2001:db8::1"; NULL or "": unknown */
    bool secure_transport;
    const char *prefix; /* s3:prefix of a listing; NULL when the request has none */
};

struct ol_policy;

/* Parses and checks doc (len bytes, not necessarily NUL-terminated) as the
 * policy of bucket.  0 and *out (free with ol_policy_free); -EINVAL when
 * malformed, with a one-line reason in err (S3's MalformedPolicy message);
 * -E2BIG past OL_POLICY_MAX_BYTES or a bound above; -ENOMEM. */
int ol_policy_parse(const char *doc, size_t len, const char *bucket, struct ol_policy **out,
                    char *err, size_t errlen);
enum ol_policy_effect ol_policy_eval(const struct ol_policy *p, const struct ol_policy_req *q);
/* Whether some Allow statement names q's principal and action, whatever
 * its resources and conditions: a request that names its keys later
 * (DeleteObjects) could be allowed for one of them. */
bool ol_policy_may_allow(const struct ol_policy *p, const struct ol_policy_req *q);
/* Bytes the parsed policy holds (cache accounting). */
size_t ol_policy_bytes(const struct ol_policy *p);
void ol_policy_free(struct ol_policy *p);

/* Glob match of '*' (any run) and '?' (one byte) against s (n bytes);
 * fold: ASCII case-insensitive.  Linear in memory, O(n * m) at worst. */
bool ol_policy_glob(const char *pat, const char *s, size_t n, bool fold);

#endif
