/* The KV ops of the native port (native/proto.h, OL_COP_KV_*) over the raw
 * client protocol: batched put with per-key dedup statuses, batched get with
 * hits and misses back to back, match_prefix with pins and releases, stats,
 * and the request errors (-EINVAL, -E2BIG, -EMSGSIZE, -ENOTSUP). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/clock.h"
#include "kv/hash.h"
#include "kv/kv.h"
#include "native/proto.h"
#include "native/server.h"
#include "net/net.h"
#include "obj/obj.h"
#include "store/store.h"

static const char *AK = "kv-ak", *SK = "kv-secret";

static int secret_of(void *arg, const char *ak, char secret[129])
{
    (void)arg;
    if (strcmp(ak, AK) != 0)
        return -ENOENT;
    snprintf(secret, 129, "%s", SK);
    return 0;
}

static struct ol_net *net;
static char addr[64];

enum { CTL_CAP = 1 << 20, REP_CAP = 1 << 20 };
static uint8_t *ctl, *rep, *rdata;
static size_t rep_len, rdata_len;

/* One call: ctl = access key + args; the reply into rep / rdata. */
static int call(uint8_t op, const struct ol_wbuf *args, const void *data, size_t dlen)
{
    struct ol_wbuf w = {.p = ctl, .cap = CTL_CAP};
    ol_wbuf_str(&w, AK, strlen(AK));
    if (args)
        ol_wbuf_bytes(&w, args->p, args->len);
    if (w.over)
        abort();
    struct ol_net_call k = {.addr = addr,
                            .op = op,
                            .ctl = ctl,
                            .ctl_len = w.len,
                            .data = data,
                            .data_len = dlen,
                            .rep_ctl = rep,
                            .rep_ctl_cap = REP_CAP,
                            .rep_data = rdata,
                            .rep_data_cap = 8 << 20};
    int rc = ol_net_call(net, &k);
    rep_len = k.rep_ctl_len;
    rdata_len = k.rep_data_len;
    return rc;
}

static uint8_t keys[64][OL_KV_KEY_BYTES];

/* The chain of a 64-block prompt (blocks of 16 tokens). */
static void make_keys(void)
{
    int32_t tok[64 * 16];
    for (int i = 0; i < 64 * 16; i++)
        tok[i] = i * 7 + 3;
    if (ol_kv_hash_chain(NULL, tok, 64 * 16, 16, false, keys, 64) != 64)
        abort();
}

static size_t size_of(unsigned i)
{
    return 1000 + i * 97;
}

static void fill(unsigned i, uint8_t *b)
{
    for (size_t j = 0; j < size_of(i); j++)
        b[j] = (uint8_t)(i * 31 + j);
}

/* PUT of keys[from..from+n) (data built here); the statuses into st. */
static int kv_put(unsigned from, unsigned n, int32_t *st)
{
    struct ol_wbuf a = {.p = malloc(1 << 16), .cap = 1 << 16};
    size_t total = 0;
    for (unsigned i = from; i < from + n; i++)
        total += size_of(i);
    uint8_t *d = malloc(total), *p = d;
    ol_wbuf_u32(&a, n);
    for (unsigned i = from; i < from + n; i++) {
        ol_wbuf_str(&a, keys[i], OL_KV_KEY_BYTES);
        ol_wbuf_u64(&a, size_of(i));
        fill(i, p);
        p += size_of(i);
    }
    int rc = call(OL_COP_KV_PUT, &a, d, total);
    struct ol_rbuf r = {.p = rep, .len = rep_len};
    for (unsigned i = 0; rc > 0 && i < n; i++)
        st[i] = (int32_t)ol_rbuf_u32(&r);
    free(a.p);
    free(d);
    return rc;
}

static int keys_op(uint8_t op, const unsigned *idx, unsigned n, uint32_t flags, uint32_t lease)
{
    struct ol_wbuf a = {.p = malloc(1 << 16), .cap = 1 << 16};
    ol_wbuf_u32(&a, n);
    if (op == OL_COP_KV_MATCH_PREFIX) {
        ol_wbuf_u32(&a, flags);
        ol_wbuf_u32(&a, lease);
    }
    for (unsigned i = 0; i < n; i++)
        ol_wbuf_str(&a, keys[idx[i]], OL_KV_KEY_BYTES);
    int rc = call(op, &a, NULL, 0);
    free(a.p);
    return rc;
}

static void stats(uint64_t f[64], uint32_t *nf)
{
    CHECK_RC(call(OL_COP_KV_STATS, NULL, NULL, 0), 0);
    struct ol_rbuf r = {.p = rep, .len = rep_len};
    *nf = ol_rbuf_u32(&r);
    CHECK(*nf == sizeof(struct ol_kv_stats) / 8 && *nf <= 64);
    for (uint32_t i = 0; i < *nf && i < 64; i++)
        f[i] = ol_rbuf_u64(&r);
    CHECK(!r.bad);
}

