/* Encryption at rest: see obj/sse.h.  AES-256-GCM comes from core/gcm.h
 * (Intel's ipsec-mb where installed, 2.3x OpenSSL 3.0 on VAES cores;
 * OpenSSL otherwise) and HMAC-SHA256 from OpenSSL; nothing cryptographic is
 * written here, only the framing around it. */
#include "obj/sse.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>

#include "core/err.h"
#include "core/gcm.h"
#include "core/hex.h"
#include "core/log.h"
#include "core/sha256.h"
#include "obj/sse_pool.h"
#include "s3/meta.h"

#define WRAP_LEN (12 + OL_SSE_KEY + 16) /* nonce, wrapped key, tag */
#define SALT_LEN 16
#define MAX_PARTS 10000

/* ---- small helpers ---- */

static int random_bytes(uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -EIO;
        }
        got += (size_t)r;
    }
    return 0;
}

/* The wrapping's associated data names the scheme and the mode, so an
 * SSE-S3 record cannot be passed off as an SSE-C one or the reverse. */
static const uint8_t *wrap_aad(enum ol_sse_mode m, size_t *len)
{
    static const uint8_t s3[] = "openlake sse v1 S3", c[] = "openlake sse v1 C";
    *len = m == OL_SSE_S3 ? sizeof(s3) - 1 : sizeof(c) - 1;
    return m == OL_SSE_S3 ? s3 : c;
}

static void ssec_kek(const uint8_t ckey[32], const uint8_t salt[SALT_LEN], uint8_t kek[32])
{
    static const char label[] = "openlake sse-c kek";
    struct ol_bytes m[2] = {{label, sizeof(label) - 1}, {salt, SALT_LEN}};
    ol_hmac_sha256(ckey, 32, m, 2, kek);
}

static void ssec_check(const uint8_t ckey[32], const uint8_t salt[SALT_LEN], uint8_t out[32])
{
    struct ol_bytes m[1] = {{ckey, 32}};
    ol_hmac_sha256(salt, SALT_LEN, m, 1, out);
}

void ol_sse_key_id(const uint8_t master[OL_SSE_KEY], char id[17])
{
    static const char label[] = "openlake sse key id";
    struct ol_bytes m[1] = {{label, sizeof(label) - 1}};
    uint8_t h[32];
    ol_hmac_sha256(master, OL_SSE_KEY, m, 1, h);
    ol_hex(h, 8, id);
    OPENSSL_cleanse(h, sizeof(h));
}

/* ---- per-thread state ---- */

/* A reader's window: the packages it opens per backend read. */
#define WIN_BYTES ((size_t)OL_SSE_WINDOW_PKGS * OL_SSE_PKG)
#define SEALED_PKG ((size_t)OL_SSE_PKG + OL_SSE_TAG)
/* Scratch sets a thread keeps for its next readers: as many as GETs a
 * thread commonly has in flight (4 MiB); more readers allocate and free
 * their own. */
#define POOL_MAX 4u
/* Opened SSE-S3 data keys a thread remembers (see dk_memo). */
#define MEMO_MAX 16u

/* What a reader needs to open packages, kept by a thread between readers:
 * the window (fresh pages cost a fault each per GET on a VM) and a cipher
 * context (created and keyed with the cipher once; the next reader loads
 * only its key). */
struct scratch {
    struct ol_gcm *c;
    uint8_t *win; /* WIN_BYTES */
};

/* An SSE-S3 entry opened before under a master key: the same bytes under
 * the same master open to the same data key (the unwrap is deterministic
 * and authenticated), so the memo answers exactly what an open would, and
 * holds nothing the master key does not already give (both live in this
 * process).  Saves a key id HMAC and a GCM unwrap with its context per
 * GET of a small object. */
struct dk_memo {
    uint8_t master[OL_SSE_KEY];
    uint8_t dk[OL_SSE_KEY];
    size_t len; /* 0: empty */
    uint8_t entry[OL_SSE_ENTRY_MAX];
};

struct tl_sse {
    struct scratch pool[POOL_MAX];
    unsigned npool;
    struct dk_memo memo[MEMO_MAX];
    unsigned memo_next; /* round-robin replacement */
};

static __thread struct tl_sse tl_sse;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;
static bool tl_key_ok;

static void scratch_free(struct scratch *sc)
{
    ol_gcm_free(sc->c);
    free(sc->win);
    sc->c = NULL;
    sc->win = NULL;
}

/* At a thread's exit: its pool freed, its memo wiped. */
static void tl_sse_free(void *arg)
{
    struct tl_sse *t = arg;
    for (unsigned i = 0; i < t->npool; i++)
        scratch_free(&t->pool[i]);
    t->npool = 0;
    OPENSSL_cleanse(t->memo, sizeof(t->memo));
}

static void tl_init(void)
{
    tl_key_ok = pthread_key_create(&tl_key, tl_sse_free) == 0;
}

static struct tl_sse *tl(void)
{
    pthread_once(&tl_once, tl_init);
    if (tl_key_ok && !pthread_getspecific(tl_key))
        (void)pthread_setspecific(tl_key, &tl_sse);
    return &tl_sse;
}

static int scratch_take(struct scratch *sc)
{
    struct tl_sse *t = tl();
    if (t->npool > 0) {
        *sc = t->pool[--t->npool];
        return 0;
    }
    sc->c = ol_gcm_new();
    sc->win = malloc(WIN_BYTES);
    if (!sc->c || !sc->win) {
        scratch_free(sc);
        return -ENOMEM;
    }
    return 0;
}

/* The context goes back keyed: the next reader's key replaces it before
 * any use (stream_key), and the process that holds it holds the master. */
static void scratch_give(struct scratch *sc)
{
    struct tl_sse *t = tl();
    if (!sc->c)
        return;
    if (t->npool < POOL_MAX)
        t->pool[t->npool++] = *sc;
    else
        scratch_free(sc);
    sc->c = NULL;
    sc->win = NULL;
}

static bool memo_find(const uint8_t *entry, size_t len, const uint8_t *master, uint8_t dk[32])
{
    struct tl_sse *t = tl();
    for (unsigned i = 0; i < MEMO_MAX; i++) {
        const struct dk_memo *m = &t->memo[i];
        if (m->len == len && memcmp(m->entry, entry, len) == 0 &&
            CRYPTO_memcmp(m->master, master, OL_SSE_KEY) == 0) {
            memcpy(dk, m->dk, OL_SSE_KEY);
            return true;
        }
    }
    return false;
}

