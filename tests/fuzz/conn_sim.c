/* The simulated peer: see conn_sim.h. */
#include "conn_sim.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/loop.h"

/* The wrapped functions' declarations (the linker's --wrap names). */
ssize_t __wrap_ol_io_recv(int fd, void *buf, size_t len, unsigned timeout_ms);
ssize_t __wrap_ol_io_sendmsg_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_ms);
ssize_t __wrap_ol_io_sendmsg_flags(int fd, struct iovec *iov, int iovcnt, int flags,
                                   unsigned timeout_ms);
ssize_t __wrap_ol_io_sendmsg_paced(int fd, struct iovec *iov, int iovcnt, int flags,
                                   unsigned timeout_ms, struct ol_io_pace *pace);
ssize_t __wrap_ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms);
int __wrap_ol_io_close(int fd);
bool __wrap_ol_loop_stopping(const struct ol_loop *loop);
/* What the connection code may call while a connection waits idle for its
 * next request (waiting for readability without a buffer, the loop's idle
 * list).  They are wrapped too so that no loop is needed; a --wrap for a
 * function nothing calls is harmless, so the list may name functions a
 * branch does not have (the idle-list entry is then only a pointer here). */
int __wrap_ol_io_poll_in(int fd, unsigned timeout_ms);
void __wrap_ol_idle_add(void *e, int fd);
void __wrap_ol_idle_del(void *e);
void __wrap_ol_idle_done(void *e);

static struct conn_sim *g_sim;

static uint64_t next_rand(uint64_t *x)
{
    /* xorshift64*: deterministic and good enough for cut sizes. */
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * UINT64_C(2685821657736338717);
}

ssize_t __wrap_ol_io_recv(int fd, void *buf, size_t len, unsigned timeout_ms)
{
    (void)fd;
    (void)timeout_ms;
    struct conn_sim *s = g_sim;
    if (!s) {
        fprintf(stderr, "conn_sim: recv outside a simulation\n");
        abort();
    }
    size_t left = s->len - s->off;
    if (left == 0 || len == 0)
        return 0;
    size_t n = left < len ? left : len;
    switch (s->split) {
    case SIM_WHOLE:
        break;
    case SIM_BYTES:
        n = 1;
        break;
    case SIM_CUTS:
        while (s->cut_i < s->ncuts && s->cuts[s->cut_i] <= s->off)
            s->cut_i++;
        if (s->cut_i < s->ncuts && s->cuts[s->cut_i] - s->off < n)
            n = s->cuts[s->cut_i] - s->off;
        break;
    case SIM_SEEDED: {
        size_t piece = 1 + (size_t)(next_rand(&s->seed) % (s->max_piece ? s->max_piece : 1));
        if (piece < n)
            n = piece;
        break;
    }
    }
    memcpy(buf, s->in + s->off, n);
    s->off += n;
    s->recvs++;
    return (ssize_t)n;
}

static void out_put(struct conn_sim *s, const void *p, size_t n)
{
    if (s->out_len + n + 1 > s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap : 4096;
        while (cap < s->out_len + n + 1)
            cap *= 2;
        char *q = realloc(s->out, cap);
        if (!q)
            abort();
        s->out = q;
        s->out_cap = cap;
    }
    if (n)
        memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    s->out[s->out_len] = '\0';
}

ssize_t __wrap_ol_io_sendmsg_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_ms)
{
    (void)fd;
    (void)timeout_ms;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
        out_put(g_sim, iov[i].iov_base, iov[i].iov_len);
        total += iov[i].iov_len;
    }
    return (ssize_t)total;
}

ssize_t __wrap_ol_io_sendmsg_flags(int fd, struct iovec *iov, int iovcnt, int flags,
                                   unsigned timeout_ms)
{
    (void)flags;
    return __wrap_ol_io_sendmsg_all(fd, iov, iovcnt, timeout_ms);
}

ssize_t __wrap_ol_io_sendmsg_paced(int fd, struct iovec *iov, int iovcnt, int flags,
                                   unsigned timeout_ms, struct ol_io_pace *pace)
{
    (void)flags;
    ssize_t n = __wrap_ol_io_sendmsg_all(fd, iov, iovcnt, timeout_ms);
    if (pace && n > 0)
        pace->bytes += (uint64_t)n;
    return n;
}

/* What the file holds goes to out, as sendfile(2) would send it: the S3
 * layer sends large GET bodies this way (fuzz_router). */
