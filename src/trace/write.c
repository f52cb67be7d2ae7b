/* src/trace/write.c: the trace writer (schema 1) and the atomic file surgery of resuming:
 * appending to an existing trace, cutting it back to an epoch record. See trace.h. */
#include <config.h> /* autoconf's (PACKAGE_VERSION); src/config/config.h is the run configuration */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/fileio.h"
#include "src/trace/internal.h"
#include "src/trace/trace.h"

/* ----------------------------------------------------------------- writer */

struct adapt_trace_writer {
    FILE *f;
    char *path;
    int64_t offset; /* bytes written (buffered or not) */
};

/* Adds key: v to o; v may be NULL (allocation failure), which sets *bad. */
static void put(json_t *o, const char *key, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, key, v)) *bad = 1;
}

/* A number, or null when it is not finite (JSON has no NaN or infinity). */
static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jstr_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

/* An array of n integers from d64 or, when it is NULL, from d32. */
static json_t *jintegers(int n, const int64_t *d64, const int *d32)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((json_int_t)(d64 ? d64[i] : d32[i])))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *jdims(int n, const int64_t *d) { return jintegers(n, d, NULL); }

/* Writes one record as a line; consumes the reference to rec. */
static enum adapt_status write_record(struct adapt_trace_writer *w, json_t *rec, int bad,
                                      const char *what)
{
    char *text = bad || !rec ? NULL : json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    if (!text)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: cannot encode the %s record (out of memory or a "
                                         "string that is not UTF-8)", w->path, what);
    size_t n = strlen(text);
    int fail = fputs(text, w->f) == EOF || fputc('\n', w->f) == EOF;
    free(text);
    if (fail)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the %s record: %s", w->path, what,
                           strerror(errno));
    w->offset += (int64_t)n + 1;
    return ADAPT_OK;
}

static enum adapt_status writer_open(struct adapt_trace_writer **out, const char *path,
                                     const char *mode, int64_t offset)
{
    struct adapt_trace_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = adapt_strdup(path))) {
        free(w);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory opening the trace", path);
    }
    w->f = fopen(path, mode);
    if (!w->f) {
        enum adapt_status st = ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                                           "%s: cannot open the trace for writing: %s", path,
                                           strerror(errno));
        free(w->path);
        free(w);
        return st;
    }
    w->offset = offset;
    *out = w;
    return ADAPT_OK;
}

enum adapt_status adapt_trace_writer_create(struct adapt_trace_writer **w, const char *path)
{
    return writer_open(w, path, "wb", 0);
}

/* Offset just after the last '\n' of the file of size `size` (0 if none). */
static enum adapt_status last_line_end(int fd, const char *path, int64_t size, int64_t *end)
{
    char buf[4096];
    int64_t pos = size;
    while (pos > 0) {
        int64_t n = pos < (int64_t)sizeof buf ? pos : (int64_t)sizeof buf;
        pos -= n;
        if (pread(fd, buf, (size_t)n, pos) != (ssize_t)n)
            return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the trace: %s", path, strerror(errno));
        for (int64_t i = n - 1; i >= 0; i--)
            if (buf[i] == '\n') {
                *end = pos + i + 1;
                return ADAPT_OK;
            }
    }
    *end = 0;
    return ADAPT_OK;
}

enum adapt_status adapt_trace_writer_append(struct adapt_trace_writer **w, const char *path,
                                            int64_t keep_bytes)
{
    enum adapt_status st = ADAPT_OK;
    struct stat sb;
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                           "%s: cannot open the trace to append: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot stat the trace: %s", path, strerror(errno));
        goto close_fd;
    }
    int64_t size = (int64_t)sb.st_size, keep = keep_bytes;
    if (keep < 0) {
        if ((st = last_line_end(fd, path, size, &keep)) != ADAPT_OK) goto close_fd;
    } else if (keep > size) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "%s: cannot keep %lld bytes of a %lld-byte trace", path,
                         (long long)keep, (long long)size);
        goto close_fd;
    } else if (keep > 0) {
        char c;
        if (pread(fd, &c, 1, keep - 1) != 1) {
            st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the trace: %s", path, strerror(errno));
            goto close_fd;
        }
        if (c != '\n') {
            st = ADAPT_ERROR(ADAPT_EINVAL, "%s: offset %lld is not the end of a line", path,
                             (long long)keep);
            goto close_fd;
        }
    }
    if (keep < size && ftruncate(fd, (off_t)keep) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot truncate the trace: %s", path, strerror(errno));
        goto close_fd;
    }
