/* Access control in the S3 layer (see authz.h): the IAM action of each
 * operation, the check before the handler, and the ?policy, ?acl and
 * ?ownershipControls handlers. */
#include "s3/authz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access/policy.h"
#include "core/err.h"
#include "core/log.h"
#include "obj/obj.h"
#include "s3/sigv4.h"

#define ACL_DOC_MAX (64u << 10)

/* ---- the action of a request ---- */

/* The IAM action of r, mirroring the router's dispatch (router.c) test for
 * test and in the same order (a request with two sub-resources must be
 * named by the one the router serves); NULL
 * where the router answers an error itself (no handler runs).  *special:
 * 'C' CreateBucket, 'L' ListBuckets, 'D' DeleteObjects (checked per key). */
static const char *action_of(const struct ol_s3_req *r, char *special)
{
    struct ol_slice m = r->http->head.method;
#define IS(lit) (m.n == sizeof(lit) - 1 && memcmp(m.p, lit, m.n) == 0)
    bool get = IS("GET"), head = IS("HEAD"), put = IS("PUT"), del = IS("DELETE"), post = IS("POST");
#undef IS
#define HAS(p) ol_s3_has_param(r, p)
    *special = 0;
    if (!r->bucket[0]) {
        *special = 'L';
        return get || head ? "s3:ListAllMyBuckets" : NULL;
    }
    if (!r->key) {
        if (HAS("versioning"))
            return get ? "s3:GetBucketVersioning" : put ? "s3:PutBucketVersioning" : NULL;
        if (HAS("versions"))
            return get ? "s3:ListBucketVersions" : NULL;
        if (HAS("cors"))
            return get ? "s3:GetBucketCORS" : put || del ? "s3:PutBucketCORS" : NULL;
        if (HAS("lifecycle"))
            return get          ? "s3:GetLifecycleConfiguration"
                   : put || del ? "s3:PutLifecycleConfiguration"
                                : NULL;
        if (HAS("policy"))
            return get   ? "s3:GetBucketPolicy"
                   : put ? "s3:PutBucketPolicy"
                   : del ? "s3:DeleteBucketPolicy"
                         : NULL;
        if (HAS("acl"))
            return get ? "s3:GetBucketAcl" : put ? "s3:PutBucketAcl" : NULL;
        if (HAS("ownershipControls"))
            return get          ? "s3:GetBucketOwnershipControls"
                   : put || del ? "s3:PutBucketOwnershipControls"
                                : NULL;
        if (HAS("encryption"))
            return get ? "s3:GetEncryptionConfiguration"
                       : put || del ? "s3:PutEncryptionConfiguration" : NULL;
        if (HAS("tagging"))
            return get ? "s3:GetBucketTagging" : put || del ? "s3:PutBucketTagging" : NULL;
        if (HAS("attributes"))
            return NULL;
        if (post && HAS("delete")) {
            *special = 'D';
            return "s3:DeleteObject";
        }
        if (put) {
            *special = 'C';
            return "s3:CreateBucket";
        }
        if (head)
            return "s3:ListBucket";
        if (del)
            return "s3:DeleteBucket";
        if (get && HAS("location"))
            return "s3:GetBucketLocation";
        if (get && HAS("uploads"))
            return "s3:ListBucketMultipartUploads";
        return get ? "s3:ListBucket" : NULL;
    }
    bool ver = HAS("versionId");
    if (HAS("tagging"))
        return get   ? "s3:GetObjectTagging"
               : put ? "s3:PutObjectTagging"
               : del ? "s3:DeleteObjectTagging"
                     : NULL;
    if (HAS("attributes"))
        return get ? "s3:GetObjectAttributes" : NULL;
    if (HAS("acl"))
        return get ? "s3:GetObjectAcl" : put ? "s3:PutObjectAcl" : NULL;
    bool upload = HAS("uploadId");
    if (put)
        return "s3:PutObject";
    if (get && upload)
        return "s3:ListMultipartUploadParts";
    if (get || head)
        return ver ? "s3:GetObjectVersion" : "s3:GetObject";
    if (del)
        return upload ? "s3:AbortMultipartUpload"
               : ver  ? "s3:DeleteObjectVersion"
                      : "s3:DeleteObject";
    if (post && (HAS("uploads") || upload))
        return "s3:PutObject";
    return NULL;
#undef HAS
}

