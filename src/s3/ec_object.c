/* S3 over erasure-coded drives: see s3/ec_object.h. */
#include "s3/ec_object.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/md5.h"
#include "ec/eset.h"
#include "ec/placement.h"
#include "ec/storedrive.h"
#include "s3/ec_multipart.h"
#include "s3/meta.h"
#include "s3/object.h"
#include "s3/settings.h"
#include "store/store.h"

#define EC_CHUNK_BYTES (1u << 20)  /* body bytes per read or receive step */
#define EC_ITER_PAGE 128u          /* keys per set per listing step */
#define EC_MAX_BUCKETS 100000u

struct ol_s3_ec {
    unsigned ndrives, nsets, k, m;
    /* The placement key: the deployment id recorded on the drives (docs/EC.md,
     * "Deployment identity"). */
    uint8_t deploy_id[16];
    struct ol_ec_placement place;
    char **paths;
    struct ol_store **stores;
    struct ol_storedrive **drives;
    struct ol_eset **sets;
    struct ol_hlc hlc;
    int64_t scrub_interval_ms, scrub_per_sec;
    int64_t drive_check_ms; /* the drive monitor's period */
    struct {
        _Atomic uint64_t heal_requests, healed_objects, healed_shards, corrupt_shards;
        _Atomic uint64_t scrub_passes, scrub_objects, scrub_shards, scrub_errors;
        _Atomic uint64_t quorum_errors;
        _Atomic uint64_t monitor_heals; /* heals after a drive came back */
    } st;
    /* The admin's deployment heal in progress (GET /_openlake/admin/heal/status):
     * written by the healing fiber after each key, read by any loop. */
    struct {
        _Atomic bool running;
        _Atomic uint64_t runs, started_ms, finished_ms;
        _Atomic uint64_t objects, shards_rebuilt, corrupt, versions_removed, unrecoverable;
    } hp;
};

/* ---- the deployment ---- */

void ol_s3_ec_close(struct ol_s3_ec *ec)
{
    if (!ec)
        return;
    for (unsigned s = 0; s < ec->nsets && ec->sets; s++)
        if (ec->sets[s])
            ol_eset_destroy(ec->sets[s]);
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (ec->drives && ec->drives[i])
            ol_storedrive_destroy(ec->drives[i]);
        if (ec->stores && ec->stores[i])
            ol_store_close(ec->stores[i]);
        if (ec->paths)
            free(ec->paths[i]);
    }
    free(ec->sets);
    free(ec->drives);
    free(ec->stores);
    free(ec->paths);
    free(ec);
}

/* The deployment's id for a start where no drive has joined: the legacy id
 * when a drive holds EC data without an identity (a deployment created by an
 * older build: its objects stay where they are), else a fresh random one. */
static int pick_new_id(struct ol_s3_ec *ec, const struct ol_store_identity *ids)
{
    for (unsigned i = 0; i < ec->ndrives; i++) {
        if (!ec->stores[i] || !ids[i].has_data)
            continue;
        int r = ol_storedrive_holds_shards(ec->stores[i]);
        if (r < 0)
            return r;
        if (r == 1) {
            memcpy(ec->deploy_id, ol_storedrive_legacy_id, 16);
            fprintf(stderr, "openlake: the drives hold erasure-coded data written before drive "
                            "identities: they join with the legacy placement id (docs/EC.md)\n");
            return 0;
        }
    }
    size_t got = 0;
    for (unsigned tries = 0; got < sizeof(ec->deploy_id) && tries < 100; tries++) {
        ssize_t r = getrandom(ec->deploy_id + got, sizeof(ec->deploy_id) - got, 0);
        if (r < 0 && errno != EINTR)
            return -errno;
        got += r > 0 ? (size_t)r : 0;
    }
    return got == sizeof(ec->deploy_id) ? 0 : -EIO;
}

/* Reads the identity of every drive that opened, settles the deployment's
 * id, checks that each drive belongs at its position (refusing the start
 * with a message naming the directory when one does not) and only then
 * writes the identity to the drives that join (new, replaced, or from an
 * older build).  Nothing is written when the start is refused.  Drives
 * offline now get the same check from the monitor when they come back. */
static int ec_identify(struct ol_s3_ec *ec, char *err, size_t errlen)
{
    unsigned n = ec->ndrives;
    struct ol_store_identity *ids = calloc(n, sizeof(*ids));
    bool *join = calloc(n, sizeof(*join));
    int rc = -ENOMEM;
    if (!ids || !join)
        goto out;
    unsigned opened = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i])
            continue;
        opened++;
        rc = ol_store_identity(ec->stores[i], &ids[i]);
        if (rc < 0) {
            snprintf(err, errlen, "cannot read the identity of drive %s: %s", ec->paths[i],
                     ol_strerror(rc));
            goto out;
        }
    }
    if (opened == 0) {
        rc = -EIO;
        snprintf(err, errlen, "none of the %u drives can be opened", n);
        goto out;
    }
    /* One directory listed twice (or reached through a bind mount) would
     * take two positions on a first start: its drive id gives it away. */
    for (unsigned i = 0; i < n; i++) {
        for (unsigned j = i + 1; j < n && ec->stores[i]; j++) {
            if (ec->stores[j] && memcmp(ids[i].drive_id, ids[j].drive_id, 16) == 0) {
                rc = -EINVAL;
                snprintf(err, errlen,
                         "drives %s and %s are the same drive (one FORMAT): "
                         "list each directory once",
                         ec->paths[i], ec->paths[j]);
                goto out;
            }
        }
    }
    /* The deployment is the one most joined drives name; a drive naming
     * another is refused below. */
    unsigned best = n, best_votes = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i] || !ids[i].ec_joined)
            continue;
        unsigned votes = 0;
        for (unsigned j = 0; j < n; j++)
            votes += ec->stores[j] && ids[j].ec_joined &&
                     memcmp(ids[j].deployment_id, ids[i].deployment_id, 16) == 0;
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    bool fresh = false;
    if (best < n) {
        memcpy(ec->deploy_id, ids[best].deployment_id, 16);
    } else {
        fresh = true;
        rc = pick_new_id(ec, ids);
        if (rc < 0) {
            snprintf(err, errlen, "cannot choose a deployment id: %s", ol_strerror(rc));
            goto out;
        }
    }
    struct ol_storedrive_member m = {.ndrives = n, .k = (uint8_t)ec->k, .m = (uint8_t)ec->m};
    memcpy(m.deployment_id, ec->deploy_id, 16);
    for (unsigned i = 0; i < n; i++) {
        if (!ec->stores[i])
            continue;
        m.index = i;
        rc = ol_storedrive_admit(ec->stores[i], ec->paths[i], &m, err, errlen);
        if (rc < 0)
            goto out;
        join[i] = rc == 1;
    }
    for (unsigned i = 0; i < n; i++) {
        m.index = i;
        if (join[i]) {
            rc = ol_storedrive_join(ec->stores[i], &m);
            if (rc < 0) {
                snprintf(err, errlen, "cannot write the identity of drive %s: %s", ec->paths[i],
                         ol_strerror(rc));
                goto out;
            }
            /* A drive joining a deployment that exists is new or replaced:
             * say so, since its shards come back only with a heal. */
            if (!fresh)
                fprintf(stderr,
                        "openlake: drive %s joins the deployment as drive %u of %u "
                        "(`openlake admin heal` rebuilds its shards)\n",
                        ec->paths[i], i + 1, n);
        }
        ol_storedrive_set_member(ec->drives[i], &m);
    }
    rc = 0;
out:
    free(join);
    free(ids);
    return rc;
}

