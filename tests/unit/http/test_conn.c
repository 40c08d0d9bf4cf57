/* Unit test of the HTTP/1.1 connection code (src/http/conn.c), run without a
 * socket through the simulated peer of tests/fuzz/conn_sim.h:
 *  - the request head's slices keep their bytes while a body is read, however
 *    head and body are split into receives (byte by byte included);
 *  - ambiguous framing (repeated or conflicting Transfer-Encoding and
 *    Content-Length, repeated Host) is refused with 400 and the connection
 *    closed, so a request hidden in the body never runs;
 *  - response headers with control bytes are left out of the head;
 *  - a response head larger than the old fixed 8 KiB goes out whole, and one
 *    that cannot be built at all becomes a 500.
 * Exits 0 on success, 1 on failure. */
#include "http/conn.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conn_sim.h"

#define MAXH 100

static struct ol_http_conn_opts opts = {
    .limits = {.max_head_bytes = 16384, .max_headers = MAXH, .max_target_bytes = 4096},
    .idle_timeout_ms = 60000,
    .io_timeout_ms = 60000,
    .buf_bytes = 16384 + 65536,
};

/* What the test handler saw, request by request. */
#define MAX_REQS 8
struct seen {
    unsigned nreq;
    char target[MAX_REQS][256];
    char md5[MAX_REQS][64];
    char body[MAX_REQS][4096];
    size_t body_len[MAX_REQS];
    int body_rc[MAX_REQS];
    bool slices_intact[MAX_REQS];
    /* Response behaviour. */
    const struct ol_http_hdr *resp_hdrs;
    size_t resp_nhdrs;
    bool streamed;
    int respond_rc[MAX_REQS];
};

static void slice_copy(char *out, size_t cap, struct ol_slice s)
{
    size_t n = s.n < cap - 1 ? s.n : cap - 1;
    memcpy(out, s.p, n);
    out[n] = '\0';
}

/* Copies every byte the head's slices point at, with the pointers. */
struct head_copy {
    const char *p[2 * MAXH + 4];
    size_t n[2 * MAXH + 4];
    char *bytes;
    size_t k;
};

static void head_snapshot(const struct ol_http_request *h, struct head_copy *hc)
{
    size_t total = h->method.n + h->target.n + h->path.n + h->query.n;
    for (size_t i = 0; i < h->nheaders; i++)
        total += h->headers[i].name.n + h->headers[i].value.n;
    hc->bytes = malloc(total + 1);
    hc->k = 0;
    size_t off = 0;
    struct ol_slice all[2 * MAXH + 4];
    size_t m = 0;
    all[m++] = h->method;
    all[m++] = h->target;
    all[m++] = h->path;
    all[m++] = h->query;
    for (size_t i = 0; i < h->nheaders; i++) {
        all[m++] = h->headers[i].name;
        all[m++] = h->headers[i].value;
    }
    for (size_t i = 0; i < m; i++) {
        hc->p[i] = all[i].p;
        hc->n[i] = all[i].n;
        memcpy(hc->bytes + off, all[i].p, all[i].n);
        off += all[i].n;
    }
    hc->k = m;
}

static bool head_unchanged(const struct head_copy *hc)
{
    size_t off = 0;
    for (size_t i = 0; i < hc->k; i++) {
        if (memcmp(hc->bytes + off, hc->p[i], hc->n[i]) != 0)
            return false;
        off += hc->n[i];
    }
    return true;
}

