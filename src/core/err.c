#include "core/err.h"

#include <string.h>

static const char *const ol_err_names[] = {
    [OL_ECORRUPT - OL_ERR_BASE] = "data failed its checksum",
    [OL_ENOBUCKET - OL_ERR_BASE] = "no such bucket",
    [OL_EBUCKETEXISTS - OL_ERR_BASE] = "bucket exists",
    [OL_EBUCKETNOTEMPTY - OL_ERR_BASE] = "bucket not empty",
    [OL_ENOKEY - OL_ERR_BASE] = "no such key",
    [OL_ENOUPLOAD - OL_ERR_BASE] = "no such upload",
    [OL_EINVALIDPART - OL_ERR_BASE] = "invalid part",
    [OL_EPARTORDER - OL_ERR_BASE] = "invalid part order",
    [OL_ETOOSMALL - OL_ERR_BASE] = "part too small",
    [OL_EFORMAT - OL_ERR_BASE] = "bad drive format",
    [OL_ESHUTDOWN - OL_ERR_BASE] = "shutting down",
    [OL_ETOOLARGE - OL_ERR_BASE] = "too large",
    [OL_ESHA256 - OL_ERR_BASE] = "payload SHA-256 mismatch",
    [OL_ECHUNKSIG - OL_ERR_BASE] = "chunk signature mismatch",
    [OL_EINCOMPLETE - OL_ERR_BASE] = "incomplete body",
    [OL_EBADDIGEST - OL_ERR_BASE] = "Content-MD5 mismatch",
    [OL_EBADREQUEST - OL_ERR_BASE] = "bad request",
    [OL_EPRECONDITION - OL_ERR_BASE] = "precondition failed",
    [OL_ENOCONFIG - OL_ERR_BASE] = "setting not configured",
    [OL_EQUORUM - OL_ERR_BASE] = "erasure set quorum not reached",
    [OL_ENOVERSION - OL_ERR_BASE] = "object version does not exist",
    [OL_EMARKER - OL_ERR_BASE] = "version is a delete marker",
    [OL_ECASFAIL - OL_ERR_BASE] = "compare-and-swap lost",
    [OL_ECOMPACTED - OL_ERR_BASE] = "revision compacted",
    [OL_EETCD - OL_ERR_BASE] = "etcd refused the request",
    [OL_EMAP - OL_ERR_BASE] = "invalid cluster map",
    [OL_EFENCED - OL_ERR_BASE] = "node fenced (lease lost)",
    [OL_ESSENEEDKEY - OL_ERR_BASE] = "object encrypted with a customer key: give the key",
    [OL_ESSEWRONGKEY - OL_ERR_BASE] = "not the customer key the object was encrypted with",
};

const char *ol_strerror(int err)
{
    int e = err < 0 ? -err : err;
    if (e > OL_ERR_BASE && e < OL_ERR_END)
        return ol_err_names[e - OL_ERR_BASE];
    return strerror(e);
}
