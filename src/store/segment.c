/* Segment files: creation, the registry, active slots, coalesced fdatasync
 * and unlinking of empty segments. */
#include "store/store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/log.h"

/* A completion result that tells a sync waiter to run the next fdatasync
 * itself (it is positive, so it cannot be confused with an error). */
#define OL_SYNC_HANDOFF 1

struct ol_sync_waiter {
    uint64_t gen;
    struct ol_completion c;
    struct ol_sync_waiter *next;
};

void *ol_aligned_alloc(size_t len)
{
    return ol_buf_alloc((size_t)ol_round_up(len ? len : 1, OL_ALIGN));
}

int ol_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    for (int i = 0; done < len && i < 64; i++) {
        ssize_t n = ol_io_pwrite(fd, (const uint8_t *)buf + done, len - done, off + done);
        if (n == -EINTR || n == -EAGAIN)
            continue;
        if (n < 0)
            return (int)n;
        if (n == 0)
            return -EIO;
        done += (size_t)n;
    }
    return done == len ? 0 : -EIO;
}

int ol_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    for (int i = 0; done < len && i < 64; i++) {
        ssize_t n = ol_io_pread(fd, (uint8_t *)buf + done, len - done, off + done);
        if (n == -EINTR || n == -EAGAIN)
            continue;
        if (n < 0)
            return (int)n;
        if (n == 0)
            return -OL_ECORRUPT; /* the file ends before data the index promises */
        done += (size_t)n;
    }
    return done == len ? 0 : -EIO;
}

static void seg_name(char out[32], uint64_t id)
{
    snprintf(out, 32, "%016" PRIx64 ".seg", id);
}

/* Opens a segment file with O_DIRECT where the file system allows it. */
static int seg_openat(struct ol_store *st, const char *name, int flags)
{
    if (st->direct) {
        int fd = openat(st->seg_dir_fd, name, flags | O_DIRECT | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EINVAL)
            return fd >= 0 ? fd : -errno;
        st->direct = false;
        if (!atomic_exchange(&st->direct_logged, true))
            ol_warn("store %s: O_DIRECT refused by the file system, using buffered I/O",
                    st->dir);
    }
    int fd = openat(st->seg_dir_fd, name, flags | O_CLOEXEC, 0644);
    return fd >= 0 ? fd : -errno;
}

static struct ol_seg *seg_alloc(uint64_t id, int fd, uint64_t size)
{
    struct ol_seg *seg = calloc(1, sizeof(*seg));
    if (!seg)
        return NULL;
    seg->id = id;
    seg->fd = fd;
    atomic_init(&seg->rfd, -1);
    atomic_init(&seg->refs, 0);
    atomic_init(&seg->sealed, false);
    atomic_init(&seg->size, size);
    seg->tail = size;
    pthread_mutex_init(&seg->sync_mu, NULL);
    return seg;
}

static void seg_free(struct ol_seg *seg)
{
    if (seg->fd >= 0)
        close(seg->fd);
    if (atomic_load(&seg->rfd) >= 0)
        close(atomic_load(&seg->rfd));
    ol_seg_unmap(seg);
    pthread_mutex_destroy(&seg->sync_mu);
    free(seg);
}

static size_t reg_find(struct ol_store *st, uint64_t id, bool *found)
{
    size_t lo = 0, hi = st->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->segs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < st->nsegs && st->segs[lo]->id == id;
    return lo;
}

