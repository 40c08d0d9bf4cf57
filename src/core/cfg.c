#include "core/cfg.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cfg_type { T_INT, T_SIZE, T_BOOL, T_STR };

struct cfg_row {
    const char *name;
    enum cfg_type type;
    size_t offset;
    size_t str_cap; /* T_STR: capacity of the char array */
    int64_t min, max;
    const char *def;
    const char *help;
};

#define I(n, lo, hi, d, h) {#n, T_INT, offsetof(struct ol_cfg, n), 0, lo, hi, d, h}
#define Z(n, lo, hi, d, h) {#n, T_SIZE, offsetof(struct ol_cfg, n), 0, lo, hi, d, h}
#define B(n, d, h) {#n, T_BOOL, offsetof(struct ol_cfg, n), 0, 0, 1, d, h}
#define S(n, d, h) {#n, T_STR, offsetof(struct ol_cfg, n), sizeof(((struct ol_cfg *)0)->n), 0, 0, d, h}

#define KiB (1024LL)
#define MiB (1024LL * 1024)
#define GiB (1024LL * 1024 * 1024)
#define TiB (1024LL * GiB)

/* Every setting and limit of the server: one row each. */
static const struct cfg_row rows[] = {
    S(data_dir, "./openlake-data", "directory of the drive (format file, index, segments)"),
    S(listen, "127.0.0.1:9000", "address:port of the S3 HTTP listener; off = none (HTTPS only, with tls_listen)"),
    S(tls_listen, "", "address:port of the S3 HTTPS listener (beside listen, or instead of it with listen off); empty = none"),
    S(tls_cert, "", "HTTPS: PEM file of the server certificate (then any intermediates); re-read on SIGHUP"),
    S(tls_key, "", "HTTPS: PEM file of the certificate's private key; re-read on SIGHUP"),
    I(threads, 0, 256, "0", "loop threads, one per core; 0 = all online cores"),
    S(log_level, "info", "error | warn | info | debug"),
    S(region, "us-east-1", "the region this server reports and accepts in signatures"),
    S(domain, "", "base domain for virtual-hosted-style requests (bucket.domain); empty = off"),
    B(health_public, "no", "serve /_openlake/health without authentication"),
    B(metrics_public, "no", "serve /_openlake/metrics without authentication"),
    Z(max_header_bytes, 1 * KiB, 1 * MiB, "16384", "largest request head (line + headers); 431 past it"),
    I(max_headers, 8, 1000, "100", "most header lines in a request; 431 past it"),
    Z(max_url_bytes, 256, 64 * KiB, "8192", "longest request-target; 414 past it"),
    I(idle_timeout_ms, 100, 3600000, "60000", "close a connection idle this long between requests"),
    I(io_timeout_ms, 100, 3600000, "30000", "close a connection whose body or send stalls this long"),
    I(max_conns_per_thread, 16, 65536, "4096", "connections one thread serves; past it the oldest idle ones are closed, then new ones refused"),
    I(header_timeout_ms, 100, 3600000, "10000", "a request head must be complete this long after accept (first request) or its first byte"),
    I(max_conns_per_ip, 0, 1048576, "1024", "open connections from one client address (IPv6: its /64); 0 = no limit (raise behind a proxy)"),
    Z(min_body_rate_bytes_per_sec, 0, 1 * GiB, "1024", "cut a request body (RequestTimeout) that arrives, or a response that is read, slower than this; 0 = off"),
    I(body_rate_grace_ms, 0, 3600000, "10000", "time a request body is given (waiting on the client) before its rate is first checked"),
    I(body_rate_window_ms, 100, 3600000, "10000", "waiting time over which a request body's rate is measured after the grace"),
    I(clock_skew_sec, 1, 86400, "900", "largest accepted difference between request and server time"),
    Z(max_object_bytes, 0, 5 * TiB, "5497558138880", "largest single PUT or part"),
    Z(min_part_bytes, 0, 5 * GiB, "5242880", "smallest multipart part except the last"),
    Z(body_memory_bytes, 0, 1 * TiB, "0", "memory for request bodies in flight, all requests together (PUT and EC stripe buffers, GET buffers); 0 = an eighth of RAM; past it requests wait, then get 503 SlowDown"),
    Z(body_memory_request_bytes, 1 * MiB, 16 * GiB, "134217728", "most body memory one request may hold (503 SlowDown past it); an EC PUT of 16+4 needs 80 MiB"),
    I(body_memory_wait_ms, 0, 600000, "2000", "how long a request waits for body memory before 503 SlowDown"),
    I(multipart_expiry_sec, 0, 315360000, "604800", "abort multipart uploads older than this; 0 = never"),
    I(multipart_reap_interval_ms, 100, 86400000, "60000", "how often abandoned uploads are looked for"),
    Z(segment_bytes, 1 * MiB, 64 * GiB, "268435456", "roll segment files past this size"),
    Z(block_bytes, 4 * KiB, 16 * MiB, "65536", "checksum block size (multiple of 4096)"),
    Z(inline_bytes, 0, 1 * MiB, "131072", "objects up to this size live in the index"),
    Z(map_bytes, 64 * MiB, 64 * TiB, "68719476736", "LMDB map size (address space; sparse)"),
    I(compact_pct, 0, 100, "50", "compact sealed segments whose live share is below this"),
    I(compact_interval_ms, 100, 86400000, "10000", "how often the compactor looks for work"),
    I(commit_batch, 1, 65536, "1024", "most index operations in one write transaction"),
    I(shutdown_grace_ms, 0, 600000, "10000", "on SIGTERM, let in-flight requests finish this long"),
    I(lifecycle_interval_ms, 100, 86400000, "60000", "how often bucket lifecycle rules are applied"),
    I(lifecycle_day_sec, 1, 86400, "86400", "length of a lifecycle \"day\" in seconds (tests shorten it)"),
    I(ec_data, 0, 16, "0", "EC: data shards per set with several directories (0 = automatic)"),
    I(ec_parity, 0, 8, "0", "EC: parity shards per set (0 with ec_data 0 = automatic)"),
    I(scrub_interval_ms, 0, 604800000, "3600000", "EC: pause between scrubber passes (0 = off)"),
    I(scrub_objects_per_sec, 1, 1000000, "50", "EC: objects the scrubber heals per second"),
    I(ec_read_timeout_ms, 0, 600000, "2000", "EC: a shard read slower than this is rebuilt from parity (0 = wait)"),
    I(ec_drive_fail_after, 1, 1000, "3", "EC: consecutive drive errors that take a drive offline"),
    I(ec_drive_backoff_max_ms, 10, 3600000, "30000", "EC: longest pause between probes of an offline drive"),
    I(ec_drive_check_ms, 10, 600000, "1000", "EC: how often the drive monitor checks the drives"),
    S(native_listen, "", "host:port of the native client port (UCX, libopenlake); empty = the S3 listener's host and a free port (GET /_openlake/native names it); off = none"),
    I(native_lanes, 0, 16, "0", "native port: net threads (UCX workers), each on its own port: lane 0 on native_listen's, the others on free ones (GET /_openlake/native lists them); 0 = one per 4 cores, 1 to 4; 1 = one"),
    I(native_workers, 0, 64, "0", "native port: worker threads that run the requests of all lanes; 0 = one per core, 4 to 32"),
    S(cluster, "", "cluster: etcd endpoints (host:port,host:port); empty = a single node"),
    S(node, "", "cluster: this node's name (default: the host name)"),
    S(cluster_name, "openlake", "cluster: the cluster's name (its map in etcd, its deployment id)"),
    S(drive_listen, "127.0.0.1:0", "cluster: host:port of this node's drive service (UCX); port 0 = a free one (a restart tries its previous one first)"),
    I(drive_timeout_ms, 100, 600000, "5000", "cluster: a call to another node's drive gives up after this"),
    S(cluster_key_file, "", "cluster: a file holding the secret the nodes authenticate each other with (the same on every node), which also seals run-time users' secrets (users/users.h; on a single node too); empty = a random key kept in etcd"),
    I(cluster_wait_ms, 0, 86400000, "600000", "cluster: how long a start waits for a pool that holds its drives (openlake admin cluster pool)"),
    Z(kv_memory_bytes, 0, 16 * TiB, "1073741824", "KV cache: memory tier of this node (blocks plus 256 bytes each); 0 = no KV store (the native KV ops answer ENOTSUP)"),
    Z(kv_disk_bytes, 0, 1024 * TiB, "0", "KV cache: disk tier, where memory spills evicted blocks; 0 = none (evicted blocks are gone)"),
    S(kv_dir, "", "KV cache: directory of the disk tier's spill files (emptied at start); empty = DATA_DIR/kv-cache"),
    I(kv_high_watermark_pct, 1, 100, "95", "KV cache: a tier starts evicting (LRU) when a put would pass this share of it"),
    I(kv_low_watermark_pct, 1, 100, "85", "KV cache: ... and evicts down to this share (at most the high watermark)"),
    I(sse_decrypt_threads, -1, 32, "-1", "encryption at rest: threads that open a large encrypted read's next windows while its loop thread sends the current one (obj/sse_pool.h); -1 = derived from the cores (none below 4), 0 = off"),
    I(sse_decrypt_spin_us, 0, 10000, "0", "encryption at rest: after opening a window or part, up to two decrypt threads stay awake this long watching for the next; 0 = they sleep at once (300 measured no gain on 16 cores: bench/RESULTS.md). No cost while no encrypted reads happen"),
    S(sse_key_file, "", "encryption at rest (SSE-S3): a file whose contents (at least 32 bytes; its SHA-256 is the master key) wrap every object's data key, the same file on every node; keep it off the data drives. Empty: a cluster derives the key from the cluster key, a single node makes a random one and keeps it on its drives (see docs/SECURITY.md)"),
    I(user_requests_per_sec, 0, 1000000, "0", "requests a second each user may make (one second's worth may come at once); past it 503 SlowDown (native port: EBUSY); anonymous requests share one user; 0 = no limit; a 'limit' line sets one user's"),
    Z(user_bytes_per_sec, 0, 1 * TiB, "0", "body bytes a second each user may move, in and out (one second's worth at once); S3 bodies are paced to it, the native port refuses (EBUSY) while a user owes time; at least min_body_rate_bytes_per_sec; 0 = no limit"),
    S(admin_users, "", "access keys with the admin role, comma-separated: they see and may do everything; the first one owns buckets created before ownership was recorded (else the first configured user does)"),
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

static int parse_size(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || n < 0)
        return -EINVAL;
    int64_t mul = 1;
    if (*end) {
        switch (tolower((unsigned char)*end)) {
        case 'k': mul = KiB; break;
        case 'm': mul = MiB; break;
        case 'g': mul = GiB; break;
        case 't': mul = TiB; break;
        default: return -EINVAL;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -EINVAL;
    }
    if (n > INT64_MAX / mul)
        return -EINVAL;
    *out = n * mul;
    return 0;
}

static int set_row(struct ol_cfg *c, const struct cfg_row *r, const char *v, char *err,
                   size_t errlen)
{
    char *field = (char *)c + r->offset;
    int64_t n;
    switch (r->type) {
    case T_STR:
        if (strlen(v) >= r->str_cap) {
            snprintf(err, errlen, "%s: value too long (max %zu bytes)", r->name, r->str_cap - 1);
            return -EINVAL;
        }
        strcpy(field, v);
        return 0;
    case T_BOOL:
        if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "on"))
            *(bool *)field = true;
        else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "off"))
            *(bool *)field = false;
        else {
            snprintf(err, errlen, "%s: expected yes or no, got '%s'", r->name, v);
            return -EINVAL;
        }
        return 0;
    case T_INT:
    case T_SIZE: {
        int rc;
        if (r->type == T_SIZE) {
            rc = parse_size(v, &n);
        } else {
            char *end;
            errno = 0;
            n = strtoll(v, &end, 10);
            rc = (errno || end == v || *end) ? -EINVAL : 0;
        }
        if (rc) {
            snprintf(err, errlen, "%s: '%s' is not a%s number", r->name, v,
                     r->type == T_SIZE ? " size" : "n integer");
            return -EINVAL;
        }
        if (n < r->min || n > r->max) {
            snprintf(err, errlen, "%s: %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                     r->name, n, r->min, r->max);
            return -EINVAL;
        }
        *(int64_t *)field = n;
        return 0;
    }
    }
    return -EINVAL;
}

