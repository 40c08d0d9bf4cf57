/* AES-256-GCM on ipsec-mb or OpenSSL (gcm.h). */
#include "core/gcm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#ifdef OL_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

/* ---- the implementation, chosen once ---- */

static pthread_once_t impl_once = PTHREAD_ONCE_INIT;
static EVP_CIPHER *evp_gcm; /* fetched once: EVP_aes_256_gcm() searches the providers per init */
#ifdef OL_HAVE_IPSEC_MB
/* The direct GCM calls go through the manager's function table only (they
 * keep their state in the caller's key and context structs), so one
 * manager serves every thread. */
static IMB_MGR *mb;
#endif

static void impl_init(void)
{
    evp_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
#ifdef OL_HAVE_IPSEC_MB
    const char *want = getenv("OPENLAKE_GCM");
    if (want && strcmp(want, "openssl") == 0)
        return;
    IMB_MGR *m = alloc_mb_mgr(0);
    if (!m)
        return;
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(m, &arch);
    /* Below SSE the library has no AES-NI and is slower than OpenSSL. */
    if (imb_get_errno(m) != 0 || arch < IMB_ARCH_SSE) {
        free_mb_mgr(m);
        return;
    }
    mb = m;
#endif
}

static bool use_mb(void)
{
    pthread_once(&impl_once, impl_init);
#ifdef OL_HAVE_IPSEC_MB
    return mb != NULL;
#else
    return false;
#endif
}

static const EVP_CIPHER *cipher(void)
{
    pthread_once(&impl_once, impl_init);
    return evp_gcm ? evp_gcm : EVP_aes_256_gcm();
}

const char *ol_gcm_impl(void)
{
    return use_mb() ? "ipsec-mb" : "openssl";
}

/* ---- contexts ---- */

struct ol_gcm {
#ifdef OL_HAVE_IPSEC_MB
    struct gcm_key_data kd; /* 64-byte aligned: the block is */
    struct gcm_context_data cd;
#endif
    EVP_CIPHER_CTX *evp; /* the OpenSSL implementation's */
    bool mb;
    bool enc;
};

struct ol_gcm *ol_gcm_new(void)
{
    size_t sz = (sizeof(struct ol_gcm) + 63) & ~(size_t)63;
    struct ol_gcm *g = aligned_alloc(64, sz);
    if (!g)
        return NULL;
    memset(g, 0, sizeof(*g));
    g->mb = use_mb();
    if (!g->mb) {
        g->evp = EVP_CIPHER_CTX_new();
        if (!g->evp) {
            free(g);
            return NULL;
        }
    }
    return g;
}

void ol_gcm_free(struct ol_gcm *g)
{
    if (!g)
        return;
    EVP_CIPHER_CTX_free(g->evp);
    OPENSSL_cleanse(g, sizeof(*g));
    free(g);
}

int ol_gcm_key(struct ol_gcm *g, const uint8_t key[OL_GCM_KEY])
{
#ifdef OL_HAVE_IPSEC_MB
    if (g->mb) {
        IMB_AES256_GCM_PRE(mb, key, &g->kd);
        return 0;
    }
#endif
    /* A context that has the cipher already takes the key alone: naming
     * the cipher again would free and rebuild its state. */
    const EVP_CIPHER *ci = EVP_CIPHER_CTX_get0_cipher(g->evp) ? NULL : cipher();
    return EVP_CipherInit_ex(g->evp, ci, NULL, key, NULL, 1) == 1 ? 0 : -EIO;
}

int ol_gcm_start(struct ol_gcm *g, bool enc, const uint8_t nonce[OL_GCM_NONCE],
                 const uint8_t *aad, size_t aad_len)
{
    g->enc = enc;
#ifdef OL_HAVE_IPSEC_MB
    if (g->mb) {
        static const uint8_t none[1]; /* the library checks aad is not NULL */
        IMB_AES256_GCM_INIT(mb, &g->kd, &g->cd, nonce, aad_len ? aad : none, aad_len);
        return 0;
    }
#endif
    int len = 0;
    if (EVP_CipherInit_ex(g->evp, NULL, NULL, NULL, nonce, enc ? 1 : 0) != 1)
        return -EIO;
    if (aad_len && (aad_len > INT_MAX ||
                    EVP_CipherUpdate(g->evp, NULL, &len, aad, (int)aad_len) != 1))
        return -EIO;
    return 0;
}

