/* src/quant/quant.h: number formats of adapt-sim (doc/numerics.md): descriptors, rounding of float
 * arrays on the CPU and on CUDA devices, histograms and KL divergence (doc/algorithms.md), and
 * fixed-point storage export.
 *
 * Formats (struct quant_type table, looked up by name for configs):
 *   fixed(WL,FL)  step 2^-FL, range [-2^(WL-FL-1), 2^(WL-FL-1) - 2^-FL]; WL 1..32, FL 0..32
 *   bfp(WL)       shared exponent E = floor(log2 max|x|) per tensor or per dim-0 slice,
 *                 step 2^(E+2-WL), range +-(2^(WL-1)-1) steps; WL 2..32
 *   muppet(WL)    scale 2^sf (MuPPET) per tensor or per dim-0 slice, range
 *                 [-2^(WL-1), 2^(WL-1)-1] steps; WL 2..32
 *                 (a saturated value of a tensor whose max exceeds FLT_MAX / 2 becomes +-inf)
 *   fp16, bf16    IEEE binary16 and bfloat16 (subnormals; overflow to inf unless saturate)
 *   float(E,M)    E exponent bits (2..8), M mantissa bits (1..23), IEEE-style bias and subnormals,
 *                 overflow saturates by default (QPyTorch float_quantize)
 *   float(E,M,OPTION=VALUE,...)
 *                 the same with options, each at most once, in any order: bias=B (exponent bias,
 *                 default 2^(E-1)-1), nan=ieee|fn|none (what the all-ones exponent holds: inf
 *                 and NaN as IEEE; normals with S.1..1.1..1 the only NaN and no inf, as OCP E4M3;
 *                 normals only, every code finite, as the MX FP6/FP4 elements), sub=1|0
 *                 (subnormals), ovf=sat|inf (overflow to the largest finite value, or to inf;
 *                 with nan=fn to NaN; nan=none allows sat only). The kernels compute in float32,
 *                 so the largest value must be below 2^128 and either the smallest normal is
 *                 2^-126 (bias 127) or the least subnormal step 2^(1-bias-M) is at least 2^-126;
 *                 other biases are refused (ADAPT_ERANGE). The canonical text names the options
 *                 that differ from the defaults, in the order above: float(4,3,nan=fn) rounds
 *                 exactly as e4m3, float(5,2,ovf=inf) as e5m2, float(5,10) is float(5,10)
 *   NAME          a format registered by quant_format_define (the configuration's [format NAME]
 *                 sections): parsed to the spec it was registered with, printed canonically
 *   e4m3, e5m2    the OCP 8-bit floats (OFP8 specification v1.0): E4M3 bias 7, no infinities, the
 *                 all-ones exponent holds normals up to 448, S.1111.111 is NaN; overflow
 *                 saturates (satfinite) by default or, set to inf, gives NaN. E5M2 is float(5,2):
 *                 IEEE-like, max 57344, overflow to inf by default
 *   mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8
 *                 OCP Microscaling (MX v1.0) block formats: every 32 consecutive elements of a
 *                 row (the last block of a row may be shorter) share a power-of-two scale
 *                 X = 2^s stored as E8M0, s = floor(log2 max|v|) - emax(element), s >= -127;
 *                 each element is v / X rounded to the element type (FP8 E4M3/E5M2, FP6
 *                 E2M3/E3M2, FP4 E2M1: subnormals, no inf/NaN, normals saturate; INT8:
 *                 k 2^-6, k in [-127, 127]). A block holding inf or NaN becomes all NaN (its
 *                 scale is NaN). Blocks restart at every row of quant_rows (quant_array: one row)
 *   plugin(PATH), plugin(PATH:NAME)
 *                 a rounding function from a shared object, CPU only ("rounding plugins" below)
 * Rounding: nearest (ties to even, or away from zero) or stochastic (E[SR(x)] = x); values are
 * saturated after rounding. Random bits are Philox4x32-10 keyed by (seed, stream, element
 * index), the same as cuRAND's curand_init(seed, stream, index) + curand(), so results do not
 * depend on thread count, chunking or device; with sr_bits = 16 one 32-bit value serves two
 * consecutive elements (quant_sr_bits_at in src/quant/quant_impl.h). NaN stays NaN; +-inf
 * saturates (grid formats, and float formats set to saturate) or stays inf. Details:
 * src/quant/quant_impl.h.
 *
 * QPyTorch (CPU quant_cpu.cpp): fixed(WL,FL) nearest equals fixed_point_quantize (range, ties to
 * even, clamp after rounding, mask = clamped, +-inf clamped, NaN kept) wherever QPyTorch's float32
 * arithmetic is exact (|x| 2^FL < 2^23, WL <= 25); beyond that its float bounds and x + 0.5 - 0.5
 * round, ours stay exact. Its stochastic mode draws u from torch's generator, ours from Philox.
 * bfp matches block_quantize's grid and range; QPyTorch breaks nearest ties upward, ours by the
 * tie option. float(E,M) follows IEEE (subnormals by default); QPyTorch's float_quantize has none,
 * takes its smallest normal exponent one below IEEE's and breaks ties away from zero.
 *
 * Usage (the training engine):
 *   struct quant_spec s;
 *   if (quant_spec_parse("fixed(8,4)", &s) != ADAPT_OK) return ...;  // message set
 *   s.rounding = QUANT_ROUND_STOCHASTIC;
 *   struct quant_key key = {seed, ADAPT_STREAM_QUANT + tensor_id, 0};  // index of x[0]
 *   struct quant_stats st = {0, 0, 0};
 *   if (quant_array(&s, x, x, n, key, mask, &st) != ADAPT_OK) return ...;  // in place;
 *                                                            // mask and &st may be NULL
 * A tensor quantized in chunks gives the same bits when key.index is the chunk's offset (bfp and
 * muppet excepted: their scale comes from the data passed in one call).
 *
 * Non-goals: no tensor type (plain float arrays; dim-0 slices via quant_rows), no integer
 * arithmetic kernels, no state between calls. Thread-safe; every function may be called from
 * serial code and uses OpenMP inside.
 * Ownership: src/quant/ module; depends on src/base only.
 */
