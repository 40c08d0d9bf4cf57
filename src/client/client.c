/* libopenlake: opening a client (the native port, found from the S3 URL),
 * the node list, the call path with fail-over, errors. */
#include "client/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "core/cuda.h"
#include "core/err.h"
#include "core/log.h"
#include "native/rdma_token.h"

_Static_assert((int)OL_CLIENT_ENOBUCKET == (int)OL_ENOBUCKET && (int)OL_CLIENT_ENOKEY == (int)OL_ENOKEY &&
                   (int)OL_CLIENT_ENOVERSION == (int)OL_ENOVERSION && (int)OL_CLIENT_EFENCED == (int)OL_EFENCED &&
                   (int)OL_CLIENT_EQUORUM == (int)OL_EQUORUM && (int)OL_CLIENT_ETOOLARGE == (int)OL_ETOOLARGE &&
                   (int)OL_CLIENT_EPRECONDITION == (int)OL_EPRECONDITION && (int)OL_CLIENT_ECORRUPT == (int)OL_ECORRUPT,
               "the public error numbers are the server's");

bool olc_name_ok(const char *s, size_t max)
{
    return s && s[0] && strnlen(s, max + 1) <= max;
}

struct body {
    char b[512];
    size_t n;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *arg)
{
    struct body *b = arg;
    size_t n = sz * nm;
    if (n > sizeof(b->b) - 1 - b->n)
        return 0;
    memcpy(b->b + b->n, p, n);
    b->n += n;
    return n;
}

/* "http://host:port[/]" -> the native address "host:NATIVE", asked of the
 * node (GET /_openlake/native). */
static int discover(const char *url, unsigned timeout_ms, char out[128])
{
    const char *h = url + (strncmp(url, "https://", 8) == 0 ? 8 : 7);
    size_t hl = strcspn(h, "/");
    if (hl == 0 || hl >= 100)
        return -EINVAL;
    char hostport[128];
    memcpy(hostport, h, hl);
    hostport[hl] = 0;
    char *colon = strrchr(hostport, ':');
    if (!colon || strchr(hostport, ']') > colon)
        return -EINVAL;
    CURL *cu = curl_easy_init();
    if (!cu)
        return -ENOMEM;
    char u[300];
    snprintf(u, sizeof(u), "%.*s/_openlake/native", (int)((h - url) + hl), url);
    struct body b = {.n = 0};
    curl_easy_setopt(cu, CURLOPT_URL, u);
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(cu, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
    long code = 0;
    CURLcode cr = curl_easy_perform(cu);
    int rc = -ECONNREFUSED;
    if (cr == CURLE_OK && curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK) {
        rc = code == 200 ? -EPROTO : code == 501 ? -ENOTSUP : -EPROTO;
        if (code == 200) {
            b.b[b.n] = 0;
            cJSON *j = cJSON_Parse(b.b);
            const cJSON *port = j ? cJSON_GetObjectItemCaseSensitive(j, "port") : NULL;
            if (cJSON_IsNumber(port) && port->valueint > 0 && port->valueint < 65536) {
                *colon = 0;
                snprintf(out, 128, "%.100s:%d", hostport, port->valueint);
                rc = 0;
            }
            cJSON_Delete(j);
        }
    } else if (cr == CURLE_OPERATION_TIMEDOUT) {
        rc = -ETIMEDOUT;
    }
    curl_easy_cleanup(cu);
    return rc;
}

bool olc_transport_error(int rc)
{
    return rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -ETIMEDOUT ||
           rc == -EHOSTUNREACH || rc == -ENOTCONN || rc == -ESHUTDOWN || rc == -OL_EFENCED;
}

unsigned olc_lane_pick(struct ol_client *c, const char *addr, char out[128], struct ol_net **net)
{
    unsigned n = c->nlanes ? c->nlanes : 1, start = atomic_fetch_add(&c->lane_next, 1) % n;
    unsigned lane = start, best = UINT32_MAX;
    for (unsigned t = 0; t < n; t++) {
        unsigned i = (start + t) % n, b = atomic_load(&c->lane_busy[i]);
        if (b < best) {
            best = b;
            lane = i;
        }
    }
    atomic_fetch_add(&c->lane_busy[lane], 1);
    atomic_fetch_add(&c->lane_calls[lane], 1);
    *net = c->lanes[lane];
    snprintf(out, 128, "%s", addr);
    if (lane == 0)
        return lane; /* lane 0: the node's own address */
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->nnodes; i++) {
        if (strcmp(c->nodes[i], addr) != 0 || !c->node_nlanes[i])
            continue;
        uint16_t port = c->node_ports[i][lane % c->node_nlanes[i]];
        const char *colon = strrchr(addr, ':');
        if (colon && port)
            snprintf(out, 128, "%.*s:%u", (int)(colon - addr), addr, (unsigned)port);
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return lane;
}

void olc_lane_done(struct ol_client *c, unsigned lane)
{
    atomic_fetch_sub(&c->lane_busy[lane], 1);
}

int olc_call(struct ol_client *c, struct olc_call *k)
{
    size_t akl = strlen(c->access_key), cap = 4 + akl + k->args_len;
    uint8_t stackbuf[2048], *ctl = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);
    if (!ctl)
        return -ENOMEM;
    struct ol_wbuf w = {.p = ctl, .cap = cap};
    ol_wbuf_str(&w, c->access_key, akl);
    ol_wbuf_bytes(&w, k->args, k->args_len);
    pthread_mutex_lock(&c->mu);
    unsigned n = c->nnodes;
    char nodes[OLC_MAX_NODES][128];
    memcpy(nodes, c->nodes, sizeof(nodes[0]) * n);
    pthread_mutex_unlock(&c->mu);
    unsigned start = k->node >= 0 ? (unsigned)k->node % n : atomic_fetch_add(&c->next, 1) % n;
    int rc = -EHOSTUNREACH;
    for (unsigned t = 0; t < (k->node >= 0 ? 1u : n); t++) {
        unsigned i = (start + t) % n;
        char la[128];
        struct ol_net *net;
        unsigned lane = olc_lane_pick(c, nodes[i], la, &net);
        struct ol_net_call nc = {.addr = la,
                                 .op = k->op,
                                 .timeout_ms = c->timeout_ms,
                                 .ctl = ctl,
                                 .ctl_len = w.len,
                                 .data = k->data,
                                 .data_len = k->data_len,
                                 .rep_ctl = k->rctl,
                                 .rep_ctl_cap = k->rctl_cap,
                                 .rep_data = k->rdata,
                                 .rep_data_cap = k->rdata_cap};
        rc = ol_net_call(net, &nc);
        olc_lane_done(c, lane);
        k->rctl_len = nc.rep_ctl_len;
        k->rdata_len = nc.rep_data_len;
        k->used_node = (int)i;
        if (!olc_transport_error(rc))
            break;
    }
    if (ctl != stackbuf)
        free(ctl);
    return rc;
}

