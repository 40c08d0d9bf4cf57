/* `openlake server`: one loop thread per core, each with its own
 * SO_REUSEPORT listener, an accept fiber and one fiber per connection; a
 * connection is served by the loop with the fewest open ones; one drive
 * (ol_store) shared by all loops.  The main thread only waits for SIGINT/SIGTERM and then stops
 * the loops, gives in-flight requests the grace period, and closes the drive.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "ec/placement.h"
#include "http/conn.h"
#include "http/tls.h"
#include "cluster/member.h"
#include "deploy/cluster.h"
#include "deploy/deploy.h"
#include "native/peers.h"
#include "native/server.h"
#include "kv/kv.h"
#include "obj/obj.h"
#include "obj/sse.h"
#include "obj/sse_master.h"
#include "users/users.h"
#include "s3/router.h"
#include "access/ratelimit.h"
#include "store/store.h"

#define DEFAULT_ACCESS_KEY "openlake"
#define DEFAULT_SECRET_KEY "openlake-secret"
#define ACCEPT_SLICE_MS 250u
/* Fibers a loop keeps beyond its connections: the accept fiber, loop 0's
 * workers, erasure coding's per-call and per-shard fibers, and connections
 * that start while cut idle ones are still finishing.  The connection limit
 * is counted (worker.open), not left to the pool running out. */
#define FIBER_RESERVE 256u

/* Open connections per client address (max_conns_per_ip), for every loop:
 * an open-addressing table (linear probing, backward-shift deletion) under
 * a mutex taken twice per connection (accept and close), never on a
 * request's path.  It has twice as many slots as the server has fibers, so
 * it never fills.  Keys are IPv4 addresses and IPv6 /64 prefixes (one
 * host's usual allocation), hashed with SipHash under a random key: a client
 * that picks its addresses (a /48 of IPv6 holds 65,536 prefixes) cannot
 * aim them at one probe run. */
struct ip_key {
    uint8_t b[17]; /* b[0]: 4 or 6; then the address (IPv4) or the /64 prefix */
};

struct ip_slot {
    struct ip_key key;
    uint32_t count; /* 0: free */
};

struct ip_table {
    pthread_mutex_t mu;
    struct ip_slot *slots;
    size_t mask;
    uint8_t hash_key[16];
    unsigned limit; /* 0: no limit (the table is not used) */
};

/* One listening socket of a loop and the accept fiber on it: plain HTTP
 * (listen) or HTTPS (tls_listen); fd -1 when that listener is off. */
struct listener {
    struct worker *w;
    int fd;
    bool tls;
};

struct worker {
    struct server *srv;
    struct ol_loop *loop;
    pthread_t thread;
    struct listener lis[2]; /* [0] HTTP, [1] HTTPS */
    int rc;
    uint64_t accepted;  /* written by this worker only */
    uint64_t rejected;
    uint64_t cut_idle;  /* idle connections closed to make room */
    uint64_t ip_limited; /* refused: the client address was at max_conns_per_ip */
    unsigned open;      /* atomic: connections assigned to this loop */
    int accepting;      /* atomic: the loop runs and may be handed connections */
    int done;           /* atomic: the loop returned */
};

struct server {
    struct ol_cfg *cfg;
    struct ol_store *store; /* one directory */
    struct ol_deploy *ec;   /* several: erasure-coded (deploy/deploy.h) */
    struct ol_cluster *cl;  /* a cluster node (deploy/cluster.h): ec is its deployment */
    struct ol_obj *obj;     /* the object layer over one of them (obj/obj.h) */
    struct ol_native_server *native; /* the native client port, or NULL */
    struct ol_kv *kv;                /* the KV-cache store, or NULL */
    struct ol_users *users;          /* who may sign requests (users/users.h) */
    struct ol_s3_router router;
    struct ol_http_conn_opts conn_opts;
    struct ol_http_conn_opts tls_conn_opts; /* conn_opts with .tls set */
    struct ol_tls_conf *tls;                /* NULL: no HTTPS listener */
    struct worker *workers;
    unsigned nworkers;
    unsigned max_conns;  /* per loop */
    struct ip_table ips;
};

static size_t ip_hash(const struct ip_table *t, const struct ip_key *k)
{
    return (size_t)ol_siphash24(t->hash_key, k->b, sizeof(k->b)) & t->mask;
}

/* The key of a peer address; false for families that are not counted. */
static bool ip_key_of(const struct sockaddr_storage *ss, struct ip_key *k)
{
    memset(k, 0, sizeof(*k));
    if (ss->ss_family == AF_INET) {
        k->b[0] = 4;
        memcpy(k->b + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        return true;
    }
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            k->b[0] = 4;
            memcpy(k->b + 1, a->s6_addr + 12, 4);
        } else {
            k->b[0] = 6;
            memcpy(k->b + 1, a->s6_addr, 8);
        }
        return true;
    }
    return false;
}

static int ip_table_init(struct ip_table *t, unsigned limit, size_t max_entries)
{
    memset(t, 0, sizeof(*t));
    t->limit = limit;
    if (!limit)
        return 0;
    size_t cap = 64;
    while (cap < 2 * max_entries)
        cap <<= 1;
    t->slots = calloc(cap, sizeof(*t->slots));
    if (!t->slots)
        return -ENOMEM;
    t->mask = cap - 1;
    if (getrandom(t->hash_key, sizeof(t->hash_key), 0) != (ssize_t)sizeof(t->hash_key)) {
        uint64_t x = ol_mono_ms() ^ (uint64_t)(uintptr_t)t;
        memcpy(t->hash_key, &x, sizeof(x));
    }
    pthread_mutex_init(&t->mu, NULL);
    return 0;
}

static void ip_table_free(struct ip_table *t)
{
    if (t->slots)
        pthread_mutex_destroy(&t->mu);
    free(t->slots);
    t->slots = NULL;
}

/* Counts one more connection from k; false (nothing counted) when k is at
 * the limit.  The probe is bounded by the table, which is never full. */