int ol_s3_ec_open(const struct ol_cfg *cfg, const char *const *dirs, unsigned n,
                  const struct ol_store_opts *so, struct ol_s3_ec **out, char *err,
                  size_t errlen)
{
    struct ol_s3_ec *ec = calloc(1, sizeof(*ec));
    int rc = -ENOMEM;
    if (!ec)
        return rc;
    ec->ndrives = n;
    /* The geometry first (the key does not change it); the placement is set
     * up again with the deployment's id once the drives have told it. */
    rc = ol_ec_placement_init(&ec->place, n, (unsigned)cfg->ec_data, (unsigned)cfg->ec_parity,
                              ol_storedrive_legacy_id);
    if (rc < 0) {
        snprintf(err, errlen, "cannot group %u drives into erasure sets with ec_data %" PRId64
                 " and ec_parity %" PRId64 " (k+m must divide the drive count)", n,
                 cfg->ec_data, cfg->ec_parity);
        goto fail;
    }
    ec->k = ec->place.k;
    ec->m = ec->place.m;
    ec->nsets = ec->place.nsets;
    ec->scrub_interval_ms = cfg->scrub_interval_ms;
    ec->scrub_per_sec = cfg->scrub_objects_per_sec;
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    ol_hlc_init(&ec->hlc, 1, nonce, NULL, NULL);
    ec->paths = calloc(n, sizeof(*ec->paths));
    ec->stores = calloc(n, sizeof(*ec->stores));
    ec->drives = calloc(n, sizeof(*ec->drives));
    ec->sets = calloc(ec->nsets, sizeof(*ec->sets));
    rc = -ENOMEM;
    if (!ec->paths || !ec->stores || !ec->drives || !ec->sets)
        goto fail;
    struct ol_storedrive_policy pol;
    ol_storedrive_policy_default(&pol);
    pol.fail_after = (unsigned)cfg->ec_drive_fail_after;
    pol.backoff_max_ms = (unsigned)cfg->ec_drive_backoff_max_ms;
    ec->drive_check_ms = cfg->ec_drive_check_ms;
    for (unsigned i = 0; i < n; i++) {
        ec->paths[i] = strdup(dirs[i]);
        if (!ec->paths[i]) {
            rc = -ENOMEM;
            goto fail;
        }
        if (mkdir(dirs[i], 0755) != 0 && errno != EEXIST) {
            rc = -errno;
            snprintf(err, errlen, "cannot create %s: %s", dirs[i], strerror(-rc));
            goto fail;
        }
        /* A drive that cannot be opened (failed, read-only, not a
         * directory) starts OFFLINE: the sets serve without it while they
         * have enough drives, and the drive monitor opens it once it works. */
        int orc = ol_store_open(&ec->stores[i], dirs[i], so);
        if (orc == -EBUSY) {
            /* Locked: by this start (the directory is listed twice) or by
             * another process.  Starting it offline would look like a dead
             * drive and heal onto a directory someone else writes. */
            ec->stores[i] = NULL;
            rc = orc;
            snprintf(err, errlen,
                     "drive %s is in use: it is listed twice, or another OpenLake process "
                     "has it open",
                     dirs[i]);
            goto fail;
        }
        if (orc < 0) {
            ec->stores[i] = NULL;
            fprintf(stderr, "openlake: drive %s cannot be opened (%s): starting it offline\n",
                    dirs[i], ol_strerror(orc));
        }
        rc = ol_storedrive_create(ec->stores[i], &ec->drives[i]);
        if (rc == 0)
            ol_storedrive_set_policy(ec->drives[i], &pol);
        if (rc == 0)
            rc = ol_storedrive_set_path(ec->drives[i], dirs[i], so);
        if (rc == 0 && orc < 0)
            ol_storedrive_set_failed(ec->drives[i], orc);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the drive %s: %s", dirs[i], ol_strerror(rc));
            goto fail;
        }
    }
    rc = ec_identify(ec, err, errlen);
    if (rc < 0)
        goto fail;
    rc = ol_ec_placement_init(&ec->place, n, ec->k, ec->m, ec->deploy_id);
    OL_ASSERT(rc == 0 && ec->place.nsets == ec->nsets);
    for (unsigned s = 0; s < ec->nsets; s++) {
        struct ol_drive drv[OL_EC_MAX_UNITS];
        unsigned size = ec->k + ec->m;
        for (unsigned j = 0; j < size; j++)
            drv[j] = ol_storedrive_drive(ec->drives[s * size + j]);
        struct ol_eset_cfg c;
        ol_eset_cfg_default(&c);
        c.k = ec->k;
        c.m = ec->m;
        c.drives = drv;
        c.hlc = &ec->hlc;
        c.read_timeout_ms = (unsigned)cfg->ec_read_timeout_ms;
        memcpy(c.deployment_id, ec->deploy_id, 16);
        rc = ol_eset_create(&c, &ec->sets[s]);
        if (rc < 0) {
            snprintf(err, errlen, "cannot create erasure set %u: %s", s, ol_strerror(rc));
            goto fail;
        }
    }
    *out = ec;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s", ol_strerror(rc));
    ol_s3_ec_close(ec);
    return rc;
}

void ol_s3_ec_describe(const struct ol_s3_ec *ec, char *buf, size_t cap)
{
    char id[17];
    for (unsigned i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", ec->deploy_id[i]);
    snprintf(buf, cap, "%u drives, %u erasure set%s of %u+%u, deployment %s", ec->ndrives,
             ec->nsets, ec->nsets == 1 ? "" : "s", ec->k, ec->m, id);
}

static struct ol_eset *set_of(struct ol_s3_ec *ec, const char *bucket, const char *key,
                              size_t klen)
{
    if (ec->nsets == 1)
        return ec->sets[0];
    struct ol_ec_target t;
    ol_ec_place(&ec->place, bucket, key, klen, &t);
    return ec->sets[t.set];
}

struct ol_eset *ol_s3_ec_set_of(struct ol_s3_ec *ec, const char *bucket, const char *key,
                                size_t klen)
{
    return set_of(ec, bucket, key, klen);
}

unsigned ol_s3_ec_nsets(const struct ol_s3_ec *ec)
{
    return ec->nsets;
}

struct ol_eset *ol_s3_ec_set(struct ol_s3_ec *ec, unsigned i)
{
    OL_ASSERT(i < ec->nsets);
    return ec->sets[i];
}

/* ---- errors ---- */

static int ec_error(struct ol_s3_req *r, int rc)
{
    /* A body that stalled or came slower than min_body_rate_bytes_per_sec
     * times out in the client's connection, not on a drive: RequestTimeout,
     * not SlowDown. */
    if (rc == -ETIMEDOUT && r->conn && ol_http_body_failed(r->conn))
        return ol_s3_error_from(r, rc);
    switch (-rc) {
    case OL_EQUORUM:
    case EIO:
    case EAGAIN:
    case ETIMEDOUT:
        atomic_fetch_add(&r->ctx->ec->st.quorum_errors, 1);
        return ol_s3_error(r, OL_S3_SlowDown,
                           "Too few drives of the erasure set are available; retry later.");
    case EBUSY:
        /* The body memory budget (core/buf.h) stayed short: back off. */
        return ol_s3_error(r, OL_S3_SlowDown,
                           "The server is short of memory for request bodies; retry later.");
    case ENOSPC:
    case EDQUOT:
        /* 507 XOpenLakeStorageFull, as on one drive (errors.c says why):
         * SlowDown would have every SDK retry the whole upload. */
        atomic_fetch_add(&r->ctx->ec->st.quorum_errors, 1);
        return ol_s3_error(r, OL_S3_XOpenLakeStorageFull,
                           "Too few drives of the erasure set have free space to store "
                           "the object; nothing was stored.");
    case OL_ENOKEY:
        return ol_s3_error(r, OL_S3_NoSuchKey, "The specified key does not exist.");
    default:
        return ol_s3_error_from(r, rc);
    }
}

int ol_s3_ec_error(struct ol_s3_req *r, int rc)
{
    return ec_error(r, rc);
}

static int not_implemented(struct ol_s3_req *r)
{
    return ol_s3_error(r, OL_S3_NotImplemented,
                       "This operation is not implemented with erasure-coded drives yet.");
}

/* ---- buckets ---- */

/* A bucket exists when at least half of the drives that answer hold it (a
 * replaced, empty drive lacks it until a heal).  1, 0, or -OL_EQUORUM. */
static int bucket_exists(struct ol_s3_ec *ec, const char *bucket)
{
    unsigned answered = 0, have = 0;
    for (unsigned i = 0; i < ec->ndrives; i++) {
        struct ol_store *st = ol_storedrive_store(ec->drives[i]);
        if (ol_storedrive_offline(ec->drives[i]) || !st)
            continue;
        struct ol_bucket_info bi;
        int rc = ol_store_bucket_get(st, bucket, &bi);
        if (rc == 0 || rc == -OL_ENOBUCKET) {
            answered++;
            have += rc == 0;
        }
    }
    if (answered < (ec->ndrives + 1) / 2)
        return -OL_EQUORUM;
    return have > 0 && 2 * have >= answered;
}

int ol_s3_ec_bucket_exists(struct ol_s3_ec *ec, const char *bucket)
{
    return bucket_exists(ec, bucket);
}

/* Creates the bucket on every drive that lacks it; returns how many hold it. */
static unsigned bucket_spread(struct ol_s3_ec *ec, const char *bucket, int64_t now)
{
    unsigned ok = 0;
    for (unsigned i = 0; i < ec->ndrives; i++)
        ok += ol_storedrive_bucket_create(ec->drives[i], bucket, now) == 0;
    return ok;
}

static int ec_create_bucket(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    if (!ol_s3_bucket_name_valid(r->bucket))
        return ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
    int ex = bucket_exists(ec, r->bucket);
    if (ex < 0)
        return ec_error(r, ex);
    if (ex == 1)
        return ol_s3_error_from(r, -OL_EBUCKETEXISTS);
    if (bucket_spread(ec, r->bucket, r->now_ns) < ec->ndrives / 2 + 1)
        return ec_error(r, -OL_EQUORUM);
    ol_s3_settings_changed();
    char loc[80];
    snprintf(loc, sizeof(loc), "/%s", r->bucket);
    struct ol_http_hdr h[] = {{"Location", loc}};
    return ol_s3_send_empty(r, 200, h, 1);
}

static int ec_head_bucket(struct ol_s3_req *r)
{
    int ex = bucket_exists(r->ctx->ec, r->bucket);
    if (ex < 0)
        return ec_error(r, ex);
    if (ex == 0)
        return ol_s3_error_from(r, -OL_ENOBUCKET);
    return ol_s3_send_empty(r, 200, NULL, 0);
}

static int first_key(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)key;
    (void)klen;
    (void)o;
    *(bool *)ctx = true;
    return 1;
}

