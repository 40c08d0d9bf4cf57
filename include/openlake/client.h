/* libopenlake: the native client of OpenLake.
 *
 * Data moves over UCX (the client protocol, docs/PROTOCOL.md "Client
 * protocol (UCX)"): RDMA verbs where the hardware has them, shared memory
 * between processes of one host, TCP elsewhere; UCX picks (UCX_TLS and the
 * other UCX_* variables of the environment steer it).  A GET lands straight
 * in the caller's buffer (UCX rendezvous into it); a PUT is sent from the
 * caller's buffer.  Requests are signed with the same access and secret
 * keys as S3; the secret never travels.
 *
 *   struct ol_client_opts o = {.endpoint = "http://127.0.0.1:9000",
 *                              .access_key = "AK", .secret_key = "SK"};
 *   struct ol_client *c;
 *   int rc = ol_client_open(&o, &c);
 *   rc = ol_client_put(c, "bucket", "key", buf, len, NULL);
 *   int64_t n = ol_client_get(c, "bucket", "key", 0, dst, cap, NULL);
 *   ol_client_close(c);
 *
 * Errors.  Every call returns 0 or a non-negative count on success and a
 * negative code on failure: a negated errno, or a negated OL_CLIENT_E*
 * below.  ol_client_strerror() names both.  The ones a caller meets:
 *   -EACCES        unknown access key, wrong secret, or a clock more than
 *                  15 minutes off the server's
 *   -OL_CLIENT_ENOBUCKET / -OL_CLIENT_ENOKEY / -OL_CLIENT_ENOVERSION
 *   -ERANGE        a GET offset past the end of a non-empty object
 *   -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, -EHOSTUNREACH: transport
 *   -EIO           data failed its CRC32C, or a PUT session broke
 *   -EINVAL        bad arguments (names too long, NULL buffers...)
 *   -ENOTSUP       the server does not serve the op (older server)
 * Nothing sets errno.
 *
 * Threads.  A client is thread-safe: any number of threads may call it at
 * once (calls run concurrently on the wire).  Calls block the calling
 * thread until their answer (or the timeout); batches (below) let one
 * thread have many operations in flight.  Never call from a UCX callback.
 *
 * Lifetimes.  Strings passed in are copied or used only during the call.
 * Buffers must stay valid until the call returns (a batch: until its op is
 * reaped).  Close after every call has returned: ol_client_close() drops
 * submitted ops that were not reaped (it waits for the messages already in
 * flight to end, at most timeout_ms).
 *
 * Large objects.  One message carries at most 64 MiB; the library splits a
 * larger GET into ranges (pinned to the first range's version, so a
 * concurrent overwrite never mixes two versions) and a larger PUT into a
 * session that becomes visible only when it commits.
 */
#ifndef OPENLAKE_CLIENT_H
#define OPENLAKE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPENLAKE_CLIENT_VERSION 1

/* OpenLake error codes (negated on return; the same numbers as the
 * server's, so a status crosses the wire unchanged). */
enum {
    OL_CLIENT_ECORRUPT = 10001,
    OL_CLIENT_ENOBUCKET = 10002,
    OL_CLIENT_EBUCKETEXISTS = 10003,
    OL_CLIENT_EBUCKETNOTEMPTY = 10004,
    OL_CLIENT_ENOKEY = 10005,
    OL_CLIENT_ETOOLARGE = 10012,
    OL_CLIENT_EPRECONDITION = 10018,
    OL_CLIENT_EQUORUM = 10020,
    OL_CLIENT_ENOVERSION = 10021,
    OL_CLIENT_EFENCED = 10027,
};

struct ol_client;

enum { OL_CLIENT_MAX_LANES = 8 }; /* ol_client_opts.lanes */

