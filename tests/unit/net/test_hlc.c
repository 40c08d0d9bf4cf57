/* The hybrid logical clock on the drive protocol (net/net.h, "Clock"): every
 * request and reply carries its sender's stamp and the receiver takes it in.
 *
 * Three processes' worth of ol_nets in one process, each with its own clock
 * whose wall time is the real one plus an offset: a drive server over
 * in-memory drives, and two clients.
 *
 *   request   a client 5 s ahead pings: the server's clock is past the
 *             client's stamp when the call returns;
 *   reply     a server 5 s ahead answers: the client's clock is past it
 *             before its call returns;
 *   refused   a client 10 minutes ahead (more than max_ahead_ms): the call
 *             is served, the server's clock does not move, hlc_refused
 *             counts it;
 *   eset      two erasure sets over the same six remote drives, writer A
 *             5 s ahead, writer B on time: B's PUT, made after A's returned,
 *             is the newest version (without the clock on the wire, A's
 *             version would win for 5 s).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/hlc.h"
#include "ec/eset.h"
#include "ec/memdrive.h"
#include "ec/remotedrive.h"
#include "net/drive_server.h"
#include "net/net.h"

#include "check.h"
#include "net/fixture.h"

enum { NDRIVES = 6 };

static void node_start(struct node *n, uint32_t id, int64_t offset_ms)
{
    node_start_key(n, id, offset_ms, NULL);
}

static uint64_t last_ms(struct node *n)
{
    return ol_hlc_stamp_ms(atomic_load(&n->hlc.last));
}

static uint64_t real_ms(void)
{
    return (uint64_t)(ol_wall_ns() / 1000000);
}

static void server_start(struct server *s, int64_t offset_ms)
{
    server_start_key(s, NDRIVES, offset_ms, NULL);
}

static void test_request(void)
{
    struct server s;
    server_start(&s, 0);
    struct node a;
    node_start(&a, 2, 5000);
    struct ol_remotedrive *rd = rdrive(&a, s.addr, 0);
    uint64_t before = ol_hlc_now(&a.hlc);
    CHECK(last_ms(&s.node) < real_ms() + 1000); /* the server on its own time */
    CHECK_RC(ol_remotedrive_ping(rd), 0);
    /* The server took the request's stamp in before it answered. */
    CHECK(atomic_load(&s.node.hlc.last) > before);
    CHECK(last_ms(&s.node) >= real_ms() + 4000);
    struct ol_net_stats st;
    ol_net_stats(s.node.net, &st);
    CHECK(st.hlc_refused == 0);
    ol_remotedrive_destroy(rd);
    ol_net_destroy(a.net);
    server_stop(&s);
}

static void test_reply(void)
{
    struct server s;
    server_start(&s, 5000);
    struct node b;
    node_start(&b, 3, 0);
    struct ol_remotedrive *rd = rdrive(&b, s.addr, 0);
    CHECK(last_ms(&b) < real_ms() + 1000);
    CHECK_RC(ol_remotedrive_ping(rd), 0);
    /* The reply's stamp was taken in before the call returned, and it was
     * read after the request's was (the server's clock is past both). */
    CHECK(last_ms(&b) >= real_ms() + 4000);
    CHECK(atomic_load(&b.hlc.last) <= atomic_load(&s.node.hlc.last) + 1);
    uint64_t next = ol_hlc_now(&b.hlc);
    CHECK(ol_hlc_stamp_ms(next) >= real_ms() + 4000);
    ol_remotedrive_destroy(rd);
    ol_net_destroy(b.net);
    server_stop(&s);
}

