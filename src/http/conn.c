/* The HTTP/1.1 connection state machine (one fiber per connection).
 *
 * Buffering: one receive buffer per connection holds the request head and
 * whatever body bytes arrived with it.  Body bytes beyond that are received
 * straight into the handler's buffer when the body has a Content-Length, so
 * a large PUT is copied once (socket -> handler buffer).  Chunked bodies go
 * through the receive buffer and are decoded in place, behind the request's
 * head: the head's bytes stay where they are until the request ends (see
 * pin), because the handler holds slices into them while it reads the body.
 */
#include "http/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"

/* Idle waits are cut into slices so a connection notices shutdown quickly. */
#define IDLE_SLICE_MS 250u
/* A handler that leaves more unread body than this makes us close instead of
 * reading and discarding it. */
#define DRAIN_MAX_BYTES (1u << 20)
/* Lingering close, as nginx's lingering_close: a connection closed with
 * unread request bytes makes the kernel send a reset, and a reset that
 * reaches the client before it reads the response destroys the response
 * (the client sees "connection reset" instead of the 404 or 500 sent to
 * it).  So a connection closed after answering before the body's end first
 * shuts down its sending side (the client sees the response, then FIN) and
 * reads and discards what still comes, until the client closes or one of
 * these bounds: bytes discarded, the wait for the next bytes
 * (lingering_timeout) and the whole linger (lingering_time). */
#define LINGER_MAX_BYTES (64u << 20)
#define LINGER_WAIT_MS 5000u
#define LINGER_TIME_MS 30000u

struct ol_http_conn {
    int fd;
    const struct ol_http_conn_opts *opts;
    char *buf;
    size_t cap;
    size_t rstart, rend;      /* unconsumed received bytes: buf[rstart, rend) */
    /* buf[0, pin) must not move: while a request is served it ends at the
     * end of the request's head, whose slices (req.head) point into it for
     * the whole request; between requests it is 0. */
    size_t pin;
    struct ol_http_req req;
    struct ol_http_header *headers;
    /* body */
    uint64_t body_left;       /* Content-Length bodies: bytes not yet read */
    struct ol_http_chunked chunked;
    bool body_done;
    bool continue_sent;
    bool body_error;
    /* response */
    bool resp_started;
    uint64_t resp_left;
    bool close_after;
    bool send_error;
    bool send_stalled;        /* a send timed out: close with a reset (send_failed) */
    bool nonblocking;         /* O_NONBLOCK set, for sendfile (ol_http_resp_sendfile) */
    /* A streamed response's head waits here for the first body bytes, so
     * head and body leave in one sendmsg (one ring operation, one TCP
     * segment for a small object) instead of two. */
    char *head;
    size_t head_len;
    size_t head_cap;          /* bytes allocated at head (0: none) */
    /* Connection slots and memory (see read_head and rbuf_take). */
    struct ol_idle idle;      /* on the loop's idle list while waiting for a head */
    uint64_t accepted_ms;     /* when the fiber started, about when accepted */
    uint64_t nreq;            /* requests served */
    /* The minimum body rate (body_recv): waiting time and bytes so far in
     * the current window, and whether the grace period is over. */
    uint64_t rate_wait_ms;
    uint64_t rate_bytes;
    bool rate_graced;
    /* The minimum rate of the current response (send_pace); t0_ms 0
     * until its first byte. */
    struct ol_io_pace resp_pace;
};

/* Response heads are formatted into a buffer allocated for the request and
 * freed when it ends, so an idle connection holds none.  Most heads fit the
 * small size (a malloc served from the thread cache); one that does not is
 * formatted again into the largest size a head may need: everything a
 * request could have stored (its whole head, max_head_bytes) plus the
 * server's own headers (status line, Date, ETag, checksums, CORS, ...). */
#define HEAD_SMALL_BYTES 1024u
#define HEAD_OWN_BYTES (8u * 1024u)

static bool slice_ieq(struct ol_slice s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

/* True if a comma-separated header value contains the token (case-insensitive). */
static bool has_token(const struct ol_slice *v, const char *tok)
{
    if (!v)
        return false;
    size_t tl = strlen(tok);
    const char *p = v->p, *end = v->p + v->n;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *s = p;
        while (p < end && *p != ',')
            p++;
        const char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - s) == tl && strncasecmp(s, tok, tl) == 0)
            return true;
    }
    return false;
}

/* The minimum data rate, for responses: min_body_rate_bytes_per_sec over
 * the whole response, with body_rate_grace_ms of slack (struct ol_io_pace),
 * from its first byte.  A reader that takes a byte now and then keeps every
 * single wait under io_timeout_ms, and so would hold its response's buffers
 * (and its share of the body memory budget) for ever; it is cut here, as a
 * slow body is in body_recv.  A reader at the rate or faster never is,
 * whatever the size.  NULL when the rate is off. */
