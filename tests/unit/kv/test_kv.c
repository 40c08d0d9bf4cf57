/* The KV-cache store (kv/kv.h): put/get/dedup, bad arguments, LRU eviction
 * order, pins under memory pressure and their leases, watermarks, spill to
 * disk and back, the disk tier's own LRU, corrupted spill files (a miss,
 * never wrong bytes), and a few threads at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kv/kv.h"

/* A block of LEN bytes is charged exactly 4 KiB in either tier. */
enum { LEN = 4096 - OL_KV_ENTRY_BYTES, UNIT = 4096 };
_Static_assert(OL_KV_MEM_CHARGE(LEN) == UNIT && OL_KV_DISK_CHARGE(LEN) == UNIT, "test sizes");

static void key_of(unsigned i, uint8_t k[32])
{
    memset(k, 0, 32);
    memcpy(k, &i, sizeof(i));
    k[31] = 0x5a;
}

static void fill(unsigned i, uint8_t *b, size_t n)
{
    for (size_t j = 0; j < n; j++)
        b[j] = (uint8_t)(i * 131 + j * 7 + (j >> 8));
}

static int put(struct ol_kv *kv, unsigned i)
{
    uint8_t k[32], b[LEN];
    key_of(i, k);
    fill(i, b, sizeof(b));
    return ol_kv_put(kv, k, 32, b, sizeof(b));
}

/* 0: a hit with the right bytes; -ENOENT: a miss; 99: wrong bytes. */
static int get(struct ol_kv *kv, unsigned i)
{
    uint8_t k[32], b[LEN], want[LEN];
    uint64_t size = 0;
    key_of(i, k);
    int rc = ol_kv_get(kv, k, 32, b, sizeof(b), &size);
    if (rc < 0)
        return rc;
    fill(i, want, sizeof(want));
    return size == LEN && memcmp(b, want, LEN) == 0 ? 0 : 99;
}

static int has(struct ol_kv *kv, unsigned i, uint32_t lease_ms)
{
    uint8_t k[32];
    key_of(i, k);
    return ol_kv_contains(kv, k, 32, lease_ms);
}

static int release(struct ol_kv *kv, unsigned i)
{
    uint8_t k[32];
    key_of(i, k);
    return ol_kv_release(kv, k, 32);
}

static struct ol_kv *mk(uint64_t mem_units, uint64_t disk_units, const char *dir, unsigned high,
                        unsigned low, bool no_promote)
{
    struct ol_kv_opts o = {.memory_bytes = mem_units * UNIT,
                           .disk_bytes = disk_units * UNIT,
                           .dir = dir,
                           .high_pct = high,
                           .low_pct = low,
                           .no_promote = no_promote};
    struct ol_kv *kv = NULL;
    int rc = ol_kv_create(&o, &kv);
    CHECK_RC(rc, 0);
    if (rc < 0)
        exit(1);
    return kv;
}

