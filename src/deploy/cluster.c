/* A node of a cluster: see deploy/cluster.h. */
#include "deploy/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cluster/etcd.h"
#include "cluster/key.h"
#include "cluster/map.h"
#include "cluster/member.h"
#include "cluster/vouch.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/md5.h"
#include "deploy/deploy.h"
#include "ec/placement.h"
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
    /* One vouch question's deadline: a round asks the peers one after the
     * other, and should end well within OL_VOUCH_PERIOD_MS. */
    VOUCH_ASK_MS = 300,
    VOUCH_REPLY_CAP = 256, /* a vouch's reply (it may grow at the end) */
};

/* A node of the map, as the vouch rounds ask it. */
struct vpeer {
    char name[OL_MAP_MAX_NAME + 1];
    char ucx[OL_MAP_MAX_ADDR + 1];
};

enum { OL_CLUSTER_MAX_UP = 64 };

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
    struct ol_remotedrive **rds; /* OL_EC_MAX_DRIVES slots */
    unsigned nrds;
    struct ol_deploy *dp;
    /* The process clock: the versions this node stamps (the deployment's
     * sets), and the stamps its drive server and remote drives send and
     * take in (net/net.h, "Clock").  One clock, so that a version this node
     * writes is stamped after every version it has stored for others or
     * seen in a drive's reply. */
    struct ol_hlc hlc;
    /* The cluster key (cluster/key.h): every drive-protocol message is
     * signed with it (net/auth.h). */
    uint8_t key[OL_CLUSTER_KEY_BYTES];
    unsigned drive_timeout_ms;
    /* The map's pools in the deployment (by id), and one refused (id + 1). */
    uint32_t built[OL_DEPLOY_MAX_POOLS];
    unsigned nbuilt;
    uint32_t refused;
    /* The map thread (follow_once) and its etcd client. */
    struct ol_etcd *etcd;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards nodes_json, peers, npeers, nmap */
    char *nodes_json;
    /* The other nodes that are up: their S3 addresses (ol_cluster_peers_s3). */
    char up_s3[OL_CLUSTER_MAX_UP][128];
    unsigned nup;
    /* The map's other nodes and its node count, for the vouch rounds (as
     * the map was last read); vpeers is the vouch thread's own copy. */
    struct vpeer *peers, *vpeers;
    size_t npeers, nmap;
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

struct key_probe {
    struct ol_store *st;
    int found; /* 1: a key, <0: an error */
};

static int probe_bucket(void *ctx, const struct ol_bucket_info *b)
{
    struct key_probe *kp = ctx;
    struct ol_store_viter *it = NULL;
    int rc = ol_store_viter_open(kp->st, b->name, &it);
    if (rc == -OL_ENOBUCKET)
        return 0;
    if (rc < 0) {
        kp->found = rc;
        return 1;
    }
    const char *k;
    size_t kl;
    struct ol_version_info vi;
    rc = ol_store_viter_next(it, &k, &kl, &vi);
    ol_store_viter_close(it);
    if (rc != 1) { /* 0: a version; <0: an error */
        kp->found = rc == 0 ? 1 : rc;
        return 1;
    }
    return 0;
}

/* Whether a drive holds any key (1), none (0), or an error.  A drive of a
 * pool that just joined may hold buckets before it holds an identity: the
 * node that added the pool first creates them on every new drive
 * (add_map_pool).  With no key it is simply a new drive. */
static int holds_keys(struct ol_store *st)
{
    struct key_probe kp = {st, 0};
    int rc = ol_store_bucket_list(st, probe_bucket, &kp);
    return kp.found ? kp.found : rc < 0 ? rc : 0;
}

/* The geometry of a map pool (its first set's); -OL_EMAP for a pool whose
 * sets differ or are unknown. */
