/* A remote drive: ec/drive.h's ops as drive-protocol calls (ec/remotedrive.h).
 *
 * Each op encodes its arguments (net/wire.h), makes one ol_net_call and
 * decodes the reply.  Small requests encode on the stack; replies whose size
 * depends on the answer (versions, list_keys, list_buckets) get a buffer
 * sized to the most the server may send.
 */
#include "ec/remotedrive.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/loop.h"
#include "net/drive_server.h"
#include "net/wire.h"

/* Room for a request's bucket, key and fixed fields (the key is at most
 * OL_DRIVE_MAX_KEY bytes). */
enum { SMALL_CTL = 2 * (4 + OL_DRIVE_MAX_BUCKET) + 2 * (4 + OL_DRIVE_MAX_KEY) + 512 };

struct ol_remotedrive {
    struct ol_net *net;
    char addr[OL_NET_MAX_ADDR];
    uint32_t drive;
    unsigned timeout_ms;
    unsigned down_ms;
    _Atomic uint64_t down_until_ms; /* fail fast until then (opts.down_ms) */
    atomic_bool no_put;             /* the server answered SHARD_PUT -EOPNOTSUPP */
};
_Static_assert((long)OL_REMOTEDRIVE_PUT_MAX <= (long)OL_DRIVE_SERVER_FIBER_DATA,
               "a SHARD_PUT runs in the server's fibers");

/* Fail fast: whether to answer -ETIMEDOUT without a call; and noting a
 * call's outcome. */
static bool rd_down(struct ol_remotedrive *rd)
{
    return rd->down_ms && ol_now_ms() < atomic_load(&rd->down_until_ms);
}

static int rd_note(struct ol_remotedrive *rd, int rc)
{
    if (rc == -ETIMEDOUT && rd->down_ms)
        atomic_store(&rd->down_until_ms, ol_now_ms() + rd->down_ms);
    return rc;
}

struct rwriter {
    struct ol_remotedrive *rd;
    uint64_t handle;
    uint64_t written; /* bytes the server has */
    int err;          /* sticky */
    /* Bytes not sent yet (they go with the commit), while they fit
     * OL_REMOTEDRIVE_PUT_MAX; streaming: they did not, every write is sent. */
    uint8_t *buf;
    size_t len, cap;
    bool streaming;
};

static int call(struct ol_remotedrive *rd, uint8_t op, const struct ol_wbuf *ctl, const void *data,
                size_t data_len, void *rep_ctl, size_t rep_ctl_cap, size_t *rep_ctl_len,
                void *rep_data, size_t rep_data_cap)
{
    if (ctl && ctl->over)
        return -EINVAL; /* an argument past the limits of ec/drive.h */
    if (rd_down(rd))
        return -ETIMEDOUT;
    struct ol_net_call c = {
        .addr = rd->addr,
        .op = op,
        .drive = rd->drive,
        .timeout_ms = rd->timeout_ms,
        .ctl = ctl ? ctl->p : NULL,
        .ctl_len = ctl ? ctl->len : 0,
        .data = data,
        .data_len = data_len,
        .rep_ctl = rep_ctl,
        .rep_ctl_cap = rep_ctl_cap,
        .rep_data = rep_data,
        .rep_data_cap = rep_data_cap,
    };
    int rc = rd_note(rd, ol_net_call(rd->net, &c));
    /* A reply with data (read_shard) must fill the buffer exactly. */
    if (rc >= 0 && rep_data && c.rep_data_len != rep_data_cap)
        rc = -EPROTO;
    if (rep_ctl_len)
        *rep_ctl_len = c.rep_ctl_len;
    return rc;
}

static void put_bucket_key(struct ol_wbuf *w, const char *bucket, const char *key, size_t klen)
{
    size_t bl = strnlen(bucket, OL_DRIVE_MAX_BUCKET + 1);
    if (bl > OL_DRIVE_MAX_BUCKET || klen > OL_DRIVE_MAX_KEY) {
        w->over = true;
        return;
    }
    ol_wbuf_str(w, bucket, bl);
    ol_wbuf_str(w, key, klen);
}

