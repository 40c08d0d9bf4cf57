/* The CUDA driver calls OpenLake makes, loaded at run time.
 *
 * Neither the server nor libopenlake links against CUDA: Debian has no CUDA
 * packages, and a build must not need them.  Where the NVIDIA driver is
 * installed (libcuda.so.1), ol_cuda() loads it once and hands back the few
 * entry points below; elsewhere it returns NULL and the callers take their
 * CUDA-less path.  The types are declared here with the driver's ABI
 * (cuda.h of CUDA 11 to 13: the _v2 entry points where cuda.h maps a name
 * to one), so no CUDA header is needed either.
 *
 * Threads: ol_cuda() may be called from any thread (the first call loads,
 * under a once).  The functions are the driver's own and follow its rules
 * (a context must be current for most of them: ol_cuda_ctx_push/pop).
 *
 * Where it is used: native/cuda_ipc.h (the server copies object bytes into
 * a local client's GPU memory) and client/cuda_ipc.c (the client names its
 * GPU memory to the server).  docs/PROTOCOL.md "CUDA IPC reads". */
#ifndef OL_CORE_CUDA_H
#define OL_CORE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int ol_cu_result;                 /* CUresult: 0 = CUDA_SUCCESS */
typedef unsigned long long ol_cu_devptr;  /* CUdeviceptr */
typedef int ol_cu_device;                 /* CUdevice */
typedef struct ol_cu_ctx_s *ol_cu_ctx;    /* CUcontext */
typedef struct ol_cu_stream_s *ol_cu_stream; /* CUstream */

enum {
    OL_CU_IPC_HANDLE_BYTES = 64, /* CU_IPC_HANDLE_SIZE */
    OL_CU_UUID_BYTES = 16,
    OL_CU_ATTR_CONTEXT = 1,      /* CU_POINTER_ATTRIBUTE_CONTEXT */
    OL_CU_ATTR_MEMORY_TYPE = 2,  /* ..._MEMORY_TYPE */
    OL_CU_ATTR_DEVICE_ORDINAL = 9,
    OL_CU_ATTR_RANGE_START = 11,
    OL_CU_ATTR_RANGE_SIZE = 12,
    OL_CU_MEMORYTYPE_DEVICE = 2,
    OL_CU_IPC_LAZY_PEER = 1,        /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    OL_CU_STREAM_NON_BLOCKING = 1,
};

struct ol_cu_ipc_handle {
    uint8_t b[OL_CU_IPC_HANDLE_BYTES];
};

struct ol_cuda {
    ol_cu_result (*init)(unsigned flags);
    ol_cu_result (*device_count)(int *n);
    ol_cu_result (*device_get)(ol_cu_device *d, int ordinal);
    ol_cu_result (*device_uuid)(uint8_t uuid[OL_CU_UUID_BYTES], ol_cu_device d);
    ol_cu_result (*primary_ctx_retain)(ol_cu_ctx *ctx, ol_cu_device d);
    ol_cu_result (*primary_ctx_release)(ol_cu_device d);
    ol_cu_result (*ctx_push)(ol_cu_ctx ctx);
    ol_cu_result (*ctx_pop)(ol_cu_ctx *ctx);
    ol_cu_result (*pointer_attr)(void *data, int attr, ol_cu_devptr p);
    ol_cu_result (*ipc_get)(struct ol_cu_ipc_handle *h, ol_cu_devptr p);
    ol_cu_result (*ipc_open)(ol_cu_devptr *p, struct ol_cu_ipc_handle h, unsigned flags);
    ol_cu_result (*ipc_close)(ol_cu_devptr p);
    ol_cu_result (*mem_range)(ol_cu_devptr *base, size_t *size, ol_cu_devptr p);
    ol_cu_result (*host_alloc)(void **p, size_t len, unsigned flags);
    ol_cu_result (*host_free)(void *p);
    ol_cu_result (*stream_create)(ol_cu_stream *s, unsigned flags);
    ol_cu_result (*stream_destroy)(ol_cu_stream s);
    ol_cu_result (*stream_sync)(ol_cu_stream s);
    ol_cu_result (*memcpy_htod_async)(ol_cu_devptr dst, const void *src, size_t len,
                                      ol_cu_stream s);
    ol_cu_result (*error_name)(ol_cu_result r, const char **name);
    /* For tests (tests/integration/cuda_ipc_check.c). */
    ol_cu_result (*mem_alloc)(ol_cu_devptr *p, size_t len);
    ol_cu_result (*mem_free)(ol_cu_devptr p);
    ol_cu_result (*memcpy_dtoh)(void *dst, ol_cu_devptr src, size_t len);
    ol_cu_result (*memset_d8)(ol_cu_devptr dst, unsigned char v, size_t len);
};

/* The driver's entry points, loaded and cuInit'ed on the first call; NULL
 * where there is no driver (or OPENLAKE_CUDA=0 is set).  With only_loaded,
 * the library is looked for among those the process has loaded already
 * (a client must not start CUDA in a process that does not use it): NULL
 * when the process has not loaded libcuda. */
const struct ol_cuda *ol_cuda(bool only_loaded);

/* The driver's name for r ("CUDA_ERROR_INVALID_VALUE"), for logs. */
const char *ol_cuda_err(const struct ol_cuda *cu, ol_cu_result r);

/* This host's boot id (/proc/sys/kernel/random/boot_id, 16 bytes): two
 * processes with the same one run on one kernel, where CUDA IPC handles
 * can be opened.  false when it cannot be read. */
bool ol_host_boot_id(uint8_t out[16]);

#endif
