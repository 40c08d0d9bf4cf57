/* Object tagging: PutObjectTagging, GetObjectTagging, DeleteObjectTagging,
 * the x-amz-tagging header of PutObject, CreateMultipartUpload and CopyObject,
 * and the x-amz-tagging-count header
 * of GetObject/HeadObject.
 *
 * A tag set is at most 10 tags; keys are 1..128 characters and values
 * 0..256, made of letters, digits, spaces and "+-=._:/@" (any UTF-8 letter
 * counts as a letter); keys are unique and may not start with "aws:".
 *
 * The x-amz-tagging header is checked before a request body is read, and
 * its tags are written into the new object's index entry by the commit
 * itself (struct ol_obj_attr, store.h): PutObject's commit, the
 * CompleteMultipartUpload of an upload created with the header (kept in the
 * upload's metadata blob meta.h: OL_S3_META_TAGS until then), and a
 * CopyObject with x-amz-tagging-directive REPLACE (copy.c; COPY keeps the
 * source's).  So an object is never visible, or left by a crash, without the
 * tags it was written with, and two racing writers of one key cannot swap
 * tags: the tags belong to the version they came with.
 *
 * Tags live in the object's index entry as the attribute "tags" (store.h:
 * changing them leaves the data, ETag and Last-Modified alone), in a compact
 * form: "key\0value\0" per tag, in the order the client gave them.  Keys and
 * values cannot contain NUL (it is not an allowed character), so the form is
 * unambiguous.
 *
 * This file also holds ol_s3_read_doc, the reader of the small request
 * documents the bucket-setting handlers (CORS, lifecycle) share.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "obj/obj.h"
#include "s3/s3.h"
#include "s3/sigv4.h"
#include "store/store.h"

#define OL_TAGS_MAX 10
#define OL_TAG_KEY_CHARS 128
#define OL_TAG_VALUE_CHARS 256
/* A UTF-8 character is at most 4 bytes. */
#define OL_TAG_KEY_BYTES (OL_TAG_KEY_CHARS * 4)
#define OL_TAG_VALUE_BYTES (OL_TAG_VALUE_CHARS * 4)
#define OL_TAGS_BLOB_MAX (OL_TAGS_MAX * (OL_TAG_KEY_BYTES + OL_TAG_VALUE_BYTES + 2))
#define OL_TAGGING_DOC_MAX (64u << 10)

struct ol_tagset {
    size_t n;
    size_t len;              /* bytes used in blob */
    size_t off[OL_TAGS_MAX]; /* where each tag's key starts in blob */
    char blob[OL_TAGS_BLOB_MAX];
};

/* ---- the request document reader shared with cors.c and lifecycle.c ---- */

static int ol_s3_doc_md5_ok(const struct ol_s3_req *r, const char *doc, size_t len)
{
    const struct ol_slice *h = ol_s3_header(r, "content-md5");
    if (!h)
        return 0;
    unsigned char want[64], got[EVP_MAX_MD_SIZE];
    unsigned got_len = 0;
    char b64[64];
    if (h->n == 0 || h->n >= sizeof(b64) || h->n % 4 != 0)
        return -OL_EBADDIGEST;
    memcpy(b64, h->p, h->n);
    b64[h->n] = 0;
    int wl = EVP_DecodeBlock(want, (const unsigned char *)b64, (int)h->n);
    /* EVP_DecodeBlock counts the '=' padding as zero bytes. */
    for (size_t i = h->n; i > 0 && b64[i - 1] == '='; i--)
        wl--;
    if (wl != 16 || !EVP_Digest(doc, len, got, &got_len, EVP_md5(), NULL) || got_len != 16)
        return -OL_EBADDIGEST;
    return memcmp(want, got, 16) == 0 ? 0 : -OL_EBADDIGEST;
}

