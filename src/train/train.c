/* src/train/train.c: the training run (see src/train/train.h). */
#include "src/train/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <config.h>
#include "src/base/log.h"
#include "src/data/data.h"
#include "src/cuda/device.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/perfmodel/perf.h"
#include "src/policy/comp.h"
#include "src/policy/policy.h"
#include "src/policy/precision.h"
#include "src/train/checkpoint.h"
#include "src/train/run_dir.h"

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct run {
    const struct adapt_config *cfg;
    const struct adapt_train_opts *opts;
    struct adapt_dataset train, test;
    int have_train, have_test;
    int train_file_n; /* images in the training file (train.n: those used, train + val) */
    struct adapt_holdout ho;
    int have_ho;
    struct adapt_loader tl, vl, sl;
    int have_tl, have_vl, have_sl;
    struct adapt_net *net;
    struct adapt_cuda_net *dev; /* run.device = cuda: the step runs there */
    enum adapt_status dev_st;   /* the first failure of a device step (then everything stops) */
    struct adapt_sgd opt;
    int have_opt;
    struct adapt_sched sched;
    float *x;       /* (n_max, C, H, W) */
    int *y;         /* (n_max) */
    float *dlogits; /* (n_max, classes) */
    struct adapt_policy *pol;
    struct adapt_run_dir dir;
    int tty;
    int epochs_done;
    int ckpt_epoch; /* the epoch of the newest checkpoint (0: none yet) */
};

static void run_free(struct run *r)
{
    adapt_run_dir_close(&r->dir);
    adapt_policy_free(r->pol);
    adapt_cuda_net_free(r->dev);
    free(r->dlogits);
    free(r->y);
    adapt_aligned_free(r->x);
    if (r->have_opt) adapt_sgd_free(&r->opt);
    adapt_net_free(r->net);
    if (r->have_sl) adapt_loader_free(&r->sl);
    if (r->have_vl) adapt_loader_free(&r->vl);
    if (r->have_tl) adapt_loader_free(&r->tl);
    if (r->have_ho) adapt_holdout_free(&r->ho);
    if (r->have_test) adapt_dataset_free(&r->test);
    if (r->have_train) adapt_dataset_free(&r->train);
}

static const char *model_name(const struct adapt_config *cfg) { return adapt_config_model(cfg); }

static const char *dataset_name(const struct adapt_config *cfg)
{
    return adapt_config_enum_str(cfg, "data", "dataset");
}

static enum adapt_status load_data(struct run *r, int need_train)
{
    const struct adapt_config *cfg = r->cfg;
    const char *path = cfg->data.path[0] ? cfg->data.path : NULL;
    enum adapt_status st;
    if (need_train) {
        if ((st = adapt_dataset_load(&r->train, dataset_name(cfg), path, ADAPT_DATA_TRAIN)))
            return st;
        r->have_train = 1;
        r->train_file_n = r->train.n;
        /* data.train_limit counts training images; the validation split (data.val_size) comes
         * on top of them, from the rest of the training file */
        if (cfg->data.train_limit > 0) {
            long need = (long)cfg->data.train_limit + cfg->data.val_size;
            if (need > r->train.n)
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "data.train_limit = %d training images plus data.val_size = "
                                   "%d validation images need %ld images, but the %s training "
                                   "file has %d; lower data.train_limit or data.val_size",
                                   cfg->data.train_limit, cfg->data.val_size, need,
                                   dataset_name(cfg), r->train.n);
            r->train.n = (int)need;
        }
    }
    if ((st = adapt_dataset_load(&r->test, dataset_name(cfg), path, ADAPT_DATA_TEST))) return st;
    r->have_test = 1;
    if (cfg->data.test_limit > 0 && cfg->data.test_limit < r->test.n)
        r->test.n = cfg->data.test_limit;
    if (!cfg->data.normalize) {
        struct adapt_dataset *ds[2] = {&r->train, &r->test};
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < ADAPT_DATA_MAX_C; c++) {
                ds[k]->mean[c] = 0.0f;
                ds[k]->std[c] = 1.0f;
            }
    }
    return ADAPT_OK;
}

/* The network of the resolved description g (for `classes` outputs) on the loaded data. */
static enum adapt_status build_model(struct run *r, const struct adapt_graph *g, int classes)
{
    const struct adapt_config *cfg = r->cfg;
    const struct adapt_dataset *ds = &r->test;
    enum adapt_status st;
    if (g->in_chw[0] != ds->c || g->in_chw[1] != ds->h || g->in_chw[2] != ds->w)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "model %s (%s) reads %dx%dx%d inputs, but data.dataset = %s gives "
                           "%dx%dx%d images",
                           g->name, g->file, g->in_chw[0], g->in_chw[1], g->in_chw[2],
                           dataset_name(cfg), ds->c, ds->h, ds->w);
    r->net = adapt_net_from_graph(g);
    if (!r->net) return ADAPT_EINVAL;
    int n_max = cfg->train.batch > cfg->train.eval_batch ? cfg->train.batch : cfg->train.eval_batch;
    st = adapt_net_finalize(r->net, n_max);
    if (st == ADAPT_ENOMEM)
        return ADAPT_ERROR(ADAPT_ENOMEM,
                           "model %s for batches of %d samples (the larger of train.batch = %d "
                           "and train.eval_batch = %d): %s; lower them",
                           r->net->name, n_max, cfg->train.batch, cfg->train.eval_batch,
                           adapt_error_message());
    if (st) return st;
    size_t in = r->net->act_numel[0] * (size_t)n_max;
    r->x = adapt_aligned_alloc(in * sizeof(float));
    r->y = malloc(sizeof(int) * (size_t)n_max);
    r->dlogits = malloc(sizeof(float) * (size_t)n_max * (size_t)classes);
    if (!r->x || !r->y || !r->dlogits)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate batch buffers");
    return ADAPT_OK;
}

