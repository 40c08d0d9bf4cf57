/* Receiving a request body into the store (PutObject, UploadPart): the
 * ETag MD5, Content-MD5 and the additional x-amz-checksum-* are computed while
 * the bytes stream from the socket into a store writer. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/cfg.h"
#include "core/err.h"
#include "core/hex.h"
#include "core/log.h"
#include "core/md5.h"
#include "s3/checksum.h"
#include "s3/object.h"
#include "obj/obj.h"
#include "s3/s3.h"
#include "store/store.h"

#define RECV_CHUNK_BYTES (256 * 1024)
/* Body bytes read onto the stack before the body buffers are reserved. */
#define FIRST_BYTES 4096

/* ---- receiving a body, with its checksums ---- */

/* Content-MD5 is base64 of the 16-byte digest. */
int ol_s3_check_content_md5(const struct ol_s3_req *r, const uint8_t md5[16])
{
    const struct ol_slice *cm = ol_s3_header(r, "content-md5");
    if (!cm)
        return 0;
    uint8_t dec[16];
    if (ol_b64_decode(cm->p, cm->n, dec, sizeof(dec)) != 16 || memcmp(dec, md5, 16) != 0)
        return -OL_EBADDIGEST;
    return 0;
}

static int ck_fail(struct ol_s3_body_ck *ck, enum ol_s3_code code, const char *msg)
{
    ck->err_code = code;
    ck->err_msg = msg;
    return -OL_EBADREQUEST;
}

/* S3's message for a malformed x-amz-checksum-* value, by algorithm. */
static const char *ck_invalid_msg(enum ol_ck_algo a)
{
    switch (a) {
    case OL_CK_CRC32: return "Value for x-amz-checksum-crc32 header is invalid.";
    case OL_CK_CRC32C: return "Value for x-amz-checksum-crc32c header is invalid.";
    case OL_CK_CRC64NVME: return "Value for x-amz-checksum-crc64nvme header is invalid.";
    case OL_CK_SHA1: return "Value for x-amz-checksum-sha1 header is invalid.";
    default: return "Value for x-amz-checksum-sha256 header is invalid.";
    }
}

static const char *ck_mismatch_msg(enum ol_ck_algo a)
{
    switch (a) {
    case OL_CK_CRC32:
        return "The x-amz-checksum-crc32 you specified did not match the calculated checksum.";
    case OL_CK_CRC32C:
        return "The x-amz-checksum-crc32c you specified did not match the calculated checksum.";
    case OL_CK_CRC64NVME:
        return "The x-amz-checksum-crc64nvme you specified did not match the calculated "
               "checksum.";
    case OL_CK_SHA1:
        return "The x-amz-checksum-sha1 you specified did not match the calculated checksum.";
    default:
        return "The x-amz-checksum-sha256 you specified did not match the calculated checksum.";
    }
}

int ol_s3_body_ck_parse(struct ol_s3_req *r, enum ol_ck_algo required, struct ol_s3_body_ck *ck)
{
    memset(ck, 0, sizeof(*ck));
    const struct ol_slice *cm = ol_s3_header(r, "content-md5");
    uint8_t md5[16];
    if (cm && ol_b64_decode(cm->p, cm->n, md5, sizeof(md5)) != 16)
        return ck_fail(ck, OL_S3_InvalidDigest, "The Content-MD5 you specified is not valid.");
    /* A value header: x-amz-checksum-<algo> (x-amz-checksum-type, -mode and
     * -algorithm name no algorithm and parse as none). */
    const struct ol_http_request *h = &r->http->head;
    for (size_t i = 0; i < h->nheaders; i++) {
        struct ol_slice name = h->headers[i].name, val = h->headers[i].value;
        if (name.n <= 15 || strncasecmp(name.p, "x-amz-checksum-", 15) != 0)
            continue;
        enum ol_ck_algo a = ol_ck_parse(name.p, name.n);
        if (a == OL_CK_NONE)
            continue;
        if (ck->algo != OL_CK_NONE)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "Expecting a single x-amz-checksum- header. Multiple checksum Types "
                           "are not allowed.");
        ck->algo = a;
        if (ol_b64_decode(val.p, val.n, ck->expected, sizeof(ck->expected)) !=
            (int)ol_ck_len(a))
            return ck_fail(ck, OL_S3_InvalidRequest, ck_invalid_msg(a));
        ck->have_expected = true;
    }
    const struct ol_slice *tr = ol_s3_header(r, "x-amz-trailer");
    if (tr) {
        enum ol_ck_algo a = ol_ck_parse(tr->p, tr->n);
        if (a == OL_CK_NONE || (ck->algo != OL_CK_NONE && ck->algo != a))
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "The value specified in the x-amz-trailer header is not supported");
        ck->algo = a;
        ck->from_trailer = !ck->have_expected;
    }
    const struct ol_slice *sdk = ol_s3_header(r, "x-amz-sdk-checksum-algorithm");
    if (sdk) {
        enum ol_ck_algo a = ol_ck_parse(sdk->p, sdk->n);
        if (a == OL_CK_NONE)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "Value for x-amz-sdk-checksum-algorithm header is invalid.");
        if (ck->algo == OL_CK_NONE)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "x-amz-sdk-checksum-algorithm specified, but no corresponding "
                           "x-amz-checksum-* or x-amz-trailer headers were found.");
        if (ck->algo != a)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "Value for x-amz-sdk-checksum-algorithm header is invalid.");
    }
    if (required != OL_CK_NONE) {
        if (ck->algo != OL_CK_NONE && ck->algo != required)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "Checksum Type mismatch occurred: the part's checksum algorithm "
                           "differs from the one the upload was created with.");
        ck->algo = required;
    }
    return 0;
}

