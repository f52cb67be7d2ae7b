/* src/perfmodel/perf.h: the performance model over run traces (doc/reports.md, "Performance model and reports").
 *
 * Prices a training run from its trace (src/trace/trace.h): per precision unit and
 * logged step, forward, backward-data and weight-gradient MACs weighted by
 * WL/32 and by the non-zero fraction of the quantized weights; element-wise
 * work of pools, activations, batch norm and additions at the word length of
 * the unit they follow; the FP32 weight update; and the policy's own overhead
 * priced from the counts the trace recorded (push-down evaluations x sample x
 * (quantize + bin), KL sums, AdaPT's per-step gradient accumulation). Costs
 * are in MAC-equivalents: one 32-bit multiply-accumulate or one FP32 element
 * operation = 1. The same run priced at FP32 (WL 32, dense, no overhead) is
 * C32; SU1 = C32 / Cq, or 2 C32 / (Cq + C32) in the AdaPT paper's convention.
 * SU2 compares the cost until a target validation accuracy is first reached
 * with a float32 baseline run's. A hardware-calibrated mode replaces the
 * WL/32 weighting by measured GEMM and element-wise timings per hardware
 * number type (a table written by `adapt-bench gemm`).
 *
 * Non-goals: no engine types (this module reads traces and layer
 * descriptions only); no simulation of caches or memory bandwidth beyond
 * what a timing table measured.
 *
 *   struct perf_params p;
 *   perf_params_init(&p);
 *   struct adapt_trace *t, *b;
 *   adapt_trace_load(&t, "runs/adapt/trace.jsonl", 0);
 *   adapt_trace_load(&b, "runs/fp32/trace.jsonl", 0);
 *   struct perf_run *run, *base;
 *   perf_run_analyze(&run, t, &p, NULL);
 *   perf_run_analyze(&base, b, &p, NULL);
 *   perf_run_set_baseline(run, base, &p);        // SU2
 *   struct perf_run *rows[2] = {base, run};
 *   perf_report_write(stdout, PERF_FORMAT_TEXT, rows, 2, 0);
 *   perf_run_free(run); perf_run_free(base);
 *
 *   // no trace: a global per-epoch word-length schedule (MuPPET's runs)
 *   perf_schedule_price(&run, "8:16,12:10,14:14,16:14,32:45", model, 128, 45000, &p, NULL);
 *
 * Ownership: a struct perf_run owns its strings and arrays (perf_run_free);
 * it keeps no pointer into the trace it was computed from. A struct
 * perf_model from perf_model_alloc owns its layers; one from
 * perf_model_from_header borrows the header, which must outlive it.
 */
#ifndef PERF_PERF_H
#define PERF_PERF_H

#include <stdint.h>
#include <stdio.h>

#include "src/base/status.h"
#include "src/graph/graph.h"
#include "src/trace/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ models */

/* A model's layers in the trace header's form (forward order). */
struct perf_model {
    const char *name;
    int input[3]; /* (C, H, W) */
    int classes;
    int64_t params, macs; /* trainable parameters; forward MACs per sample */
    int n_layers;
    const struct adapt_trace_layer *layers; /* (n_layers) */
    int n_units;
    const struct adapt_trace_unit *units; /* (n_units) */
    void *storage;                        /* owned storage; NULL for a view */
};

/* The model `name` (a built-in name or a description file, as adapt_graph_load)
 * with `classes` outputs: the same layers, names, shapes, MACs, element-wise
 * counts and geometry the engine writes into a trace header. */
enum adapt_status perf_model_alloc(struct perf_model **out, const char *name, int classes);
/* The model of a resolved description (src/graph/graph.h); owns copies of what it needs. */
enum adapt_status perf_model_from_graph(struct perf_model **out, const struct adapt_graph *g);
/* A view of a trace header's model, checked for consistency (every unit a
 * conv2d/linear layer pointing back at it, MACs and weights that agree with
 * the layer shapes); errors name `path`. */
enum adapt_status perf_model_from_header(struct perf_model **out,
                                         const struct adapt_trace_header *h, const char *path);
void perf_model_free(struct perf_model *m);

/* One GEMM of a training step: C (m x n) += A (m x k) B (k x n). */
struct perf_gemm {
    int64_t m, n, k;
    int64_t count; /* GEMMs of this shape: a grouped conv runs one per group */
};
/* The three GEMMs of unit u for a micro-batch of `batch` samples: [0]
 * forward, [1] backward-data, [2] weight gradient (conv via im2col: m = Cout,
 * n = batch*Hout*Wout, k = Cin*K*K; a conv of G groups: G GEMMs each with
 * Cout/G and Cin/G, count = G). Returns 2 when the unit reads the
 * network input (no backward-data GEMM; g[1] is then zero), else 3. */
