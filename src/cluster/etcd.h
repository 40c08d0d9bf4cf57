/* A small etcd v3 client over etcd's JSON gateway (HTTP/1.1 POST to /v3/...).
 *
 * Why the gateway and not gRPC: the cluster layer makes a handful of calls a
 * second at most (lease renewals, map reads, one watch), so HTTP + JSON costs
 * nothing that matters, and libcurl + cJSON are small, packaged C libraries
 * where a gRPC stack would pull in C++.  etcd 3.4 serves the gateway on its
 * client port under /v3/ (3.3 used /v3beta/); keys and values travel base64
 * encoded, 64-bit integers as decimal strings.
 *
 * Threads: every call blocks (up to the per-call timeout, per endpoint tried),
 * so calls belong on a dedicated cluster thread, never on a loop thread.  A
 * client is used by one thread at a time (it keeps one libcurl handle and its
 * connection); threads that need etcd concurrently create a client each.
 * ol_etcd_watch_cancel() is the one call that may come from another thread.
 *
 * Endpoints: a call starts at the endpoint that last answered and moves to the
 * next one on a transport failure or an "unavailable" answer (no leader).  A
 * write (put, delete, txn) moves on only when nothing of the request was sent,
 * so it is never applied twice; when a write times out after it was sent its
 * outcome is unknown and the call returns -ETIMEDOUT (re-read to find out).
 * A call thus takes at most nendpoints * timeout_ms.
 *
 * Errors (0 on success, else negative):
 *   -ENOENT        the key, or the lease, does not exist
 *   -OL_ECASFAIL   a compare-and-swap found the key changed: not an error of
 *                  etcd or the network; re-read and try again
 *   -OL_ECOMPACTED the revision asked for has been compacted away
 *   -ETIMEDOUT     no answer within the timeout (a write may or may not have
 *                  been applied)
 *   -ECONNREFUSED  no endpoint accepted a connection
 *   -ECONNRESET    the connection broke mid-call, or a watch stream ended
 *   -EAGAIN        etcd answered "unavailable" (e.g. no leader) everywhere
 *   -EINVAL        bad arguments, or etcd called the request invalid
 *   -EPROTO        an answer that is not the JSON etcd sends
 *   -EMSGSIZE      an answer larger than OL_ETCD_MAX_RESPONSE
 *   -ENOSPC        etcd is out of space (its quota)
 *   -ENOMEM, -OL_EETCD (any other refusal; the message is logged)
 *
 * Limits: keys are NUL-free strings of up to OL_ETCD_MAX_KEY bytes; a value
 * up to OL_ETCD_MAX_VALUE bytes (etcd's own default request limit is 1.5 MiB);
 * a range returns at most `limit` keys (0: OL_ETCD_MAX_RANGE).
 */
#ifndef OL_CLUSTER_ETCD_H
#define OL_CLUSTER_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    OL_ETCD_MAX_ENDPOINTS = 16,
    OL_ETCD_MAX_KEY = 1024,
    OL_ETCD_MAX_VALUE = 1 << 20,
    OL_ETCD_MAX_RANGE = 10000,
    OL_ETCD_MAX_RESPONSE = 16 << 20,  /* bytes of one answer (a range) */
    OL_ETCD_MAX_WATCH_LINE = 4 << 20, /* bytes of one watch message */
};

struct ol_etcd;

/* endpoints: a comma-separated list of "http://host:port" (1..16).
 * timeout_ms: per attempt (connect + request + answer), >= 1. */
int ol_etcd_create(struct ol_etcd **out, const char *endpoints, unsigned timeout_ms);
void ol_etcd_destroy(struct ol_etcd *c);
/* Changes the per-attempt timeout (the member uses a shorter one for renewals). */
void ol_etcd_set_timeout(struct ol_etcd *c, unsigned timeout_ms);

/* One key-value pair.  key and value are NUL-terminated copies owned by the
 * pair (value may hold NULs: use value_len); release with ol_etcd_kv_clear. */
struct ol_etcd_kv {
    char *key;
    char *value;
    size_t value_len;
    int64_t create_rev; /* revision that created the key */
    int64_t mod_rev;    /* revision of its last change */
    int64_t version;    /* changes since creation, 1 after the first put */
    int64_t lease;      /* 0: none */
};
void ol_etcd_kv_clear(struct ol_etcd_kv *kv);

/* Reads one key.  *rev (may be NULL): the store's revision when read.
 * -ENOENT when it does not exist. */
int ol_etcd_get(struct ol_etcd *c, const char *key, struct ol_etcd_kv *kv, int64_t *rev);

/* Every key that starts with prefix, in key order ("" = all keys), at most
 * limit of them (0: OL_ETCD_MAX_RANGE); more is set when etcd has more.
 * Release with ol_etcd_range_clear. */
struct ol_etcd_range {
    struct ol_etcd_kv *kvs;
    size_t n;
    bool more;
    int64_t rev; /* the store's revision when read: watch from rev + 1 */
};
int ol_etcd_get_prefix(struct ol_etcd *c, const char *prefix, size_t limit,
                       struct ol_etcd_range *r);
