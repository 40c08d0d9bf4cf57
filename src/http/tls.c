/* TLS for the HTTP connection layer: an SSL over a BIO of ours that does its
 * I/O through the fiber's ring calls (see tls.h for the contract). */
#include "http/tls.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/log.h"
#include "core/loop.h"

#define PATH_BYTES 1024u
/* The first byte of every TLS connection: a handshake record (ClientHello). */
#define TLS_RECORD_HANDSHAKE 0x16

struct ol_tls_conf {
    pthread_mutex_t mu;   /* guards ctx and generation */
    SSL_CTX *ctx;
    uint64_t generation;
    char cert[PATH_BYTES];
    char key[PATH_BYTES];
};

struct ol_tls {
    SSL *ssl;
    int fd;
    /* The timeouts and pace of the I/O in progress, for the BIO's callbacks:
     * set by each public call before it enters OpenSSL. */
    unsigned rd_tmo;
    unsigned wr_tmo;
    struct ol_io_pace *pace;
    int err;         /* sticky: a socket error (or OL_TLS_ENOT_TLS); the session is dead */
    bool eof;        /* the peer closed its side */
    bool timed_out;  /* the last read hit rd_tmo (a retry, not an error) */
    bool seen_first; /* the first bytes have been checked for a TLS record */
    /* Ciphertext gathered for one send (NULL when empty: an idle session
     * holds no buffer). */
    char *wbuf;
    size_t wlen;
};

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

/* Sends what is gathered.  0 or the send's error (then sticky). */
static int flush(struct ol_tls *t)
{
    if (!t->wlen)
        return 0;
    struct iovec iov = {.iov_base = t->wbuf, .iov_len = t->wlen};
    ssize_t n = ol_io_sendmsg_paced(t->fd, &iov, 1, 0, t->wr_tmo, t->pace);
    t->wlen = 0;
    free(t->wbuf);
    t->wbuf = NULL;
    if (n < 0) {
        t->err = (int)n;
        return (int)n;
    }
    return 0;
}

static int bio_write(BIO *b, const char *data, size_t len, size_t *written)
{
    struct ol_tls *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    *written = 0;
    if (t->err)
        return 0;
    if (t->wlen + len > OL_TLS_WBUF_BYTES && flush(t) < 0)
        return 0;
    if (len >= OL_TLS_WBUF_BYTES) {
        /* Larger than the gathering buffer (OpenSSL writes at most a few
         * records at once, so this is rare): straight out. */
        struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
        ssize_t n = ol_io_sendmsg_paced(t->fd, &iov, 1, 0, t->wr_tmo, t->pace);
        if (n < 0) {
            t->err = (int)n;
            return 0;
        }
    } else {
        if (!t->wbuf) {
            t->wbuf = malloc(OL_TLS_WBUF_BYTES);
            if (!t->wbuf) {
                t->err = -ENOMEM;
                return 0;
            }
        }
        memcpy(t->wbuf + t->wlen, data, len);
        t->wlen += len;
    }
    *written = len;
    return 1;
}

