/* Placement: SipHash-2-4 against the reference vectors and OpenSSL, geometry
 * choice, even spread of objects over sets and of shards over drives, and
 * stability (pinned placements that must never change). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "ec/placement.h"

#include "check.h"

#define PIN_HASH 0xbc38a0536eb9dc74ull
#define PIN_SET 4u
#define PIN_ROT 2u


static const uint8_t ref_key[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* OpenSSL's SipHash (EVP_MAC "SIPHASH", 8-byte output, little-endian). */
static int openssl_siphash(const uint8_t key[16], const uint8_t *buf, size_t len, uint64_t *out)
{
    int rc = -1;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    size_t size = 8, outl = 0;
    uint8_t md[16];
    OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                           OSSL_PARAM_construct_end()};
    if (!ctx || !EVP_MAC_init(ctx, key, 16, params) || !EVP_MAC_update(ctx, buf, len) ||
        !EVP_MAC_final(ctx, md, &outl, sizeof(md)) || outl != 8)
        goto out;
    *out = 0;
    for (int i = 7; i >= 0; i--)
        *out = (*out << 8) | md[i];
    rc = 0;
out:
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return rc;
}

static void test_siphash(void)
{
    uint8_t msg[200];
    for (unsigned i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)i;
    /* From the SipHash paper (appendix A) and its reference vectors. */
    CHECK(ol_siphash24(ref_key, msg, 0) == 0x726fdb47dd0e0e31ull);
    CHECK(ol_siphash24(ref_key, msg, 15) == 0xa129ca6149be45e5ull);
    CHECK(ol_siphash24(ref_key, msg, 1) == 0x74f839c593dc67fdull);
    CHECK(ol_siphash24(ref_key, msg, 8) == 0x93f5f5799a932462ull);
    /* OpenSSL agrees for every length, and any split of the input agrees with
     * one call. */
    int bad = 0, skipped = 0;
    for (size_t len = 0; len <= 130; len++) {
        uint64_t want = ol_siphash24(ref_key, msg, len), theirs;
        if (openssl_siphash(ref_key, msg, len, &theirs) != 0)
            skipped = 1;
        else if (theirs != want)
            bad++;
        for (size_t cut1 = 0; cut1 <= len; cut1 += 3) {
            for (size_t cut2 = cut1; cut2 <= len; cut2 += 5) {
                struct ol_siphash s;
                ol_siphash_init(&s, ref_key);
                ol_siphash_update(&s, msg, cut1);
                ol_siphash_update(&s, msg + cut1, cut2 - cut1);
                ol_siphash_update(&s, msg + cut2, len - cut2);
                if (ol_siphash_final(&s) != want)
                    bad++;
            }
        }
    }
    if (skipped)
        fprintf(stderr, "OpenSSL has no SIPHASH here; compared with the vectors only\n");
    CHECK(bad == 0);
}

static void test_geometry(void)
{
    struct ol_ec_placement p;
    static const struct {
        unsigned n, k, m, nsets;
    } autos[] = {{1, 1, 0, 1},  {2, 1, 1, 1},  {3, 2, 1, 1},  {4, 2, 2, 1},  {5, 3, 2, 1},
                 {6, 3, 3, 1},  {7, 4, 3, 1},  {8, 4, 4, 1},  {11, 7, 4, 1}, {12, 8, 4, 1},
                 {16, 12, 4, 1}, {18, 5, 4, 2}, {20, 6, 4, 2}, {24, 8, 4, 2}, {32, 12, 4, 2},
                 {64, 12, 4, 4}, {96, 12, 4, 6}};
    for (size_t i = 0; i < sizeof(autos) / sizeof(autos[0]); i++) {
        int rc = ol_ec_placement_init(&p, autos[i].n, 0, 0, ref_key);
        CHECK(rc == 0);
        if (rc != 0 || p.k != autos[i].k || p.m != autos[i].m || p.nsets != autos[i].nsets) {
            fprintf(stderr, "n=%u: got %u+%u x%u\n", autos[i].n, p.k, p.m, p.nsets);
            failures++;
        }
    }
    /* No divisor in 4..16: refused rather than sets without redundancy. */
    CHECK(ol_ec_placement_init(&p, 17, 0, 0, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, 34, 0, 0, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, 0, 0, 0, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, OL_EC_MAX_DRIVES + 1, 0, 0, ref_key) == -EINVAL);
    /* Explicit geometry: n must be a multiple of k + m. */
    CHECK(ol_ec_placement_init(&p, 12, 4, 2, ref_key) == 0 && p.nsets == 2 && p.set_size == 6);
    CHECK(ol_ec_placement_init(&p, 10, 4, 2, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, 4, 4, 2, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, 40, 16, 4, ref_key) == 0 && p.nsets == 2);
    CHECK(ol_ec_placement_init(&p, 42, 17, 4, ref_key) == -EINVAL);
    CHECK(ol_ec_placement_init(&p, 9, 0, 9, ref_key) == -EINVAL);
}

