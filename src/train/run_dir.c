/* src/train/run_dir.c: the output directory of a run, its config.ini and its trace records. */
#include "src/train/run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cblas.h>

#include "src/base/fileio.h"
#include "src/base/log.h"
#include "src/base/version.h"
#include "src/cuda/device.h"
#include "src/train/checkpoint.h"
#include "src/trace/trace.h"

static const char *run_files[] = {"config.ini", "trace.jsonl", "model.safetensors",
                                  "optim.safetensors", "checkpoint"};

enum adapt_status adapt_run_dir_join(char *buf, size_t n, const char *dir,
                                     const char *file)
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
        return ADAPT_ERROR(ADAPT_EIO, "cannot create output directory %s: %s", tmp,
                           strerror(errno));
    return ADAPT_OK;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

#define LOCK_FILE ".adapt-lock"

/* The process id that the holder of the lock file fd wrote into it: a holder writes it just
 * after it locks, over what a killed process may have left, so a number is taken only once the
 * process it names is alive; 0 when none shows within 0.2 s. */
static long lock_holder(int fd)
{
    for (int tries = 0; tries < 20; tries++) {
        char text[32];
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        if (n > 0) {
            text[n] = '\0';
            long pid = strtol(text, NULL, 10);
            if (adapt_process_alive(pid)) return pid;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Takes the directory's lock (d->out_dir exists): flock on .adapt-lock,
 * created when missing, with this process's id written into it for the
 * message another process prints when it is refused. */
static enum adapt_status lock_dir(struct adapt_run_dir *d)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, LOCK_FILE))) return st;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return ADAPT_ERROR(ADAPT_EIO, "output directory %s is not writable: cannot open %s: %s",
                           d->out_dir, p, strerror(errno));
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        int err = errno;
        long pid = err == EWOULDBLOCK ? lock_holder(fd) : 0;
        close(fd);
        if (err != EWOULDBLOCK)
            return ADAPT_ERROR(ADAPT_EIO, "cannot lock %s: %s", p, strerror(err));
        char who[48] = "another process";
        if (pid > 0) snprintf(who, sizeof who, "another process (pid %ld)", pid);
        return ADAPT_ERROR(ADAPT_EEXIST,
                           "output directory %s is in use: %s is running there (it holds %s); "
                           "wait for it to end, or use --out for another directory",
                           d->out_dir, who, p);
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
        int err = errno;
        close(fd);
        return ADAPT_ERROR(ADAPT_EIO, "output directory %s is not writable: %s: %s", d->out_dir,
                           p, strerror(err));
    }
    d->lock_fd = fd;
    d->locked = 1;
    return ADAPT_OK;
}

static void unlock_dir(struct adapt_run_dir *d)
{
    if (!d->locked) return;
    /* no process id left behind for a later holder's refused rival to read (best effort:
     * a holder writes its own id over whatever is there) */
    int cleared = ftruncate(d->lock_fd, 0);
    (void)cleared;
    close(d->lock_fd); /* drops the flock */
    d->locked = 0;
}

/* Locks d->out_dir (which exists), then refuses it for what it holds: --resume needs a run
 * there, a start without --resume or --force needs none. */
static enum adapt_status lock_and_check(struct adapt_run_dir *d,
                                        const struct adapt_run_dir_opts *opts)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    /* everything below looks at the directory as it is while this process holds it */
    if ((st = lock_dir(d))) return st;
    if (opts->resume) {
        if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, "config.ini"))) goto unlock;
        if (!file_exists(p)) {
            st = ADAPT_ERROR(ADAPT_ENOENT, "--resume: %s is missing (no run to resume)", p);
            goto unlock;
        }
    } else if (!opts->force) {
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
            if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, run_files[i]))) goto unlock;
            struct stat lsb;
            if (lstat(p, &lsb) == 0) {
                st = ADAPT_ERROR(ADAPT_EEXIST,
                                 "output directory %s already holds a run; use --resume to "
                                 "continue it, --force to replace it, or --out for another "
                                 "directory",
                                 d->out_dir);
                goto unlock;
            }
        }
    }
    return ADAPT_OK;
