/* Listing handlers: ListObjects (v1 and v2), ListMultipartUploads, ListParts.
 *
 * Every listing is collected into memory first and the store iterator or
 * callback is finished before anything is sent: an LMDB read snapshot must
 * not stay open while the fiber waits on a slow client.  A page holds at most
 * 1000 entries of at most 1 KiB, so the memory is bounded.
 *
 * Entries are returned strictly after the marker (key-marker, marker,
 * start-after, continuation token).  With a delimiter, keys that share
 * prefix + ... + delimiter roll up into one CommonPrefixes entry, which sorts
 * with the keys by its own bytes; once it is emitted the iterator seeks past
 * every key that begins with it, so a directory of a million keys costs one
 * seek, not a million steps.  A marker inside (or equal to) a common prefix
 * means that prefix was already returned, so listing resumes after it.
 */
#include "s3/checksum.h"
#include "s3/list.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/hex.h"
#include "core/log.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "store/store.h"

#define OL_S3_MAX_LIST 1000u      /* max-keys, max-uploads, max-parts ceiling */
#define OL_S3_MAX_PART_NO 10000u

/* ---- helpers (list.h) ---- */

size_t ol_s3_prefix_successor(const char *p, size_t n, char *out)
{
    size_t len = n;
    while (len > 0 && (unsigned char)p[len - 1] == 0xFF) /* bounded by n */
        len--;
    if (len == 0)
        return 0;
    memcpy(out, p, len);
    out[len - 1] = (char)((unsigned char)p[len - 1] + 1);
    return len;
}

size_t ol_s3_url_encode(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
        if (keep) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 0xF];
        }
    }
    out[o] = '\0';
    return o;
}

size_t ol_s3_token_encode(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = hex[(unsigned char)s[i] & 0xF];
    }
    out[2 * n] = '\0';
    return 2 * n;
}

int ol_s3_token_decode(const char *tok, size_t n, char *out, size_t cap)
{
    if (n == 0 || n % 2 != 0 || n / 2 > cap)
        return -EINVAL;
    if (!ol_unhex(tok, n, (uint8_t *)out, n / 2))
        return -EINVAL;
    return (int)(n / 2);
}

int ol_s3_parse_count(const char *s, size_t n, unsigned clamp, unsigned *out)
{
    if (n == 0 || n > 10)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v > clamp ? clamp : (unsigned)v;
    return 0;
}

/* ---- shared pieces ---- */

static int ol_s3_bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

static bool ol_s3_has_prefix(const char *s, size_t n, const char *p, size_t pn)
{
    return n >= pn && memcmp(s, p, pn) == 0;
}

/* Length of the common prefix that key rolls up into (prefix, then anything,
 * then the first delimiter after the prefix, included), or 0 if none. */
static size_t ol_s3_rollup(const char *key, size_t klen, size_t plen, const char *delim,
                           size_t dlen)
{
    if (dlen == 0 || klen < plen)
        return 0;
    const char *d = memmem(key + plen, klen - plen, delim, dlen);
    return d ? (size_t)(d - key) + dlen : 0;
}

/* One listed item: an object, an upload or a common prefix.  Its name lives
 * in the arena (offsets, since the arena may move while it grows). */
struct ol_list_ent {
    size_t name_off, name_len;
    bool is_prefix;
    uint64_t size;
    int64_t time_ns;
    char id[64]; /* an object's ETag (unquoted) or an upload id */
};

struct ol_list_buf {
    struct ol_list_ent *ents;
    size_t n, cap;
    char *arena;
    size_t arena_len, arena_cap;
};

static int ol_list_buf_init(struct ol_list_buf *b, unsigned max)
{
    memset(b, 0, sizeof(*b));
    b->cap = max ? max : 1;
    b->ents = calloc(b->cap, sizeof(*b->ents));
    return b->ents ? 0 : -ENOMEM;
}

static void ol_list_buf_free(struct ol_list_buf *b)
{
    free(b->ents);
    free(b->arena);
    memset(b, 0, sizeof(*b));
}

