/* Unit test of the versions DB (src/store/versions.c): versions and markers
 * of short and long keys, reads by id, listing order, permanent deletes and
 * their space, suspended "null" versions, persistence across a reopen.
 * Plain threads; a temporary drive under /tmp.  Exits 0 / 1 / 77. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "store/store.h"

#include "check.h"
#include "store_check.h"



/* Writes size bytes of value `b` (big enough to leave the index). */
static int put(struct ol_store *st, const char *key, size_t kl, size_t size, uint8_t b,
               char vid[OL_STORE_VID_MAX])
{
    struct ol_store_writer *w;
    int rc = ol_store_write_begin(st, (int64_t)size, &w);
    if (rc)
        return rc;
    uint8_t *buf = malloc(size);
    memset(buf, b, size);
    rc = ol_store_write(w, buf, size);
    free(buf);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    struct ol_obj_info info = {.mtime_ns = 1000};
    snprintf(info.etag, sizeof(info.etag), "e%u", b);
    return ol_store_write_commit_object_v(w, "vbk", key, kl, &info, NULL, vid);
}

/* The first byte of version vid (or -error). */
static int first_byte(struct ol_store *st, const char *key, size_t kl, const char *vid)
{
    struct ol_store_reader *r;
    int rc = ol_store_read_open_v(st, "vbk", key, kl, vid, &r);
    if (rc)
        return rc;
    const uint8_t *d;
    ssize_t n = ol_store_read(r, 0, 1, &d);
    rc = n == 1 ? d[0] : -1000;
    ol_store_read_close(r);
    return rc;
}

/* Lists every version: "key-initial:vid-prefix:latest:marker" per entry. */
static int list(struct ol_store *st, char (*out)[64], int max)
{
    struct ol_store_viter *it;
    int rc = ol_store_viter_open(st, "vbk", &it);
    if (rc)
        return rc;
    int n = 0;
    const char *k;
    size_t kl;
    struct ol_version_info vi;
    while (n < max && ol_store_viter_next(it, &k, &kl, &vi) == 0) {
        snprintf(out[n], 64, "%c%zu:%s:%d:%d", k[0], kl, vi.vid, vi.is_latest, vi.is_marker);
        n++;
    }
    ol_store_viter_close(it);
    return n;
}

