/* The KV-cache store of a node (docs/KV.md): a namespace of immutable
 * blocks under opaque keys, apart from S3's buckets (no versions, no
 * erasure coding: a lost block is a miss, and the inference engine
 * recomputes it).  Two tiers:
 *
 *   memory  blocks in DRAM, at most `memory_bytes` of them (each block is
 *           charged OL_KV_MEM_CHARGE(len): its bytes and its index entry);
 *           least recently used first out when a put or a promotion passes
 *           the high watermark, down to the low one;
 *   disk    what memory evicts is spilled to one file per block in `dir`
 *           (docs/FORMAT.md, "KV-cache spill files"), at most `disk_bytes`
 *           (charged OL_KV_DISK_CHARGE(len)), dropped least recently used
 *           first under the same watermarks.  A get of a spilled block reads
 *           it back and promotes it to memory (it keeps its file, so that
 *           evicting it again costs no write).  disk_bytes 0: no disk tier,
 *           evicted blocks are gone.
 *
 * The disk tier is a cache, not a store: its files are removed when the
 * store is created (a restart starts empty) and are never fsync'ed.
 *
 * Keys are 1..OL_KV_MAX_KEY opaque bytes compared bytewise; the canonical
 * ones are the 32-byte chain hashes of kv/hash.h, but an adapter may pass
 * any key of its own (LMCache's key strings, vLLM's block hashes).
 *
 * Integrity: every block carries its CRC32C (core/crc.h), computed when it
 * is put and checked on every read of either tier against the bytes handed
 * out; a block that fails is dropped and answered as a miss, never as wrong
 * bytes (stats: corrupt).
 *
 * Put is idempotent: a key that is present (either tier) is not written
 * again; the put answers 1 and counts a dedup.  A block is visible only once
 * all its bytes are in memory (the copy happens before it is indexed), so a
 * concurrent get sees all of it or nothing.
 *
 * Pins (leases): ol_kv_contains with lease_ms > 0 pins a present block: it
 * is neither evicted from memory nor dropped from disk until as many
 * ol_kv_release calls as pins came, or until the lease runs out (each pin
 * extends it to at least now + lease_ms; at most OL_KV_MAX_LEASE_MS).  When
 * every block in memory is pinned, a put has no room and answers -ENOSPC.
 *
 * Threads and locking.  Every function may be called from any thread at
 * once (the native port's workers do).  The index is split in OL_KV_SHARDS
 * shards by a hash of the key; each shard has one mutex over its hash table
 * and its two LRU lists (memory, disk), held only for index work, never
 * across a copy of block bytes, a CRC or a file operation: a get takes a
 * reference on the block's buffer under the lock and copies it after.  LRU
 * order is global: every use stamps the entry with a tick from one atomic
 * counter, and an evictor takes the oldest evictable entry among the shards'
 * list tails.  Eviction runs on the thread whose put (or promotion) needs
 * the room, one evictor per tier at a time (a mutex per tier).  Lock order:
 * memory evictor, then disk evictor, then one shard at a time (never two).
 *
 * Memory: the index entry and each block's buffer are malloc'ed (no arena
 * preallocation yet); running out answers -ENOMEM for that block.
 *
 * Errors: 0 or a count on success, or a negative errno: -EINVAL (bad key or
 * argument), -E2BIG (a block larger than OL_KV_MAX_VALUE or than a whole
 * tier), -ENOSPC (no room that could be freed), -ENOENT (a miss), -EMSGSIZE
 * (the caller's buffer is too small; *size says what is needed), -ENOMEM,
 * -EIO.
 */
#ifndef OL_KV_KV_H
#define OL_KV_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/hash.h"

struct ol_kv;

