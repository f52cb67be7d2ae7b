/* src/trace/read.c: the validating trace reader (schema 1): the record vocabulary, the bounded
 * line reader, lines into JSON records and adapt_trace_load; the records' fields are read in
 * read_records.c. See trace.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/trace/internal.h"
#include "src/trace/trace.h"

/* ----------------------------------------------------------------- common */

/* The strategy's names in the trace, by enum value (shared with the configuration). */
const char *const adapt_trace_role_names[ADAPT_TRACE_ROLES] = {
    "weight", "bias", "input", "output", "grad_weight", "grad_bias", "grad_output", "grad_input",
    "master"};
const char *const adapt_trace_scaled_role_names[ADAPT_TRACE_SCALED_ROLES] = {"weight", "input",
                                                                            "grad_output"};
const char *const adapt_trace_strategy_names[ADAPT_TRACE_STRATEGY_MAX + 1] = {NULL, "min", "mean",
                                                                             "max"};
const char *const adapt_trace_event_names[2] = {"pd", "pu"};
const char *const adapt_trace_end_names[2] = {"ok", "stopped"};

const char *adapt_trace_strategy_name(enum adapt_trace_strategy s)
{
    if ((int)s < 0 || (int)s > ADAPT_TRACE_STRATEGY_MAX) return NULL;
    return adapt_trace_strategy_names[s];
}

/* ----------------------------------------------------------------- lines */

ssize_t adapt_trace_read_line(FILE *f, char **buf, size_t *cap)
{
    size_t len = 0;
    int c = 0;
    while ((c = getc(f)) != EOF) {
        if (len + 1 >= *cap) {
            if (*cap > ADAPT_TRACE_LINE_MAX) return -2;
            size_t nc = *cap ? 2 * *cap : 4096;
            if (nc > ADAPT_TRACE_LINE_MAX + 2) nc = ADAPT_TRACE_LINE_MAX + 2;
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

enum adapt_status adapt_trace_line_error(const char *path, int64_t line, ssize_t n)
{
    if (n == -2)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: line longer than %zu bytes: not a trace "
                           "record", path, (long long)line, ADAPT_TRACE_LINE_MAX);
    if (errno == ENOMEM)
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s:%lld: out of memory reading the trace", path,
                           (long long)line);
    return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read the trace: %s", path, strerror(errno));
}

/* jansson's allocations during one adapt_trace_parse_json, through the allocator that was set
 * (the C library's unless a program set its own), with a failure recorded. */
static json_malloc_t parse_malloc;
static _Thread_local int parse_oom;

static void *parse_counting_malloc(size_t n)
{
    void *p = parse_malloc(n);
    if (!p) parse_oom = 1;
    return p;
}

json_t *adapt_trace_parse_json(const char *line, size_t n, size_t flags, json_error_t *err,
                               int *oom)
{
    json_free_t free_fn;
    json_get_alloc_funcs(&parse_malloc, &free_fn);
    json_set_alloc_funcs(parse_counting_malloc, free_fn);
    parse_oom = 0;
    json_t *o = json_loadb(line, n, flags, err);
    json_set_alloc_funcs(parse_malloc, free_fn);
    /* a failure to set up jansson's lexer returns NULL with the error text left empty */
    *oom = parse_oom || (!o && (json_error_code(err) == json_error_out_of_memory || !err->text[0]));
    if (*oom) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* ----------------------------------------------------------------- reader */

/* Whether the JSON text nests more than `max` arrays and objects (brackets in strings do not
 * count; malformed text is left to the parser). */
static int nested_deeper(const char *s, size_t n, int max)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max) return 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

/* 1 when a line (n bytes) reads as a line of an INI file and not as JSON: a comment (';' or
 * '#'), a [section] header or key = value. */
static int ini_like(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i == n) return 0;
    if (s[i] == ';' || s[i] == '#') return 1;
    int header = s[i] == '[';
    if (header) i++;
    size_t start = i;
    while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-' ||
                     (header && s[i] == ' ')))
        i++;
    if (i == start || !isalpha((unsigned char)s[start])) return 0;
    if (header) return i < n && s[i] == ']';
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    return i < n && s[i] == '=';
}

