/* The erasure set over real stores (ec/storedrive.h): 4+2 over 6 temporary
 * directories.  Objects are written, two directories wiped (removed and
 * reopened as empty formatted drives), every object read back, healed, two
 * other directories wiped, read again; bytes flipped in the segment files of
 * two drives must not change what reads return, and a heal repairs them.
 * Also: overwrite and delete (older shard versions freed), listing, a PUT
 * with three drives offline failing with the previous version readable, a
 * heal rewrite replacing a shard under the same version id. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/hlc.h"
#include "core/loop.h"
#include "ec/eset.h"
#include "ec/placement.h"
#include "ec/storedrive.h"
#include "store/store.h"

#include "check.h"

#define N 6
/* Enough objects for every size edge in obj_size, three of the 2 MiB ones and
 * some sixty bytes flipped by corrupt(); each object costs a dozen
 * fdatasyncs per pass, so more only makes the test slower (90 took twice as
 * long and proved nothing more). */
#define NOBJ 60

static char root[] = "/tmp/ol-storedrive-XXXXXX";
static char dirs[N][64];
static struct ol_store *st[N];
static struct ol_storedrive *sd[N];
static struct ol_hlc hlc;
static struct ol_eset *es;

static void gen(uint64_t seed, uint8_t *p, size_t n)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        if ((i & 7) == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        p[i] = (uint8_t)(x >> ((i & 7) * 8));
    }
}

static void store_open(unsigned i)
{
    struct ol_store_opts o;
    ol_store_opts_default(&o);
    o.inline_bytes = 4096; /* so that most shards live in segment files */
    o.map_bytes = 1ull << 30;
    o.max_loops = 1;
    o.segment_bytes = 8u << 20;
    if (ol_store_open(&st[i], dirs[i], &o) < 0) {
        fprintf(stderr, "cannot open %s\n", dirs[i]);
        exit(1);
    }
}

static void run(const char *cmd)
{
    if (system(cmd) != 0) {
        fprintf(stderr, "'%s' failed\n", cmd);
        exit(1);
    }
}

static void wipe(unsigned i)
{
    char cmd[160];
    ol_store_close(st[i]);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dirs[i]);
    run(cmd);
    store_open(i);
    ol_storedrive_set_store(sd[i], st[i]);
}

/* Flips one byte in every 64 KiB block past the header of every segment of
 * drive i (store closed meanwhile so no cached state hides it). */
static unsigned corrupt(unsigned i)
{
    char path[256];
    unsigned flips = 0;
    ol_store_close(st[i]);
    snprintf(path, sizeof(path), "%s/seg", dirs[i]);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, ".seg"))
            continue;
        char f[512];
        snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
        int fd = open(f, O_RDWR);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0)
            continue;
        for (off_t off = 4096 + 777; off < sb.st_size; off += 65536 * 3) {
            uint8_t b;
            if (pread(fd, &b, 1, off) == 1) {
                b ^= 0x5a;
                if (pwrite(fd, &b, 1, off) == 1)
                    flips++;
            }
        }
        close(fd);
    }
    if (d)
        closedir(d);
    store_open(i);
    ol_storedrive_set_store(sd[i], st[i]);
    return flips;
}

static size_t obj_size(unsigned i)
{
    static const size_t edges[] = {0, 1, 3, 4, 5, 65535, 65536, 65537, 262144, 262145};
    if (i < sizeof(edges) / sizeof(edges[0]))
        return edges[i];
    if (i % 15 == 0)
        return 2u * 1024 * 1024 + i * 77;
    return (size_t)(i * 7919u) % 400000;
}

static void key_of(unsigned i, char *k)
{
    snprintf(k, 32, "obj/%04u", i);
}

static int put_obj(unsigned i, uint64_t seed)
{
    char key[32];
    key_of(i, key);
    size_t n = obj_size(i);
    uint8_t *buf = malloc(n + 1);
    gen(seed, buf, n);
    char etag[32];
    snprintf(etag, sizeof(etag), "e%llu", (unsigned long long)seed);
    int rc = ol_eset_put(es, "bkt", key, strlen(key), buf, n, etag, NULL);
    free(buf);
    return rc;
}

/* 0 when object i reads back as the bytes of seed. */
static int check_obj(unsigned i, uint64_t seed)
{
    char key[32];
    key_of(i, key);
    size_t n = obj_size(i);
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    struct ol_eset_obj o;
    gen(seed, want, n);
    int rc = ol_eset_read(es, "bkt", key, strlen(key), NULL, 0, n, got, &o);
    if (rc == 0 && (o.size != n || memcmp(want, got, n) != 0))
        rc = -EBADMSG;
    if (rc == 0 && n > 10) {
        /* A range in the middle. */
        size_t off = n / 3, len = n / 2;
        rc = ol_eset_read(es, "bkt", key, strlen(key), NULL, off, len, got, NULL);
        if (rc == 0 && memcmp(want + off, got, len) != 0)
            rc = -EBADMSG;
    }
    if (rc != 0)
        fprintf(stderr, "object %u (%zu bytes): %s\n", i, n, ol_strerror(rc));
    free(want);
    free(got);
    return rc;
}

static unsigned check_all(uint64_t base)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < NOBJ; i++)
        bad += check_obj(i, base + i) != 0;
    return bad;
}

static int count_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)key;
    (void)klen;
    (void)o;
    (*(unsigned *)ctx)++;
    return 0;
}