int perf_model_unit_gemms(const struct perf_model *m, int u, int64_t batch, struct perf_gemm g[3]);

/* ------------------------------------------------------------- parameters */

struct perf_params {
    int paper_compat;    /* report SU = 2 C32 / (Cq + C32) (the AdaPT paper's convention) */
    double
        target_acc; /* SU2 target validation accuracy in [0,1]; NaN: baseline best - target_tol */
    double target_tol;   /* default 0.005 */
    /* FP32 element operations, per element: */
    double update_ops;   /* weight update per trainable parameter and optimizer step (default 4:
                            gradient norm and scale, momentum, update) */
    double accum_ops;    /* per parameter and micro-batch gradient accumulation (default 1) */
    double
        quantize_ops; /* push-down: quantizing one sampled weight (default 2: scale-round, clamp) */
    double bin_ops;      /* push-down: binning one sampled weight (default 1) */
    double kl_ops;       /* push-down: one KL term per histogram bin (default 1) */
    double gacc_ops;     /* AdaPT: per weight and optimizer step (default 2: G += g, ||G||^2) */
    /* CoMP's plan prices (perf_price_plan with formats): a conversion between two formats */
    double cast_ops;     /* per element converted (default 2, as quantize_ops: one rounding pass,
                            round to the narrower format and saturate) */
    double cast_fixed_ops; /* per conversion and micro-batch, whatever its size (default 4096:
                              a kernel launch or loop set-up, about 1 us at the CPU table's
                              FP32 element-wise rate) */
    int muppet_r;        /* MuPPET's epochs of kept gradients when a trace does not say, and for
                            schedules (default 3) */
};
void perf_params_init(struct perf_params *p);

/* ----------------------------------------------------- hardware timing table */

/* A measured timing table (JSON written by `adapt-bench gemm`) and the map
 * from word length to hardware number type. */
struct perf_hw;

/* Loads a table; the map defaults to "8:int8,16:int16,32:fp32" for a CPU
 * table and "8:int8,16:fp16,32:fp32" for a CUDA table. Errors name the file
 * and the entry. */
enum adapt_status perf_hw_load(struct perf_hw **out, const char *path);
/* "WL:TYPE,...", ascending WL, the last one 32: word lengths up to WL use
 * TYPE. Every TYPE must have GEMM and element-wise entries in the table. */
enum adapt_status perf_hw_set_map(struct perf_hw *hw, const char *map);
const char *perf_hw_type_for(const struct perf_hw *hw, int wl);
/* One-line description: device, date. */
const char *perf_hw_describe(const struct perf_hw *hw);
/* Seconds for one GEMM: the table's entry of that type and shape, or the
 * measured shape nearest in log(m), log(n), log(k) at its throughput. */
enum adapt_status perf_hw_gemm_seconds(const struct perf_hw *hw, const char *type,
                                       const struct perf_gemm *g, double *seconds);
/* Seconds for `elements` element operations of that type. */
enum adapt_status perf_hw_elementwise_seconds(const struct perf_hw *hw, const char *type,
                                              double elements, double *seconds);
void perf_hw_free(struct perf_hw *hw);

/* ------------------------------------------------------------------- results */

struct perf_unit_result {
    char *name;
    int64_t macs, weights; /* per sample; weight elements */
    int passes;            /* GEMMs per step: 3, or 2 for the unit reading the input */
    double c32, cq;        /* compute cost over the run, MAC-equivalents */
    double mean_wl;        /* mean word length over optimizer steps */
    int final_wl, final_fl;
    double final_sparsity; /* NaN when the trace has none */
    int n_pd, n_pu;
};

/* One logged interval: the optimizer steps (prev step, step]. */
struct perf_point {
    int64_t step;
    double epoch_x;    /* training progress in epochs at `step` */
    double samples;    /* samples trained in the interval */
    double c32, cq;    /* cost of the interval */
    double overhead;   /* part of cq */
};

