/* Object handlers: PutObject, GetObject / HeadObject, DeleteObject.  The
 * body receiver that PutObject and UploadPart share is body.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/cfg.h"
#include "core/err.h"
#include "core/log.h"
#include "s3/checksum.h"
#include "s3/meta.h"
#include "s3/object.h"
#include "s3/rdma.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "access/ratelimit.h"
#include "s3/sigv4.h"
#include "s3/sse.h"
#include "store/store.h"

/* ---- write preconditions (If-Match / If-None-Match on PUT and Complete) ---- */

/* Copies an entity tag without quotes (or a W/ prefix) into out[64]. */
static bool etag_unquote(const char *p, size_t n, char out[64])
{
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n >= 2 && p[0] == 'W' && p[1] == '/') {
        p += 2;
        n -= 2;
    }
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        p++;
        n -= 2;
    }
    if (n >= 64)
        return false;
    memcpy(out, p, n);
    out[n] = 0;
    return true;
}

int ol_s3_write_cond(struct ol_s3_req *r, struct ol_store_cond *cond, char etag_buf[64])
{
    memset(cond, 0, sizeof(*cond));
    const struct ol_slice *inm = ol_s3_header(r, "if-none-match");
    const struct ol_slice *im = ol_s3_header(r, "if-match");
    if (!inm && !im)
        return 0;
    if (inm) {
        char v[64];
        /* S3 supports only the create-only form on writes. */
        if (!etag_unquote(inm->p, inm->n, v) || strcmp(v, "*") != 0) {
            ol_s3_error(r, OL_S3_NotImplemented,
                        "A header you provided implies functionality that is not implemented");
            return -1;
        }
        cond->if_none_match = true;
    }
    if (im) {
        /* "*" asks for any current object: a missing key is 404 NoSuchKey
         * (the store's -OL_ENOKEY), as S3 answers. */
        if (!etag_unquote(im->p, im->n, etag_buf) || etag_buf[0] == 0) {
            ol_s3_error(r, OL_S3_NotImplemented,
                        "A header you provided implies functionality that is not implemented");
            return -1;
        }
        cond->if_match = etag_buf;
    }
    return 1;
}

int ol_s3_write_cond_fail(struct ol_s3_req *r, const struct ol_store_cond *cond)
{
    if (cond->if_match && !cond->if_none_match) {
        struct ol_obj_reader *rd = NULL;
        int rc = ol_obj_read_open(r->ctx->obj, r->bucket, r->key, r->key_len, &rd);
        if (rc == -OL_ENOKEY)
            return ol_s3_error(r, OL_S3_NoSuchKey, "The specified key does not exist.");
        if (rd)
            ol_obj_read_close(rd);
    }
    return ol_s3_error(r, OL_S3_PreconditionFailed,
                       "At least one of the pre-conditions you specified did not hold");
}

/* The checksum entry of an object's metadata: "ALGO TYPE value". */
static int meta_add_checksum(uint8_t *meta, size_t cap, size_t *len, enum ol_ck_algo a,
                             const char *type, const char *b64)
{
    char v[128];
    int n = snprintf(v, sizeof(v), "%s %s %s", ol_ck_name(a), type, b64);
    return ol_s3_meta_add(meta, cap, len, OL_S3_META_CHECKSUM, v, (size_t)n);
}

