/* src/config/arith.c: the [arithmetic] section, arithmetic.accumulator (every unit's
 * accumulator model) and arithmetic.units (per-unit overrides by layer name), in
 * quant_acc_parse's grammar (src/quant/accum_spec.c; doc/numerics.md, "Accumulators"). */
#include <stdio.h>
#include <string.h>

#include "src/config/config.h"

static void trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    while (s[a] == ' ' || s[a] == '\t') a++;
    memmove(s, s + a, n - a + 1);
}

enum adapt_status adapt_config_arith(const struct adapt_config *cfg, struct quant_acc *def,
                                     struct adapt_arith_override *out, int *n)
{
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
    *n = 0;
    if (quant_acc_parse(cfg->arithmetic.accumulator, def) != ADAPT_OK) {
        adapt_config_origin_str(cfg, "arithmetic", "accumulator", o, sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: arithmetic.accumulator: %s", o,
                           adapt_error_message());
    }
    for (const char *s = cfg->arithmetic.units; *s;) {
        size_t len = 0;
        for (int depth = 0; s[len] && !(s[len] == '|' && depth == 0); len++)
            depth += s[len] == '(' ? 1 : s[len] == ')' ? -1 : 0;
        char piece[ADAPT_CONFIG_PATH_MAX];
        snprintf(piece, sizeof piece, "%.*s", (int)len, s);
        s += len + (s[len] == '|');
        trim(piece);
        if (!piece[0]) continue;
        adapt_config_origin_str(cfg, "arithmetic", "units", o, sizeof o);
        char *colon = strchr(piece, ':');
        if (!colon)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s: arithmetic.units: \"%s\": expected NAME: MODEL "
                               "(e.g. conv1: exact)",
                               o, piece);
        *colon = '\0';
        char *model = colon + 1;
        trim(piece);
        trim(model);
        if (!piece[0])
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s: arithmetic.units: a unit without a name before "
                               "':'",
                               o);
        if (*n == ADAPT_ARITH_OVERRIDES_MAX)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: arithmetic.units: more than %d units", o,
                               ADAPT_ARITH_OVERRIDES_MAX);
        struct adapt_arith_override *ov = &out[*n];
        if (strlen(piece) >= sizeof ov->unit)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s: arithmetic.units: unit name \"%s\" is longer "
                               "than %zu characters",
                               o, piece, sizeof ov->unit - 1);
        snprintf(ov->unit, sizeof ov->unit, "%s", piece);
        if (quant_acc_parse(model, &ov->acc) != ADAPT_OK)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: arithmetic.units: unit %s: %s", o, ov->unit,
                               adapt_error_message());
        (*n)++;
    }
    return ADAPT_OK;
}

int adapt_config_arith_set(const struct adapt_config *cfg)
{
    struct quant_acc def;
    if (quant_acc_parse(cfg->arithmetic.accumulator, &def) != ADAPT_OK ||
        def.kind != QUANT_ACC_FLOAT32)
        return 1;
    return cfg->arithmetic.units[0] != '\0';
}
