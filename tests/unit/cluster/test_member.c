/* Membership and self-fencing against a real etcd: two members see each
 * other; a member that stops renewing (a crash) drops out of the other's
 * live set when its lease expires, and comes back when it registers again;
 * a clean leave is seen at once; a stopped etcd fences the node before its
 * TTL runs out (counted once), and after etcd returns the node registers
 * again with a new lease and acks again; a killed and restarted etcd the
 * same.  TTL 3 s and a 500 ms margin keep the file near 15 s. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cluster/etcd.h"
#include "cluster/member.h"

#include "etcd_fixture.h"

enum { TTL_S = 3, MARGIN_MS = 500 };

/* What one member's on_live reported last. */
struct seen {
    pthread_mutex_t mu;
    char names[256];
    unsigned calls;
};

static void on_live(void *arg, const struct ol_member_peer *peers, size_t n)
{
    struct seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->names[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(s->names);
        snprintf(s->names + len, sizeof(s->names) - len, "%s%s@%s", i ? "," : "", peers[i].name,
                 peers[i].s3_addr);
    }
    s->calls++;
    pthread_mutex_unlock(&s->mu);
}

static bool seen_is(struct seen *s, const char *want)
{
    pthread_mutex_lock(&s->mu);
    bool eq = strcmp(s->names, want) == 0;
    pthread_mutex_unlock(&s->mu);
    return eq;
}

static void show(struct seen *s, const char *want)
{
    pthread_mutex_lock(&s->mu);
    fprintf(stderr, "  live set \"%s\", want \"%s\"\n", s->names, want);
    pthread_mutex_unlock(&s->mu);
}