static int ol_list_buf_add(struct ol_list_buf *b, const char *name, size_t len,
                           struct ol_list_ent **out)
{
    OL_ASSERT(b->ents != NULL && b->n < b->cap);
    if (b->arena_cap - b->arena_len < len) {
        size_t cap = b->arena_cap ? b->arena_cap : 4096;
        while (cap - b->arena_len < len) /* bounded: names are <= 1 KiB each */
            cap *= 2;
        char *p = realloc(b->arena, cap);
        if (!p)
            return -ENOMEM;
        b->arena = p;
        b->arena_cap = cap;
    }
    struct ol_list_ent *e = &b->ents[b->n++];
    memset(e, 0, sizeof(*e));
    if (len)
        memcpy(b->arena + b->arena_len, name, len);
    e->name_off = b->arena_len;
    e->name_len = len;
    b->arena_len += len;
    *out = e;
    return 0;
}

static const char *ol_list_name(const struct ol_list_buf *b, const struct ol_list_ent *e)
{
    return b->arena + e->name_off;
}

/* Writes a name element, percent-encoded when the client asked for
 * encoding-type=url. */
static void ol_list_put(struct ol_xml *x, const char *tag, const char *s, size_t n, bool url)
{
    if (!url) {
        ol_xml_text(x, tag, s, n);
        return;
    }
    char *enc = malloc(3 * n + 1);
    if (!enc) {
        x->failed = true;
        return;
    }
    size_t m = ol_s3_url_encode(s, n, enc);
    ol_xml_text(x, tag, enc, m);
    free(enc);
}

static void ol_list_put_param(struct ol_xml *x, const char *tag, const struct ol_s3_param *p,
                              bool url)
{
    if (p)
        ol_list_put(x, tag, p->value, p->value_len, url);
    else
        ol_xml_text(x, tag, "", 0);
}


static void ol_list_owner_elem(struct ol_xml *x, const char *tag, const struct ol_s3_req *r)
{
    char owner[129];
    ol_s3_bucket_owner(r, owner);
    ol_xml_open(x, tag);
    ol_xml_str(x, "ID", owner);
    ol_xml_str(x, "DisplayName", owner);
    ol_xml_close(x);
}

static void ol_list_etag(struct ol_xml *x, const char *etag)
{
    char q[70];
    size_t n = strnlen(etag, 64);
    q[0] = '"';
    memcpy(q + 1, etag, n);
    q[n + 1] = '"';
    ol_xml_text(x, "ETag", q, n + 2);
}

static void ol_list_date(struct ol_xml *x, const char *tag, int64_t ns)
{
    char d[32];
    ol_s3_iso_date(ns, d);
    ol_xml_str(x, tag, d);
}

/* Reads encoding-type: false (none), true (url), or -EINVAL. */
static int ol_list_encoding(const struct ol_s3_req *r, bool *url)
{
    const struct ol_s3_param *p = ol_s3_param(r, "encoding-type");
    *url = false;
    if (!p)
        return 0;
    if (strcmp(p->value, "url") != 0)
        return -EINVAL;
    *url = true;
    return 0;
}

static int ol_list_count_param(const struct ol_s3_req *r, const char *name, unsigned def,
                               unsigned clamp, unsigned *out)
{
    const struct ol_s3_param *p = ol_s3_param(r, name);
    *out = def;
    if (!p)
        return 0;
    return ol_s3_parse_count(p->value, p->value_len, clamp, out);
}

static int ol_list_send(struct ol_s3_req *r, struct ol_xml *x)
{
    if (x->failed)
        return ol_s3_error_from(r, -ENOMEM);
    return ol_s3_send_xml(r, 200, x);
}

/* ---- ListObjects / ListObjectsV2 ---- */

struct ol_list_query {
    bool v2, url, fetch_owner;
    unsigned max_keys;
    const char *prefix, *delim;
    size_t plen, dlen;
    const struct ol_s3_param *p_prefix, *p_delim, *p_marker, *p_token, *p_start_after;
    const char *start; /* entries are returned strictly after this (NULL: from the start) */
    size_t start_len;
    char token[OL_S3_MAX_KEY];
};

