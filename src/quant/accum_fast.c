/* src/quant/accum_fast.c: quant_acc_gemm, the fast path of the accumulator models: the values
 * of quant_acc_gemm_ref (src/quant/accum.c) bit for bit, and its overflow count.
 *
 * exact, and int registers that cannot overflow (or wrap without a count asked for): the
 * operands become integer codes (x 2^FL, checked on the grid), the sums are exact integers, and
 * only their magnitude bound picks the arithmetic:
 *   int8   codes in [-128, 127] and k max|a| max|b| < 2^31: int32 sums over all of k are exact
 *          (VPDPBUSD with A + 128, the column sums of B taking the offset back, mod 2^32)
 *   int16  codes in int16: int32 sums over blocks of kb products, kb max|a| max|b| < 2^31,
 *          each block's exact sum added into int64 (VPDPWSSD / VPMADDWD)
 *   int64  codes in int32: int64 sums (k max|a| max|b| < 2^63 for exact; a wrapping register
 *          only needs the sum modulo 2^64)
 * The exact integer S becomes float32 once, nearest-even: (float)S is correctly rounded and the
 * scaling by 2^-FL is exact (a nonzero |S| 2^-FL >= 2^-124 is normal), as float_of of the
 * reference (round-to-odd to double, then one rounding).
 * int registers that may overflow (the count is asked for, or saturation), or that drop product
 * bits (F < FLa + FLb, a floor per product): every addition in order p, lanes over output
 * columns, wrap by shifts or clamp, an overflow wherever the wrapped or clamped sum differs.
 * The lanes are as narrow as the register and its sums allow: int16 (AVX-512, registers up to
 * 16 bits over 8-bit codes), int32 (registers up to 31 bits), else int64. Each work item is a
 * panel of B's columns copied contiguous and every row of A (a block of them) run against it;
 * a row whose products' largest positive parts over the panel, and largest negative parts,
 * each sum to inside the register cannot overflow in any order, and takes its exact sums
 * without the checks.
 * Anything beyond 64-bit arithmetic (codes of 32 bits and more, registers over 62 bits with
 * possible overflow) takes a scalar path with 128-bit sums, the reference's own arithmetic.
 * float32: the sums in order, vectorised over output columns (this library has no FMA
 * contraction). float(fmt, K): the round-to-odd sums of the reference, each rounded to the
 * format by quant_array a tile of outputs at a time.
 *
 * Instruction sets: avx512vnni (with AVX-512 F/BW/DQ/VL), avx2, scalar, chosen at run time; the
 * vectorised loops are one body inlined into functions of each target. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/quant/accum_fast.h"
#include "src/quant/accum_impl.h"
#include "src/quant/quant.h"

#define TGT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2")))
#define TGT_AVX2 __attribute__((target("avx2")))
#define INLINE static inline __attribute__((always_inline))
/* return K(sh, hi) for sh = seq_shift(q) (0-3) and hi (0 or 1) known at compile time: the
 * sequential kernels instantiated for a product's shift and one more choice, out of the loop */
#define SEQ_DISPATCH(q, hi, K)                                                                     \
    switch (seq_shift(q) + 4 * (hi)) {                                                             \
    case 0: return K(0, 0);                                                                        \
    case 1: return K(1, 0);                                                                        \
    case 2: return K(2, 0);                                                                        \
    case 3: return K(3, 0);                                                                        \
    case 4: return K(0, 1);                                                                        \
    case 5: return K(1, 1);                                                                        \
    case 6: return K(2, 1);                                                                        \
    default: return K(3, 1);                                                                       \
    }

/* Work below which threads cost more than they save (multiply-adds). */
#define PAR_MIN_WORK ((double)(1 << 24))

const char *quant_acc_path_name(enum quant_acc_path p)
{
    static const char *const names[] = {"int8", "int16", "int64", "seq",
                                        "wide", "f32",   "float", "int128"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

static int in_parallel(void)
{
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

/* The threads a parallel region here gets (1 when par is 0). */
static int max_threads(int par)
{
#ifdef _OPENMP
    return par ? omp_get_max_threads() : 1;
#else
    (void)par;
    return 1;
#endif
}

/* ------------------------------------------------------------------ operands */


/* The error the reference reports: it checks A[i][p] then B[p][j] for i, j, p in order, so
 * the first one off its grid is in A's row 0 or B's column 0 at the first bad p, else in B's
 * later columns (row 0 of A passed), else in A's later rows (all of B passed). */
static enum adapt_status grid_error(int m, int n, int k, const float *A, ptrdiff_t lda, int fla,
                                    const float *B, ptrdiff_t ldb, int flb)
{
    int64_t c;
#define BAD_A(i, p)                                                                                \
    if (grid_int(A[(size_t)(i) * lda + (p)], fla, &c))                                             \
    return ADAPT_ERROR(ADAPT_EINVAL, "A[%d][%d] = %.9g is not a multiple of 2^-%d", (i), (p),      \
                       (double)A[(size_t)(i) * lda + (p)], fla)
#define BAD_B(p, j)                                                                                \
    if (grid_int(B[(size_t)(p) * ldb + (j)], flb, &c))                                             \
    return ADAPT_ERROR(ADAPT_EINVAL, "B[%d][%d] = %.9g is not a multiple of 2^-%d", (p), (j),      \
                       (double)B[(size_t)(p) * ldb + (j)], flb)
    for (int p = 0; p < k; p++) {
        BAD_A(0, p);
        BAD_B(p, 0);
    }
    for (int j = 1; j < n; j++)
        for (int p = 0; p < k; p++) BAD_B(p, j);
    for (int i = 1; i < m; i++)
        for (int p = 0; p < k; p++) BAD_A(i, p);
#undef BAD_A
#undef BAD_B
    return ADAPT_ERROR(ADAPT_EINVAL, "an operand is off its grid"); /* not reached */
}

struct codes {
    int bad, wide;  /* off the grid; on it but outside int32 */
    int64_t lo, hi; /* the smallest and largest int32 codes */
};

/* One row of codes: x[c] 2^fl in float32 is exact (a power of two scales a finite float
 * exactly, and an overflow to inf is beyond 2^62 anyway); below 2^31 in magnitude it is on the
 * grid when it converts to int32 and back unchanged, from 2^31 on every float is an integer,
 * on the grid and wide below 2^62. The blends before each conversion keep the loop free of
 * out-of-range conversions, so it vectorises. */
INLINE void codes_row_body(const float *x, int cols, float sc, int32_t *o, int *bad, int *wide,
                           int32_t *lo, int32_t *hi)
{
    int b = 0, w = 0;
    int32_t l = 0, h = 0;
    for (int c = 0; c < cols; c++) {
        const float t = x[c] * sc, a = fabsf(t);
        const int fits = a < 0x1p31f, big = !fits && a < 0x1p62f; /* NaN: neither */
        const int32_t v = (int32_t)(fits ? t : 0.0f);
        b |= (fits & ((float)v != t)) | (!fits & !big);
        w |= big;
        o[c] = v;
        l = v < l ? v : l;
        h = v > h ? v : h;
    }
    *bad |= b;
    *wide |= w;
    *lo = l < *lo ? l : *lo;
    *hi = h > *hi ? h : *hi;
}
static void codes_row_scalar(const float *x, int cols, float sc, int32_t *o, int *bad, int *wide,
                             int32_t *lo, int32_t *hi)
{
    codes_row_body(x, cols, sc, o, bad, wide, lo, hi);
}
TGT_AVX2 static void codes_row_avx2(const float *x, int cols, float sc, int32_t *o, int *bad,
                                    int *wide, int32_t *lo, int32_t *hi)
{
    codes_row_body(x, cols, sc, o, bad, wide, lo, hi);
}
TGT_AVX512 static void codes_row_avx512(const float *x, int cols, float sc, int32_t *o, int *bad,
                                        int *wide, int32_t *lo, int32_t *hi)
{
    codes_row_body(x, cols, sc, o, bad, wide, lo, hi);
}

/* X (rows x cols, row stride ld) x 2^fl into int32 codes out (rows x cols, dense). */
static void to_codes(enum adapt_gemm_isa isa, const float *X, ptrdiff_t ld, int rows, int cols,
                     int fl, int32_t *out, struct codes *cs, int par)
{
    const float sc = ldexpf(1.0f, fl);
    int bad = 0, wide = 0;
    int32_t lo = 0, hi = 0;
#pragma omp parallel for schedule(static) reduction(| : bad, wide) reduction(min : lo)            \
    reduction(max : hi) if (par)
    for (int r = 0; r < rows; r++) {
        const float *x = X + (size_t)r * ld;
        int32_t *o = out + (size_t)r * cols;
        if (isa == ADAPT_GEMM_ISA_AVX512VNNI)
            codes_row_avx512(x, cols, sc, o, &bad, &wide, &lo, &hi);
        else if (isa == ADAPT_GEMM_ISA_AVX2)
            codes_row_avx2(x, cols, sc, o, &bad, &wide, &lo, &hi);
        else
            codes_row_scalar(x, cols, sc, o, &bad, &wide, &lo, &hi);
    }
    cs->bad = bad;
    cs->wide = wide;
    cs->lo = lo;
    cs->hi = hi;
}

/* ------------------------------------------------------------------ results */

/* What an integer sum S (at 2^-fl of the products, exact or modulo 2^64) becomes. */
struct fin {
    int reg;   /* 0: exact; 1: an int register (S shifted left by sh, wrapped to bits) */
    int sh, bits;
    float scale; /* 2^-(the register's fractional bits), a normal float */
};

static inline float fin_value(const struct fin *f, uint64_t s)
{
    int64_t v = (int64_t)s;
    if (f->reg) {
        uint64_t u = s << f->sh;
        v = f->bits == 64 ? (int64_t)u : (int64_t)(u << (64 - f->bits)) >> (64 - f->bits);
    }
    return (float)v * f->scale;
}

/* ------------------------------------------------------------------ int64 rows */

/* acc[j] (j < n) = sum over p of a[p] b[p][j] modulo 2^64 (b's rows ldb apart); zero codes of
 * a (ReLU outputs) are skipped. */
INLINE void i64_row_body(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                         uint64_t *acc)
{
    for (int j = 0; j < n; j++) acc[j] = 0;
    for (int p = 0; p < k; p++) {
        const int64_t av = a[p];
        if (!av) continue;
        const int32_t *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < n; j++) acc[j] += (uint64_t)(av * (int64_t)bp[j]);
    }
}
static void i64_row_scalar(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                           uint64_t *acc)
{
    i64_row_body(k, n, a, b, ldb, acc);
}
TGT_AVX2 static void i64_row_avx2(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                                  uint64_t *acc)
{
    i64_row_body(k, n, a, b, ldb, acc);
}
TGT_AVX512 static void i64_row_avx512(int k, int n, const int32_t *a, const int32_t *b,
                                      size_t ldb, uint64_t *acc)
{
    i64_row_body(k, n, a, b, ldb, acc);
}

/* The exact sums of a[p] b[p][j] over p < k as 128-bit integers hi[j] 2^64 + lo[j]: each
 * product (at most 2^62 in magnitude) added to the low word, its carry and sign into the high
 * one, so the lanes stay 64-bit vectors. Zero codes of a are skipped (ReLU outputs). */
INLINE void i128_row_body(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                          uint64_t *lo, int64_t *hi)
{
    for (int j = 0; j < n; j++) lo[j] = 0, hi[j] = 0;
    for (int p = 0; p < k; p++) {
        const int64_t av = a[p];
        if (!av) continue;
        const int32_t *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < n; j++) {
            const int64_t pr = av * (int64_t)bp[j];
            const uint64_t l = lo[j] + (uint64_t)pr;
            hi[j] += (pr >> 63) + (int64_t)(l < (uint64_t)pr);
            lo[j] = l;
        }
    }
}
static void i128_row_scalar(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                            uint64_t *lo, int64_t *hi)
{
    i128_row_body(k, n, a, b, ldb, lo, hi);
}
TGT_AVX2 static void i128_row_avx2(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                                   uint64_t *lo, int64_t *hi)
{
    i128_row_body(k, n, a, b, ldb, lo, hi);
}
TGT_AVX512 static void i128_row_avx512(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                                       uint64_t *lo, int64_t *hi)
{
    i128_row_body(k, n, a, b, ldb, lo, hi);
}

/* acc[j] += the int32 sums (wrapping) of a[p] b[p][j] over p < k. */
INLINE void i32_row_body(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                         uint32_t *t, uint64_t *acc)
{
    for (int j = 0; j < n; j++) t[j] = 0;
    for (int p = 0; p < k; p++) {
        const uint32_t av = (uint32_t)a[p];
        const int32_t *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < n; j++) t[j] += av * (uint32_t)bp[j];
    }
    for (int j = 0; j < n; j++) acc[j] += (uint64_t)(int64_t)(int32_t)t[j];
}
static void i32_row_scalar(int k, int n, const int32_t *a, const int32_t *b, size_t ldb,
                           uint32_t *t, uint64_t *acc)
{
    i32_row_body(k, n, a, b, ldb, t, acc);
}