static int handler(void *ctx, struct ol_http_conn *c, struct ol_http_req *req)
{
    struct seen *s = ctx;
    unsigned i = s->nreq++;
    if (i >= MAX_REQS)
        return -EINVAL;
    struct head_copy hc;
    head_snapshot(&req->head, &hc);
    slice_copy(s->target[i], sizeof(s->target[i]), req->head.target);
    /* Read the body in small pieces, so a chunked one needs many receives. */
    size_t got = 0;
    int rc = 0;
    for (;;) {
        char piece[7];
        ssize_t n = ol_http_body_read(c, piece, sizeof(piece));
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (n == 0)
            break;
        if (got + (size_t)n <= sizeof(s->body[i]))
            memcpy(s->body[i] + got, piece, (size_t)n);
        got += (size_t)n;
    }
    s->body_len[i] = got;
    s->body_rc[i] = rc;
    /* What the S3 layer does after the body: look a header up again. */
    const struct ol_slice *md5 = ol_http_find_header(&req->head, "content-md5");
    if (md5)
        slice_copy(s->md5[i], sizeof(s->md5[i]), *md5);
    s->slices_intact[i] = head_unchanged(&hc);
    free(hc.bytes);
    if (s->streamed) {
        rc = ol_http_resp_begin(c, 200, s->resp_hdrs, s->resp_nhdrs, 2);
        if (rc == 0)
            rc = ol_http_resp_write(c, "ok", 2);
    } else {
        rc = ol_http_respond(c, 200, s->resp_hdrs, s->resp_nhdrs, "ok", 2);
    }
    s->respond_rc[i] = rc;
    return rc;
}

static int run(const char *script, size_t len, enum conn_sim_split split, const size_t *cuts,
               size_t ncuts, struct seen *s, struct conn_sim *sim)
{
    memset(sim, 0, sizeof(*sim));
    sim->in = (const uint8_t *)script;
    sim->len = len;
    sim->split = split;
    sim->cuts = cuts;
    sim->ncuts = ncuts;
    sim->seed = 0x9e3779b97f4a7c15ull;
    sim->max_piece = 13;
    conn_sim_run(sim, &opts, handler, s);
    return 0;
}

/* Counts the response status lines in out (interim 100s left out). */
static unsigned count_responses(const char *out, int status)
{
    char pat[32];
    snprintf(pat, sizeof(pat), "HTTP/1.1 %d ", status);
    unsigned n = 0;
    for (const char *p = out; (p = strstr(p, pat)) != NULL; p++)
        n++;
    return n;
}

/* ---- the head stays put while the body is read ---- */

static const char chunked_put[] = "PUT /bkt/key?x=1 HTTP/1.1\r\n"
                                  "Host: example\r\n"
                                  "Content-MD5: AAAAAAAAAAAAAAAAAAAAAA==\r\n"
                                  "x-amz-meta-color: blue\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "\r\n";

static void test_head_survives_chunked_body(void)
{
    /* A chunked body much larger than the head, so the buffer is refilled
     * many times after the head. */
    char body_plain[3000];
    for (size_t i = 0; i < sizeof(body_plain); i++)
        body_plain[i] = (char)('a' + i % 26);
    char *script = malloc(8192);
    size_t n = 0;
    memcpy(script, chunked_put, sizeof(chunked_put) - 1);
    n = sizeof(chunked_put) - 1;
    size_t head_len = n;
    for (size_t off = 0; off < sizeof(body_plain); off += 500) {
        n += (size_t)sprintf(script + n, "%x\r\n", 500);
        memcpy(script + n, body_plain + off, 500);
        n += 500;
        memcpy(script + n, "\r\n", 2);
        n += 2;
    }
    memcpy(script + n, "0\r\n\r\n", 5);
    n += 5;

    size_t head_cut[] = {head_len};
    size_t odd_cuts[] = {head_len - 3, head_len + 1, head_len + 600, head_len + 1201};
    struct {
        enum conn_sim_split split;
        const size_t *cuts;
        size_t ncuts;
    } plans[] = {
        {SIM_WHOLE, NULL, 0},        {SIM_CUTS, head_cut, 1}, {SIM_CUTS, odd_cuts, 4},
        {SIM_BYTES, NULL, 0},        {SIM_SEEDED, NULL, 0},
    };
    for (size_t p = 0; p < sizeof(plans) / sizeof(plans[0]); p++) {
        struct seen s = {0};
        struct conn_sim sim;
        run(script, n, plans[p].split, plans[p].cuts, plans[p].ncuts, &s, &sim);
        CHECK(s.nreq == 1);
        CHECK(s.body_rc[0] == 0);
        CHECK(s.body_len[0] == sizeof(body_plain));
        CHECK(memcmp(s.body[0], body_plain, sizeof(body_plain)) == 0);
        if (!s.slices_intact[0])
            fprintf(stderr, "plan %zu: head slices changed while the body was read\n", p);
        CHECK(s.slices_intact[0]);
        CHECK(strcmp(s.md5[0], "AAAAAAAAAAAAAAAAAAAAAA==") == 0);
        CHECK(strcmp(s.target[0], "/bkt/key?x=1") == 0);
        CHECK(count_responses(sim.out, 200) == 1);
        conn_sim_free(&sim);
    }
    free(script);
}

