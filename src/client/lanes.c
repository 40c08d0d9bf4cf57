/* libopenlake: a large GET spread over the client's lanes (internal.h,
 * olc_get_spread).  One GET message is copied by one net thread on each
 * side; pieces of it in flight on every lane at once are copied by all of
 * them. */
#include "client/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

enum { PIECE_ALIGN = 1 << 20, ARGS_MAX = 4 * 8 + OL_NATIVE_MAX_BUCKET + OL_NATIVE_MAX_KEY + 96 };

struct spread {
    struct ol_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned left;
};

struct piece {
    struct ol_net_call nc;
    struct spread *sp;
    unsigned lane;
    char addr[128];
    uint64_t off, len;
    int rc;
    uint8_t ctl[4 + OL_NATIVE_MAX_ACCESS_KEY + ARGS_MAX];
    uint8_t rctl[512];
};

/* On a net thread: one piece answered. */
static void on_piece(void *arg, struct ol_net_call *nc, int rc)
{
    (void)nc;
    struct piece *p = arg;
    struct spread *sp = p->sp;
    p->rc = rc;
    olc_lane_done(sp->c, p->lane);
    pthread_mutex_lock(&sp->mu);
    if (--sp->left == 0)
        pthread_cond_signal(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
}

/* Sends the pieces q[0..n) to node at once, each on the least busy lane,
 * and waits for every answer (each call has its deadline: this returns). */
static void run_pieces(struct ol_client *c, const char *node, const char *bucket,
                       const char *key, const char *if_match, uint8_t *buf, uint64_t base,
                       struct piece *q, unsigned n)
{
    struct spread sp = {.c = c, .left = n};
    pthread_mutex_init(&sp.mu, NULL);
    pthread_cond_init(&sp.cv, NULL);
    size_t akl = strlen(c->access_key);
    for (unsigned i = 0; i < n; i++) {
        struct piece *p = &q[i];
        struct ol_wbuf w = {.p = p->ctl, .cap = sizeof(p->ctl)};
        ol_wbuf_str(&w, c->access_key, akl);
        ol_wbuf_str(&w, bucket, strlen(bucket));
        ol_wbuf_str(&w, key, strlen(key));
        ol_wbuf_str(&w, "", 0);
        ol_wbuf_u64(&w, p->off);
        ol_wbuf_u64(&w, p->len);
        if (if_match)
            ol_wbuf_str(&w, if_match, strlen(if_match));
        p->sp = &sp;
        struct ol_net *net;
        p->lane = olc_lane_pick(c, node, p->addr, &net);
        p->nc = (struct ol_net_call){.addr = p->addr,
                                     .op = OL_COP_GET,
                                     .timeout_ms = c->timeout_ms,
                                     .ctl = p->ctl,
                                     .ctl_len = w.len,
                                     .rep_ctl = p->rctl,
                                     .rep_ctl_cap = sizeof(p->rctl),
                                     .rep_data = buf + (p->off - base),
                                     .rep_data_cap = p->len};
        int rc = w.over ? -EINVAL : ol_net_call_async(net, &p->nc, on_piece, p);
        if (rc < 0) {
            p->rc = rc;
            olc_lane_done(c, p->lane);
            pthread_mutex_lock(&sp.mu);
            sp.left--;
            pthread_mutex_unlock(&sp.mu);
        }
    }
    pthread_mutex_lock(&sp.mu);
    while (sp.left)
        pthread_cond_wait(&sp.cv, &sp.mu);
    pthread_mutex_unlock(&sp.mu);
    pthread_mutex_destroy(&sp.mu);
    pthread_cond_destroy(&sp.cv);
}

/* Cuts [off, off+len) into up to nlanes pieces of at least PIECE_ALIGN
 * bytes and at most OL_NATIVE_MAX_DATA: how many. */
static unsigned cut(struct ol_client *c, uint64_t off, uint64_t len, struct piece *q)
{
    uint64_t piece = (len + c->nlanes - 1) / c->nlanes;
    piece = (piece + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    if (piece > OL_NATIVE_MAX_DATA)
        piece = OL_NATIVE_MAX_DATA;
    unsigned n = 0;
    for (uint64_t o = 0; o < len && n < c->nlanes; n++, o += piece) {
        q[n].off = off + o;
        q[n].len = len - o < piece ? len - o : piece;
    }
    return n;
}

bool olc_get_spread(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                    void *buf, uint64_t cap, struct ol_client_info *info, int64_t *result)
{
    if (c->nlanes < 2 || cap < OLC_SPREAD_MIN)
        return false;
    struct piece *q = calloc(c->nlanes, sizeof(*q));
    if (!q)
        return false;
    pthread_mutex_lock(&c->mu);
    char node[128];
    memcpy(node, c->nodes[atomic_fetch_add(&c->next, 1) % c->nnodes], sizeof(node));
    pthread_mutex_unlock(&c->mu);
    /* The first round asks blind (the size is not known yet): every piece
     * answers with the object's info, and they must all name the same
     * ETag and version (an overwrite in between: false, and the caller's
     * one-message path reads it again).  Pieces past the end answer
     * -ERANGE. */
    uint64_t span = cap < (uint64_t)c->nlanes * OL_NATIVE_MAX_DATA
                        ? cap
                        : (uint64_t)c->nlanes * OL_NATIVE_MAX_DATA;
    unsigned n = cut(c, offset, span, q);
    run_pieces(c, node, bucket, key, NULL, buf, offset, q, n);
    struct ol_client_info first, other;
    bool spread = false;
    *result = q[0].rc;
    if (q[0].rc < 0) {
        spread = !olc_transport_error(q[0].rc); /* the answer: ENOKEY, ERANGE... */
        goto out;
    }
    if (olc_info(q[0].rctl, q[0].nc.rep_ctl_len, &first) < 0)
        goto out;
    uint64_t end = first.size - offset < cap ? first.size - offset : cap;
    uint64_t got = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t rel = q[i].off - offset;
        if (rel >= end)
            break; /* past the end: whatever it answered */
        uint64_t want = end - rel < q[i].len ? end - rel : q[i].len;
        if (q[i].rc != (int64_t)want || olc_info(q[i].rctl, q[i].nc.rep_ctl_len, &other) < 0 ||
            strcmp(other.etag, first.etag) != 0 ||
            strcmp(other.version_id, first.version_id) != 0 || other.size != first.size)
            goto out; /* changed under us or failed: the one-message path */
        got = rel + want;
    }
    /* The rest (an object larger than one round), pinned to the first
     * round's ETag as the one-message path pins its messages. */
    while (got < end) {
        uint64_t l = end - got;
        if (l > (uint64_t)c->nlanes * OL_NATIVE_MAX_DATA)
            l = (uint64_t)c->nlanes * OL_NATIVE_MAX_DATA;
        n = cut(c, offset + got, l, q);
        run_pieces(c, node, bucket, key, first.etag, (uint8_t *)buf + got, offset + got, q, n);
        for (unsigned i = 0; i < n; i++) {
            if (q[i].rc != (int64_t)q[i].len) {
                *result = q[i].rc < 0 ? q[i].rc : -EIO;
                spread = true;
                goto out;
            }
        }
        got += l;
    }
    if (info)
        *info = first;
    *result = (int64_t)got;
    spread = true;
out:
    free(q);
    return spread;
}
