/* Object versions: the versions database, delete markers and the versioned
 * replacement of current objects (docs/FORMAT.md, "versions").
 *
 * The current version of a key lives in the objects DB, exactly where an
 * unversioned object lives, so listing and unversioned buckets pay nothing.
 * Every other version, and every delete marker, lives in the versions DB
 * under bucket '\0' key '\0' ~id (the 16-byte version id with every bit
 * inverted), so a key's versions sort newest first right after the key.
 * Long keys go through index.c's group mechanism like objects-DB keys.
 *
 * A version's identity is an entry attribute (OL_VER_ATTR: 16-byte id and a
 * flags byte), so versions and markers are ordinary entries: space
 * accounting, relocation by the compactor and decoding are shared with the
 * objects DB.  A marker is an inline entry of 0 bytes with the MARKER flag.
 *
 * Invariant: when a key's newest version is an object, it is in the objects
 * DB; the versions DB holds the others.  So a key without a current object
 * whose newest version exists has a marker there.
 *
 * Threads: ol_ver_* functions marked "writer" run in the writer thread's
 * transaction; the public ones may be called from any thread or fiber. */
#include "store/store_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "core/hlc.h"
#include "core/log.h"

#define OL_VER_ATTR "ol.vid"
#define OL_VER_TAG_BYTES 17u
#define OL_VER_NULL 0x1u   /* the S3 "null" version (written while suspended) */
#define OL_VER_MARKER 0x2u /* a delete marker */
#define OL_VER_SCAN_MAX (1u << 20) /* versions of one key a scan looks at */
#define OL_VER_CONF "versioning"

struct ver_tag {
    struct ol_version_id id;
    uint8_t flags;
};

/* One clock per process: every version id is unique across the drives of a
 * process, and its boot nonce keeps ids of a restarted process distinct. */
static struct ol_hlc ver_clock;
static pthread_once_t ver_clock_once = PTHREAD_ONCE_INIT;

static void ver_clock_init(void)
{
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    ol_hlc_init(&ver_clock, 0, nonce, NULL, NULL);
}

