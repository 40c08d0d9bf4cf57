/* libFuzzer target for src/s3/sigv4.c.
 *
 * The input is split at its first three '\n' into an Authorization value, a
 * date, a path and a query; each goes through its parser and, when that
 * accepts it, through canonicalisation and verification.  The whole input
 * also checks that percent-decoding undoes percent-encoding, that the
 * canonical query and the router's decoding of the raw query (a '+' is a
 * space) give the same parameters, that the header check keeps its
 * contract, and (past its
 * first byte, which picks the variant) is fed to the aws-chunked decoder
 * twice: whole, and in pieces whose sizes come from the input.  Both feeds
 * must agree on the result, the output and the trailers.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/sigv4.h"

#define FUZZ_MAX_INPUT (64 * 1024)

static const char SECRET[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
static const char SEED[] = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_sigv4: %s:%d: %s\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A decoded query parameter: name and value back to back in one buffer. */
struct dparam {
    char *p;
    size_t name_n, value_n;
};

static int dparam_cmp(const void *x, const void *y)
{
    const struct dparam *a = x, *b = y;
    size_t an = a->name_n + 1 + a->value_n, bn = b->name_n + 1 + b->value_n;
    int r = memcmp(a->p, b->p, an < bn ? an : bn);
    return r != 0 ? r : (an > bn) - (an < bn);
}

/* Splits q at '&' and each piece at its first '=', decodes both halves,
 * and sorts the pairs; the X-Amz-Signature of a presigned request (which is
 * left out of the signature) is left out.  Returns the count, or -1 on a bad
 * escape.  buf holds q.n + 2 * count bytes at most. */
static long decode_params(struct ol_slice q, bool plus_is_space, bool skip_sig, char *buf,
                          struct dparam *out, size_t max)
{
    size_t n = 0, used = 0, i = 0;
    while (i < q.n) {
        const char *amp = memchr(q.p + i, '&', q.n - i);
        size_t end = amp ? (size_t)(amp - q.p) : q.n;
        if (end > i) {
            FUZZ_CHECK(n < max);
            const char *eq = memchr(q.p + i, '=', end - i);
            size_t ne = eq ? (size_t)(eq - q.p) : end;
            ssize_t a = ol_pct_decode(q.p + i, ne - i, buf + used, ne - i, plus_is_space);
            if (a < 0)
                return -1;
            buf[used + (size_t)a] = '\0';
            ssize_t b = eq ? ol_pct_decode(eq + 1, end - ne - 1, buf + used + (size_t)a + 1,
                                           end - ne - 1, plus_is_space)
                           : 0;
            if (b < 0)
                return -1;
            if (!(skip_sig && a == 15 && memcmp(buf + used, "X-Amz-Signature", 15) == 0)) {
                out[n++] = (struct dparam){buf + used, (size_t)a, (size_t)b};
                used += (size_t)a + 1 + (size_t)b;
            }
        }
        i = end + 1;
    }
    qsort(out, n, sizeof(out[0]), dparam_cmp);
    return (long)n;
}

/* The parameters that were signed (the canonical query decoded) are the
 * parameters the router decodes from the raw query, one for one. */
static void check_query_agreement(const char *cr, size_t len, struct ol_slice raw, bool presigned)
{
    const char *l2 = memchr(cr, '\n', len);
    const char *l3 = l2 ? memchr(l2 + 1, '\n', len - (size_t)(l2 + 1 - cr)) : NULL;
    const char *l4 = l3 ? memchr(l3 + 1, '\n', len - (size_t)(l3 + 1 - cr)) : NULL;
    FUZZ_CHECK(l4 != NULL);
    struct ol_slice canon = {l3 + 1, (size_t)(l4 - l3 - 1)};
    /* No raw '+' is left in the canonical form: it decodes one way only. */
    FUZZ_CHECK(memchr(canon.p, '+', canon.n) == NULL);
    size_t max = raw.n + 1;
    struct dparam *pa = malloc(max * sizeof(*pa)), *pb = malloc(max * sizeof(*pb));
    char *ba = malloc(canon.n + 2 * max), *bb = malloc(raw.n + 2 * max);
    FUZZ_CHECK(pa && pb && ba && bb);
    long na = decode_params(canon, false, false, ba, pa, max);
    long nb = decode_params(raw, true, presigned, bb, pb, max);
    FUZZ_CHECK(na >= 0 && nb >= 0 && na == nb);
    for (long i = 0; i < na; i++)
        FUZZ_CHECK(dparam_cmp(&pa[i], &pb[i]) == 0);
    free(pa);
    free(pb);
    free(ba);
    free(bb);
}

