/* Bucket lifecycle: PutBucketLifecycleConfiguration, GetBucketLifecycle-
 * Configuration, DeleteBucketLifecycle, and the worker that applies the rules.
 *
 * Rules: ID, Status (Enabled | Disabled), a filter (exactly one of
 * Filter/Prefix, one Filter/Tag, Filter/ObjectSizeGreaterThan,
 * Filter/ObjectSizeLessThan, or Filter/And with a Prefix, up to
 * OL_LC_MAX_TAGS tags and the two size bounds; or the legacy rule-level
 * Prefix), and actions: Expiration (Days, Date or
 * ExpiredObjectDeleteMarker), NoncurrentVersionExpiration (see below) and
 * AbortIncompleteMultipartUpload (DaysAfterInitiation).  Transitions answer
 * NotImplemented: this server has one storage class.
 *
 * The configuration is kept as the bucket setting "lifecycle", in the
 * normalized XML this file writes after validating a document, so
 * GetBucketLifecycleConfiguration returns it as stored.
 *
 * The worker (ol_s3_lifecycle_fiber) runs on loop 0.  Each pass, every
 * lifecycle_interval_ms, walks the buckets with a configuration and, for each
 * enabled rule, deletes objects under the prefix whose Last-Modified is at
 * least Days "days" old (a day is lifecycle_day_sec seconds, 86400 unless a
 * test shortens it; Amazon S3 rounds to the next midnight UTC, this server
 * does not), or all of them once Date has passed, and aborts the multipart
 * uploads under the prefix started at least DaysAfterInitiation days ago.
 * The work is bounded: keys are examined OL_LC_SCAN_BATCH at a time with the
 * store iterator closed (and the fiber yielding) between batches, at most
 * OL_LC_MAX_ACTIONS objects and uploads per bucket are removed per pass (the
 * next pass goes on), and no iterator is held across a store write.
 *
 * Size bounds are exclusive byte counts (GreaterThan 0..OL_LC_SIZE_MAX,
 * LessThan 1..OL_LC_SIZE_MAX, GreaterThan below LessThan when both are
 * given; not with AbortIncompleteMultipartUpload, as S3 refuses).  The
 * iterators return sizes, so the worker filters on them while scanning: the
 * current object's size for Expiration, each version's own for
 * NoncurrentVersionExpiration.  A delete marker has no size and is not
 * filtered by them.  The re-read before a current object's removal checks
 * its size again (an overwrite may have changed it).
 *
 * A rule with tags applies to the objects (and versions) that carry every
 * one of them, key and value equal.  Tags live in each version's index entry
 * (tagging.c), which the iterators do not return: after each batch, with the
 * iterator closed, the worker opens each candidate (the version concerned,
 * for noncurrent expiration) and drops those whose tags do not match, so a
 * batch of non-matching objects costs one read each and takes none of the
 * removal budget.  Each one is read again right before its removal, since
 * its tags may have changed in between.  A delete marker has no tags, so a tag rule never removes
 * one (S3 rejects ExpiredObjectDeleteMarker with a tag filter).
 *
 * In a bucket that has had versioning, Expiration adds a delete marker (the
 * store's delete follows the bucket's state).  NoncurrentVersionExpiration
 * permanently removes versions noncurrent for at least NoncurrentDays (since
 * the next newer version was written), keeping NewerNoncurrentVersions of
 * the newest; a delete marker left as a key's only version is removed when
 * the rule has ExpiredObjectDeleteMarker true, or Expiration Days and the
 * marker is that old.  That walk reads OL_LC_SCAN_BATCH versions per
 * snapshot and seeks back into a key whose versions span batches.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cfg.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "obj/obj.h"
#include "s3/checksum.h"
#include "s3/s3.h"
#include "s3/settings.h"
#include "store/format.h"
#include "store/store.h"

#define OL_LC_SETTING "lifecycle"
#define OL_LC_MAX_RULES 1000
#define OL_LC_DOC_MAX (512u << 10)
#define OL_LC_STORED_MAX (OL_LC_DOC_MAX * 2)
#define OL_LC_ID_MAX 255
#define OL_LC_PREFIX_MAX 1024
/* Tags one rule's filter may require (as many as an object may carry). */
#define OL_LC_MAX_TAGS 10
#define OL_LC_TAG_KEY_MAX 128
#define OL_LC_TAG_VALUE_MAX 256
/* The largest ObjectSizeGreaterThan / ObjectSizeLessThan Amazon S3 accepts
 * (its InvalidRequest message for a value out of range names this bound). */
#define OL_LC_SIZE_MAX 1099511627776000LL
/* Keys examined per iterator snapshot, and most removals per bucket per pass. */
#define OL_LC_SCAN_BATCH 1000
#define OL_LC_MAX_ACTIONS 1000
/* Most keys examined per rule per pass, so that one pass stays bounded.  A
 * pass starts again at the beginning of the prefix: expired keys beyond the
 * first OL_LC_MAX_SCAN live ones under a prefix wait for those to expire
 * (a persistent resume cursor would lift this). */
#define OL_LC_MAX_SCAN 1000000
#define OL_LC_MAX_BUCKETS 100000
/* The worker looks at the stop flag at least this often. */
#define OL_LC_SLICE_MS 100u

struct ol_lc_rule {
    const char *id; /* NULL when absent (a Put assigns one: gen_id) */
    char gen_id[52];
    bool enabled;
    bool legacy_prefix; /* rule-level <Prefix> instead of <Filter> */
    bool and_filter;    /* <Filter><And><Prefix> */
    const char *prefix; /* "" when absent */
    size_t prefix_len;
    bool filter_prefix;  /* <Filter><Prefix> directly, not inside <And> */
    unsigned filter_tags; /* <Filter><Tag> directly */
    /* The tags required (Filter/Tag or Filter/And/Tag), kept in the arena;
     * a tag without <Key> has key NULL. */
    size_t ntags;
    const char *tag_key[OL_LC_MAX_TAGS], *tag_val[OL_LC_MAX_TAGS];
    size_t tag_key_len[OL_LC_MAX_TAGS], tag_val_len[OL_LC_MAX_TAGS];
    bool tag_overflow; /* more than OL_LC_MAX_TAGS tags were given */
    /* ObjectSizeGreaterThan / ObjectSizeLessThan in bytes, -1 when absent;
     * inside <And> when and_filter, else directly in <Filter>. */
    int64_t size_gt, size_lt;
    unsigned filter_sizes; /* size elements directly in <Filter> */
    bool size_twice;       /* one of them given twice */
    bool has_status, has_filter, has_expiration, has_noncurrent, has_abort;
    int64_t exp_days;    /* > 0, or 0 */
    int64_t exp_date_ns; /* > 0 with has_date */
    bool has_date;
    int exp_marker; /* -1 absent, 0 false, 1 true */
    int64_t nc_days;
    int64_t nc_newer; /* NewerNoncurrentVersions, 0 when absent */
    int64_t abort_days;
};

struct ol_lc_cfg {
    struct ol_lc_rule *rules; /* OL_LC_MAX_RULES */
    size_t nrules;
    char *arena;
    size_t arena_len, arena_cap;
    enum ol_s3_code code;
    const char *msg;
    char msg_buf[160];
};

