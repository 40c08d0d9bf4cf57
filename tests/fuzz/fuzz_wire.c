/* libFuzzer target for the drive protocol's decoders (net/wire.h), the
 * bytes a peer sends over UCX:
 *
 *   byte 0 % 3 == 0  a message header: the header checks of a receiver
 *                    (ol_wire_hdr_get, ol_wire_req_check, ol_wire_rep_check)
 *                    on a header, an AM data length and a reply's buffer caps
 *                    taken from the input;
 *              == 1  a request: byte 1 is the op, the rest its control
 *                    bytes, decoded as the drive server does
 *                    (ol_drive_req_decode); a request that decodes is
 *                    encoded again the way ec/remotedrive.c does and must
 *                    decode to the same arguments;
 *              == 2  a reply: byte 1 picks an op of ec/remotedrive.c, the
 *                    next bytes the reply's status, the rest its control
 *                    bytes.  The real remotedrive.c runs the op; its one
 *                    remote call is the ol_net_call below, which answers
 *                    with those bytes instead of UCX (so net.c is not
 *                    linked).  What the op hands its caller must keep the
 *                    contract of ec/drive.h whatever the reply said.
 *
 * Built by tests/fuzz/meson.build (replay of the corpus) and by
 * scripts/fuzz.sh wire (libFuzzer).  The corpus seeds come from
 * tests/fuzz/gen_wire_corpus.py.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec/remotedrive.h"
#include "net/auth.h"
#include "net/drive_req.h"
#include "net/drive_server.h"
#include "net/net.h"
#include "net/wire.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_wire: %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- a cursor over the input ---- */

struct in {
    const uint8_t *p;
    size_t n;
};

static uint8_t in_u8(struct in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint32_t in_u32(struct in *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)in_u8(in) << (8 * i);
    return v;
}

/* ---- headers ---- */

static void fuzz_header(struct in *in)
{
    uint8_t hb[sizeof(struct ol_wire_hdr)] = {0};
    size_t hlen = in->n < sizeof(hb) ? in->n : sizeof(hb);
    memcpy(hb, in->p, hlen);
    in->p += hlen;
    in->n -= hlen;
    /* The AM data length: near the header's own lengths, so that the
     * checks are reached with lengths that add up, and past them. */
    uint8_t how = in_u8(in);
    uint32_t x = in_u32(in);
    struct ol_wire_hdr h;
    bool ok = ol_wire_hdr_get(hb, hlen, &h);
    FUZZ_CHECK(!ok || (hlen == sizeof(h) && h.magic == OL_WIRE_MAGIC));
    if (!ok)
        return;
    /* A header as received is no signed one (the odds of a forged MAC are
     * nil); signed, it verifies, and under another key it does not. */
    static const uint8_t key[OL_NET_KEY_BYTES] = {1, 2, 3}, other[OL_NET_KEY_BYTES] = {1, 2, 4};
    size_t clen = in->n < 64 ? in->n : 64;
    struct ol_wire_hdr sh = h;
    ol_wire_sign(key, &sh, in->p, clen);
    FUZZ_CHECK(ol_wire_verify(key, &sh, in->p, clen) && !ol_wire_verify(other, &sh, in->p, clen));
    size_t length =
        how & 1 ? x : (size_t)(h.ctl_len + h.data_len + (uint64_t)((int)(how >> 1) - 64));
    int rc = ol_wire_req_check(&h, length);
    FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
    if (rc == 0)
        FUZZ_CHECK(h.version == OL_WIRE_VERSION && h.ctl_len <= OL_WIRE_MAX_CTL &&
                   h.data_len <= OL_WIRE_MAX_DATA && h.ctl_len + h.data_len == length);
    size_t ctl_cap = in_u32(in), data_cap = in_u32(in);
    uint8_t op = in_u8(in);
    rc = ol_wire_rep_check(&h, length, op, ctl_cap, data_cap);
    FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
    if (rc == 0)
        FUZZ_CHECK(h.version == OL_WIRE_VERSION && h.op == op && (h.flags & OL_WIRE_F_REPLY) &&
                   h.ctl_len <= ctl_cap && h.data_len <= data_cap &&
                   h.ctl_len + h.data_len == length);
}

