/* The ETag of a native PUT, made the way `aws s3 cp` makes one.
 *
 * An S3 ETag of a single PUT is the body's MD5, one stream, which one core
 * hashes at about 0.6 GB/s: the native port would be bound by it.  So an
 * object of OL_ETAG_PART_MIN bytes or more gets the ETag of a multipart
 * upload of OL_ETAG_PART_MIN-sized parts (the part size doubled until there
 * are at most 10,000 parts, as the aws CLI does): MD5 of the parts' MD5s,
 * "-N".  The parts hash side by side in the SIMD lanes of
 * ol_md5_update_many, and the object is stored as such an upload would be
 * (nparts, the ":parts" sizes), so ?partNumber GETs and
 * x-amz-mp-parts-count agree with the ETag.  A smaller object gets its
 * plain MD5.
 *
 * Threads: one writer at a time per state.  Errors: -ENOMEM.
 */
#ifndef OL_NATIVE_ETAG_H
#define OL_NATIVE_ETAG_H

#include <stddef.h>
#include <stdint.h>

#include "core/md5.h"

enum {
    OL_ETAG_PART_MIN = 8 << 20, /* the aws CLI's multipart threshold and chunk */
    OL_ETAG_MAX_PARTS = 10000,
};

struct ol_etag {
    uint64_t total, part; /* part: 0 for a plain MD5 */
    uint32_t n;           /* parts (1 for a plain MD5) */
    struct ol_md5 *md5;   /* n contexts */
};

int ol_etag_init(struct ol_etag *e, uint64_t total);
/* Hashes len bytes at object offset off (any order of calls; each byte
 * once). */
void ol_etag_update(struct ol_etag *e, uint64_t off, const void *p, size_t len);
/* The ETag (unquoted) into etag; *nparts 0 or the part count, and the
 * ":parts" entry ("size*count[,size*1]") into parts (cap bytes) when
 * *nparts > 0.  Frees the state. */
void ol_etag_final(struct ol_etag *e, char etag[64], uint32_t *nparts, char *parts, size_t cap);
void ol_etag_free(struct ol_etag *e);

#endif
