/* The one-sided UCX engine of S3 over RDMA (native/rdma.h). */
#include "native/rdma.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <ucp/api/ucp.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/sha256.h"
#include "native/rdma_confirm.h"

extern char **environ;

enum { TICK_MS = 10, IDLE_POLL_MS = 1000, STOP_WAIT_MS = 2000 };

struct job {
    /* In (borrowed from the caller until it is signalled). */
    const struct ol_rdma_token *t;
    enum ol_rdma_dir dir;
    uint64_t off;
    void *buf;
    size_t len;
    bool flush; /* after the op, flush the endpoint (remote completion) */
    /* A confirmation (native/rdma_confirm.h) instead of a move: the
     * challenge to send, and where its answer goes. */
    const uint8_t *challenge;
    size_t challenge_len;
    uint8_t *answer; /* OL_RDMA_ANSWER_BYTES */
    uint64_t deadline_ms;
    /* State, rdma thread only. */
    struct job *next;
    struct ep *ep;
    ucp_rkey_h rkey;
    unsigned pending; /* UCX requests still out: the op and the flush */
    bool awaiting;    /* a confirmation whose answer has not come */
    int rc;
    bool in_flight;
    struct ol_completion done;
};

struct ep {
    ucp_ep_h ep;
    uint8_t *addr; /* the worker address, OL_RDMA_SCRATCH bytes (zero past addr_len) */
    size_t addr_len;
    uint64_t last_used;
    unsigned users; /* jobs in flight on it */
    bool failed;
};

/* A confirmation that passed: (worker, rkey, user key) by keyed SHA-256,
 * the region the worker confirmed, and until when it counts. */
struct confirmed {
    uint8_t h[16];
    uint64_t base, size, until_ms;
};

struct ol_rdma {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int wfd, evfd;
    pthread_t thread;
    pthread_mutex_t mu;
    struct job *q_head, *q_tail; /* under mu */
    unsigned queued;             /* under mu: queued and in flight */
    bool stop;                   /* under mu */
    /* rdma thread only */
    struct ep eps[OL_RDMA_MAX_EPS];
    struct job *flight;
    unsigned closing;
    uint64_t tick;
    uint8_t *rkey_scratch; /* OL_RDMA_SCRATCH bytes */
    struct ol_rdma_stats st; /* under mu */
    uint8_t vetted[OL_RDMA_MAX_VETTED][16]; /* under mu: SHA-256 prefixes of passed pairs */
    unsigned nvetted;                       /* under mu: slots filled, then the next to replace */
    struct confirmed confirmed[OL_RDMA_MAX_CONFIRMED]; /* under mu */
    unsigned nconfirmed; /* under mu: the next slot to replace (round robin) */
};

static void job_finish(struct ol_rdma *rd, struct job *j)
{
    if (j->rkey)
        ucp_rkey_destroy(j->rkey);
    j->rkey = NULL;
    if (j->ep)
        j->ep->users--;
    pthread_mutex_lock(&rd->mu);
    rd->queued--;
    if (!j->challenge) {
        rd->st.moves++;
        if (j->rc == 0)
            rd->st.bytes += j->len;
        else
            rd->st.errors++;
        if (j->rc == -ETIMEDOUT)
            rd->st.timeouts++;
    }
    pthread_mutex_unlock(&rd->mu);
    ol_completion_signal(&j->done, j->rc);
}

static int map_status(ucs_status_t s)
{
    switch (s) {
    case UCS_OK:
        return 0;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
        return -EHOSTUNREACH;
    case UCS_ERR_CANCELED:
        return -ECANCELED;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
        return -EINVAL;
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_NO_ELEM:
        return -EFAULT;
    default:
        return -EIO;
    }
}

/* ---- endpoints ---- */

static void ep_close(struct ol_rdma *rd, struct ep *e);

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct ep *e = arg;
    (void)ep;
    (void)status;
    e->failed = true;
}

static void close_cb(void *request, ucs_status_t status, void *user_data)
{
    struct ol_rdma *rd = user_data;
    (void)status;
    rd->closing--;
    ucp_request_free(request);
}