/* Pipelined requests, each with a chunked body, the second head arriving
 * with the first body: both heads stay intact. */
static void test_pipelined_chunked(void)
{
    char script[4096];
    size_t n = 0;
    for (int r = 0; r < 3; r++) {
        n += (size_t)sprintf(script + n,
                             "POST /r%d HTTP/1.1\r\nHost: h\r\nContent-MD5: md5-%d\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n"
                             "5\r\nhello\r\n3;ext=1\r\n-%02d\r\n0\r\nTrailer: x\r\n\r\n",
                             r, r, r);
    }
    for (int split = SIM_WHOLE; split <= SIM_SEEDED; split++) {
        struct seen s = {0};
        struct conn_sim sim;
        run(script, n, (enum conn_sim_split)split, NULL, 0, &s, &sim);
        CHECK(s.nreq == 3);
        for (unsigned i = 0; i < 3 && i < s.nreq; i++) {
            char want[32];
            snprintf(want, sizeof(want), "/r%u", i);
            CHECK(strcmp(s.target[i], want) == 0);
            snprintf(want, sizeof(want), "md5-%u", i);
            CHECK(strcmp(s.md5[i], want) == 0);
            snprintf(want, sizeof(want), "hello-%02u", i);
            CHECK(s.body_len[i] == 8 && memcmp(s.body[i], want, 8) == 0);
            CHECK(s.slices_intact[i]);
        }
        CHECK(count_responses(sim.out, 200) == 3);
        conn_sim_free(&sim);
    }
}

/* ---- framing: smuggling attempts are refused ---- */

static void expect_refused(const char *what, const char *first_head)
{
    /* The request under test, a body that ends a chunked message, and a
     * DELETE behind it that must never reach the handler. */
    char script[2048];
    int n = snprintf(script, sizeof(script),
                     "%s0\r\n\r\nDELETE /bkt/victim HTTP/1.1\r\nHost: h\r\n\r\n", first_head);
    for (int split = SIM_WHOLE; split <= SIM_BYTES; split++) {
        struct seen s = {0};
        struct conn_sim sim;
        run(script, (size_t)n, (enum conn_sim_split)split, NULL, 0, &s, &sim);
        if (s.nreq != 0 || count_responses(sim.out, 400) != 1)
            fprintf(stderr, "%s: %u request(s) reached the handler; sent:\n%s\n", what, s.nreq,
                    sim.out);
        CHECK(s.nreq == 0);
        CHECK(count_responses(sim.out, 400) == 1);
        CHECK(strstr(sim.out, "Connection: close\r\n") != NULL);
        CHECK(sim.closed);
        conn_sim_free(&sim);
    }
}

static void expect_accepted(const char *what, const char *script, size_t body_len)
{
    struct seen s = {0};
    struct conn_sim sim;
    run(script, strlen(script), SIM_WHOLE, NULL, 0, &s, &sim);
    if (s.nreq != 1)
        fprintf(stderr, "%s: refused; sent:\n%s\n", what, sim.out);
    CHECK(s.nreq == 1);
    CHECK(s.body_rc[0] == 0 && s.body_len[0] == body_len);
    conn_sim_free(&sim);
}

