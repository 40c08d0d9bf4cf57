/* The cluster map: building, checking, JSON, and CAS storage in etcd.  See
 * map.h for the rules. */
#include "cluster/map.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "ec/codec.h"

/* Records why a check failed (the first reason wins) and returns -OL_EMAP. */
__attribute__((format(printf, 3, 4))) static int bad(char *why, size_t cap, const char *fmt, ...)
{
    if (why && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return -OL_EMAP;
}

/* Names go into etcd keys and file names: printable, no '/', bounded. */
static bool name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == '/' || ch == 0x7f)
            return false;
    }
    return true;
}

/* Addresses and paths: bounded, no control characters (may be empty for an
 * address a node does not serve). */
static bool text_ok(const char *s, size_t max, bool empty_ok)
{
    size_t n = strlen(s);
    if (n > max || (n == 0 && !empty_ok))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < ' ' || s[i] == 0x7f)
            return false;
    return true;
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

int ol_map_init(struct ol_map *map, const char *cluster)
{
    memset(map, 0, sizeof(*map));
    if (!cluster || !name_ok(cluster, OL_MAP_MAX_NAME))
        return -EINVAL;
    copy(map->cluster, sizeof(map->cluster), cluster);
    return 0;
}

void ol_map_free(struct ol_map *map)
{
    for (unsigned i = 0; i < map->npools; i++)
        free(map->pools[i].sets);
    free(map->nodes);
    free(map->drives);
    free(map->sets);
    free(map->pools);
    memset(map, 0, sizeof(*map));
}

struct ol_map_node *ol_map_node(struct ol_map *map, const char *name)
{
    for (unsigned i = 0; i < map->nnodes; i++)
        if (strcmp(map->nodes[i].name, name) == 0)
            return &map->nodes[i];
    return NULL;
}

/* Drives are kept sorted by id (ids are handed out increasing, and a loaded
 * map is sorted), so lookups are binary searches. */