static void check_request(const struct ol_sigv4_auth *auth, struct ol_slice date,
                          struct ol_slice path, struct ol_slice query)
{
    struct ol_http_header h[3] = {
        {{"Host", 4}, date},
        {{"x-amz-date", 10}, date},
        {{"HOST", 4}, path},
    };
    struct ol_sigv4_request req = {
        .method = {"GET", 3},
        .path = path,
        .query = query,
        .headers = h,
        .nheaders = 3,
        .payload_hash = {"UNSIGNED-PAYLOAD", 16},
    };
    static char cr[256 * 1024];
    size_t len = 0;
    char sig[65], seed[65];
    int rc = ol_sigv4_canonical_request(&req, auth, cr, sizeof(cr), &len);
    FUZZ_CHECK(rc <= 0 && len <= sizeof(cr));
    if (rc == 0)
        check_query_agreement(cr, len, query, auth->presigned);
    /* The header check: its results, and a name list always terminated
     * inside the buffer, however small. */
    char names[64];
    for (size_t cap = 1; cap <= sizeof(names); cap += 21) {
        memset(names, 'x', sizeof(names));
        int rh = ol_sigv4_check_headers(&req, auth, names, cap);
        FUZZ_CHECK(rh == OL_SIGV4_OK || rh == OL_SIGV4_EUNSIGNED || rh == OL_SIGV4_EABSENT ||
                   rh == OL_SIGV4_EREPEATED || rh == OL_SIGV4_EMALFORMED);
        FUZZ_CHECK(memchr(names, '\0', cap) != NULL);
        /* Host is sent twice here: signed, it is repeated; unsigned, it is
         * named. */
        if (rh == OL_SIGV4_OK)
            FUZZ_CHECK(!"host is sent twice: never OK");
    }
    int rs = ol_sigv4_sign(&req, auth, SECRET, sizeof(SECRET) - 1, sig);
    if (rs == 0) {
        FUZZ_CHECK(strlen(sig) == 64);
        /* Verifying with the signature just computed must succeed, unless
         * the signed headers leave out host. */
        struct ol_sigv4_auth a2 = *auth;
        a2.signature = (struct ol_slice){sig, 64};
        int rv = ol_sigv4_verify(&req, &a2, SECRET, sizeof(SECRET) - 1, seed);
        FUZZ_CHECK(rv == OL_SIGV4_OK || rv == OL_SIGV4_EMALFORMED);
        if (rv == OL_SIGV4_OK)
            FUZZ_CHECK(memcmp(seed, sig, 65) == 0);
    }
    (void)ol_sigv4_verify(&req, auth, SECRET, sizeof(SECRET) - 1, NULL);
}

static void check_parsers(const char *in, size_t n)
{
    struct ol_slice seg[4] = {{in + n, 0}, {in + n, 0}, {in + n, 0}, {in + n, 0}};
    size_t start = 0;
    for (int k = 0; k < 4 && start <= n; k++) {
        const char *nl = k < 3 ? memchr(in + start, '\n', n - start) : NULL;
        size_t end = nl ? (size_t)(nl - in) : n;
        seg[k] = (struct ol_slice){in + start, end - start};
        start = end + 1;
        if (nl == NULL)
            break;
    }
    struct ol_sigv4_auth auth;
    int rc = ol_sigv4_parse_header(seg[0], seg[1], &auth);
    FUZZ_CHECK(rc <= 0 && rc >= OL_SIGV4_ECHUNK);
    if (rc == OL_SIGV4_OK) {
        FUZZ_CHECK(strlen(auth.amz_date) == 16 && !auth.presigned);
        FUZZ_CHECK(auth.signature.n == 64 && auth.date.n == 8);
        check_request(&auth, seg[1], seg[2], seg[3]);
    }
    rc = ol_sigv4_parse_query(seg[3], &auth);
    FUZZ_CHECK(rc <= 1 && rc >= OL_SIGV4_ECHUNK);
    if (rc == OL_SIGV4_OK) {
        FUZZ_CHECK(auth.presigned && auth.expires_sec >= 0 && auth.expires_sec <= 604800);
        check_request(&auth, seg[1], seg[2], seg[3]);
    }
    char d[17];
    int64_t t;
    if (ol_sigv4_parse_date(seg[1], d, &t) == 0) {
        /* The normalised form parses back to the same time. */
        int64_t t2;
        char d2[17];
        FUZZ_CHECK(ol_sigv4_parse_date((struct ol_slice){d, 16}, d2, &t2) == 0);
        FUZZ_CHECK(t2 == t && memcmp(d, d2, 17) == 0);
    }
}

