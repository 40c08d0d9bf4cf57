/* The drive server: see net/drive_server.h for the contract, net/wire.h and
 * docs/PROTOCOL.md for the messages.
 *
 * The net thread calls serve() for each request; serve() only posts it to
 * the loop (a small one) or puts it on a bounded ring (a large one, or one
 * the loop cannot take).  On the loop, each request gets a fiber; workers
 * take requests off the ring.  Both decode them, run the drive op and answer
 * with ol_net_reply.  Writers live in a table of slots
 * guarded by one mutex; a worker that uses a writer takes it out of the
 * table's reach (busy) for the call, so the idle sweep, a dropped connection
 * or a concurrent abort never frees a writer under a running call: they mark
 * it doomed, and whoever holds it last aborts it.
 */
#include "net/drive_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "net/drive_req.h"
#include "net/wire.h"

enum {
    SLOT_BITS = 10,
    SWEEP_MS = 200, /* how often an idle worker looks for idle or orphaned writers */
};
_Static_assert((1u << SLOT_BITS) == OL_DRIVE_SERVER_MAX_WRITERS, "one slot per writer");

struct wslot {
    void *w; /* NULL: free */
    uint64_t handle;
    uint64_t conn;
    uint64_t last_ms;
    uint64_t written; /* bytes appended so far */
    unsigned drive;
    bool busy;   /* a worker is in a call on it */
    bool doomed; /* abort when no longer busy */
    bool failed; /* a write failed: only abort is left */
};

struct ol_drive_server {
    struct ol_net *net;
    struct ol_drive drives[OL_DRIVE_SERVER_MAX_DRIVES];
    unsigned ndrives;
    int (*member)(void *arg, const char *cluster, void **ctl, size_t *ctl_len);
    void *member_arg;
    unsigned idle_ms;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    struct ol_net_req *ring[OL_DRIVE_SERVER_QUEUE];
    unsigned head, count;
    bool stopping, paused;
    struct wslot ws[OL_DRIVE_SERVER_MAX_WRITERS];
    uint64_t wgen;
    unsigned nwriters;
    bool sweep_now;
    uint64_t last_sweep_ms;

    pthread_t *threads;
    unsigned nthreads;

    struct ol_loop *loop; /* NULL: workers only */
    pthread_t loop_thread;
};

/* The server whose loop runs on this thread (the loop thread's only). */
static __thread struct ol_drive_server *tl_srv;

/* ---- writers ---- */

/* Takes the writer of handle h for a call (busy); NULL when unknown. */
static struct wslot *writer_take(struct ol_drive_server *srv, uint64_t h, unsigned drive)
{
    struct wslot *s = &srv->ws[h & (OL_DRIVE_SERVER_MAX_WRITERS - 1)];
    pthread_mutex_lock(&srv->mu);
    if (!s->w || s->handle != h || s->busy || s->doomed || s->drive != drive) {
        pthread_mutex_unlock(&srv->mu);
        return NULL;
    }
    s->busy = true;
    pthread_mutex_unlock(&srv->mu);
    return s;
}

/* Frees slot s (the caller consumed or aborted its writer). */
static void writer_drop_locked(struct ol_drive_server *srv, struct wslot *s)
{
    s->w = NULL;
    s->busy = s->doomed = s->failed = false;
    srv->nwriters--;
}

/* Gives the writer back after a call; aborts it if it was doomed meanwhile. */
static void writer_give(struct ol_drive_server *srv, struct wslot *s)
{
    pthread_mutex_lock(&srv->mu);
    s->busy = false;
    s->last_ms = ol_now_ms();
    if (!s->doomed) {
        pthread_mutex_unlock(&srv->mu);
        return;
    }
    void *w = s->w;
    unsigned d = s->drive;
    writer_drop_locked(srv, s);
    pthread_mutex_unlock(&srv->mu);
    srv->drives[d].ops->shard_abort(w);
}

/* Aborts the writers that are doomed, idle too long, or all of them (at
 * destroy), bounded by the table size. */
