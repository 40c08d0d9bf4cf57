/* Bucket CORS: PutBucketCors, GetBucketCors, DeleteBucketCors, the OPTIONS
 * preflight and the CORS headers of actual requests.
 *
 * The configuration is kept as the bucket setting "cors", in the normalized
 * XML this file writes after validating a PutBucketCors document (so
 * GetBucketCors returns it as stored, and reading it back cannot fail on
 * anything a client sent).  Each loop thread keeps the parsed form of the
 * configurations it used last (a small LRU cache, bounded in slots and
 * bytes), so a request with an Origin header costs a lookup rather than a
 * read and a parse of up to 64 KiB.  Entries carry the settings generation
 * (settings.h) read before they were loaded; every Put/DeleteBucketCors,
 * CreateBucket and DeleteBucket moves it before answering, so the next request
 * on any thread reloads: a new configuration applies at once on every core,
 * without locks.
 *
 * Every value that reaches a response header (AllowedOrigin, AllowedHeader,
 * ExposeHeader; methods and MaxAgeSeconds are checked by form) is refused at
 * PutBucketCors when it holds a byte that may not appear in a header value:
 * an XML character reference (&#13;&#10;) would otherwise let a stored
 * configuration add headers to every response that carries an Origin.
 *
 * Matching follows Amazon S3: the first rule whose AllowedOrigin matches the
 * Origin (at most one '*' wildcard, case-sensitive), whose AllowedMethod
 * list has the method, and (preflight only) whose AllowedHeader patterns
 * cover every header named in Access-Control-Request-Headers
 * (case-insensitive) wins.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"
#include "core/log.h"
#include "s3/meta.h"
#include "s3/s3.h"
#include "s3/settings.h"
#include "store/store.h"

#define OL_CORS_SETTING "cors"
#define OL_CORS_MAX_RULES 100
/* The largest PutBucketCors document, as Amazon S3 limits it (64 KiB); a
 * larger one gets 400 MalformedXML before it is parsed. */
#define OL_CORS_DOC_MAX (64u << 10)
/* The per-thread cache of parsed configurations: slots and bytes (a parsed
 * 64 KiB document takes about 130 KiB). */
#define OL_CORS_CACHE_SLOTS 64
#define OL_CORS_CACHE_BYTES (4u << 20)
/* Normalized documents are never longer than what they were made from
 * (values are stored once and re-escaped), plus the declaration. */
#define OL_CORS_STORED_MAX (OL_CORS_DOC_MAX * 2)
#define OL_CORS_ID_MAX 255

enum ol_cors_kind { OL_CV_ORIGIN, OL_CV_HEADER, OL_CV_EXPOSE };

static const char *const ol_cors_methods[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
#define OL_CORS_NMETHODS (sizeof(ol_cors_methods) / sizeof(ol_cors_methods[0]))

struct ol_cors_val {
    enum ol_cors_kind kind;
    const char *s; /* NUL-terminated, in the arena */
    size_t n;
};

struct ol_cors_rule {
    const char *id;    /* NULL when absent */
    unsigned methods;  /* bit i: ol_cors_methods[i] */
    int64_t max_age;   /* -1 when absent */
    size_t vbeg, vend; /* this rule's values: vals[vbeg, vend) */
    size_t norigins;
};

struct ol_cors_cfg {
    struct ol_cors_rule rules[OL_CORS_MAX_RULES];
    size_t nrules;
    struct ol_cors_val *vals;
    size_t nvals, vals_cap;
    char *arena;
    size_t arena_len, arena_cap;
    bool in_rule;
    /* First validation failure: the S3 code and message to answer. */
    enum ol_s3_code code;
    const char *msg;
    char msg_buf[160];
};

static const char ol_cors_malformed[] =
    "The XML you provided was not well-formed or did not validate against our published schema";

static void ol_cors_free(struct ol_cors_cfg *c)
{
    if (!c)
        return;
    free(c->vals);
    free(c->arena);
    free(c);
}

static int ol_cors_fail(struct ol_cors_cfg *c, enum ol_s3_code code, const char *msg)
{
    if (!c->msg) {
        c->code = code;
        c->msg = msg;
    }
    return -EINVAL;
}

/* Copies text (trimmed of surrounding whitespace) into the arena. */
static const char *ol_cors_keep(struct ol_cors_cfg *c, const char *s, size_t *n)
{
    size_t len = *n;
    while (len && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')) {
        s++;
        len--;
    }
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' || s[len - 1] == '\n'))
        len--;
    if (len + 1 > c->arena_cap - c->arena_len)
        return NULL;
    char *out = c->arena + c->arena_len;
    memcpy(out, s, len);
    out[len] = 0;
    c->arena_len += len + 1;
    *n = len;
    return out;
}

static size_t ol_count_char(const char *s, size_t n, char ch)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == ch;
    return k;
}

