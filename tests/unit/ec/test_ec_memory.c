/* The memory of erasure-coded PUTs (issue 10): stripe buffers sized to the
 * announced object (a 4 KiB PUT reserves KiB, not a 6 MiB stripe), grown
 * when more bytes come than announced, and correct bytes whatever the
 * announcement, also received in place; and the process-wide body memory budget (core/buf.h):
 * reservations up to the total, the per-request cap, refusal without
 * waiting outside a fiber, release. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/hlc.h"
#include "ec/eset.h"
#include "ec/memdrive.h"

#include "check.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)

static struct ol_hlc hlc;

static void gen(uint64_t seed, uint8_t *p, size_t n)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

struct set {
    struct ol_memdrive *md[6];
    struct ol_eset *es;
};

static void set_open(struct set *s, uint32_t unit)
{
    struct ol_drive drives[6];
    for (unsigned i = 0; i < 6; i++) {
        if (ol_memdrive_create(&s->md[i]) < 0)
            abort();
        drives[i] = ol_memdrive_drive(s->md[i]);
    }
    struct ol_eset_cfg cfg;
    ol_eset_cfg_default(&cfg);
    cfg.k = 4;
    cfg.m = 2;
    cfg.unit_bytes = unit;
    cfg.drives = drives;
    cfg.hlc = &hlc;
    memcpy(cfg.deployment_id, "ec-memory-test!!", 16);
    cfg.heal_on_read = false;
    if (ol_eset_create(&cfg, &s->es) < 0)
        abort();
}

static void set_close(struct set *s)
{
    ol_eset_destroy(s->es);
    for (unsigned i = 0; i < 6; i++)
        ol_memdrive_destroy(s->md[i]);
}

/* What a PUT reserves follows the object: k+m writers of the shard's size,
 * a stripe and parity of the last unit's size. */
static void test_sizing(void)
{
    struct set s;
    set_open(&s, 1u << 20);
    uint64_t small = ol_eset_put_buffer_bytes(s.es, 4096, MIB, 3);
    /* stripe 4 KiB, parity 2 x 1 KiB -> 4 KiB, 6 writers of 1 KiB -> 4 KiB */
    CHECK(small == 4 * KIB + 4 * KIB + 6 * 4 * KIB);
    CHECK(ol_eset_put_buffer_bytes(s.es, 0, MIB, 3) <= 64 * KIB);
    /* 2 MiB: units of 512 KiB; shards of 512 KiB fit one writer buffer. */
    CHECK(ol_eset_put_buffer_bytes(s.es, 2 * MIB, MIB, 3) == 2 * MIB + MIB + 6 * 512 * KIB);
    /* 4 MiB: one full stripe, shards of exactly one writer buffer. */
    CHECK(ol_eset_put_buffer_bytes(s.es, 4 * MIB, MIB, 3) == 4 * MIB + 2 * MIB + 6 * MIB);
    /* Large and unknown: a full stripe and three writer buffers per drive. */
    uint64_t big = 4 * MIB + 2 * MIB + 6 * 3 * MIB;
    CHECK(ol_eset_put_buffer_bytes(s.es, 64 * MIB, MIB, 3) == big);
    CHECK(ol_eset_put_buffer_bytes(s.es, -1, MIB, 3) == big);
    set_close(&s);
}

/* Objects written with a right, a too small and a too large announcement,
 * in uneven pieces, read back byte for byte. */
