/* `openlake bench`: see bench.h.
 *
 * Structure: the main thread parses options, sets up (bucket, --prepare),
 * starts the workers and prints a line per second from their counters.
 * Each worker owns an epoll instance and its share of the connections and of
 * the keys (key i belongs to worker i % threads), so workers share nothing
 * but read-only configuration and the counters that only they write.
 *
 * A connection runs one "task" at a time: a GET, PUT, HEAD, DELETE, one LIST
 * page, or a whole multipart upload (create, parts, complete).  A task is
 * a sequence of HTTP requests on the same connection; the latency recorded
 * is the task's.
 */
#include "cli/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "s3/sigv4.h"

/* ---- limits ---- */

#define MAX_SIZES 16
#define MAX_THREADS 64
#define MAX_CONNS 4096
#define RBUF_BYTES (256 * 1024) /* receive buffer per connection */
#define HEAD_BYTES 4096         /* request head, signed */
#define RESP_HEAD_MAX 16384     /* response heads longer than this are an error */
#define COLLECT_MAX (8u << 20)  /* largest body kept (LIST pages, XML errors) */
#define MAX_PARTS 10000
#define PICK_TRIES 16           /* random picks for a free key before giving up */
#define EVENTS_PER_WAIT 256
#define PATTERN_SLACK (8 * 4096) /* object windows start at one of 4096 offsets */

#define HIST_SUB 16
#define HIST_N (48 * HIST_SUB)

enum op { OP_GET, OP_PUT, OP_HEAD, OP_DELETE, OP_LIST, OP_N, OP_MIXED = OP_N };
static const char *const op_names[OP_N] = {"get", "put", "head", "delete", "list"};

enum err_kind { E_4XX, E_5XX, E_HTTP_OTHER, E_CONNECT, E_IO, E_PROTO, E_VERIFY, E_N };
static const char *const err_names[E_N] = {"http_4xx", "http_5xx", "http_other", "connect",
                                           "io",       "protocol", "verify"};

/* ---- options ---- */

struct bench_opts {
    char host[256];
    char hostport[300];
    struct sockaddr_in addr;
    const char *access_key, *secret_key, *region, *bucket, *prefix;
    const char *path_template; /* --no-sign: "/files/obj-%d" */
    const char *json_path, *write_files;
    int concurrency, prepare_concurrency, threads;
    uint64_t sizes[MAX_SIZES];
    unsigned size_weights[MAX_SIZES];
    int nsizes;
    uint64_t max_size;
    double duration_s;
    uint32_t objects;
    int op;                   /* enum op or OP_MIXED */
    unsigned mix[OP_N];       /* weights for OP_MIXED */
    uint64_t range_bytes;     /* 0: whole objects */
    uint64_t multipart_bytes; /* 0: never */
    bool prepare, no_sign, verify, quiet;
    uint64_t seed;
};

static struct bench_opts O;

/* The pattern every object body is a window of. */
static char *pattern;
static size_t pattern_len;

/* Per key: bit 15 exists, bit 14 a write (PUT/DELETE) in flight, bits 0-13 GETs
 * in flight.  Each worker touches only its own keys. */
#define K_EXISTS 0x8000u
#define K_WRITING 0x4000u
#define K_READERS 0x3fffu
static uint16_t *keystate;

static volatile int g_stop;      /* set by the main thread at the deadline or on a signal */
static volatile int g_interrupt; /* SIGINT seen */

/* ---- small helpers ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return mix64(*s);
}

/* Object i's size: the only size, or a weighted pick by a hash of i, so that
 * the size is a function of the key and every reader knows it. */
static uint64_t key_size(uint32_t i)
{
    if (O.nsizes == 1)
        return O.sizes[0];
    unsigned total = 0;
    for (int s = 0; s < O.nsizes; s++)
        total += O.size_weights[s];
    unsigned r = (unsigned)(mix64(i ^ 0x5eedull) % total);
    for (int s = 0; s < O.nsizes; s++) {
        if (r < O.size_weights[s])
            return O.sizes[s];
        r -= O.size_weights[s];
    }
    return O.sizes[O.nsizes - 1];
}

/* Where object i's bytes start in the pattern (8-byte aligned). */
static const char *key_body(uint32_t i, uint64_t size)
{
    uint64_t off = (mix64((uint64_t)i * 31 + size) % (PATTERN_SLACK / 8)) * 8;
    return pattern + off;
}

static int fill_pattern(void)
{
    pattern_len = O.max_size + PATTERN_SLACK + 8;
    pattern = malloc(pattern_len);
    if (pattern == NULL)
        return -ENOMEM;
    uint64_t s = 0x0123456789abcdefull;
    for (size_t i = 0; i + 8 <= pattern_len; i += 8) {
        uint64_t v = rng_next(&s);
        memcpy(pattern + i, &v, 8);
    }
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -EINVAL;
    uint64_t mul = 1;
    if (*end == '\0' || strcasecmp(end, "b") == 0)
        mul = 1;
    else if (strcasecmp(end, "k") == 0 || strcasecmp(end, "kib") == 0 || strcasecmp(end, "kb") == 0)
        mul = 1024;
    else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mib") == 0 || strcasecmp(end, "mb") == 0)
        mul = 1024 * 1024;
    else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gib") == 0 || strcasecmp(end, "gb") == 0)
        mul = 1024ull * 1024 * 1024;
    else
        return -EINVAL;
    *out = (uint64_t)(v * (double)mul);
    return 0;
}

static int parse_duration(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -EINVAL;
    if (*end == '\0' || strcmp(end, "s") == 0)
        *out = v;
    else if (strcmp(end, "ms") == 0)
        *out = v / 1000;
    else if (strcmp(end, "m") == 0)
        *out = v * 60;
    else
        return -EINVAL;
    return 0;
}

/* "4KiB" or "4KiB:70,1MiB:30". */
static int parse_sizes(const char *s)
{
    char tmp[512];
    if (strlen(s) >= sizeof(tmp))
        return -EINVAL;
    strcpy(tmp, s);
    O.nsizes = 0;
    O.max_size = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (O.nsizes == MAX_SIZES)
            return -EINVAL;
        unsigned w = 1;
        char *colon = strchr(t, ':');
        if (colon != NULL) {
            *colon = '\0';
            w = (unsigned)strtoul(colon + 1, NULL, 10);
            if (w == 0)
                return -EINVAL;
        }
        if (parse_size(t, &O.sizes[O.nsizes]) != 0)
            return -EINVAL;
        O.size_weights[O.nsizes] = w;
        if (O.sizes[O.nsizes] > O.max_size)
            O.max_size = O.sizes[O.nsizes];
        O.nsizes++;
    }
    return O.nsizes > 0 ? 0 : -EINVAL;
}

static int op_from_name(const char *s)
{
    for (int i = 0; i < OP_N; i++)
        if (strcmp(s, op_names[i]) == 0)
            return i;
    if (strcmp(s, "mixed") == 0)
        return OP_MIXED;
    return -1;
}

/* "get=70,put=20,delete=10" */
static int parse_mix(const char *s)
{
    char tmp[256];
    if (strlen(s) >= sizeof(tmp))
        return -EINVAL;
    strcpy(tmp, s);
    memset(O.mix, 0, sizeof(O.mix));
    char *save = NULL;
    unsigned total = 0;
    for (char *t = strtok_r(tmp, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq == NULL)
            return -EINVAL;
        *eq = '\0';
        int op = op_from_name(t);
        if (op < 0 || op == OP_MIXED)
            return -EINVAL;
        O.mix[op] = (unsigned)strtoul(eq + 1, NULL, 10);
        total += O.mix[op];
    }
    return total > 0 ? 0 : -EINVAL;
}

