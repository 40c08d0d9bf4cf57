/* Vouching (cluster/vouch.h, cluster/member.h "When etcd is down").
 *
 * The counting rule alone, on a tally fed by hand: a majority with self
 * (maps of 1 to 5 nodes), a peer that reaches etcd breaks it at once, stale
 * vouches expire, the asker's own name and unknown names do not count; the
 * answer's wire form round-trips and refuses broken bytes.
 *
 * Then a member against a real etcd, with a fake vouch function standing for
 * the peers of a 3-node map: while etcd answers nobody is asked; with etcd
 * stopped the member acknowledges on vouches past its lease (state
 * etcd_down_vouched, no fence counted); a peer that reaches etcd fences it
 * within a round; vouches come back, then stop coming (a cut-off node) and
 * the member fences once they are stale; etcd back: the lease again.  TTL
 * 3 s and a 500 ms margin keep that part near 10 s. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cluster/member.h"
#include "cluster/vouch.h"

#include "etcd_fixture.h"

enum { QUIET_MS = 2500, PERIOD_MS = 1500 };
#define SEC 1000000000LL

static struct ol_vouch vouch(const char *name, uint32_t since_ms, int64_t asked_ns)
{
    struct ol_vouch v = {.since_etcd_ms = since_ms, .asked_ns = asked_ns};
    snprintf(v.name, sizeof(v.name), "%s", name);
    v.lease_live = since_ms < QUIET_MS;
    return v;
}

static void test_rule(void)
{
    static struct ol_vouch_tally t;
    int64_t t0 = 100LL * SEC, per = (int64_t)PERIOD_MS * 1000000;

    /* the predicate: quiet for at least QUIET_MS, whatever the lease says */
    struct ol_vouch v = vouch("b", QUIET_MS, t0);
    CHECK(ol_vouch_is_vouch(&v, QUIET_MS));
    v.lease_live = true; /* its deadline has not passed yet, etcd silent all the same */
    CHECK(ol_vouch_is_vouch(&v, QUIET_MS));
    v = vouch("b", QUIET_MS - 1, t0);
    CHECK(!ol_vouch_is_vouch(&v, QUIET_MS));
    v = vouch("b", OL_VOUCH_NEVER, t0);
    CHECK(ol_vouch_is_vouch(&v, QUIET_MS));

    /* nothing known: nothing allowed */
    ol_vouch_tally_init(&t, PERIOD_MS, QUIET_MS);
    CHECK(ol_vouch_tally_until(&t) == 0);
    ol_vouch_tally_add(&t, "a", NULL, 0, 0, t0);
    CHECK(ol_vouch_tally_until(&t) == 0); /* no map yet */

    /* one node: itself is the majority */
    ol_vouch_tally_add(&t, "a", NULL, 0, 1, t0);
    CHECK(ol_vouch_tally_until(&t) == t0 + per);

    /* two nodes: the one peer is needed */
    ol_vouch_tally_init(&t, PERIOD_MS, QUIET_MS);
    ol_vouch_tally_add(&t, "a", NULL, 0, 2, t0);
    CHECK(ol_vouch_tally_until(&t) == 0);
    struct ol_vouch two[] = {vouch("b", 3000, t0 + 5)};
    ol_vouch_tally_add(&t, "a", two, 1, 2, t0);
    CHECK(ol_vouch_tally_until(&t) == t0 + 5 + per);
    CHECK(ol_vouch_tally_count(&t, t0 + per) == 1);
    /* ... which reaches etcd now: broken at once, not when the vouch ages */
    two[0] = vouch("b", 10, t0 + SEC);
    ol_vouch_tally_add(&t, "a", two, 1, 2, t0 + SEC);
    CHECK(ol_vouch_tally_until(&t) == 0);
    CHECK(ol_vouch_tally_count(&t, t0 + SEC) == 0);

    /* three nodes: one of the two peers is enough */
    ol_vouch_tally_init(&t, PERIOD_MS, QUIET_MS);
    struct ol_vouch three[] = {vouch("b", 4000, t0), vouch("c", 100, t0 + 1)};
    ol_vouch_tally_add(&t, "a", three, 2, 3, t0);
    CHECK(ol_vouch_tally_until(&t) == t0 + per);
    /* a later round where b does not answer (a lost question): its vouch
     * still counts until it is stale, then the rule fails */
    ol_vouch_tally_add(&t, "a", &three[1], 1, 3, t0 + SEC);
    CHECK(ol_vouch_tally_until(&t) == t0 + per);
    CHECK(ol_vouch_tally_count(&t, t0 + per - 1) == 1 && ol_vouch_tally_count(&t, t0 + per) == 0);
    /* b answers again: counted from the new question */
    three[0].asked_ns = t0 + 2 * SEC;
    ol_vouch_tally_add(&t, "a", three, 1, 3, t0 + 2 * SEC);
    CHECK(ol_vouch_tally_until(&t) == t0 + 2 * SEC + per);
    /* an answer asked earlier than the one counted does not shorten it */
    three[0].asked_ns = t0 + SEC;
    ol_vouch_tally_add(&t, "a", three, 1, 3, t0 + SEC);
    CHECK(ol_vouch_tally_until(&t) == t0 + 2 * SEC + per);
    /* both peers reach etcd: this node is the odd one out */
    struct ol_vouch reach[] = {vouch("b", 5, t0 + 3 * SEC), vouch("c", 5, t0 + 3 * SEC)};
    ol_vouch_tally_add(&t, "a", reach, 2, 3, t0 + 3 * SEC);
    CHECK(ol_vouch_tally_until(&t) == 0);

    /* the asker's own name (a loop in the map) and empty names never count */
    ol_vouch_tally_init(&t, PERIOD_MS, QUIET_MS);
    struct ol_vouch self[] = {vouch("a", 9000, t0), vouch("", 9000, t0)};
    ol_vouch_tally_add(&t, "a", self, 2, 2, t0);
    CHECK(ol_vouch_tally_until(&t) == 0 && t.n == 0);
    /* the same peer twice is one voice */
    struct ol_vouch twice[] = {vouch("b", 9000, t0), vouch("b", 9000, t0 + 1)};
    ol_vouch_tally_add(&t, "a", twice, 2, 4, t0);
    CHECK(ol_vouch_tally_until(&t) == 0 && t.n == 1);

    /* four and five nodes: two peers needed; the deadline is the second
     * latest expiry */
    for (size_t nmap = 4; nmap <= 5; nmap++) {
        ol_vouch_tally_init(&t, PERIOD_MS, QUIET_MS);
        struct ol_vouch f[] = {vouch("b", 9000, t0 + 300), vouch("c", 9000, t0 + 100),
                               vouch("d", 9000, t0 + 200), vouch("e", 0, t0)};
        ol_vouch_tally_add(&t, "a", f, 1, nmap, t0);
        CHECK(ol_vouch_tally_until(&t) == 0);
        ol_vouch_tally_add(&t, "a", f, 4, nmap, t0);
        CHECK(ol_vouch_tally_until(&t) == t0 + 200 + per);
        /* d reaches etcd: c's vouch is the second now */
        f[2].since_etcd_ms = 0;
        ol_vouch_tally_add(&t, "a", &f[2], 1, nmap, t0);
        CHECK(ol_vouch_tally_until(&t) == t0 + 100 + per);
    }
    /* clearing forgets everything (etcd answers again) */
    ol_vouch_tally_clear(&t);
    CHECK(ol_vouch_tally_until(&t) == 0 && t.n == 0);
}

