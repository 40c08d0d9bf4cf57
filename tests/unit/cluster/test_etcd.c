/* The etcd client against a real etcd: put/get/delete/range, compare-and-swap
 * wins and losses, leases (renewal, revocation, expiry deletes the key),
 * watches (puts and deletes in order, compaction, cancellation), and the
 * failure paths (refused connection, next endpoint, timeout on a silent etcd). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cluster/etcd.h"
#include "core/clock.h"

#include "etcd_fixture.h"

static struct etcd_fixture fx;

/* -ENOENT, 0 or an error, with nothing left to free. */
static int probe(struct ol_etcd *c, const char *key)
{
    struct ol_etcd_kv kv;
    int rc = ol_etcd_get(c, key, &kv, NULL);
    ol_etcd_kv_clear(&kv);
    return rc;
}

static void test_kv(struct ol_etcd *c)
{
    struct ol_etcd_kv kv;
    int64_t rev1 = 0, rev2 = 0, rev = 0;
    CHECK_RC(ol_etcd_put(c, "/t/kv/a", "one", 3, 0, &rev1), 0);
    CHECK(rev1 > 0);
    CHECK_RC(ol_etcd_get(c, "/t/kv/a", &kv, &rev), 0);
    CHECK(kv.value_len == 3 && memcmp(kv.value, "one", 3) == 0);
    CHECK(strcmp(kv.key, "/t/kv/a") == 0);
    CHECK(kv.mod_rev == rev1 && kv.create_rev == rev1 && kv.version == 1 && kv.lease == 0);
    CHECK(rev >= rev1);
    ol_etcd_kv_clear(&kv);

    /* binary value with NULs and every length mod 3 (base64 padding) */
    unsigned char bin[67];
    for (unsigned i = 0; i < sizeof(bin); i++)
        bin[i] = (unsigned char)(i * 37);
    for (size_t len = 0; len <= 5; len++) {
        CHECK_RC(ol_etcd_put(c, "/t/kv/bin", bin, len, 0, NULL), 0);
        CHECK_RC(ol_etcd_get(c, "/t/kv/bin", &kv, NULL), 0);
        CHECK(kv.value_len == len && memcmp(kv.value, bin, len) == 0);
        ol_etcd_kv_clear(&kv);
    }
    CHECK_RC(ol_etcd_put(c, "/t/kv/bin", bin, sizeof(bin), 0, NULL), 0);
    CHECK_RC(ol_etcd_get(c, "/t/kv/bin", &kv, NULL), 0);
    CHECK(kv.value_len == sizeof(bin) && memcmp(kv.value, bin, sizeof(bin)) == 0);
    ol_etcd_kv_clear(&kv);

    CHECK_RC(ol_etcd_put(c, "/t/kv/a", "two", 3, 0, &rev2), 0);
    CHECK(rev2 > rev1);
    CHECK_RC(ol_etcd_get(c, "/t/kv/a", &kv, NULL), 0);
    CHECK(kv.mod_rev == rev2 && kv.create_rev == rev1 && kv.version == 2);
    CHECK(memcmp(kv.value, "two", 3) == 0);
    ol_etcd_kv_clear(&kv);

    CHECK_RC(ol_etcd_get(c, "/t/kv/missing", &kv, NULL), -ENOENT);
    int64_t deleted = -1;
    CHECK_RC(ol_etcd_delete(c, "/t/kv/a", false, &deleted), 0);
    CHECK(deleted == 1);
    CHECK_RC(ol_etcd_get(c, "/t/kv/a", &kv, NULL), -ENOENT);
    CHECK_RC(ol_etcd_delete(c, "/t/kv/a", false, &deleted), 0);
    CHECK(deleted == 0);
    CHECK_RC(ol_etcd_put(c, "", "x", 1, 0, NULL), -EINVAL);
}

