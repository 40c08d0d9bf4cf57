/* CopyObject and UploadPartCopy.  Both copy by reference in the store
 * (ol_store_copy_object, ol_store_copy_part): the cost does not grow with the
 * object's size, except that a part copy reads its range once for the MD5.
 * A copy that changes the bytes' encryption (obj/sse.h: an SSE-C source, an
 * encrypted destination of another kind than the source, an encrypted
 * upload) streams instead: plaintext out of the source's reader, sealed
 * again by the destination's writer. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/buf.h"
#include "core/cfg.h"
#include "core/err.h"
#include "core/hex.h"
#include "core/md5.h"
#include "s3/checksum.h"
#include "s3/meta.h"
#include "s3/object.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "s3/sigv4.h"
#include "s3/sse.h"
#include "store/store.h"

struct copy_src {
    char bucket[64];
    char key[1025];
    size_t key_len;
    bool has_version;
    char version[64];
};

/* x-amz-copy-source: "bucket/key" URL-encoded, an optional leading '/', an
 * optional "?versionId=ID".  0, or sends the error and returns -1. */
static int parse_source(struct ol_s3_req *r, struct copy_src *s)
{
    static const char bad[] =
        "Copy Source must mention the source bucket and key: sourcebucket/sourcekey";
    memset(s, 0, sizeof(*s));
    const struct ol_slice *h = ol_s3_header(r, "x-amz-copy-source");
    if (!h || h->n == 0)
        return ol_s3_error(r, OL_S3_InvalidArgument, bad), -1;
    const char *p = h->p;
    size_t n = h->n;
    const char *q = memchr(p, '?', n);
    size_t path_n = q ? (size_t)(q - p) : n;
    if (q) {
        const char *a = q + 1;
        size_t an = n - path_n - 1;
        if (an < 10 || strncmp(a, "versionId=", 10) != 0)
            return ol_s3_error(r, OL_S3_InvalidArgument, bad), -1;
        ssize_t vl = ol_pct_decode(a + 10, an - 10, s->version, sizeof(s->version) - 1, false);
        /* The id is echoed as x-amz-copy-source-version-id: a decoded
         * control byte (%0D%0A) must never get that far. */
        if (vl <= 0 || !ol_s3_header_value_ok(s->version, (size_t)vl))
            return ol_s3_error(r, OL_S3_InvalidArgument, "Invalid version id specified"), -1;
        s->version[vl] = 0;
        s->has_version = true;
    }
    char path[64 + 1 + 1024 * 3 + 2];
    ssize_t pl = ol_pct_decode(p, path_n, path, sizeof(path) - 1, false);
    if (pl <= 0)
        return ol_s3_error(r, OL_S3_InvalidArgument, bad), -1;
    path[pl] = 0;
    char *b = path;
    if (*b == '/')
        b++;
    char *slash = strchr(b, '/');
    if (!slash || slash == b || slash - b > 63 || slash[1] == 0)
        return ol_s3_error(r, OL_S3_InvalidArgument, bad), -1;
    memcpy(s->bucket, b, (size_t)(slash - b));
    s->bucket[slash - b] = 0;
    size_t kl = (size_t)(path + pl - (slash + 1));
    if (kl > 1024)
        return ol_s3_error(r, OL_S3_KeyTooLongError, "Your key is too long"), -1;
    memcpy(s->key, slash + 1, kl);
    s->key_len = kl;
    if (!ol_s3_bucket_name_valid(s->bucket))
        return ol_s3_error(r, OL_S3_NoSuchBucket, "The specified bucket does not exist"), -1;
    return 0;
}

