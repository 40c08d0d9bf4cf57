/* Unit test of the storage engine's newer API (src/store): conditional
 * commits, copies by reference, bucket settings and object attributes.
 * Plain threads; a temporary drive under /tmp, removed at the end.  Exits 0 on
 * success, 1 on failure. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/crc.h"
#include "store/format.h"
#include "store/store.h"

#include "check.h"
#include "store_check.h"

static char root[256];

static int put_if(struct ol_store *st, const char *bucket, const char *key, size_t size,
                  uint64_t seed, const char *etag, const struct ol_store_cond *cond)
{
    struct ol_store_writer *w;
    int rc = check_write_pattern(st, size, seed, 200003, check_fill, &w);
    if (rc)
        return rc;
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "%s", etag);
    info.mtime_ns = 1000;
    info.meta = (const uint8_t *)"m";
    info.meta_len = 1;
    return ol_store_write_commit_object_if(w, bucket, key, strlen(key), &info, cond);
}

static int put(struct ol_store *st, const char *bucket, const char *key, size_t size,
               uint64_t seed)
{
    char etag[64];
    snprintf(etag, sizeof(etag), "e%llu", (unsigned long long)seed);
    return put_if(st, bucket, key, size, seed, etag, NULL);
}

/* Compares an object's bytes with pattern `seed` starting at pattern offset
 * off0 (a copied range reads as the source's bytes from off0 on). */
static int verify_at(struct ol_store *st, const char *bucket, const char *key, size_t size,
                     uint64_t seed, uint64_t off0)
{
    struct ol_store_reader *r;
    int rc = ol_store_read_open(st, bucket, key, strlen(key), &r);
    if (rc)
        return rc;
    if (ol_store_read_info(r)->size != size)
        rc = -1000;
    uint64_t off = 0;
    for (int guard = 0; rc == 0 && off < size && guard < 1000000; guard++) {
        const uint8_t *d;
        ssize_t n = ol_store_read(r, off, 77777, &d);
        if (n <= 0) {
            rc = n ? (int)n : -1001;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (d[i] != check_pattern(seed, off0 + off + (uint64_t)i)) {
                rc = -1002;
                break;
            }
        }
        off += (uint64_t)n;
    }
    ol_store_read_close(r);
    return rc;
}

static int verify(struct ol_store *st, const char *bucket, const char *key, size_t size,
                  uint64_t seed)
{
    return verify_at(st, bucket, key, size, seed, 0);
}

static int count_seg_files(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/seg", dir);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".seg") != NULL;
    closedir(d);
    return n;
}

static void default_opts(struct ol_store_opts *o)
{
    ol_store_opts_default(o);
    o->segment_bytes = 4u << 20;
    o->block_bytes = 16u << 10;
    o->inline_bytes = 8u << 10;
    o->map_bytes = 1ull << 30;
    o->max_loops = 4;
    o->commit_batch = 64;
}

/* ---- conditional commits ---- */

struct racer {
    struct ol_store *st;
    int id;
    int rc;
    pthread_barrier_t *bar;
};

static void *race_thread(void *arg)
{
    struct racer *r = arg;
    struct ol_store_cond c = {.if_none_match = true};
    char etag[16];
    snprintf(etag, sizeof(etag), "r%d", r->id);
    pthread_barrier_wait(r->bar);
    /* Half inline, half in segments: both paths check in the transaction. */
    r->rc = put_if(r->st, "cnd", "race", r->id % 2 ? 100 : 50000, 900 + (uint64_t)r->id, etag,
                   &c);
    return NULL;
}

