/* Small S3 helpers shared by the handlers: date formats and bucket names. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "s3/s3.h"

struct ol_s3_civil {
    int64_t year;
    unsigned month; /* 1..12 */
    unsigned day;   /* 1..31 */
    unsigned hour, min, sec, msec;
    unsigned wday;  /* 0 = Sunday */
};

static int64_t ol_s3_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Splits a Unix time in nanoseconds into UTC calendar fields.  The date part
 * converts a day count to the proleptic Gregorian calendar through 400-year
 * eras (146097 days each), with years starting in March so that the leap day
 * falls at the end; no library call, so no time zone or locale state. */
static void ol_s3_civil_from_ns(int64_t ns, struct ol_s3_civil *c)
{
    int64_t ms = ol_s3_floor_div(ns, 1000000);
    int64_t secs = ol_s3_floor_div(ms, 1000);
    int64_t days = ol_s3_floor_div(secs, 86400);
    int64_t sod = secs - days * 86400;

    c->msec = (unsigned)(ms - secs * 1000);
    c->hour = (unsigned)(sod / 3600);
    c->min = (unsigned)(sod / 60 % 60);
    c->sec = (unsigned)(sod % 60);
    /* 1970-01-01 was a Thursday. */
    c->wday = (unsigned)(((days % 7) + 7 + 4) % 7);

    int64_t z = days + 719468; /* days since 0000-03-01 */
    int64_t era = ol_s3_floor_div(z, 146097);
    int64_t doe = z - era * 146097;                                      /* 0..146096 */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* 0..399 */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* 0..365 */
    int64_t mp = (5 * doy + 2) / 153;                                    /* 0..11, March = 0 */
    c->day = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    c->month = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    c->year = yoe + era * 400 + (c->month <= 2 ? 1 : 0);
}

void ol_s3_http_date(int64_t ns, char out[32])
{
    static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct ol_s3_civil c;
    ol_s3_civil_from_ns(ns, &c);
    OL_ASSERT(c.month >= 1 && c.month <= 12 && c.wday < 7);
    /* int64 nanoseconds span the years 1677..2262, so four digits suffice. */
    snprintf(out, 32, "%s, %02u %s %04d %02u:%02u:%02u GMT", wdays[c.wday], c.day,
             months[c.month - 1], (int)c.year, c.hour, c.min, c.sec);
}

void ol_s3_iso_date(int64_t ns, char out[32])
{
    struct ol_s3_civil c;
    ol_s3_civil_from_ns(ns, &c);
    snprintf(out, 32, "%04d-%02u-%02uT%02u:%02u:%02u.%03uZ", (int)c.year, c.month, c.day,
             c.hour, c.min, c.sec, c.msec);
}

static bool ol_s3_is_lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* True for names shaped like a dotted IPv4 address ("192.168.5.4"): four
 * groups of one to three digits.  Such names would be mistaken for hosts in
 * virtual-hosted-style URLs. */
static bool ol_s3_looks_like_ipv4(const char *name, size_t n)
{
    unsigned groups = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (name[i] >= '0' && name[i] <= '9') {
            if (++digits > 3)
                return false;
        } else if (name[i] == '.') {
            if (digits == 0)
                return false;
            groups++;
            digits = 0;
        } else {
            return false;
        }
    }
    return digits > 0 && groups == 3;
}

bool ol_s3_bucket_name_valid(const char *name)
{
    if (!name)
        return false;
    size_t n = strnlen(name, 64);
    if (n < 3 || n > 63)
        return false;
    if (!ol_s3_is_lower_alnum(name[0]) || !ol_s3_is_lower_alnum(name[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!ol_s3_is_lower_alnum(ch) && ch != '.' && ch != '-')
            return false;
        /* "..", ".-" and "-." would make an empty or dash-edged label in a
         * virtual-hosted-style host name; S3 refuses all three. */
        if (i > 0 && (ch == '.' || name[i - 1] == '.') && (ch == '.' || ch == '-') &&
            (name[i - 1] == '.' || name[i - 1] == '-'))
            return false;
    }
    if (ol_s3_looks_like_ipv4(name, n))
        return false;
    /* Prefixes and suffixes that Amazon reserves for its own features
     * (punycode host labels, access point aliases). */
    if (strncmp(name, "xn--", 4) == 0)
        return false;
    static const char alias[] = "-s3alias";
    if (n >= sizeof(alias) - 1 && memcmp(name + n - (sizeof(alias) - 1), alias,
                                         sizeof(alias) - 1) == 0)
        return false;
    return true;
}
