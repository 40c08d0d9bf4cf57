/* The native addresses of a cluster's other nodes, for the native port's
 * HELLO (native/server.h, opts.peers): each up node's S3 address, from the
 * map (deploy/cluster.h, ol_cluster_peers_s3), asked once for its native
 * port (GET /_openlake/native) and remembered for OL_NATIVE_PEERS_TTL_MS
 * (a node that did not answer: OL_NATIVE_PEERS_RETRY_MS).  A node whose
 * native port is off, or that cannot be reached, is left out.
 *
 * Threads: any thread; a call may block for up to one HTTP timeout per
 * node it has not asked yet (a worker of the native port, never a loop).
 */
#ifndef OL_NATIVE_PEERS_H
#define OL_NATIVE_PEERS_H

enum {
    OL_NATIVE_PEERS_TTL_MS = 30000,
    OL_NATIVE_PEERS_RETRY_MS = 5000,
    OL_NATIVE_PEERS_HTTP_MS = 1000,
};

/* ol_native_server_opts.peers for a cluster node (arg unused): each node as
 * "host:port" of its lane 0, then ",port" for each further lane it lists
 * (GET /_openlake/native "ports"; as many as fit 127 characters). */
unsigned ol_native_cluster_peers(void *arg, char (*out)[128], unsigned max);
/* ol_native_server_opts.node_addr for a cluster node: the native address
 * (lane 0's) of the map's node `node` (cached as above).  -ENOENT (not in the map),
 * -EHOSTDOWN (the map says down), -EHOSTUNREACH (its port did not
 * answer), -ENOMEM. */
int ol_native_cluster_node_addr(void *arg, const char *node, char out[128]);

#endif