/* ------------------------------------------------------------------ sequential int registers */

struct seq {
    int lsh, rsh, wsh, sat; /* (product << lsh) + rnd >> rsh; wrap: << wsh >> wsh; or clamp */
    int64_t rnd;            /* 2^(rsh-1) when products are rounded to the binary point, else 0 */
    int p32;                /* every |product| + rnd below 2^31 */
    int l32;                /* every |sum| + |product| below 2^31: int32 lanes */
    int m16;                /* every code of A and B fits int16 */
    int l16;                /* int16 lanes (seq16_avx512) */
    int64_t lo, hi;
};

#define SEQ_JB 64  /* columns of one sequential kernel call (four AVX-512 vectors of int32) */
#define SEQ_MB 128 /* rows that share one packed panel of B (at most) */
#define SEQ_CH 16  /* products of a stretch of the int64 kernel (seq64_kernel) */

/* One row of A against columns [0, jn) of B (jn <= SEQ_JB): every addition in order. Each row
 * kernel below writes the row's sums to s and returns its number of overflows. */
INLINE uint64_t seq_loop(const struct seq *q, int k, int jn, const int32_t *a, const int32_t *b,
                         size_t ldb, int64_t *s, int p32, int sat)
{
    const int lsh = q->lsh, rsh = q->rsh, wsh = q->wsh;
    const int64_t lo = q->lo, hi = q->hi, rnd = q->rnd;
    int64_t ov[SEQ_JB];
    for (int j = 0; j < jn; j++) s[j] = ov[j] = 0;
    for (int p = 0; p < k; p++) {
        const int64_t av = a[p];
        const int32_t *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < jn; j++) {
            /* p32: every product fits int32, a 32-bit multiply widened */
            const int64_t m = p32 ? (int64_t)((int32_t)av * bp[j]) : av * (int64_t)bp[j];
            const int64_t prod = ((int64_t)((uint64_t)m << lsh) + rnd) >> rsh;
            const int64_t t = s[j] + prod;
            const int64_t wr = (int64_t)((uint64_t)t << wsh) >> wsh;
            const int64_t cl = t > hi ? hi : t < lo ? lo : t;
            const int64_t w = sat ? cl : wr;
            ov[j] += w != t;
            s[j] = w;
        }
    }
    uint64_t n = 0;
    for (int j = 0; j < jn; j++) n += (uint64_t)ov[j];
    return n;
}
/* The register's rule in int32 lanes: SEQ_WRAP, SEQ_SAT, or SEQ_NONE for a row whose partial
 * sums are known to stay inside the register (no overflow to look for). */
enum { SEQ_WRAP, SEQ_SAT, SEQ_NONE };

/* seq_loop in int32 lanes (q->l32: a register of at most 31 bits, every shifted product and
 * every sum of one with a register value below 2^31 in magnitude; or SEQ_NONE, whose sums
 * stay below 2^31), twice the lanes of int64 per instruction; the same additions, so the same
 * values and counts. */
INLINE uint64_t seq32_loop(const struct seq *q, int k, int jn, const int32_t *a, const int32_t *b,
                           size_t ldb, int64_t *s, int rule)
{
    /* (wsh only for a register of at most 32 bits: SEQ_NONE rows of wider ones do not wrap) */
    const int lsh = q->lsh, rsh = q->rsh, wsh = q->wsh >= 32 ? q->wsh - 32 : 0;
    const int32_t lo = (int32_t)q->lo, hi = (int32_t)q->hi, rnd = (int32_t)q->rnd;
    int32_t s32[SEQ_JB], o32[SEQ_JB];
    for (int j = 0; j < SEQ_JB; j++) s32[j] = o32[j] = 0;
    for (int p = 0; p < k; p++) {
        const int32_t av = a[p];
        const int32_t *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < jn; j++) {
            const int32_t prod = ((int32_t)((uint32_t)(av * bp[j]) << lsh) + rnd) >> rsh;
            const int32_t t = s32[j] + prod;
            const int32_t wr = (int32_t)((uint32_t)t << wsh) >> wsh;
            const int32_t cl = t > hi ? hi : t < lo ? lo : t;
            const int32_t w = rule == SEQ_SAT ? cl : rule == SEQ_WRAP ? wr : t;
            o32[j] += w != t;
            s32[j] = w;
        }
    }
    uint64_t n = 0;
    for (int j = 0; j < jn; j++) {
        s[j] = s32[j];
        n += (uint64_t)o32[j];
    }
    return n;
}
/* One row against columns [0, jn): in int32 lanes when the row is safe (its partial sums stay
 * inside the register) or the register's lanes fit, else in int64 lanes. */
/* The rule of a row: int32 lanes without checks for a row whose partial sums stay inside the
 * register (safe), with the register's rule when its lanes fit (q->l32); -1: int64 lanes. */
static inline int seq_rule(const struct seq *q, int safe)
{
    return safe ? SEQ_NONE : !q->l32 ? -1 : q->sat ? SEQ_SAT : SEQ_WRAP;
}
/* How the AVX-512 kernels shift a product to the register's binary point: 0 not at all, 1 left
 * (lsh), 2 right (rsh, the floor), 3 right after adding the rounding term (nearest). A product
 * shifts one way or not at all: lsh > 0 has rsh = 0 and no rounding term. */
static inline int seq_shift(const struct seq *q)
{
    return q->lsh ? 1 : !q->rsh ? 0 : q->rnd ? 3 : 2;
}
INLINE uint64_t seq_body(const struct seq *q, int safe, int k, int jn, const int32_t *a,
                         const int32_t *b, size_t ldb, int64_t *s)
{
    /* each case its own loop, the choices out of it */
    switch (seq_rule(q, safe)) {
    case SEQ_NONE: return seq32_loop(q, k, jn, a, b, ldb, s, SEQ_NONE);
    case SEQ_SAT: return seq32_loop(q, k, jn, a, b, ldb, s, SEQ_SAT);
    case SEQ_WRAP: return seq32_loop(q, k, jn, a, b, ldb, s, SEQ_WRAP);
    default: break;
    }
    if (q->p32)
        return q->sat ? seq_loop(q, k, jn, a, b, ldb, s, 1, 1)
                      : seq_loop(q, k, jn, a, b, ldb, s, 1, 0);
    return q->sat ? seq_loop(q, k, jn, a, b, ldb, s, 0, 1) : seq_loop(q, k, jn, a, b, ldb, s, 0, 0);
}
/* seq32_loop by hand in AVX-512: the 64 columns' sums and counts held in registers, the
 * shifts only where the binary points differ (seq_shift), and with codes of 16 bits each
 * product one VPMADDWD (B's sign-extended lanes times A's code in the low half, zero in the
 * high). */
TGT_AVX512 INLINE __m512i seq32_step(__m512i s, __m512i x, __m512i lo, __m512i hi, __m128i wsh,
                                     int rule, __m512i *o)
{
    const __m512i t = _mm512_add_epi32(s, x);
    if (rule == SEQ_NONE) return t;
    const __m512i w = rule == SEQ_SAT ? _mm512_min_epi32(_mm512_max_epi32(t, lo), hi)
                                      : _mm512_sra_epi32(_mm512_sll_epi32(t, wsh), wsh);
    *o = _mm512_mask_sub_epi32(*o, _mm512_cmpneq_epi32_mask(w, t), *o, _mm512_set1_epi32(-1));
    return w;
}
TGT_AVX512 INLINE uint64_t seq32_kernel(const struct seq *q, int k, int jn, const int32_t *a,
                                        const int32_t *b, size_t ldb, int64_t *s, int rule,
                                        int shift, int madd)
{
    const __m512i lo = _mm512_set1_epi32((int32_t)q->lo), hi = _mm512_set1_epi32((int32_t)q->hi);
    const __m128i lsh = _mm_cvtsi32_si128(q->lsh), rsh = _mm_cvtsi32_si128(q->rsh);
    const __m128i wsh = _mm_cvtsi32_si128(q->wsh - 32);
    const __m512i rnd = _mm512_set1_epi32((int32_t)q->rnd);
    __mmask16 mk[4];
    for (int v = 0; v < 4; v++) {
        const int r = jn - 16 * v;
        mk[v] = r >= 16 ? (__mmask16)0xffff : r > 0 ? (__mmask16)((1u << r) - 1) : 0;
    }
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    __m512i o0 = s0, o1 = s0, o2 = s0, o3 = s0;
    for (int p = 0; p < k; p++) {
        const int32_t *bp = b + (size_t)p * ldb;
        const __m512i av = _mm512_set1_epi32(madd ? (int32_t)(uint16_t)a[p] : a[p]);
        __m512i x[4];
        for (int v = 0; v < 4; v++) {
            const __m512i bv = _mm512_maskz_loadu_epi32(mk[v], bp + 16 * v);
            x[v] = madd ? _mm512_madd_epi16(bv, av) : _mm512_mullo_epi32(bv, av);
            if (shift == 1) x[v] = _mm512_sll_epi32(x[v], lsh);
            if (shift == 3) x[v] = _mm512_add_epi32(x[v], rnd);
            if (shift >= 2) x[v] = _mm512_sra_epi32(x[v], rsh);
        }
        s0 = seq32_step(s0, x[0], lo, hi, wsh, rule, &o0);
        s1 = seq32_step(s1, x[1], lo, hi, wsh, rule, &o1);
        s2 = seq32_step(s2, x[2], lo, hi, wsh, rule, &o2);
        s3 = seq32_step(s3, x[3], lo, hi, wsh, rule, &o3);
    }
    int32_t st[SEQ_JB], ot[SEQ_JB];
    _mm512_storeu_si512(st, s0);
    _mm512_storeu_si512(st + 16, s1);
    _mm512_storeu_si512(st + 32, s2);
    _mm512_storeu_si512(st + 48, s3);
    _mm512_storeu_si512(ot, o0);
    _mm512_storeu_si512(ot + 16, o1);
    _mm512_storeu_si512(ot + 32, o2);
    _mm512_storeu_si512(ot + 48, o3);
    uint64_t n = 0;
    for (int j = 0; j < jn; j++) {
        s[j] = st[j];
        n += (uint64_t)ot[j];
    }
    return n;
}
/* The sequential sums in int16 lanes, 32 a vector (q->l16: every code and shifted product
 * below 2^15 in magnitude, and a register of at most 15 bits whose sum with a product stays
 * below 2^15, or one of 16 bits, whose saturated sum is VPADDSW's and wrapped sum VPADDW's),
 * over a panel of B packed as int16 (SEQ_JB columns a row). Every product is exact in 16 bits,
 * so these are the additions of seq_loop, and its values and count. */
