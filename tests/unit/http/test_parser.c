/* Unit test of the HTTP/1.1 request-head parser and the chunked decoder
 * (src/http/parser.c).  Exits 0 on success, 1 on the first failure. */
#include "http/parser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"



#define CHECK_EQ_INT(a, b)                                                                    \
    do {                                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                                   \
        if (a_ != b_) {                                                                       \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, \
                    b_);                                                                      \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

#define MAXH 64

static const struct ol_http_limits default_limits = {
    .max_head_bytes = 8192, .max_headers = MAXH, .max_target_bytes = 2048};

static struct ol_http_header hdrs[MAXH];

static int slice_is(struct ol_slice s, const char *want)
{
    return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

/* Parses a copy of s (an exact-size heap copy, so ASan sees any overread). */
static int parse_lim(const char *s, size_t n, const struct ol_http_limits *lim,
                     struct ol_http_request *req)
{
    char *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, s, n);
    memset(req, 0, sizeof(*req));
    req->headers = hdrs;
    int rc = ol_http_parse_request(copy, n, lim, req);
    free(copy); /* the slices in req dangle now: callers only look at rc */
    return rc;
}

static int parse_str(const char *s, const struct ol_http_limits *lim)
{
    struct ol_http_request req;
    return parse_lim(s, strlen(s), lim, &req);
}

static void test_simple_get(void)
{
    const char *s = "GET /bucket/key%20x?versionId=3&acl HTTP/1.1\r\n"
                    "Host: example.com\r\n"
                    "X-Amz-Date:20240101T000000Z\r\n"
                    "x-amz-meta-empty:\r\n"
                    "Authorization: \t AWS4-HMAC-SHA256 Credential=a/b, Signature=00 \t \r\n"
                    "\r\n"
                    "body";
    struct ol_http_request req = {0};
    req.headers = hdrs;
    int rc = ol_http_parse_request(s, strlen(s), &default_limits, &req);
    CHECK_EQ_INT(rc, (long long)(strlen(s) - 4));
    CHECK(slice_is(req.method, "GET"));
    CHECK(slice_is(req.target, "/bucket/key%20x?versionId=3&acl"));
    CHECK(slice_is(req.path, "/bucket/key%20x"));
    CHECK(slice_is(req.query, "versionId=3&acl"));
    CHECK_EQ_INT(req.minor_version, 1);
    CHECK_EQ_INT(req.nheaders, 4);
    CHECK(slice_is(hdrs[0].name, "Host") && slice_is(hdrs[0].value, "example.com"));
    CHECK(slice_is(hdrs[1].name, "X-Amz-Date") && slice_is(hdrs[1].value, "20240101T000000Z"));
    CHECK(slice_is(hdrs[2].name, "x-amz-meta-empty") && hdrs[2].value.n == 0);
    CHECK(slice_is(hdrs[3].value, "AWS4-HMAC-SHA256 Credential=a/b, Signature=00"));
    /* Slices point into the caller's buffer: zero-copy. */
    CHECK(req.method.p == s);
    CHECK(hdrs[0].name.p > s && hdrs[0].name.p < s + rc);

    const struct ol_slice *v = ol_http_find_header(&req, "host");
    CHECK(v && slice_is(*v, "example.com"));
    v = ol_http_find_header(&req, "X-AMZ-DATE");
    CHECK(v && slice_is(*v, "20240101T000000Z"));
    CHECK(ol_http_find_header(&req, "x-amz-content-sha256") == NULL);
    CHECK(ol_http_find_header(&req, "Hos") == NULL);
    CHECK(ol_http_find_header(&req, "Hostt") == NULL);

    /* A '?' with nothing after it, and no query at all. */
    const char *s2 = "HEAD /b? HTTP/1.0\n\n";
    rc = ol_http_parse_request(s2, strlen(s2), &default_limits, &req);
    CHECK_EQ_INT(rc, strlen(s2));
    CHECK(slice_is(req.method, "HEAD"));
    CHECK(slice_is(req.path, "/b") && req.query.n == 0);
    CHECK_EQ_INT(req.minor_version, 0);
    CHECK_EQ_INT(req.nheaders, 0);
    const char *s3 = "PUT * HTTP/1.1\r\n\r\n";
    rc = ol_http_parse_request(s3, strlen(s3), &default_limits, &req);
    CHECK_EQ_INT(rc, strlen(s3));
    CHECK(slice_is(req.path, "*") && req.query.n == 0);
    /* The first '?' splits; later ones belong to the query. */
    const char *s4 = "GET /a?b?c HTTP/1.1\r\n\r\n";
    rc = ol_http_parse_request(s4, strlen(s4), &default_limits, &req);
    CHECK_EQ_INT(rc, strlen(s4));
    CHECK(slice_is(req.path, "/a") && slice_is(req.query, "b?c"));
}

static void test_line_endings(void)
{
    struct ol_http_request req;
    /* Bare LF everywhere, and mixed. */
    const char *lf = "GET / HTTP/1.1\nHost: a\nX: b\n\n";
    CHECK_EQ_INT(parse_str(lf, &default_limits), strlen(lf));
    const char *mixed = "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\n";
    CHECK_EQ_INT(parse_lim(mixed, strlen(mixed), &default_limits, &req), strlen(mixed));
    CHECK_EQ_INT(req.nheaders, 2);
    /* Leading empty lines are skipped and counted in the head length. */
    const char *lead = "\r\n\n\r\nGET / HTTP/1.1\r\n\r\n";
    CHECK_EQ_INT(parse_lim(lead, strlen(lead), &default_limits, &req), strlen(lead));
    CHECK_EQ_INT(parse_str("\r\n\r\n", &default_limits), OL_HTTP_PARTIAL);
    CHECK_EQ_INT(parse_str("\r", &default_limits), OL_HTTP_PARTIAL);
    CHECK_EQ_INT(parse_str("", &default_limits), OL_HTTP_PARTIAL);
    memset(&req, 0, sizeof(req));
    req.headers = hdrs;
    CHECK_EQ_INT(ol_http_parse_request(NULL, 0, &default_limits, &req), OL_HTTP_PARTIAL);
    /* Bare CR: in leading lines, in the request line, in a header, at the end. */
    CHECK_EQ_INT(parse_str("\rGET / HTTP/1.1\r\n\r\n", &default_limits), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET /\r HTTP/1.1\r\n\r\n", &default_limits), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\r\n\r\n", &default_limits), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\rHost: a\r\n\r\n", &default_limits), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", &default_limits),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n", &default_limits),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\nHost: a\r\n\rx", &default_limits), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\nHost: a\r\n\r", &default_limits),
                 OL_HTTP_PARTIAL);
}

