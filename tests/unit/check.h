/* The assertions of the unit tests, and their scratch directories.  Each
 * test is a standalone program (liburing style): it counts failed checks in
 * `failures`, prints each with its place, and exits 1 when any failed (0
 * pass, 77 skip). */
#ifndef OL_TESTS_UNIT_CHECK_H
#define OL_TESTS_UNIT_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Checks that expr returns want; prints both, and the error's name. */
#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (int)(expr);                                                                     \
        if (rc_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #expr, rc_,     \
                    ol_strerror(rc_), (want));                                                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* A test's pseudo-random numbers (xorshift64): the same sequence every run,
 * from CHECK_RNG_SEED (non-zero), which a test may define before including
 * this file. */
#ifndef CHECK_RNG_SEED
#define CHECK_RNG_SEED 0x9e3779b97f4a7c15ull
#endif
static uint64_t check_rng_state = CHECK_RNG_SEED;

static inline uint64_t check_rnd(void)
{
    uint64_t x = check_rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return check_rng_state = x;
}

/* Makes a test's scratch directory, /tmp/ol_test_<name>_XXXXXX, into root
 * (cap bytes).  Returns 0, or -1 after saying why (the test then exits 77:
 * skipped). */
static inline int check_mkdtemp(char *root, size_t cap, const char *name)
{
    snprintf(root, cap, "/tmp/ol_test_%s_XXXXXX", name);
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Removes a test's scratch directory tree (a path the test made with
 * mkdtemp, so it holds no quote). */
static inline void check_rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", path);
}

#endif