/* Store versions (not eset versions) of a key on drive i. */
static unsigned store_versions(unsigned i, const char *key)
{
    struct ol_store_viter *it = NULL;
    unsigned n = 0;
    if (ol_store_viter_open(ol_storedrive_store(sd[i]), "bkt", &it) < 0)
        return 0;
    size_t klen = strlen(key);
    int rc = ol_store_viter_seek(it, key, klen);
    for (unsigned guard = 0; rc == 0 && guard < 1000; guard++) {
        const char *k;
        size_t kl;
        struct ol_version_info vi;
        if (ol_store_viter_next(it, &k, &kl, &vi) != 0 || kl != klen || memcmp(k, key, kl) != 0)
            break;
        n++;
    }
    ol_store_viter_close(it);
    return n;
}

/* A shard version of an empty object committed on drive slot `slot` (shard
 * `slot`, rotation 0) and never marked: phase 1 of a PUT only. */
static int phase1(unsigned slot, const char *key, const struct ol_version_id *vid)
{
    struct ol_shard_meta sm;
    memset(&sm, 0, sizeof(sm));
    sm.vid = *vid;
    sm.k = 4;
    sm.m = 2;
    sm.shard = (uint8_t)slot;
    sm.unit_bytes = 64 * 1024;
    sm.mtime_ns = 1;
    strcpy(sm.etag, "cut");
    void *w = NULL;
    int rc = ol_storedrive_ops.shard_begin(sd[slot], "bkt", key, strlen(key), &w);
    return rc < 0 ? rc : ol_storedrive_ops.shard_commit(w, &sm, NULL, 0);
}

/* A shard entry in the format from before the stored COMPLETE mark (flags
 * without EXPLICIT), written into drive i's store directly. */
static int legacy_put(unsigned i, const char *key, const struct ol_version_id *vid)
{
    uint8_t b[64], *p = b;
    memcpy(p, "OLS1", 4);
    p += 4;
    memcpy(p, vid->b, 16);
    p += 16;
    *p++ = 4; /* k */
    *p++ = 2; /* m */
    *p++ = (uint8_t)i;
    *p++ = 0; /* rotation */
    *p++ = 0; /* flags: the old format never stored COMPLETE */
    memset(p, 0, 4 + 8 + 8);
    p[2] = 1; /* unit_bytes 65536 */
    p += 4 + 8 + 8;
    *p++ = 0; /* no etag */
    struct ol_obj_info info = {.meta = b, .meta_len = (uint32_t)(p - b)};
    struct ol_store_writer *w = NULL;
    char svid[OL_STORE_VID_MAX];
    int rc = ol_store_write_begin(ol_storedrive_store(sd[i]), 0, &w);
    return rc < 0 ? rc
                  : ol_store_write_commit_object_v(w, "bkt", key, strlen(key), &info, NULL, svid);
}

static unsigned list_count(void)
{
    unsigned n = 0;
    /* The keys after obj/0034: the last 25. */
    int rc = ol_eset_list(es, "bkt", "obj/0034", 8, 1000, count_cb, &n);
    return rc < 0 ? 0 : n;
}


/* A PUT of key with n bytes of 'tag', blob meta (mlen) and flags. */
static int put_tagged(const char *key, char tag, size_t n, const void *meta, size_t mlen,
                      uint32_t flags, struct ol_eset_put *p, struct ol_eset_obj *out)
{
    int rc = 0;
    if (!p)
        rc = ol_eset_put_begin(es, "bkt", key, strlen(key), &p);
    if (rc < 0)
        return rc;
    uint8_t *b = malloc(n + 1);
    memset(b, tag, n);
    rc = ol_eset_put_write(p, b, n);
    free(b);
    if (rc < 0) {
        ol_eset_put_abort(p);
        return rc;
    }
    char etag[2] = {tag, 0};
    struct ol_eset_commit cm = {.etag = etag, .mtime_ns = 3, .meta = meta, .meta_len = mlen,
                                .flags = flags};
    return ol_eset_put_commit2(p, &cm, out);
}

/* Items of issue #11 over real stores: the last completed PUT wins, blobs,
 * set_meta, versioned keys. */