unlock:
    unlock_dir(d);
    return st;
}

enum adapt_status adapt_run_dir_claim(struct adapt_run_dir *d,
                                      const struct adapt_run_dir_opts *opts)
{
    struct stat sb;
    enum adapt_status st;
    memset(d, 0, sizeof *d);
    if ((size_t)snprintf(d->out_dir, sizeof d->out_dir, "%s", opts->out_dir) >= sizeof d->out_dir)
        return ADAPT_ERROR(ADAPT_ERANGE, "output directory path too long: %s", opts->out_dir);
    if ((st = adapt_run_dir_join(d->trace_path, sizeof d->trace_path, d->out_dir,
                                 "trace.jsonl")) ||
        (st = adapt_run_dir_join(d->model_path, sizeof d->model_path, d->out_dir,
                                 "model.safetensors")) ||
        (st = adapt_run_dir_join(d->optim_path, sizeof d->optim_path, d->out_dir,
                                 "optim.safetensors")))
        return st;
    if (stat(d->out_dir, &sb) != 0) {
        if (opts->resume)
            return ADAPT_ERROR(ADAPT_ENOENT, "--resume: output directory %s does not exist",
                               d->out_dir);
        return ADAPT_OK; /* created, and locked, by adapt_run_dir_open */
    }
    if (!S_ISDIR(sb.st_mode))
        return ADAPT_ERROR(ADAPT_EEXIST, "output path %s exists and is not a directory",
                           d->out_dir);
    return lock_and_check(d, opts);
}

/* On the claimed directory: with --force removes the old run's files, and removes what an
 * interrupted run left (temporaries, unpublished checkpoints; with --force every checkpoint). */
static enum adapt_status prepare_dir(struct adapt_run_dir *d, const struct adapt_run_dir_opts *opts)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if (opts->force && !opts->resume)
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
            if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, run_files[i]))) return st;
            unlink(p);
        }
    return adapt_ckpt_clean(d, opts->force && !opts->resume);
}

static enum adapt_status write_config(struct adapt_run_dir *d, const struct adapt_config *cfg)
{
    char p[ADAPT_RUN_PATH_MAX];
    struct adapt_atomic a;
    enum adapt_status st;
    if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, "config.ini"))) return st;
    if ((st = adapt_atomic_open(&a, p))) return st;
    if ((st = adapt_config_print(cfg, a.f, 0))) {
        adapt_atomic_abort(&a);
        return st;
    }
    return adapt_atomic_commit(&a);
}

/* The trace header of a run and the arrays it points into (owned; header_free releases). */
struct header {
    struct adapt_trace_header h;
    struct adapt_trace_layer *layers;
    char (*prec)[QUANT_SPEC_STR_MAX];
    struct adapt_trace_unit *units;
    const char **ov;
    json_t *cj;
    char roles[ADAPT_TRACE_ROLES][ADAPT_CONFIG_STR_MAX + 64];
    char cpu[128], blas[256], device[300];
};

/* The header's "build": the program and the machine running it. The BLAS line is OpenBLAS's
 * own (version, build options and the kernel set it picked for this CPU), since its float32
 * kernels, and so the last bits of a run, differ between kernel sets. */
static void build_fill(struct header *hd, const struct adapt_config *cfg)
{
    struct adapt_trace_header *h = &hd->h;
    h->build.commit = adapt_version_commit();
    h->build.compiler = adapt_version_compiler();
    h->build.cpu = adapt_version_cpu_name(hd->cpu, sizeof hd->cpu);
    h->build.isa = adapt_version_cpu_level();
    const char *b = openblas_get_config();
    h->build.blas = adapt_version_line(hd->blas, sizeof hd->blas, b ? b : "unknown");
    snprintf(hd->device, sizeof hd->device, "cpu");
    if (cfg->run.device == ADAPT_CONFIG_DEVICE_CUDA) {
        char gpu[256] = "";
        if (cfg->run.gpu == 0 && adapt_cuda_device_count(gpu, sizeof gpu) > 0)
            snprintf(hd->device, sizeof hd->device, "cuda %d: %s", cfg->run.gpu, gpu);
        else
            snprintf(hd->device, sizeof hd->device, "cuda %d", cfg->run.gpu);
    }
    h->build.device = hd->device;
}

