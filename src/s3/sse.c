/* Server-side encryption headers and ?encryption: see s3/sse.h. */
#include "s3/sse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/cfg.h"
#include "core/err.h"
#include "core/log.h"
#include "core/md5.h"
#include "obj/obj.h"
#include "s3/checksum.h"
#include "s3/meta.h"
#include "s3/xml.h"

#define ENC_CONFIG "encryption" /* the bucket setting: "AES256" */
#define ENC_DOC_MAX (16u << 10)

static int bad(struct ol_s3_req *r, enum ol_s3_code c, const char *msg)
{
    ol_s3_error(r, c, msg);
    return -1;
}

static bool slice_is(const struct ol_slice *s, const char *lit)
{
    size_t n = strlen(lit);
    return s && s->n == n && memcmp(s->p, lit, n) == 0;
}

int ol_s3_sse_parse(struct ol_s3_req *r, bool copy_source, struct ol_s3_sse *out)
{
    memset(out, 0, sizeof(*out));
    const char *pre = copy_source ? "x-amz-copy-source-server-side-encryption-customer-"
                                  : "x-amz-server-side-encryption-customer-";
    char name[96];
    snprintf(name, sizeof(name), "%salgorithm", pre);
    const struct ol_slice *alg = ol_s3_header(r, name);
    snprintf(name, sizeof(name), "%skey", pre);
    const struct ol_slice *key = ol_s3_header(r, name);
    snprintf(name, sizeof(name), "%skey-md5", pre);
    const struct ol_slice *md5 = ol_s3_header(r, name);
    const struct ol_slice *s3 =
        copy_source ? NULL : ol_s3_header(r, "x-amz-server-side-encryption");
    if (s3) {
        if (slice_is(s3, "aws:kms") || slice_is(s3, "aws:kms:dsse"))
            return bad(r, OL_S3_NotImplemented,
                       "Server-side encryption with KMS keys is not implemented by OpenLake; "
                       "use AES256 (SSE-S3) or SSE-C.");
        if (!slice_is(s3, "AES256"))
            return bad(r, OL_S3_InvalidArgument,
                       "The encryption method specified is not supported");
        if (alg || key || md5)
            return bad(r, OL_S3_InvalidArgument,
                       "Server Side Encryption with Customer provided key is incompatible with "
                       "the encryption method specified");
        out->spec.mode = OL_SSE_S3;
        return 0;
    }
    if (!alg && !key && !md5)
        return 0;
    if (!alg)
        return bad(r, OL_S3_InvalidArgument,
                   "Requests specifying Server Side Encryption with Customer provided keys must "
                   "provide a valid encryption algorithm.");
    if (!slice_is(alg, "AES256"))
        return bad(r, OL_S3_InvalidEncryptionAlgorithmError,
                   "The encryption request you specified is not valid. The valid value is "
                   "AES256.");
    if (!key)
        return bad(r, OL_S3_InvalidArgument,
                   "Requests specifying Server Side Encryption with Customer provided keys must "
                   "provide an appropriate secret key.");
    if (!md5)
        return bad(r, OL_S3_InvalidArgument,
                   "Requests specifying Server Side Encryption with Customer provided keys must "
                   "provide the client calculated MD5 of the secret key.");
    uint8_t k[48];
    if (ol_b64_decode(key->p, key->n, k, sizeof(k)) != OL_SSE_KEY) {
        OPENSSL_cleanse(k, sizeof(k));
        return bad(r, OL_S3_InvalidArgument,
                   "The secret key was invalid for the specified algorithm.");
    }
    uint8_t want[20], got[16];
    ol_md5(k, OL_SSE_KEY, got);
    if (ol_b64_decode(md5->p, md5->n, want, sizeof(want)) != 16 ||
        CRYPTO_memcmp(want, got, 16) != 0) {
        OPENSSL_cleanse(k, sizeof(k));
        return bad(r, OL_S3_InvalidArgument,
                   "The calculated MD5 hash of the key did not match the hash that was "
                   "provided.");
    }
    /* AWS refuses a customer key sent in the clear.  A server with an HTTPS
     * listener does the same on its plain one; a server with no TLS at all
     * (the embedded default, a test) accepts it, and docs/SECURITY.md says
     * why that is only for loopback and trusted networks. */
    if (!r->http->secure && r->ctx->cfg->tls_listen[0]) {
        OPENSSL_cleanse(k, sizeof(k));
        return bad(r, OL_S3_InvalidRequest,
                   "Requests specifying Server Side Encryption with Customer provided keys "
                   "must be made over a secure connection.");
    }
    out->spec.mode = OL_SSE_C;
    memcpy(out->spec.ckey, k, OL_SSE_KEY);
    OPENSSL_cleanse(k, sizeof(k));
    ol_b64_encode(got, 16, out->key_md5);
    return 0;
}