/* The nb samples in r->x, r->y through the GPU engine (training: with the backward): the sum
 * of the rows' losses, or NAN with r->dev_st set when a device call failed. */
static double device_batch(struct run *r, int nb, int training, int *correct)
{
    double s = NAN;
    if ((r->dev_st = adapt_cuda_net_upload(r->dev, r->x, r->y, nb)) ||
        (r->dev_st = adapt_cuda_net_step(r->dev, training, training)) ||
        (r->dev_st = adapt_cuda_net_result(r->dev, &s, correct)))
        return NAN;
    return s;
}

/* Mean loss and accuracy of the network (evaluation mode) over a loader. */
static void evaluate(struct run *r, struct adapt_loader *l, double *loss, double *acc)
{
    double sum = 0.0;
    long correct = 0, count = 0;
    int nb;
    adapt_loader_start(l, 0);
    while ((nb = adapt_loader_next(l, r->x, r->y)) > 0) {
        int c = 0;
        if (r->dev) {
            sum += device_batch(r, nb, 0, &c);
            if (r->dev_st) break;
        } else {
            const float *lg = adapt_net_forward(r->net, r->x, nb, 0);
            sum += adapt_softmax_xent(lg, r->y, nb, r->net->classes, NULL, &c) * nb;
        }
        correct += c;
        count += nb;
    }
    *loss = count ? sum / (double)count : NAN;
    *acc = count ? (double)correct / (double)count : NAN;
}

/* s seconds as m:ss, or h:mm:ss from an hour on (always h:mm:ss with hours: --estimate's
 * times, whose line says "h:mm:ss"); dashes when s is no time or over 10^7 s. */