close_fd:
    close(fd);
    if (st != ADAPT_OK) return st;
    return writer_open(w, path, "ab", keep);
}

int64_t adapt_trace_writer_offset(const struct adapt_trace_writer *w)
{
    return w->offset;
}

static json_t *layer_json(const struct adapt_trace_layer *l)
{
    int bad = 0;
    json_t *o = json_object();
    put(o, "name", json_string(l->name), &bad);
    put(o, "kind", json_string(l->kind), &bad);
    put(o, "in", jdims(l->in_ndim, l->in), &bad);
    put(o, "out", jdims(l->out_ndim, l->out), &bad);
    put(o, "params", json_integer(l->params), &bad);
    put(o, "macs", json_integer(l->macs), &bad);
    put(o, "elementwise", json_integer(l->elementwise), &bad);
    put(o, "unit", json_integer(l->unit), &bad);
    if (l->k > 0) {
        put(o, "k", json_integer(l->k), &bad);
        put(o, "stride", json_integer(l->stride), &bad);
        put(o, "pad", json_integer(l->pad), &bad);
    }
    /* only where they are not 1: a dense conv's record stays as it was */
    if (l->groups > 1) put(o, "groups", json_integer(l->groups), &bad);
    if (l->dilation > 1) put(o, "dilation", json_integer(l->dilation), &bad);
    /* graph precision propagation only: other records stay as they were */
    if (l->graph_set) put(o, "graph_set", json_string(l->graph_set), &bad);
    if (l->graph_source) put(o, "graph_source", json_string(l->graph_source), &bad);
    if (l->precision) {
        put(o, "precision", json_string(l->precision), &bad);
        put(o, "precision_unit", json_integer(l->precision_unit), &bad);
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* s, a text field of the header named by what (and index i when >= 0), must be UTF-8. */
static enum adapt_status check_text(const char *s, const char *what, int i)
{
    long at = s ? adapt_utf8_invalid_at(s, strlen(s)) : -1;
    if (at < 0) return ADAPT_OK;
    char name[96];
    if (i >= 0)
        snprintf(name, sizeof name, "%s %d", what, i);
    else
        snprintf(name, sizeof name, "%s", what);
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "the trace cannot hold the %s: byte %ld is not UTF-8 (a trace is JSON, "
                       "which holds UTF-8 text only)",
                       name, at + 1);
}

enum adapt_status adapt_trace_check_header(const struct adapt_trace_header *h)
{
    enum adapt_status st;
    if ((st = check_text(h->policy, "policy name", -1)) ||
        (st = check_text(h->config_file, "configuration file name", -1)) ||
        (st = check_text(h->dataset.name, "data set name", -1)) ||
        (st = check_text(h->model.name, "model name", -1)) ||
        (st = check_text(h->model.description_file, "model description's file name", -1)) ||
        (st = check_text(h->model.description_args, "model description's arguments", -1)) ||
        (st = check_text(h->model.description_text, "model description", -1)) ||
        (st = check_text(h->build.commit, "build's commit", -1)) ||
        (st = check_text(h->build.compiler, "build's compiler", -1)) ||
        (st = check_text(h->build.cpu, "CPU name", -1)) ||
        (st = check_text(h->build.isa, "CPU level", -1)) ||
        (st = check_text(h->build.blas, "BLAS library", -1)) ||
        (st = check_text(h->build.device, "device", -1)))
        return st;
    for (int i = 0; i < h->n_overrides; i++)
        if ((st = check_text(h->overrides[i], "--set", i + 1))) return st;
    for (int i = 0; i < h->model.n_layers; i++)
        if ((st = check_text(h->model.layers[i].name, "name of layer", i)) ||
            (st = check_text(h->model.layers[i].precision, "precision of layer", i)))
            return st;
    for (int i = 0; i < h->n_units; i++)
        if ((st = check_text(h->units[i].name, "name of unit", i))) return st;
    return ADAPT_OK;
}

enum adapt_status adapt_trace_write_header(struct adapt_trace_writer *w,
                                           const struct adapt_trace_header *h)
{
    int bad = 0;
    enum adapt_status st = adapt_trace_check_header(h);
    if (st) return ADAPT_ERROR(st, "%s: %s", w->path, adapt_error_message());
    char now[32];
    const char *created = h->created;
    if (!created) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
        created = now;
    }
    ADAPT_ASSERT(h->model.n_layers >= 0 && h->n_units >= 0 && h->n_overrides >= 0);
    json_t *o = json_object();
    put(o, "type", json_string("header"), &bad);
    put(o, "schema", json_integer(ADAPT_TRACE_SCHEMA), &bad);
    put(o, "program", json_string(PACKAGE_NAME), &bad);
    put(o, "version", json_string(PACKAGE_VERSION), &bad);
    put(o, "created", json_string(created), &bad);
    put(o, "seed", json_integer(h->seed), &bad);
    put(o, "threads", json_integer(h->threads), &bad);
    ADAPT_ASSERT(h->sr_bits == 0 || h->sr_bits == 32 || h->sr_bits == 16);
    if (h->sr_bits == 16) put(o, "sr_bits", json_integer(h->sr_bits), &bad);
    if (h->build.commit)
        put(o, "build",
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "commit", h->build.commit, "compiler",
                      h->build.compiler ? h->build.compiler : "unknown", "cpu",
                      h->build.cpu ? h->build.cpu : "unknown", "isa",
                      h->build.isa ? h->build.isa : "unknown", "blas",
                      h->build.blas ? h->build.blas : "unknown", "device",
                      h->build.device ? h->build.device : "cpu"),
            &bad);
    put(o, "policy", json_string(h->policy ? h->policy : ""), &bad);
    put(o, "config", h->config ? json_incref(h->config) : json_object(), &bad);
    put(o, "config_file", jstr_or_null(h->config_file), &bad);
    json_t *ov = json_array();
    for (int i = 0; ov && i < h->n_overrides; i++)
        if (json_array_append_new(ov, json_string(h->overrides[i]))) bad = 1;
    put(o, "overrides", ov, &bad);
    if (h->has_roles) {
        json_t *ro = json_object();
        for (int k = 0; ro && k < ADAPT_TRACE_ROLES; k++) {
            ADAPT_ASSERT(h->role_bits[k] == -1 || (h->role_bits[k] >= 1 && h->role_bits[k] <= 64));
            put(ro, adapt_trace_role_names[k],
                json_pack("{s:s,s:i}", "format", h->role_text[k] ? h->role_text[k] : "",
                          "bits", h->role_bits[k]),
                &bad);
        }
        put(o, "roles", ro, &bad);
    }

    json_t *ds = json_object();
    put(ds, "name", json_string(h->dataset.name ? h->dataset.name : ""), &bad);
    put(ds, "train", json_integer(h->dataset.train), &bad);
    put(ds, "val", json_integer(h->dataset.val), &bad);
    put(ds, "test", json_integer(h->dataset.test), &bad);
    put(ds, "classes", json_integer(h->dataset.classes), &bad);
    put(o, "dataset", ds, &bad);

    json_t *m = json_object();
    put(m, "name", json_string(h->model.name ? h->model.name : ""), &bad);
    put(m, "input", json_pack("[iii]", h->model.input[0], h->model.input[1], h->model.input[2]),
        &bad);
    put(m, "classes", json_integer(h->model.classes), &bad);
    put(m, "params", json_integer(h->model.params), &bad);
    put(m, "macs", json_integer(h->model.macs), &bad);
    json_t *layers = json_array();
    for (int i = 0; layers && i < h->model.n_layers; i++)
        if (json_array_append_new(layers, layer_json(&h->model.layers[i]))) bad = 1;
    put(m, "layers", layers, &bad);
    if (h->model.description_text)
        put(m, "description",
            json_pack("{s:s,s:s,s:s}", "file",
                      h->model.description_file ? h->model.description_file : "", "args",
                      h->model.description_args ? h->model.description_args : "", "text",
                      h->model.description_text),
            &bad);
    put(o, "model", m, &bad);

    json_t *units = json_array();
    for (int i = 0; units && i < h->n_units; i++) {
        const struct adapt_trace_unit *u = &h->units[i];
        json_t *uo = json_pack("{s:s?,s:i,s:I,s:I}", "name", u->name, "layer", u->layer, "weights",
                               (json_int_t)u->weights, "macs", (json_int_t)u->macs);
        if (json_array_append_new(units, uo)) bad = 1;
    }
    put(o, "units", units, &bad);
    return write_record(w, o, bad, "header");
}

