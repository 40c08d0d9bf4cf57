/* Bucket versioning: GetBucketVersioning, PutBucketVersioning and
 * ListObjectVersions.  The engine keeps the versions (store/versions.c); the
 * object handlers pass version ids through (object.c, copy.c, delete.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "s3/list.h"
#include "obj/obj.h"
#include "s3/authz.h"
#include "s3/s3.h"
#include "store/store.h"

#define OL_VERSIONING_DOC_MAX 4096u
#define OL_VERSIONS_SCAN_MAX 100000u /* entries one listing request may skip over */

int ol_s3_get_bucket_versioning(struct ol_s3_req *r)
{
    enum ol_versioning v;
    int rc = ol_obj_versioning_get(r->ctx->obj, r->bucket, &v);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "VersioningConfiguration");
    if (v != OL_VERSIONING_OFF)
        ol_xml_str(&x, "Status", v == OL_VERSIONING_ENABLED ? "Enabled" : "Suspended");
    ol_xml_end_doc(&x);
    rc = x.failed ? ol_s3_error_from(r, -ENOMEM) : ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
    return rc;
}

struct ver_doc {
    char status[16];
    bool mfa;
    bool bad;
};

static int ver_on_elem(void *ctx, const char *path, bool start)
{
    (void)ctx;
    (void)path;
    (void)start;
    return 0;
}

static int ver_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct ver_doc *d = ctx;
    if (strcmp(path, "VersioningConfiguration/Status") == 0) {
        if (len >= sizeof(d->status))
            d->bad = true;
        else
            snprintf(d->status, sizeof(d->status), "%.*s", (int)len, text);
    } else if (strcmp(path, "VersioningConfiguration/MfaDelete") == 0) {
        /* "Disabled" asks for nothing; "Enabled" for MFA delete, which this
         * server cannot check. */
        d->mfa = !(len == 8 && memcmp(text, "Disabled", 8) == 0);
    }
    return 0;
}

int ol_s3_put_bucket_versioning(struct ol_s3_req *r)
{
    if (ol_s3_header(r, "x-amz-mfa"))
        return ol_s3_error(r, OL_S3_NotImplemented, "MFA delete is not implemented by OpenLake.");
    char *doc = NULL;
    size_t len = 0;
    int rc = ol_s3_read_doc(r, OL_VERSIONING_DOC_MAX, &doc, &len);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    struct ver_doc d;
    memset(&d, 0, sizeof(d));
    rc = ol_xml_parse(doc, len, ver_on_elem, ver_on_text, &d);
    free(doc);
    if (rc < 0 || d.bad)
        return ol_s3_error(r, OL_S3_MalformedXML,
                           "The XML you provided was not well-formed or did not validate "
                           "against our published schema.");
    if (d.mfa)
        return ol_s3_error(r, OL_S3_NotImplemented, "MFA delete is not implemented by OpenLake.");
    enum ol_versioning v;
    if (strcmp(d.status, "Enabled") == 0) {
        v = OL_VERSIONING_ENABLED;
    } else if (strcmp(d.status, "Suspended") == 0) {
        v = OL_VERSIONING_SUSPENDED;
    } else if (d.status[0] == 0) {
        /* No Status leaves the state as it is (S3 does the same). */
        struct ol_bucket_info bi;
        rc = ol_obj_bucket_get(r->ctx->obj, r->bucket, &bi);
        return rc < 0 ? ol_s3_error_from(r, rc) : ol_s3_send_empty(r, 200, NULL, 0);
    } else {
        return ol_s3_error(r, OL_S3_MalformedXML,
                           "The XML you provided was not well-formed or did not validate "
                           "against our published schema.");
    }
    rc = ol_obj_versioning_put(r->ctx->obj, r->bucket, v);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    return ol_s3_send_empty(r, 200, NULL, 0);
}

/* ---- ListObjectVersions ---- */

static void put_name(struct ol_xml *x, const char *tag, const char *s, size_t n, bool url)
{
    if (!url) {
        ol_xml_text(x, tag, s, n);
        return;
    }
    char *enc = malloc(3 * n + 1);
    if (!enc) {
        x->failed = true;
        return;
    }
    size_t m = ol_s3_url_encode(s, n, enc);
    ol_xml_text(x, tag, enc, m);
    free(enc);
}