static void sweep(struct ol_drive_server *srv, bool all)
{
    for (unsigned i = 0; i < OL_DRIVE_SERVER_MAX_WRITERS; i++) {
        pthread_mutex_lock(&srv->mu);
        struct wslot *s = &srv->ws[i];
        /* The clock is read under the lock: a writer given back after an
         * earlier reading would look idle for ever (unsigned wrap). */
        uint64_t now = ol_now_ms();
        if (!s->w || s->busy ||
            !(all || s->doomed || (now > s->last_ms && now - s->last_ms >= srv->idle_ms))) {
            pthread_mutex_unlock(&srv->mu);
            continue;
        }
        void *w = s->w;
        unsigned d = s->drive;
        writer_drop_locked(srv, s);
        pthread_mutex_unlock(&srv->mu);
        srv->drives[d].ops->shard_abort(w);
    }
}

/* ---- replies ---- */

/* An encoded reply: a malloc'd buffer, handed to ol_net_reply. */
static int wbuf_alloc(struct ol_wbuf *w, size_t cap)
{
    w->p = malloc(cap ? cap : 1);
    w->len = 0;
    w->cap = cap;
    w->over = false;
    return w->p ? 0 : -ENOMEM;
}

struct bucket_list {
    struct ol_wbuf *w;
    uint32_t n;
    int err;
};

/* Room for need more bytes in the listing's reply, doubling it up to the
 * control limit (-EMSGSIZE past it, in bl->err). */
static bool room(struct bucket_list *bl, size_t need)
{
    struct ol_wbuf *w = bl->w;
    while (w->cap - w->len < need) {
        size_t cap = w->cap * 2;
        uint8_t *p = cap <= OL_WIRE_MAX_CTL ? realloc(w->p, cap) : NULL;
        if (!p) {
            bl->err = cap > OL_WIRE_MAX_CTL ? -EMSGSIZE : -ENOMEM;
            return false;
        }
        w->p = p;
        w->cap = cap;
    }
    return true;
}

/* Appends a name (and, timed, its creation time) to a listing's reply. */
static int add_entry(struct bucket_list *bl, const char *bucket, bool timed, int64_t ctime_ns)
{
    size_t n = strlen(bucket);
    if (n > OL_DRIVE_MAX_BUCKET) {
        bl->err = -EPROTO;
        return 1;
    }
    if (!room(bl, 4 + n + (timed ? 8 : 0)))
        return 1;
    ol_wbuf_str(bl->w, bucket, n);
    if (timed)
        ol_wbuf_u64(bl->w, (uint64_t)ctime_ns);
    bl->n++;
    return 0;
}

/* list_buckets' callback. */
static int add_bucket(void *ctx, const char *bucket)
{
    return add_entry(ctx, bucket, false, 0);
}

/* bucket_list's callback: a name and its creation time. */
static int add_bucket_time(void *ctx, const char *bucket, int64_t ctime_ns)
{
    return add_entry(ctx, bucket, true, ctime_ns);
}

/* ---- ops ---- */

