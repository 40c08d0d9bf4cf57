/* MD5 (RFC 1321) for S3 ETags, single-stream and multi-buffer.
 *
 * A PUT's ETag is the MD5 of its body, and MD5 is a serial chain: one stream
 * cannot go faster than about 0.7 GB/s per core.  A server receiving many
 * bodies at once can hash them side by side instead: one 64-byte block of
 * each of 8 (AVX2) or 16 (AVX-512) streams per SIMD round, for about the cost
 * of one scalar block.  This is what ISA-L crypto's md5_mb does; no Debian
 * package ships it, so it is written here.  The implementation is chosen at
 * run time from the CPU's features.
 *
 * ol_md5_async_*() is the server-facing entry: concurrent request bodies of
 * all threads queue their chunks and are hashed together in batches.
 *
 * Thread rules: a context belongs to one thread at a time; the deferred
 * queue is the process's, under one lock.  Nothing here allocates.
 */
#ifndef OL_CORE_MD5_H
#define OL_CORE_MD5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"

struct ol_md5 {
    uint32_t h[4];
    uint64_t nbytes;  /* bytes hashed so far; nbytes % 64 of them wait in buf */
    uint8_t buf[64];
};

void ol_md5_init(struct ol_md5 *m);
/* Hashes n more bytes of m's stream, now, on the calling thread. */
void ol_md5_update(struct ol_md5 *m, const void *p, size_t n);
/* Writes the digest; m must be initialised again before reuse. */
void ol_md5_final(struct ol_md5 *m, uint8_t out[16]);
/* One-shot digest of a buffer. */
void ol_md5(const void *p, size_t n, uint8_t out[16]);

/* One stream's share of a multi-buffer update: hash n bytes at p into *m.
 * Two jobs of one batch must not name the same context. */
struct ol_md5_job {
    struct ol_md5 *m;
    const uint8_t *p;
    size_t n;
};
/* Hashes every job's bytes, the streams side by side in SIMD lanes. */
void ol_md5_update_many(struct ol_md5_job *jobs, size_t njobs);

/* Deferred hashing, for a server receiving many streams at once.  A stream
 * queues its chunks (which must stay valid and unchanged until they are
 * hashed) and goes on receiving.  The queue is the process's: a batch hashes
 * the oldest queued chunk of every stream, whichever thread queued it, side
 * by side in SIMD lanes.  A batch runs on the thread that queues the chunk
 * that fills the lanes (a chunk from 8 streams, from every stream, or from
 * one stream per lane where there are fewer lanes), and on any thread that
 * needs a chunk hashed (to reuse its buffer, or at the end) and finds it not
 * yet done (a fiber whose chunk would go with fewer than three others lets
 * its loop run a few ticks first, for other streams' chunks to arrive).  A
 * thread whose chunk another thread is hashing hashes other
 * streams' chunks meanwhile, or waits for that batch (a fiber parks, so its
 * loop goes on; a plain thread blocks). */
#define OL_MD5_ASYNC_MAX 8
struct ol_md5_async {
    struct ol_md5 m;
    struct {
        const uint8_t *p;
        size_t n;
    } q[OL_MD5_ASYNC_MAX]; /* queued chunks, a ring */
    unsigned head, count;   /* count includes the one being hashed */
    bool busy;              /* a batch is hashing q[head] */
    struct ol_completion *waiter; /* a fiber waiting for that batch */
    uint64_t added, hashed; /* chunks queued / hashed so far */
    struct ol_md5_async *next, *prev;
};
/* Starts a stream; any thread may then add to it, one at a time. */
void ol_md5_async_begin(struct ol_md5_async *s);
/* Queues a chunk (first hashing the oldest if s's queue is full); returns
 * its sequence number for ol_md5_async_wait(). */
uint64_t ol_md5_async_add(struct ol_md5_async *s, const void *p, size_t n);
/* Returns once chunk seq (and every earlier one) of s is hashed. */
void ol_md5_async_wait(struct ol_md5_async *s, uint64_t seq);
/* Ends the stream: with out, hashes what is queued and writes the digest;
 * with out NULL (a failed stream), drops what is queued, once no batch is
 * reading it. */
void ol_md5_async_end(struct ol_md5_async *s, uint8_t out[16]);

/* The lane count of the implementation in use: 1, 8 or 16. */
unsigned ol_md5_lanes(void);
/* Forces an implementation (1 = scalar, 8, 16); a width the CPU lacks falls
 * back to the widest one it has.  For tests and benchmarks. Returns the
 * width now in use. */
unsigned ol_md5_force_lanes(unsigned lanes);

/* Counters of the calling thread's ol_md5_async batches: batches run,
 * jobs hashed, 64-byte blocks hashed in SIMD rounds vs scalar, and waits
 * for a batch of another thread (parks of a fiber, or blocks). */
struct ol_md5_stats {
    uint64_t batches, jobs, simd_rounds, simd_blocks, scalar_blocks, waits;
};
void ol_md5_stats(struct ol_md5_stats *out);

#endif
