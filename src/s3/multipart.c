/* Multipart upload handlers: Create, UploadPart, Complete, Abort.
 * (ListParts and ListMultipartUploads are listings: list.c.) */
#include <errno.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/hex.h"
#include "core/log.h"
#include "core/loop.h"
#include "s3/checksum.h"
#include "s3/meta.h"
#include "s3/object.h"
#include "s3/rdma.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "s3/sse.h"
#include "store/store.h"

/* An upload's blob: its headers, and the internal entries added here
 * (checksum, tags, ACL, encryption). */
#define UPLOAD_META_MAX (OL_S3_META_MAX + 128 + OL_SSE_ENTRY_MAX + 8)
#define MAX_PARTS 10000
#define COMPLETE_BODY_MAX (4u << 20)

/* The additional checksum an upload is created with: x-amz-checksum-algorithm
 * and x-amz-checksum-type (COMPOSITE, or FULL_OBJECT for the CRCs, whose
 * part values can be combined).  S3's default type is FULL_OBJECT for
 * CRC64NVME and COMPOSITE for the others.  Returns 0, or sends the error and
 * returns -1. */
static int upload_checksum_args(struct ol_s3_req *r, enum ol_ck_algo *algo, const char **type)
{
    const struct ol_slice *ah = ol_s3_header(r, "x-amz-checksum-algorithm");
    const struct ol_slice *th = ol_s3_header(r, "x-amz-checksum-type");
    *algo = OL_CK_NONE;
    *type = NULL;
    if (ah) {
        *algo = ol_ck_parse(ah->p, ah->n);
        if (*algo == OL_CK_NONE) {
            ol_s3_error(r, OL_S3_InvalidRequest, "Checksum algorithm provided is unsupported.");
            return -1;
        }
    }
    if (th) {
        bool full = th->n == 11 && strncasecmp(th->p, "FULL_OBJECT", 11) == 0;
        bool comp = th->n == 9 && strncasecmp(th->p, "COMPOSITE", 9) == 0;
        if ((!full && !comp) || *algo == OL_CK_NONE) {
            ol_s3_error(r, OL_S3_InvalidRequest, "Value for x-amz-checksum-type is invalid.");
            return -1;
        }
        if ((full && !ol_ck_is_crc(*algo)) || (comp && *algo == OL_CK_CRC64NVME)) {
            ol_s3_error(r, OL_S3_InvalidRequest,
                        "The checksum type is not supported with this checksum algorithm.");
            return -1;
        }
        *type = full ? "FULL_OBJECT" : "COMPOSITE";
    } else if (*algo != OL_CK_NONE) {
        *type = *algo == OL_CK_CRC64NVME ? "FULL_OBJECT" : "COMPOSITE";
    }
    return 0;
}

/* The checksum facts of an upload's or object's metadata ("ALGO TYPE [value]"). */
static enum ol_ck_algo meta_checksum(const uint8_t *meta, size_t len, bool *full)
{
    const uint8_t *v;
    size_t vl;
    *full = false;
    if (ol_s3_meta_get(meta, len, OL_S3_META_CHECKSUM, &v, &vl) < 0)
        return OL_CK_NONE;
    const char *sp = memchr(v, ' ', vl);
    if (!sp)
        return OL_CK_NONE;
    size_t an = (size_t)(sp - (const char *)v);
    *full = vl - an - 1 >= 11 && memcmp(sp + 1, "FULL_OBJECT", 11) == 0;
    return ol_ck_parse((const char *)v, an);
}

