/* src/train/setup.c: a training run's setup (data, model, weights, policy, loaders, optimizer,
 * schedule), the checks made before anything is written, --dry-run with --estimate
 * (adapt_train_check) and the --eval-only record. */
#include "src/train/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/log.h"
#include "src/cuda/device.h"
#include "src/data/data.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/policy/comp.h"
#include "src/policy/policy.h"
#include "src/policy/precision.h"
#include "src/train/checkpoint.h"
#include "src/train/internal.h"
#include "src/train/run_dir.h"

void train_run_free(struct train_run *r)
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

const char *train_model_name(const struct adapt_config *cfg) { return adapt_config_model(cfg); }

const char *train_dataset_name(const struct adapt_config *cfg)
{
    return adapt_config_enum_str(cfg, "data", "dataset");
}

static enum adapt_status load_data(struct train_run *r, int need_train)
{
    const struct adapt_config *cfg = r->cfg;
    const char *path = cfg->data.path[0] ? cfg->data.path : NULL;
    enum adapt_data_resize rz = cfg->data.resize == ADAPT_CONFIG_RESIZE_BILINEAR
                                    ? ADAPT_DATA_RESIZE_BILINEAR
                                    : ADAPT_DATA_RESIZE_PAD;
    enum adapt_status st;
    if (need_train) {
        if ((st = adapt_dataset_load_resized(&r->train, train_dataset_name(cfg), path,
                                             ADAPT_DATA_TRAIN, rz)))
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
                                   train_dataset_name(cfg), r->train.n);
            r->train.n = (int)need;
        }
    }
    if ((st = adapt_dataset_load_resized(&r->test, train_dataset_name(cfg), path, ADAPT_DATA_TEST,
                                         rz)))
        return st;
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
static enum adapt_status build_model(struct train_run *r, const struct adapt_graph *g, int classes)
{
    const struct adapt_config *cfg = r->cfg;
    const struct adapt_dataset *ds = &r->test;
    enum adapt_status st;
    if (g->in_chw[0] != ds->c || g->in_chw[1] != ds->h || g->in_chw[2] != ds->w)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "model %s (%s) reads %dx%dx%d inputs, but data.dataset = %s gives "
                           "%dx%dx%d images",
                           g->name, g->file, g->in_chw[0], g->in_chw[1], g->in_chw[2],
                           train_dataset_name(cfg), ds->c, ds->h, ds->w);
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

/* The --eval-only result as JSON: checkpoint, data, formats, loss and
 * accuracy at full precision (17 significant digits). */
enum adapt_status train_write_eval_json(struct train_run *r, const struct adapt_train_opts *opts,
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
                          opts->init_from, "config", cfg->file, "model", train_model_name(cfg),
                          "dataset", train_dataset_name(cfg), "policy",
                          adapt_config_enum_str(cfg, "policy", "name"), "step", (json_int_t)step,
                          "test_images", r->test.n, "correct", (json_int_t)correct, "loss", loss,
                          "accuracy", acc, "unit_formats", units ? units : json_null());
    if (!o) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot build the evaluation record");
    FILE *f = fopen(opts->eval_json, "w");
    /* 10 significant digits: accuracies of up to 10^5 images stay exact, loss reads well */
    int bad = !f || json_dumpf(o, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) != 0;
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
enum adapt_status train_setup_model(struct train_run *r, long *eval_step)
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
                                     : adapt_dataset_classes_of(train_dataset_name(cfg));
    if (!g || g->classes != nominal) {
        if ((st = adapt_graph_load(&own, train_model_name(cfg), nominal, cfg->model.args)))
            return st;
        g = own;
    }
    int classes = 0;
    if ((st = load_data(r, !opts->eval_only))) goto free_graph;
    classes = cfg->model.classes ? cfg->model.classes : r->test.classes;
    if (classes < r->test.classes) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "model.classes = %d, but %s has %d classes", classes,
                         train_dataset_name(cfg), r->test.classes);
        goto free_graph;
    }
    if (classes != g->classes) {
        adapt_graph_free(own);
        g = own = NULL;
        if ((st = adapt_graph_load(&own, train_model_name(cfg), classes, cfg->model.args)))
            return st;
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
    /* evaluation: the weight copies of the checkpoint's last step, with the scales they had */
    int scales = 0;
    if (opts->eval_only &&
        (st = adapt_ckpt_load_role_scales(r->pol, opts->init_from, stdout, &scales)))
        return st;
    if (r->pol->prec && scales) adapt_precision_refresh_again(r->pol->prec, *eval_step);
    else if (r->pol->prec) adapt_precision_refresh_weights(r->pol->prec, *eval_step);
    if ((st = adapt_loader_alloc(&r->sl, &r->test, NULL, r->test.n, cfg->train.eval_batch, 0,
                                 seed)))
        return st;
    r->have_sl = 1;
    return ADAPT_OK;
}

/* The validation split, the training and validation loaders, the optimizer and the learning
 * rate schedule. */