static void header_free(struct header *hd)
{
    json_decref(hd->cj);
    free(hd->prec);
    free(hd->ov);
    free(hd->units);
    free(hd->layers);
}

static enum adapt_status header_build(struct header *hd, const struct adapt_config *cfg,
                                      const struct adapt_net *net,
                                      const struct adapt_policy *pol,
                                      const struct adapt_run_info *info)
{
    memset(hd, 0, sizeof *hd);
    struct adapt_trace_layer *layers = hd->layers = calloc((size_t)net->nnodes, sizeof *layers);
    char (*prec)[QUANT_SPEC_STR_MAX] = hd->prec = calloc((size_t)net->nnodes + 1, sizeof *prec);
    struct adapt_trace_unit *units = hd->units = calloc((size_t)net->nunits + 1, sizeof *units);
    const char **ov = hd->ov = calloc((size_t)cfg->n_overrides + 1, sizeof *ov);
    json_t *cj = hd->cj = adapt_config_to_json(cfg);
    if (!layers || !units || !ov || !cj || !prec) {
        header_free(hd);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot build the trace header");
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
            if (l->param[p].role != ADAPT_PARAM_BUFFER)
                t->params += (int64_t)l->param[p].value.numel;
        t->macs = l->macs;
        t->elementwise = l->elementwise;
        t->unit = l->is_unit ? u : -1;
        t->k = l->k; /* conv and pool window geometry */
        t->stride = l->stride;
        t->pad = l->pad;
        t->groups = l->groups > 0 ? l->groups : 1;
        t->dilation = l->dilation > 0 ? l->dilation : 1;
        /* graph precision propagation: the layer's set and resolved precision */
        if (pol && pol->gamp &&
            (t->precision = adapt_policy_layer_precision(pol, i, prec[i], sizeof prec[i]))) {
            if (pol->gamp->set) { /* graph propagation (a comp plan has no sets) */
                t->graph_set = adapt_gamp_set_names[pol->gamp->set[i]];
                t->graph_source = adapt_gamp_source_names[pol->gamp->source[i]];
            }
            t->precision_unit = strcmp(t->precision, "float32") ? pol->gamp->fmt_unit[i] : -1;
        }
        if (l->is_unit) {
            units[u].name = l->name;
            units[u].layer = i;
            units[u].weights = (int64_t)l->param[0].value.numel;
            units[u].macs = l->macs;
            u++;
        }
    }
    for (int i = 0; i < cfg->n_overrides; i++) ov[i] = cfg->overrides[i];
    struct adapt_trace_header *h = &hd->h;
    build_fill(hd, cfg);
    h->seed = cfg->run.seed;
    h->sr_bits = adapt_config_sr_bits(cfg);
#ifdef _OPENMP
    h->threads = omp_get_max_threads();
#else
    h->threads = 1;
#endif
    h->policy = adapt_config_enum_str(cfg, "policy", "name");
    h->config = cj;
    h->config_file = cfg->file;
    h->n_overrides = cfg->n_overrides;
    h->overrides = ov;
    /* [roles]: each role's resolved text and operand bits for the performance model */
    h->has_roles = adapt_config_roles_set(cfg);
    for (int k = 0; h->has_roles && k < ADAPT_ROLE_N && k < ADAPT_TRACE_ROLES; k++) {
        struct adapt_role_fmt f;
        enum adapt_status rst = adapt_config_role(cfg, (enum adapt_role)k, &f);
        if (rst) {
            header_free(hd);
            return rst;
        }
        h->role_bits[k] = f.kind == ADAPT_ROLE_FLOAT    ? 32
                          : f.kind == ADAPT_ROLE_FORMAT ? quant_spec_bits(&f.spec)
                                                        : -1;
        h->role_text[k] = adapt_role_fmt_str(&f, hd->roles[k], sizeof hd->roles[k]);
    }
    h->dataset.name = info->dataset;
    h->dataset.train = info->n_train;
    h->dataset.val = info->n_val;
    h->dataset.test = info->n_test;
    h->dataset.classes = net->classes;
    h->model.name = net->name;
    memcpy(h->model.input, net->in_chw, sizeof h->model.input);
    h->model.classes = net->classes;
    h->model.params = net->nparams_trainable;
    h->model.macs = net->macs;
    h->model.n_layers = net->nnodes;
    h->model.layers = layers;
    h->model.description_file = net->desc_file;
    h->model.description_args = net->desc_args;
    h->model.description_text = net->desc_text;
    h->n_units = net->nunits;
    h->units = units;
    return ADAPT_OK;
}