static int drive_index(const struct ol_map *map, uint32_t id)
{
    unsigned lo = 0, hi = map->ndrives;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (map->drives[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < map->ndrives && map->drives[lo].id == id ? (int)lo : -1;
}

struct ol_map_drive *ol_map_drive(struct ol_map *map, uint32_t id)
{
    int i = drive_index(map, id);
    return i < 0 ? NULL : &map->drives[i];
}

/* Grows an array by one element (maps change rarely; no spare room kept). */
static int grow(void **arr, unsigned n, size_t size)
{
    void *p = realloc(*arr, (n + 1) * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    return 0;
}

int ol_map_add_node(struct ol_map *map, const char *name, const char *s3_addr, const char *ucx_addr)
{
    s3_addr = s3_addr ? s3_addr : "";
    ucx_addr = ucx_addr ? ucx_addr : "";
    if (!name || !name_ok(name, OL_MAP_MAX_NAME) || !text_ok(s3_addr, OL_MAP_MAX_ADDR, true) ||
        !text_ok(ucx_addr, OL_MAP_MAX_ADDR, true))
        return -EINVAL;
    if (ol_map_node(map, name))
        return -EEXIST;
    if (map->nnodes >= OL_MAP_MAX_NODES)
        return -OL_ETOOLARGE;
    int rc = grow((void **)&map->nodes, map->nnodes, sizeof(*map->nodes));
    if (rc < 0)
        return rc;
    struct ol_map_node *n = &map->nodes[map->nnodes++];
    memset(n, 0, sizeof(*n));
    copy(n->name, sizeof(n->name), name);
    copy(n->s3_addr, sizeof(n->s3_addr), s3_addr);
    copy(n->ucx_addr, sizeof(n->ucx_addr), ucx_addr);
    n->state = OL_NODE_UP;
    return 0;
}

int ol_map_add_drive(struct ol_map *map, const char *node, const char *path, uint32_t *id)
{
    if (!node || !path || !text_ok(path, OL_MAP_MAX_PATH, false))
        return -EINVAL;
    if (!ol_map_node(map, node))
        return -ENOENT;
    for (unsigned i = 0; i < map->ndrives; i++)
        if (strcmp(map->drives[i].node, node) == 0 && strcmp(map->drives[i].path, path) == 0)
            return -EEXIST;
    if (map->ndrives >= OL_MAP_MAX_DRIVES)
        return -OL_ETOOLARGE;
    uint32_t next = map->ndrives ? map->drives[map->ndrives - 1].id + 1 : 1;
    if (next == 0)
        return -OL_ETOOLARGE;
    int rc = grow((void **)&map->drives, map->ndrives, sizeof(*map->drives));
    if (rc < 0)
        return rc;
    struct ol_map_drive *d = &map->drives[map->ndrives++];
    memset(d, 0, sizeof(*d));
    d->id = next;
    copy(d->node, sizeof(d->node), node);
    copy(d->path, sizeof(d->path), path);
    d->state = OL_DRIVE_OK;
    if (id)
        *id = next;
    return 0;
}

/* ---- validation ---- */

static int cmp_node_ptr(const void *a, const void *b)
{
    const struct ol_map_node *x = *(const struct ol_map_node *const *)a;
    const struct ol_map_node *y = *(const struct ol_map_node *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_drive_ptr(const void *a, const void *b)
{
    const struct ol_map_drive *x = *(const struct ol_map_drive *const *)a;
    const struct ol_map_drive *y = *(const struct ol_map_drive *const *)b;
    int c = strcmp(x->node, y->node);
    return c ? c : strcmp(x->path, y->path);
}

/* The index of a node in a name-sorted array of node pointers, -1 if none. */
static int node_find(struct ol_map_node *const *sorted, unsigned n, const char *name)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->name, name);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int find_set(const struct ol_map *map, uint32_t id)
{
    for (unsigned i = 0; i < map->nsets; i++)
        if (map->sets[i].id == id)
            return (int)i;
    return -1;
}

/* The spread rule over one pool (see map.h).  node_of[d]: the sorted-node
 * index of drive index d. */
static int check_spread(const struct ol_map *map, const struct ol_map_pool *p, const int *node_of,
                        unsigned *count, unsigned nnodes, char *why, size_t cap)
{
    /* N: the nodes that hold any drive of the pool */
    memset(count, 0, nnodes * sizeof(*count));
    unsigned n_nodes = 0;
    for (unsigned s = 0; s < p->nsets; s++) {
        const struct ol_map_set *set = &map->sets[find_set(map, p->sets[s])];
        for (unsigned i = 0; i < set->k + set->m; i++) {
            int node = node_of[drive_index(map, set->drive[i])];
            if (count[node]++ == 0)
                n_nodes++;
        }
    }
    for (unsigned s = 0; s < p->nsets; s++) {
        const struct ol_map_set *set = &map->sets[find_set(map, p->sets[s])];
        unsigned width = set->k + set->m;
        unsigned limit = n_nodes >= width || n_nodes == 0 ? 1 : (width + n_nodes - 1) / n_nodes;
        memset(count, 0, nnodes * sizeof(*count));
        for (unsigned i = 0; i < width; i++) {
            int node = node_of[drive_index(map, set->drive[i])];
            if (++count[node] > limit)
                return bad(why, cap,
                           "set %" PRIu32 ": %u of its %u drives on one node (pool %" PRIu32
                           " spans %u nodes, at most %u allowed)",
                           set->id, count[node], width, p->id, n_nodes, limit);
        }
    }
    return 0;
}

int ol_map_validate(const struct ol_map *map, char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    if (!name_ok(map->cluster, OL_MAP_MAX_NAME))
        return bad(why, cap, "bad cluster name");
    if (map->nnodes > OL_MAP_MAX_NODES || map->ndrives > OL_MAP_MAX_DRIVES ||
        map->nsets > OL_MAP_MAX_SETS || map->npools > OL_MAP_MAX_POOLS)
        return bad(why, cap, "more nodes, drives, sets or pools than the limits");

    int rc = -ENOMEM;
    struct ol_map_node **nodes = calloc(map->nnodes + 1, sizeof(*nodes));
    struct ol_map_drive **drives = calloc(map->ndrives + 1, sizeof(*drives));
    int *node_of = calloc(map->ndrives + 1, sizeof(*node_of));
    unsigned char *in_set = calloc(map->ndrives + 1, 1);
    unsigned char *set_seen = calloc(map->nsets + 1, 1);
    unsigned *count = calloc(map->nnodes + 1, sizeof(*count));
    if (!nodes || !drives || !node_of || !in_set || !set_seen || !count)
        goto out;

    /* nodes: good fields, unique names */
    for (unsigned i = 0; i < map->nnodes; i++) {
        const struct ol_map_node *n = &map->nodes[i];
        if (!name_ok(n->name, OL_MAP_MAX_NAME)) {
            rc = bad(why, cap, "node %u: bad name", i);
            goto out;
        }
        if (!text_ok(n->s3_addr, OL_MAP_MAX_ADDR, true) ||
            !text_ok(n->ucx_addr, OL_MAP_MAX_ADDR, true) || n->state > OL_NODE_DOWN) {
            rc = bad(why, cap, "node %s: bad address or state", n->name);
            goto out;
        }
        nodes[i] = &map->nodes[i];
    }
    qsort(nodes, map->nnodes, sizeof(*nodes), cmp_node_ptr);
    for (unsigned i = 1; i < map->nnodes; i++)
        if (strcmp(nodes[i - 1]->name, nodes[i]->name) == 0) {
            rc = bad(why, cap, "node %s listed twice", nodes[i]->name);
            goto out;
        }

    /* drives: sorted unique ids, known nodes, unique (node, path) */
    for (unsigned i = 0; i < map->ndrives; i++) {
        const struct ol_map_drive *d = &map->drives[i];
        if (d->id == 0 || (i > 0 && d->id <= map->drives[i - 1].id)) {
            rc = bad(why, cap, "drive id %" PRIu32 ": zero, repeated or out of order", d->id);
            goto out;
        }
        if (!text_ok(d->path, OL_MAP_MAX_PATH, false) || d->state > OL_DRIVE_FAILED) {
            rc = bad(why, cap, "drive %" PRIu32 ": bad path or state", d->id);
            goto out;
        }
        node_of[i] = node_find(nodes, map->nnodes, d->node);
        if (node_of[i] < 0) {
            rc = bad(why, cap, "drive %" PRIu32 ": unknown node \"%s\"", d->id, d->node);
            goto out;
        }
        drives[i] = &map->drives[i];
    }
    qsort(drives, map->ndrives, sizeof(*drives), cmp_drive_ptr);
    for (unsigned i = 1; i < map->ndrives; i++)
        if (cmp_drive_ptr(&drives[i - 1], &drives[i]) == 0) {
            rc = bad(why, cap, "drive %s:%s listed twice", drives[i]->node, drives[i]->path);
            goto out;
        }

    /* sets: geometry, known drives, each drive in one set at most */
    for (unsigned i = 0; i < map->nsets; i++) {
        const struct ol_map_set *s = &map->sets[i];
        if (s->k + s->m > OL_MAP_MAX_SET || ol_ec_check_geometry(s->k, s->m) < 0) {
            rc = bad(why, cap, "set %" PRIu32 ": bad geometry %u+%u", s->id, s->k, s->m);
            goto out;
        }
        if (find_set(map, s->id) != (int)i) {
            rc = bad(why, cap, "set %" PRIu32 " listed twice", s->id);
            goto out;
        }
        for (unsigned j = 0; j < s->k + s->m; j++) {
            int d = drive_index(map, s->drive[j]);
            if (d < 0) {
                rc = bad(why, cap, "set %" PRIu32 ": unknown drive %" PRIu32, s->id, s->drive[j]);
                goto out;
            }
            if (in_set[d]++) {
                rc = bad(why, cap, "drive %" PRIu32 " is in two sets, or twice in set %" PRIu32,
                         s->drive[j], s->id);
                goto out;
            }
        }
    }

    /* pools: known sets, each set in exactly the pool it names */
    for (unsigned i = 0; i < map->npools; i++) {
        const struct ol_map_pool *p = &map->pools[i];
        for (unsigned j = 0; j < i; j++)
            if (map->pools[j].id == p->id) {
                rc = bad(why, cap, "pool %" PRIu32 " listed twice", p->id);
                goto out;
            }
        if (p->nsets == 0) {
            rc = bad(why, cap, "pool %" PRIu32 " has no sets", p->id);
            goto out;
        }
        for (unsigned j = 0; j < p->nsets; j++) {
            int s = find_set(map, p->sets[j]);
            if (s < 0) {
                rc = bad(why, cap, "pool %" PRIu32 ": unknown set %" PRIu32, p->id, p->sets[j]);
                goto out;
            }
            if (set_seen[s]++ || map->sets[s].pool != p->id) {
                rc = bad(why, cap,
                         "set %" PRIu32 " is in pool %" PRIu32 " but names pool %" PRIu32
                         " (or is listed twice)",
                         map->sets[s].id, p->id, map->sets[s].pool);
                goto out;
            }
        }
        rc = check_spread(map, p, node_of, count, map->nnodes, why, cap);
        if (rc < 0)
            goto out;
    }
    for (unsigned i = 0; i < map->nsets; i++)
        if (!set_seen[i]) {
            rc = bad(why, cap, "set %" PRIu32 " is in no pool", map->sets[i].id);
            goto out;
        }
    rc = 0;
out:
    free(nodes);
    free(drives);
    free(node_of);
    free(in_set);
    free(set_seen);
    free(count);
    return rc;
}

/* ---- building a pool ---- */

struct build_node {
    const struct ol_map_node *node;
    unsigned *free_drives; /* drive indexes, ascending id */
    unsigned nfree, next;
    unsigned in_set; /* shards of the set being filled */
};

static int cmp_build_node(const void *a, const void *b)
{
    const struct build_node *x = a, *y = b;
    return strcmp(x->node->name, y->node->name);
}

int ol_map_add_pool(struct ol_map *map, const char *const *names, unsigned nnames, unsigned k,
                    unsigned m, uint32_t *pool_id)
{
    unsigned width = k + m;
    if (!names || nnames == 0 || nnames > OL_MAP_MAX_NODES || width > OL_MAP_MAX_SET ||
        ol_ec_check_geometry(k, m) < 0)
        return -EINVAL;
    if (map->npools >= OL_MAP_MAX_POOLS)
        return -OL_ETOOLARGE;

    int rc = -ENOMEM;
    struct build_node *bn = calloc(nnames, sizeof(*bn));
    unsigned char *used = calloc(map->ndrives + 1, 1);
    uint32_t *set_ids = NULL;
    unsigned nb = 0;
    if (!bn || !used)
        goto out;
    for (unsigned i = 0; i < map->nsets; i++)
        for (unsigned j = 0; j < map->sets[i].k + map->sets[i].m; j++) {
            int d = drive_index(map, map->sets[i].drive[j]);
            if (d >= 0)
                used[d] = 1;
        }
    /* the named nodes, once each, in name order, with their free drives */
    for (unsigned i = 0; i < nnames; i++) {
        const struct ol_map_node *n = names[i] ? ol_map_node(map, names[i]) : NULL;
        if (!n) {
            rc = -ENOENT;
            goto out;
        }
        bool dup = false;
        for (unsigned j = 0; j < nb; j++)
            dup |= bn[j].node == n;
        if (dup)
            continue;
        bn[nb].node = n;
        bn[nb].free_drives = calloc(map->ndrives + 1, sizeof(unsigned));
        if (!bn[nb].free_drives)
            goto out;
        for (unsigned d = 0; d < map->ndrives; d++)
            if (!used[d] && strcmp(map->drives[d].node, n->name) == 0)
                bn[nb].free_drives[bn[nb].nfree++] = d;
        nb++;
    }
    qsort(bn, nb, sizeof(*bn), cmp_build_node);
    unsigned total = 0;
    for (unsigned i = 0; i < nb; i++)
        total += bn[i].nfree;
    if (total == 0 || total % width != 0) {
        rc = -EINVAL;
        goto out;
    }
    unsigned nsets = total / width;
    if (map->nsets + nsets > OL_MAP_MAX_SETS) {
        rc = -OL_ETOOLARGE;
        goto out;
    }
    struct ol_map_set *sets = realloc(map->sets, (map->nsets + nsets) * sizeof(*sets));
    struct ol_map_pool *pools = realloc(map->pools, (map->npools + 1) * sizeof(*pools));
    if (sets)
        map->sets = sets;
    if (pools)
        map->pools = pools;
    set_ids = calloc(nsets, sizeof(*set_ids));
    if (!sets || !pools || !set_ids)
        goto out;

    uint32_t next_set = 0, next_pool = 0;
    for (unsigned i = 0; i < map->nsets; i++)
        if (map->sets[i].id >= next_set)
            next_set = map->sets[i].id + 1;
    for (unsigned i = 0; i < map->npools; i++)
        if (map->pools[i].id >= next_pool)
            next_pool = map->pools[i].id + 1;

    for (unsigned s = 0; s < nsets; s++) {
        struct ol_map_set *set = &map->sets[map->nsets + s];
        memset(set, 0, sizeof(*set));
        set->id = next_set + s;
        set->pool = next_pool;
        set->k = k;
        set->m = m;
        for (unsigned i = 0; i < nb; i++)
            bn[i].in_set = 0;
        for (unsigned slot = 0; slot < width; slot++) {
            /* fewest shards of this set, then most drives left, then name */
            int best = -1;
            for (unsigned i = 0; i < nb; i++) {
                unsigned left = bn[i].nfree - bn[i].next;
                if (left == 0)
                    continue;
                if (best < 0 || bn[i].in_set < bn[best].in_set ||
                    (bn[i].in_set == bn[best].in_set && left > bn[best].nfree - bn[best].next))
                    best = (int)i;
            }
            OL_ASSERT(best >= 0); /* total is a multiple of width */
            struct build_node *b = &bn[best];
            set->drive[slot] = map->drives[b->free_drives[b->next++]].id;
            b->in_set++;
        }
        set_ids[s] = set->id;
    }
    struct ol_map_pool *p = &map->pools[map->npools];
    p->id = next_pool;
    p->nsets = nsets;
    p->sets = set_ids;
    map->nsets += nsets;
    map->npools++;
    set_ids = NULL;

    rc = ol_map_validate(map, NULL, 0);
    if (rc < 0) {
        /* unequal drive counts the rule cannot spread: take the pool back */
        map->npools--;
        map->nsets -= nsets;
        free(map->pools[map->npools].sets);
        goto out;
    }
    if (pool_id)
        *pool_id = next_pool;
out:
    for (unsigned i = 0; i < nb; i++)
        free(bn[i].free_drives);
    free(bn);
    free(used);
    free(set_ids);
    return rc;
}

/* ---- JSON ---- */

const char *ol_map_node_state_name(enum ol_map_node_state s)
{
    return s == OL_NODE_UP ? "up" : "down";
}

const char *ol_map_drive_state_name(enum ol_map_drive_state s)
{
    return s == OL_DRIVE_OK ? "ok" : s == OL_DRIVE_OFFLINE ? "offline" : "failed";
}

int ol_map_to_json(const struct ol_map *map, char **json, size_t *len)
{
    *json = NULL;
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return -ENOMEM;
    int rc = -ENOMEM;
    char lease[24];
    cJSON *arr, *o, *ids;
    if (!cJSON_AddNumberToObject(j, "format", OL_MAP_FORMAT) ||
        !cJSON_AddStringToObject(j, "cluster", map->cluster) ||
        !cJSON_AddNumberToObject(j, "epoch", (double)map->epoch))
        goto out;
    if (!(arr = cJSON_AddArrayToObject(j, "nodes")))
        goto out;
    for (unsigned i = 0; i < map->nnodes; i++) {
        const struct ol_map_node *n = &map->nodes[i];
        snprintf(lease, sizeof(lease), "%" PRId64, n->lease);
        if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddStringToObject(o, "name", n->name) ||
            !cJSON_AddStringToObject(o, "s3", n->s3_addr) ||
            !cJSON_AddStringToObject(o, "ucx", n->ucx_addr) ||
            !cJSON_AddStringToObject(o, "state", ol_map_node_state_name(n->state)) ||
            !cJSON_AddStringToObject(o, "lease", lease))
            goto out;
    }
    if (!(arr = cJSON_AddArrayToObject(j, "drives")))
        goto out;
    for (unsigned i = 0; i < map->ndrives; i++) {
        const struct ol_map_drive *d = &map->drives[i];
        if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddNumberToObject(o, "id", d->id) ||
            !cJSON_AddStringToObject(o, "node", d->node) ||
            !cJSON_AddStringToObject(o, "path", d->path) ||
            !cJSON_AddStringToObject(o, "state", ol_map_drive_state_name(d->state)))
            goto out;
    }
    if (!(arr = cJSON_AddArrayToObject(j, "sets")))
        goto out;
    for (unsigned i = 0; i < map->nsets; i++) {
        const struct ol_map_set *s = &map->sets[i];
        if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddNumberToObject(o, "id", s->id) ||
            !cJSON_AddNumberToObject(o, "pool", s->pool) ||
            !cJSON_AddNumberToObject(o, "k", s->k) || !cJSON_AddNumberToObject(o, "m", s->m) ||
            !(ids = cJSON_AddArrayToObject(o, "drives")))
            goto out;
        for (unsigned d = 0; d < s->k + s->m && d < OL_MAP_MAX_SET; d++) {
            cJSON *v = cJSON_CreateNumber(s->drive[d]);
            if (!v || !cJSON_AddItemToArray(ids, v))
                goto out;
        }
    }
    if (!(arr = cJSON_AddArrayToObject(j, "pools")))
        goto out;
    for (unsigned i = 0; i < map->npools; i++) {
        const struct ol_map_pool *p = &map->pools[i];
        if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddNumberToObject(o, "id", p->id) || !(ids = cJSON_AddArrayToObject(o, "sets")))
            goto out;
        for (unsigned s = 0; s < p->nsets; s++) {
            cJSON *v = cJSON_CreateNumber(p->sets[s]);
            if (!v || !cJSON_AddItemToArray(ids, v))
                goto out;
        }
    }
    *json = cJSON_PrintUnformatted(j);
    if (*json) {
        if (len)
            *len = strlen(*json);
        rc = 0;
    }
out:
    cJSON_Delete(j);
    return rc;
}

