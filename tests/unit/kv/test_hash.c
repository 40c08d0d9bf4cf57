/* The KV-cache key chain (kv/hash.h): known answers (computed independently
 * with Python's hashlib from the algorithm as docs/KV.md states it, so that
 * the Python twin can pin the same bytes), the chain's prefix property, and
 * the int32/int64 paths agreeing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kv/hash.h"

static void hex(const uint8_t k[OL_KV_KEY_BYTES], char out[65])
{
    for (int i = 0; i < OL_KV_KEY_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", k[i]);
}

static int is(const uint8_t k[OL_KV_KEY_BYTES], const char *want)
{
    char h[65];
    hex(k, h);
    if (strcmp(h, want) != 0) {
        fprintf(stderr, "got %s\nwant %s\n", h, want);
        return 0;
    }
    return 1;
}

int main(void)
{
    const int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint8_t k[3][OL_KV_KEY_BYTES];
    /* Blocks of 4 tokens, the last one partial. */
    CHECK_RC(ol_kv_hash_chain(NULL, t, 9, 4, true, k, 3), 3);
    CHECK(is(k[0], "2eaa2b35e9b0846a2e22d1c06eed82f8d1f3ff7a07c7dabf5c6ea43d8bb43186"));
    CHECK(is(k[1], "c3e56f0ff88bb5e91fe0a7f775c5fd0515f8115196e29ffc161a790739242a7d"));
    CHECK(is(k[2], "a37c5348dff65d2d6790477ebd36408c3425c3692cbfa1e2e8ede22312e6f69a"));
    /* Without the partial block: only the full ones. */
    uint8_t f[3][OL_KV_KEY_BYTES];
    CHECK_RC(ol_kv_hash_chain(NULL, t, 9, 4, false, f, 3), 2);
    CHECK(memcmp(f, k, 2 * OL_KV_KEY_BYTES) == 0);
    /* max bounds what is written. */
    CHECK_RC(ol_kv_hash_chain(NULL, t, 9, 4, true, f, 1), 1);
    /* One block at a time gives the same chain. */
    uint8_t p[OL_KV_KEY_BYTES];
    CHECK_RC(ol_kv_hash_block(NULL, t, 4, p), 0);
    CHECK(memcmp(p, k[0], sizeof(p)) == 0);
    CHECK_RC(ol_kv_hash_block(p, t + 4, 4, p), 0); /* out aliasing parent */
    CHECK(memcmp(p, k[1], sizeof(p)) == 0);
    /* A prompt that differs in block 2 shares block 1's key only. */
    int32_t u[9];
    memcpy(u, t, sizeof(u));
    u[5] = 99;
    uint8_t v[3][OL_KV_KEY_BYTES];
    CHECK_RC(ol_kv_hash_chain(NULL, u, 9, 4, true, v, 3), 3);
    CHECK(memcmp(v[0], k[0], OL_KV_KEY_BYTES) == 0);
    CHECK(memcmp(v[1], k[1], OL_KV_KEY_BYTES) != 0);
    CHECK(memcmp(v[2], k[2], OL_KV_KEY_BYTES) != 0);
    /* int64 ids give the same keys; an id past int32 is refused. */
    int64_t t64[9];
    for (int i = 0; i < 9; i++)
        t64[i] = t[i];
    CHECK_RC(ol_kv_hash_chain64(NULL, t64, 9, 4, true, v, 3), 3);
    CHECK(memcmp(v, k, sizeof(v)) == 0);
    t64[3] = (int64_t)INT32_MAX + 1;
    CHECK_RC(ol_kv_hash_chain64(NULL, t64, 9, 4, true, v, 3), -ERANGE);
    const int64_t edge64[2] = {-1, INT32_MAX};
    const int32_t edge32[2] = {-1, INT32_MAX};
    CHECK_RC(ol_kv_hash_block64(NULL, edge64, 2, p), 0);
    CHECK(is(p, "c61e6555b9719b528ab29d9c68fb4546d3172a76bf4285bbdc6652292e6d84e2"));
    CHECK_RC(ol_kv_hash_block(NULL, edge32, 2, p), 0);
    CHECK(is(p, "c61e6555b9719b528ab29d9c68fb4546d3172a76bf4285bbdc6652292e6d84e2"));
    /* A salted root: another model's chain shares nothing. */
    uint8_t root[OL_KV_KEY_BYTES];
    const char *salt = "llama-3.1-8b/bf16/tp0";
    CHECK_RC(ol_kv_hash_root(salt, strlen(salt), root), 0);
    CHECK(is(root, "31a1dc263f004903b031bc1ed4876fcfca448ae25d756349d82fd15f3f312845"));
    CHECK_RC(ol_kv_hash_chain(root, t, 4, 4, false, v, 1), 1);
    CHECK(is(v[0], "69771d44d89aaadc7240e93fc172c72c029028bbd3d37be97505622b21c15a42"));
    /* Bad arguments. */
    CHECK_RC(ol_kv_hash_chain(NULL, t, 9, 0, true, v, 3), -EINVAL);
    CHECK_RC(ol_kv_hash_chain(NULL, t, 0, 4, true, v, 3), 0);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
