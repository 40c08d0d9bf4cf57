/* `openlake server`: wires the config, the drive, the loops and the S3
 * listener together and runs until SIGINT/SIGTERM. */
#ifndef OL_SERVER_SERVER_H
#define OL_SERVER_SERVER_H

#include "core/cfg.h"

/* Runs the server; returns the process exit code. */
int ol_server_run(struct ol_cfg *cfg);

#endif
