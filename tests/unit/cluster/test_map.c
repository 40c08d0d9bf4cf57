/* The cluster map: pool building (a property check of the spread rule over
 * many node/drive counts and geometries, determinism), JSON round trips,
 * validation of broken maps (every truncation, wrong format, unknown drive,
 * bad spread...), and, against a real etcd, CAS storage: two writers, one
 * wins, the other re-reads; ol_map_update's retry loop. */
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cluster/etcd.h"
#include "cluster/map.h"

#include "etcd_fixture.h"

/* A map of n nodes "node-XX" with d drives each, nodes inserted in the given
 * order (reverse: last name first) and drives node by node. */
static void make_map(struct ol_map *map, unsigned n, unsigned d, bool reverse)
{
    CHECK_RC(ol_map_init(map, "c1"), 0);
    for (unsigned i = 0; i < n; i++) {
        unsigned id = reverse ? n - 1 - i : i;
        char name[32], s3[32];
        snprintf(name, sizeof(name), "node-%02u", id);
        snprintf(s3, sizeof(s3), "10.0.0.%u:9000", id + 1);
        CHECK_RC(ol_map_add_node(map, name, s3, ""), 0);
        for (unsigned j = 0; j < d; j++) {
            char path[32];
            snprintf(path, sizeof(path), "/srv/d%u", j);
            CHECK_RC(ol_map_add_drive(map, name, path, NULL), 0);
        }
    }
}

static void node_names(const struct ol_map *map, const char **names, bool reverse)
{
    for (unsigned i = 0; i < map->nnodes; i++)
        names[i] = map->nodes[reverse ? map->nnodes - 1 - i : i].name;
}

/* Set s's shard i as "node:path", for comparing builds whose drive ids differ. */
static void shard_name(struct ol_map *map, unsigned s, unsigned i, char *out, size_t cap)
{
    const struct ol_map_drive *d = ol_map_drive(map, map->sets[s].drive[i]);
    snprintf(out, cap, "%s:%s", d ? d->node : "?", d ? d->path : "?");
}

static unsigned checked_layouts;

/* Every drive in exactly one set; at most ceil(w/N) shards of a set per node
 * (1 with N >= w); each node's share of shards within one of the others'
 * across the pool's sets is not promised, only the per-set bound. */
static void check_layout(struct ol_map *map, unsigned n, unsigned d, unsigned k, unsigned m)
{
    unsigned w = k + m;
    CHECK(map->npools == 1 && map->nsets == n * d / w);
    unsigned *seen = calloc(map->ndrives + 1, sizeof(unsigned));
    for (unsigned s = 0; s < map->nsets; s++) {
        unsigned per_node[64] = {0};
        for (unsigned i = 0; i < w; i++) {
            struct ol_map_drive *dr = ol_map_drive(map, map->sets[s].drive[i]);
            CHECK(dr != NULL);
            if (!dr)
                continue;
            seen[dr - map->drives]++;
            unsigned node = (unsigned)atoi(dr->node + 5);
            per_node[node]++;
        }
        unsigned limit = n >= w ? 1 : (w + n - 1) / n;
        for (unsigned i = 0; i < n; i++)
            if (per_node[i] > limit) {
                fprintf(stderr, "n=%u d=%u %u+%u: set %u has %u shards on node %u\n", n, d, k, m, s,
                        per_node[i], i);
                failures++;
            }
    }
    for (unsigned i = 0; i < map->ndrives; i++)
        CHECK(seen[i] == 1);
    free(seen);
    checked_layouts++;
}

