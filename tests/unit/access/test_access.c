/* access/: the policy parser and evaluator, canned ACLs, and
 * ol_access_check over a one-drive object layer (owner, admin, default
 * owner of old buckets, Deny before the owner, object ACLs, the cache
 * following changes). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "access/access.h"
#include "access/acl.h"
#include "access/policy.h"
#include "check.h"
#include "core/cfg.h"
#include "core/log.h"
#include "obj/obj.h"
#include "store/store.h"

static char root[256];

static struct ol_policy *parse(const char *doc, const char *bucket, int want)
{
    struct ol_policy *p = NULL;
    char err[200];
    int rc = ol_policy_parse(doc, strlen(doc), bucket, &p, err, sizeof(err));
    if (rc != want)
        fprintf(stderr, "parse(%s) = %d (%s), want %d\n", doc, rc, err, want);
    CHECK(rc == want);
    CHECK(want != 0 || p != NULL);
    CHECK(want == 0 || (p == NULL && (want != -EINVAL || err[0])));
    return p;
}

static enum ol_policy_effect eval(const struct ol_policy *p, const char *user, const char *action,
                                  const char *key, const char *ip, bool tls, const char *prefix)
{
    struct ol_policy_req q = {
        .user = user,
        .action = action,
        .bucket = "bkt",
        .key = key,
        .key_len = key ? strlen(key) : 0,
        .source_ip = ip,
        .secure_transport = tls,
        .prefix = prefix,
    };
    return ol_policy_eval(p, &q);
}

static void test_glob(void)
{
    CHECK(ol_policy_glob("s3:Get*", "s3:GetObject", 12, false));
    CHECK(ol_policy_glob("S3:get*", "s3:GetObject", 12, true));
    CHECK(!ol_policy_glob("S3:get*", "s3:GetObject", 12, false));
    CHECK(ol_policy_glob("*", "", 0, false));
    CHECK(ol_policy_glob("a?c", "abc", 3, false));
    CHECK(!ol_policy_glob("a?c", "ac", 2, false));
    CHECK(ol_policy_glob("a*b*c", "axxbyyc", 7, false));
    CHECK(!ol_policy_glob("a*b*c", "axxbyy", 6, false));
    CHECK(ol_policy_glob("x/*", "x/", 2, false));
    CHECK(!ol_policy_glob("x", "xy", 2, false));
}

static void test_parse_errors(void)
{
    static const char *const bad[] = {
        "",
        "nope",
        "[]",
        "{}",
        "{\"Statement\":[]}",
        "{\"Version\":\"2099-01-01\",\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\","
        "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"bob\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":{\"Service\":\"x\"},"
        "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"arn:aws:iam::1:role/r\"},"
        "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"ec2:Run\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":[],"
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bktx/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Condition\":{\"IpAddress\":{\"aws:SourceIp\":"
        "\"1.2.3.4/33\"}}}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Condition\":{\"StringEquals\":{\"aws:SourceIp\":"
        "\"1.2.3.4\"}}}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Condition\":{\"Bool\":{\"aws:SecureTransport\":"
        "\"maybe\"}}}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Condition\":{\"StringEquals\":{\"s3:unknown\":"
        "\"x\"}}}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"NotAction\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\"}}",
        "{\"Statement\":{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Extra\":1}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        parse(bad[i], "bkt", -EINVAL);
    /* Too large. */
    static char big[OL_POLICY_MAX_BYTES + 2];
    memset(big, ' ', sizeof(big) - 1);
    big[0] = '{';
    big[sizeof(big) - 2] = '}';
    parse(big, "bkt", -E2BIG);
}