TGT_AVX512 INLINE __m512i seq16_step(__m512i s, __m512i x, __m512i lo, __m512i hi, __m128i wsh,
                                     int rule, int r16, uint64_t *o)
{
    const __m512i t = _mm512_add_epi16(s, x);
    __m512i w;
    if (r16) { /* the 16-bit register: t is the wrapped sum, VPADDSW the saturated one */
        const __m512i u = _mm512_adds_epi16(s, x);
        *o += (uint64_t)__builtin_popcount(_mm512_cmpneq_epi16_mask(u, t));
        return rule == SEQ_SAT ? u : t;
    }
    w = rule == SEQ_SAT ? _mm512_min_epi16(_mm512_max_epi16(t, lo), hi)
                        : _mm512_sra_epi16(_mm512_sll_epi16(t, wsh), wsh);
    *o += (uint64_t)__builtin_popcount(_mm512_cmpneq_epi16_mask(w, t));
    return w;
}
TGT_AVX512 INLINE uint64_t seq16_kernel(const struct seq *q, int k, int jn, const int32_t *a,
                                        const int16_t *b, int64_t *s, int rule, int r16, int shift)
{
    const __m512i lo = _mm512_set1_epi16((int16_t)q->lo), hi = _mm512_set1_epi16((int16_t)q->hi);
    const __m128i lsh = _mm_cvtsi32_si128(q->lsh), rsh = _mm_cvtsi32_si128(q->rsh);
    const __m128i wsh = _mm_cvtsi32_si128(q->wsh - 48);
    const __m512i rnd = _mm512_set1_epi16((int16_t)q->rnd);
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;
    uint64_t o = 0;
    for (int p = 0; p < k; p++) {
        const int16_t *bp = b + (size_t)p * SEQ_JB;
        const __m512i av = _mm512_set1_epi16((int16_t)a[p]);
        __m512i x0 = _mm512_mullo_epi16(_mm512_loadu_si512(bp), av);
        __m512i x1 = _mm512_mullo_epi16(_mm512_loadu_si512(bp + 32), av);
        if (shift == 1) {
            x0 = _mm512_sll_epi16(x0, lsh);
            x1 = _mm512_sll_epi16(x1, lsh);
        }
        if (shift == 3) {
            x0 = _mm512_add_epi16(x0, rnd);
            x1 = _mm512_add_epi16(x1, rnd);
        }
        if (shift >= 2) {
            x0 = _mm512_sra_epi16(x0, rsh);
            x1 = _mm512_sra_epi16(x1, rsh);
        }
        s0 = seq16_step(s0, x0, lo, hi, wsh, rule, r16, &o);
        s1 = seq16_step(s1, x1, lo, hi, wsh, rule, r16, &o);
    }
    int16_t st[SEQ_JB];
    _mm512_storeu_si512(st, s0);
    _mm512_storeu_si512(st + 32, s1);
    for (int j = 0; j < jn; j++) s[j] = st[j];
    return o;
}
/* seq16_kernel for a rule, the register and the shifts chosen out of the loop */
TGT_AVX512 INLINE uint64_t seq16_rule(const struct seq *q, int k, int jn, const int32_t *a,
                                      const int16_t *b, int64_t *s, int rule)
{
    const int r16 = q->wsh == 48;
#define K_SEQ16_KERNEL(sh, hi) seq16_kernel(q, k, jn, a, b, s, rule, hi, sh)
    SEQ_DISPATCH(q, r16, K_SEQ16_KERNEL)
#undef K_SEQ16_KERNEL
}
TGT_AVX512 static uint64_t seq16_avx512(const struct seq *q, int k, int jn, const int32_t *a,
                                        const int16_t *b, int64_t *s)
{
    return q->sat ? seq16_rule(q, k, jn, a, b, s, SEQ_SAT)
                  : seq16_rule(q, k, jn, a, b, s, SEQ_WRAP);
}
/* seq32_kernel for a rule, the shifts and the multiply chosen out of the loop */
TGT_AVX512 INLINE uint64_t seq32_rule(const struct seq *q, int k, int jn, const int32_t *a,
                                      const int32_t *b, size_t ldb, int64_t *s, int rule){
#define K_SEQ32_KERNEL(sh, hi) seq32_kernel(q, k, jn, a, b, ldb, s, rule, sh, hi)
    SEQ_DISPATCH(q, q->m16, K_SEQ32_KERNEL)
#undef K_SEQ32_KERNEL
} /* seq_loop by hand in AVX-512 (int64 lanes): the 64 columns' sums and counts held in sixteen
 * registers, where the compiled loop keeps them in memory. A row of 16 codes of B is one load;
 * VPMULDQ multiplies the low 32 bits of each 64-bit lane, signed, into the exact 64-bit product
 * (codes are int32, so |product| < 2^62), once for the even columns and once, after a shift,
 * for the odd ones. Then the shift of seq_loop (mode: seq_shift), its clamp or wrap and its
 * count (check), or, in a stretch of the row that cannot leave the register, the addition
 * alone: the same additions, values and count. The lanes past jn read the panel's zeros and
 * are not stored. */
TGT_AVX512 INLINE void seq64_step(__m512i *sv, __m512i *ov, const int32_t *bp, __m512i av,
                                  __m512i lo, __m512i hi, __m512i rnd, __m128i lsh, __m128i rsh,
                                  __m128i wsh, int sat, int mode, int check)
{
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        const __m512i bv = _mm512_loadu_si512(bp + 16 * v);
        __m512i x[2] = {_mm512_mul_epi32(bv, av), _mm512_mul_epi32(_mm512_srli_epi64(bv, 32), av)};
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i m = x[h];
            if (mode == 1) m = _mm512_sll_epi64(m, lsh);
            if (mode == 3) m = _mm512_add_epi64(m, rnd);
            if (mode >= 2) m = _mm512_sra_epi64(m, rsh);
            const __m512i t = _mm512_add_epi64(sv[2 * v + h], m);
            if (!check) {
                sv[2 * v + h] = t;
                continue;
            }
            const __m512i w = sat ? _mm512_min_epi64(_mm512_max_epi64(t, lo), hi)
                                  : _mm512_sra_epi64(_mm512_sll_epi64(t, wsh), wsh);
            ov[2 * v + h] = _mm512_mask_add_epi64(ov[2 * v + h], _mm512_cmpneq_epi64_mask(w, t),
                                                  ov[2 * v + h], _mm512_set1_epi64(1));
            sv[2 * v + h] = w;
        }
    }
}
/* The row's products in stretches of SEQ_CH: uc[c] (NULL: none) bounds the sum of the
 * magnitudes of stretch c's shifted products in any column (seq_stretch_bounds). A stretch
 * starts quiet when the largest magnitude among the 64 sums plus uc[c] is at most hi: no
 * partial sum in it can leave the register, so each addition is its own clamp or wrap and
 * adds no count. */
TGT_AVX512 INLINE uint64_t seq64_kernel(const struct seq *q, int k, int jn, const int32_t *a,
                                        const int32_t *b, size_t ldb, int64_t *s, const double *uc,
                                        int sat, int mode)
{
    const __m512i lo = _mm512_set1_epi64(q->lo), hi = _mm512_set1_epi64(q->hi);
    const __m512i rnd = _mm512_set1_epi64(q->rnd);
    const __m128i lsh = _mm_cvtsi32_si128(q->lsh), rsh = _mm_cvtsi32_si128(q->rsh);
    const __m128i wsh = _mm_cvtsi32_si128(q->wsh);
    __m512i sv[8], ov[8];
    for (int v = 0; v < 8; v++) sv[v] = ov[v] = _mm512_setzero_si512();
    for (int p0 = 0, c = 0; p0 < k; p0 += SEQ_CH, c++) {
        const int p1 = k - p0 < SEQ_CH ? k : p0 + SEQ_CH;
        int quiet = 0;
        if (uc) {
            __m512i mx = _mm512_abs_epi64(sv[0]);
            for (int v = 1; v < 8; v++) mx = _mm512_max_epi64(mx, _mm512_abs_epi64(sv[v]));
            /* hi - max|s| exactly in int64, and exactly a double (registers of at most 52
             * bits) */
            quiet = uc[c] <= (double)(q->hi - _mm512_reduce_max_epi64(mx));
        }
        if (quiet)
            for (int p = p0; p < p1; p++)
                seq64_step(sv, ov, b + (size_t)p * ldb, _mm512_set1_epi64((int64_t)a[p]), lo, hi,
                           rnd, lsh, rsh, wsh, sat, mode, 0);
        else
            for (int p = p0; p < p1; p++)
                seq64_step(sv, ov, b + (size_t)p * ldb, _mm512_set1_epi64((int64_t)a[p]), lo, hi,
                           rnd, lsh, rsh, wsh, sat, mode, 1);
    }
    /* vector 2v holds columns 16v + 2i, vector 2v + 1 columns 16v + 2i + 1 (lane i) */
    int64_t st[SEQ_JB], ot[SEQ_JB];
    for (int v = 0; v < 8; v++) {
        _mm512_storeu_si512(st + 8 * v, sv[v]);
        _mm512_storeu_si512(ot + 8 * v, ov[v]);
    }
    uint64_t n = 0;
    for (int j = 0; j < jn; j++) {
        const int e = 16 * (j / 16) + 8 * (j % 2) + (j % 16) / 2;
        s[j] = st[e];
        n += (uint64_t)ot[e];
    }
    return n;
}
/* seq64_kernel for a rule and the shifts, chosen out of the loop */
TGT_AVX512 static uint64_t seq64_avx512(const struct seq *q, int k, int jn, const int32_t *a,
                                        const int32_t *b, size_t ldb, int64_t *s, const double *uc){
#define K_SEQ64_KERNEL(sh, hi) seq64_kernel(q, k, jn, a, b, ldb, s, uc, hi, sh)
    SEQ_DISPATCH(q, q->sat, K_SEQ64_KERNEL)
#undef K_SEQ64_KERNEL
} TGT_AVX512 static uint64_t
    seq_avx512(const struct seq *q, int safe, int k, int jn, const int32_t *a, const int32_t *b,
               size_t ldb, int64_t *s, const double *uc)
{
    switch (seq_rule(q, safe)) {
    case SEQ_NONE: return seq32_rule(q, k, jn, a, b, ldb, s, SEQ_NONE);
    case SEQ_SAT: return seq32_rule(q, k, jn, a, b, ldb, s, SEQ_SAT);
    case SEQ_WRAP: return seq32_rule(q, k, jn, a, b, ldb, s, SEQ_WRAP);
    default: return seq64_avx512(q, k, jn, a, b, ldb, s, uc);
    }
}

