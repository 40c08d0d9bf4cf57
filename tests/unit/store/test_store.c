/* Unit test of the per-drive storage engine (src/store).  Plain threads plus
 * one loop with fibers; a temporary drive under /tmp, removed at the end.
 * Exits 0 on success, 1 on failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "store/store.h"

#include "check.h"
#include "store_check.h"

static char root[256];

/* ---- deterministic data ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off0)
{
    for (size_t i = 0; i < len; i++) {
        uint64_t pos = off0 + i;
        buf[i] = (uint8_t)(mix(seed * 1000003 + pos / 8) >> (8 * (pos % 8)));
    }
}

static int put(struct ol_store *st, const char *bucket, const char *key, size_t klen, size_t size,
               uint64_t seed)
{
    struct ol_store_writer *w;
    int rc = check_write_pattern(st, size, seed, 300007, fill, &w);
    if (rc)
        return rc;
    CHECK(ol_store_write_size(w) == size);
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "etag-%llu", (unsigned long long)seed);
    info.mtime_ns = 12345;
    char meta[32];
    snprintf(meta, sizeof(meta), "meta:%llu", (unsigned long long)seed);
    info.meta = (const uint8_t *)meta;
    info.meta_len = (uint32_t)strlen(meta);
    return ol_store_write_commit_object(w, bucket, key, klen, &info);
}

/* Reads the whole object in steps of `step` and compares with the pattern
 * (seeds[i] for the bytes of part i when parts are given). */
static int verify_r(struct ol_store_reader *r, size_t size, uint64_t seed, size_t step)
{
    const struct ol_obj_info *info = ol_store_read_info(r);
    if (info->size != size)
        return -1000;
    uint8_t *exp = malloc(step ? step : 1);
    uint64_t off = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        const uint8_t *d;
        ssize_t n = ol_store_read(r, off, step, &d);
        if (n <= 0) {
            rc = n ? (int)n : -1001;
            break;
        }
        fill(exp, (size_t)n, seed, off);
        if (memcmp(exp, d, (size_t)n) != 0)
            rc = -1002;
        off += (uint64_t)n;
    }
    const uint8_t *d;
    if (rc == 0 && ol_store_read(r, size, 10, &d) != 0)
        rc = -1003;
    free(exp);
    return rc;
}

static int verify(struct ol_store *st, const char *bucket, const char *key, size_t klen,
                  size_t size, uint64_t seed)
{
    struct ol_store_reader *r;
    int rc = ol_store_read_open(st, bucket, key, klen, &r);
    if (rc)
        return rc;
    char meta[32];
    snprintf(meta, sizeof(meta), "meta:%llu", (unsigned long long)seed);
    const struct ol_obj_info *info = ol_store_read_info(r);
    if (info->meta_len != strlen(meta) || memcmp(info->meta, meta, info->meta_len) != 0)
        rc = -1004;
    if (rc == 0)
        rc = verify_r(r, size, seed, 100003);
    ol_store_read_close(r);
    return rc;
}