int ol_s3_create_multipart(struct ol_s3_req *r)
{
    uint8_t meta[UPLOAD_META_MAX];
    int ml = ol_s3_meta_encode(r, meta, OL_S3_META_MAX);
    if (ml < 0)
        return ol_s3_meta_error(r, ml);
    enum ol_ck_algo algo = OL_CK_NONE;
    const char *type = NULL;
    int rc = upload_checksum_args(r, &algo, &type);
    if (rc < 0)
        return 0;
    size_t mlen = (size_t)ml;
    if (algo != OL_CK_NONE) {
        char v[64];
        int vn = snprintf(v, sizeof(v), "%s %s", ol_ck_name(algo), type);
        if (ol_s3_meta_add(meta, sizeof(meta), &mlen, OL_S3_META_CHECKSUM, v, (size_t)vn) < 0)
            return ol_s3_meta_error(r, -E2BIG);
    }
    /* The tags are checked now and committed with the object at Complete. */
    const char *tag_msg;
    if (!ol_s3_tagging_header_ok(r, &tag_msg))
        return ol_s3_error(r, OL_S3_InvalidTag, tag_msg);
    const struct ol_slice *tg = ol_s3_header(r, "x-amz-tagging");
    if (tg && tg->n && ol_s3_meta_add(meta, sizeof(meta), &mlen, OL_S3_META_TAGS, tg->p, tg->n) < 0)
        return ol_s3_meta_error(r, -E2BIG);
    /* So is the canned ACL. */
    enum ol_acl acl;
    bool acl_refused;
    rc = ol_s3_write_acl(r, &acl, &acl_refused);
    if (acl_refused)
        return rc;
    const char *an = ol_acl_name(acl);
    if (acl != OL_ACL_PRIVATE &&
        ol_s3_meta_add(meta, sizeof(meta), &mlen, OL_S3_META_ACL, an, strlen(an)) < 0)
        return ol_s3_meta_error(r, -E2BIG);
    /* Encryption: one data key for the upload, each part its own stream
     * (obj/sse.h, layout 'p'). */
    struct ol_s3_sse sse;
    struct ol_sse_obj so;
    if (ol_s3_sse_for_write(r, &sse) < 0 ||
        ol_s3_sse_seal(r, &sse, 'p', meta, sizeof(meta), &mlen, &so) < 0)
        return 0;
    OPENSSL_cleanse(&so, sizeof(so));
    char id[40];
    rc = ol_obj_upload_create(r->ctx->obj, r->bucket, r->key, r->key_len, meta,
                                (uint32_t)mlen, r->now_ns, id);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "InitiateMultipartUploadResult");
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_xml_text(&x, "Key", r->key, r->key_len);
    ol_xml_str(&x, "UploadId", id);
    ol_xml_end_doc(&x);
    if (x.failed) {
        rc = ol_s3_send_xml(r, 200, &x);
    } else {
        struct ol_http_hdr h[6] = {
            {"Content-Type", "application/xml"},
            {"x-amz-request-id", r->request_id},
        };
        size_t nh = 2;
        if (algo != OL_CK_NONE) {
            h[nh++] = (struct ol_http_hdr){"x-amz-checksum-algorithm", ol_ck_name(algo)};
            h[nh++] = (struct ol_http_hdr){"x-amz-checksum-type", type};
        }
        nh += ol_s3_sse_hdrs(sse.spec.mode, &sse, h + nh);
        rc = ol_http_respond(r->conn, 200, h, nh, x.buf, x.len);
    }
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
    if (m->ok && m->meta && u->meta_len <= UPLOAD_META_MAX) {
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
    int rc = ol_obj_upload_get(r->ctx->obj, r->bucket, p->value, match_upload, &m);
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
    int rdma_sent;
    int rdma = ol_s3_rdma_put_setup(r, &rdma_sent);
    if (rdma < 0)
        return rdma_sent;
    const struct ol_s3_param *pn = ol_s3_param(r, "partNumber");
    char *end = NULL;
    long part = pn ? strtol(pn->value, &end, 10) : 0;
    if (!pn || !end || *end || part < 1 || part > MAX_PARTS)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Part number must be an integer between 1 and 10000, inclusive.");
    int err;
    uint8_t *umeta = malloc(UPLOAD_META_MAX);
    if (!umeta)
        return ol_s3_error(r, OL_S3_InternalError, "out of memory");
    uint32_t umeta_len = 0;
    const char *id = upload_of_request(r, &err, umeta, &umeta_len);
    bool full;
    enum ol_ck_algo algo = id ? meta_checksum(umeta, umeta_len, &full) : OL_CK_NONE;
    if (!id) {
        free(umeta);
        return ol_s3_error_from(r, err);
    }
    /* An encrypted upload's data key seals the part (SSE-C: the request
     * must carry the upload's key). */
    struct ol_s3_sse sse;
    struct ol_sse_obj so;
    int krc = ol_s3_sse_parse(r, false, &sse);
    if (krc == 0 && sse.spec.mode == OL_SSE_S3)
        sse.spec.mode = OL_SSE_NONE; /* the upload decides */
    if (krc == 0)
        krc = ol_s3_sse_upload_key(r, umeta, umeta_len, &sse, &so);
    free(umeta);
    OPENSSL_cleanse(sse.spec.ckey, sizeof(sse.spec.ckey));
    if (krc < 0)
        return 0;
    struct ol_s3_body_ck ck;
    int rc = ol_s3_body_ck_parse(r, algo, &ck);
    if (rc < 0)
        return ol_s3_receive_fail(r, rc, &ck);
    struct ol_obj_writer *w;
    char etag[33];
    struct ol_obj_target tg = {.bucket = r->bucket, .upload_id = id, .part_no = (uint32_t)part,
                               .sse = &so};
    enum ol_sse_mode so_mode = so.mode;
    rc = ol_s3_receive_body_ck(r, &tg, &w, etag, &ck);
    OPENSSL_cleanse(&so, sizeof(so));
    if (rc < 0)
        return ol_s3_receive_fail(r, rc, &ck);
    char stored[64];
    ol_ck_part_etag_encode(etag, ck.algo, ck.got, stored);
    rc = ol_obj_write_commit_part(w, stored);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char qetag[40];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    struct ol_http_hdr h[6];
    size_t nh = 0;
    char rdma_buf[64];
    if (rdma)
        nh += ol_s3_rdma_reply_hdrs(200, (uint64_t)ol_s3_body_length(r), rdma_buf, h + nh);
    h[nh++] = (struct ol_http_hdr){"ETag", qetag};
    nh += ol_s3_sse_hdrs(so_mode, &sse, h + nh);
    if (ck.algo != OL_CK_NONE)
        h[nh++] = (struct ol_http_hdr){ol_ck_header(ck.algo), ck.b64};
    return ol_s3_send_empty(r, 200, h, nh);
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

int ol_s3_complete_parse(const char *body, size_t len, struct ol_complete_part *parts,
                         uint32_t *n)
{
    struct complete_doc d = {.parts = parts};
    *n = 0;
    if (ol_xml_parse(body, len, on_elem, on_text, &d) != 0 || d.bad || d.n == 0)
        return -EINVAL;
    *n = d.n;
    return 0;
}

int ol_s3_multipart_etag(const struct ol_complete_part *parts, uint32_t n, char out[64])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        return -ENOMEM;
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t bin[16], pd[OL_CK_MAX_BYTES];
        char e[33];
        enum ol_ck_algo pa;
        bool ok = ol_ck_part_etag_decode(parts[i].etag, e, &pa, pd) &&
                  ol_unhex(e, strlen(e), bin, 16);
        if (!ok) {
            EVP_MD_CTX_free(md);
            return -OL_EINVALIDPART;
        }
        EVP_DigestUpdate(md, bin, 16);
    }
    uint8_t digest[16];
    unsigned dl;
    EVP_DigestFinal_ex(md, digest, &dl);
    EVP_MD_CTX_free(md);
    int w = 0;
    for (int k = 0; k < 16; k++)
        w += snprintf(out + w, 64 - (size_t)w, "%02x", digest[k]);
    snprintf(out + w, 64 - (size_t)w, "-%u", n);
    return 0;
}

