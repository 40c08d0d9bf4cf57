/* Request decoding of the drive protocol: see net/drive_req.h. */
#include "net/drive_req.h"

#include <errno.h>
#include <string.h>

#include "net/drive_server.h"
#include "net/wire.h"

/* A bucket name: 0..63 bytes on the wire, NUL-terminated here. */
static void get_bucket(struct ol_rbuf *r, char *out)
{
    size_t n;
    const void *b = ol_rbuf_str(r, OL_DRIVE_MAX_BUCKET, &n);
    if (!b || memchr(b, '\0', n)) {
        r->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, b, n);
    out[n] = '\0';
}

static void get_bucket_key(struct ol_rbuf *r, struct ol_drive_req *q)
{
    get_bucket(r, q->bucket);
    q->key = ol_rbuf_str(r, OL_DRIVE_MAX_KEY, &q->klen);
}

static void get_meta(struct ol_rbuf *r, struct ol_drive_req *q)
{
    q->meta = ol_rbuf_str(r, OL_DRIVE_META_MAX, &q->meta_len);
}

int ol_drive_req_decode(uint8_t op, const void *ctl, size_t ctl_len, struct ol_drive_req *q)
{
    struct ol_rbuf r = {.p = ctl, .len = ctl_len};
    memset(q, 0, sizeof(*q));
    q->op = op;
    switch (op) {
    case OL_WOP_PING:
    case OL_WOP_LIST_BUCKETS:
        break;
    case OL_WOP_SHARD_BEGIN:
        get_bucket_key(&r, q);
        if (q->klen == 0)
            r.bad = true;
        break;
    case OL_WOP_SHARD_WRITE:
        q->handle = ol_rbuf_u64(&r);
        q->off = ol_rbuf_u64(&r);
        break;
    case OL_WOP_SHARD_COMMIT:
        q->handle = ol_rbuf_u64(&r);
        q->len = ol_rbuf_u64(&r);
        ol_wire_get_meta(&r, &q->sm);
        get_meta(&r, q);
        break;
    case OL_WOP_SHARD_ABORT:
        q->handle = ol_rbuf_u64(&r);
        break;
    case OL_WOP_SHARD_PUT:
        q->handle = ol_rbuf_u64(&r);
        q->off = ol_rbuf_u64(&r);
        ol_wire_get_meta(&r, &q->sm);
        get_meta(&r, q);
        break;
    case OL_WOP_SHARD_COPY:
        get_bucket(&r, q->src_bucket);
        q->src_key = ol_rbuf_str(&r, OL_DRIVE_MAX_KEY, &q->src_klen);
        ol_rbuf_vid(&r, &q->src_vid);
        get_bucket_key(&r, q);
        ol_wire_get_meta(&r, &q->sm);
        get_meta(&r, q);
        break;
    case OL_WOP_MARK_COMPLETE:
    case OL_WOP_DELETE_VERSION:
        get_bucket_key(&r, q);
        ol_rbuf_vid(&r, &q->vid);
        break;
    case OL_WOP_VERSIONS:
        get_bucket_key(&r, q);
        q->cap = ol_rbuf_u32(&r);
        q->bflags = ol_rbuf_u8(&r);
        ol_rbuf_vid(&r, &q->vid);
        q->bcap = ol_rbuf_u32(&r);
        if (q->cap > OL_DRIVE_SERVER_MAX_VERSIONS)
            q->cap = OL_DRIVE_SERVER_MAX_VERSIONS;
        if (q->bcap > OL_DRIVE_META_MAX)
            q->bcap = OL_DRIVE_META_MAX;
        break;
    case OL_WOP_SET_META:
        get_bucket_key(&r, q);
        ol_rbuf_vid(&r, &q->vid);
        q->stamp = ol_rbuf_u64(&r);
        get_meta(&r, q);
        break;
    case OL_WOP_READ_SHARD:
        get_bucket_key(&r, q);
        ol_rbuf_vid(&r, &q->vid);
        q->off = ol_rbuf_u64(&r);
        q->len = ol_rbuf_u64(&r);
        break;
    case OL_WOP_LIST_KEYS:
        get_bucket(&r, q->bucket);
        q->after = ol_rbuf_str(&r, OL_DRIVE_MAX_KEY, &q->alen);
        q->cap = ol_rbuf_u32(&r);
        if (q->cap > OL_DRIVE_SERVER_MAX_LIST)
            q->cap = OL_DRIVE_SERVER_MAX_LIST;
        break;
    case OL_WOP_BUCKET_CREATE:
    case OL_WOP_BUCKET_DELETE:
    case OL_WOP_BUCKET_GET:
        get_bucket(&r, q->bucket);
        if (op == OL_WOP_BUCKET_CREATE)
            q->ctime_ns = (int64_t)ol_rbuf_u64(&r);
        if (!q->bucket[0])
            r.bad = true;
        break;
    case OL_WOP_BUCKET_LIST:
    case OL_WOP_SPACE:
        break;
    case OL_WOP_BUCKET_CONFIG_PUT:
    case OL_WOP_BUCKET_CONFIG_GET: {
        get_bucket(&r, q->bucket);
        size_t nl = 0;
        const void *nm = ol_rbuf_str(&r, OL_DRIVE_REQ_CFG_NAME_MAX, &nl);
        q->arg = ol_rbuf_u64(&r);
        if (r.bad || !q->bucket[0] || !nm || nl == 0 || memchr(nm, '\0', nl)) {
            r.bad = true;
            break;
        }
        memcpy(q->name, nm, nl);
        q->name[nl] = '\0';
        if (op == OL_WOP_BUCKET_CONFIG_GET && q->arg > OL_DRIVE_REQ_CFG_VALUE_MAX)
            q->arg = OL_DRIVE_REQ_CFG_VALUE_MAX;
        break;
    }
    case OL_WOP_LOCK:
    case OL_WOP_UNLOCK: {
        q->lock_name = ol_rbuf_str(&r, OL_DRIVE_LOCK_NAME_MAX, &q->lock_nlen);
        const uint8_t *o = ol_rbuf_take(&r, OL_DRIVE_LOCK_OWNER);
        if (o)
            memcpy(q->owner, o, OL_DRIVE_LOCK_OWNER);
        if (op == OL_WOP_LOCK)
            q->ttl_ms = ol_rbuf_u32(&r);
        if (q->lock_nlen == 0)
            r.bad = true;
        break;
    }
    case OL_WOP_MEMBER: {
        size_t nl = 0;
        const void *nm = ol_rbuf_str(&r, OL_DRIVE_REQ_CFG_NAME_MAX, &nl);
        if (r.bad || !nm || nl == 0 || memchr(nm, '\0', nl)) {
            r.bad = true;
            break;
        }
        memcpy(q->name, nm, nl);
        q->name[nl] = '\0';
        break;
    }
    default:
        return -EOPNOTSUPP;
    }
    return r.bad ? -EPROTO : 0;
}