/* Field readers: each checks the JSON type and range and says what is wrong. */
static int get_str(const cJSON *o, const char *name, char *dst, size_t cap, bool required,
                   const char *what, char *why, size_t wcap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v && !required) {
        dst[0] = '\0';
        return 0;
    }
    if (!v || !cJSON_IsString(v) || !v->valuestring)
        return bad(why, wcap, "%s: \"%s\" missing or not a string", what, name);
    if (strlen(v->valuestring) >= cap)
        return bad(why, wcap, "%s: \"%s\" longer than %zu bytes", what, name, cap - 1);
    copy(dst, cap, v->valuestring);
    return 0;
}

static int get_uint(const cJSON *v, uint64_t max, uint64_t *out, const char *what, const char *name,
                    char *why, size_t wcap)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
        v->valuedouble != floor(v->valuedouble))
        return bad(why, wcap, "%s: \"%s\" missing or not an integer in 0..%" PRIu64, what, name,
                   max);
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static int get_field_uint(const cJSON *o, const char *name, uint64_t max, uint64_t *out,
                          const char *what, char *why, size_t wcap)
{
    return get_uint(cJSON_GetObjectItemCaseSensitive(o, name), max, out, what, name, why, wcap);
}

static const cJSON *get_array(const cJSON *o, const char *name, int max, const char *what,
                              char *why, size_t wcap, int *rc)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsArray(a)) {
        *rc = bad(why, wcap, "%s: \"%s\" missing or not an array", what, name);
        return NULL;
    }
    if (cJSON_GetArraySize(a) > max) {
        *rc = bad(why, wcap, "%s: more than %d %s", what, max, name);
        return NULL;
    }
    return a;
}

