/* Direct reads, the node's side (native/direct.h). */
#include "native/direct.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "deploy/deploy.h"
#include "ec/eset.h"
#include "native/proto.h"
#include "obj/ec.h"
#include "obj/obj.h"

/* The first drive position of set s in the deployment: a pool's sets are
 * its drives in order, k+m each (deploy.h, ol_deploy_add_pool). */
static unsigned first_pos(struct ol_deploy *dp, unsigned s)
{
    const struct ol_deploy_pool *p = &dp->pools[ol_deploy_pool_of_set(dp, s)];
    return p->first_drive + (s - p->first_set) * (dp->k + dp->m);
}

/* The node of drive position pos: NULL for this node's own drives, else
 * the name before the ':' of its "node:/dir" (deploy/cluster.c), in buf. */
static const char *node_of(struct ol_deploy *dp, unsigned pos, char *buf, size_t cap)
{
    if (dp->drives[pos])
        return NULL;
    const char *name = dp->paths[pos];
    const char *colon = name ? strchr(name, ':') : NULL;
    if (!colon || (size_t)(colon - name) >= cap || colon == name)
        return "";
    memcpy(buf, name, (size_t)(colon - name));
    buf[colon - name] = 0;
    return buf;
}

int ol_native_layout_encode(struct ol_deploy *dp, const struct ol_obj_reader *rd,
                            ol_native_node_addr_fn node_addr, void *arg, struct ol_wbuf *w)
{
    unsigned set = 0;
    struct ol_eset_geom g;
    if (!dp || !node_addr || ol_obj_read_direct(rd, &set, &g) < 0 || g.k != dp->k || g.m != dp->m ||
        g.k + g.m > 20) {
        ol_wbuf_u8(w, 0);
        return w->over ? -EMSGSIZE : 0;
    }
    unsigned n = g.k + g.m, base = first_pos(dp, set);
    ol_wbuf_u8(w, 1);
    ol_wbuf_u32(w, set);
    ol_wbuf_vid(w, &g.vid);
    ol_wbuf_u8(w, (uint8_t)g.k);
    ol_wbuf_u8(w, (uint8_t)g.m);
    ol_wbuf_u32(w, g.unit_bytes);
    ol_wbuf_u64(w, g.size);
    /* Each node is looked up once per answer (a set has k+m drives on at
     * most k+m nodes). */
    struct {
        char name[64], addr[128];
        int rc;
    } seen[20];
    unsigned nseen = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned slot = (i + g.rotation) % n;
        uint32_t bit = 1u << slot;
        uint8_t state = (g.have & bit)      ? OL_NATIVE_SHARD_HELD
                        : (g.unasked & bit) ? OL_NATIVE_SHARD_UNKNOWN
                                            : OL_NATIVE_SHARD_MISSING;
        char name[64], addr[128] = "";
        const char *node = node_of(dp, base + slot, name, sizeof(name));
        int arc = 0;
        if (node && node[0]) {
            unsigned j = 0;
            while (j < nseen && strcmp(seen[j].name, node) != 0)
                j++;
            if (j == nseen) {
                snprintf(seen[j].name, sizeof(seen[j].name), "%s", node);
                seen[j].addr[0] = 0;
                seen[j].rc = node_addr(arg, node, seen[j].addr);
                nseen++;
            }
            arc = seen[j].rc;
            memcpy(addr, seen[j].addr, sizeof(addr));
        }
        if (node && (!node[0] || arc < 0 || !addr[0]))
            state = OL_NATIVE_SHARD_MISSING, addr[0] = 0;
        ol_wbuf_u8(w, state);
        ol_wbuf_str(w, addr, strlen(addr));
    }
    return w->over ? -EMSGSIZE : 0;
}

enum { VERS_FIRST = 16 };

/* The metadata of version vid on drive d (0, or -OL_ENOKEY), and whether
 * it is the drive's newest version of the key. */
static int find_version(const struct ol_drive *d, const char *bucket, const char *key, size_t klen,
                        const struct ol_version_id *vid, struct ol_shard_meta *out, bool *newest)
{
    unsigned cap = VERS_FIRST;
    for (int round = 0; round < 2; round++) {
        struct ol_shard_meta *v = malloc(sizeof(*v) * cap);
        if (!v)
            return -ENOMEM;
        int n = d->ops->versions(d->d, bucket, key, klen, v, cap, NULL);
        int rc = n < 0 ? n : -OL_ENOKEY;
        for (int i = 0; i < n; i++)
            if (ol_version_id_cmp(&v[i].vid, vid) == 0) {
                *out = v[i];
                *newest = i == 0;
                rc = 0;
                break;
            }
        free(v);
        if (rc != -OL_ENOKEY || n < (int)cap)
            return rc;
        cap = OL_EC_MAX_VERSIONS; /* many versions: look at all of them */
    }
    return -OL_ENOKEY;
}

int ol_native_shard_read(struct ol_deploy *dp, unsigned set, const char *bucket, const char *key,
                         size_t klen, const struct ol_version_id *vid, unsigned shard, uint64_t off,
                         size_t len, void *buf, bool *newest)
{
    if (set >= ol_deploy_nsets(dp) || shard >= dp->k + dp->m)
        return -EINVAL;
    unsigned n = dp->k + dp->m, base = first_pos(dp, set);
    int rc = -OL_ENOKEY;
    for (unsigned slot = 0; slot < n; slot++) {
        if (!dp->drives[base + slot])
            continue; /* another node's */
        const struct ol_drive *d = &dp->drv[base + slot];
        struct ol_shard_meta sm;
        bool nw = false;
        int r = find_version(d, bucket, key, klen, vid, &sm, &nw);
        if (r < 0) {
            if (r != -OL_ENOKEY)
                rc = r;
            continue;
        }
        /* Only the shard asked for: another index's bytes would decode
         * into garbage on the client. */
        if (sm.shard != shard || sm.k != dp->k || sm.m != dp->m)
            continue;
        if (sm.flags & OL_SHARD_DELETE_MARKER)
            return -OL_ENOKEY;
        /* The etag field says what the bytes are (obj/ec.h): leading
         * metadata, a manifest, sealed bytes are no object bytes as they
         * stand. */
        char etag[64];
        uint64_t ml = 0, msize = UINT64_MAX;
        ol_ec_etag_split(sm.etag, etag, &ml, &msize);
        if (ml || msize != UINT64_MAX || ol_ec_etag_plain(sm.etag, sm.size) != UINT64_MAX)
            return -ENOTSUP;
        if (newest)
            *newest = nw;
        return d->ops->read_shard(d->d, bucket, key, klen, vid, off, len, buf);
    }
    return rc;
}
