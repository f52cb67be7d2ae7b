/* src/train/checkpoint.c: writing, publishing and loading the checkpoints of a run, and
 * importing weights and per-unit formats from a model file. */
#include "src/train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/fileio.h"
#include "src/base/safetensors.h"
#include "src/policy/precision.h"
#include "src/trace/trace.h"

#define CKPT_FORMAT "adapt-sim checkpoint 1"

/* Checkpoints: each is a directory "ckpt-<epoch>" holding model.safetensors
 * and optim.safetensors, published by pointing the link "checkpoint" at it
 * (one rename). model.safetensors and optim.safetensors in the run directory
 * are links through "checkpoint", so they always name one complete checkpoint. */
#define CKPT_LINK "checkpoint"
#define CKPT_PREFIX "ckpt-"

/* The published checkpoint's directory name ("" when none). */
static enum adapt_status published_checkpoint(const struct adapt_run_dir *d, char *name,
                                              size_t n)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    name[0] = '\0';
    if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, CKPT_LINK))) return st;
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
static enum adapt_status link_files(const struct adapt_run_dir *d)
{
    static const char *const files[] = {"model.safetensors", "optim.safetensors"};
    char p[ADAPT_RUN_PATH_MAX], target[64], cur[64];
    enum adapt_status st;
    for (int i = 0; i < 2; i++) {
        snprintf(target, sizeof target, CKPT_LINK "/%s", files[i]);
        if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, files[i]))) return st;
        ssize_t n = readlink(p, cur, sizeof cur - 1);
        if (n >= 0 && (cur[n] = '\0', !strcmp(cur, target))) continue;
        if ((st = adapt_atomic_symlink(target, p))) return st;
    }
    return ADAPT_OK;
}

enum adapt_status adapt_ckpt_clean(const struct adapt_run_dir *d, int all)
{
    char keep[64], p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if ((st = published_checkpoint(d, keep, sizeof keep))) {
        if (!all) return st;
    }
    if (all) keep[0] = '\0';
    if ((st = adapt_fileio_remove_tmp(d->out_dir, NULL))) return st;
    DIR *dir = opendir(d->out_dir);
    if (!dir)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot list the directory: %s", d->out_dir,
                           strerror(errno));
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, CKPT_PREFIX, strlen(CKPT_PREFIX)) || !strcmp(e->d_name, keep))
            continue;
        if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, e->d_name))) break;
        if ((st = adapt_fileio_remove_dir(p))) break;
    }
    closedir(dir);
    if (st == ADAPT_OK && all) {
        if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, CKPT_LINK))) return st;
        unlink(p);
    }
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

static enum adapt_status read_meta_f64(const struct adapt_safetensors *f, const char *key,
                                       double *v)
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

static enum adapt_status load_weights_from(struct adapt_net *net,
                                           const struct adapt_safetensors *f)
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

enum adapt_status adapt_ckpt_load_weights(struct adapt_net *net, const char *path)
{
    /* the usual mistakes, named: a trace or other JSON file, a run's optimizer state */
    FILE *fp = fopen(path, "rb");
    if (fp) {
        int c = getc(fp);
        fclose(fp);
        if (c == '{')
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s: a JSON file (a run's trace?), not a weights file: give the "
                               "run's model.safetensors (or its run directory)",
                               path);
    }
    struct adapt_safetensors *f = NULL;
    enum adapt_status st = adapt_safetensors_load(&f, path);
    if (st) return st;
    if (adapt_safetensors_meta_get(f, "sgd_steps")) {
        adapt_safetensors_free(f);
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s: a run's optimizer state (optim.safetensors), not its weights: "
                           "give model.safetensors from the same directory",
                           path);
    }
    st = load_weights_from(net, f);
    adapt_safetensors_free(f);
    return st;
}

/* The scaled roles' states from optim.safetensors o (file path) into p. */
static enum adapt_status load_scales_meta(struct adapt_precision *p,
                                          const struct adapt_safetensors *o, const char *path)
{
    const char *rs = adapt_safetensors_meta_get(o, "role_scales");
    json_error_t jerr;
    json_t *j = rs ? json_loads(rs, 0, &jerr) : NULL;
    if (!j)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: role_scales missing or not JSON (a checkpoint of "
                                          "a run without scaled roles?)", path);
    enum adapt_status st = adapt_precision_scales_load(p, j, path);
    json_decref(j);
    return st;
}

