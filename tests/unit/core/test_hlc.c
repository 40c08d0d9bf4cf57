/* Hybrid logical clock: monotonic under threads and a clock that jumps
 * around, counter carry, remote stamps (and refusing wild ones), version id
 * text round trip and ordering. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hlc.h"

#define CHECK_RNG_SEED 0x853c49e6748fea9bull
#include "check.h"


/* An injected wall clock that the test sets. */
static _Atomic int64_t fake_ms;
static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_ms);
}

#define S(ms, l) (((uint64_t)(ms) << 16) | (l))

static void test_backwards(void)
{
    struct ol_hlc c;
    ol_hlc_init(&c, 7, 9, fake_clock, NULL);
    atomic_store(&fake_ms, 1000);
    CHECK(ol_hlc_now(&c) == S(1000, 0));
    CHECK(ol_hlc_now(&c) == S(1000, 1));
    atomic_store(&fake_ms, 400); /* the wall clock steps back */
    CHECK(ol_hlc_now(&c) == S(1000, 2));
    CHECK(ol_hlc_now(&c) == S(1000, 3));
    atomic_store(&fake_ms, 1001);
    CHECK(ol_hlc_now(&c) == S(1001, 0));
    atomic_store(&fake_ms, -5); /* before the epoch counts as 0 */
    CHECK(ol_hlc_now(&c) == S(1001, 1));

    /* The counter overflows into the milliseconds while the clock stands still. */
    ol_hlc_init(&c, 7, 9, fake_clock, NULL);
    atomic_store(&fake_ms, 2000);
    uint64_t prev = 0, s = 0;
    int bad = 0;
    for (unsigned i = 0; i < 65536 + 5; i++) {
        s = ol_hlc_now(&c);
        if (s <= prev)
            bad++;
        prev = s;
    }
    CHECK(bad == 0);
    CHECK(s == S(2001, 4));
    atomic_store(&fake_ms, 2001);
    CHECK(ol_hlc_now(&c) == S(2001, 5));
    atomic_store(&fake_ms, 2002);
    CHECK(ol_hlc_now(&c) == S(2002, 0));
}

static void test_remote(void)
{
    struct ol_hlc c;
    ol_hlc_init(&c, 1, 0, fake_clock, NULL);
    atomic_store(&fake_ms, 10000);
    c.max_ahead_ms = 1000;
    uint64_t out = 0;
    CHECK(ol_hlc_now(&c) == S(10000, 0));
    /* A remote stamp ahead of us (within bounds): we move past it. */
    CHECK(ol_hlc_update(&c, S(10500, 3), &out) == 0 && out == S(10500, 4));
    CHECK(ol_hlc_now(&c) == S(10500, 5));
    /* One from the past: we still advance by one. */
    CHECK(ol_hlc_update(&c, S(9000, 0), &out) == 0 && out == S(10500, 6));
    /* Too far ahead: refused, the clock does not move. */
    CHECK(ol_hlc_update(&c, S(11001, 0), &out) == -ERANGE);
    CHECK(ol_hlc_now(&c) == S(10500, 7));
    CHECK(ol_hlc_update(&c, S(11000, 0xffff), NULL) == 0);
    CHECK(ol_hlc_now(&c) == S(11001, 1)); /* carried */
    /* Our wall clock is ahead of both: wall time wins. */
    atomic_store(&fake_ms, 20000);
    CHECK(ol_hlc_update(&c, S(15000, 0), &out) == 0 && out == S(20000, 0));

    /* Two nodes exchanging messages: every receive is later than its send. */
    struct ol_hlc a, b;
    ol_hlc_init(&a, 1, 0, fake_clock, NULL);
    ol_hlc_init(&b, 2, 0, fake_clock, NULL);
    int bad = 0;
    for (int i = 0; i < 10000; i++) {
        atomic_store(&fake_ms, 30000 + (int64_t)(check_rnd() % 50)); /* jittery clock */
        struct ol_hlc *from = (i & 1) ? &a : &b, *to = (i & 1) ? &b : &a;
        uint64_t sent = ol_hlc_now(from), got;
        if (ol_hlc_update(to, sent, &got) != 0 || got <= sent)
            bad++;
    }
    CHECK(bad == 0);
}

enum { NTHREADS = 4, PER_THREAD = 100000 };

struct worker {
    struct ol_hlc *c;
    uint64_t *stamps;
    int bad;
    unsigned id;
    unsigned seed;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t prev = 0;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        /* Thread 0 moves the fake clock back and forth while all take stamps;
         * odd threads mix in remote updates. */
        if (w->id == 0 && (i % 97) == 0)
            atomic_store(&fake_ms, 50000 + (int64_t)(rand_r(&w->seed) % 200));
        uint64_t s;
        if ((w->id & 1) && (i % 11) == 0) {
            if (ol_hlc_update(w->c, S(50100, i & 0xff), &s) != 0)
                w->bad++;
        } else {
            s = ol_hlc_now(w->c);
        }
        if (s <= prev)
            w->bad++;
        w->stamps[i] = prev = s;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run_threads(struct ol_hlc *c)
{
    uint64_t *all = calloc((size_t)NTHREADS * PER_THREAD, sizeof(uint64_t));
    struct worker w[NTHREADS];
    pthread_t t[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.c = c, .stamps = all + (size_t)i * PER_THREAD, .id = i,
                            .seed = i};
        CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0);
    }
    /* Each thread's stamps increase (checked in the worker) and no two
     * stamps of the clock are equal. */
    qsort(all, (size_t)NTHREADS * PER_THREAD, sizeof(uint64_t), cmp_u64);
    size_t dups = 0;
    for (size_t i = 1; i < (size_t)NTHREADS * PER_THREAD; i++)
        dups += all[i] == all[i - 1];
    CHECK(dups == 0);
    free(all);
}

