/* S3 error codes and their HTTP statuses: one table (errors.c). */
#ifndef OL_S3_ERRORS_H
#define OL_S3_ERRORS_H

enum ol_s3_code {
    OL_S3_AccessDenied,
    OL_S3_AccessForbidden,
    OL_S3_AuthorizationHeaderMalformed,
    OL_S3_AuthorizationQueryParametersError,
    OL_S3_BadDigest,
    OL_S3_BucketAlreadyExists,
    OL_S3_BucketAlreadyOwnedByYou,
    OL_S3_BucketNotEmpty,
    OL_S3_EntityTooLarge,
    OL_S3_EntityTooSmall,
    OL_S3_ExpiredToken,
    OL_S3_IncompleteBody,
    OL_S3_InternalError,
    OL_S3_InvalidAccessKeyId,
    OL_S3_InvalidArgument,
    OL_S3_InvalidBucketName,
    OL_S3_InvalidDigest,
    OL_S3_InvalidPart,
    OL_S3_InvalidPartOrder,
    OL_S3_InvalidRange,
    OL_S3_InvalidRequest,
    OL_S3_InvalidTag,
    OL_S3_InvalidURI,
    OL_S3_KeyTooLongError,
    OL_S3_MalformedXML,
    OL_S3_MetadataTooLarge,
    OL_S3_MethodNotAllowed,
    OL_S3_MissingContentLength,
    OL_S3_MissingSecurityHeader,
    OL_S3_NoSuchBucket,
    OL_S3_NoSuchCORSConfiguration,
    OL_S3_NoSuchKey,
    OL_S3_NoSuchLifecycleConfiguration,
    OL_S3_NoSuchTagSet,
    OL_S3_NoSuchUpload,
    OL_S3_NoSuchVersion,
    OL_S3_NotImplemented,
    OL_S3_PreconditionFailed,
    OL_S3_RequestTimeTooSkewed,
    OL_S3_RequestTimeout,
    OL_S3_ServiceUnavailable,
    OL_S3_SignatureDoesNotMatch,
    OL_S3_SlowDown,
    OL_S3_XAmzContentSHA256Mismatch,
    /* A full drive (or erasure set): see errors.c. */
    OL_S3_XOpenLakeStorageFull,
    /* access control (s3/authz.c) */
    OL_S3_MalformedPolicy,
    OL_S3_NoSuchBucketPolicy,
    OL_S3_AccessControlListNotSupported,
    OL_S3_OwnershipControlsNotFoundError,
    OL_S3_MalformedACLError,
    /* encryption (s3/sse.c) */
    OL_S3_InvalidEncryptionAlgorithmError,
    OL_S3_ServerSideEncryptionConfigurationNotFoundError,
    OL_S3_CODE_COUNT,
};

const char *ol_s3_code_name(enum ol_s3_code c);
int ol_s3_code_status(enum ol_s3_code c);
/* Maps a negative store/core error (core/err.h or errno) to an S3 code. */
enum ol_s3_code ol_s3_code_from_err(int err);

#endif
