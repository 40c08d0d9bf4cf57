/* Streamed data writes (ol_store_write_*) and the drive's writer thread,
 * which applies index operations in group-committed LMDB transactions. */
#include "store/store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

/* ======================= streamed data writer ======================= */

/* Full buffers a writer may have in flight to the disk at once, behind the
 * one it fills. */
#define WRITER_INFLIGHT 2

struct ol_store_writer {
    struct ol_store *st;
    uint8_t *buf; /* the buffer being filled; NULL between a background
                     write of the last one and the next bytes */
    size_t buf_cap;  /* current buffer size */
    size_t buf_full; /* the size it grows to: a multiple of block_bytes */
    size_t buf_len;
    uint64_t size;
    int64_t size_hint; /* the expected size, or -1 */
    int err; /* sticky */
    bool flushed;
    struct ol_extent *ext;
    uint32_t next, cap_ext;
    uint32_t *crcs;
    uint32_t ncrc, cap_crc;
    struct ol_seg **segs; /* referenced segments this writer wrote to */
    uint32_t nsegs, cap_segs;
    /* Pipelined writes: a full buffer is written by a helper fiber while the
     * caller fills another, so receiving, hashing and the O_DIRECT writes
     * overlap; up to WRITER_INFLIGHT writes run at once (the disk's latency
     * varies with the other writers').  jobs is a ring of the writes in
     * flight, oldest first; idle holds written buffers (buf_full bytes) for
     * reuse. */
    struct ol_store_wjob {
        struct ol_completion done;
        int fd;
        uint8_t *buf;
        size_t len;
        uint64_t off;
        struct ol_seg *sync; /* also fdatasync this segment after the write */
        size_t free_cap; /* > 0: free the buffer (this size) once written */
    } jobs[WRITER_INFLIGHT];
    unsigned job_head, njobs;
    uint8_t *idle[WRITER_INFLIGHT + 1];
    unsigned nidle;
    /* The segment that the last background job synced after writing the
     * last expected bytes (NULL if none, or if bytes came after). */
    struct ol_seg *synced;
    /* The caller's hook (ol_store_write_set_release): called before a
     * buffer that held appended bytes is overwritten or freed; reuse says
     * that the current buffer may still hold such bytes. */
    ol_store_release_fn release;
    void *release_ctx;
    bool reuse;
    bool lazy; /* no buffer allocated yet: buf_cap is what the first gets */
    uint64_t reserved; /* body memory budget held (ol_store_write_hold) */
};

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint32_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > UINT32_MAX / 2)
            return -OL_ETOOLARGE;
        n *= 2;
    }
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

int ol_store_write_begin(struct ol_store *st, int64_t size_hint, struct ol_store_writer **out)
{
    struct ol_store_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->st = st;
    w->size_hint = size_hint;
    uint64_t full = OL_IO_BUF_BYTES;
    if (full < st->o.inline_bytes)
        full = st->o.inline_bytes;
    w->buf_full = (size_t)ol_round_up(full, st->o.block_bytes);
    /* A small expected size gets a small buffer: most objects are small, and
     * a full buffer per request would dominate memory and allocation time. */
    w->buf_cap = w->buf_full;
    if (size_hint >= 0 && (uint64_t)size_hint < w->buf_full)
        w->buf_cap = (size_t)ol_round_up((uint64_t)size_hint ? (uint64_t)size_hint : 1, OL_ALIGN);
    /* The buffer comes with the first bytes (make_room): a writer whose
     * body has not arrived (a stalled client) holds no buffer. */
    w->buf = NULL;
    w->lazy = true;
    *out = w;
    return 0;
}

uint64_t ol_store_write_size(const struct ol_store_writer *w)
{
    return w->size;
}

/* Waits for the oldest background writes until at most `keep` remain in
 * flight; their buffers become idle.  An error is sticky. */
static int wait_writes(struct ol_store_writer *w, unsigned keep)
{
    int rc = 0;
    for (unsigned i = 0; w->njobs > keep && i < WRITER_INFLIGHT; i++) {
        struct ol_store_wjob *j = &w->jobs[w->job_head];
        int r = ol_completion_wait(&j->done);
        OL_ASSERT(w->nidle <= WRITER_INFLIGHT);
        if (j->buf)
            w->idle[w->nidle++] = j->buf;
        j->buf = NULL;
        w->job_head = (w->job_head + 1) % WRITER_INFLIGHT;
        w->njobs--;
        if (r && !w->err)
            w->err = r;
        if (r && !rc)
            rc = r;
    }
    return rc;
}

static void write_fiber(void *arg)
{
    struct ol_store_wjob *j = arg;
    int rc = ol_pwrite_all(j->fd, j->buf, j->len, j->off);
    if (rc == 0 && j->sync)
        rc = ol_seg_sync(j->sync);
    if (j->free_cap) {
        /* Back to the pool at once: a writer whose caller stalls (a slow
         * client) then holds only the buffer it fills. */
        ol_buf_free(j->buf, j->free_cap);
        j->buf = NULL;
    }
    ol_completion_signal(&j->done, rc);
}

static void writer_free(struct ol_store_writer *w)
{
    /* The helper fibers read their buffers until they signal. */
    wait_writes(w, 0);
    for (unsigned i = 0; i < w->nidle; i++)
        ol_buf_free(w->idle[i], w->buf_full);
    for (uint32_t i = 0; i < w->nsegs; i++)
        ol_seg_unref(w->st, w->segs[i]);
    free(w->segs);
    free(w->ext);
    free(w->crcs);
    ol_buf_free(w->buf, w->buf_cap);
    ol_bodymem_release(w->reserved);
    free(w);
}

void ol_store_write_hold(struct ol_store_writer *w, uint64_t reserved_bytes)
{
    w->reserved += reserved_bytes;
}

uint64_t ol_store_write_buffer_bytes(const struct ol_store *st, int64_t size_hint)
{
    uint64_t full = OL_IO_BUF_BYTES;
    if (full < st->o.inline_bytes)
        full = st->o.inline_bytes;
    full = ol_round_up(full, st->o.block_bytes);
    if (size_hint >= 0 && (uint64_t)size_hint < full)
        return ol_round_up((uint64_t)size_hint ? (uint64_t)size_hint : 1, OL_ALIGN);
    /* The buffer being filled and WRITER_INFLIGHT written in the background
     * (a small first buffer is freed when it grows). */
    return full * (WRITER_INFLIGHT + 1);
}

/* Writes the buffered bytes to the caller's active segment.  Every flush but
 * the last is a whole number of blocks, so consecutive flushes that land
 * back to back in one segment extend one extent on the same block grid. */
