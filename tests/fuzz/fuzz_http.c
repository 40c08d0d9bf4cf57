/* libFuzzer target for the HTTP/1.1 head parser and the chunked decoder.
 *
 * The input is a raw byte stream as a client would send it; the limits and
 * the split points are derived from it, so that corpus files stay plain HTTP.
 * Besides what the sanitizers catch, it checks properties and abort()s when
 * one fails:
 *  - a verdict given on a prefix (head length or error) is the verdict on
 *    the whole input, with identical slices, and a prefix of a PARTIAL input
 *    is PARTIAL;
 *  - the same bytes received in two pieces parse exactly like the whole;
 *  - a parsed head obeys the limits and the grammar (slices inside the
 *    buffer, names are tokens, values trimmed, version 1.0 or 1.1);
 *  - the chunked decoder gives the same output, verdict and consumed count
 *    whether fed all at once, byte by byte, or in two pieces;
 *  - served by the real connection code (src/http/conn.c, through the
 *    simulated peer of conn_sim.h), the input gives the same heads, bodies
 *    and responses when the head arrives in one read and the body in
 *    separate later reads (some of one byte) as when it all arrives at
 *    once, and the head's slices keep their bytes while the body is read.
 *    fuzz_conn goes further (arbitrary splits, tight buffers).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn_sim.h"
#include "http/conn.h"
#include "http/parser.h"

#define FUZZ_MAX_HEADERS 1024

static const struct ol_http_limits fuzz_limits[] = {
    {.max_head_bytes = 8192, .max_headers = 64, .max_target_bytes = 4096},
    {.max_head_bytes = 256, .max_headers = 8, .max_target_bytes = 64},
    {.max_head_bytes = 32, .max_headers = 2, .max_target_bytes = 8},
    {.max_head_bytes = 1 << 20, .max_headers = FUZZ_MAX_HEADERS, .max_target_bytes = 1 << 20},
};

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz_http: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* A parse result with its slices as offsets, comparable across buffers. */
struct result {
    int rc;
    size_t method[2], target[2], path[2], query[2];
    int minor;
    size_t nheaders;
    size_t hdr[FUZZ_MAX_HEADERS][4];
};

static struct ol_http_header g_headers[FUZZ_MAX_HEADERS];
static struct result g_whole, g_part;

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void slice_off(const char *base, size_t len, struct ol_slice s, size_t out[2])
{
    FUZZ_CHECK(s.p >= base && s.p + s.n <= base + len);
    out[0] = (size_t)(s.p - base);
    out[1] = s.n;
}

/* Parses buf[0..len) and checks what a successful parse must satisfy. */
static void parse(const char *buf, size_t len, const struct ol_http_limits *lim,
                  struct result *r)
{
    struct ol_http_request req;
    memset(&req, 0, sizeof(req));
    req.headers = g_headers;
    memset(r, 0, sizeof(*r));
    r->rc = ol_http_parse_request(buf, len, lim, &req);
    FUZZ_CHECK(r->rc >= OL_HTTP_EVERSION);
    if (r->rc <= 0)
        return;
    size_t head = (size_t)r->rc;
    FUZZ_CHECK(head <= len && head <= lim->max_head_bytes);
    FUZZ_CHECK(buf[head - 1] == '\n');
    FUZZ_CHECK(memchr(buf, '\0', head) == NULL);
    slice_off(buf, head, req.method, r->method);
    slice_off(buf, head, req.target, r->target);
    slice_off(buf, head, req.path, r->path);
    slice_off(buf, head, req.query, r->query);
    FUZZ_CHECK(req.method.n > 0 && req.target.n > 0);
    FUZZ_CHECK(req.target.n <= lim->max_target_bytes);
    for (size_t i = 0; i < req.method.n; i++)
        FUZZ_CHECK(is_tchar((unsigned char)req.method.p[i]));
    for (size_t i = 0; i < req.target.n; i++) {
        unsigned char c = (unsigned char)req.target.p[i];
        FUZZ_CHECK(c > ' ' && c != 0x7f);
    }
    FUZZ_CHECK(req.path.p == req.target.p && req.path.n <= req.target.n);
    FUZZ_CHECK(memchr(req.path.p, '?', req.path.n) == NULL);
    if (req.path.n < req.target.n)
        FUZZ_CHECK(req.query.p == req.path.p + req.path.n + 1 &&
                   req.query.n == req.target.n - req.path.n - 1);
    else
        FUZZ_CHECK(req.query.n == 0);
    FUZZ_CHECK(req.minor_version == 0 || req.minor_version == 1);
    r->minor = req.minor_version;
    FUZZ_CHECK(req.nheaders <= lim->max_headers);
    r->nheaders = req.nheaders;
    for (size_t i = 0; i < req.nheaders; i++) {
        struct ol_http_header *h = &req.headers[i];
        slice_off(buf, head, h->name, &r->hdr[i][0]);
        slice_off(buf, head, h->value, &r->hdr[i][2]);
        FUZZ_CHECK(h->name.n > 0);
        for (size_t j = 0; j < h->name.n; j++)
            FUZZ_CHECK(is_tchar((unsigned char)h->name.p[j]));
        for (size_t j = 0; j < h->value.n; j++) {
            unsigned char c = (unsigned char)h->value.p[j];
            FUZZ_CHECK(c == '\t' || (c >= ' ' && c != 0x7f));
        }
        if (h->value.n) {
            FUZZ_CHECK(h->value.p[0] != ' ' && h->value.p[0] != '\t');
            FUZZ_CHECK(h->value.p[h->value.n - 1] != ' ' && h->value.p[h->value.n - 1] != '\t');
        }
        /* find_header returns the first header of that name. */
        char name[64];
        if (h->name.n < sizeof(name)) {
            memcpy(name, h->name.p, h->name.n);
            name[h->name.n] = '\0';
            const struct ol_slice *v = ol_http_find_header(&req, name);
            FUZZ_CHECK(v != NULL && v->p <= h->value.p);
        }
        /* Content-Length accepts exactly the digit strings up to INT64_MAX. */
        uint64_t cl;
        if (ol_http_parse_content_length(h->value, &cl) == 0) {
            FUZZ_CHECK(h->value.n > 0);
            char tmp[32];
            int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)cl);
            size_t z = 0;
            while (z + 1 < h->value.n && h->value.p[z] == '0')
                z++;
            FUZZ_CHECK((size_t)n == h->value.n - z && memcmp(tmp, h->value.p + z, n) == 0);
            FUZZ_CHECK(cl <= (uint64_t)INT64_MAX);
        }
    }
}

