/* Unit tests of the S3 layer's pure helpers: the XML writer and reader
 * (s3/xml.h), the error table (s3/errors.h), dates and bucket names
 * (s3/util.c) and the listing helpers (s3/list.h).
 * Exits 0 on success, 1 on failure. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "s3/errors.h"
#include "s3/list.h"
#include "s3/s3.h"
#include "s3/xml.h"

#include "check.h"



#define CHECK_STR(got, want)                                                            \
    do {                                                                                \
        const char *g_ = (got), *w_ = (want);                                           \
        if (!g_ || strcmp(g_, w_) != 0) {                                               \
            fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__,     \
                    g_ ? g_ : "(null)", w_);                                            \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

/* ---- writer ---- */

#define DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define NS " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

static void test_writer_nesting(void)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "ListBucketResult");
    ol_xml_str(&x, "Name", "b");
    ol_xml_open(&x, "Contents");
    ol_xml_u64(&x, "Size", UINT64_MAX);
    ol_xml_bool(&x, "IsTruncated", true);
    ol_xml_bool(&x, "Other", false);
    ol_xml_str(&x, "Empty", "");
    ol_xml_open(&x, "Owner");
    ol_xml_str(&x, "ID", "me");
    ol_xml_end_doc(&x); /* closes Owner, Contents, ListBucketResult */
    CHECK(!x.failed);
    CHECK(x.depth == 0);
    CHECK_STR(x.buf, DECL "<ListBucketResult" NS "><Name>b</Name><Contents>"
                          "<Size>18446744073709551615</Size><IsTruncated>true</IsTruncated>"
                          "<Other>false</Other><Empty></Empty><Owner><ID>me</ID></Owner>"
                          "</Contents></ListBucketResult>");
    CHECK(x.len == strlen(x.buf));
    ol_xml_free(&x);
    CHECK(x.buf == NULL && x.len == 0);
}

static void test_writer_escaping(void)
{
    struct ol_xml x;
    ol_xml_init(&x);
    ol_xml_str(&x, "K", "a&b<c>d\"e'f");
    CHECK_STR(x.buf, "<K>a&amp;b&lt;c&gt;d&quot;e&apos;f</K>");
    ol_xml_free(&x);

    ol_xml_init(&x);
    const char ctl[] = "t\tn\nr\r\x01\x1f";
    ol_xml_text(&x, "K", ctl, sizeof(ctl) - 1);
    CHECK_STR(x.buf, "<K>t&#x9;n&#xA;r&#xD;&#x1;&#x1F;</K>");
    ol_xml_free(&x);

    /* A NUL byte inside a key is data, not the end of the text. */
    ol_xml_init(&x);
    ol_xml_text(&x, "K", "a\0b", 3);
    CHECK_STR(x.buf, "<K>a&#x0;b</K>");
    ol_xml_free(&x);

    /* UTF-8 and DEL pass through untouched. */
    ol_xml_init(&x);
    ol_xml_str(&x, "K", "caf\xc3\xa9 \x7f/x");
    CHECK_STR(x.buf, "<K>caf\xc3\xa9 \x7f/x</K>");
    ol_xml_free(&x);

    /* Bytes that are not UTF-8 become U+FFFD, one per byte, so the document
     * stays well-formed; valid 2-, 3- and 4-byte characters pass. */
    ol_xml_init(&x);
    const char bad[] = "a\xff" "b\xc3" "c\xed\xa0\x80" "d\xc0\xaf" "e\xf0\x9f\x98\x80" "f\xe2\x82";
    ol_xml_text(&x, "K", bad, sizeof(bad) - 1);
    CHECK_STR(x.buf, "<K>a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                     "d\xef\xbf\xbd\xef\xbf\xbd" "e\xf0\x9f\x98\x80"
                     "f\xef\xbf\xbd\xef\xbf\xbd</K>");
    ol_xml_free(&x);

    /* Growth across many reallocations keeps every byte. */
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "R");
    for (int i = 0; i < 20000; i++)
        ol_xml_str(&x, "E", "&");
    ol_xml_end_doc(&x);
    CHECK(!x.failed);
    size_t want = strlen(DECL "<R" NS ">") + 20000 * strlen("<E>&amp;</E>") + strlen("</R>");
    CHECK(x.len == want);
    CHECK(x.len == strlen(x.buf));
    ol_xml_free(&x);
}

