/* A drive (ec/drive.h) that lives in another process or node, reached over
 * UCX (net/net.h) with the drive protocol (net/wire.h); the other end is a
 * drive server (net/drive_server.h).
 *
 * Every op of ec/drive.h is one remote call (list_keys may be several: a
 * server answers at most OL_DRIVE_SERVER_MAX_LIST keys per call; a
 * shard_write larger than OL_WIRE_MAX_DATA is sent in pieces), and answers
 * what the remote drive answered: 0, counts, OL_DRIVE_SUPERSEDED,
 * -OL_ENOKEY, -OL_ECORRUPT, -EAGAIN, -ENOSPC... travel as they are.  On top
 * of those, the transport's errors (net/net.h): -ETIMEDOUT when the server
 * does not answer within timeout_ms, -ECONNRESET / -ECONNREFUSED /
 * -EHOSTUNREACH when it is gone or cannot be reached, -EPROTO for a
 * malformed reply, -ENODEV for a drive index the server does not have, -EIO
 * for shard bytes that failed their wire CRC32C (never returned as data).
 * The erasure set takes any of these as "this drive could not answer".
 * With opts.down_ms, a drive that timed out answers -ETIMEDOUT at once for a
 * while (below).
 *
 * Writers: the server holds the writer (shard_begin is a call, whose reply
 * also brings the server's clock in before the set picks the version id);
 * the client's writer is a handle and the byte count sent.  The bytes of a
 * small shard (up to OL_REMOTEDRIVE_PUT_MAX in all) are kept by the client
 * and sent with the commit in one SHARD_PUT call (two round trips per shard
 * instead of three), so a drive's error on them comes from the commit; past
 * that size, or with a server that does not know SHARD_PUT (-EOPNOTSUPP,
 * remembered per drive), every write is sent as it comes.  After a failed
 * shard_write the writer is failed for good (sticky): the next writes and
 * the commit answer the same error (the server may have taken a part of the
 * bytes), abort cleans up.
 *
 * The zero-copy reader ops are NULL: the erasure set reads with read_shard,
 * whose bytes land in the caller's buffer (by rendezvous for large reads).
 *
 * Threads: any; the ops are as concurrent as ec/drive.h asks (every call is
 * its own request on the shared ol_net).
 */
#ifndef OL_EC_REMOTEDRIVE_H
#define OL_EC_REMOTEDRIVE_H

#include <stdint.h>

#include "ec/drive.h"
#include "net/net.h"

struct ol_remotedrive;

enum {
    /* A shard of at most this many bytes goes in one SHARD_PUT (above); at
     * most the drive server's fiber bound (net/drive_server.h). */
    OL_REMOTEDRIVE_PUT_MAX = 256 << 10,
};

extern const struct ol_drive_ops ol_remotedrive_ops;

struct ol_remotedrive_opts {
    struct ol_net *net;  /* borrowed: outlives the drive */
    const char *addr;    /* the server, "host:port" (copied) */
    uint32_t drive;      /* index in the server's table */
    unsigned timeout_ms; /* per call; 0: the ol_net's default */
    /* Fail fast (0: off): after a call timed out, every call answers
     * -ETIMEDOUT at once for down_ms, then one goes out again (and a new
     * timeout starts the next period).  A hung node then costs one timeout
     * per period instead of one per call, which an erasure set makes several
     * times per request (a cluster sets it to its drive timeout). */
    unsigned down_ms;
};

int ol_remotedrive_create(const struct ol_remotedrive_opts *opts, struct ol_remotedrive **out);
/* Open writers must be consumed (commit or abort) first. */
void ol_remotedrive_destroy(struct ol_remotedrive *rd);
/* The drive as the erasure set takes it ({&ol_remotedrive_ops, rd}). */
struct ol_drive ol_remotedrive_drive(struct ol_remotedrive *rd);
/* One round trip: 0 when the server answers and has this drive index. */
int ol_remotedrive_ping(struct ol_remotedrive *rd);

#endif
