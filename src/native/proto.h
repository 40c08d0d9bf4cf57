/* The client protocol of OpenLake's native data plane (docs/PROTOCOL.md,
 * "Client protocol (UCX)"): what libopenlake (src/client/) sends to a
 * node's native port and what src/native/server.c answers.
 *
 * Framing is the drive protocol's (net/wire.h): one UCX active message per
 * request and per reply, the 64-byte struct ol_wire_hdr, then `ctl_len`
 * control bytes (written with ol_wbuf_*, read with ol_rbuf_*), then
 * `data_len` bulk bytes with their CRC32C in the header.  The client ops
 * have numbers of their own (OL_COP_*, from 64), so that a drive op never
 * means anything on a native port and a client op never on a drive port;
 * the header's `drive` is 0.
 *
 * Authentication.  Every request's control bytes start with the caller's
 * access key (a string, as S3's); the rest are the op's arguments.  The
 * message is signed as a drive message is (net/auth.h: HMAC-SHA256 over the
 * header and the control bytes, first 16 bytes, the stamp fresh within 15
 * minutes), but with the user's native key instead of a cluster key:
 *
 *   native_key = HMAC-SHA256(key = "OPENLAKE1" || secret_key,
 *                            msg = "openlake-native/1/" || access_key)
 *
 * so the secret never travels, and the same users and secrets as S3 work.
 * The server answers a request that fails (unknown access key, wrong
 * secret, stale stamp) with -EACCES under a MAC no client can check: the
 * client sees -EACCES either way.  Replies are signed with the same key,
 * so a client knows its answer came from a node that knows its secret.
 * Bulk bytes are covered through the header's data_crc (net/auth.h).
 *
 * Errors: a reply's status is 0 or a count on success, or a negative code:
 * -errno or -OL_E* (core/err.h); libopenlake passes them on unchanged
 * (include/openlake/client.h lists the ones a caller sees).
 *
 * Limits: one message carries at most OL_WIRE_MAX_DATA (64 MiB) of data;
 * larger objects move in several ops (GET by ranges, PUT by a session).
 *
 * Threads: the helpers below are pure functions of their arguments.
 */
#ifndef OL_NATIVE_PROTO_H
#define OL_NATIVE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "net/auth.h"
#include "net/wire.h"

enum {
    OL_NATIVE_PROTO_VERSION = 1,
    OL_NATIVE_MAX_ACCESS_KEY = 128,
    OL_NATIVE_MAX_BUCKET = 63,
    OL_NATIVE_MAX_KEY = 1024,
    OL_NATIVE_MAX_VID = 64,
    OL_NATIVE_MAX_CTYPE = 256,
    OL_NATIVE_MAX_LIST = 1000, /* keys per LIST reply */
    /* Data bytes per message (one GET range, one PUT_WRITE). */
    OL_NATIVE_MAX_DATA = OL_WIRE_MAX_DATA,
    OL_NATIVE_PUT_IDLE_MS = 60000, /* an unused PUT session is aborted */
    OL_NATIVE_MAX_SESSIONS = 1024,
    OL_NATIVE_MAX_BATCH = 4096, /* items per GET_BATCH */
    /* Bytes per GET_CUDA (no data travels: one worker's copy time). */
    OL_NATIVE_MAX_CUDA = 256 << 20,
    /* HELLO's flags (after the lane table). */
    OL_NATIVE_HELLO_CUDA_IPC = 1,
};

/* Client ops (ol_wire_hdr.op).  Every request's control bytes begin with
 * str access_key; "Request" below lists what follows it. */