/* ---- requests ---- */

static bool has_key(uint8_t op)
{
    return op == OL_WOP_SHARD_BEGIN || op == OL_WOP_SHARD_COPY || op == OL_WOP_MARK_COMPLETE ||
           op == OL_WOP_DELETE_VERSION || op == OL_WOP_VERSIONS || op == OL_WOP_SET_META ||
           op == OL_WOP_READ_SHARD;
}

static bool has_meta(uint8_t op)
{
    return op == OL_WOP_SHARD_COMMIT || op == OL_WOP_SHARD_COPY || op == OL_WOP_SET_META;
}

static bool inside(const void *p, size_t n, const uint8_t *buf, size_t len)
{
    const uint8_t *q = p;
    return q >= buf && q <= buf + len && n <= (size_t)(buf + len - q);
}

static void check_bucket(const char *b)
{
    size_t n = strnlen(b, OL_DRIVE_MAX_BUCKET + 1);
    FUZZ_CHECK(n <= OL_DRIVE_MAX_BUCKET);
}

/* Encodes q's arguments the way ec/remotedrive.c does. */
static void encode(const struct ol_drive_req *q, struct ol_wbuf *w)
{
    switch (q->op) {
    case OL_WOP_SHARD_BEGIN:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        break;
    case OL_WOP_SHARD_WRITE:
        ol_wbuf_u64(w, q->handle);
        ol_wbuf_u64(w, q->off);
        break;
    case OL_WOP_SHARD_COMMIT:
        ol_wbuf_u64(w, q->handle);
        ol_wbuf_u64(w, q->len);
        ol_wire_put_meta(w, &q->sm);
        ol_wbuf_str(w, q->meta, q->meta_len);
        break;
    case OL_WOP_SHARD_ABORT:
        ol_wbuf_u64(w, q->handle);
        break;
    case OL_WOP_SHARD_COPY:
        ol_wbuf_str(w, q->src_bucket, strlen(q->src_bucket));
        ol_wbuf_str(w, q->src_key, q->src_klen);
        ol_wbuf_vid(w, &q->src_vid);
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        ol_wire_put_meta(w, &q->sm);
        ol_wbuf_str(w, q->meta, q->meta_len);
        break;
    case OL_WOP_MARK_COMPLETE:
    case OL_WOP_DELETE_VERSION:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        ol_wbuf_vid(w, &q->vid);
        break;
    case OL_WOP_VERSIONS:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        ol_wbuf_u32(w, q->cap);
        ol_wbuf_u8(w, q->bflags);
        ol_wbuf_vid(w, &q->vid);
        ol_wbuf_u32(w, q->bcap);
        break;
    case OL_WOP_SET_META:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        ol_wbuf_vid(w, &q->vid);
        ol_wbuf_u64(w, q->stamp);
        ol_wbuf_str(w, q->meta, q->meta_len);
        break;
    case OL_WOP_READ_SHARD:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->key, q->klen);
        ol_wbuf_vid(w, &q->vid);
        ol_wbuf_u64(w, q->off);
        ol_wbuf_u64(w, q->len);
        break;
    case OL_WOP_LIST_KEYS:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->after, q->alen);
        ol_wbuf_u32(w, q->cap);
        break;
    case OL_WOP_BUCKET_CREATE:
    case OL_WOP_BUCKET_DELETE:
    case OL_WOP_BUCKET_GET:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        if (q->op == OL_WOP_BUCKET_CREATE)
            ol_wbuf_u64(w, (uint64_t)q->ctime_ns);
        break;
    case OL_WOP_BUCKET_CONFIG_PUT:
    case OL_WOP_BUCKET_CONFIG_GET:
        ol_wbuf_str(w, q->bucket, strlen(q->bucket));
        ol_wbuf_str(w, q->name, strlen(q->name));
        ol_wbuf_u64(w, q->arg);
        break;
    case OL_WOP_LOCK:
    case OL_WOP_UNLOCK:
        ol_wbuf_str(w, q->lock_name, q->lock_nlen);
        ol_wbuf_bytes(w, q->owner, OL_DRIVE_LOCK_OWNER);
        if (q->op == OL_WOP_LOCK)
            ol_wbuf_u32(w, q->ttl_ms);
        break;
    case OL_WOP_MEMBER: /* deploy/cluster.c's vouch question */
        ol_wbuf_str(w, q->name, strlen(q->name));
        break;
    default:
        break;
    }
}

