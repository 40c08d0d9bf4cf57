/* Bucket policies (see policy.h): cJSON parses the document, this file
 * checks it against the subset and keeps a flat copy to evaluate. */
#include "access/policy.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARN_S3 "arn:aws:s3:::"
#define ARN_IAM "arn:aws:iam::"

enum cond_op {
    OP_STR_EQ,
    OP_STR_NE,
    OP_STR_EQ_CI,
    OP_STR_NE_CI,
    OP_STR_LIKE,
    OP_STR_NOT_LIKE,
    OP_IP,
    OP_NOT_IP,
    OP_BOOL,
};

enum cond_key { KEY_SOURCE_IP, KEY_SECURE, KEY_PREFIX, KEY_USERNAME };

struct cidr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned bits;
};

struct cond {
    enum cond_op op;
    enum cond_key key;
    char **vals;        /* string and Bool operators */
    struct cidr *cidrs; /* Ip operators */
    size_t n;
};

struct stmt {
    bool deny;
    bool any_principal;
    char **principals; /* access keys */
    size_t nprincipals;
    char **actions;
    size_t nactions;
    char **resources; /* full ARNs (patterns) */
    size_t nresources;
    struct cond *conds;
    size_t nconds;
};

struct ol_policy {
    struct stmt *st;
    size_t n;
    size_t bytes;
};

/* ---- matching ---- */

static inline char fold_c(char c, bool fold)
{
    return fold && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

bool ol_policy_glob(const char *pat, const char *s, size_t n, bool fold)
{
    /* The classic backtracking of the last '*': each step moves s or the
     * star forward, so it ends within (n + 1) * (strlen(pat) + 1) steps. */
    size_t i = 0;
    const char *p = pat, *star = NULL;
    size_t star_i = 0;
    while (i < n) {
        if (*p == '*') {
            star = ++p;
            star_i = i;
        } else if (*p && (*p == '?' || fold_c(*p, fold) == fold_c(s[i], fold))) {
            p++;
            i++;
        } else if (star) {
            p = star;
            i = ++star_i;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

static bool cidr_parse(const char *s, struct cidr *c)
{
    char buf[64];
    size_t n = strlen(s);
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, s, n + 1);
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = 0;
        char *end;
        if (!slash[1])
            return false;
        bits = strtol(slash + 1, &end, 10);
        if (*end || bits < 0)
            return false;
    }
    memset(c, 0, sizeof(*c));
    if (inet_pton(AF_INET, buf, c->addr) == 1) {
        c->family = AF_INET;
        c->bits = bits < 0 ? 32 : (unsigned)bits;
        return c->bits <= 32;
    }
    if (inet_pton(AF_INET6, buf, c->addr) == 1) {
        c->family = AF_INET6;
        c->bits = bits < 0 ? 128 : (unsigned)bits;
        return c->bits <= 128;
    }
    return false;
}

static bool cidr_has(const struct cidr *c, const char *ip)
{
    uint8_t a[16];
    if (!ip || !*ip || inet_pton(c->family, ip, a) != 1)
        return false;
    unsigned full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(a, c->addr, full) != 0)
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (c->addr[full] & mask);
}

static bool cond_holds(const struct cond *c, const struct ol_policy_req *q)
{
    if (c->op == OP_IP || c->op == OP_NOT_IP) {
        bool any = false;
        for (size_t i = 0; i < c->n && !any; i++)
            any = cidr_has(&c->cidrs[i], q->source_ip);
        return c->op == OP_IP ? any : !any;
    }
    if (c->op == OP_BOOL) {
        const char *v = q->secure_transport ? "true" : "false";
        for (size_t i = 0; i < c->n; i++)
            if (strcasecmp(c->vals[i], v) == 0)
                return true;
        return false;
    }
    const char *v = c->key == KEY_PREFIX ? q->prefix : q->user;
    bool negated = c->op == OP_STR_NE || c->op == OP_STR_NE_CI || c->op == OP_STR_NOT_LIKE;
    if (!v)
        return negated;
    bool any = false;
    for (size_t i = 0; i < c->n && !any; i++) {
        switch (c->op) {
        case OP_STR_EQ:
        case OP_STR_NE:
            any = strcmp(c->vals[i], v) == 0;
            break;
        case OP_STR_EQ_CI:
        case OP_STR_NE_CI:
            any = strcasecmp(c->vals[i], v) == 0;
            break;
        default:
            any = ol_policy_glob(c->vals[i], v, strlen(v), false);
            break;
        }
    }
    return negated ? !any : any;
}

static bool who_what(const struct stmt *s, const struct ol_policy_req *q)
{
    bool who = s->any_principal;
    for (size_t i = 0; !who && q->user && i < s->nprincipals; i++)
        who = strcmp(s->principals[i], q->user) == 0;
    bool what = false;
    for (size_t i = 0; who && !what && i < s->nactions; i++)
        what = ol_policy_glob(s->actions[i], q->action, strlen(q->action), true);
    return who && what;
}

static bool stmt_applies(const struct stmt *s, const struct ol_policy_req *q, const char *arn,
                         size_t arn_len)
{
    if (!who_what(s, q))
        return false;
    bool where = false;
    for (size_t i = 0; !where && i < s->nresources; i++)
        where = ol_policy_glob(s->resources[i], arn, arn_len, false);
    if (!where)
        return false;
    for (size_t i = 0; i < s->nconds; i++)
        if (!cond_holds(&s->conds[i], q))
            return false;
    return true;
}

bool ol_policy_may_allow(const struct ol_policy *p, const struct ol_policy_req *q)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (!p->st[i].deny && who_what(&p->st[i], q))
            return true;
    return false;
}

