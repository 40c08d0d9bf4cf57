/* CUDA IPC reads (native/cuda_ipc.h). */
#include "native/cuda_ipc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

enum {
    MAX_DEVICES = 16,
    MAX_OPEN = 16,              /* handles open at once */
    IDLE_MS = 2000,             /* an unused handle is closed after this */
    BOUNCE_BYTES = 8 << 20,     /* each of a thread's two bounce buffers */
};

struct ol_native_cuda_map {
    struct ol_cu_ipc_handle handle;
    int dev;            /* index in x->dev */
    ol_cu_devptr base;  /* the allocation, as mapped here */
    size_t size;
    unsigned refs;
    uint64_t used_ms;
    bool open;
};

struct ol_native_cuda {
    const struct ol_cuda *cu;
    int ndev;
    ol_cu_device dev[MAX_DEVICES];
    uint8_t uuid[MAX_DEVICES][OL_CU_UUID_BYTES];
    ol_cu_ctx ctx[MAX_DEVICES]; /* primary contexts, retained on first use (ctx_of) */
    pthread_mutex_t mu;
    /* Open handles, shared by the requests that write into the same
     * allocation at once (each at its own offset). */
    struct ol_native_cuda_map open[MAX_OPEN];
};

/* A thread's copy state, per device: its stream and two pinned bounce
 * buffers.  Worker threads live as long as the port. */
struct tstate {
    ol_cu_stream stream[MAX_DEVICES];
    uint8_t *bounce[MAX_DEVICES][2];
};
static __thread struct tstate ts;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int ol_native_cuda_create(struct ol_native_cuda **out)
{
    *out = NULL;
    const struct ol_cuda *cu = ol_cuda(false);
    if (!cu)
        return -ENOTSUP;
    int n = 0;
    if (cu->device_count(&n) != 0 || n <= 0)
        return -ENOTSUP;
    struct ol_native_cuda *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->cu = cu;
    pthread_mutex_init(&x->mu, NULL);
    for (int i = 0; i < n && x->ndev < MAX_DEVICES; i++) {
        int k = x->ndev;
        if (cu->device_get(&x->dev[k], i) != 0 || cu->device_uuid(x->uuid[k], x->dev[k]) != 0)
            continue;
        /* The primary context is what the client's runtime uses too; it is
         * created on first retain (some hundred MB of device memory), so
         * retain lazily (ctx_of), not here. */
        x->ndev++;
    }
    if (x->ndev == 0) {
        free(x);
        return -ENOTSUP;
    }
    *out = x;
    return 0;
}

/* The device's primary context, retained on first use (under x->mu). */
static ol_cu_ctx ctx_of(struct ol_native_cuda *x, int d)
{
    if (!x->ctx[d] && x->cu->primary_ctx_retain(&x->ctx[d], x->dev[d]) != 0)
        x->ctx[d] = NULL;
    return x->ctx[d];
}

static void close_entry(struct ol_native_cuda *x, struct ol_native_cuda_map *m)
{
    if (x->cu->ctx_push(x->ctx[m->dev]) == 0) {
        (void)x->cu->ipc_close(m->base);
        ol_cu_ctx o;
        (void)x->cu->ctx_pop(&o);
    }
    m->open = false;
}