/* seq32_kernel in AVX2: eight int32 lanes a vector, so one pass holds 32 columns' sums and
 * counts in eight registers, and a row of 64 columns takes two passes (the panel's columns past
 * jn are zero). Each lane counts the additions its rule left unchanged (VPCMPEQD is -1 for
 * each), so its overflows are the additions made less those. */
TGT_AVX2 INLINE __m256i seq32_step_avx2(__m256i s, __m256i x, __m256i lo, __m256i hi, __m128i wsh,
                                        int rule, __m256i *e)
{
    const __m256i t = _mm256_add_epi32(s, x);
    if (rule == SEQ_NONE) return t;
    const __m256i w = rule == SEQ_SAT ? _mm256_min_epi32(_mm256_max_epi32(t, lo), hi)
                                      : _mm256_sra_epi32(_mm256_sll_epi32(t, wsh), wsh);
    *e = _mm256_add_epi32(*e, _mm256_cmpeq_epi32(w, t));
    return w;
}
TGT_AVX2 INLINE uint64_t seq32_kernel_avx2(const struct seq *q, int k, int jn, const int32_t *a,
                                           const int32_t *b, size_t ldb, int64_t *s, int rule,
                                           int shift, int madd)
{
    const __m256i lo = _mm256_set1_epi32((int32_t)q->lo), hi = _mm256_set1_epi32((int32_t)q->hi);
    const __m128i lsh = _mm_cvtsi32_si128(q->lsh), rsh = _mm_cvtsi32_si128(q->rsh);
    const __m128i wsh = _mm_cvtsi32_si128(q->wsh >= 32 ? q->wsh - 32 : 0);
    const __m256i rnd = _mm256_set1_epi32((int32_t)q->rnd);
    uint64_t n = 0;
    for (int g = 0; g < jn; g += 32) {
        const int32_t *bg = b + g;
        __m256i sv[4], ev[4];
        for (int v = 0; v < 4; v++) sv[v] = ev[v] = _mm256_setzero_si256();
        for (int p = 0; p < k; p++) {
            const int32_t *bp = bg + (size_t)p * ldb;
            const __m256i av = _mm256_set1_epi32(madd ? (int32_t)(uint16_t)a[p] : a[p]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                const __m256i bv = _mm256_loadu_si256((const __m256i *)(bp + 8 * v));
                __m256i x = madd ? _mm256_madd_epi16(bv, av) : _mm256_mullo_epi32(bv, av);
                if (shift == 1) x = _mm256_sll_epi32(x, lsh);
                if (shift == 3) x = _mm256_add_epi32(x, rnd);
                if (shift >= 2) x = _mm256_sra_epi32(x, rsh);
                sv[v] = seq32_step_avx2(sv[v], x, lo, hi, wsh, rule, &ev[v]);
            }
        }
        int32_t st[32], et[32];
        for (int v = 0; v < 4; v++) {
            _mm256_storeu_si256((__m256i *)(st + 8 * v), sv[v]);
            _mm256_storeu_si256((__m256i *)(et + 8 * v), ev[v]);
        }
        const int gn = jn - g < 32 ? jn - g : 32;
        for (int j = 0; j < gn; j++) {
            s[g + j] = st[j];
            if (rule != SEQ_NONE) n += (uint64_t)((int64_t)k + et[j]);
        }
    }
    return n;
}
TGT_AVX2 static uint64_t seq32_rule_avx2(const struct seq *q, int k, int jn, const int32_t *a,
                                         const int32_t *b, size_t ldb, int64_t *s, int rule){
#define K_SEQ32_KERNEL_AVX2(sh, hi) seq32_kernel_avx2(q, k, jn, a, b, ldb, s, rule, sh, hi)
    SEQ_DISPATCH(q, q->m16, K_SEQ32_KERNEL_AVX2)
#undef K_SEQ32_KERNEL_AVX2
} /* seq64_kernel in AVX2, which has four int64 lanes a vector and no 64-bit arithmetic shift,
 * minimum or maximum: one pass holds 16 columns' sums and counts in eight registers, and a row
 * of 64 columns takes up to four passes over a and the panel (the panel stays in cache). Each
 * product is one VPMULDQ as in seq64_kernel; the arithmetic shift right by r is the logical
 * one with the sign bit 2^(63 - r) extended, (x >>> r ^ m) - m; the clamp is two compares and
 * blends, whose union is the overflow; the wrap is the shift left and back, and an overflow a
 * lane whose value changed. A pass's stretches are quiet as in seq64_kernel, over its own 16
 * columns' sums (the bound uc holds in any column). */
TGT_AVX2 INLINE __m256i seq_sra64_avx2(__m256i x, __m128i r, __m256i m)
{
    return _mm256_sub_epi64(_mm256_xor_si256(_mm256_srl_epi64(x, r), m), m);
}
TGT_AVX2 INLINE void seq64_step_avx2(__m256i *sv, __m256i *ov, const int32_t *bp, __m256i av,
                                     __m256i lo, __m256i hi, __m256i rnd, __m128i lsh, __m128i rsh,
                                     __m256i rm, __m128i wsh, __m256i wm, int sat, int mode,
                                     int check)
{
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) {
        const __m256i bv = _mm256_loadu_si256((const __m256i *)(bp + 8 * v));
        __m256i x[2] = {_mm256_mul_epi32(bv, av), _mm256_mul_epi32(_mm256_srli_epi64(bv, 32), av)};
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i m = x[h];
            if (mode == 1) m = _mm256_sll_epi64(m, lsh);
            if (mode == 3) m = _mm256_add_epi64(m, rnd);
            if (mode >= 2) m = seq_sra64_avx2(m, rsh, rm);
            const __m256i t = _mm256_add_epi64(sv[2 * v + h], m);
            if (!check) {
                sv[2 * v + h] = t;
                continue;
            }
            __m256i w, o;
            if (sat) {
                const __m256i up = _mm256_cmpgt_epi64(t, hi), dn = _mm256_cmpgt_epi64(lo, t);
                w = _mm256_blendv_epi8(_mm256_blendv_epi8(t, hi, up), lo, dn);
                o = _mm256_or_si256(up, dn);
            } else {
                w = seq_sra64_avx2(_mm256_sll_epi64(t, wsh), wsh, wm);
                o = _mm256_xor_si256(_mm256_cmpeq_epi64(w, t), _mm256_set1_epi64x(-1));
            }
            ov[2 * v + h] = _mm256_sub_epi64(ov[2 * v + h], o); /* o is -1 where it overflowed */
            sv[2 * v + h] = w;
        }
    }
}
TGT_AVX2 INLINE uint64_t seq64_kernel_avx2(const struct seq *q, int k, int jn, const int32_t *a,
                                           const int32_t *b, size_t ldb, int64_t *s,
                                           const double *uc, int sat, int mode)
{
    const __m256i lo = _mm256_set1_epi64x(q->lo), hi = _mm256_set1_epi64x(q->hi);
    const __m256i rnd = _mm256_set1_epi64x(q->rnd);
    const __m128i lsh = _mm_cvtsi32_si128(q->lsh), rsh = _mm_cvtsi32_si128(q->rsh);
    const __m128i wsh = _mm_cvtsi32_si128(q->wsh);
    /* the sign bits after shifts right by rsh and by wsh (rsh, wsh < 64) */
    const __m256i rm = _mm256_set1_epi64x((int64_t)(UINT64_C(1) << (63 - q->rsh)));
    const __m256i wm = _mm256_set1_epi64x((int64_t)(UINT64_C(1) << (63 - q->wsh)));
    uint64_t n = 0;
    for (int g = 0; g < jn; g += 16) {
        const int32_t *bg = b + g;
        __m256i sv[4], ov[4];
        for (int v = 0; v < 4; v++) sv[v] = ov[v] = _mm256_setzero_si256();
        for (int p0 = 0, c = 0; p0 < k; p0 += SEQ_CH, c++) {
            const int p1 = k - p0 < SEQ_CH ? k : p0 + SEQ_CH;
            int quiet = 0;
            if (uc) {
                /* the largest |sum| of the pass's 16 columns: |x| = (x ^ n) - n, n = x < 0 */
                __m256i mx = _mm256_setzero_si256();
                for (int v = 0; v < 4; v++) {
                    const __m256i ng = _mm256_cmpgt_epi64(_mm256_setzero_si256(), sv[v]);
                    const __m256i ab = _mm256_sub_epi64(_mm256_xor_si256(sv[v], ng), ng);
                    mx = _mm256_blendv_epi8(mx, ab, _mm256_cmpgt_epi64(ab, mx));
                }
                int64_t l[4];
                _mm256_storeu_si256((__m256i *)l, mx);
                int64_t big = l[0];
                for (int i = 1; i < 4; i++) big = l[i] > big ? l[i] : big;
                /* hi - max|s| exactly in int64, and exactly a double (at most 52 bits) */
                quiet = uc[c] <= (double)(q->hi - big);
            }
            if (quiet)
                for (int p = p0; p < p1; p++)
                    seq64_step_avx2(sv, ov, bg + (size_t)p * ldb, _mm256_set1_epi64x((int64_t)a[p]),
                                    lo, hi, rnd, lsh, rsh, rm, wsh, wm, sat, mode, 0);
            else
                for (int p = p0; p < p1; p++)
                    seq64_step_avx2(sv, ov, bg + (size_t)p * ldb, _mm256_set1_epi64x((int64_t)a[p]),
                                    lo, hi, rnd, lsh, rsh, rm, wsh, wm, sat, mode, 1);
        }
        /* vector 2h holds columns g + 8h + 2i, vector 2h + 1 columns g + 8h + 2i + 1 (lane i) */
        int64_t st[16], ot[16];
        for (int v = 0; v < 4; v++) {
            _mm256_storeu_si256((__m256i *)(st + 4 * v), sv[v]);
            _mm256_storeu_si256((__m256i *)(ot + 4 * v), ov[v]);
        }
        const int gn = jn - g < 16 ? jn - g : 16;
        for (int j = 0; j < gn; j++) {
            const int e = 8 * (j / 8) + 4 * (j % 2) + (j % 8) / 2;
            s[g + j] = st[e];
            n += (uint64_t)ot[e];
        }
    }
    return n;
}
TGT_AVX2 static uint64_t seq64_avx2(const struct seq *q, int k, int jn, const int32_t *a,
                                    const int32_t *b, size_t ldb, int64_t *s, const double *uc){
#define K_SEQ64_KERNEL_AVX2(sh, hi) seq64_kernel_avx2(q, k, jn, a, b, ldb, s, uc, hi, sh)
    SEQ_DISPATCH(q, q->sat, K_SEQ64_KERNEL_AVX2)
#undef K_SEQ64_KERNEL_AVX2
}

/* A panel of B's columns [0, jn) (rows of ldb), copied contiguous for the sequential kernels:
 * pk 2: as int16, SEQ_JB a row, the columns past jn zero; 1: as int32, SEQ_JB a row, with
 * bpos[p] = max(B[p][j], 0) and bneg[p] = max(-B[p][j], 0) over the columns for the bound of
 * seq_safe; 0: as int32 only. */