static void test_build_property(void)
{
    static const unsigned geo[][2] = {{1, 0}, {1, 1}, {2, 1}, {2, 2},  {3, 2},
                                      {4, 2}, {6, 3}, {8, 4}, {12, 4}, {10, 6}};
    for (unsigned n = 1; n <= 20; n++)
        for (unsigned d = 1; d <= 6; d++)
            for (unsigned g = 0; g < sizeof(geo) / sizeof(geo[0]); g++) {
                unsigned k = geo[g][0], m = geo[g][1], w = k + m;
                struct ol_map a, b;
                const char *names[64];
                make_map(&a, n, d, false);
                node_names(&a, names, false);
                uint32_t pool = 99;
                int rc = ol_map_add_pool(&a, names, n, k, m, &pool);
                if ((n * d) % w != 0) {
                    CHECK_RC(rc, -EINVAL);
                    CHECK(a.npools == 0 && a.nsets == 0);
                    ol_map_free(&a);
                    continue;
                }
                CHECK_RC(rc, 0);
                CHECK(pool == 0);
                check_layout(&a, n, d, k, m);
                CHECK_RC(ol_map_validate(&a, NULL, 0), 0);
                /* deterministic: the same nodes inserted and named in reverse
                 * order give the same sets, shard for shard */
                make_map(&b, n, d, true);
                node_names(&b, names, true);
                CHECK_RC(ol_map_add_pool(&b, names, n, k, m, NULL), 0);
                CHECK(a.nsets == b.nsets);
                for (unsigned s = 0; s < a.nsets && s < b.nsets; s++)
                    for (unsigned i = 0; i < w; i++) {
                        char x[OL_MAP_MAX_NAME + OL_MAP_MAX_PATH + 4], y[sizeof(x)];
                        shard_name(&a, s, i, x, sizeof(x));
                        shard_name(&b, s, i, y, sizeof(y));
                        if (strcmp(x, y) != 0) {
                            fprintf(stderr, "n=%u d=%u %u+%u: set %u shard %u: %s vs %s\n", n, d, k,
                                    m, s, i, x, y);
                            failures++;
                            s = a.nsets;
                            break;
                        }
                    }
                ol_map_free(&a);
                ol_map_free(&b);
            }
    printf("pool building: %u layouts checked\n", checked_layouts);
    fflush(stdout);
}