static enum adapt_status load_checkpoint(const struct adapt_run_dir *d, struct adapt_net *net,
                                         struct adapt_sgd *opt, struct adapt_sched *sched,
                                         struct adapt_policy *pol, int *epoch, long *step)
{
    struct adapt_safetensors *m = NULL, *o = NULL;
    enum adapt_status st;
    int64_t e_m, e_o, s, steps, last_epoch, patience_bad, cooldown_counter;
    double lr, best;
    if ((st = adapt_safetensors_load(&m, d->model_path))) goto free_files;
    if ((st = adapt_safetensors_load(&o, d->optim_path))) goto free_files;
    const char *fmt = adapt_safetensors_meta_get(m, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: not an adapt-sim checkpoint (format '%s')",
                         d->model_path, fmt ? fmt : "none");
        goto free_files;
    }
    if ((st = read_meta_i64(m, "epoch", &e_m)) || (st = read_meta_i64(o, "epoch", &e_o)) ||
        (st = read_meta_i64(m, "step", &s)) ||
        (st = read_meta_i64(o, "sgd_steps", &steps)) || (st = read_meta_f64(o, "lr", &lr)) ||
        (st = read_meta_f64(o, "sched_best", &best)) ||
        (st = read_meta_i64(o, "sched_last_epoch", &last_epoch)) ||
        (st = read_meta_i64(o, "sched_num_bad", &patience_bad)) ||
        (st = read_meta_i64(o, "sched_cooldown_counter", &cooldown_counter)))
        goto free_files;
    /* every number against its range before anything is set from it */
    const char *bad = NULL, *mp = d->model_path, *op = d->optim_path;
    if (e_m < 0 || e_m > INT_MAX) bad = "epoch (expected 0 .. 2147483647)";
    else if (s < 0) bad = "step (expected >= 0)";
    if (bad) {
        st = ADAPT_ERROR(ADAPT_ERANGE, "%s: metadata %s", mp, bad);
        goto free_files;
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
        goto free_files;
    }
    const char *mname = adapt_safetensors_meta_get(m, "model");
    if (!mname || strcmp(mname, net->name)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: checkpoint of model '%s', the run uses '%s'", mp,
                         mname ? mname : "none", net->name);
        goto free_files;
    }
    if (e_m != e_o) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s (epoch %" PRId64 ") and %s (epoch %" PRId64
                         ") do not belong together", d->model_path, e_m, d->optim_path, e_o);
        goto free_files;
    }
    if ((st = load_weights_from(net, m))) goto free_files;
    for (int k = 0; k < opt->nbuf; k++) {
        const struct adapt_param *pp = opt->par[k];
        int64_t shape[ADAPT_MAX_DIMS];
        param_shape(pp, shape);
        if ((st = adapt_safetensors_copy(o, pp->name, ADAPT_ST_F32, pp->value.ndim, shape,
                                         opt->buf[k])))
            goto free_files;
    }
    const char *pname = adapt_safetensors_meta_get(o, "policy");
    if (!pname || strcmp(pname, pol->type->name)) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: checkpoint of policy '%s', the run uses '%s'",
                         d->optim_path, pname ? pname : "none", pol->type->name);
        goto free_files;
    }
    if (pol->type->load) {
        const char *js = adapt_safetensors_meta_get(o, "policy_state");
        json_error_t jerr;
        json_t *j = js ? json_loads(js, 0, &jerr) : NULL;
        if (!j) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: policy_state missing or not JSON", d->optim_path);
            goto free_files;
        }
        pol->epoch = (int)e_m;
        st = pol->type->load(pol, j, o);
        json_decref(j);
        if (st) goto free_files;
    }
    if (pol->prec && pol->prec->rstate &&
        (st = load_scales_meta(pol->prec, o, d->optim_path)))
        goto free_files;
    opt->steps = (long)steps;
    sched->lr = lr;
    sched->best = best;
    sched->last_epoch = (int)last_epoch;
    sched->num_bad = (int)patience_bad;
    sched->cooldown_counter = (int)cooldown_counter;
    *epoch = (int)e_m;
    *step = (long)s;
free_files:
    adapt_safetensors_free(o);
    adapt_safetensors_free(m);
    return st;
}