static int flush(struct ol_store_writer *w)
{
    struct ol_store *st = w->st;
    size_t len = w->buf_len;
    if (len == 0)
        return 0;
    uint32_t bb = st->o.block_bytes;
    uint32_t nblk = ol_blocks(len, bb);
    int rc = grow((void **)&w->crcs, &w->cap_crc, w->ncrc + nblk, sizeof(uint32_t));
    if (rc == 0)
        rc = grow((void **)&w->ext, &w->cap_ext, w->next + 1, sizeof(struct ol_extent));
    if (rc == 0)
        rc = grow((void **)&w->segs, &w->cap_segs, w->nsegs + 1, sizeof(struct ol_seg *));
    if (rc)
        return rc;
    for (uint32_t b = 0; b < nblk; b++) {
        size_t bo = (size_t)b * bb;
        size_t bl = len - bo < bb ? len - bo : bb;
        w->crcs[w->ncrc + b] = ol_crc32c(w->buf + bo, bl);
    }
    size_t wlen = (size_t)ol_round_up(len, OL_ALIGN);
    if (wlen > len)
        memset(w->buf + len, 0, wlen - len);
    struct ol_seg *seg = NULL;
    uint64_t off = 0;
    /* The last expected bytes: the helper also makes them durable, while
     * the caller finishes the body (its last hashes and checks), and
     * finish_data then has nothing left to sync.  That sync must cover every
     * earlier write, so those are waited for first. */
    bool final = w->size_hint >= 0 && w->size == (uint64_t)w->size_hint;
    rc = wait_writes(w, final ? 0 : WRITER_INFLIGHT - 1);
    if (rc)
        return rc;
    w->synced = NULL;
    rc = ol_seg_reserve(st, ol_seg_slot_for_caller(st), len, &seg, &off);
    if (rc)
        return rc;
    final = final && (w->nsegs == 0 || (w->nsegs == 1 && w->segs[0] == seg));
    /* A full buffer on a loop goes to a helper fiber, and the caller fills
     * another meanwhile; the extent is recorded now, in reservation order,
     * and finish_data waits for the writes before the fdatasync.  The
     * writer's reference on seg (w->segs) outlives the write: writer_free
     * waits for it first. */
    struct ol_loop *loop = ol_loop_current();
    bool bg = loop && ol_fiber_current() && w->buf_cap == w->buf_full;
    if (bg) {
        OL_ASSERT(w->njobs < WRITER_INFLIGHT);
        struct ol_store_wjob *j = &w->jobs[(w->job_head + w->njobs) % WRITER_INFLIGHT];
        /* Without a release hook nobody reads the bytes after the write,
         * so the buffer need not wait for this writer's next call. */
        *j = (struct ol_store_wjob){.fd = seg->fd, .buf = w->buf, .len = wlen, .off = off,
                                    .sync = final ? seg : NULL,
                                    .free_cap = w->release ? 0 : w->buf_cap};
        ol_completion_init(&j->done);
        if (ol_fiber_spawn(loop, write_fiber, j) == 0) {
            w->njobs++;
            w->synced = j->sync;
            /* The next bytes get an idle or a new buffer (make_room). */
            w->buf = NULL;
        } else {
            j->buf = NULL;
            bg = false;
        }
    }
    if (!bg) {
        rc = ol_pwrite_all(seg->fd, w->buf, wlen, off);
        if (rc) {
            ol_seg_unref(st, seg);
            return rc;
        }
    }
    w->ncrc += nblk;
    struct ol_extent *last = w->next ? &w->ext[w->next - 1] : NULL;
    if (last && last->seg == seg->id && last->off + last->len == off && last->len % bb == 0) {
        last->len += len;
    } else {
        w->ext[w->next++] = (struct ol_extent){.seg = seg->id, .off = off, .len = len};
    }
    bool have = false;
    for (uint32_t i = 0; i < w->nsegs; i++)
        have |= w->segs[i] == seg;
    if (have)
        ol_seg_unref(st, seg);
    else
        w->segs[w->nsegs++] = seg;
    w->flushed = true;
    w->buf_len = 0;
    /* A synchronous write reuses the buffer that held these bytes. */
    w->reuse = !bg;
    return 0;
}

void ol_store_write_set_release(struct ol_store_writer *w, ol_store_release_fn fn, void *ctx)
{
    w->release = fn;
    w->release_ctx = ctx;
}

/* Makes room in the current buffer: a small first buffer grows to the full
 * size, a full one is flushed.  Either way the buffer that new bytes go into
 * next may have held bytes the caller still reads (a deferred hash), so the
 * caller's hook releases it first. */
static int make_room(struct ol_store_writer *w)
{
    if (w->err)
        return w->err;
    if (w->lazy) {
        w->buf = ol_aligned_alloc(w->buf_cap);
        if (!w->buf) {
            w->err = -ENOMEM;
            return w->err;
        }
        w->lazy = false;
    }
    if (!w->buf) {
        /* After a background write: a written buffer, or a new one (flush
         * keeps at most WRITER_INFLIGHT in flight, so a writer never holds
         * more than WRITER_INFLIGHT + 1). */
        OL_ASSERT(w->buf_len == 0 && w->buf_cap == w->buf_full);
        if (w->nidle > 0) {
            w->buf = w->idle[--w->nidle];
            w->reuse = true;
        } else if (!(w->buf = ol_aligned_alloc(w->buf_full))) {
            w->err = -ENOMEM;
            return w->err;
        }
    }
    if (w->buf_len == 0 && w->reuse) {
        /* The buffer held bytes before (its write is done): the caller may
         * still be reading them. */
        w->reuse = false;
        if (w->release)
            w->release(w->release_ctx, w->buf, w->buf_cap);
    }
    if (w->buf_len < w->buf_cap)
        return 0;
    if (w->buf_cap < w->buf_full) {
        uint8_t *nb = ol_aligned_alloc(w->buf_full);
        if (!nb) {
            w->err = -ENOMEM;
            return w->err;
        }
        memcpy(nb, w->buf, w->buf_len);
        if (w->release)
            w->release(w->release_ctx, w->buf, w->buf_cap);
        ol_buf_free(w->buf, w->buf_cap);
        w->buf = nb;
        w->buf_cap = w->buf_full;
        return 0;
    }
    int rc = flush(w);
    if (rc) {
        w->err = rc;
        return rc;
    }
    return make_room(w);
}

/* A full buffer is written at once rather than when the next bytes come:
 * the write (and, for the last expected bytes, the sync) then overlaps what
 * the caller does before its next call.  A size that could still be inlined
 * waits for the commit to decide. */
static int flush_if_full(struct ol_store_writer *w)
{
    if (w->buf_len < w->buf_full || w->size <= w->st->o.inline_bytes)
        return 0;
    int rc = flush(w);
    if (rc)
        w->err = rc;
    return rc;
}

int ol_store_write_room(struct ol_store_writer *w, uint8_t **p, size_t *len)
{
    int rc = make_room(w);
    if (rc)
        return rc;
    OL_ASSERT(w->buf_len < w->buf_cap);
    *p = w->buf + w->buf_len;
    *len = w->buf_cap - w->buf_len;
    return 0;
}

int ol_store_write_advance(struct ol_store_writer *w, size_t n)
{
    OL_ASSERT(n <= w->buf_cap - w->buf_len);
    w->buf_len += n;
    w->size += n;
    return flush_if_full(w);
}

