/* S3 additional checksums: see checksum.h. */
#include "s3/checksum.h"

#include <errno.h>
#include <isa-l/crc.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/crc.h"
#include "core/log.h"

struct ck_row {
    const char *name;
    const char *header;
    size_t len;
};

static const struct ck_row ck_rows[OL_CK_COUNT] = {
    [OL_CK_NONE] = {"", "", 0},
    [OL_CK_CRC32] = {"CRC32", "x-amz-checksum-crc32", 4},
    [OL_CK_CRC32C] = {"CRC32C", "x-amz-checksum-crc32c", 4},
    [OL_CK_CRC64NVME] = {"CRC64NVME", "x-amz-checksum-crc64nvme", 8},
    [OL_CK_SHA1] = {"SHA1", "x-amz-checksum-sha1", 20},
    [OL_CK_SHA256] = {"SHA256", "x-amz-checksum-sha256", 32},
};

const char *ol_ck_name(enum ol_ck_algo a)
{
    return (unsigned)a < OL_CK_COUNT ? ck_rows[a].name : "";
}

const char *ol_ck_header(enum ol_ck_algo a)
{
    return (unsigned)a < OL_CK_COUNT ? ck_rows[a].header : "";
}

size_t ol_ck_len(enum ol_ck_algo a)
{
    return (unsigned)a < OL_CK_COUNT ? ck_rows[a].len : 0;
}

bool ol_ck_is_crc(enum ol_ck_algo a)
{
    return a == OL_CK_CRC32 || a == OL_CK_CRC32C || a == OL_CK_CRC64NVME;
}

enum ol_ck_algo ol_ck_parse(const char *p, size_t n)
{
    if (n > 15 && strncasecmp(p, "x-amz-checksum-", 15) == 0) {
        p += 15;
        n -= 15;
    }
    for (int a = OL_CK_CRC32; a < OL_CK_COUNT; a++)
        if (strlen(ck_rows[a].name) == n && strncasecmp(p, ck_rows[a].name, n) == 0)
            return (enum ol_ck_algo)a;
    return OL_CK_NONE;
}

/* ---- CRC64/NVME ----
 *
 * No library packaged in Debian 12 implements CRC64/NVME (ISA-L 2.30 has the
 * ECMA, ISO and Jones polynomials only; its "rocksoft" variant came later),
 * so it is written here: the classic reflected table method, one byte per
 * step.  Check value for "123456789": 0xae8b14860a799888 (tested in
 * tests/unit). */
/* The bit-reversal of the NVMe polynomial 0xad93d23594c93659.  (0x...c9ad,
 * which circulates in some notes, gives a different check value.) */
#define CRC64NVME_POLY 0x9a6c9329ac4bc9b5ULL

static uint64_t crc64_table[256];
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

static void crc64_table_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC64NVME_POLY : c >> 1;
        crc64_table[i] = c;
    }
}

uint64_t ol_crc64nvme(uint64_t crc, const void *buf, size_t len)
{
    pthread_once(&crc64_once, crc64_table_init);
    const uint8_t *p = buf;
    uint64_t c = ~crc;
    for (size_t i = 0; i < len; i++)
        c = crc64_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
}

uint32_t ol_crc32(uint32_t crc, const void *buf, size_t len)
{
    /* ISA-L's crc32_gzip_refl takes and returns the finished CRC, like
     * zlib's crc32(). */
    return crc32_gzip_refl(crc, (const unsigned char *)buf, len);
}

/* ---- combining CRCs ----
 *
 * For a reflected CRC with init and xorout all ones (all three S3 CRCs),
 * crc(A||B) = crc(A) * x^(8*len(B)) mod P  XOR  crc(B), with the product
 * taken in the reflected representation: the method of zlib's
 * crc32_combine, written here for any width up to 64 bits. */
struct crc_def {
    uint64_t poly; /* reflected */
    unsigned width;
};

