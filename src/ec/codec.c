/* Reed-Solomon through ISA-L: see codec.h for the contract. */
#include "ec/codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "core/log.h"

/* ISA-L expands each matrix coefficient into a 32-byte multiplication table. */
#define OL_EC_TBL_BYTES 32

struct ol_ec_decode_entry {
    uint32_t src;          /* the k units read (bit mask) */
    uint32_t out;          /* the units rebuilt (bit mask); 0 = empty slot */
    uint64_t last_used;    /* codec tick of the last hit, for LRU */
    uint8_t tables[OL_EC_TBL_BYTES * OL_EC_MAX_K * OL_EC_MAX_M];
};

struct ol_ec_codec {
    unsigned k, m;
    uint64_t tick;
    struct ol_ec_codec_stats stats;
    /* The (k+m) x k generator: identity on top, Cauchy rows below. */
    uint8_t matrix[OL_EC_MAX_UNITS * OL_EC_MAX_K];
    uint8_t enc_tables[OL_EC_TBL_BYTES * OL_EC_MAX_K * OL_EC_MAX_M];
    struct ol_ec_decode_entry cache[OL_EC_DECODE_CACHE];
};

int ol_ec_check_geometry(unsigned k, unsigned m)
{
    if (k < 1 || k > OL_EC_MAX_K || m > OL_EC_MAX_M || k + m > OL_EC_MAX_UNITS)
        return -EINVAL;
    return 0;
}

int ol_ec_codec_create(unsigned k, unsigned m, struct ol_ec_codec **out)
{
    *out = NULL;
    int rc = ol_ec_check_geometry(k, m);
    if (rc < 0)
        return rc;
    struct ol_ec_codec *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->k = k;
    c->m = m;
    gf_gen_cauchy1_matrix(c->matrix, (int)(k + m), (int)k);
    if (m > 0)
        ec_init_tables((int)k, (int)m, c->matrix + k * k, c->enc_tables);
    *out = c;
    return 0;
}

void ol_ec_codec_destroy(struct ol_ec_codec *c)
{
    free(c);
}

unsigned ol_ec_codec_k(const struct ol_ec_codec *c)
{
    return c->k;
}

unsigned ol_ec_codec_m(const struct ol_ec_codec *c)
{
    return c->m;
}

int ol_ec_encode(const struct ol_ec_codec *c, size_t unit_bytes, const uint8_t *const *data,
                 uint8_t *const *parity)
{
    if (unit_bytes < 1 || unit_bytes > OL_EC_MAX_UNIT_BYTES)
        return -EINVAL;
    if (c->m == 0)
        return 0;
    /* ISA-L's prototypes are not const-correct; it only reads data and the tables. */
    ec_encode_data((int)unit_bytes, (int)c->k, (int)c->m, (unsigned char *)c->enc_tables,
                   (unsigned char **)data, (unsigned char **)parity);
    return 0;
}

/* Builds the decode tables that compute the `out` units from the `src` units. */
static void build_decode(const struct ol_ec_codec *c, uint32_t src, uint32_t out,
                         uint8_t *tables)
{
    unsigned k = c->k, n = k + c->m;
    uint8_t sub[OL_EC_MAX_K * OL_EC_MAX_K], inv[OL_EC_MAX_K * OL_EC_MAX_K];
    uint8_t rows[OL_EC_MAX_M * OL_EC_MAX_K];

    /* The generator rows of the k source units: sub * data = sources. */
    unsigned r = 0;
    for (unsigned i = 0; i < n; i++) {
        if (src & (1u << i)) {
            memcpy(sub + r * k, c->matrix + i * k, k);
            r++;
        }
    }
    OL_ASSERT(r == k);
    /* A Cauchy-based systematic generator keeps every k x k submatrix
     * invertible, so failure here means memory corruption, not bad input. */
    int bad = gf_invert_matrix(sub, inv, (int)k);
    OL_ASSERT(bad == 0);

    /* data = inv * sources.  A lost data unit d is row d of inv; a lost parity
     * unit p is its generator row times inv (parity = row * data). */
    unsigned nout = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!(out & (1u << i)))
            continue;
        uint8_t *row = rows + nout * k;
        if (i < k) {
            memcpy(row, inv + i * k, k);
        } else {
            const uint8_t *g = c->matrix + i * k;
            for (unsigned j = 0; j < k; j++) {
                uint8_t acc = 0;
                for (unsigned l = 0; l < k; l++)
                    acc ^= gf_mul(g[l], inv[l * k + j]);
                row[j] = acc;
            }
        }
        nout++;
    }
    ec_init_tables((int)k, (int)nout, rows, tables);
}

/* Returns the cached tables for (src, out), building them on a miss in the
 * least recently used slot. */
static const uint8_t *decode_tables(struct ol_ec_codec *c, uint32_t src, uint32_t out)
{
    struct ol_ec_decode_entry *victim = &c->cache[0];
    c->tick++;
    for (unsigned i = 0; i < OL_EC_DECODE_CACHE; i++) {
        struct ol_ec_decode_entry *e = &c->cache[i];
        if (e->out == out && e->src == src) {
            e->last_used = c->tick;
            c->stats.decode_hits++;
            return e->tables;
        }
        if (e->last_used < victim->last_used)
            victim = e;
    }
    c->stats.decode_misses++;
    build_decode(c, src, out, victim->tables);
    victim->src = src;
    victim->out = out;
    victim->last_used = c->tick;
    return victim->tables;
}

int ol_ec_reconstruct(struct ol_ec_codec *c, size_t unit_bytes, uint8_t *const *units,
                      uint32_t present, uint32_t want)
{
    unsigned k = c->k, n = k + c->m;
    uint32_t all = (n == 32) ? ~0u : ((1u << n) - 1);
    if (unit_bytes < 1 || unit_bytes > OL_EC_MAX_UNIT_BYTES || (present & ~all))
        return -EINVAL;
    uint32_t out = want & all & ~present;
    if (out == 0)
        return 0;
    if ((unsigned)__builtin_popcount(present) < k)
        return -ENODATA;

    /* Read the first k present units: data units come first, so a stripe that
     * lost only parity is rebuilt from its data alone. */
    uint8_t *srcs[OL_EC_MAX_K], *dsts[OL_EC_MAX_M];
    uint32_t src = 0;
    unsigned ns = 0, nd = 0;
    for (unsigned i = 0; i < n; i++) {
        if ((present & (1u << i)) && ns < k) {
            src |= 1u << i;
            srcs[ns++] = units[i];
        } else if (out & (1u << i)) {
            dsts[nd++] = units[i];
        }
    }
    OL_ASSERT(ns == k && nd >= 1 && nd <= c->m);
    for (unsigned i = 0; i < ns; i++)
        if (!srcs[i])
            return -EINVAL;
    for (unsigned i = 0; i < nd; i++)
        if (!dsts[i])
            return -EINVAL;
    const uint8_t *tables = decode_tables(c, src, out);
    ec_encode_data((int)unit_bytes, (int)k, (int)nd, (unsigned char *)tables, srcs, dsts);
    return 0;
}

void ol_ec_codec_stats(const struct ol_ec_codec *c, struct ol_ec_codec_stats *out)
{
    *out = c->stats;
}