enum ol_policy_effect ol_policy_eval(const struct ol_policy *p, const struct ol_policy_req *q)
{
    if (!p)
        return OL_POLICY_NONE;
    /* The resource's ARN; keys are at most 1024 bytes (router), longer ones
     * are compared through a heap copy all the same. */
    char small[1200];
    size_t bl = strlen(q->bucket);
    size_t need = sizeof(ARN_S3) - 1 + bl + (q->key ? 1 + q->key_len : 0);
    char *arn = need < sizeof(small) ? small : malloc(need + 1);
    if (!arn)
        return OL_POLICY_DENY; /* fail closed */
    size_t o = 0;
    memcpy(arn, ARN_S3, sizeof(ARN_S3) - 1);
    o += sizeof(ARN_S3) - 1;
    memcpy(arn + o, q->bucket, bl);
    o += bl;
    if (q->key) {
        arn[o++] = '/';
        memcpy(arn + o, q->key, q->key_len);
        o += q->key_len;
    }
    arn[o] = 0;
    enum ol_policy_effect e = OL_POLICY_NONE;
    for (size_t i = 0; i < p->n && e != OL_POLICY_DENY; i++)
        if (stmt_applies(&p->st[i], q, arn, o))
            e = p->st[i].deny ? OL_POLICY_DENY : OL_POLICY_ALLOW;
    if (arn != small)
        free(arn);
    return e;
}

/* ---- parsing ---- */

struct parser {
    struct ol_policy *p;
    const char *bucket;
    char *err;
    size_t errlen;
};

#define BAD(ps, ...)                                                                               \
    do {                                                                                           \
        snprintf((ps)->err, (ps)->errlen, __VA_ARGS__);                                            \
        return -EINVAL;                                                                            \
    } while (0)

static char *dup_str(struct parser *ps, const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n + 1);
        ps->p->bytes += n + 1;
    }
    return d;
}

/* A string or a list of strings: *out gets copies (count in *n). */
static int str_list(struct parser *ps, const cJSON *j, const char *what, char ***out, size_t *n)
{
    size_t cnt = cJSON_IsArray(j) ? (size_t)cJSON_GetArraySize(j) : 1;
    if (!cJSON_IsArray(j) && !cJSON_IsString(j))
        BAD(ps, "%s must be a string or a list of strings", what);
    if (cnt == 0)
        BAD(ps, "%s must not be empty", what);
    if (cnt > OL_POLICY_MAX_LIST)
        return -E2BIG;
    char **v = calloc(cnt, sizeof(*v));
    if (!v)
        return -ENOMEM;
    *out = v;
    ps->p->bytes += cnt * sizeof(*v);
    size_t i = 0;
    const cJSON *e;
    if (cJSON_IsArray(j)) {
        cJSON_ArrayForEach(e, j)
        {
            if (!cJSON_IsString(e))
                BAD(ps, "%s must be a string or a list of strings", what);
            if (!(v[i] = dup_str(ps, e->valuestring)))
                return -ENOMEM;
            *n = ++i;
        }
    } else {
        if (!(v[0] = dup_str(ps, j->valuestring)))
            return -ENOMEM;
        *n = 1;
    }
    return 0;
}

