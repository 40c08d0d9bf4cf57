/* Unit test of the drive identity (src/store/identity.c, the EC fields of
 * store/format.h) and of the membership check built on it
 * (ol_storedrive_admit): a fresh drive is not joined and empty; a joined
 * identity round-trips through FORMAT and a reopen, at the documented byte
 * offsets, with the CRC kept; an older FORMAT (zero reserved bytes) reads as
 * not joined; bad fields are refused without changing anything; and the
 * check's verdicts (same drive, joins, wrong position, other deployment,
 * other geometry, single-drive data).  Plain threads; a temporary drive
 * under /tmp.  Exits 0 / 1 / 77. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"
#include "ec/storedrive.h"
#include "store/format.h"
#include "store/store.h"

#include "check.h"

static struct ol_store_opts opts;

static int read_raw(const char *dir, uint8_t out[128])
{
    char p[512];
    snprintf(p, sizeof(p), "%s/FORMAT", dir);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -errno;
    ssize_t n = pread(fd, out, 128, 0);
    close(fd);
    return n == 128 ? 0 : -EIO;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_round_trip(const char *dir)
{
    struct ol_store *st = NULL;
    CHECK_RC(ol_store_open(&st, dir, &opts), 0);
    if (!st)
        return;
    struct ol_store_identity id, id2;
    CHECK_RC(ol_store_identity(st, &id), 0);
    CHECK(!id.ec_joined && !id.has_data);
    CHECK(id.ec_index == 0 && id.ec_ndrives == 0 && id.ec_k == 0 && id.ec_m == 0);
    uint8_t raw[128];
    CHECK_RC(read_raw(dir, raw), 0);
    /* A fresh drive writes the EC fields and the reserved bytes as zero:
     * what an older build wrote, so both read as "not joined". */
    for (unsigned i = 48; i < 124; i++)
        CHECK(raw[i] == 0);
    uint8_t drive_id[16];
    memcpy(drive_id, id.drive_id, 16);

    struct ol_store_identity in;
    memset(&in, 0, sizeof(in));
    memcpy(in.deployment_id, "0123456789abcdef", 16);
    memset(in.drive_id, 0xee, 16); /* ignored */
    in.ec_joined = true;
    in.ec_index = 4;
    in.ec_ndrives = 6;
    in.ec_k = 4;
    in.ec_m = 2;
    CHECK_RC(ol_store_set_identity(st, &in), 0);
    CHECK_RC(ol_store_identity(st, &id2), 0);
    CHECK(id2.ec_joined && id2.ec_index == 4 && id2.ec_ndrives == 6);
    CHECK(id2.ec_k == 4 && id2.ec_m == 2);
    CHECK(memcmp(id2.deployment_id, "0123456789abcdef", 16) == 0);
    CHECK(memcmp(id2.drive_id, drive_id, 16) == 0);

    /* The bytes, where docs/FORMAT.md says they are, and a valid CRC. */
    CHECK_RC(read_raw(dir, raw), 0);
    CHECK(memcmp(raw + 8, "0123456789abcdef", 16) == 0);
    CHECK(memcmp(raw + 24, drive_id, 16) == 0);
    CHECK(raw[48] == 1 && raw[49] == 4 && raw[50] == 2 && raw[51] == 0);
    CHECK(le32(raw + 52) == 4 && le32(raw + 56) == 6);
    for (unsigned i = 60; i < 124; i++)
        CHECK(raw[i] == 0);
    uint8_t z[128];
    memcpy(z, raw, 128);
    memset(z + 124, 0, 4);
    CHECK(ol_crc32c(z, 128) == le32(raw + 124));

    /* Refused without a change: position past the end, no data shards. */
    struct ol_store_identity bad = in;
    bad.ec_index = 6;
    CHECK_RC(ol_store_set_identity(st, &bad), -EINVAL);
    bad = in;
    bad.ec_k = 0;
    CHECK_RC(ol_store_set_identity(st, &bad), -EINVAL);
    CHECK_RC(ol_store_identity(st, &id2), 0);
    CHECK(id2.ec_index == 4 && id2.ec_k == 4);

    CHECK_RC(ol_store_bucket_create(st, "idbk", 1), 0);
    CHECK_RC(ol_store_identity(st, &id2), 0);
    CHECK(id2.has_data);
    ol_store_close(st);

    /* A reopen reads the same identity back from FORMAT. */
    st = NULL;
    CHECK_RC(ol_store_open(&st, dir, &opts), 0);
    if (!st)
        return;
    CHECK_RC(ol_store_identity(st, &id2), 0);
    CHECK(id2.ec_joined && id2.ec_index == 4 && id2.ec_ndrives == 6 && id2.has_data);
    CHECK(memcmp(id2.deployment_id, "0123456789abcdef", 16) == 0);
    CHECK(memcmp(id2.drive_id, drive_id, 16) == 0);
    CHECK_RC(ol_store_bucket_delete(st, "idbk"), 0);

    /* Leaving the deployment zeroes the fields again. */
    in.ec_joined = false;
    CHECK_RC(ol_store_set_identity(st, &in), 0);
    CHECK_RC(read_raw(dir, raw), 0);
    for (unsigned i = 48; i < 124; i++)
        CHECK(raw[i] == 0);
    ol_store_close(st);
}

