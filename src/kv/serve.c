/* The native port's KV ops (kv/serve.h). */
#include "kv/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"
#include "native/proto.h"

int ol_kv_wire_decode(uint8_t op, const void *args, size_t args_len, uint64_t data_len,
                      struct ol_kv_wire_req *req, struct ol_kv_item *items, size_t cap)
{
    struct ol_rbuf r = {.p = args, .len = args_len};
    memset(req, 0, sizeof(*req));
    if (op == OL_COP_KV_STATS)
        return data_len ? -EINVAL : 0;
    if (op != OL_COP_KV_PUT && op != OL_COP_KV_GET && op != OL_COP_KV_MATCH_PREFIX &&
        op != OL_COP_KV_RELEASE)
        return -ENOTSUP;
    if (op != OL_COP_KV_PUT && data_len)
        return -EINVAL;
    uint32_t n = ol_rbuf_u32(&r);
    if (op == OL_COP_KV_MATCH_PREFIX) {
        req->flags = ol_rbuf_u32(&r);
        req->lease_ms = ol_rbuf_u32(&r);
    }
    if (r.bad || n == 0)
        return -EINVAL;
    if (n > OL_NATIVE_KV_MAX_BATCH || n > cap)
        return -E2BIG;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t kl = 0;
        const uint8_t *k = ol_rbuf_str(&r, OL_KV_MAX_KEY, &kl);
        if (!k || r.bad || kl == 0)
            return -EINVAL;
        items[i].key = k;
        items[i].key_len = (uint32_t)kl;
        items[i].size = 0;
        items[i].offset = total;
        if (op == OL_COP_KV_PUT) {
            uint64_t sz = ol_rbuf_u64(&r);
            if (r.bad)
                return -EINVAL;
            if (sz > OL_KV_MAX_VALUE)
                return -E2BIG;
            items[i].size = sz;
            total += sz; /* at most 4096 * 64 MiB: no overflow */
        }
    }
    if (op == OL_COP_KV_PUT && total != data_len)
        return -EMSGSIZE;
    req->n = n;
    return 0;
}

static uint8_t *ctl_new(struct ol_kv_out *out, size_t cap, struct ol_wbuf *w)
{
    out->ctl = malloc(cap ? cap : 1);
    *w = (struct ol_wbuf){.p = out->ctl, .cap = cap};
    return out->ctl;
}

static int put_stats(struct ol_kv *kv, struct ol_kv_out *out)
{
    struct ol_kv_stats st;
    ol_kv_stats(kv, &st);
    /* Every field of ol_kv_stats is a u64, in declaration order. */
    enum { N = sizeof(st) / sizeof(uint64_t) };
    _Static_assert(sizeof(st) % sizeof(uint64_t) == 0, "ol_kv_stats holds u64 only");
    uint64_t f[N];
    memcpy(f, &st, sizeof(f));
    struct ol_wbuf w;
    if (!ctl_new(out, 4 + 8 * N, &w))
        return -ENOMEM;
    ol_wbuf_u32(&w, N);
    for (unsigned i = 0; i < N; i++)
        ol_wbuf_u64(&w, f[i]);
    out->ctl_len = w.len;
    return 0;
}

int ol_kv_serve(struct ol_kv *kv, uint8_t op, const void *args, size_t args_len,
                const void *in_data, uint64_t in_len, void *data, size_t data_cap,
                struct ol_kv_out *out)
{
    memset(out, 0, sizeof(*out));
    if (!kv)
        return -ENOTSUP;
    struct ol_kv_wire_req req;
    struct ol_kv_item *items = malloc(OL_NATIVE_KV_MAX_BATCH * sizeof(*items));
    if (!items)
        return -ENOMEM;
    int rc = ol_kv_wire_decode(op, args, args_len, in_len, &req, items, OL_NATIVE_KV_MAX_BATCH);
    struct ol_wbuf w;
    if (rc < 0)
        goto out;
    switch (op) {
    case OL_COP_KV_STATS:
        rc = put_stats(kv, out);
        break;
    case OL_COP_KV_PUT:
        if (!ctl_new(out, (size_t)req.n * 4, &w)) {
            rc = -ENOMEM;
            break;
        }
        for (uint32_t i = 0; i < req.n; i++) {
            int st = ol_kv_put(kv, items[i].key, items[i].key_len,
                               (const uint8_t *)in_data + items[i].offset, items[i].size);
            ol_wbuf_u32(&w, (uint32_t)st);
        }
        out->ctl_len = w.len;
        rc = (int)req.n;
        break;
    case OL_COP_KV_GET: {
        if (!ctl_new(out, (size_t)req.n * 12, &w)) {
            rc = -ENOMEM;
            break;
        }
        size_t dlen = 0;
        uint8_t *d = data;
        bool full = false;
        for (uint32_t i = 0; i < req.n; i++) {
            uint64_t size = 0;
            int st = -EMSGSIZE;
            if (!full) {
                st = ol_kv_get(kv, items[i].key, items[i].key_len, d ? d + dlen : NULL,
                               data_cap - dlen, &size);
                if (st == 0)
                    dlen += size;
                else if (st == -EMSGSIZE)
                    full = true; /* the rest waits for another call, in order */
                else
                    size = 0;
            }
            ol_wbuf_u32(&w, (uint32_t)st);
            ol_wbuf_u64(&w, size);
        }
        out->ctl_len = w.len;
        out->data_len = dlen;
        rc = (int)req.n;
        break;
    }
    case OL_COP_KV_MATCH_PREFIX: {
        uint32_t lease = 0;
        if (req.flags & OL_NATIVE_KV_PIN)
            lease = req.lease_ms ? req.lease_ms : OL_KV_DEFAULT_LEASE_MS;
        uint32_t m = 0;
        while (m < req.n) {
            int st = ol_kv_contains(kv, items[m].key, items[m].key_len, lease);
            if (st <= 0)
                break;
            m++;
        }
        rc = (int)m;
        break;
    }
    case OL_COP_KV_RELEASE: {
        uint32_t k = 0;
        for (uint32_t i = 0; i < req.n; i++)
            k += ol_kv_release(kv, items[i].key, items[i].key_len) == 0;
        rc = (int)k;
        break;
    }
    default:
        rc = -ENOTSUP;
    }
out:
    free(items);
    return rc;
}