static int parse_endpoint(const char *ep)
{
    const char *p = ep;
    if (strncmp(p, "http://", 7) == 0)
        p += 7;
    else if (strstr(p, "://") != NULL)
        return -EINVAL; /* https is not supported: the tool measures the server, not TLS */
    char host[256];
    const char *colon = strrchr(p, ':');
    const char *slash = strchr(p, '/');
    size_t hl = colon ? (size_t)(colon - p) : (slash ? (size_t)(slash - p) : strlen(p));
    if (hl == 0 || hl >= sizeof(host))
        return -EINVAL;
    memcpy(host, p, hl);
    host[hl] = '\0';
    int port = colon ? atoi(colon + 1) : 80;
    if (port <= 0 || port > 65535)
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return -EHOSTUNREACH;
    memcpy(&O.addr, res->ai_addr, sizeof(O.addr));
    O.addr.sin_port = htons((uint16_t)port);
    freeaddrinfo(res);
    snprintf(O.host, sizeof(O.host), "%s", host);
    snprintf(O.hostport, sizeof(O.hostport), "%s:%d", host, port);
    return 0;
}

/* ---- statistics ---- */

struct opstat {
    uint64_t ops, bytes, lat_sum_us, lat_max_us;
    uint64_t hist[HIST_N];
};

struct stats {
    struct opstat op[OP_N];
    uint64_t err[E_N];
    uint64_t list_keys;
};

/* Only the owning worker writes a counter; the main thread reads them while
 * they run.  Relaxed atomics make that well defined and cost a plain mov. */
#define ST_ADD(x, v) __atomic_store_n(&(x), (x) + (v), __ATOMIC_RELAXED)
#define ST_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static unsigned hist_idx(uint64_t us)
{
    if (us < HIST_SUB)
        return (unsigned)us;
    unsigned msb = 63u - (unsigned)__builtin_clzll(us);
    unsigned idx = (msb - 3) * HIST_SUB + (unsigned)((us >> (msb - 4)) & (HIST_SUB - 1));
    return idx < HIST_N ? idx : HIST_N - 1;
}

static uint64_t hist_val(unsigned idx)
{
    if (idx < HIST_SUB)
        return idx;
    unsigned msb = idx / HIST_SUB + 3;
    uint64_t sub = idx % HIST_SUB;
    return ((HIST_SUB + sub) << (msb - 4)) + ((1ull << (msb - 4)) >> 1);
}

static void stats_snapshot(const struct stats *src, struct stats *dst)
{
    for (int o = 0; o < OP_N; o++) {
        const struct opstat *a = &src->op[o];
        struct opstat *b = &dst->op[o];
        b->ops += ST_GET(a->ops);
        b->bytes += ST_GET(a->bytes);
        b->lat_sum_us += ST_GET(a->lat_sum_us);
        uint64_t m = ST_GET(a->lat_max_us);
        if (m > b->lat_max_us)
            b->lat_max_us = m;
        for (int i = 0; i < HIST_N; i++)
            b->hist[i] += ST_GET(a->hist[i]);
    }
    for (int e = 0; e < E_N; e++)
        dst->err[e] += ST_GET(src->err[e]);
    dst->list_keys += ST_GET(src->list_keys);
}

/* cur - prev, for one interval (max is cur's, an upper bound). */
static void stats_diff(const struct stats *cur, const struct stats *prev, struct stats *out)
{
    for (int o = 0; o < OP_N; o++) {
        out->op[o].ops = cur->op[o].ops - prev->op[o].ops;
        out->op[o].bytes = cur->op[o].bytes - prev->op[o].bytes;
        out->op[o].lat_sum_us = cur->op[o].lat_sum_us - prev->op[o].lat_sum_us;
        out->op[o].lat_max_us = 0;
        for (int i = 0; i < HIST_N; i++) {
            out->op[o].hist[i] = cur->op[o].hist[i] - prev->op[o].hist[i];
            if (out->op[o].hist[i] != 0)
                out->op[o].lat_max_us = hist_val((unsigned)i);
        }
    }
    for (int e = 0; e < E_N; e++)
        out->err[e] = cur->err[e] - prev->err[e];
    out->list_keys = cur->list_keys - prev->list_keys;
}

/* Merges every op into one opstat. */
static void stats_total(const struct stats *s, struct opstat *t)
{
    memset(t, 0, sizeof(*t));
    for (int o = 0; o < OP_N; o++) {
        t->ops += s->op[o].ops;
        t->bytes += s->op[o].bytes;
        t->lat_sum_us += s->op[o].lat_sum_us;
        if (s->op[o].lat_max_us > t->lat_max_us)
            t->lat_max_us = s->op[o].lat_max_us;
        for (int i = 0; i < HIST_N; i++)
            t->hist[i] += s->op[o].hist[i];
    }
}

static uint64_t pct(const struct opstat *s, double q)
{
    uint64_t n = 0;
    for (int i = 0; i < HIST_N; i++)
        n += s->hist[i];
    if (n == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)n);
    if (want >= n)
        want = n - 1;
    uint64_t seen = 0;
    for (int i = 0; i < HIST_N; i++) {
        seen += s->hist[i];
        if (seen > want) {
            uint64_t v = hist_val((unsigned)i);
            return v > s->lat_max_us && s->lat_max_us ? s->lat_max_us : v;
        }
    }
    return s->lat_max_us;
}

static uint64_t err_total(const struct stats *s)
{
    uint64_t n = 0;
    for (int e = 0; e < E_N; e++)
        n += s->err[e];
    return n;
}

/* ---- connections ---- */

enum cstate { C_IDLE, C_CONNECTING, C_BUSY, C_RETRY };
enum body_mode { B_DISCARD, B_VERIFY, B_COLLECT };
enum mp_step { MP_NONE, MP_CREATE, MP_PART, MP_COMPLETE };

struct worker;

struct conn {
    struct worker *w;
    int fd;
    int state;
    bool reused; /* served a request already: an EOF before a response is a stale keep-alive */
    uint64_t retry_at_ns;

    /* the task */
    int op;
    uint32_t key;
    uint64_t size;
    uint64_t range_off, range_len;
    uint64_t t_start_ns;
    bool prepare_task;
    int mp_step;
    uint32_t part_no, nparts;
    char upload_id[512];
    char (*etags)[72];
    char list_token[1024];

    /* the request being sent */
    char head[HEAD_BYTES];
    size_t head_len, head_pos;
    const char *body;
    uint64_t body_len, body_pos;
    bool is_head_req;

    /* the response */
    char *rbuf;
    size_t rlen;
    bool in_body;
    int status;
    bool resp_close;
    uint64_t clen, got;
    int body_mode;
    const char *expect;
    bool verify_bad;
    char *coll;
    size_t coll_len, coll_cap;
    char etag[72];
};

struct worker {
    int id;
    int ep;
    pthread_t tid;
    struct conn *conns;
    int nconns;
    uint64_t rng;
    uint32_t cursor;   /* next key index (prepare, delete-only) within the partition */
    uint32_t nkeys;    /* keys in this worker's partition */
    bool prepare;      /* this run uploads the working set */
    bool done;         /* no more tasks to start (some may still be in flight) */
    bool exited;       /* the worker's loop has returned */
    struct stats st;
    char amz_date[17];
    char date8[9];
    time_t date_sec;
};

static uint32_t part_key(const struct worker *w, uint32_t j)
{
    return (uint32_t)w->id + j * (uint32_t)O.threads;
}

static void count_err(struct worker *w, int kind)
{
    ST_ADD(w->st.err[kind], 1);
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->reused = false;
}

