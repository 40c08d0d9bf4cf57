/* MD5, scalar and multi-buffer, against OpenSSL: RFC 1321 vectors, random
 * lengths split into random updates, 1..40 streams hashed side by side at
 * every lane width the CPU has, the multipart ETag (MD5 of the parts' MD5s),
 * and deferred hashing (ol_md5_async_*) from many fibers of one loop and of
 * two loops on two threads, which hash each other's chunks.  Prints the single-stream
 * and 16-stream throughput (informational; set OL_MD5_BENCH_MB to change the
 * amount). */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/loop.h"
#include "core/md5.h"


static void ref_md5(const void *p, size_t n, uint8_t out[16])
{
    unsigned len = 0;
    EVP_Digest(p, n, out, &len, EVP_md5(), NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define MAXS 40
#define DATA_BYTES (1u << 20)
static uint8_t *data;

static void test_vectors(void)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint8_t d[16];
        char hex[33];
        ol_md5(v[i].in, strlen(v[i].in), d);
        for (int j = 0; j < 16; j++)
            snprintf(hex + 2 * j, 3, "%02x", d[j]);
        CHECK(strcmp(hex, v[i].hex) == 0);
    }
}

/* nstreams streams of random lengths, each fed in random pieces, all the
 * streams' next pieces handed to ol_md5_update_many together. */
static void test_many(unsigned nstreams, int rounds_max)
{
    struct ol_md5 m[MAXS];
    size_t len[MAXS], off[MAXS], start[MAXS];
    for (unsigned s = 0; s < nstreams; s++) {
        ol_md5_init(&m[s]);
        /* Mostly short and mid lengths, sometimes up to 256 KiB. */
        uint64_t r = check_rnd();
        len[s] = (r & 3) == 0 ? check_rnd() % (256u << 10) : check_rnd() % 9000;
        start[s] = check_rnd() % (DATA_BYTES - len[s]);
        off[s] = 0;
    }
    for (int round = 0; round < rounds_max; round++) {
        struct ol_md5_job jobs[MAXS];
        size_t nj = 0;
        for (unsigned s = 0; s < nstreams; s++) {
            if (off[s] == len[s])
                continue;
            size_t left = len[s] - off[s];
            size_t take = (check_rnd() & 1) ? left : check_rnd() % (left + 1);
            if (round == rounds_max - 1)
                take = left;
            jobs[nj++] = (struct ol_md5_job){.m = &m[s], .p = data + start[s] + off[s], .n = take};
            off[s] += take;
        }
        ol_md5_update_many(jobs, nj);
    }
    for (unsigned s = 0; s < nstreams; s++) {
        uint8_t a[16], b[16];
        ol_md5_final(&m[s], a);
        ref_md5(data + start[s], len[s], b);
        CHECK(memcmp(a, b, 16) == 0);
    }
}

/* The multipart ETag: MD5 of the concatenated binary MD5s of the parts. */
static void test_md5_of_md5s(void)
{
    enum { NPARTS = 12 };
    struct ol_md5 parts[NPARTS];
    size_t plen = DATA_BYTES / NPARTS;
    struct ol_md5_job jobs[NPARTS];
    for (int i = 0; i < NPARTS; i++) {
        ol_md5_init(&parts[i]);
        jobs[i] = (struct ol_md5_job){.m = &parts[i], .p = data + i * plen, .n = plen};
    }
    ol_md5_update_many(jobs, NPARTS);
    uint8_t cat[16 * NPARTS], refcat[16 * NPARTS];
    for (int i = 0; i < NPARTS; i++) {
        ol_md5_final(&parts[i], cat + 16 * i);
        ref_md5(data + i * plen, plen, refcat + 16 * i);
    }
    CHECK(memcmp(cat, refcat, sizeof(cat)) == 0);
    uint8_t a[16], b[16];
    ol_md5(cat, sizeof(cat), a);
    ref_md5(refcat, sizeof(refcat), b);
    CHECK(memcmp(a, b, 16) == 0);
}

/* ---- deferred hashing from fibers of one or two loops ---- */

