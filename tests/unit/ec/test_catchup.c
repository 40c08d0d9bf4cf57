/* The catch-up log (ec/catchup.h) over an erasure set of in-memory drives:
 * writes, deletes and set_meta with a drive offline are logged; while the
 * drive stays away a drain backs off; when it returns the drain heals each
 * logged key onto it without listing anything (the drives' list calls are
 * counted); a failed rebuild stays queued and succeeds later; a full log
 * falls back to one whole-set heal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/hlc.h"
#include "core/loop.h"
#include "ec/catchup.h"
#include "ec/eset.h"
#include "ec/memdrive.h"

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

enum { K = 4, M = 2, N = K + M };

static struct ol_hlc hlc;

/* The memdrive's ops with the listing calls counted: a full scan lists,
 * the catch-up log must not. */
static struct ol_drive_ops counting_ops;
static unsigned list_keys_calls, list_buckets_calls;

static int count_list_keys(void *d, const char *bucket, const char *after, size_t alen,
                           struct ol_drive_entry *out, unsigned cap)
{
    list_keys_calls++;
    return ol_memdrive_ops.list_keys(d, bucket, after, alen, out, cap);
}

static int count_list_buckets(void *d, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    list_buckets_calls++;
    return ol_memdrive_ops.list_buckets(d, fn, ctx);
}

struct rig {
    struct ol_memdrive *md[N];
    struct ol_drive drv[N];
    struct ol_eset *es;
    struct ol_catchup *cu;
};

static void rig_open(struct rig *r, unsigned max_entries)
{
    memset(r, 0, sizeof(*r));
    counting_ops = ol_memdrive_ops;
    counting_ops.list_keys = count_list_keys;
    counting_ops.list_buckets = count_list_buckets;
    for (unsigned i = 0; i < N; i++) {
        if (ol_memdrive_create(&r->md[i]) < 0)
            abort();
        r->drv[i] = (struct ol_drive){&counting_ops, r->md[i]};
    }
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = K;
    cfg.m = M;
    cfg.unit_bytes = 4096;
    cfg.drives = r->drv;
    cfg.hlc = &hlc;
    cfg.heal_on_read = false;
    memcpy(cfg.deployment_id, "catchup-test-dep", 16);
    if (ol_eset_create(&cfg, &r->es) < 0)
        abort();
    struct ol_catchup_cfg cc = {.sets = &r->es,
                                .nsets = 1,
                                .width = N,
                                .drives = r->drv,
                                .max_entries = max_entries,
                                .retry_min_ms = 100,
                                .retry_max_ms = 400};
    if (ol_catchup_create(&cc, &r->cu) < 0)
        abort();
    ol_eset_set_missed_hook(r->es, ol_catchup_note, r->cu, 0);
}

static void rig_close(struct rig *r)
{
    ol_catchup_destroy(r->cu);
    ol_eset_destroy(r->es);
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_destroy(r->md[i]);
}

static void body(unsigned seed, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 131 + seed);
}

static int put(struct rig *r, const char *key, unsigned seed, size_t size)
{
    uint8_t *b = malloc(size);
    body(seed, b, size);
    int rc = ol_eset_put(r->es, "bkt", key, strlen(key), b, size, "etag", NULL);
    free(b);
    return rc;
}

/* The newest version drive i holds of key (a zero vid when none). */
static struct ol_version_id newest_on(struct rig *r, unsigned i, const char *key, uint32_t *flags)
{
    struct ol_shard_meta sm[4];
    struct ol_version_id none = {0};
    int n = ol_memdrive_ops.versions(r->md[i], "bkt", key, strlen(key), sm, 4, NULL);
    if (flags)
        *flags = n > 0 ? sm[0].flags : 0;
    return n > 0 ? sm[0].vid : none;
}

static bool same_vid(struct ol_version_id a, struct ol_version_id b)
{
    return ol_version_id_cmp(&a, &b) == 0;
}

static bool no_vid(struct ol_version_id a)
{
    struct ol_version_id z = {0};
    return same_vid(a, z);
}

static struct ol_catchup_stats stats(struct rig *r)
{
    struct ol_catchup_stats s;
    ol_catchup_stats(r->cu, &s);
    return s;
}

/* Writes with drive 1 away are logged; they drain when it is back, with no
 * listing, and drive 1 then holds every key's newest version. */