static void ver_new_id(struct ol_version_id *id)
{
    pthread_once(&ver_clock_once, ver_clock_init);
    ol_hlc_version_id(&ver_clock, id);
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- tags ---- */

/* 0 with the tag, -OL_ENOCONFIG when the entry has none (an object written
 * while its bucket was unversioned: the "null" version), -OL_ECORRUPT. */
static int tag_get(const struct ol_entry *e, struct ver_tag *t)
{
    const uint8_t *val;
    size_t len;
    int rc = ol_attrs_find(e->attrs, e->h.attr_len, OL_VER_ATTR, &val, &len);
    if (rc)
        return rc;
    if (len != OL_VER_TAG_BYTES)
        return -OL_ECORRUPT;
    memcpy(t->id.b, val, OL_VERSION_ID_BYTES);
    t->flags = val[OL_VERSION_ID_BYTES];
    return 0;
}

static void tag_text(const struct ver_tag *t, char out[OL_STORE_VID_MAX])
{
    if (!t || (t->flags & OL_VER_NULL))
        memcpy(out, "null", 5);
    else
        ol_version_id_format(&t->id, out);
}

/* What a version id text asks for: the null version, or a real id. */
struct vid_want {
    bool null;
    struct ol_version_id id;
};

static int vid_parse(const char *s, struct vid_want *w)
{
    memset(w, 0, sizeof(*w));
    size_t n = strlen(s);
    if (n == 4 && memcmp(s, "null", 4) == 0) {
        w->null = true;
        return 0;
    }
    return ol_version_id_parse(&w->id, s, n) == 0 ? 0 : -OL_ENOVERSION;
}

static bool tag_matches(const struct ver_tag *t, bool tagged, const struct vid_want *w)
{
    if (w->null)
        return !tagged || (t->flags & OL_VER_NULL);
    return tagged && !(t->flags & OL_VER_NULL) && ol_version_id_cmp(&t->id, &w->id) == 0;
}

/* Re-encodes an entry with tag t (NULL removes it); *out is malloc'ed. */
static int entry_with_tag(const void *v, size_t len, const struct ver_tag *t, uint8_t **out,
                          size_t *out_len)
{
    struct ol_entry e;
    int rc = ol_entry_decode(v, len, &e);
    if (rc)
        return rc;
    uint8_t raw[OL_VER_TAG_BYTES];
    if (t) {
        memcpy(raw, t->id.b, OL_VERSION_ID_BYTES);
        raw[OL_VERSION_ID_BYTES] = t->flags;
    }
    uint8_t *attrs = NULL;
    size_t attr_len = 0;
    rc = ol_attrs_set(e.attrs, e.h.attr_len, OL_VER_ATTR, t ? raw : NULL, t ? sizeof(raw) : 0,
                      &attrs, &attr_len);
    if (rc)
        return rc;
    static const uint8_t none[1];
    struct ol_entry_over ov = {.attrs = attrs ? attrs : none, .attr_len = (uint32_t)attr_len};
    rc = ol_entry_rewrite(&e, &ov, out, out_len);
    free(attrs);
    return rc;
}

static int marker_build(struct ol_store *st, const struct ver_tag *t, uint8_t **out,
                        size_t *out_len)
{
    uint8_t raw[OL_VER_TAG_BYTES];
    memcpy(raw, t->id.b, OL_VERSION_ID_BYTES);
    raw[OL_VERSION_ID_BYTES] = t->flags;
    uint8_t *attrs = NULL;
    size_t attr_len = 0;
    int rc = ol_attrs_set(NULL, 0, OL_VER_ATTR, raw, sizeof(raw), &attrs, &attr_len);
    if (rc)
        return rc;
    static const uint8_t empty[1];
    struct ol_entry_src s = {
        .mtime_ns = wall_ns(),
        .etag = "",
        .attrs = attrs,
        .attr_len = (uint32_t)attr_len,
        .block_bytes = st->o.block_bytes,
        .is_inline = true,
        .inline_data = empty,
    };
    rc = ol_entry_build(&s, out, out_len);
    free(attrs);
    return rc;
}

/* ---- keys and scans ---- */

/* versions DB key: ik '\0' ~id.  Returns its length. */
static size_t vkey(uint8_t *out, const uint8_t *ik, size_t ikl, const struct ol_version_id *id)
{
    memcpy(out, ik, ikl);
    out[ikl] = 0;
    for (unsigned i = 0; i < OL_VERSION_ID_BYTES; i++)
        out[ikl + 1 + i] = (uint8_t)~id->b[i];
    return ikl + OL_IDX_VSUFFIX;
}

/* Whether versions-DB key k belongs to objects-DB key ik. */
static bool vkey_of(const uint8_t *k, size_t kl, const uint8_t *ik, size_t ikl)
{
    return kl == ikl + OL_IDX_VSUFFIX && memcmp(k, ik, ikl) == 0 && k[ikl] == 0;
}

/* Finds the newest version of ik (want_null: the newest null version):
 * 0 with its key (vk, OL_IDX_KEY_MAX bytes), value and tag, or -OL_ENOKEY. */
static int ver_scan(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                    bool want_null, uint8_t *vk, size_t *vkl, MDB_val *v, struct ver_tag *t)
{
    struct ol_idx_cur *cur = malloc(sizeof(*cur));
    if (!cur)
        return -ENOMEM;
    uint8_t pfx[OL_IDX_OBJ_KEY_MAX + 1];
    memcpy(pfx, ik, ikl);
    pfx[ikl] = 0;
    int rc = ol_idx_cur_open(txn, st->db_versions, cur);
    if (rc) {
        free(cur);
        return rc;
    }
    rc = ol_idx_cur_seek(cur, pfx, ikl + 1, true);
    for (uint32_t guard = 0; rc == 0 && guard < OL_VER_SCAN_MAX; guard++) {
        const uint8_t *k;
        size_t kl;
        int r = ol_idx_cur_next(cur, &k, &kl, v);
        if (r == 1 || (r == 0 && (kl < ikl + 1 || memcmp(k, pfx, ikl + 1) != 0))) {
            rc = -OL_ENOKEY;
            break;
        }
        if (r) {
            rc = r;
            break;
        }
        if (!vkey_of(k, kl, ik, ikl))
            continue; /* a longer key that happens to contain ik '\0' */
        struct ol_entry e;
        rc = ol_entry_decode(v->mv_data, v->mv_size, &e);
        if (rc == 0)
            rc = tag_get(&e, t);
        if (rc)
            break;
        if (want_null && !(t->flags & OL_VER_NULL))
            continue;
        memcpy(vk, k, kl);
        *vkl = kl;
        break;
    }
    ol_idx_cur_close(cur);
    free(cur);
    return rc;
}

static void *dup_bytes(const void *p, size_t n)
{
    void *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

/* ---- bucket state ---- */

enum ol_versioning ol_ver_state(struct ol_store *st, MDB_txn *txn, const char *bucket)
{
    uint8_t k[OL_BUCKET_MAX + 1 + OL_BCONF_NAME_MAX];
    int kl = ol_bconf_key(k, bucket, OL_VER_CONF);
    if (kl < 0)
        return OL_VERSIONING_OFF;
    MDB_val mk = {(size_t)kl, k}, mv;
    if (mdb_get(txn, st->db_bconf, &mk, &mv) != 0)
        return OL_VERSIONING_OFF;
    const uint8_t *val;
    size_t len;
    if (ol_bconf_decode(mv.mv_data, mv.mv_size, &val, &len) != 0)
        return OL_VERSIONING_OFF;
    if (len == 7 && memcmp(val, "Enabled", 7) == 0)
        return OL_VERSIONING_ENABLED;
    if (len == 9 && memcmp(val, "Suspended", 9) == 0)
        return OL_VERSIONING_SUSPENDED;
    return OL_VERSIONING_OFF;
}

int ol_store_versioning_put(struct ol_store *st, const char *bucket, enum ol_versioning v)
{
    if (v == OL_VERSIONING_ENABLED)
        return ol_store_bucket_config_put(st, bucket, OL_VER_CONF, "Enabled", 7);
    if (v == OL_VERSIONING_SUSPENDED)
        return ol_store_bucket_config_put(st, bucket, OL_VER_CONF, "Suspended", 9);
    return -EINVAL;
}

int ol_store_versioning_get(struct ol_store *st, const char *bucket, enum ol_versioning *out)
{
    char buf[16];
    ssize_t n = ol_store_bucket_config_get(st, bucket, OL_VER_CONF, buf, sizeof(buf));
    *out = OL_VERSIONING_OFF;
    if (n == -OL_ENOCONFIG)
        return 0;
    if (n < 0)
        return (int)n;
    if (n == 7 && memcmp(buf, "Enabled", 7) == 0)
        *out = OL_VERSIONING_ENABLED;
    else if (n == 9 && memcmp(buf, "Suspended", 9) == 0)
        *out = OL_VERSIONING_SUSPENDED;
    return 0;
}

/* ---- writer thread ---- */

/* Removes every null version of ik from the versions DB (writer). */
static int drop_null_versions(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl)
{
    struct ol_store *st = ol_batch_store(bc);
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    if (!vk)
        return -ENOMEM;
    int rc = 0;
    /* A key has at most one null version; the bound only guards a damaged
     * index. */
    for (int i = 0; i < 16 && rc == 0; i++) {
        size_t vkl;
        MDB_val v;
        struct ver_tag t;
        rc = ver_scan(st, txn, ik, ikl, true, vk, &vkl, &v, &t);
        if (rc == -OL_ENOKEY) {
            rc = 0;
            break;
        }
        if (rc == 0) {
            void *copy = dup_bytes(v.mv_data, v.mv_size);
            if (!copy) {
                rc = -ENOMEM;
                break;
            }
            rc = ol_writer_space(bc, txn, copy, v.mv_size, -1);
            free(copy);
        }
        if (rc == 0)
            rc = ol_idx_del(txn, st->db_versions, vk, vkl);
    }
    free(vk);
    return rc;
}

/* Makes the newest version of ik current when it is an object and ik has no
 * current object (writer). */
static int promote(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl)
{
    struct ol_store *st = ol_batch_store(bc);
    MDB_val cur;
    int rc = ol_idx_get(txn, st->db_objects, ik, ikl, &cur);
    if (rc != -OL_ENOKEY)
        return rc;
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    if (!vk)
        return -ENOMEM;
    size_t vkl;
    MDB_val v;
    struct ver_tag t;
    void *copy = NULL;
    rc = ver_scan(st, txn, ik, ikl, false, vk, &vkl, &v, &t);
    if (rc == -OL_ENOKEY || (rc == 0 && (t.flags & OL_VER_MARKER))) {
        rc = 0;
        goto out;
    }
    if (rc)
        goto out;
    copy = dup_bytes(v.mv_data, v.mv_size);
    if (!copy) {
        rc = -ENOMEM;
        goto out;
    }
    size_t len = v.mv_size;
    /* The entry moves with its extents: the space accounting is unchanged. */
    rc = ol_idx_del(txn, st->db_versions, vk, vkl);
    if (rc == 0)
        rc = ol_idx_put(txn, st->db_objects, ik, ikl, copy, len);
    if (rc == 0)
        rc = ol_idx_meta_add(txn, st->db_meta, "objects", 1);
out:
    free(copy);
    free(vk);
    return rc;
}

static bool has_attrs(const void *v, size_t len)
{
    struct ol_entry_hdr h;
    if (len < sizeof(h))
        return false;
    memcpy(&h, v, sizeof(h));
    return h.attr_len > 0;
}

int ol_ver_replace(struct batch_ctx *bc, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                   const void *v, size_t vlen, char vid_out[OL_STORE_VID_MAX])
{
    struct ol_store *st = ol_batch_store(bc);
    uint8_t *old = NULL, *nv = NULL, *ov = NULL, *vk = NULL;
    size_t old_len = 0, nvl = 0, ovl = 0;
    int rc = 0;
    if (vid_out)
        vid_out[0] = 0;
    enum ol_versioning vs = ol_ver_state(st, txn, (const char *)ik);
    if (vs == OL_VERSIONING_OFF) {
        /* A copy of a versioned object brings the source's version tag:
         * an unversioned bucket's objects carry none. */
        struct ol_entry e;
        struct ver_tag t;
        if (v && has_attrs(v, vlen) && ol_entry_decode(v, vlen, &e) == 0 &&
            tag_get(&e, &t) == 0) {
            rc = entry_with_tag(v, vlen, NULL, &nv, &nvl);
            if (rc)
                goto out;
            v = nv;
            vlen = nvl;
        }
        rc = ol_obj_replace_plain(bc, txn, ik, ikl, v, vlen);
        goto out;
    }
    vk = malloc(OL_IDX_KEY_MAX);
    if (!vk) {
        rc = -ENOMEM;
        goto out;
    }
    MDB_val cur;
    rc = ol_idx_get(txn, st->db_objects, ik, ikl, &cur);
    if (rc == 0) {
        old_len = cur.mv_size;
        old = dup_bytes(cur.mv_data, cur.mv_size);
        if (!old)
            rc = -ENOMEM;
    } else if (rc == -OL_ENOKEY) {
        rc = 0;
    } else if (rc == -OL_ECORRUPT) {
        /* A damaged current entry cannot be kept as a version. */
        rc = ol_obj_replace_plain(bc, txn, ik, ikl, NULL, 0);
    }
    if (rc)
        goto out;
    struct ver_tag ot = {0};
    bool old_null = true;
    if (old) {
        struct ol_entry e;
        rc = ol_entry_decode(old, old_len, &e);
        if (rc == 0) {
            rc = tag_get(&e, &ot);
            if (rc == -OL_ENOCONFIG) {
                /* Written before versioning: it becomes the null version,
                 * ordered by an id taken now (before the new version's). */
                ver_new_id(&ot.id);
                ot.flags = OL_VER_NULL;
                rc = 0;
            }
        }
        if (rc)
            goto out;
        old_null = (ot.flags & OL_VER_NULL) != 0;
    }
    struct ver_tag nt;
    ver_new_id(&nt.id);
    nt.flags = (uint8_t)((vs == OL_VERSIONING_SUSPENDED ? OL_VER_NULL : 0) |
                         (v ? 0 : OL_VER_MARKER));
    if (vs == OL_VERSIONING_SUSPENDED) {
        rc = drop_null_versions(bc, txn, ik, ikl);
        if (rc)
            goto out;
    }
    if (old && vs == OL_VERSIONING_SUSPENDED && old_null) {
        /* The new null version replaces the old one. */
        rc = ol_writer_space(bc, txn, old, old_len, -1);
    } else if (old) {
        /* The replaced version keeps its extents' references. */
        rc = entry_with_tag(old, old_len, &ot, &ov, &ovl);
        if (rc == 0)
            rc = ol_idx_put(txn, st->db_versions, vk, vkey(vk, ik, ikl, &ot.id), ov, ovl);
    }
    if (rc)
        goto out;
    free(nv);
    nv = NULL;
    if (v) {
        rc = entry_with_tag(v, vlen, &nt, &nv, &nvl);
        if (rc == 0)
            rc = ol_idx_put(txn, st->db_objects, ik, ikl, nv, nvl);
        if (rc == 0)
            rc = ol_writer_space(bc, txn, nv, nvl, 1);
        if (rc == 0 && !old)
            rc = ol_idx_meta_add(txn, st->db_meta, "objects", 1);
    } else {
        if (old) {
            rc = ol_idx_del(txn, st->db_objects, ik, ikl);
            if (rc == 0)
                rc = ol_idx_meta_add(txn, st->db_meta, "objects", -1);
        }
        if (rc == 0)
            rc = marker_build(st, &nt, &nv, &nvl);
        if (rc == 0)
            rc = ol_idx_put(txn, st->db_versions, vk, vkey(vk, ik, ikl, &nt.id), nv, nvl);
    }
    if (rc == 0 && vid_out)
        tag_text(&nt, vid_out);
out:
    free(old);
    free(nv);
    free(ov);
    free(vk);
    return rc;
}

/* Finds version w of ik: in the objects DB (*current set) or the versions DB
 * (vk and vkl set).  0 with *v and *t (*tagged false: an untagged current
 * object), -OL_ENOVERSION. */
static int ver_find(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                    const struct vid_want *w, MDB_val *v, struct ver_tag *t, bool *tagged,
                    bool *current, uint8_t *vk, size_t *vkl)
{
    *current = false;
    *tagged = true;
    int rc = ol_idx_get(txn, st->db_objects, ik, ikl, v);
    if (rc == 0) {
        struct ol_entry e;
        rc = ol_entry_decode(v->mv_data, v->mv_size, &e);
        if (rc)
            return rc;
        rc = tag_get(&e, t);
        if (rc && rc != -OL_ENOCONFIG)
            return rc;
        *tagged = rc == 0;
        if (tag_matches(t, *tagged, w)) {
            *current = true;
            return 0;
        }
    } else if (rc != -OL_ENOKEY) {
        return rc;
    }
    *tagged = true;
    if (w->null) {
        rc = ver_scan(st, txn, ik, ikl, true, vk, vkl, v, t);
        return rc == -OL_ENOKEY ? -OL_ENOVERSION : rc;
    }
    *vkl = vkey(vk, ik, ikl, &w->id);
    rc = ol_idx_get(txn, st->db_versions, vk, *vkl, v);
    if (rc)
        return rc == -OL_ENOKEY ? -OL_ENOVERSION : rc;
    struct ol_entry e;
    rc = ol_entry_decode(v->mv_data, v->mv_size, &e);
    if (rc == 0)
        rc = tag_get(&e, t);
    if (rc)
        return rc == -OL_ENOCONFIG ? -OL_ECORRUPT : rc;
    return tag_matches(t, true, w) ? 0 : -OL_ENOVERSION;
}

int ol_ver_lookup(struct ol_store *st, MDB_txn *txn, const uint8_t *ik, size_t ikl,
                  const char *vid, MDB_val *v)
{
    struct vid_want w;
    int rc = vid_parse(vid, &w);
    if (rc)
        return rc;
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    if (!vk)
        return -ENOMEM;
    struct ver_tag t;
    bool tagged, current;
    size_t vkl;
    rc = ver_find(st, txn, ik, ikl, &w, v, &t, &tagged, &current, vk, &vkl);
    free(vk);
    if (rc == 0 && tagged && (t.flags & OL_VER_MARKER))
        rc = -OL_EMARKER;
    return rc;
}

int ol_ver_delete_version(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    struct ol_store *st = ol_batch_store(bc);
    MDB_val bk = {strlen(op->bucket), (void *)op->bucket}, bv;
    int rc = mdb_get(txn, st->db_buckets, &bk, &bv);
    if (rc)
        return rc == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(rc);
    struct vid_want w;
    rc = vid_parse(op->vid, &w);
    if (rc)
        return rc;
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    void *copy = NULL;
    if (!vk)
        return -ENOMEM;
    MDB_val v;
    struct ver_tag t;
    bool tagged, current;
    size_t vkl = 0;
    rc = ver_find(st, txn, op->ikey, op->ikey_len, &w, &v, &t, &tagged, &current, vk, &vkl);
    if (rc)
        goto out;
    size_t len = v.mv_size;
    copy = dup_bytes(v.mv_data, len);
    if (!copy) {
        rc = -ENOMEM;
        goto out;
    }
    op->marker = tagged && (t.flags & OL_VER_MARKER);
    tag_text(tagged ? &t : NULL, op->vid_out);
    rc = ol_writer_space(bc, txn, copy, len, -1);
    if (rc)
        goto out;
    if (current) {
        rc = ol_idx_del(txn, st->db_objects, op->ikey, op->ikey_len);
        if (rc == 0)
            rc = ol_idx_meta_add(txn, st->db_meta, "objects", -1);
    } else {
        rc = ol_idx_del(txn, st->db_versions, vk, vkl);
    }
    /* Removing the latest version makes the previous one current. */
    if (rc == 0)
        rc = promote(bc, txn, op->ikey, op->ikey_len);
out:
    free(copy);
    free(vk);
    return rc;
}

/* The version an in-place change names (op->vid; NULL: the current
 * object), decoded into *e from the index: *current says where it lives
 * (the objects DB, else the versions DB under vk[0..*vkl), vk holding
 * OL_IDX_KEY_MAX bytes), *tagged and *t its version tag.  -OL_ENOBUCKET,
 * the lookup's error, or -OL_EMARKER for a delete marker (nothing to
 * change on one). */
static int ver_locate(struct ol_store *st, MDB_txn *txn, const struct ol_op *op,
                      struct ol_entry *e, struct ver_tag *t, bool *tagged, bool *current,
                      uint8_t *vk, size_t *vkl)
{
    MDB_val bk = {strlen(op->bucket), (void *)op->bucket}, v;
    int rc = mdb_get(txn, st->db_buckets, &bk, &v);
    if (rc)
        return rc == MDB_NOTFOUND ? -OL_ENOBUCKET : ol_mdb_err(rc);
    *tagged = false;
    *current = true;
    if (op->vid) {
        struct vid_want w;
        rc = vid_parse(op->vid, &w);
        if (rc == 0)
            rc = ver_find(st, txn, op->ikey, op->ikey_len, &w, &v, t, tagged, current, vk, vkl);
    } else {
        rc = ol_idx_get(txn, st->db_objects, op->ikey, op->ikey_len, &v);
    }
    if (rc == 0)
        rc = ol_entry_decode(v.mv_data, v.mv_size, e);
    if (rc == 0 && !op->vid) {
        rc = tag_get(e, t);
        if (rc && rc != -OL_ENOCONFIG)
            return rc;
        *tagged = rc == 0;
        rc = 0;
    }
    if (rc == 0 && *tagged && (t->flags & OL_VER_MARKER))
        rc = -OL_EMARKER;
    return rc;
}

/* Writes a version's re-encoded entry back where ver_locate found it. */
static int ver_put_back(struct ol_store *st, MDB_txn *txn, const struct ol_op *op, bool current,
                        const uint8_t *vk, size_t vkl, const uint8_t *entry, size_t entry_len)
{
    if (current)
        return ol_idx_put(txn, st->db_objects, op->ikey, op->ikey_len, entry, entry_len);
    return ol_idx_put(txn, st->db_versions, vk, vkl, entry, entry_len);
}

/* What an in-place change makes of version e (tagged with *t, or untagged):
 * the parts of its entry to replace (*ov), in *owned what the caller frees
 * after the rewrite; and the version's id into op->vid_out where the op
 * reports one.  0, or an error: the entry stays as it is. */
typedef int (*ver_edit_fn)(struct ol_op *op, const struct ol_entry *e, const struct ver_tag *t,
                           struct ol_entry_over *ov, uint8_t **owned);

/* Finds version op->vid (NULL: the current object) wherever it lives,
 * re-encodes its entry with edit's changes and the same data and sizes (so
 * space accounting is unchanged), and writes it back in place. */
static int ver_rewrite(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op, ver_edit_fn edit)
{
    struct ol_store *st = ol_batch_store(bc);
    uint8_t *owned = NULL, *entry = NULL;
    size_t vkl = 0, entry_len = 0;
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    if (!vk)
        return -ENOMEM;
    struct ver_tag t;
    bool tagged = false, current = false;
    struct ol_entry e;
    int rc = ver_locate(st, txn, op, &e, &t, &tagged, &current, vk, &vkl);
    struct ol_entry_over ov = {0};
    if (rc == 0)
        rc = edit(op, &e, tagged ? &t : NULL, &ov, &owned);
    if (rc == 0)
        rc = ol_entry_rewrite(&e, &ov, &entry, &entry_len);
    if (rc == 0)
        rc = ver_put_back(st, txn, op, current, vk, vkl, entry, entry_len);
    free(entry);
    free(owned);
    free(vk);
    return rc;
}

/* OL_OP_ATTR_PUT_VERSION's edit: attribute op->name set or removed.  A
 * version written before versioning has no id: "null" when asked by id,
 * none ("") when asked as the current object, as the reads answer. */
static int attr_edit(struct ol_op *op, const struct ol_entry *e, const struct ver_tag *t,
                     struct ol_entry_over *ov, uint8_t **owned)
{
    if (t || op->vid)
        tag_text(t, op->vid_out);
    size_t attr_len = 0;
    int rc = ol_attrs_set(e->attrs, e->h.attr_len, op->name, op->val, op->val_len, owned,
                          &attr_len);
    if (rc)
        return rc;
    static const uint8_t none[1];
    ov->attrs = *owned ? *owned : none;
    ov->attr_len = (uint32_t)attr_len;
    return 0;
}

/* OL_OP_META_PATCH_VERSION's edit: op->val_len bytes of the meta blob at
 * op->patch_off replaced by op->val, if they still are op->patch_expect
 * (else -EAGAIN). */
static int meta_patch_edit(struct ol_op *op, const struct ol_entry *e, const struct ver_tag *t,
                           struct ol_entry_over *ov, uint8_t **owned)
{
    size_t ml = e->h.meta_len;
    if (ml < op->patch_off || ml - op->patch_off < op->val_len ||
        memcmp(e->meta + op->patch_off, op->patch_expect, op->val_len) != 0)
        return -EAGAIN;
    if (!(*owned = dup_bytes(e->meta, ml)))
        return -ENOMEM;
    memcpy(*owned + op->patch_off, op->val, op->val_len);
    tag_text(t, op->vid_out);
    ov->meta = *owned;
    ov->meta_len = (uint32_t)ml;
    return 0;
}

/* OL_OP_ATTR_PUT_VERSION: sets or removes attribute op->name of version
 * op->vid (NULL: the current object), wherever the version lives.  A
 * delete marker has no attributes: -OL_EMARKER. */
int ol_ver_attr_put(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    return ver_rewrite(bc, txn, op, attr_edit);
}

/* OL_OP_META_PATCH_VERSION: patches bytes of version op->vid's meta blob
 * wherever the version lives (objects DB when current, versions DB
 * otherwise). */
int ol_ver_meta_patch(struct batch_ctx *bc, MDB_txn *txn, struct ol_op *op)
{
    return ver_rewrite(bc, txn, op, meta_patch_edit);
}

int ol_ver_bucket_check_empty(struct ol_store *st, MDB_txn *txn, const char *bucket)
{
    size_t bl = strlen(bucket);
    uint8_t pfx[OL_BUCKET_MAX + 1];
    if (bl > OL_BUCKET_MAX)
        return -EINVAL;
    memcpy(pfx, bucket, bl);
    pfx[bl] = 0;
    MDB_cursor *c = NULL;
    int rc = ol_mdb_err(mdb_cursor_open(txn, st->db_versions, &c));
    if (rc)
        return rc;
    MDB_val k = {bl + 1, pfx}, v;
    int mr = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    if (mr == 0 && k.mv_size >= bl + 1 && memcmp(k.mv_data, pfx, bl + 1) == 0)
        rc = -OL_EBUCKETNOTEMPTY;
    else if (mr && mr != MDB_NOTFOUND)
        rc = ol_mdb_err(mr);
    mdb_cursor_close(c);
    return rc;
}

/* ---- public calls ---- */

static int bucket_missing(struct ol_store *st, MDB_txn *txn, const char *bucket)
{
    MDB_val bk = {strlen(bucket), (void *)bucket}, bv;
    return mdb_get(txn, st->db_buckets, &bk, &bv) == MDB_NOTFOUND;
}

struct find_ctx {
    struct ol_store *st;
    const char *bucket;
    const uint8_t *ik;
    size_t ikl;
    const char *vid;
};

static int find_version(void *ctx, MDB_txn *txn, MDB_val *v)
{
    struct find_ctx *f = ctx;
    int rc = ol_ver_lookup(f->st, txn, f->ik, f->ikl, f->vid, v);
    if ((rc == -OL_ENOVERSION || rc == -OL_ENOKEY) && bucket_missing(f->st, txn, f->bucket))
        rc = -OL_ENOBUCKET;
    return rc;
}

int ol_store_read_open_v(struct ol_store *st, const char *bucket, const char *key,
                         size_t key_len, const char *vid, struct ol_store_reader **out)
{
    if (!vid)
        return ol_store_read_open(st, bucket, key, key_len, out);
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    struct find_ctx f = {st, bucket, ik, (size_t)kl, vid};
    return ol_reader_open_fn(st, find_version, &f, out);
}

int ol_store_read_vid(const struct ol_store_reader *r, char vid[OL_STORE_VID_MAX])
{
    const uint8_t *val;
    size_t len;
    struct ver_tag t;
    if (ol_store_read_attr(r, OL_VER_ATTR, &val, &len) == 0 && len == OL_VER_TAG_BYTES) {
        memcpy(t.id.b, val, OL_VERSION_ID_BYTES);
        t.flags = val[OL_VERSION_ID_BYTES];
        tag_text(&t, vid);
        return 0;
    }
    tag_text(NULL, vid);
    return -OL_ENOCONFIG;
}

int ol_store_latest_marker(struct ol_store *st, const char *bucket, const char *key,
                           size_t key_len, char vid[OL_STORE_VID_MAX], int64_t *mtime_ns)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl;
    uint8_t *vk = malloc(OL_IDX_KEY_MAX);
    if (!vk)
        return -ENOMEM;
    MDB_txn *txn = NULL;
    int rc = ol_rd_begin(st, &txn);
    if (rc) {
        free(vk);
        return rc;
    }
    MDB_val v;
    rc = ol_idx_get(txn, st->db_objects, ik, (size_t)kl, &v);
    if (rc == 0 || rc != -OL_ENOKEY)
        goto out;
    size_t vkl;
    struct ver_tag t;
    rc = ver_scan(st, txn, ik, (size_t)kl, false, vk, &vkl, &v, &t);
    if (rc == -OL_ENOKEY || (rc == 0 && !(t.flags & OL_VER_MARKER))) {
        rc = 0;
        goto out;
    }
    if (rc)
        goto out;
    struct ol_entry e;
    rc = ol_entry_decode(v.mv_data, v.mv_size, &e);
    if (rc)
        goto out;
    tag_text(&t, vid);
    if (mtime_ns)
        *mtime_ns = e.h.mtime_ns;
    rc = 1;
out:
    ol_rd_end(st, txn);
    free(vk);
    return rc;
}

int ol_store_delete_v(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
                      const char *vid, struct ol_store_del_res *res)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl;
    struct ol_op op = {
        .type = vid ? OL_OP_DELETE_VERSION : OL_OP_DELETE,
        .bucket = bucket,
        .ikey = ik,
        .ikey_len = (size_t)kl,
        .vid = vid,
    };
    int rc = ol_commit_run(st, &op);
    if (rc == 0 && res) {
        memcpy(res->vid, op.vid_out, sizeof(res->vid));
        res->marker = vid ? op.marker : op.vid_out[0] != 0;
    }
    return rc;
}