static int same(const struct result *a, const struct result *b)
{
    if (a->rc != b->rc)
        return 0;
    if (a->rc <= 0)
        return 1;
    size_t fixed = offsetof(struct result, hdr);
    return memcmp(a, b, fixed) == 0 &&
           memcmp(a->hdr, b->hdr, a->nheaders * sizeof(a->hdr[0])) == 0;
}

static void fuzz_head(const uint8_t *data, size_t size, const struct ol_http_limits *lim,
                      uint64_t seed)
{
    /* An exact-size copy, so that ASan catches reads past len. */
    char *whole = malloc(size ? size : 1);
    FUZZ_CHECK(whole != NULL);
    memcpy(whole, data, size);
    parse(whole, size, lim, &g_whole);

    size_t cuts[3] = {size / 2, size ? (size_t)(seed % (size + 1)) : 0,
                      size ? (size_t)((seed >> 32) % (size + 1)) : 0};
    for (int i = 0; i < 3; i++) {
        size_t k = cuts[i];
        /* The first piece alone: a verdict there must be the final one. */
        char *first = malloc(k ? k : 1);
        FUZZ_CHECK(first != NULL);
        memcpy(first, data, k);
        parse(first, k, lim, &g_part);
        free(first);
        if (g_part.rc != OL_HTTP_PARTIAL)
            FUZZ_CHECK(same(&g_part, &g_whole));

        /* Both pieces received into one buffer: same as parsing it whole. */
        char *rbuf = malloc(size ? size : 1);
        FUZZ_CHECK(rbuf != NULL);
        memcpy(rbuf, data, k);
        memcpy(rbuf + k, data + k, size - k);
        parse(rbuf, size, lim, &g_part);
        free(rbuf);
        FUZZ_CHECK(same(&g_part, &g_whole));
    }

    /* Pipelined heads back to back. */
    size_t off = 0;
    int rc = g_whole.rc;
    for (int i = 0; i < 16 && rc > 0; i++) {
        off += (size_t)rc;
        parse(whole + off, size - off, lim, &g_part);
        rc = g_part.rc;
    }
    free(whole);
}

/* Feeds body[0..n) to a fresh decoder in pieces: all at once (step 0),
 * byte by byte (step 1) or in two pieces split at `split` (step 2), keeping
 * the unconsumed tail as a caller would.  Returns -1 on error, else 0. */