static void put_param(struct ol_xml *x, const char *tag, const struct ol_s3_param *p, bool url)
{
    if (p)
        put_name(x, tag, p->value, p->value_len, url);
    else
        ol_xml_text(x, tag, "", 0);
}

static void put_version(struct ol_xml *x, const struct ol_s3_req *r, const char *key, size_t kl,
                        const struct ol_version_info *vi, bool url)
{
    char owner[129];
    ol_s3_bucket_owner(r, owner);
    char d[32];
    ol_xml_open(x, vi->is_marker ? "DeleteMarker" : "Version");
    put_name(x, "Key", key, kl, url);
    ol_xml_str(x, "VersionId", vi->vid);
    ol_xml_bool(x, "IsLatest", vi->is_latest);
    ol_s3_iso_date(vi->info.mtime_ns, d);
    ol_xml_str(x, "LastModified", d);
    if (!vi->is_marker) {
        char q[72];
        int n = snprintf(q, sizeof(q), "\"%s\"", vi->info.etag);
        ol_xml_text(x, "ETag", q, (size_t)n);
        ol_xml_u64(x, "Size", vi->info.size);
        ol_xml_str(x, "StorageClass", "STANDARD");
    }
    ol_xml_open(x, "Owner");
    ol_xml_str(x, "ID", owner);
    ol_xml_str(x, "DisplayName", owner);
    ol_xml_close(x);
    ol_xml_close(x);
}

/* Appends the elements written into b (a document without a root). */
static void xml_append(struct ol_xml *x, const struct ol_xml *b)
{
    if (b->failed || x->failed) {
        x->failed = true;
        return;
    }
    if (x->len + b->len + 1 > x->cap) {
        size_t cap = (x->len + b->len + 1) * 2;
        char *nb = realloc(x->buf, cap);
        if (!nb) {
            x->failed = true;
            return;
        }
        x->buf = nb;
        x->cap = cap;
    }
    if (b->len)
        memcpy(x->buf + x->len, b->buf, b->len);
    x->len += b->len;
    x->buf[x->len] = 0;
}

struct vlist {
    const char *prefix, *delim;
    size_t pl, dl;
    unsigned max;
    bool url;
    unsigned n;          /* results (versions, markers, prefixes) written */
    bool truncated;
    char next_key[OL_S3_MAX_KEY + 1];
    size_t next_key_len;
    char next_vid[OL_STORE_VID_MAX];
    char last_cp[OL_S3_MAX_KEY + 1];
    size_t last_cp_len;
};

/* Skips the versions at or before the markers: every version of key-marker,
 * or those of its versions up to and including version-id-marker.  Returns 1
 * with a version not skipped (the caller's first), 0 at the end, or an error. */
static int skip_markers(struct ol_obj_viter *it, const struct ol_s3_param *km,
                        const struct ol_s3_param *vm, const char **key, size_t *kl,
                        struct ol_version_info *vi)
{
    bool past_vid = !vm || !vm->value[0];
    for (uint32_t guard = 0; guard < OL_VERSIONS_SCAN_MAX; guard++) {
        int rc = ol_obj_viter_next(it, key, kl, vi);
        if (rc)
            return rc == 1 ? 0 : rc;
        if (!km || *kl != km->value_len || memcmp(*key, km->value, *kl) != 0)
            return 1;
        if (!past_vid) {
            if (strcmp(vi->vid, vm->value) == 0)
                past_vid = true;
            continue;
        }
        if (vm && vm->value[0])
            return 1;
    }
    return -EAGAIN;
}