#define OL_CORS_RULE "CORSConfiguration/CORSRule"

static int ol_cors_on_elem(void *ctx, const char *path, bool start)
{
    struct ol_cors_cfg *c = ctx;
    if (strcmp(path, OL_CORS_RULE) == 0) {
        if (start) {
            if (c->nrules >= OL_CORS_MAX_RULES)
                return ol_cors_fail(c, OL_S3_MalformedXML,
                                    "The CORS configuration may have at most 100 rules.");
            struct ol_cors_rule *ru = &c->rules[c->nrules++];
            memset(ru, 0, sizeof(*ru));
            ru->max_age = -1;
            ru->vbeg = ru->vend = c->nvals;
            c->in_rule = true;
            return 0;
        }
        c->in_rule = false;
        struct ol_cors_rule *ru = &c->rules[c->nrules - 1];
        if (ru->norigins == 0 || ru->methods == 0)
            return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
        return 0;
    }
    if (!start)
        return 0;
    if (strcmp(path, "CORSConfiguration") == 0)
        return 0;
    static const char *const leaves[] = {
        "ID", "AllowedOrigin", "AllowedMethod", "AllowedHeader", "ExposeHeader", "MaxAgeSeconds"};
    size_t rl = sizeof(OL_CORS_RULE) - 1;
    if (strncmp(path, OL_CORS_RULE "/", rl + 1) == 0)
        for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
            if (strcmp(path + rl + 1, leaves[i]) == 0)
                return 0;
    return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
}

static int ol_cors_add_val(struct ol_cors_cfg *c, enum ol_cors_kind kind, const char *s, size_t n)
{
    if (c->nvals >= c->vals_cap)
        return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
    c->vals[c->nvals++] = (struct ol_cors_val){kind, s, n};
    c->rules[c->nrules - 1].vend = c->nvals;
    return 0;
}

static int ol_cors_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct ol_cors_cfg *c = ctx;
    size_t rl = sizeof(OL_CORS_RULE) - 1;
    if (!c->in_rule || strncmp(path, OL_CORS_RULE "/", rl + 1) != 0)
        return 0;
    const char *leaf = path + rl + 1;
    struct ol_cors_rule *ru = &c->rules[c->nrules - 1];
    size_t n = len;
    const char *s = ol_cors_keep(c, text, &n);
    if (!s)
        return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
    if (strcmp(leaf, "ID") == 0) {
        if (n > OL_CORS_ID_MAX)
            return ol_cors_fail(c, OL_S3_InvalidArgument,
                                "The ID of a CORS rule may be at most 255 characters long.");
        ru->id = s;
        return 0;
    }
    if (strcmp(leaf, "AllowedMethod") == 0) {
        for (size_t i = 0; i < OL_CORS_NMETHODS; i++)
            if (strcmp(s, ol_cors_methods[i]) == 0) {
                ru->methods |= 1u << i;
                return 0;
            }
        snprintf(c->msg_buf, sizeof(c->msg_buf),
                 "Found unsupported HTTP method in CORS config. Unsupported method is %.40s", s);
        return ol_cors_fail(c, OL_S3_InvalidRequest, c->msg_buf);
    }
    if (strcmp(leaf, "MaxAgeSeconds") == 0) {
        int64_t v = 0;
        if (n == 0 || n > 10)
            return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
        for (size_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
            v = v * 10 + (s[i] - '0');
        }
        if (v > INT32_MAX)
            return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
        ru->max_age = v;
        return 0;
    }
    enum ol_cors_kind kind;
    if (strcmp(leaf, "AllowedOrigin") == 0)
        kind = OL_CV_ORIGIN;
    else if (strcmp(leaf, "AllowedHeader") == 0)
        kind = OL_CV_HEADER;
    else if (strcmp(leaf, "ExposeHeader") == 0)
        kind = OL_CV_EXPOSE;
    else
        return 0;
    if (n == 0)
        return ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
    /* These values are sent back as header values (see the top comment). */
    if (!ol_s3_header_value_ok(s, n)) {
        snprintf(c->msg_buf, sizeof(c->msg_buf),
                 "%s contains a character that is not allowed in an HTTP header.", leaf);
        return ol_cors_fail(c, OL_S3_InvalidRequest, c->msg_buf);
    }
    if (kind != OL_CV_EXPOSE && ol_count_char(s, n, '*') > 1) {
        snprintf(c->msg_buf, sizeof(c->msg_buf),
                 "%s \"%.60s\" can not have more than one wildcard.",
                 kind == OL_CV_ORIGIN ? "AllowedOrigin" : "AllowedHeader", s);
        return ol_cors_fail(c, OL_S3_InvalidRequest, c->msg_buf);
    }
    if (kind == OL_CV_EXPOSE && ol_count_char(s, n, '*') > 0) {
        snprintf(c->msg_buf, sizeof(c->msg_buf),
                 "ExposeHeader \"%.60s\" contains wildcard. "
                 "We currently do not support wildcard for ExposeHeader.",
                 s);
        return ol_cors_fail(c, OL_S3_InvalidRequest, c->msg_buf);
    }
    if (kind == OL_CV_ORIGIN)
        ru->norigins++;
    return ol_cors_add_val(c, kind, s, n);
}

