/* libFuzzer target for the whole S3 request path over a real object layer.
 *
 * Raw HTTP bytes go through the real connection code (src/http/conn.c, via
 * the simulated peer of conn_sim.h) into the real router (ol_s3_handle), its
 * handlers and the object layer (obj/obj.h) with a real backend behind it:
 * an erasure-coded deployment of 4+2 over six directories, or one drive.
 * Both are opened once per process, in a scratch directory (tmpfs where
 * there is one, so that fdatasync costs nothing), and emptied after every
 * input, so each input starts from no buckets and a crash reproduces from
 * its one file.
 *
 * The input: one mode byte, then the byte stream a client sends (pipelined
 * requests, bodies, garbage).  The mode byte's bits:
 *   1  the backend: erasure sets (set) or one drive (clear);
 *   2  sign: the harness signs every request that reaches the router with
 *      SigV4 for the configured user (UNSIGNED-PAYLOAD unless the request
 *      names its own x-amz-content-sha256), so that inputs get past auth to
 *      the handlers; unsigned requests meet the 403 paths;
 *   4  the stream arrives in small seeded pieces instead of all at once.
 * So corpus files read as plain HTTP after a digit: '3' is EC and signed,
 * '2' one drive and signed, '1' and '0' the same unsigned.
 *
 * Signing happens at the handler's entry, on the parsed head: the request's
 * Authorization and x-amz-date headers are dropped, x-amz-date (now),
 * x-amz-content-sha256 and host are added when missing, and every header
 * is signed (the router sees them in a header array of the harness's for
 * that one call).  The bytes after the head go through the connection code
 * untouched, so chunked and aws-chunked bodies still meet the real decoders.
 * Likewise, whether signed or not, UPLOADID in a query stands for the last
 * upload id the connection was given (see substitute_upload_id); part
 * ETags need no such help: they are the MD5 of the part's bytes.
 *
 * Checked (abort on violation), besides what ASan/UBSan/LeakSanitizer catch:
 *  - each handler call sends exactly one final response (after at most one
 *    100 Continue), well formed: "HTTP/1.1 SSS" with 100 <= SSS <= 599, header
 *    lines of a token, ':' and a value without control bytes, one
 *    Content-Length or chunked framing that accounts for exactly the bytes
 *    sent (none after a HEAD's head); a call may send nothing only when the
 *    client's stream ended during it (the request was never complete);
 *  - what the connection code sends itself between requests (400, 431...)
 *    is well-formed responses too, and the connection gets closed;
 *  - the backend stays usable: after each input a signed CreateBucket,
 *    PutObject and GetObject of a fixed object round-trip (200s, same body),
 *    and emptying every bucket through the object layer succeeds.
 *
 * Bounds: inputs over 64 KiB are skipped; the object size is capped by the
 * configuration (max_object_bytes), parts may be tiny (min_part_bytes) so
 * that multipart completes within an input; nothing here sleeps: there is
 * no loop and no fiber, so the object layer runs in plain-thread mode (its
 * fan-outs run inline, its waits do not sleep), as conn_sim runs the
 * connection on the calling thread.
 *
 * Build and fuzz: scripts/fuzz.sh router 300.  Replay (what CI runs):
 * build/tests/fuzz/fuzz_router_replay tests/fuzz/corpus/router; with
 * FUZZ_ROUTER_TRACE=1 it prints what the server sent for each input.
 * tests/fuzz/gen_router_corpus.py writes the seeds.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "conn_sim.h"
#include "core/buf.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "deploy/deploy.h"
#include "http/conn.h"
#include "obj/obj.h"
#include "s3/router.h"
#include "s3/sigv4.h"
#include "store/store.h"

#define FUZZ_MAX_INPUT (64 * 1024)
#define FUZZ_NDRIVES 6

static const char ACCESS_KEY[] = "fuzzaccesskey";
static const char SECRET_KEY[] = "fuzzsecretkey/K7MDENG/bPxRfiCYEXAMPLEKEY";

#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz_router: %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            dump_out();                                                                       \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* ---- the backends, opened once ---- */

