/* libopenlake batches: submit many ops, reap their completions.
 *
 * An op that fits one message (a GET or PUT of at most OL_NATIVE_MAX_DATA
 * bytes, HEAD, DELETE) is one asynchronous call (ol_net_call_async): the
 * calling thread only queues it, the net thread runs its completion, and
 * up to OLC_ASYNC_MAX of them are in flight per client (the rest wait in a
 * queue and start as others complete).  Small GETs of one submit (len <=
 * OLC_SMALL_GET) are grouped into GET_BATCH messages (up to 1024 items and
 * OL_NATIVE_MAX_DATA bytes each): one round trip answers hundreds of them.
 * A call that meets a transport error is sent again to the next node, as
 * olc_call does.  Ops of several messages (a GET or PUT past 64 MiB) run
 * on a pool of OLC_POOL_THREADS threads through the blocking calls, and so
 * do GETs past OLC_SMALL_GET on a cluster (direct reads, direct.c).
 *
 * Every op gets its own result.  Results are written by whoever completes
 * the op (the net thread or a pool thread) before it takes the batch's
 * mutex to hand the op over (to the done list, or to the ol_client_run
 * waiting for it), so that a reader that took the mutex sees them whole. */
#include "client/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"

/* ol_client_run's count of its ops not completed yet (b->mu). */
struct waiter {
    unsigned left;
};

struct job {
    struct job *next;
    struct olc_batch *b;
    struct ol_client_op **ops;
    unsigned n;
    bool grouped;     /* a GET_BATCH of n small GETs */
    bool async;       /* one message: an ol_net_call_async */
    struct waiter *w; /* ol_client_run's; NULL: to the done list */
};

struct olc_batch {
    struct ol_client *c;
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    struct job *head, *tail;   /* for the pool */
    struct job *ahead, *atail; /* async jobs waiting for a slot */
    unsigned ainflight;        /* async jobs started, not completed */
    bool stop;
    pthread_t threads[OLC_POOL_THREADS];
    unsigned nthreads;
    /* Completed ops, not reaped yet; room for every submitted op is made
     * at submit, so that a completion never allocates. */
    struct ol_client_op **done;
    size_t ndone, done_cap, outstanding;
};

/* Hands j's ops over (their results are written) and frees j. */
static void complete(struct job *j)
{
    struct olc_batch *b = j->b;
    pthread_mutex_lock(&b->mu);
    if (j->w) {
        j->w->left -= j->n;
    } else {
        OL_ASSERT(b->ndone + j->n <= b->done_cap);
        for (unsigned i = 0; i < j->n; i++)
            b->done[b->ndone++] = j->ops[i];
    }
    pthread_cond_broadcast(&b->done_cv);
    pthread_mutex_unlock(&b->mu);
    free(j);
}

/* ---- ops of several messages: the pool ---- */

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

static void *worker(void *arg)
{
    struct olc_batch *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (!b->head && !b->stop)
            pthread_cond_wait(&b->work, &b->mu);
        struct job *j = b->stop ? NULL : b->head;
        if (j) {
            b->head = j->next;
            if (!b->head)
                b->tail = NULL;
        }
        pthread_mutex_unlock(&b->mu);
        if (!j)
            return NULL;
        run_one(b->c, j->ops[0]);
        complete(j);
    }
}

/* ---- ops of one message: asynchronous calls ---- */

struct acall {
    struct ol_net_call nc;
    struct job *j;
    unsigned start, tries, nnodes;
    char addr[128];
    char lane_addr[128]; /* addr on the lane taken */
    struct ol_net *net;
    unsigned lane;
    bool on_lane; /* lane taken, to give back */
    uint8_t *ctl;   /* access key + args */
    uint8_t *rctl;  /* the reply's control bytes */
    uint8_t *stage; /* GET_BATCH: the items' bytes, copied out at the end */
};

static void acall_free(struct acall *a)
{
    free(a->ctl);
    free(a->rctl);
    free(a->stage);
    free(a);
}

/* Node t of the round that began at a->start (the node list only grows). */
static void pick_node(struct ol_client *c, struct acall *a)
{
    pthread_mutex_lock(&c->mu);
    a->nnodes = c->nnodes;
    memcpy(a->addr, c->nodes[(a->start + a->tries) % c->nnodes], sizeof(a->addr));
    pthread_mutex_unlock(&c->mu);
    if (a->on_lane)
        olc_lane_done(c, a->lane);
    a->lane = olc_lane_pick(c, a->addr, a->lane_addr, &a->net);
    a->on_lane = true;
    a->nc.addr = a->lane_addr;
}

