/* libFuzzer target for src/native/rdma_confirm.c, the decoders a client's
 * worker (challenge) and the server (answer) run on bytes from the network.
 *
 * The first byte picks the decoder (even: challenge, odd: answer), the rest
 * is the message, given in an exactly-sized copy (a read past its end shows
 * under ASan).  A decoded challenge must satisfy the header's bounds and
 * encode back to the same bytes; a decoded answer must not confirm under a
 * key its MAC was not made with, and must confirm under the key it is
 * re-MACed with when it is a yes whose region covers the range asked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native/rdma_confirm.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_rdma_confirm: %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 2 * OL_RDMA_CHALLENGE_MAX)
        return 0;
    size_t n = size - 1;
    uint8_t *m = malloc(n ? n : 1);
    memcpy(m, data + 1, n);
    if ((data[0] & 1) == 0) {
        struct ol_rdma_challenge c;
        if (ol_rdma_challenge_decode(m, n, &c) == 0) {
            FUZZ_CHECK(c.rkey_len >= 1 && c.rkey_len <= OL_RDMA_TOKEN_MAX_RKEY);
            FUZZ_CHECK(c.rkey == m + OL_RDMA_CHALLENGE_FIXED &&
                       n == OL_RDMA_CHALLENGE_FIXED + c.rkey_len);
            static uint8_t out[OL_RDMA_CHALLENGE_MAX];
            int k = ol_rdma_challenge_encode(&c, out, sizeof(out));
            FUZZ_CHECK(k > 0 && (size_t)k == n && memcmp(out, m, n) == 0);
        }
    } else {
        struct ol_rdma_answer a;
        if (ol_rdma_answer_decode(m, n, &a) == 0) {
            FUZZ_CHECK(n == OL_RDMA_ANSWER_BYTES);
            uint8_t key[OL_NET_KEY_BYTES] = {0};
            static const uint8_t rkey[1] = {1};
            struct ol_rdma_challenge c = {.addr = a.base, .len = 1, .rkey = rkey, .rkey_len = 1};
            memcpy(c.nonce, a.nonce, sizeof(c.nonce));
            uint8_t ch[OL_RDMA_CHALLENGE_FIXED + 1];
            FUZZ_CHECK(ol_rdma_challenge_encode(&c, ch, sizeof(ch)) == (int)sizeof(ch));
            /* Its own MAC was made with no key this harness knows... */
            bool forged = ol_rdma_answer_confirms(key, ch, sizeof(ch), &a, a.base, 1);
            /* ...and made again with the zero key, it confirms a covered range. */
            uint8_t again[OL_RDMA_ANSWER_BYTES];
            struct ol_rdma_answer b = a;
            ol_rdma_answer_encode(key, ch, sizeof(ch), &b, again);
            struct ol_rdma_answer d;
            FUZZ_CHECK(ol_rdma_answer_decode(again, sizeof(again), &d) == 0);
            bool covers = a.yes && a.size >= 1 && a.base + a.size >= a.base;
            FUZZ_CHECK(ol_rdma_answer_confirms(key, ch, sizeof(ch), &d, a.base, 1) == covers);
            FUZZ_CHECK(!forged || memcmp(a.mac, b.mac, 32) == 0);
        }
    }
    free(m);
    return 0;
}
