/* Reed-Solomon codec: parity checked against an independent GF(2^8) model,
 * every erasure pattern of up to m losses rebuilt byte-exact (sampled for the
 * wide geometries at large sizes), odd unit sizes, sub-range decodes, the
 * decode-table cache, and argument checks. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec/codec.h"

#include "check.h"


static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(check_rnd() >> 24);
}

/* ---- an independent GF(2^8) model (polynomial 0x11d, as ISA-L) ---- */

static uint8_t gmul(uint8_t a, uint8_t b)
{
    uint8_t r = 0;
    for (int i = 0; i < 8; i++) {
        if (b & 1)
            r ^= a;
        uint8_t hi = a & 0x80;
        a <<= 1;
        if (hi)
            a ^= 0x1d;
        b >>= 1;
    }
    return r;
}

static uint8_t ginv(uint8_t a)
{
    for (unsigned b = 1; b < 256; b++)
        if (gmul(a, (uint8_t)b) == 1)
            return (uint8_t)b;
    return 0;
}

/* Parity byte p of unit (k + r): the Cauchy row 1 / (i ^ j), i = k + r.  This
 * pins the on-disk parity layout: if ISA-L or the codec ever changed it, the
 * shards already written would no longer decode. */
static int check_parity_model(unsigned k, unsigned m, size_t len, uint8_t **units)
{
    for (unsigned r = 0; r < m; r++) {
        uint8_t coef[OL_EC_MAX_K];
        for (unsigned j = 0; j < k; j++)
            coef[j] = ginv((uint8_t)((k + r) ^ j));
        for (size_t p = 0; p < len; p++) {
            uint8_t acc = 0;
            for (unsigned j = 0; j < k; j++)
                acc ^= gmul(coef[j], units[j][p]);
            if (acc != units[k + r][p])
                return -1;
        }
    }
    return 0;
}

/* ---- helpers ---- */

struct stripe {
    unsigned k, m;
    size_t len;
    uint8_t *orig[OL_EC_MAX_UNITS];
    uint8_t *work[OL_EC_MAX_UNITS];
};

static void stripe_init(struct stripe *s, struct ol_ec_codec *c, size_t len)
{
    s->k = ol_ec_codec_k(c);
    s->m = ol_ec_codec_m(c);
    s->len = len;
    for (unsigned i = 0; i < s->k + s->m; i++) {
        s->orig[i] = malloc(len);
        s->work[i] = malloc(len);
    }
    for (unsigned i = 0; i < s->k; i++)
        fill_random(s->orig[i], len);
    CHECK(ol_ec_encode(c, len, (const uint8_t *const *)s->orig, s->orig + s->k) == 0);
}

static void stripe_free(struct stripe *s)
{
    for (unsigned i = 0; i < s->k + s->m; i++) {
        free(s->orig[i]);
        free(s->work[i]);
    }
}

/* Loses the units in `lost`, rebuilds them, and compares every unit. */
static int try_pattern(struct ol_ec_codec *c, struct stripe *s, uint32_t lost)
{
    unsigned n = s->k + s->m;
    uint32_t all = (1u << n) - 1;
    for (unsigned i = 0; i < n; i++) {
        if (lost & (1u << i))
            memset(s->work[i], 0xa5, s->len);
        else
            memcpy(s->work[i], s->orig[i], s->len);
    }
    int rc = ol_ec_reconstruct(c, s->len, s->work, all & ~lost, all);
    if (rc != 0)
        return rc;
    for (unsigned i = 0; i < n; i++)
        if (memcmp(s->work[i], s->orig[i], s->len) != 0)
            return -1;
    return 0;
}

/* Every loss pattern of up to m units when `sample` is 0, else `sample`
 * random ones of each size 1..m. */