int ol_s3_list_object_versions(struct ol_s3_req *r)
{
    struct vlist L;
    memset(&L, 0, sizeof(L));
    const struct ol_s3_param *pp = ol_s3_param(r, "prefix"), *dp = ol_s3_param(r, "delimiter");
    const struct ol_s3_param *km = ol_s3_param(r, "key-marker");
    const struct ol_s3_param *vm = ol_s3_param(r, "version-id-marker");
    const struct ol_s3_param *ep = ol_s3_param(r, "encoding-type");
    const struct ol_s3_param *mp = ol_s3_param(r, "max-keys");
    if (km && !km->value[0])
        km = NULL;
    if (ep && strcmp(ep->value, "url") != 0)
        return ol_s3_error(r, OL_S3_InvalidArgument, "Invalid Encoding Method specified in Request");
    L.url = ep != NULL;
    L.max = 1000;
    if (mp && ol_s3_parse_count(mp->value, mp->value_len, 1000, &L.max) < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Provided max-keys not an integer or within integer range");
    if (vm && vm->value[0] && !km)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "A version-id marker cannot be specified without a key marker.");
    L.prefix = pp ? pp->value : "";
    L.pl = pp ? pp->value_len : 0;
    L.delim = dp ? dp->value : "";
    L.dl = dp ? dp->value_len : 0;

    struct ol_xml x;
    ol_xml_init(&x);
    struct ol_xml body;
    ol_xml_init(&body);
    struct ol_obj_viter *it = NULL;
    int rc = ol_obj_viter_open(r->ctx->obj, r->bucket, &it);
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    /* Start at whichever is later: the prefix or the key marker. */
    const char *from = L.prefix;
    size_t from_len = L.pl;
    if (km && (km->value_len > L.pl ? memcmp(km->value, L.prefix, L.pl) >= 0
                                    : memcmp(km->value, L.prefix, km->value_len) > 0))
        from = km->value, from_len = km->value_len;
    rc = ol_obj_viter_seek(it, from, from_len);
    const char *key = NULL;
    size_t kl = 0;
    struct ol_version_info vi;
    int have = rc == 0 ? skip_markers(it, km, vm, &key, &kl, &vi) : rc;
    for (uint32_t guard = 0; have == 1 && guard < OL_VERSIONS_SCAN_MAX; guard++) {
        if (kl < L.pl || memcmp(key, L.prefix, L.pl) != 0) {
            if (kl > L.pl ? memcmp(key, L.prefix, L.pl) > 0 : memcmp(key, L.prefix, kl) >= 0)
                break; /* past the prefix */
        } else {
            const char *d = NULL;
            if (L.dl)
                d = memmem(key + L.pl, kl - L.pl, L.delim, L.dl);
            if (d) {
                size_t cpl = (size_t)(d - key) + L.dl;
                if (!(cpl == L.last_cp_len && memcmp(key, L.last_cp, cpl) == 0)) {
                    if (L.n == L.max) {
                        L.truncated = true;
                        break;
                    }
                    memcpy(L.last_cp, key, cpl);
                    L.last_cp_len = cpl;
                    ol_xml_open(&body, "CommonPrefixes");
                    put_name(&body, "Prefix", key, cpl, L.url);
                    ol_xml_close(&body);
                    L.n++;
                    memcpy(L.next_key, key, cpl);
                    L.next_key_len = cpl;
                    L.next_vid[0] = 0;
                    /* Jump over the rest of this prefix. */
                    char succ[OL_S3_MAX_KEY + 1];
                    size_t sl = ol_s3_prefix_successor(L.last_cp, cpl, succ);
                    if (sl > 0) {
                        rc = ol_obj_viter_seek(it, succ, sl);
                        if (rc < 0)
                            break;
                    }
                }
            } else {
                if (L.n == L.max) {
                    L.truncated = true;
                    break;
                }
                put_version(&body, r, key, kl, &vi, L.url);
                L.n++;
                memcpy(L.next_key, key, kl);
                L.next_key_len = kl;
                snprintf(L.next_vid, sizeof(L.next_vid), "%s", vi.vid);
            }
        }
        have = ol_obj_viter_next(it, &key, &kl, &vi);
        have = have == 0 ? 1 : have == 1 ? 0 : have;
    }
    if (rc == 0 && have < 0)
        rc = have;
    if (rc < 0) {
        rc = ol_s3_error_from(r, rc);
        goto out;
    }
    ol_xml_begin_doc(&x, "ListVersionsResult");
    ol_xml_str(&x, "Name", r->bucket);
    put_param(&x, "Prefix", pp, L.url);
    put_param(&x, "KeyMarker", km, L.url);
    if (vm)
        ol_xml_str(&x, "VersionIdMarker", vm->value);
    else
        ol_xml_text(&x, "VersionIdMarker", "", 0);
    if (L.truncated) {
        put_name(&x, "NextKeyMarker", L.next_key, L.next_key_len, L.url);
        if (L.next_vid[0])
            ol_xml_str(&x, "NextVersionIdMarker", L.next_vid);
    }
    ol_xml_u64(&x, "MaxKeys", L.max);
    if (dp)
        put_name(&x, "Delimiter", dp->value, dp->value_len, L.url);
    if (L.url)
        ol_xml_str(&x, "EncodingType", "url");
    ol_xml_bool(&x, "IsTruncated", L.truncated);
    xml_append(&x, &body);
    ol_xml_end_doc(&x);
    rc = x.failed ? ol_s3_error_from(r, -ENOMEM) : ol_s3_send_xml(r, 200, &x);
out:
    ol_obj_viter_close(it);
    ol_xml_free(&body);
    ol_xml_free(&x);
    return rc;
}