static void test_drain(void)
{
    struct rig r;
    rig_open(&r, 0);
    char key[32];
    /* A healthy write owes nothing. */
    CHECK_RC(put(&r, "healthy", 1, 10000), 0);
    CHECK_EQ(stats(&r).queued, 0);
    CHECK_EQ(stats(&r).drives_down, 0);

    ol_memdrive_set_offline(r.md[1], true);
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%02u", i);
        CHECK_RC(put(&r, key, i, 1000 + i * 997), 0);
    }
    /* A second miss of one key folds into its entry. */
    CHECK_RC(put(&r, "k00", 99, 5000), 0);
    /* A delete (marker) and a set_meta are writes too. */
    CHECK_RC(put(&r, "gone", 7, 3000), 0);
    CHECK_RC(ol_eset_delete(r.es, "bkt", "gone", 4), 0);
    CHECK_RC(ol_eset_set_meta(r.es, "bkt", "healthy", 7, NULL, "meta", 4), 0);
    struct ol_catchup_stats s = stats(&r);
    CHECK_EQ(s.queued, 22);
    CHECK_EQ(s.merged, 2);
    CHECK_EQ(s.pending, 22);
    CHECK_EQ(s.drives_down, 1);

    /* Still away: a drain heals nothing; the first heal finds the drive
     * silent and backs it off, so the other entries are not tried. */
    uint64_t now = ol_now_ms() + 1000;
    struct ol_memdrive_stats ms;
    ol_memdrive_stats_reset(r.md[0]);
    CHECK_RC(ol_catchup_drain(r.cu, now, 1000), 0);
    ol_memdrive_stats(r.md[0], &ms);
    CHECK_EQ(ms.versions, 1);
    CHECK_EQ(stats(&r).pending, 22);
    /* Backed off: not due right after. */
    CHECK(!ol_catchup_due(r.cu, now + 1));
    CHECK(ol_catchup_due(r.cu, now + 10000));

    /* Back: drive_back makes it due now; one drain heals every key. */
    ol_memdrive_set_offline(r.md[1], false);
    ol_catchup_drive_back(r.cu, 0, 1);
    CHECK(ol_catchup_due(r.cu, now + 1));
    list_keys_calls = list_buckets_calls = 0;
    CHECK_RC(ol_catchup_drain(r.cu, now + 1, 1000), 22);
    CHECK_EQ(list_keys_calls, 0);
    CHECK_EQ(list_buckets_calls, 0);
    s = stats(&r);
    CHECK_EQ(s.pending, 0);
    CHECK_EQ(s.healed, 22);
    CHECK_EQ(s.drives_down, 0);
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%02u", i);
        CHECK(same_vid(newest_on(&r, 1, key, NULL), newest_on(&r, 0, key, NULL)));
        CHECK(!no_vid(newest_on(&r, 1, key, NULL)));
    }
    /* The marker reached drive 1, or the heal removed the key everywhere. */
    uint32_t fl = 0;
    struct ol_version_id g = newest_on(&r, 1, "gone", &fl);
    CHECK(no_vid(g) || (fl & OL_SHARD_DELETE_MARKER));
    /* The blob set meanwhile is on drive 1 too. */
    char mb[16];
    size_t ml = 0;
    struct ol_eset_obj o;
    ol_memdrive_set_offline(r.md[0], true);
    ol_memdrive_set_offline(r.md[2], true);
    CHECK_RC(ol_eset_stat_meta(r.es, "bkt", "healthy", 7, NULL, &o, mb, sizeof(mb), &ml), 0);
    CHECK(ml == 4 && memcmp(mb, "meta", 4) == 0);
    ol_memdrive_set_offline(r.md[0], false);
    ol_memdrive_set_offline(r.md[2], false);
    /* Nothing left for a full heal to rebuild. */
    struct ol_eset_heal_stats hs = {0};
    CHECK_RC(ol_eset_heal_all(r.es, &hs), 0);
    CHECK_EQ(hs.shards_rebuilt, 0);
    rig_close(&r);
}

/* A drive that answers but whose rebuild fails keeps its entry, which is
 * retried after its backoff and then succeeds. */