static void test_threads(void)
{
    struct ol_hlc c;
    atomic_store(&fake_ms, 50000);
    ol_hlc_init(&c, 3, 0, fake_clock, NULL);
    run_threads(&c);
    /* The real clock. */
    ol_hlc_init(&c, 3, 0, NULL, NULL);
    uint64_t s = ol_hlc_now(&c);
    CHECK(ol_hlc_stamp_ms(s) > 1600000000000ull); /* after 2020 */
    struct worker w = {.c = &c, .stamps = calloc(PER_THREAD, sizeof(uint64_t)), .id = 2};
    worker_main(&w);
    CHECK(w.bad == 0);
    free(w.stamps);
}

static void test_text(void)
{
    struct ol_version_id v, u;
    char t[OL_VERSION_ID_TEXT + 1], t2[OL_VERSION_ID_TEXT + 1];
    memset(v.b, 0, sizeof(v.b));
    ol_version_id_format(&v, t);
    CHECK(strcmp(t, "0000000000000000000000") == 0);
    memset(v.b, 0xff, sizeof(v.b));
    ol_version_id_format(&v, t);
    CHECK(strcmp(t, "~~~~~~~~~~~~~~~~~~~~~l") == 0);
    CHECK(ol_version_id_parse(&u, t, strlen(t)) == 0 && ol_version_id_cmp(&u, &v) == 0);

    ol_version_id_make(&v, S(1700000000000ull, 42), 0x01020304, 0xa0b0c0d0);
    CHECK(ol_version_id_stamp(&v) == S(1700000000000ull, 42));
    CHECK(ol_version_id_node(&v) == 0x01020304);
    CHECK(v.b[12] == 0xa0 && v.b[15] == 0xd0);

    /* Random ids: round trip, and text order == byte order == stamp order. */
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        struct ol_version_id a, b, pa, pb;
        /* Nearby stamps too, so that ties on the leading characters occur. */
        uint64_t sa = check_rnd(), sb = (i & 1) ? sa + (check_rnd() % 3) - 1 : check_rnd();
        ol_version_id_make(&a, sa, (uint32_t)check_rnd(), (uint32_t)check_rnd());
        ol_version_id_make(&b, sb, (uint32_t)check_rnd() & 1, (uint32_t)check_rnd());
        ol_version_id_format(&a, t);
        ol_version_id_format(&b, t2);
        if (strlen(t) != OL_VERSION_ID_TEXT || ol_version_id_parse(&pa, t, strlen(t)) != 0 ||
            ol_version_id_parse(&pb, t2, strlen(t2)) != 0 || ol_version_id_cmp(&pa, &a) != 0 ||
            ol_version_id_cmp(&pb, &b) != 0)
            bad++;
        int c1 = ol_version_id_cmp(&a, &b), c2 = strcmp(t, t2);
        if ((c1 > 0) != (c2 > 0) || (c1 < 0) != (c2 < 0))
            bad++;
        if (sa != sb && ((sa < sb) != (c2 < 0)))
            bad++;
        for (int j = 0; j < OL_VERSION_ID_TEXT; j++) /* URL-safe, no escaping needed */
            if (!strchr("~_", t[j]) && !(t[j] >= '0' && t[j] <= '9') &&
                !(t[j] >= 'A' && t[j] <= 'Z') && !(t[j] >= 'a' && t[j] <= 'z'))
                bad++;
    }
    CHECK(bad == 0);

    /* Ids from one clock sort in issue order as text. */
    struct ol_hlc c;
    ol_hlc_init(&c, 5, 6, NULL, NULL);
    char prev[OL_VERSION_ID_TEXT + 1] = "";
    bad = 0;
    for (int i = 0; i < 1000; i++) {
        ol_hlc_version_id(&c, &v);
        ol_version_id_format(&v, t);
        if (strcmp(prev, t) >= 0)
            bad++;
        memcpy(prev, t, sizeof(t));
    }
    CHECK(bad == 0);

    /* Rejections: length, alphabet, non-canonical last character. */
    memset(v.b, 0x5a, sizeof(v.b));
    ol_version_id_format(&v, t);
    u = v;
    CHECK(ol_version_id_parse(&u, t, 21) == -EINVAL);
    CHECK(ol_version_id_parse(&u, "null", 4) == -EINVAL);
    memcpy(t2, t, sizeof(t));
    t2[3] = '+';
    CHECK(ol_version_id_parse(&u, t2, 22) == -EINVAL);
    t2[3] = '=';
    CHECK(ol_version_id_parse(&u, t2, 22) == -EINVAL);
    memcpy(t2, t, sizeof(t));
    t2[21] = '1'; /* value 1: a low bit set */
    CHECK(ol_version_id_parse(&u, t2, 22) == -EINVAL);
    CHECK(ol_version_id_cmp(&u, &v) == 0); /* untouched by failed parses */
}

int main(void)
{
    test_backwards();
    test_remote();
    test_threads();
    test_text();
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
