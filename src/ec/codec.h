/* Reed-Solomon erasure coding over GF(2^8), through ISA-L.
 *
 * A codec for (k, m) turns k data units into m parity units so that any k of
 * the k+m units rebuild the others.  Units are numbered 0..k-1 (data) and
 * k..k+m-1 (parity); every unit of one call has the same length.  The code is
 * systematic (the data units are stored as they are) and its generator is a
 * Cauchy matrix (gf_gen_cauchy1_matrix), so every k x k submatrix is
 * invertible: every pattern of up to m lost units is recoverable.  (ISA-L's
 * Vandermonde-style gf_gen_rs_matrix does not guarantee that for all k, m.)
 *
 * The code works byte by byte: byte p of each parity unit depends only on byte p
 * of the data units.  So a sub-range [x, x+n) of the units can be encoded or
 * rebuilt on its own, with unit_bytes = n and the pointers advanced by x; a
 * degraded ranged read rebuilds only the bytes it needs.  Any length works,
 * 1 byte included (ISA-L falls back to its portable code below 16/32 bytes).
 *
 * The byte layout of parity is part of the on-disk format: changing the
 * matrix (generator, or k/m semantics) makes existing shards unreadable.
 *
 * Threads: encode only reads the codec and may run on any number of threads.
 * ol_ec_reconstruct updates the codec's cache of decode tables, so one codec
 * must not reconstruct on two threads at once: give each loop thread its own
 * codec (thread-per-core; the tables are small), no lock needed.
 *
 * Memory: everything is allocated by ol_ec_codec_create (about 150 KiB for the
 * largest geometry, mostly the bounded decode-table cache); encode and
 * reconstruct never allocate.
 *
 * Errors: 0, -EINVAL (bad geometry or arguments), -ENOMEM, -ENODATA (fewer
 * than k units present: the data cannot be rebuilt).
 */
#ifndef OL_EC_CODEC_H
#define OL_EC_CODEC_H

#include <stddef.h>
#include <stdint.h>

enum {
    OL_EC_MAX_K = 16,
    OL_EC_MAX_M = 8,
    OL_EC_MAX_UNITS = 20,                  /* k + m */
    OL_EC_MAX_UNIT_BYTES = 1u << 30,       /* ISA-L takes an int length */
    OL_EC_DECODE_CACHE = 32,               /* decode-table sets kept per codec */
};

struct ol_ec_codec;

/* Checks a geometry: 1 <= k <= 16, 0 <= m <= 8, k + m <= 20.  0 or -EINVAL. */
int ol_ec_check_geometry(unsigned k, unsigned m);

int ol_ec_codec_create(unsigned k, unsigned m, struct ol_ec_codec **out);
void ol_ec_codec_destroy(struct ol_ec_codec *c);
unsigned ol_ec_codec_k(const struct ol_ec_codec *c);
unsigned ol_ec_codec_m(const struct ol_ec_codec *c);

/* Computes the m parity units from the k data units, each unit_bytes long
 * (1..OL_EC_MAX_UNIT_BYTES).  data[0..k-1] and parity[0..m-1] are the
 * caller's buffers; parity must not overlap data.  A no-op when m == 0. */
int ol_ec_encode(const struct ol_ec_codec *c, size_t unit_bytes, const uint8_t *const *data,
                 uint8_t *const *parity);

/* Rebuilds lost units.  units[0..k+m-1] are the caller's buffers, one per
 * unit, each unit_bytes long.  `present` is a bit mask of the units whose
 * buffers hold valid bytes (bit i = unit i); `want` the units to rebuild
 * (bits already in `present` are ignored, so want = all bits rebuilds every
 * missing unit).  Buffers of units neither present nor wanted may be NULL.
 * Reads exactly k present units: the data units among them first, so a
 * caller that has all data units and wants nothing spends nothing.  The
 * decode tables for each (sources, wanted) pattern are cached (bounded,
 * least recently used goes first).  -ENODATA if fewer than k are present. */
int ol_ec_reconstruct(struct ol_ec_codec *c, size_t unit_bytes, uint8_t *const *units,
                      uint32_t present, uint32_t want);

/* Statistics of the decode-table cache (tests, metrics). */
struct ol_ec_codec_stats {
    uint64_t decode_hits;
    uint64_t decode_misses;   /* a matrix inversion each */
};
void ol_ec_codec_stats(const struct ol_ec_codec *c, struct ol_ec_codec_stats *out);

#endif
