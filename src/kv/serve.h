/* The KV ops of the native port (native/proto.h, OL_COP_KV_*): decoding a
 * request's arguments, running the batch on a store (kv/kv.h) and encoding
 * the reply.  native/server.c calls ol_kv_serve from its workers; the
 * decoder is fuzzed on its own and with the ops (tests/fuzz/fuzz_kv.c).
 *
 * Threads: ol_kv_wire_decode is a pure function of its arguments;
 * ol_kv_serve may run on any thread at once (the store's rule).
 */
#ifndef OL_KV_SERVE_H
#define OL_KV_SERVE_H

#include <stddef.h>
#include <stdint.h>

struct ol_kv;

/* One key of a batch: points into the caller's control bytes. */
struct ol_kv_item {
    const uint8_t *key;
    uint32_t key_len;
    uint64_t size;   /* PUT: the block's bytes */
    uint64_t offset; /* PUT: where the block starts in the data */
};

struct ol_kv_wire_req {
    uint32_t n;
    uint32_t flags, lease_ms; /* MATCH_PREFIX */
};

/* Decodes the arguments of KV op `op` (the control bytes after the access
 * key: args, args_len) with data_len bulk bytes into req and items (room for
 * cap; OL_NATIVE_KV_MAX_BATCH is always enough).  Returns 0, or the
 * request's error as native/proto.h lists it: -EINVAL, -E2BIG, -EMSGSIZE,
 * -ENOTSUP (not a KV op). */
int ol_kv_wire_decode(uint8_t op, const void *args, size_t args_len, uint64_t data_len,
                      struct ol_kv_wire_req *req, struct ol_kv_item *items, size_t cap);

/* A reply: ctl is malloc'ed (the caller frees it, also on error), data_len
 * bytes were written into the caller's data buffer (GET only). */
struct ol_kv_out {
    uint8_t *ctl;
    size_t ctl_len;
    size_t data_len;
};

/* Runs one KV request: args as above, in_data the request's bulk bytes
 * (checked by the caller against the header's CRC), data a buffer of
 * data_cap bytes for a GET's blocks (NULL/0 for the other ops).  Returns the
 * reply's status (native/proto.h) and fills out. */
int ol_kv_serve(struct ol_kv *kv, uint8_t op, const void *args, size_t args_len,
                const void *in_data, uint64_t in_len, void *data, size_t data_cap,
                struct ol_kv_out *out);

#endif
