#include "core/sha256.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/log.h"

struct tl_ctx {
    EVP_MD_CTX *md[OL_SHA_NCTX];
};

static EVP_MD *g_sha256;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static bool g_key_ok;
static __thread struct tl_ctx tl_ctx;

static void tl_ctx_free(void *arg)
{
    struct tl_ctx *t = arg;
    for (int i = 0; i < OL_SHA_NCTX; i++) {
        EVP_MD_CTX_free(t->md[i]);
        t->md[i] = NULL;
    }
}

static void init_once(void)
{
    g_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    /* The destructor frees a thread's contexts when it exits. */
    g_key_ok = pthread_key_create(&g_key, tl_ctx_free) == 0;
}

const EVP_MD *ol_sha256_md(void)
{
    pthread_once(&g_once, init_once);
    return g_sha256 ? g_sha256 : EVP_sha256();
}

EVP_MD_CTX *ol_sha256_ctx(enum ol_sha_ctx which)
{
    const EVP_MD *sha = ol_sha256_md();
    EVP_MD_CTX *md = tl_ctx.md[which];
    if (md == NULL) {
        md = EVP_MD_CTX_new();
        if (md == NULL)
            return NULL;
        tl_ctx.md[which] = md;
        if (g_key_ok)
            (void)pthread_setspecific(g_key, &tl_ctx);
    }
    if (EVP_DigestInit_ex(md, sha, NULL) != 1)
        return NULL;
    return md;
}

int ol_sha256(const void *buf, size_t len, uint8_t out[32])
{
    unsigned int n = 0;
    EVP_MD_CTX *c = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
    if (c == NULL || EVP_DigestUpdate(c, buf, len) != 1 || EVP_DigestFinal_ex(c, out, &n) != 1 ||
        n != 32)
        return -ENOMEM;
    return 0;
}

/* H((K ^ opad) || H((K ^ ipad) || msg)), on the thread's scratch context. */
int ol_hmac_sha256(const void *key, size_t key_len, const struct ol_bytes *msg, unsigned nmsg,
                   uint8_t out[32])
{
    uint8_t pad[64], inner[32];
    unsigned int n = 0;
    int rc = 0;
    OL_ASSERT(key_len <= sizeof(pad));
    memset(pad, 0x36, sizeof(pad));
    for (size_t i = 0; i < key_len; i++)
        pad[i] ^= ((const uint8_t *)key)[i];
    EVP_MD_CTX *c = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
    if (c == NULL || EVP_DigestUpdate(c, pad, sizeof(pad)) != 1) {
        rc = -ENOMEM;
        goto out;
    }
    for (unsigned i = 0; i < nmsg; i++) {
        if (msg[i].n && EVP_DigestUpdate(c, msg[i].p, msg[i].n) != 1) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (EVP_DigestFinal_ex(c, inner, &n) != 1 || n != 32) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] ^= 0x36 ^ 0x5c;
    c = ol_sha256_ctx(OL_SHA_CTX_SCRATCH);
    if (c == NULL || EVP_DigestUpdate(c, pad, sizeof(pad)) != 1 ||
        EVP_DigestUpdate(c, inner, sizeof(inner)) != 1 || EVP_DigestFinal_ex(c, out, &n) != 1 ||
        n != 32)
        rc = -ENOMEM;
out:
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(inner, sizeof(inner));
    return rc;
}