static void test_range(struct ol_etcd *c)
{
    /* "/t/r/" must not catch "/t/r0" or "/t/s" (prefix end = "/t/r0") */
    const char *keys[] = {"/t/r/3", "/t/r/1", "/t/r/2", "/t/r/10", "/t/r0", "/t/s", "/t/r/\xff"};
    for (unsigned i = 0; i < 7; i++)
        CHECK_RC(ol_etcd_put(c, keys[i], keys[i], strlen(keys[i]), 0, NULL), 0);
    struct ol_etcd_range r;
    CHECK_RC(ol_etcd_get_prefix(c, "/t/r/", 0, &r), 0);
    CHECK(r.n == 5 && !r.more && r.rev > 0);
    if (r.n == 5) {
        CHECK(strcmp(r.kvs[0].key, "/t/r/1") == 0);
        CHECK(strcmp(r.kvs[1].key, "/t/r/10") == 0);
        CHECK(strcmp(r.kvs[2].key, "/t/r/2") == 0);
        CHECK(strcmp(r.kvs[3].key, "/t/r/3") == 0);
        CHECK(strcmp(r.kvs[4].key, "/t/r/\xff") == 0);
        CHECK(strcmp(r.kvs[3].value, "/t/r/3") == 0);
    }
    ol_etcd_range_clear(&r);
    CHECK_RC(ol_etcd_get_prefix(c, "/t/r/", 2, &r), 0);
    CHECK(r.n == 2 && r.more);
    ol_etcd_range_clear(&r);
    CHECK_RC(ol_etcd_get_prefix(c, "/t/nothing/", 0, &r), 0);
    CHECK(r.n == 0 && !r.more);
    ol_etcd_range_clear(&r);
    /* all keys */
    CHECK_RC(ol_etcd_get_prefix(c, "", 0, &r), 0);
    CHECK(r.n >= 7);
    ol_etcd_range_clear(&r);

    int64_t deleted = 0;
    CHECK_RC(ol_etcd_delete(c, "/t/r/", true, &deleted), 0);
    CHECK(deleted == 5);
    struct ol_etcd_kv kv;
    CHECK_RC(ol_etcd_get(c, "/t/r0", &kv, NULL), 0);
    ol_etcd_kv_clear(&kv);
}

static void test_cas(struct ol_etcd *c)
{
    int64_t rev1 = 0, rev2 = 0;
    /* create-only: the first wins, the second loses */
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_ABSENT, 0, "v1", 2, 0, &rev1), 0);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_ABSENT, 0, "v9", 2, 0, NULL), -OL_ECASFAIL);
    /* on mod_revision: the writer that read rev1 wins once; a stale one loses */
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, rev1, "v2", 2, 0, &rev2), 0);
    CHECK(rev2 > rev1);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, rev1, "v3", 2, 0, NULL), -OL_ECASFAIL);
    struct ol_etcd_kv kv;
    CHECK_RC(ol_etcd_get(c, "/t/cas", &kv, NULL), 0);
    CHECK(memcmp(kv.value, "v2", 2) == 0 && kv.mod_rev == rev2 && kv.version == 2);
    ol_etcd_kv_clear(&kv);
    /* on version */
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_VERSION, 1, "v4", 2, 0, NULL), -OL_ECASFAIL);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_VERSION, 2, "v4", 2, 0, NULL), 0);
    /* mod_revision 0 means absent */
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, 0, "v5", 2, 0, NULL), -OL_ECASFAIL);
    CHECK_RC(ol_etcd_cas(c, "/t/cas-new", OL_ETCD_IF_MOD, 0, "n", 1, 0, NULL), 0);
    /* delete on condition */
    CHECK_RC(ol_etcd_get(c, "/t/cas", &kv, NULL), 0);
    int64_t cur = kv.mod_rev;
    ol_etcd_kv_clear(&kv);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, cur - 1, NULL, 0, 0, NULL), -OL_ECASFAIL);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, cur, NULL, 0, 0, NULL), 0);
    CHECK_RC(ol_etcd_get(c, "/t/cas", &kv, NULL), -ENOENT);
    CHECK_RC(ol_etcd_cas(c, "/t/cas", OL_ETCD_IF_MOD, -1, "x", 1, 0, NULL), -EINVAL);
}

