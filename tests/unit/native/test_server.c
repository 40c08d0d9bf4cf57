/* The native port (native/server.h) over the raw client protocol
 * (native/proto.h), against one drive: every op, PUT sessions, batches,
 * ranges and the authentication rules.  libopenlake's own tests cover the
 * same ops through the library; this one pins the wire contract. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/clock.h"
#include "native/proto.h"
#include "native/server.h"
#include "net/net.h"
#include "obj/obj.h"
#include "store/store.h"

static const char *AK = "native-ak", *SK = "native-secret";

static int secret_of(void *arg, const char *ak, char secret[129])
{
    (void)arg;
    if (strcmp(ak, AK) != 0)
        return -ENOENT;
    snprintf(secret, 129, "%s", SK);
    return 0;
}

struct cli {
    struct ol_net *net;
    char addr[64];
    const char *ak;
};

static void cli_open(struct cli *c, const char *addr, const char *ak, const char *sk)
{
    uint8_t key[OL_NET_KEY_BYTES];
    ol_native_key(ak, sk, key);
    struct ol_net_opts o = {.timeout_ms = 5000, .key = key};
    if (ol_net_create(&o, &c->net) < 0) {
        fprintf(stderr, "UCX did not start: skipped\n");
        exit(77);
    }
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    c->ak = ak;
}

/* One call: ctl = access key + args (w), data; reply ctl into rctl. */
static int call(struct cli *c, uint8_t op, const struct ol_wbuf *args, const void *data,
                size_t dlen, uint8_t *rctl, size_t rcap, size_t *rlen, void *rdata, size_t rdcap)
{
    uint8_t ctl[8192];
    struct ol_wbuf w = {.p = ctl, .cap = sizeof(ctl)};
    ol_wbuf_str(&w, c->ak, strlen(c->ak));
    if (args)
        ol_wbuf_bytes(&w, args->p, args->len);
    if (w.over)
        abort();
    struct ol_net_call k = {.addr = c->addr,
                            .op = op,
                            .ctl = ctl,
                            .ctl_len = w.len,
                            .data = data,
                            .data_len = dlen,
                            .rep_ctl = rctl,
                            .rep_ctl_cap = rcap,
                            .rep_data = rdata,
                            .rep_data_cap = rdcap};
    int rc = ol_net_call(c->net, &k);
    if (rlen)
        *rlen = k.rep_ctl_len;
    return rc;
}

/* A WRITE sent from another thread (two messages of a session in flight). */
struct later {
    struct cli *c;
    uint64_t id, off;
    const uint8_t *data;
    size_t len;
    int rc;
};

static void *send_later(void *arg)
{
    struct later *l = arg;
    uint8_t a[64], r[64];
    struct ol_wbuf w = {.p = a, .cap = sizeof(a)};
    ol_wbuf_u64(&w, l->id);
    ol_wbuf_u64(&w, l->off);
    size_t rl;
    l->rc = call(l->c, OL_COP_PUT_WRITE, &w, l->data, l->len, r, sizeof(r), &rl, NULL, 0);
    return NULL;
}

