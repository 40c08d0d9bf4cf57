/* Unit tests for src/s3/sigv2.c: the S3 documentation's published SigV2
 * examples (header and query forms), amz-header canonicalisation and the
 * signed sub-resources. */
#include <errno.h>
#include <string.h>

#include "s3/sigv2.h"

#include "check.h"

#define S(lit) ((struct ol_slice){lit, sizeof(lit) - 1})

static const char secret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

static void sts_is(const struct ol_sigv2_request *req, const char *want)
{
    char buf[1024];
    size_t n = 0;
    CHECK_RC(ol_sigv2_string_to_sign(req, buf, sizeof(buf), &n), 0);
    if (n != strlen(want) || memcmp(buf, want, n) != 0) {
        fprintf(stderr, "string to sign:\n%.*s\nwant:\n%s\n", (int)n, buf, want);
        failures++;
    }
}

static void sig_is(const struct ol_sigv2_request *req, const char *want)
{
    char buf[1024], sig[OL_SIGV2_SIG_LEN + 1];
    size_t n = 0;
    CHECK_RC(ol_sigv2_string_to_sign(req, buf, sizeof(buf), &n), 0);
    CHECK_RC(ol_sigv2_sign(secret, strlen(secret), buf, n, sig), 0);
    CHECK(strcmp(sig, want) == 0);
    CHECK(ol_sigv2_sig_equal(sig, (struct ol_slice){want, strlen(want)}));
}

int main(void)
{
    /* The S3 developer guide's "Object GET" example (virtual-hosted
     * johnsmith.s3.amazonaws.com). */
    struct ol_sigv2_request get = {
        .method = S("GET"),
        .date = S("Tue, 27 Mar 2007 19:36:42 +0000"),
        .bucket = S("johnsmith"),
        .path = S("/photos/puppy.jpg"),
    };
    sts_is(&get, "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg");
    sig_is(&get, "bWq2s1WEIj+Ydj0vQ697zp+IXMU=");

    /* Its query-string example: Expires in the date line. */
    struct ol_sigv2_request q = get;
    q.date = S("1175139620");
    q.query = S("AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=x");
    sig_is(&q, "NpgCjnDzrM+WFzoENXmpNDUsSn8=");

    /* Amz headers: lowercased, trimmed, sorted; sub-resources sorted with
     * their values decoded; other parameters left out. */
    struct ol_sigv2_amz amz[] = {
        {S("X-Amz-Meta-B"), S("  two ")},
        {S("x-amz-acl"), S("private")},
    };
    struct ol_sigv2_request put = {
        .method = S("PUT"),
        .content_md5 = S("abc=="),
        .content_type = S("text/plain"),
        .date = S(""),
        .amz = amz,
        .namz = 2,
        .path = S("/b/k%20x"),
        .query = S("uploadId=u%2Fv&partNumber=3&x-id=UploadPart&uploads"),
    };
    sts_is(&put, "PUT\nabc==\ntext/plain\n\nx-amz-acl:private\nx-amz-meta-b:two\n"
                 "/b/k%20x?partNumber=3&uploadId=u/v&uploads");

    /* Changing the method, a header or a sub-resource changes the signature. */
    char a[OL_SIGV2_SIG_LEN + 1], b[OL_SIGV2_SIG_LEN + 1], buf[512];
    size_t n;
    CHECK_RC(ol_sigv2_string_to_sign(&get, buf, sizeof(buf), &n), 0);
    CHECK_RC(ol_sigv2_sign(secret, strlen(secret), buf, n, a), 0);
    struct ol_sigv2_request v = get;
    v.query = S("versionId=1");
    CHECK_RC(ol_sigv2_string_to_sign(&v, buf, sizeof(buf), &n), 0);
    CHECK_RC(ol_sigv2_sign(secret, strlen(secret), buf, n, b), 0);
    CHECK(strcmp(a, b) != 0);
    CHECK(!ol_sigv2_sig_equal(a, (struct ol_slice){b, strlen(b)}));
    CHECK(!ol_sigv2_sig_equal(a, (struct ol_slice){a, strlen(a) - 1}));

    /* Too small a buffer, a bad escape in a signed value. */
    CHECK_RC(ol_sigv2_string_to_sign(&get, buf, 10, &n), -ENOSPC);
    v.query = S("versionId=%zz");
    CHECK_RC(ol_sigv2_string_to_sign(&v, buf, sizeof(buf), &n), -EINVAL);

    CHECK(ol_sigv2_subresource("uploads", 7));
    CHECK(ol_sigv2_subresource("response-content-type", 21));
    CHECK(!ol_sigv2_subresource("x-id", 4));
    CHECK(!ol_sigv2_subresource("prefix", 6));
    return failures ? 1 : 0;
}
