/* AES-256-GCM (core/gcm.h) against OpenSSL's EVP used directly: random
 * keys, nonces, associated data and lengths (0 .. 200 KiB) fed in random
 * splits, in place and not, both directions; a flipped bit in the
 * ciphertext, the tag or the associated data fails the open; the NIST
 * test case 16 vector.  Run once with the build's choice and once (in a
 * child) with OPENLAKE_GCM=openssl, so both implementations are checked
 * where the build has ipsec-mb. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_RNG_SEED 0x243f6a8885a308d3ull
#include "check.h"
#include "core/gcm.h"

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)check_rnd();
}

static void ref_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t al,
                     const uint8_t *in, size_t n, uint8_t *out, uint8_t tag[16])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0;
    CHECK(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce) == 1);
    if (al)
        CHECK(EVP_EncryptUpdate(c, NULL, &len, aad, (int)al) == 1);
    if (n)
        CHECK(EVP_EncryptUpdate(c, out, &len, in, (int)n) == 1);
    CHECK(EVP_EncryptFinal_ex(c, out + n, &len) == 1);
    CHECK(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1);
    EVP_CIPHER_CTX_free(c);
}

/* Feeds n bytes to g in random pieces. */
static int update_split(struct ol_gcm *g, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t done = 0;
    while (done < n) {
        size_t k = 1 + check_rnd() % (check_rnd() % 2 ? 17 : 70000);
        if (k > n - done)
            k = n - done;
        int rc = ol_gcm_update(g, in + done, k, out + done);
        if (rc < 0)
            return rc;
        done += k;
    }
    return 0;
}

static void test_nist(void)
{
    static const char *K = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
    static const char *IV = "cafebabefacedbaddecaf888";
    static const char *P = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                           "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
    static const char *A = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
    static const char *C = "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                           "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662";
    static const char *T = "76fc6ece0f4e1768cddf8853bb2d551b";
    uint8_t k[32], iv[12], p[60], a[20], c[60], t[16], out[60], tag[16];
    struct {
        const char *hex;
        uint8_t *to;
        size_t n;
    } v[] = {{K, k, 32}, {IV, iv, 12}, {P, p, 60}, {A, a, 20}, {C, c, 60}, {T, t, 16}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        for (size_t j = 0; j < v[i].n; j++)
            CHECK(sscanf(v[i].hex + 2 * j, "%2hhx", &v[i].to[j]) == 1);
    CHECK(ol_gcm_once(true, k, iv, a, 20, p, 60, out, tag) == 0);
    CHECK(memcmp(out, c, 60) == 0);
    CHECK(memcmp(tag, t, 16) == 0);
    CHECK(ol_gcm_once(false, k, iv, a, 20, c, 60, out, t) == 0);
    CHECK(memcmp(out, p, 60) == 0);
    t[0] ^= 1;
    CHECK(ol_gcm_once(false, k, iv, a, 20, c, 60, out, t) == -EBADMSG);
}

static void test_random(void)
{
    enum { MAX = 200 * 1024 };
    uint8_t *in = malloc(MAX), *ref = malloc(MAX + 16), *out = malloc(MAX), *back = malloc(MAX);
    struct ol_gcm *g = ol_gcm_new();
    CHECK(g != NULL);
    for (int round = 0; round < 300; round++) {
        uint8_t key[32], nonce[12], aad[64], rtag[16], tag[16];
        size_t n = round < 40 ? (size_t)round : check_rnd() % MAX, al = check_rnd() % 3 ? check_rnd() % 64 : 0;
        fill(key, 32);
        fill(nonce, 12);
        fill(aad, al);
        fill(in, n);
        ref_seal(key, nonce, aad, al, in, n, ref, rtag);
        CHECK(ol_gcm_key(g, key) == 0);
        CHECK(ol_gcm_start(g, true, nonce, aad, al) == 0);
        bool inplace = check_rnd() % 2;
        if (inplace) {
            memcpy(out, in, n);
            CHECK(update_split(g, out, n, out) == 0);
        } else {
            CHECK(update_split(g, in, n, out) == 0);
        }
        CHECK(ol_gcm_seal_tag(g, tag) == 0);
        CHECK(memcmp(out, ref, n) == 0);
        CHECK(memcmp(tag, rtag, 16) == 0);
        /* Open, on the same context and key (a key serves many messages). */
        CHECK(ol_gcm_start(g, false, nonce, aad, al) == 0);
        CHECK(update_split(g, out, n, back) == 0);
        CHECK(ol_gcm_open_tag(g, tag) == 0);
        CHECK(memcmp(back, in, n) == 0);
        /* Tampering: a bit of the ciphertext, the tag or the aad. */
        int what = (int)(check_rnd() % 3);
        if (what == 0 && n)
            out[check_rnd() % n] ^= (uint8_t)(1u << (check_rnd() % 8));
        else if (what == 1 || n == 0)
            tag[check_rnd() % 16] ^= 0x80;
        else if (al)
            aad[check_rnd() % al] ^= 1;
        else
            tag[0] ^= 1;
        CHECK(ol_gcm_start(g, false, nonce, aad, al) == 0);
        CHECK(update_split(g, out, n, back) == 0);
        CHECK(ol_gcm_open_tag(g, tag) == -EBADMSG);
        CHECK(ol_gcm_once(false, key, nonce, aad, al, out, n, back, tag) == -EBADMSG);
    }
    ol_gcm_free(g);
    free(in);
    free(ref);
    free(out);
    free(back);
}

static int run(void)
{
    test_nist();
    test_random();
    printf("gcm (%s): %s\n", ol_gcm_impl(), failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}

int main(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("OPENLAKE_GCM", "openssl", 1);
        int rc = run();
        if (strcmp(ol_gcm_impl(), "openssl") != 0)
            rc = 1;
        fflush(stdout);
        _exit(rc);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int rc = run();
    return rc || failures ? 1 : 0;
}