static int ec_delete_bucket(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    int ex = bucket_exists(ec, r->bucket);
    if (ex < 0)
        return ec_error(r, ex);
    if (ex == 0)
        return ol_s3_error_from(r, -OL_ENOBUCKET);
    for (unsigned s = 0; s < ec->nsets; s++) {
        bool any = false;
        int rc = ol_eset_list(ec->sets[s], r->bucket, "", 0, 1, first_key, &any);
        if (rc < 0)
            return ec_error(r, rc);
        if (any)
            return ol_s3_error_from(r, -OL_EBUCKETNOTEMPTY);
    }
    unsigned ok = 0;
    for (unsigned i = 0; i < ec->ndrives; i++)
        ok += ol_storedrive_bucket_delete(ec->drives[i], r->bucket) == 0;
    if (ok < ec->ndrives / 2 + 1)
        return ec_error(r, -OL_EQUORUM);
    ol_s3_settings_changed(); /* cached "no settings" answers (cors.c) go stale */
    return ol_s3_send_empty(r, 204, NULL, 0);
}

struct bucket_acc {
    char (*names)[64];
    unsigned *votes;
    int64_t *ctime;
    unsigned n, cap;
};

static int acc_bucket(struct bucket_acc *a, const char *name, int64_t ctime)
{
    for (unsigned i = 0; i < a->n; i++)
        if (strcmp(a->names[i], name) == 0) {
            a->votes[i]++;
            return 0;
        }
    if (a->n == a->cap) {
        unsigned cap = a->cap ? a->cap * 2 : 64;
        if (cap > EC_MAX_BUCKETS)
            return 1;
        void *nn = realloc(a->names, cap * sizeof(*a->names));
        if (nn)
            a->names = nn;
        void *nv = realloc(a->votes, cap * sizeof(*a->votes));
        if (nv)
            a->votes = nv;
        void *nc = realloc(a->ctime, cap * sizeof(*a->ctime));
        if (nc)
            a->ctime = nc;
        if (!nn || !nv || !nc)
            return 1;
        a->cap = cap;
    }
    snprintf(a->names[a->n], 64, "%s", name);
    a->votes[a->n] = 1;
    a->ctime[a->n] = ctime;
    a->n++;
    return 0;
}

static int acc_cb(void *ctx, const struct ol_bucket_info *b)
{
    return acc_bucket(ctx, b->name, b->ctime_ns);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The buckets held by at least half of the answering drives, sorted. */
static int bucket_union(struct ol_s3_ec *ec, struct bucket_acc *a, unsigned *answered)
{
    memset(a, 0, sizeof(*a));
    *answered = 0;
    for (unsigned i = 0; i < ec->ndrives; i++) {
        struct ol_store *st = ol_storedrive_store(ec->drives[i]);
        if (ol_storedrive_offline(ec->drives[i]) || !st)
            continue;
        if (ol_store_bucket_list(st, acc_cb, a) >= 0)
            (*answered)++;
    }
    if (*answered < (ec->ndrives + 1) / 2)
        return -OL_EQUORUM;
    unsigned w = 0;
    for (unsigned i = 0; i < a->n; i++) {
        if (2 * a->votes[i] < *answered)
            continue;
        memmove(a->names[w], a->names[i], 64);
        a->ctime[w] = a->ctime[i];
        w++;
    }
    a->n = w;
    /* The creation times travel with their names only roughly after this
     * sort: they are informational (CreationDate). */
    if (a->n > 1) /* names is NULL when no drive knows a bucket */
        qsort(a->names, a->n, sizeof(*a->names), name_cmp);
    return 0;
}

static void acc_free(struct bucket_acc *a)
{
    free(a->names);
    free(a->votes);
    free(a->ctime);
}

static int ec_list_buckets(struct ol_s3_req *r)
{
    struct bucket_acc a;
    unsigned answered;
    int rc = bucket_union(r->ctx->ec, &a, &answered);
    if (rc < 0) {
        acc_free(&a);
        return ec_error(r, rc);
    }
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "ListAllMyBucketsResult");
    ol_xml_open(&x, "Owner");
    ol_xml_str(&x, "ID", r->access_key ? r->access_key : "anonymous");
    ol_xml_str(&x, "DisplayName", r->access_key ? r->access_key : "anonymous");
    ol_xml_close(&x);
    ol_xml_open(&x, "Buckets");
    for (unsigned i = 0; i < a.n; i++) {
        char d[32];
        ol_s3_iso_date(a.ctime[i] ? a.ctime[i] : r->now_ns, d);
        ol_xml_open(&x, "Bucket");
        ol_xml_str(&x, "Name", a.names[i]);
        ol_xml_str(&x, "CreationDate", d);
        ol_xml_close(&x);
    }
    ol_xml_close(&x);
    ol_xml_end_doc(&x);
    rc = x.failed ? ol_s3_error_from(r, -ENOMEM) : ol_s3_send_xml(r, 200, &x);
    ol_xml_free(&x);
    acc_free(&a);
    return rc;
}

/* ---- objects ---- */

static void hex16(const uint8_t *b, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[32] = 0;
}

/* Splits the stored etag field into the S3 ETag, the metadata length and,
 * for a multipart manifest ("<etag>:<meta length>:<object size>",
 * s3/ec_multipart.h), the object's size (UINT64_MAX for a plain object). */
static void etag_split(const char *field, char etag[64], uint64_t *meta_len,
                       uint64_t *manifest_size)
{
    const char *c = strchr(field, ':');
    size_t n = c ? (size_t)(c - field) : strlen(field);
    if (n > 63)
        n = 63;
    memcpy(etag, field, n);
    etag[n] = 0;
    char *end = NULL;
    *meta_len = c ? strtoull(c + 1, &end, 10) : 0;
    *manifest_size = c && end && *end == ':' ? strtoull(end + 1, NULL, 10) : UINT64_MAX;
}

void ol_s3_ec_etag_split(const char *field, char etag[64], uint64_t *meta_len,
                         uint64_t *manifest_size)
{
    etag_split(field, etag, meta_len, manifest_size);
}

/* The store writer of each shard buffers up to 1 MiB (OL_IO_BUF_BYTES) and
 * keeps up to two more in flight to the disk (its WRITER_INFLIGHT): what the
 * body memory budget reserves per drive for a large shard. */
#define EC_WRITER_BUF_BYTES (1u << 20)
#define EC_WRITER_BUFS 3u
/* The first body bytes are read into this much stack before anything big is
 * reserved or allocated: a client that sends nothing holds nothing. */
#define EC_FIRST_BYTES 4096u

static uint64_t page_up(uint64_t n)
{
    return (n + 4095) / 4096 * 4096;
}