static void format_time(double s, int hours, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, n, hours ? "-:--:--" : "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (hours || t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void format_eta(double s, char *buf, size_t n) { format_time(s, 0, buf, n); }

/* Forward, loss (scaled by the policy's loss scale for the backward pass) and backward of the
 * nb samples in r->x, r->y; the mean loss, *correct the right answers. */
static double micro_batch(struct run *r, int nb, int *correct)
{
    const int classes = r->net->classes;
    /* on the GPU engine the loss scale is the engine's (adapt_cuda_net_loss_scale) */
    if (r->dev) return device_batch(r, nb, 1, correct) / nb;
    const float *lg = adapt_net_forward(r->net, r->x, nb, 1);
    double loss = adapt_softmax_xent(lg, r->y, nb, classes, r->dlogits, correct);
    if (r->pol->loss_scale != 1.0) {
        const float sc = (float)r->pol->loss_scale;
        for (size_t i = 0; i < (size_t)nb * classes; i++) r->dlogits[i] *= sc;
    }
    adapt_net_backward(r->net, r->dlogits, nb);
    return loss;
}

/* Optimizer step `step` after `micro` micro-batches whose losses sum to step_loss (`loss` the
 * last one's): the L1 term, the policy's step (or the device's SGD). *mean_loss: the step's
 * mean loss with the L1 term. */
static enum adapt_status optimizer_step(struct run *r, long step, double step_loss, double loss,
                                        int micro, int last_in_epoch, double *mean_loss)
{
    const struct adapt_config *cfg = r->cfg;
    double l1 = 0.0;
    if (cfg->optim.l1_decay > 0) {
        if (r->dev) {
            enum adapt_status st = adapt_cuda_net_l1_norm(r->dev, r->opt.l1_quantized, &l1);
            if (st) return st;
        } else {
            l1 = adapt_sgd_l1_norm(&r->opt);
        }
        l1 *= cfg->optim.l1_decay;
    }
    *mean_loss = step_loss / micro + l1;
    r->pol->micro_loss = (loss + l1) / cfg->train.accumulation_steps;
    /* with a GPU engine attached (adapt_policy_use_cuda) the step runs there */
    return adapt_policy_step(r->pol, &r->opt, step, *mean_loss, micro, last_in_epoch, NULL);
}

/* Micro-batch i of `epoch` keys the rounding and dropout bits. */
static void set_iter(struct run *r, int epoch, int nbatches, int batch_i)
{
    if (r->pol->prec) r->pol->prec->iter = (long)epoch * nbatches + batch_i;
    r->net->rng_iter = (int64_t)epoch * nbatches + batch_i;
}

static enum adapt_status train_loop(struct run *r, int start_epoch, long start_step)
{
    const struct adapt_config *cfg = r->cfg;
    const int epochs = cfg->train.epochs, accum = cfg->train.accumulation_steps;
    const int nbatches = adapt_loader_batches(&r->tl);
    long step = start_step;
    int accum_since_log = 0, policy_stop = 0;
    enum adapt_status st = ADAPT_OK;
    double t_run = now_s();
    for (int epoch = start_epoch; epoch < epochs && !stop_requested && !policy_stop; epoch++) {
        double t0 = now_s(), t_last = 0.0;
        double loss_sum = 0.0, step_loss = 0.0;
        long correct = 0, seen = 0;
        int micro = 0, nb, batch_i = 0;
        adapt_loader_start(&r->tl, epoch);
        r->opt.lr = r->sched.lr;
        r->pol->epoch = epoch;
        while ((nb = adapt_loader_next(&r->tl, r->x, r->y)) > 0) {
            int c = 0;
            set_iter(r, epoch, nbatches, batch_i);
            double loss = micro_batch(r, nb, &c);
            if (r->dev_st) return r->dev_st;
            loss_sum += loss * nb;
            correct += c;
            seen += nb;
            step_loss += loss;
            micro++;
            batch_i++;
            accum_since_log++;
            if (micro == accum || batch_i == nbatches) {
                double mean_loss;
                step++;
                if ((st = optimizer_step(r, step, step_loss, loss, micro, batch_i == nbatches,
                                         &mean_loss)))
                    return st;
                if (step % cfg->run.log_every == 0) {
                    if ((st = adapt_run_dir_step(&r->dir, r->pol, step, epoch, r->opt.lr, mean_loss,
                                                accum_since_log)))
                        return st;
                    adapt_policy_clear_events(r->pol);
                    accum_since_log = 0;
                }
                micro = 0;
                step_loss = 0.0;
                if (stop_requested) break;
            }
            if (r->tty && !r->opts->quiet) {
                double t = now_s();
                if (t - t_last > 0.25 || batch_i == nbatches) {
                    t_last = t;
                    double ips = seen / (t - t0);
                    long left_steps = (long)(epochs - epoch) * nbatches - batch_i;
                    char eta[32];
                    format_eta(left_steps * (double)cfg->train.batch / ips, eta, sizeof eta);
                    printf("\repoch %d/%d  step %d/%d  loss %.4f  %.0f img/s  ETA %s   ", epoch + 1,
                           epochs, batch_i, nbatches, loss_sum / seen, ips, eta);
                    fflush(stdout);
                }
            }
        }
        if (stop_requested && batch_i < nbatches) break;
        double wall = now_s() - t0;
        double val_loss = NAN, val_acc = NAN;
        if (r->have_vl) evaluate(r, &r->vl, &val_loss, &val_acc);
        if (r->dev_st) return r->dev_st;
        double lr_used = r->sched.lr;
        adapt_sched_step(&r->sched, r->have_vl ? val_loss : loss_sum / seen);
        if (r->pol->type->epoch_end) {
            double lr = r->sched.lr;
            if ((st = r->pol->type->epoch_end(r->pol, epoch, &lr, &policy_stop))) return st;
            r->sched.lr = lr;
        }
        /* wall_s: since this process started training (a resumed run starts at 0) */
        struct adapt_run_epoch ep = {epoch, step, lr_used, loss_sum / seen,
                                     (double)correct / seen, val_loss, val_acc,
                                     now_s() - t_run, seen / wall};
        if ((st = adapt_run_dir_epoch(&r->dir, &ep))) return st;
        if (!r->opts->quiet) {
            if (r->tty) printf("\r\033[K");
            printf("epoch %3d/%d  train loss %.4f acc %6.2f%%  val loss %.4f acc %6.2f%%  lr %.4g  "
                   "%.1f s  %.0f img/s%s\n",
                   epoch + 1, epochs, ep.train_loss, 100.0 * ep.train_acc, val_loss,
                   100.0 * val_acc, lr_used, wall, ep.images_per_s,
                   policy_stop ? "  (policy: stop)" : "");
            fflush(stdout);
        }
        int last = epoch + 1 == epochs || policy_stop;
        int every = cfg->run.checkpoint_every;
        r->epochs_done = epoch + 1;
        if (last || (every > 0 && (epoch + 1) % every == 0)) {
            /* the device's weights, buffers, momentum and policy state into the host's for the
             * checkpoint */
            if (r->dev && ((st = adapt_cuda_net_pull_params(r->dev)) ||
                           (st = adapt_cuda_net_pull_sgd(r->dev, &r->opt)) ||
                           (st = adapt_policy_pull_cuda(r->pol))))
                return st;
            if ((st = adapt_ckpt_write(&r->dir, r->net, &r->opt, &r->sched, r->pol, epoch + 1,
                                       step)))
                return st;
            r->ckpt_epoch = epoch + 1;
        }
    }
    return ADAPT_OK;
}

/* ------------------------------------------- the comp policy's plan search */

/* What a sampled plan starts from: the master weights and buffers, the momentum, the
 * optimizer's step count and learning rate, and the schedule. The data order and every random
 * bit are keyed by (seed, epoch, batch), so restarting epoch 0 restores them too. */
struct snapshot {
    float **param; /* (nparam) */
    float **mom;   /* (opt.nbuf) */
    long steps;
    double lr;
    struct adapt_sched sched;
};

static void snapshot_free(struct run *r, struct snapshot *s)
{
    for (int k = 0; s->param && k < r->net->nparam; k++) free(s->param[k]);
    for (int k = 0; s->mom && k < r->opt.nbuf; k++) free(s->mom[k]);
    free(s->param);
    free(s->mom);
    memset(s, 0, sizeof *s);
}

static enum adapt_status snapshot_take(struct run *r, struct snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->param = calloc((size_t)r->net->nparam + 1, sizeof *s->param);
    s->mom = calloc((size_t)r->opt.nbuf + 1, sizeof *s->mom);
    int ok = s->param && s->mom;
    for (int k = 0; ok && k < r->net->nparam; k++) {
        const struct adapt_tensor *v = &r->net->param[k]->value;
        ok = (s->param[k] = malloc(sizeof(float) * (v->numel ? v->numel : 1))) != NULL;
        if (ok) memcpy(s->param[k], v->data, sizeof(float) * v->numel);
    }
    for (int k = 0; ok && k < r->opt.nbuf; k++) {
        size_t n = r->opt.par[k]->value.numel;
        ok = (s->mom[k] = malloc(sizeof(float) * (n ? n : 1))) != NULL;
        if (ok) memcpy(s->mom[k], r->opt.buf[k], sizeof(float) * n);
    }
    if (!ok) {
        snapshot_free(r, s);
        return ADAPT_ERROR(ADAPT_ENOMEM, "policy = comp: cannot keep a copy of the training state");
    }
    s->steps = r->opt.steps;
    s->lr = r->opt.lr;
    s->sched = r->sched;
    return ADAPT_OK;
}

static void snapshot_restore(struct run *r, const struct snapshot *s)
{
    for (int k = 0; k < r->net->nparam; k++) {
        struct adapt_param *p = r->net->param[k];
        memcpy(p->value.data, s->param[k], sizeof(float) * p->value.numel);
    }
    for (int k = 0; k < r->opt.nbuf; k++)
        memcpy(r->opt.buf[k], s->mom[k], sizeof(float) * r->opt.par[k]->value.numel);
    adapt_net_zero_grad(r->net);
    r->opt.steps = s->steps;
    r->opt.lr = s->lr;
    r->sched = s->sched;
}

struct search {
    struct run *r;
    struct snapshot snap;
    struct perf_model *pm;
    struct perf_hw *hw;
    struct perf_params pp;
    int *wl, *gov;
    double t_start;
};

/* Restores the starting state and trains with plan from it. */
static enum adapt_status search_start(struct search *s, const char *plan)
{
    snapshot_restore(s->r, &s->snap);
    return adapt_policy_comp_apply(s->r->pol, plan, s->snap.steps);
}

static enum adapt_status search_epoch(void *ctx, const char *plan, double *loss, long *steps,
                                      long *samples)
{
    struct search *s = ctx;
    struct run *r = s->r;
    const struct adapt_config *cfg = r->cfg;
    enum adapt_status st = search_start(s, plan);
    if (st) return st;
    const int accum = cfg->train.accumulation_steps, nbatches = adapt_loader_batches(&r->tl);
    const long max_steps = cfg->policy.comp_sample_steps;
    long step = s->snap.steps, seen = 0;
    double loss_sum = 0.0, step_loss = 0.0, mean;
    int micro = 0, batch_i = 0, nb;
    double t0 = now_s();
    adapt_loader_start(&r->tl, 0);
    r->opt.lr = r->sched.lr;
    r->pol->epoch = 0;
    while ((nb = adapt_loader_next(&r->tl, r->x, r->y)) > 0) {
        int c = 0;
        set_iter(r, 0, nbatches, batch_i);
        double l = micro_batch(r, nb, &c);
        if (r->dev_st) return r->dev_st;
        loss_sum += l * nb;
        seen += nb;
        step_loss += l;
        micro++;
        batch_i++;
        if (micro == accum || batch_i == nbatches) {
            step++;
            if ((st = optimizer_step(r, step, step_loss, l, micro, batch_i == nbatches, &mean)))
                return st;
            adapt_policy_clear_events(r->pol);
            micro = 0;
            step_loss = 0.0;
            if (max_steps > 0 && step - s->snap.steps >= max_steps) break;
        }
        if (stop_requested) break;
    }
    if (stop_requested)
        return ADAPT_ERROR(ADAPT_EINTERRUPTED, "interrupted during the comp search: nothing "
                                               "was written; start the run again");
    *loss = seen ? loss_sum / (double)seen : NAN;
    *steps = step - s->snap.steps;
    *samples = seen;
    if (!r->opts->quiet) {
        printf("comp stage 1: plan %s  loss %.4f  %ld steps  %.1f s\n", plan, *loss, *steps,
               now_s() - t0);
        fflush(stdout);
    }
    return ADAPT_OK;
}

static enum adapt_status search_batch(void *ctx, const char *plan, double *loss, long *samples)
{
    struct search *s = ctx;
    struct run *r = s->r;
    enum adapt_status st = search_start(s, plan);
    if (st) return st;
    adapt_loader_start(&r->tl, 0);
    int nb = adapt_loader_next(&r->tl, r->x, r->y), c = 0;
    set_iter(r, 0, adapt_loader_batches(&r->tl), 0);
    *loss = nb > 0 ? micro_batch(r, nb, &c) : NAN;
    if (r->dev_st) return r->dev_st;
    *samples = nb > 0 ? nb : 0;
    adapt_net_zero_grad(r->net);
    return ADAPT_OK;
}

static enum adapt_status search_cost(void *ctx, const char *plan, double *cost)
{
    struct search *s = ctx;
    const struct adapt_config *cfg = s->r->cfg;
    adapt_policy_comp_cost_view(s->r->pol, plan, s->wl, s->gov);
    int accum = cfg->train.accumulation_steps;
    double cq, tq;
    enum adapt_status st = perf_price_plan(s->pm, &s->pp, s->hw, s->wl, s->gov, cfg->train.batch,
                                           (double)cfg->train.batch * accum, 1, accum, &cq, &tq);
    *cost = s->hw ? tq : cq;
    return st;
}

/* The comp policy's two-stage search (src/policy/comp.h) from the initial state, which is
 * restored before training with the chosen plan; *res keeps the samples for the trace. */
static enum adapt_status comp_search(struct run *r, struct adapt_comp_result *res)
{
    const struct adapt_config *cfg = r->cfg;
    struct search s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.t_start = now_s();
    perf_params_init(&s.pp);
    enum adapt_status st;
    struct adapt_graph *g = NULL;
    if ((st = adapt_graph_load(&g, model_name(cfg), r->net->classes, cfg->model.args))) return st;
    st = perf_model_from_graph(&s.pm, g);
    adapt_graph_free(g);
    if (st) return st;
    if (cfg->policy.comp_hw[0] && (st = perf_hw_load(&s.hw, cfg->policy.comp_hw))) {
        st = ADAPT_ERROR(st, "policy.comp_hw: %s", adapt_error_message());
        goto free_search;
    }
    s.wl = malloc(sizeof(int) * (size_t)(r->net->nunits + 1));
    s.gov = malloc(sizeof(int) * (size_t)(r->net->nnodes + 1));
    if (!s.wl || !s.gov) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp search");
        goto free_search;
    }
    if ((st = snapshot_take(r, &s.snap))) goto free_search;
    struct adapt_comp_hooks h = {&s, search_epoch, search_batch, search_cost};
    if (!r->opts->quiet) {
        printf("comp search: %s, tolerance %g, cost %s\n", cfg->policy.comp_formats,
               cfg->policy.comp_tolerance, s.hw ? perf_hw_describe(s.hw) : "analytical");
        fflush(stdout);
    }
    if ((st = adapt_comp_search(adapt_policy_comp_space(r->pol), &h, cfg->policy.comp_tolerance,
                                cfg->policy.comp_max_plans, res)))
        goto free_search;
    if ((st = search_start(&s, res->plan))) goto free_search;
    adapt_policy_comp_searched(r->pol);
    if (!r->opts->quiet) {
        printf("comp plan: %s (%d plans sampled, %.1f s)\n", res->plan, res->n_samples,
               now_s() - s.t_start);
        fflush(stdout);
    }
free_search:
    snapshot_free(r, &s.snap);
    free(s.wl);
    free(s.gov);
    perf_hw_free(s.hw);
    perf_model_free(s.pm);
    return st;
}

