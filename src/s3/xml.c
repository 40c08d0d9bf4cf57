/* The XML writer (S3 response documents) and reader (S3 request documents).
 *
 * Writer: appends to a growable buffer.  An allocation failure makes the
 * document sticky-failed (LMDB style): every later call does nothing and the
 * caller checks x->failed once, before sending.  Tag names are trusted string
 * literals; only text is escaped.
 *
 * Escaping: & < > " ' become the predefined entities.  Tab, LF and CR become
 * numeric character references so that they survive a parser's end-of-line
 * and whitespace normalisation.  Other C0 control bytes (0x00-0x1F) cannot
 * appear in an XML 1.0 document at all, not even as references; we still emit
 * them as "&#xNN;" (what Amazon S3 itself does), which keeps the document
 * lossless for lenient parsers, while strict ones (expat, so boto3) reject
 * it.  That is why clients list with encoding-type=url (boto3 does by
 * default): then keys reach this writer already percent-encoded.  Bytes of
 * 0x80 and above are passed through when they form valid UTF-8, the encoding
 * the declaration names.  A byte that does not (a query value such as
 * prefix=%FF, a key stored before keys were checked) becomes U+FFFD, the
 * replacement character: the document stays well-formed for every parser,
 * and such text was never a valid S3 name to begin with.
 *
 * Reader: expat, with every DTD refused (so no entity can be declared, which
 * rules out external entities and entity expansion bombs), element names
 * stripped of any namespace prefix, a nesting limit and a per-element text
 * limit.
 */
#include "s3/xml.h"

#include <errno.h>
#include <expat.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define OL_XML_NS "http://s3.amazonaws.com/doc/2006-03-01/"
/* No response document comes near this: a 1000-key listing with 1 KiB keys,
 * percent-encoded, is about 4 MiB.  The cap turns a runaway into a failure. */
#define OL_XML_MAX_BYTES (64u << 20)
#define OL_XML_MAX_DEPTH ((int)(sizeof(((struct ol_xml *)0)->stack) / sizeof(const char *)))

/* Reader limits: request documents are small and flat. */
#define OL_XML_READ_MAX_DEPTH 16
#define OL_XML_READ_MAX_TEXT (64u << 10)
#define OL_XML_READ_MAX_PATH 1024

/* ---- writer ---- */

void ol_xml_init(struct ol_xml *x)
{
    memset(x, 0, sizeof(*x));
}

void ol_xml_free(struct ol_xml *x)
{
    free(x->buf);
    memset(x, 0, sizeof(*x));
}

static bool ol_xml_reserve(struct ol_xml *x, size_t more)
{
    if (x->failed)
        return false;
    if (x->cap - x->len > more)
        return true;
    if (more > OL_XML_MAX_BYTES || x->len + more + 1 > OL_XML_MAX_BYTES) {
        x->failed = true;
        return false;
    }
    size_t cap = x->cap ? x->cap : 1024;
    while (cap <= x->len + more) /* bounded: cap doubles up to OL_XML_MAX_BYTES */
        cap *= 2;
    char *p = realloc(x->buf, cap);
    if (!p) {
        x->failed = true;
        return false;
    }
    x->buf = p;
    x->cap = cap;
    return true;
}

/* Appends raw bytes and keeps the buffer NUL-terminated (for logs and tests). */
static void ol_xml_put(struct ol_xml *x, const char *s, size_t n)
{
    if (!ol_xml_reserve(x, n))
        return;
    memcpy(x->buf + x->len, s, n);
    x->len += n;
    x->buf[x->len] = '\0';
}

static void ol_xml_puts(struct ol_xml *x, const char *s)
{
    ol_xml_put(x, s, strlen(s));
}

size_t ol_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0; /* a continuation byte, 0xC0/0xC1 (overlong), or past 0xF4 */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

bool ol_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    /* Each round consumes one character (at least one byte) or stops. */
    for (size_t i = 0; i < n;) {
        size_t k = ol_utf8_next(p + i, n - i, &cp);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

static void ol_xml_escape(struct ol_xml *x, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *rep = NULL;
        char num[8];
        if (c >= 0x80) {
            uint32_t cp;
            size_t k = ol_utf8_next((const unsigned char *)s + i, n - i, &cp);
            if (k > 0) {
                i += k - 1; /* a valid character passes through in the run */
                continue;
            }
            /* One invalid byte: U+FFFD in its place (see the top comment). */
            ol_xml_put(x, s + run, i - run);
            ol_xml_puts(x, "\xEF\xBF\xBD");
            run = i + 1;
            continue;
        }
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (c < 0x20) {
                /* "&#x9;" for tab, "&#x01;" style for the rest. */
                size_t k = 0;
                num[k++] = '&';
                num[k++] = '#';
                num[k++] = 'x';
                if (c >= 0x10)
                    num[k++] = hex[c >> 4];
                num[k++] = hex[c & 0xF];
                num[k++] = ';';
                num[k] = '\0';
                rep = num;
            }
            break;
        }
        if (!rep)
            continue;
        ol_xml_put(x, s + run, i - run);
        ol_xml_puts(x, rep);
        run = i + 1;
    }
    ol_xml_put(x, s + run, n - run);
}

