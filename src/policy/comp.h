/* src/policy/comp.h: the comp policy, after CoMP (convergence-aware operator-wise mixed
 * precision): a two-stage search for a per-layer precision plan, then training with it.
 * doc/algorithms.md ("CoMP") has the algorithm and the decisions below in prose.
 *
 * Plans. A plan is a string of one digit per layer of the network, in network order. With k
 * candidate formats (policy.comp_formats, lowest first; k <= 9) digit d < k is format d and
 * digit k is float32: with the default candidate fp16, "0" is fp16 and "1" float32, as in the
 * CoMP paper's plan strings. A unit (conv2d, linear) computes in its digit's format (weights,
 * input and output rounded; gradients rounded or loss-scaled, below). Any other layer rounds
 * its output in its digit's format, which must be the format of the nearest unit before it or
 * after it in network order (the engine rounds a layer's output in some unit's format); a
 * float32 layer rounds nothing.
 *
 * Stage 1 (epoch sampling, the paper's Algorithm 1). The key layers are the units. A unit
 * whose input and output channels (per group) are multiples of comp_tc_multiple (the
 * tensor-core rule) takes format 0 without a trial; the others (or the units named by
 * comp_try) are tried with every digit. Plan 0 is the all-float32 basis; then every
 * combination of the tried units' digits, with the TC units at 0 (the combination equal to the
 * basis is not trained twice). Each plan trains from the same state (the caller restores
 * weights, optimizer, schedule and counters) for one epoch, giving its mean training loss
 * loss_i; a plan is safe when loss_i < loss_0 x comp_tolerance (loss_0: the basis), and the
 * cheapest safe plan (the first in enumeration order on a tie) is P_s1. No safe plan but the
 * basis leaves everything float32.
 *
 * Context. In every plan, a non-unit layer between two units (in network order; the network
 * input and the loss count as float32 boundaries) whose digits agree takes that digit; between
 * units that disagree it stays float32 (the stage-2 starting point).
 *
 * Stage 2 (batch sampling, Algorithm 2). From P_s1, every segment of non-unit layers whose
 * boundaries disagree is enumerated: each of its m layers takes the left or the right
 * boundary's digit, 2^m strings, the other segments as in P_s1; the list starts with P_s1 and
 * holds no duplicates. Each plan is priced on a single batch (its loss only has to be finite)
 * and the cheapest wins. "Cheapest" is the caller's cost of one optimizer step with the plan
 * (the performance model: analytical, or a timing table).
 *
 * Gradients: when every candidate is a float format that overflows to infinity (fp16, bf16,
 * e5m2, float(E,M) set to inf), the unit gradients are rounded to their unit's format under
 * AMP's dynamic loss scaling; otherwise they are rounded like the fixed policy's
 * (quantization.quant_grads).
 *
 *   struct adapt_comp_space sp;   // from the network: adapt_comp_space_init
 *   struct adapt_comp_hooks h = {ctx, epoch_fn, batch_fn, cost_fn};
 *   struct adapt_comp_result res;
 *   st = adapt_comp_search(&sp, &h, 1.01, 64, &res);   // res.plan, res.samples
 *   adapt_comp_result_free(&res);
 *
 * Ownership: struct adapt_comp_space and struct adapt_comp_result own their arrays.
 */
#ifndef ADAPT_COMP_H
#define ADAPT_COMP_H

#include "src/base/status.h"

struct adapt_policy;

#define ADAPT_COMP_MAX_FORMATS 9

/* The search space: layers in network order. */
struct adapt_comp_space {
    int n;                /* layers */
    int k;                /* candidate formats; digit k is float32 */
    int *unit;            /* (n) precision unit index, -1 for other layers */
    unsigned char *tried; /* (n) units tried in stage 1; other units take digit 0 */
};

/* n layers, k formats, unit[] copied; every unit tried. ADAPT_ENOMEM. */
enum adapt_status adapt_comp_space_init(struct adapt_comp_space *sp, int n, int k,
                                        const int *unit);
void adapt_comp_space_free(struct adapt_comp_space *sp);