static const char ol_lc_malformed[] =
    "The XML you provided was not well-formed or did not validate against our published schema";

static void ol_lc_free(struct ol_lc_cfg *c)
{
    if (!c)
        return;
    free(c->rules);
    free(c->arena);
    free(c);
}

static int ol_lc_fail(struct ol_lc_cfg *c, enum ol_s3_code code, const char *msg)
{
    if (!c->msg) {
        c->code = code;
        c->msg = msg;
    }
    return -EINVAL;
}

static const char *ol_lc_keep(struct ol_lc_cfg *c, const char *s, size_t n)
{
    if (n + 1 > c->arena_cap - c->arena_len)
        return NULL;
    char *out = c->arena + c->arena_len;
    memcpy(out, s, n);
    out[n] = 0;
    c->arena_len += n + 1;
    return out;
}

static void ol_lc_trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t' || **s == '\r' || **s == '\n')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r' ||
                  (*s)[*n - 1] == '\n'))
        (*n)--;
}

/* A size filter's value: an optionally signed decimal integer (the schema's
 * Long).  Returns 0 with *v, or -1 when the text is not such an integer (or
 * has more than 18 digits, beyond any valid size). */
static int ol_lc_long(const char *s, size_t n, int64_t *v)
{
    ol_lc_trim(&s, &n);
    bool neg = n && s[0] == '-';
    if (n && (s[0] == '-' || s[0] == '+')) {
        s++;
        n--;
    }
    if (n == 0 || n > 18)
        return -1;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    return 0;
}

/* A positive decimal integer of at most 9 digits, unsigned; -1 otherwise. */
static int64_t ol_lc_positive(const char *s, size_t n)
{
    int64_t v = 0;
    ol_lc_trim(&s, &n);
    if (n == 0 || n > 9 || s[0] == '-' || s[0] == '+' || ol_lc_long(s, n, &v) != 0)
        return -1;
    return v > 0 ? v : -1;
}

/* Days from 1970-01-01 to a civil date (proleptic Gregorian). */
static int64_t ol_lc_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* Parses an ISO 8601 date ("2030-01-01", "2030-01-01T00:00:00Z", with
 * optional fractional seconds, "+00:00" for Z).  Returns 0 with *ns and
 * *midnight (the time is 00:00:00.000 UTC), or -1. */
static int ol_lc_parse_date(const char *s, size_t n, int64_t *ns, bool *midnight)
{
    char buf[64];
    ol_lc_trim(&s, &n);
    if (n < 10 || n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    int y, mo, d, h = 0, mi = 0, sec = 0, used = 0;
    if (sscanf(buf, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || used != 10)
        return -1;
    const char *p = buf + 10;
    bool frac_zero = true;
    if (*p == 'T') {
        int u2 = 0;
        if (sscanf(p, "T%2d:%2d:%2d%n", &h, &mi, &sec, &u2) != 3 || u2 != 9)
            return -1;
        p += 9;
        if (*p == '.') {
            p++;
            if (*p < '0' || *p > '9')
                return -1;
            for (int i = 0; i < 9 && *p >= '0' && *p <= '9'; i++, p++)
                frac_zero = frac_zero && *p == '0';
        }
        if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
            return -1;
    } else if (*p) {
        return -1;
    }
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 59 || h < 0 || mi < 0 || sec < 0)
        return -1;
    int64_t days = ol_lc_days_from_civil(y, (unsigned)mo, (unsigned)d);
    *ns = ((days * 24 + h) * 60 + mi) * 60 * 1000000000LL + (int64_t)sec * 1000000000LL;
    *midnight = h == 0 && mi == 0 && sec == 0 && frac_zero;
    return 0;
}

#define OL_LC_RULE "LifecycleConfiguration/Rule"

/* Element paths relative to a rule: what may appear. */
static const char *const ol_lc_known[] = {
    "ID",
    "Status",
    "Prefix",
    "Filter",
    "Filter/Prefix",
    "Filter/And",
    "Filter/And/Prefix",
    "Filter/Tag",
    "Filter/Tag/Key",
    "Filter/Tag/Value",
    "Filter/And/Tag",
    "Filter/And/Tag/Key",
    "Filter/And/Tag/Value",
    "Filter/ObjectSizeGreaterThan",
    "Filter/ObjectSizeLessThan",
    "Filter/And/ObjectSizeGreaterThan",
    "Filter/And/ObjectSizeLessThan",
    "Expiration",
    "Expiration/Days",
    "Expiration/Date",
    "Expiration/ExpiredObjectDeleteMarker",
    "NoncurrentVersionExpiration",
    "NoncurrentVersionExpiration/NoncurrentDays",
    "NoncurrentVersionExpiration/NewerNoncurrentVersions",
    "AbortIncompleteMultipartUpload",
    "AbortIncompleteMultipartUpload/DaysAfterInitiation",
};

/* Known to S3, not implemented here. */
static const char *const ol_lc_unsupported[] = {
    "Transition",
    "Transitions",
    "NoncurrentVersionTransition",
    "NoncurrentVersionTransitions",
};

static bool ol_lc_in(const char *rel, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(list[i]);
        /* A listed element and everything inside it. */
        if (strncmp(rel, list[i], l) == 0 && (rel[l] == 0 || rel[l] == '/'))
            return true;
    }
    return false;
}

static int ol_lc_rule_done(struct ol_lc_cfg *c, struct ol_lc_rule *ru)
{
    if (!ru->has_status)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    if (ru->legacy_prefix && ru->has_filter)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    /* A Filter holds one condition (a Prefix, a Tag, a size bound, or an
     * And): several need <And>, and And holds each size bound once. */
    if (ru->filter_tags + ru->filter_sizes + ru->filter_prefix + ru->and_filter > 1 ||
        ru->size_twice)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    if (ru->size_gt >= 0 && ru->size_lt >= 0 && ru->size_gt >= ru->size_lt)
        return ol_lc_fail(c, OL_S3_InvalidArgument,
                          "ObjectSizeGreaterThan must be less than ObjectSizeLessThan");
    /* Amazon S3 refuses this pairing: an upload in progress has no size. */
    if ((ru->size_gt >= 0 || ru->size_lt >= 0) && ru->has_abort)
        return ol_lc_fail(c, OL_S3_InvalidRequest,
                          "AbortIncompleteMultipartUpload cannot be specified with Object Size.");
    if (ru->tag_overflow)
        return ol_lc_fail(c, OL_S3_InvalidArgument,
                          "A lifecycle rule filter may have at most 10 tags");
    for (size_t i = 0; i < ru->ntags; i++) {
        if (!ru->tag_key[i])
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        for (size_t j = 0; j < i; j++)
            if (ru->tag_key_len[j] == ru->tag_key_len[i] &&
                memcmp(ru->tag_key[j], ru->tag_key[i], ru->tag_key_len[i]) == 0)
                return ol_lc_fail(c, OL_S3_InvalidArgument,
                                  "Duplicate Tag Keys are not allowed.");
    }
    if (ru->ntags && ru->exp_marker >= 0)
        return ol_lc_fail(c, OL_S3_InvalidArgument,
                          "ExpiredObjectDeleteMarker cannot be specified with tags.");
    if (ru->has_expiration) {
        int kinds = (ru->exp_days > 0) + ru->has_date + (ru->exp_marker >= 0);
        if (kinds != 1)
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    }
    if (ru->has_noncurrent && ru->nc_days <= 0)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    if (ru->has_abort && ru->abort_days <= 0)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    if (!ru->has_expiration && !ru->has_noncurrent && !ru->has_abort)
        return ol_lc_fail(c, OL_S3_InvalidArgument,
                          "At least one action needs to be specified in a rule");
    if (ru->id)
        for (size_t i = 0; i + 1 < c->nrules; i++)
            if (c->rules[i].id && strcmp(c->rules[i].id, ru->id) == 0)
                return ol_lc_fail(c, OL_S3_InvalidArgument,
                                  "Rule ID must be unique. Found same ID for more than one rule");
    return 0;
}