static int conn_open(struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* Small requests must leave at once: Nagle would hold a head whose ACK is pending. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = connect(fd, (const struct sockaddr *)&O.addr, sizeof(O.addr));
    if (rc != 0 && errno != EINPROGRESS) {
        rc = -errno;
        close(fd);
        return rc;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(c->w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    c->fd = fd;
    c->state = rc == 0 ? C_BUSY : C_CONNECTING;
    return 0;
}

/* ---- requests ---- */

static void refresh_date(struct worker *w)
{
    time_t t = time(NULL);
    if (t == w->date_sec)
        return;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(w->amz_date, sizeof(w->amz_date), "%Y%m%dT%H%M%SZ", &tm);
    memcpy(w->date8, w->amz_date, 8);
    w->date8[8] = '\0';
    w->date_sec = t;
}

/* Writes the object path into out: /bucket/prefixobj-%08u, or the
 * --path-template with %d replaced. */
static int object_path(uint32_t key, char *out, size_t cap)
{
    int n;
    if (O.no_sign) {
        const char *t = O.path_template;
        const char *d = strstr(t, "%d");
        if (d == NULL)
            n = snprintf(out, cap, "%s", t);
        else
            n = snprintf(out, cap, "%.*s%u%s", (int)(d - t), t, key, d + 2);
    } else {
        n = snprintf(out, cap, "/%s/%sobj-%08u", O.bucket, O.prefix, key);
    }
    return n > 0 && (size_t)n < cap ? n : -ENAMETOOLONG;
}

/* Builds a request head into c->head.  query is raw (already encoded), may be
 * "".  extra is more header lines ("Name: v\r\n"), not signed. */
static int build_request(struct conn *c, const char *method, const char *path, const char *query,
                         uint64_t body_len, const char *extra)
{
    struct worker *w = c->w;
    char *h = c->head;
    size_t cap = sizeof(c->head);
    int n;
    if (O.no_sign) {
        n = snprintf(h, cap,
                     "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %" PRIu64 "\r\n%s\r\n",
                     method, path, query[0] ? "?" : "", query, O.hostport, body_len, extra);
        if (n <= 0 || (size_t)n >= cap)
            return -ENAMETOOLONG;
        c->head_len = (size_t)n;
        c->head_pos = 0;
        return 0;
    }
    refresh_date(w);
    static const char payload[] = "UNSIGNED-PAYLOAD";
    struct ol_http_header hdrs[3] = {
        {{"host", 4}, {O.hostport, strlen(O.hostport)}},
        {{"x-amz-content-sha256", 20}, {payload, sizeof(payload) - 1}},
        {{"x-amz-date", 10}, {w->amz_date, 16}},
    };
    struct ol_sigv4_request req = {
        .method = {method, strlen(method)},
        .path = {path, strlen(path)},
        .query = {query, strlen(query)},
        .headers = hdrs,
        .nheaders = 3,
        .payload_hash = {payload, sizeof(payload) - 1},
    };
    static const char signed_headers[] = "host;x-amz-content-sha256;x-amz-date";
    struct ol_sigv4_auth auth = {
        .access_key = {O.access_key, strlen(O.access_key)},
        .date = {w->date8, 8},
        .region = {O.region, strlen(O.region)},
        .service = {"s3", 2},
        .signed_headers = {signed_headers, sizeof(signed_headers) - 1},
    };
    memcpy(auth.amz_date, w->amz_date, sizeof(auth.amz_date));
    char sig[65];
    int rc = ol_sigv4_sign(&req, &auth, O.secret_key, strlen(O.secret_key), sig);
    if (rc != 0)
        return rc < 0 ? rc : -EINVAL;
    n = snprintf(h, cap,
                 "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-content-sha256: %s\r\n"
                 "x-amz-date: %s\r\nAuthorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/"
                 "aws4_request, SignedHeaders=%s, Signature=%s\r\nContent-Length: %" PRIu64
                 "\r\n%s\r\n",
                 method, path, query[0] ? "?" : "", query, O.hostport, payload, w->amz_date,
                 O.access_key, w->date8, O.region, signed_headers, sig, body_len, extra);
    if (n <= 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    c->head_len = (size_t)n;
    c->head_pos = 0;
    return 0;
}

static void reset_response(struct conn *c)
{
    c->rlen = 0;
    c->in_body = false;
    c->status = 0;
    c->resp_close = false;
    c->clen = 0;
    c->got = 0;
    c->verify_bad = false;
    c->coll_len = 0;
    c->etag[0] = '\0';
}

/* Sets up the next HTTP request of the current task. */
static int issue(struct conn *c)
{
    char path[512], query[1400], extra[128];
    int rc = object_path(c->key, path, sizeof(path));
    if (rc < 0)
        return rc;
    query[0] = extra[0] = '\0';
    c->body = NULL;
    c->body_len = c->body_pos = 0;
    c->is_head_req = false;
    c->expect = NULL;
    c->body_mode = B_DISCARD;
    reset_response(c);
    switch (c->op) {
    case OP_GET:
        if (c->range_len) {
            snprintf(extra, sizeof(extra), "Range: bytes=%" PRIu64 "-%" PRIu64 "\r\n",
                     c->range_off, c->range_off + c->range_len - 1);
        }
        c->body_mode = O.verify ? B_VERIFY : B_DISCARD;
        c->expect = key_body(c->key, c->size) + c->range_off;
        return build_request(c, "GET", path, "", 0, extra);
    case OP_HEAD:
        c->is_head_req = true;
        return build_request(c, "HEAD", path, "", 0, "");
    case OP_DELETE:
        return build_request(c, "DELETE", path, "", 0, "");
    case OP_LIST: {
        c->body_mode = B_COLLECT;
        int n = snprintf(query, sizeof(query), "list-type=2&max-keys=1000");
        if (O.prefix[0]) {
            char enc[300];
            ssize_t m = ol_uri_encode(O.prefix, strlen(O.prefix), enc, sizeof(enc), false);
            if (m < 0)
                return -ENAMETOOLONG;
            n += snprintf(query + n, sizeof(query) - (size_t)n, "&prefix=%.*s", (int)m, enc);
        }
        if (c->list_token[0]) {
            char enc[1200];
            ssize_t m = ol_uri_encode(c->list_token, strlen(c->list_token), enc, sizeof(enc),
                                      false);
            if (m < 0)
                return -ENAMETOOLONG;
            n += snprintf(query + n, sizeof(query) - (size_t)n, "&continuation-token=%.*s",
                          (int)m, enc);
        }
        if ((size_t)n >= sizeof(query))
            return -ENAMETOOLONG;
        snprintf(path, sizeof(path), "/%s", O.bucket);
        return build_request(c, "GET", path, query, 0, "");
    }
    case OP_PUT:
        if (c->mp_step == MP_CREATE) {
            c->body_mode = B_COLLECT;
            return build_request(c, "POST", path, "uploads", 0, "");
        }
        if (c->mp_step == MP_PART) {
            uint64_t off = (uint64_t)(c->part_no - 1) * O.multipart_bytes;
            uint64_t len = c->size - off < O.multipart_bytes ? c->size - off : O.multipart_bytes;
            char enc[1100];
            ssize_t m = ol_uri_encode(c->upload_id, strlen(c->upload_id), enc, sizeof(enc), false);
            if (m < 0)
                return -ENAMETOOLONG;
            snprintf(query, sizeof(query), "partNumber=%u&uploadId=%.*s", c->part_no, (int)m, enc);
            c->body = key_body(c->key, c->size) + off;
            c->body_len = len;
            return build_request(c, "PUT", path, query, len, "");
        }
        if (c->mp_step == MP_COMPLETE) {
            char enc[1100];
            ssize_t m = ol_uri_encode(c->upload_id, strlen(c->upload_id), enc, sizeof(enc), false);
            if (m < 0)
                return -ENAMETOOLONG;
            snprintf(query, sizeof(query), "uploadId=%.*s", (int)m, enc);
            /* The XML body lives in the collect buffer's second half: build it
             * in a separate allocation owned by the task. */
            size_t need = 128 + (size_t)c->nparts * 128;
            char *xml = malloc(need);
            if (xml == NULL)
                return -ENOMEM;
            size_t len = (size_t)snprintf(xml, need, "<CompleteMultipartUpload>");
            for (uint32_t p = 0; p < c->nparts; p++)
                len += (size_t)snprintf(xml + len, need - len,
                                        "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                        p + 1, c->etags[p]);
            len += (size_t)snprintf(xml + len, need - len, "</CompleteMultipartUpload>");
            free((void *)c->etags);
            /* etags is no longer needed; reuse the pointer to free the XML later. */
            c->etags = (char (*)[72])xml;
            c->body = xml;
            c->body_len = len;
            c->body_mode = B_COLLECT;
            return build_request(c, "POST", path, query, len, "");
        }
        c->body = key_body(c->key, c->size);
        c->body_len = c->size;
        return build_request(c, "PUT", path, "", c->size, "");
    default:
        return -EINVAL;
    }
}

/* ---- task selection ---- */

static int pick_op(struct worker *w)
{
    if (O.op != OP_MIXED)
        return O.op;
    unsigned total = 0;
    for (int o = 0; o < OP_N; o++)
        total += O.mix[o];
    unsigned r = (unsigned)(rng_next(&w->rng) % total);
    for (int o = 0; o < OP_N; o++) {
        if (r < O.mix[o])
            return o;
        r -= O.mix[o];
    }
    return OP_GET;
}

/* Picks a key of this worker for op; -1 when none is suitable right now. */
static int64_t pick_key(struct worker *w, int op)
{
    if (w->nkeys == 0)
        return -1;
    if (w->prepare || (op == OP_DELETE && O.op == OP_DELETE)) {
        if (w->cursor >= w->nkeys)
            return -1;
        return part_key(w, w->cursor++);
    }
    for (int t = 0; t < PICK_TRIES; t++) {
        uint32_t k = part_key(w, (uint32_t)(rng_next(&w->rng) % w->nkeys));
        uint16_t s = keystate[k];
        if (s & K_WRITING)
            continue;
        if ((op == OP_GET || op == OP_HEAD) && O.op == OP_MIXED && !(s & K_EXISTS))
            continue;
        if (op == OP_DELETE && !(s & K_EXISTS))
            continue;
        if ((op == OP_PUT || op == OP_DELETE) && (s & K_READERS))
            continue;
        return k;
    }
    return -1;
}

static void task_begin_marks(struct conn *c)
{
    uint16_t *s = &keystate[c->key];
    if (c->op == OP_PUT || c->op == OP_DELETE)
        *s |= K_WRITING;
    else if (c->op == OP_GET || c->op == OP_HEAD)
        *s = (uint16_t)((*s & ~K_READERS) | (((*s & K_READERS) + 1) & K_READERS));
}

static void task_end_marks(struct conn *c, bool ok)
{
    if (c->op == OP_LIST)
        return;
    uint16_t *s = &keystate[c->key];
    if (c->op == OP_PUT || c->op == OP_DELETE) {
        *s &= (uint16_t)~K_WRITING;
        if (ok)
            *s = c->op == OP_PUT ? (uint16_t)(*s | K_EXISTS) : (uint16_t)(*s & ~K_EXISTS);
    } else if (c->op == OP_GET || c->op == OP_HEAD) {
        *s = (uint16_t)((*s & ~K_READERS) | (((*s & K_READERS) - 1) & K_READERS));
    }
}

static void task_free(struct conn *c)
{
    free((void *)c->etags);
    c->etags = NULL;
    c->mp_step = MP_NONE;
}

/* Starts a new task on an idle, connected connection.  Returns false when
 * there is nothing to do. */
static bool task_start(struct conn *c)
{
    struct worker *w = c->w;
    if (g_stop || w->done)
        return false;
    int op = w->prepare ? OP_PUT : pick_op(w);
    int64_t k = 0;
    if (op != OP_LIST) {
        k = pick_key(w, op);
        if (k < 0 && O.op == OP_MIXED && op != OP_PUT) {
            op = OP_PUT; /* everything deleted or busy: grow the set back */
            k = pick_key(w, op);
        }
        if (k < 0) {
            if (w->prepare || O.op == OP_DELETE)
                w->done = true;
            return false;
        }
    }
    c->op = op;
    c->key = (uint32_t)k;
    c->prepare_task = w->prepare;
    c->size = op == OP_LIST ? 0 : key_size(c->key);
    c->range_off = 0;
    c->range_len = 0;
    if (op == OP_GET && O.range_bytes && c->size > 0) {
        c->range_len = O.range_bytes < c->size ? O.range_bytes : c->size;
        uint64_t span = c->size - c->range_len + 1;
        c->range_off = rng_next(&w->rng) % span;
    }
    c->mp_step = MP_NONE;
    if (op == OP_PUT && O.multipart_bytes && c->size > O.multipart_bytes && !O.no_sign) {
        c->nparts = (uint32_t)((c->size + O.multipart_bytes - 1) / O.multipart_bytes);
        if (c->nparts > MAX_PARTS) {
            c->nparts = 0;
        } else {
            c->mp_step = MP_CREATE;
            c->etags = calloc(c->nparts, sizeof(*c->etags));
            if (c->etags == NULL)
                return false;
        }
    }
    c->t_start_ns = now_ns();
    task_begin_marks(c);
    if (issue(c) != 0) {
        task_end_marks(c, false);
        task_free(c);
        count_err(w, E_PROTO);
        return false;
    }
    c->state = C_BUSY;
    return true;
}

static void task_finish(struct conn *c, int err_kind)
{
    struct worker *w = c->w;
    bool ok = err_kind < 0;
    if (ok) {
        uint64_t us = (now_ns() - c->t_start_ns) / 1000;
        struct opstat *s = &w->st.op[c->op];
        ST_ADD(s->ops, 1);
        ST_ADD(s->lat_sum_us, us);
        if (us > s->lat_max_us)
            ST_ADD(s->lat_max_us, us - s->lat_max_us);
        ST_ADD(s->hist[hist_idx(us)], 1);
    } else {
        count_err(w, err_kind);
    }
    task_end_marks(c, ok);
    task_free(c);
    c->state = C_IDLE;
}

/* ---- response handling ---- */

static const char *find_tag(const char *s, size_t n, const char *tag, size_t *len)
{
    char open[64], close_[64];
    int ol = snprintf(open, sizeof(open), "<%s>", tag);
    int cl = snprintf(close_, sizeof(close_), "</%s>", tag);
    const char *a = memmem(s, n, open, (size_t)ol);
    if (a == NULL)
        return NULL;
    a += ol;
    const char *b = memmem(a, n - (size_t)(a - s), close_, (size_t)cl);
    if (b == NULL)
        return NULL;
    *len = (size_t)(b - a);
    return a;
}

/* Copies XML text into out, undoing the five predefined entities. */
static int xml_text(const char *s, size_t n, char *out, size_t cap)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 1 >= cap)
            return -ENAMETOOLONG;
        char ch = s[i];
        if (ch == '&') {
            size_t e;
            for (e = 0; e < sizeof(ents) / sizeof(ents[0]); e++) {
                size_t el = strlen(ents[e].ent);
                if (n - i >= el && memcmp(s + i, ents[e].ent, el) == 0) {
                    ch = ents[e].c;
                    i += el - 1;
                    break;
                }
            }
        }
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

static uint64_t count_keys(const char *s, size_t n)
{
    uint64_t k = 0;
    const char *p = s, *end = s + n;
    for (int guard = 0; guard < 1000000; guard++) {
        p = memmem(p, (size_t)(end - p), "<Key>", 5);
        if (p == NULL)
            break;
        k++;
        p += 5;
    }
    return k;
}

static int status_class_err(int status)
{
    if (status >= 500)
        return E_5XX;
    if (status >= 400)
        return E_4XX;
    return E_HTTP_OTHER;
}

static bool error_printed;

/* A whole response arrived.  Decides what comes next for the task. */
static void on_response(struct conn *c)
{
    struct worker *w = c->w;
    int st = c->status;
    bool ok = st >= 200 && st < 300;
    if (!ok && !error_printed && !O.quiet) {
        error_printed = true;
        fprintf(stderr, "bench: first error: %s key %u -> HTTP %d %.*s\n", op_names[c->op], c->key,
                st, (int)(c->coll_len < 300 ? c->coll_len : 300), c->coll ? c->coll : "");
    }
    if (!ok) {
        if (c->op == OP_DELETE && st == 404)
            ok = true; /* S3 answers 204 for missing keys; other servers may say 404 */
        else {
            task_finish(c, status_class_err(st));
            return;
        }
    }
    if (c->op == OP_GET && c->body_mode == B_VERIFY && c->verify_bad) {
        task_finish(c, E_VERIFY);
        return;
    }
    if (c->op == OP_LIST) {
        uint64_t keys = count_keys(c->coll, c->coll_len);
        ST_ADD(w->st.list_keys, keys);
        size_t tl = 0;
        const char *t = find_tag(c->coll, c->coll_len, "NextContinuationToken", &tl);
        size_t il = 0;
        const char *tr = find_tag(c->coll, c->coll_len, "IsTruncated", &il);
        bool more = tr != NULL && il == 4 && memcmp(tr, "true", 4) == 0;
        if (more && t != NULL && xml_text(t, tl, c->list_token, sizeof(c->list_token)) == 0)
            ;
        else
            c->list_token[0] = '\0'; /* the listing ended: the next task starts over */
        task_finish(c, -1);
        return;
    }
    if (c->op == OP_PUT && c->mp_step != MP_NONE) {
        if (c->mp_step == MP_CREATE) {
            size_t l = 0;
            const char *u = c->coll ? find_tag(c->coll, c->coll_len, "UploadId", &l) : NULL;
            if (u == NULL || xml_text(u, l, c->upload_id, sizeof(c->upload_id)) != 0) {
                task_finish(c, E_PROTO);
                return;
            }
            c->mp_step = MP_PART;
            c->part_no = 1;
        } else if (c->mp_step == MP_PART) {
            if (c->etag[0] == '\0') {
                task_finish(c, E_PROTO);
                return;
            }
            memcpy(c->etags[c->part_no - 1], c->etag, sizeof(c->etag));
            if (c->part_no < c->nparts)
                c->part_no++;
            else
                c->mp_step = MP_COMPLETE;
        } else {
            if (c->coll && memmem(c->coll, c->coll_len, "<Error>", 7) != NULL) {
                task_finish(c, E_5XX);
                return;
            }
            task_finish(c, -1);
            return;
        }
        if (issue(c) != 0)
            task_finish(c, E_PROTO);
        return;
    }
    task_finish(c, -1);
}

/* Parses the response head in rbuf[0..hl).  Returns 0 or -EPROTO. */
static int parse_head(struct conn *c, size_t hl)
{
    const char *p = c->rbuf;
    if (hl < 12 || memcmp(p, "HTTP/1.", 7) != 0)
        return -EPROTO;
    bool http10 = p[7] == '0';
    c->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    if (c->status < 100 || c->status > 599)
        return -EPROTO;
    c->resp_close = http10;
    bool have_len = false, chunked = false;
    const char *line = memchr(p, '\n', hl);
    const char *end = p + hl;
    for (int guard = 0; line != NULL && guard < 200; guard++) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL || eol - line <= 1)
            break;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (colon != NULL) {
            size_t nl = (size_t)(colon - line);
            const char *v = colon + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = (size_t)(eol - v);
            while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            if (nl == 14 && strncasecmp(line, "content-length", 14) == 0) {
                char num[24];
                if (vl == 0 || vl >= sizeof(num))
                    return -EPROTO;
                memcpy(num, v, vl);
                num[vl] = '\0';
                char *e;
                c->clen = strtoull(num, &e, 10);
                if (*e != '\0')
                    return -EPROTO;
                have_len = true;
            } else if (nl == 10 && strncasecmp(line, "connection", 10) == 0) {
                if (vl == 5 && strncasecmp(v, "close", 5) == 0)
                    c->resp_close = true;
                else if (vl == 10 && strncasecmp(v, "keep-alive", 10) == 0)
                    c->resp_close = false;
            } else if (nl == 17 && strncasecmp(line, "transfer-encoding", 17) == 0) {
                chunked = true;
            } else if (nl == 4 && strncasecmp(line, "etag", 4) == 0) {
                if (vl < sizeof(c->etag)) {
                    memcpy(c->etag, v, vl);
                    c->etag[vl] = '\0';
                }
            }
        }
        line = eol;
    }
    if (chunked)
        return -EPROTO; /* S3 servers answer with Content-Length */
    if (c->is_head_req || c->status == 204 || c->status == 304 || c->status < 200)
        c->clen = 0;
    else if (!have_len)
        return -EPROTO;
    bool ok = c->status >= 200 && c->status < 300;
    if (!ok)
        c->body_mode = B_COLLECT;
    if (ok && c->op == OP_GET && c->body_mode == B_VERIFY) {
        uint64_t want = c->range_len ? c->range_len : c->size;
        if (c->clen != want)
            c->verify_bad = true;
    }
    return 0;
}

/* Consumes n body bytes at p. */
static int take_body(struct conn *c, const char *p, size_t n)
{
    if (c->op == OP_GET && c->status >= 200 && c->status < 300)
        ST_ADD(c->w->st.op[OP_GET].bytes, n);
    if (c->body_mode == B_VERIFY && !c->verify_bad) {
        uint64_t want = c->range_len ? c->range_len : c->size;
        if (c->got + n > want || memcmp(p, c->expect + c->got, n) != 0)
            c->verify_bad = true;
    } else if (c->body_mode == B_COLLECT) {
        if (c->coll_len + n > COLLECT_MAX)
            return -E2BIG;
        if (c->coll_len + n > c->coll_cap) {
            size_t cap = c->coll_cap ? c->coll_cap : 65536;
            while (cap < c->coll_len + n)
                cap *= 2;
            char *nb = realloc(c->coll, cap);
            if (nb == NULL)
                return -ENOMEM;
            c->coll = nb;
            c->coll_cap = cap;
        }
        memcpy(c->coll + c->coll_len, p, n);
        c->coll_len += n;
    }
    c->got += n;
    return 0;
}

/* Connection-level failure: the task (if any) fails, the socket is
 * reopened. */
static void conn_fail(struct conn *c, int kind)
{
    if (c->state == C_BUSY || c->state == C_CONNECTING) {
        if (c->state == C_BUSY && c->op >= 0)
            task_finish(c, kind);
        else
            count_err(c->w, kind);
    }
    conn_close(c);
    c->state = C_RETRY;
    c->retry_at_ns = now_ns() + (kind == E_CONNECT ? 20000000ull : 0);
}

/* Drives a connection as far as the socket allows. */
static void conn_pump(struct conn *c)
{
    for (int round = 0; round < 64; round++) {
        if (c->state == C_CONNECTING) {
            int err = 0;
            socklen_t l = sizeof(err);
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0 || err != 0) {
                c->op = -1;
                conn_fail(c, E_CONNECT);
                return;
            }
            c->state = C_IDLE;
        }
        if (c->state == C_IDLE) {
            if (!task_start(c))
                return;
        }
        if (c->state != C_BUSY)
            return;
        bool progress = false;
        /* Send what is left of the request. */
        while (c->head_pos < c->head_len || c->body_pos < c->body_len) {
            struct iovec iov[2];
            int n = 0;
            if (c->head_pos < c->head_len) {
                iov[n].iov_base = c->head + c->head_pos;
                iov[n++].iov_len = c->head_len - c->head_pos;
            }
            if (c->body_pos < c->body_len) {
                iov[n].iov_base = (void *)(c->body + c->body_pos);
                iov[n++].iov_len = c->body_len - c->body_pos;
            }
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t s = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
            if (s < 0) {
                if (errno == EAGAIN)
                    break;
                if (errno == EINTR)
                    continue;
                conn_fail(c, E_IO);
                return;
            }
            progress = true;
            size_t sent = (size_t)s;
            size_t h = c->head_len - c->head_pos < sent ? c->head_len - c->head_pos : sent;
            c->head_pos += h;
            sent -= h;
            c->body_pos += sent;
            if (c->op == OP_PUT && sent)
                ST_ADD(c->w->st.op[OP_PUT].bytes, sent);
        }
        /* Read what the server sent. */
        for (;;) {
            char *dst = c->rbuf + c->rlen;
            size_t room = RBUF_BYTES - c->rlen;
            ssize_t r = read(c->fd, dst, room);
            if (r < 0) {
                if (errno == EAGAIN)
                    break;
                if (errno == EINTR)
                    continue;
                conn_fail(c, E_IO);
                return;
            }
            if (r == 0) {
                conn_fail(c, E_IO);
                return;
            }
            progress = true;
            c->rlen += (size_t)r;
            if (!c->in_body) {
                size_t from = c->rlen - (size_t)r;
                from = from > 3 ? from - 3 : 0;
                const char *e = memmem(c->rbuf + from, c->rlen - from, "\r\n\r\n", 4);
                if (e == NULL) {
                    if (c->rlen >= RESP_HEAD_MAX) {
                        conn_fail(c, E_PROTO);
                        return;
                    }
                    continue;
                }
                size_t hl = (size_t)(e - c->rbuf) + 4;
                if (parse_head(c, hl) != 0) {
                    conn_fail(c, E_PROTO);
                    return;
                }
                if (c->status == 100) { /* an interim response: drop it, keep reading */
                    memmove(c->rbuf, c->rbuf + hl, c->rlen - hl);
                    c->rlen -= hl;
                    continue;
                }
                c->in_body = true;
                size_t extra = c->rlen - hl;
                if (extra > c->clen) {
                    conn_fail(c, E_PROTO); /* nothing was pipelined: bytes past the body are junk */
                    return;
                }
                if (extra && take_body(c, c->rbuf + hl, extra) != 0) {
                    conn_fail(c, E_PROTO);
                    return;
                }
                c->rlen = 0;
            } else {
                if (c->got + c->rlen > c->clen) {
                    conn_fail(c, E_PROTO);
                    return;
                }
                if (take_body(c, c->rbuf, c->rlen) != 0) {
                    conn_fail(c, E_PROTO);
                    return;
                }
                c->rlen = 0;
            }
            if (c->in_body && c->got == c->clen)
                break;
        }
        if (!(c->in_body && c->got == c->clen)) {
            (void)progress;
            return;
        }
        /* A complete response. */
        bool unsent = c->head_pos < c->head_len || c->body_pos < c->body_len;
        bool must_close = c->resp_close || unsent;
        c->reused = true;
        on_response(c);
        if (must_close) {
            /* The current task (if on_response chained another request) restarts
             * on a fresh connection. */
            if (c->state == C_BUSY) {
                task_finish(c, E_PROTO);
            }
            conn_close(c);
            int rc = conn_open(c);
            if (rc != 0) {
                c->op = -1;
                c->state = C_RETRY;
                c->retry_at_ns = now_ns() + 20000000ull;
                count_err(c->w, E_CONNECT);
                return;
            }
            if (c->state == C_CONNECTING)
                return;
            c->state = C_IDLE;
        }
    }
}