static struct ol_io_pace *send_pace(struct ol_http_conn *c)
{
    const struct ol_http_conn_opts *o = c->opts;
    if (!o->min_body_rate_bytes_per_sec)
        return NULL;
    if (!c->resp_pace.t0_ms)
        c->resp_pace = (struct ol_io_pace){.t0_ms = ol_now_ms(),
                                           .slack_ms = o->body_rate_grace_ms,
                                           .bytes_per_sec = o->min_body_rate_bytes_per_sec};
    return &c->resp_pace;
}

/* A send failed: the connection is done.  When the reader was too slow
 * (a timeout), what the kernel still holds for it, up to the socket's send
 * buffer (4 MiB on Linux by default), is dropped with a reset at close
 * instead of trickling out after a FIN: a cut reader must not keep the
 * memory it was cut for. */
static void send_failed(struct ol_http_conn *c, ssize_t err)
{
    c->send_error = true;
    if (err == -ETIMEDOUT)
        c->send_stalled = true;
}

/* Sends iov[0..n) (n <= 2), preceded by a pending response head if there
 * is one.  Returns the bytes of iov sent, or a negative errno. */
static ssize_t send_all(struct ol_http_conn *c, struct iovec *iov, int n)
{
    if (c->send_error)
        return -EPIPE;
    OL_ASSERT(n >= 0 && n <= 2);
    struct iovec all[3];
    int k = 0;
    size_t head = c->head_len;
    if (head) {
        all[k++] = (struct iovec){.iov_base = c->head, .iov_len = head};
        c->head_len = 0;
    }
    for (int i = 0; i < n; i++)
        all[k++] = iov[i];
    ssize_t rc = ol_io_sendmsg_paced(c->fd, all, k, 0, (unsigned)c->opts->io_timeout_ms,
                                     send_pace(c));
    if (rc < 0) {
        send_failed(c, rc);
        return rc;
    }
    return rc - (ssize_t)head;
}

/* Sends the pending response head, if any (a streamed response whose body
 * was never written). */
static void flush_head(struct ol_http_conn *c)
{
    if (c->head_len)
        send_all(c, NULL, 0);
}

/* Sends a bare response (no body, Connection: close), for a request that
 * never reached a handler or one whose own response could not be built. */
static void send_simple(struct ol_http_conn *c, int status)
{
    char head[256];
    size_t n = ol_http_format_head(head, sizeof(head), status, NULL, 0, 0, OL_HTTP_HEAD_CLOSE,
                                   NULL);
    OL_ASSERT(n > 0);
    struct iovec iov = {.iov_base = head, .iov_len = n};
    send_all(c, &iov, 1);
}

/* Formats a response head into c->head (allocated here; end_request frees
 * it).  Returns its length, -E2BIG if it does not fit even the largest size,
 * or -ENOMEM. */
static ssize_t make_head(struct ol_http_conn *c, int status, const struct ol_http_hdr *hdrs,
                         size_t nhdrs, uint64_t content_length)
{
    OL_ASSERT(c->head_len == 0);
    /* A client that sent Expect: 100-continue with an empty body still waits
     * for the interim response; some (botocore 1.29) then misread the next
     * response on the connection if it never came.  Sending it first is
     * always allowed. */
    bool interim = c->req.expect_continue && !c->continue_sent && !c->req.has_body;
    unsigned flags = interim ? OL_HTTP_HEAD_CONTINUE : 0;
    /* A response before the end of a body too large to drain: the
     * connection will close (with a lingering close), and says so. */
    if (c->req.has_body && !c->body_done && !c->req.chunked && c->body_left > DRAIN_MAX_BYTES)
        c->close_after = true;
    if (!c->req.keep_alive || c->close_after)
        flags |= OL_HTTP_HEAD_CLOSE;
    size_t sizes[2] = {HEAD_SMALL_BYTES, c->opts->limits.max_head_bytes + HEAD_OWN_BYTES};
    struct ol_http_head_report rep = {0, 0};
    size_t n = 0;
    for (int i = 0; i < 2 && n == 0; i++) {
        if (c->head_cap < sizes[i]) {
            /* The old contents are dead: no realloc copy. */
            char *p = malloc(sizes[i]);
            if (!p)
                return -ENOMEM;
            free(c->head);
            c->head = p;
            c->head_cap = sizes[i];
        }
        n = ol_http_format_head(c->head, c->head_cap, status, hdrs, nhdrs, content_length, flags,
                                &rep);
    }
    if (rep.dropped) {
        /* The name is printed only when it is a token, so the log line
         * cannot carry the control bytes that got the header refused. */
        const char *name = hdrs[rep.first_dropped].name;
        ol_log_limited(OL_LOG_WARN, "%s: %zu response header(s) with a control byte left out "
                       "(first: %s)", c->req.remote, rep.dropped,
                       ol_http_header_name_ok(name) ? name : "(not a token)");
    }
    if (n == 0)
        return -E2BIG;
    if (interim)
        c->continue_sent = true;
    return (ssize_t)n;
}