/* A loop, the thread running it, and its fibers still running. */
struct loop_ctx {
    struct ol_loop *loop;
    pthread_t thread;
    unsigned first, step, left;
};
static struct loop_ctx lctx[2];

struct fiber_arg {
    struct ol_md5_async s;
    size_t start, len;
    uint8_t digest[16];
    int done;
    bool fail;
    struct loop_ctx *lc;
};
static struct fiber_arg fargs[MAXS];

/* Like the PUT body receiver: chunks through a ring of 3 buffers, waiting
 * for a buffer's chunk to be hashed before refilling it (each refill
 * scribbles over the old bytes, so a late hash would be caught).  A failing
 * stream drops itself halfway. */
static void submitter(void *p)
{
    struct fiber_arg *a = p;
    enum { NB = 3, CHUNK = 64 << 10 };
    static uint8_t ring[MAXS][NB][CHUNK];
    uint8_t(*bufs)[CHUNK] = ring[a - fargs];
    uint64_t seq[NB];
    int queued[NB] = {0};
    size_t off = 0;
    ol_md5_async_begin(&a->s);
    for (unsigned i = 0; off < a->len; i = (i + 1) % NB) {
        if (queued[i])
            ol_md5_async_wait(&a->s, seq[i]);
        memset(bufs[i], 0xa5, CHUNK);
        size_t take = 1 + check_rnd() % CHUNK;
        if (take > a->len - off)
            take = a->len - off;
        memcpy(bufs[i], data + a->start + off, take);
        seq[i] = ol_md5_async_add(&a->s, bufs[i], take);
        queued[i] = 1;
        off += take;
        if (a->fail && off > a->len / 2) {
            ol_md5_async_end(&a->s, NULL);
            a->done = 2;
            goto out;
        }
        if (check_rnd() & 1)
            ol_fiber_yield();
    }
    ol_md5_async_end(&a->s, a->digest);
    a->done = 1;
out:
    if (--a->lc->left == 0)
        ol_loop_stop(a->lc->loop);
}

static void spawn_all(void *arg)
{
    struct loop_ctx *lc = arg;
    for (unsigned s = lc->first; s < MAXS; s += lc->step)
        CHECK(ol_fiber_spawn(lc->loop, submitter, &fargs[s]) == 0);
}

static uint64_t cross_batches, cross_waits; /* over the loop threads */

static void *loop_thread(void *arg)
{
    struct loop_ctx *lc = arg;
    CHECK(ol_loop_run(lc->loop) == 0);
    struct ol_md5_stats st;
    ol_md5_stats(&st);
    __atomic_add_fetch(&cross_batches, st.batches, __ATOMIC_RELAXED);
    __atomic_add_fetch(&cross_waits, st.waits, __ATOMIC_RELAXED);
    return NULL;
}

/* MAXS streams on nloops loops; with two, each loop's batches hash the
 * other's chunks too, and a stream whose chunk the other thread is hashing
 * parks its fiber until that batch is done.  The first stream of each loop
 * fails halfway.  (check_rnd() is shared by the threads: its values only need to
 * vary.) */
