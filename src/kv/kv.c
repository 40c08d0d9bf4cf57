/* The KV-cache store (kv/kv.h): sharded index, memory and disk LRU tiers,
 * pins, spill files. */
#include "kv/kv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crc.h"
#include "core/log.h"

enum {
    KV_FILE_MAGIC = 0x424b4c4fu, /* the bytes "OLKB" */
    KV_FILE_VERSION = 1,
    /* An evictor looks this far up from a list's tail for an entry that is
     * not pinned before it gives the shard up. */
    WALK_MAX = 64,
    /* Most entries one reservation evicts (a bound, not a tuning). */
    EVICT_MAX = 1 << 20,
    /* Most directory entries looked at when clearing the spill directory. */
    SCAN_MAX = 1 << 24,
    BUCKETS0 = 64,
};

/* A spill file's header (docs/FORMAT.md, "KV-cache spill files"); the
 * block's bytes follow it. */
struct kv_file_hdr {
    uint32_t magic;   /* KV_FILE_MAGIC */
    uint16_t version; /* KV_FILE_VERSION */
    uint16_t key_len;
    uint32_t value_crc; /* CRC32C of the block */
    uint32_t reserved0;
    uint64_t value_len;
    uint64_t seq; /* the file's number (its name) */
    uint8_t key[OL_KV_MAX_KEY];
    uint8_t reserved[92];
    uint32_t hdr_crc; /* CRC32C of the bytes before it */
};
_Static_assert(sizeof(struct kv_file_hdr) == OL_KV_FILE_HDR_BYTES, "a spill header is 256 bytes");
_Static_assert(offsetof(struct kv_file_hdr, key) == 32 &&
                   offsetof(struct kv_file_hdr, hdr_crc) == 252,
               "the spill header's layout (docs/FORMAT.md)");

/* A block's bytes, shared by the index and the readers copying them. */
struct blob {
    atomic_uint refs;
    uint32_t len;
    uint8_t data[];
};

struct entry {
    struct entry *hnext;         /* hash chain */
    struct entry *mprev, *mnext; /* memory LRU (head: newest) */
    struct entry *dprev, *dnext; /* disk LRU */
    struct blob *blob;           /* NULL: not in memory */
    uint64_t h;
    uint64_t tick; /* last use; orders both lists */
    uint64_t seq;  /* spill file; 0: not on disk */
    uint64_t lease_until_ms;
    uint32_t len, crc;
    uint32_t pins;
    bool spilling; /* being written to disk: out of the memory list, not freed by others */
    bool in_mem, in_disk;
    uint8_t klen;
    uint8_t key[];
};

struct shard {
    pthread_mutex_t mu;
    struct entry **tab;
    size_t mask, n;
    struct entry *mhead, *mtail, *dhead, *dtail;
};

enum {
    ST_PUTS, ST_STORED, ST_DEDUP, ST_PUTB, ST_REFUSED,
    ST_GETS, ST_MHIT, ST_MMISS, ST_DHIT, ST_DMISS, ST_GETB,
    ST_LOOKUPS, ST_LOOKUP_HITS,
    ST_EVICT, ST_SPILL, ST_SPILLB, ST_SPILL_ERR, ST_DDROP, ST_PROMOTE, ST_CORRUPT,
    ST_PINS, ST_RELEASES,
    ST_N
};

struct tier {
    uint64_t cap, high, low;
    atomic_uint_fast64_t used, entries;
    pthread_mutex_t evict_mu;
};

struct ol_kv {
    struct ol_kv_opts o;
    char dir[PATH_MAX];
    int dirfd; /* -1: no disk tier */
    struct tier mem, disk;
    atomic_uint_fast64_t tick, seq;
    atomic_uint_fast64_t st[ST_N];
    struct shard shards[OL_KV_SHARDS];
};

static void count(struct ol_kv *kv, unsigned i, uint64_t n)
{
    atomic_fetch_add_explicit(&kv->st[i], n, memory_order_relaxed);
}