void ol_etcd_range_clear(struct ol_etcd_range *r);

/* Sets key to (value, len), attached to lease (0: none; -ENOENT when the
 * lease does not exist).  *rev (may be NULL): the revision of the write. */
int ol_etcd_put(struct ol_etcd *c, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *rev);

/* Deletes key (prefix = false) or every key under it.  *deleted (may be
 * NULL): how many were.  Deleting nothing is not an error. */
int ol_etcd_delete(struct ol_etcd *c, const char *key, bool prefix, int64_t *deleted);

/* Compare-and-swap on one key, in one etcd transaction: if the comparison
 * holds, put (value != NULL) or delete (value == NULL) the key and return 0
 * (*rev: the revision of the write); otherwise change nothing and return
 * -OL_ECASFAIL.
 *   OL_ETCD_IF_MOD      the key's mod_revision equals `want` (0: absent)
 *   OL_ETCD_IF_VERSION  its version equals `want` (0: absent)
 *   OL_ETCD_IF_ABSENT   the key does not exist (create-only)            */
enum ol_etcd_if { OL_ETCD_IF_MOD, OL_ETCD_IF_VERSION, OL_ETCD_IF_ABSENT };
int ol_etcd_cas(struct ol_etcd *c, const char *key, enum ol_etcd_if cond, int64_t want,
                const void *value, size_t len, int64_t lease, int64_t *rev);

/* Compacts the history before rev (watches from earlier revisions then end
 * with -OL_ECOMPACTED).  Operators and tests; the cluster layer never needs it. */
int ol_etcd_compact(struct ol_etcd *c, int64_t rev);

/* Leases.  grant: a new lease of ttl_s seconds (etcd may raise a very short
 * TTL to its minimum; *granted_s says what it gave).  keepalive: one renewal;
 * *ttl_s is the TTL it now has again, -ENOENT when it has expired or never
 * existed.  revoke: ends it and deletes its keys (-ENOENT if gone). */
int ol_etcd_lease_grant(struct ol_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_s);
int ol_etcd_lease_keepalive(struct ol_etcd *c, int64_t id, int64_t *ttl_s);
int ol_etcd_lease_revoke(struct ol_etcd *c, int64_t id);

/* Watches: the changes under a prefix from a revision on, over a streaming
 * HTTP answer.  Driven by polling so that one thread can watch while it does
 * other calls (the member renews its lease between polls):
 *
 *   ol_etcd_watch_open()   starts the request (no waiting); the watch has its
 *                          own connection, the client is not used meanwhile
 *   ol_etcd_watch_poll()   runs it for up to timeout_ms, calling fn for each
 *                          event in revision order; returns 0 while it runs,
 *                          a negative code once it has ended, for good:
 *      -OL_ECOMPACTED  start revision compacted (ol_etcd_watch_compacted
 *                      gives the oldest revision left): re-read and re-watch
 *      -ECANCELED      ol_etcd_watch_cancel() was called
 *      -ECONNRESET, -ECONNREFUSED, -OL_EETCD: the stream broke or etcd ended
 *                      it; resume from ol_etcd_watch_next_rev()
 *      fn's own negative return, which also ends the watch
 *   ol_etcd_watch_cancel() any thread, also from fn: ends the watch soon
 *                          (wakes a poll that is waiting)
 *   ol_etcd_watch_close()  frees it (after the last poll returned)
 *
 * The watch keeps a pointer to its client (to move the client to the next
 * endpoint when the stream cannot connect): close watches before the client.
 * An event's kv is borrowed for the duration of fn.  A delete carries the key
 * and mod_rev only.  A stream that was idle for long is not an error; a
 * silent etcd is noticed by the caller's other calls (lease renewals). */
enum ol_etcd_event_type { OL_ETCD_PUT, OL_ETCD_DELETE };
struct ol_etcd_event {
    enum ol_etcd_event_type type;
    const struct ol_etcd_kv *kv;
};
typedef int (*ol_etcd_watch_fn)(void *arg, const struct ol_etcd_event *ev);

struct ol_etcd_watch;
int ol_etcd_watch_open(struct ol_etcd *c, const char *prefix, int64_t start_rev,
                       ol_etcd_watch_fn fn, void *arg, struct ol_etcd_watch **out);
int ol_etcd_watch_poll(struct ol_etcd_watch *w, unsigned timeout_ms);
void ol_etcd_watch_cancel(struct ol_etcd_watch *w);
void ol_etcd_watch_close(struct ol_etcd_watch *w);
/* The revision after the last event delivered (start_rev before any). */
int64_t ol_etcd_watch_next_rev(const struct ol_etcd_watch *w);
/* After -OL_ECOMPACTED: the compaction revision etcd reported. */
int64_t ol_etcd_watch_compacted(const struct ol_etcd_watch *w);
/* True once etcd confirmed the watch is in place. */
bool ol_etcd_watch_created(const struct ol_etcd_watch *w);

#endif
