/* A stateless, zero-copy, incremental HTTP/1.1 request-head parser.
 *
 * The caller keeps the bytes received so far in one buffer and calls
 * ol_http_parse_request() each time more arrive.  The parser either finds a
 * complete request head (request line + headers + empty line), reports that
 * more bytes are needed, or rejects the input.  It keeps no state between
 * calls and allocates nothing: every string it returns is a (ptr, len) slice
 * into the caller's buffer, valid as long as that buffer is.
 *
 * Limits are enforced here so that a hostile client cannot make the server
 * buffer or scan without bound.
 *
 * Also: a chunked transfer-encoding decoder (incremental, state in a small
 * struct owned by the caller).
 */
#ifndef OL_HTTP_PARSER_H
#define OL_HTTP_PARSER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ol_slice {
    const char *p;
    size_t n;
};

struct ol_http_header {
    struct ol_slice name;  /* as sent (compare case-insensitively) */
    struct ol_slice value; /* leading/trailing spaces and tabs removed */
};

struct ol_http_limits {
    size_t max_head_bytes;   /* request line + headers, including CRLFs */
    size_t max_headers;      /* header lines */
    size_t max_target_bytes; /* request-target (URL) length */
};

struct ol_http_request {
    struct ol_slice method;
    struct ol_slice target;  /* raw request-target: path plus optional ?query */
    struct ol_slice path;    /* target up to '?' (still percent-encoded) */
    struct ol_slice query;   /* after '?', without it; n == 0 if none */
    int minor_version;       /* HTTP/1.<minor>: 0 or 1 */
    struct ol_http_header *headers; /* caller-provided array of max_headers */
    size_t nheaders;
};

/* Results of ol_http_parse_request (besides a positive head length). */
enum {
    OL_HTTP_PARTIAL = 0,          /* need more bytes */
    OL_HTTP_EBAD = -1,            /* malformed -> 400 */
    OL_HTTP_EHEAD_TOO_LARGE = -2, /* head over max_head_bytes -> 431 */
    OL_HTTP_ETOO_MANY_HEADERS = -3, /* -> 431 */
    OL_HTTP_EURI_TOO_LONG = -4,   /* -> 414 */
    OL_HTTP_EVERSION = -5,        /* not HTTP/1.x -> 505 */
};

/* Parses buf[0..len).  req->headers must point at an array of
 * limits->max_headers entries.  Returns the length of the complete head
 * (> 0), OL_HTTP_PARTIAL, or a negative OL_HTTP_E* code.  Leading empty lines
 * (CRLF between pipelined requests) are tolerated as RFC 9112 allows; they
 * count in the returned length and against max_head_bytes.
 *
 * Verdicts are final: once a prefix of the stream yields a head length or an
 * error, every longer buffer starting with that prefix yields the same (the
 * parser reads left to right and decides each thing from the bytes before it).
 * OL_HTTP_EHEAD_TOO_LARGE comes as soon as len > max_head_bytes and the first
 * max_head_bytes bytes hold no complete head; bytes past that are never read.
 * Lines may end in CRLF or a bare LF; a CR anywhere else, NUL and other
 * control characters (HTAB in values excepted), obs-fold and whitespace
 * before ':' are OL_HTTP_EBAD.  A well-formed HTTP/x.y other than 1.0 and 1.1
 * is OL_HTTP_EVERSION.  On success every field of *req is set; otherwise
 * its contents are unspecified. */
int ol_http_parse_request(const char *buf, size_t len, const struct ol_http_limits *limits,
                          struct ol_http_request *req);

/* Case-insensitive header lookup; returns NULL if absent. */
const struct ol_slice *ol_http_find_header(const struct ol_http_request *req, const char *name);

/* Parses a Content-Length value strictly (one or more digits only: no sign,
 * space or list; at most INT64_MAX).  Returns 0 and *out, or -1. */
int ol_http_parse_content_length(struct ol_slice v, uint64_t *out);

/* Incremental chunked-body decoder.  Zero-initialise before the first call. */
struct ol_http_chunked {
    uint64_t remaining;   /* data bytes left in the current chunk */
    int state;            /* private */
    unsigned line_bytes;  /* private: length of the chunk line so far (bounded) */
};
/* Decodes in place: consumes bytes from buf[0..*len), moves the data bytes to
 * the front of buf and sets *len to their count.  Returns the number of input
 * bytes consumed (the caller keeps the unconsumed tail for the next call),
 * or -1 on a malformed stream.  ol_http_chunked_done() says whether the final
 * zero chunk and its trailer have been consumed.
 *
 * Until the body ends every input byte is consumed (partial framing lines are
 * remembered in the struct); once it ends, the bytes after it (a pipelined
 * request) are left unconsumed and later calls consume nothing.  The output
 * does not depend on how the stream is split into calls.  Framing lines must
 * end in CRLF; chunk sizes are at most 16 hex digits and 2^60; a chunk line
 * (size and extensions) is at most 4096 bytes, the trailer section 16 KiB.
 * On -1, *len holds the data decoded before the error; the error is sticky. */
ssize_t ol_http_chunked_decode(struct ol_http_chunked *c, char *buf, size_t *len);
int ol_http_chunked_done(const struct ol_http_chunked *c);

#endif
