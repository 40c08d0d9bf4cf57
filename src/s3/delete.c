/* DeleteObjects (placeholder until implemented). */
#include "s3/s3.h"

int ol_s3_delete_objects(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented, "DeleteObjects is not implemented yet.");
}