int ol_s3_ec_receive_put(struct ol_s3_req *r, struct ol_eset_put *p, struct ol_eset *es,
                         const void *prefix, size_t plen, uint64_t len, uint8_t md5[16])
{
    struct ol_md5 ctx;
    ol_md5_init(&ctx);
    uint8_t first[EC_FIRST_BYTES];
    uint64_t got = 0;
    int rc = 0;
    ssize_t n = 0;
    ol_eset_put_expect(p, plen + len);
    if (len > 0) {
        /* Waits for the first bytes with nothing big held. */
        n = ol_s3_body_read(r, first, len < sizeof(first) ? (size_t)len : sizeof(first));
        if (n <= 0)
            return n < 0 ? (int)n : -OL_EINCOMPLETE;
    }
    /* The body has begun: reserve what this PUT will hold at most (sized to
     * it), or wait for others to finish, or give up with -EBUSY (503). */
    uint64_t need = ol_eset_put_buffer_bytes(es, (int64_t)(plen + len), EC_WRITER_BUF_BYTES,
                                             EC_WRITER_BUFS);
    rc = ol_bodymem_reserve(need, (unsigned)r->ctx->cfg->body_memory_wait_ms);
    if (rc < 0)
        return rc;
    ol_eset_put_hold(p, need);
    if (plen > 0)
        rc = ol_eset_put_write(p, prefix, plen);
    if (rc == 0 && n > 0) {
        ol_md5_update(&ctx, first, (size_t)n);
        rc = ol_eset_put_write(p, first, (size_t)n);
        got = (uint64_t)n;
    }
    /* The rest goes straight into the stripe buffer (no receive buffer, no
     * copy).  Each round reads at least one byte or ends the loop. */
    while (rc == 0 && got < len) {
        uint8_t *room;
        size_t cap;
        rc = ol_eset_put_room(p, &room, &cap);
        if (rc < 0)
            break;
        size_t want = len - got < cap ? (size_t)(len - got) : cap;
        if (want > EC_CHUNK_BYTES)
            want = EC_CHUNK_BYTES;
        n = ol_s3_body_read(r, room, want);
        if (n <= 0) {
            rc = n < 0 ? (int)n : -OL_EINCOMPLETE;
            break;
        }
        /* Hashed before put_advance, which may encode and reuse the stripe. */
        ol_md5_update(&ctx, room, (size_t)n);
        rc = ol_eset_put_advance(p, (size_t)n);
        got += (uint64_t)n;
    }
    if (rc == 0) {
        /* The end of an aws-chunked body (and its signature) is checked by
         * one more read. */
        n = ol_s3_body_read(r, first, 1);
        if (n > 0)
            rc = -OL_EINCOMPLETE;
        else if (n < 0)
            rc = (int)n;
    }
    ol_md5_final(&ctx, md5);
    if (rc == 0)
        rc = ol_s3_check_content_md5(r, md5);
    return rc;
}

int ol_s3_ec_receive(struct ol_s3_req *r, struct ol_eset_put *p, struct ol_eset *es, uint64_t len,
                     uint8_t md5[16])
{
    return ol_s3_ec_receive_put(r, p, es, NULL, 0, len, md5);
}

static int ec_put_object(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    if (ol_s3_header(r, "if-none-match") || ol_s3_header(r, "if-match") ||
        ol_s3_header(r, "x-amz-tagging") || ol_s3_header(r, "x-amz-checksum-algorithm") ||
        ol_s3_header(r, "x-amz-sdk-checksum-algorithm") || ol_s3_header(r, "x-amz-trailer"))
        return not_implemented(r);
    int64_t len = ol_s3_body_length(r);
    if (len < 0)
        return ol_s3_error(r, OL_S3_MissingContentLength,
                           "You must provide the Content-Length HTTP header.");
    if (len > r->ctx->cfg->max_object_bytes)
        return ol_s3_error(r, OL_S3_EntityTooLarge,
                           "Your proposed upload exceeds the maximum allowed size.");
    int ex = bucket_exists(ec, r->bucket);
    if (ex <= 0) {
        ol_http_set_close(r->conn);
        return ex < 0 ? ec_error(r, ex) : ol_s3_error_from(r, -OL_ENOBUCKET);
    }
    uint8_t *meta = malloc(OL_S3_META_MAX);
    struct ol_eset_put *p = NULL;
    struct ol_s3_ec_manifest *prev = NULL;
    struct ol_eset *es = set_of(ec, r->bucket, r->key, r->key_len);
    int rc = -ENOMEM;
    if (!meta)
        goto fail;
    int ml = ol_s3_meta_encode(r, meta, OL_S3_META_MAX);
    if (ml < 0) {
        ol_http_set_close(r->conn);
        rc = ol_s3_meta_error(r, ml);
        goto out;
    }
    /* A multipart object being replaced: its parts are freed once the new
     * version is in (s3/ec_multipart.h). */
    (void)ol_s3_ec_manifest_prev(ec, r->bucket, r->key, r->key_len, &prev);
    rc = ol_eset_put_begin(es, r->bucket, r->key, r->key_len, &p);
    if (rc < 0)
        goto fail;
    /* The metadata blob goes in with the first body bytes, once the body
     * memory is reserved. */
    uint8_t dig[16];
    rc = ol_s3_ec_receive_put(r, p, es, meta, ml > 0 ? (size_t)ml : 0, (uint64_t)len, dig);
    if (rc < 0) {
        ol_eset_put_abort(p);
        p = NULL;
        ol_http_set_close(r->conn);
        goto fail;
    }
    char etag[64], field[80];
    hex16(dig, etag);
    if (ml > 0)
        snprintf(field, sizeof(field), "%s:%d", etag, ml);
    else
        snprintf(field, sizeof(field), "%s", etag);
    struct ol_eset_obj o;
    rc = ol_eset_put_commit(p, field, r->now_ns, &o);
    p = NULL;
    if (rc < 0)
        goto fail;
    ol_s3_ec_manifest_release(ec, prev);
    prev = NULL;
    char q[72];
    snprintf(q, sizeof(q), "\"%s\"", etag);
    struct ol_http_hdr h[] = {{"ETag", q}};
    rc = ol_s3_send_empty(r, 200, h, 1);
    goto out;
fail:
    if (p)
        ol_eset_put_abort(p);
    if (!ol_http_body_done(r->conn))
        ol_http_set_close(r->conn);
    rc = ec_error(r, rc);
out:
    ol_s3_ec_manifest_free(prev);
    free(meta);
    return rc;
}