static int ol_lc_on_elem(void *ctx, const char *path, bool start)
{
    struct ol_lc_cfg *c = ctx;
    if (strcmp(path, OL_LC_RULE) == 0) {
        if (!start)
            return ol_lc_rule_done(c, &c->rules[c->nrules - 1]);
        if (c->nrules >= OL_LC_MAX_RULES)
            return ol_lc_fail(c, OL_S3_MalformedXML,
                              "The lifecycle configuration may have at most 1000 rules.");
        struct ol_lc_rule *ru = &c->rules[c->nrules++];
        memset(ru, 0, sizeof(*ru));
        ru->prefix = "";
        ru->exp_marker = -1;
        ru->size_gt = -1;
        ru->size_lt = -1;
        return 0;
    }
    if (!start)
        return 0;
    if (strcmp(path, "LifecycleConfiguration") == 0)
        return 0;
    size_t rl = sizeof(OL_LC_RULE) - 1;
    if (strncmp(path, OL_LC_RULE "/", rl + 1) != 0)
        return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    const char *rel = path + rl + 1;
    struct ol_lc_rule *ru = &c->rules[c->nrules - 1];
    if (ol_lc_in(rel, ol_lc_unsupported, sizeof(ol_lc_unsupported) / sizeof(*ol_lc_unsupported))) {
        snprintf(c->msg_buf, sizeof(c->msg_buf),
                 "Lifecycle rules with %.60s are not implemented by OpenLake.", rel);
        return ol_lc_fail(c, OL_S3_NotImplemented, c->msg_buf);
    }
    for (size_t i = 0; i < sizeof(ol_lc_known) / sizeof(*ol_lc_known); i++)
        if (strcmp(rel, ol_lc_known[i]) == 0) {
            if (strcmp(rel, "Filter") == 0)
                ru->has_filter = true;
            else if (strcmp(rel, "Filter/Prefix") == 0)
                ru->filter_prefix = true; /* an empty one counts too */
            else if (strcmp(rel, "Filter/And") == 0)
                ru->and_filter = true;
            else if (strcmp(rel, "Filter/Tag") == 0 || strcmp(rel, "Filter/And/Tag") == 0) {
                ru->filter_tags += rel[7] == 'T';
                if (ru->ntags >= OL_LC_MAX_TAGS) {
                    ru->tag_overflow = true;
                    return 0;
                }
                ru->tag_key[ru->ntags] = NULL;
                ru->tag_val[ru->ntags] = "";
                ru->tag_key_len[ru->ntags] = 0;
                ru->tag_val_len[ru->ntags] = 0;
                ru->ntags++;
            }
            else if (strncmp(rel, "Filter/ObjectSize", 17) == 0 ||
                     strncmp(rel, "Filter/And/ObjectSize", 21) == 0)
                ru->filter_sizes += rel[7] == 'O';
            else if (strcmp(rel, "Expiration") == 0)
                ru->has_expiration = true;
            else if (strcmp(rel, "NoncurrentVersionExpiration") == 0)
                ru->has_noncurrent = true;
            else if (strcmp(rel, "AbortIncompleteMultipartUpload") == 0)
                ru->has_abort = true;
            return 0;
        }
    return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
}