INLINE void seq_panel_body(int k, int jn, const int32_t *B, size_t ldb, int32_t *pb, double *bpos,
                           double *bneg, int pk)
{
    for (int p = 0; p < k; p++) {
        const int32_t *bp = B + (size_t)p * ldb;
        if (pk == 2) {
            int16_t *d = (int16_t *)pb + (size_t)p * SEQ_JB;
            for (int j = 0; j < SEQ_JB; j++) d[j] = j < jn ? (int16_t)bp[j] : 0;
            continue;
        }
        int32_t *d = pb + (size_t)p * SEQ_JB;
        for (int j = 0; j < jn; j++) d[j] = bp[j];
        for (int j = jn; j < SEQ_JB; j++) d[j] = 0; /* the AVX-512 kernels read whole rows */
        if (!pk) continue;
        int32_t mx = 0, mn = 0;
#pragma omp simd reduction(max : mx) reduction(min : mn)
        for (int j = 0; j < jn; j++) {
            mx = bp[j] > mx ? bp[j] : mx;
            mn = bp[j] < mn ? bp[j] : mn;
        }
        bpos[p] = (double)mx;
        bneg[p] = -(double)mn;
    }
}
/* Whether a row a of k codes cannot overflow a register against the panel: the sum of its
 * products' largest positive parts (a[p] bpos[p] or -a[p] bneg[p]) and that of their largest
 * negative parts both at most lim. Each product is below 2^31, so the double sums are exact
 * while they stay below 2^53, far above any lim; they stop a block after passing it. */
INLINE int seq_safe_body(int k, const int32_t *a, const double *bpos, const double *bneg,
                         double lim)
{
    double up = 0, dn = 0;
    for (int p0 = 0; p0 < k && up <= lim && dn <= lim; p0 += 256) {
        const int p1 = k - p0 < 256 ? k : p0 + 256;
#pragma omp simd reduction(+ : up, dn)
        for (int p = p0; p < p1; p++) {
            const double av = (double)a[p];
            up += av > 0 ? av * bpos[p] : -av * bneg[p];
            dn += av > 0 ? av * bneg[p] : -av * bpos[p];
        }
    }
    return up <= lim && dn <= lim;
}
/* uc[c] for the stretches [c SEQ_CH, (c + 1) SEQ_CH) of row a: an upper bound of the sum of
 * the magnitudes of the stretch's shifted products in any column of the panel. A product
 * a[p] B[p][j] is at most |a[p]| max(bpos[p], bneg[p]) in magnitude, and shifted, ((P << lsh)
 * + rnd) >> rsh is at most |P| 2^(lsh - rsh) + 1 (the floor of a negative value adds at most
 * 1). The double sum of at most SEQ_CH such terms below 2^62 is within a relative 2^-48 of the
 * exact one; 2^-40 more and the 1s make it a bound. */
INLINE void seq_stretch_bounds(const struct seq *q, int k, const int32_t *a, const double *bpos,
                               const double *bneg, double *uc)
{
    const double sc = ldexp(1.0, q->lsh - q->rsh) * (1.0 + 0x1p-40);
    for (int p0 = 0, c = 0; p0 < k; p0 += SEQ_CH, c++) {
        const int p1 = k - p0 < SEQ_CH ? k : p0 + SEQ_CH;
        double u = 0;
        for (int p = p0; p < p1; p++)
            u += fabs((double)a[p]) * (bpos[p] > bneg[p] ? bpos[p] : bneg[p]);
        uc[c] = u * sc + (double)(p1 - p0) + 1.0;
    }
}
/* One work item of the sequential path: the panel of B's columns [j0, j0 + jn) copied to pb
 * (k x SEQ_JB, the bounds after it), then rows [i0, i1) of A against it into C (scaled by
 * scale); the rows whose bound stays below safe_lim (0: none) without the checks. Returns the
 * item's overflows. hand: the hand-written row kernels, 0 none, 1 AVX2's (int32 and int64
 * lanes), 2 AVX-512's. */
INLINE uint64_t seq_item_body(const struct seq *q, int hand, int k, int jn, int i0, int i1,
                              const int32_t *Ac, const int32_t *Bj, size_t n, int32_t *pb,
                              uint64_t safe_lim, float scale, float *C, ptrdiff_t ldc)
{
    /* over the panel's columns: max(B[p][j], 0) and max(-B[p][j], 0), as doubles (the bound
     * sums products below 2^31 of them exactly while it stays below 2^53, far above any
     * register's limit) */
    double *bpos = (double *)(pb + (size_t)k * SEQ_JB), *bneg = bpos + k, *uc = bneg + k;
    /* the int64 kernel's quiet stretches: registers of at most 52 bits (seq64_kernel) */
    const int stretches = hand && !q->l16 && !q->l32 && q->wsh >= 12;
    seq_panel_body(k, jn, Bj, n, pb, bpos, bneg, q->l16 ? 2 : safe_lim || stretches ? 1 : 0);
    uint64_t ovs = 0;
    for (int i = i0; i < i1; i++) {
        int64_t s[SEQ_JB];
        const int32_t *a = Ac + (size_t)i * k;
        /* a row cannot overflow in any order when the sum of its products' largest positive
         * parts over the panel, and that of their largest negative parts, stay inside the
         * register: its exact sums, without the checks */
        const int safe = safe_lim && seq_safe_body(k, a, bpos, bneg, (double)safe_lim);
        if (q->l16)
            ovs += seq16_avx512(q, k, jn, a, (const int16_t *)pb, s);
        else if (hand == 2) {
            if (stretches && !safe) seq_stretch_bounds(q, k, a, bpos, bneg, uc);
            ovs += seq_avx512(q, safe, k, jn, a, pb, SEQ_JB, s, stretches && !safe ? uc : NULL);
        } else if (hand == 1) {
            const int rule = seq_rule(q, safe);
            if (rule >= 0)
                ovs += seq32_rule_avx2(q, k, jn, a, pb, SEQ_JB, s, rule);
            else {
                if (stretches) seq_stretch_bounds(q, k, a, bpos, bneg, uc);
                ovs += seq64_avx2(q, k, jn, a, pb, SEQ_JB, s, stretches ? uc : NULL);
            }
        } else
            ovs += seq_body(q, safe, k, jn, a, pb, SEQ_JB, s);
        for (int j = 0; j < jn; j++) C[i * ldc + j] = (float)s[j] * scale;
    }
    return ovs;
}
static uint64_t seq_item_scalar(const struct seq *q, int k, int jn, int i0, int i1,
                                const int32_t *Ac, const int32_t *Bj, size_t n, int32_t *pb,
                                uint64_t safe_lim, float scale, float *C, ptrdiff_t ldc)
{
    return seq_item_body(q, 0, k, jn, i0, i1, Ac, Bj, n, pb, safe_lim, scale, C, ldc);
}
TGT_AVX2 static uint64_t seq_item_avx2(const struct seq *q, int k, int jn, int i0, int i1,
                                       const int32_t *Ac, const int32_t *Bj, size_t n, int32_t *pb,
                                       uint64_t safe_lim, float scale, float *C, ptrdiff_t ldc)
{
    return seq_item_body(q, 1, k, jn, i0, i1, Ac, Bj, n, pb, safe_lim, scale, C, ldc);
}
TGT_AVX512 static uint64_t seq_item_avx512(const struct seq *q, int k, int jn, int i0, int i1,
                                           const int32_t *Ac, const int32_t *Bj, size_t n,
                                           int32_t *pb, uint64_t safe_lim, float scale, float *C,
                                           ptrdiff_t ldc)
{
    return seq_item_body(q, 2, k, jn, i0, i1, Ac, Bj, n, pb, safe_lim, scale, C, ldc);
}

/* ------------------------------------------------------------------ float32 rows */

/* c[j] = sum in order p of a[p*acs] b[p][j], each product rounded, then each sum. */
INLINE void f32_row_body(int k, int n, const float *a, const float *b, ptrdiff_t ldb, float *c)
{
    for (int j = 0; j < n; j++) c[j] = 0.0f;
    for (int p = 0; p < k; p++) {
        const float av = a[p];
        const float *bp = b + (size_t)p * ldb;
#pragma omp simd
        for (int j = 0; j < n; j++) c[j] = c[j] + av * bp[j];
    }
}
static void f32_row_scalar(int k, int n, const float *a, const float *b, ptrdiff_t ldb, float *c)
{
    f32_row_body(k, n, a, b, ldb, c);
}
TGT_AVX2 static void f32_row_avx2(int k, int n, const float *a, const float *b, ptrdiff_t ldb,
                                  float *c)
{
    f32_row_body(k, n, a, b, ldb, c);
}
TGT_AVX512 static void f32_row_avx512(int k, int n, const float *a, const float *b,
                                      ptrdiff_t ldb, float *c)
{
    f32_row_body(k, n, a, b, ldb, c);
}

/* ------------------------------------------------------------------ narrow float */


#define FL_TR 8
#define FL_JB 64

static void float_tile(const struct quant_acc *acc, const struct quant_spec *fs, int k, int rn,
                       int jn, const float *A, ptrdiff_t lda, const float *B, ptrdiff_t ldb,
                       float *C, ptrdiff_t ldc)
{
    float part[FL_TR * FL_JB], t[FL_TR * FL_JB], out[FL_TR * FL_JB];
    const int cnt = rn * jn;
    const struct quant_key key = {0, 0, 0};
    for (int e = 0; e < cnt; e++) part[e] = out[e] = 0.0f;
    for (int p = 0; p < k; p++) {
        const float *bp = B + (size_t)p * ldb;
        for (int r = 0; r < rn; r++) {
            const double av = (double)A[(size_t)r * lda + p];
            for (int j = 0; j < jn; j++)
                t[r * jn + j] = odd_sum((double)part[r * jn + j], av * (double)bp[j]);
        }
        quant_array(fs, t, part, (size_t)cnt, key, NULL, NULL); /* valid spec: cannot fail */
        if (acc->chunk > 0 && (p + 1) % acc->chunk == 0)
            for (int e = 0; e < cnt; e++) {
                out[e] = out[e] + part[e];
                part[e] = 0.0f;
            }
    }
    for (int r = 0; r < rn; r++)
        for (int j = 0; j < jn; j++)
            C[(size_t)r * ldc + j] = out[r * jn + j] + part[r * jn + j];
}

/* ------------------------------------------------------------------ packed int8 / int16 */

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

struct packed {
    int R, P, G, es, s8, vnni;
    int m_pad, kg, npan;
    size_t a_stride, panel; /* bytes */
    uint8_t *a, *b;
    int32_t *cs; /* s8: column sums of B */
};

/* B's codes (k x n, dense) into panels of P columns, each a run of groups of G rows: the word
 * of column c in group q holds rows qG .. qG+G-1 as G bytes (s8) or G int16, little-endian,
 * the layout the tile kernels read; rows from k on and columns from n on are 0. One word per
 * column and group, so the loops vectorise. */
