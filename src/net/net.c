/* The UCX transport: see net/net.h for the contract.
 *
 * Everything UCX is touched by the net thread only (the worker is created
 * UCS_THREAD_MODE_SINGLE).  Other threads hand it work through `q` (a
 * mutex-protected FIFO of struct item) and wake it through an eventfd that
 * it polls next to the worker's event fd.
 *
 * A client call's state (struct pending) lives on the caller's stack: the
 * caller waits on its completion, and the net thread signals that completion
 * only once nothing (the pending table, a UCX request, a buffer of the call)
 * refers to the frame any more.  That is why a timed-out call whose bytes UCX
 * is still moving resets the endpoint first (net.h).
 */
#include "net/net.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "core/clock.h"
#include "core/crc.h"
#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"
#include "core/loop.h"
#include "native/rdma_confirm.h"
#include "net/auth.h"

enum {
    SLOT_BITS = 12,
    TICK_MS = 10,            /* timeout granularity while calls are in flight */
    IDLE_POLL_MS = 200,      /* poll bound when nothing is in flight */
    PROGRESS_BATCH = 64,     /* progress calls per pass before looking at the queue */
    DRAIN_BATCH = 256,       /* queue items per pass */
    SHUTDOWN_WAIT_MS = 2000, /* how long destroy waits for UCX to let go */
};
_Static_assert((1u << SLOT_BITS) == OL_NET_MAX_INFLIGHT, "one slot per call in flight");

enum item_kind { IT_CALL, IT_REPLY, IT_EXEC };

struct item {
    enum item_kind kind;
    struct item *next;
};

struct peer {
    struct ol_net *net;
    char addr[OL_NET_MAX_ADDR];
    ucp_ep_h ep;
    bool failed; /* an error was seen: close the endpoint, make a new one on the next call */
};

struct pending {
    struct item it; /* first */
    struct ol_net_call *c;
    struct ol_completion done;
    struct peer *peer;
    struct ol_wire_hdr hdr;
    ucp_dt_iov_t siov[2], riov[2];
    void *send_req, *recv_req;
    uint64_t id, deadline_ms;
    int result;
    uint32_t data_crc;       /* of the request's data, computed by the caller */
    uint32_t rep_crc;        /* the reply's, as its header says */
    struct ol_wire_hdr rhdr; /* the reply's header (checked when its bytes are in) */
    bool answered;           /* a reply came (a duplicate is dropped) */
    bool finished;           /* result decided */
    bool in_table;
    bool signaled;
    /* ol_net_call_async: the callback, run on the net thread instead of
     * signaling done; the pending is then heap memory, freed after it. */
    ol_net_call_cb cb;
    void *cb_arg;
};

struct conn {
    struct conn *next;
    ucp_ep_h ep;
    uint64_t id;
    unsigned refs; /* requests that still point here */
    bool dead;     /* error seen: replies are dropped */
    bool closed;   /* endpoint closed (after dead) */
};

struct ol_net_req {
    struct item it; /* first */
    struct ol_net *net;
    struct conn *conn;
    struct ol_wire_hdr hdr;
    uint8_t *buf; /* ctl then data */
    /* The reply. */
    struct ol_wire_hdr rhdr;
    void *rctl, *rdata;
    size_t rctl_len, rdata_len;
    /* Who lets go of rdata (ol_net_reply_ex); NULL: free(). */
    void (*release)(void *arg, void *data);
    void *release_arg;
    ucp_dt_iov_t iov[2];
    /* The key the request was checked with and its reply is signed with
     * (opts.key, or key_fn's). */
    uint8_t key[OL_NET_KEY_BYTES];
};

struct exec {
    struct item it; /* first */
    void (*fn)(struct ol_net *net, struct exec *e);
    struct ol_completion done;
    bool async; /* freed by the net thread after fn */
    int rc;
    /* Arguments of the execs below. */
    const char *host;
    uint16_t port;
    unsigned ms;
    void *addr;
    size_t len;
    void *memh;
    uint8_t *out; /* exec_worker_address, exec_rkey_pack: copied here */
    size_t cap;
};

/* Large request buffers are kept for reuse (net thread only: it allocates
 * them when a request arrives and frees them with the request): a fresh
 * mapping for each 64 MiB message costs a page fault per 4 KiB page, which
 * on a VM was most of a large message's time.  Power-of-two classes from
 * 4 MiB (malloc's heap serves smaller ones) to OL_WIRE_MAX_DATA's size, at
 * most RBUF_KEEP of each. */
enum { RBUF_MIN_SHIFT = 22, RBUF_CLASSES = 6, RBUF_KEEP = 2, RBUF_HDR = 64 };
struct rbuf_free {
    struct rbuf_free *next;
};

struct ol_net {
    unsigned timeout_ms;
    struct ol_hlc *hlc;            /* opts.hlc: any thread reads it, it has its own atomics */
    uint8_t key[OL_NET_KEY_BYTES]; /* opts.key (net/auth.h); read-only */
    struct rbuf_free *rbuf[RBUF_CLASSES]; /* net thread only */
    unsigned nrbuf[RBUF_CLASSES];
    bool (*key_fn)(void *arg, const struct ol_wire_hdr *h, const void *ctl, size_t ctl_len,
                   uint8_t key[OL_NET_KEY_BYTES]);
    void *key_arg;
    unsigned spin_us; /* opts.spin_us */
    bool (*rma_confirm)(void *arg, const uint8_t *rkey, size_t rkey_len,
                        const uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES], uint64_t addr, uint64_t len,
                        uint64_t *base, uint64_t *size);
    void *rma_confirm_arg;
    pthread_t thread;
    int evfd, wfd;
    ucp_context_h ctx;
    ucp_worker_h worker;

    int sleeping; /* atomic: the net thread may block in poll */
    int woken;    /* atomic: this sleep's wakeup is written already */

    pthread_mutex_t mu; /* guards q_*, stopping, stats */
    struct item *q_head, *q_tail;
    bool stopping;
    struct ol_net_stats st;

    /* Net thread only from here on. */
    bool stop;
    struct pending *slot[OL_NET_MAX_INFLIGHT];
    unsigned free_slot[OL_NET_MAX_INFLIGHT], nfree;
    uint64_t seq;
    unsigned inflight;
    struct peer peers[OL_NET_MAX_PEERS];
    unsigned npeers;
    unsigned closing; /* endpoint closes still in progress */

    ucp_listener_h listener;
    uint16_t port;
    ol_net_serve_fn serve;
    ol_net_gone_fn gone;
    void *serve_ctx;
    struct conn *conns;
    unsigned nconns;
    uint64_t next_conn_id;
    unsigned stall_after_reply_ms; /* tests: ol_net_test_stall_after_reply */
};

static void stat_add(struct ol_net *net, uint64_t *field)
{
    pthread_mutex_lock(&net->mu);
    (*field)++;
    pthread_mutex_unlock(&net->mu);
}