static bool worker_busy(const struct worker *w)
{
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_BUSY)
            return true;
    return false;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[EVENTS_PER_WAIT];
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        c->op = -1;
        if (conn_open(c) != 0) {
            count_err(w, E_CONNECT);
            c->state = C_RETRY;
            c->retry_at_ns = now_ns() + 20000000ull;
        } else if (c->state == C_BUSY) {
            c->state = C_IDLE;
            conn_pump(c);
        }
    }
    while (!g_stop) {
        int n = epoll_wait(w->ep, evs, EVENTS_PER_WAIT, 10);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            conn_pump(evs[i].data.ptr);
        uint64_t t = now_ns();
        for (int i = 0; i < w->nconns; i++) {
            struct conn *c = &w->conns[i];
            if (c->state == C_RETRY && t >= c->retry_at_ns && !w->done) {
                c->op = -1;
                if (conn_open(c) != 0) {
                    count_err(w, E_CONNECT);
                    c->retry_at_ns = t + 20000000ull;
                    continue;
                }
                if (c->state == C_BUSY)
                    c->state = C_IDLE;
                conn_pump(c);
            } else if (c->state == C_IDLE && !w->done) {
                conn_pump(c); /* no key was free last time: try again */
            }
        }
        if (w->done && !worker_busy(w))
            break;
    }
    w->done = true;
    __atomic_store_n(&w->exited, true, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- runs ---- */

struct run_result {
    struct stats st;
    double elapsed_s;
    double cpu_user_s, cpu_sys_s;
};

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void fmt_us(uint64_t us, char *out, size_t cap)
{
    if (us < 1000)
        snprintf(out, cap, "%" PRIu64 "us", us);
    else if (us < 1000000)
        snprintf(out, cap, "%.2fms", (double)us / 1000);
    else
        snprintf(out, cap, "%.2fs", (double)us / 1e6);
}

static void print_line(const char *label, const struct stats *s, double secs)
{
    struct opstat t;
    stats_total(s, &t);
    char p50[16], p90[16], p99[16], p999[16], mx[16];
    fmt_us(pct(&t, 0.50), p50, sizeof(p50));
    fmt_us(pct(&t, 0.90), p90, sizeof(p90));
    fmt_us(pct(&t, 0.99), p99, sizeof(p99));
    fmt_us(pct(&t, 0.999), p999, sizeof(p999));
    fmt_us(t.lat_max_us, mx, sizeof(mx));
    double d = secs > 0 ? secs : 1;
    printf("%-7s %9.1f ops/s %9.2f MiB/s", label, (double)t.ops / d,
           (double)t.bytes / d / 1048576.0);
    if (s->list_keys)
        printf(" %9.0f keys/s", (double)s->list_keys / d);
    printf("  p50 %-8s p90 %-8s p99 %-8s p99.9 %-8s max %-8s err %" PRIu64 "\n", p50, p90, p99,
           p999, mx, err_total(s));
    fflush(stdout);
}

static void on_signal(int sig)
{
    (void)sig;
    g_interrupt = 1;
    g_stop = 1;
}

/* Runs workers until the deadline (duration > 0) or until they are done
 * (prepare).  live: print a line per second. */
static int run_phase(bool prepare, int concurrency, double duration_s, bool live,
                     struct run_result *res)
{
    static struct worker ws[MAX_THREADS];
    int nt = O.threads;
    int rc = 0;
    memset(res, 0, sizeof(*res));
    memset(ws, 0, sizeof(ws));
    g_stop = 0;
    for (int t = 0; t < nt; t++) {
        struct worker *w = &ws[t];
        w->id = t;
        w->prepare = prepare;
        w->rng = O.seed ^ mix64((uint64_t)t + 1) ^ (prepare ? 0 : now_ns());
        w->nkeys = O.objects > (uint32_t)t ? (O.objects - (uint32_t)t + (uint32_t)nt - 1) /
                                                 (uint32_t)nt
                                           : 0;
        w->nconns = concurrency / nt + (t < concurrency % nt ? 1 : 0);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->conns = calloc((size_t)(w->nconns ? w->nconns : 1), sizeof(struct conn));
        if (w->ep < 0 || w->conns == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        for (int i = 0; i < w->nconns; i++) {
            w->conns[i].w = w;
            w->conns[i].fd = -1;
            w->conns[i].rbuf = malloc(RBUF_BYTES);
            if (w->conns[i].rbuf == NULL) {
                rc = -ENOMEM;
                goto out;
            }
        }
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = now_ns();
    for (int t = 0; t < nt; t++) {
        if (pthread_create(&ws[t].tid, NULL, worker_run, &ws[t]) != 0) {
            g_stop = 1;
            for (int j = 0; j < t; j++)
                pthread_join(ws[j].tid, NULL);
            rc = -EAGAIN;
            goto out;
        }
    }
    struct stats prev, cur, iv;
    memset(&prev, 0, sizeof(prev));
    uint64_t deadline = duration_s > 0 ? t0 + (uint64_t)(duration_s * 1e9) : 0;
    uint64_t next_tick = t0 + 1000000000ull;
    int sec = 0;
    for (;;) {
        uint64_t t = now_ns();
        bool all_done = true;
        for (int i = 0; i < nt; i++)
            if (!__atomic_load_n(&ws[i].exited, __ATOMIC_ACQUIRE))
                all_done = false;
        if (all_done || (deadline && t >= deadline) || g_interrupt)
            break;
        if (t >= next_tick) {
            memset(&cur, 0, sizeof(cur));
            for (int i = 0; i < nt; i++)
                stats_snapshot(&ws[i].st, &cur);
            stats_diff(&cur, &prev, &iv);
            prev = cur;
            sec++;
            if (live && !O.quiet) {
                char label[32];
                snprintf(label, sizeof(label), "%s%ds", prepare ? "prep " : "", sec);
                print_line(label, &iv, 1.0);
            }
            next_tick += 1000000000ull;
        }
        uint64_t until = next_tick;
        if (deadline && deadline < until)
            until = deadline;
        uint64_t wait_ns = until > t ? until - t : 0;
        if (wait_ns > 20000000ull)
            wait_ns = 20000000ull;
        struct timespec ts = {0, (long)wait_ns};
        nanosleep(&ts, NULL);
    }
    uint64_t t1 = now_ns();
    g_stop = 1;
    for (int t = 0; t < nt; t++)
        pthread_join(ws[t].tid, NULL);
    getrusage(RUSAGE_SELF, &ru1);
    for (int t = 0; t < nt; t++)
        stats_snapshot(&ws[t].st, &res->st);
    res->elapsed_s = (double)(t1 - t0) / 1e9;
    res->cpu_user_s = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
    res->cpu_sys_s = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
out:
    for (int t = 0; t < nt; t++) {
        struct worker *w = &ws[t];
        for (int i = 0; w->conns && i < w->nconns; i++) {
            struct conn *c = &w->conns[i];
            if (c->state == C_BUSY && c->op >= 0)
                task_end_marks(c, false);
            task_free(c);
            conn_close(c);
            free(c->rbuf);
            free(c->coll);
        }
        free(w->conns);
        if (w->ep >= 0)
            close(w->ep);
    }
    return rc;
}

/* ---- set-up ---- */

/* PUT /bucket with one blocking request through the same engine: a run of
 * one connection whose single task is a bucket creation would need its own
 * op; a blocking socket is simpler for a one-off. */
static int create_bucket(void)
{
    struct worker w;
    memset(&w, 0, sizeof(w));
    struct conn *c = calloc(1, sizeof(*c));
    int rc = 0;
    int fd = -1;
    if (c == NULL)
        return -ENOMEM;
    c->w = &w;
    char path[300];
    snprintf(path, sizeof(path), "/%s", O.bucket);
    rc = build_request(c, "PUT", path, "", 0, "");
    if (rc != 0)
        goto out;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)&O.addr, sizeof(O.addr)) != 0) {
        rc = -ECONNREFUSED;
        goto out;
    }
    if (write(fd, c->head, c->head_len) != (ssize_t)c->head_len) {
        rc = -EIO;
        goto out;
    }
    char resp[4096];
    ssize_t n = read(fd, resp, sizeof(resp) - 1);
    if (n < 12) {
        rc = -EIO;
        goto out;
    }
    resp[n] = '\0';
    int status = atoi(resp + 9);
    /* 409 BucketAlreadyOwnedByYou: it exists, which is what we want. */
    if (!(status == 200 || (status == 409 && strstr(resp, "AlreadyOwnedByYou") != NULL))) {
        fprintf(stderr, "bench: creating bucket %s: HTTP %d\n", O.bucket, status);
        rc = -EACCES;
    }
out:
    if (fd >= 0)
        close(fd);
    free(c);
    return rc;
}

