/* The decrypt pool (obj/sse_pool.h) and encrypted read-ahead (obj/sse.h):
 *  - jobs finish out of order and each waiter gets its own; a queued job
 *    cancelled is dropped at once, a running one by its thread after run;
 *  - a long read through the pool returns the same bytes as an inline one,
 *    from pinned and unpinned sources, one stream and parts, and in a fiber
 *    (the wait parks it; the pool's signal wakes it through the loop);
 *  - a package corrupted in the middle fails the read at its window: every
 *    byte returned before it is right, nothing at or after it is returned,
 *    and a retry at that offset fails too;
 *  - a byte rotted only in what the source hands over without check (a
 *    package, a tag, the stream id) costs a checked reread of the window,
 *    never the read;
 *  - a reader freed mid-read (a client that hung up) gives every block back,
 *    once the pool's threads are done with the windows they hold;
 *  - a source that hands out pinned pieces of 1 MiB (an erasure set's
 *    stripe units) has its windows across two pieces opened where they lie,
 *    none copied, and a bad byte on either side of a piece boundary (in a
 *    package's data or its tag) fails the read at that window;
 *  - spinning pool threads take jobs without a wake-up, stop with the pool,
 *    and spend no CPU once jobs stop coming. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/loop.h"
#include "obj/sse.h"
#include "obj/sse_pool.h"
#include "s3/meta.h"

#define WIN ((size_t)OL_SSE_WINDOW_PKGS * OL_SSE_PKG)
#define WIN_SEALED ((size_t)OL_SSE_WINDOW_PKGS * (OL_SSE_PKG + OL_SSE_TAG))

/* ---- the pool alone ---- */

struct tjob {
    struct ol_sse_job job;
    unsigned delay_us;
    int *gate; /* run waits while *gate is 0 (NULL: no gate) */
    int ran, dropped;
    int order; /* when run finished, from `finished` */
};
static int finished;

static void tjob_run(struct ol_sse_job *j)
{
    struct tjob *t = (struct tjob *)j;
    while (t->gate && !__atomic_load_n(t->gate, __ATOMIC_ACQUIRE))
        usleep(100);
    usleep(t->delay_us);
    t->ran++;
    t->order = __atomic_add_fetch(&finished, 1, __ATOMIC_ACQ_REL);
}

static void tjob_drop(struct ol_sse_job *j)
{
    ((struct tjob *)j)->dropped++;
}

