/* The admin's routes of an erasure-coded deployment (/_openlake/admin/...):
 * heal, heal/status, info and drive on/off; the router authenticates them.
 * The work is the deployment's (deploy/deploy.h); this file is its HTTP face. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>

#include "cluster/member.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "deploy/cluster.h"
#include "deploy/deploy.h"
#include "ec/catchup.h"
#include "ec/eset.h"
#include "ec/storedrive.h"
#include "obj/obj.h"
#include "s3/s3.h"
#include "kv/kv.h"

static int send_json(struct ol_s3_req *r, int status, const char *body, size_t len)
{
    struct ol_http_hdr h[] = {{"Content-Type", "application/json"},
                              {"x-amz-request-id", r->request_id}};
    return ol_http_respond(r->conn, status, h, 2, body, len);
}

/* The deployment heal's progress, for `openlake admin heal`'s progress lines:
 * the running totals of the current (or last) deployment heal. */
static int admin_heal_status(struct ol_s3_req *r)
{
    struct ol_deploy *ec = ol_obj_deploy(r->ctx->obj);
    bool running = atomic_load(&ec->hp.running);
    uint64_t start = atomic_load(&ec->hp.started_ms), end = atomic_load(&ec->hp.finished_ms);
    uint64_t now = ol_now_ms();
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "{\"running\":%s,\"runs\":%" PRIu64 ",\"elapsed_ms\":%" PRIu64
                     ",\"objects\":%" PRIu64 ",\"shards_rebuilt\":%" PRIu64 ",\"corrupt\":%" PRIu64
                     ",\"versions_removed\":%" PRIu64 ",\"unrecoverable\":%" PRIu64 "}\n",
                     running ? "true" : "false", atomic_load(&ec->hp.runs),
                     start == 0 ? 0 : (running ? now : end) - start, atomic_load(&ec->hp.objects),
                     atomic_load(&ec->hp.shards_rebuilt), atomic_load(&ec->hp.corrupt),
                     atomic_load(&ec->hp.versions_removed), atomic_load(&ec->hp.unrecoverable));
    return send_json(r, 200, body, (size_t)n);
}

static int admin_heal(struct ol_s3_req *r)
{
    struct ol_deploy *ec = ol_obj_deploy(r->ctx->obj);
    const struct ol_s3_param *pb = ol_s3_param(r, "bucket");
    const struct ol_s3_param *pk = ol_s3_param(r, "key");
    struct ol_eset_heal_stats hs = {0};
    if (pk && (!pb || !pb->value[0] || !pk->value_len || pk->value_len > OL_DRIVE_MAX_KEY))
        return ol_s3_error(r, OL_S3_InvalidArgument, "key needs a bucket.");
    if (pb && pb->value[0] && strlen(pb->value) > 63)
        return ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
    int rc = ol_deploy_heal(ec, pb && pb->value[0] ? pb->value : NULL, pk ? pk->value : NULL,
                            pk ? pk->value_len : 0, r->now_ns, &hs);
    if (rc < 0)
        return ol_s3_error_from(r, rc);
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "{\"objects\":%" PRIu64 ",\"shards_rebuilt\":%" PRIu64 ",\"corrupt\":%" PRIu64
                     ",\"marked_complete\":%" PRIu64 ",\"versions_removed\":%" PRIu64
                     ",\"unrecoverable\":%" PRIu64 "}\n",
                     hs.objects, hs.shards_rebuilt, hs.corrupt, hs.marked_complete,
                     hs.versions_removed, hs.unrecoverable);
    return send_json(r, 200, body, (size_t)n);
}

/* Appends JSON-escaped text. */
static void json_str(char *b, size_t cap, size_t *n, const char *s)
{
    if (*n + 2 >= cap)
        return;
    b[(*n)++] = '"';
    for (; *s && *n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            b[(*n)++] = '\\';
            b[(*n)++] = (char)c;
        } else if (c < 0x20) {
            *n += (size_t)snprintf(b + *n, cap - *n, "\\u%04x", c);
        } else {
            b[(*n)++] = (char)c;
        }
    }
    b[(*n)++] = '"';
}

#define JS(...)                                                                                    \
    do {                                                                                           \
        int w_ = snprintf(b + n, cap - n, __VA_ARGS__);                                            \
        if (w_ > 0 && (size_t)w_ < cap - n)                                                        \
            n += (size_t)w_;                                                                       \
    } while (0)