static void test_lease(struct ol_etcd *c)
{
    int64_t id = 0, ttl = 0, left = 0;
    CHECK_RC(ol_etcd_lease_grant(c, 30, &id, &ttl), 0);
    CHECK(id != 0 && ttl == 30);
    CHECK_RC(ol_etcd_put(c, "/t/lease/a", "a", 1, id, NULL), 0);
    struct ol_etcd_kv kv;
    CHECK_RC(ol_etcd_get(c, "/t/lease/a", &kv, NULL), 0);
    CHECK(kv.lease == id);
    ol_etcd_kv_clear(&kv);
    CHECK_RC(ol_etcd_lease_keepalive(c, id, &left), 0);
    CHECK(left == 30);
    /* revoking deletes the lease's keys */
    CHECK_RC(ol_etcd_lease_revoke(c, id), 0);
    CHECK_RC(ol_etcd_get(c, "/t/lease/a", &kv, NULL), -ENOENT);
    CHECK_RC(ol_etcd_lease_keepalive(c, id, &left), -ENOENT);
    CHECK_RC(ol_etcd_lease_revoke(c, id), -ENOENT);
    CHECK_RC(ol_etcd_put(c, "/t/lease/b", "b", 1, id, NULL), -ENOENT);

    /* expiry deletes the key: etcd's shortest TTL is about 2 s */
    CHECK_RC(ol_etcd_lease_grant(c, 2, &id, &ttl), 0);
    CHECK_RC(ol_etcd_put(c, "/t/lease/c", "c", 1, id, NULL), 0);
    uint64_t t0 = ol_mono_ms();
    CHECK(WAIT_FOR(probe(c, "/t/lease/c") == -ENOENT, 6000));
    uint64_t took = ol_mono_ms() - t0;
    CHECK(took >= 1000); /* not deleted before the lease ran out */
    printf("lease of %llds expired after %llu ms\n", (long long)ttl, (unsigned long long)took);
    CHECK_RC(ol_etcd_lease_keepalive(c, id, &left), -ENOENT);
}

struct events {
    int n;
    enum ol_etcd_event_type type[16];
    char key[16][32];
    char value[16][8];
    int64_t mod_rev[16];
    size_t value_len[16];
    uint32_t value_sum[16]; /* a checksum of the whole value */
    int stop_after;         /* return -EINTR after this many (0: never) */
};

static uint32_t sum(const void *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
    return h;
}

static int on_event(void *arg, const struct ol_etcd_event *ev)
{
    struct events *e = arg;
    if (e->n < 16) {
        e->type[e->n] = ev->type;
        snprintf(e->key[e->n], sizeof(e->key[0]), "%s", ev->kv->key);
        snprintf(e->value[e->n], sizeof(e->value[0]), "%s", ev->kv->value);
        e->mod_rev[e->n] = ev->kv->mod_rev;
        e->value_len[e->n] = ev->kv->value_len;
        e->value_sum[e->n] = sum(ev->kv->value, ev->kv->value_len);
    }
    e->n++;
    return e->stop_after && e->n >= e->stop_after ? -EINTR : 0;
}

static void *cancel_later(void *arg)
{
    usleep(200 * 1000);
    ol_etcd_watch_cancel(arg);
    return NULL;
}

