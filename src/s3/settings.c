#include "obj/obj.h"
#include "s3/settings.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "store/store.h"

static uint64_t ol_s3_settings_generation = 1;

uint64_t ol_s3_settings_gen(void)
{
    return __atomic_load_n(&ol_s3_settings_generation, __ATOMIC_ACQUIRE);
}

void ol_s3_settings_changed(void)
{
    __atomic_fetch_add(&ol_s3_settings_generation, 1, __ATOMIC_RELEASE);
}

int ol_s3_setting_read(const struct ol_s3_ctx *ctx, const char *bucket,
                       const struct ol_s3_setting_doc *d, char **out, size_t *len)
{
    char small[4096];
    char *heap = NULL;
    int ret = 0;
    *out = NULL;
    *len = 0;
    struct ol_obj *st = ctx->obj;
    ssize_t n = ol_obj_bucket_config_get(st, bucket, d->name, small, sizeof(small));
    if (n == -ENOBUFS) {
        heap = malloc(d->stored_max + 1);
        if (!heap) {
            ret = -ENOMEM;
            goto out;
        }
        n = ol_obj_bucket_config_get(st, bucket, d->name, heap, d->stored_max);
    }
    if (n < 0) {
        ret = (int)n;
        goto out;
    }
    if (!heap) {
        heap = malloc((size_t)n + 1);
        if (!heap) {
            ret = -ENOMEM;
            goto out;
        }
        memcpy(heap, small, (size_t)n);
    }
    heap[n] = 0;
    *out = heap;
    *len = (size_t)n;
    heap = NULL;
out:
    free(heap);
    return ret;
}

int ol_s3_setting_put(struct ol_s3_req *r, const struct ol_s3_setting_doc *d)
{
    void *cfg = NULL;
    struct ol_xml x;
    ol_xml_init(&x);
    char *doc = NULL;
    size_t len = 0;
    struct ol_bucket_info bi;
    if (!r->ctx->obj)
        return ol_s3_error(r, OL_S3_NotImplemented, "Bucket settings need a single-drive store.");
    int ret = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    ret = ol_s3_read_doc(r, d->doc_max, &doc, &len);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    enum ol_s3_code code = OL_S3_MalformedXML;
    const char *msg = NULL;
    ret = d->parse(doc, len, &cfg, &code, &msg);
    if (ret == -EINVAL) {
        ret = ol_s3_error(r, code, msg);
        goto out;
    }
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    d->write(cfg, &x);
    if (x.failed || x.len > d->stored_max) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    ret = ol_obj_bucket_config_put(r->ctx->obj, r->bucket, d->name, x.buf, x.len);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    /* Stored: caches drop their copy before this request is answered. */
    ol_s3_settings_changed();
    ret = ol_s3_send_empty(r, 200, NULL, 0);
out:
    ol_xml_free(&x);
    if (cfg)
        d->free(cfg);
    free(doc);
    return ret;
}

int ol_s3_setting_get(struct ol_s3_req *r, const struct ol_s3_setting_doc *d)
{
    char *doc = NULL;
    size_t len = 0;
    int ret = ol_s3_setting_read(r->ctx, r->bucket, d, &doc, &len);
    if (ret == -OL_ENOCONFIG) {
        ret = ol_s3_error(r, d->missing, d->missing_msg);
        goto out;
    }
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    struct ol_xml x = {.buf = doc, .len = len, .cap = len + 1};
    ret = ol_s3_send_xml(r, 200, &x);
out:
    free(doc);
    return ret;
}

int ol_s3_setting_delete(struct ol_s3_req *r, const struct ol_s3_setting_doc *d)
{
    if (!r->ctx->obj)
        return ol_s3_error(r, OL_S3_NotImplemented, "Bucket settings need a single-drive store.");
    int ret = ol_obj_bucket_config_put(r->ctx->obj, r->bucket, d->name, NULL, 0);
    if (ret == -OL_ENOCONFIG)
        ret = 0;
    if (ret == 0)
        ol_s3_settings_changed();
    if (ret < 0)
        return ol_s3_error_from(r, ret);
    return ol_s3_send_empty(r, 204, NULL, 0);
}