/* The stamp a message leaves with (net.h, "Clock"). */
static uint64_t clock_out(struct ol_net *net)
{
    if (net->hlc)
        return ol_hlc_now(net->hlc);
    /* No HLC: the wall clock in its form (authentication checks that a
     * stamp is fresh). */
    return ((uint64_t)ol_wall_ns() / 1000000u) << 16;
}

/* Whether a received message is authentic (its MAC under the key, over its
 * header and control bytes) and fresh (its stamp within the window of this
 * node's wall clock: an old captured message is not taken again).  Counted
 * and warned about (rate-limited) when not. */
static bool authentic_with(struct ol_net *net, const uint8_t *key, const struct ol_wire_hdr *h,
                           const void *ctl)
{
    if (ol_wire_verify(key, h, ctl, h->ctl_len) &&
        ol_wire_fresh(h->hlc, (uint64_t)ol_wall_ns() / 1000000u))
        return true;
    stat_add(net, &net->st.auth_failures);
    ol_log_limited(OL_LOG_WARN,
                   "net: a %s (op %u) failed authentication (a wrong cluster key, a stale or "
                   "forged message): refused",
                   (h->flags & OL_WIRE_F_REPLY) ? "reply" : "request", (unsigned)h->op);
    return false;
}

static bool authentic(struct ol_net *net, const struct ol_wire_hdr *h, const void *ctl)
{
    return authentic_with(net, net->key, h, ctl);
}

/* Takes in a received message's stamp, before anyone acts on the message.
 * A stamp too far ahead is not adopted: refusing the message instead would
 * let one node with a wild clock stop every write of the cluster, and
 * adopting it would drag every clock into its future, so the message is
 * served and the clock stays (versions the node then writes may order
 * before that peer's; the warning says why). */
static void clock_in(struct ol_net *net, uint64_t stamp)
{
    if (!net->hlc || stamp == 0)
        return;
    if (ol_hlc_update(net->hlc, stamp, NULL) == 0)
        return;
    stat_add(net, &net->st.hlc_refused);
    int64_t ahead_ms = (int64_t)ol_hlc_stamp_ms(stamp) - ol_wall_ns() / 1000000;
    ol_log_limited(OL_LOG_WARN,
                   "net: a peer's clock is %" PRId64 " ms ahead of this node's (more than "
                   "%" PRIu64 " ms): its stamp is not adopted; check the clocks' sync",
                   ahead_ms, net->hlc->max_ahead_ms);
}

static int map_status(ucs_status_t s)
{
    switch (s) {
    case UCS_OK:
        return 0;
    case UCS_ERR_NO_MEMORY:
        return -ENOMEM;
    case UCS_ERR_TIMED_OUT:
        return -ETIMEDOUT;
    case UCS_ERR_UNREACHABLE:
        return -EHOSTUNREACH;
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
        return -ECONNREFUSED;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED:
        return -ECONNRESET;
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_EXCEEDS_LIMIT:
        return -EMSGSIZE;
    default:
        return -EIO;
    }
}

/* ---- the queue into the net thread ---- */

static int enqueue(struct ol_net *net, struct item *it, bool even_stopping)
{
    pthread_mutex_lock(&net->mu);
    if (net->stopping && !even_stopping) {
        pthread_mutex_unlock(&net->mu);
        return -ESHUTDOWN;
    }
    it->next = NULL;
    if (net->q_tail)
        net->q_tail->next = it;
    else
        net->q_head = it;
    net->q_tail = it;
    pthread_mutex_unlock(&net->mu);
    /* One write per sleep of the net thread (as core/loop.c's wake_loop):
     * while it runs, it drains the queue before it sleeps again.  A full
     * eventfd counter still wakes the poll, so a failed write loses
     * nothing. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&net->sleeping, __ATOMIC_SEQ_CST) &&
        !__atomic_exchange_n(&net->woken, 1, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        ssize_t n = write(net->evfd, &one, sizeof(one));
        (void)n;
    }
    return 0;
}

/* ---- closing endpoints ---- */

static void close_cb(void *request, ucs_status_t status, void *user_data)
{
    struct ol_net *net = user_data;
    (void)status;
    net->closing--;
    ucp_request_free(request);
}

/* Closes ep at once (FORCE): UCX fails what is still in flight on it, which
 * is what lets go of a timed-out call's buffers. */
static void ep_close(struct ol_net *net, ucp_ep_h ep)
{
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_EP_CLOSE_FLAG_FORCE,
        .cb.send = close_cb,
        .user_data = net,
    };
    void *r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r))
        net->closing++;
}

/* ---- client calls ---- */

static void table_del(struct ol_net *net, struct pending *p)
{
    if (!p->in_table)
        return;
    unsigned s = (unsigned)(p->id & (OL_NET_MAX_INFLIGHT - 1));
    OL_ASSERT(net->slot[s] == p);
    net->slot[s] = NULL;
    net->free_slot[net->nfree++] = s;
    p->in_table = false;
    net->inflight--;
}

static struct pending *table_find(struct ol_net *net, uint64_t id)
{
    struct pending *p = net->slot[id & (OL_NET_MAX_INFLIGHT - 1)];
    return p && p->id == id ? p : NULL;
}

/* Hands a call's result to its caller: signals the thread waiting in
 * ol_net_call, or (ol_net_call_async) checks the reply's data CRC, runs the
 * callback here on the net thread and frees the call.  After this the
 * pending may be gone: touch nothing. */
static void signal_call(struct pending *p, int result)
{
    p->signaled = true;
    if (!p->cb) {
        ol_completion_signal(&p->done, result);
        return;
    }
    struct ol_net_call *c = p->c;
    if (result >= 0 && c->rep_data_len && ol_crc32c(c->rep_data, c->rep_data_len) != p->rep_crc)
        result = -EIO;
    ol_net_call_cb cb = p->cb;
    void *arg = p->cb_arg;
    free(p);
    cb(arg, c, result);
}

/* Signals the caller once the result is decided and UCX holds nothing of
 * the call.  After the signal the frame may be gone: touch nothing. */
static void maybe_finish(struct ol_net *net, struct pending *p)
{
    if (!p->finished || p->send_req || p->recv_req || p->signaled)
        return;
    table_del(net, p);
    signal_call(p, p->result);
}

static void finish(struct ol_net *net, struct pending *p, int result)
{
    if (p->finished) {
        maybe_finish(net, p);
        return;
    }
    p->finished = true;
    p->result = result;
    /* Out of the table now, so that a late reply finds nothing. */
    table_del(net, p);
    maybe_finish(net, p);
}

