/* Decoding a drive protocol request's control arguments (net/wire.h,
 * docs/PROTOCOL.md "Drive protocol (UCX)"): the step of the drive server
 * (net/drive_server.c) that reads untrusted bytes, apart from UCX and from
 * the drives so that tests/fuzz/fuzz_wire.c can call it alone.
 *
 * ol_drive_req_decode reads the arguments of op from ctl into *q, field by
 * field as the op lists them (the fields an op does not have stay zero):
 *
 *   SHARD_BEGIN     bucket, key (1..OL_DRIVE_MAX_KEY bytes)
 *   SHARD_WRITE     handle, off (the offset the client writes at)
 *   SHARD_COMMIT    handle, len (the total bytes written), sm, meta
 *   SHARD_ABORT     handle
 *   SHARD_PUT       handle, off (where the request's data go), sm, meta
 *   SHARD_COPY      src_bucket, src_key, src_vid, bucket, key, sm, meta
 *   MARK_COMPLETE,
 *   DELETE_VERSION  bucket, key, vid
 *   VERSIONS        bucket, key, cap, bflags, want, bcap
 *   SET_META        bucket, key, vid, stamp, meta
 *   READ_SHARD      bucket, key, vid, off, len
 *   LIST_KEYS       bucket, after (the key to list after; 0 bytes: from the start), cap
 *   LOCK            lock_name (1..OL_DRIVE_LOCK_NAME_MAX bytes), owner, ttl_ms
 *   UNLOCK          lock_name, owner
 *   MEMBER          name (the asker's cluster: 1..OL_DRIVE_REQ_CFG_NAME_MAX bytes, no NUL)
 *   PING,
 *   LIST_BUCKETS    nothing
 *
 * Limits it enforces: a bucket is 0..OL_DRIVE_MAX_BUCKET bytes with no NUL
 * (NUL-terminated in q), keys are at most OL_DRIVE_MAX_KEY bytes, meta at
 * most OL_DRIVE_META_MAX; cap is clamped to OL_DRIVE_SERVER_MAX_VERSIONS
 * (versions) or OL_DRIVE_SERVER_MAX_LIST (list_keys), bcap to
 * OL_DRIVE_META_MAX.  Offsets and lengths are not checked against anything
 * (the server does that with the writer's or the drive's state).  Trailing
 * bytes are ignored (an op's arguments only grow at the end).
 *
 * Returns 0, -EPROTO (truncated or past a limit), -EOPNOTSUPP (an op it
 * does not know).  Pointers in q (key, src_key, after, meta) point into ctl:
 * borrowed for as long as ctl lives.  A pure function; any thread.
 */
#ifndef OL_NET_DRIVE_REQ_H
#define OL_NET_DRIVE_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "ec/drive.h"

enum {
    /* Bucket settings: names of 1..64 bytes, values of at most 1 MiB plus
     * the deployment's small header (store/store.h). */
    OL_DRIVE_REQ_CFG_NAME_MAX = 64,
    OL_DRIVE_REQ_CFG_VALUE_MAX = (1 << 20) + 64,
};

struct ol_drive_req {
    uint8_t op;
    char bucket[OL_DRIVE_MAX_BUCKET + 1];
    const char *key; /* into ctl */
    size_t klen;
    char src_bucket[OL_DRIVE_MAX_BUCKET + 1];
    const char *src_key; /* into ctl */
    size_t src_klen;
    struct ol_version_id src_vid;
    struct ol_version_id vid; /* versions: the wanted blob's version */
    uint64_t handle;
    uint64_t off;
    uint64_t len; /* read_shard: bytes to read; shard_commit: bytes written */
    struct ol_shard_meta sm;
    const void *meta; /* into ctl; non-NULL after a 0 return for the ops with meta */
    size_t meta_len;
    uint64_t stamp;
    uint32_t cap;
    uint8_t bflags; /* versions: 1 the caller wants a blob, 2 of version vid */
    uint32_t bcap;
    const char *after; /* into ctl */
    size_t alen;
    /* bucket ops: bucket_create's ctime; a setting's name (member: the
     * cluster's), and arg (put: 1 set, 0 remove; get: the room the caller
     * has, clamped to OL_DRIVE_REQ_CFG_VALUE_MAX) */
    int64_t ctime_ns;
    char name[OL_DRIVE_REQ_CFG_NAME_MAX + 1];
    uint64_t arg;
    /* lock / unlock: the name (into ctl), the owner (OL_DRIVE_LOCK_OWNER
     * bytes, any value: the drive refuses an all-zero one) and lock's ttl
     * (not checked here: the drive answers -EINVAL) */
    const void *lock_name;
    size_t lock_nlen;
    uint8_t owner[OL_DRIVE_LOCK_OWNER];
    uint32_t ttl_ms;
};

int ol_drive_req_decode(uint8_t op, const void *ctl, size_t ctl_len, struct ol_drive_req *q);

#endif
