/* Stripe layout: where each byte of an erasure-coded object lives.
 *
 * An object of `size` bytes is cut into stripes of k data units of `unit`
 * bytes each (1 MiB by default); the codec adds m parity units per stripe.
 * Shard j (0..k+m-1) is the concatenation of unit j of every stripe, in
 * stripe order, and is stored on one drive.
 *
 *   stripe_bytes = k * unit
 *   nstripes     = ceil(size / stripe_bytes)             (0 for an empty object)
 *   tail         = size - (nstripes - 1) * stripe_bytes   (1..stripe_bytes)
 *   last_unit    = ceil(tail / k)
 *   shard_bytes  = (nstripes - 1) * unit + last_unit      (every shard, parity too)
 *
 * The last stripe is shortened, not padded to a full stripe: its k units are
 * last_unit bytes each, and the tail's bytes fill them in order (unit 0 first).
 * The k * last_unit - tail < k bytes left over at the end of the last data
 * unit(s) are zeros; they are written to the data shards and are part of the
 * parity computation, so every shard of an object has the same length and a
 * stripe always encodes and decodes as k equal units.  A 1-byte object with
 * k = 4 thus has four 1-byte data shards (the byte and three zeros).
 *
 * Byte `off` of the object is in stripe s = off / stripe_bytes; within it at
 * w = off - s * stripe_bytes, in data unit j = w / u (u = unit, or last_unit
 * in the last stripe), at byte w % u of the unit, which is byte s * unit +
 * w % u of shard j.
 *
 * For a fixed shard, object position grows with shard position, so the bytes
 * of one shard that a byte range of the object needs are one contiguous span
 * of the shard (ol_ec_layout_shard_span): a ranged GET reads one span from each
 * data shard it touches and nothing from the others.  Because the code is
 * byte-wise, a lost span [x, y) of shard j is rebuilt from the same span
 * [x, y) of any k other shards.
 *
 * Everything here is pure arithmetic on 64-bit integers: no allocation, any
 * thread.
 */
#ifndef OL_EC_STRIPE_H
#define OL_EC_STRIPE_H

#include <stdint.h>

enum { OL_EC_DEFAULT_UNIT_BYTES = 1 << 20 };

struct ol_ec_layout {
    uint64_t size;          /* object bytes */
    uint64_t unit;          /* bytes per unit of a full stripe */
    unsigned k;             /* data units per stripe */
    uint64_t stripe_bytes;  /* k * unit */
    uint64_t nstripes;
    uint64_t last_unit;     /* unit length of the last stripe (0 if no stripes) */
    uint64_t shard_bytes;   /* length of every shard */
};

/* Computes the layout.  -EINVAL unless 1 <= k <= OL_EC_MAX_K and
 * 1 <= unit <= OL_EC_MAX_UNIT_BYTES. */
int ol_ec_layout_init(struct ol_ec_layout *l, uint64_t size, uint64_t unit, unsigned k);

/* Unit length of stripe s (unit, or last_unit for the last one). */
uint64_t ol_ec_layout_unit_len(const struct ol_ec_layout *l, uint64_t s);

/* One piece of a byte range: object bytes [obj_off, obj_off + len) are bytes
 * [shard_off, shard_off + len) of data shard `shard`, all in stripe `stripe`. */
struct ol_ec_piece {
    uint64_t obj_off;
    uint64_t stripe;
    unsigned shard;
    uint64_t unit_off;   /* offset inside the unit */
    uint64_t shard_off;  /* stripe * unit + unit_off */
    uint64_t len;        /* >= 1, never crossing a unit's end */
};

/* The piece that starts at object byte `off` and ends at the unit's end or at
 * `end`, whichever is first.  Walk a range with
 *   for (o = off; o < end; o += p.len) ol_ec_layout_piece(l, o, end, &p);
 * -EINVAL unless off < end <= size. */
int ol_ec_layout_piece(const struct ol_ec_layout *l, uint64_t off, uint64_t end,
                       struct ol_ec_piece *out);

/* The contiguous span of data shard `shard` that object bytes [off, off + len)
 * need: *shard_off and *shard_len (0 when the range does not touch the shard).
 * -EINVAL unless off + len <= size and shard < k. */
int ol_ec_layout_shard_span(const struct ol_ec_layout *l, uint64_t off, uint64_t len,
                            unsigned shard, uint64_t *shard_off, uint64_t *shard_len);

#endif
