/* src/train/run_dir.c: output directory, trace records and checkpoints of a run. */
#include "src/train/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/policy/precision.h"
#include "src/base/fileio.h"
#include "src/base/safetensors.h"
#include "src/trace/trace.h"

#define CKPT_FORMAT "adapt-sim checkpoint 1"

static const char *run_files[] = {"config.ini", "trace.jsonl", "model.safetensors",
                                  "optim.safetensors", "checkpoint"};

static enum adapt_status join(char *buf, size_t n, const char *dir, const char *file)
{
    if ((size_t)snprintf(buf, n, "%s/%s", dir, file) >= n)
        return ADAPT_ERROR(ADAPT_ERANGE, "output path too long: %s/%s", dir, file);
    return ADAPT_OK;
}

/* mkdir -p */
static enum adapt_status make_dirs(const char *path)
{
    char tmp[ADAPT_RUN_PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp)
        return ADAPT_ERROR(ADAPT_ERANGE, "output directory path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return ADAPT_ERROR(ADAPT_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return ADAPT_ERROR(ADAPT_EIO, "cannot create output directory %s: %s", tmp, strerror(errno));
    return ADAPT_OK;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Checkpoints: each is a directory "ckpt-<epoch>" holding model.safetensors
 * and optim.safetensors, published by pointing the link "checkpoint" at it
 * (one rename). model.safetensors and optim.safetensors in the run directory
 * are links through "checkpoint", so they always name one complete checkpoint. */
#define CKPT_LINK "checkpoint"
#define CKPT_PREFIX "ckpt-"

/* The published checkpoint's directory name ("" when none). */
static enum adapt_status published_checkpoint(const struct adapt_run_io *io, char *name, size_t n)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    name[0] = '\0';
    if ((st = join(p, sizeof p, io->out_dir, CKPT_LINK))) return st;
    ssize_t len = readlink(p, name, n);
    if (len < 0) {
        if (errno == ENOENT) return ADAPT_OK;
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the link: %s", p, strerror(errno));
    }
    if ((size_t)len >= n || strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) ||
        memchr(name, '/', (size_t)len)) {
        name[len < (ssize_t)n ? len : (ssize_t)n - 1] = '\0';
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: points at '%s', expected a %s<epoch> directory "
                           "beside it", p, name, CKPT_PREFIX);
    }
    name[len] = '\0';
    return ADAPT_OK;
}

/* Makes model.safetensors and optim.safetensors links through "checkpoint"
 * (once per run directory; again after an interruption). */
static enum adapt_status link_files(const struct adapt_run_io *io)
{
    static const char *const files[] = {"model.safetensors", "optim.safetensors"};
    char p[ADAPT_RUN_PATH_MAX], target[64], cur[64];
    enum adapt_status st;
    for (int i = 0; i < 2; i++) {
        snprintf(target, sizeof target, CKPT_LINK "/%s", files[i]);
        if ((st = join(p, sizeof p, io->out_dir, files[i]))) return st;
        ssize_t n = readlink(p, cur, sizeof cur - 1);
        if (n >= 0 && (cur[n] = '\0', !strcmp(cur, target))) continue;
        if ((st = adapt_atomic_symlink(target, p))) return st;
    }
    return ADAPT_OK;
}

/* Removes temporaries and the checkpoint directories other than the published
 * one (all of them when `all`). */
static enum adapt_status remove_leftovers(const struct adapt_run_io *io, int all)
{
    char keep[64], p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if ((st = published_checkpoint(io, keep, sizeof keep))) {
        if (!all) return st;
    }
    if (all) keep[0] = '\0';
    if ((st = adapt_fileio_remove_tmp(io->out_dir, NULL))) return st;
    DIR *d = opendir(io->out_dir);
    if (!d)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot list the directory: %s", io->out_dir,
                           strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, CKPT_PREFIX, strlen(CKPT_PREFIX)) || !strcmp(e->d_name, keep))
            continue;
        if ((st = join(p, sizeof p, io->out_dir, e->d_name))) break;
        if ((st = adapt_fileio_remove_dir(p))) break;
    }
    closedir(d);
    if (st == ADAPT_OK && all) {
        if ((st = join(p, sizeof p, io->out_dir, CKPT_LINK))) return st;
        unlink(p);
    }
    return st;
}