enum adapt_status adapt_trace_write_step(struct adapt_trace_writer *w,
                                         const struct adapt_trace_step *s)
{
    int bad = 0;
    ADAPT_ASSERT(s->n_units >= 0 && s->n_events >= 0);
    json_t *o = json_object();
    put(o, "type", json_string("step"), &bad);
    put(o, "step", json_integer(s->step), &bad);
    put(o, "epoch", json_integer(s->epoch), &bad);
    put(o, "lr", jnum(s->lr), &bad);
    put(o, "loss", jnum(s->loss), &bad);
    const char *sn = adapt_trace_strategy_name(s->strategy);
    put(o, "strategy", sn ? json_string(sn) : json_null(), &bad);
    json_t *units = json_array();
    for (int i = 0; units && i < s->n_units; i++) {
        const struct adapt_trace_unit_state *u = &s->units[i];
        json_t *uo = json_object();
        put(uo, "wl", json_integer(u->wl), &bad);
        put(uo, "fl", json_integer(u->fl), &bad);
        if (!isnan(u->lb)) put(uo, "lb", jnum(u->lb), &bad);
        if (u->r >= 0) put(uo, "r", json_integer(u->r), &bad);
        if (!isnan(u->sparsity)) put(uo, "sparsity", jnum(u->sparsity), &bad);
        if (u->sat >= 0) put(uo, "sat", json_integer(u->sat), &bad);
        if (u->flush >= 0) put(uo, "flush", json_integer(u->flush), &bad);
        if (!isnan(u->act_sat)) put(uo, "act_sat", jnum(u->act_sat), &bad);
        json_t *sc = NULL;
        for (int k = 0; k < ADAPT_TRACE_SCALED_ROLES; k++) {
            const struct adapt_trace_role_scale *rs = &u->scaled[k];
            if (!(rs->scale > 0)) continue;
            if (!sc && !(sc = json_object())) bad = 1;
            put(sc, adapt_trace_scaled_role_names[k],
                json_pack("{s:o,s:o,s:I,s:I}", "amax", jnum(rs->amax), "scale", jnum(rs->scale),
                          "sat", (json_int_t)rs->sat, "flush", (json_int_t)rs->flush),
                &bad);
        }
        if (sc) put(uo, "scaled", sc, &bad);
        if (u->acc_set)
            put(uo, "acc",
                json_pack("{s:[III],s:[III]}", "gemms", (json_int_t)u->acc_gemms[0],
                          (json_int_t)u->acc_gemms[1], (json_int_t)u->acc_gemms[2], "overflows",
                          (json_int_t)u->acc_overflows[0], (json_int_t)u->acc_overflows[1],
                          (json_int_t)u->acc_overflows[2]),
                &bad);
        if (json_array_append_new(units, uo)) bad = 1;
    }
    put(o, "units", units, &bad);
    json_t *events = json_array();
    for (int i = 0; events && i < s->n_events; i++) {
        const struct adapt_trace_event *e = &s->events[i];
        ADAPT_ASSERT(e->kind == ADAPT_TRACE_EVENT_PD || e->kind == ADAPT_TRACE_EVENT_PU);
        json_t *eo = json_object();
        put(eo, "unit", json_integer(e->unit), &bad);
        put(eo, "kind", json_string(adapt_trace_event_names[e->kind]), &bad);
        put(eo, "before", json_pack("[ii]", e->before[0], e->before[1]), &bad);
        put(eo, "after", json_pack("[ii]", e->after[0], e->after[1]), &bad);
        if (e->kind == ADAPT_TRACE_EVENT_PD) {
            put(eo, "bisect_steps", json_integer(e->bisect_steps), &bad);
            put(eo, "kl_evals", json_integer(e->kl_evals), &bad);
            put(eo, "sample", json_integer(e->sample), &bad);
        } else {
            put(eo, "s", json_integer(e->s), &bad);
        }
        if (json_array_append_new(events, eo)) bad = 1;
    }
    put(o, "events", events, &bad);
    put(o, "accum", json_integer(s->accum), &bad);
    put(o, "overflow", json_boolean(s->overflow), &bad);
    return write_record(w, o, bad, "step");
}