struct bad_case {
    const char *in;
    int want;
};

static void test_errors(void)
{
    static const struct bad_case cases[] = {
        /* Request line. */
        {"get / HTTP/1.1\r\n\r\n", 0}, /* lowercase methods are tokens too: accepted */
        {" GET / HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET\r\n\r\n", OL_HTTP_EBAD},
        {"GET  / HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1 \r\n\r\n", OL_HTTP_EBAD},
        {"GET /  HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET /\tx HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET /\x7f HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"G(T / HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET\t/ HTTP/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET /\r\n\r\n", OL_HTTP_EBAD},
        {"GET / \r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1x\r\n\r\n", OL_HTTP_EBAD},
        {"GET / http/1.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/11.1\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.10\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/2\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/2.0\r\n\r\n", OL_HTTP_EVERSION},
        {"GET / HTTP/0.9\r\n\r\n", OL_HTTP_EVERSION},
        {"GET / HTTP/1.2\r\n\r\n", OL_HTTP_EVERSION},
        {"GET / HTTP/9.9\n\n", OL_HTTP_EVERSION},
        {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", OL_HTTP_EVERSION},
        /* Headers. */
        {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHost\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", OL_HTTP_EBAD},   /* obs-fold */
        {"GET / HTTP/1.1\r\nHost: a\r\n\tb\r\n\r\n", OL_HTTP_EBAD},  /* obs-fold */
        {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", OL_HTTP_EBAD},        /* ws first */
        {"GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHost: a\x1b[0m\r\n\r\n", OL_HTTP_EBAD},
        {"GET / HTTP/1.1\r\nHost: a\tb\r\n\r\n", 0},                 /* HTAB is fine */
        {"GET / HTTP/1.1\r\nHost: caf\xc3\xa9\r\n\r\n", 0},          /* obs-text is fine */
        {"GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse_str(cases[i].in, &default_limits);
        int want = cases[i].want;
        if (want == 0) {
            if (rc <= 0) {
                fprintf(stderr, "case %zu: got %d, expected success\n", i, rc);
                failures++;
            }
        } else if (rc != want) {
            fprintf(stderr, "case %zu: got %d, expected %d\n", i, rc, want);
            failures++;
        }
    }

    /* NUL bytes: in the method, target, a header name and a value. */
    static const char nul_method[] = "G\0T / HTTP/1.1\r\n\r\n";
    static const char nul_target[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    static const char nul_name[] = "GET / HTTP/1.1\r\nH\0st: a\r\n\r\n";
    static const char nul_value[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
    static const char nul_first[] = "\0GET / HTTP/1.1\r\n\r\n";
    struct ol_http_request req;
    CHECK_EQ_INT(parse_lim(nul_method, sizeof(nul_method) - 1, &default_limits, &req),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_lim(nul_target, sizeof(nul_target) - 1, &default_limits, &req),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_lim(nul_name, sizeof(nul_name) - 1, &default_limits, &req),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_lim(nul_value, sizeof(nul_value) - 1, &default_limits, &req),
                 OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_lim(nul_first, sizeof(nul_first) - 1, &default_limits, &req),
                 OL_HTTP_EBAD);
    /* A NUL is rejected as soon as it arrives, before its line ends. */
    CHECK_EQ_INT(parse_lim(nul_value, 24, &default_limits, &req), OL_HTTP_EBAD);
    CHECK_EQ_INT(parse_lim(nul_value, 23, &default_limits, &req), OL_HTTP_PARTIAL);
    /* Junk that is not HTTP at all (a TLS ClientHello) is rejected at once. */
    static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    CHECK_EQ_INT(parse_lim(tls, sizeof(tls) - 1, &default_limits, &req), OL_HTTP_EBAD);
}

static void test_limits(void)
{
    const char *s = "GET /abcdef HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    size_t n = strlen(s);
    struct ol_http_request req;
    struct ol_http_limits lim = default_limits;

    /* max_head_bytes: exactly the head fits; one byte less does not. */
    lim.max_head_bytes = n;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), n);
    lim.max_head_bytes = n - 1;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_EHEAD_TOO_LARGE);
    /* With no more than max_head_bytes buffered it is still only partial. */
    CHECK_EQ_INT(parse_lim(s, n - 1, &lim, &req), OL_HTTP_PARTIAL);
    /* A line that never ends: too large as soon as the window overflows. */
    char big[300];
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    lim.max_head_bytes = 200;
    CHECK_EQ_INT(parse_lim(big, 200, &lim, &req), OL_HTTP_PARTIAL);
    CHECK_EQ_INT(parse_lim(big, 201, &lim, &req), OL_HTTP_EHEAD_TOO_LARGE);
    CHECK_EQ_INT(parse_lim(big, sizeof(big), &lim, &req), OL_HTTP_EHEAD_TOO_LARGE);
    /* An error inside the window wins over the size. */
    big[100] = '\x01';
    CHECK_EQ_INT(parse_lim(big, sizeof(big), &lim, &req), OL_HTTP_EBAD);
    /* Leading empty lines count against the limit too. */
    char blank[64];
    memset(blank, '\n', sizeof(blank));
    lim.max_head_bytes = 32;
    CHECK_EQ_INT(parse_lim(blank, 32, &lim, &req), OL_HTTP_PARTIAL);
    CHECK_EQ_INT(parse_lim(blank, 33, &lim, &req), OL_HTTP_EHEAD_TOO_LARGE);
    lim.max_head_bytes = 0;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_EHEAD_TOO_LARGE);
    CHECK_EQ_INT(parse_lim(s, 0, &lim, &req), OL_HTTP_PARTIAL);

    /* max_headers. */
    lim = default_limits;
    lim.max_headers = 3;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), n);
    CHECK_EQ_INT(req.nheaders, 3);
    lim.max_headers = 2;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_ETOO_MANY_HEADERS);
    /* Decided when the third header line starts, before it is complete. */
    CHECK_EQ_INT(parse_lim(s, 35, &lim, &req), OL_HTTP_ETOO_MANY_HEADERS);
    CHECK_EQ_INT(parse_lim(s, 34, &lim, &req), OL_HTTP_PARTIAL);
    lim.max_headers = 0;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_ETOO_MANY_HEADERS);
    CHECK_EQ_INT(parse_str("GET / HTTP/1.1\r\n\r\n", &lim), 18);

    /* A huge number of headers, more than the array holds. */
    static char many[20000];
    size_t m = 0;
    m += (size_t)snprintf(many + m, sizeof(many) - m, "PUT /b/k HTTP/1.1\r\n");
    for (int i = 0; i < 1000; i++)
        m += (size_t)snprintf(many + m, sizeof(many) - m, "x-amz-meta-%d: v\r\n", i);
    m += (size_t)snprintf(many + m, sizeof(many) - m, "\r\n");
    lim = default_limits;
    lim.max_head_bytes = sizeof(many);
    CHECK_EQ_INT(parse_lim(many, m, &lim, &req), OL_HTTP_ETOO_MANY_HEADERS);

    /* max_target_bytes: "/abcdef" is 7 bytes. */
    lim = default_limits;
    lim.max_target_bytes = 7;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), n);
    lim.max_target_bytes = 6;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_EURI_TOO_LONG);
    /* Decided when the byte past the limit arrives, before the line ends. */
    CHECK_EQ_INT(parse_lim(s, 11, &lim, &req), OL_HTTP_EURI_TOO_LONG);
    CHECK_EQ_INT(parse_lim(s, 10, &lim, &req), OL_HTTP_PARTIAL);
    lim.max_target_bytes = 0;
    CHECK_EQ_INT(parse_lim(s, n, &lim, &req), OL_HTTP_EURI_TOO_LONG);
    /* A long URL against the default limit. */
    static char url[4096];
    memcpy(url, "GET /", 5);
    memset(url + 5, 'k', 3000);
    memcpy(url + 3005, " HTTP/1.1\r\n\r\n", 14);
    CHECK_EQ_INT(parse_lim(url, strlen(url), &default_limits, &req), OL_HTTP_EURI_TOO_LONG);
    lim = default_limits;
    lim.max_target_bytes = 3001;
    CHECK_EQ_INT(parse_lim(url, strlen(url), &lim, &req), strlen(url));
    CHECK_EQ_INT(req.target.n, 3001);
}