/* Fails every call in flight to peer, and marks the endpoint for a reset. */
static void peer_fail(struct ol_net *net, struct peer *peer, int err)
{
    if (!peer->failed) {
        peer->failed = true;
        stat_add(net, &net->st.resets);
    }
    for (unsigned s = 0; s < OL_NET_MAX_INFLIGHT; s++) {
        struct pending *p = net->slot[s];
        if (p && p->peer == peer)
            finish(net, p, err);
    }
}

static int split_addr(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1])
        return -EINVAL;
    size_t hl = (size_t)(colon - addr);
    if (*addr == '[' && hl >= 2 && addr[hl - 1] == ']') { /* [v6]:port */
        addr++;
        hl -= 2;
    }
    if (hl >= hcap || strlen(colon + 1) >= pcap)
        return -EINVAL;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

static void client_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status);

/* The endpoint of peer, made when there is none.  getaddrinfo may block on
 * a name lookup: the cluster map gives numeric addresses. */
static int peer_ep(struct ol_net *net, struct peer *peer, ucp_ep_h *out)
{
    if (peer->ep && !peer->failed) {
        *out = peer->ep;
        return 0;
    }
    if (peer->ep) {
        ep_close(net, peer->ep);
        peer->ep = NULL;
    }
    peer->failed = false;
    char host[OL_NET_MAX_ADDR], port[16];
    if (split_addr(peer->addr, host, sizeof(host), port, sizeof(port)) < 0)
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = client_err_cb, .arg = peer},
    };
    ucs_status_t st = ucp_ep_create(net->worker, &ep_params, &peer->ep);
    freeaddrinfo(ai);
    if (st != UCS_OK) {
        peer->ep = NULL;
        return map_status(st);
    }
    stat_add(net, &net->st.eps_created);
    *out = peer->ep;
    return 0;
}

static struct ol_net *peer_net(struct peer *peer)
{
    return peer->net;
}

static void client_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct peer *peer = arg;
    struct ol_net *net = peer_net(peer);
    if (peer->ep != ep)
        return; /* an endpoint already replaced */
    int err = map_status(status);
    peer_fail(net, peer, err == -ETIMEDOUT ? -ECONNRESET : err);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    struct pending *p = user_data;
    struct ol_net *net = peer_net(p->peer);
    p->send_req = NULL;
    ucp_request_free(request);
    if (status != UCS_OK)
        finish(net, p, map_status(status));
    else
        maybe_finish(net, p);
}

/* A reply's bytes are in: its status, or -EACCES when it is not authentic
 * (the caller then sees no byte of it as an answer).  Its clock is taken in
 * before the caller can wake. */
static int reply_in(struct ol_net *net, struct pending *p)
{
    if (!authentic(net, &p->rhdr, p->c->rep_ctl))
        return -EACCES;
    clock_in(net, p->rhdr.hlc);
    return p->rhdr.status;
}

static void recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    struct pending *p = user_data;
    struct ol_net *net = peer_net(p->peer);
    (void)length;
    p->recv_req = NULL;
    ucp_request_free(request);
    /* finish() keeps an earlier result (a timeout that reset the endpoint). */
    finish(net, p, status == UCS_OK ? reply_in(net, p) : map_status(status));
}

static struct peer *peer_find(struct ol_net *net, const char *addr)
{
    for (unsigned i = 0; i < net->npeers; i++)
        if (strcmp(net->peers[i].addr, addr) == 0)
            return &net->peers[i];
    if (net->npeers == OL_NET_MAX_PEERS)
        return NULL;
    struct peer *peer = &net->peers[net->npeers++];
    memset(peer, 0, sizeof(*peer));
    peer->net = net;
    snprintf(peer->addr, sizeof(peer->addr), "%s", addr);
    return peer;
}

static void start_call(struct ol_net *net, struct pending *p)
{
    struct ol_net_call *c = p->c;
    p->peer = peer_find(net, c->addr);
    if (!p->peer) {
        p->finished = true;
        p->result = -EAGAIN;
        /* Not in the table and no peer: signal directly. */
        signal_call(p, p->result);
        return;
    }
    if (net->nfree == 0) {
        p->finished = true;
        signal_call(p, -EAGAIN);
        return;
    }
    unsigned s = net->free_slot[--net->nfree];
    p->id = (++net->seq << SLOT_BITS) | s;
    net->slot[s] = p;
    p->in_table = true;
    net->inflight++;
    p->deadline_ms = ol_now_ms() + (c->timeout_ms ? c->timeout_ms : net->timeout_ms);

    ucp_ep_h ep = NULL;
    int rc = peer_ep(net, p->peer, &ep);
    if (rc < 0) {
        finish(net, p, rc);
        return;
    }
    p->hdr = (struct ol_wire_hdr){
        .magic = OL_WIRE_MAGIC,
        .version = OL_WIRE_VERSION,
        .op = c->op,
        .drive = c->drive,
        .req_id = p->id,
        .hlc = clock_out(net),
        .ctl_len = (uint32_t)c->ctl_len,
        .data_len = c->data_len,
        .data_crc = p->data_crc,
    };
    ol_wire_sign(net->key, &p->hdr, c->ctl, c->ctl_len);
    unsigned n = 0;
    if (c->ctl_len)
        p->siov[n++] = (ucp_dt_iov_t){(void *)c->ctl, c->ctl_len};
    if (c->data_len)
        p->siov[n++] = (ucp_dt_iov_t){(void *)c->data, c->data_len};
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE,
        .flags = UCP_AM_SEND_FLAG_REPLY,
        .cb.send = send_cb,
        .user_data = p,
        .datatype = ucp_dt_make_iov(),
    };
    void *r = ucp_am_send_nbx(ep, OL_WIRE_AM_REQUEST, &p->hdr, sizeof(p->hdr), p->siov, n, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        finish(net, p, map_status(UCS_PTR_STATUS(r)));
        return;
    }
    p->send_req = r;
}

