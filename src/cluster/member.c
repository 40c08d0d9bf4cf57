/* Membership and self-fencing: see member.h for the contract and the
 * timing argument. */
#include "cluster/member.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

enum {
    MEMBER_SLICE_MS = 50,        /* longest wait between checks of the stop flag */
    MEMBER_RETRY_MS = 250,       /* after a failed renewal or registration */
    MEMBER_NAME_TAKEN_MS = 1000, /* after finding our key held by another lease */
    MEMBER_WATCH_RETRY_MS = 200, /* after a broken watch */
};

struct ol_member {
    struct ol_member_opts o;
    char cluster[OL_MAP_MAX_NAME + 1];
    char name[OL_MAP_MAX_NAME + 1];
    char s3[OL_MAP_MAX_ADDR + 1];
    char ucx[OL_MAP_MAX_ADDR + 1];
    char prefix[128]; /* /openlake/<cluster>/nodes/ */
    char key[200];    /* prefix + name */
    int64_t ttl_ns, margin_ns;

    struct ol_etcd *c;
    pthread_t thread;
    atomic_bool stop;

    /* Acks are allowed while CLOCK_MONOTONIC < deadline_ns (0: never), or
     * < vouch_ns.  deadline_ns and etcd_ns (when etcd last answered, 0:
     * never) are written by the member thread only, vouch_ns by the vouch
     * thread only; read by anyone. */
    _Atomic int64_t deadline_ns, vouch_ns, etcd_ns;
    int64_t quiet_ns;

    /* the vouch thread */
    pthread_t vthread;
    bool vthread_started;
    struct ol_vouch_tally *tally;
    struct ol_vouch *answers;
    bool vouch_logged; /* acks ride on vouches, as last logged */
    _Atomic uint64_t vouch_rounds, vouched_spells;
    _Atomic uint32_t vouchers;

    /* member thread only */
    bool registered;
    bool fenced; /* as last logged; true until the first registration */
    bool ever_unfenced;
    bool renew_failing, watch_failing; /* log a streak of failures once */
    uint64_t next_renew_ms, next_register_ms, next_watch_ms;
    struct ol_etcd_watch *w;
    struct ol_member_peer *live;
    size_t nlive;
    bool live_dirty;

    _Atomic uint64_t registrations, renewals, renew_failures, fences, live_changes;
    _Atomic int64_t lease;
};

/* The process's bound member, as its deadline (member.h:
 * ol_member_may_ack_writes).  A plain atomic rather than a pointer, so that
 * no reader can hold a member that is being freed. */
static atomic_bool process_bound, process_alive;
static _Atomic int64_t process_deadline_ns, process_vouch_ns, process_etcd_ns;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_deadline(struct ol_member *m, int64_t d)
{
    atomic_store_explicit(&m->deadline_ns, d, memory_order_release);
    if (m->o.bind_process)
        atomic_store_explicit(&process_deadline_ns, d, memory_order_release);
}

static void set_vouch(struct ol_member *m, int64_t d)
{
    atomic_store_explicit(&m->vouch_ns, d, memory_order_release);
    if (m->o.bind_process)
        atomic_store_explicit(&process_vouch_ns, d, memory_order_release);
}

/* etcd answered (anything: a renewal, a grant, "no such lease"). */
static void heard_etcd(struct ol_member *m)
{
    int64_t now = mono_ns();
    atomic_store_explicit(&m->etcd_ns, now, memory_order_release);
    if (m->o.bind_process)
        atomic_store_explicit(&process_etcd_ns, now, memory_order_release);
}

static enum ol_member_ack ack_state(int64_t lease_d, int64_t vouch_d)
{
    int64_t now = mono_ns();
    if (lease_d != 0 && now < lease_d)
        return OL_MEMBER_ACK_LEASE;
    if (vouch_d != 0 && now < vouch_d)
        return OL_MEMBER_ACK_VOUCHED;
    return OL_MEMBER_FENCED;
}

enum ol_member_ack ol_member_ack_state(const struct ol_member *m)
{
    return ack_state(atomic_load_explicit(&m->deadline_ns, memory_order_acquire),
                     atomic_load_explicit(&m->vouch_ns, memory_order_acquire));
}

enum ol_member_ack ol_member_ack_state_process(void)
{
    if (!atomic_load_explicit(&process_bound, memory_order_acquire))
        return OL_MEMBER_ACK_LEASE;
    return ack_state(atomic_load_explicit(&process_deadline_ns, memory_order_acquire),
                     atomic_load_explicit(&process_vouch_ns, memory_order_acquire));
}