static void default_opts(struct ol_store_opts *o)
{
    ol_store_opts_default(o);
    o->segment_bytes = 4u << 20;
    o->map_bytes = 1ull << 30;
    o->max_loops = 4;
    o->commit_batch = 64;
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

/* ---- basic object round trips ---- */

static void test_sizes(struct ol_store *st)
{
    static const size_t sizes[] = {0,           1,           4095,        4096,
                                   65536,       131071,      131072,      131073,
                                   (1u << 20) + 7, 20u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[32];
        snprintf(key, sizeof(key), "size/%zu", sizes[i]);
        CHECK_RC(put(st, "bkt", key, strlen(key), sizes[i], 100 + i), 0);
        CHECK_RC(verify(st, "bkt", key, strlen(key), sizes[i], 100 + i), 0);
    }
    /* Random-offset, small reads in a multi-segment object. */
    struct ol_store_reader *r;
    CHECK_RC(ol_store_read_open(st, "bkt", "size/20971520", 13, &r), 0);
    uint8_t exp[5000];
    for (int i = 0; i < 200; i++) {
        uint64_t off = mix((uint64_t)i) % (20u << 20);
        const uint8_t *d;
        ssize_t n = ol_store_read(r, off, 5000, &d);
        CHECK(n > 0 && n <= 5000);
        if (n > 0) {
            fill(exp, (size_t)n, 109, off);
            CHECK(memcmp(exp, d, (size_t)n) == 0);
        }
    }
    ol_store_read_close(r);

    /* Overwrite, then delete. */
    CHECK_RC(put(st, "bkt", "ow", 2, 300000, 1), 0);
    CHECK_RC(put(st, "bkt", "ow", 2, 5000, 2), 0);
    CHECK_RC(verify(st, "bkt", "ow", 2, 5000, 2), 0);
    CHECK_RC(put(st, "bkt", "ow", 2, 400000, 3), 0);
    CHECK_RC(verify(st, "bkt", "ow", 2, 400000, 3), 0);
    CHECK_RC(ol_store_delete(st, "bkt", "ow", 2), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "ow", 2, &r), -OL_ENOKEY);
    CHECK_RC(ol_store_delete(st, "bkt", "ow", 2), 0);
    CHECK_RC(ol_store_delete(st, "nobucket", "ow", 2), -OL_ENOBUCKET);
    CHECK_RC(ol_store_read_open(st, "nobucket", "ow", 2, &r), -OL_ENOBUCKET);
    CHECK_RC(put(st, "nobucket", "x", 1, 10, 1), -OL_ENOBUCKET);
    CHECK_RC(put(st, "nobucket", "x", 1, 300000, 1), -OL_ENOBUCKET);

    /* An aborted write leaves nothing visible. */
    struct ol_store_writer *w;
    CHECK_RC(ol_store_write_begin(st, -1, &w), 0);
    uint8_t junk[70000];
    memset(junk, 7, sizeof(junk));
    for (int i = 0; i < 30; i++)
        CHECK_RC(ol_store_write(w, junk, sizeof(junk)), 0);
    ol_store_write_abort(w);
    CHECK_RC(ol_store_read_open(st, "bkt", "aborted", 7, &r), -OL_ENOKEY);

    /* Unknown size that turns out small is inlined, large is not. */
    CHECK_RC(ol_store_write_begin(st, -1, &w), 0);
    fill(junk, 1000, 77, 0);
    CHECK_RC(ol_store_write(w, junk, 1000), 0);
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    CHECK_RC(ol_store_write_commit_object(w, "bkt", "nohint", 6, &info), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "nohint", 6, &r), 0);
    CHECK_RC(verify_r(r, 1000, 77, 333), 0);
    ol_store_read_close(r);
    /* A wrong (small) hint still works. */
    CHECK_RC(ol_store_write_begin(st, 10, &w), 0);
    for (int i = 0; i < 10; i++) {
        fill(junk, 70000, 78, (uint64_t)i * 70000);
        CHECK_RC(ol_store_write(w, junk, 70000), 0);
    }
    CHECK_RC(ol_store_write_commit_object(w, "bkt", "badhint", 7, &info), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "badhint", 7, &r), 0);
    CHECK_RC(verify_r(r, 700000, 78, 65536), 0);
    ol_store_read_close(r);
}

/* ---- listing ---- */

struct kv {
    char key[1100];
    size_t len;
};