/* Does an entity-tag list ("a", W/"b", *) name etag? */
static bool etag_in_list(const struct ol_slice *h, const char *etag)
{
    const char *p = h->p, *e = h->p + h->n;
    for (int guard = 0; p < e && guard < 1000; guard++) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *t = end;
        while (t > p && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if (t - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2;
        if (t - p >= 2 && *p == '"' && t[-1] == '"') {
            p++;
            t--;
        }
        size_t n = (size_t)(t - p);
        if ((n == 1 && *p == '*') || (n == strlen(etag) && memcmp(p, etag, n) == 0))
            return true;
        p = end + 1;
    }
    return false;
}

static bool hdr_date(const struct ol_s3_req *r, const char *name, int64_t *sec)
{
    const struct ol_slice *h = ol_s3_header(r, name);
    char amz[17];
    return h && ol_sigv4_parse_date(*h, amz, sec) == 0;
}

/* The x-amz-copy-source-if-* conditions, as S3 evaluates them: a true
 * If-Match overrides a false If-Unmodified-Since, a true If-None-Match a false
 * If-Modified-Since; anything else that fails is 412.  True to copy. */
static bool source_conditions_hold(const struct ol_s3_req *r, const struct ol_obj_info *info)
{
    int64_t lm = info->mtime_ns / 1000000000, t;
    const struct ol_slice *im = ol_s3_header(r, "x-amz-copy-source-if-match");
    const struct ol_slice *inm = ol_s3_header(r, "x-amz-copy-source-if-none-match");
    if (im && !etag_in_list(im, info->etag))
        return false;
    if (!im && hdr_date(r, "x-amz-copy-source-if-unmodified-since", &t) && lm > t)
        return false;
    if (inm && etag_in_list(inm, info->etag))
        return false;
    if (!inm && hdr_date(r, "x-amz-copy-source-if-modified-since", &t) && lm <= t)
        return false;
    return true;
}

static int precondition_failed(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_PreconditionFailed,
                       "At least one of the pre-conditions you specified did not hold");
}

/* Opens the source and checks its conditions; the reader gives the snapshot
 * (etag, size, meta) that the copy is then bound to.  0, or sends the error
 * and returns -1. */
static int open_source(struct ol_s3_req *r, const struct copy_src *s, struct ol_obj_reader **rd)
{
    *rd = NULL;
    int rc = ol_obj_read_open_v(r->ctx->obj, s->bucket, s->key, s->key_len,
                                  s->has_version ? s->version : NULL, rd);
    if (rc == -OL_ENOVERSION || rc == -OL_EMARKER)
        return ol_s3_error(r, OL_S3_InvalidArgument, "Invalid version id specified"), -1;
    if (rc < 0)
        return ol_s3_error_from(r, rc), -1;
    if (!source_conditions_hold(r, ol_obj_read_info(*rd))) {
        ol_obj_read_close(*rd);
        *rd = NULL;
        return precondition_failed(r), -1;
    }
    return 0;
}

/* Adds the source's internal meta entries (checksum, part sizes: facts about
 * the data, which a copy keeps) to a replaced blob. */
static void keep_internal(const struct ol_obj_info *src, uint8_t *meta, size_t cap, size_t *len)
{
    static const char *const names[] = {OL_S3_META_CHECKSUM, OL_S3_META_PARTS, OL_SSE_META};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const uint8_t *v;
        size_t vl;
        if (ol_s3_meta_get(src->meta, src->meta_len, names[i], &v, &vl) == 0)
            (void)ol_s3_meta_add(meta, cap, len, names[i], v, vl);
    }
}

static int send_result(struct ol_s3_req *r, const char *root, const char *etag, int64_t mtime_ns,
                       const struct ol_http_hdr *extra, size_t nextra)
{
    char qetag[72], date[32];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    ol_s3_iso_date(mtime_ns, date);
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, root);
    ol_xml_str(&x, "LastModified", date);
    ol_xml_str(&x, "ETag", qetag);
    ol_xml_end_doc(&x);
    int rc = ol_s3_send_xml_hdrs(r, 200, &x, extra, nextra);
    ol_xml_free(&x);
    return rc;
}

/* Streams [off, off + len) of rd's plaintext into a new writer for t
 * (sealed when t->sse says so), computing the MD5 (hex into md5_hex).  On
 * success *out is the writer, to commit. */