static struct crc_def crc_def_of(enum ol_ck_algo a)
{
    switch (a) {
    case OL_CK_CRC32: return (struct crc_def){0xedb88320u, 32};
    case OL_CK_CRC32C: return (struct crc_def){0x82f63b78u, 32};
    default: return (struct crc_def){CRC64NVME_POLY, 64};
    }
}

/* a * b mod P, both polynomials in reflected form (bit width-1 is x^0). */
static uint64_t crc_mulmod(const struct crc_def *d, uint64_t a, uint64_t b)
{
    uint64_t m = 1ULL << (d->width - 1), p = 0;
    /* At most `width` rounds: one per bit of a. */
    for (unsigned i = 0; i < d->width; i++) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ d->poly : b >> 1;
    }
    return p;
}

/* x^(8*n) mod P. */
static uint64_t crc_x8n(const struct crc_def *d, uint64_t n)
{
    uint64_t p = 1ULL << (d->width - 1);   /* x^0 */
    uint64_t sq = 1ULL << (d->width - 2);  /* x^1, squared each round below */
    /* x^8 first: three squarings. */
    for (int i = 0; i < 3; i++)
        sq = crc_mulmod(d, sq, sq);
    /* One round per bit of n (at most 64). */
    while (n) {
        if (n & 1)
            p = crc_mulmod(d, sq, p);
        sq = crc_mulmod(d, sq, sq);
        n >>= 1;
    }
    return p;
}

uint64_t ol_ck_crc_combine(enum ol_ck_algo a, uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
    OL_ASSERT(ol_ck_is_crc(a));
    struct crc_def d = crc_def_of(a);
    if (len_b == 0)
        return crc_a;
    return crc_mulmod(&d, crc_x8n(&d, len_b), crc_a) ^ crc_b;
}

uint64_t ol_ck_crc_value(enum ol_ck_algo a, const uint8_t *digest)
{
    uint64_t v = 0;
    for (size_t i = 0; i < ol_ck_len(a) && i < 8; i++)
        v = v << 8 | digest[i];
    return v;
}

void ol_ck_crc_bytes(enum ol_ck_algo a, uint64_t v, uint8_t out[OL_CK_MAX_BYTES])
{
    size_t n = ol_ck_len(a);
    for (size_t i = 0; i < n && i < 8; i++)
        out[n - 1 - i] = (uint8_t)(v >> (8 * i));
}

/* ---- streaming ---- */

int ol_ck_init(struct ol_ck *c, enum ol_ck_algo algo)
{
    memset(c, 0, sizeof(*c));
    c->algo = algo;
    if (algo != OL_CK_SHA1 && algo != OL_CK_SHA256)
        return 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        return -ENOMEM;
    if (!EVP_DigestInit_ex(md, algo == OL_CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(md);
        return -ENOMEM;
    }
    c->md = md;
    return 0;
}

void ol_ck_update(struct ol_ck *c, const void *buf, size_t len)
{
    switch (c->algo) {
    case OL_CK_CRC32: c->crc = ol_crc32((uint32_t)c->crc, buf, len); break;
    case OL_CK_CRC32C: c->crc = ol_crc32c_extend((uint32_t)c->crc, buf, len); break;
    case OL_CK_CRC64NVME: c->crc = ol_crc64nvme(c->crc, buf, len); break;
    case OL_CK_SHA1:
    case OL_CK_SHA256: EVP_DigestUpdate(c->md, buf, len); break;
    default: break;
    }
}

void ol_ck_final(struct ol_ck *c, uint8_t out[OL_CK_MAX_BYTES])
{
    memset(out, 0, OL_CK_MAX_BYTES);
    if (ol_ck_is_crc(c->algo)) {
        ol_ck_crc_bytes(c->algo, c->crc, out);
    } else if (c->md) {
        unsigned n = 0;
        EVP_DigestFinal_ex(c->md, out, &n);
    }
}

void ol_ck_free(struct ol_ck *c)
{
    if (c->md)
        EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

int ol_ck_digest(enum ol_ck_algo a, const void *buf, size_t len, uint8_t out[OL_CK_MAX_BYTES])
{
    struct ol_ck c;
    int rc = ol_ck_init(&c, a);
    if (rc < 0)
        return rc;
    ol_ck_update(&c, buf, len);
    ol_ck_final(&c, out);
    ol_ck_free(&c);
    return 0;
}

/* ---- base64 ---- */

size_t ol_b64_encode(const uint8_t *in, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

int ol_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n == 0 || n % 4 != 0 || n > 4 * ((cap + 2) / 3))
        return -1;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '+' || ch == '/' ||
                  (ch == '=' && i >= n - 2);
        if (!ok)
            return -1;
    }
    size_t pad = (in[n - 1] == '=') + (in[n - 2] == '=');
    if (in[n - 2] == '=' && in[n - 1] != '=')
        return -1;
    uint8_t tmp[4 * ((OL_CK_B64_MAX * 2 + 2) / 3) + 4];
    if (n / 4 * 3 > sizeof(tmp))
        return -1;
    int got = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)n);
    if (got < 0 || (size_t)got < pad || (size_t)got - pad > cap)
        return -1;
    memcpy(out, tmp, (size_t)got - pad);
    return (int)((size_t)got - pad);
}

