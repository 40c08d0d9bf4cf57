/* A small XML writer (escaping, nesting) into a growable buffer, and a tiny
 * reader for the request documents S3 clients send (CompleteMultipartUpload,
 * later Delete, Tagging...).  The reader is built on expat. */
#ifndef OL_S3_XML_H
#define OL_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ol_xml {
    char *buf;
    size_t len, cap;
    int depth;
    const char *stack[16];
    bool failed; /* sticky: an allocation failed; the document is unusable */
};

void ol_xml_init(struct ol_xml *x);
void ol_xml_free(struct ol_xml *x);
/* Writes the <?xml ...?> declaration and opens the root element with the S3 namespace. */
void ol_xml_begin_doc(struct ol_xml *x, const char *root);
void ol_xml_open(struct ol_xml *x, const char *tag);
void ol_xml_close(struct ol_xml *x); /* closes the innermost open element */
/* <tag>escaped text</tag> */
void ol_xml_text(struct ol_xml *x, const char *tag, const char *text, size_t len);
void ol_xml_str(struct ol_xml *x, const char *tag, const char *text);
void ol_xml_u64(struct ol_xml *x, const char *tag, uint64_t v);
void ol_xml_bool(struct ol_xml *x, const char *tag, bool v);
/* Closes everything still open. */
void ol_xml_end_doc(struct ol_xml *x);

/* UTF-8 (RFC 3629): decodes the character at s[0, n): returns its length
 * (1..4) with *cp, or 0 for an invalid sequence (a stray continuation byte,
 * an overlong form, a surrogate, a value past U+10FFFF, or one cut off by n).
 * n must be at least 1. */
size_t ol_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Whether s[0, n) is entirely valid UTF-8 (NUL bytes included as U+0000). */
bool ol_utf8_valid(const char *s, size_t n);

/* Reading: calls fn for each element's text content with the element path
 * ("CompleteMultipartUpload/Part/PartNumber").  Returns 0, or -EBADMSG for
 * malformed XML, or fn's non-zero return.  Rejects DTDs/entities. */
typedef int (*ol_xml_text_fn)(void *ctx, const char *path, const char *text, size_t len);
typedef int (*ol_xml_elem_fn)(void *ctx, const char *path, bool start);
int ol_xml_parse(const char *doc, size_t len, ol_xml_elem_fn on_elem, ol_xml_text_fn on_text,
                 void *ctx);

#endif
