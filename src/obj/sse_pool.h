/* The decrypt pool: a few threads that open sealed windows ahead of a large
 * encrypted read (obj/sse.c, "read-ahead"), so that while a request's loop
 * thread sends window N, windows N+1.. are being opened on other cores.
 *
 * A request's loop thread does one AES-GCM open (~4.5 GB/s a core with
 * OpenSSL 3.0) and one send per window, one after the other; a plain GET is
 * zero-copy.  Packages are independent (each has its own nonce and tag), so
 * they open in any order on any thread; the reader still hands them out in
 * order, and a package that fails to open fails the read at its window.
 *
 * Jobs.  The caller owns a struct ol_sse_job (in memory it allocated), fills
 * run and drop, and submits it; a pool thread runs it once.  The owner then
 * either waits for it (ol_sse_pool_wait) and frees it itself, or cancels it
 * (ol_sse_pool_cancel): drop is then called exactly once, at once when the
 * job has not started or has finished, else by the pool thread right after
 * run returns, so an owner that goes away mid-read (a client that hung up)
 * never waits and never leaves a thread writing into freed memory.
 *
 * Blocks.  Read-ahead memory comes in blocks of OL_SSE_POOL_BLOCK bytes
 * under one process-wide cap (blocks_per_thread per pool thread): past it
 * ol_sse_pool_block_take answers NULL and the reader opens its windows
 * itself, as a small read does.  A few freed blocks are kept for the next
 * reader (fresh pages cost a fault each).
 *
 * Threads: every function may be called from any thread; one job has one
 * owner thread at a time.  Waiting parks a fiber (core/loop.h,
 * ol_completion) or blocks a plain thread. */
#ifndef OL_OBJ_SSE_POOL_H
#define OL_OBJ_SSE_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/loop.h"

#define OL_SSE_POOL_BLOCK (2u * 1024 * 1024)
#define OL_SSE_POOL_THREADS_MAX 32u

struct ol_sse_job {
    void (*run)(struct ol_sse_job *j);  /* on a pool thread */
    void (*drop)(struct ol_sse_job *j); /* frees the job (after a cancel) */
    /* The pool's: */
    struct ol_sse_job *next;
    int state;
    bool abandoned;
    struct ol_completion *waiter;
};

/* Threads that stay awake after a job (see spin_us below), at most. */
#define OL_SSE_POOL_SPIN_THREADS 2u
#define OL_SSE_POOL_SPIN_MAX_US 10000u

/* Starts n threads (at most OL_SSE_POOL_THREADS_MAX) that the process keeps
 * until ol_sse_pool_stop; 0 turns read-ahead off.  Call before any read
 * uses the pool (at start-up); a second call with a pool running changes
 * nothing and answers 0.  The block cap is blocks_per_thread * n.
 * spin_us (at most OL_SSE_POOL_SPIN_MAX_US): after finishing a job and
 * finding the queue empty, up to OL_SSE_POOL_SPIN_THREADS threads watch
 * the queue for this long before they sleep (a wake-up costs about as much
 * as a window's part); 0: they sleep at once.  A pool with no jobs spends
 * no CPU.  0, -EINVAL, or pthread_create's error (the threads started so
 * far stay). */
int ol_sse_pool_start(unsigned n, unsigned blocks_per_thread, unsigned spin_us);
/* Joins the threads once no job is queued or running, frees the kept
 * blocks (tests; the server never stops it). */
void ol_sse_pool_stop(void);
/* Threads running now (0: read-ahead off). */
unsigned ol_sse_pool_threads(void);
/* Pool threads for `cores` online cores when the configuration says
 * "derive it" (see sse_pool.c for the measurements behind it). */
unsigned ol_sse_pool_auto(long cores);

/* A block (OL_SSE_POOL_BLOCK bytes), or NULL at the cap / without memory. */
void *ol_sse_pool_block_take(void);
void ol_sse_pool_block_give(void *b);
/* Blocks taken and not given back (tests). */
unsigned ol_sse_pool_blocks_out(void);

/* Queues j (run and drop set).  The pool must be running. */
void ol_sse_pool_submit(struct ol_sse_job *j);
/* Until j's run has returned. */
void ol_sse_pool_wait(struct ol_sse_job *j);
/* True when j's run has returned (no wait). */
bool ol_sse_pool_done(struct ol_sse_job *j);
/* Takes j back while it is still queued and runs it on the calling thread
 * (true), as if a pool thread had; false when a pool thread has it. */
bool ol_sse_pool_steal(struct ol_sse_job *j);
/* Until j's run has returned, doing it here when no pool thread took it
 * yet (a sleeping pool's wake-up costs more than a short job: true), else
 * spinning up to spin_us before waiting (false). */
bool ol_sse_pool_finish(struct ol_sse_job *j, unsigned spin_us);
/* Gives j up: drop(j) now or, while it runs, on its thread after run. */
void ol_sse_pool_cancel(struct ol_sse_job *j);

#endif
