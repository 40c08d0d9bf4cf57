/* Choosing SSE-S3's master key at start: see obj/sse_master.c for where it
 * comes from.  Main thread, before any request. */
#ifndef OL_OBJ_SSE_MASTER_H
#define OL_OBJ_SSE_MASTER_H

#include <stddef.h>

struct ol_obj;
struct ol_cfg;
struct ol_cluster;

/* Sets the layer's master key (ol_obj_set_sse_master).  cl: the cluster,
 * or NULL on a single node.  0, or an error with a reason in err. */
int ol_sse_master_load(struct ol_obj *o, const struct ol_cfg *cfg, const struct ol_cluster *cl,
                       char *err, size_t errlen);

#endif