static int pool_geometry(const struct ol_map *map, const struct ol_map_pool *pl, unsigned *k,
                         unsigned *m)
{
    for (unsigned s = 0; s < pl->nsets; s++) {
        const struct ol_map_set *set = find_set(map, pl->sets[s]);
        if (!set)
            return -OL_EMAP;
        if (s == 0) {
            *k = set->k;
            *m = set->m;
        } else if (set->k != *k || set->m != *m) {
            return -OL_EMAP;
        }
    }
    return pl->nsets ? 0 : -OL_EMAP;
}

static bool pool_built(const struct ol_cluster *cl, uint32_t id)
{
    for (unsigned i = 0; i < cl->nbuilt; i++)
        if (cl->built[i] == id)
            return true;
    return false;
}

struct bucket_names {
    char (*names)[64];
    unsigned n, cap;
};

static int bucket_acc_cb(void *ctx, const struct ol_bucket_info *b)
{
    struct bucket_names *bn = ctx;
    if (bn->n == bn->cap) {
        unsigned cap = bn->cap ? bn->cap * 2 : 16;
        void *p = realloc(bn->names, cap * sizeof(*bn->names));
        if (!p)
            return -ENOMEM;
        bn->names = p;
        bn->cap = cap;
    }
    snprintf(bn->names[bn->n++], 64, "%s", b->name);
    return 0;
}

/* Adds map pool `pl` to the deployment: its drives local (checked and
 * stamped as the pool's position, docs/EC.md 6.5: a drive's identity is
 * its position in its pool and the pool's drive count, so a pool that
 * joins later changes no drive of the others) or remote; the buckets of the
 * deployment created on its drives before it is published (every bucket
 * rule counts every drive); then published (deploy.h, "Growing while
 * serving"). */
static int add_map_pool(struct ol_cluster *cl, const struct ol_map *map,
                        const struct ol_map_pool *pl, char *err, size_t errlen)
{
    unsigned k = 0, m = 0;
    int rc = pool_geometry(map, pl, &k, &m);
    if (rc < 0 || k != cl->dp->k || m != cl->dp->m) {
        snprintf(err, errlen,
                 "pool %" PRIu32 ": its sets are not all of %u+%u (one geometry per cluster "
                 "for now)",
                 pl->id, cl->dp->k, cl->dp->m);
        return -EINVAL;
    }
    unsigned n = pl->nsets * (k + m);
    if (cl->nrds + n > OL_EC_MAX_DRIVES)
        return -OL_ETOOLARGE;
    struct ol_drive *drv = calloc(n, sizeof(*drv));
    struct ol_storedrive **local = calloc(n, sizeof(*local));
    char **names = calloc(n, sizeof(*names));
    unsigned nrds0 = cl->nrds;
    rc = -ENOMEM;
    if (!drv || !local || !names)
        goto out;
    uint8_t id[16];
    ol_cluster_deploy_id(cl->cluster, id);
    unsigned pos = 0;
    for (unsigned s = 0; s < pl->nsets; s++) {
        const struct ol_map_set *set = find_set(map, pl->sets[s]);
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
                struct ol_storedrive_member want = {
                    .index = pos, .ndrives = n, .k = (uint8_t)k, .m = (uint8_t)m};
                memcpy(want.deployment_id, id, 16);
                struct ol_store_identity have;
                if (cl->stores[i] && ol_store_identity(cl->stores[i], &have) == 0 &&
                    !have.ec_joined && have.has_data && holds_keys(cl->stores[i]) == 0) {
                    rc = ol_storedrive_join(cl->stores[i], &want);
                    if (rc < 0) {
                        snprintf(err, errlen, "drive %s: %s", cl->paths[i], ol_strerror(rc));
                        goto out;
                    }
                } else if (cl->stores[i]) {
                    rc = ol_storedrive_admit(cl->stores[i], cl->paths[i], &want, err, errlen);
                    if (rc == 1)
                        rc = ol_storedrive_join(cl->stores[i], &want);
                    if (rc < 0) {
                        if (!err[0])
                            snprintf(err, errlen, "drive %s: %s", cl->paths[i], ol_strerror(rc));
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
                    .timeout_ms = cl->drive_timeout_ms,
                    .down_ms = cl->drive_timeout_ms,
                };
                rc = ol_remotedrive_create(&ro, &cl->rds[cl->nrds]);
                if (rc < 0)
                    goto out;
                drv[pos] = ol_remotedrive_drive(cl->rds[cl->nrds++]);
            }
        }
    }
    /* The buckets first: a request that counts drives for a bucket never
     * sees the new drives without them. */
    if (atomic_load(&cl->dp->npools) > 0) {
        struct bucket_names bn = {0};
        (void)ol_deploy_bucket_list(cl->dp, bucket_acc_cb, &bn);
        int64_t now = ol_wall_ns();
        for (unsigned b = 0; b < bn.n; b++)
            for (unsigned i = 0; i < n; i++)
                if (drv[i].ops->bucket_create)
                    (void)drv[i].ops->bucket_create(drv[i].d, bn.names[b], now);
        free(bn.names);
    }
    rc = ol_deploy_add_pool(cl->dp, pl->id, n, drv, local, (const char *const *)names, err, errlen);
    if (rc == 0)
        cl->built[cl->nbuilt++] = pl->id;
