/* A simulated peer for the real connection code (src/http/conn.c).
 *
 * ol_http_conn_serve() runs unchanged, on the calling thread, without a
 * socket or a loop: the program is linked with
 *   -Wl,--wrap=ol_io_recv,--wrap=ol_io_sendmsg_all,--wrap=ol_io_sendmsg_flags,
 *   --wrap=ol_io_sendfile,--wrap=ol_io_close,--wrap=ol_loop_stopping,
 *   --wrap=ol_io_poll_in,--wrap=ol_idle_add,--wrap=ol_idle_del,--wrap=ol_idle_done
 * (CONN_SIM_LINK_ARGS in tests/fuzz/meson.build), so conn.c's calls to those
 * land in conn_sim.c.  Each receive hands over the next bytes of a script, in
 * pieces cut the way the test asks (all at once, byte by byte, at given
 * offsets, or at seeded random sizes), which makes every split delivery
 * reproducible; what the server sends is collected in out.  The end of the
 * script reads as the peer closing its side.
 *
 * One simulation at a time per process (the wrapped functions find it in a
 * global).
 */
#ifndef OL_TESTS_CONN_SIM_H
#define OL_TESTS_CONN_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "http/conn.h"

enum conn_sim_split {
    SIM_WHOLE,  /* each receive takes all it can */
    SIM_BYTES,  /* one byte per receive */
    SIM_CUTS,   /* never across an offset in cuts[] (ascending) */
    SIM_SEEDED, /* 1..max_piece bytes per receive, from seed */
};

struct conn_sim {
    /* Set by the caller. */
    const uint8_t *in;
    size_t len;
    enum conn_sim_split split;
    const size_t *cuts;
    size_t ncuts;
    uint64_t seed;
    size_t max_piece;
    /* Filled in by conn_sim_run. */
    size_t off;        /* script bytes delivered */
    size_t cut_i;
    unsigned recvs;    /* receive calls that delivered bytes */
    char *out;         /* everything sent, NUL-terminated (malloc'd) */
    size_t out_len, out_cap;
    int closed;        /* ol_io_close was called */
};

/* Serves the script through ol_http_conn_serve until it ends.  Then
 * conn_sim_free releases out. */
void conn_sim_run(struct conn_sim *s, const struct ol_http_conn_opts *opts,
                  ol_http_handler handler, void *ctx);
void conn_sim_free(struct conn_sim *s);

/* Serves the script with a recording handler and returns a transcript of
 * what the server made of it (malloc'd; *len set): per request its method,
 * target and header lines as the handler saw them, its body as read through
 * ol_http_body_read (in pieces whose sizes, and whether the handler stops
 * early, come from read_seed and the request's index, never from the
 * split), then the status of every response sent (interim 100s left out, as
 * whether one is sent depends on timing).  Two runs of the same script that
 * differ only in how it is split must give the same transcript.
 *
 * The handler abort()s if the head's slices lose their bytes while the body
 * is read, and the run abort()s if a response head holds a control byte
 * other than the CRLF ending each line. */
char *conn_sim_transcript(struct conn_sim *s, const struct ol_http_conn_opts *opts,
                          uint64_t read_seed, size_t *len);

/* The targets' seed for the split points and limits: FNV-1a of the input,
 * so a corpus file replays the same splits every time. */
static inline uint64_t conn_sim_seed(const uint8_t *d, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * UINT64_C(0x100000001b3);
    return h;
}

#endif
