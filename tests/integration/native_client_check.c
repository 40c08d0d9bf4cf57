/* libopenlake against a running `openlake server`, through the shared
 * library and its public header only (tests/integration/test_native_client.py
 * runs it; it is also handy by hand):
 *
 *   native_client_check ENDPOINT BUCKET [BIG_BYTES]
 *
 * with the credentials in OPENLAKE_ACCESS_KEY / OPENLAKE_SECRET_KEY and the
 * bucket already there (the native protocol does not create buckets).
 * Checks: the wrong secret and an unknown access key refused with -EACCES;
 * byte-identical round trips at 0 B, 1 B, 4 KiB, 1 MiB, 64 MiB, 64 MiB + 1
 * and BIG_BYTES (when given), into plain and registered memory; a batch of
 * 1000 ranged reads checked byte by byte (run, then submit / reap), one
 * failing op failing alone; a mixed batch of PUT, HEAD, GET and DELETE;
 * list with a prefix, start_after and paging; head and delete.  Prints one
 * line per failed check; exits 0 (all passed), 1 (a check failed) or 77
 * (no server to test). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openlake/client.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int64_t rc_ = (expr), want_ = (want);                                                      \
        if (rc_ != want_) {                                                                        \
            fprintf(stderr, "%s:%d: %s = %" PRId64 " (%s), want %" PRId64 "\n", __FILE__,          \
                    __LINE__, #expr, rc_, ol_client_strerror((int)rc_), want_);                    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Bytes that differ from object to object and from offset to offset, so a
 * range landing at the wrong place or from the wrong object is caught. */
static uint8_t *pattern(size_t n, unsigned seed)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(77);
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

static void round_trip(struct ol_client *c, const char *bucket, size_t n, unsigned seed,
                       int registered)
{
    uint8_t *d = pattern(n, seed), *back = malloc(n + 64);
    char key[64];
    snprintf(key, sizeof(key), "rt/%zu", n);
    struct ol_client_info pi, gi;
    CHECK_RC(ol_client_put(c, bucket, key, d, n, &pi), 0);
    CHECK(pi.size == n && pi.etag[0] == '"');
    struct ol_client_mem *m = NULL;
    if (registered)
        CHECK_RC(ol_client_mem_reg(c, back, n + 64, OL_CLIENT_MEM_HOST, &m), 0);
    memset(back, 0xa5, n + 64);
    int64_t got = ol_client_get(c, bucket, key, 0, back, n + 64, &gi);
    CHECK_RC(got, (int64_t)n);
    CHECK(n == 0 || memcmp(back, d, n) == 0);
    CHECK(back[n] == 0xa5); /* nothing past the object's end */
    CHECK(gi.size == n && strcmp(gi.etag, pi.etag) == 0);
    if (n > 100) {
        /* A range that ends at the object's end, asked for with room to
         * spare, and one in the middle. */
        CHECK_RC(ol_client_get(c, bucket, key, n - 77, back, 1000, NULL), 77);
        CHECK(memcmp(back, d + n - 77, 77) == 0);
        CHECK_RC(ol_client_get(c, bucket, key, n / 3, back, 33, NULL), 33);
        CHECK(memcmp(back, d + n / 3, 33) == 0);
    }
    ol_client_mem_dereg(c, m);
    free(d);
    free(back);
}

static int count_key(void *arg, const char *key, const struct ol_client_info *info)
{
    (void)key;
    CHECK(info->size == 1);
    (*(int *)arg)++;
    return 0;
}

static int stop_at_3(void *arg, const char *key, const struct ol_client_info *info)
{
    (void)key, (void)info;
    return ++*(int *)arg == 3 ? 42 : 0;
}

