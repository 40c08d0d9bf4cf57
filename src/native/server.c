/* The native port (native/server.h): a queue filled by the net thread, a
 * pool of workers that run the client ops through the object layer, and
 * the table of open PUT sessions. */
#include "native/server.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "access/access.h"
#include "access/ratelimit.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "kv/serve.h"
#include "native/cuda_ipc.h"
#include "native/direct.h"
#include "native/etag.h"
#include "native/proto.h"
#include "net/net.h"
#include "obj/obj.h"
#include "s3/meta.h"
#include "s3/sse.h"

enum {
    MAX_WORKERS = 64,
    SESSION_WAIT_MS = 5000, /* a message waits this long for the one before it */
    SWEEP_MS = 1000,
    /* Reply buffers from POOL_MIN up come from a pool of power-of-two
     * classes: below, malloc serves them from its heap (the server sets
     * M_MMAP_THRESHOLD to 4 MiB); above, a fresh mapping each time costs a
     * page fault per 4 KiB page on every GET, which on a VM was most of a
     * 64 MiB GET's time.  At most POOL_BYTES wait in the pool. */
    POOL_MIN_SHIFT = 22,
    POOL_MAX_SHIFT = 26, /* OL_NATIVE_MAX_DATA */
    POOL_CLASSES = POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1,
    POOL_BYTES = 256 << 20,
    ZC_MIN = 256 << 10, /* GETs from here up are sent from the page cache */
};

struct pooled {
    struct pooled *next;
};

/* The stored metadata of a native PUT: its content type, for a large one
 * its part sizes (native/etag.h), and in a bucket with default encryption
 * its ":sse" entry (obj/sse.h). */
enum { OL_NATIVE_META_CAP = OL_NATIVE_MAX_CTYPE + 128 + OL_SSE_ENTRY_MAX + 8 };

struct session {
    uint64_t id; /* 0: free slot */
    uint64_t conn;
    char access_key[OL_NATIVE_MAX_ACCESS_KEY + 1];
    struct ol_obj_writer *w;
    struct ol_etag etag;
    uint64_t total, written;
    uint64_t last_ms;
    bool busy, dead;
    unsigned waiters; /* messages waiting for the one before them (take_session) */
    uint8_t meta[OL_NATIVE_META_CAP];
    uint32_t meta_len;
};

/* One lane: an ol_net of its own (its UCX worker and net thread) on its
 * own port.  Requests of every lane share the queue and the workers; a
 * reply goes back through the request, so on the lane it came by. */
struct lane {
    struct ol_native_server *s;
    unsigned idx;
    struct ol_net *net;
    _Atomic uint64_t requests;
};

/* A queued request and the lane it came by (for its session's conn). */
struct qent {
    struct ol_net_req *req;
    unsigned lane;
};

struct ol_native_server {
    struct ol_native_server_opts o;
    struct lane lanes[OL_NATIVE_MAX_LANES];
    unsigned nlanes;
    pthread_t threads[MAX_WORKERS];
    unsigned nthreads;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct qent *ring;
    unsigned head, count;
    bool stop;

    /* PUT sessions (their own lock: a worker holds it only to find, mark
     * and unmark a session, never across the object layer). */
    pthread_mutex_t smu;
    pthread_cond_t scv; /* a session was put back or ended */
    struct session *sessions; /* OL_NATIVE_MAX_SESSIONS */
    uint64_t next_session;
    uint64_t last_sweep_ms;

    _Atomic uint64_t st[10];

    pthread_mutex_t pmu;
    struct pooled *pool[POOL_CLASSES];
    size_t pooled_bytes;

    /* Readers whose mapped bytes a reply sent (zero-copy GETs), to be closed
     * by a worker (the release runs on the net thread). */
    struct done_reader *done;

    /* GET_CUDA (native/cuda_ipc.h): NULL without a CUDA driver here. */
    struct ol_native_cuda *cuda;
    uint8_t boot_id[16];
};

struct done_reader {
    struct done_reader *next;
    struct ol_obj_reader *rd;
    struct ol_native_server *s;
};

/* ol_net_reply_ex's release for a reply sent from a reader's mapping: the
 * reader goes to the workers to close (it may free a segment). */
static void reader_release(void *arg, void *data)
{
    struct done_reader *d = arg;
    (void)data;
    struct ol_native_server *s = d->s;
    pthread_mutex_lock(&s->pmu);
    d->next = s->done;
    s->done = d;
    pthread_mutex_unlock(&s->pmu);
}

static void close_done_readers(struct ol_native_server *s)
{
    pthread_mutex_lock(&s->pmu);
    struct done_reader *d = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->pmu);
    while (d) {
        struct done_reader *n = d->next;
        ol_obj_read_close(d->rd);
        free(d);
        d = n;
    }
}

/* ---- reply buffers ---- */

static int pool_class(size_t n)
{
    if (n < ((size_t)1 << POOL_MIN_SHIFT) || n > ((size_t)1 << POOL_MAX_SHIFT))
        return -1;
    int c = 0;
    while (((size_t)1 << (POOL_MIN_SHIFT + c)) < n)
        c++;
    return c;
}

/* Every reply buffer starts BUF_HDR bytes into its allocation: the header
 * says its class (-1: plain malloc), so the release knows where it goes. */
enum { BUF_HDR = 64 };

/* A buffer of at least n bytes, released with buf_release. */
static void *buf_get(struct ol_native_server *s, size_t n)
{
    int c = pool_class(n);
    struct pooled *p = NULL;
    if (c >= 0) {
        pthread_mutex_lock(&s->pmu);
        p = s->pool[c];
        if (p) {
            s->pool[c] = p->next;
            s->pooled_bytes -= (size_t)1 << (POOL_MIN_SHIFT + c);
        }
        pthread_mutex_unlock(&s->pmu);
    }
    uint8_t *b = (uint8_t *)p;
    if (!b)
        b = malloc(BUF_HDR + (c < 0 ? n : (size_t)1 << (POOL_MIN_SHIFT + c)));
    if (!b)
        return NULL;
    memcpy(b, &c, sizeof(c));
    return b + BUF_HDR;
}

/* ol_net_reply_ex's release: back to the pool, or freed (net thread). */
static void buf_release(void *arg, void *data)
{
    struct ol_native_server *s = arg;
    if (!data)
        return;
    uint8_t *b = (uint8_t *)data - BUF_HDR;
    int c;
    memcpy(&c, b, sizeof(c));
    if (c >= 0) {
        size_t sz = (size_t)1 << (POOL_MIN_SHIFT + c);
        pthread_mutex_lock(&s->pmu);
        if (s->pooled_bytes + sz <= POOL_BYTES) {
            struct pooled *p = (struct pooled *)b;
            p->next = s->pool[c];
            s->pool[c] = p;
            s->pooled_bytes += sz;
            b = NULL;
        }
        pthread_mutex_unlock(&s->pmu);
    }
    free(b);
}

enum { ST_REQ, ST_GET, ST_PUT, ST_GETB, ST_PUTB, ST_ERR, ST_ABORTED, ST_LAYOUT, ST_SHARD, ST_SHARDB };

static void count(struct ol_native_server *s, unsigned i, uint64_t n)
{
    atomic_fetch_add_explicit(&s->st[i], n, memory_order_relaxed);
}

/* ---- the net thread: keys and queueing ---- */

/* The access key at the head of a request's control bytes, copied to ak:
 * false when there is none. */