int ol_store_write(struct ol_store_writer *w, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    /* Without a size hint, the first buffer is sized to the first bytes
     * (the shard of a small erasure-coded object is small); it grows to the
     * full size if more come. */
    if (w->lazy && w->size_hint < 0 && len > 0 && len < w->buf_cap)
        w->buf_cap = (size_t)ol_round_up(len, OL_ALIGN);
    for (uint64_t guard = 0; len > 0 && guard < UINT32_MAX; guard++) {
        int rc = make_room(w);
        if (rc)
            return rc;
        size_t n = w->buf_cap - w->buf_len;
        if (n > len)
            n = len;
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        w->size += n;
        p += n;
        len -= n;
        rc = flush_if_full(w);
        if (rc)
            return rc;
    }
    return w->err;
}

/* Flushes the tail and makes every segment this writer touched durable. */
static int finish_data(struct ol_store_writer *w)
{
    int rc = flush(w);
    int wr = wait_writes(w, 0);
    if (rc == 0)
        rc = wr;
    for (uint32_t i = 0; rc == 0 && i < w->nsegs; i++)
        if (w->segs[i] != w->synced)
            rc = ol_seg_sync(w->segs[i]);
    return rc;
}

static void fill_src(const struct ol_store_writer *w, struct ol_entry_src *s)
{
    memset(s, 0, sizeof(*s));
    s->size = w->size;
    s->block_bytes = w->st->o.block_bytes;
    s->ext = w->ext;
    s->nextents = w->next;
    s->crcs = w->crcs;
    s->ncrc = w->ncrc;
}

int ol_store_write_commit_object(struct ol_store_writer *w, const char *bucket,
                                 const char *key, size_t key_len,
                                 const struct ol_obj_info *info)
{
    return ol_store_write_commit_object_if(w, bucket, key, key_len, info, NULL);
}

int ol_store_write_commit_object_if(struct ol_store_writer *w, const char *bucket,
                                    const char *key, size_t key_len,
                                    const struct ol_obj_info *info,
                                    const struct ol_store_cond *cond)
{
    return ol_store_write_commit_object_v(w, bucket, key, key_len, info, cond, NULL);
}

int ol_store_write_commit_object_v(struct ol_store_writer *w, const char *bucket,
                                   const char *key, size_t key_len,
                                   const struct ol_obj_info *info,
                                   const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    struct ol_store *st = w->st;
    uint8_t *entry = NULL, *attrs = NULL;
    size_t entry_len = 0, attr_len = 0;
    uint8_t ikey[OL_IDX_KEY_MAX];
    int rc = w->err;
    if (rc)
        goto out;
    int kl = ol_idx_key(ikey, bucket, key, key_len);
    if (kl < 0) {
        rc = kl;
        goto out;
    }
    /* The attributes go into the entry itself, so they commit with the
     * object; checked before the data is made durable. */
    rc = ol_attrs_check(info->attrs, info->nattrs, false);
    if (rc == 0)
        rc = ol_attrs_apply(NULL, 0, info->attrs, info->nattrs, &attrs, &attr_len);
    if (rc)
        goto out;
    struct ol_entry_src s;
    fill_src(w, &s);
    /* Small objects live in the index: one LMDB write instead of a data write,
     * an fdatasync and an index write. */
    if (!w->flushed && w->size <= st->o.inline_bytes) {
        static const uint8_t none[1];
        s.is_inline = true;
        s.inline_data = w->buf ? w->buf : none;
    } else {
        rc = finish_data(w);
        if (rc)
            goto out;
        fill_src(w, &s);
    }
    s.mtime_ns = info->mtime_ns;
    s.etag = info->etag;
    s.nparts = info->nparts;
    s.meta = info->meta;
    s.meta_len = info->meta ? info->meta_len : 0;
    s.attrs = attrs;
    s.attr_len = (uint32_t)attr_len;
    rc = ol_entry_build(&s, &entry, &entry_len);
    if (rc)
        goto out;
    struct ol_op op = {
        .type = OL_OP_PUT_OBJECT,
        .bucket = bucket,
        .ikey = ikey,
        .ikey_len = (size_t)kl,
        .val = entry,
        .val_len = entry_len,
        .cond = cond,
    };
    rc = ol_commit_run(st, &op);
    if (rc == 0 && vid)
        memcpy(vid, op.vid_out, OL_STORE_VID_MAX);
out:
    free(attrs);
    free(entry);
    writer_free(w);
    return rc;
}

