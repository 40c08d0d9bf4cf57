/* Multipart upload handlers: Create, UploadPart, Complete, Abort.
 * (ListParts and ListMultipartUploads are listings: list.c.) */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfg.h"
#include "core/err.h"
#include "s3/meta.h"
#include "s3/s3.h"
#include "store/store.h"

#define MAX_PARTS 10000
#define COMPLETE_BODY_MAX (4u << 20)

int ol_s3_create_multipart(struct ol_s3_req *r)
{
    uint8_t meta[OL_S3_META_MAX];
    int ml = ol_s3_meta_encode(r, meta, sizeof(meta));
    if (ml < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Your metadata headers exceed the maximum allowed metadata size.");
    char id[40];
    int rc = ol_store_upload_create(r->ctx->store, r->bucket, r->key, r->key_len, meta,
                                    (uint32_t)ml, r->now_ns, id);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "InitiateMultipartUploadResult");
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_xml_text(&x, "Key", r->key, r->key_len);
    ol_xml_str(&x, "UploadId", id);
    ol_xml_end_doc(&x);
    rc = ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
    return rc;
}

struct upload_match {
    const struct ol_s3_req *r;
    bool ok;
    uint8_t *meta;      /* when non-NULL, receives a copy of the upload's metadata */
    uint32_t meta_len;
};

static int match_upload(void *ctx, const struct ol_upload_info *u)
{
    struct upload_match *m = ctx;
    m->ok = strcmp(u->bucket, m->r->bucket) == 0 && u->key_len == m->r->key_len &&
            memcmp(u->key, m->r->key, u->key_len) == 0;
    if (m->ok && m->meta && u->meta_len <= OL_S3_META_MAX) {
        memcpy(m->meta, u->meta, u->meta_len);
        m->meta_len = u->meta_len;
    }
    return 0;
}

/* The upload id from the query, if it names an upload of this bucket/key. */
static const char *upload_of_request(struct ol_s3_req *r, int *err, uint8_t *meta,
                                     uint32_t *meta_len)
{
    const struct ol_s3_param *p = ol_s3_param(r, "uploadId");
    *err = -OL_ENOUPLOAD;
    if (!p || p->value_len == 0 || p->value_len >= 40)
        return NULL;
    struct upload_match m = {r, false, meta, 0};
    int rc = ol_store_upload_get(r->ctx->store, p->value, match_upload, &m);
    if (rc < 0) {
        *err = rc;
        return NULL;
    }
    if (!m.ok)
        return NULL;
    if (meta_len)
        *meta_len = m.meta_len;
    return p->value;
}

int ol_s3_upload_part(struct ol_s3_req *r)
{
    const struct ol_s3_param *pn = ol_s3_param(r, "partNumber");
    char *end = NULL;
    long part = pn ? strtol(pn->value, &end, 10) : 0;
    if (!pn || !end || *end || part < 1 || part > MAX_PARTS)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Part number must be an integer between 1 and 10000, inclusive.");
    int err;
    const char *id = upload_of_request(r, &err, NULL, NULL);
    if (!id)
        return ol_s3_error_from(r, err);
    struct ol_store_writer *w;
    char etag[33];
    int rc = ol_s3_receive_body(r, &w, etag);
    if (rc == -EINVAL)
        return ol_s3_error(r, OL_S3_MissingContentLength,
                           "You must provide the Content-Length HTTP header.");
    if (rc == -OL_ETOOLARGE)
        return ol_s3_error(r, OL_S3_EntityTooLarge,
                           "Your proposed upload exceeds the maximum allowed object size.");
    if (rc < 0) {
        if (!ol_http_body_done(r->conn))
            ol_http_set_close(r->conn);
        return ol_s3_error_from(r, rc);
    }
    rc = ol_store_write_commit_part(w, id, (uint32_t)part, etag);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char qetag[40];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    struct ol_http_hdr h[] = {{"ETag", qetag}};
    return ol_s3_send_empty(r, 200, h, 1);
}

/* Parsing the CompleteMultipartUpload document. */
struct complete_doc {
    struct ol_complete_part *parts;
    uint32_t n;
    bool in_part, have_num, have_etag, bad;
};

static int on_elem(void *ctx, const char *path, bool start)
{
    struct complete_doc *d = ctx;
    if (strcmp(path, "CompleteMultipartUpload/Part") != 0)
        return 0;
    if (start) {
        if (d->n >= MAX_PARTS)
            return -E2BIG;
        memset(&d->parts[d->n], 0, sizeof(d->parts[d->n]));
        d->in_part = true;
        d->have_num = d->have_etag = false;
    } else {
        if (!d->have_num || !d->have_etag)
            d->bad = true;
        d->in_part = false;
        d->n++;
    }
    return 0;
}