/* --dry-run: what the comp search will sample; fails as the search would (too many plans). */
static enum adapt_status print_search_space(struct run *r)
{
    const struct adapt_config *cfg = r->cfg;
    const struct adapt_comp_space *sp = adapt_policy_comp_space(r->pol);
    printf("comp search: formats %s (digit %d = float32); units tried in stage 1:",
           cfg->policy.comp_formats, sp->k);
    for (int i = 0; i < sp->n; i++)
        if (sp->unit[i] >= 0 && sp->tried[i]) printf(" %s", r->net->nodes[i].layer->name);
    printf("; set to format 0:");
    for (int i = 0; i < sp->n; i++)
        if (sp->unit[i] >= 0 && !sp->tried[i]) printf(" %s", r->net->nodes[i].layer->name);
    char *plans = NULL;
    int n = 0;
    printf("\n");
    enum adapt_status st = adapt_comp_stage1_plans(sp, cfg->policy.comp_max_plans, &plans, &n);
    if (!st)
        printf("comp search: %d stage-1 plans (%s each)\n", n,
               cfg->policy.comp_sample_steps ? "comp_sample_steps optimizer steps" : "one epoch");
    free(plans);
    struct perf_hw *hw = NULL;
    if (!st && cfg->policy.comp_hw[0]) {
        if ((st = perf_hw_load(&hw, cfg->policy.comp_hw)))
            return ADAPT_ERROR(st, "policy.comp_hw: %s", adapt_error_message());
        printf("comp search: plans priced by %s\n", perf_hw_describe(hw));
        perf_hw_free(hw);
    }
    return st;
}