ssize_t __wrap_ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms)
{
    (void)sock;
    (void)timeout_ms;
    char buf[16384];
    size_t n = len < sizeof(buf) ? len : sizeof(buf);
    ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got < 0)
        return -errno;
    if (got == 0)
        return -EIO;
    out_put(g_sim, buf, (size_t)got);
    return got;
}

int __wrap_ol_io_close(int fd)
{
    (void)fd;
    g_sim->closed = 1;
    return 0;
}

bool __wrap_ol_loop_stopping(const struct ol_loop *loop)
{
    (void)loop;
    return false;
}

int __wrap_ol_io_poll_in(int fd, unsigned timeout_ms)
{
    (void)fd;
    (void)timeout_ms;
    /* Always readable: bytes are there, or the next receive reads the end. */
    return POLLIN;
}

void __wrap_ol_idle_add(void *e, int fd)
{
    (void)e;
    (void)fd;
}

void __wrap_ol_idle_del(void *e)
{
    (void)e;
}

void __wrap_ol_idle_done(void *e)
{
    (void)e;
}

void conn_sim_run(struct conn_sim *s, const struct ol_http_conn_opts *opts,
                  ol_http_handler handler, void *ctx)
{
    s->off = 0;
    s->cut_i = 0;
    s->recvs = 0;
    s->closed = 0;
    s->out_len = 0;
    out_put(s, "", 0);
    g_sim = s;
    ol_http_conn_serve(-1, opts, handler, ctx);
    g_sim = NULL;
}

void conn_sim_free(struct conn_sim *s)
{
    free(s->out);
    s->out = NULL;
    s->out_len = s->out_cap = 0;
}

/* ---- the recording handler ---- */

#define SIM_CHECK(cond)                                                                       \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "conn_sim: %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

struct growbuf {
    char *p;
    size_t n, cap;
};

static void gb_put(struct growbuf *g, const void *p, size_t n)
{
    if (g->n + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 1024;
        while (cap < g->n + n + 1)
            cap *= 2;
        char *q = realloc(g->p, cap);
        SIM_CHECK(q != NULL);
        g->p = q;
        g->cap = cap;
    }
    if (n)
        memcpy(g->p + g->n, p, n);
    g->n += n;
    g->p[g->n] = '\0';
}

static void gb_fmt_slice(struct growbuf *g, const char *tag, struct ol_slice s)
{
    char pre[48];
    int k = snprintf(pre, sizeof(pre), "%s %zu:", tag, s.n);
    gb_put(g, pre, (size_t)k);
    gb_put(g, s.p, s.n);
    gb_put(g, "\n", 1);
}

struct recorder {
    struct growbuf t;
    uint64_t read_seed;
    unsigned nreq;
};

/* Every slice of the head, for the check that they keep their bytes. */
static size_t head_slices(const struct ol_http_request *h, struct ol_slice *out, size_t cap)
{
    size_t m = 0;
    out[m++] = h->method;
    out[m++] = h->target;
    out[m++] = h->path;
    out[m++] = h->query;
    for (size_t i = 0; i < h->nheaders && m + 2 <= cap; i++) {
        out[m++] = h->headers[i].name;
        out[m++] = h->headers[i].value;
    }
    return m;
}

