/* Object metadata as stored: the headers S3 keeps with an object
 * (Content-Type, Content-Encoding, Content-Disposition, Content-Language,
 * Cache-Control, Expires, x-amz-meta-*) serialised into one blob that the
 * store keeps opaque.  Blob: repeated [u16 name_len][name][u16 value_len][value],
 * little-endian, names lowercase. */
#ifndef OL_S3_META_H
#define OL_S3_META_H

#include <stddef.h>
#include <stdint.h>

#include "s3/s3.h"

#define OL_S3_META_MAX 8192      /* blob bytes */
#define OL_S3_USER_META_MAX 2048 /* x-amz-meta-* names + values, as S3 limits it */

/* Builds the blob from the request headers.  Returns its length, or -E2BIG
 * when user metadata exceeds S3's 2 KiB. */
int ol_s3_meta_encode(const struct ol_s3_req *r, uint8_t *out, size_t cap);

/* Turns a blob back into response headers: NUL-terminated copies go into
 * `store`; returns the number of headers written to hdrs. */
size_t ol_s3_meta_headers(const uint8_t *blob, size_t len, struct ol_http_hdr *hdrs, size_t max,
                          char *store, size_t store_cap);

#endif
