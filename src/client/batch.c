/* libopenlake batches: submit many ops, reap their completions.
 *
 * A pool of OLC_POOL_THREADS threads runs the submitted work; each thread
 * blocks in one call at a time, so up to that many calls are in flight per
 * client.  Small GETs of one submit (len <= OLC_SMALL_GET) are grouped into
 * GET_BATCH messages (up to OL_NATIVE_MAX_BATCH items and
 * OL_NATIVE_MAX_DATA bytes each): one round trip answers hundreds of them.
 * Every op still gets its own result. */
#include "client/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"

/* The ops of one ol_client_run: counted down as their jobs complete, and
 * never put on the reap list (run returns only once no worker will touch
 * them again). */
struct run_group {
    unsigned pending;
};

struct job {
    struct job *next;
    struct ol_client_op **ops;
    unsigned n;
    bool grouped;            /* a GET_BATCH of n small GETs */
    struct run_group *group; /* NULL: submitted, reaped with ol_client_reap */
};

struct olc_batch {
    struct ol_client *c;
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    struct job *head, *tail;
    bool stop;
    pthread_t threads[OLC_POOL_THREADS];
    unsigned nthreads;
    /* Completed ops, not reaped yet. */
    struct ol_client_op **done;
    size_t ndone, done_cap;
};

/* The job's last touch of its ops (the worker frees the job after). */
static void complete(struct olc_batch *b, struct run_group *g, struct ol_client_op **ops,
                     unsigned n)
{
    pthread_mutex_lock(&b->mu);
    if (g) {
        g->pending -= n;
        pthread_cond_broadcast(&b->done_cv);
        pthread_mutex_unlock(&b->mu);
        return;
    }
    if (b->ndone + n > b->done_cap) {
        size_t nc = b->done_cap ? b->done_cap : 1024;
        while (nc < b->ndone + n)
            nc *= 2;
        struct ol_client_op **d = realloc(b->done, nc * sizeof(*d));
        if (d) {
            b->done = d;
            b->done_cap = nc;
        }
    }
    /* (realloc failing leaves the ops unreported: their result stays set,
     * ol_client_run still sees them through its own count.) */
    for (unsigned i = 0; i < n && b->ndone < b->done_cap; i++)
        b->done[b->ndone++] = ops[i];
    pthread_cond_broadcast(&b->done_cv);
    pthread_mutex_unlock(&b->mu);
}

static void run_one(struct ol_client *c, struct ol_client_op *op)
{
    memset(&op->info, 0, sizeof(op->info));
    switch (op->opcode) {
    case OL_CLIENT_OP_GET:
        op->result = ol_client_get(c, op->bucket, op->key, op->offset, op->buf, op->len, &op->info);
        break;
    case OL_CLIENT_OP_PUT:
        op->result = ol_client_put(c, op->bucket, op->key, op->buf, op->len, &op->info);
        break;
    case OL_CLIENT_OP_HEAD:
        op->result = ol_client_head(c, op->bucket, op->key, &op->info);
        break;
    case OL_CLIENT_OP_DELETE:
        op->result = ol_client_delete(c, op->bucket, op->key);
        break;
    default:
        op->result = -EINVAL;
    }
}

/* n small GETs in one GET_BATCH message. */
static void run_grouped(struct ol_client *c, struct ol_client_op **ops, unsigned n)
{
    size_t acap = 8, dcap = 0;
    for (unsigned i = 0; i < n; i++) {
        acap += 8 + strlen(ops[i]->bucket) + strlen(ops[i]->key) + 16;
        dcap += ops[i]->len;
    }
    uint8_t *a = malloc(acap), *r = malloc((size_t)n * 12), *d = malloc(dcap ? dcap : 1);
    int rc = a && r && d ? 0 : -ENOMEM;
    if (rc == 0) {
        struct ol_wbuf w = {.p = a, .cap = acap};
        ol_wbuf_u32(&w, n);
        for (unsigned i = 0; i < n; i++) {
            ol_wbuf_str(&w, ops[i]->bucket, strlen(ops[i]->bucket));
            ol_wbuf_str(&w, ops[i]->key, strlen(ops[i]->key));
            ol_wbuf_u64(&w, ops[i]->offset);
            ol_wbuf_u64(&w, ops[i]->len);
        }
        struct olc_call k = {.op = OL_COP_GET_BATCH, .args = a, .args_len = w.len, .rctl = r,
                             .rctl_cap = (size_t)n * 12, .rdata = d, .rdata_cap = dcap,
                             .node = -1};
        rc = olc_call(c, &k);
        if (rc == (int)n) {
            struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
            size_t off = 0;
            for (unsigned i = 0; i < n; i++) {
                int st = (int)ol_rbuf_u32(&rb);
                uint64_t got = ol_rbuf_u64(&rb);
                memset(&ops[i]->info, 0, sizeof(ops[i]->info));
                if (rb.bad || got > ops[i]->len || off + got > k.rdata_len) {
                    ops[i]->result = -EPROTO;
                    continue;
                }
                if (st == 0) {
                    memcpy(ops[i]->buf, d + off, got);
                    off += got;
                    ops[i]->result = (int64_t)got;
                } else {
                    ops[i]->result = st;
                }
            }
            rc = 0;
        } else if (rc >= 0) {
            rc = -EPROTO;
        }
    }
    if (rc < 0)
        for (unsigned i = 0; i < n; i++)
            ops[i]->result = rc;
    free(a);
    free(r);
    free(d);
}

