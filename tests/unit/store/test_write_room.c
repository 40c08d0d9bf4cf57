/* Unit test of the store writer's zero-copy API (ol_store_write_room,
 * ol_store_write_advance, ol_store_write_set_release): bytes received straight
 * into the writer's buffer come back intact, and a buffer that held appended
 * bytes is released to the caller (still unchanged) before the writer
 * overwrites or frees it, on a plain thread (synchronous writes) and in a
 * fiber (double-buffered background writes, the final write also syncing).
 * Exits 0 on success, 1 on failure, 77 when no temporary drive can be made. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "store/store.h"

#include "check.h"
#include "store_check.h"

#define MIB (1u << 20)
#define MAX_PENDING 64

static char root[256];

/* The stand-in for a deferred hash: chunks appended but not yet "hashed",
 * which must stay unchanged until the writer releases their buffer. */
struct pending {
    struct {
        const uint8_t *p;
        size_t n;
        uint64_t off; /* in the object */
    } c[MAX_PENDING];
    unsigned n;
    uint64_t seed;
    unsigned releases; /* hook calls that covered at least one chunk */
    unsigned damaged;  /* chunks found changed before their release */
};

static void check_chunk(struct pending *pd, unsigned i)
{
    for (size_t j = 0; j < pd->c[i].n; j++) {
        if (pd->c[i].p[j] != check_pattern(pd->seed, pd->c[i].off + j)) {
            pd->damaged++;
            return;
        }
    }
}

static void on_release(void *ctx, const uint8_t *p, size_t len)
{
    struct pending *pd = ctx;
    unsigned kept = 0;
    bool hit = false;
    for (unsigned i = 0; i < pd->n; i++) {
        if (pd->c[i].p >= p && pd->c[i].p < p + len) {
            check_chunk(pd, i);
            hit = true;
        } else {
            pd->c[kept++] = pd->c[i];
        }
    }
    pd->n = kept;
    if (hit)
        pd->releases++;
}

/* Writes size bytes in pieces of `piece` (whole room when 0) through the
 * room API, every `mix_every`th piece through ol_store_write instead (0:
 * never), and commits them as key.  Returns 0 or an error; *pd gets the
 * release statistics. */
static int put_room(struct ol_store *st, const char *key, size_t size, int64_t hint,
                    size_t piece, unsigned mix_every, uint64_t seed, struct pending *pd)
{
    memset(pd, 0, sizeof(*pd));
    pd->seed = seed;
    struct ol_store_writer *w = NULL;
    int rc = ol_store_write_begin(st, hint, &w);
    if (rc)
        return rc;
    ol_store_write_set_release(w, on_release, pd);
    uint8_t *tmp = malloc(MIB);
    uint64_t off = 0;
    for (unsigned round = 0; rc == 0 && off < size && round < 100000; round++) {
        size_t want = size - off;
        if (mix_every && round % mix_every == mix_every - 1) {
            want = want < 70001 ? want : 70001;
            for (size_t j = 0; j < want; j++)
                tmp[j] = check_pattern(seed, off + j);
            rc = ol_store_write(w, tmp, want);
            off += want;
            continue;
        }
        uint8_t *p = NULL;
        size_t room = 0;
        rc = ol_store_write_room(w, &p, &room);
        if (rc)
            break;
        CHECK(room > 0);
        if (want > room)
            want = room;
        if (piece && want > piece)
            want = piece;
        for (size_t j = 0; j < want; j++)
            p[j] = check_pattern(seed, off + j);
        /* Older pending chunks are dropped (counted as hashed) when the
         * table is full; the writer's buffers hold far fewer. */
        if (pd->n == MAX_PENDING) {
            check_chunk(pd, 0);
            memmove(&pd->c[0], &pd->c[1], (MAX_PENDING - 1) * sizeof(pd->c[0]));
            pd->n--;
        }
        pd->c[pd->n].p = p;
        pd->c[pd->n].n = want;
        pd->c[pd->n].off = off;
        pd->n++;
        rc = ol_store_write_advance(w, want);
        off += want;
    }
    free(tmp);
    /* What is still pending is "hashed" now, before the commit frees the
     * buffers. */
    for (unsigned i = 0; i < pd->n; i++)
        check_chunk(pd, i);
    pd->n = 0;
    ol_store_write_set_release(w, NULL, NULL);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    CHECK(ol_store_write_size(w) == size);
    struct ol_obj_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.etag, sizeof(info.etag), "room-%llu", (unsigned long long)seed);
    return ol_store_write_commit_object(w, "bkt", key, strlen(key), &info);
}

static int verify(struct ol_store *st, const char *key, size_t size, uint64_t seed)
{
    struct ol_store_reader *r = NULL;
    int rc = ol_store_read_open(st, "bkt", key, strlen(key), &r);
    if (rc)
        return rc;
    if (ol_store_read_info(r)->size != size)
        rc = -1001;
    uint64_t off = 0;
    for (unsigned i = 0; rc == 0 && i < 1000000; i++) {
        const uint8_t *d = NULL;
        ssize_t n = ol_store_read(r, off, 300000, &d);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t j = 0; j < n; j++)
            if (d[j] != check_pattern(seed, off + (uint64_t)j)) {
                rc = -1002;
                break;
            }
        off += (uint64_t)n;
    }
    if (rc == 0 && off != size)
        rc = -1003;
    ol_store_read_close(r);
    return rc;
}