int ol_s3_complete_error(struct ol_s3_req *r, int rc)
{
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
    return msg ? ol_s3_error(r, ol_s3_code_from_err(rc), msg) : ol_s3_error_from(r, rc);
}

/* ---- CompleteMultipartUpload: the object's checksum and part sizes ---- */

#define PARTS_META_MAX 4096 /* run-length part sizes kept for GET ?partNumber= */

struct stored_part {
    bool present;
    uint64_t size;
    char etag[64]; /* as stored (may carry a checksum) */
};

static int collect_part(void *ctx, const struct ol_part_info *p)
{
    struct stored_part *sp = ctx;
    if (p->part_no >= 1 && p->part_no <= MAX_PARTS) {
        sp[p->part_no].present = true;
        sp[p->part_no].size = p->size;
        memcpy(sp[p->part_no].etag, p->etag, sizeof(sp[p->part_no].etag));
    }
    return 0;
}

/* The checksum of the completed object, from the parts' stored checksums:
 * COMPOSITE, the algorithm over the concatenated part digests plus "-N";
 * FULL_OBJECT, the CRC of the whole object by combining the part CRCs.
 * Writes base64 into out; false when a part has no checksum of the
 * upload's algorithm (e.g. it was copied with UploadPartCopy). */
static bool complete_checksum(enum ol_ck_algo algo, bool full, const struct stored_part *sp,
                              const struct ol_complete_part *parts, uint32_t n,
                              char out[OL_CK_B64_MAX])
{
    struct ol_ck all;
    if (ol_ck_init(&all, algo) < 0)
        return false;
    uint64_t crc = 0;
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; i++) {
        const struct stored_part *p = &sp[parts[i].part_no];
        char md5[33];
        enum ol_ck_algo pa;
        uint8_t d[OL_CK_MAX_BYTES];
        ok = ol_ck_part_etag_decode(p->etag, md5, &pa, d) && pa == algo;
        if (!ok)
            break;
        if (full)
            crc = i == 0 ? ol_ck_crc_value(algo, d)
                         : ol_ck_crc_combine(algo, crc, ol_ck_crc_value(algo, d), p->size);
        else
            ol_ck_update(&all, d, ol_ck_len(algo));
    }
    uint8_t digest[OL_CK_MAX_BYTES];
    if (full)
        ol_ck_crc_bytes(algo, crc, digest);
    else
        ol_ck_final(&all, digest);
    ol_ck_free(&all);
    if (!ok)
        return false;
    size_t bl = ol_b64_encode(digest, ol_ck_len(algo), out);
    if (!full)
        snprintf(out + bl, OL_CK_B64_MAX - bl, "-%u", n);
    return true;
}

