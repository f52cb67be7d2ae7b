/* src/perfmodel/run.c: a priced run: its parameters, allocation and release, the speed-ups
 * from its totals (SU1, SU3, the reference SU2) and SU2 against a float32 baseline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/internal.h"
#include "src/perfmodel/perf.h"

void perf_params_init(struct perf_params *p)
{
    memset(p, 0, sizeof *p);
    p->paper_compat = 0;
    p->target_acc = NAN;
    p->target_tol = 0.005;
    p->update_ops = 4.0;
    p->accum_ops = 1.0;
    p->quantize_ops = 2.0;
    p->bin_ops = 1.0;
    p->kl_ops = 1.0;
    p->gacc_ops = 2.0;
    p->cast_ops = 2.0;
    p->cast_fixed_ops = 4096.0;
    p->muppet_r = 3;
}

/* -------------------------------------------------------------- formulas */

double perf_policy_state_bits(const char *policy, int64_t unit_weights, int muppet_r,
                              int *grad32)
{
    if (grad32) *grad32 = policy && !strcmp(policy, "amp");
    if (!policy) return 0;
    /* AdaPT: the accumulated normalised gradient G, float32, weight-shaped per unit */
    if (!strcmp(policy, "adapt")) return 32.0 * (double)unit_weights;
    /* MuPPET: the last r epochs' weight gradients of every unit, float32 */
    if (!strcmp(policy, "muppet") || !strcmp(policy, "schedule"))
        return 32.0 * (double)muppet_r * (double)unit_weights;
    return 0;
}

double perf_su3(double c32, double cq, int epochs, int accumulation, int batch, int cifar)
{
    if (!(epochs > 0 && accumulation > 0 && batch > 0)) return NAN;
    double bs = cifar ? 128.0 / (double)batch : 1.0;
    double den = cq + c32 * bs / (double)accumulation;
    return den > 0 ? 150.0 / (double)epochs * 2.0 * c32 / den : NAN;
}

double perf_su2_reference(double su1_paper, int target_epoch, int epochs)
{
    if (target_epoch < 0 || epochs < 1 || target_epoch >= epochs) return NAN;
    return su1_paper * (double)epochs / (double)(target_epoch + 1);
}

double perf_su2_index(double su1_paper, const double *acc, int n, double target)
{
    if (n < 1 || isnan(target)) return NAN;
    for (int i = 0; i < n; i++)
        if (acc[i] >= target) return i > 0 ? su1_paper * (double)n / (double)i : NAN;
    return su1_paper; /* never reached: the fraction stays 1 */
}

/* ------------------------------------------------------------------- runs */

char *perf_dupstr(const char *s)
{
    if (!s) s = "";
    char *c = malloc(strlen(s) + 1);
    if (c) strcpy(c, s);
    return c;
}

void perf_run_free(struct perf_run *r)
{
    if (!r) return;
    free(r->name);
    free(r->path);
    free(r->config);
    free(r->compat);
    free(r->policy);
    free(r->model);
    free(r->dataset);
    free(r->hw_device);
    for (int u = 0; u < r->n_units; u++) free(r->units[u].name);
    free(r->units);
    free(r->points);
    free(r->epoch_c32);
    free(r->epoch_cq);
    free(r->epoch_val_acc);
    free(r);
}

struct perf_run *perf_run_alloc(const struct perf_model *m, int64_t n_points, int n_epochs)
{
    struct perf_run *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->n_units = m->n_units;
    r->units = calloc((size_t)m->n_units, sizeof *r->units);
    r->points = calloc((size_t)(n_points > 0 ? n_points : 1), sizeof *r->points);
    r->epoch_c32 = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    r->epoch_cq = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    r->epoch_val_acc = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    if (!r->units || !r->points || !r->epoch_c32 || !r->epoch_cq || !r->epoch_val_acc) {
        perf_run_free(r);
        return NULL;
    }
    for (int u = 0; u < m->n_units; u++) {
        struct perf_unit_result *ur = &r->units[u];
        if (!(ur->name = perf_dupstr(m->units[u].name))) {
            perf_run_free(r);
            return NULL;
        }
        ur->macs = m->units[u].macs;
        ur->weights = m->units[u].weights;
        ur->final_sparsity = NAN;
    }
    r->su2 = r->su2_paper = r->su2_ref = r->su2_ref_index = r->su3 = r->target_acc = NAN;
    r->target_epoch = r->baseline_epoch = -1;
    r->sparsity_final = r->sparsity_mean = r->best_val_acc = r->test_acc = NAN;
    return r;
}

void perf_run_finish(struct perf_run *r)
{
    r->su1 = r->cq > 0 ? r->c32 / r->cq : NAN;
    r->su1_paper = r->cq + r->c32 > 0 ? 2.0 * r->c32 / (r->cq + r->c32) : NAN;
    r->su3 = perf_su3(r->c32, r->cq, r->epochs, r->accumulation, r->batch,
                      r->dataset && !strncmp(r->dataset, "cifar", 5));
    r->overhead_share = r->cq > 0 ? r->overhead / r->cq : NAN;
    if (r->has_hw) r->su1_hw = r->tq_s > 0 ? r->t32_s / r->tq_s : NAN;
}

/* SU2 in the reference convention: SU1 paper over the fraction of the run's
 * epochs trained when the target is first reached (conservative: that epoch counted whole),
 * and the reference analysis' own index arithmetic over the epochs' accuracies. */
void perf_run_set_target(struct perf_run *run, double target)
{
    run->target_acc = target;
    run->target_epoch = -1;
    for (int e = 0; e < run->n_epoch_marks; e++)
        if (run->epoch_val_acc[e] >= target) {
            run->target_epoch = e;
            break;
        }
    run->su2_ref = perf_su2_reference(run->su1_paper, run->target_epoch, run->n_epoch_marks);
    run->su2_ref_index =
        perf_su2_index(run->su1_paper, run->epoch_val_acc, run->n_epoch_marks, target);
}

enum adapt_status perf_run_set_baseline(struct perf_run *run, const struct perf_run *base,
                                        const struct perf_params *p)
{
    if (isnan(base->best_val_acc))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "baseline %s has no validation accuracy (epoch records with val_acc): "
                           "SU2 needs one",
                           base->path);
    double target = isnan(p->target_acc) ? base->best_val_acc - p->target_tol : p->target_acc;
    perf_run_set_target(run, target);
    run->baseline_epoch = -1;
    run->su2 = run->su2_paper = NAN;
    for (int e = 0; e < base->n_epoch_marks; e++)
        if (base->epoch_val_acc[e] >= target) {
            run->baseline_epoch = e;
            break;
        }
    if (run->baseline_epoch >= 0 && run->target_epoch >= 0) {
        double cb = base->epoch_c32[run->baseline_epoch], cq = run->epoch_cq[run->target_epoch];
        run->su2 = cb / cq;
        run->su2_paper = 2.0 * cb / (cq + cb);
    }
    return ADAPT_OK;
}
