/* `openlake get` and `openlake put`: objects over the native port
 * (libopenlake, include/openlake/client.h), no HTTP.
 *
 *   openlake get [-q] ENDPOINT BUCKET KEY FILE|-
 *   openlake put [-q] ENDPOINT FILE|- BUCKET KEY
 *
 * ENDPOINT is the node's S3 URL (http://host:port; the native port is
 * found from it) or its native address (host:port).  Credentials come from
 * --access_key/--secret_key, else OPENLAKE_ACCESS_KEY/OPENLAKE_SECRET_KEY,
 * else AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, else the embedded default's.
 * A progress bar goes to stderr when it is a terminal (never with -q).
 * A download goes to FILE.part and is renamed when complete. */
#ifndef OL_CLI_NATIVE_H
#define OL_CLI_NATIVE_H

/* argv[0] is "get" or "put".  Returns 0, 1 on failure (said on stderr), 2
 * on bad arguments. */
int ol_native_cli_main(int argc, char **argv);

#endif