#ifndef QUANT_QUANT_H
#define QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "src/quant/quant_impl.h"
#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum quant_format {
    QUANT_FORMAT_FIXED = 0,
    QUANT_FORMAT_BFP,
    QUANT_FORMAT_MUPPET,
    QUANT_FORMAT_FP16,
    QUANT_FORMAT_BF16,
    QUANT_FORMAT_FLOAT,
    QUANT_FORMAT_E4M3, /* OCP 8-bit float E4M3: bias 7, no infinities, max 448, NaN = S.1111.111 */
    QUANT_FORMAT_E5M2, /* OCP 8-bit float E5M2: IEEE-like, bias 15, max 57344, infinities */
    QUANT_FORMAT_MXFP8_E4M3, /* OCP MX: 32-element blocks, E8M0 scale, E4M3 elements (max 448) */
    QUANT_FORMAT_MXFP8_E5M2, /* ... E5M2 elements (max 57344, saturating) */
    QUANT_FORMAT_MXFP6_E2M3, /* ... FP6 E2M3 elements (bias 1, max 7.5) */
    QUANT_FORMAT_MXFP6_E3M2, /* ... FP6 E3M2 elements (bias 3, max 28) */
    QUANT_FORMAT_MXFP4,      /* ... FP4 E2M1 elements (bias 1, max 6) */
    QUANT_FORMAT_MXINT8,     /* ... INT8 elements k 2^-6, k in [-127, 127] */
    QUANT_FORMAT_PLUGIN,     /* a rounding function from a shared object (CPU only) */
    QUANT_FORMAT_COUNT
};

enum quant_rounding { QUANT_ROUND_NEAREST = 0, QUANT_ROUND_STOCHASTIC };
enum quant_tie { QUANT_TIE_EVEN = 0, QUANT_TIE_AWAY };       /* nearest only */
enum quant_block { QUANT_BLOCK_TENSOR = 0, QUANT_BLOCK_DIM0 }; /* bfp, muppet: one scale per ... */
enum quant_overflow { QUANT_OVERFLOW_SATURATE = 0, QUANT_OVERFLOW_INF }; /* float formats */
#define QUANT_BIAS_IEEE (-0x7fffffff - 1) /* struct quant_spec's bias: 2^(exp_bits-1) - 1 */

/* A number format with its rounding. Fill with quant_spec_init or quant_spec_parse, then set
 * fields; every call validates it (quant_spec_check). */
struct quant_spec {
    enum quant_format format;
    int wl;                       /* fixed, bfp, muppet: word length including the sign bit */
    int fl;                       /* fixed: fraction length (may exceed WL - 1) */
    int exp_bits, man_bits;       /* float formats (fp16: 5, 10; bf16: 8, 7); MX: the element
                                     type's (mxint8: 0, 7) */
    enum quant_block block;       /* bfp, muppet */
    enum quant_rounding rounding; /* default nearest */
    enum quant_tie tie;           /* default even */
    enum quant_overflow overflow; /* float formats: fp16/bf16/e5m2 default inf, float(e,m) and
                                     e4m3 saturate; e4m3 has no infinity: "inf" gives NaN, and
                                     so does float(e,m) with nan fn */
    int subnormals;               /* float formats: 1 gradual underflow (default), 0 none */
    int bias;                     /* float(e,m): exponent bias; QUANT_BIAS_IEEE (the default)
                                     = 2^(e-1) - 1. The other formats: QUANT_BIAS_IEEE */
    enum quant_nan nan;           /* float(e,m): the all-ones exponent (quant_impl.h); default
                                     ieee. The other formats: ieee (e4m3's rule is its own) */
    int plugin;                   /* plugin: its number in this process's plugin registry */
    int sr_bits;                  /* stochastic rounding: random bits per element, 32 (the
                                     default) or 16 (QUANT_SR_BITS_16, src/quant/quant_impl.h);
                                     0 reads as 32. Not part of the format's text */
};