enum adapt_status adapt_ckpt_resume(const struct adapt_run_dir *d, struct adapt_net *net,
                                    struct adapt_sgd *opt, struct adapt_sched *sched,
                                    struct adapt_policy *pol, int *epoch, long *step, int *found)
{
    enum adapt_status st;
    char ckpt[64];
    struct stat sb;
    *found = 0;
    if ((st = published_checkpoint(d, ckpt, sizeof ckpt))) return st;
    if (ckpt[0] && (st = link_files(d))) return st;
    if (!ckpt[0] && lstat(d->model_path, &sb) != 0 && lstat(d->optim_path, &sb) != 0)
        return ADAPT_OK;
    *found = 1;
    return load_checkpoint(d, net, opt, sched, pol, epoch, step);
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
        char txt[QUANT_SPEC_STR_MAX];
        json_t *o = json_pack("{s:s,s:b,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
                              "unit", up->layer->name, "active", up->active, "spec",
                              up->active ? quant_spec_str(&up->spec, txt, sizeof txt) : "float32",
                              "format", (int)up->spec.format, "wl", up->spec.wl, "fl",
                              up->spec.fl, "exp_bits", up->spec.exp_bits, "man_bits",
                              up->spec.man_bits, "block", (int)up->spec.block, "tie",
                              (int)up->spec.tie, "overflow", (int)up->spec.overflow, "subnormals",
                              up->spec.subnormals, "bias", quant_spec_bias(&up->spec), "nan",
                              (int)up->spec.nan);
        /* arithmetic.accumulator: the unit's model (absent: float32, and older checkpoints) */
        int on[3];
        const struct quant_acc *acc = adapt_precision_arith(pr, u, on);
        char at[QUANT_SPEC_STR_MAX + 32];
        if (o && acc &&
            json_object_set_new(o, "accumulator", json_string(quant_acc_str(acc, at, sizeof at)))) {
            json_decref(o);
            o = NULL;
        }
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    char *js = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return js;
}

/* One entry of the stored unit_formats as written (nothing loaded): its unit name, whether it
 * is active, and the spec fields (format, wl, ...; bias and nan as stored). 0 when malformed. */
struct stored_unit {
    const char *name;
    int active;
    struct quant_spec sp;
};

static int read_stored_unit(json_t *o, struct stored_unit *e)
{
    int format = 0, block = 0, tie = 0, overflow = 0, nan = QUANT_NAN_IEEE;
    memset(e, 0, sizeof *e);
    e->sp.bias = QUANT_BIAS_IEEE; /* checkpoints of older versions store neither bias nor nan */
    if (json_unpack(o, "{s:s,s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s?i,s?i}", "unit", &e->name,
                    "active", &e->active, "format", &format, "wl", &e->sp.wl, "fl", &e->sp.fl,
                    "exp_bits", &e->sp.exp_bits, "man_bits", &e->sp.man_bits, "block", &block,
                    "tie", &tie, "overflow", &overflow, "subnormals", &e->sp.subnormals, "bias",
                    &e->sp.bias, "nan", &nan))
        return 0;
    e->sp.format = (enum quant_format)format;
    e->sp.block = (enum quant_block)block;
    e->sp.tie = (enum quant_tie)tie;
    e->sp.overflow = (enum quant_overflow)overflow;
    e->sp.nan = (enum quant_nan)nan;
    return 1;
}

/* A checkpoint is data: the plugin that a stored plugin format names is loaded only when the
 * user allowed it (quant_plugin_allowed: --allow-plugin, or the configuration's formats). Every
 * unit is checked before any plugin is loaded. */
