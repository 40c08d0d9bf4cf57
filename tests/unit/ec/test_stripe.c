/* Stripe layout against a brute-force model: the model deals the object's
 * bytes into shards one by one, stripe by stripe, and records where each byte
 * went; the layout's arithmetic must agree for every byte of every range. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec/codec.h"
#include "ec/stripe.h"

#define CHECK_RNG_SEED 0x2545f4914f6cdd1dull
#include "check.h"


struct model {
    uint64_t size;
    unsigned *shard;          /* per object byte */
    uint64_t *pos;            /* per object byte: position in its shard */
    uint64_t *stripe;         /* per object byte */
    uint64_t shard_len[OL_EC_MAX_K];
    uint64_t nstripes;
};

/* Deals bytes: a full stripe while at least k * unit bytes remain, then one
 * short stripe whose units are ceil(rest / k) long, zero-padded at the end. */
static void model_build(struct model *md, uint64_t size, uint64_t unit, unsigned k)
{
    memset(md, 0, sizeof(*md));
    md->size = size;
    md->shard = calloc(size + 1, sizeof(unsigned));
    md->pos = calloc(size + 1, sizeof(uint64_t));
    md->stripe = calloc(size + 1, sizeof(uint64_t));
    uint64_t b = 0;
    while (b < size) {
        uint64_t rest = size - b;
        uint64_t u = rest >= unit * k ? unit : (rest + k - 1) / k;
        for (unsigned j = 0; j < k; j++) {
            for (uint64_t p = 0; p < u; p++) {
                if (b < size) {
                    md->shard[b] = j;
                    md->pos[b] = md->shard_len[j];
                    md->stripe[b] = md->nstripes;
                    b++;
                }
                md->shard_len[j]++;
            }
        }
        md->nstripes++;
    }
}

static void model_free(struct model *md)
{
    free(md->shard);
    free(md->pos);
    free(md->stripe);
}

static void check_range(const struct ol_ec_layout *l, const struct model *md, uint64_t a,
                        uint64_t b)
{
    /* Walk the pieces: every byte lands where the model put it. */
    uint64_t o = a;
    unsigned steps = 0;
    int bad = 0;
    while (o < b && steps < 1000000) {
        struct ol_ec_piece p;
        if (ol_ec_layout_piece(l, o, b, &p) != 0) {
            bad = 1;
            break;
        }
        if (p.obj_off != o || p.len < 1 || p.len > b - o ||
            p.unit_off + p.len > ol_ec_layout_unit_len(l, p.stripe) ||
            p.shard_off != p.stripe * l->unit + p.unit_off)
            bad = 1;
        for (uint64_t i = 0; i < p.len && !bad; i++) {
            uint64_t x = o + i;
            if (md->shard[x] != p.shard || md->pos[x] != p.shard_off + i ||
                md->stripe[x] != p.stripe)
                bad = 1;
        }
        /* A piece stops only at a unit's end or at the range's end. */
        if (o + p.len < b && p.unit_off + p.len != ol_ec_layout_unit_len(l, p.stripe))
            bad = 1;
        o += p.len;
        steps++;
    }
    CHECK(!bad && o == b);

    /* Spans: the model's lowest and highest position per shard, and no hole. */
    for (unsigned j = 0; j < l->k; j++) {
        uint64_t lo = UINT64_MAX, hi = 0, count = 0;
        for (uint64_t x = a; x < b; x++) {
            if (md->shard[x] != j)
                continue;
            count++;
            if (md->pos[x] < lo)
                lo = md->pos[x];
            if (md->pos[x] > hi)
                hi = md->pos[x];
        }
        uint64_t so = 7, sl = 7;
        CHECK(ol_ec_layout_shard_span(l, a, b - a, j, &so, &sl) == 0);
        if (count == 0) {
            CHECK(sl == 0);
        } else {
            CHECK(so == lo && sl == hi - lo + 1);
            CHECK(count == sl); /* contiguous: one read per shard */
        }
    }
}

static void check_layout(uint64_t size, uint64_t unit, unsigned k, int exhaustive)
{
    struct ol_ec_layout l;
    struct model md;
    CHECK(ol_ec_layout_init(&l, size, unit, k) == 0);
    model_build(&md, size, unit, k);
    CHECK(l.nstripes == md.nstripes);
    for (unsigned j = 0; j < k; j++)
        CHECK(md.shard_len[j] == l.shard_bytes);
    CHECK(l.stripe_bytes == unit * k);
    /* The padding is always less than k bytes. */
    if (size > 0)
        CHECK(l.shard_bytes * k - size < k);
    if (exhaustive) {
        for (uint64_t a = 0; a < size; a++)
            for (uint64_t b = a + 1; b <= size; b++)
                check_range(&l, &md, a, b);
    } else if (size > 0) {
        check_range(&l, &md, 0, size);
        for (int t = 0; t < 40; t++) {
            uint64_t a = check_rnd() % size;
            uint64_t b = a + 1 + check_rnd() % (size - a);
            check_range(&l, &md, a, b);
        }
    }
    model_free(&md);
}