INLINE void pack_b_body(int s8, int k, int n, int kg, int P, int pn, const int32_t *Bc,
                        uint32_t *bp)
{
    static const int32_t zero[16];
    const int G = s8 ? 4 : 2;
    const int j0 = pn * P, jn = n - j0 < 0 ? 0 : n - j0 < P ? n - j0 : P;
    for (int q = 0; q < kg; q++) {
        uint32_t *d = bp + ((size_t)pn * kg + q) * P;
        const int32_t *r[4];
        for (int e = 0; e < 4; e++) {
            const int p = q * G + e;
            r[e] = e < G && p < k && jn == P ? Bc + (size_t)p * n + j0 : zero;
        }
        if (jn == P && s8) {
            const int32_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];
            for (int c = 0; c < P; c++)
                d[c] = ((uint32_t)r0[c] & 0xffu) | ((uint32_t)r1[c] & 0xffu) << 8 |
                       ((uint32_t)r2[c] & 0xffu) << 16 | (uint32_t)r3[c] << 24;
        } else if (jn == P) {
            const int32_t *r0 = r[0], *r1 = r[1];
            for (int c = 0; c < P; c++) d[c] = ((uint32_t)r0[c] & 0xffffu) | (uint32_t)r1[c] << 16;
        } else { /* the last columns */
            for (int c = 0; c < P; c++) {
                uint32_t v = 0;
                for (int e = 0; e < G; e++) {
                    const int p = q * G + e;
                    const uint32_t b = c < jn && p < k ? (uint32_t)Bc[(size_t)p * n + j0 + c] : 0u;
                    v |= (b & (s8 ? 0xffu : 0xffffu)) << (e * (32 / G));
                }
                d[c] = v;
            }
        }
    }
}
/* (one panel per call: a parallel loop's body would lose the target of its function) */
static void pack_b_scalar(int s8, int k, int n, int kg, int P, int pn, const int32_t *Bc,
                          uint32_t *bp)
{
    pack_b_body(s8, k, n, kg, P, pn, Bc, bp);
}
TGT_AVX2 static void pack_b_avx2(int s8, int k, int n, int kg, int P, int pn, const int32_t *Bc,
                                 uint32_t *bp)
{
    pack_b_body(s8, k, n, kg, P, pn, Bc, bp);
}
TGT_AVX512 static void pack_b_avx512(int s8, int k, int n, int kg, int P, int pn, const int32_t *Bc,
                                     uint32_t *bp)
{
    pack_b_body(s8, k, n, kg, P, pn, Bc, bp);
}

/* ------------------------------------------------------------------ buffers */

/* The codes and packed operands of a GEMM, kept per thread from one call to the next: a
 * training step asks for the same sizes every step, and fresh pages for a large operand (the
 * lowered input of a weight gradient is tens of MB) cost page faults comparable to the GEMM.
 * Each slot grows to the largest size its thread asked for and is kept until the thread ends;
 * one call uses each slot for one thing at a time. */
enum { BUF_AC, BUF_BC, BUF_PA, BUF_PB, BUF_SEQ, BUF_N };
static _Thread_local struct {
    void *p;
    size_t n;
} bufs[BUF_N];

static void *buf_get(int slot, size_t bytes)
{
    bytes = ALIGN_UP(bytes, 64) + 64;
    if (bufs[slot].n < bytes) {
        free(bufs[slot].p);
        bufs[slot].p = aligned_alloc(64, bytes);
        bufs[slot].n = bufs[slot].p ? bytes : 0;
    }
    return bufs[slot].p;
}

/* The layout of the packed operands and their memory (1: no memory). */
static int packed_init(enum adapt_gemm_isa isa, int s8, int m, int n, int k, struct packed *g)
{
    g->vnni = isa == ADAPT_GEMM_ISA_AVX512VNNI;
    g->s8 = s8 && g->vnni;
    g->R = g->vnni ? 8 : 6;
    g->P = g->vnni ? 16 : 8;
    g->G = g->s8 ? 4 : 2;
    g->es = g->s8 ? 1 : 2;
    g->m_pad = ALIGN_UP(m, g->R);
    g->kg = (k + g->G - 1) / g->G;
    g->npan = ALIGN_UP((n + g->P - 1) / g->P, 2);
    g->a_stride = (size_t)g->kg * 4;
    g->panel = (size_t)g->kg * g->P * 4;
    g->a = buf_get(BUF_PA, (size_t)g->m_pad * g->a_stride);
    g->b = buf_get(BUF_PB, (size_t)g->npan * g->panel);
    g->cs = malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!g->a || !g->b || !g->cs) {
        free(g->cs);
        return 1;
    }
    return 0;
}

static void packed_free(struct packed *g)
{
    free(g->cs); /* (a and b are the thread's buffers) */
}

/* A's codes (m x k, dense) into rows of groups: bytes + 128 (s8) or int16, 0 beyond m and k. */
static void pack_a(struct packed *g, int m, int k, const int32_t *Ac, int par)
{
    const int kp = g->kg * g->G;
    /* (rows from m on and columns from k on outside the loops that convert, which then
     * vectorise) */
    if (g->s8) {
        uint8_t *ap = g->a;
#pragma omp parallel for schedule(static) if (par)
        for (int i = 0; i < g->m_pad; i++) {
            uint8_t *d = ap + (size_t)i * kp;
            const int32_t *a = Ac + (size_t)i * k;
            const int kn = i < m ? k : 0;
            for (int p = 0; p < kn; p++) d[p] = (uint8_t)(a[p] + 128);
            for (int p = kn; p < kp; p++) d[p] = 128;
        }
    } else {
        int16_t *ap = (int16_t *)g->a;
#pragma omp parallel for schedule(static) if (par)
        for (int i = 0; i < g->m_pad; i++) {
            int16_t *d = ap + (size_t)i * kp;
            const int32_t *a = Ac + (size_t)i * k;
            const int kn = i < m ? k : 0;
            for (int p = 0; p < kn; p++) d[p] = (int16_t)a[p];
            for (int p = kn; p < kp; p++) d[p] = 0;
        }
    }
}

static int pack(enum adapt_gemm_isa isa, int s8, int m, int n, int k, const int32_t *Ac,
                const int32_t *Bc, struct packed *g, int par)
{
    if (packed_init(isa, s8, m, n, k, g)) return 1;
    pack_a(g, m, k, Ac, par);
    if (g->s8) {
        for (int j = 0; j < n; j++) g->cs[j] = 0;
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++) g->cs[j] += Bc[(size_t)p * n + j];
    }
    uint32_t *bp = (uint32_t *)g->b;
    const int P = g->P;
#pragma omp parallel for schedule(static) if (par)
    for (int pn = 0; pn < g->npan; pn++) {
        if (isa == ADAPT_GEMM_ISA_AVX512VNNI)
            pack_b_avx512(g->s8, k, n, g->kg, P, pn, Bc, bp);
        else if (isa == ADAPT_GEMM_ISA_AVX2)
            pack_b_avx2(g->s8, k, n, g->kg, P, pn, Bc, bp);
        else
            pack_b_scalar(g->s8, k, n, g->kg, P, pn, Bc, bp);
    }
    return 0;
}

/* B (k x n, row stride ldb) x 2^fl straight into the int8 panels of g (16 columns), with B's
 * column sums into g->cs and max |code| into *mb; 1 when a value is off the grid or outside
 * [-128, 127] (the panels are then of no use). The one pass over B when it is on an int8 grid:
 * t = x 2^fl is exact in float32 (as in codes_row_body), and t in [-128, 127] converts to int8
 * and back unchanged exactly when it is an integer (anything else, NaN included, becomes 0.5,
 * which does not). */
/* one row of a group into byte e of each of the 16 words, with lane-wise flags, maxima, sums */
TGT_AVX512 static inline __attribute__((always_inline)) void b8_row(const float *x, __mmask16 ld,
                                                                    __m512 sc, int e, __m512i *w,
                                                                    __mmask16 *bad, __m512i *hi,
                                                                    __m512i *sum)
{
    const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(ld, x), sc);
    const __mmask16 in = _mm512_cmp_ps_mask(t, _mm512_set1_ps(-128.0f), _CMP_GE_OQ) &
                         _mm512_cmp_ps_mask(t, _mm512_set1_ps(127.0f), _CMP_LE_OQ);
    const __m512 u = _mm512_mask_blend_ps(in, _mm512_set1_ps(0.5f), t);
    const __m512i v = _mm512_cvttps_epi32(u);
    *bad |= _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(v), u, _CMP_NEQ_UQ);
    *hi = _mm512_max_epi32(*hi, _mm512_abs_epi32(v));
    *sum = _mm512_add_epi32(*sum, v);
    const __m512i byte = _mm512_and_si512(v, _mm512_set1_epi32(0xff));
    *w = _mm512_or_si512(*w, _mm512_sll_epi32(byte, _mm_cvtsi32_si128(8 * e)));
}

/* One panel of pack_b8_float: its words, column sums and max |code|; 1 when a value is off. */
TGT_AVX512 static int b8_panel(int k, int n, int kg, int pn, const float *B, ptrdiff_t ldb,
                               float sc, uint32_t *bp, int32_t *cs, int32_t *mx)
{
    static const float zero[16];
    const int j0 = pn * 16, jn = n - j0 < 0 ? 0 : n - j0 < 16 ? n - j0 : 16;
    const __mmask16 cols = (__mmask16)((1u << jn) - 1); /* the last columns: 0 beyond n */
    const __m512 vsc = _mm512_set1_ps(sc);
    __m512i sum = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    __mmask16 bd = 0;
    for (int q = 0; q < kg; q++) {
        __m512i w = _mm512_setzero_si512();
        for (int e = 0; e < 4; e++) {
            const int p = q * 4 + e;
            if (p < k && jn > 0)
                b8_row(B + (size_t)p * ldb + j0, cols, vsc, e, &w, &bd, &hi, &sum);
            else
                b8_row(zero, 0, vsc, e, &w, &bd, &hi, &sum);
        }
        _mm512_storeu_si512(bp + ((size_t)pn * kg + q) * 16, w);
    }
    int32_t sm[16];
    _mm512_storeu_si512(sm, sum);
    for (int c = 0; c < jn; c++) cs[j0 + c] = sm[c];
    *mx = _mm512_reduce_max_epi32(hi);
    return bd != 0;
}

/* (the parallel loop in a plain function: an OpenMP region's body is compiled without the
 * target of the function around it by some compilers, which then refuse its vector values) */
static int pack_b8_float(int k, int n, int kg, int npan, const float *B, ptrdiff_t ldb, float sc,
                         uint32_t *bp, int32_t *cs, int32_t *mb, int par)
{
    int bad = 0, stop = 0; /* stop: a panel found a value off int8, the rest are no use */
    int32_t mx = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) reduction(max : mx) if (par)
    for (int pn = 0; pn < npan; pn++) {
        int seen;
#pragma omp atomic read
        seen = stop;
        if (seen) continue;
        int32_t h;
        if (b8_panel(k, n, kg, pn, B, ldb, sc, bp, cs, &h)) {
            bad = 1;
#pragma omp atomic write
            stop = 1;
        }
        mx = h > mx ? h : mx;
    }
    *mb = mx;
    return bad;
}