#define CHECK_LIVE(s, want, ms)                                                                    \
    do {                                                                                           \
        if (!WAIT_FOR(seen_is((s), (want)), (ms))) {                                               \
            fprintf(stderr, "%s:%d: live set wrong after %d ms\n", __FILE__, __LINE__, (ms));      \
            show((s), (want));                                                                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static struct ol_member_opts opts_for(const char *url, const char *name, const char *s3,
                                      struct seen *s, bool bind)
{
    return (struct ol_member_opts){
        .endpoints = url,
        .cluster = "t",
        .name = name,
        .s3_addr = s3,
        .ucx_addr = "127.0.0.1:1",
        .ttl_s = TTL_S,
        .margin_ms = MARGIN_MS,
        .bind_process = bind,
        .on_live = s ? on_live : NULL,
        .arg = s,
    };
}

static void test_options(const char *url)
{
    struct ol_member *m = NULL;
    struct ol_member_opts o = opts_for(url, "x", "", NULL, false);
    o.ttl_s = 1;
    CHECK_RC(ol_member_start(&m, &o), -EINVAL);
    o = opts_for(url, "x", "", NULL, false);
    o.margin_ms = 2000; /* more than TTL/3 */
    CHECK_RC(ol_member_start(&m, &o), -EINVAL);
    o = opts_for(url, "a/b", "", NULL, false);
    CHECK_RC(ol_member_start(&m, &o), -EINVAL);
    CHECK(m == NULL);
}

static void test_membership(struct etcd_fixture *fx, struct ol_member **a, struct seen *sa)
{
    struct seen sb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ol_member *b = NULL;
    struct ol_member_opts oa = opts_for(fx->url, "node-a", "127.0.0.1:9001", sa, true);
    struct ol_member_opts ob = opts_for(fx->url, "node-b", "127.0.0.1:9002", &sb, false);

    /* no member bound yet: single-node mode may ack */
    CHECK(ol_member_may_ack_writes());
    CHECK_RC(ol_member_start(a, &oa), 0);
    CHECK_RC(ol_member_start(&b, &ob), 0);
    if (!*a || !b)
        return;
    CHECK_RC(ol_member_wait(*a, 3000), 0);
    CHECK_RC(ol_member_wait(b, 3000), 0);
    CHECK(ol_member_may_ack_writes());
    CHECK_LIVE(sa, "node-a@127.0.0.1:9001,node-b@127.0.0.1:9002", 2000);
    CHECK_LIVE(&sb, "node-a@127.0.0.1:9001,node-b@127.0.0.1:9002", 2000);

    /* the key holds the node's addresses and is attached to its lease */
    struct ol_etcd *c = NULL;
    CHECK_RC(ol_etcd_create(&c, fx->url, 2000), 0);
    struct ol_etcd_kv kv;
    struct ol_member_stats st;
    ol_member_stats(b, &st);
    CHECK_RC(ol_etcd_get(c, "/openlake/t/nodes/node-b", &kv, NULL), 0);
    CHECK(kv.lease == st.lease && st.lease != 0 && strstr(kv.value, "127.0.0.1:9002"));
    ol_etcd_kv_clear(&kv);

    /* a second process with the same name waits: it never acks */
    struct ol_member *dup = NULL;
    struct ol_member_opts od = opts_for(fx->url, "node-b", "127.0.0.1:9999", NULL, false);
    CHECK_RC(ol_member_start(&dup, &od), 0);
    CHECK_RC(ol_member_wait(dup, 600), -ETIMEDOUT);
    ol_member_stop(dup, true);

    /* b crashes (no revoke): a sees it go when its lease expires, not before
     * its TTL minus a renewal interval */
    uint64_t t0 = ol_mono_ms();
    ol_member_stop(b, false);
    CHECK_LIVE(sa, "node-a@127.0.0.1:9001", (TTL_S + 3) * 1000);
    uint64_t gone = ol_mono_ms() - t0;
    CHECK(gone >= (TTL_S * 1000) * 2 / 3 - 200);
    printf("a crashed member left the live set after %llu ms (TTL %d s)\n",
           (unsigned long long)gone, TTL_S);
    CHECK_RC(ol_etcd_get(c, "/openlake/t/nodes/node-b", &kv, NULL), -ENOENT);

    /* it comes back */
    sb.names[0] = '\0';
    CHECK_RC(ol_member_start(&b, &ob), 0);
    CHECK_RC(ol_member_wait(b, 3000), 0);
    CHECK_LIVE(sa, "node-a@127.0.0.1:9001,node-b@127.0.0.1:9002", 2000);
    CHECK_LIVE(&sb, "node-a@127.0.0.1:9001,node-b@127.0.0.1:9002", 2000);

    /* a clean leave is seen at once */
    t0 = ol_mono_ms();
    ol_member_stop(b, true);
    CHECK_LIVE(sa, "node-a@127.0.0.1:9001", 1000);
    CHECK(ol_mono_ms() - t0 < 1000);
    ol_etcd_destroy(c);

    ol_member_stats(*a, &st);
    CHECK(st.registrations == 1 && st.fences == 0 && st.renewals >= 2 && !st.fenced);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* etcd went away just before t0: the last renewal etcd answered was sent
 * before t0 (5 ms of slack for a stopped etcd's last instructions), so the fence deadline is at
 * most t0 + TTL - margin: before etcd could expire the lease (t0 + TTL at
 * the earliest).  The deadline is exact; no polling slack is needed. */
static void check_deadline(struct ol_member *a, int64_t t0_ns)
{
    struct ol_member_stats st;
    ol_member_stats(a, &st);
    int64_t limit = t0_ns + (int64_t)(TTL_S * 1000 - MARGIN_MS) * 1000000 + 5 * 1000000;
    if (st.deadline_ns > limit) {
        fprintf(stderr, "deadline %lld ms after etcd went away (limit %d)\n",
                (long long)((st.deadline_ns - t0_ns) / 1000000), TTL_S * 1000 - MARGIN_MS);
        failures++;
    }
    CHECK(st.deadline_ns == 0 || st.deadline_ns <= mono_ns()); /* passed, so fenced */
}

/* etcd stops answering (SIGSTOP) for longer than the TTL: a fences before
 * TTL - margin after its last renewal (so before etcd could expire it), and
 * after etcd is back, gets a new lease and acks again. */
static void test_fence_pause(struct etcd_fixture *fx, struct ol_member *a, struct seen *sa)
{
    struct ol_member_stats before, st;
    ol_member_stats(a, &before);
    CHECK(ol_member_may_ack(a) && ol_member_may_ack_writes());
    etcd_fixture_pause(fx);
    int64_t t0_ns = mono_ns();
    uint64_t t0 = ol_mono_ms();
    bool fenced = WAIT_FOR(!ol_member_may_ack(a), TTL_S * 1000);
    uint64_t took = ol_mono_ms() - t0;
    CHECK(fenced);
    CHECK(!ol_member_may_ack_writes());
    check_deadline(a, t0_ns);
    /* and not much earlier than the renewal interval allows (observed late
     * under load, never early) */
    CHECK(took + TTL_S * 1000 / 3 + 500 >= TTL_S * 1000 - MARGIN_MS);
    printf("etcd stopped: fenced after %llu ms (TTL %d s, margin %d ms)\n",
           (unsigned long long)took, TTL_S, MARGIN_MS);
    /* the fence is counted once, after the blocked renewal returns */
    CHECK(WAIT_FOR(({
                       ol_member_stats(a, &st);
                       st.fences == before.fences + 1;
                   }),
                   2000));
    /* stay away past the TTL, so etcd expires the lease when it resumes */
    while (ol_mono_ms() < t0 + TTL_S * 1000 + 1000)
        usleep(50 * 1000);
    CHECK(!ol_member_may_ack(a));
    uint64_t t1 = ol_mono_ms();
    etcd_fixture_resume(fx);
    CHECK_RC(ol_member_wait(a, 5000), 0);
    printf("etcd resumed: acking again after %llu ms\n", (unsigned long long)(ol_mono_ms() - t1));
    CHECK(ol_member_may_ack_writes());
    ol_member_stats(a, &st);
    CHECK(st.fences == before.fences + 1);
    CHECK(st.registrations == before.registrations + 1); /* a new lease */
    CHECK(st.lease != before.lease && st.lease != 0);
    CHECK(st.renew_failures > before.renew_failures);
    /* the live set is re-read and reported after the fence */
    CHECK_LIVE(sa, "node-a@127.0.0.1:9001", 2000);
    struct ol_etcd *c = NULL;
    struct ol_etcd_kv kv;
    CHECK_RC(ol_etcd_create(&c, fx->url, 2000), 0);
    CHECK_RC(ol_etcd_get(c, "/openlake/t/nodes/node-a", &kv, NULL), 0);
    CHECK(kv.lease == st.lease);
    ol_etcd_kv_clear(&kv);
    ol_etcd_destroy(c);
}

/* etcd killed and restarted (same data): connections are refused meanwhile;
 * the node fences, and unfences once etcd is back (its lease survives an
 * etcd restart, which extends it, so it may keep the old one). */
static void test_fence_kill(struct etcd_fixture *fx, struct ol_member *a)
{
    struct ol_member_stats before, st;
    ol_member_stats(a, &before);
    etcd_fixture_kill(fx); /* returns once etcd is dead */
    int64_t t0_ns = mono_ns();
    uint64_t t0 = ol_mono_ms();
    CHECK(WAIT_FOR(!ol_member_may_ack(a), TTL_S * 1000));
    uint64_t took = ol_mono_ms() - t0;
    check_deadline(a, t0_ns);
    printf("etcd killed: fenced after %llu ms\n", (unsigned long long)took);
    CHECK_RC(etcd_fixture_restart(fx), 0);
    uint64_t t1 = ol_mono_ms();
    CHECK_RC(ol_member_wait(a, 5000), 0);
    printf("etcd restarted: acking again after %llu ms\n", (unsigned long long)(ol_mono_ms() - t1));
    ol_member_stats(a, &st);
    CHECK(st.fences == before.fences + 1);
}

int main(void)
{
    struct etcd_fixture fx;
    int rc = etcd_fixture_start(&fx, "cluster_member");
    if (rc)
        return rc;
    test_options(fx.url);
    struct seen sa = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ol_member *a = NULL;
    test_membership(&fx, &a, &sa);
    if (a) {
        test_fence_pause(&fx, a, &sa);
        test_fence_kill(&fx, a);
        ol_member_stop(a, true);
        CHECK(!ol_member_may_ack_writes()); /* a bound member that left */
    }
    etcd_fixture_stop(&fx);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("cluster_member: ok\n");
    return 0;
}