static void test_cond(struct ol_store *st)
{
    CHECK_RC(ol_store_bucket_create(st, "cnd", 1), 0);
    for (int round = 0; round < 5; round++) {
        CHECK_RC(ol_store_delete(st, "cnd", "race", 4), 0);
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, 8);
        pthread_t th[8];
        struct racer rs[8];
        for (int i = 0; i < 8; i++) {
            rs[i] = (struct racer){.st = st, .id = i, .bar = &bar};
            pthread_create(&th[i], NULL, race_thread, &rs[i]);
        }
        int wins = 0, winner = -1;
        for (int i = 0; i < 8; i++) {
            pthread_join(th[i], NULL);
            if (rs[i].rc == 0) {
                wins++;
                winner = i;
            } else {
                CHECK_RC(rs[i].rc, -OL_EPRECONDITION);
            }
        }
        pthread_barrier_destroy(&bar);
        CHECK(wins == 1);
        if (winner >= 0)
            CHECK_RC(verify(st, "cnd", "race", winner % 2 ? 100 : 50000, 900 + (uint64_t)winner),
                     0);
    }
    /* If-Match: right etag passes, wrong fails, missing key is NoSuchKey. */
    struct ol_store_cond m = {.if_match = "nope"};
    CHECK_RC(put_if(st, "cnd", "m", 10, 1, "a1", NULL), 0);
    CHECK_RC(put_if(st, "cnd", "m", 20, 2, "a2", &m), -OL_EPRECONDITION);
    CHECK_RC(verify(st, "cnd", "m", 10, 1), 0);
    m.if_match = "a1";
    CHECK_RC(put_if(st, "cnd", "m", 300000, 3, "a3", &m), 0);
    CHECK_RC(verify(st, "cnd", "m", 300000, 3), 0);
    CHECK_RC(put_if(st, "cnd", "m", 20, 4, "a4", &m), -OL_EPRECONDITION);
    CHECK_RC(put_if(st, "cnd", "missing", 20, 4, "a4", &m), -OL_ENOKEY);
    m.if_match = "*";
    CHECK_RC(put_if(st, "cnd", "m", 20, 5, "a5", &m), 0);
    CHECK_RC(put_if(st, "cnd", "missing", 20, 4, "a4", &m), -OL_ENOKEY);
    /* CompleteMultipartUpload with a precondition. */
    char id[40];
    CHECK_RC(ol_store_upload_create(st, "cnd", "m", 1, NULL, 0, 1, id), 0);
    struct ol_store_writer *w;
    CHECK_RC(ol_store_write_begin(st, -1, &w), 0);
    uint8_t buf[5000];
    check_fill(buf, sizeof(buf), 6, 0);
    CHECK_RC(ol_store_write(w, buf, sizeof(buf)), 0);
    CHECK_RC(ol_store_write_commit_part(w, id, 1, "p1"), 0);
    struct ol_complete_part cp = {.part_no = 1};
    snprintf(cp.etag, sizeof(cp.etag), "p1");
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "mp-1");
    struct ol_store_cond none = {.if_none_match = true};
    CHECK_RC(ol_store_upload_complete_if(st, id, &cp, 1, 0, &info, &none, NULL),
             -OL_EPRECONDITION);
    m.if_match = "a5";
    CHECK_RC(ol_store_upload_complete_if(st, id, &cp, 1, 0, &info, &m, NULL), 0);
    CHECK_RC(verify(st, "cnd", "m", 5000, 6), 0);
    /* The failed commits left no space behind. */
    CHECK_RC(ol_store_delete(st, "cnd", "m", 1), 0);
    CHECK_RC(ol_store_delete(st, "cnd", "race", 4), 0);
    CHECK_RC(ol_store_bucket_delete(st, "cnd"), 0);
}

/* ---- bucket settings and object attributes ---- */

static void test_settings(struct ol_store *st)
{
    char buf[64];
    CHECK_RC(ol_store_bucket_config_put(st, "nob", "cors", "x", 1), -OL_ENOBUCKET);
    CHECK_RC(ol_store_bucket_config_get(st, "nob", "cors", buf, sizeof(buf)), -OL_ENOBUCKET);
    CHECK_RC(ol_store_bucket_create(st, "cfg", 1), 0);
    CHECK_RC(ol_store_bucket_create(st, "cfg2", 1), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "cors", buf, sizeof(buf)), -OL_ENOCONFIG);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg", "cors", "<CORS/>", 7), 0);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg", "versioning", "Enabled", 7), 0);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg2", "cors", "other", 5), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "cors", buf, sizeof(buf)), 7);
    CHECK(memcmp(buf, "<CORS/>", 7) == 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "cors", buf, 3), -ENOBUFS);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg", "cors", "<C/>", 4), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "cors", buf, sizeof(buf)), 4);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg", "cors", NULL, 0), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "cors", buf, sizeof(buf)), -OL_ENOCONFIG);
    CHECK_RC(ol_store_bucket_config_put(st, "cfg", "empty", "", 0), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "empty", buf, sizeof(buf)), 0);
    /* Settings go with the bucket and do not come back with a new one. */
    CHECK_RC(ol_store_bucket_delete(st, "cfg"), 0);
    CHECK_RC(ol_store_bucket_create(st, "cfg", 2), 0);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "versioning", buf, sizeof(buf)),
             -OL_ENOCONFIG);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg", "empty", buf, sizeof(buf)), -OL_ENOCONFIG);
    CHECK_RC(ol_store_bucket_config_get(st, "cfg2", "cors", buf, sizeof(buf)), 5);

    /* Attributes: set, replace, remove; data, ETag and mtime untouched. */
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "tags", "a", 1), -OL_ENOKEY);
    CHECK_RC(put(st, "cfg", "k", 100000, 21), 0);
    CHECK_RC(put(st, "cfg", "small", 100, 22), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "tags", buf, sizeof(buf)),
             -OL_ENOCONFIG);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "tags", "a=1&b=2", 7), 0);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "acl", "private", 7), 0);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "zz", "", 0), 0);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "small", 5, "tags", "s", 1), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "tags", buf, sizeof(buf)), 7);
    CHECK(memcmp(buf, "a=1&b=2", 7) == 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "acl", buf, sizeof(buf)), 7);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "zz", buf, sizeof(buf)), 0);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "tags", "c=3", 3), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "tags", buf, sizeof(buf)), 3);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "acl", buf, sizeof(buf)), 7);
    CHECK_RC(verify(st, "cfg", "k", 100000, 21), 0);
    CHECK_RC(verify(st, "cfg", "small", 100, 22), 0);
    struct ol_store_reader *r = NULL;
    CHECK_RC(ol_store_read_open(st, "cfg", "k", 1, &r), 0);
    if (r) {
        const uint8_t *v;
        size_t vl;
        CHECK_RC(ol_store_read_attr(r, "tags", &v, &vl), 0);
        CHECK(vl == 3 && memcmp(v, "c=3", 3) == 0);
        CHECK_RC(ol_store_read_attr(r, "nope", &v, &vl), -OL_ENOCONFIG);
        CHECK(strcmp(ol_store_read_info(r)->etag, "e21") == 0);
        CHECK(ol_store_read_info(r)->mtime_ns == 1000);
        ol_store_read_close(r);
    }
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "acl", NULL, 0), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "acl", buf, sizeof(buf)),
             -OL_ENOCONFIG);
    /* Overwrite and delete drop them. */
    CHECK_RC(put(st, "cfg", "k", 200, 23), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "tags", buf, sizeof(buf)),
             -OL_ENOCONFIG);
    CHECK_RC(ol_store_object_attr_put(st, "cfg", "k", 1, "tags", "x", 1), 0);
    CHECK_RC(ol_store_delete(st, "cfg", "k", 1), 0);
    CHECK_RC(put(st, "cfg", "k", 200, 23), 0);
    CHECK_RC(ol_store_object_attr_get(st, "cfg", "k", 1, "tags", buf, sizeof(buf)),
             -OL_ENOCONFIG);
    CHECK_RC(ol_store_delete(st, "cfg", "k", 1), 0);
    CHECK_RC(ol_store_delete(st, "cfg", "small", 5), 0);
    CHECK_RC(ol_store_bucket_delete(st, "cfg"), 0);
    CHECK_RC(ol_store_bucket_delete(st, "cfg2"), 0);
}