static int cmp_drive(const void *a, const void *b)
{
    const struct ol_map_drive *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int parse(const cJSON *j, struct ol_map *map, char *why, size_t cap)
{
    int rc = 0;
    uint64_t u = 0;
    char what[64];
    if (!cJSON_IsObject(j))
        return bad(why, cap, "not a JSON object");
    if ((rc = get_field_uint(j, "format", UINT32_MAX, &u, "map", why, cap)) < 0)
        return rc;
    if (u != OL_MAP_FORMAT)
        return bad(why, cap, "map format %" PRIu64 " (this build reads format %d)", u,
                   OL_MAP_FORMAT);
    if ((rc = get_str(j, "cluster", map->cluster, sizeof(map->cluster), true, "map", why, cap)) < 0)
        return rc;
    if ((rc = get_field_uint(j, "epoch", (1ull << 53), &map->epoch, "map", why, cap)) < 0)
        return rc;

    const cJSON *nodes = get_array(j, "nodes", OL_MAP_MAX_NODES, "map", why, cap, &rc);
    const cJSON *drives =
        nodes ? get_array(j, "drives", OL_MAP_MAX_DRIVES, "map", why, cap, &rc) : NULL;
    const cJSON *sets = drives ? get_array(j, "sets", OL_MAP_MAX_SETS, "map", why, cap, &rc) : NULL;
    const cJSON *pools =
        sets ? get_array(j, "pools", OL_MAP_MAX_POOLS, "map", why, cap, &rc) : NULL;
    if (!pools)
        return rc;
    map->nodes = calloc((size_t)cJSON_GetArraySize(nodes) + 1, sizeof(*map->nodes));
    map->drives = calloc((size_t)cJSON_GetArraySize(drives) + 1, sizeof(*map->drives));
    map->sets = calloc((size_t)cJSON_GetArraySize(sets) + 1, sizeof(*map->sets));
    map->pools = calloc((size_t)cJSON_GetArraySize(pools) + 1, sizeof(*map->pools));
    if (!map->nodes || !map->drives || !map->sets || !map->pools)
        return -ENOMEM;

    const cJSON *it;
    char state[16], lease[24];
    cJSON_ArrayForEach(it, nodes)
    {
        struct ol_map_node *n = &map->nodes[map->nnodes];
        snprintf(what, sizeof(what), "node %u", map->nnodes);
        if ((rc = get_str(it, "name", n->name, sizeof(n->name), true, what, why, cap)) < 0 ||
            (rc = get_str(it, "s3", n->s3_addr, sizeof(n->s3_addr), false, what, why, cap)) < 0 ||
            (rc = get_str(it, "ucx", n->ucx_addr, sizeof(n->ucx_addr), false, what, why, cap)) <
                0 ||
            (rc = get_str(it, "state", state, sizeof(state), true, what, why, cap)) < 0 ||
            (rc = get_str(it, "lease", lease, sizeof(lease), false, what, why, cap)) < 0)
            return rc;
        if (strcmp(state, "up") == 0)
            n->state = OL_NODE_UP;
        else if (strcmp(state, "down") == 0)
            n->state = OL_NODE_DOWN;
        else
            return bad(why, cap, "%s: unknown state \"%s\"", what, state);
        n->lease = strtoll(lease, NULL, 10);
        map->nnodes++;
    }
    cJSON_ArrayForEach(it, drives)
    {
        struct ol_map_drive *d = &map->drives[map->ndrives];
        snprintf(what, sizeof(what), "drive %u", map->ndrives);
        if ((rc = get_field_uint(it, "id", UINT32_MAX, &u, what, why, cap)) < 0)
            return rc;
        d->id = (uint32_t)u;
        if ((rc = get_str(it, "node", d->node, sizeof(d->node), true, what, why, cap)) < 0 ||
            (rc = get_str(it, "path", d->path, sizeof(d->path), true, what, why, cap)) < 0 ||
            (rc = get_str(it, "state", state, sizeof(state), true, what, why, cap)) < 0)
            return rc;
        if (strcmp(state, "ok") == 0)
            d->state = OL_DRIVE_OK;
        else if (strcmp(state, "offline") == 0)
            d->state = OL_DRIVE_OFFLINE;
        else if (strcmp(state, "failed") == 0)
            d->state = OL_DRIVE_FAILED;
        else
            return bad(why, cap, "%s: unknown state \"%s\"", what, state);
        map->ndrives++;
    }
    /* lookups need id order; a repeated id is caught by validation */
    qsort(map->drives, map->ndrives, sizeof(*map->drives), cmp_drive);
    cJSON_ArrayForEach(it, sets)
    {
        struct ol_map_set *s = &map->sets[map->nsets];
        snprintf(what, sizeof(what), "set %u", map->nsets);
        uint64_t id = 0, pool = 0, k = 0, m = 0;
        if ((rc = get_field_uint(it, "id", UINT32_MAX, &id, what, why, cap)) < 0 ||
            (rc = get_field_uint(it, "pool", UINT32_MAX, &pool, what, why, cap)) < 0 ||
            (rc = get_field_uint(it, "k", OL_MAP_MAX_SET, &k, what, why, cap)) < 0 ||
            (rc = get_field_uint(it, "m", OL_MAP_MAX_SET, &m, what, why, cap)) < 0)
            return rc;
        s->id = (uint32_t)id;
        s->pool = (uint32_t)pool;
        s->k = (unsigned)k;
        s->m = (unsigned)m;
        const cJSON *ids = get_array(it, "drives", OL_MAP_MAX_SET, what, why, cap, &rc);
        if (!ids)
            return rc;
        if ((unsigned)cJSON_GetArraySize(ids) != s->k + s->m)
            return bad(why, cap, "%s: %d drives for %u+%u", what, cJSON_GetArraySize(ids), s->k,
                       s->m);
        unsigned n = 0;
        const cJSON *d;
        cJSON_ArrayForEach(d, ids)
        {
            if ((rc = get_uint(d, UINT32_MAX, &u, what, "drives", why, cap)) < 0)
                return rc;
            s->drive[n++] = (uint32_t)u;
        }
        map->nsets++;
    }
    cJSON_ArrayForEach(it, pools)
    {
        struct ol_map_pool *p = &map->pools[map->npools];
        snprintf(what, sizeof(what), "pool %u", map->npools);
        if ((rc = get_field_uint(it, "id", UINT32_MAX, &u, what, why, cap)) < 0)
            return rc;
        p->id = (uint32_t)u;
        const cJSON *ids = get_array(it, "sets", OL_MAP_MAX_SETS, what, why, cap, &rc);
        if (!ids)
            return rc;
        p->sets = calloc((size_t)cJSON_GetArraySize(ids) + 1, sizeof(*p->sets));
        if (!p->sets)
            return -ENOMEM;
        map->npools++;
        const cJSON *s;
        cJSON_ArrayForEach(s, ids)
        {
            if ((rc = get_uint(s, UINT32_MAX, &u, what, "sets", why, cap)) < 0)
                return rc;
            p->sets[p->nsets++] = (uint32_t)u;
        }
    }
    return ol_map_validate(map, why, cap);
}

int ol_map_from_json(const char *json, size_t len, struct ol_map *map, char *why, size_t cap)
{
    memset(map, 0, sizeof(*map));
    if (why && cap)
        why[0] = '\0';
    cJSON *j = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!j)
        return bad(why, cap, "not valid JSON");
    int rc = parse(j, map, why, cap);
    cJSON_Delete(j);
    if (rc < 0)
        ol_map_free(map);
    return rc;
}

