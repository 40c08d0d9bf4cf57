/* The drive's LMDB index: record encodings and the helpers that hide LMDB's
 * 511-byte key limit.  Internal to src/store; docs/FORMAT.md describes every
 * byte written here.
 *
 * All multi-byte integers are little-endian (the structs are written as they
 * lie in memory, and a static assertion pins the byte order), except LMDB keys
 * that must sort numerically, which are big-endian.
 *
 * Every decoder checks magic, version, lengths and CRC32C and returns
 * -OL_ECORRUPT for anything damaged: a bad index record is an error for that
 * request, never a crash.
 */
#ifndef OL_STORE_INDEX_H
#define OL_STORE_INDEX_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "on-disk structs are little-endian");

#define OL_BUCKET_MAX 63u
#define OL_KEY_MAX 1024u
/* bucket + '\0' + key, and room for the versions DB's suffix ('\0' and a
 * 16-byte inverted version id: docs/FORMAT.md) */
#define OL_IDX_OBJ_KEY_MAX (OL_BUCKET_MAX + 1u + OL_KEY_MAX)
#define OL_IDX_VSUFFIX 17u
#define OL_IDX_KEY_MAX (OL_IDX_OBJ_KEY_MAX + OL_IDX_VSUFFIX)
/* Index keys longer than this share one LMDB record (a group) per prefix of
 * this length.  It stays below LMDB's 511-byte key limit. */
#define OL_IDX_PREFIX 480u

/* ---- object and part entries ---- */

#define OL_ENTRY_MAGIC 0x314e454fu /* "OEN1" */
/* Version 1: no attributes.  Version 2: an attribute section (attr_len bytes)
 * follows the meta blob.  Entries without attributes are still written as
 * version 1, so a drive that never used attributes stays readable by older
 * builds. */
#define OL_ENTRY_VERSION 1u
#define OL_ENTRY_VERSION_ATTRS 2u
#define OL_ENTRY_INLINE 0x1u
#define OL_ATTR_NAME_MAX 128u
#define OL_ATTR_VAL_MAX (64u << 10)
#define OL_ATTRS_MAX (256u << 10)
#define OL_EXTENT_BYTES 24u

struct ol_entry_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64];
    uint32_t nparts;
    uint32_t meta_len;
    uint32_t nextents;
    uint32_t ncrc;
    uint32_t block_bytes;
    uint32_t inline_crc; /* CRC32C of the inline data (inline entries) */
    uint32_t attr_len;   /* bytes of the attribute section (version 2; 0 in version 1) */
    uint8_t reserved[8];
    uint32_t crc; /* CRC32C of header (this field 0), meta, attrs, extents, crcs */
};
_Static_assert(sizeof(struct ol_entry_hdr) == 128, "entry header is 128 bytes");

struct ol_extent {
    uint64_t seg;
    uint64_t off;
    uint64_t len;
};

/* A decoded entry: the header is copied, the rest points into the buffer
 * that was decoded (whose lifetime the caller manages). */
struct ol_entry {
    struct ol_entry_hdr h;
    const uint8_t *meta;
    const uint8_t *attrs; /* h.attr_len bytes */
    const uint8_t *data; /* inline data (h.size bytes) or NULL */
    const uint8_t *ext;  /* h.nextents raw extents */
    const uint8_t *crcs; /* h.ncrc raw CRC32Cs */
};

/* What an entry is built from.  Either inline_data (size bytes) or the
 * extents and their CRC runs (blocks counted from each extent's start). */
struct ol_entry_src {
    uint64_t size;
    int64_t mtime_ns;
    const char *etag;
    uint32_t nparts;
    const uint8_t *meta;
    uint32_t meta_len;
    const uint8_t *attrs; /* attribute section (ol_attrs_set builds it), or NULL */
    uint32_t attr_len;
    uint32_t block_bytes;
    bool is_inline;
    const uint8_t *inline_data;
    const struct ol_extent *ext;
    uint32_t nextents;
    const uint32_t *crcs;
    uint32_t ncrc;
};