int ol_s3_receive_fail(struct ol_s3_req *r, int rc, const struct ol_s3_body_ck *ck)
{
    if (rc == -EINVAL)
        return ol_s3_error(r, OL_S3_MissingContentLength,
                           "You must provide the Content-Length HTTP header.");
    if (rc == -OL_ETOOLARGE)
        return ol_s3_error(r, OL_S3_EntityTooLarge,
                           "Your proposed upload exceeds the maximum allowed object size.");
    if (!ol_http_body_done(r->conn))
        ol_http_set_close(r->conn);
    if (rc == -EBUSY)
        return ol_s3_error(r, OL_S3_SlowDown,
                           "The server is short of memory for request bodies; retry later.");
    if (ck && ck->err_msg)
        return ol_s3_error(r, ck->err_code, ck->err_msg);
    return ol_s3_error_from(r, rc);
}

/* After the body: the expected checksum (header or trailer) against the
 * computed one. */
static int ck_verify(struct ol_s3_req *r, struct ol_s3_body_ck *ck)
{
    if (ck->from_trailer) {
        const char *v = ol_s3_body_trailer(r, ol_ck_header(ck->algo));
        if (!v)
            return ck_fail(ck, OL_S3_InvalidRequest,
                           "The x-amz-trailer header names a checksum that the body's trailer "
                           "does not carry.");
        if (ol_b64_decode(v, strlen(v), ck->expected, sizeof(ck->expected)) !=
            (int)ol_ck_len(ck->algo))
            return ck_fail(ck, OL_S3_InvalidRequest, ck_invalid_msg(ck->algo));
        ck->have_expected = true;
    }
    if (ck->have_expected && memcmp(ck->expected, ck->got, ol_ck_len(ck->algo)) != 0) {
        ck->err_code = OL_S3_BadDigest;
        ck->err_msg = ck_mismatch_msg(ck->algo);
        return -OL_EBADDIGEST;
    }
    return 0;
}

/* The body's chunks still queued for the deferred MD5, by address: the
 * store writer asks for its buffers back (ol_store_write_set_release), and a
 * buffer may be reused only once every chunk in it is hashed.  A stream
 * never has more than OL_MD5_ASYNC_MAX chunks queued (adding one more hashes
 * the oldest), so older records are hashed and can be overwritten. */
struct body_md5 {
    struct ol_md5_async md;
    struct {
        uintptr_t p;
        uint64_t seq;
    } c[OL_MD5_ASYNC_MAX];
    uint64_t nchunks;
};

static void body_release(void *ctx, const uint8_t *p, size_t len)
{
    struct body_md5 *b = ctx;
    uintptr_t lo = (uintptr_t)p, hi = lo + len;
    bool any = false;
    uint64_t last = 0;
    uint64_t n = b->nchunks < OL_MD5_ASYNC_MAX ? b->nchunks : OL_MD5_ASYNC_MAX;
    for (uint64_t i = 0; i < n; i++) {
        if (b->c[i].p >= lo && b->c[i].p < hi && (!any || b->c[i].seq > last)) {
            last = b->c[i].seq;
            any = true;
        }
    }
    if (any)
        ol_md5_async_wait(&b->md, last);
}

