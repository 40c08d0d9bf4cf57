/* CopyObject and UploadPartCopy (placeholder until implemented). */
#include "s3/s3.h"

int ol_s3_copy_object(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "CopyObject is not implemented yet.");
}

int ol_s3_upload_part_copy(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "UploadPartCopy is not implemented yet.");
}
