/* src/perfmodel/internal.h: what the files of the cost model share (not a public API).
 *
 * A plan holds the per-model quantities that pricing needs (price.c); an
 * interval is the priced cost of one logged interval; the run helpers
 * allocate and complete a struct perf_run (run.c). perf_run_analyze
 * (analyze.c) and perf_schedule_price (schedule.c) drive them.
 *
 *   struct perf_plan pl;
 *   if ((st = perf_plan_init(&pl, m, hw, batch)) != ADAPT_OK) return st;
 *   struct perf_interval iv = {0};
 *   st = perf_price_interval(&pl, p, wl, nz, samples, delta, accum, overhead, &iv);
 *   perf_interval_add(run, &iv);
 *   perf_plan_free(&pl);
 */
#ifndef PERF_INTERNAL_H
#define PERF_INTERNAL_H

#include <stdint.h>

#include "src/perfmodel/perf.h"

/* Word lengths 0..32: the slots of the timing caches. */
#define PERF_WL_SLOTS 33

/* Per-model quantities the interval prices need. */
struct perf_plan {
    const struct perf_model *m;
    int nu;
    int64_t *F, *W;   /* (nu) forward MACs per sample; weight elements */
    int *passes;      /* (nu) */
    int64_t P, Wsum;  /* trainable parameters; sum of W */
    int ne;
    int64_t *E;       /* (ne) element operations per sample of element-wise layers */
    int *egov;        /* (ne) governing unit; -1: float32 (graph propagation) */
    int na;
    int64_t *A;       /* (na) stored activations per sample (layer outputs, flatten excluded) */
    int *agov;        /* (na) governing unit; -1: float32 */
    int64_t in_numel; /* network input per sample (quantized with unit 0) */
    /* memory of the policy's own state (perf_policy_state_bits) */
    double state_bits; /* bits held whatever the formats */
    int grad32;        /* 1: weight gradients are float32 tensors whatever the WL (AMP) */
    /* hardware-calibrated: seconds per micro-batch, cached per unit/layer and WL */
    const struct perf_hw *hw;
    int batch;
    double *tg, *tf;  /* (nu * PERF_WL_SLOTS) all GEMMs / forward GEMM; NaN = not yet */
    double *te;       /* (ne * PERF_WL_SLOTS) one pass of the layer's element operations */
    double t_op32;    /* seconds per FP32 element operation */
    /* [roles] (the trace header's "roles"): the operand bits of weight, input and output
     * gradient (-1: the unit's WL); each GEMM is priced at the wider of its two operands */
    int has_roles;
    int role_bits[ADAPT_TRACE_ROLES];
};

/* hw may be NULL (analytical only); batch is the micro-batch of the timed GEMMs. */
enum adapt_status perf_plan_init(struct perf_plan *pl, const struct perf_model *m,
                                 const struct perf_hw *hw, int batch);
void perf_plan_free(struct perf_plan *pl);

/* Cost of one interval. */
struct perf_interval {
    double c32, cq, c32_compute, cq_compute, c32_ew, cq_ew, update;
    double t32, tq;
    double *unit_c32, *unit_cq; /* (nu) compute parts, added to; may be NULL */
};

/* Prices `samples` samples over `delta` optimizer steps with `accum` gradient
 * accumulations at the formats wl[u] in 1..32 and non-zero fractions nz[u] in
 * [0,1], plus `overhead` (cq only); measured times too when the plan has hw. */
enum adapt_status perf_price_interval(struct perf_plan *pl, const struct perf_params *p,
                                      const int *wl, const double *nz, double samples,
                                      int64_t delta, int64_t accum, double overhead,
                                      struct perf_interval *iv);
/* Adds an interval's costs and measured times to the run totals. */
void perf_interval_add(struct perf_run *r, const struct perf_interval *iv);
/* Forward cost of one sample (inference) at the given formats. */
void perf_forward_cost(const struct perf_plan *pl, const int *wl, const double *nz, double *c32,
                       double *cq);
/* Measured seconds of one forward micro-batch at WL 32 and at the formats wl. */
enum adapt_status perf_forward_seconds(struct perf_plan *pl, const int *wl, double *t32,
                                       double *tq);
/* Training memory in bits for micro-batch b at the formats wl, and at float32. */
double perf_memory_bits(const struct perf_plan *pl, const int *wl, int b);
double perf_memory_bits_fp32(const struct perf_plan *pl, int b);

/* A copy of s ("" for NULL); NULL when out of memory. */
char *perf_dupstr(const char *s);
/* A run with m's units named and every optional result NaN / -1; NULL when
 * out of memory. n_points and n_epochs size the points and epoch marks. */
struct perf_run *perf_run_alloc(const struct perf_model *m, int64_t n_points, int n_epochs);
/* The speed-ups and shares from the run's totals. */
void perf_run_finish(struct perf_run *r);
/* The target accuracy, the run's first epoch at it and SU2 in the reference
 * convention (no baseline needed). */
void perf_run_set_target(struct perf_run *run, double target);

#endif