/* Collects up to q->max_keys entries; sets *truncated when more follow. */
static int ol_list_collect(struct ol_s3_req *r, const struct ol_list_query *q,
                           struct ol_list_buf *out, bool *truncated)
{
    struct ol_obj_iter *src = {0};
    char seek[OL_S3_MAX_KEY];
    const char *from = q->prefix;
    size_t from_len = q->plen;
    bool inclusive = true;
    int ret = 0;

    *truncated = false;
    if (q->max_keys == 0)
        goto out;
    if (q->start && ol_s3_bytes_cmp(q->start, q->start_len, q->prefix, q->plen) >= 0) {
        from = q->start;
        from_len = q->start_len;
        inclusive = false;
        size_t cp = ol_s3_has_prefix(q->start, q->start_len, q->prefix, q->plen)
                        ? ol_s3_rollup(q->start, q->start_len, q->plen, q->delim, q->dlen)
                        : 0;
        /* A common prefix longer than any key covers no key: nothing to skip. */
        if (cp > 0 && cp <= sizeof(seek)) {
            /* The marker lies in a common prefix that was already returned:
             * resume after every key it covers. */
            size_t n = ol_s3_prefix_successor(q->start, cp, seek);
            if (n == 0)
                goto out;
            from = seek;
            from_len = n;
            inclusive = true;
        }
    }
    ret = ol_obj_iter_open(r->ctx->obj, r->bucket, from, from_len, inclusive, &src);
    if (ret < 0)
        goto out;
    /* Each round adds one entry or ends the loop. */
    for (unsigned i = 0; i <= q->max_keys; i++) {
        const char *key;
        size_t klen;
        struct ol_obj_info info;
        ret = ol_obj_iter_next(src, &key, &klen, &info);
        if (ret < 0)
            goto out;
        if (ret == 1) {
            ret = 0;
            break;
        }
        ret = 0;
        /* Keys with the prefix are one contiguous run that starts at or
         * before `from`: the first key without it ends the listing. */
        if (!ol_s3_has_prefix(key, klen, q->prefix, q->plen))
            break;
        if (out->n == q->max_keys) {
            *truncated = true;
            break;
        }
        if (klen > OL_S3_MAX_KEY) {
            ret = -EOVERFLOW;
            goto out;
        }
        struct ol_list_ent *e;
        size_t cp = ol_s3_rollup(key, klen, q->plen, q->delim, q->dlen);
        if (cp > 0) {
            ret = ol_list_buf_add(out, key, cp, &e);
            if (ret < 0)
                goto out;
            e->is_prefix = true;
            size_t n = ol_s3_prefix_successor(key, cp, seek);
            if (n == 0)
                break;
            ret = ol_obj_iter_seek(src, seek, n, true);
            if (ret < 0)
                goto out;
            continue;
        }
        ret = ol_list_buf_add(out, key, klen, &e);
        if (ret < 0)
            goto out;
        e->size = info.size;
        e->time_ns = info.mtime_ns;
        memcpy(e->id, info.etag, sizeof(e->id));
        e->id[sizeof(e->id) - 1] = '\0';
    }
out:
    ol_obj_iter_close(src);
    return ret;
}

/* S3 treats an empty delimiter, start-after or continuation token as if the
 * parameter were absent: no rollup, no start point, no echo in the reply. */
static const struct ol_s3_param *ol_list_nonempty(const struct ol_s3_param *p)
{
    return p && p->value_len ? p : NULL;
}

