/* The assertions of the unit tests.  Each test is a standalone program
 * (liburing style): it counts failed checks in `failures`, prints each with
 * its place, and exits 1 when any failed (0 pass, 77 skip). */
#ifndef OL_TESTS_UNIT_CHECK_H
#define OL_TESTS_UNIT_CHECK_H

#include <stdio.h>

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

#endif
