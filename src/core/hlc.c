/* Hybrid logical clock and version ids: see hlc.h. */
#include "core/hlc.h"

#include <errno.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"

/* A CAS loop retries only when another thread moved the clock meanwhile, so
 * some thread always makes progress; this bound is far beyond any real
 * contention and exists so that a bug cannot spin forever silently. */
#define OL_HLC_MAX_CAS 1000000

/* The largest wall time a stamp can hold (48 bits of milliseconds). */
#define OL_HLC_MAX_MS ((1ull << (64 - OL_HLC_LOGICAL_BITS)) - 1)

/* 64 URL-safe characters in ASCII order (so text order equals stamp order).
 * '-' is left out on purpose: an id starting with it reads as an option to
 * command-line tools (aws s3api ... --version-id -xyz); '~' takes its place at
 * the top. */
static const char alphabet[64] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~";

static int64_t system_ms(void *ctx)
{
    (void)ctx;
    return ol_wall_ns() / 1000000;
}

void ol_hlc_init(struct ol_hlc *c, uint32_t node_id, uint32_t nonce, ol_hlc_clock_fn clock,
                 void *clock_ctx)
{
    atomic_init(&c->last, 0);
    c->node_id = node_id;
    c->nonce = nonce;
    c->max_ahead_ms = OL_HLC_MAX_AHEAD_MS_DEFAULT;
    c->clock = clock ? clock : system_ms;
    c->clock_ctx = clock_ctx;
}

static uint64_t wall_ms(struct ol_hlc *c)
{
    int64_t ms = c->clock(c->clock_ctx);
    if (ms < 0)
        return 0;
    OL_ASSERT((uint64_t)ms <= OL_HLC_MAX_MS);
    return (uint64_t)ms;
}

static inline uint64_t max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Moves the clock to max(last + 1, floor) and returns the new stamp. */
static uint64_t advance(struct ol_hlc *c, uint64_t floor)
{
    uint64_t old = atomic_load_explicit(&c->last, memory_order_relaxed);
    for (int i = 0; i < OL_HLC_MAX_CAS; i++) {
        OL_ASSERT(old != UINT64_MAX);
        uint64_t next = max64(old + 1, floor);
        if (atomic_compare_exchange_weak_explicit(&c->last, &old, next, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return next;
    }
    ol_panic(__FILE__, __LINE__, "hlc: CAS loop did not converge");
}

uint64_t ol_hlc_now(struct ol_hlc *c)
{
    return advance(c, wall_ms(c) << OL_HLC_LOGICAL_BITS);
}

int ol_hlc_update(struct ol_hlc *c, uint64_t remote, uint64_t *out)
{
    uint64_t pt = wall_ms(c);
    if (ol_hlc_stamp_ms(remote) > pt + c->max_ahead_ms)
        return -ERANGE;
    /* remote + 1 cannot wrap: its millisecond part is bounded just above. */
    uint64_t s = advance(c, max64(pt << OL_HLC_LOGICAL_BITS, remote + 1));
    if (out)
        *out = s;
    return 0;
}

static void put_be(uint8_t *p, uint64_t v, int nbytes)
{
    for (int i = nbytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        v = (v << 8) | p[i];
    return v;
}

void ol_version_id_make(struct ol_version_id *v, uint64_t stamp, uint32_t node_id,
                        uint32_t nonce)
{
    put_be(v->b, stamp, 8);
    put_be(v->b + 8, node_id, 4);
    put_be(v->b + 12, nonce, 4);
}

void ol_hlc_version_id(struct ol_hlc *c, struct ol_version_id *v)
{
    ol_version_id_make(v, ol_hlc_now(c), c->node_id, c->nonce);
}

uint64_t ol_version_id_stamp(const struct ol_version_id *v)
{
    return get_be(v->b, 8);
}

uint32_t ol_version_id_node(const struct ol_version_id *v)
{
    return (uint32_t)get_be(v->b + 8, 4);
}

int ol_version_id_cmp(const struct ol_version_id *a, const struct ol_version_id *b)
{
    return memcmp(a->b, b->b, OL_VERSION_ID_BYTES);
}

void ol_version_id_format(const struct ol_version_id *v, char out[OL_VERSION_ID_TEXT + 1])
{
    uint32_t acc = 0;
    int nbits = 0, o = 0;
    for (int i = 0; i < OL_VERSION_ID_BYTES; i++) {
        acc = (acc << 8) | v->b[i];
        nbits += 8;
        while (nbits >= 6) {
            nbits -= 6;
            out[o++] = alphabet[(acc >> nbits) & 63];
        }
    }
    /* 128 = 21 * 6 + 2: the last character holds 2 bits and 4 zero bits. */
    OL_ASSERT(nbits == 2 && o == OL_VERSION_ID_TEXT - 1);
    out[o++] = alphabet[(acc << 4) & 63];
    out[o] = '\0';
}

static int decode_char(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'Z')
        return 10 + (ch - 'A');
    if (ch == '_')
        return 36;
    if (ch >= 'a' && ch <= 'z')
        return 37 + (ch - 'a');
    if (ch == '~')
        return 63;
    return -1;
}

int ol_version_id_parse(struct ol_version_id *v, const char *s, size_t len)
{
    if (len != OL_VERSION_ID_TEXT)
        return -EINVAL;
    struct ol_version_id t;
    uint32_t acc = 0;
    int nbits = 0, o = 0;
    for (size_t i = 0; i < len; i++) {
        int d = decode_char(s[i]);
        if (d < 0)
            return -EINVAL;
        if (i == len - 1) {
            /* Canonical form only: one text per id. */
            if (d & 15)
                return -EINVAL;
            d >>= 4;
            acc = (acc << 2) | (uint32_t)d;
            nbits += 2;
        } else {
            acc = (acc << 6) | (uint32_t)d;
            nbits += 6;
        }
        if (nbits >= 8) {
            nbits -= 8;
            t.b[o++] = (uint8_t)(acc >> nbits);
        }
    }
    OL_ASSERT(o == OL_VERSION_ID_BYTES && nbits == 0);
    *v = t;
    return 0;
}