static int ol_list_parse_query(struct ol_s3_req *r, struct ol_list_query *q, const char **why)
{
    const struct ol_s3_param *p = ol_s3_param(r, "list-type");
    memset(q, 0, sizeof(*q));
    if (p) {
        if (strcmp(p->value, "2") == 0) {
            q->v2 = true;
        } else if (strcmp(p->value, "1") != 0) {
            *why = "Invalid list-type";
            return -EINVAL;
        }
    }
    if (ol_list_encoding(r, &q->url) < 0) {
        *why = "Invalid Encoding Method specified in Request";
        return -EINVAL;
    }
    if (ol_list_count_param(r, "max-keys", OL_S3_MAX_LIST, OL_S3_MAX_LIST, &q->max_keys) < 0) {
        *why = "Provided max-keys not an integer or within integer range";
        return -EINVAL;
    }
    q->p_prefix = ol_s3_param(r, "prefix");
    q->p_delim = ol_list_nonempty(ol_s3_param(r, "delimiter"));
    q->prefix = q->p_prefix ? q->p_prefix->value : "";
    q->plen = q->p_prefix ? q->p_prefix->value_len : 0;
    q->delim = q->p_delim ? q->p_delim->value : "";
    q->dlen = q->p_delim ? q->p_delim->value_len : 0;
    if (!q->v2) {
        q->p_marker = ol_s3_param(r, "marker");
        if (q->p_marker && q->p_marker->value_len) {
            q->start = q->p_marker->value;
            q->start_len = q->p_marker->value_len;
        }
        return 0;
    }
    p = ol_s3_param(r, "fetch-owner");
    q->fetch_owner = p && strcmp(p->value, "true") == 0;
    q->p_start_after = ol_list_nonempty(ol_s3_param(r, "start-after"));
    q->p_token = ol_list_nonempty(ol_s3_param(r, "continuation-token"));
    if (q->p_token) {
        /* The token wins over start-after: it is where the last page ended. */
        int n = ol_s3_token_decode(q->p_token->value, q->p_token->value_len, q->token,
                                   sizeof(q->token));
        if (n < 0) {
            *why = "The continuation token provided is incorrect";
            return -EINVAL;
        }
        q->start = q->token;
        q->start_len = (size_t)n;
    } else if (q->p_start_after) {
        q->start = q->p_start_after->value;
        q->start_len = q->p_start_after->value_len;
    }
    return 0;
}

static void ol_list_objects_xml(struct ol_s3_req *r, const struct ol_list_query *q,
                                const struct ol_list_buf *b, bool truncated, struct ol_xml *x)
{
    OL_ASSERT(b->ents != NULL);
    const struct ol_list_ent *last = b->n ? &b->ents[b->n - 1] : NULL;

    ol_xml_begin_doc(x, "ListBucketResult");
    ol_xml_str(x, "Name", r->bucket);
    /* ListObjects (v1) leaves the top-level Prefix as sent even with
     * encoding-type=url; only v2 encodes it (botocore decodes accordingly). */
    ol_list_put_param(x, "Prefix", q->p_prefix, q->url && q->v2);
    if (q->v2) {
        if (q->p_token)
            ol_xml_text(x, "ContinuationToken", q->p_token->value, q->p_token->value_len);
        if (q->p_start_after)
            ol_list_put_param(x, "StartAfter", q->p_start_after, q->url);
        ol_xml_u64(x, "KeyCount", b->n);
    } else {
        ol_list_put_param(x, "Marker", q->p_marker, q->url);
        /* S3 sends NextMarker only with a delimiter (otherwise the last key
         * serves); sending it whenever the page is truncated is harmless and
         * saves clients that expect it from looping. */
        if (truncated && last)
            ol_list_put(x, "NextMarker", ol_list_name(b, last), last->name_len, q->url);
    }
    ol_xml_u64(x, "MaxKeys", q->max_keys);
    if (q->p_delim)
        ol_list_put_param(x, "Delimiter", q->p_delim, q->url);
    if (q->url)
        ol_xml_str(x, "EncodingType", "url");
    ol_xml_bool(x, "IsTruncated", truncated);
    for (size_t i = 0; i < b->n; i++) {
        const struct ol_list_ent *e = &b->ents[i];
        if (e->is_prefix)
            continue;
        ol_xml_open(x, "Contents");
        ol_list_put(x, "Key", ol_list_name(b, e), e->name_len, q->url);
        ol_list_date(x, "LastModified", e->time_ns);
        ol_list_etag(x, e->id);
        ol_xml_u64(x, "Size", e->size);
        ol_xml_str(x, "StorageClass", "STANDARD");
        if (!q->v2 || q->fetch_owner)
            ol_list_owner_elem(x, "Owner", r);
        ol_xml_close(x);
    }
    for (size_t i = 0; i < b->n; i++) {
        const struct ol_list_ent *e = &b->ents[i];
        if (!e->is_prefix)
            continue;
        ol_xml_open(x, "CommonPrefixes");
        ol_list_put(x, "Prefix", ol_list_name(b, e), e->name_len, q->url);
        ol_xml_close(x);
    }
    if (q->v2 && truncated && last) {
        char *tok = malloc(2 * last->name_len + 1);
        if (tok) {
            size_t n = ol_s3_token_encode(ol_list_name(b, last), last->name_len, tok);
            ol_xml_text(x, "NextContinuationToken", tok, n);
            free(tok);
        } else {
            x->failed = true;
        }
    }
    ol_xml_end_doc(x);
}

