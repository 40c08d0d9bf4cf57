/* The drive's writer thread: group commit of index operations.  The
 * streamed data writer (ol_store_write_*) lives in writer.c too.  Internal to
 * src/store. */
#ifndef OL_STORE_WRITER_H
#define OL_STORE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "store/index.h"
#include "store/store.h"

struct ol_store;

/* ---- operations applied by the writer thread (writer.c) ---- */

enum ol_op_type {
    OL_OP_BUCKET_CREATE,
    OL_OP_BUCKET_DELETE,
    OL_OP_PUT_OBJECT,
    OL_OP_PUT_PART,
    OL_OP_DELETE,
    OL_OP_UPLOAD_CREATE,
    OL_OP_UPLOAD_COMPLETE,
    OL_OP_UPLOAD_ABORT,
    OL_OP_RELOCATE,
    OL_OP_BCONF_PUT,
    OL_OP_ATTR_PUT,
    OL_OP_COPY_OBJECT,
    OL_OP_COPY_PART,
    OL_OP_DELETE_VERSION, /* versions.c: remove one version permanently */
    OL_OP_ATTR_PUT_VERSION, /* versions.c: set an attribute of one version */
    OL_OP_META_PATCH_VERSION, /* versions.c: patch a version's meta blob in place */
};

enum ol_reloc_db { OL_RELOC_OBJECTS, OL_RELOC_PARTS, OL_RELOC_VERSIONS };

struct ol_op {
    struct ol_op *next;
    enum ol_op_type type;
    int result;
    struct ol_completion done;
    const char *bucket;
    const uint8_t *ikey; /* objects DB key (bucket '\0' key) */
    size_t ikey_len;
    const uint8_t *val;  /* encoded entry or upload record */
    size_t val_len;
    int64_t ctime_ns;
    const char *upload_id;
    uint32_t part_no;
    const struct ol_complete_part *parts;
    uint32_t nparts;
    uint64_t min_part_bytes;
    struct ol_obj_info *info;
    /* relocation: swap extent `old` for (new_seg, new_off) */
    enum ol_reloc_db reloc_db;
    struct ol_extent old;
    uint64_t new_seg, new_off;
    bool reloc_stale;
    /* precondition on the objects-DB key (put, complete, copy), or NULL */
    const struct ol_store_cond *cond;
    /* attributes: name, and val/val_len the raw value (NULL removes) */
    const char *name;
    /* copies: the source's objects-DB key and the options */
    const uint8_t *src_ikey;
    size_t src_ikey_len;
    const char *src_bucket;
    const struct ol_store_copy_opts *copy;
    const struct ol_copy_part_req *cpart;
    /* versions: the version asked for (delete, copy source), or NULL; the id
     * of the version made or removed, and whether it is a delete marker */
    const char *vid;
    char vid_out[OL_STORE_VID_MAX];
    /* meta patches: bytes [patch_off, +val_len) of the meta blob must hold
     * patch_expect and become val */
    uint32_t patch_off;
    const uint8_t *patch_expect;
    bool marker;
    /* Applied only when this earlier op of the same chain succeeded (else
     * -ECANCELED): see ol_commit_run_chain. */
    const struct ol_op *after;
};

/* UploadPartCopy: the source ranges that the new part shares by reference.
 * The writer thread checks, in its transaction, that the source still has
 * etag `etag` and still references every shared range (on the same block
 * grid), so the shared bytes are the ones that were verified and cannot have
 * been freed; otherwise the op fails with -EAGAIN and the caller retries. */
struct ol_copy_part_req {
    const char *etag;
    const struct ol_extent *shared;
    uint32_t nshared;
};

int ol_commit_start(struct ol_store *st);
void ol_commit_stop(struct ol_store *st);
/* Queues op (initialising its completion for the calling fiber/thread). */
void ol_commit_enqueue(struct ol_store *st, struct ol_op *op);
/* Queues op and waits for its result (op->vid_out then holds the id of a
 * version it made). */
int ol_commit_run(struct ol_store *st, struct ol_op *op);
/* Queues n ops back to back and waits for every result.  The writer applies
 * queued ops in order and commits a batch before it applies the next one,
 * so an op is never durable before the ops queued ahead of it; ops queued
 * together usually share one index commit (one flush instead of n).  An op
 * whose `after` is set runs only if that op (queued ahead of it) succeeded.
 * Returns ops[0]'s result. */
int ol_commit_run_chain(struct ol_store *st, struct ol_op **ops, unsigned n);

/* Builds the parts DB key: upload id (32 hex) + big-endian part number. */
int ol_part_key(uint8_t out[40], const char *upload_id, uint32_t part_no, size_t *len);
#define OL_UPLOAD_ID_LEN 32u

#endif