static void ep_close(struct ol_rdma *rd, struct ep *e)
{
    if (!e->ep)
        return;
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_EP_CLOSE_FLAG_FORCE,
        .cb.send = close_cb,
        .user_data = rd,
    };
    void *r = ucp_ep_close_nbx(e->ep, &p);
    if (r && !UCS_PTR_IS_ERR(r))
        rd->closing++;
    e->ep = NULL;
    e->failed = false;
}

/* The endpoint to t's worker, made when needed; NULL with *rc set. */
static struct ep *ep_get(struct ol_rdma *rd, const struct ol_rdma_token *t, int *rc)
{
    struct ep *victim = NULL;
    for (unsigned i = 0; i < OL_RDMA_MAX_EPS; i++) {
        struct ep *e = &rd->eps[i];
        if (e->ep && e->failed && e->users == 0)
            ep_close(rd, e);
        if (e->ep && !e->failed && e->addr_len == t->worker_len &&
            memcmp(e->addr, t->worker, t->worker_len) == 0) {
            e->last_used = ++rd->tick;
            return e;
        }
        if (e->users == 0 && (!victim || (victim->ep && (!e->ep || e->last_used < victim->last_used))))
            victim = e;
    }
    if (!victim) {
        *rc = -EAGAIN;
        return NULL;
    }
    if (victim->ep) {
        ep_close(rd, victim);
        pthread_mutex_lock(&rd->mu);
        rd->st.eps_evicted++;
        pthread_mutex_unlock(&rd->mu);
    }
    if (!victim->addr && !(victim->addr = calloc(1, OL_RDMA_SCRATCH))) {
        *rc = -ENOMEM;
        return NULL;
    }
    memset(victim->addr, 0, OL_RDMA_SCRATCH);
    memcpy(victim->addr, t->worker, t->worker_len);
    victim->addr_len = t->worker_len;
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)victim->addr,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_err_cb, .arg = victim},
    };
    ucs_status_t s = ucp_ep_create(rd->worker, &p, &victim->ep);
    if (s != UCS_OK) {
        victim->ep = NULL;
        victim->addr_len = 0;
        ol_log_limited(OL_LOG_WARN, "rdma: cannot reach a client's worker: %s",
                       ucs_status_string(s));
        *rc = -EHOSTUNREACH;
        return NULL;
    }
    victim->failed = false;
    victim->last_used = ++rd->tick;
    /* Which transports UCX picked for this client (bench/RESULTS.md). */
    if (getenv("OPENLAKE_RDMA_EP_INFO"))
        ucp_ep_print_info(victim->ep, stderr);
    pthread_mutex_lock(&rd->mu);
    rd->st.eps_created++;
    pthread_mutex_unlock(&rd->mu);
    return victim;
}

/* ---- transfers ---- */

static void req_cb(void *request, ucs_status_t status, void *user_data)
{
    struct job *j = user_data;
    if (status != UCS_OK && j->rc == 0)
        j->rc = status == UCS_ERR_CANCELED && ol_now_ms() >= j->deadline_ms ? -ETIMEDOUT
                                                                            : map_status(status);
    j->pending--;
    ucp_request_free(request);
}

/* Counts a UCX request: in flight (the callback comes), done, or failed. */
static void req_track(struct job *j, ucs_status_ptr_t r)
{
    if (r == NULL)
        return;
    if (UCS_PTR_IS_ERR(r)) {
        if (j->rc == 0)
            j->rc = map_status(UCS_PTR_STATUS(r));
        return;
    }
    j->pending++;
}