/* ---- part ETags ---- */

static const char z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          ".-:+=^!/*?&<>()[]{}@%$#";

void ol_ck_part_etag_encode(const char md5_hex[33], enum ol_ck_algo a, const uint8_t *digest,
                            char out[64])
{
    size_t dl = ol_ck_len(a);
    if (a == OL_CK_NONE || dl == 0) {
        snprintf(out, 64, "%s", md5_hex);
        return;
    }
    uint8_t raw[16 + OL_CK_MAX_BYTES];
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(md5_hex + 2 * i, "%2x", &v);
        raw[i] = (uint8_t)v;
    }
    memcpy(raw + 16, digest, dl);
    size_t n = 16 + dl, o = 0; /* a multiple of 4 for every algorithm */
    out[o++] = '~';
    out[o++] = (char)('0' + (int)a);
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t v = (uint32_t)raw[i] << 24 | (uint32_t)raw[i + 1] << 16 |
                     (uint32_t)raw[i + 2] << 8 | raw[i + 3];
        for (int k = 4; k >= 0; k--) {
            out[o + (size_t)k] = z85[v % 85];
            v /= 85;
        }
        o += 5;
    }
    out[o] = 0;
    OL_ASSERT(o < 64);
}

bool ol_ck_part_etag_decode(const char *stored, char md5_hex[33], enum ol_ck_algo *a,
                            uint8_t digest[OL_CK_MAX_BYTES])
{
    *a = OL_CK_NONE;
    size_t sl = strnlen(stored, 64);
    if (sl < 2 || stored[0] != '~') {
        snprintf(md5_hex, 33, "%.32s", stored);
        return true;
    }
    int an = stored[1] - '0';
    if (an <= OL_CK_NONE || an >= OL_CK_COUNT)
        return false;
    size_t dl = ol_ck_len((enum ol_ck_algo)an), n = 16 + dl;
    if (sl != 2 + n / 4 * 5)
        return false;
    uint8_t raw[16 + OL_CK_MAX_BYTES];
    for (size_t i = 0; i < n / 4; i++) {
        uint64_t v = 0;
        for (int k = 0; k < 5; k++) {
            const char *pos = strchr(z85, stored[2 + 5 * i + (size_t)k]);
            if (!pos || !*pos)
                return false;
            v = v * 85 + (uint64_t)(pos - z85);
        }
        if (v > 0xffffffffULL)
            return false;
        raw[4 * i] = (uint8_t)(v >> 24);
        raw[4 * i + 1] = (uint8_t)(v >> 16);
        raw[4 * i + 2] = (uint8_t)(v >> 8);
        raw[4 * i + 3] = (uint8_t)v;
    }
    for (int i = 0; i < 16; i++)
        snprintf(md5_hex + 2 * i, 3, "%02x", raw[i]);
    memcpy(digest, raw + 16, dl);
    *a = (enum ol_ck_algo)an;
    return true;
}
