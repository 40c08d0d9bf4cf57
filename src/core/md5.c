/* MD5, scalar and multi-buffer (8 or 16 streams per SIMD round), and the
 * per-thread batches behind ol_md5_async_*().
 *
 * The multi-buffer code is written here because no Debian package provides
 * ISA-L crypto's md5_mb.  The 64 MD5 steps are written once, as macros over
 * a type T, and instantiated for uint32_t (one stream) and for GCC vector
 * types of 8 and 16 lanes (one stream per lane) compiled for AVX2, AVX-512VL
 * and AVX-512F; ol_md5_lanes() picks at run time what the CPU has. */
#include "core/md5.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "core/log.h"
#include "core/loop.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "md5.c loads message words in host order and needs a little-endian host"
#endif

/* The four boolean functions, in forms with one fewer operation than
 * RFC 1321's (F and G as selects). */
#define MD5_F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define MD5_G(b, c, d) ((c) ^ ((d) & ((b) ^ (c))))
#define MD5_H(b, c, d) ((b) ^ (c) ^ (d))
#define MD5_I(b, c, d) ((c) ^ ((b) | ~(d)))
#define MD5_STEP(f, a, b, c, d, x, k, s)                                                           \
    do {                                                                                           \
        (a) += (x) + (uint32_t)(k); /* off the chain: b is not needed yet */                     \
        (a) += f((b), (c), (d));                                                                   \
        (a) = ((a) << (s)) | ((a) >> (32 - (s)));                                                  \
        (a) += (b);                                                                                \
    } while (0)

/* The 64 steps on a, b, c, d with message words X[0..15], each done by
 * STEP(f, a, b, c, d, X, i, k, s). */