/* Refuses an existing run directory unless resuming or forced; creates it
 * and checks that it is writable. */
static enum adapt_status prepare_dir(struct adapt_run_io *io, const struct adapt_train_opts *opts)
{
    struct stat sb;
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    int exists = stat(io->out_dir, &sb) == 0;
    if (exists && !S_ISDIR(sb.st_mode))
        return ADAPT_ERROR(ADAPT_EEXIST, "output path %s exists and is not a directory",
                           io->out_dir);
    if (opts->resume) {
        if (!exists)
            return ADAPT_ERROR(ADAPT_ENOENT, "--resume: output directory %s does not exist",
                               io->out_dir);
        if ((st = join(p, sizeof p, io->out_dir, "config.ini"))) return st;
        if (!file_exists(p))
            return ADAPT_ERROR(ADAPT_ENOENT, "--resume: %s is missing (no run to resume)", p);
    } else if (exists) {
        int has_run = 0;
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
            if ((st = join(p, sizeof p, io->out_dir, run_files[i]))) return st;
            struct stat lsb;
            if (lstat(p, &lsb) == 0) has_run = 1;
        }
        if (has_run && !opts->force)
            return ADAPT_ERROR(ADAPT_EEXIST,
                               "output directory %s already holds a run; use --resume to "
                               "continue it, --force to replace it, or --out for another directory",
                               io->out_dir);
    } else if ((st = make_dirs(io->out_dir))) {
        return st;
    }
    /* Writable? */
    if ((st = join(p, sizeof p, io->out_dir, ".adapt-write-test"))) return st;
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return ADAPT_ERROR(ADAPT_EIO, "output directory %s is not writable: %s", io->out_dir,
                           strerror(errno));
    close(fd);
    unlink(p);
    if (opts->force && !opts->resume)
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
            if ((st = join(p, sizeof p, io->out_dir, run_files[i]))) return st;
            unlink(p);
        }
    /* what an interrupted run left: temporaries, unpublished checkpoints;
     * with --force every checkpoint */
    return remove_leftovers(io, opts->force && !opts->resume);
}

static enum adapt_status write_config(struct adapt_run_io *io, const struct adapt_config *cfg)
{
    char p[ADAPT_RUN_PATH_MAX];
    struct adapt_atomic a;
    enum adapt_status st;
    if ((st = join(p, sizeof p, io->out_dir, "config.ini"))) return st;
    if ((st = adapt_atomic_open(&a, p))) return st;
    if ((st = adapt_config_print(cfg, a.f, 0))) {
        adapt_atomic_abort(&a);
        return st;
    }
    return adapt_atomic_commit(&a);
}

static enum adapt_status write_header(struct adapt_run_io *io, const struct adapt_config *cfg,
                                      const struct adapt_net *net,
                                      const struct adapt_run_info *info)
{
    struct adapt_trace_layer *layers = calloc((size_t)net->nnodes, sizeof *layers);
    struct adapt_trace_unit *units = calloc((size_t)net->nunits + 1, sizeof *units);
    const char **ov = calloc((size_t)cfg->n_overrides + 1, sizeof *ov);
    json_t *cj = adapt_config_to_json(cfg);
    enum adapt_status st = ADAPT_OK;
    if (!layers || !units || !ov || !cj) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot build the trace header");
        goto out;
    }
    int u = 0;
    for (int i = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        struct adapt_trace_layer *t = &layers[i];
        t->name = l->name;
        t->kind = l->ops->kind;
        t->in_ndim = t->out_ndim = 3;
        for (int d = 0; d < 3; d++) {
            t->in[d] = l->in_dim[0][d];
            t->out[d] = l->out_dim[d];
        }
        for (int p = 0; p < l->nparam; p++)
            if (l->param[p].role != ADAPT_PARAM_BUFFER) t->params += (int64_t)l->param[p].value.numel;
        t->macs = l->macs;
        t->elementwise = l->elementwise;
        t->unit = l->is_unit ? u : -1;
        t->k = l->k; /* conv and pool window geometry */
        t->stride = l->stride;
        t->pad = l->pad;
        if (l->is_unit) {
            units[u].name = l->name;
            units[u].layer = i;
            units[u].weights = (int64_t)l->param[0].value.numel;
            units[u].macs = l->macs;
            u++;
        }
    }
    for (int i = 0; i < cfg->n_overrides; i++) ov[i] = cfg->overrides[i];
    struct adapt_trace_header h;
    memset(&h, 0, sizeof h);
    h.seed = cfg->run.seed;
