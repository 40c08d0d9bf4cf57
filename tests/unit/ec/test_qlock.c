/* Drive locks (ec/drive.h lock / unlock, ec/locktab.h) and the quorum lock
 * over a set's drives (ec/qlock.h).
 *
 *   table      one drive's rules on a memdrive: grant, re-lock by the owner
 *              (renews), another owner refused, unlock by a stranger a
 *              no-op, expiry, bad arguments, a full table, wipe forgets
 *   storedrive the same rules on a drive over a real store; an offline
 *              drive grants nothing
 *   quorum     6 drives: a majority (4) wins; with 2 down it still does,
 *              with 3 down it cannot (-EBUSY at the deadline, and nothing
 *              stays held); a stranger holding 3 votes blocks it; a holder
 *              that never unlocks blocks for its ttl only
 *   contend    two "nodes" (two erasure sets over the same 6 memdrives,
 *              clocks of their own) race conditional creates of the same
 *              fresh keys, round after round: exactly one creates each key,
 *              and no two threads are ever inside the lock together
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/hlc.h"
#include "core/loop.h"
#include "ec/eset.h"
#include "ec/locktab.h"
#include "ec/memdrive.h"
#include "ec/qlock.h"
#include "ec/storedrive.h"
#include "store/store.h"

#include "check.h"

enum { N = 6 };

static const uint8_t A[OL_DRIVE_LOCK_OWNER] = {1, 2, 3};
static const uint8_t B[OL_DRIVE_LOCK_OWNER] = {9, 8, 7};
static const uint8_t ZERO[OL_DRIVE_LOCK_OWNER] = {0};

/* The rules every drive keeps (drive.h), on d. */
static void drive_rules(struct ol_drive d)
{
    const struct ol_drive_ops *o = d.ops;
    CHECK(o->lock && o->unlock);
    CHECK_RC(o->lock(d.d, "b\0k", 3, A, 10000), 0);
    CHECK_RC(o->lock(d.d, "b\0k", 3, A, 10000), 0); /* idempotent */
    CHECK_RC(o->lock(d.d, "b\0k", 3, B, 10000), -EBUSY);
    CHECK_RC(o->lock(d.d, "b\0j", 3, B, 10000), 0); /* names are whole: another name */
    CHECK_RC(o->lock(d.d, "b", 1, B, 10000), 0);    /* a prefix is another name */
    CHECK_RC(o->unlock(d.d, "b\0k", 3, B), 0);      /* a stranger's unlock: no effect */
    CHECK_RC(o->lock(d.d, "b\0k", 3, B, 10000), -EBUSY);
    CHECK_RC(o->unlock(d.d, "b\0k", 3, A), 0);
    CHECK_RC(o->unlock(d.d, "b\0k", 3, A), 0); /* twice: harmless */
    CHECK_RC(o->lock(d.d, "b\0k", 3, B, 10000), 0);
    CHECK_RC(o->unlock(d.d, "b\0k", 3, B), 0);
    CHECK_RC(o->unlock(d.d, "b\0j", 3, B), 0);
    CHECK_RC(o->unlock(d.d, "b", 1, B), 0);

    /* Expiry: a holder that never unlocks blocks for its ttl only; a
     * re-lock renews the ttl.  (Checks that depend on when a sleep ends
     * are made only when it ended in time: the machine may be loaded.) */
    CHECK_RC(o->lock(d.d, "exp", 3, A, 200), 0);
    usleep(150 * 1000);
    uint64_t renewed = ol_now_ms();
    CHECK_RC(o->lock(d.d, "exp", 3, A, 200), 0); /* renewed: 200 ms from now */
    usleep(100 * 1000);
    int rc = o->lock(d.d, "exp", 3, B, 10000); /* >= 250 ms after the first lock */
    if (ol_now_ms() - renewed < 190)
        CHECK_RC(rc, -EBUSY);
    if (rc == -EBUSY) {
        usleep(250 * 1000);
        CHECK_RC(o->lock(d.d, "exp", 3, B, 10000), 0);
    }
    CHECK_RC(o->unlock(d.d, "exp", 3, A), 0); /* A's lock ran out: B's stays */
    CHECK_RC(o->lock(d.d, "exp", 3, A, 10000), -EBUSY);
    CHECK_RC(o->unlock(d.d, "exp", 3, B), 0);

    /* Arguments. */
    CHECK_RC(o->lock(d.d, "x", 0, A, 1000), -EINVAL);
    CHECK_RC(o->lock(d.d, "x", 1, ZERO, 1000), -EINVAL);
    CHECK_RC(o->lock(d.d, "x", 1, A, 0), -EINVAL);
    CHECK_RC(o->lock(d.d, "x", 1, A, OL_DRIVE_LOCK_TTL_MAX_MS + 1), -EINVAL);
    static char big[OL_DRIVE_LOCK_NAME_MAX + 1];
    memset(big, 'n', sizeof(big));
    CHECK_RC(o->lock(d.d, big, sizeof(big), A, 1000), -EINVAL);
    CHECK_RC(o->lock(d.d, big, sizeof(big) - 1, A, 1000), 0);
    CHECK_RC(o->unlock(d.d, big, sizeof(big) - 1, A), 0);
    CHECK_RC(o->unlock(d.d, "x", 1, ZERO), -EINVAL);
}

