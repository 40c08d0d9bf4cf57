/* SHARD_GET on the wire, for tests/integration/test_cluster_direct.py:
 * asks LAYOUT of bucket/key as user 1, then SHARD_GETs the first bytes of
 * each data shard from its node as user 1 and as user 2, and prints the
 * answers: "direct=D k=K m=M" then one line per shard "shard I: R1 R2"
 * (bytes read or a negated errno).  Exits 0 when it could ask, 1 else.
 *
 *   shard_get_check ENDPOINT AK1 SK1 AK2 SK2 BUCKET KEY */
#include <stdio.h>
#include <stdlib.h>

#include "client/internal.h"

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s ENDPOINT AK1 SK1 AK2 SK2 BUCKET KEY\n", argv[0]);
        return 2;
    }
    struct ol_client *c1, *c2;
    struct ol_client_opts o1 = {.endpoint = argv[1], .access_key = argv[2], .secret_key = argv[3]};
    struct ol_client_opts o2 = {.endpoint = argv[1], .access_key = argv[4], .secret_key = argv[5]};
    int rc = ol_client_open(&o1, &c1);
    if (rc < 0) {
        printf("open1 %d\n", rc);
        return 1;
    }
    rc = ol_client_open(&o2, &c2);
    if (rc < 0) {
        printf("open2 %d\n", rc);
        ol_client_close(c1);
        return 1;
    }
    static struct olc_layout L;
    rc = olc_get_layout(c1, argv[6], argv[7], NULL, &L);
    if (rc < 0) {
        printf("layout %d\n", rc);
        return 1;
    }
    printf("direct=%d k=%u m=%u\n", L.direct, L.k, L.m);
    uint64_t len = L.size < 16 ? L.size : 16;
    for (unsigned i = 0; L.direct && len && i < L.k; i++) {
        char b1[16], b2[16];
        int r1 = olc_shard_get(c1, argv[6], argv[7], &L, i, 0, len, b1);
        int r2 = olc_shard_get(c2, argv[6], argv[7], &L, i, 0, len, b2);
        printf("shard %u: %d %d\n", i, r1 == 0 ? (int)len : r1, r2 == 0 ? (int)len : r2);
    }
    ol_client_close(c2);
    ol_client_close(c1);
    return 0;
}
