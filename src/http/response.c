/* Response heads: see response.h.
 *
 * The appender below is plain copies and a small integer formatter instead of
 * snprintf, which showed up at ~4 % of a small GET.  Each header is checked
 * in full before any of it is copied, so a refused header leaves no partial
 * line behind.
 */
#include "http/response.h"

#include <string.h>
#include <time.h>

/* Byte classes: H_TOKEN for field names (RFC 9110 5.6.2 tchar), H_VALUE for
 * field values: HTAB, visible ASCII, SP and obs-text (0x80-0xff, which RFC
 * 9110 5.5 lets through and which UTF-8 metadata uses). */
enum { H_TOKEN = 1, H_VALUE = 2 };

static const unsigned char hclass[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    2, 3, 2, 3, 3, 3, 3, 3, 2, 2, 3, 3, 2, 3, 3, 2, /* 0x20 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, /* 0x30 */
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x40 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 3, 3, /* 0x50 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x60 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 3, 2, 3, 0, /* 0x70 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x80 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x90 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xa0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xb0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xc0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xd0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xe0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xf0 */
};

/* Length of s if every byte of it is of class cls, else SIZE_MAX. */
static size_t class_len(const char *s, unsigned char cls)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (p[n]) {
        if (!(hclass[p[n]] & cls))
            return SIZE_MAX;
        n++;
    }
    return n;
}

bool ol_http_header_name_ok(const char *name)
{
    if (!name)
        return false;
    size_t n = class_len(name, H_TOKEN);
    return n != SIZE_MAX && n > 0;
}

bool ol_http_header_value_ok(const char *value)
{
    return value && class_len(value, H_VALUE) != SIZE_MAX;
}

const char *ol_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* The Date header, formatted once a second per thread. */
static const char *http_date_now(size_t *len)
{
    static __thread time_t cached_sec;
    static __thread char cached[40];
    static __thread size_t cached_len;
    time_t now = time(NULL);
    if (now != cached_sec || cached_len == 0) {
        struct tm tm;
        gmtime_r(&now, &tm);
        cached_len = strftime(cached, sizeof(cached), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached_sec = now;
    }
    *len = cached_len;
    return cached;
}

/* A bounded appender: once something does not fit, nothing more is written. */
struct head_buf {
    char *p;
    size_t n, cap;
    bool over;
};

static void hb_put(struct head_buf *b, const char *s, size_t len)
{
    if (b->over || len > b->cap - b->n) {
        b->over = true;
        return;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

static void hb_str(struct head_buf *b, const char *s)
{
    hb_put(b, s, strlen(s));
}

static void hb_u64(struct head_buf *b, uint64_t v)
{
    char t[20];
    size_t i = sizeof(t);
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    hb_put(b, t + i, sizeof(t) - i);
}

/* Appends a string literal (its length known at compile time). */
#define HB_LIT(b, lit) hb_put((b), (lit), sizeof(lit) - 1)

size_t ol_http_format_head(char *out, size_t cap, int status, const struct ol_http_hdr *hdrs,
                           size_t nhdrs, uint64_t content_length, unsigned flags,
                           struct ol_http_head_report *rep)
{
    struct ol_http_head_report r = {0, 0};
    struct head_buf b = {.p = out, .n = 0, .cap = cap, .over = false};
    if (status < 100 || status > 999)
        status = 500;
    size_t dl;
    const char *date = http_date_now(&dl);
    if (flags & OL_HTTP_HEAD_CONTINUE)
        HB_LIT(&b, "HTTP/1.1 100 Continue\r\n\r\n");
    HB_LIT(&b, "HTTP/1.1 ");
    hb_u64(&b, (uint64_t)status);
    HB_LIT(&b, " ");
    hb_str(&b, ol_http_reason(status));
    HB_LIT(&b, "\r\nServer: OpenLake\r\nDate: ");
    hb_put(&b, date, dl);
    HB_LIT(&b, "\r\n");
    for (size_t i = 0; i < nhdrs && !b.over; i++) {
        if (!hdrs[i].value)
            continue;
        size_t nl = hdrs[i].name ? class_len(hdrs[i].name, H_TOKEN) : SIZE_MAX;
        size_t vl = class_len(hdrs[i].value, H_VALUE);
        if (nl == SIZE_MAX || nl == 0 || vl == SIZE_MAX) {
            if (r.dropped++ == 0)
                r.first_dropped = i;
            continue;
        }
        hb_put(&b, hdrs[i].name, nl);
        HB_LIT(&b, ": ");
        hb_put(&b, hdrs[i].value, vl);
        HB_LIT(&b, "\r\n");
    }
    HB_LIT(&b, "Content-Length: ");
    hb_u64(&b, content_length);
    HB_LIT(&b, "\r\n");
    if (flags & OL_HTTP_HEAD_CLOSE)
        HB_LIT(&b, "Connection: close\r\n");
    HB_LIT(&b, "\r\n");
    if (rep)
        *rep = r;
    /* 0 when the head does not fit strictly inside (the old contract). */
    return b.over || b.n >= cap ? 0 : b.n;
}