int ol_attr_op_run(struct ol_store *st, enum ol_op_type type, const char *bucket,
                   const char *key, size_t key_len, const char *vid, const char *name,
                   const void *val, size_t len, char vid_out[OL_STORE_VID_MAX])
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    size_t nl = name ? strlen(name) : 0;
    /* "ol." names are the store's own (the version id): never the caller's. */
    if (nl == 0 || nl > OL_ATTR_NAME_MAX || strncmp(name, "ol.", 3) == 0)
        return -EINVAL;
    if (len > OL_ATTR_VAL_MAX)
        return -OL_ETOOLARGE;
    static const uint8_t empty[1];
    struct ol_op op = {
        .type = type,
        .bucket = bucket,
        .ikey = ik,
        .ikey_len = (size_t)kl,
        .vid = vid,
        .name = name,
        .val = val ? (len ? val : empty) : NULL,
        .val_len = val ? len : 0,
    };
    int rc = ol_commit_run(st, &op);
    if (rc == 0 && vid_out)
        memcpy(vid_out, op.vid_out, OL_STORE_VID_MAX);
    return rc;
}

int ol_store_object_attr_put_v(struct ol_store *st, const char *bucket, const char *key,
                               size_t key_len, const char *vid, const char *name,
                               const void *val, size_t len, char vid_out[OL_STORE_VID_MAX])
{
    return ol_attr_op_run(st, OL_OP_ATTR_PUT_VERSION, bucket, key, key_len, vid, name, val, len,
                          vid_out);
}

