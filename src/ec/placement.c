/* Placement and SipHash-2-4: see placement.h. */
#include "ec/placement.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"

/* ---- SipHash-2-4 (Aumasson & Bernstein, 2012) ---- */

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void sip_round(struct ol_siphash *s)
{
    s->v0 += s->v1;
    s->v1 = rotl(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = rotl(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = rotl(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = rotl(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = rotl(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = rotl(s->v2, 32);
}

static inline void sip_block(struct ol_siphash *s, uint64_t m)
{
    s->v3 ^= m;
    sip_round(s); /* c = 2 compression rounds */
    sip_round(s);
    s->v0 ^= m;
}

void ol_siphash_init(struct ol_siphash *s, const uint8_t key[16])
{
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    s->v0 = 0x736f6d6570736575ull ^ k0;
    s->v1 = 0x646f72616e646f6dull ^ k1;
    s->v2 = 0x6c7967656e657261ull ^ k0;
    s->v3 = 0x7465646279746573ull ^ k1;
    s->tail = 0;
    s->ntail = 0;
    s->total = 0;
}

void ol_siphash_update(struct ol_siphash *s, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    s->total += len;
    /* Top up a partial block first, then whole blocks, then keep the rest. */
    while (len > 0 && s->ntail > 0) {
        s->tail |= (uint64_t)*p++ << (8 * s->ntail);
        len--;
        if (++s->ntail == 8) {
            sip_block(s, s->tail);
            s->tail = 0;
            s->ntail = 0;
        }
    }
    for (; len >= 8; len -= 8, p += 8)
        sip_block(s, load_le64(p));
    for (size_t i = 0; i < len; i++)
        s->tail |= (uint64_t)p[i] << (8 * i);
    s->ntail = (unsigned)len + s->ntail;
    OL_ASSERT(s->ntail < 8);
}

uint64_t ol_siphash_final(struct ol_siphash *s)
{
    uint64_t b = (s->total & 0xff) << 56 | s->tail;
    sip_block(s, b);
    s->v2 ^= 0xff;
    for (int i = 0; i < 4; i++) /* d = 4 finalization rounds */
        sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t ol_siphash24(const uint8_t key[16], const void *buf, size_t len)
{
    struct ol_siphash s;
    ol_siphash_init(&s, key);
    ol_siphash_update(&s, buf, len);
    return ol_siphash_final(&s);
}

/* ---- placement ---- */

/* Parity for a chosen set size (MinIO's defaults). */
static unsigned default_parity(unsigned set_size)
{
    if (set_size <= 1)
        return 0;
    if (set_size <= 3)
        return 1;
    if (set_size <= 5)
        return 2;
    if (set_size <= 7)
        return 3;
    return 4;
}

int ol_ec_placement_init(struct ol_ec_placement *p, unsigned ndrives, unsigned k, unsigned m,
                         const uint8_t deployment_id[16])
{
    memset(p, 0, sizeof(*p));
    if (ndrives < 1 || ndrives > OL_EC_MAX_DRIVES)
        return -EINVAL;
    if (k == 0 && m == 0) {
        unsigned min_size = ndrives < 4 ? ndrives : 4, size = 0;
        for (unsigned s = 16; s >= min_size && s >= 1; s--) {
            if (ndrives % s == 0) {
                size = s;
                break;
            }
        }
        if (size == 0)
            return -EINVAL;
        m = default_parity(size);
        k = size - m;
    }
    int rc = ol_ec_check_geometry(k, m);
    if (rc < 0)
        return rc;
    if (ndrives % (k + m) != 0)
        return -EINVAL;
    p->ndrives = ndrives;
    p->k = k;
    p->m = m;
    p->set_size = k + m;
    p->nsets = ndrives / (k + m);
    memcpy(p->key, deployment_id, 16);
    return 0;
}

void ol_ec_place(const struct ol_ec_placement *p, const char *bucket, const char *key,
                 size_t key_len, struct ol_ec_target *out)
{
    OL_ASSERT(p->nsets >= 1 && p->set_size >= 1 && p->set_size <= OL_EC_MAX_UNITS);
    struct ol_siphash s;
    ol_siphash_init(&s, p->key);
    ol_siphash_update(&s, bucket, strlen(bucket));
    ol_siphash_update(&s, "/", 1);
    ol_siphash_update(&s, key, key_len);
    uint64_t h = ol_siphash_final(&s);
    /* Mixed-radix digits of h: for a uniform h, set and rotation are
     * (nearly) uniform and independent of each other. */
    out->hash = h;
    out->set = (unsigned)(h % p->nsets);
    out->rotation = (unsigned)((h / p->nsets) % p->set_size);
    unsigned base = out->set * p->set_size;
    for (unsigned i = 0; i < p->set_size; i++)
        out->drive[i] = base + (i + out->rotation) % p->set_size;
    for (unsigned i = p->set_size; i < OL_EC_MAX_UNITS; i++)
        out->drive[i] = UINT32_MAX;
}
