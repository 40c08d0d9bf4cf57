/* The cluster key: the secret that authenticates the nodes of one cluster to
 * each other on the drive protocol (net/auth.h).
 *
 * Where it comes from, in this order:
 *   - cluster_key_file (configuration): the SHA-256 of the file's contents
 *     (at least 16 bytes; leading and trailing white space ignored), the same
 *     file on every node.  The key then never passes through etcd.
 *   - otherwise etcd, OL_KEY_KEY_FMT (/openlake/<cluster>/key): 32 random
 *     bytes (hex) that the first node to start creates (a create-only
 *     transaction: racing first starts agree on one), and every later node
 *     reads.  Whoever may read etcd may then join the cluster; that is the
 *     same trust etcd already holds (whoever writes the map decides where
 *     data goes).  Protect etcd with its own client authentication and TLS
 *     where other tenants reach it.
 *
 * What the key does not do: encrypt.  Shard bytes cross the network in the
 * clear (docs/PROTOCOL.md, "Authentication").
 *
 * Threads: the caller's (it blocks on etcd).
 */
#ifndef OL_CLUSTER_KEY_H
#define OL_CLUSTER_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/etcd.h"

#define OL_KEY_KEY_FMT "/openlake/%s/key"
#define OL_CLUSTER_KEY_BYTES 32

/* The key of cluster (key_file "" for etcd's).  0, or an error with a
 * reason in why: -EINVAL (a key file too short, an etcd key that is not 64
 * hex digits), -errno reading the file, etcd's errors. */
int ol_cluster_key(struct ol_etcd *etcd, const char *cluster, const char *key_file,
                   uint8_t key[OL_CLUSTER_KEY_BYTES], char *why, size_t whylen);
/* A key file (cluster_key_file, sse_key_file): the SHA-256 of its contents,
 * leading and trailing white space ignored, which must hold at least min
 * bytes (and at most 4 KiB).  0, or -EINVAL / -errno with a reason in why
 * naming the setting `what`. */
int ol_key_file_read(const char *path, const char *what, size_t min,
                     uint8_t key[OL_CLUSTER_KEY_BYTES], char *why, size_t whylen);

#endif
