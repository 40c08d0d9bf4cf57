/* Unit tests of s3/checksum.h: the published check values of each CRC, the
 * combine arithmetic against a direct computation, and base64.
 * Exits 0 on success, 1 on failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/checksum.h"

#include "check.h"



static void test_check_values(void)
{
    const char *s = "123456789";
    CHECK(ol_crc32(0, s, 9) == 0xcbf43926u);
    CHECK(ol_crc64nvme(0, s, 9) == 0xae8b14860a799888ULL);
    /* Continuing a CRC equals computing it in one go. */
    CHECK(ol_crc64nvme(ol_crc64nvme(0, s, 4), s + 4, 5) == 0xae8b14860a799888ULL);
    CHECK(ol_crc32(ol_crc32(0, s, 3), s + 3, 6) == 0xcbf43926u);
    uint8_t d[OL_CK_MAX_BYTES];
    CHECK(ol_ck_digest(OL_CK_CRC32C, s, 9, d) == 0);
    CHECK(ol_ck_crc_value(OL_CK_CRC32C, d) == 0xe3069283u);
    CHECK(ol_ck_digest(OL_CK_CRC64NVME, s, 9, d) == 0);
    CHECK(d[0] == 0xae && d[7] == 0x88);
    /* S3's documented CRC32 of "" is AAAAAA== and SHA-256 of "abc" starts ba7816bf. */
    char b64[OL_CK_B64_MAX];
    CHECK(ol_ck_digest(OL_CK_CRC32, "", 0, d) == 0);
    ol_b64_encode(d, 4, b64);
    CHECK(strcmp(b64, "AAAAAA==") == 0);
    CHECK(ol_ck_digest(OL_CK_SHA256, "abc", 3, d) == 0);
    CHECK(d[0] == 0xba && d[1] == 0x78 && d[2] == 0x16 && d[3] == 0xbf);
    CHECK(ol_ck_digest(OL_CK_SHA1, "abc", 3, d) == 0);
    CHECK(d[0] == 0xa9 && d[1] == 0x99);
}

static void test_combine(void)
{
    enum ol_ck_algo algos[] = {OL_CK_CRC32, OL_CK_CRC32C, OL_CK_CRC64NVME};
    uint8_t buf[5000];
    uint32_t seed = 12345;
    for (size_t i = 0; i < sizeof(buf); i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (uint8_t)(seed >> 16);
    }
    size_t cuts[] = {0, 1, 7, 64, 1000, 4999, 5000};
    for (size_t a = 0; a < 3; a++) {
        uint8_t d[OL_CK_MAX_BYTES];
        ol_ck_digest(algos[a], buf, sizeof(buf), d);
        uint64_t whole = ol_ck_crc_value(algos[a], d);
        for (size_t c = 0; c < sizeof(cuts) / sizeof(*cuts); c++) {
            size_t k = cuts[c];
            ol_ck_digest(algos[a], buf, k, d);
            uint64_t x = ol_ck_crc_value(algos[a], d);
            ol_ck_digest(algos[a], buf + k, sizeof(buf) - k, d);
            uint64_t y = ol_ck_crc_value(algos[a], d);
            CHECK(ol_ck_crc_combine(algos[a], x, y, sizeof(buf) - k) == whole);
        }
    }
}

static void test_b64_and_names(void)
{
    uint8_t out[32];
    CHECK(ol_b64_decode("AAAAAA==", 8, out, 4) == 4);
    CHECK(ol_b64_decode("AAAAAA==", 8, out, 3) == -1);
    CHECK(ol_b64_decode("AAAAAA=", 7, out, 4) == -1);
    CHECK(ol_b64_decode("AA*AAA==", 8, out, 4) == -1);
    CHECK(ol_b64_decode("", 0, out, 4) == -1);
    CHECK(ol_b64_decode("3q2+7w==", 8, out, 4) == 4 && out[0] == 0xde && out[3] == 0xef);
    CHECK(ol_ck_parse("crc64nvme", 9) == OL_CK_CRC64NVME);
    CHECK(ol_ck_parse("x-amz-checksum-sha256", 21) == OL_CK_SHA256);
    CHECK(ol_ck_parse("CRC32C", 6) == OL_CK_CRC32C);
    CHECK(ol_ck_parse("md5", 3) == OL_CK_NONE);
    CHECK(ol_ck_len(OL_CK_SHA1) == 20);
}

static void test_part_etag(void)
{
    const char *md5 = "0123456789abcdef0123456789abcdef";
    for (int a = OL_CK_NONE; a < OL_CK_COUNT; a++) {
        uint8_t d[OL_CK_MAX_BYTES], back[OL_CK_MAX_BYTES];
        for (int i = 0; i < OL_CK_MAX_BYTES; i++)
            d[i] = (uint8_t)(0xff - i * 7);
        char st[64], m[33];
        enum ol_ck_algo got;
        ol_ck_part_etag_encode(md5, (enum ol_ck_algo)a, d, st);
        CHECK(strlen(st) < 64 && !strchr(st, '"'));
        CHECK(ol_ck_part_etag_decode(st, m, &got, back));
        CHECK(strcmp(m, md5) == 0);
        CHECK(got == (enum ol_ck_algo)a);
        CHECK(a == OL_CK_NONE || memcmp(d, back, ol_ck_len((enum ol_ck_algo)a)) == 0);
    }
}

int main(void)
{
    test_part_etag();
    test_check_values();
    test_combine();
    test_b64_and_names();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
