/* Access control: who may do what to a bucket and its objects, for every
 * front end (the S3 router, the native protocol) and every storage mode.
 *
 * The rules live in the bucket's settings in the one object layer
 * (ol_obj_bucket_config_put/get, so one drive, erasure sets and the
 * cluster keep them the same way):
 *   OL_ACCESS_SETTING         "owner=KEY\nacl=NAME\nownership=NAME\n"
 *   OL_ACCESS_POLICY_SETTING  the bucket policy document, as put (policy.h)
 * and an object's canned ACL in its attribute OL_ACCESS_OBJECT_ACL_ATTR
 * (absent: private).
 *
 * The decision (ol_access_check), in this order:
 *   1. an admin (cfg admin_users) may do anything;
 *   2. the bucket policy's own actions (s3:Get/Put/DeleteBucketPolicy) are
 *      the owner's alone, whatever the policy says (an owner cannot lock
 *      themselves out of fixing it);
 *   3. a policy statement that denies the request wins, for everyone,
 *      owner included;
 *   4. the owner may do anything else;
 *   5. a policy statement that allows it;
 *   6. unless the bucket's ownership is BucketOwnerEnforced: the bucket's
 *      canned ACL, then (object reads) the object's (acl.h);
 *   7. otherwise denied.
 * Anonymous requests (user NULL) match only "*" principals and public ACLs.
 * Buckets created before ownership existed (no record) belong to the
 * default owner: the first admin_users entry, else the first configured
 * user.
 *
 * Cost and caching: each thread keeps the access record and the parsed
 * policy of the buckets it served last (OL_ACCESS_CACHE_SLOTS), so a
 * request of the owner costs a cache lookup and no store read.  An entry
 * is reloaded after any change made through this module in this process
 * (a generation count) and after OL_ACCESS_CACHE_TTL_MS, which bounds how
 * long a change made on another node of a cluster takes to apply here.
 * Object ACLs are read from the object (one index lookup) only when
 * nothing else allowed the request.
 *
 * Threads: any loop fiber or plain thread; the calls that read the store
 * may yield the fiber (as the object layer does).  The cache is per
 * thread and never touched across a yield.  Entries are keyed by the
 * object layer's address: a process that closes one and opens another
 * (tests) calls ol_access_changed() in between.  A thread's entries live
 * as long as the thread.
 *
 * Errors: 0 or negative: -EACCES (denied), -OL_ENOBUCKET, -EIO (a stored
 * record or policy that no longer parses: fail closed), -ENOMEM, and the
 * object layer's read errors (-OL_EQUORUM...).
 */
#ifndef OL_ACCESS_ACCESS_H
#define OL_ACCESS_ACCESS_H

#include <stdbool.h>
#include <stddef.h>

#include "access/acl.h"

struct ol_obj;
struct ol_cfg;

#define OL_ACCESS_SETTING "access"
#define OL_ACCESS_POLICY_SETTING "policy"
#define OL_ACCESS_OBJECT_ACL_ATTR "acl"
#define OL_ACCESS_CACHE_SLOTS 32u
#define OL_ACCESS_CACHE_TTL_MS 1000u

enum ol_ownership {
    OL_OWNERSHIP_UNSET = 0,     /* no OwnershipControls: ACLs apply */
    OL_OWNERSHIP_ENFORCED,      /* BucketOwnerEnforced: ACLs off */
    OL_OWNERSHIP_PREFERRED,     /* BucketOwnerPreferred */
    OL_OWNERSHIP_OBJECT_WRITER, /* ObjectWriter (objects still belong to the bucket's owner) */
};
int ol_access_ownership_parse(const char *s, size_t n, enum ol_ownership *out); /* 0, -EINVAL */
const char *ol_access_ownership_name(enum ol_ownership o);

struct ol_access_bucket {
    char owner[129];     /* access key */
    bool owner_recorded; /* false: a bucket from before ownership (default owner) */
    enum ol_acl acl;
    enum ol_ownership ownership;
};

/* Whether user (NUL-terminated access key; NULL: anonymous) has the admin
 * role (cfg->admin_users, a comma-separated list). */
bool ol_access_is_admin(const struct ol_cfg *cfg, const char *user);
/* The owner of buckets without a record ("" when no user is configured).
 * The string is cfg's or this thread's: valid until the thread's next call. */
const char *ol_access_default_owner(const struct ol_cfg *cfg);

/* The bucket's record (cached, see above).  0, -OL_ENOBUCKET, -EIO... */
int ol_access_bucket_get(struct ol_obj *o, const struct ol_cfg *cfg, const char *bucket,
                         struct ol_access_bucket *out);
/* Stores the bucket's record (the bucket must exist) and invalidates the
 * caches of this process. */
int ol_access_bucket_put(struct ol_obj *o, const char *bucket, const struct ol_access_bucket *b);
/* Stores a policy document that ol_policy_parse accepted for this bucket
 * (doc NULL: deletes it; -OL_ENOCONFIG when there was none), and
 * invalidates the caches of this process. */
int ol_access_policy_put(struct ol_obj *o, const char *bucket, const char *doc, size_t len);

/* Makes every thread's cache of this process reload (the setters above
 * call it; a front end that changes access records another way must). */
void ol_access_changed(void);

/* One request, as every front end describes it.  Borrowed, NUL-terminated
 * strings. */
struct ol_access_req {
    const char *user;   /* authenticated access key; NULL: anonymous */
    const char *action; /* IAM action name: "s3:GetObject", "s3:ListBucket"... */
    const char *bucket;
    const char *key; /* NULL: the request is on the bucket */
    size_t key_len;
    const char *source_ip; /* the client's address as text; NULL or "": unknown */
    bool secure_transport; /* TLS */
    const char *prefix;    /* a listing's prefix (s3:prefix); NULL: none */
    /* The request names its keys later (DeleteObjects): allowed when the
     * action could be allowed on some key (owner, an Allow statement for
     * this principal and action whatever its resource, the bucket's ACL);
     * the front end then checks each key on its own. */
    bool any_key;
};

/* 0 when q may proceed, -EACCES when not, or an error (see above). */
int ol_access_check(struct ol_obj *o, const struct ol_cfg *cfg, const struct ol_access_req *q);

#endif