int ol_store_copy_object_v(struct ol_store *st, const char *src_bucket, const char *src_key,
                           size_t src_len, const char *src_vid, const char *dst_bucket,
                           const char *dst_key, size_t dst_len,
                           const struct ol_store_copy_opts *o, struct ol_obj_info *out,
                           char vid[OL_STORE_VID_MAX])
{
    uint8_t sk[OL_IDX_KEY_MAX], dk[OL_IDX_KEY_MAX];
    int skl = ol_idx_key(sk, src_bucket, src_key, src_len);
    if (skl < 0)
        return skl == -EINVAL && src_len > 0 ? -OL_ENOBUCKET : skl;
    int dkl = ol_idx_key(dk, dst_bucket, dst_key, dst_len);
    if (dkl < 0)
        return dkl == -EINVAL && dst_len > 0 ? -OL_ENOBUCKET : dkl;
    struct ol_store_copy_opts def;
    if (!o) {
        memset(&def, 0, sizeof(def));
        o = &def;
    }
    int rc = ol_attrs_check(o->attrs, o->nattrs, true);
    if (rc)
        return rc;
    struct ol_op op = {
        .type = OL_OP_COPY_OBJECT,
        .bucket = dst_bucket,
        .ikey = dk,
        .ikey_len = (size_t)dkl,
        .src_bucket = src_bucket,
        .src_ikey = sk,
        .src_ikey_len = (size_t)skl,
        .copy = o,
        .info = out,
        .vid = src_vid,
    };
    rc = ol_commit_run(st, &op);
    if (vid)
        memcpy(vid, op.vid_out, OL_STORE_VID_MAX);
    return rc;
}

