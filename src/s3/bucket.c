/* Bucket handlers: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
 * GetBucketLocation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfg.h"
#include "core/err.h"
#include "core/log.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "s3/settings.h"
#include "store/store.h"

/* CreateBucketConfiguration is a few hundred bytes; anything far larger is
 * not one, and reading it would only tie up memory. */
#define OL_S3_MAX_CONFIG_BODY (64u << 10)

static const char *ol_s3_region(const struct ol_s3_req *r)
{
    const struct ol_cfg *cfg = r->ctx ? r->ctx->cfg : NULL;
    return cfg && cfg->region[0] ? cfg->region : "us-east-1";
}

/* Region names are short runs of lowercase letters, digits and dashes. */
static bool ol_s3_region_name_ok(const char *s)
{
    size_t n = strnlen(s, 64);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static const char *ol_s3_owner(const struct ol_s3_req *r)
{
    return r->access_key ? r->access_key : "anonymous";
}

static int ol_s3_send_doc(struct ol_s3_req *r, struct ol_xml *x)
{
    if (x->failed)
        return ol_s3_error_from(r, -ENOMEM);
    return ol_s3_send_xml(r, 200, x);
}

/* ---- ListBuckets ---- */

struct ol_s3_list_ctx {
    struct ol_s3_req *r;
    struct ol_xml *x;
};

static int ol_s3_list_one_bucket(void *ctx, const struct ol_bucket_info *b)
{
    struct ol_xml *x = ((struct ol_s3_list_ctx *)ctx)->x;
    /* The server's own buckets ('.': users/users.h) are nobody's. */
    if (b->name[0] == '.')
        return 0;
    /* A user sees the buckets they own (an admin: all of them), as in S3. */
    if (!ol_s3_lists_bucket(((struct ol_s3_list_ctx *)ctx)->r, b->name))
        return 0;
    char date[32];
    ol_s3_iso_date(b->ctime_ns, date);
    ol_xml_open(x, "Bucket");
    ol_xml_text(x, "Name", b->name, strnlen(b->name, sizeof(b->name)));
    ol_xml_str(x, "CreationDate", date);
    ol_xml_close(x);
    /* A failed document will not be sent: stop walking the buckets. */
    return x->failed ? 1 : 0;
}

int ol_s3_list_buckets(struct ol_s3_req *r)
{
    struct ol_xml x;
    int ret;

    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "ListAllMyBucketsResult");
    ol_xml_open(&x, "Owner");
    ol_xml_str(&x, "ID", ol_s3_owner(r));
    ol_xml_str(&x, "DisplayName", ol_s3_owner(r));
    ol_xml_close(&x);
    ol_xml_open(&x, "Buckets");
    struct ol_s3_list_ctx lc = {r, &x};
    ret = ol_obj_bucket_list(r->ctx->obj, ol_s3_list_one_bucket, &lc);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    ol_xml_end_doc(&x);
    ret = ol_s3_send_doc(r, &x);
out:
    ol_xml_free(&x);
    return ret;
}

/* ---- CreateBucket ---- */

/* Reads the optional CreateBucketConfiguration body (at most
 * OL_S3_MAX_CONFIG_BODY bytes) into *out; *len is 0 for an empty body. */
static int ol_s3_read_config_body(struct ol_s3_req *r, char **out, size_t *len)
{
    char *buf = NULL;
    size_t got = 0;
    int ret = 0;

    *out = NULL;
    *len = 0;
    int64_t declared = ol_s3_body_length(r);
    if (declared == 0)
        goto out;
    if (declared > (int64_t)OL_S3_MAX_CONFIG_BODY) {
        ret = -EBADMSG;
        goto out;
    }
    buf = malloc(OL_S3_MAX_CONFIG_BODY + 1);
    if (!buf) {
        ret = -ENOMEM;
        goto out;
    }
    /* Each round reads at least one byte or ends, and one byte past the
     * limit is enough to tell that the body is too large. */
    for (size_t i = 0; i <= OL_S3_MAX_CONFIG_BODY; i++) {
        ssize_t n = ol_s3_body_read(r, buf + got, OL_S3_MAX_CONFIG_BODY + 1 - got);
        if (n < 0) {
            ret = (int)n;
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got > OL_S3_MAX_CONFIG_BODY) {
            ret = -EBADMSG;
            goto out;
        }
    }
    *out = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    return ret;
}