static void test_versions(struct ol_store *st, char *long_key)
{
    char v[3][OL_STORE_VID_MAX], lv[2][OL_STORE_VID_MAX], m[OL_STORE_VID_MAX];
    CHECK_RC(ol_store_bucket_create(st, "vbk", 1), 0);
    /* Unversioned: the current object is the "null" version. */
    CHECK_RC(put(st, "a", 1, 300000, 'n', v[0]), 0);
    CHECK(v[0][0] == 0);
    CHECK_RC(first_byte(st, "a", 1, "null"), 'n');
    CHECK_RC(first_byte(st, "a", 1, "AAAAAAAAAAAAAAAAAAAAAA"), -OL_ENOVERSION);
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_OFF), -EINVAL);
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_ENABLED), 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(put(st, "a", 1, 300000, (uint8_t)('0' + i), v[i]), 0);
    CHECK(strcmp(v[0], v[1]) < 0 && strcmp(v[1], v[2]) < 0 && strlen(v[0]) == 22);
    for (int i = 0; i < 2; i++)
        CHECK_RC(put(st, long_key, 1024, 5000 + (size_t)i, (uint8_t)('x' + i), lv[i]), 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(first_byte(st, "a", 1, v[i]), '0' + i);
    CHECK_RC(first_byte(st, "a", 1, "null"), 'n');
    CHECK_RC(first_byte(st, long_key, 1024, lv[0]), 'x');
    CHECK_RC(first_byte(st, long_key, 1024, NULL), 'y');

    char rows[16][64];
    CHECK_RC(list(st, rows, 16), 6);
    char want[64];
    snprintf(want, sizeof(want), "a1:%s:1:0", v[2]);
    CHECK(strcmp(rows[0], want) == 0);
    CHECK(strcmp(rows[3], "a1:null:0:0") == 0);
    snprintf(want, sizeof(want), "x1024:%s:0:0", lv[0]);
    CHECK(strcmp(rows[5], want) == 0);

    /* A delete adds a marker; the marker's id reads as a marker. */
    struct ol_store_del_res res;
    CHECK_RC(ol_store_delete_v(st, "vbk", "a", 1, NULL, &res), 0);
    CHECK(res.marker && strlen(res.vid) == 22);
    memcpy(m, res.vid, sizeof(m));
    CHECK_RC(first_byte(st, "a", 1, NULL), -OL_ENOKEY);
    CHECK_RC(first_byte(st, "a", 1, m), -OL_EMARKER);
    char mv[OL_STORE_VID_MAX];
    CHECK_RC(ol_store_latest_marker(st, "vbk", "a", 1, mv, NULL), 1);
    CHECK(strcmp(mv, m) == 0);
    CHECK_RC(ol_store_bucket_delete(st, "vbk"), -OL_EBUCKETNOTEMPTY);
    /* Removing the marker brings the last version back. */
    CHECK_RC(ol_store_delete_v(st, "vbk", "a", 1, m, &res), 0);
    CHECK(res.marker);
    CHECK_RC(first_byte(st, "a", 1, NULL), '2');
    /* Removing the current version makes the previous one current. */
    CHECK_RC(ol_store_delete_v(st, "vbk", "a", 1, v[2], NULL), 0);
    CHECK_RC(first_byte(st, "a", 1, NULL), '1');
    CHECK_RC(ol_store_delete_v(st, "vbk", "a", 1, v[2], NULL), -OL_ENOVERSION);

    /* Suspended: a new null version replaces the old null version. */
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_SUSPENDED), 0);
    char nv[OL_STORE_VID_MAX];
    CHECK_RC(put(st, "a", 1, 300000, 's', nv), 0);
    CHECK(strcmp(nv, "null") == 0);
    CHECK_RC(first_byte(st, "a", 1, "null"), 's');
    CHECK_RC(list(st, rows, 16), 5); /* s(null), 1, 0, long x2 */
}

/* ol_store_key_versions collects "vid:latest" per version. */
struct kv_rows {
    char rows[8][64];
    int n, stop_at;
};

static int kv_row(void *ctx, const struct ol_version_info *vi)
{
    struct kv_rows *r = ctx;
    if (r->n >= 8)
        return -ENOSPC;
    snprintf(r->rows[r->n++], 64, "%s:%d", vi->vid, vi->is_latest);
    return r->n == r->stop_at;
}

/* ol_store_key_versions: one key's versions newest first, the current one
 * first; a longer key holding the key and a NUL at its head (whose versions
 * sort among the key's) is not mixed in; unknown keys and buckets give
 * nothing; the callback stops the walk.  Repeated walks reuse the store's
 * rested read transactions. */
static void test_key_versions(struct ol_store *st, const char *long_key)
{
    char v[3][OL_STORE_VID_MAX], w[2][OL_STORE_VID_MAX], want[64];
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_ENABLED), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_RC(put(st, "k", 1, 100 + (size_t)i, (uint8_t)('0' + i), v[i]), 0);
        CHECK_RC(put(st, "k\0z", 3, 100, (uint8_t)('a' + i), w[i]), 0);
    }
    CHECK_RC(put(st, "k", 1, 300000, '2', v[2]), 0);
    for (int round = 0; round < 40; round++) {
        struct kv_rows r = {.n = 0};
        CHECK_RC(ol_store_key_versions(st, "vbk", "k", 1, kv_row, &r), 0);
        CHECK(r.n == 3);
        for (int i = 0; i < 3 && r.n == 3; i++) {
            snprintf(want, sizeof(want), "%s:%d", v[2 - i], i == 0);
            CHECK(strcmp(r.rows[i], want) == 0);
        }
    }
    struct kv_rows r = {.n = 0};
    CHECK_RC(ol_store_key_versions(st, "vbk", "k\0z", 3, kv_row, &r), 0);
    CHECK(r.n == 2);
    snprintf(want, sizeof(want), "%s:0", w[0]);
    CHECK(r.n == 2 && strcmp(r.rows[1], want) == 0);
    r = (struct kv_rows){.stop_at = 2};
    CHECK_RC(ol_store_key_versions(st, "vbk", "k", 1, kv_row, &r), 0);
    CHECK(r.n == 2);
    r = (struct kv_rows){.n = 0};
    CHECK_RC(ol_store_key_versions(st, "vbk", long_key, 1024, kv_row, &r), 0);
    CHECK(r.n == 2);
    r = (struct kv_rows){.n = 0};
    CHECK_RC(ol_store_key_versions(st, "vbk", "nope", 4, kv_row, &r), 0);
    CHECK_RC(ol_store_key_versions(st, "nobucket", "k", 1, kv_row, &r), 0);
    CHECK(r.n == 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(ol_store_delete_v(st, "vbk", "k", 1, v[i], NULL), 0);
    for (int i = 0; i < 2; i++)
        CHECK_RC(ol_store_delete_v(st, "vbk", "k\0z", 3, w[i], NULL), 0);
}

