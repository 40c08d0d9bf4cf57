/* Compaction: copies the live extents of sparse sealed segments into new
 * segments, swaps the index entries over (only where they still point at the
 * old copy) and lets the emptied segments be unlinked.  Also reaps empty
 * segments whose last reference went away. */
#include "store/store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

#define OL_COMPACT_PERIOD_S 5
#define OL_COMPACT_MAX_JOBS 10000u /* per pass; the next pass takes the rest */
#define OL_RELOC_BATCH 256u

struct ol_compact_req {
    struct ol_completion c;
    struct ol_compact_req *next;
};

struct job {
    enum ol_reloc_db db;
    uint16_t key_len;
    uint8_t key[OL_IDX_KEY_MAX];
    struct ol_extent x;
    uint32_t *crcs; /* ol_blocks(x.len) CRCs */
    uint64_t new_seg, new_off;
    bool copied;
};

struct pass {
    struct ol_store *st;
    uint64_t *cand; /* sorted candidate segment ids */
    uint32_t ncand;
    struct job *jobs;
    uint32_t njobs, cap_jobs;
    struct ol_seg **dst; /* referenced destination segments */
    uint32_t ndst, cap_dst;
    uint8_t *buf;
    size_t buf_cap;
};

static bool is_cand(const struct pass *p, uint64_t id)
{
    uint32_t lo = 0, hi = p->ncand;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->cand[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->ncand && p->cand[lo] == id;
}

/* Adds a job for each extent of the entry that lies in a candidate. */
static int collect(struct pass *p, enum ol_reloc_db db, const uint8_t *k, size_t kl,
                   const MDB_val *v)
{
    struct ol_entry e;
    if (ol_entry_decode(v->mv_data, v->mv_size, &e) != 0 || (e.h.flags & OL_ENTRY_INLINE))
        return 0;
    if (e.h.block_bytes != p->st->o.block_bytes)
        return 0;
    uint32_t ci = 0;
    for (uint32_t i = 0; i < e.h.nextents; i++) {
        struct ol_extent x;
        ol_entry_get_ext(&e, i, &x);
        uint32_t nb = ol_blocks(x.len, e.h.block_bytes);
        if (is_cand(p, x.seg) && p->njobs < OL_COMPACT_MAX_JOBS) {
            if (p->njobs == p->cap_jobs) {
                uint32_t nc = p->cap_jobs ? p->cap_jobs * 2 : 64;
                struct job *nj = realloc(p->jobs, (size_t)nc * sizeof(*nj));
                if (!nj)
                    return -ENOMEM;
                p->jobs = nj;
                p->cap_jobs = nc;
            }
            struct job *j = &p->jobs[p->njobs];
            memset(j, 0, offsetof(struct job, key));
            j->db = db;
            j->key_len = (uint16_t)kl;
            memcpy(j->key, k, kl);
            j->x = x;
            j->crcs = malloc((size_t)nb * 4);
            if (!j->crcs)
                return -ENOMEM;
            for (uint32_t b = 0; b < nb; b++)
                j->crcs[b] = ol_entry_get_crc(&e, ci + b);
            j->copied = false;
            p->njobs++;
        }
        ci += nb;
    }
    return 0;
}

static int scan(struct pass *p)
{
    struct ol_store *st = p->st;
    MDB_txn *txn = NULL;
    int rc = ol_mdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    struct ol_idx_cur cur;
    rc = ol_idx_cur_open(txn, st->db_objects, &cur);
    if (rc == 0)
        rc = ol_idx_cur_seek(&cur, NULL, 0, true);
    for (uint64_t guard = 0; rc == 0 && guard < UINT64_MAX; guard++) {
        const uint8_t *k;
        size_t kl;
        MDB_val v;
        int r = ol_idx_cur_next(&cur, &k, &kl, &v);
        if (r == 1)
            break;
        rc = r ? r : collect(p, OL_RELOC_OBJECTS, k, kl, &v);
    }
    ol_idx_cur_close(&cur);
    /* Older versions and markers keep their extents too (versions.c). */
    if (rc == 0)
        rc = ol_idx_cur_open(txn, st->db_versions, &cur);
    if (rc == 0) {
        rc = ol_idx_cur_seek(&cur, NULL, 0, true);
        for (uint64_t guard = 0; rc == 0 && guard < UINT64_MAX; guard++) {
            const uint8_t *k;
            size_t kl;
            MDB_val v;
            int r = ol_idx_cur_next(&cur, &k, &kl, &v);
            if (r == 1)
                break;
            rc = r ? r : collect(p, OL_RELOC_VERSIONS, k, kl, &v);
        }
        ol_idx_cur_close(&cur);
    }
    MDB_cursor *c = NULL;
    if (rc == 0)
        rc = ol_mdb_err(mdb_cursor_open(txn, st->db_parts, &c));
    if (rc == 0) {
        MDB_val k, v;
        int mr;
        for (mr = mdb_cursor_get(c, &k, &v, MDB_FIRST); mr == 0 && rc == 0;
             mr = mdb_cursor_get(c, &k, &v, MDB_NEXT))
            rc = collect(p, OL_RELOC_PARTS, k.mv_data, k.mv_size, &v);
        if (rc == 0 && mr != MDB_NOTFOUND)
            rc = ol_mdb_err(mr);
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    return rc;
}

static int add_dst(struct pass *p, struct ol_seg *seg)
{
    for (uint32_t i = 0; i < p->ndst; i++) {
        if (p->dst[i] == seg) {
            ol_seg_unref(p->st, seg);
            return 0;
        }
    }
    if (p->ndst == p->cap_dst) {
        uint32_t nc = p->cap_dst ? p->cap_dst * 2 : 8;
        struct ol_seg **nd = realloc(p->dst, nc * sizeof(*nd));
        if (!nd) {
            ol_seg_unref(p->st, seg);
            return -ENOMEM;
        }
        p->dst = nd;
        p->cap_dst = nc;
    }
    p->dst[p->ndst++] = seg;
    return 0;
}

/* Copies one extent, verifying every block on the way. */
static int copy_job(struct pass *p, struct job *j)
{
    struct ol_store *st = p->st;
    struct ol_seg *src = ol_seg_get(st, j->x.seg);
    if (!src)
        return 0; /* already gone: the entry changed meanwhile */
    struct ol_seg *dst = NULL;
    uint64_t doff = 0;
    int rc = ol_seg_reserve(st, ol_seg_slot_compactor(st), j->x.len, &dst, &doff);
    if (rc)
        goto out;
    rc = add_dst(p, dst);
    if (rc)
        goto out;
    uint32_t bb = st->o.block_bytes;
    size_t chunk = p->buf_cap / bb * bb;
    uint64_t done = 0;
    for (uint64_t guard = 0; done < j->x.len && guard < UINT32_MAX; guard++) {
        size_t n = (size_t)(j->x.len - done < chunk ? j->x.len - done : chunk);
        size_t rn = (size_t)ol_round_up(n, OL_ALIGN);
        rc = ol_pread_all(src->fd, p->buf, rn, j->x.off + done);
        if (rc)
            goto out;
        for (size_t bo = 0; bo < n; bo += bb) {
            size_t bl = n - bo < bb ? n - bo : bb;
            if (ol_crc32c(p->buf + bo, bl) != j->crcs[(done + bo) / bb]) {
                /* A damaged extent stays where it is: moving it would only
                 * hide the damage behind fresh-looking data. */
                atomic_fetch_add(&st->corrupt_blocks, 1);
                ol_log_limited(OL_LOG_ERROR,
                               "store %s: compaction found a bad block in segment %016" PRIx64
                               " at %" PRIu64, st->dir, j->x.seg, j->x.off + done + bo);
                rc = 0;
                goto out;
            }
        }
        if (rn > n)
            memset(p->buf + n, 0, rn - n);
        rc = ol_pwrite_all(dst->fd, p->buf, rn, doff + done);
        if (rc)
            goto out;
        done += n;
    }
    j->new_seg = dst->id;
    j->new_off = doff;
    j->copied = true;
out:
    ol_seg_unref(st, src);
    return rc;
}

static int job_cmp(const void *a, const void *b)
{
    const struct job *x = a, *y = b;
    if (x->x.seg != y->x.seg)
        return x->x.seg < y->x.seg ? -1 : 1;
    if (x->x.off != y->x.off)
        return x->x.off < y->x.off ? -1 : 1;
    if (x->x.len != y->x.len)
        return x->x.len < y->x.len ? -1 : 1;
    return 0;
}

/* Copies every distinct extent once.  An extent shared by several entries
 * (copies, UploadPartCopy) moves to one new place, and every referrer is
 * pointed there, so compaction keeps the sharing instead of multiplying the
 * data. */
static int copy_all(struct pass *p)
{
    int rc = 0;
    if (p->njobs > 1)
        qsort(p->jobs, p->njobs, sizeof(*p->jobs), job_cmp);
    for (uint32_t i = 0; rc == 0 && i < p->njobs; i++) {
        struct job *j = &p->jobs[i];
        struct job *prev = i > 0 ? &p->jobs[i - 1] : NULL;
        if (prev && job_cmp(prev, j) == 0 && memcmp(prev->crcs, j->crcs,
                                                    (size_t)ol_blocks(j->x.len,
                                                                      p->st->o.block_bytes) *
                                                        4) == 0) {
            j->copied = prev->copied;
            j->new_seg = prev->new_seg;
            j->new_off = prev->new_off;
            continue;
        }
        rc = copy_job(p, j);
    }
    return rc;
}

static int relocate(struct pass *p)
{
    struct ol_store *st = p->st;
    struct ol_op *ops = calloc(OL_RELOC_BATCH, sizeof(*ops));
    if (!ops)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t base = 0; base < p->njobs; base += OL_RELOC_BATCH) {
        uint32_t n = 0;
        struct job *js[OL_RELOC_BATCH];
        for (uint32_t i = base; i < p->njobs && i < base + OL_RELOC_BATCH; i++) {
            struct job *j = &p->jobs[i];
            if (!j->copied)
                continue;
            struct ol_op *op = &ops[n];
            memset(op, 0, sizeof(*op));
            op->type = OL_OP_RELOCATE;
            op->reloc_db = j->db;
            op->ikey = j->key;
            op->ikey_len = j->key_len;
            op->old = j->x;
            op->new_seg = j->new_seg;
            op->new_off = j->new_off;
            js[n++] = j;
        }
        /* All queued at once so that they share write transactions. */
        for (uint32_t i = 0; i < n; i++)
            ol_commit_enqueue(st, &ops[i]);
        for (uint32_t i = 0; i < n; i++) {
            int r = ol_completion_wait(&ops[i].done);
            if (r == 0 && !ops[i].reloc_stale)
                atomic_fetch_add(&st->compacted_bytes, js[i]->x.len);
            if (r && !rc)
                rc = r;
        }
    }
    free(ops);
    return rc;
}

static int compact_pass(struct ol_store *st)
{
    struct pass p;
    memset(&p, 0, sizeof(p));
    p.st = st;
    int rc = 0;
    ol_seg_reap_all(st);
    if (st->o.compact_pct == 0)
        return 0;

    /* Candidates: sealed segments whose live share is below compact_pct. */
    pthread_mutex_lock(&st->reg_mu);
    size_t n = st->nsegs;
    uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    uint64_t *sizes = malloc((n ? n : 1) * sizeof(*sizes));
    uint32_t m = 0;
    for (size_t i = 0; ids && sizes && i < n; i++) {
        struct ol_seg *seg = st->segs[i];
        if (seg->dead || !atomic_load(&seg->sealed))
            continue;
        ids[m] = seg->id;
        sizes[m++] = atomic_load(&seg->size);
    }
    pthread_mutex_unlock(&st->reg_mu);
    if (!ids || !sizes) {
        rc = -ENOMEM;
        goto out;
    }
    MDB_txn *txn = NULL;
    rc = ol_mdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        goto out;
    p.cand = ids;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t written = 0, live = 0;
        if (ol_idx_seg_get(txn, st->db_segs, ids[i], &written, &live) != 0 || live == 0)
            continue;
        uint64_t data = sizes[i] > OL_SEG_HDR_BYTES ? sizes[i] - OL_SEG_HDR_BYTES : 0;
        if (live * 100 < (uint64_t)st->o.compact_pct * data)
            ids[p.ncand++] = ids[i]; /* ids is sorted, so cand stays sorted */
    }
    mdb_txn_abort(txn);
    if (p.ncand == 0)
        goto out;
    ol_debug("store %s: compacting %u segments", st->dir, p.ncand);

    rc = scan(&p);
    if (rc)
        goto out;
    p.buf_cap = (size_t)ol_round_up(OL_IO_BUF_BYTES, st->o.block_bytes);
    p.buf = ol_aligned_alloc(p.buf_cap);
    if (!p.buf) {
        rc = -ENOMEM;
        goto out;
    }
    rc = copy_all(&p);
    /* The copies must be durable before any entry points at them. */
    for (uint32_t i = 0; rc == 0 && i < p.ndst; i++)
        rc = ol_seg_sync(p.dst[i]);
    if (rc == 0)
        rc = relocate(&p);
out:
    for (uint32_t i = 0; i < p.njobs; i++)
        free(p.jobs[i].crcs);
    free(p.jobs);
    for (uint32_t i = 0; i < p.ndst; i++)
        ol_seg_unref(st, p.dst[i]);
    free(p.dst);
    ol_buf_free(p.buf, p.buf_cap);
    free(ids);
    free(sizes);
    if (rc == 0)
        ol_seg_reap_all(st);
    else
        ol_warn("store %s: compaction pass failed: %s", st->dir, ol_strerror(rc));
    return rc;
}