static void pool_alone(void)
{
    CHECK_RC(ol_sse_pool_start(3, 2, 0), 0);
    CHECK(ol_sse_pool_threads() == 3);
    /* Out of order: the first job takes longest. */
    struct tjob a[3] = {{.delay_us = 60000}, {.delay_us = 1000}, {.delay_us = 1000}};
    for (int i = 0; i < 3; i++) {
        a[i].job.run = tjob_run;
        a[i].job.drop = tjob_drop;
        ol_sse_pool_submit(&a[i].job);
    }
    ol_sse_pool_wait(&a[2].job);
    CHECK(a[2].ran == 1);
    ol_sse_pool_wait(&a[0].job);
    ol_sse_pool_wait(&a[1].job);
    CHECK(a[0].ran == 1 && a[1].ran == 1);
    CHECK(a[0].order == 3); /* finished last, though queued first */
    CHECK(ol_sse_pool_done(&a[1].job));
    CHECK(a[0].dropped + a[1].dropped + a[2].dropped == 0);

    /* Cancels: three jobs held running at a gate, a fourth queued behind. */
    int gate = 0;
    struct tjob b[4];
    memset(b, 0, sizeof(b));
    for (int i = 0; i < 4; i++) {
        b[i].gate = &gate;
        b[i].job.run = tjob_run;
        b[i].job.drop = tjob_drop;
        ol_sse_pool_submit(&b[i].job);
    }
    for (int spin = 0; spin < 2000 && b[3].job.state == 0; spin++)
        usleep(100);
    usleep(20000); /* the threads have taken b[0..2] */
    ol_sse_pool_cancel(&b[3].job); /* queued: dropped now, never run */
    CHECK(b[3].dropped == 1 && b[3].ran == 0);
    ol_sse_pool_cancel(&b[0].job); /* running: dropped after run */
    CHECK(b[0].dropped == 0);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    ol_sse_pool_wait(&b[1].job);
    ol_sse_pool_wait(&b[2].job);
    for (int spin = 0; spin < 2000 && !__atomic_load_n(&b[0].dropped, __ATOMIC_ACQUIRE); spin++)
        usleep(100);
    CHECK(b[0].ran == 1 && b[0].dropped == 1);
    ol_sse_pool_cancel(&b[1].job); /* done: dropped now */
    CHECK(b[1].dropped == 1 && b[2].dropped == 0);

    /* Steal and finish: with the threads held at a gate, a queued job is
     * taken back and run here; a running one is not, and finish waits. */
    gate = 0;
    struct tjob c[4];
    memset(c, 0, sizeof(c));
    for (int i = 0; i < 4; i++) {
        c[i].gate = i < 3 ? &gate : NULL;
        c[i].job.run = tjob_run;
        c[i].job.drop = tjob_drop;
        ol_sse_pool_submit(&c[i].job);
    }
    usleep(20000); /* the threads have taken c[0..2] */
    CHECK(ol_sse_pool_steal(&c[3].job));
    CHECK(c[3].ran == 1 && ol_sse_pool_done(&c[3].job));
    CHECK(!ol_sse_pool_steal(&c[0].job) && c[0].ran == 0);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) {
        ol_sse_pool_finish(&c[i].job, 50);
        CHECK(c[i].ran == 1);
    }
    CHECK(c[0].dropped + c[1].dropped + c[2].dropped + c[3].dropped == 0);

    /* The block cap: 3 threads x 2. */
    void *blk[7];
    int got = 0;
    for (int i = 0; i < 7; i++)
        if ((blk[i] = ol_sse_pool_block_take()))
            got++;
    CHECK(got == 6 && blk[6] == NULL);
    CHECK(ol_sse_pool_blocks_out() == 6);
    for (int i = 0; i < 6; i++)
        ol_sse_pool_block_give(blk[i]);
    CHECK(ol_sse_pool_blocks_out() == 0);
    ol_sse_pool_stop();
    CHECK(ol_sse_pool_threads() == 0);
}

/* ---- read-ahead ---- */

struct mem {
    uint8_t *p;
    size_t len, cap;
    bool pin;       /* hand out pointers as pinned */
    size_t max_call; /* at most this many bytes per call (0: no limit) */
    size_t unit;     /* calls end at multiples of unit (0: no limit) */
    uint8_t *bounce; /* unpinned: each call's bytes copied here, then scribbled over */
    uint8_t *rotted; /* when set: what a read without check gets (bit rot the
                      * backend's CRCs would catch) */
    uint64_t reads, checked;
};

