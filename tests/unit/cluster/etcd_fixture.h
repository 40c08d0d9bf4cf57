/* A real etcd for the cluster tests: one single-member etcd on 127.0.0.1,
 * with free client and peer ports and a scratch data directory.
 *
 *   etcd_fixture_start(&fx)  0, or 77 (skip: no etcd binary; the reason is
 *                            printed), or 1 (it would not start: its log tail
 *                            is printed)
 *   etcd_fixture_stop(&fx)   SIGKILL, wait, remove the data directory
 *   etcd_fixture_pause/resume: SIGSTOP / SIGCONT (an etcd that stops
 *                            answering, as a hung or partitioned one does)
 *   etcd_fixture_restart     kill it and start it again on the same ports and
 *                            data (an etcd that went away and came back)
 *
 * The child is started with PR_SET_PDEATHSIG = SIGKILL, so a test that
 * crashes does not leave an etcd behind; an atexit handler stops it on every
 * ordinary exit too.  The binary is $OL_ETCD, else etcd on PATH. */
#ifndef OL_TESTS_UNIT_CLUSTER_ETCD_FIXTURE_H
#define OL_TESTS_UNIT_CLUSTER_ETCD_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "core/clock.h"

#include "check.h"

struct etcd_fixture {
    char bin[512];
    char root[256]; /* scratch dir: data/ and etcd.log */
    char url[64];   /* http://127.0.0.1:P */
    unsigned client_port, peer_port;
    pid_t pid;
    bool paused;
};

static struct etcd_fixture *etcd_fixture_live; /* for the atexit handler */

/* A port the kernel calls free now (bound to port 0, then released).  Two
 * tests may race for it; etcd then fails to start and the test says so. */
static inline unsigned etcd_fixture_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    unsigned port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static inline bool etcd_fixture_find(struct etcd_fixture *fx)
{
    const char *env = getenv("OL_ETCD");
    if (env && *env) {
        snprintf(fx->bin, sizeof(fx->bin), "%s", env);
        return access(fx->bin, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s:/usr/bin:/usr/local/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(fx->bin, sizeof(fx->bin), "%s/etcd", d);
        if (access(fx->bin, X_OK) == 0)
            return true;
    }
    return false;
}

static inline void etcd_fixture_log_tail(const struct etcd_fixture *fx)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "tail -n 15 '%s/etcd.log' >&2", fx->root);
    if (system(cmd) != 0)
        fprintf(stderr, "(no etcd log)\n");
}

static inline int etcd_fixture_spawn(struct etcd_fixture *fx)
{
    char data[300], log[300], client[64], peer[64], cluster[96];
    snprintf(data, sizeof(data), "%s/data", fx->root);
    snprintf(log, sizeof(log), "%s/etcd.log", fx->root);
    snprintf(client, sizeof(client), "http://127.0.0.1:%u", fx->client_port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%u", fx->peer_port);
    snprintf(cluster, sizeof(cluster), "default=%s", peer);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* etcd dies with the test, whatever way the test ends */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(fx->bin, fx->bin, "--name", "default", "--data-dir", data, "--listen-client-urls",
              client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
              "warn", (char *)NULL);
        _exit(127);
    }
    fx->pid = pid;
    fx->paused = false;
    /* Ready when a read answers (the client port opens before etcd has a
     * leader; a range needs one). */
    struct ol_etcd *c = NULL;
    if (ol_etcd_create(&c, fx->url, 500) < 0)
        return -ENOMEM;
    uint64_t end = ol_mono_ms() + 15000;
    int rc = -ETIMEDOUT;
    while (ol_mono_ms() < end) {
        struct ol_etcd_range r;
        if (ol_etcd_get_prefix(c, "/ready-probe", 1, &r) == 0) {
            ol_etcd_range_clear(&r);
            rc = 0;
            break;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fx->pid = 0;
            rc = -ECHILD;
            break;
        }
        usleep(50 * 1000);
    }
    ol_etcd_destroy(c);
    return rc;
}

