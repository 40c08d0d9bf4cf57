/* access/ratelimit: the token bucket on a made-up clock (burst of one
 * second's worth, refill, refusal leaves the bucket unchanged, charges
 * and their waits, debt, no limit, huge costs), its admissions from
 * several threads at once (never more than the burst), the per-user table
 * (defaults, "limit" lines, anonymous, one entry per key from racing
 * threads, counters) and the config checks. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "access/ratelimit.h"
#include "check.h"
#include "core/cfg.h"

#define SEC 1000000000LL
#define T0 (100 * SEC) /* a made-up "now", well after 0 */

static void test_take(void)
{
    struct ol_rl_bucket b;
    ol_rl_bucket_init(&b, 10);
    int ok = 0;
    for (int i = 0; i < 20; i++)
        ok += ol_rl_take(&b, 1, T0);
    CHECK(ok == 10); /* the burst: one second's worth at once */
    CHECK(!ol_rl_take(&b, 1, T0 + SEC / 10 - 1));
    CHECK(ol_rl_take(&b, 1, T0 + SEC / 10)); /* one token per 1/10 s */
    CHECK(!ol_rl_take(&b, 1, T0 + SEC / 10));
    /* A long rest fills the bucket to its burst, no more. */
    ok = 0;
    for (int i = 0; i < 50; i++)
        ok += ol_rl_take(&b, 1, T0 + 60 * SEC);
    CHECK(ok == 10);
    /* Rates that do not divide a second still give their whole burst. */
    for (uint64_t r = 1; r <= 13; r++) {
        ol_rl_bucket_init(&b, r);
        ok = 0;
        for (int i = 0; i < 30; i++)
            ok += ol_rl_take(&b, 1, T0);
        CHECK(ok == (int)r);
    }
    /* More than a second's worth never fits; a refusal changes nothing. */
    ol_rl_bucket_init(&b, 100);
    CHECK(!ol_rl_take(&b, 101, T0));
    CHECK(ol_rl_take(&b, 100, T0));
    CHECK(!ol_rl_take(&b, 1, T0));
    /* No limit: everything fits. */
    ol_rl_bucket_init(&b, 0);
    for (int i = 0; i < 1000; i++)
        CHECK(ol_rl_take(&b, 1000000, T0));
    CHECK(!ol_rl_in_debt(&b, T0));
}

static void test_charge(void)
{
    struct ol_rl_bucket b;
    ol_rl_bucket_init(&b, 1000);            /* 1000 bytes a second */
    CHECK(ol_rl_charge(&b, 1000, T0) == 0); /* the burst */
    CHECK(!ol_rl_in_debt(&b, T0));
    CHECK(ol_rl_charge(&b, 500, T0) == SEC / 2);
    CHECK(ol_rl_in_debt(&b, T0));
    CHECK(ol_rl_in_debt(&b, T0 + SEC / 2 - 1));
    CHECK(!ol_rl_in_debt(&b, T0 + SEC / 2));
    /* Pacing: charge, wait what it says, charge again: the bytes move at
     * the rate (4000 bytes in 100-byte steps after the burst: 4 s). */
    ol_rl_bucket_init(&b, 1000);
    int64_t now = T0;
    uint64_t moved = 0;
    while (moved < 5000) {
        now += ol_rl_charge(&b, 100, now);
        moved += 100;
    }
    CHECK(now - T0 == 4 * SEC);
    /* A refused take after a debt: the debt stands. */
    CHECK(!ol_rl_take(&b, 1, now));
    /* Huge costs and rates do not overflow. */
    ol_rl_bucket_init(&b, 1);
    int64_t w = ol_rl_charge(&b, UINT64_MAX, T0);
    CHECK(w > 1000 * SEC);
    ol_rl_bucket_init(&b, 1ULL << 40);
    CHECK(ol_rl_charge(&b, (1ULL << 40) - 1, T0) == 0);
    CHECK(ol_rl_charge(&b, 1ULL << 39, T0) > 0);
    ol_rl_bucket_init(&b, 0);
    CHECK(ol_rl_charge(&b, UINT64_MAX, T0) == 0);
}

/* ---- threads ---- */

enum { NTHREADS = 4, TRIES = 20000, RATE = 1000 };

static struct ol_rl_bucket shared;
static int admitted[NTHREADS];

static void *taker(void *arg)
{
    int *n = arg;
    for (int i = 0; i < TRIES; i++)
        *n += ol_rl_take(&shared, 1, T0); /* time stands still: no refill */
    return NULL;
}