int ol_s3_receive_body_ck(struct ol_s3_req *r, const struct ol_obj_target *t,
                          struct ol_obj_writer **out, char md5_hex[33], struct ol_s3_body_ck *ck)
{
    int64_t len = ol_s3_body_length(r);
    const struct ol_cfg *cfg = r->ctx->cfg;
    if (len < 0 && !r->http->chunked && !r->body_decoder)
        return -EINVAL;
    if (len > cfg->max_object_bytes)
        return -OL_ETOOLARGE;
    struct ol_obj_writer *w = NULL;
    struct ol_ck cks = {0};
    bool ck_on = ck && ck->algo != OL_CK_NONE;
    /* The bytes are received straight into the store writer's buffer
     * (ol_store_write_room), without a copy.  The ETag MD5 is deferred: each
     * chunk is queued with every loop's other bodies and hashed with them,
     * side by side in SIMD lanes, when enough bodies have a chunk queued to
     * fill the lanes, when a body needs a buffer back, or when its queue is
     * full (OL_MD5_ASYNC_MAX chunks, 2 MiB ahead of its hash); see
     * ol_md5_async_*. */
    struct body_md5 bm;
    bool md_on = false;
    int rc = 0;
    if (ck_on && (rc = ol_ck_init(&cks, ck->algo)) < 0)
        goto fail;
    /* Nothing is reserved or allocated for the body until its first bytes
     * have arrived (a client that stalls before sending holds nothing); they
     * wait on the stack meanwhile. */
    uint8_t first[FIRST_BYTES];
    ssize_t nfirst = 0;
    size_t first_off = 0;
    if (len != 0) {
        nfirst = ol_s3_body_read(r, first, len > 0 && (uint64_t)len < sizeof(first)
                                               ? (size_t)len
                                               : sizeof(first));
        if (nfirst < 0) {
            rc = (int)nfirst;
            goto fail;
        }
    }
    /* Then the writer's buffers, sized to the body, come out of the body
     * memory budget (core/buf.h): wait, or -EBUSY (503 SlowDown). */
    uint64_t need = ol_obj_write_buffer_bytes(r->ctx->obj, t, len);
    rc = ol_bodymem_reserve(need, (unsigned)cfg->body_memory_wait_ms);
    if (rc < 0)
        goto fail;
    rc = ol_obj_write_begin(r->ctx->obj, t, len, &w);
    if (rc < 0) {
        ol_bodymem_release(need);
        goto fail;
    }
    ol_obj_write_hold(w, need);
    ol_md5_async_begin(&bm.md);
    bm.nchunks = 0;
    md_on = true;
    ol_obj_write_set_release(w, body_release, &bm);
    uint64_t total = 0;
    /* Bounded by the body: every round consumes bytes or ends. */
    for (;;) {
        /* A body of known length ends with a read that returns 0 (it checks
         * the signed payload's SHA-256 and aws-chunked's trailer); it is made
         * here, before asking the writer for room it would not use. */
        if (len >= 0 && total == (uint64_t)len) {
            uint8_t probe[1];
            ssize_t got = ol_s3_body_read(r, probe, sizeof(probe));
            if (got != 0) {
                rc = got < 0 ? (int)got : -OL_EINCOMPLETE;
                goto fail;
            }
            break;
        }
        uint8_t *p = NULL;
        size_t room = 0;
        rc = ol_obj_write_room(w, &p, &room);
        if (rc < 0)
            goto fail;
        /* Whole chunks (but the last): chunks of equal length keep the
         * MD5 lanes of a batch busy until they all end together.  The
         * writer's full buffer (1 MiB with the default block size) is a
         * multiple of the chunk size, so chunks do not straddle two. */
        size_t want = room < RECV_CHUNK_BYTES ? room : RECV_CHUNK_BYTES;
        size_t n = 0;
        bool eof = false;
        if (nfirst > 0) {
            /* The first bytes, read before the writer existed, as many as
             * the room takes: it may be smaller than they are (an erasure
             * set's stripe buffer for a body of unknown length starts at k
             * bytes and grows), and then the rest goes in the next rounds,
             * before any further body byte is read. */
            size_t take = (size_t)nfirst < want ? (size_t)nfirst : want;
            memcpy(p, first + first_off, take);
            n = take;
            first_off += take;
            nfirst -= (ssize_t)take;
        }
        while (n < want && !eof) {
            ssize_t got = ol_s3_body_read(r, p + n, want - n);
            if (got < 0) {
                rc = (int)got;
                goto fail;
            }
            eof = got == 0;
            n += (size_t)got;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > (uint64_t)cfg->max_object_bytes) {
            rc = -OL_ETOOLARGE;
            goto fail;
        }
        uint64_t seq = ol_md5_async_add(&bm.md, p, n);
        bm.c[bm.nchunks % OL_MD5_ASYNC_MAX].p = (uintptr_t)p;
        bm.c[bm.nchunks % OL_MD5_ASYNC_MAX].seq = seq;
        bm.nchunks++;
        if (ck_on)
            ol_ck_update(&cks, p, n);
        rc = ol_obj_write_advance(w, n);
        if (rc < 0)
            goto fail;
        if (eof)
            break;
    }
    uint8_t digest[16];
    ol_md5_async_end(&bm.md, digest);
    md_on = false;
    ol_obj_write_set_release(w, NULL, NULL);
    if (len >= 0 && total != (uint64_t)len) {
        rc = -OL_EINCOMPLETE;
        goto fail;
    }
    rc = ol_s3_check_content_md5(r, digest);
    if (rc < 0)
        goto fail;
    if (ck_on) {
        ol_ck_final(&cks, ck->got);
        ol_b64_encode(ck->got, ol_ck_len(ck->algo), ck->b64);
        rc = ck_verify(r, ck);
        if (rc < 0)
            goto fail;
    }
    ol_hex(digest, 16, md5_hex);
    ol_ck_free(&cks);
    *out = w;
    return 0;
fail:
    /* Drops the queued chunks before the writer frees their buffers; the
     * writer waits for its own segment write before freeing. */
    if (md_on)
        ol_md5_async_end(&bm.md, NULL);
    if (w)
        ol_obj_write_abort(w);
    ol_ck_free(&cks);
    return rc;
}
