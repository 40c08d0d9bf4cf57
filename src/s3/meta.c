#include "s3/meta.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const kept[] = {
    "content-type", "content-encoding", "content-disposition", "content-language",
    "cache-control", "expires", "x-amz-website-redirect-location",
};

static bool is_kept(struct ol_slice name)
{
    if (name.n > 11 && strncasecmp(name.p, "x-amz-meta-", 11) == 0)
        return true;
    for (size_t i = 0; i < sizeof(kept) / sizeof(*kept); i++)
        if (strlen(kept[i]) == name.n && strncasecmp(name.p, kept[i], name.n) == 0)
            return true;
    return false;
}

static int put(uint8_t *out, size_t cap, size_t *o, const char *p, size_t n, bool lower)
{
    if (n > 0xffff || *o + 2 + n > cap)
        return -E2BIG;
    out[(*o)++] = (uint8_t)(n & 0xff);
    out[(*o)++] = (uint8_t)(n >> 8);
    for (size_t i = 0; i < n; i++)
        out[*o + i] = lower ? (uint8_t)tolower((unsigned char)p[i]) : (uint8_t)p[i];
    *o += n;
    return 0;
}

bool ol_s3_header_value_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7F)
            return false;
    }
    return true;
}

int ol_s3_meta_error(struct ol_s3_req *r, int rc)
{
    if (rc == -EINVAL)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "A metadata header value contains a control character.");
    return ol_s3_error(r, OL_S3_MetadataTooLarge,
                       "Your metadata headers exceed the maximum allowed metadata size.");
}

int ol_s3_meta_encode(const struct ol_s3_req *r, uint8_t *out, size_t cap)
{
    const struct ol_http_request *h = &r->http->head;
    size_t o = 0, user = 0;
    for (size_t i = 0; i < h->nheaders; i++) {
        struct ol_slice name = h->headers[i].name, val = h->headers[i].value;
        if (!is_kept(name))
            continue;
        /* aws-chunked is transport framing, not the object's encoding. */
        if (name.n == 16 && strncasecmp(name.p, "content-encoding", 16) == 0) {
            if (val.n >= 11 && strncasecmp(val.p, "aws-chunked", 11) == 0) {
                val.p += 11;
                val.n -= 11;
                while (val.n && (*val.p == ',' || *val.p == ' ')) {
                    val.p++;
                    val.n--;
                }
                if (!val.n)
                    continue;
            }
        }
        /* S3 counts the bytes of each user metadata name (without the
         * prefix) and value. */
        if (name.n > 11 && strncasecmp(name.p, "x-amz-meta-", 11) == 0) {
            user += name.n - 11 + val.n;
            if (user > OL_S3_USER_META_MAX)
                return -E2BIG;
        }
        /* The HTTP parser refuses these already; the check keeps the blob's
         * promise (servable as headers) whatever built the request. */
        if (!ol_s3_header_value_ok(val.p, val.n))
            return -EINVAL;
        if (put(out, cap, &o, name.p, name.n, true) || put(out, cap, &o, val.p, val.n, false))
            return -EMSGSIZE;
    }
    return (int)o;
}

size_t ol_s3_meta_headers(const uint8_t *blob, size_t len, struct ol_http_hdr *hdrs, size_t max,
                          char *store, size_t store_cap)
{
    size_t i = 0, n = 0, s = 0;
    while (i + 2 <= len && n < max) {
        size_t nl = blob[i] | (size_t)blob[i + 1] << 8;
        if (i + 2 + nl + 2 > len)
            break;
        const uint8_t *name = blob + i + 2;
        size_t vl = blob[i + 2 + nl] | (size_t)blob[i + 3 + nl] << 8;
        const uint8_t *val = blob + i + 4 + nl;
        if (i + 4 + nl + vl > len)
            break;
        /* Internal entries are never headers; nor is a value that could not
         * be one (no current writer stores such a value). */
        if ((nl > 0 && name[0] == ':') || !ol_s3_header_value_ok((const char *)val, vl)) {
            i += 4 + nl + vl;
            continue;
        }
        if (s + nl + vl + 2 > store_cap)
            break;
        memcpy(store + s, name, nl);
        store[s + nl] = 0;
        hdrs[n].name = store + s;
        s += nl + 1;
        memcpy(store + s, val, vl);
        store[s + vl] = 0;
        hdrs[n].value = store + s;
        s += vl + 1;
        n++;
        i += 4 + nl + vl;
    }
    return n;
}

size_t ol_s3_meta_count(const uint8_t *blob, size_t len)
{
    size_t i = 0, n = 0;
    /* Each round advances at least 4 bytes (see the walk in meta_headers). */
    while (i + 4 <= len) {
        size_t nl = blob[i] | (size_t)blob[i + 1] << 8;
        if (i + 4 + nl > len)
            break;
        size_t vl = blob[i + 2 + nl] | (size_t)blob[i + 3 + nl] << 8;
        if (i + 4 + nl + vl > len)
            break;
        n += !(nl > 0 && blob[i + 2] == ':');
        i += 4 + nl + vl;
    }
    return n;
}

/* Walks the blob: calls back with each entry's offset and slices.  Bounded by
 * the blob: every round advances at least 4 bytes. */
struct meta_ent {
    size_t off, total;
    const uint8_t *name, *val;
    size_t nl, vl;
};

static bool meta_next(const uint8_t *blob, size_t len, size_t *i, struct meta_ent *e)
{
    if (*i + 4 > len)
        return false;
    size_t nl = blob[*i] | (size_t)blob[*i + 1] << 8;
    if (*i + 4 + nl > len)
        return false;
    size_t vl = blob[*i + 2 + nl] | (size_t)blob[*i + 3 + nl] << 8;
    if (*i + 4 + nl + vl > len)
        return false;
    *e = (struct meta_ent){*i, 4 + nl + vl, blob + *i + 2, blob + *i + 4 + nl, nl, vl};
    *i += e->total;
    return true;
}

int ol_s3_meta_get(const uint8_t *blob, size_t len, const char *name, const uint8_t **val,
                   size_t *vlen)
{
    size_t i = 0, n = strlen(name);
    struct meta_ent e;
    while (meta_next(blob, len, &i, &e)) {
        if (e.nl == n && memcmp(e.name, name, n) == 0) {
            *val = e.val;
            *vlen = e.vl;
            return 0;
        }
    }
    return -ENOENT;
}

int ol_s3_meta_add(uint8_t *blob, size_t cap, size_t *len, const char *name, const void *val,
                   size_t vlen)
{
    size_t o = *len;
    int rc = put(blob, cap, &o, name, strlen(name), false);
    if (rc == 0)
        rc = put(blob, cap, &o, val, vlen, false);
    if (rc == 0)
        *len = o;
    return rc;
}

size_t ol_s3_meta_strip_internal(uint8_t *blob, size_t len)
{
    size_t i = 0, o = 0;
    struct meta_ent e;
    while (meta_next(blob, len, &i, &e)) {
        if (e.nl > 0 && e.name[0] == ':')
            continue;
        memmove(blob + o, blob + e.off, e.total);
        o += e.total;
    }
    return o;
}
