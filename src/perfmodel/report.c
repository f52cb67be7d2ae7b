/* src/perfmodel/report.c: the comparison table of runs in text, CSV, JSON and
 * markdown. One row per run; the columns are a table (name, header,
 * formatter) so the four formats cannot disagree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "src/perfmodel/perf.h"

enum adapt_status perf_format_parse(const char *s, enum perf_format *out)
{
    static const char *const names[] = {"text", "csv", "json", "markdown"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (enum perf_format)i;
            return ADAPT_OK;
        }
    return ADAPT_ERROR(ADAPT_EINVAL, "unknown format '%s' (expected text, csv, json or markdown)",
                       s);
}

/* Text from a trace (names, paths, the timing table's device) as Markdown that renders as that
 * text: a table cell's '|' and Markdown's escapes ('\\', '`') get a backslash, HTML's '<', '>'
 * and '&' become entities, and line breaks and other control characters, which would end a
 * table row, become spaces. */
static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '|' || c == '\\' || c == '`') fprintf(f, "\\%c", c);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '&') fputs("&amp;", f);
        else if (c < 0x20 || c == 0x7f) fputc(' ', f);
        else fputc(c, f);
    }
}

/* A table cell, or a line's text: in Markdown escaped (md_text), as is in plain text. */
static void put_text(FILE *f, const char *s, int md)
{
    if (md) md_text(f, s);
    else fputs(s, f);
}

enum col_kind { COL_STR, COL_INT, COL_NUM };

struct col {
    const char *key;    /* csv / json name */
    const char *head;   /* text / markdown header */
    enum col_kind kind;
    const char *fmt;    /* printf format of numbers */
    int only;           /* COL_ALWAYS, COL_HW (a timing table), COL_PAPER (--paper-compat) */
};
enum { COL_ALWAYS = 0, COL_HW, COL_PAPER };

/* value of column c for run r under params p */
static double col_num(const struct col *c, const struct perf_run *r, const struct perf_params *p)
{
    const char *k = c->key;
    if (!strcmp(k, "epochs")) return r->epochs;
    if (!strcmp(k, "steps")) return (double)r->steps;
    if (!strcmp(k, "best_val_acc")) return r->best_val_acc;
    if (!strcmp(k, "test_acc")) return r->test_acc;
    if (!strcmp(k, "su1")) return p->paper_compat ? r->su1_paper : r->su1;
    if (!strcmp(k, "su2")) return p->paper_compat ? r->su2_paper : r->su2;
    if (!strcmp(k, "su2_ref")) return r->su2_ref;
    if (!strcmp(k, "su2_ref_index")) return r->su2_ref_index;
    if (!strcmp(k, "su3")) return r->su3;
    if (!strcmp(k, "mem_rel")) return r->mem_rel;
    if (!strcmp(k, "model_size")) return r->model_size;
    if (!strcmp(k, "inference_su")) return r->inference_su;
    if (!strcmp(k, "overhead_pct")) return 100.0 * r->overhead_share;
    if (!strcmp(k, "sparsity_final")) return r->sparsity_final;
    if (!strcmp(k, "sparsity_mean")) return r->sparsity_mean;
    if (!strcmp(k, "pd")) return r->n_pd;
    if (!strcmp(k, "pu")) return r->n_pu;
    if (!strcmp(k, "su1_hw")) return r->has_hw ? r->su1_hw : NAN;
    if (!strcmp(k, "inference_su_hw")) return r->has_hw ? r->inference_su_hw : NAN;
    ADAPT_ASSERT(!"unknown column");
    return NAN;
}

static const char *col_str(const struct col *c, const struct perf_run *r)
{
    if (!strcmp(c->key, "run")) return r->name;
    if (!strcmp(c->key, "policy")) return r->policy;
    if (!strcmp(c->key, "model")) return r->model;
    if (!strcmp(c->key, "dataset")) return r->dataset;
    if (!strcmp(c->key, "compat")) return r->compat && r->compat[0] ? r->compat : "-";
    ADAPT_ASSERT(!"unknown column");
    return "";
}

