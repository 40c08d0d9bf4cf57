/* DeleteObjects (POST /bucket?delete): up to 1000 keys in one request, each
 * deleted on its own, with a result per key (only the errors in Quiet mode).
 *
 * S3 requires Content-MD5 or an x-amz-checksum-* header on this request;
 * newer SDKs send x-amz-checksum-crc32 / -crc64nvme instead of Content-MD5,
 * older ones Content-MD5.  Either is accepted, and so is neither (clients of
 * S3-compatible stores often omit both).  A value that is present is checked.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"
#include "s3/checksum.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "store/store.h"

#define DELETE_MAX_KEYS 1000
/* 1000 keys of 1024 bytes, every byte escaped as an entity, fit in 8 MiB. */
#define DELETE_BODY_MAX (8u << 20)

struct del_obj {
    size_t key_off, key_len;
    size_t ver_off, ver_len; /* ver_len 0: no VersionId */
    bool has_key;
};

struct del_doc {
    struct del_obj *objs;
    size_t n;
    char *names;       /* keys and version ids, copied */
    size_t names_len, names_cap;
    bool quiet, in_obj, bad, too_many;
};

static int del_elem(void *ctx, const char *path, bool start)
{
    struct del_doc *d = ctx;
    if (strcmp(path, "Delete/Object") != 0)
        return 0;
    if (start) {
        if (d->n >= DELETE_MAX_KEYS) {
            d->too_many = true;
            return -E2BIG;
        }
        memset(&d->objs[d->n], 0, sizeof(d->objs[d->n]));
        d->in_obj = true;
    } else {
        if (!d->objs[d->n].has_key)
            d->bad = true;
        d->in_obj = false;
        d->n++;
    }
    return 0;
}

static int del_copy(struct del_doc *d, const char *text, size_t len, size_t *off)
{
    if (d->names_len + len > d->names_cap)
        return -E2BIG;
    memcpy(d->names + d->names_len, text, len);
    *off = d->names_len;
    d->names_len += len;
    return 0;
}

static int del_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct del_doc *d = ctx;
    if (strcmp(path, "Delete/Quiet") == 0) {
        d->quiet = len == 4 && strncasecmp(text, "true", 4) == 0;
        return 0;
    }
    if (!d->in_obj)
        return 0;
    struct del_obj *o = &d->objs[d->n];
    if (strcmp(path, "Delete/Object/Key") == 0) {
        /* Text may arrive in pieces: append to the key being built. */
        if (!o->has_key) {
            o->key_off = d->names_len;
            o->has_key = true;
        }
        size_t off;
        if (del_copy(d, text, len, &off) < 0)
            return -E2BIG;
        o->key_len += len;
    } else if (strcmp(path, "Delete/Object/VersionId") == 0) {
        if (o->ver_len == 0)
            o->ver_off = d->names_len;
        size_t off;
        if (del_copy(d, text, len, &off) < 0)
            return -E2BIG;
        o->ver_len += len;
    }
    return 0;
}

/* Content-MD5 or one x-amz-checksum-* header, when present, must match the
 * body.  Returns 0, or -1 after sending the error. */
static int check_body_digest(struct ol_s3_req *r, const char *body, size_t len)
{
    const struct ol_slice *cm = ol_s3_header(r, "content-md5");
    if (cm) {
        uint8_t want[16], got[16];
        unsigned gl = 0;
        if (ol_b64_decode(cm->p, cm->n, want, sizeof(want)) != 16) {
            ol_s3_error(r, OL_S3_InvalidDigest, "The Content-MD5 you specified is not valid.");
            return -1;
        }
        if (!EVP_Digest(body, len, got, &gl, EVP_md5(), NULL) || memcmp(want, got, 16) != 0) {
            ol_s3_error(r, OL_S3_BadDigest,
                        "The Content-MD5 you specified did not match what we received.");
            return -1;
        }
    }
    for (int a = OL_CK_CRC32; a < OL_CK_COUNT; a++) {
        const char *name = ol_ck_header((enum ol_ck_algo)a);
        const char *v = NULL;
        size_t vl = 0;
        const struct ol_slice *h = ol_s3_header(r, name);
        if (h) {
            v = h->p;
            vl = h->n;
        } else if ((v = ol_s3_body_trailer(r, name)) != NULL) {
            vl = strlen(v);
        }
        if (!v)
            continue;
        uint8_t want[OL_CK_MAX_BYTES], got[OL_CK_MAX_BYTES];
        size_t n = ol_ck_len((enum ol_ck_algo)a);
        if (ol_b64_decode(v, vl, want, sizeof(want)) != (int)n) {
            ol_s3_error(r, OL_S3_InvalidRequest, "The x-amz-checksum- header value is invalid.");
            return -1;
        }
        if (ol_ck_digest((enum ol_ck_algo)a, body, len, got) < 0 || memcmp(want, got, n) != 0) {
            ol_s3_error(r, OL_S3_BadDigest,
                        "The checksum you specified did not match the calculated checksum.");
            return -1;
        }
    }
    return 0;
}

