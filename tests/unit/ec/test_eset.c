/* The erasure set against in-memory drives with injected faults: wiped,
 * offline, failing and corrupt drives; healing (on demand and on read);
 * quorum failures that must leave the previous version readable; a newer
 * version on fewer than k drives that must not hide the older one; concurrent
 * PUTs of one key with a reader that must never see a mixed object; listings
 * with wiped, stale and offline drives; a delete; a wider 8+4 set.  Every
 * object's bytes are a function of a seed, so every read is checked byte for
 * byte without keeping copies. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/hlc.h"
#include "core/loop.h"
#include "ec/codec.h"
#include "ec/eset.h"
#include "ec/memdrive.h"
#include "ec/placement.h"
#include "ec/stripe.h"

#define CHECK_RNG_SEED 0x2545f4914f6cdd1dull
#include "check.h"

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__,  \
                    #a, #b, a_, b_);                                                               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The bytes of an object: a xorshift stream from its seed. */
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

static struct ol_hlc hlc;
static uint64_t set_grace_ms; /* incomplete_grace_ms of the next set_open */

struct set {
    unsigned k, m, n;
    struct ol_memdrive *md[OL_EC_MAX_UNITS];
    struct ol_eset *es;
};

static void set_open(struct set *s, unsigned k, unsigned m, uint32_t unit)
{
    struct ol_drive drives[OL_EC_MAX_UNITS];
    memset(s, 0, sizeof(*s));
    s->k = k;
    s->m = m;
    s->n = k + m;
    for (unsigned i = 0; i < s->n; i++) {
        if (ol_memdrive_create(&s->md[i]) < 0)
            abort();
        drives[i] = ol_memdrive_drive(s->md[i]);
    }
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = k;
    cfg.m = m;
    cfg.unit_bytes = unit;
    cfg.drives = drives;
    cfg.hlc = &hlc;
    memcpy(cfg.deployment_id, "eset-test-deploy", 16);
    cfg.incomplete_grace_ms = set_grace_ms;
    cfg.heal_on_read = false;
    if (ol_eset_create(&cfg, &s->es) < 0)
        abort();
}

static void set_close(struct set *s)
{
    ol_eset_destroy(s->es);
    for (unsigned i = 0; i < s->n; i++)
        ol_memdrive_destroy(s->md[i]);
}

struct obj {
    char key[48];
    size_t size;
    uint64_t seed;
};

static int put_obj(struct set *s, const char *bucket, const struct obj *o, struct ol_eset_obj *out)
{
    uint8_t *buf = malloc(o->size ? o->size : 1);
    gen(o->seed, buf, o->size);
    /* Stream it in uneven pieces, as a socket would deliver it. */
    struct ol_eset_put *p;
    int rc = ol_eset_put_begin(s->es, bucket, o->key, strlen(o->key), &p);
    if (rc < 0)
        goto out;
    for (size_t off = 0; off < o->size && rc == 0;) {
        size_t n = 1 + check_rnd() % 200000;
        if (n > o->size - off)
            n = o->size - off;
        rc = ol_eset_put_write(p, buf + off, n);
        off += n;
    }
    if (rc < 0) {
        ol_eset_put_abort(p);
        goto out;
    }
    char etag[32];
    snprintf(etag, sizeof(etag), "e%llu", (unsigned long long)o->seed);
    rc = ol_eset_put_commit(p, etag, 1, out);
out:
    free(buf);
    return rc;
}

/* 0 when the object reads back byte-identical (whole, and one random range). */
static int check_obj(struct set *s, const char *bucket, const struct obj *o)
{
    struct ol_eset_obj st;
    size_t klen = strlen(o->key);
    int rc = ol_eset_stat(s->es, bucket, o->key, klen, NULL, &st);
    if (rc < 0)
        return rc;
    if (st.size != o->size)
        return -ERANGE;
    uint8_t *want = malloc(o->size + 1), *got = malloc(o->size + 1);
    gen(o->seed, want, o->size);
    rc = ol_eset_read(s->es, bucket, o->key, klen, &st.vid, 0, o->size, got, NULL);
    if (rc == 0 && memcmp(want, got, o->size) != 0)
        rc = -EBADMSG;
    if (rc == 0 && o->size > 0) {
        uint64_t off = check_rnd() % o->size, len = 1 + check_rnd() % (o->size - off);
        rc = ol_eset_read(s->es, bucket, o->key, klen, &st.vid, off, len, got, NULL);
        if (rc == 0 && memcmp(want + off, got, len) != 0)
            rc = -EBADMSG;
    }
    if (rc == 0) {
        /* As a GET reads it: a reader of the latest version. */
        struct ol_eset_reader *rd = NULL;
        uint8_t meta[64];
        size_t ml = 0;
        memset(got, 0, o->size);
        rc = ol_eset_reader_open(s->es, bucket, o->key, klen, NULL, &st, meta, sizeof(meta), &ml,
                                 &rd);
        if (rc == 0 && o->size > 0)
            rc = ol_eset_reader_read(rd, 0, o->size, got);
        if (rc == 0 && memcmp(want, got, o->size) != 0)
            rc = -EBADMSG;
        ol_eset_reader_close(rd);
    }
    free(want);
    free(got);
    return rc;
}

static unsigned check_all(struct set *s, const char *bucket, const struct obj *objs, unsigned n)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++) {
        int rc = check_obj(s, bucket, &objs[i]);
        if (rc < 0) {
            if (bad < 5)
                fprintf(stderr, "  %s: %s\n", objs[i].key, ol_strerror(rc));
            bad++;
        }
    }
    return bad;
}

static uint64_t shard_bytes(const struct set *s, size_t size, uint32_t unit)
{
    struct ol_ec_layout l;
    ol_ec_layout_init(&l, size, unit, s->k);
    return l.shard_bytes;
}

struct list_ctx {
    char (*keys)[48];
    unsigned n, cap;
};
static int list_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *obj)
{
    struct list_ctx *c = ctx;
    (void)obj;
    if (c->n < c->cap && klen < 48) {
        memcpy(c->keys[c->n], key, klen);
        c->keys[c->n][klen] = '\0';
    }
    c->n++;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const struct obj *)a)->key, ((const struct obj *)b)->key);
}

/* Lists the bucket in pages of `page` keys and compares with objs (sorted). */
static void check_list(struct set *s, const char *bucket, const struct obj *objs, unsigned n,
                       unsigned page)
{
    struct list_ctx c = {.keys = calloc(n + 8, 48), .cap = n + 8};
    char after[48] = "";
    for (unsigned round = 0; round < n + 2; round++) {
        unsigned before = c.n;
        int rc = ol_eset_list(s->es, bucket, after, strlen(after), page, list_cb, &c);
        CHECK(rc >= 0);
        if (rc <= 0 || c.n == before)
            break;
        strcpy(after, c.keys[c.n - 1]);
    }
    CHECK_EQ(c.n, n);
    for (unsigned i = 0; i < n && i < c.n; i++)
        if (strcmp(c.keys[i], objs[i].key) != 0) {
            fprintf(stderr, "  list[%u] = %s, want %s\n", i, c.keys[i], objs[i].key);
            failures++;
            break;
        }
    free(c.keys);
}

/* ---- a healthy set reads only what it needs ---- */

static void test_io_accounting(void)
{
    struct set s;
    const uint32_t unit = 4096;
    set_open(&s, 4, 2, unit);
    struct obj o = {.key = "acct", .size = 10 * 4 * 4096 + 12345, .seed = 7};
    struct ol_eset_obj info;
    CHECK_EQ(put_obj(&s, "b", &o, &info), 0);
    CHECK_EQ(info.shards, 6);
    for (unsigned d = 0; d < s.n; d++)
        ol_memdrive_stats_reset(s.md[d]);
    CHECK_EQ(check_obj(&s, "b", &o), 0);
    /* Which slots hold parity follows from the rotation: a shard's metadata
     * says which unit it is. */
    unsigned parity_reads = 0, data_reads = 0;
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_shard_meta sm;
        CHECK_EQ(ol_memdrive_ops.versions(s.md[d], "b", "acct", 4, &sm, 1, NULL), 1);
        struct ol_memdrive_stats st;
        ol_memdrive_stats(s.md[d], &st);
        if (sm.shard >= s.k)
            parity_reads += st.reads;
        else
            data_reads += st.reads;
    }
    CHECK_EQ(parity_reads, 0);
    CHECK(data_reads >= 4);

    /* A ranged read inside one unit touches one drive for exactly its bytes. */
    uint8_t buf[300], want[300];
    uint8_t *all = malloc(o.size);
    gen(o.seed, all, o.size);
    for (unsigned d = 0; d < s.n; d++)
        ol_memdrive_stats_reset(s.md[d]);
    uint64_t off = 3 * 4 * 4096 + 4096 + 100; /* stripe 3, unit 1 */
    CHECK_EQ(ol_eset_read(s.es, "b", "acct", 4, NULL, off, sizeof(buf), buf, NULL), 0);
    memcpy(want, all + off, sizeof(want));
    CHECK(memcmp(buf, want, sizeof(buf)) == 0);
    uint64_t bytes = 0, reads = 0;
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_memdrive_stats st;
        ol_memdrive_stats(s.md[d], &st);
        bytes += st.read_bytes;
        reads += st.reads;
    }
    CHECK_EQ(reads, 1);
    CHECK_EQ(bytes, sizeof(buf));

    /* The same range with that drive offline: rebuilt from k others, same
     * span only. */
    struct ol_eset_stats es0, es1;
    ol_eset_stats(s.es, &es0);
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_memdrive_stats st;
        ol_memdrive_stats(s.md[d], &st);
        if (st.reads)
            ol_memdrive_set_offline(s.md[d], true);
        ol_memdrive_stats_reset(s.md[d]);
    }
    memset(buf, 0, sizeof(buf));
    CHECK_EQ(ol_eset_read(s.es, "b", "acct", 4, NULL, off, sizeof(buf), buf, NULL), 0);
    CHECK(memcmp(buf, want, sizeof(buf)) == 0);
    bytes = reads = 0;
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_memdrive_stats st;
        ol_memdrive_stats(s.md[d], &st);
        bytes += st.read_bytes;
        reads += st.reads;
        ol_memdrive_set_offline(s.md[d], false);
    }
    CHECK_EQ(reads, 4);
    CHECK_EQ(bytes, 4 * sizeof(buf));
    ol_eset_stats(s.es, &es1);
    CHECK_EQ(es1.degraded_reads - es0.degraded_reads, 1);

    /* Empty and tiny objects, and ranges past the end. */
    struct obj z = {.key = "zero", .size = 0, .seed = 1},
               one = {.key = "one", .size = 1, .seed = 2};
    CHECK_EQ(put_obj(&s, "b", &z, NULL), 0);
    CHECK_EQ(put_obj(&s, "b", &one, NULL), 0);
    CHECK_EQ(check_obj(&s, "b", &z), 0);
    CHECK_EQ(check_obj(&s, "b", &one), 0);
    CHECK_EQ(ol_eset_read(s.es, "b", "one", 3, NULL, 1, 1, buf, NULL), -EINVAL);
    CHECK_EQ(ol_eset_read(s.es, "b", "nope", 4, NULL, 0, 0, buf, NULL), -OL_ENOKEY);
    free(all);
    set_close(&s);
}

