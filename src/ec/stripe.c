/* Stripe layout arithmetic: see stripe.h for the layout itself. */
#include "ec/stripe.h"

#include <errno.h>
#include <stdbool.h>

#include "core/log.h"
#include "ec/codec.h"

int ol_ec_layout_init(struct ol_ec_layout *l, uint64_t size, uint64_t unit, unsigned k)
{
    if (k < 1 || k > OL_EC_MAX_K || unit < 1 || unit > OL_EC_MAX_UNIT_BYTES)
        return -EINVAL;
    l->size = size;
    l->unit = unit;
    l->k = k;
    l->stripe_bytes = unit * k;
    /* size / stripe_bytes rounded up, without overflowing near UINT64_MAX. */
    l->nstripes = size / l->stripe_bytes + (size % l->stripe_bytes != 0);
    if (l->nstripes == 0) {
        l->last_unit = 0;
        l->shard_bytes = 0;
        return 0;
    }
    uint64_t tail = size - (l->nstripes - 1) * l->stripe_bytes;
    OL_ASSERT(tail >= 1 && tail <= l->stripe_bytes);
    l->last_unit = tail / k + (tail % k != 0);
    l->shard_bytes = (l->nstripes - 1) * unit + l->last_unit;
    return 0;
}

uint64_t ol_ec_layout_unit_len(const struct ol_ec_layout *l, uint64_t s)
{
    OL_ASSERT(s < l->nstripes);
    return s + 1 == l->nstripes ? l->last_unit : l->unit;
}

int ol_ec_layout_piece(const struct ol_ec_layout *l, uint64_t off, uint64_t end,
                       struct ol_ec_piece *out)
{
    if (off >= end || end > l->size)
        return -EINVAL;
    uint64_t s = off / l->stripe_bytes;
    uint64_t w = off - s * l->stripe_bytes;
    uint64_t u = ol_ec_layout_unit_len(l, s);
    uint64_t j = w / u;
    OL_ASSERT(j < l->k);
    out->obj_off = off;
    out->stripe = s;
    out->shard = (unsigned)j;
    out->unit_off = w % u;
    out->shard_off = s * l->unit + out->unit_off;
    out->len = u - out->unit_off;
    if (out->len > end - off)
        out->len = end - off;
    return 0;
}

/* Intersects object bytes [a, b) with unit j of stripe s; on a non-empty
 * intersection gives its first and last byte as shard positions. */
static bool unit_isect(const struct ol_ec_layout *l, uint64_t s, unsigned j, uint64_t a,
                       uint64_t b, uint64_t *first, uint64_t *last)
{
    if (s >= l->nstripes)
        return false;
    uint64_t u = ol_ec_layout_unit_len(l, s);
    uint64_t ustart = s * l->stripe_bytes + j * u;
    uint64_t uend = ustart + u;
    if (uend > l->size)
        uend = l->size; /* the zero padding is not part of the object */
    uint64_t lo = a > ustart ? a : ustart;
    uint64_t hi = b < uend ? b : uend;
    if (lo >= hi)
        return false;
    *first = s * l->unit + (lo - ustart);
    *last = s * l->unit + (hi - 1 - ustart);
    return true;
}

int ol_ec_layout_shard_span(const struct ol_ec_layout *l, uint64_t off, uint64_t len,
                            unsigned shard, uint64_t *shard_off, uint64_t *shard_len)
{
    if (shard >= l->k || off > l->size || len > l->size - off)
        return -EINVAL;
    *shard_off = 0;
    *shard_len = 0;
    if (len == 0)
        return 0;
    uint64_t a = off, b = off + len;
    uint64_t sa = a / l->stripe_bytes, sb = (b - 1) / l->stripe_bytes;
    uint64_t first, last, unused;
    /* Stripes strictly between sa and sb are covered whole, so the first
     * touched unit of this shard is in stripe sa or sa + 1, and the last one in
     * sb or sb - 1. */
    if (!unit_isect(l, sa, shard, a, b, &first, &unused) &&
        !(sa + 1 <= sb && unit_isect(l, sa + 1, shard, a, b, &first, &unused)))
        return 0;
    bool found = unit_isect(l, sb, shard, a, b, &unused, &last) ||
                 (sb >= sa + 1 && unit_isect(l, sb - 1, shard, a, b, &unused, &last));
    OL_ASSERT(found && last >= first);
    *shard_off = first;
    *shard_len = last - first + 1;
    return 0;
}