static int admin_info(struct ol_s3_req *r)
{
    struct ol_deploy *ec = ol_obj_deploy(r->ctx->obj);
    size_t cap = 4096 + (size_t)ec->ndrives * 1400 + (size_t)ec->nsets * 256 +
                 OL_DEPLOY_MAX_POOLS * 160 + 64 * 1024,
           n = 0;
    char *b = malloc(cap);
    if (!b)
        return ol_s3_error_from(r, -ENOMEM);
    JS("{\"mode\":\"erasure\",\"k\":%u,\"m\":%u,\"deployment\":\"", ec->k, ec->m);
    for (unsigned i = 0; i < sizeof(ec->deploy_id); i++)
        JS("%02x", ec->deploy_id[i]);
    JS("\",\"drives\":[");
    for (unsigned i = 0; i < ec->ndrives; i++) {
        unsigned set = i / (ec->k + ec->m);
        if (!ec->drives[i]) { /* a cluster's remote drive: its node reports it */
            unsigned char seen = atomic_load(&ec->seen[i]);
            JS("%s{\"index\":%u,\"set\":%u,\"pool\":%u,\"path\":", i ? "," : "", i, set,
               ol_deploy_pool_of_set(ec, set));
            json_str(b, cap, &n, ec->paths[i]);
            JS(",\"remote\":true,\"state\":\"%s\"}", seen == 2   ? "offline"
                                                     : seen == 1 ? "ok"
                                                                 : "unknown");
            continue;
        }
        struct statvfs sv;
        struct ol_storedrive_info di;
        ol_storedrive_info(ec->drives[i], &di);
        uint64_t total = 0, avail = 0;
        if (statvfs(ec->paths[i], &sv) == 0) {
            total = (uint64_t)sv.f_blocks * sv.f_frsize;
            avail = (uint64_t)sv.f_bavail * sv.f_frsize;
        }
        struct ol_store_stats ss = {0};
        if (ol_storedrive_store(ec->drives[i]))
            ol_store_stats(ol_storedrive_store(ec->drives[i]), &ss);
        JS("%s{\"index\":%u,\"set\":%u,\"pool\":%u,\"path\":", i ? "," : "", i, set,
           ol_deploy_pool_of_set(ec, set));
        json_str(b, cap, &n, ec->paths[i]);
        JS(",\"state\":\"%s\",\"total_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64
           ",\"live_bytes\":%" PRIu64 ",\"corrupt_blocks\":%" PRIu64,
           ol_storedrive_state_name(di.state), total, avail, ss.live_bytes, ss.corrupt_blocks);
        JS(",\"last_error\":");
        json_str(b, cap, &n, di.last_err ? ol_strerror(di.last_err) : "");
        JS(",\"errors\":%u,\"retry_in_ms\":%" PRIu64 ",\"failures\":%" PRIu64
           ",\"offline_events\":%" PRIu64 ",\"online_events\":%" PRIu64 ",\"reopens\":%" PRIu64 "}",
           di.consecutive_errors, di.retry_in_ms, di.failures, di.offline_events, di.online_events,
           di.reopens);
    }
    JS("],\"sets\":[");
    for (unsigned s = 0; s < ec->nsets; s++) {
        unsigned online = 0, size = ec->k + ec->m;
        for (unsigned j = 0; j < size; j++) {
            unsigned d = s * size + j;
            /* A remote drive counts as online unless it failed its last
             * look (the map thread's, every second). */
            online += ec->drives[d] ? !ol_storedrive_offline(ec->drives[d])
                                    : atomic_load(&ec->seen[d]) != 2;
        }
        const char *state = online == size                  ? "healthy"
                            : online >= ec->k + (ec->m > 0) ? "degraded"
                            : online >= ec->k               ? "read-only"
                                                            : "unavailable";
        JS("%s{\"index\":%u,\"pool\":%u,\"first_drive\":%u,\"drives\":%u,\"online\":%u,"
           "\"k\":%u,\"m\":%u,\"read_quorum\":%s,\"write_quorum\":%s,\"state\":\"%s\"}",
           s ? "," : "", s, ol_deploy_pool_of_set(ec, s), s * size, size, online, ec->k, ec->m,
           online >= ec->k ? "true" : "false", online >= ec->k + (ec->m > 0) ? "true" : "false",
           state);
    }
    JS("],\"pools\":[");
    unsigned np = atomic_load(&ec->npools);
    for (unsigned p = 0; p < np; p++) {
        uint64_t fb = atomic_load(&ec->pools[p].free_bytes);
        JS("%s{\"index\":%u,\"id\":%" PRIu32 ",\"first_set\":%u,\"sets\":%u,\"drives\":%u",
           p ? "," : "", p, ec->pools[p].id, ec->pools[p].first_set, ec->pools[p].nsets,
           ec->pools[p].ndrives);
        if (fb != UINT64_MAX)
            JS(",\"free_bytes\":%" PRIu64, fb);
        JS("}");
    }
    JS("]");
    if (ec->catchup) {
        struct ol_catchup_stats cs;
        ol_catchup_stats(ec->catchup, &cs);
        JS(",\"catchup\":{\"pending\":%" PRIu64 ",\"queued\":%" PRIu64 ",\"merged\":%" PRIu64
           ",\"healed\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"dropped\":%" PRIu64
           ",\"overflowed\":%" PRIu64 ",\"full_heals\":%" PRIu64 ",\"drives_down\":%" PRIu64 "}",
           cs.pending, cs.queued, cs.merged, cs.healed, cs.retries, cs.dropped, cs.overflowed,
           cs.full_heals, cs.drives_down);
    }
    if (ec->cluster[0]) {
        JS(",\"cluster\":");
        json_str(b, cap, &n, ec->cluster);
        JS(",\"node\":");
        json_str(b, cap, &n, ec->node);
        JS(",\"epoch\":%" PRIu64, atomic_load(&ec->epoch));
        /* Whether this node would refuse to acknowledge a write now (its
         * lease, cluster/member.h). */
        JS(",\"fenced\":%s", ol_member_may_ack_writes() ? "false" : "true");
        /* Why: "lease", "etcd_down_vouched" (etcd silent, a majority of the
         * map's nodes vouch that it is silent for them too) or "fenced". */
        JS(",\"ack\":\"%s\"", ol_member_ack_name(ol_member_ack_state_process()));
        /* The nodes as this node's map thread saw them (up / down). */
        size_t room = 64 * 1024;
        char *nodes = malloc(room);
        if (nodes && ol_cluster_nodes_json(nodes, room) == 0) {
            size_t nl = strlen(nodes);
            if (nl + 16 < cap - n) {
                JS(",\"nodes\":");
                memcpy(b + n, nodes, nl);
                n += nl;
            }
        }
        free(nodes);
    }
    if (r->ctx->kv) {
        struct ol_kv_stats k;
        ol_kv_stats(r->ctx->kv, &k);
        JS(",\"kv\":{\"memory\":{\"entries\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"capacity\":%" PRIu64 ",\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 "}",
           k.mem_entries, k.mem_bytes, k.mem_capacity, k.mem_hits, k.mem_misses);
        JS(",\"disk\":{\"entries\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"capacity\":%" PRIu64
           ",\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 "}",
           k.disk_entries, k.disk_bytes, k.disk_capacity, k.disk_hits, k.disk_misses);
        JS(",\"puts\":%" PRIu64 ",\"stored\":%" PRIu64 ",\"dedup\":%" PRIu64
           ",\"evictions\":%" PRIu64 ",\"spills\":%" PRIu64 ",\"disk_drops\":%" PRIu64
           ",\"promotions\":%" PRIu64 ",\"corrupt\":%" PRIu64 ",\"put_bytes\":%" PRIu64
           ",\"get_bytes\":%" PRIu64 "}",
           k.puts, k.stored, k.dedup, k.evictions, k.spills, k.disk_drops, k.promotions,
           k.corrupt, k.put_bytes, k.get_bytes);
    }
    JS("}\n");
    int rc = send_json(r, 200, b, n);
    free(b);
    return rc;
}