int ol_s3_sse_for_write(struct ol_s3_req *r, struct ol_s3_sse *out)
{
    if (ol_s3_sse_parse(r, false, out) < 0)
        return -1;
    if (out->spec.mode == OL_SSE_NONE && ol_s3_sse_bucket_default(r->ctx->obj, r->bucket))
        out->spec.mode = OL_SSE_S3;
    return 0;
}

bool ol_s3_sse_bucket_default(struct ol_obj *o, const char *bucket)
{
    char v[32];
    ssize_t n = ol_obj_bucket_config_get(o, bucket, ENC_CONFIG, v, sizeof(v) - 1);
    return n == 6 && memcmp(v, "AES256", 6) == 0;
}

bool ol_s3_sse_error(struct ol_s3_req *r, int rc, int *sent)
{
    switch (rc) {
    case -OL_ESSENEEDKEY:
        *sent = ol_s3_error(r, OL_S3_InvalidRequest,
                            "The object was stored using a form of Server Side Encryption. The "
                            "correct parameters must be provided to retrieve the object.");
        return true;
    case -OL_ESSEWRONGKEY:
        *sent = ol_s3_error(r, OL_S3_AccessDenied,
                            "The provided encryption key does not match the one the object was "
                            "encrypted with.");
        return true;
    case -ENOKEY:
        *sent = ol_s3_error(r, OL_S3_InternalError,
                            "The object is encrypted under a master key this server does not "
                            "have (check sse_key_file).");
        return true;
    default:
        return false;
    }
}

int ol_s3_sse_seal(struct ol_s3_req *r, const struct ol_s3_sse *s, char layout, uint8_t *meta,
                   size_t cap, size_t *len, struct ol_sse_obj *obj)
{
    memset(obj, 0, sizeof(*obj));
    if (s->spec.mode == OL_SSE_NONE)
        return 0;
    char entry[OL_SSE_ENTRY_MAX];
    int rc = ol_sse_entry_new(ol_obj_sse_master(r->ctx->obj), &s->spec, layout, entry, obj);
    if (rc == -ENOKEY)
        return bad(r, OL_S3_InternalError,
                   "Server-side encryption needs a master key (sse_key_file); none is set.");
    if (rc < 0)
        return bad(r, OL_S3_InternalError, "The object's data key could not be made.");
    if (ol_s3_meta_add(meta, cap, len, OL_SSE_META, entry, strlen(entry)) < 0) {
        OPENSSL_cleanse(obj, sizeof(*obj));
        ol_s3_meta_error(r, -E2BIG);
        return -1;
    }
    return 0;
}

int ol_s3_sse_upload_key(struct ol_s3_req *r, const uint8_t *umeta, size_t ulen,
                         const struct ol_s3_sse *s, struct ol_sse_obj *obj)
{
    memset(obj, 0, sizeof(*obj));
    const uint8_t *v;
    size_t vl;
    if (ol_s3_meta_get(umeta, ulen, OL_SSE_META, &v, &vl) < 0) {
        if (s->spec.mode == OL_SSE_C)
            return bad(r, OL_S3_InvalidRequest,
                       "The multipart upload was not initiated with Server Side Encryption "
                       "with Customer provided keys.");
        return 0;
    }
    enum ol_sse_mode mode;
    char layout;
    if (ol_sse_entry_peek(v, vl, &mode, &layout) < 0)
        return bad(r, OL_S3_InternalError, "The upload's encryption record is damaged.");
    if (mode == OL_SSE_C && s->spec.mode != OL_SSE_C)
        return bad(r, OL_S3_InvalidRequest,
                   "The multipart upload initiate requested encryption. Subsequent part "
                   "requests must include the appropriate encryption parameters.");
    if (mode == OL_SSE_S3 && s->spec.mode == OL_SSE_C)
        return bad(r, OL_S3_InvalidRequest,
                   "The encryption parameters are not applicable to this upload.");
    int rc = ol_sse_entry_open(v, vl, ol_obj_sse_master(r->ctx->obj),
                               mode == OL_SSE_C ? s->spec.ckey : NULL, obj);
    if (rc == -OL_ESSEWRONGKEY)
        return bad(r, OL_S3_InvalidRequest,
                   "The provided encryption parameters did not match the ones used "
                   "originally.");
    int sent;
    if (rc < 0 && ol_s3_sse_error(r, rc, &sent))
        return -1;
    if (rc < 0)
        return bad(r, OL_S3_InternalError, "The upload's encryption record is damaged.");
    return 0;
}

