/* The one writer of HTTP/1.1 response heads.
 *
 * Every response head the server sends is formatted here, so this is where
 * header injection is stopped whatever the source of a value (a request's
 * response-* override, stored object metadata, a CORS configuration, an
 * error message): a header whose name is not an RFC 9110 token, or whose
 * value holds a byte below 0x20 other than HTAB, or 0x7F, is left out of the
 * head.  No CR, LF, NUL or other control byte can therefore reach a response
 * head except as the CRLF that ends each line.  Leaving the one bad header out
 * (rather than failing the response) keeps an object with a bad stored value
 * readable.
 *
 * The writer is pure (no I/O, no allocation): the connection code calls it
 * and the fuzz target fuzz_response drives it directly.
 */
#ifndef OL_HTTP_RESPONSE_H
#define OL_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A response header: both strings NUL-terminated and borrowed for the call.
 * A NULL value means "no such header" and is skipped silently. */
struct ol_http_hdr {
    const char *name;
    const char *value;
};

enum {
    OL_HTTP_HEAD_CLOSE = 1u << 0,    /* add "Connection: close" */
    OL_HTTP_HEAD_CONTINUE = 1u << 1, /* put an interim "100 Continue" response first */
};

/* What ol_http_format_head left out. */
struct ol_http_head_report {
    size_t dropped;       /* headers refused (bad name or value) */
    size_t first_dropped; /* index in hdrs of the first one refused */
};

/* Formats a complete response head into out[0..cap): the status line, Server
 * and Date, hdrs in order (those refused left out), Content-Length:
 * content_length, Connection: close if flags ask, and the empty line.  A
 * status outside 100..999 is sent as 500.  Returns the head's length, or 0
 * when it does not fit strictly inside cap (out's contents are then
 * unspecified; call again with more room).  rep may be NULL. */
size_t ol_http_format_head(char *out, size_t cap, int status, const struct ol_http_hdr *hdrs,
                           size_t nhdrs, uint64_t content_length, unsigned flags,
                           struct ol_http_head_report *rep);

/* True if name is a non-empty RFC 9110 token (what a field name must be). */
bool ol_http_header_name_ok(const char *name);
/* True if value holds no byte below 0x20 other than HTAB, and no 0x7F. */
bool ol_http_header_value_ok(const char *value);

/* The reason phrase for a status ("Unknown" for those not in the table). */
const char *ol_http_reason(int status);

#endif