static int chunk_feed(const uint8_t *body, size_t n, int step, size_t split, char *out,
                      size_t *outn, size_t *consumed, int *done)
{
    struct ol_http_chunked c;
    memset(&c, 0, sizeof(c));
    char *rbuf = malloc(n ? n : 1);
    FUZZ_CHECK(rbuf != NULL);
    size_t have = 0, fed = 0;
    int rc = 0;
    *outn = 0;
    *consumed = 0;
    /* Each pass feeds at least one more byte, or is the last. */
    for (size_t pass = 0; pass <= n + 1; pass++) {
        size_t add;
        if (step == 0)
            add = n - fed;
        else if (step == 1)
            add = fed < n ? 1 : 0;
        else
            add = fed < split ? split - fed : n - fed;
        memcpy(rbuf + have, body + fed, add);
        have += add;
        fed += add;
        size_t len = have;
        ssize_t used = ol_http_chunked_decode(&c, rbuf, &len);
        FUZZ_CHECK(len <= have && *outn + len <= n);
        memcpy(out + *outn, rbuf, len);
        *outn += len;
        if (used < 0) {
            rc = -1;
            /* Sticky: a later call fails too and decodes nothing. */
            size_t zero = 0;
            FUZZ_CHECK(ol_http_chunked_decode(&c, rbuf, &zero) == -1 && zero == 0);
            break;
        }
        FUZZ_CHECK((size_t)used <= have && len <= (size_t)used);
        /* Everything is consumed until the body ends. */
        if (!ol_http_chunked_done(&c))
            FUZZ_CHECK((size_t)used == have);
        *consumed += (size_t)used;
        memmove(rbuf, rbuf + used, have - (size_t)used);
        have -= (size_t)used;
        if (fed == n)
            break;
    }
    *done = ol_http_chunked_done(&c);
    free(rbuf);
    return rc;
}

static void fuzz_chunked(const uint8_t *body, size_t n, uint64_t seed)
{
    char *out[3];
    size_t outn[3], consumed[3];
    int done[3], rc[3];
    size_t split = n ? (size_t)(seed % (n + 1)) : 0;
    for (int s = 0; s < 3; s++) {
        out[s] = malloc(n ? n : 1);
        FUZZ_CHECK(out[s] != NULL);
        rc[s] = chunk_feed(body, n, s, split, out[s], &outn[s], &consumed[s], &done[s]);
    }
    for (int s = 1; s < 3; s++) {
        FUZZ_CHECK(rc[s] == rc[0]);
        FUZZ_CHECK(outn[s] == outn[0] && memcmp(out[s], out[0], outn[0]) == 0);
        if (rc[0] == 0)
            FUZZ_CHECK(consumed[s] == consumed[0] && done[s] == done[0]);
    }
    for (int s = 0; s < 3; s++)
        free(out[s]);
}

/* Serves data through conn.c whole, then with the head (head_len bytes) in
 * one read and the body in later ones, and compares the transcripts. */
static void fuzz_conn_reads(const uint8_t *data, size_t size, size_t head_len, uint64_t seed)
{
    static const struct ol_http_conn_opts opts = {
        .limits = {.max_head_bytes = 8192, .max_headers = 64, .max_target_bytes = 4096},
        .idle_timeout_ms = 3600000,
        .io_timeout_ms = 3600000,
        .buf_bytes = 8192 + 4096,
    };
    struct conn_sim sim;
    memset(&sim, 0, sizeof(sim));
    sim.in = data;
    sim.len = size;
    sim.split = SIM_WHOLE;
    size_t want_len;
    char *want = conn_sim_transcript(&sim, &opts, seed, &want_len);
    conn_sim_free(&sim);

    /* The head alone, then the rest at once; then the head alone and the
     * body's first bytes one read each. */
    size_t cuts[65];
    size_t ncuts = 0;
    for (size_t i = 0; i < 65 && head_len + i < size; i++)
        cuts[ncuts++] = head_len + i;
    size_t plans[2] = {1, ncuts};
    for (int p = 0; p < 2; p++) {
        if (plans[p] == 0)
            continue;
        memset(&sim, 0, sizeof(sim));
        sim.in = data;
        sim.len = size;
        sim.split = SIM_CUTS;
        sim.cuts = cuts;
        sim.ncuts = plans[p];
        size_t len;
        char *t = conn_sim_transcript(&sim, &opts, seed, &len);
        if (len != want_len || memcmp(t, want, len) != 0) {
            fprintf(stderr, "fuzz_http: head and body in separate reads (plan %d) served "
                            "differently\n--- whole:\n%.*s\n--- split:\n%.*s\n",
                    p, (int)(want_len > 4000 ? 4000 : want_len), want,
                    (int)(len > 4000 ? 4000 : len), t);
            abort();
        }
        free(t);
        conn_sim_free(&sim);
    }
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = conn_sim_seed(data, size);
    for (size_t i = 0; i < sizeof(fuzz_limits) / sizeof(fuzz_limits[0]); i++)
        fuzz_head(data, size, &fuzz_limits[i], seed + i);

    /* The body after a good head (the usual case), else the whole input. */
    parse((const char *)data, size, &fuzz_limits[0], &g_whole);
    size_t start = g_whole.rc > 0 ? (size_t)g_whole.rc : 0;
    fuzz_chunked(data + start, size - start, seed);
    if (start > 0)
        fuzz_conn_reads(data, size, start, seed);
    return 0;
}