/* Caller holds reg_mu. */
static int reg_insert(struct ol_store *st, struct ol_seg *seg)
{
    if (st->nsegs == st->cap_segs) {
        size_t cap = st->cap_segs ? st->cap_segs * 2 : 64;
        struct ol_seg **n = realloc(st->segs, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        st->segs = n;
        st->cap_segs = cap;
    }
    bool found;
    size_t at = reg_find(st, seg->id, &found);
    OL_ASSERT(!found);
    memmove(st->segs + at + 1, st->segs + at, (st->nsegs - at) * sizeof(*st->segs));
    st->segs[at] = seg;
    st->nsegs++;
    return 0;
}

static int seg_check_header(struct ol_store *st, int fd, uint64_t id)
{
    uint8_t *blk = ol_aligned_alloc(OL_SEG_HDR_BYTES);
    if (!blk)
        return -ENOMEM;
    int rc = ol_pread_all(fd, blk, OL_SEG_HDR_BYTES, 0);
    if (rc == 0) {
        struct ol_seg_hdr h;
        memcpy(&h, blk, sizeof(h));
        uint32_t crc = h.crc;
        h.crc = 0;
        if (h.magic != OL_SEG_MAGIC || h.version != OL_SEG_VERSION || h.id != id ||
            h.hdr_bytes != OL_SEG_HDR_BYTES || ol_crc32c(&h, sizeof(h)) != crc ||
            memcmp(h.drive_id, st->fmt.drive_id, 16) != 0)
            rc = -OL_ECORRUPT;
    }
    ol_buf_free(blk, OL_SEG_HDR_BYTES);
    return rc;
}

/* Creates a new segment file with its header and makes its name durable. */
static int seg_create(struct ol_store *st, struct ol_seg **out)
{
    uint64_t id = atomic_fetch_add(&st->next_seg_id, 1);
    char name[32];
    seg_name(name, id);
    uint8_t *blk = NULL;
    int fd = seg_openat(st, name, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0)
        return fd;
    int rc;
    blk = ol_aligned_alloc(OL_SEG_HDR_BYTES);
    if (!blk) {
        rc = -ENOMEM;
        goto out;
    }
    memset(blk, 0, OL_SEG_HDR_BYTES);
    struct ol_seg_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = OL_SEG_MAGIC;
    h.version = OL_SEG_VERSION;
    h.hdr_bytes = OL_SEG_HDR_BYTES;
    h.id = id;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h.created_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    memcpy(h.drive_id, st->fmt.drive_id, 16);
    h.crc = ol_crc32c(&h, sizeof(h));
    memcpy(blk, &h, sizeof(h));
    /* A plain pwrite, not ol_io_pwrite: this runs inside a loop slot's
     * reservation, which must not yield to other fibers of the loop (they
     * would see the slot half-rolled). */
    ssize_t wn = pwrite(fd, blk, OL_SEG_HDR_BYTES, 0);
    if (wn != (ssize_t)OL_SEG_HDR_BYTES) {
        rc = wn < 0 ? -errno : -EIO;
        goto out;
    }
    /* The header becomes durable with the first data fdatasync; the directory
     * entry needs its own fsync, once per segment, so that a crash cannot
     * lose a file whose data was acknowledged. */
    if (fsync(st->seg_dir_fd) < 0) {
        rc = -errno;
        goto out;
    }
    struct ol_seg *seg = seg_alloc(id, fd, OL_SEG_HDR_BYTES);
    if (!seg) {
        rc = -ENOMEM;
        goto out;
    }
    pthread_mutex_lock(&st->reg_mu);
    rc = reg_insert(st, seg);
    pthread_mutex_unlock(&st->reg_mu);
    if (rc) {
        seg->fd = -1;
        seg_free(seg);
        goto out;
    }
    *out = seg;
out:
    ol_buf_free(blk, OL_SEG_HDR_BYTES);
    if (rc) {
        close(fd);
        unlinkat(st->seg_dir_fd, name, 0);
    }
    return rc;
}

int ol_seg_open_all(struct ol_store *st)
{
    int rc = 0;
    DIR *d = NULL;
    st->direct = true;
    atomic_init(&st->direct_logged, false);
    if (mkdirat(st->dir_fd, "seg", 0755) < 0 && errno != EEXIST)
        return -errno;
    st->seg_dir_fd = openat(st->dir_fd, "seg", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->seg_dir_fd < 0)
        return -errno;
    st->nslots = st->o.max_loops + 2;
    st->slots = calloc(st->nslots, sizeof(*st->slots));
    if (!st->slots)
        return -ENOMEM;
    for (unsigned i = 0; i < st->nslots; i++)
        pthread_mutex_init(&st->slots[i].mu, NULL);

    int dfd = dup(st->seg_dir_fd);
    if (dfd < 0)
        return -errno;
    d = fdopendir(dfd);
    if (!d) {
        rc = -errno;
        close(dfd);
        return rc;
    }
    uint64_t max_id = 0;
    for (unsigned n = 0; n < 100000000; n++) {
        struct dirent *de = readdir(d);
        if (!de)
            break;
        const char *nm = de->d_name;
        if (strlen(nm) != 20 || strcmp(nm + 16, ".seg") != 0)
            continue;
        char *end = NULL;
        uint64_t id = strtoull(nm, &end, 16);
        if (end != nm + 16)
            continue;
        int fd = seg_openat(st, nm, O_RDWR);
        if (fd < 0) {
            rc = fd;
            goto out;
        }
        struct stat sb;
        if (fstat(fd, &sb) < 0) {
            rc = -errno;
            close(fd);
            goto out;
        }
        if (sb.st_size < (off_t)OL_SEG_HDR_BYTES || seg_check_header(st, fd, id) != 0)
            ol_warn("store %s: segment %s has a damaged header", st->dir, nm);
        /* Every segment found at open is sealed: appends after a crash go to
         * new files, so a torn tail is never extended. */
        struct ol_seg *seg = seg_alloc(id, fd, ol_round_up((uint64_t)sb.st_size, OL_ALIGN));
        if (!seg) {
            close(fd);
            rc = -ENOMEM;
            goto out;
        }
        atomic_store(&seg->sealed, true);
        rc = reg_insert(st, seg);
        if (rc) {
            seg_free(seg);
            goto out;
        }
        if (id > max_id)
            max_id = id;
    }
    atomic_init(&st->next_seg_id, max_id + 1);
out:
    closedir(d);
    return rc;
}

void ol_seg_close_all(struct ol_store *st)
{
    for (unsigned i = 0; st->slots && i < st->nslots; i++) {
        if (st->slots[i].seg)
            atomic_fetch_sub(&st->slots[i].seg->refs, 1);
        st->slots[i].seg = NULL;
        pthread_mutex_destroy(&st->slots[i].mu);
    }
    free(st->slots);
    st->slots = NULL;
    for (size_t i = 0; i < st->nsegs; i++)
        seg_free(st->segs[i]);
    free(st->segs);
    st->segs = NULL;
    st->nsegs = 0;
    if (st->seg_dir_fd >= 0)
        close(st->seg_dir_fd);
    st->seg_dir_fd = -1;
}

unsigned ol_seg_slot_for_caller(const struct ol_store *st)
{
    struct ol_loop *loop = ol_loop_current();
    if (loop) {
        unsigned id = ol_loop_id(loop);
        if (id < st->o.max_loops)
            return id;
    }
    return st->o.max_loops;
}

unsigned ol_seg_slot_compactor(const struct ol_store *st)
{
    return st->o.max_loops + 1;
}

int ol_seg_reserve(struct ol_store *st, unsigned slot, uint64_t len, struct ol_seg **segp,
                   uint64_t *off)
{
    OL_ASSERT(slot < st->nslots);
    struct ol_slot *s = &st->slots[slot];
    /* Loop slots belong to their loop's thread, whose fibers interleave only
     * at I/O, so they need no lock; the others are shared by plain threads. */
    bool locked = slot >= st->o.max_loops;
    struct ol_seg *old = NULL;
    int rc = 0;
    uint64_t rlen = ol_round_up(len, OL_ALIGN);
    if (locked)
        pthread_mutex_lock(&s->mu);
    struct ol_seg *cur = s->seg;
    bool failed = false;
    if (cur) {
        pthread_mutex_lock(&cur->sync_mu);
        failed = cur->sync_err != 0;
        pthread_mutex_unlock(&cur->sync_mu);
    }
    if (!cur || failed || (cur->tail + rlen > st->o.segment_bytes && cur->tail > OL_SEG_HDR_BYTES)) {
        struct ol_seg *n = NULL;
        rc = seg_create(st, &n);
        if (rc)
            goto out;
        atomic_store(&n->refs, 1); /* the slot's reference */
        if (cur)
            atomic_store(&cur->sealed, true);
        old = cur;
        s->seg = n;
        cur = n;
    }
    *off = cur->tail;
    cur->tail += rlen;
    atomic_store(&cur->size, cur->tail);
    ol_seg_ref(cur);
    *segp = cur;
out:
    if (locked)
        pthread_mutex_unlock(&s->mu);
    if (old)
        ol_seg_unref(st, old);
    return rc;
}

struct ol_seg *ol_seg_get(struct ol_store *st, uint64_t id)
{
    struct ol_seg *seg = NULL;
    bool found;
    pthread_mutex_lock(&st->reg_mu);
    size_t at = reg_find(st, id, &found);
    if (found && !st->segs[at]->dead) {
        seg = st->segs[at];
        ol_seg_ref(seg);
    }
    pthread_mutex_unlock(&st->reg_mu);
    return seg;
}

void ol_seg_ref(struct ol_seg *seg)
{
    atomic_fetch_add(&seg->refs, 1);
}

void ol_seg_unref(struct ol_store *st, struct ol_seg *seg)
{
    /* Read sealed before dropping the reference: once it is dropped the
     * reaper may free seg.  A seal that races with this is caught by the
     * compactor's periodic reap. */
    bool sealed = atomic_load(&seg->sealed);
    unsigned prev = atomic_fetch_sub(&seg->refs, 1);
    OL_ASSERT(prev > 0);
    if (prev == 1 && sealed)
        ol_compact_kick_reap(st);
}

int ol_seg_sync(struct ol_seg *seg)
{
    struct ol_sync_waiter w;
    pthread_mutex_lock(&seg->sync_mu);
    if (seg->sync_err) {
        int err = seg->sync_err;
        pthread_mutex_unlock(&seg->sync_mu);
        return err;
    }
    if (seg->syncing) {
        /* A sync is running, but it may have started before our writes
         * finished: we need the next one.  Whoever finishes the running one
         * either covers us (we are not waiting for a later gen) or hands the
         * next sync to the first waiter. */
        w.gen = seg->gen_started + 1;
        w.next = NULL;
        ol_completion_init(&w.c);
        struct ol_sync_waiter **pp = &seg->waiters;
        while (*pp)
            pp = &(*pp)->next;
        *pp = &w;
        pthread_mutex_unlock(&seg->sync_mu);
        int r = ol_completion_wait(&w.c);
        if (r != OL_SYNC_HANDOFF)
            return r;
        pthread_mutex_lock(&seg->sync_mu);
    } else {
        seg->syncing = true;
    }
    uint64_t g = ++seg->gen_started;
    pthread_mutex_unlock(&seg->sync_mu);

    int rc = ol_io_fdatasync(seg->fd);

    pthread_mutex_lock(&seg->sync_mu);
    if (rc) {
        /* After a failed fdatasync the kernel may have dropped the dirty
         * pages, so a later "successful" sync proves nothing: fail forever. */
        ol_error("store: fdatasync of segment %016" PRIx64 " failed: %s", seg->id,
                 ol_strerror(rc));
        seg->sync_err = rc;
    }
    seg->gen_done = g;
    struct ol_sync_waiter *done = NULL, **dt = &done;
    while (seg->waiters && seg->waiters->gen <= g) {
        struct ol_sync_waiter *x = seg->waiters;
        seg->waiters = x->next;
        x->next = NULL;
        *dt = x;
        dt = &x->next;
    }
    struct ol_sync_waiter *handoff = seg->waiters;
    if (handoff)
        seg->waiters = handoff->next;
    else
        seg->syncing = false;
    pthread_mutex_unlock(&seg->sync_mu);
    for (int i = 0; done && i < 1000000; i++) {
        struct ol_sync_waiter *next = done->next; /* done's memory ends at the signal */
        ol_completion_signal(&done->c, rc);
        done = next;
    }
    if (handoff)
        ol_completion_signal(&handoff->c, OL_SYNC_HANDOFF);
    return rc;
}

static bool seg_has_live(MDB_txn *txn, struct ol_store *st, uint64_t id)
{
    uint64_t written, live;
    int rc = ol_idx_seg_get(txn, st->db_segs, id, &written, &live);
    /* Anything but a clean "no record" keeps the file: unlinking is the one
     * step here that cannot be undone. */
    return rc != -OL_ENOKEY;
}

void ol_seg_reap_all(struct ol_store *st)
{
    MDB_txn *txn = NULL;
    if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) != 0)
        return;
    struct ol_seg *kill[64];
    size_t nkill = 0;
    pthread_mutex_lock(&st->reg_mu);
    for (size_t i = 0; i < st->nsegs && nkill < 64;) {
        struct ol_seg *seg = st->segs[i];
        if (seg->dead || !atomic_load(&seg->sealed) || atomic_load(&seg->refs) != 0 ||
            seg_has_live(txn, st, seg->id)) {
            i++;
            continue;
        }
        seg->dead = true;
        memmove(st->segs + i, st->segs + i + 1, (st->nsegs - i - 1) * sizeof(*st->segs));
        st->nsegs--;
        kill[nkill++] = seg;
    }
    pthread_mutex_unlock(&st->reg_mu);
    mdb_txn_abort(txn);
    for (size_t i = 0; i < nkill; i++) {
        char name[32];
        seg_name(name, kill[i]->id);
        if (unlinkat(st->seg_dir_fd, name, 0) < 0)
            ol_warn("store %s: unlink %s: %s", st->dir, name, ol_strerror(-errno));
        else
            ol_debug("store %s: removed empty segment %s", st->dir, name);
        seg_free(kill[i]);
    }
    /* A full batch means there may be more; the next pass takes them. */
    if (nkill == 64)
        ol_compact_kick_reap(st);
}