static int kv_cmp(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Lists bucket from `from` and compares with the sorted expectation. */
static void check_list(struct ol_store *st, const char *bucket, struct kv *exp, size_t n,
                       const char *from, size_t from_len, bool inclusive)
{
    struct ol_store_iter *it;
    CHECK_RC(ol_store_iter_open(st, bucket, from, from_len, inclusive, &it), 0);
    size_t i = 0;
    struct kv f;
    memcpy(f.key, from, from_len);
    f.len = from_len;
    while (i < n && (kv_cmp(&exp[i], &f) < 0 || (!inclusive && kv_cmp(&exp[i], &f) == 0)))
        i++;
    for (int guard = 0; guard < 100000; guard++) {
        const char *k;
        size_t kl;
        struct ol_obj_info info;
        int rc = ol_store_iter_next(it, &k, &kl, &info);
        if (rc == 1) {
            CHECK(i == n);
            break;
        }
        CHECK_RC(rc, 0);
        if (rc)
            break;
        CHECK(i < n);
        if (i >= n)
            break;
        if (kl != exp[i].len || memcmp(k, exp[i].key, kl) != 0) {
            fprintf(stderr, "FAIL list order at %zu (len %zu vs %zu)\n", i, kl, exp[i].len);
            failures++;
            break;
        }
        i++;
    }
    ol_store_iter_close(it);
}

static void test_list(struct ol_store *st)
{
    CHECK_RC(ol_store_bucket_create(st, "lst", 1), 0);
    static const char *keys[] = {"b", "a", "a/b", "a0", "c", "a/", "ab", "\xff", "a/a/a", "B"};
    size_t nk = sizeof(keys) / sizeof(keys[0]);
    struct kv *exp = calloc(400, sizeof(*exp));
    size_t n = 0;
    for (size_t i = 0; i < nk; i++) {
        CHECK_RC(put(st, "lst", keys[i], strlen(keys[i]), i * 10, i), 0);
        memcpy(exp[n].key, keys[i], strlen(keys[i]));
        exp[n++].len = strlen(keys[i]);
    }
    /* Long keys: 1024 bytes with a 600-byte shared prefix, and keys around
     * the group boundary (the index key adds "lst\0", 4 bytes). */
    char prefix[1024];
    memset(prefix, 'p', sizeof(prefix));
    for (int i = 0; i < 40; i++) {
        struct kv *e = &exp[n];
        memcpy(e->key, prefix, 600);
        e->len = 600 + (size_t)(mix((uint64_t)i) % 425);
        for (size_t j = 600; j < e->len; j++)
            e->key[j] = (char)('a' + mix((uint64_t)i * 7 + j) % 3);
        if (i % 5 == 0) {
            e->len = 1024;
            memset(e->key + 600, 'q', 424);
            e->key[1023] = (char)('0' + i / 5);
        }
        bool dup = false;
        for (size_t j = nk; j < n; j++)
            dup |= kv_cmp(&exp[j], e) == 0;
        if (dup)
            continue;
        CHECK_RC(put(st, "lst", e->key, e->len, (size_t)i * 1000, 500 + (uint64_t)i), 0);
        n++;
    }
    for (size_t len = 470; len < 490; len++) {
        struct kv *e = &exp[n++];
        memset(e->key, 'p', len);
        e->len = len;
        CHECK_RC(put(st, "lst", e->key, e->len, 3, 900 + len), 0);
    }
    qsort(exp, n, sizeof(*exp), kv_cmp);
    check_list(st, "lst", exp, n, "", 0, true);
    check_list(st, "lst", exp, n, "a/", 2, true);
    check_list(st, "lst", exp, n, "a/", 2, false);
    check_list(st, "lst", exp, n, "a", 1, false);
    for (size_t i = 0; i < n; i += 7) {
        check_list(st, "lst", exp, n, exp[i].key, exp[i].len, i % 2 == 0);
        check_list(st, "lst", exp, n, exp[i].key, exp[i].len - 1, false);
    }
    /* Every long key reads back its own object. */
    for (size_t i = 0; i < n; i++) {
        if (exp[i].len < 470)
            continue;
        struct ol_store_reader *r;
        CHECK_RC(ol_store_read_open(st, "lst", exp[i].key, exp[i].len, &r), 0);
        ol_store_read_close(r);
    }
    /* Delete every third key, including group members, and relist. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 1)
            CHECK_RC(ol_store_delete(st, "lst", exp[i].key, exp[i].len), 0);
        else
            exp[m++] = exp[i];
    }
    check_list(st, "lst", exp, m, "", 0, true);
    check_list(st, "lst", exp, m, prefix, 600, true);
    /* Seek on the same iterator. */
    struct ol_store_iter *it;
    CHECK_RC(ol_store_iter_open(st, "lst", "", 0, true, &it), 0);
    const char *k;
    size_t kl;
    struct ol_obj_info info;
    CHECK_RC(ol_store_iter_seek(it, exp[m - 1].key, exp[m - 1].len, true), 0);
    CHECK_RC(ol_store_iter_next(it, &k, &kl, &info), 0);
    CHECK(kl == exp[m - 1].len && memcmp(k, exp[m - 1].key, kl) == 0);
    CHECK_RC(ol_store_iter_next(it, &k, &kl, &info), 1);
    ol_store_iter_close(it);
    /* Not empty; then empty it and delete. */
    CHECK_RC(ol_store_bucket_delete(st, "lst"), -OL_EBUCKETNOTEMPTY);
    for (size_t i = 0; i < m; i++)
        CHECK_RC(ol_store_delete(st, "lst", exp[i].key, exp[i].len), 0);
    CHECK_RC(ol_store_iter_open(st, "lst", "", 0, true, &it), 0);
    CHECK_RC(ol_store_iter_next(it, &k, &kl, &info), 1);
    ol_store_iter_close(it);
    CHECK_RC(ol_store_bucket_delete(st, "lst"), 0);
    CHECK_RC(ol_store_bucket_delete(st, "lst"), -OL_ENOBUCKET);
    CHECK_RC(ol_store_iter_open(st, "lst", "", 0, true, &it), -OL_ENOBUCKET);
    free(exp);
}

/* ---- buckets ---- */

static int count_bucket(void *ctx, const struct ol_bucket_info *b)
{
    (*(int *)ctx)++;
    return 0;
}

static void test_buckets(struct ol_store *st)
{
    CHECK_RC(ol_store_bucket_create(st, "bkt", 42), 0);
    CHECK_RC(ol_store_bucket_create(st, "bkt", 43), -OL_EBUCKETEXISTS);
    CHECK_RC(ol_store_bucket_create(st, "zz", 43), -EINVAL);
    struct ol_bucket_info bi;
    CHECK_RC(ol_store_bucket_get(st, "bkt", &bi), 0);
    CHECK(bi.ctime_ns == 42 && strcmp(bi.name, "bkt") == 0);
    CHECK_RC(ol_store_bucket_get(st, "nob", &bi), -OL_ENOBUCKET);
    CHECK_RC(ol_store_bucket_create(st, "aaa", 1), 0);
    int n = 0;
    CHECK_RC(ol_store_bucket_list(st, count_bucket, &n), 0);
    CHECK(n == 2);
    CHECK_RC(ol_store_bucket_delete(st, "aaa"), 0);
}

/* ---- multipart ---- */

static int put_part(struct ol_store *st, const char *id, uint32_t pn, size_t size, uint64_t seed,
                    char etag[64])
{
    struct ol_store_writer *w;
    int rc = ol_store_write_begin(st, (int64_t)size, &w);
    if (rc)
        return rc;
    uint8_t *b = malloc(size ? size : 1);
    fill(b, size, seed, 0);
    rc = ol_store_write(w, b, size);
    free(b);
    snprintf(etag, 64, "p%u-%llu", pn, (unsigned long long)seed);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    return ol_store_write_commit_part(w, id, pn, etag);
}

struct part_seen {
    uint32_t nos[16];
    uint64_t sizes[16];
    int n;
};

static int on_part(void *ctx, const struct ol_part_info *p)
{
    struct part_seen *s = ctx;
    if (s->n < 16) {
        s->nos[s->n] = p->part_no;
        s->sizes[s->n++] = p->size;
    }
    return 0;
}

static int on_upload(void *ctx, const struct ol_upload_info *u)
{
    (*(int *)ctx)++;
    return 0;
}

struct upload_expect {
    const char *key;
    int ok;
};

static int on_upload_key(void *ctx, const struct ol_upload_info *u)
{
    struct upload_expect *e = ctx;
    e->ok = u->key_len == strlen(e->key) && memcmp(e->key, u->key, u->key_len) == 0 &&
            strcmp(u->bucket, "bkt") == 0 && u->meta_len == 1 && u->meta[0] == 'm' &&
            u->ctime_ns == 7;
    return 0;
}

static void test_multipart(struct ol_store *st)
{
    char id[40], id2[40];
    CHECK_RC(ol_store_upload_create(st, "nob", "mp", 2, NULL, 0, 1, id), -OL_ENOBUCKET);
    CHECK_RC(ol_store_upload_create(st, "bkt", "mp", 2, (const uint8_t *)"m", 1, 7, id), 0);
    CHECK(strlen(id) == 32);
    int nu = 0;
    struct upload_expect ue = {"mp", 0};
    CHECK_RC(ol_store_upload_get(st, id, on_upload_key, &ue), 0);
    CHECK(ue.ok);
    CHECK_RC(ol_store_upload_get(st, "0123456789abcdef0123456789abcdef", on_upload, &nu),
             -OL_ENOUPLOAD);
    char e1[64], e2[64], e3[64], e2b[64];
    size_t s1 = (1u << 20) + 5, s2 = 2u << 20, s3 = 100;
    CHECK_RC(put_part(st, id, 1, s1, 11, e1), 0);
    CHECK_RC(put_part(st, id, 2, 7000, 99, e2b), 0);
    CHECK_RC(put_part(st, id, 2, s2, 12, e2), 0); /* replaces the first part 2 */
    CHECK_RC(put_part(st, id, 3, s3, 13, e3), 0);
    CHECK_RC(put_part(st, "0123456789abcdef0123456789abcdef", 1, 10, 1, e3), -OL_ENOUPLOAD);
    CHECK_RC(put_part(st, id, 0, 10, 1, e3), -EINVAL);
    snprintf(e3, 64, "p3-13");
    struct part_seen ps = {.n = 0};
    CHECK_RC(ol_store_part_list(st, id, 0, on_part, &ps), 0);
    CHECK(ps.n == 3 && ps.nos[0] == 1 && ps.nos[1] == 2 && ps.nos[2] == 3);
    CHECK(ps.sizes[1] == s2);
    ps.n = 0;
    CHECK_RC(ol_store_part_list(st, id, 1, on_part, &ps), 0);
    CHECK(ps.n == 2 && ps.nos[0] == 2);
    nu = 0;
    CHECK_RC(ol_store_upload_list(st, "bkt", on_upload, &nu), 0);
    CHECK(nu == 1);
    CHECK_RC(ol_store_bucket_delete(st, "bkt"), -OL_EBUCKETNOTEMPTY);

    struct ol_complete_part cp[3] = {{1, ""}, {2, ""}, {3, ""}};
    strcpy(cp[0].etag, e1);
    strcpy(cp[1].etag, e2);
    strcpy(cp[2].etag, e3);
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    strcpy(info.etag, "final-3");
    struct ol_complete_part bad[3];
    memcpy(bad, cp, sizeof(bad));
    bad[0] = cp[1];
    bad[1] = cp[0];
    CHECK_RC(ol_store_upload_complete(st, id, bad, 3, 1u << 20, &info), -OL_EPARTORDER);
    memcpy(bad, cp, sizeof(bad));
    strcpy(bad[1].etag, "wrong");
    CHECK_RC(ol_store_upload_complete(st, id, bad, 3, 1u << 20, &info), -OL_EINVALIDPART);
    memcpy(bad, cp, sizeof(bad));
    bad[2].part_no = 4;
    CHECK_RC(ol_store_upload_complete(st, id, bad, 3, 1u << 20, &info), -OL_EINVALIDPART);
    CHECK_RC(ol_store_upload_complete(st, id, cp, 3, 2u << 20, &info), -OL_ETOOSMALL);
    CHECK_RC(ol_store_upload_complete(st, "0123456789abcdef0123456789abcdef", cp, 3, 0, &info),
             -OL_ENOUPLOAD);
    CHECK_RC(ol_store_upload_complete(st, id, cp, 3, 1u << 20, &info), 0);
    CHECK(info.size == s1 + s2 + s3);
    CHECK_RC(ol_store_upload_get(st, id, on_upload, &nu), -OL_ENOUPLOAD);

    /* The object is the concatenation. */
    struct ol_store_reader *r;
    CHECK_RC(ol_store_read_open(st, "bkt", "mp", 2, &r), 0);
    if (failures == 0) {
        const struct ol_obj_info *ri = ol_store_read_info(r);
        CHECK(ri->size == s1 + s2 + s3 && ri->nparts == 3 && strcmp(ri->etag, "final-3") == 0);
        size_t total = s1 + s2 + s3;
        uint8_t *exp = malloc(total);
        fill(exp, s1, 11, 0);
        fill(exp + s1, s2, 12, 0);
        fill(exp + s1 + s2, s3, 13, 0);
        uint64_t off = 0;
        for (int guard = 0; off < total && guard < 10000; guard++) {
            const uint8_t *d;
            ssize_t n = ol_store_read(r, off, 77777, &d);
            CHECK(n > 0);
            if (n <= 0)
                break;
            CHECK(memcmp(exp + off, d, (size_t)n) == 0);
            off += (uint64_t)n;
        }
        CHECK(off == total);
        free(exp);
    }
    ol_store_read_close(r);

    /* Completing with a subset frees the rest; abort frees everything. */
    CHECK_RC(ol_store_upload_create(st, "bkt", "mp2", 3, NULL, 0, 7, id2), 0);
    CHECK_RC(put_part(st, id2, 1, 200000, 21, e1), 0);
    CHECK_RC(put_part(st, id2, 2, 200000, 22, e2), 0);
    CHECK_RC(put_part(st, id2, 3, 200000, 23, e3), 0);
    struct ol_complete_part sub[2] = {{1, ""}, {3, ""}};
    strcpy(sub[0].etag, e1);
    strcpy(sub[1].etag, e3);
    CHECK_RC(ol_store_upload_complete(st, id2, sub, 2, 100000, &info), 0);
    CHECK(info.size == 400000);
    CHECK_RC(ol_store_upload_create(st, "bkt", "mp3", 3, NULL, 0, 7, id2), 0);
    CHECK_RC(put_part(st, id2, 1, 200000, 31, e1), 0);
    CHECK_RC(ol_store_upload_abort(st, id2), 0);
    CHECK_RC(ol_store_upload_abort(st, id2), -OL_ENOUPLOAD);
    CHECK_RC(ol_store_read_open(st, "bkt", "mp3", 3, &r), -OL_ENOKEY);
    nu = 0;
    CHECK_RC(ol_store_upload_list(st, "bkt", on_upload, &nu), 0);
    CHECK(nu == 0);
}

/* ---- corruption ---- */

/* Finds `pat` in the files under dir/sub and flips the byte at pat + delta. */
static int flip_in(const char *sub, const uint8_t *pat, size_t plen, long delta)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, sub);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    struct dirent *de;
    int found = -1;
    while (found < 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char f[800];
        snprintf(f, sizeof(f), "%s/%s", p, de->d_name);
        int fd = open(f, O_RDWR);
        if (fd < 0)
            continue;
        struct stat sb;
        fstat(fd, &sb);
        uint8_t *buf = malloc((size_t)sb.st_size + 1);
        if (pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size) {
            for (off_t i = 0; i + (off_t)plen <= sb.st_size; i++) {
                if (memcmp(buf + i, pat, plen) == 0) {
                    uint8_t b = buf[i + delta] ^ 0x20;
                    if (pwrite(fd, &b, 1, i + delta) == 1)
                        found = 0;
                    fdatasync(fd);
                    break;
                }
            }
        }
        free(buf);
        close(fd);
    }
    closedir(d);
    return found;
}