const char *ol_member_ack_name(enum ol_member_ack a)
{
    switch (a) {
    case OL_MEMBER_ACK_LEASE:
        return "lease";
    case OL_MEMBER_ACK_VOUCHED:
        return "etcd_down_vouched";
    default:
        return "fenced";
    }
}

bool ol_member_may_ack(const struct ol_member *m)
{
    return ol_member_ack_state(m) != OL_MEMBER_FENCED;
}

bool ol_member_may_ack_writes(void)
{
    return ol_member_ack_state_process() != OL_MEMBER_FENCED;
}

static uint32_t since_ms(int64_t etcd_ns, int64_t now)
{
    if (etcd_ns == 0)
        return OL_VOUCH_NEVER;
    int64_t ms = (now - etcd_ns) / 1000000;
    return ms < 0 ? 0 : ms >= (int64_t)OL_VOUCH_NEVER ? OL_VOUCH_NEVER - 1 : (uint32_t)ms;
}

int ol_member_vouch_answer(struct ol_vouch *v)
{
    if (!atomic_load_explicit(&process_alive, memory_order_acquire))
        return -ENOENT;
    int64_t now = mono_ns();
    int64_t d = atomic_load_explicit(&process_deadline_ns, memory_order_acquire);
    v->lease_live = d != 0 && now < d;
    v->since_etcd_ms = since_ms(atomic_load_explicit(&process_etcd_ns, memory_order_acquire), now);
    return 0;
}

int ol_member_wait(const struct ol_member *m, unsigned timeout_ms)
{
    uint64_t end = ol_mono_ms() + timeout_ms;
    while (!ol_member_may_ack(m)) {
        if (ol_mono_ms() >= end)
            return -ETIMEDOUT;
        usleep(10 * 1000);
    }
    return 0;
}

void ol_member_stats(const struct ol_member *m, struct ol_member_stats *st)
{
    st->registrations = atomic_load(&m->registrations);
    st->renewals = atomic_load(&m->renewals);
    st->renew_failures = atomic_load(&m->renew_failures);
    st->fences = atomic_load(&m->fences);
    st->live_changes = atomic_load(&m->live_changes);
    st->lease = atomic_load(&m->lease);
    st->deadline_ns = atomic_load(&m->deadline_ns);
    st->fenced = !ol_member_may_ack(m);
    st->vouch_rounds = atomic_load(&m->vouch_rounds);
    st->vouched_spells = atomic_load(&m->vouched_spells);
    st->vouch_deadline_ns = atomic_load(&m->vouch_ns);
    st->since_etcd_ms = since_ms(atomic_load(&m->etcd_ns), mono_ns());
    st->vouchers = atomic_load(&m->vouchers);
    st->ack = ol_member_ack_state(m);
}

/* ---- registration and renewal ---- */

static char *node_value(const struct ol_member *m, int64_t lease)
{
    cJSON *j = cJSON_CreateObject();
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, lease);
    char *s = NULL;
    if (j && cJSON_AddStringToObject(j, "name", m->name) &&
        cJSON_AddStringToObject(j, "s3", m->s3) && cJSON_AddStringToObject(j, "ucx", m->ucx) &&
        cJSON_AddStringToObject(j, "lease", id))
        s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* Grants a lease and creates our key with it.  The deadline counts from the
 * moment the grant was sent, and opens only once the key exists. */
static int do_register(struct ol_member *m)
{
    int64_t sent = mono_ns();
    int64_t id = 0, granted = 0;
    int rc = ol_etcd_lease_grant(m->c, m->ttl_ns / 1000000000, &id, &granted);
    if (rc < 0)
        return rc;
    heard_etcd(m);
    char *val = node_value(m, id);
    if (!val) {
        ol_etcd_lease_revoke(m->c, id);
        return -ENOMEM;
    }
    rc = ol_etcd_cas(m->c, m->key, OL_ETCD_IF_ABSENT, 0, val, strlen(val), id, NULL);
    free(val);
    if (rc < 0) {
        /* The lease would expire unused; revoking frees it at once. */
        ol_etcd_lease_revoke(m->c, id);
        if (rc == -OL_ECASFAIL) {
            ol_log_limited(OL_LOG_WARN,
                           "member %s: %s is held by another lease (a previous run of this "
                           "node, or another node of the same name); waiting for it to expire",
                           m->name, m->key);
            return -EEXIST;
        }
        return rc;
    }
    m->registered = true;
    m->renew_failing = false;
    atomic_store(&m->lease, id);
    atomic_fetch_add(&m->registrations, 1);
    int64_t d = sent + granted * 1000000000 - m->margin_ns;
    if (d > mono_ns())
        set_deadline(m, d);
    m->next_renew_ms = (uint64_t)(sent / 1000000) + (uint64_t)granted * 1000 / 3;
    ol_info("member %s: registered with lease %" PRId64 " (TTL %" PRId64 " s)", m->name, id,
            granted);
    return 0;
}

