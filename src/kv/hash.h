/* The canonical keys of the KV-cache namespace (docs/KV.md, "Keys"): a
 * chain hash over the token ids of a prompt, one 32-byte key per block of
 * tokens, so that two prompts with the same first n blocks share their
 * first n keys and nothing else.
 *
 *   key_0 = root                                  (32 zero bytes by default)
 *   key_i = SHA-256("openlake-kv/1" 0x00 || key_{i-1} || t_1 .. t_m)
 *
 * where t_1 .. t_m are the token ids of block i, each as a little-endian
 * int32 (4 bytes), and the result is the key of block i (the first block's
 * parent is the root).  The domain tag keeps these digests apart from any
 * other SHA-256 the system computes; the tag and the parent have fixed
 * lengths, so the token bytes are never ambiguous.  Token ids are hashed as
 * int32 whatever type the caller holds them in (int64 tensors are common):
 * the same tokens give the same key from every language and dtype; an id
 * that does not fit in an int32 is refused (-ERANGE).
 *
 * The root separates what must never share KV blocks although the tokens
 * agree: another model, dtype, layout, tensor-parallel rank or tenant.
 * ol_kv_hash_root derives one from a caller's salt:
 *
 *   root = SHA-256("openlake-kv-root/1" 0x00 || salt)
 *
 * The server never computes these: it stores opaque keys (kv/kv.h); this
 * helper is what the client libraries and adapters use.  A Python twin
 * (python/openlake) must give the same bytes; tests/unit/kv/test_hash.c
 * pins known answers.
 *
 * Threads: pure functions of their arguments (SHA-256 on the calling
 * thread's digest context, core/sha256.h).  Errors: 0 or -ERANGE, -EINVAL,
 * -ENOMEM (OpenSSL could not allocate).
 */
#ifndef OL_KV_HASH_H
#define OL_KV_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { OL_KV_KEY_BYTES = 32 };

/* The root key of salt (salt_len may be 0: a root that differs from the
 * zero root). */
int ol_kv_hash_root(const void *salt, size_t salt_len, uint8_t root[OL_KV_KEY_BYTES]);

/* The key of one block: parent (NULL: the zero root) and its n tokens.
 * out may alias parent. */
int ol_kv_hash_block(const uint8_t *parent, const int32_t *tokens, size_t n,
                     uint8_t out[OL_KV_KEY_BYTES]);
/* The same from int64 token ids: -ERANGE when one is outside int32. */
int ol_kv_hash_block64(const uint8_t *parent, const int64_t *tokens, size_t n,
                       uint8_t out[OL_KV_KEY_BYTES]);

/* The keys of a whole prompt of n tokens cut into blocks of block_tokens:
 * writes the key of every full block, and of the last partial one when
 * partial is true, into keys (at most max of them), and returns how many it
 * wrote (or -EINVAL: block_tokens 0; -ERANGE).  root NULL: the zero root. */
int ol_kv_hash_chain(const uint8_t *root, const int32_t *tokens, size_t n, size_t block_tokens,
                     bool partial, uint8_t (*keys)[OL_KV_KEY_BYTES], size_t max);
int ol_kv_hash_chain64(const uint8_t *root, const int64_t *tokens, size_t n,
                       size_t block_tokens, bool partial, uint8_t (*keys)[OL_KV_KEY_BYTES],
                       size_t max);

#endif
