/* src/quant/pyapi.c: a small C interface to the rounding kernels for programs that load them as
 * a shared object (the Python package's adaptsim.quantize, through ctypes). Built with the
 * kernel sources into python/adaptsim/_libadaptquant.so (src/quant/local.mk).
 *
 *   uint64_t counts[3];
 *   char err[512];
 *   if (adapt_py_quantize("fixed(8,4)", ADAPT_PY_STOCHASTIC, seed, stream, index, x, y,
 *                         rows, cols, counts, err, sizeof err) != 0) ... err says why
 *
 * is quant_rows(spec, x, y, rows, cols, {seed, stream, index}, NULL, stats) with spec parsed by
 * quant_spec_parse (every format text a configuration accepts, named formats included) and its
 * rounding, tie and block (bfp, muppet) set from mode; the same bits as adapt-train's rounding
 * of a tensor with that format and key. Thread-safe as quant_rows is. */
#include <stdio.h>
#include <string.h>

#include "src/base/status.h"
#include "src/quant/quant.h"

#define ADAPT_PY_API __attribute__((visibility("default")))

enum {
    ADAPT_PY_STOCHASTIC = 1, /* else nearest */
    ADAPT_PY_TIE_AWAY = 2,   /* nearest ties away from zero, else to even */
    ADAPT_PY_BLOCK_DIM0 = 4  /* bfp, muppet: one scale per row, else per call */
};

/* The interface's version: callers check it before anything else. */
ADAPT_PY_API int adapt_py_version(void);
ADAPT_PY_API int adapt_py_quantize(const char *fmt, int mode, uint64_t seed, uint64_t stream,
                                   uint64_t index, const float *x, float *y, size_t rows,
                                   size_t cols, uint64_t *counts, char *err, size_t errcap);
ADAPT_PY_API int adapt_py_canonical(const char *fmt, char *out, size_t outcap, char *err,
                                    size_t errcap);
ADAPT_PY_API int adapt_py_define(const char *name, const char *fmt, char *err, size_t errcap);
ADAPT_PY_API int adapt_py_bits(const char *fmt, char *err, size_t errcap);

int adapt_py_version(void) { return 1; }

/* Returns st (0 on success) after copying the recorded message into err. */
static int fail(enum adapt_status st, char *err, size_t errcap)
{
    if (err && errcap) snprintf(err, errcap, "%s", adapt_error_message());
    return (int)st;
}

static int parse(const char *fmt, struct quant_spec *s, char *err, size_t errcap)
{
    if (!fmt) return fail(ADAPT_ERROR(ADAPT_EINVAL, "quant: no format"), err, errcap);
    enum adapt_status st = quant_spec_parse(fmt, s);
    return st == ADAPT_OK ? 0 : fail(st, err, errcap);
}

int adapt_py_quantize(const char *fmt, int mode, uint64_t seed, uint64_t stream, uint64_t index,
                      const float *x, float *y, size_t rows, size_t cols, uint64_t *counts,
                      char *err, size_t errcap)
{
    struct quant_spec s;
    int st = parse(fmt, &s, err, errcap);
    if (st) return st;
    if (mode & ~(ADAPT_PY_STOCHASTIC | ADAPT_PY_TIE_AWAY | ADAPT_PY_BLOCK_DIM0))
        return fail(ADAPT_ERROR(ADAPT_EINVAL, "quant: unknown mode bits %#x", (unsigned)mode),
                    err, errcap);
    s.rounding = (mode & ADAPT_PY_STOCHASTIC) ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
    s.tie = (mode & ADAPT_PY_TIE_AWAY) ? QUANT_TIE_AWAY : QUANT_TIE_EVEN;
    if (s.format == QUANT_FORMAT_BFP || s.format == QUANT_FORMAT_MUPPET)
        s.block = (mode & ADAPT_PY_BLOCK_DIM0) ? QUANT_BLOCK_DIM0 : QUANT_BLOCK_TENSOR;
    if (rows && cols && (!x || !y))
        return fail(ADAPT_ERROR(ADAPT_EINVAL, "quant: no array"), err, errcap);
    struct quant_key key = {seed, stream, index};
    struct quant_stats stats = {0, 0, 0};
    enum adapt_status e = quant_rows(&s, x, y, rows, cols, key, NULL, &stats);
    if (e != ADAPT_OK) return fail(e, err, errcap);
    if (counts) {
        counts[0] = stats.saturated;
        counts[1] = stats.flushed;
        counts[2] = stats.zeros;
    }
    return 0;
}

int adapt_py_canonical(const char *fmt, char *out, size_t outcap, char *err, size_t errcap)
{
    struct quant_spec s;
    int st = parse(fmt, &s, err, errcap);
    if (st) return st;
    char buf[QUANT_SPEC_STR_MAX];
    quant_spec_str(&s, buf, sizeof buf);
    if (out && outcap) snprintf(out, outcap, "%s", buf);
    return 0;
}

int adapt_py_define(const char *name, const char *fmt, char *err, size_t errcap)
{
    struct quant_spec s;
    int st = parse(fmt, &s, err, errcap);
    if (st) return st;
    if (!name) return fail(ADAPT_ERROR(ADAPT_EINVAL, "quant: no format name"), err, errcap);
    enum adapt_status e = quant_format_define(name, &s);
    return e == ADAPT_OK ? 0 : fail(e, err, errcap);
}

int adapt_py_bits(const char *fmt, char *err, size_t errcap)
{
    struct quant_spec s;
    int st = parse(fmt, &s, err, errcap);
    return st ? -st : quant_spec_bits(&s);
}