static void renew(struct ol_member *m)
{
    int64_t sent = mono_ns();
    int64_t ttl = 0;
    int rc = ol_etcd_lease_keepalive(m->c, atomic_load(&m->lease), &ttl);
    uint64_t now = ol_mono_ms();
    if (rc == 0 || rc == -ENOENT)
        heard_etcd(m);
    if (rc == 0) {
        /* never extend from a send time earlier than the one that set the
         * current deadline: sends are monotonic here, so it only grows */
        set_deadline(m, sent + ttl * 1000000000 - m->margin_ns);
        atomic_fetch_add(&m->renewals, 1);
        m->next_renew_ms = (uint64_t)(sent / 1000000) + (uint64_t)ttl * 1000 / 3;
        if (m->renew_failing)
            ol_info("member %s: lease renewals answered again", m->name);
        m->renew_failing = false;
        return;
    }
    atomic_fetch_add(&m->renew_failures, 1);
    if (rc == -ENOENT) {
        /* etcd expired the lease, and with it our key: start over */
        ol_warn("member %s: lease %" PRId64 " is gone; registering again", m->name,
                atomic_load(&m->lease));
        set_deadline(m, 0);
        m->registered = false;
        atomic_store(&m->lease, 0);
        m->next_register_ms = now;
        return;
    }
    if (!m->renew_failing)
        ol_warn("member %s: lease renewal failed (%s); retrying every %d ms", m->name,
                ol_strerror(rc), MEMBER_RETRY_MS);
    m->renew_failing = true;
    m->next_renew_ms = now + MEMBER_RETRY_MS;
}

/* Logs and counts the edges between may-ack and fenced. */
static void fence_check(struct ol_member *m)
{
    bool fenced = !ol_member_may_ack(m);
    if (fenced == m->fenced)
        return;
    m->fenced = fenced;
    if (fenced) {
        if (!m->ever_unfenced)
            return; /* not registered yet: not a fence */
        atomic_fetch_add(&m->fences, 1);
        ol_error("member %s: FENCED: no lease renewal answered within %" PRId64
                 " ms%s; not acknowledging writes",
                 m->name, (m->ttl_ns - m->margin_ns) / 1000000,
                 m->o.vouch ? " and no majority of the map's nodes vouches that etcd is down" : "");
    } else {
        if (m->ever_unfenced)
            ol_warn("member %s: acknowledging writes again (%s)", m->name,
                    ol_member_ack_name(ol_member_ack_state(m)));
        m->ever_unfenced = true;
    }
}

/* Whether the lease itself allows acks now (vouches aside). */
static bool lease_live(const struct ol_member *m)
{
    int64_t d = atomic_load_explicit(&m->deadline_ns, memory_order_acquire);
    return d != 0 && mono_ns() < d;
}

/* ---- vouching (member.h, "When etcd is down") ---- */

/* Sleeps until the monotonic ms time `until`, or the stop flag. */
static void vouch_sleep(struct ol_member *m, uint64_t until)
{
    for (uint64_t now = ol_mono_ms(); now < until && !atomic_load(&m->stop); now = ol_mono_ms()) {
        uint64_t ms = until - now > MEMBER_SLICE_MS ? MEMBER_SLICE_MS : until - now;
        usleep((useconds_t)ms * 1000);
    }
}