static struct ol_access_req access_req(const struct ol_s3_req *r, const char *action,
                                       const char *bucket, const char *key, size_t key_len)
{
    const struct ol_s3_param *prefix = ol_s3_param(r, "prefix");
    return (struct ol_access_req){
        .user = r->access_key,
        .action = action,
        .bucket = bucket,
        .key = key,
        .key_len = key_len,
        .source_ip = r->http->remote,
        .secure_transport = r->http->secure,
        .prefix = prefix && !key ? prefix->value : NULL,
    };
}

static int denied(struct ol_s3_req *r, bool *refused)
{
    *refused = true;
    return ol_s3_error(r, OL_S3_AccessDenied, "Access Denied");
}

/* CopyObject and UploadPartCopy also read their source: the caller needs
 * s3:GetObject (s3:GetObjectVersion with a versionId) on it. */
static int check_copy_source(struct ol_s3_req *r, const struct ol_slice *src, bool *refused)
{
    char *dec = malloc(src->n + 1);
    if (!dec) {
        *refused = true;
        return ol_s3_error_from(r, -ENOMEM);
    }
    const char *p = src->p;
    size_t n = src->n;
    const char *q = memchr(p, '?', n);
    bool ver = q && memmem(q, (size_t)(p + n - q), "versionId=", 10) != NULL;
    if (q)
        n = (size_t)(q - p);
    ssize_t dl = ol_pct_decode(p, n, dec, n, false);
    int rc = 0;
    *refused = false;
    if (dl < 0)
        goto out; /* the handler refuses the malformed header */
    dec[dl] = 0;
    char *b = dec[0] == '/' ? dec + 1 : dec;
    char *slash = strchr(b, '/');
    if (!slash || slash == b || (size_t)(slash - b) >= 64)
        goto out;
    *slash = 0;
    const char *key = slash + 1;
    size_t kl = (size_t)(dec + dl - key);
    struct ol_access_req aq =
        access_req(r, ver ? "s3:GetObjectVersion" : "s3:GetObject", b, key, kl);
    int arc = ol_access_check(r->ctx->obj, r->ctx->cfg, &aq);
    if (arc == -OL_ENOBUCKET)
        goto out; /* the handler answers NoSuchBucket */
    if (arc == -EACCES) {
        rc = denied(r, refused);
    } else if (arc < 0) {
        *refused = true;
        rc = ol_s3_error_from(r, arc);
    }
out:
    free(dec);
    return rc;
}

int ol_s3_authorize(struct ol_s3_req *r, bool *refused)
{
    char special;
    const char *action = action_of(r, &special);
    *refused = false;
    if (!action)
        return 0; /* the router refuses the request itself */
    if (special == 'L')
        return r->access_key ? 0 : denied(r, refused);
    const struct ol_cfg *cfg = r->ctx->cfg;
    bool admin = ol_access_is_admin(cfg, r->access_key);
    if (special == 'C') {
        if (!r->access_key)
            return denied(r, refused);
        struct ol_access_bucket b;
        int rc = ol_access_bucket_get(r->ctx->obj, cfg, r->bucket, &b);
        if (rc == -OL_ENOBUCKET || admin)
            return 0;
        if (rc == 0 && strcmp(b.owner, r->access_key) == 0)
            return 0; /* the handler answers BucketAlreadyOwnedByYou */
        *refused = true;
        if (rc < 0)
            return ol_s3_error_from(r, rc);
        return ol_s3_error(r, OL_S3_BucketAlreadyExists,
                           "The requested bucket name is not available. The bucket namespace is "
                           "shared by all users of the system. Please select a different name "
                           "and try again.");
    }
    struct ol_access_req aq = access_req(r, action, r->bucket, r->key, r->key_len);
    /* DeleteObjects: the handler checks each key; here whether any could go. */
    aq.any_key = special == 'D';
    int rc = ol_access_check(r->ctx->obj, cfg, &aq);
    if (rc == -EACCES)
        return denied(r, refused);
    if (rc == -OL_ENOBUCKET) {
        *refused = true;
        return ol_s3_error_from(r, rc);
    }
    if (rc < 0) {
        *refused = true;
        return ol_s3_error_from(r, rc);
    }
    const struct ol_slice *src = ol_s3_header(r, "x-amz-copy-source");
    struct ol_slice m = r->http->head.method;
    if (src && r->key && m.n == 3 && memcmp(m.p, "PUT", 3) == 0 && !ol_s3_has_param(r, "acl") &&
        !ol_s3_has_param(r, "tagging") && !admin)
        return check_copy_source(r, src, refused);
    return 0;
}