int ol_s3_read_doc(struct ol_s3_req *r, size_t max, char **out, size_t *len)
{
    char *buf = NULL;
    size_t got = 0;
    int ret = 0;

    *out = NULL;
    *len = 0;
    int64_t declared = ol_s3_body_length(r);
    if (declared > (int64_t)max) {
        ret = -EBADMSG;
        goto out;
    }
    buf = malloc(max + 2);
    if (!buf) {
        ret = -ENOMEM;
        goto out;
    }
    /* Each round reads at least one byte or ends, and one byte past the
     * limit is enough to tell that the body is too large. */
    for (size_t i = 0; i <= max + 1; i++) {
        ssize_t n = ol_s3_body_read(r, buf + got, max + 1 - got);
        if (n < 0) {
            ret = (int)n;
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got > max) {
            ret = -EBADMSG;
            goto out;
        }
    }
    buf[got] = 0;
    ret = ol_s3_doc_md5_ok(r, buf, got);
    if (ret < 0)
        goto out;
    *out = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    return ret;
}

/* ---- validation ---- */

/* The characters Amazon S3 allows in tag keys and values: letters, digits
 * and spaces, and "+-=._:/@".  Outside ASCII any character counts as a letter
 * except the C1 controls (U+0080..U+009F); the caller has checked that the
 * text is valid UTF-8.  NUL is refused explicitly (strchr would find the
 * set's own terminator: that once let "k=%00aws:x" through). */
static bool ol_tag_cp_ok(uint32_t cp)
{
    if (cp >= 0x80)
        return cp >= 0xA0;
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
        return true;
    static const char extra[] = " +-=._:/@";
    return cp != 0 && memchr(extra, (int)cp, sizeof(extra) - 1) != NULL;
}

const char *ol_s3_tag_check(const char *s, size_t n, bool is_key, bool reserved_ok)
{
    const unsigned char *p = (const unsigned char *)s;
    if (is_key && n == 0)
        return "The TagKey you have provided is invalid";
    size_t chars = 0;
    /* Each round consumes one character (at least one byte) or fails. */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ol_utf8_next(p + i, n - i, &cp);
        if (k == 0 || !ol_tag_cp_ok(cp))
            return is_key ? "The TagKey you have provided is invalid"
                          : "The TagValue you have provided is invalid";
        i += k;
        chars++;
    }
    if (chars > (is_key ? OL_TAG_KEY_CHARS : OL_TAG_VALUE_CHARS))
        return is_key ? "The TagKey you have provided is too long, max 128"
                      : "The TagValue you have provided is too long, max 256";
    if (is_key && !reserved_ok && n >= 4 && memcmp(s, "aws:", 4) == 0)
        return "Your TagKey cannot be prefixed with aws:";
    return NULL;
}

/* Adds one tag after checking it against the rules and the tags before it.
 * Returns NULL or the InvalidTag message. */
static const char *ol_tagset_add(struct ol_tagset *t, const char *k, size_t kn, const char *v,
                                 size_t vn)
{
    if (t->n >= OL_TAGS_MAX)
        return "Object tags cannot be greater than 10";
    const char *msg = ol_s3_tag_check(k, kn, true, false);
    if (!msg)
        msg = ol_s3_tag_check(v, vn, false, false);
    if (msg)
        return msg;
    for (size_t i = 0; i < t->n; i++) {
        const char *other = t->blob + t->off[i];
        if (strlen(other) == kn && memcmp(other, k, kn) == 0)
            return "Cannot provide multiple Tags with the same key";
    }
    /* The checks above bound kn and vn, so the blob always has room. */
    OL_ASSERT(t->len + kn + vn + 2 <= sizeof(t->blob));
    t->off[t->n++] = t->len;
    memcpy(t->blob + t->len, k, kn);
    t->len += kn;
    t->blob[t->len++] = 0;
    memcpy(t->blob + t->len, v, vn);
    t->len += vn;
    t->blob[t->len++] = 0;
    return NULL;
}