out:
    if (rc < 0) { /* the remote drives made here go again */
        for (unsigned i = nrds0; i < cl->nrds; i++)
            ol_remotedrive_destroy(cl->rds[i]);
        cl->nrds = nrds0;
    }
    for (unsigned i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(local);
    free(drv);
    return rc;
}

/* The deployment over every pool of the map, in map order: each pool a
 * placement domain of its own (deploy.h). */
static int build(struct ol_cluster *cl, const struct ol_cfg *cfg, const struct ol_map *map,
                 char *err, size_t errlen)
{
    unsigned k = 0, m = 0;
    if (map->npools == 0 || pool_geometry(map, &map->pools[0], &k, &m) < 0)
        return -OL_EMAP;
    uint8_t id[16];
    ol_cluster_deploy_id(cl->cluster, id);
    cl->rds = calloc(OL_EC_MAX_DRIVES, sizeof(*cl->rds));
    if (!cl->rds)
        return -ENOMEM;
    int rc = ol_deploy_assemble(cfg, k, m, id, &cl->hlc, &cl->dp, err, errlen);
    if (rc < 0)
        return rc;
    snprintf(cl->dp->node, sizeof(cl->dp->node), "%s", cl->name);
    snprintf(cl->dp->cluster, sizeof(cl->dp->cluster), "%s", cl->cluster);
    for (unsigned p = 0; p < map->npools; p++) {
        rc = add_map_pool(cl, map, &map->pools[p], err, errlen);
        if (rc < 0)
            return rc;
    }
    atomic_store(&cl->dp->epoch, map->epoch);
    return 0;
}

/* ---- following the map (the map thread) ---- */

/* What the map thread saw last, for the admin routes (any thread). */
static struct ol_cluster *g_cluster;

struct states_arg {
    char (*live)[OL_MAP_MAX_NAME + 1];
    unsigned nlive;
};

static bool is_live(const struct states_arg *a, const char *name)
{
    for (unsigned i = 0; i < a->nlive; i++)
        if (strcmp(a->live[i], name) == 0)
            return true;
    return false;
}

/* Marks down the nodes without a membership key and up those with one;
 * -EALREADY when the map already says so (nothing is stored). */
static int mark_states(void *arg, struct ol_map *map)
{
    const struct states_arg *a = arg;
    bool changed = false;
    for (unsigned i = 0; i < map->nnodes; i++) {
        enum ol_map_node_state want = is_live(a, map->nodes[i].name) ? OL_NODE_UP : OL_NODE_DOWN;
        if (map->nodes[i].state != want) {
            map->nodes[i].state = want;
            changed = true;
        }
    }
    return changed ? 0 : -EALREADY;
}