/* A response head that could not be built: the client gets a bare 500 and
 * the connection closes (the handler's own response is lost, and the body
 * may be unread).  Returns err for the handler to pass on. */
static int head_failed(struct ol_http_conn *c, int status, int err)
{
    ol_log_limited(OL_LOG_ERROR, "%s: cannot build a %d response head (%s); sending 500",
                   c->req.remote, status, ol_strerror(err));
    send_simple(c, 500);
    c->resp_started = true;
    c->resp_left = 0;
    c->close_after = true;
    return err;
}

/* Write fencing (ol_http_conn_opts.may_ack_write): whether this success
 * answer to a request that changes data must not go out now. */
static bool write_fenced(const struct ol_http_conn *c, int status)
{
    if (!c->opts->may_ack_write || status >= 300)
        return false;
    struct ol_slice m = c->req.head.method;
    bool write = (m.n == 3 && memcmp(m.p, "PUT", 3) == 0) ||
                 (m.n == 4 && memcmp(m.p, "POST", 4) == 0) ||
                 (m.n == 6 && memcmp(m.p, "DELETE", 6) == 0);
    return write && !c->opts->may_ack_write();
}

static int send_fenced(struct ol_http_conn *c)
{
    static const char body[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ServiceUnavailable</Code>"
        "<Message>This node lost its cluster membership lease: the write is not acknowledged "
        "(it may or may not have been applied). Retry.</Message></Error>";
    static const struct ol_http_hdr h[] = {{"Content-Type", "application/xml"}};
    ol_log_limited(OL_LOG_WARN, "%s: write not acknowledged (node fenced): 503", c->req.remote);
    ssize_t hn = make_head(c, 503, h, 1, sizeof(body) - 1);
    if (hn < 0)
        return head_failed(c, 503, (int)hn);
    c->resp_started = true;
    c->resp_left = 0;
    c->head_len = (size_t)hn;
    struct iovec iov = {.iov_base = (void *)body, .iov_len = sizeof(body) - 1};
    ssize_t rc = send_all(c, &iov, c->req.is_head ? 0 : 1);
    return rc < 0 ? (int)rc : 0;
}

int ol_http_resp_begin(struct ol_http_conn *c, const int status, const struct ol_http_hdr *hdrs,
                       size_t nhdrs, uint64_t content_length)
{
    OL_ASSERT(!c->resp_started);
    if (write_fenced(c, status)) {
        /* The handler's body has nowhere to go: its writes fail, and the
         * connection closes after the 503. */
        c->close_after = true;
        int rc = send_fenced(c);
        return rc < 0 ? rc : -ESHUTDOWN;
    }
    /* A client that asked for 100-continue and got a final answer without it
     * may or may not send the body; the connection cannot be reused safely. */
    if (c->req.expect_continue && !c->continue_sent && c->req.has_body && !c->body_done)
        c->close_after = true;
    ssize_t hn = make_head(c, status, hdrs, nhdrs, content_length);
    if (hn < 0)
        return head_failed(c, status, (int)hn);
    c->resp_started = true;
    c->resp_left = c->req.is_head ? 0 : content_length;
    c->head_len = (size_t)hn;
    /* With a body to come, the head goes out with its first bytes (see
     * send_all); send errors then surface from ol_http_resp_write. */
    if (c->resp_left > 0)
        return 0;
    ssize_t rc = send_all(c, NULL, 0);
    return rc < 0 ? (int)rc : 0;
}

int ol_http_resp_write(struct ol_http_conn *c, const void *buf, size_t len)
{
    OL_ASSERT(c->resp_started);
    if (c->req.is_head)
        return 0;
    if (len > c->resp_left)
        return -EOVERFLOW;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    ssize_t rc = send_all(c, &iov, 1);
    if (rc < 0)
        return (int)rc;
    c->resp_left -= len;
    return 0;
}

ssize_t ol_http_resp_sendfile(struct ol_http_conn *c, int fd, uint64_t off, size_t len)
{
    OL_ASSERT(c->resp_started);
    if (c->req.is_head || len == 0)
        return 0;
    if (len > c->resp_left)
        return -EOVERFLOW;
    if (c->send_error)
        return -EPIPE;
    /* sendfile(2) has no MSG_DONTWAIT: the socket itself must not block.
     * Every other operation on it goes through the ring or passes
     * MSG_DONTWAIT, so the flag changes nothing for them. */
    if (!c->nonblocking) {
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
            c->send_error = true;
            return -errno;
        }
        c->nonblocking = true;
    }
    unsigned io_tmo = (unsigned)c->opts->io_timeout_ms, tmo;
    /* The handler calls this a piece at a time, each call returning after
     * any progress: the pace is the response's, kept across the calls. */
    struct ol_io_pace *pace = send_pace(c);
    if (c->head_len) {
        /* The head goes first, held back (MSG_MORE) to leave with the body. */
        struct iovec iov = {.iov_base = c->head, .iov_len = c->head_len};
        c->head_len = 0;
        ssize_t rc = ol_io_sendmsg_paced(c->fd, &iov, 1, MSG_MORE, io_tmo, pace);
        if (rc < 0) {
            send_failed(c, rc);
            return rc;
        }
    }
    ssize_t n = ol_io_pace_timeout(pace, io_tmo, &tmo);
    if (n == 0)
        n = ol_io_sendfile(c->fd, fd, off, len, tmo);
    if (n < 0) {
        send_failed(c, n);
        return n;
    }
    if (pace)
        pace->bytes += (uint64_t)n;
    c->resp_left -= (uint64_t)n;
    return n;
}