void ol_native_cuda_destroy(struct ol_native_cuda *x)
{
    if (!x)
        return;
    for (unsigned i = 0; i < MAX_OPEN; i++)
        if (x->open[i].open)
            close_entry(x, &x->open[i]);
    for (int d = 0; d < x->ndev; d++)
        if (x->ctx[d])
            (void)x->cu->primary_ctx_release(x->dev[d]);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

void ol_native_cuda_sweep(struct ol_native_cuda *x)
{
    if (!x)
        return;
    uint64_t now = now_ms();
    pthread_mutex_lock(&x->mu);
    for (unsigned i = 0; i < MAX_OPEN; i++) {
        struct ol_native_cuda_map *m = &x->open[i];
        if (m->open && m->refs == 0 && now - m->used_ms >= IDLE_MS)
            close_entry(x, m);
    }
    pthread_mutex_unlock(&x->mu);
}

int ol_native_cuda_open(struct ol_native_cuda *x, const struct ol_native_cuda_dst *d,
                        uint64_t len, struct ol_native_cuda_map **out)
{
    *out = NULL;
    int dev = -1;
    for (int i = 0; i < x->ndev; i++)
        if (memcmp(x->uuid[i], d->uuid, OL_CU_UUID_BYTES) == 0)
            dev = i;
    if (dev < 0)
        return -ENODEV;
    pthread_mutex_lock(&x->mu);
    struct ol_native_cuda_map *m = NULL, *spare = NULL;
    for (unsigned i = 0; i < MAX_OPEN; i++) {
        struct ol_native_cuda_map *e = &x->open[i];
        if (e->open && e->dev == dev && memcmp(&e->handle, &d->handle, sizeof(d->handle)) == 0) {
            m = e;
            break;
        }
        /* A free slot, else the least recently used idle one. */
        if (!e->open && (!spare || spare->open))
            spare = e;
        else if (e->open && e->refs == 0 && (!spare || (spare->open && e->used_ms < spare->used_ms)))
            spare = e;
    }
    int rc = 0;
    if (!m) {
        if (!spare) {
            rc = -EBUSY; /* MAX_OPEN destinations being written at once */
            goto out;
        }
        ol_cu_ctx ctx = ctx_of(x, dev);
        if (!ctx || x->cu->ctx_push(ctx) != 0) {
            rc = -EIO;
            goto out;
        }
        if (spare->open) {
            (void)x->cu->ipc_close(spare->base);
            spare->open = false;
        }
        ol_cu_devptr p;
        ol_cu_result r = x->cu->ipc_open(&p, d->handle, OL_CU_IPC_LAZY_PEER);
        ol_cu_devptr base = 0;
        size_t size = 0;
        if (r == 0 && x->cu->mem_range(&base, &size, p) != 0) {
            (void)x->cu->ipc_close(p);
            r = -1;
        }
        ol_cu_ctx o;
        (void)x->cu->ctx_pop(&o);
        if (r != 0) {
            /* Not an allocation of a process on this host's driver (or one
             * freed meanwhile): nothing to write to. */
            rc = -EXDEV;
            goto out;
        }
        m = spare;
        m->handle = d->handle;
        m->dev = dev;
        m->base = p;
        m->size = base == p ? size : size - (size_t)(p - base);
        m->refs = 0;
        m->open = true;
    }
    if (d->off > m->size || len > m->size - d->off) {
        rc = -EINVAL;
        m->used_ms = now_ms();
        goto out;
    }
    m->refs++;
    m->used_ms = now_ms();
    *out = m;
out:
    pthread_mutex_unlock(&x->mu);
    return rc;
}

void ol_native_cuda_close(struct ol_native_cuda *x, struct ol_native_cuda_map *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&x->mu);
    m->refs--;
    m->used_ms = now_ms();
    pthread_mutex_unlock(&x->mu);
}

/* This thread's stream and bounce buffers for device d, made on first use
 * with d's context current. */
static int thread_state(struct ol_native_cuda *x, int d)
{
    if (ts.stream[d])
        return 0;
    ol_cu_stream st = NULL;
    void *b[2] = {NULL, NULL};
    int rc = x->cu->stream_create(&st, OL_CU_STREAM_NON_BLOCKING) == 0 ? 0 : -EIO;
    for (int i = 0; i < 2 && rc == 0; i++)
        if (x->cu->host_alloc(&b[i], BOUNCE_BYTES, 0) != 0) {
            b[i] = NULL;
            rc = -ENOMEM;
        }
    if (rc < 0) { /* nothing half made stays: the next copy tries again */
        for (int i = 0; i < 2; i++)
            if (b[i])
                (void)x->cu->host_free(b[i]);
        if (st)
            (void)x->cu->stream_destroy(st);
        return rc;
    }
    ts.bounce[d][0] = b[0];
    ts.bounce[d][1] = b[1];
    ts.stream[d] = st;
    return 0;
}

static int bounce_copy(struct ol_native_cuda *x, int d, ol_cu_devptr dst, const uint8_t *src,
                       size_t n)
{
    const struct ol_cuda *cu = x->cu;
    ol_cu_stream s = ts.stream[d];
    unsigned cur = 0;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < BOUNCE_BYTES ? n - done : BOUNCE_BYTES;
        /* Fill one buffer while the other one's copy runs; the stream's
         * order makes the sync below wait for that earlier copy only. */
        memcpy(ts.bounce[d][cur], src + done, k);
        if (cu->stream_sync(s) != 0 || cu->memcpy_htod_async(dst + done, ts.bounce[d][cur], k, s) != 0)
            return -EIO;
        done += k;
        cur ^= 1;
    }
    return cu->stream_sync(s) == 0 ? 0 : -EIO;
}

int ol_native_cuda_copy(struct ol_native_cuda *x, struct ol_native_cuda_map *m, uint64_t off,
                        const void *src, size_t n)
{
    const struct ol_cuda *cu = x->cu;
    if (n == 0)
        return 0;
    if (cu->ctx_push(x->ctx[m->dev]) != 0)
        return -EIO;
    int rc = thread_state(x, m->dev);
    if (rc < 0)
        goto out;
    if (off > m->size || n > m->size - off) {
        rc = -EINVAL;
        goto out;
    }
    ol_cu_devptr dst = m->base + off;
    const uint8_t *p = src;
    rc = bounce_copy(x, m->dev, dst, p, n);
out:;
    ol_cu_ctx o;
    (void)cu->ctx_pop(&o);
    if (rc < 0)
        ol_warn("native: CUDA copy of %zu bytes failed", n);
    return rc;
}