/* Every prefix of a good request is PARTIAL; the whole is its length.  Every
 * prefix of a bad one is PARTIAL or the final error, and once it is the
 * error it stays so. */
static void check_splits(const char *s, size_t n, const struct ol_http_limits *lim)
{
    struct ol_http_request whole, part;
    struct ol_http_header wh[MAXH];
    char *buf = malloc(n ? n : 1);
    if (!buf)
        abort();
    memcpy(buf, s, n);
    memset(&whole, 0, sizeof(whole));
    whole.headers = wh;
    int want = ol_http_parse_request(buf, n, lim, &whole);
    int decided = 0;
    for (size_t k = 0; k <= n; k++) {
        memset(&part, 0, sizeof(part));
        part.headers = hdrs;
        int rc = ol_http_parse_request(buf, k, lim, &part);
        if (rc == OL_HTTP_PARTIAL) {
            if (decided) {
                fprintf(stderr, "split %zu of \"%.40s\": partial after a verdict\n", k, s);
                failures++;
            }
            continue;
        }
        decided = 1;
        if (rc != want) {
            fprintf(stderr, "split %zu of \"%.40s\": %d, whole gives %d\n", k, s, rc, want);
            failures++;
            continue;
        }
        if (rc > 0) {
            CHECK((size_t)rc <= k);
            CHECK_EQ_INT(part.nheaders, whole.nheaders);
            CHECK(part.target.p == whole.target.p && part.target.n == whole.target.n);
            for (size_t i = 0; i < part.nheaders && i < whole.nheaders; i++) {
                CHECK(hdrs[i].name.p == wh[i].name.p && hdrs[i].name.n == wh[i].name.n);
                CHECK(hdrs[i].value.p == wh[i].value.p && hdrs[i].value.n == wh[i].value.n);
            }
        }
    }
    free(buf);
}