static void test_submit(unsigned nloops)
{
    for (unsigned l = 0; l < nloops; l++) {
        struct ol_loop_opts o = {.id = l, .max_fibers = 64};
        CHECK(ol_loop_create(&lctx[l].loop, &o) == 0);
        if (!lctx[l].loop)
            return;
        lctx[l].first = l;
        lctx[l].step = nloops;
        lctx[l].left = 0;
    }
    for (unsigned s = 0; s < MAXS; s++) {
        fargs[s].len = check_rnd() % (512u << 10);
        fargs[s].start = check_rnd() % (DATA_BYTES - fargs[s].len);
        fargs[s].done = 0;
        fargs[s].fail = s < nloops;
        fargs[s].lc = &lctx[s % nloops];
        fargs[s].lc->left++;
    }
    struct ol_md5_stats st0;
    ol_md5_stats(&st0);
    /* Spawning happens on the loop thread: post a message that does it. */
    for (unsigned l = 0; l < nloops; l++)
        CHECK(ol_loop_post(lctx[l].loop, spawn_all, &lctx[l]) == 0);
    if (nloops == 1) {
        CHECK(ol_loop_run(lctx[0].loop) == 0);
    } else {
        for (unsigned l = 0; l < nloops; l++)
            CHECK(pthread_create(&lctx[l].thread, NULL, loop_thread, &lctx[l]) == 0);
        for (unsigned l = 0; l < nloops; l++)
            pthread_join(lctx[l].thread, NULL);
    }
    for (unsigned l = 0; l < nloops; l++)
        ol_loop_destroy(lctx[l].loop);
    for (unsigned s = 0; s < MAXS; s++) {
        uint8_t b[16];
        if (fargs[s].fail) {
            CHECK(fargs[s].done == 2);
            continue;
        }
        CHECK(fargs[s].done == 1);
        ref_md5(data + fargs[s].start, fargs[s].len, b);
        CHECK(memcmp(fargs[s].digest, b, 16) == 0);
    }
    if (nloops == 1) {
        struct ol_md5_stats st;
        ol_md5_stats(&st);
        printf("async: %llu batches, %llu jobs, %llu SIMD rounds for %llu blocks, %llu scalar\n",
               (unsigned long long)(st.batches - st0.batches),
               (unsigned long long)(st.jobs - st0.jobs),
               (unsigned long long)(st.simd_rounds - st0.simd_rounds),
               (unsigned long long)(st.simd_blocks - st0.simd_blocks),
               (unsigned long long)(st.scalar_blocks - st0.scalar_blocks));
        CHECK(st.batches > st0.batches && st.jobs - st0.jobs > st.batches - st0.batches);
    }
}

static void bench(unsigned nstreams, size_t mb)
{
    struct ol_md5 m[16];
    struct ol_md5_job jobs[16];
    size_t per = DATA_BYTES / 16;
    size_t total = 0;
    double t0 = now_s();
    for (size_t r = 0; total < mb << 20; r++) {
        for (unsigned s = 0; s < nstreams; s++) {
            ol_md5_init(&m[s]);
            jobs[s] = (struct ol_md5_job){.m = &m[s], .p = data + s * per, .n = per};
        }
        ol_md5_update_many(jobs, nstreams);
        total += per * nstreams;
    }
    double t = now_s() - t0;
    printf("  %2u stream(s): %.2f GB/s\n", nstreams, (double)total / t / 1e9);
}

int main(void)
{
    data = malloc(DATA_BYTES);
    if (!data)
        return 1;
    for (size_t i = 0; i < DATA_BYTES; i++)
        data[i] = (uint8_t)check_rnd();
    unsigned widest = ol_md5_lanes();
    printf("CPU lanes: %u\n", widest);
    test_vectors();
    const unsigned widths[] = {1, 8, 16};
    for (int w = 0; w < 3; w++) {
        if (widths[w] > widest)
            continue;
        CHECK(ol_md5_force_lanes(widths[w]) == widths[w]);
        test_vectors();
        for (unsigned n = 1; n <= MAXS; n++)
            test_many(n, 1 + (int)(check_rnd() % 6));
        test_md5_of_md5s();
    }
    ol_md5_force_lanes(widest);
    test_submit(1);
    for (int i = 0; i < 20; i++)
        test_submit(2);
    printf("two loops: %llu batches, %llu waits for the other thread's batch\n",
           (unsigned long long)cross_batches, (unsigned long long)cross_waits);
    CHECK(cross_batches > 0);
    const char *e = getenv("OL_MD5_BENCH_MB");
    size_t mb = e ? (size_t)atoi(e) : 64;
    for (int w = 0; mb && w < 3; w++) {
        if (widths[w] > widest)
            continue;
        ol_md5_force_lanes(widths[w]);
        printf("lanes %u:\n", widths[w]);
        bench(1, mb);
        bench(2, mb);
        if (widths[w] > 2)
            bench(widths[w], mb);
    }
    free(data);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
