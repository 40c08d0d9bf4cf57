/* Encryption at rest's framing (obj/sse.h), against a source in memory:
 * stream lengths both ways; SSE-S3 and SSE-C round trips of one stream and of
 * parts, read whole, from every kind of offset, and through a source that
 * returns few bytes per call; a wrong master key, a missing or wrong customer
 * key; and tampering: a flipped byte, swapped packages, a stream cut at a
 * package boundary (with its sizes made to agree) all fail authentication
 * rather than return other bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "obj/sse.h"
#include "s3/meta.h"

/* The sealed bytes, as a backend would hold them. */
struct mem {
    uint8_t *p;
    size_t len, cap;
    size_t max_call; /* at most this many bytes per read (0: no limit) */
};

static int sink(void *arg, const void *buf, size_t len)
{
    struct mem *m = arg;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

static ssize_t source(void *arg, uint64_t off, size_t max, bool check, const uint8_t **data,
                      bool *pinned)
{
    struct mem *m = arg;
    (void)check;
    (void)pinned;
    if (off >= m->len)
        return 0;
    size_t n = m->len - off < max ? m->len - off : max;
    if (m->max_call && n > m->max_call)
        n = m->max_call;
    *data = m->p + off;
    return (ssize_t)n;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

/* Seals plain into m with obj's key, in write calls of step bytes (0: room
 * and advance, as the S3 body receiver writes). */
static void seal(const struct ol_sse_obj *obj, const uint8_t *plain, size_t n, size_t step,
                 struct mem *m)
{
    struct ol_sse_writer *w;
    CHECK_RC(ol_sse_writer_new(obj, &w), 0);
    size_t done = 0;
    while (done < n) {
        if (step) {
            size_t k = n - done < step ? n - done : step;
            CHECK_RC(ol_sse_write(w, sink, m, plain + done, k), 0);
            done += k;
        } else {
            uint8_t *p;
            size_t room;
            CHECK_RC(ol_sse_write_room(w, sink, m, &p, &room), 0);
            size_t k = n - done < room ? n - done : room;
            memcpy(p, plain + done, k);
            CHECK_RC(ol_sse_write_advance(w, k), 0);
            done += k;
        }
    }
    CHECK_RC(ol_sse_write_finish(w, sink, m), 0);
    CHECK(ol_sse_write_size(w) == n);
    ol_sse_writer_free(w);
}

/* A blob holding the entry (and ":parts" when parts is given). */
static size_t blob(uint8_t *out, size_t cap, const char *entry, const char *parts)
{
    size_t len = 0;
    CHECK_RC(ol_s3_meta_add(out, cap, &len, OL_SSE_META, entry, strlen(entry)), 0);
    if (parts)
        CHECK_RC(ol_s3_meta_add(out, cap, &len, OL_S3_META_PARTS, parts, strlen(parts)), 0);
    return len;
}

/* Reads [off, off + n) through a reader and compares with want. */
static int read_back(struct ol_sse_reader *r, struct mem *m, uint64_t off, size_t n,
                     const uint8_t *want)
{
    size_t got = 0;
    while (got < n) {
        const uint8_t *d;
        ssize_t k = ol_sse_read(r, source, m, off + got, n - got, &d);
        if (k <= 0)
            return k < 0 ? (int)k : -EIO;
        if (memcmp(d, want + got, (size_t)k) != 0)
            return -EBADMSG;
        got += (size_t)k;
    }
    return 0;
}

static void lengths(void)
{
    const uint64_t sizes[] = {0, 1, OL_SSE_PKG - 1, OL_SSE_PKG, OL_SSE_PKG + 1,
                              5 * OL_SSE_PKG, 16 * OL_SSE_PKG + 3, 5ull << 30};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        CHECK(ol_sse_plain_len(ol_sse_sealed_len(sizes[i])) == (int64_t)sizes[i]);
    CHECK(ol_sse_sealed_len(0) == OL_SSE_HDR);
    CHECK(ol_sse_plain_len(OL_SSE_HDR - 1) == -1);
    /* A last package with no plaintext is no stream. */
    CHECK(ol_sse_plain_len(OL_SSE_HDR + OL_SSE_PKG + OL_SSE_TAG + 5) == -1);
}

static void one_stream(const uint8_t master[32], const struct ol_sse_spec *spec)
{
    const size_t n = 40 * OL_SSE_PKG + 777;
    uint8_t *plain = malloc(n);
    fill(plain, n, 3);
    char entry[OL_SSE_ENTRY_MAX];
    struct ol_sse_obj obj;
    CHECK_RC(ol_sse_entry_new(master, spec, 's', entry, &obj), 0);
    struct mem m = {0};
    seal(&obj, plain, n, spec->mode == OL_SSE_S3 ? 0 : 100000, &m);
    CHECK(m.len == ol_sse_sealed_len(n));
    CHECK(memmem(m.p, m.len, plain + 1000, 64) == NULL);
    uint8_t b[1024];
    size_t bl = blob(b, sizeof(b), entry, NULL);
    CHECK(ol_sse_object_size(b, bl, m.len) == n);
    struct ol_sse_reader *r;
    CHECK_RC(ol_sse_reader_new(b, bl, m.len, master, &r), 0);
    CHECK(ol_sse_reader_size(r) == n);
    if (spec->mode == OL_SSE_C) {
        const uint8_t *d;
        CHECK_RC(ol_sse_read(r, source, &m, 0, 10, &d), -OL_ESSENEEDKEY);
        uint8_t wrong[32];
        memcpy(wrong, spec->ckey, 32);
        wrong[7] ^= 1;
        CHECK_RC(ol_sse_reader_unlock(r, wrong), -OL_ESSEWRONGKEY);
        CHECK_RC(ol_sse_reader_unlock(r, spec->ckey), 0);
    }
    CHECK_RC(read_back(r, &m, 0, n, plain), 0);
    const uint64_t offs[] = {0, 1, OL_SSE_PKG - 1, OL_SSE_PKG, 17 * OL_SSE_PKG - 5, n - 1};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        size_t k = n - offs[i] < 70000 ? n - offs[i] : 70000;
        CHECK_RC(read_back(r, &m, offs[i], k, plain + offs[i]), 0);
    }
    ol_sse_reader_free(r);
    /* A source that hands out 1000 bytes at a time. */
    m.max_call = 1000;
    CHECK_RC(ol_sse_reader_new(b, bl, m.len, master, &r), 0);
    if (spec->mode == OL_SSE_C)
        CHECK_RC(ol_sse_reader_unlock(r, spec->ckey), 0);
    CHECK_RC(read_back(r, &m, 5, n - 5, plain + 5), 0);
    ol_sse_reader_free(r);
    m.max_call = 0;
    /* A flipped byte in package 20 (the second window: a reader opens
     * OL_SSE_WINDOW_PKGS packages at a time). */
    m.p[OL_SSE_HDR + 20 * (OL_SSE_PKG + OL_SSE_TAG) + 100] ^= 0x40;
    CHECK_RC(ol_sse_reader_new(b, bl, m.len, master, &r), 0);
    if (spec->mode == OL_SSE_C)
        CHECK_RC(ol_sse_reader_unlock(r, spec->ckey), 0);
    CHECK_RC(read_back(r, &m, 0, OL_SSE_PKG, plain), 0); /* before it: fine */
    CHECK_RC(read_back(r, &m, 20 * OL_SSE_PKG, 10, plain + 20 * OL_SSE_PKG), -OL_ECORRUPT);
    ol_sse_reader_free(r);
    m.p[OL_SSE_HDR + 20 * (OL_SSE_PKG + OL_SSE_TAG) + 100] ^= 0x40;
    /* Two packages swapped. */
    uint8_t *tmp = malloc(OL_SSE_PKG + OL_SSE_TAG);
    uint8_t *p0 = m.p + OL_SSE_HDR, *p1 = p0 + OL_SSE_PKG + OL_SSE_TAG;
    memcpy(tmp, p0, OL_SSE_PKG + OL_SSE_TAG);
    memcpy(p0, p1, OL_SSE_PKG + OL_SSE_TAG);
    memcpy(p1, tmp, OL_SSE_PKG + OL_SSE_TAG);
    CHECK_RC(ol_sse_reader_new(b, bl, m.len, master, &r), 0);
    if (spec->mode == OL_SSE_C)
        CHECK_RC(ol_sse_reader_unlock(r, spec->ckey), 0);
    CHECK_RC(read_back(r, &m, 0, 10, plain), -OL_ECORRUPT);
    ol_sse_reader_free(r);
    memcpy(p1, p0, OL_SSE_PKG + OL_SSE_TAG);
    memcpy(p0, tmp, OL_SSE_PKG + OL_SSE_TAG);
    free(tmp);
    /* Cut after 10 whole packages: its sizes agree, its last package was not
     * sealed as the last. */
    size_t cut = OL_SSE_HDR + 10 * (OL_SSE_PKG + OL_SSE_TAG);
    struct mem c = {.p = m.p, .len = cut, .cap = cut};
    CHECK_RC(ol_sse_reader_new(b, bl, cut, master, &r), 0);
    CHECK(ol_sse_reader_size(r) == 10 * OL_SSE_PKG);
    if (spec->mode == OL_SSE_C)
        CHECK_RC(ol_sse_reader_unlock(r, spec->ckey), 0);
    CHECK_RC(read_back(r, &c, 9 * OL_SSE_PKG, 10, plain + 9 * OL_SSE_PKG), -OL_ECORRUPT);
    ol_sse_reader_free(r);
    /* SSE-S3 under another master key: refused at open. */
    if (spec->mode == OL_SSE_S3) {
        uint8_t other[32];
        memcpy(other, master, 32);
        other[0] ^= 1;
        CHECK_RC(ol_sse_reader_new(b, bl, m.len, other, &r), -ENOKEY);
        CHECK_RC(ol_sse_reader_new(b, bl, m.len, NULL, &r), -ENOKEY);
    }
    free(m.p);
    free(plain);
}

/* Parts sealed separately with one data key, concatenated ('p'). */
static void parts(const uint8_t master[32])
{
    struct ol_sse_spec spec = {.mode = OL_SSE_S3};
    char entry[OL_SSE_ENTRY_MAX];
    struct ol_sse_obj obj;
    CHECK_RC(ol_sse_entry_new(master, &spec, 'p', entry, &obj), 0);
    const size_t sz[3] = {5 * OL_SSE_PKG + 100, 5 * OL_SSE_PKG + 100, 33};
    size_t total = sz[0] + sz[1] + sz[2];
    uint8_t *plain = malloc(total);
    fill(plain, total, 9);
    struct mem m = {0};
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        seal(&obj, plain + at, sz[i], 4096, &m);
        at += sz[i];
    }
    char rle[64];
    snprintf(rle, sizeof(rle), "%zu*2,%zu*1", sz[0], sz[2]);
    uint8_t b[1024];
    size_t bl = blob(b, sizeof(b), entry, rle);
    CHECK(ol_sse_object_size(b, bl, m.len) == total);
    struct ol_sse_reader *r;
    CHECK_RC(ol_sse_reader_new(b, bl, m.len, master, &r), 0);
    CHECK_RC(read_back(r, &m, 0, total, plain), 0);
    CHECK_RC(read_back(r, &m, sz[0] - 50, 200, plain + sz[0] - 50), 0);
    CHECK_RC(read_back(r, &m, total - 40, 40, plain + total - 40), 0);
    ol_sse_reader_free(r);
    /* Sizes that disagree with the stored length are refused at open. */
    CHECK_RC(ol_sse_reader_new(b, bl, m.len - 1, master, &r), -OL_ECORRUPT);
    free(m.p);
    free(plain);
}

