/* HTTP/1.1 request-head parser and chunked transfer-coding decoder.
 *
 * The head parser is a single left-to-right pass over the buffered bytes.
 * Every decision it takes depends only on the bytes before the point where it
 * takes it, and running out of bytes anywhere means "partial".  That makes it
 * safe to call again and again as bytes arrive: a verdict given on a prefix
 * (a head length or an error) never changes when more bytes are appended, a
 * property the fuzz target checks.
 *
 * Each line is found with memchr() for its LF, then validated with one tight
 * loop over a byte-class table; nothing in the per-byte loops calls a
 * function.  Only the first max_head_bytes bytes are ever looked at, so a
 * client cannot make a call cost more than that however much it sends.
 */
#include "http/parser.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "core/log.h"

/* Byte classes.  TCHAR: token characters of method and header names (RFC 9110
 * 5.6.2).  TARGET: allowed in the request-target: anything but SP and
 * controls.  VALUE: allowed in a field value: anything but controls, HTAB
 * excepted; obs-text (0x80-0xff) is let through as RFC 9110 5.5 allows. */
enum { C_TCHAR = 1, C_TARGET = 2, C_VALUE = 4 };

static const unsigned char ol_http_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    4, 7, 6, 7, 7, 7, 7, 7, 6, 6, 7, 7, 6, 7, 7, 6, /* 0x20 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, /* 0x30 */
    6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 0x40 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 7, 7, /* 0x50 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 0x60 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 7, 6, 7, 0, /* 0x70 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0x80 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0x90 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xa0 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xb0 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xc0 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xd0 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xe0 */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0xf0 */
};

#define IS(cls, ch) ((ol_http_class[(unsigned char)(ch)] & (cls)) != 0)

/* Internal verdict of a line parser: the line so far is fine but incomplete. */
#define NEED_MORE 1

/* Where the content of a line ends: before its LF, and before a CR right in
 * front of it.  For a line whose LF has not arrived yet, a CR as the last
 * available byte may still turn out to be the CR of a CRLF, so it is left out
 * too; every other CR stays in the content, where it is a control character
 * and therefore rejected (a bare CR). */
static const char *line_content_end(const char *p, const char *lf, const char *end)
{
    const char *e = lf ? lf : end;
    if (e > p && e[-1] == '\r')
        e--;
    return e;
}

/* Parses "method SP request-target SP HTTP/1.x" in [p, lim).  complete says
 * whether the line's end has been seen; if not, running out of bytes gives
 * NEED_MORE. */
static int parse_request_line(const char *p, const char *lim, bool complete,
                              const struct ol_http_limits *limits, struct ol_http_request *req)
{
    const char *s = p;
    while (s < lim && IS(C_TCHAR, *s))
        s++;
    if (s == lim)
        return complete ? OL_HTTP_EBAD : NEED_MORE;
    if (s == p || *s != ' ')
        return OL_HTTP_EBAD;
    req->method.p = p;
    req->method.n = (size_t)(s - p);
    s++;

    /* The scan stops one byte past the limit, so that a long target is
     * rejected as soon as that byte arrives instead of when its line ends. */
    const char *t = s;
    size_t room = (size_t)(lim - t);
    const char *tlim = room > limits->max_target_bytes ? t + limits->max_target_bytes + 1 : lim;
    while (s < tlim && IS(C_TARGET, *s))
        s++;
    if ((size_t)(s - t) > limits->max_target_bytes)
        return OL_HTTP_EURI_TOO_LONG;
    if (s == lim)
        return complete ? OL_HTTP_EBAD : NEED_MORE;
    if (s == t || *s != ' ')
        return OL_HTTP_EBAD;
    req->target.p = t;
    req->target.n = (size_t)(s - t);
    s++;

    /* The version: exactly "HTTP/" DIGIT "." DIGIT, then the line's end. */
    static const char pattern[] = "HTTP/d.d";
    size_t vn = (size_t)(lim - s);
    size_t check = vn < 8 ? vn : 8;
    for (size_t i = 0; i < check; i++) {
        bool ok = pattern[i] == 'd' ? (s[i] >= '0' && s[i] <= '9') : s[i] == pattern[i];
        if (!ok)
            return OL_HTTP_EBAD;
    }
    if (vn > 8)
        return OL_HTTP_EBAD;
    if (vn < 8 || !complete)
        return complete ? OL_HTTP_EBAD : NEED_MORE;
    if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
        return OL_HTTP_EVERSION;
    req->minor_version = s[7] - '0';

    const char *q = memchr(t, '?', req->target.n);
    req->path.p = t;
    req->path.n = q ? (size_t)(q - t) : req->target.n;
    req->query.p = q ? q + 1 : t + req->target.n;
    req->query.n = q ? req->target.n - req->path.n - 1 : 0;
    return 0;
}