/* The search's samples into the trace, after its header. */
static enum adapt_status write_samples(struct run *r, const struct adapt_comp_result *res)
{
    int *wl = malloc(sizeof(int) * (size_t)(r->net->nunits + 1));
    int *gov = malloc(sizeof(int) * (size_t)(r->net->nnodes + 1));
    enum adapt_status st = wl && gov ? ADAPT_OK
                                     : ADAPT_ERROR(ADAPT_ENOMEM, "cannot write the comp search");
    for (int i = 0; !st && i < res->n_samples; i++) {
        const struct adapt_comp_sample *c = &res->samples[i];
        adapt_policy_comp_cost_view(r->pol, c->plan, wl, gov);
        struct adapt_trace_sample ts = {c->stage, c->plan, c->steps, c->samples,
                                        c->loss,  c->cost, c->safe,  c->chosen,
                                        r->net->nunits, wl, r->net->nnodes, gov};
        st = adapt_run_dir_sample(&r->dir, &ts);
    }
    free(wl);
    free(gov);
    return st;
}

/* The --eval-only result as JSON: checkpoint, data, formats, loss and
 * accuracy at full precision (17 significant digits). */
static enum adapt_status write_eval_json(struct run *r, const struct adapt_train_opts *opts,
                                         long step, double loss, double acc)
{
    const struct adapt_config *cfg = r->cfg;
    json_t *units = json_array();
    const struct adapt_precision *pr = r->pol->prec;
    for (int u = 0; units && pr && u < pr->nunits; u++) {
        char txt[QUANT_SPEC_STR_MAX];
        const struct adapt_unit_prec *up = &pr->u[u];
        json_array_append_new(units, json_pack("{s:s,s:s}", "unit", up->layer->name, "format",
                                               up->active ? quant_spec_str(&up->spec, txt,
                                                                           sizeof txt)
                                                          : "float32"));
    }
    long correct = lround(acc * r->test.n);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:i,s:I,s:f,s:f,s:o}", "checkpoint",
                          opts->init_from, "config", cfg->file, "model", model_name(cfg),
                          "dataset", dataset_name(cfg), "policy",
                          adapt_config_enum_str(cfg, "policy", "name"), "step", (json_int_t)step,
                          "test_images", r->test.n, "correct", (json_int_t)correct, "loss", loss,
                          "accuracy", acc, "unit_formats", units ? units : json_null());
    if (!o) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot build the evaluation record");
    FILE *f = fopen(opts->eval_json, "w");
    int bad = !f || json_dumpf(o, f, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0;
    if (f) bad |= fputc('\n', f) == EOF;
    if (f) bad |= fclose(f) != 0;
    json_decref(o);
    if (bad)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the evaluation record: %s",
                           opts->eval_json, strerror(errno));
    return ADAPT_OK;
}

/* Data, model, weights (initialised or --init-from), policy and the test loader; with
 * eval_only, the checkpoint's per-unit formats. *eval_step: the step keying the weight copies. */
static enum adapt_status setup_model(struct run *r, long *eval_step)
{
    const struct adapt_config *cfg = r->cfg;
    const struct adapt_train_opts *opts = r->opts;
    const uint64_t seed = (uint64_t)cfg->run.seed;
    enum adapt_status st;
    /* the model description first: its errors before any data is read (the caller's, when
     * it resolved it already); resolved again only if the data's class count is not the one
     * its name promised */
    struct adapt_graph *own = NULL;
    const struct adapt_graph *g = opts->graph;
    int nominal = cfg->model.classes ? cfg->model.classes
                                     : adapt_dataset_classes_of(dataset_name(cfg));
    if (!g || g->classes != nominal) {
        if ((st = adapt_graph_load(&own, model_name(cfg), nominal, cfg->model.args))) return st;
        g = own;
    }
    int classes = 0;
    if ((st = load_data(r, !opts->eval_only))) goto free_graph;
    classes = cfg->model.classes ? cfg->model.classes : r->test.classes;
    if (classes < r->test.classes) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "model.classes = %d, but %s has %d classes", classes,
                         dataset_name(cfg), r->test.classes);
        goto free_graph;
    }
    if (classes != g->classes) {
        adapt_graph_free(own);
        g = own = NULL;
        if ((st = adapt_graph_load(&own, model_name(cfg), classes, cfg->model.args))) return st;
        g = own;
    }
    st = build_model(r, g, classes);