static void batches(struct ol_client *c, const char *bucket)
{
    enum { NOBJ = 50, OBJ = 16384, NOPS = 1000, LEN = 700 };
    uint8_t *objs[NOBJ];
    char keys[NOBJ][32];
    for (int i = 0; i < NOBJ; i++) {
        objs[i] = pattern(OBJ, 5000 + (unsigned)i);
        snprintf(keys[i], sizeof(keys[i]), "batch/%03d", i);
        CHECK_RC(ol_client_put(c, bucket, keys[i], objs[i], OBJ, NULL), 0);
    }
    struct ol_client_op *ops = calloc(NOPS, sizeof(*ops));
    struct ol_client_op **pp = calloc(NOPS, sizeof(*pp));
    uint8_t *bufs = malloc((size_t)NOPS * LEN);
    for (int i = 0; i < NOPS; i++) {
        /* Offsets all over the object, some ranges cut short by its end. */
        uint64_t off = ((uint64_t)i * 7919u) % OBJ;
        ops[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_GET,
                                       .bucket = bucket,
                                       .key = keys[i % NOBJ],
                                       .buf = bufs + (size_t)i * LEN,
                                       .offset = off,
                                       .len = LEN,
                                       .user_data = (uint64_t)i};
        pp[i] = &ops[i];
    }
    ops[500].key = "batch/missing";
    CHECK_RC(ol_client_run(c, pp, NOPS), -OL_CLIENT_ENOKEY);
    int good = 0;
    for (int i = 0; i < NOPS; i++) {
        if (i == 500) {
            CHECK_RC(ops[i].result, -OL_CLIENT_ENOKEY);
            continue;
        }
        uint64_t want = OBJ - ops[i].offset < LEN ? OBJ - ops[i].offset : LEN;
        good += ops[i].result == (int64_t)want &&
                memcmp(bufs + (size_t)i * LEN, objs[i % NOBJ] + ops[i].offset, want) == 0;
    }
    CHECK_RC(good, NOPS - 1);

    /* The same through submit / reap, each op seen exactly once. */
    ops[500].key = keys[0];
    memset(bufs, 0, (size_t)NOPS * LEN);
    CHECK_RC(ol_client_submit(c, pp, NOPS), NOPS);
    char *seen = calloc(NOPS, 1);
    int reaped = 0, ok = 0;
    struct ol_client_op *done[100];
    for (int spins = 0; reaped < NOPS && spins < 1000; spins++) {
        int n = ol_client_reap(c, done, 1, 100, 20000);
        CHECK(n > 0);
        if (n <= 0)
            break;
        for (int j = 0; j < n; j++) {
            int i = (int)done[j]->user_data;
            CHECK(!seen[i]);
            seen[i] = 1;
            uint64_t want = OBJ - ops[i].offset < LEN ? OBJ - ops[i].offset : LEN;
            ok += done[j]->result == (int64_t)want &&
                  memcmp(bufs + (size_t)i * LEN, objs[i % NOBJ] + ops[i].offset, want) == 0;
        }
        reaped += n;
    }
    CHECK_RC(reaped, NOPS);
    CHECK_RC(ok, NOPS);
    CHECK_RC(ol_client_reap(c, done, 0, 100, 0), 0);

    /* A mixed batch: PUTs, then HEAD, GET and DELETE of them. */
    struct ol_client_op mixed[8];
    struct ol_client_op *mp[8];
    char mkeys[4][32];
    uint8_t mbuf[4][OBJ];
    for (int i = 0; i < 4; i++) {
        snprintf(mkeys[i], sizeof(mkeys[i]), "mixed/%d", i);
        mixed[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_PUT,
                                         .bucket = bucket,
                                         .key = mkeys[i],
                                         .buf = objs[i],
                                         .len = OBJ};
        mp[i] = &mixed[i];
    }
    CHECK_RC(ol_client_run(c, mp, 4), 0);
    for (int i = 0; i < 4; i++)
        CHECK(mixed[i].info.size == OBJ);
    mixed[0] =
        (struct ol_client_op){.opcode = OL_CLIENT_OP_HEAD, .bucket = bucket, .key = mkeys[0]};
    mixed[1] = (struct ol_client_op){
        .opcode = OL_CLIENT_OP_GET, .bucket = bucket, .key = mkeys[1], .buf = mbuf[1], .len = OBJ};
    mixed[2] =
        (struct ol_client_op){.opcode = OL_CLIENT_OP_DELETE, .bucket = bucket, .key = mkeys[2]};
    mixed[3] = (struct ol_client_op){.opcode = OL_CLIENT_OP_GET,
                                     .bucket = bucket,
                                     .key = mkeys[3],
                                     .buf = mbuf[3],
                                     .offset = 100,
                                     .len = 5000};
    CHECK_RC(ol_client_run(c, mp, 4), 0);
    CHECK(mixed[0].info.size == OBJ);
    CHECK(mixed[1].result == OBJ && memcmp(mbuf[1], objs[1], OBJ) == 0);
    CHECK(mixed[3].result == 5000 && memcmp(mbuf[3], objs[3] + 100, 5000) == 0);
    struct ol_client_info info;
    CHECK_RC(ol_client_head(c, bucket, mkeys[2], &info), -OL_CLIENT_ENOKEY);

    /* More single-message ops than are sent at once (1024): 1500 HEADs
     * through submit / reap. */
    enum { NHEAD = 1500 };
    struct ol_client_op *heads = calloc(NHEAD, sizeof(*heads));
    struct ol_client_op **hp = calloc(NHEAD, sizeof(*hp));
    for (int i = 0; i < NHEAD; i++) {
        heads[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_HEAD,
                                         .bucket = bucket,
                                         .key = keys[i % NOBJ],
                                         .user_data = (uint64_t)i};
        hp[i] = &heads[i];
    }
    CHECK_RC(ol_client_submit(c, hp, NHEAD), NHEAD);
    int hseen = 0, hok = 0;
    for (int spins = 0; hseen < NHEAD && spins < 2000; spins++) {
        int n = ol_client_reap(c, done, 1, 100, 20000);
        CHECK(n > 0);
        if (n <= 0)
            break;
        for (int j = 0; j < n; j++)
            hok +=
                done[j]->result == 0 && done[j]->info.size == OBJ && done[j]->info.etag[0] == '"';
        hseen += n;
    }
    CHECK_RC(hseen, NHEAD);
    CHECK_RC(hok, NHEAD);
    free(heads);
    free(hp);

    /* Large ranges in a batch: 2 MiB ones (one message each, not grouped)
     * and the whole 64 MiB + 1 object (several messages). */
    {
        size_t big = (64u << 20) + 1;
        uint8_t *want = pattern(big, 6), *got = malloc(big), *r2 = malloc(8u << 20);
        struct ol_client_op bo[5];
        struct ol_client_op *bp[5];
        for (int i = 0; i < 4; i++) {
            bo[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_GET,
                                          .bucket = bucket,
                                          .key = "rt/67108865",
                                          .buf = r2 + ((size_t)i << 21),
                                          .offset = ((uint64_t)i * 7) << 20,
                                          .len = 2u << 20};
            bp[i] = &bo[i];
        }
        bo[4] = (struct ol_client_op){.opcode = OL_CLIENT_OP_GET,
                                      .bucket = bucket,
                                      .key = "rt/67108865",
                                      .buf = got,
                                      .len = big};
        bp[4] = &bo[4];
        CHECK_RC(ol_client_run(c, bp, 5), 0);
        for (int i = 0; i < 4; i++)
            CHECK(bo[i].result == 2 << 20 &&
                  memcmp(r2 + ((size_t)i << 21), want + (((size_t)i * 7) << 20), 2u << 20) == 0);
        CHECK(bo[4].result == (int64_t)big && memcmp(got, want, big) == 0);
        CHECK(bo[4].info.size == big);
        free(want);
        free(got);
        free(r2);
    }

    for (int i = 0; i < NOBJ; i++)
        free(objs[i]);
    free(seen);
    free(ops);
    free(pp);
    free(bufs);
}

