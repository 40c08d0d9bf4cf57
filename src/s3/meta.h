/* Object metadata as stored: the headers S3 keeps with an object
 * (Content-Type, Content-Encoding, Content-Disposition, Content-Language,
 * Cache-Control, Expires, x-amz-meta-*) serialised into one blob that the
 * store keeps opaque.  Blob: repeated [u16 name_len][name][u16 value_len][value],
 * little-endian, names lowercase.
 *
 * Entries whose name starts with ':' are internal (no header name can start
 * so): the S3 layer keeps facts about the object there (its additional
 * checksum, its multipart part sizes) and they are never sent as headers. */
#ifndef OL_S3_META_H
#define OL_S3_META_H

#include <stddef.h>
#include <stdint.h>

#include "s3/s3.h"

#define OL_S3_META_MAX 8192      /* blob bytes */
#define OL_S3_USER_META_MAX 2048 /* x-amz-meta-* names + values, as S3 limits it */

/* Builds the blob from the request headers.  Returns its length, or -E2BIG
 * when user metadata exceeds S3's 2 KiB, -EMSGSIZE when the blob exceeds cap,
 * -EINVAL when a value holds a byte that may not appear in a response header
 * (ol_s3_header_value_ok).  Everything stored can so be served back. */
int ol_s3_meta_encode(const struct ol_s3_req *r, uint8_t *out, size_t cap);
/* Sends the error for a failed ol_s3_meta_encode (400 MetadataTooLarge, or
 * 400 InvalidArgument for a control byte), as Amazon S3 answers it. */
int ol_s3_meta_error(struct ol_s3_req *r, int rc);

/* Whether a value may be sent as a response header value: no control byte
 * (below 0x20 other than TAB, or 0x7F), so no CR or LF can end the header
 * early.  Every request-supplied or stored value a handler echoes into a
 * response header passes this check first. */
bool ol_s3_header_value_ok(const char *p, size_t n);

/* Turns a blob back into response headers: NUL-terminated copies go into
 * `store`; returns the number of headers written to hdrs.  A blob of
 * OL_S3_META_MAX bytes needs at most OL_S3_META_MAX bytes of store and
 * ol_s3_meta_count(blob) headers. */
size_t ol_s3_meta_headers(const uint8_t *blob, size_t len, struct ol_http_hdr *hdrs, size_t max,
                          char *store, size_t store_cap);
/* The number of headers ol_s3_meta_headers makes of a blob. */
size_t ol_s3_meta_count(const uint8_t *blob, size_t len);

/* Internal entry names. */
#define OL_S3_META_CHECKSUM ":ck"  /* "ALGO TYPE base64[-N]" (object) or "ALGO TYPE" (upload) */
#define OL_S3_META_TAGS ":tags"    /* an upload's x-amz-tagging, applied at Complete */
#define OL_S3_META_PARTS ":parts"  /* part sizes, run-length: "size*count,size*count" */

/* Finds entry `name`: 0 with val and vlen pointing into the blob, or -ENOENT. */
int ol_s3_meta_get(const uint8_t *blob, size_t len, const char *name, const uint8_t **val,
                   size_t *vlen);
/* Appends an entry to the blob of *len bytes (capacity cap).  -E2BIG. */
int ol_s3_meta_add(uint8_t *blob, size_t cap, size_t *len, const char *name, const void *val,
                   size_t vlen);
/* Drops every internal entry in place; returns the new length. */
size_t ol_s3_meta_strip_internal(uint8_t *blob, size_t len);

#endif
