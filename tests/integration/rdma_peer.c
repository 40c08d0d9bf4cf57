/* A client's side of S3 over RDMA, for tests and bench (test_s3_rdma.py,
 * bench/s3_rdma.py): a UCX worker with registered memory that keeps
 * progressing while another process (Python, which signs and sends the
 * HTTP requests) drives it with one-line commands on stdin:
 *
 *   alloc N            map N bytes (zeroed), register them (ucp_mem_map) and
 *                      pack their rkey, draw the tag of their tokens;
 *                      answers "mem ADDR WORKER_HEX RKEY_HEX TAG_HEX"
 *                      (ADDR in hex)
 *   confirm MODE       how the worker answers the server's confirmations
 *                      (native/rdma_confirm.h): "yes" (default: yes for
 *                      tokens of its memory, no for others), "silent" (no
 *                      answer at all, as a client that does not know the
 *                      protocol);                               answers "ok"
 *   set BYTE           fills the memory with BYTE (decimal);   answers "ok"
 *   load PATH OFF      copies the file PATH's bytes to OFF;    answers "ok"
 *   save PATH OFF LEN  writes LEN bytes at OFF to PATH;        answers "ok"
 *   quit
 *
 * Arguments: ACCESS_KEY SECRET_KEY, the user whose native key MACs the
 * confirmations (without them, the all-zero key: no server accepts them).
 *
 * Errors answer "err WHY".  One thread: between commands, and while the
 * server moves bytes, it progresses the worker (transports such as tcp
 * need the target's worker to apply a put or serve a get).  Exits when
 * stdin closes.  Works with the environment's UCX_TLS like any UCX program.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <ucp/api/ucp.h>

#include "native/proto.h"
#include "native/rdma_confirm.h"

static ucp_context_h ctx;
static ucp_worker_h worker;
static uint8_t *mem;
static size_t mem_len;
static ucp_mem_h memh;
static uint8_t *mem_rkey;
static size_t mem_rkey_len;
static uint8_t key[OL_NET_KEY_BYTES];
static uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES];
static int silent;

static void answer_sent(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    ucp_request_free(request);
}

/* A server's confirmation: yes for a range of our memory under our rkey. */
static ucs_status_t on_challenge(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_length;
    struct ol_rdma_challenge c;
    if (silent || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        ol_rdma_challenge_decode(data, length, &c) < 0)
        return UCS_OK;
    struct ol_rdma_answer a = {.yes = false};
    memcpy(a.nonce, c.nonce, sizeof(a.nonce));
    uint64_t b = (uint64_t)(uintptr_t)mem;
    if (mem && c.rkey_len == mem_rkey_len && memcmp(c.rkey, mem_rkey, c.rkey_len) == 0 &&
        memcmp(c.tag, tag, sizeof(tag)) == 0 && c.addr >= b && c.addr - b <= mem_len &&
        c.len <= mem_len - (c.addr - b)) {
        a.yes = true;
        a.base = b;
        a.size = mem_len;
    }
    uint8_t *out = malloc(OL_RDMA_ANSWER_BYTES);
    if (!out)
        return UCS_OK;
    ol_rdma_answer_encode(key, data, length, &a, out);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = answer_sent,
        .user_data = out,
    };
    void *r =
        ucp_am_send_nbx(param->reply_ep, OL_RDMA_AM_ANSWER, NULL, 0, out, OL_RDMA_ANSWER_BYTES, &p);
    if (!UCS_PTR_IS_PTR(r))
        free(out);
    return UCS_OK;
}

