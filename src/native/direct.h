/* Direct reads: the node's side of a client that reads an object's shards
 * straight from the nodes that hold them (docs/PROTOCOL.md "Direct reads",
 * native/proto.h OL_COP_LAYOUT and OL_COP_SHARD_GET).
 *
 * LAYOUT resolves the object as a GET does (the native port opens its
 * reader, authorized as a GET) and tells the client where each shard of
 * that version lives: the erasure set's index, the version id, k, m, the
 * stripe unit and the stored size (a client maps object bytes to shard
 * bytes with ec/stripe.h), and per shard index the native address of the
 * node whose drive holds it.  SHARD_GET then reads bytes of one shard of
 * that version from a drive of the node that answers it; the drive
 * verifies its checksums, and a drive that holds another version, or
 * another shard index, answers nothing.
 *
 * What is not read directly (LAYOUT answers "not direct", the client uses
 * GET): one drive, encrypted objects (the shards hold sealed bytes),
 * multipart manifests (the parts are other keys), objects written before
 * blobs (their metadata leads the bytes).  SHARD_GET refuses the same by
 * the version's stored etag field, whatever LAYOUT said.
 *
 * Threads: any thread that may call the drives (the native port's
 * workers); nothing here keeps state.
 */
#ifndef OL_NATIVE_DIRECT_H
#define OL_NATIVE_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hlc.h"
#include "net/wire.h"

struct ol_deploy;
struct ol_obj_reader;

/* The native address ("host:port") of cluster node `node`: 0 with it in
 * out, or a negative code (down, unknown, no native port).  May block (an
 * HTTP round trip to a node not asked yet). */
typedef int (*ol_native_node_addr_fn)(void *arg, const char *node, char out[128]);

enum {
    /* What ol_native_layout_encode appends, at most. */
    OL_NATIVE_LAYOUT_MAX = 1 + 4 + 16 + 1 + 1 + 4 + 8 + 20 * (1 + 4 + 128),
};

/* Appends LAYOUT's reply after the object info: u8 0 (not direct) when the
 * reader's bytes cannot be read from the shards (above) or node_addr is
 * NULL (one node: GET is as direct as it gets), else u8 1 and the layout of
 * native/proto.h.  A shard whose node's address is not known is
 * OL_NATIVE_SHARD_MISSING.  0 or -EMSGSIZE (w too small). */
int ol_native_layout_encode(struct ol_deploy *dp, const struct ol_obj_reader *rd,
                            ol_native_node_addr_fn node_addr, void *arg, struct ol_wbuf *w);

/* Reads len bytes at off of shard `shard` of version vid of bucket/key
 * from this node's drive of erasure set `set` that holds it, into buf.
 * *newest (may be NULL) says whether vid is that drive's newest version of
 * the key (the caller's authorization of a read by version id).  Returns 0
 * or -OL_ENOKEY (no drive of this node holds that shard of that version, a
 * delete marker), -ENOTSUP (an encrypted object, a manifest, leading
 * metadata), -EINVAL (set out of range, a range past the shard's end),
 * -OL_ECORRUPT (failed the drive's checksums), a drive's error. */
int ol_native_shard_read(struct ol_deploy *dp, unsigned set, const char *bucket, const char *key,
                         size_t klen, const struct ol_version_id *vid, unsigned shard, uint64_t off,
                         size_t len, void *buf, bool *newest);

#endif