/* ---- attributes written with the commit ---- */

static uint64_t live(struct ol_store *st);

static int put_attrs(struct ol_store *st, const char *bucket, const char *key, size_t size,
                     uint64_t seed, const struct ol_obj_attr *a, uint32_t n,
                     char vid[OL_STORE_VID_MAX])
{
    struct ol_store_writer *w;
    int rc = ol_store_write_begin(st, (int64_t)size, &w);
    if (rc)
        return rc;
    uint8_t *buf = malloc(size ? size : 1);
    check_fill(buf, size, seed, 0);
    rc = ol_store_write(w, buf, size);
    free(buf);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "e%llu", (unsigned long long)seed);
    info.mtime_ns = 1000;
    info.attrs = a;
    info.nattrs = n;
    return ol_store_write_commit_object_v(w, bucket, key, strlen(key), &info, NULL, vid);
}

/* 0 when version vid (NULL: current) of bucket/key has attribute name equal
 * to want (NULL: not set) and, when vid is given, still has that version id. */
static int attr_is(struct ol_store *st, const char *bucket, const char *key, const char *vid,
                   const char *name, const char *want)
{
    struct ol_store_reader *r = NULL;
    int rc = ol_store_read_open_v(st, bucket, key, strlen(key), vid, &r);
    if (rc)
        return rc;
    const uint8_t *v = NULL;
    size_t vl = 0;
    rc = ol_store_read_attr(r, name, &v, &vl);
    if (want)
        rc = rc == 0 && vl == strlen(want) && memcmp(v, want, vl) == 0 ? 0 : -1;
    else
        rc = rc == -OL_ENOCONFIG ? 0 : -1;
    char got[OL_STORE_VID_MAX];
    if (rc == 0 && vid && (ol_store_read_vid(r, got) != 0 || strcmp(got, vid) != 0))
        rc = -2; /* the version tag went missing beside the attributes */
    ol_store_read_close(r);
    return rc;
}

static int complete_attrs(struct ol_store *st, const char *bucket, const char *key,
                          uint64_t seed, const struct ol_obj_attr *a, uint32_t n,
                          char vid[OL_STORE_VID_MAX])
{
    char id[40];
    int rc = ol_store_upload_create(st, bucket, key, strlen(key), NULL, 0, 1, id);
    if (rc)
        return rc;
    struct ol_store_writer *w;
    rc = ol_store_write_begin(st, -1, &w);
    if (rc)
        return rc;
    uint8_t buf[20000];
    check_fill(buf, sizeof(buf), seed, 0);
    rc = ol_store_write(w, buf, sizeof(buf));
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    rc = ol_store_write_commit_part(w, id, 1, "p1");
    if (rc)
        return rc;
    struct ol_complete_part cp = {.part_no = 1};
    snprintf(cp.etag, sizeof(cp.etag), "p1");
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "mp-%llu", (unsigned long long)seed);
    info.attrs = a;
    info.nattrs = n;
    rc = ol_store_upload_complete_if(st, id, &cp, 1, 0, &info, NULL, vid);
    if (rc)
        (void)ol_store_upload_abort(st, id);
    return rc;
}