static int ol_lc_on_text(void *ctx, const char *path, const char *text, size_t len)
{
    struct ol_lc_cfg *c = ctx;
    size_t rl = sizeof(OL_LC_RULE) - 1;
    if (strncmp(path, OL_LC_RULE "/", rl + 1) != 0 || c->nrules == 0)
        return 0;
    const char *rel = path + rl + 1;
    struct ol_lc_rule *ru = &c->rules[c->nrules - 1];
    if (strcmp(rel, "ID") == 0) {
        const char *s = text;
        size_t n = len;
        ol_lc_trim(&s, &n);
        if (n > OL_LC_ID_MAX)
            return ol_lc_fail(c, OL_S3_InvalidArgument,
                              "ID length should not exceed allowed limit of 255");
        ru->id = n ? ol_lc_keep(c, s, n) : NULL;
        return n && !ru->id ? ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed) : 0;
    }
    if (strcmp(rel, "Status") == 0) {
        const char *s = text;
        size_t n = len;
        ol_lc_trim(&s, &n);
        if (n == 7 && memcmp(s, "Enabled", 7) == 0)
            ru->enabled = true;
        else if (!(n == 8 && memcmp(s, "Disabled", 8) == 0))
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        ru->has_status = true;
        return 0;
    }
    if (strcmp(rel, "Prefix") == 0 || strcmp(rel, "Filter/Prefix") == 0 ||
        strcmp(rel, "Filter/And/Prefix") == 0) {
        /* Prefixes are taken as they are: a space may be part of a key. */
        if (len > OL_LC_PREFIX_MAX)
            return ol_lc_fail(c, OL_S3_InvalidArgument, "The prefix is too long.");
        ru->legacy_prefix = ru->legacy_prefix || rel[0] == 'P';
        ru->filter_prefix = ru->filter_prefix || strcmp(rel, "Filter/Prefix") == 0;
        ru->prefix = ol_lc_keep(c, text, len);
        ru->prefix_len = len;
        return ru->prefix ? 0 : ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    }
    bool tkey = strcmp(rel, "Filter/Tag/Key") == 0 || strcmp(rel, "Filter/And/Tag/Key") == 0;
    if (tkey || strcmp(rel, "Filter/Tag/Value") == 0 || strcmp(rel, "Filter/And/Tag/Value") == 0) {
        if (ru->tag_overflow || ru->ntags == 0)
            return 0;
        size_t i = ru->ntags - 1;
        /* Tag keys and values are compared with the object's as they are. */
        if (len > (tkey ? OL_LC_TAG_KEY_MAX : OL_LC_TAG_VALUE_MAX) * 4u ||
            (tkey && len == 0))
            return ol_lc_fail(c, OL_S3_InvalidArgument,
                              tkey ? "The TagKey you have provided is invalid"
                                   : "The TagValue you have provided is invalid");
        /* The object tag rules (tagging.c): a filter no tag can match, or
         * one holding a NUL (which would cut the stored document short), is
         * refused.  Amazon S3 itself may put "aws:" tags on objects, so a
         * filter may name one. */
        const char *tmsg = ol_s3_tag_check(text, len, tkey, true);
        if (tmsg)
            return ol_lc_fail(c, OL_S3_InvalidArgument, tmsg);
        const char *kept = ol_lc_keep(c, text, len);
        if (!kept)
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        if (tkey) {
            ru->tag_key[i] = kept;
            ru->tag_key_len[i] = len;
        } else {
            ru->tag_val[i] = kept;
            ru->tag_val_len[i] = len;
        }
        return 0;
    }
    bool sgt = strcmp(rel, "Filter/ObjectSizeGreaterThan") == 0 ||
               strcmp(rel, "Filter/And/ObjectSizeGreaterThan") == 0;
    if (sgt || strcmp(rel, "Filter/ObjectSizeLessThan") == 0 ||
        strcmp(rel, "Filter/And/ObjectSizeLessThan") == 0) {
        int64_t v = 0;
        int64_t *dst = sgt ? &ru->size_gt : &ru->size_lt;
        /* Not a Long fails the schema; a Long out of range is refused the
         * way Amazon S3 refuses it (InvalidRequest, naming the range). */
        if (ol_lc_long(text, len, &v) != 0)
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        if (v < (sgt ? 0 : 1) || v > OL_LC_SIZE_MAX)
            return ol_lc_fail(c, OL_S3_InvalidRequest,
                              sgt ? "'ObjectSizeGreaterThan' should be between 0 and "
                                    "1099511627776000."
                                  : "'ObjectSizeLessThan' should be between 1 and "
                                    "1099511627776000.");
        ru->size_twice = ru->size_twice || *dst >= 0;
        *dst = v;
        return 0;
    }
    if (strcmp(rel, "Expiration/Days") == 0) {
        ru->exp_days = ol_lc_positive(text, len);
        return ru->exp_days > 0 ? 0
                                : ol_lc_fail(c, OL_S3_InvalidArgument,
                                             "'Days' for Expiration action must be a positive "
                                             "integer");
    }
    if (strcmp(rel, "Expiration/Date") == 0) {
        bool midnight = false;
        if (ol_lc_parse_date(text, len, &ru->exp_date_ns, &midnight) != 0)
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        if (!midnight)
            return ol_lc_fail(c, OL_S3_InvalidArgument, "'Date' must be at midnight GMT");
        ru->has_date = true;
        return 0;
    }
    if (strcmp(rel, "Expiration/ExpiredObjectDeleteMarker") == 0) {
        const char *s = text;
        size_t n = len;
        ol_lc_trim(&s, &n);
        if (n == 4 && memcmp(s, "true", 4) == 0)
            ru->exp_marker = 1;
        else if (n == 5 && memcmp(s, "false", 5) == 0)
            ru->exp_marker = 0;
        else
            return ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
        return 0;
    }
    if (strcmp(rel, "NoncurrentVersionExpiration/NoncurrentDays") == 0) {
        ru->nc_days = ol_lc_positive(text, len);
        return ru->nc_days > 0 ? 0
                               : ol_lc_fail(c, OL_S3_InvalidArgument,
                                            "'NoncurrentDays' for NoncurrentVersionExpiration "
                                            "action must be a positive integer");
    }
    if (strcmp(rel, "NoncurrentVersionExpiration/NewerNoncurrentVersions") == 0) {
        ru->nc_newer = ol_lc_positive(text, len);
        return ru->nc_newer > 0 ? 0
                                : ol_lc_fail(c, OL_S3_InvalidArgument,
                                             "'NewerNoncurrentVersions' must be a positive "
                                             "integer");
    }
    if (strcmp(rel, "AbortIncompleteMultipartUpload/DaysAfterInitiation") == 0) {
        ru->abort_days = ol_lc_positive(text, len);
        return ru->abort_days > 0 ? 0
                                  : ol_lc_fail(c, OL_S3_InvalidArgument,
                                               "'DaysAfterInitiation' for "
                                               "AbortIncompleteMultipartUpload action must be a "
                                               "positive integer");
    }
    return 0;
}

/* S3 gives a rule stored without an ID one of its own (a base64 text of a
 * random UUID), kept with the configuration and returned by Get.  The
 * stored document is written after the parse, so the ID is assigned once,
 * at Put. */
