/* OpenLake error codes.
 *
 * Every function that can fail returns 0 (or a non-negative count) on success
 * and a negative number on failure: either a negated errno (-ENOMEM, -EIO, ...)
 * or one of the project codes below, which live in a reserved range far away
 * from errno values.  ol_strerror() names both kinds.  Nothing sets errno.
 */
#ifndef OL_CORE_ERR_H
#define OL_CORE_ERR_H

enum ol_err {
    OL_ERR_BASE = 10000,
    OL_ECORRUPT,       /* on-disk data failed its checksum */
    OL_ENOBUCKET,      /* bucket does not exist */
    OL_EBUCKETEXISTS,  /* bucket already exists */
    OL_EBUCKETNOTEMPTY,/* bucket still holds objects or uploads */
    OL_ENOKEY,         /* object does not exist */
    OL_ENOUPLOAD,      /* multipart upload id unknown */
    OL_EINVALIDPART,   /* a listed part is missing or its ETag differs */
    OL_EPARTORDER,     /* parts not in ascending order */
    OL_ETOOSMALL,      /* a non-last part is below the minimum size */
    OL_EFORMAT,        /* a drive's format file is missing, foreign or damaged */
    OL_ESHUTDOWN,      /* the server is stopping */
    OL_ETOOLARGE,      /* a size limit was exceeded */
    OL_ESHA256,        /* the body's SHA-256 differs from x-amz-content-sha256 */
    OL_ECHUNKSIG,      /* an aws-chunked chunk signature did not verify */
    OL_EINCOMPLETE,    /* the body ended before its declared length */
    OL_EBADDIGEST,     /* the body's MD5 differs from Content-MD5 */
    OL_EBADREQUEST,    /* malformed body framing or arguments */
    OL_EPRECONDITION,  /* a commit precondition (If-Match / If-None-Match) failed */
    OL_ENOCONFIG,      /* a bucket setting (CORS, lifecycle, tagging...) is not set */
    OL_EQUORUM,        /* too few drives of an erasure set answered or hold the data */
    OL_ENOVERSION,     /* the object version does not exist */
    OL_EMARKER,        /* the version asked for is a delete marker */
    OL_ECASFAIL,       /* a compare-and-swap lost: the key changed since it was read */
    OL_ECOMPACTED,     /* the revision asked for was compacted away: re-read */
    OL_EETCD,          /* etcd refused a request (an error with no closer errno) */
    OL_EMAP,           /* a cluster map is malformed or inconsistent */
    OL_EFENCED,        /* this node lost its lease and may not acknowledge writes */
    OL_ESSENEEDKEY,    /* the object is encrypted with a customer key (SSE-C) none was given for */
    OL_ESSEWRONGKEY,   /* the customer key given is not the object's */
    OL_ERR_END,
};

/* Returns a static string for a negative error (errno or OL_E*). */
const char *ol_strerror(int err);

#endif