#define MD5_ROUNDS_WITH(STEP, a, b, c, d, X)                                                                \
    do {                                                                                           \
        STEP(MD5_F, a, b, c, d, X, 0, 0xd76aa478, 7);                                                      \
        STEP(MD5_F, d, a, b, c, X, 1, 0xe8c7b756, 12);                                                     \
        STEP(MD5_F, c, d, a, b, X, 2, 0x242070db, 17);                                                     \
        STEP(MD5_F, b, c, d, a, X, 3, 0xc1bdceee, 22);                                                     \
        STEP(MD5_F, a, b, c, d, X, 4, 0xf57c0faf, 7);                                                      \
        STEP(MD5_F, d, a, b, c, X, 5, 0x4787c62a, 12);                                                     \
        STEP(MD5_F, c, d, a, b, X, 6, 0xa8304613, 17);                                                     \
        STEP(MD5_F, b, c, d, a, X, 7, 0xfd469501, 22);                                                     \
        STEP(MD5_F, a, b, c, d, X, 8, 0x698098d8, 7);                                                      \
        STEP(MD5_F, d, a, b, c, X, 9, 0x8b44f7af, 12);                                                     \
        STEP(MD5_F, c, d, a, b, X, 10, 0xffff5bb1, 17);                                                    \
        STEP(MD5_F, b, c, d, a, X, 11, 0x895cd7be, 22);                                                    \
        STEP(MD5_F, a, b, c, d, X, 12, 0x6b901122, 7);                                                     \
        STEP(MD5_F, d, a, b, c, X, 13, 0xfd987193, 12);                                                    \
        STEP(MD5_F, c, d, a, b, X, 14, 0xa679438e, 17);                                                    \
        STEP(MD5_F, b, c, d, a, X, 15, 0x49b40821, 22);                                                    \
        STEP(MD5_G, a, b, c, d, X, 1, 0xf61e2562, 5);                                                      \
        STEP(MD5_G, d, a, b, c, X, 6, 0xc040b340, 9);                                                      \
        STEP(MD5_G, c, d, a, b, X, 11, 0x265e5a51, 14);                                                    \
        STEP(MD5_G, b, c, d, a, X, 0, 0xe9b6c7aa, 20);                                                     \
        STEP(MD5_G, a, b, c, d, X, 5, 0xd62f105d, 5);                                                      \
        STEP(MD5_G, d, a, b, c, X, 10, 0x02441453, 9);                                                     \
        STEP(MD5_G, c, d, a, b, X, 15, 0xd8a1e681, 14);                                                    \
        STEP(MD5_G, b, c, d, a, X, 4, 0xe7d3fbc8, 20);                                                     \
        STEP(MD5_G, a, b, c, d, X, 9, 0x21e1cde6, 5);                                                      \
        STEP(MD5_G, d, a, b, c, X, 14, 0xc33707d6, 9);                                                     \
        STEP(MD5_G, c, d, a, b, X, 3, 0xf4d50d87, 14);                                                     \
        STEP(MD5_G, b, c, d, a, X, 8, 0x455a14ed, 20);                                                     \
        STEP(MD5_G, a, b, c, d, X, 13, 0xa9e3e905, 5);                                                     \
        STEP(MD5_G, d, a, b, c, X, 2, 0xfcefa3f8, 9);                                                      \
        STEP(MD5_G, c, d, a, b, X, 7, 0x676f02d9, 14);                                                     \
        STEP(MD5_G, b, c, d, a, X, 12, 0x8d2a4c8a, 20);                                                    \
        STEP(MD5_H, a, b, c, d, X, 5, 0xfffa3942, 4);                                                      \
        STEP(MD5_H, d, a, b, c, X, 8, 0x8771f681, 11);                                                     \
        STEP(MD5_H, c, d, a, b, X, 11, 0x6d9d6122, 16);                                                    \
        STEP(MD5_H, b, c, d, a, X, 14, 0xfde5380c, 23);                                                    \
        STEP(MD5_H, a, b, c, d, X, 1, 0xa4beea44, 4);                                                      \
        STEP(MD5_H, d, a, b, c, X, 4, 0x4bdecfa9, 11);                                                     \
        STEP(MD5_H, c, d, a, b, X, 7, 0xf6bb4b60, 16);                                                     \
        STEP(MD5_H, b, c, d, a, X, 10, 0xbebfbc70, 23);                                                    \
        STEP(MD5_H, a, b, c, d, X, 13, 0x289b7ec6, 4);                                                     \
        STEP(MD5_H, d, a, b, c, X, 0, 0xeaa127fa, 11);                                                     \
        STEP(MD5_H, c, d, a, b, X, 3, 0xd4ef3085, 16);                                                     \
        STEP(MD5_H, b, c, d, a, X, 6, 0x04881d05, 23);                                                     \
        STEP(MD5_H, a, b, c, d, X, 9, 0xd9d4d039, 4);                                                      \
        STEP(MD5_H, d, a, b, c, X, 12, 0xe6db99e5, 11);                                                    \
        STEP(MD5_H, c, d, a, b, X, 15, 0x1fa27cf8, 16);                                                    \
        STEP(MD5_H, b, c, d, a, X, 2, 0xc4ac5665, 23);                                                     \
        STEP(MD5_I, a, b, c, d, X, 0, 0xf4292244, 6);                                                      \
        STEP(MD5_I, d, a, b, c, X, 7, 0x432aff97, 10);                                                     \
        STEP(MD5_I, c, d, a, b, X, 14, 0xab9423a7, 15);                                                    \
        STEP(MD5_I, b, c, d, a, X, 5, 0xfc93a039, 21);                                                     \
        STEP(MD5_I, a, b, c, d, X, 12, 0x655b59c3, 6);                                                     \
        STEP(MD5_I, d, a, b, c, X, 3, 0x8f0ccc92, 10);                                                     \
        STEP(MD5_I, c, d, a, b, X, 10, 0xffeff47d, 15);                                                    \
        STEP(MD5_I, b, c, d, a, X, 1, 0x85845dd1, 21);                                                     \
        STEP(MD5_I, a, b, c, d, X, 8, 0x6fa87e4f, 6);                                                      \
        STEP(MD5_I, d, a, b, c, X, 15, 0xfe2ce6e0, 10);                                                    \
        STEP(MD5_I, c, d, a, b, X, 6, 0xa3014314, 15);                                                     \
        STEP(MD5_I, b, c, d, a, X, 13, 0x4e0811a1, 21);                                                    \
        STEP(MD5_I, a, b, c, d, X, 4, 0xf7537e82, 6);                                                      \
        STEP(MD5_I, d, a, b, c, X, 11, 0xbd3af235, 10);                                                    \
        STEP(MD5_I, c, d, a, b, X, 2, 0x2ad7d2bb, 15);                                                     \
        STEP(MD5_I, b, c, d, a, X, 9, 0xeb86d391, 21);                                                     \
    } while (0)