/* The "tags" attribute of version vid, as text in out ("" when unset), or
 * -error. */
static int attr_of(struct ol_store *st, const char *key, const char *vid, char *out, size_t cap)
{
    struct ol_store_reader *r;
    int rc = ol_store_read_open_v(st, "vbk", key, strlen(key), vid, &r);
    if (rc)
        return rc;
    const uint8_t *val;
    size_t len = 0;
    out[0] = 0;
    if (ol_store_read_attr(r, "tags", &val, &len) == 0 && len < cap) {
        memcpy(out, val, len);
        out[len] = 0;
    }
    ol_store_read_close(r);
    return 0;
}

/* ol_store_object_attr_put_v: attributes of current and noncurrent versions,
 * markers, unknown ids; the data and the space stay as they were. */
static void test_attr_v(struct ol_store *st)
{
    char v[2][OL_STORE_VID_MAX], out[OL_STORE_VID_MAX], buf[64];
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_ENABLED), 0);
    CHECK_RC(put(st, "b", 1, 300000, 'p', v[0]), 0);
    CHECK_RC(put(st, "b", 1, 300000, 'q', v[1]), 0);
    struct ol_store_stats before, after;
    ol_store_stats(st, &before);
    /* A noncurrent version, by id. */
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, v[0], "tags", "old", 3, out), 0);
    CHECK(strcmp(out, v[0]) == 0);
    CHECK_RC(attr_of(st, "b", v[0], buf, sizeof(buf)), 0);
    CHECK(strcmp(buf, "old") == 0);
    CHECK_RC(attr_of(st, "b", NULL, buf, sizeof(buf)), 0);
    CHECK(buf[0] == 0);
    /* The current version, with no id and by its id. */
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, NULL, "tags", "cur", 3, out), 0);
    CHECK(strcmp(out, v[1]) == 0);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, v[1], "tags", "cur2", 4, NULL), 0);
    CHECK_RC(attr_of(st, "b", NULL, buf, sizeof(buf)), 0);
    CHECK(strcmp(buf, "cur2") == 0);
    CHECK_RC(attr_of(st, "b", v[0], buf, sizeof(buf)), 0);
    CHECK(strcmp(buf, "old") == 0);
    /* Data, order and space are untouched. */
    CHECK_RC(first_byte(st, "b", 1, v[0]), 'p');
    CHECK_RC(first_byte(st, "b", 1, NULL), 'q');
    ol_store_stats(st, &after);
    CHECK(after.live_bytes == before.live_bytes && after.objects == before.objects);
    /* Removal. */
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, v[0], "tags", NULL, 0, NULL), 0);
    CHECK_RC(attr_of(st, "b", v[0], buf, sizeof(buf)), 0);
    CHECK(buf[0] == 0);
    /* Unknown or malformed ids, reserved names, a missing bucket. */
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, "AAAAAAAAAAAAAAAAAAAAAA", "tags",
                                        "x", 1, NULL),
             -OL_ENOVERSION);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, "junk", "tags", "x", 1, NULL),
             -OL_ENOVERSION);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, v[0], "ol.vid", "x", 1, NULL), -EINVAL);
    CHECK_RC(ol_store_object_attr_put_v(st, "nob", "b", 1, v[0], "tags", "x", 1, NULL),
             -OL_ENOBUCKET);
    /* A delete marker has no attributes; with it latest, there is no current object. */
    struct ol_store_del_res res;
    CHECK_RC(ol_store_delete_v(st, "vbk", "b", 1, NULL, &res), 0);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, res.vid, "tags", "x", 1, NULL),
             -OL_EMARKER);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, NULL, "tags", "x", 1, NULL),
             -OL_ENOKEY);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "b", 1, v[1], "tags", "nc", 2, NULL), 0);
    CHECK_RC(attr_of(st, "b", v[1], buf, sizeof(buf)), 0);
    CHECK(strcmp(buf, "nc") == 0);
    /* The "null" version of key a (written while suspended). */
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "a", 1, "null", "tags", "n", 1, out), 0);
    CHECK(strcmp(out, "null") == 0);
    CHECK_RC(attr_of(st, "a", "null", buf, sizeof(buf)), 0);
    CHECK(strcmp(buf, "n") == 0);
    CHECK_RC(ol_store_object_attr_put_v(st, "vbk", "a", 1, "null", "tags", NULL, 0, NULL), 0);
    /* Leave the bucket as test_cleanup expects it. */
    CHECK_RC(ol_store_delete_v(st, "vbk", "b", 1, res.vid, NULL), 0);
    CHECK_RC(ol_store_delete_v(st, "vbk", "b", 1, v[1], NULL), 0);
    CHECK_RC(ol_store_delete_v(st, "vbk", "b", 1, v[0], NULL), 0);
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_SUSPENDED), 0);
}