#ifdef _OPENMP
    h.threads = omp_get_max_threads();
#else
    h.threads = 1;
#endif
    h.policy = adapt_config_enum_str(cfg, "policy", "name");
    h.config = cj;
    h.config_file = cfg->file;
    h.n_overrides = cfg->n_overrides;
    h.overrides = ov;
    h.dataset.name = info->dataset;
    h.dataset.train = info->n_train;
    h.dataset.val = info->n_val;
    h.dataset.test = info->n_test;
    h.dataset.classes = net->classes;
    h.model.name = net->name;
    memcpy(h.model.input, net->in_chw, sizeof h.model.input);
    h.model.classes = net->classes;
    h.model.params = net->nparams_trainable;
    h.model.macs = net->macs;
    h.model.n_layers = net->nnodes;
    h.model.layers = layers;
    h.n_units = net->nunits;
    h.units = units;
    st = adapt_trace_write_header(io->tw, &h);
    if (st == ADAPT_OK) st = adapt_trace_flush(io->tw);
out:
    json_decref(cj);
    free(ov);
    free(units);
    free(layers);
    return st;
}

static enum adapt_status read_meta_i64(const struct adapt_safetensors *f, const char *key,
                                       int64_t *v)
{
    const char *s = adapt_safetensors_meta_get(f, key);
    char *end;
    if (!s) return ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata '%s' missing", f->path, key);
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata '%s' = '%s' is not an integer", f->path,
                           key, s);
    *v = x;
    return ADAPT_OK;
}

static enum adapt_status read_meta_f64(const struct adapt_safetensors *f, const char *key, double *v)
{
    const char *s = adapt_safetensors_meta_get(f, key);
    char *end;
    if (!s) return ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata '%s' missing", f->path, key);
    *v = strtod(s, &end);
    if (*end || end == s)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata '%s' = '%s' is not a number", f->path,
                           key, s);
    return ADAPT_OK;
}

static void param_shape(const struct adapt_param *p, int64_t *shape)
{
    for (int d = 0; d < p->value.ndim; d++) shape[d] = p->value.dim[d];
}

static enum adapt_status load_weights_from(struct adapt_net *net, const struct adapt_safetensors *f)
{
    enum adapt_status st;
    for (int p = 0; p < net->nparam; p++) {
        const struct adapt_param *pp = net->param[p];
        int64_t shape[ADAPT_MAX_DIMS];
        param_shape(pp, shape);
        if ((st = adapt_safetensors_copy(f, pp->name, ADAPT_ST_F32, pp->value.ndim, shape,
                                         pp->value.data)))
            return st;
    }
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        if (!l->counter) continue;
        char name[ADAPT_NAME_MAX + 32];
        snprintf(name, sizeof name, "%s.num_batches_tracked", l->name);
        /* optional: PyTorch files saved without buffers' counters load as 0 */
        if (adapt_safetensors_find(f, name)) {
            int64_t shape[1] = {0};
            if ((st = adapt_safetensors_copy(f, name, ADAPT_ST_I64, 0, shape, l->counter)))
                return st;
        }
    }
    return ADAPT_OK;
}

enum adapt_status adapt_run_io_load_weights(struct adapt_net *net, const char *path)
{
    struct adapt_safetensors *f = NULL;
    enum adapt_status st = adapt_safetensors_load(&f, path);
    if (st) return st;
    st = load_weights_from(net, f);
    adapt_safetensors_free(f);
    return st;
}

