/* The wire format of OpenLake's native protocol over UCX (docs/PROTOCOL.md,
 * "Drive protocol (UCX)").
 *
 * Every message is one UCX active message: the AM header is exactly one
 * `struct ol_wire_hdr` (fixed size, pinned below); the AM data is `ctl_len`
 * bytes of control arguments followed by `data_len` bytes of bulk data
 * (shard bytes).  UCX picks eager or rendezvous by size; a receiver lands
 * the two parts in separate buffers (an iov), so bulk bytes can go straight
 * to their final place.
 *
 * Integers are little-endian on the wire (the header too: the hosts we run
 * on are little-endian, and the encoders below are explicit so that a
 * big-endian port only changes them).  The control arguments are a flat
 * sequence written with the ol_wbuf_* helpers and read back with ol_rbuf_*:
 * u8/u16/u32/u64, byte strings (u32 length + bytes), version ids (16 bytes)
 * and shard metadata (ol_wire_put_meta: OL_WIRE_META_BYTES).
 *
 * Integrity: the bulk bytes carry their CRC32C in the header, computed by
 * the sender and checked by the receiver before it uses them (-EIO when they
 * differ), so that no transport fault or stale transfer ever passes bad
 * bytes off as a shard's.
 *
 * Clocks: every message carries its sender's hybrid logical clock (core/hlc.h)
 * in `hlc`, read when the message is sent (a reply: after the op ran), so
 * that a receiver can move its own clock past it before it acts on the
 * message (net/net.h says what a receiver does with it).  A sender without
 * an HLC sends its wall clock in the same form (so that the stamp also
 * serves authentication's freshness check).
 *
 * Authentication: every message carries a MAC under the cluster key in
 * `mac` (net/auth.h); a receiver checks it, and the stamp's freshness,
 * before it acts on the message or takes in its clock.
 *
 * Versioning: `version` is OL_WIRE_VERSION (2 since the header carries the
 * clock and the MAC, 64 bytes; version 1 had 48 bytes, two reserved words
 * instead of the clock, another field order and no MAC).
 * A receiver answers a request of any other version with status -EPROTO
 * (and its own version in the reply header), and drops a reply of another
 * version.  New ops get new numbers;
 * an op's arguments only ever grow at the end (a receiver ignores trailing
 * bytes it does not know), anything else bumps the version.
 *
 * Threads: the helpers are pure functions of their arguments.
 */
#ifndef OL_NET_WIRE_H
#define OL_NET_WIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/hlc.h"
#include "ec/drive.h"

enum {
    OL_WIRE_MAGIC = 0x50444c4fu, /* the bytes "OLDP" (OpenLake drive protocol) */
    OL_WIRE_VERSION = 2,

    /* UCX active message ids. */
    OL_WIRE_AM_REQUEST = 1,
    OL_WIRE_AM_REPLY = 2,

    /* ol_wire_hdr.flags */
    OL_WIRE_F_REPLY = 1u << 0,

    /* Limits: a message larger than these is refused (-EMSGSIZE) before
     * anything is received.  Control arguments hold keys, metadata blobs
     * and listing pages; data holds shard bytes. */
    OL_WIRE_MAX_CTL = 1 << 20,
    OL_WIRE_MAX_DATA = 64 << 20,

    OL_WIRE_META_BYTES = 16 + 8 + 4 + 8 + 8 + 64 + 4 + 4 + 8,

    /* The header's message authentication code (net/auth.h). */
    OL_WIRE_MAC_BYTES = 16,
};

/* Drive protocol ops (ol_wire_hdr.op). */
enum ol_wire_op {
    OL_WOP_PING = 1,
    OL_WOP_SHARD_BEGIN = 2,
    OL_WOP_SHARD_WRITE = 3,
    OL_WOP_SHARD_COMMIT = 4,
    OL_WOP_SHARD_ABORT = 5,
    OL_WOP_SHARD_COPY = 6,
    OL_WOP_MARK_COMPLETE = 7,
    OL_WOP_VERSIONS = 8,
    OL_WOP_SET_META = 9,
    OL_WOP_READ_SHARD = 10,
    OL_WOP_DELETE_VERSION = 11,
    OL_WOP_LIST_KEYS = 12,
    OL_WOP_LIST_BUCKETS = 13,
    /* Buckets and their settings (ec/drive.h, bucket_*). */
    OL_WOP_BUCKET_CREATE = 14,
    OL_WOP_BUCKET_DELETE = 15,
    OL_WOP_BUCKET_GET = 16,
    OL_WOP_BUCKET_LIST = 17,
    OL_WOP_BUCKET_CONFIG_PUT = 18,
    OL_WOP_BUCKET_CONFIG_GET = 19,
    /* A quorum lock's votes (ec/drive.h, lock / unlock). */
    OL_WOP_LOCK = 20,
    OL_WOP_UNLOCK = 21,
    /* The drive's free and total bytes (ec/drive.h, space): no arguments;
     * the reply's control bytes are two u64, free then total. */
    OL_WOP_SPACE = 22,
    /* Membership: "can you reach etcd?" (cluster/vouch.h has the wire form;
     * no drive: the header's drive is ignored). */
    OL_WOP_MEMBER = 23,
    /* SHARD_WRITE then SHARD_COMMIT in one message: the request's data are the writer's last bytes
     * (ec/remotedrive.h). */
    OL_WOP_SHARD_PUT = 24,
    OL_WOP_END,
};