int ol_http_respond(struct ol_http_conn *c, int status, const struct ol_http_hdr *hdrs,
                    size_t nhdrs, const void *body, size_t body_len)
{
    OL_ASSERT(!c->resp_started);
    if (write_fenced(c, status))
        return send_fenced(c);
    if (c->req.expect_continue && !c->continue_sent && c->req.has_body && !c->body_done)
        c->close_after = true;
    ssize_t hn = make_head(c, status, hdrs, nhdrs, body_len);
    if (hn < 0)
        return head_failed(c, status, (int)hn);
    c->resp_started = true;
    c->resp_left = 0;
    /* The head goes first from c->head (see send_all). */
    c->head_len = (size_t)hn;
    struct iovec iov = {.iov_base = (void *)body, .iov_len = body_len};
    int n = (c->req.is_head || !body || !body_len) ? 0 : 1;
    ssize_t rc = send_all(c, &iov, n);
    return rc < 0 ? (int)rc : 0;
}

bool ol_http_resp_started(const struct ol_http_conn *c)
{
    return c->resp_started;
}

void ol_http_set_close(struct ol_http_conn *c)
{
    c->close_after = true;
}

bool ol_http_body_done(const struct ol_http_conn *c)
{
    return c->body_done;
}

bool ol_http_body_failed(const struct ol_http_conn *c)
{
    return c->body_error;
}

/* Moves unconsumed bytes down to c->pin: to the front of the buffer between
 * requests, to the end of the request's head while one is served.  The
 * head's bytes never move during the request, so every slice into them
 * (req.head: method, path, query, headers) holds its bytes until the request
 * ends, however the body arrives. */
static void compact(struct ol_http_conn *c)
{
    OL_ASSERT(c->pin <= c->rstart && c->rstart <= c->rend);
    if (c->rstart == c->pin)
        return;
    size_t n = c->rend - c->rstart;
    if (n)
        memmove(c->buf + c->pin, c->buf + c->rstart, n);
    c->rstart = c->pin;
    c->rend = c->pin + n;
}

static ssize_t fill(struct ol_http_conn *c, unsigned timeout_ms)
{
    compact(c);
    if (c->rend == c->cap)
        return -ENOBUFS;
    ssize_t n = ol_io_recv(c->fd, c->buf + c->rend, c->cap - c->rend, timeout_ms);
    if (n > 0)
        c->rend += (size_t)n;
    return n;
}

/* Receives body bytes under the minimum body rate: into out (len bytes at
 * most), or into the receive buffer through fill() when out is NULL.  The
 * io timeout still bounds a stall; on top of it, once the body has kept the
 * server waiting body_rate_grace_ms, each further body_rate_window_ms of
 * waiting must bring min_body_rate_bytes_per_sec, or the body fails with
 * -ETIMEDOUT.  io_timeout_ms alone lets a body that sends a byte just before
 * each timeout live for ever, holding its handler's buffers; only waiting
 * time counts, so time the handler spends on the drives is never the
 * client's fault. */
