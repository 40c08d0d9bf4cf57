/* GET_CUDA on the wire (native/cuda_ipc.h), for test_native_client.py and
 * for a GPU host (tests/gpu/run.sh): hostile and refused requests first,
 * then, where this process has a CUDA device, a real copy and its bounds.
 * Prints one line per case, "name: R" (R the reply's status: bytes or a
 * negated errno), and "data: ok|bad" after the real copy.  Exits 0 when it
 * could ask at all, 1 else.
 *
 *   cuda_ipc_check ENDPOINT AK1 SK1 AK2 SK2 BUCKET KEY
 * KEY must hold at least 4096 bytes whose byte i is (i * 7 + 3) & 255. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "core/cuda.h"

struct req {
    const char *bucket, *key;
    uint64_t off, len;
    uint8_t uuid[16];
    struct ol_cu_ipc_handle h;
    uint64_t dst_off;
    bool truncate; /* stop before the handle */
};

static int get_cuda(struct ol_client *c, const struct req *q)
{
    uint8_t a[2048], r[512];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    ol_wbuf_str(&w, q->bucket, strlen(q->bucket));
    ol_wbuf_str(&w, q->key, strlen(q->key));
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_u64(&w, q->off);
    ol_wbuf_u64(&w, q->len);
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_bytes(&w, q->uuid, 16);
    if (!q->truncate) {
        ol_wbuf_bytes(&w, q->h.b, sizeof(q->h.b));
        ol_wbuf_u64(&w, q->dst_off);
    }
    struct olc_call k = {.op = OL_COP_GET_CUDA, .args = a, .args_len = w.len, .rctl = r,
                         .rctl_cap = sizeof(r), .node = 0};
    return olc_call(c, &k);
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s ENDPOINT AK1 SK1 AK2 SK2 BUCKET KEY\n", argv[0]);
        return 2;
    }
    struct ol_client *c1, *c2;
    struct ol_client_opts o1 = {.endpoint = argv[1], .access_key = argv[2], .secret_key = argv[3]};
    struct ol_client_opts o2 = {.endpoint = argv[1], .access_key = argv[4], .secret_key = argv[5]};
    if (ol_client_open(&o1, &c1) < 0 || ol_client_open(&o2, &c2) < 0) {
        printf("open failed\n");
        return 1;
    }
    printf("hello_flag: %d\n", c1->cuda_ipc_node ? 1 : 0);
    struct req q = {.bucket = argv[6], .key = argv[7], .len = 4096};
    for (int i = 0; i < 16; i++)
        q.uuid[i] = (uint8_t)(0xa5 ^ i);
    for (size_t i = 0; i < sizeof(q.h.b); i++)
        q.h.b[i] = (uint8_t)(i * 31 + 1);
    printf("garbage_uuid: %d\n", get_cuda(c1, &q));
    /* The same with this host's device 0, where there is one: a handle that
     * names nothing. */
    const struct ol_cuda *cu = ol_cuda(false);
    ol_cu_device dev;
    ol_cu_ctx ctx = NULL;
    if (cu && cu->device_get(&dev, 0) == 0 && cu->device_uuid(q.uuid, dev) == 0 &&
        cu->primary_ctx_retain(&ctx, dev) == 0 && cu->ctx_push(ctx) == 0)
        printf("cuda: 1\n");
    else
        ctx = NULL;
    printf("garbage_handle: %d\n", get_cuda(c1, &q));
    q.truncate = true;
    printf("truncated: %d\n", get_cuda(c1, &q));
    q.truncate = false;
    printf("stranger: %d\n", get_cuda(c2, &q));
    if (ctx) {
        /* A real allocation: the copy lands, its bounds hold, another user
         * moves nothing. */
        size_t n = 1 << 20;
        ol_cu_devptr d;
        uint8_t *h = malloc(n);
        if (cu->mem_alloc(&d, n) != 0 || cu->memset_d8(d, 0xee, n) != 0 ||
            cu->ipc_get(&q.h, d) != 0) {
            printf("alloc failed\n");
            return 1;
        }
        q.dst_off = 100;
        printf("copy: %d\n", get_cuda(c1, &q));
        cu->memcpy_dtoh(h, d, n);
        bool ok = h[99] == 0xee && h[100 + 4096] == 0xee;
        for (unsigned i = 0; i < 4096; i++)
            ok = ok && h[100 + i] == (uint8_t)((i * 7 + 3) & 255);
        printf("data: %s\n", ok ? "ok" : "bad");
        q.dst_off = n - 100; /* 4096 bytes would pass the end */
        printf("past_end: %d\n", get_cuda(c1, &q));
        q.dst_off = UINT64_MAX - 10;
        printf("wrapped: %d\n", get_cuda(c1, &q));
        cu->memset_d8(d, 0xee, n);
        q.dst_off = 0;
        printf("stranger_real: %d\n", get_cuda(c2, &q));
        cu->memcpy_dtoh(h, d, n);
        ok = true;
        for (size_t i = 0; i < n; i++)
            ok = ok && h[i] == 0xee;
        printf("untouched: %s\n", ok ? "ok" : "bad");
        /* And through the library: a GET into device memory. */
        int64_t got = ol_client_get(c1, argv[6], argv[7], 0, (void *)(uintptr_t)d, 4096, NULL);
        cu->memcpy_dtoh(h, d, 4096);
        ok = got == 4096;
        for (unsigned i = 0; i < 4096; i++)
            ok = ok && h[i] == (uint8_t)((i * 7 + 3) & 255);
        printf("client_get: %lld %s ipc=%d\n", (long long)got, ok ? "ok" : "bad",
               ol_client_cuda_ipc(c1));
        cu->mem_free(d);
        free(h);
    }
    ol_client_close(c2);
    ol_client_close(c1);
    return 0;
}