static enum adapt_status write_header(struct adapt_run_dir *d, const struct adapt_config *cfg,
                                      const struct adapt_net *net,
                                      const struct adapt_policy *pol,
                                      const struct adapt_run_info *info)
{
    struct header hd;
    enum adapt_status st = header_build(&hd, cfg, net, pol, info);
    if (st) return st;
    st = adapt_trace_write_header(d->tw, &hd.h);
    if (st == ADAPT_OK) st = adapt_trace_flush(d->tw);
    header_free(&hd);
    return st;
}

enum adapt_status adapt_run_dir_check(const struct adapt_config *cfg, const struct adapt_net *net,
                                      const struct adapt_policy *pol,
                                      const struct adapt_run_info *info)
{
    struct header hd;
    enum adapt_status st = header_build(&hd, cfg, net, pol, info);
    if (st) return st;
    st = adapt_trace_check_header(&hd.h);
    header_free(&hd);
    return st;
}

/* On resume the configuration must be the one the run started with, except
 * for the number of epochs (a run may be extended) and the output path. */
static enum adapt_status check_same_config(struct adapt_run_dir *d, const struct adapt_config *cfg)
{
    char p[ADAPT_RUN_PATH_MAX], diff[128];
    enum adapt_status st;
    if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, "config.ini"))) return st;
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

/* On resume on another machine or build: a warning that names what changed. The header
 * keeps the machine the run started on. */
static void build_compare(const struct adapt_run_dir *d, const struct adapt_trace_header *old)
{
    if (!old->build.commit) return; /* a trace of an older version: nothing to compare */
    static struct header now;
    memset(&now, 0, sizeof now);
    build_fill(&now, d->cfg);
    const struct {
        const char *what, *was, *is;
    } f[] = {{"commit", old->build.commit, now.h.build.commit},
             {"compiler", old->build.compiler, now.h.build.compiler},
             {"CPU", old->build.cpu, now.h.build.cpu},
             {"BLAS", old->build.blas, now.h.build.blas},
             {"device", old->build.device, now.h.build.device}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].was && f[i].is && strcmp(f[i].was, f[i].is))
            adapt_log(ADAPT_LOG_WARN,
                      "--resume: the run in %s started with %s \"%s\" and continues with "
                      "\"%s\"; its trace header keeps the first, and the steps from here on "
                      "may differ in their last bits from a run that was not interrupted "
                      "(doc/running.md, \"What a run records about its machine\")",
                      d->out_dir, f[i].what, f[i].was, f[i].is);
}

/* On resume the data split must be the one the run's trace header recorded: a run directory
 * written when data.train_limit still counted the validation images as well holds the same
 * config.ini but trained on fewer images. */
static enum adapt_status check_same_split(struct adapt_run_dir *d,
                                          const struct adapt_run_info *info)
{
    struct adapt_trace *t;
    enum adapt_status st = adapt_trace_load(&t, d->trace_path, ADAPT_TRACE_LOAD_PARTIAL);
    if (st) return st;
    int train = (int)t->header.dataset.train, val = (int)t->header.dataset.val;
    build_compare(d, &t->header);
    adapt_trace_free(t);
    if (train != info->n_train || val != info->n_val)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "--resume: the run in %s trained on %d images and validated on %d "
                           "(its trace header), but its configuration now gives %d and %d "
                           "(data.train_limit counts training images only, data.val_size comes "
                           "on top); start the run again with --force",
                           d->out_dir, train, val, info->n_train, info->n_val);
    return ADAPT_OK;
}