/* Parses and validates a CORSConfiguration document.  Returns 0 with *out,
 * -EINVAL with *out holding the verdict (code, msg), or -ENOMEM. */
static int ol_cors_parse(const char *doc, size_t len, struct ol_cors_cfg **out)
{
    struct ol_cors_cfg *c = calloc(1, sizeof(*c));
    int ret = 0;
    *out = NULL;
    if (!c) {
        ret = -ENOMEM;
        goto out;
    }
    /* Decoded text is never longer than the document, and each kept text
     * (with its NUL) comes from an element of at least 9 bytes ("<ID></ID>");
     * each value is an element of at least 29 ("<ExposeHeader></ExposeHeader>"). */
    c->arena_cap = len + len / 8 + 16;
    c->vals_cap = len / 16 + 1;
    c->arena = malloc(c->arena_cap);
    c->vals = calloc(c->vals_cap, sizeof(*c->vals));
    if (!c->arena || !c->vals) {
        ret = -ENOMEM;
        goto out;
    }
    int prc = ol_xml_parse(doc, len, ol_cors_on_elem, ol_cors_on_text, c);
    if (prc == -ENOMEM) {
        ret = -ENOMEM;
        goto out;
    }
    if (!c->msg && (prc != 0 || c->nrules == 0))
        ol_cors_fail(c, OL_S3_MalformedXML, ol_cors_malformed);
    if (c->msg)
        ret = -EINVAL;
    *out = c;
    c = NULL;
out:
    ol_cors_free(c);
    return ret;
}

static void ol_cors_write(const struct ol_cors_cfg *c, struct ol_xml *x)
{
    static const char *const kind_tag[] = {"AllowedOrigin", "AllowedHeader", "ExposeHeader"};
    ol_xml_begin_doc(x, "CORSConfiguration");
    for (size_t i = 0; i < c->nrules; i++) {
        const struct ol_cors_rule *ru = &c->rules[i];
        ol_xml_open(x, "CORSRule");
        if (ru->id)
            ol_xml_str(x, "ID", ru->id);
        for (size_t k = 0; k < OL_CORS_NMETHODS; k++)
            if (ru->methods & (1u << k))
                ol_xml_str(x, "AllowedMethod", ol_cors_methods[k]);
        /* Kind by kind, each in the client's order. */
        for (int kind = OL_CV_ORIGIN; kind <= OL_CV_EXPOSE; kind++)
            for (size_t v = ru->vbeg; v < ru->vend; v++)
                if (c->vals[v].kind == (enum ol_cors_kind)kind)
                    ol_xml_text(x, kind_tag[kind], c->vals[v].s, c->vals[v].n);
        if (ru->max_age >= 0)
            ol_xml_u64(x, "MaxAgeSeconds", (uint64_t)ru->max_age);
        ol_xml_close(x);
    }
    ol_xml_end_doc(x);
}