static void job_start(struct ol_rdma *rd, struct job *j)
{
    const struct ol_rdma_token *t = j->t;
    if (j->off > t->len || j->len > t->len - j->off) {
        j->rc = -EINVAL;
        job_finish(rd, j);
        return;
    }
    int rc = 0;
    j->ep = ep_get(rd, t, &rc);
    if (!j->ep) {
        j->rc = rc;
        job_finish(rd, j);
        return;
    }
    j->ep->users++;
    if (j->challenge) {
        /* The answer comes back on the endpoint the client's worker has
         * to this one (UCP_AM_SEND_FLAG_REPLY), found by on_answer. */
        ucp_request_param_t ap = {
            .op_attr_mask =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
            .flags = UCP_AM_SEND_FLAG_REPLY,
            .cb.send = req_cb,
            .user_data = j,
        };
        req_track(j, ucp_am_send_nbx(j->ep->ep, OL_RDMA_AM_CHALLENGE, NULL, 0, j->challenge,
                                     j->challenge_len, &ap));
        j->awaiting = j->rc == 0;
        j->in_flight = true;
        j->next = rd->flight;
        rd->flight = j;
        return;
    }
    memset(rd->rkey_scratch, 0, t->rkey_len + 64);
    memcpy(rd->rkey_scratch, t->rkey, t->rkey_len);
    ucs_status_t s = ucp_ep_rkey_unpack(j->ep->ep, rd->rkey_scratch, &j->rkey);
    if (s != UCS_OK) {
        j->rkey = NULL;
        j->rc = -EINVAL;
        job_finish(rd, j);
        return;
    }
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = req_cb,
        .user_data = j,
    };
    if (j->len > 0) {
        uint64_t raddr = t->addr + j->off;
        ucs_status_ptr_t r = j->dir == OL_RDMA_WRITE
                                 ? ucp_put_nbx(j->ep->ep, j->buf, j->len, raddr, j->rkey, &p)
                                 : ucp_get_nbx(j->ep->ep, j->buf, j->len, raddr, j->rkey, &p);
        req_track(j, r);
    }
    /* The flush completes once every put before it is in the client's
     * memory; a put's own completion only frees its source buffer. */
    if (j->rc == 0 && j->flush)
        req_track(j, ucp_ep_flush_nbx(j->ep->ep, &p));
    j->in_flight = true;
    j->next = rd->flight;
    rd->flight = j;
}

/* A client's answer to a confirmation (native/rdma_confirm.h), on the
 * rdma thread: it goes to the confirmation in flight whose nonce it
 * echoes; anything else (no such confirmation any more, a malformed
 * message) is dropped.  Its MAC is the caller's to check. */
static ucs_status_t on_answer(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    struct ol_rdma *rd = arg;
    (void)header;
    (void)header_length;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length != OL_RDMA_ANSWER_BYTES)
        return UCS_OK;
    struct ol_rdma_answer a;
    if (ol_rdma_answer_decode(data, length, &a) < 0)
        return UCS_OK;
    unsigned guard = 0;
    for (struct job *j = rd->flight; j && guard < OL_RDMA_MAX_QUEUE + 1; j = j->next, guard++) {
        if (j->challenge && j->awaiting &&
            memcmp(j->challenge + 8, a.nonce, OL_RDMA_NONCE_BYTES) == 0) {
            memcpy(j->answer, data, OL_RDMA_ANSWER_BYTES);
            j->awaiting = false;
            break;
        }
    }
    return UCS_OK;
}

/* Finishes the jobs whose requests are all back; closes the endpoints of
 * jobs past their deadline (UCX then cancels their requests). */
static void flight_reap(struct ol_rdma *rd, bool check_time)
{
    uint64_t now = check_time ? ol_now_ms() : 0;
    struct job **pp = &rd->flight;
    for (unsigned guard = 0; *pp && guard < OL_RDMA_MAX_QUEUE + 1; guard++) {
        struct job *j = *pp;
        if (j->pending == 0 && !j->awaiting) {
            *pp = j->next;
            job_finish(rd, j);
            continue;
        }
        if (check_time && now >= j->deadline_ms && j->pending == 0) {
            /* A confirmation sent and not answered: nothing of the
             * caller's is in UCX, the endpoint may stay. */
            j->rc = -ETIMEDOUT;
            j->awaiting = false;
        } else if (check_time && now >= j->deadline_ms && j->ep && j->ep->ep) {
            j->rc = -ETIMEDOUT;
            j->awaiting = false;
            ep_close(rd, j->ep);
        } else if (j->ep && j->ep->failed && j->ep->ep && j->rc == 0) {
            j->rc = -EHOSTUNREACH;
            j->awaiting = false;
        } else if (j->rc != 0) {
            j->awaiting = false; /* an answer can no longer help */
        }
        pp = &j->next;
    }
}