static const struct col cols[] = {
    {"run", "run", COL_STR, NULL, 0},
    {"policy", "policy", COL_STR, NULL, 0},
    {"model", "model", COL_STR, NULL, 0},
    {"dataset", "data", COL_STR, NULL, 0},
    {"compat", "compat", COL_STR, NULL, 0},
    {"epochs", "epochs", COL_INT, "%.0f", 0},
    {"steps", "steps", COL_INT, "%.0f", 0},
    {"best_val_acc", "val acc", COL_NUM, "%.4f", 0},
    {"test_acc", "test acc", COL_NUM, "%.4f", 0},
    {"su1", "SU1", COL_NUM, "%.2f", 0},
    {"su2", "SU2", COL_NUM, "%.2f", 0},
    {"su2_ref", "SU2 ref", COL_NUM, "%.2f", COL_PAPER},
    {"su2_ref_index", "SU2 ref i/n", COL_NUM, "%.2f", COL_PAPER},
    {"su3", "SU3", COL_NUM, "%.2f", COL_PAPER},
    {"mem_rel", "memory", COL_NUM, "%.3f", 0},
    {"model_size", "size", COL_NUM, "%.3f", 0},
    {"inference_su", "inf SU", COL_NUM, "%.2f", 0},
    {"overhead_pct", "ovh %", COL_NUM, "%.3f", 0},
    {"sparsity_final", "sp final", COL_NUM, "%.3f", 0},
    {"sparsity_mean", "sp mean", COL_NUM, "%.3f", 0},
    {"pd", "PD", COL_INT, "%.0f", 0},
    {"pu", "PU", COL_INT, "%.0f", 0},
    {"su1_hw", "SU1 hw", COL_NUM, "%.2f", COL_HW},
    {"inference_su_hw", "inf SU hw", COL_NUM, "%.2f", COL_HW},
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

/* Whether column c is printed: hardware columns with a timing table, the
 * reference-convention columns with --paper-compat. */
static int col_shown(const struct col *c, int hw, const struct perf_params *p)
{
    if (c->only == COL_HW) return hw;
    if (c->only == COL_PAPER) return p->paper_compat;
    return 1;
}

/* Table header: SU1 and SU2 name their convention under --paper-compat. */
static const char *col_head(const struct col *c, const struct perf_params *p)
{
    if (p->paper_compat && !strcmp(c->key, "su1")) return "SU1 paper";
    if (p->paper_compat && !strcmp(c->key, "su2")) return "SU2 paper";
    return c->head;
}

static void cell(char *buf, size_t n, const struct col *c, const struct perf_run *r,
                 const struct perf_params *p)
{
    if (c->kind == COL_STR) {
        snprintf(buf, n, "%s", col_str(c, r));
        return;
    }
    double v = col_num(c, r, p);
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, c->fmt, v);
}

static int any_hw(struct perf_run *const *runs, int n)
{
    for (int i = 0; i < n; i++)
        if (runs[i]->has_hw) return 1;
    return 0;
}

/* Notes under text and markdown tables: conventions and the SU2 target. */
static void notes(FILE *f, struct perf_run *const *runs, int n, const struct perf_params *p,
                  int md)
{
    const char *bullet = md ? "- " : "  ";
    fprintf(f, "%s%s = %s over the whole run; costs in 32-bit MAC-equivalents\n", bullet,
            p->paper_compat ? "SU1 paper" : "SU1",
            p->paper_compat ? "2 C32 / (Cq + C32) (AdaPT paper's convention)" : "C32 / Cq");
    double target = NAN;
    for (int i = 0; i < n; i++)
        if (!isnan(runs[i]->target_acc)) target = runs[i]->target_acc;
    if (!isnan(target)) {
        const char *conv = p->paper_compat ? "2 Cb / (Cq + Cb)" : "Cb / Cq";
        if (isnan(p->target_acc))
            fprintf(f,
                    "%s%s = %s with the costs until validation accuracy >= %.4f (float32 "
                    "baseline's best minus %.4f) is first reached (Cb: the baseline's)\n",
                    bullet, p->paper_compat ? "SU2 paper" : "SU2", conv, target, p->target_tol);
        else
            fprintf(f,
                    "%s%s = %s with the costs until validation accuracy >= %.4f is first reached "
                    "(Cb: the baseline's)\n",
                    bullet, p->paper_compat ? "SU2 paper" : "SU2", conv, target);
    } else {
        fprintf(f, "%sSU2: needs a float32 baseline trace (--baseline) or --target\n", bullet);
    }
    if (p->paper_compat) {
        fprintf(f,
                "%sSU2 ref = SU1 paper x (epochs of the run / epochs until the target is first "
                "reached): the AdaPT reference analysis' iso-accuracy speed-up, against the full "
                "float32 run\n",
                bullet);
        fprintf(f,
                "%sSU2 ref i/n = SU1 paper / (i / n), i the 0-based index of the first of the n "
                "epoch validation accuracies at the target: the reference analysis' own "
                "arithmetic (which reads one accuracy per validation batch), the optimistic end "
                "where SU2 ref is the conservative one; SU1 paper when the target is never "
                "reached, - when it is reached in the first epoch (the reference divides by "
                "zero)\n",
                bullet);
        fprintf(f,
                "%sSU3 = (150 / epochs) x 2 C32 / (Cq + C32 x bs / accumulation), bs = 128 / batch "
                "on CIFAR, else 1: on MuPPET's float32 baseline as the AdaPT reference analysis "
                "rescales it (a schedule row: its SU1 paper)\n",
                bullet);
    }
    fprintf(f,
            "%smemory: peak training memory / float32 training, with the policy's own state "
            "(AdaPT's accumulated gradient, MuPPET's kept gradients, AMP's float32 gradients); "
            "size: final sum WL*nnz / sum 32*n (WL: the weight role's bits with [roles]); "
            "ovh %%: policy overhead share of the run's cost; "
            "compat: AdaPT's algorithm variant\n",
            bullet);
    for (int i = 0; i < n; i++) {
        if (runs[i]->has_hw) {
            fprintf(f,
                    "%sSU1 hw, inf SU hw: T32 / Tq priced with the measured timing table (dense "
                    "kernels, WL mapped to hardware types) of ",
                    bullet);
            put_text(f, runs[i]->hw_device, md);
            fputc('\n', f);
            break;
        }
    }
    for (int i = 0; i < n; i++)
        if (!runs[i]->complete) {
            fputs(bullet, f);
            put_text(f, runs[i]->name, md);
            fputs(": the trace has no end record (run incomplete or still running)\n", f);
        }
}

