/* Server-side encryption as S3 asks for it: the request headers of SSE-S3
 * (x-amz-server-side-encryption: AES256) and SSE-C
 * (x-amz-server-side-encryption-customer-algorithm / -key / -key-MD5, and
 * the x-amz-copy-source-... set of a copy's source), a bucket's default
 * encryption (?encryption), and the response headers.  The sealing itself
 * is the object layer's (obj/sse.h); this file only turns requests into its
 * arguments and its errors into S3's answers.
 *
 * Threads: a request's fiber. */
#ifndef OL_S3_SSE_H
#define OL_S3_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "obj/sse.h"
#include "s3/s3.h"

struct ol_obj_reader;

/* What one request asks for. */
struct ol_s3_sse {
    struct ol_sse_spec spec; /* mode OL_SSE_NONE: nothing asked */
    char key_md5[32];        /* SSE-C: the key's MD5, base64, echoed in responses */
};

/* The encryption headers of the request (copy_source: the
 * x-amz-copy-source-server-side-encryption-customer-* set instead).
 * 0, or the error has been sent and -1 is returned: an unknown algorithm,
 * aws:kms (501: no KMS), a malformed key or a key-MD5 that does not match,
 * SSE-S3 and SSE-C together, SSE-C on plain HTTP where the server has HTTPS. */
int ol_s3_sse_parse(struct ol_s3_req *r, bool copy_source, struct ol_s3_sse *out);

/* The encryption of a new object or upload: the request's, else the bucket's
 * default (?encryption).  0 or -1 (error sent). */
int ol_s3_sse_for_write(struct ol_s3_req *r, struct ol_s3_sse *out);

/* Makes the ":sse" entry of a new object (layout 's') or upload ('p') for
 * s and adds it to the blob meta (*len bytes of cap); obj gets the opened
 * form for the writer (ol_obj_target.sse).  Nothing when s asks for none
 * (obj->mode OL_SSE_NONE).  0 or -1 (error sent). */
int ol_s3_sse_seal(struct ol_s3_req *r, const struct ol_s3_sse *s, char layout, uint8_t *meta,
                   size_t cap, size_t *len, struct ol_sse_obj *obj);

/* Opens an upload's data key for UploadPart / UploadPartCopy from the
 * upload's blob, with the request's SSE-C key when the upload is SSE-C
 * (it must be the one CreateMultipartUpload gave).  0 or -1 (error sent). */
int ol_s3_sse_upload_key(struct ol_s3_req *r, const uint8_t *umeta, size_t ulen,
                         const struct ol_s3_sse *s, struct ol_sse_obj *obj);

/* Gives a reader the request's SSE-C key (GetObject, HeadObject, a copy's
 * source): an SSE-C object without a key is 400, with another key 403; a
 * key given for an object that is not SSE-C is 400, as S3 answers.
 * 0 or -1 (error sent). */
int ol_s3_sse_unlock(struct ol_s3_req *r, struct ol_obj_reader *rd, const struct ol_s3_sse *s);

/* The response headers for an object of mode (with s's key MD5 for
 * SSE-C): up to 2 into h; returns the count. */
size_t ol_s3_sse_hdrs(enum ol_sse_mode mode, const struct ol_s3_sse *s, struct ol_http_hdr *h);

/* Sends the S3 error for an object-layer SSE error (-OL_ESSENEEDKEY,
 * -OL_ESSEWRONGKEY, -ENOKEY); false when rc is not one of them. */
bool ol_s3_sse_error(struct ol_s3_req *r, int rc, int *sent);

/* Whether bucket has default encryption (SSE-S3) set: every new object in
 * it is sealed, whatever port writes it. */
struct ol_obj;
bool ol_s3_sse_bucket_default(struct ol_obj *o, const char *bucket);

/* ?encryption on a bucket. */
int ol_s3_get_bucket_encryption(struct ol_s3_req *r);
int ol_s3_put_bucket_encryption(struct ol_s3_req *r);
int ol_s3_delete_bucket_encryption(struct ol_s3_req *r);

#endif