struct ol_client_opts {
    /* Where to connect: the node's S3 URL ("http://host:port"; the library
     * asks it for its native port) or its native address ("host:port").
     * On a cluster, any node: the client learns the others. */
    const char *endpoint;
    const char *access_key;
    const char *secret_key;
    unsigned timeout_ms; /* per message; 0: 30000 */
    /* Lanes: connections to each node, each with a UCX worker and a net
     * thread of its own, over which the client spreads its calls (each
     * goes on the least busy lane; a batch's ops too), so that large GETs
     * and PUTs are not bounded by one thread's copies on either side.  A
     * node has its own number of lanes (its native_lanes); lane i talks to
     * the node's lane i (modulo its count).  0: the environment's
     * OPENLAKE_CLIENT_LANES, else as many as the first node has, at most
     * 4 and at most one per four of this host's cores (1 below 8 cores:
     * on a small host extra net threads cost more than they bring); at
     * most OL_CLIENT_MAX_LANES.  Every lane authenticates with the
     * same keys; a call on a lane that fails fails (after the fail-over to
     * other nodes) with a transport error in its deadline, as any call. */
    unsigned lanes;
};

int ol_client_open(const struct ol_client_opts *opts, struct ol_client **out);
void ol_client_close(struct ol_client *c);
const char *ol_client_strerror(int err);

/* ---- memory ---- */

enum ol_client_mem_kind {
    OL_CLIENT_MEM_HOST = 0,
    OL_CLIENT_MEM_CUDA = 1,
};

/* Whether buffers in CUDA device memory can be passed straight to get/put:
 * true only where the UCX found at run time was built with CUDA support.
 * Otherwise copy through pinned host memory (the Python package does so on
 * its own). */
int ol_client_cuda_direct(struct ol_client *c);

/* Whether GETs into CUDA device memory go by CUDA IPC: the client's first
 * node runs on this host with a CUDA driver, and this process has loaded
 * CUDA.  Then ol_client_get into device memory (any thread, no current
 * context needed) names the destination's allocation to the node, whose
 * GPU DMA engine copies the bytes in (docs/PROTOCOL.md "CUDA IPC reads"):
 * no staging here.  Memory that cannot be exported with cuIpcGetMemHandle
 * (cuMemCreate's, stream-ordered pools) takes the ordinary path, where
 * ol_client_get answers -ENOTSUP for device memory unless
 * ol_client_cuda_direct().  OPENLAKE_CUDA=0 in the environment (client or
 * server) turns it off. */
int ol_client_cuda_ipc(struct ol_client *c);

/* Registers [addr, addr+len) with UCX once, so that the calls that use it
 * skip UCX's per-call registration (a cache hit otherwise).  Optional: any
 * buffer works unregistered.  -ENOTSUP for CUDA memory without
 * ol_client_cuda_direct(). */
struct ol_client_mem;
int ol_client_mem_reg(struct ol_client *c, void *addr, size_t len, enum ol_client_mem_kind kind,
                      struct ol_client_mem **out);
void ol_client_mem_dereg(struct ol_client *c, struct ol_client_mem *m);

/* ---- objects ---- */

struct ol_client_info {
    uint64_t size;
    int64_t mtime_ns;
    char etag[72];          /* quoted, as S3 answers it */
    char version_id[72];    /* "null" when the bucket is not versioned */
    char content_type[256];
};

/* Reads the object's bytes from offset into buf, at most cap of them (a
 * smaller cap than the rest of the object is a ranged read).  Returns the
 * bytes read, min(size - offset, cap).  info (may be NULL) gets the
 * object's info. */
int64_t ol_client_get(struct ol_client *c, const char *bucket, const char *key, uint64_t offset,
                      void *buf, uint64_t cap, struct ol_client_info *info);
/* On a cluster, a GET reads the object's data shards straight from the
 * nodes that hold them, in parallel, and rebuilds (Reed-Solomon, ISA-L) the
 * pieces of a shard whose node is down, slow past timeout_ms, or answers an
 * error; objects that cannot be read so (encrypted, multipart manifests)
 * and GETs that cannot find k shards go through one node as on a single
 * node (so do GETs that need a rebuild where ol_client_cuda_direct() is
 * true: the buffer may be GPU memory).  A GET of at most 256 KiB (the bytes
 * its range holds) takes one round trip instead: the node asked for the
 * layout answers the bytes (OPENLAKE_CLIENT_INLINE_MAX=bytes sets the
 * bound, 0 never).  OPENLAKE_CLIENT_DIRECT=0 in the environment turns
 * direct reads off.
 * Counters of what the client's GETs did, since it was opened: */