static void test_corruption(struct ol_store *st)
{
    /* Segment data: flip a byte in the third block of a 300 KiB object. */
    size_t size = 300000;
    CHECK_RC(put(st, "bkt", "corrupt", 7, size, 4242), 0);
    uint8_t pat[32];
    fill(pat, sizeof(pat), 4242, 140000);
    CHECK_RC(flip_in("seg", pat, sizeof(pat), 5), 0);
    struct ol_store_stats s0, s1;
    ol_store_stats(st, &s0);
    struct ol_store_reader *r;
    CHECK_RC(ol_store_read_open(st, "bkt", "corrupt", 7, &r), 0);
    const uint8_t *d;
    CHECK(ol_store_read(r, 0, 1000, &d) == 1000);          /* block 0 is fine */
    CHECK(ol_store_read(r, 139000, 4000, &d) == -OL_ECORRUPT); /* block 2 is not */
    CHECK(ol_store_read(r, 131072, 10, &d) == -OL_ECORRUPT);
    CHECK(ol_store_read(r, 200000, 100, &d) == 100);       /* block 3 is fine */
    ol_store_read_close(r);
    ol_store_stats(st, &s1);
    CHECK(s1.corrupt_blocks >= s0.corrupt_blocks + 2);

    /* Inline data in the index. */
    CHECK_RC(put(st, "bkt", "corrupt-inline", 14, 5000, 4343), 0);
    fill(pat, sizeof(pat), 4343, 2000);
    CHECK_RC(flip_in("index", pat, sizeof(pat), 3), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "corrupt-inline", 14, &r), 0);
    CHECK(ol_store_read(r, 0, 100, &d) == -OL_ECORRUPT);
    ol_store_read_close(r);

    /* Entry metadata: the entry CRC catches it. */
    CHECK_RC(put(st, "bkt", "corrupt-meta", 12, 10, 987654321), 0);
    CHECK_RC(flip_in("index", (const uint8_t *)"meta:987654321", 14, 6), 0);
    CHECK_RC(ol_store_read_open(st, "bkt", "corrupt-meta", 12, &r), -OL_ECORRUPT);
    CHECK_RC(ol_store_delete(st, "bkt", "corrupt-meta", 12), 0);
    CHECK_RC(ol_store_delete(st, "bkt", "corrupt-inline", 14), 0);
    CHECK_RC(ol_store_delete(st, "bkt", "corrupt", 7), 0);
}