static bool access_key_of(const void *ctl, size_t ctl_len, char ak[OL_NATIVE_MAX_ACCESS_KEY + 1])
{
    struct ol_rbuf r = {.p = ctl, .len = ctl_len};
    size_t n;
    const char *p = ol_rbuf_str(&r, OL_NATIVE_MAX_ACCESS_KEY, &n);
    if (r.bad || !p || n == 0 || memchr(p, 0, n))
        return false;
    memcpy(ak, p, n);
    ak[n] = 0;
    return true;
}

static bool key_fn(void *arg, const struct ol_wire_hdr *h, const void *ctl, size_t ctl_len,
                   uint8_t key[OL_NET_KEY_BYTES])
{
    struct ol_native_server *s = arg;
    if (!ol_native_is_client_op(h->op))
        return false; /* a drive op, or nothing: no user signs those here */
    char ak[OL_NATIVE_MAX_ACCESS_KEY + 1], secret[129];
    if (!access_key_of(ctl, ctl_len, ak) || s->o.secret(s->o.secret_arg, ak, secret) < 0)
        return false;
    ol_native_key(ak, secret, key);
    OPENSSL_cleanse(secret, sizeof(secret));
    return true;
}

/* A connection's id across lanes: each ol_net numbers its own from 1. */
static uint64_t conn_key(unsigned lane, const struct ol_net_req *req)
{
    return (uint64_t)lane << 56 | ol_net_req_conn(req);
}