static void test_build_cases(void)
{
    struct ol_map map;
    const char *names[8];

    /* 6 nodes x 2 drives, 4+2: two sets, each on all 6 nodes */
    make_map(&map, 6, 2, false);
    node_names(&map, names, false);
    uint32_t pool = 0;
    CHECK_RC(ol_map_add_pool(&map, names, 6, 4, 2, &pool), 0);
    CHECK(map.nsets == 2 && map.sets[0].id == 0 && map.sets[1].id == 1);
    /* the documented order: set 0 takes each node's first drive, by name */
    for (unsigned i = 0; i < 6; i++) {
        struct ol_map_drive *d = ol_map_drive(&map, map.sets[0].drive[i]);
        char want[16];
        snprintf(want, sizeof(want), "node-%02u", i);
        CHECK(d && strcmp(d->node, want) == 0 && strcmp(d->path, "/srv/d0") == 0);
    }
    /* no free drives left: a second pool over them is refused */
    CHECK_RC(ol_map_add_pool(&map, names, 6, 4, 2, NULL), -EINVAL);
    /* a later pool from new drives gets the next ids */
    for (unsigned i = 0; i < 6; i++)
        CHECK_RC(ol_map_add_drive(&map, names[i], "/srv/new", NULL), 0);
    CHECK_RC(ol_map_add_pool(&map, names, 6, 3, 3, &pool), 0);
    CHECK(pool == 1 && map.npools == 2 && map.nsets == 3 && map.sets[2].id == 2 &&
          map.sets[2].pool == 1);
    CHECK_RC(ol_map_validate(&map, NULL, 0), 0);
    /* unknown node, bad geometry */
    const char *ghost[] = {"node-00", "ghost"};
    CHECK_RC(ol_map_add_pool(&map, ghost, 2, 1, 1, NULL), -ENOENT);
    CHECK_RC(ol_map_add_pool(&map, names, 6, 0, 2, NULL), -EINVAL);
    CHECK_RC(ol_map_add_node(&map, "node-00", "", ""), -EEXIST);
    CHECK_RC(ol_map_add_node(&map, "a/b", "", ""), -EINVAL);
    CHECK_RC(ol_map_add_drive(&map, "node-00", "/srv/new", NULL), -EEXIST);
    CHECK_RC(ol_map_add_drive(&map, "ghost", "/srv/x", NULL), -ENOENT);
    ol_map_free(&map);

    /* unequal counts that cannot be spread: 4 + 1 + 1 drives, sets of 3 on 3
     * nodes would need one drive per node */
    CHECK_RC(ol_map_init(&map, "c1"), 0);
    CHECK_RC(ol_map_add_node(&map, "a", "", ""), 0);
    CHECK_RC(ol_map_add_node(&map, "b", "", ""), 0);
    CHECK_RC(ol_map_add_node(&map, "c", "", ""), 0);
    for (int i = 0; i < 4; i++) {
        char p[16];
        snprintf(p, sizeof(p), "/d%d", i);
        CHECK_RC(ol_map_add_drive(&map, "a", p, NULL), 0);
    }
    CHECK_RC(ol_map_add_drive(&map, "b", "/d0", NULL), 0);
    CHECK_RC(ol_map_add_drive(&map, "c", "/d0", NULL), 0);
    const char *abc[] = {"c", "a", "b", "a"}; /* order and repeats do not matter */
    CHECK_RC(ol_map_add_pool(&map, abc, 4, 2, 1, NULL), -OL_EMAP);
    CHECK(map.npools == 0 && map.nsets == 0);
    CHECK_RC(ol_map_validate(&map, NULL, 0), 0);
    ol_map_free(&map);

    /* unequal but spreadable: 3 + 3 + 2 + 2 + 2 drives, sets of 4 on 5 nodes */
    CHECK_RC(ol_map_init(&map, "c1"), 0);
    static const unsigned count[5] = {3, 3, 2, 2, 2};
    const char *abcde[] = {"a", "b", "c", "d", "e"};
    for (unsigned i = 0; i < 5; i++) {
        CHECK_RC(ol_map_add_node(&map, abcde[i], "", ""), 0);
        for (unsigned j = 0; j < count[i]; j++) {
            char p[16];
            snprintf(p, sizeof(p), "/d%u", j);
            CHECK_RC(ol_map_add_drive(&map, abcde[i], p, NULL), 0);
        }
    }
    CHECK_RC(ol_map_add_pool(&map, abcde, 5, 2, 2, NULL), 0);
    CHECK(map.nsets == 3);
    ol_map_free(&map);
}

/* A small valid map's JSON, for the mutation tests. */
static char *sample_json(struct ol_map *map)
{
    make_map(map, 3, 2, false);
    const char *names[3];
    node_names(map, names, false);
    CHECK_RC(ol_map_add_pool(map, names, 3, 2, 1, NULL), 0);
    map->epoch = 41;
    map->nodes[1].state = OL_NODE_DOWN;
    map->nodes[2].lease = 7587456123456789012ll;
    map->drives[3].state = OL_DRIVE_FAILED;
    map->drives[4].state = OL_DRIVE_OFFLINE;
    char *json = NULL;
    CHECK_RC(ol_map_to_json(map, &json, NULL), 0);
    return json;
}

/* Loads json after changing it with a cJSON edit; expects -OL_EMAP whose
 * reason mentions `needle`. */
static void expect_bad(const char *what, const char *json, const char *needle)
{
    struct ol_map map;
    char why[200] = "";
    int rc = ol_map_from_json(json, strlen(json), &map, why, sizeof(why));
    if (rc != -OL_EMAP || !strstr(why, needle)) {
        fprintf(stderr, "%s: rc %d, why \"%s\" (want -OL_EMAP, \"%s\")\n", what, rc, why, needle);
        failures++;
    }
    CHECK(map.nodes == NULL && map.nnodes == 0);
}

static void mutate(const char *base, const char *what, const char *needle, void (*edit)(cJSON *j))
{
    cJSON *j = cJSON_Parse(base);
    edit(j);
    char *s = cJSON_PrintUnformatted(j);
    expect_bad(what, s, needle);
    free(s);
    cJSON_Delete(j);
}

