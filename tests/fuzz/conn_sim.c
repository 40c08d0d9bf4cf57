/* The simulated peer: see conn_sim.h. */
#include "conn_sim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/loop.h"

/* The wrapped functions' declarations (the linker's --wrap names). */
ssize_t __wrap_ol_io_recv(int fd, void *buf, size_t len, unsigned timeout_ms);
ssize_t __wrap_ol_io_sendmsg_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_ms);
ssize_t __wrap_ol_io_sendmsg_flags(int fd, struct iovec *iov, int iovcnt, int flags,
                                   unsigned timeout_ms);
ssize_t __wrap_ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms);
int __wrap_ol_io_close(int fd);
bool __wrap_ol_loop_stopping(const struct ol_loop *loop);

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

ssize_t __wrap_ol_io_sendfile(int sock, int fd, uint64_t off, size_t len, unsigned timeout_ms)
{
    (void)sock;
    (void)fd;
    (void)off;
    (void)len;
    (void)timeout_ms;
    return -ENOSYS;
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