enum adapt_status adapt_trace_write_epoch(struct adapt_trace_writer *w,
                                          const struct adapt_trace_epoch *e)
{
    int bad = 0;
    json_t *o = json_object();
    put(o, "type", json_string("epoch"), &bad);
    put(o, "epoch", json_integer(e->epoch), &bad);
    put(o, "step", json_integer(e->step), &bad);
    put(o, "lr", jnum(e->lr), &bad);
    put(o, "train_loss", jnum(e->train_loss), &bad);
    put(o, "train_acc", jnum(e->train_acc), &bad);
    put(o, "val_loss", jnum(e->val_loss), &bad);
    put(o, "val_acc", jnum(e->val_acc), &bad);
    put(o, "wall_s", jnum(e->wall_s), &bad);
    put(o, "images_per_s", jnum(e->images_per_s), &bad);
    return write_record(w, o, bad, "epoch");
}

enum adapt_status adapt_trace_write_sample(struct adapt_trace_writer *w,
                                           const struct adapt_trace_sample *s)
{
    int bad = 0;
    ADAPT_ASSERT(s->stage == 1 || s->stage == 2);
    json_t *o = json_object();
    put(o, "type", json_string("sample"), &bad);
    put(o, "stage", json_integer(s->stage), &bad);
    put(o, "plan", json_string(s->plan), &bad);
    put(o, "steps", json_integer(s->steps), &bad);
    put(o, "samples", json_integer(s->samples), &bad);
    put(o, "loss", jnum(s->loss), &bad);
    put(o, "cost", jnum(s->cost), &bad);
    put(o, "safe", json_boolean(s->safe), &bad);
    put(o, "chosen", json_boolean(s->chosen), &bad);
    put(o, "wl", jintegers(s->n_units, NULL, s->wl), &bad);
    put(o, "gov", jintegers(s->n_layers, NULL, s->gov), &bad);
    return write_record(w, o, bad, "sample");
}