static void test_partial_every_split(void)
{
    static const char *reqs[] = {
        "GET /b/k?list-type=2&prefix=a%2Fb HTTP/1.1\r\nHost: s3.local:9000\r\n"
        "x-amz-date: 20240101T000000Z\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"
        "Authorization: AWS4-HMAC-SHA256 Credential=AK/20240101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abcdef\r\n\r\n",
        "PUT /bucket/object HTTP/1.1\nContent-Length: 5\nExpect: 100-continue\n\nhello",
        "\r\n\r\nHEAD / HTTP/1.0\r\nA:\r\nB:    \t\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x01\r\n\r\n",
        "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n",
    };
    struct ol_http_limits tight = {.max_head_bytes = 64, .max_headers = 3,
                                   .max_target_bytes = 16};
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        check_splits(reqs[i], strlen(reqs[i]), &default_limits);
        check_splits(reqs[i], strlen(reqs[i]), &tight);
    }
    /* A good request: PARTIAL at every split before the end. */
    const char *r = reqs[0];
    size_t n = strlen(r);
    struct ol_http_request req;
    for (size_t k = 0; k < n; k++) {
        int rc = parse_lim(r, k, &default_limits, &req);
        if (rc != OL_HTTP_PARTIAL) {
            fprintf(stderr, "prefix %zu: %d\n", k, rc);
            failures++;
        }
    }
    CHECK_EQ_INT(parse_lim(r, n, &default_limits, &req), n);
}