/* Removes every version of every key of a versioned bucket, then the bucket. */
static void drop_versioned(struct ol_store *st, const char *bucket)
{
    for (int round = 0; round < 100; round++) {
        struct ol_store_viter *it = NULL;
        CHECK_RC(ol_store_viter_open(st, bucket, &it), 0);
        if (!it)
            return;
        const char *k;
        size_t kl;
        struct ol_version_info vi;
        char key[64], vid[OL_STORE_VID_MAX];
        int rc = ol_store_viter_next(it, &k, &kl, &vi);
        if (rc == 0) {
            snprintf(key, sizeof(key), "%.*s", (int)kl, k);
            memcpy(vid, vi.vid, sizeof(vid));
        }
        ol_store_viter_close(it);
        if (rc != 0)
            break;
        CHECK_RC(ol_store_delete_v(st, bucket, key, strlen(key), vid, NULL), 0);
    }
    CHECK_RC(ol_store_bucket_delete(st, bucket), 0);
}

static void test_commit_attrs(struct ol_store *st)
{
    char buf[64];
    CHECK_RC(ol_store_bucket_create(st, "att", 1), 0);
    uint64_t l0 = live(st);
    /* Inline and segment-backed objects get their attributes with the commit. */
    struct ol_obj_attr two[] = {{"tags", "k=v", 3}, {"acl", "private", 7}};
    CHECK_RC(put_attrs(st, "att", "small", 100, 41, two, 2, NULL), 0);
    CHECK_RC(put_attrs(st, "att", "big", 100000, 42, two, 2, NULL), 0);
    CHECK_RC(verify(st, "att", "small", 100, 41), 0);
    CHECK_RC(verify(st, "att", "big", 100000, 42), 0);
    CHECK_RC(ol_store_object_attr_get(st, "att", "big", 3, "tags", buf, sizeof(buf)), 3);
    CHECK(memcmp(buf, "k=v", 3) == 0);
    CHECK_RC(attr_is(st, "att", "small", NULL, "acl", "private"), 0);
    CHECK_RC(attr_is(st, "att", "small", NULL, "ol.vid", NULL), 0);
    /* An empty value is a value. */
    struct ol_obj_attr empty = {"tags", "", 0};
    CHECK_RC(put_attrs(st, "att", "e", 10, 43, &empty, 1, NULL), 0);
    CHECK_RC(attr_is(st, "att", "e", NULL, "tags", ""), 0);
    /* An overwrite without attributes has none. */
    CHECK_RC(put_attrs(st, "att", "e", 10, 44, NULL, 0, NULL), 0);
    CHECK_RC(attr_is(st, "att", "e", NULL, "tags", NULL), 0);
    /* Bad lists fail before anything is written. */
    uint64_t l1 = live(st);
    struct ol_obj_attr reserved = {"ol.vid", "x", 1};
    CHECK_RC(put_attrs(st, "att", "bad", 100000, 45, &reserved, 1, NULL), -EINVAL);
    struct ol_obj_attr removal = {"tags", NULL, 0};
    CHECK_RC(put_attrs(st, "att", "bad", 100000, 45, &removal, 1, NULL), -EINVAL);
    struct ol_obj_attr noname = {"", "x", 1};
    CHECK_RC(put_attrs(st, "att", "bad", 10, 45, &noname, 1, NULL), -EINVAL);
    struct ol_obj_attr many[OL_OBJ_ATTRS_MAX + 1];
    for (unsigned i = 0; i <= OL_OBJ_ATTRS_MAX; i++)
        many[i] = (struct ol_obj_attr){"tags", "x", 1};
    CHECK_RC(put_attrs(st, "att", "bad", 10, 45, many, OL_OBJ_ATTRS_MAX + 1, NULL), -EINVAL);
    char *huge = calloc(1, OL_OBJ_ATTR_VAL_MAX + 1);
    struct ol_obj_attr big = {"tags", huge, OL_OBJ_ATTR_VAL_MAX + 1};
    CHECK_RC(put_attrs(st, "att", "bad", 10, 45, &big, 1, NULL), -OL_ETOOLARGE);
    CHECK_RC(ol_store_object_attr_put(st, "att", "e", 1, "ol.vid", "x", 1), -EINVAL);
    struct ol_store_reader *r = NULL;
    CHECK_RC(ol_store_read_open(st, "att", "bad", 3, &r), -OL_ENOKEY);
    CHECK(live(st) == l1);
    /* CompleteMultipartUpload. */
    struct ol_obj_attr t1 = {"tags", "mp=one", 6};
    CHECK_RC(complete_attrs(st, "att", "mp", 46, &t1, 1, NULL), 0);
    CHECK_RC(attr_is(st, "att", "mp", NULL, "tags", "mp=one"), 0);
    CHECK_RC(verify(st, "att", "mp", 20000, 46), 0);
    CHECK_RC(complete_attrs(st, "att", "mp", 47, &reserved, 1, NULL), -EINVAL);
    CHECK_RC(attr_is(st, "att", "mp", NULL, "tags", "mp=one"), 0);
    /* Copies: keep, replace or remove the source's attributes. */
    struct ol_store_copy_opts o = {.mtime_ns = 5};
    struct ol_obj_info out;
    CHECK_RC(ol_store_copy_object(st, "att", "big", 3, "att", "c1", 2, &o, &out), 0);
    CHECK_RC(attr_is(st, "att", "c1", NULL, "tags", "k=v"), 0);
    struct ol_obj_attr t2 = {"tags", "z=26", 4};
    o.attrs = &t2;
    o.nattrs = 1;
    CHECK_RC(ol_store_copy_object(st, "att", "big", 3, "att", "c2", 2, &o, &out), 0);
    CHECK_RC(attr_is(st, "att", "c2", NULL, "tags", "z=26"), 0);
    CHECK_RC(attr_is(st, "att", "c2", NULL, "acl", "private"), 0); /* others kept */
    CHECK_RC(attr_is(st, "att", "big", NULL, "tags", "k=v"), 0); /* source untouched */
    o.attrs = &removal;
    CHECK_RC(ol_store_copy_object(st, "att", "big", 3, "att", "c1", 2, &o, &out), 0);
    CHECK_RC(attr_is(st, "att", "c1", NULL, "tags", NULL), 0);
    /* Onto itself: the metadata-only rewrite takes them too. */
    o.attrs = &t2;
    o.replace_meta = true;
    CHECK_RC(ol_store_copy_object(st, "att", "small", 5, "att", "small", 5, &o, &out), 0);
    CHECK_RC(attr_is(st, "att", "small", NULL, "tags", "z=26"), 0);
    CHECK_RC(verify(st, "att", "small", 100, 41), 0);
    o.replace_meta = false;
    o.attrs = &reserved;
    CHECK_RC(ol_store_copy_object(st, "att", "big", 3, "att", "c3", 2, &o, &out), -EINVAL);
    const char *keys[] = {"small", "big", "e", "mp", "c1", "c2"};
    for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        CHECK_RC(ol_store_delete(st, "att", keys[i], strlen(keys[i])), 0);
    CHECK(live(st) == l0);
    CHECK_RC(ol_store_bucket_delete(st, "att"), 0);

    /* A versioned bucket: each version keeps its own attributes beside its
     * version id. */
    CHECK_RC(ol_store_bucket_create(st, "vat", 1), 0);
    CHECK_RC(ol_store_versioning_put(st, "vat", OL_VERSIONING_ENABLED), 0);
    char v1[OL_STORE_VID_MAX], v2[OL_STORE_VID_MAX], v3[OL_STORE_VID_MAX];
    char v4[OL_STORE_VID_MAX], v5[OL_STORE_VID_MAX], v6[OL_STORE_VID_MAX];
    struct ol_obj_attr a1 = {"tags", "n=1", 3}, a2 = {"tags", "n=2", 3};
    CHECK_RC(put_attrs(st, "vat", "k", 100, 51, &a1, 1, v1), 0);
    CHECK_RC(put_attrs(st, "vat", "k", 100000, 52, &a2, 1, v2), 0);
    CHECK_RC(put_attrs(st, "vat", "k", 100, 53, NULL, 0, v3), 0);
    CHECK(strcmp(v1, v2) != 0 && strcmp(v2, v3) != 0 && strcmp(v1, "null") != 0);
    CHECK_RC(attr_is(st, "vat", "k", v1, "tags", "n=1"), 0);
    CHECK_RC(attr_is(st, "vat", "k", v2, "tags", "n=2"), 0);
    CHECK_RC(attr_is(st, "vat", "k", v3, "tags", NULL), 0);
    CHECK_RC(complete_attrs(st, "vat", "mp", 54, &a1, 1, v4), 0);
    CHECK_RC(attr_is(st, "vat", "mp", v4, "tags", "n=1"), 0);
    /* A copy of an older version: its attributes, a new version id. */
    CHECK_RC(ol_store_copy_object_v(st, "vat", "k", 1, v2, "vat", "c", 1, NULL, &out, v5), 0);
    CHECK_RC(attr_is(st, "vat", "c", v5, "tags", "n=2"), 0);
    o = (struct ol_store_copy_opts){.attrs = &a1, .nattrs = 1};
    CHECK_RC(ol_store_copy_object_v(st, "vat", "k", 1, v2, "vat", "c", 1, &o, &out, v6), 0);
    CHECK_RC(attr_is(st, "vat", "c", v6, "tags", "n=1"), 0);
    CHECK_RC(attr_is(st, "vat", "c", v5, "tags", "n=2"), 0);
    /* Suspended: the "null" version carries its attributes too. */
    CHECK_RC(ol_store_versioning_put(st, "vat", OL_VERSIONING_SUSPENDED), 0);
    CHECK_RC(put_attrs(st, "vat", "k", 100, 55, &a2, 1, v1), 0);
    CHECK(strcmp(v1, "null") == 0);
    CHECK_RC(attr_is(st, "vat", "k", "null", "tags", "n=2"), 0);
    CHECK_RC(attr_is(st, "vat", "k", v2, "tags", "n=2"), 0);
    drop_versioned(st, "vat");
    CHECK(live(st) == l0);
    free(huge);
}