static int ol_cors_parse_doc(const char *doc, size_t len, void **cfg, enum ol_s3_code *code,
                             const char **msg)
{
    struct ol_cors_cfg *c = NULL;
    int ret = ol_cors_parse(doc, len, &c);
    if (ret == -EINVAL && c) {
        *code = c->code;
        *msg = c->msg;
    }
    *cfg = c;
    return ret;
}

static void ol_cors_write_doc(const void *cfg, struct ol_xml *x)
{
    ol_cors_write(cfg, x);
}

static void ol_cors_free_doc(void *cfg)
{
    ol_cors_free(cfg);
}

static const struct ol_s3_setting_doc ol_cors_doc = {
    .name = OL_CORS_SETTING,
    .doc_max = OL_CORS_DOC_MAX,
    .stored_max = OL_CORS_STORED_MAX,
    .missing = OL_S3_NoSuchCORSConfiguration,
    .missing_msg = "The CORS configuration does not exist",
    .parse = ol_cors_parse_doc,
    .write = ol_cors_write_doc,
    .free = ol_cors_free_doc,
};

/* Reads and parses the bucket's configuration.  0, -OL_ENOCONFIG,
 * -OL_ENOBUCKET, -OL_ECORRUPT... */
static int ol_cors_load(struct ol_s3_req *r, struct ol_cors_cfg **out)
{
    char *doc = NULL;
    size_t len = 0;
    *out = NULL;
    int ret = ol_s3_setting_read(r->ctx, r->bucket, &ol_cors_doc, &doc, &len);
    if (ret < 0)
        return ret;
    ret = ol_cors_parse(doc, len, out);
    if (ret == -EINVAL) {
        /* Only validated documents are stored: this one is damaged. */
        ol_log_limited(OL_LOG_WARN, "bucket %s: stored CORS configuration unreadable", r->bucket);
        ol_cors_free(*out);
        *out = NULL;
        ret = -OL_ECORRUPT;
    }
    free(doc);
    return ret;
}

/* ---- the per-thread cache ---- */

struct ol_cors_slot {
    char bucket[64];
    uint64_t gen;            /* settings generation read before loading; 0: empty */
    uint64_t used;           /* last use, for LRU eviction */
    struct ol_cors_cfg *cfg; /* NULL: the bucket has no configuration */
    size_t bytes;
};

static __thread struct ol_cors_slot ol_cors_cache[OL_CORS_CACHE_SLOTS];
static __thread size_t ol_cors_cache_bytes;
static __thread uint64_t ol_cors_cache_tick;

/* Shrinks a parsed configuration's arena and value array to what it uses
 * (they were sized for the worst case of the document's length); returns the
 * bytes it holds. */
static size_t ol_cors_compact(struct ol_cors_cfg *c)
{
    size_t alen = c->arena_len ? c->arena_len : 1;
    char *arena = malloc(alen);
    struct ol_cors_val *vals = malloc((c->nvals ? c->nvals : 1) * sizeof(*vals));
    if (arena && vals) {
        memcpy(arena, c->arena, c->arena_len);
        for (size_t i = 0; i < c->nvals; i++) {
            vals[i] = c->vals[i];
            vals[i].s = arena + (c->vals[i].s - c->arena);
        }
        for (size_t i = 0; i < c->nrules; i++)
            if (c->rules[i].id)
                c->rules[i].id = arena + (c->rules[i].id - c->arena);
        free(c->arena);
        free(c->vals);
        c->arena = arena;
        c->vals = vals;
        c->arena_cap = alen;
        c->vals_cap = c->nvals ? c->nvals : 1;
    } else {
        free(arena);
        free(vals);
    }
    return sizeof(*c) + c->arena_cap + c->vals_cap * sizeof(*c->vals);
}

static void ol_cors_slot_clear(struct ol_cors_slot *sl)
{
    ol_cors_cache_bytes -= sl->bytes;
    ol_cors_free(sl->cfg);
    memset(sl, 0, sizeof(*sl));
}

/* The bucket's parsed configuration from this thread's cache, loaded on a
 * miss or after any settings change.  0 with *out (borrowed: valid until
 * this fiber yields or calls here again, so callers copy what they send),
 * -OL_ENOCONFIG, -OL_ENOBUCKET (not cached), or a read error. */