#define MD5_STEP_1(f, a, b, c, d, X, i, k, s) MD5_STEP(f, a, b, c, d, X[i], k, s)
#define MD5_ROUNDS(a, b, c, d, X) MD5_ROUNDS_WITH(MD5_STEP_1, a, b, c, d, X)
/* Two streams' steps interleaved: the variables of the second are named
 * a2, b2, c2, d2 and X2.  Each MD5 step waits on the one before, so a core
 * runs two independent chains for the price of about one. */
#define MD5_STEP_2(f, a, b, c, d, X, i, k, s)                                                      \
    do {                                                                                           \
        MD5_STEP(f, a, b, c, d, X[i], k, s);                                                       \
        MD5_STEP(f, a##2, b##2, c##2, d##2, X##2[i], k, s);                                        \
    } while (0)

/* ---- one stream ---- */

static void compress1(uint32_t h[4], const uint8_t *p, size_t nblk)
{
    uint32_t a0 = h[0], b0 = h[1], c0 = h[2], d0 = h[3];
    for (size_t i = 0; i < nblk; i++, p += 64) {
        uint32_t X[16];
        memcpy(X, p, 64);
        uint32_t a = a0, b = b0, c = c0, d = d0;
        MD5_ROUNDS(a, b, c, d, X);
        a0 += a;
        b0 += b;
        c0 += c;
        d0 += d;
    }
    h[0] = a0;
    h[1] = b0;
    h[2] = c0;
    h[3] = d0;
}

/* Two streams at once (see MD5_STEP_2): for batches of two, where SIMD
 * lanes would mostly idle. */
static void compress2(uint32_t h[4], const uint8_t *p, uint32_t h2[4], const uint8_t *p2,
                      size_t nblk)
{
    for (size_t i = 0; i < nblk; i++, p += 64, p2 += 64) {
        uint32_t X[16], X2[16];
        memcpy(X, p, 64);
        memcpy(X2, p2, 64);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
        uint32_t a2 = h2[0], b2 = h2[1], c2 = h2[2], d2 = h2[3];
        MD5_ROUNDS_WITH(MD5_STEP_2, a, b, c, d, X);
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h2[0] += a2;
        h2[1] += b2;
        h2[2] += c2;
        h2[3] += d2;
    }
}

/* ---- many streams: lane l of every vector is stream l ---- */

#define MB_MAX 16

typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* Loads block k of every lane and transposes: X[i] = word i of each lane's
 * block.  Rows (one lane's words) become columns with unpack and shuffle
 * instructions: 48 of them for 8 lanes, 64 for 16, where element-wise
 * moves would take 128 or 256 loads and stores. */
__attribute__((target("avx2"), always_inline)) static inline void load8(v8u X[16],
                                                         const uint8_t *const ptr[MB_MAX],
                                                         const size_t step[MB_MAX], size_t k)
{
    for (unsigned half = 0; half < 2; half++) {
        __m256i r[8], t[8], u[8];
        for (unsigned l = 0; l < 8; l++)
            r[l] = _mm256_loadu_si256((const __m256i *)(ptr[l] + k * step[l] + 32 * half));
        for (unsigned l = 0; l < 8; l += 2) {
            t[l] = _mm256_unpacklo_epi32(r[l], r[l + 1]);
            t[l + 1] = _mm256_unpackhi_epi32(r[l], r[l + 1]);
        }
        for (unsigned l = 0; l < 8; l += 4) {
            u[l] = _mm256_unpacklo_epi64(t[l], t[l + 2]);
            u[l + 1] = _mm256_unpackhi_epi64(t[l], t[l + 2]);
            u[l + 2] = _mm256_unpacklo_epi64(t[l + 1], t[l + 3]);
            u[l + 3] = _mm256_unpackhi_epi64(t[l + 1], t[l + 3]);
        }
        /* u[m] (rows 0-3) and u[4 + m] (rows 4-7) hold words m and m + 4. */
        for (unsigned m = 0; m < 4; m++) {
            X[8 * half + m] = (v8u)_mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
            X[8 * half + m + 4] = (v8u)_mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
        }
    }
}

__attribute__((target("avx512f"), always_inline)) static inline void load16(v16u X[16],
                                                             const uint8_t *const ptr[MB_MAX],
                                                             const size_t step[MB_MAX], size_t k)
{
    __m512i r[16], t[16], u[16];
    for (unsigned l = 0; l < 16; l++)
        r[l] = _mm512_loadu_si512((const void *)(ptr[l] + k * step[l]));
    for (unsigned l = 0; l < 16; l += 2) {
        t[l] = _mm512_unpacklo_epi32(r[l], r[l + 1]);
        t[l + 1] = _mm512_unpackhi_epi32(r[l], r[l + 1]);
    }
    /* u[4q + m], 128-bit part j: rows 4q..4q+3 of word 4j + m. */
    for (unsigned q = 0; q < 16; q += 4) {
        u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
        u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
        u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
        u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
    }
    /* A 4x4 transpose of 128-bit parts for each m. */
    for (unsigned m = 0; m < 4; m++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);
        __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
        __m512i v3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
        X[m] = (v16u)_mm512_shuffle_i32x4(v0, v2, 0x88);
        X[4 + m] = (v16u)_mm512_shuffle_i32x4(v0, v2, 0xDD);
        X[8 + m] = (v16u)_mm512_shuffle_i32x4(v1, v3, 0x88);
        X[12 + m] = (v16u)_mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* AVX2: the generic step on GCC vector types, with a + x + k summed before
 * f joins it (the empty asm keeps GCC from reassociating), so that one add
 * less sits on the chain from one step to the next. */
#define MD5_STEP_AVX2(f, a, b, c, d, X, i, k, s)                                                   \
    do {                                                                                           \
        v8u t_ = (a) + X[i] + (uint32_t)(k);                                                       \
        __asm__("" : "+x"(t_));                                                                    \
        t_ += f((b), (c), (d));                                                                    \
        (a) = ((t_ << (s)) | (t_ >> (32 - (s)))) + (b);                                            \
    } while (0)
#define MB_VADD(x, y) ((x) + (y))

/* AVX-512: each of F, G, H and I is one vpternlogd (the immediates below
 * are their truth tables over b, c, d) and the rotation one vprold.  The
 * step is written so that a + x + k is summed before f joins it: the chain
 * from one step to the next is then ternlog, add, rotate, add (5 cycles
 * where vprold takes 2), where GCC's own order for the generic form adds a
 * sixth and more.  The empty asm keeps GCC from reassociating the sum. */
#define TL_MD5_F 0xca
#define TL_MD5_G 0xe4
#define TL_MD5_H 0x96
#define TL_MD5_I 0x39
#define MD5_STEP_AVX512(PFX, f, a, b, c, d, X, i, k, s)                                           \
    do {                                                                                           \
        __typeof__(a) t_ = PFX##_add_epi32((a), PFX##_add_epi32(X[i], PFX##_set1_epi32((int)(k)))); \
        __asm__("" : "+v"(t_));                                                                    \
        t_ = PFX##_add_epi32(t_, PFX##_ternarylogic_epi32((b), (c), (d), TL_##f));                 \
        (a) = PFX##_add_epi32(PFX##_rol_epi32(t_, (s)), (b));                                      \
    } while (0)
#define MD5_STEP_Y(f, a, b, c, d, X, i, k, s) MD5_STEP_AVX512(_mm256, f, a, b, c, d, X, i, k, s)
#define MD5_STEP_Z(f, a, b, c, d, X, i, k, s) MD5_STEP_AVX512(_mm512, f, a, b, c, d, X, i, k, s)

/* Hashes nblk blocks of each lane: lane l's block k is at ptr[l] + k *
 * step[l] (step 0 keeps an idle lane on one harmless block).  st[j][l] is
 * state word j of lane l.  VT is the state's vector type, GVT the one LOAD
 * fills, STEP one MD5 step and ADD a lane-wise add. */
#define DEFINE_MB(name, VT, TGT, GVT, LOAD, STEP, ADD, AHEAD)                                      \
    __attribute__((target(TGT))) static void name(uint32_t st[4][MB_MAX],                          \
                                                  const uint8_t *const ptr[MB_MAX],                \
                                                  const size_t step[MB_MAX], size_t nblk)          \
    {                                                                                              \
        VT a0, b0, c0, d0;                                                                         \
        memcpy(&a0, st[0], sizeof(VT));                                                            \
        memcpy(&b0, st[1], sizeof(VT));                                                            \
        memcpy(&c0, st[2], sizeof(VT));                                                            \
        memcpy(&d0, st[3], sizeof(VT));                                                            \
        GVT G[16];                                                                                 \
        if (AHEAD && nblk > 0)                                                                     \
            LOAD(G, ptr, step, 0);                                                                 \
        for (size_t k = 0; k < nblk; k++) {                                                        \
            VT X[16];                                                                              \
            if (!AHEAD)                                                                            \
                LOAD(G, ptr, step, k);                                                             \
            memcpy(X, G, sizeof(X));                                                               \
            /* AHEAD: the next block's words are loaded and transposed before  \
             * this block's steps, which do not need them and leave the vector \
             * units mostly idle, each waiting on the one before.  (At 16 lanes, \
             * and with AVX2's 16 registers, they run short and it costs more  \
             * than it saves.) */                                               \
            if (AHEAD && k + 1 < nblk)                                                             \
                LOAD(G, ptr, step, k + 1);                                                         \
            VT a = a0, b = b0, c = c0, d = d0;                                                     \
            MD5_ROUNDS_WITH(STEP, a, b, c, d, X);                                                  \
            a0 = ADD(a0, a);                                                                       \
            b0 = ADD(b0, b);                                                                       \
            c0 = ADD(c0, c);                                                                       \
            d0 = ADD(d0, d);                                                                       \
        }                                                                                          \
        memcpy(st[0], &a0, sizeof(VT));                                                            \
        memcpy(st[1], &b0, sizeof(VT));                                                            \
        memcpy(st[2], &c0, sizeof(VT));                                                            \
        memcpy(st[3], &d0, sizeof(VT));                                                            \
    }

DEFINE_MB(mb8_avx2, v8u, "avx2", v8u, load8, MD5_STEP_AVX2, MB_VADD, 0)
DEFINE_MB(mb8_avx512, __m256i, "avx512f,avx512vl", v8u, load8, MD5_STEP_Y, _mm256_add_epi32, 1)
DEFINE_MB(mb16_avx512, __m512i, "avx512f", v16u, load16, MD5_STEP_Z, _mm512_add_epi32, 0)

typedef void (*mb_fn)(uint32_t st[4][MB_MAX], const uint8_t *const ptr[MB_MAX],
                      const size_t step[MB_MAX], size_t nblk);

/* ---- implementation choice ---- */

static int cpu_lanes = -1; /* what the CPU supports: 1, 8 or 16; -1 unknown */
static int use_lanes = -1; /* what is used (ol_md5_force_lanes may lower it) */
static bool cpu_avx512vl;

static void detect(void)
{
    if (cpu_lanes >= 0)
        return;
    __builtin_cpu_init();
    int l = 1;
    if (__builtin_cpu_supports("avx2"))
        l = 8;
    if (__builtin_cpu_supports("avx512f"))
        l = 16;
    cpu_avx512vl = l == 16 && __builtin_cpu_supports("avx512vl");
    /* Racing first calls from two threads compute and store the same values. */
    cpu_lanes = l;
    if (use_lanes < 0)
        use_lanes = l;
}

unsigned ol_md5_lanes(void)
{
    detect();
    return (unsigned)use_lanes;
}

unsigned ol_md5_force_lanes(unsigned lanes)
{
    detect();
    int l = (int)lanes;
    if (l != 1 && l != 8 && l != 16)
        l = cpu_lanes;
    if (l > cpu_lanes)
        l = cpu_lanes;
    use_lanes = l;
    return (unsigned)l;
}

/* The SIMD routine for n streams, and its width; NULL for one stream. */
static mb_fn pick(size_t n, unsigned *width)
{
    detect();
    if (n < 2 || use_lanes == 1)
        return NULL;
    if (use_lanes == 16 && n > 8) {
        *width = 16;
        return mb16_avx512;
    }
    *width = 8;
    return use_lanes == 16 && cpu_avx512vl ? mb8_avx512 : mb8_avx2;
}

/* ---- the streams ---- */

void ol_md5_init(struct ol_md5 *m)
{
    m->h[0] = 0x67452301;
    m->h[1] = 0xefcdab89;
    m->h[2] = 0x98badcfe;
    m->h[3] = 0x10325476;
    m->nbytes = 0;
}

static __thread struct ol_md5_stats tl_stats;

/* Takes the bytes that complete m's buffered partial block (hashing it) and
 * stashes the bytes after p's last whole block; returns through *blk and
 * *nblk the whole blocks left to hash from p. */
static void split(struct ol_md5 *m, const uint8_t *p, size_t n, const uint8_t **blk, size_t *nblk)
{
    size_t have = (size_t)(m->nbytes % 64);
    m->nbytes += n;
    if (have) {
        size_t take = 64 - have < n ? 64 - have : n;
        memcpy(m->buf + have, p, take);
        p += take;
        n -= take;
        if (have + take < 64) {
            *nblk = 0;
            *blk = p;
            return;
        }
        compress1(m->h, m->buf, 1);
        tl_stats.scalar_blocks++;
    }
    *blk = p;
    *nblk = n / 64;
    memcpy(m->buf, p + *nblk * 64, n % 64);
}

void ol_md5_update(struct ol_md5 *m, const void *p, size_t n)
{
    const uint8_t *blk;
    size_t nblk;
    split(m, p, n, &blk, &nblk);
    compress1(m->h, blk, nblk);
    tl_stats.scalar_blocks += nblk;
}

void ol_md5_final(struct ol_md5 *m, uint8_t out[16])
{
    uint64_t bits = m->nbytes * 8;
    size_t have = (size_t)(m->nbytes % 64);
    m->buf[have++] = 0x80;
    if (have > 56) {
        memset(m->buf + have, 0, 64 - have);
        compress1(m->h, m->buf, 1);
        have = 0;
    }
    memset(m->buf + have, 0, 56 - have);
    memcpy(m->buf + 56, &bits, 8);
    compress1(m->h, m->buf, 1);
    memcpy(out, m->h, 16);
}

void ol_md5(const void *p, size_t n, uint8_t out[16])
{
    struct ol_md5 m;
    ol_md5_init(&m);
    ol_md5_update(&m, p, n);
    ol_md5_final(&m, out);
}

/* A block every idle lane hashes in place: its result is thrown away. */
static const uint8_t idle_block[64];

/* Whole blocks of one stream still to hash. */
struct mb_job {
    uint32_t *h;
    const uint8_t *p;
    size_t nblk;
};

/* Hashes the jobs' blocks, streams side by side.  Lanes take jobs in order;
 * a lane whose job ends takes the next, and the active lanes are packed low
 * so that 8-lane rounds are used when 8 or fewer streams remain.  Each SIMD
 * call runs until the shortest active job ends.  When one job is left,
 * lanes would idle: with leave_last it is left unfinished (its p and nblk
 * say what remains) for a later batch, otherwise it finishes scalar. */
static void mb_run(struct mb_job *js, size_t nj, bool leave_last)
{
    unsigned maxw = 1;
    if (pick(nj, &maxw) == NULL) {
        for (size_t i = 0; i < nj; i++) {
            compress1(js[i].h, js[i].p, js[i].nblk);
            tl_stats.scalar_blocks += js[i].nblk;
            js[i].p += js[i].nblk * 64;
            js[i].nblk = 0;
        }
        return;
    }
    /* The widest rounds available; pick() said 8 only for few jobs. */
    maxw = (unsigned)use_lanes;
    uint32_t st[4][MB_MAX] __attribute__((aligned(64)));
    const uint8_t *ptr[MB_MAX];
    size_t step[MB_MAX];
    struct mb_job *lane[MB_MAX];
    unsigned active = 0;
    size_t next = 0;
    for (size_t guard = 0; guard <= 2 * nj + 2; guard++) {
        /* Fill free lanes (they are all above the active ones). */
        while (active < maxw && next < nj) {
            struct mb_job *j = &js[next++];
            if (j->nblk == 0)
                continue;
            lane[active] = j;
            ptr[active] = j->p;
            step[active] = 64;
            for (unsigned k = 0; k < 4; k++)
                st[k][active] = j->h[k];
            active++;
        }
        if (active == 0)
            break;
        if (active == 1) {
            struct mb_job *j = lane[0];
            for (unsigned k = 0; k < 4; k++)
                j->h[k] = st[k][0];
            if (!leave_last) {
                compress1(j->h, j->p, j->nblk);
                tl_stats.scalar_blocks += j->nblk;
                j->p += j->nblk * 64;
                j->nblk = 0;
            }
            break;
        }
        size_t run = SIZE_MAX;
        for (unsigned l = 0; l < active; l++)
            if (lane[l]->nblk < run)
                run = lane[l]->nblk;
        if (active == 2) {
            uint32_t h0[4], h1[4];
            for (unsigned k = 0; k < 4; k++) {
                h0[k] = st[k][0];
                h1[k] = st[k][1];
            }
            compress2(h0, ptr[0], h1, ptr[1], run);
            for (unsigned k = 0; k < 4; k++) {
                st[k][0] = h0[k];
                st[k][1] = h1[k];
            }
            tl_stats.scalar_blocks += 2 * run;
            goto retire;
        }
        unsigned W = 1;
        mb_fn fn = pick(active, &W);
        OL_ASSERT(fn != NULL && W >= active);
        for (unsigned l = active; l < W; l++) {
            ptr[l] = idle_block;
            step[l] = 0;
        }
        fn(st, ptr, step, run);
        tl_stats.simd_rounds += run;
        tl_stats.simd_blocks += run * active;
    retire:;
        /* Retire finished lanes and pack the rest low. */
        unsigned keep = 0;
        for (unsigned l = 0; l < active; l++) {
            struct mb_job *j = lane[l];
            j->p += run * 64;
            j->nblk -= run;
            if (j->nblk == 0) {
                for (unsigned k = 0; k < 4; k++)
                    j->h[k] = st[k][l];
                continue;
            }
            if (keep != l) {
                lane[keep] = j;
                ptr[keep] = j->p;
                for (unsigned k = 0; k < 4; k++)
                    st[k][keep] = st[k][l];
            } else {
                ptr[keep] = j->p;
            }
            step[keep] = 64;
            keep++;
        }
        active = keep;
    }
}

void ol_md5_update_many(struct ol_md5_job *jobs, size_t njobs)
{
    struct mb_job js[64];
    for (size_t done = 0; done < njobs;) {
        size_t chunk = njobs - done < 64 ? njobs - done : 64;
        for (size_t i = 0; i < chunk; i++) {
            struct ol_md5_job *j = &jobs[done + i];
            js[i].h = j->m->h;
            split(j->m, j->p, j->n, &js[i].p, &js[i].nblk);
        }
        mb_run(js, chunk, false);
        done += chunk;
    }
}

/* ---- deferred hashing: one queue for the process ---- */

/* Every stream of the process, and how many are ready (a chunk queued and
 * none of theirs being hashed).  A batch claims the oldest chunk of every
 * ready stream under the lock, marking the stream busy (a stream's chunks
 * are hashed in order, one at a time), hashes them without the lock, and
 * retires them under it again.  So loop threads hash each other's bodies:
 * with 4 bodies on 2 loops, a batch is 4 lanes wide, not 2. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t done; /* a batch was retired (for waiters off a loop) */
    struct ol_md5_async *list;
    unsigned n, ready;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

/* Loop ticks a fiber gives other bodies to queue a chunk before hashing its
 * own alone (wait_locked). */
enum { MD5_WAIT_YIELDS = 16 };

static bool stream_ready(const struct ol_md5_async *s)
{
    return s->count > 0 && !s->busy;
}

/* Whether enough streams are ready to fill a batch's lanes (g.mu held):
 * one per lane, or every stream there is.  With 16 lanes, 8 will do: an
 * 8-lane round hashes nearly as much per cycle, and 16 streams all ready
 * at once are rarer than 8. */
static bool batch_full(void)
{
    unsigned want = use_lanes < 8 ? (unsigned)use_lanes : 8;
    if (want > g.n)
        want = g.n;
    return g.ready > 0 && g.ready >= want;
}

void ol_md5_async_begin(struct ol_md5_async *s)
{
    detect();
    ol_md5_init(&s->m);
    s->head = s->count = 0;
    s->busy = false;
    s->waiter = NULL;
    s->added = s->hashed = 0;
    s->prev = NULL;
    pthread_mutex_lock(&g.mu);
    s->next = g.list;
    if (g.list)
        g.list->prev = s;
    g.list = s;
    g.n++;
    pthread_mutex_unlock(&g.mu);
}

/* One batch, called and returning with g.mu held: the oldest queued chunk
 * of every ready stream, side by side.  Returns false if none was ready. */
static bool batch_locked(void)
{
    struct ol_md5_job jobs[64];
    struct ol_md5_async *who[64];
    size_t n = 0;
    for (struct ol_md5_async *s = g.list; s && n < 64; s = s->next) {
        if (!stream_ready(s))
            continue;
        jobs[n] = (struct ol_md5_job){.m = &s->m, .p = s->q[s->head].p, .n = s->q[s->head].n};
        s->busy = true;
        g.ready--;
        who[n++] = s;
    }
    if (n == 0)
        return false;
    pthread_mutex_unlock(&g.mu);
    /* Busy streams are ours alone: their contexts and chunks are read and
     * written here, and no one else touches them until they are retired. */
    ol_md5_update_many(jobs, n);
    tl_stats.batches++;
    tl_stats.jobs += n;
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < n; i++) {
        struct ol_md5_async *s = who[i];
        s->head = (s->head + 1) % OL_MD5_ASYNC_MAX;
        s->hashed++;
        s->count--;
        s->busy = false;
        if (s->count > 0)
            g.ready++;
        if (s->waiter) {
            ol_completion_signal(s->waiter, 0);
            s->waiter = NULL;
        }
    }
    pthread_cond_broadcast(&g.done);
    return true;
}

/* Waits (g.mu held, and released meanwhile) until the batch hashing s's
 * chunk retires it.  A fiber parks, so that its loop goes on serving other
 * fibers; a plain thread blocks. */
static void wait_busy_locked(struct ol_md5_async *s)
{
    tl_stats.waits++;
    if (!ol_fiber_current()) {
        pthread_cond_wait(&g.done, &g.mu);
        return;
    }
    struct ol_completion c;
    ol_completion_init(&c);
    OL_ASSERT(s->waiter == NULL);
    s->waiter = &c;
    pthread_mutex_unlock(&g.mu);
    ol_completion_wait(&c);
    pthread_mutex_lock(&g.mu);
}

/* Until chunk seq of s is hashed (g.mu held): hashes when s is ready, and
 * while another thread has s's chunk, hashes other streams' or waits. */
static void wait_locked(struct ol_md5_async *s, uint64_t seq)
{
    unsigned yields = 0;
    while (s->hashed <= seq && s->count > 0) {
        /* Alone in the batch, s's chunk would be hashed by the scalar code,
         * at a fifth of a full SIMD round's speed per byte.  Other bodies
         * are being received: a fiber lets its loop run a few ticks first,
         * so that their next chunks arrive and hash beside s's (by their
         * thread or by this one). */
        if (stream_ready(s) && g.ready < 4 && g.n > 1 && yields < MD5_WAIT_YIELDS &&
            ol_fiber_current()) {
            yields++;
            pthread_mutex_unlock(&g.mu);
            ol_fiber_yield();
            pthread_mutex_lock(&g.mu);
            continue;
        }
        if (stream_ready(s))
            batch_locked();
        else if (!batch_locked())
            wait_busy_locked(s);
    }
}

uint64_t ol_md5_async_add(struct ol_md5_async *s, const void *p, size_t n)
{
    pthread_mutex_lock(&g.mu);
    /* A full queue makes room first. */
    if (s->count == OL_MD5_ASYNC_MAX)
        wait_locked(s, s->hashed);
    OL_ASSERT(s->count < OL_MD5_ASYNC_MAX);
    s->q[(s->head + s->count) % OL_MD5_ASYNC_MAX].p = p;
    s->q[(s->head + s->count) % OL_MD5_ASYNC_MAX].n = n;
    if (s->count++ == 0 && !s->busy)
        g.ready++;
    /* With the lanes as full as they will get, the batch runs now. */
    if (batch_full())
        batch_locked();
    uint64_t seq = s->added++;
    pthread_mutex_unlock(&g.mu);
    return seq;
}

void ol_md5_async_wait(struct ol_md5_async *s, uint64_t seq)
{
    pthread_mutex_lock(&g.mu);
    wait_locked(s, seq);
    OL_ASSERT(s->hashed > seq || seq >= s->added);
    pthread_mutex_unlock(&g.mu);
}

void ol_md5_async_end(struct ol_md5_async *s, uint8_t out[16])
{
    pthread_mutex_lock(&g.mu);
    if (out) {
        if (s->added > 0)
            wait_locked(s, s->added - 1);
        ol_md5_final(&s->m, out);
    }
    /* Unfinished chunks of a failed stream are dropped with it, once no
     * batch reads them any more. */
    while (s->busy)
        wait_busy_locked(s);
    if (s->count > 0)
        g.ready--;
    s->count = 0;
    if (s->prev)
        s->prev->next = s->next;
    else
        g.list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    g.n--;
    pthread_mutex_unlock(&g.mu);
}

void ol_md5_stats(struct ol_md5_stats *out)
{
    *out = tl_stats;
}
