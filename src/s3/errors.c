/* S3 error codes: the one table that names each code and gives its HTTP
 * status (as Amazon S3 documents them), and the mapping from project errors.
 */
#include "s3/errors.h"

#include <errno.h>
#include <stddef.h>

#include "core/err.h"

struct ol_s3_code_row {
    const char *name;
    int status;
};

#define OL_S3_ROW(code, st) [OL_S3_##code] = {#code, st}

static const struct ol_s3_code_row ol_s3_codes[OL_S3_CODE_COUNT] = {
    OL_S3_ROW(AccessDenied, 403),
    OL_S3_ROW(AccessForbidden, 403),
    OL_S3_ROW(AuthorizationHeaderMalformed, 400),
    OL_S3_ROW(AuthorizationQueryParametersError, 400),
    OL_S3_ROW(BadDigest, 400),
    OL_S3_ROW(BucketAlreadyExists, 409),
    OL_S3_ROW(BucketAlreadyOwnedByYou, 409),
    OL_S3_ROW(BucketNotEmpty, 409),
    OL_S3_ROW(EntityTooLarge, 400),
    OL_S3_ROW(EntityTooSmall, 400),
    OL_S3_ROW(ExpiredToken, 400),
    OL_S3_ROW(IncompleteBody, 400),
    OL_S3_ROW(InternalError, 500),
    OL_S3_ROW(InvalidAccessKeyId, 403),
    OL_S3_ROW(InvalidArgument, 400),
    OL_S3_ROW(InvalidBucketName, 400),
    OL_S3_ROW(InvalidDigest, 400),
    OL_S3_ROW(InvalidPart, 400),
    OL_S3_ROW(InvalidPartOrder, 400),
    OL_S3_ROW(InvalidRange, 416),
    OL_S3_ROW(InvalidRequest, 400),
    OL_S3_ROW(InvalidTag, 400),
    OL_S3_ROW(InvalidURI, 400),
    OL_S3_ROW(KeyTooLongError, 400),
    OL_S3_ROW(MalformedXML, 400),
    OL_S3_ROW(MetadataTooLarge, 400),
    OL_S3_ROW(MethodNotAllowed, 405),
    OL_S3_ROW(MissingContentLength, 411),
    OL_S3_ROW(MissingSecurityHeader, 400),
    OL_S3_ROW(NoSuchBucket, 404),
    OL_S3_ROW(NoSuchCORSConfiguration, 404),
    OL_S3_ROW(NoSuchKey, 404),
    OL_S3_ROW(NoSuchLifecycleConfiguration, 404),
    OL_S3_ROW(NoSuchTagSet, 404),
    OL_S3_ROW(NoSuchUpload, 404),
    OL_S3_ROW(NoSuchVersion, 404),
    OL_S3_ROW(NotImplemented, 501),
    OL_S3_ROW(PreconditionFailed, 412),
    OL_S3_ROW(RequestTimeTooSkewed, 403),
    OL_S3_ROW(RequestTimeout, 400),
    OL_S3_ROW(ServiceUnavailable, 503),
    OL_S3_ROW(SignatureDoesNotMatch, 403),
    OL_S3_ROW(MalformedPolicy, 400),
    OL_S3_ROW(NoSuchBucketPolicy, 404),
    OL_S3_ROW(AccessControlListNotSupported, 400),
    OL_S3_ROW(OwnershipControlsNotFoundError, 404),
    OL_S3_ROW(MalformedACLError, 400),
    OL_S3_ROW(InvalidEncryptionAlgorithmError, 400),
    OL_S3_ROW(ServerSideEncryptionConfigurationNotFoundError, 404),
    OL_S3_ROW(SlowDown, 503),
    OL_S3_ROW(XAmzContentSHA256Mismatch, 400),
    /* S3 has no code for a full store (it never fills).  A 500 or 503 would
     * be wrong twice over: SDKs retry both (botocore, the JS and Java SDKs
     * retry 500/502/503/504 and SlowDown), so a full drive turns every PUT
     * into several full uploads that all fail, and the status hides the
     * cause.  MinIO answers 507 Insufficient Storage (RFC 4918 11.5: "unable
     * to store the representation needed to complete the request") with its
     * own extension code XMinioStorageFull; OpenLake does the same with an
     * X-prefixed code of its own, as S3 extensions are named.  No SDK
     * retries 507, and clients that know MinIO's treat the status the same. */
    OL_S3_ROW(XOpenLakeStorageFull, 507),
};

