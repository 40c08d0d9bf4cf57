/* Access control decisions and the per-thread cache of bucket rules (see
 * access.h). */
#include "access/access.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/policy.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "obj/obj.h"

/* ---- names ---- */

static const char *const own_names[] = {
    [OL_OWNERSHIP_UNSET] = "",
    [OL_OWNERSHIP_ENFORCED] = "BucketOwnerEnforced",
    [OL_OWNERSHIP_PREFERRED] = "BucketOwnerPreferred",
    [OL_OWNERSHIP_OBJECT_WRITER] = "ObjectWriter",
};

int ol_access_ownership_parse(const char *s, size_t n, enum ol_ownership *out)
{
    for (int i = OL_OWNERSHIP_ENFORCED; i <= OL_OWNERSHIP_OBJECT_WRITER; i++) {
        if (strlen(own_names[i]) == n && memcmp(own_names[i], s, n) == 0) {
            *out = (enum ol_ownership)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *ol_access_ownership_name(enum ol_ownership o)
{
    return o <= OL_OWNERSHIP_OBJECT_WRITER ? own_names[o] : "";
}

/* ---- users ---- */

bool ol_access_is_admin(const struct ol_cfg *cfg, const char *user)
{
    if (!user || !cfg)
        return false;
    size_t ul = strlen(user);
    const char *p = cfg->admin_users;
    /* Bounded by the setting's length: each round moves past a comma. */
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == ul && ul && memcmp(p, user, ul) == 0)
            return true;
        p = e;
    }
    return false;
}

const char *ol_access_default_owner(const struct ol_cfg *cfg)
{
    static __thread char first[129];
    const char *p = cfg->admin_users;
    while (*p == ' ' || *p == ',')
        p++;
    if (*p) {
        size_t n = strcspn(p, ", ");
        if (n >= sizeof(first))
            n = sizeof(first) - 1;
        memcpy(first, p, n);
        first[n] = 0;
        return first;
    }
    return cfg->nusers ? cfg->users[0].access_key : "";
}

/* ---- the stored record ---- */

static int record_parse(const char *s, size_t n, struct ol_access_bucket *b)
{
    const char *end = s + n;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        const char *eq = memchr(s, '=', (size_t)(le - s));
        if (!eq)
            return -EIO;
        size_t kl = (size_t)(eq - s), vl = (size_t)(le - eq - 1);
        const char *v = eq + 1;
        if (kl == 5 && memcmp(s, "owner", 5) == 0) {
            if (vl == 0 || vl >= sizeof(b->owner))
                return -EIO;
            memcpy(b->owner, v, vl);
            b->owner[vl] = 0;
            b->owner_recorded = true;
        } else if (kl == 3 && memcmp(s, "acl", 3) == 0) {
            if (ol_acl_parse(v, vl, &b->acl) != 0)
                return -EIO;
        } else if (kl == 9 && memcmp(s, "ownership", 9) == 0) {
            if (vl && ol_access_ownership_parse(v, vl, &b->ownership) != 0)
                return -EIO;
        }
        /* Unknown lines are a later version's: skipped. */
        s = le + 1;
    }
    return b->owner_recorded ? 0 : -EIO;
}

int ol_access_bucket_put(struct ol_obj *o, const char *bucket, const struct ol_access_bucket *b)
{
    char doc[256];
    int n = snprintf(doc, sizeof(doc), "owner=%s\nacl=%s\nownership=%s\n", b->owner,
                     ol_acl_name(b->acl), ol_access_ownership_name(b->ownership));
    if (n < 0 || (size_t)n >= sizeof(doc) || !b->owner[0])
        return -EINVAL;
    int rc = ol_obj_bucket_config_put(o, bucket, OL_ACCESS_SETTING, doc, (size_t)n);
    ol_access_changed();
    return rc;
}

int ol_access_policy_put(struct ol_obj *o, const char *bucket, const char *doc, size_t len)
{
    int rc = ol_obj_bucket_config_put(o, bucket, OL_ACCESS_POLICY_SETTING, doc, doc ? len : 0);
    ol_access_changed();
    return rc;
}

/* ---- the cache ---- */

static uint64_t access_gen = 1;

void ol_access_changed(void)
{
    __atomic_fetch_add(&access_gen, 1, __ATOMIC_RELEASE);
}

struct slot {
    const struct ol_obj *o;
    char bucket[64];
    uint64_t gen;
    uint64_t loaded_ms;
    uint64_t tick;
    struct ol_access_bucket b;
    struct ol_policy *policy;
};

static __thread struct slot cache[OL_ACCESS_CACHE_SLOTS];
static __thread uint64_t cache_tick;

static struct slot *cache_find(const struct ol_obj *o, const char *bucket, uint64_t gen,
                               uint64_t now_ms)
{
    for (size_t i = 0; i < OL_ACCESS_CACHE_SLOTS; i++) {
        struct slot *s = &cache[i];
        if (s->o == o && s->gen == gen && now_ms - s->loaded_ms < OL_ACCESS_CACHE_TTL_MS &&
            strcmp(s->bucket, bucket) == 0) {
            s->tick = ++cache_tick;
            return s;
        }
    }
    return NULL;
}

/* Installs a loaded entry (consumes policy) in the slot of the same bucket
 * or the least recently used one.  Never yields. */
