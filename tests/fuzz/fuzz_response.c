/* libFuzzer target for the response-head writer (src/http/response.c).
 *
 * Input layout: byte 0 the flags (bit 0 Connection: close, bit 1 interim
 * 100 Continue) and a room selector (bits 2-7); bytes 1-2 the status (big
 * endian, so out-of-range ones come up); bytes 3-10 the Content-Length; the
 * rest NUL-separated strings, alternately a header name and its value (a
 * lone 0xFE name stands for NULL, a lone 0xFF value for NULL).
 *
 * Checked, besides what the sanitizers catch:
 *  - no byte below 0x20 other than HTAB, and no 0x7F, comes out, and CR and
 *    LF only as the CRLF that ends a line;
 *  - the head parses as a response: the interim 100 exactly when asked, a
 *    status line with the status given (500 for one out of range), header
 *    lines "token: value", exactly one empty line, at the end;
 *  - the headers out are Server, Date, every valid input header in order
 *    (a valid one is never dropped, an invalid one never written), then
 *    Content-Length with the value given and Connection: close when asked;
 *    the report counts the refused ones;
 *  - the head fits exactly when cap > its length (else 0), never writing
 *    past cap.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/response.h"

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz_response: %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

#define MAX_HDRS 256

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int name_valid(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!is_tchar((unsigned char)*s))
            return 0;
    return 1;
}

static int value_valid(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

/* Expects the literal lit at *p (advancing past it). */
static void expect(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    FUZZ_CHECK((size_t)(end - *p) >= n && memcmp(*p, lit, n) == 0);
    *p += n;
}

/* Reads one line (without its CRLF) at *p. */
static void line(const char **p, const char *end, const char **s, size_t *n)
{
    const char *cr = memmem(*p, (size_t)(end - *p), "\r\n", 2);
    FUZZ_CHECK(cr != NULL);
    *s = *p;
    *n = (size_t)(cr - *p);
    *p = cr + 2;
}

static void expect_header(const char **p, const char *end, const char *name, const char *value)
{
    const char *s;
    size_t n;
    line(p, end, &s, &n);
    size_t nl = strlen(name), vl = strlen(value);
    FUZZ_CHECK(n == nl + 2 + vl && memcmp(s, name, nl) == 0 && memcmp(s + nl, ": ", 2) == 0 &&
               memcmp(s + nl + 2, value, vl) == 0);
}

static void check_head(const char *out, size_t n, int status, unsigned flags,
                       const struct ol_http_hdr *h, size_t nh, uint64_t cl)
{
    /* Bytes: controls only as CRLF. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        if (c == '\r') {
            FUZZ_CHECK(i + 1 < n && out[i + 1] == '\n');
            i++;
            continue;
        }
        FUZZ_CHECK(c != '\n');
        FUZZ_CHECK((c >= 0x20 || c == '\t') && c != 0x7f);
    }
    /* Exactly one empty line (two if an interim response comes first), the
     * last one at the end. */
    FUZZ_CHECK(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0);
    const char *p = out, *end = out + n;
    if (flags & OL_HTTP_HEAD_CONTINUE)
        expect(&p, end, "HTTP/1.1 100 Continue\r\n\r\n");
    FUZZ_CHECK(memmem(p, (size_t)(end - p), "\r\n\r\n", 4) == end - 4);

    const char *s;
    size_t ln;
    line(&p, end, &s, &ln);
    int want = status < 100 || status > 999 ? 500 : status;
    char sl[32];
    int k = snprintf(sl, sizeof(sl), "HTTP/1.1 %d ", want);
    FUZZ_CHECK(ln > (size_t)k && memcmp(s, sl, (size_t)k) == 0);
    FUZZ_CHECK(strlen(ol_http_reason(want)) == ln - (size_t)k &&
               memcmp(s + k, ol_http_reason(want), ln - (size_t)k) == 0);

    line(&p, end, &s, &ln);
    FUZZ_CHECK(ln == 16 && memcmp(s, "Server: OpenLake", 16) == 0);
    line(&p, end, &s, &ln);
    FUZZ_CHECK(ln > 6 && memcmp(s, "Date: ", 6) == 0);
    for (size_t i = 0; i < nh; i++) {
        if (!h[i].value || !name_valid(h[i].name) || !value_valid(h[i].value))
            continue;
        expect_header(&p, end, h[i].name, h[i].value);
    }
    char clv[32];
    snprintf(clv, sizeof(clv), "%llu", (unsigned long long)cl);
    expect_header(&p, end, "Content-Length", clv);
    if (flags & OL_HTTP_HEAD_CLOSE)
        expect_header(&p, end, "Connection", "close");
    expect(&p, end, "\r\n");
    FUZZ_CHECK(p == end);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 11)
        return 0;
    unsigned flags = data[0] & 3u;
    unsigned room = data[0] >> 2;
    int status = (data[1] << 8) | data[2];
    uint64_t cl = 0;
    for (int i = 0; i < 8; i++)
        cl = (cl << 8) | data[3 + i];

    /* The strings, NUL-terminated copies. */
    size_t rest = size - 11;
    char *strs = malloc(rest + 1);
    FUZZ_CHECK(strs != NULL);
    memcpy(strs, data + 11, rest);
    strs[rest] = '\0';
    static struct ol_http_hdr h[MAX_HDRS];
    size_t nh = 0, total = 0, valid = 0, dropped = 0;
    char *q = strs, *qend = strs + rest;
    while (q <= qend && nh < MAX_HDRS) {
        char *name = q;
        q += strlen(q) + 1;
        char *value = q <= qend ? q : NULL;
        if (value)
            q += strlen(q) + 1;
        h[nh].name = strcmp(name, "\xfe") == 0 ? NULL : name;
        h[nh].value = value && strcmp(value, "\xff") != 0 ? value : NULL;
        if (h[nh].value) {
            total += strlen(name) + strlen(h[nh].value) + 4;
            if (name_valid(h[nh].name) && value_valid(h[nh].value))
                valid++;
            else
                dropped++;
        }
        nh++;
    }

    /* Enough room for anything: it must fit. */
    size_t big = total + 256;
    char *out = malloc(big);
    FUZZ_CHECK(out != NULL);
    struct ol_http_head_report rep;
    size_t n = ol_http_format_head(out, big, status, h, nh, cl, flags, &rep);
    FUZZ_CHECK(n > 0 && n < big);
    FUZZ_CHECK(rep.dropped == dropped);
    if (dropped)
        FUZZ_CHECK(rep.first_dropped < nh);
    check_head(out, n, status, flags, h, nh, cl);
    (void)valid;

    /* The fit contract, with exact-size buffers so ASan sees any overrun. */
    size_t caps[3] = {n, n + 1, (size_t)room * (n / 63 + 1)};
    for (int i = 0; i < 3; i++) {
        char *b = malloc(caps[i] ? caps[i] : 1);
        FUZZ_CHECK(b != NULL);
        size_t m = ol_http_format_head(b, caps[i], status, h, nh, cl, flags, NULL);
        if (caps[i] > n) {
            /* The Date may have ticked over between the calls: same length. */
            FUZZ_CHECK(m == n);
            FUZZ_CHECK(memcmp(b, out, 9) == 0);
        } else {
            FUZZ_CHECK(m == 0);
        }
        free(b);
    }
    free(out);
    free(strs);
    return 0;
}