static bool same_bytes(const void *a, size_t an, const void *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void fuzz_request(struct in *in)
{
    uint8_t op = in_u8(in);
    struct ol_drive_req q;
    int rc = ol_drive_req_decode(op, in->p, in->n, &q);
    bool known = op >= OL_WOP_PING && op < OL_WOP_END;
    FUZZ_CHECK(known ? (rc == 0 || rc == -EPROTO) : rc == -EOPNOTSUPP);
    if (rc < 0)
        return;
    check_bucket(q.bucket);
    check_bucket(q.src_bucket);
    FUZZ_CHECK(q.klen <= OL_DRIVE_MAX_KEY && q.src_klen <= OL_DRIVE_MAX_KEY &&
               q.alen <= OL_DRIVE_MAX_KEY && q.meta_len <= OL_DRIVE_META_MAX);
    if (has_key(op))
        FUZZ_CHECK(q.key && inside(q.key, q.klen, in->p, in->n));
    if (op == OL_WOP_SHARD_BEGIN)
        FUZZ_CHECK(q.klen > 0);
    if (op == OL_WOP_SHARD_COPY)
        FUZZ_CHECK(q.src_key && inside(q.src_key, q.src_klen, in->p, in->n));
    if (op == OL_WOP_LIST_KEYS)
        FUZZ_CHECK(q.after && inside(q.after, q.alen, in->p, in->n) &&
                   q.cap <= OL_DRIVE_SERVER_MAX_LIST);
    if (op == OL_WOP_VERSIONS)
        FUZZ_CHECK(q.cap <= OL_DRIVE_SERVER_MAX_VERSIONS && q.bcap <= OL_DRIVE_META_MAX);
    if (has_meta(op))
        FUZZ_CHECK(q.meta && inside(q.meta, q.meta_len, in->p, in->n));
    if (op >= OL_WOP_BUCKET_CREATE && op <= OL_WOP_BUCKET_CONFIG_GET && op != OL_WOP_BUCKET_LIST)
        FUZZ_CHECK(q.bucket[0] != '\0');
    if (op == OL_WOP_BUCKET_CONFIG_PUT || op == OL_WOP_BUCKET_CONFIG_GET || op == OL_WOP_MEMBER)
        FUZZ_CHECK(q.name[0] && strlen(q.name) <= OL_DRIVE_REQ_CFG_NAME_MAX);
    if (op == OL_WOP_BUCKET_CONFIG_GET)
        FUZZ_CHECK(q.arg <= OL_DRIVE_REQ_CFG_VALUE_MAX);
    if (op == OL_WOP_LOCK || op == OL_WOP_UNLOCK)
        FUZZ_CHECK(q.lock_name && q.lock_nlen >= 1 && q.lock_nlen <= OL_DRIVE_LOCK_NAME_MAX &&
                   inside(q.lock_name, q.lock_nlen, in->p, in->n));

    /* Round trip: what decoded encodes to a request with the same
     * arguments (the bytes may differ: reserved bytes, trailing bytes). */
    static uint8_t
        buf[2 * (4 + OL_DRIVE_MAX_BUCKET + 4 + OL_DRIVE_MAX_KEY) + 512 + OL_DRIVE_META_MAX];
    struct ol_wbuf w = {.p = buf, .cap = sizeof(buf)};
    encode(&q, &w);
    FUZZ_CHECK(!w.over && w.len <= in->n);
    struct ol_drive_req q2;
    FUZZ_CHECK(ol_drive_req_decode(op, buf, w.len, &q2) == 0);
    FUZZ_CHECK(strcmp(q.bucket, q2.bucket) == 0 && strcmp(q.src_bucket, q2.src_bucket) == 0);
    FUZZ_CHECK(same_bytes(q.key, q.klen, q2.key, q2.klen));
    FUZZ_CHECK(same_bytes(q.src_key, q.src_klen, q2.src_key, q2.src_klen));
    FUZZ_CHECK(same_bytes(q.after, q.alen, q2.after, q2.alen));
    FUZZ_CHECK(same_bytes(q.meta, q.meta_len, q2.meta, q2.meta_len));
    FUZZ_CHECK(strcmp(q.name, q2.name) == 0 && q.ctime_ns == q2.ctime_ns && q.arg == q2.arg);
    FUZZ_CHECK(memcmp(&q.sm, &q2.sm, sizeof(q.sm)) == 0);
    FUZZ_CHECK(memcmp(&q.vid, &q2.vid, sizeof(q.vid)) == 0 &&
               memcmp(&q.src_vid, &q2.src_vid, sizeof(q.src_vid)) == 0);
    FUZZ_CHECK(same_bytes(q.lock_name, q.lock_nlen, q2.lock_name, q2.lock_nlen) &&
               memcmp(q.owner, q2.owner, sizeof(q.owner)) == 0 && q.ttl_ms == q2.ttl_ms);
    FUZZ_CHECK(q.handle == q2.handle && q.off == q2.off && q.len == q2.len && q.stamp == q2.stamp &&
               q.cap == q2.cap && q.bflags == q2.bflags && q.bcap == q2.bcap);
}

/* ---- replies ---- */

/* The reply every call of the current input gets. */
static struct {
    int status;
    const uint8_t *ctl;
    size_t ctl_len;
    size_t data_len; /* bytes of data the reply carries */
    unsigned calls;
} rep;

/* Stands in for net/net.c: answers with the input's reply, after the
 * checks ol_net_call makes (the header checks are fuzzed above). */
int ol_net_call(struct ol_net *net, struct ol_net_call *c)
{
    (void)net;
    FUZZ_CHECK(c->ctl_len <= OL_WIRE_MAX_CTL && c->data_len <= OL_WIRE_MAX_DATA);
    FUZZ_CHECK(c->ctl_len == 0 || c->ctl);
    rep.calls++;
    c->rep_ctl_len = c->rep_data_len = 0;
    if (rep.ctl_len > c->rep_ctl_cap || rep.data_len > c->rep_data_cap)
        return -EMSGSIZE;
    if (rep.ctl_len)
        memcpy(c->rep_ctl, rep.ctl, rep.ctl_len);
    if (rep.data_len)
        memset(c->rep_data, 0xa5, rep.data_len);
    c->rep_ctl_len = rep.ctl_len;
    c->rep_data_len = rep.data_len;
    return rep.status;
}

static int count_buckets(void *ctx, const char *bucket)
{
    FUZZ_CHECK(strlen(bucket) <= OL_DRIVE_MAX_BUCKET);
    return ++*(unsigned *)ctx >= 100000; /* a bound, never reached by 1 MiB */
}

static void fuzz_reply(struct in *in)
{
    uint8_t which = in_u8(in);
    uint8_t kind = in_u8(in);
    uint8_t small = in_u8(in);
    /* Statuses that matter most: 0, small counts, errors; then any. */
    switch (kind & 3) {
    case 0:
        rep.status = 0;
        break;
    case 1:
        rep.status = small;
        break;
    case 2:
        rep.status = -(int)small;
        break;
    default:
        rep.status = (int32_t)in_u32(in);
        break;
    }
    rep.data_len = (size_t)(kind >> 2) * 64; /* 0..4032 */
    rep.ctl = in->p;
    rep.ctl_len = in->n;
    rep.calls = 0;

    struct ol_net *net = (struct ol_net *)&rep; /* never dereferenced */
    struct ol_remotedrive *rd;
    struct ol_remotedrive_opts o = {.net = net, .addr = "127.0.0.1:1", .drive = small & 7};
    FUZZ_CHECK(ol_remotedrive_create(&o, &rd) == 0);
    struct ol_drive dr = ol_remotedrive_drive(rd);
    const struct ol_drive_ops *ops = dr.ops;
    struct ol_version_id vid = {{1, 2, 3}};
    struct ol_shard_meta sm = {.k = 4, .m = 2, .size = 100};
    int rc;

    switch (which % 10) {
    case 0:
        rc = ol_remotedrive_ping(rd);
        FUZZ_CHECK(rc <= 0);
        break;
    case 1: {
        void *w = NULL;
        rc = ops->shard_begin(dr.d, "bkt", "key", 3, &w);
        if (rc >= 0) {
            FUZZ_CHECK(w);
            uint8_t bytes[100] = {0};
            rc = ops->shard_write(w, bytes, sizeof(bytes));
            if (small & 1)
                ops->shard_abort(w);
            else
                (void)ops->shard_commit(w, &sm, "m", 1);
        }
        break;
    }
    case 2:
    case 3: {
        unsigned cap = small % 9;
        struct ol_shard_meta out[8];
        uint8_t bbuf[64];
        struct ol_drive_blob blob = {
            .want = (small & 16) ? &vid : NULL, .buf = bbuf, .cap = (small >> 5) * 9};
        rc = ops->versions(dr.d, "bkt", "key", 3, out, cap, which % 10 == 3 ? &blob : NULL);
        if (rc >= 0)
            FUZZ_CHECK((unsigned)rc <= cap);
        if (rc >= 0 && blob.got)
            FUZZ_CHECK(blob.len <= blob.cap);
        break;
    }
    case 4: {
        uint8_t buf[4096];
        size_t len = (size_t)small * 16;
        rc = ops->read_shard(dr.d, "bkt", "key", 3, &vid, 0, len, buf);
        FUZZ_CHECK(rc <= 0 || rc == rep.status);
        break;
    }
    case 5: {
        static struct ol_drive_entry ents[8];
        unsigned cap = small % 9;
        rc = ops->list_keys(dr.d, "bkt", "", 0, ents, cap);
        if (rc >= 0) {
            FUZZ_CHECK((unsigned)rc <= cap);
            for (int i = 0; i < rc; i++)
                FUZZ_CHECK(ents[i].key_len >= 1 && ents[i].key_len <= OL_DRIVE_MAX_KEY);
        }
        break;
    }
    case 6: {
        unsigned n = 0;
        rc = ops->list_buckets(dr.d, count_buckets, &n);
        break;
    }
    case 7:
        rc = ops->set_meta(dr.d, "bkt", "key", 3, &vid, "meta", 4, 7);
        FUZZ_CHECK(rc == rep.status || rc == -EPROTO || rc == -EMSGSIZE);
        rc = ops->mark_complete(dr.d, "bkt", "key", 3, &vid);
        rc = ops->delete_version(dr.d, "bkt", "key", 3, &vid);
        break;
    case 9: {
        /* A vote is 0 exactly when the peer said 0; never a count. */
        uint8_t owner[OL_DRIVE_LOCK_OWNER] = {1};
        rc = ops->lock(dr.d, "bkt\0key", 7, owner, 1000);
        FUZZ_CHECK(rc <= 0 && (rc < 0 || rep.status == 0));
        rc = ops->unlock(dr.d, "bkt\0key", 7, owner);
        FUZZ_CHECK(rc <= 0);
        break;
    }
    default:
        rc = ops->shard_copy(dr.d, "src", "k", 1, &vid, "bkt", "key", 3, &sm, NULL, 0);
        break;
    }
    (void)rc;
    FUZZ_CHECK(rep.calls <= 64); /* list_keys pages: at most cap calls */
    ol_remotedrive_destroy(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    switch (in_u8(&in) % 3) {
    case 0:
        fuzz_header(&in);
        break;
    case 1:
        fuzz_request(&in);
        break;
    default:
        fuzz_reply(&in);
        break;
    }
    return 0;
}