void ol_cfg_defaults(struct ol_cfg *c)
{
    char err[256];
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NROWS; i++) {
        int rc = set_row(c, &rows[i], rows[i].def, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "bad default: %s\n", err);
            abort();
        }
    }
}

int ol_cfg_set(struct ol_cfg *c, const char *name, const char *value, char *err, size_t errlen)
{
    for (size_t i = 0; i < NROWS; i++) {
        /* Accept "max-header-bytes" for "max_header_bytes" too. */
        const char *a = rows[i].name, *b = name;
        while (*a && (*a == *b || (*a == '_' && *b == '-'))) {
            a++;
            b++;
        }
        if (*a == 0 && *b == 0)
            return set_row(c, &rows[i], value, err, errlen);
    }
    snprintf(err, errlen, "unknown setting '%s'", name);
    return -EINVAL;
}

int ol_cfg_add_user(struct ol_cfg *c, const char *access_key, const char *secret_key)
{
    size_t al = strlen(access_key), sl = strlen(secret_key);
    if (al < 3 || al > 128 || sl < 8 || sl > 128)
        return -EINVAL;
    for (const char *p = access_key; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return -EINVAL;
    for (size_t i = 0; i < c->nusers; i++) {
        if (strcmp(c->users[i].access_key, access_key) == 0) {
            strcpy(c->users[i].secret_key, secret_key);
            return 0;
        }
    }
    if (c->nusers >= OL_CFG_MAX_USERS)
        return -ENOSPC;
    strcpy(c->users[c->nusers].access_key, access_key);
    strcpy(c->users[c->nusers].secret_key, secret_key);
    c->nusers++;
    return 0;
}

static bool access_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n < 3 || n > 128)
        return false;
    for (const char *p = k; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return true;
}