static void test_retry(void)
{
    struct rig r;
    rig_open(&r, 0);
    ol_memdrive_set_offline(r.md[3], true);
    CHECK_RC(put(&r, "x", 3, 20000), 0);
    ol_memdrive_set_offline(r.md[3], false);
    ol_memdrive_fail_nth(r.md[3], 1); /* the rebuild's shard_begin */
    uint64_t now = ol_now_ms() + 1000;
    CHECK_RC(ol_catchup_drain(r.cu, now, 10), 0);
    struct ol_catchup_stats s = stats(&r);
    CHECK_EQ(s.pending, 1);
    CHECK_EQ(s.retries, 1);
    CHECK_EQ(s.drives_down, 0); /* it answered */
    /* Its own backoff: not before retry_min_ms. */
    CHECK_RC(ol_catchup_drain(r.cu, now + 1, 10), 0);
    CHECK_EQ(stats(&r).retries, 1);
    CHECK_RC(ol_catchup_drain(r.cu, now + 200, 10), 1);
    CHECK_EQ(stats(&r).pending, 0);
    CHECK(same_vid(newest_on(&r, 3, "x", NULL), newest_on(&r, 0, "x", NULL)));
    rig_close(&r);
}

/* A full log marks the set for a whole heal of the drive, which runs once
 * the drive answers and brings back every key, logged or not. */
static void test_overflow(void)
{
    struct rig r;
    rig_open(&r, 4);
    char key[32];
    ol_memdrive_set_offline(r.md[5], true);
    for (unsigned i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "o%02u", i);
        CHECK_RC(put(&r, key, i, 777 * (i + 1)), 0);
    }
    struct ol_catchup_stats s = stats(&r);
    CHECK_EQ(s.queued, 4);
    CHECK_EQ(s.overflowed, 6);
    uint64_t now = ol_now_ms() + 1000;
    /* Away: the probe fails, no heal runs. */
    CHECK_RC(ol_catchup_drain(r.cu, now, 100), 0);
    CHECK_EQ(stats(&r).full_heals, 0);
    ol_memdrive_set_offline(r.md[5], false);
    ol_catchup_drive_back(r.cu, 0, 5);
    list_keys_calls = 0;
    (void)ol_catchup_drain(r.cu, now + 1, 100);
    s = stats(&r);
    CHECK_EQ(s.full_heals, 1);
    CHECK(list_keys_calls > 0); /* the fallback is the full scan */
    CHECK_EQ(s.pending, 0);
    for (unsigned i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "o%02u", i);
        CHECK(same_vid(newest_on(&r, 5, key, NULL), newest_on(&r, 0, key, NULL)));
    }
    /* The mark is spent: a later drain scans nothing. */
    list_keys_calls = 0;
    CHECK_RC(ol_catchup_drain(r.cu, now + 2, 100), 0);
    CHECK_EQ(list_keys_calls, 0);
    CHECK_EQ(stats(&r).full_heals, 1);
    rig_close(&r);
}

/* Two drives missing different writes: each entry names its own. */
static void test_two_drives(void)
{
    struct rig r;
    rig_open(&r, 0);
    ol_memdrive_set_offline(r.md[0], true);
    CHECK_RC(put(&r, "a", 1, 4000), 0);
    ol_memdrive_set_offline(r.md[0], false);
    ol_memdrive_set_offline(r.md[4], true);
    CHECK_RC(put(&r, "b", 2, 4000), 0);
    /* Drive 0 is back, 4 is not: "a" heals, "b" waits. */
    uint64_t now = ol_now_ms() + 1000;
    CHECK_RC(ol_catchup_drain(r.cu, now, 10), 1);
    CHECK_EQ(stats(&r).pending, 1);
    CHECK(same_vid(newest_on(&r, 0, "a", NULL), newest_on(&r, 1, "a", NULL)));
    ol_memdrive_set_offline(r.md[4], false);
    CHECK_RC(ol_catchup_drain(r.cu, now + 1000, 10), 1);
    CHECK_EQ(stats(&r).pending, 0);
    CHECK(same_vid(newest_on(&r, 4, "b", NULL), newest_on(&r, 1, "b", NULL)));
    rig_close(&r);
}

int main(void)
{
    ol_hlc_init(&hlc, 3, 0x5eed, NULL, NULL);
    test_drain();
    test_retry();
    test_overflow();
    test_two_drives();
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