static int ol_cors_get(struct ol_s3_req *r, const struct ol_cors_cfg **out)
{
    *out = NULL;
    /* Read before loading: a change stored after this read moves the
     * generation past it, so the entry is reloaded on its next use. */
    uint64_t gen = ol_s3_settings_gen();
    uint64_t tick = ++ol_cors_cache_tick;
    for (size_t i = 0; i < OL_CORS_CACHE_SLOTS; i++) {
        struct ol_cors_slot *sl = &ol_cors_cache[i];
        if (sl->gen && sl->gen != gen) { /* stale since a change: free it now */
            ol_cors_slot_clear(sl);
            continue;
        }
        if (sl->gen == gen && strcmp(sl->bucket, r->bucket) == 0) {
            sl->used = tick;
            *out = sl->cfg;
            return sl->cfg ? 0 : -OL_ENOCONFIG;
        }
    }
    struct ol_cors_cfg *c = NULL;
    int ret = ol_cors_load(r, &c); /* may yield: the slots are searched after */
    if (ret < 0 && ret != -OL_ENOCONFIG)
        return ret;
    size_t bytes = c ? ol_cors_compact(c) : 0;
    /* The bucket's slot (stale, or filled meanwhile), else an empty one,
     * else the least recently used. */
    struct ol_cors_slot *pick = NULL;
    for (size_t i = 0; i < OL_CORS_CACHE_SLOTS; i++) {
        struct ol_cors_slot *sl = &ol_cors_cache[i];
        if (sl->gen && strcmp(sl->bucket, r->bucket) == 0) {
            pick = sl;
            break;
        }
        if (!pick || (pick->gen && (!sl->gen || sl->used < pick->used)))
            pick = sl;
    }
    ol_cors_slot_clear(pick);
    /* Within the byte budget: evict the least recently used others.  Each
     * round empties one slot, so at most OL_CORS_CACHE_SLOTS rounds. */
    for (size_t round = 0;
         round < OL_CORS_CACHE_SLOTS && ol_cors_cache_bytes + bytes > OL_CORS_CACHE_BYTES;
         round++) {
        struct ol_cors_slot *old = NULL;
        for (size_t i = 0; i < OL_CORS_CACHE_SLOTS; i++) {
            struct ol_cors_slot *sl = &ol_cors_cache[i];
            if (sl != pick && sl->gen && (!old || sl->used < old->used))
                old = sl;
        }
        if (!old)
            break;
        ol_cors_slot_clear(old);
    }
    snprintf(pick->bucket, sizeof(pick->bucket), "%s", r->bucket);
    pick->gen = gen;
    pick->used = tick;
    pick->cfg = c;
    pick->bytes = bytes;
    ol_cors_cache_bytes += bytes;
    *out = c;
    return c ? 0 : -OL_ENOCONFIG;
}

/* ---- handlers ---- */

int ol_s3_put_bucket_cors(struct ol_s3_req *r)
{
    return ol_s3_setting_put(r, &ol_cors_doc);
}

int ol_s3_get_bucket_cors(struct ol_s3_req *r)
{
    return ol_s3_setting_get(r, &ol_cors_doc);
}

int ol_s3_delete_bucket_cors(struct ol_s3_req *r)
{
    return ol_s3_setting_delete(r, &ol_cors_doc);
}

/* ---- matching ---- */

/* Matches s against a pattern with at most one '*'. */
static bool ol_cors_glob(const char *p, size_t pn, const char *s, size_t sn, bool nocase)
{
    const char *star = memchr(p, '*', pn);
    int (*cmp)(const char *, const char *, size_t) = nocase ? strncasecmp : strncmp;
    if (!star)
        return pn == sn && cmp(p, s, sn) == 0;
    size_t pre = (size_t)(star - p), suf = pn - pre - 1;
    if (sn < pre + suf)
        return false;
    return cmp(p, s, pre) == 0 && cmp(star + 1, s + sn - suf, suf) == 0;
}

static bool ol_cors_rule_has(const struct ol_cors_cfg *c, const struct ol_cors_rule *ru,
                             enum ol_cors_kind kind, const char *s, size_t n, bool nocase,
                             bool *star)
{
    for (size_t v = ru->vbeg; v < ru->vend; v++) {
        const struct ol_cors_val *cv = &c->vals[v];
        if (cv->kind == kind && ol_cors_glob(cv->s, cv->n, s, n, nocase)) {
            if (star)
                *star = cv->n == 1 && cv->s[0] == '*';
            return true;
        }
    }
    return false;
}

