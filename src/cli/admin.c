/* `openlake admin`: signs one request with SigV4 (as cli/bench.c does),
 * sends it over a plain blocking socket and prints the JSON answer.  While a
 * heal of the whole deployment runs, a second thread polls
 * /_openlake/admin/heal/status and prints progress lines on stderr; the
 * final counts are the answer on stdout.
 *
 *   openlake admin info --endpoint http://127.0.0.1:9000
 *   openlake admin heal --endpoint URL [--bucket B [--key K]] [--progress-ms N]
 *   openlake admin drive --endpoint URL --index N --state online|offline
 *
 * Credentials: --access-key/--secret-key, else $OPENLAKE_ACCESS_KEY and
 * $OPENLAKE_SECRET_KEY, else the server's default pair. */
#include "cli/admin.h"
#include "cli/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "s3/sigv4.h"

#define ADMIN_MAX_RESPONSE (16u << 20)

static void admin_usage(void)
{
    fprintf(stderr, "usage: openlake admin user add|remove|list|rotate ... (admin user --help)\n"
                    "       openlake admin info|heal|drive --endpoint http://HOST:PORT\n"
                    "         [--bucket B [--key K]]     (heal: one bucket or one object)\n"
                    "         [--progress-ms N]  (heal of the deployment: progress on stderr\n"
                    "                             every N ms, default 1000; 0 = none)\n"
                    "         [--index N --state online|offline]   (drive)\n"
                    "         [--access-key AK --secret-key SK] [--region R]\n");
}

/* Percent-encodes everything but A-Z a-z 0-9 - _ . ~ (SigV4's canonical
 * query form, so the signed and the sent query are the same bytes). */
void ol_admin_qenc(const char *s, char *out, size_t cap)
{
    static const char hx[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s && n + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hx[c >> 4];
            out[n++] = hx[c & 15];
        }
    }
    out[n] = 0;
}

static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -EHOSTUNREACH;
    int fd = -ECONNREFUSED;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int s = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
            fd = s;
            break;
        }
        close(s);
    }
    freeaddrinfo(res);
    return fd;
}

#define admin_target ol_admin_target

static int admin_call(const struct admin_target *t, const char *method, const char *path,
                      const char *query, char **resp, char **body, int *status)
{
    return ol_admin_call(t, method, path, query, NULL, resp, body, status);
}