/* Parses one complete line (n bytes, '\n' included) into a record object with a "type"
 * string, sets r.rec to that type and checks that only the first line is a header. */
static enum adapt_status parse_line(struct adapt_trace_loader *ld, const char *line, ssize_t n,
                                    json_t **rec)
{
    const char *path = ld->r.path;
    long long ln = (long long)ld->r.line;
    if (ld->t->has_end)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: record after the end record", path, ln);
    if (nested_deeper(line, (size_t)n, ADAPT_TRACE_DEPTH_MAX))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:%lld: JSON nested deeper than %d arrays and objects: not a trace "
                           "record",
                           path, ln, ADAPT_TRACE_DEPTH_MAX);
    json_error_t err;
    int oom;
    json_t *o = adapt_trace_parse_json(line, (size_t)n, JSON_REJECT_DUPLICATES, &err, &oom);
    if (oom) return ADAPT_ERROR(ADAPT_ENOMEM, "%s:%lld: out of memory reading the trace", path, ln);
    if (!o && ln == 1 && ini_like(line, (size_t)n))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:1: not a trace (it looks like a configuration file): a trace is "
                           "the trace.jsonl adapt-train writes in its run directory",
                           path);
    if (!o)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: malformed JSON at column %d: %s", path, ln,
                           err.column, err.text);
    const char *type = json_string_value(json_object_get(o, "type"));
    if (!json_is_object(o) || !type) {
        json_decref(o);
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:%lld: not a trace record (an object with a \"type\" string)", path,
                           ln);
    }
    ld->r.rec = type;
    if (ln == 1 && strcmp(type, "header")) {
        enum adapt_status st = ADAPT_ERROR(
            ADAPT_EFORMAT, "%s:1: missing header: the first line is a %s record", path, type);
        json_decref(o);
        return st;
    }
    *rec = o;
    return ADAPT_OK;
}

/* Reads the lines of f into ld->t until the end of the file (or an incomplete last line
 * with ADAPT_TRACE_LOAD_PARTIAL). */
static enum adapt_status read_lines(struct adapt_trace_loader *ld, FILE *f, unsigned flags)
{
    enum adapt_status st = ADAPT_OK;
    struct adapt_trace_rd *r = &ld->r;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = 0;
    errno = 0;
    while ((n = adapt_trace_read_line(f, &line, &cap)) > 0) {
        r->line++;
        r->rec = "";
        if (line[n - 1] != '\n') {
            if (flags & ADAPT_TRACE_LOAD_PARTIAL) {
                ld->t->truncated = 1;
                break;
            }
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s:%lld: truncated trace: the last line is incomplete (no newline; "
                             "the run stopped while writing it)",
                             r->path, (long long)r->line);
            goto free_line;
        }
        json_t *o = NULL;
        if ((st = parse_line(ld, line, n, &o)) != ADAPT_OK) goto free_line;
        adapt_trace_read_record(ld, o, r->rec);
        json_decref(o);
        if (r->bad) {
            st = ADAPT_ERROR(r->st, "%s", r->msg);
            goto free_line;
        }
        ld->t->n_lines = r->line;
    }
    if (n < 0) st = adapt_trace_line_error(r->path, r->line + 1, n);
free_line:
    free(line);
    return st;
}

enum adapt_status adapt_trace_load(struct adapt_trace **out, const char *path, unsigned flags)
{
    struct adapt_trace_loader ld = {{path, 0, "", 0, ADAPT_OK, ""}, NULL, 0, 0, 0, 0, 0};
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
    ld.t = t;
    enum adapt_status st = read_lines(&ld, f, flags);
    fclose(f);
    if (st == ADAPT_OK && t->n_lines == 0)
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: missing header: the trace is empty", path);
    if (st != ADAPT_OK) {
        adapt_trace_free(t);
        return st;
    }
    *out = t;
    return ADAPT_OK;
}
