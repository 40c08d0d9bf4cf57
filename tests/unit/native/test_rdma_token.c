/* The x-amz-rdma-token encoding (native/rdma_token.h): round trips at every
 * size class and remainder, bounds, and refusals of every kind of malformed
 * text (each checked against a decoder that must not read past n: the
 * inputs are copied into exactly-sized heap buffers, which ASan builds
 * check). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "native/rdma_token.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Decodes s through an exactly-sized copy (no NUL after it). */
static int dec(const char *s, size_t n, struct ol_rdma_token *t, uint8_t *buf, const char **why)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    int rc = ol_rdma_token_decode(copy, n, buf, OL_RDMA_TOKEN_MAX_BIN, t, why);
    free(copy);
    return rc;
}

static void round_trip(size_t wl, size_t kl, uint64_t addr, uint64_t len)
{
    static uint8_t w[OL_RDMA_TOKEN_MAX_WORKER], k[OL_RDMA_TOKEN_MAX_RKEY];
    static char text[OL_RDMA_TOKEN_MAX_TEXT];
    static uint8_t buf[OL_RDMA_TOKEN_MAX_BIN];
    for (size_t i = 0; i < wl; i++)
        w[i] = (uint8_t)rnd();
    for (size_t i = 0; i < kl; i++)
        k[i] = (uint8_t)rnd();
    struct ol_rdma_token t = {w, wl, k, kl, addr, len, {0}}, d;
    for (size_t i = 0; i < OL_RDMA_TOKEN_TAG_BYTES; i++)
        t.tag[i] = (uint8_t)rnd();
    int n = ol_rdma_token_encode(&t, text, sizeof text);
    CHECK(n > 0 && (size_t)n == ol_rdma_token_text_len(wl, kl));
    CHECK(strlen(text) == (size_t)n);
    CHECK(text[0] == '2' && text[1] == '.');
    for (int i = 2; i < n; i++)
        CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                     text[i]) != NULL);
    /* Too small a buffer. */
    CHECK_RC(ol_rdma_token_encode(&t, text, (size_t)n), -ENOSPC);
    CHECK(ol_rdma_token_encode(&t, text, (size_t)n + 1) == n);
    const char *why = "x";
    CHECK_RC(dec(text, (size_t)n, &d, buf, &why), 0);
    CHECK(why == NULL);
    CHECK(d.worker_len == wl && d.rkey_len == kl && d.addr == addr && d.len == len);
    CHECK(memcmp(d.worker, w, wl) == 0 && memcmp(d.rkey, k, kl) == 0);
    CHECK(memcmp(d.tag, t.tag, OL_RDMA_TOKEN_TAG_BYTES) == 0);
    /* Every proper prefix is refused (truncation), and one more char too. */
    for (int cut = 0; cut < n; cut += (n > 64 ? 7 : 1))
        CHECK_RC(dec(text, (size_t)cut, &d, buf, &why), -EINVAL);
    char *longer = malloc((size_t)n + 2);
    memcpy(longer, text, (size_t)n);
    longer[n] = 'A';
    CHECK_RC(dec(longer, (size_t)n + 1, &d, buf, &why), -EINVAL);
    memcpy(longer + n, "AA", 2);
    CHECK_RC(dec(longer, (size_t)n + 2, &d, buf, &why), -EINVAL);
    free(longer);
}