int ol_s3_put_object(struct ol_s3_req *r)
{
    int rdma_sent;
    int rdma = ol_s3_rdma_put_setup(r, &rdma_sent);
    if (rdma < 0)
        return rdma_sent;
    if (ol_s3_body_length(r) < 0 && !r->http->chunked)
        return ol_s3_error(r, OL_S3_MissingContentLength,
                           "You must provide the Content-Length HTTP header.");
    uint8_t meta[OL_S3_META_MAX + 256 + OL_SSE_ENTRY_MAX + 8];
    int ml = ol_s3_meta_encode(r, meta, OL_S3_META_MAX);
    if (ml < 0)
        return ol_s3_meta_error(r, ml);
    size_t mlen = (size_t)ml;
    /* Encryption (s3/sse.h): the request's or the bucket's default; the
     * ":sse" entry goes in the blob and the writer seals the body. */
    struct ol_s3_sse sse;
    struct ol_sse_obj so;
    if (ol_s3_sse_for_write(r, &sse) < 0 ||
        ol_s3_sse_seal(r, &sse, 's', meta, sizeof(meta), &mlen, &so) < 0)
        return 0;
    struct ol_s3_body_ck ck;
    int rc = ol_s3_body_ck_parse(r, OL_CK_NONE, &ck);
    if (rc < 0)
        return ol_s3_receive_fail(r, rc, &ck);
    struct ol_store_cond cond;
    char cond_etag[64];
    int has_cond = ol_s3_write_cond(r, &cond, cond_etag);
    if (has_cond < 0)
        return 0;
    /* The tags are parsed (and refused) before the body is read, and commit
     * with the object, in its entry. */
    enum ol_acl acl;
    bool acl_refused;
    rc = ol_s3_write_acl(r, &acl, &acl_refused);
    if (acl_refused)
        return rc;
    struct ol_s3_tag_attr tags;
    const char *tag_msg;
    rc = ol_s3_tag_attr_from_header(r, &tags, &tag_msg);
    if (rc < 0) {
        ol_s3_tag_attr_free(&tags);
        return rc == -EINVAL ? ol_s3_error(r, OL_S3_InvalidTag, tag_msg) : ol_s3_error_from(r, rc);
    }
    struct ol_bucket_info bi;
    rc = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
    if (rc < 0) {
        ol_s3_tag_attr_free(&tags);
        return ol_s3_error_from(r, rc);
    }
    struct ol_obj_writer *w;
    char etag[33];
    struct ol_obj_target tg = {.bucket = r->bucket, .key = r->key, .key_len = r->key_len,
                               .sse = &so};
    rc = ol_s3_receive_body_ck(r, &tg, &w, etag, &ck);
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc < 0) {
        ol_s3_tag_attr_free(&tags);
        return ol_s3_receive_fail(r, rc, &ck);
    }
    if (ck.algo != OL_CK_NONE &&
        meta_add_checksum(meta, sizeof(meta), &mlen, ck.algo, "FULL_OBJECT", ck.b64) < 0) {
        ol_obj_write_abort(w);
        ol_s3_tag_attr_free(&tags);
        return ol_s3_meta_error(r, -E2BIG);
    }
    /* The tags and the canned ACL (when not private) commit with the object. */
    struct ol_obj_attr attrs[2];
    uint32_t nattrs = 0;
    if (tags.attr.val)
        attrs[nattrs++] = tags.attr;
    if (acl != OL_ACL_PRIVATE)
        attrs[nattrs++] = ol_s3_acl_attr(acl);
    struct ol_obj_info info = {
        .mtime_ns = r->now_ns,
        .meta = meta,
        .meta_len = (uint32_t)mlen,
        .attrs = nattrs ? attrs : NULL,
        .nattrs = nattrs,
    };
    snprintf(info.etag, sizeof(info.etag), "%s", etag);
    char vid[OL_STORE_VID_MAX];
    rc = ol_obj_write_commit_object_v(w, &info, has_cond ? &cond : NULL, vid);
    ol_s3_tag_attr_free(&tags);
    if (rc == -OL_EPRECONDITION)
        return ol_s3_write_cond_fail(r, &cond);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char qetag[40];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    struct ol_http_hdr h[8];
    size_t nh = 0;
    char rdma_buf[64];
    if (rdma)
        nh += ol_s3_rdma_reply_hdrs(200, (uint64_t)ol_s3_body_length(r), rdma_buf, h + nh);
    h[nh++] = (struct ol_http_hdr){"ETag", qetag};
    nh += ol_s3_sse_hdrs(sse.spec.mode, &sse, h + nh);
    if (vid[0])
        h[nh++] = (struct ol_http_hdr){"x-amz-version-id", vid};
    if (ck.algo != OL_CK_NONE) {
        h[nh++] = (struct ol_http_hdr){ol_ck_header(ck.algo), ck.b64};
        h[nh++] = (struct ol_http_hdr){"x-amz-checksum-type", "FULL_OBJECT"};
    }
    return ol_s3_send_empty(r, 200, h, nh);
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

/* ---- GetObject / HeadObject ---- */

