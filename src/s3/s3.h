/* The S3 layer: what every handler shares.
 *
 * router.c turns an HTTP request into an ol_s3_req (bucket, key, query
 * parameters, authenticated user: auth.c, sigv4.c, sigv2.c) and calls one
 * handler by operation; request.c holds what every handler uses to read the
 * request and answer it.  Each handler sends exactly one response: a success
 * or ol_s3_error().  Handlers never know which backend stores the data: they
 * call the object layer (obj/obj.h) through r->ctx->obj.
 *
 * Handler files, by family:
 *   bucket.c         ListBuckets, CreateBucket, HeadBucket, DeleteBucket, location
 *   list.c           ListObjects v1/v2, ListParts, ListMultipartUploads
 *   object.c, body.c PutObject, GetObject/HeadObject, DeleteObject; receiving bodies
 *   multipart.c      Create/UploadPart/Complete/Abort, the abandoned-upload reaper
 *   copy.c           CopyObject, UploadPartCopy
 *   delete.c         DeleteObjects
 *   attributes.c     GetObjectAttributes
 *   tagging.c        object tags; bucket_tagging.c: bucket tags
 *   versioning.c     bucket versioning, ListObjectVersions
 *   cors.c           bucket CORS, preflights, CORS headers on responses
 *   lifecycle.c      bucket lifecycle rules and the lifecycle worker
 *   settings.c       the bucket-settings documents those three share
 *   checksum.c       additional checksums (headers, trailers, parts)
 *   meta.c           the metadata blob stored with an object
 *   admin.c          /_openlake/admin/... of an erasure-coded deployment
 *   admin_users.c    /_openlake/admin/users...: run-time users (users/users.h)
 *   errors.c, xml.c, util.c  error table, XML writer/parser, dates and names
 */
#ifndef OL_S3_S3_H
#define OL_S3_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/conn.h"
#include "s3/errors.h"
#include "s3/xml.h"
#include "store/store.h" /* struct ol_obj_attr (tagging) */

struct ol_store;
struct ol_cfg;

struct ol_s3_param {
    char *name;   /* percent-decoded, NUL-terminated */
    char *value;  /* percent-decoded, NUL-terminated ("" when absent) */
    size_t value_len;
};

#define OL_S3_MAX_PARAMS 32

struct ol_obj;
struct ol_kv;
struct ol_users;
struct ol_rl;
struct ol_rl_user;

struct ol_s3_ctx {
    struct ol_obj *obj; /* the object layer (obj/obj.h): every mode, one path */
    const struct ol_cfg *cfg;
    struct ol_users *users; /* who may sign requests (users/users.h) */
    uint16_t native_port; /* the native client port (native/server.h); 0: none */
    uint16_t native_lane_ports[16]; /* every lane's port, lane 0 first */
    unsigned native_lanes;
    struct ol_kv *kv;     /* the KV-cache store (kv/kv.h), for admin info; NULL: none */
    struct ol_rl *rl;     /* per-user limits (access/ratelimit.h); NULL: none */
};

struct ol_s3_req {
    struct ol_s3_ctx *ctx;
    struct ol_http_conn *conn;
    struct ol_http_req *http;
    char bucket[64];      /* "" when the request names no bucket */
    bool virtual_host;    /* bucket came from the Host header (SigV2 signs "/bucket") */
    char *key;            /* decoded object key, NUL-terminated; NULL when none */
    size_t key_len;
    struct ol_s3_param params[OL_S3_MAX_PARAMS];
    size_t nparams;
    char request_id[24];
    const char *access_key; /* authenticated user (NULL: anonymous, allowed by config) */
    char access_key_buf[129]; /* where access_key points once authenticated */
    int64_t now_ns;         /* wall clock at request start */
    /* The user's bandwidth limit (access/ratelimit.h), once authenticated:
     * bodies in and out are paced to it.  NULL: none. */
    struct ol_rl_user *rl_user;
    /* Body decoding chosen by auth: aws-chunked bodies are decoded (and
     * verified) by ol_s3_body_read. */
    void *body_decoder;
    const char *payload_sha256; /* expected hex SHA-256 of the body, or NULL */
};

/* Frees the body decoder (router.c, after the handler). */
void ol_s3_body_free(struct ol_s3_req *r);
/* Body access for handlers: decodes aws-chunked framing and checks a signed
 * payload's SHA-256 at the end (-OL_ESHA256 -> XAmzContentSHA256Mismatch). */
ssize_t ol_s3_body_read(struct ol_s3_req *r, void *buf, size_t len);
/* Makes the body come from src instead of the connection (S3 over RDMA,
 * s3/rdma.h): len bytes, read at increasing offsets; the signed payload's
 * SHA-256, when there is one, is checked on them as on a body received.
 * Consumes ctx (src_free(ctx) after the handler, or now on failure).
 * -EINVAL for an aws-chunked body, -ENOMEM. */
int ol_s3_body_set_source(struct ol_s3_req *r, int64_t len,
                          ssize_t (*src)(void *ctx, void *buf, size_t len, uint64_t off),
                          void *ctx, void (*src_free)(void *ctx));