static bool ip_acquire(struct ip_table *t, const struct ip_key *k)
{
    if (!t->limit)
        return true;
    bool ok = false;
    pthread_mutex_lock(&t->mu);
    size_t i = ip_hash(t, k);
    for (size_t probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
        struct ip_slot *s = &t->slots[i];
        if (s->count == 0) {
            s->key = *k;
            s->count = 1;
            ok = true;
            break;
        }
        if (memcmp(&s->key, k, sizeof(*k)) == 0) {
            ok = s->count < t->limit;
            if (ok)
                s->count++;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

/* Counts one connection from k less (it was counted by ip_acquire). */
static void ip_release(struct ip_table *t, const struct ip_key *k)
{
    if (!t->limit)
        return;
    pthread_mutex_lock(&t->mu);
    size_t i = ip_hash(t, k);
    size_t probes = 0;
    for (; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
        struct ip_slot *s = &t->slots[i];
        OL_ASSERT(s->count != 0); /* k was counted, so it is found first */
        if (memcmp(&s->key, k, sizeof(*k)) == 0)
            break;
    }
    OL_ASSERT(probes <= t->mask);
    if (--t->slots[i].count == 0) {
        /* Backward-shift deletion: move later entries of the probe run into
         * the hole so that every key stays reachable from its home slot. */
        size_t hole = i;
        for (size_t j = (i + 1) & t->mask; t->slots[j].count != 0; j = (j + 1) & t->mask) {
            size_t home = ip_hash(t, &t->slots[j].key);
            /* j's entry may move to the hole unless its home lies cyclically
             * in (hole, j]. */
            bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (stays)
                continue;
            t->slots[hole] = t->slots[j];
            t->slots[j].count = 0;
            hole = j;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

/* A listening socket on listen_addr with SO_REUSEPORT (one per loop); probe:
 * first check that nobody else listens there. */
static int listen_socket(const char *listen_addr, bool probe, int *out_fd, char *err,
                         size_t errlen)
{
    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    if (!colon || colon == listen_addr) {
        snprintf(err, errlen, "listen: expected host:port, got '%s'", listen_addr);
        return -EINVAL;
    }
    snprintf(host, sizeof(host), "%.*s", (int)(colon - listen_addr), listen_addr);
    if (host[0] == '[') { /* [::1]:9000 */
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "listen: %s: %s", listen_addr, gai_strerror(g));
        return -EINVAL;
    }
    int rc = 0;
    int one = 1;
    if (probe) {
        /* SO_REUSEPORT would let this server share the port with another
         * one already listening there (same user), and the kernel would
         * split the clients between two stores.  Whether anyone listens is
         * asked the direct way, by connecting (to loopback for a wildcard
         * address): a plain bind would also trip over the closing sockets
         * a killed predecessor leaves behind. */
        struct sockaddr_storage ss;
        memcpy(&ss, res->ai_addr, res->ai_addrlen);
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            if (in->sin_addr.s_addr == htonl(INADDR_ANY))
                in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
                in6->sin6_addr = in6addr_loopback;
        }
        /* A server killed a moment ago can still answer: its io_uring holds
         * the listening socket until the kernel's ring teardown drops it,
         * after the process is gone.  A live server keeps answering for the
         * whole second this waits. */
        for (int tries = 0;; tries++) {
            int pfd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (pfd < 0)
                break;
            int c = connect(pfd, (struct sockaddr *)&ss, res->ai_addrlen);
            close(pfd);
            if (c != 0)
                break;
            if (tries >= 20) {
                rc = -EADDRINUSE;
                snprintf(err, errlen, "listen: %s: address already in use (another server "
                         "listens there)", listen_addr);
                goto out;
            }
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        rc = -errno;
        snprintf(err, errlen, "listen: %s: %s", listen_addr, strerror(errno));
        close(fd);
        goto out;
    }
    *out_fd = fd;
out:
    freeaddrinfo(res);
    return rc;
}

struct conn_arg {
    struct worker *w; /* the loop that serves the connection */
    int fd;
    bool tls;         /* accepted on the HTTPS listener */
    bool counted;     /* key counted in srv->ips */
    struct ip_key key;
};

static void conn_fiber(void *arg)
{
    struct conn_arg a = *(struct conn_arg *)arg;
    free(arg);
    struct server *srv = a.w->srv;
    ol_http_conn_serve(a.fd, a.tls ? &srv->tls_conn_opts : &srv->conn_opts, ol_s3_handle,
                       &srv->router);
    if (a.counted)
        ip_release(&a.w->srv->ips, &a.key);
    __atomic_fetch_sub(&a.w->open, 1, __ATOMIC_RELAXED);
    /* The fiber's pool slot keeps its stack: leave it with the pages a
     * fresh connection touches, not this one's deepest request. */
    ol_fiber_trim_stack();
}

/* Starts the connection's fiber on the calling loop, which is ca->w's.  A
 * loop past max_conns_per_thread first closes its oldest idle connections
 * (those waiting for a request head, see ol_idle_cut_oldest) rather than
 * turn the new client away: otherwise whoever opens connections first and
 * sends nothing keeps every later client out.  Only when no idle connection
 * is left is the new one refused.  Consumes ca and its fd. */
static void conn_start(void *arg)
{
    struct conn_arg *ca = arg;
    struct worker *w = ca->w;
    OL_ASSERT(ol_loop_current() == w->loop);
    bool ok = !ol_loop_stopping(w->loop);
    if (ok) {
        /* open counts this connection; cut ones still finishing will free
         * their slots within a tick and are not cut twice. */
        unsigned open = __atomic_load_n(&w->open, __ATOMIC_RELAXED);
        unsigned live = open - ol_idle_cut_pending(w->loop);
        if (live > w->srv->max_conns) {
            unsigned cut = ol_idle_cut_oldest(w->loop, live - w->srv->max_conns);
            w->cut_idle += cut;
            ok = cut > 0;
        }
    }
    if (!ok || ol_fiber_spawn(w->loop, conn_fiber, ca) != 0) {
        close(ca->fd);
        if (ca->counted)
            ip_release(&w->srv->ips, &ca->key);
        free(ca);
        __atomic_fetch_sub(&w->open, 1, __ATOMIC_RELAXED);
        w->rejected++;
        return;
    }
    w->accepted++;
}

/* The loop that takes a new connection: the one with the fewest open
 * connections, the accepting one on a tie.  The kernel's SO_REUSEPORT hash
 * spreads connections unevenly (4 connections on 2 loops are often 3/1 or
 * 4/0), and a loop holding one large upload hashes its MD5 on one scalar
 * chain while the other loop idles; a loop with several bodies hashes them
 * side by side (core/md5.h).  The count is taken before the connection is
 * handed over, so acceptors running at once see each other's choices. */
static struct worker *pick_worker(struct worker *self)
{
    struct server *srv = self->srv;
    struct worker *best = self;
    unsigned best_open = __atomic_load_n(&self->open, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct worker *c = &srv->workers[i];
        unsigned o = __atomic_load_n(&c->open, __ATOMIC_RELAXED);
        if (o < best_open && __atomic_load_n(&c->accepting, __ATOMIC_ACQUIRE) &&
            !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
            best = c;
            best_open = o;
        }
    }
    __atomic_fetch_add(&best->open, 1, __ATOMIC_RELAXED);
    return best;
}

static void accept_fiber(void *arg)
{
    struct listener *l = arg;
    struct worker *w = l->w;
    struct ol_loop *loop = w->loop;
    /* Ends when the loop stops; each round accepts one connection or times
     * out after a short slice to look at the stop flag. */
    while (!ol_loop_stopping(loop)) {
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof(peer);
        int fd = ol_io_accept_addr(l->fd, (struct sockaddr *)&peer, &peer_len,
                                   ACCEPT_SLICE_MS);
        if (fd == -ETIMEDOUT || fd == -EINTR || fd == -ECONNABORTED)
            continue;
        if (fd < 0) {
            ol_log_limited(OL_LOG_WARN, "accept: %s", strerror(-fd));
            /* Out of descriptors (a limit below the connection slots):
             * the oldest idle connection on this loop gives its up, as a
             * full loop's would. */
            if (fd == -EMFILE || fd == -ENFILE)
                w->cut_idle += ol_idle_cut_oldest(loop, 1);
            ol_io_sleep_ms(10); /* EMFILE and friends: back off, do not spin */
            continue;
        }
        int one = 1;
        /* Small responses must not wait for Nagle's algorithm. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn_arg *ca = malloc(sizeof(*ca));
        if (!ca) {
            close(fd);
            w->rejected++;
            continue;
        }
        ca->fd = fd;
        ca->tls = l->tls;
        /* One address may hold max_conns_per_ip connections: past that,
         * the new one is closed at once (its own idle ones are not cut for
         * it, or a client could churn through them).  A proxy in front
         * shows as one address: raise the limit or set it to 0 there. */
        ca->counted = w->srv->ips.limit && ip_key_of(&peer, &ca->key);
        if (ca->counted && !ip_acquire(&w->srv->ips, &ca->key)) {
            close(fd);
            free(ca);
            w->ip_limited++;
            ol_log_limited(OL_LOG_WARN, "accept: a client address is at max_conns_per_ip (%u)",
                           w->srv->ips.limit);
            continue;
        }
        ca->w = pick_worker(w);
        /* Another loop's fiber is started by a message to that loop; a full
         * inbox keeps the connection here. */
        if (ca->w != w && ol_loop_post(ca->w->loop, conn_start, ca) == 0)
            continue;
        if (ca->w != w) {
            __atomic_fetch_sub(&ca->w->open, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&w->open, 1, __ATOMIC_RELAXED);
            ca->w = w;
        }
        conn_start(ca);
    }
}

static void start_accepting(void *arg)
{
    struct worker *w = arg;
    int rc;
    for (int i = 0; i < 2; i++) {
        if (w->lis[i].fd < 0)
            continue;
        rc = ol_fiber_spawn(w->loop, accept_fiber, &w->lis[i]);
        OL_ASSERT(rc == 0);
    }
    __atomic_store_n(&w->accepting, 1, __ATOMIC_RELEASE);
    /* Loop 0 runs the erasure-coded deployment's scrubber. */
    if (ol_loop_id(w->loop) == 0 && w->srv->ec) {
        rc = ol_fiber_spawn(w->loop, ol_deploy_scrub_fiber, w->srv->ec);
        OL_ASSERT(rc == 0);
        /* The drive monitor: drive states, probes, heal after a return. */
        rc = ol_fiber_spawn(w->loop, ol_deploy_monitor_fiber, w->srv->ec);
        OL_ASSERT(rc == 0);
    }
    /* Loop 0 also runs the bucket lifecycle worker (s3.h), in every mode. */
    if (ol_loop_id(w->loop) == 0) {
        rc = ol_fiber_spawn(w->loop, ol_s3_lifecycle_fiber, &w->srv->router.ctx);
        OL_ASSERT(rc == 0);
        rc = ol_fiber_spawn(w->loop, ol_s3_upload_reaper, &w->srv->router.ctx);
        OL_ASSERT(rc == 0);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /* Warm this loop's buffer pool so the first requests do not pay for
     * fresh mappings (ol_buf keeps them per thread). */
    ol_buf_prefill(1u << 20, 16);
    w->rc = ol_loop_run(w->loop);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The KV-cache store's counters and gauges (kv/kv.h). */
static void kv_metrics(struct ol_kv *kv, char *b, size_t cap, size_t *np)
{
    size_t n = *np;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int w_ = snprintf(b + n, cap - n, __VA_ARGS__);                                            \
        if (w_ > 0 && (size_t)w_ < cap - n)                                                        \
            n += (size_t)w_;                                                                       \
    } while (0)
    struct ol_kv_stats k;
    ol_kv_stats(kv, &k);
    EMIT("# TYPE openlake_kv_hits_total counter\n");
    EMIT("openlake_kv_hits_total{tier=\"memory\"} %" PRIu64 "\n", k.mem_hits);
    EMIT("openlake_kv_hits_total{tier=\"disk\"} %" PRIu64 "\n", k.disk_hits);
    EMIT("# TYPE openlake_kv_misses_total counter\n");
    EMIT("openlake_kv_misses_total{tier=\"memory\"} %" PRIu64 "\n", k.mem_misses);
    EMIT("openlake_kv_misses_total{tier=\"disk\"} %" PRIu64 "\n", k.disk_misses);
    EMIT("# TYPE openlake_kv_puts_total counter\n");
    EMIT("openlake_kv_puts_total %" PRIu64 "\n", k.puts);
    EMIT("openlake_kv_stored_total %" PRIu64 "\n", k.stored);
    EMIT("openlake_kv_dedup_total %" PRIu64 "\n", k.dedup);
    EMIT("openlake_kv_put_refused_total %" PRIu64 "\n", k.put_refused);
    EMIT("openlake_kv_put_bytes_total %" PRIu64 "\n", k.put_bytes);
    EMIT("openlake_kv_get_bytes_total %" PRIu64 "\n", k.get_bytes);
    EMIT("openlake_kv_lookups_total %" PRIu64 "\n", k.lookups);
    EMIT("openlake_kv_lookup_hits_total %" PRIu64 "\n", k.lookup_hits);
    EMIT("openlake_kv_evictions_total %" PRIu64 "\n", k.evictions);
    EMIT("openlake_kv_spills_total %" PRIu64 "\n", k.spills);
    EMIT("openlake_kv_spill_bytes_total %" PRIu64 "\n", k.spill_bytes);
    EMIT("openlake_kv_spill_errors_total %" PRIu64 "\n", k.spill_errors);
    EMIT("openlake_kv_disk_drops_total %" PRIu64 "\n", k.disk_drops);
    EMIT("openlake_kv_promotions_total %" PRIu64 "\n", k.promotions);
    EMIT("openlake_kv_corrupt_total %" PRIu64 "\n", k.corrupt);
    EMIT("openlake_kv_pins_total %" PRIu64 "\n", k.pins);
    EMIT("openlake_kv_releases_total %" PRIu64 "\n", k.releases);
    EMIT("# TYPE openlake_kv_entries gauge\n");
    EMIT("openlake_kv_entries{tier=\"memory\"} %" PRIu64 "\n", k.mem_entries);
    EMIT("openlake_kv_entries{tier=\"disk\"} %" PRIu64 "\n", k.disk_entries);
    EMIT("# TYPE openlake_kv_bytes gauge\n");
    EMIT("openlake_kv_bytes{tier=\"memory\"} %" PRIu64 "\n", k.mem_bytes);
    EMIT("openlake_kv_bytes{tier=\"disk\"} %" PRIu64 "\n", k.disk_bytes);
    EMIT("# TYPE openlake_kv_capacity_bytes gauge\n");
    EMIT("openlake_kv_capacity_bytes{tier=\"memory\"} %" PRIu64 "\n", k.mem_capacity);
    EMIT("openlake_kv_capacity_bytes{tier=\"disk\"} %" PRIu64 "\n", k.disk_capacity);
#undef EMIT
    *np = n;
}

static void metrics(void *ctx, char **text, size_t *len)
{
    struct server *srv = ctx;
    size_t cap = 8192 + (srv->kv ? 4096 : 0) + (srv->router.ctx.rl ? 512 : 0);
    char *b = malloc(cap);
    if (!b)
        return;
    size_t n = 0;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int w_ = snprintf(b + n, cap - n, __VA_ARGS__);                                            \
        if (w_ > 0 && (size_t)w_ < cap - n)                                                        \
            n += (size_t)w_;                                                                       \
    } while (0)
    static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE", "POST", "OTHER"};
    EMIT("# TYPE openlake_http_requests_total counter\n");
    for (int m = 0; m < 6; m++) {
        uint64_t sum = 0;
        for (unsigned i = 0; i < srv->nworkers && i < OL_ROUTER_MAX_LOOPS; i++)
            sum += __atomic_load_n(&srv->router.requests[i][m], __ATOMIC_RELAXED);
        EMIT("openlake_http_requests_total{method=\"%s\"} %" PRIu64 "\n", methods[m], sum);
    }
    uint64_t acc = 0, rej = 0, cut = 0, ipl = 0, open = 0;
    for (unsigned i = 0; i < srv->nworkers; i++) {
        acc += __atomic_load_n(&srv->workers[i].accepted, __ATOMIC_RELAXED);
        rej += __atomic_load_n(&srv->workers[i].rejected, __ATOMIC_RELAXED);
        cut += __atomic_load_n(&srv->workers[i].cut_idle, __ATOMIC_RELAXED);
        ipl += __atomic_load_n(&srv->workers[i].ip_limited, __ATOMIC_RELAXED);
        open += __atomic_load_n(&srv->workers[i].open, __ATOMIC_RELAXED);
    }
    EMIT("# TYPE openlake_connections_accepted_total counter\n");
    EMIT("openlake_connections_accepted_total %" PRIu64 "\n", acc);
    EMIT("openlake_connections_rejected_total %" PRIu64 "\n", rej);
    EMIT("openlake_connections_idle_cut_total %" PRIu64 "\n", cut);
    EMIT("openlake_connections_ip_limited_total %" PRIu64 "\n", ipl);
    EMIT("# TYPE openlake_connections_open gauge\n");
    EMIT("openlake_connections_open %" PRIu64 "\n", open);
    if (srv->native) {
        struct ol_native_server_stats ns;
        ol_native_server_stats(srv->native, &ns);
        EMIT("# TYPE openlake_native_requests_total counter\n");
        EMIT("openlake_native_requests_total %" PRIu64 "\n", ns.requests);
        EMIT("openlake_native_errors_total %" PRIu64 "\n", ns.errors);
        EMIT("openlake_native_get_bytes_total %" PRIu64 "\n", ns.get_bytes);
        EMIT("openlake_native_put_bytes_total %" PRIu64 "\n", ns.put_bytes);
        EMIT("openlake_native_put_sessions_aborted_total %" PRIu64 "\n", ns.sessions_aborted);
        EMIT("openlake_native_layouts_total %" PRIu64 "\n", ns.layouts);
        EMIT("openlake_native_shard_gets_total %" PRIu64 "\n", ns.shard_gets);
        EMIT("openlake_native_shard_get_bytes_total %" PRIu64 "\n", ns.shard_get_bytes);
        EMIT("# TYPE openlake_native_lane_requests_total counter\n");
        for (unsigned i = 0; i < ns.lanes; i++)
            EMIT("openlake_native_lane_requests_total{lane=\"%u\"} %" PRIu64 "\n", i,
                 ns.lane_requests[i]);
    }
    if (srv->router.ctx.rl) {
        /* Per-user limits (access/ratelimit.h): requests refused for their
         * user's rate, and the time bodies waited for their bandwidth. */
        struct ol_rl_stats rs;
        ol_rl_stats(srv->router.ctx.rl, &rs);
        EMIT("# TYPE openlake_ratelimit_throttled_total counter\n");
        EMIT("openlake_ratelimit_throttled_total{port=\"s3\"} %" PRIu64 "\n", rs.throttled_s3);
        EMIT("openlake_ratelimit_throttled_total{port=\"native\"} %" PRIu64 "\n",
             rs.throttled_native);
        EMIT("# TYPE openlake_ratelimit_paced_seconds_total counter\n");
        EMIT("openlake_ratelimit_paced_seconds_total %.3f\n", (double)rs.paced_ns / 1e9);
    }
    if (srv->kv)
        kv_metrics(srv->kv, b, cap, &n);
    /* The body memory budget (core/buf.h): how full it is, and how many
     * requests it turned away with 503 SlowDown. */
    EMIT("# TYPE openlake_body_memory_bytes gauge\n");
    EMIT("openlake_body_memory_bytes %" PRIu64 "\n", ol_bodymem_used());
    EMIT("openlake_body_memory_limit_bytes %" PRIu64 "\n", ol_bodymem_limit());
    EMIT("# TYPE openlake_body_memory_refused_total counter\n");
    EMIT("openlake_body_memory_refused_total %" PRIu64 "\n", ol_bodymem_refused());
    /* Encrypted reads (obj/sse.h, ol_sse_stats): how windows' sealed bytes
     * reached the cipher, who opened the parts of split windows, and the
     * windows read again through the checked path after a tag failed. */
    struct ol_sse_stats ss;
    ol_sse_stats(&ss);
    EMIT("# TYPE openlake_sse_windows_total counter\n");
    EMIT("openlake_sse_windows_total{source=\"in_place\"} %" PRIu64 "\n", ss.windows_in_place);
    EMIT("openlake_sse_windows_total{source=\"pieces\"} %" PRIu64 "\n", ss.windows_pieces);
    EMIT("openlake_sse_windows_total{source=\"copied\"} %" PRIu64 "\n", ss.windows_copied);
    EMIT("openlake_sse_copied_bytes_total %" PRIu64 "\n", ss.bytes_copied);
    EMIT("# TYPE openlake_sse_parts_total counter\n");
    EMIT("openlake_sse_parts_total{by=\"pool\"} %" PRIu64 "\n", ss.parts_pool);
    EMIT("openlake_sse_parts_total{by=\"loop\"} %" PRIu64 "\n", ss.parts_stolen);
    EMIT("# TYPE openlake_sse_windows_rechecked_total counter\n");
    EMIT("openlake_sse_windows_rechecked_total %" PRIu64 "\n", ss.windows_rechecked);
    if (srv->ec && srv->ec->cluster[0]) {
        /* Whether writes are acknowledged, and on what (cluster/member.h):
         * 1 for the state the node is in, 0 for the others. */
        enum ol_member_ack a = ol_member_ack_state_process();
        EMIT("# TYPE openlake_cluster_ack gauge\n");
        for (int i = OL_MEMBER_ACK_LEASE; i <= OL_MEMBER_FENCED; i++)
            EMIT("openlake_cluster_ack{state=\"%s\"} %d\n",
                 ol_member_ack_name((enum ol_member_ack)i), a == (enum ol_member_ack)i);
    }
    if (srv->ec) {
        ol_deploy_metrics(srv->ec, b, cap, &n);
        *text = b;
        *len = n;
        return;
    }
    struct ol_store_stats st;
    ol_store_stats(srv->store, &st);
    EMIT("# TYPE openlake_store_segment_bytes gauge\n");
    EMIT("openlake_store_segments %" PRIu64 "\n", st.segments);
    EMIT("openlake_store_segment_bytes %" PRIu64 "\n", st.segment_bytes);
    EMIT("openlake_store_live_bytes %" PRIu64 "\n", st.live_bytes);
    EMIT("openlake_store_objects %" PRIu64 "\n", st.objects);
    EMIT("openlake_store_commits_total %" PRIu64 "\n", st.commits);
    EMIT("openlake_store_commit_ops_total %" PRIu64 "\n", st.commit_ops);
    EMIT("openlake_store_compacted_bytes_total %" PRIu64 "\n", st.compacted_bytes);
    EMIT("openlake_store_corrupt_blocks_total %" PRIu64 "\n", st.corrupt_blocks);
#undef EMIT
    *text = b;
    *len = n;
}

/* Every connection is a descriptor, and so is every open segment file:
 * the usual soft limit of 1024 would refuse connections long before
 * max_conns_per_thread.  The soft limit goes up to the hard one (which only
 * root can raise); a server whose limit is still short of its connection
 * slots says so, since accept then fails with EMFILE before any idle
 * connection can be cut. */
static void raise_fd_limit(size_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Descriptors beyond the connections: drives, segments, rings. */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want + 256)
        ol_warn("open file limit %llu is below the %zu connection slots (threads x "
                "max_conns_per_thread); raise it (ulimit -n) or lower max_conns_per_thread",
                (unsigned long long)rl.rlim_cur, want);
}

/* SIGHUP: the certificate and key files are read again into a new TLS
 * context for the connections that start from now on; a file that cannot
 * be used keeps the old context (and the error is logged). */
static void reload_tls(struct server *srv)
{
    if (!srv->tls) {
        ol_info("SIGHUP: no HTTPS listener, nothing to reload");
        return;
    }
    char err[512];
    if (ol_tls_conf_reload(srv->tls, err, sizeof(err)) < 0)
        ol_error("SIGHUP: TLS certificate not reloaded, the previous one stays: %s", err);
    else
        ol_info("SIGHUP: TLS certificate reloaded from %s (generation %" PRIu64 ")",
                srv->cfg->tls_cert, ol_tls_conf_generation(srv->tls));
}

/* The native port's users: the S3 users (native/server.h). */
static int native_secret(void *arg, const char *access_key, char secret[129])
{
    return ol_users_lookup(arg, access_key, strlen(access_key), secret, NULL);
}

/* Creates the KV-cache store (cfg kv_*), which the native port serves. */
static int start_kv(struct server *srv, char *err, size_t errlen)
{
    const struct ol_cfg *cfg = srv->cfg;
    if (cfg->kv_memory_bytes == 0)
        return 0;
    char dir[1100];
    const char *base = cfg->ndrive_dirs ? cfg->drive_dirs[0] : cfg->data_dir;
    if (cfg->kv_dir[0])
        snprintf(dir, sizeof(dir), "%s", cfg->kv_dir);
    else
        snprintf(dir, sizeof(dir), "%s/kv-cache", base);
    struct ol_kv_opts ko = {
        .memory_bytes = (uint64_t)cfg->kv_memory_bytes,
        .disk_bytes = (uint64_t)cfg->kv_disk_bytes,
        .dir = dir,
        .high_pct = (unsigned)cfg->kv_high_watermark_pct,
        .low_pct = (unsigned)cfg->kv_low_watermark_pct,
    };
    int rc = ol_kv_create(&ko, &srv->kv);
    if (rc < 0)
        snprintf(err, errlen, "cannot start the KV cache (kv_memory_bytes, kv_disk_bytes, kv_dir %.300s, "
                 "watermarks: low at most high): %s", dir, ol_strerror(rc));
    srv->router.ctx.kv = srv->kv;
    return rc;
}

/* Starts the native client port (cfg native_listen). */
static int start_native(struct server *srv, char *err, size_t errlen)
{
    const struct ol_cfg *cfg = srv->cfg;
    if (strcmp(cfg->native_listen, "off") == 0)
        return 0;
    const char *s3_listen = strcmp(cfg->listen, "off") != 0 ? cfg->listen : cfg->tls_listen;
    const char *a = cfg->native_listen[0] ? cfg->native_listen : s3_listen;
    const char *c = strrchr(a, ':');
    char host[256];
    if (!c || c == a || (size_t)(c - a) >= sizeof(host)) {
        snprintf(err, errlen, "native_listen %s: give host:port", a);
        return -EINVAL;
    }
    memcpy(host, a, (size_t)(c - a));
    host[c - a] = 0;
    unsigned long port = 0;
    if (cfg->native_listen[0]) {
        char *end = NULL;
        port = strtoul(c + 1, &end, 10);
        if (!end || *end || port > 65535) {
            snprintf(err, errlen, "native_listen %s: give host:port", a);
            return -EINVAL;
        }
    }
    struct ol_native_server_opts o = {
        .host = host,
        .port = (uint16_t)port,
        .obj = srv->obj,
        .cfg = srv->cfg,
        .secret = native_secret,
        .secret_arg = srv->users,
        .may_ack_write = srv->cl ? ol_member_may_ack_writes : NULL,
        .peers = srv->cl ? ol_native_cluster_peers : NULL,
        .node_addr = srv->cl ? ol_native_cluster_node_addr : NULL,
        .kv = srv->kv,
        .rl = srv->router.ctx.rl,
        .lanes = (unsigned)srv->cfg->native_lanes,
    };
    if (!o.lanes) {
        /* A lane is a net thread that polls before it sleeps: one per four
         * cores, up to four.  On 2 cores two lanes made one client's 64 MiB
         * GET 3.8x slower (their threads and the workers fight for the
         * cores); on 16, four lanes made it 4.9x faster (bench/RESULTS.md). */
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        o.lanes = nc >= 16 ? 4 : nc >= 4 ? (unsigned)(nc / 4) : 1;
    }
    /* Workers run the ops; a GET into a local GPU (GET_CUDA) holds one for
     * its whole copy, and the copies of a checkpoint load run side by
     * side: one per core, 4 to 32 (16 workers loaded 4 GB at 25 GB/s on a
     * 16-core host, 8 at 19, 4 at 14: bench/RESULTS.md "CUDA IPC reads").
     * Idle workers sleep. */
    o.workers = (unsigned)srv->cfg->native_workers;
    if (!o.workers) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        o.workers = nc < 4 ? 4 : nc > 32 ? 32 : (unsigned)nc;
    }
    int rc = ol_native_server_create(&o, &srv->native);
    if (rc < 0) {
        snprintf(err, errlen, "cannot serve the native port on %s:%lu: %s", host, port,
                 ol_strerror(rc));
        return rc;
    }
    srv->router.ctx.native_port = ol_native_server_port(srv->native);
    srv->router.ctx.native_lanes =
        ol_native_server_lanes(srv->native, srv->router.ctx.native_lane_ports, 16);
    return 0;
}

int ol_server_run(struct ol_cfg *cfg)
{
    struct server srv;
    memset(&srv, 0, sizeof(srv));
    srv.cfg = cfg;
    int lvl = ol_log_parse_level(cfg->log_level);
    if (lvl < 0) {
        fprintf(stderr, "openlake: unknown log_level '%s'\n", cfg->log_level);
        return 2;
    }
    ol_log_level = lvl;
    bool default_user = cfg->nusers == 0;
    if (default_user)
        ol_cfg_add_user(cfg, DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY);
    if (cfg->block_bytes % 4096 != 0) {
        fprintf(stderr, "openlake: block_bytes must be a multiple of 4096\n");
        return 2;
    }
    bool http_on = strcmp(cfg->listen, "off") != 0;
    if (!http_on && !cfg->tls_listen[0]) {
        fprintf(stderr, "openlake: listen off needs tls_listen (no listener otherwise)\n");
        return 2;
    }
    if (!http_on && cfg->cluster[0]) {
        /* The nodes publish their listen address in the cluster map and ask
         * each other's native port over it in plain HTTP (native/peers.c). */
        fprintf(stderr, "openlake: a cluster node keeps its plain listener (put listen on a "
                        "private address); listen off is for a single node\n");
        return 2;
    }
    /* Per-user limits (access/ratelimit.h): a bad combination is a
     * configuration error, reported before anything opens. */
    {
        char rerr[512] = "";
        if (ol_rl_create(cfg, &srv.router.ctx.rl, rerr, sizeof(rerr)) < 0) {
            fprintf(stderr, "openlake: %s\n", rerr[0] ? rerr : "out of memory");
            return 2;
        }
    }
    if (cfg->tls_listen[0]) {
        /* Before the drives open: a missing or broken certificate is a
         * configuration error, reported at once. */
        char terr[512];
        if (ol_tls_conf_open(&srv.tls, cfg->tls_cert, cfg->tls_key, terr, sizeof(terr)) < 0) {
            fprintf(stderr, "openlake: %s\n", terr);
            return 2;
        }
    }

    unsigned n = (unsigned)cfg->threads;
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (unsigned)c : 1;
    }
    if (n > OL_ROUTER_MAX_LOOPS)
        n = OL_ROUTER_MAX_LOOPS;

    /* Signals go to the main thread only: block them before any thread
     * starts, so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP); /* reload the TLS certificate */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Every buffer of a request body in flight comes out of one budget
     * (core/buf.h). */
    /* glibc maps every malloc from M_MMAP_THRESHOLD up (128 KiB until a
     * mapped chunk is freed, which raises it) and unmaps it on free: each
     * such buffer then costs page faults on every use.  The EC read path's
     * per-shard buffers (a unit or less, 1 MiB by default) are such mallocs;
     * they used to ride on a threshold that the GET's own 1 MiB buffer had
     * raised, and now that the body buffers come from ol_buf_alloc it has
     * to be set here (4 MiB: every unit-sized buffer from the heap, as
     * before; the body buffers above it are ol_buf's, bounded by the body
     * memory budget and returned to the system). */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    ol_bodymem_configure((uint64_t)cfg->body_memory_bytes,
                         (uint64_t)cfg->body_memory_request_bytes);

    char err[512];
    err[0] = 0;
    int rc;
    /* One drive or many, every store gets the same options. */
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    so.segment_bytes = (uint64_t)cfg->segment_bytes;
    so.block_bytes = (uint32_t)cfg->block_bytes;
    so.inline_bytes = (uint32_t)cfg->inline_bytes;
    so.map_bytes = (uint64_t)cfg->map_bytes;
    so.max_loops = n;
    so.compact_pct = (unsigned)cfg->compact_pct;
    so.commit_batch = (unsigned)cfg->commit_batch;
    so.compact_interval_ms = (unsigned)cfg->compact_interval_ms;
    if (cfg->cluster[0]) {
        const char *one[1] = {cfg->data_dir};
        bool many = cfg->ndrive_dirs > 0;
        rc = ol_cluster_open(cfg, many ? cfg->drive_dirs : one, many ? cfg->ndrive_dirs : 1, &so,
                             &srv.cl, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "openlake: %s\n", err);
            return 1;
        }
        srv.ec = ol_cluster_deploy(srv.cl);
        goto opened;
    }
    if (cfg->ndrive_dirs > 1) {
        rc = ol_deploy_open(cfg, cfg->drive_dirs, cfg->ndrive_dirs, &so, &srv.ec, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "openlake: %s\n", err);
            return 1;
        }
        goto opened;
    }
    if (mkdir(cfg->data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "openlake: cannot create %s: %s\n", cfg->data_dir, strerror(errno));
        return 1;
    }
    rc = ol_store_open(&srv.store, cfg->data_dir, &so);
    if (rc < 0) {
        fprintf(stderr, "openlake: cannot open the drive %s: %s\n", cfg->data_dir,
                ol_strerror(rc));
        return 1;
    }

opened:
    rc = srv.ec ? ol_obj_open_ec(srv.ec, &srv.obj) : ol_obj_open_store(srv.store, &srv.obj);
    if (rc < 0) {
        fprintf(stderr, "openlake: %s\n", ol_strerror(rc));
        return 1;
    }
    srv.router.ctx.obj = srv.obj;
    srv.router.ctx.cfg = cfg;
    /* The users: etcd's on a cluster node, the object layer's otherwise. */
    rc = srv.cl ? ol_users_open_etcd(cfg, &srv.users, err, sizeof(err))
                : ol_users_open_obj(cfg, srv.obj, &srv.users, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "openlake: %s\n", err[0] ? err : ol_strerror(rc));
        return 1;
    }
    srv.router.ctx.users = srv.users;
    rc = ol_sse_master_load(srv.obj, cfg, srv.cl, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "openlake: %s\n", err[0] ? err : ol_strerror(rc));
        return 1;
    }
    if (start_kv(&srv, err, sizeof(err)) < 0 || start_native(&srv, err, sizeof(err)) < 0) {
        fprintf(stderr, "openlake: %s\n", err);
        return 1;
    }
    srv.router.hooks.metrics = metrics;
    srv.router.hooks.ctx = &srv;
    srv.conn_opts.limits.max_head_bytes = (size_t)cfg->max_header_bytes;
    srv.conn_opts.limits.max_headers = (size_t)cfg->max_headers;
    srv.conn_opts.limits.max_target_bytes = (size_t)cfg->max_url_bytes;
    srv.conn_opts.idle_timeout_ms = (unsigned)cfg->idle_timeout_ms;
    srv.conn_opts.io_timeout_ms = (unsigned)cfg->io_timeout_ms;
    srv.conn_opts.header_timeout_ms = (unsigned)cfg->header_timeout_ms;
    srv.conn_opts.min_body_rate_bytes_per_sec = (uint64_t)cfg->min_body_rate_bytes_per_sec;
    srv.conn_opts.body_rate_grace_ms = (unsigned)cfg->body_rate_grace_ms;
    srv.conn_opts.body_rate_window_ms = (unsigned)cfg->body_rate_window_ms;
    srv.conn_opts.buf_bytes = (size_t)cfg->max_header_bytes + 64 * 1024;
    /* A cluster node acknowledges writes only while it holds its lease. */
    if (srv.cl)
        srv.conn_opts.may_ack_write = ol_member_may_ack_writes;
    srv.tls_conn_opts = srv.conn_opts;
    srv.tls_conn_opts.tls = srv.tls;

    srv.max_conns = (unsigned)cfg->max_conns_per_thread;
    raise_fd_limit((size_t)n * srv.max_conns);
    srv.workers = calloc(n, sizeof(*srv.workers));
    if (!srv.workers || ip_table_init(&srv.ips, (unsigned)cfg->max_conns_per_ip,
                                      (size_t)n * (srv.max_conns + FIBER_RESERVE)) < 0) {
        free(srv.workers);
        if (srv.store)
            ol_store_close(srv.store);
        if (srv.cl)
            ol_cluster_close(srv.cl);
        else
            ol_deploy_close(srv.ec);
        return 1;
    }
    srv.nworkers = n;
    int exit_code = 0;
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++) {
        struct worker *w = &srv.workers[i];
        w->srv = &srv;
        for (int j = 0; j < 2; j++)
            w->lis[j] = (struct listener){.w = w, .fd = -1, .tls = j == 1};
        rc = http_on ? listen_socket(cfg->listen, i == 0, &w->lis[0].fd, err, sizeof(err)) : 0;
        if (rc == 0 && srv.tls)
            rc = listen_socket(cfg->tls_listen, i == 0, &w->lis[1].fd, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "openlake: %s\n", err[0] ? err : strerror(-rc));
            exit_code = 1;
            break;
        }
        struct ol_loop_opts lo = {
            .id = i,
            .sq_entries = 512,
            .max_fibers = srv.max_conns + FIBER_RESERVE,
            .stack_bytes = 256 * 1024,
            .inbox_slots = 8192,
        };
        rc = ol_loop_create(&w->loop, &lo);
        if (rc < 0) {
            fprintf(stderr, "openlake: loop %u: %s\n", i, strerror(-rc));
            exit_code = 1;
            break;
        }
        ol_loop_post(w->loop, start_accepting, w);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            fprintf(stderr, "openlake: cannot start thread %u\n", i);
            exit_code = 1;
            break;
        }
        started++;
    }

    if (exit_code == 0) {
        char where[1100];
        if (srv.ec)
            ol_deploy_describe(srv.ec, where, sizeof(where));
        else
            snprintf(where, sizeof(where), "%s", cfg->data_dir);
        if (http_on)
            fprintf(stderr, "OpenLake 0.1.0 listening on http://%s (%u threads), data in %s\n",
                    cfg->listen, n, where);
        if (srv.tls)
            fprintf(stderr, "OpenLake 0.1.0 listening on https://%s (%u threads), data in %s\n",
                    cfg->tls_listen, n, where);
        if (srv.native)
            fprintf(stderr, "  native client port (UCX): %u\n", ol_native_server_port(srv.native));
        if (default_user)
            fprintf(stderr, "  default credentials: access key '%s', secret key '%s'\n"
                            "  (configure users with 'user ACCESS SECRET' lines in --config)\n",
                    DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY);
        else
            fprintf(stderr, "  %zu user(s) configured\n", cfg->nusers);
        int sig = 0;
        /* SIGHUP reloads and waits on; SIGINT or SIGTERM end the wait. */
        for (;;) {
            sigwait(&sigs, &sig);
            if (sig != SIGHUP)
                break;
            reload_tls(&srv);
        }
        ol_info("%s: shutting down (grace %" PRId64 " ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                cfg->shutdown_grace_ms);
    }

    for (unsigned i = 0; i < started; i++)
        ol_loop_stop(srv.workers[i].loop);
    /* In-flight requests get the grace period; a loop that is still busy
     * after it is abandoned (process exit is crash-safe by design). */
    uint64_t deadline = ol_mono_ms() + (uint64_t)cfg->shutdown_grace_ms;
    bool all_done = true;
    for (unsigned i = 0; i < started; i++) {
        while (!__atomic_load_n(&srv.workers[i].done, __ATOMIC_ACQUIRE) &&
               ol_mono_ms() < deadline)
            usleep(5000);
        if (__atomic_load_n(&srv.workers[i].done, __ATOMIC_ACQUIRE))
            pthread_join(srv.workers[i].thread, NULL);
        else
            all_done = false;
    }
    if (!all_done) {
        ol_warn("requests still running after the grace period; exiting without waiting");
        _exit(exit_code);
    }
    for (unsigned i = 0; i < n; i++) {
        if (srv.workers[i].loop)
            ol_loop_destroy(srv.workers[i].loop);
        for (int j = 0; j < 2; j++)
            if (srv.workers[i].lis[j].fd >= 0)
                close(srv.workers[i].lis[j].fd);
    }
    ol_native_server_destroy(srv.native);
    ol_rl_destroy(srv.router.ctx.rl);
    ol_kv_destroy(srv.kv);
    ol_users_close(srv.users);
    ol_obj_close(srv.obj);
    if (srv.store)
        ol_store_close(srv.store);
    if (srv.cl)
        ol_cluster_close(srv.cl);
    else
        ol_deploy_close(srv.ec);
    free(srv.workers);
    ip_table_free(&srv.ips);
    ol_tls_conf_close(srv.tls);
    ol_info("stopped");
    return exit_code;
}