static int on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct complete_doc *d = ctx;
    if (!d->in_part)
        return 0;
    struct ol_complete_part *p = &d->parts[d->n];
    if (strcmp(path, "CompleteMultipartUpload/Part/PartNumber") == 0) {
        uint64_t v = 0;
        if (len == 0 || len > 6)
            d->bad = true;
        for (size_t i = 0; i < len; i++) {
            if (text[i] < '0' || text[i] > '9')
                d->bad = true;
            v = v * 10 + (uint64_t)(text[i] - '0');
        }
        p->part_no = (uint32_t)v;
        d->have_num = true;
    } else if (strcmp(path, "CompleteMultipartUpload/Part/ETag") == 0) {
        /* Clients send the ETag quoted, sometimes as &quot;. */
        while (len && (*text == '"' || *text == ' ')) {
            text++;
            len--;
        }
        while (len && (text[len - 1] == '"' || text[len - 1] == ' '))
            len--;
        if (len >= sizeof(p->etag))
            d->bad = true;
        else {
            memcpy(p->etag, text, len);
            p->etag[len] = 0;
        }
        d->have_etag = true;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ol_s3_complete_multipart(struct ol_s3_req *r)
{
    int err;
    uint32_t meta_len = 0;
    uint8_t *meta = malloc(OL_S3_META_MAX);
    if (!meta)
        return ol_s3_error(r, OL_S3_InternalError, "out of memory");
    const char *id = upload_of_request(r, &err, meta, &meta_len);
    if (!id) {
        free(meta);
        return ol_s3_error_from(r, err);
    }
    char *body = malloc(COMPLETE_BODY_MAX + 1);
    struct complete_doc d = {.parts = malloc(sizeof(struct ol_complete_part) * MAX_PARTS)};
    int rc = 0;
    if (!body || !d.parts) {
        rc = ol_s3_error(r, OL_S3_InternalError, "out of memory");
        goto out;
    }
    size_t got = 0;
    for (;;) {
        if (got == COMPLETE_BODY_MAX) {
            ol_http_set_close(r->conn);
            rc = ol_s3_error(r, OL_S3_MalformedXML, "The XML document is too large.");
            goto out;
        }
        ssize_t n = ol_s3_body_read(r, body + got, COMPLETE_BODY_MAX - got);
        if (n < 0) {
            ol_http_set_close(r->conn);
            rc = ol_s3_error_from(r, (int)n);
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    body[got] = 0;
    if (ol_xml_parse(body, got, on_elem, on_text, &d) != 0 || d.bad || d.n == 0) {
        rc = ol_s3_error(r, OL_S3_MalformedXML,
                         "The XML you provided was not well-formed or did not validate against "
                         "our published schema.");
        goto out;
    }
    /* The multipart ETag: MD5 over the parts' binary MD5s, then "-N". */
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    for (uint32_t i = 0; i < d.n; i++) {
        uint8_t bin[16];
        const char *e = d.parts[i].etag;
        bool ok = strlen(e) == 32;
        for (int k = 0; ok && k < 16; k++) {
            int h = hexval(e[2 * k]), l = hexval(e[2 * k + 1]);
            ok = h >= 0 && l >= 0;
            bin[k] = (uint8_t)(h << 4 | l);
        }
        if (!ok) {
            EVP_MD_CTX_free(md);
            rc = ol_s3_error(r, OL_S3_InvalidPart,
                             "One or more of the specified parts could not be found.");
            goto out;
        }
        EVP_DigestUpdate(md, bin, 16);
    }
    uint8_t digest[16];
    unsigned dl;
    EVP_DigestFinal_ex(md, digest, &dl);
    EVP_MD_CTX_free(md);

    /* The object takes the metadata given when the upload was created. */
    struct ol_obj_info info = {.mtime_ns = r->now_ns, .nparts = d.n, .meta = meta,
                               .meta_len = meta_len};
    int w = 0;
    for (int k = 0; k < 16; k++)
        w += snprintf(info.etag + w, sizeof(info.etag) - (size_t)w, "%02x", digest[k]);
    snprintf(info.etag + w, sizeof(info.etag) - (size_t)w, "-%u", d.n);
    rc = ol_store_upload_complete(r->ctx->store, id, d.parts, d.n,
                                  (uint64_t)r->ctx->cfg->min_part_bytes, &info);
    if (rc < 0) {
        const char *msg = NULL;
        if (rc == -OL_EINVALIDPART)
            msg = "One or more of the specified parts could not be found. The part may not "
                  "have been uploaded, or the specified entity tag may not match the part's "
                  "entity tag.";
        else if (rc == -OL_EPARTORDER)
            msg = "The list of parts was not in ascending order. Parts must be ordered by part "
                  "number.";
        else if (rc == -OL_ETOOSMALL)
            msg = "Your proposed upload is smaller than the minimum allowed size.";
        rc = msg ? ol_s3_error(r, ol_s3_code_from_err(rc), msg) : ol_s3_error_from(r, rc);
        goto out;
    }
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "CompleteMultipartUploadResult");
    char loc[160];
    snprintf(loc, sizeof(loc), "/%s/", r->bucket);
    ol_xml_str(&x, "Location", loc);
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_xml_text(&x, "Key", r->key, r->key_len);
    char qetag[72];
    snprintf(qetag, sizeof(qetag), "\"%s\"", info.etag);
    ol_xml_str(&x, "ETag", qetag);
    ol_xml_end_doc(&x);
    rc = ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
out:
    free(meta);
    free(body);
    free(d.parts);
    return rc;
}

int ol_s3_abort_multipart(struct ol_s3_req *r)
{
    int err;
    const char *id = upload_of_request(r, &err, NULL, NULL);
    if (!id)
        return ol_s3_error_from(r, err);
    int rc = ol_store_upload_abort(r->ctx->store, id);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 204, NULL, 0);
}
