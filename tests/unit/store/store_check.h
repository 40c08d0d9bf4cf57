/* Helpers shared by the store's unit tests, on top of ../check.h: writing
 * an object's bytes from a test pattern. */
#ifndef OL_TESTS_UNIT_STORE_CHECK_H
#define OL_TESTS_UNIT_STORE_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/store.h"

/* Opens the store on a test's scratch directory root.  On failure (already
 * reported as a failed check) it removes root and returns NULL: the test
 * then exits 1.  check.h must come first. */
static inline struct ol_store *check_store_open(const char *root, const struct ol_store_opts *o)
{
    struct ol_store *st = NULL;
    CHECK_RC(ol_store_open(&st, root, o), 0);
    if (!st)
        check_rm_rf(root);
    return st;
}

/* Byte pos of the test object made from seed: a deterministic pattern that
 * differs from seed to seed and from one 8-byte word to the next. */
static inline uint8_t check_pattern(uint64_t seed, uint64_t pos)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + pos / 8;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (pos % 8)));
}

/* Fills buf with bytes [off, off + len) of that pattern. */
static inline void check_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = check_pattern(seed, off + i);
}

/* A test's byte pattern: fills buf with bytes [off, off + len) of the object
 * made from seed. */
typedef void (*check_fill_fn)(uint8_t *buf, size_t len, uint64_t seed, uint64_t off);

/* Begins a writer for size bytes and writes the pattern through
 * ol_store_write in pieces of `piece` bytes (odd sizes exercise the
 * writer's buffer boundaries).  On success *out is ready to commit; on an
 * error the writer is aborted. */
static inline int check_write_pattern(struct ol_store *st, size_t size, uint64_t seed,
                                      size_t piece, check_fill_fn fill,
                                      struct ol_store_writer **out)
{
    struct ol_store_writer *w = NULL;
    *out = NULL;
    int rc = ol_store_write_begin(st, (int64_t)size, &w);
    if (rc)
        return rc;
    uint8_t *buf = malloc(piece);
    if (!buf)
        rc = -ENOMEM;
    for (size_t done = 0; done < size && rc == 0;) {
        size_t n = size - done < piece ? size - done : piece;
        fill(buf, n, seed, done);
        rc = ol_store_write(w, buf, n);
        done += n;
    }
    free(buf);
    if (rc) {
        ol_store_write_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

#endif