static void unit_cells(char out[][32], const struct perf_run *r, int u)
{
    const struct perf_unit_result *ur = &r->units[u];
    double tot = 0;
    for (int k = 0; k < r->n_units; k++) tot += r->units[k].cq;
    snprintf(out[0], 32, "%s", ur->name);
    snprintf(out[1], 32, "%lld", (long long)ur->macs);
    snprintf(out[2], 32, "%lld", (long long)ur->weights);
    snprintf(out[3], 32, "%d", ur->passes);
    snprintf(out[4], 32, "%.4f", tot > 0 ? ur->cq / tot : 0.0);
    snprintf(out[5], 32, "%.2f", ur->cq > 0 ? ur->c32 / ur->cq : NAN);
    snprintf(out[6], 32, "%.2f", ur->mean_wl);
    snprintf(out[7], 32, "%d", ur->final_wl);
    if (ur->final_fl >= 0) snprintf(out[8], 32, "%d", ur->final_fl);
    else snprintf(out[8], 32, "-");
    if (isnan(ur->final_sparsity)) snprintf(out[9], 32, "-");
    else snprintf(out[9], 32, "%.3f", ur->final_sparsity);
    snprintf(out[10], 32, "%d", ur->n_pd);
    snprintf(out[11], 32, "%d", ur->n_pu);
}
#define UCOLS 12
static const char *const ucol_head[UCOLS] = {"unit",   "MACs",   "weights", "passes",
                                             "share",  "SU",     "mean WL", "final WL",
                                             "final FL", "sparsity", "PD",    "PU"};
static const char *const ucol_key[UCOLS] = {"unit",     "macs",     "weights",        "passes",
                                            "cost_share", "su",     "mean_wl",        "final_wl",
                                            "final_fl", "final_sparsity", "pd",       "pu"};