/* Bodies of at least this many bytes are sent with sendfile(2) when their
 * bytes are in the page cache.  Smaller ones leave in one sendmsg with their
 * head, which costs fewer system calls than a head, a check and a sendfile. */
#define OL_S3_SENDFILE_MIN (256u << 10)

/* An error document with extra headers (ol_s3_error takes none): the 416 of
 * an unsatisfiable range carries Content-Range: bytes * /size. */
static int send_error_hdrs(struct ol_s3_req *r, int status, const char *code, const char *msg,
                           const struct ol_http_hdr *extra, size_t nextra)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "Error");
    ol_xml_str(&x, "Code", code);
    ol_xml_str(&x, "Message", msg);
    if (r->key)
        ol_xml_text(&x, "Key", r->key, r->key_len);
    ol_xml_str(&x, "RequestId", r->request_id);
    ol_xml_end_doc(&x);
    struct ol_http_hdr h[8];
    size_t nh = 0;
    h[nh++] = (struct ol_http_hdr){"Content-Type", "application/xml"};
    h[nh++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    for (size_t i = 0; i < nextra && nh < 8; i++)
        h[nh++] = extra[i];
    int rc = ol_http_respond(r->conn, status, h, nh, x.failed ? NULL : x.buf,
                             x.failed ? 0 : x.len);
    ol_xml_free(&x);
    return rc;
}

/* Does an If-Match / If-None-Match list ("a", W/"b", *) name this etag? */
static bool etag_list_matches(const struct ol_slice *h, const char *etag)
{
    const char *p = h->p, *e = h->p + h->n;
    /* One round per comma-separated entry. */
    while (p < e) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        char v[64];
        if (etag_unquote(p, (size_t)(end - p), v) && (strcmp(v, "*") == 0 ||
                                                      strcmp(v, etag) == 0))
            return true;
        p = end + 1;
    }
    return false;
}

/* An HTTP-date header as Unix seconds; false when absent or malformed (a
 * malformed date makes the condition be ignored, as RFC 9110 says). */
static bool header_date(const struct ol_s3_req *r, const char *name, int64_t *sec)
{
    const struct ol_slice *h = ol_s3_header(r, name);
    char amz[17];
    return h && ol_sigv4_parse_date(*h, amz, sec) == 0;
}

/* RFC 9110 section 13.2.2, as S3 applies it to GET and HEAD: returns 0 to
 * serve the object, 304 or 412. */
static int read_conditions(const struct ol_s3_req *r, const struct ol_obj_info *info)
{
    int64_t lm = info->mtime_ns / 1000000000, t;
    const struct ol_slice *im = ol_s3_header(r, "if-match");
    const struct ol_slice *inm = ol_s3_header(r, "if-none-match");
    if (im) {
        if (!etag_list_matches(im, info->etag))
            return 412;
    } else if (header_date(r, "if-unmodified-since", &t) && lm > t) {
        return 412;
    }
    if (inm) {
        if (etag_list_matches(inm, info->etag))
            return 304;
    } else if (header_date(r, "if-modified-since", &t) && lm <= t) {
        return 304;
    }
    return 0;
}

/* Part boundaries of a multipart object from its ":parts" entry
 * ("size*count,..."): the byte range of part `part` (1-based).  false when
 * the entry is missing or does not reach that part. */
static bool part_range(const struct ol_obj_info *info, uint32_t part, uint64_t *start,
                       uint64_t *len)
{
    const uint8_t *v;
    size_t vl;
    if (ol_s3_meta_get(info->meta, info->meta_len, OL_S3_META_PARTS, &v, &vl) < 0)
        return false;
    char buf[256];
    const char *p = (const char *)v, *e = p + vl;
    uint64_t off = 0, seen = 0;
    /* One round per run; runs are bounded by the entry's length. */
    while (p < e) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        size_t n = (size_t)(end - p);
        if (n >= sizeof(buf))
            return false;
        memcpy(buf, p, n);
        buf[n] = 0;
        unsigned long long size, count;
        if (sscanf(buf, "%llu*%llu", &size, &count) != 2)
            return false;
        if (part <= seen + count) {
            *start = off + (part - seen - 1) * size;
            *len = size;
            return true;
        }
        seen += count;
        off += size * count;
        p = end + 1;
    }
    return false;
}