/* Runs ops[0] (filled by the caller) and then the deletes of the versions
 * in drop as one chain: each delete only after ops[0] succeeded, usually in
 * its commit.  ops has room for 1 + ndrop (at most OL_STORE_DROP_MAX). */
static int run_with_drops(struct ol_store *st, struct ol_op *ops, const char *bucket,
                          const uint8_t *ik, size_t kl, const char *const *drop, unsigned ndrop,
                          int *drop_rc)
{
    struct ol_op *q[1 + OL_STORE_DROP_MAX];
    q[0] = &ops[0];
    for (unsigned i = 0; i < ndrop; i++) {
        ops[1 + i] = (struct ol_op){
            .type = OL_OP_DELETE_VERSION,
            .bucket = bucket,
            .ikey = ik,
            .ikey_len = kl,
            .vid = drop[i],
            .after = &ops[0],
        };
        q[1 + i] = &ops[1 + i];
    }
    int rc = ol_commit_run_chain(st, q, 1 + ndrop);
    for (unsigned i = 0; drop_rc && i < ndrop; i++)
        drop_rc[i] = ops[1 + i].result;
    return rc;
}

int ol_store_rewrite_v(struct ol_store *st, const char *bucket, const char *key, size_t key_len,
                       const char *vid, const struct ol_store_copy_opts *o,
                       char new_vid[OL_STORE_VID_MAX], const char *const *drop, unsigned ndrop,
                       int *drop_rc)
{
    if (ndrop > OL_STORE_DROP_MAX || !vid || !o)
        return -EINVAL;
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    int rc = ol_attrs_check(o->attrs, o->nattrs, true);
    if (rc)
        return rc;
    struct ol_obj_info info;
    struct ol_op ops[1 + OL_STORE_DROP_MAX];
    memset(ops, 0, (1 + ndrop) * sizeof(ops[0]));
    ops[0] = (struct ol_op){
        .type = OL_OP_COPY_OBJECT,
        .bucket = bucket,
        .ikey = ik,
        .ikey_len = (size_t)kl,
        .src_bucket = bucket,
        .src_ikey = ik,
        .src_ikey_len = (size_t)kl,
        .copy = o,
        .info = &info,
        .vid = vid,
    };
    rc = run_with_drops(st, ops, bucket, ik, (size_t)kl, drop, ndrop, drop_rc);
    if (new_vid)
        memcpy(new_vid, ops[0].vid_out, OL_STORE_VID_MAX);
    return rc;
}

