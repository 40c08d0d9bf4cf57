/* Serves a table of local drives (ec/drive.h) to remote peers over the
 * drive protocol (net/wire.h, docs/PROTOCOL.md "Drive protocol (UCX)");
 * ec/remotedrive.h is the other end.
 *
 * The server listens on an ol_net (net/net.h).  The net thread only queues
 * the requests it receives; a pool of worker threads decodes them, runs the
 * drive op (which may block on disk) and answers.  A drive is named by its
 * index in the table given at creation.
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

/* Tests: while paused, workers take no request (the server stops answering,
 * its net thread still runs). */
void ol_drive_server_pause(struct ol_drive_server *srv, bool paused);
/* Writers open now. */
unsigned ol_drive_server_writers(struct ol_drive_server *srv);

#endif