enum adapt_status train_setup_training(struct train_run *r)
{
    const struct adapt_config *cfg = r->cfg;
    const uint64_t seed = (uint64_t)cfg->run.seed;
    enum adapt_status st;
    int val = cfg->data.val_size;
    if (val >= r->train.n)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "data.val_size = %d leaves no training samples (%s has %d)", val,
                           train_dataset_name(cfg), r->train.n);
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

struct adapt_run_info train_run_info(const struct train_run *r)
{
    struct adapt_run_info info = {train_dataset_name(r->cfg), r->train.n, r->ho.n_train,
                                  r->ho.n_val, r->test.n};
    return info;
}

/* What the run directory will record can be recorded: the trace header's text, checkpoint
 * tensor names that do not collide. Checked before anything is written, and by a dry run. */
enum adapt_status train_check_records(struct train_run *r)
{
    struct adapt_run_info info = train_run_info(r);
    enum adapt_status st = adapt_ckpt_check_names(r->net, &r->opt, r->pol);
    return st ? st : adapt_run_dir_check(r->cfg, r->net, r->pol, &info);
}

/* run.device = cuda: what the GPU engine can run, and a GPU to run it on; checked before any
 * data is read. */
enum adapt_status train_device_check(const struct adapt_config *cfg)
{
    if (cfg->run.device != ADAPT_CONFIG_DEVICE_CUDA) return ADAPT_OK;
    if (adapt_config_reference(cfg, ADAPT_REF_SOFTMAX_BEFORE_CE))
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "run.device = cuda: reference.softmax_before_ce (%s) runs on the CPU "
                           "engine only; set reference.softmax_before_ce = off or run.device = "
                           "cpu",
                           cfg->reference.sw[ADAPT_REF_SOFTMAX_BEFORE_CE] == ADAPT_SWITCH_ON
                               ? "on"
                               : "auto: on with quantization.compat = reference and lenet5");
    if (adapt_config_arith_set(cfg)) {
        char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
        adapt_config_origin_str(cfg, "arithmetic",
                                cfg->arithmetic.units[0] ? "units" : "accumulator", o, sizeof o);
        return ADAPT_ERROR(
            ADAPT_EUNSUPPORTED,
            "%s: run.device = cuda with [arithmetic] set: the GPU engine runs "
            "float32 arithmetic only (products and sums in float32); set "
            "arithmetic.accumulator = float32 and no arithmetic.units, or run.device "
            "= cpu",
            o);
    }
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
static enum adapt_status estimate(struct train_run *r, int warmup, int steps)
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
        if (step == warmup && micro == 0) t0 = train_now_s();
        if (r->pol->prec) r->pol->prec->iter = batch_i;
        r->net->rng_iter = batch_i;
        double loss = train_micro_batch(r, nb, &c);
        if (++micro == accum) {
            step++;
            r->pol->micro_loss = loss / accum;
            if ((st = adapt_policy_step(r->pol, &r->opt, step, loss, micro, 0, NULL))) return st;
            adapt_policy_clear_events(r->pol);
            micro = 0;
        }
    }
    double per_step = (train_now_s() - t0) / steps;
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
    train_evaluate(r, &one, &loss, &acc);
    double t1 = train_now_s();
    train_evaluate(r, &one, &loss, &acc);
    double per_image = (train_now_s() - t1) / n_eval;
    adapt_loader_free(&one);
    long steps_per_epoch = (nbatches + accum - 1) / accum;
    double train_s = per_step * steps_per_epoch * cfg->train.epochs;
    double eval_s = per_image * ((double)r->ho.n_val * cfg->train.epochs + r->test.n);
    char a[32], b[32], t[32];
    train_format_time(train_s, 1, a, sizeof a);
    train_format_time(eval_s, 1, b, sizeof b);
    train_format_time(train_s + eval_s, 1, t, sizeof t);
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

/* The dry run's table of unit x role: each role's format, rounding and scaling as the precision
 * state resolved them ("unit" and "auto" name the unit's present format). */
static void print_roles(const struct adapt_precision *p)
{
    printf("roles:  %-12s", "unit");
    for (int r = 0; r < ADAPT_ROLE_N; r++) printf(" | %s", adapt_role_names[r]);
    printf("\n");
    for (int u = 0; u < p->nunits; u++) {
        char unit[QUANT_SPEC_STR_MAX];
        quant_spec_str(&p->u[u].spec, unit, sizeof unit);
        printf("        %-12s", p->u[u].layer->name);
        for (int r = 0; r < ADAPT_ROLE_N; r++) {
            const struct adapt_role_fmt *f = adapt_precision_role(p, u, (enum adapt_role)r);
            char buf[QUANT_SPEC_STR_MAX + 64];
            if (!p->u[u].active) snprintf(buf, sizeof buf, "float32");
            else if (f->kind == ADAPT_ROLE_AUTO) snprintf(buf, sizeof buf, "auto (%s)", unit);
            else if (f->kind == ADAPT_ROLE_UNIT) {
                struct adapt_role_fmt g = *f;
                g.kind = ADAPT_ROLE_FORMAT;
                g.spec = p->u[u].spec;
                adapt_role_fmt_str(&g, buf, sizeof buf);
            } else adapt_role_fmt_str(f, buf, sizeof buf);
            printf(" | %s", buf);
        }
        printf("\n");
    }
    printf("        (auto: rounded as the policy rounds without roles, in the unit's format or "
           "not at all; doc/numerics.md)\n");
    if (p->mxg)
        printf(p->mx_channels
                   ? "        (MX roles of conv2d and linear units: rounded per GEMM, the "
                     "convolutions' unlowered tensors along channels and batch, roles.mx_axis = "
                     "channels)\n"
                   : "        (MX roles of conv2d and linear units: blocks along each GEMM's "
                     "reduction dimension, roles.mx_axis = gemm)\n");
}

