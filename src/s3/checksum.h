/* S3 additional checksums (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1,
 * -sha256): streaming computation, header encoding (base64 of the big-endian
 * digest) and the arithmetic that multipart uploads need (composite
 * checksums, and full-object CRCs combined from the parts' CRCs).
 *
 * Pure computation: no I/O.  The S3 handlers (object.c, multipart.c) decide
 * which algorithm a request names and where the result is kept.
 */
#ifndef OL_S3_CHECKSUM_H
#define OL_S3_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ol_ck_algo {
    OL_CK_NONE = 0,
    OL_CK_CRC32,
    OL_CK_CRC32C,
    OL_CK_CRC64NVME,
    OL_CK_SHA1,
    OL_CK_SHA256,
    OL_CK_COUNT,
};

#define OL_CK_MAX_BYTES 32 /* the longest digest (SHA-256) */
#define OL_CK_B64_MAX 64   /* base64 of the longest digest, "-NNNNN" and NUL */

/* "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256" (S3's spelling). */
const char *ol_ck_name(enum ol_ck_algo a);
/* "x-amz-checksum-crc32" etc. */
const char *ol_ck_header(enum ol_ck_algo a);
/* Digest length in bytes (0 for OL_CK_NONE). */
size_t ol_ck_len(enum ol_ck_algo a);
/* Parses an algorithm name, case-insensitively ("crc32", "CRC64NVME"); also
 * accepts the header form "x-amz-checksum-crc32".  OL_CK_NONE if unknown. */
enum ol_ck_algo ol_ck_parse(const char *p, size_t n);
/* True for the CRC algorithms, whose values can be combined. */
bool ol_ck_is_crc(enum ol_ck_algo a);

/* A running checksum. */
struct ol_ck {
    enum ol_ck_algo algo;
    uint64_t crc;  /* CRC register (final form: the value of the bytes so far) */
    void *md;      /* EVP_MD_CTX for SHA1/SHA256 */
};
/* 0 or -ENOMEM.  OL_CK_NONE gives a checksum that ignores its input. */
int ol_ck_init(struct ol_ck *c, enum ol_ck_algo algo);
void ol_ck_update(struct ol_ck *c, const void *buf, size_t len);
/* Writes the digest (ol_ck_len bytes, big-endian for CRCs, as S3 sends it). */
void ol_ck_final(struct ol_ck *c, uint8_t out[OL_CK_MAX_BYTES]);
void ol_ck_free(struct ol_ck *c);

/* One-shot digest. */
int ol_ck_digest(enum ol_ck_algo a, const void *buf, size_t len, uint8_t out[OL_CK_MAX_BYTES]);

/* CRC64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5, init and xorout all
 * ones): continues `crc` (0 to start) over buf. */
uint64_t ol_crc64nvme(uint64_t crc, const void *buf, size_t len);
/* Standard CRC-32 (IEEE, as zlib's crc32): continues `crc` over buf. */
uint32_t ol_crc32(uint32_t crc, const void *buf, size_t len);

/* CRC of A||B from crc(A), crc(B) and len(B), for a CRC algorithm (the value
 * as a number: CRC32/CRC32C in the low 32 bits). */
uint64_t ol_ck_crc_combine(enum ol_ck_algo a, uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

/* A digest as a number (CRCs only) and back to bytes. */
uint64_t ol_ck_crc_value(enum ol_ck_algo a, const uint8_t *digest);
void ol_ck_crc_bytes(enum ol_ck_algo a, uint64_t v, uint8_t out[OL_CK_MAX_BYTES]);

/* Standard base64 with padding; out must hold 4*ceil(n/3)+1.  Returns length. */
size_t ol_b64_encode(const uint8_t *in, size_t n, char *out);
/* Decodes standard base64 (padding required).  Returns the byte count, or -1
 * for malformed input or more than cap bytes. */
int ol_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);

/* A part's stored ETag.  The store keeps one string (< 64 bytes) per part;
 * a part uploaded with an additional checksum keeps that checksum in it too:
 * "~" + algorithm digit + Z85(MD5 || checksum) (at most 62 characters, for
 * SHA-256), so that CompleteMultipartUpload can build the object's checksum
 * without a second copy of the parts' metadata.  Plain parts keep the MD5
 * hex.  Clients only ever see the MD5 hex. */
void ol_ck_part_etag_encode(const char md5_hex[33], enum ol_ck_algo a, const uint8_t *digest,
                            char out[64]);
/* Splits a stored part ETag: md5_hex always (33 bytes with NUL); *a and digest
 * when it carries a checksum (else *a = OL_CK_NONE).  false if malformed. */
bool ol_ck_part_etag_decode(const char *stored, char md5_hex[33], enum ol_ck_algo *a,
                            uint8_t digest[OL_CK_MAX_BYTES]);

#endif
