/* The per-drive storage engine: open/close, buckets, reads, listing,
 * multipart bookkeeping and statistics.  Index changes go through the writer
 * thread (writer.c); segment handling is in segment.c. */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

void ol_store_opts_default(struct ol_store_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->segment_bytes = 256ull << 20;
    o->block_bytes = 64u << 10;
    o->inline_bytes = 128u << 10;
    o->map_bytes = 64ull << 30;
    o->max_loops = 64;
    o->compact_pct = 50;
    o->commit_batch = 256;
}

static int check_opts(const struct ol_store_opts *o)
{
    if (o->block_bytes == 0 || o->block_bytes % OL_ALIGN || o->block_bytes > (64u << 20))
        return -EINVAL;
    if (o->segment_bytes < 2 * OL_SEG_HDR_BYTES || o->inline_bytes > (16u << 20))
        return -EINVAL;
    if (o->max_loops > OL_MAX_LOOPS || o->commit_batch == 0 || o->commit_batch > 65536 ||
        o->compact_pct > 100 || o->map_bytes < (1u << 20))
        return -EINVAL;
    return 0;
}

static int open_index(struct ol_store *st)
{
    if (mkdirat(st->dir_fd, "index", 0755) < 0 && errno != EEXIST)
        return -errno;
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/index", st->dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int rc = mdb_env_create(&st->env);
    if (rc)
        return ol_mdb_err(rc);
    /* MDB_NOTLS: read transactions belong to requests (fibers), not threads.
     * Default sync: a commit returns only once it is on disk. */
    if ((rc = mdb_env_set_maxreaders(st->env, 4096)) ||
        (rc = mdb_env_set_mapsize(st->env, (size_t)st->o.map_bytes)) ||
        (rc = mdb_env_set_maxdbs(st->env, 8)) ||
        (rc = mdb_env_open(st->env, path, MDB_NOTLS, 0644)))
        return ol_mdb_err(rc);
    int dead = 0;
    mdb_reader_check(st->env, &dead);
    OL_ASSERT(mdb_env_get_maxkeysize(st->env) > (int)OL_IDX_PREFIX);
    MDB_txn *txn = NULL;
    rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc)
        return ol_mdb_err(rc);
    struct {
        const char *name;
        MDB_dbi *dbi;
    } dbs[] = {{"buckets", &st->db_buckets}, {"objects", &st->db_objects},
               {"uploads", &st->db_uploads}, {"parts", &st->db_parts},
               {"segs", &st->db_segs},       {"meta", &st->db_meta},
               {"bconf", &st->db_bconf},     {"versions", &st->db_versions}};
    for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]) && rc == 0; i++)
        rc = mdb_dbi_open(txn, dbs[i].name, MDB_CREATE, dbs[i].dbi);
    if (rc) {
        mdb_txn_abort(txn);
        return ol_mdb_err(rc);
    }
    return ol_mdb_err(mdb_txn_commit(txn));
}

/* Logs space records that name a segment file that is gone: data that the
 * index references has been lost (for example, a file removed by hand). */