/* ---- reader ---- */

struct rec {
    char log[4096];
    size_t len;
    int stop_at; /* return -1234 from the n-th text callback (1-based) */
    int ntext;
};

static void rec_add(struct rec *r, const char *s, size_t n)
{
    if (n > sizeof(r->log) - 1 - r->len)
        n = sizeof(r->log) - 1 - r->len;
    memcpy(r->log + r->len, s, n);
    r->len += n;
    r->log[r->len] = '\0';
}

static int rec_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct rec *r = ctx;
    r->ntext++;
    rec_add(r, path, strlen(path));
    rec_add(r, "=", 1);
    rec_add(r, text, len);
    rec_add(r, ";", 1);
    CHECK(text[len] == '\0');
    if (r->stop_at && r->ntext == r->stop_at)
        return -1234;
    return 0;
}

static int rec_elem(void *ctx, const char *path, bool start)
{
    struct rec *r = ctx;
    rec_add(r, start ? "+" : "-", 1);
    rec_add(r, path, strlen(path));
    rec_add(r, " ", 1);
    return 0;
}

static int parse_text(const char *doc, struct rec *r)
{
    memset(r, 0, sizeof(*r));
    return ol_xml_parse(doc, strlen(doc), NULL, rec_text, r);
}

static void test_reader_paths(void)
{
    struct rec r;
    const char *doc =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
        "  <Part>\n    <PartNumber>1</PartNumber>\n    <ETag>\"abc\"</ETag>\n  </Part>\n"
        "  <Part><PartNumber>2</PartNumber><ETag>&quot;d&amp;e&quot;</ETag></Part>\n"
        "</CompleteMultipartUpload>";
    CHECK(parse_text(doc, &r) == 0);
    CHECK_STR(r.log, "CompleteMultipartUpload/Part/PartNumber=1;"
                     "CompleteMultipartUpload/Part/ETag=\"abc\";"
                     "CompleteMultipartUpload/Part/PartNumber=2;"
                     "CompleteMultipartUpload/Part/ETag=\"d&e\";");

    /* Namespace prefixes are stripped; empty leaf elements still report. */
    doc = "<s3:Delete xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
          "<s3:Object><s3:Key>a b</s3:Key><VersionId/></s3:Object>"
          "<Quiet><![CDATA[<true>]]></Quiet></s3:Delete>";
    CHECK(parse_text(doc, &r) == 0);
    CHECK_STR(r.log, "Delete/Object/Key=a b;Delete/Object/VersionId=;Delete/Quiet=<true>;");

    /* Character references, including tab/LF/CR as the writer emits them. */
    CHECK(parse_text("<A>x&#x9;y&#xA;z&#xD;&#65;</A>", &r) == 0);
    CHECK_STR(r.log, "A=x\ty\nz\rA;");

    /* Element start/end callbacks. */
    memset(&r, 0, sizeof(r));
    doc = "<A><B>1</B><C/></A>";
    CHECK(ol_xml_parse(doc, strlen(doc), rec_elem, NULL, &r) == 0);
    CHECK_STR(r.log, "+A +A/B -A/B +A/C -A/C -A ");

    /* A callback's non-zero return stops the parse and is returned. */
    memset(&r, 0, sizeof(r));
    r.stop_at = 2;
    doc = "<A><B>1</B><B>2</B><B>3</B></A>";
    CHECK(ol_xml_parse(doc, strlen(doc), NULL, rec_text, &r) == -1234);
    CHECK(r.ntext == 2);

    /* No callbacks at all: a well-formedness check. */
    CHECK(ol_xml_parse(doc, strlen(doc), NULL, NULL, NULL) == 0);
}

static void test_reader_malformed(void)
{
    static const char *const bad[] = {
        "",
        "   ",
        "<A>",
        "<A></B>",
        "<A><B></A></B>",
        "<A/><B/>",
        "not xml",
        "<A>&undefined;</A>",
        "<A>&amp</A>",
        "<A attr=novalue/>",
        "<A>\x01</A>",
        "<A>&#x1;</A>", /* the writer emits this, and XML 1.0 forbids it */
        "<A>\xff\xfe</A>",
        "<p:A><B/></p:A>x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rec r;
        int ret = parse_text(bad[i], &r);
        if (ret != -EBADMSG) {
            fprintf(stderr, "malformed doc %zu accepted (ret %d): %s\n", i, ret, bad[i]);
            failures++;
        }
    }
    /* A length that stops mid-document is malformed even if the bytes go on. */
    struct rec r;
    memset(&r, 0, sizeof(r));
    CHECK(ol_xml_parse("<A>1</A>", 5, NULL, rec_text, &r) == -EBADMSG);
}