static void *rdma_main(void *arg)
{
    struct ol_rdma *rd = arg;
    uint64_t last_check = ol_now_ms();
    for (;;) {
        pthread_mutex_lock(&rd->mu);
        struct job *q = rd->q_head;
        rd->q_head = rd->q_tail = NULL;
        bool stop = rd->stop;
        pthread_mutex_unlock(&rd->mu);
        if (stop) {
            /* Jobs taken now fail; those in flight are cancelled below. */
            for (unsigned guard = 0; q && guard < OL_RDMA_MAX_QUEUE + 1; guard++) {
                struct job *n = q->next;
                q->rc = -ESHUTDOWN;
                job_finish(rd, q);
                q = n;
            }
            break;
        }
        for (unsigned guard = 0; q && guard < OL_RDMA_MAX_QUEUE + 1; guard++) {
            struct job *n = q->next;
            job_start(rd, q);
            q = n;
        }
        unsigned busy = 0;
        for (unsigned i = 0; i < 64 && ucp_worker_progress(rd->worker); i++)
            busy++;
        uint64_t now = ol_now_ms();
        bool check = now - last_check >= TICK_MS;
        if (check)
            last_check = now;
        flight_reap(rd, check);
        if (busy)
            continue;
        pthread_mutex_lock(&rd->mu);
        bool queued = rd->q_head != NULL || rd->stop;
        pthread_mutex_unlock(&rd->mu);
        if (queued)
            continue;
        if (ucp_worker_arm(rd->worker) == UCS_ERR_BUSY)
            continue;
        struct pollfd pf[2] = {{.fd = rd->evfd, .events = POLLIN},
                               {.fd = rd->wfd, .events = POLLIN}};
        int ms = (rd->flight || rd->closing) ? TICK_MS : IDLE_POLL_MS;
        if (poll(pf, 2, ms) > 0 && (pf[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(rd->evfd, &v, sizeof(v));
            (void)r;
        }
    }
    /* Stopping: close every endpoint (cancelling what is in flight) and
     * progress until UCX has let go of the callers' buffers. */
    for (unsigned i = 0; i < OL_RDMA_MAX_EPS; i++)
        ep_close(rd, &rd->eps[i]);
    uint64_t t0 = ol_now_ms();
    while ((rd->flight || rd->closing) && ol_now_ms() - t0 < STOP_WAIT_MS) {
        ucp_worker_progress(rd->worker);
        for (struct job *j = rd->flight; j; j = j->next) {
            if (j->rc == 0)
                j->rc = -ESHUTDOWN;
            j->awaiting = false;
        }
        flight_reap(rd, false);
    }
    return NULL;
}

/* ---- API ---- */

int ol_rdma_create(struct ol_rdma **out)
{
    struct ol_rdma *rd = calloc(1, sizeof(*rd));
    if (!rd)
        return -ENOMEM;
    rd->wfd = rd->evfd = -1;
    pthread_mutex_init(&rd->mu, NULL);
    rd->rkey_scratch = calloc(1, OL_RDMA_SCRATCH);
    if (!rd->rkey_scratch)
        goto fail;
    ucp_config_t *cfg = NULL;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
    if (s != UCS_OK) {
        ol_error("rdma: ucp_config_read: %s", ucs_status_string(s));
        goto fail;
    }
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
    };
    s = ucp_init(&up, cfg, &rd->ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK) {
        ol_error("rdma: ucp_init: %s", ucs_status_string(s));
        rd->ctx = NULL;
        goto fail;
    }
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    s = ucp_worker_create(rd->ctx, &wp, &rd->worker);
    if (s != UCS_OK) {
        ol_error("rdma: ucp_worker_create: %s", ucs_status_string(s));
        rd->worker = NULL;
        goto fail;
    }
    if (ucp_worker_get_efd(rd->worker, &rd->wfd) != UCS_OK)
        goto fail;
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = OL_RDMA_AM_ANSWER,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = on_answer,
        .arg = rd,
    };
    if (ucp_worker_set_am_recv_handler(rd->worker, &hp) != UCS_OK)
        goto fail;
    rd->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rd->evfd < 0)
        goto fail;
    if (pthread_create(&rd->thread, NULL, rdma_main, rd) != 0)
        goto fail;
    *out = rd;
    return 0;
