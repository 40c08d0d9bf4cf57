/* libopenlake: the KV-cache calls (include/openlake/client.h, docs/KV.md):
 * keys placed on nodes by rendezvous hashing, one message per node per
 * call. */
#include "client/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/hash.h"

enum { KV_MAX_BATCH = OL_NATIVE_KV_MAX_BATCH, KV_MAX_KEY = 128 };

OLC_API int ol_client_kv_replicas(struct ol_client *c, unsigned r)
{
    if (!c || r < 1 || r > 2)
        return -EINVAL;
    atomic_store(&c->kv_replicas, r);
    return 0;
}

/* FNV-1a 64 over the node's address then the key: the rendezvous weight. */
static uint64_t weight(const char *node, const void *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = node; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    const uint8_t *k = key;
    for (size_t i = 0; i < len; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    /* A final mix: FNV's low bits are weak. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* The nodes of a key, best first (up to want of them). */
static unsigned nodes_of(struct ol_client *c, const struct ol_client_kv_key *k, unsigned want,
                         int out[2])
{
    pthread_mutex_lock(&c->mu);
    unsigned n = c->nnodes, got = 0;
    uint64_t best[2] = {0, 0};
    for (unsigned i = 0; i < n; i++) {
        uint64_t w = weight(c->nodes[i], k->p, k->len);
        if (got < want || w > best[got - 1]) {
            unsigned j = got < want ? got++ : got - 1;
            while (j > 0 && best[j - 1] < w) {
                best[j] = best[j - 1];
                out[j] = out[j - 1];
                j--;
            }
            best[j] = w;
            out[j] = (int)i;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return got;
}

static bool keys_ok(const struct ol_client_kv_key *keys, unsigned n)
{
    if (!keys || n == 0 || n > KV_MAX_BATCH)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (!keys[i].p || keys[i].len == 0 || keys[i].len > KV_MAX_KEY)
            return false;
    return true;
}

OLC_API int ol_client_kv_put(struct ol_client *c, const struct ol_client_kv_key *keys,
                             const void *const *bufs, const uint64_t *sizes, unsigned n,
                             int *status)
{
    if (!c || !keys_ok(keys, n) || !bufs || !sizes || !status)
        return -EINVAL;
    unsigned r = atomic_load(&c->kv_replicas);
    int (*where)[2] = calloc(n, sizeof(*where));
    unsigned *nw = calloc(n, sizeof(*nw));
    unsigned *idx = calloc(n, sizeof(*idx));
    size_t acap = 8 + (size_t)n * (4 + KV_MAX_KEY + 8);
    uint8_t *a = malloc(acap), *data = NULL;
    uint64_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += sizes[i];
    int rc = where && nw && idx && a ? 0 : -ENOMEM;
    if (rc == 0 && total > OL_NATIVE_MAX_DATA)
        rc = -E2BIG;
    if (rc == 0 && !(data = malloc(total ? total : 1)))
        rc = -ENOMEM;
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        nw[i] = nodes_of(c, &keys[i], r, where[i]);
        status[i] = -EHOSTUNREACH;
    }
    /* One message per (replica rank, node): the keys whose copy goes there. */
    for (unsigned rank = 0; rc == 0 && rank < r; rank++) {
        unsigned nnodes = c->nnodes;
        for (unsigned node = 0; node < nnodes; node++) {
            unsigned m = 0;
            uint64_t off = 0;
            struct ol_wbuf w = {.p = a, .cap = acap};
            ol_wbuf_u32(&w, 0);
            for (unsigned i = 0; i < n; i++) {
                if (rank >= nw[i] || where[i][rank] != (int)node)
                    continue;
                ol_wbuf_str(&w, keys[i].p, keys[i].len);
                ol_wbuf_u64(&w, sizes[i]);
                if (sizes[i])
                    memcpy(data + off, bufs[i], sizes[i]);
                off += sizes[i];
                idx[m++] = i;
            }
            if (m == 0)
                continue;
            memcpy(a, &m, 4); /* little-endian hosts (net/wire.h) */
            uint8_t *rctl = malloc((size_t)m * 4);
            struct olc_call k = {.op = OL_COP_KV_PUT, .args = a, .args_len = w.len, .data = data,
                                 .data_len = off, .rctl = rctl, .rctl_cap = (size_t)m * 4,
                                 .node = (int)node};
            int crc = rctl ? olc_call(c, &k) : -ENOMEM;
            if (crc == (int)m) {
                struct ol_rbuf rb = {.p = rctl, .len = k.rctl_len};
                for (unsigned j = 0; j < m; j++) {
                    int st = (int)ol_rbuf_u32(&rb);
                    /* A copy stored anywhere makes the key stored. */
                    if (rank == 0 || status[idx[j]] < 0)
                        status[idx[j]] = rb.bad ? -EPROTO : st;
                }
            } else if (crc == -EINVAL || crc == -E2BIG || crc == -ENOTSUP) {
                rc = crc; /* the request itself: the same on every node */
            } else {
                for (unsigned j = 0; j < m; j++)
                    if (rank == 0 || status[idx[j]] < 0)
                        status[idx[j]] = crc < 0 ? crc : -EPROTO;
            }
            free(rctl);
        }
    }
    free(where);
    free(nw);
    free(idx);
    free(a);
    free(data);
    return rc;
}

/* One KV_GET of the keys idx[0..m) to node; fills the hits. */
static void get_from(struct ol_client *c, int node, const struct ol_client_kv_key *keys,
                     void *const *bufs, const uint64_t *caps, const unsigned *idx, unsigned m,
                     int64_t *result)
{
    size_t acap = 4 + (size_t)m * (4 + KV_MAX_KEY);
    uint64_t dcap = 0;
    for (unsigned j = 0; j < m; j++)
        dcap += caps[idx[j]];
    if (dcap > OL_NATIVE_MAX_DATA)
        dcap = OL_NATIVE_MAX_DATA;
    uint8_t *a = malloc(acap), *rctl = malloc((size_t)m * 12), *d = malloc(dcap ? dcap : 1);
    if (!a || !rctl || !d) {
        for (unsigned j = 0; j < m; j++)
            result[idx[j]] = -ENOMEM;
        goto out;
    }
    struct ol_wbuf w = {.p = a, .cap = acap};
    ol_wbuf_u32(&w, m);
    for (unsigned j = 0; j < m; j++)
        ol_wbuf_str(&w, keys[idx[j]].p, keys[idx[j]].len);
    struct olc_call k = {.op = OL_COP_KV_GET, .args = a, .args_len = w.len, .rctl = rctl,
                         .rctl_cap = (size_t)m * 12, .rdata = d, .rdata_cap = dcap,
                         .node = node};
    int rc = olc_call(c, &k);
    if (rc != (int)m) {
        for (unsigned j = 0; j < m; j++)
            result[idx[j]] = rc == -EMSGSIZE ? -EMSGSIZE : -ENOENT; /* a node down: misses */
        goto out;
    }
    struct ol_rbuf rb = {.p = rctl, .len = k.rctl_len};
    uint64_t off = 0;
    for (unsigned j = 0; j < m; j++) {
        int st = (int)ol_rbuf_u32(&rb);
        uint64_t size = ol_rbuf_u64(&rb);
        unsigned i = idx[j];
        if (rb.bad) {
            result[i] = -EPROTO;
        } else if (st == 0) {
            if (off + size > k.rdata_len) {
                result[i] = -EPROTO;
            } else if (size > caps[i]) {
                result[i] = -ENOSPC;
            } else {
                memcpy(bufs[i], d + off, size);
                result[i] = (int64_t)size;
            }
            off += size;
        } else {
            result[i] = st;
        }
    }
out:
    free(a);
    free(rctl);
    free(d);
}

OLC_API int ol_client_kv_get(struct ol_client *c, const struct ol_client_kv_key *keys,
                             void *const *bufs, const uint64_t *caps, unsigned n,
                             int64_t *result)
{
    if (!c || !keys_ok(keys, n) || !bufs || !caps || !result)
        return -EINVAL;
    unsigned r = atomic_load(&c->kv_replicas);
    int (*where)[2] = calloc(n, sizeof(*where));
    unsigned *nw = calloc(n, sizeof(*nw)), *idx = calloc(n, sizeof(*idx));
    if (!where || !nw || !idx) {
        free(where);
        free(nw);
        free(idx);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) {
        nw[i] = nodes_of(c, &keys[i], r, where[i]);
        result[i] = -ENOENT;
    }
    for (unsigned rank = 0; rank < r; rank++) {
        for (unsigned node = 0; node < c->nnodes; node++) {
            unsigned m = 0;
            for (unsigned i = 0; i < n; i++)
                if (rank < nw[i] && where[i][rank] == (int)node &&
                    (rank == 0 || result[i] == -ENOENT))
                    idx[m++] = i;
            if (m)
                get_from(c, (int)node, keys, bufs, caps, idx, m, result);
        }
    }
    int hits = 0;
    for (unsigned i = 0; i < n; i++)
        hits += result[i] >= 0;
    free(where);
    free(nw);
    free(idx);
    return hits;
}

/* MATCH_PREFIX (flags, lease) or RELEASE (op) of keys [from, from+m) on node. */
static int keys_op(struct ol_client *c, uint8_t op, int node, const struct ol_client_kv_key *keys,
                   unsigned m, int pin, unsigned lease_ms)
{
    size_t acap = 12 + (size_t)m * (4 + KV_MAX_KEY);
    uint8_t *a = malloc(acap);
    if (!a)
        return -ENOMEM;
    struct ol_wbuf w = {.p = a, .cap = acap};
    ol_wbuf_u32(&w, m);
    if (op == OL_COP_KV_MATCH_PREFIX) {
        ol_wbuf_u32(&w, pin ? OL_NATIVE_KV_PIN : 0);
        ol_wbuf_u32(&w, lease_ms);
    }
    for (unsigned j = 0; j < m; j++)
        ol_wbuf_str(&w, keys[j].p, keys[j].len);
    struct olc_call k = {.op = op, .args = a, .args_len = w.len, .node = node};
    int rc = olc_call(c, &k);
    free(a);
    return rc;
}

OLC_API int ol_client_kv_match_prefix(struct ol_client *c, const struct ol_client_kv_key *keys,
                                      unsigned n, int pin, unsigned lease_ms)
{
    if (!c || !keys_ok(keys, n))
        return -EINVAL;
    /* Runs of consecutive keys on one node, in order, until one falls short
     * (its node's primary copy: a replica's match is not asked). */
    unsigned done = 0;
    while (done < n) {
        int node[2];
        nodes_of(c, &keys[done], 1, node);
        unsigned run = 1;
        while (done + run < n) {
            int nn[2];
            nodes_of(c, &keys[done + run], 1, nn);
            if (nn[0] != node[0])
                break;
            run++;
        }
        int rc = keys_op(c, OL_COP_KV_MATCH_PREFIX, node[0], keys + done, run, pin, lease_ms);
        if (rc < 0)
            return olc_transport_error(rc) ? (int)done : rc; /* a node down: a miss there */
        done += (unsigned)rc;
        if ((unsigned)rc < run)
            break;
    }
    return (int)done;
}

OLC_API int ol_client_kv_release(struct ol_client *c, const struct ol_client_kv_key *keys,
                                 unsigned n)
{
    if (!c || !keys_ok(keys, n))
        return -EINVAL;
    int total = 0;
    unsigned done = 0;
    while (done < n) {
        int node[2];
        nodes_of(c, &keys[done], 1, node);
        unsigned run = 1;
        while (done + run < n) {
            int nn[2];
            nodes_of(c, &keys[done + run], 1, nn);
            if (nn[0] != node[0])
                break;
            run++;
        }
        int rc = keys_op(c, OL_COP_KV_RELEASE, node[0], keys + done, run, 0, 0);
        if (rc > 0)
            total += rc;
        done += run;
    }
    return total;
}

OLC_API int ol_client_kv_chain(const int64_t *tokens, size_t ntokens, size_t block_tokens,
                               const void *salt, size_t salt_len, int partial, uint8_t *out,
                               size_t out_keys)
{
    if ((!tokens && ntokens) || !block_tokens || (!out && out_keys))
        return -EINVAL;
    uint8_t root[OL_KV_KEY_BYTES];
    memset(root, 0, sizeof(root));
    if (salt) {
        int rc = ol_kv_hash_root(salt, salt_len, root);
        if (rc < 0)
            return rc;
    }
    return ol_kv_hash_chain64(root, tokens, ntokens, block_tokens, partial != 0,
                              (uint8_t(*)[OL_KV_KEY_BYTES])out, out_keys);
}
