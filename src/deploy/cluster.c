/* A node of a cluster: see deploy/cluster.h. */
#include "deploy/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/map.h"
#include "cluster/member.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/md5.h"
#include "deploy/deploy.h"
#include "ec/remotedrive.h"
#include "ec/storedrive.h"
#include "net/drive_server.h"
#include "net/net.h"
#include "store/store.h"

enum {
    ETCD_TIMEOUT_MS = 3000,
    MEMBER_WAIT_MS = 10000, /* the first registration, before the map is touched */
    POLL_MS = 1000,         /* re-reading the map while waiting for a pool */
    WAIT_LOG_MS = 10000,
    MAP_TRIES = 50,
};

struct ol_cluster {
    char name[OL_MAP_MAX_NAME + 1], cluster[OL_MAP_MAX_NAME + 1];
    char ucx[OL_MAP_MAX_ADDR + 1];
    unsigned nlocal;
    char **paths;
    struct ol_store **stores;
    struct ol_storedrive **sd;
    uint32_t *ids; /* the local drives' map ids, DIR order */
    struct ol_net *net;
    struct ol_drive_server *srv;
    struct ol_member *mem;
    struct ol_remotedrive **rds;
    unsigned nrds;
    struct ol_deploy *dp;
    /* The process clock: the versions this node stamps (the deployment's
     * sets), and the stamps its drive server and remote drives send and
     * take in (net/net.h, "Clock").  One clock, so that a version this node
     * writes is stamped after every version it has stored for others or
     * seen in a drive's reply. */
    struct ol_hlc hlc;
};

int ol_cluster_endpoints(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = in; *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0) {
            bool scheme = memmem(p, len, "://", 3) != NULL;
            int w = snprintf(out + n, cap - n, "%s%s%.*s", n ? "," : "", scheme ? "" : "http://",
                             (int)len, p);
            if (w < 0 || (size_t)w >= cap - n)
                return -EINVAL;
            n += (size_t)w;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n ? 0 : -EINVAL;
}

void ol_cluster_deploy_id(const char *cluster, uint8_t id[16])
{
    struct ol_md5 m;
    ol_md5_init(&m);
    static const char tag[] = "openlake cluster ";
    ol_md5_update(&m, tag, sizeof(tag) - 1);
    ol_md5_update(&m, cluster, strlen(cluster));
    ol_md5_final(&m, id);
}

/* "host:port" -> host (cap bytes) and port.  -EINVAL. */
static int split_addr(const char *a, char *host, size_t cap, uint16_t *port)
{
    const char *c = strrchr(a, ':');
    if (!c || c == a || (size_t)(c - a) >= cap)
        return -EINVAL;
    char *end = NULL;
    unsigned long p = strtoul(c + 1, &end, 10);
    if (!end || *end || p > 65535)
        return -EINVAL;
    memcpy(host, a, (size_t)(c - a));
    host[c - a] = '\0';
    *port = (uint16_t)p;
    return 0;
}

/* ---- the map ---- */

struct join_arg {
    struct ol_cluster *cl;
    const char *s3;
};

/* Adds this node (or updates its addresses: a restart may have another
 * drive port) and those of its drives the map does not have yet. */
