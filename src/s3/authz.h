/* Access control in the S3 layer: the router asks ol_s3_authorize() before
 * it calls a handler; the handlers of ?policy, ?acl and ?ownershipControls
 * and the canned-ACL headers of writes are here too.  The decisions are
 * access/access.h's (front-end agnostic); this file only names each S3
 * operation's IAM action and turns the answers into S3 documents. */
#ifndef OL_S3_AUTHZ_H
#define OL_S3_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>

#include "access/access.h"
#include "s3/s3.h"
#include "store/store.h"

/* Checks r (bucket, key, method, sub-resource, copy source) against the
 * bucket's owner, policy and ACLs.  Returns 0 with *refused false when the
 * handler may run, else the error was sent (*refused true): AccessDenied,
 * NoSuchBucket (an existing bucket's name is not told apart from a missing
 * one only where S3 does not either), BucketAlreadyExists. */
int ol_s3_authorize(struct ol_s3_req *r, bool *refused);
/* One more check inside a handler (DeleteObjects checks each key): 0 or
 * -EACCES (or a read error). */
int ol_s3_authorize_key(struct ol_s3_req *r, const char *action, const char *key, size_t key_len);
/* Whether r's user sees bucket in ListBuckets (its owner, or an admin). */
bool ol_s3_lists_bucket(struct ol_s3_req *r, const char *bucket);

/* The owner of r's bucket (every object's owner, in listings), copied into
 * out; the caller's own key (or "anonymous") when the bucket's record cannot
 * be read.  Returns out.  May yield (a cache miss reads the store). */
const char *ol_s3_bucket_owner(const struct ol_s3_req *r, char out[129]);

/* The canned ACL of a write (x-amz-acl of PutObject, CopyObject,
 * CreateMultipartUpload).  Returns 0 and *acl (private when absent), or
 * the error was sent (*refused): an unknown name (InvalidArgument),
 * x-amz-grant-* headers (NotImplemented), a public ACL on a bucket whose
 * ownership is BucketOwnerEnforced (AccessControlListNotSupported). */
int ol_s3_write_acl(struct ol_s3_req *r, enum ol_acl *acl, bool *refused);
/* The object attribute that stores acl (val NULL for private: no attribute). */
struct ol_obj_attr ol_s3_acl_attr(enum ol_acl acl);
#define OL_S3_META_ACL ":acl" /* an upload's canned ACL, applied at Complete */

/* CreateBucket: parses x-amz-acl and x-amz-object-ownership before the
 * bucket is made (0, or the error was sent: *refused), then records the
 * owner once it is (ol_s3_bucket_created; an error there is logged: the
 * bucket then belongs to the default owner). */
int ol_s3_bucket_access_parse(struct ol_s3_req *r, struct ol_access_bucket *rec, bool *refused);
void ol_s3_bucket_created(struct ol_s3_req *r, const struct ol_access_bucket *rec);

/* Handlers. */
int ol_s3_get_bucket_policy(struct ol_s3_req *r);
int ol_s3_put_bucket_policy(struct ol_s3_req *r);
int ol_s3_delete_bucket_policy(struct ol_s3_req *r);
int ol_s3_get_bucket_acl(struct ol_s3_req *r);
int ol_s3_put_bucket_acl(struct ol_s3_req *r);
int ol_s3_get_object_acl(struct ol_s3_req *r);
int ol_s3_put_object_acl(struct ol_s3_req *r);
int ol_s3_get_bucket_ownership(struct ol_s3_req *r);
int ol_s3_put_bucket_ownership(struct ol_s3_req *r);
int ol_s3_delete_bucket_ownership(struct ol_s3_req *r);

#endif
