/* http/tls.h and TLS in conn.c: the real connection code on a real loop,
 * against an OpenSSL client on a thread, over socket pairs.
 *
 * Checks: the handshake; ol_http_req.secure (true over TLS, false on plain);
 * a Content-Length body, a chunked body and the file path
 * (ol_http_resp_sendfile reads and encrypts) byte for byte; several
 * requests on one connection; a client that never starts its handshake is
 * cut after header_timeout_ms; plain HTTP on a TLS connection gets a plain
 * 400; ol_tls_conf_reload keeps the old context on a broken file and
 * takes a good one.  The certificates are made here with OpenSSL's API. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "check.h"
#include "core/loop.h"
#include "http/conn.h"
#include "http/tls.h"

#define BODY_BYTES (1u << 20)
#define FILE_BYTES ((1u << 20) + 5)
#define CHUNKED_BYTES (300u * 1024u + 7)
#define CUT_MS 300u

enum { S_TLS, S_PLAIN, S_STALL, S_HTTP_ON_TLS, NSCEN };

static char root[256], cert_path[300], key_path[300], file_path[300];
static struct ol_tls_conf *conf;
static struct ol_loop *loop;
static int pairs[NSCEN][2];
static uint8_t *body_data; /* what the client sends and the file holds */
static int secure_seen[NSCEN];
static uint64_t served_ms[NSCEN];

/* ---- certificates ---- */

static int write_cert(const char *cert, const char *key)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    int ok = pk && x;
    if (ok) {
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), -60);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_set_pubkey(x, pk);
        X509_NAME *n = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"openlake-unit",
                                   -1, -1, 0);
        X509_set_issuer_name(x, n);
        ok = X509_sign(x, pk, EVP_sha256()) > 0;
    }
    FILE *fc = ok ? fopen(cert, "w") : NULL, *fk = ok ? fopen(key, "w") : NULL;
    ok = fc && fk && PEM_write_X509(fc, x) && PEM_write_PrivateKey(fk, pk, NULL, NULL, 0, NULL, NULL);
    if (fc)
        fclose(fc);
    if (fk)
        fclose(fk);
    X509_free(x);
    EVP_PKEY_free(pk);
    return ok ? 0 : -1;
}

/* ---- the server side: one fiber serving each scenario's socket in turn ---- */

static int handler(void *ctx, struct ol_http_conn *c, struct ol_http_req *req)
{
    int scen = *(int *)ctx;
    secure_seen[scen] = req->secure ? 1 : 0;
    struct ol_slice p = req->head.path;
    if (p.n == 5 && memcmp(p.p, "/file", 5) == 0) {
        int fd = open(file_path, O_RDONLY);
        if (fd < 0)
            return -errno;
        int rc = ol_http_resp_begin(c, 200, NULL, 0, FILE_BYTES);
        uint64_t off = 0;
        /* Each round sends at least a byte or fails. */
        while (rc == 0 && off < FILE_BYTES) {
            ssize_t n = ol_http_resp_sendfile(c, fd, off, FILE_BYTES - off);
            if (n <= 0)
                rc = n < 0 ? (int)n : -EIO;
            else
                off += (uint64_t)n;
        }
        close(fd);
        return rc;
    }
    /* Anything else: the body is read and checked against body_data; the
     * answer says how many bytes matched and whether the request was secure. */
    static uint8_t buf[BODY_BYTES + 1];
    ssize_t n = ol_http_body_read_full(c, buf, sizeof(buf));
    int match = n >= 0 && memcmp(buf, body_data, (size_t)n) == 0;
    char out[64];
    int len = snprintf(out, sizeof(out), "len=%zd match=%d secure=%d", n, match, req->secure);
    return ol_http_respond(c, 200, NULL, 0, out, (size_t)len);
}

static void server_fiber(void *arg)
{
    (void)arg;
    static int scen_ids[NSCEN];
    for (int s = 0; s < NSCEN; s++) {
        struct ol_http_conn_opts o = {
            .limits = {.max_head_bytes = 8192, .max_headers = 50, .max_target_bytes = 1024},
            .idle_timeout_ms = 5000,
            .io_timeout_ms = 5000,
            .header_timeout_ms = s == S_STALL ? CUT_MS : 5000,
            .buf_bytes = 8192 + 65536,
            .tls = s == S_PLAIN ? NULL : conf,
        };
        scen_ids[s] = s;
        secure_seen[s] = -1;
        uint64_t t0 = ol_now_ms();
        ol_http_conn_serve(pairs[s][0], &o, handler, &scen_ids[s]);
        served_ms[s] = ol_now_ms() - t0;
    }
    ol_loop_stop(loop);
}

static void start(void *arg)
{
    (void)arg;
    CHECK(ol_fiber_spawn(loop, server_fiber, NULL) == 0);
}