/* The tiles over groups of k in blocks of kbg groups, each block's int32 sums added in int64. */
static void packed_gemm(const struct packed *g, int m, int n, int kbg, const struct fin *f,
                        float *C, ptrdiff_t ldc, int par)
{
    const int ntr = g->m_pad / g->R, ntc = g->npan / 2;
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int tt = 0; tt < ntr * ntc; tt++) {
        const int tr = tt % ntr, tc = tt / ntr;
        uint64_t acc[8][32];
        int32_t out[8][32];
        const int one = g->kg > 0 && kbg >= g->kg; /* one block: its int32 sums are the sums */
        if (!one) memset(acc, 0, sizeof acc);
        const uint8_t *a = g->a + (size_t)tr * g->R * g->a_stride;
        const uint8_t *b0 = g->b + (size_t)(2 * tc) * g->panel, *b1 = b0 + g->panel;
        const size_t bq = (size_t)g->P * 4; /* bytes of a group in a panel */
        for (int q0 = 0; q0 < g->kg; q0 += kbg) {
            const int nq = g->kg - q0 < kbg ? g->kg - q0 : kbg;
            if (g->vnni) {
                adapt_gemm_tile_vnni(a + (size_t)q0 * 4, g->a_stride, b0 + q0 * bq, b1 + q0 * bq,
                                     nq, !g->s8, out);
            } else {
                int32_t o6[6][16];
                adapt_gemm_tile_avx2(a + (size_t)q0 * 4, g->a_stride, b0 + q0 * bq, b1 + q0 * bq,
                                     nq, o6);
                for (int r = 0; r < 6; r++) memcpy(out[r], o6[r], sizeof o6[r]);
            }
            if (!one)
                for (int r = 0; r < g->R; r++)
                    for (int c = 0; c < 2 * g->P; c++) acc[r][c] += (uint64_t)(int64_t)out[r][c];
        }
        const int j0 = tc * 2 * g->P;
        for (int r = 0; r < g->R; r++) {
            const int i = tr * g->R + r;
            if (i >= m) break;
            for (int c = 0; c < 2 * g->P && j0 + c < n; c++) {
                uint64_t s = one ? (uint64_t)(int64_t)out[r][c] : acc[r][c];
                if (g->s8) /* (A + 128) B - 128 colsum(B), modulo 2^32: the exact int32 sum */
                    s = (uint64_t)(int64_t)(int32_t)((uint32_t)s -
                                                     128u * (uint32_t)g->cs[j0 + c]);
                C[(size_t)i * ldc + j0 + c] = fin_value(f, s);
            }
        }
    }
}

/* ------------------------------------------------------------------ wide: 128-bit sums */

static void to_codes64(const float *X, ptrdiff_t ld, int rows, int cols, int fl, int64_t *out)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            grid_int(X[(size_t)r * ld + c], fl, &out[(size_t)r * cols + c]); /* checked before */
}

/* The reference's integer arithmetic on codes (exact, or an int register): each element of C
 * sums its k products in order of p, as the reference does, with the loops ordered i, p, j so
 * that a row of B is read contiguously (a row of 128-bit sums per thread). An exact sum skips
 * the zero codes of A (adding 0 changes nothing; an int register's additions are all made, as
 * each may count). *nomem = 1 when a thread had no memory for its row of sums. */
static uint64_t wide_gemm(const struct quant_acc *acc, int m, int n, int k, const int64_t *Ac,
                          const int64_t *Bc, int pfl, int afl, float *C, ptrdiff_t ldc, int par,
                          int *nomem)
{
    uint64_t ovs = 0;
    int bad = 0;
    const int isint = acc->kind == QUANT_ACC_INT;
#pragma omp parallel reduction(+ : ovs, bad) if (par)
    {
        __int128 *s = malloc(((size_t)n + 1) * sizeof *s);
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < m; i++) {
            if (!s) {
                bad++;
                continue;
            }
            for (int j = 0; j < n; j++) s[j] = 0;
            for (int p = 0; p < k; p++) {
                const int64_t a = Ac[(size_t)i * k + p]; /* 64 x 64 -> 128-bit products */
                const int64_t *b = Bc + (size_t)p * n;
                if (isint) {
                    for (int j = 0; j < n; j++)
                        s[j] = acc_int_add(acc, s[j], (__int128)a * b[j], pfl, afl, &ovs);
                } else if (a != 0) {
                    for (int j = 0; j < n; j++) s[j] += (__int128)a * b[j];
                }
            }
            for (int j = 0; j < n; j++) C[(size_t)i * ldc + j] = float_of(s[j], afl);
        }
        free(s);
    }
    *nomem = bad != 0;
    return ovs;
}

/* ------------------------------------------------------------------ driver */

static enum adapt_gemm_isa isa_of(const struct quant_acc_opts *o)
{
    if (o && adapt_gemm_isa_available(o->isa)) return o->isa;
    return adapt_gemm_isa_best();
}

/* Whether the integer sums of k products of codes at most ma and mb in magnitude can be
 * formed in any order and finished by f: exact sums below 2^63, or an int register they
 * cannot overflow (shifts to its binary point included), or a wrapping one without a count. */
static int plan(const struct quant_acc *acc, const struct quant_acc_stats *st, int k, uint64_t ma,
                uint64_t mb, int pfl, int afl, struct fin *f, unsigned __int128 *P,
                unsigned __int128 *bound)
{
    *P = (unsigned __int128)ma * mb; /* |a product| <= P */
    *bound = *P * (unsigned)k;       /* |a partial sum| <= bound */
    const int sh = afl - pfl;
    *f = (struct fin){0, 0, 64, ldexpf(1.0f, -afl)};
    if (acc->kind != QUANT_ACC_INT) return *bound < ((unsigned __int128)1 << 63);
    if (sh < 0 || sh >= 63) return 0;
    const unsigned __int128 hi = ((unsigned __int128)1 << (acc->bits - 1)) - 1;
    f->reg = 1;
    f->sh = sh;
    f->bits = acc->bits;
    return *bound <= (hi >> sh) || (acc->overflow == QUANT_ACC_WRAP && !st);
}