enum {
    OL_KV_MAX_KEY = 128,          /* bytes of an opaque key */
    OL_KV_MAX_VALUE = 64 << 20,   /* bytes of one block (one native message) */
    OL_KV_SHARDS = 64,            /* index shards (a power of two) */
    OL_KV_ENTRY_BYTES = 256,      /* what an index entry is charged in memory */
    OL_KV_FILE_HDR_BYTES = 256,   /* a spill file's header (docs/FORMAT.md) */
    OL_KV_DISK_UNIT = 4096,       /* a spill file is charged in these */
    OL_KV_DEFAULT_LEASE_MS = 30000,
    OL_KV_MAX_LEASE_MS = 600000,
};

/* What a block of len bytes is charged in each tier. */
#define OL_KV_MEM_CHARGE(len) ((uint64_t)(len) + OL_KV_ENTRY_BYTES)
#define OL_KV_DISK_CHARGE(len)                                                                     \
    (((uint64_t)(len) + OL_KV_FILE_HDR_BYTES + OL_KV_DISK_UNIT - 1) / OL_KV_DISK_UNIT *            \
     OL_KV_DISK_UNIT)

struct ol_kv_opts {
    uint64_t memory_bytes; /* memory tier capacity (> 0) */
    uint64_t disk_bytes;   /* disk tier capacity; 0: none */
    const char *dir;       /* the disk tier's directory (made if missing); with disk_bytes */
    /* Eviction starts when a tier would pass high_pct of its capacity and
     * stops at low_pct (1 <= low_pct <= high_pct <= 100; 0: 95 and 85). */
    unsigned high_pct, low_pct;
    bool no_promote; /* a disk hit stays on disk only (tests) */
};

/* Creates the store; removes what a previous run spilled into dir.
 * -EINVAL (bad options), -errno of mkdir/opendir, -ENOMEM. */
int ol_kv_create(const struct ol_kv_opts *o, struct ol_kv **out);
/* Frees every block and removes the spill files.  No call may be running. */
void ol_kv_destroy(struct ol_kv *kv);

/* Stores a copy of data[0..len) under key: 0 stored, 1 already present
 * (not written, counted as dedup), or -EINVAL (key length outside
 * 1..OL_KV_MAX_KEY), -E2BIG, -ENOSPC, -ENOMEM. */
int ol_kv_put(struct ol_kv *kv, const void *key, size_t key_len, const void *data, size_t len);

/* Copies the block of key into dst (cap bytes) and sets *size: 0 (a hit,
 * checked against its CRC), -ENOENT (a miss: absent, or failed its check and
 * dropped), -EMSGSIZE (cap < *size: nothing copied), -EINVAL. */
int ol_kv_get(struct ol_kv *kv, const void *key, size_t key_len, void *dst, size_t cap,
              uint64_t *size);

/* 1 when key is present in either tier (not read, not checked), else 0, or
 * -EINVAL.  lease_ms > 0 also pins it (above; capped at OL_KV_MAX_LEASE_MS).
 * Counts as a use for the LRU order. */
int ol_kv_contains(struct ol_kv *kv, const void *key, size_t key_len, uint32_t lease_ms);

/* Drops one pin of key: 0, or -ENOENT (absent, not pinned, or its lease
 * already ran out), -EINVAL. */
int ol_kv_release(struct ol_kv *kv, const void *key, size_t key_len);

struct ol_kv_stats {
    /* counters */
    uint64_t puts, stored, dedup, put_bytes, put_refused;
    uint64_t gets, mem_hits, mem_misses, disk_hits, disk_misses, get_bytes;
    uint64_t lookups, lookup_hits; /* ol_kv_contains */
    uint64_t evictions;  /* blocks that left memory (spilled, or gone) */
    uint64_t spills, spill_bytes, spill_errors;
    uint64_t disk_drops; /* blocks that left the disk tier */
    uint64_t promotions; /* disk hits copied back to memory */
    uint64_t corrupt;    /* blocks that failed their CRC (dropped) */
    uint64_t pins, releases;
    /* gauges */
    uint64_t mem_entries, mem_bytes, mem_capacity;
    uint64_t disk_entries, disk_bytes, disk_capacity;
};
/* A snapshot (each field read atomically; not one consistent instant). */
void ol_kv_stats(struct ol_kv *kv, struct ol_kv_stats *out);

#endif
