/* The storage engine's shared internals: the store, segments and the
 * operations that the writer thread applies.  Not for use outside src/store. */
#ifndef OL_STORE_INTERNAL_H
#define OL_STORE_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/loop.h"
#include "store/format.h"
#include "store/index.h"
#include "store/segment.h"
#include "store/store.h"
#include "store/writer.h"

#define OL_ALIGN 4096u
#define OL_IO_BUF_BYTES (1u << 20) /* writer and compactor buffers */
/* A reader's window: a large object is read, verified and sent 4 MiB at a
 * time.  Fewer, larger rounds cost less CPU per byte than 1 MiB ones (GET
 * 64 MiB: 0.38 against 0.46-0.50 server CPU-s per GiB, bench/RESULTS.md);
 * it is the largest class of the per-thread buffer pools (core/buf.h). */
#define OL_READ_BUF_BYTES (4u << 20)
/* Zero-copy reads (ol_store_read_file) check at most this much per call: a
 * send that the socket takes only in part is checked again from where it
 * stopped, so a larger window would waste more checking. */
#define OL_ZC_WINDOW_BYTES (1u << 20)
#define OL_MAX_LOOPS 1024u
/* Read transactions a store keeps at rest (ol_rd_begin): about the readers
 * in flight at once on a few cores. */
#define OL_STORE_RD_IDLE 16u

static inline uint64_t ol_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* One active-segment slot: one per loop, one for plain threads (mutex), one
 * for the compactor. */
struct ol_slot {
    pthread_mutex_t mu; /* taken only by the shared plain-thread slot */
    struct ol_seg *seg; /* holds one reference */
};

struct ol_store {
    struct ol_store_opts o;
    char *dir;
    int dir_fd;
    int seg_dir_fd;
    struct ol_format fmt;
    bool direct;             /* O_DIRECT works on this file system */
    atomic_bool direct_logged;

    MDB_env *env;
    MDB_dbi db_buckets, db_objects, db_uploads, db_parts, db_segs, db_meta, db_bconf;
    MDB_dbi db_versions; /* non-current versions and delete markers (versions.c) */

    /* Segment registry: every segment file that exists, sorted by id. */
    pthread_mutex_t reg_mu;
    struct ol_seg **segs;
    size_t nsegs, cap_segs;
    _Atomic uint64_t next_seg_id;
    struct ol_slot *slots;
    unsigned nslots;

    /* Writer (commit) thread. */
    pthread_t wthr;
    bool wthr_started;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    struct ol_op *q_head, *q_tail;
    bool q_stop;

    /* Compactor thread. */
    pthread_t cthr;
    bool cthr_started;
    pthread_mutex_t c_mu;
    pthread_cond_t c_cv;
    bool c_stop;
    bool reap_req;
    struct ol_compact_req *c_reqs;

    _Atomic uint64_t commits, commit_ops, compacted_bytes, corrupt_blocks;

    /* Read transactions at rest (reset, each keeping its reader slot):
     * ol_rd_begin renews one instead of allocating a transaction and
     * searching the reader table under its mutex, which a GET on an erasure
     * set paid once per drive.  Taken and returned by atomic exchange; the
     * close aborts those left. */
    _Atomic(MDB_txn *) rd_idle[OL_STORE_RD_IDLE];
};

/* ---- readers (store.c) ---- */

struct ol_store_reader {
    struct ol_store *st;
    struct ol_obj_info info;
    uint8_t *meta;
    uint8_t *attrs; /* attribute section (attr_len bytes) */
    uint32_t attr_len;
    bool is_inline;
    bool inline_ok;
    uint8_t *data; /* inline bytes */
    uint32_t inline_crc;
    uint32_t block_bytes;
    uint32_t next;
    struct ol_extent *ext;
    uint64_t *ext_start; /* object offset of each extent */
    uint32_t *crc_start; /* first CRC of each extent */
    uint32_t *crcs;
    struct ol_seg **segs; /* one reference per extent */
    uint8_t *buf;
    size_t buf_cap;
    bool c_valid; /* buf holds verified bytes of extent c_ext at [c_off, c_off+c_len) */
    uint32_t c_ext;
    uint64_t c_off;
    size_t c_len;
};