static void test_reader_dtd(void)
{
    static const char *const dtd[] = {
        /* Entity expansion ("billion laughs"). */
        "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\">"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]><l>&b;</l>",
        /* External entity. */
        "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
        "<r>&x;</r>",
        /* External DTD. */
        "<!DOCTYPE r SYSTEM \"http://example.com/r.dtd\"><r/>",
        /* A bare DOCTYPE is refused as well. */
        "<!DOCTYPE r><r>1</r>",
    };
    for (size_t i = 0; i < sizeof(dtd) / sizeof(dtd[0]); i++) {
        struct rec r;
        int ret = parse_text(dtd[i], &r);
        if (ret != -EBADMSG || r.ntext != 0) {
            fprintf(stderr, "DTD doc %zu: ret %d, %d texts\n", i, ret, r.ntext);
            failures++;
        }
    }
}

static void test_reader_limits(void)
{
    char doc[1024];
    size_t n = 0;
    struct rec r;

    /* 16 levels are fine, 17 are not. */
    for (int depth = 16; depth <= 17; depth++) {
        n = 0;
        for (int i = 0; i < depth; i++)
            n += (size_t)snprintf(doc + n, sizeof(doc) - n, "<E%d>", i);
        n += (size_t)snprintf(doc + n, sizeof(doc) - n, "x");
        for (int i = depth - 1; i >= 0; i--)
            n += (size_t)snprintf(doc + n, sizeof(doc) - n, "</E%d>", i);
        int ret = parse_text(doc, &r);
        if (depth == 16) {
            CHECK(ret == 0);
            CHECK(r.ntext == 1);
            CHECK(strstr(r.log, "E0/E1/E2/E3/E4/E5/E6/E7/E8/E9/E10/E11/E12/E13/E14/E15=x;"));
        } else {
            CHECK(ret == -EBADMSG);
        }
    }

    /* 64 KiB of text in one element is fine, one byte more is not. */
    size_t limit = 64u << 10;
    char *big = malloc(limit + 4096);
    CHECK(big != NULL);
    if (!big)
        return;
    for (int extra = 0; extra <= 1; extra++) {
        size_t len = 0;
        memcpy(big, "<A><B>", 6);
        len = 6;
        memset(big + len, 'y', limit + (size_t)extra);
        len += limit + (size_t)extra;
        memcpy(big + len, "</B></A>", 8);
        len += 8;
        memset(&r, 0, sizeof(r));
        int ret = ol_xml_parse(big, len, NULL, rec_text, &r);
        CHECK(extra ? ret == -EBADMSG : ret == 0);
    }
    /* Text is counted per element, not per document. */
    size_t len = 0;
    len += (size_t)sprintf(big + len, "<A><B>");
    memset(big + len, 'y', limit / 2 + 1000);
    len += limit / 2 + 1000;
    len += (size_t)sprintf(big + len, "</B><C>");
    memset(big + len, 'z', limit / 2 + 1000);
    len += limit / 2 + 1000;
    len += (size_t)sprintf(big + len, "</C></A>");
    memset(&r, 0, sizeof(r));
    CHECK(ol_xml_parse(big, len, NULL, NULL, NULL) == 0);
    free(big);
}

/* What the writer produces, the reader reads back (for text XML 1.0 allows). */
static void test_roundtrip(void)
{
    const char text[] = "<&>\"' tab\there\r\nline \xe2\x82\xac end";
    struct ol_xml x;
    struct rec r;
    ol_xml_init(&x);
    ol_xml_begin_doc(&x, "R");
    ol_xml_open(&x, "P");
    ol_xml_text(&x, "K", text, sizeof(text) - 1);
    ol_xml_end_doc(&x);
    CHECK(!x.failed);
    memset(&r, 0, sizeof(r));
    CHECK(ol_xml_parse(x.buf, x.len, NULL, rec_text, &r) == 0);
    char want[256];
    snprintf(want, sizeof(want), "R/P/K=%s;", text);
    CHECK_STR(r.log, want);
    ol_xml_free(&x);
}

