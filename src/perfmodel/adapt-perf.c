/* src/perfmodel/adapt-perf.c: speed-up estimates of training runs from their traces.
 *
 *   adapt-perf TRACE... [--baseline TRACE] [--format text|csv|json|markdown] [--paper-compat]
 *              [--target ACC | --target-tol T] [--hw TABLE [--hw-map MAP]] [--per-unit]
 *              [--partial] [-o FILE]
 *   adapt-perf --schedule WL:EPOCHS,... --model NAME [--classes C] [--batch B] [--samples N] ...
 *   adapt-perf --gemm-shapes --model NAME [--batch B]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <config.h>
#include "src/base/fileio.h"
#include "src/base/version.h"
#include "src/perfmodel/perf.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: adapt-perf TRACE... [options]\n"
        "   or: adapt-perf --schedule WL:EPOCHS,... --model NAME [options]\n"
        "   or: adapt-perf --gemm-shapes --model NAME [--batch B]\n"
        "Prices training runs with the performance model (one row per run):\n"
        "SU1, SU2, training memory (with the policy's state), model size, inference\n"
        "speed-up, overhead, sparsity. Runs are named by their run.name, else by their\n"
        "configuration file; runs that share a name get the end of their path that tells\n"
        "them apart, e.g. \"fmnist_lenet5 (long/adapt)\".\n"
        "A TRACE may also be a run directory of adapt-train (its trace.jsonl).\n"
        "  --baseline TRACE     float32 run for SU2 (default: the first TRACE of policy fp32)\n"
        "  --target ACC         SU2 target validation accuracy (default: baseline best - tol)\n"
        "  --target-tol T       tolerance below the baseline's best (default 0.005)\n"
        "  --paper-compat       SU = 2 C32 / (Cq + C32), the AdaPT paper's convention, and\n"
        "                       SU2 ref (SU1 paper over the fraction of the run before the\n"
        "                       target; needs --baseline or --target), SU2 ref i/n (the\n"
        "                       reference's index arithmetic over the epochs) and SU3\n"
        "                       (on MuPPET's float32 baseline) as the AdaPT reference\n"
        "                       analysis computes them\n"
        "  --format F           text (default), csv, json or markdown\n"
        "  --per-unit           add per-unit costs and formats (with --format csv: the\n"
        "                       table of one row per run and unit, instead of the runs')\n"
        "  --hw TABLE           also price with a measured timing table (adapt-bench gemm):\n"
        "                       a path, or the name of a shipped one (src/perfmodel/hw)\n"
        "  --hw-map MAP         word length to hardware type, e.g. 8:int8,16:fp16,32:fp32\n"
        "  --partial            accept a trace whose last line is incomplete (a live run)\n"
        "  -o, --output FILE    write the report to FILE (default: standard output)\n"
        "  --schedule S         price a global schedule WL:EPOCHS,... instead of traces\n"
        "  --model NAME         lenet5, alexnet_cifar, alexnet_mnist or resnet20\n"
        "  --classes C          output classes (default 10)\n"
        "  --batch B            batch size (schedule default 128; gemm-shapes default 128)\n"
        "  --samples N          training samples per epoch (default 45000 for CIFAR models,\n"
        "                       55000 for MNIST-family models: 5000 held out)\n"
        "  --gemm-shapes        print the model's GEMM shapes MxNxK,... (adapt-bench gemm "
        "--shapes)\n");
}

static int fail(const char *what)
{
    fprintf(stderr, "adapt-perf: %s\n", what);
    return 1;
}

static int parse_num(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

static int gemm_shapes(const char *model, int classes, int batch)
{
    struct perf_model *m;
    if (perf_model_alloc(&m, model, classes) != ADAPT_OK) return fail(adapt_error_message());
    struct perf_gemm *seen = calloc((size_t)m->n_units * 3, sizeof *seen);
    int ns = 0;
    if (!seen) {
        perf_model_free(m);
        return fail("out of memory");
    }
    for (int u = 0; u < m->n_units; u++) {
        struct perf_gemm g[3];
        perf_model_unit_gemms(m, u, batch, g);
        for (int i = 0; i < 3; i++) {
            if (!g[i].m) continue;
            int dup = 0;
            for (int j = 0; j < ns; j++)
                if (seen[j].m == g[i].m && seen[j].n == g[i].n && seen[j].k == g[i].k) dup = 1;
            if (!dup) seen[ns++] = g[i];
        }
    }
    for (int j = 0; j < ns; j++)
        printf("%s%lldx%lldx%lld", j ? "," : "", (long long)seen[j].m, (long long)seen[j].n,
               (long long)seen[j].k);
    printf("\n");
    free(seen);
    perf_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    struct perf_params p;
    perf_params_init(&p);
    const char *baseline = NULL, *format = "text", *hw_path = NULL, *hw_map = NULL;
    const char *schedule = NULL, *model = NULL, *output = NULL;
    int per_unit = 0, partial = 0, shapes = 0, classes = 10, batch = 0;
    double samples = 0;
    static const struct option opts[] = {{"baseline", required_argument, 0, 'b'},
                                         {"format", required_argument, 0, 'f'},
                                         {"paper-compat", no_argument, 0, 'P'},
                                         {"target", required_argument, 0, 't'},
                                         {"target-tol", required_argument, 0, 'T'},
                                         {"hw", required_argument, 0, 'H'},
                                         {"hw-map", required_argument, 0, 'M'},
                                         {"per-unit", no_argument, 0, 'u'},
                                         {"partial", no_argument, 0, 'p'},
                                         {"output", required_argument, 0, 'o'},
                                         {"schedule", required_argument, 0, 's'},
                                         {"model", required_argument, 0, 'm'},
                                         {"classes", required_argument, 0, 'c'},
                                         {"batch", required_argument, 0, 'B'},
                                         {"samples", required_argument, 0, 'n'},
                                         {"gemm-shapes", no_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    double v;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': baseline = optarg; break;
        case 'f': format = optarg; break;
        case 'P': p.paper_compat = 1; break;
        case 't':
        case 'T':
            if (!parse_num(optarg, &v) || v < 0 || v > 1) {
                fprintf(stderr, "adapt-perf: --%s expects a number in [0, 1], got '%s'\n",
                        c == 't' ? "target" : "target-tol", optarg);
                return 2;
            }
            if (c == 't') p.target_acc = v;
            else p.target_tol = v;
            break;
        case 'H': hw_path = optarg; break;
        case 'M': hw_map = optarg; break;
        case 'u': per_unit = 1; break;
        case 'p': partial = 1; break;
        case 'o': output = optarg; break;
        case 's': schedule = optarg; break;
        case 'm': model = optarg; break;
        case 'c':
        case 'B':
            if (!parse_num(optarg, &v) || v < 1 || v > 1e6 || v != floor(v)) {
                fprintf(stderr, "adapt-perf: --%s expects a positive integer, got '%s'\n",
                        c == 'c' ? "classes" : "batch", optarg);
                return 2;
            }
            if (c == 'c') classes = (int)v;
            else batch = (int)v;
            break;
        case 'n':
            if (!parse_num(optarg, &samples) || samples < 1 || samples != floor(samples) ||
                samples > (double)ADAPT_TRACE_STEP_MAX) {
                fprintf(stderr,
                        "adapt-perf: --samples expects a positive integer up to 2^53, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'g': shapes = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': adapt_version_print(stdout, "adapt-perf"); return 0;
        default: usage(stderr); return 2;
        }
    }
    enum perf_format fmt;
    if (perf_format_parse(format, &fmt) != ADAPT_OK) {
        fprintf(stderr, "adapt-perf: %s\n", adapt_error_message());
        return 2;
    }
    int ntr = argc - optind;
    if (shapes || schedule) {
        if (!model || ntr) {
            fprintf(stderr, "adapt-perf: --%s needs --model and no TRACE arguments\n",
                    shapes ? "gemm-shapes" : "schedule");
            return 2;
        }
        if (shapes) return gemm_shapes(model, classes, batch ? batch : 128);
    } else if (ntr < 1) {
        usage(stderr);
        return 2;
    }

    int rc = 1;
    struct perf_hw *hw = NULL;
    struct perf_run **runs = calloc((size_t)(ntr + 2), sizeof *runs);
    struct perf_run *base = NULL;
    int nruns = 0, base_owned = 0;
    struct perf_model *m = NULL;
    if (!runs) return fail("out of memory");
    if (hw_path) {
        /* a path, or the name of a shipped table (src/perfmodel/hw, installed as hw/) */
        static const char *const hw_dirs[] = {"", "hw", "src/perfmodel/hw", NULL};
        char *file = NULL;
        if (adapt_find_file(hw_path, "timing table", hw_dirs, &file) != ADAPT_OK ||
            perf_hw_load(&hw, file) != ADAPT_OK ||
            (hw_map && perf_hw_set_map(hw, hw_map) != ADAPT_OK)) {
            free(file);
            fail(adapt_error_message());
            goto free_runs;
        }
        free(file);
    } else if (hw_map) {
        fprintf(stderr, "adapt-perf: --hw-map needs --hw TABLE\n");
        rc = 2;
        goto free_runs;
    }
    if (schedule) {
        if (perf_model_alloc(&m, model, classes) != ADAPT_OK) {
            fail(adapt_error_message());
            goto free_runs;
        }
        int64_t spe = samples > 0 ? (int64_t)samples : (m->input[0] == 3 ? 45000 : 55000);
        if (perf_schedule_price(&runs[0], schedule, m, batch ? batch : 128, spe, &p, hw) !=
            ADAPT_OK) {
            fail(adapt_error_message());
            goto free_runs;
        }
        nruns = 1;
    } else {
        for (int i = 0; i < ntr; i++) {
            const char *path = argv[optind + i];
            enum adapt_status st = perf_trace_load(path, partial ? ADAPT_TRACE_LOAD_PARTIAL : 0,
                                                   &p, hw, NULL, &runs[nruns]);
            if (st != ADAPT_OK) {
                fail(adapt_error_message());
                goto free_runs;
            }
            nruns++;
        }
        if (perf_runs_label(runs, nruns) != ADAPT_OK) {
            fail(adapt_error_message());
            goto free_runs;
        }
        if (baseline) {
            enum adapt_status st = perf_trace_load(
                baseline, partial ? ADAPT_TRACE_LOAD_PARTIAL : 0, &p, hw, NULL, &base);
            if (st != ADAPT_OK) {
                fail(adapt_error_message());
                goto free_runs;
            }
            base_owned = 1;
        } else {
            for (int i = 0; i < nruns && !base; i++)
                if (!strcmp(runs[i]->policy, "fp32")) base = runs[i];
            if (base && isnan(base->best_val_acc)) {
                fprintf(stderr, "adapt-perf: %s has no validation accuracy: no SU2\n", base->name);
                base = NULL;
            }
        }
        if (base) {
            for (int i = 0; i < nruns; i++) {
                if (strcmp(runs[i]->model, base->model) ||
                    strcmp(runs[i]->dataset, base->dataset)) {
                    fprintf(stderr,
                            "adapt-perf: %s: model/data set %s/%s differ from the baseline's "
                            "%s/%s: no SU2\n",
                            runs[i]->name, runs[i]->model, runs[i]->dataset, base->model,
                            base->dataset);
                    continue;
                }
                if (perf_run_set_baseline(runs[i], base, &p) != ADAPT_OK) {
                    fail(adapt_error_message());
                    goto free_runs;
                }
            }
        }
    }
    FILE *f = stdout;
    struct adapt_atomic a;
    if (output) {
        if (adapt_atomic_open(&a, output) != ADAPT_OK) {
            fail(adapt_error_message());
            goto free_runs;
        }
        f = a.f;
    }
    enum adapt_status st = perf_report_write(f, fmt, runs, nruns, &p, per_unit);
    if (output) {
        if (st == ADAPT_OK) st = adapt_atomic_commit(&a);
        else adapt_atomic_abort(&a);
    } else if (fflush(stdout) != 0 && st == ADAPT_OK) {
        st = ADAPT_ERROR(ADAPT_EIO, "cannot write the report to standard output");
    }
    if (st != ADAPT_OK) {
        fail(adapt_error_message());
        goto free_runs;
    }
    rc = 0;
free_runs:
    for (int i = 0; i < nruns; i++) perf_run_free(runs[i]);
    if (base_owned) perf_run_free(base);
    free(runs);
    perf_hw_free(hw);
    perf_model_free(m);
    return rc;
}