static int copy_stream(struct ol_s3_req *r, struct ol_obj_reader *rd, uint64_t off, uint64_t len,
                       const struct ol_obj_target *t, struct ol_obj_writer **out,
                       char md5_hex[33])
{
    struct ol_obj *o = r->ctx->obj;
    uint64_t need = ol_obj_write_buffer_bytes(o, t, (int64_t)len);
    int rc = ol_bodymem_reserve(need, (unsigned)r->ctx->cfg->body_memory_wait_ms);
    if (rc < 0)
        return rc;
    struct ol_obj_writer *w = NULL;
    rc = ol_obj_write_begin(o, t, (int64_t)len, &w);
    if (rc < 0) {
        ol_bodymem_release(need);
        return rc;
    }
    ol_obj_write_hold(w, need);
    struct ol_md5 md;
    ol_md5_init(&md);
    /* Each round moves at least one byte or fails. */
    for (uint64_t done = 0; done < len;) {
        const uint8_t *data;
        ssize_t n = ol_obj_read(rd, off + done, len - done, &data);
        if (n <= 0) {
            ol_obj_write_abort(w);
            return n == 0 ? -OL_ECORRUPT : (int)n;
        }
        ol_md5_update(&md, data, (size_t)n);
        rc = ol_obj_write(w, data, (size_t)n);
        if (rc < 0) {
            ol_obj_write_abort(w);
            return rc;
        }
        done += (uint64_t)n;
    }
    uint8_t d[16];
    ol_md5_final(&md, d);
    ol_hex(d, 16, md5_hex);
    *out = w;
    return 0;
}

/* Drops the entries that describe the source's bytes rather than the
 * object (a streamed copy is a new single stream: no parts, no sealing of
 * the source's, no composite checksum). */
static size_t drop_data_entries(uint8_t *meta, size_t len)
{
    uint8_t *tmp = malloc(len ? len : 1);
    if (!tmp)
        return len;
    memcpy(tmp, meta, len);
    size_t kept = ol_s3_meta_strip_internal(meta, len);
    /* Keep a full-object checksum: it is the plaintext's, still true. */
    const uint8_t *v;
    size_t vl;
    if (ol_s3_meta_get(tmp, len, OL_S3_META_CHECKSUM, &v, &vl) == 0 && memmem(v, vl, "FULL_OBJECT", 11))
        (void)ol_s3_meta_add(meta, len, &kept, OL_S3_META_CHECKSUM, v, vl);
    free(tmp);
    return kept;
}

/* CopyObject by streaming (see the file's head): the copy gets dst's
 * encryption, the blob meta (mlen bytes, room for cap), the request's ACL
 * and the source's tags (or the request's, tags).  0 with *out and vid
 * filled, a negative error, or 1 when the error was sent. */
static int copy_streamed(struct ol_s3_req *r, struct ol_obj_reader *rd,
                         const struct ol_s3_sse *dst, uint8_t *meta, size_t cap, size_t mlen,
                         enum ol_acl acl, const struct ol_s3_tag_attr *tags,
                         const struct ol_store_cond *cond, struct ol_obj_info *out,
                         char vid[OL_STORE_VID_MAX])
{
    const struct ol_obj_info *si = ol_obj_read_info(rd);
    uint64_t size = si->size;
    struct ol_sse_obj so;
    if (ol_s3_sse_seal(r, dst, 's', meta, cap, &mlen, &so) < 0)
        return 1;
    struct ol_obj_attr attrs[2];
    uint32_t nattrs = 0;
    if (acl != OL_ACL_PRIVATE) /* a commit's attributes: as PutObject sets them */
        attrs[nattrs++] = ol_s3_acl_attr(acl);
    const uint8_t *tv;
    size_t tl;
    if (tags) {
        if (tags->attr.val)
            attrs[nattrs++] = tags->attr;
    } else if (ol_obj_read_attr(rd, OL_TAGS_ATTR, &tv, &tl) == 0 && tl) {
        attrs[nattrs++] = (struct ol_obj_attr){OL_TAGS_ATTR, tv, tl};
    }
    struct ol_obj_target t = {.bucket = r->bucket, .key = r->key, .key_len = r->key_len,
                              .sse = &so};
    struct ol_obj_writer *w = NULL;
    char md5[33];
    int rc = copy_stream(r, rd, 0, size, &t, &w, md5);
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc < 0)
        return rc;
    struct ol_obj_info info = {
        .mtime_ns = r->now_ns,
        .meta = meta,
        .meta_len = (uint32_t)mlen,
        .attrs = attrs,
        .nattrs = nattrs,
    };
    snprintf(info.etag, sizeof(info.etag), "%s", md5);
    rc = ol_obj_write_commit_object_v(w, &info, cond, vid);
    if (rc < 0)
        return rc;
    memset(out, 0, sizeof(*out));
    out->size = size;
    out->mtime_ns = info.mtime_ns;
    snprintf(out->etag, sizeof(out->etag), "%s", md5);
    return 0;
}