static inline void etcd_fixture_kill(struct etcd_fixture *fx)
{
    if (fx->pid <= 0)
        return;
    kill(fx->pid, SIGKILL);
    if (fx->paused)
        kill(fx->pid, SIGCONT);
    waitpid(fx->pid, NULL, 0);
    fx->pid = 0;
    fx->paused = false;
}

static inline void etcd_fixture_stop(struct etcd_fixture *fx)
{
    etcd_fixture_kill(fx);
    if (fx->root[0]) {
        check_rm_rf(fx->root);
        fx->root[0] = '\0';
    }
    etcd_fixture_live = NULL;
}

static inline void etcd_fixture_atexit(void)
{
    if (etcd_fixture_live)
        etcd_fixture_stop(etcd_fixture_live);
}

static inline int etcd_fixture_start(struct etcd_fixture *fx, const char *name)
{
    memset(fx, 0, sizeof(*fx));
    if (!etcd_fixture_find(fx)) {
        fprintf(stderr, "SKIP: no etcd binary (install etcd-server, or set OL_ETCD)\n");
        return 77;
    }
    if (check_mkdtemp(fx->root, sizeof(fx->root), name) < 0)
        return 77;
    etcd_fixture_live = fx;
    atexit(etcd_fixture_atexit);
    for (int tries = 0; tries < 3; tries++) {
        fx->client_port = etcd_fixture_free_port();
        fx->peer_port = etcd_fixture_free_port();
        if (!fx->client_port || !fx->peer_port || fx->client_port == fx->peer_port)
            continue;
        snprintf(fx->url, sizeof(fx->url), "http://127.0.0.1:%u", fx->client_port);
        int rc = etcd_fixture_spawn(fx);
        if (rc == 0)
            return 0;
        fprintf(stderr, "etcd did not start (%s); its log:\n", ol_strerror(rc));
        etcd_fixture_log_tail(fx);
        etcd_fixture_kill(fx);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s/data'", fx->root);
        if (system(cmd) != 0)
            break;
    }
    etcd_fixture_stop(fx);
    return 1;
}

static inline void etcd_fixture_pause(struct etcd_fixture *fx)
{
    if (fx->pid <= 0 || fx->paused || kill(fx->pid, SIGSTOP) != 0)
        return;
    /* kill() returns before the child has stopped; wait until it has, so
     * the next request surely meets a silent etcd */
    int status;
    while (waitpid(fx->pid, &status, WUNTRACED) < 0 && errno == EINTR)
        ;
    fx->paused = true;
}

static inline void etcd_fixture_resume(struct etcd_fixture *fx)
{
    if (fx->pid <= 0 || !fx->paused || kill(fx->pid, SIGCONT) != 0)
        return;
    int status;
    while (waitpid(fx->pid, &status, WCONTINUED) < 0 && errno == EINTR)
        ;
    fx->paused = false;
}

/* Kills etcd and starts it again on the same ports and data.  0 or 1. */
static inline int etcd_fixture_restart(struct etcd_fixture *fx)
{
    etcd_fixture_kill(fx);
    int rc = etcd_fixture_spawn(fx);
    if (rc < 0) {
        fprintf(stderr, "etcd did not restart (%s)\n", ol_strerror(rc));
        etcd_fixture_log_tail(fx);
        return 1;
    }
    return 0;
}

/* Waits up to timeout_ms for cond (an expression) to hold; true if it did. */
#define WAIT_FOR(cond, timeout_ms)                                                                 \
    ({                                                                                             \
        uint64_t end_ = ol_mono_ms() + (timeout_ms);                                               \
        bool ok_ = false;                                                                          \
        while (!(ok_ = (cond)) && ol_mono_ms() < end_)                                             \
            usleep(20 * 1000);                                                                     \
        ok_;                                                                                       \
    })

#endif