/* response-* query parameters: each replaces one stored header. */
static const char *const overrides[][2] = {
    {"response-content-type", "Content-Type"},
    {"response-content-disposition", "Content-Disposition"},
    {"response-content-encoding", "Content-Encoding"},
    {"response-content-language", "Content-Language"},
    {"response-cache-control", "Cache-Control"},
    {"response-expires", "Expires"},
};
#define NOVERRIDES (sizeof(overrides) / sizeof(overrides[0]))

int ol_s3_response_overrides_check(struct ol_s3_req *r, bool *any, bool *refused)
{
    static __thread char msg[120];
    *any = false;
    *refused = false;
    for (size_t i = 0; i < NOVERRIDES; i++) {
        const struct ol_s3_param *p = ol_s3_param(r, overrides[i][0]);
        if (!p)
            continue;
        *any = true;
        /* The decoded value becomes a response header as it is: a CR or LF
         * in it would end that header and start another (or the body).
         * Amazon S3 refuses such a value with 400 InvalidArgument. */
        if (!ol_s3_header_value_ok(p->value, p->value_len)) {
            snprintf(msg, sizeof(msg),
                     "Header value for %s contains a character that is not allowed.",
                     overrides[i][0]);
            *refused = true;
            return ol_s3_error(r, OL_S3_InvalidArgument, msg);
        }
    }
    return 0;
}

/* Large bodies without a copy into the reader's buffer: from the segment's
 * page-cache mapping (one drive, or an erasure set's local data shards a
 * piece at a time: verified bytes, written to the socket from there), else
 * a file to sendfile from, else -EAGAIN.  Writing from the mapping measured
 * 1.4-2.2x the GETs a second of sendfile on loopback for 256 KiB-16 MiB
 * bodies (bench/RESULTS.md, "Encryption at rest", plain column). */
static ssize_t zero_copy(struct ol_obj_reader *rd, uint64_t off, uint64_t len,
                         const uint8_t **data, int *zfd, uint64_t *zoff)
{
    ssize_t n = ol_obj_read_map(rd, off, len, data);
    if (n == -EAGAIN)
        n = ol_obj_read_file(rd, off, len, zfd, zoff);
    return n;
}

