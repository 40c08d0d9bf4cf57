/* The x-amz-rdma-token encoding (native/rdma_token.h). */
#include "native/rdma_token.h"

#include <errno.h>
#include <string.h>

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t ol_rdma_token_text_len(size_t worker_len, size_t rkey_len)
{
    size_t bin = OL_RDMA_TOKEN_FIXED + worker_len + rkey_len;
    return 2 + (bin / 3) * 4 + (bin % 3 ? bin % 3 + 1 : 0);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int check_fields(size_t worker_len, size_t rkey_len, uint64_t addr, uint64_t len,
                        const char **why)
{
    if (worker_len == 0 || worker_len > OL_RDMA_TOKEN_MAX_WORKER) {
        *why = "worker address size out of bounds";
        return -EINVAL;
    }
    if (rkey_len == 0 || rkey_len > OL_RDMA_TOKEN_MAX_RKEY) {
        *why = "rkey size out of bounds";
        return -EINVAL;
    }
    if (len > OL_RDMA_TOKEN_MAX_LEN) {
        *why = "length larger than 5 GiB";
        return -EINVAL;
    }
    if (addr + len < addr) {
        *why = "address range wraps";
        return -EINVAL;
    }
    return 0;
}

int ol_rdma_token_encode(const struct ol_rdma_token *t, char *out, size_t cap)
{
    const char *why = NULL;
    int rc = check_fields(t->worker_len, t->rkey_len, t->addr, t->len, &why);
    if (rc)
        return rc;
    size_t tl = ol_rdma_token_text_len(t->worker_len, t->rkey_len);
    if (cap < tl + 1)
        return -ENOSPC;

    uint8_t bin[OL_RDMA_TOKEN_MAX_BIN];
    put_le(bin, t->worker_len, 2);
    put_le(bin + 2, t->rkey_len, 2);
    put_le(bin + 4, 0, 4);
    put_le(bin + 8, t->addr, 8);
    put_le(bin + 16, t->len, 8);
    memcpy(bin + 24, t->tag, OL_RDMA_TOKEN_TAG_BYTES);
    memcpy(bin + OL_RDMA_TOKEN_FIXED, t->worker, t->worker_len);
    memcpy(bin + OL_RDMA_TOKEN_FIXED + t->worker_len, t->rkey, t->rkey_len);
    size_t n = OL_RDMA_TOKEN_FIXED + t->worker_len + t->rkey_len;

    char *o = out;
    *o++ = '0' + OL_RDMA_TOKEN_VERSION;
    *o++ = '.';
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)bin[i] << 16 | (uint32_t)bin[i + 1] << 8 | bin[i + 2];
        *o++ = B64URL[v >> 18];
        *o++ = B64URL[(v >> 12) & 63];
        *o++ = B64URL[(v >> 6) & 63];
        *o++ = B64URL[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)bin[i] << 16;
        *o++ = B64URL[v >> 18];
        *o++ = B64URL[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)bin[i] << 16 | (uint32_t)bin[i + 1] << 8;
        *o++ = B64URL[v >> 18];
        *o++ = B64URL[(v >> 12) & 63];
        *o++ = B64URL[(v >> 6) & 63];
    }
    *o = '\0';
    return (int)(o - out);
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

int ol_rdma_token_decode(const char *s, size_t n, uint8_t *buf, size_t cap,
                         struct ol_rdma_token *t, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    if (n < 2 || s[1] != '.' || s[0] < '0' || s[0] > '9') {
        *why = "not a versioned token (\"2.\" + base64url)";
        return -EINVAL;
    }
    if (s[0] != '0' + OL_RDMA_TOKEN_VERSION) {
        *why = "unsupported token version";
        return -EINVAL;
    }
    const char *p = s + 2;
    size_t m = n - 2;
    if (m > ol_rdma_token_text_len(OL_RDMA_TOKEN_MAX_WORKER, OL_RDMA_TOKEN_MAX_RKEY) - 2) {
        *why = "token too long";
        return -EINVAL;
    }
    if (m % 4 == 1) {
        *why = "bad base64url length";
        return -EINVAL;
    }
    size_t bin_len = m / 4 * 3 + (m % 4 ? m % 4 - 1 : 0);
    if (bin_len < OL_RDMA_TOKEN_FIXED) {
        *why = "token too short";
        return -EINVAL;
    }
    if (bin_len > cap) {
        *why = "token too long";
        return -EINVAL;
    }
    size_t o = 0, i = 0;
    for (; i + 4 <= m; i += 4) {
        int a = b64val((unsigned char)p[i]), b = b64val((unsigned char)p[i + 1]);
        int c = b64val((unsigned char)p[i + 2]), d = b64val((unsigned char)p[i + 3]);
        if ((a | b | c | d) < 0)
            goto bad_char;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        buf[o++] = (uint8_t)(v >> 16);
        buf[o++] = (uint8_t)(v >> 8);
        buf[o++] = (uint8_t)v;
    }
    if (m - i >= 2) {
        int a = b64val((unsigned char)p[i]), b = b64val((unsigned char)p[i + 1]);
        int c = m - i == 3 ? b64val((unsigned char)p[i + 2]) : 0;
        if ((a | b | c) < 0)
            goto bad_char;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
        /* The bits past the last byte must be zero: one text per token. */
        if ((m - i == 2 && (v & 0xffff)) || (m - i == 3 && (v & 0xff))) {
            *why = "non-canonical base64url";
            return -EINVAL;
        }
        buf[o++] = (uint8_t)(v >> 16);
        if (m - i == 3)
            buf[o++] = (uint8_t)(v >> 8);
    }
    if (o != bin_len) {
        *why = "bad base64url length";
        return -EINVAL;
    }

    size_t wl = (size_t)get_le(buf, 2), kl = (size_t)get_le(buf + 2, 2);
    uint64_t addr = get_le(buf + 8, 8), len = get_le(buf + 16, 8);
    if (get_le(buf + 4, 4) != 0) {
        *why = "reserved field not zero";
        return -EINVAL;
    }
    int rc = check_fields(wl, kl, addr, len, why);
    if (rc)
        return rc;
    if (OL_RDMA_TOKEN_FIXED + wl + kl != bin_len) {
        *why = "record sizes do not match the token's length";
        return -EINVAL;
    }
    t->worker = buf + OL_RDMA_TOKEN_FIXED;
    t->worker_len = wl;
    t->rkey = buf + OL_RDMA_TOKEN_FIXED + wl;
    t->rkey_len = kl;
    t->addr = addr;
    t->len = len;
    memcpy(t->tag, buf + 24, OL_RDMA_TOKEN_TAG_BYTES);
    return 0;

bad_char:
    *why = "bad base64url character";
    return -EINVAL;
}