static void memo_put(const uint8_t *entry, size_t len, const uint8_t *master,
                     const uint8_t dk[32])
{
    struct tl_sse *t = tl();
    if (len > OL_SSE_ENTRY_MAX)
        return;
    struct dk_memo *m = &t->memo[t->memo_next];
    t->memo_next = (t->memo_next + 1) % MEMO_MAX;
    memcpy(m->master, master, OL_SSE_KEY);
    memcpy(m->dk, dk, OL_SSE_KEY);
    memcpy(m->entry, entry, len);
    m->len = len;
}

/* ---- the ":sse" entry ----
 *   "1 S3 <layout> <key id: 16 hex> <wrapped: 120 hex>"
 *   "1 C <layout> <salt: 32 hex> <check: 64 hex> <wrapped: 120 hex>" */

int ol_sse_entry_new(const uint8_t *master, const struct ol_sse_spec *spec, char layout,
                     char out[OL_SSE_ENTRY_MAX], struct ol_sse_obj *obj)
{
    if (spec->mode == OL_SSE_S3 && !master)
        return -ENOKEY;
    memset(obj, 0, sizeof(*obj));
    obj->mode = spec->mode;
    obj->layout = layout;
    uint8_t wrap[WRAP_LEN], kek[32];
    uint8_t salt[SALT_LEN];
    if (random_bytes(obj->dk, sizeof(obj->dk)) < 0 || random_bytes(wrap, 12) < 0 ||
        random_bytes(salt, sizeof(salt)) < 0)
        return -EIO;
    if (spec->mode == OL_SSE_S3)
        memcpy(kek, master, 32);
    else
        ssec_kek(spec->ckey, salt, kek);
    size_t al;
    const uint8_t *aad = wrap_aad(spec->mode, &al);
    int rc = ol_gcm_once(true, kek, wrap, aad, al, obj->dk, OL_SSE_KEY, wrap + 12,
                         wrap + 12 + OL_SSE_KEY);
    OPENSSL_cleanse(kek, sizeof(kek));
    if (rc < 0)
        return -EIO;
    char wh[2 * WRAP_LEN + 1];
    ol_hex(wrap, WRAP_LEN, wh);
    if (spec->mode == OL_SSE_S3) {
        char id[17];
        ol_sse_key_id(master, id);
        snprintf(out, OL_SSE_ENTRY_MAX, "1 S3 %c %s %s", layout, id, wh);
    } else {
        uint8_t chk[32];
        char sh[2 * SALT_LEN + 1], ch[65];
        ssec_check(spec->ckey, salt, chk);
        ol_hex(salt, SALT_LEN, sh);
        ol_hex(chk, 32, ch);
        snprintf(out, OL_SSE_ENTRY_MAX, "1 C %c %s %s %s", layout, sh, ch, wh);
    }
    return 0;
}

void ol_sse_entry_relayout(char *entry, size_t len, char layout)
{
    /* "1 S3 s ..." / "1 C s ...": the layout follows the second space. */
    const char *sp = memchr(entry, ' ', len);
    sp = sp ? memchr(sp + 1, ' ', len - (size_t)(sp + 1 - entry)) : NULL;
    if (sp && (size_t)(sp + 1 - entry) < len)
        entry[sp + 1 - entry] = layout;
}

/* Splits the entry into up to 6 space-separated fields. */
static int split(const uint8_t *val, size_t len, const char *f[6], size_t fl[6])
{
    const char *p = (const char *)val, *e = p + len;
    int n = 0;
    while (p < e && n < 6) {
        const char *sp = memchr(p, ' ', (size_t)(e - p));
        const char *end = sp ? sp : e;
        f[n] = p;
        fl[n] = (size_t)(end - p);
        n++;
        p = sp ? sp + 1 : e;
    }
    return p < e ? -1 : n;
}

int ol_sse_entry_peek(const uint8_t *val, size_t len, enum ol_sse_mode *mode, char *layout)
{
    const char *f[6];
    size_t fl[6];
    int n = split(val, len, f, fl);
    if (n < 5 || fl[0] != 1 || f[0][0] != '1' || fl[2] != 1 ||
        (f[2][0] != 's' && f[2][0] != 'p'))
        return -OL_ECORRUPT;
    if (fl[1] == 2 && memcmp(f[1], "S3", 2) == 0 && n == 5)
        *mode = OL_SSE_S3;
    else if (fl[1] == 1 && f[1][0] == 'C' && n == 6)
        *mode = OL_SSE_C;
    else
        return -OL_ECORRUPT;
    *layout = f[2][0];
    return 0;
}

int ol_sse_entry_open(const uint8_t *val, size_t len, const uint8_t *master,
                      const uint8_t *ckey, struct ol_sse_obj *obj)
{
    memset(obj, 0, sizeof(*obj));
    int rc = ol_sse_entry_peek(val, len, &obj->mode, &obj->layout);
    if (rc < 0)
        return rc;
    const char *f[6];
    size_t fl[6];
    split(val, len, f, fl);
    uint8_t wrap[WRAP_LEN], kek[32];
    if (obj->mode == OL_SSE_S3) {
        if (!master)
            return -ENOKEY;
        if (memo_find(val, len, master, obj->dk))
            return 0;
        char id[17];
        ol_sse_key_id(master, id);
        if (fl[3] != 16 || memcmp(f[3], id, 16) != 0)
            return -ENOKEY;
        if (!ol_unhex(f[4], fl[4], wrap, WRAP_LEN))
            return -OL_ECORRUPT;
        memcpy(kek, master, 32);
    } else {
        if (!ckey)
            return -OL_ESSENEEDKEY;
        uint8_t salt[SALT_LEN], chk[32], want[32];
        if (!ol_unhex(f[3], fl[3], salt, SALT_LEN) || !ol_unhex(f[4], fl[4], want, 32) ||
            !ol_unhex(f[5], fl[5], wrap, WRAP_LEN))
            return -OL_ECORRUPT;
        ssec_check(ckey, salt, chk);
        if (CRYPTO_memcmp(chk, want, 32) != 0)
            return -OL_ESSEWRONGKEY;
        ssec_kek(ckey, salt, kek);
    }
    size_t al;
    const uint8_t *aad = wrap_aad(obj->mode, &al);
    rc = ol_gcm_once(false, kek, wrap, aad, al, wrap + 12, OL_SSE_KEY, obj->dk,
                     wrap + 12 + OL_SSE_KEY);
    OPENSSL_cleanse(kek, sizeof(kek));
    if (rc < 0) {
        OPENSSL_cleanse(obj->dk, sizeof(obj->dk));
        return obj->mode == OL_SSE_C ? -OL_ESSEWRONGKEY : -OL_ECORRUPT;
    }
    if (obj->mode == OL_SSE_S3)
        memo_put(val, len, master, obj->dk);
    return 0;
}