static int check_upload_id(const char *id)
{
    if (!id || strlen(id) != OL_UPLOAD_ID_LEN)
        return -OL_ENOUPLOAD;
    for (unsigned i = 0; i < OL_UPLOAD_ID_LEN; i++) {
        char c = id[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -OL_ENOUPLOAD;
    }
    return 0;
}

int ol_part_key(uint8_t out[40], const char *upload_id, uint32_t part_no, size_t *len)
{
    int rc = check_upload_id(upload_id);
    if (rc)
        return rc;
    memcpy(out, upload_id, OL_UPLOAD_ID_LEN);
    out[OL_UPLOAD_ID_LEN] = (uint8_t)(part_no >> 24);
    out[OL_UPLOAD_ID_LEN + 1] = (uint8_t)(part_no >> 16);
    out[OL_UPLOAD_ID_LEN + 2] = (uint8_t)(part_no >> 8);
    out[OL_UPLOAD_ID_LEN + 3] = (uint8_t)part_no;
    *len = OL_UPLOAD_ID_LEN + 4;
    return 0;
}

int ol_store_write_commit_part(struct ol_store_writer *w, const char *upload_id,
                               uint32_t part_no, const char *etag)
{
    struct ol_store *st = w->st;
    uint8_t *entry = NULL;
    size_t entry_len = 0;
    uint8_t pkey[40];
    size_t pkl = 0;
    int rc = w->err;
    if (rc)
        goto out;
    if (part_no < 1 || part_no > 10000) {
        rc = -EINVAL;
        goto out;
    }
    rc = ol_part_key(pkey, upload_id, part_no, &pkl);
    if (rc)
        goto out;
    /* Parts are never inline: a completed object refers to its parts' data
     * by extent, without copying. */
    rc = finish_data(w);
    if (rc)
        goto out;
    struct ol_entry_src s;
    fill_src(w, &s);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s.mtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    s.etag = etag;
    rc = ol_entry_build(&s, &entry, &entry_len);
    if (rc)
        goto out;
    struct ol_op op = {
        .type = OL_OP_PUT_PART,
        .upload_id = upload_id,
        .part_no = part_no,
        .ikey = pkey,
        .ikey_len = pkl,
        .val = entry,
        .val_len = entry_len,
    };
    rc = ol_commit_run(st, &op);
out:
    free(entry);
    writer_free(w);
    return rc;
}

int ol_writer_seal(struct ol_store_writer *w, const struct ol_extent **ext, uint32_t *next,
                   const uint32_t **crcs, uint32_t *ncrc)
{
    int rc = w->err;
    if (rc == 0)
        rc = finish_data(w);
    if (rc)
        return rc;
    *ext = w->ext;
    *next = w->next;
    *crcs = w->crcs;
    *ncrc = w->ncrc;
    return 0;
}

void ol_store_write_abort(struct ol_store_writer *w)
{
    writer_free(w);
}

/* ======================= writer thread ======================= */

struct batch_ctx {
    struct ol_store *st;
    uint64_t *zeroed; /* segments whose live bytes reached 0 */
    uint32_t nzeroed, cap_zeroed;
};

static int space_add(struct batch_ctx *bc, MDB_txn *txn, const struct ol_entry *e, int sign)
{
    if (e->h.flags & OL_ENTRY_INLINE)
        return 0;
    for (uint32_t i = 0; i < e->h.nextents; i++) {
        struct ol_extent x;
        ol_entry_get_ext(e, i, &x);
        bool z = false;
        int rc = ol_idx_seg_add(txn, bc->st->db_segs, x.seg, sign * (int64_t)x.len,
                                sign > 0 ? x.off + x.len : 0, &z);
        if (rc)
            return rc;
        if (z && grow((void **)&bc->zeroed, &bc->cap_zeroed, bc->nzeroed + 1, 8) == 0)
            bc->zeroed[bc->nzeroed++] = x.seg;
    }
    return 0;
}

/* Frees the space of an encoded entry.  A damaged entry's space cannot be
 * accounted for; it is logged and left for an offline repair. */
static int space_free_raw(struct batch_ctx *bc, MDB_txn *txn, const void *v, size_t len)
{
    struct ol_entry e;
    if (ol_entry_decode(v, len, &e) != 0) {
        ol_error("store %s: damaged index entry replaced; its space is leaked", bc->st->dir);
        return 0;
    }
    return space_add(bc, txn, &e, -1);
}

int ol_writer_space(struct batch_ctx *bc, MDB_txn *txn, const void *v, size_t len, int sign)
{
    if (sign < 0)
        return space_free_raw(bc, txn, v, len);
    struct ol_entry e;
    int rc = ol_entry_decode(v, len, &e);
    return rc ? rc : space_add(bc, txn, &e, 1);
}

struct ol_store *ol_batch_store(struct batch_ctx *bc)
{
    return bc->st;
}

static void *dup_val(const MDB_val *v)
{
    void *p = malloc(v->mv_size ? v->mv_size : 1);
    if (p)
        memcpy(p, v->mv_data, v->mv_size);
    return p;
}

static int bucket_exists(struct ol_store *st, MDB_txn *txn, const char *bucket)
{
    size_t bl = strlen(bucket);
    if (bl == 0 || bl > OL_BUCKET_MAX)
        return -OL_ENOBUCKET;
    MDB_val k = {bl, (void *)bucket}, v;
    int rc = mdb_get(txn, st->db_buckets, &k, &v);
    return rc == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(rc);
}

/* Checks a commit precondition against the key's current entry, inside the
 * writer's transaction: nothing can change the key between this check and
 * the commit, so two racing conditional writers cannot both pass. */
int ol_cond_check(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                  const struct ol_store_cond *cond)
{
    if (!cond || (!cond->if_none_match && !cond->if_match))
        return 0;
    MDB_val cur;
    int rc = ol_idx_get(txn, st->db_objects, ik, ikl, &cur);
    if (rc == -OL_ENOKEY) {
        /* S3 answers If-Match on a missing key with 404 NoSuchKey. */
        return cond->if_match ? -OL_ENOKEY : 0;
    }
    if (rc)
        return rc;
    if (cond->if_none_match)
        return -OL_EPRECONDITION;
    if (strcmp(cond->if_match, "*") == 0)
        return 0;
    struct ol_entry e;
    rc = ol_entry_decode(cur.mv_data, cur.mv_size, &e);
    if (rc)
        return rc;
    return strncmp(e.h.etag, cond->if_match, sizeof(e.h.etag)) == 0 ? 0 : -OL_EPRECONDITION;
}

/* Replaces (or deletes, when v is NULL) the current entry of a key,
 * following the bucket's versioning state (versions.c). */
static int obj_replace(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                       const void *v, size_t vlen, char vid_out[OL_STORE_VID_MAX])
{
    return ol_ver_replace(bc, txn, ik, ikl, v, vlen, vid_out);
}

/* Replaces (or deletes, when v is NULL) an objects-DB entry, keeping space
 * accounting and the object count in step. */
int ol_obj_replace_plain(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                         const void *v, size_t vlen)
{
    struct ol_store *st = bc->st;
    MDB_val old;
    int rc = ol_idx_get(txn, st->db_objects, ik, ikl, &old);
    if (rc == -OL_ENOKEY) {
        if (!v)
            return 0;
        rc = ol_idx_meta_add(txn, st->db_meta, "objects", 1);
    } else if (rc == 0 || rc == -OL_ECORRUPT) {
        if (rc == 0)
            rc = space_free_raw(bc, txn, old.mv_data, old.mv_size);
        else
            rc = 0; /* a damaged group or entry is replaced */
        if (rc == 0 && !v)
            rc = ol_idx_meta_add(txn, st->db_meta, "objects", -1);
    }
    if (rc)
        return rc;
    if (!v)
        return ol_idx_del(txn, st->db_objects, ik, ikl);
    rc = ol_idx_put(txn, st->db_objects, ik, ikl, v, vlen);
    if (rc)
        return rc;
    struct ol_entry e;
    rc = ol_entry_decode(v, vlen, &e);
    OL_ASSERT(rc == 0); /* we just built it */
    return space_add(bc, txn, &e, 1);
}

static int op_put_part(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    MDB_val uk = {OL_UPLOAD_ID_LEN, (void *)op->upload_id}, uv;
    int rc = mdb_get(txn, st->db_uploads, &uk, &uv);
    if (rc)
        return rc == MDB_NOTFOUND ? -OL_ENOUPLOAD : ol_mdb_err(rc);
    MDB_val pk = {op->ikey_len, (void *)op->ikey}, old;
    rc = mdb_get(txn, st->db_parts, &pk, &old);
    if (rc == 0)
        rc = space_free_raw(bc, txn, old.mv_data, old.mv_size);
    else if (rc == MDB_NOTFOUND)
        rc = 0;
    else
        return ol_mdb_err(rc);
    if (rc)
        return rc;
    MDB_val nv = {op->val_len, (void *)op->val};
    rc = ol_mdb_err(mdb_put(txn, st->db_parts, &pk, &nv, 0));
    if (rc)
        return rc;
    struct ol_entry e;
    rc = ol_entry_decode(op->val, op->val_len, &e);
    OL_ASSERT(rc == 0);
    return space_add(bc, txn, &e, 1);
}

static int op_bucket_delete(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    int rc = bucket_exists(st, txn, op->bucket);
    if (rc)
        return rc;
    size_t bl = strlen(op->bucket);
    uint8_t pfx[OL_BUCKET_MAX + 1];
    memcpy(pfx, op->bucket, bl);
    pfx[bl] = 0;
    MDB_cursor *c = NULL;
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_objects, &c));
    if (rc)
        return rc;
    MDB_val k = {bl + 1, pfx}, v;
    int mr = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    if (mr == 0 && k.mv_size >= bl + 1 && memcmp(k.mv_data, pfx, bl + 1) == 0)
        rc = -OL_EBUCKETNOTEMPTY;
    else if (mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
    mdb_cursor_close(c);
    if (rc == 0)
        rc = ol_ver_bucket_check_empty(st, txn, op->bucket);
    if (rc)
        return rc;
    /* Uploads are few; a scan keeps the uploads DB free of a second index. */
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_uploads, &c));
    if (rc)
        return rc;
    for (mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0 && rc == 0;
         mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        struct ol_upload_view u;
        if (ol_upload_decode(v.mv_data, v.mv_size, &u) == 0 && u.bucket_len == bl &&
            memcmp(u.bucket, op->bucket, bl) == 0)
            rc = -OL_EBUCKETNOTEMPTY;
    }
    if (rc == 0 && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
    mdb_cursor_close(c);
    if (rc)
        return rc;
    /* The bucket's settings go with it. */
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_bconf, &c));
    if (rc)
        return rc;
    mr = 0;
    for (uint32_t guard = 0; mr == 0 && guard < 100000; guard++) {
        /* Re-seeks after each delete rather than rely on where LMDB leaves
         * a cursor after mdb_cursor_del. */
        k = (MDB_val){bl + 1, pfx};
        mr = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        if (mr || k.mv_size < bl + 1 || memcmp(k.mv_data, pfx, bl + 1) != 0)
            break;
        mr = mdb_cursor_del(c, 0);
    }
    if (mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
    mdb_cursor_close(c);
    if (rc)
        return rc;
    MDB_val bk = {bl, (void *)op->bucket};
    return ol_mdb_err(mdb_del(txn, st->db_buckets, &bk, NULL));
}

