/* libopenlake: GETs into GPU memory through the node on this host
 * (GET_CUDA; the node's side is native/cuda_ipc.h, the wire
 * docs/PROTOCOL.md "CUDA IPC reads").
 *
 * The client names its destination by the CUDA IPC handle of the
 * allocation that holds it, the offset in it and the device's UUID; the
 * node opens the handle and copies the bytes in with the GPU's DMA engine.
 * Asked fresh for every call (cuIpcGetMemHandle is cheap): a handle cached
 * by address could name an allocation freed since, whose address a new one
 * took. */
#include "client/internal.h"

#include <errno.h>
#include <string.h>

#include "core/cuda.h"
#include "core/err.h"

bool olc_is_device_memory(const void *buf)
{
    const struct ol_cuda *cu = buf ? ol_cuda(true) : NULL;
    unsigned mt = 0;
    return cu && cu->pointer_attr(&mt, OL_CU_ATTR_MEMORY_TYPE, (ol_cu_devptr)(uintptr_t)buf) == 0 &&
           mt == OL_CU_MEMORYTYPE_DEVICE;
}

/* The IPC name of [buf, buf+len): device UUID, handle, offset. */
static int name_dst(const struct ol_cuda *cu, void *buf, uint64_t len, uint8_t uuid[16],
                    struct ol_cu_ipc_handle *h, uint64_t *off)
{
    ol_cu_devptr p = (ol_cu_devptr)(uintptr_t)buf;
    ol_cu_ctx ctx = NULL;
    int ord = -1;
    if (cu->pointer_attr(&ctx, OL_CU_ATTR_CONTEXT, p) != 0 ||
        cu->pointer_attr(&ord, OL_CU_ATTR_DEVICE_ORDINAL, p) != 0 || !ctx)
        return -EINVAL;
    /* The caller's thread need not have a current context (a pool thread
     * of the application): the pointer's own, for these calls. */
    if (cu->ctx_push(ctx) != 0)
        return -EIO;
    ol_cu_devptr base = 0;
    size_t size = 0;
    ol_cu_device dev;
    int rc = 0;
    /* Memory that cannot be exported (cuMemCreate's, pools') fails here. */
    if (cu->mem_range(&base, &size, p) != 0 || cu->ipc_get(h, base) != 0 ||
        cu->device_get(&dev, ord) != 0 || cu->device_uuid(uuid, dev) != 0)
        rc = -ENOTSUP;
    ol_cu_ctx o;
    (void)cu->ctx_pop(&o);
    if (rc == 0 && (p < base || p - base > size || len > size - (p - base)))
        rc = -EINVAL;
    *off = p - base;
    return rc;
}

static int64_t get_cuda_one(struct ol_client *c, const char *bucket, const char *key,
                            const char *if_match, uint64_t off, uint64_t len, const uint8_t uuid[16],
                            const struct ol_cu_ipc_handle *h, uint64_t dst_off,
                            struct ol_client_info *info)
{
    uint8_t a[4 * 8 + OL_NATIVE_MAX_BUCKET + OL_NATIVE_MAX_KEY + 80 + 16 + 64 + 8], r[512];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, key, strlen(key));
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_u64(&w, off);
    ol_wbuf_u64(&w, len);
    ol_wbuf_str(&w, if_match ? if_match : "", if_match ? strlen(if_match) : 0);
    ol_wbuf_bytes(&w, uuid, 16);
    ol_wbuf_bytes(&w, h->b, sizeof(h->b));
    ol_wbuf_u64(&w, dst_off);
    /* Node 0: the one HELLO said is on this host. */
    struct olc_call k = {.op = OL_COP_GET_CUDA, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .node = 0};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    int irc = olc_info(r, k.rctl_len, info);
    return irc < 0 ? irc : rc;
}

/* The node cannot do it for this client (no CUDA there, another host after
 * all, a device it does not have): fall back, and stop asking. */
static bool refused(int64_t rc)
{
    return rc == -ENOTSUP || rc == -ENODEV || rc == -EXDEV;
}

bool olc_cuda_get(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                  void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result)
{
    if (!c->cuda_ipc_node || c->cuda_ipc_off || !olc_is_device_memory(buf))
        return false;
    const struct ol_cuda *cu = ol_cuda(true);
    uint8_t uuid[16];
    struct ol_cu_ipc_handle h;
    uint64_t doff;
    if (name_dst(cu, buf, cap, uuid, &h, &doff) < 0)
        return false;
    struct ol_client_info first;
    uint64_t want = cap < OL_NATIVE_MAX_CUDA ? cap : OL_NATIVE_MAX_CUDA;
    int64_t n = get_cuda_one(c, bucket, key, NULL, offset, want, uuid, &h, doff, &first);
    if (refused(n)) {
        c->cuda_ipc_off = true;
        return false;
    }
    *result = n;
    if (n < 0)
        return true;
    uint64_t got = (uint64_t)n;
    /* The rest pinned to the first piece's ETag, as ol_client_get does. */
    uint64_t end = first.size - offset < cap ? first.size - offset : cap;
    while (got < end) {
        uint64_t l = end - got < OL_NATIVE_MAX_CUDA ? end - got : OL_NATIVE_MAX_CUDA;
        n = get_cuda_one(c, bucket, key, first.etag, offset + got, l, uuid, &h, doff + got, NULL);
        if (n <= 0) {
            *result = n < 0 ? n : -EIO;
            return true;
        }
        got += (uint64_t)n;
    }
    c->st_cuda_ipc++;
    if (info)
        *info = first;
    *result = (int64_t)got;
    return true;
}