/* Writes objects 0..objects-1 as files dir/obj-<i> with the bytes a GET
 * expects, for serving by another server (nginx). */
static int write_files(const char *dir)
{
    char path[4096];
    mkdir(dir, 0755);
    for (uint32_t i = 0; i < O.objects; i++) {
        uint64_t size = key_size(i);
        snprintf(path, sizeof(path), "%s/obj-%u", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
        const char *p = key_body(i, size);
        uint64_t done = 0;
        for (int guard = 0; done < size && guard < 1000000; guard++) {
            ssize_t w = write(fd, p + done, size - done);
            if (w <= 0) {
                close(fd);
                return -EIO;
            }
            done += (uint64_t)w;
        }
        close(fd);
    }
    return 0;
}

/* ---- output ---- */

static void json_opstat(FILE *f, const struct opstat *s, double secs)
{
    fprintf(f,
            "{\"ops\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"ops_per_s\": %.2f, "
            "\"mib_per_s\": %.3f, \"latency_us\": {\"mean\": %.1f, \"p50\": %" PRIu64
            ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64 ", \"max\": %" PRIu64
            "}}",
            s->ops, s->bytes, (double)s->ops / secs, (double)s->bytes / secs / 1048576.0,
            s->ops ? (double)s->lat_sum_us / (double)s->ops : 0.0, pct(s, 0.5), pct(s, 0.9),
            pct(s, 0.99), pct(s, 0.999), s->lat_max_us);
}

static int write_json(const char *path, const struct run_result *r, const char *size_arg,
                      const char *op_arg)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (f == NULL)
        return -errno;
    struct opstat t;
    stats_total(&r->st, &t);
    double secs = r->elapsed_s > 0 ? r->elapsed_s : 1;
    double gib = (double)t.bytes / 1073741824.0;
    double cpu = r->cpu_user_s + r->cpu_sys_s;
    fprintf(f, "{\n  \"tool\": \"openlake bench\",\n  \"endpoint\": \"%s\",\n", O.hostport);
    fprintf(f, "  \"op\": \"%s\",\n  \"size\": \"%s\",\n  \"concurrency\": %d,\n", op_arg,
            size_arg, O.concurrency);
    fprintf(f, "  \"threads\": %d,\n  \"objects\": %u,\n  \"signed\": %s,\n", O.threads,
            O.objects, O.no_sign ? "false" : "true");
    fprintf(f, "  \"range_bytes\": %" PRIu64 ",\n  \"elapsed_s\": %.3f,\n", O.range_bytes, secs);
    fprintf(f, "  \"total\": ");
    json_opstat(f, &t, secs);
    fprintf(f, ",\n  \"per_op\": {");
    bool first = true;
    for (int o = 0; o < OP_N; o++) {
        if (r->st.op[o].ops == 0)
            continue;
        fprintf(f, "%s\n    \"%s\": ", first ? "" : ",", op_names[o]);
        json_opstat(f, &r->st.op[o], secs);
        first = false;
    }
    fprintf(f, "\n  },\n  \"list_keys\": %" PRIu64 ",\n  \"keys_per_s\": %.1f,\n",
            r->st.list_keys, (double)r->st.list_keys / secs);
    fprintf(f, "  \"errors\": {");
    for (int e = 0; e < E_N; e++)
        fprintf(f, "\"%s\": %" PRIu64 ", ", err_names[e], r->st.err[e]);
    fprintf(f, "\"total\": %" PRIu64 "},\n", err_total(&r->st));
    fprintf(f,
            "  \"client_cpu\": {\"user_s\": %.3f, \"sys_s\": %.3f, \"cores\": %.3f, "
            "\"cpu_s_per_gib\": %.4f, \"cpu_us_per_op\": %.2f}\n}\n",
            r->cpu_user_s, r->cpu_sys_s, cpu / secs, gib > 0 ? cpu / gib : 0.0,
            t.ops ? cpu * 1e6 / (double)t.ops : 0.0);
    if (f != stdout)
        fclose(f);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: openlake bench [options]\n"
            "  --endpoint URL        http://127.0.0.1:9000\n"
            "  --access-key K --secret-key S   (openlake / openlake-secret)\n"
            "  --region R            us-east-1\n"
            "  --bucket B            bench (created if missing)\n"
            "  --prefix P            key prefix (keys are P obj-%%08u)\n"
            "  --op OP               get|put|head|delete|list|mixed (get)\n"
            "  --mix get=70,put=20,delete=10   weights for --op mixed\n"
            "  --concurrency N       connections in flight (16)\n"
            "  --threads N           event-loop threads (1)\n"
            "  --size S              4KiB, or a distribution 4KiB:70,1MiB:30 (4KiB)\n"
            "  --duration D          10s, 500ms, 1m (10s); 0 with --prepare: prepare only\n"
            "  --objects N           working set for get/head/mixed (1000)\n"
            "  --range L             GETs read a random range of L bytes\n"
            "  --multipart-size S    PUTs larger than S use multipart uploads of S-sized parts\n"
            "  --prepare             upload the working set first\n"
            "  --prepare-concurrency N   connections for --prepare (--concurrency)\n"
            "  --no-sign             unsigned requests (any HTTP server)\n"
            "  --path-template T     with --no-sign: request path, %%d = object index\n"
            "  --write-files DIR     write the working set as DIR/obj-<i> and exit\n"
            "  --no-verify           do not compare GET bodies\n"
            "  --json FILE           write results as JSON ('-' = stdout)\n"
            "  --quiet               no per-second lines\n");
}