static void test_basic(void)
{
    struct ol_kv *kv = mk(64, 0, NULL, 100, 100, false);
    CHECK_RC(put(kv, 1), 0);
    CHECK_RC(put(kv, 2), 0);
    CHECK_RC(put(kv, 1), 1); /* dedup */
    CHECK_RC(get(kv, 1), 0);
    CHECK_RC(get(kv, 2), 0);
    CHECK_RC(get(kv, 3), -ENOENT);
    CHECK_RC(has(kv, 2, 0), 1);
    CHECK_RC(has(kv, 3, 0), 0);
    /* A buffer too small: -EMSGSIZE and the size, nothing dropped. */
    uint8_t k[32], small[16];
    uint64_t size = 0;
    key_of(1, k);
    CHECK_RC(ol_kv_get(kv, k, 32, small, sizeof(small), &size), -EMSGSIZE);
    CHECK(size == LEN);
    CHECK_RC(get(kv, 1), 0);
    /* Opaque keys of any length 1..128; others refused. */
    uint8_t big[OL_KV_MAX_KEY + 1], v[3] = {1, 2, 3};
    memset(big, 'k', sizeof(big));
    CHECK_RC(ol_kv_put(kv, big, OL_KV_MAX_KEY, v, 3), 0);
    CHECK_RC(ol_kv_put(kv, big, OL_KV_MAX_KEY - 1, v, 3), 0); /* another key */
    CHECK_RC(ol_kv_put(kv, big, 1, v, 3), 0);
    CHECK_RC(ol_kv_put(kv, big, OL_KV_MAX_KEY + 1, v, 3), -EINVAL);
    CHECK_RC(ol_kv_put(kv, big, 0, v, 3), -EINVAL);
    CHECK_RC(ol_kv_get(kv, big, 0, small, sizeof(small), &size), -EINVAL);
    CHECK_RC(ol_kv_contains(kv, big, OL_KV_MAX_KEY + 1, 0), -EINVAL);
    CHECK_RC(ol_kv_release(kv, NULL, 4), -EINVAL);
    uint8_t three[3];
    CHECK_RC(ol_kv_get(kv, big, 1, three, sizeof(three), &size), 0);
    CHECK(size == 3 && memcmp(three, v, 3) == 0);
    /* Empty blocks are blocks. */
    CHECK_RC(ol_kv_put(kv, "e", 1, NULL, 0), 0);
    CHECK_RC(ol_kv_get(kv, "e", 1, NULL, 0, &size), 0);
    CHECK(size == 0);
    /* Sizes: past the block limit, past the whole memory tier. */
    CHECK_RC(ol_kv_put(kv, "x", 1, v, (size_t)OL_KV_MAX_VALUE + 1), -E2BIG);
    uint8_t *huge = calloc(1, 65 * UNIT);
    CHECK_RC(ol_kv_put(kv, "x", 1, huge, 65 * UNIT), -E2BIG);
    free(huge);
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.stored == 6 && st.dedup == 1 && st.put_refused == 2);
    CHECK(st.mem_hits == 5 && st.mem_misses == 1 && st.disk_misses == 0);
    CHECK(st.mem_entries == 6 && st.mem_bytes == 2 * UNIT + 3 * OL_KV_MEM_CHARGE(3) +
                                                    OL_KV_MEM_CHARGE(0));
    /* Bad options. */
    struct ol_kv *bad = NULL;
    struct ol_kv_opts o = {.memory_bytes = 0};
    CHECK_RC(ol_kv_create(&o, &bad), -EINVAL);
    o = (struct ol_kv_opts){.memory_bytes = UNIT, .high_pct = 50, .low_pct = 60};
    CHECK_RC(ol_kv_create(&o, &bad), -EINVAL);
    o = (struct ol_kv_opts){.memory_bytes = UNIT, .disk_bytes = UNIT};
    CHECK_RC(ol_kv_create(&o, &bad), -EINVAL); /* a disk tier needs a dir */
    ol_kv_destroy(kv);
}

/* Memory only: the least recently used block goes first; gets and
 * lookups count as uses. */
static void test_lru_order(void)
{
    struct ol_kv *kv = mk(4, 0, NULL, 100, 100, false);
    for (unsigned i = 1; i <= 4; i++)
        CHECK_RC(put(kv, i), 0);
    CHECK_RC(get(kv, 1), 0); /* order now, oldest first: 2 3 4 1 */
    CHECK_RC(put(kv, 5), 0); /* evicts 2 */
    CHECK_RC(has(kv, 2, 0), 0);
    CHECK_RC(has(kv, 3, 0), 1); /* 4 1 5 3 */
    CHECK_RC(put(kv, 6), 0);    /* evicts 4 */
    CHECK_RC(has(kv, 4, 0), 0);
    CHECK_RC(put(kv, 1), 1); /* a dedup is a use: 5 3 6 1 */
    CHECK_RC(put(kv, 7), 0); /* evicts 5 */
    CHECK_RC(has(kv, 5, 0), 0);
    CHECK_RC(get(kv, 2), -ENOENT); /* gone: a miss, never an error */
    for (unsigned i = 1; i <= 7; i++)
        if (i != 2 && i != 4 && i != 5)
            CHECK_RC(get(kv, i), 0);
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.evictions == 3 && st.mem_entries == 4 && st.mem_bytes == 4 * UNIT);
    CHECK(st.spills == 0 && st.disk_entries == 0);
    ol_kv_destroy(kv);
}