/* ---- 300 objects on 4+2: wipes, heals, corruption ---- */

static void test_wipe_heal_corrupt(void)
{
    struct set s;
    const uint32_t unit = 64 * 1024;
    enum { N = 300 };
    set_open(&s, 4, 2, unit);
    static struct obj objs[N];
    for (unsigned i = 0; i < N; i++) {
        snprintf(objs[i].key, sizeof(objs[i].key), "obj/%05u", (unsigned)(check_rnd() % 100000));
        objs[i].seed = check_rnd();
        if (i % 25 == 0)
            objs[i].size = 1 + check_rnd() % (5u << 20);
        else
            objs[i].size = check_rnd() % (300 * 1024);
    }
    /* The edges of the layout. */
    const size_t edges[] = {
        0, 1, 2, 3, 4, 5, unit - 1, unit, unit + 1, 4 * unit - 1, 4 * unit, 4 * unit + 1, 5u << 20};
    for (unsigned i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        objs[i + 1].size = edges[i];
    /* Unique keys: the generator may repeat. */
    qsort(objs, N, sizeof(objs[0]), cmp_key);
    for (unsigned i = 1; i < N; i++)
        if (strcmp(objs[i].key, objs[i - 1].key) <= 0)
            snprintf(objs[i].key, sizeof(objs[i].key), "%s+%u", objs[i - 1].key, i);
    qsort(objs, N, sizeof(objs[0]), cmp_key);

    unsigned put_fail = 0;
    for (unsigned i = 0; i < N; i++)
        put_fail += put_obj(&s, "bkt", &objs[i], NULL) != 0;
    CHECK_EQ(put_fail, 0);
    CHECK_EQ(check_all(&s, "bkt", objs, N), 0);
    check_list(&s, "bkt", objs, N, 1000);

    /* Wipe two drives: every object still reads; LIST is complete. */
    unsigned a = (unsigned)(check_rnd() % 6), b = (a + 1 + (unsigned)(check_rnd() % 5)) % 6;
    ol_memdrive_wipe(s.md[a]);
    ol_memdrive_wipe(s.md[b]);
    CHECK_EQ(check_all(&s, "bkt", objs, N), 0);
    check_list(&s, "bkt", objs, N, 37);

    /* Heal: two shards per object, then nothing left to do. */
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.objects, N);
    CHECK_EQ(hs.shards_rebuilt, 2 * N);
    CHECK_EQ(hs.marked_complete, 2 * N);
    CHECK_EQ(hs.unrecoverable, 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 0);
    CHECK_EQ(hs.marked_complete, 0);

    /* Wipe the two drives that were not wiped... two of them: the data now
     * lives partly in healed shards.  Reads heal this time. */
    unsigned other[4], no = 0;
    for (unsigned i = 0; i < 6; i++)
        if (i != a && i != b)
            other[no++] = i;
    unsigned c = other[check_rnd() % 2], d = other[2 + check_rnd() % 2];
    CHECK(c != a && c != b && d != a && d != b && c != d);
    ol_memdrive_wipe(s.md[c]);
    ol_memdrive_wipe(s.md[d]);
    ol_eset_set_heal_on_read(s.es, true);
    struct ol_eset_stats st0, st1;
    ol_eset_stats(s.es, &st0);
    CHECK_EQ(check_all(&s, "bkt", objs, N), 0);
    ol_eset_stats(s.es, &st1);
    CHECK_EQ(st1.shards_healed_on_read - st0.shards_healed_on_read, 2 * N);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 0);

    /* Corrupt one byte of the shards on two drives for 50 objects. */
    ol_eset_set_heal_on_read(s.es, false);
    unsigned x = (unsigned)(check_rnd() % 6), y = (x + 1 + (unsigned)(check_rnd() % 5)) % 6;
    unsigned ncorrupt = 0;
    for (unsigned i = 0; i < N && ncorrupt < 50; i += 5) {
        if (objs[i].size == 0)
            continue;
        uint64_t sb = shard_bytes(&s, objs[i].size, unit);
        size_t kl = strlen(objs[i].key);
        CHECK_EQ(ol_memdrive_corrupt(s.md[x], "bkt", objs[i].key, kl, NULL, sb / 2), 0);
        CHECK_EQ(ol_memdrive_corrupt(s.md[y], "bkt", objs[i].key, kl, NULL, sb - 1), 0);
        ncorrupt++;
    }
    CHECK_EQ(ncorrupt, 50);
    ol_eset_stats(s.es, &st0);
    CHECK_EQ(check_all(&s, "bkt", objs, N), 0);
    ol_eset_stats(s.es, &st1);
    CHECK(st1.degraded_reads > st0.degraded_reads);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.corrupt, 100);
    CHECK_EQ(hs.shards_rebuilt, 100);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.corrupt, 0);
    CHECK_EQ(hs.shards_rebuilt, 0);
    printf("  4+2: %u objects; wipe+heal %u shards, corrupt+heal 100 shards\n", N, 2 * N);

    /* Heal on read finds the corrupt data shards it reads, and heals the
     * parity shards of the same object while at it; heal_all gets the rest. */
    ol_eset_set_heal_on_read(s.es, true);
    ol_eset_stats(s.es, &st0);
    ncorrupt = 0;
    for (unsigned i = 1; i < N && ncorrupt < 10; i += 7) {
        if (objs[i].size == 0)
            continue;
        uint64_t sb = shard_bytes(&s, objs[i].size, unit);
        size_t kl = strlen(objs[i].key);
        CHECK_EQ(ol_memdrive_corrupt(s.md[x], "bkt", objs[i].key, kl, NULL, 0), 0);
        CHECK_EQ(ol_memdrive_corrupt(s.md[y], "bkt", objs[i].key, kl, NULL, sb - 1), 0);
        CHECK_EQ(check_obj(&s, "bkt", &objs[i]), 0);
        ncorrupt++;
    }
    ol_eset_stats(s.es, &st1);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK(st1.shards_healed_on_read > st0.shards_healed_on_read);
    CHECK_EQ(st1.shards_healed_on_read - st0.shards_healed_on_read + hs.shards_rebuilt,
             2 * ncorrupt);

    /* Delete 20 objects: gone from reads and listings; heal then removes the
     * markers themselves. */
    static struct obj kept[N];
    unsigned nkept = 0;
    uint64_t keys0, vers0, keys1, vers1;
    ol_memdrive_count(s.md[0], &keys0, &vers0);
    for (unsigned i = 0; i < N; i++) {
        if (i % 15 == 3) {
            CHECK_EQ(ol_eset_delete(s.es, "bkt", objs[i].key, strlen(objs[i].key)), 0);
            CHECK_EQ(check_obj(&s, "bkt", &objs[i]), -OL_ENOKEY);
        } else {
            kept[nkept++] = objs[i];
        }
    }
    CHECK_EQ(nkept, N - 20);
    check_list(&s, "bkt", kept, nkept, 50);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.versions_removed, 20 * 6);
    ol_memdrive_count(s.md[0], &keys1, &vers1);
    CHECK_EQ(keys1, keys0 - 20);
    CHECK_EQ(vers1, nkept);
    CHECK_EQ(ol_eset_delete(s.es, "bkt", "never", 5), 0);
    check_list(&s, "bkt", kept, nkept, 1000);

    /* LIST with drives offline: m offline still lists everything, m+1 is
     * refused rather than incomplete. */
    ol_memdrive_set_offline(s.md[1], true);
    ol_memdrive_set_offline(s.md[4], true);
    check_list(&s, "bkt", kept, nkept, 64);
    ol_memdrive_set_offline(s.md[2], true);
    struct list_ctx lc = {.keys = NULL, .cap = 0};
    CHECK_EQ(ol_eset_list(s.es, "bkt", "", 0, 10, list_cb, &lc), -OL_EQUORUM);
    for (unsigned i = 0; i < 6; i++)
        ol_memdrive_set_offline(s.md[i], false);
    set_close(&s);
}

