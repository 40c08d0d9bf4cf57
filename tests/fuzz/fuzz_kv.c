/* libFuzzer target for the native port's KV ops (kv/serve.h).
 *
 * The input: one byte picking the op (OL_COP_KV_PUT + byte % 6, so one
 * value is not a KV op), a u32 (little-endian) length of the arguments,
 * the arguments (what follows the access key in a request's control
 * bytes), and the rest as the request's bulk data.  The decoder must keep
 * its contract (every key inside the arguments, 1..OL_KV_MAX_KEY bytes, PUT
 * sizes adding up to the data), and serving the request on a small store
 * must answer a status the protocol allows, with its reply inside its
 * buffers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"
#include "kv/serve.h"
#include "native/proto.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_kv: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ol_kv *kv;
static struct ol_kv_item items[OL_NATIVE_KV_MAX_BATCH];
static uint8_t out_data[1 << 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!kv) {
        struct ol_kv_opts o = {.memory_bytes = 1 << 20};
        if (ol_kv_create(&o, &kv) < 0)
            abort();
    }
    if (size < 5)
        return 0;
    uint8_t op = (uint8_t)(OL_COP_KV_PUT + data[0] % 6);
    uint32_t alen;
    memcpy(&alen, data + 1, 4);
    const uint8_t *args = data + 5;
    size_t rest = size - 5;
    if (alen > rest)
        alen = (uint32_t)rest;
    const uint8_t *in = args + alen;
    size_t in_len = rest - alen;

    struct ol_kv_wire_req req;
    int rc = ol_kv_wire_decode(op, args, alen, in_len, &req, items, OL_NATIVE_KV_MAX_BATCH);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG || rc == -EMSGSIZE || rc == -ENOTSUP);
    if (rc == 0 && op != OL_COP_KV_STATS) {
        FUZZ_CHECK(req.n >= 1 && req.n <= OL_NATIVE_KV_MAX_BATCH);
        uint64_t total = 0;
        for (uint32_t i = 0; i < req.n; i++) {
            FUZZ_CHECK(items[i].key_len >= 1 && items[i].key_len <= OL_KV_MAX_KEY);
            FUZZ_CHECK(items[i].key >= args && items[i].key + items[i].key_len <= args + alen);
            FUZZ_CHECK(items[i].offset == total);
            total += items[i].size;
        }
        FUZZ_CHECK(op == OL_COP_KV_PUT ? total == in_len : total == 0);
    }

    struct ol_kv_out out;
    int st = ol_kv_serve(kv, op, args, alen, in, in_len, out_data, sizeof(out_data), &out);
    if (rc < 0) {
        FUZZ_CHECK(st == rc);
    } else if (op == OL_COP_KV_STATS) {
        FUZZ_CHECK(st == 0 && out.ctl_len == 4 + sizeof(struct ol_kv_stats));
    } else {
        FUZZ_CHECK(st >= 0 && (uint32_t)st <= req.n);
        if (op == OL_COP_KV_PUT)
            FUZZ_CHECK(out.ctl_len == 4 * (size_t)req.n);
        if (op == OL_COP_KV_GET)
            FUZZ_CHECK(out.ctl_len == 12 * (size_t)req.n && out.data_len <= sizeof(out_data));
    }
    FUZZ_CHECK(out.data_len == 0 || op == OL_COP_KV_GET);
    free(out.ctl);
    return 0;
}