/* One key: deletes it and adds its result to the document. */
static void delete_one(struct ol_s3_req *r, struct ol_xml *x, const struct del_doc *d,
                       const struct del_obj *o)
{
    const char *key = d->names + o->key_off;
    const char *ver = d->names + o->ver_off;
    const char *code = NULL, *msg = NULL;
    char vid[OL_STORE_VID_MAX];
    struct ol_store_del_res res = {{0}, false};
    if (o->key_len == 0 || o->key_len > 1024 || memchr(key, 0, o->key_len)) {
        code = o->key_len > 1024 ? "KeyTooLongError" : "InvalidArgument";
        msg = o->key_len > 1024 ? "Your key is too long." : "The key is not valid.";
    } else if (o->ver_len >= sizeof(vid)) {
        code = "NoSuchVersion";
        msg = "The specified version does not exist.";
    } else if (ol_s3_authorize_key(r, o->ver_len ? "s3:DeleteObjectVersion" : "s3:DeleteObject",
                                   key, o->key_len) != 0) {
        /* Each key is its own request for the bucket's rules (a policy may
         * grant or deny by prefix). */
        code = "AccessDenied";
        msg = "Access Denied";
    } else {
        memcpy(vid, ver, o->ver_len);
        vid[o->ver_len] = 0;
        int rc = ol_obj_delete_v(r->ctx->obj, r->bucket, key, o->key_len,
                                   o->ver_len ? vid : NULL, &res);
        if (rc == -OL_ENOVERSION) {
            code = "NoSuchVersion";
            msg = "The specified version does not exist.";
        } else if (rc < 0) {
            enum ol_s3_code c = ol_s3_code_from_err(rc);
            code = ol_s3_code_name(c);
            msg = c == OL_S3_InternalError ? ol_strerror(rc) : "The object was not deleted.";
        }
    }
    if (code) {
        ol_xml_open(x, "Error");
        ol_xml_text(x, "Key", key, o->key_len);
        if (o->ver_len)
            ol_xml_text(x, "VersionId", ver, o->ver_len);
        ol_xml_str(x, "Code", code);
        ol_xml_str(x, "Message", msg);
        ol_xml_close(x);
    } else if (!d->quiet) {
        ol_xml_open(x, "Deleted");
        ol_xml_text(x, "Key", key, o->key_len);
        if (o->ver_len)
            ol_xml_text(x, "VersionId", ver, o->ver_len);
        if (res.marker)
            ol_xml_str(x, "DeleteMarker", "true");
        if (res.marker && res.vid[0])
            ol_xml_str(x, "DeleteMarkerVersionId", res.vid);
        ol_xml_close(x);
    }
}

int ol_s3_delete_objects(struct ol_s3_req *r)
{
    struct ol_bucket_info bi;
    int rc = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    int64_t clen = ol_s3_body_length(r);
    if (clen > (int64_t)DELETE_BODY_MAX) {
        ol_http_set_close(r->conn);
        return ol_s3_error(r, OL_S3_MalformedXML, "The XML document is too large.");
    }
    char *body = NULL;
    size_t got = 0;
    struct del_doc d = {.objs = calloc(DELETE_MAX_KEYS, sizeof(struct del_obj)),
                        .names = malloc(DELETE_BODY_MAX), .names_cap = DELETE_BODY_MAX};
    if (!d.objs || !d.names) {
        rc = ol_s3_error(r, OL_S3_InternalError, "out of memory");
        goto out;
    }
    rc = ol_s3_read_doc(r, DELETE_BODY_MAX, &body, &got);
    if (rc < 0) {
        ol_http_set_close(r->conn);
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    if (check_body_digest(r, body, got) < 0)
        goto out;
    int prc = ol_xml_parse(body, got, del_elem, del_text, &d);
    if (prc != 0 || d.bad || d.n == 0) {
        rc = ol_s3_error(r, OL_S3_MalformedXML,
                         d.too_many ? "The request must contain no more than 1000 keys."
                                    : "The XML you provided was not well-formed or did not "
                                      "validate against our published schema.");
        goto out;
    }
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "DeleteResult");
    for (size_t i = 0; i < d.n; i++)
        delete_one(r, &x, &d, &d.objs[i]);
    ol_xml_end_doc(&x);
    rc = ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
out:
    free(body);
    free(d.objs);
    free(d.names);
    return rc;
}