struct backend {
    const char *name;
    struct ol_obj *obj;
    struct ol_s3_router router;
};

static struct ol_cfg g_cfg;
static char g_root[256];
static struct ol_store *g_store;
static struct ol_deploy *g_deploy;
static struct backend g_be[2] = {{.name = "one drive"}, {.name = "EC 4+2"}};
static struct ol_http_conn_opts g_opts;

/* The simulation in progress, for the failure dump. */
static struct conn_sim *g_cur;

static void dump_out(void)
{
    if (g_cur && g_cur->out)
        fprintf(stderr, "--- server sent (%zu bytes):\n%.*s\n---\n", g_cur->out_len,
                (int)(g_cur->out_len > 6000 ? 6000 : g_cur->out_len), g_cur->out);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void close_backends(void)
{
    for (int i = 0; i < 2; i++)
        if (g_be[i].obj)
            ol_obj_close(g_be[i].obj);
    if (g_store)
        ol_store_close(g_store);
    if (g_deploy)
        ol_deploy_close(g_deploy);
    if (g_root[0])
        nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A run that crashed (the point of fuzzing) leaves its scratch directory:
 * the next run removes those whose process is gone (named by pid). */
static void sweep_stale(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    for (unsigned guard = 0; guard < 100000 && (e = readdir(d)) != NULL; guard++) {
        long pid;
        if (sscanf(e->d_name, "ol-fuzz-router-%ld-", &pid) != 1 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

static void open_backends(void)
{
    /* Quiet (FUZZ_ROUTER_LOG=1 says everything): the stores warn that tmpfs
     * refuses O_DIRECT, the handlers log the fuzzer's nonsense. */
    ol_log_level = getenv("FUZZ_ROUTER_LOG") ? OL_LOG_DEBUG : OL_LOG_ERROR - 1;
    ol_cfg_defaults(&g_cfg);
    g_cfg.ec_data = 4;
    g_cfg.ec_parity = 2;
    g_cfg.scrub_interval_ms = 0;
    g_cfg.max_object_bytes = 1 << 20;
    g_cfg.min_part_bytes = 1;
    g_cfg.body_memory_wait_ms = 0;
    FUZZ_CHECK(ol_cfg_add_user(&g_cfg, ACCESS_KEY, SECRET_KEY) == 0, "user");
    ol_bodymem_configure(256u << 20, 64u << 20);

    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
    if (!base)
        base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    sweep_stale(base);
    snprintf(g_root, sizeof(g_root), "%s/ol-fuzz-router-%ld-XXXXXX", base, (long)getpid());
    FUZZ_CHECK(mkdtemp(g_root) != NULL, "mkdtemp %s: %s", g_root, strerror(errno));
    atexit(close_backends);

    struct ol_store_opts so;
    ol_store_opts_default(&so);
    so.segment_bytes = 4u << 20;
    so.map_bytes = 256u << 20;
    so.max_loops = 1;
    so.compact_interval_ms = 3600000;

    char one[300];
    snprintf(one, sizeof(one), "%s/one", g_root);
    FUZZ_CHECK(mkdir(one, 0755) == 0, "mkdir %s", one);
    int rc = ol_store_open(&g_store, one, &so);
    FUZZ_CHECK(rc == 0, "ol_store_open: %d", rc);
    rc = ol_obj_open_store(g_store, &g_be[0].obj);
    FUZZ_CHECK(rc == 0, "ol_obj_open_store: %d", rc);

    static char dirs[FUZZ_NDRIVES][300];
    const char *dp[FUZZ_NDRIVES];
    for (int i = 0; i < FUZZ_NDRIVES; i++) {
        snprintf(dirs[i], sizeof(dirs[i]), "%s/d%d", g_root, i);
        FUZZ_CHECK(mkdir(dirs[i], 0755) == 0, "mkdir %s", dirs[i]);
        dp[i] = dirs[i];
    }
    char err[512] = "";
    rc = ol_deploy_open(&g_cfg, dp, FUZZ_NDRIVES, &so, &g_deploy, err, sizeof(err));
    FUZZ_CHECK(rc == 0, "ol_deploy_open: %d %s", rc, err);
    FUZZ_CHECK(g_deploy->k == 4 && g_deploy->m == 2, "geometry %u+%u", g_deploy->k,
               g_deploy->m);
    rc = ol_obj_open_ec(g_deploy, &g_be[1].obj);
    FUZZ_CHECK(rc == 0, "ol_obj_open_ec: %d", rc);

    for (int i = 0; i < 2; i++) {
        g_be[i].router.ctx.obj = g_be[i].obj;
        g_be[i].router.ctx.cfg = &g_cfg;
    }
    /* As the server sets them (server.c), with timeouts that never fire:
     * conn_sim has no clock to wait on. */
    g_opts.limits.max_head_bytes = (size_t)g_cfg.max_header_bytes;
    g_opts.limits.max_headers = (size_t)g_cfg.max_headers;
    g_opts.limits.max_target_bytes = (size_t)g_cfg.max_url_bytes;
    g_opts.idle_timeout_ms = 3600000;
    g_opts.io_timeout_ms = 3600000;
    g_opts.buf_bytes = (size_t)g_cfg.max_header_bytes + 64 * 1024;
}

/* ---- signing at the handler's entry ---- */

#define SIGN_MAX_HEADERS 160

static bool name_is(struct ol_slice s, const char *name)
{
    size_t n = strlen(name);
    return s.n == n && strncasecmp(s.p, name, n) == 0;
}

static int lower_cmp(const void *a, const void *b)
{
    const struct ol_slice *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    for (size_t i = 0; i < n; i++) {
        int cx = (unsigned char)x->p[i] | 0x20 * (x->p[i] >= 'A' && x->p[i] <= 'Z');
        int cy = (unsigned char)y->p[i] | 0x20 * (y->p[i] >= 'A' && y->p[i] <= 'Z');
        if (cx != cy)
            return cx - cy;
    }
    return (x->n > y->n) - (x->n < y->n);
}

struct signed_head {
    struct ol_http_header h[SIGN_MAX_HEADERS];
    size_t n;
    char amz_date[17];
    char signed_names[4096];
    char authz[4096 + 256];
};

/* Builds the signed header array for head into sh.  Returns false when the
 * request cannot be signed (too many or too long headers): it then goes to
 * the router as sent. */
static bool sign_head(const struct ol_http_request *head, struct signed_head *sh)
{
    static const char host[] = "fuzz.local";
    static const char unsigned_payload[] = "UNSIGNED-PAYLOAD";
    sh->n = 0;
    const struct ol_slice *payload = NULL;
    bool has_host = false;
    for (size_t i = 0; i < head->nheaders; i++) {
        struct ol_slice nm = head->headers[i].name;
        if (name_is(nm, "authorization") || name_is(nm, "x-amz-date"))
            continue;
        if (sh->n + 4 > SIGN_MAX_HEADERS)
            return false;
        if (name_is(nm, "x-amz-content-sha256") && !payload)
            payload = &head->headers[i].value;
        has_host |= name_is(nm, "host");
        sh->h[sh->n++] = head->headers[i];
    }
    time_t now = (time_t)(ol_wall_ns() / 1000000000);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(sh->amz_date, sizeof(sh->amz_date), "%Y%m%dT%H%M%SZ", &tm);
    sh->h[sh->n++] = (struct ol_http_header){{"x-amz-date", 10}, {sh->amz_date, 16}};
    if (!payload) {
        sh->h[sh->n++] = (struct ol_http_header){{"x-amz-content-sha256", 20},
                                                 {unsigned_payload, 16}};
        payload = &sh->h[sh->n - 1].value;
    }
    if (!has_host)
        sh->h[sh->n++] = (struct ol_http_header){{"Host", 4}, {host, sizeof(host) - 1}};

    /* SignedHeaders: every name, lowercase, sorted, once. */
    struct ol_slice names[SIGN_MAX_HEADERS];
    for (size_t i = 0; i < sh->n; i++)
        names[i] = sh->h[i].name;
    qsort(names, sh->n, sizeof(names[0]), lower_cmp);
    size_t len = 0;
    for (size_t i = 0; i < sh->n; i++) {
        if (i > 0 && lower_cmp(&names[i - 1], &names[i]) == 0)
            continue;
        if (len + names[i].n + 2 > sizeof(sh->signed_names))
            return false;
        if (len)
            sh->signed_names[len++] = ';';
        for (size_t j = 0; j < names[i].n; j++) {
            char c = names[i].p[j];
            sh->signed_names[len++] = (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
        }
    }
    sh->signed_names[len] = '\0';

    struct ol_sigv4_auth auth;
    memset(&auth, 0, sizeof(auth));
    auth.access_key = (struct ol_slice){ACCESS_KEY, sizeof(ACCESS_KEY) - 1};
    auth.date = (struct ol_slice){sh->amz_date, 8};
    auth.region = (struct ol_slice){g_cfg.region, strlen(g_cfg.region)};
    auth.service = (struct ol_slice){"s3", 2};
    auth.signed_headers = (struct ol_slice){sh->signed_names, len};
    memcpy(auth.amz_date, sh->amz_date, sizeof(auth.amz_date));
    auth.request_time = (int64_t)now;
    struct ol_sigv4_request sreq = {
        .method = head->method,
        .path = head->path,
        .query = head->query,
        .headers = sh->h,
        .nheaders = sh->n,
        .payload_hash = *payload,
    };
    char sig[65];
    /* A path or query with a bad escape cannot be signed: sent unsigned. */
    if (ol_sigv4_sign(&sreq, &auth, SECRET_KEY, sizeof(SECRET_KEY) - 1, sig) != 0)
        return false;
    int k = snprintf(sh->authz, sizeof(sh->authz),
                     "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/s3/aws4_request, "
                     "SignedHeaders=%s, Signature=%s",
                     ACCESS_KEY, sh->amz_date, g_cfg.region, sh->signed_names, sig);
    if (k < 0 || (size_t)k >= sizeof(sh->authz))
        return false;
    sh->h[sh->n++] = (struct ol_http_header){{"Authorization", 13}, {sh->authz, (size_t)k}};
    return true;
}

/* ---- checking what the server sent ---- */

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

struct resp {
    int status;
    size_t len;       /* head plus body */
    size_t body_off;  /* from the response's start */
    size_t body_len;  /* decoded for chunked */
};

/* Parses the response at out[0..n): checks its head and framing; returns its
 * extent.  A HEAD's response has no body whatever its Content-Length says. */
static struct resp parse_response(const char *out, size_t n, bool is_head)
{
    struct resp r = {0};
    const char *end = memmem(out, n, "\r\n\r\n", 4);
    FUZZ_CHECK(end != NULL, "response head without its end");
    size_t hl = (size_t)(end - out) + 4;
    FUZZ_CHECK(hl > 13 && memcmp(out, "HTTP/1.1 ", 9) == 0 && out[12] == ' ',
               "bad status line");
    FUZZ_CHECK(out[9] >= '1' && out[9] <= '5' && out[10] >= '0' && out[10] <= '9' &&
                   out[11] >= '0' && out[11] <= '9',
               "bad status");
    r.status = (out[9] - '0') * 100 + (out[10] - '0') * 10 + (out[11] - '0');
    const char *line = memchr(out, '\n', hl) + 1;
    int ncl = 0;
    bool chunked = false;
    uint64_t cl = 0;
    while (line < out + hl - 2) {
        const char *eol = memchr(line, '\r', (size_t)(out + hl - line));
        FUZZ_CHECK(eol && eol[1] == '\n', "header line without CRLF");
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        FUZZ_CHECK(colon && colon > line, "header line without a name");
        for (const char *p = line; p < colon; p++)
            FUZZ_CHECK(is_tchar((unsigned char)*p), "header name byte 0x%02x",
                       (unsigned char)*p);
        for (const char *p = colon + 1; p < eol; p++)
            FUZZ_CHECK((unsigned char)*p >= 0x20 ? *p != 0x7f : *p == '\t',
                       "control byte 0x%02x in a header value", (unsigned char)*p);
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        if (nl == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            ncl++;
            FUZZ_CHECK(v < eol, "empty Content-Length");
            cl = 0;
            for (const char *p = v; p < eol; p++) {
                FUZZ_CHECK(*p >= '0' && *p <= '9' && cl < UINT64_MAX / 10, "Content-Length");
                cl = cl * 10 + (uint64_t)(*p - '0');
            }
        }
        if (nl == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0)
            chunked = (size_t)(eol - v) == 7 && strncasecmp(v, "chunked", 7) == 0;
        line = eol + 2;
    }
    r.body_off = hl;
    if (r.status < 200) {
        FUZZ_CHECK(r.status == 100 && ncl == 0 && !chunked, "interim %d", r.status);
        r.len = hl;
        return r;
    }
    FUZZ_CHECK(ncl + chunked == 1, "framing: %d Content-Length, chunked %d", ncl, chunked);
    if (is_head || r.status == 204 || r.status == 304) {
        r.len = hl;
        return r;
    }
    if (!chunked) {
        FUZZ_CHECK(cl <= n - hl, "Content-Length %" PRIu64 " past the %zu bytes sent", cl,
                   n - hl);
        r.body_len = (size_t)cl;
        r.len = hl + (size_t)cl;
        return r;
    }
    size_t pos = hl;
    for (unsigned k = 0; k < 1u << 20; k++) {
        uint64_t sz = 0;
        size_t digits = 0;
        while (pos < n && strchr("0123456789abcdefABCDEF", out[pos]) && out[pos]) {
            char c = out[pos++];
            sz = sz * 16 + (uint64_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
            FUZZ_CHECK(++digits <= 15, "chunk size");
        }
        FUZZ_CHECK(digits > 0 && pos + 2 <= n && out[pos] == '\r' && out[pos + 1] == '\n',
                   "chunk size line");
        pos += 2;
        if (sz == 0) {
            FUZZ_CHECK(pos + 2 <= n && out[pos] == '\r' && out[pos + 1] == '\n', "last chunk");
            r.len = pos + 2;
            return r;
        }
        FUZZ_CHECK(sz + 2 <= n - pos && out[pos + sz] == '\r' && out[pos + sz + 1] == '\n',
                   "chunk data");
        r.body_len += (size_t)sz;
        pos += (size_t)sz + 2;
    }
    FUZZ_CHECK(0, "too many chunks");
    return r;
}

/* ---- the handler around ol_s3_handle ---- */

#define MAX_CALLS 4096

struct call {
    size_t out_start, out_end;
    bool is_head;
    bool ended;  /* the client's stream ended during the call */
    int rc;
};

struct run {
    struct backend *be;
    bool sign;
    struct conn_sim *sim;
    struct call calls[MAX_CALLS];
    unsigned ncalls;
    char upload_id[64]; /* the last one created: see substitute_upload_id */
};

/* Upload ids are random: no input could name one.  So the literal
 * UPLOADID in a request's query stands for the id of the last upload that
 * CreateMultipartUpload returned on this connection (the target is
 * rewritten before signing, so the signature covers the real id). */
static void substitute_upload_id(struct run *run, struct ol_http_request *h)
{
    static char target[8192];
    static const char TOKEN[] = "UPLOADID";
    const size_t tn = sizeof(TOKEN) - 1;
    if (!run->upload_id[0] || !h->query.n || !memmem(h->query.p, h->query.n, TOKEN, tn))
        return;
    size_t idn = strlen(run->upload_id), n = 0;
    if (h->path.n + 1 + h->query.n * (1 + idn) > sizeof(target))
        return;
    memcpy(target, h->path.p, h->path.n);
    n = h->path.n;
    target[n++] = '?';
    for (size_t i = 0; i < h->query.n;) {
        if (h->query.n - i >= tn && memcmp(h->query.p + i, TOKEN, tn) == 0) {
            memcpy(target + n, run->upload_id, idn);
            n += idn;
            i += tn;
        } else {
            target[n++] = h->query.p[i++];
        }
    }
    h->target = (struct ol_slice){target, n};
    h->path = (struct ol_slice){target, h->path.n};
    h->query = (struct ol_slice){target + h->path.n + 1, n - h->path.n - 1};
}

static void remember_upload_id(struct run *run, const char *out, size_t n)
{
    const char *p = memmem(out, n, "<UploadId>", 10);
    if (!p)
        return;
    p += 10;
    const char *e = memmem(p, n - (size_t)(p - out), "</UploadId>", 11);
    if (!e || e == p || (size_t)(e - p) >= sizeof(run->upload_id))
        return;
    memcpy(run->upload_id, p, (size_t)(e - p));
    run->upload_id[e - p] = '\0';
}

static int fuzz_handler(void *ctx, struct ol_http_conn *c, struct ol_http_req *req)
{
    struct run *run = ctx;
    struct call *call = run->ncalls < MAX_CALLS ? &run->calls[run->ncalls++] : NULL;
    if (call) {
        call->out_start = run->sim->out_len;
        call->is_head = req->is_head;
    }
    static struct signed_head sh;
    struct ol_http_request orig = req->head;
    substitute_upload_id(run, &req->head);
    if (run->sign && sign_head(&req->head, &sh)) {
        req->head.headers = sh.h;
        req->head.nheaders = sh.n;
    }
    size_t out_start = run->sim->out_len;
    int rc = ol_s3_handle(&run->be->router, c, req);
    req->head = orig;
    remember_upload_id(run, run->sim->out + out_start, run->sim->out_len - out_start);
    if (call) {
        call->out_end = run->sim->out_len;
        call->ended = run->sim->off == run->sim->len;
        call->rc = rc;
    }
    return rc;
}

/* Checks the transcript of a run; writes up to maxst final statuses of the
 * handler calls to st (and the body of the last to *body). */
static void check_run(struct run *run, int *st, unsigned maxst, const char **body,
                      size_t *body_len)
{
    struct conn_sim *s = run->sim;
    FUZZ_CHECK(s->closed, "connection not closed");
    size_t pos = 0;
    for (unsigned i = 0; i <= run->ncalls; i++) {
        /* What the connection code sent before this call (or after the last). */
        size_t gap_end = i < run->ncalls ? run->calls[i].out_start : s->out_len;
        FUZZ_CHECK(pos <= gap_end, "calls overlap");
        while (pos < gap_end) {
            struct resp r = parse_response(s->out + pos, gap_end - pos, false);
            pos += r.len;
        }
        if (i == run->ncalls)
            break;
        struct call *c = &run->calls[i];
        unsigned finals = 0;
        while (pos < c->out_end) {
            struct resp r = parse_response(s->out + pos, c->out_end - pos, c->is_head);
            if (r.status >= 200) {
                FUZZ_CHECK(finals == 0, "request %u: a second response (%d)", i, r.status);
                finals++;
                if (i < maxst)
                    st[i] = r.status;
                if (body) {
                    *body = s->out + pos + r.body_off;
                    *body_len = r.body_len;
                }
            }
            pos += r.len;
        }
        FUZZ_CHECK(pos == c->out_end, "request %u: response runs past the call", i);
        FUZZ_CHECK(finals == 1 || c->ended, "request %u: %u responses (handler rc %d)", i,
                   finals, c->rc);
    }
}

static void serve(struct run *run, const uint8_t *data, size_t size, enum conn_sim_split split,
                  uint64_t seed)
{
    static struct conn_sim sim;
    memset(&sim, 0, sizeof(sim));
    sim.in = data;
    sim.len = size;
    sim.split = split;
    sim.seed = seed | 1;
    sim.max_piece = 1 + (size_t)(seed >> 40) % 512;
    run->sim = &sim;
    run->ncalls = 0;
    run->upload_id[0] = '\0';
    g_cur = &sim;
    conn_sim_run(&sim, &g_opts, fuzz_handler, run);
}

/* ---- after each input ---- */

static const char PROBE_BODY[] = "the object layer still works\n";

/* A signed CreateBucket (200, or 409 if the input made it), PutObject and
 * GetObject of a fixed object. */
static void probe(struct backend *be)
{
    static char script[1024];
    int n = snprintf(script, sizeof(script),
                     "PUT /fuzz-probe HTTP/1.1\r\nHost: fuzz.local\r\nContent-Length: 0\r\n\r\n"
                     "PUT /fuzz-probe/probe HTTP/1.1\r\nHost: fuzz.local\r\n"
                     "Content-Length: %zu\r\n\r\n%s"
                     "GET /fuzz-probe/probe HTTP/1.1\r\nHost: fuzz.local\r\n"
                     "Connection: close\r\n\r\n",
                     sizeof(PROBE_BODY) - 1, PROBE_BODY);
    static struct run run;
    run.be = be;
    run.sign = true;
    serve(&run, (const uint8_t *)script, (size_t)n, SIM_WHOLE, 0);
    int st[3] = {0, 0, 0};
    const char *body = NULL;
    size_t blen = 0;
    check_run(&run, st, 3, &body, &blen);
    FUZZ_CHECK(run.ncalls == 3, "probe on %s: %u requests", be->name, run.ncalls);
    FUZZ_CHECK((st[0] == 200 || st[0] == 409) && st[1] == 200 && st[2] == 200,
               "probe on %s: statuses %d %d %d", be->name, st[0], st[1], st[2]);
    FUZZ_CHECK(body && blen == sizeof(PROBE_BODY) - 1 && memcmp(body, PROBE_BODY, blen) == 0,
               "probe on %s: GET gave another body", be->name);
    conn_sim_free(run.sim);
    g_cur = NULL;
}

struct names {
    char (*v)[64];
    size_t n, cap;
};

static int collect_bucket(void *ctx, const struct ol_bucket_info *b)
{
    struct names *nm = ctx;
    if (nm->n == nm->cap) {
        nm->cap = nm->cap ? nm->cap * 2 : 16;
        nm->v = realloc(nm->v, nm->cap * sizeof(*nm->v));
        FUZZ_CHECK(nm->v != NULL, "realloc");
    }
    memcpy(nm->v[nm->n++], b->name, 64);
    return 0;
}

static int collect_upload(void *ctx, const struct ol_upload_info *u)
{
    struct names *nm = ctx;
    if (nm->n == nm->cap) {
        nm->cap = nm->cap ? nm->cap * 2 : 16;
        nm->v = realloc(nm->v, nm->cap * sizeof(*nm->v));
        FUZZ_CHECK(nm->v != NULL, "realloc");
    }
    snprintf(nm->v[nm->n++], 64, "%s", u->upload_id);
    return 0;
}

struct version {
    char *key;
    size_t key_len;
    char vid[OL_STORE_VID_MAX];
};

/* Empties the backend through the object layer: every version of every
 * key, every upload, every bucket.  Each step must succeed. */
static void reset(struct backend *be)
{
    struct ol_obj *o = be->obj;
    struct names buckets = {0};
    int rc = ol_obj_bucket_list(o, collect_bucket, &buckets);
    FUZZ_CHECK(rc == 0, "%s: bucket list: %d", be->name, rc);
    for (size_t b = 0; b < buckets.n; b++) {
        const char *bucket = buckets.v[b];
        struct names ups = {0};
        rc = ol_obj_upload_list(o, bucket, collect_upload, &ups);
        FUZZ_CHECK(rc == 0, "%s: upload list %s: %d", be->name, bucket, rc);
        for (size_t i = 0; i < ups.n; i++) {
            rc = ol_obj_upload_abort(o, bucket, ups.v[i]);
            FUZZ_CHECK(rc == 0, "%s: upload abort %s %s: %d", be->name, bucket, ups.v[i], rc);
        }
        free(ups.v);

        /* Collected first: deleting while iterating is not the contract. */
        struct version *vs = NULL;
        size_t nv = 0, cap = 0;
        struct ol_obj_viter *it = NULL;
        rc = ol_obj_viter_open(o, bucket, &it);
        FUZZ_CHECK(rc == 0, "%s: viter %s: %d", be->name, bucket, rc);
        for (unsigned guard = 0; guard < 1u << 20; guard++) {
            const char *key;
            size_t klen;
            struct ol_version_info vi;
            rc = ol_obj_viter_next(it, &key, &klen, &vi);
            FUZZ_CHECK(rc >= 0, "%s: viter next %s: %d", be->name, bucket, rc);
            if (rc == 1)
                break;
            if (nv == cap) {
                cap = cap ? cap * 2 : 16;
                vs = realloc(vs, cap * sizeof(*vs));
                FUZZ_CHECK(vs != NULL, "realloc");
            }
            vs[nv].key = malloc(klen ? klen : 1);
            FUZZ_CHECK(vs[nv].key != NULL, "malloc");
            memcpy(vs[nv].key, key, klen);
            vs[nv].key_len = klen;
            memcpy(vs[nv].vid, vi.vid, sizeof(vi.vid));
            nv++;
        }
        ol_obj_viter_close(it);
        for (size_t i = 0; i < nv; i++) {
            struct ol_store_del_res res;
            memset(&res, 0, sizeof(res));
            rc = ol_obj_delete_v(o, bucket, vs[i].key, vs[i].key_len, vs[i].vid, &res);
            FUZZ_CHECK(rc == 0 || rc == -OL_ENOKEY || rc == -OL_ENOVERSION, "%s: delete %s/%.*s v %s: %d", be->name,
                       bucket, (int)vs[i].key_len, vs[i].key, vs[i].vid, rc);
            free(vs[i].key);
        }
        free(vs);
        rc = ol_obj_bucket_delete(o, bucket);
        FUZZ_CHECK(rc == 0, "%s: bucket delete %s: %d (%s)", be->name, bucket, rc,
                   ol_strerror(rc));
    }
    free(buckets.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool opened;
    if (!opened) {
        open_backends();
        opened = true;
    }
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return 0;
    uint8_t mode = data[0];
    struct backend *be = &g_be[mode & 1];
    static struct run run;
    run.be = be;
    run.sign = (mode & 2) != 0;
    uint64_t seed = conn_sim_seed(data, size);
    serve(&run, data + 1, size - 1, (mode & 4) ? SIM_SEEDED : SIM_WHOLE, seed);
    check_run(&run, NULL, 0, NULL, NULL);
    if (getenv("FUZZ_ROUTER_TRACE"))
        fprintf(stderr, "--- %s, %s, %u requests; the server sent:\n%s\n", be->name,
                run.sign ? "signed" : "unsigned", run.ncalls, run.sim->out);
    conn_sim_free(run.sim);
    g_cur = NULL;
    probe(be);
    reset(be);
    return 0;
}