/* Reads a stored blob back; a damaged one yields the tags before the damage. */
static void ol_tagset_load(struct ol_tagset *t, const char *blob, size_t len)
{
    t->n = 0;
    t->len = 0;
    if (len > sizeof(t->blob))
        return;
    memcpy(t->blob, blob, len);
    size_t at = 0;
    for (size_t i = 0; i < OL_TAGS_MAX && at < len; i++) {
        const char *kend = memchr(t->blob + at, 0, len - at);
        if (!kend)
            break;
        size_t vstart = (size_t)(kend - t->blob) + 1;
        const char *vend = vstart < len ? memchr(t->blob + vstart, 0, len - vstart) : NULL;
        if (!vend)
            break;
        t->off[t->n++] = at;
        at = (size_t)(vend - t->blob) + 1;
        t->len = at;
    }
}

static const char *ol_tagset_value(const struct ol_tagset *t, size_t i)
{
    const char *k = t->blob + t->off[i];
    return k + strlen(k) + 1;
}

/* ---- the x-amz-tagging header ---- */

/* Parses "k1=v1&k2=v2" into t.  Returns NULL or the InvalidTag message. */
static const char *ol_tagset_from_query(struct ol_tagset *t, const char *s, size_t n)
{
    char k[OL_TAG_KEY_BYTES + 1], v[OL_TAG_VALUE_BYTES + 1];
    const char *p = s, *end = s + n;
    t->n = 0;
    t->len = 0;
    /* Each round consumes one '&'-separated pair; the tag limit bounds it. */
    for (size_t round = 0; p < end && round <= OL_TAGS_MAX; round++) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *ke = eq ? eq : e;
        ssize_t kn = ol_pct_decode(p, (size_t)(ke - p), k, sizeof(k) - 1, true);
        ssize_t vn = eq ? ol_pct_decode(eq + 1, (size_t)(e - eq - 1), v, sizeof(v) - 1, true) : 0;
        if (kn < 0)
            return "The TagKey you have provided is invalid";
        if (vn < 0)
            return "The TagValue you have provided is invalid";
        const char *msg = ol_tagset_add(t, k, (size_t)kn, v, (size_t)vn);
        if (msg)
            return msg;
        p = amp ? amp + 1 : end;
    }
    if (p < end)
        return "Object tags cannot be greater than 10";
    return NULL;
}

/* Sets (t non-empty) or removes (t NULL or empty) the tags of the version r
 * names (versionId, else the current object); vid gets the version's id ("":
 * none to answer). */
static int ol_tagset_store(struct ol_s3_req *r, const struct ol_tagset *t,
                           char vid[OL_STORE_VID_MAX])
{
    bool set = t && t->n;
    vid[0] = 0;
    return ol_obj_attr_put_v(r->ctx->obj, r->bucket, r->key, r->key_len,
                                      ol_s3_version_param(r), OL_TAGS_ATTR,
                                      set ? t->blob : NULL, set ? t->len : 0, vid);
}

void ol_s3_tag_attr_free(struct ol_s3_tag_attr *ta)
{
    free(ta->blob);
    memset(ta, 0, sizeof(*ta));
    ta->attr.name = OL_TAGS_ATTR;
}

int ol_s3_tag_attr_from_query(struct ol_s3_tag_attr *ta, const char *q, size_t n, const char **msg)
{
    struct ol_tagset *t = NULL;
    int ret = 0;
    memset(ta, 0, sizeof(*ta));
    ta->attr.name = OL_TAGS_ATTR;
    *msg = NULL;
    if (n == 0)
        goto out;
    t = malloc(sizeof(*t));
    if (!t) {
        ret = -ENOMEM;
        goto out;
    }
    *msg = ol_tagset_from_query(t, q, n);
    if (*msg) {
        ret = -EINVAL;
        goto out;
    }
    if (t->n == 0)
        goto out;
    /* The blob is copied out at its own size: the tag set's buffer is sized
     * for the worst case (15 KiB) and the attribute lives until the commit. */
    ta->blob = malloc(t->len);
    if (!ta->blob) {
        ret = -ENOMEM;
        goto out;
    }
    memcpy(ta->blob, t->blob, t->len);
    ta->attr.val = ta->blob;
    ta->attr.len = t->len;
out:
    free(t);
    return ret;
}

