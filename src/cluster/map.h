/* The cluster map: which nodes and drives a cluster has, how its drives are
 * grouped into erasure sets, the pools those sets belong to, and an epoch.
 *
 * Where it lives: one etcd key, OL_MAP_KEY_FMT (/openlake/<cluster>/map),
 * holding the map as JSON.  Every change is a compare-and-swap on the key's
 * mod_revision (the one the writer read), and bumps the epoch by one, so two
 * writers never overwrite each other: the loser gets -OL_ECASFAIL, re-reads
 * and redoes its change (ol_map_update does that loop).  The epoch orders
 * maps for everything that caches one (nodes, clients): a higher epoch is
 * newer.
 *
 * The JSON (format 1):
 *   {"format": 1, "cluster": "c1", "epoch": 7,
 *    "nodes":  [{"name": "n1", "s3": "10.0.0.1:9000", "ucx": "10.0.0.1:13337",
 *                "state": "up", "lease": "7587..."}],
 *    "drives": [{"id": 1, "node": "n1", "path": "/srv/d1", "state": "ok"}],
 *    "sets":   [{"id": 0, "pool": 0, "k": 4, "m": 2, "drives": [1, 5, 9, 2, 6, 10]}],
 *    "pools":  [{"id": 0, "sets": [0, 1]}]}
 * A reader refuses a format it does not know (-OL_EMAP): a newer writer's
 * map is never half-understood.  Unknown fields are ignored (additions that
 * old readers may skip do not need a new format).
 *
 * What a valid map holds (checked on every load and before every store;
 * -OL_EMAP with the first broken rule written to `why`):
 *   - names, paths and addresses are non-empty, of bounded length, unique
 *     (node names; drive ids; (node, path) pairs; set and pool ids)
 *   - every drive's node exists; every drive of a set exists and is in no
 *     other set and no set twice; k and m pass ol_ec_check_geometry
 *   - a set belongs to exactly one pool, the one it names
 *   - spread: when a pool's drives sit on N >= k+m nodes, no node holds two
 *     drives of one set; with fewer nodes, none holds more than
 *     ceil((k+m) / N) of them.  A node lost then costs a set at most that
 *     many shards.
 *
 * Pools are created once (ol_map_add_pool) and never edited: a set's drive
 * list is where objects were placed, so changing it would move data.  A
 * failed drive is marked in its state and healed in place (not built yet).
 *
 * Threads: a map is a plain value owned by its caller; functions that take
 * an ol_etcd block (see cluster/etcd.h: cluster thread only).
 */
#ifndef OL_CLUSTER_MAP_H
#define OL_CLUSTER_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/etcd.h"

#define OL_MAP_KEY_FMT "/openlake/%s/map"

enum {
    OL_MAP_FORMAT = 1,
    OL_MAP_MAX_NAME = 63,  /* cluster and node names */
    OL_MAP_MAX_ADDR = 127, /* S3 and UCX addresses */
    OL_MAP_MAX_PATH = 255, /* drive paths */
    OL_MAP_MAX_NODES = 1024,
    OL_MAP_MAX_DRIVES = 4096, /* = OL_EC_MAX_DRIVES */
    OL_MAP_MAX_SET = 20,      /* k + m, = OL_EC_MAX_UNITS */
    OL_MAP_MAX_SETS = 4096,
    OL_MAP_MAX_POOLS = 64,
};

enum ol_map_node_state { OL_NODE_UP, OL_NODE_DOWN };
enum ol_map_drive_state { OL_DRIVE_OK, OL_DRIVE_OFFLINE, OL_DRIVE_FAILED };

struct ol_map_node {
    char name[OL_MAP_MAX_NAME + 1];
    char s3_addr[OL_MAP_MAX_ADDR + 1];  /* host:port of its S3 endpoint */
    char ucx_addr[OL_MAP_MAX_ADDR + 1]; /* host:port of its drive (UCX) service */
    enum ol_map_node_state state;
    int64_t lease; /* its membership lease, 0: none known */
};

struct ol_map_drive {
    uint32_t id; /* cluster-wide, never reused */
    char node[OL_MAP_MAX_NAME + 1];
    char path[OL_MAP_MAX_PATH + 1];
    enum ol_map_drive_state state;
};

struct ol_map_set {
    uint32_t id;
    uint32_t pool;
    unsigned k, m;
    uint32_t drive[OL_MAP_MAX_SET]; /* drive ids; shard i on drive[i] */
};

struct ol_map_pool {
    uint32_t id;
    unsigned nsets;
    uint32_t *sets; /* set ids, in the order objects are placed over them */
};

