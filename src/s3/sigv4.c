/* AWS Signature Version 4 for S3: parsing, canonicalisation, signing,
 * verification, and the aws-chunked body decoder.  See sigv4.h for the
 * contract.
 *
 * The canonical request is never built in memory on the verify path: its
 * parts are streamed into a SHA-256 context through a small staging buffer,
 * and the canonical query is sorted as an array of raw slices compared by
 * their encoded form.  That keeps the work per request bounded and free of
 * buffers sized by the attacker.
 */
#include "s3/sigv4.h"

#include <stdint.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/log.h"
#include "core/sha256.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR "aws4_request"
#define SIGV4_SERVICE "s3"
#define EMPTY_SHA256_HEX "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

enum {
    /* S3 requests carry a handful of query parameters; a request with more
     * than this is refused rather than sorted in an unbounded array. */
    MAX_QUERY_PARAMS = 128,
    MAX_ACCESS_KEY_BYTES = 128,
    /* Region and service bounds keep the scope within ol_aws_chunked.scope. */
    MAX_REGION_BYTES = 64,
    MAX_SERVICE_BYTES = 32,
    MAX_EXPIRES_SEC = 604800,
    MAX_TRAILERS = 16,
    SIG_HEX_LEN = 64,
};

static const char hex_lower[] = "0123456789abcdef";
static const char hex_upper[] = "0123456789ABCDEF";