/* ---- quorum, stale drives, partial versions, injected write faults ---- */

static void test_quorum(void)
{
    struct set s;
    const uint32_t unit = 1024;
    set_open(&s, 4, 2, unit);
    struct obj v1 = {.key = "q", .size = 9000, .seed = 11};
    struct obj v2 = {.key = "q", .size = 5000, .seed = 12};
    struct ol_eset_obj info1, info;
    uint8_t junk_buf[16];
    CHECK_EQ(put_obj(&s, "b", &v1, &info1), 0);

    /* m+1 or m drives offline: below the write quorum of k+1; nothing
     * changes. */
    for (unsigned off = 3; off >= 2; off--) {
        for (unsigned i = 0; i < off; i++)
            ol_memdrive_set_offline(s.md[i * 2], true);
        CHECK_EQ(put_obj(&s, "b", &v2, NULL), -OL_EQUORUM);
        /* Readable with m drives gone; with m+1, unavailable (not absent). */
        CHECK_EQ(check_obj(&s, "b", &v1), off <= 2 ? 0 : -OL_EQUORUM);
        for (unsigned i = 0; i < 6; i++)
            ol_memdrive_set_offline(s.md[i], false);
        CHECK_EQ(check_obj(&s, "b", &v1), 0);
    }
    /* Failing in the middle: the drives accept the writers, then two fail
     * during the stripes, leaving only k. */
    ol_memdrive_fail_nth(s.md[1], 3);
    ol_memdrive_fail_nth(s.md[3], 2);
    CHECK_EQ(put_obj(&s, "b", &v2, NULL), -OL_EQUORUM);
    ol_memdrive_fail_nth(s.md[1], 0);
    ol_memdrive_fail_nth(s.md[3], 0);
    CHECK_EQ(check_obj(&s, "b", &v1), 0);

    /* One drive offline: the PUT succeeds with k+1.  The drive comes back
     * stale: reads and listings take the new version, heal catches it up. */
    ol_memdrive_set_offline(s.md[5], true);
    CHECK_EQ(put_obj(&s, "b", &v2, &info), 0);
    CHECK_EQ(info.shards, 5);
    ol_memdrive_set_offline(s.md[5], false);
    CHECK_EQ(check_obj(&s, "b", &v2), 0);
    struct ol_eset_stats st0, st1;
    ol_eset_stats(s.es, &st0);
    struct obj only[1] = {v2};
    check_list(&s, "b", only, 1, 10);
    ol_eset_stats(s.es, &st1);
    CHECK_EQ(st1.list_slow_keys - st0.list_slow_keys, 1);
    struct ol_eset_obj lo;
    CHECK_EQ(ol_eset_stat(s.es, "b", "q", 1, NULL, &lo), 0);
    CHECK(strcmp(lo.etag, "e12") == 0);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "q", 1, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 1);
    CHECK_EQ(hs.versions_removed, 0); /* the marks freed v1's shards */
    for (unsigned i = 0; i < 6; i++) {
        struct ol_shard_meta sm[4];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[i], "b", "q", 1, sm, 4, NULL), 1);
        CHECK(sm[0].flags & OL_SHARD_COMPLETE);
    }

    /* A PUT whose phase 2 failed on one drive (its 4th call: begin, write,
     * commit, mark): acknowledged and readable, the drive keeps the older
     * version until a read finishes phase 2 there. */
    struct obj v2b = {.key = "q", .size = 3000, .seed = 14};
    ol_memdrive_fail_nth(s.md[2], 4);
    CHECK_EQ(put_obj(&s, "b", &v2b, NULL), 0);
    struct ol_shard_meta vs[4];
    CHECK_EQ(ol_memdrive_ops.versions(s.md[2], "b", "q", 1, vs, 4, NULL), 2);
    CHECK(!(vs[0].flags & OL_SHARD_COMPLETE));
    ol_eset_set_heal_on_read(s.es, true);
    CHECK_EQ(ol_eset_read(s.es, "b", "q", 1, NULL, 0, 10, junk_buf, NULL), 0);
    ol_eset_set_heal_on_read(s.es, false);
    CHECK_EQ(ol_memdrive_ops.versions(s.md[2], "b", "q", 1, vs, 4, NULL), 1);
    CHECK(vs[0].flags & OL_SHARD_COMPLETE);
    v2 = v2b;
    only[0] = v2b;

    /* A newer version on k-1 drives (a PUT that died) never hides the
     * readable one; GET, LIST and HEAD agree; heal removes it. */
    struct ol_version_id fake;
    ol_hlc_version_id(&hlc, &fake);
    uint8_t junk[2048];
    memset(junk, 0xee, sizeof(junk));
    for (unsigned i = 0; i < 3; i++) {
        void *w;
        struct ol_shard_meta sm;
        memset(&sm, 0, sizeof(sm));
        sm.vid = fake;
        sm.k = 4;
        sm.m = 2;
        sm.rotation = 0;
        sm.shard = (uint8_t)i;
        sm.unit_bytes = unit;
        sm.size = 8192;
        strcpy(sm.etag, "partial");
        CHECK_EQ(ol_memdrive_ops.shard_begin(s.md[i], "b", "q", 1, &w), 0);
        CHECK_EQ(ol_memdrive_ops.shard_write(w, junk, 2048), 0);
        CHECK_EQ(ol_memdrive_ops.shard_commit(w, &sm, NULL, 0), 0);
    }
    CHECK_EQ(check_obj(&s, "b", &v2), 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "q", 1, NULL, &lo), 0);
    CHECK(strcmp(lo.etag, "e14") == 0);
    check_list(&s, "b", only, 1, 10);
    CHECK_EQ(ol_eset_stat(s.es, "b", "q", 1, &fake, &lo), -OL_ENOKEY);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "q", 1, &hs), 0);
    CHECK_EQ(hs.versions_removed, 3);

    /* Sweep an injected write failure over every call of a PUT on one and
     * then two drives: whatever fails, the object reads as the new version
     * (PUT returned 0) or the previous one (it failed), never torn. */
    struct obj cur = v2;
    for (unsigned nd = 1; nd <= 2; nd++) {
        for (uint64_t nth = 1; nth <= 16; nth++) {
            struct obj next = {.key = "q", .size = 1 + check_rnd() % 9000, .seed = check_rnd()};
            for (unsigned i = 0; i < nd; i++)
                ol_memdrive_fail_nth(s.md[(nth + i * 3) % 6], nth + i);
            int rc = put_obj(&s, "b", &next, NULL);
            for (unsigned i = 0; i < 6; i++)
                ol_memdrive_fail_nth(s.md[i], 0);
            if (nd == 1)
                CHECK_EQ(rc, 0);
            CHECK(rc == 0 || rc == -OL_EQUORUM);
            if (rc == 0)
                cur = next;
            CHECK_EQ(check_obj(&s, "b", &cur), 0);
        }
    }
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(check_obj(&s, "b", &cur), 0);
    for (unsigned i = 0; i < 6; i++) {
        struct ol_shard_meta sm[8];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[i], "b", "q", 1, sm, 8, NULL), 1);
    }

    /* Too few drives to read: the answer is "unavailable", not "absent". */
    for (unsigned i = 0; i < 3; i++)
        ol_memdrive_set_offline(s.md[i], true);
    CHECK_EQ(ol_eset_stat(s.es, "b", "q", 1, NULL, &lo), -OL_EQUORUM);
    for (unsigned i = 0; i < 3; i++)
        ol_memdrive_set_offline(s.md[i], false);
    /* And a key that is absent reads as absent with m drives gone. */
    ol_memdrive_set_offline(s.md[0], true);
    ol_memdrive_set_offline(s.md[3], true);
    CHECK_EQ(ol_eset_stat(s.es, "b", "nothing", 7, NULL, &lo), -OL_ENOKEY);
    CHECK_EQ(check_obj(&s, "b", &cur), 0);
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[3], false);
    set_close(&s);
}

/* ---- leftovers of PUTs cut off by a crash ---- */

/* Phase 1 of version vid of an empty object on drive slot `slot` (shard
 * `slot`, rotation 0), never marked COMPLETE. */
static void phase1(struct set *s, unsigned slot, const char *key,
                   const struct ol_version_id *vid)
{
    struct ol_shard_meta sm;
    memset(&sm, 0, sizeof(sm));
    sm.vid = *vid;
    sm.k = (uint8_t)s->k;
    sm.m = (uint8_t)s->m;
    sm.shard = (uint8_t)slot;
    sm.unit_bytes = 4096;
    strcpy(sm.etag, "cut");
    void *w = NULL;
    CHECK_EQ(ol_memdrive_ops.shard_begin(s->md[slot], "b", key, strlen(key), &w), 0);
    CHECK_EQ(ol_memdrive_ops.shard_commit(w, &sm, NULL, 0), 0);
}