static enum adapt_status check_stored_plugins(json_t *a, const char *path,
                                              const struct adapt_precision *pr,
                                              const char *const *allow, int nallow)
{
    for (int u = 0; u < pr->nunits; u++) {
        struct stored_unit e;
        if (!read_stored_unit(json_array_get(a, (size_t)u), &e) || !e.active ||
            e.sp.format != QUANT_FORMAT_PLUGIN)
            continue; /* nothing of it is loaded (a malformed entry is refused in its turn) */
        const char *txt = json_string_value(json_object_get(json_array_get(a, (size_t)u), "spec"));
        char inner[QUANT_PLUGIN_TEXT_MAX + 1], file[QUANT_PLUGIN_TEXT_MAX + 1],
            fn[QUANT_PLUGIN_TEXT_MAX + 1];
        if (!txt || !quant_spec_plugin_text(txt, inner) || !inner[0] ||
            quant_plugin_split(inner, file, fn) != ADAPT_OK)
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s: metadata 'unit_formats': unit %s has the plugin format, and "
                               "its 'spec' (%s) is not plugin(PATH) or plugin(PATH:NAME)",
                               path, e.name, txt ? txt : "missing");
        if (!quant_plugin_allowed(inner, allow, nallow))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s: unit %s is stored in the format %s, a rounding plugin: "
                               "loading it would run code from %s, and a checkpoint runs no code "
                               "that you did not allow. If you trust that file, allow it with "
                               "--allow-plugin %s (or name the plugin in the configuration's "
                               "formats); nothing was loaded",
                               path, e.name, txt, file, file);
    }
    return ADAPT_OK;
}

enum adapt_status adapt_ckpt_load_formats(struct adapt_policy *pol, const char *path, long *step,
                                          FILE *report, const char *const *allow_plugins,
                                          int n_allow_plugins)
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
        goto free_file;
    }
    if (pname && strcmp(pname, pol->type->name) && report)
        fprintf(report, "note: %s was trained with policy %s; evaluating with policy %s (the "
                        "configuration's)\n", path, pname, pol->type->name);
    json_error_t jerr;
    json_t *a = json_loads(js, 0, &jerr);
    if (!a || !json_is_array(a)) {
        json_decref(a);
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata 'unit_formats' is not a JSON array", path);
        goto free_file;
    }
    int64_t s64 = 0;
    if ((st = read_meta_i64(f, "step", &s64))) {
        json_decref(a);
        goto free_file;
    }
    if (!pr || (pname && strcmp(pname, pol->type->name))) {
        json_decref(a);
        goto free_file; /* float32 evaluation, or formats of another policy: not applied */
    }
    if ((int)json_array_size(a) != pr->nunits) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: metadata 'unit_formats' has %zu units, the model %d",
                         path, json_array_size(a), pr->nunits);
        json_decref(a);
        goto free_file;
    }
    if ((st = check_stored_plugins(a, path, pr, allow_plugins, n_allow_plugins))) {
        json_decref(a);
        goto free_file;
    }
    char notes[2048] = "";
    if (report) fprintf(report, "formats (%s, step %" PRId64 "):", path, s64);
    for (int u = 0; u < pr->nunits; u++) {
        json_t *o = json_array_get(a, (size_t)u);
        struct stored_unit e;
        if (!read_stored_unit(o, &e) || strcmp(e.name, pr->u[u].layer->name)) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s: metadata 'unit_formats' entry %d is malformed or not unit %s",
                             path, u, pr->u[u].layer->name);
            break;
        }
        const char *name = e.name;
        struct quant_spec sp = e.sp;
        if (e.active && sp.format == QUANT_FORMAT_PLUGIN) { /* registry numbers are per process: */
            const char *txt = json_string_value(json_object_get(o, "spec")); /* load by name, */
            struct quant_spec ps;                                  /* allowed above */
            if (!txt || (st = quant_spec_parse(txt, &ps)) || ps.format != QUANT_FORMAT_PLUGIN) {
                st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: unit %s: plugin format: %s", path, name,
                                 !txt ? "no 'spec' text" : st ? adapt_error_message()
                                                              : "'spec' is not a plugin format");
                break;
            }
            sp.plugin = ps.plugin;
        }
        if (sp.format != QUANT_FORMAT_FLOAT) sp.bias = QUANT_BIAS_IEEE; /* the format's own */
        char txt[QUANT_SPEC_STR_MAX];
        if (e.active) {
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
                    e.active ? quant_spec_str(&sp, txt, sizeof txt) : "float32");
        /* the accumulator it trained with, against the configuration's (a note, not an error:
         * evaluating a model with another datapath is a question a user may ask) */
        const char *sa = json_string_value(json_object_get(o, "accumulator"));
        int on[3];
        const struct quant_acc *ca = adapt_precision_arith(pr, u, on);
        char ct[QUANT_SPEC_STR_MAX + 32];
        const char *cs = ca ? quant_acc_str(ca, ct, sizeof ct) : "float32";
        if (strcmp(sa ? sa : "float32", cs) && strlen(notes) + 256 < sizeof notes)
            snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                     "note: unit %s was trained with accumulator %.64s; it runs with %.64s (the "
                     "configuration's arithmetic)\n",
                     name, sa ? sa : "float32", cs);
    }
    if (report) fprintf(report, "\n%s", notes);
    json_decref(a);
    if (st == ADAPT_OK) *step = (long)s64;