struct perf_run {
    char *name;       /* run.name when the trace's configuration sets one; else configuration
                         file stem [+ " [reference]"] [+ " seed N"]; else folder
                         (perf_runs_label: + " (location)" among runs of one name) */
    char *path, *policy, *model, *dataset;
    char *config;     /* the configuration file the run was started with ("" none) */
    char *compat;     /* AdaPT: "corrected" or "reference"; "" for other policies */
    int64_t steps;    /* optimizer steps */
    int epochs;       /* epoch records */
    double samples;   /* samples trained */
    int batch, accumulation;
    /* totals over the run, MAC-equivalents */
    double c32, cq;
    double c32_compute, cq_compute; /* conv/linear GEMMs */
    double c32_ew, cq_ew;           /* element-wise layers */
    double update;                  /* FP32 weight update and gradient accumulation (both) */
    double overhead, overhead_pd, overhead_acc; /* policy overhead (cq only) */
    double overhead_search;         /* comp: the sampled plans (trace sample records), part of
                                       overhead */
    int search_epochs, search_batches; /* comp: stage-1 and stage-2 samples */
    double su1, su1_paper;          /* C32 / Cq; 2 C32 / (Cq + C32) */
    double su2, su2_paper;          /* NaN without a baseline or when the target is not reached */
    double su2_ref;                 /* SU1 paper / (epochs to the target / epochs of the run):
                                       the reference analysis' iso-accuracy SU2 (perf_su2_reference)
                                       against the full float32 run; NaN without a target */
    double su2_ref_index;           /* SU1 paper / (i / n), i the first of the n epoch
                                       validation accuracies at the target (perf_su2_index) */
    double su3;                     /* on MuPPET's float32 baseline (perf_su3) */
    double target_acc;              /* NaN without a baseline */
    int target_epoch, baseline_epoch; /* first epoch (0-based) at the target; -1 */
    double mem_rel;                 /* peak training memory / FP32 training memory, the policy's
                                       state included (perf_policy_state_bits) */
    double model_size;              /* final sum WL*nnz / sum 32*n over the units (WL: the
                                       weight role's bits when [roles] sets them) */
    double inference_su;            /* forward cost at FP32 / at the final formats */
    double overhead_share;          /* overhead / cq */
    double sparsity_final, sparsity_mean; /* weight-weighted over units; NaN when absent */
    double best_val_acc, test_acc;  /* NaN when absent */
    int n_pd, n_pu;
    int complete;                   /* the trace has its end record */
    /* hardware-calibrated (has_hw) */
    int has_hw;
    char *hw_device;
    double t32_s, tq_s;             /* seconds for the run */
    double su1_hw, inference_su_hw;
    int n_units;
    struct perf_unit_result *units; /* (n_units) */
    int64_t n_points;
    struct perf_point *points;      /* (n_points) */
    int n_epoch_marks;
    double *epoch_c32, *epoch_cq;   /* (n_epoch_marks) cumulative cost at each epoch record */
    double *epoch_val_acc;          /* (n_epoch_marks) */
};

/* Prices a loaded trace. hw may be NULL (analytical only). Errors name the
 * trace file and, for a step record, its line. */
enum adapt_status perf_run_analyze(struct perf_run **out, const struct adapt_trace *t,
                                   const struct perf_params *p, const struct perf_hw *hw);
/* SU2 of run against a float32 baseline run (see perf_params.target_*).
 * A baseline without validation accuracies is refused. */
enum adapt_status perf_run_set_baseline(struct perf_run *run, const struct perf_run *base,
                                        const struct perf_params *p);
/* Prices a global per-epoch schedule "WL:EPOCHS,..." (every unit at WL, dense,
 * no overhead) for `samples_per_epoch` samples in batches of `batch`. */
enum adapt_status perf_schedule_price(struct perf_run **out, const char *schedule,
                                      const struct perf_model *m, int batch,
                                      int64_t samples_per_epoch, const struct perf_params *p,
                                      const struct perf_hw *hw);
void perf_run_free(struct perf_run *r);
/* The one rule by which adapt-perf, adapt-heatmap (and experiments/report.py) name runs in
 * tables and figures. A run is named by its run.name when its configuration set one, else by
 * its configuration file's stem (with " [reference]" for AdaPT's reference variant and
 * " seed N" for a seed other than 1), else by its trace's folder (perf_run_analyze). Runs that
 * still share a name get " (SUFFIX)" appended, SUFFIX the fewest trailing components of the
 * run's location (the folder of a DIR/trace.jsonl, else the trace's path without its
 * extension) that no other run of that name shares: runs/long/adapt and runs/my/adapt give
 * "fmnist_lenet5 (long/adapt)" and "fmnist_lenet5 (my/adapt)", runs/a and runs/b "NAME (a)" and
 * "NAME (b)". A run whose name is unique keeps it; runs without a trace path (priced
 * schedules), and runs at the same location, get nothing appended. Replaces runs[i]->name. */