static void test_pipelining(void)
{
    const char *s = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
                    "PUT /two HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
                    "\r\nDELETE /three HTTP/1.0\n\n"
                    "GET /four";
    size_t n = strlen(s);
    struct ol_http_request req = {0};
    req.headers = hdrs;
    const char *names[] = {"/one", "/two", "/three"};
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        int rc = ol_http_parse_request(s + off, n - off, &default_limits, &req);
        CHECK(rc > 0);
        if (rc <= 0)
            return;
        CHECK(slice_is(req.target, names[i]));
        off += (size_t)rc;
    }
    CHECK(strcmp(s + off, "GET /four") == 0);
    CHECK_EQ_INT(ol_http_parse_request(s + off, n - off, &default_limits, &req),
                 OL_HTTP_PARTIAL);
    CHECK(ol_http_find_header(&req, "Host") == NULL);
}

static int cl(const char *s, uint64_t *v)
{
    struct ol_slice sl = {s, strlen(s)};
    return ol_http_parse_content_length(sl, v);
}

static void test_content_length(void)
{
    uint64_t v = 12345;
    CHECK(cl("0", &v) == 0 && v == 0);
    CHECK(cl("000", &v) == 0 && v == 0);
    CHECK(cl("5", &v) == 0 && v == 5);
    CHECK(cl("5368709120", &v) == 0 && v == UINT64_C(5368709120));
    CHECK(cl("9223372036854775807", &v) == 0 && v == UINT64_C(9223372036854775807));
    v = 7;
    CHECK(cl("9223372036854775808", &v) == -1 && v == 7);
    CHECK(cl("18446744073709551615", &v) == -1);
    CHECK(cl("18446744073709551616", &v) == -1);
    CHECK(cl("99999999999999999999999", &v) == -1);
    CHECK(cl("", &v) == -1);
    CHECK(cl("+5", &v) == -1);
    CHECK(cl("-5", &v) == -1);
    CHECK(cl(" 5", &v) == -1);
    CHECK(cl("5 ", &v) == -1);
    CHECK(cl("5,5", &v) == -1);
    CHECK(cl("0x10", &v) == -1);
    CHECK(cl("1e3", &v) == -1);
    CHECK(cl("5\t", &v) == -1);
    struct ol_slice nul = {"5\0", 2};
    CHECK(ol_http_parse_content_length(nul, &v) == -1);
    struct ol_slice prefix = {"123456", 3}; /* only the slice is read */
    CHECK(ol_http_parse_content_length(prefix, &v) == 0 && v == 123);
}

/* Decodes s fed in the pieces [0,a), [a,b), [b,n) through a receive buffer
 * that keeps the unconsumed tail.  Returns 0 or -1; fills out/outn, consumed
 * total and done. */