/* Where the random bits come from: element i of the array uses value (index + i) of (seed,
 * stream), or with 16 random bits (struct quant_spec's sr_bits) half (index + i) & 1 of value
 * (index + i) / 2. */
struct quant_key {
    uint64_t seed;
    uint64_t stream;
    uint64_t index;
};

/* Counters for the policies' logs; calls add to them. */
struct quant_stats {
    uint64_t saturated; /* rounded value outside the range, clamped (includes +-inf inputs) */
    uint64_t flushed;   /* nonzero input that became zero */
    uint64_t zeros;     /* outputs equal to zero (all of them) */
};

/* Finite range of an array (bfp and muppet scales). Empty (no finite values): max = -inf,
 * min = +inf, maxabs = 0. */
struct quant_range {
    float max, min, maxabs;
};

/* Everything a row kernel needs: rounding mode, format parameters of one block (grids and
 * float formats from src/quant/quant_impl.h), seed and stream. */
struct quant_plan {
    int32_t kind; /* QUANT_KIND_GRID, QUANT_KIND_FMT, QUANT_KIND_MX or QUANT_KIND_PLUGIN */
    int32_t mode; /* enum quant_mode */
    uint64_t seed, stream;
    struct quant_grid grid;
    struct quant_fmt fmt; /* MX: the element type (unused for mxint8) */
    struct quant_mx mx;   /* MX: element kind and emax */
    int32_t plugin;       /* plugin: registry number */
    int32_t sr_bits;      /* stochastic: 32 or 16 random bits per element (quant_sr_bits_at) */
};
enum { QUANT_KIND_GRID = 0, QUANT_KIND_FMT = 1, QUANT_KIND_MX = 2, QUANT_KIND_PLUGIN = 3 };

/* Row kernel: n elements with one plan; x[i] uses random value number index + i. x == y is
 * allowed (otherwise no overlap); mask (one byte per element: 1 = saturated) and stats may be
 * NULL. */
typedef void (*quant_row_fn)(const struct quant_plan *p, const float *x, float *y, size_t n,
                             uint64_t index, uint8_t *mask, struct quant_stats *stats);
/* CUDA: device arrays (see quant_cuda_rows). */
typedef enum adapt_status (*quant_cuda_rows_fn)(const struct quant_spec *s, const float *d_x,
                                                float *d_y, size_t rows, size_t cols,
                                                struct quant_key key, uint8_t *d_mask,
                                                struct quant_stats *stats);

/* Format descriptor (one descriptor per format). */
struct quant_type {
    const char *name;             /* "fixed" */
    enum quant_format format;
    const char *syntax;           /* "fixed(WL,FL)" */
    int needs_range;              /* 1: the scale comes from the data (bfp, muppet) */
    quant_row_fn row;             /* CPU: OpenMP over chunks, SIMD inside */
    quant_row_fn row_ref;         /* CPU: plain scalar loop, the reference twin */
    quant_cuda_rows_fn cuda_rows; /* reports ADAPT_EUNSUPPORTED in builds without CUDA */
};

const struct quant_type *quant_type_of(enum quant_format f);
/* 1 for the OCP MX block formats (scale per 32 elements of a row). */
int quant_format_is_mx(enum quant_format f);
/* 1 when a tensor rounded in format f, after some of its values are selected, moved or set to
 * zero (what relu, max pooling and flatten do), rounds to itself again: the element-wise formats
 * (fixed and the float formats) and the per-tensor scales of bfp and muppet (the scale can only
 * move to a finer grid that holds the old one). 0 for the MX formats (blocks regroup, and an E4M3
 * block whose largest value drops can saturate) and for plugins (nothing is known of them). */
int quant_format_keeps_subsets(enum quant_format f);
/* 1 when rounding to b returns every value that rounding to a can produce unchanged (finite
 * values, +-inf and NaN; any rounding mode): fixed in fixed with no more fraction and no more
 * integer bits, a float format in one with no fewer mantissa bits, no smaller range, no coarser
 * least step and infinities where a has them, and an MX format in itself. 0 otherwise (also when
 * it would hold but is not worked out, e.g. fixed in a float format). */