static void test_wire(void)
{
    uint8_t buf[OL_VOUCH_WIRE_MAX];
    struct ol_wbuf w = {.p = buf, .cap = sizeof(buf)};
    struct ol_vouch v = vouch("node-7", 123456, 0), got;
    v.lease_live = true;
    char longname[OL_MAP_MAX_NAME + 1];
    memset(longname, 'n', OL_MAP_MAX_NAME);
    longname[OL_MAP_MAX_NAME] = '\0';
    ol_vouch_encode(&v, &w);
    CHECK(!w.over);
    CHECK_RC(ol_vouch_decode(buf, w.len, &got), 0);
    CHECK(strcmp(got.name, "node-7") == 0 && got.lease_live && got.since_etcd_ms == 123456);
    /* truncated anywhere */
    for (size_t n = 0; n < w.len; n++)
        CHECK_RC(ol_vouch_decode(buf, n, &got), -EPROTO);
    /* trailing bytes: a later version's fields */
    uint8_t more[sizeof(buf) + 8];
    memcpy(more, buf, w.len);
    memset(more + w.len, 0xee, 8);
    CHECK_RC(ol_vouch_decode(more, w.len + 8, &got), 0);
    /* the longest name; and past it */
    snprintf(v.name, sizeof(v.name), "%s", longname);
    w = (struct ol_wbuf){.p = buf, .cap = sizeof(buf)};
    ol_vouch_encode(&v, &w);
    CHECK(!w.over && ol_vouch_decode(buf, w.len, &got) == 0 && strcmp(got.name, longname) == 0);
    buf[0] = OL_MAP_MAX_NAME + 1;
    CHECK_RC(ol_vouch_decode(buf, w.len, &got), -EPROTO);
    /* an empty name, a NUL inside */
    uint8_t empty[] = {0, 0, 0, 0, 1, 0, 0, 0, 0};
    CHECK_RC(ol_vouch_decode(empty, sizeof(empty), &got), -EPROTO);
    uint8_t nul[] = {3, 0, 0, 0, 'a', 0, 'b', 0, 0, 0, 0, 0};
    CHECK_RC(ol_vouch_decode(nul, sizeof(nul), &got), -EPROTO);
}

