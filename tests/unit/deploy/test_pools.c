/* Pools as placement domains (deploy/deploy.h): the free-space choice of a
 * new key's pool, the lookup of the pool that holds a key (newest version
 * wins, delete markers count, a pool that cannot answer is not passed
 * over), and that a deployment of one pool places exactly as placement.h
 * always did.  Memory drives; no threads, no loops. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/cfg.h"
#include "deploy/deploy.h"
#include "ec/eset.h"
#include "ec/memdrive.h"
#include "ec/placement.h"

enum { K = 4, M = 2, N = K + M, NPOOLS = 2 };

static struct ol_memdrive *md[NPOOLS][2 * N];
static uint8_t id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* A deployment of pools of `nd[p]` memory drives each. */
static struct ol_deploy *make(unsigned npools, const unsigned *nd)
{
    struct ol_cfg cfg;
    ol_cfg_defaults(&cfg);
    struct ol_deploy *dp = NULL;
    char err[256] = "";
    CHECK_RC(ol_deploy_assemble(&cfg, K, M, id, NULL, &dp, err, sizeof(err)), 0);
    for (unsigned p = 0; p < npools; p++) {
        struct ol_drive drv[2 * N];
        struct ol_storedrive *local[2 * N] = {0};
        const char *names[2 * N];
        for (unsigned i = 0; i < nd[p]; i++) {
            CHECK_RC(ol_memdrive_create(&md[p][i]), 0);
            drv[i] = ol_memdrive_drive(md[p][i]);
            names[i] = "mem";
        }
        CHECK_RC(ol_deploy_add_pool(dp, p, nd[p], drv, local, names, err, sizeof(err)), 0);
        for (unsigned i = 0; i < nd[p]; i++)
            CHECK_RC(ol_memdrive_drive(md[p][i]).ops->bucket_create(md[p][i], "b", 1), 0);
    }
    return dp;
}

static void destroy(struct ol_deploy *dp, unsigned npools, const unsigned *nd)
{
    ol_deploy_close(dp);
    for (unsigned p = 0; p < npools; p++)
        for (unsigned i = 0; i < nd[p]; i++)
            ol_memdrive_destroy(md[p][i]);
}

static void test_pick_weighted(void)
{
    /* 1:3 by free bytes, over a sweep of r. */
    uint64_t f[3] = {100ull << 20, 300ull << 20, 0};
    unsigned hits[3] = {0};
    for (uint64_t r = 0; r < 4000; r++)
        hits[ol_deploy_pick_weighted(f, 3, r * 0x9e3779b97f4a7c15ull >> 7)]++;
    CHECK(hits[2] == 0); /* a full pool gets nothing */
    CHECK(hits[0] > 800 && hits[0] < 1200 && hits[1] > 2800 && hits[1] < 3200);
    /* Not measured yet: as the average of the measured ones. */
    uint64_t g[2] = {UINT64_MAX, 200ull << 20};
    unsigned h0 = 0;
    for (uint64_t r = 0; r < 4000; r++)
        h0 += ol_deploy_pick_weighted(g, 2, r * 0x9e3779b97f4a7c15ull >> 7) == 0;
    CHECK(h0 > 1800 && h0 < 2200);
    /* Nothing measured, or all full: evenly. */
    uint64_t u[2] = {UINT64_MAX, UINT64_MAX}, z[2] = {0, 0};
    CHECK(ol_deploy_pick_weighted(u, 2, 0) == 0 && ol_deploy_pick_weighted(u, 2, 1) == 1);
    CHECK(ol_deploy_pick_weighted(z, 2, 0) == 0 && ol_deploy_pick_weighted(z, 2, 1) == 1);
    CHECK(ol_deploy_pick_weighted(f, 1, 12345) == 0);
}

/* One pool of two sets: a key's set is what ol_ec_place says over all the
 * drives (the placement of every deployment before pools existed). */
static void test_one_pool_unchanged(void)
{
    unsigned nd[1] = {2 * N};
    struct ol_deploy *dp = make(1, nd);
    struct ol_ec_placement pl;
    CHECK_RC(ol_ec_placement_init(&pl, 2 * N, K, M, id), 0);
    for (unsigned i = 0; i < 200; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "key-%u", i);
        struct ol_ec_target t;
        ol_ec_place(&pl, "b", key, (size_t)kl, &t);
        CHECK(ol_deploy_set_of(dp, "b", key, (size_t)kl) == ol_deploy_set(dp, t.set));
    }
    destroy(dp, 1, nd);
}