int quant_spec_within(const struct quant_spec *a, const struct quant_spec *b);
/* By bare name ("fixed", "float"); NULL when unknown. */
const struct quant_type *quant_type_find(const char *name);

/* ---- specs ---- */

/* Defaults: fixed <8,4>, bfp and muppet WL 8 (block tensor), fp16, bf16, float(5,10) (IEEE bias
 * and all-ones exponent); nearest, ties to even, subnormals on. */
void quant_spec_init(struct quant_spec *s, enum quant_format f);
/* "fixed", "fixed(8,4)", "bfp", "bfp(8)", "muppet(12)", "fp16", "bf16", "e4m3", "e5m2",
 * "float(5,10)", "float(4,3,bias=8,nan=fn,sub=0,ovf=sat)", "mxfp8_e4m3", "mxfp8_e5m2",
 * "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8", "plugin(PATH)" or a registered NAME;
 * surrounding blanks allowed. ADAPT_EINVAL for unknown names or bad syntax, ADAPT_ERANGE for
 * parameters out of range; *s is written only on success. */
enum adapt_status quant_spec_parse(const char *text, struct quant_spec *s);
enum adapt_status quant_spec_check(const struct quant_spec *s);
/* Canonical text, e.g. "fixed(8,4)", "float(4,3,nan=fn)" (a named format prints as its
 * definition: the text carries everything, no registry is needed to read it back); returns buf.
 * QUANT_SPEC_STR_MAX bytes hold any spec's. */
#define QUANT_SPEC_STR_MAX 512
const char *quant_spec_str(const struct quant_spec *s, char *buf, size_t len);
/* The exponent bias of a float format (fp16 15, bf16 127, e4m3 7, float(e,m) its own; the MX
 * formats their element type's); 0 for the other formats. */
int quant_spec_bias(const struct quant_spec *s);

/* ---- named formats (src/quant/named.c) ----
 * A process-wide table of names for specs, which quant_spec_parse consults after the built-in
 * names: the configuration's [format NAME] sections register theirs before any key naming a
 * format is read. A name is [A-Za-z_][A-Za-z0-9_]* (at most QUANT_FORMAT_NAME_MAX - 1
 * characters) and is not reserved (quant_format_reserved). Defining a name again replaces its
 * spec (a process may read several configurations; specs parsed before keep their values, a
 * spec is a value). The table holds the format only: rounding and tie are stored as nearest and
 * even. Thread-safe. */
#define QUANT_FORMAT_NAME_MAX 32 /* bytes of a name, NUL included */
#define QUANT_FORMAT_NAMED_MAX 64
/* ADAPT_EINVAL (bad or reserved name, invalid spec: quant_spec_check's message), ADAPT_ERANGE
 * (table full, or the spec's parameters out of range). */
enum adapt_status quant_format_define(const char *name, const struct quant_spec *s);
/* The spec registered as name; ADAPT_ENOENT (no message recorded) when there is none. */
enum adapt_status quant_format_lookup(const char *name, struct quant_spec *s);
/* Forgets every named format (for programs that read many unrelated configurations in one
 * process: the fuzz harnesses). Specs parsed before keep their values. */
void quant_format_clear(void);
/* 1 when name cannot be defined: a built-in format's name ("fixed", "float", "e4m3", "mxfp4",
 * "plugin", ...) or "float32" / "fp32" (what traces and checkpoints call float32 units). */
int quant_format_reserved(const char *name);
/* 1 when name is [A-Za-z_][A-Za-z0-9_]* and shorter than QUANT_FORMAT_NAME_MAX. */
int quant_format_name_valid(const char *name);
/* Storage bits per element: WL, or 1 + E + M; MX: the element's bits (8, 6 or 4), without the
 * shared scale's 8 bits per 32 elements. */
int quant_spec_bits(const struct quant_spec *s);
/* "nearest" / "stochastic" and "even" / "away". */
enum adapt_status quant_rounding_parse(const char *text, enum quant_rounding *r);
enum adapt_status quant_tie_parse(const char *text, enum quant_tie *t);

/* ---- rounding ---- */

/* Quantize n floats (x == y allowed). bfp and muppet take their scale from these n values. */
enum adapt_status quant_array(const struct quant_spec *s, const float *x, float *y, size_t n,
                              struct quant_key key, uint8_t *mask, struct quant_stats *stats);
/* The same for a (rows, cols) row-major array: bfp and muppet with block dim0 get one scale per
 * row (row r rounded as quant_array of that row with key.index + r cols), MX formats start their
 * 32-element blocks at every row; for every other format this equals quant_array over
 * rows * cols elements. */
enum adapt_status quant_rows(const struct quant_spec *s, const float *x, float *y, size_t rows,
                             size_t cols, struct quant_key key, uint8_t *mask,
                             struct quant_stats *stats);