static int hello(struct ol_client *c)
{
    uint8_t r[OLC_MAX_NODES * (136 + 4 * (1 + OLC_MAX_LANES)) + 64];
    struct olc_call k = {.op = OL_COP_HELLO, .rctl = r, .rctl_cap = sizeof(r), .node = 0};
    int rc = olc_call(c, &k);
    if (rc < 0)
        return rc;
    struct ol_rbuf rb = {.p = r, .len = k.rctl_len};
    uint32_t ver = ol_rbuf_u32(&rb);
    (void)ol_rbuf_u64(&rb);
    uint32_t n = ol_rbuf_u32(&rb);
    if (rb.bad || ver != OL_NATIVE_PROTO_VERSION)
        return -EPROTO;
    /* Entry 0 is the node itself ("": the address we reached it by). */
    int idx[OLC_MAX_NODES]; /* entry -> c->nodes index, -1: none */
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = 0; i < n; i++) {
        size_t l;
        const char *a = ol_rbuf_str(&rb, 127, &l);
        if (rb.bad)
            break;
        if (i < OLC_MAX_NODES)
            idx[i] = l == 0 ? 0 : -1;
        if (l == 0)
            continue;
        for (unsigned j = 0; j < c->nnodes && i < OLC_MAX_NODES; j++)
            if (strlen(c->nodes[j]) == l && memcmp(c->nodes[j], a, l) == 0)
                idx[i] = (int)j;
        if (i < OLC_MAX_NODES && idx[i] < 0 && c->nnodes < OLC_MAX_NODES) {
            memcpy(c->nodes[c->nnodes], a, l);
            c->nodes[c->nnodes][l] = 0;
            idx[i] = (int)c->nnodes++;
        }
    }
    /* The lane table, when the node has one (native/proto.h): each entry's
     * lanes' ports, lane 0 first.  A node without one has one lane. */
    uint32_t m = rb.bad ? 0 : ol_rbuf_u32(&rb);
    for (uint32_t i = 0; !rb.bad && i < m; i++) {
        uint32_t np = ol_rbuf_u32(&rb);
        uint16_t ports[OLC_MAX_LANES];
        unsigned got = 0;
        for (uint32_t p = 0; p < np && !rb.bad; p++) {
            uint32_t port = ol_rbuf_u32(&rb);
            if (got < OLC_MAX_LANES && port > 0 && port < 65536)
                ports[got++] = (uint16_t)port;
        }
        if (rb.bad || i >= n || i >= OLC_MAX_NODES || idx[i] < 0 || c->node_nlanes[idx[i]] ||
            !got)
            continue;
        memcpy(c->node_ports[idx[i]], ports, got * sizeof(ports[0]));
        c->node_nlanes[idx[i]] = got;
    }
    /* Then the node's flags and boot id (a node before them stops here):
     * GET_CUDA is for a node on this host. */
    uint8_t flags = rb.bad || rb.off >= rb.len ? 0 : ol_rbuf_u8(&rb);
    const uint8_t *boot = ol_rbuf_take(&rb, 16);
    uint8_t mine[16];
    static const uint8_t zero[16];
    c->cuda_ipc_node = !rb.bad && boot && (flags & OL_NATIVE_HELLO_CUDA_IPC) &&
                       ol_host_boot_id(mine) && memcmp(mine, zero, 16) != 0 &&
                       memcmp(boot, mine, 16) == 0;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static bool rma_confirm(void *arg, const uint8_t *rkey, size_t rkey_len,
                        const uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES], uint64_t addr, uint64_t len,
                        uint64_t *base, uint64_t *size);