enum adapt_status adapt_trace_write_test(struct adapt_trace_writer *w,
                                         const struct adapt_trace_test *t)
{
    int bad = 0;
    json_t *o = json_object();
    put(o, "type", json_string("test"), &bad);
    put(o, "epoch", json_integer(t->epoch), &bad);
    put(o, "test_loss", jnum(t->test_loss), &bad);
    put(o, "test_acc", jnum(t->test_acc), &bad);
    return write_record(w, o, bad, "test");
}

enum adapt_status adapt_trace_write_end(struct adapt_trace_writer *w,
                                        const struct adapt_trace_end *e)
{
    int bad = 0;
    ADAPT_ASSERT(e->status == ADAPT_TRACE_END_OK || e->status == ADAPT_TRACE_END_STOPPED);
    json_t *o = json_object();
    put(o, "type", json_string("end"), &bad);
    put(o, "status", json_string(adapt_trace_end_names[e->status]), &bad);
    put(o, "wall_s", jnum(e->wall_s), &bad);
    return write_record(w, o, bad, "end");
}

enum adapt_status adapt_trace_flush(struct adapt_trace_writer *w)
{
    if (fflush(w->f) != 0 || ferror(w->f))
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the trace: %s", w->path, strerror(errno));
    if (fsync(fileno(w->f)) != 0 && errno != EINVAL && errno != EROFS)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync the trace: %s", w->path, strerror(errno));
    return ADAPT_OK;
}