static void ol_lc_assign_ids(struct ol_lc_cfg *c)
{
    for (size_t i = 0; i < c->nrules; i++) {
        struct ol_lc_rule *ru = &c->rules[i];
        if (ru->id)
            continue;
        uint8_t b[16];
        if (ol_random(b, sizeof(b)) < 0) {
            /* No entropy: the clock and the rule's place still make the
             * ID unique within this configuration. */
            uint64_t t = (uint64_t)ol_wall_ns() ^ (uint64_t)i;
            for (size_t k = 0; k < sizeof(b); k++)
                b[k] = (uint8_t)(t >> (8 * (k % 8))) ^ (uint8_t)(k * 37u + i);
        }
        b[6] = (uint8_t)((b[6] & 0x0F) | 0x40); /* version 4 */
        b[8] = (uint8_t)((b[8] & 0x3F) | 0x80); /* variant 1 */
        char uuid[37];
        snprintf(uuid, sizeof(uuid),
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        _Static_assert(sizeof(ru->gen_id) > 4 * ((sizeof(uuid) - 1 + 2) / 3),
                       "gen_id holds the base64 of a UUID text");
        size_t n = ol_b64_encode((const uint8_t *)uuid, sizeof(uuid) - 1, ru->gen_id);
        ru->gen_id[n] = '\0';
        ru->id = ru->gen_id;
    }
}

/* Parses and validates a LifecycleConfiguration document.  0 with *out;
 * -EINVAL with *out holding the verdict (code, msg); -ENOMEM. */
static int ol_lc_parse(const char *doc, size_t len, struct ol_lc_cfg **out)
{
    struct ol_lc_cfg *c = calloc(1, sizeof(*c));
    int ret = 0;
    *out = NULL;
    if (!c) {
        ret = -ENOMEM;
        goto out;
    }
    /* Kept texts (ID, Prefix) come from elements of at least 9 bytes. */
    c->arena_cap = len + len / 8 + 16;
    c->arena = malloc(c->arena_cap);
    c->rules = calloc(OL_LC_MAX_RULES, sizeof(*c->rules));
    if (!c->arena || !c->rules) {
        ret = -ENOMEM;
        goto out;
    }
    int prc = ol_xml_parse(doc, len, ol_lc_on_elem, ol_lc_on_text, c);
    if (prc == -ENOMEM) {
        ret = -ENOMEM;
        goto out;
    }
    if (!c->msg && (prc != 0 || c->nrules == 0))
        ol_lc_fail(c, OL_S3_MalformedXML, ol_lc_malformed);
    if (c->msg)
        ret = -EINVAL;
    else
        ol_lc_assign_ids(c);
    *out = c;
    c = NULL;
out:
    ol_lc_free(c);
    return ret;
}

static void ol_lc_write(const struct ol_lc_cfg *c, struct ol_xml *x)
{
    ol_xml_begin_doc(x, "LifecycleConfiguration");
    for (size_t i = 0; i < c->nrules; i++) {
        const struct ol_lc_rule *ru = &c->rules[i];
        ol_xml_open(x, "Rule");
        if (ru->id)
            ol_xml_str(x, "ID", ru->id);
        if (ru->legacy_prefix) {
            ol_xml_text(x, "Prefix", ru->prefix, ru->prefix_len);
        } else {
            ol_xml_open(x, "Filter");
            if (ru->and_filter)
                ol_xml_open(x, "And");
            bool sized = ru->size_gt >= 0 || ru->size_lt >= 0;
            if (ru->prefix_len || (ru->and_filter && ru->ntags == 0 && !sized))
                ol_xml_text(x, "Prefix", ru->prefix, ru->prefix_len);
            for (size_t t = 0; t < ru->ntags; t++) {
                ol_xml_open(x, "Tag");
                ol_xml_text(x, "Key", ru->tag_key[t], ru->tag_key_len[t]);
                ol_xml_text(x, "Value", ru->tag_val[t], ru->tag_val_len[t]);
                ol_xml_close(x);
            }
            /* Inside <And> or directly in <Filter>, as given. */
            if (ru->size_gt >= 0)
                ol_xml_u64(x, "ObjectSizeGreaterThan", (uint64_t)ru->size_gt);
            if (ru->size_lt >= 0)
                ol_xml_u64(x, "ObjectSizeLessThan", (uint64_t)ru->size_lt);
            if (ru->and_filter)
                ol_xml_close(x);
            ol_xml_close(x);
        }
        ol_xml_str(x, "Status", ru->enabled ? "Enabled" : "Disabled");
        if (ru->has_expiration) {
            ol_xml_open(x, "Expiration");
            if (ru->exp_days > 0)
                ol_xml_u64(x, "Days", (uint64_t)ru->exp_days);
            if (ru->has_date) {
                char d[32];
                ol_s3_iso_date(ru->exp_date_ns, d);
                ol_xml_str(x, "Date", d);
            }
            if (ru->exp_marker >= 0)
                ol_xml_bool(x, "ExpiredObjectDeleteMarker", ru->exp_marker == 1);
            ol_xml_close(x);
        }
        if (ru->has_noncurrent) {
            ol_xml_open(x, "NoncurrentVersionExpiration");
            ol_xml_u64(x, "NoncurrentDays", (uint64_t)ru->nc_days);
            if (ru->nc_newer > 0)
                ol_xml_u64(x, "NewerNoncurrentVersions", (uint64_t)ru->nc_newer);
            ol_xml_close(x);
        }
        if (ru->has_abort) {
            ol_xml_open(x, "AbortIncompleteMultipartUpload");
            ol_xml_u64(x, "DaysAfterInitiation", (uint64_t)ru->abort_days);
            ol_xml_close(x);
        }
        ol_xml_close(x);
    }
    ol_xml_end_doc(x);
}

static int ol_lc_parse_doc(const char *doc, size_t len, void **cfg, enum ol_s3_code *code,
                           const char **msg)
{
    struct ol_lc_cfg *c = NULL;
    int ret = ol_lc_parse(doc, len, &c);
    if (ret == -EINVAL && c) {
        *code = c->code;
        *msg = c->msg;
    }
    *cfg = c;
    return ret;
}

static void ol_lc_write_doc(const void *cfg, struct ol_xml *x)
{
    ol_lc_write(cfg, x);
}

static void ol_lc_free_doc(void *cfg)
{
    ol_lc_free(cfg);
}

static const struct ol_s3_setting_doc ol_lc_doc = {
    .name = OL_LC_SETTING,
    .doc_max = OL_LC_DOC_MAX,
    .stored_max = OL_LC_STORED_MAX,
    .missing = OL_S3_NoSuchLifecycleConfiguration,
    .missing_msg = "The lifecycle configuration does not exist",
    .parse = ol_lc_parse_doc,
    .write = ol_lc_write_doc,
    .free = ol_lc_free_doc,
};

/* ---- handlers ---- */

int ol_s3_put_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_setting_put(r, &ol_lc_doc);
}

int ol_s3_get_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_setting_get(r, &ol_lc_doc);
}

int ol_s3_delete_bucket_lifecycle(struct ol_s3_req *r)
{
    return ol_s3_setting_delete(r, &ol_lc_doc);
}

/* ---- the worker ---- */

struct ol_lc_keys {
    char **keys; /* malloc'ed copies */
    size_t *lens;
    char (*vids)[OL_STORE_VID_MAX]; /* noncurrent candidates: the version */
    bool *lone;                     /* ... and whether it is a lone delete marker */
    size_t n, cap;
};

static int ol_lc_keys_add(struct ol_lc_keys *k, const char *key, size_t len)
{
    if (k->n >= k->cap)
        return -ENOSPC;
    char *copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, key, len);
    copy[len] = 0;
    k->keys[k->n] = copy;
    k->lens[k->n++] = len;
    return 0;
}

static void ol_lc_keys_clear(struct ol_lc_keys *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->keys[i]);
    k->n = 0;
}

/* Whether an object (or version) of this size passes the rule's size
 * bounds, both exclusive as in Amazon S3. */
static bool ol_lc_size_match(const struct ol_lc_rule *ru, uint64_t size)
{
    if (ru->size_gt >= 0 && size <= (uint64_t)ru->size_gt)
        return false;
    if (ru->size_lt >= 0 && size >= (uint64_t)ru->size_lt)
        return false;
    return true;
}

/* Whether the version rd holds carries every tag the rule requires. */
static bool ol_lc_tags_match(const struct ol_lc_rule *ru, const struct ol_obj_reader *rd)
{
    for (size_t i = 0; i < ru->ntags; i++)
        if (!ol_s3_tagging_has(rd, ru->tag_key[i], ru->tag_key_len[i], ru->tag_val[i],
                               ru->tag_val_len[i]))
            return false;
    return true;
}

/* Whether candidate i's version (k->vids[i]) still exists and carries every
 * tag the rule requires (and, read anyway, is of a size the rule covers). */
static bool ol_lc_version_tags_match(struct ol_obj *st, const char *bucket,
                                     const struct ol_lc_rule *ru, const struct ol_lc_keys *k,
                                     size_t i)
{
    struct ol_obj_reader *rd = NULL;
    if (ol_obj_read_open_v(st, bucket, k->keys[i], k->lens[i], k->vids[i], &rd) != 0)
        return false;
    bool match = ol_lc_size_match(ru, ol_obj_read_info(rd)->size) && ol_lc_tags_match(ru, rd);
    ol_obj_read_close(rd);
    return match;
}

/* Drops, from candidates [from, k->n), those whose tags do not match the
 * rule's (a lone delete marker has none), keeping the others in order.  The
 * current object is read when k->vids is not used (vids false), else the
 * version named.  Called with no iterator open. */
static int ol_lc_tag_filter(struct ol_obj *st, const char *bucket, const struct ol_lc_rule *ru,
                            struct ol_lc_keys *k, size_t from, bool vids)
{
    size_t out = from;
    int ret = 0;
    for (size_t i = from; i < k->n; i++) {
        bool keep = false;
        if (ret == 0 && !(vids && k->lone[i])) {
            struct ol_obj_reader *rd = NULL;
            int rc = ol_obj_read_open_v(st, bucket, k->keys[i], k->lens[i],
                                          vids ? k->vids[i] : NULL, &rd);
            if (rc == 0) {
                keep = ol_lc_tags_match(ru, rd);
                ol_obj_read_close(rd);
            } else if (rc != -OL_ENOKEY && rc != -OL_ENOVERSION && rc != -OL_EMARKER) {
                ret = rc;
            }
        }
        if (!keep) {
            free(k->keys[i]);
            continue;
        }
        k->keys[out] = k->keys[i];
        k->lens[out] = k->lens[i];
        if (vids) {
            memmove(k->vids[out], k->vids[i], OL_STORE_VID_MAX);
            k->lone[out] = k->lone[i];
        }
        out++;
    }
    k->n = out;
    return ret;
}