static int admin_drive(struct ol_s3_req *r)
{
    struct ol_deploy *ec = ol_obj_deploy(r->ctx->obj);
    const struct ol_s3_param *pi = ol_s3_param(r, "index");
    const struct ol_s3_param *ps = ol_s3_param(r, "state");
    char *end = NULL;
    unsigned long i = pi ? strtoul(pi->value, &end, 10) : 0;
    if (!pi || !end || *end || i >= ec->ndrives || !ec->drives[i] || !ps ||
        (strcmp(ps->value, "online") != 0 && strcmp(ps->value, "offline") != 0))
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Give index (a drive number) and state (online or offline).");
    ol_storedrive_set_offline(ec->drives[i], strcmp(ps->value, "offline") == 0);
    return send_json(r, 200, "{}\n", 3);
}

int ol_s3_admin(struct ol_s3_req *r)
{
    struct ol_slice p = r->http->head.path;
    struct ol_slice m = r->http->head.method;
    bool post = m.n == 4 && memcmp(m.p, "POST", 4) == 0;
    bool get = m.n == 3 && memcmp(m.p, "GET", 3) == 0;
#define PATH(lit) (p.n == sizeof(lit) - 1 && memcmp(p.p, lit, p.n) == 0)
    if (PATH("/_openlake/admin/heal") && post)
        return admin_heal(r);
    if (PATH("/_openlake/admin/heal/status") && get)
        return admin_heal_status(r);
    if (PATH("/_openlake/admin/info") && get)
        return admin_info(r);
    if (PATH("/_openlake/admin/drive") && post)
        return admin_drive(r);
#undef PATH
    return ol_s3_error(r, OL_S3_InvalidRequest, "Unknown administrative path or method.");
}