/* MX formats: nmat row-major (rows, cols) matrices, x + m rows cols the m-th, each rounded in
 * blocks down its columns (restarting at every column), element (r, c) of matrix m with
 * random-bit index key.index + m rows cols + c rows + r: the values, bits and stats of
 * quant_rows over each matrix's transpose (cols, rows), without the transposes. No mask. */
enum adapt_status quant_cols(const struct quant_spec *s, const float *x, float *y, size_t nmat,
                             size_t rows, size_t cols, struct quant_key key,
                             struct quant_stats *stats);
/* Scalar reference twin of quant_rows (same bits, no threads, no SIMD). */
enum adapt_status quant_rows_ref(const struct quant_spec *s, const float *x, float *y, size_t rows,
                                 size_t cols, struct quant_key key, uint8_t *mask,
                                 struct quant_stats *stats);

/* y = quant_rows(s, x * scale) * inv, element by element with the same bits as those three
 * steps apart (x == y allowed), in one pass over memory where the format takes no scale from
 * the data (not bfp, muppet or MX: for those, the three steps). The scaled roles' rounding. */
enum adapt_status quant_rows_scaled(const struct quant_spec *s, const float *x, float *y,
                                    size_t rows, size_t cols, struct quant_key key, float scale,
                                    float inv, struct quant_stats *stats);
/* max |x| over n floats in one pass (OpenMP + SIMD); *nonfinite = 1 and the result inf when
 * any x is inf or NaN. */
float quant_amax_compute(const float *x, size_t n, int *nonfinite);
/* The amax whose |x| bits are the largest, m: inf from 0x7f800000 up (an inf or NaN), else that
 * float (quant_amax_compute's reading, shared with the GPU engine's). */
static inline float quant_amax_of_bits(uint32_t m)
{
    union {
        uint32_t u;
        float f;
    } v = {m};
    return m >= 0x7f800000u ? (float)INFINITY : v.f;
}
/* Finite max, min and max |x| (OpenMP + SIMD) and its scalar twin. */
void quant_range_compute(const float *x, size_t n, struct quant_range *r);
void quant_range_compute_ref(const float *x, size_t n, struct quant_range *r);

/* Prepare the parameters of one block; range is needed (non-NULL) when the type needs_range. */
enum adapt_status quant_plan_init(const struct quant_spec *s, const struct quant_range *range,
                                  struct quant_key key, struct quant_plan *p);
/* One value with a plan and its random bits (scalar; used by the histograms and tests). An MX
 * plan rounds v as the only element of its block. */
float quant_plan_round(const struct quant_plan *p, float v, uint32_t r, uint32_t *sat);

/* The row kernels behind the table: grid formats (fixed, bfp, muppet: plans of kind grid) and
 * float formats (fp16, bf16, float(e,m): kind fmt), each with its scalar twin. */
void quant_grid_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                    uint8_t *mask, struct quant_stats *stats);
void quant_grid_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                        uint64_t index, uint8_t *mask, struct quant_stats *stats);
void quant_float_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                     uint8_t *mask, struct quant_stats *stats);
void quant_float_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                         uint64_t index, uint8_t *mask, struct quant_stats *stats);
/* MX formats: x[0..n) is one row, its blocks of QUANT_MX_BLOCK start at x[0]. */
void quant_mx_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                  uint8_t *mask, struct quant_stats *stats);
void quant_mx_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, struct quant_stats *stats);

/* Plugin formats (src/quant/plugin.c): each element is y = NAME(x, r) with r its Philox value
 * (rounding stochastic) or 2^31 (rounding nearest: u = 1/2); the tie rule does not apply. */
void quant_plugin_row(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, struct quant_stats *stats);
void quant_plugin_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                          uint64_t index, uint8_t *mask, struct quant_stats *stats);

/* ---- rounding plugins (src/quant/plugin.c; doc/policies.md, "Writing a rounding plugin") ----
 * A plugin is a shared object exporting `float NAME(float x, uint32_t random_bits)`, declared
 * `#pragma omp declare simd` so that the compiler also emits its x86-64 vector variants
 * (_ZGVbN4vv_NAME, _ZGVdN8vv_NAME, _ZGVeN16vv_NAME), and optionally `int NAME_bits(void)`, its
 * storage bits per element (1..32; 32 when absent). It is named "plugin(PATH)" (NAME: the file
 * name up to its first dot) or "plugin(PATH:NAME)". Loading first reads the file's ELF header
 * and program headers (a shared object of this machine's class, byte order and e_machine, every
 * segment inside the file; a bare name is checked where LD_LIBRARY_PATH finds it, and left to the
 * system's library folders otherwise), then opens it (dlopen), finds the symbols (each must be a
 * function: STT_FUNC or STT_GNU_IFUNC) and checks every vector variant this CPU can run against
 * the scalar function on a fixed test vector; the widest variant that agrees then runs the rows,
 * the scalar function the tails and the reference twin. Loaded plugins stay loaded for the life
 * of the process, in a registry of QUANT_PLUGIN_MAX entries; loading the same PATH and NAME
 * again gives the same number. Thread-safe. */
