/* A node of an OpenLake cluster (`openlake server --cluster ENDPOINTS`).
 *
 * The node serves its local directories to the other nodes as drives
 * (net/drive_server.h over UCX), registers itself in etcd (cluster/member.h:
 * a lease, self-fencing), records itself and its drives in the cluster map
 * (cluster/map.h), waits until an admin has built a pool that holds its
 * drives (`openlake admin cluster pool`), and then builds one erasure-coded
 * deployment (deploy/deploy.h) over every set of every pool of the map: its
 * own drives local (ec/storedrive.h), the others' remote (ec/remotedrive.h).
 * Every node so serves S3 for every key through the same object layer;
 * docs/ARCHITECTURE.md, "Cluster".
 *
 * Drive identity.  A node's drives keep their map ids over restarts (found
 * by (node, path)); a node serves them in the order of their ids, which
 * must be the order of the directories given (a start with the directories
 * in another order, or missing one of them, is refused).  Every local drive
 * is checked and stamped as in docs/EC.md 6.5, with the deployment id
 * derived from the cluster name (ol_cluster_deploy_id) and its position in
 * the deployment: a directory of another cluster or deployment is refused.
 *
 * Pools.  Each pool of the map is a placement domain of the deployment
 * (deploy/deploy.h): a key hashes to a set within the pool that holds it,
 * and a new key goes to a pool by free space.  A drive's identity is its
 * position in its pool and the pool's drive count (so pool 0 keeps the
 * identities a one-pool cluster always had).  All sets must share k and m
 * for now (a pool of another geometry is refused, logged).
 *
 * Following the map.  After the start the map thread (one pthread, the
 * only user of its etcd client) reads the map every second and
 *   - adds the pools it has not built yet (a higher epoch told it), with
 *     remote drives to the new nodes (local ones where they are this
 *     node's); the buckets are created on the new drives first; the pool
 *     is then published to the running deployment (ol_deploy_add_pool: no
 *     lock, requests in flight see the old pools or the new ones);
 *   - marks down every node of the map that has no membership key (its
 *     lease expired: cluster/member.h) and up every one that has, by CAS
 *     (ol_map_update; any live node may do it, several at once only cost a
 *     retry);
 *   - measures the free space of every pool's drives (the pool choice of
 *     new keys).
 * Old objects are never moved (no rebalancing).
 *
 * Threads: open and close from the main thread, before the loops start and
 * after they stopped (close stops the map thread first).
 */
#ifndef OL_DEPLOY_CLUSTER_H
#define OL_DEPLOY_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct ol_cfg;
struct ol_deploy;
struct ol_store_opts;
struct ol_cluster;

/* Starts the node as above (cfg->cluster, node, cluster_name, drive_listen,
 * drive_timeout_ms, cluster_wait_ms); dirs are its data directories.  On
 * error writes a message (naming the directory, the node or the map) into
 * err.  -ETIMEDOUT when no pool held the node's drives within
 * cluster_wait_ms. */
int ol_cluster_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                    const struct ol_store_opts *so, struct ol_cluster **out, char *err,
                    size_t errlen);
/* The deployment (owned by the cluster). */
struct ol_deploy *ol_cluster_deploy(struct ol_cluster *cl);
/* A key derived from the cluster key (cluster/key.h) for one purpose,
 * named by label: HMAC-SHA256(cluster key, label).  The same on every node. */
void ol_cluster_derive_key(const struct ol_cluster *cl, const char *label, uint8_t out[32]);
/* Leaves the cluster (revokes the lease), stops serving drives, closes. */
void ol_cluster_close(struct ol_cluster *cl);

/* The map's nodes as the map thread last saw them, a JSON array of
 * {"name","state","s3"}, into buf (truncated to cap).  Any thread.  0, or
 * -ENOENT when this process is no cluster node. */
int ol_cluster_nodes_json(char *buf, size_t cap);
/* The S3 addresses (host:port) of the map's other nodes that are up, as
 * the map thread last saw them, into out (at most max).  Any thread.
 * Returns how many (0 when this process is no cluster node). */
unsigned ol_cluster_peers_s3(char (*out)[128], unsigned max);

/* "h1:p1,http://h2:p2" -> "http://h1:p1,http://h2:p2" (what cluster/etcd.h
 * takes).  0 or -EINVAL (empty, too long for cap). */
int ol_cluster_endpoints(const char *in, char *out, size_t cap);
/* The placement key of a cluster: the first 16 bytes of MD5("openlake
 * cluster " + name); stable, the same on every node. */
void ol_cluster_deploy_id(const char *cluster, uint8_t id[16]);

#endif