static bool ol_s3_all_space(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

int ol_s3_create_bucket(struct ol_s3_req *r)
{
    char *body = NULL;
    size_t body_len = 0;
    int ret;

    if (!ol_s3_bucket_name_valid(r->bucket)) {
        ret = ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
        goto out;
    }
    ret = ol_s3_read_config_body(r, &body, &body_len);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    /* The configuration only names a location.  This server has one region,
     * and clients configured for another one still expect their bucket, so
     * the document is checked for well-formedness and otherwise ignored. */
    if (body_len && !ol_s3_all_space(body, body_len)) {
        ret = ol_xml_parse(body, body_len, NULL, NULL, NULL);
        if (ret < 0) {
            ret = ol_s3_error(r, OL_S3_MalformedXML,
                              "The XML you provided was not well-formed or did not validate "
                              "against our published schema.");
            goto out;
        }
    }
    struct ol_access_bucket rec;
    bool refused;
    ret = ol_s3_bucket_access_parse(r, &rec, &refused);
    if (refused)
        goto out;
    ret = ol_obj_bucket_create(r->ctx->obj, r->bucket, r->now_ns);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    ol_s3_bucket_created(r, &rec);
    /* Cached settings of an earlier bucket of this name go stale. */
    ol_s3_settings_changed();
    char location[72];
    snprintf(location, sizeof(location), "/%s", r->bucket);
    const struct ol_http_hdr hdrs[] = {{"Location", location}};
    ret = ol_s3_send_empty(r, 200, hdrs, 1);
out:
    free(body);
    return ret;
}

/* ---- HeadBucket, DeleteBucket, GetBucketLocation ---- */

int ol_s3_head_bucket(struct ol_s3_req *r)
{
    struct ol_bucket_info bi;
    int ret = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (ret < 0)
        return ol_s3_error_from(r, ret);
    const struct ol_http_hdr hdrs[] = {{"x-amz-bucket-region", ol_s3_region(r)}};
    return ol_s3_send_empty(r, 200, hdrs, 1);
}

int ol_s3_delete_bucket(struct ol_s3_req *r)
{
    int ret = ol_obj_bucket_delete(r->ctx->obj, r->bucket);
    if (ret < 0)
        return ol_s3_error_from(r, ret);
    /* Its settings go with it: caches (cors.c, access/) drop their copies. */
    ol_s3_settings_changed();
    ol_access_changed();
    return ol_s3_send_empty(r, 204, NULL, 0);
}

int ol_s3_get_bucket_location(struct ol_s3_req *r)
{
    struct ol_bucket_info bi;
    struct ol_xml x;
    int ret;

    ol_xml_init(&x);
    ret = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    /* S3 answers an empty constraint for us-east-1, the region's name
     * otherwise, as the text of the root element itself.  The writer only
     * puts text into child elements, so this one document is formatted here;
     * the region comes from the configuration, and anything but the
     * characters of a region name is left out rather than escaped. */
    const char *region = ol_s3_region(r);
    if (strcmp(region, "us-east-1") == 0 || !ol_s3_region_name_ok(region))
        region = "";
    size_t cap = 256;
    x.buf = malloc(cap);
    if (!x.buf) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    x.cap = cap;
    int n = snprintf(x.buf, cap,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                     "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s</LocationConstraint>",
                     region);
    OL_ASSERT(n > 0 && (size_t)n < cap);
    x.len = (size_t)n;
    ret = ol_s3_send_doc(r, &x);
out:
    ol_xml_free(&x);
    return ret;
}