/* Begins an LMDB read transaction (a rested one renewed, when there is
 * one).  End it with ol_rd_end, or mdb_txn_abort (which frees it). */
int ol_rd_begin(struct ol_store *st, MDB_txn **txn);
/* Ends a read transaction from ol_rd_begin, keeping it for a later begin
 * when there is room.  Consumes txn. */
void ol_rd_end(struct ol_store *st, MDB_txn *txn);

/* ---- writer thread helpers (writer.c) ---- */

/* Checks a precondition against the current entry of an objects-DB key, in
 * the writer's transaction.  0, -OL_EPRECONDITION, or -OL_ENOKEY (If-Match on
 * a missing key). */
int ol_cond_check(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                  const struct ol_store_cond *cond);

/* Flushes a streamed writer and makes its data durable, without committing:
 * the extents and CRCs stay owned by w (valid until ol_store_write_abort,
 * which also drops its segment references). */
int ol_writer_seal(struct ol_store_writer *w, const struct ol_extent **ext, uint32_t *next,
                   const uint32_t **crcs, uint32_t *ncrc);

/* Opens a reader on the entry that find() returns from a read transaction
 * (*v points into LMDB's map, valid for that transaction). */
int ol_reader_open_fn(struct ol_store *st, int (*find)(void *ctx, MDB_txn *txn, MDB_val *v),
                      void *ctx, struct ol_store_reader **out);

/* The writer thread's per-batch state (writer.c). */
struct batch_ctx;
/* Adds (sign 1) or frees (sign -1) the space of an encoded entry. */
int ol_writer_space(struct batch_ctx *bc, MDB_txn *txn, const void *v, size_t len, int sign);
/* Replaces (or deletes, v NULL) an objects-DB entry ignoring versioning. */
int ol_obj_replace_plain(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                         const void *v, size_t vlen);
struct ol_store *ol_batch_store(struct batch_ctx *bc);

/* ---- versions (versions.c), in the writer's transaction ---- */

/* Replaces or deletes (v NULL) the current entry of ik following the
 * bucket's versioning state; vid_out gets the new version's id (or the
 * marker's), "" when unversioned. */
int ol_ver_replace(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                   const void *v, size_t vlen, char vid_out[OL_STORE_VID_MAX]);
/* The bucket's versioning state (OFF when unset or unreadable). */
enum ol_versioning ol_ver_state(struct ol_store *st, MDB_txn *txn, const char *bucket);
/* OL_OP_DELETE_VERSION. */
int ol_ver_delete_version(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op);
/* OL_OP_ATTR_PUT_VERSION. */
int ol_ver_attr_put(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op);
/* OL_OP_META_PATCH_VERSION (ol_store_patch_meta_v). */
int ol_ver_meta_patch(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op);
/* Validates an attribute (name, value size) and runs an attribute op
 * (OL_OP_ATTR_PUT on the current entry, OL_OP_ATTR_PUT_VERSION on version
 * vid) through the writer; vid_out (may be NULL) gets the version's id. */
int ol_attr_op_run(struct ol_store *st, enum ol_op_type type, const char *bucket,
                   const char *key, size_t key_len, const char *vid, const char *name,
                   const void *val, size_t len, char vid_out[OL_STORE_VID_MAX]);
/* -OL_EBUCKETNOTEMPTY when a version or marker of the bucket remains. */
int ol_ver_bucket_check_empty(struct ol_store *st, MDB_txn *txn, const char *bucket);
/* Finds version vid of ik (current or not) in any transaction: 0 with *v,
 * -OL_ENOVERSION, -OL_EMARKER. */
int ol_ver_lookup(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                  const char *vid, MDB_val *v);

/* ---- compactor (compact.c) ---- */

int ol_compact_start(struct ol_store *st);
void ol_compact_stop(struct ol_store *st);
/* Asks the compactor thread to reap unreferenced empty segments soon. */
void ol_compact_kick_reap(struct ol_store *st);

#endif
