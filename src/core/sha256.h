/* SHA-256 and HMAC-SHA256 (OpenSSL) on per-thread digest contexts.
 *
 * OpenSSL 3 looks the SHA-256 implementation up in its provider store, under
 * a lock, every time a digest is started with EVP_sha256(), and the one-shot
 * HMAC() also fetches a MAC and allocates contexts.  On a small message that
 * costs more than the hashing, so the implementation is fetched once per
 * process and each thread keeps two digest contexts: OL_SHA_CTX_LONG for a
 * digest that stays open while others run (SigV4's canonical request), and
 * OL_SHA_CTX_SCRATCH, which ol_sha256 and ol_hmac_sha256 use.  Users: SigV4
 * (s3/sigv4.c) and the drive protocol's message authentication
 * (net/auth.h).
 *
 * Threads: any; a context is the calling thread's (freed when it exits).
 * Errors: -ENOMEM when OpenSSL cannot allocate.
 */
#ifndef OL_CORE_SHA256_H
#define OL_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

enum ol_sha_ctx { OL_SHA_CTX_LONG, OL_SHA_CTX_SCRATCH, OL_SHA_NCTX };

/* The process's SHA-256 implementation (fetched once). */
const EVP_MD *ol_sha256_md(void);
/* The calling thread's context `which`, started for SHA-256; NULL when out
 * of memory.  Valid until the thread next asks for the same context. */
EVP_MD_CTX *ol_sha256_ctx(enum ol_sha_ctx which);

/* A part of a message. */
struct ol_bytes {
    const void *p;
    size_t n;
};

/* SHA-256 of buf. */
int ol_sha256(const void *buf, size_t len, uint8_t out[32]);
/* HMAC-SHA256 (RFC 2104) of the concatenation of n parts under a key of at
 * most 64 bytes (one SHA-256 block; longer keys are the caller's to hash
 * first, as RFC 2104 says). */
int ol_hmac_sha256(const void *key, size_t key_len, const struct ol_bytes *msg, unsigned n,
                   uint8_t out[32]);

#endif
