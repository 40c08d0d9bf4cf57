/* ol_client_rdma_token (include/openlake/client.h): the token decodes
 * (native/rdma_token.h) to the region asked for, and it works — a separate
 * UCX worker (standing in for the server of S3 over RDMA) reaches the
 * client's worker by the token's address, unpacks its rkey and writes into
 * and reads from the client's registered memory with one-sided put / get.
 * Also: regions outside the registered memory and a short output buffer
 * are refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "check.h"
#include "core/clock.h"
#include "native/rdma_token.h"
#include "native/server.h"
#include "obj/obj.h"
#include "openlake/client.h"
#include "store/store.h"

static int secret_of(void *arg, const char *ak, char secret[129])
{
    (void)arg;
    if (strcmp(ak, "rdma-ak") != 0)
        return -ENOENT;
    snprintf(secret, 129, "rdma-secret");
    return 0;
}

/* Progresses w until the request completes (bounded: 10 s). */
static ucs_status_t wait_req(ucp_worker_h w, void *req)
{
    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    ucs_status_t st = UCS_INPROGRESS;
    uint64_t end = ol_mono_ns() + 10000000000ull;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && ol_mono_ns() < end)
        ucp_worker_progress(w);
    ucp_request_free(req);
    return st;
}

/* What the server of S3 over RDMA does with a token: write src to the
 * token's region, then read it back into dst. */
static int peer_put_get(const struct ol_rdma_token *t, const void *src, void *dst)
{
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_worker_h w;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return -EIO;
    ucs_status_t st = ucp_init(&up, cfg, &ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return -EIO;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_worker_create(ctx, &wp, &w) != UCS_OK) {
        ucp_cleanup(ctx);
        return -EIO;
    }
    int rc = -EIO;
    ucp_ep_h ep = NULL;
    ucp_rkey_h rkey = NULL;
    ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                            .address = (const ucp_address_t *)t->worker};
    if (ucp_ep_create(w, &ep_p, &ep) != UCS_OK)
        goto out;
    if (ucp_ep_rkey_unpack(ep, t->rkey, &rkey) != UCS_OK)
        goto out;
    ucp_request_param_t rp = {.op_attr_mask = 0};
    if (wait_req(w, ucp_put_nbx(ep, src, t->len, t->addr, rkey, &rp)) != UCS_OK)
        goto out;
    if (wait_req(w, ucp_ep_flush_nbx(ep, &rp)) != UCS_OK)
        goto out;
    if (wait_req(w, ucp_get_nbx(ep, dst, t->len, t->addr, rkey, &rp)) != UCS_OK)
        goto out;
    if (wait_req(w, ucp_ep_flush_nbx(ep, &rp)) != UCS_OK)
        goto out;
    rc = 0;
out:
    if (rkey)
        ucp_rkey_destroy(rkey);
    if (ep) {
        ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                  .flags = UCP_EP_CLOSE_FLAG_FORCE};
        (void)wait_req(w, ucp_ep_close_nbx(ep, &cp));
    }
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    return rc;
}

int main(void)
{
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "client_rdma") != 0)
        return 77;
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, root, &so), 0);
    struct ol_obj *obj;
    CHECK_RC(ol_obj_open_store(st, &obj), 0);
    struct ol_native_server_opts o = {.host = "127.0.0.1", .obj = obj, .secret = secret_of};
    struct ol_native_server *srv;
    int rc = ol_native_server_create(&o, &srv);
    if (rc == -EIO)
        return 77;
    CHECK_RC(rc, 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_native_server_port(srv));
    struct ol_client *c;
    struct ol_client_opts co = {
        .endpoint = addr, .access_key = "rdma-ak", .secret_key = "rdma-secret"};
    rc = ol_client_open(&co, &c);
    CHECK_RC(rc, 0);
    if (rc < 0)
        return 1;

    enum { LEN = 1 << 20 };
    uint8_t *mem = calloc(1, LEN), *src = malloc(LEN / 2), *dst = malloc(LEN / 2);
    for (size_t i = 0; i < LEN / 2; i++)
        src[i] = (uint8_t)(i * 31 + 7);
    struct ol_client_mem *m;
    CHECK_RC(ol_client_mem_reg(c, mem, LEN, OL_CLIENT_MEM_HOST, &m), 0);
    static char tok[OL_RDMA_TOKEN_MAX_TEXT];
    /* The second half of the registered memory. */
    int n = ol_client_rdma_token(c, m, mem + LEN / 2, LEN / 2, tok, sizeof(tok));
    CHECK(n > 2 && (size_t)n == strlen(tok) && strncmp(tok, "2.", 2) == 0);
    static uint8_t dbuf[OL_RDMA_TOKEN_MAX_BIN];
    struct ol_rdma_token t;
    const char *why = NULL;
    CHECK_RC(ol_rdma_token_decode(tok, (size_t)n, dbuf, sizeof(dbuf), &t, &why), 0);
    CHECK(t.addr == (uint64_t)(uintptr_t)(mem + LEN / 2) && t.len == LEN / 2);
    CHECK(t.worker_len > 0 && t.rkey_len > 0);

    /* The token works: a peer writes there and reads it back, and the
     * bytes outside the region stay untouched. */
    CHECK_RC(peer_put_get(&t, src, dst), 0);
    CHECK(memcmp(mem + LEN / 2, src, LEN / 2) == 0);
    CHECK(memcmp(dst, src, LEN / 2) == 0);
    size_t zero = 0;
    for (size_t i = 0; i < LEN / 2; i++)
        zero += mem[i] == 0;
    CHECK(zero == LEN / 2);

    /* Refused: a region past the registered memory, before it, and a
     * buffer too short for the token. */
    CHECK_RC(ol_client_rdma_token(c, m, mem + 1, LEN, tok, sizeof(tok)), -EINVAL);
    CHECK_RC(ol_client_rdma_token(c, m, mem - 1, 10, tok, sizeof(tok)), -EINVAL);
    CHECK_RC(ol_client_rdma_token(c, m, mem, 10, tok, 8), -ENOSPC);
    /* The whole region, and the same token twice (the worker address is
     * kept, the rkey too). */
    int n1 = ol_client_rdma_token(c, m, mem, LEN, tok, sizeof(tok));
    static char tok2[OL_RDMA_TOKEN_MAX_TEXT];
    CHECK(n1 > 0 && ol_client_rdma_token(c, m, mem, LEN, tok2, sizeof(tok2)) == n1);
    CHECK(strcmp(tok, tok2) == 0);

    ol_client_mem_dereg(c, m);
    ol_client_close(c);
    ol_native_server_destroy(srv);
    ol_obj_close(obj);
    ol_store_close(st);
    free(mem);
    free(src);
    free(dst);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return failures ? 1 : 0;
}