static enum adapt_status integer_gemm(const struct quant_acc_opts *o, const struct quant_acc *acc,
                                      int m, int n, int k, const float *A, ptrdiff_t lda, int fla,
                                      const float *B, ptrdiff_t ldb, int flb, float *C,
                                      ptrdiff_t ldc, struct quant_acc_stats *st, int par,
                                      enum quant_acc_path *used)
{
    const enum adapt_gemm_isa isa = isa_of(o);
    const enum quant_acc_path min_path = o ? o->min_path : QUANT_ACC_PATH_INT8;
    const int pfl = fla + flb;
    const int isint = acc->kind == QUANT_ACC_INT;
    const int afl = isint && acc->fl >= 0 ? acc->fl : pfl;
    const unsigned __int128 i32max = 0x7fffffff;
    int32_t *Ac = buf_get(BUF_AC, ((size_t)m * k + 1) * sizeof *Ac), *Bc = NULL;
    enum adapt_status ret = ADAPT_OK;
    if (!Ac) {
        ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for %d x %d x %d codes", m, n,
                          k);
        goto out;
    }
    struct codes ca, cb;
    to_codes(isa, A, lda, m, k, fla, Ac, &ca, par);
    /* A on an int8 grid: try B straight into int8 panels, the int8 path's one pass over B */
    struct fin f8;
    unsigned __int128 P8, bound8;
    const uint64_t ma8 = (uint64_t)(ca.hi > -ca.lo ? ca.hi : -ca.lo);
    if (!ca.bad && !ca.wide && ca.lo >= -128 && ca.hi <= 127 && k > 0 &&
        isa == ADAPT_GEMM_ISA_AVX512VNNI && min_path <= QUANT_ACC_PATH_INT8 &&
        plan(acc, st, k, ma8, 128, pfl, afl, &f8, &P8, &bound8) && bound8 <= i32max) {
        /* (the plan for B's largest int8 code holds for any smaller one) */
        struct packed g;
        if (packed_init(isa, 1, m, n, k, &g)) {
            ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for packed operands");
            goto out;
        }
        int32_t mb8;
        if (!pack_b8_float(k, n, g.kg, g.npan, B, ldb, ldexpf(1.0f, flb), (uint32_t *)g.b, g.cs,
                           &mb8, par) &&
            plan(acc, st, k, ma8, (uint64_t)mb8, pfl, afl, &f8, &P8, &bound8) && bound8 <= i32max) {
            pack_a(&g, m, k, Ac, par);
            packed_gemm(&g, m, n, g.kg, &f8, C, ldc, par);
            packed_free(&g);
            if (used) *used = QUANT_ACC_PATH_INT8;
            goto out;
        }
        packed_free(&g);
    }
    Bc = buf_get(BUF_BC, ((size_t)k * n + 1) * sizeof *Bc);
    if (!Bc) {
        ret =
            ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for %d x %d x %d codes", m, n, k);
        goto out;
    }
    to_codes(isa, B, ldb, k, n, flb, Bc, &cb, par);
    if (ca.bad || cb.bad) {
        ret = grid_error(m, n, k, A, lda, fla, B, ldb, flb);
        goto out;
    }
    const uint64_t ma = (uint64_t)(ca.hi > -ca.lo ? ca.hi : -ca.lo);
    const uint64_t mb = (uint64_t)(cb.hi > -cb.lo ? cb.hi : -cb.lo);
    unsigned __int128 P, bound;
    const int sh = afl - pfl;
    struct fin f;
    const int gemm_ok = plan(acc, st, k, ma, mb, pfl, afl, &f, &P, &bound) && !ca.wide && !cb.wide;
    if (gemm_ok) {
        const int a8 = ca.lo >= -128 && ca.hi <= 127, b8 = cb.lo >= -128 && cb.hi <= 127;
        const int a16 = ca.lo >= -32768 && ca.hi <= 32767, b16 = cb.lo >= -32768 && cb.hi <= 32767;
        enum quant_acc_path path = QUANT_ACC_PATH_INT64;
        if (min_path <= QUANT_ACC_PATH_INT8 && a8 && b8 && bound <= i32max &&
            isa != ADAPT_GEMM_ISA_AVX2)
            path = QUANT_ACC_PATH_INT8;
        else if (min_path <= QUANT_ACC_PATH_INT16 && a16 && b16 && 2 * P <= i32max)
            path = QUANT_ACC_PATH_INT16;
        /* the products of a block of kb stay below 2^31: exact in int32 */
        const long long kb = P ? (long long)(i32max / P < (unsigned)k ? i32max / P : k) : k;
        if (path == QUANT_ACC_PATH_INT16 && kb < 16 && min_path < QUANT_ACC_PATH_INT16)
            path = QUANT_ACC_PATH_INT64; /* blocks too short to pay */
        if (used) *used = path;
        if (path != QUANT_ACC_PATH_INT64 && isa != ADAPT_GEMM_ISA_SCALAR) {
            struct packed g;
            if (pack(isa, path == QUANT_ACC_PATH_INT8, m, n, k, Ac, Bc, &g, par)) {
                ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for packed operands");
                goto out;
            }
            const int kbg = path == QUANT_ACC_PATH_INT8 ? g.kg : (int)(kb / g.G);
            packed_gemm(&g, m, n, kbg > 0 ? kbg : 1, &f, C, ldc, par);
            packed_free(&g);
        } else if (path != QUANT_ACC_PATH_INT64) { /* scalar int32 sums over blocks of kb */
#pragma omp parallel for schedule(dynamic, 1) if (par)
            for (int i = 0; i < m; i++) {
                uint64_t *s = malloc(((size_t)n + 1) * sizeof *s);
                uint32_t *t = malloc(((size_t)n + 1) * sizeof *t);
                if (s && t) {
                    for (int j = 0; j < n; j++) s[j] = 0;
                    for (long long p0 = 0; p0 < k; p0 += kb) {
                        const int kn = (int)(k - p0 < kb ? k - p0 : kb);
                        i32_row_scalar(kn, n, Ac + (size_t)i * k + p0, Bc + (size_t)p0 * n, n, t,
                                       s);
                    }
                    for (int j = 0; j < n; j++) C[(size_t)i * ldc + j] = fin_value(&f, s[j]);
                }
                free(s);
                free(t);
            }
        } else {
#pragma omp parallel for schedule(dynamic, 1) if (par)
            for (int i = 0; i < m; i++) {
                uint64_t *s = malloc(((size_t)n + 1) * sizeof *s);
                if (s) {
                    const int32_t *a = Ac + (size_t)i * k;
                    if (isa == ADAPT_GEMM_ISA_AVX512VNNI) i64_row_avx512(k, n, a, Bc, n, s);
                    else if (isa == ADAPT_GEMM_ISA_AVX2) i64_row_avx2(k, n, a, Bc, n, s);
                    else i64_row_scalar(k, n, a, Bc, n, s);
                    for (int j = 0; j < n; j++) C[(size_t)i * ldc + j] = fin_value(&f, s[j]);
                }
                free(s);
            }
        }
        goto out;
    }
    /* exact sums beyond 2^63 of int32 codes: 128-bit sums in two 64-bit words a lane */
    if (acc->kind == QUANT_ACC_EXACT && !ca.wide && !cb.wide) {
        if (used) *used = QUANT_ACC_PATH_INT128;
        int nomem = 0;
#pragma omp parallel reduction(+ : nomem) if (par)
        {
            uint64_t *lo = malloc(((size_t)n + 1) * sizeof *lo);
            int64_t *hi = malloc(((size_t)n + 1) * sizeof *hi);
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < m; i++) {
                if (!lo || !hi) {
                    nomem++;
                    continue;
                }
                const int32_t *a = Ac + (size_t)i * k;
                if (isa == ADAPT_GEMM_ISA_AVX512VNNI)
                    i128_row_avx512(k, n, a, Bc, n, lo, hi);
                else if (isa == ADAPT_GEMM_ISA_AVX2)
                    i128_row_avx2(k, n, a, Bc, n, lo, hi);
                else
                    i128_row_scalar(k, n, a, Bc, n, lo, hi);
                for (int j = 0; j < n; j++)
                    C[(size_t)i * ldc + j] = float_of(
                        (__int128)(((unsigned __int128)(uint64_t)hi[j] << 64) | lo[j]), afl);
            }
            free(lo);
            free(hi);
        }
        if (nomem)
            ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for a row of %d sums", n);
        goto out;
    }
    /* int registers in order: int64 lanes hold |sum| + |product| below 2^63; a product rounded
     * to the register's point has 2^(rsh-1) added before the shift (rsh clamped to 63 gives
     * the same 0 or -1 as a longer shift of a product below 2^62), so |product| + that term,
     * Pr, is what the lanes hold before the shift */
    const int pbits = sh >= 0 ? sh : 0;
    const int rsh = sh >= 0 ? 0 : (-sh > 63 ? 63 : -sh);
    const uint64_t rnd =
        isint && acc->align == QUANT_ACC_ALIGN_NEAREST && rsh > 0 ? (uint64_t)1 << (rsh - 1) : 0;
    const unsigned __int128 Pr = P + rnd;
    if (isint && !ca.wide && !cb.wide && acc->bits <= 62 && pbits < 62 &&
        Pr <= ((unsigned __int128)1 << (62 - pbits))) {
        struct seq q;
        q.lsh = pbits;
        q.rsh = rsh;
        q.rnd = (int64_t)rnd;
        q.p32 = Pr <= 0x7fffffff;
        const unsigned __int128 psh = sh >= 0 ? P << sh : P; /* |a shifted product| */
        q.l32 = q.p32 && acc->bits <= 31 &&
                psh + ((unsigned __int128)1 << (acc->bits - 1)) <= 0x7fffffff;
        q.m16 = ca.lo >= -32768 && ca.hi <= 32767 && cb.lo >= -32768 && cb.hi <= 32767;
        q.l16 = isa == ADAPT_GEMM_ISA_AVX512VNNI && q.m16 && Pr <= 0x7fff && psh <= 0x7fff &&
                (acc->bits == 16 ||
                 (acc->bits < 16 && psh + ((unsigned __int128)1 << (acc->bits - 1)) <= 0x7fff));
        q.wsh = 64 - acc->bits;
        q.sat = acc->overflow == QUANT_ACC_SATURATE;
        q.hi = ((int64_t)1 << (acc->bits - 1)) - 1;
        q.lo = -q.hi - 1;
        if (used) *used = QUANT_ACC_PATH_SEQ;
        /* items of SEQ_MB rows x SEQ_JB columns, each with its panel of B copied contiguous
         * (k x SEQ_JB) so that every row of the item reads it from cache */
        const int nb = (n + SEQ_JB - 1) / SEQ_JB;
        int mr = SEQ_MB; /* rows an item; fewer when the items would not feed the threads */
        while (mr > 8 && (long long)((m + mr - 1) / mr) * nb < 4LL * max_threads(par)) mr /= 2;
        const int mc = (m + mr - 1) / mr;
        /* the bound below which a row's partial sums (before the shift up to the register's
         * binary point) stay inside the register and below 2^31; 0: no such rows (products
         * floored to the binary point, or of more than 31 bits) */
        uint64_t safe_lim = 0;
        if (q.rsh == 0 && q.p32 && !q.l16) {
            const uint64_t h = (uint64_t)q.hi < 0x7fffffffu ? (uint64_t)q.hi : 0x7fffffffu;
            safe_lim = h >> q.lsh;
        }
        uint64_t ovs = 0;
        int nomem = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : ovs, nomem) if (par)
        for (int it = 0; it < mc * nb; it++) {
            const int i0 = (it % mc) * mr, j0 = (it / mc) * SEQ_JB;
            const int jn = n - j0 < SEQ_JB ? n - j0 : SEQ_JB;
            const int i1 = m - i0 < mr ? m : i0 + mr;
            /* the panel, its bounds bpos and bneg and the stretches' uc (doubles) */
            int32_t *pb =
                buf_get(BUF_SEQ,
                        ((size_t)k * (SEQ_JB + 4) + 2 * ((size_t)k / SEQ_CH + 1) + 1) * sizeof *pb);
            if (!pb) {
                nomem++;
                continue;
            }
            if (isa == ADAPT_GEMM_ISA_AVX512VNNI)
                ovs += seq_item_avx512(&q, k, jn, i0, i1, Ac, Bc + j0, n, pb, safe_lim, f.scale,
                                       C + j0, ldc);
            else if (isa == ADAPT_GEMM_ISA_AVX2)
                ovs += seq_item_avx2(&q, k, jn, i0, i1, Ac, Bc + j0, n, pb, safe_lim, f.scale,
                                     C + j0, ldc);
            else
                ovs += seq_item_scalar(&q, k, jn, i0, i1, Ac, Bc + j0, n, pb, safe_lim, f.scale,
                                       C + j0, ldc);
        }
        if (nomem)
            ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for a %d x %d panel", k,
                              SEQ_JB);
        else if (st)
            st->overflows += ovs;
        goto out;
    }
    /* beyond 64 bits: the reference's arithmetic on 64-bit codes */
    {
        int64_t *A64 = malloc(((size_t)m * k + 1) * sizeof *A64);
        int64_t *B64 = malloc(((size_t)k * n + 1) * sizeof *B64);
        if (!A64 || !B64) {
            free(A64);
            free(B64);
            ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for %d x %d x %d codes",
                              m, n, k);
            goto out;
        }
        to_codes64(A, lda, m, k, fla, A64);
        to_codes64(B, ldb, k, n, flb, B64);
        if (used) *used = QUANT_ACC_PATH_WIDE;
        int nomem = 0;
        const uint64_t ovs = wide_gemm(acc, m, n, k, A64, B64, pfl, afl, C, ldc, par, &nomem);
        if (nomem)
            ret = ADAPT_ERROR(ADAPT_ENOMEM, "quant_acc_gemm: no memory for a row of %d sums", n);
        else if (st)
            st->overflows += ovs;
        free(A64);
        free(B64);
    }
out:
    return ret;
}

enum adapt_status quant_acc_gemm_opts(const struct quant_acc_opts *o, const struct quant_acc *acc,
                                      int m, int n, int k, const float *A, ptrdiff_t lda, int fla,
                                      const float *B, ptrdiff_t ldb, int flb, float *C,
                                      ptrdiff_t ldc, struct quant_acc_stats *st,
                                      enum quant_acc_path *used)
{
    enum adapt_status e = quant_acc_check(acc);
    if (e) return e;
    if (m < 0 || n < 0 || k < 0) return ADAPT_ERROR(ADAPT_EINVAL, "gemm of %d x %d x %d", m, n, k);
    const int integer = acc->kind == QUANT_ACC_EXACT || acc->kind == QUANT_ACC_INT;
    if (integer && (fla < 0 || flb < 0 || fla + flb > 124))
        return ADAPT_ERROR(ADAPT_EINVAL, "integer accumulation of operands with %d and %d "
                                         "fractional bits (expected 0 .. 62 each)", fla, flb);
    if ((m > 1 && lda < k) || (k > 1 && ldb < n) || (m > 1 && ldc < n))
        return ADAPT_ERROR(ADAPT_EINVAL, "gemm of %d x %d x %d with row strides %td, %td, %td "
                                         "(A's below k, or B's or C's below n)",
                           m, n, k, lda, ldb, ldc);
    if (m == 0 || n == 0) return ADAPT_OK;
    const int par = !in_parallel() && (double)m * n * (k > 0 ? k : 1) >= PAR_MIN_WORK;
    const enum adapt_gemm_isa isa = isa_of(o);
    if (acc->kind == QUANT_ACC_FLOAT32) {
        if (used) *used = QUANT_ACC_PATH_F32;
#pragma omp parallel for schedule(dynamic, 4) if (par)
        for (int i = 0; i < m; i++) {
            const float *a = A + (size_t)i * lda;
            float *c = C + (size_t)i * ldc;
            if (isa == ADAPT_GEMM_ISA_AVX512VNNI) f32_row_avx512(k, n, a, B, ldb, c);
            else if (isa == ADAPT_GEMM_ISA_AVX2) f32_row_avx2(k, n, a, B, ldb, c);
            else f32_row_scalar(k, n, a, B, ldb, c);
        }
        return ADAPT_OK;
    }
    if (acc->kind == QUANT_ACC_FLOAT) {
        if (used) *used = QUANT_ACC_PATH_FLOAT;
        struct quant_spec fs = acc->fmt;
        fs.rounding = QUANT_ROUND_NEAREST;
        const int nr = (m + FL_TR - 1) / FL_TR, nc = (n + FL_JB - 1) / FL_JB;
#pragma omp parallel for schedule(dynamic, 1) if (par)
        for (int it = 0; it < nr * nc; it++) {
            const int i0 = (it / nc) * FL_TR, j0 = (it % nc) * FL_JB;
            const int rn = m - i0 < FL_TR ? m - i0 : FL_TR, jn = n - j0 < FL_JB ? n - j0 : FL_JB;
            float_tile(acc, &fs, k, rn, jn, A + (size_t)i0 * lda, lda, B + j0, ldb,
                       C + (size_t)i0 * ldc + j0, ldc);
        }
        return ADAPT_OK;
    }
    return integer_gemm(o, acc, m, n, k, A, lda, fla, B, ldb, flb, C, ldc, st, par, used);
}

enum adapt_status quant_acc_gemm(const struct quant_acc *acc, int m, int n, int k,
                                 const float *A, ptrdiff_t lda, int fla, const float *B,
                                 ptrdiff_t ldb, int flb, float *C, ptrdiff_t ldc,
                                 struct quant_acc_stats *st)
{
    return quant_acc_gemm_opts(NULL, acc, m, n, k, A, lda, fla, B, ldb, flb, C, ldc, st, NULL);
}