/* Parses "name: value" in [p, lim); see parse_request_line for complete. */
static int parse_header_line(const char *p, const char *lim, bool complete,
                             struct ol_http_header *h)
{
    const char *s = p;
    while (s < lim && IS(C_TCHAR, *s))
        s++;
    if (s == lim)
        return complete ? OL_HTTP_EBAD : NEED_MORE;
    /* An empty name, or anything but ':' after it (a space before the colon
     * included: RFC 9112 5.1 says to reject it). */
    if (s == p || *s != ':')
        return OL_HTTP_EBAD;
    h->name.p = p;
    h->name.n = (size_t)(s - p);
    s++;
    while (s < lim && (*s == ' ' || *s == '\t'))
        s++;
    const char *v = s;
    while (s < lim && IS(C_VALUE, *s))
        s++;
    if (s != lim)
        return OL_HTTP_EBAD; /* a control character, NUL and bare CR included */
    if (!complete)
        return NEED_MORE;
    while (s > v && (s[-1] == ' ' || s[-1] == '\t'))
        s--;
    h->value.p = v;
    h->value.n = (size_t)(s - v);
    return 0;
}

int ol_http_parse_request(const char *buf, size_t len, const struct ol_http_limits *limits,
                          struct ol_http_request *req)
{
    OL_ASSERT(limits != NULL && req != NULL);
    OL_ASSERT(buf != NULL || len == 0);
    OL_ASSERT(req->headers != NULL || limits->max_headers == 0);

    /* Only the first max_head_bytes bytes can belong to an acceptable head.
     * The cap at INT_MAX keeps the returned length representable. */
    size_t cap = limits->max_head_bytes < (size_t)INT_MAX ? limits->max_head_bytes : INT_MAX;
    bool clipped = len > cap;
    int rc;

    req->nheaders = 0;
    req->minor_version = -1;
    if (len == 0)
        return OL_HTTP_PARTIAL; /* buf may be NULL: no pointer arithmetic on it */
    const char *p = buf;
    const char *end = buf + (clipped ? cap : len);

    /* Empty lines before the request line (left over after a previous body,
     * RFC 9112 2.2).  They count against max_head_bytes, which bounds them. */
    for (;;) {
        if (p == end)
            goto need_more;
        if (*p == '\n') {
            p++;
            continue;
        }
        if (*p != '\r')
            break;
        if (p + 1 == end)
            goto need_more;
        if (p[1] != '\n')
            return OL_HTTP_EBAD;
        p += 2;
    }

    const char *lf = memchr(p, '\n', (size_t)(end - p));
    rc = parse_request_line(p, line_content_end(p, lf, end), lf != NULL, limits, req);
    if (rc == NEED_MORE)
        goto need_more;
    if (rc < 0)
        return rc;
    OL_ASSERT(lf != NULL);
    p = lf + 1;