static void patterns(unsigned k, unsigned m, size_t len, unsigned sample)
{
    struct ol_ec_codec *c;
    CHECK(ol_ec_codec_create(k, m, &c) == 0);
    struct stripe s;
    stripe_init(&s, c, len);
    unsigned n = k + m, tried = 0, bad = 0;
    if (len <= 4096 && m > 0)
        CHECK(check_parity_model(k, m, len, s.orig) == 0);
    if (sample == 0) {
        for (uint32_t lost = 0; lost < (1u << n); lost++) {
            if ((unsigned)__builtin_popcount(lost) > m)
                continue;
            tried++;
            if (try_pattern(c, &s, lost) != 0)
                bad++;
        }
    } else {
        for (unsigned nl = 1; nl <= m; nl++) {
            for (unsigned t = 0; t < sample; t++) {
                uint32_t lost = 0;
                while ((unsigned)__builtin_popcount(lost) < nl)
                    lost |= 1u << (check_rnd() % n);
                tried++;
                if (try_pattern(c, &s, lost) != 0)
                    bad++;
            }
        }
    }
    if (bad)
        fprintf(stderr, "%u+%u len %zu: %u of %u patterns failed\n", k, m, len, bad, tried);
    CHECK(bad == 0);
    stripe_free(&s);
    ol_ec_codec_destroy(c);
}

static void test_geometry(void)
{
    CHECK(ol_ec_check_geometry(0, 0) == -EINVAL);
    CHECK(ol_ec_check_geometry(1, 0) == 0);
    CHECK(ol_ec_check_geometry(16, 4) == 0);
    CHECK(ol_ec_check_geometry(16, 5) == -EINVAL);
    CHECK(ol_ec_check_geometry(17, 0) == -EINVAL);
    CHECK(ol_ec_check_geometry(12, 8) == 0);
    CHECK(ol_ec_check_geometry(13, 8) == -EINVAL);
    CHECK(ol_ec_check_geometry(4, 9) == -EINVAL);
    struct ol_ec_codec *c = (struct ol_ec_codec *)1;
    CHECK(ol_ec_codec_create(0, 2, &c) == -EINVAL && c == NULL);
}

/* Every legal geometry: encode against the model and rebuild m random losses. */
static void test_all_geometries(void)
{
    for (unsigned k = 1; k <= OL_EC_MAX_K; k++) {
        for (unsigned m = 0; m <= OL_EC_MAX_M; m++) {
            if (ol_ec_check_geometry(k, m) != 0)
                continue;
            patterns(k, m, 67, 3);
        }
    }
}

static void test_args(void)
{
    struct ol_ec_codec *c;
    CHECK(ol_ec_codec_create(4, 2, &c) == 0);
    struct stripe s;
    stripe_init(&s, c, 100);
    /* Three losses out of 4+2: not recoverable, and nothing is written. */
    CHECK(try_pattern(c, &s, 0x7) == -ENODATA);
    /* Nothing wanted: 0 even with too few present. */
    CHECK(ol_ec_reconstruct(c, 100, s.work, 0x1, 0x1) == 0);
    CHECK(ol_ec_reconstruct(c, 100, s.work, 0x3f & ~0x1u, 0x1) == 0);
    CHECK(ol_ec_reconstruct(c, 0, s.work, 0x3e, 0x1) == -EINVAL);
    CHECK(ol_ec_reconstruct(c, 100, s.work, 0x7f, 0x1) == -EINVAL);
    CHECK(ol_ec_encode(c, 0, (const uint8_t *const *)s.orig, s.orig + 4) == -EINVAL);

    /* Only the wanted unit is written; units neither present nor wanted may be NULL. */
    uint8_t *u[6];
    for (unsigned i = 0; i < 6; i++)
        u[i] = s.work[i];
    memcpy(u[0], s.orig[0], 100);
    memcpy(u[2], s.orig[2], 100);
    memcpy(u[4], s.orig[4], 100);
    memcpy(u[5], s.orig[5], 100);
    memset(u[1], 0, 100);
    u[3] = NULL;
    CHECK(ol_ec_reconstruct(c, 100, u, 0x35, 0x2) == 0);
    CHECK(memcmp(u[1], s.orig[1], 100) == 0);
    /* A wanted unit without a buffer. */
    CHECK(ol_ec_reconstruct(c, 100, u, 0x35, 0x8) == -EINVAL);
    stripe_free(&s);
    ol_ec_codec_destroy(c);

    /* m == 0: encode is a no-op, nothing can be rebuilt. */
    CHECK(ol_ec_codec_create(3, 0, &c) == 0);
    uint8_t a[8] = {1}, b[8] = {2}, d[8] = {3};
    const uint8_t *data[3] = {a, b, d};
    uint8_t *units[3] = {a, b, d};
    CHECK(ol_ec_encode(c, 8, data, NULL) == 0);
    CHECK(ol_ec_reconstruct(c, 8, units, 0x6, 0x7) == -ENODATA);
    CHECK(ol_ec_reconstruct(c, 8, units, 0x7, 0x7) == 0);
    ol_ec_codec_destroy(c);
}

