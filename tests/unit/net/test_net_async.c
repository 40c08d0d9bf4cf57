/* ol_net_call_async (net/net.h): many calls in flight from one thread.
 *
 * - 1000 calls at once to an echo server, data of 0 B .. 200 KiB (eager and
 *   rendezvous), each answered exactly once with its own bytes back;
 * - a synchronous ol_net_call while they are in flight;
 * - a call to a port nobody listens on: a transport error in its callback;
 * - a call to a hung server: -ETIMEDOUT in its callback;
 * - ol_net_destroy with calls still in flight: every callback has run when
 *   it returns;
 * - a call that is not taken (no callback, too much data): an error at
 *   once, and no callback.
 * Run over tcp and over UCX's default transports. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/err.h"
#include "net/net.h"

#include "check.h"

enum { N = 1000, MAX_BYTES = 200 * 1024 };

static void echo_serve(void *ctx, struct ol_net_req *req)
{
    (void)ctx;
    const struct ol_wire_hdr *h = ol_net_req_hdr(req);
    size_t n = h->data_len;
    void *copy = n ? malloc(n) : NULL;
    if (n && !copy) {
        ol_net_reply(req, -ENOMEM, NULL, 0, NULL, 0);
        return;
    }
    if (n)
        memcpy(copy, ol_net_req_data(req), n);
    ol_net_reply(req, ol_net_req_check(req) == 0 ? (int)h->op : -EIO, NULL, 0, copy, n);
}

struct one {
    struct ol_net_call call;
    uint8_t *out, *back;
    size_t n;
    int result;
    atomic_int calls; /* how many times its callback ran */
};

static atomic_int done;

static void on_done(void *arg, struct ol_net_call *c, int result)
{
    struct one *o = arg;
    CHECK(c == &o->call);
    o->result = result;
    if (result >= 0 && (c->rep_data_len != o->n || memcmp(o->out, o->back, o->n) != 0))
        o->result = -EBADMSG;
    atomic_fetch_add(&o->calls, 1);
    atomic_fetch_add(&done, 1);
}

/* Waits until done reaches want (at most ms). */
static bool wait_done(int want, unsigned ms)
{
    uint64_t end = ol_mono_ms() + ms;
    while (atomic_load(&done) < want && ol_mono_ms() < end)
        usleep(1000);
    return atomic_load(&done) >= want;
}

static void setup(struct one *o, const char *addr, unsigned i, unsigned timeout_ms)
{
    static const size_t sizes[] = {0, 1, 3000, 9000, 70000, MAX_BYTES};
    o->n = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
    o->out = malloc(o->n ? o->n : 1);
    o->back = malloc(MAX_BYTES);
    if (!o->out || !o->back)
        abort();
    for (size_t k = 0; k < o->n; k++)
        o->out[k] = (uint8_t)(k * 13 + i);
    o->result = 1;
    atomic_init(&o->calls, 0);
    o->call = (struct ol_net_call){.addr = addr,
                                   .op = (uint8_t)(1 + i % 50),
                                   .timeout_ms = timeout_ms,
                                   .data = o->out,
                                   .data_len = o->n,
                                   .rep_data = o->back,
                                   .rep_data_cap = MAX_BYTES};
}

static void release(struct one *o, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        free(o[i].out);
        free(o[i].back);
    }
}