int ol_store_patch_meta_v(struct ol_store *st, const char *bucket, const char *key,
                          size_t key_len, const char *vid, uint32_t off, const void *expect,
                          const void *val, uint32_t len, const char *const *drop, unsigned ndrop,
                          int *drop_rc)
{
    if (ndrop > OL_STORE_DROP_MAX || !vid || !expect || !val || len == 0 ||
        len > OL_STORE_PATCH_MAX)
        return -EINVAL;
    uint8_t ik[OL_IDX_KEY_MAX];
    int kl = ol_idx_key(ik, bucket, key, key_len);
    if (kl < 0)
        return kl == -EINVAL && key_len > 0 ? -OL_ENOBUCKET : kl;
    struct ol_op ops[1 + OL_STORE_DROP_MAX];
    memset(ops, 0, (1 + ndrop) * sizeof(ops[0]));
    ops[0] = (struct ol_op){
        .type = OL_OP_META_PATCH_VERSION,
        .bucket = bucket,
        .ikey = ik,
        .ikey_len = (size_t)kl,
        .vid = vid,
        .val = val,
        .val_len = len,
        .patch_off = off,
        .patch_expect = expect,
    };
    return run_with_drops(st, ops, bucket, ik, (size_t)kl, drop, ndrop, drop_rc);
}

