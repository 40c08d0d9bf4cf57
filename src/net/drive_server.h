/* Serves a table of local drives (ec/drive.h) to remote peers over the
 * drive protocol (net/wire.h, docs/PROTOCOL.md "Drive protocol (UCX)");
 * ec/remotedrive.h is the other end.
 *
 * The server listens on an ol_net (net/net.h).  The net thread only queues
 * the requests it receives.  A request whose data is at most
 * OL_DRIVE_SERVER_FIBER_DATA bytes (every op but a large shard write) runs in
 * a fiber on the server's own loop thread (core/loop.h): a drive op that
 * waits on the disk (a store's index commit) parks its fiber and holds no
 * thread, so every op in flight on the node waits in the same group commit,
 * and a small op costs no thread hand-off beyond the loop's.  Larger requests
 * (their CRC and copies take a core for a while) and the overflow of the
 * loop (fiber pool or inbox full) go to a pool of worker threads.  Either
 * way the request is decoded, the drive op run (it may block on disk) and
 * answered.  The loop's id is OL_DRIVE_SERVER_LOOP_ID, past any server
 * loop's: the stores see it as a plain thread for their per-loop slots.  A
 * drive is named by its index in the table given at creation.
 *
 * Shard writers.  A remote shard_begin opens a writer on the drive and
 * answers a handle (an id that is never reused while the server lives);
 * shard_write appends bytes at the offset the client states (a write at any
 * other offset fails the writer with -EIO, so a lost or repeated message is
 * never taken as data); shard_commit / shard_abort consume the writer.  A
 * writer is aborted when it stays unused for writer_idle_ms, when the
 * connection that opened it goes away, and when the server is destroyed.
 * At most OL_DRIVE_SERVER_MAX_WRITERS are open (shard_begin answers -EAGAIN
 * beyond).
 *
 * Backpressure: at most OL_DRIVE_SERVER_QUEUE requests wait for a worker;
 * beyond, requests are answered -EAGAIN at once.
 *
 * Threads: create and destroy from one thread; the drives must accept calls
 * from any thread (the contract of ec/drive.h).
 */
#ifndef OL_NET_DRIVE_SERVER_H
#define OL_NET_DRIVE_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "ec/drive.h"
#include "net/net.h"

enum {
    OL_DRIVE_SERVER_MAX_DRIVES = 256,
    OL_DRIVE_SERVER_MAX_WRITERS = 1024,
    OL_DRIVE_SERVER_QUEUE = 8192,
    OL_DRIVE_SERVER_WORKERS = 4,            /* default */
    OL_DRIVE_SERVER_FIBERS = 1024,          /* fibers of the loop (ops in flight there) */
    /* Larger request data goes to the workers.  Not more: a store write
     * that fills its buffer in a fiber of this loop answered -EAGAIN (a
     * 2 MiB PUT through a cluster; cause not found yet). */
    OL_DRIVE_SERVER_FIBER_DATA = 256 << 10,
    OL_DRIVE_SERVER_LOOP_ID = 1 << 16,      /* the loop's ol_loop_id */
    OL_DRIVE_SERVER_WRITER_IDLE_MS = 60000, /* default */
    /* Per-call bounds of the replies (the client asks again for more). */
    OL_DRIVE_SERVER_MAX_VERSIONS = 4096,
    OL_DRIVE_SERVER_MAX_LIST = 512,
};

struct ol_drive_server;

struct ol_drive_server_opts {
    struct ol_net *net;            /* borrowed; outlives the server */
    const char *host;              /* listening address, e.g. "127.0.0.1" */
    uint16_t port;                 /* 0: any free port (ol_drive_server_port) */
    const struct ol_drive *drives; /* copied; the drives are borrowed */
    unsigned ndrives;
    unsigned workers;        /* 0: OL_DRIVE_SERVER_WORKERS */
    bool no_fibers;          /* tests: every request to the worker threads */
    unsigned writer_idle_ms; /* 0: OL_DRIVE_SERVER_WRITER_IDLE_MS */
    /* OL_WOP_MEMBER (cluster/vouch.h): answered on the net thread, ahead of
     * the queue, so that a busy disk never delays it.  member gets the
     * asker's cluster name and returns 0 with the reply's control bytes in
     * *ctl (malloc'd; consumed) and *ctl_len, or a negative errno (the
     * reply's status).  It must not block.  NULL: -EOPNOTSUPP. */
    int (*member)(void *arg, const char *cluster, void **ctl, size_t *ctl_len);
    void *member_arg;
};

/* Starts the workers and listens.  -EINVAL, -EADDRINUSE, -ENOMEM. */
int ol_drive_server_create(const struct ol_drive_server_opts *opts, struct ol_drive_server **out);
/* Stops listening (clients see their connections reset), answers what is
 * queued, aborts every open writer and frees the server.  Call before the
 * ol_net goes. */
void ol_drive_server_destroy(struct ol_drive_server *srv);
uint16_t ol_drive_server_port(struct ol_drive_server *srv);

/* Tests: while paused, workers take no request and requests received go to
 * them (the server stops answering, its net thread still runs; ops already
 * running in fibers finish). */
void ol_drive_server_pause(struct ol_drive_server *srv, bool paused);
/* Tests: the idle time after which a writer is aborted, from now on (a test
 * of the idle sweep lowers it only for as long as it needs: a short one
 * aborts a loaded machine's writers between two of their writes). */
void ol_drive_server_set_writer_idle(struct ol_drive_server *srv, unsigned idle_ms);
/* Writers open now. */
unsigned ol_drive_server_writers(struct ol_drive_server *srv);

#endif