int ol_entry_decode(const void *buf, size_t len, struct ol_entry *e);
/* Mallocs and encodes an entry; *out is freed by the caller. */
int ol_entry_build(const struct ol_entry_src *s, uint8_t **out, size_t *out_len);
/* Re-encodes a decoded entry with other metadata: fields of `over` that are
 * set (meta != NULL, attrs != NULL, mtime_ns != 0) replace the entry's; the
 * data (inline bytes or extents and CRCs) is kept. */
struct ol_entry_over {
    const uint8_t *meta;
    uint32_t meta_len;
    const uint8_t *attrs;
    uint32_t attr_len;
    int64_t mtime_ns;
};
int ol_entry_rewrite(const struct ol_entry *e, const struct ol_entry_over *over, uint8_t **out,
                     size_t *out_len);
void ol_entry_get_ext(const struct ol_entry *e, uint32_t i, struct ol_extent *x);
uint32_t ol_entry_get_crc(const struct ol_entry *e, uint32_t i);
/* Rewrites extent i of an encoded entry in place and refreshes its CRC. */
void ol_entry_patch_ext(uint8_t *buf, size_t len, uint32_t i, uint64_t seg, uint64_t off);
static inline uint32_t ol_blocks(uint64_t len, uint32_t block_bytes)
{
    return (uint32_t)((len + block_bytes - 1) / block_bytes);
}

/* ---- object attributes: records sorted by name ----
 * u16 name_len, u16 reserved (0), u32 val_len, name[name_len], val[val_len] */

/* Finds name in an attribute section: 0 with *val and *len, -OL_ENOCONFIG if
 * absent, -OL_ECORRUPT if the section is damaged. */
int ol_attrs_find(const uint8_t *attrs, size_t len, const char *name, const uint8_t **val,
                  size_t *val_len);
/* Builds a new section (malloc'ed, *out may be NULL for an empty one) from
 * `attrs` with name set to val (or removed when val == NULL). */
int ol_attrs_set(const uint8_t *attrs, size_t len, const char *name, const void *val,
                 size_t val_len, uint8_t **out, size_t *out_len);
/* Checks a caller's attribute list (store.h, struct ol_obj_attr): 0, -EINVAL
 * (too many, a bad or reserved name, a removal when !allow_remove), or
 * -OL_ETOOLARGE (a value, or all of them together). */
int ol_attrs_check(const struct ol_obj_attr *a, uint32_t n, bool allow_remove);
/* Builds a new section (as ol_attrs_set) from `attrs` with each of a[0..n)
 * set or removed in turn (a later one of the same name wins).  a must have
 * passed ol_attrs_check. */
int ol_attrs_apply(const uint8_t *attrs, size_t len, const struct ol_obj_attr *a, uint32_t n,
                   uint8_t **out, size_t *out_len);

/* ---- bucket settings (bconf DB: bucket '\0' name -> record) ---- */

#define OL_BCONF_MAGIC 0x31464342u /* "BCF1" */
#define OL_BCONF_NAME_MAX 64u
#define OL_BCONF_VAL_MAX (1u << 20)
struct ol_bconf_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint32_t len;
    uint32_t crc; /* over this header (crc 0) and the value */
};
_Static_assert(sizeof(struct ol_bconf_hdr) == 16, "bucket setting header is 16 bytes");
/* Builds the bconf key; returns its length or -EINVAL. */
int ol_bconf_key(uint8_t out[OL_BUCKET_MAX + 1 + OL_BCONF_NAME_MAX], const char *bucket,
                 const char *name);
int ol_bconf_build(const void *val, size_t len, uint8_t **out, size_t *out_len);
int ol_bconf_decode(const void *buf, size_t len, const uint8_t **val, size_t *val_len);

/* ---- buckets, uploads ---- */

#define OL_BUCKET_MAGIC 0x314b4242u /* "BBK1" */
#define OL_UPLOAD_MAGIC 0x31505550u /* "PUP1" */
#define OL_SEGREC_MAGIC 0x31474553u /* "SEG1" */
#define OL_GROUP_MAGIC 0x31524f47u  /* "GOR1" */

