/* libopenlake: get, put, head, delete, list (include/openlake/client.h). */
#include "client/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int olc_info(const void *ctl, size_t len, struct ol_client_info *info)
{
    struct ol_client_info tmp;
    if (!info)
        info = &tmp;
    memset(info, 0, sizeof(*info));
    struct ol_rbuf r = {.p = ctl, .len = len};
    info->size = ol_rbuf_u64(&r);
    info->mtime_ns = (int64_t)ol_rbuf_u64(&r);
    size_t n;
    const char *s = ol_rbuf_str(&r, sizeof(info->etag) - 1, &n);
    if (s)
        memcpy(info->etag, s, n);
    s = ol_rbuf_str(&r, sizeof(info->version_id) - 1, &n);
    if (s)
        memcpy(info->version_id, s, n);
    s = ol_rbuf_str(&r, sizeof(info->content_type) - 1, &n);
    if (s)
        memcpy(info->content_type, s, n);
    return r.bad ? -EPROTO : 0;
}

static bool names_ok(const char *bucket, const char *key)
{
    return olc_name_ok(bucket, OL_NATIVE_MAX_BUCKET) && olc_name_ok(key, OL_NATIVE_MAX_KEY);
}

static void put_names(struct ol_wbuf *w, const char *bucket, const char *key)
{
    ol_wbuf_str(w, bucket, strlen(bucket));
    ol_wbuf_str(w, key, strlen(key));
}

enum { ARGS_CAP = 4 * 6 + OL_NATIVE_MAX_BUCKET + OL_NATIVE_MAX_KEY + 2 * 80 + 16 };

OLC_API int ol_client_head(struct ol_client *c, const char *bucket, const char *key,
                           struct ol_client_info *info)
{
    if (!c || !names_ok(bucket, key))
        return -EINVAL;
    uint8_t a[ARGS_CAP], r[512];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    put_names(&w, bucket, key);
    ol_wbuf_str(&w, "", 0);
    struct olc_call k = {.op = OL_COP_HEAD, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .node = -1};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    return olc_info(r, k.rctl_len, info);
}

/* One GET message: up to OL_NATIVE_MAX_DATA bytes at off into buf. */
static int64_t get_one(struct ol_client *c, const char *bucket, const char *key,
                       const char *if_match, uint64_t off, void *buf, uint64_t len,
                       struct ol_client_info *info)
{
    uint8_t a[ARGS_CAP], r[512];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    put_names(&w, bucket, key);
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_u64(&w, off);
    ol_wbuf_u64(&w, len);
    if (if_match)
        ol_wbuf_str(&w, if_match, strlen(if_match));
    struct olc_call k = {.op = OL_COP_GET, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .rdata = buf, .rdata_cap = len, .node = -1};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    int irc = olc_info(r, k.rctl_len, info);
    return irc < 0 ? irc : rc;
}

OLC_API int64_t ol_client_get(struct ol_client *c, const char *bucket, const char *key,
                              uint64_t offset, void *buf, uint64_t cap,
                              struct ol_client_info *info)
{
    if (!c || !names_ok(bucket, key) || (!buf && cap))
        return -EINVAL;
    int64_t direct;
    if (olc_cuda_get(c, bucket, key, offset, buf, cap, info, &direct))
        return direct;
    /* GPU memory that neither the node on this host nor UCX can write. */
    if (!ol_client_cuda_direct(c) && olc_is_device_memory(buf))
        return -ENOTSUP;
    if (olc_direct_get(c, bucket, key, offset, buf, cap, info, &direct))
        return direct;
    if (olc_get_spread(c, bucket, key, offset, buf, cap, info, &direct))
        return direct;
    struct ol_client_info first;
    uint64_t want = cap < OL_NATIVE_MAX_DATA ? cap : OL_NATIVE_MAX_DATA;
    int64_t n = get_one(c, bucket, key, NULL, offset, buf, want, &first);
    if (n < 0)
        return n;
    uint64_t got = (uint64_t)n;
    /* The rest, in messages pinned to the first one's ETag: an overwrite in
     * between fails the read (-OL_EPRECONDITION) rather than mixing two
     * objects' bytes. */
    uint64_t end = first.size - offset < cap ? first.size - offset : cap;
    while (got < end) {
        uint64_t l = end - got < OL_NATIVE_MAX_DATA ? end - got : OL_NATIVE_MAX_DATA;
        n = get_one(c, bucket, key, first.etag, offset + got, (uint8_t *)buf + got, l, NULL);
        if (n < 0)
            return n;
        if (n == 0)
            return -EIO;
        got += (uint64_t)n;
    }
    if (info)
        *info = first;
    return (int64_t)got;
}

/* A PUT session's full WRITE messages, sent by up to two threads: each
 * takes the next message not sent yet, until the first error. */
struct put_pipe {
    struct ol_client *c;
    uint64_t id;
    int node;
    const uint8_t *p;
    uint64_t n;          /* full messages */
    _Atomic uint64_t next;
    _Atomic int rc;      /* the first error */
};