/* Part sizes, run-length coded: "size*count,...".  false if it would not fit. */
static bool parts_rle(const struct stored_part *sp, const struct ol_complete_part *parts,
                      uint32_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (uint32_t i = 0; i < n;) {
        uint64_t size = sp[parts[i].part_no].size;
        uint32_t k = i + 1;
        while (k < n && sp[parts[k].part_no].size == size)
            k++;
        int w = snprintf(out + o, cap - o, "%s%llu*%u", o ? "," : "", (unsigned long long)size,
                         k - i);
        if (w < 0 || (size_t)w >= cap - o)
            return false;
        o += (size_t)w;
        i = k;
    }
    return true;
}

/* ---- Recently completed uploads ----
 *
 * S3 answers a repeated CompleteMultipartUpload of an upload it has already
 * completed with the same result for a while (a client whose first reply
 * was lost retries), instead of NoSuchUpload.  The upload itself is gone
 * once completed, so each bucket keeps a short list of its latest completed
 * uploads as a bucket setting: one line per upload, newest first,
 * "<upload id> <expiry ns> <etag> <version id or -> <key in hex>".  The list
 * is bounded (DONE_MAX lines, each at most an hour old), durable (it is a
 * committed store value) and only read when an upload id is not found.
 * One-drive mode only: erasure-coded buckets have no settings. */
#define DONE_SETTING "mp-completed"
#define DONE_MAX 32
#define DONE_TTL_NS (3600LL * 1000000000LL)
#define DONE_LINE_MAX (40 + 24 + 64 + OL_STORE_VID_MAX + 2 * 1024 + 8)
#define DONE_CAP (DONE_MAX * DONE_LINE_MAX)

/* Read-modify-write of the list is serialized within the process, so that
 * two completions in one bucket do not drop each other's line. */
/* Serialises the read-modify-write of the record within this process.  Not
 * a pthread mutex: the bucket setting's read and write park the fiber (EC:
 * drive calls on other fibers), and a second CompleteMultipartUpload on the
 * same loop thread blocking in pthread_mutex_lock would stop that thread,
 * and with it the holder (seen: both loops hung on four concurrent
 * Completes).  A waiter sleeps the fiber way instead. */
static atomic_bool done_busy;

static void done_lock(void)
{
    bool idle = false;
    while (!atomic_compare_exchange_weak(&done_busy, &idle, true)) {
        idle = false;
        ol_io_sleep_ms(1);
    }
}

static void done_unlock(void)
{
    atomic_store(&done_busy, false);
}

static void done_hex(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = hex[(unsigned char)s[i] & 0xF];
    }
    out[2 * n] = '\0';
}

/* One parsed line; fields point into the (modified) list buffer. */
struct done_line {
    const char *id, *etag, *vid, *key_hex;
    long long expiry_ns;
};

/* Splits the line that starts at *pos (NUL-terminating its fields) and moves
 * *pos past it; false at the end of the list or on a malformed line. */
static bool done_next(char **pos, char *end, struct done_line *l)
{
    char *p = *pos;
    if (p >= end)
        return false;
    char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return false;
    *nl = '\0';
    *pos = nl + 1;
    char *f[5];
    for (int i = 0; i < 5; i++) {
        f[i] = p;
        char *sp = strchr(p, ' ');
        if (i < 4) {
            if (!sp)
                return false;
            *sp = '\0';
            p = sp + 1;
        }
    }
    l->id = f[0];
    l->expiry_ns = strtoll(f[1], NULL, 10);
    l->etag = f[2];
    l->vid = f[3];
    l->key_hex = f[4];
    return true;
}

/* Reads the bucket's list into buf (DONE_CAP + 1 bytes); its length, or 0. */
static size_t done_read(struct ol_s3_req *r, char *buf)
{
    ssize_t n = ol_obj_bucket_config_get(r->ctx->obj, r->bucket, DONE_SETTING, buf, DONE_CAP);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return (size_t)n;
}

