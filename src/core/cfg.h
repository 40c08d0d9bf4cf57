/* Settings and limits: one table (cfg.c) of every setting with its type,
 * bounds and default.  Values come from the defaults, then the config file,
 * then command-line flags (--name value or --name=value), in that order.
 * docs/openlake.conf.sample is the commented sample. */
#ifndef OL_CORE_CFG_H
#define OL_CORE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_CFG_MAX_USERS 64

struct ol_cfg_user {
    char access_key[129];
    char secret_key[129];
};

/* A user's own limits (access/ratelimit.h): a "limit ACCESS_KEY
 * REQ_PER_SEC BYTES_PER_SEC" line; 0 = no limit.  OL_CFG_ANONYMOUS as the
 * key: the one entry anonymous requests share. */
#define OL_CFG_MAX_LIMITS 64
#define OL_CFG_ANONYMOUS "(anonymous)"

struct ol_cfg_limit {
    char access_key[129];
    int64_t requests_per_sec;
    int64_t bytes_per_sec;
};

struct ol_cfg {
    char data_dir[1024];
    char listen[256];         /* host:port; "off" = no plain HTTP listener */
    /* HTTPS (http/tls.h): a listener beside or instead of listen; the
     * certificate chain and key are PEM files, read again on SIGHUP. */
    char tls_listen[256];     /* host:port; "" = none */
    char tls_cert[1024];
    char tls_key[1024];
    int64_t threads;          /* 0: one per online core */
    char log_level[16];
    char region[64];
    char domain[256];         /* virtual-hosted style base domain; "" = off */
    bool health_public;
    bool metrics_public;
    /* HTTP limits and timeouts */
    int64_t max_header_bytes;
    int64_t max_headers;
    int64_t max_url_bytes;
    int64_t idle_timeout_ms;
    int64_t io_timeout_ms;
    int64_t max_conns_per_thread;
    int64_t header_timeout_ms;           /* the whole request head, from accept or its first byte */
    int64_t max_conns_per_ip;            /* 0 = no limit */
    int64_t min_body_rate_bytes_per_sec; /* 0 = off */
    int64_t body_rate_grace_ms;
    int64_t body_rate_window_ms;
    int64_t clock_skew_sec;
    /* S3 limits */
    int64_t max_object_bytes;
    int64_t min_part_bytes;
    int64_t body_memory_bytes;         /* budget of body buffers in flight; 0 = RAM / 8 */
    int64_t body_memory_request_bytes; /* most one request may reserve */
    int64_t body_memory_wait_ms;       /* wait for a reservation, then 503 */
    int64_t multipart_expiry_sec;       /* abort uploads older than this; 0 = never */
    int64_t multipart_reap_interval_ms; /* how often the reaper looks */
    /* storage engine */
    int64_t segment_bytes;
    int64_t block_bytes;
    int64_t inline_bytes;
    int64_t map_bytes;
    int64_t compact_pct;
    int64_t compact_interval_ms;
    int64_t commit_batch;
    int64_t shutdown_grace_ms;
    /* bucket lifecycle */
    int64_t lifecycle_interval_ms;
    int64_t lifecycle_day_sec;
    /* erasure coding (several data directories) */
    int64_t ec_data;               /* k; 0 with ec_parity 0: chosen by ec/placement.h */
    int64_t ec_parity;             /* m */
    int64_t scrub_interval_ms;     /* pause between scrubber passes; 0 = no scrubber */
    int64_t scrub_objects_per_sec; /* scrubber rate */
    int64_t ec_read_timeout_ms;      /* slow shard read: rebuild from parity (0 = wait) */
    int64_t ec_drive_fail_after;     /* consecutive errors that take a drive offline */
    int64_t ec_drive_backoff_max_ms; /* cap of the offline drive's probe backoff */
    int64_t ec_drive_check_ms;       /* drive monitor period */
    /* cluster (deploy/cluster.h); cluster "" = a single node */
    char cluster[1024];      /* etcd endpoints, host:port[,host:port...] */
    char node[64];           /* this node's name */
    char cluster_name[64];
    int64_t native_lanes;    /* native port net threads; 0: min(4, cores) */
    int64_t native_workers;  /* native port workers; 0: one per core, 4 to 32 */
    char native_listen[256]; /* host:port of the native client port; "": S3's host, a free port; "off" */
    char drive_listen[256];  /* host:port of the drive service; port 0 = a free one */
    char cluster_key_file[256]; /* the drive protocol's key (cluster/key.h); "" = etcd's */
    int64_t drive_timeout_ms;    /* a remote drive call gives up after this */
    int64_t cluster_wait_ms;     /* how long a start waits for a pool with its drives */
    const char *const *drive_dirs; /* the data directories when more than one (main.c) */
    unsigned ndrive_dirs;
    /* KV-cache store (kv/kv.h, docs/KV.md) */
    int64_t kv_memory_bytes;   /* memory tier; 0 = no KV store */
    int64_t kv_disk_bytes;     /* disk tier; 0 = none */
    char kv_dir[1024];         /* the disk tier's directory; "" = DATA_DIR/kv-cache */
    int64_t kv_high_watermark_pct;
    int64_t kv_low_watermark_pct;
    /* users */
    char admin_users[1024]; /* admin access keys, comma-separated (access/access.h) */
    int64_t sse_decrypt_threads; /* decrypt pool (obj/sse_pool.h); -1: derived from the cores */
    int64_t sse_decrypt_spin_us; /* how long its threads stay awake after a job */
    char sse_key_file[4096];  /* SSE-S3 master key file (obj/sse.h); empty: derived or kept on the drives */
    struct ol_cfg_user users[OL_CFG_MAX_USERS];
    size_t nusers;
    /* per-user limits (access/ratelimit.h); 0 = off */
    int64_t user_requests_per_sec; /* every user's default */
    int64_t user_bytes_per_sec;
    struct ol_cfg_limit limits[OL_CFG_MAX_LIMITS];
    size_t nlimits;
};

/* Fills every setting with its default. */
void ol_cfg_defaults(struct ol_cfg *c);
/* Sets one setting from text; checks type and bounds.  On error returns
 * -EINVAL and writes a message into err. */
int ol_cfg_set(struct ol_cfg *c, const char *name, const char *value, char *err, size_t errlen);
/* Reads a config file: "name value" lines, '#' comments, and repeated
 * "user ACCESS SECRET" and "limit ACCESS REQ_PER_SEC BYTES_PER_SEC" lines. */
int ol_cfg_load_file(struct ol_cfg *c, const char *path, char *err, size_t errlen);
/* Adds a user; -ENOSPC past OL_CFG_MAX_USERS, -EINVAL for bad keys. */
int ol_cfg_add_user(struct ol_cfg *c, const char *access_key, const char *secret_key);
/* Sets one user's limits from text ("limit" line: rps a number, bps a
 * size such as 10m); a key given twice keeps the last.  -EINVAL with a
 * message in err, -ENOSPC past OL_CFG_MAX_LIMITS. */
int ol_cfg_add_limit(struct ol_cfg *c, const char *access_key, const char *rps, const char *bps,
                     char *err, size_t errlen);
/* Looks a user's secret up; NULL when unknown. */
const struct ol_cfg_user *ol_cfg_find_user(const struct ol_cfg *c, const char *access_key,
                                           size_t len);
/* Prints the table (name, default, range, help) for --help. */
void ol_cfg_print_help(void);

#endif