/* ---- etcd ---- */

static int map_key(char *key, size_t cap, const char *cluster)
{
    if (!cluster || !name_ok(cluster, OL_MAP_MAX_NAME))
        return -EINVAL;
    snprintf(key, cap, OL_MAP_KEY_FMT, cluster);
    return 0;
}

int ol_map_load(struct ol_etcd *c, const char *cluster, struct ol_map *map, char *why, size_t cap)
{
    memset(map, 0, sizeof(*map));
    char key[128];
    int rc = map_key(key, sizeof(key), cluster);
    if (rc < 0)
        return rc;
    struct ol_etcd_kv kv;
    rc = ol_etcd_get(c, key, &kv, NULL);
    if (rc < 0)
        return rc;
    rc = ol_map_from_json(kv.value, kv.value_len, map, why, cap);
    if (rc == 0 && strcmp(map->cluster, cluster) != 0) {
        rc = bad(why, cap, "the map under %s names cluster \"%s\"", key, map->cluster);
        ol_map_free(map);
    }
    if (rc == 0)
        map->mod_rev = kv.mod_rev;
    else
        ol_error("cluster map %s: %s", key, why && *why ? why : ol_strerror(rc));
    ol_etcd_kv_clear(&kv);
    return rc;
}

int ol_map_store(struct ol_etcd *c, struct ol_map *map)
{
    char key[128], why[160];
    int rc = map_key(key, sizeof(key), map->cluster);
    if (rc < 0)
        return rc;
    rc = ol_map_validate(map, why, sizeof(why));
    if (rc < 0) {
        ol_error("cluster map %s not stored: %s", key, why);
        return rc;
    }
    char *json = NULL;
    size_t len = 0;
    map->epoch++;
    rc = ol_map_to_json(map, &json, &len);
    map->epoch--;
    if (rc < 0)
        return rc;
    int64_t rev = 0;
    rc = ol_etcd_cas(c, key, OL_ETCD_IF_MOD, map->mod_rev, json, len, 0, &rev);
    free(json);
    if (rc < 0)
        return rc;
    map->epoch++;
    map->mod_rev = rev;
    return 0;
}

int ol_map_update(struct ol_etcd *c, const char *cluster, bool create, ol_map_change_fn fn,
                  void *arg, unsigned max_tries, struct ol_map *out)
{
    int rc = -OL_ECASFAIL;
    for (unsigned t = 0; t < max_tries; t++) {
        struct ol_map map;
        char why[160];
        rc = ol_map_load(c, cluster, &map, why, sizeof(why));
        if (rc == -ENOENT && create)
            rc = ol_map_init(&map, cluster);
        if (rc < 0)
            return rc;
        rc = fn(arg, &map);
        if (rc == 0)
            rc = ol_map_store(c, &map);
        if (rc == 0 && out) {
            *out = map;
            return 0;
        }
        ol_map_free(&map);
        if (rc != -OL_ECASFAIL)
            return rc;
        ol_debug("cluster map of %s changed under us; re-reading (try %u)", cluster, t + 1);
    }
    return rc;
}