static void test_versions_and_meta(void)
{
    struct ol_eset_obj oa, ob, o, list[8];
    struct ol_shard_meta vm[16];
    static uint8_t m[OL_ESET_META_MAX], got[OL_ESET_META_MAX];
    size_t len = 0;

    /* Begin A, begin B, commit B, commit A: A. */
    struct ol_eset_put *a, *b;
    CHECK_RC(ol_eset_put_begin(es, "bkt", "lw", 2, &a), 0);
    CHECK_RC(ol_eset_put_begin(es, "bkt", "lw", 2, &b), 0);
    CHECK_RC(put_tagged("lw", 'B', 5000, NULL, 0, 0, b, &ob), 0);
    CHECK_RC(put_tagged("lw", 'A', 90000, NULL, 0, 0, a, &oa), 0);
    CHECK_RC(ol_eset_stat(es, "bkt", "lw", 2, NULL, &o), 0);
    CHECK(strcmp(o.etag, "A") == 0 && o.size == 90000 && ol_version_id_cmp(&o.vid, &oa.vid) == 0);
    CHECK_RC(ol_eset_read(es, "bkt", "lw", 2, NULL, 89990, 10, got, NULL), 0);
    CHECK(got[0] == 'A' && got[9] == 'A');
    for (unsigned i = 0; i < N; i++)
        CHECK_RC(ol_storedrive_ops.versions(sd[i], "bkt", "lw", 2, vm, 16, NULL), 1);

    /* A blob, stored with each shard, read back in one call per drive. */
    for (size_t i = 0; i < sizeof(m); i++)
        m[i] = (uint8_t)(i * 7 + 1);
    CHECK_RC(put_tagged("mt", 'M', 100000, m, 5000, 0, NULL, &o), 0);
    CHECK(o.meta_len == 5000);
    CHECK_RC(ol_eset_stat_meta(es, "bkt", "mt", 2, NULL, &o, got, sizeof(got), &len), 0);
    CHECK(len == 5000 && o.size == 100000 && memcmp(got, m, len) == 0);
    CHECK(store_versions(0, "mt") == 1); /* marked: the blob moved with the mark */
    /* The largest blob. */
    CHECK_RC(put_tagged("mx", 'X', 10, m, OL_ESET_META_MAX, 0, NULL, NULL), 0);
    CHECK_RC(ol_eset_stat_meta(es, "bkt", "mx", 2, NULL, &o, got, sizeof(got), &len), 0);
    CHECK(len == OL_ESET_META_MAX && memcmp(got, m, len) == 0);
    /* Objects without one (and from before) read with none. */
    CHECK_RC(ol_eset_stat_meta(es, "bkt", "obj/0003", 8, NULL, &o, got, sizeof(got), &len), 0);
    CHECK(len == 0 && o.meta_len == 0);

    /* set_meta: new blob, same version and bytes; two drives wiped, the heal
     * rebuilds their shards with the new blob. */
    CHECK_RC(ol_eset_set_meta(es, "bkt", "mt", 2, NULL, "tags=1", 6), 0);
    CHECK_RC(ol_eset_stat_meta(es, "bkt", "mt", 2, NULL, &o, got, sizeof(got), &len), 0);
    CHECK(len == 6 && memcmp(got, "tags=1", 6) == 0 && o.size == 100000);
    CHECK(store_versions(3, "mt") == 1);
    /* An older stamp does not win on a drive. */
    CHECK_RC(ol_storedrive_ops.set_meta(sd[0], "bkt", "mt", 2, &o.vid, "old", 3, 1), 0);
    struct ol_drive_blob bl = {.buf = got, .cap = sizeof(got)};
    CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "mt", 2, vm, 16, &bl), 1);
    CHECK(bl.got && bl.len == 6 && memcmp(got, "tags=1", 6) == 0);
    CHECK(vm[0].flags & OL_SHARD_COMPLETE); /* the rewrite kept the mark */
    wipe(1);
    wipe(4);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_object(es, "bkt", "mt", 2, &hs), 0);
    CHECK(hs.shards_rebuilt == 2);
    bl.want = NULL;
    CHECK_RC(ol_storedrive_ops.versions(sd[4], "bkt", "mt", 2, vm, 16, &bl), 1);
    CHECK(bl.got && bl.len == 6 && memcmp(got, "tags=1", 6) == 0);
    /* The wiped drives lost the other objects: heal them all back. */
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    CHECK(hs.unrecoverable == 0);

    /* Versioned: older versions stay through marks and heals. */
    struct ol_eset_obj v[3];
    for (unsigned i = 0; i < 3; i++)
        CHECK_RC(put_tagged("ver", (char)('a' + i), 1000 + i, m + i, 4, OL_SHARD_KEEP_OLDER, NULL,
                            &v[i]),
                 0);
    CHECK_RC(ol_eset_versions(es, "bkt", "ver", 3, list, 8), 3);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_object(es, "bkt", "ver", 3, &hs), 0);
    CHECK(hs.versions_removed == 0);
    CHECK_RC(ol_eset_stat_meta(es, "bkt", "ver", 3, &v[0].vid, &o, got, sizeof(got), &len), 0);
    CHECK(o.size == 1000 && len == 4 && memcmp(got, m, 4) == 0);
    CHECK_RC(ol_eset_delete_marker(es, "bkt", "ver", 3, OL_SHARD_KEEP_OLDER, 9, &o), 0);
    CHECK_RC(ol_eset_stat(es, "bkt", "ver", 3, NULL, &o), -OL_ENOKEY);
    CHECK_RC(ol_eset_versions(es, "bkt", "ver", 3, list, 8), 4);
    CHECK_RC(ol_eset_delete_version(es, "bkt", "ver", 3, &list[0].vid), 0);
    CHECK_RC(ol_eset_stat(es, "bkt", "ver", 3, NULL, &o), 0);
    CHECK(ol_version_id_cmp(&o.vid, &v[2].vid) == 0);
    /* An unversioned PUT frees them all. */
    CHECK_RC(put_tagged("ver", 'z', 10, NULL, 0, 0, NULL, NULL), 0);
    CHECK_RC(ol_eset_versions(es, "bkt", "ver", 3, list, 8), 1);
    CHECK(store_versions(2, "ver") == 1);
}

static unsigned rotation_for(const char *key)
{
    struct ol_ec_placement pl;
    struct ol_ec_target t;
    if (ol_ec_placement_init(&pl, N, 4, 2, (const uint8_t *)"storedrive-test!") < 0)
        abort();
    ol_ec_place(&pl, "bkt", key, strlen(key), &t);
    return t.rotation;
}

/* Drives whose newest version of key records rotation rot and the shard
 * that rot puts on their slot. */