int ol_s3_get_object(struct ol_s3_req *r)
{
    bool any_override, refused;
    int vrc = ol_s3_response_overrides_check(r, &any_override, &refused);
    if (refused)
        return vrc;
    if (any_override && !r->access_key)
        return ol_s3_error(r, OL_S3_InvalidRequest,
                           "Request specific response headers cannot be used for anonymous GET "
                           "requests.");
    const struct ol_s3_param *pn = ol_s3_param(r, "partNumber");
    long part = 0;
    if (pn) {
        char *pend = NULL;
        part = strtol(pn->value, &pend, 10);
        if (!pend || *pend || part < 1 || part > 10000)
            return ol_s3_error(r, OL_S3_InvalidArgument,
                               "Part number must be an integer between 1 and 10000, inclusive.");
        if (ol_s3_header(r, "range"))
            return ol_s3_error(r, OL_S3_InvalidRequest,
                               "Cannot specify both Range header and partNumber query "
                               "parameter");
    }

    /* S3 over RDMA (s3/rdma.h): the body goes into the client's memory. */
    struct ol_s3_rdma *rx = NULL;
    if (!r->http->is_head) {
        int rdma_sent;
        if (ol_s3_rdma_parse(r, &rx, &rdma_sent) < 0)
            return rdma_sent;
    }

    /* SSE-C: the key that opens the object (s3/sse.h). */
    struct ol_s3_sse sse;
    if (ol_s3_sse_parse(r, false, &sse) < 0) {
        free(rx);
        return 0;
    }
    if (sse.spec.mode == OL_SSE_S3) {
        free(rx);
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "x-amz-server-side-encryption header is not supported for this "
                           "operation.");
    }
    struct ol_obj_reader *rd = NULL;
    struct ol_http_hdr *h = NULL;
    const char *want_vid = ol_s3_version_param(r);
    int rc = ol_obj_read_open_v(r->ctx->obj, r->bucket, r->key, r->key_len, want_vid, &rd);
    if (rc < 0) {
        free(rx);
        int sent;
        if (ol_s3_sse_error(r, rc, &sent))
            return sent;
        return ol_s3_version_open_error(r, rc, want_vid);
    }
    rc = ol_s3_sse_unlock(r, rd, &sse);
    OPENSSL_cleanse(sse.spec.ckey, sizeof(sse.spec.ckey));
    if (rc < 0) {
        rc = 0;
        goto out;
    }
    const struct ol_obj_info *info = ol_obj_read_info(rd);
    char vid[OL_STORE_VID_MAX];
    bool has_vid = ol_obj_read_vid(rd, vid) == 0 || want_vid;
    char etag[72], lm[32];
    snprintf(etag, sizeof(etag), "\"%s\"", info->etag);
    ol_s3_http_date(info->mtime_ns, lm);

    int cond = read_conditions(r, info);
    if (cond == 304) {
        struct ol_http_hdr nm[] = {{"ETag", etag}, {"Last-Modified", lm}};
        rc = ol_s3_send_empty(r, 304, nm, 2);
        goto out;
    }
    if (cond == 412) {
        rc = ol_s3_error(r, OL_S3_PreconditionFailed,
                         "At least one of the pre-conditions you specified did not hold");
        goto out;
    }

    uint64_t start = 0, end = info->size ? info->size - 1 : 0;
    char crange[96], nparts[16];
    int ranged = 0;
    if (part > 0) {
        uint64_t pstart = 0, plen = info->size;
        bool ok = info->nparts == 0 ? part == 1
                                    : (uint32_t)part <= info->nparts &&
                                          part_range(info, (uint32_t)part, &pstart, &plen);
        if (!ok) {
            /* A part past the last one is a bad argument (400), not an
             * unsatisfiable range: no Content-Range goes with it. */
            rc = send_error_hdrs(r, 400, "InvalidPartNumber",
                                 "The requested partnumber is not satisfiable", NULL, 0);
            goto out;
        }
        if (info->nparts > 0) {
            ranged = plen > 0 ? 1 : 0;
            start = pstart;
            end = plen ? pstart + plen - 1 : pstart;
        }
    } else {
        ranged = parse_range(ol_s3_header(r, "range"), info->size, &start, &end);
    }
    if (ranged < 0) {
        snprintf(crange, sizeof(crange), "bytes */%" PRIu64, info->size);
        struct ol_http_hdr cr[] = {{"Content-Range", crange}};
        rc = send_error_hdrs(r, 416, "InvalidRange", "The requested range is not satisfiable",
                             cr, 1);
        goto out;
    }
    uint64_t len = (info->size == 0 || (part > 0 && !ranged && info->nparts > 0))
                       ? 0 : end - start + 1;

    /* Read the first piece before the headers go out, so a checksum failure
     * at the start is a clean 500 rather than a cut-off body.  Large bodies
     * go out without a copy when the store has verified them in the page
     * cache (zero_copy: from the mapping, data; or with sendfile, zfd/zoff);
     * otherwise, and for small ones (where head and body leave in one
     * send), through the reader's buffer (data). */
    const uint8_t *data = NULL;
    int zfd = -1;
    uint64_t zoff = 0;
    bool zc = len >= OL_S3_SENDFILE_MIN && !rx;
    if (rx && len > rx->tok.len) {
        rc = ol_s3_error(r, OL_S3_InvalidArgument,
                         "x-amz-rdma-token: the region is smaller than the object (or range).");
        goto out;
    }
    ssize_t n = 0;
    if (len > 0 && !r->http->is_head) {
        n = zc ? zero_copy(rd, start, len, &data, &zfd, &zoff) : -EAGAIN;
        if (n == -EAGAIN)
            n = ol_obj_read(rd, start, len, &data);
        if (n <= 0) {
            if (n == 0)
                n = -EIO;
            /* Too few drives, or no memory budget for the read: 503, retry;
             * anything else is the server's fault. */
            if (n == -OL_EQUORUM || n == -EBUSY)
                rc = ol_s3_error_from(r, (int)n);
            else
                rc = ol_s3_error(r, OL_S3_InternalError,
                                 n == -OL_ECORRUPT ? "The object's data failed its checksum."
                                                   : "The object could not be read.");
            goto out;
        }
    }

    /* Room for every header: the fixed ones, each stored one (the blob's
     * size bounds their count), the overrides, Content-Type and CORS. */
    size_t hcap = 16 + ol_s3_meta_count(info->meta, info->meta_len) + NOVERRIDES + 2 +
                  OL_S3_CORS_MAX_HDRS;
    h = malloc(hcap * sizeof(*h));
    if (!h) {
        rc = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    size_t nh = 0;
    h[nh++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    h[nh++] = (struct ol_http_hdr){"ETag", etag};
    h[nh++] = (struct ol_http_hdr){"Last-Modified", lm};
    h[nh++] = (struct ol_http_hdr){"Accept-Ranges", "bytes"};
    if (has_vid)
        h[nh++] = (struct ol_http_hdr){"x-amz-version-id", vid};
    nh += ol_s3_sse_hdrs(ol_obj_read_sse(rd), &sse, h + nh);
    if (ranged > 0) {
        snprintf(crange, sizeof(crange), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start, end,
                 info->size);
        h[nh++] = (struct ol_http_hdr){"Content-Range", crange};
    }
    if (part > 0 && info->nparts > 0) {
        snprintf(nparts, sizeof(nparts), "%" PRIu32, info->nparts);
        h[nh++] = (struct ol_http_hdr){"x-amz-mp-parts-count", nparts};
    }
    /* The additional checksum, only when asked for and for the whole object
     * (a range has no stored checksum). */
    char ckname[40], ckval[OL_CK_B64_MAX], cktype[16];
    const struct ol_slice *mode = ol_s3_header(r, "x-amz-checksum-mode");
    const uint8_t *cv;
    size_t cvl;
    if (mode && mode->n == 7 && strncasecmp(mode->p, "ENABLED", 7) == 0 && ranged == 0 &&
        ol_s3_meta_get(info->meta, info->meta_len, OL_S3_META_CHECKSUM, &cv, &cvl) == 0) {
        char tmp[128];
        snprintf(tmp, sizeof(tmp), "%.*s", (int)cvl, (const char *)cv);
        char algo[16];
        if (sscanf(tmp, "%15s %15s %63s", algo, cktype, ckval) == 3) {
            enum ol_ck_algo a = ol_ck_parse(algo, strlen(algo));
            if (a != OL_CK_NONE) {
                snprintf(ckname, sizeof(ckname), "%s", ol_ck_header(a));
                h[nh++] = (struct ol_http_hdr){ckname, ckval};
                h[nh++] = (struct ol_http_hdr){"x-amz-checksum-type", cktype};
            }
        }
    }
    char store[OL_S3_META_MAX + 64];
    size_t first_meta = nh;
    nh += ol_s3_meta_headers(info->meta, info->meta_len, h + nh, hcap - nh, store, sizeof(store));
    /* Overrides replace the stored value (or add one). */
    for (size_t o = 0; o < NOVERRIDES; o++) {
        const struct ol_s3_param *p = ol_s3_param(r, overrides[o][0]);
        if (!p)
            continue;
        bool replaced = false;
        for (size_t i = first_meta; i < nh; i++)
            if (strcasecmp(h[i].name, overrides[o][1]) == 0) {
                h[i].value = p->value;
                replaced = true;
            }
        if (!replaced)
            h[nh++] = (struct ol_http_hdr){overrides[o][1], p->value};
    }
    bool has_ct = false;
    for (size_t i = first_meta; i < nh; i++)
        if (strcasecmp(h[i].name, "content-type") == 0)
            has_ct = true;
    if (!has_ct)
        h[nh++] = (struct ol_http_hdr){"Content-Type", "binary/octet-stream"};
    char ntags[16], cors[OL_S3_CORS_STORE_BYTES];
    int ntag = ol_s3_tagging_count_of(rd);
    snprintf(ntags, sizeof(ntags), "%d", ntag);
    if (ntag > 0)
        h[nh++] = (struct ol_http_hdr){"x-amz-tagging-count", ntags};
    nh += ol_s3_cors_headers(r, h + nh, OL_S3_CORS_MAX_HDRS, cors, sizeof(cors));

    char rdma_buf[64];
    if (rx) {
        /* Every byte lands in the client's memory before the headers go:
         * a failure is still a clean error response. */
        for (uint64_t off = start, left = len; left > 0;) {
            if (!data) {
                n = ol_obj_read(rd, off, left, &data);
                if (n <= 0) {
                    rc = ol_s3_error(r, OL_S3_InternalError, "The object could not be read.");
                    goto out;
                }
            }
            size_t take = (size_t)n < left ? (size_t)n : (size_t)left;
            int mrc = ol_s3_rdma_write(rx, off - start, data, take);
            if (mrc < 0) {
                rc = ol_s3_rdma_error(r, mrc);
                goto out;
            }
            off += take;
            left -= take;
            data = NULL;
        }
        int frc = len > 0 ? ol_s3_rdma_flush(rx) : 0;
        if (frc < 0) {
            rc = ol_s3_rdma_error(r, frc);
            goto out;
        }
        nh += ol_s3_rdma_reply_hdrs(ranged > 0 ? 206 : 200, len, rdma_buf, h + nh);
        rc = ol_http_resp_begin(r->conn, ranged > 0 ? 206 : 200, h, nh, 0);
        goto out;
    }

    rc = ol_http_resp_begin(r->conn, ranged > 0 ? 206 : 200, h, nh, len);
    if (rc < 0 || r->http->is_head || len == 0)
        goto out;
    uint64_t off = start, left = len;
    /* Each round sends at least one byte or fails. */
    while (left > 0) {
        if (!data && zfd < 0) {
            n = zc ? zero_copy(rd, off, left, &data, &zfd, &zoff) : -EAGAIN;
            if (n == -EAGAIN)
                n = ol_obj_read(rd, off, left, &data);
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
        /* Under a bandwidth limit (access/ratelimit.h), a chunk at a time,
         * each followed by the wait it calls for. */
        size_t chunk = ol_rl_chunk(r->rl_user);
        if (take > chunk)
            take = chunk;
        if (zfd >= 0) {
            /* Sent at once after the check; what the socket did not take
             * is checked again next round (the wait for room may let the
             * kernel drop and re-read those pages). */
            ssize_t sent = ol_http_resp_sendfile(r->conn, zfd, zoff, take);
            if (sent < 0) {
                rc = (int)sent;
                goto out;
            }
            take = (size_t)sent;
            rc = 0;
        } else {
            rc = ol_http_resp_write(r->conn, data, take);
            if (rc < 0)
                goto out;
        }
        off += take;
        left -= take;
        if (data && (size_t)n > take) {
            data += take; /* the rest of this read, after a paced chunk */
            n -= (ssize_t)take;
        } else {
            data = NULL;
        }
        zfd = -1;
        if (r->rl_user)
            ol_rl_pace(r->ctx->rl, r->rl_user, take);
    }
out:
    free(h);
    free(rx);
    ol_obj_read_close(rd);
    return rc;
}

int ol_s3_delete_object(struct ol_s3_req *r)
{
    const char *vid = ol_s3_version_param(r);
    struct ol_store_del_res res;
    int rc = ol_obj_delete_v(r->ctx->obj, r->bucket, r->key, r->key_len, vid, &res);
    if (rc < 0)
        return ol_s3_version_open_error(r, rc, vid);
    /* Versioned buckets: the marker made, or the version removed. */
    struct ol_http_hdr h[2];
    size_t nh = 0;
    if (res.marker)
        h[nh++] = (struct ol_http_hdr){"x-amz-delete-marker", "true"};
    if (res.vid[0])
        h[nh++] = (struct ol_http_hdr){"x-amz-version-id", res.vid};
    return ol_s3_send_empty(r, 204, h, nh);
}

/* ---- exported for the erasure-coded handlers (ec_object.c) ---- */

int ol_s3_parse_range(const struct ol_slice *h, uint64_t size, uint64_t *start, uint64_t *end)
{
    return parse_range(h, size, start, end);
}

int ol_s3_read_conditions(const struct ol_s3_req *r, const struct ol_obj_info *info)
{
    return read_conditions(r, info);
}

int ol_s3_send_error_hdrs(struct ol_s3_req *r, int status, const char *code, const char *msg,
                          const struct ol_http_hdr *extra, size_t nextra)
{
    return send_error_hdrs(r, status, code, msg, extra, nextra);
}
