/* The users of a server: who may sign requests, and with which secret.
 *
 * Two kinds of user, one lookup:
 *   - configuration users (`user ACCESS SECRET` lines, core/cfg.h): the
 *     bootstrap users.  They are read once at start and can be neither
 *     removed nor rotated at run time (-EPERM): an admin who locks himself
 *     out can always come back through the file.  They win over a stored
 *     user of the same access key (that one is then ignored, with a warning).
 *   - run-time users (`openlake admin user add|remove|rotate`, the HTTP
 *     routes /_openlake/admin/users...): stored durably where the mode keeps
 *     its other metadata:
 *       one drive, erasure sets: through the object layer (obj/obj.h), as
 *         the setting "users" of the reserved bucket OL_USERS_BUCKET, so they
 *         have the durability (and, erasure-coded, the redundancy) of every
 *         bucket setting.  Bucket names that start with '.' are never valid
 *         S3 names: the S3 front end refuses them and ListBuckets skips them.
 *       a cluster: in etcd, one key per user under /openlake/<cluster>/users/
 *         (OL_USERS_ETCD_FMT), created with a create-only transaction so two
 *         nodes adding the same key agree on one.
 *
 * Every authentication path (SigV4, SigV2 and presigned URLs on the S3 port,
 * the native port) calls ol_users_lookup(), which reads memory only: the
 * table of this process.  What keeps that table true:
 *   - a change made through this process is applied to the table before
 *     its call returns (after it is durable), so it holds on this node at
 *     once: the next request sees it;
 *   - cluster: a thread watches the prefix (an etcd watch: other nodes'
 *     changes arrive within milliseconds) and re-reads it whole every
 *     OL_USERS_RESYNC_MS (a lost event is mended within that).  Each
 *     complete read stamps the table fresh with the time its request was
 *     sent.  A table not fresh for OL_USERS_STALE_MS (etcd unreachable, the
 *     thread stuck) answers -EAGAIN for every run-time user: the node fails
 *     closed.  So a removed or rotated key stops working on every node
 *     within OL_USERS_STALE_MS of its removal whatever happens to the
 *     network, and in practice within the watch's delay.  Configuration
 *     users keep working (they need no etcd).
 *
 * Secrets at rest are sealed with AES-256-GCM (a 12-byte random nonce, the
 * access key as associated data, so a record moved to another name does not
 * open) under SHA-256("openlake users v1" || base key), where the base key is
 *   - cluster: the cluster key (cluster/key.h): cluster_key_file's, else the
 *     one kept in etcd.  With cluster_key_file a reader of etcd learns no
 *     secret; without it the key sits in etcd next to the records, and the
 *     sealing only keeps secrets out of casual dumps and logs.
 *   - one drive, erasure sets: cluster_key_file's when set; else a fixed
 *     built-in key: the secrets are then obfuscated, not protected, from a
 *     reader of the drives (SigV4 needs the secret itself, so a hash cannot
 *     replace it).  Changing the key file makes the stored users unreadable
 *     (logged, skipped): re-add them.
 * Secrets are never logged; ol_users_list() never returns them.
 *
 * Admins: the users named by cfg admin_users (access/access.h); when that
 * setting is empty, the first configuration user (the bootstrap admin).
 *
 * Threads: lookup, is_admin and list from any thread (a read lock held for
 * a table search: never waits on I/O).  add, remove and rotate block until
 * durable: the work runs on the store's own thread, and the caller waits
 * on an ol_completion (core/loop.h), so a loop fiber may call them (it is
 * parked, its loop runs on).  open and close from the main thread.
 *
 * Limits: OL_USERS_MAX run-time users; access keys 3..128 bytes of
 * [A-Za-z0-9._-]; secrets 8..128 printable ASCII bytes without spaces.
 */
#ifndef OL_USERS_USERS_H
#define OL_USERS_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_cfg;
struct ol_obj;
struct ol_users;

#define OL_USERS_BUCKET ".openlake"
#define OL_USERS_SETTING "users"
#define OL_USERS_ETCD_FMT "/openlake/%s/users/"

enum {
    OL_USERS_MAX = 1000,
    OL_USERS_KEY_MAX = 128,     /* access key and secret, bytes */
    OL_USERS_SECRET_MIN = 8,
    OL_USERS_GEN_SECRET = 40,   /* a generated secret's length (as AWS's) */
    OL_USERS_RESYNC_MS = 1000,  /* cluster: full re-read period */
    OL_USERS_STALE_MS = 5000,   /* cluster: a table older than this fails closed */
    OL_USERS_WATCH_POLL_MS = 50 /* cluster: how long one watch poll waits */
};