static void serve(void *ctx, struct ol_net_req *req)
{
    struct lane *l = ctx;
    struct ol_native_server *s = l->s;
    atomic_fetch_add_explicit(&l->requests, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->mu);
    if (s->stop || s->count == OL_NATIVE_SERVER_QUEUE) {
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        ol_net_reply(req, stop ? -ESHUTDOWN : -EAGAIN, NULL, 0, NULL, 0);
        return;
    }
    s->ring[(s->head + s->count++) % OL_NATIVE_SERVER_QUEUE] =
        (struct qent){.req = req, .lane = l->idx};
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* A connection is gone: its sessions are aborted by the next sweep. */
static void gone(void *ctx, uint64_t conn_id)
{
    struct lane *l = ctx;
    struct ol_native_server *s = l->s;
    uint64_t conn = (uint64_t)l->idx << 56 | conn_id;
    pthread_mutex_lock(&s->smu);
    for (unsigned i = 0; i < OL_NATIVE_MAX_SESSIONS; i++)
        if (s->sessions[i].id && s->sessions[i].conn == conn)
            s->sessions[i].dead = true;
    pthread_mutex_unlock(&s->smu);
}

/* ---- replies ---- */

struct out {
    uint8_t *ctl;
    size_t ctl_len;
    void *data;
    size_t data_len;
    /* Set when data points into this reader's mapping (a zero-copy GET):
     * the reply releases it instead of the buffer. */
    struct done_reader *mapped;
    /* Bytes the op moved outside the reply (GET_CUDA), for the limits. */
    uint64_t moved;
};

/* Writes the object info of native/proto.h into a fresh ctl buffer. */
static int put_info(struct out *out, uint64_t size, int64_t mtime_ns, const char *etag,
                    const char *vid, const uint8_t *meta, size_t meta_len)
{
    const uint8_t *ct = NULL;
    size_t ctl = 0;
    if (meta && ol_s3_meta_get(meta, meta_len, "content-type", &ct, &ctl) < 0)
        ct = NULL, ctl = 0;
    size_t cap = 8 + 8 + 4 + 72 + 4 + OL_STORE_VID_MAX + 4 + ctl;
    uint8_t *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    struct ol_wbuf w = {.p = b, .cap = cap};
    char q[72];
    int qn = snprintf(q, sizeof(q), "\"%s\"", etag);
    ol_wbuf_u64(&w, size);
    ol_wbuf_u64(&w, (uint64_t)mtime_ns);
    ol_wbuf_str(&w, q, (size_t)qn);
    const char *v = vid && vid[0] ? vid : "null";
    ol_wbuf_str(&w, v, strlen(v));
    ol_wbuf_str(&w, ct ? (const char *)ct : "", ctl);
    if (w.over) {
        free(b);
        return -EMSGSIZE;
    }
    out->ctl = b;
    out->ctl_len = w.len;
    return 0;
}

/* ---- argument decoding ---- */

/* A string argument copied NUL-terminated into buf (cap bytes): false when
 * it is missing, too long or holds a NUL. */
static bool arg_str(struct ol_rbuf *r, char *buf, size_t cap, size_t *len)
{
    size_t n;
    const char *p = ol_rbuf_str(r, cap - 1, &n);
    if (r->bad || !p || memchr(p, 0, n))
        return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (len)
        *len = n;
    return true;
}

struct names {
    char bucket[OL_NATIVE_MAX_BUCKET + 2];
    char key[OL_NATIVE_MAX_KEY + 1];
    size_t key_len;
};

static bool arg_names(struct ol_rbuf *r, struct names *n)
{
    size_t bl;
    return arg_str(r, n->bucket, sizeof(n->bucket), &bl) && bl > 0 &&
           bl <= OL_NATIVE_MAX_BUCKET && arg_str(r, n->key, sizeof(n->key), &n->key_len) &&
           n->key_len > 0;
}

/* ---- authorization ---- */

static int allowed(struct ol_native_server *s, const char *ak, const char *action,
                   const char *bucket, const char *key, size_t key_len, const char *prefix)
{
    if (!s->o.cfg)
        return 0;
    struct ol_access_req q = {.user = ak,
                              .action = action,
                              .bucket = bucket,
                              .key = key,
                              .key_len = key_len,
                              .prefix = prefix};
    return ol_access_check(s->o.obj, s->o.cfg, &q);
}

/* ---- ops ---- */

static int op_hello(struct ol_native_server *s, struct out *out)
{
    char (*peers)[128] = NULL;
    unsigned np = 0;
    if (s->o.peers) {
        peers = calloc(64, sizeof(*peers));
        if (!peers)
            return -ENOMEM;
        np = s->o.peers(s->o.peers_arg, peers, 64);
    }
    size_t cap = 4 + 8 + 4 + 4 + (size_t)np * (4 + 128) + 4 +
                 (size_t)(1 + np) * 4 * (1 + OL_NATIVE_MAX_LANES) + 1 + sizeof(s->boot_id);
    uint8_t *b = malloc(cap);
    if (!b) {
        free(peers);
        return -ENOMEM;
    }
    struct ol_wbuf w = {.p = b, .cap = cap};
    ol_wbuf_u32(&w, OL_NATIVE_PROTO_VERSION);
    ol_wbuf_u64(&w, OL_NATIVE_MAX_DATA);
    ol_wbuf_u32(&w, 1 + np);
    /* This node: "" (the address the client reached it by).  A peer's
     * entry is "host:port" (its lane 0), its further lanes' ports after
     * commas (native/peers.h), which go to the lane table below. */
    ol_wbuf_str(&w, "", 0);
    for (unsigned i = 0; i < np; i++) {
        size_t l = strnlen(peers[i], sizeof(peers[i]));
        const char *comma = memchr(peers[i], ',', l);
        ol_wbuf_str(&w, peers[i], comma ? (size_t)(comma - peers[i]) : l);
    }
    /* The lane table (grown at the end: older clients stop before it): for
     * each entry above, its lanes' ports, lane 0 first. */
    ol_wbuf_u32(&w, 1 + np);
    ol_wbuf_u32(&w, s->nlanes);
    for (unsigned i = 0; i < s->nlanes; i++)
        ol_wbuf_u32(&w, ol_net_port(s->lanes[i].net));
    for (unsigned i = 0; i < np; i++) {
        uint32_t ports[OL_NATIVE_MAX_LANES];
        unsigned n = 0;
        const char *c = strrchr(peers[i], ':');
        for (const char *q = c; q && *q && n < OL_NATIVE_MAX_LANES;) {
            ports[n++] = (uint32_t)strtoul(q + 1, NULL, 10);
            q = strchr(q + 1, ',');
        }
        ol_wbuf_u32(&w, n);
        for (unsigned k = 0; k < n; k++)
            ol_wbuf_u32(&w, ports[k]);
    }
    /* Grown at the end again: what this node offers a client on its own
     * host (GET_CUDA), and which host that is. */
    ol_wbuf_u8(&w, s->cuda ? OL_NATIVE_HELLO_CUDA_IPC : 0);
    ol_wbuf_bytes(&w, s->boot_id, sizeof(s->boot_id));
    free(peers);
    out->ctl = b;
    out->ctl_len = w.len;
    return 0;
}

static int open_reader(struct ol_native_server *s, const struct names *n, const char *vid,
                       struct ol_obj_reader **rd)
{
    if (vid[0])
        return ol_obj_read_open_v(s->o.obj, n->bucket, n->key, n->key_len, vid, rd);
    return ol_obj_read_open(s->o.obj, n->bucket, n->key, n->key_len, rd);
}

/* A read of bucket/key (version vid; "" or "null": the current object),
 * authorized as S3 authorizes a GET of it, and the version id it resolved to
 * (rvid: vid, else the current object's, "" when it has none).  0 with *rd
 * open, or the refusal or the open's error. */
static int open_authorized(struct ol_native_server *s, const char *ak, const struct names *n,
                           const char *vid, struct ol_obj_reader **rd,
                           char rvid[OL_STORE_VID_MAX])
{
    if (strcmp(vid, "null") == 0)
        vid = "";
    int rc = allowed(s, ak, vid[0] ? "s3:GetObjectVersion" : "s3:GetObject", n->bucket, n->key,
                     n->key_len, NULL);
    if (rc == 0)
        rc = open_reader(s, n, vid, rd);
    if (rc < 0)
        return rc;
    if (vid[0])
        snprintf(rvid, OL_STORE_VID_MAX, "%s", vid);
    else if (ol_obj_read_vid(*rd, rvid) < 0)
        rvid[0] = 0;
    return 0;
}

/* Copies [off, off+len) of the object into dst. */
static int read_into(struct ol_obj_reader *rd, uint64_t off, size_t len, uint8_t *dst)
{
    size_t got = 0;
    while (got < len) {
        const uint8_t *p;
        ssize_t k = ol_obj_read(rd, off + got, len - got, &p);
        if (k < 0)
            return (int)k;
        if (k == 0)
            return -EIO; /* the object is shorter than its info said */
        memcpy(dst + got, p, (size_t)k);
        got += (size_t)k;
    }
    return 0;
}

static int reply_bytes(struct ol_native_server *s, struct ol_obj_reader *rd, uint64_t off,
                       size_t want, struct out *out);

/* What HEAD, GET and GET_CUDA share: parses the names and version (and
 * for a read, the range and if_match), resolves and authorizes as GET,
 * checks if_match, clamps the range to the object and to max, and writes
 * the info into out.  0 with *rd open (the caller closes it), *off and
 * *want the range; or the error, nothing open. */
static int resolve_read(struct ol_native_server *s, const char *ak, bool ranged, size_t max,
                        struct ol_rbuf *r, struct out *out, struct ol_obj_reader **rd,
                        uint64_t *off, size_t *want)
{
    struct names n;
    char vid[OL_NATIVE_MAX_VID + 1], if_match[80] = "";
    if (!arg_names(r, &n) || !arg_str(r, vid, sizeof(vid), NULL))
        return -EINVAL;
    uint64_t o = 0, len = 0;
    if (ranged) {
        o = ol_rbuf_u64(r);
        len = ol_rbuf_u64(r);
        if (r->bad)
            return -EINVAL;
        /* Optional for GET (grown at the end): the ETag the object must
         * still have. */
        if (r->len > r->off && !arg_str(r, if_match, sizeof(if_match), NULL))
            return -EINVAL;
    }
    char rvid[OL_STORE_VID_MAX];
    int rc = open_authorized(s, ak, &n, vid, rd, rvid);
    if (rc < 0)
        return rc;
    const struct ol_obj_info *info = ol_obj_read_info(*rd);
    if (if_match[0]) {
        char q[72];
        snprintf(q, sizeof(q), "\"%s\"", info->etag);
        if (strcmp(q, if_match) != 0 && strcmp(info->etag, if_match) != 0) {
            rc = -OL_EPRECONDITION;
            goto fail;
        }
    }
    *off = o;
    *want = 0;
    if (ranged) {
        if (o > info->size || (o == info->size && info->size > 0)) {
            rc = -ERANGE;
            goto fail;
        }
        uint64_t rest = info->size - o;
        if (len > rest)
            len = rest;
        if (len > max)
            len = max;
        *want = (size_t)len;
    }
    rc = put_info(out, info->size, info->mtime_ns, info->etag, rvid, info->meta, info->meta_len);
    if (rc == 0)
        return 0;
fail:
    ol_obj_read_close(*rd);
    *rd = NULL;
    return rc;
}

static int op_head_get(struct ol_native_server *s, const char *ak, uint8_t op,
                       struct ol_rbuf *r, struct out *out)
{
    struct ol_obj_reader *rd;
    uint64_t off;
    size_t want;
    int rc = resolve_read(s, ak, op == OL_COP_GET, OL_NATIVE_MAX_DATA, r, out, &rd, &off, &want);
    if (rc < 0)
        return rc;
    if (want == 0) {
        ol_obj_read_close(rd);
        return 0;
    }
    return reply_bytes(s, rd, off, want, out);
}

/* GET_CUDA (native/cuda_ipc.h): the range, read and verified as any GET,
 * copied into the client's GPU memory; the reply is the info and the
 * count. */
static int op_get_cuda(struct ol_native_server *s, const char *ak, struct ol_rbuf *r,
                       struct out *out)
{
    struct ol_obj_reader *rd;
    uint64_t off;
    size_t want;
    int rc = resolve_read(s, ak, true, OL_NATIVE_MAX_CUDA, r, out, &rd, &off, &want);
    if (rc < 0)
        return rc;
    struct ol_native_cuda_dst d;
    const void *u = ol_rbuf_take(r, sizeof(d.uuid));
    const void *hd = ol_rbuf_take(r, sizeof(d.handle));
    d.off = ol_rbuf_u64(r);
    struct ol_native_cuda_map *m = NULL;
    if (r->bad || !u || !hd) {
        rc = -EINVAL;
        goto out;
    }
    memcpy(d.uuid, u, sizeof(d.uuid));
    memcpy(&d.handle, hd, sizeof(d.handle));
    if (!s->cuda) {
        rc = -ENOTSUP;
        goto out;
    }
    rc = ol_native_cuda_open(s->cuda, &d, want, &m);
    for (size_t got = 0; rc == 0 && got < want;) {
        const uint8_t *p;
        /* From the page cache's mapping where it is all there (verified
         * there), else the reader's own window. */
        ssize_t k = ol_obj_read_map(rd, off + got, want - got, &p);
        if (k <= 0)
            k = ol_obj_read(rd, off + got, want - got, &p);
        if (k < 0)
            rc = (int)k;
        else if (k == 0)
            rc = -EIO; /* shorter than its info said */
        else
            rc = ol_native_cuda_copy(s->cuda, m, d.off + got, p, (size_t)k);
        got += k > 0 ? (size_t)k : 0;
    }
    if (m)
        ol_native_cuda_close(s->cuda, m);
    if (rc == 0) {
        count(s, ST_GETB, want);
        out->moved = want;
        rc = (int)want;
    }
out:
    ol_obj_read_close(rd);
    return rc;
}

/* The object's bytes [off, off + want) as the reply's data (want at most
 * OL_NATIVE_MAX_DATA).  Takes rd: closed here, or once the reply is sent.
 * Returns want or an error. */
static int reply_bytes(struct ol_native_server *s, struct ol_obj_reader *rd, uint64_t off,
                       size_t want, struct out *out)
{
    int rc;
    /* Large reads straight from the page cache when the whole range is
     * there and checks good (one drive); else a copy. */
    const uint8_t *mp;
    if (want >= ZC_MIN && ol_obj_read_map(rd, off, want, &mp) == (ssize_t)want) {
        struct done_reader *d = malloc(sizeof(*d));
        if (d) {
            d->rd = rd;
            d->s = s;
            out->mapped = d;
            out->data = (void *)mp;
            out->data_len = want;
            count(s, ST_GETB, want);
            return (int)want; /* the reader stays open until the reply is sent */
        }
    }
    out->data = buf_get(s, want);
    if (!out->data) {
        rc = -ENOMEM;
        goto out;
    }
    out->data_len = want;
    rc = read_into(rd, off, want, out->data);
    if (rc == 0) {
        rc = (int)want;
        count(s, ST_GETB, want);
    }
out:
    ol_obj_read_close(rd);
    return rc;
}

/* LAYOUT (native/direct.h): resolved and authorized as a GET; the info,
 * then where the shards are, or the bytes themselves when the client's
 * range is small enough for it (inline, as GET answers them). */
static int op_layout(struct ol_native_server *s, const char *ak, struct ol_rbuf *r,
                     struct out *out)
{
    struct names n;
    char vid[OL_NATIVE_MAX_VID + 1];
    if (!arg_names(r, &n) || !arg_str(r, vid, sizeof(vid), NULL))
        return -EINVAL;
    /* Optional (grown at the end): the client's range and the most bytes
     * it takes inline (0: never). */
    uint64_t off = 0, len = 0, inline_max = 0;
    if (r->len > r->off) {
        off = ol_rbuf_u64(r);
        len = ol_rbuf_u64(r);
        inline_max = ol_rbuf_u64(r);
        if (r->bad)
            return -EINVAL;
    }
    if (inline_max > OL_NATIVE_MAX_DATA)
        inline_max = OL_NATIVE_MAX_DATA;
    struct ol_obj_reader *rd;
    char rvid[OL_STORE_VID_MAX];
    int rc = open_authorized(s, ak, &n, vid, &rd, rvid);
    if (rc < 0)
        return rc;
    const struct ol_obj_info *info = ol_obj_read_info(rd);
    /* Inline when the whole range the client wants fits what it takes. */
    bool in_range = off < info->size || (off == 0 && info->size == 0);
    uint64_t want = in_range ? info->size - off : 0;
    if (want > len)
        want = len;
    bool inl = inline_max && in_range && want <= inline_max;
    if (inline_max && !in_range) {
        ol_obj_read_close(rd);
        return -ERANGE; /* as GET answers it */
    }
    struct out io = {0};
    rc = put_info(&io, info->size, info->mtime_ns, info->etag, rvid, info->meta, info->meta_len);
    uint8_t *b = rc == 0 ? malloc(io.ctl_len + OL_NATIVE_LAYOUT_MAX) : NULL;
    if (rc == 0 && !b)
        rc = -ENOMEM;
    if (rc == 0) {
        struct ol_wbuf w = {.p = b, .cap = io.ctl_len + OL_NATIVE_LAYOUT_MAX};
        ol_wbuf_bytes(&w, io.ctl, io.ctl_len);
        if (inl)
            ol_wbuf_u8(&w, OL_NATIVE_LAYOUT_INLINE);
        else
            rc = ol_native_layout_encode(ol_obj_deploy(s->o.obj), rd, s->o.node_addr,
                                         s->o.node_addr_arg, &w);
        out->ctl = b;
        out->ctl_len = w.len;
        b = NULL;
    }
    free(b);
    free(io.ctl);
    if (rc == 0 && inl && want)
        return reply_bytes(s, rd, off, (size_t)want, out);
    ol_obj_read_close(rd);
    return rc;
}

/* SHARD_GET (native/direct.h): bytes of one shard from this node's drive,
 * authorized as a GET of the object (of its version, when the drive holds
 * a newer one). */
static int op_shard_get(struct ol_native_server *s, const char *ak, struct ol_rbuf *r,
                        struct out *out)
{
    struct names n;
    if (!arg_names(r, &n))
        return -EINVAL;
    uint32_t set = ol_rbuf_u32(r);
    struct ol_version_id vid;
    ol_rbuf_vid(r, &vid);
    uint8_t shard = ol_rbuf_u8(r);
    uint64_t off = ol_rbuf_u64(r), len = ol_rbuf_u64(r);
    if (r->bad || len == 0 || len > OL_NATIVE_MAX_DATA)
        return -EINVAL;
    int rc = allowed(s, ak, "s3:GetObject", n.bucket, n.key, n.key_len, NULL);
    if (rc < 0)
        return rc;
    struct ol_deploy *dp = ol_obj_deploy(s->o.obj);
    if (!dp || !s->o.node_addr)
        return -ENOTSUP;
    out->data = buf_get(s, (size_t)len);
    if (!out->data)
        return -ENOMEM;
    out->data_len = (size_t)len;
    bool newest = false;
    rc = ol_native_shard_read(dp, set, n.bucket, n.key, n.key_len, &vid, shard, off,
                              (size_t)len, out->data, &newest);
    /* An older version is GetObjectVersion's (the bytes read go nowhere
     * when refused: an error reply carries no data). */
    if (rc == 0 && !newest)
        rc = allowed(s, ak, "s3:GetObjectVersion", n.bucket, n.key, n.key_len, NULL);
    if (rc < 0)
        return rc;
    count(s, ST_SHARDB, len);
    return (int)len;
}

static int op_get_batch(struct ol_native_server *s, const char *ak, struct ol_rbuf *r,
                        struct out *out)
{
    uint32_t n = ol_rbuf_u32(r);
    if (r->bad || n == 0 || n > OL_NATIVE_MAX_BATCH)
        return -EINVAL;
    size_t cap = (size_t)n * 12;
    uint8_t *ctl = malloc(cap);
    /* The data grows as items succeed (bounded by OL_NATIVE_MAX_DATA). */
    size_t dcap = OL_NATIVE_MAX_DATA, dlen = 0;
    uint8_t *data = buf_get(s, dcap);
    if (!ctl || !data) {
        free(ctl);
        buf_release(s, data);
        return -ENOMEM;
    }
    struct ol_wbuf w = {.p = ctl, .cap = cap};
    bool full = false;
    for (uint32_t i = 0; i < n; i++) {
        struct names nm;
        uint64_t off = 0, len = 0;
        bool named = arg_names(r, &nm);
        if (named) {
            off = ol_rbuf_u64(r);
            len = ol_rbuf_u64(r);
        }
        if (r->bad || !named) {
            free(ctl);
            buf_release(s, data);
            return -EINVAL;
        }
        int st = 0;
        uint64_t got = 0;
        struct ol_obj_reader *rd = NULL;
        if (full)
            st = -EMSGSIZE;
        else if ((st = allowed(s, ak, "s3:GetObject", nm.bucket, nm.key, nm.key_len, NULL)) ==
                     0 &&
                 (st = open_reader(s, &nm, "", &rd)) == 0) {
            const struct ol_obj_info *info = ol_obj_read_info(rd);
            if (off > info->size || (off == info->size && info->size > 0))
                st = -ERANGE;
            else {
                uint64_t rest = info->size - off;
                got = len < rest ? len : rest;
                if (dlen + got > OL_NATIVE_MAX_DATA) {
                    full = true;
                    st = -EMSGSIZE;
                    got = 0;
                } else {
                    st = read_into(rd, off, (size_t)got, data + dlen);
                    if (st == 0)
                        dlen += got;
                    else
                        got = 0;
                }
            }
            ol_obj_read_close(rd);
        }
        ol_wbuf_u32(&w, (uint32_t)st);
        ol_wbuf_u64(&w, got);
    }
    count(s, ST_GETB, dlen);
    out->ctl = ctl;
    out->ctl_len = w.len;
    out->data = data;
    out->data_len = dlen;
    return (int)n;
}

/* The stored metadata of a native PUT: its content type, as S3 keeps it. */
static int put_meta(struct ol_rbuf *r, uint8_t *meta, size_t cap, uint32_t *meta_len)
{
    char ct[OL_NATIVE_MAX_CTYPE + 1];
    size_t n;
    if (!arg_str(r, ct, sizeof(ct), &n) || !ol_s3_header_value_ok(ct, n))
        return -EINVAL;
    size_t len = 0;
    if (n && ol_s3_meta_add(meta, cap, &len, "content-type", ct, n) < 0)
        return -EINVAL;
    *meta_len = (uint32_t)len;
    return 0;
}

/* Commits writer w (consumed) with the ETag of e (freed). */
static int commit(struct ol_native_server *s, struct ol_obj_writer *w, struct ol_etag *e,
                  uint64_t size, const uint8_t *meta0, uint32_t meta_len0, struct out *out)
{
    if (s->o.may_ack_write && !s->o.may_ack_write()) {
        ol_etag_free(e);
        ol_obj_write_abort(w);
        return -OL_EFENCED;
    }
    uint8_t meta[OL_NATIVE_META_CAP];
    size_t meta_len = meta_len0;
    memcpy(meta, meta0, meta_len0);
    struct ol_obj_info info = {.size = size, .mtime_ns = ol_wall_ns()};
    char parts[96];
    ol_etag_final(e, info.etag, &info.nparts, parts, sizeof(parts));
    if (info.nparts &&
        ol_s3_meta_add(meta, sizeof(meta), &meta_len, OL_S3_META_PARTS, parts, strlen(parts)) < 0) {
        ol_obj_write_abort(w);
        return -EINVAL;
    }
    info.meta = meta;
    info.meta_len = (uint32_t)meta_len;
    char vid[OL_STORE_VID_MAX] = "";
    int rc = ol_obj_write_commit_object_v(w, &info, NULL, vid);
    if (rc < 0)
        return rc;
    return put_info(out, size, info.mtime_ns, info.etag, vid, meta, meta_len);
}

/* A bucket with default encryption (s3/sse.h, ?encryption) seals native
 * PUTs too: the entry goes into meta and *so opens it for the writer. */
static int default_seal(struct ol_native_server *s, const char *bucket, uint8_t *meta,
                        size_t cap, uint32_t *meta_len, struct ol_sse_obj *so)
{
    memset(so, 0, sizeof(*so));
    if (!ol_s3_sse_bucket_default(s->o.obj, bucket))
        return 0;
    char entry[OL_SSE_ENTRY_MAX];
    struct ol_sse_spec spec = {.mode = OL_SSE_S3};
    int rc = ol_sse_entry_new(ol_obj_sse_master(s->o.obj), &spec, 's', entry, so);
    if (rc < 0)
        return rc;
    size_t l = *meta_len;
    if (ol_s3_meta_add(meta, cap, &l, OL_SSE_META, entry, strlen(entry)) < 0)
        return -EINVAL;
    *meta_len = (uint32_t)l;
    return 0;
}

static int op_put(struct ol_native_server *s, struct ol_net_req *req, const char *ak,
                  struct ol_rbuf *r, struct out *out)
{
    struct names n;
    uint8_t meta[OL_NATIVE_META_CAP];
    uint32_t meta_len;
    if (!arg_names(r, &n) || put_meta(r, meta, sizeof(meta), &meta_len) < 0)
        return -EINVAL;
    int rc = allowed(s, ak, "s3:PutObject", n.bucket, n.key, n.key_len, NULL);
    if (rc == 0)
        rc = ol_net_req_check(req);
    if (rc < 0)
        return rc;
    uint64_t len = ol_net_req_hdr(req)->data_len;
    struct ol_sse_obj so;
    rc = default_seal(s, n.bucket, meta, sizeof(meta), &meta_len, &so);
    if (rc < 0)
        return rc;
    struct ol_obj_target tg = {.bucket = n.bucket, .key = n.key, .key_len = n.key_len,
                               .sse = &so};
    struct ol_obj_writer *w;
    rc = ol_obj_write_begin(s->o.obj, &tg, (int64_t)len, &w);
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc < 0)
        return rc;
    struct ol_etag et;
    if ((rc = ol_etag_init(&et, len)) < 0) {
        ol_obj_write_abort(w);
        return rc;
    }
    const uint8_t *data = ol_net_req_data(req);
    ol_etag_update(&et, 0, data, len);
    if (len && (rc = ol_obj_write(w, data, len)) < 0) {
        ol_etag_free(&et);
        ol_obj_write_abort(w);
        return rc;
    }
    rc = commit(s, w, &et, len, meta, meta_len, out);
    if (rc == 0)
        count(s, ST_PUTB, len);
    return rc;
}