int ol_cfg_add_limit(struct ol_cfg *c, const char *access_key, const char *rps, const char *bps,
                     char *err, size_t errlen)
{
    if (strcmp(access_key, OL_CFG_ANONYMOUS) != 0 && !access_key_ok(access_key)) {
        snprintf(err, errlen, "limit: '%.64s' is not an access key (3-128 of A-Za-z0-9._-) "
                 "or " OL_CFG_ANONYMOUS, access_key);
        return -EINVAL;
    }
    /* The two numbers are checked as the default rows check theirs. */
    struct ol_cfg tmp;
    char sub[200];
    if (ol_cfg_set(&tmp, "user_requests_per_sec", rps, sub, sizeof(sub)) < 0 ||
        ol_cfg_set(&tmp, "user_bytes_per_sec", bps, sub, sizeof(sub)) < 0) {
        snprintf(err, errlen, "limit %s: %s (give REQ_PER_SEC BYTES_PER_SEC)", access_key, sub);
        return -EINVAL;
    }
    size_t i = 0;
    while (i < c->nlimits && strcmp(c->limits[i].access_key, access_key) != 0)
        i++;
    if (i == OL_CFG_MAX_LIMITS) {
        snprintf(err, errlen, "limit: more than %d users", OL_CFG_MAX_LIMITS);
        return -ENOSPC;
    }
    snprintf(c->limits[i].access_key, sizeof(c->limits[i].access_key), "%s", access_key);
    c->limits[i].requests_per_sec = tmp.user_requests_per_sec;
    c->limits[i].bytes_per_sec = tmp.user_bytes_per_sec;
    if (i == c->nlimits)
        c->nlimits++;
    return 0;
}