/* Pins hold under pressure until released or their lease runs out; when
 * everything is pinned a put has no room. */
static void test_pins(void)
{
    struct ol_kv *kv = mk(4, 0, NULL, 100, 100, false);
    for (unsigned i = 1; i <= 4; i++)
        CHECK_RC(put(kv, i), 0);
    CHECK_RC(has(kv, 1, 60000), 1); /* pinned twice */
    CHECK_RC(has(kv, 1, 60000), 1);
    CHECK_RC(has(kv, 2, 60000), 1);
    CHECK_RC(has(kv, 9, 60000), 0); /* absent: nothing pinned */
    /* Twenty puts through the two free places: 1 and 2 stay. */
    for (unsigned i = 10; i < 30; i++)
        CHECK_RC(put(kv, i), 0);
    CHECK_RC(get(kv, 1), 0);
    CHECK_RC(get(kv, 2), 0);
    CHECK_RC(has(kv, 3, 0), 0);
    /* All four pinned: no room. */
    CHECK_RC(has(kv, 28, 60000), 1);
    CHECK_RC(has(kv, 29, 60000), 1);
    CHECK_RC(put(kv, 40), -ENOSPC);
    CHECK_RC(has(kv, 40, 0), 0);
    /* 2 released: it goes next (it is the least recently used unpinned). */
    CHECK_RC(release(kv, 2), 0);
    CHECK_RC(release(kv, 2), -ENOENT); /* no pin left */
    CHECK_RC(release(kv, 3), -ENOENT); /* absent */
    CHECK_RC(put(kv, 40), 0);
    CHECK_RC(has(kv, 2, 0), 0);
    /* 1 had two pins: one release is not enough. */
    CHECK_RC(release(kv, 1), 0);
    CHECK_RC(release(kv, 28), 0);
    CHECK_RC(put(kv, 41), 0); /* evicts 28 (older than 40), not 1 */
    CHECK_RC(has(kv, 1, 0), 1);
    CHECK_RC(has(kv, 28, 0), 0);
    /* A short lease runs out by itself. */
    CHECK_RC(has(kv, 41, 30), 1);
    CHECK_RC(release(kv, 1), 0);
    usleep(80 * 1000);
    CHECK_RC(release(kv, 41), -ENOENT); /* its lease ran out */
    CHECK_RC(put(kv, 42), 0);
    CHECK_RC(put(kv, 43), 0);
    CHECK_RC(put(kv, 44), 0);
    CHECK_RC(has(kv, 41, 0), 0);
    CHECK_RC(has(kv, 1, 0), 0);
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.pins == 6 && st.releases == 4 && st.put_refused == 1);
    if (failures)
        fprintf(stderr, "pins %lu releases %lu refused %lu\n", (unsigned long)st.pins,
                (unsigned long)st.releases, (unsigned long)st.put_refused);
    ol_kv_destroy(kv);
}

/* Watermarks: past the high one, evict down to the low one. */
static void test_watermarks(void)
{
    struct ol_kv *kv = mk(10, 0, NULL, 100, 50, false);
    for (unsigned i = 1; i <= 10; i++)
        CHECK_RC(put(kv, i), 0);
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.evictions == 0);
    CHECK_RC(put(kv, 11), 0); /* 11 units: down to 5, its own included */
    ol_kv_stats(kv, &st);
    CHECK(st.evictions == 6 && st.mem_entries == 5);
    for (unsigned i = 1; i <= 6; i++)
        CHECK_RC(has(kv, i, 0), 0);
    for (unsigned i = 7; i <= 11; i++)
        CHECK_RC(get(kv, i), 0);
    ol_kv_destroy(kv);
}

static unsigned count_files(const char *dir)
{
    DIR *d = opendir(dir);
    unsigned n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".kvb") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Flips one byte at off in every spill file. */