static int chunked_run(const char *s, size_t n, size_t a, size_t b, char *out, size_t *outn,
                       size_t *consumed, int *done)
{
    struct ol_http_chunked c;
    memset(&c, 0, sizeof(c));
    char *rbuf = malloc(n + 1);
    if (!rbuf)
        abort();
    size_t have = 0, fed = 0, total = 0;
    size_t cuts[3] = {a, b, n};
    int rc = 0;
    *outn = 0;
    for (int piece = 0; piece < 3; piece++) {
        size_t upto = cuts[piece];
        memcpy(rbuf + have, s + fed, upto - fed);
        have += upto - fed;
        fed = upto;
        size_t len = have;
        ssize_t used = ol_http_chunked_decode(&c, rbuf, &len);
        memcpy(out + *outn, rbuf, len);
        *outn += len;
        if (used < 0) {
            rc = -1;
            break;
        }
        total += (size_t)used;
        memmove(rbuf, rbuf + used, have - (size_t)used);
        have -= (size_t)used;
    }
    *consumed = total;
    *done = ol_http_chunked_done(&c);
    free(rbuf);
    return rc;
}

static void test_chunked(void)
{
    const char body[] = "5;name=value;q=\"quoted str\"\r\nhello\r\n"
                        "1A\r\n0123456789abcdefghijklmnop\r\n"
                        "000a ; chunk-signature=abc\r\n0123456789\r\n"
                        "0\r\nx-amz-checksum-crc32: AAAAAA==\r\nX-Trailer:\tv \r\n\r\n"
                        "GET /next HTTP/1.1\r\n\r\n";
    const char want[] = "hello0123456789abcdefghijklmnop0123456789";
    size_t n = sizeof(body) - 1;
    size_t body_end = n - strlen("GET /next HTTP/1.1\r\n\r\n");
    char out[sizeof(body)];
    size_t outn, consumed;
    int done;

    /* Every pair of split points (three pieces). */
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            int rc = chunked_run(body, n, a, b, out, &outn, &consumed, &done);
            if (rc != 0 || !done || consumed != body_end || outn != strlen(want) ||
                memcmp(out, want, outn) != 0) {
                fprintf(stderr, "chunked split %zu,%zu: rc %d done %d consumed %zu out %zu\n",
                        a, b, rc, done, consumed, outn);
                failures++;
                return;
            }
        }
    }

    /* Byte by byte: each byte is consumed until the end, then none. */
    struct ol_http_chunked c = {0};
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        char byte = body[i];
        size_t len = 1;
        ssize_t used = ol_http_chunked_decode(&c, &byte, &len);
        CHECK_EQ_INT(used, i < body_end ? 1 : 0);
        if (len) {
            CHECK(got < sizeof(want) - 1 && byte == want[got]);
            got++;
        }
        CHECK_EQ_INT(ol_http_chunked_done(&c), i + 1 >= body_end);
    }
    CHECK_EQ_INT(got, strlen(want));

    /* An empty body, and a zero-length call. */
    struct ol_http_chunked e = {0};
    char z[] = "0\r\n\r\n";
    size_t len = 0;
    CHECK_EQ_INT(ol_http_chunked_decode(&e, z, &len), 0);
    CHECK(!ol_http_chunked_done(&e));
    len = 5;
    CHECK_EQ_INT(ol_http_chunked_decode(&e, z, &len), 5);
    CHECK_EQ_INT(len, 0);
    CHECK(ol_http_chunked_done(&e));
    len = 5;
    CHECK_EQ_INT(ol_http_chunked_decode(&e, z, &len), 0);
    CHECK_EQ_INT(len, 0);
}

static int chunked_verdict(const char *s, size_t n, size_t *outn)
{
    size_t consumed;
    int done;
    char *out = malloc(n + 1);
    if (!out)
        abort();
    int rc = chunked_run(s, n, n / 3, n / 2, out, outn, &consumed, &done);
    free(out);
    if (rc < 0)
        return -1;
    return done ? 1 : 0;
}