struct ol_wire_hdr {
    uint32_t magic;    /* OL_WIRE_MAGIC */
    uint8_t version;   /* OL_WIRE_VERSION */
    uint8_t op;        /* enum ol_wire_op; a reply repeats the request's */
    uint16_t flags;    /* OL_WIRE_F_* */
    uint32_t drive;    /* index into the server's drive table */
    int32_t status;    /* reply: 0, a count, or -errno / -OL_E*; request: 0 */
    uint64_t req_id;   /* chosen by the caller, echoed by the reply */
    uint64_t hlc;      /* the sender's HLC stamp (core/hlc.h) when it sent this; 0: none */
    uint64_t data_len; /* bulk bytes (after the control bytes) */
    uint32_t ctl_len;  /* control argument bytes (first in the AM data) */
    uint32_t data_crc; /* CRC32C of the bulk bytes (0 when there are none) */
    /* The message's authentication code under the cluster key (net/auth.h):
     * over this header (mac zeroed) and the control bytes. */
    uint8_t mac[OL_WIRE_MAC_BYTES];
};
/* Every field at its natural alignment: no padding, and the same bytes on
 * every compiler of a little-endian host. */
_Static_assert(sizeof(struct ol_wire_hdr) == 64, "the wire header is 64 bytes");
_Static_assert(offsetof(struct ol_wire_hdr, hlc) == 24 &&
                   offsetof(struct ol_wire_hdr, ctl_len) == 40 &&
                   offsetof(struct ol_wire_hdr, mac) == 48,
               "the wire header's layout (docs/PROTOCOL.md)");

/* ---- header checks (what a receiver does first; tests/fuzz/fuzz_wire.c) ---- */

/* Copies an AM header of header_len bytes into *h: false (drop it, there is
 * no one to answer) when it is not a drive protocol header. */
static inline bool ol_wire_hdr_get(const void *header, size_t header_len, struct ol_wire_hdr *h)
{
    if (header_len != sizeof(*h))
        return false;
    memcpy(h, header, sizeof(*h));
    return h->magic == OL_WIRE_MAGIC;
}

/* A request whose AM data is `length` bytes: 0, -EPROTO (another version),
 * -EMSGSIZE (past the limits, or lengths that do not add up to length). */
static inline int ol_wire_req_check(const struct ol_wire_hdr *h, size_t length)
{
    if (h->version != OL_WIRE_VERSION)
        return -EPROTO;
    if (h->ctl_len > OL_WIRE_MAX_CTL || h->data_len > OL_WIRE_MAX_DATA ||
        (uint64_t)h->ctl_len + h->data_len != length)
        return -EMSGSIZE;
    return 0;
}

/* A reply to a call of op whose buffers hold ctl_cap and data_cap bytes:
 * 0, -EPROTO (another version or op, not a reply, lengths that do not add
 * up), -EMSGSIZE (larger than the buffers). */
static inline int ol_wire_rep_check(const struct ol_wire_hdr *h, size_t length, uint8_t op,
                                    size_t ctl_cap, size_t data_cap)
{
    if (h->version != OL_WIRE_VERSION || h->op != op || !(h->flags & OL_WIRE_F_REPLY))
        return -EPROTO;
    if ((uint64_t)h->ctl_len + h->data_len != length)
        return -EPROTO;
    if (h->ctl_len > ctl_cap || h->data_len > data_cap)
        return -EMSGSIZE;
    return 0;
}

/* ---- control argument encoding ---- */

/* An append cursor over a caller's buffer.  A write past cap sets `over`
 * and writes nothing more (check once at the end). */
struct ol_wbuf {
    uint8_t *p;
    size_t len, cap;
    bool over;
};

