#include "core/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define MIN_SHIFT 12u
#define MAX_SHIFT 22u
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
/* Per thread and class, keep at most this many bytes cached. */
#define CACHE_BYTES (64u << 20)

struct free_buf {
    struct free_buf *next;
};

struct pool {
    struct free_buf *head[NCLASS];
    unsigned count[NCLASS];
};

static __thread struct pool *tl_pool;
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

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

void *ol_buf_alloc(size_t len)
{
    int c = class_of(len ? len : 1);
    void *p = NULL;
    if (c < 0) {
        size_t rounded = (len + 4095) & ~(size_t)4095;
        return posix_memalign(&p, 4096, rounded) == 0 ? p : NULL;
    }
    struct pool *pl = pool_get();
    if (pl && pl->head[c]) {
        struct free_buf *b = pl->head[c];
        pl->head[c] = b->next;
        pl->count[c]--;
        return b;
    }
    return posix_memalign(&p, 4096, (size_t)1 << (c + (int)MIN_SHIFT)) == 0 ? p : NULL;
}

void ol_buf_free(void *p, size_t len)
{
    if (!p)
        return;
    int c = class_of(len ? len : 1);
    struct pool *pl = c >= 0 ? pool_get() : NULL;
    if (!pl || ((size_t)pl->count[c] + 1) << (c + (int)MIN_SHIFT) > CACHE_BYTES) {
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