static void test_errors(void)
{
    struct ol_ec_layout l;
    CHECK(ol_ec_layout_init(&l, 10, 0, 4) == -EINVAL);
    CHECK(ol_ec_layout_init(&l, 10, 4, 0) == -EINVAL);
    CHECK(ol_ec_layout_init(&l, 10, 4, 17) == -EINVAL);
    CHECK(ol_ec_layout_init(&l, 10, (uint64_t)OL_EC_MAX_UNIT_BYTES + 1, 4) == -EINVAL);
    CHECK(ol_ec_layout_init(&l, 0, 4, 4) == 0 && l.nstripes == 0 && l.shard_bytes == 0);
    struct ol_ec_piece p;
    uint64_t so, sl;
    CHECK(ol_ec_layout_piece(&l, 0, 1, &p) == -EINVAL);
    CHECK(ol_ec_layout_shard_span(&l, 0, 0, 0, &so, &sl) == 0 && sl == 0);
    CHECK(ol_ec_layout_init(&l, 10, 4, 2) == 0);
    CHECK(ol_ec_layout_piece(&l, 3, 3, &p) == -EINVAL);
    CHECK(ol_ec_layout_piece(&l, 3, 11, &p) == -EINVAL);
    CHECK(ol_ec_layout_shard_span(&l, 5, 6, 0, &so, &sl) == -EINVAL);
    CHECK(ol_ec_layout_shard_span(&l, 0, 10, 2, &so, &sl) == -EINVAL);
}

/* The documented examples and the default unit, worked by hand. */
static void test_examples(void)
{
    struct ol_ec_layout l;
    CHECK(ol_ec_layout_init(&l, 1, OL_EC_DEFAULT_UNIT_BYTES, 4) == 0);
    CHECK(l.nstripes == 1 && l.last_unit == 1 && l.shard_bytes == 1);
    /* 10 MiB + 5 bytes with 4+m: 2 full stripes (8 MiB), tail 2 MiB + 5 bytes
     * in units of 512 KiB + 2 bytes. */
    uint64_t mib = 1 << 20;
    CHECK(ol_ec_layout_init(&l, 10 * mib + 5, mib, 4) == 0);
    CHECK(l.nstripes == 3 && l.last_unit == mib / 2 + 2 && l.shard_bytes == 2 * mib + mib / 2 + 2);
    /* An exact multiple: no short stripe. */
    CHECK(ol_ec_layout_init(&l, 8 * mib, mib, 4) == 0);
    CHECK(l.nstripes == 2 && l.last_unit == mib && l.shard_bytes == 2 * mib);
    /* A range inside one unit touches one shard only. */
    uint64_t so, sl;
    CHECK(ol_ec_layout_shard_span(&l, mib + 10, 100, 1, &so, &sl) == 0 && so == 10 && sl == 100);
    CHECK(ol_ec_layout_shard_span(&l, mib + 10, 100, 0, &so, &sl) == 0 && sl == 0);
    /* A 5 TiB object: no overflow. */
    uint64_t big = 5ull << 40;
    CHECK(ol_ec_layout_init(&l, big + 3, mib, 12) == 0);
    CHECK(l.nstripes == big / (12 * mib) + 1);
    struct ol_ec_piece p;
    CHECK(ol_ec_layout_piece(&l, big + 2, big + 3, &p) == 0 && p.stripe == l.nstripes - 1);
    CHECK(ol_ec_layout_shard_span(&l, 0, big + 3, 11, &so, &sl) == 0 && so == 0);
}

int main(void)
{
    test_errors();
    test_examples();
    /* Every range of small objects, every k and several units. */
    for (unsigned k = 1; k <= 5; k++)
        for (uint64_t unit = 1; unit <= 5; unit++)
            for (uint64_t size = 0; size <= 3 * k * unit + 2 * k + 1; size++)
                check_layout(size, unit, k, 1);
    /* Larger objects, random ranges, the widest k. */
    static const unsigned ks[] = {1, 2, 3, 4, 6, 8, 10, 12, 16};
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
        for (int t = 0; t < 12; t++) {
            uint64_t unit = 1 + check_rnd() % 600;
            uint64_t size = check_rnd() % (ks[i] * unit * 5 + 50);
            check_layout(size, unit, ks[i], 0);
        }
        check_layout(ks[i] * 4096 * 3 + 1, 4096, ks[i], 0);
        check_layout(ks[i] * 4096 * 3 - 1, 4096, ks[i], 0);
    }
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
