/* Object handlers: PutObject, GetObject / HeadObject, DeleteObject, and the
 * body receiver that PutObject and UploadPart share. */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/cfg.h"
#include "core/err.h"
#include "core/log.h"
#include "s3/meta.h"
#include "s3/s3.h"
#include "store/store.h"

#define RECV_CHUNK_BYTES (1024 * 1024)

static void hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

/* Content-MD5 is base64 of the 16-byte digest. */
static int check_content_md5(const struct ol_s3_req *r, const uint8_t md5[16])
{
    const struct ol_slice *cm = ol_s3_header(r, "content-md5");
    if (!cm)
        return 0;
    unsigned char dec[32];
    if (cm->n != 24)
        return -OL_EBADDIGEST;
    int n = EVP_DecodeBlock(dec, (const unsigned char *)cm->p, (int)cm->n);
    if (n != 18 || memcmp(dec, md5, 16) != 0) /* 24 chars decode to 18 bytes incl. padding */
        return -OL_EBADDIGEST;
    return 0;
}

int ol_s3_receive_body(struct ol_s3_req *r, struct ol_store_writer **out, char md5_hex[33])
{
    int64_t len = ol_s3_body_length(r);
    const struct ol_cfg *cfg = r->ctx->cfg;
    if (len < 0 && !r->http->chunked && !r->body_decoder)
        return -EINVAL;
    if (len > cfg->max_object_bytes)
        return -OL_ETOOLARGE;
    struct ol_store_writer *w = NULL;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t *buf = ol_buf_alloc(RECV_CHUNK_BYTES);
    int rc = -ENOMEM;
    if (!md || !buf || !EVP_DigestInit_ex(md, EVP_md5(), NULL))
        goto fail;
    rc = ol_store_write_begin(r->ctx->store, len, &w);
    if (rc < 0)
        goto fail;
    uint64_t total = 0;
    /* Bounded by the body: every round consumes bytes or ends. */
    for (;;) {
        ssize_t n = ol_s3_body_read(r, buf, RECV_CHUNK_BYTES);
        if (n < 0) {
            rc = (int)n;
            goto fail;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > (uint64_t)cfg->max_object_bytes) {
            rc = -OL_ETOOLARGE;
            goto fail;
        }
        EVP_DigestUpdate(md, buf, (size_t)n);
        rc = ol_store_write(w, buf, (size_t)n);
        if (rc < 0)
            goto fail;
    }
    if (len >= 0 && total != (uint64_t)len) {
        rc = -OL_EINCOMPLETE;
        goto fail;
    }
    uint8_t digest[16];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, digest, &dl);
    rc = check_content_md5(r, digest);
    if (rc < 0)
        goto fail;
    hex(digest, 16, md5_hex);
    EVP_MD_CTX_free(md);
    ol_buf_free(buf, RECV_CHUNK_BYTES);
    *out = w;
    return 0;
fail:
    if (w)
        ol_store_write_abort(w);
    EVP_MD_CTX_free(md);
    ol_buf_free(buf, RECV_CHUNK_BYTES);
    return rc;
}