free_file:
    adapt_safetensors_free(f);
    return st;
}

/* Points "checkpoint" at the complete directory ckpt, makes the run
 * directory's model and optimizer files links through it, and removes the
 * previous checkpoint. */
static enum adapt_status publish_checkpoint(const struct adapt_run_dir *d, const char *ckpt,
                                            const char *old_ckpt)
{
    char p[ADAPT_RUN_PATH_MAX];
    enum adapt_status st;
    if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, ckpt)) ||
        (st = adapt_fileio_sync_dir(p)) ||
        (st = adapt_run_dir_join(p, sizeof p, d->out_dir, CKPT_LINK)) ||
        (st = adapt_atomic_symlink(ckpt, p)) || (st = link_files(d)))
        return st;
    if (old_ckpt[0]) {
        if ((st = adapt_run_dir_join(p, sizeof p, d->out_dir, old_ckpt))) return st;
        return adapt_fileio_remove_dir(p);
    }
    return ADAPT_OK;
}

/* What a checkpoint writes, by file: model.safetensors's tensors (parameters, batch-norm
 * counters) in t[0, n_model), optim.safetensors's (momentum buffers, then the policy's
 * tensors) in t[n_model, n_model + n_optim); the names they need are owned here. */
struct ckpt_tensors {
    struct adapt_safetensors_tensor *t;
    int n_model, n_optim;
    char (*names)[ADAPT_NAME_MAX + 32]; /* the counters' names */
    char (*pnames)[96];                 /* the policy's */
};

static void ckpt_tensors_free(struct ckpt_tensors *c)
{
    free(c->t);
    free(c->names);
    free(c->pnames);
    memset(c, 0, sizeof *c);
}

static enum adapt_status ckpt_tensors_build(struct ckpt_tensors *c, const struct adapt_net *net,
                                            const struct adapt_sgd *opt,
                                            const struct adapt_policy *pol)
{
    memset(c, 0, sizeof *c);
    int nbn = 0;
    for (int i = 0; i < net->nnodes; i++) nbn += net->nodes[i].layer->counter != NULL;
    const int nt = net->nparam + nbn;
    /* the policy's tensors: as many as it has, found by growing the room until some is left */
    int listed = 0;
    for (int pcap = 4096; !listed && pcap <= (1 << 24); pcap *= 2) {
        free(c->t);
        free(c->pnames);
        c->t = calloc((size_t)nt + (size_t)opt->nbuf + (size_t)pcap + 1, sizeof *c->t);
        c->pnames = calloc((size_t)pcap, sizeof *c->pnames);
        if (!c->t || !c->pnames) break;
        struct adapt_safetensors_tensor *pt = c->t + nt + opt->nbuf;
        int np = pol->type->save_tensors ? pol->type->save_tensors(pol, pt, pcap, c->pnames) : 0;
        c->n_optim = opt->nbuf + np;
        listed = np < pcap;
    }
    c->names = calloc((size_t)nbn + 1, sizeof *c->names);
    if (!listed || !c->names) {
        ckpt_tensors_free(c);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot list the checkpoint's tensors");
    }
    int k = 0, b = 0;
    for (int i = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        for (int p = 0; p < l->nparam; p++) {
            const struct adapt_param *pp = &l->param[p];
            c->t[k].name = pp->name;
            c->t[k].dtype = ADAPT_ST_F32;
            c->t[k].ndim = pp->value.ndim;
            param_shape(pp, c->t[k].shape);
            c->t[k].data = pp->value.data;
            k++;
        }
        if (l->counter) {
            snprintf(c->names[b], sizeof c->names[b], "%s.num_batches_tracked", l->name);
            c->t[k].name = c->names[b++];
            c->t[k].dtype = ADAPT_ST_I64;
            c->t[k].ndim = 0;
            c->t[k].data = l->counter;
            k++;
        }
    }
    ADAPT_ASSERT(k == nt);
    c->n_model = k;
    for (int j = 0; j < opt->nbuf; j++) {
        const struct adapt_param *pp = opt->par[j];
        struct adapt_safetensors_tensor *x = &c->t[k + j];
        x->name = pp->name;
        x->dtype = ADAPT_ST_F32;
        x->ndim = pp->value.ndim;
        param_shape(pp, x->shape);
        x->data = opt->buf[j];
    }
    /* the policy's tensors were put right after the momentum buffers' room */
    return ADAPT_OK;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct adapt_safetensors_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* The first name that two of t[0, n) share, or NULL. */
static const char *shared_name(const struct adapt_safetensors_tensor *t, int n)
{
    const struct adapt_safetensors_tensor **s = malloc(sizeof *s * (size_t)(n + 1));
    if (!s) return NULL;
    for (int i = 0; i < n; i++) s[i] = &t[i];
    qsort(s, (size_t)n, sizeof *s, cmp_tensor_name);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(s[i - 1]->name, s[i]->name)) dup = s[i]->name;
    free(s);
    return dup;
}