struct ol_client_stats {
    uint64_t direct_gets;    /* GETs answered by direct reads */
    uint64_t shard_reads;    /* shard pieces read from their nodes */
    uint64_t shard_failures; /* ... that failed (node down, error, timeout) */
    uint64_t pieces_rebuilt; /* data pieces rebuilt from other shards */
    uint64_t fallbacks;      /* direct GETs that went through one node after all */
    unsigned lanes;          /* the client's lanes (ol_client_opts.lanes) */
    uint64_t lane_calls[OL_CLIENT_MAX_LANES]; /* messages sent on each lane */
    uint64_t inline_gets;    /* small GETs answered by LAYOUT itself (no shard reads) */
    uint64_t cuda_ipc_gets;  /* GETs copied into GPU memory by the node (CUDA IPC) */
};
void ol_client_stats(struct ol_client *c, struct ol_client_stats *out);

/* Writes len bytes from buf as the object's new content (any size). */
int ol_client_put(struct ol_client *c, const char *bucket, const char *key, const void *buf,
                  uint64_t len, struct ol_client_info *info);
/* A PUT whose bytes come in pieces (a file read as it goes, tensors
 * copied off a GPU one after another): begin with the total size, write
 * the bytes in order in pieces of any size, commit.  Nothing is visible
 * under the key before the commit returns; abort (or close without
 * commit) leaves nothing.  One thread at a time per stream.  write: -EIO
 * once a piece failed (the stream is then only good for abort); commit:
 * -EIO unless exactly total bytes were written. */
struct ol_client_put_stream;
int ol_client_put_begin(struct ol_client *c, const char *bucket, const char *key, uint64_t total,
                        struct ol_client_put_stream **out);
int ol_client_put_write(struct ol_client_put_stream *s, const void *buf, uint64_t len);
int ol_client_put_commit(struct ol_client_put_stream *s, struct ol_client_info *info);
void ol_client_put_abort(struct ol_client_put_stream *s);

int ol_client_head(struct ol_client *c, const char *bucket, const char *key,
                   struct ol_client_info *info);
/* Deletes the object (0 also when it did not exist, as S3). */
int ol_client_delete(struct ol_client *c, const char *bucket, const char *key);

/* Lists keys after start_after (NULL: from the start) that begin with
 * prefix (NULL: all), in order; fn is called for each (stop by returning
 * non-zero: that value is returned).  Returns the number of keys seen. */
typedef int (*ol_client_list_fn)(void *arg, const char *key, const struct ol_client_info *info);
int64_t ol_client_list(struct ol_client *c, const char *bucket, const char *prefix,
                       const char *start_after, ol_client_list_fn fn, void *arg);

/* ---- batches (the shape of io_uring / 3FS USRBIO) ----
 *
 * Fill ops, submit them, reap completions as they come.  An op's status is
 * its own: one failing op never fails the others.  The submitting thread
 * only queues: small GETs travel many to a message, other ops of one
 * message (up to 64 MiB) go out at once, up to 1024 in flight per client
 * (the rest start as those complete), larger ones run on 8 library
 * threads, and so do GETs past 1 MiB on a cluster (direct reads, as
 * ol_client_get).  Any thread may submit and reap; an op is reaped once. */

enum ol_client_opcode {
    OL_CLIENT_OP_GET = 1, /* offset, buf, len: a ranged read into buf */
    OL_CLIENT_OP_PUT = 2, /* buf, len */
    OL_CLIENT_OP_HEAD = 3,
    OL_CLIENT_OP_DELETE = 4,
};

struct ol_client_op {
    /* In. */
    int opcode;
    const char *bucket; /* borrowed until reaped */
    const char *key;    /* borrowed until reaped */
    void *buf;
    uint64_t offset, len;
    uint64_t user_data; /* for the caller; untouched */
    /* Out (valid once reaped). */
    int64_t result; /* bytes read / 0, or a negative code */
    struct ol_client_info info;
};

/* Submits n ops (the array and the ops stay the caller's until each is
 * reaped).  Returns n, or a negative code when none was submitted. */
int ol_client_submit(struct ol_client *c, struct ol_client_op *const *ops, unsigned n);
/* Waits until at least min ops have completed (or timeout_ms passed, -1:
 * no limit), and hands back up to max of them in done[].  Returns how
 * many. */
int ol_client_reap(struct ol_client *c, struct ol_client_op **done, unsigned min, unsigned max,
                   int timeout_ms);
