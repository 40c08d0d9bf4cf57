/* The users store (see users.h). */
#include "users/users.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "access/access.h"
#include "cluster/etcd.h"
#include "cluster/key.h"
#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/gcm.h"
#include "core/hex.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/sha256.h"
#include "deploy/cluster.h"
#include "obj/obj.h"

enum {
    ETCD_TIMEOUT_MS = 1000, /* one etcd call; a resync that hangs ends the freshness */
    CAS_TRIES = 8,
    /* A stored document: OL_USERS_MAX lines of key, time and sealed secret. */
    DOC_MAX = OL_USERS_MAX * (OL_USERS_KEY_MAX + 24 + OL_USERS_SEALED_MAX),
};

enum mode { MODE_STATIC, MODE_OBJ, MODE_ETCD };

struct entry {
    char ak[OL_USERS_KEY_MAX + 1];
    char secret[OL_USERS_KEY_MAX + 1];
    int64_t ctime_s;
    int64_t mod_rev; /* cluster: the etcd revision of the record (0: unknown) */
};

/* cluster: a user this node removed, at etcd revision rev: a watch event
 * older than that (delivered after the removal) must not bring it back. */
struct tomb {
    char ak[OL_USERS_KEY_MAX + 1];
    int64_t rev;
};
enum { MAX_TOMBS = 64 };

enum op_kind { OP_ADD, OP_REMOVE, OP_ROTATE };

/* One change, handed to the store's thread; the caller waits on done. */
struct op {
    enum op_kind kind;
    const char *ak;
    char secret[OL_USERS_KEY_MAX + 1]; /* the new secret (add, rotate) */
    struct ol_completion done;
    struct op *next;
};

struct ol_users {
    const struct ol_cfg *cfg;
    enum mode mode;
    uint8_t key[32]; /* the sealing key */
    /* The run-time users, sorted by access key.  Written by the store's
     * thread only (and open), read by everyone under the read lock. */
    pthread_rwlock_t lk;
    struct entry *tab;
    size_t n;
    /* MODE_OBJ */
    struct ol_obj *obj;
    /* MODE_ETCD */
    struct ol_etcd *etcd;
    struct ol_etcd_watch *watch;
    char prefix[OL_USERS_KEY_MAX + 96];
    _Atomic uint64_t fresh_ms; /* ol_mono_ms() when the last complete read was sent */
    uint64_t resync_due_ms;
    struct tomb tombs[MAX_TOMBS]; /* the thread's; emptied by each full read */
    unsigned ntombs, next_tomb;
    bool etcd_down; /* the last full read failed (logged once) */
    int64_t table_rev; /* etcd's revision at the last full read */
    /* The thread and its queue. */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct op *head, **tail;
    bool stop;
};

/* ---- syntax ---- */

bool ol_users_key_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 3 || n > OL_USERS_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

bool ol_users_secret_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < OL_USERS_SECRET_MIN || n > OL_USERS_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

static int gen_secret(char out[OL_USERS_KEY_MAX + 1])
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = 0;
    /* Rejection sampling keeps the 62 letters equally likely; each round
     * keeps 248 of 256 values, so 8 rounds of 64 bytes are plenty. */
    for (int round = 0; round < 8 && n < OL_USERS_GEN_SECRET; round++) {
        uint8_t rnd[64];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            return -EIO;
        for (size_t i = 0; i < sizeof(rnd) && n < OL_USERS_GEN_SECRET; i++)
            if (rnd[i] < 248)
                out[n++] = abc[rnd[i] % 62];
        OPENSSL_cleanse(rnd, sizeof(rnd));
    }
    out[n] = 0;
    return n == OL_USERS_GEN_SECRET ? 0 : -EIO;
}

/* ---- sealing ---- */

int ol_users_seal(const uint8_t key[32], const char *ak, const char *secret,
                  char out[OL_USERS_SEALED_MAX])
{
    size_t sl = strlen(secret);
    if (sl > OL_USERS_KEY_MAX)
        return -EINVAL;
    uint8_t buf[12 + OL_USERS_KEY_MAX + 16];
    if (getrandom(buf, 12, 0) != 12)
        return -EIO;
    int rc = ol_gcm_once(true, key, buf, (const uint8_t *)ak, strlen(ak),
                         (const uint8_t *)secret, sl, buf + 12, buf + 12 + sl);
    if (rc == 0)
        ol_hex(buf, 12 + sl + 16, out);
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc < 0 ? -EIO : 0;
}

