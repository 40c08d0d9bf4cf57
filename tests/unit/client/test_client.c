/* libopenlake through its public API (include/openlake/client.h) against
 * a native port in this process over one drive: byte-identical round trips
 * from 0 B to past one message (a PUT session and a GET in ranges), a
 * batch of 1000 ranged reads, a batch of 1500 PUTs, a put stream, list
 * paging, head and delete,
 * and the wrong access key / wrong secret refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/clock.h"
#include "native/server.h"
#include "obj/obj.h"
#include "openlake/client.h"
#include "store/store.h"

static int secret_of(void *arg, const char *ak, char secret[129])
{
    (void)arg;
    if (strcmp(ak, "cli-ak") != 0)
        return -ENOENT;
    snprintf(secret, 129, "cli-secret");
    return 0;
}

static uint8_t *pattern(size_t n, unsigned seed)
{
    uint8_t *p = malloc(n ? n : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
    return p;
}

static int count_key(void *arg, const char *key, const struct ol_client_info *info)
{
    (void)key;
    (void)info;
    (*(int *)arg)++;
    return 0;
}

int main(void)
{
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "client") != 0)
        return 77;
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, root, &so), 0);
    struct ol_obj *obj;
    CHECK_RC(ol_obj_open_store(st, &obj), 0);
    CHECK_RC(ol_obj_bucket_create(obj, "bkt", ol_wall_ns()), 0);
    struct ol_native_server_opts o = {.host = "127.0.0.1", .obj = obj, .secret = secret_of};
    struct ol_native_server *srv;
    int rc = ol_native_server_create(&o, &srv);
    if (rc == -EIO)
        return 77;
    CHECK_RC(rc, 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_native_server_port(srv));

    struct ol_client *c, *bad;
    struct ol_client_opts co = {.endpoint = addr, .access_key = "cli-ak", .secret_key = "cli-secret"};
    CHECK_RC(ol_client_open(&co, &c), 0);
    struct ol_client_opts wrong = co;
    wrong.secret_key = "nope";
    CHECK_RC(ol_client_open(&wrong, &bad), -EACCES);
    wrong = co;
    wrong.access_key = "nobody";
    CHECK_RC(ol_client_open(&wrong, &bad), -EACCES);
    wrong = co;
    wrong.endpoint = "not-an-address";
    CHECK_RC(ol_client_open(&wrong, &bad), -EINVAL);

    /* Round trips, across the one-message limit both ways. */
    size_t sizes[] = {0, 1, 4096, 1 << 20, 64u << 20, (64u << 20) + 1, (150u << 20) + 3};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *d = pattern(n, i), *back = malloc(n + 16);
        char key[32];
        snprintf(key, sizeof(key), "rt/%zu", n);
        struct ol_client_info info;
        CHECK_RC(ol_client_put(c, "bkt", key, d, n, &info), 0);
        CHECK(info.size == n);
        memset(back, 0xee, n + 16);
        int64_t got = ol_client_get(c, "bkt", key, 0, back, n + 16, &info);
        CHECK(got == (int64_t)n);
        CHECK(n == 0 || memcmp(back, d, n) == 0);
        CHECK(back[n] == 0xee);
        if (n > 10) {
            got = ol_client_get(c, "bkt", key, n - 10, back, 100, NULL);
            CHECK(got == 10 && memcmp(back, d + n - 10, 10) == 0);
        }
        free(d);
        free(back);
    }
    CHECK(ol_client_get(c, "bkt", "rt/4096", 4096, (uint8_t[8]){0}, 8, NULL) == -ERANGE);
    CHECK(ol_client_get(c, "bkt", "missing", 0, (uint8_t[8]){0}, 8, NULL) == -OL_CLIENT_ENOKEY);
    CHECK(ol_client_get(c, "nobucket", "k", 0, (uint8_t[8]){0}, 8, NULL) ==
          -OL_CLIENT_ENOBUCKET);

    /* A put stream in uneven pieces. */
    {
        size_t n = (70u << 20) + 5;
        uint8_t *d = pattern(n, 99), *back = malloc(n);
        struct ol_client_put_stream *s;
        CHECK_RC(ol_client_put_begin(c, "bkt", "stream", n, &s), 0);
        size_t off = 0, piece = 3 << 20;
        while (off < n) {
            size_t k = n - off < piece ? n - off : piece;
            CHECK_RC(ol_client_put_write(s, d + off, k), 0);
            off += k;
        }
        struct ol_client_info info;
        CHECK_RC(ol_client_put_commit(s, &info), 0);
        CHECK(ol_client_get(c, "bkt", "stream", 0, back, n, NULL) == (int64_t)n);
        CHECK(memcmp(back, d, n) == 0);
        /* A short stream commits nothing. */
        CHECK_RC(ol_client_put_begin(c, "bkt", "short", 100, &s), 0);
        CHECK_RC(ol_client_put_write(s, d, 50), 0);
        CHECK_RC(ol_client_put_commit(s, &info), -EIO);
        CHECK(ol_client_head(c, "bkt", "short", &info) == -OL_CLIENT_ENOKEY);
        free(d);
        free(back);
    }

    /* A batch of 1000 ranged reads over 100 objects, checked byte by byte. */
    {
        uint8_t *objs[100];
        char keys[100][16];
        for (int i = 0; i < 100; i++) {
            objs[i] = pattern(8192, 1000 + (unsigned)i);
            snprintf(keys[i], sizeof(keys[i]), "b/%03d", i);
            CHECK_RC(ol_client_put(c, "bkt", keys[i], objs[i], 8192, NULL), 0);
        }
        struct ol_client_op *ops = calloc(1000, sizeof(*ops));
        struct ol_client_op **pp = calloc(1000, sizeof(*pp));
        uint8_t *bufs = malloc(1000 * 512);
        for (int i = 0; i < 1000; i++) {
            ops[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_GET, .bucket = "bkt",
                                           .key = keys[i % 100], .buf = bufs + i * 512,
                                           .offset = (uint64_t)(i * 7) % 7680, .len = 512,
                                           .user_data = (uint64_t)i};
            pp[i] = &ops[i];
        }
        ops[999].key = "missing"; /* one fails alone */
        CHECK_RC(ol_client_run(c, pp, 1000), -OL_CLIENT_ENOKEY);
        int good = 0;
        for (int i = 0; i < 999; i++)
            good += ops[i].result == 512 &&
                    memcmp(bufs + i * 512, objs[i % 100] + ops[i].offset, 512) == 0;
        CHECK(good == 999);
        CHECK(ops[999].result == -OL_CLIENT_ENOKEY);
        /* submit / reap */
        for (int i = 0; i < 1000; i++)
            ops[i].key = keys[i % 100];
        CHECK_RC(ol_client_submit(c, pp, 1000), 1000);
        int reaped = 0, ok = 0;
        struct ol_client_op *done[64];
        while (reaped < 1000) {
            int n = ol_client_reap(c, done, 1, 64, 10000);
            if (n <= 0)
                break;
            for (int j = 0; j < n; j++) {
                int i = (int)done[j]->user_data;
                ok += done[j]->result == 512 &&
                      memcmp(bufs + i * 512, objs[i % 100] + ops[i].offset, 512) == 0;
            }
            reaped += n;
        }
        CHECK(reaped == 1000 && ok == 1000);
        for (int i = 0; i < 100; i++)
            free(objs[i]);
        free(ops);
        free(pp);
        free(bufs);
    }

    /* List: prefix and paging (1500 keys > one page), head, delete.  The
     * keys go in as one batch of PUTs: in flight together, the store syncs
     * them in groups (one at a time, each waited for its own fdatasync and
     * took most of this test's time). */
    {
        enum { NMANY = 1500 };
        struct ol_client_op *ops = calloc(NMANY, sizeof(*ops));
        struct ol_client_op **pp = calloc(NMANY, sizeof(*pp));
        char(*keys)[16] = calloc(NMANY, sizeof(*keys));
        for (int i = 0; i < NMANY; i++) {
            snprintf(keys[i], sizeof(keys[i]), "many/%05d", i);
            ops[i] = (struct ol_client_op){.opcode = OL_CLIENT_OP_PUT, .bucket = "bkt",
                                           .key = keys[i], .buf = "x", .len = 1,
                                           .user_data = (uint64_t)i};
            pp[i] = &ops[i];
        }
        CHECK_RC(ol_client_run(c, pp, NMANY), 0);
        int stored = 0;
        for (int i = 0; i < NMANY; i++)
            stored += ops[i].result == 0;
        CHECK(stored == NMANY);
        free(ops);
        free(pp);
        free(keys);
        int n = 0;
        CHECK(ol_client_list(c, "bkt", "many/", NULL, count_key, &n) == 1500);
        CHECK(n == 1500);
        n = 0;
        CHECK(ol_client_list(c, "bkt", "many/", "many/01000", count_key, &n) == 499);
        struct ol_client_info info;
        CHECK_RC(ol_client_head(c, "bkt", "many/00001", &info), 0);
        CHECK(info.size == 1 && info.etag[0] == '"');
        CHECK_RC(ol_client_delete(c, "bkt", "many/00001"), 0);
        CHECK(ol_client_head(c, "bkt", "many/00001", &info) == -OL_CLIENT_ENOKEY);
        CHECK_RC(ol_client_delete(c, "bkt", "many/00001"), 0);
    }
    CHECK(ol_client_get(c, "bkt", "", 0, NULL, 0, NULL) == -EINVAL);

    ol_client_close(c);
    ol_native_server_destroy(srv);
    ol_obj_close(obj);
    ol_store_close(st);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return failures ? 1 : 0;
}