enum ol_native_op {
    /* Request: (nothing).  Reply ctl: u32 protocol version, u64 max data per
     * message, u32 n, then n times str "host:port" (the native address of
     * every node that serves the same objects, this one first; 1 on a
     * single node).  Then (grown at the end) the lane table
     * (docs/PROTOCOL.md), then u8 flags (OL_NATIVE_HELLO_CUDA_IPC: this
     * node serves GET_CUDA) and 16 bytes the node's boot id (core/cuda.h
     * ol_host_boot_id; zeros when unknown).  Checks the credentials. */
    OL_COP_HELLO = 64,
    /* Request: str bucket, str key, str version id ("" = current).
     * Reply: status 0, ctl = object info (below). */
    OL_COP_HEAD = 65,
    /* Request: str bucket, str key, str version id ("" = current), u64
     * offset, u64 length (UINT64_MAX: to the end; at most
     * OL_NATIVE_MAX_DATA is sent, the client asks again), and optionally
     * str if_match (an ETag, quoted or not: -OL_EPRECONDITION unless the
     * object still has it; how a client pins the ranges of an unversioned
     * object, whose version id is "null").  Reply: status
     * = bytes sent, ctl = object info, data = the bytes from offset.  An
     * offset past the end of a non-empty object: -ERANGE.  A client that
     * reads one object in several ranges passes the version id the first
     * reply named, so that it never mixes two versions. */
    OL_COP_GET = 66,
    /* Request: str bucket, str key, str content type, data = the whole
     * object (at most OL_NATIVE_MAX_DATA).  Reply: status 0, ctl = object
     * info of what was stored. */
    OL_COP_PUT = 67,
    /* A PUT of any size in several messages.  BEGIN: str bucket, str key,
     * str content type, u64 total size; reply ctl: u64 session id.
     * WRITE: u64 session, u64 offset (= the bytes written so far: a message
     * lost or repeated fails the session with -EIO; one that comes before
     * the message ahead of it, at most one message early, waits for it),
     * data; reply status 0.
     * COMMIT: u64 session, data = the last bytes (may be empty); the sizes
     * must add up to the total (else -EIO); reply ctl = object info.
     * ABORT: u64 session.  A session belongs to the access key and the
     * connection that began it; it is aborted when unused for
     * OL_NATIVE_PUT_IDLE_MS or when its connection goes away.  Nothing is
     * visible under the key before COMMIT answers. */
    OL_COP_PUT_BEGIN = 68,
    OL_COP_PUT_WRITE = 69,
    OL_COP_PUT_COMMIT = 70,
    OL_COP_PUT_ABORT = 71,
    /* Request: str bucket, str key.  Reply: status 0 (also when there was
     * no such key, as S3). */
    OL_COP_DELETE = 72,
    /* Request: str bucket, str prefix, str start_after, u32 max keys
     * (0 or more than OL_NATIVE_MAX_LIST: OL_NATIVE_MAX_LIST).  Reply ctl:
     * u32 n, n times {str key, u64 size, i64 mtime_ns, str etag}, u8
     * truncated (1: ask again with start_after = the last key). */
    OL_COP_LIST = 73,
    /* Many small ranged reads in one round trip.  Request: u32 n (at most
     * OL_NATIVE_MAX_BATCH), n times {str bucket, str key, u64 offset, u64
     * length}.  Reply: status = n, ctl = n times {i32 status, u64 bytes},
     * data = the bytes of every item that succeeded, one after another in
     * request order.  Each item has its own status; the data of all of them
     * together is at most OL_NATIVE_MAX_DATA (an item that would pass it
     * answers -EMSGSIZE, and so do the items after it). */
    OL_COP_GET_BATCH = 74,
    /* Direct reads (native/direct.h; docs/PROTOCOL.md "Direct reads").
     * LAYOUT.  Request: str bucket, str key, str version id ("" =
     * current), and optionally u64 offset, u64 length, u64 inline_max
     * (0: never inline).  Authorized as GET.  When inline_max > 0 and the
     * bytes the range holds (min(length, size - offset)) are at most
     * min(inline_max, OL_NATIVE_MAX_DATA), the reply is GET's: status =
     * those bytes, data = them, ctl = object info, then u8 2
     * (OL_NATIVE_LAYOUT_INLINE); an offset past the end is -ERANGE.
     * Otherwise status 0, ctl = object info,
     * then u8 direct (0: read it with GET), and when 1: u32 set, 16 bytes
     * version id, u8 k, u8 m, u32 unit bytes, u64 stored size, then k+m
     * times {u8 state (OL_NATIVE_SHARD_*), str native address of the node
     * that holds the shard ("" = this node)}, in shard order. */
    OL_COP_LAYOUT = 75,
    /* SHARD_GET.  Request: str bucket, str key, u32 set, 16 bytes version
     * id, u8 shard, u64 offset, u64 length (1..OL_NATIVE_MAX_DATA), bytes of
     * that shard of that version, from a drive of this node.  Authorized as
     * GET (s3:GetObject, and s3:GetObjectVersion unless the version is the
     * drive's newest of the key).  Reply: status = length, data = the
     * bytes (the drive verified them); -OL_ENOKEY when no drive of this
     * node holds that shard of that version; -ENOTSUP for a version that
     * cannot be read so (encrypted, a manifest). */
    OL_COP_SHARD_GET = 76,
    /* GET_CUDA (native/cuda_ipc.h; docs/PROTOCOL.md "CUDA IPC reads"): a
     * GET whose bytes the node copies into the GPU memory of a client on
     * its own host.  Request: GET's (str bucket, str key, str version id,
     * u64 offset, u64 length, str if_match: "" = none), then 16 bytes the
     * device's UUID, 64 bytes the CUDA IPC handle of the client's
     * allocation, u64 the destination's offset in that allocation.
     * Authorized as GET.  Reply: status = bytes copied (at most
     * OL_NATIVE_MAX_CUDA), ctl = object info; no data.  -ENOTSUP: no CUDA
     * here; -ENODEV: no such device here; -EXDEV: the handle does not open
     * here (another host); -EINVAL: the range passes the allocation. */
    OL_COP_GET_CUDA = 77,
    OL_COP_END,