static int ec_get_object(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    bool any_override, refused;
    int vrc = ol_s3_response_overrides_check(r, &any_override, &refused);
    if (refused)
        return vrc;
    if (ol_s3_has_param(r, "versionId") || ol_s3_has_param(r, "partNumber"))
        return not_implemented(r);
    for (unsigned i = 0; i < r->nparams; i++)
        if (strncmp(r->params[i].name, "response-", 9) == 0)
            return not_implemented(r);
    struct ol_eset *es = set_of(ec, r->bucket, r->key, r->key_len);
    struct ol_eset_obj o;
    uint8_t *meta = NULL, *buf = NULL;
    struct ol_http_hdr *h = NULL;
    int rc = ol_eset_stat(es, r->bucket, r->key, r->key_len, NULL, &o);
    if (rc == -OL_ENOKEY) {
        int ex = bucket_exists(ec, r->bucket);
        if (ex == 0)
            return ol_s3_error_from(r, -OL_ENOBUCKET);
    }
    if (rc < 0)
        return ec_error(r, rc);
    char etag[64];
    uint64_t ml, msize;
    etag_split(o.etag, etag, &ml, &msize);
    if (ml > o.size || ml > OL_S3_META_MAX)
        return ec_error(r, -OL_ECORRUPT);
    /* A completed multipart upload is a manifest of its parts. */
    uint64_t size = msize != UINT64_MAX ? msize : o.size - ml;
    struct ol_s3_ec_manifest *mf = NULL;
    struct ol_obj_info info = {.size = size, .mtime_ns = o.mtime_ns};
    memcpy(info.etag, etag, sizeof(info.etag));
    char qetag[72], lm[32], crange[96];
    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    ol_s3_http_date(o.mtime_ns, lm);
    int cond = ol_s3_read_conditions(r, &info);
    if (cond == 304) {
        struct ol_http_hdr nm[] = {{"ETag", qetag}, {"Last-Modified", lm}};
        return ol_s3_send_empty(r, 304, nm, 2);
    }
    if (cond == 412)
        return ol_s3_error(r, OL_S3_PreconditionFailed,
                           "At least one of the pre-conditions you specified did not hold");
    uint64_t start = 0, end = size ? size - 1 : 0;
    int ranged = ol_s3_parse_range(ol_s3_header(r, "range"), size, &start, &end);
    if (ranged < 0) {
        snprintf(crange, sizeof(crange), "bytes */%" PRIu64, size);
        struct ol_http_hdr cr[] = {{"Content-Range", crange}};
        return ol_s3_send_error_hdrs(r, 416, "InvalidRange",
                                     "The requested range is not satisfiable", cr, 1);
    }
    uint64_t len = size == 0 ? 0 : end - start + 1;
    /* The send buffer is sized to what is sent (a range or a small object
     * needs less than a piece), and reserved from the body memory budget
     * with what the set's read of a piece holds (the drives' spans, twice
     * for a degraded read): a crowd of stalled GETs holds at most the
     * budget, and a GET that cannot get its share waits, then gets 503
     * before its head is sent. */
    size_t cap = 0;
    uint64_t reserved = 0;
    if (len > 0 && !r->http->is_head) {
        cap = len < EC_CHUNK_BYTES ? (size_t)len : EC_CHUNK_BYTES;
        reserved = 3 * page_up(cap);
        rc = ol_bodymem_reserve(reserved, (unsigned)r->ctx->cfg->body_memory_wait_ms);
        if (rc < 0) {
            reserved = 0;
            rc = ec_error(r, rc);
            goto out;
        }
        buf = ol_buf_alloc(cap);
    }
    meta = malloc(ml + 1);
    if (!meta || (cap > 0 && !buf)) {
        rc = ec_error(r, -ENOMEM);
        goto out;
    }
    /* The metadata, and the first piece before the headers go out, so that
     * a read that fails is a clean error rather than a cut-off body.  Every
     * read names the version stat resolved: never a mix of versions. */
    if (ml > 0)
        rc = ol_eset_read(es, r->bucket, r->key, r->key_len, &o.vid, 0, ml, meta, NULL);
    if (rc == 0 && msize != UINT64_MAX && !r->http->is_head)
        rc = ol_s3_ec_manifest_load(ec, r->bucket, r->key, r->key_len, &o, ml, &mf);
    size_t first = 0;
    if (rc == 0 && len > 0 && !r->http->is_head) {
        first = len < EC_CHUNK_BYTES ? (size_t)len : EC_CHUNK_BYTES;
        rc = mf ? ol_s3_ec_manifest_read(mf, start, first, buf)
                : ol_eset_read(es, r->bucket, r->key, r->key_len, &o.vid, ml + start, first,
                               buf, NULL);
    }
    if (rc < 0) {
        rc = ec_error(r, rc);
        goto out;
    }
    /* Room for every header: the fixed ones, each stored one (the blob's
     * size bounds their count), Content-Type and CORS. */
    size_t hcap = 8 + ol_s3_meta_count(meta, (size_t)ml) + OL_S3_CORS_MAX_HDRS;
    h = malloc(hcap * sizeof(*h));
    if (!h) {
        rc = ec_error(r, -ENOMEM);
        goto out;
    }
    size_t nh = 0;
    h[nh++] = (struct ol_http_hdr){"x-amz-request-id", r->request_id};
    h[nh++] = (struct ol_http_hdr){"ETag", qetag};
    h[nh++] = (struct ol_http_hdr){"Last-Modified", lm};
    h[nh++] = (struct ol_http_hdr){"Accept-Ranges", "bytes"};
    if (ranged > 0) {
        snprintf(crange, sizeof(crange), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start, end,
                 size);
        h[nh++] = (struct ol_http_hdr){"Content-Range", crange};
    }
    char store[OL_S3_META_MAX + 64];
    size_t first_meta = nh;
    nh += ol_s3_meta_headers(meta, (size_t)ml, h + nh, hcap - nh, store, sizeof(store));
    bool has_ct = false;
    for (size_t i = first_meta; i < nh; i++)
        has_ct |= strcasecmp(h[i].name, "content-type") == 0;
    if (!has_ct)
        h[nh++] = (struct ol_http_hdr){"Content-Type", "binary/octet-stream"};
    rc = ol_http_resp_begin(r->conn, ranged > 0 ? 206 : 200, h, nh, len);
    if (rc < 0 || r->http->is_head || len == 0)
        goto out;
    uint64_t off = start, left = len;
    size_t n = first;
    /* Each round sends one piece of at most EC_CHUNK_BYTES. */
    while (left > 0) {
        if (n == 0) {
            n = left < EC_CHUNK_BYTES ? (size_t)left : EC_CHUNK_BYTES;
            rc = mf ? ol_s3_ec_manifest_read(mf, off, n, buf)
                    : ol_eset_read(es, r->bucket, r->key, r->key_len, &o.vid, ml + off, n, buf,
                                   NULL);
            if (rc < 0) {
                /* Headers are out: cutting the connection tells the client. */
                ol_log_limited(OL_LOG_ERROR, "EC GET %s at %" PRIu64 ": %s", r->bucket, off,
                               ol_strerror(rc));
                goto out;
            }
        }
        rc = ol_http_resp_write(r->conn, buf, n);
        if (rc < 0)
            goto out;
        off += n;
        left -= n;
        n = 0;
    }
out:
    free(h);
    ol_s3_ec_manifest_free(mf);
    free(meta);
    ol_buf_free(buf, cap);
    ol_bodymem_release(reserved);
    return rc;
}

static int ec_delete_object(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    if (ol_s3_has_param(r, "versionId"))
        return not_implemented(r);
    int ex = bucket_exists(ec, r->bucket);
    if (ex <= 0)
        return ex < 0 ? ec_error(r, ex) : ol_s3_error_from(r, -OL_ENOBUCKET);
    struct ol_s3_ec_manifest *prev = NULL;
    (void)ol_s3_ec_manifest_prev(ec, r->bucket, r->key, r->key_len, &prev);
    int rc = ol_eset_delete(set_of(ec, r->bucket, r->key, r->key_len), r->bucket, r->key,
                            r->key_len);
    if (rc < 0) {
        ol_s3_ec_manifest_free(prev);
        return ec_error(r, rc);
    }
    /* After the delete, never before: a part must not go while an object
     * still refers to it. */
    ol_s3_ec_manifest_release(ec, prev);
    return ol_s3_send_empty(r, 204, NULL, 0);
}

static int ec_list_objects(struct ol_s3_req *r)
{
    int ex = bucket_exists(r->ctx->ec, r->bucket);
    if (ex <= 0)
        return ex < 0 ? ec_error(r, ex) : ol_s3_error_from(r, -OL_ENOBUCKET);
    return ol_s3_list_objects(r);
}

/* ---- dispatch ---- */

/* Sub-resources the EC handlers serve (with their own checks); any other
 * query parameter that names a sub-resource means an operation EC mode does
 * not implement. */
static bool plain_params(const struct ol_s3_req *r, bool listing)
{
    static const char *const list_ok[] = {"list-type", "prefix", "delimiter", "max-keys",
                                          "continuation-token", "start-after", "fetch-owner",
                                          "encoding-type", "marker"};
    for (size_t i = 0; i < r->nparams; i++) {
        const char *n = r->params[i].name;
        if (strncmp(n, "x-amz-", 6) == 0 || strncmp(n, "X-Amz-", 6) == 0 ||
            strncmp(n, "response-", 9) == 0 || strcmp(n, "versionId") == 0 ||
            strcmp(n, "partNumber") == 0 || strcmp(n, "x-id") == 0 ||
            strcmp(n, "AWSAccessKeyId") == 0 || strcmp(n, "Signature") == 0 ||
            strcmp(n, "Expires") == 0)
            continue; /* signatures (V4, V2), hoisted headers, the SDK's x-id hint;
                       * the handlers refuse the rest themselves */
        bool ok = false;
        for (size_t j = 0; listing && j < sizeof(list_ok) / sizeof(list_ok[0]); j++)
            ok |= strcmp(n, list_ok[j]) == 0;
        if (!ok)
            return false;
    }
    return true;
}

int ol_s3_ec_dispatch(struct ol_s3_req *r)
{
    struct ol_slice m = r->http->head.method;
#define IS(lit) (m.n == sizeof(lit) - 1 && memcmp(m.p, lit, m.n) == 0)
    bool get = IS("GET"), head = IS("HEAD"), put = IS("PUT"), del = IS("DELETE");
#undef IS
    if (!r->bucket[0]) {
        if (get || head)
            return ec_list_buckets(r);
        return ol_s3_error(r, OL_S3_MethodNotAllowed,
                           "The specified method is not allowed against this resource.");
    }
    if (!r->key) {
        if (get && ol_s3_has_param(r, "uploads"))
            return ol_s3_list_uploads(r);
        if (!plain_params(r, get))
            return not_implemented(r);
        if (put)
            return ec_create_bucket(r);
        if (head)
            return ec_head_bucket(r);
        if (del)
            return ec_delete_bucket(r);
        if (get)
            return ec_list_objects(r);
        return not_implemented(r);
    }
    bool post = m.n == 4 && memcmp(m.p, "POST", 4) == 0;
    bool upload = ol_s3_has_param(r, "uploadId");
    if (post && ol_s3_has_param(r, "uploads"))
        return ol_s3_ec_create_multipart(r);
    if (upload && !ol_s3_header(r, "x-amz-copy-source")) {
        if (put && ol_s3_has_param(r, "partNumber"))
            return ol_s3_ec_upload_part(r);
        if (post)
            return ol_s3_ec_complete_multipart(r);
        if (get)
            return ol_s3_list_parts(r);
        if (del)
            return ol_s3_ec_abort_multipart(r);
    }
    if (!plain_params(r, false))
        return not_implemented(r);
    if (put)
        return ol_s3_header(r, "x-amz-copy-source") ? not_implemented(r) : ec_put_object(r);
    if (get || head)
        return ec_get_object(r);
    if (del)
        return ec_delete_object(r);
    return not_implemented(r);
}