static int hex_val(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void to_hex(const uint8_t *in, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_lower[in[i] >> 4];
        out[2 * i + 1] = hex_lower[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* A signature as sent: exactly 64 lowercase hex digits.  Uppercase is
 * refused because the comparison is done on the hex text. */
static bool is_sig_hex(const char *p, size_t n)
{
    if (n != SIG_HEX_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static bool is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static bool slice_eq(struct ol_slice s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

static struct ol_slice slice_trim(struct ol_slice s)
{
    while (s.n > 0 && is_space(s.p[0])) {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && is_space(s.p[s.n - 1]))
        s.n--;
    return s;
}

/* Every '%' must start a two-hex-digit escape. */
static bool escapes_ok(struct ol_slice s)
{
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] != '%')
            continue;
        if (i + 2 >= s.n || hex_val((unsigned char)s.p[i + 1]) < 0 ||
            hex_val((unsigned char)s.p[i + 2]) < 0)
            return false;
        i += 2;
    }
    return true;
}

/* ---- hashing helpers (core/sha256.h: per-thread contexts) ---- */

static int sha256_raw(const void *buf, size_t len, uint8_t md[32])
{
    return ol_sha256(buf, len, md);
}

void ol_sha256_hex(const void *buf, size_t len, char out[65])
{
    uint8_t md[32];
    if (sha256_raw(buf, len, md) != 0) {
        out[0] = '\0';
        return;
    }
    to_hex(md, sizeof(md), out);
}

static int hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                       uint8_t out[32])
{
    struct ol_bytes m = {msg, msg_len};
    return ol_hmac_sha256(key, key_len, &m, 1, out);
}

static int derive_key_uncached(const char *secret, size_t secret_len, struct ol_slice date,
                               struct ol_slice region, struct ol_slice service, uint8_t key[32])
{
    uint8_t k0[64];
    size_t k0_len;
    uint8_t a[32], b[32];
    int rc = 0;

    if (4 + secret_len <= sizeof(k0)) {
        memcpy(k0, "AWS4", 4);
        if (secret_len > 0)
            memcpy(k0 + 4, secret, secret_len);
        k0_len = 4 + secret_len;
    } else {
        /* HMAC replaces a key longer than the 64-byte SHA-256 block by its
         * hash (RFC 2104), so hashing "AWS4" + secret here gives the same
         * result without a buffer sized for any secret. */
        EVP_MD_CTX *md = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
        unsigned int n = 0;
        if (md == NULL || EVP_DigestUpdate(md, "AWS4", 4) != 1 ||
            EVP_DigestUpdate(md, secret, secret_len) != 1 || EVP_DigestFinal_ex(md, k0, &n) != 1 ||
            n != 32)
            rc = -ENOMEM;
        if (rc != 0)
            goto out;
        k0_len = 32;
    }
    rc = hmac_sha256(k0, k0_len, date.p, date.n, a);
    if (rc == 0)
        rc = hmac_sha256(a, sizeof(a), region.p, region.n, b);
    if (rc == 0)
        rc = hmac_sha256(b, sizeof(b), service.p, service.n, a);
    if (rc == 0)
        rc = hmac_sha256(a, sizeof(a), SIGV4_TERMINATOR, strlen(SIGV4_TERMINATOR), key);
out:
    OPENSSL_cleanse(k0, sizeof(k0));
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

/* The signing key depends only on (secret, date, region, service), which a
 * client repeats on every request of a day: each thread remembers the last
 * few it derived (four HMACs each).  An entry matches on every input byte,
 * so a changed secret can never reuse an old key. */
enum { KEY_CACHE_ENTRIES = 4, KEY_CACHE_SECRET_MAX = 64, KEY_CACHE_DATE_MAX = 8 };

struct key_cache_ent {
    bool used;
    uint8_t secret_len, date_len, region_len, service_len;
    char secret[KEY_CACHE_SECRET_MAX];
    char date[KEY_CACHE_DATE_MAX];
    char region[MAX_REGION_BYTES];
    char service[MAX_SERVICE_BYTES];
    uint8_t key[32];
};

static __thread struct key_cache_ent tl_keys[KEY_CACHE_ENTRIES];
static __thread unsigned tl_keys_next;

static bool key_ent_match(const struct key_cache_ent *e, const char *secret, size_t secret_len,
                          struct ol_slice date, struct ol_slice region, struct ol_slice service)
{
    return e->used && e->secret_len == secret_len && e->date_len == date.n &&
           e->region_len == region.n && e->service_len == service.n &&
           memcmp(e->date, date.p, date.n) == 0 && memcmp(e->region, region.p, region.n) == 0 &&
           memcmp(e->service, service.p, service.n) == 0 &&
           CRYPTO_memcmp(e->secret, secret, secret_len) == 0;
}

static int derive_key(const char *secret, size_t secret_len, struct ol_slice date,
                      struct ol_slice region, struct ol_slice service, uint8_t key[32])
{
    bool cacheable = secret_len <= KEY_CACHE_SECRET_MAX && date.n <= KEY_CACHE_DATE_MAX &&
                     region.n <= MAX_REGION_BYTES && service.n <= MAX_SERVICE_BYTES;
    if (cacheable) {
        for (unsigned i = 0; i < KEY_CACHE_ENTRIES; i++) {
            if (key_ent_match(&tl_keys[i], secret, secret_len, date, region, service)) {
                memcpy(key, tl_keys[i].key, 32);
                return 0;
            }
        }
    }
    int rc = derive_key_uncached(secret, secret_len, date, region, service, key);
    if (rc != 0 || !cacheable)
        return rc;
    struct key_cache_ent *e = &tl_keys[tl_keys_next++ % KEY_CACHE_ENTRIES];
    e->secret_len = (uint8_t)secret_len;
    e->date_len = (uint8_t)date.n;
    e->region_len = (uint8_t)region.n;
    e->service_len = (uint8_t)service.n;
    if (secret_len)
        memcpy(e->secret, secret, secret_len);
    memcpy(e->date, date.p, date.n);
    memcpy(e->region, region.p, region.n);
    memcpy(e->service, service.p, service.n);
    memcpy(e->key, key, 32);
    e->used = true;
    return 0;
}

void ol_sigv4_signing_key(const char *secret, size_t secret_len, struct ol_slice date,
                          struct ol_slice region, struct ol_slice service, uint8_t key[32])
{
    if (derive_key(secret, secret_len, date, region, service, key) != 0)
        memset(key, 0, 32);
}

/* ---- percent-encoding ---- */

ssize_t ol_pct_decode(const char *src, size_t len, char *dst, size_t dst_cap, bool plus_is_space)
{
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hex_val((unsigned char)src[i + 1]);
            int lo = hex_val((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (out >= dst_cap)
            return -1;
        /* out <= i always, so decoding in place never overwrites unread input. */
        dst[out++] = (char)c;
    }
    return (ssize_t)out;
}

ssize_t ol_uri_decode(const char *src, size_t len, char *dst)
{
    return ol_pct_decode(src, len, dst, SIZE_MAX, false);
}

ssize_t ol_uri_encode(const char *src, size_t len, char *dst, size_t dst_cap, bool keep_slash)
{
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            if (dst_cap - out < 1)
                return -1;
            dst[out++] = (char)c;
            continue;
        }
        if (dst_cap - out < 3)
            return -1;
        dst[out++] = '%';
        dst[out++] = hex_upper[c >> 4];
        dst[out++] = hex_upper[c & 15];
    }
    return (ssize_t)out;
}

/* Yields the SigV4 encoding of a raw (percent-encoded) string one byte at a
 * time: each escape is decoded and every byte re-encoded, so that the
 * canonical form does not depend on how the client chose to escape.  With
 * keep_slash (paths) a literal '/' stays, while an escaped one stays
 * escaped.  With plus_is_space (query names and values) a literal '+' is
 * a space, exactly as the router decodes it (form encoding), so it becomes
 * "%20" while "%2B" stays a plus: were '+' canonicalised as a plus, "a+b"
 * and "a%2Bb" would share a signature and mean different things.  The
 * input's escapes must have been checked with escapes_ok(). */
struct enc_iter {
    const char *p;
    size_t n;
    size_t i;
    bool keep_slash;
    bool plus_is_space;
    char pend[2];
    unsigned ipend;
    unsigned npend;
};

enum { ENC_PATH, ENC_QUERY };

static struct enc_iter enc_start(struct ol_slice s, int kind)
{
    struct enc_iter e = {
        .p = s.p, .n = s.n, .keep_slash = kind == ENC_PATH, .plus_is_space = kind == ENC_QUERY};
    return e;
}

static int enc_next(struct enc_iter *e)
{
    if (e->ipend < e->npend)
        return (unsigned char)e->pend[e->ipend++];
    if (e->i >= e->n)
        return -1;
    unsigned char c = (unsigned char)e->p[e->i];
    bool escaped = false;
    if (c == '%') {
        OL_ASSERT(e->i + 2 < e->n);
        int hi = hex_val((unsigned char)e->p[e->i + 1]);
        int lo = hex_val((unsigned char)e->p[e->i + 2]);
        OL_ASSERT(hi >= 0 && lo >= 0);
        c = (unsigned char)(hi << 4 | lo);
        e->i += 3;
        escaped = true;
    } else {
        e->i++;
        if (c == '+' && e->plus_is_space)
            c = ' ';
    }
    if (is_unreserved(c) || (c == '/' && e->keep_slash && !escaped))
        return c;
    e->pend[0] = hex_upper[c >> 4];
    e->pend[1] = hex_upper[c & 15];
    e->ipend = 0;
    e->npend = 2;
    return '%';
}

/* Compares two raw query strings by their encoded forms, bytewise, a prefix
 * first. */
static int enc_cmp(struct ol_slice a, struct ol_slice b)
{
    struct enc_iter ea = enc_start(a, ENC_QUERY);
    struct enc_iter eb = enc_start(b, ENC_QUERY);
    /* Each step consumes input from both or ends: 3 * (a.n + b.n) + 2 bounds it. */
    for (size_t guard = 0; guard <= 3 * (a.n + b.n) + 2; guard++) {
        int ca = enc_next(&ea);
        int cb = enc_next(&eb);
        if (ca != cb)
            return ca < cb ? -1 : 1;
        if (ca < 0)
            return 0;
    }
    OL_ASSERT(!"enc_cmp did not terminate");
    return 0;
}

/* Whether a raw query name decodes (as the router decodes it: '+' is a
 * space) to exactly lit. */
static bool decoded_eq(struct ol_slice raw, const char *lit)
{
    size_t j = 0, n = strlen(lit);
    for (size_t i = 0; i < raw.n; i++, j++) {
        unsigned char c = (unsigned char)raw.p[i];
        if (c == '%' && i + 2 < raw.n && hex_val((unsigned char)raw.p[i + 1]) >= 0 &&
            hex_val((unsigned char)raw.p[i + 2]) >= 0) {
            c = (unsigned char)(hex_val((unsigned char)raw.p[i + 1]) << 4 |
                                hex_val((unsigned char)raw.p[i + 2]));
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (j >= n || (unsigned char)lit[j] != c)
            return false;
    }
    return j == n;
}

/* Decodes a short raw value into buf (NUL-terminated); -1 if too long or bad. */
static ssize_t decode_small(struct ol_slice raw, char *buf, size_t cap)
{
    if (raw.n >= cap)
        return -1;
    ssize_t n = ol_uri_decode(raw.p, raw.n, buf);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* ---- a byte sink: a SHA-256 context or a caller's buffer ---- */

struct sink {
    EVP_MD_CTX *md; /* when set, bytes are hashed */
    char *buf;      /* otherwise copied here */
    size_t cap;
    size_t len;
    int err;
    char stage[512];
    size_t nstage;
};

static void sink_flush(struct sink *s)
{
    if (s->err == 0 && s->nstage > 0) {
        if (s->md != NULL) {
            if (EVP_DigestUpdate(s->md, s->stage, s->nstage) != 1)
                s->err = -ENOMEM;
        } else if (s->nstage > s->cap - s->len) {
            s->err = -ENOSPC;
        } else {
            memcpy(s->buf + s->len, s->stage, s->nstage);
            s->len += s->nstage;
        }
    }
    s->nstage = 0;
}

static void sink_byte(struct sink *s, char c)
{
    if (s->nstage == sizeof(s->stage))
        sink_flush(s);
    s->stage[s->nstage++] = c;
}

static void sink_put(struct sink *s, const char *p, size_t n)
{
    while (n > 0) {
        if (s->nstage == sizeof(s->stage))
            sink_flush(s);
        size_t take = sizeof(s->stage) - s->nstage;
        if (take > n)
            take = n;
        memcpy(s->stage + s->nstage, p, take);
        s->nstage += take;
        p += take;
        n -= take;
    }
}

static void sink_encoded(struct sink *s, struct ol_slice raw, int kind)
{
    struct enc_iter e = enc_start(raw, kind);
    for (size_t guard = 0; guard <= 3 * raw.n; guard++) {
        int c = enc_next(&e);
        if (c < 0)
            return;
        sink_byte(s, (char)c);
    }
    OL_ASSERT(!"sink_encoded did not terminate");
}

/* Header value per SigV4: trimmed, each run of spaces and tabs made one space. */
static void sink_trimall(struct sink *s, struct ol_slice v)
{
    bool started = false, gap = false;
    for (size_t i = 0; i < v.n; i++) {
        if (is_space(v.p[i])) {
            gap = started;
            continue;
        }
        if (gap)
            sink_byte(s, ' ');
        sink_byte(s, v.p[i]);
        started = true;
        gap = false;
    }
}

/* ---- signed headers ---- */

static bool is_header_name_char(unsigned char c)
{
    /* RFC 9110 tchar, lowercase only, without '%' which separates the
     * presigned form ("host%3Bx-amz-date"). */
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
           c == '!' || c == '#' || c == '$' || c == '&' || c == '\'' || c == '*' || c == '+' ||
           c == '^' || c == '`' || c == '|' || c == '~';
}

/* Next name of a signed-headers list.  Returns 1 and *name, 0 at the end, or
 * -1 on bad syntax (empty name, bad character). */
static int sh_next(struct ol_slice list, size_t *pos, struct ol_slice *name)
{
    size_t i = *pos;
    if (i >= list.n)
        return 0;
    size_t start = i;
    while (i < list.n && is_header_name_char((unsigned char)list.p[i]))
        i++;
    if (i == start)
        return -1;
    name->p = list.p + start;
    name->n = i - start;
    if (i == list.n) {
        *pos = i;
        return 1;
    }
    if (list.p[i] == ';') {
        i += 1;
    } else if (list.p[i] == '%' && i + 2 < list.n && list.p[i + 1] == '3' &&
               (list.p[i + 2] == 'B' || list.p[i + 2] == 'b')) {
        i += 3;
    } else {
        return -1;
    }
    if (i == list.n)
        return -1; /* a trailing separator */
    *pos = i;
    return 1;
}

static int slice_cmp(struct ol_slice a, struct ol_slice b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int r = memcmp(a.p, b.p, n);
    if (r != 0)
        return r;
    return a.n < b.n ? -1 : a.n > b.n;
}

static unsigned char ascii_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Whether header names a and b are equal but for case.  The folding is
 * ASCII by hand, as in ol_http_find_header, so that the signer and the S3
 * layer always find the same headers (strncasecmp depends on the locale). */
static bool hname_eq(struct ol_slice a, struct ol_slice b)
{
    if (a.n != b.n)
        return false;
    for (size_t i = 0; i < a.n; i++)
        if (ascii_lower((unsigned char)a.p[i]) != ascii_lower((unsigned char)b.p[i]))
            return false;
    return true;
}

static bool hname_has_prefix(struct ol_slice h, const char *prefix)
{
    size_t n = strlen(prefix);
    return h.n >= n && hname_eq((struct ol_slice){h.p, n}, (struct ol_slice){prefix, n});
}

/* Checks syntax and strict ascending order; reports whether host is there. */
static int check_signed_headers(struct ol_slice list, bool *has_host)
{
    struct ol_slice prev = {NULL, 0}, name;
    size_t pos = 0;
    *has_host = false;
    if (list.n == 0)
        return OL_SIGV4_EMALFORMED;
    /* Each name consumes at least one byte. */
    for (size_t guard = 0; guard <= list.n; guard++) {
        int r = sh_next(list, &pos, &name);
        if (r == 0)
            return OL_SIGV4_OK;
        if (r < 0)
            return OL_SIGV4_EMALFORMED;
        if (prev.p != NULL && slice_cmp(prev, name) >= 0)
            return OL_SIGV4_EMALFORMED;
        if (slice_eq(name, "host"))
            *has_host = true;
        prev = name;
    }
    return OL_SIGV4_EMALFORMED;
}

/* ---- canonical request ---- */

struct qparam {
    struct ol_slice name;
    struct ol_slice value;
};

static int qparam_cmp(const void *x, const void *y)
{
    const struct qparam *a = x, *b = y;
    int r = enc_cmp(a->name, b->name);
    return r != 0 ? r : enc_cmp(a->value, b->value);
}

/* Splits a raw query at '&' (empty pieces are skipped) and each piece at its
 * first '='; a piece without '=' has an empty value. */
static int split_query(struct ol_slice q, struct qparam *out, size_t max, size_t *count)
{
    size_t n = 0, i = 0;
    while (i < q.n) {
        const char *amp = memchr(q.p + i, '&', q.n - i);
        size_t end = amp ? (size_t)(amp - q.p) : q.n;
        if (end > i) {
            struct ol_slice piece = {q.p + i, end - i};
            const char *eq = memchr(piece.p, '=', piece.n);
            if (n == max)
                return OL_SIGV4_EMALFORMED;
            if (eq != NULL) {
                out[n].name = (struct ol_slice){piece.p, (size_t)(eq - piece.p)};
                out[n].value = (struct ol_slice){eq + 1, piece.n - (size_t)(eq - piece.p) - 1};
            } else {
                out[n].name = piece;
                out[n].value = (struct ol_slice){piece.p + piece.n, 0};
            }
            if (!escapes_ok(out[n].name) || !escapes_ok(out[n].value))
                return OL_SIGV4_EMALFORMED;
            n++;
        }
        i = end + 1;
    }
    *count = n;
    return OL_SIGV4_OK;
}

static bool scope_parts_ok(const struct ol_sigv4_auth *auth)
{
    return auth->date.n == 8 && memcmp(auth->date.p, auth->amz_date, 8) == 0 &&
           strlen(auth->amz_date) == 16 && auth->region.n > 0 &&
           auth->region.n <= MAX_REGION_BYTES && auth->service.n > 0 &&
           auth->service.n <= MAX_SERVICE_BYTES;
}

static int canonical_request(struct sink *s, const struct ol_sigv4_request *req,
                             const struct ol_sigv4_auth *auth)
{
    struct qparam params[MAX_QUERY_PARAMS];
    size_t nparams = 0;
    bool has_host;
    int rc;

    if (req->payload_hash.n == 0 || !escapes_ok(req->path))
        return OL_SIGV4_EMALFORMED;
    rc = check_signed_headers(auth->signed_headers, &has_host);
    if (rc != OL_SIGV4_OK)
        return rc;
    rc = split_query(req->query, params, MAX_QUERY_PARAMS, &nparams);
    if (rc != OL_SIGV4_OK)
        return rc;
    qsort(params, nparams, sizeof(params[0]), qparam_cmp);

    sink_put(s, req->method.p, req->method.n);
    sink_byte(s, '\n');
    if (req->path.n == 0)
        sink_byte(s, '/');
    else
        sink_encoded(s, req->path, ENC_PATH);
    sink_byte(s, '\n');

    bool first = true;
    for (size_t i = 0; i < nparams; i++) {
        if (auth->presigned && decoded_eq(params[i].name, "X-Amz-Signature"))
            continue;
        if (!first)
            sink_byte(s, '&');
        sink_encoded(s, params[i].name, ENC_QUERY);
        sink_byte(s, '=');
        sink_encoded(s, params[i].value, ENC_QUERY);
        first = false;
    }
    sink_byte(s, '\n');

    /* Canonical headers: one line per signed name, the values of every
     * header of that name joined with ',' in the order received. */
    struct ol_slice name;
    size_t pos = 0;
    while (sh_next(auth->signed_headers, &pos, &name) == 1) {
        sink_put(s, name.p, name.n);
        sink_byte(s, ':');
        bool any = false;
        for (size_t h = 0; h < req->nheaders; h++) {
            const struct ol_http_header *hd = &req->headers[h];
            if (!hname_eq(hd->name, name))
                continue;
            if (any)
                sink_byte(s, ',');
            sink_trimall(s, hd->value);
            any = true;
        }
        sink_byte(s, '\n');
    }
    sink_byte(s, '\n');

    pos = 0;
    first = true;
    while (sh_next(auth->signed_headers, &pos, &name) == 1) {
        if (!first)
            sink_byte(s, ';');
        sink_put(s, name.p, name.n);
        first = false;
    }
    sink_byte(s, '\n');
    sink_put(s, req->payload_hash.p, req->payload_hash.n);
    sink_flush(s);
    return s->err;
}

/* ---- headers that must be signed ---- */

/* Whether the (checked) signed-headers list names request header h. */
static bool sh_contains(struct ol_slice list, struct ol_slice h)
{
    struct ol_slice name;
    size_t pos = 0;
    /* Each name consumes at least one byte of the list. */
    for (size_t guard = 0; guard <= list.n; guard++) {
        if (sh_next(list, &pos, &name) != 1)
            return false;
        if (hname_eq(h, name))
            return true;
    }
    return false;
}

/* Whether S3 requires request header h to be signed when present. */
static bool must_be_signed(struct ol_slice h)
{
    static const struct ol_slice host = {"host", 4};
    static const struct ol_slice sha = {"x-amz-content-sha256", 20};
    return hname_eq(h, host) || (hname_has_prefix(h, "x-amz-") && !hname_eq(h, sha));
}

/* A ", "-separated list of header names written into a caller's buffer;
 * when the next name does not fit, "..." ends it.  len + 4 <= cap holds
 * after every append, which keeps room for "..." and the NUL. */
struct name_list {
    char *p;
    size_t cap;
    size_t len;
    bool full;
};

static void name_list_add(struct name_list *l, struct ol_slice name)
{
    size_t sep = l->len > 0 ? 2 : 0;
    if (l->full)
        return;
    if (l->cap < 4 || l->len + sep + name.n + 4 > l->cap) {
        if (l->cap >= 4) {
            memcpy(l->p + l->len, "...", 3);
            l->len += 3;
        }
        l->full = true;
        l->p[l->len] = '\0';
        return;
    }
    if (sep) {
        memcpy(l->p + l->len, ", ", 2);
        l->len += 2;
    }
    for (size_t i = 0; i < name.n; i++)
        l->p[l->len++] = (char)ascii_lower((unsigned char)name.p[i]);
    l->p[l->len] = '\0';
}

int ol_sigv4_check_headers(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                           char *names, size_t cap)
{
    struct name_list out = {.p = names, .cap = cap};
    struct ol_slice list = auth->signed_headers, name;
    bool has_host;

    OL_ASSERT(cap >= 1);
    names[0] = '\0';
    if (check_signed_headers(list, &has_host) != OL_SIGV4_OK)
        return OL_SIGV4_EMALFORMED;

    /* Present but unsigned: each name once, in the order received.  The
     * parser bounds the header count, so the quadratic scans stay small. */
    bool unsigned_any = false;
    for (size_t i = 0; i < req->nheaders; i++) {
        struct ol_slice h = req->headers[i].name;
        if (!must_be_signed(h) || sh_contains(list, h))
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = hname_eq(req->headers[j].name, h);
        if (!seen)
            name_list_add(&out, h);
        unsigned_any = true;
    }
    if (unsigned_any)
        return OL_SIGV4_EUNSIGNED;

    /* Signed: present exactly once. */
    size_t pos = 0;
    for (size_t guard = 0; guard <= list.n; guard++) {
        if (sh_next(list, &pos, &name) != 1)
            break;
        size_t count = 0;
        for (size_t i = 0; i < req->nheaders; i++)
            if (hname_eq(req->headers[i].name, name))
                count++;
        if (count != 1) {
            name_list_add(&out, name);
            return count == 0 ? OL_SIGV4_EABSENT : OL_SIGV4_EREPEATED;
        }
    }
    return OL_SIGV4_OK;
}

int ol_sigv4_canonical_request(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                               char *buf, size_t cap, size_t *len)
{
    struct sink s = {.buf = buf, .cap = cap};
    int rc = canonical_request(&s, req, auth);
    *len = s.len;
    return rc;
}

/* Builds "date/region/service/aws4_request" into out; -1 if it does not fit. */
static int build_scope(const struct ol_sigv4_auth *auth, char *out, size_t cap)
{
    size_t tlen = strlen(SIGV4_TERMINATOR);
    size_t need = auth->date.n + 1 + auth->region.n + 1 + auth->service.n + 1 + tlen;
    if (need >= cap)
        return -1;
    char *p = out;
    memcpy(p, auth->date.p, auth->date.n);
    p += auth->date.n;
    *p++ = '/';
    memcpy(p, auth->region.p, auth->region.n);
    p += auth->region.n;
    *p++ = '/';
    memcpy(p, auth->service.p, auth->service.n);
    p += auth->service.n;
    *p++ = '/';
    memcpy(p, SIGV4_TERMINATOR, tlen);
    p[tlen] = '\0';
    return (int)need;
}

static int compute_signature(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                             const char *secret, size_t secret_len, char signature[65])
{
    struct sink s = {0};
    uint8_t md[32], key[32], mac[32];
    char sts[256];
    char scope[160];
    char crhex[65];
    unsigned int mdlen = 0;
    int n;
    int rc;

    signature[0] = '\0';
    if (!scope_parts_ok(auth) || build_scope(auth, scope, sizeof(scope)) < 0)
        return OL_SIGV4_EMALFORMED;
    s.md = ol_sha256_ctx(OL_SHA_CTX_LONG);
    if (s.md == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    rc = canonical_request(&s, req, auth);
    if (rc != 0)
        goto out;
    if (EVP_DigestFinal_ex(s.md, md, &mdlen) != 1 || mdlen != 32) {
        rc = -ENOMEM;
        goto out;
    }
    to_hex(md, sizeof(md), crhex);
    n = snprintf(sts, sizeof(sts), "%s\n%s\n%s\n%s", SIGV4_ALGORITHM, auth->amz_date, scope, crhex);
    OL_ASSERT(n > 0 && (size_t)n < sizeof(sts));
    rc = derive_key(secret, secret_len, auth->date, auth->region, auth->service, key);
    if (rc != 0)
        goto out;
    rc = hmac_sha256(key, sizeof(key), sts, (size_t)n, mac);
    if (rc != 0)
        goto out;
    to_hex(mac, sizeof(mac), signature);
out:
    OPENSSL_cleanse(key, sizeof(key));
    return rc;
}

int ol_sigv4_sign(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                  const char *secret, size_t secret_len, char signature[65])
{
    return compute_signature(req, auth, secret, secret_len, signature);
}

int ol_sigv4_verify(const struct ol_sigv4_request *req, const struct ol_sigv4_auth *auth,
                    const char *secret, size_t secret_len, char seed_signature[65])
{
    char sig[65];
    bool has_host = false;
    int rc;

    if (check_signed_headers(auth->signed_headers, &has_host) != OL_SIGV4_OK || !has_host)
        return OL_SIGV4_EMALFORMED;
    if (!is_sig_hex(auth->signature.p, auth->signature.n))
        return OL_SIGV4_EMALFORMED;
    rc = compute_signature(req, auth, secret, secret_len, sig);
    if (rc != 0)
        return rc;
    OL_ASSERT(strlen(sig) == SIG_HEX_LEN);
    if (CRYPTO_memcmp(sig, auth->signature.p, SIG_HEX_LEN) != 0)
        return OL_SIGV4_EMISMATCH;
    if (seed_signature != NULL)
        memcpy(seed_signature, sig, sizeof(sig));
    return OL_SIGV4_OK;
}

/* ---- dates ---- */

static int digits(const char *p, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static int month_from_name(const char *p)
{
    static const char names[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    for (int m = 0; m < 12; m++)
        if (memcmp(p, names + 3 * m, 3) == 0)
            return m + 1;
    return -1;
}

static bool is_wkday(const char *p, size_t n)
{
    static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const long_days[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                            "Friday", "Saturday", "Sunday"};
    for (int d = 0; d < 7; d++) {
        if ((n == 3 && memcmp(p, days[d], 3) == 0) ||
            (n == strlen(long_days[d]) && memcmp(p, long_days[d], n) == 0))
            return true;
    }
    return false;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "HH:MM:SS" */
static bool parse_hms(const char *p, int *h, int *mi, int *s)
{
    if (p[2] != ':' || p[5] != ':')
        return false;
    *h = digits(p, 2);
    *mi = digits(p + 3, 2);
    *s = digits(p + 6, 2);
    return *h >= 0 && *mi >= 0 && *s >= 0;
}

static void put_digits(char *p, int v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

int ol_sigv4_parse_date(struct ol_slice s, char amz_date[17], int64_t *unix_sec)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y = -1, mo = -1, d = -1, h = -1, mi = -1, sec = -1;
    const char *p = s.p;
    const char *comma = s.n > 0 ? memchr(p, ',', s.n < 10 ? s.n : 10) : NULL;

    if (s.n == 16) {
        /* yyyymmddTHHMMSSZ */
        if (p[8] != 'T' || p[15] != 'Z')
            return OL_SIGV4_EMALFORMED;
        y = digits(p, 4);
        mo = digits(p + 4, 2);
        d = digits(p + 6, 2);
        h = digits(p + 9, 2);
        mi = digits(p + 11, 2);
        sec = digits(p + 13, 2);
    } else if (s.n == 29 && comma == p + 3) {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (!is_wkday(p, 3) || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' || p[16] != ' ' ||
            memcmp(p + 25, " GMT", 4) != 0 || !parse_hms(p + 17, &h, &mi, &sec))
            return OL_SIGV4_EMALFORMED;
        d = digits(p + 5, 2);
        mo = month_from_name(p + 8);
        y = digits(p + 12, 4);
    } else if (comma != NULL && comma > p && s.n == (size_t)(comma - p) + 24) {
        /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
        const char *q = comma + 1;
        if (!is_wkday(p, (size_t)(comma - p)) || q[0] != ' ' || q[3] != '-' || q[7] != '-' ||
            q[10] != ' ' || memcmp(q + 19, " GMT", 4) != 0 || !parse_hms(q + 11, &h, &mi, &sec))
            return OL_SIGV4_EMALFORMED;
        d = digits(q + 1, 2);
        mo = month_from_name(q + 4);
        y = digits(q + 8, 2);
        /* Two-digit years: RFC 7231 asks for the most recent past year with
         * those digits; without a clock, split the century at 70. */
        if (y >= 0)
            y += y < 70 ? 2000 : 1900;
    } else if (s.n == 24) {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (!is_wkday(p, 3) || p[3] != ' ' || p[7] != ' ' || p[10] != ' ' || p[19] != ' ' ||
            !parse_hms(p + 11, &h, &mi, &sec))
            return OL_SIGV4_EMALFORMED;
        mo = month_from_name(p + 4);
        d = p[8] == ' ' ? digits(p + 9, 1) : digits(p + 8, 2);
        y = digits(p + 20, 4);
    } else {
        return OL_SIGV4_EMALFORMED;
    }
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
        sec > 59)
        return OL_SIGV4_EMALFORMED;
    if (d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
        return OL_SIGV4_EMALFORMED;

    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return OL_SIGV4_EMALFORMED;
    put_digits(amz_date, y, 4);
    put_digits(amz_date + 4, mo, 2);
    put_digits(amz_date + 6, d, 2);
    amz_date[8] = 'T';
    put_digits(amz_date + 9, h, 2);
    put_digits(amz_date + 11, mi, 2);
    put_digits(amz_date + 13, sec, 2);
    amz_date[15] = 'Z';
    amz_date[16] = '\0';
    *unix_sec = (int64_t)t;
    return OL_SIGV4_OK;
}

/* ---- Authorization header and presigned query ---- */

/* Finds the next credential separator: '/' or, in the presigned form, its
 * escape "%2F".  Returns the index, or n; *sep_len is set. */
static size_t find_cred_sep(struct ol_slice v, size_t from, bool allow_escaped, size_t *sep_len)
{
    for (size_t i = from; i < v.n; i++) {
        if (v.p[i] == '/') {
            *sep_len = 1;
            return i;
        }
        if (allow_escaped && v.p[i] == '%' && i + 2 < v.n && v.p[i + 1] == '2' &&
            (v.p[i + 2] == 'F' || v.p[i + 2] == 'f')) {
            *sep_len = 3;
            return i;
        }
    }
    *sep_len = 0;
    return v.n;
}

/* Records which part of the scope is wrong, for the error message. */
static int scope_bad(struct ol_sigv4_auth *out, enum ol_sigv4_bad bad, struct ol_slice value)
{
    out->bad = bad;
    out->bad_value = value;
    return OL_SIGV4_EMALFORMED;
}

/* "AK/yyyymmdd/region/s3/aws4_request": every part but the region (which
 * the caller compares with its own) is checked here. */
static int parse_credential(struct ol_slice v, bool allow_escaped, struct ol_sigv4_auth *out)
{
    struct ol_slice part[5];
    size_t pos = 0;
    for (int k = 0; k < 5; k++) {
        size_t sep_len;
        size_t end = find_cred_sep(v, pos, allow_escaped, &sep_len);
        if ((k < 4) != (end < v.n))
            return scope_bad(out, OL_SIGV4_BAD_CREDENTIAL, v);
        part[k] = (struct ol_slice){v.p + pos, end - pos};
        if (part[k].n == 0 || memchr(part[k].p, '%', part[k].n) != NULL)
            return scope_bad(out, OL_SIGV4_BAD_CREDENTIAL, v);
        pos = end + sep_len;
    }
    if (part[0].n > MAX_ACCESS_KEY_BYTES || part[2].n > MAX_REGION_BYTES)
        return scope_bad(out, OL_SIGV4_BAD_CREDENTIAL, v);
    if (part[1].n != 8 || digits(part[1].p, 8) < 0)
        return scope_bad(out, OL_SIGV4_BAD_SCOPE_DATE, part[1]);
    /* A signature scoped to another service (".../ec2/aws4_request") was
     * made for that service, not for this one. */
    if (!slice_eq(part[3], SIGV4_SERVICE))
        return scope_bad(out, OL_SIGV4_BAD_SERVICE, part[3]);
    if (!slice_eq(part[4], SIGV4_TERMINATOR))
        return scope_bad(out, OL_SIGV4_BAD_TERMINATOR, part[4]);
    out->access_key = part[0];
    out->date = part[1];
    out->region = part[2];
    out->service = part[3];
    return OL_SIGV4_OK;
}

int ol_sigv4_parse_header(struct ol_slice authorization, struct ol_slice amz_date,
                          struct ol_sigv4_auth *out)
{
    struct ol_slice a = slice_trim(authorization);
    bool have_cred = false, have_sh = false, have_sig = false, has_host;
    size_t i = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    while (i < a.n && !is_space(a.p[i]))
        i++;
    if (i == 0)
        return OL_SIGV4_EMALFORMED;
    if (!slice_eq((struct ol_slice){a.p, i}, SIGV4_ALGORITHM))
        return OL_SIGV4_EUNSUPPORTED;

    struct ol_slice rest = {a.p + i, a.n - i};
    size_t pos = 0;
    /* Each component consumes at least its comma; the bound is the length. */
    for (size_t guard = 0; guard <= rest.n && pos <= rest.n; guard++) {
        const char *comma = memchr(rest.p + pos, ',', rest.n - pos);
        size_t end = comma ? (size_t)(comma - rest.p) : rest.n;
        struct ol_slice comp = slice_trim((struct ol_slice){rest.p + pos, end - pos});
        const char *eq = memchr(comp.p, '=', comp.n);
        if (eq == NULL)
            return OL_SIGV4_EMALFORMED;
        struct ol_slice key = slice_trim((struct ol_slice){comp.p, (size_t)(eq - comp.p)});
        struct ol_slice val =
            slice_trim((struct ol_slice){eq + 1, comp.n - (size_t)(eq - comp.p) - 1});
        if (slice_eq(key, "Credential") && !have_cred) {
            rc = parse_credential(val, false, out);
            if (rc != OL_SIGV4_OK)
                return rc;
            have_cred = true;
        } else if (slice_eq(key, "SignedHeaders") && !have_sh) {
            if (check_signed_headers(val, &has_host) != OL_SIGV4_OK)
                return OL_SIGV4_EMALFORMED;
            out->signed_headers = val;
            have_sh = true;
        } else if (slice_eq(key, "Signature") && !have_sig) {
            if (!is_sig_hex(val.p, val.n))
                return OL_SIGV4_EMALFORMED;
            out->signature = val;
            have_sig = true;
        } else {
            return OL_SIGV4_EMALFORMED;
        }
        if (comma == NULL)
            break;
        pos = end + 1;
    }
    if (!have_cred || !have_sh || !have_sig)
        return OL_SIGV4_EMALFORMED;
    rc = ol_sigv4_parse_date(slice_trim(amz_date), out->amz_date, &out->request_time);
    if (rc != OL_SIGV4_OK)
        return rc;
    if (memcmp(out->date.p, out->amz_date, 8) != 0)
        return scope_bad(out, OL_SIGV4_BAD_DATE_MISMATCH, out->date);
    return OL_SIGV4_OK;
}

int ol_sigv4_parse_query(struct ol_slice query, struct ol_sigv4_auth *out)
{
    enum { P_ALG, P_CRED, P_DATE, P_EXPIRES, P_SH, P_SIG, P_COUNT };
    static const char *const names[P_COUNT] = {
        "X-Amz-Algorithm", "X-Amz-Credential",    "X-Amz-Date",
        "X-Amz-Expires",   "X-Amz-SignedHeaders", "X-Amz-Signature",
    };
    struct ol_slice val[P_COUNT];
    bool seen[P_COUNT] = {false};
    char small[64];
    bool has_host;
    size_t i = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    /* Names are compared decoded, as the router and the canonical query see
     * them: "X-Amz-%53ignature" is X-Amz-Signature, and giving it twice
     * (once encoded) must not leave one copy out of the signature while the
     * other is taken.  Each piece consumes at least its '&'. */
    while (i < query.n) {
        const char *amp = memchr(query.p + i, '&', query.n - i);
        size_t end = amp ? (size_t)(amp - query.p) : query.n;
        struct ol_slice piece = {query.p + i, end - i};
        const char *eq = memchr(piece.p, '=', piece.n);
        struct ol_slice name = {piece.p, eq ? (size_t)(eq - piece.p) : piece.n};
        char dname[32];
        ssize_t dn =
            name.n < sizeof(dname) ? ol_pct_decode(name.p, name.n, dname, sizeof(dname), true) : -1;
        for (int k = 0; k < P_COUNT && dn > 0; k++) {
            if ((size_t)dn != strlen(names[k]) || memcmp(dname, names[k], (size_t)dn) != 0)
                continue;
            if (seen[k])
                return OL_SIGV4_EMALFORMED;
            seen[k] = true;
            val[k] = eq ? (struct ol_slice){eq + 1, piece.n - name.n - 1}
                        : (struct ol_slice){piece.p + piece.n, 0};
        }
        i = end + 1;
    }
    if (!seen[P_SIG])
        return 1;
    for (int k = 0; k < P_COUNT; k++)
        if (!seen[k])
            return OL_SIGV4_EMALFORMED;

    if (decode_small(val[P_ALG], small, sizeof(small)) < 0)
        return OL_SIGV4_EMALFORMED;
    if (strcmp(small, SIGV4_ALGORITHM) != 0)
        return OL_SIGV4_EUNSUPPORTED;
    rc = parse_credential(val[P_CRED], true, out);
    if (rc != OL_SIGV4_OK)
        return rc;
    ssize_t n = decode_small(val[P_DATE], small, sizeof(small));
    /* X-Amz-Date must be the basic ISO 8601 form, not an HTTP-date. */
    if (n != 16)
        return OL_SIGV4_EMALFORMED;
    rc = ol_sigv4_parse_date((struct ol_slice){small, 16}, out->amz_date, &out->request_time);
    if (rc != OL_SIGV4_OK)
        return rc;
    if (memcmp(out->date.p, out->amz_date, 8) != 0)
        return scope_bad(out, OL_SIGV4_BAD_DATE_MISMATCH, out->date);
    n = decode_small(val[P_EXPIRES], small, sizeof(small));
    if (n < 1)
        return OL_SIGV4_EMALFORMED;
    /* S3 names the two ways X-Amz-Expires is out of range (400); 0 parses,
     * and has expired by the time it is checked (auth.c: 403). */
    bool negative = small[0] == '-';
    size_t nd = (size_t)n - (negative ? 1 : 0);
    if (nd == 0 || strspn(small + (negative ? 1 : 0), "0123456789") != nd)
        return OL_SIGV4_EMALFORMED;
    if (negative)
        return scope_bad(out, OL_SIGV4_BAD_EXPIRES_NEGATIVE, val[P_EXPIRES]);
    int expires = nd > 7 ? MAX_EXPIRES_SEC + 1 : digits(small, nd);
    if (expires > MAX_EXPIRES_SEC)
        return scope_bad(out, OL_SIGV4_BAD_EXPIRES_RANGE, val[P_EXPIRES]);
    out->expires_sec = expires;
    if (check_signed_headers(val[P_SH], &has_host) != OL_SIGV4_OK)
        return OL_SIGV4_EMALFORMED;
    out->signed_headers = val[P_SH];
    if (!is_sig_hex(val[P_SIG].p, val[P_SIG].n))
        return OL_SIGV4_EMALFORMED;
    out->signature = val[P_SIG];
    out->presigned = true;
    return OL_SIGV4_OK;
}

/* ---- aws-chunked ---- */

enum {
    CH_LINE = 0, /* reading "<hex>[;chunk-signature=<sig>]" */
    CH_DATA,     /* copying chunk data */
    CH_DATA_CR,  /* the CRLF that ends chunk data */
    CH_DATA_LF,
    CH_TRAILER, /* lines after the last chunk, up to an empty one */
    CH_DONE,
    /* A negative state is a sticky error code. */
};

int ol_aws_chunked_init(struct ol_aws_chunked *c, bool signed_chunks, bool trailer,
                        const struct ol_sigv4_auth *auth, const char *secret, size_t secret_len,
                        const char *seed_signature)
{
    int rc;

    memset(c, 0, sizeof(*c));
    c->signed_chunks = signed_chunks;
    c->trailer = trailer;
    c->state = CH_LINE;
    if (!signed_chunks)
        return 0;
    if (auth == NULL || seed_signature == NULL ||
        !is_sig_hex(seed_signature, strnlen(seed_signature, 65)) ||
        strnlen(auth->amz_date, sizeof(auth->amz_date)) != 16 ||
        build_scope(auth, c->scope, sizeof(c->scope)) < 0)
        return -EINVAL;
    memcpy(c->amz_date, auth->amz_date, sizeof(c->amz_date));
    memcpy(c->prev_sig, seed_signature, 65);
    rc = derive_key(secret, secret_len, auth->date, auth->region, auth->service, c->key);
    if (rc != 0)
        goto out;
    c->sha = EVP_MD_CTX_new();
    if (c->sha == NULL)
        rc = -ENOMEM;
out:
    if (rc != 0)
        OPENSSL_cleanse(c->key, sizeof(c->key));
    return rc;
}

void ol_aws_chunked_free(struct ol_aws_chunked *c)
{
    EVP_MD_CTX_free(c->sha);
    c->sha = NULL;
    OPENSSL_cleanse(c->key, sizeof(c->key));
}

bool ol_aws_chunked_done(const struct ol_aws_chunked *c)
{
    return c->state == CH_DONE;
}

/* HMACs "<prefix>\n<date>\n<scope>\n<prev>\n<tail>" with the signing key and
 * compares it with c->chunk_sig in constant time; on a match it becomes the
 * previous signature of the chain. */
static int chain_verify(struct ol_aws_chunked *c, const char *prefix, const char *tail)
{
    char sts[512];
    uint8_t mac[32];
    char hex[65];
    int n = snprintf(sts, sizeof(sts), "%s\n%s\n%s\n%s\n%s", prefix, c->amz_date, c->scope,
                     c->prev_sig, tail);
    OL_ASSERT(n > 0 && (size_t)n < sizeof(sts));
    if (hmac_sha256(c->key, sizeof(c->key), sts, (size_t)n, mac) != 0)
        return -ENOMEM;
    to_hex(mac, sizeof(mac), hex);
    if (CRYPTO_memcmp(hex, c->chunk_sig, SIG_HEX_LEN) != 0)
        return OL_SIGV4_EMISMATCH;
    memcpy(c->prev_sig, c->chunk_sig, sizeof(c->prev_sig));
    return 0;
}

static int chunk_verify(struct ol_aws_chunked *c)
{
    uint8_t md[32];
    unsigned int mdlen = 0;
    char tail[64 + 1 + 64 + 1];

    if (EVP_DigestFinal_ex(c->sha, md, &mdlen) != 1 || mdlen != 32)
        return -ENOMEM;
    memcpy(tail, EMPTY_SHA256_HEX, 64);
    tail[64] = '\n';
    to_hex(md, sizeof(md), tail + 65);
    return chain_verify(c, "AWS4-HMAC-SHA256-PAYLOAD", tail);
}

/* The trailer signature covers the trailer lines sorted by name, each as
 * "name:value\n", chained after the final chunk's signature. */
static int trailer_verify(struct ol_aws_chunked *c)
{
    const char *ent[MAX_TRAILERS];
    size_t nent = 0, pos = 0;
    uint8_t md[32];
    unsigned int mdlen = 0;
    char hex[65];

    while (pos < c->trailers_len) {
        if (nent == MAX_TRAILERS)
            return OL_SIGV4_ECHUNK;
        ent[nent++] = c->trailers + pos;
        pos += strlen(c->trailers + pos) + 1;
    }
    /* Insertion sort on at most MAX_TRAILERS names. */
    for (size_t i = 1; i < nent; i++) {
        for (size_t j = i; j > 0; j--) {
            const char *a = ent[j - 1], *b = ent[j];
            size_t la = strcspn(a, ":"), lb = strcspn(b, ":");
            struct ol_slice sa = {a, la}, sb = {b, lb};
            if (slice_cmp(sa, sb) <= 0)
                break;
            ent[j - 1] = b;
            ent[j] = a;
        }
    }
    if (EVP_DigestInit_ex(c->sha, ol_sha256_md(), NULL) != 1)
        return -ENOMEM;
    for (size_t i = 0; i < nent; i++) {
        if (EVP_DigestUpdate(c->sha, ent[i], strlen(ent[i])) != 1 ||
            EVP_DigestUpdate(c->sha, "\n", 1) != 1)
            return -ENOMEM;
    }
    if (EVP_DigestFinal_ex(c->sha, md, &mdlen) != 1 || mdlen != 32)
        return -ENOMEM;
    to_hex(md, sizeof(md), hex);
    return chain_verify(c, "AWS4-HMAC-SHA256-TRAILER", hex);
}

/* Accumulates bytes into c->line up to LF.  Returns 1 when a whole line
 * (without its CRLF) is there, 0 when the input ran out first, or
 * OL_SIGV4_ECHUNK for a bare LF, a CR inside a line, or a line too long. */
static int take_line(struct ol_aws_chunked *c, const char *buf, size_t n, size_t *pos)
{
    while (*pos < n) {
        char ch = buf[(*pos)++];
        bool after_cr = c->line_len > 0 && c->line[c->line_len - 1] == '\r';
        if (ch == '\n') {
            if (!after_cr)
                return OL_SIGV4_ECHUNK;
            c->line_len--;
            return 1;
        }
        if (after_cr || c->line_len >= sizeof(c->line))
            return OL_SIGV4_ECHUNK;
        c->line[c->line_len++] = ch;
    }
    return 0;
}

static int on_size_line(struct ol_aws_chunked *c)
{
    static const char ext[] = ";chunk-signature=";
    const size_t ext_len = sizeof(ext) - 1;
    size_t n = c->line_len, i = 0;
    uint64_t size = 0;

    while (i < n && hex_val((unsigned char)c->line[i]) >= 0) {
        if (i == 16)
            return OL_SIGV4_ECHUNK; /* would overflow 64 bits */
        size = size << 4 | (uint64_t)hex_val((unsigned char)c->line[i]);
        i++;
    }
    if (i == 0)
        return OL_SIGV4_ECHUNK;
    if (c->signed_chunks) {
        if (n - i != ext_len + SIG_HEX_LEN || memcmp(c->line + i, ext, ext_len) != 0 ||
            !is_sig_hex(c->line + i + ext_len, SIG_HEX_LEN))
            return OL_SIGV4_ECHUNK;
        memcpy(c->chunk_sig, c->line + i + ext_len, SIG_HEX_LEN);
        c->chunk_sig[SIG_HEX_LEN] = '\0';
        if (EVP_DigestInit_ex(c->sha, ol_sha256_md(), NULL) != 1)
            return -ENOMEM;
    } else if (i != n) {
        return OL_SIGV4_ECHUNK;
    }
    c->remaining = size;
    if (size > 0) {
        c->state = CH_DATA;
        return 0;
    }
    /* The final, empty chunk: its data ends here, so verify it now. */
    c->state = CH_TRAILER;
    return c->signed_chunks ? chunk_verify(c) : 0;
}

static int on_trailer_line(struct ol_aws_chunked *c)
{
    static const char sig_name[] = "x-amz-trailer-signature";
    size_t n = c->line_len;

    if (n == 0) {
        if (c->signed_chunks && c->trailer) {
            if (!c->trailer_sig_seen)
                return OL_SIGV4_ECHUNK;
            int rc = trailer_verify(c);
            if (rc != 0)
                return rc;
        }
        c->state = CH_DONE;
        return 0;
    }
    if (!c->trailer)
        return OL_SIGV4_ECHUNK;
    const char *colon = memchr(c->line, ':', n);
    if (colon == NULL || colon == c->line)
        return OL_SIGV4_ECHUNK;
    struct ol_slice name = {c->line, (size_t)(colon - c->line)};
    struct ol_slice value = slice_trim((struct ol_slice){colon + 1, n - name.n - 1});
    for (size_t i = 0; i < name.n; i++) {
        char ch = c->line[i];
        if (ch >= 'A' && ch <= 'Z')
            c->line[i] = (char)(ch - 'A' + 'a');
        else if (!is_header_name_char((unsigned char)ch))
            return OL_SIGV4_ECHUNK;
    }
    if (memchr(value.p, '\0', value.n) != NULL)
        return OL_SIGV4_ECHUNK;
    if (c->signed_chunks && slice_eq(name, sig_name)) {
        if (c->trailer_sig_seen || !is_sig_hex(value.p, value.n))
            return OL_SIGV4_ECHUNK;
        memcpy(c->chunk_sig, value.p, SIG_HEX_LEN);
        c->chunk_sig[SIG_HEX_LEN] = '\0';
        c->trailer_sig_seen = true;
        return 0;
    }
    /* After the signature line nothing else may follow: it signs what came
     * before it. */
    if (c->trailer_sig_seen)
        return OL_SIGV4_ECHUNK;
    size_t need = name.n + 1 + value.n + 1;
    if (need > sizeof(c->trailers) - c->trailers_len)
        return OL_SIGV4_ECHUNK;
    char *dst = c->trailers + c->trailers_len;
    memcpy(dst, name.p, name.n);
    dst[name.n] = ':';
    memcpy(dst + name.n + 1, value.p, value.n);
    dst[need - 1] = '\0';
    c->trailers_len += need;
    return 0;
}

ssize_t ol_aws_chunked_decode(struct ol_aws_chunked *c, char *buf, size_t *len)
{
    size_t n = *len, pos = 0, out = 0;
    int rc = 0;

    if (c->state < 0) {
        *len = 0;
        return c->state;
    }
    /* Every pass consumes at least one byte, so n + 1 passes bound the loop. */
    for (size_t guard = 0; guard <= n && pos < n && c->state != CH_DONE; guard++) {
        switch (c->state) {
        case CH_LINE:
        case CH_TRAILER:
            rc = take_line(c, buf, n, &pos);
            if (rc == 1) {
                rc = c->state == CH_LINE ? on_size_line(c) : on_trailer_line(c);
                c->line_len = 0;
            }
            break;
        case CH_DATA: {
            size_t take = n - pos;
            if (take > c->remaining)
                take = (size_t)c->remaining;
            OL_ASSERT(take > 0 && out <= pos);
            memmove(buf + out, buf + pos, take);
            if (c->signed_chunks && EVP_DigestUpdate(c->sha, buf + out, take) != 1) {
                rc = -ENOMEM;
                break;
            }
            out += take;
            pos += take;
            c->remaining -= take;
            c->decoded_bytes += take;
            if (c->remaining == 0) {
                c->state = CH_DATA_CR;
                if (c->signed_chunks)
                    rc = chunk_verify(c);
            }
            break;
        }
        case CH_DATA_CR:
            rc = buf[pos++] == '\r' ? 0 : OL_SIGV4_ECHUNK;
            c->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            rc = buf[pos++] == '\n' ? 0 : OL_SIGV4_ECHUNK;
            c->state = CH_LINE;
            break;
        default:
            OL_ASSERT(!"bad aws-chunked state");
        }
        if (rc < 0)
            break;
    }
    *len = out;
    if (rc < 0) {
        c->state = rc;
        return rc;
    }
    return (ssize_t)pos;
}