/* ---- PUT sessions ---- */

/* Takes session id for this caller (busy until put_session); NULL when
 * there is no such session of theirs, or it is in use. */
/* The session id of access key ak, marked busy for the caller; NULL when
 * there is none (or it is dying).  A client keeps up to two messages of a
 * session in flight (libopenlake: one WRITE is received while the one
 * before it is hashed and written), so a message may find the session busy
 * with its predecessor, or even come first: a WRITE at `off` up to one
 * message past what is written (the message before it not taken yet), and
 * a COMMIT (off UINT64_MAX) while busy, wait for it, at most one waiter per
 * session and SESSION_WAIT_MS.  Anything else finds the session as it is
 * (a repeated or lost message then fails it: op_put_more). */
static struct session *take_session(struct ol_native_server *s, uint64_t id, const char *ak,
                                    uint64_t off)
{
    struct session *found = NULL;
    pthread_mutex_lock(&s->smu);
    struct session *x = id ? &s->sessions[id % OL_NATIVE_MAX_SESSIONS] : NULL;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SESSION_WAIT_MS / 1000;
    bool waiting = false;
    for (;;) {
        if (!x || x->id != id || x->dead || strcmp(x->access_key, ak) != 0)
            break;
        bool ahead = off != UINT64_MAX && off > x->written &&
                     off - x->written <= OL_NATIVE_MAX_DATA;
        if (!x->busy && !ahead) {
            x->busy = true;
            found = x;
            break;
        }
        /* The two messages of a client's pipeline may both wait (the one
         * woken by put_session may not have run yet when the next comes);
         * more is not a client of ours. */
        if (!waiting) {
            if (x->waiters >= 2)
                break;
            x->waiters++;
            waiting = true;
        }
        if (pthread_cond_timedwait(&s->scv, &s->smu, &until) == ETIMEDOUT)
            break;
    }
    if (waiting && x && x->id == id)
        x->waiters--;
    pthread_mutex_unlock(&s->smu);
    return found;
}