/* ---- copies by reference ---- */

static uint64_t live(struct ol_store *st)
{
    struct ol_store_stats s;
    ol_store_stats(st, &s);
    return s.live_bytes;
}

static void test_copy(struct ol_store *st)
{
    CHECK_RC(ol_store_bucket_create(st, "cpa", 1), 0);
    CHECK_RC(ol_store_bucket_create(st, "cpb", 1), 0);
    uint64_t l0 = live(st);
    CHECK_RC(put(st, "cpa", "src", 1000000, 31), 0);
    CHECK_RC(put(st, "cpa", "tiny", 300, 32), 0);
    CHECK_RC(ol_store_object_attr_put(st, "cpa", "src", 3, "tags", "t", 1), 0);
    struct ol_store_copy_opts o = {.mtime_ns = 777};
    struct ol_obj_info out;
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "cpb", "dst", 3, &o, &out), 0);
    CHECK(out.size == 1000000 && strcmp(out.etag, "e31") == 0 && out.mtime_ns == 777);
    CHECK(live(st) - l0 == 2000000); /* each reference counts its bytes */
    CHECK_RC(verify(st, "cpb", "dst", 1000000, 31), 0);
    char buf[16];
    CHECK_RC(ol_store_object_attr_get(st, "cpb", "dst", 3, "tags", buf, sizeof(buf)), 1);
    CHECK_RC(ol_store_copy_object(st, "cpa", "tiny", 4, "cpa", "tiny2", 5, &o, &out), 0);
    CHECK_RC(verify(st, "cpa", "tiny2", 300, 32), 0);
    /* Conditions. */
    o.src_etag = "e99";
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "cpb", "d2", 2, &o, &out),
             -OL_EPRECONDITION);
    o.src_etag = "e31";
    struct ol_store_cond none = {.if_none_match = true};
    o.dst_cond = &none;
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "cpb", "dst", 3, &o, &out),
             -OL_EPRECONDITION);
    o.dst_cond = NULL;
    CHECK_RC(ol_store_copy_object(st, "cpa", "nope", 4, "cpb", "d2", 2, &o, &out), -OL_ENOKEY);
    CHECK_RC(ol_store_copy_object(st, "nob", "src", 3, "cpb", "d2", 2, &o, &out), -OL_ENOBUCKET);
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "nob", "d2", 2, &o, &out), -OL_ENOBUCKET);
    /* Onto itself with new metadata: same data, no new space. */
    uint64_t l1 = live(st);
    o.replace_meta = true;
    o.meta = (const uint8_t *)"newmeta";
    o.meta_len = 7;
    o.mtime_ns = 888;
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "cpa", "src", 3, &o, &out), 0);
    CHECK(live(st) == l1);
    struct ol_store_reader *r = NULL;
    CHECK_RC(ol_store_read_open(st, "cpa", "src", 3, &r), 0);
    if (r) {
        const struct ol_obj_info *i = ol_store_read_info(r);
        CHECK(i->meta_len == 7 && memcmp(i->meta, "newmeta", 7) == 0 && i->mtime_ns == 888);
        ol_store_read_close(r);
    }
    CHECK_RC(verify(st, "cpa", "src", 1000000, 31), 0);
    /* Overwriting a copy with another copy of the same source. */
    o.replace_meta = false;
    CHECK_RC(ol_store_copy_object(st, "cpa", "src", 3, "cpb", "dst", 3, &o, &out), 0);
    CHECK(live(st) == l1);
    /* Delete the source: the copy still reads; delete it: space is free. */
    CHECK_RC(ol_store_delete(st, "cpa", "src", 3), 0);
    CHECK_RC(verify(st, "cpb", "dst", 1000000, 31), 0);
    CHECK_RC(ol_store_compact_now(st), 0);
    CHECK_RC(verify(st, "cpb", "dst", 1000000, 31), 0);
    CHECK_RC(ol_store_delete(st, "cpb", "dst", 3), 0);
    CHECK_RC(ol_store_delete(st, "cpa", "tiny", 4), 0);
    CHECK_RC(ol_store_delete(st, "cpa", "tiny2", 5), 0);
    CHECK(live(st) == l0);

    /* UploadPartCopy: aligned and unaligned ranges, whole objects, inline
     * sources; then complete and compare every byte. */
    const size_t big = 3 * 65536 + 5000; /* several blocks of 16 KiB, short tail */
    CHECK_RC(put(st, "cpa", "big", big, 41), 0);
    CHECK_RC(put(st, "cpa", "inl", 2000, 42), 0);
    char id[40], et[64];
    CHECK_RC(ol_store_upload_create(st, "cpb", "mp", 2, NULL, 0, 1, id), 0);
    struct {
        const char *key;
        uint64_t off, len, seed;
    } rs[] = {
        {"big", 0, 16384 * 4, 41},         /* aligned whole blocks */
        {"big", 1000, 70000, 41},          /* unaligned both ends */
        {"big", 16384, big - 16384, 41},   /* to the end: short last block shared */
        {"inl", 10, 1990, 42},             /* inline source: copied */
        {"big", 0, big, 41},               /* the whole object */
        {"big", 20000, 100, 41},           /* inside one block */
    };
    size_t nrs = sizeof(rs) / sizeof(rs[0]);
    struct ol_complete_part cps[8];
    uint64_t total = 0;
    for (size_t i = 0; i < nrs; i++) {
        CHECK_RC(ol_store_copy_part(st, "cpa", rs[i].key, strlen(rs[i].key), rs[i].off,
                                    rs[i].len, NULL, id, (uint32_t)i + 1, et),
                 0);
        cps[i].part_no = (uint32_t)i + 1;
        memcpy(cps[i].etag, et, sizeof(et));
        CHECK(strlen(et) == 32);
        total += rs[i].len;
    }
    CHECK_RC(ol_store_copy_part(st, "cpa", "big", 3, big - 10, 11, NULL, id, 9, et), -ERANGE);
    CHECK_RC(ol_store_copy_part(st, "cpa", "big", 3, 0, 0, NULL, id, 9, et), -ERANGE);
    CHECK_RC(ol_store_copy_part(st, "cpa", "big", 3, 0, 10, "bad", id, 9, et),
             -OL_EPRECONDITION);
    CHECK_RC(ol_store_copy_part(st, "cpa", "big", 3, 0, 10, NULL, "0123", 9, et), -OL_ENOUPLOAD);
    CHECK_RC(ol_store_copy_part(st, "cpa", "none", 4, 0, 10, NULL, id, 9, et), -OL_ENOKEY);
    /* Same range twice gives the same MD5. */
    char et2[64];
    CHECK_RC(ol_store_copy_part(st, "cpa", "big", 3, 1000, 70000, NULL, id, 9, et2), 0);
    CHECK(strcmp(et2, cps[1].etag) == 0);
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "mp-6");
    /* Delete the sources first: the parts hold their own references. */
    CHECK_RC(ol_store_delete(st, "cpa", "big", 3), 0);
    CHECK_RC(ol_store_delete(st, "cpa", "inl", 3), 0);
    CHECK_RC(ol_store_compact_now(st), 0);
    CHECK_RC(ol_store_upload_complete(st, id, cps, (uint32_t)nrs, 0, &info), 0);
    CHECK(info.size == total);
    CHECK_RC(ol_store_read_open(st, "cpb", "mp", 2, &r), 0);
    if (r) {
        uint64_t pos = 0;
        int bad = 0;
        for (size_t i = 0; i < nrs; i++) {
            for (uint64_t j = 0; j < rs[i].len && !bad;) {
                const uint8_t *d;
                ssize_t n = ol_store_read(r, pos + j, rs[i].len - j, &d);
                if (n <= 0) {
                    bad = 1;
                    break;
                }
                for (ssize_t q = 0; q < n; q++)
                    if (d[q] != check_pattern(rs[i].seed, rs[i].off + j + (uint64_t)q))
                        bad = 2;
                j += (uint64_t)n;
            }
            pos += rs[i].len;
        }
        CHECK(bad == 0);
        ol_store_read_close(r);
    }
    CHECK_RC(ol_store_delete(st, "cpb", "mp", 2), 0);
    CHECK(live(st) == l0);
    CHECK_RC(ol_store_bucket_delete(st, "cpa"), 0);
    CHECK_RC(ol_store_bucket_delete(st, "cpb"), 0);
}