/* ---- stream lengths ---- */

uint64_t ol_sse_sealed_len(uint64_t plain)
{
    uint64_t pk = (plain + OL_SSE_PKG - 1) / OL_SSE_PKG;
    return OL_SSE_HDR + plain + pk * OL_SSE_TAG;
}

int64_t ol_sse_plain_len(uint64_t sealed)
{
    if (sealed < OL_SSE_HDR)
        return -1;
    uint64_t s = sealed - OL_SSE_HDR;
    uint64_t full = OL_SSE_PKG + OL_SSE_TAG;
    uint64_t pk = (s + full - 1) / full;
    uint64_t rest = s % full;
    if (rest != 0 && rest <= OL_SSE_TAG)
        return -1; /* a package with no plaintext */
    return (int64_t)(s - pk * OL_SSE_TAG);
}

/* The plaintext sizes of a 'p' object's parts, from ":parts"
 * ("size*count,..."), into sizes[] (room for MAX_PARTS).  The count, or -1. */
static int parts_sizes(const uint8_t *meta, size_t meta_len, uint64_t *sizes)
{
    const uint8_t *v;
    size_t vl;
    if (ol_s3_meta_get(meta, meta_len, OL_S3_META_PARTS, &v, &vl) < 0)
        return -1;
    const char *p = (const char *)v, *e = p + vl;
    int n = 0;
    while (p < e) {
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        char buf[48];
        size_t l = (size_t)(end - p);
        if (l >= sizeof(buf))
            return -1;
        memcpy(buf, p, l);
        buf[l] = 0;
        unsigned long long size, count;
        char extra;
        if (sscanf(buf, "%llu*%llu%c", &size, &count, &extra) != 2 || count == 0 ||
            count > (unsigned long long)(MAX_PARTS - n))
            return -1;
        for (unsigned long long i = 0; i < count; i++)
            sizes[n++] = size;
        p = end + 1;
    }
    return n;
}

uint64_t ol_sse_object_size(const uint8_t *meta, size_t meta_len, uint64_t stored)
{
    const uint8_t *v;
    size_t vl;
    enum ol_sse_mode mode;
    char layout;
    if (!meta || ol_s3_meta_get(meta, meta_len, OL_SSE_META, &v, &vl) < 0 ||
        ol_sse_entry_peek(v, vl, &mode, &layout) < 0)
        return stored;
    if (layout == 's') {
        int64_t p = ol_sse_plain_len(stored);
        return p < 0 ? 0 : (uint64_t)p;
    }
    const uint8_t *pv;
    size_t pvl;
    if (ol_s3_meta_get(meta, meta_len, OL_S3_META_PARTS, &pv, &pvl) < 0)
        return 0;
    /* Sum without expanding: "size*count,...". */
    uint64_t total = 0;
    const char *p = (const char *)pv, *e = p + pvl;
    while (p < e) {
        unsigned long long size = 0, count = 0;
        char buf[48];
        const char *comma = memchr(p, ',', (size_t)(e - p));
        const char *end = comma ? comma : e;
        size_t l = (size_t)(end - p);
        if (l >= sizeof(buf) || (memcpy(buf, p, l), buf[l] = 0,
                                 sscanf(buf, "%llu*%llu", &size, &count) != 2))
            return 0;
        total += (uint64_t)size * count;
        p = end + 1;
    }
    return total;
}

/* ---- package sealing ---- */

/* A stream's package key: HMAC-SHA256(DK, stream id). */
static void stream_key_bytes(const uint8_t dk[32], const uint8_t id[OL_SSE_HDR], uint8_t k[32])
{
    struct ol_bytes m[1] = {{id, OL_SSE_HDR}};
    ol_hmac_sha256(dk, 32, m, 1, k);
}

/* A stream's package context: the package key from the data key and the
 * stream id, loaded into c. */
static int stream_key(struct ol_gcm *c, const uint8_t dk[32], const uint8_t id[OL_SSE_HDR])
{
    uint8_t k[32];
    stream_key_bytes(dk, id, k);
    int rc = ol_gcm_key(c, k);
    OPENSSL_cleanse(k, sizeof(k));
    return rc;
}

static void pkg_nonce(uint64_t idx, uint8_t nonce[12])
{
    memset(nonce, 0, 4);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] = (uint8_t)(idx >> (56 - 8 * i));
}

/* Seals n plaintext bytes (one package) into out[n + tag]. */
static int seal_pkg(struct ol_gcm *c, uint64_t idx, bool last, const uint8_t *in, size_t n,
                    uint8_t *out)
{
    uint8_t nonce[12], aad = last ? 1 : 0;
    pkg_nonce(idx, nonce);
    if (ol_gcm_start(c, true, nonce, &aad, 1) < 0 || ol_gcm_update(c, in, n, out) < 0 ||
        ol_gcm_seal_tag(c, out + n) < 0)
        return -EIO;
    return 0;
}

/* A window's sealed bytes as the reader hands them to win_open: one run
 * of bytes, or a few (a window across pieces of a source, each pinned where
 * it lies: an erasure set's stripe units, and within a unit the extents a
 * drive wrote it in): logically piece 0's bytes, then piece 1's, ... */
#define SIN_MAX 4u
struct sin {
    unsigned n;
    const uint8_t *p[SIN_MAX];
    size_t end[SIN_MAX]; /* logical offset where piece i ends */
};

/* The bytes of in at logical offset at (< the last end), and how many of
 * them follow contiguously. */
static const uint8_t *sin_at(const struct sin *in, size_t at, size_t *run)
{
    unsigned i = 0;
    while (i + 1 < in->n && at >= in->end[i])
        i++;
    size_t start = i ? in->end[i - 1] : 0;
    OL_ASSERT(at >= start && at < in->end[i]);
    *run = in->end[i] - at;
    return in->p[i] + (at - start);
}

/* Opens one sealed package, n bytes at in's offset at and its tag after
 * them, into out[n].  A package across pieces is fed to the cipher in one
 * update per piece (GCM is a stream: any split gives the same bytes). */