int main(void)
{
    /* Sizes covering each base64 remainder and the bounds. */
    size_t ws[] = {1, 2, 3, 37, 200, 511, OL_RDMA_TOKEN_MAX_WORKER};
    size_t ks[] = {1, 2, 3, 50, 127, OL_RDMA_TOKEN_MAX_RKEY};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++)
            round_trip(ws[i], ks[j], rnd(), rnd() % (OL_RDMA_TOKEN_MAX_LEN + 1) /
                                                 (i + 1) % (UINT64_MAX - 0));
    round_trip(10, 10, 0, 0);
    round_trip(10, 10, UINT64_MAX - OL_RDMA_TOKEN_MAX_LEN, OL_RDMA_TOKEN_MAX_LEN);
    CHECK(ol_rdma_token_text_len(OL_RDMA_TOKEN_MAX_WORKER, OL_RDMA_TOKEN_MAX_RKEY) + 1 <=
          OL_RDMA_TOKEN_MAX_TEXT);

    /* The encoder refuses what the decoder would. */
    uint8_t w[8] = {1}, k[8] = {2};
    char text[OL_RDMA_TOKEN_MAX_TEXT];
    uint8_t buf[OL_RDMA_TOKEN_MAX_BIN];
    struct ol_rdma_token t = {w, 0, k, 8, 4096, 10, {7}}, d;
    CHECK_RC(ol_rdma_token_encode(&t, text, sizeof text), -EINVAL);
    t.worker_len = 8, t.rkey_len = 0;
    CHECK_RC(ol_rdma_token_encode(&t, text, sizeof text), -EINVAL);
    t.rkey_len = OL_RDMA_TOKEN_MAX_RKEY + 1;
    CHECK_RC(ol_rdma_token_encode(&t, text, sizeof text), -EINVAL);
    t.rkey_len = 8, t.len = OL_RDMA_TOKEN_MAX_LEN + 1;
    CHECK_RC(ol_rdma_token_encode(&t, text, sizeof text), -EINVAL);
    t.len = 2, t.addr = UINT64_MAX;
    CHECK_RC(ol_rdma_token_encode(&t, text, sizeof text), -EINVAL);
    t.addr = 4096, t.len = 10;
    int n = ol_rdma_token_encode(&t, text, sizeof text);
    CHECK(n > 0);

    /* Malformed texts, each with a reason. */
    const char *why;
    const char *bad[] = {"", "2", "2.", "3.AAAA", "x.AAAA", "22AAAA", "2.AAAA", "2.A",
                         "2.AAAA=", "2.AA+A", "2.AA/A", "2.AA A", "2.AA\nA", "garbage"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        CHECK_RC(dec(bad[i], strlen(bad[i]), &d, buf, &why), -EINVAL);
        CHECK(why != NULL);
    }
    /* One changed character at each place: decodes to the same shape or is
     * refused, never crashes; a '=' or '.' anywhere after the prefix is
     * always refused. */
    for (int i = 2; i < n; i++) {
        char c = text[i];
        text[i] = '=';
        CHECK_RC(dec(text, (size_t)n, &d, buf, &why), -EINVAL);
        text[i] = c;
    }
    /* Non-canonical trailing bits: 8+8+40 = 56 bytes, remainder 2, three
     * chars, the third must have its low 2 bits zero. */
    CHECK(n == 2 + 72 + 3);
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char c = text[n - 1];
    int ci = (int)(strchr(B64, c) - B64);
    CHECK((ci & 3) == 0);
    text[n - 1] = B64[ci | 1];
    CHECK_RC(dec(text, (size_t)n, &d, buf, &why), -EINVAL);
    text[n - 1] = c;
    CHECK_RC(dec(text, (size_t)n, &d, buf, &why), 0);
    /* The previous version (no tag) is refused. */
    text[0] = '1';
    CHECK_RC(dec(text, (size_t)n, &d, buf, &why), -EINVAL);
    text[0] = '2';

    /* Records whose fields lie: build them by hand. */
    struct {
        uint16_t wl, kl;
        uint32_t res;
        uint64_t addr, len;
        int extra; /* bytes of body actually present minus wl+kl */
    } lies[] = {
        {8, 8, 1, 0, 0, 0},                       /* reserved set */
        {8, 8, 0, 0, OL_RDMA_TOKEN_MAX_LEN + 1, 0}, /* huge length */
        {8, 8, 0, UINT64_MAX, 2, 0},              /* wraps */
        {8, 8, 0, 0, 1, -1},                      /* one byte short */
        {8, 8, 0, 0, 1, 1},                       /* one byte too many */
        {0, 8, 0, 0, 1, 0},                       /* no worker */
        {8, 0, 0, 0, 1, 0},                       /* no rkey */
        {65535, 8, 0, 0, 1, -65535 + 8},         /* worker size past the text */
        {5000, 8, 0, 0, 1, 0},                    /* worker past the bound */
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        static uint8_t rec[OL_RDMA_TOKEN_MAX_BIN + 64];
        size_t body = (size_t)((long)lies[i].wl + lies[i].kl + lies[i].extra);
        if (OL_RDMA_TOKEN_FIXED + body > sizeof rec)
            body = sizeof rec - OL_RDMA_TOKEN_FIXED;
        memset(rec, 0, sizeof rec);
        uint64_t f[] = {lies[i].wl, lies[i].kl, lies[i].res, lies[i].addr, lies[i].len};
        int sz[] = {2, 2, 4, 8, 8}, off = 0;
        for (int j = 0; j < 5; j++)
            for (int b = 0; b < sz[j]; b++)
                rec[off++] = (uint8_t)(f[j] >> (8 * b));
        /* base64url by hand (the encoder refuses these). */
        static char out[OL_RDMA_TOKEN_MAX_TEXT * 2];
        static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        size_t nb = OL_RDMA_TOKEN_FIXED + body, o = 0;
        out[o++] = '2', out[o++] = '.';
        for (size_t j = 0; j < nb; j += 3) {
            uint32_t v = (uint32_t)rec[j] << 16 | (j + 1 < nb ? (uint32_t)rec[j + 1] << 8 : 0) |
                         (j + 2 < nb ? rec[j + 2] : 0);
            out[o++] = A[v >> 18], out[o++] = A[(v >> 12) & 63];
            if (j + 1 < nb)
                out[o++] = A[(v >> 6) & 63];
            if (j + 2 < nb)
                out[o++] = A[v & 63];
        }
        why = NULL;
        int rc = dec(out, o, &d, buf, &why);
        if (rc != -EINVAL)
            fprintf(stderr, "lie %zu: rc %d\n", i, rc);
        CHECK(rc == -EINVAL && why != NULL);
    }

    /* A buffer smaller than the record: refused, not overrun. */
    uint8_t small[30];
    CHECK_RC(ol_rdma_token_decode(text, (size_t)n, small, sizeof small, &d, &why), -EINVAL);
    return failures ? 1 : 0;
}