static void *put_writes(void *arg)
{
    struct put_pipe *q = arg;
    for (;;) {
        uint64_t i = atomic_fetch_add(&q->next, 1);
        if (i >= q->n || atomic_load(&q->rc) < 0)
            return NULL;
        uint64_t off = i * (uint64_t)OL_NATIVE_MAX_DATA;
        uint8_t wa[16], r[64];
        struct ol_wbuf ww = {.p = wa, .cap = sizeof(wa)};
        ol_wbuf_u64(&ww, q->id);
        ol_wbuf_u64(&ww, off);
        struct olc_call wk = {.op = OL_COP_PUT_WRITE, .args = wa, .args_len = ww.len,
                              .data = q->p + off, .data_len = OL_NATIVE_MAX_DATA, .rctl = r,
                              .rctl_cap = sizeof(r), .node = q->node};
        int rc = olc_call(q->c, &wk);
        if (rc < 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&q->rc, &zero, rc);
            return NULL;
        }
    }
}

OLC_API int ol_client_put(struct ol_client *c, const char *bucket, const char *key,
                          const void *buf, uint64_t len, struct ol_client_info *info)
{
    if (!c || !names_ok(bucket, key) || (!buf && len))
        return -EINVAL;
    uint8_t a[ARGS_CAP], r[512];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    put_names(&w, bucket, key);
    ol_wbuf_str(&w, "", 0);
    if (len <= OL_NATIVE_MAX_DATA) {
        struct olc_call k = {.op = OL_COP_PUT, .args = a, .args_len = w.len, .data = buf,
                             .data_len = len, .rctl = r, .rctl_cap = sizeof(r), .node = -1};
        int rc = olc_call(c, &k);
        return rc < 0 ? rc : olc_info(r, k.rctl_len, info);
    }
    /* A session on one node: nothing is visible before the commit. */
    ol_wbuf_u64(&w, len);
    struct olc_call k = {.op = OL_COP_PUT_BEGIN, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .node = -1};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
    uint64_t id = ol_rbuf_u64(&rb);
    if (rb.bad)
        return -EPROTO;
    const uint8_t *p = buf;
    /* The full messages, then COMMIT with the rest.  Two in flight (this
     * thread and a helper each send the next one not sent yet): one is
     * received while the node hashes and writes the one before it, which
     * the node waits for when the later one comes first (docs/PROTOCOL.md
     * "Large objects"). */
    struct put_pipe q = {.c = c, .id = id, .node = k.used_node, .p = p,
                         .n = (len - 1) / OL_NATIVE_MAX_DATA};
    pthread_t helper;
    bool two = q.n >= 2 && pthread_create(&helper, NULL, put_writes, &q) == 0;
    put_writes(&q);
    if (two)
        pthread_join(helper, NULL);
    rc = q.rc;
    int node = q.node;
    uint64_t off = q.n * (uint64_t)OL_NATIVE_MAX_DATA;
    uint8_t ca[8];
    struct ol_wbuf cw = {.p = ca, .cap = sizeof(ca)};
    ol_wbuf_u64(&cw, id);
    if (rc < 0) {
        struct olc_call ak = {.op = OL_COP_PUT_ABORT, .args = ca, .args_len = cw.len,
                              .node = node};
        (void)olc_call(c, &ak);
        return rc;
    }
    struct olc_call ck = {.op = OL_COP_PUT_COMMIT, .args = ca, .args_len = cw.len,
                          .data = p + off, .data_len = len - off, .rctl = r,
                          .rctl_cap = sizeof(r), .node = node};
    rc = olc_call(c, &ck);
    return rc < 0 ? rc : olc_info(r, ck.rctl_len, info);
}

struct ol_client_put_stream {
    struct ol_client *c;
    uint64_t id, total, written;
    int node;
    int err;
};

OLC_API int ol_client_put_begin(struct ol_client *c, const char *bucket, const char *key,
                                uint64_t total, struct ol_client_put_stream **out)
{
    *out = NULL;
    if (!c || !names_ok(bucket, key))
        return -EINVAL;
    uint8_t a[ARGS_CAP], r[64];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    put_names(&w, bucket, key);
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_u64(&w, total);
    struct olc_call k = {.op = OL_COP_PUT_BEGIN, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .node = -1};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
    uint64_t id = ol_rbuf_u64(&rb);
    if (rb.bad)
        return -EPROTO;
    struct ol_client_put_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    *s = (struct ol_client_put_stream){.c = c, .id = id, .total = total, .node = k.used_node};
    *out = s;
    return 0;
}

OLC_API int ol_client_put_write(struct ol_client_put_stream *s, const void *buf, uint64_t len)
{
    if (!s || (!buf && len))
        return -EINVAL;
    if (s->err)
        return -EIO;
    if (len > s->total - s->written)
        return s->err = -EIO;
    const uint8_t *p = buf;
    while (len) {
        uint64_t n = len < OL_NATIVE_MAX_DATA ? len : OL_NATIVE_MAX_DATA;
        uint8_t wa[16], r[64];
        struct ol_wbuf ww = {.p = wa, .cap = sizeof(wa)};
        ol_wbuf_u64(&ww, s->id);
        ol_wbuf_u64(&ww, s->written);
        struct olc_call wk = {.op = OL_COP_PUT_WRITE, .args = wa, .args_len = ww.len,
                              .data = p, .data_len = n, .rctl = r, .rctl_cap = sizeof(r),
                              .node = s->node};
        int rc = olc_call(s->c, &wk);
        if (rc < 0)
            return s->err = rc;
        s->written += n;
        p += n;
        len -= n;
    }
    return 0;
}

