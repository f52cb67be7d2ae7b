/* src/quant/gemm_int.c: int8 / int16 GEMM kernels (see gemm_int.h).
 *
 * Layouts. B is packed into panels of P columns (16 for 512-bit, 8 for
 * 256-bit registers); within a panel, for each group of G consecutive k
 * (G = 4 bytes for VPDPBUSD, 2 int16 for VPDPWSSD / VPMADDWD), the G values
 * of each column are adjacent, so one register load holds a group for P
 * columns and one 32-bit broadcast of A holds the matching G values of a
 * row. A is copied with its rows padded to the tile height and k padded to
 * a multiple of G with zeros (B's padding is zero too). Tiles of R rows x 2
 * panels keep 2R accumulator registers (R = 8 for AVX-512, 6 for AVX2).
 *
 * VPDPBUSD multiplies unsigned by signed bytes: A is stored as A + 128
 * (unsigned) and C = (A + 128) B - 128 * colsum(B).
 * Instruction references: Intel 64 and IA-32 Architectures Software
 * Developer's Manual, VPDPBUSD, VPDPWSSD, VPMADDWD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "src/quant/gemm_int.h"

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

int adapt_gemm_isa_available(enum adapt_gemm_isa isa)
{
    __builtin_cpu_init();
    switch (isa) {
    case ADAPT_GEMM_ISA_SCALAR: return 1;
    case ADAPT_GEMM_ISA_AVX2: return __builtin_cpu_supports("avx2");
    case ADAPT_GEMM_ISA_AVX512VNNI:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
    }
    return 0;
}

const char *adapt_gemm_isa_name(enum adapt_gemm_isa isa)
{
    static const char *const names[] = {"scalar", "avx2", "avx512vnni"};
    return names[isa];
}

/* ADAPT_GEMM_ISA: 1 and *isa when it names a version this CPU runs, 0 when unset or empty, -1
 * for a name not known, -2 for a version this CPU does not run */
static int isa_from_env(enum adapt_gemm_isa *isa)
{
    const char *e = getenv("ADAPT_GEMM_ISA");
    if (!e || !*e) return 0;
    for (int i = ADAPT_GEMM_ISA_SCALAR; i <= ADAPT_GEMM_ISA_AVX512VNNI; i++)
        if (!strcmp(e, adapt_gemm_isa_name((enum adapt_gemm_isa)i))) {
            if (!adapt_gemm_isa_available((enum adapt_gemm_isa)i)) return -2;
            *isa = (enum adapt_gemm_isa)i;
            return 1;
        }
    return -1;
}

const char *adapt_gemm_isa_env_error(void)
{
    static char msg[256];
    enum adapt_gemm_isa isa;
    const int r = isa_from_env(&isa);
    if (r >= 0) return NULL;
    const char *e = getenv("ADAPT_GEMM_ISA");
    if (r == -2)
        snprintf(msg, sizeof msg, "ADAPT_GEMM_ISA=%.64s: this CPU does not run it (best: %s)", e,
                 adapt_gemm_isa_name(adapt_gemm_isa_best()));
    else
        snprintf(msg, sizeof msg,
                 "ADAPT_GEMM_ISA=%.64s: expected scalar, avx2 or avx512vnni (or unset: the "
                 "best this CPU runs)",
                 e);
    return msg;
}

enum adapt_gemm_isa adapt_gemm_isa_best(void)
{
    enum adapt_gemm_isa isa;
    if (isa_from_env(&isa) > 0) return isa;
    if (adapt_gemm_isa_available(ADAPT_GEMM_ISA_AVX512VNNI)) return ADAPT_GEMM_ISA_AVX512VNNI;
    if (adapt_gemm_isa_available(ADAPT_GEMM_ISA_AVX2)) return ADAPT_GEMM_ISA_AVX2;
    return ADAPT_GEMM_ISA_SCALAR;
}

/* Geometry of one packed problem. */
struct geom {
    int R, P, G;      /* tile rows, panel columns, k group */
    int es;           /* bytes per packed element */
    int m_pad, kg;    /* padded rows; k groups */
    int npan;         /* panels, even */
    size_t a_bytes, b_bytes, cs_bytes;
};