static void test_watch(struct ol_etcd *c)
{
    struct ol_etcd_range r;
    CHECK_RC(ol_etcd_get_prefix(c, "/t/w/", 0, &r), 0);
    int64_t from = r.rev + 1;
    ol_etcd_range_clear(&r);
    struct events ev = {0};
    struct ol_etcd_watch *w = NULL;
    CHECK_RC(ol_etcd_watch_open(c, "/t/w/", from, on_event, &ev, &w), 0);
    if (!w)
        return;
    /* changes made before the first poll are delivered too (from a revision) */
    CHECK_RC(ol_etcd_put(c, "/t/w/a", "1", 1, 0, NULL), 0);
    CHECK_RC(ol_etcd_put(c, "/t/w/b", "2", 1, 0, NULL), 0);
    CHECK_RC(ol_etcd_put(c, "/t/other", "x", 1, 0, NULL), 0);
    CHECK_RC(ol_etcd_delete(c, "/t/w/a", false, NULL), 0);
    CHECK_RC(ol_etcd_put(c, "/t/w/b", "3", 1, 0, NULL), 0);
    uint64_t end = ol_mono_ms() + 5000;
    while (ev.n < 4 && ol_mono_ms() < end)
        CHECK_RC(ol_etcd_watch_poll(w, 100), 0);
    CHECK(ol_etcd_watch_created(w));
    CHECK(ev.n == 4);
    CHECK(ev.type[0] == OL_ETCD_PUT && strcmp(ev.key[0], "/t/w/a") == 0 &&
          strcmp(ev.value[0], "1") == 0);
    CHECK(ev.type[1] == OL_ETCD_PUT && strcmp(ev.key[1], "/t/w/b") == 0);
    CHECK(ev.type[2] == OL_ETCD_DELETE && strcmp(ev.key[2], "/t/w/a") == 0);
    CHECK(ev.type[3] == OL_ETCD_PUT && strcmp(ev.value[3], "3") == 0);
    for (int i = 1; i < 4 && i < ev.n; i++)
        CHECK(ev.mod_rev[i] > ev.mod_rev[i - 1]);
    CHECK(ol_etcd_watch_next_rev(w) == ev.mod_rev[3] + 1);
    /* an idle poll returns 0 after its timeout */
    uint64_t t0 = ol_mono_ms();
    CHECK_RC(ol_etcd_watch_poll(w, 200), 0);
    CHECK(ol_mono_ms() - t0 >= 150);
    /* cancel from another thread wakes a long poll */
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, w);
    t0 = ol_mono_ms();
    CHECK_RC(ol_etcd_watch_poll(w, 10000), -ECANCELED);
    CHECK(ol_mono_ms() - t0 < 2000);
    pthread_join(th, NULL);
    CHECK_RC(ol_etcd_watch_poll(w, 10), -ECANCELED); /* ended for good */
    ol_etcd_watch_close(w);

    /* the callback's error ends the watch */
    struct events ev2 = {.stop_after = 2};
    CHECK_RC(ol_etcd_watch_open(c, "/t/w/", from, on_event, &ev2, &w), 0);
    int rc = 0;
    end = ol_mono_ms() + 5000;
    while (rc == 0 && ol_mono_ms() < end)
        rc = ol_etcd_watch_poll(w, 100);
    CHECK_RC(rc, -EINTR);
    CHECK(ev2.n == 2);
    ol_etcd_watch_close(w);

    /* a value of 700 KiB arrives in many pieces of the stream (one message
     * spans many reads) and comes out whole */
    size_t big_len = 700 << 10;
    unsigned char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (unsigned char)(i * 131 + (i >> 9));
    struct events ev4 = {0};
    int64_t big_rev = 0;
    CHECK_RC(ol_etcd_put(c, "/t/w/big", big, big_len, 0, &big_rev), 0);
    CHECK_RC(ol_etcd_watch_open(c, "/t/w/big", big_rev, on_event, &ev4, &w), 0);
    end = ol_mono_ms() + 5000;
    while (ev4.n < 1 && ol_mono_ms() < end)
        CHECK_RC(ol_etcd_watch_poll(w, 100), 0);
    CHECK(ev4.n == 1 && ev4.value_len[0] == big_len && ev4.value_sum[0] == sum(big, big_len));
    ol_etcd_watch_close(w);
    struct ol_etcd_kv kv;
    CHECK_RC(ol_etcd_get(c, "/t/w/big", &kv, NULL), 0);
    CHECK(kv.value_len == big_len && memcmp(kv.value, big, big_len) == 0);
    ol_etcd_kv_clear(&kv);
    CHECK_RC(ol_etcd_put(c, "/t/w/toobig", big, OL_ETCD_MAX_VALUE + 1, 0, NULL), -EINVAL);
    free(big);

    /* compaction: a watch from before it ends with -OL_ECOMPACTED */
    int64_t now_rev = 0;
    CHECK_RC(ol_etcd_put(c, "/t/w/c", "c", 1, 0, &now_rev), 0);
    CHECK_RC(ol_etcd_compact(c, now_rev), 0);
    struct events ev3 = {0};
    CHECK_RC(ol_etcd_watch_open(c, "/t/w/", from, on_event, &ev3, &w), 0);
    rc = 0;
    end = ol_mono_ms() + 5000;
    while (rc == 0 && ol_mono_ms() < end)
        rc = ol_etcd_watch_poll(w, 100);
    CHECK_RC(rc, -OL_ECOMPACTED);
    CHECK(ol_etcd_watch_compacted(w) == now_rev);
    CHECK(ev3.n == 0);
    ol_etcd_watch_close(w);
}

