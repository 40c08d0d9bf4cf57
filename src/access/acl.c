/* Canned ACLs (see acl.h). */
#include "access/acl.h"

#include <errno.h>
#include <string.h>

static const char *const names[OL_ACL_COUNT] = {
    [OL_ACL_PRIVATE] = "private",
    [OL_ACL_PUBLIC_READ] = "public-read",
    [OL_ACL_PUBLIC_READ_WRITE] = "public-read-write",
    [OL_ACL_AUTHENTICATED_READ] = "authenticated-read",
};

int ol_acl_parse(const char *s, size_t n, enum ol_acl *out)
{
    for (int i = 0; i < OL_ACL_COUNT; i++) {
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            *out = (enum ol_acl)i;
            return 0;
        }
    }
    if ((n == 17 && memcmp(s, "bucket-owner-read", 17) == 0) ||
        (n == 25 && memcmp(s, "bucket-owner-full-control", 25) == 0)) {
        *out = OL_ACL_PRIVATE;
        return 0;
    }
    return -EINVAL;
}

const char *ol_acl_name(enum ol_acl a)
{
    return a >= 0 && a < OL_ACL_COUNT ? names[a] : "private";
}

static bool in(const char *action, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(action, *set) == 0)
            return true;
    return false;
}

bool ol_acl_allows(enum ol_acl a, bool on_object, bool authenticated, const char *action)
{
    static const char *const bucket_read[] = {"s3:ListBucket", "s3:ListBucketVersions",
                                              "s3:ListBucketMultipartUploads", NULL};
    static const char *const bucket_write[] = {"s3:PutObject",
                                               "s3:DeleteObject",
                                               "s3:DeleteObjectVersion",
                                               "s3:AbortMultipartUpload",
                                               "s3:ListMultipartUploadParts",
                                               NULL};
    static const char *const object_read[] = {"s3:GetObject", "s3:GetObjectVersion", NULL};
    bool reads = a == OL_ACL_PUBLIC_READ || a == OL_ACL_PUBLIC_READ_WRITE ||
                 (a == OL_ACL_AUTHENTICATED_READ && authenticated);
    if (!reads)
        return false;
    if (on_object)
        return in(action, object_read);
    return in(action, bucket_read) || (a == OL_ACL_PUBLIC_READ_WRITE && in(action, bucket_write));
}
