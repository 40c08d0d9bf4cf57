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
#define OL_IO_BUF_BYTES (1u << 20) /* writer, reader and compactor buffers */
#define OL_MAX_LOOPS 1024u

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
    MDB_dbi db_buckets, db_objects, db_uploads, db_parts, db_segs, db_meta;

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
};

/* ---- compactor (compact.c) ---- */

int ol_compact_start(struct ol_store *st);
void ol_compact_stop(struct ol_store *st);
/* Asks the compactor thread to reap unreferenced empty segments soon. */
void ol_compact_kick_reap(struct ol_store *st);

#endif