struct ol_bucket_rec {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    int64_t ctime_ns;
    uint32_t reserved;
    uint32_t crc;
};
_Static_assert(sizeof(struct ol_bucket_rec) == 24, "bucket record is 24 bytes");

struct ol_upload_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    int64_t ctime_ns;
    uint16_t bucket_len;
    uint16_t reserved;
    uint32_t key_len;
    uint32_t meta_len;
    uint32_t crc; /* over header (this field 0) and the three byte strings */
};
_Static_assert(sizeof(struct ol_upload_hdr) == 32, "upload header is 32 bytes");

struct ol_upload_view {
    int64_t ctime_ns;
    const char *bucket;
    size_t bucket_len;
    const uint8_t *key;
    size_t key_len;
    const uint8_t *meta;
    uint32_t meta_len;
};

void ol_bucket_rec_build(struct ol_bucket_rec *r, int64_t ctime_ns);
int ol_bucket_rec_decode(const void *buf, size_t len, int64_t *ctime_ns);
int ol_upload_build(const char *bucket, const uint8_t *key, size_t key_len, const uint8_t *meta,
                    uint32_t meta_len, int64_t ctime_ns, uint8_t **out, size_t *out_len);
int ol_upload_decode(const void *buf, size_t len, struct ol_upload_view *u);

/* ---- segment space records (segs DB, key = big-endian id) ---- */

struct ol_segrec {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint64_t written; /* highest committed extent end */
    uint64_t live;    /* bytes referenced by entries */
    uint32_t reserved;
    uint32_t crc;
};
_Static_assert(sizeof(struct ol_segrec) == 32, "segment record is 32 bytes");

/* -OL_ENOKEY when the segment has no record (no live bytes). */
int ol_idx_seg_get(MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t *written, uint64_t *live);
/* Adds delta to the segment's live bytes; the record is deleted when live
 * reaches 0 (*zeroed is then set). */
int ol_idx_seg_add(MDB_txn *txn, MDB_dbi dbi, uint64_t id, int64_t delta, uint64_t end,
                   bool *zeroed);

/* A u64 counter in the meta DB. */
int ol_idx_meta_add(MDB_txn *txn, MDB_dbi dbi, const char *name, int64_t delta);
uint64_t ol_idx_meta_get(MDB_txn *txn, MDB_dbi dbi, const char *name);

/* ---- object keys of any length (objects DB) ---- */

/* Builds bucket '\0' key into out (OL_IDX_KEY_MAX bytes); returns its length
 * or -EINVAL / -OL_ETOOLARGE. */
int ol_idx_key(uint8_t *out, const char *bucket, const char *key, size_t key_len);
/* *val points at the entry (inside LMDB's map, valid for the txn). */
int ol_idx_get(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen, MDB_val *val);
int ol_idx_put(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen, const void *v,
               size_t vlen);
/* -OL_ENOKEY if absent. */
int ol_idx_del(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k, size_t klen);

/* An ordered cursor over full keys, expanding groups. */
struct ol_idx_cur {
    MDB_cursor *c;
    MDB_val lk, lv;       /* current LMDB record */
    bool valid;           /* lk/lv hold a record */
    bool pending;         /* the record is positioned but not yet expanded */
    uint32_t gleft;       /* records left in the current group */
    const uint8_t *gp, *gend;
    bool skipping;        /* still skipping keys below the seek key */
    bool inclusive;
    size_t seek_len;
    uint8_t seek[OL_IDX_KEY_MAX];
    size_t key_len;
    uint8_t key[OL_IDX_KEY_MAX];
};
int ol_idx_cur_open(MDB_txn *txn, MDB_dbi dbi, struct ol_idx_cur *cur);
void ol_idx_cur_close(struct ol_idx_cur *cur);
int ol_idx_cur_seek(struct ol_idx_cur *cur, const uint8_t *k, size_t klen, bool inclusive);
/* 0 with key and entry value, 1 at the end, or an error. */
int ol_idx_cur_next(struct ol_idx_cur *cur, const uint8_t **k, size_t *klen, MDB_val *val);

/* Maps an LMDB return code to 0 / -errno. */
int ol_mdb_err(int rc);

#endif