/* The registered nodes (cluster/member.h's keys). */
static int read_live(struct ol_cluster *cl, struct states_arg *a)
{
    char prefix[OL_MAP_MAX_NAME + 64];
    snprintf(prefix, sizeof(prefix), OL_MEMBER_PREFIX_FMT, cl->cluster);
    struct ol_etcd_range r = {0};
    int rc = ol_etcd_get_prefix(cl->etcd, prefix, OL_MAP_MAX_NODES, &r);
    if (rc < 0)
        return rc;
    a->live = calloc(r.n + 1, sizeof(*a->live));
    if (!a->live) {
        ol_etcd_range_clear(&r);
        return -ENOMEM;
    }
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < r.n; i++) {
        const char *k = r.kvs[i].key;
        if (strlen(k) > pl && strlen(k) - pl <= OL_MAP_MAX_NAME)
            snprintf(a->live[a->nlive++], OL_MAP_MAX_NAME + 1, "%s", k + pl);
    }
    ol_etcd_range_clear(&r);
    return 0;
}

/* Keeps the admin's view of the nodes (name, state, S3 address) as JSON. */
static void publish_nodes(struct ol_cluster *cl, const struct ol_map *map)
{
    size_t cap = 64 + (size_t)map->nnodes * (OL_MAP_MAX_NAME + OL_MAP_MAX_ADDR + 64), n = 0;
    char *j = malloc(cap);
    if (!j)
        return;
    n += (size_t)snprintf(j + n, cap - n, "[");
    for (unsigned i = 0; i < map->nnodes && n < cap; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"name\":\"%s\",\"state\":\"%s\",\"s3\":\"%s\"}",
                              i ? "," : "", map->nodes[i].name,
                              ol_map_node_state_name(map->nodes[i].state), map->nodes[i].s3_addr);
    if (n < cap)
        snprintf(j + n, cap - n, "]");
    pthread_mutex_lock(&cl->mu);
    free(cl->nodes_json);
    cl->nodes_json = j;
    cl->npeers = 0;
    for (unsigned i = 0; cl->peers && i < map->nnodes; i++) {
        if (strcmp(map->nodes[i].name, cl->name) == 0)
            continue;
        struct vpeer *p = &cl->peers[cl->npeers++];
        snprintf(p->name, sizeof(p->name), "%s", map->nodes[i].name);
        snprintf(p->ucx, sizeof(p->ucx), "%s", map->nodes[i].ucx_addr);
    }
    cl->nmap = map->nnodes;
    cl->nup = 0;
    for (unsigned i = 0; i < map->nnodes && cl->nup < OL_CLUSTER_MAX_UP; i++)
        if (strcmp(map->nodes[i].name, cl->name) != 0 && map->nodes[i].state == OL_NODE_UP)
            snprintf(cl->up_s3[cl->nup++], sizeof(cl->up_s3[0]), "%s", map->nodes[i].s3_addr);
    pthread_mutex_unlock(&cl->mu);
}

/* ---- vouching (cluster/member.h, "When etcd is down") ---- */

/* The member's vouch thread: asks each other node of the map whether it
 * reaches etcd (OL_WOP_MEMBER), one after the other. */
static int vouch_ask(void *arg, struct ol_vouch *out, size_t cap, size_t *nmap)
{
    struct ol_cluster *cl = arg;
    pthread_mutex_lock(&cl->mu);
    size_t np = cl->npeers;
    memcpy(cl->vpeers, cl->peers, np * sizeof(*cl->peers));
    *nmap = cl->nmap;
    pthread_mutex_unlock(&cl->mu);
    uint8_t q[4 + OL_MAP_MAX_NAME];
    struct ol_wbuf w = {.p = q, .cap = sizeof(q)};
    ol_wbuf_str(&w, cl->cluster, strlen(cl->cluster));
    size_t n = 0;
    for (size_t i = 0; i < np && n < cap; i++) {
        if (!cl->vpeers[i].ucx[0])
            continue;
        uint8_t rep[VOUCH_REPLY_CAP];
        struct ol_net_call c = {.addr = cl->vpeers[i].ucx,
                                .op = OL_WOP_MEMBER,
                                .timeout_ms = VOUCH_ASK_MS,
                                .ctl = q,
                                .ctl_len = w.len,
                                .rep_ctl = rep,
                                .rep_ctl_cap = sizeof(rep)};
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t asked = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        int rc = ol_net_call(cl->net, &c);
        if (rc < 0 || ol_vouch_decode(rep, c.rep_ctl_len, &out[n]) < 0)
            continue;
        /* An answer from another node than the map has at that address
         * (a restart on a reused port) says nothing about this one. */
        if (strcmp(out[n].name, cl->vpeers[i].name) != 0)
            continue;
        out[n].asked_ns = asked;
        n++;
    }
    return (int)n;
}