fail:
    if (rd->evfd >= 0)
        close(rd->evfd);
    if (rd->worker)
        ucp_worker_destroy(rd->worker);
    if (rd->ctx)
        ucp_cleanup(rd->ctx);
    free(rd->rkey_scratch);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
    return -EIO;
}

static void wake(struct ol_rdma *rd)
{
    uint64_t one = 1;
    ssize_t r = write(rd->evfd, &one, sizeof(one));
    (void)r;
}

void ol_rdma_destroy(struct ol_rdma *rd)
{
    if (!rd)
        return;
    pthread_mutex_lock(&rd->mu);
    rd->stop = true;
    pthread_mutex_unlock(&rd->mu);
    wake(rd);
    pthread_join(rd->thread, NULL);
    for (unsigned i = 0; i < OL_RDMA_MAX_EPS; i++)
        free(rd->eps[i].addr);
    ucp_worker_destroy(rd->worker);
    ucp_cleanup(rd->ctx);
    close(rd->evfd);
    free(rd->rkey_scratch);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
}

/* ---- vetting (native/rdma_check.c) ---- */

static void pair_hash(const struct ol_rdma_token *t, uint8_t out[16])
{
    uint8_t sizes[4] = {(uint8_t)t->worker_len, (uint8_t)(t->worker_len >> 8),
                        (uint8_t)t->rkey_len, (uint8_t)(t->rkey_len >> 8)};
    struct ol_bytes parts[3] = {{sizes, 4}, {t->worker, t->worker_len}, {t->rkey, t->rkey_len}};
    uint8_t md[32];
    ol_hmac_sha256("openlake-rdma-vet", 17, parts, 3, md);
    memcpy(out, md, 16);
}

static bool vetted_has(struct ol_rdma *rd, const uint8_t h[16])
{
    bool found = false;
    pthread_mutex_lock(&rd->mu);
    unsigned n = rd->nvetted < OL_RDMA_MAX_VETTED ? rd->nvetted : OL_RDMA_MAX_VETTED;
    for (unsigned i = 0; i < n && !found; i++)
        found = memcmp(rd->vetted[i], h, 16) == 0;
    pthread_mutex_unlock(&rd->mu);
    return found;
}

static char checker_path[PATH_MAX];
static pthread_once_t checker_once = PTHREAD_ONCE_INIT;

/* openlake-rdma-check next to this executable (OPENLAKE_RDMA_CHECK
 * overrides). */
