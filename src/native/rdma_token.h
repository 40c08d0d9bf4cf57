/* The x-amz-rdma-token header of S3 over RDMA (docs/PROTOCOL.md "S3 over
 * RDMA"): a client's memory descriptor, encoded so that it travels in an
 * HTTP header and under a SigV4 signature.
 *
 * A descriptor names the client's UCX worker (the bytes ucp_worker_get_address
 * gave it), a remote key for its memory (the bytes ucp_rkey_pack gave it),
 * the region [addr, addr+len) of that memory the server may write (GET)
 * or read (PUT), and a tag: 16 random bytes the client chose for that
 * memory, which its worker asks for before it confirms the token to the
 * server (native/rdma_confirm.h), so that only whoever was given a token
 * can name the memory (the rkey alone is no secret where the transport
 * does not check it).  The server reaches the worker, has it confirm the
 * token, unpacks the key and moves the body with one-sided operations.
 *
 * Text form:  "2." base64url(record), no padding, where the record is
 *
 *     u16 worker_len, u16 rkey_len, u32 reserved (0),
 *     u64 addr, u64 len,               (all little-endian)
 *     16 bytes tag,
 *     worker_len bytes, rkey_len bytes
 *
 * and nothing after.  "2" is the version: a decoder refuses any other, so
 * the form can change under a new number (version 1 had no tag).  Both the worker address and the
 * rkey must be non-empty and within OL_RDMA_TOKEN_MAX_WORKER /
 * OL_RDMA_TOKEN_MAX_RKEY; len at most OL_RDMA_TOKEN_MAX_LEN, and addr+len
 * must not wrap.  The text is therefore at most OL_RDMA_TOKEN_MAX_TEXT
 * characters, well inside a request head.
 *
 * Both functions are pure (no allocation, no global state, any thread).
 * The decoder reads exactly the n bytes it is given, never past them, and
 * refuses anything that is not the exact encoding of a valid record (bad
 * characters, padding, non-zero trailing bits, wrong sizes, trailing bytes,
 * a non-zero reserved field), so that a token has one text form.
 */
#ifndef OL_NATIVE_RDMA_TOKEN_H
#define OL_NATIVE_RDMA_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#define OL_RDMA_TOKEN_HEADER "x-amz-rdma-token"
#define OL_RDMA_REPLY_HEADER "x-amz-rdma-reply"
#define OL_RDMA_BYTES_HEADER "x-amz-rdma-bytes-transferred"

enum {
    OL_RDMA_TOKEN_VERSION = 2,
    OL_RDMA_TOKEN_TAG_BYTES = 16,
    OL_RDMA_TOKEN_MAX_WORKER = 4096, /* ucp worker address bytes */
    OL_RDMA_TOKEN_MAX_RKEY = 1024,   /* packed rkey bytes */
    OL_RDMA_TOKEN_FIXED = 40,        /* the record's fixed part */
    OL_RDMA_TOKEN_MAX_BIN = OL_RDMA_TOKEN_FIXED + OL_RDMA_TOKEN_MAX_WORKER + OL_RDMA_TOKEN_MAX_RKEY,
    /* "1." + base64url of the largest record, and a NUL. */
    OL_RDMA_TOKEN_MAX_TEXT = 2 + (OL_RDMA_TOKEN_MAX_BIN * 4 + 2) / 3 + 1,
};

/* 5 GiB: the largest single S3 PUT, and so the largest single transfer. */
#define OL_RDMA_TOKEN_MAX_LEN (UINT64_C(5) << 30)

struct ol_rdma_token {
    const uint8_t *worker; /* borrowed (encode) / points into buf (decode) */
    size_t worker_len;
    const uint8_t *rkey;
    size_t rkey_len;
    uint64_t addr;                        /* the client's virtual address */
    uint64_t len;                         /* bytes the server may move, from addr */
    uint8_t tag[OL_RDMA_TOKEN_TAG_BYTES]; /* the client's secret for this memory */
};

/* The text length (without the NUL) of a token with these sizes. */
size_t ol_rdma_token_text_len(size_t worker_len, size_t rkey_len);

/* Writes t's text form, NUL-terminated, into out.  Returns its length, or
 * -EINVAL (sizes out of bounds, len too large, addr+len wraps), -ENOSPC
 * (cap < ol_rdma_token_text_len(...) + 1). */
int ol_rdma_token_encode(const struct ol_rdma_token *t, char *out, size_t cap);

/* Decodes s[0..n) (not NUL-terminated necessarily) into *t, whose worker and
 * rkey point into buf (cap >= OL_RDMA_TOKEN_MAX_BIN is always enough; buf
 * must outlive *t).  Returns 0, or -EINVAL with *why (a static string, may
 * be NULL) saying what is wrong: for a 400's message. */
int ol_rdma_token_decode(const char *s, size_t n, uint8_t *buf, size_t cap,
                         struct ol_rdma_token *t, const char **why);

#endif
