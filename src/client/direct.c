/* libopenlake: direct reads on a cluster (docs/PROTOCOL.md "Direct
 * reads"; the node's side is native/direct.h).
 *
 * A GET asks any node for the object's LAYOUT (resolved and authorized as
 * a GET), then reads the pieces of the data shards the range needs from
 * the nodes that hold them, many SHARD_GETs in flight at once, each
 * landing at its place in the caller's buffer.  A piece whose node fails,
 * times out or answers an error is rebuilt with the pieces of its stripe
 * that share its span (struct group below): only the spans missing to make
 * k are read, and ISA-L (ec/codec.h) decodes the lost ones into the
 * caller's buffer.  Reads of at most inline_max bytes come back in
 * LAYOUT's reply (one round trip, no SHARD_GET).  When fewer
 * than k shards of a piece can be had, the GET goes through a node as
 * before (the fallback), and so does every object LAYOUT says is not
 * direct (encrypted, a manifest, one node).
 *
 * Every piece lies inside one stripe unit (ec/stripe.h): it is one
 * contiguous span of one shard and of the object, so no reply needs a
 * copy.  The version LAYOUT named is pinned: a node whose drive has
 * another version answers an error for it, never other bytes. */
#include "client/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "ec/codec.h"
#include "ec/stripe.h"

enum {
    WINDOW = 64,        /* SHARD_GETs in flight per GET */
    REBUILD_BATCH = 16, /* lost pieces rebuilt at once (scratch: k units each) */
    MAX_PIECES = 1 << 20,
    SHARD_CTL = 4 + OL_NATIVE_MAX_ACCESS_KEY + 4 + OL_NATIVE_MAX_BUCKET + 4 + OL_NATIVE_MAX_KEY +
                4 + OL_VERSION_ID_BYTES + 1 + 8 + 8,
};

/* ---- LAYOUT ---- */

int olc_get_layout(struct ol_client *c, const char *bucket, const char *key,
                   const struct olc_want *want, struct olc_layout *L)
{
    uint8_t a[4 * 3 + OL_NATIVE_MAX_BUCKET + OL_NATIVE_MAX_KEY + 3 * 8];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, key, strlen(key));
    ol_wbuf_str(&w, "", 0);
    uint64_t inl = want ? want->inline_max : 0;
    if (inl) {
        ol_wbuf_u64(&w, want->offset);
        ol_wbuf_u64(&w, want->cap);
        ol_wbuf_u64(&w, inl);
    }
    enum { RCAP = 8 + 8 + 4 + 72 + 4 + 72 + 4 + 256 + 3000 };
    uint8_t *r = malloc(RCAP);
    if (!r)
        return -ENOMEM;
    uint64_t dcap = inl ? (want->cap < inl ? want->cap : inl) : 0;
    struct olc_call k = {.op = OL_COP_LAYOUT,
                         .args = a,
                         .args_len = w.len,
                         .rctl = r,
                         .rctl_cap = RCAP,
                         .rdata = dcap ? want->buf : NULL,
                         .rdata_cap = dcap,
                         .node = -1};
    int rc = olc_call(c, &k);
    if (rc >= 0 && (uint64_t)rc > dcap)
        rc = -EPROTO;
    int64_t status = rc;
    if (rc >= 0)
        rc = olc_info(r, k.rctl_len, &L->info);
    if (rc < 0) {
        free(r);
        return rc;
    }
    /* Past the info (olc_info read it). */
    struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
    size_t n;
    (void)ol_rbuf_u64(&rb);
    (void)ol_rbuf_u64(&rb);
    for (int i = 0; i < 3; i++)
        (void)ol_rbuf_str(&rb, 4096, &n);
    uint8_t how = ol_rbuf_u8(&rb);
    L->direct = how == OL_NATIVE_LAYOUT_DIRECT;
    L->inlined = inl && how == OL_NATIVE_LAYOUT_INLINE && !rb.bad;
    L->inline_len = (uint64_t)status;
    if (L->inlined && (uint64_t)status != k.rdata_len) {
        free(r);
        return -EPROTO; /* fewer bytes than the status says */
    }
    if (L->direct) {
        L->set = ol_rbuf_u32(&rb);
        ol_rbuf_vid(&rb, &L->vid);
        L->k = ol_rbuf_u8(&rb);
        L->m = ol_rbuf_u8(&rb);
        L->unit = ol_rbuf_u32(&rb);
        L->size = ol_rbuf_u64(&rb);
        if (rb.bad || ol_ec_check_geometry(L->k, L->m) < 0 || L->unit == 0 ||
            L->size != L->info.size) {
            L->direct = false;
        }
        /* The node LAYOUT went to says "" for itself. */
        char self[128] = "";
        pthread_mutex_lock(&c->mu);
        if (k.used_node >= 0 && (unsigned)k.used_node < c->nnodes)
            memcpy(self, c->nodes[k.used_node], sizeof(self));
        pthread_mutex_unlock(&c->mu);
        for (unsigned i = 0; L->direct && i < L->k + L->m; i++) {
            L->state[i] = ol_rbuf_u8(&rb);
            const char *s = ol_rbuf_str(&rb, 127, &n);
            if (rb.bad) {
                L->direct = false;
                break;
            }
            if (n)
                memcpy(L->addr[i], s, n);
            else
                memcpy(L->addr[i], self, sizeof(self));
            L->addr[i][n ? n : sizeof(self) - 1] = 0;
            if (!L->addr[i][0])
                L->state[i] = OL_NATIVE_SHARD_MISSING;
        }
    }
    free(r);
    return 0;
}