/* One round: ask, take the answers in, move the vouch deadline. */
static void vouch_round(struct ol_member *m)
{
    size_t nmap = 0;
    int64_t round = mono_ns();
    int n = m->o.vouch(m->o.vouch_arg, m->answers, OL_VOUCH_MAX_PEERS, &nmap);
    atomic_fetch_add(&m->vouch_rounds, 1);
    if (n > OL_VOUCH_MAX_PEERS)
        n = OL_VOUCH_MAX_PEERS;
    /* A failed round adds nothing; what the tally has still lapses. */
    if (n >= 0)
        ol_vouch_tally_add(m->tally, m->name, m->answers, (size_t)n, nmap, round);
    int64_t until = ol_vouch_tally_until(m->tally);
    set_vouch(m, until);
    size_t count = ol_vouch_tally_count(m->tally, mono_ns());
    atomic_store(&m->vouchers, (uint32_t)count);
    bool riding = ol_member_ack_state(m) == OL_MEMBER_ACK_VOUCHED;
    if (riding != m->vouch_logged) {
        m->vouch_logged = riding;
        if (riding) {
            atomic_fetch_add(&m->vouched_spells, 1);
            ol_warn("member %s: etcd silent for %" PRIu32 " ms, and %zu of the map's %zu "
                    "nodes (this one included) are without etcd too: acknowledging writes on "
                    "their vouches (etcd_down_vouched)",
                    m->name, since_ms(atomic_load(&m->etcd_ns), mono_ns()), count + 1,
                    m->tally->nmap);
        } else if (!lease_live(m)) {
            ol_warn("member %s: vouches lapsed (%zu of the map's %zu nodes without etcd, this "
                    "one included)",
                    m->name, count + 1, m->tally->nmap);
        }
    }
}

static void *vouch_main(void *arg)
{
    struct ol_member *m = arg;
    unsigned round_ms = m->o.vouch_round_ms ? m->o.vouch_round_ms : OL_VOUCH_ROUND_MS;
    while (!atomic_load(&m->stop)) {
        uint64_t start = ol_mono_ms();
        int64_t etcd = atomic_load_explicit(&m->etcd_ns, memory_order_acquire);
        if (etcd == 0 || mono_ns() - etcd < m->quiet_ns) {
            /* etcd answers this node (or never did: not registered yet,
             * nothing to go on): the lease decides, vouches are forgotten. */
            if (m->tally->n || atomic_load(&m->vouch_ns)) {
                ol_vouch_tally_clear(m->tally);
                set_vouch(m, 0);
                atomic_store(&m->vouchers, 0);
            }
            m->vouch_logged = false;
        } else {
            vouch_round(m);
        }
        vouch_sleep(m, start + round_ms);
    }
    return NULL;
}

/* ---- the live set ---- */

static int cmp_peer(const void *a, const void *b)
{
    return strcmp(((const struct ol_member_peer *)a)->name,
                  ((const struct ol_member_peer *)b)->name);
}

/* A peer from a key under the prefix and its JSON value (addresses are
 * optional: a value that does not parse still names a live node). */
static int peer_from(const struct ol_member *m, const struct ol_etcd_kv *kv,
                     struct ol_member_peer *p)
{
    size_t plen = strlen(m->prefix);
    const char *name = kv->key + plen;
    if (strncmp(kv->key, m->prefix, plen) != 0 || !*name || strlen(name) > OL_MAP_MAX_NAME)
        return -EINVAL;
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->lease = kv->lease;
    cJSON *j = kv->value_len ? cJSON_ParseWithLength(kv->value, kv->value_len) : NULL;
    const cJSON *s3 = cJSON_GetObjectItemCaseSensitive(j, "s3");
    const cJSON *ucx = cJSON_GetObjectItemCaseSensitive(j, "ucx");
    if (cJSON_IsString(s3))
        snprintf(p->s3_addr, sizeof(p->s3_addr), "%s", s3->valuestring);
    if (cJSON_IsString(ucx))
        snprintf(p->ucx_addr, sizeof(p->ucx_addr), "%s", ucx->valuestring);
    cJSON_Delete(j);
    return 0;
}