/* ---- helpers of the object handlers ---- */

const char *ol_s3_version_param(const struct ol_s3_req *r)
{
    const struct ol_s3_param *p = ol_s3_param(r, "versionId");
    return p ? p->value : NULL;
}

static int send_marker_error(struct ol_s3_req *r, int status, enum ol_s3_code code,
                             const char *msg, const char *vid, int64_t mtime_ns)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "Error");
    ol_xml_str(&x, "Code", ol_s3_code_name(code));
    ol_xml_str(&x, "Message", msg);
    if (r->key)
        ol_xml_text(&x, "Key", r->key, r->key_len);
    ol_xml_str(&x, "RequestId", r->request_id);
    ol_xml_end_doc(&x);
    char lm[32];
    struct ol_http_hdr h[5];
    size_t nh = 0;
    h[nh++] = (struct ol_http_hdr){"Content-Type", "application/xml"};
    h[nh++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    h[nh++] = (struct ol_http_hdr){"x-amz-delete-marker", "true"};
    h[nh++] = (struct ol_http_hdr){"x-amz-version-id", vid};
    if (mtime_ns) {
        ol_s3_http_date(mtime_ns, lm);
        h[nh++] = (struct ol_http_hdr){"Last-Modified", lm};
    }
    int rc = ol_http_respond(r->conn, status, h, nh, x.failed ? NULL : x.buf,
                             x.failed ? 0 : x.len);
    ol_xml_free(&x);
    return rc;
}

int ol_s3_version_open_error(struct ol_s3_req *r, int err, const char *vid)
{
    if (err == -OL_EMARKER && vid)
        return send_marker_error(r, 405, OL_S3_MethodNotAllowed,
                                 "The specified method is not allowed against this resource.",
                                 vid, 0);
    if (err == -OL_ENOKEY && !vid) {
        char mvid[OL_STORE_VID_MAX];
        int64_t mt = 0;
        if (ol_obj_latest_marker(r->ctx->obj, r->bucket, r->key, r->key_len, mvid, &mt) == 1)
            return send_marker_error(r, 404, OL_S3_NoSuchKey, "The specified key does not exist.",
                                     mvid, mt);
    }
    if (err == -OL_ENOVERSION)
        return ol_s3_error(r, OL_S3_NoSuchVersion,
                           "The specified version does not exist.");
    return ol_s3_error_from(r, err);
}

int ol_s3_send_xml_hdrs(struct ol_s3_req *r, int status, struct ol_xml *x,
                        const struct ol_http_hdr *extra, size_t nextra)
{
    if (x->failed)
        return ol_s3_error(r, OL_S3_InternalError, "out of memory building the response");
    struct ol_http_hdr h[2 + 4 + OL_S3_CORS_MAX_HDRS] = {
        {"Content-Type", "application/xml"},
        {"x-amz-request-id", r->request_id},
    };
    size_t n = 2;
    for (size_t i = 0; i < nextra && n < 6; i++)
        h[n++] = extra[i];
    char cors[OL_S3_CORS_STORE_BYTES];
    n += ol_s3_cors_headers(r, h + n, OL_S3_CORS_MAX_HDRS, cors, sizeof(cors));
    return ol_http_respond(r->conn, status, h, n, x->buf, x->len);
}
