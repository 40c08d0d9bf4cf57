/* `openlake admin cluster pool|show`: the cluster map's administration
 * (cluster/map.h), straight against etcd.
 *
 *   pool --cluster ENDPOINTS [--cluster_name C] --nodes n1,n2,... --ec_data K
 *        --ec_parity M     builds a pool of K+M sets from the free drives of
 *                          the named nodes (ol_map_add_pool) and prints its sets
 *   show --cluster ENDPOINTS [--cluster_name C]
 *                          prints the map: nodes (up/down from the live
 *                          members), drives, sets, pools, epoch
 */
#ifndef OL_CLI_CLUSTER_H
#define OL_CLI_CLUSTER_H

/* argv[0] is "cluster".  Returns the process exit code. */
int ol_admin_cluster_main(int argc, char **argv);

#endif