int ol_s3_list_objects(struct ol_s3_req *r)
{
    struct ol_list_query *q = NULL;
    struct ol_list_buf b = {0};
    struct ol_xml x;
    const char *why = NULL;
    bool truncated = false;
    int ret;

    ol_xml_init(&x);
    q = malloc(sizeof(*q));
    if (!q) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    if (ol_list_parse_query(r, q, &why) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument, why);
        goto out;
    }
    ret = ol_list_buf_init(&b, q->max_keys);
    if (ret == 0)
        ret = ol_list_collect(r, q, &b, &truncated);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    ol_list_objects_xml(r, q, &b, truncated, &x);
    ret = ol_list_send(r, &x);
out:
    ol_xml_free(&x);
    ol_list_buf_free(&b);
    free(q);
    return ret;
}

/* ---- ListMultipartUploads ---- */

struct ol_uploads_ctx {
    const char *prefix, *delim, *kmarker, *umarker;
    size_t plen, dlen, kmlen;
    unsigned max;
    struct ol_list_buf *out;
    bool truncated;
    int err;
};

static int ol_uploads_one(void *arg, const struct ol_upload_info *u)
{
    struct ol_uploads_ctx *c = arg;
    struct ol_list_ent *e;

    if (!ol_s3_has_prefix(u->key, u->key_len, c->prefix, c->plen))
        return 0;
    if (c->kmarker) {
        int cmp = ol_s3_bytes_cmp(u->key, u->key_len, c->kmarker, c->kmlen);
        if (cmp < 0)
            return 0;
        if (cmp == 0 && (!c->umarker || strcmp(u->upload_id, c->umarker) <= 0))
            return 0;
    }
    size_t cp = ol_s3_rollup(u->key, u->key_len, c->plen, c->delim, c->dlen);
    if (cp > 0) {
        const struct ol_list_ent *last = c->out->n ? &c->out->ents[c->out->n - 1] : NULL;
        /* Uploads come in key order, so a prefix repeats only back to back;
         * and one at or before the marker went out on an earlier page. */
        if (last && last->is_prefix && last->name_len == cp &&
            memcmp(ol_list_name(c->out, last), u->key, cp) == 0)
            return 0;
        if (c->kmarker && ol_s3_bytes_cmp(u->key, cp, c->kmarker, c->kmlen) <= 0)
            return 0;
    }
    if (c->out->n == c->max) {
        c->truncated = true;
        return 1;
    }
    c->err = ol_list_buf_add(c->out, u->key, cp > 0 ? cp : u->key_len, &e);
    if (c->err < 0)
        return 1;
    if (cp > 0) {
        e->is_prefix = true;
        return 0;
    }
    e->time_ns = u->ctime_ns;
    snprintf(e->id, sizeof(e->id), "%s", u->upload_id);
    return 0;
}