/* Submits n ops and waits for all: returns 0 when every op succeeded, else
 * the first failing op's code (each op has its own result).  These ops are
 * not reaped (ol_client_reap never returns them). */
int ol_client_run(struct ol_client *c, struct ol_client_op *const *ops, unsigned n);

/* ---- KV cache (docs/KV.md) ----
 *
 * A namespace apart from the buckets: immutable blocks under opaque keys of
 * 1..128 bytes (canonically the 32-byte chain hashes of ol_client_kv_chain,
 * below).  A lost block is a miss, never an error or wrong bytes (every
 * block carries a CRC32C, checked on every read).  Each call is one round
 * trip per node for the whole batch (at most 4096 keys; a GET's hits at most
 * 64 MiB together: ask again for the keys answered -EMSGSIZE).
 *
 * Placement: a key's node is the highest of the rendezvous hashes of
 * (node address, key) over the node list HELLO gave; with replicas r
 * (ol_client_kv_replicas, default 1) a put goes to the r highest and a get
 * asks them in turn until a hit.  A node that does not answer is a miss for
 * its keys.  Clients agree on a key's node when they name the nodes the
 * same way (give every client the same endpoint spelling). */
struct ol_client_kv_key {
    const void *p;
    size_t len;
};
/* 1 (default) or 2 copies of every block put from now on. */
int ol_client_kv_replicas(struct ol_client *c, unsigned r);
/* Stores n blocks.  status[i]: 0 stored, 1 already present (not written
 * again), or the key's error.  Returns 0, or an error that failed the
 * whole call before anything was stored (-EINVAL, -E2BIG, -ENOTSUP). */
int ol_client_kv_put(struct ol_client *c, const struct ol_client_kv_key *keys,
                     const void *const *bufs, const uint64_t *sizes, unsigned n, int *status);
/* Reads n blocks into bufs[i] (caps[i] bytes each).  result[i]: the
 * block's size (a hit), -ENOENT (a miss), -ENOSPC (larger than caps[i]),
 * -EMSGSIZE (the reply was full: ask again).  Returns the number of hits. */
int ol_client_kv_get(struct ol_client *c, const struct ol_client_kv_key *keys, void *const *bufs,
                     const uint64_t *caps, unsigned n, int64_t *result);
/* How many leading keys are present (stops at the first absent one); with
 * pin, those are pinned against eviction for lease_ms (0: 30 s) or until
 * ol_client_kv_release. */
int ol_client_kv_match_prefix(struct ol_client *c, const struct ol_client_kv_key *keys,
                              unsigned n, int pin, unsigned lease_ms);
/* Drops one pin of each key; returns how many were dropped. */
int ol_client_kv_release(struct ol_client *c, const struct ol_client_kv_key *keys, unsigned n);
/* The chain keys of tokens[0..ntokens) in blocks of block_tokens (docs/KV.md,
 * "Keys"): out gets 32 bytes per block (the last one partial when partial
 * is set and the tokens do not fill it).  salt (may be NULL) selects the
 * root.  Returns the number of keys, or -ERANGE for a token outside int32,
 * -EINVAL. */
int ol_client_kv_chain(const int64_t *tokens, size_t ntokens, size_t block_tokens,
                       const void *salt, size_t salt_len, int partial, uint8_t *out,
                       size_t out_keys);

/* ---- S3 over RDMA (docs/PROTOCOL.md "S3 over RDMA") ----
 *
 * The value of the x-amz-rdma-token header for a signed S3 GET (the server
 * writes the body into [addr, addr+len)) or PUT (it reads it from there):
 * this process's UCX worker address, the memory's remote key, address and
 * length, and the memory's tag (random, drawn at registration).  The memory
 * must be registered (ol_client_mem_reg) and stay so until the HTTP request
 * has been answered.  Before it moves any byte, the server asks this
 * client's worker to confirm the token; the client answers (on its own
 * thread) yes for tokens of memory it made one for, MACed with its access
 * and secret keys: so the HTTP request must be signed by the same user as
 * the client was opened with (else 403).  A token is a capability for the
 * whole registered memory until ol_client_mem_dereg: give it only to whom
 * may write there.  Returns the token's length (written to out,
 * NUL-terminated), or -ENOSPC when cap is too small. */
int ol_client_rdma_token(struct ol_client *c, struct ol_client_mem *m, void *addr, uint64_t len,
                         char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