static void check_missing_segments(struct ol_store *st)
{
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
        return;
    if (mdb_cursor_open(txn, st->db_segs, &c) == 0) {
        MDB_val k, v;
        for (int mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0;
             mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            if (k.mv_size != 8)
                continue;
            uint64_t id = 0;
            for (int i = 0; i < 8; i++)
                id = id << 8 | ((const uint8_t *)k.mv_data)[i];
            struct ol_seg *seg = ol_seg_get(st, id);
            if (!seg)
                ol_error("store %s: segment %016" PRIx64 " is referenced but missing", st->dir,
                         id);
            else
                ol_seg_unref(st, seg);
        }
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
}

int ol_store_open(struct ol_store **out, const char *dir, const struct ol_store_opts *opts)
{
    struct ol_store_opts def;
    if (!opts) {
        ol_store_opts_default(&def);
        opts = &def;
    }
    int rc = check_opts(opts);
    if (rc)
        return rc;
    struct ol_store *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    st->o = *opts;
    st->dir_fd = -1;
    st->seg_dir_fd = -1;
    pthread_mutex_init(&st->reg_mu, NULL);
    pthread_mutex_init(&st->c_mu, NULL);
    pthread_cond_init(&st->c_cv, NULL);
    st->dir = strdup(dir);
    if (!st->dir) {
        rc = -ENOMEM;
        goto out;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        goto out;
    }
    st->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->dir_fd < 0) {
        rc = -errno;
        goto out;
    }
    /* One store per drive at a time: a second one (another server started
     * on the same directory) would append to the same segment files.  The
     * lock belongs to this descriptor, so a process that dies leaves none
     * behind. */
    if (flock(st->dir_fd, LOCK_EX | LOCK_NB) != 0) {
        rc = -errno;
        if (rc == -EWOULDBLOCK) {
            ol_error("store %s: the drive is in use (another OpenLake process has it open)",
                     dir);
            rc = -EBUSY;
        }
        goto out;
    }
    rc = ol_format_read(st->dir_fd, &st->fmt);
    if (rc == -ENOENT) {
        /* Only a directory without engine files is formatted: a drive whose
         * FORMAT file was lost must not be silently re-initialised. */
        struct stat sb;
        if (fstatat(st->dir_fd, "index", &sb, 0) == 0 || fstatat(st->dir_fd, "seg", &sb, 0) == 0) {
            rc = -OL_EFORMAT;
            goto out;
        }
        rc = ol_format_create(st->dir_fd, &st->fmt);
    }
    if (rc)
        goto out;
    rc = open_index(st);
    if (rc)
        goto out;
    if (st->fmt.version < OL_FORMAT_VERSION) {
        /* open_index created the databases that the newer layout adds; only
         * then does FORMAT claim the new version. */
        ol_info("store %s: upgrading drive format %u -> %u", dir, (unsigned)st->fmt.version,
                (unsigned)OL_FORMAT_VERSION);
        st->fmt.version = OL_FORMAT_VERSION;
        rc = ol_format_write(st->dir_fd, &st->fmt);
        if (rc)
            goto out;
    }
    rc = ol_seg_open_all(st);
    if (rc)
        goto out;
    /* Files without live bytes are leftovers of writes that never committed
     * (a crash, an abort) or of an interrupted unlink. */
    ol_seg_reap_all(st);
    check_missing_segments(st);
    rc = ol_commit_start(st);
    if (rc)
        goto out;
    rc = ol_compact_start(st);
out:
    if (rc) {
        ol_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void ol_store_close(struct ol_store *st)
{
    if (!st)
        return;
    ol_compact_stop(st);
    ol_commit_stop(st);
    ol_seg_close_all(st);
    for (unsigned i = 0; i < OL_STORE_RD_IDLE; i++) {
        MDB_txn *t = atomic_exchange(&st->rd_idle[i], NULL);
        if (t)
            mdb_txn_abort(t);
    }
    if (st->env)
        mdb_env_close(st->env);
    if (st->dir_fd >= 0)
        close(st->dir_fd);
    pthread_cond_destroy(&st->c_cv);
    pthread_mutex_destroy(&st->c_mu);
    pthread_mutex_destroy(&st->reg_mu);
    free(st->dir);
    free(st);
}

/* Where a thread starts looking in rd_idle: threads spread over it, so
 * that cores rarely touch the same slots. */
static unsigned rd_hint(void)
{
    static _Atomic unsigned next;
    static _Thread_local unsigned hint, set;
    if (!set) {
        hint = atomic_fetch_add(&next, 1) * 4;
        set = 1;
    }
    return hint;
}

int ol_rd_begin(struct ol_store *st, MDB_txn **txn)
{
    unsigned h = rd_hint();
    for (unsigned i = 0; i < OL_STORE_RD_IDLE; i++) {
        _Atomic(MDB_txn *) *slot = &st->rd_idle[(h + i) % OL_STORE_RD_IDLE];
        MDB_txn *t = atomic_load_explicit(slot, memory_order_relaxed) ? atomic_exchange(slot, NULL)
                                                                        : NULL;
        if (!t)
            continue;
        /* MDB_NOTLS: a reset transaction kept its reader slot, and any
         * thread may renew it. */
        if (mdb_txn_renew(t) == 0) {
            *txn = t;
            return 0;
        }
        mdb_txn_abort(t);
        break;
    }
    return ol_mdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn));
}

void ol_rd_end(struct ol_store *st, MDB_txn *txn)
{
    if (!txn)
        return;
    mdb_txn_reset(txn);
    unsigned h = rd_hint();
    for (unsigned i = 0; i < OL_STORE_RD_IDLE; i++) {
        _Atomic(MDB_txn *) *slot = &st->rd_idle[(h + i) % OL_STORE_RD_IDLE];
        MDB_txn *empty = NULL;
        if (!atomic_load_explicit(slot, memory_order_relaxed) &&
            atomic_compare_exchange_strong(slot, &empty, txn))
            return;
    }
    mdb_txn_abort(txn);
}

/* ---- buckets ---- */

static int check_bucket(const char *name)
{
    size_t bl = name ? strlen(name) : 0;
    return bl < 3 || bl > OL_BUCKET_MAX ? -EINVAL : 0;
}

int ol_store_bucket_create(struct ol_store *st, const char *name, int64_t ctime_ns)
{
    int rc = check_bucket(name);
    if (rc)
        return rc;
    struct ol_op op = {
        .type = OL_OP_BUCKET_CREATE,
        .bucket = name,
        .ctime_ns = ctime_ns,
    };
    return ol_commit_run(st, &op);
}

int ol_store_bucket_delete(struct ol_store *st, const char *name)
{
    if (check_bucket(name))
        return -OL_ENOBUCKET;
    struct ol_op op = {
        .type = OL_OP_BUCKET_DELETE,
        .bucket = name,
    };
    return ol_commit_run(st, &op);
}

int ol_store_bucket_get(struct ol_store *st, const char *name, struct ol_bucket_info *out)
{
    if (check_bucket(name))
        return -OL_ENOBUCKET;
    MDB_txn *txn = NULL;
    int rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val k = {strlen(name), (void *)name}, v;
    int mr = mdb_get(txn, st->db_buckets, &k, &v);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(mr);
        goto out;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->name, name, k.mv_size);
    rc = ol_bucket_rec_decode(v.mv_data, v.mv_size, &out->ctime_ns);
out:
    ol_rd_end(st, txn);
    return rc;
}