static void test_table(void)
{
    struct ol_memdrive *md;
    CHECK_RC(ol_memdrive_create(&md), 0);
    drive_rules(ol_memdrive_drive(md));
    /* wipe: a restarted drive remembers no lock. */
    struct ol_drive d = ol_memdrive_drive(md);
    CHECK_RC(d.ops->lock(d.d, "w", 1, A, 10000), 0);
    ol_memdrive_wipe(md);
    CHECK_RC(d.ops->lock(d.d, "w", 1, B, 10000), 0);
    /* offline: no vote. */
    ol_memdrive_set_offline(md, true);
    CHECK_RC(d.ops->lock(d.d, "o", 1, A, 10000), -EIO);
    ol_memdrive_set_offline(md, false);
    ol_memdrive_destroy(md);

    /* A full table refuses new names, and takes them again once one
     * expires. */
    struct ol_locktab *t;
    CHECK_RC(ol_locktab_create(3, &t), 0);
    CHECK_RC(ol_locktab_lock(t, "1", 1, A, 100, 1000), 0);
    CHECK_RC(ol_locktab_lock(t, "2", 1, A, 100, 1000), 0);
    CHECK_RC(ol_locktab_lock(t, "3", 1, A, 50, 1000), 0);
    CHECK_RC(ol_locktab_lock(t, "4", 1, A, 100, 1000), -ENOLCK);
    CHECK_RC(ol_locktab_lock(t, "1", 1, A, 100, 1010), 0); /* a held name renews */
    CHECK(ol_locktab_held(t, 1049) == 3);
    CHECK_RC(ol_locktab_lock(t, "4", 1, A, 100, 1050), 0); /* "3" expired at 1050 */
    CHECK(ol_locktab_held(t, 1050) == 3);
    /* Names taken over from expired holders unlock and relock as any. */
    CHECK_RC(ol_locktab_lock(t, "4", 1, B, 100, 1200), 0);
    CHECK_RC(ol_locktab_unlock(t, "4", 1, B), 0);
    CHECK_RC(ol_locktab_lock(t, "4", 1, A, 100, 1201), 0);
    ol_locktab_clear(t);
    CHECK(ol_locktab_held(t, 1201) == 0);
    ol_locktab_destroy(t);
}

static void test_storedrive(void)
{
    char root[64];
    if (check_mkdtemp(root, sizeof(root), "qlock") < 0)
        return;
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    so.map_bytes = 1ull << 28;
    so.max_loops = 1;
    so.segment_bytes = 8u << 20;
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, root, &so), 0);
    if (!st)
        return;
    struct ol_storedrive *sd;
    CHECK_RC(ol_storedrive_create(st, &sd), 0);
    struct ol_drive d = ol_storedrive_drive(sd);
    drive_rules(d);
    CHECK_RC(d.ops->lock(d.d, "o", 1, A, 10000), 0);
    ol_storedrive_set_offline(sd, true);
    CHECK_RC(d.ops->lock(d.d, "p", 1, A, 10000), -EIO);
    ol_storedrive_set_offline(sd, false);
    CHECK_RC(d.ops->lock(d.d, "o", 1, B, 10000), -EBUSY); /* kept while offline */
    ol_storedrive_destroy(sd);
    ol_store_close(st);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

static struct ol_memdrive *md[N];
static struct ol_drive drv[N];