/* One synchronous call of op with text: whether it came back echoed. */
static bool sync_echo(struct ol_net *net, const char *addr, uint8_t op, const char *text)
{
    uint8_t b[16];
    size_t n = strlen(text);
    struct ol_net_call c = {.addr = addr,
                            .op = op,
                            .data = text,
                            .data_len = n,
                            .rep_data = b,
                            .rep_data_cap = sizeof(b)};
    return ol_net_call(net, &c) == op && c.rep_data_len == n && memcmp(b, text, n) == 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ol_net *snet, *cnet;
    if (ol_net_create(NULL, &snet) < 0) {
        fprintf(stderr, "UCX did not start: skipped\n");
        return 77;
    }
    CHECK_RC(ol_net_listen(snet, "127.0.0.1", 0, echo_serve, NULL, NULL), 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_net_port(snet));
    CHECK_RC(ol_net_create(NULL, &cnet), 0);

    /* 1000 at once, from this one thread. */
    struct one *ops = calloc(N, sizeof(*ops));
    uint64_t t0 = ol_mono_ns();
    for (unsigned i = 0; i < N; i++) {
        setup(&ops[i], addr, i, 20000);
        CHECK_RC(ol_net_call_async(cnet, &ops[i].call, on_done, &ops[i]), 0);
    }
    /* A synchronous call meanwhile. */
    CHECK(sync_echo(cnet, addr, 7, "sync"));
    CHECK(wait_done(N, 30000));
    unsigned good = 0, once = 0;
    for (unsigned i = 0; i < N; i++) {
        good += ops[i].result == (int)(1 + i % 50);
        once += atomic_load(&ops[i].calls) == 1;
    }
    printf("%u of %u async calls answered with their bytes, in %.1f ms\n", good, N,
           (double)(ol_mono_ns() - t0) / 1e6);
    CHECK(good == N && once == N);
    release(ops, N);

    /* Not taken: no callback. */
    struct one x;
    setup(&x, addr, 0, 1000);
    CHECK_RC(ol_net_call_async(cnet, &x.call, NULL, &x), -EINVAL);
    x.call.data_len = (size_t)OL_WIRE_MAX_DATA + 1;
    CHECK_RC(ol_net_call_async(cnet, &x.call, on_done, &x), -EMSGSIZE);
    usleep(20000);
    CHECK(atomic_load(&x.calls) == 0);
    release(&x, 1);

    /* Nobody there: a transport error. */
    atomic_store(&done, 0);
    struct one dead;
    setup(&dead, "127.0.0.1:1", 1, 3000);
    CHECK_RC(ol_net_call_async(cnet, &dead.call, on_done, &dead), 0);
    CHECK(wait_done(1, 10000));
    CHECK(dead.result == -ECONNREFUSED || dead.result == -ECONNRESET ||
          dead.result == -EHOSTUNREACH || dead.result == -ETIMEDOUT);
    release(&dead, 1);

    /* A hung server: -ETIMEDOUT (and the buffers free when it runs). */
    atomic_store(&done, 0);
    ol_net_test_stall(snet, 800);
    usleep(10000);
    struct one slow;
    setup(&slow, addr, 4, 200);
    CHECK_RC(ol_net_call_async(cnet, &slow.call, on_done, &slow), 0);
    CHECK(wait_done(1, 10000));
    CHECK_RC(slow.result, -ETIMEDOUT);
    release(&slow, 1);
    usleep(900000); /* the stall over */

    /* The timeout reset the endpoint: connect again first, so that the
     * destroy below closes an established one.  (Debian's UCX 1.13.1 can
     * abort in its TCP connection manager, a tcp_sockcm_ep.c assertion in
     * its async thread, when an endpoint is force-closed while its
     * connection handshake is still running: 2 of about 190 runs under load
     * when these calls opened a new connection to the hung server.) */
    CHECK(sync_echo(cnet, addr, 9, "again"));

    /* Destroy with calls in flight (the server hung again): every callback
     * has run by the time ol_net_destroy returns. */
    atomic_store(&done, 0);
    ol_net_test_stall(snet, 500);
    usleep(10000);
    struct one *late = calloc(100, sizeof(*late));
    for (unsigned i = 0; i < 100; i++) {
        setup(&late[i], addr, i, 20000);
        CHECK_RC(ol_net_call_async(cnet, &late[i].call, on_done, &late[i]), 0);
    }
    ol_net_destroy(cnet);
    CHECK_RC(atomic_load(&done), 100);
    unsigned once_late = 0;
    for (unsigned i = 0; i < 100; i++)
        once_late += atomic_load(&late[i].calls) == 1;
    CHECK_RC(once_late, 100);
    release(late, 100);
    free(late);
    free(ops);
    ol_net_destroy(snet);
    return failures ? 1 : 0;
}
