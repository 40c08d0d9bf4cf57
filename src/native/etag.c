#include "native/etag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int ol_etag_init(struct ol_etag *e, uint64_t total)
{
    e->total = total;
    e->part = 0;
    e->n = 1;
    if (total >= OL_ETAG_PART_MIN) {
        e->part = OL_ETAG_PART_MIN;
        while ((total + e->part - 1) / e->part > OL_ETAG_MAX_PARTS)
            e->part *= 2;
        e->n = (uint32_t)((total + e->part - 1) / e->part);
    }
    e->md5 = malloc((size_t)e->n * sizeof(*e->md5));
    if (!e->md5)
        return -ENOMEM;
    for (uint32_t i = 0; i < e->n; i++)
        ol_md5_init(&e->md5[i]);
    return 0;
}

void ol_etag_update(struct ol_etag *e, uint64_t off, const void *p, size_t len)
{
    const uint8_t *b = p;
    if (!e->part) {
        ol_md5_update(&e->md5[0], b, len);
        return;
    }
    enum { BATCH = 64 };
    struct ol_md5_job jobs[BATCH];
    size_t nj = 0;
    while (len) {
        uint32_t i = (uint32_t)(off / e->part);
        uint64_t end = (uint64_t)(i + 1) * e->part;
        size_t n = end - off < len ? (size_t)(end - off) : len;
        jobs[nj++] = (struct ol_md5_job){.m = &e->md5[i], .p = b, .n = n};
        if (nj == BATCH) {
            ol_md5_update_many(jobs, nj);
            nj = 0;
        }
        b += n;
        off += n;
        len -= n;
    }
    if (nj)
        ol_md5_update_many(jobs, nj);
}

static void hex(const uint8_t d[16], char *out)
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

void ol_etag_final(struct ol_etag *e, char etag[64], uint32_t *nparts, char *parts, size_t cap)
{
    uint8_t d[16];
    if (!e->part) {
        ol_md5_final(&e->md5[0], d);
        hex(d, etag);
        *nparts = 0;
    } else {
        struct ol_md5 all;
        ol_md5_init(&all);
        for (uint32_t i = 0; i < e->n; i++) {
            ol_md5_final(&e->md5[i], d);
            ol_md5_update(&all, d, 16);
        }
        ol_md5_final(&all, d);
        hex(d, etag);
        snprintf(etag + 32, 32, "-%u", e->n);
        *nparts = e->n;
        uint64_t last = e->total - (uint64_t)(e->n - 1) * e->part;
        if (last == e->part)
            snprintf(parts, cap, "%llu*%u", (unsigned long long)e->part, e->n);
        else if (e->n == 1)
            snprintf(parts, cap, "%llu*1", (unsigned long long)last);
        else
            snprintf(parts, cap, "%llu*%u,%llu*1", (unsigned long long)e->part, e->n - 1,
                     (unsigned long long)last);
    }
    ol_etag_free(e);
}

void ol_etag_free(struct ol_etag *e)
{
    free(e->md5);
    e->md5 = NULL;
}