int ol_store_bucket_list(struct ol_store *st,
                         int (*fn)(void *ctx, const struct ol_bucket_info *b), void *ctx)
{
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    int rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_buckets, &c));
    if (rc)
        goto out;
    MDB_val k, v;
    int mr;
    for (mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0;
         mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        struct ol_bucket_info b;
        memset(&b, 0, sizeof(b));
        if (k.mv_size > OL_BUCKET_MAX) {
            rc = -OL_ECORRUPT;
            break;
        }
        memcpy(b.name, k.mv_data, k.mv_size);
        rc = ol_bucket_rec_decode(v.mv_data, v.mv_size, &b.ctime_ns);
        if (rc || fn(ctx, &b))
            break;
    }
    if (rc == 0 && mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
out:
    if (c)
        mdb_cursor_close(c);
    ol_rd_end(st, txn);
    return rc;
}

/* ---- reading ---- */


static void reader_release(struct ol_store_reader *r)
{
    for (uint32_t i = 0; r->segs && i < r->next; i++)
        if (r->segs[i])
            ol_seg_unref(r->st, r->segs[i]);
    free(r->segs);
    free(r->ext);
    free(r->ext_start);
    free(r->crc_start);
    free(r->crcs);
    free(r->data);
    free(r->meta);
    free(r->attrs);
    ol_buf_free(r->buf, r->buf_cap);
    struct ol_store *st = r->st;
    memset(r, 0, sizeof(*r));
    r->st = st;
}

/* Copies a decoded entry into the reader so the snapshot can end at once. */
static int reader_fill(struct ol_store_reader *r, const struct ol_entry *e)
{
    const struct ol_entry_hdr *h = &e->h;
    r->info.size = h->size;
    r->info.mtime_ns = h->mtime_ns;
    memcpy(r->info.etag, h->etag, sizeof(r->info.etag));
    r->info.nparts = h->nparts;
    r->info.meta_len = h->meta_len;
    r->meta = malloc(h->meta_len ? h->meta_len : 1);
    if (!r->meta)
        return -ENOMEM;
    memcpy(r->meta, e->meta, h->meta_len);
    r->info.meta = r->meta;
    r->attr_len = h->attr_len;
    if (h->attr_len) {
        r->attrs = malloc(h->attr_len);
        if (!r->attrs)
            return -ENOMEM;
        memcpy(r->attrs, e->attrs, h->attr_len);
    }
    r->block_bytes = h->block_bytes;
    if (h->flags & OL_ENTRY_INLINE) {
        r->is_inline = true;
        r->inline_crc = h->inline_crc;
        r->data = malloc(h->size ? (size_t)h->size : 1);
        if (!r->data)
            return -ENOMEM;
        memcpy(r->data, e->data, (size_t)h->size);
        return 0;
    }
    uint32_t n = h->nextents;
    r->ext = calloc(n ? n : 1, sizeof(*r->ext));
    r->ext_start = calloc(n ? n : 1, sizeof(*r->ext_start));
    r->crc_start = calloc(n ? n : 1, sizeof(*r->crc_start));
    r->segs = calloc(n ? n : 1, sizeof(*r->segs));
    r->crcs = malloc(h->ncrc ? (size_t)h->ncrc * 4 : 4);
    if (!r->ext || !r->ext_start || !r->crc_start || !r->segs || !r->crcs)
        return -ENOMEM;
    memcpy(r->crcs, e->crcs, (size_t)h->ncrc * 4);
    uint64_t pos = 0, maxlen = 0;
    uint32_t ci = 0;
    for (uint32_t i = 0; i < n; i++) {
        ol_entry_get_ext(e, i, &r->ext[i]);
        r->ext_start[i] = pos;
        r->crc_start[i] = ci;
        pos += r->ext[i].len;
        ci += ol_blocks(r->ext[i].len, h->block_bytes);
        if (r->ext[i].len > maxlen)
            maxlen = r->ext[i].len;
    }
    r->next = n;
    size_t full = OL_READ_BUF_BYTES / h->block_bytes * h->block_bytes;
    if (full < h->block_bytes)
        full = h->block_bytes;
    r->buf_cap = (size_t)ol_round_up(maxlen, OL_ALIGN);
    if (r->buf_cap > full)
        r->buf_cap = full;
    return 0;
}

/* References every segment the entry uses.  -EAGAIN if one is gone (moved by
 * compaction and removed after our snapshot was taken). */
static int reader_pin(struct ol_store_reader *r)
{
    for (uint32_t i = 0; i < r->next; i++) {
        r->segs[i] = ol_seg_get(r->st, r->ext[i].seg);
        if (!r->segs[i])
            return -EAGAIN;
    }
    return 0;
}

/* The current version of a key, for ol_reader_open_fn. */
struct current_key {
    struct ol_store *st;
    const char *bucket;
    const uint8_t *ik;
    size_t ik_len;
};

static int find_current(void *ctx, MDB_txn *txn, MDB_val *v)
{
    struct current_key *c = ctx;
    int rc = ol_idx_get(txn, c->st->db_objects, c->ik, c->ik_len, v);
    if (rc == -OL_ENOKEY) {
        MDB_val bk = {strlen(c->bucket), (void *)c->bucket}, bv;
        if (mdb_get(txn, c->st->db_buckets, &bk, &bv) == MDB_NOTFOUND)
            rc = -OL_ENOBUCKET;
    }
    return rc;
}

int ol_store_read_open(struct ol_store *st, const char *bucket, const char *key,
                       size_t key_len, struct ol_store_reader **out)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    struct current_key c = {st, bucket, ik, (size_t)kl};
    int rc = ol_reader_open_fn(st, find_current, &c, out);
    if (rc == -OL_ECORRUPT)
        ol_log_limited(OL_LOG_ERROR, "store %s: %s/%.*s: damaged entry or missing segment",
                       st->dir, bucket, (int)(key_len > 200 ? 200 : key_len), key);
    return rc;
}