static bool ol_lc_stopping(void)
{
    struct ol_loop *l = ol_loop_current();
    return l && ol_loop_stopping(l);
}

/* The Expiration cutoff of a rule: objects modified at or before it expire.
 * INT64_MIN when the rule expires nothing now. */
/* now - days * day, or INT64_MIN when that is before the epoch (nothing is
 * that old; a large Days must not overflow). */
static int64_t ol_lc_days_ago(int64_t now_ns, int64_t days, int64_t day_ns)
{
    if (days > now_ns / day_ns)
        return INT64_MIN;
    return now_ns - days * day_ns;
}

static int64_t ol_lc_cutoff(const struct ol_lc_rule *ru, int64_t now_ns, int64_t day_ns)
{
    if (!ru->enabled || !ru->has_expiration)
        return INT64_MIN;
    if (ru->exp_days > 0)
        return ol_lc_days_ago(now_ns, ru->exp_days, day_ns);
    if (ru->has_date && now_ns >= ru->exp_date_ns)
        return INT64_MAX;
    return INT64_MIN;
}

/* Expires the rule's objects: collects up to the remaining action budget of
 * keys, a batch at a time with the iterator closed in between, then deletes
 * them.  Returns the number of objects deleted, or an error. */
static int ol_lc_expire(struct ol_obj *st, const char *bucket, const struct ol_lc_rule *ru,
                        int64_t cutoff, struct ol_lc_keys *k, size_t budget)
{
    char *from = NULL;
    size_t from_len = ru->prefix_len;
    bool inclusive = true;
    size_t scanned = 0;
    int ret = 0, deleted = 0;
    from = malloc(OL_LC_PREFIX_MAX + 1025 + 1);
    if (!from) {
        ret = -ENOMEM;
        goto out;
    }
    memcpy(from, ru->prefix, ru->prefix_len);
    k->n = 0;
    bool done = false;
    /* Each round examines one batch; the scan limit bounds the rounds. */
    while (!done && scanned < OL_LC_MAX_SCAN && k->n < budget && k->n < k->cap) {
        struct ol_obj_iter *it = NULL;
        size_t batch_from = k->n;
        ret = ol_obj_iter_open(st, bucket, from, from_len, inclusive, &it);
        if (ret < 0)
            goto out;
        size_t in_batch = 0;
        for (; in_batch < OL_LC_SCAN_BATCH && k->n < budget; in_batch++) {
            const char *key;
            size_t kl;
            struct ol_obj_info info;
            int rc = ol_obj_iter_next(it, &key, &kl, &info);
            if (rc == 1 || (rc == 0 && (kl < ru->prefix_len ||
                                        memcmp(key, ru->prefix, ru->prefix_len) != 0))) {
                done = true; /* past the prefix: keys are in byte order */
                break;
            }
            if (rc < 0) {
                ret = rc;
                break;
            }
            if (kl > 1024) {
                ret = -ENAMETOOLONG;
                break;
            }
            memcpy(from, key, kl);
            from_len = kl;
            inclusive = false;
            if (info.mtime_ns <= cutoff && ol_lc_size_match(ru, info.size)) {
                rc = ol_lc_keys_add(k, key, kl);
                if (rc < 0) {
                    ret = rc == -ENOSPC ? 0 : rc;
                    done = true;
                    break;
                }
            }
        }
        ol_obj_iter_close(it);
        scanned += in_batch;
        if (ret == 0 && ru->ntags)
            ret = ol_lc_tag_filter(st, bucket, ru, k, batch_from, false);
        if (ret < 0)
            goto out;
        /* Keep loop 0's connections served between batches. */
        ol_fiber_yield();
        if (ol_lc_stopping())
            goto out;
    }
    for (size_t i = 0; i < k->n && !ol_lc_stopping(); i++) {
        /* The key may have been overwritten since it was examined: look at
         * it again just before deleting (a narrow race remains: the store
         * has no delete-if-unchanged). */
        struct ol_obj_reader *rd = NULL;
        int rc = ol_obj_read_open(st, bucket, k->keys[i], k->lens[i], &rd);
        if (rc == 0) {
            /* Its tags (and, overwritten, its size) may have changed too. */
            const struct ol_obj_info *info = ol_obj_read_info(rd);
            bool expired = info->mtime_ns <= cutoff && ol_lc_size_match(ru, info->size) &&
                           ol_lc_tags_match(ru, rd);
            ol_obj_read_close(rd);
            if (!expired)
                continue;
            rc = ol_obj_delete(st, bucket, k->keys[i], k->lens[i]);
        }
        if (rc == -OL_ENOKEY)
            continue;
        if (rc < 0) {
            ret = rc;
            goto out;
        }
        deleted++;
    }
out:
    ol_lc_keys_clear(k);
    free(from);
    return ret < 0 ? ret : deleted;
}

/* ---- noncurrent versions and expired delete markers ----
 *
 * A key's versions come newest first; version i > 0 became noncurrent when
 * version i - 1 was written, so its noncurrent age is counted from that
 * version's mtime.  NewerNoncurrentVersions keeps that many of the newest
 * noncurrent versions whatever their age.  A key whose only version is a
 * delete marker (an "expired object delete marker") is removed when the rule
 * says ExpiredObjectDeleteMarker true, or, with Expiration Days, once the
 * marker is that old (as Amazon S3 does). */

struct ol_lc_scan {
    char key[1025]; /* the key being examined */
    size_t key_len;
    size_t pos; /* its versions examined so far */
    char last_vid[OL_STORE_VID_MAX];
    int64_t prev_mtime_ns;
    bool first_marker;
    char first_vid[OL_STORE_VID_MAX];
    int64_t first_mtime_ns;
};

static int ol_lc_vadd(struct ol_lc_keys *k, const char *key, size_t len, const char *vid, bool lone)
{
    int rc = ol_lc_keys_add(k, key, len);
    if (rc == 0) {
        snprintf(k->vids[k->n - 1], OL_STORE_VID_MAX, "%s", vid);
        k->lone[k->n - 1] = lone;
    }
    return rc;
}

/* The key's examination is over: a lone delete marker old enough is a
 * candidate. */
static int ol_lc_key_done(struct ol_lc_scan *s, struct ol_lc_keys *k, int64_t marker_cutoff)
{
    if (s->pos == 1 && s->first_marker && s->first_mtime_ns <= marker_cutoff)
        return ol_lc_vadd(k, s->key, s->key_len, s->first_vid, true);
    return 0;
}

/* True when vid is (still) the key's latest version: a version that became
 * the latest after the scan (its newer versions deleted) must stay. */