/* The results of a GET_BATCH reply (native/proto.h), op by op. */
static void grouped_results(struct acall *a, int rc)
{
    struct ol_client_op **ops = a->j->ops;
    unsigned n = a->j->n;
    if (rc >= 0 && rc != (int)n)
        rc = -EPROTO;
    if (rc < 0) {
        for (unsigned i = 0; i < n; i++)
            ops[i]->result = rc;
        return;
    }
    struct ol_rbuf rb = {.p = a->rctl, .len = a->nc.rep_ctl_len};
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        int st = (int)ol_rbuf_u32(&rb);
        uint64_t got = ol_rbuf_u64(&rb);
        if (rb.bad || got > ops[i]->len || off + got > a->nc.rep_data_len) {
            ops[i]->result = -EPROTO;
            continue;
        }
        if (st == 0) {
            memcpy(ops[i]->buf, a->stage + off, got);
            off += got;
            ops[i]->result = (int64_t)got;
        } else {
            ops[i]->result = st;
        }
    }
}

static void single_result(struct acall *a, int rc)
{
    struct ol_client_op *op = a->j->ops[0];
    if (rc >= 0 && op->opcode != OL_CLIENT_OP_DELETE) {
        int irc = olc_info(a->rctl, a->nc.rep_ctl_len, &op->info);
        if (irc < 0)
            rc = irc;
    }
    if (rc >= 0 && op->opcode != OL_CLIENT_OP_GET)
        rc = 0;
    op->result = rc;
}

/* Hands an async job's ops over and frees its slot, taking the next
 * waiting job in the same hold of the mutex (so the slot count never drops
 * to zero in between: olc_batch_stop waits for it, then frees b).  Touches
 * b no more after that unless it took a job.  Returns the job to start. */
static struct job *complete_async(struct job *j)
{
    struct olc_batch *b = j->b;
    pthread_mutex_lock(&b->mu);
    if (j->w) {
        j->w->left -= j->n;
    } else {
        OL_ASSERT(b->ndone + j->n <= b->done_cap);
        for (unsigned i = 0; i < j->n; i++)
            b->done[b->ndone++] = j->ops[i];
    }
    struct job *next = NULL;
    if (b->ahead && !b->stop) {
        next = b->ahead;
        b->ahead = next->next;
        if (!b->ahead)
            b->atail = NULL;
    } else {
        b->ainflight--;
    }
    pthread_cond_broadcast(&b->done_cv);
    pthread_mutex_unlock(&b->mu);
    free(j);
    return next;
}

static void start_async(struct olc_batch *b, struct job *j);

/* The op results of a finished call; then the next waiting job, started
 * here when kick (on the net thread), else handed back to the caller. */
static struct job *finish_acall(struct acall *a, int rc)
{
    struct job *j = a->j;
    if (a->on_lane)
        olc_lane_done(j->b->c, a->lane);
    if (j->grouped)
        grouped_results(a, rc);
    else
        single_result(a, rc);
    acall_free(a);
    return complete_async(j);
}

/* On the net thread: the answer, or the next node after a transport
 * error; then the jobs that wait for a slot. */
static void on_reply(void *arg, struct ol_net_call *nc, int rc)
{
    (void)nc;
    struct acall *a = arg;
    struct ol_client *c = a->j->b->c;
    while (olc_transport_error(rc) && ++a->tries < a->nnodes) {
        pick_node(c, a);
        rc = ol_net_call_async(a->net, &a->nc, on_reply, a);
        if (rc == 0)
            return;
    }
    struct olc_batch *b = a->j->b;
    struct job *next = finish_acall(a, rc);
    if (next)
        start_async(b, next);
}

/* The arguments of a one-message op (native/proto.h), after the access key
 * (olc_call's layout). */