/* ---- space reclaim and compaction ---- */

static void test_space(void)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/space", root);
    struct ol_store_opts o;
    default_opts(&o);
    o.segment_bytes = 2u << 20;
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    if (!st)
        return;
    CHECK_RC(ol_store_bucket_create(st, "spc", 1), 0);
    char key[32];
    for (int i = 0; i < 48; i++) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(put(st, "spc", key, strlen(key), 300000, 7000 + (uint64_t)i), 0);
    }
    struct ol_store_stats a, b, c;
    ol_store_stats(st, &a);
    CHECK(a.segments >= 6);
    CHECK(a.live_bytes == 48ull * 300000);
    CHECK(a.objects == 48);
    /* Delete 3 of every 4, then compact: the survivors move, files go. */
    for (int i = 0; i < 48; i++) {
        if (i % 4 == 0)
            continue;
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(ol_store_delete(st, "spc", key, strlen(key)), 0);
    }
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &b);
    CHECK(b.live_bytes == 12ull * 300000);
    CHECK(b.objects == 12);
    CHECK(b.compacted_bytes > 0);
    CHECK(b.segment_bytes < a.segment_bytes / 2);
    CHECK(count_seg_files(dir) == (int)b.segments);
    for (int i = 0; i < 48; i += 4) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(verify(st, "spc", key, strlen(key), 300000, 7000 + (uint64_t)i), 0);
    }
    /* Delete everything: only the active segments stay. */
    for (int i = 0; i < 48; i += 4) {
        snprintf(key, sizeof(key), "o%02d", i);
        CHECK_RC(ol_store_delete(st, "spc", key, strlen(key)), 0);
    }
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &c);
    CHECK(c.live_bytes == 0 && c.objects == 0);
    CHECK(c.segments <= 2); /* the plain-thread and compactor active segments */
    CHECK(count_seg_files(dir) == (int)c.segments);
    CHECK_RC(ol_store_bucket_delete(st, "spc"), 0);
    ol_store_close(st);
    /* At reopen every segment is sealed; empty ones are removed. */
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    if (st) {
        ol_store_stats(st, &c);
        CHECK(c.segments == 0);
        CHECK(count_seg_files(dir) == 0);
        ol_store_close(st);
    }
}