int ol_s3_authorize_key(struct ol_s3_req *r, const char *action, const char *key, size_t key_len)
{
    struct ol_access_req aq = access_req(r, action, r->bucket, key, key_len);
    return ol_access_check(r->ctx->obj, r->ctx->cfg, &aq);
}

bool ol_s3_lists_bucket(struct ol_s3_req *r, const char *bucket)
{
    if (ol_access_is_admin(r->ctx->cfg, r->access_key))
        return true;
    struct ol_access_bucket b;
    if (!r->access_key || ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, bucket, &b) != 0)
        return false;
    return strcmp(b.owner, r->access_key) == 0;
}

const char *ol_s3_bucket_owner(const struct ol_s3_req *r, char out[129])
{
    struct ol_access_bucket b;
    if (r->bucket[0] && ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b) == 0)
        snprintf(out, 129, "%s", b.owner);
    else
        snprintf(out, 129, "%s", r->access_key ? r->access_key : "anonymous");
    return out;
}

/* ---- canned ACL headers ---- */

static bool has_grant_headers(struct ol_s3_req *r)
{
    static const char *const grants[] = {"x-amz-grant-read", "x-amz-grant-write",
                                         "x-amz-grant-read-acp", "x-amz-grant-write-acp",
                                         "x-amz-grant-full-control"};
    for (size_t i = 0; i < sizeof(grants) / sizeof(*grants); i++)
        if (ol_s3_header(r, grants[i]))
            return true;
    return false;
}

/* The x-amz-acl header: 0 and *acl, or the error was sent. */
static int header_acl(struct ol_s3_req *r, enum ol_acl *acl, bool *present, bool *refused)
{
    *refused = false;
    *acl = OL_ACL_PRIVATE;
    if (has_grant_headers(r)) {
        *refused = true;
        return ol_s3_error(r, OL_S3_NotImplemented,
                           "x-amz-grant-* headers are not implemented by OpenLake: use a canned "
                           "ACL (x-amz-acl) or a bucket policy.");
    }
    const struct ol_slice *h = ol_s3_header(r, "x-amz-acl");
    *present = h != NULL;
    if (h && ol_acl_parse(h->p, h->n, acl) != 0) {
        *refused = true;
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "The canned ACL is not one of private, public-read, public-read-write, "
                           "authenticated-read, bucket-owner-read, bucket-owner-full-control.");
    }
    return 0;
}

static int acl_not_supported(struct ol_s3_req *r, bool *refused)
{
    *refused = true;
    return ol_s3_error(r, OL_S3_AccessControlListNotSupported, "The bucket does not allow ACLs");
}

int ol_s3_write_acl(struct ol_s3_req *r, enum ol_acl *acl, bool *refused)
{
    bool present;
    int rc = header_acl(r, acl, &present, refused);
    if (*refused || *acl == OL_ACL_PRIVATE)
        return rc;
    struct ol_access_bucket b;
    rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0) {
        *refused = true;
        return ol_s3_error_from(r, rc);
    }
    if (b.ownership == OL_OWNERSHIP_ENFORCED)
        return acl_not_supported(r, refused);
    return 0;
}