/* ol_store_read_open for an entry found by a callback (versions.c opens
 * older versions so). */
int ol_reader_open_fn(struct ol_store *st, int (*find)(void *ctx, MDB_txn *txn, MDB_val *v),
                      void *ctx, struct ol_store_reader **out)
{
    struct ol_store_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->st = st;
    int rc = -EAGAIN;
    for (int attempt = 0; attempt < 8 && rc == -EAGAIN; attempt++) {
        reader_release(r);
        MDB_txn *txn = NULL;
        rc = ol_rd_begin(st, &txn);
        if (rc)
            break;
        MDB_val v;
        rc = find(ctx, txn, &v);
        struct ol_entry e;
        if (rc == 0)
            rc = ol_entry_decode(v.mv_data, v.mv_size, &e);
        if (rc == 0)
            rc = reader_fill(r, &e);
        ol_rd_end(st, txn);
        if (rc == 0)
            rc = reader_pin(r);
    }
    if (rc == -EAGAIN)
        rc = -OL_ECORRUPT; /* the entry refers to a missing segment */
    if (rc) {
        reader_release(r);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

const struct ol_obj_info *ol_store_read_info(const struct ol_store_reader *r)
{
    return &r->info;
}

int ol_store_read_attr(const struct ol_store_reader *r, const char *name, const uint8_t **val,
                       size_t *len)
{
    return ol_attrs_find(r->attrs, r->attr_len, name, val, len);
}

/* The file descriptor readers use for a segment's data: a second, buffered
 * (non-O_DIRECT) descriptor of the same file, opened by the first reader
 * that needs it, so that repeated GETs of the same bytes are served from the
 * page cache the way a plain file server's are, instead of going to the
 * device every time.  Falls back to the O_DIRECT descriptor if it cannot be
 * opened.
 *
 * Coherence with the O_DIRECT writers: segments are append-only and a reader
 * only reads ranges whose write completed before their commit.  A direct
 * write invalidates the page-cache pages of its range before it starts and
 * again after it completes (mm/filemap.c kiocb_invalidate_pages() and
 * kiocb_invalidate_post_direct_write(), called from iomap_dio_rw() /
 * __iomap_dio_rw() and iomap_dio_complete(); "invalidate clean pages which
 * might have been cached by non-direct readahead"), so pages that readahead
 * pulled in past a committed extent, from a range written later, are dropped.
 * That second invalidation may fail silently ("tough, the write still
 * worked"), which is why a checksum mismatch on the buffered descriptor is
 * retried on the O_DIRECT one before the block is declared corrupt. */
static int seg_read_fd(struct ol_store *st, struct ol_seg *seg)
{
    if (!st->direct)
        return seg->fd; /* already buffered */
    int fd = atomic_load_explicit(&seg->rfd, memory_order_acquire);
    if (fd >= 0)
        return fd;
    char path[64];
    snprintf(path, sizeof(path), "%016" PRIx64 ".seg", seg->id);
    int nfd = openat(st->seg_dir_fd, path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
        return seg->fd;
    /* Objects are read front to back: a larger readahead window. */
    (void)posix_fadvise(nfd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int expect = -1;
    if (!atomic_compare_exchange_strong(&seg->rfd, &expect, nfd)) {
        close(nfd); /* another thread opened it first */
        return expect;
    }
    return nfd;
}

/* Reads [start, start+len) of extent xi into r->buf through fd and checks
 * the nblk block CRCs.  0, -OL_ECORRUPT with *bad_off (segment offset of the
 * first bad block), or a negative errno. */
static int reader_load(struct ol_store_reader *r, uint32_t xi, int fd, uint64_t start,
                       size_t len, uint64_t nblk, uint64_t *bad_off)
{
    const struct ol_extent *x = &r->ext[xi];
    uint32_t bb = r->block_bytes;
    uint64_t b0 = start / bb;
    *bad_off = x->off + start;
    int rc = ol_pread_all(fd, r->buf, (size_t)ol_round_up(len, OL_ALIGN), x->off + start);
    if (rc)
        return rc;
    for (uint64_t j = 0; j < nblk; j++) {
        size_t bo = (size_t)(j * bb);
        size_t bl = len - bo < bb ? len - bo : bb;
        if (ol_crc32c(r->buf + bo, bl) != r->crcs[r->crc_start[xi] + b0 + j]) {
            *bad_off = x->off + start + bo;
            return -OL_ECORRUPT;
        }
    }
    return 0;
}

static int corrupt(struct ol_store_reader *r, uint64_t seg, uint64_t off)
{
    atomic_fetch_add(&r->st->corrupt_blocks, 1);
    ol_log_limited(OL_LOG_ERROR, "store %s: checksum mismatch in segment %016" PRIx64
                   " at offset %" PRIu64, r->st->dir, seg, off);
    r->c_valid = false;
    return -OL_ECORRUPT;
}

/* The extent holding object offset off (< size): the last one starting at
 * or before it; *rel is off's offset inside it. */
static uint32_t reader_extent(const struct ol_store_reader *r, uint64_t off, uint64_t *rel)
{
    uint32_t lo = 0, hi = r->next;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->ext_start[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    *rel = off - r->ext_start[lo];
    OL_ASSERT(*rel < r->ext[lo].len);
    return lo;
}

ssize_t ol_store_read(struct ol_store_reader *r, uint64_t off, size_t max, const uint8_t **data)
{
    uint64_t size = r->info.size;
    if (off >= size || max == 0)
        return 0;
    if (max > (size_t)(size - off))
        max = (size_t)(size - off);
    if (r->is_inline) {
        if (!r->inline_ok) {
            if (ol_crc32c(r->data, (size_t)size) != r->inline_crc)
                return corrupt(r, 0, 0);
            r->inline_ok = true;
        }
        *data = r->data + off;
        return (ssize_t)max;
    }
    uint64_t rel;
    uint32_t xi = reader_extent(r, off, &rel);
    const struct ol_extent *x = &r->ext[xi];
    if (!(r->c_valid && r->c_ext == xi && rel >= r->c_off && rel < r->c_off + r->c_len)) {
        if (!r->buf) {
            r->buf = ol_aligned_alloc(r->buf_cap);
            if (!r->buf)
                return -ENOMEM;
        }
        uint32_t bb = r->block_bytes;
        uint64_t b0 = rel / bb;
        uint64_t want_end = rel + max < x->len ? rel + max : x->len;
        uint64_t nblk = ol_blocks(want_end, bb) - b0;
        uint64_t maxblk = r->buf_cap / bb ? r->buf_cap / bb : 1;
        if (nblk > maxblk)
            nblk = maxblk;
        uint64_t start = b0 * bb;
        size_t len = (size_t)(nblk * bb < x->len - start ? nblk * bb : x->len - start);
        OL_ASSERT(ol_round_up(len, OL_ALIGN) <= r->buf_cap);
        r->c_valid = false;
        struct ol_seg *sg = r->segs[xi];
        int fd = seg_read_fd(r->st, sg);
        uint64_t bad = 0;
        int rc = reader_load(r, xi, fd, start, len, nblk, &bad);
        if (rc == -OL_ECORRUPT && fd != sg->fd) {
            /* Maybe a stale cached page (see seg_read_fd): drop the range
             * from the cache and read it from the device before deciding.
             * The kernel keeps pages that are mapped, so the zero-copy
             * mapping (segmap.c) lets go of them first. */
            const uint8_t *m = atomic_load(&sg->map);
            if (m && x->off + start + ol_round_up(len, OL_ALIGN) <= atomic_load(&sg->map_len))
                (void)madvise((void *)(m + x->off + start), (size_t)ol_round_up(len, OL_ALIGN),
                              MADV_DONTNEED);
            (void)posix_fadvise(fd, (off_t)(x->off + start),
                                (off_t)ol_round_up(len, OL_ALIGN), POSIX_FADV_DONTNEED);
            rc = reader_load(r, xi, sg->fd, start, len, nblk, &bad);
        }
        if (rc == -OL_ECORRUPT)
            return corrupt(r, x->seg, bad);
        if (rc)
            return rc;
        r->c_valid = true;
        r->c_ext = xi;
        r->c_off = start;
        r->c_len = len;
    }
    size_t in = (size_t)(rel - r->c_off);
    size_t n = r->c_len - in;
    if (n > max)
        n = max;
    *data = r->buf + in;
    return (ssize_t)n;
}

/* Zero-copy reads for large GETs.  The copy path above reads a window into
 * the reader's buffer, checks it and the caller sends that buffer: the bytes
 * cross memory three times in user space (into the buffer, the CRC pass, out
 * to the socket).  Here the caller sends straight from the page cache with
 * sendfile(2), and the store only has to show that those page-cache bytes are
 * good: it checks the blocks' CRCs on the cached pages themselves, through a
 * read-only mapping of the segment (segmap.c), and hands back the file range.
 * The caller sends it at once, without yielding, so what goes out is the
 * pages that were just checked; the one way they could differ is the kernel
 * evicting and re-reading them from the device within those microseconds.
 * A range that is not in the page cache (only the cached prefix is served),
 * or fails a check, returns -EAGAIN: the caller reads that window with
 * ol_store_read, which waits for the device through the ring (filling the
 * page cache for the next window) and tells a stale cached page from real
 * corruption. */
static ssize_t read_mapped(struct ol_store_reader *r, uint64_t off, size_t max, size_t window,
                           bool check, int *fd, uint64_t *foff, const uint8_t **ptr)
{
    uint64_t size = r->info.size;
    if (off >= size || max == 0)
        return 0;
    if (r->is_inline)
        return -EAGAIN;
    if (max > (size_t)(size - off))
        max = (size_t)(size - off);
    if (max > window)
        max = window;
    uint64_t rel;
    uint32_t xi = reader_extent(r, off, &rel);
    const struct ol_extent *x = &r->ext[xi];
    struct ol_seg *sg = r->segs[xi];
    int rfd = seg_read_fd(r->st, sg);
    /* An O_DIRECT descriptor would send from the device, not the cache. */
    if (r->st->direct && rfd == sg->fd)
        return -EAGAIN;
    uint64_t map_len;
    const uint8_t *map = ol_seg_map(r->st, sg, rfd, &map_len);
    if (!map)
        return -EAGAIN;
    uint32_t bb = r->block_bytes;
    uint64_t b0 = rel / bb * bb;
    uint64_t end = rel + max < x->len ? rel + max : x->len;
    uint64_t vend = ol_blocks(end, bb) * bb; /* the checked blocks end here */
    if (vend > x->len)
        vend = x->len;
    if (x->off + vend > map_len)
        return -EAGAIN;
    /* Only the cached prefix, in whole blocks (the last one may be the
     * extent's short tail). */
    uint64_t res = ol_seg_resident(map, x->off + b0, vend - b0);
    if (res < vend - b0) {
        vend = b0 + res / bb * bb;
        if (vend <= rel)
            return -EAGAIN;
        if (end > vend)
            end = vend;
    }
    uint64_t good = 0;
    int rc = !check ? 0 : ol_seg_map_check(map + x->off + b0, vend - b0, bb,
                              r->crcs + r->crc_start[xi] + b0 / bb, &good);
    if (rc) {
        if (b0 + good <= rel)
            return -EAGAIN;
        if (end > b0 + good)
            end = b0 + good;
    }
    if (fd) {
        *fd = rfd;
        *foff = x->off + rel;
    }
    if (ptr)
        *ptr = map + x->off + rel;
    return (ssize_t)(end - rel);
}

ssize_t ol_store_read_file(struct ol_store_reader *r, uint64_t off, size_t max, int *fd,
                           uint64_t *foff)
{
    return read_mapped(r, off, max, OL_ZC_WINDOW_BYTES, true, fd, foff, NULL);
}

ssize_t ol_store_read_map(struct ol_store_reader *r, uint64_t off, size_t max,
                          const uint8_t **data)
{
    return read_mapped(r, off, max, SIZE_MAX, true, NULL, NULL, data);
}

ssize_t ol_store_read_map_sealed(struct ol_store_reader *r, uint64_t off, size_t max,
                                 const uint8_t **data)
{
    return read_mapped(r, off, max, SIZE_MAX, false, NULL, NULL, data);
}

void ol_store_read_close(struct ol_store_reader *r)
{
    if (!r)
        return;
    reader_release(r);
    free(r);
}

/* ---- deleting ---- */

int ol_store_delete(struct ol_store *st, const char *bucket, const char *key, size_t key_len)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl;
    struct ol_op op = {
        .type = OL_OP_DELETE,
        .bucket = bucket,
        .ikey = ik,
        .ikey_len = (size_t)kl,
    };
    return ol_commit_run(st, &op);
}

/* ---- listing ---- */

struct ol_store_iter {
    struct ol_store *st;
    MDB_txn *txn;
    size_t pfx_len; /* bucket + '\0' */
    uint8_t pfx[OL_BUCKET_MAX + 1];
    bool done;
    struct ol_idx_cur cur;
};

int ol_store_iter_open(struct ol_store *st, const char *bucket, const char *from,
                       size_t from_len, bool inclusive, struct ol_store_iter **out)
{
    if (check_bucket(bucket))
        return -OL_ENOBUCKET;
    struct ol_store_iter *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    it->st = st;
    size_t bl = strlen(bucket);
    memcpy(it->pfx, bucket, bl);
    it->pfx[bl] = 0;
    it->pfx_len = bl + 1;
    int rc = ol_rd_begin(st, &it->txn);
    if (rc)
        goto out;
    MDB_val bk = {bl, (void *)bucket}, bv;
    int mr = mdb_get(it->txn, st->db_buckets, &bk, &bv);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(mr);
        goto out;
    }
    rc = ol_idx_cur_open(it->txn, st->db_objects, &it->cur);
    if (rc)
        goto out;
    rc = ol_store_iter_seek(it, from, from_len, inclusive);
out:
    if (rc) {
        ol_store_iter_close(it);
        return rc;
    }
    *out = it;
    return 0;
}

int ol_store_iter_seek(struct ol_store_iter *it, const char *from, size_t from_len,
                       bool inclusive)
{
    uint8_t k[OL_IDX_KEY_MAX];
    if (from_len > OL_KEY_MAX)
        return -OL_ETOOLARGE;
    memcpy(k, it->pfx, it->pfx_len);
    if (from_len)
        memcpy(k + it->pfx_len, from, from_len);
    it->done = false;
    /* An empty `from` seeks to bucket '\0', which is never a key itself. */
    return ol_idx_cur_seek(&it->cur, k, it->pfx_len + from_len, inclusive || from_len == 0);
}

int ol_store_iter_next(struct ol_store_iter *it, const char **key, size_t *key_len,
                       struct ol_obj_info *info)
{
    if (it->done)
        return 1;
    const uint8_t *k;
    size_t kl;
    MDB_val v;
    int rc = ol_idx_cur_next(&it->cur, &k, &kl, &v);
    if (rc)
        return rc;
    if (kl <= it->pfx_len || memcmp(k, it->pfx, it->pfx_len) != 0) {
        it->done = true;
        return 1;
    }
    struct ol_entry e;
    rc = ol_entry_decode(v.mv_data, v.mv_size, &e);
    if (rc)
        return rc;
    *key = (const char *)k + it->pfx_len;
    *key_len = kl - it->pfx_len;
    memset(info, 0, sizeof(*info));
    info->size = e.h.size;
    info->mtime_ns = e.h.mtime_ns;
    memcpy(info->etag, e.h.etag, sizeof(info->etag));
    info->nparts = e.h.nparts;
    info->meta_len = e.h.meta_len;
    info->meta = e.meta;
    return 0;
}

void ol_store_iter_close(struct ol_store_iter *it)
{
    if (!it)
        return;
    ol_idx_cur_close(&it->cur);
    if (it->txn)
        ol_rd_end(it->st, it->txn);
    free(it);
}

/* ---- multipart uploads ---- */

int ol_store_upload_create(struct ol_store *st, const char *bucket, const char *key,
                           size_t key_len, const uint8_t *meta, uint32_t meta_len,
                           int64_t ctime_ns, char upload_id[40])
{
    if (check_bucket(bucket))
        return -OL_ENOBUCKET;
    if (key_len == 0)
        return -EINVAL;
    if (key_len > OL_KEY_MAX)
        return -OL_ETOOLARGE;
    uint8_t rnd[16];
    int rc = ol_random(rnd, sizeof(rnd));
    if (rc)
        return rc;
    char id[40];
    for (int i = 0; i < 16; i++)
        snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    uint8_t *rec = NULL;
    size_t rec_len = 0;
    rc = ol_upload_build(bucket, (const uint8_t *)key, key_len, meta, meta ? meta_len : 0,
                         ctime_ns, &rec, &rec_len);
    if (rc)
        return rc;
    struct ol_op op = {
        .type = OL_OP_UPLOAD_CREATE,
        .bucket = bucket,
        .upload_id = id,
        .val = rec,
        .val_len = rec_len,
    };
    rc = ol_commit_run(st, &op);
    free(rec);
    if (rc == 0)
        memcpy(upload_id, id, OL_UPLOAD_ID_LEN + 1);
    return rc;
}

static void upload_info_fill(struct ol_upload_info *ui, const char *id,
                             const struct ol_upload_view *u)
{
    memset(ui, 0, sizeof(*ui));
    memcpy(ui->upload_id, id, OL_UPLOAD_ID_LEN);
    memcpy(ui->bucket, u->bucket, u->bucket_len);
    ui->key = (const char *)u->key;
    ui->key_len = u->key_len;
    ui->ctime_ns = u->ctime_ns;
    ui->meta_len = u->meta_len;
    ui->meta = u->meta;
}

int ol_store_upload_get(struct ol_store *st, const char *upload_id,
                        int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    uint8_t pk[40];
    size_t pkl;
    int rc = ol_part_key(pk, upload_id, 0, &pkl);
    if (rc)
        return rc;
    MDB_txn *txn = NULL;
    rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val k = {OL_UPLOAD_ID_LEN, (void *)upload_id}, v;
    int mr = mdb_get(txn, st->db_uploads, &k, &v);
    struct ol_upload_view u;
    if (mr)
        rc = mr == MDB_NOTFOUND ? -OL_ENOUPLOAD : ol_mdb_err(mr);
    else
        rc = ol_upload_decode(v.mv_data, v.mv_size, &u);
    if (rc == 0) {
        struct ol_upload_info ui;
        upload_info_fill(&ui, upload_id, &u);
        fn(ctx, &ui);
    }
    ol_rd_end(st, txn);
    return rc;
}

int ol_store_part_list(struct ol_store *st, const char *upload_id, uint32_t after,
                       int (*fn)(void *ctx, const struct ol_part_info *p), void *ctx)
{
    uint8_t pk[40];
    size_t pkl;
    if (after >= 10000)
        after = 10000;
    int rc = ol_part_key(pk, upload_id, after + 1, &pkl);
    if (rc)
        return rc;
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val uk = {OL_UPLOAD_ID_LEN, (void *)upload_id}, uv;
    int mr = mdb_get(txn, st->db_uploads, &uk, &uv);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOUPLOAD : ol_mdb_err(mr);
        goto out;
    }
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_parts, &c));
    if (rc)
        goto out;
    MDB_val k = {pkl, pk}, v;
    for (mr = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mr == 0;
         mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != pkl || memcmp(k.mv_data, upload_id, OL_UPLOAD_ID_LEN) != 0)
            break;
        struct ol_entry e;
        rc = ol_entry_decode(v.mv_data, v.mv_size, &e);
        if (rc)
            break;
        const uint8_t *p = (const uint8_t *)k.mv_data + OL_UPLOAD_ID_LEN;
        struct ol_part_info pi;
        memset(&pi, 0, sizeof(pi));
        pi.part_no = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        pi.size = e.h.size;
        pi.mtime_ns = e.h.mtime_ns;
        memcpy(pi.etag, e.h.etag, sizeof(pi.etag));
        if (fn(ctx, &pi))
            break;
    }
    if (rc == 0 && mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
out:
    if (c)
        mdb_cursor_close(c);
    ol_rd_end(st, txn);
    return rc;
}