#undef OL_S3_ROW

static const struct ol_s3_code_row *ol_s3_row(enum ol_s3_code c)
{
    /* An out-of-range code is a bug in the caller; answering InternalError
     * keeps the client informed without crashing a storage node over it. */
    if ((unsigned)c >= OL_S3_CODE_COUNT || !ol_s3_codes[c].name)
        return &ol_s3_codes[OL_S3_InternalError];
    return &ol_s3_codes[c];
}

const char *ol_s3_code_name(enum ol_s3_code c)
{
    return ol_s3_row(c)->name;
}

int ol_s3_code_status(enum ol_s3_code c)
{
    return ol_s3_row(c)->status;
}

enum ol_s3_code ol_s3_code_from_err(int err)
{
    switch (err) {
    case -OL_ENOBUCKET: return OL_S3_NoSuchBucket;
    case -OL_ENOKEY: return OL_S3_NoSuchKey;
    case -OL_ESSENEEDKEY: return OL_S3_InvalidRequest;
    case -OL_ESSEWRONGKEY: return OL_S3_AccessDenied;
    /* A single-tenant store: every existing bucket is the caller's. */
    case -OL_EBUCKETEXISTS: return OL_S3_BucketAlreadyOwnedByYou;
    case -OL_EBUCKETNOTEMPTY: return OL_S3_BucketNotEmpty;
    case -OL_ENOUPLOAD: return OL_S3_NoSuchUpload;
    case -OL_ENOVERSION: return OL_S3_NoSuchVersion;
    case -OL_EMARKER: return OL_S3_MethodNotAllowed;
    case -OL_EINVALIDPART: return OL_S3_InvalidPart;
    case -OL_EPARTORDER: return OL_S3_InvalidPartOrder;
    case -OL_ETOOSMALL: return OL_S3_EntityTooSmall;
    case -OL_ETOOLARGE: return OL_S3_EntityTooLarge;
    case -OL_ESHUTDOWN: return OL_S3_ServiceUnavailable;
    case -OL_ESHA256: return OL_S3_XAmzContentSHA256Mismatch;
    case -OL_ECHUNKSIG: return OL_S3_SignatureDoesNotMatch;
    case -OL_EINCOMPLETE: return OL_S3_IncompleteBody;
    case -ECONNRESET: return OL_S3_IncompleteBody; /* the body ended early */
    case -OL_EBADDIGEST: return OL_S3_BadDigest;
    case -OL_EBADREQUEST: return OL_S3_InvalidRequest;
    case -EPROTO: return OL_S3_InvalidRequest; /* broken chunked framing */
    case -ETIMEDOUT: return OL_S3_RequestTimeout;
    /* ol_xml_parse reports any malformed or refused request document so. */
    case -EBADMSG: return OL_S3_MalformedXML;
    case -ENAMETOOLONG: return OL_S3_KeyTooLongError;
    /* A full drive or quota: 507 (see the table). */
    case -ENOSPC: return OL_S3_XOpenLakeStorageFull;
    case -EDQUOT: return OL_S3_XOpenLakeStorageFull;
    case -OL_ECORRUPT: return OL_S3_InternalError;
    /* Too few drives of an erasure set answered, or the body memory budget
     * stayed short: back off and retry. */
    case -OL_EQUORUM: return OL_S3_SlowDown;
    case -EBUSY: return OL_S3_SlowDown;
    case -ENOTSUP: return OL_S3_NotImplemented;
    default: return OL_S3_InternalError;
    }
}