struct ol_obj_attr ol_s3_acl_attr(enum ol_acl acl)
{
    const char *n = acl == OL_ACL_PRIVATE ? NULL : ol_acl_name(acl);
    return (struct ol_obj_attr){OL_ACCESS_OBJECT_ACL_ATTR, n, n ? strlen(n) : 0};
}

int ol_s3_bucket_access_parse(struct ol_s3_req *r, struct ol_access_bucket *rec, bool *refused)
{
    memset(rec, 0, sizeof(*rec));
    bool present;
    int rc = header_acl(r, &rec->acl, &present, refused);
    if (*refused)
        return rc;
    const struct ol_slice *own = ol_s3_header(r, "x-amz-object-ownership");
    if (own && ol_access_ownership_parse(own->p, own->n, &rec->ownership) != 0) {
        *refused = true;
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "x-amz-object-ownership must be BucketOwnerEnforced, "
                           "BucketOwnerPreferred or ObjectWriter.");
    }
    if (rec->ownership == OL_OWNERSHIP_ENFORCED && rec->acl != OL_ACL_PRIVATE)
        return acl_not_supported(r, refused);
    snprintf(rec->owner, sizeof(rec->owner), "%s", r->access_key ? r->access_key : "");
    rec->owner_recorded = true;
    return 0;
}

void ol_s3_bucket_created(struct ol_s3_req *r, const struct ol_access_bucket *rec)
{
    int rc = ol_access_bucket_put(r->ctx->obj, r->bucket, rec);
    if (rc < 0)
        ol_log_limited(OL_LOG_WARN, "bucket %s: owner not recorded: %s", r->bucket,
                       ol_strerror(rc));
}

/* ---- ?policy ---- */

int ol_s3_put_bucket_policy(struct ol_s3_req *r)
{
    char *doc = NULL;
    size_t len = 0;
    struct ol_policy *p = NULL;
    char err[200];
    int rc = ol_s3_read_doc(r, OL_POLICY_MAX_BYTES, &doc, &len);
    if (rc == -EBADMSG) {
        rc = ol_s3_error(r, OL_S3_MalformedPolicy, "Policies must be no larger than 20 KB");
        goto out;
    }
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    rc = ol_policy_parse(doc, len, r->bucket, &p, err, sizeof(err));
    if (rc == -EINVAL || rc == -E2BIG) {
        rc = ol_s3_error(r, OL_S3_MalformedPolicy,
                         rc == -E2BIG ? "The policy has too many statements or entries" : err);
        goto out;
    }
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    rc = ol_access_policy_put(r->ctx->obj, r->bucket, doc, len);
    rc = rc < 0 ? ol_s3_error_from(r, rc) : ol_s3_send_empty(r, 204, NULL, 0);
out:
    ol_policy_free(p);
    free(doc);
    return rc;
}

int ol_s3_get_bucket_policy(struct ol_s3_req *r)
{
    char *doc = malloc(OL_POLICY_MAX_BYTES + 1);
    if (!doc)
        return ol_s3_error_from(r, -ENOMEM);
    ssize_t n = ol_obj_bucket_config_get(r->ctx->obj, r->bucket, OL_ACCESS_POLICY_SETTING, doc,
                                         OL_POLICY_MAX_BYTES);
    int rc;
    if (n == -OL_ENOCONFIG) {
        rc = ol_s3_error(r, OL_S3_NoSuchBucketPolicy, "The bucket policy does not exist");
    } else if (n < 0) {
        rc = ol_s3_error_from(r, (int)n);
    } else {
        struct ol_http_hdr h[] = {{"Content-Type", "application/json"},
                                  {"x-amz-request-id", r->request_id}};
        rc = ol_http_respond(r->conn, 200, h, 2, doc, (size_t)n);
    }
    free(doc);
    return rc;
}