/* Decodes the entry v into vi's version fields (is_latest is the
 * caller's; vi zeroed before).  Pointers into v, valid as v is. */
static int vinfo_fill(const MDB_val *v, struct ol_version_info *vi)
{
    struct ol_entry e;
    int rc = ol_entry_decode(v->mv_data, v->mv_size, &e);
    if (rc)
        return rc;
    struct ver_tag t;
    rc = tag_get(&e, &t);
    if (rc && rc != -OL_ENOCONFIG)
        return rc;
    tag_text(rc == 0 ? &t : NULL, vi->vid);
    vi->is_marker = rc == 0 && (t.flags & OL_VER_MARKER);
    vi->info.size = e.h.size;
    vi->info.mtime_ns = e.h.mtime_ns;
    memcpy(vi->info.etag, e.h.etag, sizeof(vi->info.etag));
    vi->info.etag[sizeof(vi->info.etag) - 1] = 0;
    vi->info.nparts = e.h.nparts;
    vi->info.meta = e.meta;
    vi->info.meta_len = e.h.meta_len;
    if (e.h.flags & OL_ENTRY_INLINE) {
        vi->inline_data = e.data;
        vi->inline_crc = e.h.inline_crc;
    }
    return 0;
}

/* ---- the versions of one key ---- */

/* Hands fn the version stored in v. */
static int version_give(const MDB_val *v, bool latest, ol_store_version_fn fn, void *ctx)
{
    struct ol_version_info vi;
    memset(&vi, 0, sizeof(vi));
    vi.is_latest = latest;
    int rc = vinfo_fill(v, &vi);
    return rc ? rc : fn(ctx, &vi);
}

int ol_store_key_versions(struct ol_store *st, const char *bucket, const char *key,
                          size_t key_len, ol_store_version_fn fn, void *ctx)
{
    uint8_t ik[OL_IDX_KEY_MAX];
    int ikl = ol_idx_key(ik, bucket, key, key_len);
    if (ikl < 0)
        return ikl == -EINVAL && key_len > 0 ? 0 : ikl; /* no such bucket: nothing */
    MDB_txn *txn;
    int rc = ol_rd_begin(st, &txn);
    if (rc)
        return rc;
    /* The current version: one lookup, not a cursor.  A missing bucket
     * holds no key, so it needs no look of its own. */
    MDB_val v;
    bool first = true;
    rc = ol_idx_get(txn, st->db_objects, ik, (size_t)ikl, &v);
    if (rc == 0) {
        first = false;
        rc = version_give(&v, true, fn, ctx);
    } else if (rc == -OL_ENOKEY) {
        rc = 0;
    }
    /* The others: the versions DB's run of ik '\0' ~id, which ends at the
     * first key without that prefix; longer keys that share it (a key with
     * ik '\0' at its head) are passed over undecoded, as ver_scan does. */
    struct ol_idx_cur cur;
    bool open = false;
    if (rc == 0) {
        rc = ol_idx_cur_open(txn, st->db_versions, &cur);
        open = rc == 0;
    }
    ik[ikl] = 0;
    if (rc == 0)
        rc = ol_idx_cur_seek(&cur, ik, (size_t)ikl + 1, true);
    for (uint32_t guard = 0; rc == 0 && guard < OL_VER_SCAN_MAX; guard++) {
        const uint8_t *k;
        size_t kl;
        int r = ol_idx_cur_next(&cur, &k, &kl, &v);
        if (r == 1 || (r == 0 && (kl < (size_t)ikl + 1 || memcmp(k, ik, (size_t)ikl + 1) != 0)))
            break;
        if (r < 0) {
            rc = r;
            break;
        }
        if (kl != (size_t)ikl + OL_IDX_VSUFFIX)
            continue;
        rc = version_give(&v, first, fn, ctx);
        first = false;
    }
    if (open)
        ol_idx_cur_close(&cur);
    ol_rd_end(st, txn);
    return rc < 0 ? rc : 0;
}

/* ---- listing every version ---- */