/* ol_store_rewrite_v: a version rewritten with new meta and older ones
 * removed, queued as one chain; the removals never run when the rewrite
 * fails. */
static void test_rewrite(struct ol_store *st)
{
    char r1[OL_STORE_VID_MAX], r2[OL_STORE_VID_MAX], r3[OL_STORE_VID_MAX];
    char nv[OL_STORE_VID_MAX];
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_ENABLED), 0);
    CHECK_RC(put(st, "r", 1, 70000, 61, r1), 0);
    CHECK_RC(put(st, "r", 1, 70000, 62, r2), 0);
    CHECK_RC(put(st, "r", 1, 70000, 63, r3), 0);
    static const uint8_t meta[] = "new-meta";
    struct ol_store_copy_opts o = {
        .replace_meta = true, .meta = meta, .meta_len = sizeof(meta), .mtime_ns = 7};
    const char *drop[] = {r1, r3};
    int drc[2] = {1, 1};
    CHECK_RC(ol_store_rewrite_v(st, "vbk", "r", 1, r3, &o, nv, drop, 2, drc), 0);
    CHECK(drc[0] == 0 && drc[1] == 0);
    CHECK(strcmp(nv, r3) != 0 && nv[0]);
    CHECK_RC(first_byte(st, "r", 1, nv), 63);
    CHECK_RC(first_byte(st, "r", 1, r2), 62);
    CHECK_RC(first_byte(st, "r", 1, r1), -OL_ENOVERSION);
    CHECK_RC(first_byte(st, "r", 1, r3), -OL_ENOVERSION);
    struct ol_store_reader *rd;
    CHECK_RC(ol_store_read_open_v(st, "vbk", "r", 1, nv, &rd), 0);
    if (rd) {
        const struct ol_obj_info *in = ol_store_read_info(rd);
        CHECK(in->meta_len == sizeof(meta) && memcmp(in->meta, meta, sizeof(meta)) == 0);
        ol_store_read_close(rd);
    }
    /* The rewrite fails (r3 is gone): r2 is not removed. */
    const char *drop2[] = {r2};
    CHECK_RC(ol_store_rewrite_v(st, "vbk", "r", 1, r3, &o, NULL, drop2, 1, drc), -OL_ENOVERSION);
    CHECK_RC(drc[0], -ECANCELED);
    CHECK_RC(first_byte(st, "r", 1, r2), 62);
    /* Past the limit: refused whole. */
    const char *many[OL_STORE_DROP_MAX + 1];
    for (unsigned i = 0; i <= OL_STORE_DROP_MAX; i++)
        many[i] = r2;
    CHECK_RC(ol_store_rewrite_v(st, "vbk", "r", 1, nv, &o, NULL, many, OL_STORE_DROP_MAX + 1,
                                NULL), -EINVAL);
    CHECK_RC(ol_store_delete_v(st, "vbk", "r", 1, nv, NULL), 0);
    CHECK_RC(ol_store_delete_v(st, "vbk", "r", 1, r2, NULL), 0);
    CHECK_RC(first_byte(st, "r", 1, NULL), -OL_ENOKEY);
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_SUSPENDED), 0);
}