static int record_handler(void *ctx, struct ol_http_conn *c, struct ol_http_req *req)
{
    struct recorder *r = ctx;
    unsigned idx = r->nreq++;
    const struct ol_http_request *h = &req->head;

    /* The head's bytes, copied before any body byte is read. */
    enum { MAXS = 2 * 1024 + 4 };
    static struct ol_slice sl[MAXS];
    size_t ns = head_slices(h, sl, MAXS);
    struct growbuf before = {0};
    for (size_t i = 0; i < ns; i++)
        gb_put(&before, sl[i].p, sl[i].n);

    gb_fmt_slice(&r->t, "REQ", h->method);
    gb_fmt_slice(&r->t, "TARGET", h->target);
    for (size_t i = 0; i < h->nheaders; i++) {
        gb_fmt_slice(&r->t, "H", h->headers[i].name);
        gb_fmt_slice(&r->t, "V", h->headers[i].value);
    }

    /* Read the body in pieces of 1..4096 bytes; sometimes stop early (the
     * connection then drains or closes).  With Expect: 100-continue the
     * body is always read to its end, because whether a 100 went out (and
     * so whether a partly read body can be drained) depends on timing. */
    uint64_t rng = r->read_seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (idx + 1));
    if (rng == 0)
        rng = 1;
    bool partial = (next_rand(&rng) % 4) == 0 && !ol_http_find_header(h, "expect");
    size_t stop_after = partial ? (size_t)(next_rand(&rng) % 64) : SIZE_MAX;
    static char piece[4096];
    size_t got = 0;
    ssize_t n = 0;
    struct growbuf body = {0};
    for (unsigned rounds = 0; rounds < (1u << 22); rounds++) {
        if (got >= stop_after)
            break;
        size_t want = 1 + (size_t)(next_rand(&rng) % sizeof(piece));
        /* Exactly stop_after bytes: a read may return fewer than asked,
         * as many as happen to be buffered. */
        if (want > stop_after - got)
            want = stop_after - got;
        n = ol_http_body_read(c, piece, want);
        if (n <= 0)
            break;
        SIM_CHECK((size_t)n <= want);
        gb_put(&body, piece, (size_t)n);
        got += (size_t)n;
    }
    char line[96];
    /* Whether a body stopped early is done depends on whether its end had
     * arrived, so it is not recorded then. */
    int k = snprintf(line, sizeof(line), "BODY %zu rc=%d done=%d\n", body.n,
                     n < 0 ? (int)n : 0, partial ? -1 : (int)ol_http_body_done(c));
    gb_put(&r->t, line, (size_t)k);
    gb_put(&r->t, body.p, body.n);
    gb_put(&r->t, "\n", 1);
    free(body.p);

    /* The property: the head's slices still hold the same bytes. */
    size_t ns2 = head_slices(h, sl, MAXS);
    SIM_CHECK(ns2 == ns);
    size_t off = 0;
    for (size_t i = 0; i < ns; i++) {
        SIM_CHECK(memcmp(before.p + off, sl[i].p, sl[i].n) == 0);
        off += sl[i].n;
    }
    free(before.p);

    /* Respond with an empty body (so HEAD and GET responses look alike),
     * echoing the first header's value through the response writer. */
    char echo[512] = "";
    if (h->nheaders) {
        size_t vn = h->headers[0].value.n < sizeof(echo) - 1 ? h->headers[0].value.n
                                                              : sizeof(echo) - 1;
        memcpy(echo, h->headers[0].value.p, vn);
        echo[vn] = '\0';
    }
    struct ol_http_hdr hdrs[] = {{"x-echo", echo}, {"x-req", "1"}};
    return ol_http_respond(c, n < 0 ? 400 : 200, hdrs, 2, NULL, 0);
}

/* Checks each response head in out and appends its status to the transcript
 * (interim 100s left out).  Every response has an empty body. */
static void record_responses(struct recorder *r, const char *out, size_t len)
{
    size_t pos = 0;
    gb_put(&r->t, "OUT", 3);
    while (pos < len) {
        const char *end = memmem(out + pos, len - pos, "\r\n\r\n", 4);
        SIM_CHECK(end != NULL);
        size_t hl = (size_t)(end - (out + pos)) + 4;
        const char *p = out + pos;
        SIM_CHECK(hl > 12 && memcmp(p, "HTTP/1.1 ", 9) == 0);
        for (size_t i = 0; i < hl; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (ch == '\r') {
                SIM_CHECK(i + 1 < hl && p[i + 1] == '\n');
                i++;
                continue;
            }
            SIM_CHECK((ch >= 0x20 || ch == '\t') && ch != 0x7f);
        }
        if (memcmp(p + 9, "100 ", 4) != 0) {
            gb_put(&r->t, " ", 1);
            gb_put(&r->t, p + 9, 3);
            SIM_CHECK(memmem(p, hl, "\r\nContent-Length: 0\r\n", 21) != NULL);
        }
        pos += hl;
    }
    gb_put(&r->t, "\n", 1);
}

char *conn_sim_transcript(struct conn_sim *s, const struct ol_http_conn_opts *opts,
                          uint64_t read_seed, size_t *len)
{
    struct recorder r = {.read_seed = read_seed};
    conn_sim_run(s, opts, record_handler, &r);
    record_responses(&r, s->out, s->out_len);
    SIM_CHECK(s->closed);
    gb_put(&r.t, "", 0);
    *len = r.t.n;
    return r.t.p;
}
