/* One HTTP/1.1 connection, served by one fiber on one loop.
 *
 * The connection fiber reads request heads into its buffer, parses them
 * (parser.h), hands each request to the handler and, when the handler
 * returns, skips what is left of the body and goes on with the next request
 * (keep-alive, pipelining).  Bodies stream through ol_http_body_read() in
 * pieces; responses go out through ol_http_respond() or, for streamed bodies,
 * ol_http_resp_begin()/ol_http_resp_write().  Nothing here holds a whole body
 * in memory.
 *
 * Expect: 100-continue is answered by the first ol_http_body_read() (a
 * handler that rejects the request without reading the body never sends it).
 * Timeouts: the idle timeout bounds the wait for a request's first byte;
 * the header timeout bounds the whole head; the slow-client timeout bounds
 * each wait for body bytes or send progress, and the minimum body rate the
 * body as a whole.
 *
 * Memory: a connection waiting for a request holds no receive buffer (it
 * waits for readability, then takes one) and gives its stack's unused pages
 * back, so an idle connection costs a few KiB.  While it waits it is on its
 * loop's idle list (core/loop.h), from which the accept path closes the
 * oldest when the loop runs out of connection slots.
 */
#ifndef OL_HTTP_CONN_H
#define OL_HTTP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/parser.h"
#include "http/response.h"

struct ol_http_conn;
struct ol_tls_conf;

struct ol_http_conn_opts {
    struct ol_http_limits limits;
    unsigned idle_timeout_ms;
    unsigned io_timeout_ms;
    /* The whole request head must arrive within this of accept (a
     * connection's first request) or of its first byte (later ones): a head
     * trickled a byte at a time holds its slot no longer.  0 = no limit. */
    unsigned header_timeout_ms;
    /* Slow bodies: once a body has kept the server waiting body_rate_grace_ms
     * in all, every further body_rate_window_ms of waiting must bring at
     * least min_body_rate_bytes_per_sec; a slower body fails with
     * -ETIMEDOUT.  Only time spent waiting on the socket counts, so a slow
     * drive never makes its client look slow.  0 = off. */
    uint64_t min_body_rate_bytes_per_sec;
    unsigned body_rate_grace_ms;
    unsigned body_rate_window_ms;
    size_t buf_bytes;  /* receive buffer: must hold max_head_bytes plus room */
    /* Write fencing (a cluster node, cluster/member.h): when set, a success
     * (< 300) answer to a PUT, POST or DELETE is sent only while this says
     * true, checked right before the head is built; otherwise the client
     * gets 503 ServiceUnavailable instead (and the connection closes after
     * a streamed answer).  NULL: no fence.  Called on the loop thread; must
     * be cheap and never block. */
    bool (*may_ack_write)(void);
    /* HTTPS (http/tls.h): when set, every connection served with these
     * options starts with a TLS handshake (with conf's certificate at that
     * moment), which must end header_timeout_ms after accept like a first
     * request head; then requests, bodies and responses go through TLS, and
     * ol_http_resp_sendfile reads and encrypts instead of sendfile(2).  A
     * client whose first bytes are not TLS (plain HTTP) gets a plain 400 and
     * the connection closes.  NULL: plain HTTP.  Not owned. */
    struct ol_tls_conf *tls;
};

/* The request as the handler sees it. */
struct ol_http_req {
    /* Slices into the connection's receive buffer.  They stay valid, with
     * their bytes, until the handler returns: reading the body never moves
     * the head (conn.c pins it). */
    struct ol_http_request head;
    bool has_body;
    bool chunked;                 /* Transfer-Encoding: chunked */
    uint64_t content_length;      /* valid when !chunked */
    bool expect_continue;
    bool keep_alive;              /* after this request */
    bool is_head;                 /* HEAD: responses carry no body */
    /* The request came over TLS (opts.tls): what aws:SecureTransport means
     * to a bucket policy.  Set for every request of the connection. */
    bool secure;
    char remote[64];              /* peer address, for logs */
};

/* The handler: called once per request on the connection's fiber.  It must
 * send exactly one response (ol_http_respond, or resp_begin + writes).  It
 * returns 0, or a negative error if the connection must be closed (the
 * response could not be completed). */
typedef int (*ol_http_handler)(void *ctx, struct ol_http_conn *c, struct ol_http_req *req);

/* Serves one accepted socket until the peer closes, an error, a timeout or
 * shutdown.  Closes fd.  Runs in a fiber. */
void ol_http_conn_serve(int fd, const struct ol_http_conn_opts *opts, ol_http_handler handler,
                        void *ctx);

/* Reads up to len body bytes (decoding chunked framing).  Returns the count,
 * 0 at the end of the body, or a negative errno (-ETIMEDOUT, -ECONNRESET,
 * -EPROTO for broken framing).  Sends 100 Continue first when asked for. */
ssize_t ol_http_body_read(struct ol_http_conn *c, void *buf, size_t len);
/* Reads exactly len bytes unless the body ends first; returns bytes read. */
ssize_t ol_http_body_read_full(struct ol_http_conn *c, void *buf, size_t len);
/* True when the body has been read to its end. */
bool ol_http_body_done(const struct ol_http_conn *c);
/* True when reading the body failed (the client stalled, was slower than the
 * minimum body rate, closed, or broke the framing): the client's fault, not
 * the server's. */
bool ol_http_body_failed(const struct ol_http_conn *c);

/* Sends a complete response with a body from memory.  Adds Date, Server,
 * Content-Length and Connection headers.  For HEAD, the body is not sent but
 * Content-Length still describes it (pass body_len with body NULL).
 * Headers are written by ol_http_format_head (response.h): one with a name
 * that is not a token or a control byte in its value is left out (and
 * logged).  A head larger than the request-head limit plus 8 KiB cannot be
 * sent: then a bare 500 goes out instead, the connection closes after it
 * and -E2BIG is returned (likewise -ENOMEM). */
int ol_http_respond(struct ol_http_conn *c, int status, const struct ol_http_hdr *hdrs,
                    size_t nhdrs, const void *body, size_t body_len);
/* Starts a streamed response of content_length bytes; then write them all.
 * Headers and failures as for ol_http_respond. */
int ol_http_resp_begin(struct ol_http_conn *c, int status, const struct ol_http_hdr *hdrs,
                       size_t nhdrs, uint64_t content_length);
int ol_http_resp_write(struct ol_http_conn *c, const void *buf, size_t len);
/* Sends up to len body bytes straight from file fd at off (sendfile(2); the
 * range should be in the page cache): the count sent (> 0, maybe fewer than
 * len), or a negative errno. */
ssize_t ol_http_resp_sendfile(struct ol_http_conn *c, int fd, uint64_t off, size_t len);
/* True once a response has started (a handler that fails after this must
 * return an error so the connection is closed). */
bool ol_http_resp_started(const struct ol_http_conn *c);
/* Forces Connection: close after this response. */
void ol_http_set_close(struct ol_http_conn *c);

#endif