static void end_session(struct ol_native_server *s, struct session *x, bool abort)
{
    if (abort && x->w)
        ol_obj_write_abort(x->w);
    ol_etag_free(&x->etag);
    pthread_mutex_lock(&s->smu);
    x->w = NULL;
    x->id = 0;
    x->busy = false;
    x->dead = false;
    pthread_cond_broadcast(&s->scv);
    pthread_mutex_unlock(&s->smu);
}

static void put_session(struct ol_native_server *s, struct session *x)
{
    pthread_mutex_lock(&s->smu);
    x->busy = false;
    x->last_ms = ol_mono_ms();
    pthread_cond_broadcast(&s->scv);
    pthread_mutex_unlock(&s->smu);
}

static int op_put_begin(struct ol_native_server *s, struct ol_net_req *req, unsigned lane,
                        const char *ak,
                        struct ol_rbuf *r, struct out *out)
{
    struct names n;
    uint8_t meta[OL_NATIVE_META_CAP];
    uint32_t meta_len;
    if (!arg_names(r, &n) || put_meta(r, meta, sizeof(meta), &meta_len) < 0)
        return -EINVAL;
    uint64_t total = ol_rbuf_u64(r);
    if (r->bad)
        return -EINVAL;
    int arc = allowed(s, ak, "s3:PutObject", n.bucket, n.key, n.key_len, NULL);
    if (arc < 0)
        return arc;
    /* A slot first, so that a full table costs no writer. */
    struct session *x = NULL;
    pthread_mutex_lock(&s->smu);
    for (unsigned i = 0; i < OL_NATIVE_MAX_SESSIONS && !x; i++) {
        uint64_t id = ++s->next_session;
        if (id % OL_NATIVE_MAX_SESSIONS == 0)
            id = ++s->next_session;
        struct session *c = &s->sessions[id % OL_NATIVE_MAX_SESSIONS];
        if (c->id == 0) {
            memset(c, 0, sizeof(*c));
            c->id = id;
            c->busy = true;
            x = c;
        }
    }
    pthread_mutex_unlock(&s->smu);
    if (!x)
        return -EAGAIN;
    snprintf(x->access_key, sizeof(x->access_key), "%s", ak);
    x->conn = conn_key(lane, req);
    x->total = total;
    struct ol_sse_obj so;
    int rc = default_seal(s, n.bucket, meta, sizeof(meta), &meta_len, &so);
    memcpy(x->meta, meta, meta_len);
    x->meta_len = meta_len;
    struct ol_obj_target tg = {.bucket = n.bucket, .key = n.key, .key_len = n.key_len,
                               .sse = &so};
    x->etag.md5 = NULL;
    if (rc == 0)
        rc = ol_etag_init(&x->etag, total);
    if (rc == 0)
        rc = ol_obj_write_begin(s->o.obj, &tg, (int64_t)total, &x->w);
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc < 0) {
        x->w = NULL;
        end_session(s, x, false);
        return rc;
    }
    uint8_t *b = malloc(8);
    if (!b) {
        end_session(s, x, true);
        return -ENOMEM;
    }
    struct ol_wbuf w = {.p = b, .cap = 8};
    ol_wbuf_u64(&w, x->id);
    out->ctl = b;
    out->ctl_len = w.len;
    put_session(s, x);
    return 0;
}