enum adapt_status adapt_trace_writer_close(struct adapt_trace_writer *w)
{
    if (!w) return ADAPT_OK;
    enum adapt_status st = adapt_trace_flush(w);
    if (fclose(w->f) != 0 && st == ADAPT_OK)
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot close the trace: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return st;
}

/* ---------------------------------------------------------------- surgery */

/* Writes the first `len` bytes of in (positioned at 0) to path atomically. */
static enum adapt_status replace_with_prefix(const char *path, FILE *in, int64_t len)
{
    enum adapt_status st;
    char buf[65536];
    struct adapt_atomic a;
    if ((st = adapt_atomic_open(&a, path))) return st;
    for (int64_t done = 0; done < len;) {
        size_t want = len - done < (int64_t)sizeof buf ? (size_t)(len - done) : sizeof buf;
        size_t got = fread(buf, 1, want, in);
        if (got != want) {
            st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the trace: %s", path,
                             ferror(in) ? strerror(errno) : "file shrank while copying");
            adapt_atomic_abort(&a);
            return st;
        }
        if (fwrite(buf, 1, got, a.f) != got) {
            st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot write %s: %s", path, a.tmp, strerror(errno));
            adapt_atomic_abort(&a);
            return st;
        }
        done += (int64_t)got;
    }
    return adapt_atomic_commit(&a);
}

enum adapt_status adapt_trace_truncate_after_epoch(const char *path, int epoch)
{
    enum adapt_status st = ADAPT_OK;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                           "%s: cannot open the trace: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = 0;
    int64_t lineno = 0, offset = 0, keep = -1;
    while (keep < 0 && (n = adapt_trace_read_line(f, &line, &cap)) > 0) {
        lineno++;
        offset += n;
        if (line[n - 1] != '\n') break; /* incomplete last line: never kept */
        json_error_t err;
        int oom;
        json_t *rec = adapt_trace_parse_json(line, (size_t)n, 0, &err, &oom);
        if (oom) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s:%lld: out of memory reading the trace", path,
                             (long long)lineno);
            goto free_line;
        }
        const char *type = json_string_value(json_object_get(rec, "type"));
        if (!rec || !type) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: %s", path, (long long)lineno,
                             rec ? "record without a \"type\" string" : err.text);
            json_decref(rec);
            goto free_line;
        }
        if (lineno == 1 && strcmp(type, "header")) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s:1: first line is a %s record, not the header", path,
                             type);
            json_decref(rec);
            goto free_line;
        }
        json_t *e = json_object_get(rec, "epoch");
        if (!strcmp(type, "epoch") && json_is_integer(e) && json_integer_value(e) == epoch)
            keep = offset;
        json_decref(rec);
    }
    if (n < 0) {
        st = adapt_trace_line_error(path, lineno + 1, n);
        goto free_line;
    }
    if (keep < 0) {
        st = ADAPT_ERROR(ADAPT_ENOENT, "%s: no epoch record for epoch %d", path, epoch);
        goto free_line;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (int64_t)sb.st_size == keep)
        goto free_line; /* nothing after */
    rewind(f);
    st = replace_with_prefix(path, f, keep);
free_line:
    free(line);
    fclose(f);
    return st;
}