int ol_s3_delete_bucket_policy(struct ol_s3_req *r)
{
    int rc = ol_access_policy_put(r->ctx->obj, r->bucket, NULL, 0);
    if (rc < 0 && rc != -OL_ENOCONFIG)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 204, NULL, 0);
}

/* ---- ?acl ---- */

#define GRANTEE_USER                                                                               \
    "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "                            \
    "xsi:type=\"CanonicalUser\"><ID>%s</ID><DisplayName>%s</DisplayName></Grantee>"
#define GRANTEE_GROUP                                                                              \
    "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "                            \
    "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/global/%s</URI></Grantee>"

/* The AccessControlPolicy document of a canned ACL.  Access keys are
 * [A-Za-z0-9._-] (cfg.c), so they need no escaping. */
static int send_acl(struct ol_s3_req *r, const char *owner, enum ol_acl acl)
{
    char buf[2048];
    int n = snprintf(buf, sizeof(buf),
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                     "<Owner><ID>%s</ID><DisplayName>%s</DisplayName></Owner>"
                     "<AccessControlList><Grant>" GRANTEE_USER
                     "<Permission>FULL_CONTROL</Permission></Grant>",
                     owner, owner, owner, owner);
    const char *group = acl == OL_ACL_AUTHENTICATED_READ ? "AuthenticatedUsers" : "AllUsers";
    if (acl != OL_ACL_PRIVATE)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n,
                      "<Grant>" GRANTEE_GROUP "<Permission>READ</Permission></Grant>", group);
    if (acl == OL_ACL_PUBLIC_READ_WRITE)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n,
                      "<Grant>" GRANTEE_GROUP "<Permission>WRITE</Permission></Grant>", group);
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, "</AccessControlList></AccessControlPolicy>");
    OL_ASSERT(n > 0 && (size_t)n < sizeof(buf));
    struct ol_xml x = {.buf = buf, .len = (size_t)n, .cap = sizeof(buf)};
    return ol_s3_send_xml(r, 200, &x);
}

/* An AccessControlPolicy body: the grants it lists, reduced to the canned
 * ACL they amount to. */
struct acl_doc {
    bool in_grant;
    char uri[128];
    char id[129];
    char perm[32];
    bool owner_full;
    bool all_read, all_write, auth_read;
    bool other; /* a grant no canned ACL has */
    const char *owner;
};

#define GRANT_PATH "AccessControlPolicy/AccessControlList/Grant"

static int acl_elem(void *ctx, const char *path, bool start)
{
    struct acl_doc *d = ctx;
    if (strcmp(path, GRANT_PATH) != 0)
        return 0;
    if (start) {
        d->uri[0] = d->id[0] = d->perm[0] = 0;
        return 0;
    }
    const char *g = strrchr(d->uri, '/');
    g = g ? g + 1 : "";
    if (d->id[0] && strcmp(d->id, d->owner) == 0 && strcmp(d->perm, "FULL_CONTROL") == 0)
        d->owner_full = true;
    else if (d->uri[0] && strcmp(g, "AllUsers") == 0 && strcmp(d->perm, "READ") == 0)
        d->all_read = true;
    else if (d->uri[0] && strcmp(g, "AllUsers") == 0 && strcmp(d->perm, "WRITE") == 0)
        d->all_write = true;
    else if (d->uri[0] && strcmp(g, "AuthenticatedUsers") == 0 && strcmp(d->perm, "READ") == 0)
        d->auth_read = true;
    else
        d->other = true;
    return 0;
}

static int acl_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct acl_doc *d = ctx;
    char *dst = NULL;
    size_t cap = 0;
    if (strcmp(path, GRANT_PATH "/Grantee/URI") == 0) {
        dst = d->uri;
        cap = sizeof(d->uri);
    } else if (strcmp(path, GRANT_PATH "/Grantee/ID") == 0) {
        dst = d->id;
        cap = sizeof(d->id);
    } else if (strcmp(path, GRANT_PATH "/Permission") == 0) {
        dst = d->perm;
        cap = sizeof(d->perm);
    } else if (strcmp(path, GRANT_PATH "/Grantee/EmailAddress") == 0) {
        d->other = true;
        return 0;
    } else {
        return 0;
    }
    size_t have = strlen(dst);
    if (have + len >= cap) {
        d->other = true;
        return 0;
    }
    memcpy(dst + have, text, len);
    dst[have + len] = 0;
    return 0;
}

