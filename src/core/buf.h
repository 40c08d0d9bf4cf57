/* Aligned I/O buffers from per-thread pools.
 *
 * Request bodies, segment writes and verified reads all move data through
 * large 4096-aligned buffers (O_DIRECT needs the alignment).  Allocating one
 * with malloc per request means an mmap, page faults on first touch and an
 * munmap: more than the request's own work for small objects.  Each thread
 * keeps freed buffers by size class (powers of two from 4 KiB to 4 MiB) and
 * hands them out again, so a loop in steady state allocates nothing.
 *
 * Any thread may free a buffer that another allocated: it joins the freeing
 * thread's pool.  Sizes outside the classes go straight to the allocator.
 * Buffers of 128 KiB and more are mapped from the kernel and a pool keeps at
 * most POOL_BYTES of them per thread, so memory freed after a burst of
 * requests goes back to the system (malloc's heap would keep it).
 */
#ifndef OL_CORE_BUF_H
#define OL_CORE_BUF_H

#include <stddef.h>
#include <stdint.h>

/* A buffer of at least len bytes, 4096-aligned; NULL when memory runs out. */
void *ol_buf_alloc(size_t len);
/* Frees a buffer from ol_buf_alloc; len must be the length asked for. */
void ol_buf_free(void *p, size_t len);
/* Fills the calling thread's pool with n buffers of len bytes (start-up). */
int ol_buf_prefill(size_t len, unsigned n);

/* ---- memory for request bodies in flight ----
 *
 * Every buffer that holds body bytes of a request in flight (a PUT's
 * receive buffer, an erasure-coded stripe and its parity, the store writer's
 * buffers, a GET's send buffer) is reserved from one process-wide budget
 * before it is allocated, so a crowd of slow or stalled clients cannot take
 * more memory than the budget, whatever they do.  A request that cannot get
 * its reservation waits a bounded time (ol_bodymem_reserve's wait_ms) and
 * then fails with -EBUSY, which the S3 layer answers with 503 SlowDown: the
 * server never over-commits and never crashes for want of memory.
 *
 * A request reserves once, for what it will hold at most (sized to its
 * body: a 4 KiB PUT reserves a few KiB), after its first body bytes have
 * arrived, and releases it when it ends; it never waits while holding a
 * reservation, so waiters cannot deadlock each other. */

/* Sets the budget: total bytes for every request together, and the most
 * one request may reserve.  0 total = the default, an eighth of physical
 * memory (at least 64 MiB).  Any thread; takes effect for later reserves. */
void ol_bodymem_configure(uint64_t total_bytes, uint64_t per_request_bytes);
/* Reserves bytes.  Returns 0, -EBUSY when the budget stays short for
 * wait_ms (or the request alone exceeds the per-request cap: at once).  In
 * a fiber it sleeps between tries; outside one it does not wait. */
int ol_bodymem_reserve(uint64_t bytes, unsigned wait_ms);
/* Returns a reservation (the same number of bytes). */
void ol_bodymem_release(uint64_t bytes);
/* Bytes reserved now, the total budget, and the refusals so far (metrics). */
uint64_t ol_bodymem_used(void);
uint64_t ol_bodymem_limit(void);
uint64_t ol_bodymem_refused(void);

/* A buffer of len bytes mapped straight from the kernel (4096-aligned,
 * zero-filled, untouched pages cost no memory) and unmapped on free, so a
 * big body buffer goes back to the system the moment it is freed instead of
 * staying in the allocator's heap.  NULL when memory runs out. */
void *ol_bodymem_map(size_t len);
/* Unmaps a buffer from ol_bodymem_map; len as asked for.  NULL is ignored. */
void ol_bodymem_unmap(void *p, size_t len);

#endif