OLC_API int ol_client_open(const struct ol_client_opts *o, struct ol_client **out)
{
    *out = NULL;
    if (!o || !o->endpoint || !olc_name_ok(o->access_key, OL_NATIVE_MAX_ACCESS_KEY) ||
        !o->secret_key || strlen(o->secret_key) > 128)
        return -EINVAL;
    /* A library keeps quiet: errors reach the caller as codes.  The
     * transport's own warnings come back with OPENLAKE_CLIENT_LOG=warn. */
    const char *lv = getenv("OPENLAKE_CLIENT_LOG");
    int lvl = lv ? ol_log_parse_level(lv) : -1;
    ol_log_level = lvl >= 0 ? lvl : OL_LOG_ERROR;
    struct ol_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->batch_mu, NULL);
    pthread_mutex_init(&c->mem_mu, NULL);
    c->kv_replicas = 1;
    const char *dr = getenv("OPENLAKE_CLIENT_DIRECT");
    c->direct_off = dr && strcmp(dr, "0") == 0;
    const char *im = getenv("OPENLAKE_CLIENT_INLINE_MAX");
    c->inline_max = im && *im ? strtoull(im, NULL, 10) : OLC_INLINE_MAX;
    snprintf(c->access_key, sizeof(c->access_key), "%s", o->access_key);
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : OLC_TIMEOUT_MS;
    int rc = 0;
    if (strncmp(o->endpoint, "http://", 7) == 0 || strncmp(o->endpoint, "https://", 8) == 0)
        rc = discover(o->endpoint, c->timeout_ms, c->nodes[0]);
    else if (strlen(o->endpoint) < sizeof(c->nodes[0]) && strchr(o->endpoint, ':'))
        snprintf(c->nodes[0], sizeof(c->nodes[0]), "%s", o->endpoint);
    else
        rc = -EINVAL;
    c->nnodes = 1;
    uint8_t key[OL_NET_KEY_BYTES];
    ol_native_key(o->access_key, o->secret_key, key);
    /* rma: registered memory can be the target of S3 over RDMA
     * (ol_client_rdma_token). */
    struct ol_net_opts no = {.timeout_ms = c->timeout_ms,
                             .key = key,
                             .rma = true,
                             .rma_confirm = rma_confirm,
                             .rma_confirm_arg = c};
    if (rc == 0)
        rc = ol_net_create(&no, &c->lanes[0]);
    if (rc == 0) {
        c->net = c->lanes[0];
        c->nlanes = 1;
        rc = hello(c);
    }
    /* The further lanes, once the node said how many it has: each its own
     * ol_net, signing with the same key (every lane authenticates every
     * request). */
    if (rc == 0) {
        unsigned want = o->lanes;
        const char *ev = getenv("OPENLAKE_CLIENT_LANES");
        if (!want && ev && atoi(ev) > 0)
            want = (unsigned)atoi(ev);
        if (!want) {
            pthread_mutex_lock(&c->mu);
            want = c->node_nlanes[0] ? c->node_nlanes[0] : 1;
            pthread_mutex_unlock(&c->mu);
            if (want > OLC_DEFAULT_LANES)
                want = OLC_DEFAULT_LANES;
            /* And one per four of this host's cores, as the server sizes
             * its own (server/server.c): lanes on a small host cost more
             * than they bring. */
            long nc = sysconf(_SC_NPROCESSORS_ONLN);
            unsigned mine = nc >= 8 ? (unsigned)(nc / 4) : 1;
            if (want > mine)
                want = mine;
        }
        if (want > OLC_MAX_LANES)
            want = OLC_MAX_LANES;
        /* A lane UCX cannot start is one fewer, not a failed open. */
        while (c->nlanes < want && ol_net_create(&no, &c->lanes[c->nlanes]) == 0)
            c->nlanes++;
    }
    OPENSSL_cleanse(key, sizeof(key));
    if (rc < 0) {
        ol_client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

OLC_API void ol_client_close(struct ol_client *c)
{
    if (!c)
        return;
    olc_batch_stop(c);
    for (unsigned i = c->nlanes; i-- > 0;)
        ol_net_destroy(c->lanes[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->batch_mu);
    pthread_mutex_destroy(&c->mem_mu);
    free(c->waddr);
    free(c);
}

OLC_API const char *ol_client_strerror(int err)
{
    return ol_strerror(err);
}

OLC_API int ol_client_cuda_direct(struct ol_client *c)
{
    return ol_net_cuda_memory(c->net) ? 1 : 0;
}

OLC_API int ol_client_cuda_ipc(struct ol_client *c)
{
    return c->cuda_ipc_node && !c->cuda_ipc_off && ol_cuda(true) ? 1 : 0;
}

struct ol_client_mem {
    void *memh; /* lane 0's */
    void *lane_memh[OLC_MAX_LANES]; /* the other lanes' (index 0 unused) */
    void *addr;
    size_t len;
    /* Its packed rkey (for rdma tokens), made at registration; rkey_rc
     * the error when UCX would not pack it. */
    uint8_t *rkey;
    size_t rkey_len;
    int rkey_rc;
    /* On c->tokened (under c->mem_mu) once a token was made for it, with
     * the tag (random, made at registration) its tokens carry. */
    bool tokened;
    uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES];
    struct ol_client_mem *next;
};

/* The worker's answer to a server's confirmation (net/net.h rma_confirm,
 * native/rdma_confirm.h), on the net thread: yes when the rkey is that of
 * memory a token was made for, the tag that memory's tokens carry, and the
 * range lies inside it.  The whole
 * registration is the confirmed region: the rkey covers all of it. */
static bool rma_confirm(void *arg, const uint8_t *rkey, size_t rkey_len,
                        const uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES], uint64_t addr, uint64_t len,
                        uint64_t *base, uint64_t *size)
{
    struct ol_client *c = arg;
    bool yes = false;
    pthread_mutex_lock(&c->mem_mu);
    unsigned guard = 0;
    for (struct ol_client_mem *m = c->tokened; m && !yes && guard < 1u << 20;
         m = m->next, guard++) {
        uint64_t b = (uint64_t)(uintptr_t)m->addr;
        if (m->rkey_len == rkey_len && memcmp(m->rkey, rkey, rkey_len) == 0 &&
            CRYPTO_memcmp(m->tag, tag, OL_RDMA_TOKEN_TAG_BYTES) == 0 && addr >= b &&
            addr - b <= m->len && len <= m->len - (addr - b)) {
            yes = true;
            *base = b;
            *size = m->len;
        }
    }
    pthread_mutex_unlock(&c->mem_mu);
    return yes;
}