int ol_s3_copy_object(struct ol_s3_req *r)
{
    struct copy_src s;
    if (parse_source(r, &s) < 0)
        return 0;
    bool replace = false;
    const struct ol_slice *md = ol_s3_header(r, "x-amz-metadata-directive");
    if (md) {
        if (md->n == 7 && strncasecmp(md->p, "REPLACE", 7) == 0)
            replace = true;
        else if (!(md->n == 4 && strncasecmp(md->p, "COPY", 4) == 0))
            return ol_s3_error(r, OL_S3_InvalidArgument, "Unknown metadata directive.");
    }
    bool tags_replace = false;
    const struct ol_slice *td = ol_s3_header(r, "x-amz-tagging-directive");
    if (td) {
        if (td->n == 7 && strncasecmp(td->p, "REPLACE", 7) == 0)
            tags_replace = true;
        else if (!(td->n == 4 && strncasecmp(td->p, "COPY", 4) == 0))
            return ol_s3_error(r, OL_S3_InvalidArgument, "Unknown tagging directive.");
    }
    /* Encryption: the source's SSE-C key, and the copy's own encryption
     * (the request's, else the bucket's default). */
    struct ol_s3_sse src_sse, dst_sse;
    if (ol_s3_sse_parse(r, true, &src_sse) < 0 || ol_s3_sse_for_write(r, &dst_sse) < 0)
        return 0;
    bool sse_asked = dst_sse.spec.mode != OL_SSE_NONE;
    bool self = strcmp(s.bucket, r->bucket) == 0 && s.key_len == r->key_len &&
                memcmp(s.key, r->key, s.key_len) == 0;
    if (self && !replace && !sse_asked)
        return ol_s3_error(r, OL_S3_InvalidRequest,
                           "This copy request is illegal because it is trying to copy an object "
                           "to itself without changing the object's metadata, storage class, "
                           "website redirect location or encryption attributes.");
    /* The copy's canned ACL is the request's (private when absent), never
     * the source's, as in S3. */
    enum ol_acl acl;
    bool acl_refused;
    int rc = ol_s3_write_acl(r, &acl, &acl_refused);
    if (acl_refused)
        return rc;
    /* With REPLACE, the request's tags (none: the copy is untagged) are
     * written into the copy's entry by the copy itself; with COPY the entry
     * keeps the source's. */
    struct ol_s3_tag_attr tags = {0};
    if (tags_replace) {
        const char *tag_msg;
        rc = ol_s3_tag_attr_from_header(r, &tags, &tag_msg);
        if (rc < 0) {
            ol_s3_tag_attr_free(&tags);
            return rc == -EINVAL ? ol_s3_error(r, OL_S3_InvalidTag, tag_msg)
                                 : ol_s3_error_from(r, rc);
        }
    }
    struct ol_store_cond cond;
    char cond_etag[64];
    int has_cond = ol_s3_write_cond(r, &cond, cond_etag);
    if (has_cond < 0) {
        ol_s3_tag_attr_free(&tags);
        return 0;
    }
    uint8_t *meta = malloc(OL_S3_META_MAX + 256 + OL_SSE_ENTRY_MAX + 8);
    if (!meta) {
        ol_s3_tag_attr_free(&tags);
        return ol_s3_error(r, OL_S3_InternalError, "out of memory");
    }
    size_t mlen = 0;
    if (replace) {
        int ml = ol_s3_meta_encode(r, meta, OL_S3_META_MAX);
        if (ml < 0) {
            free(meta);
            ol_s3_tag_attr_free(&tags);
            return ol_s3_meta_error(r, ml);
        }
        mlen = (size_t)ml;
    }
    struct ol_obj_reader *rd = NULL;
    if (open_source(r, &s, &rd) < 0 || ol_s3_sse_unlock(r, rd, &src_sse) < 0) {
        ol_obj_read_close(rd);
        free(meta);
        ol_s3_tag_attr_free(&tags);
        return 0;
    }
    const struct ol_obj_info *si = ol_obj_read_info(rd);
    char src_etag[64];
    memcpy(src_etag, si->etag, sizeof(src_etag));
    /* By reference when the bytes stay as they are: a plain source copied
     * plain, or an SSE-S3 one copied as SSE-S3 (its data key is wrapped by
     * the same master key, and goes along in its entry). */
    enum ol_sse_mode src_mode = ol_obj_read_sse(rd);
    if (src_mode == OL_SSE_S3 && !sse_asked)
        dst_sse.spec.mode = OL_SSE_S3; /* an encrypted object stays encrypted */
    bool stream = src_mode == OL_SSE_C || dst_sse.spec.mode == OL_SSE_C ||
                  src_mode != dst_sse.spec.mode;
    if (stream && !replace) {
        /* The source's blob, less what described its bytes. */
        mlen = si->meta_len <= OL_S3_META_MAX + 256 ? si->meta_len : 0;
        memcpy(meta, si->meta, mlen);
        mlen = drop_data_entries(meta, mlen);
    } else if (replace) {
        if (stream)
            mlen = drop_data_entries(meta, mlen);
        else
            keep_internal(si, meta, OL_S3_META_MAX + 256, &mlen);
    }
    struct ol_obj_attr attrs[2] = {ol_s3_acl_attr(acl)};
    if (tags_replace)
        attrs[1] = tags.attr;
    struct ol_store_copy_opts o = {
        .src_etag = src_etag,
        .replace_meta = replace,
        .meta = meta,
        .meta_len = (uint32_t)mlen,
        .mtime_ns = r->now_ns,
        .dst_cond = has_cond ? &cond : NULL,
        .attrs = attrs,
        .nattrs = tags_replace ? 2 : 1,
    };
    struct ol_obj_info out;
    /* src_etag binds the copy to the snapshot that the conditions saw. */
    char vid[OL_STORE_VID_MAX], src_vid[OL_STORE_VID_MAX];
    bool src_tagged = ol_obj_read_vid(rd, src_vid) == 0 || s.has_version;
    if (stream) {
        rc = copy_streamed(r, rd, &dst_sse, meta, OL_S3_META_MAX + 256 + OL_SSE_ENTRY_MAX + 8,
                           mlen, acl, tags_replace ? &tags : NULL, has_cond ? &cond : NULL,
                           &out, vid);
        if (rc == 1) { /* the error is sent */
            ol_obj_read_close(rd);
            free(meta);
            ol_s3_tag_attr_free(&tags);
            OPENSSL_cleanse(&src_sse, sizeof(src_sse));
            OPENSSL_cleanse(&dst_sse, sizeof(dst_sse));
            return 0;
        }
    } else {
        rc = ol_obj_copy_object_v(r->ctx->obj, s.bucket, s.key, s.key_len,
                                  s.has_version ? s.version : NULL, r->bucket, r->key,
                                  r->key_len, &o, &out, vid);
    }
    ol_obj_read_close(rd);
    OPENSSL_cleanse(&src_sse.spec.ckey, sizeof(src_sse.spec.ckey));
    free(meta);
    ol_s3_tag_attr_free(&tags);
    if (rc == -OL_EPRECONDITION && has_cond)
        return ol_s3_write_cond_fail(r, &cond);
    if (rc == -OL_EPRECONDITION)
        return precondition_failed(r);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_http_hdr vh[4];
    size_t nvh = 0;
    if (src_tagged)
        vh[nvh++] = (struct ol_http_hdr){"x-amz-copy-source-version-id", src_vid};
    if (vid[0])
        vh[nvh++] = (struct ol_http_hdr){"x-amz-version-id", vid};
    nvh += ol_s3_sse_hdrs(dst_sse.spec.mode, &dst_sse, vh + nvh);
    rc = send_result(r, "CopyObjectResult", out.etag, out.mtime_ns, vh, nvh);
    OPENSSL_cleanse(&dst_sse.spec.ckey, sizeof(dst_sse.spec.ckey));
    return rc;
}