static void checker_find(void)
{
    const char *env = getenv("OPENLAKE_RDMA_CHECK");
    if (env) {
        snprintf(checker_path, sizeof(checker_path), "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    if (strlen(exe) + sizeof("/openlake-rdma-check") <= sizeof(checker_path))
        snprintf(checker_path, sizeof(checker_path), "%.*s/openlake-rdma-check",
                 (int)(sizeof(checker_path) - sizeof("/openlake-rdma-check")), exe);
}

int ol_rdma_vet(struct ol_rdma *rd, const struct ol_rdma_token *t)
{
    uint8_t h[16];
    pair_hash(t, h);
    if (vetted_has(rd, h))
        return 0;
    pthread_once(&checker_once, checker_find);
    if (!checker_path[0] || access(checker_path, X_OK) != 0) {
        ol_log_limited(OL_LOG_ERROR, "rdma: no checker at '%s'", checker_path);
        return -EIO;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -EIO;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    char *argv[] = {checker_path, NULL};
    pid_t pid;
    int src = posix_spawn(&pid, checker_path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (src != 0) {
        close(sv[0]);
        return -EIO;
    }
    uint8_t hdr[4] = {(uint8_t)t->worker_len, (uint8_t)(t->worker_len >> 8),
                      (uint8_t)t->rkey_len, (uint8_t)(t->rkey_len >> 8)};
    char answer = 0;
    int rc = -EINVAL;
    if (ol_io_send(sv[0], hdr, 4, OL_RDMA_VET_TIMEOUT_MS) == 4 &&
        ol_io_send(sv[0], t->worker, t->worker_len, OL_RDMA_VET_TIMEOUT_MS) ==
            (ssize_t)t->worker_len &&
        ol_io_send(sv[0], t->rkey, t->rkey_len, OL_RDMA_VET_TIMEOUT_MS) == (ssize_t)t->rkey_len &&
        ol_io_recv(sv[0], &answer, 1, OL_RDMA_VET_TIMEOUT_MS) == 1 && answer == 'Y')
        rc = 0;
    close(sv[0]);
    /* It has answered (and exits) or is refused: no waiting on a hung one. */
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    pthread_mutex_lock(&rd->mu);
    if (rc == 0) {
        memcpy(rd->vetted[rd->nvetted % OL_RDMA_MAX_VETTED], h, 16);
        rd->nvetted = rd->nvetted + 1 < 2 * OL_RDMA_MAX_VETTED
                          ? rd->nvetted + 1
                          : OL_RDMA_MAX_VETTED + (rd->nvetted + 1) % OL_RDMA_MAX_VETTED;
        rd->st.vetted++;
    } else {
        rd->st.vet_refused++;
    }
    pthread_mutex_unlock(&rd->mu);
    return rc;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static struct ol_rdma *global_rd;

static void global_init(void)
{
    if (ol_rdma_create(&global_rd) < 0)
        global_rd = NULL;
}

struct ol_rdma *ol_rdma_global(void)
{
    pthread_once(&global_once, global_init);
    return global_rd;
}

/* Queues j to the rdma thread and waits for it. */
static int submit_job(struct ol_rdma *rd, struct job *j)
{
    uint8_t h[16];
    pair_hash(j->t, h);
    if (!vetted_has(rd, h))
        return -EINVAL;
    ol_completion_init(&j->done);
    pthread_mutex_lock(&rd->mu);
    if (rd->stop || rd->queued >= OL_RDMA_MAX_QUEUE) {
        int rc = rd->stop ? -ESHUTDOWN : -EAGAIN;
        pthread_mutex_unlock(&rd->mu);
        return rc;
    }
    rd->queued++;
    if (rd->q_tail)
        rd->q_tail->next = j;
    else
        rd->q_head = j;
    rd->q_tail = j;
    pthread_mutex_unlock(&rd->mu);
    wake(rd);
    return ol_completion_wait(&j->done);
}

static int submit(struct ol_rdma *rd, const struct ol_rdma_token *t, enum ol_rdma_dir dir,
                  uint64_t off, void *buf, size_t len, bool flush, unsigned timeout_ms)
{
    if (off > t->len || len > t->len - off)
        return -EINVAL;
    struct job j = {
        .t = t,
        .dir = dir,
        .off = off,
        .buf = buf,
        .len = len,
        .flush = flush,
        .deadline_ms = ol_now_ms() + (timeout_ms ? timeout_ms : OL_RDMA_TIMEOUT_MS),
    };
    return submit_job(rd, &j);
}

/* ---- confirmation (native/rdma_confirm.h) ---- */

static void confirmed_hash(const struct ol_rdma_token *t, const uint8_t key[OL_NET_KEY_BYTES],
                           uint8_t out[16])
{
    uint8_t sizes[4] = {(uint8_t)t->worker_len, (uint8_t)(t->worker_len >> 8),
                        (uint8_t)t->rkey_len, (uint8_t)(t->rkey_len >> 8)};
    struct ol_bytes parts[5] = {{sizes, 4},
                                {t->worker, t->worker_len},
                                {t->rkey, t->rkey_len},
                                {t->tag, OL_RDMA_TOKEN_TAG_BYTES},
                                {key, OL_NET_KEY_BYTES}};
    uint8_t md[32];
    ol_hmac_sha256("openlake-rdma-confirmed", 23, parts, 5, md);
    memcpy(out, md, 16);
}

/* Whether a live confirmation of h covers t's range. */
static bool confirmed_has(struct ol_rdma *rd, const uint8_t h[16], const struct ol_rdma_token *t)
{
    uint64_t now = ol_now_ms();
    bool found = false;
    pthread_mutex_lock(&rd->mu);
    for (unsigned i = 0; i < OL_RDMA_MAX_CONFIRMED && !found; i++) {
        const struct confirmed *c = &rd->confirmed[i];
        found = c->until_ms > now && memcmp(c->h, h, 16) == 0 && t->addr >= c->base &&
                t->addr + t->len <= c->base + c->size;
    }
    pthread_mutex_unlock(&rd->mu);
    return found;
}

static void confirmed_add(struct ol_rdma *rd, const uint8_t h[16], uint64_t base, uint64_t size)
{
    uint64_t now = ol_now_ms();
    pthread_mutex_lock(&rd->mu);
    /* The same (worker, rkey, user) again replaces its entry; else an
     * expired one, else round robin. */
    struct confirmed *slot = NULL;
    for (unsigned i = 0; i < OL_RDMA_MAX_CONFIRMED && !slot; i++)
        if (memcmp(rd->confirmed[i].h, h, 16) == 0)
            slot = &rd->confirmed[i];
    for (unsigned i = 0; i < OL_RDMA_MAX_CONFIRMED && !slot; i++)
        if (rd->confirmed[i].until_ms <= now)
            slot = &rd->confirmed[i];
    if (!slot)
        slot = &rd->confirmed[rd->nconfirmed++ % OL_RDMA_MAX_CONFIRMED];
    memcpy(slot->h, h, 16);
    slot->base = base;
    slot->size = size;
    slot->until_ms = now + OL_RDMA_CONFIRM_TTL_MS;
    pthread_mutex_unlock(&rd->mu);
}

int ol_rdma_confirm(struct ol_rdma *rd, const struct ol_rdma_token *t,
                    const uint8_t key[OL_NET_KEY_BYTES])
{
    uint8_t h[16];
    confirmed_hash(t, key, h);
    if (confirmed_has(rd, h, t))
        return 0;
    struct ol_rdma_challenge c = {
        .addr = t->addr, .len = t->len, .rkey = t->rkey, .rkey_len = t->rkey_len};
    memcpy(c.tag, t->tag, OL_RDMA_TOKEN_TAG_BYTES);
    if (RAND_bytes(c.nonce, OL_RDMA_NONCE_BYTES) != 1)
        return -EIO;
    uint8_t *msg = malloc(OL_RDMA_CHALLENGE_MAX + OL_RDMA_ANSWER_BYTES);
    if (!msg)
        return -ENOMEM;
    int n = ol_rdma_challenge_encode(&c, msg, OL_RDMA_CHALLENGE_MAX);
    int rc = n;
    if (n > 0) {
        struct job j = {
            .t = t,
            .challenge = msg,
            .challenge_len = (size_t)n,
            .answer = msg + OL_RDMA_CHALLENGE_MAX,
            .deadline_ms = ol_now_ms() + OL_RDMA_CONFIRM_TIMEOUT_MS,
        };
        memset(j.answer, 0, OL_RDMA_ANSWER_BYTES);
        rc = submit_job(rd, &j);
    }
    struct ol_rdma_answer a = {0};
    if (rc == 0 &&
        (ol_rdma_answer_decode(msg + OL_RDMA_CHALLENGE_MAX, OL_RDMA_ANSWER_BYTES, &a) < 0 ||
         !ol_rdma_answer_confirms(key, msg, (size_t)n, &a, t->addr, t->len)))
        rc = -EACCES;
    free(msg);
    pthread_mutex_lock(&rd->mu);
    if (rc == 0)
        rd->st.confirmed++;
    else
        rd->st.confirm_refused++;
    pthread_mutex_unlock(&rd->mu);
    if (rc == 0)
        confirmed_add(rd, h, a.base, a.size);
    return rc;
}

int ol_rdma_move(struct ol_rdma *rd, const struct ol_rdma_token *t, enum ol_rdma_dir dir,
                 uint64_t off, void *buf, size_t len, unsigned timeout_ms)
{
    return submit(rd, t, dir, off, buf, len, false, timeout_ms);
}

int ol_rdma_flush(struct ol_rdma *rd, const struct ol_rdma_token *t, unsigned timeout_ms)
{
    return submit(rd, t, OL_RDMA_WRITE, 0, NULL, 0, true, timeout_ms);
}

void ol_rdma_stats(struct ol_rdma *rd, struct ol_rdma_stats *out)
{
    pthread_mutex_lock(&rd->mu);
    *out = rd->st;
    pthread_mutex_unlock(&rd->mu);
}