/* ---- SHARD_GETs in flight ---- */

struct flight {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned inflight;
};

struct sreq {
    struct ol_net_call nc;
    struct flight *f;
    unsigned shard;
    uint64_t shard_off, len;
    uint8_t *dst;
    int rc;
    uint8_t ctl[SHARD_CTL];
    uint8_t rctl[16];
    char addr[128]; /* the node's address on the lane taken */
    unsigned lane;
    struct ol_client *c;
};

static void on_shard(void *arg, struct ol_net_call *nc, int result)
{
    struct sreq *q = arg;
    /* Exactly the bytes asked for, or the piece counts as lost. */
    bool whole = result >= 0 && (uint64_t)result == q->len && nc->rep_data_len == q->len;
    q->rc = result < 0 ? result : whole ? 0 : -EIO;
    olc_lane_done(q->c, q->lane);
    pthread_mutex_lock(&q->f->mu);
    q->f->inflight--;
    pthread_cond_signal(&q->f->cv);
    pthread_mutex_unlock(&q->f->mu);
}

static void prepare(struct ol_client *c, const struct olc_layout *L, const char *bucket,
                    const char *key, struct sreq *q)
{
    struct ol_wbuf w = {.p = q->ctl, .cap = sizeof(q->ctl)};
    ol_wbuf_str(&w, c->access_key, strlen(c->access_key));
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, key, strlen(key));
    ol_wbuf_u32(&w, L->set);
    ol_wbuf_vid(&w, &L->vid);
    ol_wbuf_u8(&w, (uint8_t)q->shard);
    ol_wbuf_u64(&w, q->shard_off);
    ol_wbuf_u64(&w, q->len);
    q->nc = (struct ol_net_call){.addr = q->addr,
                                 .op = OL_COP_SHARD_GET,
                                 .timeout_ms = c->timeout_ms,
                                 .ctl = q->ctl,
                                 .ctl_len = w.len,
                                 .rep_ctl = q->rctl,
                                 .rep_ctl_cap = sizeof(q->rctl),
                                 .rep_data = q->dst,
                                 .rep_data_cap = q->len};
}

/* Runs the SHARD_GETs q[0..n) (rc < 0 already: skipped), WINDOW at a time;
 * each ends with its rc. */