static void test_threads(void)
{
    ol_rl_bucket_init(&shared, RATE);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, taker, &admitted[i]) == 0);
    int sum = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        sum += admitted[i];
    }
    /* Never more than the burst; a take that lost OL_RL_CAS_TRIES races in
     * a row may refuse early, which with these numbers barely happens. */
    CHECK(sum <= RATE);
    CHECK(sum >= RATE * 9 / 10);
    if (sum != RATE)
        fprintf(stderr, "note: %d of %d admitted under contention\n", sum, RATE);
}

/* ---- the table ---- */

static struct ol_rl *table;
static struct ol_rl_user *got[NTHREADS][64];

static void *getter(void *arg)
{
    struct ol_rl_user **out = arg;
    for (int i = 0; i < 64; i++) {
        char key[32];
        snprintf(key, sizeof(key), "user%02d", i);
        out[i] = ol_rl_user_get(table, key);
    }
    return NULL;
}

static void test_table(void)
{
    struct ol_cfg *cfg = calloc(1, sizeof(*cfg));
    char err[512] = "";
    struct ol_rl *rl = (struct ol_rl *)1;
    ol_cfg_defaults(cfg);
    /* No limit anywhere: no table. */
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), 0);
    CHECK(rl == NULL);
    CHECK(ol_rl_user_get(NULL, "alice") == NULL);
    CHECK(ol_rl_request(NULL, NULL, OL_RL_S3));
    CHECK(ol_rl_chunk(NULL) == SIZE_MAX);
    /* A "limit" line alone makes one. */
    CHECK_RC(ol_cfg_add_limit(cfg, "carol", "3", "0", err, sizeof(err)), 0);
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), 0);
    CHECK(rl != NULL);
    CHECK(ol_rl_user_get(rl, "alice") == NULL); /* defaults 0: no limit */
    CHECK(ol_rl_user_get(rl, "carol") != NULL);
    ol_rl_destroy(rl);

    CHECK_RC(ol_cfg_set(cfg, "user_requests_per_sec", "5", err, sizeof(err)), 0);
    CHECK_RC(ol_cfg_add_limit(cfg, "bob", "0", "0", err, sizeof(err)), 0);
    CHECK_RC(ol_cfg_add_limit(cfg, OL_CFG_ANONYMOUS, "2", "64k", err, sizeof(err)), 0);
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), 0);
    CHECK(rl != NULL);
    struct ol_rl_user *alice = ol_rl_user_get(rl, "alice");
    CHECK(alice != NULL && alice == ol_rl_user_get(rl, "alice"));
    CHECK(ol_rl_user_get(rl, "bob") == NULL); /* exempted by its line */
    struct ol_rl_user *anon = ol_rl_user_get(rl, NULL);
    CHECK(anon != NULL && anon != alice);
    /* The anonymous entry is not a user called "(anonymous)". */
    CHECK(ol_rl_user_get(rl, OL_CFG_ANONYMOUS) != anon);
    CHECK(ol_rl_chunk(alice) == SIZE_MAX);
    CHECK(ol_rl_chunk(anon) == 8192); /* 64 KiB/s: an eighth of a second */
    CHECK(ol_rl_bytes(alice, 1 << 30) == 0);
    int ok = 0;
    for (int i = 0; i < 20; i++)
        ok += ol_rl_request(rl, alice, OL_RL_S3);
    CHECK(ok == 5);
    ok = 0;
    for (int i = 0; i < 20; i++)
        ok += ol_rl_request(rl, anon, OL_RL_S3);
    CHECK(ok == 2);
    struct ol_rl_stats st;
    ol_rl_stats(rl, &st);
    CHECK(st.throttled_s3 == 15 + 18);
    CHECK(st.throttled_native == 0);
    /* The native port also refuses while the bytes are in debt. */
    struct ol_rl_user *carol = ol_rl_user_get(rl, "carol");
    CHECK(carol != NULL);
    CHECK_RC(ol_cfg_add_limit(cfg, "dave", "100", "1m", err, sizeof(err)), 0);
    ol_rl_destroy(rl);
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), 0);
    struct ol_rl_user *dave = ol_rl_user_get(rl, "dave");
    CHECK(dave != NULL);
    CHECK(ol_rl_request(rl, dave, OL_RL_NATIVE));
    CHECK(ol_rl_bytes(dave, 3 << 20) > SEC); /* 3 MiB at 1 MiB/s: 2 s owed */
    CHECK(!ol_rl_request(rl, dave, OL_RL_NATIVE));
    CHECK(ol_rl_request(rl, dave, OL_RL_S3)); /* S3 paces instead */
    ol_rl_stats(rl, &st);
    CHECK(st.throttled_native == 1 && st.throttled_s3 == 0);

    /* Racing threads that see the same keys get one entry per key. */
    table = rl;
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, getter, got[i]) == 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < 64; k++) {
        CHECK(got[0][k] != NULL);
        for (int i = 1; i < NTHREADS; i++)
            CHECK(got[i][k] == got[0][k]);
        for (int j = 0; j < k; j++)
            CHECK(got[0][j] != got[0][k]);
    }
    /* More users than slots: the rest share the overflow entry. */
    struct ol_rl_user *last = NULL;
    for (int i = 0; i < OL_RL_MAX_USERS + 10; i++) {
        char key[32];
        snprintf(key, sizeof(key), "many%05d", i);
        last = ol_rl_user_get(rl, key);
        CHECK(last != NULL);
    }
    CHECK(last == ol_rl_user_get(rl, "yet-another"));
    ol_rl_destroy(rl);

    /* A bandwidth below min_body_rate_bytes_per_sec is a config error. */
    CHECK_RC(ol_cfg_add_limit(cfg, "erin", "0", "512", err, sizeof(err)), 0);
    err[0] = 0;
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "limit erin") && strstr(err, "min_body_rate_bytes_per_sec"));
    CHECK_RC(ol_cfg_set(cfg, "min_body_rate_bytes_per_sec", "0", err, sizeof(err)), 0);
    CHECK_RC(ol_rl_create(cfg, &rl, err, sizeof(err)), 0);
    ol_rl_destroy(rl);
    free(cfg);
}