static int open_pkg(struct ol_gcm *c, uint64_t idx, bool last, const struct sin *in, size_t at,
                    size_t n, uint8_t *out)
{
    uint8_t nonce[12], aad = last ? 1 : 0;
    uint8_t tag[OL_SSE_TAG];
    pkg_nonce(idx, nonce);
    if (ol_gcm_start(c, false, nonce, &aad, 1) < 0)
        return -OL_ECORRUPT;
    for (size_t done = 0; done < n;) {
        size_t run;
        const uint8_t *p = sin_at(in, at + done, &run);
        size_t k = n - done < run ? n - done : run;
        if (ol_gcm_update(c, p, k, out + done) < 0)
            return -OL_ECORRUPT;
        done += k;
    }
    for (size_t done = 0; done < OL_SSE_TAG;) {
        size_t run;
        const uint8_t *p = sin_at(in, at + n + done, &run);
        size_t k = OL_SSE_TAG - done < run ? OL_SSE_TAG - done : run;
        memcpy(tag + done, p, k);
        done += k;
    }
    if (ol_gcm_open_tag(c, tag) < 0)
        return -OL_ECORRUPT;
    return 0;
}

/* ---- reading ---- */

/* Read-ahead (obj/sse_pool.h): a read of at least AHEAD_MIN_BYTES (what
 * the caller asks for: a GET's whole remaining body) opens its next windows
 * on the decrypt pool, up to OL_SSE_AHEAD at a time, while the caller sends
 * the current one.  Shorter reads (a 1 MiB object is two windows) open
 * inline: a hand-off would only add its latency. */
#define AHEAD_MIN_BYTES (2 * WIN_BYTES)
#define SEALED_CAP (OL_SSE_HDR + (size_t)OL_SSE_WINDOW_PKGS * SEALED_PKG)

/* One window of one stream: packages [first, last) of stream `stream`. */
struct win {
    uint32_t stream;
    uint64_t first, last;
    uint64_t npk;  /* the stream's packages */
    uint64_t plen; /* the stream's plaintext bytes */
    uint64_t off;  /* the window's plaintext offset in the object */
    size_t len;    /* its plaintext bytes */
    size_t sealed; /* its packages' sealed bytes */
};

/* A window opened on the pool: one block (obj/sse_pool.h) holds the slot,
 * then the plaintext, then the sealed bytes when they had to be copied. */
struct ahead {
    struct ol_sse_job job; /* first: the block is the slot */
    struct win w;
    uint8_t key[OL_SSE_KEY]; /* the stream's package key */
    struct sin in;           /* the sealed packages (the source's, or `sealed`) */
    int rc;                  /* the open's: 0 or -OL_ECORRUPT */
    uint8_t *plain;          /* WIN_BYTES */
    uint8_t *sealed;         /* SEALED_CAP */
};
#define AHEAD_HDR ((size_t)4096)
_Static_assert(sizeof(struct ahead) <= AHEAD_HDR, "slot header");
_Static_assert(AHEAD_HDR + WIN_BYTES + SEALED_CAP <= OL_SSE_POOL_BLOCK, "slot block");

struct ol_sse_reader {
    struct ol_sse_obj k;
    bool locked;
    uint8_t entry[OL_SSE_ENTRY_MAX];
    size_t entry_len;
    uint64_t size;          /* plaintext */
    uint64_t stored;        /* sealed bytes in all */
    bool primed;            /* the source has had its first read */
    uint32_t nstreams;
    uint64_t *pstart;       /* [nstreams + 1] plaintext offsets of the streams */
    uint64_t *sstart;       /* [nstreams] stored offsets */
    uint64_t one[3];        /* a one-stream object's pstart[2] and sstart[1] */
    struct scratch sc;      /* from the thread's pool at the first inline open */
    int64_t keyed;          /* the stream sc.c is keyed for, -1: none */
    uint8_t skey[OL_SSE_KEY]; /* the package key of stream skey_stream */
    int64_t skey_stream;    /* -1: none yet */
    const uint8_t *win;     /* the opened window: sc.win or cur->plain */
    uint64_t win_off;
    size_t win_len;
    uint8_t *asm_buf;       /* sealed bytes gathered from short source reads */
    /* Read-ahead: windows on the pool, in order from ah[ah_head]. */
    struct ahead *ah[OL_SSE_AHEAD];
    unsigned ah_head, nah;
    struct ahead *cur;      /* the slot whose plaintext is the window */
    uint64_t ah_next;       /* plaintext offset of the next window to queue */
    uint64_t ah_end;        /* where read-ahead stops (the read's end) */
};

/* ---- read-ahead slots ---- */

static int win_open(struct ol_gcm *c, const struct win *w, const struct sin *in, size_t at,
                    uint8_t *out);

/* On a pool thread. */
static void ahead_run(struct ol_sse_job *j)
{
    struct ahead *a = (struct ahead *)j;
    struct ol_gcm *c = ol_gcm_thread(); /* a pool thread's */
    a->rc = c ? ol_gcm_key(c, a->key) : -ENOMEM;
    if (a->rc == 0)
        a->rc = win_open(c, &a->w, &a->in, 0, a->plain);
}

static void ahead_drop(struct ol_sse_job *j)
{
    struct ahead *a = (struct ahead *)j;
    OPENSSL_cleanse(a->key, sizeof(a->key));
    ol_sse_pool_block_give(a);
}

/* Gives up every window read ahead (a seek, the end, or the reader's free):
 * those still queued or opening go when their thread is done with them. */
static void ahead_cancel_all(struct ol_sse_reader *s)
{
    for (unsigned n = 0; n < s->nah; n++)
        ol_sse_pool_cancel(&s->ah[(s->ah_head + n) % OL_SSE_AHEAD]->job);
    s->nah = 0;
    s->ah_head = 0;
    s->ah_end = s->ah_next = 0;
}

static void ahead_release_cur(struct ol_sse_reader *s)
{
    if (s->cur) {
        ahead_drop(&s->cur->job); /* waited for: done */
        s->cur = NULL;
        s->win_len = 0;
    }
}