/* Shared extents survive compaction of their segment, and space comes back
 * only when the last reference goes. */
static void test_copy_compact(void)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/cc", root);
    struct ol_store_opts o;
    default_opts(&o);
    o.segment_bytes = 2u << 20;
    o.compact_pct = 90;
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    if (!st)
        return;
    CHECK_RC(ol_store_bucket_create(st, "ccc", 1), 0);
    char key[32];
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(put(st, "ccc", key, 300000, 500 + (uint64_t)i), 0);
    }
    struct ol_store_copy_opts co = {.mtime_ns = 1};
    struct ol_obj_info out;
    for (int i = 0; i < 12; i += 3) {
        char dk[32];
        snprintf(key, sizeof(key), "o%02d", i);
        snprintf(dk, sizeof(dk), "c%02d", i);
        CHECK_RC(ol_store_copy_object(st, "ccc", key, 3, "ccc", dk, 3, &co, &out), 0);
    }
    char id[40], et[64];
    CHECK_RC(ol_store_upload_create(st, "ccc", "mp", 2, NULL, 0, 1, id), 0);
    CHECK_RC(ol_store_copy_part(st, "ccc", "o03", 3, 0, 300000, NULL, id, 1, et), 0);
    /* Delete the originals except every third: the segments become sparse. */
    for (int i = 0; i < 12; i++) {
        if (i % 3 == 0)
            continue;
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(ol_store_delete(st, "ccc", key, 3), 0);
    }
    struct ol_store_stats a, b;
    ol_store_stats(st, &a);
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &b);
    CHECK(b.live_bytes == a.live_bytes);
    for (int i = 0; i < 12; i += 3) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(verify(st, "ccc", key, 300000, 500 + (uint64_t)i), 0);
        snprintf(key, sizeof(key), "c%02d", i);
        CHECK_RC(verify(st, "ccc", key, 300000, 500 + (uint64_t)i), 0);
    }
    struct ol_complete_part cp = {.part_no = 1};
    memcpy(cp.etag, et, sizeof(et));
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    CHECK_RC(ol_store_upload_complete(st, id, &cp, 1, 0, &info), 0);
    CHECK_RC(verify(st, "ccc", "mp", 300000, 503), 0);
    /* Remove every reference: all space returns. */
    for (int i = 0; i < 12; i += 3) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(ol_store_delete(st, "ccc", key, 3), 0);
        CHECK_RC(ol_store_compact_now(st), 0);
        snprintf(key, sizeof(key), "c%02d", i);
        CHECK_RC(verify(st, "ccc", key, 300000, 500 + (uint64_t)i), 0);
    }
    CHECK_RC(verify(st, "ccc", "mp", 300000, 503), 0);
    for (int i = 0; i < 12; i += 3) {
        snprintf(key, sizeof(key), "c%02d", i);
        CHECK_RC(ol_store_delete(st, "ccc", key, 3), 0);
    }
    CHECK_RC(ol_store_delete(st, "ccc", "mp", 2), 0);
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &b);
    CHECK(b.live_bytes == 0 && b.objects == 0);
    CHECK(b.segments <= 2);
    CHECK(count_seg_files(dir) == (int)b.segments);
    CHECK_RC(ol_store_bucket_delete(st, "ccc"), 0);
    ol_store_close(st);
}

