/* SSE-S3's master key, chosen at start (obj/sse.h, docs/SECURITY.md):
 *   - sse_key_file: the SHA-256 of the file (the same file on every node);
 *   - a cluster without it: derived from the cluster key, so every node
 *     has the same one;
 *   - a single node without it: 32 random bytes made at its first start and
 *     kept in the reserved bucket's setting OL_SSE_MASTER_SETTING (on the
 *     drives, replicated like the users: erasure sets lose it only with the
 *     data).  That key protects nothing from whoever holds the drives; it
 *     makes SSE-S3 work out of the box, and the file is for real use. */
#include "obj/sse_master.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cluster/key.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/hex.h"
#include "core/log.h"
#include "deploy/cluster.h"
#include "obj/obj.h"
#include "obj/sse.h"
#include "obj/sse_pool.h"
#include "users/users.h"

#define OL_SSE_MASTER_SETTING "sse-master"

/* The single node's stored key, made on the first start. */
static int stored_key(struct ol_obj *o, uint8_t key[OL_SSE_KEY], char *err, size_t errlen)
{
    char hex[2 * OL_SSE_KEY + 1];
    ssize_t n = ol_obj_bucket_config_get(o, OL_USERS_BUCKET, OL_SSE_MASTER_SETTING, hex,
                                         sizeof(hex));
    if (n == 2 * OL_SSE_KEY && ol_unhex(hex, (size_t)n, key, OL_SSE_KEY)) {
        OPENSSL_cleanse(hex, sizeof(hex));
        return 0;
    }
    if (n >= 0) {
        snprintf(err, errlen, "the stored SSE master key is damaged (set sse_key_file?)");
        return -OL_ECORRUPT;
    }
    if (n != -OL_ENOCONFIG && n != -OL_ENOBUCKET) {
        snprintf(err, errlen, "reading the SSE master key: %s", ol_strerror((int)n));
        return (int)n;
    }
    if (getrandom(key, OL_SSE_KEY, 0) != (ssize_t)OL_SSE_KEY) {
        snprintf(err, errlen, "no random bytes for the SSE master key");
        return -EIO;
    }
    ol_hex(key, OL_SSE_KEY, hex);
    int rc = ol_obj_bucket_config_put(o, OL_USERS_BUCKET, OL_SSE_MASTER_SETTING, hex,
                                      2 * OL_SSE_KEY);
    if (rc == -OL_ENOBUCKET) {
        rc = ol_obj_bucket_create(o, OL_USERS_BUCKET, ol_wall_ns());
        if (rc == 0 || rc == -OL_EBUCKETEXISTS)
            rc = ol_obj_bucket_config_put(o, OL_USERS_BUCKET, OL_SSE_MASTER_SETTING, hex,
                                          2 * OL_SSE_KEY);
    }
    OPENSSL_cleanse(hex, sizeof(hex));
    if (rc < 0) {
        snprintf(err, errlen, "storing the SSE master key: %s", ol_strerror(rc));
        return rc;
    }
    ol_info("SSE-S3: made a master key and keeps it on the drives; set sse_key_file to keep "
            "it elsewhere");
    return 0;
}

int ol_sse_master_load(struct ol_obj *o, const struct ol_cfg *cfg, const struct ol_cluster *cl,
                       char *err, size_t errlen)
{
    uint8_t key[OL_SSE_KEY];
    int rc = 0;
    err[0] = 0;
    if (cfg->sse_key_file[0])
        rc = ol_key_file_read(cfg->sse_key_file, "sse_key_file", 32, key, err, errlen);
    else if (cl)
        ol_cluster_derive_key(cl, "openlake sse master v1", key);
    else
        rc = stored_key(o, key, err, errlen);
    if (rc == 0)
        ol_obj_set_sse_master(o, key);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc == 0) {
        /* The decrypt pool for large encrypted reads (obj/sse.h,
         * read-ahead).  Without it reads open every window inline. */
        long n = cfg->sse_decrypt_threads;
        if (n < 0)
            n = ol_sse_pool_auto(sysconf(_SC_NPROCESSORS_ONLN));
        if (n > 0 && ol_sse_pool_start((unsigned)n, OL_SSE_AHEAD_BLOCKS_PER_THREAD,
                                       (unsigned)cfg->sse_decrypt_spin_us) < 0)
            ol_warn("SSE: the decrypt pool did not start; encrypted reads open inline");
    }
    return rc;
}