/* Adds a completed upload to the bucket's list.  Best effort: a failure
 * here only means a later retry of the Complete gets NoSuchUpload. */
static void done_record(struct ol_s3_req *r, const char *id, const char *etag, const char *vid)
{
    if (!r->ctx->obj || r->key_len > 1024)
        return;
    char *old = malloc(DONE_CAP + 1);
    char *out = malloc(DONE_CAP);
    char key_hex[2 * 1024 + 1];
    if (!old || !out)
        goto out;
    done_hex(r->key, r->key_len, key_hex);
    int w = snprintf(out, DONE_CAP, "%s %lld %s %s %s\n", id, (long long)(r->now_ns + DONE_TTL_NS),
                     etag, vid[0] ? vid : "-", key_hex);
    if (w < 0 || w >= DONE_CAP)
        goto out;
    size_t o = (size_t)w;
    done_lock();
    size_t n = done_read(r, old);
    char *pos = old;
    struct done_line l;
    for (unsigned kept = 1; kept < DONE_MAX && done_next(&pos, old + n, &l);) {
        if (l.expiry_ns <= r->now_ns || strcmp(l.id, id) == 0)
            continue;
        w = snprintf(out + o, DONE_CAP - o, "%s %lld %s %s %s\n", l.id, l.expiry_ns, l.etag,
                     l.vid, l.key_hex);
        if (w < 0 || (size_t)w >= DONE_CAP - o)
            break;
        o += (size_t)w;
        kept++;
    }
    int rc = ol_obj_bucket_config_put(r->ctx->obj, r->bucket, DONE_SETTING, out, o);
    done_unlock();
    if (rc < 0)
        ol_warn("s3: keeping completed upload %s: %s", id, ol_strerror(rc));
out:
    free(old);
    free(out);
}

/* Finds an upload of this bucket and key completed within the hour. */
static bool done_lookup(struct ol_s3_req *r, char etag[64], char vid[OL_STORE_VID_MAX])
{
    const struct ol_s3_param *p = ol_s3_param(r, "uploadId");
    if (!r->ctx->obj || !p || p->value_len == 0 || r->key_len > 1024)
        return false;
    char *buf = malloc(DONE_CAP + 1);
    char key_hex[2 * 1024 + 1];
    if (!buf)
        return false;
    done_hex(r->key, r->key_len, key_hex);
    size_t n = done_read(r, buf);
    char *pos = buf;
    struct done_line l;
    bool found = false;
    while (!found && done_next(&pos, buf + n, &l)) {
        found = strcmp(l.id, p->value) == 0 && l.expiry_ns > r->now_ns &&
                strcmp(l.key_hex, key_hex) == 0;
        if (found) {
            snprintf(etag, 64, "%s", l.etag);
            snprintf(vid, OL_STORE_VID_MAX, "%s", strcmp(l.vid, "-") == 0 ? "" : l.vid);
        }
    }
    free(buf);
    return found;
}

/* The CompleteMultipartUploadResult (ckval "" when the object has no
 * additional checksum). */
static int complete_result(struct ol_s3_req *r, const char *etag, const char *vid,
                           enum ol_ck_algo algo, bool full, const char *ckval,
                           enum ol_sse_mode sse_mode)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "CompleteMultipartUploadResult");
    char loc[160];
    snprintf(loc, sizeof(loc), "/%s/", r->bucket);
    ol_xml_str(&x, "Location", loc);
    ol_xml_str(&x, "Bucket", r->bucket);
    ol_xml_text(&x, "Key", r->key, r->key_len);
    char qetag[72];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    ol_xml_str(&x, "ETag", qetag);
    if (ckval[0]) {
        char tag[24];
        snprintf(tag, sizeof(tag), "Checksum%s", ol_ck_name(algo));
        ol_xml_str(&x, tag, ckval);
        ol_xml_str(&x, "ChecksumType", full ? "FULL_OBJECT" : "COMPOSITE");
    }
    ol_xml_end_doc(&x);
    struct ol_http_hdr vh[3];
    size_t nvh = 0;
    if (vid[0])
        vh[nvh++] = (struct ol_http_hdr){"x-amz-version-id", vid};
    /* SSE-C's key MD5 is not known here (Complete carries no key). */
    if (sse_mode == OL_SSE_S3)
        nvh += ol_s3_sse_hdrs(sse_mode, NULL, vh + nvh);
    int rc = ol_s3_send_xml_hdrs(r, 200, &x, vh, nvh);
    ol_xml_free(&x);
    return rc;
}