/* Version vid of key "p" with meta blob meta (6 bytes) and byte b. */
static int put_meta(struct ol_store *st, const char *meta, uint8_t b, char vid[OL_STORE_VID_MAX])
{
    struct ol_store_writer *w;
    int rc = ol_store_write_begin(st, 70000, &w);
    if (rc)
        return rc;
    uint8_t *buf = malloc(70000);
    memset(buf, b, 70000);
    rc = ol_store_write(w, buf, 70000);
    free(buf);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    struct ol_obj_info info = {.mtime_ns = 1000, .meta = (const uint8_t *)meta, .meta_len = 6};
    snprintf(info.etag, sizeof(info.etag), "e%u", b);
    return ol_store_write_commit_object_v(w, "vbk", "p", 1, &info, NULL, vid);
}

/* 0 when version vid of "p" has meta blob want (6 bytes). */
static int meta_is(struct ol_store *st, const char *vid, const char *want)
{
    struct ol_store_reader *rd;
    int rc = ol_store_read_open_v(st, "vbk", "p", 1, vid, &rd);
    if (rc)
        return rc;
    const struct ol_obj_info *in = ol_store_read_info(rd);
    rc = in->meta_len == 6 && memcmp(in->meta, want, 6) == 0 ? 0 : -1;
    ol_store_read_close(rd);
    return rc;
}

/* ol_store_patch_meta_v: bytes of a version's meta blob changed in place
 * (current or older version), conditional on their old value; the version
 * keeps its id and data, space is unchanged; drops run only after a patch
 * that worked.  And the copy's precondition (ol_store_copy_opts.expect),
 * which a patch made since the caller's read fails. */