struct ol_map {
    char cluster[OL_MAP_MAX_NAME + 1];
    uint64_t epoch;
    int64_t mod_rev; /* etcd mod_revision it was read at, 0: not stored yet */
    struct ol_map_node *nodes;
    struct ol_map_drive *drives;
    struct ol_map_set *sets;
    struct ol_map_pool *pools;
    unsigned nnodes, ndrives, nsets, npools;
};

/* An empty map (epoch 0) of a cluster.  -EINVAL for a bad name. */
int ol_map_init(struct ol_map *map, const char *cluster);
void ol_map_free(struct ol_map *map);

/* Lookups: NULL when absent.  Pointers live until the map next changes. */
struct ol_map_node *ol_map_node(struct ol_map *map, const char *name);
struct ol_map_drive *ol_map_drive(struct ol_map *map, uint32_t id);

/* Adds a node (state up) or a drive (state ok, the next free id in *id).
 * -EEXIST for a duplicate, -EINVAL for bad fields, -ENOENT for a drive of an
 * unknown node, -OL_ETOOLARGE past a limit.  Nothing here touches etcd. */
int ol_map_add_node(struct ol_map *map, const char *name, const char *s3_addr,
                    const char *ucx_addr);
int ol_map_add_drive(struct ol_map *map, const char *node, const char *path, uint32_t *id);

/* Builds a pool of erasure sets of k+m from every drive of the named nodes
 * that is in no set yet, and adds it (its id in *pool_id).  The rule,
 * deterministic (the same nodes and drives give the same sets, whatever the
 * order of `nodes`):
 *   1. nodes are taken in name order, each node's free drives in id order;
 *   2. the sets are filled one after another, each shard slot in turn, from
 *      the node that (a) holds the fewest shards of this set so far, then
 *      (b) has the most free drives left, then (c) comes first by name; it
 *      gives its lowest-id free drive.
 * With equal drive counts this puts every set on k+m different nodes when
 * there are >= k+m nodes (and ceil((k+m)/N) per node with N < k+m), and
 * keeps the nodes' free drives within one of each other as sets are made.
 * The drive count must be a multiple of k+m (-EINVAL, as placement.h
 * refuses idle drives); with unequal counts the spread rule may be
 * impossible to meet, and the result is refused with -OL_EMAP. */
int ol_map_add_pool(struct ol_map *map, const char *const *nodes, unsigned nnodes, unsigned k,
                    unsigned m, uint32_t *pool_id);

/* Checks the rules above.  0 or -OL_EMAP, the first broken rule in why
 * (may be NULL; cap bytes, NUL-terminated). */
int ol_map_validate(const struct ol_map *map, char *why, size_t cap);

/* JSON.  to_json: a malloc'd NUL-terminated string in *json (the caller
 * frees).  from_json: parses and validates into *map (freed and zeroed on
 * failure); -OL_EMAP for bad JSON, a wrong format, or a broken rule (why
 * says which), never a crash; mod_rev is left 0. */
int ol_map_to_json(const struct ol_map *map, char **json, size_t *len);
int ol_map_from_json(const char *json, size_t len, struct ol_map *map, char *why, size_t cap);

/* Reads the cluster's map from etcd into *map (mod_rev set).  -ENOENT when
 * there is none yet, -OL_EMAP when it does not load (why), etcd errors. */
int ol_map_load(struct ol_etcd *c, const char *cluster, struct ol_map *map, char *why, size_t cap);

/* Stores *map with epoch + 1 if the key is still at map->mod_rev (0: only if
 * there is no map yet).  On success map->epoch and map->mod_rev are the new
 * ones; on -OL_ECASFAIL (someone else changed it: re-read) or any error the
 * map is unchanged.  A map that does not validate is refused (-OL_EMAP). */
int ol_map_store(struct ol_etcd *c, struct ol_map *map);

/* Read-modify-write: loads the map (or starts an empty one when there is
 * none and create is true), calls fn to change it, stores it by CAS, and on
 * -OL_ECASFAIL starts over, up to max_tries times (then -OL_ECASFAIL).  fn
 * returns 0 to store, a negative code to give up with it; fn may run more
 * than once, so it must not keep state across runs.  On success *out (may be
 * NULL) receives the stored map (the caller frees it). */
typedef int (*ol_map_change_fn)(void *arg, struct ol_map *map);
int ol_map_update(struct ol_etcd *c, const char *cluster, bool create, ol_map_change_fn fn,
                  void *arg, unsigned max_tries, struct ol_map *out);

const char *ol_map_node_state_name(enum ol_map_node_state s);
const char *ol_map_drive_state_name(enum ol_map_drive_state s);

#endif