static cJSON *arr_item(cJSON *j, const char *arr, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(j, arr), i);
}

static void ed_format(cJSON *j)
{
    cJSON_SetNumberValue(cJSON_GetObjectItem(j, "format"), 2);
}
static void ed_unknown_drive(cJSON *j)
{
    cJSON_SetNumberValue(
        cJSON_GetArrayItem(cJSON_GetObjectItem(arr_item(j, "sets", 0), "drives"), 1), 999);
}
static void ed_drive_twice(cJSON *j)
{
    cJSON *d0 = cJSON_GetObjectItem(arr_item(j, "sets", 0), "drives");
    cJSON *d1 = cJSON_GetObjectItem(arr_item(j, "sets", 1), "drives");
    cJSON_SetNumberValue(cJSON_GetArrayItem(d1, 0), cJSON_GetArrayItem(d0, 0)->valuedouble);
}
static void ed_spread(cJSON *j)
{
    /* set 0 = drives of nodes 0,1,2; swapping shard 1 of set 0 with shard 0
     * of set 1 puts two drives of node 0 in set 0 */
    cJSON *d0 = cJSON_GetObjectItem(arr_item(j, "sets", 0), "drives");
    cJSON *d1 = cJSON_GetObjectItem(arr_item(j, "sets", 1), "drives");
    double a = cJSON_GetArrayItem(d0, 1)->valuedouble, b = cJSON_GetArrayItem(d1, 0)->valuedouble;
    cJSON_SetNumberValue(cJSON_GetArrayItem(d0, 1), b);
    cJSON_SetNumberValue(cJSON_GetArrayItem(d1, 0), a);
}
static void ed_unknown_node(cJSON *j)
{
    cJSON_SetValuestring(cJSON_GetObjectItem(arr_item(j, "drives", 2), "node"), "ghost");
}
static void ed_k_string(cJSON *j)
{
    cJSON_ReplaceItemInObject(arr_item(j, "sets", 0), "k", cJSON_CreateString("2"));
}
static void ed_k_count(cJSON *j)
{
    cJSON_SetNumberValue(cJSON_GetObjectItem(arr_item(j, "sets", 0), "k"), 3);
}
static void ed_no_pool(cJSON *j)
{
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(arr_item(j, "pools", 0), "sets"), 1);
}
static void ed_state(cJSON *j)
{
    cJSON_SetValuestring(cJSON_GetObjectItem(arr_item(j, "nodes", 0), "state"), "sideways");
}
static void ed_dup_node(cJSON *j)
{
    cJSON_SetValuestring(cJSON_GetObjectItem(arr_item(j, "nodes", 1), "name"), "node-00");
}
static void ed_neg_id(cJSON *j)
{
    cJSON_SetNumberValue(cJSON_GetObjectItem(arr_item(j, "drives", 0), "id"), -1);
}
static void ed_no_nodes(cJSON *j)
{
    cJSON_DeleteItemFromObject(j, "nodes");
}
static void ed_long_name(cJSON *j)
{
    char name[100];
    memset(name, 'x', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    cJSON_SetValuestring(cJSON_GetObjectItem(arr_item(j, "nodes", 0), "name"), name);
}

static void test_json(void)
{
    struct ol_map map, back;
    char *json = sample_json(&map);
    char why[200];
    CHECK_RC(ol_map_from_json(json, strlen(json), &back, why, sizeof(why)), 0);
    char *again = NULL;
    CHECK_RC(ol_map_to_json(&back, &again, NULL), 0);
    CHECK(again && strcmp(json, again) == 0);
    CHECK(back.epoch == 41 && back.nodes[1].state == OL_NODE_DOWN &&
          back.nodes[2].lease == 7587456123456789012ll && back.drives[3].state == OL_DRIVE_FAILED &&
          back.drives[4].state == OL_DRIVE_OFFLINE);
    CHECK(back.nsets == 2 && back.npools == 1 && back.pools[0].nsets == 2);
    free(again);
    ol_map_free(&back);

    /* every truncation is refused, none crashes */
    size_t len = strlen(json);
    unsigned refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        int rc = ol_map_from_json(json, cut, &back, why, sizeof(why));
        refused += rc == -OL_EMAP;
        if (rc == 0)
            ol_map_free(&back);
    }
    CHECK(refused == len);

    expect_bad("garbage", "{\"format\": 1, ", "JSON");
    expect_bad("array", "[1, 2]", "object");
    mutate(json, "format 2", "format 2", ed_format);
    mutate(json, "unknown drive", "unknown drive 999", ed_unknown_drive);
    mutate(json, "drive twice", "in two sets", ed_drive_twice);
    mutate(json, "spread", "on one node", ed_spread);
    mutate(json, "unknown node", "unknown node \"ghost\"", ed_unknown_node);
    mutate(json, "k as string", "\"k\"", ed_k_string);
    mutate(json, "k+m != drives", "drives for 3+1", ed_k_count);
    mutate(json, "set in no pool", "in no pool", ed_no_pool);
    mutate(json, "bad state", "unknown state", ed_state);
    mutate(json, "duplicate node", "listed twice", ed_dup_node);
    mutate(json, "negative id", "\"id\"", ed_neg_id);
    mutate(json, "no nodes", "\"nodes\"", ed_no_nodes);
    mutate(json, "long name", "longer than", ed_long_name);
    free(json);
    ol_map_free(&map);
}