static bool ol_lc_is_latest(struct ol_obj *st, const char *bucket, const char *key, size_t kl,
                            const char *vid)
{
    char cur[OL_STORE_VID_MAX] = "";
    struct ol_obj_reader *rd = NULL;
    int rc = ol_obj_read_open_v(st, bucket, key, kl, NULL, &rd);
    if (rc == 0) {
        ol_obj_read_vid(rd, cur);
        ol_obj_read_close(rd);
        return strcmp(cur, vid) == 0;
    }
    int64_t mt = 0;
    if (rc == -OL_ENOKEY && ol_obj_latest_marker(st, bucket, key, kl, cur, &mt) == 1)
        return strcmp(cur, vid) == 0;
    /* Unknown state: keep the version. */
    return rc != -OL_ENOKEY;
}

/* Collects (up to budget) the rule's noncurrent versions and lone markers
 * that have expired, a batch of versions per snapshot, then removes them
 * permanently.  Returns the number removed, or an error. */
static int ol_lc_noncurrent(struct ol_obj *st, const char *bucket, const struct ol_lc_rule *ru,
                            int64_t nc_cutoff, int64_t marker_cutoff, struct ol_lc_keys *k,
                            size_t budget)
{
    struct ol_lc_scan *s = calloc(1, sizeof(*s));
    size_t scanned = 0;
    int ret = 0, removed = 0;
    bool done = false, have_key = false;
    k->n = 0;
    if (!s) {
        ret = -ENOMEM;
        goto out;
    }
    /* Each round reads one batch of versions; a round that stops inside a
     * key seeks back to it and skips past the last version examined, so no
     * snapshot is held across the yield. */
    while (!done && scanned < OL_LC_MAX_SCAN && k->n < budget && k->n < k->cap) {
        struct ol_obj_viter *it = NULL;
        size_t batch_from = k->n;
        ret = ol_obj_viter_open(st, bucket, &it);
        if (ret < 0)
            goto out;
        if (have_key)
            ret = ol_obj_viter_seek(it, s->key, s->key_len);
        else
            ret = ol_obj_viter_seek(it, ru->prefix, ru->prefix_len);
        bool skipping = have_key;
        size_t in_batch = 0, skipped = 0;
        while (ret == 0 && in_batch < OL_LC_SCAN_BATCH && skipped < OL_LC_MAX_SCAN &&
               k->n < budget) {
            const char *key;
            size_t kl;
            struct ol_version_info vi;
            int rc = ol_obj_viter_next(it, &key, &kl, &vi);
            if (rc < 0) {
                ret = rc;
                break;
            }
            bool same = rc == 0 && have_key && kl == s->key_len && memcmp(key, s->key, kl) == 0;
            if (skipping && same) {
                /* Versions already examined before the yield. */
                skipping = strcmp(vi.vid, s->last_vid) != 0;
                skipped++;
                continue;
            }
            skipping = false;
            in_batch++;
            if (!same) {
                if (have_key) {
                    have_key = false;
                    if (ol_lc_key_done(s, k, marker_cutoff) < 0)
                        break; /* -ENOSPC: the batch is full */
                }
                if (rc == 1 || kl < ru->prefix_len ||
                    memcmp(key, ru->prefix, ru->prefix_len) != 0) {
                    done = true; /* past the prefix: keys are in byte order */
                    break;
                }
                if (kl >= sizeof(s->key)) {
                    ret = -ENAMETOOLONG;
                    break;
                }
                memcpy(s->key, key, kl);
                s->key_len = kl;
                s->pos = 0;
                have_key = true;
                s->first_marker = vi.is_marker;
                s->first_mtime_ns = vi.info.mtime_ns;
                snprintf(s->first_vid, sizeof(s->first_vid), "%s", vi.vid);
            } else if (nc_cutoff != INT64_MIN && s->prev_mtime_ns <= nc_cutoff &&
                       s->pos > (size_t)ru->nc_newer &&
                       (vi.is_marker || ol_lc_size_match(ru, vi.info.size))) {
                /* Noncurrent since the newer version's write, long enough,
                 * and of a size the rule covers (a version's own size; a
                 * noncurrent delete marker has none and is not filtered). */
                if (ol_lc_vadd(k, key, kl, vi.vid, false) < 0)
                    break;
            }
            snprintf(s->last_vid, sizeof(s->last_vid), "%s", vi.vid);
            s->prev_mtime_ns = vi.info.mtime_ns;
            s->pos++;
        }
        ol_obj_viter_close(it);
        scanned += in_batch + skipped;
        if (ret == 0 && ru->ntags)
            ret = ol_lc_tag_filter(st, bucket, ru, k, batch_from, true);
        if (ret < 0)
            goto out;
        ol_fiber_yield();
        if (ol_lc_stopping())
            goto out;
    }
    for (size_t i = 0; i < k->n && !ol_lc_stopping(); i++) {
        /* A lone marker must still be the latest version (a newer write
         * makes removing it harmless; nothing older can appear); any other
         * candidate must not have become the latest since the scan (its
         * newer versions deleted), or its removal would change what a GET
         * returns. */
        bool latest = ol_lc_is_latest(st, bucket, k->keys[i], k->lens[i], k->vids[i]);
        if (!k->lone[i] && latest)
            continue;
        /* Its tags may have changed since the scan (PutObjectTagging with
         * its versionId): look at them again just before removing it, as
         * the current-version expiration does (the same narrow race
         * remains: the store has no delete-if-unchanged). */
        if (!k->lone[i] && ru->ntags && !ol_lc_version_tags_match(st, bucket, ru, k, i))
            continue;
        int rc = ol_obj_delete_v(st, bucket, k->keys[i], k->lens[i], k->vids[i], NULL);
        if (rc == -OL_ENOVERSION || rc == -OL_ENOKEY)
            continue;
        if (rc < 0) {
            ret = rc;
            goto out;
        }
        removed++;
    }
out:
    ol_lc_keys_clear(k);
    free(s);
    return ret < 0 ? ret : removed;
}

struct ol_lc_uploads {
    const struct ol_lc_rule *ru;
    int64_t cutoff;
    char (*ids)[40];
    size_t n, cap;
};

static int ol_lc_upload_fn(void *ctx, const struct ol_upload_info *u)
{
    struct ol_lc_uploads *a = ctx;
    if (a->n >= a->cap)
        return 1;
    if (u->key_len < a->ru->prefix_len || memcmp(u->key, a->ru->prefix, a->ru->prefix_len) != 0)
        return 0;
    if (u->ctime_ns > a->cutoff)
        return 0;
    memcpy(a->ids[a->n++], u->upload_id, 40);
    return 0;
}