enum adapt_status perf_runs_label(struct perf_run **runs, int n);
/* The cost of `samples` samples over `steps` optimizer steps with `accum` micro-batches of
 * `batch`, dense, at per-unit word lengths wl[u] (32: float32) with layer i's element-wise
 * work and activations at the word length of unit gov[i] (-1: float32): a per-layer precision
 * plan (the comp policy's). With fmt (may be NULL: no conversions priced), fmt[i] names layer
 * i's number format (-1 float32; equal values, one format) and the plan also pays for its
 * conversions (perf_price_casts). *cq in MAC-equivalents; with hw, *tq (may be NULL) in
 * measured seconds, else NaN. */
enum adapt_status perf_price_plan(const struct perf_model *m, const struct perf_params *p,
                                  const struct perf_hw *hw, const int *wl, const int *gov,
                                  const int *fmt, int batch, double samples, int64_t steps,
                                  int64_t accum, double *cq, double *tq);
/* The conversions of a per-layer format plan fmt (perf_price_plan) for `samples` samples in
 * `micro` micro-batches, in MAC-equivalents. In network order, with the network input and the
 * loss float32, every tensor that passes from a layer to the next of another format is
 * converted once forward (the activation) and once backward (its error gradient; none for the
 * network input): samples x cast_ops x elements per conversion, plus micro x cast_fixed_ops
 * per conversion. *n (may be NULL) is the number of conversions per micro-batch. */
double perf_price_casts(const struct perf_model *m, const struct perf_params *p, const int *fmt,
                        double samples, double micro, int *n);
/* The trace reader of adapt-perf and adapt-heatmap: loads path (a trace, or a run directory
 * holding trace.jsonl; adapt_trace_load flags) and prices it, so that a trace either program
 * accepts passes every consistency check of perf_run_analyze. *trace and
 * *run are set on success when not NULL (free them); hw may be NULL. A trace refused for its
 * incomplete last line names --partial (both programs' ADAPT_TRACE_LOAD_PARTIAL) in the error. */
enum adapt_status perf_trace_load(const char *path, unsigned flags, const struct perf_params *p,
                                  const struct perf_hw *hw, struct adapt_trace **trace,
                                  struct perf_run **run);

/* Bits of training memory a policy keeps besides weights, momentum,
 * gradients, weight copies and activations: "adapt" 32 x unit_weights (the
 * accumulated gradient G), "muppet" and "schedule" (MuPPET's replay)
 * 32 x muppet_r x unit_weights (the kept weight gradients), others 0.
 * *grad32 (may be NULL) is set to 1 for "amp", whose weight gradients are
 * float32 tensors (its half-precision weight copies are counted at WL 16). */
double perf_policy_state_bits(const char *policy, int64_t unit_weights, int muppet_r,
                              int *grad32);
/* SU3, the speed-up on MuPPET's float32 baseline (150 epochs, batch 128 on
 * CIFAR, no accumulation) as the AdaPT reference analysis rescales it:
 * (150 / epochs) x 2 C32 / (Cq + C32 x bs / accumulation), bs = 128 / batch
 * when cifar, else 1. NaN for non-positive arguments. */
double perf_su3(double c32, double cq, int epochs, int accumulation, int batch, int cifar);
/* SU2 in the reference convention: su1_paper x epochs / (target_epoch + 1),
 * target_epoch the 0-based first epoch at the target; NaN when not reached. */
double perf_su2_reference(double su1_paper, int target_epoch, int epochs);
/* SU2 with the iso-accuracy fraction of the AdaPT reference analysis: i / n, i the 0-based index
 * of the first of the n logged validation accuracies acc that is >= target; su1_paper / (i / n).
 * su1_paper when none reaches the target (the fraction stays 1); NaN when i = 0 (the
 * reference divides by zero), n < 1 or the target is NaN. The reference logs one accuracy
 * per validation batch; a trace has one per epoch, for which this is te / E, the other end
 * from perf_su2_reference's (te + 1) / E. */
double perf_su2_index(double su1_paper, const double *acc, int n, double target);

/* ------------------------------------------------------------------ reports */

enum perf_format { PERF_FORMAT_TEXT = 0, PERF_FORMAT_CSV, PERF_FORMAT_JSON, PERF_FORMAT_MARKDOWN };

/* "text", "csv", "json" or "markdown". */
enum adapt_status perf_format_parse(const char *s, enum perf_format *out);
/* One row per run, side by side; per_unit adds a table per run (text,
 * markdown) or the unit arrays (json); csv with per_unit is one table of one row per run
 * and unit instead (a CSV file holds one table: the run table is the output without it).
 * p selects the SU convention and states the SU2 target rule. */
enum adapt_status perf_report_write(FILE *f, enum perf_format fmt, struct perf_run *const *runs,
                                    int n, const struct perf_params *p, int per_unit);

#ifdef __cplusplus
}
#endif
#endif