static int join_map(void *arg, struct ol_map *map)
{
    struct join_arg *ja = arg;
    struct ol_cluster *cl = ja->cl;
    struct ol_map_node *nd = ol_map_node(map, cl->name);
    if (!nd) {
        int rc = ol_map_add_node(map, cl->name, ja->s3, cl->ucx);
        if (rc < 0)
            return rc;
    } else {
        snprintf(nd->s3_addr, sizeof(nd->s3_addr), "%s", ja->s3);
        snprintf(nd->ucx_addr, sizeof(nd->ucx_addr), "%s", cl->ucx);
        nd->state = OL_NODE_UP;
    }
    for (unsigned i = 0; i < cl->nlocal; i++) {
        bool have = false;
        for (unsigned d = 0; d < map->ndrives && !have; d++)
            have = strcmp(map->drives[d].node, cl->name) == 0 &&
                   strcmp(map->drives[d].path, cl->paths[i]) == 0;
        uint32_t id;
        if (!have) {
            int rc = ol_map_add_drive(map, cl->name, cl->paths[i], &id);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* The index of drive id on its node's drive server: its rank among the
 * node's drives by id (the map keeps drives sorted by id). */
static int drive_index(const struct ol_map *map, uint32_t id, const char *node)
{
    int idx = 0;
    for (unsigned d = 0; d < map->ndrives; d++) {
        if (strcmp(map->drives[d].node, node) != 0)
            continue;
        if (map->drives[d].id == id)
            return idx;
        idx++;
    }
    return -1;
}

/* Our drives' ids, and the check that the node serves them in id order. */
static int find_ids(struct ol_cluster *cl, const struct ol_map *map, char *err, size_t errlen)
{
    unsigned mine = 0;
    for (unsigned d = 0; d < map->ndrives; d++) {
        if (strcmp(map->drives[d].node, cl->name) != 0)
            continue;
        if (mine >= cl->nlocal || strcmp(map->drives[d].path, cl->paths[mine]) != 0) {
            snprintf(err, errlen,
                     "node %s has drive %s in the cluster map where %s was given: start it "
                     "with all its directories, in the order of its first start",
                     cl->name, map->drives[d].path, mine < cl->nlocal ? cl->paths[mine] : "none");
            return -EINVAL;
        }
        cl->ids[mine++] = map->drives[d].id;
    }
    return mine == cl->nlocal ? 0 : -EINVAL;
}

/* Whether a set of the map holds one of our drives. */
static bool in_a_pool(const struct ol_cluster *cl, const struct ol_map *map)
{
    for (unsigned s = 0; s < map->nsets; s++)
        for (unsigned j = 0; j < map->sets[s].k + map->sets[s].m; j++)
            for (unsigned i = 0; i < cl->nlocal; i++)
                if (map->sets[s].drive[j] == cl->ids[i])
                    return true;
    return false;
}

static const struct ol_map_set *find_set(const struct ol_map *map, uint32_t id)
{
    for (unsigned s = 0; s < map->nsets; s++)
        if (map->sets[s].id == id)
            return &map->sets[s];
    return NULL;
}

/* The deployment over every set of every pool, in pool order and each
 * pool's set order (the order objects are placed over them). */
static int build(struct ol_cluster *cl, const struct ol_cfg *cfg, const struct ol_map *map,
                 char *err, size_t errlen)
{
    unsigned nsets = 0, k = 0, m = 0;
    for (unsigned p = 0; p < map->npools; p++) {
        for (unsigned s = 0; s < map->pools[p].nsets; s++) {
            const struct ol_map_set *set = find_set(map, map->pools[p].sets[s]);
            if (!set)
                return -OL_EMAP;
            if (nsets == 0) {
                k = set->k;
                m = set->m;
            } else if (set->k != k || set->m != m) {
                snprintf(err, errlen,
                         "the map's sets differ in k+m (%u+%u and %u+%u): one geometry "
                         "per cluster for now",
                         k, m, set->k, set->m);
                return -EINVAL;
            }
            nsets++;
        }
    }
    unsigned n = nsets * (k + m);
    struct ol_drive *drv = calloc(n ? n : 1, sizeof(*drv));
    struct ol_storedrive **local = calloc(n ? n : 1, sizeof(*local));
    char **names = calloc(n ? n : 1, sizeof(*names));
    cl->rds = calloc(n ? n : 1, sizeof(*cl->rds));
    int rc = -ENOMEM;
    if (!drv || !local || !names || !cl->rds)
        goto out;
    uint8_t id[16];
    ol_cluster_deploy_id(cl->cluster, id);
    unsigned pos = 0;
    for (unsigned p = 0; p < map->npools; p++) {
        for (unsigned s = 0; s < map->pools[p].nsets; s++) {
            const struct ol_map_set *set = find_set(map, map->pools[p].sets[s]);
            for (unsigned j = 0; j < k + m; j++, pos++) {
                struct ol_map_drive *md = ol_map_drive((struct ol_map *)map, set->drive[j]);
                struct ol_map_node *nd = md ? ol_map_node((struct ol_map *)map, md->node) : NULL;
                rc = -OL_EMAP;
                if (!nd)
                    goto out;
                rc = -ENOMEM;
                size_t nl = strlen(md->node) + strlen(md->path) + 2;
                names[pos] = malloc(nl);
                if (!names[pos])
                    goto out;
                bool mine = strcmp(md->node, cl->name) == 0;
                /* A local drive by its directory (the admin routes statvfs it). */
                if (mine)
                    snprintf(names[pos], nl, "%s", md->path);
                else
                    snprintf(names[pos], nl, "%s:%s", md->node, md->path);
                if (mine) {
                    unsigned i = 0;
                    while (i < cl->nlocal && cl->ids[i] != md->id)
                        i++;
                    OL_ASSERT(i < cl->nlocal);
                    /* docs/EC.md 6.5: the drive must be this position's. */
                    struct ol_storedrive_member want = {
                        .index = pos, .ndrives = n, .k = (uint8_t)k, .m = (uint8_t)m};
                    memcpy(want.deployment_id, id, 16);
                    if (cl->stores[i]) {
                        rc = ol_storedrive_admit(cl->stores[i], cl->paths[i], &want, err, errlen);
                        if (rc == 1)
                            rc = ol_storedrive_join(cl->stores[i], &want);
                        if (rc < 0) {
                            if (!err[0])
                                snprintf(err, errlen, "drive %s: %s", cl->paths[i],
                                         ol_strerror(rc));
                            goto out;
                        }
                    }
                    ol_storedrive_set_member(cl->sd[i], &want);
                    local[pos] = cl->sd[i];
                    drv[pos] = ol_storedrive_drive(cl->sd[i]);
                } else {
                    struct ol_remotedrive_opts ro = {
                        .net = cl->net,
                        .addr = nd->ucx_addr,
                        .drive = (uint32_t)drive_index(map, md->id, md->node),
                        .timeout_ms = (unsigned)cfg->drive_timeout_ms,
                        .down_ms = (unsigned)cfg->drive_timeout_ms,
                    };
                    rc = ol_remotedrive_create(&ro, &cl->rds[cl->nrds]);
                    if (rc < 0)
                        goto out;
                    drv[pos] = ol_remotedrive_drive(cl->rds[cl->nrds++]);
                }
            }
        }
    }
    rc = ol_deploy_assemble(cfg, n, k, m, drv, local, (const char *const *)names, id, &cl->hlc,
                            &cl->dp, err, errlen);
    if (rc == 0) {
        snprintf(cl->dp->node, sizeof(cl->dp->node), "%s", cl->name);
        snprintf(cl->dp->cluster, sizeof(cl->dp->cluster), "%s", cl->cluster);
        atomic_store(&cl->dp->epoch, map->epoch);
    }
out:
    for (unsigned i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(local);
    free(drv);
    return rc;
}

/* ---- start and stop ---- */

static int open_local(struct ol_cluster *cl, const struct ol_cfg *cfg, const char *const *dirs,
                      unsigned n, const struct ol_store_opts *so, char *err, size_t errlen)
{
    cl->nlocal = n;
    cl->paths = calloc(n, sizeof(*cl->paths));
    cl->stores = calloc(n, sizeof(*cl->stores));
    cl->sd = calloc(n, sizeof(*cl->sd));
    cl->ids = calloc(n, sizeof(*cl->ids));
    if (!cl->paths || !cl->stores || !cl->sd || !cl->ids)
        return -ENOMEM;
    struct ol_storedrive_policy pol;
    ol_storedrive_policy_default(&pol);
    pol.fail_after = (unsigned)cfg->ec_drive_fail_after;
    pol.backoff_max_ms = (unsigned)cfg->ec_drive_backoff_max_ms;
    for (unsigned i = 0; i < n; i++) {
        /* The map names a drive by its absolute path. */
        if (mkdir(dirs[i], 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", dirs[i], strerror(errno));
            return -errno;
        }
        cl->paths[i] = realpath(dirs[i], NULL);
        if (!cl->paths[i]) {
            snprintf(err, errlen, "cannot resolve %s: %s", dirs[i], strerror(errno));
            return -errno;
        }
        if (strlen(cl->paths[i]) > OL_MAP_MAX_PATH) {
            snprintf(err, errlen, "path %s is too long for the cluster map", cl->paths[i]);
            return -EINVAL;
        }
        int orc = ol_store_open(&cl->stores[i], cl->paths[i], so);
        if (orc == -EBUSY) {
            cl->stores[i] = NULL;
            snprintf(err, errlen,
                     "drive %s is in use: it is listed twice, or another OpenLake process has "
                     "it open",
                     cl->paths[i]);
            return orc;
        }
        if (orc < 0) {
            cl->stores[i] = NULL;
            ol_warn("drive %s cannot be opened (%s): starting it offline", cl->paths[i],
                    ol_strerror(orc));
        }
        int rc = ol_storedrive_create(cl->stores[i], &cl->sd[i]);
        if (rc == 0) {
            ol_storedrive_set_policy(cl->sd[i], &pol);
            rc = ol_storedrive_set_path(cl->sd[i], cl->paths[i], so);
        }
        if (rc == 0 && orc < 0)
            ol_storedrive_set_failed(cl->sd[i], orc);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the drive %s: %s", cl->paths[i], ol_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* The drive service: on drive_listen; with port 0, first on the port the
 * map recorded for this node (so that a restarted node keeps its address
 * and the other nodes' remote drives still reach it). */
static int serve_drives(struct ol_cluster *cl, const struct ol_cfg *cfg, const struct ol_map *map,
                        char *err, size_t errlen)
{
    char host[OL_MAP_MAX_ADDR - 8], phost[OL_MAP_MAX_ADDR + 1];
    uint16_t port, prev = 0;
    if (split_addr(cfg->drive_listen, host, sizeof(host), &port) < 0) {
        snprintf(err, errlen, "drive_listen %s: give host:port", cfg->drive_listen);
        return -EINVAL;
    }
    struct ol_map_node *me = map ? ol_map_node((struct ol_map *)map, cl->name) : NULL;
    if (port == 0 && me && split_addr(me->ucx_addr, phost, sizeof(phost), &prev) == 0 &&
        strcmp(phost, host) != 0)
        prev = 0;
    struct ol_net_opts no = {.timeout_ms = (unsigned)cfg->drive_timeout_ms, .hlc = &cl->hlc};
    int rc = ol_net_create(&no, &cl->net);
    if (rc < 0) {
        snprintf(err, errlen, "UCX did not start (%s): a cluster node needs it", ol_strerror(rc));
        return rc;
    }
    struct ol_drive drives[OL_DRIVE_SERVER_MAX_DRIVES];
    if (cl->nlocal > OL_DRIVE_SERVER_MAX_DRIVES)
        return -EINVAL;
    for (unsigned i = 0; i < cl->nlocal; i++)
        drives[i] = ol_storedrive_drive(cl->sd[i]);
    struct ol_drive_server_opts o = {.net = cl->net,
                                     .host = host,
                                     .port = prev ? prev : port,
                                     .drives = drives,
                                     .ndrives = cl->nlocal};
    rc = ol_drive_server_create(&o, &cl->srv);
    if (rc < 0 && prev) {
        o.port = port;
        rc = ol_drive_server_create(&o, &cl->srv);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot serve drives on %s: %s", cfg->drive_listen, ol_strerror(rc));
        return rc;
    }
    snprintf(cl->ucx, sizeof(cl->ucx), "%s:%u", host, ol_drive_server_port(cl->srv));
    return 0;
}

int ol_cluster_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                    const struct ol_store_opts *so, struct ol_cluster **out, char *err,
                    size_t errlen)
{
    char eps[2048];
    struct ol_etcd *etcd = NULL;
    struct ol_map map = {0};
    bool have_map = false;
    char why[256] = "";
    err[0] = '\0';
    if (ol_cluster_endpoints(cfg->cluster, eps, sizeof(eps)) < 0) {
        snprintf(err, errlen, "cluster %s: give etcd endpoints, host:port[,host:port...]",
                 cfg->cluster);
        return -EINVAL;
    }
    struct ol_cluster *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    snprintf(cl->cluster, sizeof(cl->cluster), "%s", cfg->cluster_name);
    if (cfg->node[0])
        snprintf(cl->name, sizeof(cl->name), "%s", cfg->node);
    else if (gethostname(cl->name, sizeof(cl->name)) != 0)
        snprintf(cl->name, sizeof(cl->name), "node");
    cl->name[sizeof(cl->name) - 1] = '\0';
    /* The boot nonce keeps this life's version ids apart from a previous
     * one's (core/hlc.h). */
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    ol_hlc_init(&cl->hlc, 1, nonce, NULL, NULL);

    /* 1. the local directories as drives */
    int rc = open_local(cl, cfg, dirs, n, so, err, errlen);
    if (rc < 0)
        goto fail;
    /* 2. the drive service (knowing the address the map had for us) */
    rc = ol_etcd_create(&etcd, eps, ETCD_TIMEOUT_MS);
    if (rc < 0)
        goto fail;
    rc = ol_map_load(etcd, cl->cluster, &map, why, sizeof(why));
    have_map = rc == 0;
    if (rc < 0 && rc != -ENOENT) {
        snprintf(err, errlen, "cannot read the map of cluster %s from %s: %s %s", cl->cluster,
                 cfg->cluster, ol_strerror(rc), why);
        goto fail;
    }
    rc = serve_drives(cl, cfg, have_map ? &map : NULL, err, errlen);
    if (rc < 0)
        goto fail;
    /* 3. membership: the lease, and the fence on writes */
    struct ol_member_opts mo = {
        .endpoints = eps,
        .cluster = cl->cluster,
        .name = cl->name,
        .s3_addr = cfg->listen,
        .ucx_addr = cl->ucx,
        .bind_process = true,
    };
    rc = ol_member_start(&cl->mem, &mo);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the membership of node %s: %s", cl->name,
                 ol_strerror(rc));
        goto fail;
    }
    if (ol_member_wait(cl->mem, MEMBER_WAIT_MS) < 0)
        ol_warn("cluster %s: node %s is not registered yet (is its name taken by a live "
                "process?); writes are refused until it is",
                cl->cluster, cl->name);
    /* 4. this node and its drives in the map */
    ol_map_free(&map);
    have_map = false;
    struct join_arg ja = {cl, cfg->listen};
    rc = ol_map_update(etcd, cl->cluster, true, join_map, &ja, MAP_TRIES, &map);
    if (rc < 0) {
        snprintf(err, errlen, "cannot add node %s to the map of cluster %s: %s", cl->name,
                 cl->cluster, ol_strerror(rc));
        goto fail;
    }
    have_map = true;
    rc = find_ids(cl, &map, err, errlen);
    if (rc < 0)
        goto fail;
    /* 5. a pool with our drives */
    uint64_t start = ol_mono_ms(), logged = 0;
    while (!in_a_pool(cl, &map)) {
        uint64_t waited = ol_mono_ms() - start;
        if (waited >= (uint64_t)cfg->cluster_wait_ms) {
            rc = -ETIMEDOUT;
            snprintf(err, errlen,
                     "no pool of cluster %s holds the drives of node %s after %" PRId64
                     " ms (openlake admin cluster pool)",
                     cl->cluster, cl->name, cfg->cluster_wait_ms);
            goto fail;
        }
        if (logged == 0 || waited - logged >= WAIT_LOG_MS) {
            logged = waited ? waited : 1;
            ol_info("cluster %s: node %s (drives on %s) waits for a pool with its %u drives "
                    "(openlake admin cluster pool --nodes ...)",
                    cl->cluster, cl->name, cl->ucx, cl->nlocal);
        }
        usleep(POLL_MS * 1000);
        ol_map_free(&map);
        have_map = false;
        rc = ol_map_load(etcd, cl->cluster, &map, why, sizeof(why));
        if (rc < 0) {
            ol_warn("cluster %s: cannot read the map: %s %s", cl->cluster, ol_strerror(rc), why);
            memset(&map, 0, sizeof(map));
            continue;
        }
        have_map = true;
    }
    rc = build(cl, cfg, &map, err, errlen);
    if (rc < 0)
        goto fail;
    ol_info("cluster %s: node %s serves map epoch %" PRIu64 " (%u nodes, %u drives, %u sets)",
            cl->cluster, cl->name, map.epoch, map.nnodes, map.ndrives, map.nsets);
    ol_map_free(&map);
    ol_etcd_destroy(etcd);
    *out = cl;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "cluster: %s", ol_strerror(rc));
    if (have_map)
        ol_map_free(&map);
    ol_etcd_destroy(etcd);
    ol_cluster_close(cl);
    return rc;
}

struct ol_deploy *ol_cluster_deploy(struct ol_cluster *cl)
{
    return cl->dp;
}

void ol_cluster_close(struct ol_cluster *cl)
{
    if (!cl)
        return;
    ol_deploy_close(cl->dp);
    if (cl->mem)
        ol_member_stop(cl->mem, true);
    ol_drive_server_destroy(cl->srv);
    for (unsigned i = 0; i < cl->nrds; i++)
        ol_remotedrive_destroy(cl->rds[i]);
    free(cl->rds);
    if (cl->net)
        ol_net_destroy(cl->net);
    for (unsigned i = 0; i < cl->nlocal; i++) {
        if (cl->sd && cl->sd[i])
            ol_storedrive_destroy(cl->sd[i]);
        if (cl->stores && cl->stores[i])
            ol_store_close(cl->stores[i]);
        if (cl->paths)
            free(cl->paths[i]);
    }
    free(cl->paths);
    free(cl->stores);
    free(cl->sd);
    free(cl->ids);
    free(cl);
}