int ol_s3_complete_multipart(struct ol_s3_req *r)
{
    int err;
    struct ol_s3_tag_attr tags = {0}; /* the upload's x-amz-tagging, when given */
    uint32_t meta_len = 0;
    size_t meta_cap = OL_S3_META_MAX + 256 + PARTS_META_MAX;
    uint8_t *meta = malloc(meta_cap);
    if (!meta)
        return ol_s3_error(r, OL_S3_InternalError, "out of memory");
    const char *id = upload_of_request(r, &err, meta, &meta_len);
    if (!id) {
        free(meta);
        char done_etag[64], done_vid[OL_STORE_VID_MAX];
        if (err == -OL_ENOUPLOAD && done_lookup(r, done_etag, done_vid))
            return complete_result(r, done_etag, done_vid, OL_CK_NONE, false, "", OL_SSE_NONE);
        return ol_s3_error_from(r, err);
    }
    struct ol_store_cond cond;
    char cond_etag[64];
    int has_cond = ol_s3_write_cond(r, &cond, cond_etag);
    if (has_cond < 0) {
        free(meta);
        return 0;
    }
    struct stored_part *sp = NULL;
    char *body = NULL;
    size_t got = 0;
    struct complete_doc d = {.parts = malloc(sizeof(struct ol_complete_part) * MAX_PARTS)};
    int rc = 0;
    if (!d.parts) {
        rc = ol_s3_error(r, OL_S3_InternalError, "out of memory");
        goto out;
    }
    rc = ol_s3_read_doc(r, COMPLETE_BODY_MAX, &body, &got);
    if (rc < 0) {
        ol_http_set_close(r->conn);
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    if (ol_s3_complete_parse(body, got, d.parts, &d.n) < 0) {
        rc = ol_s3_error(r, OL_S3_MalformedXML,
                         "The XML you provided was not well-formed or did not validate against "
                         "our published schema.");
        goto out;
    }
    /* The parts as stored: their sizes, and the stored ETags (which may
     * carry a checksum) that the store compares against. */
    sp = calloc(MAX_PARTS + 1, sizeof(*sp));
    if (!sp) {
        rc = ol_s3_error(r, OL_S3_InternalError, "out of memory");
        goto out;
    }
    rc = ol_obj_part_list(r->ctx->obj, r->bucket, id, 0, collect_part, sp);
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    bool sizes_known = true;
    for (uint32_t i = 0; i < d.n; i++) {
        uint32_t pn = d.parts[i].part_no;
        char md5[33];
        enum ol_ck_algo pa;
        uint8_t pd[OL_CK_MAX_BYTES];
        if (pn < 1 || pn > MAX_PARTS || !sp[pn].present) {
            sizes_known = false;
            continue;
        }
        if (ol_ck_part_etag_decode(sp[pn].etag, md5, &pa, pd) &&
            strcasecmp(md5, d.parts[i].etag) == 0)
            memcpy(d.parts[i].etag, sp[pn].etag, sizeof(d.parts[i].etag));
    }
    /* A part number named twice in a row (a client that re-sent a part and
     * listed both sends) is one part, the upload's current one, as Ceph RGW
     * accepts it; the entry whose ETag matches the stored part is kept.  A
     * repeat further on is a descent and stays InvalidPartOrder. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < d.n; i++) {
        uint32_t pn = d.parts[i].part_no;
        if (kept > 0 && d.parts[kept - 1].part_no == pn) {
            bool prev_ok = pn >= 1 && pn <= MAX_PARTS && sp[pn].present &&
                           strcasecmp(d.parts[kept - 1].etag, sp[pn].etag) == 0;
            if (!prev_ok)
                d.parts[kept - 1] = d.parts[i];
            continue;
        }
        d.parts[kept++] = d.parts[i];
    }
    d.n = kept;
    /* The multipart ETag: MD5 over the parts' binary MD5s, then "-N". */
    char mp_etag[64];
    if (ol_s3_multipart_etag(d.parts, d.n, mp_etag) < 0) {
        rc = ol_s3_error(r, OL_S3_InvalidPart,
                         "One or more of the specified parts could not be found.");
        goto out;
    }

    /* The object takes the metadata given when the upload was created, with
     * its own checksum and part sizes in place of the upload's entries. */
    bool full = false;
    enum ol_ck_algo algo = meta_checksum(meta, meta_len, &full);
    /* The tags given at CreateMultipartUpload (checked then) commit with
     * the object, in its entry. */
    const uint8_t *tv = NULL;
    size_t tvl = 0;
    if (ol_s3_meta_get(meta, meta_len, OL_S3_META_TAGS, &tv, &tvl) != 0)
        tvl = 0;
    const char *tag_msg;
    int trc = ol_s3_tag_attr_from_query(&tags, (const char *)tv, tvl, &tag_msg);
    if (trc < 0) {
        rc = trc == -EINVAL ? ol_s3_error(r, OL_S3_InvalidTag, tag_msg) : ol_s3_error_from(r, trc);
        goto out;
    }
    const uint8_t *av = NULL;
    size_t avl = 0;
    enum ol_acl acl = OL_ACL_PRIVATE;
    if (ol_s3_meta_get(meta, meta_len, OL_S3_META_ACL, &av, &avl) != 0 ||
        ol_acl_parse((const char *)av, avl, &acl) != 0)
        acl = OL_ACL_PRIVATE;
    /* The upload's encryption entry outlives the strip: it opens the
     * object, whose parts are its sealed streams ('p'). */
    char sse_entry[OL_SSE_ENTRY_MAX];
    size_t sse_len = 0;
    const uint8_t *sv;
    size_t svl;
    if (ol_s3_meta_get(meta, meta_len, OL_SSE_META, &sv, &svl) == 0 && svl < sizeof(sse_entry)) {
        memcpy(sse_entry, sv, svl);
        sse_len = svl;
    }
    enum ol_sse_mode sse_mode = OL_SSE_NONE;
    char sse_layout;
    if (sse_len)
        (void)ol_sse_entry_peek((const uint8_t *)sse_entry, sse_len, &sse_mode, &sse_layout);
    size_t mlen = ol_s3_meta_strip_internal(meta, meta_len);
    if (sse_len && ol_s3_meta_add(meta, meta_cap, &mlen, OL_SSE_META, sse_entry, sse_len) < 0) {
        rc = ol_s3_meta_error(r, -E2BIG);
        goto out;
    }
    char ckval[OL_CK_B64_MAX] = "";
    if (algo != OL_CK_NONE && sizes_known &&
        complete_checksum(algo, full, sp, d.parts, d.n, ckval)) {
        const struct ol_slice *given = ol_s3_header(r, ol_ck_header(algo));
        if (full && given && (given->n != strlen(ckval) || memcmp(given->p, ckval, given->n))) {
            rc = ol_s3_error(r, OL_S3_BadDigest,
                             "The checksum you specified did not match the calculated "
                             "full-object checksum.");
            goto out;
        }
        char v[128];
        int vn = snprintf(v, sizeof(v), "%s %s %s", ol_ck_name(algo),
                          full ? "FULL_OBJECT" : "COMPOSITE", ckval);
        if (ol_s3_meta_add(meta, meta_cap, &mlen, OL_S3_META_CHECKSUM, v, (size_t)vn) < 0)
            ckval[0] = 0;
    } else {
        ckval[0] = 0;
    }
    char *rle = malloc(PARTS_META_MAX);
    bool have_parts = rle && sizes_known && parts_rle(sp, d.parts, d.n, rle, PARTS_META_MAX) &&
                      ol_s3_meta_add(meta, meta_cap, &mlen, OL_S3_META_PARTS, rle,
                                     strlen(rle)) == 0;
    free(rle);
    /* An encrypted object cannot be read without its parts' sizes. */
    if (sse_len && !have_parts) {
        rc = sizes_known ? ol_s3_error(r, OL_S3_InvalidRequest,
                                       "Too many distinct part sizes for an encrypted "
                                       "multipart upload.")
                         : ol_s3_complete_error(r, -OL_EINVALIDPART);
        goto out;
    }
    struct ol_obj_attr attrs[2];
    uint32_t nattrs = 0;
    if (tags.attr.val)
        attrs[nattrs++] = tags.attr;
    if (acl != OL_ACL_PRIVATE)
        attrs[nattrs++] = ol_s3_acl_attr(acl);
    struct ol_obj_info info = {
        .mtime_ns = r->now_ns,
        .nparts = d.n,
        .meta = meta,
        .meta_len = (uint32_t)mlen,
        .attrs = attrs,
        .nattrs = nattrs,
    };
    snprintf(info.etag, sizeof(info.etag), "%s", mp_etag);
    char vid[OL_STORE_VID_MAX];
    rc = ol_obj_upload_complete_if(r->ctx->obj, r->bucket, id, d.parts, d.n,
                                     (uint64_t)r->ctx->cfg->min_part_bytes, &info,
                                     has_cond ? &cond : NULL, vid);
    if (rc == -OL_EPRECONDITION) {
        rc = ol_s3_write_cond_fail(r, &cond);
        goto out;
    }
    if (rc < 0) {
        rc = ol_s3_complete_error(r, rc);
        goto out;
    }
    done_record(r, id, info.etag, vid);
    rc = complete_result(r, info.etag, vid, algo, full, ckval, sse_mode);
out:
    ol_s3_tag_attr_free(&tags);
    free(sp);
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
    int rc = ol_obj_upload_abort(r->ctx->obj, r->bucket, id);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 204, NULL, 0);
}