/* ---- the listing iterator ---- */

struct ec_ent {
    uint32_t klen;
    uint64_t size;
    int64_t mtime_ns;
    char etag[64];
    char key[OL_DRIVE_MAX_KEY];
};

struct ol_s3_ec_iter {
    struct ol_s3_ec *ec;
    char bucket[64];
    struct ec_ent *ents; /* EC_ITER_PAGE per set */
    unsigned n, pos;
    bool done;
    /* Keys strictly after cur are next; with floor set, keys below floor
     * are skipped (an inclusive start). */
    char cur[OL_DRIVE_MAX_KEY];
    size_t cur_len;
    char floor[OL_DRIVE_MAX_KEY];
    size_t floor_len;
    struct ec_ent *tmp;
    unsigned ntmp;
};

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an < bn ? -1 : an > bn);
}

static int ent_cmp(const void *a, const void *b)
{
    const struct ec_ent *x = a, *y = b;
    return bytes_cmp(x->key, x->klen, y->key, y->klen);
}

static int iter_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    struct ol_s3_ec_iter *it = ctx;
    if (klen > OL_DRIVE_MAX_KEY)
        return 0;
    struct ec_ent *e = &it->tmp[it->ntmp++];
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    uint64_t ml, msize;
    etag_split(o->etag, e->etag, &ml, &msize);
    e->size = msize != UINT64_MAX ? msize : o->size >= ml ? o->size - ml : 0;
    e->mtime_ns = o->mtime_ns;
    return it->ntmp >= EC_ITER_PAGE * it->ec->nsets ? 1 : 0;
}

/* Fills the page with the next keys of every set, merged. */
static int iter_fill(struct ol_s3_ec_iter *it)
{
    it->n = it->pos = 0;
    it->ntmp = 0;
    const struct ec_ent *bound = NULL; /* the smallest last key of a full set page */
    for (unsigned s = 0; s < it->ec->nsets; s++) {
        unsigned before = it->ntmp;
        int rc = ol_eset_list(it->ec->sets[s], it->bucket, it->cur, it->cur_len, EC_ITER_PAGE,
                              iter_cb, it);
        if (rc < 0)
            return rc;
        if (it->ntmp - before == EC_ITER_PAGE) {
            const struct ec_ent *last = &it->tmp[it->ntmp - 1];
            if (!bound || ent_cmp(last, bound) < 0)
                bound = last;
        }
    }
    struct ec_ent b;
    if (bound)
        b = *bound;
    qsort(it->tmp, it->ntmp, sizeof(*it->tmp), ent_cmp);
    for (unsigned i = 0; i < it->ntmp; i++) {
        if (bound && ent_cmp(&it->tmp[i], &b) > 0)
            break;
        it->ents[it->n++] = it->tmp[i];
    }
    it->done = !bound;
    if (it->n > 0) {
        const struct ec_ent *l = &it->ents[it->n - 1];
        memcpy(it->cur, l->key, l->klen);
        it->cur_len = l->klen;
    }
    return 0;
}

static void iter_position(struct ol_s3_ec_iter *it, const char *from, size_t from_len,
                          bool inclusive)
{
    it->n = it->pos = 0;
    it->done = false;
    it->floor_len = 0;
    if (from_len > OL_DRIVE_MAX_KEY)
        from_len = OL_DRIVE_MAX_KEY;
    /* Keys that begin with NUL are the multipart namespace (uploads and
     * parts, s3/ec_multipart.h); S3 keys cannot hold NUL, so every listing
     * starts after all of them. */
    if (from_len == 0 || from[0] == 0) {
        memcpy(it->cur, OL_S3_EC_MP_LIST_FLOOR, 2);
        it->cur_len = 2;
        return;
    }
    if (!inclusive) {
        memcpy(it->cur, from, from_len);
        it->cur_len = from_len;
        return;
    }
    /* Keys >= from: list after from without its last byte and skip what
     * sorts below from. */
    memcpy(it->cur, from, from_len - 1);
    it->cur_len = from_len - 1;
    memcpy(it->floor, from, from_len);
    it->floor_len = from_len;
}

