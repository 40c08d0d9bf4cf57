/* Bucket settings on every drive (deploy/deploy.h): a drive that missed a
 * setting (wiped and given the bucket again, or offline while it was set)
 * gets the newest record back on the next read (read repair), removals
 * included, and reads answer the newest value throughout.  Memory drives;
 * no loops. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/cfg.h"
#include "core/err.h"
#include "deploy/deploy.h"
#include "ec/drive.h"
#include "ec/memdrive.h"

enum { K = 4, M = 2, N = K + M };

static struct ol_memdrive *md[N];

/* The raw record drive i holds for the setting: its length, or the error. */
static ssize_t raw(unsigned i, uint8_t *buf, size_t cap)
{
    struct ol_drive d = ol_memdrive_drive(md[i]);
    return d.ops->bucket_config_get(d.d, "b", "cors", buf, cap);
}

int main(void)
{
    static const uint8_t id[16] = {9, 8, 7};
    struct ol_cfg cfg;
    ol_cfg_defaults(&cfg);
    struct ol_deploy *dp = NULL;
    char err[256] = "";
    CHECK_RC(ol_deploy_assemble(&cfg, K, M, id, NULL, &dp, err, sizeof(err)), 0);
    struct ol_drive drv[N];
    struct ol_storedrive *local[N] = {0};
    const char *names[N];
    for (unsigned i = 0; i < N; i++) {
        CHECK_RC(ol_memdrive_create(&md[i]), 0);
        drv[i] = ol_memdrive_drive(md[i]);
        names[i] = "mem";
    }
    CHECK_RC(ol_deploy_add_pool(dp, 0, N, drv, local, names, err, sizeof(err)), 0);
    CHECK(ol_deploy_bucket_spread(dp, "b", 1) == N);
    CHECK_RC(ol_deploy_bucket_config_put(dp, "b", "cors", "v1", 2), 0);

    /* Drive 2 is replaced: empty, then given the bucket (as a heal does). */
    uint8_t rec[64], rec2[64];
    ol_memdrive_wipe(md[2]);
    CHECK(ol_deploy_bucket_spread(dp, "b", 2) == N);
    CHECK_RC(raw(2, rec, sizeof(rec)), -OL_ENOCONFIG);
    char v[16];
    CHECK_RC(ol_deploy_bucket_config_get(dp, "b", "cors", v, sizeof(v)), 2);
    CHECK(memcmp(v, "v1", 2) == 0);
    ssize_t n = raw(2, rec, sizeof(rec));
    CHECK(n > 2 && raw(0, rec2, sizeof(rec2)) == n && memcmp(rec, rec2, (size_t)n) == 0);
    CHECK(atomic_load(&dp->st.config_repairs) == 1);
    /* In agreement now: a read repairs nothing. */
    CHECK_RC(ol_deploy_bucket_config_get(dp, "b", "cors", v, sizeof(v)), 2);
    CHECK(atomic_load(&dp->st.config_repairs) == 1);

    /* Drive 3 is away while the setting changes, then while it is removed. */
    ol_memdrive_set_offline(md[3], true);
    CHECK_RC(ol_deploy_bucket_config_put(dp, "b", "cors", "v2", 2), 0);
    ol_memdrive_set_offline(md[3], false);
    CHECK_RC(ol_deploy_bucket_config_get(dp, "b", "cors", v, sizeof(v)), 2);
    CHECK(memcmp(v, "v2", 2) == 0);
    n = raw(3, rec, sizeof(rec));
    CHECK(n > 2 && raw(0, rec2, sizeof(rec2)) == n && memcmp(rec, rec2, (size_t)n) == 0);
    CHECK(atomic_load(&dp->st.config_repairs) == 2);
    ol_memdrive_set_offline(md[3], true);
    CHECK_RC(ol_deploy_bucket_config_put(dp, "b", "cors", NULL, 0), 0);
    ol_memdrive_set_offline(md[3], false);
    CHECK_RC(ol_deploy_bucket_config_get(dp, "b", "cors", v, sizeof(v)), -OL_ENOCONFIG);
    n = raw(3, rec, sizeof(rec));
    CHECK(n == raw(0, rec2, sizeof(rec2)) && memcmp(rec, rec2, (size_t)n) == 0);
    CHECK(atomic_load(&dp->st.config_repairs) == 3);

    ol_deploy_close(dp);
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_destroy(md[i]);
    return failures ? 1 : 0;
}