/* The first PUT of a key cut off (kill -9) after fewer than k shards: never
 * COMPLETE anywhere, so the key is absent, also with one drive silent (the
 * shards seen plus the silent one stay below the ack quorum k+1).  A heal
 * removes such a leftover at once when it is stamped before the set was
 * opened (a crash of an earlier process), even within the grace, and keeps
 * one stamped after (a PUT of this process may still be writing it).  Once
 * marked on one drive it is "unavailable", never "absent". */
static void test_leftovers(void)
{
    struct set s;
    struct ol_version_id old, young;
    struct ol_eset_obj lo;
    struct ol_eset_heal_stats hs;
    struct ol_shard_meta sm[8];
    ol_hlc_version_id(&hlc, &old);
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, NULL);
    set_grace_ms = 3600 * 1000;
    set_open(&s, 4, 2, 4096);
    set_grace_ms = 0;
    ol_hlc_version_id(&hlc, &young);
    for (unsigned i = 0; i < 3; i++) {
        phase1(&s, i, "old", &old);
        phase1(&s, i, "young", &young);
    }
    CHECK_EQ(ol_eset_stat(s.es, "b", "old", 3, NULL, &lo), -OL_ENOKEY);
    CHECK_EQ(ol_eset_stat(s.es, "b", "young", 5, NULL, &lo), -OL_ENOKEY);
    ol_memdrive_set_offline(s.md[5], true);
    CHECK_EQ(ol_eset_stat(s.es, "b", "old", 3, NULL, &lo), -OL_ENOKEY);
    /* Silent, it cannot be healed away yet. */
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "old", 3, &hs), -OL_ENOKEY);
    CHECK_EQ(hs.versions_removed, 0);
    ol_memdrive_set_offline(s.md[5], false);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.versions_removed, 3);
    CHECK_EQ(hs.unrecoverable, 0);
    CHECK_EQ(ol_memdrive_ops.versions(s.md[0], "b", "old", 3, sm, 8, NULL), 0);
    CHECK_EQ(ol_memdrive_ops.versions(s.md[0], "b", "young", 5, sm, 8, NULL), 1);
    /* Marked on one drive: it was completed once (acknowledged), so too few
     * shards make it unavailable, not absent. */
    CHECK_EQ(ol_memdrive_ops.mark_complete(s.md[1], "b", "young", 5, &young), 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "young", 5, NULL, &lo), -OL_EQUORUM);
    set_close(&s);
}

/* ---- concurrent PUTs of one key, with a reader ---- */

struct race {
    struct set *s;
    unsigned id;
    _Atomic int stop;
    _Atomic unsigned ok_reads, torn, errors, gone;
    pthread_mutex_t mu;
    struct ol_version_id best; /* newest vid of a successful PUT */
    uint64_t best_seed;
    size_t best_size;
};

static struct race race;

/* The first 16 bytes of a race object are its seed and size, the rest is
 * gen(seed): a reader can check any object it gets without knowing which
 * PUT wrote it. */
static void race_body(uint64_t seed, size_t size, uint8_t *p)
{
    gen(seed, p, size);
    memcpy(p, &seed, 8);
    uint64_t sz = size;
    memcpy(p + 8, &sz, 8);
}

static void *race_writer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t x = 0x1234567ull * (id + 1);
    uint8_t *buf = malloc(200 * 1024);
    for (unsigned it = 0; it < 25; it++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t size = 16 + (size_t)((x >> 33) % (180 * 1024));
        uint64_t seed = x ^ id;
        race_body(seed, size, buf);
        struct ol_eset_obj info;
        int rc = ol_eset_put(race.s->es, "race", "k", 1, buf, size, "r", &info);
        if (rc < 0) {
            atomic_fetch_add(&race.errors, 1);
            continue;
        }
        pthread_mutex_lock(&race.mu);
        if (ol_version_id_cmp(&info.vid, &race.best) > 0) {
            race.best = info.vid;
            race.best_seed = seed;
            race.best_size = size;
        }
        pthread_mutex_unlock(&race.mu);
    }
    free(buf);
    return NULL;
}

static void *race_reader(void *arg)
{
    (void)arg;
    uint8_t *got = malloc(200 * 1024), *want = malloc(200 * 1024);
    for (unsigned it = 0; it < 100000 && !race.stop; it++) {
        struct ol_eset_obj st;
        if (ol_eset_stat(race.s->es, "race", "k", 1, NULL, &st) < 0)
            continue;
        int rc = ol_eset_read(race.s->es, "race", "k", 1, &st.vid, 0, st.size, got, NULL);
        if (rc < 0) {
            /* The version was freed by a newer one: no bytes were given. */
            atomic_fetch_add(&race.gone, 1);
            continue;
        }
        uint64_t seed, sz;
        memcpy(&seed, got, 8);
        memcpy(&sz, got + 8, 8);
        if (sz != st.size) {
            atomic_fetch_add(&race.torn, 1);
            continue;
        }
        race_body(seed, st.size, want);
        if (memcmp(got, want, st.size) != 0)
            atomic_fetch_add(&race.torn, 1);
        else
            atomic_fetch_add(&race.ok_reads, 1);
    }
    free(got);
    free(want);
    return NULL;
}

static void test_concurrent_puts(void)
{
    struct set s;
    set_open(&s, 4, 2, 16 * 1024);
    memset(&race, 0, sizeof(race));
    race.s = &s;
    pthread_mutex_init(&race.mu, NULL);
    /* Slow drives widen the race windows. */
    for (unsigned i = 0; i < 6; i++)
        ol_memdrive_set_latency_us(s.md[i], 20 * (i + 1));
    pthread_t w[4], r;
    pthread_create(&r, NULL, race_reader, NULL);
    for (unsigned i = 0; i < 4; i++)
        pthread_create(&w[i], NULL, race_writer, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < 4; i++)
        pthread_join(w[i], NULL);
    race.stop = 1;
    pthread_join(r, NULL);
    for (unsigned i = 0; i < 6; i++)
        ol_memdrive_set_latency_us(s.md[i], 0);
    CHECK_EQ(race.errors, 0);
    CHECK_EQ(race.torn, 0);
    CHECK(race.ok_reads > 0);

    /* The newest successful PUT won, on every drive, after a heal. */
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    struct ol_eset_obj st;
    CHECK_EQ(ol_eset_stat(s.es, "race", "k", 1, NULL, &st), 0);
    CHECK(ol_version_id_cmp(&st.vid, &race.best) == 0);
    CHECK_EQ(st.shards, 6);
    for (unsigned i = 0; i < 6; i++) {
        struct ol_shard_meta sm[8];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[i], "race", "k", 1, sm, 8, NULL), 1);
        CHECK(ol_version_id_cmp(&sm[0].vid, &race.best) == 0);
        CHECK(sm[0].flags & OL_SHARD_COMPLETE);
    }
    struct obj o = {.key = "k", .size = race.best_size, .seed = race.best_seed};
    uint8_t *got = malloc(o.size), *want = malloc(o.size);
    race_body(o.seed, o.size, want);
    CHECK_EQ(ol_eset_read(s.es, "race", "k", 1, NULL, 0, o.size, got, NULL), 0);
    CHECK(memcmp(got, want, o.size) == 0);
    printf("  race: %u consistent reads (%u found their version freed) during 100 concurrent "
           "PUTs\n",
           race.ok_reads, race.gone);
    free(got);
    free(want);
    pthread_mutex_destroy(&race.mu);
    set_close(&s);
}

/* ---- 8+4 on 12 drives ---- */

static void test_wide(void)
{
    struct set s;
    const uint32_t unit = 64 * 1024;
    enum { N = 40 };
    set_open(&s, 8, 4, unit);
    static struct obj objs[N];
    for (unsigned i = 0; i < N; i++) {
        snprintf(objs[i].key, sizeof(objs[i].key), "w%03u", i);
        objs[i].seed = check_rnd();
        objs[i].size = i % 8 == 0 ? check_rnd() % (3u << 20) : check_rnd() % (200 * 1024);
    }
    objs[1].size = 0;
    objs[2].size = 7;
    objs[3].size = 8 * unit;
    for (unsigned i = 0; i < N; i++)
        CHECK_EQ(put_obj(&s, "wide", &objs[i], NULL), 0);
    CHECK_EQ(check_all(&s, "wide", objs, N), 0);
    unsigned wiped[4] = {1, 4, 6, 11};
    for (unsigned i = 0; i < 4; i++)
        ol_memdrive_wipe(s.md[wiped[i]]);
    CHECK_EQ(check_all(&s, "wide", objs, N), 0);
    check_list(&s, "wide", objs, N, 9);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 4 * N);
    /* Another four, and corruption on four drives for some objects. */
    for (unsigned i = 0; i < 4; i++)
        ol_memdrive_wipe(s.md[wiped[i] + 1 - (wiped[i] == 11) * 2]);
    CHECK_EQ(check_all(&s, "wide", objs, N), 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 4 * N);
    unsigned nc = 0;
    for (unsigned i = 0; i < N; i += 4) {
        if (objs[i].size == 0)
            continue;
        uint64_t sb = shard_bytes(&s, objs[i].size, unit);
        for (unsigned d = 0; d < 4; d++)
            CHECK_EQ(ol_memdrive_corrupt(s.md[d * 3], "wide", objs[i].key, strlen(objs[i].key),
                                         NULL, (sb * d) / 4),
                     0);
        nc++;
    }
    CHECK_EQ(check_all(&s, "wide", objs, N), 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_all(s.es, &hs), 0);
    CHECK_EQ(hs.corrupt, 4 * nc);
    CHECK_EQ(hs.shards_rebuilt, 4 * nc);
    /* Five drives gone is beyond m: reads refuse, they never invent bytes. */
    for (unsigned i = 0; i < 5; i++)
        ol_memdrive_set_offline(s.md[i], true);
    CHECK_EQ(check_obj(&s, "wide", &objs[0]), -OL_EQUORUM);
    printf("  8+4: %u objects, 2 x 4 drives wiped and healed, %u x 4 corrupt shards healed\n", N,
           nc);
    set_close(&s);
}