/* ---- writers ---- */

static int rd_shard_begin(void *d, const char *bucket, const char *key, size_t klen, void **w)
{
    struct ol_remotedrive *rd = d;
    uint8_t b[SMALL_CTL], r[8];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    put_bucket_key(&ctl, bucket, key, klen);
    struct rwriter *rw = calloc(1, sizeof(*rw));
    if (!rw)
        return -ENOMEM;
    size_t rlen = 0;
    /* A round trip even though the bytes wait for the commit: its reply
     * brings the server's clock in (net/net.h) before the set picks the
     * version id, so a PUT that starts after another returned orders after
     * it whatever the clocks' skew. */
    int rc = call(rd, OL_WOP_SHARD_BEGIN, &ctl, NULL, 0, r, sizeof(r), &rlen, NULL, 0);
    if (rc == 0 && rlen != 8)
        rc = -EPROTO;
    if (rc < 0) {
        free(rw);
        return rc;
    }
    struct ol_rbuf rb = {.p = r, .len = rlen};
    rw->rd = rd;
    rw->handle = ol_rbuf_u64(&rb);
    *w = rw;
    return 0;
}

static int write_call(struct rwriter *rw, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (rw->err == 0 && len > 0) {
        size_t n = len < OL_WIRE_MAX_DATA ? len : OL_WIRE_MAX_DATA;
        uint8_t b[16];
        struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
        ol_wbuf_u64(&ctl, rw->handle);
        ol_wbuf_u64(&ctl, rw->written);
        int rc = call(rw->rd, OL_WOP_SHARD_WRITE, &ctl, p, n, NULL, 0, NULL, NULL, 0);
        if (rc < 0)
            rw->err = rc;
        else
            rw->written += n;
        p += n;
        len -= n;
    }
    return rw->err;
}

/* Sends the bytes kept so far and streams from now on. */
static int rw_flush(struct rwriter *rw)
{
    rw->streaming = true;
    int rc = write_call(rw, rw->buf, rw->len);
    free(rw->buf);
    rw->buf = NULL;
    rw->len = rw->cap = 0;
    return rc;
}

static int rd_shard_write(void *w, const void *buf, size_t len)
{
    struct rwriter *rw = w;
    if (rw->err < 0)
        return rw->err;
    if (!rw->streaming && len <= OL_REMOTEDRIVE_PUT_MAX - rw->len) {
        if (rw->len + len > rw->cap) {
            size_t cap = rw->cap ? rw->cap : 4096;
            while (cap < rw->len + len)
                cap *= 2;
            if (cap > OL_REMOTEDRIVE_PUT_MAX)
                cap = OL_REMOTEDRIVE_PUT_MAX;
            uint8_t *b = realloc(rw->buf, cap);
            if (!b)
                return rw->err = -ENOMEM;
            rw->buf = b;
            rw->cap = cap;
        }
        if (len)
            memcpy(rw->buf + rw->len, buf, len);
        rw->len += len;
        return 0;
    }
    if (!rw->streaming && rw_flush(rw) < 0)
        return rw->err;
    return write_call(rw, buf, len);
}

