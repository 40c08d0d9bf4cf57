/* Encryption at rest: SSE-S3 and SSE-C, as the object layer applies them.
 *
 * An encrypted object's bytes are stored sealed; its metadata blob (the
 * s3/meta.h blob the layer stores opaquely) carries one internal entry,
 * OL_SSE_META (":sse"), that says how to open them.  Everything else about
 * the object (listing, versions, copies, healing, erasure coding) handles
 * the sealed bytes as it handles any bytes: encryption sits above the
 * backends, in obj/obj.c, the one place every mode's reads and writes pass.
 *
 * Keys.
 *   - Each object (or multipart upload) has its own random 256-bit data key
 *     DK, stored only wrapped (AES-256-GCM, random nonce) in the ":sse" entry.
 *   - SSE-S3 wraps DK under the master key (cfg sse_key_file, see
 *     docs/SECURITY.md): whoever reads the object through the server gets it
 *     decrypted, as with Amazon S3.  The entry names the master key by an id
 *     (a hash of it), so a server started with another key file answers a
 *     clear error instead of garbage.
 *   - SSE-C wraps DK under a key derived from the customer's key and a
 *     random salt (HMAC-SHA256(customer key, salt)); the customer key itself
 *     is never stored, only HMAC-SHA256(salt, customer key) to tell a wrong
 *     key (-OL_ESSEWRONGKEY) from a missing one (-OL_ESSENEEDKEY).
 *
 * Sealed stream (docs/FORMAT.md, "Encrypted objects").  A stream is the
 * sealed form of one plaintext byte sequence: a single PUT's body, or one
 * multipart part.  It is a 16-byte random stream id, then the plaintext in
 * packages of OL_SSE_PKG bytes (the last one shorter), each sealed with
 * AES-256-GCM and followed by its 16-byte tag.  The package key is
 * HMAC-SHA256(DK, stream id), so no two streams share a (key, nonce) pair
 * even when a part number is uploaded twice; the nonce is the package's
 * index (big-endian, in the last 8 of its 12 bytes); the associated data is
 * one byte, 1 on the stream's last package and 0 on the others, so cutting
 * a stream at a package boundary fails authentication.
 *
 * Layout of an object: one stream ('s'), or for a completed multipart upload
 * one stream per part in part order ('p'), whose plaintext sizes the
 * object's ":parts" entry lists (s3/meta.h).  A stream's sealed length is a
 * function of its plaintext length and back (ol_sse_sealed_len /
 * ol_sse_plain_len), so a part's or a one-stream object's plaintext size is
 * known from its stored size.
 *
 * Threads: plain data and functions; a reader or writer is used by one
 * thread at a time.  A reader's read-ahead (ol_sse_read) opens windows on
 * the decrypt pool's threads (obj/sse_pool.h); the reader itself, and its
 * source, stay on the caller's thread.
 */
#ifndef OL_OBJ_SSE_H
#define OL_OBJ_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OL_SSE_META ":sse"
#define OL_SSE_PKG (64u * 1024)       /* plaintext bytes per package */
#define OL_SSE_TAG 16u                /* GCM tag after each package */
#define OL_SSE_HDR 16u                /* stream id at the start of a stream */
#define OL_SSE_KEY 32u                /* AES-256 keys */
#define OL_SSE_ENTRY_MAX 320u         /* the ":sse" entry's longest value */
/* Packages a reader opens per backend read (and a writer seals per
 * backend write): 15 keep a window's sealed bytes under 1 MiB, one read
 * step of an erasure set's reader (obj/ec.c EC_CHUNK_BYTES). */
#define OL_SSE_WINDOW_PKGS 15u

enum ol_sse_mode {
    OL_SSE_NONE = 0,
    OL_SSE_S3,  /* server-managed keys (x-amz-server-side-encryption: AES256) */
    OL_SSE_C,   /* customer-provided key (x-amz-server-side-encryption-customer-*) */
};

/* What a write asks for: the mode and, for SSE-C, the customer's key. */
struct ol_sse_spec {
    enum ol_sse_mode mode;
    uint8_t ckey[OL_SSE_KEY];
};

