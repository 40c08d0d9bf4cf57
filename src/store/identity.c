/* The drive's identity: see the "drive identity" section of store/store.h.
 *
 * The identity lives in the FORMAT file (store/format.h); the store keeps a
 * copy in st->fmt, read at open.  Other threads read st->fmt.drive_id (the
 * segment code) without a lock: this file never writes that field, only the
 * deployment id and the EC fields, under identity_mu. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "store/index.h"
#include "store/store_internal.h"

/* One lock for every store: identities change a handful of times in a
 * process's life (EC start, a drive coming back), and it also keeps two
 * rewrites of one drive's FORMAT.tmp from interleaving. */
static pthread_mutex_t identity_mu = PTHREAD_MUTEX_INITIALIZER;

int ol_store_identity(struct ol_store *st, struct ol_store_identity *out)
{
    OL_ASSERT(st && out);
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&identity_mu);
    memcpy(out->deployment_id, st->fmt.deployment_id, sizeof(out->deployment_id));
    memcpy(out->drive_id, st->fmt.drive_id, sizeof(out->drive_id));
    out->ec_joined = st->fmt.ec_joined != 0;
    out->ec_index = st->fmt.ec_index;
    out->ec_ndrives = st->fmt.ec_ndrives;
    out->ec_k = st->fmt.ec_k;
    out->ec_m = st->fmt.ec_m;
    pthread_mutex_unlock(&identity_mu);
    /* A bucket is the root of all data (objects and uploads live in one), so
     * an empty buckets database means an empty drive. */
    MDB_txn *txn = NULL;
    int rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_stat ms;
    rc = ol_mdb_err(mdb_stat(txn, st->db_buckets, &ms));
    if (rc == 0)
        out->has_data = ms.ms_entries > 0;
    mdb_txn_abort(txn);
    return rc;
}

int ol_store_set_identity(struct ol_store *st, const struct ol_store_identity *in)
{
    OL_ASSERT(st && in);
    if (in->ec_joined && (in->ec_ndrives == 0 || in->ec_index >= in->ec_ndrives || in->ec_k == 0 ||
                          (unsigned)in->ec_k + in->ec_m > 255))
        return -EINVAL;
    pthread_mutex_lock(&identity_mu);
    struct ol_format f = st->fmt;
    memcpy(f.deployment_id, in->deployment_id, sizeof(f.deployment_id));
    f.ec_joined = in->ec_joined ? 1 : 0;
    f.ec_index = in->ec_joined ? in->ec_index : 0;
    f.ec_ndrives = in->ec_joined ? in->ec_ndrives : 0;
    f.ec_k = in->ec_joined ? in->ec_k : 0;
    f.ec_m = in->ec_joined ? in->ec_m : 0;
    f.ec_pad = 0;
    /* The file first: the copy in memory changes only once the new identity
     * is durable, so a failed rewrite leaves both as they were. */
    int rc = ol_format_write(st->dir_fd, &f);
    if (rc == 0) {
        memcpy(st->fmt.deployment_id, f.deployment_id, sizeof(f.deployment_id));
        st->fmt.ec_joined = f.ec_joined;
        st->fmt.ec_index = f.ec_index;
        st->fmt.ec_ndrives = f.ec_ndrives;
        st->fmt.ec_k = f.ec_k;
        st->fmt.ec_m = f.ec_m;
        st->fmt.ec_pad = 0;
    }
    pthread_mutex_unlock(&identity_mu);
    if (rc)
        ol_error("store %s: cannot rewrite FORMAT with the drive's identity: %s", st->dir,
                 ol_strerror(rc));
    return rc;
}