/* ---- error table ---- */

static void test_errors(void)
{
    for (int c = 0; c < OL_S3_CODE_COUNT; c++) {
        const char *name = ol_s3_code_name((enum ol_s3_code)c);
        int st = ol_s3_code_status((enum ol_s3_code)c);
        CHECK(name && name[0]);
        CHECK(st >= 400 && st <= 599);
        for (int d = 0; d < c; d++)
            CHECK(strcmp(name, ol_s3_code_name((enum ol_s3_code)d)) != 0);
    }
    CHECK_STR(ol_s3_code_name(OL_S3_AccessDenied), "AccessDenied");
    CHECK_STR(ol_s3_code_name(OL_S3_XAmzContentSHA256Mismatch), "XAmzContentSHA256Mismatch");
    CHECK_STR(ol_s3_code_name(OL_S3_NoSuchKey), "NoSuchKey");
    CHECK(ol_s3_code_status(OL_S3_NoSuchKey) == 404);
    CHECK(ol_s3_code_status(OL_S3_InvalidRange) == 416);
    CHECK(ol_s3_code_status(OL_S3_MissingContentLength) == 411);
    CHECK(ol_s3_code_status(OL_S3_MethodNotAllowed) == 405);
    CHECK(ol_s3_code_status(OL_S3_PreconditionFailed) == 412);
    CHECK(ol_s3_code_status(OL_S3_RequestTimeTooSkewed) == 403);
    CHECK(ol_s3_code_status(OL_S3_BucketNotEmpty) == 409);
    CHECK(ol_s3_code_status(OL_S3_NotImplemented) == 501);
    CHECK(ol_s3_code_status(OL_S3_SlowDown) == 503);
    CHECK(ol_s3_code_status(OL_S3_InternalError) == 500);
    /* Out of range falls back to InternalError rather than reading garbage. */
    CHECK(ol_s3_code_status(OL_S3_CODE_COUNT) == 500);

    CHECK(ol_s3_code_from_err(-OL_ENOBUCKET) == OL_S3_NoSuchBucket);
    CHECK(ol_s3_code_from_err(-OL_ENOKEY) == OL_S3_NoSuchKey);
    CHECK(ol_s3_code_from_err(-OL_EBUCKETEXISTS) == OL_S3_BucketAlreadyOwnedByYou);
    CHECK(ol_s3_code_from_err(-OL_EBUCKETNOTEMPTY) == OL_S3_BucketNotEmpty);
    CHECK(ol_s3_code_from_err(-OL_ENOUPLOAD) == OL_S3_NoSuchUpload);
    CHECK(ol_s3_code_from_err(-OL_EINVALIDPART) == OL_S3_InvalidPart);
    CHECK(ol_s3_code_from_err(-OL_EPARTORDER) == OL_S3_InvalidPartOrder);
    CHECK(ol_s3_code_from_err(-OL_ETOOSMALL) == OL_S3_EntityTooSmall);
    CHECK(ol_s3_code_from_err(-OL_ETOOLARGE) == OL_S3_EntityTooLarge);
    CHECK(ol_s3_code_from_err(-OL_ESHUTDOWN) == OL_S3_ServiceUnavailable);
    CHECK(ol_s3_code_from_err(-OL_ESHA256) == OL_S3_XAmzContentSHA256Mismatch);
    CHECK(ol_s3_code_from_err(-ETIMEDOUT) == OL_S3_RequestTimeout);
    CHECK(ol_s3_code_from_err(-EBADMSG) == OL_S3_MalformedXML);
    CHECK(ol_s3_code_from_err(-OL_ECORRUPT) == OL_S3_InternalError);
    CHECK(ol_s3_code_from_err(-ENOSPC) == OL_S3_XOpenLakeStorageFull);
    CHECK(ol_s3_code_from_err(-EDQUOT) == OL_S3_XOpenLakeStorageFull);
    CHECK(ol_s3_code_status(OL_S3_XOpenLakeStorageFull) == 507);
    CHECK(strcmp(ol_s3_code_name(OL_S3_XOpenLakeStorageFull), "XOpenLakeStorageFull") == 0);
    CHECK(ol_s3_code_from_err(-EIO) == OL_S3_InternalError);
    CHECK(ol_s3_code_from_err(0) == OL_S3_InternalError);
}