enum adapt_status adapt_ckpt_load_role_scales(struct adapt_policy *pol, const char *path,
                                              FILE *report, int *loaded)
{
    *loaded = 0;
    if (!pol->prec || !pol->prec->rstate) return ADAPT_OK;
    char op[4096];
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) + 1 : 0;
    if (snprintf(op, sizeof op, "%.*soptim.safetensors", dl, path) >= (int)sizeof op)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: path too long", path);
    if (access(op, R_OK) != 0) {
        if (report)
            fprintf(report, "note: no %s beside %s: the scaled roles start at scale 1, not at "
                            "the run's scales\n", op, path);
        return ADAPT_OK;
    }
    struct adapt_safetensors *m = NULL, *o = NULL;
    enum adapt_status st;
    int64_t e_m = -1, e_o = -2;
    if ((st = adapt_safetensors_load(&m, path)) || (st = adapt_safetensors_load(&o, op)))
        goto done;
    if (read_meta_i64(m, "epoch", &e_m) != ADAPT_OK || read_meta_i64(o, "epoch", &e_o) != ADAPT_OK ||
        e_m != e_o) {
        adapt_error_clear();
        if (report)
            fprintf(report, "note: %s is not of the same epoch as %s: the scaled roles start "
                            "at scale 1\n", op, path);
        goto done;
    }
    st = load_scales_meta(pol->prec, o, op);
    if (!st) {
        *loaded = 1;
        if (report) fprintf(report, "role scales: %s\n", op);
    }
done:
    adapt_safetensors_free(m);
    adapt_safetensors_free(o);
    return st;
}

enum adapt_status adapt_ckpt_check_names(const struct adapt_net *net,
                                         const struct adapt_sgd *opt,
                                         const struct adapt_policy *pol)
{
    struct ckpt_tensors c;
    enum adapt_status st = ckpt_tensors_build(&c, net, opt, pol);
    if (st) return st;
    const char *dup = shared_name(c.t, c.n_model);
    const char *file = "model.safetensors";
    if (!dup) {
        dup = shared_name(c.t + c.n_model, c.n_optim);
        file = "optim.safetensors";
    }
    if (dup) {
        char name[ADAPT_NAME_MAX + 96];
        snprintf(name, sizeof name, "%s", dup);
        st = ADAPT_ERROR(ADAPT_EINVAL,
                         "model %s: two tensors of a checkpoint's %s would both be named '%s' "
                         "(layer names make the names of parameters, buffers and policy state: "
                         "NAME.weight, NAME.num_batches_tracked, adapt.G.NAME, "
                         "muppet.gradK.NAME); rename a layer in the model description",
                         net->name, file, name);
    }
    ckpt_tensors_free(&c);
    return st;
}