static unsigned holders_with_rotation(const char *key, unsigned rot)
{
    unsigned n = 0;
    for (unsigned d = 0; d < N; d++) {
        struct ol_shard_meta sm;
        if (ol_storedrive_ops.versions(sd[d], "bkt", key, strlen(key), &sm, 1, NULL) == 1)
            n += sm.rotation == rot && sm.shard == (d + N - rot) % N;
    }
    return n;
}

static uint64_t segment_bytes_all(void)
{
    uint64_t b = 0;
    for (unsigned d = 0; d < N; d++) {
        struct ol_store_stats ss;
        ol_store_stats(ol_storedrive_store(sd[d]), &ss);
        b += ss.segment_bytes;
    }
    return b;
}

/* 0 when key reads back as n bytes of seed. */
static int check_key(const char *key, uint64_t seed, size_t n)
{
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    struct ol_eset_obj o;
    gen(seed, want, n);
    int rc = ol_eset_read(es, "bkt", key, strlen(key), NULL, 0, n, got, &o);
    if (rc == 0 && (o.size != n || memcmp(want, got, n) != 0))
        rc = -EBADMSG;
    free(want);
    free(got);
    return rc;
}

/* CopyObject by reference over real stores: the shards' extents are shared
 * (no segment grows), the copy keeps the source's rotation, reads after the
 * source is gone and after two drives are wiped, heals, and is replaced by a
 * second copy and by a PUT. */
static void test_copy_by_reference(void)
{
    const size_t n = 6u << 20;
    uint8_t *buf = malloc(n);
    gen(77, buf, n);
    CHECK_RC(ol_eset_put(es, "bkt", "cp/src", 6, buf, n, "e77", NULL), 0);
    free(buf);
    unsigned rs = rotation_for("cp/src");
    char dst[32] = "cp/dst";
    for (unsigned i = 0; i < 100 && rotation_for(dst) == rs; i++)
        snprintf(dst, sizeof(dst), "cp/dst%u", i);
    CHECK(rotation_for(dst) != rs);
    size_t dl = strlen(dst);
    uint64_t seg0 = segment_bytes_all();
    struct ol_eset_commit cm = {.etag = "copy", .mtime_ns = 9, .meta = "m=1", .meta_len = 3};
    struct ol_eset_obj o;
    CHECK_RC(ol_eset_copy(es, "bkt", "cp/src", 6, NULL, "bkt", dst, dl, &cm, &o), 0);
    CHECK(o.size == n && o.shards == N);
    /* 6 MiB of shards (plus parity) were not written again. */
    uint64_t seg1 = segment_bytes_all();
    fprintf(stderr, "copy of %zu bytes: segments grew by %llu bytes\n", n,
            (unsigned long long)(seg1 - seg0));
    CHECK(seg1 - seg0 < n / 8);
    CHECK(holders_with_rotation(dst, rs) == N);
    CHECK(check_key(dst, 77, n) == 0);
    uint8_t got[16];
    size_t len = 0;
    CHECK_RC(ol_eset_stat_meta(es, "bkt", dst, dl, NULL, &o, got, sizeof(got), &len), 0);
    CHECK(len == 3 && memcmp(got, "m=1", 3) == 0 && strcmp(o.etag, "copy") == 0);
    CHECK(store_versions(0, dst) == 1); /* marked (one more copy by reference) */

    /* The source goes: the copy still reads (the extents are shared). */
    CHECK_RC(ol_eset_delete(es, "bkt", "cp/src", 6), 0);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    (void)ol_eset_heal_object(es, "bkt", "cp/src", 6, &hs);
    CHECK(check_key(dst, 77, n) == 0);

    /* Two drives wiped: reads, then the heal rebuilds their shards with the
     * copy's rotation; two other drives may then go. */
    wipe(0);
    wipe(5);
    CHECK(check_key(dst, 77, n) == 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_object(es, "bkt", dst, dl, &hs), 0);
    CHECK(hs.shards_rebuilt == 2);
    CHECK(holders_with_rotation(dst, rs) == N);
    ol_storedrive_set_offline(sd[1], true);
    ol_storedrive_set_offline(sd[2], true);
    CHECK(check_key(dst, 77, n) == 0);
    ol_storedrive_set_offline(sd[1], false);
    ol_storedrive_set_offline(sd[2], false);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0); /* the other keys the wipes lost */
    CHECK(hs.unrecoverable == 0);

    /* A second copy onto the destination, then a PUT over it: one store
     * version of the key left on each drive each time. */
    CHECK_RC(put_obj(30, 3030), 0);
    CHECK_RC(ol_eset_copy(es, "bkt", "obj/0030", 8, NULL, "bkt", dst, dl, &cm, &o), 0);
    CHECK(check_key(dst, 3030, obj_size(30)) == 0);
    CHECK(holders_with_rotation(dst, rotation_for("obj/0030")) == N);
    for (unsigned d = 0; d < N; d++)
        CHECK(store_versions(d, dst) == 1);
    buf = malloc(1000);
    gen(31, buf, 1000);
    CHECK_RC(ol_eset_put(es, "bkt", dst, dl, buf, 1000, "p", NULL), 0);
    free(buf);
    CHECK(check_key(dst, 31, 1000) == 0);
    CHECK(holders_with_rotation(dst, rotation_for(dst)) == N);
    for (unsigned d = 0; d < N; d++)
        CHECK(store_versions(d, dst) == 1);
    /* A copy onto its own key. */
    CHECK_RC(ol_eset_copy(es, "bkt", dst, dl, NULL, "bkt", dst, dl, &cm, &o), 0);
    CHECK(check_key(dst, 31, 1000) == 0);
    for (unsigned d = 0; d < N; d++)
        CHECK(store_versions(d, dst) == 1);
    /* The drive refuses a copy whose metadata does not describe the source
     * shard, and a source version it does not hold. */
    struct ol_shard_meta vm[2];
    CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", dst, dl, vm, 2, NULL), 1);
    struct ol_shard_meta wrong = vm[0];
    ol_hlc_version_id(&hlc, &wrong.vid);
    wrong.shard = (uint8_t)((wrong.shard + 1) % N);
    CHECK_RC(ol_storedrive_ops.shard_copy(sd[0], "bkt", dst, dl, &vm[0].vid, "bkt", "cp/x", 4,
                                          &wrong, NULL, 0),
             -EINVAL);
    CHECK_RC(ol_storedrive_ops.shard_copy(sd[0], "bkt", dst, dl, &wrong.vid, "bkt", "cp/x", 4,
                                          &vm[0], NULL, 0),
             -OL_ENOKEY);
    CHECK(store_versions(0, "cp/x") == 0);
    CHECK_RC(ol_eset_delete(es, "bkt", dst, dl), 0);
    memset(&hs, 0, sizeof(hs));
    (void)ol_eset_heal_object(es, "bkt", dst, dl, &hs);
}