int ol_s3_tag_attr_from_header(struct ol_s3_req *r, struct ol_s3_tag_attr *ta, const char **msg)
{
    const struct ol_slice *h = ol_s3_header(r, "x-amz-tagging");
    return ol_s3_tag_attr_from_query(ta, h ? h->p : NULL, h ? h->n : 0, msg);
}

bool ol_s3_tagging_header_ok(struct ol_s3_req *r, const char **msg)
{
    struct ol_s3_tag_attr ta;
    int rc = ol_s3_tag_attr_from_header(r, &ta, msg);
    ol_s3_tag_attr_free(&ta);
    /* Out of memory: the header is parsed again, with the same rules, when
     * it is used, and fails the request then. */
    return rc != -EINVAL;
}

/* Attribute reads answer one of these when the object has no tags. */
static bool ol_tags_unset(ssize_t rc)
{
    return rc == -OL_ENOCONFIG || rc == -ENOENT || rc == -ENODATA;
}

static ssize_t ol_tags_read(struct ol_s3_req *r, struct ol_tagset *t)
{
    char *blob = malloc(OL_TAGS_BLOB_MAX);
    ssize_t rc;
    if (!blob) {
        rc = -ENOMEM;
        goto out;
    }
    rc = ol_obj_attr_get(r->ctx->obj, r->bucket, r->key, r->key_len, OL_TAGS_ATTR, blob,
                                  OL_TAGS_BLOB_MAX);
    if (ol_tags_unset(rc))
        rc = 0;
    if (rc < 0)
        goto out;
    ol_tagset_load(t, blob, (size_t)rc);
    rc = (ssize_t)t->n;
out:
    free(blob);
    return rc;
}

static int ol_tags_count_blob(const char *blob, size_t len);

int ol_s3_tagging_count(struct ol_s3_req *r)
{
    char blob[OL_TAGS_BLOB_MAX / 4];
    ssize_t rc = ol_obj_attr_get(r->ctx->obj, r->bucket, r->key, r->key_len,
                                          OL_TAGS_ATTR, blob, sizeof(blob));
    if (ol_tags_unset(rc))
        return 0;
    if (rc == -ENOBUFS) { /* rare: long tags; count them from a full read */
        struct ol_tagset *t = malloc(sizeof(*t));
        if (!t)
            return -ENOMEM;
        rc = ol_tags_read(r, t);
        free(t);
        return (int)rc;
    }
    if (rc < 0)
        return (int)rc;
    return ol_tags_count_blob(blob, (size_t)rc);
}

static int ol_tags_count_blob(const char *blob, size_t len)
{
    /* Two NULs per tag. */
    int nul = 0;
    for (size_t i = 0; i < len; i++)
        nul += blob[i] == 0;
    return nul / 2;
}

bool ol_s3_tagging_has(const struct ol_obj_reader *rd, const char *key, size_t key_len,
                       const char *val, size_t val_len)
{
    const uint8_t *blob = NULL;
    size_t len = 0;
    if (ol_obj_read_attr(rd, OL_TAGS_ATTR, &blob, &len) != 0)
        return false;
    /* "key\0value\0" per tag; a damaged tail ends the walk. */
    size_t at = 0;
    for (size_t i = 0; i < OL_TAGS_MAX && at < len; i++) {
        const uint8_t *kend = memchr(blob + at, 0, len - at);
        if (!kend)
            break;
        size_t kn = (size_t)(kend - blob) - at, vstart = at + kn + 1;
        const uint8_t *vend = vstart < len ? memchr(blob + vstart, 0, len - vstart) : NULL;
        if (!vend)
            break;
        size_t vn = (size_t)(vend - blob) - vstart;
        if (kn == key_len && memcmp(blob + at, key, kn) == 0)
            return vn == val_len && memcmp(blob + vstart, val, vn) == 0;
        at = vstart + vn + 1;
    }
    return false;
}