const struct ol_cfg_user *ol_cfg_find_user(const struct ol_cfg *c, const char *access_key,
                                           size_t len)
{
    for (size_t i = 0; i < c->nusers; i++)
        if (strlen(c->users[i].access_key) == len &&
            memcmp(c->users[i].access_key, access_key, len) == 0)
            return &c->users[i];
    return NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int ol_cfg_load_file(struct ol_cfg *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        char *name = s;
        while (*s && !isspace((unsigned char)*s))
            s++;
        if (*s)
            *s++ = 0;
        char *value = trim(s);
        char sub[256];
        if (strcmp(name, "user") == 0) {
            char *sk = value;
            while (*sk && !isspace((unsigned char)*sk))
                sk++;
            if (*sk)
                *sk++ = 0;
            sk = trim(sk);
            rc = ol_cfg_add_user(c, value, sk);
            if (rc) {
                snprintf(err, errlen, "%s:%d: user needs ACCESS_KEY (3-128 of A-Za-z0-9._-) "
                         "and SECRET (8-128 bytes)", path, lineno);
                break;
            }
            continue;
        }
        if (strcmp(name, "limit") == 0) {
            /* limit ACCESS_KEY REQ_PER_SEC BYTES_PER_SEC */
            char *fld[4] = {0};
            int nf = 0;
            char *save = NULL;
            for (char *t = strtok_r(value, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
                if (nf < 4)
                    fld[nf] = t;
                nf++;
            }
            if (nf != 3) {
                snprintf(err, errlen, "%s:%d: limit needs ACCESS_KEY REQ_PER_SEC BYTES_PER_SEC",
                         path, lineno);
                rc = -EINVAL;
                break;
            }
            rc = ol_cfg_add_limit(c, fld[0], fld[1], fld[2], sub, sizeof(sub));
            if (rc) {
                snprintf(err, errlen, "%s:%d: %s", path, lineno, sub);
                break;
            }
            continue;
        }
        rc = ol_cfg_set(c, name, value, sub, sizeof(sub));
        if (rc) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, sub);
            break;
        }
    }
    fclose(f);
    return rc;
}

void ol_cfg_print_help(void)
{
    /* The name column is as wide as the longest name, so every help text
     * starts in one column. */
    int w = 4;
    for (size_t i = 0; i < NROWS; i++) {
        int l = (int)strlen(rows[i].name);
        w = l > w ? l : w;
    }
    printf("Settings (config file: 'name value'; flags: --name value):\n");
    for (size_t i = 0; i < NROWS; i++) {
        const struct cfg_row *r = &rows[i];
        if (r->type == T_INT || r->type == T_SIZE)
            printf("  %-*s %s (default %s, %" PRId64 "..%" PRId64 ")\n", w, r->name, r->help,
                   r->def, r->min, r->max);
        else
            printf("  %-*s %s (default '%s')\n", w, r->name, r->help, r->def);
    }
    printf("  %-*s a user: 'user ACCESS_KEY SECRET' (repeatable, config file only)\n", w, "user");
    printf("  %-*s one user's limits: 'limit ACCESS_KEY REQ_PER_SEC BYTES_PER_SEC' (0 = none; "
           "ACCESS_KEY " OL_CFG_ANONYMOUS " for anonymous requests; repeatable, config file only)\n",
           w, "limit");
}