static int sink(void *arg, const void *buf, size_t len)
{
    struct mem *m = arg;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

/* An unpinned source's buffer is valid until the next call only: each call
 * overwrites the last one's bytes, so a window opened on the pool from a
 * buffer it did not copy would fail authentication. */
static ssize_t source(void *arg, uint64_t off, size_t max, bool check, const uint8_t **data,
                      bool *pinned)
{
    struct mem *m = arg;
    const uint8_t *p = m->rotted && !check ? m->rotted : m->p;
    m->reads++;
    m->checked += check;
    if (off >= m->len)
        return 0;
    size_t n = m->len - off < max ? m->len - off : max;
    if (m->max_call && n > m->max_call)
        n = m->max_call;
    if (m->unit && n > m->unit - off % m->unit)
        n = m->unit - off % m->unit;
    if (m->pin) {
        *data = p + off;
        *pinned = true;
    } else {
        if (!m->bounce)
            m->bounce = malloc(4u << 20);
        if (n > (4u << 20))
            n = 4u << 20;
        memset(m->bounce, 0xa5, 4u << 20);
        memcpy(m->bounce, p + off, n);
        *data = m->bounce;
    }
    return (ssize_t)n;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

static void seal(const struct ol_sse_obj *obj, const uint8_t *plain, size_t n, struct mem *m)
{
    struct ol_sse_writer *w;
    CHECK_RC(ol_sse_writer_new(obj, &w), 0);
    CHECK_RC(ol_sse_write(w, sink, m, plain, n), 0);
    CHECK_RC(ol_sse_write_finish(w, sink, m), 0);
    ol_sse_writer_free(w);
}

struct object {
    uint8_t master[32];
    uint8_t *plain;
    size_t n;
    struct mem m;
    uint8_t blob[1024];
    size_t bl;
};

/* An SSE-S3 object of n bytes: one stream, or parts of part bytes each. */
static void object_make(struct object *o, size_t n, size_t part)
{
    memset(o, 0, sizeof(*o));
    fill(o->master, 32, 1);
    o->n = n;
    o->plain = malloc(n);
    fill(o->plain, n, 9);
    struct ol_sse_spec spec = {.mode = OL_SSE_S3};
    char entry[OL_SSE_ENTRY_MAX];
    struct ol_sse_obj obj;
    CHECK_RC(ol_sse_entry_new(o->master, &spec, part ? 'p' : 's', entry, &obj), 0);
    CHECK_RC(ol_s3_meta_add(o->blob, sizeof(o->blob), &o->bl, OL_SSE_META, entry, strlen(entry)),
             0);
    if (!part) {
        seal(&obj, o->plain, n, &o->m);
        return;
    }
    char parts[64];
    size_t np = n / part;
    snprintf(parts, sizeof(parts), "%zu*%zu", part, np);
    CHECK(np * part == n);
    for (size_t i = 0; i < np; i++) {
        struct ol_sse_obj po = obj; /* each part its own stream */
        seal(&po, o->plain + i * part, part, &o->m);
    }
    CHECK_RC(ol_s3_meta_add(o->blob, sizeof(o->blob), &o->bl, OL_S3_META_PARTS, parts,
                            strlen(parts)),
             0);
}

static void object_free(struct object *o)
{
    free(o->plain);
    free(o->m.p);
    free(o->m.bounce);
    free(o->m.rotted);
}

/* A GET's loop: ol_sse_read with max = what is left, in order.  Returns the
 * bytes read before the first error (and the error in *err). */
static size_t get(struct object *o, uint64_t off, size_t len, int *err, bool *same)
{
    struct ol_sse_reader *r;
    *err = ol_sse_reader_new(o->blob, o->bl, o->m.len, o->master, &r);
    *same = true;
    if (*err < 0)
        return 0;
    size_t got = 0;
    while (got < len) {
        const uint8_t *d;
        ssize_t k = ol_sse_read(r, source, &o->m, off + got, len - got, &d);
        if (k <= 0) {
            *err = k < 0 ? (int)k : -EIO;
            break;
        }
        if (memcmp(d, o->plain + off + got, (size_t)k) != 0)
            *same = false;
        got += (size_t)k;
    }
    ol_sse_reader_free(r);
    return got;
}

/* Every block back, once the pool's threads are done with the windows a
 * freed reader left them (those are freed by the thread, after its open). */
static bool blocks_back(void)
{
    for (int spin = 0; spin < 5000 && ol_sse_pool_blocks_out() > 0; spin++)
        usleep(200);
    return ol_sse_pool_blocks_out() == 0;
}

static void round_trips(void)
{
    struct object o;
    int err;
    bool same;
    /* One stream of 9.5 windows, parts of 3 windows (a stream boundary at
     * each window boundary) and parts of 2.5 windows (mid-window). */
    const size_t part_sizes[] = {0, 3 * WIN, 5 * WIN / 2};
    for (size_t ps = 0; ps < 3; ps++) {
        size_t n = part_sizes[ps] ? 4 * part_sizes[ps] : 9 * WIN + WIN / 2 + 333;
        object_make(&o, n, part_sizes[ps]);
        for (int pin = 0; pin < 2; pin++) {
            o.m.pin = pin;
            for (size_t mc = 0; mc < 2; mc++) {
                o.m.max_call = mc ? 300000 : 0; /* short reads: gathered */
                CHECK(get(&o, 0, n, &err, &same) == n);
                CHECK_RC(err, 0);
                CHECK(same);
                /* A range from the middle of a package to before the end. */
                size_t off = WIN + 12345, len = n - off - 777;
                CHECK(get(&o, off, len, &err, &same) == len);
                CHECK_RC(err, 0);
                CHECK(same);
                CHECK(blocks_back());
            }
        }
        object_free(&o);
    }
}

/* Bit rot under unchecked reads: a byte the backend's CRCs would catch
 * (a package's data, its tag, the stream's id) fails the window's tags,
 * and the window read again with check opens: every read returns the
 * right bytes, inline (a short read) and read ahead, pinned or not, from
 * the start and from the middle (the id read apart from the window). */
static void rot_rechecked(void)
{
    const size_t at[] = {
        OL_SSE_HDR + (6 * OL_SSE_WINDOW_PKGS + 2) * (OL_SSE_PKG + OL_SSE_TAG) + 100,
        OL_SSE_HDR + (3 * OL_SSE_WINDOW_PKGS + 1) * (OL_SSE_PKG + OL_SSE_TAG) - 3,
        5, /* the id: every window's key */
    };
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        for (int pin = 0; pin < 2; pin++) {
            struct object o;
            object_make(&o, 10 * WIN, 0);
            o.m.pin = pin;
            o.m.rotted = malloc(o.m.len);
            memcpy(o.m.rotted, o.m.p, o.m.len);
            o.m.rotted[at[i]] ^= 0x10;
            struct ol_sse_stats a, b;
            ol_sse_stats(&a);
            int err;
            bool same;
            CHECK(get(&o, 0, o.n, &err, &same) == o.n); /* read ahead */
            CHECK_RC(err, 0);
            CHECK(same);
            ol_sse_stats(&b);
            CHECK(b.windows_rechecked > a.windows_rechecked);
            CHECK(o.m.checked > 0);
            /* Windows one at a time (inline), from the middle. */
            for (uint64_t off = 2 * WIN + 7; off < o.n; off += WIN) {
                CHECK(get(&o, off, WIN / 2, &err, &same) == WIN / 2);
                CHECK_RC(err, 0);
                CHECK(same);
            }
            CHECK(blocks_back());
            object_free(&o);
        }
    }
}

static void corrupt_middle(void)
{
    struct object o;
    object_make(&o, 10 * WIN, 0);
    o.m.pin = true;
    /* Window 6's third package: one flipped byte of its ciphertext. */
    size_t pkg = 6 * OL_SSE_WINDOW_PKGS + 2;
    o.m.p[OL_SSE_HDR + pkg * (OL_SSE_PKG + OL_SSE_TAG) + 100] ^= 1;
    int err;
    bool same;
    size_t got = get(&o, 0, o.n, &err, &same);
    CHECK_RC(err, -OL_ECORRUPT);
    CHECK(got == 6 * WIN); /* everything before window 6, nothing of it or after */
    CHECK(same);
    /* A reader that goes on at the failed offset fails again (inline). */
    struct ol_sse_reader *r;
    CHECK_RC(ol_sse_reader_new(o.blob, o.bl, o.m.len, o.master, &r), 0);
    const uint8_t *d;
    CHECK(ol_sse_read(r, source, &o.m, 5 * WIN, o.n - 5 * WIN, &d) == (ssize_t)WIN);
    CHECK_RC(ol_sse_read(r, source, &o.m, 6 * WIN, o.n - 6 * WIN, &d), -OL_ECORRUPT);
    CHECK_RC(ol_sse_read(r, source, &o.m, 6 * WIN, o.n - 6 * WIN, &d), -OL_ECORRUPT);
    /* The windows after it still open (each package stands alone). */
    CHECK(ol_sse_read(r, source, &o.m, 7 * WIN, o.n - 7 * WIN, &d) == (ssize_t)WIN);
    CHECK(memcmp(d, o.plain + 7 * WIN, WIN) == 0);
    ol_sse_reader_free(r);
    CHECK(blocks_back());
    object_free(&o);
}

/* Reads too short for read-ahead open their window in parts on the pool
 * (sse.c win_open_split; on OpenSSL's GCM only, so meson runs this file
 * once more with OPENLAKE_GCM=openssl): byte-identical at every size and
 * offset, and a bad package in a part the pool opens fails the read with
 * nothing of the window returned. */
static void split_windows(void)
{
    size_t sizes[] = {4 * OL_SSE_PKG, 5 * OL_SSE_PKG + 7, WIN, WIN + OL_SSE_PKG, (1u << 20) + 3};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct object o;
        object_make(&o, sizes[i], 0);
        for (int pin = 0; pin < 2; pin++) {
            o.m.pin = pin;
            int err;
            bool same;
            CHECK(get(&o, 0, o.n, &err, &same) == o.n);
            CHECK_RC(err, 0);
            CHECK(same);
            CHECK(get(&o, 3 * OL_SSE_PKG + 11, o.n - 3 * OL_SSE_PKG - 11, &err, &same) ==
                  o.n - 3 * OL_SSE_PKG - 11);
            CHECK_RC(err, 0);
            CHECK(same);
        }
        object_free(&o);
    }
    /* Package 13 of the first window: in the last part (the pool's). */
    struct object o;
    object_make(&o, WIN + 100, 0);
    o.m.pin = true;
    o.m.p[OL_SSE_HDR + 13 * (OL_SSE_PKG + OL_SSE_TAG) + 5] ^= 0x40;
    int err;
    bool same;
    CHECK(get(&o, 0, o.n, &err, &same) == 0);
    CHECK_RC(err, -OL_ECORRUPT);
    object_free(&o);
    CHECK(blocks_back());
}