static ucs_status_t on_reply(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
    struct ol_net *net = arg;
    struct ol_wire_hdr h;
    struct pending *p =
        ol_wire_hdr_get(header, header_length, &h) ? table_find(net, h.req_id) : NULL;
    if (!p || p->finished || p->answered) {
        /* A reply to a call that timed out (or garbage): dropped, a
         * rendezvous included (returning UCS_OK lets UCX discard it). */
        stat_add(net, &net->st.late_replies);
        return UCS_OK;
    }
    struct ol_net_call *c = p->c;
    int bad = ol_wire_rep_check(&h, length, c->op, c->rep_ctl_cap, c->rep_data_cap);
    if (bad < 0) {
        finish(net, p, bad);
        return UCS_OK;
    }
    p->rhdr = h;
    p->hdr.status = h.status;
    p->rep_crc = h.data_crc;
    c->rep_ctl_len = h.ctl_len;
    c->rep_data_len = h.data_len;
    /* Stays in the table until its bytes are in, so that a rendezvous that
     * hangs still times out. */
    p->answered = true;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (h.ctl_len)
            memcpy(c->rep_ctl, data, h.ctl_len);
        if (h.data_len)
            memcpy(c->rep_data, (const uint8_t *)data + h.ctl_len, h.data_len);
        finish(net, p, reply_in(net, p));
        return UCS_OK;
    }
    stat_add(net, &net->st.rndv_in);
    unsigned n = 0;
    if (h.ctl_len)
        p->riov[n++] = (ucp_dt_iov_t){c->rep_ctl, h.ctl_len};
    if (h.data_len)
        p->riov[n++] = (ucp_dt_iov_t){c->rep_data, h.data_len};
    ucp_request_param_t rp = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE,
        .cb.recv_am = recv_cb,
        .user_data = p,
        .datatype = ucp_dt_make_iov(),
    };
    void *r = ucp_am_recv_data_nbx(net->worker, data, p->riov, n, &rp);
    if (r == NULL)
        finish(net, p, reply_in(net, p));
    else if (UCS_PTR_IS_ERR(r))
        finish(net, p, map_status(UCS_PTR_STATUS(r)));
    else
        p->recv_req = r;
    return UCS_INPROGRESS;
}

static void check_timeouts(struct ol_net *net, uint64_t now)
{
    if (net->inflight == 0)
        return;
    for (unsigned s = 0; s < OL_NET_MAX_INFLIGHT; s++) {
        struct pending *p = net->slot[s];
        if (!p || p->finished || now < p->deadline_ms)
            continue;
        stat_add(net, &net->st.timeouts);
        struct peer *peer = p->peer;
        bool busy = p->send_req || p->recv_req;
        finish(net, p, -ETIMEDOUT);
        /* UCX still reads or writes the call's buffers: reset the endpoint,
         * which fails those requests, so that the caller's buffers are free
         * when it returns. */
        if (busy)
            peer_fail(net, peer, -ECONNRESET);
    }
}

/* ---- server side ---- */

static struct conn *conn_find(struct ol_net *net, ucp_ep_h ep)
{
    for (struct conn *c = net->conns; c; c = c->next)
        if (c->ep == ep && !c->dead)
            return c;
    return NULL;
}

static void conn_unref(struct ol_net *net, struct conn *c)
{
    OL_ASSERT(c->refs > 0);
    c->refs--;
}

/* Frees dead connections that nothing points to any more. */
static void conns_reap(struct ol_net *net)
{
    struct conn **pp = &net->conns;
    while (*pp) {
        struct conn *c = *pp;
        if (c->dead && !c->closed) {
            ep_close(net, c->ep);
            c->closed = true;
            if (net->gone)
                net->gone(net->serve_ctx, c->id);
        }
        if (c->dead && c->refs == 0) {
            *pp = c->next;
            net->nconns--;
            free(c);
            continue;
        }
        pp = &c->next;
    }
}

static void server_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct conn *c = arg;
    (void)ep;
    (void)status;
    c->dead = true; /* conns_reap closes it and says it is gone */
}

static void conn_cb(ucp_conn_request_h creq, void *arg)
{
    struct ol_net *net = arg;
    if (net->nconns >= OL_NET_MAX_CONNS || net->stop) {
        ucp_listener_reject(net->listener, creq);
        return;
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        ucp_listener_reject(net->listener, creq);
        return;
    }
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = creq,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = server_err_cb, .arg = c},
    };
    if (ucp_ep_create(net->worker, &ep_params, &c->ep) != UCS_OK) {
        free(c);
        return;
    }
    c->id = ++net->next_conn_id;
    c->next = net->conns;
    net->conns = c;
    net->nconns++;
}

/* The class of n bytes (n >= 4 MiB), or -1 past the largest. */
static int rbuf_class(size_t n)
{
    for (int c = 0; c < RBUF_CLASSES; c++)
        if (n <= (size_t)1 << (RBUF_MIN_SHIFT + c))
            return c;
    return -1;
}

/* A request buffer of n bytes (net thread); the class sits in the word
 * before it. */
static uint8_t *rbuf_get(struct ol_net *net, size_t n)
{
    int c = n >= ((size_t)1 << RBUF_MIN_SHIFT) ? rbuf_class(n) : -1;
    uint8_t *b = NULL;
    if (c >= 0 && net->rbuf[c]) {
        b = (uint8_t *)net->rbuf[c];
        net->rbuf[c] = net->rbuf[c]->next;
        net->nrbuf[c]--;
    } else {
        b = malloc(RBUF_HDR + (c >= 0 ? (size_t)1 << (RBUF_MIN_SHIFT + c) : (n ? n : 1)));
    }
    if (!b)
        return NULL;
    memcpy(b, &c, sizeof(c));
    return b + RBUF_HDR;
}

static void rbuf_put(struct ol_net *net, uint8_t *p)
{
    if (!p)
        return;
    uint8_t *b = p - RBUF_HDR;
    int c;
    memcpy(&c, b, sizeof(c));
    if (c >= 0 && net->nrbuf[c] < RBUF_KEEP && !net->stop) {
        struct rbuf_free *f = (struct rbuf_free *)b;
        f->next = net->rbuf[c];
        net->rbuf[c] = f;
        net->nrbuf[c]++;
        return;
    }
    free(b);
}

static void req_free(struct ol_net *net, struct ol_net_req *req)
{
    if (req->conn)
        conn_unref(net, req->conn);
    rbuf_put(net, req->buf);
    free(req->rctl);
    if (req->release)
        req->release(req->release_arg, req->rdata);
    else
        free(req->rdata);
    free(req);
}

static void reply_now(struct ol_net *net, struct ol_net_req *req, int status);

static void deliver(struct ol_net *net, struct ol_net_req *req)
{
    stat_add(net, &net->st.requests);
    if (req->conn->dead || !net->serve) {
        req_free(net, req);
        return;
    }
    /* Before the request reaches a worker, and before its clock counts. */
    bool keyed = true;
    if (net->key_fn)
        keyed = net->key_fn(net->key_arg, &req->hdr, req->buf, req->hdr.ctl_len, req->key);
    else
        memcpy(req->key, net->key, sizeof(req->key));
    if (!keyed) {
        /* No key to check it with: refused as a failed MAC is (the reply's
         * MAC, under the zero key, fails the caller's check too). */
        memset(req->key, 0, sizeof(req->key));
        stat_add(net, &net->st.auth_failures);
        ol_log_limited(OL_LOG_WARN, "net: a request (op %u) named no known key: refused",
                       (unsigned)req->hdr.op);
        reply_now(net, req, -EACCES);
        return;
    }
    if (!authentic_with(net, req->key, &req->hdr, req->buf)) {
        reply_now(net, req, -EACCES);
        return;
    }
    clock_in(net, req->hdr.hlc);
    net->serve(net->serve_ctx, req);
}