static void write_text(FILE *f, struct perf_run *const *runs, int n, const struct perf_params *p,
                       int per_unit, int md)
{
    int hw = any_hw(runs, n), w[NCOLS];
    char buf[256];
    for (int c = 0; c < NCOLS; c++) {
        w[c] = (int)strlen(col_head(&cols[c], p));
        for (int i = 0; i < n; i++) {
            cell(buf, sizeof buf, &cols[c], runs[i], p);
            if ((int)strlen(buf) > w[c]) w[c] = (int)strlen(buf);
        }
    }
    for (int c = 0; c < NCOLS; c++) {
        if (!col_shown(&cols[c], hw, p)) continue;
        if (md) fprintf(f, "| %s ", col_head(&cols[c], p));
        else fprintf(f, "%s%-*s", c ? "  " : "", w[c], col_head(&cols[c], p));
    }
    fprintf(f, md ? "|\n" : "\n");
    if (md) {
        for (int c = 0; c < NCOLS; c++)
            if (col_shown(&cols[c], hw, p))
                fprintf(f, "|%s", cols[c].kind == COL_STR ? "---" : "---:");
        fprintf(f, "|\n");
    }
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < NCOLS; c++) {
            if (!col_shown(&cols[c], hw, p)) continue;
            cell(buf, sizeof buf, &cols[c], runs[i], p);
            if (md) {
                fputs("| ", f);
                md_text(f, cols[c].kind == COL_STR ? col_str(&cols[c], runs[i]) : buf);
                fputc(' ', f);
            } else if (cols[c].kind == COL_STR) fprintf(f, "%s%-*s", c ? "  " : "", w[c], buf);
            else fprintf(f, "%s%*s", c ? "  " : "", w[c], buf);
        }
        fprintf(f, md ? "|\n" : "\n");
    }
    fprintf(f, "\n");
    notes(f, runs, n, p, md);
    if (!per_unit) return;
    for (int i = 0; i < n; i++) {
        const struct perf_run *r = runs[i];
        char cells[UCOLS][32];
        int uw[UCOLS];
        for (int c = 0; c < UCOLS; c++) uw[c] = (int)strlen(ucol_head[c]);
        for (int u = 0; u < r->n_units; u++) {
            unit_cells(cells, r, u);
            for (int c = 0; c < UCOLS; c++)
                if ((int)strlen(cells[c]) > uw[c]) uw[c] = (int)strlen(cells[c]);
        }
        fputs(md ? "\n#### " : "\n", f);
        put_text(f, r->name, md);
        fputs(md ? ": per unit\n\n" : ": per unit\n", f);
        for (int c = 0; c < UCOLS; c++) {
            if (md) fprintf(f, "| %s ", ucol_head[c]);
            else fprintf(f, "%s%-*s", c ? "  " : "  ", uw[c], ucol_head[c]);
        }
        fprintf(f, md ? "|\n" : "\n");
        if (md) {
            for (int c = 0; c < UCOLS; c++) fprintf(f, "|%s", c ? "---:" : "---");
            fprintf(f, "|\n");
        }
        for (int u = 0; u < r->n_units; u++) {
            unit_cells(cells, r, u);
            for (int c = 0; c < UCOLS; c++) {
                if (md) {
                    fputs("| ", f);
                    md_text(f, c == 0 ? r->units[u].name : cells[c]);
                    fputc(' ', f);
                } else if (c == 0) fprintf(f, "  %-*s", uw[c], cells[c]);
                else fprintf(f, "  %*s", uw[c], cells[c]);
            }
            fprintf(f, md ? "|\n" : "\n");
        }
    }
}

static void csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

static void write_csv(FILE *f, struct perf_run *const *runs, int n, const struct perf_params *p,
                      int per_unit)
{
    int hw = any_hw(runs, n);
    char buf[256];
    if (per_unit) goto units; /* one table per output: the units' (see perf_report_write) */
    for (int c = 0, first = 1; c < NCOLS; c++) {
        if (!col_shown(&cols[c], hw, p)) continue;
        fprintf(f, "%s%s", first ? "" : ",", cols[c].key);
        first = 0;
    }
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        for (int c = 0, first = 1; c < NCOLS; c++) {
            if (!col_shown(&cols[c], hw, p)) continue;
            if (cols[c].kind == COL_STR)
                snprintf(buf, sizeof buf, "%s", col_str(&cols[c], runs[i]));
            else {
                double v = col_num(&cols[c], runs[i], p);
                if (isnan(v)) buf[0] = 0;
                else snprintf(buf, sizeof buf, cols[c].kind == COL_INT ? "%.0f" : "%.6g", v);
            }
            if (!first) fputc(',', f);
            csv_field(f, buf);
            first = 0;
        }
        fprintf(f, "\n");
    }
    return;