static int encode(struct ol_client *c, struct job *j, struct acall *a)
{
    size_t akl = strlen(c->access_key), cap = 4 + akl + 64;
    for (unsigned i = 0; i < j->n; i++)
        cap += 8 + strlen(j->ops[i]->bucket) + strlen(j->ops[i]->key) + 16;
    a->ctl = malloc(cap);
    if (!a->ctl)
        return -ENOMEM;
    struct ol_wbuf w = {.p = a->ctl, .cap = cap};
    ol_wbuf_str(&w, c->access_key, akl);
    struct ol_client_op *op = j->ops[0];
    size_t rcap = 512, dcap = 0;
    if (j->grouped) {
        a->nc.op = OL_COP_GET_BATCH;
        ol_wbuf_u32(&w, j->n);
        for (unsigned i = 0; i < j->n; i++) {
            struct ol_client_op *o = j->ops[i];
            ol_wbuf_str(&w, o->bucket, strlen(o->bucket));
            ol_wbuf_str(&w, o->key, strlen(o->key));
            ol_wbuf_u64(&w, o->offset);
            ol_wbuf_u64(&w, o->len);
            dcap += o->len;
        }
        rcap = (size_t)j->n * 12;
        a->stage = malloc(dcap ? dcap : 1);
        if (!a->stage)
            return -ENOMEM;
        a->nc.rep_data = a->stage;
        a->nc.rep_data_cap = dcap;
    } else {
        ol_wbuf_str(&w, op->bucket, strlen(op->bucket));
        ol_wbuf_str(&w, op->key, strlen(op->key));
        switch (op->opcode) {
        case OL_CLIENT_OP_GET:
            a->nc.op = OL_COP_GET;
            ol_wbuf_str(&w, "", 0);
            ol_wbuf_u64(&w, op->offset);
            ol_wbuf_u64(&w, op->len);
            a->nc.rep_data = op->buf;
            a->nc.rep_data_cap = op->len;
            break;
        case OL_CLIENT_OP_PUT:
            a->nc.op = OL_COP_PUT;
            ol_wbuf_str(&w, "", 0); /* content type */
            a->nc.data = op->buf;
            a->nc.data_len = op->len;
            break;
        case OL_CLIENT_OP_HEAD:
            a->nc.op = OL_COP_HEAD;
            ol_wbuf_str(&w, "", 0);
            break;
        default:
            a->nc.op = OL_COP_DELETE;
            break;
        }
    }
    OL_ASSERT(w.len <= cap);
    a->nc.ctl = a->ctl;
    a->nc.ctl_len = w.len;
    a->rctl = malloc(rcap);
    if (!a->rctl)
        return -ENOMEM;
    a->nc.rep_ctl = a->rctl;
    a->nc.rep_ctl_cap = rcap;
    a->nc.timeout_ms = c->timeout_ms;
    return 0;
}

/* Starts j (its async slot taken), and the jobs that take its slot when
 * it cannot start (an error completes it at once: a loop, not recursion,
 * so that thousands of failing jobs use no stack). */
static void start_async(struct olc_batch *b, struct job *j)
{
    struct ol_client *c = b->c;
    while (j) {
        struct acall *a = calloc(1, sizeof(*a));
        int rc = a ? encode(c, j, a) : -ENOMEM;
        if (a)
            a->j = j;
        if (rc == 0) {
            a->start = atomic_fetch_add(&c->next, 1);
            pick_node(c, a);
            rc = ol_net_call_async(a->net, &a->nc, on_reply, a);
        }
        if (rc == 0)
            return;
        if (a) {
            j = finish_acall(a, rc);
        } else {
            for (unsigned i = 0; i < j->n; i++)
                j->ops[i]->result = rc;
            j = complete_async(j);
        }
    }
}

/* Starts waiting async jobs while slots are free. */
static void start_next(struct olc_batch *b)
{
    for (;;) {
        pthread_mutex_lock(&b->mu);
        struct job *j = NULL;
        if (b->ahead && b->ainflight < OLC_ASYNC_MAX && !b->stop) {
            j = b->ahead;
            b->ahead = j->next;
            if (!b->ahead)
                b->atail = NULL;
            b->ainflight++;
        }
        pthread_mutex_unlock(&b->mu);
        if (!j)
            return;
        start_async(b, j);
    }
}