static ssize_t body_recv(struct ol_http_conn *c, void *out, size_t len)
{
    const struct ol_http_conn_opts *o = c->opts;
    uint64_t begin = ol_now_ms();
    /* Each round waits until the window's check or the io timeout; the io
     * timeout ends the loop, and the round bound guards the rest. */
    for (unsigned rounds = 0; rounds < 1u << 20; rounds++) {
        uint64_t now = ol_now_ms();
        uint64_t tmo = o->io_timeout_ms;
        if (tmo) {
            if (now - begin >= tmo)
                return -ETIMEDOUT;
            tmo -= now - begin;
        }
        bool capped = false;
        if (o->min_body_rate_bytes_per_sec) {
            uint64_t span = c->rate_graced ? o->body_rate_window_ms : o->body_rate_grace_ms;
            uint64_t left = span > c->rate_wait_ms ? span - c->rate_wait_ms : 1;
            if (!tmo || left < tmo) {
                tmo = left;
                capped = true;
            }
        }
        ssize_t n = out ? ol_io_recv(c->fd, out, len, (unsigned)tmo) : fill(c, (unsigned)tmo);
        if (!o->min_body_rate_bytes_per_sec)
            return n;
        c->rate_wait_ms += ol_now_ms() - now;
        if (n > 0)
            c->rate_bytes += (uint64_t)n;
        uint64_t span = c->rate_graced ? o->body_rate_window_ms : o->body_rate_grace_ms;
        if (c->rate_wait_ms >= span) {
            if (c->rate_graced &&
                c->rate_bytes * 1000 < o->min_body_rate_bytes_per_sec * c->rate_wait_ms) {
                ol_log_limited(OL_LOG_INFO, "request body slower than min_body_rate_bytes_per_sec "
                               "(%" PRIu64 " bytes in %" PRIu64 " ms); cut",
                               c->rate_bytes, c->rate_wait_ms);
                return -ETIMEDOUT;
            }
            c->rate_graced = true;
            c->rate_wait_ms = 0;
            c->rate_bytes = 0;
        }
        if (n == -ETIMEDOUT && capped)
            continue;
        return n;
    }
    return -ETIMEDOUT;
}

static int send_continue(struct ol_http_conn *c)
{
    c->continue_sent = true;
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof(msg) - 1};
    ssize_t rc = send_all(c, &iov, 1);
    return rc < 0 ? (int)rc : 0;
}

ssize_t ol_http_body_read(struct ol_http_conn *c, void *out, size_t len)
{
    if (c->body_done || len == 0)
        return 0;
    if (c->body_error)
        return -EPROTO;
    if (c->req.expect_continue && !c->continue_sent && c->rend == c->rstart) {
        int rc = send_continue(c);
        if (rc < 0)
            return rc;
    }
    if (!c->req.chunked) {
        size_t want = len < c->body_left ? len : (size_t)c->body_left;
        size_t have = c->rend - c->rstart;
        ssize_t got;
        if (have) {
            got = (ssize_t)(have < want ? have : want);
            memcpy(out, c->buf + c->rstart, (size_t)got);
            c->rstart += (size_t)got;
        } else {
            got = body_recv(c, out, want);
            if (got == 0)
                got = -ECONNRESET; /* the peer closed mid-body */
            if (got < 0) {
                c->body_error = true;
                return got;
            }
        }
        c->body_left -= (uint64_t)got;
        if (c->body_left == 0)
            c->body_done = true;
        return got;
    }
    /* Chunked: decode from the receive buffer.  Never hand the decoder more
     * input than the caller can take, so all decoded bytes fit in `out`. */
    for (unsigned rounds = 0; rounds < 1u << 20; rounds++) {
        size_t have = c->rend - c->rstart;
        if (have) {
            size_t in = have < len ? have : len;
            size_t dlen = in;
            ssize_t used = ol_http_chunked_decode(&c->chunked, c->buf + c->rstart, &dlen);
            if (used < 0) {
                /* The data decoded before the broken framing is handed out
                 * first, and the error on the next call (body_error is
                 * sticky): what the handler reads then does not depend on
                 * how the stream was split into receives. */
                c->body_error = true;
                if (dlen)
                    memcpy(out, c->buf + c->rstart, dlen);
                return dlen ? (ssize_t)dlen : -EPROTO;
            }
            if (dlen)
                memcpy(out, c->buf + c->rstart, dlen);
            c->rstart += (size_t)used;
            if (ol_http_chunked_done(&c->chunked))
                c->body_done = true;
            if (dlen || c->body_done)
                return (ssize_t)dlen;
            if (used > 0)
                continue;
        }
        ssize_t n = body_recv(c, NULL, 0);
        if (n == 0)
            n = -ECONNRESET;
        if (n < 0) {
            c->body_error = true;
            return n == -ENOBUFS ? -EPROTO : n;
        }
    }
    c->body_error = true;
    return -EPROTO;
}