/* WRITE and COMMIT: the data at its offset, then (COMMIT) the object. */
static int op_put_more(struct ol_native_server *s, struct ol_net_req *req, uint8_t op,
                       const char *ak, struct ol_rbuf *r, struct out *out)
{
    uint64_t id = ol_rbuf_u64(r);
    uint64_t off = op == OL_COP_PUT_WRITE ? ol_rbuf_u64(r) : UINT64_MAX;
    if (r->bad)
        return -EINVAL;
    struct session *x = take_session(s, id, ak, off);
    if (!x)
        return -ENOENT;
    int rc = ol_net_req_check(req);
    uint64_t len = ol_net_req_hdr(req)->data_len;
    if (rc == 0 && off != UINT64_MAX && off != x->written)
        rc = -EIO; /* a lost or repeated message: never taken as data */
    if (rc == 0 && (len > x->total - x->written))
        rc = -EIO;
    if (rc == 0 && op == OL_COP_PUT_COMMIT && x->written + len != x->total)
        rc = -EIO;
    if (rc == 0 && len) {
        const uint8_t *data = ol_net_req_data(req);
        ol_etag_update(&x->etag, x->written, data, len);
        rc = ol_obj_write(x->w, data, len);
        if (rc == 0)
            x->written += len;
    }
    if (rc < 0) {
        end_session(s, x, true);
        return rc;
    }
    count(s, ST_PUTB, len);
    if (op == OL_COP_PUT_WRITE) {
        put_session(s, x);
        return 0;
    }
    rc = commit(s, x->w, &x->etag, x->total, x->meta, x->meta_len, out);
    x->w = NULL; /* consumed by the commit, whatever it answered */
    end_session(s, x, false);
    return rc;
}

static int op_put_abort(struct ol_native_server *s, const char *ak, struct ol_rbuf *r)
{
    uint64_t id = ol_rbuf_u64(r);
    if (r->bad)
        return -EINVAL;
    struct session *x = take_session(s, id, ak, UINT64_MAX);
    if (!x)
        return -ENOENT;
    end_session(s, x, true);
    return 0;
}

/* Aborts the sessions that are idle or whose connection is gone. */
static void sweep(struct ol_native_server *s, bool all)
{
    uint64_t now = ol_mono_ms();
    for (unsigned i = 0; i < OL_NATIVE_MAX_SESSIONS; i++) {
        struct session *x = &s->sessions[i];
        pthread_mutex_lock(&s->smu);
        bool drop = x->id && !x->busy &&
                    (all || x->dead || now - x->last_ms > OL_NATIVE_PUT_IDLE_MS);
        if (drop)
            x->busy = true;
        pthread_mutex_unlock(&s->smu);
        if (drop) {
            end_session(s, x, true);
            count(s, ST_ABORTED, 1);
        }
    }
}