static void run_all(struct ol_client *c, const struct olc_layout *L, const char *bucket,
                    const char *key, struct sreq **q, size_t n)
{
    struct flight f = {.inflight = 0};
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    pthread_mutex_lock(&f.mu);
    for (size_t next = 0; next < n || f.inflight;) {
        while (next < n && f.inflight < WINDOW) {
            struct sreq *r = q[next++];
            if (r->rc < 0)
                continue;
            r->f = &f;
            prepare(c, L, bucket, key, r);
            f.inflight++;
            pthread_mutex_unlock(&f.mu);
            struct ol_net *net;
            r->c = c;
            r->lane = olc_lane_pick(c, L->addr[r->shard], r->addr, &net);
            int rc = ol_net_call_async(net, &r->nc, on_shard, r);
            if (rc < 0)
                olc_lane_done(c, r->lane);
            pthread_mutex_lock(&f.mu);
            if (rc < 0) {
                r->rc = rc;
                f.inflight--;
            }
        }
        if (f.inflight)
            pthread_cond_wait(&f.cv, &f.mu);
    }
    pthread_mutex_unlock(&f.mu);
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
    for (size_t i = 0; i < n; i++)
        atomic_fetch_add(q[i]->rc == 0 ? &c->st_shard_reads : &c->st_shard_failures, 1);
}

int olc_shard_get(struct ol_client *c, const char *bucket, const char *key,
                  const struct olc_layout *L, unsigned shard, uint64_t off, uint64_t len, void *buf)
{
    if (shard >= L->k + L->m)
        return -EINVAL;
    struct sreq *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->shard = shard;
    r->shard_off = off;
    r->len = len;
    r->dst = buf;
    run_all(c, L, bucket, key, &r, 1);
    int rc = r->rc;
    free(r);
    return rc;
}

/* ---- rebuilding lost pieces ---- */

/* The pieces of one stripe that share a span (the same shard offset and
 * length: a whole stripe's data pieces do, the edges of a ranged read may
 * not) decode together: the pieces of it that arrived are sources where
 * they lie in the caller's buffer, the lost ones are decoded in place, and
 * only the spans missing to make k (parity, data shards outside the range)
 * are read, into scratch that is kept from one group to the next. */
struct group {
    uint64_t shard_off, len;
    uint8_t *unit[OL_EC_MAX_UNITS]; /* in the caller's buffer, scratch, or NULL */
    uint8_t *own[OL_EC_MAX_UNITS];  /* this slot's scratch */
    uint64_t own_cap[OL_EC_MAX_UNITS];
    struct sreq src[OL_EC_MAX_UNITS];
    uint32_t present, lost, tried;
};

/* Rebuilds the groups g[0..n): each round asks, for every group still short
 * of k spans, the next shards not known bad; then decodes them all.  0, or
 * -ENODATA when a group cannot get k spans. */
