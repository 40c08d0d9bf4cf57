/* `openlake admin cluster`: see cli/cluster.h. */
#include "cli/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd.h"
#include "cluster/map.h"
#include "cluster/member.h"
#include "core/err.h"
#include "deploy/cluster.h"

enum { ETCD_TIMEOUT_MS = 3000, MAP_TRIES = 50, MAX_POOL_NODES = 256 };

static void usage(void)
{
    fprintf(stderr,
            "usage: openlake admin cluster pool --cluster ENDPOINTS [--cluster_name C]\n"
            "                                   --nodes n1,n2,... --ec_data K --ec_parity M\n"
            "       openlake admin cluster show --cluster ENDPOINTS [--cluster_name C]\n"
            "  ENDPOINTS: etcd, host:port[,host:port...]\n");
}

struct pool_arg {
    const char *const *nodes;
    unsigned n, k, m;
    uint32_t id;
};

static int add_pool(void *arg, struct ol_map *map)
{
    struct pool_arg *pa = arg;
    return ol_map_add_pool(map, pa->nodes, pa->n, pa->k, pa->m, &pa->id);
}

static void print_set(const struct ol_map *map, const struct ol_map_set *s)
{
    printf("  set %" PRIu32 " (pool %" PRIu32 ", %u+%u):", s->id, s->pool, s->k, s->m);
    for (unsigned j = 0; j < s->k + s->m; j++) {
        const struct ol_map_drive *d = ol_map_drive((struct ol_map *)map, s->drive[j]);
        printf(" %" PRIu32 "=%s:%s", s->drive[j], d ? d->node : "?", d ? d->path : "?");
    }
    printf("\n");
}

static int cmd_pool(struct ol_etcd *c, const char *cluster, char *nodes, long k, long m)
{
    const char *names[MAX_POOL_NODES];
    unsigned n = 0;
    for (char *save = NULL, *t = strtok_r(nodes, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == MAX_POOL_NODES) {
            fprintf(stderr, "openlake admin cluster: at most %d nodes\n", MAX_POOL_NODES);
            return 2;
        }
        names[n++] = t;
    }
    if (n == 0 || k < 1 || m < 0 || k > 255 || m > 255) {
        usage();
        return 2;
    }
    struct pool_arg pa = {names, n, (unsigned)k, (unsigned)m, 0};
    struct ol_map map;
    int rc = ol_map_update(c, cluster, false, add_pool, &pa, MAP_TRIES, &map);
    if (rc < 0) {
        fprintf(stderr, "openlake admin cluster: cannot add the pool: %s%s\n", ol_strerror(rc),
                rc == -ENOENT   ? " (no map yet, or an unknown node: start the nodes first)"
                : rc == -EINVAL ? " (the free drives are not a multiple of k+m)"
                                : "");
        return 1;
    }
    printf("pool %" PRIu32 " added to cluster %s (epoch %" PRIu64 "):\n", pa.id, cluster,
           map.epoch);
    for (unsigned s = 0; s < map.nsets; s++)
        if (map.sets[s].pool == pa.id)
            print_set(&map, &map.sets[s]);
    ol_map_free(&map);
    return 0;
}

static int cmd_show(struct ol_etcd *c, const char *cluster)
{
    struct ol_map map;
    char why[256] = "";
    int rc = ol_map_load(c, cluster, &map, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "openlake admin cluster: cannot read the map of %s: %s %s\n", cluster,
                ol_strerror(rc), why);
        return 1;
    }
    /* The state is the map's (the nodes mark a node down when its lease
     * expired, deploy/cluster.h); "lease" says whether it holds its
     * membership key now (cluster/member.h). */
    char prefix[OL_MAP_MAX_NAME + 64];
    snprintf(prefix, sizeof(prefix), OL_MEMBER_PREFIX_FMT, cluster);
    struct ol_etcd_range live = {0};
    bool have_live = ol_etcd_get_prefix(c, prefix, OL_MAP_MAX_NODES, &live) == 0;
    printf("cluster %s, epoch %" PRIu64 "\n", map.cluster, map.epoch);
    printf("nodes (%u):\n", map.nnodes);
    for (unsigned i = 0; i < map.nnodes; i++) {
        const struct ol_map_node *nd = &map.nodes[i];
        bool up = false;
        for (size_t j = 0; have_live && j < live.n; j++)
            up |= strcmp(live.kvs[j].key + strlen(prefix), nd->name) == 0;
        printf("  %-16s %-5s lease %-4s s3 %s drives %s\n", nd->name,
               ol_map_node_state_name(nd->state), have_live ? (up ? "live" : "gone") : "?",
               nd->s3_addr, nd->ucx_addr);
    }
    printf("drives (%u):\n", map.ndrives);
    for (unsigned i = 0; i < map.ndrives; i++)
        printf("  %4" PRIu32 " %s:%s %s\n", map.drives[i].id, map.drives[i].node,
               map.drives[i].path, ol_map_drive_state_name(map.drives[i].state));
    printf("sets (%u):\n", map.nsets);
    for (unsigned s = 0; s < map.nsets; s++)
        print_set(&map, &map.sets[s]);
    printf("pools (%u):\n", map.npools);
    for (unsigned p = 0; p < map.npools; p++) {
        printf("  pool %" PRIu32 ": sets", map.pools[p].id);
        for (unsigned s = 0; s < map.pools[p].nsets; s++)
            printf(" %" PRIu32, map.pools[p].sets[s]);
        printf("\n");
    }
    if (have_live)
        ol_etcd_range_clear(&live);
    ol_map_free(&map);
    return 0;
}

int ol_admin_cluster_main(int argc, char **argv)
{
    const char *cmd = argc >= 2 ? argv[1] : NULL;
    const char *endpoints = NULL, *cluster = "openlake";
    char *nodes = NULL;
    long k = -1, m = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *n = argv[i], *v = argv[i + 1];
        if (strcmp(n, "--cluster") == 0)
            endpoints = v;
        else if (strcmp(n, "--cluster_name") == 0)
            cluster = v;
        else if (strcmp(n, "--nodes") == 0)
            nodes = argv[i + 1];
        else if (strcmp(n, "--ec_data") == 0)
            k = strtol(v, NULL, 10);
        else if (strcmp(n, "--ec_parity") == 0)
            m = strtol(v, NULL, 10);
        else {
            usage();
            return 2;
        }
    }
    bool pool = cmd && strcmp(cmd, "pool") == 0, show = cmd && strcmp(cmd, "show") == 0;
    if ((!pool && !show) || !endpoints || argc % 2 != 0 || (pool && (!nodes || k < 0 || m < 0))) {
        usage();
        return 2;
    }
    char eps[2048];
    if (ol_cluster_endpoints(endpoints, eps, sizeof(eps)) < 0) {
        usage();
        return 2;
    }
    struct ol_etcd *c = NULL;
    int rc = ol_etcd_create(&c, eps, ETCD_TIMEOUT_MS);
    if (rc < 0) {
        fprintf(stderr, "openlake admin cluster: %s\n", ol_strerror(rc));
        return 1;
    }
    int code = pool ? cmd_pool(c, cluster, nodes, k, m) : cmd_show(c, cluster);
    ol_etcd_destroy(c);
    return code;
}
