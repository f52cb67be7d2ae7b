/* src/train/internal.h: what the parts of the training run share (not a public API).
 *
 * A run (src/train/train.h) is three files: train.c (the steps, evaluation, the epoch loop and
 * adapt_train_run), setup.c (data, model, policy, loaders and optimizer; the checks before
 * anything is written, --dry-run, --estimate and the --eval-only record) and comp_search.c (the
 * comp policy's plan search, which trains sampled plans from a restored state). All of them
 * work on one struct train_run, which owns what it holds (train_run_free).
 */
#ifndef ADAPT_TRAIN_INTERNAL_H
#define ADAPT_TRAIN_INTERNAL_H

#include <signal.h>
#include <stddef.h>

#include "src/data/data.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/policy/comp.h"
#include "src/policy/policy.h"
#include "src/train/run_dir.h"
#include "src/train/train.h"

/* One training run or evaluation: its inputs (borrowed), data, network, optimizer, policy
 * and run directory. */
struct train_run {
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

/* ---- train.c */

/* Set by Ctrl-C while adapt_train_run trains: stop at the end of the current step. */
extern volatile sig_atomic_t train_stop_requested;
/* Seconds on the monotonic clock. */
double train_now_s(void);
/* Mean loss and accuracy of the network (evaluation mode) over a loader. */
void train_evaluate(struct train_run *r, struct adapt_loader *l, double *loss, double *acc);
/* s seconds as m:ss, or h:mm:ss from an hour on (always h:mm:ss with hours); dashes when s is
 * no time or over 10^7 s. */
void train_format_time(double s, int hours, char *buf, size_t n);
/* Forward, loss and backward of the nb samples in r->x, r->y; the mean loss, *correct the right
 * answers. On the GPU engine a failure leaves r->dev_st set. */
double train_micro_batch(struct train_run *r, int nb, int *correct);
/* Optimizer step `step` after `micro` micro-batches whose losses sum to step_loss (`loss` the
 * last one's). *mean_loss: the step's mean loss with the L1 term. */
enum adapt_status train_optimizer_step(struct train_run *r, long step, double step_loss,
                                       double loss, int micro, int last_in_epoch,
                                       double *mean_loss);
/* Micro-batch i of `epoch` keys the rounding and dropout bits. */
void train_set_iter(struct train_run *r, int epoch, int nbatches, int batch_i);

/* ---- setup.c */

void train_run_free(struct train_run *r);
/* The configured model's and data set's names. */
const char *train_model_name(const struct adapt_config *cfg);
const char *train_dataset_name(const struct adapt_config *cfg);
/* Data, model, weights, policy and the test loader; with opts->eval_only, the checkpoint's
 * per-unit formats. *eval_step: the step keying the weight copies. */
enum adapt_status train_setup_model(struct train_run *r, long *eval_step);
/* The validation split, the training and validation loaders, the optimizer and the learning
 * rate schedule. */
enum adapt_status train_setup_training(struct train_run *r);
struct adapt_run_info train_run_info(const struct train_run *r);
/* What the run directory will record can be recorded (before anything is written). */
enum adapt_status train_check_records(struct train_run *r);
/* run.device = cuda: what the GPU engine can run, and a GPU to run it on. */
enum adapt_status train_device_check(const struct adapt_config *cfg);
/* The --eval-only result as JSON into opts->eval_json. */
enum adapt_status train_write_eval_json(struct train_run *r, const struct adapt_train_opts *opts,
                                        long step, double loss, double acc);

/* ---- comp_search.c */

/* The comp policy's two-stage search from the initial state, which is restored before
 * training with the chosen plan; *res keeps the samples for the trace. */
enum adapt_status train_comp_search(struct train_run *r, struct adapt_comp_result *res);
/* --dry-run: what the comp search will sample; fails as the search would. */
enum adapt_status train_print_search_space(struct train_run *r);
/* The search's samples into the trace, after its header. */
enum adapt_status train_write_samples(struct train_run *r, const struct adapt_comp_result *res);

#endif