static void *worker(void *arg)
{
    struct olc_batch *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (!b->head && !b->stop)
            pthread_cond_wait(&b->work, &b->mu);
        struct job *j = b->head;
        if (j) {
            b->head = j->next;
            if (!b->head)
                b->tail = NULL;
        }
        pthread_mutex_unlock(&b->mu);
        if (!j)
            return NULL;
        if (j->grouped)
            run_grouped(b->c, j->ops, j->n);
        else
            run_one(b->c, j->ops[0]);
        complete(b, j->group, j->ops, j->n);
        free(j);
    }
}

static struct olc_batch *batch_of(struct ol_client *c)
{
    pthread_mutex_lock(&c->batch_mu);
    if (!c->batch) {
        struct olc_batch *b = calloc(1, sizeof(*b));
        if (b) {
            b->c = c;
            pthread_mutex_init(&b->mu, NULL);
            pthread_cond_init(&b->work, NULL);
            pthread_cond_init(&b->done_cv, NULL);
            for (unsigned i = 0; i < OLC_POOL_THREADS; i++)
                if (pthread_create(&b->threads[b->nthreads], NULL, worker, b) == 0)
                    b->nthreads++;
            if (b->nthreads == 0) {
                free(b);
                b = NULL;
            }
        }
        c->batch = b;
    }
    pthread_mutex_unlock(&c->batch_mu);
    return c->batch;
}

void olc_batch_stop(struct ol_client *c)
{
    struct olc_batch *b = c->batch;
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    for (unsigned i = 0; i < b->nthreads; i++)
        pthread_join(b->threads[i], NULL);
    while (b->head) {
        struct job *j = b->head;
        b->head = j->next;
        free(j);
    }
    free(b->done);
    free(b);
    c->batch = NULL;
}

static bool small_get(const struct ol_client_op *op)
{
    return op->opcode == OL_CLIENT_OP_GET && op->len <= OLC_SMALL_GET && op->buf &&
           olc_name_ok(op->bucket, OL_NATIVE_MAX_BUCKET) && olc_name_ok(op->key, OL_NATIVE_MAX_KEY);
}

static int submit(struct ol_client *c, struct ol_client_op *const *ops, unsigned n,
                  struct run_group *group)
{
    if (!c || (!ops && n))
        return -EINVAL;
    if (n == 0)
        return 0;
    struct olc_batch *b = batch_of(c);
    if (!b)
        return -ENOMEM;
    /* Jobs first (all or nothing), then queued. */
    struct job *first = NULL, *last = NULL;
    unsigned njobs = 0;
    /* Enough groups to keep the pool busy: a group takes at most
     * n / threads ops (and the message limits). */
    unsigned per = (n + OLC_POOL_THREADS - 1) / OLC_POOL_THREADS;
    if (per > 1024)
        per = 1024;
    if (per < 32)
        per = 32;
    for (unsigned i = 0; i < n;) {
        unsigned cnt = 1;
        bool grouped = false;
        if (small_get(ops[i])) {
            uint64_t bytes = ops[i]->len;
            while (i + cnt < n && cnt < per && small_get(ops[i + cnt]) &&
                   bytes + ops[i + cnt]->len <= OL_NATIVE_MAX_DATA) {
                bytes += ops[i + cnt]->len;
                cnt++;
            }
            grouped = cnt > 1;
        }
        struct job *j = malloc(sizeof(*j));
        if (!j) {
            while (first) {
                struct job *x = first->next;
                free(first);
                first = x;
            }
            return -ENOMEM;
        }
        *j = (struct job){
            .ops = (struct ol_client_op **)&ops[i], .n = cnt, .grouped = grouped, .group = group};
        if (last)
            last->next = j;
        else
            first = j;
        last = j;
        njobs++;
        i += cnt;
    }
    pthread_mutex_lock(&b->mu);
    if (b->tail)
        b->tail->next = first;
    else
        b->head = first;
    b->tail = last;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    return (int)n;
}

OLC_API int ol_client_submit(struct ol_client *c, struct ol_client_op *const *ops, unsigned n)
{
    return submit(c, ops, n, NULL);
}

OLC_API int ol_client_reap(struct ol_client *c, struct ol_client_op **done, unsigned min,
                           unsigned max, int timeout_ms)
{
    struct olc_batch *b = c ? c->batch : NULL;
    if (!b || !done || min > max)
        return b ? -EINVAL : 0;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_ms >= 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&b->mu);
    while (b->ndone < min) {
        if (timeout_ms < 0)
            pthread_cond_wait(&b->done_cv, &b->mu);
        else if (pthread_cond_timedwait(&b->done_cv, &b->mu, &dl) != 0)
            break;
    }
    unsigned n = b->ndone < max ? (unsigned)b->ndone : max;
    memcpy(done, b->done, n * sizeof(*done));
    memmove(b->done, b->done + n, (b->ndone - n) * sizeof(*done));
    b->ndone -= n;
    pthread_mutex_unlock(&b->mu);
    return (int)n;
}

OLC_API int ol_client_run(struct ol_client *c, struct ol_client_op *const *ops, unsigned n)
{
    if (!c || (!ops && n))
        return -EINVAL;
    struct run_group g = {.pending = n};
    int rc = submit(c, ops, n, &g);
    if (rc < 0 || n == 0)
        return rc < 0 ? rc : 0;
    struct olc_batch *b = c->batch;
    pthread_mutex_lock(&b->mu);
    while (g.pending)
        pthread_cond_wait(&b->done_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    int first = 0;
    for (unsigned i = 0; i < n && !first; i++)
        if (ops[i]->result < 0)
            first = (int)ops[i]->result;
    return first;
}