OLC_API int ol_client_mem_reg(struct ol_client *c, void *addr, size_t len,
                              enum ol_client_mem_kind kind, struct ol_client_mem **out)
{
    *out = NULL;
    if (!addr || !len)
        return -EINVAL;
    if (kind == OL_CLIENT_MEM_CUDA && !ol_client_cuda_direct(c))
        return -ENOTSUP;
    if (kind != OL_CLIENT_MEM_HOST && kind != OL_CLIENT_MEM_CUDA)
        return -EINVAL;
    struct ol_client_mem *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int rc = ol_net_mem_map(c->net, addr, len, &m->memh);
    if (rc < 0) {
        free(m);
        return rc;
    }
    /* Every lane's context too, so a transfer on any lane skips
     * registration; a lane that refuses only loses that. */
    for (unsigned i = 1; i < c->nlanes; i++)
        if (ol_net_mem_map(c->lanes[i], addr, len, &m->lane_memh[i]) < 0)
            m->lane_memh[i] = NULL;
    m->addr = addr;
    m->len = len;
    if (RAND_bytes(m->tag, OL_RDMA_TOKEN_TAG_BYTES) != 1) {
        for (unsigned i = 1; i < c->nlanes; i++)
            if (m->lane_memh[i])
                ol_net_mem_unmap(c->lanes[i], m->lane_memh[i]);
        ol_net_mem_unmap(c->net, m->memh);
        free(m);
        return -EIO;
    }
    /* The packed rkey, sized by a first call. */
    size_t n = 0;
    m->rkey_rc = ol_net_rkey_pack(c->net, m->memh, NULL, 0, &n);
    if (m->rkey_rc == -ENOSPC && n > 0 && n <= OL_RDMA_TOKEN_MAX_RKEY) {
        m->rkey = malloc(n);
        m->rkey_rc = m->rkey ? ol_net_rkey_pack(c->net, m->memh, m->rkey, n, &m->rkey_len)
                             : -ENOMEM;
    } else if (m->rkey_rc == -ENOSPC) {
        m->rkey_rc = -EOVERFLOW; /* larger than a token carries */
    }
    *out = m;
    return 0;
}