int ol_s3_list_uploads(struct ol_s3_req *r)
{
    struct ol_list_buf b = {0};
    struct ol_xml x;
    struct ol_bucket_info bi;
    struct ol_uploads_ctx c;
    unsigned max;
    bool url;
    int ret;

    ol_xml_init(&x);
    memset(&c, 0, sizeof(c));
    if (ol_list_encoding(r, &url) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument,
                          "Invalid Encoding Method specified in Request");
        goto out;
    }
    if (ol_list_count_param(r, "max-uploads", OL_S3_MAX_LIST, OL_S3_MAX_LIST, &max) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument, "Invalid max-uploads");
        goto out;
    }
    const struct ol_s3_param *p_prefix = ol_s3_param(r, "prefix");
    const struct ol_s3_param *p_delim = ol_list_nonempty(ol_s3_param(r, "delimiter"));
    const struct ol_s3_param *p_kmarker = ol_s3_param(r, "key-marker");
    const struct ol_s3_param *p_umarker = ol_s3_param(r, "upload-id-marker");
    c.prefix = p_prefix ? p_prefix->value : "";
    c.plen = p_prefix ? p_prefix->value_len : 0;
    c.delim = p_delim ? p_delim->value : "";
    c.dlen = p_delim ? p_delim->value_len : 0;
    if (p_kmarker && p_kmarker->value_len) {
        c.kmarker = p_kmarker->value;
        c.kmlen = p_kmarker->value_len;
        /* S3 ignores upload-id-marker without key-marker. */
        if (p_umarker && p_umarker->value_len)
            c.umarker = p_umarker->value;
    }
    c.max = max;
    c.out = &b;

    ret = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (ret == 0)
        ret = ol_list_buf_init(&b, max);
    if (ret == 0 && max > 0) {
        ret = ol_obj_upload_list(r->ctx->obj, r->bucket, ol_uploads_one, &c);
        if (ret >= 0)
            ret = c.err;
    }
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }

    OL_ASSERT(b.ents != NULL);
    const struct ol_list_ent *last = b.n ? &b.ents[b.n - 1] : NULL;
    ol_xml_begin_doc(&x, "ListMultipartUploadsResult");
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_list_put_param(&x, "KeyMarker", p_kmarker, url);
    ol_list_put_param(&x, "UploadIdMarker", p_umarker, false);
    if (c.truncated && last) {
        ol_list_put(&x, "NextKeyMarker", ol_list_name(&b, last), last->name_len, url);
        ol_xml_str(&x, "NextUploadIdMarker", last->is_prefix ? "" : last->id);
    }
    if (p_delim)
        ol_list_put_param(&x, "Delimiter", p_delim, url);
    ol_list_put_param(&x, "Prefix", p_prefix, url);
    ol_xml_u64(&x, "MaxUploads", max);
    if (url)
        ol_xml_str(&x, "EncodingType", "url");
    ol_xml_bool(&x, "IsTruncated", c.truncated);
    for (size_t i = 0; i < b.n; i++) {
        const struct ol_list_ent *e = &b.ents[i];
        if (e->is_prefix)
            continue;
        ol_xml_open(&x, "Upload");
        ol_list_put(&x, "Key", ol_list_name(&b, e), e->name_len, url);
        ol_xml_str(&x, "UploadId", e->id);
        ol_list_owner_elem(&x, "Initiator", r);
        ol_list_owner_elem(&x, "Owner", r);
        ol_xml_str(&x, "StorageClass", "STANDARD");
        ol_list_date(&x, "Initiated", e->time_ns);
        ol_xml_close(&x);
    }
    for (size_t i = 0; i < b.n; i++) {
        const struct ol_list_ent *e = &b.ents[i];
        if (!e->is_prefix)
            continue;
        ol_xml_open(&x, "CommonPrefixes");
        ol_list_put(&x, "Prefix", ol_list_name(&b, e), e->name_len, url);
        ol_xml_close(&x);
    }
    ol_xml_end_doc(&x);
    ret = ol_list_send(r, &x);
out:
    ol_xml_free(&x);
    ol_list_buf_free(&b);
    return ret;
}

/* ---- ListParts ---- */

struct ol_parts_ctx {
    const struct ol_s3_req *r;
    bool match;               /* the upload belongs to this bucket and key */
    struct ol_part_info *parts;
    unsigned n, max;
    bool truncated;
};

static int ol_parts_check_upload(void *arg, const struct ol_upload_info *u)
{
    struct ol_parts_ctx *c = arg;
    const struct ol_s3_req *r = c->r;
    c->match = strcmp(u->bucket, r->bucket) == 0 && r->key && u->key_len == r->key_len &&
               memcmp(u->key, r->key, r->key_len) == 0;
    return 1;
}