static void free_mid_read(void)
{
    struct object o;
    object_make(&o, 12 * WIN, 0);
    for (int i = 0; i < 20; i++) {
        o.m.pin = i % 2;
        struct ol_sse_reader *r;
        CHECK_RC(ol_sse_reader_new(o.blob, o.bl, o.m.len, o.master, &r), 0);
        const uint8_t *d;
        ssize_t k = ol_sse_read(r, source, &o.m, 0, o.n, &d);
        CHECK(k == (ssize_t)WIN);
        if (i % 3 == 1)
            k = ol_sse_read(r, source, &o.m, WIN, o.n - WIN, &d);
        CHECK(k == (ssize_t)WIN);
        CHECK(ol_sse_pool_blocks_out() > 0); /* windows ahead */
        ol_sse_reader_free(r); /* with windows queued and opening */
    }
    CHECK(blocks_back());
    object_free(&o);
}

/* Windows across two pinned pieces of the source (an erasure set's 1 MiB
 * stripe units: a window's 983,280 sealed bytes straddle a unit boundary
 * more often than not). */
static void two_pieces(void)
{
    struct object o;
    object_make(&o, 10 * WIN + 999, 0);
    o.m.pin = true;
    o.m.unit = 1u << 20;
    struct ol_sse_stats a, b;
    int err;
    bool same;
    ol_sse_stats(&a);
    CHECK(get(&o, 0, o.n, &err, &same) == o.n); /* inline, then read ahead */
    CHECK_RC(err, 0);
    CHECK(same);
    CHECK(get(&o, 3 * WIN + 5, WIN, &err, &same) == WIN); /* inline only */
    CHECK_RC(err, 0);
    CHECK(same);
    ol_sse_stats(&b);
    CHECK(b.windows_copied == a.windows_copied);
    CHECK(b.bytes_copied == a.bytes_copied);
    CHECK(b.windows_pieces >= a.windows_pieces + 10);
    /* Unpinned pieces are still gathered. */
    o.m.pin = false;
    CHECK(get(&o, 0, o.n, &err, &same) == o.n);
    CHECK_RC(err, 0);
    CHECK(same);
    ol_sse_stats(&a);
    CHECK(a.windows_copied >= b.windows_copied + 10);
    o.m.pin = true;

    /* Window 3's sealed bytes [16 + 3 * 983280, ...) hold the 3 MiB
     * boundary inside package 2's data: one bad byte on either side. */
    size_t bnd = 3u << 20;
    CHECK(bnd > OL_SSE_HDR + 3 * WIN_SEALED && bnd < OL_SSE_HDR + 4 * WIN_SEALED);
    for (int side = 0; side < 2; side++) {
        size_t at = side ? bnd : bnd - 1;
        o.m.p[at] ^= 0x10;
        CHECK(get(&o, 0, o.n, &err, &same) == 3 * WIN);
        CHECK_RC(err, -OL_ECORRUPT);
        CHECK(same);
        CHECK(get(&o, 3 * WIN, 100, &err, &same) == 0); /* inline */
        CHECK_RC(err, -OL_ECORRUPT);
        o.m.p[at] ^= 0x10;
    }
    CHECK(get(&o, 0, o.n, &err, &same) == o.n && err == 0 && same);
    object_free(&o);

    /* Pieces of 983,288 bytes: window 0 (the stream id and 15 packages,
     * 983,296 bytes) has its boundary 8 bytes into the last package's tag,
     * and windows 3.. theirs 8 * (n - 2) bytes into their first package. */
    object_make(&o, 6 * WIN, 0);
    o.m.pin = true;
    o.m.unit = 983288;
    CHECK(get(&o, 0, o.n, &err, &same) == o.n && err == 0 && same);
    CHECK(get(&o, 0, WIN, &err, &same) == WIN && err == 0 && same);
    for (int side = 0; side < 2; side++) {
        size_t at = side ? o.m.unit : o.m.unit - 1;
        o.m.p[at] ^= 0x01;
        CHECK(get(&o, 0, o.n, &err, &same) == 0);
        CHECK_RC(err, -OL_ECORRUPT);
        o.m.p[at] ^= 0x01;
    }
    ol_sse_stats(&b);
    CHECK(b.windows_copied == a.windows_copied);
    object_free(&o);
    CHECK(blocks_back());
}

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Spinning threads: many short jobs one after another (most submits find a
 * spinner and signal nobody) all run; with the jobs over the pool goes
 * quiet (no CPU); a stop while they spin ends them. */