static enum adapt_status load_checkpoint(struct adapt_run_io *io, struct adapt_net *net,
                                         struct adapt_sgd *opt, struct adapt_sched *sched,
                                         struct adapt_policy *pol, int *epoch, long *step)
{
    struct adapt_safetensors *m = NULL, *o = NULL;
    enum adapt_status st;
    int64_t e_m, e_o, s, steps, last_epoch, patience_bad, cooldown_counter;
    double lr, best;
    if ((st = adapt_safetensors_load(&m, io->model_path))) goto out;
    if ((st = adapt_safetensors_load(&o, io->optim_path))) goto out;
    const char *fmt = adapt_safetensors_meta_get(m, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: not an adapt-sim checkpoint (format '%s')",
                         io->model_path, fmt ? fmt : "none");
        goto out;
    }
    if ((st = read_meta_i64(m, "epoch", &e_m)) || (st = read_meta_i64(o, "epoch", &e_o)) ||
        (st = read_meta_i64(m, "step", &s)) ||
        (st = read_meta_i64(o, "sgd_steps", &steps)) || (st = read_meta_f64(o, "lr", &lr)) ||
        (st = read_meta_f64(o, "sched_best", &best)) ||
        (st = read_meta_i64(o, "sched_last_epoch", &last_epoch)) ||
        (st = read_meta_i64(o, "sched_num_bad", &patience_bad)) ||
        (st = read_meta_i64(o, "sched_cooldown_counter", &cooldown_counter)))
        goto out;
    /* every number against its range before anything is set from it */
    const char *bad = NULL, *mp = io->model_path, *op = io->optim_path;
    if (e_m < 0 || e_m > INT_MAX) bad = "epoch (expected 0 .. 2147483647)";
    else if (s < 0) bad = "step (expected >= 0)";
    if (bad) {
        st = ADAPT_ERROR(ADAPT_ERANGE, "%s: metadata %s", mp, bad);
        goto out;
    }
    if (steps < 0 || steps > s) bad = "sgd_steps (expected 0 .. the model's step)";
    else if (!isfinite(lr) || lr < 0) bad = "lr (expected a finite number >= 0)";
    else if (isnan(best)) bad = "sched_best (expected a number)";
    else if (last_epoch < -1 || last_epoch > e_m)
        bad = "sched_last_epoch (expected -1 .. the epoch)";
    else if (patience_bad < 0 || patience_bad > e_m)
        bad = "sched_num_bad (expected 0 .. the epoch)";
    else if (cooldown_counter < 0 || cooldown_counter > INT_MAX)
        bad = "sched_cooldown_counter (expected 0 .. 2147483647)";
    if (bad) {
        st = ADAPT_ERROR(ADAPT_ERANGE, "%s: metadata %s", op, bad);
        goto out;
    }
    const char *mname = adapt_safetensors_meta_get(m, "model");
    if (!mname || strcmp(mname, net->name)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: checkpoint of model '%s', the run uses '%s'", mp,
                         mname ? mname : "none", net->name);
        goto out;
    }
    if (e_m != e_o) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s (epoch %" PRId64 ") and %s (epoch %" PRId64
                         ") do not belong together", io->model_path, e_m, io->optim_path, e_o);
        goto out;
    }
    if ((st = load_weights_from(net, m))) goto out;
    for (int k = 0; k < opt->nbuf; k++) {
        const struct adapt_param *pp = opt->par[k];
        int64_t shape[ADAPT_MAX_DIMS];
        param_shape(pp, shape);
        if ((st = adapt_safetensors_copy(o, pp->name, ADAPT_ST_F32, pp->value.ndim, shape,
                                         opt->buf[k])))
            goto out;
    }
    const char *pname = adapt_safetensors_meta_get(o, "policy");
    if (!pname || strcmp(pname, pol->type->name)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: checkpoint of policy '%s', the run uses '%s'",
                         io->optim_path, pname ? pname : "none", pol->type->name);
        goto out;
    }
    if (pol->type->load) {
        const char *js = adapt_safetensors_meta_get(o, "policy_state");
        json_error_t jerr;
        json_t *j = js ? json_loads(js, 0, &jerr) : NULL;
        if (!j) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: policy_state missing or not JSON", io->optim_path);
            goto out;
        }
        pol->epoch = (int)e_m;
        st = pol->type->load(pol, j, o);
        json_decref(j);
        if (st) goto out;
    }
    opt->steps = (long)steps;
    sched->lr = lr;
    sched->best = best;
    sched->last_epoch = (int)last_epoch;
    sched->num_bad = (int)patience_bad;
    sched->cooldown_counter = (int)cooldown_counter;
    *epoch = (int)e_m;
    *step = (long)s;
out:
    adapt_safetensors_free(o);
    adapt_safetensors_free(m);
    return st;
}

/* On resume the configuration must be the one the run started with, except
 * for the number of epochs (a run may be extended) and the output path. */