#define QUANT_PLUGIN_MAX 16
#define QUANT_PLUGIN_TEXT_MAX 480
/* text: "PATH" or "PATH:NAME" (the inside of plugin(...)). ADAPT_EIO (file), ADAPT_ENOENT
 * (symbol), ADAPT_EFORMAT (not a shared object of this machine, cut short, a symbol that is not a
 * function, vector variant disagrees, bad NAME_bits), ADAPT_EINVAL (syntax),
 * ADAPT_ERANGE (registry full, text too long); the message names the file and symbol. */
enum adapt_status quant_plugin_load(const char *text, int *id);
/* The file and function of a plugin text as quant_plugin_load reads it: "PATH:NAME" when the text
 * after its last ':' is an identifier, else "PATH" with NAME the file name up to its first dot.
 * path and name hold QUANT_PLUGIN_TEXT_MAX + 1 bytes. ADAPT_EINVAL / ADAPT_ERANGE as
 * quant_plugin_load. */
enum adapt_status quant_plugin_split(const char *text, char *path, char *name);
/* Plugins named by data. A format read from a file the user did not write (a checkpoint's stored
 * formats) must not load code on its own: quant_spec_plugin_text says, without loading anything,
 * which plugin quant_spec_parse would load for a text, and quant_plugin_allowed whether the user
 * allowed it. */
/* 1 when quant_spec_parse(text) would load a plugin (the format's name is plugin): inner
 * (QUANT_PLUGIN_TEXT_MAX + 1 bytes) = the text it would load ("PATH" or "PATH:NAME"), or "" when
 * the parameters are malformed (quant_spec_parse then refuses the text without loading anything;
 * a message may be recorded). 0 when the text names no plugin: parsing it loads nothing. */
int quant_spec_plugin_text(const char *text, char *inner);
/* 1 when plugin text ("PATH" or "PATH:NAME") is allowed: an entry of allow[0..n) names the same
 * file ("PATH": any function of it; "PATH:NAME": that function), or the same file and function is
 * loaded in this process already (the formats of the configuration, which the user wrote, are
 * loaded when it is checked and its policy built). The same file: both are bare names (no '/',
 * which dlopen searches for in the library folders) and equal, or both contain a '/' and
 * realpath resolves them to the same file (when neither resolves, the texts are equal). */
int quant_plugin_allowed(const char *text, const char *const *allow, int n);
/* Turns plugin loading off for the rest of the process: every later quant_plugin_load (and
 * quant_spec_parse of a plugin format) fails with ADAPT_EUNSUPPORTED. For programs that parse
 * formats from untrusted text (the fuzz harnesses). */
void quant_plugin_forbid(void);
/* 1 when id is a loaded plugin. */
int quant_plugin_valid(int id);
/* The text it was loaded with ("PATH" or "PATH:NAME"); "" for an unknown id. */
const char *quant_plugin_text(int id);
/* Storage bits per element (NAME_bits(), or 32). */
int quant_plugin_bits(int id);
/* The symbol that runs whole vectors ("_ZGVdN8vv_NAME") or, without one, NAME; its lanes (1 for
 * the scalar function). */
const char *quant_plugin_kernel(int id, int *lanes);
/* One element through the scalar function: r as passed to NAME; *sat = 1 for an infinite
 * result (overflow, or an infinite input kept). */
float quant_plugin_round(int id, float v, uint32_t r, uint32_t *sat);

/* ---- CUDA (src/quant/cuda/quant.cu; src/quant/cuda_none.c without CUDA) ---- */

/* 1 when this build contains the CUDA kernels. */
int quant_cuda_built(void);
/* quant_rows on device arrays (d_mask may be NULL; stats is a host struct, may be NULL). The
 * bfp/muppet reductions run on the device. Synchronous. ADAPT_EUNSUPPORTED without CUDA. */
enum adapt_status quant_cuda_rows(const struct quant_spec *s, const float *d_x, float *d_y,
                                  size_t rows, size_t cols, struct quant_key key, uint8_t *d_mask,
                                  struct quant_stats *stats);
/* The same on host arrays (copies in and out; for tests and benchmarks). */
enum adapt_status quant_cuda_rows_host(const struct quant_spec *s, const float *x, float *y,
                                       size_t rows, size_t cols, struct quant_key key,
                                       uint8_t *mask, struct quant_stats *stats);