static struct geom geom_of(enum adapt_gemm_isa isa, enum adapt_gemm_type t, int m, int n, int k)
{
    struct geom g;
    if (isa == ADAPT_GEMM_ISA_AVX512VNNI) {
        g.R = 8;
        g.P = 16;
        g.G = t == ADAPT_GEMM_S8 ? 4 : 2;
        g.es = t == ADAPT_GEMM_S8 ? 1 : 2;
    } else { /* avx2: int16 pairs for both types */
        g.R = 6;
        g.P = 8;
        g.G = 2;
        g.es = 2;
    }
    g.m_pad = ALIGN_UP(m, g.R);
    g.kg = (k + g.G - 1) / g.G;
    g.npan = ALIGN_UP((n + g.P - 1) / g.P, 2);
    g.a_bytes = ALIGN_UP((size_t)g.m_pad * g.kg * g.G * g.es, 64);
    g.b_bytes = ALIGN_UP((size_t)g.npan * g.kg * g.P * g.G * g.es, 64);
    g.cs_bytes = ALIGN_UP((size_t)n * sizeof(int32_t), 64);
    return g;
}

size_t adapt_gemm_int_workspace(enum adapt_gemm_type t, int m, int n, int k)
{
    size_t best = 64;
    for (int isa = ADAPT_GEMM_ISA_AVX2; isa <= ADAPT_GEMM_ISA_AVX512VNNI; isa++) {
        struct geom g = geom_of((enum adapt_gemm_isa)isa, t, m, n, k);
        size_t s = g.a_bytes + g.b_bytes + g.cs_bytes;
        if (s > best) best = s;
    }
    return best;
}

/* ------------------------------------------------------------------ packing */

/* B (k x n) into panels of P columns with groups of G consecutive k per
 * column; out-of-range entries are zero. Full groups of full panels take
 * the branch-free path. */