static void test_eval(void)
{
    struct ol_policy *p = parse(
        "{\"Version\":\"2012-10-17\",\"Statement\":["
        "{\"Sid\":\"a\",\"Effect\":\"Allow\",\"Principal\":{\"AWS\":[\"arn:aws:iam::12:user/bob\","
        "\"carol\"]},\"Action\":[\"s3:Get*\",\"s3:ListBucket\"],"
        "\"Resource\":[\"arn:aws:s3:::bkt\",\"arn:aws:s3:::bkt/*\"]},"
        "{\"Effect\":\"Deny\",\"Principal\":{\"AWS\":\"*\"},\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/secret*\"},"
        "{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/pub/*\",\"Condition\":{\"IpAddress\":{\"aws:SourceIp\":"
        "[\"10.0.0.0/8\",\"2001:db8::/32\"]},\"Bool\":{\"aws:SecureTransport\":\"false\"}}},"
        "{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:ListBucket\","
        "\"Resource\":\"arn:aws:s3:::bkt\",\"Condition\":{\"StringLike\":{\"s3:prefix\":"
        "[\"pub/*\",\"\"]}}},"
        "{\"Effect\":\"Deny\",\"Principal\":\"*\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::bkt/*\",\"Condition\":{\"NotIpAddress\":{\"aws:SourceIp\":"
        "\"127.0.0.1\"}}}]}",
        "bkt", 0);
    if (!p)
        return;
    CHECK(eval(p, "bob", "s3:GetObject", "a", NULL, false, NULL) == OL_POLICY_ALLOW);
    CHECK(eval(p, "carol", "s3:GetObjectTagging", "a", NULL, false, NULL) == OL_POLICY_ALLOW);
    CHECK(eval(p, "bob", "s3:ListBucket", NULL, NULL, false, "x") == OL_POLICY_ALLOW);
    CHECK(eval(p, "dave", "s3:GetObject", "a", NULL, false, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, "bob", "s3:DeleteObject", "a", NULL, false, NULL) == OL_POLICY_NONE);
    /* Deny wins over the Allow of the same request. */
    CHECK(eval(p, "bob", "s3:GetObject", "secret/x", NULL, false, NULL) == OL_POLICY_DENY);
    CHECK(eval(p, NULL, "s3:GetObject", "secret/x", NULL, false, NULL) == OL_POLICY_DENY);
    /* Anonymous: only "*" statements, under their conditions. */
    CHECK(eval(p, NULL, "s3:GetObject", "pub/a", "10.1.2.3", false, NULL) == OL_POLICY_ALLOW);
    CHECK(eval(p, NULL, "s3:GetObject", "pub/a", "2001:db8:1::5", false, NULL) == OL_POLICY_ALLOW);
    CHECK(eval(p, NULL, "s3:GetObject", "pub/a", "11.1.2.3", false, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, NULL, "s3:GetObject", "pub/a", "10.1.2.3", true, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, NULL, "s3:GetObject", "pub/a", NULL, false, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, NULL, "s3:GetObject", "a", "10.1.2.3", false, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, NULL, "s3:ListBucket", NULL, NULL, false, "pub/x") == OL_POLICY_ALLOW);
    CHECK(eval(p, NULL, "s3:ListBucket", NULL, NULL, false, "") == OL_POLICY_ALLOW);
    CHECK(eval(p, NULL, "s3:ListBucket", NULL, NULL, false, "priv/") == OL_POLICY_NONE);
    CHECK(eval(p, NULL, "s3:ListBucket", NULL, NULL, false, NULL) == OL_POLICY_NONE);
    /* NotIpAddress: a Deny for everyone but 127.0.0.1. */
    CHECK(eval(p, "bob", "s3:PutObject", "a", "127.0.0.1", false, NULL) == OL_POLICY_NONE);
    CHECK(eval(p, "bob", "s3:PutObject", "a", "127.0.0.2", false, NULL) == OL_POLICY_DENY);
    /* A bucket action does not match an object resource, nor the reverse. */
    CHECK(eval(p, NULL, "s3:GetObject", NULL, "10.1.2.3", false, NULL) == OL_POLICY_NONE);
    struct ol_policy_req q = {.user = "bob", .action = "s3:DeleteObject", .bucket = "bkt"};
    CHECK(!ol_policy_may_allow(p, &q));
    q.action = "s3:GetObject";
    CHECK(ol_policy_may_allow(p, &q));
    CHECK(ol_policy_bytes(p) > 0);
    ol_policy_free(p);

    /* StringNotEquals passes where the key is missing; a single statement
     * object instead of a list. */
    p = parse("{\"Statement\":{\"Effect\":\"Deny\",\"Principal\":\"*\",\"Action\":\"s3:*\","
              "\"Resource\":\"arn:aws:s3:::bkt\",\"Condition\":{\"StringNotEquals\":"
              "{\"s3:prefix\":\"ok/\"}}}}",
              "bkt", 0);
    if (p) {
        CHECK(eval(p, "bob", "s3:ListBucket", NULL, NULL, false, NULL) == OL_POLICY_DENY);
        CHECK(eval(p, "bob", "s3:ListBucket", NULL, NULL, false, "ok/") == OL_POLICY_NONE);
        CHECK(eval(p, "bob", "s3:ListBucket", NULL, NULL, false, "no/") == OL_POLICY_DENY);
        ol_policy_free(p);
    }
}