struct upload_match {
    const struct ol_s3_req *r;
    bool ok;
    uint8_t *meta; /* a copy of the upload's blob (UPLOAD_BLOB_MAX) */
    size_t meta_len;
};

#define UPLOAD_BLOB_MAX (OL_S3_META_MAX + 512 + OL_SSE_ENTRY_MAX)

static int match_upload(void *ctx, const struct ol_upload_info *u)
{
    struct upload_match *m = ctx;
    m->ok = strcmp(u->bucket, m->r->bucket) == 0 && u->key_len == m->r->key_len &&
            memcmp(u->key, m->r->key, u->key_len) == 0;
    if (m->ok && m->meta && u->meta && u->meta_len <= UPLOAD_BLOB_MAX) {
        memcpy(m->meta, u->meta, u->meta_len);
        m->meta_len = u->meta_len;
    }
    return 0;
}

/* "bytes=first-last", both inclusive.  0, -EINVAL (malformed) or -ERANGE. */
static int parse_copy_range(const struct ol_slice *h, uint64_t size, uint64_t *off,
                            uint64_t *len)
{
    char buf[64];
    if (h->n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, h->p, h->n);
    buf[h->n] = 0;
    if (strncmp(buf, "bytes=", 6) != 0)
        return -EINVAL;
    char *p = buf + 6, *end = NULL;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    unsigned long long a = strtoull(p, &end, 10);
    if (*end != '-' || end[1] < '0' || end[1] > '9')
        return -EINVAL;
    unsigned long long b = strtoull(end + 1, &end, 10);
    if (*end || a > b)
        return -EINVAL;
    if (b >= size)
        return -ERANGE;
    *off = a;
    *len = b - a + 1;
    return 0;
}

