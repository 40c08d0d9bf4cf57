/* Unit test of the response-head writer (src/http/response.c): the head's
 * layout, headers with control bytes or a bad name left out, and the
 * fit/no-fit contract.  Exits 0 on success, 1 on failure. */
#include "http/response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char out[4096];

static size_t fmt(const struct ol_http_hdr *h, size_t n, unsigned flags,
                  struct ol_http_head_report *rep)
{
    memset(out, 0, sizeof(out));
    return ol_http_format_head(out, sizeof(out), 200, h, n, 42, flags, rep);
}

/* True if no byte below 0x20 but CR, LF (only as CRLF) and HTAB, nor 0x7F, is
 * in s[0..n). */
static int clean(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\r') {
            if (i + 1 >= n || s[i + 1] != '\n')
                return 0;
            i++;
            continue;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

static void test_layout(void)
{
    struct ol_http_hdr h[] = {{"ETag", "\"x\""}, {"x-skip", NULL}, {"x-amz-meta-u", "caf\xc3\xa9"}};
    size_t n = fmt(h, 3, 0, NULL);
    CHECK(n > 0 && n == strlen(out));
    CHECK(strncmp(out, "HTTP/1.1 200 OK\r\nServer: OpenLake\r\nDate: ", 41) == 0);
    CHECK(strstr(out, "\r\nETag: \"x\"\r\nx-amz-meta-u: caf\xc3\xa9\r\nContent-Length: 42\r\n\r\n") !=
          NULL);
    CHECK(strstr(out, "x-skip") == NULL);
    CHECK(strstr(out, "Connection") == NULL);
    n = fmt(h, 1, OL_HTTP_HEAD_CLOSE | OL_HTTP_HEAD_CONTINUE, NULL);
    CHECK(strncmp(out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 42) == 0);
    CHECK(n > 25 && strcmp(out + n - 21, "Connection: close\r\n\r\n") == 0);
    /* Out-of-range statuses become 500. */
    n = ol_http_format_head(out, sizeof(out), 7, NULL, 0, 0, 0, NULL);
    CHECK(n > 0 && strncmp(out, "HTTP/1.1 500 Internal Server Error\r\n", 36) == 0);
}

static void test_injection(void)
{
    struct ol_http_hdr h[] = {
        {"Content-Type", "text/html\r\nSet-Cookie: pwn=1\r\n\r\n<script>"},
        {"A", "cr\rhere"},
        {"B", "lf\nhere"},
        {"C", "nul-free but \x01"},
        {"D", "del\x7f"},
        {"E", "tab\tis fine"},
        {"Bad:Name", "v"},
        {"Bad Name", "v"},
        {"", "empty name"},
        {NULL, "no name"},
        {"N\r\nSet-Cookie", "v"},
        {"F", ""},
    };
    struct ol_http_head_report rep;
    size_t n = fmt(h, sizeof(h) / sizeof(h[0]), 0, &rep);
    CHECK(n > 0);
    CHECK(clean(out, n));
    CHECK(strstr(out, "Set-Cookie") == NULL && strstr(out, "<script>") == NULL);
    CHECK(strstr(out, "Content-Type") == NULL);
    CHECK(strstr(out, "\r\nE: tab\tis fine\r\n") != NULL);
    CHECK(strstr(out, "\r\nF: \r\n") != NULL);
    CHECK(rep.dropped == 10 && rep.first_dropped == 0);
    /* Exactly one empty line, at the end. */
    CHECK(strstr(out, "\r\n\r\n") == out + n - 4);

    CHECK(ol_http_header_name_ok("x-amz-meta-a"));
    CHECK(!ol_http_header_name_ok(""));
    CHECK(!ol_http_header_name_ok("a b"));
    CHECK(!ol_http_header_name_ok("\xc3\xa9"));
    CHECK(ol_http_header_value_ok(""));
    CHECK(ol_http_header_value_ok("a\tb \xff"));
    CHECK(!ol_http_header_value_ok("a\rb"));
    CHECK(!ol_http_header_value_ok("\x1f"));
}

static void test_fit(void)
{
    struct ol_http_hdr h[] = {{"X", "0123456789"}};
    char big[512];
    size_t full = ol_http_format_head(big, sizeof(big), 404, h, 1, 0, 0, NULL);
    CHECK(full > 0);
    /* It fits strictly inside cap, or 0. */
    for (size_t cap = 0; cap <= full + 1; cap++) {
        char *b = malloc(cap ? cap : 1); /* exact size, for ASan */
        size_t n = ol_http_format_head(b, cap, 404, h, 1, 0, 0, NULL);
        CHECK(cap > full ? n == full : n == 0);
        free(b);
    }
}

int main(void)
{
    test_layout();
    test_injection();
    test_fit();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_response: ok\n");
    return 0;
}
