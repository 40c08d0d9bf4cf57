/* GetObjectAttributes (GET /b/k?attributes): what x-amz-object-attributes
 * names (ETag, Checksum, ObjectParts, StorageClass, ObjectSize) of an object
 * or one of its versions, read from its index entry alone (no data read).
 * One-drive mode; erasure-coded mode answers 501 (ec_object.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "s3/checksum.h"
#include "s3/list.h"
#include "s3/meta.h"
#include "obj/obj.h"
#include "s3/s3.h"
#include "store/store.h"

enum {
    ATTR_ETAG = 1 << 0,
    ATTR_CHECKSUM = 1 << 1,
    ATTR_PARTS = 1 << 2,
    ATTR_STORAGE_CLASS = 1 << 3,
    ATTR_SIZE = 1 << 4,
};

#define ATTR_MAX_PARTS 1000u /* x-amz-max-parts default and ceiling, as ListParts */

/* Parses the comma-separated x-amz-object-attributes list into a mask; 0
 * when missing or empty, -1 on a name S3 does not know. */
static int attr_mask(const struct ol_slice *h)
{
    static const struct {
        const char *name;
        int bit;
    } names[] = {{"ETag", ATTR_ETAG},
                 {"Checksum", ATTR_CHECKSUM},
                 {"ObjectParts", ATTR_PARTS},
                 {"StorageClass", ATTR_STORAGE_CLASS},
                 {"ObjectSize", ATTR_SIZE}};
    if (!h)
        return 0;
    int mask = 0;
    const char *p = h->p, *e = h->p + h->n;
    /* One round per entry: bounded by the header's length. */
    while (p < e) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        const char *s = p, *t = end;
        while (s < t && (*s == ' ' || *s == '\t'))
            s++;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if (t > s) {
            int bit = 0;
            for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !bit; i++)
                if ((size_t)(t - s) == strlen(names[i].name) &&
                    memcmp(s, names[i].name, (size_t)(t - s)) == 0)
                    bit = names[i].bit;
            if (!bit)
                return -1;
            mask |= bit;
        }
        p = end + 1;
    }
    return mask;
}

/* A count header (x-amz-max-parts, x-amz-part-number-marker): def when
 * absent, -1 when not a count. */
static int64_t attr_count(struct ol_s3_req *r, const char *name, unsigned def)
{
    const struct ol_slice *h = ol_s3_header(r, name);
    if (!h)
        return def;
    unsigned v = 0;
    if (ol_s3_parse_count(h->p, h->n, 2147483647u, &v) < 0)
        return -1;
    return v;
}

/* The object's part sizes ("size*count,..." runs, multipart.c): the size of
 * 1-based part `part`, or false past the end or when unknown. */
static bool attr_part_size(const uint8_t *v, size_t vl, uint32_t part, uint64_t *size)
{
    const char *p = (const char *)v, *e = p + vl;
    uint64_t seen = 0;
    /* One round per run; runs are bounded by the entry's length. */
    while (p < e) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        char buf[64];
        size_t n = (size_t)(end - p);
        if (n >= sizeof(buf))
            return false;
        memcpy(buf, p, n);
        buf[n] = 0;
        unsigned long long sz, count;
        if (sscanf(buf, "%llu*%llu", &sz, &count) != 2)
            return false;
        if (part <= seen + count) {
            *size = sz;
            return true;
        }
        seen += count;
        p = end + 1;
    }
    return false;
}

static void attr_checksum(struct ol_xml *x, const struct ol_obj_info *info)
{
    const uint8_t *cv;
    size_t cvl;
    if (ol_s3_meta_get(info->meta, info->meta_len, OL_S3_META_CHECKSUM, &cv, &cvl) != 0)
        return;
    /* "ALGO TYPE value" (object.c, multipart.c). */
    char tmp[128], algo[16], type[16], val[OL_CK_B64_MAX];
    snprintf(tmp, sizeof(tmp), "%.*s", (int)cvl, (const char *)cv);
    if (sscanf(tmp, "%15s %15s %63s", algo, type, val) != 3)
        return;
    enum ol_ck_algo a = ol_ck_parse(algo, strlen(algo));
    if (a == OL_CK_NONE)
        return;
    char tag[24];
    snprintf(tag, sizeof(tag), "Checksum%s", ol_ck_name(a));
    ol_xml_open(x, "Checksum");
    ol_xml_str(x, tag, val);
    ol_xml_str(x, "ChecksumType", type);
    ol_xml_close(x);
}

