/* libFuzzer target for src/native/rdma_token.c.
 *
 * The input is a token text: when the decoder accepts it, the fields must
 * satisfy the header's bounds, and encoding them again must give back the
 * same text (one text per token); the input is given in an exactly-sized
 * copy, so a read past its end shows under ASan.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native/rdma_token.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_rdma_token: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2 * OL_RDMA_TOKEN_MAX_TEXT)
        return 0;
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    static uint8_t buf[OL_RDMA_TOKEN_MAX_BIN];
    struct ol_rdma_token t;
    const char *why = NULL;
    int rc = ol_rdma_token_decode(s, size, buf, sizeof buf, &t, &why);
    if (rc == 0) {
        FUZZ_CHECK(why == NULL);
        FUZZ_CHECK(t.worker_len >= 1 && t.worker_len <= OL_RDMA_TOKEN_MAX_WORKER);
        FUZZ_CHECK(t.rkey_len >= 1 && t.rkey_len <= OL_RDMA_TOKEN_MAX_RKEY);
        FUZZ_CHECK(t.len <= OL_RDMA_TOKEN_MAX_LEN && t.addr + t.len >= t.addr);
        FUZZ_CHECK(t.worker == buf + OL_RDMA_TOKEN_FIXED && t.rkey == t.worker + t.worker_len);
        static char text[OL_RDMA_TOKEN_MAX_TEXT];
        int n = ol_rdma_token_encode(&t, text, sizeof text);
        FUZZ_CHECK(n > 0 && (size_t)n == size && memcmp(text, s, size) == 0);
    } else {
        FUZZ_CHECK(rc == -22 && why != NULL);
    }
    free(s);
    return 0;
}
