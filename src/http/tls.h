/* TLS for the HTTP connection layer (OpenSSL).
 *
 * Two objects.  A server-wide ol_tls_conf holds the certificate and key (an
 * SSL_CTX) and replaces them on ol_tls_conf_reload (SIGHUP): connections
 * that start after a successful reload use the new context, those already
 * running keep the one they started with (each SSL holds a reference), and a
 * reload that fails keeps the old context.  A per-connection ol_tls wraps
 * one SSL whose transport is a BIO of ours that does its I/O through the
 * fiber's io_uring calls (core/loop.h): the SSL calls below read like
 * blocking calls and park the fiber, as ol_io_recv/ol_io_sendmsg do.  So the
 * connection keeps the ring's recv/send path, its timeouts and its pace;
 * only the bytes in between are encrypted.
 *
 * Writes are gathered: the records of one ol_tls_sendv call are collected
 * into one buffer (up to OL_TLS_WBUF_BYTES) and leave in as few sends as
 * that allows, as a plain response's head and body leave in one sendmsg.
 *
 * Protocol: TLS 1.2 and 1.3 only, OpenSSL's default cipher suites for both,
 * no renegotiation, no client certificates, no compression.  kTLS is not
 * used (it needs OpenSSL's socket BIO, not this ring BIO), so a TLS GET
 * reads the file and encrypts it instead of sendfile(2).
 *
 * Threads: ol_tls_conf_* may be called from any thread (the context is
 * swapped under a mutex, taken once per new connection).  An ol_tls belongs
 * to the fiber that created it.  OpenSSL's error queue is per thread and so
 * shared by the fibers of a loop: every function here clears it before and
 * after its SSL call, with no fiber switch in between, so one connection
 * never reads another's errors.
 *
 * Errors: 0 / a byte count, or a negative errno: -ETIMEDOUT (the wait hit
 * its timeout; for ol_tls_handshake and ol_tls_recv the call may be
 * repeated), -ECONNRESET (the peer closed or reset mid-record), -EPROTO (a
 * TLS protocol failure: bad record, handshake refused), OL_TLS_ENOT_TLS
 * (the peer's first bytes were not a TLS record), or the socket's error.
 */
#ifndef OL_HTTP_TLS_H
#define OL_HTTP_TLS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/loop.h"

struct ol_tls_conf;
struct ol_tls;

/* The peer's first bytes were not a TLS handshake record (a plain HTTP
 * request on the TLS port, say): nothing was passed to OpenSSL and no alert
 * was sent, so the caller may answer in plain text. */
#define OL_TLS_ENOT_TLS (-EPROTONOSUPPORT)

/* Ciphertext gathered before a send. */
#define OL_TLS_WBUF_BYTES (64u * 1024u)

/* Loads cert_file (PEM: the certificate, then any intermediates) and
 * key_file (PEM private key) into a new configuration.  The paths are kept
 * for ol_tls_conf_reload.  On error writes a message into err. */
int ol_tls_conf_open(struct ol_tls_conf **out, const char *cert_file, const char *key_file,
                     char *err, size_t errlen);
/* Reads the files again into a new context and makes it current.  On error
 * (a missing or broken file, a key that does not match) the current context
 * stays and err says why.  Any thread. */
int ol_tls_conf_reload(struct ol_tls_conf *conf, char *err, size_t errlen);
/* Successful loads so far (1 after open). */
uint64_t ol_tls_conf_generation(const struct ol_tls_conf *conf);
/* Frees the configuration; connections still holding its contexts keep
 * them until they end. */
void ol_tls_conf_close(struct ol_tls_conf *conf);

/* A server-side TLS session on socket fd (not owned: the caller closes it)
 * with conf's current context.  -ENOMEM. */
int ol_tls_new(struct ol_tls **out, struct ol_tls_conf *conf, int fd);
void ol_tls_free(struct ol_tls *t);

/* Runs the handshake for at most timeout_ms (0: no limit).  0 when it is
 * done; -ETIMEDOUT when it is not done yet (call again to go on); another
 * error when it failed. */
int ol_tls_handshake(struct ol_tls *t, unsigned timeout_ms);
/* The negotiated protocol ("TLSv1.3") and cipher, for logs. */
const char *ol_tls_version(const struct ol_tls *t);
const char *ol_tls_cipher(const struct ol_tls *t);

/* Reads up to len bytes of plaintext: the count, 0 at the peer's close
 * (close_notify, or end of stream between records), or an error.  A
 * timeout leaves the session usable. */
ssize_t ol_tls_recv(struct ol_tls *t, void *buf, size_t len, unsigned timeout_ms);
/* True when plaintext, or received bytes not yet decrypted, are buffered:
 * then the socket may never become readable again for them, and the caller
 * must read instead of waiting for readability. */
bool ol_tls_pending(const struct ol_tls *t);
/* Encrypts and sends all of iov[0..n): the plaintext bytes sent, or an
 * error (the session is then unusable).  Each wait for room in the socket
 * takes at most timeout_ms and is held to pace as ol_io_sendmsg_paced does
 * (pace may be NULL).  more: the caller sends more at once; the ciphertext
 * may stay gathered (up to OL_TLS_WBUF_BYTES) for the next call. */
ssize_t ol_tls_sendv(struct ol_tls *t, const struct iovec *iov, int n, bool more,
                     unsigned timeout_ms, struct ol_io_pace *pace);
/* Sends close_notify (best effort, waiting at most timeout_ms). */
void ol_tls_close_notify(struct ol_tls *t, unsigned timeout_ms);

#endif