static bool key_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

static int parse_principal(struct parser *ps, const cJSON *j, struct stmt *s)
{
    if (!j)
        BAD(ps, "Missing required field Principal");
    if (cJSON_IsString(j)) {
        if (strcmp(j->valuestring, "*") != 0)
            BAD(ps, "Invalid principal in policy");
        s->any_principal = true;
        return 0;
    }
    if (!cJSON_IsObject(j) || !j->child)
        BAD(ps, "Invalid principal in policy");
    size_t total = 0;
    for (const cJSON *e = j->child; e; e = e->next)
        total += cJSON_IsArray(e) ? (size_t)cJSON_GetArraySize(e) : 1;
    if (total > OL_POLICY_MAX_LIST)
        return -E2BIG;
    s->principals = calloc(total ? total : 1, sizeof(char *));
    if (!s->principals)
        return -ENOMEM;
    for (const cJSON *e = j->child; e; e = e->next) {
        if (strcmp(e->string, "AWS") != 0 && strcmp(e->string, "CanonicalUser") != 0)
            BAD(ps, "Invalid principal in policy: only AWS and CanonicalUser principals");
        char **v = NULL;
        size_t n = 0;
        int rc = str_list(ps, e, "Principal", &v, &n);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const char *name = v[i];
            if (strcmp(name, "*") == 0) {
                s->any_principal = true;
                continue;
            }
            if (strncmp(name, ARN_IAM, sizeof(ARN_IAM) - 1) == 0) {
                const char *u = strstr(name + sizeof(ARN_IAM) - 1, ":user/");
                if (!u) {
                    snprintf(ps->err, ps->errlen, "Invalid principal in policy: only user ARNs");
                    rc = -EINVAL;
                    break;
                }
                name = u + 6;
            }
            bool ok = *name != 0;
            for (const char *c = name; ok && *c; c++)
                ok = key_char_ok(*c);
            if (!ok) {
                snprintf(ps->err, ps->errlen, "Invalid principal in policy");
                rc = -EINVAL;
                break;
            }
            char *d = dup_str(ps, name);
            if (!d) {
                rc = -ENOMEM;
                break;
            }
            s->principals[s->nprincipals++] = d;
        }
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_actions(struct parser *ps, const cJSON *j, struct stmt *s)
{
    if (!j)
        BAD(ps, "Missing required field Action");
    int rc = str_list(ps, j, "Action", &s->actions, &s->nactions);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->nactions; i++) {
        const char *a = s->actions[i];
        if (strcmp(a, "*") == 0)
            continue;
        if (strncasecmp(a, "s3:", 3) != 0 || !a[3])
            BAD(ps, "Policy has invalid action");
        for (const char *c = a + 3; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '*' || *c == '?'))
                BAD(ps, "Policy has invalid action");
    }
    return 0;
}

static int parse_resources(struct parser *ps, const cJSON *j, struct stmt *s)
{
    if (!j)
        BAD(ps, "Missing required field Resource");
    int rc = str_list(ps, j, "Resource", &s->resources, &s->nresources);
    if (rc)
        return rc;
    size_t bl = strlen(ps->bucket);
    for (size_t i = 0; i < s->nresources; i++) {
        const char *r = s->resources[i];
        const char *b = r + sizeof(ARN_S3) - 1;
        if (strncmp(r, ARN_S3, sizeof(ARN_S3) - 1) != 0 || strncmp(b, ps->bucket, bl) != 0 ||
            (b[bl] != 0 && b[bl] != '/'))
            BAD(ps, "Policy has invalid resource");
    }
    return 0;
}

static const struct {
    const char *name;
    enum cond_op op;
} cond_ops[] = {
    {"StringEquals", OP_STR_EQ},
    {"StringNotEquals", OP_STR_NE},
    {"StringEqualsIgnoreCase", OP_STR_EQ_CI},
    {"StringNotEqualsIgnoreCase", OP_STR_NE_CI},
    {"StringLike", OP_STR_LIKE},
    {"StringNotLike", OP_STR_NOT_LIKE},
    {"IpAddress", OP_IP},
    {"NotIpAddress", OP_NOT_IP},
    {"Bool", OP_BOOL},
};