static void test_args(void)
{
    struct set s;
    set_open(&s, 2, 1, 64);
    struct ol_eset *es;
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = 17;
    cfg.m = 1;
    CHECK_EQ(ol_eset_create(&cfg, &es), -EINVAL);
    struct ol_eset_put *p;
    CHECK_EQ(ol_eset_put_begin(s.es, "", "k", 1, &p), -EINVAL);
    CHECK_EQ(ol_eset_put_begin(s.es, "b", "k", 0, &p), -EINVAL);
    /* An aborted PUT leaves nothing behind. */
    CHECK_EQ(ol_eset_put_begin(s.es, "b", "k", 1, &p), 0);
    CHECK_EQ(ol_eset_put_write(p, "hello", 5), 0);
    ol_eset_put_abort(p);
    CHECK_EQ(ol_eset_stat(s.es, "b", "k", 1, NULL, NULL), -OL_ENOKEY);
    /* Keys with NUL bytes and the longest key. */
    char key[OL_DRIVE_MAX_KEY];
    memset(key, 'x', sizeof(key));
    key[3] = '\0';
    CHECK_EQ(ol_eset_put(s.es, "b", key, sizeof(key), "abc", 3, "t", NULL), 0);
    CHECK_EQ(ol_eset_put(s.es, "b", key, 4, "de", 2, "t", NULL), 0);
    char out[4];
    CHECK_EQ(ol_eset_read(s.es, "b", key, sizeof(key), NULL, 0, 3, out, NULL), 0);
    CHECK(memcmp(out, "abc", 3) == 0);
    CHECK_EQ(ol_eset_read(s.es, "b", key, 4, NULL, 0, 2, out, NULL), 0);
    CHECK(memcmp(out, "de", 2) == 0);
    set_close(&s);
}

/* ---- fan-out in fibers ---- */

struct fiber_test {
    struct set s;
    int failures;
    double put_ms, get_ms, slow_get_ms, seq_put_ms;
    uint64_t timeouts;
    int done;
};

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void fiber_body(void *arg)
{
    struct fiber_test *ft = arg;
    struct set *s = &ft->s;
    struct obj o = {.size = 3 * 64 * 1024 + 5, .seed = 99};
    snprintf(o.key, sizeof(o.key), "fan");
    uint8_t *want = malloc(o.size), *got = malloc(o.size);
    gen(o.seed, want, o.size);
    for (unsigned i = 0; i < s->n; i++)
        ol_memdrive_set_latency_us(s->md[i], 20000);
    struct timespec t0;
    /* One PUT: begin, one write per stripe (one stripe here), commit, mark:
     * four rounds of drive calls, each in parallel (begin, write and commit
     * in one writer fiber per shard, marks fanned out): 4 x 20 = 80 ms
     * against 6 x 4 x 20 = 480 ms one call at a time. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ft->failures += ol_eset_put(s->es, "b", o.key, strlen(o.key), want, o.size, "e", NULL) != 0;
    ft->put_ms = ms_since(&t0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ft->failures += ol_eset_read(s->es, "b", o.key, strlen(o.key), NULL, 0, o.size, got, NULL) != 0;
    ft->get_ms = ms_since(&t0);
    ft->failures += memcmp(want, got, o.size) != 0;
    /* A slow data drive: the read gives up on it after the timeout and
     * rebuilds its unit from parity. */
    struct ol_eset_obj st;
    ft->failures += ol_eset_stat(s->es, "b", o.key, strlen(o.key), NULL, &st) != 0;
    ol_memdrive_set_latency_us(s->md[(0 + 0) % s->n], 0);
    for (unsigned i = 0; i < s->n; i++)
        ol_memdrive_set_latency_us(s->md[i], 1000);
    unsigned slow = 0;
    for (unsigned i = 0; i < s->n; i++) {
        struct ol_shard_meta sm[4];
        int nv = ol_memdrive_ops.versions(s->md[i], "b", o.key, strlen(o.key), sm, 4, NULL);
        if (nv > 0 && sm[0].shard == 1)
            slow = i;
    }
    ol_memdrive_set_latency_us(s->md[slow], 400000);
    ol_eset_set_read_timeout_ms(s->es, 30);
    memset(got, 0, o.size);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ft->failures += ol_eset_read(s->es, "b", o.key, strlen(o.key), &st.vid, 0, o.size, got,
                                 NULL) != 0;
    ft->slow_get_ms = ms_since(&t0);
    ft->failures += memcmp(want, got, o.size) != 0;
    struct ol_eset_stats es;
    ol_eset_stats(s->es, &es);
    ft->timeouts = es.read_timeouts;
    /* The same PUT with parallel calls off: one call at a time. */
    for (unsigned i = 0; i < s->n; i++)
        ol_memdrive_set_latency_us(s->md[i], 20000);
    ol_eset_set_parallel(s->es, false);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ft->failures += ol_eset_put(s->es, "b", o.key, strlen(o.key), want, o.size, "e", NULL) != 0;
    ft->seq_put_ms = ms_since(&t0);
    ol_eset_set_parallel(s->es, true);
    for (unsigned i = 0; i < s->n; i++)
        ol_memdrive_set_latency_us(s->md[i], 0);
    free(want);
    free(got);
    ft->done = 1;
    ol_loop_stop(ol_loop_current());
}

static struct fiber_test *g_ft;

static void fiber_spawner(void *arg)
{
    (void)arg;
    struct ol_loop *loop = ol_loop_current();
    if (ol_fiber_spawn(loop, fiber_body, g_ft) != 0)
        abort();
}

static void test_fanout(void)
{
    struct fiber_test *ft = calloc(1, sizeof(*ft));
    set_open(&ft->s, 4, 2, 64 * 1024);
    g_ft = ft;
    struct ol_loop *loop;
    struct ol_loop_opts lo = {.id = 0, .max_fibers = 64};
    CHECK(ol_loop_create(&loop, &lo) == 0);
    CHECK(ol_loop_post(loop, fiber_spawner, NULL) == 0);
    CHECK(ol_loop_run(loop) == 0);
    ol_loop_destroy(loop);
    CHECK(ft->done);
    CHECK_EQ(ft->failures, 0);
    CHECK(ft->put_ms < 160);
    CHECK(ft->seq_put_ms > 400);
    /* GET: one versions round and one read round. */
    CHECK(ft->get_ms < 100);
    CHECK(ft->slow_get_ms < 150);
    CHECK(ft->timeouts >= 1);
    printf("  fan-out: PUT %.0f ms (sequential %.0f ms), GET %.0f ms, GET with a 400 ms "
           "drive %.0f ms\n", ft->put_ms, ft->seq_put_ms, ft->get_ms, ft->slow_get_ms);
    set_close(&ft->s);
    free(ft);
}


/* ---- the last completed write wins ---- */

/* A PUT of key k with body and etag `tag` (bytes: the tag repeated), begun
 * by the caller and committed here. */
static void fill_put(struct ol_eset_put *p, char tag, size_t n)
{
    uint8_t *b = malloc(n);
    memset(b, tag, n);
    CHECK_EQ(ol_eset_put_write(p, b, n), 0);
    free(b);
}

static void test_last_commit_wins(void)
{
    struct set s;
    set_open(&s, 4, 2, 64 * 1024);
    /* A begins first, B second; B completes first, A last: A wins. */
    struct ol_eset_put *a, *b;
    struct ol_eset_obj oa, ob, st;
    CHECK_EQ(ol_eset_put_begin(s.es, "b", "k", 1, &a), 0);
    CHECK_EQ(ol_eset_put_begin(s.es, "b", "k", 1, &b), 0);
    fill_put(a, 'A', 300000);
    fill_put(b, 'B', 1000);
    CHECK_EQ(ol_eset_put_commit(b, "B", 1, &ob), 0);
    CHECK_EQ(ol_eset_put_commit(a, "A", 2, &oa), 0);
    CHECK(ol_version_id_cmp(&oa.vid, &ob.vid) > 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "k", 1, NULL, &st), 0);
    CHECK(strcmp(st.etag, "A") == 0 && st.size == 300000);
    uint8_t got[64];
    CHECK_EQ(ol_eset_read(s.es, "b", "k", 1, NULL, 299000, 64, got, &st), 0);
    CHECK(got[0] == 'A' && got[63] == 'A' && strcmp(st.etag, "A") == 0);
    /* Every drive ends with A alone. */
    for (unsigned i = 0; i < s.n; i++) {
        struct ol_shard_meta sm[4];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[i], "b", "k", 1, sm, 4, NULL), 1);
        CHECK(ol_version_id_cmp(&sm[0].vid, &oa.vid) == 0);
    }
    /* The protection against too many incomplete versions still answers:
     * begun writers hold no version, committed unmarked ones do. */
    struct ol_eset_put *many[OL_MEMDRIVE_MAX_INCOMPLETE + 2];
    for (unsigned i = 0; i < OL_MEMDRIVE_MAX_INCOMPLETE + 2; i++)
        CHECK_EQ(ol_eset_put_begin(s.es, "b", "k", 1, &many[i]), 0);
    for (unsigned i = 0; i < OL_MEMDRIVE_MAX_INCOMPLETE + 2; i++)
        ol_eset_put_abort(many[i]);
    for (unsigned i = 0; i < s.n; i++)
        ol_memdrive_fail_nth(s.md[i], 0);
    set_close(&s);
}