int ol_s3_tagging_count_of(const struct ol_obj_reader *rd)
{
    const uint8_t *val;
    size_t len;
    if (ol_obj_read_attr(rd, OL_TAGS_ATTR, &val, &len) != 0)
        return 0;
    return ol_tags_count_blob((const char *)val, len);
}

/* ---- the Tagging document ---- */

struct ol_tag_doc {
    struct ol_tagset *t;
    bool in_tag, has_key, has_value, bad;
    const char *msg; /* InvalidTag message */
    size_t kn, vn;
    char k[OL_TAG_KEY_BYTES + 1];
    char v[OL_TAG_VALUE_BYTES + 1];
};

static int ol_tag_on_elem(void *ctx, const char *path, bool start)
{
    struct ol_tag_doc *d = ctx;
    if (strcmp(path, "Tagging/TagSet/Tag") == 0) {
        if (start) {
            d->in_tag = true;
            d->has_key = d->has_value = false;
            d->kn = d->vn = 0;
            return 0;
        }
        d->in_tag = false;
        if (!d->has_key || !d->has_value) {
            d->bad = true;
            return -EBADMSG;
        }
        d->msg = ol_tagset_add(d->t, d->k, d->kn, d->v, d->vn);
        return d->msg ? -EINVAL : 0;
    }
    if (!start)
        return 0;
    if (strcmp(path, "Tagging") == 0 || strcmp(path, "Tagging/TagSet") == 0 ||
        strcmp(path, "Tagging/TagSet/Tag/Key") == 0 ||
        strcmp(path, "Tagging/TagSet/Tag/Value") == 0)
        return 0;
    d->bad = true;
    return -EBADMSG;
}

static int ol_tag_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct ol_tag_doc *d = ctx;
    bool key = strcmp(path, "Tagging/TagSet/Tag/Key") == 0;
    bool val = !key && strcmp(path, "Tagging/TagSet/Tag/Value") == 0;
    if (!key && !val)
        return 0;
    if ((key && d->has_key) || (val && d->has_value)) {
        d->bad = true;
        return -EBADMSG;
    }
    if (len > (key ? OL_TAG_KEY_BYTES : OL_TAG_VALUE_BYTES)) {
        d->msg = key ? "The TagKey you have provided is too long, max 128"
                     : "The TagValue you have provided is too long, max 256";
        return -EINVAL;
    }
    memcpy(key ? d->k : d->v, text, len);
    if (key) {
        d->kn = len;
        d->has_key = true;
    } else {
        d->vn = len;
        d->has_value = true;
    }
    return 0;
}

/* Whether the version r names (versionId, else the current object) exists
 * and is not a delete marker: 0, or 1 after answering the request (NoSuchKey,
 * NoSuchVersion, MethodNotAllowed for a marker) with *answer the result of
 * sending that answer. */
static int ol_s3_version_check(struct ol_s3_req *r, int *answer)
{
    struct ol_obj_reader *rd = NULL;
    const char *vid = ol_s3_version_param(r);
    int rc = ol_obj_read_open_v(r->ctx->obj, r->bucket, r->key, r->key_len, vid, &rd);
    if (rc == 0) {
        ol_obj_read_close(rd);
        return 0;
    }
    *answer = ol_s3_version_open_error(r, rc, vid);
    return 1;
}

