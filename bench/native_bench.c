/* The native port's numbers (issue 13), over the client protocol as
 * libopenlake speaks it.  A benchmark, not a test: bench/native.sh runs it
 * against a server, beside `openlake bench` over HTTP.
 *
 *   native_bench HOST:PORT BUCKET get SIZE_MIB REPS
 *       PUTs one object REPS times (SIZE at most 64 MiB: one message), GETs
 *       it REPS times into one buffer; medians, and a memcpy of the same
 *       size in the same run (the ceiling).
 *   native_bench HOST:PORT BUCKET lat4k N
 *       N sequential 4 KiB GETs of 1000 keys: p50 and p99 in microseconds.
 *   native_bench HOST:PORT BUCKET batch4k SECONDS
 *       GET_BATCH calls of 1000 ranged 4 KiB reads each, one after another:
 *       reads per second.
 * Credentials: OPENLAKE_ACCESS_KEY / OPENLAKE_SECRET_KEY (openlake /
 * openlake-secret). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "native/proto.h"
#include "net/net.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *ak, *addr, *bucket;

static int put_small(struct ol_net *net, const char *key, const void *d, size_t n)
{
    uint8_t ctl[512], rctl[512];
    struct ol_wbuf w = {.p = ctl, .cap = sizeof(ctl)};
    ol_wbuf_str(&w, ak, strlen(ak));
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, key, strlen(key));
    ol_wbuf_str(&w, "", 0);
    struct ol_net_call c = {.addr = addr, .op = OL_COP_PUT, .ctl = ctl, .ctl_len = w.len,
                            .data = d, .data_len = n, .rep_ctl = rctl,
                            .rep_ctl_cap = sizeof(rctl)};
    return ol_net_call(net, &c);
}

static int lat4k(struct ol_net *net, int n)
{
    static uint8_t d[4096], back[4096];
    char k[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof(k), "nb4k-%04d", i);
        if (put_small(net, k, d, sizeof(d)) < 0)
            return 1;
    }
    double *t = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        uint8_t ctl[256], rctl[512];
        snprintf(k, sizeof(k), "nb4k-%04d", i % 1000);
        struct ol_wbuf w = {.p = ctl, .cap = sizeof(ctl)};
        ol_wbuf_str(&w, ak, strlen(ak));
        ol_wbuf_str(&w, bucket, strlen(bucket));
        ol_wbuf_str(&w, k, strlen(k));
        ol_wbuf_str(&w, "", 0);
        ol_wbuf_u64(&w, 0);
        ol_wbuf_u64(&w, UINT64_MAX);
        struct ol_net_call c = {.addr = addr, .op = OL_COP_GET, .ctl = ctl, .ctl_len = w.len,
                                .rep_ctl = rctl, .rep_ctl_cap = sizeof(rctl), .rep_data = back,
                                .rep_data_cap = sizeof(back)};
        uint64_t t0 = (uint64_t)ol_wall_ns();
        if (ol_net_call(net, &c) != 4096)
            return 1;
        t[i] = (double)((uint64_t)ol_wall_ns() - t0) / 1000.0;
    }
    qsort(t, (size_t)n, sizeof(double), cmp);
    printf("native GET 4 KiB: p50 %.1f us, p99 %.1f us (%d sequential)\n", t[n / 2],
           t[(size_t)n * 99 / 100], n);
    return 0;
}

static int batch4k(struct ol_net *net, double secs)
{
    static uint8_t d[4096];
    char k[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof(k), "nb4k-%04d", i);
        if (put_small(net, k, d, sizeof(d)) < 0)
            return 1;
    }
    size_t cap = 1000 * 64 + 64;
    uint8_t *ctl = malloc(cap), *rctl = malloc(1000 * 12), *back = malloc(1000 * 4096);
    struct ol_wbuf w = {.p = ctl, .cap = cap};
    ol_wbuf_str(&w, ak, strlen(ak));
    ol_wbuf_u32(&w, 1000);
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof(k), "nb4k-%04d", i);
        ol_wbuf_str(&w, bucket, strlen(bucket));
        ol_wbuf_str(&w, k, strlen(k));
        ol_wbuf_u64(&w, 0);
        ol_wbuf_u64(&w, 4096);
    }
    uint64_t t0 = (uint64_t)ol_wall_ns(), reads = 0;
    while ((double)((uint64_t)ol_wall_ns() - t0) < secs * 1e9) {
        struct ol_net_call c = {.addr = addr, .op = OL_COP_GET_BATCH, .ctl = ctl,
                                .ctl_len = w.len, .rep_ctl = rctl, .rep_ctl_cap = 1000 * 12,
                                .rep_data = back, .rep_data_cap = 1000 * 4096};
        if (ol_net_call(net, &c) != 1000 || c.rep_data_len != 1000 * 4096)
            return 1;
        reads += 1000;
    }
    double s = (double)((uint64_t)ol_wall_ns() - t0) / 1e9;
    printf("native GET_BATCH 1000 x 4 KiB: %.0f reads/s\n", (double)reads / s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: native_bench HOST:PORT BUCKET get SIZE_MIB REPS | lat4k N | "
                        "batch4k SECONDS\n");
        return 2;
    }
    addr = argv[1];
    bucket = argv[2];
    ak = getenv("OPENLAKE_ACCESS_KEY") ? getenv("OPENLAKE_ACCESS_KEY") : "openlake";
    const char *sk =
        getenv("OPENLAKE_SECRET_KEY") ? getenv("OPENLAKE_SECRET_KEY") : "openlake-secret";
    uint8_t key[OL_NET_KEY_BYTES];
    ol_native_key(ak, sk, key);
    struct ol_net_opts o = {.timeout_ms = 30000, .key = key, .spin_us = (unsigned)atoi(getenv("SPIN") ? getenv("SPIN") : "0")};
    struct ol_net *net;
    if (ol_net_create(&o, &net) < 0)
        return 1;
    if (strcmp(argv[3], "lat4k") == 0)
        return lat4k(net, atoi(argv[4]));
    if (strcmp(argv[3], "batch4k") == 0)
        return batch4k(net, atof(argv[4]));
    if (argc < 6 || strcmp(argv[3], "get") != 0)
        return 2;
    size_t size = (size_t)atol(argv[4]) << 20;
    int reps = atoi(argv[5]);
    uint8_t *src = malloc(size), *dst = malloc(size);
    for (size_t i = 0; i < size; i++)
        src[i] = (uint8_t)(i * 7);
    memset(dst, 1, size);
    uint8_t ctl[512], rctl[512];
    struct ol_wbuf w = {.p = ctl, .cap = sizeof(ctl)};
    ol_wbuf_str(&w, ak, strlen(ak));
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, "bench-native", 12);
    ol_wbuf_str(&w, "", 0);
    struct ol_net_call c = {.addr = addr, .op = OL_COP_PUT, .ctl = ctl, .ctl_len = w.len,
                            .data = src, .data_len = size, .rep_ctl = rctl,
                            .rep_ctl_cap = sizeof(rctl)};
    double *pt = calloc((size_t)reps, sizeof(double));
    int rc = 0;
    for (int i = 0; i < reps && rc >= 0; i++) {
        c = (struct ol_net_call){.addr = addr, .op = OL_COP_PUT, .ctl = ctl, .ctl_len = w.len,
                                 .data = src, .data_len = size, .rep_ctl = rctl,
                                 .rep_ctl_cap = sizeof(rctl)};
        uint64_t t = (uint64_t)ol_wall_ns();
        rc = ol_net_call(net, &c);
        pt[i] = (double)size / (double)((uint64_t)ol_wall_ns() - t);
    }
    if (rc < 0) {
        fprintf(stderr, "put: %d\n", rc);
        return 1;
    }
    w = (struct ol_wbuf){.p = ctl, .cap = sizeof(ctl)};
    ol_wbuf_str(&w, ak, strlen(ak));
    ol_wbuf_str(&w, bucket, strlen(bucket));
    ol_wbuf_str(&w, "bench-native", 12);
    ol_wbuf_str(&w, "", 0);
    ol_wbuf_u64(&w, 0);
    ol_wbuf_u64(&w, UINT64_MAX);
    double *g = calloc((size_t)reps, sizeof(double)), *m = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < reps; i++) {
        c = (struct ol_net_call){.addr = addr, .op = OL_COP_GET, .ctl = ctl, .ctl_len = w.len,
                                 .rep_ctl = rctl, .rep_ctl_cap = sizeof(rctl), .rep_data = dst,
                                 .rep_data_cap = size};
        uint64_t t = (uint64_t)ol_wall_ns();
        rc = ol_net_call(net, &c);
        g[i] = (double)size / (double)((uint64_t)ol_wall_ns() - t);
        if (rc != (int)size || memcmp(dst, src, size) != 0) {
            fprintf(stderr, "get: %d\n", rc);
            return 1;
        }
        t = (uint64_t)ol_wall_ns();
        memcpy(dst, src, size);
        m[i] = (double)size / (double)((uint64_t)ol_wall_ns() - t);
    }
    qsort(g, (size_t)reps, sizeof(double), cmp);
    qsort(pt, (size_t)reps, sizeof(double), cmp);
    printf("native PUT %zu MiB: %.2f GB/s\n", size >> 20, pt[reps / 2]);
    qsort(m, (size_t)reps, sizeof(double), cmp);
    printf("native GET %zu MiB: %.2f GB/s, memcpy %.2f GB/s, ratio %.2f\n", size >> 20,
           g[reps / 2], m[reps / 2], g[reps / 2] / m[reps / 2]);
    ol_net_destroy(net);
    return 0;
}