static int bio_read(BIO *b, char *buf, size_t len, size_t *readbytes)
{
    struct ol_tls *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    *readbytes = 0;
    if (t->err || t->eof)
        return 0;
    /* A handshake flight gathered by OpenSSL is flushed before it waits for
     * the answer (BIO_flush); anything else gathered goes out now too, so a
     * read never waits on bytes of ours that were never sent. */
    if (flush(t) < 0)
        return 0;
    ssize_t n = ol_io_recv(t->fd, buf, len, t->rd_tmo);
    if (n == -ETIMEDOUT) {
        /* OpenSSL keeps its state: the same call may be made again. */
        t->timed_out = true;
        BIO_set_retry_read(b);
        return 0;
    }
    if (n < 0) {
        t->err = (int)n;
        return 0;
    }
    if (n == 0) {
        t->eof = true;
        return 0;
    }
    if (!t->seen_first) {
        /* Whatever is not a TLS record (a plain HTTP request) never reaches
         * OpenSSL, which would answer it with an alert: the caller can then
         * say in plain text what went wrong. */
        t->seen_first = true;
        if ((unsigned char)buf[0] != TLS_RECORD_HANDSHAKE) {
            t->err = OL_TLS_ENOT_TLS;
            return 0;
        }
    }
    *readbytes = (size_t)n;
    return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    struct ol_tls *t = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return t && flush(t) == 0 ? 1 : 0;
    case BIO_CTRL_WPENDING: return t ? (long)t->wlen : 0;
    default: return 0; /* kTLS queries and the rest: not supported */
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static int bio_destroy(BIO *b)
{
    BIO_set_data(b, NULL);
    return 1;
}

static void bio_method_init(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "openlake-ring");
    if (!m)
        return;
    BIO_meth_set_write_ex(m, bio_write);
    BIO_meth_set_read_ex(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    bio_method = m;
}

/* err <- "what file: the first OpenSSL error"; the queue is left empty. */
static void ssl_error(char *err, size_t errlen, const char *what, const char *file)
{
    unsigned long e = ERR_get_error();
    char why[256] = "failed";
    if (e)
        ERR_error_string_n(e, why, sizeof(why));
    snprintf(err, errlen, "%s %s: %s", what, file, why);
    ERR_clear_error();
}

static SSL_CTX *load_ctx(const char *cert, const char *key, char *err, size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_error(err, errlen, "TLS", "context");
        return NULL;
    }
    /* TLS 1.2 at least; OpenSSL's default suites for 1.2 and 1.3.  No
     * renegotiation (a client could make the server do handshakes at will
     * on one connection), and the server's order of ciphers. */
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_dh_auto(ctx, 1);
    /* Read as much as the socket has (one recv for several records, not two
     * per record), and give the record buffers back while a connection
     * idles: an idle TLS connection then costs the SSL alone. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_error(err, errlen, "tls_cert", cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ssl_error(err, errlen, "tls_key", key);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_error(err, errlen, "tls_key", key);
        goto fail;
    }
    ERR_clear_error();
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int ol_tls_conf_open(struct ol_tls_conf **out, const char *cert_file, const char *key_file,
                     char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&bio_once, bio_method_init);
    if (!bio_method) {
        snprintf(err, errlen, "TLS: cannot create the BIO method");
        return -ENOMEM;
    }
    if (!cert_file[0] || !key_file[0] || strlen(cert_file) >= PATH_BYTES ||
        strlen(key_file) >= PATH_BYTES) {
        snprintf(err, errlen, "tls_listen needs tls_cert and tls_key (paths under %u bytes)",
                 PATH_BYTES);
        return -EINVAL;
    }
    struct ol_tls_conf *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "TLS: out of memory");
        return -ENOMEM;
    }
    strcpy(c->cert, cert_file);
    strcpy(c->key, key_file);
    c->ctx = load_ctx(c->cert, c->key, err, errlen);
    if (!c->ctx) {
        free(c);
        return -EINVAL;
    }
    c->generation = 1;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

int ol_tls_conf_reload(struct ol_tls_conf *conf, char *err, size_t errlen)
{
    SSL_CTX *ctx = load_ctx(conf->cert, conf->key, err, errlen);
    if (!ctx)
        return -EINVAL;
    pthread_mutex_lock(&conf->mu);
    SSL_CTX *old = conf->ctx;
    conf->ctx = ctx;
    conf->generation++;
    pthread_mutex_unlock(&conf->mu);
    /* Sessions made from the old context hold their own references. */
    SSL_CTX_free(old);
    return 0;
}

uint64_t ol_tls_conf_generation(const struct ol_tls_conf *conf)
{
    struct ol_tls_conf *c = (struct ol_tls_conf *)conf;
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->generation;
    pthread_mutex_unlock(&c->mu);
    return g;
}

void ol_tls_conf_close(struct ol_tls_conf *conf)
{
    if (!conf)
        return;
    SSL_CTX_free(conf->ctx);
    pthread_mutex_destroy(&conf->mu);
    free(conf);
}

int ol_tls_new(struct ol_tls **out, struct ol_tls_conf *conf, int fd)
{
    *out = NULL;
    struct ol_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->fd = fd;
    ERR_clear_error();
    /* SSL_new takes its own reference on the context: a reload may free
     * conf's reference at any time after the unlock. */
    pthread_mutex_lock(&conf->mu);
    t->ssl = SSL_new(conf->ctx);
    pthread_mutex_unlock(&conf->mu);
    BIO *b = t->ssl ? BIO_new(bio_method) : NULL;
    if (!b) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return -ENOMEM;
    }
    BIO_set_data(b, t);
    SSL_set_bio(t->ssl, b, b); /* one reference, for both directions */
    SSL_set_accept_state(t->ssl);
    ERR_clear_error();
    *out = t;
    return 0;
}

