/* The KV-cache key chain (kv/hash.h). */
#include "kv/hash.h"

#include <errno.h>
#include <string.h>

#include "core/sha256.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "token ids are hashed as the host's int32 bytes: little-endian hosts only");

static const char TAG[] = "openlake-kv/1";          /* hashed with its NUL */
static const char ROOT_TAG[] = "openlake-kv-root/1"; /* likewise */
static const uint8_t ZERO[OL_KV_KEY_BYTES];

enum { CONV = 1024 }; /* int64 ids converted per digest update */

/* One digest: tag, parent, then the token bytes the caller feeds. */
static EVP_MD_CTX *begin(const uint8_t *parent)
{
    EVP_MD_CTX *c = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
    if (!c || EVP_DigestUpdate(c, TAG, sizeof(TAG)) != 1 ||
        EVP_DigestUpdate(c, parent ? parent : ZERO, OL_KV_KEY_BYTES) != 1)
        return NULL;
    return c;
}

static int finish(EVP_MD_CTX *c, uint8_t out[OL_KV_KEY_BYTES])
{
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(c, out, &n) != 1 || n != OL_KV_KEY_BYTES)
        return -ENOMEM;
    return 0;
}

int ol_kv_hash_root(const void *salt, size_t salt_len, uint8_t root[OL_KV_KEY_BYTES])
{
    if (!salt && salt_len)
        return -EINVAL;
    EVP_MD_CTX *c = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
    if (!c || EVP_DigestUpdate(c, ROOT_TAG, sizeof(ROOT_TAG)) != 1 ||
        (salt_len && EVP_DigestUpdate(c, salt, salt_len) != 1))
        return -ENOMEM;
    return finish(c, root);
}

int ol_kv_hash_block(const uint8_t *parent, const int32_t *tokens, size_t n,
                     uint8_t out[OL_KV_KEY_BYTES])
{
    if (!tokens && n)
        return -EINVAL;
    EVP_MD_CTX *c = begin(parent);
    if (!c || (n && EVP_DigestUpdate(c, tokens, n * sizeof(int32_t)) != 1))
        return -ENOMEM;
    return finish(c, out);
}

int ol_kv_hash_block64(const uint8_t *parent, const int64_t *tokens, size_t n,
                       uint8_t out[OL_KV_KEY_BYTES])
{
    if (!tokens && n)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < INT32_MIN || tokens[i] > INT32_MAX)
            return -ERANGE;
    EVP_MD_CTX *c = begin(parent);
    if (!c)
        return -ENOMEM;
    int32_t conv[CONV];
    for (size_t i = 0; i < n;) {
        size_t k = n - i < CONV ? n - i : CONV;
        for (size_t j = 0; j < k; j++)
            conv[j] = (int32_t)tokens[i + j];
        if (EVP_DigestUpdate(c, conv, k * sizeof(int32_t)) != 1)
            return -ENOMEM;
        i += k;
    }
    return finish(c, out);
}

/* The chain over either width (exactly one of t32, t64 is set). */
static int chain(const uint8_t *root, const int32_t *t32, const int64_t *t64, size_t n,
                 size_t block_tokens, bool partial, uint8_t (*keys)[OL_KV_KEY_BYTES], size_t max)
{
    if (block_tokens == 0 || (!keys && max) || (n && !t32 && !t64))
        return -EINVAL;
    size_t nblocks = n / block_tokens + (partial && n % block_tokens ? 1 : 0);
    if (nblocks > max)
        nblocks = max;
    if (nblocks > (size_t)INT32_MAX)
        return -EINVAL;
    uint8_t parent[OL_KV_KEY_BYTES];
    memcpy(parent, root ? root : ZERO, sizeof(parent));
    for (size_t b = 0; b < nblocks; b++) {
        size_t off = b * block_tokens;
        size_t k = n - off < block_tokens ? n - off : block_tokens;
        int rc = t32 ? ol_kv_hash_block(parent, t32 + off, k, keys[b])
                     : ol_kv_hash_block64(parent, t64 + off, k, keys[b]);
        if (rc < 0)
            return rc;
        memcpy(parent, keys[b], sizeof(parent));
    }
    return (int)nblocks;
}

int ol_kv_hash_chain(const uint8_t *root, const int32_t *tokens, size_t n, size_t block_tokens,
                     bool partial, uint8_t (*keys)[OL_KV_KEY_BYTES], size_t max)
{
    return chain(root, tokens, NULL, n, block_tokens, partial, keys, max);
}

int ol_kv_hash_chain64(const uint8_t *root, const int64_t *tokens, size_t n,
                       size_t block_tokens, bool partial, uint8_t (*keys)[OL_KV_KEY_BYTES],
                       size_t max)
{
    return chain(root, NULL, tokens, n, block_tokens, partial, keys, max);
}
