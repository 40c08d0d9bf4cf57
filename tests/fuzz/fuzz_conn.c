/* libFuzzer target for the connection buffer (src/http/conn.c) under split
 * deliveries.
 *
 * The input is a raw byte stream as a client would send it: request heads,
 * Content-Length or chunked bodies, pipelined requests, garbage.  The real
 * ol_http_conn_serve() serves it through the simulated peer of conn_sim.h
 * (no socket, no loop), once per way of cutting the stream into receives:
 * all at once, byte by byte (short inputs), at seeded random sizes, and at
 * seeded cut points.  Checked, besides what the sanitizers catch:
 *  - every split gives the same transcript: the same parsed heads, the same
 *    body bytes, the same results and response statuses;
 *  - while a handler reads its body, the head's slices keep their bytes
 *    (conn_sim's handler aborts otherwise);
 *  - no response head holds a control byte other than the CRLF ending each
 *    line.
 * This runs under two buffer sizes: a roomy one like the server's and a
 * tight one, where the buffer must be reused many times within a request.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn_sim.h"
#include "http/conn.h"

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz_conn: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

static const struct ol_http_conn_opts fuzz_opts[] = {
    {.limits = {.max_head_bytes = 4096, .max_headers = 32, .max_target_bytes = 1024},
     .idle_timeout_ms = 3600000,
     .io_timeout_ms = 3600000,
     .buf_bytes = 4096 + 16384},
    {.limits = {.max_head_bytes = 160, .max_headers = 6, .max_target_bytes = 64},
     .idle_timeout_ms = 3600000,
     .io_timeout_ms = 3600000,
     .buf_bytes = 160 + 48},
};

static void run_split(const uint8_t *data, size_t size, const struct ol_http_conn_opts *opts,
                      uint64_t seed, uint64_t split_seed, enum conn_sim_split split, const size_t *cuts,
                      size_t ncuts, size_t max_piece, const char *want, size_t want_len)
{
    struct conn_sim sim;
    memset(&sim, 0, sizeof(sim));
    sim.in = data;
    sim.len = size;
    sim.split = split;
    sim.cuts = cuts;
    sim.ncuts = ncuts;
    sim.seed = split_seed | 1;
    sim.max_piece = max_piece;
    size_t len;
    char *t = conn_sim_transcript(&sim, opts, seed, &len);
    if (len != want_len || memcmp(t, want, len) != 0) {
        fprintf(stderr, "fuzz_conn: split %d gave another transcript\n--- whole:\n%.*s\n"
                        "--- split:\n%.*s\n",
                (int)split, (int)(want_len > 4000 ? 4000 : want_len), want,
                (int)(len > 4000 ? 4000 : len), t);
        abort();
    }
    free(t);
    conn_sim_free(&sim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    uint64_t seed = conn_sim_seed(data, size);
    for (size_t o = 0; o < sizeof(fuzz_opts) / sizeof(fuzz_opts[0]); o++) {
        const struct ol_http_conn_opts *opts = &fuzz_opts[o];
        struct conn_sim sim;
        memset(&sim, 0, sizeof(sim));
        sim.in = data;
        sim.len = size;
        sim.split = SIM_WHOLE;
        size_t want_len;
        char *want = conn_sim_transcript(&sim, opts, seed, &want_len);
        conn_sim_free(&sim);

        /* Byte by byte costs a parse per byte of each head: short inputs only. */
        if (size <= 2048)
            run_split(data, size, opts, seed, 0, SIM_BYTES, NULL, 0, 0, want, want_len);
        run_split(data, size, opts, seed, seed, SIM_SEEDED, NULL, 0, 1 + (seed >> 8) % 64, want,
                  want_len);
        run_split(data, size, opts, seed, ~seed, SIM_SEEDED, NULL, 0, 1 + (seed >> 20) % 1500,
                  want, want_len);
        size_t cuts[8];
        uint64_t x = seed;
        for (size_t i = 0; i < 8; i++) {
            x = x * UINT64_C(6364136223846793005) + 1442695040888963407u;
            cuts[i] = size ? (size_t)((x >> 33) % (size + 1)) : 0;
        }
        /* Ascending, as conn_sim expects. */
        for (size_t i = 1; i < 8; i++)
            for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                size_t tmp = cuts[j];
                cuts[j] = cuts[j - 1];
                cuts[j - 1] = tmp;
            }
        run_split(data, size, opts, seed, 0, SIM_CUTS, cuts, 8, 0, want, want_len);
        FUZZ_CHECK(want != NULL);
        free(want);
    }
    return 0;
}