int ol_gcm_update(struct ol_gcm *g, const uint8_t *in, size_t n, uint8_t *out)
{
    if (n == 0)
        return 0;
#ifdef OL_HAVE_IPSEC_MB
    if (g->mb) {
        if (g->enc)
            IMB_AES256_GCM_ENC_UPDATE(mb, &g->kd, &g->cd, out, in, n);
        else
            IMB_AES256_GCM_DEC_UPDATE(mb, &g->kd, &g->cd, out, in, n);
        return 0;
    }
#endif
    while (n > 0) {
        int k = n > (1u << 30) ? 1 << 30 : (int)n, len = 0;
        if (EVP_CipherUpdate(g->evp, out, &len, in, k) != 1 || len != k)
            return -EIO;
        in += k;
        out += k;
        n -= (size_t)k;
    }
    return 0;
}

int ol_gcm_seal_tag(struct ol_gcm *g, uint8_t tag[OL_GCM_TAG])
{
#ifdef OL_HAVE_IPSEC_MB
    if (g->mb) {
        IMB_AES256_GCM_ENC_FINALIZE(mb, &g->kd, &g->cd, tag, OL_GCM_TAG);
        return 0;
    }
#endif
    uint8_t end[16];
    int len = 0;
    if (EVP_CipherFinal_ex(g->evp, end, &len) != 1 ||
        EVP_CIPHER_CTX_ctrl(g->evp, EVP_CTRL_GCM_GET_TAG, OL_GCM_TAG, tag) != 1)
        return -EIO;
    return 0;
}

int ol_gcm_open_tag(struct ol_gcm *g, const uint8_t tag[OL_GCM_TAG])
{
#ifdef OL_HAVE_IPSEC_MB
    if (g->mb) {
        uint8_t want[OL_GCM_TAG];
        IMB_AES256_GCM_DEC_FINALIZE(mb, &g->kd, &g->cd, want, OL_GCM_TAG);
        int rc = CRYPTO_memcmp(want, tag, OL_GCM_TAG) == 0 ? 0 : -EBADMSG;
        OPENSSL_cleanse(want, sizeof(want));
        return rc;
    }
#endif
    uint8_t end[16];
    int len = 0;
    if (EVP_CIPHER_CTX_ctrl(g->evp, EVP_CTRL_GCM_SET_TAG, OL_GCM_TAG, (void *)tag) != 1)
        return -EIO;
    return EVP_CipherFinal_ex(g->evp, end, &len) == 1 ? 0 : -EBADMSG;
}

/* ---- one message ---- */

static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;
static __thread struct ol_gcm *tl_gcm;

static void tl_free(void *g)
{
    ol_gcm_free(g);
}

static void tl_init(void)
{
    (void)pthread_key_create(&tl_key, tl_free);
}

struct ol_gcm *ol_gcm_thread(void)
{
    if (!tl_gcm) {
        pthread_once(&tl_once, tl_init);
        tl_gcm = ol_gcm_new();
        if (tl_gcm)
            (void)pthread_setspecific(tl_key, tl_gcm);
    }
    return tl_gcm;
}

int ol_gcm_once(bool enc, const uint8_t key[OL_GCM_KEY], const uint8_t nonce[OL_GCM_NONCE],
                const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t n, uint8_t *out,
                uint8_t tag[OL_GCM_TAG])
{
    struct ol_gcm *g = ol_gcm_thread();
    if (!g)
        return -ENOMEM;
    int rc = ol_gcm_key(g, key);
    if (rc == 0)
        rc = ol_gcm_start(g, enc, nonce, aad, aad_len);
    if (rc == 0)
        rc = ol_gcm_update(g, in, n, out);
    if (rc == 0)
        rc = enc ? ol_gcm_seal_tag(g, tag) : ol_gcm_open_tag(g, tag);
    return rc;
}
