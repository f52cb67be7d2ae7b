/* src/perfmodel/hw.c: measured timing tables (JSON from `adapt-bench gemm`) and
 * the map from word length to hardware number type.
 *
 * Table (schema 1):
 *   {"schema": 1, "device": "cpu" | "cuda", "machine": "...", "date": "...",
 *    "command": "...",
 *    "gemm": [{"type": "int8", "impl": "...", "m": M, "n": N, "k": K,
 *              "seconds": S, "gops": 2MNK/S/1e9}, ...],
 *    "elementwise": [{"type": "int8", "impl": "...", "elements": E,
 *                     "seconds": S, "gops": E/S/1e9}, ...]}
 * Several entries of one type and shape (implementations) price at the
 * fastest; a shape not measured prices at the throughput of the nearest
 * measured shape of that type (distance in log m, log n, log k).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "src/perfmodel/perf.h"

#define HW_MAX_MAP 8
#define HW_TYPE_MAX 16

struct hw_gemm {
    char type[HW_TYPE_MAX];
    int64_t m, n, k;
    double seconds;
};

struct hw_ew {
    char type[HW_TYPE_MAX];
    double gops; /* 1e9 element operations per second */
};

struct perf_hw {
    char *path;
    char device[16];
    char desc[512];
    int n_gemm, n_ew;
    struct hw_gemm *gemm;
    struct hw_ew *ew;
    int n_map;
    int map_wl[HW_MAX_MAP];
    char map_type[HW_MAX_MAP][HW_TYPE_MAX];
};

static int has_type(const struct perf_hw *hw, const char *type, int *in_gemm, int *in_ew)
{
    *in_gemm = *in_ew = 0;
    for (int i = 0; i < hw->n_gemm; i++)
        if (!strcmp(hw->gemm[i].type, type)) *in_gemm = 1;
    for (int i = 0; i < hw->n_ew; i++)
        if (!strcmp(hw->ew[i].type, type)) *in_ew = 1;
    return *in_gemm && *in_ew;
}

enum adapt_status perf_hw_set_map(struct perf_hw *hw, const char *map)
{
    int n = 0, wl[HW_MAX_MAP];
    char type[HW_MAX_MAP][HW_TYPE_MAX];
    const char *s = map;
    while (*s) {
        char *end;
        long w = strtol(s, &end, 10);
        if (end == s || *end != ':' || w < 1 || w > 32 || (n > 0 && w <= wl[n - 1]))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "hardware map '%s': expected WL:TYPE,... with ascending word "
                               "lengths 1..32 (e.g. 8:int8,16:fp16,32:fp32)",
                               map);
        if (n == HW_MAX_MAP)
            return ADAPT_ERROR(ADAPT_EINVAL, "hardware map '%s': more than %d entries", map,
                               HW_MAX_MAP);
        const char *t = end + 1, *comma = strchr(t, ',');
        size_t len = comma ? (size_t)(comma - t) : strlen(t);
        if (len == 0 || len >= HW_TYPE_MAX)
            return ADAPT_ERROR(ADAPT_EINVAL, "hardware map '%s': bad type name after %ld:", map,
                               w);
        memcpy(type[n], t, len);
        type[n][len] = 0;
        wl[n++] = (int)w;
        s = comma ? comma + 1 : t + len;
    }
    if (n == 0 || wl[n - 1] != 32)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "hardware map '%s': the last entry must cover word length 32", map);
    for (int i = 0; i < n; i++) {
        int g, e;
        if (!has_type(hw, type[i], &g, &e))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "hardware map '%s': %s has no %s%s%s entries for type %s", map,
                               hw->path, g ? "" : "gemm", !g && !e ? " and no " : "",
                               e ? "" : "elementwise", type[i]);
    }
    int e32g, e32e;
    if (!has_type(hw, "fp32", &e32g, &e32e) || !e32e)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: no fp32 elementwise entry (needed for the weight update and "
                           "policy overhead)",
                           hw->path);
    hw->n_map = n;
    for (int i = 0; i < n; i++) {
        hw->map_wl[i] = wl[i];
        memcpy(hw->map_type[i], type[i], HW_TYPE_MAX);
    }
    return ADAPT_OK;
}

static enum adapt_status bad_entry(const char *path, const char *arr, size_t i, const char *what)
{
    return ADAPT_ERROR(ADAPT_EFORMAT, "%s: %s[%zu]: %s", path, arr, i, what);
}