struct upload_ent {
    const char *id;
    struct ol_upload_view u;
};

static int upload_ent_cmp(const void *a, const void *b)
{
    const struct upload_ent *x = a, *y = b;
    size_t n = x->u.key_len < y->u.key_len ? x->u.key_len : y->u.key_len;
    int c = memcmp(x->u.key, y->u.key, n);
    if (c == 0 && x->u.key_len != y->u.key_len)
        c = x->u.key_len < y->u.key_len ? -1 : 1;
    return c ? c : memcmp(x->id, y->id, OL_UPLOAD_ID_LEN);
}

int ol_store_upload_list(struct ol_store *st, const char *bucket,
                         int (*fn)(void *ctx, const struct ol_upload_info *u), void *ctx)
{
    if (check_bucket(bucket))
        return -OL_ENOBUCKET;
    size_t bl = strlen(bucket);
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    struct upload_ent *ents = NULL;
    uint32_t n = 0, cap = 0;
    int rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    MDB_val k = {bl, (void *)bucket}, v;
    int mr = mdb_get(txn, st->db_buckets, &k, &v);
    if (mr) {
        rc = mr == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(mr);
        goto out;
    }
    rc = ol_mdb_err(mdb_cursor_open(txn, st->db_uploads, &c));
    if (rc)
        goto out;
    /* Uploads are few: scan, filter and sort rather than keep a second index. */
    for (mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0;
         mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        struct upload_ent e;
        if (k.mv_size != OL_UPLOAD_ID_LEN || ol_upload_decode(v.mv_data, v.mv_size, &e.u) != 0)
            continue;
        if (e.u.bucket_len != bl || memcmp(e.u.bucket, bucket, bl) != 0)
            continue;
        e.id = k.mv_data;
        if (n == cap) {
            uint32_t nc = cap ? cap * 2 : 16;
            struct upload_ent *ne = realloc(ents, nc * sizeof(*ne));
            if (!ne) {
                rc = -ENOMEM;
                goto out;
            }
            ents = ne;
            cap = nc;
        }
        ents[n++] = e;
    }
    if (mr != MDB_NOTFOUND) {
        rc = ol_mdb_err(mr);
        goto out;
    }
    if (n)
        qsort(ents, n, sizeof(*ents), upload_ent_cmp);
    for (uint32_t i = 0; i < n; i++) {
        char id[OL_UPLOAD_ID_LEN + 1];
        memcpy(id, ents[i].id, OL_UPLOAD_ID_LEN);
        id[OL_UPLOAD_ID_LEN] = 0;
        struct ol_upload_info ui;
        upload_info_fill(&ui, id, &ents[i].u);
        if (fn(ctx, &ui))
            break;
    }
out:
    free(ents);
    if (c)
        mdb_cursor_close(c);
    ol_rd_end(st, txn);
    return rc;
}