/* Pearson's statistic of counts against a uniform expectation. */
static double chi2(const unsigned *count, unsigned bins, unsigned total)
{
    double e = (double)total / bins, x = 0;
    for (unsigned i = 0; i < bins; i++)
        x += ((double)count[i] - e) * ((double)count[i] - e) / e;
    return x;
}

static void test_distribution(void)
{
    struct ol_ec_placement p;
    CHECK(ol_ec_placement_init(&p, 48, 4, 2, ref_key) == 0 && p.nsets == 8);
    enum { N = 200000 };
    static unsigned per_set[8], first_shard[48], parity[48], rot[8][6];
    char key[64];
    for (unsigned i = 0; i < N; i++) {
        int len = snprintf(key, sizeof(key), "checkpoints/step-%u/shard.safetensors", i);
        struct ol_ec_target t;
        ol_ec_place(&p, "models", key, (size_t)len, &t);
        per_set[t.set]++;
        rot[t.set][t.rotation]++;
        first_shard[t.drive[0]]++;
        for (unsigned s = p.k; s < p.set_size; s++)
            parity[t.drive[s]]++;
        /* Every shard on a distinct drive of the object's set. */
        unsigned seen = 0;
        for (unsigned s = 0; s < p.set_size; s++) {
            if (t.drive[s] / p.set_size != t.set)
                failures++;
            seen |= 1u << (t.drive[s] % p.set_size);
        }
        if (seen != (1u << p.set_size) - 1)
            failures++;
    }
    /* Thresholds sit far in the tail of chi-square (p < 1e-6 for a uniform
     * hash), yet a biased hash or a broken formula would blow through them:
     * e.g. h % 8 taken from a hash with weak low bits, or a rotation stuck at 0. */
    double x_set = chi2(per_set, 8, N);          /* 7 degrees of freedom */
    double x_first = chi2(first_shard, 48, N);   /* 47 */
    double x_par = chi2(parity, 48, N * 2);      /* 47 */
    double x_rot = 0;
    for (unsigned s = 0; s < 8; s++)
        x_rot += chi2(rot[s], 6, per_set[s]);    /* 8 x 5 = 40 */
    if (x_set > 40 || x_first > 110 || x_par > 110 || x_rot > 100)
        fprintf(stderr, "chi2: sets %.1f first %.1f parity %.1f rotation %.1f\n", x_set,
                x_first, x_par, x_rot);
    CHECK(x_set < 40);
    CHECK(x_first < 110);
    CHECK(x_par < 110);
    CHECK(x_rot < 100);

    /* Keyed: another deployment id places the same names differently (about
     * 1 in 8 stay on the same set by chance). */
    struct ol_ec_placement q;
    uint8_t other[16];
    memcpy(other, ref_key, 16);
    other[0] ^= 1;
    CHECK(ol_ec_placement_init(&q, 48, 4, 2, other) == 0);
    unsigned same = 0;
    for (unsigned i = 0; i < 8000; i++) {
        int len = snprintf(key, sizeof(key), "k%u", i);
        struct ol_ec_target a, b;
        ol_ec_place(&p, "b", key, (size_t)len, &a);
        ol_ec_place(&q, "b", key, (size_t)len, &b);
        same += a.set == b.set;
    }
    CHECK(same > 800 && same < 1200);
}

/* Placement is on-disk state: these must never change. */
static void test_stable(void)
{
    struct ol_ec_placement p;
    CHECK(ol_ec_placement_init(&p, 48, 4, 2, ref_key) == 0);
    struct ol_ec_target t, u;
    ol_ec_place(&p, "bucket", "key", 3, &t);
    /* The hash is over "bucket/key" exactly. */
    CHECK(t.hash == ol_siphash24(ref_key, "bucket/key", 10));
    ol_ec_place(&p, "bucket", "key", 3, &u);
    CHECK(memcmp(&t, &u, sizeof(t)) == 0);
    CHECK(t.set == t.hash % 8 && t.rotation == (t.hash / 8) % 6);
    for (unsigned i = 0; i < 6; i++)
        CHECK(t.drive[i] == t.set * 6 + (i + t.rotation) % 6);
    /* Key bytes after a NUL count. */
    ol_ec_place(&p, "bucket", "k\0x", 3, &u);
    CHECK(u.hash == ol_siphash24(ref_key, "bucket/k\0x", 10));
    CHECK(u.hash != t.hash);
    /* Pinned values (computed once; a change here moves every stored object). */
    ol_ec_place(&p, "photos", "2024/01/cat.jpg", 15, &t);
    if (t.hash != PIN_HASH || t.set != PIN_SET || t.rotation != PIN_ROT)
        fprintf(stderr, "pinned placement: hash %#llx set %u rotation %u\n",
                (unsigned long long)t.hash, t.set, t.rotation);
    CHECK(t.hash == PIN_HASH && t.set == PIN_SET && t.rotation == PIN_ROT);
}

int main(void)
{
    test_siphash();
    test_geometry();
    test_distribution();
    test_stable();
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