#define DEFINE_PACK_B(name, ST, DT, G, P)                                                          \
    static void name(int n, int k, int kg, int npan, const ST *B, DT *dst)                        \
    {                                                                                              \
        const size_t panel = (size_t)kg * (P) * (G);                                               \
        _Pragma("omp parallel for schedule(static)") for (int q = 0; q < kg; q++)                  \
        {                                                                                          \
            for (int p = 0; p < npan; p++) {                                                       \
                DT *d = dst + (size_t)p * panel + (size_t)q * (P) * (G);                           \
                const int j0 = p * (P);                                                            \
                if (q * (G) + (G) <= k && j0 + (P) <= n) {                                         \
                    for (int e = 0; e < (G); e++) {                                                \
                        const ST *s = B + (size_t)(q * (G) + e) * n + j0;                          \
                        for (int c = 0; c < (P); c++) d[c * (G) + e] = (DT)s[c];                   \
                    }                                                                              \
                } else {                                                                           \
                    for (int e = 0; e < (G); e++)                                                  \
                        for (int c = 0; c < (P); c++) {                                            \
                            int kk = q * (G) + e, j = j0 + c;                                      \
                            d[c * (G) + e] = kk < k && j < n ? (DT)B[(size_t)kk * n + j] : (DT)0;  \
                        }                                                                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_PACK_B(pack_b_s8_vnni, int8_t, int8_t, 4, 16)
DEFINE_PACK_B(pack_b_s16_vnni, int16_t, int16_t, 2, 16)
DEFINE_PACK_B(pack_b_s8_avx2, int8_t, int16_t, 2, 8)
DEFINE_PACK_B(pack_b_s16_avx2, int16_t, int16_t, 2, 8)

/* A (m x k) into m_pad rows of kg*G elements, zero padded; A + 128 as
 * unsigned bytes for VPDPBUSD. */
#define DEFINE_PACK_A(name, ST, DT, OFFSET)                                                       \
    static void name(int m, int k, int m_pad, int kp, const ST *A, DT *dst)                       \
    {                                                                                              \
        _Pragma("omp parallel for schedule(static)") for (int i = 0; i < m_pad; i++)               \
        {                                                                                          \
            DT *d = dst + (size_t)i * kp;                                                          \
            const ST *s = A + (size_t)i * k;                                                       \
            if (i < m) {                                                                           \
                for (int kk = 0; kk < k; kk++) d[kk] = (DT)(s[kk] + (OFFSET));                     \
                for (int kk = k; kk < kp; kk++) d[kk] = (DT)(OFFSET);                              \
            } else {                                                                               \
                for (int kk = 0; kk < kp; kk++) d[kk] = (DT)(OFFSET);                              \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_PACK_A(pack_a_u8_vnni, int8_t, uint8_t, 128)
DEFINE_PACK_A(pack_a_s16, int16_t, int16_t, 0)
DEFINE_PACK_A(pack_a_s8_to16, int8_t, int16_t, 0)

static void colsum_s8(int n, int k, const int8_t *B, int32_t *cs)
{
    for (int j = 0; j < n; j++) cs[j] = 0;
    for (int kk = 0; kk < k; kk++)
        for (int j = 0; j < n; j++) cs[j] += B[(size_t)kk * n + j];
}

static inline int32_t load32(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* -------------------------------------------------------------- AVX-512 VNNI */

/* One 8 x 32 tile: a = packed rows (row stride a_stride bytes), b0/b1 =
 * two panels; s16 selects VPDPWSSD over VPDPBUSD. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
adapt_gemm_tile_vnni(const uint8_t *a, size_t a_stride, const uint8_t *b0, const uint8_t *b1, int kg,
          int s16, int32_t out[8][32])
{
    __m512i c[8][2];
    for (int r = 0; r < 8; r++) c[r][0] = c[r][1] = _mm512_setzero_si512();
    if (s16) {
        for (int q = 0; q < kg; q++) {
            __m512i x0 = _mm512_loadu_si512(b0 + (size_t)q * 64);
            __m512i x1 = _mm512_loadu_si512(b1 + (size_t)q * 64);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                __m512i y = _mm512_set1_epi32(load32(a + r * a_stride + (size_t)q * 4));
                c[r][0] = _mm512_dpwssd_epi32(c[r][0], y, x0);
                c[r][1] = _mm512_dpwssd_epi32(c[r][1], y, x1);
            }
        }
    } else {
        for (int q = 0; q < kg; q++) {
            __m512i x0 = _mm512_loadu_si512(b0 + (size_t)q * 64);
            __m512i x1 = _mm512_loadu_si512(b1 + (size_t)q * 64);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                __m512i y = _mm512_set1_epi32(load32(a + r * a_stride + (size_t)q * 4));
                c[r][0] = _mm512_dpbusd_epi32(c[r][0], y, x0);
                c[r][1] = _mm512_dpbusd_epi32(c[r][1], y, x1);
            }
        }
    }
    for (int r = 0; r < 8; r++) {
        _mm512_storeu_si512(&out[r][0], c[r][0]);
        _mm512_storeu_si512(&out[r][16], c[r][1]);
    }
}

/* ------------------------------------------------------------------- AVX2 */

/* One 6 x 16 tile of int16 pairs with VPMADDWD. */
__attribute__((target("avx2"))) void adapt_gemm_tile_avx2(const uint8_t *a, size_t a_stride,
                                                          const uint8_t *b0, const uint8_t *b1,
                                                          int kg, int32_t out[6][16])
{
    __m256i c[6][2];
    for (int r = 0; r < 6; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
    for (int q = 0; q < kg; q++) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(b0 + (size_t)q * 32));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(b1 + (size_t)q * 32));
#pragma GCC unroll 6
        for (int r = 0; r < 6; r++) {
            __m256i y = _mm256_set1_epi32(load32(a + r * a_stride + (size_t)q * 4));
            c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(y, x0));
            c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(y, x1));
        }
    }
    for (int r = 0; r < 6; r++) {
        _mm256_storeu_si256((__m256i *)&out[r][0], c[r][0]);
        _mm256_storeu_si256((__m256i *)&out[r][8], c[r][1]);
    }
}

/* ----------------------------------------------------------------- drivers */

static void gemm_packed(enum adapt_gemm_isa isa, enum adapt_gemm_type t, int m, int n, int k,
                        const void *A, const void *B, int32_t *C, void *ws)
{
    struct geom g = geom_of(isa, t, m, n, k);
    uint8_t *ap = ws, *bp = ap + g.a_bytes;
    int32_t *cs = (int32_t *)(bp + g.b_bytes);
    int u8 = isa == ADAPT_GEMM_ISA_AVX512VNNI && t == ADAPT_GEMM_S8;
    const int kp = g.kg * g.G;
    if (isa == ADAPT_GEMM_ISA_AVX512VNNI && t == ADAPT_GEMM_S8) {
        pack_a_u8_vnni(m, k, g.m_pad, kp, A, (uint8_t *)ap);
        pack_b_s8_vnni(n, k, g.kg, g.npan, B, (int8_t *)bp);
        colsum_s8(n, k, B, cs);
    } else if (isa == ADAPT_GEMM_ISA_AVX512VNNI) {
        pack_a_s16(m, k, g.m_pad, kp, A, (int16_t *)ap);
        pack_b_s16_vnni(n, k, g.kg, g.npan, B, (int16_t *)bp);
    } else if (t == ADAPT_GEMM_S8) {
        pack_a_s8_to16(m, k, g.m_pad, kp, A, (int16_t *)ap);
        pack_b_s8_avx2(n, k, g.kg, g.npan, B, (int16_t *)bp);
    } else {
        pack_a_s16(m, k, g.m_pad, kp, A, (int16_t *)ap);
        pack_b_s16_avx2(n, k, g.kg, g.npan, B, (int16_t *)bp);
    }
    const size_t a_stride = (size_t)g.kg * g.G * g.es;
    const size_t panel = (size_t)g.kg * g.P * g.G * g.es;
    const int ntr = g.m_pad / g.R, ntc = g.npan / 2;
#pragma omp parallel for schedule(static)
    for (int tt = 0; tt < ntr * ntc; tt++) {
        int tr = tt % ntr, tc = tt / ntr;
        int32_t out[8][32];
        const uint8_t *a = ap + (size_t)tr * g.R * a_stride;
        const uint8_t *b0 = bp + (size_t)(2 * tc) * panel, *b1 = b0 + panel;
        if (isa == ADAPT_GEMM_ISA_AVX512VNNI) {
            adapt_gemm_tile_vnni(a, a_stride, b0, b1, g.kg, t == ADAPT_GEMM_S16, out);
        } else {
            int32_t o6[6][16];
            adapt_gemm_tile_avx2(a, a_stride, b0, b1, g.kg, o6);
            for (int r = 0; r < 6; r++) memcpy(out[r], o6[r], sizeof o6[r]);
        }
        int j0 = tc * 2 * g.P;
        for (int r = 0; r < g.R; r++) {
            int i = tr * g.R + r;
            if (i >= m) break;
            for (int c = 0; c < 2 * g.P && j0 + c < n; c++)
                C[(size_t)i * n + j0 + c] = out[r][c] - (u8 ? 128 * cs[j0 + c] : 0);
        }
    }
}

/* Plain loops, parallel over rows; int32 sums wrap (unsigned arithmetic). */
static void gemm_scalar_s8(int m, int n, int k, const int8_t *A, const int8_t *B, int32_t *C)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        uint32_t *c = (uint32_t *)(C + (size_t)i * n);
        for (int j = 0; j < n; j++) c[j] = 0;
        for (int kk = 0; kk < k; kk++) {
            uint32_t a = (uint32_t)(int32_t)A[(size_t)i * k + kk];
            const int8_t *b = B + (size_t)kk * n;
            for (int j = 0; j < n; j++) c[j] += a * (uint32_t)(int32_t)b[j];
        }
    }
}

static void gemm_scalar_s16(int m, int n, int k, const int16_t *A, const int16_t *B, int32_t *C)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        uint32_t *c = (uint32_t *)(C + (size_t)i * n);
        for (int j = 0; j < n; j++) c[j] = 0;
        for (int kk = 0; kk < k; kk++) {
            uint32_t a = (uint32_t)(int32_t)A[(size_t)i * k + kk];
            const int16_t *b = B + (size_t)kk * n;
            for (int j = 0; j < n; j++) c[j] += a * (uint32_t)(int32_t)b[j];
        }
    }
}