/* ---- the client side (a plain thread, blocking OpenSSL) ---- */

struct cl {
    SSL *ssl; /* NULL: plain */
    int fd;
};

static int cl_write(struct cl *c, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        int w = c->ssl ? SSL_write(c->ssl, b, (int)n) : (int)write(c->fd, b, n);
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static ssize_t cl_read(struct cl *c, void *p, size_t n)
{
    return c->ssl ? SSL_read(c->ssl, p, (int)n) : read(c->fd, p, n);
}

/* Reads one response (Content-Length framing); returns the status and puts
 * the body (malloc'd) in *body. */
static int cl_response(struct cl *c, char **body, size_t *body_len)
{
    char head[4096];
    size_t h = 0;
    while (h < sizeof(head) - 1) {
        ssize_t r = cl_read(c, head + h, 1);
        if (r <= 0)
            return -1;
        h++;
        if (h >= 4 && memcmp(head + h - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[h] = 0;
    int status = atoi(head + 9);
    const char *cl = strcasestr(head, "content-length:");
    size_t len = cl ? strtoull(cl + 15, NULL, 10) : 0;
    char *b = malloc(len + 1);
    size_t got = 0;
    while (got < len) {
        ssize_t r = cl_read(c, b + got, len - got);
        if (r <= 0) {
            free(b);
            return -1;
        }
        got += (size_t)r;
    }
    b[len] = 0;
    *body = b;
    *body_len = len;
    return status;
}

static void cl_expect(struct cl *c, const char *want_prefix)
{
    char *b = NULL;
    size_t n = 0;
    int st = cl_response(c, &b, &n);
    CHECK(st == 200);
    CHECK(b && strncmp(b, want_prefix, strlen(want_prefix)) == 0);
    if (b && strncmp(b, want_prefix, strlen(want_prefix)) != 0)
        fprintf(stderr, "got '%s', want '%s...'\n", b, want_prefix);
    free(b);
}

static void client_tls(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    CHECK(SSL_CTX_load_verify_locations(ctx, cert_path, NULL) == 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, pairs[S_TLS][1]);
    CHECK(SSL_connect(ssl) == 1);
    CHECK(SSL_get_verify_result(ssl) == X509_V_OK);
    struct cl c = {ssl, pairs[S_TLS][1]};
    char head[256];

    /* A request without a body. */
    const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(cl_write(&c, get, sizeof(get) - 1) == 0);
    cl_expect(&c, "len=0 match=1 secure=1");

    /* A Content-Length body. */
    int hl = snprintf(head, sizeof(head), "PUT /cl HTTP/1.1\r\nHost: t\r\nContent-Length: %u\r\n\r\n",
                      BODY_BYTES);
    CHECK(cl_write(&c, head, (size_t)hl) == 0 && cl_write(&c, body_data, BODY_BYTES) == 0);
    snprintf(head, sizeof(head), "len=%u match=1 secure=1", BODY_BYTES);
    cl_expect(&c, head);

    /* A chunked body, in uneven chunks. */
    const char ch[] = "PUT /ch HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK(cl_write(&c, ch, sizeof(ch) - 1) == 0);
    for (size_t off = 0; off < CHUNKED_BYTES;) {
        size_t n = CHUNKED_BYTES - off < 7001 ? CHUNKED_BYTES - off : 7001;
        hl = snprintf(head, sizeof(head), "%zx\r\n", n);
        CHECK(cl_write(&c, head, (size_t)hl) == 0 && cl_write(&c, body_data + off, n) == 0 &&
              cl_write(&c, "\r\n", 2) == 0);
        off += n;
    }
    CHECK(cl_write(&c, "0\r\n\r\n", 5) == 0);
    snprintf(head, sizeof(head), "len=%u match=1 secure=1", CHUNKED_BYTES);
    cl_expect(&c, head);

    /* The file path. */
    const char gf[] = "GET /file HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(cl_write(&c, gf, sizeof(gf) - 1) == 0);
    char *b = NULL;
    size_t n = 0;
    CHECK(cl_response(&c, &b, &n) == 200);
    CHECK(n == FILE_BYTES && b && memcmp(b, body_data, FILE_BYTES) == 0);
    free(b);

    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    shutdown(pairs[S_TLS][1], SHUT_WR);
}

static void client_plain(void)
{
    struct cl c = {NULL, pairs[S_PLAIN][1]};
    const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    CHECK(cl_write(&c, get, sizeof(get) - 1) == 0);
    cl_expect(&c, "len=0 match=1 secure=0");
}

static void client_stall(void)
{
    /* Nothing is sent: the server must close by itself. */
    char b[16];
    CHECK(read(pairs[S_STALL][1], b, sizeof(b)) == 0);
}

static void client_http_on_tls(void)
{
    struct cl c = {NULL, pairs[S_HTTP_ON_TLS][1]};
    const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(cl_write(&c, get, sizeof(get) - 1) == 0);
    char *b = NULL;
    size_t n = 0;
    int st = cl_response(&c, &b, &n);
    CHECK(st == 400);
    CHECK(b && strstr(b, "HTTPS"));
    free(b);
    char x;
    CHECK(read(pairs[S_HTTP_ON_TLS][1], &x, 1) == 0);
    shutdown(pairs[S_HTTP_ON_TLS][1], SHUT_WR); /* ends the server's lingering close */
}

static void *client_main(void *arg)
{
    (void)arg;
    client_tls();
    client_plain();
    client_stall();
    client_http_on_tls();
    return NULL;
}

/* ---- reload ---- */

static void test_reload(void)
{
    char err[512];
    CHECK(ol_tls_conf_generation(conf) == 1);
    char other_cert[300], other_key[300];
    snprintf(other_cert, sizeof(other_cert), "%s/other.crt", root);
    snprintf(other_key, sizeof(other_key), "%s/other.key", root);
    CHECK(write_cert(other_cert, other_key) == 0);
    /* A broken certificate: refused, the old context kept. */
    FILE *f = fopen(cert_path, "w");
    fputs("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n", f);
    fclose(f);
    CHECK(ol_tls_conf_reload(conf, err, sizeof(err)) < 0);
    CHECK(strstr(err, "tls_cert") != NULL);
    CHECK(ol_tls_conf_generation(conf) == 1);
    CHECK(rename(other_cert, cert_path) == 0);
    /* A good certificate with the old key (not its own): refused too. */
    CHECK(ol_tls_conf_reload(conf, err, sizeof(err)) < 0);
    CHECK(strstr(err, "tls_key") != NULL);
    CHECK(ol_tls_conf_generation(conf) == 1);
    CHECK(rename(other_key, key_path) == 0);
    CHECK_RC(ol_tls_conf_reload(conf, err, sizeof(err)), 0);
    CHECK(ol_tls_conf_generation(conf) == 2);
    /* A configuration needs both files. */
    struct ol_tls_conf *none = NULL;
    CHECK(ol_tls_conf_open(&none, "", key_path, err, sizeof(err)) == -EINVAL && !none);
}

int main(void)
{
    if (check_mkdtemp(root, sizeof(root), "tls") < 0)
        return 77;
    snprintf(cert_path, sizeof(cert_path), "%s/server.crt", root);
    snprintf(key_path, sizeof(key_path), "%s/server.key", root);
    snprintf(file_path, sizeof(file_path), "%s/file", root);
    CHECK(write_cert(cert_path, key_path) == 0);
    char err[512];
    CHECK_RC(ol_tls_conf_open(&conf, cert_path, key_path, err, sizeof(err)), 0);
    if (!conf) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    body_data = malloc(FILE_BYTES);
    for (size_t i = 0; i < FILE_BYTES; i++)
        body_data[i] = (uint8_t)(i * 2654435761u >> 13);
    FILE *f = fopen(file_path, "w");
    CHECK(f && fwrite(body_data, 1, FILE_BYTES, f) == FILE_BYTES);
    fclose(f);
    for (int s = 0; s < NSCEN; s++)
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[s]) == 0);

    struct ol_loop_opts o = {.id = 0, .max_fibers = 8, .stack_bytes = 256 * 1024};
    CHECK(ol_loop_create(&loop, &o) == 0);
    pthread_t t;
    pthread_create(&t, NULL, client_main, NULL);
    ol_loop_post(loop, start, NULL);
    CHECK(ol_loop_run(loop) == 0);
    pthread_join(t, NULL);
    ol_loop_destroy(loop);

    CHECK(secure_seen[S_TLS] == 1);
    CHECK(secure_seen[S_PLAIN] == 0);
    CHECK(secure_seen[S_STALL] == -1 && secure_seen[S_HTTP_ON_TLS] == -1);
    /* Cut at header_timeout_ms (plus a slice of slack), not at a later timeout. */
    CHECK(served_ms[S_STALL] >= CUT_MS - 10 && served_ms[S_STALL] < CUT_MS + 1000);
    if (served_ms[S_STALL] >= CUT_MS + 1000)
        fprintf(stderr, "stalled handshake cut after %llu ms\n",
                (unsigned long long)served_ms[S_STALL]);

    test_reload();
    ol_tls_conf_close(conf);
    for (int s = 0; s < NSCEN; s++)
        close(pairs[s][1]); /* [0] was closed by ol_http_conn_serve */
    free(body_data);
    check_rm_rf(root);
    printf("test_tls: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