static inline void ol_wbuf_bytes(struct ol_wbuf *w, const void *b, size_t n)
{
    if (w->over || n > w->cap - w->len) {
        w->over = true;
        return;
    }
    if (n)
        memcpy(w->p + w->len, b, n);
    w->len += n;
}
static inline void ol_wbuf_u8(struct ol_wbuf *w, uint8_t v)
{
    ol_wbuf_bytes(w, &v, 1);
}
static inline void ol_wbuf_u32(struct ol_wbuf *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    ol_wbuf_bytes(w, b, 4);
}
static inline void ol_wbuf_u64(struct ol_wbuf *w, uint64_t v)
{
    ol_wbuf_u32(w, (uint32_t)v);
    ol_wbuf_u32(w, (uint32_t)(v >> 32));
}
/* A byte string: u32 length, then the bytes. */
static inline void ol_wbuf_str(struct ol_wbuf *w, const void *s, size_t n)
{
    ol_wbuf_u32(w, (uint32_t)n);
    ol_wbuf_bytes(w, s, n);
}
static inline void ol_wbuf_vid(struct ol_wbuf *w, const struct ol_version_id *v)
{
    ol_wbuf_bytes(w, v->b, OL_VERSION_ID_BYTES);
}

/* A read cursor.  A read past the end sets `bad` and yields zeros. */
struct ol_rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline const uint8_t *ol_rbuf_take(struct ol_rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += n;
    return q;
}
static inline uint8_t ol_rbuf_u8(struct ol_rbuf *r)
{
    const uint8_t *q = ol_rbuf_take(r, 1);
    return q ? q[0] : 0;
}
static inline uint32_t ol_rbuf_u32(struct ol_rbuf *r)
{
    const uint8_t *q = ol_rbuf_take(r, 4);
    return q ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24
             : 0;
}
static inline uint64_t ol_rbuf_u64(struct ol_rbuf *r)
{
    uint64_t lo = ol_rbuf_u32(r);
    return lo | (uint64_t)ol_rbuf_u32(r) << 32;
}
/* A byte string of at most max bytes: points into the buffer (*n its
 * length); NULL (and bad) when longer or truncated. */
static inline const void *ol_rbuf_str(struct ol_rbuf *r, size_t max, size_t *n)
{
    uint32_t len = ol_rbuf_u32(r);
    if (len > max) {
        r->bad = true;
        *n = 0;
        return NULL;
    }
    *n = len;
    const uint8_t *q = ol_rbuf_take(r, len);
    return q ? q : (const void *)"";
}
static inline void ol_rbuf_vid(struct ol_rbuf *r, struct ol_version_id *v)
{
    const uint8_t *q = ol_rbuf_take(r, OL_VERSION_ID_BYTES);
    if (q)
        memcpy(v->b, q, OL_VERSION_ID_BYTES);
    else
        memset(v->b, 0, OL_VERSION_ID_BYTES);
}

/* struct ol_shard_meta field by field (no padding, no host layout). */
static inline void ol_wire_put_meta(struct ol_wbuf *w, const struct ol_shard_meta *sm)
{
    ol_wbuf_vid(w, &sm->vid);
    uint8_t b[8] = {sm->k, sm->m, sm->shard, sm->rotation, sm->flags, 0, 0, 0};
    ol_wbuf_bytes(w, b, 8);
    ol_wbuf_u32(w, sm->unit_bytes);
    ol_wbuf_u64(w, sm->size);
    ol_wbuf_u64(w, (uint64_t)sm->mtime_ns);
    ol_wbuf_bytes(w, sm->etag, sizeof(sm->etag));
    ol_wbuf_u32(w, sm->meta_len);
    ol_wbuf_u32(w, sm->meta_crc);
    ol_wbuf_u64(w, sm->meta_stamp);
}
static inline void ol_wire_get_meta(struct ol_rbuf *r, struct ol_shard_meta *sm)
{
    memset(sm, 0, sizeof(*sm));
    ol_rbuf_vid(r, &sm->vid);
    const uint8_t *b = ol_rbuf_take(r, 8);
    if (b) {
        sm->k = b[0];
        sm->m = b[1];
        sm->shard = b[2];
        sm->rotation = b[3];
        sm->flags = b[4];
    }
    sm->unit_bytes = ol_rbuf_u32(r);
    sm->size = ol_rbuf_u64(r);
    sm->mtime_ns = (int64_t)ol_rbuf_u64(r);
    const uint8_t *e = ol_rbuf_take(r, sizeof(sm->etag));
    if (e)
        memcpy(sm->etag, e, sizeof(sm->etag));
    sm->etag[sizeof(sm->etag) - 1] = '\0';
    sm->meta_len = ol_rbuf_u32(r);
    sm->meta_crc = ol_rbuf_u32(r);
    sm->meta_stamp = ol_rbuf_u64(r);
}

#endif