static void test_patch(struct ol_store *st)
{
    char p1[OL_STORE_VID_MAX], p2[OL_STORE_VID_MAX], nv[OL_STORE_VID_MAX];
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_ENABLED), 0);
    CHECK_RC(put_meta(st, "m-0000", 71, p1), 0);
    CHECK_RC(put_meta(st, "m-0000", 72, p2), 0);
    struct ol_store_stats s0, s1;
    ol_store_stats(st, &s0);
    /* An older version (versions DB). */
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p1, 2, "00", "11", 2, NULL, 0, NULL), 0);
    CHECK_RC(meta_is(st, p1, "m-1100"), 0);
    CHECK_RC(first_byte(st, "p", 1, p1), 71);
    /* The current version, freeing the older one in the same chain. */
    const char *drop[] = {p1};
    int drc[1] = {1};
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p2, 4, "00", "2", 1, drop, 1, drc), 0);
    CHECK_RC(drc[0], 0);
    CHECK_RC(meta_is(st, p2, "m-0020"), 0);
    CHECK_RC(meta_is(st, NULL, "m-0020"), 0);
    CHECK_RC(first_byte(st, "p", 1, p2), 72);
    CHECK_RC(first_byte(st, "p", 1, p1), -OL_ENOVERSION);
    ol_store_stats(st, &s1);
    CHECK(s1.live_bytes + 70000 == s0.live_bytes);
    /* Not the expected bytes (a second patch of the same bytes), or past the
     * blob's end: -EAGAIN, nothing written, the drop not run. */
    char p3[OL_STORE_VID_MAX];
    CHECK_RC(put_meta(st, "m-0000", 73, p3), 0);
    const char *drop2[] = {p2};
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p3, 2, "11", "22", 2, drop2, 1, drc),
             -EAGAIN);
    CHECK_RC(drc[0], -ECANCELED);
    CHECK_RC(first_byte(st, "p", 1, p2), 72);
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p3, 5, "00", "11", 2, NULL, 0, NULL),
             -EAGAIN);
    CHECK_RC(meta_is(st, p3, "m-0000"), 0);
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p3, 0, "m", "n", 0, NULL, 0, NULL), -EINVAL);
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, "junk", 0, "m", "n", 1, NULL, 0, NULL),
             -OL_ENOVERSION);
    CHECK_RC(ol_store_patch_meta_v(st, "nob", "p", 1, p3, 0, "m", "n", 1, NULL, 0, NULL),
             -OL_ENOBUCKET);
    /* A rewrite that read "00" at 2 fails once a patch changed it. */
    CHECK_RC(ol_store_patch_meta_v(st, "vbk", "p", 1, p3, 2, "00", "33", 2, NULL, 0, NULL), 0);
    static const uint8_t meta[] = "new-meta";
    struct ol_store_copy_opts o = {.replace_meta = true, .meta = meta, .meta_len = sizeof(meta),
                                   .expect_off = 2, .expect_len = 2, .expect = (const uint8_t *)"00"};
    CHECK_RC(ol_store_rewrite_v(st, "vbk", "p", 1, p3, &o, nv, NULL, 0, NULL), -EAGAIN);
    CHECK_RC(meta_is(st, p3, "m-3300"), 0);
    o.expect = (const uint8_t *)"33";
    CHECK_RC(ol_store_rewrite_v(st, "vbk", "p", 1, p3, &o, nv, NULL, 0, NULL), 0);
    CHECK_RC(first_byte(st, "p", 1, nv), 73);
    CHECK_RC(ol_store_delete_v(st, "vbk", "p", 1, nv, NULL), 0);
    CHECK_RC(ol_store_delete_v(st, "vbk", "p", 1, p3, NULL), 0);
    CHECK_RC(ol_store_delete_v(st, "vbk", "p", 1, p2, NULL), 0);
    CHECK_RC(first_byte(st, "p", 1, NULL), -OL_ENOKEY);
    CHECK_RC(ol_store_versioning_put(st, "vbk", OL_VERSIONING_SUSPENDED), 0);
}

static void test_cleanup(struct ol_store *st, const char *long_key)
{
    char rows[16][64];
    CHECK_RC(list(st, rows, 16), 5);
    for (int guard = 0; guard < 16; guard++) {
        struct ol_store_viter *it;
        if (ol_store_viter_open(st, "vbk", &it))
            break;
        const char *k;
        size_t kl;
        struct ol_version_info vi;
        int rc = ol_store_viter_next(it, &k, &kl, &vi);
        char key[1100];
        /* k points into the iterator, and only when rc == 0. */
        if (rc == 0)
            memcpy(key, k, kl);
        ol_store_viter_close(it);
        if (rc)
            break;
        CHECK_RC(ol_store_delete_v(st, "vbk", key, kl, vi.vid, NULL), 0);
    }
    (void)long_key;
    CHECK_RC(list(st, rows, 16), 0);
    struct ol_store_stats s;
    ol_store_stats(st, &s);
    CHECK(s.live_bytes == 0 && s.objects == 0);
    CHECK_RC(ol_store_bucket_delete(st, "vbk"), 0);
}

int main(void)
{
    ol_log_level = OL_LOG_WARN;
    char root[64];
    if (check_mkdtemp(root, sizeof(root), "versions") != 0)
        return 77;
    struct ol_store_opts o;
    ol_store_opts_default(&o);
    o.segment_bytes = 4u << 20;
    o.inline_bytes = 4096;
    o.max_loops = 1;
    char *long_key = malloc(1024);
    memset(long_key, 'x', 1024);
    struct ol_store *st = check_store_open(root, &o);
    if (!st)
        return 1;
    test_versions(st, long_key);
    test_key_versions(st, long_key);
    test_attr_v(st);
    test_rewrite(st);
    test_patch(st);
    ol_store_close(st);
    st = NULL;
    CHECK_RC(ol_store_open(&st, root, &o), 0);
    if (st) {
        CHECK_RC(ol_store_compact_now(st), 0);
        test_cleanup(st, long_key);
        ol_store_close(st);
    }
    free(long_key);
    check_rm_rf(root);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    return 0;
}
