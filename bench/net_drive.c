/* The UCX shard path, measured: a drive server (net/drive_server.h) over one
 * in-memory drive (ec/memdrive.h) in a child process, and remote drives
 * (ec/remotedrive.h) in this one, on 127.0.0.1.  UCX picks the transport
 * from the environment (UCX_TLS), as in production.  bench/net_drive.sh runs
 * it next to ucx_perftest on the same transports and sizes.
 *
 *   net_drive [-t THREADS] [-d SECONDS] [-s SIZE[,SIZE...]]
 *
 * For each size, THREADS client threads share one ol_net (as the erasure
 * set's fibers do) and each loops for SECONDS:
 *   write  shard_begin, shard_write(SIZE), shard_commit, then mark_complete
 *          (4 calls; the mark frees the version before, so the in-memory
 *          drive holds one version per thread whatever the duration)
 *   read   read_shard(SIZE) of the thread's own key
 * and prints one line per op and size:
 *   net_drive op=read size=1048576 threads=8 seconds=2.00 ops=1234 mibps=617.0
 * MiB = 2^20 bytes (ucx_perftest's "MB").  Exits 1 when a call fails.
 *
 * This is a benchmark, not a test: nothing checks the numbers.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "core/hlc.h"
#include "ec/memdrive.h"
#include "ec/remotedrive.h"
#include "net/drive_server.h"
#include "net/net.h"

enum { MAX_THREADS = 256, MAX_SIZES = 16 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the server (child process) ---- */

/* Serves one memdrive until the parent closes `hold` (or dies). */
static int serve(int port_fd, int hold)
{
    struct ol_memdrive *md = NULL;
    struct ol_net *net = NULL;
    struct ol_drive_server *srv = NULL;
    int rc = ol_memdrive_create(&md);
    if (rc == 0)
        rc = ol_net_create(&(struct ol_net_opts){0}, &net);
    if (rc == 0) {
        struct ol_drive d = ol_memdrive_drive(md);
        struct ol_drive_server_opts o = {
            .net = net, .host = "127.0.0.1", .drives = &d, .ndrives = 1};
        rc = ol_drive_server_create(&o, &srv);
    }
    uint16_t port = rc == 0 ? ol_drive_server_port(srv) : 0;
    if (write(port_fd, &port, sizeof(port)) != sizeof(port))
        rc = -EIO;
    close(port_fd);
    if (rc == 0) {
        char c;
        while (read(hold, &c, 1) < 0 && errno == EINTR)
            ;
    }
    ol_drive_server_destroy(srv);
    if (net)
        ol_net_destroy(net);
    if (md)
        ol_memdrive_destroy(md);
    return rc == 0 ? 0 : 1;
}

/* ---- the client ---- */

struct worker {
    pthread_t t;
    struct ol_drive dr;
    unsigned idx;
    size_t size;
    bool read;
    double deadline;
    uint8_t *buf;
    uint64_t stamp;
    struct ol_version_id vid;
    uint64_t ops;
    int err;
};

/* One shard write: begin, write, commit, mark_complete. */
static int write_one(struct worker *w, const char *key)
{
    const struct ol_drive_ops *ops = w->dr.ops;
    void *wr = NULL;
    int rc = ops->shard_begin(w->dr.d, "bench", key, strlen(key), &wr);
    if (rc < 0)
        return rc;
    if ((rc = ops->shard_write(wr, w->buf, w->size)) < 0) {
        ops->shard_abort(wr);
        return rc;
    }
    struct ol_shard_meta sm = {.k = 1, .m = 0, .unit_bytes = 65536, .size = w->size, .mtime_ns = 1};
    ol_version_id_make(&sm.vid, ++w->stamp, 1, w->idx);
    if ((rc = ops->shard_commit(wr, &sm, NULL, 0)) < 0)
        return rc;
    w->vid = sm.vid;
    return ops->mark_complete(w->dr.d, "bench", key, strlen(key), &sm.vid);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char key[32];
    snprintf(key, sizeof(key), "key-%u", w->idx);
    int rc = 0;
    while (rc >= 0 && now_s() < w->deadline) {
        if (w->read)
            rc = w->dr.ops->read_shard(w->dr.d, "bench", key, strlen(key), &w->vid, 0, w->size,
                                       w->buf);
        else
            rc = write_one(w, key);
        w->ops += rc >= 0;
    }
    w->err = rc < 0 ? rc : 0;
    return NULL;
}

/* Runs nt threads of one op for secs; prints its line.  0 or the first
 * error. */