static void test_expect_roundtrip(void)
{
    struct set s;
    set_open(&s, 64 * 1024);
    static const size_t sizes[] = {1, 3, 4095, 4096, 65535, 65536 * 4, 65536 * 4 + 1,
                                   1000000, 3 * 65536 * 4 + 7};
    uint8_t *buf = malloc(4 * MIB), *back = malloc(4 * MIB);
    if (!buf || !back)
        abort();
    unsigned i = 0;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (int mode = 0; mode < 5; mode++, i++) {
            size_t n = sizes[si];
            char key[32];
            int kl = snprintf(key, sizeof(key), "obj-%u", i);
            gen(i, buf, n);
            struct ol_eset_put *p;
            CHECK_RC(ol_eset_put_begin(s.es, "bkt", key, (size_t)kl, &p), 0);
            /* 0: exact, 1: too small, 2: too large, 3: none, 4: exact and
             * received in place (put_room / put_advance) */
            if (mode == 0 || mode == 4)
                ol_eset_put_expect(p, n);
            else if (mode == 1)
                ol_eset_put_expect(p, n / 3);
            else if (mode == 2)
                ol_eset_put_expect(p, n * 5 + 100);
            size_t off = 0, piece = 1;
            while (mode == 4 && off < n) {
                uint8_t *room;
                size_t cap;
                CHECK_RC(ol_eset_put_room(p, &room, &cap), 0);
                CHECK(cap > 0);
                size_t m = n - off < piece ? n - off : piece;
                if (m > cap)
                    m = cap;
                memcpy(room, buf + off, m);
                CHECK_RC(ol_eset_put_advance(p, m), 0);
                off += m;
                piece = piece * 5 + 1;
            }
            while (off < n) {
                size_t m = n - off < piece ? n - off : piece;
                CHECK_RC(ol_eset_put_write(p, buf + off, m), 0);
                off += m;
                piece = piece * 7 + 3;
            }
            struct ol_eset_obj o;
            CHECK_RC(ol_eset_put_commit(p, "etag", 0, &o), 0);
            CHECK(o.size == n);
            memset(back, 0, n);
            CHECK_RC(ol_eset_read(s.es, "bkt", key, (size_t)kl, NULL, 0, n, back, NULL), 0);
            if (memcmp(buf, back, n) != 0) {
                fprintf(stderr, "object of %zu bytes, announcement mode %d, reads back wrong\n",
                        n, mode);
                failures++;
            }
        }
    }
    free(buf);
    free(back);
    set_close(&s);
}

/* A reservation handed to a PUT is released when the PUT ends, by commit or
 * by abort. */
static void test_hold_released(void)
{
    struct set s;
    set_open(&s, 64 * 1024);
    ol_bodymem_configure(64 * MIB, 32 * MIB);
    uint64_t before = ol_bodymem_used();
    for (int commit = 0; commit < 2; commit++) {
        struct ol_eset_put *p;
        CHECK_RC(ol_eset_put_begin(s.es, "bkt", "held", 4, &p), 0);
        CHECK_RC(ol_bodymem_reserve(MIB, 0), 0);
        ol_eset_put_hold(p, MIB);
        CHECK(ol_bodymem_used() == before + MIB);
        CHECK_RC(ol_eset_put_write(p, "abc", 3), 0);
        if (commit)
            CHECK_RC(ol_eset_put_commit(p, "etag", 0, NULL), 0);
        else
            ol_eset_put_abort(p);
        CHECK(ol_bodymem_used() == before);
    }
    set_close(&s);
}

static void test_budget(void)
{
    ol_bodymem_configure(10 * MIB, 4 * MIB);
    CHECK(ol_bodymem_limit() == 10 * MIB);
    CHECK(ol_bodymem_used() == 0);
    CHECK_RC(ol_bodymem_reserve(0, 0), 0);
    CHECK_RC(ol_bodymem_reserve(4 * MIB, 0), 0);
    CHECK_RC(ol_bodymem_reserve(4 * MIB, 0), 0);
    uint64_t refused = ol_bodymem_refused();
    /* Over the total: refused at once outside a fiber (nothing to wait on). */
    CHECK_RC(ol_bodymem_reserve(4 * MIB, 1000), -EBUSY);
    /* Over the per-request cap: refused whatever is free. */
    CHECK_RC(ol_bodymem_reserve(5 * MIB, 0), -EBUSY);
    CHECK(ol_bodymem_refused() == refused + 2);
    CHECK_RC(ol_bodymem_reserve(2 * MIB, 0), 0);
    CHECK(ol_bodymem_used() == 10 * MIB);
    CHECK_RC(ol_bodymem_reserve(1, 0), -EBUSY);
    ol_bodymem_release(4 * MIB);
    CHECK_RC(ol_bodymem_reserve(3 * MIB, 0), 0);
    ol_bodymem_release(3 * MIB);
    ol_bodymem_release(4 * MIB);
    ol_bodymem_release(2 * MIB);
    CHECK(ol_bodymem_used() == 0);
    /* 0 = the default, an eighth of RAM, at least 64 MiB. */
    ol_bodymem_configure(0, 0);
    CHECK(ol_bodymem_limit() >= 64 * MIB);
    /* Mapped buffers: zero-filled, writable, returned. */
    uint8_t *m = ol_bodymem_map(3 * MIB + 5);
    CHECK(m != NULL);
    if (m) {
        CHECK(m[0] == 0 && m[3 * MIB + 4] == 0);
        m[3 * MIB + 4] = 7;
        ol_bodymem_unmap(m, 3 * MIB + 5);
    }
    ol_bodymem_unmap(NULL, 10);
}

int main(void)
{
    ol_hlc_init(&hlc, 9, 0x1234, NULL, NULL);
    test_sizing();
    test_expect_roundtrip();
    test_hold_released();
    test_budget();
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