static void listing(struct ol_client *c, const char *bucket)
{
    /* More keys than one LIST reply carries (1000), under two prefixes. */
    enum { NKEYS = 1003 };
    struct ol_client_op *ops = calloc(NKEYS + 10, sizeof(*ops));
    struct ol_client_op **pp = calloc(NKEYS + 10, sizeof(*pp));
    char(*keys)[32] = calloc(NKEYS + 10, 32);
    for (int i = 0; i < NKEYS + 10; i++) {
        if (i < NKEYS)
            snprintf(keys[i], 32, "list/a/%05d", i);
        else
            snprintf(keys[i], 32, "list/b/%d", i - NKEYS);
        ops[i] = (struct ol_client_op){
            .opcode = OL_CLIENT_OP_PUT, .bucket = bucket, .key = keys[i], .buf = "x", .len = 1};
        pp[i] = &ops[i];
    }
    CHECK_RC(ol_client_run(c, pp, NKEYS + 10), 0);
    int n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/a/", NULL, count_key, &n), NKEYS);
    CHECK_RC(n, NKEYS);
    n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/", NULL, count_key, &n), NKEYS + 10);
    n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/a/", "list/a/00952", count_key, &n), 50);
    n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/b/", NULL, stop_at_3, &n), 42);
    CHECK_RC(n, 3);
    n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/none/", NULL, count_key, &n), 0);

    CHECK_RC(ol_client_head(c, bucket, "list/a/00007", NULL), 0);
    CHECK_RC(ol_client_delete(c, bucket, "list/a/00007"), 0);
    CHECK_RC(ol_client_head(c, bucket, "list/a/00007", NULL), -OL_CLIENT_ENOKEY);
    CHECK_RC(ol_client_delete(c, bucket, "list/a/00007"), 0); /* gone: still 0, as S3 */
    n = 0;
    CHECK_RC(ol_client_list(c, bucket, "list/a/", NULL, count_key, &n), NKEYS - 1);
    free(ops);
    free(pp);
    free(keys);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: native_client_check ENDPOINT BUCKET [BIG_BYTES]\n");
        return 2;
    }
    const char *ep = argv[1], *bucket = argv[2];
    const char *ak = getenv("OPENLAKE_ACCESS_KEY"), *sk = getenv("OPENLAKE_SECRET_KEY");
    if (!ak || !sk) {
        fprintf(stderr, "set OPENLAKE_ACCESS_KEY and OPENLAKE_SECRET_KEY\n");
        return 2;
    }
    struct ol_client_opts o = {.endpoint = ep, .access_key = ak, .secret_key = sk};
    struct ol_client *c, *bad = NULL;
    int rc = ol_client_open(&o, &c);
    if (rc == -ECONNREFUSED) {
        fprintf(stderr, "no server at %s\n", ep);
        return 77;
    }
    CHECK_RC(rc, 0);
    if (rc < 0)
        return 1;

    /* Same user, wrong secret; a user that does not exist. */
    struct ol_client_opts w = o;
    w.secret_key = "not-the-secret";
    CHECK_RC(ol_client_open(&w, &bad), -EACCES);
    CHECK(bad == NULL);
    w = o;
    w.access_key = "no-such-user";
    CHECK_RC(ol_client_open(&w, &bad), -EACCES);

    CHECK_RC(ol_client_get(c, bucket, "never-put", 0, (uint8_t[4]){0}, 4, NULL), -OL_CLIENT_ENOKEY);
    CHECK_RC(ol_client_get(c, "no-such-bucket-here", "k", 0, (uint8_t[4]){0}, 4, NULL),
             -OL_CLIENT_ENOBUCKET);
    CHECK(ol_client_cuda_direct(c) == 0 || ol_client_cuda_direct(c) == 1);

    size_t sizes[] = {0, 1, 4096, 1 << 20, 64u << 20, (64u << 20) + 1};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        round_trip(c, bucket, sizes[i], i + 1, (int)(i & 1));
    if (argc > 3)
        round_trip(c, bucket, (size_t)strtoull(argv[3], NULL, 0), 77, 1);
    CHECK_RC(ol_client_get(c, bucket, "rt/4096", 5000, (uint8_t[4]){0}, 4, NULL), -ERANGE);

    batches(c, bucket);
    listing(c, bucket);

    ol_client_close(c);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