void adapt_gemm_s8(enum adapt_gemm_isa isa, int m, int n, int k, const int8_t *A, const int8_t *B,
                   int32_t *C, void *ws)
{
    if (isa == ADAPT_GEMM_ISA_SCALAR) gemm_scalar_s8(m, n, k, A, B, C);
    else gemm_packed(isa, ADAPT_GEMM_S8, m, n, k, A, B, C, ws);
}

void adapt_gemm_s16(enum adapt_gemm_isa isa, int m, int n, int k, const int16_t *A,
                    const int16_t *B, int32_t *C, void *ws)
{
    if (isa == ADAPT_GEMM_ISA_SCALAR) gemm_scalar_s16(m, n, k, A, B, C);
    else gemm_packed(isa, ADAPT_GEMM_S16, m, n, k, A, B, C, ws);
}

/* References: one dot product per output, serial, wrapping int32 sums. */
void adapt_gemm_s8_ref(int m, int n, int k, const int8_t *A, const int8_t *B, int32_t *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            uint32_t s = 0;
            for (int kk = 0; kk < k; kk++)
                s += (uint32_t)((int32_t)A[(size_t)i * k + kk] * (int32_t)B[(size_t)kk * n + j]);
            C[(size_t)i * n + j] = (int32_t)s;
        }
}

void adapt_gemm_s16_ref(int m, int n, int k, const int16_t *A, const int16_t *B, int32_t *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            uint32_t s = 0;
            for (int kk = 0; kk < k; kk++)
                s += (uint32_t)((int32_t)A[(size_t)i * k + kk] * (int32_t)B[(size_t)kk * n + j]);
            C[(size_t)i * n + j] = (int32_t)s;
        }
}
