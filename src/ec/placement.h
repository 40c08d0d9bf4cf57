/* Placement: which drives hold an object's shards.
 *
 * The n drives of a deployment (numbered 0..n-1 in cluster-map order) are
 * grouped into n / (k+m) erasure sets of k+m consecutive drives: set s is
 * drives s*(k+m) .. s*(k+m)+k+m-1.  (The cluster map orders drives so that the
 * members of a set sit on different nodes when there are enough nodes.)
 *
 * n must be a multiple of k+m.  A remainder is refused (-EINVAL), not left
 * idle: drives that silently hold nothing are capacity the operator thinks
 * they have.  With k = m = 0 the geometry is chosen: the set size is the
 * largest divisor of n that is at most 16 and at least min(n, 4) (refused if
 * there is none, e.g. n = 17: say k and m, or change n), and the parity by
 * set size: 1 -> 1+0, 2 -> 1+1, 3 -> 2+1, 4..5 -> m = 2, 6..7 -> m = 3,
 * 8..16 -> m = 4 (MinIO's defaults): a set survives losing any m drives.
 *
 * An object goes to set  h % nsets  and its shard i to drive
 *   set_base + (i + r) % (k+m),   r = (h / nsets) % (k+m)
 * where h = SipHash-2-4(key = deployment id, "bucket/key").  The rotation r
 * spreads data and parity shards evenly over the set's drives, so no drive is
 * the parity drive of every object.  Bucket names cannot contain '/', so
 * "bucket/key" is unambiguous.
 *
 * SipHash-2-4 is implemented here (about 60 lines) rather than
 * through OpenSSL's EVP_MAC "SIPHASH": placement runs on every request, and
 * EVP_MAC needs a provider fetch and a context allocation per call, while this
 * one is allocation-free, lock-free and usable by the client library (which
 * must compute the same placement) without libcrypto.  The unit test checks it
 * against OpenSSL's and against the reference vectors.  A keyed hash keeps
 * clients from crafting keys that all land on one set.
 *
 * Placement is part of the on-disk contract: changing the hash, the key, the
 * formula or n moves objects.  Growing a deployment adds a new pool of sets
 * with its own placement, not a rehash (not built yet).
 */
#ifndef OL_EC_PLACEMENT_H
#define OL_EC_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "ec/codec.h"

/* SipHash-2-4 of (buf, len) with a 16-byte key: the reference algorithm
 * (Aumasson & Bernstein); the 8-byte output read as a little-endian integer. */
uint64_t ol_siphash24(const uint8_t key[16], const void *buf, size_t len);

/* An incremental SipHash-2-4 (same result as one call over the concatenation). */
struct ol_siphash {
    uint64_t v0, v1, v2, v3;
    uint64_t tail;       /* pending bytes, little-endian */
    unsigned ntail;      /* 0..7 */
    uint64_t total;      /* bytes absorbed */
};
void ol_siphash_init(struct ol_siphash *s, const uint8_t key[16]);
void ol_siphash_update(struct ol_siphash *s, const void *buf, size_t len);
uint64_t ol_siphash_final(struct ol_siphash *s);

enum { OL_EC_MAX_DRIVES = 4096 };

struct ol_ec_placement {
    unsigned ndrives;
    unsigned k, m;
    unsigned set_size;   /* k + m */
    unsigned nsets;
    uint8_t key[16];     /* the deployment id */
};

/* Groups n drives (1..OL_EC_MAX_DRIVES) into sets.  k = m = 0 picks the
 * geometry (see above); otherwise ol_ec_check_geometry(k, m) must pass and
 * k + m divide n.  -EINVAL. */
int ol_ec_placement_init(struct ol_ec_placement *p, unsigned ndrives, unsigned k, unsigned m,
                         const uint8_t deployment_id[16]);

/* Where an object's shards live. */
struct ol_ec_target {
    uint64_t hash;
    unsigned set;                        /* 0..nsets-1 */
    unsigned rotation;                   /* 0..set_size-1 */
    unsigned drive[OL_EC_MAX_UNITS];     /* shard i -> drive number (0..n-1) */
};
void ol_ec_place(const struct ol_ec_placement *p, const char *bucket, const char *key,
                 size_t key_len, struct ol_ec_target *out);

#endif