free_graph:
    adapt_graph_free(own);
    if (st) return st;
    adapt_net_init_params(r->net, seed, cfg->model.init_gain);
    if (opts->init_from && (st = adapt_ckpt_load_weights(r->net, opts->init_from))) return st;
    if ((st = adapt_policy_alloc(&r->pol, cfg, r->net, seed))) return st;
    *eval_step = 0;
    if (opts->eval_only &&
        (st = adapt_ckpt_load_formats(r->pol, opts->init_from, eval_step, stdout,
                                      opts->allow_plugins, opts->n_allow_plugins)))
        return st;
    /* evaluation: the weight copies of the checkpoint's last step */
    if (r->pol->prec) adapt_precision_refresh_weights(r->pol->prec, *eval_step);
    if ((st = adapt_loader_alloc(&r->sl, &r->test, NULL, r->test.n, cfg->train.eval_batch, 0,
                                 seed)))
        return st;
    r->have_sl = 1;
    return ADAPT_OK;
}

/* The validation split, the training and validation loaders, the optimizer and the learning
 * rate schedule. */
static enum adapt_status setup_training(struct run *r)
{
    const struct adapt_config *cfg = r->cfg;
    const uint64_t seed = (uint64_t)cfg->run.seed;
    enum adapt_status st;
    int val = cfg->data.val_size;
    if (val >= r->train.n)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "data.val_size = %d leaves no training samples (%s has %d)", val,
                           dataset_name(cfg), r->train.n);
    if ((st = adapt_holdout_alloc(&r->ho, r->train.n, val, seed))) return st;
    r->have_ho = 1;
    if (r->ho.n_val > r->ho.n_train)
        adapt_log(ADAPT_LOG_WARN,
                  "data.val_size = %d: validation takes most of the %d images used (%d left to "
                  "train on); raise data.train_limit or lower data.val_size",
                  r->ho.n_val, r->train.n, r->ho.n_train);
    unsigned flags = ADAPT_LOADER_SHUFFLE |
                     (adapt_config_augment_enabled(cfg) ? ADAPT_LOADER_AUGMENT : 0);
    if ((st = adapt_loader_alloc(&r->tl, &r->train, r->ho.train, r->ho.n_train, cfg->train.batch,
                                 flags, seed)))
        return st;
    r->have_tl = 1;
    if (r->ho.n_val > 0) {
        if ((st = adapt_loader_alloc(&r->vl, &r->train, r->ho.val, r->ho.n_val,
                                     cfg->train.eval_batch, 0, seed)))
            return st;
        r->have_vl = 1;
    }
    if ((st = adapt_sgd_init(&r->opt, r->net, cfg->optim.lr, cfg->optim.momentum,
                             cfg->optim.l2_decay, cfg->optim.l1_decay, cfg->optim.nesterov)))
        return st;
    r->have_opt = 1;
    adapt_sched_init(&r->sched, (enum adapt_sched_kind)cfg->schedule.name, cfg->optim.lr);
    r->sched.gamma = cfg->schedule.gamma;
    r->sched.nmilestones = cfg->schedule.milestones.n < 32 ? cfg->schedule.milestones.n : 32;
    for (int i = 0; i < r->sched.nmilestones; i++)
        r->sched.milestones[i] = cfg->schedule.milestones.v[i];
    r->sched.factor = cfg->schedule.factor;
    r->sched.patience = cfg->schedule.patience;
    r->sched.threshold = cfg->schedule.threshold;
    r->sched.min_lr = cfg->schedule.min_lr;
    r->sched.cooldown = cfg->schedule.cooldown;
    return ADAPT_OK;
}

static struct adapt_run_info run_info(const struct run *r)
{
    struct adapt_run_info info = {dataset_name(r->cfg), r->train.n, r->ho.n_train, r->ho.n_val,
                                  r->test.n};
    return info;
}

/* What the run directory will record can be recorded: the trace header's text, checkpoint
 * tensor names that do not collide. Checked before anything is written, and by a dry run. */
static enum adapt_status check_records(struct run *r)
{
    struct adapt_run_info info = run_info(r);
    enum adapt_status st = adapt_ckpt_check_names(r->net, &r->opt, r->pol);
    return st ? st : adapt_run_dir_check(r->cfg, r->net, r->pol, &info);
}

/* run.device = cuda: what the GPU engine can run, and a GPU to run it on; checked before any
 * data is read. */
static enum adapt_status device_check(const struct adapt_config *cfg)
{
    if (cfg->run.device != ADAPT_CONFIG_DEVICE_CUDA) return ADAPT_OK;
    enum adapt_status st = adapt_policy_cuda_check(cfg);
    if (st) return st;
    char why[256] = "";
    if (!adapt_cuda_net_built())
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "run.device = cuda: this build has no CUDA (configure found no CUDA "
                           "toolkit, or --without-cuda)");
    int n = adapt_cuda_device_count(why, sizeof why);
    if (n == 0) return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "run.device = cuda: %s", why);
    if (cfg->run.gpu >= n)
        return ADAPT_ERROR(ADAPT_EINVAL, "run.gpu = %d, but this machine has %d CUDA device%s",
                           cfg->run.gpu, n, n == 1 ? "" : "s");
    return ADAPT_OK;
}

/* Times `steps` optimizer steps (after `warmup` untimed ones) and one evaluation batch, and
 * prints the estimated time of the whole run. Trains the in-memory model; writes nothing. */