static void test_framing(void)
{
    expect_refused("TE chunked then identity",
                   "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                   "Transfer-Encoding: identity\r\n\r\n");
    expect_refused("TE identity then chunked",
                   "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n");
    expect_refused("TE chunked twice",
                   "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                   "transfer-encoding: chunked\r\n\r\n");
    expect_refused("TE list", "POST /a HTTP/1.1\r\nHost: h\r\n"
                              "Transfer-Encoding: gzip, chunked\r\n\r\n");
    expect_refused("TE chunked, chunked", "POST /a HTTP/1.1\r\nHost: h\r\n"
                                          "Transfer-Encoding: chunked, chunked\r\n\r\n");
    expect_refused("TE identity", "POST /a HTTP/1.1\r\nHost: h\r\n"
                                  "Transfer-Encoding: identity\r\n\r\n");
    expect_refused("TE with CL", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n");
    expect_refused("TE in HTTP/1.0", "POST /a HTTP/1.0\r\nHost: h\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n");
    expect_refused("CL twice, equal", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                                      "Content-Length: 5\r\n\r\n");
    expect_refused("CL twice, different", "POST /a HTTP/1.1\r\nHost: h\r\n"
                                          "Content-Length: 5\r\nContent-Length: 0\r\n\r\n");
    expect_refused("CL list", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n");
    expect_refused("CL sign", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n");
    expect_refused("Host twice", "POST /a HTTP/1.1\r\nHost: h\r\nHost: evil\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n");

    expect_accepted("TE Chunked", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n"
                                  "\r\n3\r\nabc\r\n0\r\n\r\n", 3);
    expect_accepted("one CL", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", 3);
    expect_accepted("no Host in 1.0", "GET /a HTTP/1.0\r\n\r\n", 0);
}

/* ---- response heads ---- */

static void test_control_bytes_left_out(void)
{
    static const char req[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    struct ol_http_hdr hdrs[] = {
        {"Content-Type", "text/html\r\nSet-Cookie: pwn=1\r\n\r\n<script>"},
        {"x-amz-meta-ok", "fine\tvalue"},
        {"Bad Name", "v"},
        {"x-amz-meta-nl", "a\nb"},
        {"x-amz-meta-del", "a\x7f"},
        {"ETag", "\"abc\""},
    };
    for (int streamed = 0; streamed < 2; streamed++) {
        struct seen s = {.resp_hdrs = hdrs, .resp_nhdrs = 6, .streamed = streamed};
        struct conn_sim sim;
        run(req, sizeof(req) - 1, SIM_WHOLE, NULL, 0, &s, &sim);
        CHECK(s.nreq == 1 && s.respond_rc[0] == 0);
        CHECK(count_responses(sim.out, 200) == 1);
        CHECK(strstr(sim.out, "Set-Cookie") == NULL);
        CHECK(strstr(sim.out, "<script>") == NULL);
        CHECK(strstr(sim.out, "Content-Type") == NULL);
        CHECK(strstr(sim.out, "Bad Name") == NULL);
        CHECK(strstr(sim.out, "x-amz-meta-nl") == NULL);
        CHECK(strstr(sim.out, "x-amz-meta-del") == NULL);
        CHECK(strstr(sim.out, "x-amz-meta-ok: fine\tvalue\r\n") != NULL);
        CHECK(strstr(sim.out, "ETag: \"abc\"\r\n") != NULL);
        /* The body follows the one empty line that ends the head. */
        const char *end = strstr(sim.out, "\r\n\r\n");
        CHECK(end != NULL && strcmp(end + 4, "ok") == 0);
        conn_sim_free(&sim);
    }
}

static void test_large_heads(void)
{
    /* Two requests on one connection: the second shows the connection went
     * on after the large response. */
    static const char req[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t sizes[] = {100, 900, 1500, 8000, 8192, 16000, 16384 + 4096};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        char *v = malloc(sizes[k] + 1);
        memset(v, 'd', sizes[k]);
        v[sizes[k]] = '\0';
        struct ol_http_hdr hdrs[] = {{"Content-Disposition", v}, {"ETag", "\"e\""}};
        for (int streamed = 0; streamed < 2; streamed++) {
            struct seen s = {.resp_hdrs = hdrs, .resp_nhdrs = 2, .streamed = streamed};
            struct conn_sim sim;
            run(req, sizeof(req) - 1, SIM_WHOLE, NULL, 0, &s, &sim);
            CHECK(s.nreq == 2 && s.respond_rc[0] == 0 && s.respond_rc[1] == 0);
            CHECK(count_responses(sim.out, 200) == 2);
            const char *cd = strstr(sim.out, "Content-Disposition: ");
            CHECK(cd != NULL && strspn(cd + 21, "d") == sizes[k]);
            conn_sim_free(&sim);
        }
        free(v);
    }

    /* Past the request-head limit plus the server's own room: a 500, and
     * the connection ends there. */
    size_t huge = 16384 + 8192;
    char *v = malloc(huge + 1);
    memset(v, 'd', huge);
    v[huge] = '\0';
    struct ol_http_hdr hdrs[] = {{"Content-Disposition", v}};
    for (int streamed = 0; streamed < 2; streamed++) {
        struct seen s = {.resp_hdrs = hdrs, .resp_nhdrs = 1, .streamed = streamed};
        struct conn_sim sim;
        run(req, sizeof(req) - 1, SIM_WHOLE, NULL, 0, &s, &sim);
        CHECK(s.nreq == 1 && s.respond_rc[0] == -E2BIG);
        CHECK(count_responses(sim.out, 500) == 1);
        CHECK(count_responses(sim.out, 200) == 0);
        CHECK(strstr(sim.out, "Connection: close\r\n") != NULL);
        CHECK(strstr(sim.out, "Content-Disposition") == NULL);
        conn_sim_free(&sim);
    }
    free(v);
}

/* ---- write fencing (ol_http_conn_opts.may_ack_write) ---- */

static bool fence_open;
static bool may_ack(void)
{
    return fence_open;
}

/* A fenced node answers a PUT, POST or DELETE success with 503, plain and
 * streamed, and still answers reads; an open fence changes nothing. */
static void test_write_fence(void)
{
    static const char script[] = "PUT /b/k HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi"
                                 "GET /b/k HTTP/1.1\r\nHost: h\r\n\r\n"
                                 "DELETE /b/k HTTP/1.1\r\nHost: h\r\n\r\n";
    opts.may_ack_write = may_ack;
    for (int streamed = 0; streamed < 2; streamed++) {
        for (int open = 0; open < 2; open++) {
            fence_open = open;
            struct seen s = {0};
            s.streamed = streamed;
            struct conn_sim sim;
            run(script, sizeof(script) - 1, SIM_WHOLE, NULL, 0, &s, &sim);
            if (open) {
                CHECK(s.nreq == 3 && count_responses(sim.out, 200) == 3);
                CHECK(count_responses(sim.out, 503) == 0);
            } else if (!streamed) {
                CHECK(s.nreq == 3 && count_responses(sim.out, 200) == 1);
                CHECK(count_responses(sim.out, 503) == 2);
                CHECK(strstr(sim.out, "ServiceUnavailable") != NULL);
            } else {
                /* The streamed 503 closes the connection. */
                CHECK(s.nreq == 1 && count_responses(sim.out, 503) == 1);
                CHECK(count_responses(sim.out, 200) == 0);
            }
            conn_sim_free(&sim);
        }
    }
    opts.may_ack_write = NULL;
}

int main(void)
{
    test_write_fence();
    test_head_survives_chunked_body();
    test_pipelined_chunked();
    test_framing();
    test_control_bytes_left_out();
    test_large_heads();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_conn: ok\n");
    return 0;
}