enum adapt_status perf_hw_load(struct perf_hw **out, const char *path)
{
    *out = NULL;
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return ADAPT_ERROR(err.line < 0 ? ADAPT_EIO : ADAPT_EFORMAT, "%s:%d: %s", path,
                           err.line < 0 ? 0 : err.line, err.text);
    enum adapt_status st = ADAPT_OK;
    struct perf_hw *hw = calloc(1, sizeof *hw);
    json_t *schema = json_object_get(root, "schema");
    const char *device = json_string_value(json_object_get(root, "device"));
    json_t *gemm = json_object_get(root, "gemm"), *ew = json_object_get(root, "elementwise");
    if (!hw || !(hw->path = strdup(path))) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        goto free_table;
    }
    if (!json_is_object(root) || !json_is_integer(schema) || json_integer_value(schema) != 1) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: not a timing table of schema 1 (\"schema\": 1)",
                         path);
        goto free_table;
    }
    if (!device || (strcmp(device, "cpu") && strcmp(device, "cuda"))) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: field \"device\" must be \"cpu\" or \"cuda\"", path);
        goto free_table;
    }
    if (!json_is_array(gemm) || !json_array_size(gemm) || !json_is_array(ew) ||
        !json_array_size(ew)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: fields \"gemm\" and \"elementwise\" must be non-empty arrays", path);
        goto free_table;
    }
    snprintf(hw->device, sizeof hw->device, "%s", device);
    const char *machine = json_string_value(json_object_get(root, "machine"));
    const char *date = json_string_value(json_object_get(root, "date"));
    snprintf(hw->desc, sizeof hw->desc, "%s: %s%s%s", device, machine ? machine : "unknown machine",
             date ? ", " : "", date ? date : "");
    hw->gemm = calloc(json_array_size(gemm), sizeof *hw->gemm);
    hw->ew = calloc(json_array_size(ew), sizeof *hw->ew);
    if (!hw->gemm || !hw->ew) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        goto free_table;
    }
    size_t i;
    json_t *e;
    json_array_foreach(gemm, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type"));
        json_t *m = json_object_get(e, "m"), *n = json_object_get(e, "n"),
               *k = json_object_get(e, "k"), *s = json_object_get(e, "seconds");
        if (!type || strlen(type) >= HW_TYPE_MAX || !json_is_integer(m) || !json_is_integer(n) ||
            !json_is_integer(k) || !json_is_number(s)) {
            st = bad_entry(path, "gemm", i, "expected type (string), m, n, k (integers), seconds");
            goto free_table;
        }
        struct hw_gemm *g = &hw->gemm[hw->n_gemm++];
        snprintf(g->type, sizeof g->type, "%s", type);
        g->m = json_integer_value(m);
        g->n = json_integer_value(n);
        g->k = json_integer_value(k);
        g->seconds = json_number_value(s);
        if (g->m < 1 || g->n < 1 || g->k < 1 || !(g->seconds > 0) || !isfinite(g->seconds)) {
            st = bad_entry(path, "gemm", i, "m, n, k must be >= 1 and seconds > 0");
            goto free_table;
        }
    }
    json_array_foreach(ew, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type"));
        json_t *n = json_object_get(e, "elements"), *s = json_object_get(e, "seconds");
        if (!type || strlen(type) >= HW_TYPE_MAX || !json_is_integer(n) || !json_is_number(s) ||
            json_integer_value(n) < 1 || !(json_number_value(s) > 0)) {
            st = bad_entry(path, "elementwise", i,
                           "expected type (string), elements >= 1, seconds > 0");
            goto free_table;
        }
        struct hw_ew *w = &hw->ew[hw->n_ew++];
        snprintf(w->type, sizeof w->type, "%s", type);
        w->gops = (double)json_integer_value(n) / json_number_value(s) / 1e9;
    }
    json_decref(root);
    root = NULL;
    /* default map: <= 8 int8, <= 16 int16 (CPU) or fp16 (CUDA), else fp32; a
     * type the table lacks falls through to the next wider one */
    {
        const char *t16 = strcmp(hw->device, "cuda") ? "int16" : "fp16";
        char map[64] = "";
        int g, e;
        if (has_type(hw, "int8", &g, &e)) strcat(map, "8:int8,");
        if (has_type(hw, t16, &g, &e)) {
            strcat(map, "16:");
            strcat(map, t16);
            strcat(map, ",");
        }
        strcat(map, "32:fp32");
        st = perf_hw_set_map(hw, map);
    }
    if (st != ADAPT_OK) goto free_table;
    *out = hw;
    return ADAPT_OK;
free_table:
    json_decref(root);
    perf_hw_free(hw);
    return st;
}

const char *perf_hw_type_for(const struct perf_hw *hw, int wl)
{
    for (int i = 0; i < hw->n_map; i++)
        if (wl <= hw->map_wl[i]) return hw->map_type[i];
    return hw->map_type[hw->n_map - 1];
}

const char *perf_hw_describe(const struct perf_hw *hw) { return hw->desc; }

enum adapt_status perf_hw_gemm_seconds(const struct perf_hw *hw, const char *type,
                                       const struct perf_gemm *g, double *seconds)
{
    double best_d = INFINITY, best_gops = 0;
    double lm = log((double)g->m), ln = log((double)g->n), lk = log((double)g->k);
    for (int i = 0; i < hw->n_gemm; i++) {
        const struct hw_gemm *e = &hw->gemm[i];
        if (strcmp(e->type, type)) continue;
        double dm = lm - log((double)e->m), dn = ln - log((double)e->n),
               dk = lk - log((double)e->k);
        double d = dm * dm + dn * dn + dk * dk;
        double gops = 2.0 * (double)e->m * (double)e->n * (double)e->k / e->seconds / 1e9;
        if (d < best_d - 1e-12 || (fabs(d - best_d) <= 1e-12 && gops > best_gops)) {
            best_d = d;
            best_gops = gops;
        }
    }
    if (best_gops <= 0)
        return ADAPT_ERROR(ADAPT_ENOENT, "%s: no gemm entries for type %s", hw->path, type);
    *seconds = 2.0 * (double)g->m * (double)g->n * (double)g->k / (best_gops * 1e9);
    return ADAPT_OK;
}

enum adapt_status perf_hw_elementwise_seconds(const struct perf_hw *hw, const char *type,
                                              double elements, double *seconds)
{
    double gops = 0;
    for (int i = 0; i < hw->n_ew; i++)
        if (!strcmp(hw->ew[i].type, type) && hw->ew[i].gops > gops) gops = hw->ew[i].gops;
    if (gops <= 0)
        return ADAPT_ERROR(ADAPT_ENOENT, "%s: no elementwise entries for type %s", hw->path,
                           type);
    *seconds = elements / (gops * 1e9);
    return ADAPT_OK;
}

void perf_hw_free(struct perf_hw *hw)
{
    if (!hw) return;
    free(hw->gemm);
    free(hw->ew);
    free(hw->path);
    free(hw);
}
