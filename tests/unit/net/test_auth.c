/* Authentication of the drive protocol (net/auth.h): a peer without the
 * cluster key, or with a stale stamp, is refused before anything is served.
 *
 *   mac      ol_wire_sign / ol_wire_verify: a flipped bit anywhere in the
 *            header or the control bytes fails; the data is covered
 *            through data_crc;
 *   fresh    the window around the receiver's clock;
 *   same     a client with the server's key: ping, shard write and read;
 *   wrong    a client with another key: every op -EACCES, the server counts
 *            it, and the drive behind it saw no call (its bucket and shard
 *            writes did not happen);
 *   stale    a client whose clock is 20 minutes behind (past the window):
 *            -EACCES;
 *   reply    a server with another key: the client refuses its replies
 *            (-EACCES) and counts them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/hlc.h"
#include "ec/memdrive.h"
#include "ec/remotedrive.h"
#include "net/auth.h"
#include "net/drive_server.h"
#include "net/net.h"

#include "check.h"
#include "net/fixture.h"

static const uint8_t KEY_A[OL_NET_KEY_BYTES] = "0123456789abcdef0123456789abcde";
static const uint8_t KEY_B[OL_NET_KEY_BYTES] = "0123456789abcdef0123456789abcdX";

static void node_start(struct node *n, const uint8_t *key, int64_t offset_ms)
{
    node_start_key(n, 2, offset_ms, key);
}

static void server_start(struct server *s, const uint8_t *key)
{
    server_start_key(s, 1, 0, key);
}

static void test_mac(void)
{
    struct ol_wire_hdr h = {.magic = OL_WIRE_MAGIC,
                            .version = OL_WIRE_VERSION,
                            .op = 3,
                            .drive = 2,
                            .req_id = 99,
                            .hlc = 12345u << 16,
                            .data_len = 10,
                            .ctl_len = 5,
                            .data_crc = 0xabcd};
    const char ctl[] = "hello";
    ol_wire_sign(KEY_A, &h, ctl, 5);
    CHECK(ol_wire_verify(KEY_A, &h, ctl, 5));
    CHECK(!ol_wire_verify(KEY_B, &h, ctl, 5));
    CHECK(!ol_wire_verify(KEY_A, &h, "hellp", 5));
    for (size_t bit = 0; bit < 8 * offsetof(struct ol_wire_hdr, mac); bit++) {
        struct ol_wire_hdr x = h;
        ((uint8_t *)&x)[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK(!ol_wire_verify(KEY_A, &x, ctl, 5));
    }
    struct ol_wire_hdr x = h;
    x.mac[15] ^= 1;
    CHECK(!ol_wire_verify(KEY_A, &x, ctl, 5));
    printf("mac: ok\n");
}

static void test_fresh(void)
{
    uint64_t now = 1000000000u;
    CHECK(ol_wire_fresh(now << 16, now));
    CHECK(ol_wire_fresh((now - OL_NET_AUTH_WINDOW_MS) << 16, now));
    CHECK(ol_wire_fresh((now + OL_NET_AUTH_WINDOW_MS) << 16 | 0xffff, now));
    CHECK(!ol_wire_fresh((now - OL_NET_AUTH_WINDOW_MS - 1) << 16, now));
    CHECK(!ol_wire_fresh((now + OL_NET_AUTH_WINDOW_MS + 1) << 16, now));
    CHECK(!ol_wire_fresh(0, now));
    printf("fresh: ok\n");
}

static uint64_t auth_failures(struct ol_net *net)
{
    struct ol_net_stats st;
    ol_net_stats(net, &st);
    return st.auth_failures;
}

/* A bucket and a one-shard write through rd: 0 or the first error. */
static int write_some(struct ol_remotedrive *rd)
{
    struct ol_drive d = ol_remotedrive_drive(rd);
    int rc = d.ops->bucket_create(d.d, "b", 1);
    if (rc < 0)
        return rc;
    void *w = NULL;
    rc = d.ops->shard_begin(d.d, "b", "k", 1, &w);
    if (rc < 0)
        return rc;
    rc = d.ops->shard_write(w, "data", 4);
    if (rc < 0) {
        d.ops->shard_abort(w);
        return rc;
    }
    struct ol_shard_meta sm = {.k = 1, .unit_bytes = 4096, .size = 4};
    sm.vid.b[0] = 1;
    snprintf(sm.etag, sizeof(sm.etag), "e");
    return d.ops->shard_commit(w, &sm, NULL, 0);
}

static void test_same_and_wrong(void)
{
    struct server s;
    server_start(&s, KEY_A);
    struct node good, bad;
    node_start(&good, KEY_A, 0);
    node_start(&bad, KEY_B, 0);
    struct ol_remotedrive *rg = rdrive(&good, s.addr, 0);
    struct ol_remotedrive *rb = rdrive(&bad, s.addr, 0);

    CHECK_RC(ol_remotedrive_ping(rg), 0);
    CHECK_RC(ol_remotedrive_ping(rb), -EACCES);
    CHECK(auth_failures(s.node.net) >= 1);
    /* Nothing the stranger sends is applied. */
    struct ol_drive md = ol_memdrive_drive(s.md[0]);
    CHECK(write_some(rb) == -EACCES);
    int64_t ctime = 0;
    CHECK(md.ops->bucket_get(md.d, "b", &ctime) < 0);
    /* The key holder's are. */
    CHECK_RC(write_some(rg), 0);
    CHECK_RC(md.ops->bucket_get(md.d, "b", &ctime), 0);
    CHECK(auth_failures(good.net) == 0);
    printf("same, wrong: ok (server refused %llu)\n",
           (unsigned long long)auth_failures(s.node.net));
    ol_remotedrive_destroy(rg);
    ol_remotedrive_destroy(rb);
    ol_net_destroy(good.net);
    ol_net_destroy(bad.net);
    server_stop(&s);
}

static void test_stale(void)
{
    struct server s;
    server_start(&s, KEY_A);
    struct node old;
    node_start(&old, KEY_A, -20 * 60 * 1000);
    struct ol_remotedrive *rd = rdrive(&old, s.addr, 0);
    CHECK_RC(ol_remotedrive_ping(rd), -EACCES);
    CHECK(auth_failures(s.node.net) == 1);
    printf("stale: ok\n");
    ol_remotedrive_destroy(rd);
    ol_net_destroy(old.net);
    server_stop(&s);
}

static void test_reply(void)
{
    struct server s;
    server_start(&s, KEY_B);
    struct node c;
    node_start(&c, KEY_A, 0);
    struct ol_remotedrive *rd = rdrive(&c, s.addr, 0);
    /* The server refuses the request (its key differs) and says so in a
     * reply signed with its own key: the client refuses that reply. */
    CHECK_RC(ol_remotedrive_ping(rd), -EACCES);
    CHECK(auth_failures(c.net) == 1);
    CHECK(auth_failures(s.node.net) == 1);
    printf("reply: ok\n");
    ol_remotedrive_destroy(rd);
    ol_net_destroy(c.net);
    server_stop(&s);
}

int main(void)
{
    test_mac();
    test_fresh();
    test_same_and_wrong();
    test_stale();
    test_reply();
    return failures ? 1 : 0;
}