int ol_bench_main(int argc, char **argv)
{
    const char *size_arg = "4KiB", *op_arg = "get", *endpoint = "http://127.0.0.1:9000";
    int rc = 2;
    memset(&O, 0, sizeof(O));
    O.access_key = "openlake";
    O.secret_key = "openlake-secret";
    O.region = "us-east-1";
    O.bucket = "bench";
    O.prefix = "";
    O.path_template = "/obj-%d";
    O.concurrency = 16;
    O.threads = 1;
    O.duration_s = 10;
    O.objects = 1000;
    O.verify = true;
    O.seed = 1;
    O.mix[OP_GET] = 70;
    O.mix[OP_PUT] = 20;
    O.mix[OP_DELETE] = 10;
    bool duration_given = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char name[64];
        const char *val = NULL;
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "bench: unexpected argument '%s'\n", a);
            return 2;
        }
        const char *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a - 2), a + 2);
            val = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a + 2);
        }
        /* Flags without a value. */
        if (strcmp(name, "help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(name, "prepare") == 0) {
            O.prepare = true;
            continue;
        }
        if (strcmp(name, "no-sign") == 0) {
            O.no_sign = true;
            continue;
        }
        if (strcmp(name, "no-verify") == 0) {
            O.verify = false;
            continue;
        }
        if (strcmp(name, "quiet") == 0) {
            O.quiet = true;
            continue;
        }
        if (val == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bench: --%s needs a value\n", name);
                return 2;
            }
            val = argv[++i];
        }
        int bad = 0;
        if (strcmp(name, "endpoint") == 0)
            endpoint = val;
        else if (strcmp(name, "access-key") == 0)
            O.access_key = val;
        else if (strcmp(name, "secret-key") == 0)
            O.secret_key = val;
        else if (strcmp(name, "region") == 0)
            O.region = val;
        else if (strcmp(name, "bucket") == 0)
            O.bucket = val;
        else if (strcmp(name, "prefix") == 0)
            O.prefix = val;
        else if (strcmp(name, "path-template") == 0)
            O.path_template = val;
        else if (strcmp(name, "json") == 0)
            O.json_path = val;
        else if (strcmp(name, "write-files") == 0)
            O.write_files = val;
        else if (strcmp(name, "concurrency") == 0)
            bad = (O.concurrency = atoi(val)) <= 0 || O.concurrency > MAX_CONNS;
        else if (strcmp(name, "prepare-concurrency") == 0)
            bad = (O.prepare_concurrency = atoi(val)) <= 0 || O.prepare_concurrency > MAX_CONNS;
        else if (strcmp(name, "threads") == 0)
            bad = (O.threads = atoi(val)) <= 0 || O.threads > MAX_THREADS;
        else if (strcmp(name, "size") == 0) {
            size_arg = val;
            bad = parse_sizes(val) != 0;
        } else if (strcmp(name, "duration") == 0) {
            bad = parse_duration(val, &O.duration_s) != 0;
            duration_given = true;
        } else if (strcmp(name, "objects") == 0) {
            long long v = atoll(val);
            bad = v < 0 || v > 100000000;
            O.objects = (uint32_t)v;
        } else if (strcmp(name, "op") == 0) {
            op_arg = val;
            bad = (O.op = op_from_name(val)) < 0;
        } else if (strcmp(name, "mix") == 0)
            bad = parse_mix(val) != 0;
        else if (strcmp(name, "range") == 0)
            bad = parse_size(val, &O.range_bytes) != 0;
        else if (strcmp(name, "multipart-size") == 0)
            bad = parse_size(val, &O.multipart_bytes) != 0;
        else if (strcmp(name, "seed") == 0)
            O.seed = strtoull(val, NULL, 0);
        else {
            fprintf(stderr, "bench: unknown option --%s (see openlake bench --help)\n", name);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "bench: bad value for --%s: '%s'\n", name, val);
            return 2;
        }
    }
    (void)duration_given;
    if (O.nsizes == 0)
        parse_sizes(size_arg);
    if (O.prepare_concurrency == 0)
        O.prepare_concurrency = O.concurrency;
    if (O.threads > O.concurrency)
        O.threads = O.concurrency;
    if (parse_endpoint(endpoint) != 0) {
        fprintf(stderr, "bench: bad endpoint '%s'\n", endpoint);
        return 2;
    }
    if (fill_pattern() != 0) {
        fprintf(stderr, "bench: out of memory for a %" PRIu64 "-byte pattern\n", O.max_size);
        return 2;
    }
    if (O.write_files) {
        rc = write_files(O.write_files);
        if (rc != 0)
            fprintf(stderr, "bench: writing files to %s: %s\n", O.write_files, strerror(-rc));
        rc = rc == 0 ? 0 : 2;
        goto out;
    }
    keystate = calloc(O.objects ? O.objects : 1, sizeof(*keystate));
    if (keystate == NULL)
        goto out;
    /* The working set is assumed to exist unless a mixed run creates it. */
    if (O.op != OP_MIXED)
        for (uint32_t i = 0; i < O.objects; i++)
            keystate[i] = K_EXISTS;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    if (!O.no_sign) {
        int brc = create_bucket();
        if (brc != 0) {
            fprintf(stderr, "bench: cannot create bucket '%s' at %s: %s\n", O.bucket, O.hostport,
                    strerror(-brc));
            goto out;
        }
    }
    struct run_result res;
    if (O.prepare) {
        if (!O.quiet)
            printf("preparing %u objects (%s) with %d connections\n", O.objects, size_arg,
                   O.prepare_concurrency);
        if (run_phase(true, O.prepare_concurrency, 0, true, &res) != 0) {
            fprintf(stderr, "bench: prepare failed to start\n");
            goto out;
        }
        if (!O.quiet)
            print_line("prepare", &res.st, res.elapsed_s);
        if (err_total(&res.st) != 0) {
            fprintf(stderr, "bench: %" PRIu64 " errors while preparing\n", err_total(&res.st));
            rc = 1;
            goto out;
        }
        for (uint32_t i = 0; i < O.objects; i++)
            keystate[i] = K_EXISTS;
        if (O.duration_s == 0) {
            rc = 0;
            if (O.json_path)
                write_json(O.json_path, &res, size_arg, "prepare");
            goto out;
        }
    }
    if (!O.quiet)
        printf("%s %s c=%d threads=%d for %.1fs against %s\n", op_arg, size_arg, O.concurrency,
               O.threads, O.duration_s, O.hostport);
    if (run_phase(false, O.concurrency, O.duration_s, true, &res) != 0) {
        fprintf(stderr, "bench: run failed to start\n");
        goto out;
    }
    print_line("total", &res.st, res.elapsed_s);
    for (int o = 0; o < OP_N && O.op == OP_MIXED; o++) {
        if (res.st.op[o].ops == 0)
            continue;
        struct stats one;
        memset(&one, 0, sizeof(one));
        one.op[o] = res.st.op[o];
        print_line(op_names[o], &one, res.elapsed_s);
    }
    {
        struct opstat t;
        stats_total(&res.st, &t);
        double cpu = res.cpu_user_s + res.cpu_sys_s;
        printf("errors:");
        for (int e = 0; e < E_N; e++)
            printf(" %s=%" PRIu64, err_names[e], res.st.err[e]);
        printf("\nclient cpu: %.2fs user %.2fs sys = %.2f cores, %.2f us/op\n", res.cpu_user_s,
               res.cpu_sys_s, cpu / res.elapsed_s, t.ops ? cpu * 1e6 / (double)t.ops : 0.0);
    }
    if (O.json_path && write_json(O.json_path, &res, size_arg, op_arg) != 0)
        fprintf(stderr, "bench: cannot write %s\n", O.json_path);
    rc = err_total(&res.st) == 0 && !g_interrupt ? 0 : 1;
out:
    free(keystate);
    free(pattern);
    return rc;
}