/* Aborts the rule's old uploads (ids collected first, the listing closed). */
static int ol_lc_abort_uploads(struct ol_obj *st, const char *bucket, const struct ol_lc_rule *ru,
                               int64_t now_ns, int64_t day_ns, size_t budget)
{
    struct ol_lc_uploads a = {
        .ru = ru, .cutoff = ol_lc_days_ago(now_ns, ru->abort_days, day_ns), .cap = budget};
    int ret = 0, aborted = 0;
    if (budget == 0 || a.cutoff == INT64_MIN)
        goto out;
    a.ids = calloc(budget, sizeof(*a.ids));
    if (!a.ids) {
        ret = -ENOMEM;
        goto out;
    }
    ret = ol_obj_upload_list(st, bucket, ol_lc_upload_fn, &a);
    if (ret < 0)
        goto out;
    ret = 0;
    for (size_t i = 0; i < a.n && !ol_lc_stopping(); i++) {
        a.ids[i][39] = 0;
        int rc = ol_obj_upload_abort(st, bucket, a.ids[i]);
        if (rc == -OL_ENOUPLOAD)
            continue;
        if (rc < 0) {
            ret = rc;
            goto out;
        }
        aborted++;
    }
out:
    free(a.ids);
    return ret < 0 ? ret : aborted;
}

/* Applies one bucket's rules once.  Returns objects and uploads removed. */
static int ol_lc_bucket(const struct ol_s3_ctx *ctx, const char *bucket, int64_t now_ns,
                        int64_t day_ns, struct ol_lc_keys *k)
{
    struct ol_obj *st = ctx->obj;
    char *doc = NULL;
    size_t len = 0;
    struct ol_lc_cfg *c = NULL;
    int ret = ol_s3_setting_read(ctx, bucket, &ol_lc_doc, &doc, &len);
    if (ret < 0)
        goto out;
    ret = ol_lc_parse(doc, len, &c);
    if (ret < 0)
        goto out;
    enum ol_versioning vstate = OL_VERSIONING_OFF;
    ret = ol_obj_versioning_get(st, bucket, &vstate);
    if (ret < 0)
        goto out;
    size_t budget = OL_LC_MAX_ACTIONS;
    int removed = 0;
    for (size_t i = 0; i < c->nrules && budget > 0 && !ol_lc_stopping(); i++) {
        const struct ol_lc_rule *ru = &c->rules[i];
        if (!ru->enabled)
            continue;
        int64_t cutoff = ol_lc_cutoff(ru, now_ns, day_ns);
        if (cutoff != INT64_MIN) {
            int n = ol_lc_expire(st, bucket, ru, cutoff, k, budget);
            if (n < 0) {
                ret = n;
                goto out;
            }
            budget -= (size_t)n;
            removed += n;
        }
        if (ru->has_abort) {
            int n = ol_lc_abort_uploads(st, bucket, ru, now_ns, day_ns, budget);
            if (n < 0) {
                ret = n;
                goto out;
            }
            budget -= (size_t)n;
            removed += n;
        }
        int64_t nc_cutoff =
            ru->has_noncurrent ? ol_lc_days_ago(now_ns, ru->nc_days, day_ns) : INT64_MIN;
        int64_t marker_cutoff = INT64_MIN;
        if (ru->exp_marker == 1)
            marker_cutoff = INT64_MAX;
        else if (ru->exp_days > 0)
            marker_cutoff = cutoff;
        /* Only a bucket that has had versioning has versions to look at. */
        if (vstate != OL_VERSIONING_OFF && budget > 0 &&
            (nc_cutoff != INT64_MIN || marker_cutoff != INT64_MIN)) {
            int n = ol_lc_noncurrent(st, bucket, ru, nc_cutoff, marker_cutoff, k, budget);
            if (n < 0) {
                ret = n;
                goto out;
            }
            budget -= (size_t)n;
            removed += n;
        }
    }
    ret = removed;
out:
    ol_lc_free(c);
    free(doc);
    return ret;
}

struct ol_lc_buckets {
    char (*names)[64];
    size_t n, cap;
};

static int ol_lc_bucket_fn(void *ctx, const struct ol_bucket_info *b)
{
    struct ol_lc_buckets *bl = ctx;
    if (bl->n >= OL_LC_MAX_BUCKETS)
        return 1;
    if (bl->n == bl->cap) {
        size_t cap = bl->cap ? bl->cap * 2 : 64;
        void *p = realloc(bl->names, cap * sizeof(*bl->names));
        if (!p)
            return -ENOMEM;
        bl->names = p;
        bl->cap = cap;
    }
    memcpy(bl->names[bl->n++], b->name, 64);
    return 0;
}

/* One pass over every bucket.  Returns true when some bucket used its whole
 * budget (more work is probably waiting). */
static bool ol_lc_pass(struct ol_s3_ctx *ctx, struct ol_lc_keys *k)
{
    struct ol_lc_buckets bl = {0};
    bool more = false;
    int rc = ol_obj_bucket_list(ctx->obj, ol_lc_bucket_fn, &bl);
    if (rc < 0) {
        ol_log_limited(OL_LOG_WARN, "lifecycle: listing buckets: %s", ol_strerror(rc));
        goto out;
    }
    int64_t day_ns = ctx->cfg->lifecycle_day_sec * 1000000000LL;
    for (size_t i = 0; i < bl.n && !ol_lc_stopping(); i++) {
        bl.names[i][63] = 0;
        rc = ol_lc_bucket(ctx, bl.names[i], ol_wall_ns(), day_ns, k);
        if (rc > 0)
            ol_debug("lifecycle: bucket %s: %d objects/uploads removed", bl.names[i], rc);
        if (rc >= OL_LC_MAX_ACTIONS)
            more = true;
        else if (rc < 0 && rc != -OL_ENOCONFIG && rc != -OL_ENOBUCKET)
            ol_log_limited(OL_LOG_WARN, "lifecycle: bucket %s: %s", bl.names[i], ol_strerror(rc));
        ol_fiber_yield();
    }
out:
    free(bl.names);
    return more;
}

void ol_s3_lifecycle_fiber(void *arg)
{
    struct ol_s3_ctx *ctx = arg;
    /* Lifecycle rules live in the single-drive store's bucket settings;
     * erasure-coded drives have none (server.c does not start this fiber
     * for them, and it must never run without a store). */
    if (!ctx->obj)
        return;
    struct ol_lc_keys k = {0};
    k.cap = OL_LC_MAX_ACTIONS;
    k.keys = calloc(k.cap, sizeof(*k.keys));
    k.lens = calloc(k.cap, sizeof(*k.lens));
    k.vids = calloc(k.cap, sizeof(*k.vids));
    k.lone = calloc(k.cap, sizeof(*k.lone));
    if (!k.keys || !k.lens || !k.vids || !k.lone) {
        ol_warn("lifecycle: out of memory; lifecycle rules will not be applied");
        goto out;
    }
    uint64_t interval = (uint64_t)ctx->cfg->lifecycle_interval_ms;
    uint64_t next = ol_now_ms() + interval;
    /* Ends when the loop stops; each round sleeps one short slice, so the
     * stop flag is seen within OL_LC_SLICE_MS. */
    while (!ol_lc_stopping()) {
        uint64_t now = ol_now_ms();
        if (now < next) {
            uint64_t wait = next - now;
            ol_io_sleep_ms(wait < OL_LC_SLICE_MS ? (unsigned)wait : OL_LC_SLICE_MS);
            continue;
        }
        /* A pass cut short by its budget goes on after a short pause, so a
         * large expiry is not spread over many intervals. */
        bool more = ol_lc_pass(ctx, &k);
        next = ol_now_ms() + (more ? OL_LC_SLICE_MS : interval);
    }
out:
    free(k.keys);
    free(k.lens);
    free(k.vids);
    free(k.lone);
}