void ol_sse_reader_free(struct ol_sse_reader *s)
{
    if (!s)
        return;
    ahead_cancel_all(s);
    ahead_release_cur(s);
    OPENSSL_cleanse(s->k.dk, sizeof(s->k.dk));
    OPENSSL_cleanse(s->skey, sizeof(s->skey));
    scratch_give(&s->sc);
    if (s->pstart != s->one)
        free(s->pstart);
    if (s->sstart != s->one + 2)
        free(s->sstart);
    free(s->asm_buf);
    free(s);
}

int ol_sse_reader_new(const uint8_t *meta, size_t meta_len, uint64_t stored,
                      const uint8_t *master, struct ol_sse_reader **out)
{
    const uint8_t *v;
    size_t vl;
    *out = NULL;
    if (ol_s3_meta_get(meta, meta_len, OL_SSE_META, &v, &vl) < 0 || vl >= OL_SSE_ENTRY_MAX)
        return -OL_ECORRUPT;
    struct ol_sse_reader *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    memcpy(s->entry, v, vl);
    s->entry_len = vl;
    s->keyed = -1;
    s->skey_stream = -1;
    s->pstart = s->one;
    s->sstart = s->one + 2;
    int rc = ol_sse_entry_peek(v, vl, &s->k.mode, &s->k.layout);
    if (rc < 0)
        goto fail;
    int n = 1;
    if (s->k.layout == 's') {
        int64_t p = ol_sse_plain_len(stored);
        if (p < 0) {
            rc = -OL_ECORRUPT;
            goto fail;
        }
        s->pstart[1] = (uint64_t)p;
    } else {
        uint64_t *sizes = malloc(MAX_PARTS * sizeof(*sizes));
        if (!sizes) {
            rc = -ENOMEM;
            goto fail;
        }
        n = parts_sizes(meta, meta_len, sizes);
        s->pstart = n > 0 ? calloc((size_t)n + 1, sizeof(uint64_t)) : NULL;
        s->sstart = n > 0 ? calloc((size_t)n, sizeof(uint64_t)) : NULL;
        if (n <= 0 || !s->pstart || !s->sstart) {
            free(sizes);
            rc = n <= 0 ? -OL_ECORRUPT : -ENOMEM;
            goto fail;
        }
        uint64_t so = 0;
        for (int i = 0; i < n; i++) {
            s->sstart[i] = so;
            s->pstart[i + 1] = s->pstart[i] + sizes[i];
            so += ol_sse_sealed_len(sizes[i]);
        }
        free(sizes);
        if (so != stored) {
            rc = -OL_ECORRUPT;
            goto fail;
        }
    }
    s->nstreams = (uint32_t)n;
    s->size = s->pstart[n];
    s->stored = stored;
    s->locked = true;
    if (s->k.mode == OL_SSE_S3) {
        rc = ol_sse_entry_open(s->entry, s->entry_len, master, NULL, &s->k);
        if (rc < 0)
            goto fail;
        s->locked = false;
    }
    *out = s;
    return 0;
fail:
    ol_sse_reader_free(s);
    return rc;
}

enum ol_sse_mode ol_sse_reader_mode(const struct ol_sse_reader *s)
{
    return s->k.mode;
}

uint64_t ol_sse_reader_size(const struct ol_sse_reader *s)
{
    return s->size;
}

int ol_sse_reader_unlock(struct ol_sse_reader *s, const uint8_t ckey[OL_SSE_KEY])
{
    if (s->k.mode != OL_SSE_C)
        return 0;
    int rc = ol_sse_entry_open(s->entry, s->entry_len, NULL, ckey, &s->k);
    s->locked = rc < 0;
    return rc;
}

/* Reads exactly n sealed bytes at off into dst.  The first call asks for
 * at least ask bytes: a backend sizes its buffer by its first read
 * (obj/ec.c), and a small first read would make every later one small. */
static int src_read_exact(ol_sse_src_fn fn, void *src, uint64_t off, bool check, uint8_t *dst,
                          size_t n, size_t ask)
{
    size_t got = 0;
    while (got < n) {
        const uint8_t *d;
        bool pinned = false;
        size_t want = n - got;
        if (got == 0 && ask > want)
            want = ask;
        ssize_t r = fn(src, off + got, want, check, &d, &pinned);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -OL_ECORRUPT; /* shorter than its layout says */
        if ((size_t)r > n - got)
            r = (ssize_t)(n - got);
        memcpy(dst + got, d, (size_t)r);
        got += (size_t)r;
    }
    return 0;
}