/* The dry run's table of the units' accumulator models: per unit its model and, for each of
 * its three GEMMs, whether the model applies (both operands on fixed-point grids, or a float
 * model) or the GEMM runs in float32, with the formats the run starts with. */
static void print_arith(const struct adapt_precision *p)
{
    static const char *const gname[3] = {"forward", "input grad", "weight grad"};
    printf("arith:  %-12s | %-28s | %s | %s | %s\n", "unit", "accumulator", gname[0], gname[1],
           gname[2]);
    for (int u = 0; u < p->nunits; u++) {
        int on[3];
        const struct quant_acc *a = adapt_precision_arith(p, u, on);
        char buf[QUANT_SPEC_STR_MAX + 32];
        if (!a) {
            const int grouped =
                !p->u[u].layer->mx_gemm && p->arith && p->arith[u].acc.kind == QUANT_ACC_FLOAT32;
            printf("        %-12s | %-28s | float32 | float32 | float32\n", p->u[u].layer->name,
                   grouped ? "float32 (grouped conv)" : "float32");
            continue;
        }
        printf("        %-12s | %-28s", p->u[u].layer->name, quant_acc_str(a, buf, sizeof buf));
        for (int g = 0; g < 3; g++) printf(" | %s", on[g] ? "model" : "float32");
        printf("\n");
    }
    printf("        (model: the GEMM sums as its accumulator says; exact and int need both "
           "operands on fixed-point grids (weight, input, grad_output roles); float32 "
           "otherwise; doc/numerics.md, \"Accumulators\")\n");
}

/* The values the auto settings of [quantization] and [reference] took for this model and
 * policy, one line per section (experiments/report.py ablation reads them). */
static void print_resolved(const struct adapt_config *cfg, const struct adapt_precision *p)
{
    const int adapt = cfg->policy.name == ADAPT_CONFIG_POLICY_ADAPT;
    printf("resolved: [quantization] ste = %s, round_logits = %s",
           p->ste == ADAPT_STE_SATURATING ? "saturating" : "plain",
           p->round_out[p->net->nnodes - 1] ? "true" : "false");
    if (adapt) printf(", lb_update = %s", adapt_config_lb_window(cfg) ? "window" : "step");
    printf("\n");
    if (!adapt) return;
    printf("resolved: [reference]");
    for (int s = 0; s < ADAPT_REF_N; s++)
        printf("%s %s = %s", s ? "," : "", adapt_config_reference_key(s),
               adapt_config_reference(cfg, s) ? "on" : "off");
    printf("\n");
}

enum adapt_status adapt_train_check(const struct adapt_config *cfg,
                                    const struct adapt_train_opts *opts, int estimate_steps)
{
    struct train_run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.opts = opts;
    enum adapt_status st;
    long eval_step;
#ifdef _OPENMP
    if (cfg->run.threads > 0) omp_set_num_threads(cfg->run.threads);
#endif
    if ((st = train_device_check(cfg)) || (st = train_setup_model(&r, &eval_step)) ||
        (st = train_setup_training(&r)) || (st = train_check_records(&r)))
        goto free_run;
    const char *path =
        cfg->data.path[0] ? cfg->data.path : adapt_dataset_default_path(train_dataset_name(cfg));
    printf("data:   %s from %s: %d train + %d validation images (of the training file's %d), "
           "%d test, %d classes, %d x %d x %d input\n",
           train_dataset_name(cfg), path, r.ho.n_train, r.ho.n_val, r.train_file_n, r.test.n,
           r.test.classes, r.test.c, r.test.h, r.test.w);
    printf("policy: %s, %d precision units: checked against the model\n",
           adapt_config_enum_str(cfg, "policy", "name"), r.pol->prec ? r.pol->prec->nunits : 0);
    if (r.pol->prec) print_resolved(cfg, r.pol->prec);
    if (r.pol->prec && adapt_config_roles_set(cfg)) print_roles(r.pol->prec);
    if (r.pol->prec && adapt_config_arith_set(cfg)) print_arith(r.pol->prec);
    if (adapt_policy_comp_needs_search(r.pol) && (st = train_print_search_space(&r))) goto free_run;
    if (estimate_steps > 0) st = estimate(&r, 2, estimate_steps);
free_run:
    train_run_free(&r);
    return st;
}