int ol_admin_call(const struct ol_admin_target *t, const char *method, const char *path,
                  const char *query, const char *req_body, char **resp, char **body, int *status)
{
    const char *ak = t->ak, *sk = t->sk, *region = t->region;
    const char *hostport = t->hostport;
    *resp = NULL;
    *body = NULL;
    *status = 0;
    char amz[17], date8[9];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(amz, sizeof(amz), "%Y%m%dT%H%M%SZ", &tm);
    memcpy(date8, amz, 8);
    date8[8] = 0;
    static const char payload[] = "UNSIGNED-PAYLOAD";
    struct ol_http_header hdrs[3] = {
        {{"host", 4}, {hostport, strlen(hostport)}},
        {{"x-amz-content-sha256", 20}, {payload, sizeof(payload) - 1}},
        {{"x-amz-date", 10}, {amz, 16}},
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
        .access_key = {ak, strlen(ak)},
        .date = {date8, 8},
        .region = {region, strlen(region)},
        .service = {"s3", 2},
        .signed_headers = {signed_headers, sizeof(signed_headers) - 1},
    };
    memcpy(auth.amz_date, amz, sizeof(auth.amz_date));
    char sig[65];
    if (ol_sigv4_sign(&req, &auth, sk, strlen(sk), sig) != 0)
        return -EINVAL;
    char head[8192];
    int n = snprintf(head, sizeof(head),
                     "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-content-sha256: %s\r\n"
                     "x-amz-date: %s\r\nAuthorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/"
                     "aws4_request, SignedHeaders=%s, Signature=%s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     method, path, query[0] ? "?" : "", query, hostport, payload, amz, ak, date8,
                     region, signed_headers, sig, req_body ? strlen(req_body) : (size_t)0);
    if (n <= 0 || (size_t)n >= sizeof(head))
        return -ENAMETOOLONG;
    int fd = connect_to(t->host, t->port);
    if (fd < 0)
        return fd;
    int rc = -EIO;
    char *buf = malloc(ADMIN_MAX_RESPONSE + 1);
    size_t got = 0;
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    if (write(fd, head, (size_t)n) != n)
        goto out;
    if (req_body && req_body[0] &&
        write(fd, req_body, strlen(req_body)) != (ssize_t)strlen(req_body))
        goto out;
    /* Each round reads some bytes or ends at EOF (Connection: close). */
    while (got < ADMIN_MAX_RESPONSE) {
        ssize_t r = read(fd, buf + got, ADMIN_MAX_RESPONSE - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = 0;
    if (sscanf(buf, "HTTP/1.1 %d", status) != 1) {
        rc = -EPROTO;
        goto out;
    }
    char *b = strstr(buf, "\r\n\r\n");
    *body = b ? b + 4 : buf + got;
    *resp = buf;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

/* Progress of a deployment heal: a thread polls the heal-status endpoint
 * while the heal request is running and prints a line on stderr each time
 * the totals moved. */
struct heal_watch {
    const struct admin_target *t;
    unsigned period_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static uint64_t json_u64(const char *body, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", name);
    const char *p = strstr(body, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void *heal_watch_main(void *arg)
{
    struct heal_watch *hw = arg;
    uint64_t last_objects = UINT64_MAX;
    bool seen_running = false;
    pthread_mutex_lock(&hw->mu);
    /* Each round waits one period (or the stop) and polls once. */
    for (unsigned guard = 0; !hw->stop && guard < (1u << 30); guard++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += hw->period_ms / 1000;
        ts.tv_nsec += (long)(hw->period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&hw->cv, &hw->mu, &ts);
        if (hw->stop)
            break;
        pthread_mutex_unlock(&hw->mu);
        char *resp, *body;
        int status;
        int rc = admin_call(hw->t, "GET", "/_openlake/admin/heal/status", "", &resp, &body,
                            &status);
        if (rc == 0 && status == 200 && strstr(body, "\"running\":true")) {
            uint64_t objects = json_u64(body, "objects");
            if (objects != last_objects || !seen_running)
                fprintf(stderr, "heal: %" PRIu64 " objects, %" PRIu64 " shards rebuilt, %" PRIu64
                                " corrupt, %" PRIu64 " unrecoverable (%.1f s)\n",
                        objects, json_u64(body, "shards_rebuilt"), json_u64(body, "corrupt"),
                        json_u64(body, "unrecoverable"),
                        (double)json_u64(body, "elapsed_ms") / 1000.0);
            last_objects = objects;
            seen_running = true;
        }
        free(resp);
        pthread_mutex_lock(&hw->mu);
    }
    pthread_mutex_unlock(&hw->mu);
    return NULL;
}

int ol_admin_main(int argc, char **argv)
{
    const char *cmd = argc >= 2 ? argv[1] : NULL;
    if (cmd && strcmp(cmd, "cluster") == 0)
        return ol_admin_cluster_main(argc - 1, argv + 1);
    if (cmd && strcmp(cmd, "user") == 0)
        return ol_admin_user_main(argc - 1, argv + 1);
    const char *endpoint = NULL, *bucket = NULL, *key = NULL, *index = NULL, *state = NULL;
    const char *ak = getenv("OPENLAKE_ACCESS_KEY"), *sk = getenv("OPENLAKE_SECRET_KEY");
    const char *region = "us-east-1";
    long progress_ms = 1000; /* heal of the deployment: progress line period; 0 = none */
    if (!ak || !sk) {
        ak = "openlake";
        sk = "openlake-secret";
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *n = argv[i], *v = argv[i + 1];
        if (strcmp(n, "--endpoint") == 0)
            endpoint = v;
        else if (strcmp(n, "--bucket") == 0)
            bucket = v;
        else if (strcmp(n, "--key") == 0)
            key = v;
        else if (strcmp(n, "--index") == 0)
            index = v;
        else if (strcmp(n, "--state") == 0)
            state = v;
        else if (strcmp(n, "--access-key") == 0)
            ak = v;
        else if (strcmp(n, "--secret-key") == 0)
            sk = v;
        else if (strcmp(n, "--region") == 0)
            region = v;
        else if (strcmp(n, "--progress-ms") == 0)
            progress_ms = strtol(v, NULL, 10);
        else {
            admin_usage();
            return 2;
        }
    }
    if (!cmd || !endpoint || (argc % 2) != 0 ||
        (strcmp(cmd, "info") && strcmp(cmd, "heal") && strcmp(cmd, "drive"))) {
        admin_usage();
        return 2;
    }
    /* http://host:port */
    char host[256], port[16] = "80";
    const char *hp = strncmp(endpoint, "http://", 7) == 0 ? endpoint + 7 : endpoint;
    size_t hl = strcspn(hp, "/");
    if (hl == 0 || hl >= sizeof(host)) {
        fprintf(stderr, "openlake admin: bad endpoint '%s'\n", endpoint);
        return 2;
    }
    char hostport[256];
    snprintf(hostport, sizeof(hostport), "%.*s", (int)hl, hp);
    snprintf(host, sizeof(host), "%s", hostport);
    char *colon = strrchr(host, ':');
    if (colon) {
        snprintf(port, sizeof(port), "%s", colon + 1);
        *colon = 0;
    }
    char query[4300] = "", a[2100], b[2100];
    const char *method = "POST", *path;
    if (strcmp(cmd, "info") == 0) {
        method = "GET";
        path = "/_openlake/admin/info";
    } else if (strcmp(cmd, "heal") == 0) {
        path = "/_openlake/admin/heal";
        /* Query parameters in sorted order (bucket < key). */
        if (bucket) {
            ol_admin_qenc(bucket, a, sizeof(a));
            snprintf(query, sizeof(query), "bucket=%s", a);
        }
        if (bucket && key) {
            ol_admin_qenc(key, b, sizeof(b));
            size_t ql = strlen(query);
            snprintf(query + ql, sizeof(query) - ql, "&key=%s", b);
        }
    } else {
        path = "/_openlake/admin/drive";
        if (!index || !state) {
            admin_usage();
            return 2;
        }
        ol_admin_qenc(index, a, sizeof(a));
        ol_admin_qenc(state, b, sizeof(b));
        snprintf(query, sizeof(query), "index=%s&state=%s", a, b);
    }
    struct admin_target t = {.ak = ak, .sk = sk, .region = region};
    snprintf(t.hostport, sizeof(t.hostport), "%s", hostport);
    snprintf(t.host, sizeof(t.host), "%s", host);
    snprintf(t.port, sizeof(t.port), "%s", port);
    bool watch = strcmp(cmd, "heal") == 0 && !bucket && progress_ms > 0;
    struct heal_watch hw = {.t = &t, .period_ms = (unsigned)progress_ms};
    pthread_t th;
    if (strcmp(cmd, "heal") == 0)
        fprintf(stderr, "healing %s%s%s%s ...\n", bucket ? "bucket " : "the whole deployment",
                bucket ? bucket : "", key ? ", object " : "", key ? key : "");
    if (watch) {
        pthread_mutex_init(&hw.mu, NULL);
        pthread_cond_init(&hw.cv, NULL);
        watch = pthread_create(&th, NULL, heal_watch_main, &hw) == 0;
    }
    char *resp = NULL, *body = NULL;
    int status = 0;
    int rc = admin_call(&t, method, path, query, &resp, &body, &status);
    if (watch) {
        pthread_mutex_lock(&hw.mu);
        hw.stop = true;
        pthread_cond_signal(&hw.cv);
        pthread_mutex_unlock(&hw.mu);
        pthread_join(th, NULL);
    }
    if (rc < 0) {
        fprintf(stderr, "openlake admin: request to %s failed: %s\n", t.hostport, strerror(-rc));
        rc = 1;
        goto out;
    }
    /* The last progress line is the result itself, so even a heal shorter
     * than one polling period reports its progress once. */
    if (strcmp(cmd, "heal") == 0 && !bucket && progress_ms > 0 && status == 200)
        fprintf(stderr, "heal: %" PRIu64 " objects, %" PRIu64 " shards rebuilt, %" PRIu64
                        " corrupt, %" PRIu64 " unrecoverable (done)\n",
                json_u64(body, "objects"), json_u64(body, "shards_rebuilt"),
                json_u64(body, "corrupt"), json_u64(body, "unrecoverable"));
    fputs(body, status == 200 ? stdout : stderr);
    if (status != 200)
        fprintf(stderr, "openlake admin: HTTP %d\n", status);
    rc = status == 200 ? 0 : 1;
out:
    free(resp);
    return rc;
}