/* An opened ":sse" entry. */
struct ol_sse_obj {
    enum ol_sse_mode mode;
    char layout;                 /* 's' one stream, 'p' one per part */
    uint8_t dk[OL_SSE_KEY];      /* the data key (only after a successful open) */
};

/* The id of a master key (what an entry records): 16 hex digits. */
void ol_sse_key_id(const uint8_t master[OL_SSE_KEY], char id[17]);

/* A new entry for spec with a fresh random data key, in out (NUL-terminated,
 * OL_SSE_ENTRY_MAX bytes); layout 's' or 'p'.  The opened form goes to *obj
 * (for the writer).  0, or -EIO when the random source or the cipher fails,
 * -ENOKEY for SSE-S3 with no master key (master NULL). */
int ol_sse_entry_new(const uint8_t *master, const struct ol_sse_spec *spec, char layout,
                     char out[OL_SSE_ENTRY_MAX], struct ol_sse_obj *obj);
/* The same entry with another layout (a completed upload's 'p'). */
void ol_sse_entry_relayout(char *entry, size_t len, char layout);
/* Parses an entry without opening it: its mode and layout.  -OL_ECORRUPT. */
int ol_sse_entry_peek(const uint8_t *val, size_t len, enum ol_sse_mode *mode, char *layout);
/* Opens an entry: SSE-S3 with master (NULL: none configured), SSE-C with
 * ckey (NULL: none given).  -OL_ESSENEEDKEY (SSE-C without a key),
 * -OL_ESSEWRONGKEY (another customer key), -ENOKEY (SSE-S3: no master key, or
 * another one than the object was written under), -OL_ECORRUPT. */
int ol_sse_entry_open(const uint8_t *val, size_t len, const uint8_t *master,
                      const uint8_t *ckey, struct ol_sse_obj *obj);

/* Stream lengths: the sealed length of plain bytes, and the plaintext length
 * of a sealed stream (-1 when no stream has that length). */
uint64_t ol_sse_sealed_len(uint64_t plain);
int64_t ol_sse_plain_len(uint64_t sealed);

/* ---- reading ---- */

/* Reads sealed bytes from the backend: as ol_obj_read (obj/obj.h).  A
 * source sets *pinned when *data stays valid while the source lives (a
 * page-cache mapping), and leaves it alone when it is valid only until the
 * next call: a window opened on another thread (read-ahead, below) is
 * copied out of an unpinned buffer first.  A window whose bytes come in
 * several pinned answers (an answer may stop at a stripe unit's or an
 * extent's end) is opened from them where they lie, up to 4 pieces.
 *
 * Without check, a source may hand over bytes its backend has not checked
 * (no CRC pass over a page-cache mapping: store/store.h,
 * ol_store_read_map_sealed): the tags authenticate every one.  A window
 * that fails a tag is read once more with check, where the backend checks
 * its CRCs, rebuilds a bad piece from parity and reports it; only when
 * those bytes fail too is the read -OL_ECORRUPT. */
typedef ssize_t (*ol_sse_src_fn)(void *src, uint64_t off, size_t max, bool check,
                                 const uint8_t **data, bool *pinned);

/* Read-ahead: windows a long read opens ahead on the decrypt pool
 * (obj/sse_pool.h), at most. */
#define OL_SSE_AHEAD 4u
/* Pool blocks (one window each) per pool thread: the process-wide cap on
 * read-ahead memory (2 MiB a block). */
#define OL_SSE_AHEAD_BLOCKS_PER_THREAD 4u

struct ol_sse_reader;
/* A reader of an object whose stored size is `stored` and whose blob holds
 * the ":sse" entry (meta, meta_len: read the entry and ":parts" now, not
 * kept).  It starts locked unless the entry opens with master (SSE-S3); an
 * SSE-C object is unlocked by ol_sse_reader_unlock.  -OL_ECORRUPT when the
 * sizes do not agree with the layout, -ENOMEM, and ol_sse_entry_open's
 * errors for an SSE-S3 object. */
int ol_sse_reader_new(const uint8_t *meta, size_t meta_len, uint64_t stored,
                      const uint8_t *master, struct ol_sse_reader **out);