static enum adapt_status estimate(struct run *r, int warmup, int steps)
{
    const struct adapt_config *cfg = r->cfg;
    const int accum = cfg->train.accumulation_steps;
    const int nbatches = adapt_loader_batches(&r->tl);
    enum adapt_status st;
    double t0 = 0.0;
    int nb, c, micro = 0;
    long step = 0;
    adapt_loader_start(&r->tl, 0);
    r->pol->epoch = 0;
    for (int batch_i = 0; step < warmup + steps; batch_i++) {
        if (batch_i == nbatches) { /* a short epoch: start it again */
            adapt_loader_start(&r->tl, 0);
            batch_i = 0;
        }
        if ((nb = adapt_loader_next(&r->tl, r->x, r->y)) <= 0) break;
        if (step == warmup && micro == 0) t0 = now_s();
        if (r->pol->prec) r->pol->prec->iter = batch_i;
        r->net->rng_iter = batch_i;
        double loss = micro_batch(r, nb, &c);
        if (++micro == accum) {
            step++;
            r->pol->micro_loss = loss / accum;
            if ((st = adapt_policy_step(r->pol, &r->opt, step, loss, micro, 0, NULL))) return st;
            adapt_policy_clear_events(r->pol);
            micro = 0;
        }
    }
    double per_step = (now_s() - t0) / steps;
    /* evaluation: one batch (timed the second time), scaled to the validation and test sets */
    double loss, acc;
    struct adapt_loader one;
    int n_eval = r->test.n < cfg->train.eval_batch ? r->test.n : cfg->train.eval_batch;
    int *first = malloc(sizeof(int) * (size_t)n_eval);
    if (!first) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the estimate's indices");
    for (int i = 0; i < n_eval; i++) first[i] = i;
    st = adapt_loader_alloc(&one, &r->test, first, n_eval, cfg->train.eval_batch, 0, 1);
    free(first);
    if (st) return st;
    evaluate(r, &one, &loss, &acc);
    double t1 = now_s();
    evaluate(r, &one, &loss, &acc);
    double per_image = (now_s() - t1) / n_eval;
    adapt_loader_free(&one);
    long steps_per_epoch = (nbatches + accum - 1) / accum;
    double train_s = per_step * steps_per_epoch * cfg->train.epochs;
    double eval_s = per_image * ((double)r->ho.n_val * cfg->train.epochs + r->test.n);
    char a[32], b[32], t[32];
    format_time(train_s, 1, a, sizeof a);
    format_time(eval_s, 1, b, sizeof b);
    format_time(train_s + eval_s, 1, t, sizeof t);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("estimate: %.3f s per optimizer step (%d timed after %d warm-up, batch %d x %d, %d "
           "thread%s) and %.2f ms per evaluated image: %ld steps per epoch, %d epochs: training "
           "%s + evaluation %s = %s (h:mm:ss)\n",
           per_step, steps, warmup, cfg->train.batch, accum, threads, threads == 1 ? "" : "s",
           1e3 * per_image, steps_per_epoch, cfg->train.epochs, a, b, t);
    return ADAPT_OK;
}

enum adapt_status adapt_train_check(const struct adapt_config *cfg,
                                    const struct adapt_train_opts *opts, int estimate_steps)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.opts = opts;
    enum adapt_status st;
    long eval_step;
#ifdef _OPENMP
    if (cfg->run.threads > 0) omp_set_num_threads(cfg->run.threads);
#endif
    if ((st = device_check(cfg)) || (st = setup_model(&r, &eval_step)) ||
        (st = setup_training(&r)) || (st = check_records(&r)))
        goto free_run;
    const char *path = cfg->data.path[0] ? cfg->data.path
                                         : adapt_dataset_default_path(dataset_name(cfg));
    printf("data:   %s from %s: %d train + %d validation images (of the training file's %d), "
           "%d test, %d classes, %d x %d x %d input\n",
           dataset_name(cfg), path, r.ho.n_train, r.ho.n_val, r.train_file_n, r.test.n,
           r.test.classes, r.test.c, r.test.h, r.test.w);
    printf("policy: %s, %d precision units: checked against the model\n",
           adapt_config_enum_str(cfg, "policy", "name"), r.pol->prec ? r.pol->prec->nunits : 0);
    if (adapt_policy_comp_needs_search(r.pol) && (st = print_search_space(&r))) goto free_run;
    if (estimate_steps > 0) st = estimate(&r, 2, estimate_steps);
free_run:
    run_free(&r);
    return st;
}

/* The end of a run's output: per unit the mean and final word length (and fraction) and the
 * final sparsity, the run's SU1, training memory relative to float32 and final sparsity, all
 * as adapt-perf prices the trace just written (perf_trace_load), and the commands that look
 * further. A trace the performance model refuses is said in one line, not an error. */
static void print_summary(const struct run *r)
{
    struct perf_params pp;
    perf_params_init(&pp);
    struct perf_run *pr = NULL;
    const char *out = r->opts->out_dir;
    if (perf_trace_load(r->dir.trace_path, 0, &pp, NULL, NULL, &pr)) {
        printf("precision summary: not available (%s)\n", adapt_error_message());
        return;
    }
    printf("precision per unit (the trace, priced as adapt-perf does):\n"
           "  %-12s %8s  %-8s %8s\n",
           "unit", "mean WL", "final", "sparsity");
    for (int u = 0; u < pr->n_units; u++) {
        const struct perf_unit_result *ur = &pr->units[u];
        char fin[32], sp[32] = "-";
        if (ur->final_fl >= 0 && ur->final_wl < 32)
            snprintf(fin, sizeof fin, "<%d,%d>", ur->final_wl, ur->final_fl);
        else
            snprintf(fin, sizeof fin, "%d bits", ur->final_wl);
        if (ur->final_sparsity == ur->final_sparsity)
            snprintf(sp, sizeof sp, "%.1f%%", 100.0 * ur->final_sparsity);
        printf("  %-12.12s %8.2f  %-8s %8s\n", ur->name, ur->mean_wl, fin, sp);
    }
    char sp[32] = "n/a";
    if (pr->sparsity_final == pr->sparsity_final)
        snprintf(sp, sizeof sp, "%.1f%%", 100.0 * pr->sparsity_final);
    printf("SU1 %.2f (float32 cost / this run's), training memory %.2f x float32, final "
           "sparsity %s\n",
           pr->su1, pr->mem_rel, sp);
    printf("next: adapt-perf %s --per-unit\n"
           "      adapt-heatmap %s -o wl.png\n"
           "      experiments/report.py all RUNLIST --out DIR   (several runs, one report)\n",
           out, r->dir.trace_path);
    perf_run_free(pr);
}