/* quant_cuda_rows queued on a CUDA stream (a cudaStream_t; NULL: the default stream) without
 * waiting: the caller gives device scratch of at least quant_cuda_scratch_bytes(s, rows, cols)
 * bytes (not to be reused before the rounding ran), and the saturated / flushed / zero counts
 * are added to d_counts[0..2] (device memory; NULL: not counted). The bits are
 * quant_cuda_rows'. */
size_t quant_cuda_scratch_bytes(const struct quant_spec *s, size_t rows, size_t cols);
enum adapt_status quant_cuda_rows_on(const struct quant_spec *s, const float *d_x, float *d_y,
                                     size_t rows, size_t cols, struct quant_key key,
                                     uint8_t *d_mask, unsigned long long *d_counts, void *scratch,
                                     size_t scratch_bytes, void *stream);
/* Several roundings queued on a stream in one launch (per 64; per 30 with CUDA before 12.1):
 * job i is quant_cuda_rows_on of n elements (one row) with its spec and key, no mask, no
 * scratch, counted into counts (NULL: not counted); the same bits. For the formats
 * quant_cuda_list_fits accepts: those whose grid comes neither from the data (bfp, muppet) nor
 * from blocks (MX), and not plugins. */
struct quant_cuda_job {
    const struct quant_spec *s;
    const float *x;
    float *y; /* y == x allowed; otherwise no overlap */
    size_t n;
    struct quant_key key;
    unsigned long long *counts;
};
int quant_cuda_list_fits(const struct quant_spec *s);
enum adapt_status quant_cuda_list_on(const struct quant_cuda_job *jobs, int k, void *stream);
/* The same on host arrays (copies in and out, waits; for tests): job i's counts are added to
 * stats[i] (stats may be NULL; the jobs' counts pointers are not used). */
enum adapt_status quant_cuda_list_host(const struct quant_cuda_job *jobs, int k,
                                       struct quant_stats *stats);
/* The finite range of d_x[0 .. n-1], queued on a stream: d_keys[0] = the largest, d_keys[1] = the
 * smallest finite value as quant_order_key keys (src/quant/quant_impl.h); d_keys[0] == 0: no
 * finite value. */
enum adapt_status quant_cuda_range_on(const float *d_x, size_t n, uint32_t *d_keys, void *stream);
/* Launch shape (threads per block, blocks; 0 = default). Results do not depend on it. */
void quant_cuda_set_launch(int threads, int blocks);

/* ---- histograms and KL (doc/algorithms.md) ---- */

enum quant_hist_edges {
    QUANT_HIST_CLAMP = 0, /* values outside [lo, hi] count in the edge bins */
    QUANT_HIST_DROP       /* values outside are ignored (torch.histc) */
};

/* counts[0..bins-1] = histogram of x[0], x[stride], ... (n elements, stride >= 1) over [lo, hi]
 * with equal-width bins, bin = floor((v - lo) * bins / (hi - lo)) in double, v == hi in the last
 * bin; lo == hi widens to [lo - 1, hi + 1] (as torch.histc); NaN is ignored. */
enum adapt_status quant_hist(const float *x, size_t n, size_t stride, double lo, double hi,
                             int bins, enum quant_hist_edges edges, uint64_t *counts);

/* KL(P||Q) = sum_b P_b ln(P_b / Q_b) of two count histograms (normalised here); +inf when some
 * P_b > 0 has Q_b = 0; 0 when P is empty. */
double quant_kl_counts(const uint64_t *p, const uint64_t *q, int bins);
/* The AdaPT reference implementation's divergence, torch KLDivLoss(input = w, target = wq,
 * log_target = True, reduction = batchmean): (1/r) sum_b exp(wq_b) (wq_b - w_b) over the
 * normalised histograms of the weights (w) and of their quantization (wq). */
double quant_kl_reference_counts(const uint64_t *w, const uint64_t *wq, int bins);

/* Quantization loss of weights w (n values) under spec s, doc/algorithms.md, corrected mode: the
 * sample is w[0], w[stride], ... (sample elements, stride = n / sample; sample = 0 or >= n: all),
 * Q = histogram of the sample over [min, max] of the sample, P = histogram of the quantized
 * sample (rounded with s, random bits keyed by the element index) with the same bins, edges
 * clamped; *kl = KL(P||Q). bfp/muppet scales come from all n values. */
enum adapt_status quant_kl(const struct quant_spec *s, const float *w, size_t n, size_t sample,
                           int bins, struct quant_key key, double *kl);
/* The same pipeline as the reference implementation: histograms as torch.histc (edges dropped),
 * divergence quant_kl_reference_counts. */
enum adapt_status quant_kl_reference(const struct quant_spec *s, const float *w, size_t n,
                                     size_t sample, int bins, struct quant_key key, double *div);

/* ---- fixed-point storage ---- */

enum quant_pack_type {
    QUANT_PACK_INT8 = 1,
    QUANT_PACK_INT16 = 2,
    QUANT_PACK_INT32 = 4
}; /* bytes */

