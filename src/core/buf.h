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
 */
#ifndef OL_CORE_BUF_H
#define OL_CORE_BUF_H

#include <stddef.h>

/* A buffer of at least len bytes, 4096-aligned; NULL when memory runs out. */
void *ol_buf_alloc(size_t len);
/* Frees a buffer from ol_buf_alloc; len must be the length asked for. */
void ol_buf_free(void *p, size_t len);
/* Fills the calling thread's pool with n buffers of len bytes (start-up). */
int ol_buf_prefill(size_t len, unsigned n);

#endif
