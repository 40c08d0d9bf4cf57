/* Vouching: how a node that cannot renew its etcd lease tells "etcd is down
 * for the cluster" from "this node is cut off" (cluster/member.h, "When etcd
 * is down", has the argument; this file has the rule and its wire form).
 *
 * A vouch is one peer's answer to the question "can you reach etcd?", asked
 * over the drive protocol (OL_WOP_MEMBER, docs/PROTOCOL.md): the peer's node
 * name, whether it holds a live lease right now, and how long ago etcd last
 * answered it.  A peer is *without etcd* when etcd has not answered it for
 * at least quiet_ms (the member's choice, TTL/3 + margin/2: longer than one
 * renewal period, so a healthy peer, which hears from etcd every TTL/3,
 * never is).  Only
 * such an answer is a vouch; an answer that shows etcd reachable cancels the
 * peer's earlier vouches at once.
 *
 * The counting rule (the tally).  A vouch counts from the moment the asker
 * sent the question (its CLOCK_MONOTONIC, taken before the send: a slow
 * answer only shortens it) for period_ms, and only for the node named in it
 * (one entry per name; the asker's own name never counts as a peer).  The
 * asker may acknowledge writes on vouches at time T when
 *
 *        1 (itself) + #{peers whose vouch counts at T}  >  nmap / 2
 *
 * where nmap is the number of nodes in the cluster map, the asker included.
 * ol_vouch_tally_until() gives the last such T (the need-th latest expiry,
 * need = nmap / 2 peers): 2 nodes need the one peer, 3 need one of two, 4 and
 * 5 need two, and a map of one node needs nobody (nmap 0, an unknown map,
 * allows nothing).
 *
 * Threads: the tally belongs to one thread (the member's vouch thread); the
 * codec functions are pure.  No allocation.
 */
#ifndef OL_CLUSTER_VOUCH_H
#define OL_CLUSTER_VOUCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/map.h"
#include "net/wire.h"

enum {
    OL_VOUCH_MAX_PEERS = OL_MAP_MAX_NODES, /* tally entries */
    OL_VOUCH_PERIOD_MS = 1500,             /* default: how long a vouch counts */
    OL_VOUCH_ROUND_MS = 250,               /* default: one round of questions per this */
};

/* since_etcd_ms of a node that etcd never answered (or past 49 days). */
#define OL_VOUCH_NEVER UINT32_MAX

/* One answer, as the asker keeps it. */
struct ol_vouch {
    char name[OL_MAP_MAX_NAME + 1]; /* the answering node */
    bool lease_live;                /* it holds a live lease (member.h's deadline) */
    uint32_t since_etcd_ms;         /* since etcd last answered it; OL_VOUCH_NEVER */
    int64_t asked_ns;               /* the asker's CLOCK_MONOTONIC before the send */
};

/* Asks the other nodes of the map, once each, and fills out[0..cap) with the
 * answers that came (name, lease_live, since_etcd_ms, asked_ns; peers that
 * did not answer are left out); *nmap gets the number of nodes in the map,
 * the asker included (0: no map known yet).  Returns the number of answers,
 * or a negative errno (nothing counts from this round).  Called on the
 * member's vouch thread; may block (bounded by the callee: a round should
 * end well within OL_VOUCH_PERIOD_MS). */
typedef int (*ol_vouch_fn)(void *arg, struct ol_vouch *out, size_t cap, size_t *nmap);

/* Whether the answer is a vouch: its node has gone quiet_ms without etcd.
 * lease_live does not decide: when etcd stops answering, the nodes' lease
 * deadlines end up to one renewal period apart, and a node whose deadline
 * passes first must not fence for lack of peers whose leases merely have
 * not run out yet although they too have been without etcd for that long. */
bool ol_vouch_is_vouch(const struct ol_vouch *v, unsigned quiet_ms);

struct ol_vouch_tally {
    int64_t period_ns;
    unsigned quiet_ms;
    size_t nmap;      /* as the last round said */
    int64_t round_ns; /* the last round's earliest asked_ns (0: none) */
    size_t n;
    struct {
        char name[OL_MAP_MAX_NAME + 1];
        int64_t until_ns; /* the vouch counts while CLOCK_MONOTONIC < this */
    } e[OL_VOUCH_MAX_PEERS];
};

void ol_vouch_tally_init(struct ol_vouch_tally *t, unsigned period_ms, unsigned quiet_ms);
/* Forgets every vouch (etcd answers this node again). */
void ol_vouch_tally_clear(struct ol_vouch_tally *t);
/* Takes in one round: the answers v[0..n) (self: the asker's name, whose
 * answers are ignored), round_ns the time the round began (the earliest
 * asked_ns, used for a map of one), nmap as ol_vouch_fn gave it.  A vouch
 * sets its peer's expiry to asked_ns + period (never earlier than one it
 * already has); a non-vouch removes the peer's entry. */
void ol_vouch_tally_add(struct ol_vouch_tally *t, const char *self, const struct ol_vouch *v,
                        size_t n, size_t nmap, int64_t round_ns);
/* The CLOCK_MONOTONIC time until which the rule above holds with the
 * vouches taken in (0: it does not hold at all). */
int64_t ol_vouch_tally_until(const struct ol_vouch_tally *t);
/* The peers whose vouch counts at now_ns. */
size_t ol_vouch_tally_count(const struct ol_vouch_tally *t, int64_t now_ns);

/* ---- the wire form (OL_WOP_MEMBER; docs/PROTOCOL.md) ----
 * Request control bytes: the cluster name (a byte string, 1..63 bytes; a
 * node of another cluster answers -EXDEV).  Reply control bytes: the node's
 * name (a byte string, 1..63 bytes, no NUL), a u8 of flags (1: lease_live;
 * other bits 0, ignored) and since_etcd_ms (u32).  Trailing bytes are
 * ignored (arguments only grow at the end). */
enum { OL_VOUCH_WIRE_MAX = 4 + OL_MAP_MAX_NAME + 1 + 4 };
/* Encodes v's name, lease_live and since_etcd_ms into w. */
void ol_vouch_encode(const struct ol_vouch *v, struct ol_wbuf *w);
/* Decodes a reply's control bytes into v (asked_ns untouched): 0 or
 * -EPROTO (truncated, an empty or long name, a NUL in it). */
int ol_vouch_decode(const void *ctl, size_t len, struct ol_vouch *v);

#endif
