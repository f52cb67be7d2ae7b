/* src/quant/accum_spec.c: the text of an accumulator model (struct quant_acc, doc/numerics.md
 * "Accumulators"), as the configuration writes it:
 *
 *   float32                      products rounded to float32, summed in float32
 *   exact                        integer products and sums, the result rounded once
 *   int(A)                       an A-bit register at the products' binary point, wrapping
 *   int(A, wrap|saturate)        the same, with the overflow rule named
 *   int(A, wrap|saturate, F)     the register's binary point at F fractional bits
 *   int(A, wrap|saturate, F, R)  ... a product with more fractional bits aligned to it by R:
 *                                floor (the default) or nearest (ties up)
 *   float(FMT)                   each addition rounded to FMT (fp16, bf16, float(e,m), ...)
 *   float(FMT, K)                ... and the partial sum promoted to float32 every K products
 *
 * quant_acc_str writes the same grammar back, with every part explicit but the default floor
 * alignment, so that a trace or a checkpoint holding it parses to the same model. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"

/* the arguments inside "name(...)": up to 4 pieces split at top-level commas, trimmed */
static int split_args(const char *s, char out[4][QUANT_SPEC_STR_MAX])
{
    int n = 0, depth = 0;
    size_t len = 0;
    for (const char *c = s;; c++) {
        if (*c == '\0' || (*c == ',' && depth == 0)) {
            if (n == 4) return -1;
            char *a = out[n];
            while (len && isspace((unsigned char)a[len - 1])) len--;
            a[len] = '\0';
            size_t lead = strspn(a, " \t");
            memmove(a, a + lead, len - lead + 1);
            n++;
            len = 0;
            if (*c == '\0') break;
            continue;
        }
        if (*c == '(') depth++;
        if (*c == ')') depth--;
        if (depth < 0) return -1;
        if (n == 4 || len + 1 >= QUANT_SPEC_STR_MAX) return -1; /* a fifth piece, or too long */
        out[n][len++] = *c;
    }
    return depth ? -1 : n;
}

static int int_of(const char *s, long lo, long hi, int *out)
{
    char *end;
    if (!*s) return 1;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) return 1;
    *out = (int)v;
    return 0;
}

enum adapt_status quant_acc_parse(const char *text, struct quant_acc *out)
{
    memset(out, 0, sizeof *out);
    out->fl = -1;
    char t[QUANT_SPEC_STR_MAX];
    size_t lead = strspn(text, " \t");
    snprintf(t, sizeof t, "%s", text + lead);
    size_t n = strlen(t);
    while (n && isspace((unsigned char)t[n - 1])) t[--n] = '\0';
    if (!strcmp(t, "float32")) {
        out->kind = QUANT_ACC_FLOAT32;
        return ADAPT_OK;
    }
    if (!strcmp(t, "exact")) {
        out->kind = QUANT_ACC_EXACT;
        return ADAPT_OK;
    }
    const char *open = strchr(t, '(');
    if (!open || n < 2 || t[n - 1] != ')')
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "accumulator \"%s\": expected float32, exact, "
                           "int(BITS[, wrap|saturate[, FL[, floor|nearest]]]) or "
                           "float(FORMAT[, K])",
                           text);
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)(open - t), t);
    t[n - 1] = '\0';
    char a[4][QUANT_SPEC_STR_MAX];
    int na = split_args(open + 1, a);
    if (!strcmp(name, "int")) {
        out->kind = QUANT_ACC_INT;
        out->overflow = QUANT_ACC_WRAP;
        if (na < 1 || na > 4 || int_of(a[0], 2, 64, &out->bits))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "accumulator \"%s\": expected int(BITS[, "
                               "wrap|saturate[, FL[, floor|nearest]]]) with BITS in 2..64",
                               text);
        if (na >= 2) {
            if (!strcmp(a[1], "wrap"))
                out->overflow = QUANT_ACC_WRAP;
            else if (!strcmp(a[1], "saturate"))
                out->overflow = QUANT_ACC_SATURATE;
            else
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "accumulator \"%s\": overflow \"%s\": expected "
                                   "wrap or saturate",
                                   text, a[1]);
        }
        if (na >= 3 && int_of(a[2], 0, 62, &out->fl))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "accumulator \"%s\": fractional bits \"%s\": "
                               "expected an integer in 0..62",
                               text, a[2]);
        if (na == 4) {
            if (!strcmp(a[3], "floor"))
                out->align = QUANT_ACC_ALIGN_FLOOR;
            else if (!strcmp(a[3], "nearest"))
                out->align = QUANT_ACC_ALIGN_NEAREST;
            else
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "accumulator \"%s\": alignment \"%s\": expected floor "
                                   "or nearest (how a product's bits below the register's "
                                   "binary point go)",
                                   text, a[3]);
        }
        return quant_acc_check(out);
    }
    if (!strcmp(name, "float")) {
        out->kind = QUANT_ACC_FLOAT;
        if (na < 1 || na > 2 || !a[0][0])
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator \"%s\": expected float(FORMAT[, K])",
                               text);
        if (quant_spec_parse(a[0], &out->fmt) != ADAPT_OK)
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator \"%s\": format \"%s\": %s", text, a[0],
                               adapt_error_message());
        if (na == 2 && int_of(a[1], 0, 1 << 30, &out->chunk))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "accumulator \"%s\": chunk \"%s\": expected the "
                               "number of products between promotions to float32 "
                               "(0: never)",
                               text, a[1]);
        enum adapt_status st = quant_acc_check(out);
        if (st) return ADAPT_ERROR(st, "accumulator \"%s\": %s", text, adapt_error_message());
        return ADAPT_OK;
    }
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "accumulator \"%s\": unknown kind \"%s\" (expected float32, "
                       "exact, int(...) or float(...))",
                       text, name);
}

const char *quant_acc_str(const struct quant_acc *a, char *buf, size_t len)
{
    char f[QUANT_SPEC_STR_MAX];
    switch (a->kind) {
    case QUANT_ACC_FLOAT32: snprintf(buf, len, "float32"); break;
    case QUANT_ACC_EXACT: snprintf(buf, len, "exact"); break;
    case QUANT_ACC_INT:
        if (a->fl >= 0)
            snprintf(buf, len, "int(%d, %s, %d%s)", a->bits,
                     a->overflow == QUANT_ACC_SATURATE ? "saturate" : "wrap", a->fl,
                     a->align == QUANT_ACC_ALIGN_NEAREST ? ", nearest" : "");
        else
            snprintf(buf, len, "int(%d, %s)", a->bits,
                     a->overflow == QUANT_ACC_SATURATE ? "saturate" : "wrap");
        break;
    case QUANT_ACC_FLOAT:
        snprintf(buf, len, "float(%s, %d)", quant_spec_str(&a->fmt, f, sizeof f), a->chunk);
        break;
    }
    return buf;
}