int ol_s3_put_object(struct ol_s3_req *r)
{
    if (ol_s3_body_length(r) < 0 && !r->http->chunked)
        return ol_s3_error(r, OL_S3_MissingContentLength,
                           "You must provide the Content-Length HTTP header.");
    uint8_t meta[OL_S3_META_MAX];
    int ml = ol_s3_meta_encode(r, meta, sizeof(meta));
    if (ml < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Your metadata headers exceed the maximum allowed metadata size.");
    struct ol_bucket_info bi;
    int rc = ol_store_bucket_get(r->ctx->store, r->bucket, &bi);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_store_writer *w;
    char etag[33];
    rc = ol_s3_receive_body(r, &w, etag);
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
    struct ol_obj_info info = {
        .mtime_ns = r->now_ns,
        .meta = meta,
        .meta_len = (uint32_t)ml,
    };
    snprintf(info.etag, sizeof(info.etag), "%s", etag);
    rc = ol_store_write_commit_object(w, r->bucket, r->key, r->key_len, &info);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char qetag[40];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    struct ol_http_hdr h[] = {{"ETag", qetag}};
    return ol_s3_send_empty(r, 200, h, 1);
}

/* Parses a single-range "bytes=..." header against size.  Returns 1 with
 * [*start, *end] (inclusive) for a satisfiable range, 0 to ignore the header
 * (absent, malformed or several ranges: S3 then sends the whole object), or
 * -1 for an unsatisfiable one (416). */
static int parse_range(const struct ol_slice *h, uint64_t size, uint64_t *start, uint64_t *end)
{
    if (!h || h->n < 7 || strncasecmp(h->p, "bytes=", 6) != 0)
        return 0;
    const char *p = h->p + 6, *e = h->p + h->n;
    if (memchr(p, ',', (size_t)(e - p)))
        return 0;
    uint64_t a = 0, b = 0;
    bool has_a = false, has_b = false;
    while (p < e && *p >= '0' && *p <= '9') {
        if (a > (UINT64_MAX - 9) / 10)
            return 0;
        a = a * 10 + (uint64_t)(*p++ - '0');
        has_a = true;
    }
    if (p >= e || *p != '-')
        return 0;
    p++;
    while (p < e && *p >= '0' && *p <= '9') {
        if (b > (UINT64_MAX - 9) / 10)
            return 0;
        b = b * 10 + (uint64_t)(*p++ - '0');
        has_b = true;
    }
    if (p != e || (!has_a && !has_b))
        return 0;
    if (!has_a) { /* suffix: the last b bytes */
        if (b == 0 || size == 0)
            return -1;
        *start = b >= size ? 0 : size - b;
        *end = size - 1;
        return 1;
    }
    if (has_b && b < a)
        return 0;
    if (a >= size)
        return -1;
    *start = a;
    *end = (!has_b || b >= size) ? size - 1 : b;
    return 1;
}

int ol_s3_get_object(struct ol_s3_req *r)
{
    struct ol_store_reader *rd = NULL;
    int rc = ol_store_read_open(r->ctx->store, r->bucket, r->key, r->key_len, &rd);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    const struct ol_obj_info *info = ol_store_read_info(rd);
    uint64_t start = 0, end = info->size ? info->size - 1 : 0;
    int ranged = parse_range(ol_s3_header(r, "range"), info->size, &start, &end);
    char crange[96];
    if (ranged < 0) {
        ol_store_read_close(rd);
        return ol_s3_error(r, OL_S3_InvalidRange, "The requested range is not satisfiable");
    }
    uint64_t len = info->size == 0 ? 0 : end - start + 1;

    /* Read the first piece before the headers go out, so a checksum failure
     * at the start is a clean 500 rather than a cut-off body. */
    const uint8_t *data = NULL;
    ssize_t n = 0;
    if (len > 0 && !r->http->is_head) {
        n = ol_store_read(rd, start, len, &data);
        if (n <= 0) {
            ol_store_read_close(rd);
            if (n == 0)
                n = -EIO;
            return ol_s3_error(r, OL_S3_InternalError,
                               n == -OL_ECORRUPT ? "The object's data failed its checksum."
                                                 : "The object could not be read.");
        }
    }

    char etag[72], lm[32];
    snprintf(etag, sizeof(etag), "\"%s\"", info->etag);
    ol_s3_http_date(info->mtime_ns, lm);
    struct ol_http_hdr h[40];
    size_t nh = 0;
    h[nh++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    h[nh++] = (struct ol_http_hdr){"ETag", etag};
    h[nh++] = (struct ol_http_hdr){"Last-Modified", lm};
    h[nh++] = (struct ol_http_hdr){"Accept-Ranges", "bytes"};
    if (ranged > 0) {
        snprintf(crange, sizeof(crange), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start, end,
                 info->size);
        h[nh++] = (struct ol_http_hdr){"Content-Range", crange};
    }
    char store[OL_S3_META_MAX + 64];
    size_t first_meta = nh;
    nh += ol_s3_meta_headers(info->meta, info->meta_len, h + nh, 30, store, sizeof(store));
    bool has_ct = false;
    for (size_t i = first_meta; i < nh; i++)
        if (strcasecmp(h[i].name, "content-type") == 0)
            has_ct = true;
    if (!has_ct)
        h[nh++] = (struct ol_http_hdr){"Content-Type", "binary/octet-stream"};

    rc = ol_http_resp_begin(r->conn, ranged > 0 ? 206 : 200, h, nh, len);
    if (rc < 0 || r->http->is_head || len == 0)
        goto out;
    uint64_t off = start, left = len;
    /* Each round sends at least one byte or fails. */
    while (left > 0) {
        if (!data) {
            n = ol_store_read(rd, off, left, &data);
            if (n <= 0) {
                /* Headers are out: cutting the connection is the only way to
                 * tell the client the body is bad. */
                ol_log_limited(OL_LOG_ERROR, "GET %s/%.*s at %" PRIu64 ": %s", r->bucket,
                               (int)(r->key_len > 200 ? 200 : r->key_len), r->key, off,
                               ol_strerror(n ? (int)n : -EIO));
                rc = n ? (int)n : -EIO;
                goto out;
            }
        }
        size_t take = (size_t)n < left ? (size_t)n : (size_t)left;
        rc = ol_http_resp_write(r->conn, data, take);
        if (rc < 0)
            goto out;
        off += take;
        left -= take;
        data = NULL;
    }
out:
    ol_store_read_close(rd);
    return rc;
}

int ol_s3_delete_object(struct ol_s3_req *r)
{
    int rc = ol_store_delete(r->ctx->store, r->bucket, r->key, r->key_len);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 204, NULL, 0);
}