#define ARGS(name, sz)                                                                             \
    uint8_t name##_b[sz];                                                                          \
    struct ol_wbuf name = {.p = name##_b, .cap = sz}

static void put_names(struct ol_wbuf *w, const char *b, const char *k)
{
    ol_wbuf_str(w, b, strlen(b));
    ol_wbuf_str(w, k, strlen(k));
}

struct info {
    uint64_t size;
    char etag[80], vid[80], ctype[260];
};

static void get_info(const uint8_t *p, size_t n, struct info *in)
{
    struct ol_rbuf r = {.p = p, .len = n};
    in->size = ol_rbuf_u64(&r);
    (void)ol_rbuf_u64(&r);
    size_t l;
    const char *s = ol_rbuf_str(&r, 79, &l);
    snprintf(in->etag, sizeof(in->etag), "%.*s", (int)l, s ? s : "");
    s = ol_rbuf_str(&r, 79, &l);
    snprintf(in->vid, sizeof(in->vid), "%.*s", (int)l, s ? s : "");
    s = ol_rbuf_str(&r, 259, &l);
    snprintf(in->ctype, sizeof(in->ctype), "%.*s", (int)l, s ? s : "");
    CHECK(!r.bad);
}

static int do_put(struct cli *c, const char *b, const char *k, const void *d, size_t n,
                  struct info *in)
{
    ARGS(a, 2048);
    put_names(&a, b, k);
    ol_wbuf_str(&a, "application/x-test", 18);
    uint8_t r[512];
    size_t rl = 0;
    int rc = call(c, OL_COP_PUT, &a, d, n, r, sizeof(r), &rl, NULL, 0);
    if (rc == 0 && in)
        get_info(r, rl, in);
    return rc;
}

static int do_get(struct cli *c, const char *b, const char *k, uint64_t off, uint64_t len,
                  void *buf, size_t cap, struct info *in)
{
    ARGS(a, 2048);
    put_names(&a, b, k);
    ol_wbuf_str(&a, "", 0);
    ol_wbuf_u64(&a, off);
    ol_wbuf_u64(&a, len);
    uint8_t r[512];
    size_t rl = 0;
    int rc = call(c, OL_COP_GET, &a, NULL, 0, r, sizeof(r), &rl, buf, cap);
    if (rc >= 0 && in)
        get_info(r, rl, in);
    return rc;
}

int main(void)
{
    char root[256];
    if (check_mkdtemp(root, sizeof(root), "native") != 0)
        return 77;
    struct ol_store_opts so;
    ol_store_opts_default(&so);
    struct ol_store *st;
    CHECK_RC(ol_store_open(&st, root, &so), 0);
    struct ol_obj *obj;
    CHECK_RC(ol_obj_open_store(st, &obj), 0);
    CHECK_RC(ol_obj_bucket_create(obj, "bkt", ol_wall_ns()), 0);

    struct ol_native_server_opts o = {
        .host = "127.0.0.1", .obj = obj, .secret = secret_of, .workers = 2};
    struct ol_native_server *srv;
    int rc = ol_native_server_create(&o, &srv);
    if (rc == -EIO) {
        fprintf(stderr, "UCX did not start: skipped\n");
        return 77;
    }
    CHECK_RC(rc, 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ol_native_server_port(srv));

    struct cli c, bad_secret, bad_key;
    cli_open(&c, addr, AK, SK);
    cli_open(&bad_secret, addr, AK, "wrong");
    cli_open(&bad_key, addr, "nobody", SK);

    /* HELLO: credentials checked; wrong secret and unknown key refused. */
    uint8_t r[4096];
    size_t rl = 0;
    CHECK_RC(call(&c, OL_COP_HELLO, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
    {
        struct ol_rbuf rb = {.p = r, .len = rl};
        CHECK(ol_rbuf_u32(&rb) == OL_NATIVE_PROTO_VERSION);
        CHECK(ol_rbuf_u64(&rb) == OL_NATIVE_MAX_DATA);
        CHECK(ol_rbuf_u32(&rb) == 1);
    }
    CHECK_RC(call(&bad_secret, OL_COP_HELLO, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0),
             -EACCES);
    CHECK_RC(call(&bad_key, OL_COP_HELLO, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EACCES);
    CHECK_RC(do_put(&bad_secret, "bkt", "x", "abc", 3, NULL), -EACCES);
    /* A drive op on the native port is no user's. */
    CHECK_RC(call(&c, OL_WOP_PING, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EACCES);

    /* PUT / GET / HEAD, ranges. */
    size_t big = (3u << 20) + 7;
    uint8_t *data = malloc(big), *back = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 9));
    struct info in;
    CHECK_RC(do_put(&c, "bkt", "obj", data, big, &in), 0);
    CHECK(in.size == big && in.etag[0] == '"' && strcmp(in.ctype, "application/x-test") == 0);
    CHECK(strcmp(in.vid, "null") == 0);
    memset(back, 0, big);
    CHECK_RC(do_get(&c, "bkt", "obj", 0, UINT64_MAX, back, big, &in), (int)big);
    CHECK(memcmp(back, data, big) == 0 && in.size == big);
    CHECK_RC(do_get(&c, "bkt", "obj", 1000, 5000, back, big, NULL), 5000);
    CHECK(memcmp(back, data + 1000, 5000) == 0);
    CHECK_RC(do_get(&c, "bkt", "obj", big - 3, 100, back, big, NULL), 3);
    CHECK_RC(do_get(&c, "bkt", "obj", big, 1, back, big, NULL), -ERANGE);
    CHECK_RC(do_get(&c, "bkt", "nope", 0, 1, back, big, NULL), -OL_ENOKEY);
    CHECK_RC(do_get(&c, "nobkt", "obj", 0, 1, back, big, NULL), -OL_ENOBUCKET);
    /* A reply larger than the caller's buffer is refused, not truncated. */
    CHECK(do_get(&c, "bkt", "obj", 0, UINT64_MAX, back, 100, NULL) < 0);
    /* Empty object. */
    CHECK_RC(do_put(&c, "bkt", "empty", NULL, 0, &in), 0);
    CHECK(in.size == 0);
    CHECK_RC(do_get(&c, "bkt", "empty", 0, UINT64_MAX, back, big, &in), 0);
    {
        ARGS(a, 256);
        put_names(&a, "bkt", "obj");
        ol_wbuf_str(&a, "", 0);
        CHECK_RC(call(&c, OL_COP_HEAD, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        get_info(r, rl, &in);
        CHECK(in.size == big);
    }
    /* Direct reads on one drive: LAYOUT answers the info and "not direct",
     * SHARD_GET is not served; both need the credentials. */
    {
        ARGS(a, 256);
        put_names(&a, "bkt", "obj");
        ol_wbuf_str(&a, "", 0);
        CHECK_RC(call(&c, OL_COP_LAYOUT, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        get_info(r, rl, &in);
        CHECK(in.size == big);
        struct ol_rbuf rb = {.p = r, .len = rl};
        (void)ol_rbuf_u64(&rb);
        (void)ol_rbuf_u64(&rb);
        size_t l;
        for (int i = 0; i < 3; i++)
            (void)ol_rbuf_str(&rb, 300, &l);
        CHECK(ol_rbuf_u8(&rb) == 0 && !rb.bad && rb.off == rb.len);
        CHECK_RC(call(&bad_secret, OL_COP_LAYOUT, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0),
                 -EACCES);
        ARGS(n, 256);
        put_names(&n, "bkt", "nope");
        ol_wbuf_str(&n, "", 0);
        CHECK_RC(call(&c, OL_COP_LAYOUT, &n, NULL, 0, r, sizeof(r), &rl, NULL, 0), -OL_ENOKEY);
        ARGS(g, 256);
        put_names(&g, "bkt", "obj");
        ol_wbuf_u32(&g, 0);
        struct ol_version_id vid = {{0}};
        ol_wbuf_vid(&g, &vid);
        ol_wbuf_u8(&g, 0);
        ol_wbuf_u64(&g, 0);
        ol_wbuf_u64(&g, 10);
        CHECK_RC(call(&c, OL_COP_SHARD_GET, &g, NULL, 0, r, sizeof(r), &rl, back, big),
                 -ENOTSUP);
        /* Malformed: a zero length. */
        ARGS(z, 256);
        put_names(&z, "bkt", "obj");
        ol_wbuf_u32(&z, 0);
        ol_wbuf_vid(&z, &vid);
        ol_wbuf_u8(&z, 0);
        ol_wbuf_u64(&z, 0);
        ol_wbuf_u64(&z, 0);
        CHECK_RC(call(&c, OL_COP_SHARD_GET, &z, NULL, 0, r, sizeof(r), &rl, back, big), -EINVAL);
    }
    /* If-match: the ranges of one object never mix two versions. */
    {
        ARGS(a, 2048);
        put_names(&a, "bkt", "obj");
        ol_wbuf_str(&a, "", 0);
        ol_wbuf_u64(&a, 0);
        ol_wbuf_u64(&a, 10);
        ol_wbuf_str(&a, "\"00000000000000000000000000000000\"", 34);
        CHECK_RC(call(&c, OL_COP_GET, &a, NULL, 0, r, sizeof(r), &rl, back, big),
                 -OL_EPRECONDITION);
    }

    /* A PUT session: three writes, one out of order (the session fails). */
    {
        ARGS(a, 2048);
        put_names(&a, "bkt", "sess");
        ol_wbuf_str(&a, "", 0);
        ol_wbuf_u64(&a, big);
        CHECK_RC(call(&c, OL_COP_PUT_BEGIN, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        struct ol_rbuf rb = {.p = r, .len = rl};
        uint64_t id = ol_rbuf_u64(&rb);
        CHECK(id != 0);
        size_t third = big / 3;
        ARGS(w1, 64);
        ol_wbuf_u64(&w1, id);
        ol_wbuf_u64(&w1, 0);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &w1, data, third, r, sizeof(r), &rl, NULL, 0), 0);
        /* Not visible before the commit. */
        CHECK_RC(do_get(&c, "bkt", "sess", 0, 1, back, big, NULL), -OL_ENOKEY);
        /* The second third, at its offset. */
        ARGS(w2, 64);
        ol_wbuf_u64(&w2, id);
        ol_wbuf_u64(&w2, third);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &w2, data + third, third, r, sizeof(r), &rl, NULL, 0),
                 0);
        ARGS(w3, 64);
        ol_wbuf_u64(&w3, id);
        CHECK_RC(call(&c, OL_COP_PUT_COMMIT, &w3, data + 2 * third, big - 2 * third, r,
                      sizeof(r), &rl, NULL, 0),
                 0);
        get_info(r, rl, &in);
        CHECK(in.size == big);
        memset(back, 0, big);
        CHECK_RC(do_get(&c, "bkt", "sess", 0, UINT64_MAX, back, big, NULL), (int)big);
        CHECK(memcmp(back, data, big) == 0);
        /* The session is gone. */
        CHECK_RC(call(&c, OL_COP_PUT_COMMIT, &w3, NULL, 0, r, sizeof(r), &rl, NULL, 0), -ENOENT);

        /* A repeated offset fails the session; nothing becomes visible. */
        ARGS(b, 2048);
        put_names(&b, "bkt", "sess2");
        ol_wbuf_str(&b, "", 0);
        ol_wbuf_u64(&b, 10);
        CHECK_RC(call(&c, OL_COP_PUT_BEGIN, &b, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        rb = (struct ol_rbuf){.p = r, .len = rl};
        id = ol_rbuf_u64(&rb);
        ARGS(x1, 64);
        ol_wbuf_u64(&x1, id);
        ol_wbuf_u64(&x1, 0);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &x1, data, 5, r, sizeof(r), &rl, NULL, 0), 0);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &x1, data, 5, r, sizeof(r), &rl, NULL, 0), -EIO);
        CHECK_RC(do_get(&c, "bkt", "sess2", 0, 1, back, big, NULL), -OL_ENOKEY);

        /* Two messages in flight, the later one first: it waits for the
         * one before it (libopenlake keeps two in flight). */
        ARGS(d, 2048);
        put_names(&d, "bkt", "sess3");
        ol_wbuf_str(&d, "", 0);
        ol_wbuf_u64(&d, big);
        CHECK_RC(call(&c, OL_COP_PUT_BEGIN, &d, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        rb = (struct ol_rbuf){.p = r, .len = rl};
        id = ol_rbuf_u64(&rb);
        struct later lt = {.c = &c, .id = id, .off = third, .data = data + third, .len = third};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, send_later, &lt) == 0);
        usleep(100000); /* the later one is at the node, waiting */
        ARGS(y1, 64);
        ol_wbuf_u64(&y1, id);
        ol_wbuf_u64(&y1, 0);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &y1, data, third, r, sizeof(r), &rl, NULL, 0), 0);
        pthread_join(th, NULL);
        CHECK_RC(lt.rc, 0);
        ARGS(y3, 64);
        ol_wbuf_u64(&y3, id);
        CHECK_RC(call(&c, OL_COP_PUT_COMMIT, &y3, data + 2 * third, big - 2 * third, r,
                      sizeof(r), &rl, NULL, 0),
                 0);
        memset(back, 0, big);
        CHECK_RC(do_get(&c, "bkt", "sess3", 0, UINT64_MAX, back, big, NULL), (int)big);
        CHECK(memcmp(back, data, big) == 0);

        /* A message more than one ahead is a lost one: the session fails. */
        ARGS(e, 2048);
        put_names(&e, "bkt", "sess4");
        ol_wbuf_str(&e, "", 0);
        ol_wbuf_u64(&e, 10);
        CHECK_RC(call(&c, OL_COP_PUT_BEGIN, &e, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        rb = (struct ol_rbuf){.p = r, .len = rl};
        id = ol_rbuf_u64(&rb);
        ARGS(z1, 64);
        ol_wbuf_u64(&z1, id);
        ol_wbuf_u64(&z1, (uint64_t)OL_NATIVE_MAX_DATA + 1);
        CHECK_RC(call(&c, OL_COP_PUT_WRITE, &z1, data, 5, r, sizeof(r), &rl, NULL, 0), -EIO);
        CHECK_RC(do_get(&c, "bkt", "sess4", 0, 1, back, big, NULL), -OL_ENOKEY);
    }

    /* GET_BATCH: many small ranged reads, each with its own status. */
    {
        char k[32];
        for (int i = 0; i < 50; i++) {
            snprintf(k, sizeof(k), "small/%03d", i);
            CHECK_RC(do_put(&c, "bkt", k, data + i * 64, 4096, NULL), 0);
        }
        ARGS(a, 8192);
        ol_wbuf_u32(&a, 52);
        for (int i = 0; i < 50; i++) {
            snprintf(k, sizeof(k), "small/%03d", i);
            put_names(&a, "bkt", k);
            ol_wbuf_u64(&a, (uint64_t)i);
            ol_wbuf_u64(&a, 100);
        }
        put_names(&a, "bkt", "missing");
        ol_wbuf_u64(&a, 0);
        ol_wbuf_u64(&a, 100);
        put_names(&a, "bkt", "small/000");
        ol_wbuf_u64(&a, 5000);
        ol_wbuf_u64(&a, 100);
        CHECK_RC(call(&c, OL_COP_GET_BATCH, &a, NULL, 0, r, sizeof(r), &rl, back, big), 52);
        struct ol_rbuf rb = {.p = r, .len = rl};
        size_t off = 0;
        for (int i = 0; i < 50; i++) {
            CHECK((int)ol_rbuf_u32(&rb) == 0);
            uint64_t n = ol_rbuf_u64(&rb);
            CHECK(n == 100);
            CHECK(memcmp(back + off, data + i * 64 + i, 100) == 0);
            off += n;
        }
        CHECK((int)ol_rbuf_u32(&rb) == -OL_ENOKEY);
        CHECK(ol_rbuf_u64(&rb) == 0);
        CHECK((int)ol_rbuf_u32(&rb) == -ERANGE);
        CHECK(!rb.bad);
    }

    /* LIST with a prefix and paging; DELETE. */
    {
        ARGS(a, 256);
        ol_wbuf_str(&a, "bkt", 3);
        ol_wbuf_str(&a, "small/", 6);
        ol_wbuf_str(&a, "small/009", 9);
        ol_wbuf_u32(&a, 30);
        CHECK_RC(call(&c, OL_COP_LIST, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        struct ol_rbuf rb = {.p = r, .len = rl};
        CHECK(ol_rbuf_u32(&rb) == 30);
        size_t l;
        const char *s = ol_rbuf_str(&rb, 1024, &l);
        CHECK(s && l == 9 && memcmp(s, "small/010", 9) == 0);
        CHECK(ol_rbuf_u64(&rb) == 4096);
        for (int i = 1; i < 30; i++) {
            ol_rbuf_u64(&rb);
            ol_rbuf_str(&rb, 80, &l);
            ol_rbuf_str(&rb, 1024, &l);
            ol_rbuf_u64(&rb);
        }
        ol_rbuf_u64(&rb);
        ol_rbuf_str(&rb, 80, &l);
        CHECK(ol_rbuf_u8(&rb) == 1);
        CHECK(!rb.bad);

        ARGS(d, 256);
        put_names(&d, "bkt", "obj");
        CHECK_RC(call(&c, OL_COP_DELETE, &d, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
        CHECK_RC(do_get(&c, "bkt", "obj", 0, 1, back, big, NULL), -OL_ENOKEY);
        CHECK_RC(call(&c, OL_COP_DELETE, &d, NULL, 0, r, sizeof(r), &rl, NULL, 0), 0);
    }

    /* Bad arguments: a clear error, never a crash. */
    {
        ARGS(a, 64);
        ol_wbuf_u32(&a, 1000000); /* a string length past the bytes */
        CHECK_RC(call(&c, OL_COP_GET, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EINVAL);
        CHECK_RC(call(&c, OL_COP_GET_BATCH, &a, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EINVAL);
        CHECK_RC(call(&c, OL_COP_LIST, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EINVAL);
        CHECK_RC(call(&c, 99, NULL, NULL, 0, r, sizeof(r), &rl, NULL, 0), -EACCES);
    }

    ol_net_destroy(c.net);
    ol_net_destroy(bad_secret.net);
    ol_net_destroy(bad_key.net);
    ol_native_server_destroy(srv);
    ol_obj_close(obj);
    ol_store_close(st);
    free(data);
    free(back);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return failures ? 1 : 0;
}