static void *compact_main(void *arg)
{
    struct ol_store *st = arg;
    struct timespec last;
    clock_gettime(CLOCK_MONOTONIC, &last);
    for (;;) {
        pthread_mutex_lock(&st->c_mu);
        struct timespec dl = last;
        /* compact_interval_ms (0: the default period) paces full passes. */
        uint64_t period_ms = st->o.compact_interval_ms ? st->o.compact_interval_ms
                                                       : OL_COMPACT_PERIOD_S * 1000u;
        dl.tv_sec += (time_t)(period_ms / 1000);
        dl.tv_nsec += (long)(period_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        int w = 0;
        while (!st->c_stop && !st->reap_req && !st->c_reqs && w != ETIMEDOUT)
            w = pthread_cond_timedwait(&st->c_cv, &st->c_mu, &dl);
        bool stop = st->c_stop;
        bool full = st->c_reqs != NULL || w == ETIMEDOUT;
        struct ol_compact_req *reqs = st->c_reqs;
        st->c_reqs = NULL;
        st->reap_req = false;
        pthread_mutex_unlock(&st->c_mu);
        int rc = -OL_ESHUTDOWN;
        if (!stop) {
            if (full) {
                rc = compact_pass(st);
                clock_gettime(CLOCK_MONOTONIC, &last);
            } else {
                ol_seg_reap_all(st);
            }
        }
        for (int i = 0; reqs && i < 1000000; i++) {
            struct ol_compact_req *next = reqs->next;
            ol_completion_signal(&reqs->c, rc);
            reqs = next;
        }
        if (stop)
            break;
    }
    return NULL;
}

int ol_compact_start(struct ol_store *st)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&st->c_cv);
    pthread_cond_init(&st->c_cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&st->cthr, NULL, compact_main, st);
    if (rc)
        return -rc;
    st->cthr_started = true;
    return 0;
}

void ol_compact_stop(struct ol_store *st)
{
    if (!st->cthr_started)
        return;
    pthread_mutex_lock(&st->c_mu);
    st->c_stop = true;
    pthread_cond_signal(&st->c_cv);
    pthread_mutex_unlock(&st->c_mu);
    pthread_join(st->cthr, NULL);
    st->cthr_started = false;
}

void ol_compact_kick_reap(struct ol_store *st)
{
    pthread_mutex_lock(&st->c_mu);
    st->reap_req = true;
    pthread_cond_signal(&st->c_cv);
    pthread_mutex_unlock(&st->c_mu);
}

int ol_store_compact_now(struct ol_store *st)
{
    struct ol_compact_req req;
    ol_completion_init(&req.c);
    pthread_mutex_lock(&st->c_mu);
    if (st->c_stop || !st->cthr_started) {
        pthread_mutex_unlock(&st->c_mu);
        return -OL_ESHUTDOWN;
    }
    req.next = st->c_reqs;
    st->c_reqs = &req;
    pthread_cond_signal(&st->c_cv);
    pthread_mutex_unlock(&st->c_mu);
    return ol_completion_wait(&req.c);
}