/* ---- with etcd ---- */

struct add_node_arg {
    const char *name;
    unsigned calls;
    struct ol_etcd *rival; /* on the first call, changes the map behind fn's back */
};

static int add_node_fn(void *arg, struct ol_map *map)
{
    struct add_node_arg *a = arg;
    a->calls++;
    if (a->rival && a->calls == 1) {
        struct ol_map other;
        CHECK_RC(ol_map_load(a->rival, "c1", &other, NULL, 0), 0);
        static unsigned rivals;
        char name[32];
        snprintf(name, sizeof(name), "rival-%u", rivals++);
        CHECK_RC(ol_map_add_node(&other, name, "", ""), 0);
        CHECK_RC(ol_map_store(a->rival, &other), 0);
        ol_map_free(&other);
    }
    return ol_map_add_node(map, a->name, "", "");
}

static void test_etcd(const char *url)
{
    struct ol_etcd *c1 = NULL, *c2 = NULL;
    CHECK_RC(ol_etcd_create(&c1, url, 2000), 0);
    CHECK_RC(ol_etcd_create(&c2, url, 2000), 0);
    if (!c1 || !c2)
        return;
    struct ol_map a, b;
    char why[200];
    CHECK_RC(ol_map_load(c1, "c1", &a, why, sizeof(why)), -ENOENT);

    /* create: epoch 0 -> 1; a second create of the same cluster loses */
    make_map(&a, 3, 2, false);
    const char *names[3];
    node_names(&a, names, false);
    CHECK_RC(ol_map_add_pool(&a, names, 3, 2, 1, NULL), 0);
    CHECK_RC(ol_map_store(c1, &a), 0);
    CHECK(a.epoch == 1 && a.mod_rev > 0);
    make_map(&b, 1, 1, false);
    CHECK_RC(ol_map_store(c2, &b), -OL_ECASFAIL);
    CHECK(b.epoch == 0 && b.mod_rev == 0);
    ol_map_free(&b);

    /* two writers read epoch 1; the first store wins, the second loses,
     * re-reads, redoes its change and wins */
    CHECK_RC(ol_map_load(c2, "c1", &b, why, sizeof(why)), 0);
    CHECK(b.epoch == 1 && b.mod_rev == a.mod_rev && b.nsets == 2);
    CHECK_RC(ol_map_add_node(&a, "writer-a", "", ""), 0);
    CHECK_RC(ol_map_add_node(&b, "writer-b", "", ""), 0);
    CHECK_RC(ol_map_store(c1, &a), 0);
    CHECK(a.epoch == 2);
    int64_t stale = b.mod_rev;
    CHECK_RC(ol_map_store(c2, &b), -OL_ECASFAIL);
    CHECK(b.epoch == 1 && b.mod_rev == stale); /* unchanged on a loss */
    ol_map_free(&b);
    CHECK_RC(ol_map_load(c2, "c1", &b, why, sizeof(why)), 0);
    CHECK(b.epoch == 2 && ol_map_node(&b, "writer-a"));
    CHECK_RC(ol_map_add_node(&b, "writer-b", "", ""), 0);
    CHECK_RC(ol_map_store(c2, &b), 0);
    CHECK(b.epoch == 3);
    ol_map_free(&a);
    ol_map_free(&b);

    /* ol_map_update re-reads and redoes fn after a rival's write */
    struct add_node_arg arg = {.name = "updated", .rival = c2};
    struct ol_map out;
    CHECK_RC(ol_map_update(c1, "c1", false, add_node_fn, &arg, 5, &out), 0);
    CHECK(arg.calls == 2);
    CHECK(out.epoch == 5 && ol_map_node(&out, "rival-0") && ol_map_node(&out, "updated") &&
          ol_map_node(&out, "writer-a") && ol_map_node(&out, "writer-b"));
    ol_map_free(&out);
    /* a rival on every try exhausts the tries */
    struct add_node_arg one = {.name = "never", .rival = c2};
    CHECK_RC(ol_map_update(c1, "c1", false, add_node_fn, &one, 1, NULL), -OL_ECASFAIL);
    /* fn's refusal is passed back, nothing stored */
    struct add_node_arg dup = {.name = "updated"};
    CHECK_RC(ol_map_update(c1, "c1", false, add_node_fn, &dup, 5, NULL), -EEXIST);
    /* create on an empty cluster */
    struct add_node_arg first = {.name = "first"};
    CHECK_RC(ol_map_update(c1, "c2", false, add_node_fn, &first, 5, NULL), -ENOENT);
    CHECK_RC(ol_map_update(c1, "c2", true, add_node_fn, &first, 5, &out), 0);
    CHECK(out.epoch == 1 && out.nnodes == 1);
    ol_map_free(&out);

    /* what is in etcd is checked on load: garbage, another cluster's map */
    CHECK_RC(ol_etcd_put(c1, "/openlake/c3/map", "{\"format\":", 10, 0, NULL), 0);
    CHECK_RC(ol_map_load(c1, "c3", &a, why, sizeof(why)), -OL_EMAP);
    CHECK(a.nodes == NULL);
    CHECK_RC(ol_map_load(c1, "c1", &a, why, sizeof(why)), 0);
    char *json = NULL;
    size_t len = 0;
    CHECK_RC(ol_map_to_json(&a, &json, &len), 0);
    CHECK_RC(ol_etcd_put(c1, "/openlake/c4/map", json, len, 0, NULL), 0);
    CHECK_RC(ol_map_load(c1, "c4", &b, why, sizeof(why)), -OL_EMAP);
    CHECK(strstr(why, "names cluster \"c1\"") != NULL);
    free(json);
    /* an invalid map is not stored */
    a.sets[0].drive[0] = 12345;
    CHECK_RC(ol_map_store(c1, &a), -OL_EMAP);
    ol_map_free(&a);
    ol_etcd_destroy(c1);
    ol_etcd_destroy(c2);
}

int main(void)
{
    test_build_property();
    test_build_cases();
    test_json();
    struct etcd_fixture fx;
    int rc = etcd_fixture_start(&fx, "cluster_map");
    if (rc == 0) {
        test_etcd(fx.url);
        etcd_fixture_stop(&fx);
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    if (rc)
        return rc; /* the etcd half was skipped (77) or etcd failed (1) */
    printf("cluster_map: ok\n");
    return 0;
}