/* ObjectParts: the count, and a page of part numbers and sizes when the
 * sizes are known.  Only multipart objects have parts. */
static void attr_parts(struct ol_xml *x, const struct ol_obj_info *info, uint32_t marker,
                       uint32_t max)
{
    if (info->nparts == 0)
        return;
    const uint8_t *v;
    size_t vl;
    bool sizes = ol_s3_meta_get(info->meta, info->meta_len, OL_S3_META_PARTS, &v, &vl) == 0;
    ol_xml_open(x, "ObjectParts");
    ol_xml_u64(x, "PartsCount", info->nparts);
    if (sizes) {
        uint32_t last = marker, shown = 0;
        bool truncated = false;
        for (uint32_t pn = marker + 1; pn <= info->nparts; pn++) {
            if (shown == max) {
                truncated = true;
                break;
            }
            uint64_t size;
            if (!attr_part_size(v, vl, pn, &size))
                break;
            ol_xml_open(x, "Part");
            ol_xml_u64(x, "PartNumber", pn);
            ol_xml_u64(x, "Size", size);
            ol_xml_close(x);
            last = pn;
            shown++;
        }
        ol_xml_u64(x, "PartNumberMarker", marker);
        ol_xml_u64(x, "NextPartNumberMarker", last);
        ol_xml_u64(x, "MaxParts", max);
        ol_xml_bool(x, "IsTruncated", truncated);
    }
    ol_xml_close(x);
}

int ol_s3_get_object_attributes(struct ol_s3_req *r)
{
    int mask = attr_mask(ol_s3_header(r, "x-amz-object-attributes"));
    if (mask < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument, "Invalid attribute name specified.");
    if (mask == 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "The x-amz-object-attributes header specifying the attributes to be "
                           "retrieved is either missing or empty");
    int64_t max = attr_count(r, "x-amz-max-parts", ATTR_MAX_PARTS);
    int64_t marker = attr_count(r, "x-amz-part-number-marker", 0);
    if (max < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Provided max-parts not an integer or within integer range");
    if (marker < 0)
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Provided part-number-marker not an integer or within integer range");
    if (max > ATTR_MAX_PARTS)
        max = ATTR_MAX_PARTS;

    struct ol_obj_reader *rd = NULL;
    const char *want_vid = ol_s3_version_param(r);
    int rc = ol_obj_read_open_v(r->ctx->obj, r->bucket, r->key, r->key_len, want_vid, &rd);
    if (rc < 0)
        return ol_s3_version_open_error(r, rc, want_vid);
    const struct ol_obj_info *info = ol_obj_read_info(rd);
    char vid[OL_STORE_VID_MAX] = "";
    bool has_vid = ol_obj_read_vid(rd, vid) == 0 && vid[0];
    char lm[32];
    ol_s3_http_date(info->mtime_ns, lm);

    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "GetObjectAttributesResponse");
    /* Unlike GetObject's header, this ETag is not quoted. */
    if (mask & ATTR_ETAG)
        ol_xml_str(&x, "ETag", info->etag);
    if (mask & ATTR_CHECKSUM)
        attr_checksum(&x, info);
    if (mask & ATTR_PARTS)
        attr_parts(&x, info, marker > UINT32_MAX ? UINT32_MAX : (uint32_t)marker, (uint32_t)max);
    if (mask & ATTR_STORAGE_CLASS)
        ol_xml_str(&x, "StorageClass", "STANDARD");
    if (mask & ATTR_SIZE)
        ol_xml_u64(&x, "ObjectSize", info->size);
    ol_xml_end_doc(&x);
    struct ol_http_hdr h[] = {{"Last-Modified", lm}, {"x-amz-version-id", vid}};
    rc = ol_s3_send_xml_hdrs(r, 200, &x, h, has_vid ? 2 : 1);
    ol_xml_free(&x);
    ol_obj_read_close(rd);
    return rc;
}