    /* Header lines until the empty line.  Each pass consumes a whole line of
     * at least one byte, so the loop is bounded by the window's length. */
    for (;;) {
        if (p == end)
            goto need_more;
        if (*p == '\n')
            return (int)(p + 1 - buf);
        if (*p == '\r') {
            if (p + 1 == end)
                goto need_more;
            if (p[1] != '\n')
                return OL_HTTP_EBAD;
            return (int)(p + 2 - buf);
        }
        /* Leading whitespace is obs-fold (or whitespace before the first
         * header), which RFC 9112 5.2 lets a server reject: we do, because
         * proxies disagree on how to unfold it. */
        if (*p == ' ' || *p == '\t')
            return OL_HTTP_EBAD;
        if (req->nheaders >= limits->max_headers)
            return OL_HTTP_ETOO_MANY_HEADERS;
        lf = memchr(p, '\n', (size_t)(end - p));
        rc = parse_header_line(p, line_content_end(p, lf, end), lf != NULL,
                               &req->headers[req->nheaders]);
        if (rc == NEED_MORE)
            goto need_more;
        if (rc < 0)
            return rc;
        OL_ASSERT(lf != NULL);
        req->nheaders++;
        p = lf + 1;
    }

need_more:
    /* Out of bytes without a verdict: wait for more, unless the window was
     * cut short by the limit, in which case more bytes cannot help. */
    return clipped ? OL_HTTP_EHEAD_TOO_LARGE : OL_HTTP_PARTIAL;
}

const struct ol_slice *ol_http_find_header(const struct ol_http_request *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct ol_slice *h = &req->headers[i].name;
        if (h->n != n)
            continue;
        size_t j = 0;
        /* ASCII case folding by hand: strncasecmp depends on the locale. */
        for (; j < n; j++) {
            unsigned char a = (unsigned char)h->p[j], b = (unsigned char)name[j];
            if (a >= 'A' && a <= 'Z')
                a = (unsigned char)(a + 32);
            if (b >= 'A' && b <= 'Z')
                b = (unsigned char)(b + 32);
            if (a != b)
                break;
        }
        if (j == n)
            return &req->headers[i].value;
    }
    return NULL;
}

