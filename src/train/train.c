/* src/train/train.c: the training run (see src/train/train.h): the steps, evaluation, the epoch
 * loop, the end of run summary and adapt_train_run. Setup and the checks are in setup.c, the
 * comp policy's plan search in comp_search.c. */
#include "src/train/train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <config.h>
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/perfmodel/perf.h"
#include "src/policy/comp.h"
#include "src/policy/policy.h"
#include "src/policy/precision.h"
#include "src/train/checkpoint.h"
#include "src/train/internal.h"
#include "src/train/run_dir.h"

volatile sig_atomic_t train_stop_requested;

static void on_sigint(int sig)
{
    (void)sig;
    train_stop_requested = 1;
}

double train_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The nb samples in r->x, r->y through the GPU engine (training: with the backward): the sum
 * of the rows' losses, or NAN with r->dev_st set when a device call failed. */
static double device_batch(struct train_run *r, int nb, int training, int *correct)
{
    double s = NAN;
    if ((r->dev_st = adapt_cuda_net_upload(r->dev, r->x, r->y, nb)) ||
        (r->dev_st = adapt_cuda_net_step(r->dev, training, training)) ||
        (r->dev_st = adapt_cuda_net_result(r->dev, &s, correct)))
        return NAN;
    return s;
}

/* The mean loss of the nb rows of logits lg against r->y (and its gradient when dlogits is not
 * NULL): the cross-entropy of the logits, or with reference.softmax_before_ce that of their
 * softmax (doc/algorithms.md, "Reference switches"). */
static double train_loss(const struct train_run *r, const float *lg, int nb, float *dlogits,
                         int *correct)
{
    if (adapt_config_reference(r->cfg, ADAPT_REF_SOFTMAX_BEFORE_CE))
        return adapt_softmax2_xent(lg, r->y, nb, r->net->classes, dlogits, correct);
    return adapt_softmax_xent(lg, r->y, nb, r->net->classes, dlogits, correct);
}

/* Mean loss and accuracy of the network (evaluation mode) over a loader. */
void train_evaluate(struct train_run *r, struct adapt_loader *l, double *loss, double *acc)
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
            sum += train_loss(r, lg, nb, NULL, &c) * nb;
        }
        correct += c;
        count += nb;
    }
    *loss = count ? sum / (double)count : NAN;
    *acc = count ? (double)correct / (double)count : NAN;
}

/* s seconds as m:ss, or h:mm:ss from an hour on (always h:mm:ss with hours: --estimate's
 * times, whose line says "h:mm:ss"); dashes when s is no time or over 10^7 s. */
void train_format_time(double s, int hours, char *buf, size_t n)
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

static void format_eta(double s, char *buf, size_t n) { train_format_time(s, 0, buf, n); }

/* Forward, loss (scaled by the policy's loss scale for the backward pass) and backward of the
 * nb samples in r->x, r->y; the mean loss, *correct the right answers. */
