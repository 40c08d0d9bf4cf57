/* Bucket tagging: PutBucketTagging, GetBucketTagging, DeleteBucketTagging.
 *
 * The tag set is a bucket setting (settings.h): the Put handler parses and
 * checks the Tagging document and stores it normalized; Get serves it back;
 * a bucket without one answers NoSuchTagSet.  Each tag is checked as object
 * tags are (ol_s3_tag_check: characters, lengths, no "aws:" prefix) and keys
 * are unique; a bucket holds up to 50 tags (objects: 10), as in S3.
 * One-drive mode; erasure-coded mode answers 501 (no bucket settings there). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3/s3.h"
#include "s3/settings.h"

#define BT_SETTING "tagging"
#define BT_MAX 50
#define BT_KEY_BYTES (128 * 4) /* 128 characters of at most 4 UTF-8 bytes */
#define BT_VALUE_BYTES (256 * 4)
#define BT_DOC_MAX (256u << 10)
/* 50 tags of the longest key and value, and the elements around them. */
#define BT_STORED_MAX (BT_MAX * (BT_KEY_BYTES + BT_VALUE_BYTES + 64) + 256)

struct bt_tag {
    size_t kn, vn;
    char k[BT_KEY_BYTES + 1];
    char v[BT_VALUE_BYTES + 1];
};

struct bt_cfg {
    size_t n;
    bool in_tag, has_key, has_value, bad, has_tagset;
    const char *msg; /* InvalidTag message */
    struct bt_tag tags[BT_MAX + 1]; /* the one past the limit is the tag being read */
};

static int bt_on_elem(void *ctx, const char *path, bool start)
{
    struct bt_cfg *c = ctx;
    if (strcmp(path, "Tagging/TagSet/Tag") == 0) {
        if (start) {
            if (c->n == BT_MAX) {
                c->msg = "Bucket tag count cannot be greater than 50";
                return -EINVAL;
            }
            c->in_tag = true;
            c->has_key = c->has_value = false;
            c->tags[c->n].kn = c->tags[c->n].vn = 0;
            return 0;
        }
        c->in_tag = false;
        if (!c->has_key || !c->has_value) {
            c->bad = true;
            return -EBADMSG;
        }
        struct bt_tag *t = &c->tags[c->n];
        c->msg = ol_s3_tag_check(t->k, t->kn, true, false);
        if (!c->msg)
            c->msg = ol_s3_tag_check(t->v, t->vn, false, false);
        for (size_t i = 0; !c->msg && i < c->n; i++)
            if (c->tags[i].kn == t->kn && memcmp(c->tags[i].k, t->k, t->kn) == 0)
                c->msg = "Cannot provide multiple Tags with the same key";
        if (c->msg)
            return -EINVAL;
        c->n++;
        return 0;
    }
    if (!start)
        return 0;
    if (strcmp(path, "Tagging/TagSet") == 0)
        c->has_tagset = true;
    if (strcmp(path, "Tagging") == 0 || strcmp(path, "Tagging/TagSet") == 0 ||
        strcmp(path, "Tagging/TagSet/Tag/Key") == 0 ||
        strcmp(path, "Tagging/TagSet/Tag/Value") == 0)
        return 0;
    c->bad = true;
    return -EBADMSG;
}

static int bt_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct bt_cfg *c = ctx;
    bool key = strcmp(path, "Tagging/TagSet/Tag/Key") == 0;
    bool val = !key && strcmp(path, "Tagging/TagSet/Tag/Value") == 0;
    if (!key && !val)
        return 0;
    if (!c->in_tag || (key && c->has_key) || (val && c->has_value)) {
        c->bad = true;
        return -EBADMSG;
    }
    if (len > (key ? BT_KEY_BYTES : BT_VALUE_BYTES)) {
        c->msg = key ? "The TagKey you have provided is too long, max 128"
                     : "The TagValue you have provided is too long, max 256";
        return -EINVAL;
    }
    struct bt_tag *t = &c->tags[c->n];
    memcpy(key ? t->k : t->v, text, len);
    (key ? t->k : t->v)[len] = '\0';
    if (key) {
        t->kn = len;
        c->has_key = true;
    } else {
        t->vn = len;
        c->has_value = true;
    }
    return 0;
}

static int bt_parse(const char *doc, size_t len, void **cfg, enum ol_s3_code *code,
                    const char **msg)
{
    struct bt_cfg *c = calloc(1, sizeof(*c));
    *cfg = c;
    if (!c)
        return -ENOMEM;
    int prc = ol_xml_parse(doc, len, bt_on_elem, bt_on_text, c);
    if (prc == -ENOMEM)
        return -ENOMEM;
    if (c->msg) {
        *code = OL_S3_InvalidTag;
        *msg = c->msg;
        return -EINVAL;
    }
    if (prc != 0 || c->bad || !c->has_tagset) {
        *code = OL_S3_MalformedXML;
        *msg = "The XML you provided was not well-formed or did not validate against our "
               "published schema";
        return -EINVAL;
    }
    return 0;
}

static void bt_write(const void *cfg, struct ol_xml *x)
{
    const struct bt_cfg *c = cfg;
    ol_xml_begin_doc(x, "Tagging");
    ol_xml_open(x, "TagSet");
    for (size_t i = 0; i < c->n; i++) {
        ol_xml_open(x, "Tag");
        ol_xml_text(x, "Key", c->tags[i].k, c->tags[i].kn);
        ol_xml_text(x, "Value", c->tags[i].v, c->tags[i].vn);
        ol_xml_close(x);
    }
    ol_xml_close(x);
    ol_xml_end_doc(x);
}

static void bt_free(void *cfg)
{
    free(cfg);
}

static const struct ol_s3_setting_doc bt_doc = {
    .name = BT_SETTING,
    .doc_max = BT_DOC_MAX,
    .stored_max = BT_STORED_MAX,
    .missing = OL_S3_NoSuchTagSet,
    .missing_msg = "The TagSet does not exist",
    .parse = bt_parse,
    .write = bt_write,
    .free = bt_free,
};

int ol_s3_put_bucket_tagging(struct ol_s3_req *r)
{
    return ol_s3_setting_put(r, &bt_doc);
}

int ol_s3_get_bucket_tagging(struct ol_s3_req *r)
{
    return ol_s3_setting_get(r, &bt_doc);
}

int ol_s3_delete_bucket_tagging(struct ol_s3_req *r)
{
    return ol_s3_setting_delete(r, &bt_doc);
}
