/* lifecycle handlers (placeholders until implemented). */
#include "s3/s3.h"

int ol_s3_get_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "This operation is not implemented yet.");
}

int ol_s3_put_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "This operation is not implemented yet.");
}

int ol_s3_delete_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "This operation is not implemented yet.");
}