static int rebuild(struct ol_client *c, const struct olc_layout *L, const char *bucket,
                   const char *key, struct ol_ec_codec *codec, bool *bad, struct group *g,
                   size_t n)
{
    unsigned width = L->k + L->m;
    struct sreq *q[REBUILD_BATCH * OL_EC_MAX_UNITS];
    int rc = 0;
    for (unsigned round = 0; round <= width && rc == 0; round++) {
        size_t nq = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct group *G = &g[i];
            unsigned have = (unsigned)__builtin_popcount(G->present);
            /* Data shards first (their spans are object bytes), then parity. */
            for (unsigned s = 0; s < width && have < L->k; s++) {
                uint32_t bit = 1u << s;
                if ((G->present | G->lost | G->tried) & bit || bad[s] ||
                    L->state[s] == OL_NATIVE_SHARD_MISSING)
                    continue;
                G->tried |= bit;
                if (G->own_cap[s] < G->len) {
                    free(G->own[s]);
                    G->own_cap[s] = 0;
                    if (!(G->own[s] = malloc(G->len))) {
                        rc = -ENOMEM;
                        break;
                    }
                    G->own_cap[s] = G->len;
                }
                struct sreq *r = &G->src[s];
                memset(r, 0, sizeof(*r));
                r->shard = s;
                r->shard_off = G->shard_off;
                r->len = G->len;
                r->dst = G->unit[s] = G->own[s];
                q[nq++] = r;
                have++;
            }
            if (have < L->k && rc == 0)
                rc = -ENODATA; /* no shards left to ask */
        }
        if (nq == 0 || rc < 0)
            break;
        run_all(c, L, bucket, key, q, nq);
        for (size_t i = 0; i < nq; i++)
            if (q[i]->rc < 0)
                bad[q[i]->shard] = true;
        for (size_t i = 0; i < n; i++)
            for (unsigned s = 0; s < width; s++)
                if (g[i].tried >> s & 1 && g[i].src[s].rc == 0)
                    g[i].present |= 1u << s;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct group *G = &g[i];
        if ((unsigned)__builtin_popcount(G->present) < L->k)
            return -ENODATA;
        rc = ol_ec_reconstruct(codec, G->len, G->unit, G->present, G->lost);
        if (rc == 0)
            atomic_fetch_add(&c->st_rebuilt, (uint64_t)__builtin_popcount(G->lost));
    }
    return rc;
}

/* Rebuilds the lost pieces among rq[0..np) (in object order, so the pieces
 * of one span are next to each other), REBUILD_BATCH groups at a time. */
static int rebuild_all(struct ol_client *c, const struct olc_layout *L, const char *bucket,
                       const char *key, bool *bad, struct sreq *rq, size_t np)
{
    struct ol_ec_codec *codec = NULL;
    struct group *g = calloc(REBUILD_BATCH, sizeof(*g));
    int rc = g ? ol_ec_codec_create(L->k, L->m, &codec) : -ENOMEM;
    for (size_t i = 0; i < np && rc == 0;) {
        size_t n = 0;
        while (i < np && n < REBUILD_BATCH) {
            size_t j = i;
            uint32_t present = 0, lost = 0;
            for (; j < np && rq[j].shard_off == rq[i].shard_off && rq[j].len == rq[i].len; j++)
                *(rq[j].rc == 0 ? &present : &lost) |= 1u << rq[j].shard;
            if (lost) {
                struct group *G = &g[n++];
                G->shard_off = rq[i].shard_off;
                G->len = rq[i].len;
                G->present = present;
                G->lost = lost;
                G->tried = 0;
                memset(G->unit, 0, sizeof(G->unit));
                for (size_t t = i; t < j; t++)
                    G->unit[rq[t].shard] = rq[t].dst;
            }
            i = j;
        }
        if (n)
            rc = rebuild(c, L, bucket, key, codec, bad, g, n);
    }
    for (size_t i = 0; g && i < REBUILD_BATCH; i++)
        for (unsigned s = 0; s < OL_EC_MAX_UNITS; s++)
            free(g[i].own[s]);
    ol_ec_codec_destroy(codec);
    free(g);
    return rc;
}

/* ---- the GET ---- */

bool olc_direct_on(struct ol_client *c)
{
    if (atomic_load(&c->direct_off))
        return false;
    pthread_mutex_lock(&c->mu);
    unsigned n = c->nnodes;
    pthread_mutex_unlock(&c->mu);
    return n > 1;
}

/* Reads [offset, offset + want) of the version of L into buf.  0, or an
 * error after which the caller falls back to a GET. */