static void check_uri(const char *in, size_t n)
{
    char *enc = malloc(3 * n + 1);
    char *dec = malloc(n + 1);
    FUZZ_CHECK(enc != NULL && dec != NULL);
    for (int ks = 0; ks < 2; ks++) {
        ssize_t e = ol_uri_encode(in, n, enc, 3 * n, ks == 1);
        FUZZ_CHECK(e >= 0 && (size_t)e >= n && (size_t)e <= 3 * n);
        ssize_t d = ol_uri_decode(enc, (size_t)e, enc); /* in place */
        FUZZ_CHECK(d == (ssize_t)n && memcmp(enc, in, n) == 0);
        if (n > 0) /* no room at all */
            FUZZ_CHECK(ol_uri_encode(in, n, dec, 0, ks == 1) == -1);
    }
    ssize_t d = ol_uri_decode(in, n, dec);
    FUZZ_CHECK(d == -1 || (d >= 0 && (size_t)d <= n));
    free(enc);
    free(dec);
}

struct feed_result {
    int rc; /* 0 done, 1 input ran out, else an error */
    size_t consumed;
    size_t out_len;
    uint64_t decoded;
    char trailers[512];
    size_t trailers_len;
};

/* pieces == NULL: feed the whole input at once. */
static void feed(const char *in, size_t n, const uint8_t *pieces, size_t npieces, bool sgn,
                 bool trailer, const struct ol_sigv4_auth *auth, char *out, struct feed_result *res)
{
    struct ol_aws_chunked c;
    char *buf = malloc(n + 1);
    size_t have = 0, fed = 0, k = 0;
    FUZZ_CHECK(buf != NULL);
    memset(res, 0, sizeof(*res));
    res->rc = 1;
    FUZZ_CHECK(ol_aws_chunked_init(&c, sgn, trailer, auth, SECRET, sizeof(SECRET) - 1, SEED) == 0);
    /* Each pass feeds at least one new byte or stops. */
    for (size_t pass = 0; pass <= n + 1; pass++) {
        size_t add = pieces ? 1 + (size_t)(pieces[k++ % npieces] % 97) : n;
        if (add > n - fed)
            add = n - fed;
        memcpy(buf + have, in + fed, add);
        have += add;
        fed += add;
        size_t len = have;
        ssize_t r = ol_aws_chunked_decode(&c, buf, &len);
        FUZZ_CHECK(len <= have);
        memcpy(out + res->out_len, buf, len);
        res->out_len += len;
        if (r < 0) {
            res->rc = (int)r;
            break;
        }
        FUZZ_CHECK((size_t)r <= have);
        res->consumed += (size_t)r;
        memmove(buf, buf + r, have - (size_t)r);
        have -= (size_t)r;
        if (ol_aws_chunked_done(&c)) {
            res->rc = 0;
            break;
        }
        /* Not done: everything offered must have been consumed. */
        FUZZ_CHECK(have == 0);
        if (fed == n)
            break;
    }
    res->decoded = c.decoded_bytes;
    FUZZ_CHECK(c.trailers_len <= sizeof(c.trailers));
    memcpy(res->trailers, c.trailers, c.trailers_len);
    res->trailers_len = c.trailers_len;
    ol_aws_chunked_free(&c);
    free(buf);
}

static void check_chunked(const uint8_t *data, size_t size)
{
    static struct ol_sigv4_auth auth;
    static bool have_auth;
    if (!have_auth) {
        static const char authz[] =
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host,Signature="
            "4f232c4386841ef735655705268965c44a0e"
            "4690baa4adea153f7db9fa80a0a9";
        FUZZ_CHECK(ol_sigv4_parse_header((struct ol_slice){authz, sizeof(authz) - 1},
                                         (struct ol_slice){"20130524T000000Z", 16}, &auth) == 0);
        have_auth = true;
    }
    if (size < 1)
        return;
    bool sgn = data[0] & 1, trailer = data[0] & 2;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    char *out1 = malloc(n + 1), *out2 = malloc(n + 1);
    struct feed_result r1, r2;
    FUZZ_CHECK(out1 != NULL && out2 != NULL);
    feed(in, n, NULL, 0, sgn, trailer, &auth, out1, &r1);
    feed(in, n, data, size, sgn, trailer, &auth, out2, &r2);
    FUZZ_CHECK(r1.rc == r2.rc);
    FUZZ_CHECK(r1.out_len == r2.out_len && memcmp(out1, out2, r1.out_len) == 0);
    FUZZ_CHECK(r1.decoded == r2.decoded && r1.decoded == r1.out_len);
    FUZZ_CHECK(r1.trailers_len == r2.trailers_len &&
               memcmp(r1.trailers, r2.trailers, r1.trailers_len) == 0);
    if (r1.rc >= 0)
        FUZZ_CHECK(r1.consumed == r2.consumed);
    free(out1);
    free(out2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return 0;
    check_parsers((const char *)data, size);
    check_uri((const char *)data, size);
    check_chunked(data, size);
    return 0;
}