/* ---- a small object's GET: the shards come with the versions answers ---- */

static struct ol_drive_ops counting_ops;
static _Atomic unsigned shard_reads;

static int counting_read_shard(void *d, const char *bucket, const char *key, size_t klen,
                               const struct ol_version_id *vid, uint64_t off, size_t len,
                               void *buf)
{
    shard_reads++;
    return ol_storedrive_ops.read_shard(d, bucket, key, klen, vid, off, len, buf);
}

static _Atomic unsigned reader_reads;

static int counting_reader_read(void *h, uint64_t off, size_t len, void *buf)
{
    reader_reads++;
    return ol_storedrive_ops.reader_read(h, off, len, buf);
}

/* 0 when key reads whole through a reader of set `set` as n bytes of seed. */
static int reader_check(struct ol_eset *set, const char *key, uint64_t seed, size_t n)
{
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    gen(seed, want, n);
    struct ol_eset_obj o;
    struct ol_eset_reader *rd = NULL;
    char meta[256];
    size_t ml = 0;
    int rc = ol_eset_reader_open(set, "bkt", key, strlen(key), NULL, &o, meta, sizeof(meta), &ml,
                                 &rd);
    if (rc == 0)
        rc = o.size == n ? ol_eset_reader_read(rd, 0, n, got) : -EBADMSG;
    if (rc == 0 && memcmp(want, got, n) != 0)
        rc = -EBADMSG;
    if (rc == 0 && n > 100) {
        rc = ol_eset_reader_read(rd, 37, n - 100, got);
        if (rc == 0 && memcmp(want + 37, got, n - 100) != 0)
            rc = -EBADMSG;
    }
    ol_eset_reader_close(rd);
    free(want);
    free(got);
    return rc;
}

static void test_small_get(const struct ol_eset_cfg *base)
{
    counting_ops = ol_storedrive_ops;
    counting_ops.read_shard = counting_read_shard;
    counting_ops.reader_read = counting_reader_read;
    struct ol_drive drives[N];
    for (unsigned i = 0; i < N; i++)
        drives[i] = (struct ol_drive){&counting_ops, sd[i]};
    struct ol_eset_cfg cfg = *base;
    cfg.drives = drives;
    struct ol_eset *set = NULL;
    CHECK_RC(ol_eset_create(&cfg, &set), 0);
    if (!set)
        return;
    static const size_t sizes[] = {1, 4096, 16 * 1024};
    for (unsigned i = 0; i < 3; i++) {
        uint8_t *b = malloc(sizes[i]);
        gen(77 + i, b, sizes[i]);
        char key[32];
        snprintf(key, sizeof(key), "small/%u", i);
        CHECK_RC(ol_eset_put(set, "bkt", key, strlen(key), b, sizes[i], "e", NULL), 0);
        free(b);
        shard_reads = reader_reads = 0;
        CHECK_RC(reader_check(set, key, 77 + i, sizes[i]), 0);
        CHECK(shard_reads == 0 && reader_reads == 0);
        /* A data shard's drive down: the others and parity (which came
         * with the answers too) rebuild it, still without a read round. */
        ol_storedrive_set_offline(sd[i], true);
        CHECK_RC(reader_check(set, key, 77 + i, sizes[i]), 0);
        ol_storedrive_set_offline(sd[i], false);
    }
    /* A larger object's shards do not fit: read through the data shards'
     * drive readers (no read_shard round while they are healthy). */
    size_t big = 200 * 1024;
    uint8_t *b = malloc(big);
    gen(99, b, big);
    CHECK_RC(ol_eset_put(set, "bkt", "small/big", 9, b, big, "e", NULL), 0);
    free(b);
    shard_reads = reader_reads = 0;
    CHECK_RC(reader_check(set, "small/big", 99, big), 0);
    CHECK(reader_reads >= cfg.k && shard_reads == 0);
    for (unsigned i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof(key), "small/%u", i);
        CHECK_RC(ol_eset_delete(set, "bkt", key, strlen(key)), 0);
    }
    CHECK_RC(ol_eset_delete(set, "bkt", "small/big", 9), 0);
    ol_eset_destroy(set);
}

