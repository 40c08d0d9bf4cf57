/* Vouching: see cluster/vouch.h for the rule and cluster/member.h for why. */
#include "cluster/vouch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

bool ol_vouch_is_vouch(const struct ol_vouch *v, unsigned quiet_ms)
{
    return v->since_etcd_ms >= quiet_ms;
}

void ol_vouch_tally_init(struct ol_vouch_tally *t, unsigned period_ms, unsigned quiet_ms)
{
    memset(t, 0, sizeof(*t));
    t->period_ns = (int64_t)period_ms * 1000000;
    t->quiet_ms = quiet_ms;
}

void ol_vouch_tally_clear(struct ol_vouch_tally *t)
{
    t->n = 0;
    t->nmap = 0;
    t->round_ns = 0;
}

static int find(const struct ol_vouch_tally *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->e[i].name, name) == 0)
            return (int)i;
    return -1;
}

void ol_vouch_tally_add(struct ol_vouch_tally *t, const char *self, const struct ol_vouch *v,
                        size_t n, size_t nmap, int64_t round_ns)
{
    t->nmap = nmap;
    t->round_ns = round_ns;
    for (size_t i = 0; i < n; i++) {
        if (!v[i].name[0] || strcmp(v[i].name, self) == 0)
            continue; /* a node never vouches for itself (a loop in the map) */
        int j = find(t, v[i].name);
        if (!ol_vouch_is_vouch(&v[i], t->quiet_ms)) {
            if (j >= 0)
                t->e[j] = t->e[--t->n]; /* it reaches etcd: its vouches end now */
            continue;
        }
        int64_t until = v[i].asked_ns + t->period_ns;
        if (j < 0) {
            if (t->n == OL_VOUCH_MAX_PEERS)
                continue;
            j = (int)t->n++;
            snprintf(t->e[j].name, sizeof(t->e[j].name), "%s", v[i].name);
            t->e[j].until_ns = until;
        } else if (until > t->e[j].until_ns) {
            t->e[j].until_ns = until;
        }
    }
}

size_t ol_vouch_tally_count(const struct ol_vouch_tally *t, int64_t now_ns)
{
    size_t c = 0;
    for (size_t i = 0; i < t->n; i++)
        c += t->e[i].until_ns > now_ns;
    return c;
}

int64_t ol_vouch_tally_until(const struct ol_vouch_tally *t)
{
    if (t->nmap == 0)
        return 0;
    size_t need = t->nmap / 2; /* 1 + need > nmap / 2, the fewest such */
    if (need == 0)
        return t->round_ns ? t->round_ns + t->period_ns : 0;
    if (t->n < need)
        return 0;
    /* The need-th latest expiry: a partial selection, need <= n small. */
    int64_t best[OL_VOUCH_MAX_PEERS / 2 + 1];
    OL_ASSERT(need <= OL_VOUCH_MAX_PEERS / 2);
    size_t nb = 0;
    for (size_t i = 0; i < t->n; i++) {
        int64_t u = t->e[i].until_ns;
        if (nb < need) {
            size_t k = nb++;
            while (k > 0 && best[k - 1] < u) {
                best[k] = best[k - 1];
                k--;
            }
            best[k] = u;
        } else if (u > best[need - 1]) {
            size_t k = need - 1;
            while (k > 0 && best[k - 1] < u) {
                best[k] = best[k - 1];
                k--;
            }
            best[k] = u;
        }
    }
    return best[need - 1];
}

void ol_vouch_encode(const struct ol_vouch *v, struct ol_wbuf *w)
{
    ol_wbuf_str(w, v->name, strlen(v->name));
    ol_wbuf_u8(w, v->lease_live ? 1 : 0);
    ol_wbuf_u32(w, v->since_etcd_ms);
}

int ol_vouch_decode(const void *ctl, size_t len, struct ol_vouch *v)
{
    struct ol_rbuf r = {.p = ctl, .len = len};
    size_t nl = 0;
    const void *nm = ol_rbuf_str(&r, OL_MAP_MAX_NAME, &nl);
    uint8_t flags = ol_rbuf_u8(&r);
    uint32_t since = ol_rbuf_u32(&r);
    if (r.bad || !nm || nl == 0 || memchr(nm, '\0', nl))
        return -EPROTO;
    memcpy(v->name, nm, nl);
    v->name[nl] = '\0';
    v->lease_live = flags & 1;
    v->since_etcd_ms = since;
    return 0;
}
