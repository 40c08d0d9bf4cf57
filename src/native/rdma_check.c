/* openlake-rdma-check: vets a client's UCX worker address and packed rkey
 * in a process of its own (native/rdma.h, "Hostile input").
 *
 * UCX parses both without being told their length and aborts the process
 * on some malformed input (an assertion in its address unpacker), so the
 * server never hands a token's bytes to its own UCX before this program,
 * built against the same UCX and run with the same UCX_* environment, has
 * parsed them: stdin carries u16 worker_len, u16 rkey_len (little-endian),
 * then the bytes; it makes an endpoint to the address and unpacks the rkey
 * on it, and writes one byte 'Y' to stdout when both succeeded.  Anything
 * else (no byte, a crash, a timeout) means no.  The parse is deterministic,
 * so bytes that pass here pass the server's own ucp_ep_create and
 * ucp_ep_rkey_unpack.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "native/rdma_token.h"

static int read_all(void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = read(0, b, n);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

int main(void)
{
    uint8_t hdr[4];
    if (read_all(hdr, 4) < 0)
        return 2;
    size_t wl = hdr[0] | (size_t)hdr[1] << 8, kl = hdr[2] | (size_t)hdr[3] << 8;
    if (wl == 0 || wl > OL_RDMA_TOKEN_MAX_WORKER || kl == 0 || kl > OL_RDMA_TOKEN_MAX_RKEY)
        return 2;
    /* Zero padding after each: a parser that runs past reads zeros. */
    uint8_t *w = calloc(1, wl + 65536), *k = calloc(1, kl + 65536);
    if (!w || !k || read_all(w, wl) < 0 || read_all(k, kl) < 0)
        return 2;
    ucp_config_t *cfg;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return 3;
    /* The server engine's features, so that the lanes (and the parse) match. */
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_RMA | UCP_FEATURE_AM};
    ucp_context_h ctx;
    ucs_status_t s = ucp_init(&up, cfg, &ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK)
        return 3;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_worker_h worker;
    if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK)
        return 3;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address = (const ucp_address_t *)w,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    ucp_ep_h e;
    s = ucp_ep_create(worker, &ep, &e);
    if (s != UCS_OK) {
        fprintf(stderr, "openlake-rdma-check: ucp_ep_create: %s\n", ucs_status_string(s));
        return 1;
    }
    ucp_rkey_h rkey;
    s = ucp_ep_rkey_unpack(e, k, &rkey);
    if (s != UCS_OK) {
        fprintf(stderr, "openlake-rdma-check: ucp_ep_rkey_unpack: %s\n", ucs_status_string(s));
        return 1;
    }
    ssize_t wr = write(1, "Y", 1);
    /* No teardown: the answer is out, and the endpoint need not linger. */
    _exit(wr == 1 ? 0 : 1);
}