/* ---- the reaper of abandoned uploads ----
 *
 * Uploads that are never completed nor aborted hold their parts' space
 * forever.  Every multipart_reap_interval_ms this fiber (loop 0) walks the
 * buckets' uploads and aborts those started more than multipart_expiry_sec
 * ago (0 turns it off).  Work per pass is bounded (REAP_MAX_PER_PASS aborts;
 * the next pass goes on), and no store callback is held across an abort. */
#define REAP_MAX_BUCKETS 100000
#define REAP_MAX_PER_PASS 1000
#define REAP_SLICE_MS 200

struct reap_buckets {
    char (*names)[64];
    size_t n, cap;
};

static int reap_bucket_one(void *ctx, const struct ol_bucket_info *b)
{
    struct reap_buckets *rb = ctx;
    if (rb->n == rb->cap) {
        size_t cap = rb->cap ? rb->cap * 2 : 64;
        if (cap > REAP_MAX_BUCKETS)
            return 1;
        void *p = realloc(rb->names, cap * sizeof(*rb->names));
        if (!p)
            return 1;
        rb->names = p;
        rb->cap = cap;
    }
    memcpy(rb->names[rb->n++], b->name, sizeof(b->name));
    return 0;
}

struct reap_ids {
    char (*ids)[40];
    size_t n, cap;
    int64_t cutoff_ns;
};

