#include "core/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/loop.h"

#define MIN_SHIFT 12u
#define MAX_SHIFT 22u
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
/* Per thread and class, keep at most this many bytes cached. */
#define CACHE_BYTES (64u << 20)
/* Classes from this size up are mapped from the kernel (never malloc's heap,
 * which keeps what it frees) and cached in one pool for the process, under
 * a mutex (they are taken a few times per MiB moved, so the lock is cheap,
 * and a buffer freed by another thread than the one that took it, as a
 * store writer's background write does, comes back to the same pool).  The
 * pool caches freed buffers while it holds no more than POOL_USE_FACTOR times
 * what the process has in use (POOL_FLOOR_BYTES at least, POOL_MAX_BYTES at
 * most): under a steady
 * load every allocation comes from the cache (a freshly mapped buffer costs
 * a page fault per 4 KiB on first touch: EC PUTs ran at half speed when it
 * missed), and when a burst ends each free shrinks the cache with the use,
 * so what the burst took beyond the floor goes back to the system. */
#define MAP_SHIFT 17u
#define POOL_FLOOR_BYTES (32u << 20)
#define POOL_MAX_BYTES (1024u << 20)
#define POOL_USE_FACTOR 4u

struct free_buf {
    struct free_buf *next;
};

/* The small classes: per thread, no lock. */
struct pool {
    struct free_buf *head[NCLASS];
    unsigned count[NCLASS];
};

static __thread struct pool *tl_pool;
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* The mapped classes: one pool. */
static struct {
    pthread_mutex_t mu;
    struct free_buf *head[NCLASS];
    size_t cached; /* bytes in head[] */
    size_t in_use; /* bytes taken and not yet freed */
} g_mapped = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void pool_destroy(void *arg)
{
    struct pool *p = arg;
    for (unsigned c = 0; c < NCLASS; c++) {
        while (p->head[c]) {
            struct free_buf *b = p->head[c];
            p->head[c] = b->next;
            free(b);
        }
    }
    free(p);
}

static void make_key(void)
{
    pthread_key_create(&pool_key, pool_destroy);
}

static struct pool *pool_get(void)
{
    if (tl_pool)
        return tl_pool;
    pthread_once(&pool_once, make_key);
    tl_pool = calloc(1, sizeof(*tl_pool));
    if (tl_pool)
        pthread_setspecific(pool_key, tl_pool);
    return tl_pool;
}

/* The class index for len, or -1 when it is outside the pooled range. */
static int class_of(size_t len)
{
    unsigned shift = MIN_SHIFT;
    while (shift <= MAX_SHIFT && ((size_t)1 << shift) < len)
        shift++;
    return shift > MAX_SHIFT ? -1 : (int)(shift - MIN_SHIFT);
}

static bool mapped_class(int c)
{
    return c < 0 || (unsigned)c + MIN_SHIFT >= MAP_SHIFT;
}

static void *mapped_take(int c, size_t bytes)
{
    pthread_mutex_lock(&g_mapped.mu);
    struct free_buf *b = g_mapped.head[c];
    if (b) {
        g_mapped.head[c] = b->next;
        g_mapped.cached -= bytes;
    }
    g_mapped.in_use += bytes;
    pthread_mutex_unlock(&g_mapped.mu);
    if (b)
        return b;
    void *m = ol_bodymem_map(bytes);
    if (!m) {
        pthread_mutex_lock(&g_mapped.mu);
        g_mapped.in_use -= bytes;
        pthread_mutex_unlock(&g_mapped.mu);
    }
    return m;
}

static void mapped_give(int c, void *p, size_t bytes)
{
    pthread_mutex_lock(&g_mapped.mu);
    g_mapped.in_use = g_mapped.in_use > bytes ? g_mapped.in_use - bytes : 0;
    /* Room for the swings of a steady load (requests start and end out of
     * step, so the use dips while the cache refills), not for a past burst. */
    size_t want = g_mapped.in_use * POOL_USE_FACTOR;
    size_t keep = want > POOL_FLOOR_BYTES ? want : POOL_FLOOR_BYTES;
    keep = keep < POOL_MAX_BYTES ? keep : POOL_MAX_BYTES;
    /* Shrink with the use: what is cached past keep is unmapped, this
     * buffer first. */
    struct free_buf *drop = NULL;
    if (g_mapped.cached + bytes <= keep) {
        struct free_buf *b = p;
        b->next = g_mapped.head[c];
        g_mapped.head[c] = b;
        g_mapped.cached += bytes;
        p = NULL;
    }
    for (int k = NCLASS - 1; k >= 0 && g_mapped.cached > keep; k--) {
        while (g_mapped.head[k] && g_mapped.cached > keep) {
            struct free_buf *b = g_mapped.head[k];
            g_mapped.head[k] = b->next;
            g_mapped.cached -= (size_t)1 << (k + (int)MIN_SHIFT);
            /* The class travels in the list's order: unmapped below. */
            b->next = drop;
            drop = b;
            /* Remember the size in the freed buffer itself. */
            ((size_t *)(void *)b)[1] = (size_t)1 << (k + (int)MIN_SHIFT);
        }
    }
    pthread_mutex_unlock(&g_mapped.mu);
    if (p)
        ol_bodymem_unmap(p, bytes);
    while (drop) {
        struct free_buf *b = drop;
        drop = b->next;
        ol_bodymem_unmap(b, ((size_t *)(void *)b)[1]);
    }
}