int ol_s3_sse_unlock(struct ol_s3_req *r, struct ol_obj_reader *rd, const struct ol_s3_sse *s)
{
    enum ol_sse_mode mode = ol_obj_read_sse(rd);
    if (mode != OL_SSE_C) {
        if (s->spec.mode == OL_SSE_C)
            return bad(r, OL_S3_InvalidRequest,
                       "The encryption parameters are not applicable to this object.");
        return 0;
    }
    int sent;
    if (s->spec.mode != OL_SSE_C) {
        ol_s3_sse_error(r, -OL_ESSENEEDKEY, &sent);
        return -1;
    }
    int rc = ol_obj_read_unlock(rd, s->spec.ckey);
    if (rc < 0) {
        if (!ol_s3_sse_error(r, rc, &sent))
            ol_s3_error_from(r, rc);
        return -1;
    }
    return 0;
}

size_t ol_s3_sse_hdrs(enum ol_sse_mode mode, const struct ol_s3_sse *s, struct ol_http_hdr *h)
{
    if (mode == OL_SSE_S3) {
        h[0] = (struct ol_http_hdr){"x-amz-server-side-encryption", "AES256"};
        return 1;
    }
    if (mode == OL_SSE_C && s && s->key_md5[0]) {
        h[0] = (struct ol_http_hdr){"x-amz-server-side-encryption-customer-algorithm", "AES256"};
        h[1] = (struct ol_http_hdr){"x-amz-server-side-encryption-customer-key-MD5", s->key_md5};
        return 2;
    }
    return 0;
}

/* ---- ?encryption ---- */

int ol_s3_get_bucket_encryption(struct ol_s3_req *r)
{
    char v[32];
    ssize_t n = ol_obj_bucket_config_get(r->ctx->obj, r->bucket, ENC_CONFIG, v, sizeof(v) - 1);
    if (n == -OL_ENOCONFIG || n == 0)
        return ol_s3_error(r, OL_S3_ServerSideEncryptionConfigurationNotFoundError,
                           "The server side encryption configuration was not found");
    if (n < 0)
        return ol_s3_error_from(r, (int)n);
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "ServerSideEncryptionConfiguration");
    ol_xml_open(&x, "Rule");
    ol_xml_open(&x, "ApplyServerSideEncryptionByDefault");
    ol_xml_str(&x, "SSEAlgorithm", "AES256");
    ol_xml_close(&x);
    ol_xml_str(&x, "BucketKeyEnabled", "false");
    ol_xml_close(&x);
    ol_xml_end_doc(&x);
    int rc = x.failed ? ol_s3_error_from(r, -ENOMEM) : ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
    return rc;
}

struct enc_doc {
    int rules;
    int algos;
    char algo[32];
    bool bad;
};

static int enc_on_elem(void *ctx, const char *path, bool start)
{
    struct enc_doc *d = ctx;
    if (start && strcmp(path, "ServerSideEncryptionConfiguration/Rule") == 0)
        d->rules++;
    return 0;
}

static int enc_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct enc_doc *d = ctx;
    if (strcmp(path, "ServerSideEncryptionConfiguration/Rule/ApplyServerSideEncryptionByDefault/"
                     "SSEAlgorithm") == 0) {
        d->algos++;
        if (len >= sizeof(d->algo))
            d->bad = true;
        else
            snprintf(d->algo, sizeof(d->algo), "%.*s", (int)len, text);
    }
    return 0;
}

int ol_s3_put_bucket_encryption(struct ol_s3_req *r)
{
    char *doc = NULL;
    size_t len = 0;
    int rc = ol_s3_read_doc(r, ENC_DOC_MAX, &doc, &len);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct enc_doc d;
    memset(&d, 0, sizeof(d));
    rc = ol_xml_parse(doc, len, enc_on_elem, enc_on_text, &d);
    free(doc);
    if (rc < 0 || d.bad || d.rules != 1 || d.algos != 1)
        return ol_s3_error(r, OL_S3_MalformedXML,
                           "The XML you provided was not well-formed or did not validate "
                           "against our published schema.");
    if (strcmp(d.algo, "aws:kms") == 0 || strcmp(d.algo, "aws:kms:dsse") == 0)
        return ol_s3_error(r, OL_S3_NotImplemented,
                           "Server-side encryption with KMS keys is not implemented by "
                           "OpenLake; use AES256.");
    if (strcmp(d.algo, "AES256") != 0)
        return ol_s3_error(r, OL_S3_MalformedXML,
                           "The XML you provided was not well-formed or did not validate "
                           "against our published schema.");
    if (!ol_obj_sse_master(r->ctx->obj))
        return ol_s3_error(r, OL_S3_InternalError,
                           "Server-side encryption needs a master key (sse_key_file); none is "
                           "set.");
    rc = ol_obj_bucket_config_put(r->ctx->obj, r->bucket, ENC_CONFIG, "AES256", 6);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 200, NULL, 0);
}

int ol_s3_delete_bucket_encryption(struct ol_s3_req *r)
{
    int rc = ol_obj_bucket_config_put(r->ctx->obj, r->bucket, ENC_CONFIG, NULL, 0);
    if (rc < 0 && rc != -OL_ENOCONFIG)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 204, NULL, 0);
}