int ol_store_upload_complete(struct ol_store *st, const char *upload_id,
                             const struct ol_complete_part *parts, uint32_t nparts,
                             uint64_t min_part_bytes, struct ol_obj_info *info)
{
    return ol_store_upload_complete_if(st, upload_id, parts, nparts, min_part_bytes, info, NULL,
                                       NULL);
}

int ol_store_upload_complete_if(struct ol_store *st, const char *upload_id,
                                const struct ol_complete_part *parts, uint32_t nparts,
                                uint64_t min_part_bytes, struct ol_obj_info *info,
                                const struct ol_store_cond *cond, char vid[OL_STORE_VID_MAX])
{
    uint8_t pk[40];
    size_t pkl;
    int rc = ol_part_key(pk, upload_id, 0, &pkl);
    if (rc)
        return rc;
    if (nparts == 0 || nparts > 10000)
        return -EINVAL;
    for (uint32_t i = 1; i < nparts; i++)
        if (parts[i].part_no <= parts[i - 1].part_no)
            return -OL_EPARTORDER;
    /* Checked here so that the writer thread only encodes them. */
    rc = ol_attrs_check(info->attrs, info->nattrs, false);
    if (rc)
        return rc;
    struct ol_op op = {
        .type = OL_OP_UPLOAD_COMPLETE,
        .upload_id = upload_id,
        .parts = parts,
        .nparts = nparts,
        .min_part_bytes = min_part_bytes,
        .info = info,
        .cond = cond,
    };
    rc = ol_commit_run(st, &op);
    if (vid)
        memcpy(vid, rc == 0 ? op.vid_out : "", rc == 0 ? OL_STORE_VID_MAX : 1);
    return rc;
}