static const struct {
    const char *name;
    enum cond_key key;
} cond_keys[] = {
    {"aws:SourceIp", KEY_SOURCE_IP},
    {"aws:SecureTransport", KEY_SECURE},
    {"s3:prefix", KEY_PREFIX},
    {"aws:username", KEY_USERNAME},
};

static int parse_conditions(struct parser *ps, const cJSON *j, struct stmt *s)
{
    if (!j)
        return 0;
    if (!cJSON_IsObject(j))
        BAD(ps, "Condition must be an object");
    size_t total = 0;
    for (const cJSON *op = j->child; op; op = op->next) {
        if (!cJSON_IsObject(op) || !op->child)
            BAD(ps, "Invalid Condition block");
        for (const cJSON *k = op->child; k; k = k->next)
            total++;
    }
    if (total > OL_POLICY_MAX_LIST)
        return -E2BIG;
    if (!total)
        return 0;
    s->conds = calloc(total, sizeof(*s->conds));
    if (!s->conds)
        return -ENOMEM;
    ps->p->bytes += total * sizeof(*s->conds);
    for (const cJSON *op = j->child; op; op = op->next) {
        size_t oi = 0;
        while (oi < sizeof(cond_ops) / sizeof(*cond_ops) && strcmp(cond_ops[oi].name, op->string))
            oi++;
        if (oi == sizeof(cond_ops) / sizeof(*cond_ops))
            BAD(ps, "Invalid Condition type: %.64s", op->string);
        for (const cJSON *k = op->child; k; k = k->next) {
            size_t ki = 0;
            while (ki < sizeof(cond_keys) / sizeof(*cond_keys) &&
                   strcasecmp(cond_keys[ki].name, k->string))
                ki++;
            if (ki == sizeof(cond_keys) / sizeof(*cond_keys))
                BAD(ps, "Policy has an invalid condition key: %.64s", k->string);
            struct cond *c = &s->conds[s->nconds++];
            c->op = cond_ops[oi].op;
            c->key = cond_keys[ki].key;
            bool ip_op = c->op == OP_IP || c->op == OP_NOT_IP;
            bool ok = c->key == KEY_SOURCE_IP ? ip_op
                      : c->key == KEY_SECURE  ? c->op == OP_BOOL
                                              : !ip_op && c->op != OP_BOOL;
            if (!ok)
                BAD(ps, "Invalid Condition: %s cannot be used with %s", cond_keys[ki].name,
                    cond_ops[oi].name);
            int rc = str_list(ps, k, "A condition value", &c->vals, &c->n);
            if (rc)
                return rc;
            if (c->op == OP_BOOL) {
                for (size_t i = 0; i < c->n; i++)
                    if (strcasecmp(c->vals[i], "true") && strcasecmp(c->vals[i], "false"))
                        BAD(ps, "Invalid Condition: Bool takes true or false");
            }
            if (ip_op) {
                c->cidrs = calloc(c->n, sizeof(*c->cidrs));
                if (!c->cidrs)
                    return -ENOMEM;
                ps->p->bytes += c->n * sizeof(*c->cidrs);
                for (size_t i = 0; i < c->n; i++)
                    if (!cidr_parse(c->vals[i], &c->cidrs[i]))
                        BAD(ps, "Invalid Condition: '%.64s' is not an IP address or CIDR block",
                            c->vals[i]);
            }
        }
    }
    return 0;
}

static int parse_stmt(struct parser *ps, const cJSON *j, struct stmt *s)
{
    if (!cJSON_IsObject(j))
        BAD(ps, "Each Statement must be an object");
    const cJSON *effect = NULL, *principal = NULL, *action = NULL, *resource = NULL, *cond = NULL;
    for (const cJSON *e = j->child; e; e = e->next) {
        const char *k = e->string;
        if (strcmp(k, "Sid") == 0) {
            if (!cJSON_IsString(e))
                BAD(ps, "Sid must be a string");
        } else if (strcmp(k, "Effect") == 0) {
            effect = e;
        } else if (strcmp(k, "Principal") == 0) {
            principal = e;
        } else if (strcmp(k, "Action") == 0) {
            action = e;
        } else if (strcmp(k, "Resource") == 0) {
            resource = e;
        } else if (strcmp(k, "Condition") == 0) {
            cond = e;
        } else if (strcmp(k, "NotAction") == 0 || strcmp(k, "NotPrincipal") == 0 ||
                   strcmp(k, "NotResource") == 0) {
            BAD(ps, "%s is not supported by OpenLake", k);
        } else {
            BAD(ps, "Unknown field %.64s", k);
        }
    }
    if (!effect || !cJSON_IsString(effect))
        BAD(ps, "Missing required field Effect");
    if (strcmp(effect->valuestring, "Allow") == 0)
        s->deny = false;
    else if (strcmp(effect->valuestring, "Deny") == 0)
        s->deny = true;
    else
        BAD(ps, "Invalid effect: %.32s", effect->valuestring);
    int rc = parse_principal(ps, principal, s);
    if (!rc)
        rc = parse_actions(ps, action, s);
    if (!rc)
        rc = parse_resources(ps, resource, s);
    if (!rc)
        rc = parse_conditions(ps, cond, s);
    return rc;
}