static void spinning(void)
{
    CHECK_RC(ol_sse_pool_start(3, 2, OL_SSE_POOL_SPIN_MAX_US + 1), -EINVAL);
    CHECK_RC(ol_sse_pool_start(3, 2, OL_SSE_POOL_SPIN_MAX_US), 0);
    for (int round = 0; round < 300; round++) {
        struct tjob t[3];
        memset(t, 0, sizeof(t));
        for (int i = 0; i < 3; i++) {
            t[i].job.run = tjob_run;
            t[i].job.drop = tjob_drop;
            ol_sse_pool_submit(&t[i].job);
        }
        for (int i = 0; i < 3; i++) {
            if (round % 2)
                ol_sse_pool_wait(&t[i].job);
            else
                ol_sse_pool_finish(&t[i].job, 20);
            CHECK(t[i].ran == 1);
        }
    }
    /* The spin is 10 ms at most: after 40 ms, 100 ms cost next to no CPU. */
    usleep(40000);
    double c0 = cpu_ms();
    usleep(100000);
    double used = cpu_ms() - c0;
    CHECK(used < 5.0);
    if (used >= 5.0)
        fprintf(stderr, "idle pool used %.1f ms of CPU in 100 ms\n", used);
    /* Stopped while two threads spin. */
    struct tjob t = {.job = {.run = tjob_run, .drop = tjob_drop}};
    ol_sse_pool_submit(&t.job);
    ol_sse_pool_wait(&t.job);
    ol_sse_pool_stop();
    CHECK(ol_sse_pool_threads() == 0);
}