static void srv_recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    struct ol_net_req *req = user_data;
    (void)length;
    ucp_request_free(request);
    if (status != UCS_OK)
        req_free(req->net, req);
    else
        deliver(req->net, req);
}

static ucs_status_t on_request(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param)
{
    struct ol_net *net = arg;
    struct ol_wire_hdr h;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        !ol_wire_hdr_get(header, header_length, &h))
        return UCS_OK;
    struct conn *conn = conn_find(net, param->reply_ep);
    if (!conn)
        return UCS_OK; /* not one of ours (or already dead): no one to answer */
    struct ol_net_req *req = calloc(1, sizeof(*req));
    if (!req)
        return UCS_OK;
    req->net = net;
    req->conn = conn;
    conn->refs++;
    req->hdr = h;
    /* Until deliver picks the request's own key (key_fn). */
    memcpy(req->key, net->key, sizeof(req->key));
    int bad = ol_wire_req_check(&h, length);
    if (bad < 0) {
        /* The bytes are dropped (a rendezvous is never fetched). */
        reply_now(net, req, bad);
        return UCS_OK;
    }
    req->buf = rbuf_get(net, length);
    if (!req->buf) {
        reply_now(net, req, -ENOMEM);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (length)
            memcpy(req->buf, data, length);
        deliver(net, req);
        return UCS_OK;
    }
    stat_add(net, &net->st.rndv_in);
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = srv_recv_cb,
        .user_data = req,
    };
    void *r = ucp_am_recv_data_nbx(net->worker, data, req->buf, length, &rp);
    if (r == NULL)
        deliver(net, req);
    else if (UCS_PTR_IS_ERR(r))
        req_free(net, req);
    return UCS_INPROGRESS;
}

static void reply_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    struct ol_net_req *req = user_data;
    (void)status;
    ucp_request_free(request);
    req_free(req->net, req);
}

/* Makes req's reply header (status; rctl, rdata and rhdr.data_crc set) and
 * signs it: on the replying thread for ol_net_reply (so that the net thread
 * computes no MAC over a large listing), on the net thread for reply_now. */
static void reply_hdr(struct ol_net *net, struct ol_net_req *req, int status)
{
    req->rhdr = (struct ol_wire_hdr){
        .magic = OL_WIRE_MAGIC,
        .version = OL_WIRE_VERSION,
        .op = req->hdr.op,
        .flags = OL_WIRE_F_REPLY,
        .drive = req->hdr.drive,
        .status = status,
        .req_id = req->hdr.req_id,
        .hlc = clock_out(net),
        .ctl_len = (uint32_t)req->rctl_len,
        .data_len = req->rdata_len,
        .data_crc = req->rhdr.data_crc,
    };
    ol_wire_sign(req->key, &req->rhdr, req->rctl, req->rctl_len);
}

/* Sends req's reply, its header made (net thread). */
static void send_reply(struct ol_net *net, struct ol_net_req *req)
{
    if (req->conn->dead || net->stop) {
        req_free(net, req);
        return;
    }
    unsigned n = 0;
    if (req->rctl_len)
        req->iov[n++] = (ucp_dt_iov_t){req->rctl, req->rctl_len};
    if (req->rdata_len)
        req->iov[n++] = (ucp_dt_iov_t){req->rdata, req->rdata_len};
    ucp_request_param_t rp = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE,
        .cb.send = reply_sent_cb,
        .user_data = req,
        .datatype = ucp_dt_make_iov(),
    };
    void *r = ucp_am_send_nbx(req->conn->ep, OL_WIRE_AM_REPLY, &req->rhdr, sizeof(req->rhdr),
                              req->iov, n, &rp);
    if (r == NULL || UCS_PTR_IS_ERR(r))
        req_free(net, req);
    if (net->stall_after_reply_ms) {
        /* Tests: let the reply's first bytes (a rendezvous' announcement)
         * leave, then hang with the rest of it pending. */
        unsigned ms = net->stall_after_reply_ms;
        net->stall_after_reply_ms = 0;
        uint64_t t0 = ol_now_ms();
        while (ol_now_ms() - t0 < 5)
            ucp_worker_progress(net->worker);
        usleep(ms * 1000u);
    }
}

static void reply_now(struct ol_net *net, struct ol_net_req *req, int status)
{
    req->rctl = req->rdata = NULL;
    req->rctl_len = req->rdata_len = 0;
    req->rhdr.data_crc = 0;
    reply_hdr(net, req, status);
    send_reply(net, req);
}

const struct ol_wire_hdr *ol_net_req_hdr(const struct ol_net_req *req)
{
    return &req->hdr;
}
const void *ol_net_req_ctl(const struct ol_net_req *req)
{
    return req->buf;
}
const void *ol_net_req_data(const struct ol_net_req *req)
{
    return req->buf + req->hdr.ctl_len;
}
uint64_t ol_net_req_conn(const struct ol_net_req *req)
{
    return req->conn->id;
}

int ol_net_req_check(const struct ol_net_req *req)
{
    if (req->hdr.data_len == 0)
        return 0;
    return ol_crc32c(req->buf + req->hdr.ctl_len, req->hdr.data_len) == req->hdr.data_crc ? 0
                                                                                          : -EIO;
}

void ol_net_reply(struct ol_net_req *req, int status, void *ctl, size_t ctl_len, void *data,
                  size_t data_len)
{
    ol_net_reply_ex(req, status, ctl, ctl_len, data, data_len, NULL, NULL);
}

void ol_net_reply_ex(struct ol_net_req *req, int status, void *ctl, size_t ctl_len, void *data,
                     size_t data_len, void (*release)(void *arg, void *data), void *arg)
{
    req->release = data ? release : NULL;
    req->release_arg = arg;
    OL_ASSERT(ctl_len <= OL_WIRE_MAX_CTL && data_len <= OL_WIRE_MAX_DATA);
    req->rctl = ctl;
    req->rctl_len = ctl ? ctl_len : 0;
    req->rdata = data;
    req->rdata_len = data ? data_len : 0;
    /* On the caller's thread: the net thread computes no checksums. */
    req->rhdr.data_crc = req->rdata_len ? ol_crc32c(data, req->rdata_len) : 0;
    reply_hdr(req->net, req, status);
    req->it.kind = IT_REPLY;
    /* Even while stopping: the net thread then frees it unsent. */
    enqueue(req->net, &req->it, true);
}

/* ---- execs (work run on the net thread for other threads) ---- */

