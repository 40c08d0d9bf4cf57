/* AWS Signature Version 2 (see sigv2.h). */
#include "s3/sigv2.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <strings.h>

#include "s3/sigv4.h"

/* The sub-resources a V2 signature covers: the list botocore (1.29 to 1.43)
 * signs, which is S3's documented list and a few later additions.  A
 * parameter not named here is not signed by any V2 client, so the S3 layer
 * must not let one change what a request does unsigned: the router answers
 * 501 to every parameter it does not know, and the ones it knows outside
 * this list are listing arguments and x-id. */
static const char *const subresources[] = {
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock", "partNumber",
    "policy", "replication", "requestPayment", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website", "response-content-type", "response-content-language",
    "response-expires", "response-cache-control", "response-content-disposition",
    "response-content-encoding",
};

bool ol_sigv2_subresource(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(subresources) / sizeof(*subresources); i++)
        if (strlen(subresources[i]) == n && memcmp(subresources[i], name, n) == 0)
            return true;
    return false;
}

struct out {
    char *p;
    size_t cap, n;
    bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->full || n > o->cap - o->n) {
        o->full = true;
        return;
    }
    if (n == 0)
        return; /* s may be NULL (an absent header's empty slice) */
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static struct ol_slice trim(struct ol_slice s)
{
    while (s.n && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.n--;
    }
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

static int cmp_name(struct ol_slice a, struct ol_slice b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = strncasecmp(a.p, b.p, n);
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

/* One query part "name[=value]" of the raw query. */
struct qpart {
    struct ol_slice name, value;
    bool has_eq;
};

int ol_sigv2_string_to_sign(const struct ol_sigv2_request *req, char *buf, size_t cap,
                            size_t *len)
{
    if (req->namz > OL_SIGV2_MAX_AMZ)
        return -EINVAL;
    struct out o = {buf, cap, 0, false};
    put(&o, req->method.p, req->method.n);
    put(&o, "\n", 1);
    struct ol_slice md5 = trim(req->content_md5), type = trim(req->content_type);
    put(&o, md5.p, md5.n);
    put(&o, "\n", 1);
    put(&o, type.p, type.n);
    put(&o, "\n", 1);
    struct ol_slice date = trim(req->date);
    put(&o, date.p, date.n);
    put(&o, "\n", 1);

    /* The amz headers, sorted by name (insertion sort of indexes: at most
     * OL_SIGV2_MAX_AMZ). */
    size_t order[OL_SIGV2_MAX_AMZ];
    for (size_t i = 0; i < req->namz; i++) {
        size_t j = i;
        while (j > 0 && cmp_name(req->amz[order[j - 1]].name, req->amz[i].name) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (size_t i = 0; i < req->namz; i++) {
        const struct ol_sigv2_amz *a = &req->amz[order[i]];
        for (size_t k = 0; k < a->name.n && !o.full; k++) {
            char c = a->name.p[k];
            c = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
            put(&o, &c, 1);
        }
        put(&o, ":", 1);
        struct ol_slice v = trim(a->value);
        put(&o, v.p, v.n);
        put(&o, "\n", 1);
    }

    if (req->bucket.n) {
        put(&o, "/", 1);
        put(&o, req->bucket.p, req->bucket.n);
    }
    put(&o, req->path.p, req->path.n);

    /* Sub-resources: sorted by name; the value percent-decoded ('+' kept,
     * as botocore's unquote does), "=" only where the query had one. */
    struct qpart parts[32];
    size_t np = 0;
    const char *p = req->query.p, *end = req->query.p + req->query.n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        struct qpart q = {{p, (size_t)((eq ? eq : e) - p)}, {NULL, 0}, eq != NULL};
        if (eq)
            q.value = (struct ol_slice){eq + 1, (size_t)(e - eq - 1)};
        if (q.name.n && ol_sigv2_subresource(q.name.p, q.name.n)) {
            if (np == sizeof(parts) / sizeof(*parts))
                return -EINVAL;
            size_t j = np++;
            while (j > 0 && cmp_name(parts[j - 1].name, q.name) > 0) {
                parts[j] = parts[j - 1];
                j--;
            }
            parts[j] = q;
        }
        p = e + 1;
    }
    for (size_t i = 0; i < np; i++) {
        put(&o, i ? "&" : "?", 1);
        put(&o, parts[i].name.p, parts[i].name.n);
        if (!parts[i].has_eq)
            continue;
        put(&o, "=", 1);
        if (o.full || parts[i].value.n > o.cap - o.n) {
            o.full = true;
            break;
        }
        ssize_t dn = ol_pct_decode(parts[i].value.p, parts[i].value.n, o.p + o.n, o.cap - o.n,
                                   false);
        if (dn < 0)
            return -EINVAL;
        o.n += (size_t)dn;
    }
    if (o.full)
        return -ENOSPC;
    *len = o.n;
    return 0;
}

int ol_sigv2_sign(const char *secret, size_t secret_len, const char *sts, size_t sts_len,
                  char sig[OL_SIGV2_SIG_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    sig[0] = 0;
    if (!HMAC(EVP_sha1(), secret, (int)secret_len, (const unsigned char *)sts, sts_len, md,
              &mdlen) ||
        mdlen != 20)
        return -ENOMEM;
    int n = EVP_EncodeBlock((unsigned char *)sig, md, 20);
    if (n != OL_SIGV2_SIG_LEN) {
        sig[0] = 0;
        return -ENOMEM;
    }
    sig[n] = 0;
    return 0;
}

bool ol_sigv2_sig_equal(const char *computed, struct ol_slice given)
{
    size_t n = strlen(computed);
    if (n == 0 || given.n != n)
        return false;
    return CRYPTO_memcmp(computed, given.p, n) == 0;
}