/* The config forms: rows and "limit" lines, good and bad. */
static void test_cfg(void)
{
    struct ol_cfg *cfg = calloc(1, sizeof(*cfg));
    char err[512];
    ol_cfg_defaults(cfg);
    CHECK(cfg->user_requests_per_sec == 0 && cfg->user_bytes_per_sec == 0);
    CHECK_RC(ol_cfg_set(cfg, "user-bytes-per-sec", "2m", err, sizeof(err)), 0);
    CHECK(cfg->user_bytes_per_sec == 2 << 20);
    CHECK_RC(ol_cfg_set(cfg, "user_requests_per_sec", "-1", err, sizeof(err)), -EINVAL);
    CHECK_RC(ol_cfg_set(cfg, "user_requests_per_sec", "ten", err, sizeof(err)), -EINVAL);
    CHECK_RC(ol_cfg_add_limit(cfg, "x", "1", "1", err, sizeof(err)), -EINVAL); /* key too short */
    CHECK_RC(ol_cfg_add_limit(cfg, "a/b/c", "1", "1", err, sizeof(err)), -EINVAL);
    CHECK_RC(ol_cfg_add_limit(cfg, "alice", "fast", "1", err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "limit alice") != NULL);
    CHECK_RC(ol_cfg_add_limit(cfg, "alice", "1", "-5", err, sizeof(err)), -EINVAL);
    CHECK(cfg->nlimits == 0);
    CHECK_RC(ol_cfg_add_limit(cfg, "alice", "1", "1k", err, sizeof(err)), 0);
    CHECK_RC(ol_cfg_add_limit(cfg, "alice", "7", "2k", err, sizeof(err)), 0); /* last wins */
    CHECK(cfg->nlimits == 1 && cfg->limits[0].requests_per_sec == 7 &&
          cfg->limits[0].bytes_per_sec == 2048);
    for (int i = 1; i < OL_CFG_MAX_LIMITS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "u%03d", i);
        CHECK_RC(ol_cfg_add_limit(cfg, key, "1", "0", err, sizeof(err)), 0);
    }
    CHECK_RC(ol_cfg_add_limit(cfg, "one-more", "1", "0", err, sizeof(err)), -ENOSPC);

    /* From a file. */
    char path[] = "/tmp/ol_test_ratelimit_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char good[] = "user_requests_per_sec 4\n"
                        "limit alice 10 1m  # a comment\n"
                        "limit (anonymous) 1 0\n";
    CHECK(write(fd, good, sizeof(good) - 1) == (ssize_t)(sizeof(good) - 1));
    close(fd);
    ol_cfg_defaults(cfg);
    CHECK_RC(ol_cfg_load_file(cfg, path, err, sizeof(err)), 0);
    CHECK(cfg->user_requests_per_sec == 4 && cfg->nlimits == 2);
    CHECK(strcmp(cfg->limits[1].access_key, OL_CFG_ANONYMOUS) == 0);
    CHECK(cfg->limits[0].bytes_per_sec == 1 << 20);
    const char *bad[] = {"limit alice 10\n", "limit alice 10 1m 3\n", "limit alice x 1m\n",
                         "limit al 1 1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        ol_cfg_defaults(cfg);
        err[0] = 0;
        CHECK_RC(ol_cfg_load_file(cfg, path, err, sizeof(err)), -EINVAL);
        CHECK(strstr(err, ":1: limit") != NULL);
    }
    unlink(path);
    free(cfg);
}

int main(void)
{
    test_take();
    test_charge();
    test_threads();
    test_table();
    test_cfg();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
