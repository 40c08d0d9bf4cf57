/* The CUDA driver, loaded at run time (core/cuda.h). */
#include "core/cuda.h"

#include <ctype.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ol_cuda cu;
static _Atomic bool cu_ok;
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;
static bool cu_failed; /* loaded, but unusable: never tried again (cu_mu) */

/* cuda.h maps several names to a _v2 entry point (64-bit sizes, newer
 * semantics); the plain symbol is the old ABI.  Take the _v2 one first. */
static void *sym(void *h, const char *name)
{
    char v2[96];
    snprintf(v2, sizeof(v2), "%s_v2", name);
    void *p = dlsym(h, v2);
    return p ? p : dlsym(h, name);
}

/* Under cu_mu.  Returns whether the library was found (loaded or not). */
static bool load(int flags)
{
    const char *env = getenv("OPENLAKE_CUDA");
    if (env && strcmp(env, "0") == 0)
        return false;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | flags);
    if (!h)
        return false;
    struct {
        void **slot;
        const char *name;
    } t[] = {
        {(void **)&cu.init, "cuInit"},
        {(void **)&cu.device_count, "cuDeviceGetCount"},
        {(void **)&cu.device_get, "cuDeviceGet"},
        {(void **)&cu.device_uuid, "cuDeviceGetUuid"},
        {(void **)&cu.primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&cu.primary_ctx_release, "cuDevicePrimaryCtxRelease"},
        {(void **)&cu.ctx_push, "cuCtxPushCurrent"},
        {(void **)&cu.ctx_pop, "cuCtxPopCurrent"},
        {(void **)&cu.pointer_attr, "cuPointerGetAttribute"},
        {(void **)&cu.ipc_get, "cuIpcGetMemHandle"},
        {(void **)&cu.ipc_open, "cuIpcOpenMemHandle"},
        {(void **)&cu.ipc_close, "cuIpcCloseMemHandle"},
        {(void **)&cu.mem_range, "cuMemGetAddressRange"},
        {(void **)&cu.host_alloc, "cuMemHostAlloc"},
        {(void **)&cu.host_free, "cuMemFreeHost"},
        {(void **)&cu.stream_create, "cuStreamCreate"},
        {(void **)&cu.stream_destroy, "cuStreamDestroy"},
        {(void **)&cu.stream_sync, "cuStreamSynchronize"},
        {(void **)&cu.memcpy_htod_async, "cuMemcpyHtoDAsync"},
        {(void **)&cu.error_name, "cuGetErrorName"},
        {(void **)&cu.mem_alloc, "cuMemAlloc"},
        {(void **)&cu.mem_free, "cuMemFree"},
        {(void **)&cu.memcpy_dtoh, "cuMemcpyDtoH"},
        {(void **)&cu.memset_d8, "cuMemsetD8"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        *t[i].slot = sym(h, t[i].name);
        if (!*t[i].slot) {
            dlclose(h);
            memset(&cu, 0, sizeof(cu));
            return true;
        }
    }
    /* A driver without a device (or a broken install) fails here: the
     * process goes on without CUDA.  The handle stays open for the
     * process's life, as the function pointers point into it. */
    if (cu.init(0) != 0) {
        memset(&cu, 0, sizeof(cu));
        return true;
    }
    cu_ok = true;
    return true;
}

static int find_cuda(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcuda.so")) {
        *(bool *)arg = true;
        return 1;
    }
    return 0;
}

const struct ol_cuda *ol_cuda(bool only_loaded)
{
    if (cu_ok)
        return &cu;
    /* A client asks on every GET whether its buffer may be GPU memory.  In
     * a process without CUDA, dlopen(RTLD_NOLOAD) still searches the file
     * system (130 us here); the list of loaded objects is 40 ns. */
    bool loaded = false;
    if (only_loaded && (dl_iterate_phdr(find_cuda, &loaded), !loaded))
        return NULL;
    pthread_mutex_lock(&cu_mu);
    /* Not found among the loaded libraries is asked again next time: a
     * process (PyTorch) starts CUDA when it first needs it, perhaps after
     * the client was opened. */
    if (!cu_ok && !cu_failed && load(only_loaded ? RTLD_NOLOAD : 0))
        cu_failed = !cu_ok;
    pthread_mutex_unlock(&cu_mu);
    return cu_ok ? &cu : NULL;
}

const char *ol_cuda_err(const struct ol_cuda *c, ol_cu_result r)
{
    const char *n = NULL;
    if (c && c->error_name && c->error_name(r, &n) == 0 && n)
        return n;
    return "CUDA error";
}

bool ol_host_boot_id(uint8_t out[16])
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return false;
    char s[64];
    bool ok = fgets(s, sizeof(s), f) != NULL;
    fclose(f);
    if (!ok)
        return false;
    unsigned n = 0;
    for (const char *p = s; *p && n < 32; p++) {
        if (!isxdigit((unsigned char)*p))
            continue;
        unsigned v = (unsigned)(isdigit((unsigned char)*p) ? *p - '0'
                                                          : tolower((unsigned char)*p) - 'a' + 10);
        if (n % 2 == 0)
            out[n / 2] = (uint8_t)(v << 4);
        else
            out[n / 2] |= (uint8_t)v;
        n++;
    }
    return n == 32;
}