static void serve_one(struct ol_drive_server *srv, struct ol_net_req *req)
{
    const struct ol_wire_hdr *h = ol_net_req_hdr(req);
    struct ol_drive_req q;
    const uint8_t *data = ol_net_req_data(req);
    struct ol_wbuf out = {0};
    void *rdata = NULL;
    size_t rdata_len = 0;
    int rc;

    if ((rc = ol_net_req_check(req)) < 0)
        goto reply; /* bad bytes are never written */
    if (h->op == OL_WOP_PING) {
        if ((rc = wbuf_alloc(&out, 4)) == 0)
            ol_wbuf_u32(&out, srv->ndrives);
        goto reply;
    }
    if (h->drive >= srv->ndrives) {
        rc = -ENODEV;
        goto reply;
    }
    const struct ol_drive *dr = &srv->drives[h->drive];
    const struct ol_drive_ops *ops = dr->ops;
    void *d = dr->d;
    /* The request's arguments, decoded whole before anything is done. */
    if ((rc = ol_drive_req_decode(h->op, ol_net_req_ctl(req), h->ctl_len, &q)) < 0)
        goto reply;

    switch (h->op) {
    case OL_WOP_SHARD_BEGIN: {
        /* A slot first, so that a full table costs no drive call. */
        pthread_mutex_lock(&srv->mu);
        struct wslot *s = NULL;
        if (srv->nwriters < OL_DRIVE_SERVER_MAX_WRITERS) {
            for (unsigned i = 0; i < OL_DRIVE_SERVER_MAX_WRITERS; i++) {
                unsigned at = (unsigned)((srv->wgen + i) & (OL_DRIVE_SERVER_MAX_WRITERS - 1));
                if (!srv->ws[at].w && !srv->ws[at].busy) {
                    s = &srv->ws[at];
                    /* Reserved: busy with no writer yet. */
                    s->busy = true;
                    s->handle = (++srv->wgen << SLOT_BITS) | at;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&srv->mu);
        if (!s) {
            rc = -EAGAIN;
            break;
        }
        void *w = NULL;
        rc = ops->shard_begin(d, q.bucket, q.key, q.klen, &w);
        pthread_mutex_lock(&srv->mu);
        if (rc == 0) {
            s->w = w;
            s->conn = ol_net_req_conn(req);
            s->drive = h->drive;
            s->written = 0;
            s->failed = false;
            s->doomed = false;
            srv->nwriters++;
        }
        pthread_mutex_unlock(&srv->mu);
        if (rc == 0) {
            if ((rc = wbuf_alloc(&out, 8)) == 0)
                ol_wbuf_u64(&out, s->handle);
            writer_give(srv, s);
        } else {
            pthread_mutex_lock(&srv->mu);
            s->busy = false;
            pthread_mutex_unlock(&srv->mu);
        }
        break;
    }
    case OL_WOP_SHARD_WRITE: {
        struct wslot *s = writer_take(srv, q.handle, h->drive);
        if (!s) {
            rc = -EIO; /* unknown, idle-aborted or already consumed */
            break;
        }
        if (s->failed || q.off != s->written) {
            s->failed = true;
            rc = -EIO;
        } else {
            rc = ops->shard_write(s->w, data, h->data_len);
            if (rc < 0)
                s->failed = true;
            else
                s->written += h->data_len;
        }
        writer_give(srv, s);
        break;
    }
    case OL_WOP_SHARD_COMMIT:
    case OL_WOP_SHARD_PUT: {
        /* PUT: SHARD_WRITE's checks and write of the last bytes, then
         * SHARD_COMMIT's (whose length check is the offset's here). */
        struct wslot *s = writer_take(srv, q.handle, h->drive);
        if (!s) {
            rc = -EIO;
            break;
        }
        void *w = s->w;
        bool put = h->op == OL_WOP_SHARD_PUT;
        bool ok = !s->failed && (put ? q.off : q.len) == s->written;
        pthread_mutex_lock(&srv->mu);
        writer_drop_locked(srv, s);
        pthread_mutex_unlock(&srv->mu);
        rc = ok ? 0 : -EIO;
        if (ok && put && h->data_len)
            rc = ops->shard_write(w, data, h->data_len); /* its error as SHARD_WRITE's */
        if (rc == 0)
            rc = ops->shard_commit(w, &q.sm, q.meta_len ? q.meta : NULL, q.meta_len);
        else
            ops->shard_abort(w);
        break;
    }
    case OL_WOP_SHARD_ABORT: {
        struct wslot *s = &srv->ws[q.handle & (OL_DRIVE_SERVER_MAX_WRITERS - 1)];
        void *w = NULL;
        pthread_mutex_lock(&srv->mu);
        if (s->w && s->handle == q.handle && s->drive == h->drive) {
            if (s->busy) {
                s->doomed = true; /* the call in progress aborts it */
            } else {
                w = s->w;
                writer_drop_locked(srv, s);
            }
        }
        pthread_mutex_unlock(&srv->mu);
        if (w)
            ops->shard_abort(w);
        rc = 0;
        break;
    }
    case OL_WOP_SHARD_COPY:
        rc = ops->shard_copy
                 ? ops->shard_copy(d, q.src_bucket, q.src_key, q.src_klen, &q.src_vid, q.bucket,
                                   q.key, q.klen, &q.sm, q.meta_len ? q.meta : NULL, q.meta_len)
                 : -EOPNOTSUPP;
        break;
    case OL_WOP_MARK_COMPLETE:
        rc = ops->mark_complete(d, q.bucket, q.key, q.klen, &q.vid);
        break;
    case OL_WOP_DELETE_VERSION:
        rc = ops->delete_version(d, q.bucket, q.key, q.klen, &q.vid);
        break;
    case OL_WOP_VERSIONS: {
        uint32_t cap = q.cap, bcap = q.bcap;
        struct ol_shard_meta *sm = malloc((cap ? cap : 1) * sizeof(*sm));
        void *bbuf = malloc(bcap ? bcap : 1);
        struct ol_drive_blob blob = {
            .want = (q.bflags & 2) ? &q.vid : NULL, .buf = bbuf, .cap = bcap};
        if (!sm || !bbuf) {
            free(sm);
            free(bbuf);
            rc = -ENOMEM;
            break;
        }
        rc = ops->versions(d, q.bucket, q.key, q.klen, sm, cap, (q.bflags & 1) ? &blob : NULL);
        if (rc >= 0) {
            unsigned n = (unsigned)rc;
            int e = wbuf_alloc(&out, 4 + (size_t)n * OL_WIRE_META_BYTES + 1 + 4 +
                                         OL_WIRE_META_BYTES + 4 + bcap);
            if (e == 0) {
                ol_wbuf_u32(&out, n);
                for (unsigned i = 0; i < n; i++)
                    ol_wire_put_meta(&out, &sm[i]);
                ol_wbuf_u8(&out, blob.got);
                ol_wbuf_u32(&out, (uint32_t)blob.len);
                ol_wire_put_meta(&out, &blob.sm);
                ol_wbuf_str(&out, bbuf, blob.got ? blob.len : 0);
            } else {
                rc = e;
            }
        }
        free(sm);
        free(bbuf);
        break;
    }
    case OL_WOP_SET_META:
        rc = ops->set_meta(d, q.bucket, q.key, q.klen, &q.vid, q.meta, q.meta_len, q.stamp);
        break;
    case OL_WOP_READ_SHARD: {
        uint64_t len = q.len;
        if (len > OL_WIRE_MAX_DATA) {
            rc = -EMSGSIZE;
            break;
        }
        rdata = malloc(len ? len : 1);
        if (!rdata) {
            rc = -ENOMEM;
            break;
        }
        rc = ops->read_shard(d, q.bucket, q.key, q.klen, &q.vid, q.off, len, rdata);
        if (rc >= 0)
            rdata_len = len;
        else {
            free(rdata);
            rdata = NULL;
        }
        break;
    }
    case OL_WOP_LIST_KEYS: {
        uint32_t cap = q.cap;
        struct ol_drive_entry *ents = malloc((cap ? cap : 1) * sizeof(*ents));
        if (!ents) {
            rc = -ENOMEM;
            break;
        }
        rc = ops->list_keys(d, q.bucket, q.after, q.alen, ents, cap);
        if (rc >= 0) {
            size_t need = 4;
            for (int i = 0; i < rc; i++)
                need += 4 + ents[i].key_len + OL_WIRE_META_BYTES;
            int e = wbuf_alloc(&out, need);
            if (e == 0) {
                ol_wbuf_u32(&out, (uint32_t)rc);
                for (int i = 0; i < rc; i++) {
                    ol_wbuf_str(&out, ents[i].key, ents[i].key_len);
                    ol_wire_put_meta(&out, &ents[i].newest);
                }
            } else {
                rc = e;
            }
        }
        free(ents);
        break;
    }
    case OL_WOP_BUCKET_CREATE:
    case OL_WOP_BUCKET_DELETE:
    case OL_WOP_BUCKET_GET: {
        if (!ops->bucket_get) {
            rc = -EOPNOTSUPP;
            break;
        }
        if (h->op == OL_WOP_BUCKET_CREATE) {
            rc = ops->bucket_create(d, q.bucket, q.ctime_ns);
        } else if (h->op == OL_WOP_BUCKET_DELETE) {
            rc = ops->bucket_delete(d, q.bucket);
        } else {
            int64_t ct = 0;
            rc = ops->bucket_get(d, q.bucket, &ct);
            if (rc == 0 && (rc = wbuf_alloc(&out, 8)) == 0)
                ol_wbuf_u64(&out, (uint64_t)ct);
        }
        break;
    }
    case OL_WOP_SPACE: {
        uint64_t fr = 0, tot = 0;
        rc = ops->space ? ops->space(d, &fr, &tot) : -EOPNOTSUPP;
        if (rc == 0 && (rc = wbuf_alloc(&out, 16)) == 0) {
            ol_wbuf_u64(&out, fr);
            ol_wbuf_u64(&out, tot);
        }
        break;
    }
    case OL_WOP_LIST_BUCKETS:
    case OL_WOP_BUCKET_LIST: {
        /* Names (buckets holding keys), or every bucket with its ctime. */
        bool timed = h->op == OL_WOP_BUCKET_LIST;
        if (timed && !ops->bucket_list) {
            rc = -EOPNOTSUPP;
            break;
        }
        if ((rc = wbuf_alloc(&out, 4096)) < 0)
            break;
        ol_wbuf_u32(&out, 0); /* the count, patched below */
        struct bucket_list bl = {.w = &out};
        rc = timed ? ops->bucket_list(d, add_bucket_time, &bl)
                   : ops->list_buckets(d, add_bucket, &bl);
        if (rc == 0)
            rc = bl.err;
        if (rc == 0) {
            out.p[0] = (uint8_t)bl.n;
            out.p[1] = (uint8_t)(bl.n >> 8);
            out.p[2] = (uint8_t)(bl.n >> 16);
            out.p[3] = (uint8_t)(bl.n >> 24);
        }
        break;
    }
    case OL_WOP_BUCKET_CONFIG_PUT:
    case OL_WOP_BUCKET_CONFIG_GET: {
        if (!ops->bucket_config_get) {
            rc = -EOPNOTSUPP;
            break;
        }
        if (h->op == OL_WOP_BUCKET_CONFIG_PUT) {
            /* arg: 1 set (to the request's data), 0 remove. */
            rc = ops->bucket_config_put(d, q.bucket, q.name,
                                        q.arg ? (data ? (const void *)data : "") : NULL,
                                        q.arg ? h->data_len : 0);
            break;
        }
        size_t cap = (size_t)q.arg;
        rdata = malloc(cap ? cap : 1);
        if (!rdata) {
            rc = -ENOMEM;
            break;
        }
        ssize_t n = ops->bucket_config_get(d, q.bucket, q.name, rdata, cap);
        if (n >= 0) {
            rdata_len = (size_t)n;
            rc = (int)n;
        } else {
            free(rdata);
            rdata = NULL;
            rc = (int)n;
        }
        break;
    }
    case OL_WOP_LOCK:
        rc = ops->lock ? ops->lock(d, q.lock_name, q.lock_nlen, q.owner, q.ttl_ms) : -EOPNOTSUPP;
        break;
    case OL_WOP_UNLOCK:
        rc = ops->unlock ? ops->unlock(d, q.lock_name, q.lock_nlen, q.owner) : -EOPNOTSUPP;
        break;
    default:
        rc = -EOPNOTSUPP;
        break;
    }

reply:
    if (out.over) {
        free(out.p);
        out.p = NULL;
        rc = -EMSGSIZE;
    }
    if (rc < 0 && out.p) {
        free(out.p);
        out.p = NULL;
    }
    ol_net_reply(req, rc, out.p, out.len, rdata, rdata_len);
}

/* ---- the worker pool ---- */

static void *worker_main(void *arg)
{
    struct ol_drive_server *srv = arg;
    pthread_mutex_lock(&srv->mu);
    for (;;) {
        /* Sweeps happen under load too, not only when a worker idles. */
        uint64_t now = ol_now_ms();
        if (now - srv->last_sweep_ms >= SWEEP_MS) {
            srv->last_sweep_ms = now;
            srv->sweep_now = true;
        }
        if (srv->count > 0 && !srv->paused && !srv->sweep_now) {
            struct ol_net_req *req = srv->ring[srv->head];
            srv->head = (srv->head + 1) % OL_DRIVE_SERVER_QUEUE;
            srv->count--;
            pthread_mutex_unlock(&srv->mu);
            serve_one(srv, req);
            pthread_mutex_lock(&srv->mu);
            continue;
        }
        if (srv->stopping && (srv->count == 0 || srv->paused))
            break;
        if (srv->sweep_now) {
            srv->sweep_now = false;
            pthread_mutex_unlock(&srv->mu);
            sweep(srv, false);
            pthread_mutex_lock(&srv->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->cv, &srv->mu, &ts);
    }
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

/* Net thread: a membership question, answered at once (drive_server.h). */
static void serve_member(struct ol_drive_server *srv, struct ol_net_req *req)
{
    const struct ol_wire_hdr *h = ol_net_req_hdr(req);
    struct ol_drive_req q;
    void *ctl = NULL;
    size_t ctl_len = 0;
    int rc = srv->member ? 0 : -EOPNOTSUPP;
    if (rc == 0 && h->data_len)
        rc = -EPROTO; /* no bulk bytes (and no checksum work on this thread) */
    if (rc == 0)
        rc = ol_drive_req_decode(h->op, ol_net_req_ctl(req), h->ctl_len, &q);
    if (rc == 0)
        rc = srv->member(srv->member_arg, q.name, &ctl, &ctl_len);
    if (rc < 0) {
        free(ctl);
        ctl = NULL;
        ctl_len = 0;
    }
    ol_net_reply(req, rc, ctl, ctl_len, NULL, 0);
}

/* Puts req on the workers' ring: false when it is full. */
static bool ring_push_locked(struct ol_drive_server *srv, struct ol_net_req *req)
{
    if (srv->count == OL_DRIVE_SERVER_QUEUE)
        return false;
    srv->ring[(srv->head + srv->count) % OL_DRIVE_SERVER_QUEUE] = req;
    srv->count++;
    pthread_cond_signal(&srv->cv);
    return true;
}

static void fiber_main(void *arg)
{
    serve_one(tl_srv, arg);
}

/* Loop thread: a fiber for req, or the workers' ring when the pool is out
 * of fibers (the workers still run: destroy stops them after the loop). */
static void on_loop(void *arg)
{
    struct ol_drive_server *srv = tl_srv;
    struct ol_net_req *req = arg;
    if (ol_fiber_spawn(srv->loop, fiber_main, req) == 0)
        return;
    pthread_mutex_lock(&srv->mu);
    bool ok = ring_push_locked(srv, req);
    pthread_mutex_unlock(&srv->mu);
    if (!ok)
        ol_net_reply(req, -EAGAIN, NULL, 0, NULL, 0);
}

/* Net thread: hand the request on, never block. */
static void serve(void *ctx, struct ol_net_req *req)
{
    struct ol_drive_server *srv = ctx;
    if (ol_net_req_hdr(req)->op == OL_WOP_MEMBER) {
        serve_member(srv, req);
        return;
    }
    /* paused is a test's switch: a stale read only moves one request. */
    if (srv->loop && ol_net_req_hdr(req)->data_len <= OL_DRIVE_SERVER_FIBER_DATA &&
        !__atomic_load_n(&srv->paused, __ATOMIC_ACQUIRE) &&
        ol_loop_post(srv->loop, on_loop, req) == 0)
        return;
    pthread_mutex_lock(&srv->mu);
    if (srv->stopping || !ring_push_locked(srv, req)) {
        int err = srv->stopping ? -OL_ESHUTDOWN : -EAGAIN;
        pthread_mutex_unlock(&srv->mu);
        ol_net_reply(req, err, NULL, 0, NULL, 0);
        return;
    }
    pthread_mutex_unlock(&srv->mu);
}

static void *loop_main(void *arg)
{
    struct ol_drive_server *srv = arg;
    tl_srv = srv;
    int rc = ol_loop_run(srv->loop);
    if (rc < 0)
        ol_error("drive server: its loop stopped: %s", ol_strerror(rc));
    return NULL;
}

/* The loop and its thread; on failure the workers serve everything. */
static void loop_start(struct ol_drive_server *srv)
{
    struct ol_loop_opts lo = {
        .id = OL_DRIVE_SERVER_LOOP_ID,
        .sq_entries = 256,
        .max_fibers = OL_DRIVE_SERVER_FIBERS,
        .stack_bytes = 256 * 1024,
        .inbox_slots = 8192,
    };
    int rc = ol_loop_create(&srv->loop, &lo);
    if (rc == 0 && (rc = -pthread_create(&srv->loop_thread, NULL, loop_main, srv)) < 0) {
        ol_loop_destroy(srv->loop);
        srv->loop = NULL;
    }
    if (rc < 0) {
        srv->loop = NULL;
        ol_warn("drive server: no loop (%s): worker threads serve every request", ol_strerror(rc));
    }
}

/* Net thread: the writers of a connection that went away are aborted by
 * the next sweep (a worker: an abort may touch the disk). */
static void gone(void *ctx, uint64_t conn)
{
    struct ol_drive_server *srv = ctx;
    pthread_mutex_lock(&srv->mu);
    for (unsigned i = 0; i < OL_DRIVE_SERVER_MAX_WRITERS; i++)
        if (srv->ws[i].w && srv->ws[i].conn == conn)
            srv->ws[i].doomed = true;
    srv->sweep_now = true;
    pthread_cond_signal(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

int ol_drive_server_create(const struct ol_drive_server_opts *opts, struct ol_drive_server **out)
{
    if (!opts->net || !opts->host || opts->ndrives == 0 ||
        opts->ndrives > OL_DRIVE_SERVER_MAX_DRIVES)
        return -EINVAL;
    struct ol_drive_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->net = opts->net;
    memcpy(srv->drives, opts->drives, opts->ndrives * sizeof(*opts->drives));
    srv->ndrives = opts->ndrives;
    srv->member = opts->member;
    srv->member_arg = opts->member_arg;
    srv->idle_ms = opts->writer_idle_ms ? opts->writer_idle_ms : OL_DRIVE_SERVER_WRITER_IDLE_MS;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cv, NULL);
    unsigned nt = opts->workers ? opts->workers : OL_DRIVE_SERVER_WORKERS;
    srv->threads = calloc(nt, sizeof(*srv->threads));
    int rc = srv->threads ? 0 : -ENOMEM;
    for (; rc == 0 && srv->nthreads < nt; srv->nthreads++)
        rc = -pthread_create(&srv->threads[srv->nthreads], NULL, worker_main, srv);
    if (rc == 0 && !opts->no_fibers)
        loop_start(srv);
    if (rc == 0)
        rc = ol_net_listen(srv->net, opts->host, opts->port, serve, gone, srv);
    if (rc < 0) {
        ol_drive_server_destroy(srv);
        return rc;
    }
    *out = srv;
    return 0;
}

void ol_drive_server_destroy(struct ol_drive_server *srv)
{
    if (!srv)
        return;
    /* After this, the net thread calls neither serve nor gone. */
    ol_net_unlisten(srv->net);
    /* The loop ends once its fibers have answered (what it posted to the
     * ring the workers answer below). */
    if (srv->loop) {
        ol_loop_stop(srv->loop);
        pthread_join(srv->loop_thread, NULL);
        ol_loop_destroy(srv->loop);
        srv->loop = NULL;
    }
    pthread_mutex_lock(&srv->mu);
    srv->stopping = true;
    __atomic_store_n(&srv->paused, false, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    for (unsigned i = 0; i < srv->nthreads; i++)
        pthread_join(srv->threads[i], NULL);
    sweep(srv, true);
    free(srv->threads);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

uint16_t ol_drive_server_port(struct ol_drive_server *srv)
{
    return ol_net_port(srv->net);
}

void ol_drive_server_pause(struct ol_drive_server *srv, bool paused)
{
    pthread_mutex_lock(&srv->mu);
    __atomic_store_n(&srv->paused, paused, __ATOMIC_RELEASE); /* serve reads it unlocked */
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

void ol_drive_server_set_writer_idle(struct ol_drive_server *srv, unsigned idle_ms)
{
    pthread_mutex_lock(&srv->mu);
    srv->idle_ms = idle_ms ? idle_ms : OL_DRIVE_SERVER_WRITER_IDLE_MS;
    pthread_mutex_unlock(&srv->mu);
}

unsigned ol_drive_server_writers(struct ol_drive_server *srv)
{
    pthread_mutex_lock(&srv->mu);
    unsigned n = srv->nwriters;
    pthread_mutex_unlock(&srv->mu);
    return n;
}