/* ---- metadata blobs ---- */

static void meta_gen(uint8_t *b, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed + i * 31);
}

static int put_meta(struct set *s, const char *key, size_t n, const void *meta, size_t mlen,
                    uint32_t flags, struct ol_eset_obj *out)
{
    struct ol_eset_put *p;
    int rc = ol_eset_put_begin(s->es, "b", key, strlen(key), &p);
    if (rc < 0)
        return rc;
    uint8_t *b = malloc(n + 1);
    gen(n, b, n);
    rc = ol_eset_put_write(p, b, n);
    free(b);
    if (rc < 0) {
        ol_eset_put_abort(p);
        return rc;
    }
    struct ol_eset_commit cm = {.etag = "m", .mtime_ns = 5, .meta = meta, .meta_len = mlen,
                                .flags = flags};
    return ol_eset_put_commit2(p, &cm, out);
}

static uint64_t versions_calls(struct set *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->n; i++) {
        struct ol_memdrive_stats ms;
        ol_memdrive_stats(s->md[i], &ms);
        n += ms.versions;
    }
    return n;
}

/* 0 when stat_meta of key returns the blob meta_gen(seed, n). */
static int check_meta(struct set *s, const char *key, size_t n, uint8_t seed)
{
    static uint8_t want[OL_ESET_META_MAX], got[OL_ESET_META_MAX];
    struct ol_eset_obj o;
    size_t len = 12345;
    int rc = ol_eset_stat_meta(s->es, "b", key, strlen(key), NULL, &o, got, sizeof(got), &len);
    if (rc < 0)
        return rc;
    meta_gen(want, n, seed);
    if (len != n || o.meta_len != n || memcmp(want, got, n) != 0)
        return -EBADMSG;
    return 0;
}

static void test_meta(void)
{
    struct set s;
    set_open(&s, 4, 2, 64 * 1024);
    static uint8_t m[OL_ESET_META_MAX + 1];
    struct ol_eset_obj o;
    meta_gen(m, 300, 1);
    CHECK_EQ(put_meta(&s, "m1", 5000, m, 300, 0, &o), 0);
    CHECK_EQ(o.meta_len, 300);
    /* One round trip to max(k, m) drives (the first step of a read of the
     * latest version: they all hold it), not to all n. */
    for (unsigned i = 0; i < s.n; i++)
        ol_memdrive_stats_reset(s.md[i]);
    CHECK_EQ(check_meta(&s, "m1", 300, 1), 0);
    CHECK_EQ(versions_calls(&s), 4);
    /* One of them down: the others are asked too, and it still reads. */
    for (unsigned d = 0; d < s.n; d++) {
        for (unsigned i = 0; i < s.n; i++)
            ol_memdrive_stats_reset(s.md[i]);
        ol_memdrive_set_offline(s.md[d], true);
        CHECK_EQ(check_meta(&s, "m1", 300, 1), 0);
        ol_memdrive_set_offline(s.md[d], false);
    }
    /* Too small a buffer: -ENOBUFS with the length. */
    uint8_t small[8];
    size_t len = 0;
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", "m1", 2, NULL, &o, small, sizeof(small), &len),
             -ENOBUFS);
    CHECK_EQ(len, 300);
    /* The largest blob; one byte more is refused. */
    meta_gen(m, OL_ESET_META_MAX, 2);
    CHECK_EQ(put_meta(&s, "m2", 0, m, OL_ESET_META_MAX, 0, NULL), 0);
    CHECK_EQ(check_meta(&s, "m2", OL_ESET_META_MAX, 2), 0);
    CHECK_EQ(put_meta(&s, "m3", 10, m, OL_ESET_META_MAX + 1, 0, NULL), -EINVAL);
    /* A version without a blob (the old API) reads with none; a listing
     * tells which have one. */
    struct obj plain = {.key = "m0", .size = 777, .seed = 9};
    CHECK_EQ(put_obj(&s, "b", &plain, NULL), 0);
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", "m0", 2, NULL, &o, small, sizeof(small), &len), 0);
    CHECK(len == 0 && o.meta_len == 0 && o.size == 777);
    CHECK_EQ(check_obj(&s, "b", &plain), 0);

    /* Damaged copies are never returned: with the newest copy damaged on
     * the first three drives, the blob comes from another. */
    for (unsigned i = 0; i < 3; i++)
        CHECK_EQ(ol_memdrive_corrupt_meta(s.md[i], "b", "m1", 2, NULL), 0);
    CHECK_EQ(check_meta(&s, "m1", 300, 1), 0);
    /* Damaged everywhere: unavailable, never wrong. */
    for (unsigned i = 3; i < s.n; i++)
        CHECK_EQ(ol_memdrive_corrupt_meta(s.md[i], "b", "m1", 2, NULL), 0);
    CHECK_EQ(check_meta(&s, "m1", 300, 1), -OL_EQUORUM);

    /* A newer version on fewer than k drives (in flight) is the newest of
     * some drives: the others give the readable one's blob at once.  A newer
     * unreadable version on every drive (its metadata disagree): the blob
     * of the readable one comes from its holders in one more step. */
    meta_gen(m, 100, 3);
    CHECK_EQ(put_meta(&s, "m4", 100, m, 100, 0, NULL), 0);
    for (unsigned i = 0; i < 3; i++)
        ol_memdrive_set_offline(s.md[i], true);
    meta_gen(m, 50, 4);
    CHECK_EQ(put_meta(&s, "m4", 100, m, 50, 0, NULL), -OL_EQUORUM); /* rolled back: gone */
    struct ol_eset_put *p;
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[1], false);
    ol_memdrive_set_offline(s.md[2], false);
    struct ol_version_id nv;
    struct ol_shard_meta fsm[4];
    CHECK_EQ(ol_memdrive_ops.versions(s.md[0], "b", "m4", 2, fsm, 4, NULL), 1);
    for (unsigned round = 0; round < 2; round++) {
        unsigned nforged = round == 0 ? 2 : s.n;
        ol_hlc_version_id(&hlc, &nv);
        for (unsigned i = 0; i < nforged; i++) {
            void *w;
            struct ol_shard_meta f = fsm[0];
            f.vid = nv;
            f.size = 0;
            f.shard = (uint8_t)((i + s.n - f.rotation % s.n) % s.n);
            snprintf(f.etag, sizeof(f.etag), "x%u", round == 0 ? 0 : i);
            CHECK_EQ(ol_memdrive_ops.shard_begin(s.md[i], "b", "m4", 2, &w), 0);
            CHECK_EQ(ol_memdrive_ops.shard_commit(w, &f, "x", 1), 0);
        }
        for (unsigned i = 0; i < s.n; i++)
            ol_memdrive_stats_reset(s.md[i]);
        CHECK_EQ(check_meta(&s, "m4", 100, 3), 0);
        CHECK_EQ(versions_calls(&s), round == 0 ? s.n : 2 * s.n);
    }

    /* Heal writes the blob with the shards it rebuilds, and repairs holders
     * whose copy is damaged. */
    meta_gen(m, 1000, 5);
    CHECK_EQ(put_meta(&s, "m5", 200000, m, 1000, 0, NULL), 0);
    ol_memdrive_wipe(s.md[4]);
    CHECK_EQ(ol_memdrive_corrupt_meta(s.md[1], "b", "m5", 2, NULL), 0);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "m5", 2, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 1);
    CHECK_EQ(hs.metas_repaired, 1);
    /* Only the rebuilt drive and the repaired one plus two others: the blob
     * reads intact. */
    ol_memdrive_set_offline(s.md[0], true);
    ol_memdrive_set_offline(s.md[2], true);
    CHECK_EQ(check_meta(&s, "m5", 1000, 5), 0);
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[2], false);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "m5", 2, &hs), 0);
    CHECK(hs.metas_repaired == 0 && hs.shards_rebuilt == 0);
    (void)p;
    set_close(&s);
}

/* ---- changing a version's blob ---- */