/* The drive server's net thread: this node's answer (it must not block). */
static int vouch_answer(void *arg, const char *cluster, void **ctl, size_t *ctl_len)
{
    struct ol_cluster *cl = arg;
    if (strcmp(cluster, cl->cluster) != 0)
        return -EXDEV;
    struct ol_vouch v = {0};
    snprintf(v.name, sizeof(v.name), "%s", cl->name);
    int rc = ol_member_vouch_answer(&v);
    if (rc < 0)
        return rc;
    uint8_t *b = malloc(OL_VOUCH_WIRE_MAX);
    if (!b)
        return -ENOMEM;
    struct ol_wbuf w = {.p = b, .cap = OL_VOUCH_WIRE_MAX};
    ol_vouch_encode(&v, &w);
    OL_ASSERT(!w.over);
    *ctl = b;
    *ctl_len = w.len;
    return 0;
}

int ol_cluster_nodes_json(char *buf, size_t cap)
{
    struct ol_cluster *cl = g_cluster;
    if (!cl || cap == 0)
        return -ENOENT;
    pthread_mutex_lock(&cl->mu);
    int rc = cl->nodes_json ? 0 : -ENOENT;
    if (rc == 0)
        snprintf(buf, cap, "%s", cl->nodes_json);
    pthread_mutex_unlock(&cl->mu);
    return rc;
}

unsigned ol_cluster_peers_s3(char (*out)[128], unsigned max)
{
    struct ol_cluster *cl = g_cluster;
    if (!cl)
        return 0;
    unsigned n = 0;
    pthread_mutex_lock(&cl->mu);
    for (unsigned i = 0; i < cl->nup && n < max; i++)
        snprintf(out[n++], 128, "%s", cl->up_s3[i]);
    pthread_mutex_unlock(&cl->mu);
    return n;
}

/* One look at the map: pools that joined, node states, free space. */
static void follow_once(struct ol_cluster *cl)
{
    struct ol_map map;
    char why[256] = "";
    int rc = ol_map_load(cl->etcd, cl->cluster, &map, why, sizeof(why));
    if (rc < 0) {
        ol_debug("cluster %s: cannot read the map: %s %s", cl->cluster, ol_strerror(rc), why);
        return;
    }
    if (map.epoch > atomic_load(&cl->dp->epoch)) {
        bool all = true;
        for (unsigned p = 0; p < map.npools; p++) {
            const struct ol_map_pool *pl = &map.pools[p];
            if (pool_built(cl, pl->id) || cl->refused == pl->id + 1)
                continue;
            char err[512] = "";
            rc = add_map_pool(cl, &map, pl, err, sizeof(err));
            if (rc == -EINVAL)
                cl->refused = pl->id + 1; /* said once; a restart retries */
            if (rc < 0) {
                all = false;
                ol_warn("cluster %s: cannot add pool %" PRIu32 ": %s", cl->cluster, pl->id,
                        err[0] ? err : ol_strerror(rc));
                break;
            }
            ol_info("cluster %s: node %s added pool %" PRIu32 " (%u sets) at map epoch %" PRIu64,
                    cl->cluster, cl->name, pl->id, pl->nsets, map.epoch);
        }
        if (all)
            atomic_store(&cl->dp->epoch, map.epoch);
    }
    struct states_arg a = {0};
    if (read_live(cl, &a) == 0) {
        struct states_arg probe = a;
        bool differ = mark_states(&probe, &map) == 0; /* on our copy: only asks */
        if (differ) {
            struct ol_map out;
            rc = ol_map_update(cl->etcd, cl->cluster, false, mark_states, &a, MAP_TRIES, &out);
            if (rc == 0) {
                ol_map_free(&map);
                map = out;
            } else if (rc != -EALREADY) {
                ol_debug("cluster %s: cannot mark node states: %s", cl->cluster, ol_strerror(rc));
            }
        }
        free(a.live);
    }
    publish_nodes(cl, &map);
    ol_map_free(&map);
    (void)ol_deploy_refresh_space(cl->dp);
}