static int op_delete(struct ol_native_server *s, const char *ak, struct ol_rbuf *r)
{
    struct names n;
    if (!arg_names(r, &n))
        return -EINVAL;
    int arc = allowed(s, ak, "s3:DeleteObject", n.bucket, n.key, n.key_len, NULL);
    if (arc < 0)
        return arc;
    if (s->o.may_ack_write && !s->o.may_ack_write())
        return -OL_EFENCED;
    int rc = ol_obj_delete(s->o.obj, n.bucket, n.key, n.key_len);
    return rc == -OL_ENOKEY ? 0 : rc;
}

static int op_list(struct ol_native_server *s, const char *ak, struct ol_rbuf *r,
                   struct out *out)
{
    char bucket[OL_NATIVE_MAX_BUCKET + 2], prefix[OL_NATIVE_MAX_KEY + 1],
        after[OL_NATIVE_MAX_KEY + 1];
    size_t bl, pl, al;
    if (!arg_str(r, bucket, sizeof(bucket), &bl) || bl == 0 || bl > OL_NATIVE_MAX_BUCKET ||
        !arg_str(r, prefix, sizeof(prefix), &pl) || !arg_str(r, after, sizeof(after), &al))
        return -EINVAL;
    uint32_t max = ol_rbuf_u32(r);
    if (r->bad)
        return -EINVAL;
    if (max == 0 || max > OL_NATIVE_MAX_LIST)
        max = OL_NATIVE_MAX_LIST;
    int arc = allowed(s, ak, "s3:ListBucket", bucket, NULL, 0, prefix);
    if (arc < 0)
        return arc;
    /* Start at the later of the prefix and start_after. */
    const char *from = after;
    size_t from_len = al;
    bool inclusive = false;
    if (pl && (al == 0 || memcmp(prefix, after, pl < al ? pl : al) > 0 ||
               (memcmp(prefix, after, pl < al ? pl : al) == 0 && pl > al))) {
        from = prefix;
        from_len = pl;
        inclusive = true;
    }
    struct ol_obj_iter *it;
    int rc = ol_obj_iter_open(s->o.obj, bucket, from, from_len, inclusive, &it);
    if (rc < 0)
        return rc;
    size_t cap = 4 + 1 + (size_t)max * (4 + OL_NATIVE_MAX_KEY + 8 + 8 + 4 + 72);
    uint8_t *b = malloc(cap);
    if (!b) {
        ol_obj_iter_close(it);
        return -ENOMEM;
    }
    struct ol_wbuf w = {.p = b, .cap = cap};
    ol_wbuf_u32(&w, 0); /* the count, set below */
    uint32_t n = 0;
    uint8_t truncated = 0;
    for (;;) {
        const char *k;
        size_t kl;
        struct ol_obj_info info;
        rc = ol_obj_iter_next(it, &k, &kl, &info);
        if (rc != 0)
            break; /* 1: the end; or an error */
        if (pl && (kl < pl || memcmp(k, prefix, pl) != 0))
            break; /* past the prefix: keys are in order */
        if (n == max) {
            truncated = 1;
            break;
        }
        char q[72];
        int qn = snprintf(q, sizeof(q), "\"%s\"", info.etag);
        ol_wbuf_str(&w, k, kl);
        ol_wbuf_u64(&w, info.size);
        ol_wbuf_u64(&w, (uint64_t)info.mtime_ns);
        ol_wbuf_str(&w, q, (size_t)qn);
        n++;
    }
    ol_obj_iter_close(it);
    if (rc < 0) {
        free(b);
        return rc;
    }
    if (w.over) {
        free(b);
        return rc;
    }
    ol_wbuf_u8(&w, truncated);
    memcpy(b, &(uint32_t){n}, 4); /* little-endian hosts (net/wire.h) */
    out->ctl = b;
    out->ctl_len = w.len;
    return 0;
}

/* The KV-cache ops (kv/serve.h): the batch runs there; here only the
 * request's data check and the reply buffer. */
static int op_kv(struct ol_native_server *s, struct ol_net_req *req, uint8_t op,
                 struct ol_rbuf *r, struct out *out)
{
    if (!s->o.kv)
        return -ENOTSUP;
    uint64_t in_len = ol_net_req_hdr(req)->data_len;
    int rc = in_len ? ol_net_req_check(req) : 0;
    if (rc < 0)
        return rc;
    void *data = NULL;
    if (op == OL_COP_KV_GET && !(data = buf_get(s, OL_NATIVE_MAX_DATA)))
        return -ENOMEM;
    struct ol_kv_out ko;
    rc = ol_kv_serve(s->o.kv, op, r->p + r->off, r->len - r->off,
                     in_len ? ol_net_req_data(req) : NULL, in_len, data,
                     data ? OL_NATIVE_MAX_DATA : 0, &ko);
    out->ctl = ko.ctl;
    out->ctl_len = ko.ctl_len;
    out->data = data;
    out->data_len = ko.data_len;
    if (op == OL_COP_KV_GET)
        count(s, ST_GETB, ko.data_len);
    else if (op == OL_COP_KV_PUT && rc >= 0)
        count(s, ST_PUTB, in_len);
    return rc;
}

/* ---- workers ---- */

static void handle(struct ol_native_server *s, struct ol_net_req *req, unsigned lane)
{
    const struct ol_wire_hdr *h = ol_net_req_hdr(req);
    struct ol_rbuf r = {.p = ol_net_req_ctl(req), .len = h->ctl_len};
    char ak[OL_NATIVE_MAX_ACCESS_KEY + 1];
    struct out out = {0};
    int rc;
    count(s, ST_REQ, 1);
    struct ol_rl_user *lim = NULL;
    if (!access_key_of(r.p, r.len, ak)) {
        rc = -EACCES; /* key_fn let nothing else through */
    } else if (h->op != OL_COP_HELLO && (lim = ol_rl_user_get(s->o.rl, ak)) &&
               !ol_rl_request(s->o.rl, lim, OL_RL_NATIVE)) {
        rc = -EBUSY; /* over the user's rate (access/ratelimit.h) */
        lim = NULL;
    } else {
        size_t n;
        ol_rbuf_str(&r, OL_NATIVE_MAX_ACCESS_KEY, &n);
        switch (h->op) {
        case OL_COP_HELLO:
            rc = op_hello(s, &out);
            break;
        case OL_COP_HEAD:
        case OL_COP_GET:
            count(s, ST_GET, 1);
            rc = op_head_get(s, ak, h->op, &r, &out);
            break;
        case OL_COP_LAYOUT:
            count(s, ST_LAYOUT, 1);
            rc = op_layout(s, ak, &r, &out);
            break;
        case OL_COP_SHARD_GET:
            count(s, ST_SHARD, 1);
            rc = op_shard_get(s, ak, &r, &out);
            break;
        case OL_COP_GET_CUDA:
            count(s, ST_GET, 1);
            rc = op_get_cuda(s, ak, &r, &out);
            break;
        case OL_COP_GET_BATCH:
            count(s, ST_GET, 1);
            rc = op_get_batch(s, ak, &r, &out);
            break;
        case OL_COP_PUT:
            count(s, ST_PUT, 1);
            rc = op_put(s, req, ak, &r, &out);
            break;
        case OL_COP_PUT_BEGIN:
            count(s, ST_PUT, 1);
            rc = op_put_begin(s, req, lane, ak, &r, &out);
            break;
        case OL_COP_PUT_WRITE:
        case OL_COP_PUT_COMMIT:
            rc = op_put_more(s, req, h->op, ak, &r, &out);
            break;
        case OL_COP_PUT_ABORT:
            rc = op_put_abort(s, ak, &r);
            break;
        case OL_COP_DELETE:
            rc = op_delete(s, ak, &r);
            break;
        case OL_COP_LIST:
            rc = op_list(s, ak, &r, &out);
            break;
        case OL_COP_KV_PUT:
        case OL_COP_KV_GET:
        case OL_COP_KV_MATCH_PREFIX:
        case OL_COP_KV_RELEASE:
        case OL_COP_KV_STATS:
            rc = op_kv(s, req, h->op, &r, &out);
            break;
        default:
            rc = -ENOTSUP;
        }
    }
    if (lim)
        ol_rl_bytes(lim, h->data_len + (rc < 0 ? 0 : out.data_len + out.moved));
    if (rc < 0) {
        count(s, ST_ERR, 1);
        /* An error carries no data (a partial read never passes as one). */
        buf_release(s, out.data);
        out.data = NULL;
        out.data_len = 0;
    }
    if (out.mapped)
        ol_net_reply_ex(req, rc, out.ctl, out.ctl_len, out.data, out.data_len, reader_release,
                        out.mapped);
    else
        ol_net_reply_ex(req, rc, out.ctl, out.ctl_len, out.data, out.data_len, buf_release, s);
}