int ol_s3_ec_iter_open(struct ol_s3_ec *ec, const char *bucket, const char *from,
                       size_t from_len, bool inclusive, struct ol_s3_ec_iter **out)
{
    struct ol_s3_ec_iter *it = calloc(1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    it->ec = ec;
    snprintf(it->bucket, sizeof(it->bucket), "%s", bucket);
    it->ents = malloc(sizeof(*it->ents) * EC_ITER_PAGE * ec->nsets);
    it->tmp = malloc(sizeof(*it->tmp) * EC_ITER_PAGE * ec->nsets);
    if (!it->ents || !it->tmp) {
        ol_s3_ec_iter_close(it);
        return -ENOMEM;
    }
    iter_position(it, from ? from : "", from ? from_len : 0, inclusive);
    *out = it;
    return 0;
}

int ol_s3_ec_iter_next(struct ol_s3_ec_iter *it, const char **key, size_t *key_len,
                       struct ol_obj_info *info)
{
    /* Each round returns an entry, fills a page, or ends. */
    for (unsigned guard = 0; guard < (1u << 24); guard++) {
        if (it->pos == it->n) {
            if (it->done)
                return 1;
            int rc = iter_fill(it);
            if (rc < 0)
                return rc;
            if (it->n == 0)
                return 1;
        }
        const struct ec_ent *e = &it->ents[it->pos++];
        if (it->floor_len && bytes_cmp(e->key, e->klen, it->floor, it->floor_len) < 0)
            continue;
        memset(info, 0, sizeof(*info));
        info->size = e->size;
        info->mtime_ns = e->mtime_ns;
        memcpy(info->etag, e->etag, sizeof(info->etag));
        *key = e->key;
        *key_len = e->klen;
        return 0;
    }
    return -ELOOP;
}

int ol_s3_ec_iter_seek(struct ol_s3_ec_iter *it, const char *from, size_t from_len,
                       bool inclusive)
{
    iter_position(it, from, from_len, inclusive);
    return 0;
}

void ol_s3_ec_iter_close(struct ol_s3_ec_iter *it)
{
    if (!it)
        return;
    free(it->ents);
    free(it->tmp);
    free(it);
}

/* ---- healing, the scrubber, administration ---- */

static void stats_add(struct ol_eset_heal_stats *a, const struct ol_eset_heal_stats *b)
{
    a->objects += b->objects;
    a->shards_rebuilt += b->shards_rebuilt;
    a->corrupt += b->corrupt;
    a->marked_complete += b->marked_complete;
    a->versions_removed += b->versions_removed;
    a->unrecoverable += b->unrecoverable;
}

struct key_page {
    unsigned n;
    char after[OL_DRIVE_MAX_KEY];
    size_t alen;
    char (*keys)[OL_DRIVE_MAX_KEY];
    uint32_t *lens;
};

static int page_cb(void *ctx, const char *key, size_t klen, const struct ol_eset_obj *o)
{
    (void)o;
    struct key_page *p = ctx;
    if (klen > OL_DRIVE_MAX_KEY)
        return 0;
    memcpy(p->keys[p->n], key, klen);
    p->lens[p->n++] = (uint32_t)klen;
    return 0;
}

/* Heals every listed key of a bucket in one set, pausing pause_ms between
 * keys (0: none).  Stops early when stop says so. */
static int heal_bucket_set(struct ol_s3_ec *ec, struct ol_eset *es, const char *bucket,
                           unsigned pause_ms, const struct ol_loop *stop,
                           struct ol_eset_heal_stats *hs)
{
    struct key_page p = {0};
    p.keys = malloc(sizeof(*p.keys) * 32);
    p.lens = malloc(sizeof(*p.lens) * 32);
    int rc = 0;
    if (!p.keys || !p.lens) {
        rc = -ENOMEM;
        goto out;
    }
    /* Each round heals one page of up to 32 keys. */
    for (unsigned round = 0; round < (1u << 26); round++) {
        p.n = 0;
        rc = ol_eset_list(es, bucket, p.after, p.alen, 32, page_cb, &p);
        if (rc < 0)
            goto out;
        for (unsigned i = 0; i < p.n; i++) {
            struct ol_eset_heal_stats one = {0};
            int e = ol_eset_heal_object(es, bucket, p.keys[i], p.lens[i], &one);
            if (e < 0 && e != -OL_ENOKEY)
                atomic_fetch_add(&ec->st.scrub_errors, 1);
            stats_add(hs, &one);
            if (pause_ms)
                ol_io_sleep_ms(pause_ms);
            if (stop && ol_loop_stopping(stop))
                goto out;
        }
        if (p.n < 32)
            break;
        memcpy(p.after, p.keys[p.n - 1], p.lens[p.n - 1]);
        p.alen = p.lens[p.n - 1];
    }
    rc = 0;
out:
    free(p.keys);
    free(p.lens);
    return rc;
}

int ol_s3_ec_each_bucket(struct ol_s3_ec *ec, int (*fn)(void *ctx, const char *bucket), void *ctx)
{
    struct bucket_acc a;
    unsigned answered;
    int rc = bucket_union(ec, &a, &answered);
    for (unsigned i = 0; rc == 0 && i < a.n; i++)
        rc = fn(ctx, a.names[i]);
    acc_free(&a);
    return rc;
}

/* Recreates every bucket of the deployment on drives that lack it. */
static void spread_buckets(struct ol_s3_ec *ec, int64_t now)
{
    struct bucket_acc a;
    unsigned answered;
    if (bucket_union(ec, &a, &answered) == 0)
        for (unsigned i = 0; i < a.n; i++)
            (void)bucket_spread(ec, a.names[i], now);
    acc_free(&a);
}

static void count_heal(struct ol_s3_ec *ec, const struct ol_eset_heal_stats *hs)
{
    atomic_fetch_add(&ec->st.healed_objects, hs->objects);
    atomic_fetch_add(&ec->st.healed_shards, hs->shards_rebuilt);
    atomic_fetch_add(&ec->st.corrupt_shards, hs->corrupt);
}

void ol_s3_ec_scrub_fiber(void *arg)
{
    struct ol_s3_ctx *ctx = arg;
    struct ol_s3_ec *ec = ctx->ec;
    struct ol_loop *loop = ol_loop_current();
    if (!ec || ec->scrub_interval_ms <= 0)
        return;
    unsigned pause = ec->scrub_per_sec >= 1000 ? 0 : (unsigned)(1000 / ec->scrub_per_sec);
    /* One pass per round: buckets, then every key of each, at the set rate. */
    while (!ol_loop_stopping(loop)) {
        /* Sleep in short slices so that a stop is noticed. */
        for (int64_t slept = 0; slept < ec->scrub_interval_ms && !ol_loop_stopping(loop);
             slept += 250)
            ol_io_sleep_ms(250);
        if (ol_loop_stopping(loop))
            break;
        spread_buckets(ec, ol_wall_ns());
        struct bucket_acc a;
        unsigned answered;
        if (bucket_union(ec, &a, &answered) == 0) {
            for (unsigned b = 0; b < a.n && !ol_loop_stopping(loop); b++) {
                for (unsigned s = 0; s < ec->nsets; s++) {
                    struct ol_eset_heal_stats hs = {0};
                    (void)heal_bucket_set(ec, ec->sets[s], a.names[b], pause, loop, &hs);
                    count_heal(ec, &hs);
                    atomic_fetch_add(&ec->st.scrub_objects, hs.objects);
                    atomic_fetch_add(&ec->st.scrub_shards, hs.shards_rebuilt);
                }
            }
        }
        acc_free(&a);
        atomic_fetch_add(&ec->st.scrub_passes, 1);
    }
}

/* The drive monitor: checks and probes every drive (ec/storedrive.h) each
 * ec_drive_check_ms; when a drive came back (the same directory, or an empty
 * or other one in its place, or the admin's switch), heals everything so
 * that the set returns to full redundancy without waiting for the scrubber.
 * The heal runs here, in this fiber: the checks pause meanwhile, which only
 * delays noticing other drives. */
void ol_s3_ec_monitor_fiber(void *arg)
{
    struct ol_s3_ctx *ctx = arg;
    struct ol_s3_ec *ec = ctx->ec;
    struct ol_loop *loop = ol_loop_current();
    if (!ec)
        return;
    /* The multipart cleaner (s3/ec_multipart.h) runs beside the monitor.
     * Without a fiber the cleanup records wait for the next start. */
    if (ol_fiber_spawn(loop, ol_s3_ec_mp_cleaner_fiber, ctx) < 0)
        ol_warn("EC multipart: cannot start the part cleaner");
    unsigned period = ec->drive_check_ms > 0 ? (unsigned)ec->drive_check_ms : 1000;
    while (!ol_loop_stopping(loop)) {
        /* Short slices so that a stop is noticed. */
        for (unsigned slept = 0; slept < period && !ol_loop_stopping(loop); slept += 100)
            ol_io_sleep_ms(period - slept < 100 ? period - slept : 100);
        if (ol_loop_stopping(loop))
            break;
        bool back = false;
        for (unsigned i = 0; i < ec->ndrives; i++) {
            (void)ol_storedrive_check(ec->drives[i]);
            back |= ol_storedrive_take_came_back(ec->drives[i]);
        }
        if (!back)
            continue;
        spread_buckets(ec, ol_wall_ns());
        struct ol_eset_heal_stats hs = {0};
        for (unsigned s = 0; s < ec->nsets && !ol_loop_stopping(loop); s++)
            if (ol_eset_heal_all(ec->sets[s], &hs) < 0)
                atomic_fetch_add(&ec->st.scrub_errors, 1);
        count_heal(ec, &hs);
        atomic_fetch_add(&ec->st.monitor_heals, 1);
        atomic_fetch_add(&ec->st.scrub_shards, hs.shards_rebuilt);
    }
}

static int send_json(struct ol_s3_req *r, int status, const char *body, size_t len)
{
    struct ol_http_hdr h[] = {{"Content-Type", "application/json"},
                              {"x-amz-request-id", r->request_id}};
    return ol_http_respond(r->conn, status, h, 2, body, len);
}

static void heal_progress(void *ctx, const struct ol_eset_heal_stats *st)
{
    struct ol_s3_ec *ec = ctx;
    atomic_store(&ec->hp.objects, st->objects);
    atomic_store(&ec->hp.shards_rebuilt, st->shards_rebuilt);
    atomic_store(&ec->hp.corrupt, st->corrupt);
    atomic_store(&ec->hp.versions_removed, st->versions_removed);
    atomic_store(&ec->hp.unrecoverable, st->unrecoverable);
}

/* The deployment heal's progress, for `openlake admin heal`'s progress lines:
 * the running totals of the current (or last) deployment heal. */
static int admin_heal_status(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    bool running = atomic_load(&ec->hp.running);
    uint64_t start = atomic_load(&ec->hp.started_ms), end = atomic_load(&ec->hp.finished_ms);
    uint64_t now = ol_now_ms();
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "{\"running\":%s,\"runs\":%" PRIu64 ",\"elapsed_ms\":%" PRIu64
                     ",\"objects\":%" PRIu64 ",\"shards_rebuilt\":%" PRIu64
                     ",\"corrupt\":%" PRIu64 ",\"versions_removed\":%" PRIu64
                     ",\"unrecoverable\":%" PRIu64 "}\n",
                     running ? "true" : "false", atomic_load(&ec->hp.runs),
                     start == 0 ? 0 : (running ? now : end) - start,
                     atomic_load(&ec->hp.objects), atomic_load(&ec->hp.shards_rebuilt),
                     atomic_load(&ec->hp.corrupt), atomic_load(&ec->hp.versions_removed),
                     atomic_load(&ec->hp.unrecoverable));
    return send_json(r, 200, body, (size_t)n);
}