int ol_s3_upload_part_copy(struct ol_s3_req *r)
{
    const struct ol_s3_param *pn = ol_s3_param(r, "partNumber");
    char *end = NULL;
    long part = pn ? strtol(pn->value, &end, 10) : 0;
    if (!pn || !end || *end || part < 1 || part > 10000)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Part number must be an integer between 1 and 10000, inclusive.");
    const struct ol_s3_param *up = ol_s3_param(r, "uploadId");
    if (!up || up->value_len == 0 || up->value_len >= 40)
        return ol_s3_error_from(r, -OL_ENOUPLOAD);
    uint8_t *umeta = malloc(UPLOAD_BLOB_MAX);
    if (!umeta)
        return ol_s3_error_from(r, -ENOMEM);
    struct upload_match m = {r, false, umeta, 0};
    int rc = ol_obj_upload_get(r->ctx->obj, r->bucket, up->value, match_upload, &m);
    if (rc < 0 || !m.ok) {
        free(umeta);
        return ol_s3_error_from(r, rc < 0 ? rc : -OL_ENOUPLOAD);
    }
    struct copy_src s;
    struct ol_s3_sse src_sse, part_sse;
    struct ol_sse_obj so;
    if (parse_source(r, &s) < 0 || ol_s3_sse_parse(r, true, &src_sse) < 0 ||
        ol_s3_sse_parse(r, false, &part_sse) < 0) {
        free(umeta);
        return 0;
    }
    if (part_sse.spec.mode == OL_SSE_S3)
        part_sse.spec.mode = OL_SSE_NONE; /* the upload decides */
    rc = ol_s3_sse_upload_key(r, umeta, m.meta_len, &part_sse, &so);
    free(umeta);
    if (rc < 0)
        return 0;
    struct ol_obj_reader *rd = NULL;
    if (open_source(r, &s, &rd) < 0 || ol_s3_sse_unlock(r, rd, &src_sse) < 0) {
        ol_obj_read_close(rd);
        OPENSSL_cleanse(&so, sizeof(so));
        return 0;
    }
    /* Encrypted on either side: the range streams (the file's head). */
    bool stream = so.mode != OL_SSE_NONE || ol_obj_read_sse(rd) != OL_SSE_NONE;
    const struct ol_obj_info *si = ol_obj_read_info(rd);
    uint64_t off = 0, len = si->size;
    char src_etag[64];
    memcpy(src_etag, si->etag, sizeof(src_etag));
    const struct ol_slice *rh = ol_s3_header(r, "x-amz-copy-source-range");
    if (rh) {
        rc = parse_copy_range(rh, si->size, &off, &len);
        if (rc == -EINVAL) {
            ol_obj_read_close(rd);
            OPENSSL_cleanse(&so, sizeof(so));
            return ol_s3_error(r, OL_S3_InvalidArgument,
                               "The x-amz-copy-source-range value must be of the form "
                               "bytes=first-last where first and last are the zero-based "
                               "offsets of the first and last bytes to copy");
        }
    }
    if (rc == -ERANGE || (rc == 0 && len == 0 && rh) || len > (5ull << 30)) {
        ol_obj_read_close(rd);
        OPENSSL_cleanse(&so, sizeof(so));
        if (len > (5ull << 30))
            return ol_s3_error(r, OL_S3_InvalidRequest,
                               "The specified copy source is larger than the maximum allowable "
                               "size for a copy source: 5368709120");
        return ol_s3_error(r, OL_S3_InvalidRange, "The requested range is not satisfiable");
    }
    char etag[64];
    if (stream) {
        /* An empty source makes an empty (sealed) part, as a plain copy
         * refuses to. */
        struct ol_obj_target t = {.bucket = r->bucket, .upload_id = up->value,
                                  .part_no = (uint32_t)part, .sse = &so};
        struct ol_obj_writer *w = NULL;
        char md5[33];
        rc = len == 0 ? -ERANGE : copy_stream(r, rd, off, len, &t, &w, md5);
        ol_obj_read_close(rd);
        if (rc == 0) {
            char stored[64];
            ol_ck_part_etag_encode(md5, OL_CK_NONE, NULL, stored);
            rc = ol_obj_write_commit_part(w, stored);
            snprintf(etag, sizeof(etag), "%s", md5);
        }
    } else {
        ol_obj_read_close(rd);
        /* An empty source makes an empty part without reading anything. */
        if (len == 0)
            rc = -ERANGE;
        else
            rc = ol_obj_copy_part(r->ctx->obj, s.bucket, s.key, s.key_len, off, len, src_etag,
                                  r->bucket, up->value, (uint32_t)part, etag);
    }
    enum ol_sse_mode part_mode = so.mode;
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc == -ERANGE)
        return ol_s3_error(r, OL_S3_InvalidRange, "The requested range is not satisfiable");
    if (rc == -OL_EPRECONDITION)
        return precondition_failed(r);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_http_hdr sh[2];
    size_t nsh = ol_s3_sse_hdrs(part_mode, &part_sse, sh);
    return send_result(r, "CopyPartResult", etag, r->now_ns, sh, nsh);
}