/* ---- dates ---- */

static void test_dates(void)
{
    char d[32];
    const int64_t s = 1000000000;

    ol_s3_http_date(0, d);
    CHECK_STR(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    ol_s3_http_date(784111777 * s, d); /* RFC 7231's example */
    CHECK_STR(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    ol_s3_iso_date(0, d);
    CHECK_STR(d, "1970-01-01T00:00:00.000Z");
    ol_s3_iso_date(1234567890 * s + 123456789, d);
    CHECK_STR(d, "2009-02-13T23:31:30.123Z");
    ol_s3_iso_date(951782400 * s, d);
    CHECK_STR(d, "2000-02-29T00:00:00.000Z");
    ol_s3_iso_date(4107542400 * s, d);
    CHECK_STR(d, "2100-03-01T00:00:00.000Z");
    ol_s3_iso_date(-1, d); /* one nanosecond before the epoch */
    CHECK_STR(d, "1969-12-31T23:59:59.999Z");
    ol_s3_http_date(-1, d);
    CHECK_STR(d, "Wed, 31 Dec 1969 23:59:59 GMT");
    ol_s3_iso_date(INT64_MAX, d);
    CHECK_STR(d, "2262-04-11T23:47:16.854Z");

    /* Against the C library over a spread of instants, 1902..2260. */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 20000; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int64_t sec = (int64_t)(seed % 11300000000ull) - 2140000000ll;
        int64_t ns = sec * s + (int64_t)(seed % 1000000000ull);
        time_t t = (time_t)sec;
        struct tm tm;
        char want[64], got[32];
        gmtime_r(&t, &tm);
        strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        ol_s3_http_date(ns, got);
        if (strcmp(want, got) != 0) {
            fprintf(stderr, "http date of %lld: got %s want %s\n", (long long)sec, got, want);
            failures++;
            break;
        }
        snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)((seed % 1000000000ull) / 1000000));
        ol_s3_iso_date(ns, got);
        if (strcmp(want, got) != 0) {
            fprintf(stderr, "iso date of %lld: got %s want %s\n", (long long)sec, got, want);
            failures++;
            break;
        }
    }
}

/* ---- bucket names ---- */

static void test_bucket_names(void)
{
    static const char *const good[] = {
        "abc", "my-bucket", "my.bucket.name", "a1b2c3", "123", "0-0",
        "xn-abc", "s3alias", "bucket-s3alia", "1.2.3", "1.2.3.4.5", "1.2.3.a",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 63 */
    };
    static const char *const bad[] = {
        "", "ab", "ABC", "my_bucket", "-abc", "abc-", ".abc", "abc.", "a..b",
        "192.168.5.4", "1.2.3.4", "xn--abc", "my-bucket-s3alias", "bucket name", "abc/d",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 64 */
        "caf\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!ol_s3_bucket_name_valid(good[i])) {
            fprintf(stderr, "valid bucket name refused: %s\n", good[i]);
            failures++;
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (ol_s3_bucket_name_valid(bad[i])) {
            fprintf(stderr, "invalid bucket name accepted: %s\n", bad[i]);
            failures++;
        }
    }
    CHECK(!ol_s3_bucket_name_valid(NULL));
}

/* ---- listing helpers ---- */