/* What a thread keeps between readers (a window and a keyed cipher context
 * from its pool, the data keys it opened): readers of objects under
 * different data keys, at once and one after the other, each open their own
 * bytes; an entry opened before, with its wrapped key altered, or under
 * another master key, still fails. */
static void thread_reuse(const uint8_t master[32])
{
    enum { NOBJ = 6 };
    const size_t n = 17 * OL_SSE_PKG + 5;
    struct ol_sse_spec spec = {.mode = OL_SSE_S3};
    char entry[NOBJ][OL_SSE_ENTRY_MAX];
    uint8_t b[NOBJ][1024];
    size_t bl[NOBJ];
    struct mem m[NOBJ];
    uint8_t *plain[NOBJ];
    for (int i = 0; i < NOBJ; i++) {
        struct ol_sse_obj obj;
        CHECK_RC(ol_sse_entry_new(master, &spec, 's', entry[i], &obj), 0);
        plain[i] = malloc(n);
        fill(plain[i], n, 20u + (unsigned)i);
        memset(&m[i], 0, sizeof(m[i]));
        seal(&obj, plain[i], n, 0, &m[i]);
        bl[i] = blob(b[i], sizeof(b[i]), entry[i], NULL);
    }
    /* More readers at once than a thread's pool keeps, read in turns. */
    struct ol_sse_reader *r[NOBJ];
    for (int i = 0; i < NOBJ; i++)
        CHECK_RC(ol_sse_reader_new(b[i], bl[i], m[i].len, master, &r[i]), 0);
    for (size_t at = 0; at < n; at += 5 * OL_SSE_PKG) {
        size_t k = n - at < 5 * OL_SSE_PKG ? n - at : 5 * OL_SSE_PKG;
        for (int i = 0; i < NOBJ; i++)
            CHECK_RC(read_back(r[i], &m[i], at, k, plain[i] + at), 0);
    }
    for (int i = 0; i < NOBJ; i++)
        ol_sse_reader_free(r[i]);
    /* Again, each reader now on a context keyed for another object. */
    for (int round = 0; round < 2; round++)
        for (int i = NOBJ - 1; i >= 0; i--) {
            struct ol_sse_reader *q;
            CHECK_RC(ol_sse_reader_new(b[i], bl[i], m[i].len, master, &q), 0);
            CHECK_RC(read_back(q, &m[i], 3 * OL_SSE_PKG + 7, n - 3 * OL_SSE_PKG - 7,
                               plain[i] + 3 * OL_SSE_PKG + 7), 0);
            ol_sse_reader_free(q);
        }
    /* The entries were opened before: an altered wrapped key (its last hex
     * digit) and another master key fail all the same. */
    char bad[OL_SSE_ENTRY_MAX];
    snprintf(bad, sizeof(bad), "%s", entry[0]);
    size_t el = strlen(bad);
    bad[el - 1] = bad[el - 1] == '0' ? '1' : '0';
    struct ol_sse_obj o;
    CHECK_RC(ol_sse_entry_open((const uint8_t *)bad, el, master, NULL, &o), -OL_ECORRUPT);
    uint8_t other[32];
    memcpy(other, master, 32);
    other[31] ^= 0x80;
    CHECK_RC(ol_sse_entry_open((const uint8_t *)entry[0], el, other, NULL, &o), -ENOKEY);
    CHECK_RC(ol_sse_entry_open((const uint8_t *)entry[0], el, master, NULL, &o), 0);
    for (int i = 0; i < NOBJ; i++) {
        free(m[i].p);
        free(plain[i]);
    }
}

int main(void)
{
    uint8_t master[32];
    fill(master, 32, 1);
    lengths();
    struct ol_sse_spec s3 = {.mode = OL_SSE_S3};
    one_stream(master, &s3);
    struct ol_sse_spec c = {.mode = OL_SSE_C};
    fill(c.ckey, 32, 5);
    one_stream(master, &c);
    parts(master);
    thread_reuse(master);
    /* SSE-C entries never hold the key; SSE-S3 needs a master. */
    char entry[OL_SSE_ENTRY_MAX];
    struct ol_sse_obj obj;
    CHECK_RC(ol_sse_entry_new(NULL, &s3, 's', entry, &obj), -ENOKEY);
    CHECK_RC(ol_sse_entry_new(NULL, &c, 's', entry, &obj), 0);
    char khex[65];
    for (int i = 0; i < 32; i++)
        snprintf(khex + 2 * i, 3, "%02x", c.ckey[i]);
    CHECK(strstr(entry, khex) == NULL);
    enum ol_sse_mode mode;
    char layout;
    CHECK_RC(ol_sse_entry_peek((const uint8_t *)"2 S3 s x y", 10, &mode, &layout), -OL_ECORRUPT);
    return failures ? 1 : 0;
}