static void test_set_meta(void)
{
    struct set s;
    set_open(&s, 4, 2, 64 * 1024);
    static uint8_t m[4096];
    struct ol_eset_obj o1, o;
    meta_gen(m, 200, 1);
    CHECK_EQ(put_meta(&s, "t", 70000, m, 200, 0, &o1), 0);
    meta_gen(m, 90, 2);
    CHECK_EQ(ol_eset_set_meta(s.es, "b", "t", 1, NULL, m, 90), 0);
    CHECK_EQ(check_meta(&s, "t", 90, 2), 0);
    /* The data and the version are untouched. */
    CHECK_EQ(ol_eset_stat(s.es, "b", "t", 1, NULL, &o), 0);
    CHECK(ol_version_id_cmp(&o.vid, &o1.vid) == 0 && o.size == 70000);
    /* One drive offline: still the write quorum; back, reads take the
     * newest; a heal brings it the blob. */
    ol_memdrive_set_offline(s.md[3], true);
    meta_gen(m, 3000, 3);
    CHECK_EQ(ol_eset_set_meta(s.es, "b", "t", 1, &o1.vid, m, 3000), 0);
    ol_memdrive_set_offline(s.md[3], false);
    CHECK_EQ(check_meta(&s, "t", 3000, 3), 0);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "t", 1, &hs), 0);
    CHECK_EQ(hs.metas_repaired, 1);
    for (unsigned i = 0; i < 4; i++)
        ol_memdrive_set_offline(s.md[i], i != 3);
    ol_memdrive_set_offline(s.md[4], false);
    ol_memdrive_set_offline(s.md[5], false);
    /* (k = 4 needed: 3 up is not enough to read; bring one back) */
    ol_memdrive_set_offline(s.md[0], false);
    CHECK_EQ(check_meta(&s, "t", 3000, 3), 0);
    for (unsigned i = 0; i < s.n; i++)
        ol_memdrive_set_offline(s.md[i], false);
    /* Two offline: below the write quorum. */
    ol_memdrive_set_offline(s.md[0], true);
    ol_memdrive_set_offline(s.md[1], true);
    CHECK_EQ(ol_eset_set_meta(s.es, "b", "t", 1, NULL, m, 10), -OL_EQUORUM);
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[1], false);
    /* The newest stamp wins on a drive, whatever the order of arrival. */
    struct ol_drive_blob bl = {.buf = m, .cap = sizeof(m)};
    struct ol_shard_meta sm[4];
    uint64_t t = ol_hlc_now(&hlc);
    CHECK_EQ(ol_memdrive_ops.set_meta(s.md[0], "b", "t", 1, &o1.vid, "new", 3, t + 2), 0);
    CHECK_EQ(ol_memdrive_ops.set_meta(s.md[0], "b", "t", 1, &o1.vid, "older", 5, t + 1), 0);
    CHECK_EQ(ol_memdrive_ops.versions(s.md[0], "b", "t", 1, sm, 4, &bl), 1);
    CHECK(bl.got && bl.len == 3 && memcmp(m, "new", 3) == 0 && sm[0].meta_stamp == t + 2);
    /* ... and in reads, over drives that disagree (by version id: every
     * drive is asked; the first step of a read of the latest version asks
     * max(k, m) of them, which see every change that reached the write
     * quorum, not necessarily this one-drive change). */
    size_t len = 0;
    uint8_t got[16];
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", "t", 1, &o1.vid, &o, got, sizeof(got), &len), 0);
    CHECK(len == 3 && memcmp(got, "new", 3) == 0);
    /* Unknown version, delete marker: no such key. */
    struct ol_version_id none;
    ol_hlc_version_id(&hlc, &none);
    CHECK_EQ(ol_eset_set_meta(s.es, "b", "t", 1, &none, "x", 1), -OL_ENOKEY);
    CHECK_EQ(ol_eset_delete(s.es, "b", "t", 1), 0);
    CHECK_EQ(ol_eset_set_meta(s.es, "b", "t", 1, NULL, "x", 1), -OL_ENOKEY);
    set_close(&s);
}

/* ---- versioned keys ---- */

static int count_keys(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)key;
    (void)klen;
    *(unsigned *)ctx += (o->flags & OL_SHARD_DELETE_MARKER) != 0;
    return 0;
}

static void test_versioned(void)
{
    struct set s;
    set_open(&s, 4, 2, 64 * 1024);
    static uint8_t m[64];
    struct ol_eset_obj v[4], o, list[16];
    for (unsigned i = 0; i < 3; i++) {
        meta_gen(m, 10, (uint8_t)i);
        CHECK_EQ(put_meta(&s, "v", 1000 * (i + 1), m, 10, OL_SHARD_KEEP_OLDER, &v[i]), 0);
    }
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 3);
    CHECK(ol_version_id_cmp(&list[0].vid, &v[2].vid) == 0 && list[2].size == 1000);
    CHECK(list[0].meta_len == 10 && (list[0].flags & OL_SHARD_KEEP_OLDER));
    /* Older versions read by vid, with their blob. */
    uint8_t got[64];
    size_t len;
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", "v", 1, &v[0].vid, &o, got, sizeof(got), &len), 0);
    meta_gen(m, 10, 0);
    CHECK(o.size == 1000 && len == 10 && memcmp(got, m, 10) == 0);
    /* Heal keeps (and heals) them. */
    ol_memdrive_wipe(s.md[2]);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "v", 1, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 3);
    CHECK_EQ(hs.versions_removed, 0);
    struct ol_shard_meta sm[8];
    CHECK_EQ(ol_memdrive_ops.versions(s.md[2], "b", "v", 1, sm, 8, NULL), 3);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 3);
    /* A delete marker hides the key, is listed, and stays after a heal. */
    CHECK_EQ(ol_eset_delete_marker(s.es, "b", "v", 1, OL_SHARD_KEEP_OLDER, 7, &v[3]), 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "v", 1, NULL, &o), -OL_ENOKEY);
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", "v", 1, NULL, &o, got, sizeof(got), &len), -OL_ENOKEY);
    CHECK(ol_version_id_cmp(&o.vid, &v[3].vid) == 0 && (o.flags & OL_SHARD_DELETE_MARKER));
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "v", 1, &hs), 0);
    CHECK_EQ(hs.versions_removed, 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 4);
    CHECK(list[0].flags & OL_SHARD_DELETE_MARKER);
    /* ListObjects skips the key; the key walk of ListObjectVersions has it. */
    unsigned nl = 0;
    CHECK_EQ(ol_eset_list(s.es, "b", "", 0, 100, count_keys, &nl), 0);
    CHECK_EQ(ol_eset_list_markers(s.es, "b", "", 0, 100, count_keys, &nl), 1);
    CHECK_EQ(nl, 1);
    CHECK_EQ(ol_eset_stat(s.es, "b", "v", 1, &v[1].vid, &o), 0);
    /* Removing the marker for good: the newest version reads again. */
    CHECK_EQ(ol_eset_delete_version(s.es, "b", "v", 1, &v[3].vid), 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "v", 1, NULL, &o), 0);
    CHECK(ol_version_id_cmp(&o.vid, &v[2].vid) == 0);
    CHECK_EQ(ol_eset_delete_version(s.es, "b", "v", 1, &v[1].vid), 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 2);
    CHECK_EQ(ol_eset_stat(s.es, "b", "v", 1, &v[1].vid, &o), -OL_ENOKEY);
    /* Suspended versioning: a NULL version frees the older NULL one only. */
    struct ol_eset_obj n1, n2;
    CHECK_EQ(put_meta(&s, "v", 10, NULL, 0, OL_SHARD_NULL, &n1), 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 3);
    CHECK_EQ(put_meta(&s, "v", 20, NULL, 0, OL_SHARD_NULL, &n2), 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 3);
    CHECK(ol_version_id_cmp(&list[0].vid, &n2.vid) == 0 && (list[0].flags & OL_SHARD_NULL));
    CHECK_EQ(ol_eset_stat(s.es, "b", "v", 1, &n1.vid, &o), -OL_ENOKEY);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "v", 1, &hs), 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 3);
    /* More versions than a read asks of a drive at first: the oldest still
     * reads by vid. */
    for (unsigned i = 0; i < 20; i++)
        CHECK_EQ(put_meta(&s, "w", 10 + i, NULL, 0, OL_SHARD_KEEP_OLDER, i == 0 ? &o : NULL), 0);
    struct ol_eset_obj first = o;
    CHECK_EQ(ol_eset_stat(s.es, "b", "w", 1, &first.vid, &o), 0);
    CHECK_EQ(o.size, 10);
    CHECK_EQ(ol_eset_versions(s.es, "b", "w", 1, list, 16), 16);
    /* An unversioned PUT (no flags) replaces everything. */
    CHECK_EQ(put_meta(&s, "v", 30, NULL, 0, 0, &o), 0);
    CHECK_EQ(ol_eset_versions(s.es, "b", "v", 1, list, 16), 1);
    for (unsigned i = 0; i < s.n; i++)
        CHECK_EQ(ol_memdrive_ops.versions(s.md[i], "b", "v", 1, sm, 8, NULL), 1);
    set_close(&s);
}

/* ---- CopyObject by reference (ol_eset_copy) ---- */

static unsigned rotation_for(const char *bucket, const char *key)
{
    struct ol_ec_placement pl;
    struct ol_ec_target t;
    if (ol_ec_placement_init(&pl, 6, 4, 2, (const uint8_t *)"eset-test-deploy") < 0)
        abort();
    ol_ec_place(&pl, bucket, key, strlen(key), &t);
    return t.rotation;
}

/* Whether every drive holding a shard of bucket/key's newest version holds
 * the shard that rotation `rot` puts on its slot, recorded with `rot`. */
