/* src/quant/pack.c: fixed-point storage export (integer codes plus FL) and import. */
#include "src/quant/quant.h"

enum quant_pack_type quant_pack_type_for(int wl)
{
    return wl <= 8 ? QUANT_PACK_INT8 : wl <= 16 ? QUANT_PACK_INT16 : QUANT_PACK_INT32;
}

static int pack_type_ok(enum quant_pack_type t)
{
    return t == QUANT_PACK_INT8 || t == QUANT_PACK_INT16 || t == QUANT_PACK_INT32;
}

enum adapt_status quant_pack(const struct quant_spec *s, const float *x, size_t n,
                             enum quant_pack_type type, void *codes)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    if (s->format != QUANT_FORMAT_FIXED)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant pack: only fixed point is stored as integer codes");
    if (!pack_type_ok(type))
        return ADAPT_ERROR(ADAPT_EINVAL, "quant pack: type %d is not int8, int16 or int32",
                           (int)type);
    if ((int)type * 8 < s->wl)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant pack: WL %d does not fit in int%d", s->wl,
                           (int)type * 8);
    if (n && (!x || !codes)) return ADAPT_ERROR(ADAPT_EINVAL, "quant pack: NULL array");
    const struct quant_grid g = quant_grid_fixed(s->wl, s->fl);
    const float scale = quant_pow2f(s->fl);
    const int mode = s->tie == QUANT_TIE_AWAY ? QUANT_MODE_NEAREST_AWAY : QUANT_MODE_NEAREST_EVEN;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < (long long)n; i++) {
        uint32_t sat;
        float q = mode == QUANT_MODE_NEAREST_AWAY
                      ? quant_grid_round(g, QUANT_MODE_NEAREST_AWAY, 0, x[i], 0u, &sat)
                      : quant_grid_round(g, QUANT_MODE_NEAREST_EVEN, 0, x[i], 0u, &sat);
        /* q * 2^FL is the integer k exactly; NaN has no code and is stored as 0 */
        int32_t k = q == q ? (int32_t)(q * scale) : 0;
        if (type == QUANT_PACK_INT8) ((int8_t *)codes)[i] = (int8_t)k;
        else if (type == QUANT_PACK_INT16) ((int16_t *)codes)[i] = (int16_t)k;
        else ((int32_t *)codes)[i] = k;
    }
    return ADAPT_OK;
}

enum adapt_status quant_unpack(enum quant_pack_type type, const void *codes, size_t n, int fl,
                               float *y)
{
    if (!pack_type_ok(type))
        return ADAPT_ERROR(ADAPT_EINVAL, "quant unpack: type %d is not int8, int16 or int32",
                           (int)type);
    if (fl < 0 || fl > 32)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant unpack: FL %d out of range 0..32", fl);
    if (n && (!y || !codes)) return ADAPT_ERROR(ADAPT_EINVAL, "quant unpack: NULL array");
    const float r = quant_pow2f(-fl);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < (long long)n; i++) {
        int32_t k = type == QUANT_PACK_INT8    ? ((const int8_t *)codes)[i]
                    : type == QUANT_PACK_INT16 ? ((const int16_t *)codes)[i]
                                               : ((const int32_t *)codes)[i];
        y[i] = (float)k * r;
    }
    return ADAPT_OK;
}