static void exec_listen(struct ol_net *net, struct exec *e)
{
    if (net->listener) {
        e->rc = -EALREADY;
        return;
    }
    char port[8];
    snprintf(port, sizeof(port), "%u", e->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai;
    if (getaddrinfo(e->host, port, &hints, &ai) != 0) {
        e->rc = -EINVAL;
        return;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
        .conn_handler = {.cb = conn_cb, .arg = net},
    };
    ucs_status_t st = ucp_listener_create(net->worker, &lp, &net->listener);
    freeaddrinfo(ai);
    if (st != UCS_OK) {
        net->listener = NULL;
        e->rc = st == UCS_ERR_BUSY ? -EADDRINUSE : map_status(st);
        return;
    }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (ucp_listener_query(net->listener, &la) == UCS_OK) {
        const struct sockaddr *sa = (const struct sockaddr *)&la.sockaddr;
        if (sa->sa_family == AF_INET)
            net->port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        else if (sa->sa_family == AF_INET6)
            net->port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    }
    e->rc = 0;
}

static void exec_unlisten(struct ol_net *net, struct exec *e)
{
    (void)e;
    if (net->listener)
        ucp_listener_destroy(net->listener);
    net->listener = NULL;
    net->port = 0;
    net->serve = NULL;
    net->gone = NULL;
    net->serve_ctx = NULL;
    for (struct conn *c = net->conns; c; c = c->next)
        c->dead = true;
    conns_reap(net);
}

static void exec_stall(struct ol_net *net, struct exec *e)
{
    (void)net;
    usleep(e->ms * 1000u);
}

static void exec_stall_after_reply(struct ol_net *net, struct exec *e)
{
    net->stall_after_reply_ms = e->ms;
}

static void exec_stop(struct ol_net *net, struct exec *e)
{
    (void)e;
    net->stop = true;
}

static unsigned drain(struct ol_net *net)
{
    pthread_mutex_lock(&net->mu);
    struct item *it = net->q_head;
    net->q_head = net->q_tail = NULL;
    pthread_mutex_unlock(&net->mu);
    unsigned n = 0;
    while (it) {
        struct item *next = it->next;
        n++;
        switch (it->kind) {
        case IT_CALL: {
            struct pending *p = (struct pending *)it;
            if (net->stop) {
                signal_call(p, -ESHUTDOWN);
            } else {
                start_call(net, p);
            }
            break;
        }
        case IT_REPLY:
            send_reply(net, (struct ol_net_req *)it);
            break;
        case IT_EXEC: {
            struct exec *e = (struct exec *)it;
            e->fn(net, e);
            if (e->async)
                free(e);
            else
                ol_completion_signal(&e->done, e->rc);
            break;
        }
        }
        it = next;
    }
    return n;
}

static void *net_main(void *arg)
{
    struct ol_net *net = arg;
    uint64_t last_check = 0, last_busy_ns = 0;
    while (!net->stop) {
        unsigned busy = 0;
        for (unsigned i = 0; i < PROGRESS_BATCH && ucp_worker_progress(net->worker); i++)
            busy++;
        busy += drain(net);
        if (net->spin_us) {
            /* Keep polling for spin_us after the last work (net.h). */
            uint64_t ns = (uint64_t)ol_mono_ns();
            if (busy)
                last_busy_ns = ns;
            else if (ns - last_busy_ns < (uint64_t)net->spin_us * 1000u)
                busy = 1;
        }
        uint64_t now = ol_now_ms();
        if (now - last_check >= TICK_MS) {
            check_timeouts(net, now);
            for (unsigned i = 0; i < net->npeers; i++) {
                struct peer *peer = &net->peers[i];
                if (peer->failed && peer->ep) {
                    ep_close(net, peer->ep);
                    peer->ep = NULL;
                    peer->failed = false;
                }
            }
            conns_reap(net);
            last_check = now;
        }
        if (busy)
            continue;
        /* Announce the sleep, then look at the queue once more: an enqueue
         * either lands before that look or sees the flag and writes. */
        __atomic_store_n(&net->woken, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&net->sleeping, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&net->mu);
        bool queued = net->q_head != NULL;
        pthread_mutex_unlock(&net->mu);
        ucs_status_t st = queued ? UCS_ERR_BUSY : ucp_worker_arm(net->worker);
        if (st == UCS_ERR_BUSY) {
            __atomic_store_n(&net->sleeping, 0, __ATOMIC_SEQ_CST);
            continue;
        }
        struct pollfd pf[2] = {{.fd = net->evfd, .events = POLLIN},
                               {.fd = net->wfd, .events = POLLIN}};
        int ms = (net->inflight || net->conns || net->closing) ? TICK_MS : IDLE_POLL_MS;
        int np = poll(pf, 2, ms);
        __atomic_store_n(&net->sleeping, 0, __ATOMIC_SEQ_CST);
        if (np > 0 && (pf[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(net->evfd, &v, sizeof(v));
            (void)r;
        }
    }

    /* Stopping: fail what is in flight, close every endpoint, and progress
     * until UCX has let go of the callers' buffers. */
    for (unsigned i = 0; i < net->npeers; i++)
        peer_fail(net, &net->peers[i], -ESHUTDOWN);
    for (struct conn *c = net->conns; c; c = c->next)
        c->dead = true;
    for (unsigned i = 0; i < net->npeers; i++)
        if (net->peers[i].ep) {
            ep_close(net, net->peers[i].ep);
            net->peers[i].ep = NULL;
        }
    conns_reap(net);
    if (net->listener)
        ucp_listener_destroy(net->listener);
    uint64_t t0 = ol_now_ms();
    while (ol_now_ms() - t0 < SHUTDOWN_WAIT_MS) {
        ucp_worker_progress(net->worker);
        drain(net);
        conns_reap(net);
        bool calls = false;
        for (unsigned s = 0; s < OL_NET_MAX_INFLIGHT && !calls; s++)
            calls = net->slot[s] != NULL;
        if (!calls && net->closing == 0 && net->conns == NULL)
            break;
    }
    if (net->closing || net->conns)
        ol_warn("net: stopped with %u endpoint closes and %u connections pending", net->closing,
                net->nconns);
    return NULL;
}

/* ---- S3 over RDMA: confirmations (native/rdma_confirm.h) ---- */

static void answer_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    ucp_request_free(request);
}

/* A server of S3 over RDMA asks whether a token naming this worker is
 * ours: answered on the reply endpoint, yes only when opts.rma_confirm
 * says so.  A message that does not decode gets no answer. */
static ucs_status_t on_challenge(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    struct ol_net *net = arg;
    (void)header;
    (void)header_length;
    struct ol_rdma_challenge c;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        ol_rdma_challenge_decode(data, length, &c) < 0)
        return UCS_OK;
    struct ol_rdma_answer a = {.yes = false};
    memcpy(a.nonce, c.nonce, OL_RDMA_NONCE_BYTES);
    if (net->rma_confirm)
        a.yes = net->rma_confirm(net->rma_confirm_arg, c.rkey, c.rkey_len, c.tag, c.addr, c.len,
                                 &a.base, &a.size);
    uint8_t *out = malloc(OL_RDMA_ANSWER_BYTES);
    if (!out)
        return UCS_OK;
    ol_rdma_answer_encode(net->key, data, length, &a, out);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = answer_sent_cb,
        .user_data = out,
    };
    ucs_status_ptr_t r =
        ucp_am_send_nbx(param->reply_ep, OL_RDMA_AM_ANSWER, NULL, 0, out, OL_RDMA_ANSWER_BYTES, &p);
    if (!UCS_PTR_IS_PTR(r))
        free(out);
    return UCS_OK;
}

