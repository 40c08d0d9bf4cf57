/* Helpers of the listing handlers (list.c), exposed for unit tests.
 *
 * The handlers themselves are declared in s3/s3.h.
 */
#ifndef OL_S3_LIST_H
#define OL_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>

/* Keys, prefixes and markers are at most this long (store.h: 1..1024 bytes). */
#define OL_S3_MAX_KEY 1024

/* Writes to out (room for n bytes) the smallest byte string greater than
 * every string that begins with p[0..n): p with its trailing 0xFF bytes
 * dropped and its last byte then incremented.  Returns its length, or 0 when
 * no such string exists (p is empty or all 0xFF).  A listing seeks there to
 * skip every key that rolled up into the common prefix p. */
size_t ol_s3_prefix_successor(const char *p, size_t n, char *out);

/* Percent-encodes s[0..n) as S3 does for encoding-type=url: every byte but
 * A-Z a-z 0-9 - _ . ~ / becomes %XX (so '+' and ' ' survive decoders that
 * read '+' as a space).  out needs 3 * n + 1 bytes; it is NUL-terminated.
 * Returns the encoded length. */
size_t ol_s3_url_encode(const char *s, size_t n, char *out);

/* Continuation tokens are opaque to clients: the hex form of the last key or
 * common prefix returned.  encode: out needs 2 * n + 1 bytes (NUL-terminated);
 * returns the length.  decode: returns the decoded length (1..cap), or
 * -EINVAL for a token that is empty, odd-length, not hex or too long. */
size_t ol_s3_token_encode(const char *s, size_t n, char *out);
int ol_s3_token_decode(const char *tok, size_t n, char *out, size_t cap);

/* Parses a non-negative decimal query value ("max-keys", "part-number-marker")
 * strictly: digits only, no sign, at most 10 digits.  Values above clamp
 * become clamp.  Returns 0, or -EINVAL. */
int ol_s3_parse_count(const char *s, size_t n, unsigned clamp, unsigned *out);

#endif