ssize_t ol_http_body_read_full(struct ol_http_conn *c, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = ol_http_body_read(c, (char *)buf + got, len - got);
        if (n < 0)
            return n;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Reads and discards what the handler left of the body, if it is small.
 * Returns false when the connection must be closed instead. */
static bool drain_body(struct ol_http_conn *c)
{
    if (c->body_done)
        return true;
    if (c->body_error)
        return false;
    if (c->req.expect_continue && !c->continue_sent)
        return false;
    if (!c->req.chunked && c->body_left > DRAIN_MAX_BYTES)
        return false;
    char sink[16384];
    uint64_t drained = 0;
    while (!c->body_done && drained <= DRAIN_MAX_BYTES) {
        ssize_t n = ol_http_body_read(c, sink, sizeof(sink));
        if (n <= 0)
            return n == 0 && c->body_done;
        drained += (uint64_t)n;
    }
    return c->body_done;
}

/* The lingering close (see LINGER_MAX_BYTES).  Bounded by the byte and time
 * limits; the loop's stop ends it too. */
static void linger_close(struct ol_http_conn *c, struct ol_loop *loop)
{
    if (shutdown(c->fd, SHUT_WR) != 0)
        return;
    char sink[16384];
    uint64_t start = ol_now_ms(), last = start, got = 0;
    for (unsigned rounds = 0; rounds < 1u << 20 && got < LINGER_MAX_BYTES; rounds++) {
        uint64_t now = ol_now_ms();
        if (now - start >= LINGER_TIME_MS || now - last >= LINGER_WAIT_MS ||
            (loop && ol_loop_stopping(loop)))
            return;
        ssize_t n = ol_io_recv(c->fd, sink, sizeof(sink), IDLE_SLICE_MS);
        if (n == -ETIMEDOUT)
            continue;
        if (n <= 0)
            return; /* the client closed (or reset): done */
        got += (uint64_t)n;
        last = ol_now_ms();
    }
}

/* Room for a head and the start of its body: end_request moves what is left
 * of the buffer to its front when less than this is free after it. */
#define BODY_ROOM_BYTES 4096u

/* Ends a request (the handler is done and its body consumed): the head's
 * slices die, so the buffer may move again, and the response head buffer is
 * freed (an idle connection holds none). */
static void end_request(struct ol_http_conn *c)
{
    c->pin = 0;
    /* Pipelined bytes are moved to the front now, while no slice points
     * into them, if a head found among them could end so close to the
     * buffer's end that its chunked body would have little room: during the
     * request the head may not move. */
    if (c->cap - c->rstart < c->opts->limits.max_head_bytes + BODY_ROOM_BYTES)
        compact(c);
    free(c->head);
    c->head = NULL;
    c->head_cap = 0;
    c->head_len = 0;
}

static int parse_error_status(int rc)
{
    switch (rc) {
    case OL_HTTP_EHEAD_TOO_LARGE:
    case OL_HTTP_ETOO_MANY_HEADERS: return 431;
    case OL_HTTP_EURI_TOO_LONG: return 414;
    case OL_HTTP_EVERSION: return 505;
    default: return 400;
    }
}

/* The receive buffer exists only while a request is arriving or being
 * served: a connection waiting for its next request holds none (it waits
 * for readability, ol_io_poll_in), so that thousands of idle connections cost
 * a few KiB each rather than buf_bytes each.  It is taken when bytes are
 * there to read and given back when the connection has been idle for a
 * slice with nothing buffered, never while a request is active (its head's
 * slices point into it).  0 or -ENOMEM. */
static int rbuf_take(struct ol_http_conn *c)
{
    OL_ASSERT(!c->buf && !c->headers);
    /* The parsed headers' array lives and dies with the buffer its slices
     * point into: one allocation, headers first. */
    size_t hbytes = c->opts->limits.max_headers * sizeof(struct ol_http_header);
    hbytes = (hbytes + 63) & ~(size_t)63;
    char *m = malloc(hbytes + c->opts->buf_bytes);
    if (!m)
        return -ENOMEM;
    c->headers = (struct ol_http_header *)(void *)m;
    c->buf = m + hbytes;
    c->cap = c->opts->buf_bytes;
    c->rstart = c->rend = 0;
    return 0;
}

static void rbuf_give_back(struct ol_http_conn *c)
{
    if (!c->buf)
        return;
    /* free() keeps the pages in the allocator, resident; the whole pages
     * inside the buffer go back to the kernel first (free writes only the
     * chunk's edges), so the memory of a burst of requests is returned
     * when they end, not held at its peak. */
    uintptr_t page = 4096;
    uintptr_t lo = ((uintptr_t)c->headers + 64 + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)c->buf + c->cap - 64) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
    free(c->headers); /* the start of the buffer's allocation */
    c->headers = NULL;
    c->buf = NULL;
    c->cap = 0;
    c->rstart = c->rend = 0;
}

