/* The confirmation messages of S3 over RDMA (native/rdma_confirm.h). */
#include "native/rdma_confirm.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/sha256.h"

#define CHALLENGE_MAGIC 0x43524c4fu /* "OLRC" */
#define ANSWER_MAGIC 0x41524c4fu    /* "OLRA" */

static const char label[] = "openlake-rdma-confirm/1";

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int ol_rdma_challenge_encode(const struct ol_rdma_challenge *c, uint8_t *out, size_t cap)
{
    if (c->rkey_len == 0 || c->rkey_len > OL_RDMA_TOKEN_MAX_RKEY)
        return -EINVAL;
    size_t n = OL_RDMA_CHALLENGE_FIXED + c->rkey_len;
    if (cap < n)
        return -ENOSPC;
    put32(out, CHALLENGE_MAGIC);
    out[4] = OL_RDMA_CONFIRM_VERSION;
    out[5] = 0;
    put16(out + 6, (uint16_t)c->rkey_len);
    memcpy(out + 8, c->nonce, OL_RDMA_NONCE_BYTES);
    put64(out + 8 + OL_RDMA_NONCE_BYTES, c->addr);
    put64(out + 16 + OL_RDMA_NONCE_BYTES, c->len);
    memcpy(out + 24 + OL_RDMA_NONCE_BYTES, c->tag, OL_RDMA_TOKEN_TAG_BYTES);
    memcpy(out + OL_RDMA_CHALLENGE_FIXED, c->rkey, c->rkey_len);
    return (int)n;
}

int ol_rdma_challenge_decode(const void *m, size_t n, struct ol_rdma_challenge *c)
{
    const uint8_t *p = m;
    if (n < OL_RDMA_CHALLENGE_FIXED || get32(p) != CHALLENGE_MAGIC ||
        p[4] != OL_RDMA_CONFIRM_VERSION || p[5] != 0)
        return -EINVAL;
    size_t kl = get16(p + 6);
    if (kl == 0 || kl > OL_RDMA_TOKEN_MAX_RKEY || n != OL_RDMA_CHALLENGE_FIXED + kl)
        return -EINVAL;
    memcpy(c->nonce, p + 8, OL_RDMA_NONCE_BYTES);
    c->addr = get64(p + 8 + OL_RDMA_NONCE_BYTES);
    c->len = get64(p + 16 + OL_RDMA_NONCE_BYTES);
    memcpy(c->tag, p + 24 + OL_RDMA_NONCE_BYTES, OL_RDMA_TOKEN_TAG_BYTES);
    c->rkey = p + OL_RDMA_CHALLENGE_FIXED;
    c->rkey_len = kl;
    return 0;
}

/* The answer's bytes before its MAC. */
enum { ANSWER_BODY = OL_RDMA_ANSWER_BYTES - 32 };

static void answer_body(const struct ol_rdma_answer *a, uint8_t out[ANSWER_BODY])
{
    put32(out, ANSWER_MAGIC);
    out[4] = OL_RDMA_CONFIRM_VERSION;
    out[5] = a->yes ? 1 : 0;
    put16(out + 6, 0);
    memcpy(out + 8, a->nonce, OL_RDMA_NONCE_BYTES);
    put64(out + 8 + OL_RDMA_NONCE_BYTES, a->base);
    put64(out + 16 + OL_RDMA_NONCE_BYTES, a->size);
}

static void answer_mac(const uint8_t key[OL_NET_KEY_BYTES], const void *challenge,
                       size_t challenge_len, const uint8_t body[ANSWER_BODY], uint8_t mac[32])
{
    struct ol_bytes parts[3] = {
        {label, sizeof(label) - 1}, {challenge, challenge_len}, {body, ANSWER_BODY}};
    /* A failed HMAC (no memory in OpenSSL) gives a MAC no one accepts. */
    if (ol_hmac_sha256(key, OL_NET_KEY_BYTES, parts, 3, mac) != 0)
        memset(mac, 0, 32);
}

void ol_rdma_answer_encode(const uint8_t key[OL_NET_KEY_BYTES], const void *challenge,
                           size_t challenge_len, struct ol_rdma_answer *a,
                           uint8_t out[OL_RDMA_ANSWER_BYTES])
{
    if (!a->yes)
        a->base = a->size = 0;
    answer_body(a, out);
    answer_mac(key, challenge, challenge_len, out, a->mac);
    memcpy(out + ANSWER_BODY, a->mac, 32);
}

int ol_rdma_answer_decode(const void *m, size_t n, struct ol_rdma_answer *a)
{
    const uint8_t *p = m;
    if (n != OL_RDMA_ANSWER_BYTES || get32(p) != ANSWER_MAGIC || p[4] != OL_RDMA_CONFIRM_VERSION ||
        p[5] > 1 || get16(p + 6) != 0)
        return -EINVAL;
    a->yes = p[5] == 1;
    memcpy(a->nonce, p + 8, OL_RDMA_NONCE_BYTES);
    a->base = get64(p + 8 + OL_RDMA_NONCE_BYTES);
    a->size = get64(p + 16 + OL_RDMA_NONCE_BYTES);
    memcpy(a->mac, p + ANSWER_BODY, 32);
    return 0;
}

bool ol_rdma_answer_confirms(const uint8_t key[OL_NET_KEY_BYTES], const void *challenge,
                             size_t challenge_len, const struct ol_rdma_answer *a, uint64_t t_addr,
                             uint64_t t_len)
{
    struct ol_rdma_challenge c;
    if (ol_rdma_challenge_decode(challenge, challenge_len, &c) < 0 || !a->yes ||
        memcmp(c.nonce, a->nonce, OL_RDMA_NONCE_BYTES) != 0)
        return false;
    uint8_t body[ANSWER_BODY], want[32];
    answer_body(a, body);
    answer_mac(key, challenge, challenge_len, body, want);
    if (CRYPTO_memcmp(want, a->mac, 32) != 0)
        return false;
    /* The region must not wrap and must cover the token's range. */
    if (a->base + a->size < a->base || t_addr + t_len < t_addr)
        return false;
    return t_addr >= a->base && t_addr + t_len <= a->base + a->size;
}