OLC_API void ol_client_mem_dereg(struct ol_client *c, struct ol_client_mem *m)
{
    if (!m)
        return;
    /* Off the list first: from now on the worker confirms no token for it. */
    pthread_mutex_lock(&c->mem_mu);
    for (struct ol_client_mem **pp = &c->tokened; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    pthread_mutex_unlock(&c->mem_mu);
    for (unsigned i = 1; i < c->nlanes; i++)
        if (m->lane_memh[i])
            ol_net_mem_unmap(c->lanes[i], m->lane_memh[i]);
    ol_net_mem_unmap(c->net, m->memh);
    free(m->rkey);
    free(m);
}

OLC_API int ol_client_rdma_token(struct ol_client *c, struct ol_client_mem *m, void *addr,
                                 uint64_t len, char *out, size_t cap)
{
    if (!c || !m || !out)
        return -EINVAL;
    /* The region must lie inside the registered memory: the rkey covers
     * only that, and a server writing past it would fail in UCX. */
    uintptr_t a = (uintptr_t)addr, base = (uintptr_t)m->addr;
    if (a < base || a - base > m->len || len > m->len - (a - base))
        return -EINVAL;
    if (m->rkey_rc < 0)
        return m->rkey_rc;
    /* The worker address does not change while the client lives: asked
     * once (on the net thread, whose worker it is), then kept. */
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (!c->waddr) {
        size_t n = 0;
        rc = ol_net_worker_address(c->net, NULL, 0, &n);
        if (rc == -ENOSPC && n > OL_RDMA_TOKEN_MAX_WORKER)
            rc = -EOVERFLOW;
        else if (rc == -ENOSPC && (c->waddr = malloc(n)) == NULL)
            rc = -ENOMEM;
        else if (rc == -ENOSPC)
            rc = ol_net_worker_address(c->net, c->waddr, n, &c->waddr_len);
        if (rc < 0) {
            free(c->waddr);
            c->waddr = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (rc < 0)
        return rc;
    struct ol_rdma_token t = {.worker = c->waddr, .worker_len = c->waddr_len, .rkey = m->rkey,
                              .rkey_len = m->rkey_len, .addr = (uint64_t)a, .len = len};
    memcpy(t.tag, m->tag, OL_RDMA_TOKEN_TAG_BYTES);
    rc = ol_rdma_token_encode(&t, out, cap);
    if (rc >= 0) {
        pthread_mutex_lock(&c->mem_mu);
        if (!m->tokened) {
            m->tokened = true;
            m->next = c->tokened;
            c->tokened = m;
        }
        pthread_mutex_unlock(&c->mem_mu);
    }
    return rc;
}