static void test_acl(void)
{
    enum ol_acl a;
    CHECK_RC(ol_acl_parse("public-read", 11, &a), 0);
    CHECK(a == OL_ACL_PUBLIC_READ);
    CHECK_RC(ol_acl_parse("bucket-owner-full-control", 25, &a), 0);
    CHECK(a == OL_ACL_PRIVATE);
    CHECK_RC(ol_acl_parse("public", 6, &a), -EINVAL);
    CHECK(strcmp(ol_acl_name(OL_ACL_AUTHENTICATED_READ), "authenticated-read") == 0);
    CHECK(ol_acl_allows(OL_ACL_PUBLIC_READ, true, false, "s3:GetObject"));
    CHECK(!ol_acl_allows(OL_ACL_PUBLIC_READ, true, false, "s3:PutObject"));
    CHECK(!ol_acl_allows(OL_ACL_PUBLIC_READ, false, false, "s3:GetObject"));
    CHECK(ol_acl_allows(OL_ACL_PUBLIC_READ, false, false, "s3:ListBucket"));
    CHECK(ol_acl_allows(OL_ACL_PUBLIC_READ_WRITE, false, false, "s3:PutObject"));
    CHECK(!ol_acl_allows(OL_ACL_AUTHENTICATED_READ, true, false, "s3:GetObject"));
    CHECK(ol_acl_allows(OL_ACL_AUTHENTICATED_READ, true, true, "s3:GetObject"));
    CHECK(!ol_acl_allows(OL_ACL_PRIVATE, true, true, "s3:GetObject"));
}

static int put_object(struct ol_obj *o, const char *bucket, const char *key, const char *acl)
{
    struct ol_obj_target t = {.bucket = bucket, .key = key, .key_len = strlen(key)};
    struct ol_obj_writer *w;
    int rc = ol_obj_write_begin(o, &t, 3, &w);
    if (rc < 0)
        return rc;
    rc = ol_obj_write(w, "abc", 3);
    if (rc < 0) {
        ol_obj_write_abort(w);
        return rc;
    }
    struct ol_obj_attr a = {OL_ACCESS_OBJECT_ACL_ATTR, acl, acl ? strlen(acl) : 0};
    struct ol_obj_info info = {.mtime_ns = 1, .attrs = acl ? &a : NULL, .nattrs = acl ? 1 : 0};
    snprintf(info.etag, sizeof(info.etag), "900150983cd24fb0d6963f7d28e17f72");
    char vid[OL_STORE_VID_MAX];
    return ol_obj_write_commit_object_v(w, &info, NULL, vid);
}

static int check(struct ol_obj *o, const struct ol_cfg *cfg, const char *user, const char *action,
                 const char *bucket, const char *key)
{
    struct ol_access_req q = {.user = user,
                              .action = action,
                              .bucket = bucket,
                              .key = key,
                              .key_len = key ? strlen(key) : 0,
                              .source_ip = "127.0.0.1"};
    return ol_access_check(o, cfg, &q);
}