/* The ACL a PutBucketAcl/PutObjectAcl asks for: the x-amz-acl header, or
 * an AccessControlPolicy body that amounts to a canned ACL.  0, or the
 * error was sent. */
static int requested_acl(struct ol_s3_req *r, const char *owner, enum ol_acl *acl, bool *refused)
{
    bool present;
    int rc = header_acl(r, acl, &present, refused);
    if (*refused || present)
        return rc;
    char *doc = NULL;
    size_t len = 0;
    rc = ol_s3_read_doc(r, ACL_DOC_MAX, &doc, &len);
    *refused = true;
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    if (len == 0) {
        rc = ol_s3_error(r, OL_S3_MissingSecurityHeader,
                         "Your request was missing a required header: x-amz-acl, or an "
                         "AccessControlPolicy body.");
        goto out;
    }
    struct acl_doc d = {.owner = owner};
    if (ol_xml_parse(doc, len, acl_elem, acl_text, &d) != 0) {
        rc = ol_s3_error(r, OL_S3_MalformedACLError,
                         "The XML you provided was not well-formed or did not validate against "
                         "our published schema.");
        goto out;
    }
    if (d.other || !d.owner_full || (d.all_write && !d.all_read) ||
        (d.auth_read && (d.all_read || d.all_write))) {
        rc = ol_s3_error(r, OL_S3_NotImplemented,
                         "Only grants that amount to a canned ACL (private, public-read, "
                         "public-read-write, authenticated-read) with the owner's FULL_CONTROL "
                         "are implemented by OpenLake.");
        goto out;
    }
    *acl = d.all_write   ? OL_ACL_PUBLIC_READ_WRITE
           : d.all_read  ? OL_ACL_PUBLIC_READ
           : d.auth_read ? OL_ACL_AUTHENTICATED_READ
                         : OL_ACL_PRIVATE;
    *refused = false;
    rc = 0;
out:
    free(doc);
    return rc;
}

int ol_s3_get_bucket_acl(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return send_acl(r, b.owner, b.ownership == OL_OWNERSHIP_ENFORCED ? OL_ACL_PRIVATE : b.acl);
}

int ol_s3_put_bucket_acl(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    bool refused;
    enum ol_acl acl;
    rc = requested_acl(r, b.owner, &acl, &refused);
    if (refused)
        return rc;
    if (b.ownership == OL_OWNERSHIP_ENFORCED && acl != OL_ACL_PRIVATE)
        return acl_not_supported(r, &refused);
    b.acl = acl;
    b.owner_recorded = true;
    rc = ol_access_bucket_put(r->ctx->obj, r->bucket, &b);
    return rc < 0 ? ol_s3_error_from(r, rc) : ol_s3_send_empty(r, 200, NULL, 0);
}

int ol_s3_get_object_acl(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_obj_reader *rd;
    rc =
        ol_obj_read_open_v(r->ctx->obj, r->bucket, r->key, r->key_len, ol_s3_version_param(r), &rd);
    if (rc < 0)
        return ol_s3_version_open_error(r, rc, ol_s3_version_param(r));
    const uint8_t *v = NULL;
    size_t vl = 0;
    enum ol_acl acl = OL_ACL_PRIVATE;
    if (ol_obj_read_attr(rd, OL_ACCESS_OBJECT_ACL_ATTR, &v, &vl) == 0 &&
        ol_acl_parse((const char *)v, vl, &acl) != 0)
        acl = OL_ACL_PRIVATE;
    ol_obj_read_close(rd);
    return send_acl(r, b.owner, b.ownership == OL_OWNERSHIP_ENFORCED ? OL_ACL_PRIVATE : acl);
}