/* ---- public ---- */

int ol_net_call(struct ol_net *net, struct ol_net_call *c)
{
    if (!c->addr || strlen(c->addr) >= OL_NET_MAX_ADDR)
        return -EINVAL;
    if (c->ctl_len > OL_WIRE_MAX_CTL || c->data_len > OL_WIRE_MAX_DATA)
        return -EMSGSIZE;
    struct pending p;
    memset(&p, 0, sizeof(p));
    p.it.kind = IT_CALL;
    p.c = c;
    c->rep_ctl_len = c->rep_data_len = 0;
    p.data_crc = c->data_len ? ol_crc32c(c->data, c->data_len) : 0;
    ol_completion_init(&p.done);
    stat_add(net, &net->st.calls);
    int rc = enqueue(net, &p.it, false);
    if (rc < 0)
        return rc;
    rc = ol_completion_wait(&p.done);
    if (rc >= 0 && c->rep_data_len && ol_crc32c(c->rep_data, c->rep_data_len) != p.rep_crc) {
        stat_add(net, &net->st.crc_errors);
        return -EIO;
    }
    return rc;
}

int ol_net_call_async(struct ol_net *net, struct ol_net_call *c, ol_net_call_cb cb, void *arg)
{
    if (!cb || !c->addr || strlen(c->addr) >= OL_NET_MAX_ADDR)
        return -EINVAL;
    if (c->ctl_len > OL_WIRE_MAX_CTL || c->data_len > OL_WIRE_MAX_DATA)
        return -EMSGSIZE;
    struct pending *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->it.kind = IT_CALL;
    p->c = c;
    p->cb = cb;
    p->cb_arg = arg;
    c->rep_ctl_len = c->rep_data_len = 0;
    p->data_crc = c->data_len ? ol_crc32c(c->data, c->data_len) : 0;
    stat_add(net, &net->st.calls);
    int rc = enqueue(net, &p->it, false);
    if (rc < 0)
        free(p);
    return rc;
}

int ol_net_listen(struct ol_net *net, const char *host, uint16_t port, ol_net_serve_fn serve,
                  ol_net_gone_fn gone, void *ctx)
{
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_listen, .host = host, .port = port};
    /* The callbacks are set before the listener exists, and only read by the
     * net thread after the exec's queue hand-off. */
    pthread_mutex_lock(&net->mu);
    if (!net->listener) {
        net->serve = serve;
        net->gone = gone;
        net->serve_ctx = ctx;
    }
    pthread_mutex_unlock(&net->mu);
    ol_completion_init(&e.done);
    int rc = enqueue(net, &e.it, false);
    if (rc < 0)
        return rc;
    return ol_completion_wait(&e.done);
}

void ol_net_unlisten(struct ol_net *net)
{
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_unlisten};
    ol_completion_init(&e.done);
    if (enqueue(net, &e.it, false) == 0)
        ol_completion_wait(&e.done);
}

static void exec_mem_map(struct ol_net *net, struct exec *e)
{
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = e->addr,
        .length = e->len,
    };
    ucp_mem_h mh = NULL;
    ucs_status_t st = ucp_mem_map(net->ctx, &mp, &mh);
    e->memh = mh;
    e->rc = st == UCS_OK ? 0 : -EINVAL;
}

static void exec_mem_unmap(struct ol_net *net, struct exec *e)
{
    e->rc = ucp_mem_unmap(net->ctx, e->memh) == UCS_OK ? 0 : -EINVAL;
}

static int run_exec(struct ol_net *net, struct exec *e)
{
    ol_completion_init(&e->done);
    int rc = enqueue(net, &e->it, false);
    if (rc < 0)
        return rc;
    ol_completion_wait(&e->done);
    return e->rc;
}

int ol_net_mem_map(struct ol_net *net, void *addr, size_t len, void **memh)
{
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_mem_map, .addr = addr, .len = len};
    int rc = run_exec(net, &e);
    *memh = rc == 0 ? e.memh : NULL;
    return rc;
}

void ol_net_mem_unmap(struct ol_net *net, void *memh)
{
    if (!memh)
        return;
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_mem_unmap, .memh = memh};
    (void)run_exec(net, &e);
}

static void exec_worker_address(struct ol_net *net, struct exec *e)
{
    ucp_address_t *a = NULL;
    size_t n = 0;
    if (ucp_worker_get_address(net->worker, &a, &n) != UCS_OK) {
        e->rc = -EIO;
        return;
    }
    e->len = n;
    e->rc = n > e->cap ? -ENOSPC : 0;
    if (e->rc == 0)
        memcpy(e->out, a, n);
    ucp_worker_release_address(net->worker, a);
}

int ol_net_worker_address(struct ol_net *net, void *out, size_t cap, size_t *len)
{
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_worker_address, .out = out, .cap = cap};
    int rc = run_exec(net, &e);
    *len = rc == 0 || rc == -ENOSPC ? e.len : 0;
    return rc;
}

static void exec_rkey_pack(struct ol_net *net, struct exec *e)
{
    void *b = NULL;
    size_t n = 0;
    if (ucp_rkey_pack(net->ctx, e->memh, &b, &n) != UCS_OK) {
        e->rc = -EINVAL;
        return;
    }
    e->len = n;
    e->rc = n > e->cap ? -ENOSPC : 0;
    if (e->rc == 0)
        memcpy(e->out, b, n);
    ucp_rkey_buffer_release(b);
}

int ol_net_rkey_pack(struct ol_net *net, void *memh, void *out, size_t cap, size_t *len)
{
    if (!memh)
        return -EINVAL;
    struct exec e = {
        .it.kind = IT_EXEC, .fn = exec_rkey_pack, .memh = memh, .out = out, .cap = cap};
    int rc = run_exec(net, &e);
    *len = rc == 0 || rc == -ENOSPC ? e.len : 0;
    return rc;
}