static int reap_upload_one(void *ctx, const struct ol_upload_info *u)
{
    struct reap_ids *ri = ctx;
    if (u->ctime_ns > ri->cutoff_ns)
        return 0;
    if (ri->n == ri->cap)
        return 1;
    memcpy(ri->ids[ri->n++], u->upload_id, sizeof(u->upload_id));
    return 0;
}

static bool reap_stopping(void)
{
    struct ol_loop *l = ol_loop_current();
    return l && ol_loop_stopping(l);
}

static void reap_pass(struct ol_s3_ctx *ctx, struct reap_ids *ri)
{
    struct reap_buckets rb = {0};
    if (ol_obj_bucket_list(ctx->obj, reap_bucket_one, &rb) < 0)
        goto out;
    ri->n = 0;
    ri->cutoff_ns = ol_wall_ns() - ctx->cfg->multipart_expiry_sec * 1000000000LL;
    for (size_t b = 0; b < rb.n && ri->n < ri->cap && !reap_stopping(); b++) {
        size_t before = ri->n;
        (void)ol_obj_upload_list(ctx->obj, rb.names[b], reap_upload_one, ri);
        for (size_t i = before; i < ri->n; i++) {
            int rc = ol_obj_upload_abort(ctx->obj, rb.names[b], ri->ids[i]);
            if (rc < 0 && rc != -OL_ENOUPLOAD)
                ol_log_limited(OL_LOG_WARN, "multipart reaper: abort %s: %s", ri->ids[i],
                               ol_strerror(rc));
        }
        if (ri->n > before)
            ol_info("multipart reaper: aborted %zu upload(s) in %s", ri->n - before,
                    rb.names[b]);
    }
out:
    free(rb.names);
}

void ol_s3_upload_reaper(void *arg)
{
    struct ol_s3_ctx *ctx = arg;
    struct reap_ids ri = {.cap = REAP_MAX_PER_PASS};
    ri.ids = calloc(ri.cap, sizeof(*ri.ids));
    if (!ri.ids) {
        ol_warn("multipart reaper: out of memory; abandoned uploads will not be removed");
        return;
    }
    uint64_t next = ol_mono_ms() + (uint64_t)ctx->cfg->multipart_reap_interval_ms;
    /* Ends when the loop stops; each round sleeps one short slice, so the
     * stop flag is seen within REAP_SLICE_MS. */
    while (!reap_stopping()) {
        uint64_t now = ol_mono_ms();
        if (now < next) {
            uint64_t wait = next - now;
            ol_io_sleep_ms(wait < REAP_SLICE_MS ? (unsigned)wait : REAP_SLICE_MS);
            continue;
        }
        if (ctx->cfg->multipart_expiry_sec > 0)
            reap_pass(ctx, &ri);
        next = ol_mono_ms() + (uint64_t)ctx->cfg->multipart_reap_interval_ms;
    }
    free(ri.ids);
}
