/* CUDA IPC reads: the native port copies object bytes straight into the GPU
 * memory of a client on the same host.
 *
 * Debian's UCX has no CUDA transport, so without this a GET into GPU memory
 * is two copies through UCX's shared memory and a pinned staging buffer
 * before the host-to-device copy (bench/RESULTS.md "Checkpoints and weights
 * on a GPU").  A client on this host instead names its destination with a
 * CUDA IPC handle of its allocation (cuIpcGetMemHandle) and the byte offset
 * in it; the port opens that handle in its own process and the DMA engine
 * copies them into the client's memory from a pinned bounce buffer that a
 * worker fills from the page cache: one CPU copy, by as many workers as
 * there are copies in flight, instead of three.
 *
 * What the client can make the port do: write into GPU memory that the
 * client itself exported (an IPC handle is only issued by the process that
 * owns the allocation, for that allocation), inside that allocation's
 * bounds (checked here), with bytes of an object the client may GET
 * (authorized before this is called).  A handle that does not open here (a
 * client on another host, garbage) is -EXDEV; a device UUID that is not on
 * this host, -ENODEV.  Nothing else is reachable through it.
 *
 * Threads: any worker thread may call open/copy/close at once (the handle
 * cache has its own lock; each thread copies on its own stream per device).
 * Errors: negative errno. */
#ifndef OL_NATIVE_CUDA_IPC_H
#define OL_NATIVE_CUDA_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda.h"

struct ol_native_cuda;
struct ol_native_cuda_map;

/* The destination of a GET_CUDA (docs/PROTOCOL.md): the device's UUID, the
 * IPC handle of the client's allocation, and the offset in it. */
struct ol_native_cuda_dst {
    uint8_t uuid[OL_CU_UUID_BYTES];
    struct ol_cu_ipc_handle handle;
    uint64_t off;
};

/* -ENOTSUP where there is no CUDA driver or device (OPENLAKE_CUDA=0 too). */
int ol_native_cuda_create(struct ol_native_cuda **out);
void ol_native_cuda_destroy(struct ol_native_cuda *x);

/* Opens d for len bytes: -ENODEV, -EXDEV (above), -EINVAL when
 * [d->off, d->off + len) is not inside the allocation.  Opened handles
 * are cached for a few seconds (opening one costs milliseconds), never past
 * ol_native_cuda_sweep's idle limit. */
int ol_native_cuda_open(struct ol_native_cuda *x, const struct ol_native_cuda_dst *d,
                        uint64_t len, struct ol_native_cuda_map **out);
/* Copies n bytes from src to byte off of the opened allocation (the
 * request's d->off plus what it copied so far; -EINVAL past its end), and
 * returns once they are in device memory.  The bytes go through this
 * thread's two pinned bounce buffers, one filled while the other one's DMA
 * runs.  (Registering the page-cache mapping itself for the DMA, which
 * saves that copy, measured slower: 12-15 GB/s against 19-26 GB/s bounced,
 * 4-16 workers, H200 host; bench/RESULTS.md "CUDA IPC reads": the driver
 * serializes the pinning.)  -EIO when the driver fails. */
int ol_native_cuda_copy(struct ol_native_cuda *x, struct ol_native_cuda_map *m, uint64_t off,
                        const void *src, size_t n);
void ol_native_cuda_close(struct ol_native_cuda *x, struct ol_native_cuda_map *m);

/* Closes the cached handles unused for 2 s (an allocation the client freed
 * stays alive while a handle to it is open here).  Any thread. */
void ol_native_cuda_sweep(struct ol_native_cuda *x);

#endif