static enum adapt_status check_same_config(struct adapt_run_io *io, const struct adapt_config *cfg)
{
    char p[ADAPT_RUN_PATH_MAX], diff[128];
    enum adapt_status st;
    if ((st = join(p, sizeof p, io->out_dir, "config.ini"))) return st;
    static struct adapt_config old, cur;
    adapt_config_init(&old);
    if ((st = adapt_config_load(&old, p))) return st;
    cur = *cfg;
    cur.train.epochs = old.train.epochs;
    memcpy(cur.run.out, old.run.out, sizeof cur.run.out);
    if (!adapt_config_equal(&old, &cur, diff, sizeof diff))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "--resume: %s differs from the run's configuration %s (first "
                           "difference: %s); only train.epochs may change",
                           cfg->file[0] ? cfg->file : "the configuration", p, diff);
    return ADAPT_OK;
}

enum adapt_status adapt_run_io_open(struct adapt_run_io *io, const struct adapt_config *cfg,
                                    const struct adapt_train_opts *opts, struct adapt_net *net,
                                    struct adapt_sgd *opt, struct adapt_sched *sched,
                                    struct adapt_policy *pol, const struct adapt_run_info *info,
                                    int *start_epoch, long *start_step)
{
    enum adapt_status st;
    memset(io, 0, sizeof *io);
    io->cfg = cfg;
    io->dataset = info->dataset;
    if ((size_t)snprintf(io->out_dir, sizeof io->out_dir, "%s", opts->out_dir) >= sizeof io->out_dir)
        return ADAPT_ERROR(ADAPT_ERANGE, "output directory path too long: %s", opts->out_dir);
    if ((st = join(io->trace_path, sizeof io->trace_path, io->out_dir, "trace.jsonl")) ||
        (st = join(io->model_path, sizeof io->model_path, io->out_dir, "model.safetensors")) ||
        (st = join(io->optim_path, sizeof io->optim_path, io->out_dir, "optim.safetensors")))
        return st;
    if ((st = prepare_dir(io, opts))) return st;
    *start_epoch = 0;
    *start_step = 0;
    if (opts->resume) {
        if ((st = check_same_config(io, cfg))) return st;
        char ckpt[64];
        struct stat sb;
        if ((st = published_checkpoint(io, ckpt, sizeof ckpt))) return st;
        if (ckpt[0] && (st = link_files(io))) return st;
        if (!ckpt[0] && lstat(io->model_path, &sb) != 0 && lstat(io->optim_path, &sb) != 0) {
            /* stopped before its first checkpoint: the run starts again */
            if ((st = write_config(io, cfg))) return st;
            if ((st = adapt_trace_writer_create(&io->tw, io->trace_path))) return st;
            return write_header(io, cfg, net, info);
        }
        if ((st = load_checkpoint(io, net, opt, sched, pol, start_epoch, start_step))) return st;
        if ((st = write_config(io, cfg))) return st;
        /* keep the trace up to the checkpointed epoch's record */
        if (*start_epoch > 0 &&
            (st = adapt_trace_truncate_after_epoch(io->trace_path, *start_epoch - 1)))
            return st;
        return adapt_trace_writer_append(&io->tw, io->trace_path, -1);
    }
    if ((st = write_config(io, cfg))) return st;
    if ((st = adapt_trace_writer_create(&io->tw, io->trace_path))) return st;
    return write_header(io, cfg, net, info);
}

enum adapt_status adapt_run_io_step(struct adapt_run_io *io, const struct adapt_policy *pol,
                                    long step, int epoch, double lr, double loss, int accum)
{
    const int nu = pol->net->nunits;
    struct adapt_trace_unit_state us[64];
    struct adapt_trace_unit_state *u = nu <= 64 ? us : malloc(sizeof *u * (size_t)nu);
    if (!u) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot write a trace step");
    for (int i = 0; i < nu; i++) adapt_policy_unit_state(pol, i, &u[i]);
    struct adapt_trace_step s;
    memset(&s, 0, sizeof s);
    s.step = step;
    s.epoch = epoch;
    s.lr = lr;
    s.loss = loss;
    s.strategy = pol->strategy;
    s.n_units = nu;
    s.units = u;
    s.n_events = pol->n_events;
    s.events = pol->events;
    s.accum = accum;
    s.overflow = pol->overflow;
    enum adapt_status st = adapt_trace_write_step(io->tw, &s);
    if (u != us) free(u);
    return st;
}