static void send_abort(struct rwriter *rw)
{
    uint8_t b[8];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    ol_wbuf_u64(&ctl, rw->handle);
    /* Best effort: a server that does not hear it aborts the writer when
     * it idles out or the connection goes. */
    (void)call(rw->rd, OL_WOP_SHARD_ABORT, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
}

static void rw_free(struct rwriter *rw)
{
    free(rw->buf);
    free(rw);
}

static int rd_shard_commit(void *w, const struct ol_shard_meta *sm, const void *meta,
                           size_t meta_len)
{
    struct rwriter *rw = w;
    struct ol_remotedrive *rd = rw->rd;
    int rc = rw->err;
    if (rc < 0 || meta_len > OL_DRIVE_META_MAX) {
        send_abort(rw);
        rw_free(rw);
        return rc < 0 ? rc : -EINVAL;
    }
    /* The bytes kept go with the commit (SHARD_PUT), unless the server
     * does not know it: then they are written first, as they always were. */
    bool put = !rw->streaming && !atomic_load(&rd->no_put);
    if (!rw->streaming && !put && rw_flush(rw) < 0) {
        send_abort(rw);
        rc = rw->err;
        rw_free(rw);
        return rc;
    }
    size_t cap = 16 + OL_WIRE_META_BYTES + 4 + meta_len;
    uint8_t *b = malloc(cap);
    if (!b) {
        send_abort(rw);
        rw_free(rw);
        return -ENOMEM;
    }
    struct ol_wbuf ctl = {.p = b, .cap = cap};
    ol_wbuf_u64(&ctl, rw->handle);
    /* COMMIT: the bytes written in all; PUT: where its bytes go (the same
     * count: what the server has before them). */
    ol_wbuf_u64(&ctl, rw->written);
    ol_wire_put_meta(&ctl, sm);
    ol_wbuf_str(&ctl, meta, meta ? meta_len : 0);
    if (put) {
        rc = call(rd, OL_WOP_SHARD_PUT, &ctl, rw->buf, rw->len, NULL, 0, NULL, NULL, 0);
        if (rc == -EOPNOTSUPP) {
            /* A server from before SHARD_PUT (its writer is untouched):
             * write, then commit, from now on at once. */
            atomic_store(&rd->no_put, true);
            put = false;
            if (rw_flush(rw) < 0) {
                send_abort(rw);
                rc = rw->err;
                goto out;
            }
            ctl.len = 8;
            ol_wbuf_u64(&ctl, rw->written);
            ol_wire_put_meta(&ctl, sm);
            ol_wbuf_str(&ctl, meta, meta ? meta_len : 0);
        }
    }
    if (!put)
        rc = call(rd, OL_WOP_SHARD_COMMIT, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
out:
    free(b);
    rw_free(rw);
    return rc;
}

static void rd_shard_abort(void *w)
{
    struct rwriter *rw = w;
    send_abort(rw);
    rw_free(rw);
}

static int rd_shard_copy(void *d, const char *src_bucket, const char *src_key, size_t src_klen,
                         const struct ol_version_id *src_vid, const char *bucket, const char *key,
                         size_t klen, const struct ol_shard_meta *sm, const void *meta,
                         size_t meta_len)
{
    struct ol_remotedrive *rd = d;
    if (meta_len > OL_DRIVE_META_MAX)
        return -EINVAL;
    size_t cap = SMALL_CTL + OL_WIRE_META_BYTES + 4 + meta_len;
    uint8_t *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    struct ol_wbuf ctl = {.p = b, .cap = cap};
    put_bucket_key(&ctl, src_bucket, src_key, src_klen);
    ol_wbuf_vid(&ctl, src_vid);
    put_bucket_key(&ctl, bucket, key, klen);
    ol_wire_put_meta(&ctl, sm);
    ol_wbuf_str(&ctl, meta, meta ? meta_len : 0);
    int rc = call(rd, OL_WOP_SHARD_COPY, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
    free(b);
    return rc;
}

/* ---- the rest ---- */

static int vid_op(void *d, uint8_t op, const char *bucket, const char *key, size_t klen,
                  const struct ol_version_id *vid)
{
    struct ol_remotedrive *rd = d;
    uint8_t b[SMALL_CTL];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    put_bucket_key(&ctl, bucket, key, klen);
    ol_wbuf_vid(&ctl, vid);
    return call(rd, op, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
}

static int rd_mark_complete(void *d, const char *bucket, const char *key, size_t klen,
                            const struct ol_version_id *vid)
{
    return vid_op(d, OL_WOP_MARK_COMPLETE, bucket, key, klen, vid);
}

static int rd_delete_version(void *d, const char *bucket, const char *key, size_t klen,
                             const struct ol_version_id *vid)
{
    return vid_op(d, OL_WOP_DELETE_VERSION, bucket, key, klen, vid);
}

static int rd_versions(void *d, const char *bucket, const char *key, size_t klen,
                       struct ol_shard_meta *out, unsigned cap, struct ol_drive_blob *blob)
{
    struct ol_remotedrive *rd = d;
    if (cap > OL_DRIVE_SERVER_MAX_VERSIONS)
        cap = OL_DRIVE_SERVER_MAX_VERSIONS;
    size_t bcap = blob ? (blob->cap < OL_DRIVE_META_MAX ? blob->cap : OL_DRIVE_META_MAX) : 0;
    uint8_t b[SMALL_CTL];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    put_bucket_key(&ctl, bucket, key, klen);
    ol_wbuf_u32(&ctl, cap);
    ol_wbuf_u8(&ctl, (uint8_t)((blob ? 1 : 0) | (blob && blob->want ? 2 : 0)));
    struct ol_version_id zero = {{0}};
    ol_wbuf_vid(&ctl, blob && blob->want ? blob->want : &zero);
    ol_wbuf_u32(&ctl, (uint32_t)bcap);
    size_t rcap = 4 + (size_t)cap * OL_WIRE_META_BYTES + 1 + 4 + OL_WIRE_META_BYTES + 4 + bcap;
    uint8_t *r = malloc(rcap);
    if (!r)
        return -ENOMEM;
    size_t rlen = 0;
    int rc = call(rd, OL_WOP_VERSIONS, &ctl, NULL, 0, r, rcap, &rlen, NULL, 0);
    if (rc >= 0) {
        struct ol_rbuf rb = {.p = r, .len = rlen};
        uint32_t n = ol_rbuf_u32(&rb);
        if (n != (uint32_t)rc || n > cap) {
            rc = -EPROTO;
            goto out;
        }
        for (uint32_t i = 0; i < n; i++)
            ol_wire_get_meta(&rb, &out[i]);
        bool got = ol_rbuf_u8(&rb) != 0;
        uint32_t len = ol_rbuf_u32(&rb);
        struct ol_shard_meta bsm;
        ol_wire_get_meta(&rb, &bsm);
        size_t blen;
        const void *bytes = ol_rbuf_str(&rb, bcap, &blen);
        if (rb.bad || (got && blen != len)) {
            rc = -EPROTO;
            goto out;
        }
        if (blob) {
            blob->got = got;
            blob->len = len;
            blob->sm = bsm;
            if (got && len)
                memcpy(blob->buf, bytes, len);
        }
    }
out:
    free(r);
    return rc;
}

static int rd_set_meta(void *d, const char *bucket, const char *key, size_t klen,
                       const struct ol_version_id *vid, const void *meta, size_t len,
                       uint64_t stamp)
{
    struct ol_remotedrive *rd = d;
    if (len > OL_DRIVE_META_MAX)
        return -EINVAL;
    size_t cap = SMALL_CTL + 4 + len;
    uint8_t *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    struct ol_wbuf ctl = {.p = b, .cap = cap};
    put_bucket_key(&ctl, bucket, key, klen);
    ol_wbuf_vid(&ctl, vid);
    ol_wbuf_u64(&ctl, stamp);
    ol_wbuf_str(&ctl, meta, len);
    int rc = call(rd, OL_WOP_SET_META, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
    free(b);
    return rc;
}

static int rd_read_shard(void *d, const char *bucket, const char *key, size_t klen,
                         const struct ol_version_id *vid, uint64_t off, size_t len, void *buf)
{
    struct ol_remotedrive *rd = d;
    uint8_t *p = buf;
    /* Reads past the message limit go in pieces. */
    while (len > 0) {
        size_t n = len < OL_WIRE_MAX_DATA ? len : OL_WIRE_MAX_DATA;
        uint8_t b[SMALL_CTL];
        struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
        put_bucket_key(&ctl, bucket, key, klen);
        ol_wbuf_vid(&ctl, vid);
        ol_wbuf_u64(&ctl, off);
        ol_wbuf_u64(&ctl, n);
        int rc = call(rd, OL_WOP_READ_SHARD, &ctl, NULL, 0, NULL, 0, NULL, p, n);
        if (rc < 0)
            return rc;
        p += n;
        off += n;
        len -= n;
    }
    return 0;
}

static int rd_list_keys(void *d, const char *bucket, const char *after, size_t alen,
                        struct ol_drive_entry *out, unsigned cap)
{
    struct ol_remotedrive *rd = d;
    const size_t rcap =
        4 + (size_t)OL_DRIVE_SERVER_MAX_LIST * (4 + OL_DRIVE_MAX_KEY + OL_WIRE_META_BYTES);
    uint8_t *r = malloc(rcap);
    if (!r)
        return -ENOMEM;
    unsigned got = 0;
    int rc = 0;
    /* The server answers at most OL_DRIVE_SERVER_MAX_LIST keys a call:
     * continue after the last one until cap or a short page. */
    while (got < cap) {
        unsigned want = cap - got < OL_DRIVE_SERVER_MAX_LIST ? cap - got : OL_DRIVE_SERVER_MAX_LIST;
        uint8_t b[SMALL_CTL];
        struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
        put_bucket_key(&ctl, bucket, after, alen);
        ol_wbuf_u32(&ctl, want);
        size_t rlen = 0;
        rc = call(rd, OL_WOP_LIST_KEYS, &ctl, NULL, 0, r, rcap, &rlen, NULL, 0);
        if (rc < 0)
            break;
        struct ol_rbuf rb = {.p = r, .len = rlen};
        uint32_t n = ol_rbuf_u32(&rb);
        if (n != (uint32_t)rc || n > want) {
            rc = -EPROTO;
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            struct ol_drive_entry *e = &out[got + i];
            size_t kl;
            const void *k = ol_rbuf_str(&rb, OL_DRIVE_MAX_KEY, &kl);
            ol_wire_get_meta(&rb, &e->newest);
            if (rb.bad || kl == 0) {
                rc = -EPROTO;
                break;
            }
            memcpy(e->key, k, kl);
            e->key_len = (uint32_t)kl;
        }
        if (rc < 0)
            break;
        got += n;
        if (n < want || n == 0)
            break;
        after = out[got - 1].key;
        alen = out[got - 1].key_len;
    }
    free(r);
    return rc < 0 ? rc : (int)got;
}

/* One listing of bucket names (op LIST_BUCKETS: names; BUCKET_LIST: names
 * and their ctime): fn gets each (ctime 0 without); a malformed answer is
 * -EPROTO, whatever fn was given before. */
static int bucket_names(struct ol_remotedrive *rd, uint8_t op,
                        int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns), void *ctx)
{
    uint8_t *r = malloc(OL_WIRE_MAX_CTL);
    if (!r)
        return -ENOMEM;
    size_t rlen = 0;
    int rc = call(rd, op, NULL, NULL, 0, r, OL_WIRE_MAX_CTL, &rlen, NULL, 0);
    if (rc == 0) {
        struct ol_rbuf rb = {.p = r, .len = rlen};
        uint32_t n = ol_rbuf_u32(&rb);
        char name[OL_DRIVE_MAX_BUCKET + 1];
        for (uint32_t i = 0; i < n && !rb.bad; i++) {
            size_t bl;
            const void *bn = ol_rbuf_str(&rb, OL_DRIVE_MAX_BUCKET, &bl);
            int64_t ct = op == OL_WOP_BUCKET_LIST ? (int64_t)ol_rbuf_u64(&rb) : 0;
            if (rb.bad || memchr(bn, '\0', bl)) {
                rb.bad = true;
                break;
            }
            memcpy(name, bn, bl);
            name[bl] = '\0';
            if (fn(ctx, name, ct) != 0)
                break;
        }
        if (rb.bad)
            rc = -EPROTO;
    }
    free(r);
    return rc;
}

struct names_only {
    int (*fn)(void *ctx, const char *bucket);
    void *ctx;
};

static int name_only(void *ctx, const char *bucket, int64_t ctime_ns)
{
    (void)ctime_ns;
    struct names_only *no = ctx;
    return no->fn(no->ctx, bucket);
}

static int rd_list_buckets(void *d, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    struct names_only no = {fn, ctx};
    return bucket_names(d, OL_WOP_LIST_BUCKETS, name_only, &no);
}

/* ---- buckets ---- */

static int put_bucket(struct ol_wbuf *w, const char *bucket)
{
    size_t bl = strnlen(bucket, OL_DRIVE_MAX_BUCKET + 1);
    if (bl == 0 || bl > OL_DRIVE_MAX_BUCKET)
        return -EINVAL;
    ol_wbuf_str(w, bucket, bl);
    return 0;
}

static int rd_bucket_create(void *d, const char *bucket, int64_t ctime_ns)
{
    uint8_t b[128];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    if (put_bucket(&ctl, bucket) < 0)
        return -EINVAL;
    ol_wbuf_u64(&ctl, (uint64_t)ctime_ns);
    return call(d, OL_WOP_BUCKET_CREATE, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
}

static int rd_bucket_delete(void *d, const char *bucket)
{
    uint8_t b[128];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    if (put_bucket(&ctl, bucket) < 0)
        return -EINVAL;
    return call(d, OL_WOP_BUCKET_DELETE, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
}

static int rd_bucket_get(void *d, const char *bucket, int64_t *ctime_ns)
{
    uint8_t b[128], r[8];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    if (put_bucket(&ctl, bucket) < 0)
        return -EINVAL;
    size_t rlen = 0;
    int rc = call(d, OL_WOP_BUCKET_GET, &ctl, NULL, 0, r, sizeof(r), &rlen, NULL, 0);
    if (rc == 0 && rlen != 8)
        rc = -EPROTO;
    if (rc == 0 && ctime_ns) {
        struct ol_rbuf rb = {.p = r, .len = rlen};
        *ctime_ns = (int64_t)ol_rbuf_u64(&rb);
    }
    return rc;
}

static int rd_bucket_list(void *d, int (*fn)(void *ctx, const char *bucket, int64_t ctime_ns),
                          void *ctx)
{
    return bucket_names(d, OL_WOP_BUCKET_LIST, fn, ctx);
}

/* The setting's name and an argument (put: set or remove; get: the cap). */
static int put_setting(struct ol_wbuf *w, const char *bucket, const char *name, uint64_t arg)
{
    size_t nl = strnlen(name, 65);
    if (put_bucket(w, bucket) < 0 || nl == 0 || nl > 64)
        return -EINVAL;
    ol_wbuf_str(w, name, nl);
    ol_wbuf_u64(w, arg);
    return 0;
}

static int rd_bucket_config_put(void *d, const char *bucket, const char *name, const void *val,
                                size_t len)
{
    uint8_t b[256];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    if (put_setting(&ctl, bucket, name, val != NULL) < 0)
        return -EINVAL;
    /* The value travels as bulk bytes, with their CRC32C. */
    return call(d, OL_WOP_BUCKET_CONFIG_PUT, &ctl, val, val ? len : 0, NULL, 0, NULL, NULL, 0);
}

static ssize_t rd_bucket_config_get(void *d, const char *bucket, const char *name, void *buf,
                                    size_t cap)
{
    struct ol_remotedrive *rd = d;
    uint8_t b[256];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    if (put_setting(&ctl, bucket, name, cap) < 0)
        return -EINVAL;
    /* Not call(): the value is shorter than buf, as a rule. */
    if (rd_down(rd))
        return -ETIMEDOUT;
    struct ol_net_call c = {
        .addr = rd->addr,
        .op = OL_WOP_BUCKET_CONFIG_GET,
        .drive = rd->drive,
        .timeout_ms = rd->timeout_ms,
        .ctl = ctl.p,
        .ctl_len = ctl.len,
        .rep_data = buf,
        .rep_data_cap = cap,
    };
    int rc = rd_note(rd, ol_net_call(rd->net, &c));
    if (rc == -EMSGSIZE)
        return -ENOBUFS; /* cannot happen with a server that honours cap */
    if (rc >= 0 && c.rep_data_len != (size_t)rc)
        return -EPROTO;
    return rc;
}

static int rd_space(void *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    uint8_t r[16];
    size_t rlen = 0;
    int rc = call(d, OL_WOP_SPACE, NULL, NULL, 0, r, sizeof(r), &rlen, NULL, 0);
    if (rc == 0 && rlen != 16)
        rc = -EPROTO;
    if (rc == 0) {
        struct ol_rbuf rb = {.p = r, .len = rlen};
        *free_bytes = ol_rbuf_u64(&rb);
        *total_bytes = ol_rbuf_u64(&rb);
    }
    return rc;
}

/* ---- locks ---- */

static int rd_lock_call(void *d, uint8_t op, const void *name, size_t nlen, const uint8_t *owner,
                        uint32_t ttl_ms)
{
    if (!name || nlen == 0 || nlen > OL_DRIVE_LOCK_NAME_MAX || !owner)
        return -EINVAL;
    uint8_t b[4 + OL_DRIVE_LOCK_NAME_MAX + OL_DRIVE_LOCK_OWNER + 4];
    struct ol_wbuf ctl = {.p = b, .cap = sizeof(b)};
    ol_wbuf_str(&ctl, name, nlen);
    ol_wbuf_bytes(&ctl, owner, OL_DRIVE_LOCK_OWNER);
    if (op == OL_WOP_LOCK)
        ol_wbuf_u32(&ctl, ttl_ms);
    int rc = call(d, op, &ctl, NULL, 0, NULL, 0, NULL, NULL, 0);
    /* Only 0 grants: a positive status from a confused peer is no vote. */
    return rc > 0 ? -EPROTO : rc;
}

static int rd_lock(void *d, const void *name, size_t nlen, const uint8_t *owner, uint32_t ttl_ms)
{
    return rd_lock_call(d, OL_WOP_LOCK, name, nlen, owner, ttl_ms);
}

static int rd_unlock(void *d, const void *name, size_t nlen, const uint8_t *owner)
{
    return rd_lock_call(d, OL_WOP_UNLOCK, name, nlen, owner, 0);
}

const struct ol_drive_ops ol_remotedrive_ops = {
    .space = rd_space,
    .shard_begin = rd_shard_begin,
    .shard_write = rd_shard_write,
    .shard_commit = rd_shard_commit,
    .shard_abort = rd_shard_abort,
    .shard_copy = rd_shard_copy,
    .mark_complete = rd_mark_complete,
    .versions = rd_versions,
    .set_meta = rd_set_meta,
    .read_shard = rd_read_shard,
    .delete_version = rd_delete_version,
    .list_keys = rd_list_keys,
    .list_buckets = rd_list_buckets,
    .bucket_create = rd_bucket_create,
    .bucket_delete = rd_bucket_delete,
    .bucket_get = rd_bucket_get,
    .bucket_list = rd_bucket_list,
    .bucket_config_put = rd_bucket_config_put,
    .bucket_config_get = rd_bucket_config_get,
    .lock = rd_lock,
    .unlock = rd_unlock,
};

int ol_remotedrive_create(const struct ol_remotedrive_opts *opts, struct ol_remotedrive **out)
{
    if (!opts->net || !opts->addr || strlen(opts->addr) >= OL_NET_MAX_ADDR)
        return -EINVAL;
    struct ol_remotedrive *rd = calloc(1, sizeof(*rd));
    if (!rd)
        return -ENOMEM;
    rd->net = opts->net;
    snprintf(rd->addr, sizeof(rd->addr), "%s", opts->addr);
    rd->drive = opts->drive;
    rd->timeout_ms = opts->timeout_ms;
    rd->down_ms = opts->down_ms;
    *out = rd;
    return 0;
}

void ol_remotedrive_destroy(struct ol_remotedrive *rd)
{
    free(rd);
}

struct ol_drive ol_remotedrive_drive(struct ol_remotedrive *rd)
{
    return (struct ol_drive){&ol_remotedrive_ops, rd};
}

int ol_remotedrive_ping(struct ol_remotedrive *rd)
{
    uint8_t r[4];
    size_t rlen = 0;
    int rc = call(rd, OL_WOP_PING, NULL, NULL, 0, r, sizeof(r), &rlen, NULL, 0);
    if (rc < 0)
        return rc;
    struct ol_rbuf rb = {.p = r, .len = rlen};
    uint32_t n = ol_rbuf_u32(&rb);
    if (rb.bad)
        return -EPROTO;
    return rd->drive < n ? 0 : -ENODEV;
}