static void test_chunked_errors(void)
{
    static const struct {
        const char *in;
        int want; /* -1 error, 0 incomplete, 1 done */
    } cases[] = {
        {"0\r\n\r\n", 1},
        {"00000000000000000\r\n\r\n", -1}, /* 17 digits, even if zero */
        {"0000000000000000\r\n\r\n", 1},   /* 16 digits */
        {"1000000000000000\r\n", 0},       /* 2^60: allowed, data pending */
        {"1000000000000001\r\n", -1},      /* above 2^60 */
        {"FFFFFFFFFFFFFFFF\r\n", -1},
        {"\r\n", -1},                       /* no size */
        {";ext\r\n", -1},
        {"g\r\n", -1},
        {"-1\r\n", -1},
        {"+1\r\n", -1},
        {" 1\r\n", -1},
        {"1 \r\na\r\n0\r\n\r\n", 1},       /* BWS after the size */
        {"1 x\r\n", -1},
        {"1\n", -1},                         /* bare LF on the chunk line */
        {"1\rx", -1},
        {"1\r\nab\r\n", -1},                 /* data longer than the size */
        {"1\r\naX\n", -1},
        {"1\r\na\n0\r\n\r\n", -1},           /* LF without CR after data */
        {"1\r\na\r\n", 0},
        {"1;a=\x01\r\n", -1},                /* control char in an extension */
        {"1;a=\tb\r\na\r\n0\r\n\r\n", 1},
        {"0\r\nX: y\r\n\r\n", 1},
        {"0\r\nX: y\r\n", 0},
        {"0\r\n\n", -1},                     /* bare LF ending the trailer */
        {"0\r\nX: y\n\r\n", -1},
        {"0\r\n X: y\r\n\r\n", -1},          /* obs-fold in a trailer */
        {"0\r\nX y\r\n\r\n", -1},
        {"0\r\n: y\r\n\r\n", -1},
        {"0\r\nX: \x7f\r\n\r\n", -1},
        {"0\r\n\rx", -1},
        {"0\r\n", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t outn;
        int v = chunked_verdict(cases[i].in, strlen(cases[i].in), &outn);
        if (v != cases[i].want) {
            fprintf(stderr, "chunked case %zu (%s): got %d, expected %d\n", i, cases[i].in, v,
                    cases[i].want);
            failures++;
        }
    }

    /* A chunk line of 4096 bytes is fine, 4097 is not. */
    static char line[5000];
    memset(line, 'x', sizeof(line));
    memcpy(line, "1;", 2);
    memcpy(line + 4094, "\r\na\r\n0\r\n\r\n", 10);
    size_t outn;
    CHECK_EQ_INT(chunked_verdict(line, 4104, &outn), 1);
    CHECK_EQ_INT(outn, 1);
    memset(line, 'x', sizeof(line));
    memcpy(line, "1;", 2);
    memcpy(line + 4095, "\r\na\r\n0\r\n\r\n", 10);
    CHECK_EQ_INT(chunked_verdict(line, 4105, &outn), -1);
    /* A chunk line that never ends is rejected once it passes the bound. */
    memset(line, 'x', sizeof(line));
    memcpy(line, "1;", 2);
    CHECK_EQ_INT(chunked_verdict(line, sizeof(line), &outn), -1);

    /* An endless trailer section is bounded too. */
    static char tr[20000];
    size_t m = (size_t)snprintf(tr, sizeof(tr), "0\r\n");
    while (m + 20 < sizeof(tr))
        m += (size_t)snprintf(tr + m, sizeof(tr) - m, "x-a: bbbbbbbbbbbbb\r\n");
    CHECK_EQ_INT(chunked_verdict(tr, m, &outn), -1);

    /* Errors are sticky, and data decoded before one is reported. */
    struct ol_http_chunked c = {0};
    char bad[] = "3\r\nabcX";
    size_t len = strlen(bad);
    CHECK_EQ_INT(ol_http_chunked_decode(&c, bad, &len), -1);
    CHECK_EQ_INT(len, 3);
    CHECK(memcmp(bad, "abc", 3) == 0);
    char good[] = "\r\n0\r\n\r\n";
    len = strlen(good);
    CHECK_EQ_INT(ol_http_chunked_decode(&c, good, &len), -1);
    CHECK_EQ_INT(len, 0);
    CHECK(!ol_http_chunked_done(&c));

    /* remaining tracks the data left in the current chunk. */
    struct ol_http_chunked r = {0};
    char part[] = "10\r\nabcd";
    len = strlen(part);
    CHECK_EQ_INT(ol_http_chunked_decode(&r, part, &len), 8);
    CHECK_EQ_INT(len, 4);
    CHECK_EQ_INT(r.remaining, 12);
}

int main(void)
{
    test_simple_get();
    test_line_endings();
    test_errors();
    test_limits();
    test_partial_every_split();
    test_pipelining();
    test_content_length();
    test_chunked();
    test_chunked_errors();
    if (failures) {
        fprintf(stderr, "test_parser: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_parser: ok\n");
    return 0;
}