int ol_policy_parse(const char *doc, size_t len, const char *bucket, struct ol_policy **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (len > OL_POLICY_MAX_BYTES)
        return -E2BIG;
    struct parser ps = {.bucket = bucket, .err = err, .errlen = errlen};
    int rc = 0;
    cJSON *root = cJSON_ParseWithLength(doc, len);
    ps.p = calloc(1, sizeof(*ps.p));
    if (!ps.p) {
        rc = -ENOMEM;
        goto out;
    }
    ps.p->bytes = sizeof(*ps.p);
    if (!root) {
        snprintf(err, errlen, "This policy contains invalid Json");
        rc = -EINVAL;
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "Policies must be valid JSON and the first byte must be '{'");
        rc = -EINVAL;
        goto out;
    }
    const cJSON *stmts = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "Version") == 0) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, "2012-10-17") != 0 &&
                                       strcmp(e->valuestring, "2008-10-17") != 0)) {
                snprintf(err, errlen, "The policy must contain a valid version string");
                rc = -EINVAL;
                goto out;
            }
        } else if (strcmp(e->string, "Id") == 0) {
            if (!cJSON_IsString(e)) {
                snprintf(err, errlen, "Id must be a string");
                rc = -EINVAL;
                goto out;
            }
        } else if (strcmp(e->string, "Statement") == 0) {
            stmts = e;
        } else {
            snprintf(err, errlen, "Unknown field %.64s", e->string);
            rc = -EINVAL;
            goto out;
        }
    }
    if (!stmts || (!cJSON_IsArray(stmts) && !cJSON_IsObject(stmts)) ||
        (cJSON_IsArray(stmts) && cJSON_GetArraySize(stmts) == 0)) {
        snprintf(err, errlen, "Missing required field Statement");
        rc = -EINVAL;
        goto out;
    }
    size_t n = cJSON_IsArray(stmts) ? (size_t)cJSON_GetArraySize(stmts) : 1;
    if (n > OL_POLICY_MAX_STATEMENTS) {
        rc = -E2BIG;
        goto out;
    }
    ps.p->st = calloc(n, sizeof(*ps.p->st));
    if (!ps.p->st) {
        rc = -ENOMEM;
        goto out;
    }
    ps.p->bytes += n * sizeof(*ps.p->st);
    if (cJSON_IsObject(stmts)) {
        ps.p->n = 1;
        rc = parse_stmt(&ps, stmts, &ps.p->st[0]);
    } else {
        const cJSON *e;
        cJSON_ArrayForEach(e, stmts)
        {
            ps.p->n++;
            rc = parse_stmt(&ps, e, &ps.p->st[ps.p->n - 1]);
            if (rc)
                break;
        }
    }
out:
    cJSON_Delete(root);
    if (rc) {
        ol_policy_free(ps.p);
        return rc;
    }
    *out = ps.p;
    return 0;
}

size_t ol_policy_bytes(const struct ol_policy *p)
{
    return p ? p->bytes : 0;
}

static void free_strs(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void ol_policy_free(struct ol_policy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        struct stmt *s = &p->st[i];
        free_strs(s->principals, s->nprincipals);
        free_strs(s->actions, s->nactions);
        free_strs(s->resources, s->nresources);
        for (size_t k = 0; k < s->nconds; k++) {
            free_strs(s->conds[k].vals, s->conds[k].n);
            free(s->conds[k].cidrs);
        }
        free(s->conds);
    }
    free(p->st);
    free(p);
}