/* The non-unit layers of plan (n digits) take their context (above). */
void adapt_comp_fill_context(const struct adapt_comp_space *sp, char *plan);
/* Stage 1's plans: the basis first. *plans is one block of *count strings of n + 1 bytes
 * (free it). ADAPT_EINVAL when there would be more than max_plans. */
enum adapt_status adapt_comp_stage1_plans(const struct adapt_comp_space *sp, int max_plans,
                                          char **plans, int *count);
/* Stage 2's plans from ps1 (Algorithm 2): ps1 first. Same block layout and limit. */
enum adapt_status adapt_comp_stage2_plans(const struct adapt_comp_space *sp, const char *ps1,
                                          int max_plans, char **plans, int *count);
/* Checks a plan: n digits 0..k, every non-unit layer's digit float32 or the digit of the
 * nearest unit before or after it. ADAPT_EINVAL with the layer and what was expected. */
enum adapt_status adapt_comp_check_plan(const struct adapt_comp_space *sp, const char *plan,
                                        const char *const *names);
/* For plan: gov[i] the unit whose format layer i rounds in (-1: float32) and digit[u] each
 * unit's digit (k: float32). The plan must pass adapt_comp_check_plan. */
void adapt_comp_plan_layers(const struct adapt_comp_space *sp, const char *plan, int *gov,
                            int *digit);
/* fmt[i] = layer i's digit in plan, -1 for float32 (digit k): the formats perf_price_plan
 * prices conversions between. */
void adapt_comp_plan_formats(const struct adapt_comp_space *sp, const char *plan, int *fmt);

/* What the search asks of its caller. Each hook trains or prices the plan it is given from
 * the state the search started in (the caller restores it). */
struct adapt_comp_hooks {
    void *ctx;
    /* stage 1: one sampling epoch; the mean training loss; *steps, *samples what it trained */
    enum adapt_status (*epoch)(void *ctx, const char *plan, double *loss, long *steps,
                               long *samples);
    /* stage 2: one batch, forward and backward; its mean loss; *samples its size */
    enum adapt_status (*batch)(void *ctx, const char *plan, double *loss, long *samples);
    /* the cost of one optimizer step with the plan (lower is better) */
    enum adapt_status (*cost)(void *ctx, const char *plan, double *cost);
};

/* One sampled plan, for the trace. */
struct adapt_comp_sample {
    int stage;       /* 1 or 2 */
    char *plan;      /* points into the result's storage */
    double loss, cost;
    long steps, samples;
    int safe;        /* stage 1: loss < loss_0 x tolerance (the basis: 1); stage 2: finite loss */
    int chosen;      /* the stage's pick */
};

struct adapt_comp_result {
    char *plan;      /* the chosen plan (n digits) */
    int n_samples;
    struct adapt_comp_sample *samples; /* (n_samples) stage 1 then stage 2 */
    char *storage;
};

enum adapt_status adapt_comp_search(const struct adapt_comp_space *sp,
                                    const struct adapt_comp_hooks *h, double tolerance,
                                    int max_plans, struct adapt_comp_result *res);
void adapt_comp_result_free(struct adapt_comp_result *res);

/* ---- the policy (policy.name = comp) ---- */

/* 1 when p is a comp policy that has no plan yet (no comp_plan, nothing loaded). */
int adapt_policy_comp_needs_search(const struct adapt_policy *p);
/* p's search space (the comp policy only). */
const struct adapt_comp_space *adapt_policy_comp_space(const struct adapt_policy *p);
/* The plan p trains with now. */
const char *adapt_policy_comp_plan(const struct adapt_policy *p);
/* Trains with plan from now on (checked first); the weight copies keyed by step. */
enum adapt_status adapt_policy_comp_apply(struct adapt_policy *p, const char *plan, long step);
/* Word lengths per unit (wl[nunits]: the format's bits, 32 for float32) and per layer the unit
 * whose format it rounds in (gov[nnodes], -1 float32) for plan: what the performance model
 * prices. */
void adapt_policy_comp_cost_view(const struct adapt_policy *p, const char *plan, int *wl,
                                 int *gov);
/* The search finished with res: marks the plan chosen (the caller applied it). */
void adapt_policy_comp_searched(struct adapt_policy *p);

#endif