bool ol_net_cuda_memory(struct ol_net *net)
{
    ucp_context_attr_t a = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(net->ctx, &a) != UCS_OK)
        return false;
    return (a.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

uint16_t ol_net_port(struct ol_net *net)
{
    /* Written by the listen exec before ol_net_listen returned. */
    return net->port;
}

void ol_net_test_stall(struct ol_net *net, unsigned ms)
{
    struct exec *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->it.kind = IT_EXEC;
    e->fn = exec_stall;
    e->async = true;
    e->ms = ms;
    if (enqueue(net, &e->it, false) < 0)
        free(e);
}

void ol_net_test_stall_after_reply(struct ol_net *net, unsigned ms)
{
    struct exec e = {.it.kind = IT_EXEC, .fn = exec_stall_after_reply, .ms = ms};
    ol_completion_init(&e.done);
    if (enqueue(net, &e.it, false) == 0)
        ol_completion_wait(&e.done);
}

void ol_net_stats(struct ol_net *net, struct ol_net_stats *out)
{
    pthread_mutex_lock(&net->mu);
    *out = net->st;
    pthread_mutex_unlock(&net->mu);
}

int ol_net_create(const struct ol_net_opts *opts, struct ol_net **out)
{
    struct ol_net *net = calloc(1, sizeof(*net));
    if (!net)
        return -ENOMEM;
    net->timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : OL_NET_TIMEOUT_MS;
    net->hlc = opts ? opts->hlc : NULL;
    if (opts && opts->key)
        memcpy(net->key, opts->key, sizeof(net->key));
    if (opts) {
        net->key_fn = opts->key_fn;
        net->key_arg = opts->key_arg;
        net->spin_us = opts->spin_us;
        net->rma_confirm = opts->rma_confirm;
        net->rma_confirm_arg = opts->rma_confirm_arg;
    }
    net->evfd = -1;
    pthread_mutex_init(&net->mu, NULL);
    for (unsigned s = 0; s < OL_NET_MAX_INFLIGHT; s++)
        net->free_slot[s] = OL_NET_MAX_INFLIGHT - 1 - s;
    net->nfree = OL_NET_MAX_INFLIGHT;
    int rc = -EIO;

    ucp_config_t *cfg;
    /* A listener restarted on its port (a node back after a crash) must
     * not be refused for the old connections' TIME_WAIT: SO_REUSEADDR, which
     * still refuses a port another listener holds.  UCX 1.13 reads the TCP
     * connection manager's settings from the environment only (not from
     * ucp_config_modify), so it goes there, unless set already; every
     * ol_net is created at start-up, before threads that read it. */
    (void)setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        goto fail;
    /* Our endpoints ask for peer-failure handling (a dead peer must fail its
     * calls, not hang them), which UCX 1.13's shared-memory transports only
     * offer when their error handling is switched on; off, two processes of
     * one host talk over tcp on loopback.  The environment still wins. */
    const char *tls = getenv("UCX_TLS");
    bool shm = !tls || strstr(tls, "all") || strstr(tls, "sm") || strstr(tls, "posix") ||
               strstr(tls, "sysv"); /* "sm", "shm" too; else UCX calls the name invalid */
    if (shm && !getenv("UCX_MM_ERROR_HANDLING") && !getenv("UCX_POSIX_ERROR_HANDLING") &&
        !getenv("UCX_SYSV_ERROR_HANDLING") &&
        ucp_config_modify(cfg, "MM_ERROR_HANDLING", "y") != UCS_OK)
        ol_warn("net: cannot switch on UCX's MM_ERROR_HANDLING (shared memory may not be used)");
    /* UCX 1.13 picks a send's protocol from the lanes an endpoint has when
     * the send is posted.  A send posted while the endpoint is still being
     * wired up (the first calls to a peer, a burst of replies on a new
     * connection) waits in UCX and is replayed on the final lanes; a
     * zero-copy send with a header, picked for the temporary tcp lane and
     * replayed on a shared-memory lane, aborts the process (proto_am.inl
     * "Assertion `max_iov > 1' failed"; openucx/ucx #6872, #8180;
     * tests/unit/net/test_net_fresh.c).  So eager sends always copy (the
     * shared-memory lanes have no zero-copy active messages anyway; large
     * data still goes by rendezvous).  The environment still wins. */
    if (!getenv("UCX_ZCOPY_THRESH") && ucp_config_modify(cfg, "ZCOPY_THRESH", "inf") != UCS_OK)
        ol_warn("net: cannot set UCX's ZCOPY_THRESH (a new endpoint may abort the process)");
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (opts && opts->rma ? UCP_FEATURE_RMA : 0),
        .mt_workers_shared = 0,
    };
    ucs_status_t st = ucp_init(&up, cfg, &net->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        ol_error("net: ucp_init: %s", ucs_status_string(st));
        net->ctx = NULL;
        goto fail;
    }
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    st = ucp_worker_create(net->ctx, &wp, &net->worker);
    if (st != UCS_OK) {
        ol_error("net: ucp_worker_create: %s", ucs_status_string(st));
        net->worker = NULL;
        goto fail;
    }
    if (ucp_worker_get_efd(net->worker, &net->wfd) != UCS_OK)
        goto fail;
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = OL_WIRE_AM_REQUEST,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = on_request,
        .arg = net,
    };
    if (ucp_worker_set_am_recv_handler(net->worker, &hp) != UCS_OK)
        goto fail;
    hp.id = OL_WIRE_AM_REPLY;
    hp.cb = on_reply;
    if (ucp_worker_set_am_recv_handler(net->worker, &hp) != UCS_OK)
        goto fail;
    hp.id = OL_RDMA_AM_CHALLENGE;
    hp.cb = on_challenge;
    if (opts && opts->rma && ucp_worker_set_am_recv_handler(net->worker, &hp) != UCS_OK)
        goto fail;
    net->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (net->evfd < 0) {
        rc = -errno;
        goto fail;
    }
    rc = -pthread_create(&net->thread, NULL, net_main, net);
    if (rc < 0)
        goto fail;
    *out = net;
    return 0;
fail:
    if (net->evfd >= 0)
        close(net->evfd);
    if (net->worker)
        ucp_worker_destroy(net->worker);
    if (net->ctx)
        ucp_cleanup(net->ctx);
    pthread_mutex_destroy(&net->mu);
    free(net);
    return rc;
}

void ol_net_destroy(struct ol_net *net)
{
    if (!net)
        return;
    struct exec *e = calloc(1, sizeof(*e));
    OL_ASSERT(e);
    e->it.kind = IT_EXEC;
    e->fn = exec_stop;
    e->async = true;
    pthread_mutex_lock(&net->mu);
    net->stopping = true;
    pthread_mutex_unlock(&net->mu);
    enqueue(net, &e->it, true);
    pthread_join(net->thread, NULL);
    /* Replies queued after the thread ended are freed unsent. */
    drain(net);
    while (net->conns) {
        struct conn *c = net->conns;
        net->conns = c->next;
        free(c);
    }
    ucp_worker_destroy(net->worker);
    ucp_cleanup(net->ctx);
    close(net->evfd);
    pthread_mutex_destroy(&net->mu);
    for (int c = 0; c < RBUF_CLASSES; c++)
        while (net->rbuf[c]) {
            struct rbuf_free *f = net->rbuf[c];
            net->rbuf[c] = f->next;
            free(f);
        }
    free(net);
}
