/* S3 over erasure-coded drives: the deployment (several data directories,
 * grouped into erasure sets by ec/placement.h) and the handlers that serve
 * the core object operations through the sets (ec_object.c).
 *
 * When `openlake server` gets more than one directory, r->ctx->ec is set and
 * the router sends every request to ol_s3_ec_dispatch: buckets (create, head,
 * delete, list), PutObject (single PUT), GetObject/HeadObject (Range,
 * conditional headers), DeleteObject and ListObjects v1/v2 (list.c, through
 * the iterator below), and multipart uploads (s3/ec_multipart.h).  Every
 * other operation answers 501 NotImplemented.
 *
 * Object layout.  The erasure set stores, as one object, the S3 metadata
 * blob (s3/meta.h) followed by the body; the etag field of the shard
 * metadata holds "<md5 hex>" or "<md5 hex>:<blob length>", so a listing
 * knows the body's size without a read (docs/EC.md, section 6).
 */
#ifndef OL_S3_EC_OBJECT_H
#define OL_S3_EC_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/s3.h"

struct ol_cfg;
struct ol_obj_info;
struct ol_s3_ec;
struct ol_store_opts;

/* Opens every directory (formatting empty ones) with the store options `so`,
 * and groups them into sets (cfg->ec_data / ec_parity, 0 = automatic).
 * Checks each drive's deployment identity against its position, writing it
 * to drives that join (docs/EC.md 6.5).  On error (a drive that does not
 * belong included) writes a message naming the directory. */
int ol_s3_ec_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                  const struct ol_store_opts *so, struct ol_s3_ec **out, char *err,
                  size_t errlen);
void ol_s3_ec_close(struct ol_s3_ec *ec);
/* One line for the start-up banner ("6 drives, 1 set of 4+2"). */
void ol_s3_ec_describe(const struct ol_s3_ec *ec, char *buf, size_t cap);

/* Serves an S3 request in EC mode (bucket and key already parsed). */
int ol_s3_ec_dispatch(struct ol_s3_req *r);
/* Serves /_openlake/admin/... (authenticated by the router). */
int ol_s3_ec_admin(struct ol_s3_req *r);
/* Appends Prometheus lines to b[*n..cap). */
void ol_s3_ec_metrics(struct ol_s3_ec *ec, char *b, size_t cap, size_t *n);
/* The scrubber: a fiber on loop 0 (arg: the struct ol_s3_ctx). */
void ol_s3_ec_scrub_fiber(void *arg);
/* The drive monitor: checks, probes and reopens drives, heals after one
 * came back.  A fiber on loop 0 (arg: the struct ol_s3_ctx). */
void ol_s3_ec_monitor_fiber(void *arg);

/* A key iterator over the deployment with ol_store_iter's contract (list.c
 * lists through it): keys in byte order, each with its body size, ETag and
 * mtime in info (meta NULL). */
struct ol_s3_ec_iter;
int ol_s3_ec_iter_open(struct ol_s3_ec *ec, const char *bucket, const char *from,
                       size_t from_len, bool inclusive, struct ol_s3_ec_iter **out);
int ol_s3_ec_iter_next(struct ol_s3_ec_iter *it, const char **key, size_t *key_len,
                       struct ol_obj_info *info);
int ol_s3_ec_iter_seek(struct ol_s3_ec_iter *it, const char *from, size_t from_len,
                       bool inclusive);
void ol_s3_ec_iter_close(struct ol_s3_ec_iter *it);

/* ---- shared with the multipart handlers (s3/ec_multipart.c) ---- */

struct ol_eset;
struct ol_eset_put;
/* The erasure set that holds bucket/key; the sets by index. */
struct ol_eset *ol_s3_ec_set_of(struct ol_s3_ec *ec, const char *bucket, const char *key,
                                size_t klen);
unsigned ol_s3_ec_nsets(const struct ol_s3_ec *ec);
struct ol_eset *ol_s3_ec_set(struct ol_s3_ec *ec, unsigned i);
/* Sends the S3 error for an eset/store error (quorum: 503 SlowDown). */
int ol_s3_ec_error(struct ol_s3_req *r, int rc);
/* 1 when the bucket exists, 0 when not, or -OL_EQUORUM. */
int ol_s3_ec_bucket_exists(struct ol_s3_ec *ec, const char *bucket);
/* Calls fn for every bucket any drive knows; stops at fn's first non-zero
 * answer and returns it (or the listing's error). */
int ol_s3_ec_each_bucket(struct ol_s3_ec *ec, int (*fn)(void *ctx, const char *bucket), void *ctx);
/* Streams the request body (len bytes) into p (a PUT on es), computing its
 * MD5 and checking Content-MD5.  0 or an error (p is left to the caller).
 * Nothing big is reserved or allocated before the first body bytes arrive;
 * then the PUT's buffers, sized to the body, are reserved from the body
 * memory budget (core/buf.h) and held by p until it ends: -EBUSY when the
 * budget stays short for body_memory_wait_ms (ol_s3_ec_error: 503). */
int ol_s3_ec_receive(struct ol_s3_req *r, struct ol_eset_put *p, struct ol_eset *es, uint64_t len,
                     uint8_t md5[16]);
/* The same, writing prefix (plen bytes, not part of the body or its MD5)
 * into p before the body. */
int ol_s3_ec_receive_put(struct ol_s3_req *r, struct ol_eset_put *p, struct ol_eset *es,
                         const void *prefix, size_t plen, uint64_t len, uint8_t md5[16]);
/* Splits a stored etag field ("<etag>[:<meta length>[:<manifest size>]]"). */
void ol_s3_ec_etag_split(const char *field, char etag[64], uint64_t *meta_len,
                         uint64_t *manifest_size);

#endif