static void test_list_helpers(void)
{
    char out[16];
    size_t n;

    n = ol_s3_prefix_successor("a/", 2, out);
    CHECK(n == 2 && memcmp(out, "a0", 2) == 0);
    n = ol_s3_prefix_successor("a\xff\xff", 3, out);
    CHECK(n == 1 && out[0] == 'b');
    n = ol_s3_prefix_successor("a\xfe", 2, out);
    CHECK(n == 2 && memcmp(out, "a\xff", 2) == 0);
    CHECK(ol_s3_prefix_successor("\xff\xff", 2, out) == 0);
    CHECK(ol_s3_prefix_successor("", 0, out) == 0);
    /* The successor sorts after every extension of the prefix and before the
     * next key that does not extend it. */
    n = ol_s3_prefix_successor("dir/", 4, out);
    CHECK(memcmp("dir/\xff\xff\xff", out, n) < 0);
    CHECK(memcmp(out, "dir0", 4) <= 0);

    char enc[64];
    static const char raw[] = "a b+c/d~e_f.g-h%&\x01\xc3\xa9";
    n = ol_s3_url_encode(raw, sizeof(raw) - 1, enc);
    CHECK_STR(enc, "a%20b%2Bc/d~e_f.g-h%25%26%01%C3%A9");
    CHECK(n == strlen(enc));
    n = ol_s3_url_encode("", 0, enc);
    CHECK(n == 0 && enc[0] == '\0');

    char tok[64], dec[32];
    n = ol_s3_token_encode("k\0\xff/", 4, tok);
    CHECK_STR(tok, "6b00ff2f");
    CHECK(n == 8);
    CHECK(ol_s3_token_decode(tok, n, dec, sizeof(dec)) == 4);
    CHECK(memcmp(dec, "k\0\xff/", 4) == 0);
    CHECK(ol_s3_token_decode("6B00FF2F", 8, dec, sizeof(dec)) == 4);
    CHECK(ol_s3_token_decode("", 0, dec, sizeof(dec)) == -EINVAL);
    CHECK(ol_s3_token_decode("abc", 3, dec, sizeof(dec)) == -EINVAL);
    CHECK(ol_s3_token_decode("zz", 2, dec, sizeof(dec)) == -EINVAL);
    CHECK(ol_s3_token_decode("6b6b6b", 6, dec, 2) == -EINVAL);

    unsigned v = 7;
    CHECK(ol_s3_parse_count("0", 1, 1000, &v) == 0 && v == 0);
    CHECK(ol_s3_parse_count("999", 3, 1000, &v) == 0 && v == 999);
    CHECK(ol_s3_parse_count("5000", 4, 1000, &v) == 0 && v == 1000);
    CHECK(ol_s3_parse_count("9999999999", 10, 1000, &v) == 0 && v == 1000);
    CHECK(ol_s3_parse_count("99999999999", 11, 1000, &v) == -EINVAL);
    CHECK(ol_s3_parse_count("-1", 2, 1000, &v) == -EINVAL);
    CHECK(ol_s3_parse_count("+1", 2, 1000, &v) == -EINVAL);
    CHECK(ol_s3_parse_count("1x", 2, 1000, &v) == -EINVAL);
    CHECK(ol_s3_parse_count("", 0, 1000, &v) == -EINVAL);
}

static void test_utf8(void)
{
    uint32_t cp = 0;
    CHECK(ol_utf8_next((const unsigned char *)"A", 1, &cp) == 1 && cp == 'A');
    CHECK(ol_utf8_next((const unsigned char *)"\xc3\xa9", 2, &cp) == 2 && cp == 0xE9);
    CHECK(ol_utf8_next((const unsigned char *)"\xef\xbf\xbd", 3, &cp) == 3 && cp == 0xFFFD);
    CHECK(ol_utf8_next((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, &cp) == 4 &&
          cp == 0x10FFFF);
    CHECK(ol_utf8_next((const unsigned char *)"\xc3\xa9", 1, &cp) == 0);     /* cut off */
    CHECK(ol_utf8_next((const unsigned char *)"\x80", 1, &cp) == 0);         /* stray */
    CHECK(ol_utf8_next((const unsigned char *)"\xc0\x80", 2, &cp) == 0);     /* overlong */
    CHECK(ol_utf8_next((const unsigned char *)"\xe0\x80\x80", 3, &cp) == 0); /* overlong */
    CHECK(ol_utf8_next((const unsigned char *)"\xed\xa0\x80", 3, &cp) == 0); /* surrogate */
    CHECK(ol_utf8_next((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp) == 0); /* > max */
    CHECK(ol_utf8_next((const unsigned char *)"\xff", 1, &cp) == 0);
    CHECK(ol_utf8_valid("", 0));
    CHECK(ol_utf8_valid("a\0b", 3));
    CHECK(ol_utf8_valid("caf\xc3\xa9", 5));
    CHECK(!ol_utf8_valid("caf\xc3", 4));
    CHECK(!ol_utf8_valid("\xfe", 1));
}

int main(void)
{
    test_utf8();
    test_writer_nesting();
    test_writer_escaping();
    test_reader_paths();
    test_reader_malformed();
    test_reader_dtd();
    test_reader_limits();
    test_roundtrip();
    test_errors();
    test_dates();
    test_bucket_names();
    test_list_helpers();
    if (failures) {
        fprintf(stderr, "test_xml: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_xml: ok\n");
    return 0;
}