static int run(struct worker *ws, unsigned nt, size_t size, bool read, double secs)
{
    double t0 = now_s();
    for (unsigned i = 0; i < nt; i++) {
        ws[i].size = size;
        ws[i].read = read;
        ws[i].ops = 0;
        ws[i].err = 0;
        ws[i].deadline = t0 + secs;
        if (pthread_create(&ws[i].t, NULL, worker_main, &ws[i]) != 0)
            return -EAGAIN;
    }
    uint64_t ops = 0;
    int err = 0;
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(ws[i].t, NULL);
        ops += ws[i].ops;
        if (ws[i].err && !err)
            err = ws[i].err;
    }
    double dt = now_s() - t0;
    printf("net_drive op=%s size=%zu threads=%u seconds=%.2f ops=%llu mibps=%.1f\n",
           read ? "read" : "write", size, nt, dt, (unsigned long long)ops,
           (double)ops * (double)size / dt / (1024.0 * 1024.0));
    fflush(stdout);
    return err;
}

static int client(uint16_t port, unsigned nt, double secs, const size_t *sizes, unsigned nsizes)
{
    struct ol_net *net = NULL;
    struct ol_remotedrive *rd = NULL;
    struct worker *ws = calloc(nt, sizeof(*ws));
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    int rc = ws ? ol_net_create(&(struct ol_net_opts){.timeout_ms = 30000}, &net) : -ENOMEM;
    if (rc == 0)
        rc = ol_remotedrive_create(&(struct ol_remotedrive_opts){.net = net, .addr = addr}, &rd);
    if (rc == 0)
        rc = ol_remotedrive_ping(rd);
    size_t maxsize = 0;
    for (unsigned i = 0; i < nsizes; i++)
        maxsize = sizes[i] > maxsize ? sizes[i] : maxsize;
    for (unsigned i = 0; rc == 0 && i < nt; i++) {
        ws[i].dr = ol_remotedrive_drive(rd);
        ws[i].idx = i;
        ws[i].buf = malloc(maxsize);
        if (!ws[i].buf)
            rc = -ENOMEM;
        else
            memset(ws[i].buf, (int)i + 1, maxsize);
    }
    for (unsigned s = 0; rc == 0 && s < nsizes; s++) {
        rc = run(ws, nt, sizes[s], false, secs);
        /* The last write of each thread (of this size) is what it reads. */
        if (rc == 0)
            rc = run(ws, nt, sizes[s], true, secs);
    }
    if (rc < 0)
        fprintf(stderr, "net_drive: %s\n", ol_strerror(rc));
    for (unsigned i = 0; ws && i < nt; i++)
        free(ws[i].buf);
    free(ws);
    ol_remotedrive_destroy(rd);
    if (net)
        ol_net_destroy(net);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned nt = 8;
    double secs = 2.0;
    size_t sizes[MAX_SIZES] = {64 << 10, 1 << 20, 4 << 20};
    unsigned nsizes = 3;
    int opt;
    while ((opt = getopt(argc, argv, "t:d:s:")) != -1) {
        switch (opt) {
        case 't':
            nt = (unsigned)atoi(optarg);
            break;
        case 'd':
            secs = atof(optarg);
            break;
        case 's': {
            nsizes = 0;
            for (char *p = optarg; *p && nsizes < MAX_SIZES;) {
                char *end;
                sizes[nsizes++] = strtoull(p, &end, 0);
                p = *end == ',' ? end + 1 : end;
                if (end == p && *end)
                    break;
            }
            break;
        }
        default:
            fprintf(stderr, "usage: %s [-t THREADS] [-d SECONDS] [-s SIZE[,SIZE...]]\n", argv[0]);
            return 2;
        }
    }
    if (nt == 0 || nt > MAX_THREADS || secs <= 0 || nsizes == 0)
        return 2;
    for (unsigned i = 0; i < nsizes; i++)
        if (sizes[i] == 0 || sizes[i] > OL_WIRE_MAX_DATA)
            return 2;

    /* The server forks before anything of UCX exists in this process. */
    int port_pipe[2], hold_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(hold_pipe) != 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(port_pipe[0]);
        close(hold_pipe[1]);
        _exit(serve(port_pipe[1], hold_pipe[0]));
    }
    close(port_pipe[1]);
    close(hold_pipe[0]);
    uint16_t port = 0;
    ssize_t n = read(port_pipe[0], &port, sizeof(port));
    close(port_pipe[0]);
    int rc = n == sizeof(port) && port ? client(port, nt, secs, sizes, nsizes) : -EIO;
    close(hold_pipe[1]); /* the server stops */
    int status = 0;
    waitpid(pid, &status, 0);
    return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