static void hex_out(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static void cmd_alloc(size_t n)
{
    if (mem) {
        printf("err already allocated\n");
        return;
    }
    mem_len = n ? n : 1;
    mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        mem = NULL;
        printf("err mmap\n");
        return;
    }
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = mem,
        .length = mem_len,
    };
    ucs_status_t s = ucp_mem_map(ctx, &mp, &memh);
    if (s != UCS_OK) {
        printf("err ucp_mem_map %s\n", ucs_status_string(s));
        return;
    }
    void *rkey;
    size_t rkey_len;
    s = ucp_rkey_pack(ctx, memh, &rkey, &rkey_len);
    if (s != UCS_OK) {
        printf("err ucp_rkey_pack %s\n", ucs_status_string(s));
        return;
    }
    ucp_address_t *addr;
    size_t addr_len;
    s = ucp_worker_get_address(worker, &addr, &addr_len);
    if (s != UCS_OK) {
        printf("err ucp_worker_get_address %s\n", ucs_status_string(s));
        return;
    }
    if (RAND_bytes(tag, sizeof(tag)) != 1) {
        printf("err RAND_bytes\n");
        return;
    }
    printf("mem %" PRIxPTR " ", (uintptr_t)mem);
    hex_out(addr, addr_len);
    printf(" ");
    hex_out(rkey, rkey_len);
    printf(" ");
    hex_out(tag, sizeof(tag));
    printf("\n");
    mem_rkey = malloc(rkey_len);
    if (mem_rkey) {
        memcpy(mem_rkey, rkey, rkey_len);
        mem_rkey_len = rkey_len;
    }
    ucp_worker_release_address(worker, addr);
    ucp_rkey_buffer_release(rkey);
}

static void cmd_load(const char *path, size_t off)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("err open %s\n", path);
        return;
    }
    size_t n = off <= mem_len ? fread(mem + off, 1, mem_len - off, f) : 0;
    fclose(f);
    printf("ok %zu\n", n);
}

static void cmd_save(const char *path, size_t off, size_t len)
{
    if (off > mem_len || len > mem_len - off) {
        printf("err range\n");
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("err open %s\n", path);
        return;
    }
    size_t n = fwrite(mem + off, 1, len, f);
    fclose(f);
    printf(n == len ? "ok\n" : "err write\n");
}

static void handle(char *line)
{
    char path[4096];
    unsigned long long a, b;
    int v;
    if (sscanf(line, "alloc %llu", &a) == 1)
        cmd_alloc((size_t)a);
    else if (strncmp(line, "confirm ", 8) == 0) {
        silent = strcmp(line + 8, "silent") == 0;
        printf("ok\n");
    } else if (!mem && strncmp(line, "quit", 4) != 0)
        printf("err no memory\n");
    else if (sscanf(line, "set %d", &v) == 1) {
        memset(mem, v, mem_len);
        printf("ok\n");
    } else if (sscanf(line, "load %4095s %llu", path, &a) == 2)
        cmd_load(path, (size_t)a);
    else if (sscanf(line, "save %4095s %llu %llu", path, &a, &b) == 3)
        cmd_save(path, (size_t)a, (size_t)b);
    else
        printf("err unknown command\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc == 3)
        ol_native_key(argv[1], argv[2], key);
    ucp_config_t *cfg;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return 1;
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
    };
    ucs_status_t s = ucp_init(&up, cfg, &ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK) {
        fprintf(stderr, "rdma_peer: ucp_init: %s\n", ucs_status_string(s));
        return 1;
    }
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK)
        return 1;
    int efd;
    if (ucp_worker_get_efd(worker, &efd) != UCS_OK)
        return 1;
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = OL_RDMA_AM_CHALLENGE,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = on_challenge,
    };
    if (ucp_worker_set_am_recv_handler(worker, &hp) != UCS_OK)
        return 1;
    printf("ready\n");
    fflush(stdout);

    char line[8192];
    size_t ll = 0;
    for (;;) {
        while (ucp_worker_progress(worker))
            ;
        if (ucp_worker_arm(worker) == UCS_ERR_BUSY)
            continue;
        struct pollfd pf[2] = {{.fd = 0, .events = POLLIN}, {.fd = efd, .events = POLLIN}};
        if (poll(pf, 2, 100) < 0 && errno != EINTR)
            break;
        if (!(pf[0].revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t n = read(0, line + ll, sizeof(line) - 1 - ll);
        if (n <= 0)
            break;
        ll += (size_t)n;
        char *nl;
        while ((nl = memchr(line, '\n', ll))) {
            *nl = 0;
            if (strncmp(line, "quit", 4) == 0)
                goto out;
            handle(line);
            size_t used = (size_t)(nl - line) + 1;
            memmove(line, nl + 1, ll - used);
            ll -= used;
        }
        if (ll == sizeof(line) - 1)
            ll = 0; /* an overlong line: dropped */
    }
out:
    if (memh)
        ucp_mem_unmap(ctx, memh);
    free(mem_rkey);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    return 0;
}