enum adapt_status adapt_run_io_epoch(struct adapt_run_io *io, const struct adapt_run_epoch *ep)
{
    struct adapt_trace_epoch e = {ep->epoch,     ep->step,    ep->lr,     ep->train_loss,
                                  ep->train_acc, ep->val_loss, ep->val_acc, ep->wall_s,
                                  ep->images_per_s};
    enum adapt_status st = adapt_trace_write_epoch(io->tw, &e);
    return st ? st : adapt_trace_flush(io->tw);
}

/* The per-unit number formats the weight copies were last rounded in, as a
 * JSON array (one object per precision unit: its layer name, "active", and
 * the quant_spec fields); "[]" for a policy without precision units. */
static char *unit_formats_json(const struct adapt_policy *pol)
{
    json_t *a = json_array();
    const struct adapt_precision *pr = pol->prec;
    for (int u = 0; a && pr && u < pr->nunits; u++) {
        const struct adapt_unit_prec *up = &pr->u[u];
        char txt[64];
        json_t *o = json_pack("{s:s,s:b,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "unit",
                              up->layer->name, "active", up->active, "spec",
                              up->active ? quant_spec_str(&up->spec, txt, sizeof txt) : "float32",
                              "format", (int)up->spec.format, "wl", up->spec.wl, "fl",
                              up->spec.fl, "exp_bits", up->spec.exp_bits, "man_bits",
                              up->spec.man_bits, "block", (int)up->spec.block, "tie",
                              (int)up->spec.tie, "overflow", (int)up->spec.overflow, "subnormals",
                              up->spec.subnormals);
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    char *js = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return js;
}

enum adapt_status adapt_run_io_load_formats(struct adapt_policy *pol, const char *path,
                                            long *step, FILE *report)
{
    struct adapt_safetensors *f = NULL;
    enum adapt_status st = adapt_safetensors_load(&f, path);
    if (st) return st;
    *step = 0;
    const char *js = adapt_safetensors_meta_get(f, "unit_formats");
    const char *pname = adapt_safetensors_meta_get(f, "policy");
    struct adapt_precision *pr = pol->prec;
    if (!js) {
        if (pr && report)
            fprintf(report, "formats: %s stores none; the configuration's start formats\n", path);
        goto out;
    }
    if (pname && strcmp(pname, pol->type->name) && report)
        fprintf(report, "note: %s was trained with policy %s; evaluating with policy %s (the "
                        "configuration's)\n", path, pname, pol->type->name);
    json_error_t jerr;
    json_t *a = json_loads(js, 0, &jerr);
    if (!a || !json_is_array(a)) {
        json_decref(a);
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata 'unit_formats' is not a JSON array", path);
        goto out;
    }
    int64_t s64 = 0;
    if ((st = read_meta_i64(f, "step", &s64))) {
        json_decref(a);
        goto out;
    }
    if (!pr || (pname && strcmp(pname, pol->type->name))) {
        json_decref(a);
        goto out; /* float32 evaluation, or formats of another policy: not applied */
    }
    if ((int)json_array_size(a) != pr->nunits) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata 'unit_formats' has %zu units, the model %d",
                         path, json_array_size(a), pr->nunits);
        json_decref(a);
        goto out;
    }
    if (report) fprintf(report, "formats (%s, step %" PRId64 "):", path, s64);
    for (int u = 0; u < pr->nunits; u++) {
        json_t *o = json_array_get(a, (size_t)u);
        const char *name = NULL;
        int active = 0, format = 0, block = 0, tie = 0, overflow = 0;
        struct quant_spec sp;
        memset(&sp, 0, sizeof sp);
        if (json_unpack(o, "{s:s,s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "unit", &name,
                        "active", &active, "format", &format, "wl", &sp.wl, "fl", &sp.fl,
                        "exp_bits", &sp.exp_bits, "man_bits", &sp.man_bits, "block", &block,
                        "tie", &tie, "overflow", &overflow, "subnormals", &sp.subnormals) ||
            strcmp(name, pr->u[u].layer->name)) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s: metadata 'unit_formats' entry %d is malformed or not unit %s",
                             path, u, pr->u[u].layer->name);
            break;
        }
        sp.format = (enum quant_format)format;
        sp.block = (enum quant_block)block;
        sp.tie = (enum quant_tie)tie;
        sp.overflow = (enum quant_overflow)overflow;
        char txt[64];
        if (active) {
            if ((st = quant_spec_check(&sp))) {
                st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: unit %s: %s", path, name,
                                 adapt_error_message());
                break;
            }
            adapt_precision_set(pr, u, &sp);
        } else {
            adapt_precision_set_float(pr, u);
        }
        if (report)
            fprintf(report, " %s %s", name,
                    active ? quant_spec_str(&sp, txt, sizeof txt) : "float32");
    }
    if (report) fputc('\n', report);
    json_decref(a);
    if (st == ADAPT_OK) *step = (long)s64;