void ol_xml_begin_doc(struct ol_xml *x, const char *root)
{
    OL_ASSERT(x->depth == 0);
    ol_xml_puts(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<");
    ol_xml_puts(x, root);
    /* S3 error documents carry no namespace; every other document does. */
    if (strcmp(root, "Error") == 0)
        ol_xml_puts(x, ">");
    else
        ol_xml_puts(x, " xmlns=\"" OL_XML_NS "\">");
    x->stack[x->depth++] = root;
}

void ol_xml_open(struct ol_xml *x, const char *tag)
{
    /* The nesting of S3 documents is fixed by the code that writes them, so
     * running out of stack is a programming error, not a runtime condition. */
    OL_ASSERT(x->depth < OL_XML_MAX_DEPTH);
    ol_xml_put(x, "<", 1);
    ol_xml_puts(x, tag);
    ol_xml_put(x, ">", 1);
    x->stack[x->depth++] = tag;
}

void ol_xml_close(struct ol_xml *x)
{
    OL_ASSERT(x->depth > 0);
    const char *tag = x->stack[--x->depth];
    ol_xml_put(x, "</", 2);
    ol_xml_puts(x, tag);
    ol_xml_put(x, ">", 1);
}

void ol_xml_text(struct ol_xml *x, const char *tag, const char *text, size_t len)
{
    ol_xml_put(x, "<", 1);
    ol_xml_puts(x, tag);
    ol_xml_put(x, ">", 1);
    if (len)
        ol_xml_escape(x, text, len);
    ol_xml_put(x, "</", 2);
    ol_xml_puts(x, tag);
    ol_xml_put(x, ">", 1);
}

void ol_xml_str(struct ol_xml *x, const char *tag, const char *text)
{
    ol_xml_text(x, tag, text ? text : "", text ? strlen(text) : 0);
}

void ol_xml_u64(struct ol_xml *x, const char *tag, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRIu64, v);
    OL_ASSERT(n > 0 && (size_t)n < sizeof(num));
    ol_xml_text(x, tag, num, (size_t)n);
}

void ol_xml_bool(struct ol_xml *x, const char *tag, bool v)
{
    ol_xml_str(x, tag, v ? "true" : "false");
}

void ol_xml_end_doc(struct ol_xml *x)
{
    for (int i = 0; i < OL_XML_MAX_DEPTH && x->depth > 0; i++)
        ol_xml_close(x);
    OL_ASSERT(x->depth == 0);
}

/* ---- reader ---- */

struct ol_xml_reader {
    XML_Parser p;
    ol_xml_elem_fn on_elem;
    ol_xml_text_fn on_text;
    void *ctx;
    int ret;           /* first error: a callback's return or -EBADMSG */
    int depth;
    bool leaf;         /* no child element opened since the innermost start tag */
    size_t path_len;
    size_t path_at[OL_XML_READ_MAX_DEPTH]; /* path length before each level */
    char path[OL_XML_READ_MAX_PATH];
    size_t text_len;
    char *text;        /* OL_XML_READ_MAX_TEXT bytes */
};

static void ol_xml_fail(struct ol_xml_reader *rd, int err)
{
    if (rd->ret == 0)
        rd->ret = err;
    XML_StopParser(rd->p, XML_FALSE);
}

/* Strips "prefix:" so that <s3:Part> and <Part> read the same. */
static const char *ol_xml_local_name(const char *name)
{
    const char *colon = strrchr(name, ':');
    return colon ? colon + 1 : name;
}