/* A reader keeps its snapshot across an overwrite and a compaction that
 * moves (and unlinks) its data. */
static void test_reader_snapshot(void)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/snap", root);
    struct ol_store_opts o;
    default_opts(&o);
    o.segment_bytes = 2u << 20;
    o.compact_pct = 90;
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, dir, &o), 0);
    if (!st)
        return;
    CHECK_RC(ol_store_bucket_create(st, "snp", 1), 0);
    CHECK_RC(put(st, "snp", "target", 6, 700000, 1), 0);
    CHECK_RC(put(st, "snp", "keep", 4, 400000, 2), 0);
    for (int i = 0; i < 8; i++) {
        char key[16];
        snprintf(key, sizeof(key), "fill%d", i);
        CHECK_RC(put(st, "snp", key, strlen(key), 500000, 10 + (uint64_t)i), 0);
    }
    struct ol_store_reader *r, *r2;
    CHECK_RC(ol_store_read_open(st, "snp", "target", 6, &r), 0);
    CHECK_RC(ol_store_read_open(st, "snp", "keep", 4, &r2), 0);
    const uint8_t *d;
    CHECK(ol_store_read(r, 0, 1000, &d) == 1000);
    CHECK_RC(put(st, "snp", "target", 6, 123456, 3), 0);
    for (int i = 0; i < 8; i++) {
        char key[16];
        snprintf(key, sizeof(key), "fill%d", i);
        CHECK_RC(ol_store_delete(st, "snp", key, strlen(key)), 0);
    }
    struct ol_store_stats s0, s1;
    ol_store_stats(st, &s0);
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &s1);
    CHECK(s1.compacted_bytes >= 400000); /* "keep" moved */
    CHECK_RC(verify_r(r, 700000, 1, 65536), 0);
    CHECK_RC(verify_r(r2, 400000, 2, 100000), 0);
    ol_store_read_close(r);
    ol_store_read_close(r2);
    CHECK_RC(verify(st, "snp", "target", 6, 123456, 3), 0);
    CHECK_RC(verify(st, "snp", "keep", 4, 400000, 2), 0);
    /* The old segments go once their readers are closed. */
    CHECK_RC(ol_store_compact_now(st), 0);
    ol_store_stats(st, &s1);
    CHECK(s1.segment_bytes < s0.segment_bytes);
    CHECK(count_seg_files(dir) == (int)s1.segments);
    ol_store_close(st);
}