enum adapt_status adapt_ckpt_write(struct adapt_run_dir *d, const struct adapt_net *net,
                                   const struct adapt_sgd *opt, const struct adapt_sched *sched,
                                   const struct adapt_policy *pol, int epochs_done, long step)
{
    enum adapt_status st;
    if ((st = adapt_trace_flush(d->tw))) return st;
    struct ckpt_tensors c;
    if ((st = ckpt_tensors_build(&c, net, opt, pol))) return st;
    char *pstate = NULL, *rscales = NULL;
    char s_epoch[32], s_step[32], s_seed[32], s_steps[32], s_lr[40], s_best[40],
        s_le[32], s_bad[32], s_cd[32], s_rng[160];
    snprintf(s_epoch, sizeof s_epoch, "%d", epochs_done);
    snprintf(s_step, sizeof s_step, "%ld", step);
    snprintf(s_seed, sizeof s_seed, "%" PRId64, (int64_t)d->cfg->run.seed);
    snprintf(s_rng, sizeof s_rng,
             "philox4x32-10 counter-based: seed %s; streams keyed by epoch %d and step %ld",
             s_seed, epochs_done, step);
    char *formats = unit_formats_json(pol);
    if (!formats) {
        ckpt_tensors_free(&c);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot write checkpoint");
    }
    struct adapt_safetensors_meta mm[] = {
        {"format", CKPT_FORMAT}, {"model", net->name},      {"dataset", d->dataset},
        {"epoch", s_epoch},      {"step", s_step},          {"seed", s_seed},
        {"rng", s_rng},          {"policy", pol->type->name}, {"unit_formats", formats}};
    char old_ckpt[64], ckpt[64], dir[ADAPT_RUN_PATH_MAX], path[ADAPT_RUN_PATH_MAX];
    snprintf(ckpt, sizeof ckpt, CKPT_PREFIX "%06d", epochs_done);
    if ((st = published_checkpoint(d, old_ckpt, sizeof old_ckpt))) goto free_all;
    if (!strcmp(old_ckpt, ckpt)) {
        st = ADAPT_ERROR(ADAPT_EEXIST, "%s/%s: the checkpoint of epoch %d is already published",
                         d->out_dir, ckpt, epochs_done);
        goto free_all;
    }
    if ((st = adapt_run_dir_join(dir, sizeof dir, d->out_dir, ckpt)) ||
        (st = adapt_fileio_remove_dir(dir)))
        goto free_all;
    if (mkdir(dir, 0777) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "cannot create the checkpoint directory %s: %s", dir,
                         strerror(errno));
        goto free_all;
    }
    if ((st = adapt_run_dir_join(path, sizeof path, dir, "model.safetensors"))) goto free_all;
    st = adapt_safetensors_write(path, c.t, c.n_model, mm, (int)(sizeof mm / sizeof mm[0]));
    if (st == ADAPT_OK) {
        snprintf(s_steps, sizeof s_steps, "%ld", opt->steps);
        snprintf(s_lr, sizeof s_lr, "%.17g", sched->lr);
        snprintf(s_best, sizeof s_best, "%.17g", sched->best);
        snprintf(s_le, sizeof s_le, "%d", sched->last_epoch);
        snprintf(s_bad, sizeof s_bad, "%d", sched->num_bad);
        snprintf(s_cd, sizeof s_cd, "%d", sched->cooldown_counter);
        json_t *pj = pol->type->save_json ? pol->type->save_json(pol) : json_object();
        pstate = pj ? json_dumps(pj, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(pj);
        json_t *rj = pol->prec ? adapt_precision_scales_json(pol->prec) : NULL;
        rscales = rj ? json_dumps(rj, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        json_decref(rj);
        if (pol->prec && pol->prec->rstate && !rscales) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot write the scale states of the checkpoint");
            goto free_all;
        }
        struct adapt_safetensors_meta om[] = {{"format", CKPT_FORMAT},
                                              {"epoch", s_epoch},
                                              {"sgd_steps", s_steps},
                                              {"lr", s_lr},
                                              {"sched_best", s_best},
                                              {"sched_last_epoch", s_le},
                                              {"sched_num_bad", s_bad},
                                              {"sched_cooldown_counter", s_cd},
                                              {"policy", pol->type->name},
                                              {"policy_state", pstate ? pstate : "{}"},
                                              {"role_scales", rscales ? rscales : "{}"}};
        /* [roles] with scaling: the scales and amax histories, so that --resume continues
         * with them (no key without scaled roles) */
        if ((st = adapt_run_dir_join(path, sizeof path, dir, "optim.safetensors")) == ADAPT_OK)
            st = adapt_safetensors_write(path, c.t + c.n_model, c.n_optim, om,
                                         (int)(sizeof om / sizeof om[0]) - !rscales);
    }
    if (st == ADAPT_OK) st = publish_checkpoint(d, ckpt, old_ckpt);
free_all:
    free(formats);
    free(pstate);
    free(rscales);
    ckpt_tensors_free(&c);
    return st;
}

