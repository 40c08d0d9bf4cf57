/* The confirmation round trip of S3 over RDMA (native/rdma_confirm.h,
 * native/rdma.h ol_rdma_confirm), with libopenlake's worker answering:
 *
 *   - the codec: round trip, every truncation and a byte more refused, an
 *     answer that passes only under its key, nonce, challenge and region;
 *   - end to end: the server's engine challenges a real ol_client's worker
 *     and accepts its own token for its user only; a token with another
 *     tag, a range outside the registered memory, memory no token was made
 *     for, or another user's key is refused; a confirmation is remembered
 *     (no second round trip) and the transfer then works;
 *   - deregistered memory is no longer confirmed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "native/proto.h"
#include "native/rdma.h"
#include "native/rdma_confirm.h"
#include "native/server.h"
#include "obj/obj.h"
#include "openlake/client.h"
#include "store/store.h"

static int secret_of(void *arg, const char *ak, char secret[129])
{
    (void)arg;
    if (strcmp(ak, "confirm-ak") != 0)
        return -ENOENT;
    snprintf(secret, 129, "confirm-secret");
    return 0;
}

static void codec(void)
{
    uint8_t rkey[40], key[OL_NET_KEY_BYTES], other[OL_NET_KEY_BYTES];
    memset(rkey, 0x5a, sizeof(rkey));
    memset(key, 1, sizeof(key));
    memset(other, 2, sizeof(other));
    struct ol_rdma_challenge c = {.addr = 4096, .len = 100, .rkey = rkey, .rkey_len = 40};
    memset(c.nonce, 7, sizeof(c.nonce));
    memset(c.tag, 9, sizeof(c.tag));
    uint8_t msg[OL_RDMA_CHALLENGE_MAX];
    int n = ol_rdma_challenge_encode(&c, msg, sizeof(msg));
    CHECK(n == OL_RDMA_CHALLENGE_FIXED + 40);
    CHECK_RC(ol_rdma_challenge_encode(&c, msg, (size_t)n - 1), -ENOSPC);
    struct ol_rdma_challenge d;
    CHECK_RC(ol_rdma_challenge_decode(msg, (size_t)n, &d), 0);
    CHECK(d.addr == 4096 && d.len == 100 && d.rkey_len == 40 && memcmp(d.rkey, rkey, 40) == 0);
    CHECK(memcmp(d.tag, c.tag, sizeof(c.tag)) == 0 && memcmp(d.nonce, c.nonce, 16) == 0);
    for (int cut = 0; cut < n; cut++)
        CHECK_RC(ol_rdma_challenge_decode(msg, (size_t)cut, &d), -EINVAL);
    CHECK_RC(ol_rdma_challenge_decode(msg, (size_t)n + 1, &d), -EINVAL);
    msg[4] = 2; /* another version */
    CHECK_RC(ol_rdma_challenge_decode(msg, (size_t)n, &d), -EINVAL);
    msg[4] = 1;

    struct ol_rdma_answer a = {.yes = true, .base = 0, .size = 8192};
    memcpy(a.nonce, c.nonce, 16);
    uint8_t ans[OL_RDMA_ANSWER_BYTES];
    ol_rdma_answer_encode(key, msg, (size_t)n, &a, ans);
    struct ol_rdma_answer b;
    for (int cut = 0; cut < OL_RDMA_ANSWER_BYTES; cut++)
        CHECK_RC(ol_rdma_answer_decode(ans, (size_t)cut, &b), -EINVAL);
    CHECK_RC(ol_rdma_answer_decode(ans, sizeof(ans), &b), 0);
    CHECK(ol_rdma_answer_confirms(key, msg, (size_t)n, &b, 4096, 100));
    CHECK(ol_rdma_answer_confirms(key, msg, (size_t)n, &b, 0, 8192));
    CHECK(!ol_rdma_answer_confirms(key, msg, (size_t)n, &b, 8000, 193)); /* past the region */
    CHECK(!ol_rdma_answer_confirms(other, msg, (size_t)n, &b, 4096, 100));
    /* Any flipped bit of the answer fails it. */
    for (int i = 0; i < OL_RDMA_ANSWER_BYTES; i++) {
        ans[i] ^= 0x10;
        bool ok = ol_rdma_answer_decode(ans, sizeof(ans), &b) == 0 &&
                  ol_rdma_answer_confirms(key, msg, (size_t)n, &b, 4096, 100);
        CHECK(!ok);
        ans[i] ^= 0x10;
    }
    /* The answer to another challenge (another nonce, another tag). */
    struct ol_rdma_challenge c2 = c;
    c2.nonce[0] ^= 1;
    uint8_t msg2[OL_RDMA_CHALLENGE_MAX];
    int n2 = ol_rdma_challenge_encode(&c2, msg2, sizeof(msg2));
    CHECK_RC(ol_rdma_answer_decode(ans, sizeof(ans), &b), 0);
    CHECK(!ol_rdma_answer_confirms(key, msg2, (size_t)n2, &b, 4096, 100));
    c2 = c;
    c2.tag[3] ^= 1;
    n2 = ol_rdma_challenge_encode(&c2, msg2, sizeof(msg2));
    CHECK(!ol_rdma_answer_confirms(key, msg2, (size_t)n2, &b, 4096, 100));
    /* A no, however well MACed. */
    a.yes = false;
    ol_rdma_answer_encode(key, msg, (size_t)n, &a, ans);
    CHECK_RC(ol_rdma_answer_decode(ans, sizeof(ans), &b), 0);
    CHECK(!b.yes && b.base == 0 && b.size == 0);
    CHECK(!ol_rdma_answer_confirms(key, msg, (size_t)n, &b, 4096, 100));
}