/* ---- a member with fake peers ---- */

enum { TTL_S = 3, MARGIN_MS = 500, M_PERIOD_MS = 600, M_ROUND_MS = 100 };

enum peer_mode { PEERS_VOUCH, PEERS_REACH_ETCD, PEERS_SILENT };

static struct {
    _Atomic int mode;
    atomic_uint calls;
} fake;

/* A 3-node map: a (the member), b and c; c never answers, b as the mode says. */
static int fake_vouch(void *arg, struct ol_vouch *out, size_t cap, size_t *nmap)
{
    (void)arg;
    atomic_fetch_add(&fake.calls, 1);
    *nmap = 3;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
    int mode = atomic_load(&fake.mode);
    if (mode == PEERS_SILENT || cap == 0)
        return 0;
    out[0] = vouch("b", mode == PEERS_VOUCH ? 60000 : 20, now);
    return 1;
}

static enum ol_member_ack state(const struct ol_member *m)
{
    return ol_member_ack_state(m);
}

static void test_member(struct etcd_fixture *fx)
{
    struct ol_member_opts o = {.endpoints = fx->url,
                               .cluster = "t",
                               .name = "a",
                               .ttl_s = TTL_S,
                               .margin_ms = MARGIN_MS,
                               .bind_process = true,
                               .vouch = fake_vouch,
                               .vouch_period_ms = M_PERIOD_MS,
                               .vouch_round_ms = M_ROUND_MS};
    struct ol_member *m = NULL;
    CHECK_RC(ol_member_start(&m, &o), 0);
    if (!m)
        return;
    CHECK_RC(ol_member_wait(m, 5000), 0);
    CHECK(state(m) == OL_MEMBER_ACK_LEASE);
    /* a healthy node answers "I reach etcd" and asks nobody */
    struct ol_vouch mine = {0};
    CHECK_RC(ol_member_vouch_answer(&mine), 0);
    CHECK(mine.lease_live && mine.since_etcd_ms < TTL_S * 1000 / 3 + 200);
    usleep(1500 * 1000);
    CHECK(atomic_load(&fake.calls) == 0);

    /* etcd stops: the lease runs out, the vouches carry the acks */
    atomic_store(&fake.mode, PEERS_VOUCH);
    etcd_fixture_pause(fx);
    uint64_t t0 = ol_mono_ms();
    CHECK(WAIT_FOR(state(m) == OL_MEMBER_ACK_VOUCHED, TTL_S * 1000));
    uint64_t vouched_at = ol_mono_ms() - t0;
    bool always = true;
    while (ol_mono_ms() < t0 + TTL_S * 1000 + 1500) {
        always = always && ol_member_may_ack(m) && ol_member_may_ack_writes();
        usleep(20 * 1000);
    }
    CHECK(always);
    CHECK(ol_member_ack_state_process() == OL_MEMBER_ACK_VOUCHED);
    struct ol_member_stats st;
    ol_member_stats(m, &st);
    CHECK(st.fences == 0 && st.vouched_spells == 1 && st.vouchers == 1 && st.vouch_rounds > 5);
    CHECK(st.ack == OL_MEMBER_ACK_VOUCHED && st.since_etcd_ms >= TTL_S * 1000 - MARGIN_MS);
    CHECK_RC(ol_member_vouch_answer(&mine), 0);
    CHECK(!mine.lease_live && mine.since_etcd_ms >= TTL_S * 1000 - MARGIN_MS);
    printf("etcd stopped: acking on vouches after %llu ms, no fence\n",
           (unsigned long long)vouched_at);

    /* b reaches etcd: this node is the odd one out, fenced within a round */
    atomic_store(&fake.mode, PEERS_REACH_ETCD);
    uint64_t t1 = ol_mono_ms();
    CHECK(WAIT_FOR(!ol_member_may_ack(m), 3 * M_ROUND_MS));
    printf("a peer reaches etcd: fenced after %llu ms\n", (unsigned long long)(ol_mono_ms() - t1));
    CHECK(state(m) == OL_MEMBER_FENCED && !ol_member_may_ack_writes());
    CHECK(WAIT_FOR(({
                       ol_member_stats(m, &st);
                       st.fences == 1;
                   }),
                   3000));

    /* b vouches again, then goes silent (the node is cut off): the last
     * vouch counts for the period, not longer */
    atomic_store(&fake.mode, PEERS_VOUCH);
    CHECK(WAIT_FOR(state(m) == OL_MEMBER_ACK_VOUCHED, 3 * M_ROUND_MS));
    atomic_store(&fake.mode, PEERS_SILENT);
    uint64_t t2 = ol_mono_ms();
    CHECK(WAIT_FOR(!ol_member_may_ack(m), M_PERIOD_MS + 3 * M_ROUND_MS));
    uint64_t stale = ol_mono_ms() - t2;
    CHECK(stale + 50 >= M_PERIOD_MS - 2 * M_ROUND_MS);
    printf("vouches stop: fenced after %llu ms (period %d ms)\n", (unsigned long long)stale,
           M_PERIOD_MS);

    /* etcd back: the lease again (kept or granted anew), asking stops */
    etcd_fixture_resume(fx);
    CHECK_RC(ol_member_wait(m, 6000), 0);
    CHECK(WAIT_FOR(state(m) == OL_MEMBER_ACK_LEASE, 3000));
    usleep(3 * M_ROUND_MS * 1000);
    unsigned calls = atomic_load(&fake.calls);
    usleep(5 * M_ROUND_MS * 1000);
    CHECK(atomic_load(&fake.calls) == calls);
    ol_member_stop(m, true);
    CHECK_RC(ol_member_vouch_answer(&mine), -ENOENT); /* stopped: vouches for no one */
    CHECK(!ol_member_may_ack_writes());
}

int main(void)
{
    test_rule();
    test_wire();
    int rule_failures = failures;
    struct etcd_fixture fx;
    int rc = etcd_fixture_start(&fx, "cluster_vouch");
    if (rc == 0) {
        test_member(&fx);
        etcd_fixture_stop(&fx);
    } else if (rc == 77) {
        printf("no etcd: the member part is skipped\n");
    } else {
        failures++;
    }
    if (failures) {
        fprintf(stderr, "%d checks failed (%d in the rule and wire parts)\n", failures,
                rule_failures);
        return 1;
    }
    printf("cluster_vouch: ok\n");
    return 0;
}
