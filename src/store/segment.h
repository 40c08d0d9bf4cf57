/* Segment files: append-only data files of a drive, their registry, the
 * per-loop active slots and coalesced fdatasync.  Internal to src/store. */
#ifndef OL_STORE_SEGMENT_H
#define OL_STORE_SEGMENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_store;
struct ol_sync_waiter;

/* ---- segments (segment.c) ---- */

#define OL_SEG_MAGIC 0x31475353u /* "SSG1" */
#define OL_SEG_VERSION 1u
#define OL_SEG_HDR_BYTES 4096u

struct ol_seg_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t hdr_bytes; /* 4096: the first extent starts here */
    uint64_t id;
    int64_t created_ns;
    uint8_t drive_id[16];
    uint8_t reserved[20];
    uint32_t crc; /* CRC32C of these 64 bytes with this field 0 */
};
_Static_assert(sizeof(struct ol_seg_hdr) == 64, "segment header struct is 64 bytes");

struct ol_seg {
    uint64_t id;
    int fd;
    _Atomic int rfd;        /* buffered read-only fd, opened by the first reader (store.c) */
    /* read-only mapping of the file for zero-copy reads (segmap.c), made by
     * the first such reader, and its length */
    _Atomic(const uint8_t *) map;
    _Atomic uint64_t map_len;
    atomic_uint refs;
    atomic_bool sealed;
    bool dead;              /* removed from the registry (reg_mu) */
    _Atomic uint64_t size;  /* bytes of the file, reserved or written */
    uint64_t tail;          /* next free offset; the owning slot only */
    pthread_mutex_t sync_mu;
    uint64_t gen_started, gen_done;
    bool syncing;
    int sync_err;           /* sticky: a failed fdatasync fails every later one */
    struct ol_sync_waiter *waiters;
};

int ol_seg_open_all(struct ol_store *st);
void ol_seg_close_all(struct ol_store *st);
/* Reserves len bytes (rounded up to 4096) in the caller's active segment,
 * rolling to a new one when full.  Returns a referenced segment. */
int ol_seg_reserve(struct ol_store *st, unsigned slot, uint64_t len, struct ol_seg **seg,
                   uint64_t *off);
unsigned ol_seg_slot_for_caller(const struct ol_store *st);
unsigned ol_seg_slot_compactor(const struct ol_store *st);
/* Looks a segment up by id and references it; NULL if it is gone. */
struct ol_seg *ol_seg_get(struct ol_store *st, uint64_t id);
void ol_seg_ref(struct ol_seg *seg);
void ol_seg_unref(struct ol_store *st, struct ol_seg *seg);
/* Makes everything written to seg so far durable; concurrent callers share
 * fdatasyncs. */
int ol_seg_sync(struct ol_seg *seg);
/* Unlinks every segment that is sealed, unreferenced and has no live bytes
 * (at most 64 per call; it asks the compactor for another pass if there may
 * be more).  Runs on the compactor thread (ol_compact_kick_reap) and at open:
 * with online discard, an unlink can take milliseconds. */
void ol_seg_reap_all(struct ol_store *st);
/* Full-buffer I/O helpers with bounded retries on short transfers. */
int ol_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int ol_pread_all(int fd, void *buf, size_t len, uint64_t off);
void *ol_aligned_alloc(size_t len);

/* ---- mappings for zero-copy reads (segmap.c) ---- */

/* The segment's read-only mapping over fd (its buffered descriptor), made on
 * first use; NULL when it cannot be made.  *len: bytes mapped (may run past
 * the end of the file: only committed ranges are touched). */
const uint8_t *ol_seg_map(struct ol_store *st, struct ol_seg *seg, int fd, uint64_t *len);
void ol_seg_unmap(struct ol_seg *seg);
/* How many bytes from `off` (page-aligned down) up to off+len are in the
 * page cache now, counted from off; 0 when the first page is not. */
uint64_t ol_seg_resident(const uint8_t *map, uint64_t off, uint64_t len);
/* Checks the CRC32C of consecutive blocks of bb bytes at p (len bytes, the
 * last block may be short) against crcs[], reading the mapping.  Returns 0;
 * -OL_ECORRUPT with *good = the bytes before the first bad block; or -EIO
 * when reading the mapping faulted (the device failed a page-in). */
int ol_seg_map_check(const uint8_t *p, uint64_t len, uint32_t bb, const uint32_t *crcs,
                     uint64_t *good);

#endif