/* Decoded body length when known in advance (x-amz-decoded-content-length or
 * Content-Length), else -1. */
int64_t ol_s3_body_length(const struct ol_s3_req *r);

/* A trailer of an aws-chunked body ("x-amz-checksum-crc32"), once the body
 * has been read to its end: the NUL-terminated value (borrowed, valid for the
 * request), or NULL. */
const char *ol_s3_body_trailer(const struct ol_s3_req *r, const char *name);

/* Query parameters. */
const struct ol_s3_param *ol_s3_param(const struct ol_s3_req *r, const char *name);
bool ol_s3_has_param(const struct ol_s3_req *r, const char *name);
/* Request header value (NULL if absent); the slice is not NUL-terminated. */
const struct ol_slice *ol_s3_header(const struct ol_s3_req *r, const char *name);

/* Sends an S3 error document (Code, Message, Resource, RequestId) with the
 * code's HTTP status.  Returns 0 (or the send error). */
int ol_s3_error(struct ol_s3_req *r, enum ol_s3_code code, const char *message);
/* The same with one more element after Message when elem and elem_value are
 * both set (HeadersNotSigned of an unsigned-header AccessDenied). */
int ol_s3_error_elem(struct ol_s3_req *r, enum ol_s3_code code, const char *message,
                     const char *elem, const char *elem_value);
/* Maps a store/core error to an S3 error and sends it. */
int ol_s3_error_from(struct ol_s3_req *r, int err);
/* Sends 200 with an XML body built in x (adds Content-Type: application/xml
 * and x-amz-request-id). */
int ol_s3_send_xml(struct ol_s3_req *r, int status, struct ol_xml *x);
/* Sends a response with no body (plus extra headers; x-amz-request-id added). */
int ol_s3_send_empty(struct ol_s3_req *r, int status, const struct ol_http_hdr *hdrs,
                     size_t nhdrs);

/* Formats an RFC 7231 date (Last-Modified) and an ISO 8601 one (XML). */
void ol_s3_http_date(int64_t ns, char out[32]);
void ol_s3_iso_date(int64_t ns, char out[32]);

/* Bucket name rules (3..63, lowercase letters, digits, '.', '-', no IP form...). */
bool ol_s3_bucket_name_valid(const char *name);

/* Handlers, by family. */
int ol_s3_list_buckets(struct ol_s3_req *r);
/* /_openlake/admin/users... (admin_users.c); the router checked the caller
 * is an admin (ol_users_is_admin). */
int ol_s3_admin_users(struct ol_s3_req *r);
int ol_s3_create_bucket(struct ol_s3_req *r);
int ol_s3_head_bucket(struct ol_s3_req *r);
int ol_s3_delete_bucket(struct ol_s3_req *r);
int ol_s3_get_bucket_location(struct ol_s3_req *r);
int ol_s3_list_objects(struct ol_s3_req *r);        /* v1 and v2 (list-type=2) */
int ol_s3_put_object(struct ol_s3_req *r);
int ol_s3_get_object(struct ol_s3_req *r);           /* GET and HEAD */
int ol_s3_get_object_attributes(struct ol_s3_req *r); /* GET ?attributes (attributes.c) */
int ol_s3_delete_object(struct ol_s3_req *r);
int ol_s3_create_multipart(struct ol_s3_req *r);
int ol_s3_upload_part(struct ol_s3_req *r);
int ol_s3_complete_multipart(struct ol_s3_req *r);
int ol_s3_abort_multipart(struct ol_s3_req *r);
int ol_s3_list_parts(struct ol_s3_req *r);
int ol_s3_list_uploads(struct ol_s3_req *r);
/* Loop 0's fiber that aborts uploads older than multipart_expiry_sec (multipart.c). */
void ol_s3_upload_reaper(void *ctx);
/* copy.c */
int ol_s3_copy_object(struct ol_s3_req *r);
int ol_s3_upload_part_copy(struct ol_s3_req *r);
/* delete.c */
int ol_s3_delete_objects(struct ol_s3_req *r);
/* tagging.c */
int ol_s3_get_object_tagging(struct ol_s3_req *r);
int ol_s3_put_object_tagging(struct ol_s3_req *r);
int ol_s3_delete_object_tagging(struct ol_s3_req *r);
/* bucket_tagging.c */
int ol_s3_get_bucket_tagging(struct ol_s3_req *r);
int ol_s3_put_bucket_tagging(struct ol_s3_req *r);
int ol_s3_delete_bucket_tagging(struct ol_s3_req *r);
/* The x-amz-tagging header ("k1=v1&k2=v2", URL-encoded) of PutObject,
 * CreateMultipartUpload and CopyObject.  Checked before the body is
 * received: true when absent or valid, else false with *msg set (answer
 * InvalidTag). */
bool ol_s3_tagging_header_ok(struct ol_s3_req *r, const char **msg);
/* A tag set encoded as the object attribute that holds it, ready for a
 * commit or copy to write with the object (store.h: ol_obj_info.attrs,
 * ol_store_copy_opts.attrs), so the tags commit in the object's own
 * transaction.  attr.name is the tags attribute; attr.val is NULL when the
 * set is empty (a copy passes that to remove the source's tags; a commit
 * passes no attribute). */