/* The window holding plaintext offset off (off < size). */
static void win_plan(const struct ol_sse_reader *s, uint64_t off, struct win *w)
{
    /* The stream holding off (streams are few: a binary search). */
    uint32_t lo = 0, hi = s->nstreams - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (s->pstart[mid] <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    w->stream = lo;
    w->plen = s->pstart[lo + 1] - s->pstart[lo];
    w->npk = (w->plen + OL_SSE_PKG - 1) / OL_SSE_PKG;
    w->first = (off - s->pstart[lo]) / OL_SSE_PKG;
    w->last = w->first + OL_SSE_WINDOW_PKGS;
    if (w->last > w->npk)
        w->last = w->npk;
    uint64_t pfirst = w->first * OL_SSE_PKG;
    uint64_t pend = w->last * OL_SSE_PKG < w->plen ? w->last * OL_SSE_PKG : w->plen;
    w->off = s->pstart[lo] + pfirst;
    w->len = (size_t)(pend - pfirst);
    w->sealed = w->len + (size_t)(w->last - w->first) * OL_SSE_TAG;
}

/* Opens window w's sealed packages, from in's offset at, into out[] with c
 * (keyed for the window's stream).  -OL_ECORRUPT at the first package that
 * fails. */
static int win_open(struct ol_gcm *c, const struct win *w, const struct sin *in, size_t at,
                    uint8_t *out)
{
    size_t i = at, o = 0;
    for (uint64_t pk = w->first; pk < w->last; pk++) {
        size_t n = (size_t)(w->plen - pk * OL_SSE_PKG < OL_SSE_PKG ? w->plen - pk * OL_SSE_PKG
                                                                   : OL_SSE_PKG);
        int rc = open_pkg(c, pk, pk + 1 == w->npk, in, i, n, out + o);
        if (rc < 0)
            return rc;
        o += n;
        i += n + OL_SSE_TAG;
    }
    return 0;
}

/* How windows' sealed bytes reached the cipher (ol_sse_stats). */
static struct ol_sse_stats stats_;

static void stat_add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

void ol_sse_stats(struct ol_sse_stats *out)
{
    out->windows_in_place = __atomic_load_n(&stats_.windows_in_place, __ATOMIC_RELAXED);
    out->windows_pieces = __atomic_load_n(&stats_.windows_pieces, __ATOMIC_RELAXED);
    out->windows_copied = __atomic_load_n(&stats_.windows_copied, __ATOMIC_RELAXED);
    out->bytes_copied = __atomic_load_n(&stats_.bytes_copied, __ATOMIC_RELAXED);
    out->parts_pool = __atomic_load_n(&stats_.parts_pool, __ATOMIC_RELAXED);
    out->parts_stolen = __atomic_load_n(&stats_.parts_stolen, __ATOMIC_RELAXED);
    out->windows_rechecked = __atomic_load_n(&stats_.windows_rechecked, __ATOMIC_RELAXED);
}

/* Window w's sealed packages, with s->skey made the package key of w's
 * stream, read with check or not (ol_sse_src_fn).  *sw holds them where
 * the source handed them over: in one call's buffer (for a window opened
 * on another thread, `keep`, only when the source pins it: valid while the
 * source lives), or in up to SIN_MAX pinned pieces when one call stops
 * short (an erasure set's source ends each answer at a stripe unit's end,
 * and a window, a little shorter than a unit, mostly straddles two); else
 * gathered into *bufp (SEALED_CAP bytes, made at the first window that
 * needs it). */
static int win_fetch(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src, const struct win *w,
                     bool check, uint8_t **bufp, bool keep, struct sin *sw)
{
    const uint32_t i = w->stream;
    const size_t sealed_cap = (size_t)OL_SSE_WINDOW_PKGS * SEALED_PKG;
    /* The window's sealed bytes in one request, with the stream id in
     * front when the window starts the stream and the stream's key is not
     * known yet (a stream read from its start: one call).  The first read
     * of all asks for a whole window: see src_read_exact. */
    bool keyed = s->skey_stream == (int64_t)i;
    bool with_id = !keyed && w->first == 0;
    size_t ask = 0;
    int rc;
    if (!s->primed) {
        uint64_t at = s->sstart[i] + (with_id ? 0 : OL_SSE_HDR);
        ask = at + sealed_cap < s->stored ? sealed_cap : (size_t)(s->stored - at);
        s->primed = true;
    }
    if (!keyed && !with_id) {
        /* An id read ahead of a window in the middle of the stream. */
        uint8_t id[OL_SSE_HDR];
        rc = src_read_exact(fn, src, s->sstart[i], check, id, sizeof(id), ask);
        ask = 0;
        if (rc < 0)
            return rc;
        stream_key_bytes(s->k.dk, id, s->skey);
        s->skey_stream = i;
    }
    uint64_t so = s->sstart[i] + OL_SSE_HDR + w->first * SEALED_PKG;
    size_t need = w->sealed;
    if (with_id) {
        so -= OL_SSE_HDR;
        need += OL_SSE_HDR;
    }
    /* Pieces while the source pins them, up to SIN_MAX; an unpinned one
     * ends the run (valid only until the next call). */
    size_t have = 0;
    bool pinned = true;
    sw->n = 0;
    while (have < need && pinned && sw->n < SIN_MAX) {
        const uint8_t *p = NULL;
        pinned = false;
        size_t want = need - have;
        ssize_t got =
            fn(src, so + have, have == 0 && ask > want ? ask : want, check, &p, &pinned);
        if (got <= 0)
            return got < 0 ? (int)got : -OL_ECORRUPT;
        have += (size_t)got < want ? (size_t)got : want;
        sw->p[sw->n] = p;
        sw->end[sw->n++] = have;
    }
    bool in_place = have == need && (pinned || (!keep && sw->n == 1)) &&
                    (!with_id || sw->end[0] > OL_SSE_HDR);
    if (!in_place) {
        /* Gathered: every piece but the last is pinned, and the last is
         * valid until the next call. */
        if (!*bufp && !(*bufp = malloc(SEALED_CAP)))
            return -ENOMEM;
        uint8_t *buf = *bufp;
        for (size_t k = 0, start = 0; k < sw->n; start = sw->end[k], k++)
            memcpy(buf + start, sw->p[k], sw->end[k] - start);
        if (have < need) {
            rc = src_read_exact(fn, src, so + have, check, buf + have, need - have, 0);
            if (rc < 0)
                return rc;
        }
        *sw = (struct sin){.n = 1, .p = {buf}, .end = {need}};
        stat_add(&stats_.windows_copied, 1);
        stat_add(&stats_.bytes_copied, need);
    } else {
        stat_add(sw->n > 1 ? &stats_.windows_pieces : &stats_.windows_in_place, 1);
    }
    if (with_id) {
        /* The id lies in the first piece (checked above). */
        stream_key_bytes(s->k.dk, sw->p[0], s->skey);
        s->skey_stream = i;
        sw->p[0] += OL_SSE_HDR;
        for (unsigned k = 0; k < sw->n; k++)
            sw->end[k] -= OL_SSE_HDR;
    }
    return 0;
}

/* Queues windows from ah_next on the pool until OL_SSE_AHEAD are out or
 * the read's end.  A window that cannot be queued (no block under the cap,
 * a source error) stops read-ahead: the caller opens it inline when it
 * gets there, and meets the error at its own offset. */
static void ahead_fill(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src)
{
    unsigned depth = ol_sse_pool_threads();
    if (depth > OL_SSE_AHEAD)
        depth = OL_SSE_AHEAD;
    while (s->nah < depth && s->ah_next < s->ah_end) {
        struct ahead *a = ol_sse_pool_block_take();
        if (!a) {
            s->ah_end = s->ah_next;
            return;
        }
        a->plain = (uint8_t *)a + AHEAD_HDR;
        a->sealed = a->plain + WIN_BYTES;
        win_plan(s, s->ah_next, &a->w);
        int rc = win_fetch(s, fn, src, &a->w, false, &a->sealed, true, &a->in);
        if (rc < 0) {
            ol_sse_pool_block_give(a);
            s->ah_end = s->ah_next;
            return;
        }
        memcpy(a->key, s->skey, sizeof(a->key));
        a->rc = 0;
        a->job.run = ahead_run;
        a->job.drop = ahead_drop;
        ol_sse_pool_submit(&a->job);
        s->ah[(s->ah_head + s->nah) % OL_SSE_AHEAD] = a;
        s->nah++;
        s->ah_next = a->w.off + a->w.len;
    }
}

/* Opening one window on several cores.  A read too short for read-ahead
 * (a 1 MiB object is a window and a package) is one loop thread's AES-GCM
 * alone: on a host with cores to spare, 0.4-0.55 of a plain GET's speed
 * (bench/RESULTS.md "Encrypted GETs on 16 cores").  So a window opened here
 * is cut into parts of at least SPLIT_MIN_PKGS packages: the pool opens
 * the later parts while this thread opens the first, then waits for them
 * (the parts live on this fiber's stack: never cancelled, always waited
 * for).  The first part that fails decides the result, as one thread's
 * open would have. */
#define SPLIT_MIN_PKGS 4u
/* On ipsec-mb's GCM (core/gcm.h, about 2.3x OpenSSL's) a whole window
 * opens in about 0.1 ms, and a part handed to another core costs more
 * than it saves: the wake-up, and the plaintext then sent from another
 * core's cache.  16 cores, 1 MiB GETs, pool off against parts: 0.74-0.80
 * against 0.71-0.77 of plain (bench/RESULTS.md).  So there a window is one
 * part (a window has 15 packages). */
#define SPLIT_MIN_PKGS_FAST 16u
#define SPLIT_MAX 4u
#define SPLIT_SPIN_US 200u

struct part {
    struct ol_sse_job job; /* first */
    struct win w;
    const struct sin *in;
    size_t at; /* the part's first package in `in` */
    uint8_t *out;
    const uint8_t *key;
    int rc;
};

static void part_run(struct ol_sse_job *j)
{
    struct part *p = (struct part *)j;
    struct ol_gcm *c = ol_gcm_thread(); /* a pool thread's */
    p->rc = c ? ol_gcm_key(c, p->key) : -ENOMEM;
    if (p->rc == 0)
        p->rc = win_open(c, &p->w, p->in, p->at, p->out);
}

static void part_drop(struct ol_sse_job *j)
{
    (void)j; /* on the owner's stack */
}

static int win_open_split(struct ol_sse_reader *s, const struct win *w, const struct sin *in,
                          uint8_t *out)
{
    uint64_t npk = w->last - w->first;
    unsigned parts = ol_sse_pool_threads() + 1;
    if (parts > SPLIT_MAX)
        parts = SPLIT_MAX;
    uint64_t min = strcmp(ol_gcm_impl(), "ipsec-mb") == 0 ? SPLIT_MIN_PKGS_FAST : SPLIT_MIN_PKGS;
    if (parts > npk / min)
        parts = (unsigned)(npk / min);
    if (parts < 2)
        return win_open(s->sc.c, w, in, 0, out);
    uint64_t per = (npk + parts - 1) / parts;
    struct part p[SPLIT_MAX];
    unsigned n = 0;
    for (uint64_t first = w->first + per; first < w->last; first += per, n++) {
        struct part *q = &p[n];
        q->w = *w;
        q->w.first = first;
        q->w.last = first + per < w->last ? first + per : w->last;
        q->in = in;
        q->at = (size_t)(first - w->first) * SEALED_PKG;
        q->out = out + (first - w->first) * OL_SSE_PKG;
        q->key = s->skey;
        q->rc = 0;
        q->job.run = part_run;
        q->job.drop = part_drop;
        ol_sse_pool_submit(&q->job);
    }
    struct win w0 = *w;
    w0.last = w->first + per;
    int rc = win_open(s->sc.c, &w0, in, 0, out);
    /* A part no pool thread has picked up yet is opened here (the pool's
     * wake-up may take longer than the part); one that runs is waited for,
     * spinning first: it started no later than this thread's part. */
    for (unsigned k = 0; k < n; k++) {
        if (ol_sse_pool_finish(&p[k].job, SPLIT_SPIN_US))
            stat_add(&stats_.parts_stolen, 1);
        else
            stat_add(&stats_.parts_pool, 1);
        if (rc == 0)
            rc = p[k].rc;
    }
    return rc;
}

/* Opens window w here, from its bytes read with check or not.  With
 * check, the stream's id is read again too: the key made from an
 * unchecked id may be what failed. */
static int win_open_here(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src,
                         const struct win *w, bool check)
{
    if (check) {
        s->skey_stream = -1;
        s->keyed = -1;
        stat_add(&stats_.windows_rechecked, 1);
    }
    struct sin sw;
    int rc = win_fetch(s, fn, src, w, check, &s->asm_buf, false, &sw);
    if (rc == 0 && s->keyed != (int64_t)w->stream) {
        rc = ol_gcm_key(s->sc.c, s->skey);
        s->keyed = rc == 0 ? (int64_t)w->stream : -1;
    }
    return rc == 0 ? win_open_split(s, w, &sw, s->sc.win) : rc;
}

/* Makes the window holding off (< size) the reader's: the next one read
 * ahead when off is in it, else opened here.  A window whose tags fail on
 * bytes read without check is read again with check (ol_sse_src_fn): bit
 * rot the backend would have read around must not fail the read. */
static int win_load(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src, uint64_t off,
                    size_t max)
{
    bool check = false;
    ahead_release_cur(s);
    s->win_len = 0;
    if (s->nah > 0) {
        struct ahead *a = s->ah[s->ah_head];
        if (off >= a->w.off && off < a->w.off + a->w.len) {
            s->ah_head = (s->ah_head + 1) % OL_SSE_AHEAD;
            s->nah--;
            ol_sse_pool_wait(&a->job);
            s->cur = a;
            if (a->rc == 0) {
                s->win = a->plain;
                s->win_off = a->w.off;
                s->win_len = a->w.len;
                ahead_fill(s, fn, src);
                return 0;
            }
            /* Nothing of it, nor of what follows, goes out unless it opens
             * from checked bytes; those queued after it may share its key
             * (made from an unchecked id): all are read again. */
            int arc = a->rc;
            ahead_release_cur(s);
            if (arc != -OL_ECORRUPT)
                return arc;
            check = true;
        }
        ahead_cancel_all(s); /* a seek, or a window read again */
    }
    int rc = s->sc.c ? 0 : scratch_take(&s->sc);
    if (rc < 0)
        return rc;
    struct win w;
    win_plan(s, off, &w);
    rc = win_open_here(s, fn, src, &w, check);
    if (rc == -OL_ECORRUPT && !check)
        rc = win_open_here(s, fn, src, &w, true);
    if (rc < 0)
        return rc;
    s->win = s->sc.win;
    s->win_off = w.off;
    s->win_len = w.len;
    /* A long read goes on on the pool from the next window: queued after
     * this one is open, as the source's buffer may hold this one's bytes
     * only until its next call. */
    if (max >= AHEAD_MIN_BYTES && ol_sse_pool_threads() > 0 && w.off + w.len < s->size) {
        s->ah_next = w.off + w.len;
        s->ah_end = max < s->size - off ? off + max : s->size;
        ahead_fill(s, fn, src);
    }
    return 0;
}

ssize_t ol_sse_read(struct ol_sse_reader *s, ol_sse_src_fn fn, void *src, uint64_t off,
                    size_t max, const uint8_t **data)
{
    if (s->locked)
        return -OL_ESSENEEDKEY;
    if (off >= s->size || max == 0)
        return 0;
    if (!(off >= s->win_off && off < s->win_off + s->win_len)) {
        int rc = win_load(s, fn, src, off, max);
        if (rc < 0)
            return rc;
    }
    size_t avail = (size_t)(s->win_off + s->win_len - off);
    *data = s->win + (off - s->win_off);
    return (ssize_t)(avail < max ? avail : max);
}

/* ---- writing ---- */

#define STAGE_BYTES ((size_t)OL_SSE_WINDOW_PKGS * OL_SSE_PKG)

struct ol_sse_writer {
    struct ol_sse_obj k;
    struct ol_gcm *c;
    uint8_t id[OL_SSE_HDR];
    bool id_sent;
    uint64_t next_pkg;      /* index of the stage's first package */
    uint64_t total;         /* plaintext appended */
    uint8_t *stage;         /* plaintext, STAGE_BYTES */
    size_t fill;
    uint8_t *out;           /* sealed packages */
    ol_sse_release_fn rel;
    void *rel_ctx;
};

uint64_t ol_sse_writer_bytes(void)
{
    return STAGE_BYTES + OL_SSE_WINDOW_PKGS * (OL_SSE_PKG + OL_SSE_TAG) + OL_SSE_HDR;
}

int ol_sse_writer_new(const struct ol_sse_obj *obj, struct ol_sse_writer **out)
{
    struct ol_sse_writer *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->k = *obj;
    s->c = ol_gcm_new();
    s->stage = malloc(STAGE_BYTES);
    s->out = malloc(OL_SSE_HDR + OL_SSE_WINDOW_PKGS * (OL_SSE_PKG + OL_SSE_TAG));
    if (!s->c || !s->stage || !s->out) {
        ol_sse_writer_free(s);
        return -ENOMEM;
    }
    int rc = random_bytes(s->id, sizeof(s->id));
    if (rc == 0)
        rc = stream_key(s->c, s->k.dk, s->id);
    if (rc < 0) {
        ol_sse_writer_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ol_sse_writer_free(struct ol_sse_writer *s)
{
    if (!s)
        return;
    OPENSSL_cleanse(s->k.dk, sizeof(s->k.dk));
    ol_gcm_free(s->c);
    free(s->stage);
    free(s->out);
    free(s);
}

void ol_sse_writer_set_release(struct ol_sse_writer *s, ol_sse_release_fn fn, void *ctx)
{
    s->rel = fn;
    s->rel_ctx = ctx;
}

/* Seals the stage's first npk packages (the last of them final when
 * `final`) and hands them to the sink, the stream id first. */
static int seal_out(struct ol_sse_writer *s, size_t npk, size_t bytes, bool final,
                    ol_sse_sink_fn fn, void *sink)
{
    size_t o = 0;
    if (!s->id_sent) {
        memcpy(s->out, s->id, OL_SSE_HDR);
        o = OL_SSE_HDR;
        s->id_sent = true;
    }
    size_t in = 0;
    for (size_t i = 0; i < npk; i++) {
        size_t n = bytes - in < OL_SSE_PKG ? bytes - in : OL_SSE_PKG;
        int rc = seal_pkg(s->c, s->next_pkg, final && i + 1 == npk, s->stage + in, n,
                          s->out + o);
        if (rc < 0)
            return rc;
        s->next_pkg++;
        in += n;
        o += n + OL_SSE_TAG;
    }
    return o ? fn(sink, s->out, o) : 0;
}

/* A full stage: all packages but the last go out (the last may turn out to
 * be the stream's final one, sealed differently), and the last moves to the
 * front once the caller has stopped reading the stage. */
static int flush_full(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink)
{
    int rc = seal_out(s, OL_SSE_WINDOW_PKGS - 1, STAGE_BYTES - OL_SSE_PKG, false, fn, sink);
    if (rc < 0)
        return rc;
    if (s->rel)
        s->rel(s->rel_ctx, s->stage, STAGE_BYTES);
    memmove(s->stage, s->stage + STAGE_BYTES - OL_SSE_PKG, OL_SSE_PKG);
    s->fill = OL_SSE_PKG;
    return 0;
}

int ol_sse_write_room(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink, uint8_t **p,
                      size_t *len)
{
    if (s->fill == STAGE_BYTES) {
        int rc = flush_full(s, fn, sink);
        if (rc < 0)
            return rc;
    }
    *p = s->stage + s->fill;
    *len = STAGE_BYTES - s->fill;
    return 0;
}

int ol_sse_write_advance(struct ol_sse_writer *s, size_t n)
{
    if (n > STAGE_BYTES - s->fill)
        return -EINVAL;
    s->fill += n;
    s->total += n;
    return 0;
}

int ol_sse_write(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink, const void *buf,
                 size_t len)
{
    const uint8_t *b = buf;
    while (len) {
        uint8_t *p;
        size_t room;
        int rc = ol_sse_write_room(s, fn, sink, &p, &room);
        if (rc < 0)
            return rc;
        size_t n = len < room ? len : room;
        memcpy(p, b, n);
        ol_sse_write_advance(s, n);
        b += n;
        len -= n;
    }
    return 0;
}

int ol_sse_write_finish(struct ol_sse_writer *s, ol_sse_sink_fn fn, void *sink)
{
    size_t npk = (s->fill + OL_SSE_PKG - 1) / OL_SSE_PKG;
    int rc = seal_out(s, npk, s->fill, true, fn, sink);
    if (rc == 0 && s->rel)
        s->rel(s->rel_ctx, s->stage, STAGE_BYTES);
    s->fill = 0;
    return rc;
}

uint64_t ol_sse_write_size(const struct ol_sse_writer *s)
{
    return s->total;
}