static void *map_thread(void *arg)
{
    struct ol_cluster *cl = arg;
    while (!atomic_load(&cl->stop)) {
        follow_once(cl);
        for (unsigned slept = 0; slept < POLL_MS && !atomic_load(&cl->stop); slept += 50)
            usleep(50 * 1000);
    }
    return NULL;
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
    struct ol_net_opts no = {
        .timeout_ms = (unsigned)cfg->drive_timeout_ms, .hlc = &cl->hlc, .key = cl->key};
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
                                     .ndrives = cl->nlocal,
                                     .member = vouch_answer,
                                     .member_arg = cl};
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
    pthread_mutex_init(&cl->mu, NULL);
    cl->peers = calloc(OL_MAP_MAX_NODES, sizeof(*cl->peers));
    cl->vpeers = calloc(OL_MAP_MAX_NODES, sizeof(*cl->vpeers));
    if (!cl->peers || !cl->vpeers) {
        free(cl->peers);
        free(cl->vpeers);
        pthread_mutex_destroy(&cl->mu);
        free(cl);
        return -ENOMEM;
    }
    cl->drive_timeout_ms = (unsigned)cfg->drive_timeout_ms;
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
    /* The key the nodes authenticate each other with (cluster/key.h). */
    rc = ol_cluster_key(etcd, cl->cluster, cfg->cluster_key_file, cl->key, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "cluster %s: no cluster key: %s", cl->cluster, why);
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
        .vouch = vouch_ask,
        .vouch_arg = cl,
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
    ol_info("cluster %s: node %s serves map epoch %" PRIu64 " (%u nodes, %u drives, %u sets, "
            "%u pools)",
            cl->cluster, cl->name, map.epoch, map.nnodes, map.ndrives, map.nsets, map.npools);
    publish_nodes(cl, &map);
    ol_map_free(&map);
    have_map = false;
    /* 6. follow the map: pools that join, node states, free space */
    cl->etcd = etcd;
    etcd = NULL;
    rc = pthread_create(&cl->thread, NULL, map_thread, cl);
    if (rc != 0) {
        rc = -rc;
        snprintf(err, errlen, "cannot start the map thread: %s", strerror(-rc));
        goto fail;
    }
    cl->thread_started = true;
    g_cluster = cl;
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

void ol_cluster_derive_key(const struct ol_cluster *cl, const char *label, uint8_t out[32])
{
    struct ol_bytes m[1] = {{label, strlen(label)}};
    ol_hmac_sha256(cl->key, sizeof(cl->key), m, 1, out);
}

void ol_cluster_close(struct ol_cluster *cl)
{
    if (!cl)
        return;
    if (cl->thread_started) {
        atomic_store(&cl->stop, true);
        pthread_join(cl->thread, NULL);
    }
    if (g_cluster == cl)
        g_cluster = NULL;
    ol_etcd_destroy(cl->etcd);
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
    free(cl->nodes_json);
    free(cl->peers);
    free(cl->vpeers);
    pthread_mutex_destroy(&cl->mu);
    OPENSSL_cleanse(cl->key, sizeof(cl->key));
    free(cl);
}