enum adapt_status adapt_run_dir_open(struct adapt_run_dir *d, const struct adapt_config *cfg,
                                     const struct adapt_run_dir_opts *opts, struct adapt_net *net,
                                     struct adapt_sgd *opt, struct adapt_sched *sched,
                                     struct adapt_policy *pol, const struct adapt_run_info *info,
                                     int *start_epoch, long *start_step)
{
    enum adapt_status st;
    d->cfg = cfg;
    d->dataset = info->dataset;
    /* a directory that did not exist when claimed: made now (another process may have made
     * it since, and may hold it) */
    if (!d->locked && ((st = make_dirs(d->out_dir)) || (st = lock_and_check(d, opts))))
        return st;
    if ((st = prepare_dir(d, opts))) return st;
    *start_epoch = 0;
    *start_step = 0;
    if (opts->resume) {
        int found;
        if ((st = check_same_config(d, cfg))) return st;
        if ((st = adapt_ckpt_resume(d, net, opt, sched, pol, start_epoch, start_step, &found)))
            return st;
        if (found && (st = check_same_split(d, info))) return st;
        if (!found) {
            /* stopped before its first checkpoint: the run starts again */
            if ((st = write_config(d, cfg))) return st;
            if ((st = adapt_trace_writer_create(&d->tw, d->trace_path))) return st;
            return write_header(d, cfg, net, pol, info);
        }
        if ((st = write_config(d, cfg))) return st;
        /* keep the trace up to the checkpointed epoch's record */
        if (*start_epoch > 0 &&
            (st = adapt_trace_truncate_after_epoch(d->trace_path, *start_epoch - 1)))
            return st;
        return adapt_trace_writer_append(&d->tw, d->trace_path, -1);
    }
    if ((st = write_config(d, cfg))) return st;
    if ((st = adapt_trace_writer_create(&d->tw, d->trace_path))) return st;
    return write_header(d, cfg, net, pol, info);
}

enum adapt_status adapt_run_dir_step(struct adapt_run_dir *d, const struct adapt_policy *pol,
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
    enum adapt_status st = adapt_trace_write_step(d->tw, &s);
    if (u != us) free(u);
    return st;
}

enum adapt_status adapt_run_dir_epoch(struct adapt_run_dir *d, const struct adapt_run_epoch *ep)
{
    struct adapt_trace_epoch e = {ep->epoch,     ep->step,    ep->lr,     ep->train_loss,
                                  ep->train_acc, ep->val_loss, ep->val_acc, ep->wall_s,
                                  ep->images_per_s};
    enum adapt_status st = adapt_trace_write_epoch(d->tw, &e);
    return st ? st : adapt_trace_flush(d->tw);
}

enum adapt_status adapt_run_dir_test(struct adapt_run_dir *d, int epoch, double loss, double acc)
{
    struct adapt_trace_test t = {epoch, loss, acc};
    return adapt_trace_write_test(d->tw, &t);
}

enum adapt_status adapt_run_dir_sample(struct adapt_run_dir *d, const struct adapt_trace_sample *s)
{
    enum adapt_status st = adapt_trace_write_sample(d->tw, s);
    return st ? st : adapt_trace_flush(d->tw);
}

enum adapt_status adapt_run_dir_end(struct adapt_run_dir *d, const char *status, double wall_s)
{
    struct adapt_trace_end e = {strcmp(status, "ok") ? ADAPT_TRACE_END_STOPPED : ADAPT_TRACE_END_OK,
                                wall_s};
    enum adapt_status st = adapt_trace_write_end(d->tw, &e);
    return st ? st : adapt_trace_flush(d->tw);
}

void adapt_run_dir_close(struct adapt_run_dir *d)
{
    adapt_trace_writer_close(d->tw);
    d->tw = NULL;
    unlock_dir(d);
}