/* Byte-wise code: a sub-range of the units rebuilds from the same sub-range of
 * the others (what a degraded ranged GET does). */
static void test_subrange(void)
{
    struct ol_ec_codec *c;
    CHECK(ol_ec_codec_create(8, 4, &c) == 0);
    struct stripe s;
    stripe_init(&s, c, 65536 + 13);
    size_t off = 4099, len = 20001;
    uint8_t *u[12];
    uint32_t lost = (1u << 2) | (1u << 5) | (1u << 9);
    for (unsigned i = 0; i < 12; i++) {
        u[i] = s.work[i] + off;
        if (lost & (1u << i))
            memset(s.work[i], 0, s.len);
        else
            memcpy(s.work[i], s.orig[i], s.len);
    }
    CHECK(ol_ec_reconstruct(c, len, u, 0xfff & ~lost, lost) == 0);
    for (unsigned i = 0; i < 12; i++)
        CHECK(memcmp(s.work[i] + off, s.orig[i] + off, len) == 0);
    /* Bytes outside the range stay untouched. */
    CHECK(s.work[2][off - 1] == 0 && s.work[2][off + len] == 0);
    stripe_free(&s);
    ol_ec_codec_destroy(c);
}

/* The decode-table cache: a repeated pattern hits; more patterns than slots
 * evict, and results stay right after eviction. */
static void test_cache(void)
{
    struct ol_ec_codec *c;
    CHECK(ol_ec_codec_create(8, 4, &c) == 0);
    struct stripe s;
    stripe_init(&s, c, 333);
    struct ol_ec_codec_stats st;
    CHECK(try_pattern(c, &s, 0x3) == 0);
    CHECK(try_pattern(c, &s, 0x3) == 0);
    ol_ec_codec_stats(c, &st);
    CHECK(st.decode_misses == 1 && st.decode_hits == 1);
    /* 66 two-loss patterns, twice: the second round must miss again (32 slots). */
    for (int round = 0; round < 2; round++)
        for (unsigned a = 0; a < 12; a++)
            for (unsigned b = a + 1; b < 12; b++)
                CHECK(try_pattern(c, &s, (1u << a) | (1u << b)) == 0);
    ol_ec_codec_stats(c, &st);
    CHECK(st.decode_misses >= 1 + 66 + 66 - OL_EC_DECODE_CACHE);
    stripe_free(&s);
    ol_ec_codec_destroy(c);
}

int main(void)
{
    test_geometry();
    test_args();
    test_subrange();
    test_cache();
    test_all_geometries();

    /* Sizes around ISA-L's vector widths (16, 32, 64) and its fallbacks. */
    static const size_t small[] = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 4095};
    for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
        patterns(4, 2, small[i], 0);
        patterns(8, 4, small[i], 0);
        patterns(12, 4, small[i], small[i] <= 33 ? 0 : 40);
    }
    /* Large and odd units, 1 MiB included: every 4+2 pattern, sampled 8+4 and 12+4. */
    static const size_t large[] = {4096, 65537, 262143, 1 << 20};
    for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++) {
        patterns(4, 2, large[i], 0);
        patterns(8, 4, large[i], 6);
        patterns(12, 4, large[i], 4);
    }
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