/* Reads and parses the next request head.  Returns the head length, 0 when
 * the connection should close quietly, or a negative HTTP status to send.
 *
 * Deadlines: the first byte of a later request may take the idle timeout;
 * the head must then be complete header_timeout_ms after its first byte.  A
 * connection's first head is due header_timeout_ms after accept, whatever
 * the idle timeout: a client that connects and sends nothing, or trickles a
 * head a byte at a time (slow loris), gives its slot up after that.  While
 * it waits here the connection is on the loop's idle list, from which the
 * accept path may cut it when slots run short (server.c). */
static int read_head(struct ol_http_conn *c, struct ol_loop *loop)
{
    const struct ol_http_limits *lim = &c->opts->limits;
    uint64_t start = ol_now_ms();
    uint64_t head_tmo = c->opts->header_timeout_ms ? c->opts->header_timeout_ms : UINT32_MAX;
    uint64_t idle_deadline = start + (uint64_t)c->opts->idle_timeout_ms;
    uint64_t head_deadline = 0; /* set once the head has begun */
    if (c->nreq == 0) {
        head_deadline = c->accepted_ms + head_tmo;
        if (idle_deadline > head_deadline)
            idle_deadline = head_deadline;
    }
    ol_idle_add(&c->idle, c->fd);
    int rc = 0;
    /* Each round receives bytes or waits one slice; the deadlines end it. */
    for (;;) {
        if (c->idle.cut)
            break; /* cut for a new connection: close quietly */
        if (c->rend > c->rstart) {
            c->req.head.headers = c->headers;
            rc = ol_http_parse_request(c->buf + c->rstart, c->rend - c->rstart, lim,
                                       &c->req.head);
            if (rc > 0)
                break;
            if (rc < 0) {
                rc = -parse_error_status(rc);
                break;
            }
            if (c->rend - c->rstart >= lim->max_head_bytes) {
                rc = -431;
                break;
            }
            if (!head_deadline)
                head_deadline = ol_now_ms() + head_tmo;
        }
        rc = 0;
        uint64_t now = ol_now_ms();
        bool started = c->rend > c->rstart;
        if (!started && ol_loop_stopping(loop))
            break;
        uint64_t deadline = started ? head_deadline : idle_deadline;
        if (now >= deadline) {
            rc = started ? -408 : 0;
            break;
        }
        uint64_t left = deadline - now;
        unsigned slice = left < IDLE_SLICE_MS ? (unsigned)left : IDLE_SLICE_MS;
        if (!slice)
            slice = 1;
        /* Idle for a slice with nothing buffered: give the buffer and the
         * stack's unused pages back until the next request shows up.  A
         * client that sends its next request at once never pays for this. */
        if (!started && c->buf && now - start >= IDLE_SLICE_MS) {
            rbuf_give_back(c);
            ol_fiber_trim_stack();
        }
        if (!c->buf) {
            int p = ol_io_poll_in(c->fd, slice);
            if (p == -ETIMEDOUT)
                continue;
            if (p < 0 || c->idle.cut)
                break;
            if (rbuf_take(c) < 0) {
                rc = -503;
                break;
            }
        }
        ssize_t n = fill(c, slice);
        if (n == -ETIMEDOUT)
            continue;
        if (n == -ENOBUFS) {
            rc = -431;
            break;
        }
        if (n <= 0)
            break;
    }
    ol_idle_del(&c->idle);
    return rc;
}

