/* Shared by the drive-protocol tests of one process (test_hlc.c,
 * test_auth.c): "nodes" (an ol_net with its own clock, a wall clock offset
 * from the real one, and a key), a drive server over memory drives, and
 * remote drives to it.  Exits 77 (skipped) when UCX cannot start. */
#ifndef OL_TEST_NET_FIXTURE_H
#define OL_TEST_NET_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/hlc.h"
#include "ec/memdrive.h"
#include "ec/remotedrive.h"
#include "net/drive_server.h"
#include "net/net.h"

enum { FIX_MAX_DRIVES = 8 };

/* A wall clock `offset_ms` off the real one. */
struct skew {
    int64_t offset_ms;
};

static inline int64_t skewed_ms(void *ctx)
{
    const struct skew *s = ctx;
    return ol_wall_ns() / 1000000 + s->offset_ms;
}

struct node {
    struct skew skew;
    struct ol_hlc hlc;
    struct ol_net *net;
};

/* key: NULL for the all-zero key. */
static inline void node_start_key(struct node *n, uint32_t id, int64_t offset_ms,
                                  const uint8_t *key)
{
    memset(n, 0, sizeof(*n));
    n->skew.offset_ms = offset_ms;
    ol_hlc_init(&n->hlc, id, id * 7919u, skewed_ms, &n->skew);
    struct ol_net_opts o = {.timeout_ms = 3000, .hlc = &n->hlc, .key = key};
    if (ol_net_create(&o, &n->net) < 0) {
        fprintf(stderr, "UCX did not start: skipped\n");
        exit(77);
    }
}

struct server {
    struct node node;
    struct ol_drive_server *srv;
    struct ol_memdrive *md[FIX_MAX_DRIVES];
    unsigned ndrives;
    char addr[64];
};

static inline void server_start_key(struct server *s, unsigned ndrives, int64_t offset_ms,
                                    const uint8_t *key)
{
    node_start_key(&s->node, 1, offset_ms, key);
    struct ol_drive drives[FIX_MAX_DRIVES];
    s->ndrives = ndrives;
    for (unsigned i = 0; i < ndrives; i++) {
        if (ol_memdrive_create(&s->md[i]) < 0)
            abort();
        drives[i] = ol_memdrive_drive(s->md[i]);
    }
    struct ol_drive_server_opts o = {
        .net = s->node.net, .host = "127.0.0.1", .drives = drives, .ndrives = ndrives};
    int rc = ol_drive_server_create(&o, &s->srv);
    if (rc < 0) {
        fprintf(stderr, "drive server: %s\n", ol_strerror(rc));
        exit(1);
    }
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%u", ol_drive_server_port(s->srv));
}

static inline void server_stop(struct server *s)
{
    ol_drive_server_destroy(s->srv);
    ol_net_destroy(s->node.net);
    for (unsigned i = 0; i < s->ndrives; i++)
        ol_memdrive_destroy(s->md[i]);
}

static inline struct ol_remotedrive *rdrive(struct node *n, const char *addr, unsigned d)
{
    struct ol_remotedrive_opts o = {.net = n->net, .addr = addr, .drive = d};
    struct ol_remotedrive *rd;
    if (ol_remotedrive_create(&o, &rd) < 0)
        abort();
    return rd;
}

#endif