static int ol_cors_method_bit(const char *m, size_t n)
{
    for (size_t i = 0; i < OL_CORS_NMETHODS; i++)
        if (strlen(ol_cors_methods[i]) == n && memcmp(ol_cors_methods[i], m, n) == 0)
            return (int)i;
    return -1;
}

/* Every comma-separated name in the Access-Control-Request-Headers list
 * matches one of the rule's AllowedHeader patterns. */
static bool ol_cors_headers_ok(const struct ol_cors_cfg *c, const struct ol_cors_rule *ru,
                               const struct ol_slice *req)
{
    if (!req)
        return true;
    const char *p = req->p, *end = req->p + req->n;
    /* Each round consumes one name (bounded by the header's length). */
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *a = p, *b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a && !ol_cors_rule_has(c, ru, OL_CV_HEADER, a, (size_t)(b - a), true, NULL))
            return false;
        p = comma ? comma + 1 : end;
    }
    return true;
}

static const struct ol_cors_rule *ol_cors_match(const struct ol_cors_cfg *c,
                                                const struct ol_slice *origin, int method,
                                                const struct ol_slice *req_headers, bool *star)
{
    for (size_t i = 0; i < c->nrules; i++) {
        const struct ol_cors_rule *ru = &c->rules[i];
        if (!(ru->methods & (1u << method)))
            continue;
        if (!ol_cors_rule_has(c, ru, OL_CV_ORIGIN, origin->p, origin->n, false, star))
            continue;
        if (!ol_cors_headers_ok(c, ru, req_headers))
            continue;
        return ru;
    }
    return NULL;
}

/* Appends s[0, n) plus NUL to store; NULL when it does not fit. */
static const char *ol_cors_put(char *store, size_t cap, size_t *used, const char *s, size_t n)
{
    if (n + 1 > cap - *used)
        return NULL;
    char *out = store + *used;
    memcpy(out, s, n);
    out[n] = 0;
    *used += n + 1;
    return out;
}

/* Joins a rule's values of one kind with ", " into store. */
static const char *ol_cors_join(const struct ol_cors_cfg *c, const struct ol_cors_rule *ru,
                                enum ol_cors_kind kind, char *store, size_t cap, size_t *used)
{
    size_t start = *used, len = 0;
    for (size_t v = ru->vbeg; v < ru->vend; v++) {
        const struct ol_cors_val *cv = &c->vals[v];
        if (cv->kind != kind)
            continue;
        size_t need = cv->n + (len ? 2 : 0);
        if (need + 1 > cap - start - len)
            return NULL;
        if (len) {
            memcpy(store + start + len, ", ", 2);
            len += 2;
        }
        memcpy(store + start + len, cv->s, cv->n);
        len += cv->n;
    }
    if (len == 0)
        return NULL;
    store[start + len] = 0;
    *used = start + len + 1;
    return store + start;
}

/* Fills the response headers for a matched rule.  Preflight answers also
 * list the allowed methods and headers and the max age. */
static size_t ol_cors_fill(const struct ol_cors_cfg *c, const struct ol_cors_rule *ru, bool star,
                           const struct ol_slice *origin, const struct ol_slice *req_headers,
                           bool preflight, struct ol_http_hdr *out, size_t max, char *store,
                           size_t cap)
{
    size_t n = 0, used = 0;
    const char *v;
    /* A "*" rule answers "*" (no credentials); a specific origin is echoed,
     * with credentials allowed, as Amazon S3 does. */
    v = star ? "*" : ol_cors_put(store, cap, &used, origin->p, origin->n);
    if (!v || n >= max)
        return 0;
    out[n++] = (struct ol_http_hdr){"Access-Control-Allow-Origin", v};
    if (!star && n < max)
        out[n++] = (struct ol_http_hdr){"Access-Control-Allow-Credentials", "true"};
    char methods[40];
    size_t ml = 0;
    for (size_t k = 0; k < OL_CORS_NMETHODS; k++)
        if (ru->methods & (1u << k))
            ml += (size_t)snprintf(methods + ml, sizeof(methods) - ml, "%s%s", ml ? ", " : "",
                                   ol_cors_methods[k]);
    v = ol_cors_put(store, cap, &used, methods, ml);
    if (v && n < max)
        out[n++] = (struct ol_http_hdr){"Access-Control-Allow-Methods", v};
    if (preflight && req_headers && req_headers->n && n < max) {
        v = ol_cors_put(store, cap, &used, req_headers->p, req_headers->n);
        if (v)
            out[n++] = (struct ol_http_hdr){"Access-Control-Allow-Headers", v};
    }
    if (ru->max_age >= 0 && n < max) {
        char age[24];
        int al = snprintf(age, sizeof(age), "%" PRId64, ru->max_age);
        v = ol_cors_put(store, cap, &used, age, (size_t)al);
        if (v)
            out[n++] = (struct ol_http_hdr){"Access-Control-Max-Age", v};
    }
    v = ol_cors_join(c, ru, OL_CV_EXPOSE, store, cap, &used);
    /* Checked at PutBucketCors; a configuration stored before that check
     * could still hold a control byte. */
    if (v && n < max && ol_s3_header_value_ok(v, strlen(v)))
        out[n++] = (struct ol_http_hdr){"Access-Control-Expose-Headers", v};
    if (n < max)
        out[n++] = (struct ol_http_hdr){
            "Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"};
    return n;
}