static int admin_heal(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    const struct ol_s3_param *pb = ol_s3_param(r, "bucket");
    const struct ol_s3_param *pk = ol_s3_param(r, "key");
    struct ol_eset_heal_stats hs = {0};
    int rc = 0;
    atomic_fetch_add(&ec->st.heal_requests, 1);
    if (pk && (!pb || !pb->value[0] || !pk->value_len || pk->value_len > OL_DRIVE_MAX_KEY))
        return ol_s3_error(r, OL_S3_InvalidArgument, "key needs a bucket.");
    if (pb && pb->value[0]) {
        if (strlen(pb->value) > 63)
            return ol_s3_error(r, OL_S3_InvalidBucketName, "The specified bucket is not valid.");
        int ex = bucket_exists(ec, pb->value);
        if (ex <= 0)
            return ex < 0 ? ec_error(r, ex) : ol_s3_error_from(r, -OL_ENOBUCKET);
        (void)bucket_spread(ec, pb->value, r->now_ns);
        if (pk) {
            rc = ol_eset_heal_object(set_of(ec, pb->value, pk->value, pk->value_len), pb->value,
                                     pk->value, pk->value_len, &hs);
            if (rc == -OL_ENOKEY)
                rc = 0;
        } else {
            for (unsigned s = 0; s < ec->nsets && rc == 0; s++)
                rc = heal_bucket_set(ec, ec->sets[s], pb->value, 0, NULL, &hs);
        }
    } else {
        spread_buckets(ec, r->now_ns);
        /* Two deployment heals at once would mix their totals; the second
         * one still heals, its progress just is not reported. */
        bool expected = false;
        bool report = atomic_compare_exchange_strong(&ec->hp.running, &expected, true);
        if (report) {
            struct ol_eset_heal_stats zero = {0};
            heal_progress(ec, &zero);
            atomic_store(&ec->hp.started_ms, ol_now_ms());
            atomic_fetch_add(&ec->hp.runs, 1);
        }
        for (unsigned s = 0; s < ec->nsets && rc == 0; s++)
            rc = ol_eset_heal_all_cb(ec->sets[s], &hs, report ? heal_progress : NULL, ec);
        if (report) {
            heal_progress(ec, &hs);
            atomic_store(&ec->hp.finished_ms, ol_now_ms());
            atomic_store(&ec->hp.running, false);
        }
    }
    count_heal(ec, &hs);
    if (rc < 0)
        return ec_error(r, rc);
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "{\"objects\":%" PRIu64 ",\"shards_rebuilt\":%" PRIu64
                     ",\"corrupt\":%" PRIu64 ",\"marked_complete\":%" PRIu64
                     ",\"versions_removed\":%" PRIu64 ",\"unrecoverable\":%" PRIu64 "}\n",
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
    struct ol_s3_ec *ec = r->ctx->ec;
    size_t cap = 4096 + (size_t)ec->ndrives * 1400 + (size_t)ec->nsets * 256, n = 0;
    char *b = malloc(cap);
    if (!b)
        return ol_s3_error_from(r, -ENOMEM);
    JS("{\"mode\":\"erasure\",\"k\":%u,\"m\":%u,\"deployment\":\"", ec->k, ec->m);
    for (unsigned i = 0; i < sizeof(ec->deploy_id); i++)
        JS("%02x", ec->deploy_id[i]);
    JS("\",\"drives\":[");
    for (unsigned i = 0; i < ec->ndrives; i++) {
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
        JS("%s{\"index\":%u,\"set\":%u,\"path\":", i ? "," : "", i, i / (ec->k + ec->m));
        json_str(b, cap, &n, ec->paths[i]);
        JS(",\"state\":\"%s\",\"total_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64
           ",\"live_bytes\":%" PRIu64 ",\"corrupt_blocks\":%" PRIu64,
           ol_storedrive_state_name(di.state), total, avail, ss.live_bytes, ss.corrupt_blocks);
        JS(",\"last_error\":");
        json_str(b, cap, &n, di.last_err ? ol_strerror(di.last_err) : "");
        JS(",\"errors\":%u,\"retry_in_ms\":%" PRIu64 ",\"failures\":%" PRIu64
           ",\"offline_events\":%" PRIu64 ",\"online_events\":%" PRIu64
           ",\"reopens\":%" PRIu64 "}",
           di.consecutive_errors, di.retry_in_ms, di.failures, di.offline_events,
           di.online_events, di.reopens);
    }
    JS("],\"sets\":[");
    for (unsigned s = 0; s < ec->nsets; s++) {
        unsigned online = 0, size = ec->k + ec->m;
        for (unsigned j = 0; j < size; j++)
            online += !ol_storedrive_offline(ec->drives[s * size + j]);
        const char *state = online == size ? "healthy" : online >= ec->k + (ec->m > 0) ? "degraded"
                                                  : online >= ec->k ? "read-only" : "unavailable";
        JS("%s{\"index\":%u,\"first_drive\":%u,\"drives\":%u,\"online\":%u,\"state\":\"%s\"}",
           s ? "," : "", s, s * size, size, online, state);
    }
    JS("]}\n");
    int rc = send_json(r, 200, b, n);
    free(b);
    return rc;
}

static int admin_drive(struct ol_s3_req *r)
{
    struct ol_s3_ec *ec = r->ctx->ec;
    const struct ol_s3_param *pi = ol_s3_param(r, "index");
    const struct ol_s3_param *ps = ol_s3_param(r, "state");
    char *end = NULL;
    unsigned long i = pi ? strtoul(pi->value, &end, 10) : 0;
    if (!pi || !end || *end || i >= ec->ndrives || !ps ||
        (strcmp(ps->value, "online") != 0 && strcmp(ps->value, "offline") != 0))
        return ol_s3_error(r, OL_S3_InvalidArgument,
                           "Give index (a drive number) and state (online or offline).");
    ol_storedrive_set_offline(ec->drives[i], strcmp(ps->value, "offline") == 0);
    return send_json(r, 200, "{}\n", 3);
}

int ol_s3_ec_admin(struct ol_s3_req *r)
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

void ol_s3_ec_metrics(struct ol_s3_ec *ec, char *b, size_t cap, size_t *np)
{
    size_t n = *np;
    struct ol_eset_stats t = {0};
    for (unsigned s = 0; s < ec->nsets; s++) {
        struct ol_eset_stats x;
        ol_eset_stats(ec->sets[s], &x);
        t.reads += x.reads;
        t.degraded_reads += x.degraded_reads;
        t.heals_on_read += x.heals_on_read;
        t.shards_healed_on_read += x.shards_healed_on_read;
        t.puts += x.puts;
        t.puts_failed += x.puts_failed;
        t.read_timeouts += x.read_timeouts;
        t.puts_full += x.puts_full;
    }
    unsigned offline = 0, full = 0;
    uint64_t corrupt = 0, failures = 0;
    for (unsigned i = 0; i < ec->ndrives; i++) {
        struct ol_storedrive_info di;
        ol_storedrive_info(ec->drives[i], &di);
        offline += di.state == OL_SD_OFFLINE || di.state == OL_SD_ADMIN_OFFLINE;
        full += di.state == OL_SD_FULL;
        failures += di.failures;
        struct ol_store_stats ss = {0};
        if (ol_storedrive_store(ec->drives[i]))
            ol_store_stats(ol_storedrive_store(ec->drives[i]), &ss);
        corrupt += ss.corrupt_blocks;
    }
    JS("# TYPE openlake_ec_reads_total counter\n");
    JS("openlake_ec_drives %u\nopenlake_ec_drives_offline %u\n", ec->ndrives, offline);
    JS("openlake_ec_drives_full %u\n", full);
    JS("openlake_ec_drive_failures_total %" PRIu64 "\n", failures);
    for (unsigned i = 0; i < ec->ndrives; i++) {
        struct ol_storedrive_info di;
        ol_storedrive_info(ec->drives[i], &di);
        JS("openlake_ec_drive_state{drive=\"%u\",state=\"%s\"} 1\n", i,
           ol_storedrive_state_name(di.state));
    }
    JS("openlake_ec_reads_total %" PRIu64 "\n", t.reads);
    JS("openlake_ec_degraded_reads_total %" PRIu64 "\n", t.degraded_reads);
    JS("openlake_ec_heals_on_read_total %" PRIu64 "\n", t.heals_on_read);
    JS("openlake_ec_shards_healed_on_read_total %" PRIu64 "\n", t.shards_healed_on_read);
    JS("openlake_ec_puts_total %" PRIu64 "\n", t.puts);
    JS("openlake_ec_puts_failed_total %" PRIu64 "\n", t.puts_failed);
    JS("openlake_ec_puts_full_total %" PRIu64 "\n", t.puts_full);
    JS("openlake_ec_read_timeouts_total %" PRIu64 "\n", t.read_timeouts);
    JS("openlake_ec_quorum_errors_total %" PRIu64 "\n", atomic_load(&ec->st.quorum_errors));
    JS("openlake_ec_heal_requests_total %" PRIu64 "\n", atomic_load(&ec->st.heal_requests));
    JS("openlake_ec_healed_objects_total %" PRIu64 "\n", atomic_load(&ec->st.healed_objects));
    JS("openlake_ec_healed_shards_total %" PRIu64 "\n", atomic_load(&ec->st.healed_shards));
    JS("openlake_ec_corrupt_shards_total %" PRIu64 "\n", atomic_load(&ec->st.corrupt_shards));
    JS("openlake_ec_scrub_passes_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_passes));
    JS("openlake_ec_scrub_objects_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_objects));
    JS("openlake_ec_scrub_shards_rebuilt_total %" PRIu64 "\n",
       atomic_load(&ec->st.scrub_shards));
    JS("openlake_ec_scrub_errors_total %" PRIu64 "\n", atomic_load(&ec->st.scrub_errors));
    JS("openlake_ec_monitor_heals_total %" PRIu64 "\n", atomic_load(&ec->st.monitor_heals));
    JS("openlake_store_corrupt_blocks_total %" PRIu64 "\n", corrupt);
    *np = n;
}
#undef JS