void *ol_buf_alloc(size_t len)
{
    int c = class_of(len ? len : 1);
    void *p = NULL;
    if (c < 0)
        return ol_bodymem_map(len);
    size_t bytes = (size_t)1 << (c + (int)MIN_SHIFT);
    if (mapped_class(c))
        return mapped_take(c, bytes);
    struct pool *pl = pool_get();
    if (pl && pl->head[c]) {
        struct free_buf *b = pl->head[c];
        pl->head[c] = b->next;
        pl->count[c]--;
        return b;
    }
    return posix_memalign(&p, 4096, bytes) == 0 ? p : NULL;
}

void ol_buf_free(void *p, size_t len)
{
    if (!p)
        return;
    int c = class_of(len ? len : 1);
    if (c < 0) {
        ol_bodymem_unmap(p, len);
        return;
    }
    size_t bytes = (size_t)1 << (c + (int)MIN_SHIFT);
    if (mapped_class(c)) {
        mapped_give(c, p, bytes);
        return;
    }
    struct pool *pl = pool_get();
    if (!pl || ((size_t)pl->count[c] + 1) * bytes > CACHE_BYTES) {
        free(p);
        return;
    }
    struct free_buf *b = p;
    b->next = pl->head[c];
    pl->head[c] = b;
    pl->count[c]++;
}

int ol_buf_prefill(size_t len, unsigned n)
{
    void *bufs[256];
    if (n > 256)
        n = 256;
    unsigned got = 0;
    for (; got < n; got++) {
        bufs[got] = ol_buf_alloc(len);
        if (!bufs[got])
            break;
    }
    for (unsigned i = 0; i < got; i++)
        ol_buf_free(bufs[i], len);
    return got == n ? 0 : -ENOMEM;
}

/* ---- memory for request bodies in flight ---- */

static _Atomic uint64_t bm_used;
static _Atomic uint64_t bm_limit;   /* 0 until configured: the default */
static _Atomic uint64_t bm_per_req; /* 0: no cap of its own */
static _Atomic uint64_t bm_refused;

#define BM_MIN_DEFAULT (64ull << 20)

static uint64_t default_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long psz = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    uint64_t v = ram / 8;
    return v < BM_MIN_DEFAULT ? BM_MIN_DEFAULT : v;
}

void ol_bodymem_configure(uint64_t total_bytes, uint64_t per_request_bytes)
{
    atomic_store(&bm_limit, total_bytes ? total_bytes : default_limit());
    atomic_store(&bm_per_req, per_request_bytes);
}

uint64_t ol_bodymem_limit(void)
{
    uint64_t l = atomic_load(&bm_limit);
    if (l == 0) {
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&bm_limit, &zero, default_limit());
        l = atomic_load(&bm_limit);
    }
    return l;
}

uint64_t ol_bodymem_used(void)
{
    return atomic_load(&bm_used);
}

uint64_t ol_bodymem_refused(void)
{
    return atomic_load(&bm_refused);
}

/* One try: takes bytes when they fit under the limit. */
static bool bm_take(uint64_t bytes, uint64_t limit)
{
    uint64_t cur = atomic_load(&bm_used);
    /* Bounded: each failed exchange means another thread moved the count. */
    for (unsigned i = 0; i < 1000000; i++) {
        if (cur > limit || bytes > limit - cur)
            return false;
        if (atomic_compare_exchange_weak(&bm_used, &cur, cur + bytes))
            return true;
    }
    return false;
}

int ol_bodymem_reserve(uint64_t bytes, unsigned wait_ms)
{
    if (bytes == 0)
        return 0;
    uint64_t limit = ol_bodymem_limit();
    uint64_t per = atomic_load(&bm_per_req);
    if ((per && bytes > per) || bytes > limit) {
        atomic_fetch_add(&bm_refused, 1);
        return -EBUSY;
    }
    if (bm_take(bytes, limit))
        return 0;
    /* Backpressure: the request waits for others to finish, in short
     * sleeps (the budget is shared by every thread, so there is no one
     * loop to be woken by), and gives up after wait_ms. */
    bool can_sleep = ol_fiber_current() != NULL;
    uint64_t deadline = ol_now_ms() + wait_ms;
    for (unsigned i = 0; can_sleep && i < 1000000 && ol_now_ms() < deadline; i++) {
        ol_io_sleep_ms(5);
        if (bm_take(bytes, limit))
            return 0;
    }
    atomic_fetch_add(&bm_refused, 1);
    return -EBUSY;
}

void ol_bodymem_release(uint64_t bytes)
{
    if (bytes == 0)
        return;
    uint64_t prev = atomic_fetch_sub(&bm_used, bytes);
    (void)prev;
    /* A release of more than was reserved is a bug of the caller. */
    if (prev < bytes)
        abort();
}

void *ol_bodymem_map(size_t len)
{
    size_t rounded = (len + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, rounded ? rounded : 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ol_bodymem_unmap(void *p, size_t len)
{
    if (!p)
        return;
    size_t rounded = (len + 4095) & ~(size_t)4095;
    munmap(p, rounded ? rounded : 4096);
}