/* ---- concurrency ---- */

struct thr {
    struct ol_store *st;
    int id;
    int errors;
};

static void *writer_thread(void *arg)
{
    struct thr *t = arg;
    for (int i = 0; i < 40; i++) {
        char key[32];
        size_t size = (i % 3 == 0) ? 200000 + (size_t)i * 11 : 1000 + (size_t)i;
        snprintf(key, sizeof(key), "t%d/%d", t->id, i);
        if (put(t->st, "bkt", key, strlen(key), size, (uint64_t)(t->id * 1000 + i)))
            t->errors++;
        /* Same key from every thread: sizes encode the writer. */
        size_t ssize = 150000 + (size_t)t->id;
        if (put(t->st, "bkt", "shared", 6, ssize, 77000 + (uint64_t)t->id))
            t->errors++;
        if (verify(t->st, "bkt", key, strlen(key), size, (uint64_t)(t->id * 1000 + i)))
            t->errors++;
    }
    return NULL;
}

static void test_concurrent(struct ol_store *st)
{
    struct ol_store_stats s0, s1;
    ol_store_stats(st, &s0);
    pthread_t th[4];
    struct thr t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (struct thr){.st = st, .id = i};
        pthread_create(&th[i], NULL, writer_thread, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(t[i].errors == 0);
    }
    ol_store_stats(st, &s1);
    uint64_t commits = s1.commits - s0.commits, ops = s1.commit_ops - s0.commit_ops;
    printf("concurrent: %llu ops in %llu commits (%.2f ops/commit)\n",
           (unsigned long long)ops, (unsigned long long)commits,
           commits ? (double)ops / (double)commits : 0.0);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 40; j++) {
            char key[32];
            size_t size = (j % 3 == 0) ? 200000 + (size_t)j * 11 : 1000 + (size_t)j;
            snprintf(key, sizeof(key), "t%d/%d", i, j);
            CHECK_RC(verify(st, "bkt", key, strlen(key), size, (uint64_t)(i * 1000 + j)), 0);
        }
    }
    struct ol_store_reader *r;
    CHECK_RC(ol_store_read_open(st, "bkt", "shared", 6, &r), 0);
    if (r) {
        uint64_t sz = ol_store_read_info(r)->size;
        int who = (int)(sz - 150000);
        CHECK(who >= 0 && who < 4);
        if (who >= 0 && who < 4)
            CHECK_RC(verify_r(r, (size_t)sz, 77000 + (uint64_t)who, 50000), 0);
        ol_store_read_close(r);
    }
}