/* Decodes tok into *t (worker and rkey in buf). */
static int decode(const char *tok, uint8_t *buf, struct ol_rdma_token *t)
{
    return ol_rdma_token_decode(tok, strlen(tok), buf, OL_RDMA_TOKEN_MAX_BIN, t, NULL);
}

static void end_to_end(struct ol_client *c, struct ol_rdma *rd)
{
    uint8_t key[OL_NET_KEY_BYTES], other[OL_NET_KEY_BYTES];
    ol_native_key("confirm-ak", "confirm-secret", key);
    ol_native_key("confirm-ak", "another-secret", other);
    enum { LEN = 64 << 10 };
    uint8_t *mem = calloc(1, LEN), *mem2 = calloc(1, LEN), *src = malloc(LEN);
    memset(src, 0x3c, LEN);
    struct ol_client_mem *m, *m2;
    CHECK_RC(ol_client_mem_reg(c, mem, LEN, OL_CLIENT_MEM_HOST, &m), 0);
    CHECK_RC(ol_client_mem_reg(c, mem2, LEN, OL_CLIENT_MEM_HOST, &m2), 0);
    static char tok[OL_RDMA_TOKEN_MAX_TEXT];
    static uint8_t buf[OL_RDMA_TOKEN_MAX_BIN], buf2[OL_RDMA_TOKEN_MAX_BIN];
    struct ol_rdma_token t, u;
    CHECK(ol_client_rdma_token(c, m, mem + 4096, 8192, tok, sizeof(tok)) > 0);
    CHECK_RC(decode(tok, buf, &t), 0);
    CHECK_RC(ol_rdma_vet(rd, &t), 0);

    struct ol_rdma_stats s0, s1;
    ol_rdma_stats(rd, &s0);
    /* Another user's key: the worker's MAC does not pass. */
    CHECK_RC(ol_rdma_confirm(rd, &t, other), -EACCES);
    /* Another tag: the worker says no. */
    u = t;
    u.tag[0] ^= 1;
    CHECK_RC(ol_rdma_confirm(rd, &u, key), -EACCES);
    /* Past the registered memory. */
    u = t;
    u.addr = (uint64_t)(uintptr_t)mem + LEN - 100;
    u.len = 200;
    CHECK_RC(ol_rdma_confirm(rd, &u, key), -EACCES);
    /* Memory no token was made for (m2), named with m's tag. */
    u = t;
    u.addr = (uint64_t)(uintptr_t)mem2;
    CHECK_RC(ol_rdma_confirm(rd, &u, key), -EACCES);
    /* No byte moved into mem so far; a transfer is refused without a
     * confirmation only by the S3 layer, so none was tried. */
    ol_rdma_stats(rd, &s1);
    CHECK(s1.confirm_refused == s0.confirm_refused + 4 && s1.confirmed == s0.confirmed);

    /* Its own token, its own user: confirmed once, then remembered for the
     * whole registration. */
    CHECK_RC(ol_rdma_confirm(rd, &t, key), 0);
    u = t;
    u.addr = (uint64_t)(uintptr_t)mem;
    u.len = LEN;
    CHECK_RC(ol_rdma_confirm(rd, &u, key), 0);
    CHECK_RC(ol_rdma_confirm(rd, &t, key), 0);
    ol_rdma_stats(rd, &s0);
    CHECK(s0.confirmed == s1.confirmed + 1);
    /* The remembered confirmation is the user's: another key asks again. */
    CHECK_RC(ol_rdma_confirm(rd, &t, other), -EACCES);
    CHECK_RC(ol_rdma_move(rd, &t, OL_RDMA_WRITE, 0, src, 8192, 0), 0);
    CHECK_RC(ol_rdma_flush(rd, &t, 0), 0);
    CHECK(memcmp(mem + 4096, src, 8192) == 0 && mem[4095] == 0 && mem[4096 + 8192] == 0);

    /* A token of m2 carries m2's own tag and is confirmed; after m2 is
     * deregistered, a fresh engine's challenge gets a no. */
    CHECK(ol_client_rdma_token(c, m2, mem2, LEN, tok, sizeof(tok)) > 0);
    CHECK_RC(decode(tok, buf2, &u), 0);
    CHECK(memcmp(u.tag, t.tag, sizeof(t.tag)) != 0);
    CHECK_RC(ol_rdma_vet(rd, &u), 0);
    CHECK_RC(ol_rdma_confirm(rd, &u, key), 0);
    ol_client_mem_dereg(c, m2);
    struct ol_rdma *fresh;
    CHECK_RC(ol_rdma_create(&fresh), 0);
    CHECK_RC(ol_rdma_vet(fresh, &u), 0);
    CHECK_RC(ol_rdma_confirm(fresh, &u, key), -EACCES);
    CHECK_RC(ol_rdma_confirm(fresh, &t, key), 0);
    ol_rdma_destroy(fresh);

    ol_client_mem_dereg(c, m);
    free(mem);
    free(mem2);
    free(src);
}

int main(void)
{
    codec();
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "rdma_confirm") != 0)
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
        .endpoint = addr, .access_key = "confirm-ak", .secret_key = "confirm-secret"};
    CHECK_RC(ol_client_open(&co, &c), 0);
    struct ol_rdma *rd;
    CHECK_RC(ol_rdma_create(&rd), 0);
    if (c && rd)
        end_to_end(c, rd);
    ol_rdma_destroy(rd);
    ol_client_close(c);
    ol_native_server_destroy(srv);
    ol_obj_close(obj);
    ol_store_close(st);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return failures ? 1 : 0;
}