enum adapt_status adapt_train_run(const struct adapt_config *cfg,
                                  const struct adapt_train_opts *opts)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.opts = opts;
    r.tty = isatty(STDOUT_FILENO);
    enum adapt_status st;
#ifdef _OPENMP
    if (cfg->run.threads > 0) omp_set_num_threads(cfg->run.threads);
#endif
    double t_start = now_s();
    long eval_step = 0;
    struct adapt_comp_result search = {0};
    struct adapt_run_dir_opts dir_opts = {opts->out_dir, opts->resume, opts->force};
    if ((st = device_check(cfg))) goto free_run;
    /* an existing run directory is this process's from before the data loads until the run
     * ends; a new one from when it is created (adapt_run_dir_open) */
    if (!opts->eval_only && (st = adapt_run_dir_claim(&r.dir, &dir_opts))) goto free_run;
    if ((st = setup_model(&r, &eval_step))) goto free_run;

    if (opts->eval_only) {
        double loss, acc;
        evaluate(&r, &r.sl, &loss, &acc);
        printf("test  loss %.4f  accuracy %.2f%%  (%d images, %s)\n", loss, 100.0 * acc, r.test.n,
               opts->init_from ? opts->init_from : "initial weights");
        if (opts->eval_json) st = write_eval_json(&r, opts, eval_step, loss, acc);
        goto free_run;
    }
    if ((st = setup_training(&r)) || (st = check_records(&r))) goto free_run;

    /* comp: the plan search runs before the run directory is written */
    if (!opts->resume && adapt_policy_comp_needs_search(r.pol) && (st = comp_search(&r, &search)))
        goto free_run;
    int start_epoch = 0;
    long start_step = 0;
    struct adapt_run_info info = run_info(&r);
    if ((st = adapt_run_dir_open(&r.dir, cfg, &dir_opts, r.net, &r.opt, &r.sched, r.pol, &info,
                                 &start_epoch, &start_step)))
        goto free_run;
    if (search.n_samples && (st = write_samples(&r, &search))) goto free_run;
    /* the quantized copies the uninterrupted run had after its last step */
    if (r.pol->prec && start_step > 0) adapt_precision_refresh_weights(r.pol->prec, start_step);
    /* the GPU engine starts from the host's weights and optimizer state (a resumed run's) */
    if (cfg->run.device == ADAPT_CONFIG_DEVICE_CUDA &&
        ((st = adapt_cuda_net_create(r.net, cfg->run.gpu, &r.dev)) ||
         (st = adapt_cuda_net_push_sgd(r.dev, &r.opt)) ||
         (st = adapt_policy_use_cuda(r.pol, r.dev, start_step))))
        goto free_run;
    r.epochs_done = start_epoch;
    r.ckpt_epoch = start_epoch;
    /* from here (before the start line) Ctrl-C stops at the end of the current step */
    void (*old)(int) = signal(SIGINT, on_sigint);
    if (!opts->quiet) {
        printf("adapt-sim %s: %s on %s (%d train, %d val, %d test), policy %s, %d epochs, "
               "batch %d, seed %lld\n",
               PACKAGE_VERSION, model_name(cfg), dataset_name(cfg), r.ho.n_train, r.ho.n_val,
               r.test.n, adapt_config_enum_str(cfg, "policy", "name"), cfg->train.epochs,
               cfg->train.batch, (long long)cfg->run.seed);
        printf("data: %d train + %d validation images (of the training file's %d), %d test\n",
               r.ho.n_train, r.ho.n_val, r.train_file_n, r.test.n);
        if (start_epoch > 0)
            printf("resuming after epoch %d (step %ld)\n", start_epoch, start_step);
        fflush(stdout);
    }
    st = train_loop(&r, start_epoch, start_step);
    signal(SIGINT, old);
    if (st) goto free_run;
    if (stop_requested) {
        adapt_run_dir_end(&r.dir, "stopped", now_s() - t_start);
        if (r.ckpt_epoch == 0)
            st = ADAPT_ERROR(ADAPT_EINTERRUPTED,
                             "interrupted in epoch %d, before the first checkpoint: there is "
                             "nothing to resume; start the run again with --force",
                             r.epochs_done + 1);
        else
            st = ADAPT_ERROR(ADAPT_EINTERRUPTED,
                             "interrupted in epoch %d: the run can continue from the checkpoint "
                             "of epoch %d with --resume",
                             r.epochs_done + 1, r.ckpt_epoch);
        goto free_run;
    }
    double test_loss, test_acc;
    evaluate(&r, &r.sl, &test_loss, &test_acc);
    if ((st = r.dev_st)) goto free_run;
    if ((st = adapt_run_dir_test(&r.dir, r.epochs_done, test_loss, test_acc))) goto free_run;
    if ((st = adapt_run_dir_end(&r.dir, "ok", now_s() - t_start))) goto free_run;
    if (!opts->quiet) {
        printf("test  loss %.4f  accuracy %.2f%%  (%d images)\n", test_loss, 100.0 * test_acc,
               r.test.n);
        printf("trace:      %s\ncheckpoint: %s\n", r.dir.trace_path, r.dir.model_path);
        print_summary(&r);
    }
free_run:
    adapt_comp_result_free(&search);
    run_free(&r);
    return st;
}
