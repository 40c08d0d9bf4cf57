/* Authentication of the drive protocol (net/wire.h): every message, request
 * and reply, carries a MAC in its header, made with the cluster key
 * (cluster/key.h).
 *
 *   mac = the first 16 bytes of HMAC-SHA256(key, header || control bytes),
 *         computed with the header's mac field zeroed.
 *
 * The bulk data is covered through the header's data_crc (CRC32C of the
 * data; a receiver checks it before it uses the bytes), so a MAC costs a
 * pass over the header and the control bytes only, never over shard data.
 * A CRC is no MAC on its own, but an attacker cannot choose data whose CRC
 * differs from the one the MAC vouches for.
 *
 * Replays.  A request's `hlc` (its sender's clock, ms in its high bits) is
 * under the MAC, and a receiver refuses a request whose stamp is further
 * than OL_NET_AUTH_WINDOW_MS (15 minutes) from its own wall clock: a captured request
 * cannot be replayed after that.  Within the window it can (the drive
 * protocol holds no per-connection nonce); the ops are written so that a
 * replayed write or delete of the same version changes nothing that a
 * caller relies on, but the protocol is not a defence against an on-path
 * attacker, who can also read the data: it keeps off anyone who can reach
 * the port without the key.  No encryption: the UCX ports belong on a private
 * network (docs/ARCHITECTURE.md, "Security on the wire").
 *
 * Threads: pure functions of their arguments (SHA-256 on the calling
 * thread's context, core/sha256.h).
 */
#ifndef OL_NET_AUTH_H
#define OL_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/wire.h"

enum {
    OL_NET_KEY_BYTES = 32,
    /* How far a message's stamp may be from the receiver's wall clock, as
     * SigV4 allows a request's date.  Wider than the HLC's max_ahead_ms (5
     * minutes): a peer whose clock is off by more than that is still
     * served (its stamp is not adopted, net/net.h "Clock"); one off by more
     * than this is refused with its messages. */
    OL_NET_AUTH_WINDOW_MS = 15 * 60 * 1000,
};

/* Writes h->mac for header h (its other fields final) and ctl. */
void ol_wire_sign(const uint8_t key[OL_NET_KEY_BYTES], struct ol_wire_hdr *h, const void *ctl,
                  size_t ctl_len);
/* True when h->mac is right for h and ctl (compared in constant time). */
bool ol_wire_verify(const uint8_t key[OL_NET_KEY_BYTES], const struct ol_wire_hdr *h,
                    const void *ctl, size_t ctl_len);
/* True when a stamp (an HLC, core/hlc.h) is within the window of now_ms. */
bool ol_wire_fresh(uint64_t hlc, uint64_t now_ms);

#endif