static int read_direct(struct ol_client *c, const char *bucket, const char *key,
                       const struct olc_layout *L, uint64_t offset, uint64_t want, uint8_t *buf)
{
    struct ol_ec_layout l;
    int rc = ol_ec_layout_init(&l, L->size, L->unit, L->k);
    if (rc < 0)
        return rc;
    uint64_t end = offset + want;
    size_t np = 0;
    struct ol_ec_piece p;
    for (uint64_t o = offset; o < end && np <= MAX_PIECES; o += p.len, np++)
        if ((rc = ol_ec_layout_piece(&l, o, end, &p)) < 0)
            return rc;
    if (np > MAX_PIECES)
        return -E2BIG;
    struct sreq *rq = calloc(np, sizeof(*rq));
    struct sreq **q = malloc(sizeof(*q) * np);
    if (!rq || !q) {
        free(rq);
        free(q);
        return -ENOMEM;
    }
    size_t i = 0;
    for (uint64_t o = offset; o < end; o += p.len, i++) {
        (void)ol_ec_layout_piece(&l, o, end, &p);
        rq[i].shard = p.shard;
        rq[i].shard_off = p.shard_off;
        rq[i].len = p.len;
        rq[i].dst = buf + (p.obj_off - offset);
        /* A shard LAYOUT already knows lost is rebuilt without asking. */
        rq[i].rc = L->state[p.shard] == OL_NATIVE_SHARD_MISSING ? -ENXIO : 0;
        q[i] = &rq[i];
    }
    run_all(c, L, bucket, key, q, np);
    bool bad[OL_EC_MAX_UNITS] = {false};
    size_t nlost = 0;
    for (i = 0; i < np; i++)
        if (rq[i].rc < 0) {
            bad[rq[i].shard] = true;
            nlost++;
        }
    rc = 0;
    /* Decoding writes the caller's buffer from the CPU: not where it may
     * be GPU memory (a UCX that moves CUDA memory): those GETs fall back. */
    if (nlost && ol_net_cuda_memory(c->net))
        rc = -EXDEV;
    if (nlost && rc == 0)
        rc = rebuild_all(c, L, bucket, key, bad, rq, np);
    free(q);
    free(rq);
    return rc;
}

bool olc_direct_get(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                    void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result)
{
    if (!olc_direct_on(c))
        return false;
    struct olc_layout *L = calloc(1, sizeof(*L));
    if (!L)
        return false;
    struct olc_want w = {.offset = offset, .cap = cap, .inline_max = c->inline_max, .buf = buf};
    int rc = olc_get_layout(c, bucket, key, &w, L);
    bool done = true;
    if (rc == -ENOTSUP) {
        atomic_store(&c->direct_off, true); /* an older node: GET from now on */
        done = false;
    } else if (rc < 0) {
        *result = rc; /* what a GET would answer too (no key, refused...) */
    } else if (L->inlined) {
        atomic_fetch_add(&c->st_inline, 1);
        *result = (int64_t)L->inline_len;
    } else if (offset > L->size || (offset == L->size && L->size > 0)) {
        *result = -ERANGE;
    } else if (!L->direct) {
        done = false;
    } else {
        uint64_t want = L->size - offset < cap ? L->size - offset : cap;
        rc = want ? read_direct(c, bucket, key, L, offset, want, buf) : 0;
        if (rc < 0) {
            atomic_fetch_add(&c->st_fallbacks, 1);
            done = false;
        } else {
            atomic_fetch_add(&c->st_direct, 1);
            *result = (int64_t)want;
        }
    }
    if (done && info && *result >= 0)
        *info = L->info;
    free(L);
    return done;
}

OLC_API void ol_client_stats(struct ol_client *c, struct ol_client_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c)
        return;
    out->direct_gets = atomic_load(&c->st_direct);
    out->shard_reads = atomic_load(&c->st_shard_reads);
    out->shard_failures = atomic_load(&c->st_shard_failures);
    out->pieces_rebuilt = atomic_load(&c->st_rebuilt);
    out->fallbacks = atomic_load(&c->st_fallbacks);
    out->lanes = c->nlanes;
    for (unsigned i = 0; i < c->nlanes && i < OL_CLIENT_MAX_LANES; i++)
        out->lane_calls[i] = atomic_load(&c->lane_calls[i]);
    out->inline_gets = atomic_load(&c->st_inline);
    out->cuda_ipc_gets = atomic_load(&c->st_cuda_ipc);
}