static void test_failures(struct etcd_fixture *f)
{
    unsigned dead = etcd_fixture_free_port();
    char eps[200];
    struct ol_etcd *c = NULL;
    struct ol_etcd_kv kv;

    /* nothing listens: refused, fast */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%u", dead);
    CHECK_RC(ol_etcd_create(&c, eps, 1000), 0);
    uint64_t t0 = ol_mono_ms();
    CHECK_RC(ol_etcd_get(c, "/t/x", &kv, NULL), -ECONNREFUSED);
    CHECK_RC(ol_etcd_put(c, "/t/x", "x", 1, 0, NULL), -ECONNREFUSED);
    CHECK(ol_mono_ms() - t0 < 1000);
    struct ol_etcd_watch *w = NULL;
    struct events ev = {0};
    CHECK_RC(ol_etcd_watch_open(c, "/t/", 0, on_event, &ev, &w), 0);
    int rc = 0;
    for (int i = 0; i < 50 && rc == 0; i++)
        rc = ol_etcd_watch_poll(w, 100);
    CHECK_RC(rc, -ECONNREFUSED);
    ol_etcd_watch_close(w);
    ol_etcd_destroy(c);

    /* a dead endpoint first: calls move on to the live one, writes too
     * (nothing was sent to the dead one) */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%u,%s/", dead, f->url);
    CHECK_RC(ol_etcd_create(&c, eps, 1000), 0);
    CHECK_RC(ol_etcd_put(c, "/t/ep", "e", 1, 0, NULL), 0);
    CHECK_RC(ol_etcd_get(c, "/t/ep", &kv, NULL), 0);
    ol_etcd_kv_clear(&kv);
    ol_etcd_destroy(c);
    CHECK_RC(ol_etcd_create(&c, "", 1000), -EINVAL);
    CHECK_RC(ol_etcd_create(&c, "http://a,,http://b", 1000), -EINVAL);

    /* a silent etcd (stopped): the call gives up after its timeout */
    CHECK_RC(ol_etcd_create(&c, f->url, 300), 0);
    CHECK_RC(ol_etcd_get(c, "/t/ep", &kv, NULL), 0);
    ol_etcd_kv_clear(&kv);
    etcd_fixture_pause(f);
    t0 = ol_mono_ms();
    CHECK_RC(ol_etcd_get(c, "/t/ep", &kv, NULL), -ETIMEDOUT);
    uint64_t took = ol_mono_ms() - t0;
    CHECK(took >= 250 && took < 1500);
    CHECK_RC(ol_etcd_put(c, "/t/ep", "f", 1, 0, NULL), -ETIMEDOUT);
    etcd_fixture_resume(f);
    CHECK(WAIT_FOR(probe(c, "/t/ep") == 0, 5000));
    ol_etcd_destroy(c);
}

int main(void)
{
    int rc = etcd_fixture_start(&fx, "cluster_etcd");
    if (rc)
        return rc;
    struct ol_etcd *c = NULL;
    CHECK_RC(ol_etcd_create(&c, fx.url, 2000), 0);
    if (c) {
        test_kv(c);
        test_range(c);
        test_cas(c);
        test_lease(c);
        test_watch(c);
        ol_etcd_destroy(c);
    }
    test_failures(&fx);
    etcd_fixture_stop(&fx);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("cluster_etcd: ok\n");
    return 0;
}