void ol_sse_reader_free(struct ol_sse_reader *s);
enum ol_sse_mode ol_sse_reader_mode(const struct ol_sse_reader *s);
uint64_t ol_sse_reader_size(const struct ol_sse_reader *s); /* plaintext */
/* SSE-C: checks ckey and unlocks.  ol_sse_entry_open's errors. */
int ol_sse_reader_unlock(struct ol_sse_reader *s, const uint8_t ckey[OL_SSE_KEY]);
/* Plaintext at off (as ol_obj_read): *data points into the reader's window
 * (valid until the next call), up to max bytes; 0 at the end.
 * The window and the cipher context come from a small per-thread pool
 * and go back to it when the reader is freed.
 * Read-ahead: a call with max of two windows or more (a GET's remaining
 * body) while the decrypt pool runs queues the windows after this one, up
 * to OL_SSE_AHEAD and not past off + max, to be opened on the pool's
 * threads; the next calls in order take them (parking the fiber until one
 * is open), a call elsewhere drops them.  The reader reads the source on
 * the calling thread only, in window order.  Windows are handed out in
 * order and only once every package in them has authenticated: a package
 * that fails fails the call that reaches its window, with nothing of it or
 * after it returned.  Freeing the reader gives up the windows at once (a
 * window being opened is freed by its pool thread when done).
 * -OL_ESSENEEDKEY while locked; -OL_ECORRUPT when a package fails
 * authentication; the source's errors. */
ssize_t ol_sse_read(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src, uint64_t off,
                    size_t max, const uint8_t **data);

/* How the process's encrypted reads went, since it started (metrics, and
 * tests): windows whose sealed bytes were opened where the source handed
 * them over, in one piece or in several (a window across pinned pieces of
 * the source, such as an erasure set's stripe units), or copied first (an
 * unpinned source's short answer), with the bytes copied; the parts of
 * windows opened in parts (win_open_split) that a pool thread opened, or
 * that the reader's own thread took back because none had started them;
 * and windows read again with check after a tag failed (ol_sse_src_fn). */
struct ol_sse_stats {
    uint64_t windows_in_place, windows_pieces, windows_copied, bytes_copied;
    uint64_t parts_pool, parts_stolen;
    uint64_t windows_rechecked;
};
void ol_sse_stats(struct ol_sse_stats *out);

/* The plaintext size of an object from its stored size and blob: the size
 * itself when the blob has no ":sse" entry.  For listings and results that
 * see an object's info without opening it. */
uint64_t ol_sse_object_size(const uint8_t *meta, size_t meta_len, uint64_t stored);

/* ---- writing ---- */

/* Appends sealed bytes to the backend writer: as ol_obj_write. */
typedef int (*ol_sse_sink_fn)(void *sink, const void *buf, size_t len);
typedef void (*ol_sse_release_fn)(void *ctx, const uint8_t *p, size_t len);

struct ol_sse_writer;
/* A writer sealing one stream with obj's data key. */
int ol_sse_writer_new(const struct ol_sse_obj *obj, struct ol_sse_writer **out);
void ol_sse_writer_free(struct ol_sse_writer *s);
/* The caller's hook for its plaintext buffer (ol_store_write_set_release's
 * contract): called before the writer reuses room it lent. */
void ol_sse_writer_set_release(struct ol_sse_writer *s, ol_sse_release_fn fn, void *ctx);
/* Room for plaintext (ol_store_write_room's contract) and its use. */
int ol_sse_write_room(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink, uint8_t **p,
                      size_t *len);
int ol_sse_write_advance(struct ol_sse_writer *s, size_t n);
int ol_sse_write(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink, const void *buf,
                 size_t len);
/* Seals what is left (the last package with its final mark).  Call once,
 * before the backend commit. */
int ol_sse_write_finish(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink);
/* Plaintext bytes appended so far. */
uint64_t ol_sse_write_size(const struct ol_sse_writer *s);
/* The buffer memory a writer holds (for the body memory budget). */
uint64_t ol_sse_writer_bytes(void);

#endif