static unsigned held_anywhere(const char *name, size_t nlen)
{
    /* A stranger's lock succeeds where nothing holds the name. */
    static const uint8_t probe[OL_DRIVE_LOCK_OWNER] = {0x55};
    unsigned held = 0;
    for (unsigned i = 0; i < N; i++) {
        int rc = drv[i].ops->lock(drv[i].d, name, nlen, probe, 1000);
        held += rc == -EBUSY;
        if (rc == 0)
            drv[i].ops->unlock(drv[i].d, name, nlen, probe);
    }
    return held;
}

static void test_quorum(void)
{
    struct ol_qlock_opts fast = {.wait_ms = 150};
    struct ol_qlock *l1 = NULL, *l2 = NULL;
    CHECK_RC(ol_qlock_acquire(drv, N, "b\0k", 3, &fast, &l1), 0);
    CHECK(l1 && ol_qlock_granted(l1) == N && ol_qlock_attempts(l1) == 1 && ol_qlock_valid(l1));
    CHECK_RC(ol_qlock_acquire(drv, N, "b\0k", 3, &fast, &l2), -EBUSY);
    CHECK(held_anywhere("b\0k", 3) == N); /* the loser gave back what it got */
    ol_qlock_release(l1);
    CHECK(held_anywhere("b\0k", 3) == 0);

    /* Two drives down: 4 of 6 is still a majority. */
    ol_memdrive_set_offline(md[1], true);
    ol_memdrive_set_offline(md[4], true);
    CHECK_RC(ol_qlock_acquire(drv, N, "b\0k", 3, &fast, &l1), 0);
    CHECK(l1 && ol_qlock_granted(l1) == 4);
    CHECK_RC(ol_qlock_acquire(drv, N, "b\0k", 3, &fast, &l2), -EBUSY);
    ol_qlock_release(l1);
    /* Three down: 3 of 6 is not, for anyone. */
    ol_memdrive_set_offline(md[5], true);
    uint64_t t0 = ol_now_ms();
    CHECK_RC(ol_qlock_acquire(drv, N, "b\0k", 3, &fast, &l1), -EBUSY);
    uint64_t took = ol_now_ms() - t0;
    CHECK(took >= 140 && took < 2000); /* retried until the deadline, then gave up */
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_offline(md[i], false);
    CHECK(held_anywhere("b\0k", 3) == 0);

    /* A stranger holding 3 votes (half: not a lock) still blocks a
     * majority for anyone else. */
    for (unsigned i = 0; i < 3; i++)
        CHECK_RC(drv[i].ops->lock(drv[i].d, "s", 1, B, 10000), 0);
    CHECK_RC(ol_qlock_acquire(drv, N, "s", 1, &fast, &l1), -EBUSY);
    CHECK(held_anywhere("s", 1) == 3);
    for (unsigned i = 0; i < 3; i++)
        drv[i].ops->unlock(drv[i].d, "s", 1, B);
    CHECK_RC(ol_qlock_acquire(drv, N, "s", 1, &fast, &l1), 0);
    ol_qlock_release(l1);

    /* A holder that crashed (never unlocks) blocks for its ttl only. */
    struct ol_qlock_opts short_ttl = {.ttl_ms = 100, .wait_ms = 150};
    CHECK_RC(ol_qlock_acquire(drv, N, "c", 1, &short_ttl, &l1), 0);
    struct ol_qlock_opts patient = {.wait_ms = 3000};
    t0 = ol_now_ms();
    CHECK_RC(ol_qlock_acquire(drv, N, "c", 1, &patient, &l2), 0);
    took = ol_now_ms() - t0;
    CHECK(took >= 80 && took < 2500);
    CHECK(l2 && ol_qlock_attempts(l2) > 1);
    usleep(100 * 1000);
    CHECK(!ol_qlock_valid(l1)); /* past 9/10 of its ttl */
    ol_qlock_release(l1);       /* the "crashed" one's unlock leaves l2's lock */
    CHECK(held_anywhere("c", 1) == N);
    ol_qlock_release(l2);

    /* Fewer than a majority of drives with lock ops: no lock at all. */
    struct ol_drive_ops nolock = *drv[0].ops;
    nolock.lock = NULL;
    nolock.unlock = NULL;
    struct ol_drive mixed[N];
    for (unsigned i = 0; i < N; i++)
        mixed[i] = i < 3 ? (struct ol_drive){&nolock, md[i]} : drv[i];
    CHECK_RC(ol_qlock_acquire(mixed, N, "m", 1, &fast, &l1), -EOPNOTSUPP);
    CHECK_RC(ol_qlock_acquire(drv, N, "", 0, &fast, &l1), -EINVAL);
    CHECK_RC(ol_qlock_acquire(drv, 0, "m", 1, &fast, &l1), -EINVAL);
}

