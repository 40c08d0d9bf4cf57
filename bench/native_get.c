/* Native GET of one object, again and again, into one buffer: GB/s against
 * a memcpy of the same size in the same run (issue 13's ceiling row).  A
 * benchmark, not a test: bench/native.sh runs it against a server.
 *
 *   native_get HOST:NATIVE_PORT BUCKET SIZE_MIB REPS [ACCESS SECRET]
 *
 * It PUTs the object REPS times (SIZE is at most 64 MiB: one message), then
 * GETs it REPS times, and prints medians. */
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

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: native_get HOST:PORT BUCKET SIZE_MIB REPS [ACCESS SECRET]\n");
        return 2;
    }
    const char *addr = argv[1], *bucket = argv[2];
    size_t size = (size_t)atol(argv[3]) << 20;
    int reps = atoi(argv[4]);
    const char *ak = argc > 6 ? argv[5] : "openlake", *sk = argc > 6 ? argv[6] : "openlake-secret";
    uint8_t key[OL_NET_KEY_BYTES];
    ol_native_key(ak, sk, key);
    struct ol_net_opts o = {.timeout_ms = 30000, .key = key};
    struct ol_net *net;
    if (ol_net_create(&o, &net) < 0)
        return 1;
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