/* ---- format versions ---- */

static int set_format_version(const char *dir, uint16_t version)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/FORMAT", dir);
    int fd = open(p, O_RDWR);
    if (fd < 0)
        return -1;
    struct ol_format f;
    int rc = pread(fd, &f, sizeof(f), 0) == (ssize_t)sizeof(f) ? 0 : -1;
    f.version = version;
    f.crc = 0;
    f.crc = ol_crc32c(&f, sizeof(f));
    if (rc == 0 && pwrite(fd, &f, sizeof(f), 0) != (ssize_t)sizeof(f))
        rc = -1;
    close(fd);
    return rc;
}

static int get_format_version(const char *dir)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/FORMAT", dir);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    struct ol_format f;
    int v = pread(fd, &f, sizeof(f), 0) == (ssize_t)sizeof(f) ? f.version : -1;
    close(fd);
    return v;
}

/* A version-1 drive opens and is upgraded; a too-new one is refused. */
static void test_format_upgrade(void)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/fmt", root);
    struct ol_store_opts o;
    default_opts(&o);
    struct ol_store *st = NULL;
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    if (!st)
        return;
    CHECK(get_format_version(dir) == OL_FORMAT_VERSION);
    CHECK_RC(ol_store_bucket_create(st, "fmt", 1), 0);
    CHECK_RC(put(st, "fmt", "k", 50000, 61), 0);
    ol_store_close(st);
    st = NULL;
    CHECK_RC(set_format_version(dir, 1), 0);
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    CHECK(get_format_version(dir) == OL_FORMAT_VERSION);
    if (st) {
        CHECK_RC(verify(st, "fmt", "k", 50000, 61), 0);
        CHECK_RC(ol_store_bucket_config_put(st, "fmt", "x", "y", 1), 0);
        ol_store_close(st);
        st = NULL;
    }
    CHECK_RC(set_format_version(dir, OL_FORMAT_VERSION + 1), 0);
    CHECK_RC(ol_store_open(&st, dir, &o), -OL_EFORMAT);
}


int main(void)
{
    ol_log_level = OL_LOG_WARN;
    if (check_mkdtemp(root, sizeof(root), "store_ext") != 0)
        return 77;
    struct ol_store_opts o;
    default_opts(&o);
    struct ol_store *st = check_store_open(root, &o);
    if (!st)
        return 1;
    test_cond(st);
    test_settings(st);
    test_copy(st);
    test_commit_attrs(st);
    struct ol_store_stats s;
    ol_store_stats(st, &s);
    CHECK(s.live_bytes == 0 && s.objects == 0);
    ol_store_close(st);
    test_copy_compact();
    test_format_upgrade();
    check_rm_rf(root);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