static void test_check(void)
{
    static struct ol_cfg cfg;
    ol_cfg_defaults(&cfg);
    CHECK_RC(ol_cfg_add_user(&cfg, "first", "first-secret"), 0);
    CHECK_RC(ol_cfg_add_user(&cfg, "alice", "alice-secret"), 0);
    CHECK_RC(ol_cfg_add_user(&cfg, "bob", "bob-secret1"), 0);
    CHECK_RC(ol_cfg_add_user(&cfg, "root", "root-secret"), 0);
    char err[128];
    CHECK_RC(ol_cfg_set(&cfg, "admin_users", "x-admin, root", err, sizeof(err)), 0);
    CHECK(ol_access_is_admin(&cfg, "root"));
    CHECK(ol_access_is_admin(&cfg, "x-admin"));
    CHECK(!ol_access_is_admin(&cfg, "roo"));
    CHECK(!ol_access_is_admin(&cfg, NULL));
    CHECK(strcmp(ol_access_default_owner(&cfg), "x-admin") == 0);

    char dir[300];
    snprintf(dir, sizeof(dir), "%s/store", root);
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    so.segment_bytes = 4u << 20;
    so.map_bytes = 1ull << 30;
    so.max_loops = 2;
    struct ol_store *st = NULL;
    struct ol_obj *o = NULL;
    CHECK_RC(ol_store_open(&st, dir, &so), 0);
    if (!st)
        return;
    CHECK_RC(ol_obj_open_store(st, &o), 0);
    if (!o)
        goto out;
    CHECK_RC(ol_obj_bucket_create(o, "old", 1), 0);
    CHECK_RC(ol_obj_bucket_create(o, "mine", 1), 0);
    CHECK_RC(check(o, &cfg, "alice", "s3:GetObject", "nope", "k"), -OL_ENOBUCKET);

    /* A bucket with no record belongs to the default owner. */
    struct ol_access_bucket b;
    CHECK_RC(ol_access_bucket_get(o, &cfg, "old", &b), 0);
    CHECK(!b.owner_recorded && strcmp(b.owner, "x-admin") == 0);
    CHECK_RC(check(o, &cfg, "alice", "s3:ListBucket", "old", NULL), -EACCES);
    CHECK_RC(check(o, &cfg, "root", "s3:ListBucket", "old", NULL), 0);

    memset(&b, 0, sizeof(b));
    snprintf(b.owner, sizeof(b.owner), "alice");
    b.owner_recorded = true;
    CHECK_RC(ol_access_bucket_put(o, "mine", &b), 0);
    CHECK_RC(put_object(o, "mine", "pub", "public-read"), 0);
    CHECK_RC(put_object(o, "mine", "priv", NULL), 0);
    CHECK_RC(check(o, &cfg, "alice", "s3:PutObject", "mine", "x"), 0);
    CHECK_RC(check(o, &cfg, "alice", "s3:PutBucketPolicy", "mine", NULL), 0);
    CHECK_RC(check(o, &cfg, "bob", "s3:ListBucket", "mine", NULL), -EACCES);
    CHECK_RC(check(o, &cfg, "bob", "s3:GetObject", "mine", "priv"), -EACCES);
    CHECK_RC(check(o, &cfg, NULL, "s3:GetObject", "mine", "priv"), -EACCES);
    /* The object's public-read ACL lets anyone read it, and nothing else. */
    CHECK_RC(check(o, &cfg, NULL, "s3:GetObject", "mine", "pub"), 0);
    CHECK_RC(check(o, &cfg, NULL, "s3:DeleteObject", "mine", "pub"), -EACCES);
    CHECK_RC(check(o, &cfg, "bob", "s3:GetObject", "mine", "missing"), -EACCES);

    /* A policy: the cache sees it at once. */
    const char *doc = "{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"bob\"},"
                      "\"Action\":\"s3:*\",\"Resource\":[\"arn:aws:s3:::mine\","
                      "\"arn:aws:s3:::mine/*\"]},{\"Effect\":\"Deny\",\"Principal\":\"*\","
                      "\"Action\":\"s3:DeleteObject\",\"Resource\":\"arn:aws:s3:::mine/keep\"}]}";
    CHECK_RC(ol_access_policy_put(o, "mine", doc, strlen(doc)), 0);
    CHECK_RC(check(o, &cfg, "bob", "s3:ListBucket", "mine", NULL), 0);
    CHECK_RC(check(o, &cfg, "bob", "s3:GetObject", "mine", "priv"), 0);
    CHECK_RC(check(o, &cfg, "bob", "s3:PutBucketPolicy", "mine", NULL), -EACCES);
    CHECK_RC(check(o, &cfg, "alice", "s3:DeleteObject", "mine", "keep"), -EACCES);
    CHECK_RC(check(o, &cfg, "alice", "s3:DeleteObject", "mine", "other"), 0);
    CHECK_RC(check(o, &cfg, "root", "s3:DeleteObject", "mine", "keep"), 0);
    /* BucketOwnerEnforced turns the object's ACL off. */
    b.ownership = OL_OWNERSHIP_ENFORCED;
    CHECK_RC(ol_access_bucket_put(o, "mine", &b), 0);
    CHECK_RC(check(o, &cfg, NULL, "s3:GetObject", "mine", "pub"), -EACCES);
    CHECK_RC(ol_access_policy_put(o, "mine", NULL, 0), 0);
    CHECK_RC(check(o, &cfg, "bob", "s3:ListBucket", "mine", NULL), -EACCES);
    /* A public-read bucket lists for anyone (ACLs back on). */
    b.ownership = OL_OWNERSHIP_UNSET;
    b.acl = OL_ACL_PUBLIC_READ;
    CHECK_RC(ol_access_bucket_put(o, "mine", &b), 0);
    CHECK_RC(check(o, &cfg, NULL, "s3:ListBucket", "mine", NULL), 0);
    CHECK_RC(check(o, &cfg, NULL, "s3:PutObject", "mine", "x"), -EACCES);
out:
    if (o)
        ol_obj_close(o);
    ol_store_close(st);
}

int main(void)
{
    ol_log_level = OL_LOG_WARN;
    if (check_mkdtemp(root, sizeof(root), "access") != 0)
        return 77;
    test_glob();
    test_parse_errors();
    test_eval();
    test_acl();
    test_check();
    check_rm_rf(root);
    return failures ? 1 : 0;
}