/* Smallest type holding WL bits (WL 1..32). */
enum quant_pack_type quant_pack_type_for(int wl);
/* codes[i] = round(x[i] * 2^FL) clamped to the <WL, FL> range (nearest with s->tie; a tensor
 * already quantized with s is stored exactly). s must be fixed and type must hold WL. */
enum adapt_status quant_pack(const struct quant_spec *s, const float *x, size_t n,
                             enum quant_pack_type type, void *codes);
/* y[i] = codes[i] * 2^-FL (exact when |code| < 2^24 or the code came from quant_pack). */
enum adapt_status quant_unpack(enum quant_pack_type type, const void *codes, size_t n, int fl,
                               float *y);

/* ---- accumulators (doc/numerics.md, "Accumulators") ---- */

/* How a matrix product sums its products: float32 (each product rounded to float32, then added
 * in float32), exact (products and sums in integers, the result rounded once to float32), int
 * (a two's-complement register of `bits` bits whose binary point is at `fl` fractional bits,
 * -1: the products' own, fla + flb; a product with more fractional bits loses the low ones
 * toward minus infinity, or with `align` nearest is rounded to the nearest multiple of 2^-fl,
 * ties up (half the register's last place added, then the low bits dropped); a sum outside the
 * register wraps modulo 2^bits or saturates), or float
 * (each product added to the chunk's sum and that sum rounded to nearest in format fmt, at most
 * 22 significant bits; every `chunk` products, 0 for never, the chunk's sum is added to a
 * float32 total and the chunk starts again at zero). Sums run in the order p = 0 .. k-1. */
enum quant_acc_kind { QUANT_ACC_FLOAT32 = 0, QUANT_ACC_EXACT, QUANT_ACC_INT, QUANT_ACC_FLOAT };
enum quant_acc_overflow { QUANT_ACC_WRAP = 0, QUANT_ACC_SATURATE };
enum quant_acc_align { QUANT_ACC_ALIGN_FLOOR = 0, QUANT_ACC_ALIGN_NEAREST };
struct quant_acc {
    enum quant_acc_kind kind;
    int bits, fl;                     /* int */
    enum quant_acc_overflow overflow; /* int */
    enum quant_acc_align align;       /* int with fl >= 0: a product's low bits floored/rounded */
    struct quant_spec fmt;            /* float: float(e,m), fp16 or bf16 */
    int chunk;                        /* float */
};
struct quant_acc_stats {
    uint64_t overflows; /* int: additions whose exact sum left the register (wrapped/saturated) */
};
const char *quant_acc_kind_name(enum quant_acc_kind k);
enum adapt_status quant_acc_check(const struct quant_acc *a);
/* The configuration's text of a model (src/quant/accum_spec.c): float32, exact,
 * int(BITS[, wrap|saturate[, FL[, floor|nearest]]]) (wrap, the products' point and floor by
 * default) or
 * float(FORMAT[, K]) (K = 0 by default); fails with a message quoting the text. quant_acc_str
 * writes a model back in that grammar with every part explicit (QUANT_SPEC_STR_MAX + 32 bytes
 * hold any). */
enum adapt_status quant_acc_parse(const char *text, struct quant_acc *out);
const char *quant_acc_str(const struct quant_acc *a, char *buf, size_t len);
/* The scalar reference: C (m x n) = A (m x k) B (k x n), row-major, each dot product summed as
 * acc says. exact and int take operands on fixed-point grids, A's values multiples of 2^-fla
 * and B's of 2^-flb (0 <= fla, flb <= 62; an operand off its grid is an error naming it); the
 * other kinds ignore fla and flb. Overflows are added to st (may be NULL). */
enum adapt_status quant_acc_gemm_ref(const struct quant_acc *acc, int m, int n, int k,
                                     const float *A, int fla, const float *B, int flb, float *C,
                                     struct quant_acc_stats *st);
/* The training engine's entry (src/quant/accum_fast.c): the same values as quant_acc_gemm_ref
 * bit for bit, and the same overflow count, with row strides lda (A's rows), ldb (B's rows) and
 * ldc (C's rows) in elements; integer kernels (int8, int16 with exact int32 blocks, int64)
 * where the operands' codes allow. Threads with OpenMP over output tiles unless called inside a
 * parallel region (then on the calling thread). Operands off their grid: an error naming the
 * operand, as the reference. */
enum adapt_status quant_acc_gemm(const struct quant_acc *acc, int m, int n, int k, const float *A,
                                 ptrdiff_t lda, int fla, const float *B, ptrdiff_t ldb, int flb,
                                 float *C, ptrdiff_t ldc, struct quant_acc_stats *st);

#ifdef __cplusplus
}
#endif
#endif