int ol_store_upload_abort(struct ol_store *st, const char *upload_id)
{
    uint8_t pk[40];
    size_t pkl;
    int rc = ol_part_key(pk, upload_id, 0, &pkl);
    if (rc)
        return rc;
    struct ol_op op = {
        .type = OL_OP_UPLOAD_ABORT,
        .upload_id = upload_id,
    };
    return ol_commit_run(st, &op);
}

/* ---- statistics ---- */

void ol_store_stats(struct ol_store *st, struct ol_store_stats *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->reg_mu);
    out->segments = st->nsegs;
    for (size_t i = 0; i < st->nsegs; i++)
        out->segment_bytes += atomic_load(&st->segs[i]->size);
    pthread_mutex_unlock(&st->reg_mu);
    MDB_txn *txn = NULL;
    if (ol_rd_begin(st, &txn) == 0) {
        MDB_cursor *c = NULL;
        if (mdb_cursor_open(txn, st->db_segs, &c) == 0) {
            MDB_val k, v;
            for (int mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0;
                 mr = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                struct ol_segrec r;
                if (v.mv_size == sizeof(r)) {
                    memcpy(&r, v.mv_data, sizeof(r));
                    out->live_bytes += r.live;
                }
            }
            mdb_cursor_close(c);
        }
        out->objects = ol_idx_meta_get(txn, st->db_meta, "objects");
        ol_rd_end(st, txn);
    }
    out->commits = atomic_load(&st->commits);
    out->commit_ops = atomic_load(&st->commit_ops);
    out->compacted_bytes = atomic_load(&st->compacted_bytes);
    out->corrupt_blocks = atomic_load(&st->corrupt_blocks);
}