static void test_refused(void)
{
    struct server s;
    server_start(&s, 0);
    struct node w;
    node_start(&w, 4, 10 * 60 * 1000); /* past OL_HLC_MAX_AHEAD_MS_DEFAULT */
    struct ol_remotedrive *rd = rdrive(&w, s.addr, 0);
    /* Served all the same, and the clock stays on the server's wall time. */
    CHECK_RC(ol_remotedrive_ping(rd), 0);
    CHECK(last_ms(&s.node) < real_ms() + 60000);
    struct ol_net_stats st;
    ol_net_stats(s.node.net, &st);
    CHECK(st.hlc_refused == 1);
    /* The wild client takes the server's (older) stamp in as any other. */
    ol_net_stats(w.net, &st);
    CHECK(st.hlc_refused == 0);
    ol_remotedrive_destroy(rd);
    ol_net_destroy(w.net);
    server_stop(&s);
}

struct writer {
    struct node node;
    struct ol_remotedrive *rd[NDRIVES];
    struct ol_eset *es;
};

static void writer_start(struct writer *wr, struct server *s, uint32_t id, int64_t offset_ms)
{
    node_start(&wr->node, id, offset_ms);
    struct ol_drive drives[NDRIVES];
    for (unsigned i = 0; i < NDRIVES; i++) {
        wr->rd[i] = rdrive(&wr->node, s->addr, i);
        drives[i] = ol_remotedrive_drive(wr->rd[i]);
    }
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = 4;
    cfg.m = 2;
    cfg.unit_bytes = 64 * 1024;
    cfg.drives = drives;
    cfg.hlc = &wr->node.hlc;
    memcpy(cfg.deployment_id, "hlc-wire-test-id", 16);
    cfg.heal_on_read = false;
    if (ol_eset_create(&cfg, &wr->es) < 0)
        abort();
}

static void writer_stop(struct writer *wr)
{
    ol_eset_destroy(wr->es);
    for (unsigned i = 0; i < NDRIVES; i++)
        ol_remotedrive_destroy(wr->rd[i]);
    ol_net_destroy(wr->node.net);
}

static void test_eset(void)
{
    struct server s;
    server_start(&s, 0);
    struct writer a, b;
    writer_start(&a, &s, 5, 5000);
    writer_start(&b, &s, 6, 0);
    static uint8_t one[100000], two[100000], got[100000];
    memset(one, 1, sizeof(one));
    memset(two, 2, sizeof(two));
    struct ol_eset_obj oa, ob, o;
    for (int round = 0; round < 3; round++) {
        /* A, then B after A returned, then A again after B returned: each
         * write is the newest version when it returns. */
        CHECK_RC(ol_eset_put(a.es, "b", "k", 1, one, sizeof(one), "one", &oa), 0);
        CHECK_RC(ol_eset_put(b.es, "b", "k", 1, two, sizeof(two), "two", &ob), 0);
        CHECK(ol_version_id_cmp(&ob.vid, &oa.vid) > 0);
        for (int r = 0; r < 2; r++) {
            struct ol_eset *es = r ? b.es : a.es;
            memset(got, 0, sizeof(got));
            CHECK_RC(ol_eset_read(es, "b", "k", 1, NULL, 0, sizeof(got), got, &o), 0);
            CHECK(memcmp(got, two, sizeof(two)) == 0);
            CHECK(ol_version_id_cmp(&o.vid, &ob.vid) == 0);
        }
        CHECK_RC(ol_eset_put(a.es, "b", "k", 1, one, sizeof(one), "one", &oa), 0);
        CHECK(ol_version_id_cmp(&oa.vid, &ob.vid) > 0);
        CHECK_RC(ol_eset_read(b.es, "b", "k", 1, NULL, 0, sizeof(got), got, &o), 0);
        CHECK(memcmp(got, one, sizeof(one)) == 0);
    }
    writer_stop(&a);
    writer_stop(&b);
    server_stop(&s);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"request", test_request},
        {"reply", test_reply},
        {"refused", test_refused},
        {"eset", test_eset},
    };
    for (unsigned i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int before = failures;
        tests[i].fn();
        printf("%s: %s\n", tests[i].name, failures == before ? "ok" : "FAILED");
    }
    return failures ? 1 : 0;
}