double train_micro_batch(struct train_run *r, int nb, int *correct)
{
    const int classes = r->net->classes;
    /* on the GPU engine the loss scale is the engine's (adapt_cuda_net_loss_scale) */
    if (r->dev) return device_batch(r, nb, 1, correct) / nb;
    const float *lg = adapt_net_forward(r->net, r->x, nb, 1);
    double loss = train_loss(r, lg, nb, r->dlogits, correct);
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
enum adapt_status train_optimizer_step(struct train_run *r, long step, double step_loss,
                                       double loss, int micro, int last_in_epoch, double *mean_loss)
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
void train_set_iter(struct train_run *r, int epoch, int nbatches, int batch_i)
{
    if (r->pol->prec) r->pol->prec->iter = (long)epoch * nbatches + batch_i;
    r->net->rng_iter = (int64_t)epoch * nbatches + batch_i;
}

static enum adapt_status train_loop(struct train_run *r, int start_epoch, long start_step)
{
    const struct adapt_config *cfg = r->cfg;
    const int epochs = cfg->train.epochs, accum = cfg->train.accumulation_steps;
    const int nbatches = adapt_loader_batches(&r->tl);
    long step = start_step;
    int accum_since_log = 0, policy_stop = 0;
    enum adapt_status st = ADAPT_OK;
    double t_run = train_now_s();
    for (int epoch = start_epoch; epoch < epochs && !train_stop_requested && !policy_stop;
         epoch++) {
        double t0 = train_now_s(), t_last = 0.0;
        double loss_sum = 0.0, step_loss = 0.0;
        long correct = 0, seen = 0;
        int micro = 0, nb, batch_i = 0;
        adapt_loader_start(&r->tl, epoch);
        r->opt.lr = r->sched.lr;
        r->pol->epoch = epoch;
        while ((nb = adapt_loader_next(&r->tl, r->x, r->y)) > 0) {
            int c = 0;
            train_set_iter(r, epoch, nbatches, batch_i);
            double loss = train_micro_batch(r, nb, &c);
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
                if ((st = train_optimizer_step(r, step, step_loss, loss, micro, batch_i == nbatches,
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
                if (train_stop_requested) break;
            }
            if (r->tty && !r->opts->quiet) {
                double t = train_now_s();
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
        if (train_stop_requested && batch_i < nbatches) break;
        double wall = train_now_s() - t0;
        double val_loss = NAN, val_acc = NAN;
        if (r->have_vl) train_evaluate(r, &r->vl, &val_loss, &val_acc);
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
                                     train_now_s() - t_run, seen / wall};
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
/* The end of a run's output: per unit the mean and final word length (and fraction) and the
 * final sparsity, the run's SU1, training memory relative to float32 and final sparsity, all
 * as adapt-perf prices the trace just written (perf_trace_load), and the commands that look
 * further. A trace the performance model refuses is said in one line, not an error. */
static void print_summary(const struct train_run *r)
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
    struct train_run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.opts = opts;
    r.tty = isatty(STDOUT_FILENO);
    enum adapt_status st;
#ifdef _OPENMP
    if (cfg->run.threads > 0) omp_set_num_threads(cfg->run.threads);
#endif
    double t_start = train_now_s();
    long eval_step = 0;
    struct adapt_comp_result search = {0};
    struct adapt_run_dir_opts dir_opts = {opts->out_dir, opts->resume, opts->force};
    if ((st = train_device_check(cfg))) goto free_run;
    /* an existing run directory is this process's from before the data loads until the run
     * ends; a new one from when it is created (adapt_run_dir_open) */
    if (!opts->eval_only && (st = adapt_run_dir_claim(&r.dir, &dir_opts))) goto free_run;
    if ((st = train_setup_model(&r, &eval_step))) goto free_run;

    if (opts->eval_only) {
        double loss, acc;
        train_evaluate(&r, &r.sl, &loss, &acc);
        printf("test  loss %.4f  accuracy %.2f%%  (%d images, %s)\n", loss, 100.0 * acc, r.test.n,
               opts->init_from ? opts->init_from : "initial weights");
        if (opts->eval_json) st = train_write_eval_json(&r, opts, eval_step, loss, acc);
        goto free_run;
    }
    if ((st = train_setup_training(&r)) || (st = train_check_records(&r))) goto free_run;

    /* comp: the plan search runs before the run directory is written */
    if (!opts->resume && adapt_policy_comp_needs_search(r.pol) &&
        (st = train_comp_search(&r, &search)))
        goto free_run;
    int start_epoch = 0;
    long start_step = 0;
    struct adapt_run_info info = train_run_info(&r);
    if ((st = adapt_run_dir_open(&r.dir, cfg, &dir_opts, r.net, &r.opt, &r.sched, r.pol, &info,
                                 &start_epoch, &start_step)))
        goto free_run;
    if (search.n_samples && (st = train_write_samples(&r, &search))) goto free_run;
    /* the quantized copies the uninterrupted run had after its last step */
    if (r.pol->prec && start_step > 0) adapt_precision_refresh_again(r.pol->prec, start_step);
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
               PACKAGE_VERSION, train_model_name(cfg), train_dataset_name(cfg), r.ho.n_train,
               r.ho.n_val, r.test.n, adapt_config_enum_str(cfg, "policy", "name"),
               cfg->train.epochs, cfg->train.batch, (long long)cfg->run.seed);
        printf("data: %d train + %d validation images (of the training file's %d), %d test\n",
               r.ho.n_train, r.ho.n_val, r.train_file_n, r.test.n);
        if (start_epoch > 0)
            printf("resuming after epoch %d (step %ld)\n", start_epoch, start_step);
        fflush(stdout);
    }
    st = train_loop(&r, start_epoch, start_step);
    signal(SIGINT, old);
    if (st) goto free_run;
    if (train_stop_requested) {
        adapt_run_dir_end(&r.dir, "stopped", train_now_s() - t_start);
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
    train_evaluate(&r, &r.sl, &test_loss, &test_acc);
    if ((st = r.dev_st)) goto free_run;
    if ((st = adapt_run_dir_test(&r.dir, r.epochs_done, test_loss, test_acc))) goto free_run;
    if ((st = adapt_run_dir_end(&r.dir, "ok", train_now_s() - t_start))) goto free_run;
    if (!opts->quiet) {
        printf("test  loss %.4f  accuracy %.2f%%  (%d images)\n", test_loss, 100.0 * test_acc,
               r.test.n);
        printf("trace:      %s\ncheckpoint: %s\n", r.dir.trace_path, r.dir.model_path);
        print_summary(&r);
    }
free_run:
    adapt_comp_result_free(&search);
    train_run_free(&r);
    return st;
}