static int ol_parts_one(void *arg, const struct ol_part_info *p)
{
    struct ol_parts_ctx *c = arg;
    if (c->n == c->max) {
        c->truncated = true;
        return 1;
    }
    c->parts[c->n++] = *p;
    return 0;
}

int ol_s3_list_parts(struct ol_s3_req *r)
{
    struct ol_parts_ctx c;
    struct ol_xml x;
    unsigned marker, max;
    bool url;
    int ret;

    ol_xml_init(&x);
    memset(&c, 0, sizeof(c));
    c.r = r;
    const struct ol_s3_param *p_id = ol_s3_param(r, "uploadId");
    if (!p_id || p_id->value_len == 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument, "uploadId is required");
        goto out;
    }
    if (ol_list_encoding(r, &url) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument,
                          "Invalid Encoding Method specified in Request");
        goto out;
    }
    if (ol_list_count_param(r, "part-number-marker", 0, OL_S3_MAX_PART_NO, &marker) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument, "Invalid part-number-marker");
        goto out;
    }
    if (ol_list_count_param(r, "max-parts", OL_S3_MAX_LIST, OL_S3_MAX_LIST, &max) < 0) {
        ret = ol_s3_error(r, OL_S3_InvalidArgument, "Invalid max-parts");
        goto out;
    }
    c.max = max;
    c.parts = calloc(max ? max : 1, sizeof(*c.parts));
    if (!c.parts) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    ret = ol_obj_upload_get(r->ctx->obj, r->bucket, p_id->value, ol_parts_check_upload, &c);
    if (ret >= 0 && !c.match)
        ret = -OL_ENOUPLOAD;
    if (ret >= 0 && max > 0)
        ret = ol_obj_part_list(r->ctx->obj, r->bucket, p_id->value, marker, ol_parts_one, &c);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }

    ol_xml_begin_doc(&x, "ListPartsResult");
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_list_put(&x, "Key", r->key ? r->key : "", r->key ? r->key_len : 0, url);
    ol_xml_text(&x, "UploadId", p_id->value, p_id->value_len);
    ol_list_owner_elem(&x, "Initiator", r);
    ol_list_owner_elem(&x, "Owner", r);
    ol_xml_str(&x, "StorageClass", "STANDARD");
    ol_xml_u64(&x, "PartNumberMarker", marker);
    ol_xml_u64(&x, "NextPartNumberMarker", c.n ? c.parts[c.n - 1].part_no : marker);
    ol_xml_u64(&x, "MaxParts", max);
    if (url)
        ol_xml_str(&x, "EncodingType", "url");
    ol_xml_bool(&x, "IsTruncated", c.truncated);
    for (unsigned i = 0; i < c.n; i++) {
        const struct ol_part_info *p = &c.parts[i];
        ol_xml_open(&x, "Part");
        ol_xml_u64(&x, "PartNumber", p->part_no);
        ol_list_date(&x, "LastModified", p->mtime_ns);
        /* A stored part ETag may carry the part's checksum (checksum.h). */
        char md5[33], ckb64[OL_CK_B64_MAX];
        enum ol_ck_algo ca = OL_CK_NONE;
        uint8_t cd[OL_CK_MAX_BYTES];
        if (!ol_ck_part_etag_decode(p->etag, md5, &ca, cd))
            snprintf(md5, sizeof(md5), "%.32s", p->etag);
        ol_list_etag(&x, md5);
        ol_xml_u64(&x, "Size", p->size);
        if (ca != OL_CK_NONE) {
            char tag[24];
            ol_b64_encode(cd, ol_ck_len(ca), ckb64);
            snprintf(tag, sizeof(tag), "Checksum%s", ol_ck_name(ca));
            ol_xml_str(&x, tag, ckb64);
        }
        ol_xml_close(&x);
    }
    ol_xml_end_doc(&x);
    ret = ol_list_send(r, &x);
out:
    ol_xml_free(&x);
    free(c.parts);
    return ret;
}