/* A read in a fiber: the wait parks it and the pool's signal comes back
 * through the loop's inbox. */
static struct ol_loop *loop;
static struct object fo;
static int fiber_err = 1;
static bool fiber_same;
static size_t fiber_got;

static void fiber_get(void *arg)
{
    (void)arg;
    fiber_got = get(&fo, 0, fo.n, &fiber_err, &fiber_same);
    ol_loop_stop(loop);
}

static void spawn_get(void *arg)
{
    CHECK_RC(ol_fiber_spawn(loop, fiber_get, arg), 0);
}

static void in_fiber(void)
{
    object_make(&fo, 8 * WIN + 5, 0);
    fo.m.pin = true;
    struct ol_loop_opts lo = {.id = 0, .max_fibers = 4};
    CHECK_RC(ol_loop_create(&loop, &lo), 0);
    CHECK_RC(ol_loop_post(loop, spawn_get, NULL), 0);
    CHECK_RC(ol_loop_run(loop), 0);
    ol_loop_destroy(loop);
    CHECK_RC(fiber_err, 0);
    CHECK(fiber_got == fo.n && fiber_same);
    object_free(&fo);
}

int main(void)
{
    CHECK(ol_sse_pool_auto(2) == 0);
    CHECK(ol_sse_pool_auto(16) == 16);
    pool_alone();
    spinning();

    /* Off: a long read opens inline and takes no block. */
    struct object o;
    object_make(&o, 4 * WIN, 0);
    o.m.pin = true;
    int err;
    bool same;
    CHECK(get(&o, 0, o.n, &err, &same) == o.n && err == 0 && same);
    object_free(&o);

    CHECK_RC(ol_sse_pool_start(3, OL_SSE_AHEAD_BLOCKS_PER_THREAD, 0), 0);
    round_trips();
    corrupt_middle();
    rot_rechecked();
    split_windows();
    two_pieces();
    free_mid_read();
    in_fiber();
    ol_sse_pool_stop();
    CHECK(ol_sse_pool_blocks_out() == 0);
    return failures ? 1 : 0;
}