/* ---- the batch ---- */

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
    /* Calls in flight end by their deadline (no new one starts now); their
     * completions touch b, so it stays until they have. */
    pthread_mutex_lock(&b->mu);
    while (b->ainflight)
        pthread_cond_wait(&b->done_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    struct job *lists[2] = {b->head, b->ahead};
    for (int l = 0; l < 2; l++)
        while (lists[l]) {
            struct job *j = lists[l];
            lists[l] = j->next;
            free(j);
        }
    free(b->done);
    pthread_cond_destroy(&b->work);
    pthread_cond_destroy(&b->done_cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
    c->batch = NULL;
}

static bool names_ok(const struct ol_client_op *op)
{
    return olc_name_ok(op->bucket, OL_NATIVE_MAX_BUCKET) && olc_name_ok(op->key, OL_NATIVE_MAX_KEY);
}

static bool small_get(const struct ol_client_op *op)
{
    return op->opcode == OL_CLIENT_OP_GET && op->len <= OLC_SMALL_GET && op->buf && names_ok(op);
}

/* A GET past OLC_SMALL_GET on a cluster reads the shards from their nodes
 * (direct.c): the pool runs it through ol_client_get (up to 64 shard reads
 * in flight each) rather than one call through a node. */
static bool direct_get(struct ol_client *c, const struct ol_client_op *op)
{
    return op->opcode == OL_CLIENT_OP_GET && op->len > OLC_SMALL_GET && olc_direct_on(c);
}

/* Whether op is one message (else the pool runs it: its arguments are
 * checked there, as ol_client_* check them). */
static bool one_message(const struct ol_client_op *op)
{
    if (!names_ok(op))
        return false;
    switch (op->opcode) {
    case OL_CLIENT_OP_GET:
    case OL_CLIENT_OP_PUT:
        return (op->buf || op->len == 0) && op->len <= OL_NATIVE_MAX_DATA;
    case OL_CLIENT_OP_HEAD:
    case OL_CLIENT_OP_DELETE:
        return true;
    default:
        return false;
    }
}

static void free_jobs(struct job *j)
{
    while (j) {
        struct job *x = j->next;
        free(j);
        j = x;
    }
}

/* Cuts ops into jobs and queues them (all or nothing). */
static int submit(struct ol_client *c, struct ol_client_op *const *ops, unsigned n,
                  struct waiter *w)
{
    struct olc_batch *b = batch_of(c);
    if (!b)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        memset(&ops[i]->info, 0, sizeof(ops[i]->info));
        ops[i]->result = 0;
    }
    struct job *pool = NULL, *ptail = NULL, *async = NULL, *atail = NULL;
    /* Enough groups to keep several calls busy: a group takes at most
     * n / 8 ops (and the message limits). */
    unsigned per = (n + 7) / 8;
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
            free_jobs(pool);
            free_jobs(async);
            return -ENOMEM;
        }
        *j = (struct job){.b = b,
                          .ops = (struct ol_client_op **)&ops[i],
                          .n = cnt,
                          .grouped = grouped,
                          .async = grouped || (one_message(ops[i]) && !direct_get(c, ops[i])),
                          .w = w};
        struct job **head = j->async ? &async : &pool, **tail = j->async ? &atail : &ptail;
        if (*tail)
            (*tail)->next = j;
        else
            *head = j;
        *tail = j;
        i += cnt;
    }
    pthread_mutex_lock(&b->mu);
    if (!w && b->done_cap < b->outstanding + n) {
        size_t nc = b->done_cap ? b->done_cap : 1024;
        while (nc < b->outstanding + n)
            nc *= 2;
        struct ol_client_op **d = realloc(b->done, nc * sizeof(*d));
        if (!d) {
            pthread_mutex_unlock(&b->mu);
            free_jobs(pool);
            free_jobs(async);
            return -ENOMEM;
        }
        b->done = d;
        b->done_cap = nc;
    }
    if (!w)
        b->outstanding += n;
    if (pool) {
        if (b->tail)
            b->tail->next = pool;
        else
            b->head = pool;
        b->tail = ptail;
        pthread_cond_broadcast(&b->work);
    }
    if (async) {
        if (b->atail)
            b->atail->next = async;
        else
            b->ahead = async;
        b->atail = atail;
    }
    pthread_mutex_unlock(&b->mu);
    start_next(b);
    return (int)n;
}

OLC_API int ol_client_submit(struct ol_client *c, struct ol_client_op *const *ops, unsigned n)
{
    if (!c || (!ops && n))
        return -EINVAL;
    if (n == 0)
        return 0;
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
    b->outstanding -= n;
    pthread_mutex_unlock(&b->mu);
    return (int)n;
}

OLC_API int ol_client_run(struct ol_client *c, struct ol_client_op *const *ops, unsigned n)
{
    /* Its own pass: these ops never go to the done list (another thread's
     * reap cannot take them), run waits for its own count. */
    if (!c || (!ops && n))
        return -EINVAL;
    if (n == 0)
        return 0;
    struct waiter w = {.left = n};
    int rc = submit(c, ops, n, &w);
    if (rc < 0)
        return rc;
    struct olc_batch *b = c->batch;
    pthread_mutex_lock(&b->mu);
    while (w.left)
        pthread_cond_wait(&b->done_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    for (unsigned i = 0; i < n; i++)
        if (ops[i]->result < 0)
            return (int)ops[i]->result;
    return 0;
}