static void corrupt_files(const char *dir, off_t off)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strstr(de->d_name, ".kvb"))
            continue;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        int fd = open(p, O_RDWR);
        uint8_t c = 0;
        if (fd >= 0 && pread(fd, &c, 1, off) == 1) {
            c ^= 0x40;
            CHECK(pwrite(fd, &c, 1, off) == 1);
        }
        if (fd >= 0)
            close(fd);
    }
    if (d)
        closedir(d);
}

/* Memory spills to disk; a get reads the block back (and promotes it); the
 * disk tier drops its own least recently used blocks. */
static void test_spill(const char *root)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/spill/a/b", root); /* made with its parents */
    struct ol_kv *kv = mk(3, 4, dir, 100, 100, false);
    for (unsigned i = 1; i <= 5; i++)
        CHECK_RC(put(kv, i), 0);
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.spills == 2 && st.evictions == 2 && st.disk_entries == 2);
    CHECK(count_files(dir) == 2);
    CHECK_RC(has(kv, 1, 0), 1); /* present in a tier: a match */
    CHECK_RC(put(kv, 2), 1);    /* ... and a dedup */
    /* 1 comes back from disk, right bytes, and is promoted: memory full, so
     * the oldest in memory (3) spills; 1 keeps its file. */
    CHECK_RC(get(kv, 1), 0);
    ol_kv_stats(kv, &st);
    CHECK(st.disk_hits == 1 && st.promotions == 1 && st.spills == 3 && st.disk_entries == 3);
    CHECK(count_files(dir) == 3);
    CHECK_RC(get(kv, 1), 0); /* now from memory */
    ol_kv_stats(kv, &st);
    CHECK(st.disk_hits == 1 && st.mem_hits >= 1);
    /* Fill on: disk holds 4 units; the oldest disk blocks get dropped. */
    for (unsigned i = 6; i <= 12; i++)
        CHECK_RC(put(kv, i), 0);
    ol_kv_stats(kv, &st);
    CHECK(st.disk_entries <= 4 && st.disk_bytes <= 4 * UNIT && st.disk_drops > 0);
    CHECK(count_files(dir) == st.disk_entries);
    CHECK_RC(get(kv, 2), -ENOENT); /* spilled early, dropped since: a miss */
    ol_kv_stats(kv, &st);
    CHECK(st.disk_misses >= 1);
    /* Whatever is present reads back right. */
    unsigned hits = 0;
    for (unsigned i = 1; i <= 12; i++) {
        int rc = get(kv, i);
        CHECK(rc == 0 || rc == -ENOENT);
        hits += rc == 0;
    }
    ol_kv_stats(kv, &st);
    if (hits < 4)
        fprintf(stderr, "hits %u: mem %lu disk %lu drops %lu spill errors %lu\n", hits,
                (unsigned long)st.mem_entries, (unsigned long)st.disk_entries,
                (unsigned long)st.disk_drops, (unsigned long)st.spill_errors);
    CHECK(hits >= 4); /* the gets promote and spill, so not all 7 */
    ol_kv_destroy(kv);
    CHECK(count_files(dir) == 0); /* a cache: its files go with it */
}