static void put_in(struct ol_deploy *dp, unsigned p, const char *key, const char *body)
{
    CHECK_RC(ol_eset_put(ol_deploy_set_in(dp, p, "b", key, strlen(key)), "b", key, strlen(key),
                         body, strlen(body), "e", NULL),
             0);
}

static void test_locate(void)
{
    unsigned nd[2] = {N, 2 * N};
    struct ol_deploy *dp = make(2, nd);
    CHECK(atomic_load(&dp->npools) == 2 && atomic_load(&dp->nsets) == 3);
    CHECK(ol_deploy_pool_of_set(dp, 0) == 0 && ol_deploy_pool_of_set(dp, 2) == 1);
    /* Pool 0 full, pool 1 with room: new keys go to pool 1. */
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_space(md[0][i], 0, 1ull << 30);
    for (unsigned i = 0; i < 2 * N; i++)
        ol_memdrive_set_space(md[1][i], 1ull << 30, 1ull << 30);
    CHECK_RC(ol_deploy_refresh_space(dp), 0);
    CHECK(atomic_load(&dp->pools[0].free_bytes) == 0);
    CHECK(atomic_load(&dp->pools[1].free_bytes) == (2ull * N) << 30);
    unsigned p = 9;
    CHECK_RC(ol_deploy_locate(dp, "b", "new", 3, &p), 0);
    CHECK(p == 1);
    CHECK(ol_deploy_set_of(dp, "b", "new", 3) == ol_deploy_set_in(dp, 1, "b", "new", 3));

    /* A key in pool 0 stays there (reads and overwrites), full or not. */
    put_in(dp, 0, "old", "v1");
    CHECK_RC(ol_deploy_locate(dp, "b", "old", 3, &p), 1);
    CHECK(p == 0);
    CHECK(ol_deploy_set_of(dp, "b", "old", 3) == ol_deploy_set_in(dp, 0, "b", "old", 3));

    /* In two pools (a race of first writes): the newest version wins; a
     * delete marker is a version. */
    put_in(dp, 1, "old", "v2");
    CHECK_RC(ol_deploy_locate(dp, "b", "old", 3, &p), 1);
    CHECK(p == 1);
    struct ol_eset_obj o;
    CHECK_RC(ol_eset_delete_marker(ol_deploy_set_in(dp, 0, "b", "old", 3), "b", "old", 3,
                                   OL_SHARD_KEEP_OLDER, 5, &o),
             0);
    CHECK_RC(ol_deploy_locate(dp, "b", "old", 3, &p), 1);
    CHECK(p == 0);

    /* Pool 0 cannot answer: a key no pool shows is not created elsewhere
     * (the failed pool is the answer), a key pool 1 holds is still found. */
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_offline(md[0][i], true);
    int rc = ol_deploy_locate(dp, "b", "nowhere", 7, &p);
    CHECK(rc < 0 && p == 0);
    CHECK(ol_deploy_set_of(dp, "b", "nowhere", 7) == ol_deploy_set_in(dp, 0, "b", "nowhere", 7));
    put_in(dp, 1, "p1", "x");
    CHECK_RC(ol_deploy_locate(dp, "b", "p1", 2, &p), 1);
    CHECK(p == 1);
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_offline(md[0][i], false);

    /* A new key's pool is the key's draw: the same on every call (every
     * node), and over many keys in proportion to free space (1 : 3). */
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_space(md[0][i], 1ull << 30, 1ull << 30);
    for (unsigned i = 0; i < 2 * N; i++)
        ol_memdrive_set_space(md[1][i], 3ull << 29, 1ull << 30);
    CHECK_RC(ol_deploy_refresh_space(dp), 0);
    unsigned in1 = 0, same = 0;
    for (unsigned i = 0; i < 4000; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "fresh/%u", i);
        unsigned a = ol_deploy_pick_pool(dp, "b", key, (size_t)kl);
        same += a == ol_deploy_pick_pool(dp, "b", key, (size_t)kl);
        in1 += a == 1;
    }
    CHECK(same == 4000);
    CHECK(in1 > 2800 && in1 < 3200);
    destroy(dp, 2, nd);
}

int main(void)
{
    test_pick_weighted();
    test_one_pool_unchanged();
    test_locate();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("deploy pools: ok\n");
    return 0;
}