int ol_users_unseal(const uint8_t key[32], const char *ak, const char *sealed, size_t len,
                    char secret_out[OL_USERS_KEY_MAX + 1])
{
    uint8_t buf[12 + OL_USERS_KEY_MAX + 16];
    if (len % 2 || len / 2 < 12 + 16 || len / 2 > sizeof(buf) ||
        !ol_unhex(sealed, len, buf, len / 2))
        return -EBADMSG;
    size_t sl = len / 2 - 12 - 16;
    int rc = ol_gcm_once(false, key, buf, (const uint8_t *)ak, strlen(ak), buf + 12, sl,
                         (uint8_t *)secret_out, buf + 12 + sl);
    if (rc == 0) {
        secret_out[sl] = 0;
        rc = ol_users_secret_valid(secret_out) ? 0 : -EBADMSG;
    }
    if (rc < 0) {
        OPENSSL_cleanse(secret_out, OL_USERS_KEY_MAX + 1);
        rc = -EBADMSG;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

/* The sealing key from a base key (users.h). */
static void derive_key(struct ol_users *u, const uint8_t base[32])
{
    static const char label[] = "openlake users v1";
    uint8_t in[sizeof(label) - 1 + 32];
    memcpy(in, label, sizeof(label) - 1);
    memcpy(in + sizeof(label) - 1, base, 32);
    ol_sha256(in, sizeof(in), u->key);
    OPENSSL_cleanse(in, sizeof(in));
}

/* ---- the table (the store's thread writes, under the write lock) ---- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct entry *)a)->ak, ((const struct entry *)b)->ak);
}

/* Index of ak, or -(insertion point) - 1.  Caller holds a lock. */
static long find(const struct ol_users *u, const char *ak, size_t len)
{
    size_t lo = 0, hi = u->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(u->tab[mid].ak, ak, len);
        if (c == 0 && u->tab[mid].ak[len])
            c = 1;
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

static bool is_config_user(const struct ol_users *u, const char *ak, size_t len)
{
    return ol_cfg_find_user(u->cfg, ak, len) != NULL;
}

/* Sets ak's record; rev (cluster, else 0): a record already newer stays. */
static void upsert(struct ol_users *u, const char *ak, const char *secret, int64_t ctime_s,
                   int64_t rev)
{
    for (unsigned t = 0; rev && t < u->ntombs; t++)
        if (strcmp(u->tombs[t].ak, ak) == 0 && u->tombs[t].rev >= rev)
            return;
    pthread_rwlock_wrlock(&u->lk);
    long i = find(u, ak, strlen(ak));
    if (i >= 0 && rev && u->tab[i].mod_rev > rev) {
        pthread_rwlock_unlock(&u->lk);
        return;
    }
    if (i < 0 && u->n < OL_USERS_MAX) {
        size_t at = (size_t)(-i - 1);
        memmove(&u->tab[at + 1], &u->tab[at], (u->n - at) * sizeof(*u->tab));
        u->n++;
        i = (long)at;
        snprintf(u->tab[i].ak, sizeof(u->tab[i].ak), "%s", ak);
    }
    if (i >= 0) {
        snprintf(u->tab[i].secret, sizeof(u->tab[i].secret), "%s", secret);
        u->tab[i].ctime_s = ctime_s;
        u->tab[i].mod_rev = rev;
    }
    pthread_rwlock_unlock(&u->lk);
}

static void erase(struct ol_users *u, const char *ak, int64_t rev)
{
    if (rev) {
        struct tomb *t = &u->tombs[u->next_tomb];
        u->next_tomb = (u->next_tomb + 1) % MAX_TOMBS;
        if (u->ntombs < MAX_TOMBS)
            u->ntombs++;
        snprintf(t->ak, sizeof(t->ak), "%s", ak);
        t->rev = rev;
    }
    pthread_rwlock_wrlock(&u->lk);
    long i = find(u, ak, strlen(ak));
    if (i >= 0 && rev && u->tab[i].mod_rev > rev)
        i = -1; /* re-created after that removal */
    if (i >= 0) {
        OPENSSL_cleanse(&u->tab[i], sizeof(u->tab[i]));
        memmove(&u->tab[i], &u->tab[i + 1], (u->n - (size_t)i - 1) * sizeof(*u->tab));
        u->n--;
    }
    pthread_rwlock_unlock(&u->lk);
}

/* Replaces the whole table with tab (sorted here; consumed). */
static void replace(struct ol_users *u, struct entry *tab, size_t n)
{
    qsort(tab, n, sizeof(*tab), cmp_entry);
    pthread_rwlock_wrlock(&u->lk);
    OPENSSL_cleanse(u->tab, u->n * sizeof(*u->tab));
    memcpy(u->tab, tab, n * sizeof(*tab));
    u->n = n;
    pthread_rwlock_unlock(&u->lk);
    OPENSSL_cleanse(tab, n * sizeof(*tab));
    free(tab);
}

/* One stored record "CTIME SEALED" of user ak into e; false (logged) when
 * it does not parse or open. */
static bool parse_record(struct ol_users *u, const char *ak, const char *v, size_t len,
                         struct entry *e)
{
    const char *sp = memchr(v, ' ', len);
    if (!ol_users_key_valid(ak) || !sp) {
        ol_warn("users: the stored record of '%.128s' is malformed: ignored", ak);
        return false;
    }
    if (is_config_user(u, ak, strlen(ak))) {
        ol_warn("users: '%s' is a configuration user: its stored record is ignored", ak);
        return false;
    }
    snprintf(e->ak, sizeof(e->ak), "%s", ak);
    e->ctime_s = strtoll(v, NULL, 10);
    if (ol_users_unseal(u->key, ak, sp + 1, len - (size_t)(sp + 1 - v), e->secret) < 0) {
        ol_warn("users: the secret of '%s' does not open (another cluster_key_file?): the "
                "user is ignored; re-add it",
                ak);
        return false;
    }
    return true;
}

/* ---- single node: one document through the object layer ---- */

static int obj_load(struct ol_users *u, char *err, size_t errlen)
{
    char *doc = malloc(DOC_MAX + 1);
    struct entry *tab = calloc(OL_USERS_MAX, sizeof(*tab));
    if (!doc || !tab) {
        free(doc);
        free(tab);
        return -ENOMEM;
    }
    ssize_t n = ol_obj_bucket_config_get(u->obj, OL_USERS_BUCKET, OL_USERS_SETTING, doc, DOC_MAX);
    if (n == -OL_ENOBUCKET || n == -OL_ENOCONFIG)
        n = 0;
    if (n < 0) {
        snprintf(err, errlen, "cannot read the stored users: %s", ol_strerror((int)n));
        free(doc);
        free(tab);
        return (int)n;
    }
    doc[n] = 0;
    size_t cnt = 0;
    /* One line per user, "AK CTIME SEALED"; bounded by the document. */
    for (char *line = doc, *nl; line < doc + n && cnt < OL_USERS_MAX; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            nl = doc + n;
        *nl = 0;
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = 0;
        if (parse_record(u, line, sp + 1, strlen(sp + 1), &tab[cnt]))
            cnt++;
    }
    OPENSSL_cleanse(doc, (size_t)n);
    free(doc);
    replace(u, tab, cnt);
    return 0;
}

/* Stores the table as it would be with change applied: ak's record set to
 * secret (NULL: removed).  The table itself is changed by the caller once
 * this succeeded. */
static int obj_store(struct ol_users *u, const char *ak, const char *secret, int64_t ctime_s)
{
    char *doc = malloc(DOC_MAX);
    if (!doc)
        return -ENOMEM;
    size_t n = 0;
    int rc = 0;
    char sealed[OL_USERS_SEALED_MAX];
    pthread_rwlock_rdlock(&u->lk);
    for (size_t i = 0; i < u->n && rc == 0; i++) {
        if (strcmp(u->tab[i].ak, ak) == 0)
            continue;
        rc = ol_users_seal(u->key, u->tab[i].ak, u->tab[i].secret, sealed);
        if (rc == 0)
            n += (size_t)snprintf(doc + n, DOC_MAX - n, "%s %" PRId64 " %s\n", u->tab[i].ak,
                                  u->tab[i].ctime_s, sealed);
    }
    pthread_rwlock_unlock(&u->lk);
    if (rc == 0 && secret) {
        rc = ol_users_seal(u->key, ak, secret, sealed);
        if (rc == 0)
            n += (size_t)snprintf(doc + n, DOC_MAX - n, "%s %" PRId64 " %s\n", ak, ctime_s,
                                  sealed);
    }
    if (rc == 0 && n >= DOC_MAX)
        rc = -OL_ETOOLARGE;
    if (rc == 0) {
        rc = ol_obj_bucket_config_put(u->obj, OL_USERS_BUCKET, OL_USERS_SETTING, doc, n);
        if (rc == -OL_ENOBUCKET) {
            /* The first user: the reserved bucket comes with it. */
            rc = ol_obj_bucket_create(u->obj, OL_USERS_BUCKET, ol_wall_ns());
            if (rc == 0 || rc == -OL_EBUCKETEXISTS)
                rc = ol_obj_bucket_config_put(u->obj, OL_USERS_BUCKET, OL_USERS_SETTING, doc,
                                              n);
        }
    }
    OPENSSL_cleanse(doc, n);
    free(doc);
    return rc;
}

/* ---- cluster: one etcd key per user ---- */

static int etcd_resync(struct ol_users *u, int64_t *rev)
{
    uint64_t sent = ol_mono_ms();
    struct ol_etcd_range r = {0};
    int rc = ol_etcd_get_prefix(u->etcd, u->prefix, OL_USERS_MAX, &r);
    if (rc < 0)
        return rc;
    struct entry *tab = calloc(OL_USERS_MAX, sizeof(*tab));
    if (!tab) {
        ol_etcd_range_clear(&r);
        return -ENOMEM;
    }
    size_t cnt = 0, pl = strlen(u->prefix);
    for (size_t i = 0; i < r.n && cnt < OL_USERS_MAX; i++)
        if (parse_record(u, r.kvs[i].key + pl, r.kvs[i].value, r.kvs[i].value_len, &tab[cnt]))
            tab[cnt++].mod_rev = r.kvs[i].mod_rev;
    *rev = r.rev;
    u->table_rev = r.rev;
    for (size_t i = 0; i < r.n; i++)
        OPENSSL_cleanse(r.kvs[i].value, r.kvs[i].value_len);
    ol_etcd_range_clear(&r);
    replace(u, tab, cnt);
    u->ntombs = u->next_tomb = 0; /* the read is newer than every removal made before it */
    atomic_store(&u->fresh_ms, sent);
    return 0;
}

static int on_event(void *arg, const struct ol_etcd_event *ev)
{
    struct ol_users *u = arg;
    const char *ak = ev->kv->key + strlen(u->prefix);
    /* The watch may lag behind the last full read: what that read saw
     * is in the table already, and replaying it could revive a user. */
    if (ev->kv->mod_rev <= u->table_rev)
        return 0;
    if (ev->type == OL_ETCD_DELETE) {
        erase(u, ak, ev->kv->mod_rev);
        return 0;
    }
    struct entry e;
    if (parse_record(u, ak, ev->kv->value, ev->kv->value_len, &e))
        upsert(u, e.ak, e.secret, e.ctime_s, ev->kv->mod_rev);
    OPENSSL_cleanse(&e, sizeof(e));
    return 0;
}

/* Between changes: a watch poll, and the periodic full read that keeps the
 * table fresh (users.h). */
static void etcd_step(struct ol_users *u)
{
    uint64_t now = ol_mono_ms();
    if (now >= u->resync_due_ms) {
        int64_t rev = 0;
        int rc = etcd_resync(u, &rev);
        u->resync_due_ms = now + OL_USERS_RESYNC_MS;
        if (rc < 0) {
            /* Said once per outage; the table goes stale (users.h). */
            if (!u->etcd_down)
                ol_warn("users: cannot read the users from etcd (%s): run-time users are "
                        "refused after %d ms without a read",
                        ol_strerror(rc), OL_USERS_STALE_MS);
            u->etcd_down = true;
            usleep(OL_USERS_WATCH_POLL_MS * 1000);
            return;
        }
        if (u->etcd_down)
            ol_info("users: etcd answers again");
        u->etcd_down = false;
        if (!u->watch && ol_etcd_watch_open(u->etcd, u->prefix, rev + 1, on_event, u,
                                            &u->watch) < 0)
            u->watch = NULL;
    }
    if (!u->watch) {
        usleep(OL_USERS_WATCH_POLL_MS * 1000);
        return;
    }
    int rc = ol_etcd_watch_poll(u->watch, OL_USERS_WATCH_POLL_MS);
    if (rc < 0) {
        /* Ended: the next step re-reads and watches again. */
        ol_etcd_watch_close(u->watch);
        u->watch = NULL;
        u->resync_due_ms = 0;
    }
}

static int etcd_add(struct ol_users *u, const char *ak, const char *secret, int64_t ctime_s,
                    int64_t *rev)
{
    char key[sizeof(u->prefix) + OL_USERS_KEY_MAX + 1], val[32 + OL_USERS_SEALED_MAX];
    snprintf(key, sizeof(key), "%s%s", u->prefix, ak);
    int n = snprintf(val, sizeof(val), "%" PRId64 " ", ctime_s);
    int rc = ol_users_seal(u->key, ak, secret, val + n);
    if (rc == 0)
        rc = ol_etcd_cas(u->etcd, key, OL_ETCD_IF_ABSENT, 0, val, strlen(val), 0, rev);
    OPENSSL_cleanse(val, sizeof(val));
    return rc == -OL_ECASFAIL ? -EEXIST : rc;
}

static int etcd_rotate(struct ol_users *u, const char *ak, const char *secret, int64_t *ctime_s,
                       int64_t *rev)
{
    char key[sizeof(u->prefix) + OL_USERS_KEY_MAX + 1], val[32 + OL_USERS_SEALED_MAX];
    snprintf(key, sizeof(key), "%s%s", u->prefix, ak);
    int rc = -EAGAIN;
    /* Compare-and-swap on the record read: a rotation never revives a user
     * that another node removed meanwhile. */
    for (int t = 0; t < CAS_TRIES && rc == -EAGAIN; t++) {
        struct ol_etcd_kv kv = {0};
        rc = ol_etcd_get(u->etcd, key, &kv, NULL);
        if (rc < 0)
            return rc;
        *ctime_s = strtoll(kv.value, NULL, 10);
        int64_t mod = kv.mod_rev;
        OPENSSL_cleanse(kv.value, kv.value_len);
        ol_etcd_kv_clear(&kv);
        int n = snprintf(val, sizeof(val), "%" PRId64 " ", *ctime_s);
        rc = ol_users_seal(u->key, ak, secret, val + n);
        if (rc == 0)
            rc = ol_etcd_cas(u->etcd, key, OL_ETCD_IF_MOD, mod, val, strlen(val), 0, rev);
        if (rc == -OL_ECASFAIL)
            rc = -EAGAIN;
    }
    OPENSSL_cleanse(val, sizeof(val));
    return rc;
}

static int etcd_remove(struct ol_users *u, const char *ak, int64_t *rev)
{
    char key[sizeof(u->prefix) + OL_USERS_KEY_MAX + 1];
    snprintf(key, sizeof(key), "%s%s", u->prefix, ak);
    int rc = -EAGAIN;
    /* A delete by compare-and-swap, for the revision it happened at. */
    for (int t = 0; t < CAS_TRIES && rc == -EAGAIN; t++) {
        struct ol_etcd_kv kv = {0};
        rc = ol_etcd_get(u->etcd, key, &kv, NULL);
        if (rc < 0)
            return rc;
        int64_t mod = kv.mod_rev;
        OPENSSL_cleanse(kv.value, kv.value_len);
        ol_etcd_kv_clear(&kv);
        rc = ol_etcd_cas(u->etcd, key, OL_ETCD_IF_MOD, mod, NULL, 0, 0, rev);
        if (rc == -OL_ECASFAIL)
            rc = -EAGAIN;
    }
    return rc;
}

/* ---- changes, on the store's thread ---- */

static int run_op(struct ol_users *u, struct op *o)
{
    size_t akl = strlen(o->ak);
    pthread_rwlock_rdlock(&u->lk);
    long at = find(u, o->ak, akl);
    int64_t ctime_s = at >= 0 ? u->tab[at].ctime_s : ol_wall_ns() / 1000000000;
    size_t count = u->n;
    pthread_rwlock_unlock(&u->lk);
    int rc = 0;
    int64_t rev = 0;
    switch (o->kind) {
    case OP_ADD:
        if (at >= 0)
            return -EEXIST;
        if (count >= OL_USERS_MAX)
            return -ENOSPC;
        rc = u->mode == MODE_ETCD ? etcd_add(u, o->ak, o->secret, ctime_s, &rev)
                                  : obj_store(u, o->ak, o->secret, ctime_s);
        if (rc == 0)
            upsert(u, o->ak, o->secret, ctime_s, rev);
        if (rc == 0)
            ol_info("users: added '%s'", o->ak);
        return rc;
    case OP_ROTATE:
        if (u->mode == MODE_OBJ && at < 0)
            return -ENOENT;
        rc = u->mode == MODE_ETCD ? etcd_rotate(u, o->ak, o->secret, &ctime_s, &rev)
                                  : obj_store(u, o->ak, o->secret, ctime_s);
        if (rc == 0)
            upsert(u, o->ak, o->secret, ctime_s, rev);
        if (rc == 0)
            ol_info("users: rotated the secret of '%s'", o->ak);
        return rc;
    case OP_REMOVE:
        if (u->mode == MODE_OBJ && at < 0)
            return -ENOENT;
        rc = u->mode == MODE_ETCD ? etcd_remove(u, o->ak, &rev) : obj_store(u, o->ak, NULL, 0);
        /* Gone from this node's table even when etcd had it no more. */
        if (rc == 0 || rc == -ENOENT)
            erase(u, o->ak, rev);
        if (rc == 0)
            ol_info("users: removed '%s'", o->ak);
        return rc;
    }
    return -EINVAL;
}

static void *users_thread(void *arg)
{
    struct ol_users *u = arg;
    pthread_mutex_lock(&u->mu);
    while (!u->stop) {
        struct op *o = u->head;
        if (o) {
            u->head = o->next;
            if (!u->head)
                u->tail = &u->head;
            pthread_mutex_unlock(&u->mu);
            int rc = run_op(u, o);
            OPENSSL_cleanse(o->secret, sizeof(o->secret));
            ol_completion_signal(&o->done, rc);
            pthread_mutex_lock(&u->mu);
            continue;
        }
        if (u->mode == MODE_ETCD) {
            pthread_mutex_unlock(&u->mu);
            etcd_step(u);
            pthread_mutex_lock(&u->mu);
        } else {
            pthread_cond_wait(&u->cv, &u->mu);
        }
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

static int submit(struct ol_users *u, enum op_kind kind, const char *ak, const char *secret,
                  char secret_out[OL_USERS_KEY_MAX + 1])
{
    if (u->mode == MODE_STATIC)
        return -ENOTSUP;
    if (!ol_users_key_valid(ak))
        return -EINVAL;
    if (is_config_user(u, ak, strlen(ak)))
        return kind == OP_ADD ? -EEXIST : -EPERM;
    struct op o = {.kind = kind, .ak = ak};
    if (kind != OP_REMOVE) {
        if (secret && !ol_users_secret_valid(secret))
            return -EINVAL;
        if (secret)
            snprintf(o.secret, sizeof(o.secret), "%s", secret);
        else if (gen_secret(o.secret) < 0)
            return -EIO;
        if (secret_out)
            snprintf(secret_out, OL_USERS_KEY_MAX + 1, "%s", o.secret);
    }
    ol_completion_init(&o.done);
    pthread_mutex_lock(&u->mu);
    o.next = NULL;
    *u->tail = &o;
    u->tail = &o.next;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
    int rc = ol_completion_wait(&o.done);
    if (rc < 0 && secret_out)
        OPENSSL_cleanse(secret_out, OL_USERS_KEY_MAX + 1);
    return rc;
}

int ol_users_add(struct ol_users *u, const char *ak, const char *secret,
                 char secret_out[OL_USERS_KEY_MAX + 1])
{
    return submit(u, OP_ADD, ak, secret, secret_out);
}

int ol_users_remove(struct ol_users *u, const char *ak)
{
    return submit(u, OP_REMOVE, ak, NULL, NULL);
}

int ol_users_rotate(struct ol_users *u, const char *ak, const char *secret,
                    char secret_out[OL_USERS_KEY_MAX + 1])
{
    return submit(u, OP_ROTATE, ak, secret, secret_out);
}

/* ---- reading ---- */

bool ol_users_is_admin(const struct ol_users *u, const char *ak)
{
    if (!ak || !u)
        return false;
    if (u->cfg->admin_users[0])
        return ol_access_is_admin(u->cfg, ak);
    return u->cfg->nusers && strcmp(u->cfg->users[0].access_key, ak) == 0;
}

int ol_users_lookup(struct ol_users *u, const char *ak, size_t len,
                    char secret_out[OL_USERS_KEY_MAX + 1], bool *admin_out)
{
    if (admin_out)
        *admin_out = false;
    if (len > OL_USERS_KEY_MAX)
        return -ENOENT;
    char name[OL_USERS_KEY_MAX + 1];
    memcpy(name, ak, len);
    name[len] = 0;
    const struct ol_cfg_user *cu = ol_cfg_find_user(u->cfg, ak, len);
    if (cu) {
        snprintf(secret_out, OL_USERS_KEY_MAX + 1, "%s", cu->secret_key);
        if (admin_out)
            *admin_out = ol_users_is_admin(u, name);
        return 0;
    }
    if (u->mode == MODE_STATIC)
        return -ENOENT;
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&u->lk);
    long i = find(u, ak, len);
    if (i >= 0) {
        snprintf(secret_out, OL_USERS_KEY_MAX + 1, "%s", u->tab[i].secret);
        rc = 0;
    }
    pthread_rwlock_unlock(&u->lk);
    /* Fail closed on a stale cluster table (users.h), known user or not:
     * a user removed elsewhere would still be in it. */
    if (u->mode == MODE_ETCD && ol_mono_ms() - atomic_load(&u->fresh_ms) > OL_USERS_STALE_MS) {
        if (rc == 0)
            OPENSSL_cleanse(secret_out, OL_USERS_KEY_MAX + 1);
        return -EAGAIN;
    }
    if (rc == 0 && admin_out)
        *admin_out = ol_users_is_admin(u, name);
    return rc;
}

int ol_users_list(struct ol_users *u, int (*fn)(void *ctx, const struct ol_users_info *i),
                  void *ctx)
{
    for (size_t i = 0; i < u->cfg->nusers; i++) {
        const char *ak = u->cfg->users[i].access_key;
        struct ol_users_info in = {ak, true, ol_users_is_admin(u, ak), 0};
        int rc = fn(ctx, &in);
        if (rc)
            return rc;
    }
    if (u->mode == MODE_STATIC)
        return 0;
    struct snap {
        char ak[OL_USERS_KEY_MAX + 1];
        int64_t ctime_s;
    } *s = NULL;
    pthread_rwlock_rdlock(&u->lk);
    size_t n = u->n;
    s = calloc(n ? n : 1, sizeof(*s));
    for (size_t i = 0; s && i < n; i++) {
        memcpy(s[i].ak, u->tab[i].ak, sizeof(s[i].ak));
        s[i].ctime_s = u->tab[i].ctime_s;
    }
    pthread_rwlock_unlock(&u->lk);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct ol_users_info in = {s[i].ak, false, ol_users_is_admin(u, s[i].ak), s[i].ctime_s};
        rc = fn(ctx, &in);
    }
    free(s);
    return rc;
}

size_t ol_users_count(struct ol_users *u)
{
    pthread_rwlock_rdlock(&u->lk);
    size_t n = u->n;
    pthread_rwlock_unlock(&u->lk);
    return n;
}

/* ---- open and close ---- */

static int create(const struct ol_cfg *cfg, enum mode mode, struct ol_users **out)
{
    struct ol_users *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->tab = calloc(OL_USERS_MAX, sizeof(*u->tab));
    if (!u->tab) {
        free(u);
        return -ENOMEM;
    }
    u->cfg = cfg;
    u->mode = mode;
    u->tail = &u->head;
    pthread_rwlock_init(&u->lk, NULL);
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    *out = u;
    return 0;
}

static int start(struct ol_users *u, char *err, size_t errlen)
{
    int rc = pthread_create(&u->thread, NULL, users_thread, u);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the users thread: %s", strerror(rc));
        return -rc;
    }
    u->started = true;
    return 0;
}

/* The base key of a single node (users.h): the key file's, else fixed. */
static int single_key(struct ol_users *u, char *err, size_t errlen)
{
    uint8_t base[OL_CLUSTER_KEY_BYTES] = {0};
    if (u->cfg->cluster_key_file[0]) {
        char why[256];
        int rc = ol_cluster_key(NULL, "", u->cfg->cluster_key_file, base, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "%s", why);
            return rc;
        }
    }
    derive_key(u, base);
    OPENSSL_cleanse(base, sizeof(base));
    return 0;
}

int ol_users_open_static(const struct ol_cfg *cfg, struct ol_users **out)
{
    return create(cfg, MODE_STATIC, out);
}

int ol_users_open_obj(const struct ol_cfg *cfg, struct ol_obj *obj, struct ol_users **out,
                      char *err, size_t errlen)
{
    struct ol_users *u;
    int rc = create(cfg, MODE_OBJ, &u);
    if (rc < 0)
        return rc;
    u->obj = obj;
    rc = single_key(u, err, errlen);
    if (rc == 0)
        rc = obj_load(u, err, errlen);
    if (rc == 0)
        rc = start(u, err, errlen);
    if (rc < 0) {
        ol_users_close(u);
        return rc;
    }
    *out = u;
    return 0;
}

int ol_users_open_etcd(const struct ol_cfg *cfg, struct ol_users **out, char *err, size_t errlen)
{
    char eps[2048];
    if (ol_cluster_endpoints(cfg->cluster, eps, sizeof(eps)) < 0) {
        snprintf(err, errlen, "users: bad etcd endpoints %s", cfg->cluster);
        return -EINVAL;
    }
    struct ol_users *u;
    int rc = create(cfg, MODE_ETCD, &u);
    if (rc < 0)
        return rc;
    snprintf(u->prefix, sizeof(u->prefix), OL_USERS_ETCD_FMT, cfg->cluster_name);
    rc = ol_etcd_create(&u->etcd, eps, ETCD_TIMEOUT_MS);
    uint8_t base[OL_CLUSTER_KEY_BYTES];
    char why[256] = "";
    if (rc == 0) {
        rc = ol_cluster_key(u->etcd, cfg->cluster_name, cfg->cluster_key_file, base, why,
                            sizeof(why));
        if (rc == 0)
            derive_key(u, base);
        OPENSSL_cleanse(base, sizeof(base));
    }
    int64_t rev = 0;
    if (rc == 0)
        rc = etcd_resync(u, &rev);
    if (rc == 0) {
        u->resync_due_ms = ol_mono_ms() + OL_USERS_RESYNC_MS;
        if (ol_etcd_watch_open(u->etcd, u->prefix, rev + 1, on_event, u, &u->watch) < 0)
            u->watch = NULL; /* the thread tries again */
        rc = start(u, err, errlen);
    } else {
        snprintf(err, errlen, "users: cannot read the users of cluster %s from etcd: %s %s",
                 cfg->cluster_name, ol_strerror(rc), why);
    }
    if (rc < 0) {
        ol_users_close(u);
        return rc;
    }
    *out = u;
    return 0;
}

void ol_users_close(struct ol_users *u)
{
    if (!u)
        return;
    if (u->started) {
        pthread_mutex_lock(&u->mu);
        u->stop = true;
        pthread_cond_signal(&u->cv);
        pthread_mutex_unlock(&u->mu);
        pthread_join(u->thread, NULL);
    }
    if (u->watch)
        ol_etcd_watch_close(u->watch);
    ol_etcd_destroy(u->etcd);
    OPENSSL_cleanse(u->tab, OL_USERS_MAX * sizeof(*u->tab));
    OPENSSL_cleanse(u->key, sizeof(u->key));
    free(u->tab);
    pthread_rwlock_destroy(&u->lk);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u);
}