struct ol_store_viter {
    struct ol_store *st;
    MDB_txn *txn;
    size_t pl;
    uint8_t pfx[OL_BUCKET_MAX + 1]; /* bucket '\0' */
    struct ol_idx_cur oc, vc;       /* objects, versions */
    bool o_has, o_end, v_has, v_end;
    const uint8_t *ok, *vk;
    size_t okl, vkl;
    MDB_val ov, vv;
    bool last_valid; /* last holds the key whose latest version was returned */
    size_t last_len;
    uint8_t last[OL_IDX_OBJ_KEY_MAX];
    uint8_t key[OL_IDX_OBJ_KEY_MAX]; /* the key returned */
};

int ol_store_viter_open(struct ol_store *st, const char *bucket, struct ol_store_viter **out)
{
    return ol_store_viter_open_at(st, bucket, "", 0, out);
}

int ol_store_viter_open_at(struct ol_store *st, const char *bucket, const char *from,
                           size_t from_len, struct ol_store_viter **out)
{
    size_t bl = strlen(bucket);
    if (bl == 0 || bl > OL_BUCKET_MAX)
        return -OL_ENOBUCKET;
    /* Not calloc: the key buffers and the cursors' (7 KiB) are written
     * before they are read, and a GET on an erasure set opens four of
     * these.  The rest starts zeroed. */
    struct ol_store_viter *it = malloc(sizeof(*it));
    if (!it)
        return -ENOMEM;
    memset(it, 0, offsetof(struct ol_store_viter, oc));
    memset(&it->o_has, 0,
           offsetof(struct ol_store_viter, last) - offsetof(struct ol_store_viter, o_has));
    it->st = st;
    memcpy(it->pfx, bucket, bl);
    it->pl = bl + 1;
    int rc = ol_rd_begin(st, &it->txn);
    if (rc) {
        free(it);
        return rc;
    }
    bool oc = false, vc = false;
    MDB_val bk = {bl, (void *)bucket}, bv;
    rc = mdb_get(it->txn, st->db_buckets, &bk, &bv) == MDB_NOTFOUND ? -OL_ENOBUCKET : 0;
    if (rc == 0)
        rc = ol_idx_cur_open(it->txn, st->db_objects, &it->oc);
    oc = rc == 0;
    if (rc == 0)
        rc = ol_idx_cur_open(it->txn, st->db_versions, &it->vc);
    vc = rc == 0;
    if (rc == 0)
        rc = ol_store_viter_seek(it, from, from_len);
    if (rc) {
        if (oc)
            ol_idx_cur_close(&it->oc);
        if (vc)
            ol_idx_cur_close(&it->vc);
        ol_rd_end(it->st, it->txn);
        free(it);
        return rc;
    }
    *out = it;
    return 0;
}

int ol_store_viter_seek(struct ol_store_viter *it, const char *from, size_t from_len)
{
    uint8_t k[OL_IDX_OBJ_KEY_MAX];
    if (from_len > OL_KEY_MAX)
        return -OL_ETOOLARGE;
    memcpy(k, it->pfx, it->pl);
    if (from_len)
        memcpy(k + it->pl, from, from_len);
    int rc = ol_idx_cur_seek(&it->oc, k, it->pl + from_len, true);
    if (rc == 0)
        rc = ol_idx_cur_seek(&it->vc, k, it->pl + from_len, true);
    it->o_has = it->v_has = it->o_end = it->v_end = false;
    it->last_valid = false;
    return rc;
}

/* Loads the next record of a cursor unless one is pending. */
static int viter_load(struct ol_store_viter *it, struct ol_idx_cur *c, bool *has, bool *end,
                      const uint8_t **k, size_t *kl, MDB_val *v, bool versions)
{
    for (uint32_t guard = 0; !*has && !*end && guard < OL_VER_SCAN_MAX; guard++) {
        int r = ol_idx_cur_next(c, k, kl, v);
        if (r < 0)
            return r;
        if (r == 1 || *kl < it->pl || memcmp(*k, it->pfx, it->pl) != 0) {
            *end = true;
            break;
        }
        if (versions && *kl < it->pl + 1 + OL_IDX_VSUFFIX)
            continue; /* not a versions key */
        *has = true;
    }
    return 0;
}

int ol_store_viter_next(struct ol_store_viter *it, const char **key, size_t *key_len,
                        struct ol_version_info *vi)
{
    int rc = viter_load(it, &it->oc, &it->o_has, &it->o_end, &it->ok, &it->okl, &it->ov, false);
    if (rc == 0)
        rc = viter_load(it, &it->vc, &it->v_has, &it->v_end, &it->vk, &it->vkl, &it->vv, true);
    if (rc)
        return rc;
    if (!it->o_has && !it->v_has)
        return 1;
    /* Only the cursors that hold a key point anywhere (NULL + n is
     * undefined). */
    const uint8_t *ok = it->o_has ? it->ok + it->pl : NULL;
    const uint8_t *vkey_k = it->v_has ? it->vk + it->pl : NULL;
    size_t okl = it->o_has ? it->okl - it->pl : 0;
    size_t vkl = it->v_has ? it->vkl - it->pl - OL_IDX_VSUFFIX : 0;
    bool take_o = it->o_has;
    if (it->o_has && it->v_has) {
        size_t m = okl < vkl ? okl : vkl;
        int c = memcmp(ok, vkey_k, m);
        take_o = c < 0 || (c == 0 && okl <= vkl);
    }
    const uint8_t *k = take_o ? ok : vkey_k;
    size_t kl = take_o ? okl : vkl;
    MDB_val v = take_o ? it->ov : it->vv;
    memset(vi, 0, sizeof(*vi));
    vi->is_latest = !(it->last_valid && it->last_len == kl && memcmp(it->last, k, kl) == 0);
    memcpy(it->key, k, kl);
    memcpy(it->last, k, kl);
    it->last_len = kl;
    it->last_valid = true;
    if (take_o)
        it->o_has = false;
    else
        it->v_has = false;
    rc = vinfo_fill(&v, vi);
    if (rc)
        return rc;
    *key = (const char *)it->key;
    *key_len = kl;
    return 0;
}

void ol_store_viter_close(struct ol_store_viter *it)
{
    if (!it)
        return;
    ol_idx_cur_close(&it->oc);
    ol_idx_cur_close(&it->vc);
    ol_rd_end(it->st, it->txn);
    free(it);
}