static void *worker_main(void *arg)
{
    struct ol_native_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && s->count == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            if (s->count == 0)
                break;
        }
        struct ol_net_req *req = NULL;
        unsigned lane = 0;
        if (s->count) {
            req = s->ring[s->head].req;
            lane = s->ring[s->head].lane;
            s->head = (s->head + 1) % OL_NATIVE_SERVER_QUEUE;
            s->count--;
        }
        bool stop = s->stop;
        uint64_t now = ol_mono_ms();
        bool sweep_now = now - s->last_sweep_ms >= SWEEP_MS;
        if (sweep_now)
            s->last_sweep_ms = now;
        pthread_mutex_unlock(&s->mu);
        close_done_readers(s);
        if (req) {
            if (stop)
                ol_net_reply(req, -ESHUTDOWN, NULL, 0, NULL, 0);
            else
                handle(s, req, lane);
            continue;
        }
        if (stop)
            return NULL;
        if (sweep_now) {
            sweep(s, false);
            ol_native_cuda_sweep(s->cuda);
        }
    }
}

int ol_native_server_create(const struct ol_native_server_opts *opts,
                            struct ol_native_server **out)
{
    if (!opts->obj || !opts->secret)
        return -EINVAL;
    struct ol_native_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->o = *opts;
    s->ring = calloc(OL_NATIVE_SERVER_QUEUE, sizeof(*s->ring));
    s->sessions = calloc(OL_NATIVE_MAX_SESSIONS, sizeof(*s->sessions));
    if (!s->ring || !s->sessions) {
        free(s->ring);
        free(s->sessions);
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->smu, NULL);
    pthread_cond_init(&s->scv, NULL);
    pthread_mutex_init(&s->pmu, NULL);
    s->last_sweep_ms = ol_mono_ms();
    if (!ol_host_boot_id(s->boot_id))
        memset(s->boot_id, 0, sizeof(s->boot_id));
    if (ol_native_cuda_create(&s->cuda) == 0)
        ol_info("native: CUDA IPC reads on (clients on this host may GET into GPU memory)");
    struct ol_net_opts no = {
        .hlc = opts->hlc, .key_fn = key_fn, .key_arg = s, .spin_us = OL_NATIVE_SERVER_SPIN_US};
    unsigned nl = opts->lanes ? opts->lanes : 1;
    if (nl > OL_NATIVE_MAX_LANES)
        nl = OL_NATIVE_MAX_LANES;
    int rc = 0;
    for (unsigned i = 0; i < nl && rc == 0; i++) {
        s->lanes[i].s = s;
        s->lanes[i].idx = i;
        rc = ol_net_create(&no, &s->lanes[i].net);
        if (rc == 0)
            s->nlanes++;
    }
    if (rc < 0) {
        for (unsigned i = 0; i < s->nlanes; i++)
            ol_net_destroy(s->lanes[i].net);
        goto fail;
    }
    unsigned nw = opts->workers ? opts->workers : OL_NATIVE_SERVER_WORKERS;
    if (nw > MAX_WORKERS)
        nw = MAX_WORKERS;
    for (unsigned i = 0; i < nw; i++) {
        if ((rc = -pthread_create(&s->threads[i], NULL, worker_main, s)) < 0)
            break;
        s->nthreads++;
    }
    /* Lane 0 on the configured port, the others on free ones. */
    for (unsigned i = 0; i < s->nlanes && rc == 0; i++)
        rc = ol_net_listen(s->lanes[i].net, opts->host, i ? 0 : opts->port, serve, gone,
                           &s->lanes[i]);
    if (rc < 0) {
        ol_native_server_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
fail:
    ol_native_cuda_destroy(s->cuda);
    free(s->ring);
    free(s->sessions);
    free(s);
    return rc;
}

uint16_t ol_native_server_port(const struct ol_native_server *s)
{
    return ol_net_port(s->lanes[0].net);
}

unsigned ol_native_server_lanes(const struct ol_native_server *s, uint16_t *ports, unsigned max)
{
    unsigned n = 0;
    for (; n < s->nlanes && n < max; n++)
        ports[n] = ol_net_port(s->lanes[n].net);
    return n;
}

void ol_native_server_destroy(struct ol_native_server *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->nlanes; i++)
        ol_net_unlisten(s->lanes[i].net);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    /* What is still queued is answered (dropped: not listening). */
    while (s->count) {
        ol_net_reply(s->ring[s->head].req, -ESHUTDOWN, NULL, 0, NULL, 0);
        s->head = (s->head + 1) % OL_NATIVE_SERVER_QUEUE;
        s->count--;
    }
    sweep(s, true);
    ol_native_cuda_destroy(s->cuda);
    for (unsigned i = 0; i < s->nlanes; i++)
        ol_net_destroy(s->lanes[i].net);
    close_done_readers(s); /* every reply is released by now */
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->smu);
    pthread_cond_destroy(&s->scv);
    for (int c = 0; c < POOL_CLASSES; c++)
        while (s->pool[c]) {
            struct pooled *p = s->pool[c];
            s->pool[c] = p->next;
            free(p);
        }
    pthread_mutex_destroy(&s->pmu);
    free(s->ring);
    free(s->sessions);
    free(s);
}

void ol_native_server_stats(struct ol_native_server *s, struct ol_native_server_stats *out)
{
    out->requests = atomic_load(&s->st[ST_REQ]);
    out->gets = atomic_load(&s->st[ST_GET]);
    out->puts = atomic_load(&s->st[ST_PUT]);
    out->get_bytes = atomic_load(&s->st[ST_GETB]);
    out->put_bytes = atomic_load(&s->st[ST_PUTB]);
    out->errors = atomic_load(&s->st[ST_ERR]);
    out->sessions_aborted = atomic_load(&s->st[ST_ABORTED]);
    out->layouts = atomic_load(&s->st[ST_LAYOUT]);
    out->shard_gets = atomic_load(&s->st[ST_SHARD]);
    out->shard_get_bytes = atomic_load(&s->st[ST_SHARDB]);
    out->lanes = s->nlanes;
    for (unsigned i = 0; i < OL_NATIVE_MAX_LANES; i++)
        out->lane_requests[i] = i < s->nlanes ? atomic_load(&s->lanes[i].requests) : 0;
}