/* ---- two nodes racing conditional creates ---- */

enum { ROUNDS = 40, PER_NODE = 2 };

static struct ol_eset *node_set[2];
static pthread_barrier_t bar;
static atomic_int inside, overlaps;
static atomic_int wins[ROUNDS], busy;

struct racer {
    unsigned node, id;
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    struct ol_eset *es = node_set[r->node];
    const struct ol_drive *d;
    unsigned n = ol_eset_drives(es, &d);
    for (unsigned round = 0; round < ROUNDS; round++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "key-%u", round);
        char name[40] = "bkt";
        memcpy(name + 4, key, (size_t)kl);
        pthread_barrier_wait(&bar);
        struct ol_qlock *l;
        struct ol_qlock_opts o = {.wait_ms = 5000, .backoff_min_ms = 1, .backoff_max_ms = 20};
        int rc = ol_qlock_acquire(d, n, name, 4 + (size_t)kl, &o, &l);
        if (rc < 0) {
            atomic_fetch_add(&busy, 1);
            continue;
        }
        if (atomic_fetch_add(&inside, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        /* If-None-Match: *: create only when the key reads as absent. */
        struct ol_eset_obj o2;
        rc = ol_eset_stat(es, "bkt", key, (size_t)kl, NULL, &o2);
        if (rc == -OL_ENOKEY) {
            char body[32];
            int bl = snprintf(body, sizeof(body), "node%u-%u", r->node, r->id);
            if (ol_qlock_valid(l) &&
                ol_eset_put(es, "bkt", key, (size_t)kl, body, (size_t)bl, "e", NULL) == 0)
                atomic_fetch_add(&wins[round], 1);
        }
        atomic_fetch_sub(&inside, 1);
        ol_qlock_release(l);
    }
    return NULL;
}

static void test_contend(void)
{
    struct ol_hlc hlc[2];
    for (unsigned s = 0; s < 2; s++) {
        ol_hlc_init(&hlc[s], 10 + s, 77 + s, NULL, NULL);
        struct ol_eset_cfg cfg;
        ol_eset_cfg_default(&cfg);
        cfg.k = 4;
        cfg.m = 2;
        cfg.unit_bytes = 4096;
        cfg.drives = drv;
        cfg.hlc = &hlc[s];
        memcpy(cfg.deployment_id, "qlock-test-depl!", 16);
        CHECK_RC(ol_eset_create(&cfg, &node_set[s]), 0);
    }
    /* Slow drives widen the window between the check and the commit. */
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_latency_us(md[i], 200);
    pthread_barrier_init(&bar, NULL, 2 * PER_NODE);
    pthread_t th[2 * PER_NODE];
    struct racer rs[2 * PER_NODE];
    for (unsigned i = 0; i < 2 * PER_NODE; i++) {
        rs[i] = (struct racer){.node = i % 2, .id = i};
        pthread_create(&th[i], NULL, racer_main, &rs[i]);
    }
    for (unsigned i = 0; i < 2 * PER_NODE; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    CHECK(atomic_load(&overlaps) == 0);
    CHECK(atomic_load(&busy) == 0);
    unsigned bad = 0;
    for (unsigned r = 0; r < ROUNDS; r++)
        bad += atomic_load(&wins[r]) != 1;
    CHECK(bad == 0);
    if (bad)
        fprintf(stderr, "contend: %u of %u rounds without exactly one winner\n", bad, ROUNDS);
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_set_latency_us(md[i], 0);
    for (unsigned s = 0; s < 2; s++)
        ol_eset_destroy(node_set[s]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (unsigned i = 0; i < N; i++) {
        if (ol_memdrive_create(&md[i]) < 0)
            return 1;
        drv[i] = ol_memdrive_drive(md[i]);
    }
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"table", test_table},
        {"storedrive", test_storedrive},
        {"quorum", test_quorum},
        {"contend", test_contend},
    };
    for (unsigned i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int before = failures;
        uint64_t t0 = ol_now_ms();
        tests[i].fn();
        printf("%s: %s (%llu ms)\n", tests[i].name, failures == before ? "ok" : "FAILED",
               (unsigned long long)(ol_now_ms() - t0));
    }
    for (unsigned i = 0; i < N; i++)
        ol_memdrive_destroy(md[i]);
    return failures ? 1 : 0;
}