/* A FORMAT whose EC fields contradict each other (CRC valid) is damage. */
static void test_inconsistent(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(dfd >= 0);
    if (dfd < 0)
        return;
    struct ol_format f;
    CHECK_RC(ol_format_read(dfd, &f), 0);
    struct ol_format g = f;
    g.ec_joined = 1;
    g.ec_k = 2;
    g.ec_m = 1;
    g.ec_index = 3;
    g.ec_ndrives = 3; /* index past the end */
    CHECK_RC(ol_format_write(dfd, &g), 0);
    struct ol_format r;
    CHECK_RC(ol_format_read(dfd, &r), -OL_EFORMAT);
    g.ec_index = 2;
    CHECK_RC(ol_format_write(dfd, &g), 0);
    CHECK_RC(ol_format_read(dfd, &r), 0);
    CHECK(r.ec_joined == 1 && r.ec_index == 2);
    g.ec_joined = 2; /* a value this build does not know */
    CHECK_RC(ol_format_write(dfd, &g), 0);
    CHECK_RC(ol_format_read(dfd, &r), -OL_EFORMAT);
    CHECK_RC(ol_format_write(dfd, &f), 0);
    close(dfd);
}

static void test_admit(const char *dir)
{
    struct ol_store *st = NULL;
    CHECK_RC(ol_store_open(&st, dir, &opts), 0);
    if (!st)
        return;
    char why[512];
    struct ol_storedrive_member m = {.index = 1, .ndrives = 3, .k = 2, .m = 1};
    memcpy(m.deployment_id, "deployment-one!!", 16);
    /* Empty and not joined: it may join. */
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &m, why, sizeof(why)), 1);
    CHECK_RC(ol_storedrive_join(st, &m), 0);
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &m, why, sizeof(why)), 0);

    struct ol_storedrive_member o = m;
    o.index = 2;
    CHECK_RC(ol_storedrive_admit(st, "/x/d3", &o, why, sizeof(why)), -OL_EFORMAT);
    CHECK(strstr(why, "drive /x/d3 was drive 2 of this deployment") != NULL);
    CHECK(strstr(why, "original order") != NULL);
    o = m;
    memcpy(o.deployment_id, "deployment-two!!", 16);
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &o, why, sizeof(why)), -OL_EFORMAT);
    CHECK(strstr(why, "drive /x/d2 belongs to another deployment") != NULL);
    o = m;
    o.ndrives = 6;
    o.k = 4;
    o.m = 2;
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &o, why, sizeof(why)), -OL_EFORMAT);
    CHECK(strstr(why, "3 drives in sets of 2+1") != NULL);

    /* Not joined, with a plain (unversioned) bucket: a single-drive store. */
    struct ol_store_identity none;
    memset(&none, 0, sizeof(none));
    CHECK_RC(ol_store_set_identity(st, &none), 0);
    CHECK_RC(ol_store_bucket_create(st, "plain", 1), 0);
    CHECK_RC(ol_storedrive_holds_shards(st), 0);
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &m, why, sizeof(why)), -OL_EFORMAT);
    CHECK(strstr(why, "drive /x/d2 holds data of a single-drive store") != NULL);
    /* A versioned bucket without entries has the shape of an EC drive: it
     * joins only a deployment with the legacy id. */
    CHECK_RC(ol_store_versioning_put(st, "plain", OL_VERSIONING_ENABLED), 0);
    CHECK_RC(ol_storedrive_holds_shards(st), 1);
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &m, why, sizeof(why)), -OL_EFORMAT);
    CHECK(strstr(why, "no deployment identity") != NULL);
    struct ol_storedrive_member l = m;
    memcpy(l.deployment_id, ol_storedrive_legacy_id, 16);
    CHECK_RC(ol_storedrive_admit(st, "/x/d2", &l, why, sizeof(why)), 1);
    ol_store_close(st);
}

int main(void)
{
    ol_log_level = OL_LOG_ERROR;
    ol_store_opts_default(&opts);
    opts.segment_bytes = 4u << 20;
    opts.max_loops = 1;
    char root[64];
    if (check_mkdtemp(root, sizeof(root), "identity") != 0)
        return 77;
    char d1[600], d2[600];
    snprintf(d1, sizeof(d1), "%s/d1", root);
    snprintf(d2, sizeof(d2), "%s/d2", root);
    test_round_trip(d1);
    test_inconsistent(d1);
    test_admit(d2);
    check_rm_rf(root);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