/* Single node (one drive or erasure sets): loads the stored users through
 * obj (borrowed: it must outlive the store).  cfg is borrowed likewise.
 * Errors: the object layer's (a document that cannot be read), -ENOMEM,
 * the key file's (cluster/key.h); err says which. */
int ol_users_open_obj(const struct ol_cfg *cfg, struct ol_obj *obj, struct ol_users **out,
                      char *err, size_t errlen);
/* Cluster node (cfg->cluster, cluster_name, cluster_key_file): loads the
 * users from etcd and starts the watch thread.  etcd's errors. */
int ol_users_open_etcd(const struct ol_cfg *cfg, struct ol_users **out, char *err,
                       size_t errlen);
/* Only configuration users (tests, tools): no storage; add/remove/rotate
 * answer -ENOTSUP. */
int ol_users_open_static(const struct ol_cfg *cfg, struct ol_users **out);
/* Stops the thread and frees; no call may be in flight.  NULL is fine. */
void ol_users_close(struct ol_users *u);

/* The secret of access_key (len bytes, need not be NUL-terminated) into
 * secret_out (NUL-terminated); *admin_out (may be NULL): ol_users_is_admin.
 *   0        known
 *   -ENOENT  no such user (S3: InvalidAccessKeyId)
 *   -EAGAIN  a run-time user's state is unknown: the cluster table is
 *            stale (see above; S3: 503 ServiceUnavailable)
 * Never blocks on I/O.  The caller should wipe secret_out after use. */
int ol_users_lookup(struct ol_users *u, const char *access_key, size_t len,
                    char secret_out[OL_USERS_KEY_MAX + 1], bool *admin_out);
/* Whether access_key (NUL-terminated; NULL: no) is an admin (see above). */
bool ol_users_is_admin(const struct ol_users *u, const char *access_key);

/* Creates a run-time user.  secret NULL: a random one of OL_USERS_GEN_SECRET
 * characters.  secret_out (may be NULL when secret is given) gets the
 * secret, the one time it is ever returned.  -EINVAL (bad key or secret),
 * -EEXIST (a configuration or stored user has it), -ENOSPC (OL_USERS_MAX),
 * the storage's errors (the table is then unchanged). */
int ol_users_add(struct ol_users *u, const char *access_key, const char *secret,
                 char secret_out[OL_USERS_KEY_MAX + 1]);
/* Removes a run-time user.  -ENOENT, -EPERM (a configuration user). */
int ol_users_remove(struct ol_users *u, const char *access_key);
/* Gives a run-time user a new secret (secret NULL: generated), returned in
 * secret_out; the old one stops working.  -ENOENT, -EPERM, -EINVAL. */
int ol_users_rotate(struct ol_users *u, const char *access_key, const char *secret,
                    char secret_out[OL_USERS_KEY_MAX + 1]);

/* One user as listed: never its secret. */
struct ol_users_info {
    const char *access_key; /* borrowed for the call of fn */
    bool config;            /* from the configuration file */
    bool admin;
    int64_t created_s; /* Unix seconds; 0 for configuration users */
};
/* Calls fn for the configuration users, then the run-time ones in access
 * key order (a snapshot: fn may call anything but close).  A non-zero
 * return of fn stops the walk and is returned. */
int ol_users_list(struct ol_users *u, int (*fn)(void *ctx, const struct ol_users_info *i),
                  void *ctx);
/* How many run-time users the table holds. */
size_t ol_users_count(struct ol_users *u);

/* Syntax checks (the limits above). */
bool ol_users_key_valid(const char *access_key);
bool ol_users_secret_valid(const char *secret);

/* Sealing (exposed for the unit test): seals secret for access_key under
 * key into out as hex (nonce | ciphertext | tag), NUL-terminated; opens it
 * back.  -EINVAL (too long, or out too small), -EBADMSG (a record that does
 * not open: another key, another name, damage). */
enum { OL_USERS_SEALED_MAX = 2 * (12 + OL_USERS_KEY_MAX + 16) + 1 };
int ol_users_seal(const uint8_t key[32], const char *access_key, const char *secret,
                  char out[OL_USERS_SEALED_MAX]);
int ol_users_unseal(const uint8_t key[32], const char *access_key, const char *sealed,
                    size_t len, char secret_out[OL_USERS_KEY_MAX + 1]);

#endif
