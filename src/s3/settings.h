/* Bucket settings stored as documents (CORS, lifecycle, ...): the shared
 * Put/Get/Delete handlers and the stored-document reader.  Each setting kind
 * describes itself once (its store name, size limits, parser and writer);
 * the handlers do the rest the same way for all of them. */
#ifndef OL_S3_SETTINGS_H
#define OL_S3_SETTINGS_H

#include <stddef.h>

#include "s3/s3.h"

struct ol_store;

struct ol_s3_setting_doc {
    const char *name;           /* the store's setting name */
    size_t doc_max;             /* largest request document */
    size_t stored_max;          /* largest normalized document kept */
    enum ol_s3_code missing;    /* the error when the bucket has none */
    const char *missing_msg;
    /* Parses and validates a request document into *cfg.  On -EINVAL it
     * sets *code and *msg (msg may point into *cfg, which the caller frees
     * after sending the error). */
    int (*parse)(const char *doc, size_t len, void **cfg, enum ol_s3_code *code,
                 const char **msg);
    /* Writes the normalized document that is stored and served back. */
    void (*write)(const void *cfg, struct ol_xml *x);
    void (*free)(void *cfg);
};

int ol_s3_setting_put(struct ol_s3_req *r, const struct ol_s3_setting_doc *d);
int ol_s3_setting_get(struct ol_s3_req *r, const struct ol_s3_setting_doc *d);
int ol_s3_setting_delete(struct ol_s3_req *r, const struct ol_s3_setting_doc *d);

/* Reads the stored document of a bucket into a malloc'ed, NUL-terminated
 * buffer (a stack buffer is tried first: most are small).  0, -OL_ENOCONFIG,
 * -OL_ENOBUCKET, -OL_EQUORUM, -ENOMEM.  Every settings read goes through
 * here, whatever the mode: with erasure-coded drives (ctx->ec, no ctx->obj)
 * no bucket has settings (that mode answers 501 to every settings operation),
 * so an existing bucket answers -OL_ENOCONFIG. */
int ol_s3_setting_read(const struct ol_s3_ctx *ctx, const char *bucket,
                       const struct ol_s3_setting_doc *d, char **out, size_t *len);

/* A process-wide count of changes to bucket settings and buckets: it moves
 * (after the change is stored) on every Put/Delete of a setting and every
 * CreateBucket/DeleteBucket.  A cache of parsed settings (cors.c) keeps the
 * value it read before loading an entry, and reloads the entry once the
 * count has moved, on any thread. */
uint64_t ol_s3_settings_gen(void);
void ol_s3_settings_changed(void);

#endif