/* A reader that began on a version reads it to its end after a newer
 * version's mark freed it on every drive: its pinned drive readers still
 * hold the bytes (an S3 GET racing an overwrite of the key; without them
 * the reads by version id fail half-way through the body).  With `down`
 * (< N), that drive missed the first version: the reader pins a parity
 * shard in place of the data shard it lacks and rebuilds through the
 * pinned ones (without that, the rebuild by version id found nothing). */
static void reader_outlives_overwrite(const char *key, uint64_t seed, unsigned down)
{
    size_t n = 2u << 20; /* shards in segment files (the stores inline 4 KiB) */
    size_t kl = strlen(key);
    uint8_t *a = malloc(n), *b = malloc(n), *got = malloc(n);
    gen(seed, a, n);
    gen(seed + 1, b, n);
    if (down < N)
        ol_storedrive_set_offline(sd[down], true);
    CHECK_RC(ol_eset_put(es, "bkt", key, kl, a, n, "e", NULL), 0);
    if (down < N) {
        ol_storedrive_set_offline(sd[down], false);
        CHECK(store_versions(down, key) == 0);
    }
    struct ol_eset_obj o;
    struct ol_eset_reader *rd = NULL;
    char meta[256];
    size_t ml = 0;
    CHECK_RC(ol_eset_reader_open(es, "bkt", key, kl, NULL, &o, meta, sizeof(meta), &ml, &rd), 0);
    if (rd) {
        CHECK_RC(ol_eset_reader_read(rd, 0, 100, got), 0);
        CHECK_RC(ol_eset_put(es, "bkt", key, kl, b, n, "e", NULL), 0);
        /* Outside a fiber the PUT's marks ran before it returned: the
         * version the reader is on is gone from every drive's index. */
        for (unsigned d = 0; d < N; d++)
            CHECK(store_versions(d, key) == 1);
        CHECK_RC(ol_eset_reader_read(rd, 100, n - 100, got + 100), 0);
        CHECK(memcmp(a, got, n) == 0);
        /* A range inside shard 0's first unit, and one across every shard. */
        CHECK_RC(ol_eset_reader_read(rd, 70000, 1000, got), 0);
        CHECK(memcmp(a + 70000, got, 1000) == 0);
        CHECK_RC(ol_eset_reader_read(rd, 1, n - 1, got), 0);
        CHECK(memcmp(a + 1, got, n - 1) == 0);
        ol_eset_reader_close(rd);
    }
    CHECK_RC(reader_check(es, key, seed + 1, n), 0);
    CHECK_RC(ol_eset_delete(es, "bkt", key, kl), 0);
    free(a);
    free(b);
    free(got);
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    ol_hlc_init(&hlc, 7, 1234, NULL, NULL);
    struct ol_drive drives[N];
    for (unsigned i = 0; i < N; i++) {
        snprintf(dirs[i], sizeof(dirs[i]), "%s/d%u", root, i + 1);
        store_open(i);
        CHECK_RC(ol_storedrive_create(st[i], &sd[i]), 0);
        drives[i] = ol_storedrive_drive(sd[i]);
    }
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = 4;
    cfg.m = 2;
    cfg.unit_bytes = 64 * 1024;
    cfg.drives = drives;
    cfg.hlc = &hlc;
    memcpy(cfg.deployment_id, "storedrive-test!", 16);
    cfg.incomplete_grace_ms = 0;
    cfg.heal_on_read = false;
    CHECK_RC(ol_eset_create(&cfg, &es), 0);

    /* Write, overwrite half of them (older shard versions must be freed). */
    for (unsigned i = 0; i < NOBJ; i++)
        CHECK_RC(put_obj(i, 1000 + i), 0);
    for (unsigned i = 0; i < NOBJ; i += 2)
        CHECK_RC(put_obj(i, 1000 + i), 0);
    CHECK(check_all(1000) == 0);
    struct ol_shard_meta vm[16];
    CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "obj/0002", 8, vm, 16, NULL), 1);
    CHECK(vm[0].flags & OL_SHARD_COMPLETE);
    /* The mark (a copy by reference) replaced the unmarked copy, and freed
     * the older version: one store version left. */
    CHECK(store_versions(0, "obj/0002") == 1);
    CHECK(list_count() == 25);

    /* The first PUT of a key cut off after 3 shards (fewer than k, never
     * marked): not COMPLETE on any drive, so with every drive answering the
     * key does not exist, and a heal removes the leftover. */
    {
        struct ol_version_id lv;
        ol_hlc_version_id(&hlc, &lv);
        for (unsigned i = 0; i < 3; i++)
            CHECK_RC(phase1(i, "cut/1", &lv), 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "cut/1", 5, vm, 16, NULL), 1);
        CHECK(!(vm[0].flags & OL_SHARD_COMPLETE));
        struct ol_eset_obj o;
        CHECK_RC(ol_eset_stat(es, "bkt", "cut/1", 5, NULL, &o), -OL_ENOKEY);
        struct ol_eset_heal_stats ls;
        memset(&ls, 0, sizeof(ls));
        CHECK_RC(ol_eset_heal_object(es, "bkt", "cut/1", 5, &ls), -OL_ENOKEY);
        CHECK(ls.versions_removed == 3 && ls.unrecoverable == 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "cut/1", 5, vm, 16, NULL), 0);
        /* Marked on one drive, the version counts as once completed: an
         * acknowledged object that lost drives, not absent. */
        ol_hlc_version_id(&hlc, &lv);
        for (unsigned i = 0; i < 3; i++)
            CHECK_RC(phase1(i, "cut/2", &lv), 0);
        CHECK_RC(ol_storedrive_ops.mark_complete(sd[1], "bkt", "cut/2", 5, &lv), 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[1], "bkt", "cut/2", 5, vm, 16, NULL), 1);
        CHECK(vm[0].flags & OL_SHARD_COMPLETE);
        CHECK(store_versions(1, "cut/2") == 1);
        CHECK_RC(ol_storedrive_ops.mark_complete(sd[1], "bkt", "cut/2", 5, &lv), 0);
        CHECK(store_versions(1, "cut/2") == 1);
        CHECK_RC(ol_eset_stat(es, "bkt", "cut/2", 5, NULL, &o), -OL_EQUORUM);
        for (unsigned i = 0; i < 3; i++)
            CHECK_RC(ol_storedrive_ops.delete_version(sd[i], "bkt", "cut/2", 5, &lv), 0);
        CHECK_RC(ol_storedrive_ops.mark_complete(sd[1], "bkt", "cut/2", 5, &lv), -OL_ENOKEY);

        /* Entries from before the stored mark keep the derived rule: the
         * oldest version of a key is COMPLETE, newer ones are not until
         * marked (which rewrites them in the new format). */
        struct ol_version_id a, b;
        ol_hlc_version_id(&hlc, &a);
        ol_hlc_version_id(&hlc, &b);
        CHECK_RC(legacy_put(0, "old/1", &a), 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "old/1", 5, vm, 16, NULL), 1);
        CHECK(vm[0].flags & OL_SHARD_COMPLETE);
        CHECK_RC(legacy_put(0, "old/1", &b), 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "old/1", 5, vm, 16, NULL), 2);
        CHECK(!(vm[0].flags & OL_SHARD_COMPLETE) && (vm[1].flags & OL_SHARD_COMPLETE));
        CHECK_RC(ol_storedrive_ops.mark_complete(sd[0], "bkt", "old/1", 5, &b), 0);
        CHECK_RC(ol_storedrive_ops.versions(sd[0], "bkt", "old/1", 5, vm, 16, NULL), 1);
        CHECK(ol_version_id_cmp(&vm[0].vid, &b) == 0 && (vm[0].flags & OL_SHARD_COMPLETE));
        CHECK(store_versions(0, "old/1") == 1);
        CHECK_RC(ol_storedrive_ops.delete_version(sd[0], "bkt", "old/1", 5, &b), 0);
    }

    /* Wipe two drives: everything reads; heal rebuilds 2 shards per object. */
    wipe(1);
    wipe(4);
    CHECK(check_all(1000) == 0);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    fprintf(stderr, "heal 1: objects %llu rebuilt %llu corrupt %llu\n",
            (unsigned long long)hs.objects, (unsigned long long)hs.shards_rebuilt,
            (unsigned long long)hs.corrupt);
    CHECK(hs.objects == NOBJ);
    CHECK(hs.shards_rebuilt == 2 * NOBJ);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    CHECK(hs.shards_rebuilt == 0);
    CHECK(hs.unrecoverable == 0);

    /* Two other drives: still everything, only from the healed ones. */
    wipe(0);
    wipe(3);
    CHECK(check_all(1000) == 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    CHECK(hs.shards_rebuilt == 2 * NOBJ);

    /* Bit rot on two drives: reads stay correct; a heal repairs it. */
    unsigned flips = corrupt(2) + corrupt(5);
    fprintf(stderr, "flipped %u bytes\n", flips);
    CHECK(flips > 20);
    CHECK(check_all(1000) == 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    fprintf(stderr, "heal 3: rebuilt %llu corrupt %llu\n", (unsigned long long)hs.shards_rebuilt,
            (unsigned long long)hs.corrupt);
    CHECK(hs.corrupt > 10);
    CHECK(hs.shards_rebuilt == hs.corrupt);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    CHECK(hs.corrupt == 0 && hs.shards_rebuilt == 0);
    /* With the repaired drives only (two others offline), still correct. */
    ol_storedrive_set_offline(sd[0], true);
    ol_storedrive_set_offline(sd[1], true);
    CHECK(check_all(1000) == 0);

    /* Three drives offline: a PUT fails, the previous version stays. */
    ol_storedrive_set_offline(sd[3], true);
    CHECK_RC(put_obj(7, 5555), -OL_EQUORUM);
    ol_storedrive_set_offline(sd[3], false);
    CHECK(check_obj(7, 1007) == 0);
    /* One offline: the PUT works; the drive comes back stale; heal fixes. */
    ol_storedrive_set_offline(sd[0], false);
    CHECK_RC(put_obj(7, 6666), 0);
    ol_storedrive_set_offline(sd[1], false);
    CHECK(check_obj(7, 6666) == 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_object(es, "bkt", "obj/0007", 8, &hs), 0);
    CHECK(hs.shards_rebuilt == 1);
    for (unsigned i = 0; i < N; i++)
        CHECK_RC(ol_storedrive_ops.versions(sd[i], "bkt", "obj/0007", 8, vm, 16, NULL), 1);

    /* Delete: gone for reads and listings; heal removes the markers. */
    for (unsigned i = 10; i < 15; i++) {
        char key[32];
        key_of(i, key);
        CHECK_RC(ol_eset_delete(es, "bkt", key, strlen(key)), 0);
        struct ol_eset_obj o;
        CHECK_RC(ol_eset_stat(es, "bkt", key, strlen(key), NULL, &o), -OL_ENOKEY);
    }
    unsigned n = 0;
    CHECK(ol_eset_list(es, "bkt", "", 0, 1000, count_cb, &n) == NOBJ - 5);
    memset(&hs, 0, sizeof(hs));
    CHECK_RC(ol_eset_heal_all(es, &hs), 0);
    CHECK(ol_storedrive_ops.versions(sd[2], "bkt", "obj/0011", 8, vm, 16, NULL) == 0);

    /* Drive states: a directory renamed away is noticed by the check and
     * the drive goes offline (calls fail at once); PUTs go on with five; put
     * back, it is probed after its backoff, comes back, and a heal rebuilds
     * exactly what it missed.  Then an empty directory in its place is
     * opened as a fresh store and healed to full redundancy. */
    {
        struct ol_store_opts o;
        ol_store_opts_default(&o);
        o.inline_bytes = 4096;
        o.map_bytes = 1ull << 30;
        o.max_loops = 1;
        o.segment_bytes = 8u << 20;
        struct ol_storedrive_policy pol = {.fail_after = 2, .backoff_min_ms = 1000,
                                           .backoff_max_ms = 2000};
        ol_storedrive_set_policy(sd[2], &pol);
        CHECK_RC(ol_storedrive_set_path(sd[2], dirs[2], &o), 0);
        char away[96], cmd[256];
        snprintf(away, sizeof(away), "%s.away", dirs[2]);
        CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_ONLINE);
        CHECK(rename(dirs[2], away) == 0);
        CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_OFFLINE);
        uint64_t t_off = ol_now_ms();
        CHECK(ol_storedrive_offline(sd[2]));
        CHECK_RC(ol_storedrive_ops.versions(sd[2], "bkt", "obj/0020", 8, vm, 16, NULL), -EIO);
        CHECK_RC(put_obj(20, 7777), 0);
        CHECK(check_obj(20, 7777) == 0);
        CHECK(rename(away, dirs[2]) == 0);
        /* The backoff is not over (unless a loaded machine took that long
         * for the PUT and its check: then there is nothing to see here). */
        if (ol_now_ms() - t_off < 900) {
            CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_OFFLINE);
            CHECK(!ol_storedrive_take_came_back(sd[2]));
        }
        usleep(1100 * 1000);
        CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_ONLINE);
        CHECK(ol_storedrive_take_came_back(sd[2]));
        CHECK(!ol_storedrive_take_came_back(sd[2]));
        memset(&hs, 0, sizeof(hs));
        CHECK_RC(ol_eset_heal_all(es, &hs), 0);
        CHECK(hs.shards_rebuilt == 1);

        /* Replaced by an empty directory. */
        snprintf(cmd, sizeof(cmd), "mv '%s' '%s' && mkdir '%s'", dirs[2], away, dirs[2]);
        run(cmd);
        CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_OFFLINE);
        usleep(2100 * 1000); /* past the longest backoff */
        CHECK_RC(ol_storedrive_check(sd[2]), OL_SD_ONLINE);
        struct ol_storedrive_info di;
        ol_storedrive_info(sd[2], &di);
        CHECK(di.reopens == 1 && di.offline_events == 2 && di.online_events == 2);
        CHECK(ol_storedrive_store(sd[2]) != st[2]);
        memset(&hs, 0, sizeof(hs));
        CHECK_RC(ol_eset_heal_all(es, &hs), 0);
        fprintf(stderr, "replaced drive: rebuilt %llu of %llu objects\n",
                (unsigned long long)hs.shards_rebuilt, (unsigned long long)hs.objects);
        CHECK(hs.shards_rebuilt == NOBJ - 5);
        memset(&hs, 0, sizeof(hs));
        CHECK_RC(ol_eset_heal_all(es, &hs), 0);
        CHECK(hs.shards_rebuilt == 0 && hs.unrecoverable == 0);
        /* Full redundancy again: the two drives other than the healed one
         * may go and every object still reads. */
        ol_storedrive_set_offline(sd[0], true);
        ol_storedrive_set_offline(sd[1], true);
        CHECK(check_obj(20, 7777) == 0);
        CHECK(check_obj(21, 1021) == 0);
        ol_storedrive_set_offline(sd[0], false);
        ol_storedrive_set_offline(sd[1], false);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", away);
        run(cmd);
    }

    /* Deleting the bucket's leftovers on a drive. */
    CHECK_RC(ol_storedrive_bucket_create(sd[0], "other", 1), 0);
    CHECK_RC(ol_storedrive_bucket_delete(sd[0], "other"), 0);

    test_versions_and_meta();
    test_copy_by_reference();
    test_small_get(&cfg);
    reader_outlives_overwrite("pin/1", 501, N);
    /* Shard 0's drive (rotation_for: shard j is on slot rotation + j). */
    reader_outlives_overwrite("pin/2", 511, rotation_for("pin/2") % N);

    ol_eset_destroy(es);
    for (unsigned i = 0; i < N; i++) {
        ol_storedrive_destroy(sd[i]);
        ol_store_close(st[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    run(cmd);
    return failures ? 1 : 0;
}
