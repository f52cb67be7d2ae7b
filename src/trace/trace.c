/* src/trace/trace.c: JSON-lines trace writer and reader (schema 1). See trace.h. */
#include <config.h> /* autoconf's (PACKAGE_VERSION); src/config/config.h is the run configuration */

#include "src/trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/fileio.h"

/* ----------------------------------------------------------------- common */

const char *const adapt_trace_strategy_names[ADAPT_TRACE_STRATEGY_MAX + 1] = {NULL, "min", "mean",
                                                                             "max"};
static const char *const event_names[] = {"pd", "pu"};
static const char *const end_names[] = {"ok", "stopped"};

const char *adapt_trace_strategy_name(enum adapt_trace_strategy s)
{
    if ((int)s < 0 || (int)s > ADAPT_TRACE_STRATEGY_MAX) return NULL;
    return adapt_trace_strategy_names[s];
}

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

static json_t *jdims(int n, const int64_t *d)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((json_int_t)d[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

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
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

enum adapt_status adapt_trace_write_header(struct adapt_trace_writer *w,
                                           const struct adapt_trace_header *h)
{
    int bad = 0;
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
    put(o, "policy", json_string(h->policy ? h->policy : ""), &bad);
    put(o, "config", h->config ? json_incref(h->config) : json_object(), &bad);
    put(o, "config_file", jstr_or_null(h->config_file), &bad);
    json_t *ov = json_array();
    for (int i = 0; ov && i < h->n_overrides; i++)
        if (json_array_append_new(ov, json_string(h->overrides[i]))) bad = 1;
    put(o, "overrides", ov, &bad);

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
        if (json_array_append_new(units, uo)) bad = 1;
    }
    put(o, "units", units, &bad);
    json_t *events = json_array();
    for (int i = 0; events && i < s->n_events; i++) {
        const struct adapt_trace_event *e = &s->events[i];
        ADAPT_ASSERT(e->kind == ADAPT_TRACE_EVENT_PD || e->kind == ADAPT_TRACE_EVENT_PU);
        json_t *eo = json_object();
        put(eo, "unit", json_integer(e->unit), &bad);
        put(eo, "kind", json_string(event_names[e->kind]), &bad);
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
    put(o, "status", json_string(end_names[e->status]), &bad);
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

/* The longest line a reader accepts: a record of adapt-train is a few kB per
 * unit; 4 MiB is far above any and bounds what a hostile file can cost. */
#define TRACE_LINE_MAX ((size_t)4 << 20)

/* Reads one line, its '\n' included, growing *buf up to TRACE_LINE_MAX
 * bytes. Returns the length (0 at the end of the file), -1 on a read error
 * or when out of memory (errno says which), -2 when the line is longer. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap)
{
    size_t len = 0;
    int c = 0;
    while ((c = getc(f)) != EOF) {
        if (len + 1 >= *cap) {
            if (*cap > TRACE_LINE_MAX) return -2;
            size_t nc = *cap ? 2 * *cap : 4096;
            if (nc > TRACE_LINE_MAX + 2) nc = TRACE_LINE_MAX + 2;
            char *p = realloc(*buf, nc);
            if (!p) {
                errno = ENOMEM;
                return -1;
            }
            *buf = p;
            *cap = nc;
        }
        (*buf)[len++] = (char)c;
        if (c == '\n') break;
    }
    if (c == EOF && ferror(f)) return -1;
    if (*buf) (*buf)[len] = '\0';
    return (ssize_t)len;
}

/* The error of a read_line result below 0 at line `line`. */
static enum adapt_status line_error(const char *path, int64_t line, ssize_t n)
{
    if (n == -2)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: line longer than %zu bytes: not a trace "
                           "record", path, (long long)line, TRACE_LINE_MAX);
    if (errno == ENOMEM)
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s:%lld: out of memory reading the trace", path,
                           (long long)line);
    return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the trace: %s", path, strerror(errno));
}

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
    while (keep < 0 && (n = read_line(f, &line, &cap)) > 0) {
        lineno++;
        offset += n;
        if (line[n - 1] != '\n') break; /* incomplete last line: never kept */
        json_error_t err;
        json_t *rec = json_loadb(line, (size_t)n, 0, &err);
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
        st = line_error(path, lineno + 1, n);
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

/* ----------------------------------------------------------------- reader */

/* Where the reader is, for messages; the first problem is kept. */
struct rd {
    const char *path;
    int64_t line;
    const char *rec;
    int bad;
    enum adapt_status st;
    char msg[512];
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void rd_fail(struct rd *r, const char *fmt, ...)
{
    if (r->bad) return;
    r->bad = 1;
    r->st = ADAPT_EFORMAT;
    int n = snprintf(r->msg, sizeof r->msg, "%s:%lld: %s record: ", r->path, (long long)r->line,
                     r->rec);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->msg)
        vsnprintf(r->msg + n, sizeof r->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

static void rd_nomem(struct rd *r)
{
    if (r->bad) return;
    r->bad = 1;
    r->st = ADAPT_ENOMEM;
    snprintf(r->msg, sizeof r->msg, "%s:%lld: out of memory", r->path, (long long)r->line);
}

static json_t *rd_get(struct rd *r, json_t *o, const char *key, int optional)
{
    json_t *v = json_object_get(o, key);
    if (!v && !optional) rd_fail(r, "field \"%s\" is missing", key);
    return v;
}

/* An integer field in [lo, hi]; `absent` when optional and missing. */
static int64_t rd_int(struct rd *r, json_t *o, const char *key, int optional, int64_t absent,
                      int64_t lo, int64_t hi)
{
    json_t *v = rd_get(r, o, key, optional);
    if (!v) return absent;
    if (!json_is_integer(v)) {
        rd_fail(r, "field \"%s\" must be an integer", key);
        return absent;
    }
    int64_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        rd_fail(r, "field \"%s\" = %lld is out of range [%lld, %lld]", key, (long long)x,
                (long long)lo, (long long)hi);
        return absent;
    }
    return x;
}

#define INT_RANGE -2147483647 - 1, 2147483647
#define I64_RANGE INT64_MIN, INT64_MAX

/* A number field; null reads as NaN. */
static double rd_num(struct rd *r, json_t *o, const char *key, int optional)
{
    json_t *v = rd_get(r, o, key, optional);
    if (!v || json_is_null(v)) return NAN;
    if (!json_is_number(v)) {
        rd_fail(r, "field \"%s\" must be a number or null", key);
        return NAN;
    }
    return json_number_value(v);
}

/* A string field, copied; NULL when optional and missing or null. */
static char *rd_str(struct rd *r, json_t *o, const char *key, int nullable)
{
    json_t *v = rd_get(r, o, key, nullable);
    if (!v || (nullable && json_is_null(v))) return NULL;
    if (!json_is_string(v)) {
        rd_fail(r, "field \"%s\" must be a string%s", key, nullable ? " or null" : "");
        return NULL;
    }
    char *s = adapt_strdup(json_string_value(v));
    if (!s) rd_nomem(r);
    return s;
}

static json_t *rd_typed(struct rd *r, json_t *o, const char *key, int optional, json_type type)
{
    json_t *v = rd_get(r, o, key, optional);
    if (v && json_typeof(v) != type) {
        rd_fail(r, "field \"%s\" must be %s", key, type == JSON_ARRAY ? "an array" : "an object");
        return NULL;
    }
    return v;
}

/* An array of 1..max integers (a shape), or of exactly `max` when exact. */
static int rd_ints(struct rd *r, json_t *o, const char *key, int max, int exact, int64_t *out)
{
    json_t *a = rd_typed(r, o, key, 0, JSON_ARRAY);
    if (!a) return 0;
    size_t n = json_array_size(a);
    if (n == 0 || n > (size_t)max || (exact && n != (size_t)max)) {
        rd_fail(r, "field \"%s\" must hold %s%d integers", key, exact ? "" : "1 to ", max);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) {
            rd_fail(r, "field \"%s\" must hold integers", key);
            return 0;
        }
        out[i] = json_integer_value(v);
    }
    return (int)n;
}

/* Matches a string field against names[0..n); -1 on error. */
static int rd_enum(struct rd *r, json_t *o, const char *key, const char *const *names, int n,
                   int nullable)
{
    json_t *v = rd_get(r, o, key, 0);
    if (!v) return -1;
    if (nullable && json_is_null(v)) return 0;
    const char *s = json_string_value(v);
    for (int i = 0; s && i < n; i++)
        if (names[i] && !strcmp(s, names[i])) return i;
    rd_fail(r, "field \"%s\" has an unknown value", key);
    return -1;
}

static void header_free(struct adapt_trace_header *h)
{
    free((char *)h->program);
    free((char *)h->version);
    free((char *)h->created);
    free((char *)h->policy);
    free((char *)h->config_file);
    json_decref(h->config);
    for (int i = 0; i < h->n_overrides; i++) free((char *)h->overrides[i]);
    free((void *)h->overrides);
    free((char *)h->dataset.name);
    free((char *)h->model.name);
    for (int i = 0; i < h->model.n_layers; i++) {
        free((char *)h->model.layers[i].name);
        free((char *)h->model.layers[i].kind);
    }
    free((void *)h->model.layers);
    for (int i = 0; i < h->n_units; i++) free((char *)h->units[i].name);
    free((void *)h->units);
}

static void read_layer(struct rd *r, json_t *o, struct adapt_trace_layer *l)
{
    if (!json_is_object(o)) {
        rd_fail(r, "model.layers entries must be objects");
        return;
    }
    l->name = rd_str(r, o, "name", 0);
    l->kind = rd_str(r, o, "kind", 0);
    l->in_ndim = rd_ints(r, o, "in", ADAPT_TRACE_MAX_DIMS, 0, l->in);
    l->out_ndim = rd_ints(r, o, "out", ADAPT_TRACE_MAX_DIMS, 0, l->out);
    l->params = rd_int(r, o, "params", 0, 0, 0, INT64_MAX);
    l->macs = rd_int(r, o, "macs", 0, 0, 0, INT64_MAX);
    l->elementwise = rd_int(r, o, "elementwise", 0, 0, 0, INT64_MAX);
    l->unit = (int)rd_int(r, o, "unit", 0, -1, -1, 2147483647);
    l->k = (int)rd_int(r, o, "k", 1, 0, 0, 2147483647);
    l->stride = (int)rd_int(r, o, "stride", 1, 0, 0, 2147483647);
    l->pad = (int)rd_int(r, o, "pad", 1, 0, 0, 2147483647);
}

static void read_header(struct rd *r, json_t *o, struct adapt_trace_header *h)
{
    h->schema = (int)rd_int(r, o, "schema", 0, 0, INT_RANGE);
    if (r->bad) return;
    if (h->schema != ADAPT_TRACE_SCHEMA) {
        rd_fail(r, "unknown schema version %d (this reader knows version %d)", h->schema,
                ADAPT_TRACE_SCHEMA);
        return;
    }
    h->program = rd_str(r, o, "program", 0);
    h->version = rd_str(r, o, "version", 0);
    h->created = rd_str(r, o, "created", 0);
    h->seed = rd_int(r, o, "seed", 0, 0, I64_RANGE);
    h->threads = (int)rd_int(r, o, "threads", 0, 0, INT_RANGE);
    h->policy = rd_str(r, o, "policy", 0);
    json_t *cfg = rd_typed(r, o, "config", 0, JSON_OBJECT);
    if (cfg) h->config = json_incref(cfg);
    h->config_file = rd_str(r, o, "config_file", 1);
    json_t *ov = rd_typed(r, o, "overrides", 1, JSON_ARRAY);
    if (ov && json_array_size(ov)) {
        size_t n = json_array_size(ov);
        const char **s = calloc(n, sizeof *s);
        if (!s) {
            rd_nomem(r);
            return;
        }
        h->overrides = s;
        for (size_t i = 0; i < n && !r->bad; i++) {
            const char *v = json_string_value(json_array_get(ov, i));
            if (!v) rd_fail(r, "field \"overrides\" must hold strings");
            else if (!(s[i] = adapt_strdup(v))) rd_nomem(r);
            else h->n_overrides = (int)i + 1;
        }
    }
    json_t *ds = rd_typed(r, o, "dataset", 0, JSON_OBJECT);
    if (ds) {
        h->dataset.name = rd_str(r, ds, "name", 0);
        h->dataset.train = rd_int(r, ds, "train", 0, 0, 0, INT64_MAX);
        h->dataset.val = rd_int(r, ds, "val", 0, 0, 0, INT64_MAX);
        h->dataset.test = rd_int(r, ds, "test", 0, 0, 0, INT64_MAX);
        h->dataset.classes = (int)rd_int(r, ds, "classes", 0, 0, 0, 2147483647);
    }
    json_t *m = rd_typed(r, o, "model", 0, JSON_OBJECT);
    if (m) {
        int64_t in[3] = {0, 0, 0};
        h->model.name = rd_str(r, m, "name", 0);
        rd_ints(r, m, "input", 3, 1, in);
        for (int i = 0; i < 3; i++) h->model.input[i] = (int)in[i];
        h->model.classes = (int)rd_int(r, m, "classes", 0, 0, 0, 2147483647);
        h->model.params = rd_int(r, m, "params", 0, 0, 0, INT64_MAX);
        h->model.macs = rd_int(r, m, "macs", 0, 0, 0, INT64_MAX);
        json_t *layers = rd_typed(r, m, "layers", 0, JSON_ARRAY);
        size_t n = json_array_size(layers);
        if (n) {
            struct adapt_trace_layer *l = calloc(n, sizeof *l);
            if (!l) {
                rd_nomem(r);
                return;
            }
            h->model.layers = l;
            h->model.n_layers = (int)n;
            for (size_t i = 0; i < n && !r->bad; i++)
                read_layer(r, json_array_get(layers, i), &l[i]);
        }
    }
    json_t *units = rd_typed(r, o, "units", 0, JSON_ARRAY);
    size_t n = json_array_size(units);
    if (n && !r->bad) {
        struct adapt_trace_unit *u = calloc(n, sizeof *u);
        if (!u) {
            rd_nomem(r);
            return;
        }
        h->units = u;
        h->n_units = (int)n;
        for (size_t i = 0; i < n && !r->bad; i++) {
            json_t *uo = json_array_get(units, i);
            if (!json_is_object(uo)) {
                rd_fail(r, "units entries must be objects");
                break;
            }
            u[i].name = rd_str(r, uo, "name", 0);
            u[i].layer = (int)rd_int(r, uo, "layer", 0, -1, 0, h->model.n_layers - 1);
            u[i].weights = rd_int(r, uo, "weights", 0, 0, 0, INT64_MAX);
            u[i].macs = rd_int(r, uo, "macs", 0, 0, 0, INT64_MAX);
        }
    }
}

static void step_free(struct adapt_trace_step *s)
{
    free(s->units);
    free(s->events);
}

static void read_step(struct rd *r, json_t *o, int n_units, struct adapt_trace_step *s)
{
    s->step = rd_int(r, o, "step", 0, 0, I64_RANGE);
    s->epoch = (int)rd_int(r, o, "epoch", 0, 0, INT_RANGE);
    s->lr = rd_num(r, o, "lr", 0);
    s->loss = rd_num(r, o, "loss", 0);
    int strat = rd_enum(r, o, "strategy", adapt_trace_strategy_names, 4, 1);
    s->strategy = strat < 0 ? ADAPT_TRACE_STRATEGY_NONE : (enum adapt_trace_strategy)strat;
    s->accum = (int)rd_int(r, o, "accum", 1, 0, 0, 2147483647);
    json_t *ov = rd_get(r, o, "overflow", 1);
    if (ov && !json_is_boolean(ov)) rd_fail(r, "field \"overflow\" must be true or false");
    s->overflow = json_is_true(ov);
    json_t *units = rd_typed(r, o, "units", 0, JSON_ARRAY);
    if (r->bad) return;
    if (json_array_size(units) != (size_t)n_units) {
        rd_fail(r, "%zu units, but the header lists %d", json_array_size(units), n_units);
        return;
    }
    if (n_units && !(s->units = calloc((size_t)n_units, sizeof *s->units))) {
        rd_nomem(r);
        return;
    }
    s->n_units = n_units;
    for (int i = 0; i < n_units && !r->bad; i++) {
        json_t *uo = json_array_get(units, (size_t)i);
        struct adapt_trace_unit_state *u = &s->units[i];
        if (!json_is_object(uo)) {
            rd_fail(r, "units entries must be objects");
            break;
        }
        u->wl = (int)rd_int(r, uo, "wl", 0, 0, 0, 64);
        u->fl = (int)rd_int(r, uo, "fl", 0, 0, -64, 64);
        u->lb = rd_num(r, uo, "lb", 1);
        u->r = (int)rd_int(r, uo, "r", 1, -1, 0, 2147483647);
        u->sparsity = rd_num(r, uo, "sparsity", 1);
        u->sat = rd_int(r, uo, "sat", 1, -1, 0, INT64_MAX);
        u->flush = rd_int(r, uo, "flush", 1, -1, 0, INT64_MAX);
        u->act_sat = rd_num(r, uo, "act_sat", 1);
    }
    json_t *events = rd_typed(r, o, "events", 1, JSON_ARRAY);
    size_t ne = json_array_size(events);
    if (!ne || r->bad) return;
    if (!(s->events = calloc(ne, sizeof *s->events))) {
        rd_nomem(r);
        return;
    }
    s->n_events = (int)ne;
    for (size_t i = 0; i < ne && !r->bad; i++) {
        json_t *eo = json_array_get(events, i);
        struct adapt_trace_event *e = &s->events[i];
        int64_t pair[2] = {0, 0};
        if (!json_is_object(eo)) {
            rd_fail(r, "events entries must be objects");
            break;
        }
        e->unit = (int)rd_int(r, eo, "unit", 0, 0, 0, n_units - 1);
        int kind = rd_enum(r, eo, "kind", event_names, 2, 0);
        e->kind = kind == 1 ? ADAPT_TRACE_EVENT_PU : ADAPT_TRACE_EVENT_PD;
        rd_ints(r, eo, "before", 2, 1, pair);
        e->before[0] = (int)pair[0];
        e->before[1] = (int)pair[1];
        rd_ints(r, eo, "after", 2, 1, pair);
        e->after[0] = (int)pair[0];
        e->after[1] = (int)pair[1];
        e->bisect_steps = (int)rd_int(r, eo, "bisect_steps", 1, 0, 0, 2147483647);
        e->kl_evals = (int)rd_int(r, eo, "kl_evals", 1, 0, 0, 2147483647);
        e->sample = rd_int(r, eo, "sample", 1, 0, 0, INT64_MAX);
        e->s = (int)rd_int(r, eo, "s", 1, 0, INT_RANGE);
    }
}

static void read_epoch(struct rd *r, json_t *o, struct adapt_trace_epoch *e)
{
    e->epoch = (int)rd_int(r, o, "epoch", 0, 0, INT_RANGE);
    e->step = rd_int(r, o, "step", 0, 0, I64_RANGE);
    e->lr = rd_num(r, o, "lr", 0);
    e->train_loss = rd_num(r, o, "train_loss", 0);
    e->train_acc = rd_num(r, o, "train_acc", 0);
    e->val_loss = rd_num(r, o, "val_loss", 0);
    e->val_acc = rd_num(r, o, "val_acc", 0);
    e->wall_s = rd_num(r, o, "wall_s", 0);
    e->images_per_s = rd_num(r, o, "images_per_s", 0);
}

/* Appends one zeroed element to a growing array; NULL when out of memory. */
static void *grow(void **arr, int64_t n, int64_t *cap, size_t size)
{
    if (n == *cap) {
        int64_t nc = *cap ? 2 * *cap : 64;
        void *p = realloc(*arr, (size_t)nc * size);
        if (!p) return NULL;
        *arr = p;
        *cap = nc;
    }
    void *e = (char *)*arr + (size_t)n * size;
    memset(e, 0, size);
    return e;
}

enum adapt_status adapt_trace_load(struct adapt_trace **out, const char *path, unsigned flags)
{
    enum adapt_status st = ADAPT_OK;
    struct rd r = {path, 0, "", 0, ADAPT_OK, ""};
    int64_t step_cap = 0, epoch_cap = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                           "%s: cannot open the trace: %s", path, strerror(errno));
    struct adapt_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->path = adapt_strdup(path))) {
        free(t);
        fclose(f);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory reading the trace", path);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = 0;
    errno = 0;
    while ((n = read_line(f, &line, &cap)) > 0) {
        r.line++;
        r.rec = "";
        if (line[n - 1] != '\n') {
            if (flags & ADAPT_TRACE_LOAD_PARTIAL) {
                t->truncated = 1;
                break;
            }
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s:%lld: truncated trace: the last line is incomplete (no newline; "
                             "the run stopped while writing it)",
                             path, (long long)r.line);
            goto fail;
        }
        if (t->has_end) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: record after the end record", path,
                             (long long)r.line);
            goto fail;
        }
        json_error_t err;
        json_t *o = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &err);
        if (!o) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: malformed JSON at column %d: %s", path,
                             (long long)r.line, err.column, err.text);
            goto fail;
        }
        const char *type = json_string_value(json_object_get(o, "type"));
        if (!json_is_object(o) || !type) {
            json_decref(o);
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s:%lld: not a trace record (an object with a \"type\" "
                             "string)",
                             path, (long long)r.line);
            goto fail;
        }
        r.rec = type;
        if (r.line == 1 && strcmp(type, "header")) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s:1: missing header: the first line is a %s record",
                             path, type);
            json_decref(o);
            goto fail;
        }
        if (!strcmp(type, "header")) {
            if (r.line != 1) rd_fail(&r, "a second header");
            else read_header(&r, o, &t->header);
        } else if (!strcmp(type, "step")) {
            struct adapt_trace_step *s = grow((void **)&t->steps, t->n_steps, &step_cap, sizeof *s);
            if (!s) rd_nomem(&r);
            else {
                t->n_steps++;
                read_step(&r, o, t->header.n_units, s);
            }
        } else if (!strcmp(type, "epoch")) {
            struct adapt_trace_epoch *e =
                grow((void **)&t->epochs, t->n_epochs, &epoch_cap, sizeof *e);
            if (!e) rd_nomem(&r);
            else {
                t->n_epochs++;
                read_epoch(&r, o, e);
            }
        } else if (!strcmp(type, "test")) {
            if (t->has_test) rd_fail(&r, "a second test record");
            t->has_test = 1;
            t->test.epoch = (int)rd_int(&r, o, "epoch", 0, 0, INT_RANGE);
            t->test.test_loss = rd_num(&r, o, "test_loss", 0);
            t->test.test_acc = rd_num(&r, o, "test_acc", 0);
        } else if (!strcmp(type, "end")) {
            int s = rd_enum(&r, o, "status", end_names, 2, 0);
            t->end.status = s == 1 ? ADAPT_TRACE_END_STOPPED : ADAPT_TRACE_END_OK;
            t->end.wall_s = rd_num(&r, o, "wall_s", 0);
            t->has_end = 1;
        } else {
            rd_fail(&r, "unknown record type");
        }
        json_decref(o);
        if (r.bad) {
            st = ADAPT_ERROR(r.st, "%s", r.msg);
            goto fail;
        }
        t->n_lines = r.line;
    }
    if (n < 0) {
        st = line_error(path, r.line + 1, n);
        goto fail;
    }
    if (t->n_lines == 0) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: missing header: the trace is empty", path);
        goto fail;
    }
    free(line);
    fclose(f);
    *out = t;
    return ADAPT_OK;
fail:
    free(line);
    fclose(f);
    adapt_trace_free(t);
    return st;
}

void adapt_trace_free(struct adapt_trace *t)
{
    if (!t) return;
    header_free(&t->header);
    for (int64_t i = 0; i < t->n_steps; i++) step_free(&t->steps[i]);
    free(t->steps);
    free(t->epochs);
    free(t->path);
    free(t);
}