int ol_s3_put_object_acl(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    bool refused;
    enum ol_acl acl;
    rc = requested_acl(r, b.owner, &acl, &refused);
    if (refused)
        return rc;
    if (b.ownership == OL_OWNERSHIP_ENFORCED && acl != OL_ACL_PRIVATE)
        return acl_not_supported(r, &refused);
    struct ol_obj_attr a = ol_s3_acl_attr(acl);
    char vid[OL_STORE_VID_MAX];
    rc = ol_obj_attr_put_v(r->ctx->obj, r->bucket, r->key, r->key_len, ol_s3_version_param(r),
                           a.name, a.val, a.len, vid);
    if (rc == -ENOENT && !a.val)
        rc = 0; /* private already */
    if (rc < 0)
        return ol_s3_version_open_error(r, rc, ol_s3_version_param(r));
    return ol_s3_send_empty(r, 200, NULL, 0);
}

/* ---- ?ownershipControls ---- */

struct own_doc {
    char rule[32];
    unsigned rules;
    bool bad;
};

static int own_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct own_doc *d = ctx;
    if (strcmp(path, "OwnershipControls/Rule/ObjectOwnership") != 0)
        return 0;
    size_t have = strlen(d->rule);
    if (have + len >= sizeof(d->rule)) {
        d->bad = true;
        return 0;
    }
    memcpy(d->rule + have, text, len);
    d->rule[have + len] = 0;
    return 0;
}

static int own_elem(void *ctx, const char *path, bool start)
{
    struct own_doc *d = ctx;
    if (start && strcmp(path, "OwnershipControls/Rule") == 0)
        d->rules++;
    return 0;
}

int ol_s3_put_bucket_ownership(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char *doc = NULL;
    size_t len = 0;
    rc = ol_s3_read_doc(r, 4096, &doc, &len);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct own_doc d = {{0}, 0, false};
    enum ol_ownership own;
    if (ol_xml_parse(doc, len, own_elem, own_text, &d) != 0 || d.bad || d.rules != 1 ||
        ol_access_ownership_parse(d.rule, strlen(d.rule), &own) != 0) {
        free(doc);
        return ol_s3_error(r, OL_S3_MalformedXML,
                           "The XML you provided was not well-formed or did not validate "
                           "against our published schema.");
    }
    free(doc);
    b.ownership = own;
    b.owner_recorded = true;
    /* S3 drops the ACLs when they are turned off; so does a later re-enable
     * here: the bucket's canned ACL goes back to private. */
    if (own == OL_OWNERSHIP_ENFORCED)
        b.acl = OL_ACL_PRIVATE;
    rc = ol_access_bucket_put(r->ctx->obj, r->bucket, &b);
    return rc < 0 ? ol_s3_error_from(r, rc) : ol_s3_send_empty(r, 200, NULL, 0);
}

int ol_s3_get_bucket_ownership(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    if (b.ownership == OL_OWNERSHIP_UNSET)
        return ol_s3_error(r, OL_S3_OwnershipControlsNotFoundError,
                           "The bucket ownership controls were not found");
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "OwnershipControls");
    ol_xml_open(&x, "Rule");
    ol_xml_str(&x, "ObjectOwnership", ol_access_ownership_name(b.ownership));
    ol_xml_close(&x);
    ol_xml_end_doc(&x);
    rc = x.failed ? ol_s3_error_from(r, -ENOMEM) : ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
    return rc;
}

int ol_s3_delete_bucket_ownership(struct ol_s3_req *r)
{
    struct ol_access_bucket b;
    int rc = ol_access_bucket_get(r->ctx->obj, r->ctx->cfg, r->bucket, &b);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    b.ownership = OL_OWNERSHIP_UNSET;
    b.owner_recorded = true;
    rc = ol_access_bucket_put(r->ctx->obj, r->bucket, &b);
    return rc < 0 ? ol_s3_error_from(r, rc) : ol_s3_send_empty(r, 204, NULL, 0);
}
