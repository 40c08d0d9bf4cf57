/* AES-256-GCM (NIST SP 800-38D) with 12-byte nonces and 16-byte tags: the
 * cipher of encryption at rest (obj/sse.c) and of the user store's sealed
 * secrets (users/users.c).
 *
 * Two implementations of the same bytes, chosen once per process:
 *   - Intel's ipsec-mb (Debian libipsec-mb-dev, x86-64 only) where the build
 *     found it and the CPU has AES-NI: on CPUs with VAES and VPCLMULQDQ its
 *     AVX-512 GCM runs at about 10.5 GB/s a core on 1 MiB messages, against
 *     4.6 GB/s for Debian 12's OpenSSL 3.0 (no VAES GCM) on the same core;
 *   - OpenSSL's EVP everywhere else (and with OPENLAKE_GCM=openssl in the
 *     environment, for comparisons).
 * Both give the same ciphertext and tag for the same input, so data sealed
 * by one build opens in the other.
 *
 * A context holds one expanded key and one message in progress:
 *   ol_gcm_key(g, key); then per message
 *   ol_gcm_start(g, enc, nonce, aad, aad_len); ol_gcm_update(...)*;
 *   ol_gcm_seal_tag(g, tag) or ol_gcm_open_tag(g, tag).
 * Updates may be any length (GCM is a stream: any split gives the same
 * bytes).  out may equal in.
 *
 * Threads: a context belongs to one thread at a time; any thread may make
 * one.  Errors: -ENOMEM, -EIO (the library failed), -EBADMSG (a tag did not
 * match: nothing opened may be used).
 */
#ifndef OL_CORE_GCM_H
#define OL_CORE_GCM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_GCM_KEY 32
#define OL_GCM_NONCE 12
#define OL_GCM_TAG 16

struct ol_gcm;

struct ol_gcm *ol_gcm_new(void);
/* Wipes the key and frees; NULL is fine. */
void ol_gcm_free(struct ol_gcm *g);

/* Loads (expands) a key; every later message uses it until the next call. */
int ol_gcm_key(struct ol_gcm *g, const uint8_t key[OL_GCM_KEY]);
/* Starts a message: enc true seals, false opens. */
int ol_gcm_start(struct ol_gcm *g, bool enc, const uint8_t nonce[OL_GCM_NONCE],
                 const uint8_t *aad, size_t aad_len);
/* Seals or opens n bytes of the message into out[n]. */
int ol_gcm_update(struct ol_gcm *g, const uint8_t *in, size_t n, uint8_t *out);
/* Ends a sealed message: its tag. */
int ol_gcm_seal_tag(struct ol_gcm *g, uint8_t tag[OL_GCM_TAG]);
/* Ends an opened message: 0 when tag authenticates it, else -EBADMSG. */
int ol_gcm_open_tag(struct ol_gcm *g, const uint8_t tag[OL_GCM_TAG]);

/* The calling thread's own context (made at its first call, freed when the
 * thread exits), for work that keys it and runs its messages to the end
 * before anything else on the thread uses it; NULL when out of memory. */
struct ol_gcm *ol_gcm_thread(void);
/* One message in one call, on the thread's context. */
int ol_gcm_once(bool enc, const uint8_t key[OL_GCM_KEY], const uint8_t nonce[OL_GCM_NONCE],
                const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t n, uint8_t *out,
                uint8_t tag[OL_GCM_TAG]);

/* Which implementation runs: "ipsec-mb" or "openssl". */
const char *ol_gcm_impl(void);

#endif