static struct ol_kv_stats stats_struct(void)
{
    uint64_t f[64];
    uint32_t nf;
    stats(f, &nf);
    struct ol_kv_stats st;
    memcpy(&st, f, sizeof(st));
    return st;
}

int main(void)
{
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "kvnative") != 0)
        return 77;
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    struct ol_store *store;
    CHECK_RC(ol_store_open(&store, root, &so), 0);
    struct ol_obj *obj;
    CHECK_RC(ol_obj_open_store(store, &obj), 0);
    char kdir[300];
    snprintf(kdir, sizeof(kdir), "%s/kv-cache", root);
    struct ol_kv_opts ko = {.memory_bytes = 64 << 20, .disk_bytes = 64 << 20, .dir = kdir};
    struct ol_kv *kv;
    CHECK_RC(ol_kv_create(&ko, &kv), 0);

    struct ol_native_server_opts o = {
        .host = "127.0.0.1", .obj = obj, .secret = secret_of, .workers = 2, .kv = kv};
    struct ol_native_server *srv;
    int rc = ol_native_server_create(&o, &srv);
    if (rc == -EIO) {
        fprintf(stderr, "UCX did not start: skipped\n");
        return 77;
    }
    CHECK_RC(rc, 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_native_server_port(srv));
    uint8_t nkey[OL_NET_KEY_BYTES];
    ol_native_key(AK, SK, nkey);
    struct ol_net_opts no = {.timeout_ms = 5000, .key = nkey};
    if (ol_net_create(&no, &net) < 0) {
        fprintf(stderr, "UCX did not start: skipped\n");
        return 77;
    }
    ctl = malloc(CTL_CAP);
    rep = malloc(REP_CAP);
    rdata = malloc(8 << 20);
    make_keys();

    /* PUT 8, then 4 old + 4 new: per-key statuses and the dedup count. */
    int32_t st[64];
    CHECK_RC(kv_put(0, 8, st), 8);
    for (int i = 0; i < 8; i++)
        CHECK(st[i] == 0);
    CHECK_RC(kv_put(4, 8, st), 8);
    for (int i = 0; i < 8; i++)
        CHECK(st[i] == (i < 4 ? 1 : 0));
    struct ol_kv_stats ks = stats_struct();
    CHECK(ks.stored == 12 && ks.dedup == 4 && ks.puts == 16 && ks.mem_entries == 12);

    /* GET 0..13 with 12 and 13 absent, and 3 repeated: statuses, sizes, the
     * blocks back to back. */
    unsigned gi[15];
    for (unsigned i = 0; i < 14; i++)
        gi[i] = i;
    gi[14] = 3;
    CHECK_RC(keys_op(OL_COP_KV_GET, gi, 15, 0, 0), 15);
    {
        struct ol_rbuf r = {.p = rep, .len = rep_len};
        size_t off = 0;
        uint8_t want[8192];
        for (unsigned i = 0; i < 15; i++) {
            int32_t s = (int32_t)ol_rbuf_u32(&r);
            uint64_t size = ol_rbuf_u64(&r);
            if (gi[i] >= 12) {
                CHECK(s == -ENOENT && size == 0);
                continue;
            }
            CHECK(s == 0 && size == size_of(gi[i]));
            fill(gi[i], want);
            CHECK(off + size <= rdata_len && memcmp(rdata + off, want, size) == 0);
            off += size;
        }
        CHECK(!r.bad && off == rdata_len);
    }

    /* MATCH_PREFIX: leading keys present, stopping at the first absent. */
    unsigned mi[16];
    for (unsigned i = 0; i < 16; i++)
        mi[i] = i; /* 0..11 present, 12.. absent */
    CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, mi, 16, 0, 0), 12);
    CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, mi, 5, 0, 0), 5);
    mi[2] = 40; /* a hole */
    CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, mi, 16, 0, 0), 2);
    mi[0] = 41;
    CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, mi, 16, 0, 0), 0);
    /* With pins: 0..11 pinned, released once each; a second release finds
     * no pin. */
    for (unsigned i = 0; i < 16; i++)
        mi[i] = i;
    CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, mi, 16, OL_NATIVE_KV_PIN, 60000), 12);
    CHECK_RC(keys_op(OL_COP_KV_RELEASE, mi, 16, 0, 0), 12);
    CHECK_RC(keys_op(OL_COP_KV_RELEASE, mi, 16, 0, 0), 0);
    ks = stats_struct();
    CHECK(ks.pins == 12 && ks.releases == 12);

    /* A 1,000-key lookup in one round trip (the latency case; timed
     * here only for the log). */
    {
        unsigned big[1000];
        for (unsigned i = 0; i < 1000; i++)
            big[i] = i % 12;
        uint64_t ns[21];
        for (int k = 0; k < 21; k++) {
            uint64_t t0 = ol_mono_ns();
            CHECK_RC(keys_op(OL_COP_KV_MATCH_PREFIX, big, 1000, 0, 0), 1000);
            ns[k] = ol_mono_ns() - t0;
        }
        for (int a = 0; a < 21; a++) /* sort: the median */
            for (int b = a + 1; b < 21; b++)
                if (ns[b] < ns[a]) {
                    uint64_t t = ns[a];
                    ns[a] = ns[b];
                    ns[b] = t;
                }
        fprintf(stderr, "match_prefix of 1000 keys over tcp loopback: p50 %.0f us, min %.0f us\n",
                ns[10] / 1e3, ns[0] / 1e3);
    }

    /* Request errors: the whole batch refused, nothing stored. */
    {
        uint8_t b[4096];
        struct ol_wbuf a = {.p = b, .cap = sizeof(b)};
        ol_wbuf_u32(&a, 0); /* n = 0 */
        CHECK_RC(call(OL_COP_KV_GET, &a, NULL, 0), -EINVAL);
        a.len = 0;
        ol_wbuf_u32(&a, 2); /* truncated: one key of two */
        ol_wbuf_str(&a, keys[0], 32);
        CHECK_RC(call(OL_COP_KV_GET, &a, NULL, 0), -EINVAL);
        a.len = 0;
        uint8_t longkey[OL_KV_MAX_KEY + 1];
        memset(longkey, 1, sizeof(longkey));
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, longkey, sizeof(longkey));
        CHECK_RC(call(OL_COP_KV_MATCH_PREFIX, &a, NULL, 0), -EINVAL); /* flags eaten: short */
        a.len = 0;
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, longkey, sizeof(longkey));
        CHECK_RC(call(OL_COP_KV_GET, &a, NULL, 0), -EINVAL);
        a.len = 0;
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, "", 0); /* empty key */
        CHECK_RC(call(OL_COP_KV_RELEASE, &a, NULL, 0), -EINVAL);
        a.len = 0;
        ol_wbuf_u32(&a, OL_NATIVE_KV_MAX_BATCH + 1);
        CHECK_RC(call(OL_COP_KV_GET, &a, NULL, 0), -E2BIG);
        /* PUT sizes that do not add up to the data. */
        uint8_t d[100] = {0};
        a.len = 0;
        ol_wbuf_u32(&a, 2);
        ol_wbuf_str(&a, "k1", 2);
        ol_wbuf_u64(&a, 50);
        ol_wbuf_str(&a, "k2", 2);
        ol_wbuf_u64(&a, 60);
        CHECK_RC(call(OL_COP_KV_PUT, &a, d, sizeof(d)), -EMSGSIZE);
        /* A block past the limit. */
        a.len = 0;
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, "k1", 2);
        ol_wbuf_u64(&a, (uint64_t)OL_KV_MAX_VALUE + 1);
        CHECK_RC(call(OL_COP_KV_PUT, &a, d, sizeof(d)), -E2BIG);
        /* Data on an op that takes none. */
        a.len = 0;
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, "k1", 2);
        CHECK_RC(call(OL_COP_KV_GET, &a, d, sizeof(d)), -EINVAL);
        /* Opaque keys (an adapter's own) work as well. */
        a.len = 0;
        ol_wbuf_u32(&a, 2);
        ol_wbuf_str(&a, "k1", 2);
        ol_wbuf_u64(&a, 40);
        ol_wbuf_str(&a, "vllm@model@1@0@abc@bf16", 23);
        ol_wbuf_u64(&a, 60);
        for (int i = 0; i < 100; i++)
            d[i] = (uint8_t)i;
        CHECK_RC(call(OL_COP_KV_PUT, &a, d, sizeof(d)), 2);
        a.len = 0;
        ol_wbuf_u32(&a, 1);
        ol_wbuf_str(&a, "vllm@model@1@0@abc@bf16", 23);
        CHECK_RC(call(OL_COP_KV_GET, &a, NULL, 0), 1);
        CHECK(rdata_len == 60 && memcmp(rdata, d + 40, 60) == 0);
    }
    ks = stats_struct();
    CHECK(ks.stored == 14 && ks.corrupt == 0);

    /* A node without a KV store: -ENOTSUP. */
    ol_native_server_destroy(srv);
    o.kv = NULL;
    CHECK_RC(ol_native_server_create(&o, &srv), 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_native_server_port(srv));
    CHECK_RC(call(OL_COP_KV_STATS, NULL, NULL, 0), -ENOTSUP);

    ol_net_destroy(net);
    ol_native_server_destroy(srv);
    ol_kv_destroy(kv);
    ol_obj_close(obj);
    ol_store_close(store);
    check_rm_rf(root);
    free(ctl);
    free(rep);
    free(rdata);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
