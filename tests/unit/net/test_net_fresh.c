/* Calls on endpoints that UCX is still wiring up.
 *
 * A node that comes back (or a peer that connects for the first time)
 * meets a burst of calls at once: the first ones are queued by UCX while
 * the endpoint is being wired up and replayed once its lanes are chosen.
 * UCX 1.13 picks a send's protocol from the endpoint's lanes at the time
 * of the send; a zero-copy send with a header queued on the temporary
 * (tcp) lanes and replayed on shared-memory lanes aborts the process
 * (proto_am.inl "Assertion `max_iov > 1' failed"; openucx/ucx #6872,
 * #8180).  Found by tests/integration/test_cluster_storm.py: a node died
 * when the killed node came back.
 *
 * Each round makes a fresh client ol_net (so a fresh endpoint, and a fresh
 * accepted connection on the server) and fires THREADS calls at once with
 * data of 0 B .. 256 KiB, which an echo server sends back: both the
 * requests and the replies go out while the endpoints may be wiring up.
 * Every call must succeed with its bytes back.  Run with UCX's default
 * transports (shared memory between the two ends) and tcp only. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "net/net.h"

#include "check.h"

enum { ROUNDS = 12, THREADS = 12, MAX_BYTES = 256 * 1024 };

/* The echo server: each request's data back as the reply's data. */
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
    ol_net_reply(req, ol_net_req_check(req), NULL, 0, copy, n);
}

struct caller {
    struct ol_net *net;
    const char *addr;
    unsigned id, round;
    int rc;
    bool same;
};

static void *caller_main(void *arg)
{
    struct caller *c = arg;
    /* Sizes across the eager, zero-copy and rendezvous ranges of both
     * transports. */
    static const size_t sizes[] = {0,     1,     2000,   8192,   17000,
                                   40000, 65536, 100000, 200000, MAX_BYTES};
    size_t n = sizes[(c->id + c->round) % (sizeof(sizes) / sizeof(sizes[0]))];
    uint8_t *out = malloc(MAX_BYTES), *back = malloc(MAX_BYTES);
    if (!out || !back)
        abort();
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(i * 7 + c->id);
    struct ol_net_call call = {.addr = c->addr,
                               .op = 99,
                               .timeout_ms = 10000,
                               .data = out,
                               .data_len = n,
                               .rep_data = back,
                               .rep_data_cap = MAX_BYTES};
    c->rc = ol_net_call(c->net, &call);
    c->same = call.rep_data_len == n && memcmp(out, back, n) == 0;
    free(out);
    free(back);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ol_net *snet;
    if (ol_net_create(NULL, &snet) < 0) {
        fprintf(stderr, "UCX did not start: skipped\n");
        return 77;
    }
    CHECK_RC(ol_net_listen(snet, "127.0.0.1", 0, echo_serve, NULL, NULL), 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_net_port(snet));
    unsigned ok = 0;
    for (unsigned r = 0; r < ROUNDS; r++) {
        struct ol_net *cnet;
        CHECK_RC(ol_net_create(NULL, &cnet), 0);
        struct caller cs[THREADS];
        pthread_t th[THREADS];
        for (unsigned i = 0; i < THREADS; i++) {
            cs[i] = (struct caller){.net = cnet, .addr = addr, .id = i, .round = r};
            CHECK(pthread_create(&th[i], NULL, caller_main, &cs[i]) == 0);
        }
        for (unsigned i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            if (cs[i].rc != 0 || !cs[i].same)
                fprintf(stderr, "round %u call %u: %s, bytes %s\n", r, i, ol_strerror(cs[i].rc),
                        cs[i].same ? "same" : "differ");
            CHECK_RC(cs[i].rc, 0);
            CHECK(cs[i].same);
            ok += cs[i].rc == 0 && cs[i].same;
        }
        ol_net_destroy(cnet);
    }
    printf("%u of %u calls on fresh endpoints answered whole\n", ok, ROUNDS * THREADS);
    ol_net_destroy(snet);
    return failures ? 1 : 0;
}