static void XMLCALL ol_xml_on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct ol_xml_reader *rd = ud;
    (void)attrs;
    if (rd->ret)
        return;
    if (rd->depth >= OL_XML_READ_MAX_DEPTH) {
        ol_xml_fail(rd, -EBADMSG);
        return;
    }
    const char *local = ol_xml_local_name(name);
    size_t n = strlen(local);
    size_t need = rd->path_len + (rd->depth ? 1 : 0) + n;
    if (n == 0 || need >= sizeof(rd->path)) {
        ol_xml_fail(rd, -EBADMSG);
        return;
    }
    rd->path_at[rd->depth++] = rd->path_len;
    if (rd->path_len)
        rd->path[rd->path_len++] = '/';
    memcpy(rd->path + rd->path_len, local, n);
    rd->path_len += n;
    rd->path[rd->path_len] = '\0';
    /* Text belongs to the innermost element: a parent's whitespace between
     * its children is dropped. */
    rd->text_len = 0;
    rd->leaf = true;
    if (rd->on_elem) {
        int r = rd->on_elem(rd->ctx, rd->path, true);
        if (r)
            ol_xml_fail(rd, r);
    }
}

static void XMLCALL ol_xml_on_end(void *ud, const XML_Char *name)
{
    struct ol_xml_reader *rd = ud;
    (void)name;
    if (rd->ret)
        return;
    OL_ASSERT(rd->depth > 0);
    if (rd->leaf && rd->on_text) {
        rd->text[rd->text_len] = '\0';
        int r = rd->on_text(rd->ctx, rd->path, rd->text, rd->text_len);
        if (r) {
            ol_xml_fail(rd, r);
            return;
        }
    }
    if (rd->on_elem) {
        int r = rd->on_elem(rd->ctx, rd->path, false);
        if (r) {
            ol_xml_fail(rd, r);
            return;
        }
    }
    rd->path_len = rd->path_at[--rd->depth];
    rd->path[rd->path_len] = '\0';
    rd->leaf = false;
    rd->text_len = 0;
}

static void XMLCALL ol_xml_on_chars(void *ud, const XML_Char *s, int len)
{
    struct ol_xml_reader *rd = ud;
    if (rd->ret || len <= 0)
        return;
    if ((size_t)len > OL_XML_READ_MAX_TEXT - rd->text_len) {
        ol_xml_fail(rd, -EBADMSG);
        return;
    }
    memcpy(rd->text + rd->text_len, s, (size_t)len);
    rd->text_len += (size_t)len;
}

/* A DOCTYPE is the only way to declare entities; S3 documents never carry
 * one, so its mere presence ends the parse. */
static void XMLCALL ol_xml_on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                                      const XML_Char *pubid, int has_internal_subset)
{
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)has_internal_subset;
    ol_xml_fail(ud, -EBADMSG);
}

static void XMLCALL ol_xml_on_entity_decl(void *ud, const XML_Char *name, int is_param,
                                          const XML_Char *value, int value_len,
                                          const XML_Char *base, const XML_Char *sysid,
                                          const XML_Char *pubid, const XML_Char *notation)
{
    (void)name;
    (void)is_param;
    (void)value;
    (void)value_len;
    (void)base;
    (void)sysid;
    (void)pubid;
    (void)notation;
    ol_xml_fail(ud, -EBADMSG);
}

int ol_xml_parse(const char *doc, size_t len, ol_xml_elem_fn on_elem, ol_xml_text_fn on_text,
                 void *ctx)
{
    struct ol_xml_reader *rd = NULL;
    int ret = 0;

    if (len > INT_MAX) {
        ret = -EBADMSG;
        goto out;
    }
    rd = calloc(1, sizeof(*rd));
    if (!rd) {
        ret = -ENOMEM;
        goto out;
    }
    rd->text = malloc(OL_XML_READ_MAX_TEXT + 1);
    if (!rd->text) {
        ret = -ENOMEM;
        goto out;
    }
    rd->p = XML_ParserCreate("UTF-8");
    if (!rd->p) {
        ret = -ENOMEM;
        goto out;
    }
    rd->on_elem = on_elem;
    rd->on_text = on_text;
    rd->ctx = ctx;
    XML_SetUserData(rd->p, rd);
    XML_SetElementHandler(rd->p, ol_xml_on_start, ol_xml_on_end);
    XML_SetCharacterDataHandler(rd->p, ol_xml_on_chars);
    XML_SetStartDoctypeDeclHandler(rd->p, ol_xml_on_doctype);
    XML_SetEntityDeclHandler(rd->p, ol_xml_on_entity_decl);
    XML_SetParamEntityParsing(rd->p, XML_PARAM_ENTITY_PARSING_NEVER);

    enum XML_Status st = XML_Parse(rd->p, doc ? doc : "", (int)len, XML_TRUE);
    if (rd->ret)
        ret = rd->ret;
    else if (st != XML_STATUS_OK)
        ret = -EBADMSG;
out:
    if (rd && rd->p)
        XML_ParserFree(rd->p);
    if (rd)
        free(rd->text);
    free(rd);
    return ret;
}