static int setup_request(struct ol_http_conn *c)
{
    struct ol_http_req *r = &c->req;
    struct ol_http_request *h = &r->head;
    r->is_head = slice_ieq(h->method, "HEAD");
    const struct ol_slice *conn_hdr = ol_http_find_header(h, "connection");
    if (h->minor_version == 0)
        r->keep_alive = has_token(conn_hdr, "keep-alive");
    else
        r->keep_alive = !has_token(conn_hdr, "close");
    /* Message framing (RFC 9112 6.1-6.3).  Whatever another HTTP hop could
     * frame differently is refused with 400 and the connection closed: a
     * proxy in front that read the body's length otherwise would let a
     * request hide in this one's body (request smuggling).  So: more than
     * one Transfer-Encoding line, a transfer coding other than exactly
     * "chunked" (RFC 9112 6.3: chunked must be final, and it is the only
     * coding served), Transfer-Encoding together with Content-Length, or in
     * an HTTP/1.0 request (RFC 9112 6.1 calls that framing faulty), and more
     * than one Content-Length line, even with equal values: RFC 9112 6.3
     * allows merging identical ones, but no client sends them and refusing
     * leaves nothing for an intermediary to read another way.  A list value
     * ("5, 5") is not a valid Content-Length either.  More than one Host
     * line is a 400 too (RFC 9112 3.2 says MUST), and so is none in HTTP/1.1. */
    const struct ol_slice *te = NULL, *cl = NULL;
    unsigned nte = 0, ncl = 0, nhost = 0;
    for (size_t i = 0; i < h->nheaders; i++) {
        struct ol_slice name = h->headers[i].name;
        if (slice_ieq(name, "transfer-encoding")) {
            te = &h->headers[i].value;
            nte++;
        } else if (slice_ieq(name, "content-length")) {
            cl = &h->headers[i].value;
            ncl++;
        } else if (slice_ieq(name, "host")) {
            nhost++;
        }
    }
    if (nte > 1 || ncl > 1 || nhost > 1 || (te && cl))
        return -400;
    /* An HTTP/1.1 request without Host is a 400 too (RFC 9112 3.2, MUST):
     * virtual-hosted addressing and every signature read it. */
    if (h->minor_version == 1 && nhost == 0)
        return -400;
    r->chunked = false;
    r->content_length = 0;
    if (te) {
        if (!slice_ieq(*te, "chunked") || h->minor_version == 0)
            return -400;
        r->chunked = true;
    } else if (cl) {
        if (ol_http_parse_content_length(*cl, &r->content_length) != 0)
            return -400;
    }
    r->has_body = r->chunked || r->content_length > 0;
    r->expect_continue = has_token(ol_http_find_header(h, "expect"), "100-continue");
    c->body_left = r->chunked ? 0 : r->content_length;
    memset(&c->chunked, 0, sizeof(c->chunked));
    c->body_done = !r->has_body;
    c->continue_sent = false;
    c->body_error = false;
    c->resp_started = false;
    c->resp_left = 0;
    return 0;
}

/* The peer's address as text ("127.0.0.1", "::1"; an IPv4-mapped IPv6
 * address in its IPv4 form), once per connection: logs and the access
 * rules' aws:SourceIp (access/access.h) read it.  "" when unknown. */
static void peer_address(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    out[0] = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)cap);
    } else if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            inet_ntop(AF_INET, a->s6_addr + 12, out, (socklen_t)cap);
        else
            inet_ntop(AF_INET6, a, out, (socklen_t)cap);
    }
}

void ol_http_conn_serve(int fd, const struct ol_http_conn_opts *opts, ol_http_handler handler,
                        void *ctx)
{
    struct ol_loop *loop = ol_loop_current();
    struct ol_http_conn *c = calloc(1, sizeof(*c));
    bool linger = false;
    if (!c)
        goto out;
    c->fd = fd;
    c->opts = opts;
    /* No receive buffer (nor headers array) yet: read_head takes one when
     * bytes arrive. */
    c->buf = NULL;
    c->cap = 0;
    c->headers = NULL;
    c->accepted_ms = ol_now_ms();
    peer_address(fd, c->req.remote, sizeof(c->req.remote));

    /* Bounded by the connection's own life: each round serves one request or
     * ends the connection. */
    for (;;) {
        int hl = read_head(c, loop);
        if (hl == 0)
            break;
        if (hl < 0) {
            send_simple(c, -hl);
            break;
        }
        int st = setup_request(c);
        if (st < 0) {
            send_simple(c, -st);
            break;
        }
        c->rstart += (size_t)hl;
        c->pin = c->rstart;
        c->nreq++;
        c->rate_wait_ms = 0;
        c->rate_bytes = 0;
        c->rate_graced = false;
        c->resp_pace.t0_ms = 0;
        int rc = handler(ctx, c, &c->req);
        flush_head(c);
        if (rc < 0 || c->send_error) {
            linger = !c->send_error && c->resp_started && !c->resp_left && c->req.has_body &&
                     !c->body_done && !c->body_error;
            break;
        }
        if (!c->resp_started) {
            ol_log_limited(OL_LOG_ERROR, "handler sent no response; closing");
            send_simple(c, 500);
            break;
        }
        if (c->resp_left) /* a streamed response fell short: the framing is broken */
            break;
        if (!c->req.keep_alive || c->close_after || !drain_body(c)) {
            /* Answered before the body's end (and the answer is whole):
             * linger, so the answer is not lost to a reset. */
            linger = c->req.has_body && !c->body_done && !c->body_error;
            break;
        }
        /* The head's slices die here: pipelined bytes stay in the buffer. */
        end_request(c);
    }
out:
    if (c && linger && !c->send_stalled)
        linger_close(c, loop);
    if (c) {
        free(c->head);
        rbuf_give_back(c);
        if (c->send_stalled) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
    }
    ol_io_close(fd);
    /* After the close: a cut connection's slot counts as pending until now. */
    if (c)
        ol_idle_done(&c->idle);
    free(c);
}