/* The cases, run on a plain thread and in a fiber. */
static int run_cases(struct ol_store *st, const char *tag)
{
    int bad = failures;
    struct pending pd;
    char key[64];
    /* Exact hint, 256 KiB pieces: the shape of an S3 body of known length;
     * 10 MiB crosses the test's 4 MiB segments. */
    static const size_t sizes[] = {0, 1, 4096, 200000, MIB, 3 * MIB + 12345, 10 * MIB};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        snprintf(key, sizeof(key), "%s/exact/%zu", tag, sizes[i]);
        CHECK_RC(put_room(st, key, sizes[i], (int64_t)sizes[i], 256 * 1024, 0, 10 + i, &pd), 0);
        CHECK(pd.damaged == 0);
        /* Every buffer reused while chunks were pending was released. */
        if (sizes[i] >= 3 * MIB)
            CHECK(pd.releases >= sizes[i] / MIB - 3);
        CHECK_RC(verify(st, key, sizes[i], 10 + i), 0);
    }
    /* No hint (chunked bodies), whole rooms and odd pieces. */
    snprintf(key, sizeof(key), "%s/nohint", tag);
    CHECK_RC(put_room(st, key, 5 * MIB + 7, -1, 0, 0, 40, &pd), 0);
    CHECK(pd.damaged == 0 && pd.releases >= 2);
    CHECK_RC(verify(st, key, 5 * MIB + 7, 40), 0);
    snprintf(key, sizeof(key), "%s/odd", tag);
    CHECK_RC(put_room(st, key, 3 * MIB, -1, 99991, 0, 41, &pd), 0);
    CHECK(pd.damaged == 0);
    CHECK_RC(verify(st, key, 3 * MIB, 41), 0);
    /* A hint too small: the first buffer grows, and is released before it
     * is freed. */
    snprintf(key, sizeof(key), "%s/grow", tag);
    CHECK_RC(put_room(st, key, 2 * MIB + 5, 5000, 30000, 0, 42, &pd), 0);
    CHECK(pd.damaged == 0);
    CHECK(pd.releases >= 1);
    CHECK_RC(verify(st, key, 2 * MIB + 5, 42), 0);
    /* Copies and loans mixed. */
    snprintf(key, sizeof(key), "%s/mixed", tag);
    CHECK_RC(put_room(st, key, 4 * MIB + 3, 4 * MIB + 3, 65536, 3, 43, &pd), 0);
    CHECK(pd.damaged == 0);
    CHECK_RC(verify(st, key, 4 * MIB + 3, 43), 0);
    /* Small objects still go inline (no segment write for them). */
    snprintf(key, sizeof(key), "%s/small", tag);
    CHECK_RC(put_room(st, key, 100, 100, 0, 0, 44, &pd), 0);
    CHECK_RC(verify(st, key, 100, 44), 0);
    /* Abort with a background write (and its sync) in flight: nothing is
     * freed under it (ASan would see it). */
    struct ol_store_writer *w = NULL;
    CHECK_RC(ol_store_write_begin(st, 2 * MIB, &w), 0);
    for (unsigned i = 0; w && i < 2; i++) {
        uint8_t *p = NULL;
        size_t room = 0;
        CHECK_RC(ol_store_write_room(w, &p, &room), 0);
        CHECK(room == MIB);
        if (room != MIB)
            break;
        memset(p, 0x5a, room);
        CHECK_RC(ol_store_write_advance(w, room), 0);
    }
    if (w)
        ol_store_write_abort(w);
    return failures == bad ? 0 : 1;
}

struct fib_arg {
    struct ol_store *st;
    struct ol_loop *loop;
    int rc;
};

static void fiber_fn(void *arg)
{
    struct fib_arg *a = arg;
    a->rc = run_cases(a->st, "fiber");
    ol_loop_stop(a->loop);
}

static void spawn(void *arg)
{
    struct fib_arg *a = arg;
    if (ol_fiber_spawn(a->loop, fiber_fn, a) != 0) {
        a->rc = 1;
        ol_loop_stop(a->loop);
    }
}

static void *loop_thread(void *arg)
{
    struct fib_arg *a = arg;
    ol_loop_run(a->loop);
    return NULL;
}

int main(void)
{
    ol_log_level = OL_LOG_WARN;
    if (check_mkdtemp(root, sizeof(root), "write_room") != 0)
        return 77;
    struct ol_store_opts o;
    ol_store_opts_default(&o);
    o.segment_bytes = 4u << 20;
    o.map_bytes = 1ull << 30;
    o.max_loops = 4;
    struct ol_store *st = check_store_open(root, &o);
    if (!st)
        return 1;
    CHECK_RC(ol_store_bucket_create(st, "bkt", 1), 0);
    CHECK_RC(run_cases(st, "thread"), 0);

    struct ol_loop_opts lo = {.id = 1, .sq_entries = 64, .max_fibers = 8,
                              .stack_bytes = 256 << 10, .inbox_slots = 64};
    struct ol_loop *loop = NULL;
    if (ol_loop_create(&loop, &lo) == 0) {
        struct fib_arg a = {.st = st, .loop = loop, .rc = 0};
        CHECK_RC(ol_loop_post(loop, spawn, &a), 0);
        pthread_t th;
        pthread_create(&th, NULL, loop_thread, &a);
        pthread_join(th, NULL);
        CHECK_RC(a.rc, 0);
        ol_loop_destroy(loop);
    } else {
        printf("fibers: no loop (skipped)\n");
    }
    ol_store_close(st);
    check_rm_rf(root);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