/* FNV-1a with a final mix: opaque keys need not be uniform (canonical ones
 * are); the top bits pick the shard, the low ones the bucket. */
static uint64_t key_hash(const uint8_t *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static struct shard *shard_of(struct ol_kv *kv, uint64_t h)
{
    return &kv->shards[h >> 58 & (OL_KV_SHARDS - 1)];
}
_Static_assert(OL_KV_SHARDS <= 64 && (OL_KV_SHARDS & (OL_KV_SHARDS - 1)) == 0,
               "shards: a power of two picked by the hash's top 6 bits");

/* ---- blobs ---- */

static struct blob *blob_new(size_t len)
{
    struct blob *b = malloc(sizeof(*b) + len);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = (uint32_t)len;
    return b;
}

static void blob_ref(struct blob *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

static void blob_unref(struct blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

/* ---- the index (shard lock held) ---- */

static struct entry *find(struct shard *s, uint64_t h, const uint8_t *k, size_t n)
{
    for (struct entry *e = s->tab[h & s->mask]; e; e = e->hnext)
        if (e->h == h && e->klen == n && memcmp(e->key, k, n) == 0)
            return e;
    return NULL;
}

static void grow(struct shard *s)
{
    size_t nb = (s->mask + 1) * 2;
    struct entry **t = calloc(nb, sizeof(*t));
    if (!t)
        return; /* longer chains, still correct */
    for (size_t i = 0; i <= s->mask; i++) {
        struct entry *e = s->tab[i];
        while (e) {
            struct entry *nx = e->hnext;
            e->hnext = t[e->h & (nb - 1)];
            t[e->h & (nb - 1)] = e;
            e = nx;
        }
    }
    free(s->tab);
    s->tab = t;
    s->mask = nb - 1;
}

static void hash_insert(struct shard *s, struct entry *e)
{
    if (s->n >= s->mask + 1)
        grow(s);
    e->hnext = s->tab[e->h & s->mask];
    s->tab[e->h & s->mask] = e;
    s->n++;
}

static void hash_remove(struct shard *s, struct entry *e)
{
    struct entry **pp = &s->tab[e->h & s->mask];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    OL_ASSERT(*pp == e);
    *pp = e->hnext;
    s->n--;
}

static void mem_unlink(struct shard *s, struct entry *e)
{
    if (!e->in_mem)
        return;
    if (e->mprev)
        e->mprev->mnext = e->mnext;
    else
        s->mhead = e->mnext;
    if (e->mnext)
        e->mnext->mprev = e->mprev;
    else
        s->mtail = e->mprev;
    e->mprev = e->mnext = NULL;
    e->in_mem = false;
}

static void mem_push(struct shard *s, struct entry *e)
{
    e->mprev = NULL;
    e->mnext = s->mhead;
    if (s->mhead)
        s->mhead->mprev = e;
    else
        s->mtail = e;
    s->mhead = e;
    e->in_mem = true;
}

static void disk_unlink(struct shard *s, struct entry *e)
{
    if (!e->in_disk)
        return;
    if (e->dprev)
        e->dprev->dnext = e->dnext;
    else
        s->dhead = e->dnext;
    if (e->dnext)
        e->dnext->dprev = e->dprev;
    else
        s->dtail = e->dprev;
    e->dprev = e->dnext = NULL;
    e->in_disk = false;
}

static void disk_push(struct shard *s, struct entry *e)
{
    e->dprev = NULL;
    e->dnext = s->dhead;
    if (s->dhead)
        s->dhead->dprev = e;
    else
        s->dtail = e;
    s->dhead = e;
    e->in_disk = true;
}

/* A use: the newest tick, the head of the lists the entry is in (the tick
 * is taken under the shard lock, so each list stays in tick order). */
static void touch(struct ol_kv *kv, struct shard *s, struct entry *e)
{
    e->tick = atomic_fetch_add(&kv->tick, 1) + 1;
    if (e->in_mem) {
        mem_unlink(s, e);
        mem_push(s, e);
    }
    if (e->in_disk) {
        disk_unlink(s, e);
        disk_push(s, e);
    }
}

static bool evictable(const struct entry *e, uint64_t now_ms)
{
    return !e->spilling && (e->pins == 0 || now_ms >= e->lease_until_ms);
}

/* Removes an entry that is in neither tier any more (no blob, no file). */
static void entry_free(struct shard *s, struct entry *e)
{
    OL_ASSERT(!e->blob && !e->seq && !e->spilling && !e->in_mem && !e->in_disk);
    hash_remove(s, e);
    free(e);
}

/* ---- spill files ---- */

static void file_name(char name[32], uint64_t seq)
{
    snprintf(name, 32, "%016" PRIx64 ".kvb", seq);
}

static void file_unlink(struct ol_kv *kv, uint64_t seq)
{
    char name[32];
    file_name(name, seq);
    (void)unlinkat(kv->dirfd, name, 0);
}

static int file_write(struct ol_kv *kv, uint64_t seq, const uint8_t *k, size_t kn,
                      const struct blob *b, uint32_t crc)
{
    struct kv_file_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = KV_FILE_MAGIC;
    h.version = KV_FILE_VERSION;
    h.key_len = (uint16_t)kn;
    h.value_crc = crc;
    h.value_len = b->len;
    h.seq = seq;
    memcpy(h.key, k, kn);
    h.hdr_crc = ol_crc32c(&h, offsetof(struct kv_file_hdr, hdr_crc));
    char name[32];
    file_name(name, seq);
    int fd = openat(kv->dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)b->data, b->len}};
    size_t want = sizeof(h) + b->len, done = 0;
    int rc = 0;
    for (unsigned i = 0; i < 1000 && done < want; i++) {
        ssize_t w = done < sizeof(h) ? pwritev(fd, iov, 2, 0)
                                     : pwrite(fd, b->data + (done - sizeof(h)),
                                              want - done, (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = w < 0 ? -errno : -EIO;
            break;
        }
        if (done < sizeof(h) && (size_t)w < sizeof(h)) {
            rc = -EIO; /* a header cut short: give up rather than patch iovecs */
            break;
        }
        done += (size_t)w;
    }
    if (rc == 0 && done != want)
        rc = -EIO;
    close(fd);
    if (rc < 0)
        (void)unlinkat(kv->dirfd, name, 0);
    return rc;
}

/* Reads the block of file seq into dst and checks it all: 0, -ENOENT (the
 * file is gone: dropped meanwhile), -EIO (anything does not match). */
static int file_read(struct ol_kv *kv, uint64_t seq, const uint8_t *k, size_t kn, uint32_t len,
                     uint32_t crc, uint8_t *dst)
{
    char name[32];
    file_name(name, seq);
    int fd = openat(kv->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : -EIO;
    struct kv_file_hdr h;
    int rc = 0;
    if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != KV_FILE_MAGIC ||
        h.version != KV_FILE_VERSION ||
        h.hdr_crc != ol_crc32c(&h, offsetof(struct kv_file_hdr, hdr_crc)) || h.seq != seq ||
        h.key_len != kn || memcmp(h.key, k, kn) != 0 || h.value_len != len || h.value_crc != crc)
        rc = -EIO;
    size_t got = 0;
    for (unsigned i = 0; rc == 0 && got < len && i < 100000; i++) {
        ssize_t r = pread(fd, dst + got, len - got, (off_t)(sizeof(h) + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = -EIO;
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc == 0 && (got != len || ol_crc32c(dst, len) != crc))
        rc = -EIO;
    return rc;
}

/* ---- eviction ---- */

static uint64_t now_ms(void)
{
    return ol_mono_ms();
}

/* The first evictable entry from a list's tail (up to WALK_MAX), or NULL. */
static struct entry *victim(struct shard *s, bool disk, uint64_t now)
{
    struct entry *e = disk ? s->dtail : s->mtail;
    for (unsigned i = 0; e && i < WALK_MAX; i++, e = disk ? e->dprev : e->mprev)
        if (evictable(e, now))
            return e;
    return NULL;
}

/* The shard holding the oldest evictable entry of a tier, or -1. */
static int oldest_shard(struct ol_kv *kv, bool disk, uint64_t now)
{
    int best = -1;
    uint64_t best_tick = UINT64_MAX;
    for (int i = 0; i < OL_KV_SHARDS; i++) {
        struct shard *s = &kv->shards[i];
        pthread_mutex_lock(&s->mu);
        struct entry *e = victim(s, disk, now);
        if (e && e->tick < best_tick) {
            best_tick = e->tick;
            best = i;
        }
        pthread_mutex_unlock(&s->mu);
    }
    return best;
}

static int tier_reserve(struct ol_kv *kv, bool disk, uint64_t charge);

static void tier_unreserve(struct tier *t, uint64_t charge)
{
    atomic_fetch_sub(&t->used, charge);
}

/* Drops the oldest evictable disk copy: false when there is none (disk
 * evictor's mutex held). */
static bool disk_evict_one(struct ol_kv *kv)
{
    uint64_t now = now_ms();
    int i = oldest_shard(kv, true, now);
    if (i < 0)
        return false;
    struct shard *s = &kv->shards[i];
    pthread_mutex_lock(&s->mu);
    struct entry *e = victim(s, true, now);
    uint64_t seq = 0;
    if (e) {
        seq = e->seq;
        disk_unlink(s, e);
        e->seq = 0;
        tier_unreserve(&kv->disk, OL_KV_DISK_CHARGE(e->len));
        atomic_fetch_sub(&kv->disk.entries, 1);
        if (!e->blob && !e->spilling)
            entry_free(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    if (!e)
        return true; /* it moved meanwhile: look again */
    file_unlink(kv, seq);
    count(kv, ST_DDROP, 1);
    return true;
}

/* Evicts the oldest evictable block from memory, spilling it when there is
 * a disk tier and it has no file yet: false when there is none (memory
 * evictor's mutex held). */
static bool mem_evict_one(struct ol_kv *kv)
{
    uint64_t now = now_ms();
    int i = oldest_shard(kv, false, now);
    if (i < 0)
        return false;
    struct shard *s = &kv->shards[i];
    pthread_mutex_lock(&s->mu);
    struct entry *e = victim(s, false, now);
    if (!e) {
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    struct blob *b = e->blob;
    uint64_t charge = OL_KV_MEM_CHARGE(e->len);
    mem_unlink(s, e);
    if (e->seq || kv->dirfd < 0) {
        /* Its file already holds it, or there is nowhere to spill. */
        e->blob = NULL;
        if (!e->seq)
            entry_free(s, e);
        pthread_mutex_unlock(&s->mu);
        tier_unreserve(&kv->mem, charge);
        atomic_fetch_sub(&kv->mem.entries, 1);
        count(kv, ST_EVICT, 1);
        blob_unref(b);
        return true;
    }
    /* Spill: the entry stays readable from memory while its file is
     * written, and nobody else frees a spilling entry. */
    e->spilling = true;
    blob_ref(b);
    uint8_t key[OL_KV_MAX_KEY];
    size_t kn = e->klen;
    memcpy(key, e->key, kn);
    uint32_t crc = e->crc;
    pthread_mutex_unlock(&s->mu);

    uint64_t dcharge = OL_KV_DISK_CHARGE(b->len);
    uint64_t seq = 0;
    int rc = tier_reserve(kv, true, dcharge);
    if (rc == 0) {
        seq = atomic_fetch_add(&kv->seq, 1) + 1;
        rc = file_write(kv, seq, key, kn, b, crc);
        if (rc < 0) {
            tier_unreserve(&kv->disk, dcharge);
            ol_warn("kv: cannot spill to %s: %s", kv->dir, strerror(-rc));
        }
    }
    pthread_mutex_lock(&s->mu);
    e->spilling = false;
    e->blob = NULL;
    if (rc == 0) {
        e->seq = seq;
        e->tick = atomic_fetch_add(&kv->tick, 1) + 1;
        disk_push(s, e);
        atomic_fetch_add(&kv->disk.entries, 1);
    } else {
        entry_free(s, e); /* no room on disk (all pinned) or no write: a miss */
    }
    pthread_mutex_unlock(&s->mu);
    tier_unreserve(&kv->mem, charge);
    atomic_fetch_sub(&kv->mem.entries, 1);
    count(kv, ST_EVICT, 1);
    if (rc == 0) {
        count(kv, ST_SPILL, 1);
        count(kv, ST_SPILLB, b->len);
    } else {
        count(kv, ST_SPILL_ERR, 1);
    }
    blob_unref(b); /* ours */
    blob_unref(b); /* the entry's */
    return true;
}

/* Charges a tier, evicting past its high watermark down to the low one:
 * 0, -E2BIG (larger than the tier), -ENOSPC (no room could be freed). */
static int tier_reserve(struct ol_kv *kv, bool disk, uint64_t charge)
{
    struct tier *t = disk ? &kv->disk : &kv->mem;
    if (charge > t->cap)
        return -E2BIG;
    uint64_t used = atomic_fetch_add(&t->used, charge) + charge;
    if (used <= t->high)
        return 0;
    pthread_mutex_lock(&t->evict_mu);
    for (unsigned i = 0; i < EVICT_MAX && atomic_load(&t->used) > t->low; i++)
        if (!(disk ? disk_evict_one(kv) : mem_evict_one(kv)))
            break;
    pthread_mutex_unlock(&t->evict_mu);
    if (atomic_load(&t->used) > t->cap) {
        tier_unreserve(t, charge);
        return -ENOSPC;
    }
    return 0;
}

/* ---- the API ---- */

static bool key_ok(const void *key, size_t n)
{
    return key && n >= 1 && n <= OL_KV_MAX_KEY;
}

int ol_kv_put(struct ol_kv *kv, const void *key, size_t key_len, const void *data, size_t len)
{
    if (!key_ok(key, key_len) || (!data && len))
        return -EINVAL;
    count(kv, ST_PUTS, 1);
    if (len > OL_KV_MAX_VALUE) {
        count(kv, ST_REFUSED, 1);
        return -E2BIG;
    }
    uint64_t h = key_hash(key, key_len);
    struct shard *s = shard_of(kv, h);
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, key, key_len);
    if (e)
        touch(kv, s, e);
    pthread_mutex_unlock(&s->mu);
    if (e) {
        count(kv, ST_DEDUP, 1);
        return 1;
    }
    uint64_t charge = OL_KV_MEM_CHARGE(len);
    int rc = tier_reserve(kv, false, charge);
    if (rc < 0) {
        count(kv, ST_REFUSED, 1);
        return rc;
    }
    struct blob *b = blob_new(len);
    struct entry *n = malloc(sizeof(*n) + key_len);
    if (!b || !n) {
        free(b);
        free(n);
        tier_unreserve(&kv->mem, charge);
        count(kv, ST_REFUSED, 1);
        return -ENOMEM;
    }
    if (len)
        memcpy(b->data, data, len);
    memset(n, 0, sizeof(*n));
    n->blob = b;
    n->h = h;
    n->len = (uint32_t)len;
    n->crc = ol_crc32c(b->data, len);
    n->klen = (uint8_t)key_len;
    memcpy(n->key, key, key_len);
    pthread_mutex_lock(&s->mu);
    e = find(s, h, key, key_len);
    if (e) {
        touch(kv, s, e); /* another put of the same key won the race */
    } else {
        hash_insert(s, n);
        n->tick = atomic_fetch_add(&kv->tick, 1) + 1;
        mem_push(s, n);
    }
    pthread_mutex_unlock(&s->mu);
    if (e) {
        blob_unref(b);
        free(n);
        tier_unreserve(&kv->mem, charge);
        count(kv, ST_DEDUP, 1);
        return 1;
    }
    atomic_fetch_add(&kv->mem.entries, 1);
    count(kv, ST_STORED, 1);
    count(kv, ST_PUTB, len);
    return 0;
}

/* A block that failed its check: its memory copy (blob b) or its file (seq)
 * leaves the index, if the entry still holds that copy. */
static void drop_bad(struct ol_kv *kv, uint64_t h, const uint8_t *k, size_t kn,
                     const struct blob *b, uint64_t seq)
{
    struct shard *s = shard_of(kv, h);
    struct blob *freed = NULL;
    bool unlink_file = false;
    uint32_t len = 0;
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, k, kn);
    if (e && !e->spilling) {
        len = e->len;
        if (b && e->blob == b) {
            mem_unlink(s, e);
            freed = e->blob;
            e->blob = NULL;
        }
        if (seq && e->seq == seq) {
            disk_unlink(s, e);
            e->seq = 0;
            unlink_file = true;
        }
        if (!e->blob && !e->seq)
            entry_free(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    if (freed) {
        tier_unreserve(&kv->mem, OL_KV_MEM_CHARGE(len));
        atomic_fetch_sub(&kv->mem.entries, 1);
        blob_unref(freed);
    }
    if (unlink_file) {
        tier_unreserve(&kv->disk, OL_KV_DISK_CHARGE(len));
        atomic_fetch_sub(&kv->disk.entries, 1);
        file_unlink(kv, seq);
    }
    count(kv, ST_CORRUPT, 1);
}

/* A disk hit goes back to memory (keeping its file), room permitting. */
static void promote(struct ol_kv *kv, uint64_t h, const uint8_t *k, size_t kn, uint64_t seq,
                    const uint8_t *bytes, uint32_t len)
{
    uint64_t charge = OL_KV_MEM_CHARGE(len);
    if (tier_reserve(kv, false, charge) < 0)
        return;
    struct blob *b = blob_new(len);
    if (!b) {
        tier_unreserve(&kv->mem, charge);
        return;
    }
    memcpy(b->data, bytes, len);
    struct shard *s = shard_of(kv, h);
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, k, kn);
    bool ok = e && e->seq == seq && !e->blob && !e->spilling;
    if (ok) {
        e->blob = b;
        mem_push(s, e);
        touch(kv, s, e);
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        blob_unref(b);
        tier_unreserve(&kv->mem, charge);
        return;
    }
    atomic_fetch_add(&kv->mem.entries, 1);
    count(kv, ST_PROMOTE, 1);
}

int ol_kv_get(struct ol_kv *kv, const void *key, size_t key_len, void *dst, size_t cap,
              uint64_t *size)
{
    *size = 0;
    if (!key_ok(key, key_len) || (!dst && cap))
        return -EINVAL;
    count(kv, ST_GETS, 1);
    uint64_t h = key_hash(key, key_len);
    struct shard *s = shard_of(kv, h);
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, key, key_len);
    if (!e) {
        pthread_mutex_unlock(&s->mu);
        count(kv, ST_MMISS, 1);
        if (kv->dirfd >= 0)
            count(kv, ST_DMISS, 1);
        return -ENOENT;
    }
    uint32_t len = e->len, crc = e->crc;
    *size = len;
    if (len > cap) {
        pthread_mutex_unlock(&s->mu);
        return -EMSGSIZE;
    }
    struct blob *b = e->blob;
    uint64_t seq = e->seq;
    OL_ASSERT(b || seq); /* an indexed block is in a tier */
    if (b)
        blob_ref(b);
    touch(kv, s, e);
    pthread_mutex_unlock(&s->mu);

    if (b) {
        OL_ASSERT(b->len == len);
        if (len)
            memcpy(dst, b->data, len);
        /* Checked on the bytes handed out, not on the buffer. */
        bool good = ol_crc32c(dst, len) == crc;
        if (!good)
            drop_bad(kv, h, key, key_len, b, 0);
        blob_unref(b);
        if (!good) {
            count(kv, ST_MMISS, 1);
            return -ENOENT;
        }
        count(kv, ST_MHIT, 1);
        count(kv, ST_GETB, len);
        return 0;
    }
    count(kv, ST_MMISS, 1);
    int rc = file_read(kv, seq, key, key_len, len, crc, dst);
    if (rc == -EIO)
        drop_bad(kv, h, key, key_len, NULL, seq);
    if (rc < 0) {
        count(kv, ST_DMISS, 1);
        return -ENOENT;
    }
    count(kv, ST_DHIT, 1);
    count(kv, ST_GETB, len);
    if (!kv->o.no_promote)
        promote(kv, h, key, key_len, seq, dst, len);
    return 0;
}

int ol_kv_contains(struct ol_kv *kv, const void *key, size_t key_len, uint32_t lease_ms)
{
    if (!key_ok(key, key_len))
        return -EINVAL;
    count(kv, ST_LOOKUPS, 1);
    if (lease_ms > OL_KV_MAX_LEASE_MS)
        lease_ms = OL_KV_MAX_LEASE_MS;
    uint64_t h = key_hash(key, key_len);
    struct shard *s = shard_of(kv, h);
    uint64_t now = lease_ms ? now_ms() : 0;
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, key, key_len);
    if (e) {
        touch(kv, s, e);
        if (lease_ms) {
            if (e->pins && now >= e->lease_until_ms)
                e->pins = 0; /* the last lease ran out */
            if (e->pins < UINT32_MAX)
                e->pins++;
            if (now + lease_ms > e->lease_until_ms)
                e->lease_until_ms = now + lease_ms;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!e)
        return 0;
    count(kv, ST_LOOKUP_HITS, 1);
    if (lease_ms)
        count(kv, ST_PINS, 1);
    return 1;
}

int ol_kv_release(struct ol_kv *kv, const void *key, size_t key_len)
{
    if (!key_ok(key, key_len))
        return -EINVAL;
    uint64_t h = key_hash(key, key_len);
    struct shard *s = shard_of(kv, h);
    uint64_t now = now_ms();
    int rc = -ENOENT;
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, h, key, key_len);
    if (e && e->pins && now < e->lease_until_ms) {
        e->pins--;
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        count(kv, ST_RELEASES, 1);
    return rc;
}

void ol_kv_stats(struct ol_kv *kv, struct ol_kv_stats *o)
{
#define L(i) atomic_load_explicit(&kv->st[i], memory_order_relaxed)
    *o = (struct ol_kv_stats){
        .puts = L(ST_PUTS),
        .stored = L(ST_STORED),
        .dedup = L(ST_DEDUP),
        .put_bytes = L(ST_PUTB),
        .put_refused = L(ST_REFUSED),
        .gets = L(ST_GETS),
        .mem_hits = L(ST_MHIT),
        .mem_misses = L(ST_MMISS),
        .disk_hits = L(ST_DHIT),
        .disk_misses = L(ST_DMISS),
        .get_bytes = L(ST_GETB),
        .lookups = L(ST_LOOKUPS),
        .lookup_hits = L(ST_LOOKUP_HITS),
        .evictions = L(ST_EVICT),
        .spills = L(ST_SPILL),
        .spill_bytes = L(ST_SPILLB),
        .spill_errors = L(ST_SPILL_ERR),
        .disk_drops = L(ST_DDROP),
        .promotions = L(ST_PROMOTE),
        .corrupt = L(ST_CORRUPT),
        .pins = L(ST_PINS),
        .releases = L(ST_RELEASES),
        .mem_entries = atomic_load(&kv->mem.entries),
        .mem_bytes = atomic_load(&kv->mem.used),
        .mem_capacity = kv->mem.cap,
        .disk_entries = atomic_load(&kv->disk.entries),
        .disk_bytes = atomic_load(&kv->disk.used),
        .disk_capacity = kv->disk.cap,
    };
#undef L
}

/* ---- life ---- */

/* mkdir -p. */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(p))
        return -EINVAL;
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0)
            continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -errno;
        p[i] = c;
    }
    return 0;
}

/* Removes the spill files (NNNNNNNNNNNNNNNN.kvb) in the directory. */
static void clear_dir(int dirfd)
{
    int fd = dup(dirfd);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    rewinddir(d); /* the dup shares the offset a previous scan left at the end */
    for (unsigned i = 0; i < SCAN_MAX; i++) {
        struct dirent *de = readdir(d);
        if (!de)
            break;
        const char *nm = de->d_name;
        if (strlen(nm) == 20 && strcmp(nm + 16, ".kvb") == 0 &&
            strspn(nm, "0123456789abcdef") == 16)
            (void)unlinkat(dirfd, nm, 0);
    }
    closedir(d);
}

static void tier_init(struct tier *t, uint64_t cap, unsigned high, unsigned low)
{
    t->cap = cap;
    t->high = cap / 100 * high + cap % 100 * high / 100;
    t->low = cap / 100 * low + cap % 100 * low / 100;
    atomic_init(&t->used, 0);
    atomic_init(&t->entries, 0);
    pthread_mutex_init(&t->evict_mu, NULL);
}

int ol_kv_create(const struct ol_kv_opts *o, struct ol_kv **out)
{
    unsigned high = o->high_pct ? o->high_pct : 95, low = o->low_pct ? o->low_pct : 85;
    if (!o->high_pct && o->low_pct)
        high = 100;
    if (o->memory_bytes == 0 || low == 0 || low > high || high > 100 ||
        (o->disk_bytes && (!o->dir || !o->dir[0])))
        return -EINVAL;
    struct ol_kv *kv = calloc(1, sizeof(*kv));
    if (!kv)
        return -ENOMEM;
    kv->o = *o;
    kv->o.dir = NULL;
    kv->dirfd = -1;
    int rc = 0;
    if (o->disk_bytes) {
        if (strlen(o->dir) >= sizeof(kv->dir)) {
            free(kv);
            return -ENAMETOOLONG;
        }
        snprintf(kv->dir, sizeof(kv->dir), "%s", o->dir);
        if ((rc = make_dirs(kv->dir)) < 0) {
            free(kv);
            return rc;
        }
        kv->dirfd = open(kv->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (kv->dirfd < 0) {
            rc = -errno;
            free(kv);
            return rc;
        }
        clear_dir(kv->dirfd);
    }
    tier_init(&kv->mem, o->memory_bytes, high, low);
    tier_init(&kv->disk, o->disk_bytes, high, low);
    for (int i = 0; i < OL_KV_SHARDS; i++) {
        struct shard *s = &kv->shards[i];
        pthread_mutex_init(&s->mu, NULL);
        s->tab = calloc(BUCKETS0, sizeof(*s->tab));
        s->mask = BUCKETS0 - 1;
        if (!s->tab)
            rc = -ENOMEM;
    }
    if (rc < 0) {
        ol_kv_destroy(kv);
        return rc;
    }
    *out = kv;
    return 0;
}

void ol_kv_destroy(struct ol_kv *kv)
{
    if (!kv)
        return;
    for (int i = 0; i < OL_KV_SHARDS; i++) {
        struct shard *s = &kv->shards[i];
        for (size_t j = 0; s->tab && j <= s->mask; j++) {
            struct entry *e = s->tab[j];
            while (e) {
                struct entry *nx = e->hnext;
                blob_unref(e->blob);
                free(e);
                e = nx;
            }
        }
        free(s->tab);
        pthread_mutex_destroy(&s->mu);
    }
    if (kv->dirfd >= 0) {
        clear_dir(kv->dirfd);
        close(kv->dirfd);
    }
    pthread_mutex_destroy(&kv->mem.evict_mu);
    pthread_mutex_destroy(&kv->disk.evict_mu);
    free(kv);
}