    /* The KV-cache namespace (docs/KV.md, kv/kv.h): immutable blocks under
     * opaque keys of 1..OL_KV_MAX_KEY (128) bytes, apart from the buckets.
     * Each op carries a whole batch of n keys (1..OL_NATIVE_KV_MAX_BATCH)
     * in one round trip.  A malformed request fails whole, before anything
     * is done: -EINVAL (truncated arguments, n = 0, a key of 0 or more than
     * 128 bytes, data on an op that takes none), -E2BIG (n past the batch
     * limit, a block past OL_KV_MAX_VALUE), -EMSGSIZE (PUT sizes that do not
     * add up to the data).  A node without a KV store answers -ENOTSUP.
     *
     * PUT.  Request: u32 n, n times {str key, u64 size}, data = the n blocks
     * back to back in that order.  Reply: status = n, ctl = n times i32: 0
     * stored, 1 already present (not written again: a dedup), or the key's
     * own error (-ENOSPC: no room that could be freed; -E2BIG: larger than
     * the node's memory tier; -ENOMEM). */
    OL_COP_KV_PUT = 80,
    /* GET.  Request: u32 n, n times str key.  Reply: status = n, ctl = n
     * times {i32 status, u64 size}, data = the blocks found, back to back in
     * request order.  Status 0: a hit (size bytes in the data); -ENOENT: a
     * miss (absent, evicted, or failed its checksum); -EMSGSIZE: the block
     * (size bytes) would take the reply past OL_NATIVE_MAX_DATA, and so do
     * the keys after it (size 0 when not looked at): ask again for them. */
    OL_COP_KV_GET = 81,
    /* MATCH_PREFIX.  Request: u32 n, u32 flags (OL_NATIVE_KV_PIN), u32
     * lease_ms (0: OL_KV_DEFAULT_LEASE_MS; at most OL_KV_MAX_LEASE_MS),
     * n times str key.  Reply: status = the number of leading keys present
     * in either tier (0..n; it stops at the first absent key); with
     * OL_NATIVE_KV_PIN those keys are pinned for lease_ms (each needs one
     * RELEASE, or its lease runs out).  Present means indexed: a get may
     * still miss a block that fails its checksum. */
    OL_COP_KV_MATCH_PREFIX = 82,
    /* RELEASE.  Request: u32 n, n times str key.  Reply: status = the number
     * of pins dropped (a key that is absent or not pinned counts 0). */
    OL_COP_KV_RELEASE = 83,
    /* STATS.  Request: (nothing).  Reply: ctl = u32 count, then count times
     * u64, in the order of struct ol_kv_stats (kv/kv.h); fields only ever
     * grow at the end. */
    OL_COP_KV_STATS = 84,
    OL_COP_KV_END,
};

/* LAYOUT's u8 after the info: read with GET, the layout, the bytes. */
enum {
    OL_NATIVE_LAYOUT_GET = 0,
    OL_NATIVE_LAYOUT_DIRECT = 1,
    OL_NATIVE_LAYOUT_INLINE = 2,
};

/* LAYOUT's shard states. */
enum {
    OL_NATIVE_SHARD_HELD = 0,    /* the resolution saw it on its drive */
    OL_NATIVE_SHARD_UNKNOWN = 1, /* its drive was not asked */
    OL_NATIVE_SHARD_MISSING = 2, /* its drive lacks it, failed, or its node is down */
};

enum {
    OL_NATIVE_KV_MAX_BATCH = 4096, /* keys per KV op */
    OL_NATIVE_KV_PIN = 1u << 0,    /* MATCH_PREFIX flags */
};

/* Whether op is a client op (the server's key function signs nothing
 * else). */
static inline int ol_native_is_client_op(unsigned op)
{
    return (op >= OL_COP_HELLO && op < OL_COP_END) || (op >= OL_COP_KV_PUT && op < OL_COP_KV_END);
}

/* The object info of HEAD, GET, PUT and COMMIT replies, in this order:
 *   u64 size, i64 mtime_ns (as u64), str etag (quoted, as S3 sends it),
 *   str version id ("null" when unversioned), str content type. */

/* The user's native key (above). */
void ol_native_key(const char *access_key, const char *secret_key,
                   uint8_t key[OL_NET_KEY_BYTES]);

#endif