OLC_API int ol_client_put_commit(struct ol_client_put_stream *s, struct ol_client_info *info)
{
    if (!s)
        return -EINVAL;
    int rc = s->err;
    if (rc == 0 && s->written != s->total)
        rc = -EIO;
    if (rc < 0) {
        ol_client_put_abort(s);
        return rc;
    }
    uint8_t ca[8], r[512];
    struct ol_wbuf cw = {.p = ca, .cap = sizeof(ca)};
    ol_wbuf_u64(&cw, s->id);
    struct olc_call ck = {.op = OL_COP_PUT_COMMIT, .args = ca, .args_len = cw.len, .rctl = r,
                          .rctl_cap = sizeof(r), .node = s->node};
    rc = olc_call(s->c, &ck);
    if (rc == 0)
        rc = olc_info(r, ck.rctl_len, info);
    free(s);
    return rc;
}

OLC_API void ol_client_put_abort(struct ol_client_put_stream *s)
{
    if (!s)
        return;
    uint8_t ca[8];
    struct ol_wbuf cw = {.p = ca, .cap = sizeof(ca)};
    ol_wbuf_u64(&cw, s->id);
    struct olc_call ak = {.op = OL_COP_PUT_ABORT, .args = ca, .args_len = cw.len,
                          .node = s->node};
    (void)olc_call(s->c, &ak);
    free(s);
}

OLC_API int ol_client_delete(struct ol_client *c, const char *bucket, const char *key)
{
    if (!c || !names_ok(bucket, key))
        return -EINVAL;
    uint8_t a[ARGS_CAP];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    put_names(&w, bucket, key);
    struct olc_call k = {.op = OL_COP_DELETE, .args = a, .args_len = w.len, .node = -1};
    return olc_call(c, &k);
}

OLC_API int64_t ol_client_list(struct ol_client *c, const char *bucket, const char *prefix,
                               const char *start_after, ol_client_list_fn fn, void *arg)
{
    if (!c || !olc_name_ok(bucket, OL_NATIVE_MAX_BUCKET) || !fn ||
        (prefix && strlen(prefix) > OL_NATIVE_MAX_KEY) ||
        (start_after && strlen(start_after) > OL_NATIVE_MAX_KEY))
        return -EINVAL;
    size_t rcap = 8 + (size_t)OL_NATIVE_MAX_LIST * (4 + OL_NATIVE_MAX_KEY + 8 + 8 + 4 + 72);
    uint8_t *r = malloc(rcap);
    char *after = calloc(1, OL_NATIVE_MAX_KEY + 1);
    if (!r || !after) {
        free(r);
        free(after);
        return -ENOMEM;
    }
    if (start_after)
        snprintf(after, OL_NATIVE_MAX_KEY + 1, "%s", start_after);
    int64_t seen = 0;
    int rc = 0;
    for (;;) {
        uint8_t a[ARGS_CAP + OL_NATIVE_MAX_KEY];
        struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
        ol_wbuf_str(&w, bucket, strlen(bucket));
        ol_wbuf_str(&w, prefix ? prefix : "", prefix ? strlen(prefix) : 0);
        ol_wbuf_str(&w, after, strlen(after));
        ol_wbuf_u32(&w, OL_NATIVE_MAX_LIST);
        struct olc_call k = {.op = OL_COP_LIST, .args = a, .args_len = w.len, .rctl = r,
                             .rctl_cap = rcap, .node = -1};
        rc = olc_call(c, &k);
        if (rc < 0)
            break;
        struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
        uint32_t n = ol_rbuf_u32(&rb);
        char key[OL_NATIVE_MAX_KEY + 1];
        for (uint32_t i = 0; i < n && rc == 0; i++) {
            struct ol_client_info info;
            memset(&info, 0, sizeof(info));
            size_t kl, el;
            const char *kp = ol_rbuf_str(&rb, OL_NATIVE_MAX_KEY, &kl);
            info.size = ol_rbuf_u64(&rb);
            info.mtime_ns = (int64_t)ol_rbuf_u64(&rb);
            const char *ep = ol_rbuf_str(&rb, sizeof(info.etag) - 1, &el);
            if (rb.bad) {
                rc = -EPROTO;
                break;
            }
            memcpy(key, kp, kl);
            key[kl] = 0;
            memcpy(info.etag, ep, el);
            seen++;
            memcpy(after, key, kl + 1);
            rc = fn(arg, key, &info);
        }
        uint8_t truncated = ol_rbuf_u8(&rb);
        if (rc != 0 || rb.bad || !truncated || n == 0) {
            if (rc == 0 && rb.bad)
                rc = -EPROTO;
            break;
        }
    }
    free(r);
    free(after);
    return rc < 0 ? rc : rc > 0 ? rc : seen;
}