static const char ol_cors_denied[] =
    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of "
    "Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers "
    "are not whitelisted by the resource's CORS spec.";

int ol_s3_cors_preflight(struct ol_s3_req *r)
{
    const struct ol_cors_cfg *c = NULL;
    char *store = NULL;
    int ret;
    const struct ol_slice *origin = ol_s3_header(r, "origin");
    const struct ol_slice *acrm = ol_s3_header(r, "access-control-request-method");
    const struct ol_slice *acrh = ol_s3_header(r, "access-control-request-headers");
    if (!r->bucket[0]) {
        ret = ol_s3_error(r, OL_S3_AccessForbidden, "CORSResponse: Bucket not found");
        goto out;
    }
    if (!origin || origin->n == 0) {
        ret = ol_s3_error(r, OL_S3_InvalidRequest,
                          "Insufficient information. Origin request header needed.");
        goto out;
    }
    int method = acrm ? ol_cors_method_bit(acrm->p, acrm->n) : -1;
    if (method < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidRequest, "Invalid Access-Control-Request-Method");
        goto out;
    }
    ret = ol_cors_get(r, &c);
    if (ret == -OL_ENOCONFIG || ret == -OL_ENOBUCKET) {
        ret = ol_s3_error(r, OL_S3_AccessForbidden,
                          ret == -OL_ENOBUCKET
                              ? "CORSResponse: Bucket not found"
                              : "CORSResponse: CORS is not enabled for this bucket.");
        goto out;
    }
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    bool star = false;
    const struct ol_cors_rule *ru = ol_cors_match(c, origin, method, acrh, &star);
    if (!ru) {
        ret = ol_s3_error(r, OL_S3_AccessForbidden, ol_cors_denied);
        goto out;
    }
    size_t cap = origin->n + (acrh ? acrh->n : 0) + OL_CORS_DOC_MAX + 128;
    store = malloc(cap);
    if (!store) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    struct ol_http_hdr h[8];
    size_t nh = ol_cors_fill(c, ru, star, origin, acrh, true, h, 8, store, cap);
    /* c stays the cache's; h[] holds copies (store), so the send may yield. */
    ret = ol_s3_send_empty(r, 200, h, nh);
out:
    free(store);
    return ret;
}

size_t ol_s3_cors_headers(struct ol_s3_req *r, struct ol_http_hdr *out, size_t max, char *store,
                          size_t cap)
{
    const struct ol_slice *origin = ol_s3_header(r, "origin");
    if (!origin || origin->n == 0 || !r->bucket[0] || max == 0)
        return 0;
    struct ol_slice m = r->http->head.method;
    int method = ol_cors_method_bit(m.p, m.n);
    if (method < 0) /* OPTIONS answers for itself; other methods never match */
        return 0;
    const struct ol_cors_cfg *c = NULL;
    if (ol_cors_get(r, &c) < 0)
        return 0;
    bool star = false;
    const struct ol_cors_rule *ru = ol_cors_match(c, origin, method, NULL, &star);
    /* ol_cors_fill copies every value into store: nothing here outlives c. */
    return ru ? ol_cors_fill(c, ru, star, origin, NULL, false, out, max, store, cap) : 0;
}