#define OL_TAGS_ATTR "tags" /* the object attribute that holds its tag set */
struct ol_s3_tag_attr {
    struct ol_obj_attr attr;
    char *blob; /* owns attr.val */
};
/* Parses tag query q (n bytes; an upload's saved x-amz-tagging) into *ta:
 * 0, -EINVAL with *msg the InvalidTag message, or -ENOMEM.  Free *ta with
 * ol_s3_tag_attr_free whatever the result. */
int ol_s3_tag_attr_from_query(struct ol_s3_tag_attr *ta, const char *q, size_t n,
                              const char **msg);
/* The same from r's x-amz-tagging header (absent: an empty set). */
int ol_s3_tag_attr_from_header(struct ol_s3_req *r, struct ol_s3_tag_attr *ta, const char **msg);
void ol_s3_tag_attr_free(struct ol_s3_tag_attr *ta);
/* Checks one tag key (is_key) or value against Amazon S3's rules: valid
 * UTF-8; letters, digits, spaces and "+-=._:/@" only (no NUL or control
 * character); a key 1..128 characters, a value 0..256; a key not prefixed
 * "aws:" unless reserved_ok (a lifecycle filter may name such a tag).
 * Returns NULL or the InvalidTag message. */
const char *ol_s3_tag_check(const char *s, size_t n, bool is_key, bool reserved_ok);
/* Number of tags on r's object (0 when none), or a negative store error;
 * GetObject/HeadObject send it as x-amz-tagging-count when positive. */
int ol_s3_tagging_count(struct ol_s3_req *r);
struct ol_obj_reader;
/* The same from an open reader's snapshot (no index lookup): 0 when none. */
int ol_s3_tagging_count_of(const struct ol_obj_reader *rd);
/* Whether the version rd holds has tag key (key_len bytes) with value val
 * (val_len bytes): the lifecycle worker's tag filter. */
bool ol_s3_tagging_has(const struct ol_obj_reader *rd, const char *key, size_t key_len,
                       const char *val, size_t val_len);
/* Reads a small request document (tagging, CORS, lifecycle) of at most max
 * bytes into *out (malloc'ed, NUL-terminated; the caller frees it) and checks
 * Content-MD5 when sent.  -EBADMSG when larger, -OL_EBADDIGEST on a Content-MD5
 * mismatch, or a body-reading error. */
int ol_s3_read_doc(struct ol_s3_req *r, size_t max, char **out, size_t *len);
/* versioning.c */
int ol_s3_get_bucket_versioning(struct ol_s3_req *r);
int ol_s3_put_bucket_versioning(struct ol_s3_req *r);
int ol_s3_list_object_versions(struct ol_s3_req *r);
/* Answers a failed ol_store_read_open_v (vid: the versionId asked for, or
 * NULL): a key whose latest version is a delete marker gets 404 with
 * x-amz-delete-marker; a marker asked for by id gets 405. */
int ol_s3_version_open_error(struct ol_s3_req *r, int err, const char *vid);
/* ol_s3_send_xml with extra headers (x-amz-version-id...). */
int ol_s3_send_xml_hdrs(struct ol_s3_req *r, int status, struct ol_xml *x,
                        const struct ol_http_hdr *extra, size_t nextra);
/* The versionId query parameter's value, or NULL. */
const char *ol_s3_version_param(const struct ol_s3_req *r);
/* cors.c */
int ol_s3_get_bucket_cors(struct ol_s3_req *r);
int ol_s3_put_bucket_cors(struct ol_s3_req *r);
int ol_s3_delete_bucket_cors(struct ol_s3_req *r);
int ol_s3_cors_preflight(struct ol_s3_req *r); /* OPTIONS */
/* CORS headers for the response to an actual (non-preflight) request: when it
 * carries an Origin header and the bucket's CORS configuration has a rule for
 * that origin and method, fills out[] (at most max; names are literals, values
 * are copied into store[cap]) and returns the count; otherwise 0.  The
 * response helpers (ol_s3_send_xml, ol_s3_send_empty, ol_s3_error) and
 * GetObject append them. */
#define OL_S3_CORS_MAX_HDRS 6
#define OL_S3_CORS_STORE_BYTES 2048
size_t ol_s3_cors_headers(struct ol_s3_req *r, struct ol_http_hdr *out, size_t max, char *store,
                          size_t cap);
/* admin.c: /_openlake/admin/... of an erasure-coded deployment (the router
 * authenticates). */
int ol_s3_admin(struct ol_s3_req *r);
/* lifecycle.c */
int ol_s3_get_bucket_lifecycle(struct ol_s3_req *r);
int ol_s3_put_bucket_lifecycle(struct ol_s3_req *r);
int ol_s3_delete_bucket_lifecycle(struct ol_s3_req *r);
/* The lifecycle worker: a fiber (spawned once, on loop 0, with a struct
 * ol_s3_ctx * that outlives the loop) that applies every bucket's enabled
 * lifecycle rules each lifecycle_interval_ms until the loop stops. */
void ol_s3_lifecycle_fiber(void *ctx);

#endif