static int op_bconf_put(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    int rc = bucket_exists(st, txn, op->bucket);
    if (rc)
        return rc;
    MDB_val k = {op->ikey_len, (void *)op->ikey};
    if (!op->val) {
        rc = mdb_del(txn, st->db_bconf, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : ol_mdb_err(rc);
    }
    MDB_val v = {op->val_len, (void *)op->val};
    return ol_mdb_err(mdb_put(txn, st->db_bconf, &k, &v, 0));
}

/* Sets or removes one attribute of an object: the entry is re-encoded with
 * the same data, ETag and Last-Modified, so space accounting is unchanged. */
static int op_attr_put(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    uint8_t *attrs = NULL, *entry = NULL;
    size_t attr_len = 0, entry_len = 0;
    int rc = bucket_exists(st, txn, op->bucket);
    if (rc)
        return rc;
    MDB_val cur;
    rc = ol_idx_get(txn, st->db_objects, op->ikey, op->ikey_len, &cur);
    if (rc)
        return rc;
    struct ol_entry e;
    rc = ol_entry_decode(cur.mv_data, cur.mv_size, &e);
    if (rc)
        return rc;
    rc = ol_attrs_set(e.attrs, e.h.attr_len, op->name, op->val, op->val_len, &attrs, &attr_len);
    if (rc)
        goto out;
    static const uint8_t none[1];
    struct ol_entry_over ov = {.attrs = attrs ? attrs : none, .attr_len = (uint32_t)attr_len};
    rc = ol_entry_rewrite(&e, &ov, &entry, &entry_len);
    if (rc == 0)
        rc = ol_idx_put(txn, st->db_objects, op->ikey, op->ikey_len, entry, entry_len);
out:
    free(attrs);
    free(entry);
    return rc;
}

/* Collects the part keys of an upload (at most 10000). */
static int upload_part_keys(struct ol_store *st, MDB_txn *txn, const char *id, uint8_t **keys,
                            uint32_t *n)
{
    MDB_cursor *c = NULL;
    uint32_t cap = 0;
    *keys = NULL;
    *n = 0;
    int rc = ol_mdb_err(mdb_cursor_open(txn, st->db_parts, &c));
    if (rc)
        return rc;
    MDB_val k = {OL_UPLOAD_ID_LEN, (void *)id}, v;
    int mr = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    for (uint32_t guard = 0; mr == 0 && guard < 20000; guard++) {
        if (k.mv_size != OL_UPLOAD_ID_LEN + 4 || memcmp(k.mv_data, id, OL_UPLOAD_ID_LEN) != 0)
            break;
        rc = grow((void **)keys, &cap, *n + 1, OL_UPLOAD_ID_LEN + 4);
        if (rc)
            break;
        memcpy(*keys + (size_t)*n * (OL_UPLOAD_ID_LEN + 4), k.mv_data, OL_UPLOAD_ID_LEN + 4);
        (*n)++;
        mr = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    if (rc == 0 && mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
    mdb_cursor_close(c);
    return rc;
}

static uint32_t part_no_of(const uint8_t *k)
{
    const uint8_t *p = k + OL_UPLOAD_ID_LEN;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Deletes all parts of an upload except those listed (ascending), freeing
 * the space of the deleted ones; then the upload itself. */
static int upload_drop(struct batch_ctx *bc, MDB_txn *txn, const char *id,
                       const struct ol_complete_part *keep, uint32_t nkeep)
{
    struct ol_store *st = bc->st;
    uint8_t *keys = NULL;
    uint32_t n = 0;
    int rc = upload_part_keys(st, txn, id, &keys, &n);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint8_t *k = keys + (size_t)i * (OL_UPLOAD_ID_LEN + 4);
        uint32_t pn = part_no_of(k);
        bool kept = false;
        uint32_t lo = 0, hi = nkeep;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (keep[mid].part_no < pn)
                lo = mid + 1;
            else
                hi = mid;
        }
        kept = lo < nkeep && keep[lo].part_no == pn;
        MDB_val mk = {OL_UPLOAD_ID_LEN + 4, k}, v;
        if (!kept) {
            rc = mdb_get(txn, st->db_parts, &mk, &v);
            if (rc) {
                rc = ol_mdb_err(rc);
                break;
            }
            rc = space_free_raw(bc, txn, v.mv_data, v.mv_size);
        }
        if (rc == 0)
            rc = ol_mdb_err(mdb_del(txn, st->db_parts, &mk, NULL));
    }
    free(keys);
    if (rc)
        return rc;
    MDB_val uk = {OL_UPLOAD_ID_LEN, (void *)id};
    return ol_mdb_err(mdb_del(txn, st->db_uploads, &uk, NULL));
}

static int op_complete(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    uint8_t *up = NULL, *entry = NULL, *attrs = NULL;
    uint8_t **pv = NULL;
    size_t *pl = NULL;
    struct ol_extent *ext = NULL;
    uint32_t *crcs = NULL;
    size_t entry_len = 0, attr_len = 0;
    MDB_val uk = {OL_UPLOAD_ID_LEN, (void *)op->upload_id}, uv;
    int rc = mdb_get(txn, st->db_uploads, &uk, &uv);
    if (rc)
        return rc == MDB_NOTFOUND ? -OL_ENOUPLOAD : ol_mdb_err(rc);
    up = dup_val(&uv);
    pv = calloc(op->nparts, sizeof(*pv));
    pl = calloc(op->nparts, sizeof(*pl));
    if (!up || !pv || !pl) {
        rc = -ENOMEM;
        goto out;
    }
    struct ol_upload_view u;
    rc = ol_upload_decode(up, uv.mv_size, &u);
    if (rc)
        goto out;
    char bucket[OL_BUCKET_MAX + 1];
    memcpy(bucket, u.bucket, u.bucket_len);
    bucket[u.bucket_len] = 0;
    rc = bucket_exists(st, txn, bucket);
    if (rc)
        goto out;
    uint64_t total = 0, next = 0, ncrc = 0;
    bool too_small = false;
    for (uint32_t i = 0; i < op->nparts; i++) {
        if (i > 0 && op->parts[i].part_no <= op->parts[i - 1].part_no) {
            rc = -OL_EPARTORDER;
            goto out;
        }
        uint8_t pk[40];
        size_t pkl;
        rc = ol_part_key(pk, op->upload_id, op->parts[i].part_no, &pkl);
        if (rc)
            goto out;
        MDB_val k = {pkl, pk}, v;
        int mr = mdb_get(txn, st->db_parts, &k, &v);
        if (mr) {
            rc = mr == MDB_NOTFOUND ? -OL_EINVALIDPART : ol_mdb_err(mr);
            goto out;
        }
        pv[i] = dup_val(&v);
        pl[i] = v.mv_size;
        if (!pv[i]) {
            rc = -ENOMEM;
            goto out;
        }
        struct ol_entry e;
        rc = ol_entry_decode(pv[i], pl[i], &e);
        if (rc)
            goto out;
        if (strncmp(e.h.etag, op->parts[i].etag, sizeof(e.h.etag)) != 0) {
            rc = -OL_EINVALIDPART;
            goto out;
        }
        /* S3 reports a missing or mismatched part before a small one, so
         * the size verdict waits until every part has been found. */
        if (i + 1 < op->nparts && e.h.size < op->min_part_bytes)
            too_small = true;
        if (e.h.block_bytes != st->o.block_bytes || (e.h.flags & OL_ENTRY_INLINE)) {
            rc = -OL_ECORRUPT;
            goto out;
        }
        total += e.h.size;
        next += e.h.nextents;
        ncrc += e.h.ncrc;
    }
    if (too_small) {
        rc = -OL_ETOOSMALL;
        goto out;
    }
    if (next > UINT32_MAX / 2 || ncrc > UINT32_MAX / 2) {
        rc = -OL_ETOOLARGE;
        goto out;
    }
    ext = malloc((next ? next : 1) * sizeof(*ext));
    crcs = malloc((ncrc ? ncrc : 1) * sizeof(*crcs));
    if (!ext || !crcs) {
        rc = -ENOMEM;
        goto out;
    }
    /* The object is the parts' extents back to back; each extent keeps its
     * own CRC run, so no data moves. */
    uint32_t xi = 0, ci = 0;
    for (uint32_t i = 0; i < op->nparts; i++) {
        struct ol_entry e;
        rc = ol_entry_decode(pv[i], pl[i], &e);
        OL_ASSERT(rc == 0);
        for (uint32_t j = 0; j < e.h.nextents; j++)
            ol_entry_get_ext(&e, j, &ext[xi++]);
        for (uint32_t j = 0; j < e.h.ncrc; j++)
            crcs[ci++] = ol_entry_get_crc(&e, j);
    }
    /* The caller checked the attributes (ol_store_upload_complete_if). */
    rc = ol_attrs_apply(NULL, 0, op->info->attrs, op->info->nattrs, &attrs, &attr_len);
    if (rc)
        goto out;
    struct ol_entry_src s;
    memset(&s, 0, sizeof(s));
    s.size = total;
    s.mtime_ns = op->info->mtime_ns;
    s.etag = op->info->etag;
    s.nparts = op->nparts;
    s.meta = op->info->meta;
    s.meta_len = op->info->meta ? op->info->meta_len : 0;
    s.attrs = attrs;
    s.attr_len = (uint32_t)attr_len;
    s.block_bytes = st->o.block_bytes;
    s.ext = ext;
    s.nextents = xi;
    s.crcs = crcs;
    s.ncrc = ci;
    rc = ol_entry_build(&s, &entry, &entry_len);
    if (rc)
        goto out;
    uint8_t ik[OL_IDX_KEY_MAX];
    int ikl = ol_idx_key(ik, bucket, (const char *)u.key, u.key_len);
    if (ikl < 0) {
        rc = ikl;
        goto out;
    }
    rc = ol_cond_check(st, txn, ik, (size_t)ikl, op->cond);
    if (rc)
        goto out;
    /* The listed parts' space moves to the object: free the old object, then
     * count the new entry and uncount the parts, which nets to zero for them. */
    rc = obj_replace(bc, txn, ik, (size_t)ikl, entry, entry_len, op->vid_out);
    for (uint32_t i = 0; rc == 0 && i < op->nparts; i++)
        rc = space_free_raw(bc, txn, pv[i], pl[i]);
    if (rc == 0)
        rc = upload_drop(bc, txn, op->upload_id, op->parts, op->nparts);
    if (rc == 0)
        op->info->size = total;
out:
    for (uint32_t i = 0; pv && i < op->nparts; i++)
        free(pv[i]);
    free(pv);
    free(pl);
    free(up);
    free(ext);
    free(crcs);
    free(attrs);
    free(entry);
    return rc;
}

static int op_relocate(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    MDB_val v;
    int rc;
    MDB_dbi idx_db = op->reloc_db == OL_RELOC_VERSIONS ? st->db_versions : st->db_objects;
    if (op->reloc_db != OL_RELOC_PARTS) {
        rc = ol_idx_get(txn, idx_db, op->ikey, op->ikey_len, &v);
    } else {
        MDB_val k = {op->ikey_len, (void *)op->ikey};
        rc = ol_mdb_err(mdb_get(txn, st->db_parts, &k, &v));
    }
    if (rc == -OL_ENOKEY) {
        op->reloc_stale = true;
        return 0;
    }
    if (rc)
        return rc;
    uint8_t *buf = dup_val(&v);
    if (!buf)
        return -ENOMEM;
    size_t len = v.mv_size;
    struct ol_entry e;
    rc = ol_entry_decode(buf, len, &e);
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; rc == 0 && !(e.h.flags & OL_ENTRY_INLINE) && i < e.h.nextents; i++) {
        struct ol_extent x;
        ol_entry_get_ext(&e, i, &x);
        if (x.seg == op->old.seg && x.off == op->old.off && x.len == op->old.len)
            found = i;
    }
    if (rc || found == UINT32_MAX) {
        /* The entry changed since the copy was made: the copy is garbage. */
        op->reloc_stale = true;
        rc = 0;
        goto out;
    }
    ol_entry_patch_ext(buf, len, found, op->new_seg, op->new_off);
    if (op->reloc_db != OL_RELOC_PARTS) {
        rc = ol_idx_put(txn, idx_db, op->ikey, op->ikey_len, buf, len);
    } else {
        MDB_val k = {op->ikey_len, (void *)op->ikey}, nv = {len, buf};
        rc = ol_mdb_err(mdb_put(txn, st->db_parts, &k, &nv, 0));
    }
    bool z = false;
    if (rc == 0)
        rc = ol_idx_seg_add(txn, st->db_segs, op->old.seg, -(int64_t)op->old.len, 0, &z);
    if (rc == 0)
        rc = ol_idx_seg_add(txn, st->db_segs, op->new_seg, (int64_t)op->old.len,
                            op->new_off + op->old.len, NULL);
    if (rc == 0 && z && grow((void **)&bc->zeroed, &bc->cap_zeroed, bc->nzeroed + 1, 8) == 0)
        bc->zeroed[bc->nzeroed++] = op->old.seg;
out:
    free(buf);
    return rc;
}

/* CopyObject: the destination entry is the source's with new metadata; its
 * extents are shared, so each reference adds its bytes to the segments'
 * live counts (docs/FORMAT.md, "Shared extents"). */
static int op_copy_object(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    const struct ol_store_copy_opts *o = op->copy;
    uint8_t *src = NULL, *entry = NULL, *attrs = NULL;
    size_t entry_len = 0, attr_len = 0;
    int rc = bucket_exists(st, txn, op->src_bucket);
    if (rc == 0)
        rc = bucket_exists(st, txn, op->bucket);
    if (rc)
        return rc;
    MDB_val sv;
    if (op->vid)
        rc = ol_ver_lookup(st, txn, op->src_ikey, op->src_ikey_len, op->vid, &sv);
    else
        rc = ol_idx_get(txn, st->db_objects, op->src_ikey, op->src_ikey_len, &sv);
    if (rc)
        return rc;
    /* The source's bytes live in LMDB's map, which the destination's update
     * may move: work on a copy. */
    src = dup_val(&sv);
    if (!src)
        return -ENOMEM;
    struct ol_entry e;
    rc = ol_entry_decode(src, sv.mv_size, &e);
    if (rc)
        goto out;
    if (o->src_etag && strncmp(e.h.etag, o->src_etag, sizeof(e.h.etag)) != 0) {
        rc = -OL_EPRECONDITION;
        goto out;
    }
    /* The caller's view of the source (a flag patched in place since it
     * read the source would otherwise be copied back to its old value). */
    if (o->expect_len && (e.h.meta_len < o->expect_off ||
                          e.h.meta_len - o->expect_off < o->expect_len ||
                          memcmp(e.meta + o->expect_off, o->expect, o->expect_len) != 0)) {
        rc = -EAGAIN;
        goto out;
    }
    rc = ol_cond_check(st, txn, op->ikey, op->ikey_len, o->dst_cond);
    if (rc)
        goto out;
    static const uint8_t none[1];
    struct ol_entry_over ov = {.mtime_ns = o->mtime_ns};
    if (o->replace_meta) {
        ov.meta = o->meta ? o->meta : none;
        ov.meta_len = o->meta ? o->meta_len : 0;
    }
    /* The caller's attribute changes (checked by ol_store_copy_object_v)
     * land in the copy's own entry, in this transaction. */
    if (o->nattrs) {
        rc = ol_attrs_apply(e.attrs, e.h.attr_len, o->attrs, o->nattrs, &attrs, &attr_len);
        if (rc)
            goto out;
        ov.attrs = attrs ? attrs : none;
        ov.attr_len = (uint32_t)attr_len;
    }
    rc = ol_entry_rewrite(&e, &ov, &entry, &entry_len);
    if (rc)
        goto out;
    bool same = op->ikey_len == op->src_ikey_len &&
                memcmp(op->ikey, op->src_ikey, op->ikey_len) == 0;
    /* A copy onto itself only rewrites the metadata, unless it restores an
     * older version or the bucket keeps versions (both make a new version). */
    if (same && !op->vid && ol_ver_state(st, txn, op->bucket) == OL_VERSIONING_OFF)
        rc = ol_idx_put(txn, st->db_objects, op->ikey, op->ikey_len, entry, entry_len);
    else
        rc = obj_replace(bc, txn, op->ikey, op->ikey_len, entry, entry_len, op->vid_out);
    if (rc == 0) {
        struct ol_obj_info *info = op->info;
        memset(info, 0, sizeof(*info));
        info->size = e.h.size;
        info->mtime_ns = o->mtime_ns ? o->mtime_ns : e.h.mtime_ns;
        memcpy(info->etag, e.h.etag, sizeof(info->etag));
        info->nparts = e.h.nparts;
    }
out:
    free(src);
    free(attrs);
    free(entry);
    return rc;
}

/* Whether entry e references range x on the same block grid. */
static bool entry_covers(const struct ol_entry *e, const struct ol_extent *x)
{
    for (uint32_t i = 0; i < e->h.nextents; i++) {
        struct ol_extent y;
        ol_entry_get_ext(e, i, &y);
        if (y.seg == x->seg && y.off <= x->off && x->off + x->len <= y.off + y.len &&
            (x->off - y.off) % e->h.block_bytes == 0)
            return true;
    }
    return false;
}

static int op_copy_part(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    const struct ol_copy_part_req *cp = op->cpart;
    int rc = bucket_exists(st, txn, op->src_bucket);
    if (rc)
        return rc;
    MDB_val sv;
    rc = ol_idx_get(txn, st->db_objects, op->src_ikey, op->src_ikey_len, &sv);
    if (rc)
        return rc == -OL_ENOKEY ? -EAGAIN : rc;
    struct ol_entry e;
    rc = ol_entry_decode(sv.mv_data, sv.mv_size, &e);
    if (rc)
        return rc;
    if (strncmp(e.h.etag, cp->etag, sizeof(e.h.etag)) != 0)
        return -EAGAIN;
    for (uint32_t i = 0; i < cp->nshared; i++)
        if ((e.h.flags & OL_ENTRY_INLINE) || e.h.block_bytes != st->o.block_bytes ||
            !entry_covers(&e, &cp->shared[i]))
            return -EAGAIN;
    return op_put_part(bc, txn, op);
}

static int apply(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = bc->st;
    int rc;
    switch (op->type) {
    case OL_OP_BUCKET_CREATE: {
        size_t bl = strlen(op->bucket);
        struct ol_bucket_rec r;
        ol_bucket_rec_build(&r, op->ctime_ns);
        MDB_val k = {bl, (void *)op->bucket}, v = {sizeof(r), &r};
        rc = mdb_put(txn, st->db_buckets, &k, &v, MDB_NOOVERWRITE);
        return rc == MDB_KEYEXIST ? -OL_EBUCKETEXISTS : ol_mdb_err(rc);
    }
    case OL_OP_BUCKET_DELETE:
        return op_bucket_delete(bc, txn, op);
    case OL_OP_PUT_OBJECT:
        rc = bucket_exists(st, txn, op->bucket);
        if (rc == 0)
            rc = ol_cond_check(st, txn, op->ikey, op->ikey_len, op->cond);
        return rc ? rc
                  : obj_replace(bc, txn, op->ikey, op->ikey_len, op->val, op->val_len,
                                op->vid_out);
    case OL_OP_PUT_PART:
        return op_put_part(bc, txn, op);
    case OL_OP_DELETE:
        rc = bucket_exists(st, txn, op->bucket);
        return rc ? rc : obj_replace(bc, txn, op->ikey, op->ikey_len, NULL, 0, op->vid_out);
    case OL_OP_UPLOAD_CREATE: {
        rc = bucket_exists(st, txn, op->bucket);
        if (rc)
            return rc;
        MDB_val k = {OL_UPLOAD_ID_LEN, (void *)op->upload_id}, v = {op->val_len, (void *)op->val};
        rc = mdb_put(txn, st->db_uploads, &k, &v, MDB_NOOVERWRITE);
        return rc == MDB_KEYEXIST ? -EEXIST : ol_mdb_err(rc);
    }
    case OL_OP_UPLOAD_COMPLETE:
        return op_complete(bc, txn, op);
    case OL_OP_UPLOAD_ABORT: {
        MDB_val k = {OL_UPLOAD_ID_LEN, (void *)op->upload_id}, v;
        rc = mdb_get(txn, st->db_uploads, &k, &v);
        if (rc)
            return rc == MDB_NOTFOUND ? -OL_ENOUPLOAD : ol_mdb_err(rc);
        return upload_drop(bc, txn, op->upload_id, NULL, 0);
    }
    case OL_OP_RELOCATE:
        return op_relocate(bc, txn, op);
    case OL_OP_BCONF_PUT:
        return op_bconf_put(bc, txn, op);
    case OL_OP_ATTR_PUT:
        return op_attr_put(bc, txn, op);
    case OL_OP_COPY_OBJECT:
        return op_copy_object(bc, txn, op);
    case OL_OP_COPY_PART:
        return op_copy_part(bc, txn, op);
    case OL_OP_DELETE_VERSION:
        return ol_ver_delete_version(bc, txn, op);
    case OL_OP_ATTR_PUT_VERSION:
        return ol_ver_attr_put(bc, txn, op);
    case OL_OP_META_PATCH_VERSION:
        return ol_ver_meta_patch(bc, txn, op);
    }
    return -EINVAL;
}

static void run_batch(struct ol_store *st, struct ol_op **ops, unsigned n)
{
    struct batch_ctx bc = {.st = st};
    MDB_txn *txn = NULL;
    int rc = ol_mdb_err(mdb_txn_begin(st->env, NULL, 0, &txn));
    for (unsigned i = 0; i < n; i++) {
        if (rc) {
            ops[i]->result = rc;
            continue;
        }
        /* A chained op waits on the result of one ahead of it: in this
         * batch (applied already) or in an earlier, committed one. */
        if (ops[i]->after && ops[i]->after->result != 0) {
            ops[i]->result = -ECANCELED;
            continue;
        }
        /* A nested transaction per operation: one operation's failure undoes
         * only its own changes, and the batch still commits the others. */
        MDB_txn *child = NULL;
        int r = ol_mdb_err(mdb_txn_begin(st->env, txn, 0, &child));
        if (r == 0) {
            r = apply(&bc, child, ops[i]);
            if (r == 0)
                r = ol_mdb_err(mdb_txn_commit(child));
            else
                mdb_txn_abort(child);
        }
        ops[i]->result = r;
    }
    if (rc == 0) {
        rc = ol_mdb_err(mdb_txn_commit(txn));
        if (rc) {
            ol_error("store %s: index commit failed: %s", st->dir, ol_strerror(rc));
            for (unsigned i = 0; i < n; i++)
                if (ops[i]->result == 0)
                    ops[i]->result = rc;
        }
    }
    atomic_fetch_add(&st->commits, 1);
    atomic_fetch_add(&st->commit_ops, n);
    /* A chain's waiter returns after its last op's signal, so the op that
     * later ops' `after` points to stays valid while they wait. */
    for (unsigned i = 0; i < n; i++)
        ol_completion_signal(&ops[i]->done, ops[i]->result); /* ops[i] may vanish now */
    /* Segments left with no live bytes are unlinked by the compactor thread,
     * after this commit is durable, so no committed entry can point into a
     * removed file.  Not here: on a file system mounted with `discard`, an
     * unlink discards the file's blocks synchronously (milliseconds for a
     * 256 MiB segment), and every commit queued behind it would wait. */
    if (rc == 0 && bc.nzeroed > 0)
        ol_compact_kick_reap(st);
    free(bc.zeroed);
}

static void *writer_main(void *arg)
{
    struct ol_store *st = arg;
    unsigned max = st->o.commit_batch;
    struct ol_op **ops = calloc(max, sizeof(*ops));
    OL_ASSERT(ops);
    for (;;) {
        pthread_mutex_lock(&st->q_mu);
        while (!st->q_head && !st->q_stop)
            pthread_cond_wait(&st->q_cv, &st->q_mu);
        if (!st->q_head) {
            pthread_mutex_unlock(&st->q_mu);
            break;
        }
        unsigned n = 0;
        while (st->q_head && n < max) {
            ops[n++] = st->q_head;
            st->q_head = st->q_head->next;
        }
        if (!st->q_head)
            st->q_tail = NULL;
        pthread_mutex_unlock(&st->q_mu);
        run_batch(st, ops, n);
    }
    free(ops);
    return NULL;
}

int ol_commit_start(struct ol_store *st)
{
    pthread_mutex_init(&st->q_mu, NULL);
    pthread_cond_init(&st->q_cv, NULL);
    int rc = pthread_create(&st->wthr, NULL, writer_main, st);
    if (rc)
        return -rc;
    st->wthr_started = true;
    return 0;
}

void ol_commit_stop(struct ol_store *st)
{
    if (!st->wthr_started)
        return;
    pthread_mutex_lock(&st->q_mu);
    st->q_stop = true;
    pthread_cond_signal(&st->q_cv);
    pthread_mutex_unlock(&st->q_mu);
    pthread_join(st->wthr, NULL);
    st->wthr_started = false;
    pthread_cond_destroy(&st->q_cv);
    pthread_mutex_destroy(&st->q_mu);
}

static void enqueue(struct ol_store *st, struct ol_op **ops, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        ol_completion_init(&ops[i]->done);
        ops[i]->next = i + 1 < n ? ops[i + 1] : NULL;
        ops[i]->result = 0;
    }
    pthread_mutex_lock(&st->q_mu);
    if (st->q_stop) {
        pthread_mutex_unlock(&st->q_mu);
        /* Completed before anyone waits: no wake-up is needed (and a fiber
         * must not wake itself). */
        for (unsigned i = 0; i < n; i++) {
            ops[i]->result = ops[i]->done.result = -OL_ESHUTDOWN;
            __atomic_store_n(&ops[i]->done.done, 1, __ATOMIC_RELEASE);
        }
        return;
    }
    if (st->q_tail)
        st->q_tail->next = ops[0];
    else
        st->q_head = ops[0];
    st->q_tail = ops[n - 1];
    pthread_cond_signal(&st->q_cv);
    pthread_mutex_unlock(&st->q_mu);
}

void ol_commit_enqueue(struct ol_store *st, struct ol_op *op)
{
    enqueue(st, &op, 1);
}

int ol_commit_run(struct ol_store *st, struct ol_op *op)
{
    ol_commit_enqueue(st, op);
    return ol_completion_wait(&op->done);
}

int ol_commit_run_chain(struct ol_store *st, struct ol_op **ops, unsigned n)
{
    if (n == 0)
        return 0;
    enqueue(st, ops, n);
    for (unsigned i = 0; i < n; i++)
        ol_completion_wait(&ops[i]->done);
    return ops[0]->result;
}