void ol_tls_free(struct ol_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* frees the BIO */
    free(t->wbuf);
    free(t);
}

/* The error of a failed SSL call (ret: its return value), as a negative
 * errno; 0 for the peer's close. */
static int failure(struct ol_tls *t, int ret)
{
    int e = SSL_get_error(t->ssl, ret);
    if (t->err)
        return t->err;
    if (e == SSL_ERROR_WANT_READ && t->timed_out)
        return -ETIMEDOUT;
    if (e == SSL_ERROR_ZERO_RETURN || t->eof)
        return 0;
    if (e == SSL_ERROR_SSL) {
        char why[256];
        ERR_error_string_n(ERR_peek_error(), why, sizeof(why));
        ol_log_limited(OL_LOG_DEBUG, "TLS: %s", why);
        return -EPROTO;
    }
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -EAGAIN;
    return -ECONNRESET;
}

int ol_tls_handshake(struct ol_tls *t, unsigned timeout_ms)
{
    t->rd_tmo = t->wr_tmo = timeout_ms;
    t->timed_out = false;
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    int rc = r == 1 ? 0 : failure(t, r);
    ERR_clear_error();
    if (rc == 0 && r != 1)
        rc = -ECONNRESET; /* closed mid-handshake */
    if (rc == -EAGAIN)
        rc = -ETIMEDOUT;
    /* A refused handshake may leave its alert gathered: it goes out (best
     * effort), so the client learns why. */
    if (rc < 0 && rc != -ETIMEDOUT && !t->err)
        (void)flush(t);
    return rc;
}

const char *ol_tls_version(const struct ol_tls *t)
{
    return SSL_get_version(t->ssl);
}

const char *ol_tls_cipher(const struct ol_tls *t)
{
    return SSL_get_cipher_name(t->ssl);
}

ssize_t ol_tls_recv(struct ol_tls *t, void *buf, size_t len, unsigned timeout_ms)
{
    if (t->err)
        return t->err;
    if (len > INT_MAX)
        len = INT_MAX;
    t->rd_tmo = timeout_ms;
    /* A round ends in data, an error, or a timeout; one that ends in a
     * "want read" with neither (OpenSSL consumed a record that carried no
     * data, as a TLS 1.3 key update) goes on, a bounded number of times. */
    for (unsigned rounds = 0; rounds < 64; rounds++) {
        size_t n = 0;
        t->timed_out = false;
        ERR_clear_error();
        int r = SSL_read_ex(t->ssl, buf, len, &n);
        int rc = r == 1 ? 0 : failure(t, 0);
        ERR_clear_error();
        if (r == 1)
            return (ssize_t)n;
        if (rc != -EAGAIN)
            return rc;
    }
    return -ETIMEDOUT;
}

bool ol_tls_pending(const struct ol_tls *t)
{
    return SSL_has_pending(t->ssl) == 1;
}

ssize_t ol_tls_sendv(struct ol_tls *t, const struct iovec *iov, int n, bool more,
                     unsigned timeout_ms, struct ol_io_pace *pace)
{
    if (t->err)
        return t->err;
    t->wr_tmo = timeout_ms;
    t->pace = pace;
    size_t total = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        /* Each round writes a piece (SSL_write takes an int) or fails. */
        while (left > 0 && rc == 0) {
            size_t piece = left < (1u << 30) ? left : (1u << 30), w = 0;
            ERR_clear_error();
            int r = SSL_write_ex(t->ssl, p, piece, &w);
            if (r != 1) {
                rc = failure(t, 0);
                if (rc == 0 || rc == -EAGAIN)
                    rc = -EPIPE;
            }
            ERR_clear_error();
            p += w;
            left -= w;
            total += w;
        }
    }
    if (rc == 0 && !more)
        rc = flush(t);
    t->pace = NULL;
    if (rc < 0) {
        if (!t->err)
            t->err = rc;
        return rc;
    }
    return (ssize_t)total;
}

void ol_tls_close_notify(struct ol_tls *t, unsigned timeout_ms)
{
    if (t->err || !SSL_is_init_finished(t->ssl))
        return;
    t->wr_tmo = timeout_ms;
    ERR_clear_error();
    (void)SSL_shutdown(t->ssl);
    (void)flush(t);
    ERR_clear_error();
}