out:
    adapt_safetensors_free(f);
    return st;
}

/* Points "checkpoint" at the complete directory ckpt, makes the run
 * directory's model and optimizer files links through it, and removes the
 * previous checkpoint. */
static enum adapt_status publish_checkpoint(const struct adapt_run_io *io, const char *ckpt,
                                            const char *old_ckpt)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if ((st = join(p, sizeof p, io->out_dir, ckpt)) || (st = adapt_fileio_sync_dir(p)) ||
        (st = join(p, sizeof p, io->out_dir, CKPT_LINK)) || (st = adapt_atomic_symlink(ckpt, p)) ||
        (st = link_files(io)))
        return st;
    if (old_ckpt[0]) {
        if ((st = join(p, sizeof p, io->out_dir, old_ckpt))) return st;
        return adapt_fileio_remove_dir(p);
    }
    return ADAPT_OK;
}

enum adapt_status adapt_run_io_checkpoint(struct adapt_run_io *io, const struct adapt_net *net,
                                          const struct adapt_sgd *opt,
                                          const struct adapt_sched *sched,
                                          const struct adapt_policy *pol, int epochs_done,
                                          long step)
{
    enum adapt_status st;
    if ((st = adapt_trace_flush(io->tw))) return st;
    int nbn = 0;
    for (int i = 0; i < net->nnodes; i++) nbn += net->nodes[i].layer->counter != NULL;
    int nt = net->nparam + nbn;
    const int pcap = 4096;
    struct adapt_safetensors_tensor *t = calloc((size_t)nt + opt->nbuf + pcap + 1, sizeof *t);
    char (*names)[ADAPT_NAME_MAX + 32] = calloc((size_t)nbn + 1, sizeof *names);
    char (*pnames)[96] = calloc((size_t)pcap, sizeof *pnames);
    char *pstate = NULL;
    if (!t || !names || !pnames) {
        free(t);
        free(names);
        free(pnames);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot write checkpoint");
    }
    int k = 0, b = 0;
    for (int i = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        for (int p = 0; p < l->nparam; p++) {
            const struct adapt_param *pp = &l->param[p];
            t[k].name = pp->name;
            t[k].dtype = ADAPT_ST_F32;
            t[k].ndim = pp->value.ndim;
            param_shape(pp, t[k].shape);
            t[k].data = pp->value.data;
            k++;
        }
        if (l->counter) {
            snprintf(names[b], sizeof names[b], "%s.num_batches_tracked", l->name);
            t[k].name = names[b++];
            t[k].dtype = ADAPT_ST_I64;
            t[k].ndim = 0;
            t[k].data = l->counter;
            k++;
        }
    }
    char s_epoch[32], s_step[32], s_seed[32], s_steps[32], s_lr[40], s_best[40],
        s_le[32], s_bad[32], s_cd[32], s_rng[160];
    snprintf(s_epoch, sizeof s_epoch, "%d", epochs_done);
    snprintf(s_step, sizeof s_step, "%ld", step);
    snprintf(s_seed, sizeof s_seed, "%" PRId64, (int64_t)io->cfg->run.seed);
    snprintf(s_rng, sizeof s_rng,
             "philox4x32-10 counter-based: seed %s; streams keyed by epoch %d and step %ld",
             s_seed, epochs_done, step);
    char *formats = unit_formats_json(pol);
    if (!formats) {
        free(t);
        free(names);
        free(pnames);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot write checkpoint");
    }
    struct adapt_safetensors_meta mm[] = {
        {"format", CKPT_FORMAT}, {"model", net->name},      {"dataset", io->dataset},
        {"epoch", s_epoch},      {"step", s_step},          {"seed", s_seed},
        {"rng", s_rng},          {"policy", pol->type->name}, {"unit_formats", formats}};
    char old_ckpt[64], ckpt[64], dir[ADAPT_RUN_PATH_MAX], path[ADAPT_RUN_PATH_MAX];
    snprintf(ckpt, sizeof ckpt, CKPT_PREFIX "%06d", epochs_done);
    if ((st = published_checkpoint(io, old_ckpt, sizeof old_ckpt))) goto free_all;
    if (!strcmp(old_ckpt, ckpt)) {
        st = ADAPT_ERROR(ADAPT_EEXIST, "%s/%s: the checkpoint of epoch %d is already published",
                         io->out_dir, ckpt, epochs_done);
        goto free_all;
    }
    if ((st = join(dir, sizeof dir, io->out_dir, ckpt)) || (st = adapt_fileio_remove_dir(dir)))
        goto free_all;
    if (mkdir(dir, 0777) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "cannot create the checkpoint directory %s: %s", dir,
                         strerror(errno));
        goto free_all;
    }
    if ((st = join(path, sizeof path, dir, "model.safetensors"))) goto free_all;
    st = adapt_safetensors_write(path, t, k, mm, (int)(sizeof mm / sizeof mm[0]));
    if (st == ADAPT_OK) {
        for (int j = 0; j < opt->nbuf; j++) {
            const struct adapt_param *pp = opt->par[j];
            t[j].name = pp->name;
            t[j].dtype = ADAPT_ST_F32;
            t[j].ndim = pp->value.ndim;
            param_shape(pp, t[j].shape);
            t[j].data = opt->buf[j];
        }
        snprintf(s_steps, sizeof s_steps, "%ld", opt->steps);
        snprintf(s_lr, sizeof s_lr, "%.17g", sched->lr);
        snprintf(s_best, sizeof s_best, "%.17g", sched->best);
        snprintf(s_le, sizeof s_le, "%d", sched->last_epoch);
        snprintf(s_bad, sizeof s_bad, "%d", sched->num_bad);
        snprintf(s_cd, sizeof s_cd, "%d", sched->cooldown_counter);
        int np = pol->type->save_tensors ? pol->type->save_tensors(pol, t + opt->nbuf, pcap, pnames) : 0;
        json_t *pj = pol->type->save_json ? pol->type->save_json(pol) : json_object();
        pstate = pj ? json_dumps(pj, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(pj);
        struct adapt_safetensors_meta om[] = {{"format", CKPT_FORMAT},
                                              {"epoch", s_epoch},
                                              {"sgd_steps", s_steps},
                                              {"lr", s_lr},
                                              {"sched_best", s_best},
                                              {"sched_last_epoch", s_le},
                                              {"sched_num_bad", s_bad},
                                              {"sched_cooldown_counter", s_cd},
                                              {"policy", pol->type->name},
                                              {"policy_state", pstate ? pstate : "{}"}};
        if ((st = join(path, sizeof path, dir, "optim.safetensors")) == ADAPT_OK)
            st = adapt_safetensors_write(path, t, opt->nbuf + np, om,
                                         (int)(sizeof om / sizeof om[0]));
    }
    if (st == ADAPT_OK) st = publish_checkpoint(io, ckpt, old_ckpt);
free_all:
    free(formats);
    free(pstate);
    free(pnames);
    free(names);
    free(t);
    return st;
}

enum adapt_status adapt_run_io_test(struct adapt_run_io *io, int epoch, double loss, double acc)
{
    struct adapt_trace_test t = {epoch, loss, acc};
    return adapt_trace_write_test(io->tw, &t);
}

enum adapt_status adapt_run_io_end(struct adapt_run_io *io, const char *status, double wall_s)
{
    struct adapt_trace_end e = {strcmp(status, "ok") ? ADAPT_TRACE_END_STOPPED : ADAPT_TRACE_END_OK,
                                wall_s};
    enum adapt_status st = adapt_trace_write_end(io->tw, &e);
    return st ? st : adapt_trace_flush(io->tw);
}

void adapt_run_io_close(struct adapt_run_io *io)
{
    adapt_trace_writer_close(io->tw);
    io->tw = NULL;
}