/* Corrupted spill files: a miss, the block dropped, never wrong bytes. */
static void test_corrupt(const char *root)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/corrupt", root);
    struct ol_kv *kv = mk(2, 8, dir, 100, 100, true);
    for (unsigned i = 1; i <= 4; i++)
        CHECK_RC(put(kv, i), 0); /* 1 and 2 spilled */
    CHECK(count_files(dir) == 2);
    CHECK_RC(get(kv, 1), 0); /* fine before (no promotion: stays on disk) */
    corrupt_files(dir, OL_KV_FILE_HDR_BYTES + 100); /* block bytes */
    CHECK_RC(get(kv, 1), -ENOENT);
    CHECK_RC(get(kv, 1), -ENOENT);
    CHECK_RC(has(kv, 1, 0), 0); /* dropped */
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.corrupt == 1);
    /* A damaged header is a miss too. */
    corrupt_files(dir, 40); /* in the key */
    CHECK_RC(get(kv, 2), -ENOENT);
    CHECK_RC(has(kv, 2, 0), 0);
    ol_kv_stats(kv, &st);
    CHECK(st.corrupt == 2 && st.disk_entries == 0 && st.disk_bytes == 0);
    CHECK(count_files(dir) == 0);
    /* A file that vanished: a miss. */
    CHECK_RC(put(kv, 5), 0); /* spills 3 */
    CHECK(count_files(dir) == 1);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -f '%s'/*.kvb", dir);
    CHECK(system(cmd) == 0);
    CHECK_RC(get(kv, 3), -ENOENT);
    /* The memory tier is untouched. */
    CHECK_RC(get(kv, 4), 0);
    CHECK_RC(get(kv, 5), 0);
    ol_kv_destroy(kv);
}

/* A restart starts empty: old spill files are removed, other files kept. */
static void test_restart(const char *root)
{
    char dir[512], other[600];
    snprintf(dir, sizeof(dir), "%s/restart", root);
    struct ol_kv *kv = mk(1, 8, dir, 100, 100, false);
    for (unsigned i = 1; i <= 3; i++)
        CHECK_RC(put(kv, i), 0);
    CHECK(count_files(dir) == 2);
    /* Simulate a crash: copy the files aside and back after destroy. */
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s.bak'", dir, dir);
    CHECK(system(cmd) == 0);
    ol_kv_destroy(kv);
    snprintf(cmd, sizeof(cmd), "cp -a '%s.bak'/. '%s'/", dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(other, sizeof(other), "%s/keep.txt", dir);
    FILE *f = fopen(other, "w");
    if (f)
        fclose(f);
    CHECK(count_files(dir) == 2);
    kv = mk(1, 8, dir, 100, 100, false);
    CHECK(count_files(dir) == 0);
    CHECK(access(other, F_OK) == 0);
    CHECK_RC(get(kv, 1), -ENOENT);
    ol_kv_destroy(kv);
}

/* Threads at once on a small store with a disk tier: every hit is right. */
struct worker {
    struct ol_kv *kv;
    unsigned seed, wrong, errors, refused;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (unsigned n = 0; n < 3000; n++) {
        w->seed = w->seed * 1103515245u + 12345u;
        unsigned i = (w->seed >> 16) % 40, op = (w->seed >> 8) % 4;
        int rc;
        if (op == 0) {
            rc = put(w->kv, i);
            w->refused += rc == -ENOSPC;
            w->errors += rc < 0 && rc != -ENOSPC;
        } else if (op == 1) {
            rc = has(w->kv, i, (w->seed & 15) == 0 ? 2 : 0);
            w->errors += rc < 0;
        } else if (op == 2) {
            release(w->kv, i);
        } else {
            rc = get(w->kv, i);
            w->wrong += rc == 99;
            w->errors += rc < 0 && rc != -ENOENT;
        }
    }
    return NULL;
}

static void test_threads(const char *root)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/threads", root);
    struct ol_kv *kv = mk(8, 16, dir, 90, 70, false);
    struct worker w[4];
    pthread_t t[4];
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (struct worker){.kv = kv, .seed = i * 7919 + 1};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        /* -ENOSPC is possible (everything in memory pinned for a moment);
         * no other error, and never wrong bytes. */
        CHECK(w[i].wrong == 0 && w[i].errors == 0);
        CHECK(w[i].refused < 300);
    }
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    CHECK(st.mem_bytes <= 8 * UNIT && st.disk_bytes <= 16 * UNIT);
    CHECK(st.corrupt == 0 && st.spills > 0);
    CHECK(count_files(dir) == st.disk_entries);
    ol_kv_destroy(kv);
}

int main(void)
{
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "kv") != 0)
        return 77;
    test_basic();
    test_lru_order();
    test_pins();
    test_watermarks();
    test_spill(root);
    test_corrupt(root);
    test_restart(root);
    test_threads(root);
    check_rm_rf(root);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