int ol_http_parse_content_length(struct ol_slice v, uint64_t *out)
{
    /* Values above INT64_MAX are refused too: no object is that large, and
     * callers convert lengths to off_t. */
    const uint64_t max = (uint64_t)INT64_MAX;
    uint64_t x = 0;
    if (v.n == 0)
        return -1;
    for (size_t i = 0; i < v.n; i++) {
        unsigned d = (unsigned)((unsigned char)v.p[i] - '0');
        if (d > 9)
            return -1;
        if (x > (max - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}

/* Chunked decoding (RFC 9112 7.1).  A byte-at-a-time state machine for the
 * framing lines, and memmove for data, so that the verdict and the output do
 * not depend on how the stream is split into calls.  Line terminators must be
 * CRLF here: unlike the head, a body whose framing two parsers read
 * differently is a request-smuggling vector, so nothing lax is accepted. */
enum {
    CK_SIZE0 = 0,   /* first hex digit of a chunk size */
    CK_SIZE,        /* more hex digits */
    CK_BWS,         /* whitespace after the size */
    CK_EXT,         /* chunk extensions after ';' */
    CK_SIZE_LF,     /* LF ending the chunk line */
    CK_DATA,        /* chunk data */
    CK_DATA_CR,     /* CR after chunk data */
    CK_DATA_LF,     /* LF after chunk data */
    CK_TRAILER,     /* start of a trailer line, or of the final empty line */
    CK_TRAILER_NAME,
    CK_TRAILER_VALUE,
    CK_TRAILER_LF,
    CK_END_LF,      /* LF of the final empty line */
    CK_DONE,
    CK_ERROR,       /* sticky: a malformed stream stays malformed */
};

#define OL_CHUNK_SIZE_MAX (UINT64_C(1) << 60)
#define OL_CHUNK_DIGITS_MAX 16
#define OL_CHUNK_LINE_MAX 4096     /* one chunk line, extensions included */
#define OL_CHUNK_TRAILER_MAX 16384 /* the whole trailer section */

static int hex_value(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch |= 0x20;
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

ssize_t ol_http_chunked_decode(struct ol_http_chunked *c, char *buf, size_t *len)
{
    OL_ASSERT(c != NULL && len != NULL);
    OL_ASSERT(buf != NULL || *len == 0);
    OL_ASSERT(*len <= (size_t)SSIZE_MAX);

    size_t in = 0, out = 0, n = *len;
    ssize_t ret;

    if (c->state == CK_ERROR)
        goto fail;
    /* Each pass consumes at least one byte or stops, so the loop ends. */
    while (in < n && c->state != CK_DONE) {
        if (c->state == CK_DATA) {
            size_t take = n - in;
            if (take > c->remaining)
                take = (size_t)c->remaining;
            if (out != in)
                memmove(buf + out, buf + in, take);
            in += take;
            out += take;
            c->remaining -= take;
            if (c->remaining == 0)
                c->state = CK_DATA_CR;
            continue;
        }

        unsigned char ch = (unsigned char)buf[in++];
        /* Framing lines are bounded: the chunk line by OL_CHUNK_LINE_MAX,
         * the trailer section as a whole by OL_CHUNK_TRAILER_MAX. */
        if (c->state >= CK_TRAILER && c->state <= CK_END_LF) {
            if (++c->line_bytes > OL_CHUNK_TRAILER_MAX)
                goto fail;
        } else if (c->state <= CK_SIZE_LF) {
            if (++c->line_bytes > OL_CHUNK_LINE_MAX)
                goto fail;
        }

        switch (c->state) {
        case CK_SIZE0:
        case CK_SIZE: {
            int d = hex_value(ch);
            if (d >= 0) {
                /* line_bytes counts the digits so far, this one included. */
                if (c->line_bytes > OL_CHUNK_DIGITS_MAX)
                    goto fail;
                if (c->remaining > (OL_CHUNK_SIZE_MAX - (unsigned)d) >> 4)
                    goto fail;
                c->remaining = (c->remaining << 4) | (unsigned)d;
                c->state = CK_SIZE;
                break;
            }
            if (c->state == CK_SIZE0)
                goto fail; /* no digits at all */
            if (ch == ' ' || ch == '\t')
                c->state = CK_BWS;
            else if (ch == ';')
                c->state = CK_EXT;
            else if (ch == '\r')
                c->state = CK_SIZE_LF;
            else
                goto fail;
            break;
        }
        case CK_BWS:
            if (ch == ';')
                c->state = CK_EXT;
            else if (ch == '\r')
                c->state = CK_SIZE_LF;
            else if (ch != ' ' && ch != '\t')
                goto fail;
            break;
        case CK_EXT:
            /* Extensions are ignored (aws-chunked puts its chunk signature
             * here and reads it from the raw stream); they only have to be
             * free of control characters. */
            if (ch == '\r')
                c->state = CK_SIZE_LF;
            else if (!IS(C_VALUE, ch))
                goto fail;
            break;
        case CK_SIZE_LF:
            if (ch != '\n')
                goto fail;
            c->line_bytes = 0;
            c->state = c->remaining ? CK_DATA : CK_TRAILER;
            break;
        case CK_DATA_CR:
            if (ch != '\r')
                goto fail;
            c->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (ch != '\n')
                goto fail;
            c->state = CK_SIZE0;
            break;
        case CK_TRAILER:
            if (ch == '\r')
                c->state = CK_END_LF;
            else if (IS(C_TCHAR, ch))
                c->state = CK_TRAILER_NAME;
            else
                goto fail; /* bare LF, obs-fold, or not a field name */
            break;
        case CK_TRAILER_NAME:
            if (ch == ':')
                c->state = CK_TRAILER_VALUE;
            else if (!IS(C_TCHAR, ch))
                goto fail;
            break;
        case CK_TRAILER_VALUE:
            if (ch == '\r')
                c->state = CK_TRAILER_LF;
            else if (!IS(C_VALUE, ch))
                goto fail;
            break;
        case CK_TRAILER_LF:
            if (ch != '\n')
                goto fail;
            c->state = CK_TRAILER;
            break;
        case CK_END_LF:
            if (ch != '\n')
                goto fail;
            c->line_bytes = 0;
            c->state = CK_DONE;
            break;
        default:
            ol_panic(__FILE__, __LINE__, "bad chunked decoder state");
        }
    }
    OL_ASSERT(out <= in && in <= n);
    *len = out;
    ret = (ssize_t)in;
    goto out;

fail:
    c->state = CK_ERROR;
    *len = out;
    ret = -1;
out:
    return ret;
}

int ol_http_chunked_done(const struct ol_http_chunked *c)
{
    return c->state == CK_DONE;
}