int ol_s3_put_object_tagging(struct ol_s3_req *r)
{
    struct ol_tag_doc *d = NULL;
    char *doc = NULL;
    size_t len = 0;
    char vid[OL_STORE_VID_MAX] = "";
    int ret = 0;
    if (ol_s3_version_check(r, &ret) != 0)
        goto out;
    ret = ol_s3_read_doc(r, OL_TAGGING_DOC_MAX, &doc, &len);
    if (ret < 0) {
        ret = ol_s3_error_from(r, ret);
        goto out;
    }
    d = calloc(1, sizeof(*d) + sizeof(*d->t));
    if (!d) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    d->t = (struct ol_tagset *)(d + 1);
    int prc = ol_xml_parse(doc, len, ol_tag_on_elem, ol_tag_on_text, d);
    if (d->msg) {
        ret = ol_s3_error(r, OL_S3_InvalidTag, d->msg);
        goto out;
    }
    if (prc != 0 || d->bad || len == 0) {
        ret = ol_s3_error(r, OL_S3_MalformedXML,
                          "The XML you provided was not well-formed or did not validate against "
                          "our published schema");
        goto out;
    }
    /* The version may have gone since the check above: answer as a read would. */
    ret = ol_tagset_store(r, d->t, vid);
    if (ret < 0) {
        ret = ol_s3_version_open_error(r, ret, ol_s3_version_param(r));
        goto out;
    }
    struct ol_http_hdr vh[] = {{"x-amz-version-id", vid}};
    ret = ol_s3_send_empty(r, 200, vh, vid[0] ? 1 : 0);
out:
    free(d);
    free(doc);
    return ret;
}

int ol_s3_get_object_tagging(struct ol_s3_req *r)
{
    struct ol_xml x;
    ol_xml_init(&x);
    struct ol_obj_reader *rd = NULL;
    struct ol_tagset *t = malloc(sizeof(*t));
    int ret;
    if (!t) {
        ret = ol_s3_error_from(r, -ENOMEM);
        goto out;
    }
    /* The tags come from the snapshot of the version asked for (versionId,
     * else the current one): an object's tags are part of its entry. */
    const char *want_vid = ol_s3_version_param(r);
    ret = ol_obj_read_open_v(r->ctx->obj, r->bucket, r->key, r->key_len, want_vid, &rd);
    if (ret < 0) {
        ret = ol_s3_version_open_error(r, ret, want_vid);
        goto out;
    }
    const uint8_t *val = NULL;
    size_t vlen = 0;
    if (ol_obj_read_attr(rd, OL_TAGS_ATTR, &val, &vlen) == 0)
        ol_tagset_load(t, (const char *)val, vlen);
    else
        t->n = 0;
    char vid[OL_STORE_VID_MAX];
    bool has_vid = ol_obj_read_vid(rd, vid) == 0 || want_vid;
    ol_xml_begin_doc(&x, "Tagging");
    ol_xml_open(&x, "TagSet");
    for (size_t i = 0; i < t->n; i++) {
        ol_xml_open(&x, "Tag");
        ol_xml_str(&x, "Key", t->blob + t->off[i]);
        ol_xml_str(&x, "Value", ol_tagset_value(t, i));
        ol_xml_close(&x);
    }
    ol_xml_end_doc(&x);
    struct ol_http_hdr vh[] = {{"x-amz-version-id", vid}};
    ret = ol_s3_send_xml_hdrs(r, 200, &x, vh, has_vid ? 1 : 0);
out:
    if (rd)
        ol_obj_read_close(rd);
    ol_xml_free(&x);
    free(t);
    return ret;
}

int ol_s3_delete_object_tagging(struct ol_s3_req *r)
{
    char vid[OL_STORE_VID_MAX] = "";
    int ret = 0;
    if (ol_s3_version_check(r, &ret) != 0)
        return ret;
    ret = ol_tagset_store(r, NULL, vid);
    if (ret < 0 && !ol_tags_unset(ret))
        return ol_s3_version_open_error(r, ret, ol_s3_version_param(r));
    struct ol_http_hdr vh[] = {{"x-amz-version-id", vid}};
    return ol_s3_send_empty(r, 204, vh, vid[0] ? 1 : 0);
}