static int live_find(const struct ol_member *m, const char *name)
{
    for (size_t i = 0; i < m->nlive; i++)
        if (strcmp(m->live[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void live_put(struct ol_member *m, const struct ol_member_peer *p)
{
    int i = live_find(m, p->name);
    if (i >= 0) {
        if (memcmp(&m->live[i], p, sizeof(*p)) != 0) {
            m->live[i] = *p;
            m->live_dirty = true;
        }
        return;
    }
    if (m->nlive >= OL_MAP_MAX_NODES)
        return;
    m->live[m->nlive++] = *p;
    qsort(m->live, m->nlive, sizeof(*m->live), cmp_peer);
    m->live_dirty = true;
}

static void live_del(struct ol_member *m, const char *name)
{
    int i = live_find(m, name);
    if (i < 0)
        return;
    memmove(&m->live[i], &m->live[i + 1], (m->nlive - (size_t)i - 1) * sizeof(*m->live));
    m->nlive--;
    m->live_dirty = true;
}

static void live_deliver(struct ol_member *m)
{
    if (!m->live_dirty)
        return;
    m->live_dirty = false;
    atomic_fetch_add(&m->live_changes, 1);
    if (m->o.on_live)
        m->o.on_live(m->o.arg, m->live, m->nlive);
}

static int on_event(void *arg, const struct ol_etcd_event *ev)
{
    struct ol_member *m = arg;
    struct ol_member_peer p;
    if (peer_from(m, ev->kv, &p) < 0)
        return 0; /* a key deeper under the prefix: not a node */
    if (ev->type == OL_ETCD_PUT)
        live_put(m, &p);
    else
        live_del(m, p.name);
    return 0;
}

/* Reads the whole live set and opens the watch after it. */
static int watch_start(struct ol_member *m)
{
    struct ol_etcd_range r;
    int rc = ol_etcd_get_prefix(m->c, m->prefix, OL_MAP_MAX_NODES, &r);
    if (rc < 0)
        return rc;
    m->nlive = 0;
    for (size_t i = 0; i < r.n; i++) {
        struct ol_member_peer p;
        if (peer_from(m, &r.kvs[i], &p) == 0)
            m->live[m->nlive++] = p;
    }
    qsort(m->live, m->nlive, sizeof(*m->live), cmp_peer);
    m->live_dirty = true; /* a re-read is always reported */
    int64_t rev = r.rev;
    ol_etcd_range_clear(&r);
    live_deliver(m);
    return ol_etcd_watch_open(m->c, m->prefix, rev + 1, on_event, m, &m->w);
}

static void watch_stop(struct ol_member *m)
{
    ol_etcd_watch_close(m->w);
    m->w = NULL;
}

/* Waits up to wait_ms, watching when there is something to watch. */
static void wait_or_watch(struct ol_member *m, unsigned wait_ms)
{
    uint64_t now = ol_mono_ms();
    if (lease_live(m) && m->registered && !m->w && now >= m->next_watch_ms) {
        int rc = watch_start(m);
        if (rc < 0) {
            if (!m->watch_failing)
                ol_warn("member %s: reading %s failed (%s); retrying", m->name, m->prefix,
                        ol_strerror(rc));
            m->watch_failing = true;
            m->next_watch_ms = now + MEMBER_WATCH_RETRY_MS;
        } else {
            m->watch_failing = false;
        }
    }
    if (!m->w) {
        usleep(wait_ms * 1000);
        return;
    }
    int rc = ol_etcd_watch_poll(m->w, wait_ms);
    live_deliver(m);
    if (rc < 0) {
        ol_log_limited(OL_LOG_INFO, "member %s: watch of %s ended (%s); re-reading", m->name,
                       m->prefix, ol_strerror(rc));
        watch_stop(m);
        m->next_watch_ms = ol_mono_ms() + (rc == -OL_ECOMPACTED ? 0 : MEMBER_WATCH_RETRY_MS);
    }
}

static void *member_main(void *arg)
{
    struct ol_member *m = arg;
    while (!atomic_load(&m->stop)) {
        uint64_t now = ol_mono_ms();
        if (!m->registered) {
            if (now >= m->next_register_ms) {
                int rc = do_register(m);
                if (rc < 0) {
                    if (rc != -EEXIST)
                        ol_log_limited(OL_LOG_WARN, "member %s: registration failed: %s", m->name,
                                       ol_strerror(rc));
                    m->next_register_ms =
                        ol_mono_ms() + (rc == -EEXIST ? MEMBER_NAME_TAKEN_MS : MEMBER_RETRY_MS);
                }
            }
        } else if (now >= m->next_renew_ms) {
            renew(m);
        }
        fence_check(m);
        if (!lease_live(m) && m->w)
            watch_stop(m);
        now = ol_mono_ms();
        uint64_t next = m->registered ? m->next_renew_ms : m->next_register_ms;
        unsigned wait_ms = next > now ? (unsigned)(next - now) : 0;
        if (wait_ms > MEMBER_SLICE_MS)
            wait_ms = MEMBER_SLICE_MS;
        wait_or_watch(m, wait_ms);
    }
    watch_stop(m);
    return NULL;
}

/* ---- start, stop ---- */

int ol_member_start(struct ol_member **out, const struct ol_member_opts *opts)
{
    *out = NULL;
    unsigned ttl = opts->ttl_s ? opts->ttl_s : 6;
    unsigned margin =
        opts->margin_ms ? opts->margin_ms : (ttl * 1000 / 6 > 500 ? ttl * 1000 / 6 : 500);
    if (!opts->endpoints || !opts->cluster || !opts->name || ttl < 2 || ttl > 3600 ||
        margin > ttl * 1000 / 3)
        return -EINVAL;
    struct ol_map probe;
    if (ol_map_init(&probe, opts->cluster) < 0 || ol_map_init(&probe, opts->name) < 0)
        return -EINVAL; /* names with the map's rules (no '/', bounded) */
    if ((opts->s3_addr && strlen(opts->s3_addr) > OL_MAP_MAX_ADDR) ||
        (opts->ucx_addr && strlen(opts->ucx_addr) > OL_MAP_MAX_ADDR))
        return -EINVAL;

    struct ol_member *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->o = *opts;
    snprintf(m->cluster, sizeof(m->cluster), "%s", opts->cluster);
    snprintf(m->name, sizeof(m->name), "%s", opts->name);
    snprintf(m->s3, sizeof(m->s3), "%s", opts->s3_addr ? opts->s3_addr : "");
    snprintf(m->ucx, sizeof(m->ucx), "%s", opts->ucx_addr ? opts->ucx_addr : "");
    m->o.cluster = m->cluster;
    m->o.name = m->name;
    m->o.s3_addr = m->s3;
    m->o.ucx_addr = m->ucx;
    m->o.endpoints = NULL; /* not kept: the client has them */
    snprintf(m->prefix, sizeof(m->prefix), OL_MEMBER_PREFIX_FMT, m->cluster);
    snprintf(m->key, sizeof(m->key), "%s%s", m->prefix, m->name);
    m->fenced = true; /* until registered; not counted as a fence */
    m->ttl_ns = (int64_t)ttl * 1000000000;
    m->margin_ns = (int64_t)margin * 1000000;
    m->quiet_ns = m->ttl_ns / 3 + m->margin_ns / 2;
    m->live = calloc(OL_MAP_MAX_NODES, sizeof(*m->live));
    if (opts->vouch) {
        unsigned period = opts->vouch_period_ms ? opts->vouch_period_ms : OL_VOUCH_PERIOD_MS;
        m->tally = malloc(sizeof(*m->tally));
        m->answers = calloc(OL_VOUCH_MAX_PEERS, sizeof(*m->answers));
        if (!m->tally || !m->answers) {
            free(m->tally);
            free(m->answers);
            free(m->live);
            free(m);
            return -ENOMEM;
        }
        ol_vouch_tally_init(m->tally, period, (unsigned)(m->quiet_ns / 1000000));
    }
    /* A renewal that hangs must end before the next one is due. */
    int rc = m->live ? ol_etcd_create(&m->c, opts->endpoints, ttl * 1000 / 3) : -ENOMEM;
    if (rc < 0)
        goto fail;
    if (opts->bind_process) {
        atomic_store(&process_deadline_ns, 0);
        atomic_store(&process_vouch_ns, 0);
        atomic_store(&process_etcd_ns, 0);
        atomic_store(&process_bound, true);
        atomic_store(&process_alive, true);
    }
    rc = -pthread_create(&m->thread, NULL, member_main, m);
    if (rc < 0)
        goto fail;
    if (opts->vouch) {
        rc = -pthread_create(&m->vthread, NULL, vouch_main, m);
        if (rc < 0) {
            atomic_store(&m->stop, true);
            pthread_join(m->thread, NULL);
            goto fail;
        }
        m->vthread_started = true;
    }
    *out = m;
    return 0;
fail:
    if (opts->bind_process)
        atomic_store(&process_alive, false);
    ol_etcd_destroy(m->c);
    free(m->tally);
    free(m->answers);
    free(m->live);
    free(m);
    return rc;
}

void ol_member_stop(struct ol_member *m, bool leave)
{
    if (!m)
        return;
    atomic_store(&m->stop, true);
    if (m->o.bind_process)
        atomic_store(&process_alive, false); /* vouches for no one from now on */
    pthread_join(m->thread, NULL);
    if (m->vthread_started)
        pthread_join(m->vthread, NULL);
    set_deadline(m, 0);
    set_vouch(m, 0);
    int64_t lease = atomic_load(&m->lease);
    if (leave && lease) {
        int rc = ol_etcd_lease_revoke(m->c, lease);
        if (rc < 0 && rc != -ENOENT)
            ol_warn("member %s: revoking lease %" PRId64 " failed (%s); it expires by itself",
                    m->name, lease, ol_strerror(rc));
    }
    ol_etcd_destroy(m->c);
    free(m->tally);
    free(m->answers);
    free(m->live);
    free(m);
}