/* ---- fibers on a loop ---- */

struct fib {
    struct ol_store *st;
    struct ol_loop *loop;
    int id;
    int *left;
    int errors;
};

static void fiber_fn(void *arg)
{
    struct fib *f = arg;
    for (int i = 0; i < 5; i++) {
        char key[32];
        size_t size = i % 2 ? 1500000 : 3000;
        snprintf(key, sizeof(key), "f%d/%d", f->id, i);
        if (put(f->st, "bkt", key, strlen(key), size, 5000 + (uint64_t)(f->id * 10 + i)))
            f->errors++;
        if (verify(f->st, "bkt", key, strlen(key), size, 5000 + (uint64_t)(f->id * 10 + i)))
            f->errors++;
    }
    if (--*f->left == 0)
        ol_loop_stop(f->loop);
}

struct loop_arg {
    struct ol_loop *loop;
    struct fib *fibs;
    int n;
};

static void spawn_all(void *arg)
{
    struct loop_arg *la = arg;
    for (int i = 0; i < la->n; i++)
        if (ol_fiber_spawn(la->loop, fiber_fn, &la->fibs[i]) != 0)
            la->fibs[i].errors++;
}

static void *loop_thread(void *arg)
{
    struct loop_arg *la = arg;
    ol_loop_run(la->loop);
    return NULL;
}

static void test_fibers(struct ol_store *st)
{
    struct ol_loop_opts lo = {.id = 1, .sq_entries = 64, .max_fibers = 16,
                              .stack_bytes = 256 << 10, .inbox_slots = 64};
    struct ol_loop *loop = NULL;
    if (ol_loop_create(&loop, &lo) != 0) {
        printf("fibers: no loop (skipped)\n");
        return;
    }
    int left = 4;
    struct fib fibs[4];
    for (int i = 0; i < 4; i++)
        fibs[i] = (struct fib){.st = st, .loop = loop, .id = i, .left = &left};
    struct loop_arg la = {.loop = loop, .fibs = fibs, .n = 4};
    CHECK_RC(ol_loop_post(loop, spawn_all, &la), 0);
    pthread_t th;
    pthread_create(&th, NULL, loop_thread, &la);
    pthread_join(th, NULL);
    for (int i = 0; i < 4; i++)
        CHECK(fibs[i].errors == 0);
    ol_loop_destroy(loop);
}

int main(void)
{
    ol_log_level = OL_LOG_WARN;
    if (check_mkdtemp(root, sizeof(root), "store") != 0)
        return 77;
    struct ol_store_opts o;
    default_opts(&o);
    struct ol_store *st = check_store_open(root, &o);
    if (!st)
        return 1;
    test_buckets(st);
    test_sizes(st);
    test_list(st);
    test_multipart(st);
    test_concurrent(st);
    test_fibers(st);
    test_corruption(st);

    /* Reopen: everything committed is still there. */
    struct ol_store_stats s0, s1;
    ol_store_stats(st, &s0);
    ol_store_close(st);
    st = NULL;
    CHECK_RC(ol_store_open(&st, root, &o), 0);
    if (st) {
        ol_store_stats(st, &s1);
        CHECK(s1.objects == s0.objects);
        CHECK(s1.live_bytes == s0.live_bytes);
        CHECK_RC(verify(st, "bkt", "size/20971520", 13, 20u << 20, 109), 0);
        CHECK_RC(verify(st, "bkt", "size/131072", 11, 131072, 106), 0);
        CHECK_RC(verify(st, "bkt", "t3/38", 5, 1038, 3038), 0);
        /* New writes go to new segments. */
        CHECK_RC(put(st, "bkt", "after", 5, 500000, 5), 0);
        CHECK_RC(verify(st, "bkt", "after", 5, 500000, 5), 0);
        ol_store_close(st);
    }
    /* A directory with engine files but no FORMAT is refused. */
    char fmt[300];
    snprintf(fmt, sizeof(fmt), "%s/FORMAT", root);
    unlink(fmt);
    CHECK_RC(ol_store_open(&st, root, &o), -OL_EFORMAT);

    test_space();
    test_reader_snapshot();

    check_rm_rf(root);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