units:
    fprintf(f, "run");
    for (int c = 0; c < UCOLS; c++) fprintf(f, ",%s", ucol_key[c]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++)
        for (int u = 0; u < runs[i]->n_units; u++) {
            char cells[UCOLS][32];
            unit_cells(cells, runs[i], u);
            csv_field(f, runs[i]->name);
            for (int c = 0; c < UCOLS; c++) {
                fputc(',', f);
                csv_field(f, strcmp(cells[c], "-") ? cells[c] : "");
            }
            fprintf(f, "\n");
        }
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static enum adapt_status write_json(FILE *f, struct perf_run *const *runs, int n,
                                    const struct perf_params *p, int per_unit)
{
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) goto nomem;
    json_object_set_new(root, "convention",
                        json_string(p->paper_compat ? "paper_compat: 2 C32 / (Cq + C32)"
                                                    : "C32 / Cq"));
    json_object_set_new(root, "target_acc", jnum(p->target_acc));
    json_object_set_new(root, "target_tol", json_real(p->target_tol));
    json_object_set_new(root, "runs", arr);
    for (int i = 0; i < n; i++) {
        const struct perf_run *r = runs[i];
        json_t *o = json_object();
        if (!o || json_array_append_new(arr, o)) goto nomem;
        for (int c = 0; c < NCOLS; c++) {
            if (cols[c].only == COL_HW && !r->has_hw) continue;
            if (cols[c].kind == COL_STR)
                json_object_set_new(o, cols[c].key, json_string(col_str(&cols[c], r)));
            else if (cols[c].kind == COL_INT)
                json_object_set_new(o, cols[c].key,
                                    json_integer((json_int_t)col_num(&cols[c], r, p)));
            else json_object_set_new(o, cols[c].key, jnum(col_num(&cols[c], r, p)));
        }
        json_object_set_new(o, "path", json_string(r->path));
        json_object_set_new(o, "config", json_string(r->config ? r->config : ""));
        json_object_set_new(o, "su1_ratio", jnum(r->su1));
        json_object_set_new(o, "su1_paper", jnum(r->su1_paper));
        json_object_set_new(o, "su2_ratio", jnum(r->su2));
        json_object_set_new(o, "su2_paper", jnum(r->su2_paper));
        json_object_set_new(o, "target_acc", jnum(r->target_acc));
        json_object_set_new(o, "target_epoch",
                            r->target_epoch >= 0 ? json_integer(r->target_epoch) : json_null());
        json_object_set_new(o, "baseline_epoch",
                            r->baseline_epoch >= 0 ? json_integer(r->baseline_epoch) : json_null());
        json_object_set_new(o, "samples", json_real(r->samples));
        json_object_set_new(o, "batch", json_integer(r->batch));
        json_object_set_new(o, "complete", json_boolean(r->complete));
        json_t *c = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "c32", r->c32, "cq",
                              r->cq, "c32_compute", r->c32_compute, "cq_compute", r->cq_compute,
                              "c32_elementwise", r->c32_ew, "cq_elementwise", r->cq_ew, "update",
                              r->update, "overhead", r->overhead, "overhead_pd", r->overhead_pd,
                              "overhead_accumulation", r->overhead_acc);
        if (!c) goto nomem;
        json_object_set_new(c, "overhead_search", json_real(r->overhead_search));
        json_object_set_new(o, "cost", c);
        json_object_set_new(o, "search_epochs", json_integer(r->search_epochs));
        json_object_set_new(o, "search_batches", json_integer(r->search_batches));
        if (r->has_hw) {
            json_object_set_new(o, "hw_device", json_string(r->hw_device));
            json_object_set_new(o, "t32_s", jnum(r->t32_s));
            json_object_set_new(o, "tq_s", jnum(r->tq_s));
        }
        if (per_unit) {
            json_t *ua = json_array();
            if (!ua) goto nomem;
            json_object_set_new(o, "units", ua);
            for (int u = 0; u < r->n_units; u++) {
                const struct perf_unit_result *ur = &r->units[u];
                json_t *uo = json_pack("{s:s,s:I,s:I,s:i,s:f,s:f,s:f,s:i,s:i,s:i,s:i}", "unit",
                                       ur->name, "macs", (json_int_t)ur->macs, "weights",
                                       (json_int_t)ur->weights, "passes", ur->passes, "c32",
                                       ur->c32, "cq", ur->cq, "mean_wl", ur->mean_wl, "final_wl",
                                       ur->final_wl, "final_fl", ur->final_fl, "pd", ur->n_pd,
                                       "pu", ur->n_pu);
                if (!uo || json_array_append_new(ua, uo)) goto nomem;
                json_object_set_new(uo, "final_sparsity", jnum(ur->final_sparsity));
            }
        }
    }
    if (json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) != 0) {
        json_decref(root);
        return ADAPT_ERROR(ADAPT_EIO, "cannot write the JSON report");
    }
    fputc('\n', f);
    json_decref(root);
    return ADAPT_OK;
nomem:
    json_decref(root);
    return ADAPT_ERROR(ADAPT_ENOMEM, "out of memory writing the JSON report");
}

enum adapt_status perf_report_write(FILE *f, enum perf_format fmt, struct perf_run *const *runs,
                                    int n, const struct perf_params *p, int per_unit)
{
    switch (fmt) {
    case PERF_FORMAT_TEXT: write_text(f, runs, n, p, per_unit, 0); break;
    case PERF_FORMAT_MARKDOWN: write_text(f, runs, n, p, per_unit, 1); break;
    case PERF_FORMAT_CSV: write_csv(f, runs, n, p, per_unit); break;
    case PERF_FORMAT_JSON: return write_json(f, runs, n, p, per_unit);
    }
    if (ferror(f)) return ADAPT_ERROR(ADAPT_EIO, "cannot write the report");
    return ADAPT_OK;
}