static struct slot *cache_install(const struct ol_obj *o, const char *bucket, uint64_t gen,
                                  uint64_t now_ms, const struct ol_access_bucket *b,
                                  struct ol_policy *policy)
{
    struct slot *victim = &cache[0];
    for (size_t i = 0; i < OL_ACCESS_CACHE_SLOTS; i++) {
        struct slot *s = &cache[i];
        if (s->o == o && strcmp(s->bucket, bucket) == 0) {
            victim = s;
            break;
        }
        if (s->tick < victim->tick)
            victim = s;
    }
    ol_policy_free(victim->policy);
    victim->o = o;
    snprintf(victim->bucket, sizeof(victim->bucket), "%s", bucket);
    victim->gen = gen;
    victim->loaded_ms = now_ms;
    victim->tick = ++cache_tick;
    victim->b = *b;
    victim->policy = policy;
    return victim;
}

/* Reads the bucket's record and policy from the store (may yield). */
static int load(struct ol_obj *o, const struct ol_cfg *cfg, const char *bucket,
                struct ol_access_bucket *b, struct ol_policy **policy)
{
    char rec[512];
    *policy = NULL;
    memset(b, 0, sizeof(*b));
    ssize_t n = ol_obj_bucket_config_get(o, bucket, OL_ACCESS_SETTING, rec, sizeof(rec));
    if (n == -OL_ENOCONFIG) {
        snprintf(b->owner, sizeof(b->owner), "%s", ol_access_default_owner(cfg));
    } else if (n < 0) {
        return (int)n;
    } else if (record_parse(rec, (size_t)n, b) != 0) {
        return -EIO;
    }
    char *doc = malloc(OL_POLICY_MAX_BYTES + 1);
    if (!doc)
        return -ENOMEM;
    n = ol_obj_bucket_config_get(o, bucket, OL_ACCESS_POLICY_SETTING, doc, OL_POLICY_MAX_BYTES);
    int rc = 0;
    if (n >= 0) {
        char err[160];
        rc = ol_policy_parse(doc, (size_t)n, bucket, policy, err, sizeof(err));
        if (rc < 0 && rc != -ENOMEM)
            rc = -EIO;
    } else if (n != -OL_ENOCONFIG) {
        rc = (int)n;
    }
    free(doc);
    return rc;
}

/* The cached slot of bucket, loaded when missing or stale. */
static int lookup(struct ol_obj *o, const struct ol_cfg *cfg, const char *bucket, struct slot **out)
{
    uint64_t gen = __atomic_load_n(&access_gen, __ATOMIC_ACQUIRE);
    uint64_t now = ol_mono_ms();
    *out = cache_find(o, bucket, gen, now);
    if (*out)
        return 0;
    struct ol_access_bucket b;
    struct ol_policy *policy;
    int rc = load(o, cfg, bucket, &b, &policy);
    if (rc < 0)
        return rc;
    *out = cache_install(o, bucket, gen, now, &b, policy);
    return 0;
}

int ol_access_bucket_get(struct ol_obj *o, const struct ol_cfg *cfg, const char *bucket,
                         struct ol_access_bucket *out)
{
    struct slot *s;
    int rc = lookup(o, cfg, bucket, &s);
    if (rc == 0)
        *out = s->b;
    return rc;
}

/* ---- the decision ---- */

static bool is_policy_action(const char *a)
{
    return strcmp(a, "s3:PutBucketPolicy") == 0 || strcmp(a, "s3:GetBucketPolicy") == 0 ||
           strcmp(a, "s3:DeleteBucketPolicy") == 0;
}

int ol_access_check(struct ol_obj *o, const struct ol_cfg *cfg, const struct ol_access_req *q)
{
    if (ol_access_is_admin(cfg, q->user))
        return 0;
    struct slot *s;
    int rc = lookup(o, cfg, q->bucket, &s);
    if (rc < 0)
        return rc;
    bool owner = q->user && strcmp(q->user, s->b.owner) == 0;
    if (is_policy_action(q->action))
        return owner ? 0 : -EACCES;
    struct ol_policy_req pq = {
        .user = q->user,
        .action = q->action,
        .bucket = q->bucket,
        .key = q->key,
        .key_len = q->key_len,
        .source_ip = q->source_ip,
        .secure_transport = q->secure_transport,
        .prefix = q->prefix,
    };
    if (q->any_key) {
        bool acl = s->b.ownership != OL_OWNERSHIP_ENFORCED &&
                   ol_acl_allows(s->b.acl, false, q->user != NULL, q->action);
        return owner || acl || ol_policy_may_allow(s->policy, &pq) ? 0 : -EACCES;
    }
    enum ol_policy_effect e = ol_policy_eval(s->policy, &pq);
    if (e == OL_POLICY_DENY)
        return -EACCES;
    if (owner || e == OL_POLICY_ALLOW)
        return 0;
    if (s->b.ownership == OL_OWNERSHIP_ENFORCED)
        return -EACCES;
    if (ol_acl_allows(s->b.acl, false, q->user != NULL, q->action))
        return 0;
    /* The object's own ACL: only the reads it can grant are worth a lookup
     * (s is not used past this point: the read may yield). */
    if (!q->key || !ol_acl_allows(OL_ACL_PUBLIC_READ, true, true, q->action))
        return -EACCES;
    char v[32];
    ssize_t n =
        ol_obj_attr_get(o, q->bucket, q->key, q->key_len, OL_ACCESS_OBJECT_ACL_ATTR, v, sizeof(v));
    enum ol_acl acl;
    if (n < 0 || ol_acl_parse(v, (size_t)n, &acl) != 0)
        return -EACCES;
    return ol_acl_allows(acl, true, q->user != NULL, q->action) ? 0 : -EACCES;
}