static unsigned holders_with_rotation(struct set *s, const char *bucket, const char *key,
                                      unsigned rot)
{
    unsigned n = 0;
    for (unsigned d = 0; d < s->n; d++) {
        struct ol_shard_meta sm;
        if (ol_memdrive_ops.versions(s->md[d], bucket, key, strlen(key), &sm, 1, NULL) != 1)
            continue;
        n += sm.rotation == rot && sm.shard == (d + s->n - rot) % s->n;
    }
    return n;
}

static void test_copy(void)
{
    struct set s;
    const uint32_t unit = 4096;
    set_open(&s, 4, 2, unit);
    struct obj src = {.key = "src", .size = 5 * 4 * 4096 + 777, .seed = 42};
    struct ol_eset_obj so, co, st;
    CHECK_EQ(put_obj(&s, "b", &src, &so), 0);
    unsigned rs = rotation_for("b", "src");
    /* A destination whose own placement rotates otherwise: the copy must
     * keep the source's. */
    struct obj dst = {.size = src.size, .seed = src.seed};
    for (unsigned i = 0; i < 100; i++) {
        snprintf(dst.key, sizeof(dst.key), "dst%u", i);
        if (rotation_for("b", dst.key) != rs)
            break;
    }
    CHECK(rotation_for("b", dst.key) != rs);
    size_t dl = strlen(dst.key);

    /* No byte read or written: each drive copies its own shard. */
    for (unsigned d = 0; d < s.n; d++)
        ol_memdrive_stats_reset(s.md[d]);
    struct ol_eset_commit cm = {.etag = "copied", .mtime_ns = 5, .meta = "blob!", .meta_len = 5};
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, NULL, "b", dst.key, dl, &cm, &co), 0);
    CHECK_EQ(co.shards, 6);
    CHECK_EQ(co.size, src.size);
    CHECK(ol_version_id_cmp(&co.vid, &so.vid) > 0);
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_memdrive_stats ms;
        ol_memdrive_stats(s.md[d], &ms);
        CHECK_EQ(ms.reads, 0);
        CHECK_EQ(ms.commits, 0);
        CHECK_EQ(ms.copies, 1);
    }
    CHECK_EQ(holders_with_rotation(&s, "b", dst.key, rs), 6);
    /* It reads byte-identical, with its own etag, mtime and blob. */
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    char blob[16];
    size_t blen = 0;
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", dst.key, dl, NULL, &st, blob, sizeof(blob), &blen), 0);
    CHECK(blen == 5 && memcmp(blob, "blob!", 5) == 0);
    CHECK(strcmp(st.etag, "copied") == 0 && st.mtime_ns == 5);
    CHECK(ol_version_id_cmp(&st.vid, &co.vid) == 0);
    /* Listed (the fast rule, every drive agreeing), and the source intact. */
    struct obj both[2] = {dst, src};
    qsort(both, 2, sizeof(both[0]), cmp_key);
    check_list(&s, "b", both, 2, 10);
    CHECK_EQ(check_obj(&s, "b", &src), 0);

    /* Losing m drives: still byte-identical (degraded reads over the
     * recorded rotation). */
    ol_memdrive_set_offline(s.md[(rs + 0) % 6], true);
    ol_memdrive_set_offline(s.md[(rs + 2) % 6], true);
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    ol_memdrive_set_offline(s.md[(rs + 0) % 6], false);
    ol_memdrive_set_offline(s.md[(rs + 2) % 6], false);

    /* Two drives wiped: the heal rebuilds the copy's shards where the
     * version's rotation (not the key's) puts them; then two other drives
     * may go. */
    ol_memdrive_wipe(s.md[1]);
    ol_memdrive_wipe(s.md[4]);
    struct ol_eset_heal_stats hs;
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", dst.key, dl, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 2);
    CHECK_EQ(holders_with_rotation(&s, "b", dst.key, rs), 6);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", dst.key, dl, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 0);
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "src", 3, &hs), 0);
    ol_memdrive_set_offline(s.md[0], true);
    ol_memdrive_set_offline(s.md[3], true);
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", dst.key, dl, NULL, &st, blob, sizeof(blob), &blen), 0);
    CHECK(blen == 5 && memcmp(blob, "blob!", 5) == 0);
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[3], false);

    /* A second copy onto the destination replaces the first (freed on
     * every drive), and a PUT then replaces it with the key's own
     * rotation. */
    struct obj src2 = {.key = "src2", .size = 3000, .seed = 43};
    CHECK_EQ(put_obj(&s, "b", &src2, NULL), 0);
    struct ol_eset_commit cm2 = {.etag = NULL, .mtime_ns = 6};
    CHECK_EQ(ol_eset_copy(s.es, "b", "src2", 4, NULL, "b", dst.key, dl, &cm2, &co), 0);
    dst.size = src2.size;
    dst.seed = src2.seed;
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    CHECK_EQ(ol_eset_stat_meta(s.es, "b", dst.key, dl, NULL, &st, blob, sizeof(blob), &blen), 0);
    CHECK(blen == 0 && strcmp(st.etag, "e43") == 0); /* the source's etag, no blob */
    CHECK_EQ(holders_with_rotation(&s, "b", dst.key, rotation_for("b", "src2")), 6);
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_shard_meta vm[4];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[d], "b", dst.key, dl, vm, 4, NULL), 1);
    }
    dst.seed = 44;
    dst.size = 70000;
    CHECK_EQ(put_obj(&s, "b", &dst, NULL), 0);
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    CHECK_EQ(holders_with_rotation(&s, "b", dst.key, rotation_for("b", dst.key)), 6);

    /* A copy onto the source's own key: a new version, same bytes. */
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, &so.vid, "b", "src", 3, &cm, &co), 0);
    CHECK(ol_version_id_cmp(&co.vid, &so.vid) > 0);
    CHECK_EQ(check_obj(&s, "b", &src), 0);
    CHECK_EQ(ol_eset_stat(s.es, "b", "src", 3, &so.vid, &st), -OL_ENOKEY); /* freed */

    /* A drive that lacked the source's shard misses the copy's; a heal
     * gives it one, rebuilt with the version's rotation. */
    ol_memdrive_wipe(s.md[2]);
    struct obj c3 = {.key = "c3", .size = src.size, .seed = src.seed};
    for (unsigned i = 0; i < 100 && rotation_for("b", c3.key) == rs; i++)
        snprintf(c3.key, sizeof(c3.key), "c3-%u", i);
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, NULL, "b", c3.key, strlen(c3.key), &cm, &co), 0);
    CHECK_EQ(co.shards, 5);
    CHECK_EQ(check_obj(&s, "b", &c3), 0);
    memset(&hs, 0, sizeof(hs));
    CHECK_EQ(ol_eset_heal_object(s.es, "b", c3.key, strlen(c3.key), &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 1);
    CHECK_EQ(holders_with_rotation(&s, "b", c3.key, rs), 6);
    CHECK_EQ(ol_eset_heal_object(s.es, "b", "src", 3, &hs), 0);
    CHECK_EQ(ol_eset_heal_object(s.es, "b", dst.key, dl, &hs), 0);

    /* Refusals: a source on fewer drives than the write quorum (the caller
     * streams), failing drives (rolled back: the previous version stays),
     * no source, a delete marker. */
    ol_memdrive_set_offline(s.md[0], true);
    ol_memdrive_set_offline(s.md[5], true);
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, NULL, "b", dst.key, dl, &cm, NULL), -OL_EQUORUM);
    ol_memdrive_set_offline(s.md[0], false);
    ol_memdrive_set_offline(s.md[5], false);
    ol_memdrive_fail_nth(s.md[1], 1);
    ol_memdrive_fail_nth(s.md[3], 1);
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, NULL, "b", dst.key, dl, &cm, NULL), -OL_EQUORUM);
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    for (unsigned d = 0; d < s.n; d++) {
        struct ol_shard_meta vm[4];
        CHECK_EQ(ol_memdrive_ops.versions(s.md[d], "b", dst.key, dl, vm, 4, NULL), 1);
    }
    CHECK_EQ(ol_eset_copy(s.es, "b", "nope", 4, NULL, "b", dst.key, dl, &cm, NULL), -OL_ENOKEY);
    CHECK_EQ(ol_eset_delete(s.es, "b", "src2", 4), 0);
    CHECK_EQ(ol_eset_copy(s.es, "b", "src2", 4, NULL, "b", dst.key, dl, &cm, NULL), -OL_ENOKEY);
    struct ol_eset_commit bad = {.flags = OL_SHARD_DELETE_MARKER};
    CHECK_EQ(ol_eset_copy(s.es, "b", "src", 3, NULL, "b", dst.key, dl, &bad, NULL), -EINVAL);
    CHECK_EQ(check_obj(&s, "b", &dst), 0);
    set_close(&s);
}

int main(void)
{
    ol_hlc_init(&hlc, 7, 0xabcdef, NULL, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_args();
    test_io_accounting();
    test_quorum();
    test_leftovers();
    test_wipe_heal_corrupt();
    test_concurrent_puts();
    test_wide();
    test_fanout();
    test_last_commit_wins();
    test_meta();
    test_set_meta();
    test_versioned();
    test_copy();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s (%.1f s)\n", failures ? "FAIL" : "PASS", secs);
    return failures ? 1 : 0;
}
