/* Canned ACLs: the four S3 clients use, on buckets and on objects, and the
 * grants each one stands for.  Grants of other shapes (x-amz-grant-*, an
 * AccessControlPolicy naming other users) are not kept: the S3 layer
 * refuses them (NotImplemented) rather than storing what it cannot enforce.
 *
 * Owners: a bucket has one owner (access/access.h); every object of a
 * bucket is owned by the bucket's owner (S3's BucketOwnerEnforced and
 * BucketOwnerPreferred ownership), so an object ACL grants only to others.
 *
 * Pure functions; any thread. */
#ifndef OL_ACCESS_ACL_H
#define OL_ACCESS_ACL_H

#include <stdbool.h>
#include <stddef.h>

enum ol_acl {
    OL_ACL_PRIVATE = 0,
    OL_ACL_PUBLIC_READ,
    OL_ACL_PUBLIC_READ_WRITE,
    OL_ACL_AUTHENTICATED_READ,
    OL_ACL_COUNT,
};

/* Parses a canned ACL name (x-amz-acl).  bucket-owner-read and
 * bucket-owner-full-control are accepted as private (the bucket's owner owns
 * every object already).  0, or -EINVAL for any other name. */
int ol_acl_parse(const char *s, size_t n, enum ol_acl *out);
/* The canonical name ("private", "public-read"...). */
const char *ol_acl_name(enum ol_acl a);

/* Whether canned ACL a, on a bucket (on_object false) or on an object,
 * grants action ("s3:GetObject"...) to a requester who is not the owner:
 * anonymous when !authenticated.
 *   bucket READ  (public-read, authenticated-read): s3:ListBucket,
 *                s3:ListBucketVersions, s3:ListBucketMultipartUploads
 *   bucket WRITE (public-read-write): READ plus s3:PutObject,
 *                s3:DeleteObject, s3:DeleteObjectVersion,
 *                s3:AbortMultipartUpload, s3:ListMultipartUploadParts
 *   object READ  (public-read, public-read-write, authenticated-read):
 *                s3:GetObject, s3:GetObjectVersion
 * authenticated-read grants to authenticated users only. */
bool ol_acl_allows(enum ol_acl a, bool on_object, bool authenticated, const char *action);

#endif
