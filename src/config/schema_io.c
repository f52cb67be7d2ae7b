/* src/config/schema_io.c: the typed key table engine's text in and out: the INI reader (inih fed
 * line by line), "section.key=value" assignments, printing as INI and as a man page, JSON. */
#include "src/config/schema.h"

#include <errno.h>
#include <ini.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/config/internal.h"

/* ---------------------------------------------------------- applying keys */

/* Sets section.key from text; `where` names the source for messages. On error
 * the message is written to msg and ADAPT_EINVAL returned (not yet reported). */
static enum adapt_status apply(const struct adapt_schema *s, void *obj, const char *where,
                               const char *section, const char *key, const char *value,
                               int *row_out, char *msg, size_t msg_size)
{
    char list[512], expect[512], why[256];
    if (!schema_section_known(s, section)) {
        schema_section_list(s, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown section [%s] (sections: %s)", where, section, list);
        return ADAPT_EINVAL;
    }
    int row = adapt_schema_find(s, section, key);
    if (row < 0) {
        schema_key_list(s->keys, s->n, section, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown key %s.%s (keys of [%s]: %s)", where, section, key,
                 section, list);
        return ADAPT_EINVAL;
    }
    const struct adapt_schema_key *k = &s->keys[row];
    if (schema_key_parse(k, value, schema_field_ptr(obj, k), why, sizeof why)) {
        schema_key_expect(k, expect, sizeof expect);
        snprintf(msg, msg_size, "%s: %s.%s = \"%.80s\": %s; expected %s%s", where, section, key,
                 value, why, expect, schema_comment_hint(value));
        return ADAPT_EINVAL;
    }
    *row_out = row;
    return ADAPT_OK;
}

/* Shortest "%g" text that reads back to the same double. */
static void format_double(double v, char *buf, size_t size)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* The value of key k as INI text. */
static void key_format(const void *obj, const struct adapt_schema_key *k, char *buf, size_t size)
{
    const void *f = schema_field_cptr(obj, k);
    buf[0] = '\0';
    switch (k->type) {
    case ADAPT_SCHEMA_INT: snprintf(buf, size, "%d", *(const int *)f); break;
    case ADAPT_SCHEMA_I64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)f); break;
    case ADAPT_SCHEMA_DOUBLE: format_double(*(const double *)f, buf, size); break;
    case ADAPT_SCHEMA_BOOL: snprintf(buf, size, "%s", *(const bool *)f ? "true" : "false"); break;
    case ADAPT_SCHEMA_ENUM: snprintf(buf, size, "%s", schema_enum_name(k, *(const int *)f)); break;
    case ADAPT_SCHEMA_STRING: snprintf(buf, size, "\"%s\"", (const char *)f); break;
    case ADAPT_SCHEMA_INTS: {
        const struct adapt_schema_ints *l = f;
        for (int i = 0; i < l->n; i++) schema_buf_add(buf, size, "%s%d", i ? "," : "", l->v[i]);
        break;
    }
    case ADAPT_SCHEMA_PAIRS: {
        const struct adapt_schema_pairs *p = f;
        for (int i = 0; i < p->n; i++)
            schema_buf_add(buf, size, "%s%d:%d", i ? "," : "", p->a[i], p->b[i]);
        break;
    }
    }
}

/* ------------------------------------------------------------- INI files */

/* State shared by the inih reader and handler while loading a file. */
struct load_state {
    const struct adapt_schema *schema;
    void *obj;
    const char *path;
    const char *buf;
    size_t len, pos;
    int line;            /* lines handed to inih so far */
    int *seen;           /* (schema->n) line where each key was set in this file, 0 = not yet */
    int *headers;        /* per named family f, item i: named_base[f] + i, the line of its
                            header in this file, 0 = none yet */
    int named_base[8];
    enum adapt_status st; /* first error found by the reader or handler */
    int err_line;
    char msg[2048];
};

/* A section header that is not a fixed section: [PREFIX NAME] starts (and resets) the item
 * NAME, once per file. 0 with ls->st set when it is no such header or is refused. */
static int named_header(struct load_state *ls, const char *section)
{
    char prefix[64], name[128], list[512];
    const struct adapt_schema_named *f = NULL;
    int words = schema_split_named(section, prefix, sizeof prefix, name, sizeof name);
    if (words >= 1) f = schema_named_family(ls->schema, prefix);
    ls->st = ADAPT_EINVAL;
    ls->err_line = ls->line;
    if (!f) {
        schema_section_list(ls->schema, list, sizeof list);
        snprintf(ls->msg, sizeof ls->msg, "%s:%d: unknown section [%s] (sections: %s)", ls->path,
                 ls->line, section, list);
        return 0;
    }
    char where[1100];
    snprintf(where, sizeof where, "%s:%d", ls->path, ls->line);
    if (words != 2) {
        snprintf(ls->msg, sizeof ls->msg, "%s: section [%s] needs one name: [%s NAME]", where,
                 section, f->prefix);
        return 0;
    }
    int i = schema_item_get(f, ls->obj, where, name, ls->line, ls->msg, sizeof ls->msg);
    if (i < 0) return 0;
    int *first = &ls->headers[ls->named_base[f - ls->schema->named] + i];
    if (*first) {
        snprintf(ls->msg, sizeof ls->msg, "%s: duplicate section [%s %s] (first on line %d)",
                 where, f->prefix, name, *first);
        return 0;
    }
    *first = ls->line;
    schema_item_reset(f, schema_item_at(f, ls->obj, i), name,
                      ls->line); /* the section defines it whole */
    ls->st = ADAPT_OK;
    return 1;
}

static char *load_reader(char *str, int num, void *stream)
{
    struct load_state *ls = stream;
    if (ls->st != ADAPT_OK || ls->pos >= ls->len) return NULL;
    const char *p = ls->buf + ls->pos;
    size_t rest = ls->len - ls->pos;
    const char *nl = memchr(p, '\n', rest);
    size_t n = nl ? (size_t)(nl - p) + 1 : rest;
    ls->pos += n;
    ls->line++;
    size_t skip = 0;
    while (skip < n && (p[skip] == ' ' || p[skip] == '\t')) skip++;
    if (skip < n && (p[skip] == ';' || p[skip] == '#')) {
        /* a comment: its length does not matter to anyone */
        strcpy(str, "#\n");
        return str;
    }
    if (n - skip > (size_t)num - 1) {
        ls->st = ADAPT_EFORMAT;
        ls->err_line = ls->line;
        snprintf(ls->msg, sizeof ls->msg, "%s:%d: line longer than %d characters (the INI "
                 "reader's line buffer)", ls->path, ls->line, num - 2);
        return NULL;
    }
    memcpy(str, p + skip, n - skip);
    str[n - skip] = '\0';
    if (str[0] == '[') {
        char *close = strchr(str, ']');
        if (close) {
            char name[256];
            size_t m = (size_t)(close - str - 1);
            if (m >= sizeof name) m = sizeof name - 1;
            memcpy(name, str + 1, m);
            name[m] = '\0';
            if (!schema_section_known(ls->schema, name) && !named_header(ls, name)) return NULL;
        }
    }
    return str;
}

#if INI_HANDLER_LINENO
static int load_handler(void *user, const char *section, const char *name, const char *value,
                        int lineno)
#else
static int load_handler(void *user, const char *section, const char *name, const char *value)
#endif
{
    struct load_state *ls = user;
    char where[1100];
    int row;
    if (ls->st != ADAPT_OK) return 0;
    snprintf(where, sizeof where, "%s:%d", ls->path, ls->line);
    if (!section[0]) {
        ls->st = ADAPT_EINVAL;
        snprintf(ls->msg, sizeof ls->msg, "%s: key \"%s\" before any [section] header", where,
                 name);
    } else if (!value) {
        ls->st = ADAPT_EFORMAT;
        snprintf(ls->msg, sizeof ls->msg, "%s: key %s.%s has no value", where, section, name);
    } else if (!schema_section_known(ls->schema,
                                     section)) { /* [PREFIX NAME]: named_header made it */
        char prefix[64], iname[128];
        schema_split_named(section, prefix, sizeof prefix, iname, sizeof iname);
        const struct adapt_schema_named *f = schema_named_family(ls->schema, prefix);
        int i = f ? schema_item_find(f, ls->obj, iname) : -1;
        ADAPT_ASSERT(i >= 0);
        ls->st = schema_apply_named(f, schema_item_at(f, ls->obj, i), where, name, value, ls->line,
                                    ls->msg, sizeof ls->msg);
    } else if ((row = adapt_schema_find(ls->schema, section, name)) >= 0 && ls->seen[row]) {
        ls->st = ADAPT_EINVAL;
        snprintf(ls->msg, sizeof ls->msg, "%s: duplicate key %s.%s (first set on line %d)", where,
                 section, name, ls->seen[row]);
    } else {
        ls->st = apply(ls->schema, ls->obj, where, section, name, value, &row, ls->msg,
                       sizeof ls->msg);
        if (ls->st == ADAPT_OK) ls->seen[row] = ls->line;
    }
    if (ls->st == ADAPT_OK) return 1;
    ls->err_line = ls->line;
    return 0;
}

/* Reads a whole text file (at most 1 MiB) into a NUL-terminated buffer. */
static enum adapt_status read_text(const char *path, char **out, size_t *len)
{
    enum { LIMIT = 1 << 20 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                           "%s: cannot open configuration file: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read configuration file: is a directory", path);
    }
    char *buf = malloc(LIMIT + 1);
    if (!buf) {
        fclose(f);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory reading the configuration", path);
    }
    size_t n = fread(buf, 1, LIMIT + 1, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err) {
        free(buf);
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot read configuration file: %s", path,
                           strerror(err));
    }
    if (n > LIMIT) {
        free(buf);
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: configuration file larger than %d bytes", path,
                           LIMIT);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ADAPT_OK;
}

enum adapt_status adapt_schema_load(const struct adapt_schema *s, void *obj, const char *path,
                                    int *lines)
{
    enum adapt_status st;
    char *text = NULL;
    size_t len = 0;
    if ((st = read_text(path, &text, &len)) != ADAPT_OK) return st;

    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++) line += *p == '\n';
        free(text);
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%d: NUL byte: not a text file", path, line);
    }

    void *tmp = malloc(s->size);
    struct load_state *ls = calloc(1, sizeof *ls);
    int nitems = 0;
    ADAPT_ASSERT(s->nnamed <= 8);
    if (ls)
        for (int f = 0; f < s->nnamed; f++) {
            ls->named_base[f] = nitems;
            nitems += s->named[f].max;
        }
    int *headers = calloc((size_t)nitems + 1, sizeof *headers);
    if (!tmp || !ls || !headers) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory loading the configuration", path);
        goto free_state;
    }
    memcpy(tmp, obj, s->size);
    memset(lines, 0, (size_t)s->n * sizeof *lines);
    ls->schema = s;
    ls->obj = tmp;
    ls->path = path;
    ls->buf = text;
    ls->len = len;
    ls->seen = lines;
    ls->headers = headers;

    int r = ini_parse_stream(load_reader, ls, load_handler, ls);
    if (r > 0 && (ls->st == ADAPT_OK || r < ls->err_line)) {
        /* inih's own syntax error, on a line before any error of ours */
        const char *p = text;
        for (int line = 1; line < r; line++) p = strchr(p, '\n') + 1;
        size_t n = strcspn(p, "\r\n");
        st = ADAPT_ERROR(
            ADAPT_EFORMAT,
            "%s:%d: malformed line \"%.*s\": expected [section], key = value, a comment "
            "(; or #) or a blank line",
            path, r, n > 80 ? 80 : (int)n, p);
    } else if (ls->st != ADAPT_OK) {
        st = ADAPT_ERROR(ls->st, "%s", ls->msg);
    } else if (r < 0) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory parsing the configuration", path);
    } else {
        memcpy(obj, tmp, s->size);
        st = ADAPT_OK;
    }
free_state:
    free(headers);
    free(ls);
    free(tmp);
    free(text);
    return st;
}

/* ----------------------------------------------------------- assignments */

enum adapt_status adapt_schema_set(const struct adapt_schema *s, void *obj, const char *where,
                                   const char *assignment, int *row)
{
    char msg[2048];
    size_t len = strlen(assignment);
    char *copy = malloc(len + 1);
    void *tmp = malloc(s->size);
    enum adapt_status st;
    if (!copy || !tmp) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s %s: out of memory", where, assignment);
        goto free_copies;
    }
    memcpy(copy, assignment, len + 1);
    char *eq = strchr(copy, '=');
    char *dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
    if (!eq || !dot) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "%s \"%s\": expected section.key=value", where,
                         assignment);
        goto free_copies;
    }
    *eq = '\0';
    *dot = '\0';
    char *section = schema_trim(copy), *key = schema_trim(dot + 1), *value = schema_trim(eq + 1);
    memcpy(tmp, obj, s->size);
    const struct adapt_schema_named *f =
        schema_section_known(s, section) ? NULL : schema_named_family(s, section);
    if (f) { /* PREFIX.NAME.KEY */
        char *dot2 = strchr(key, '.');
        char src[1200];
        snprintf(src, sizeof src, "%s %s", where, assignment);
        if (!dot2) {
            st = ADAPT_ERROR(ADAPT_EINVAL, "%s \"%s\": expected %s.NAME.KEY=value", where,
                             assignment, f->prefix);
            goto free_copies;
        }
        *dot2 = '\0';
        char *name = schema_trim(key);
        key = schema_trim(dot2 + 1);
        int i = schema_item_get(f, tmp, src, name, 0, msg, sizeof msg);
        st = i < 0 ? ADAPT_EINVAL
                   : schema_apply_named(f, schema_item_at(f, tmp, i), src, key, value, -1, msg,
                                        sizeof msg);
        *row = -1;
    } else {
        st = apply(s, tmp, where, section, key, value, row, msg, sizeof msg);
    }
    if (st != ADAPT_OK) {
        st = ADAPT_ERROR(st, "%s", msg);
        goto free_copies;
    }
    memcpy(obj, tmp, s->size);
free_copies:
    free(tmp);
    free(copy);
    return st;
}

/* -------------------------------------------------------------- printing */

enum adapt_status adapt_schema_print(const struct adapt_schema *s, const void *obj, FILE *f,
                                     unsigned flags)
{
    char value[ADAPT_SCHEMA_LIST_MAX * 24 + 1100], expect[512];
    for (int i = 0; i < s->n; i++) {
        const struct adapt_schema_key *k = &s->keys[i];
        if (i == 0 || strcmp(k->section, s->keys[i - 1].section))
            fprintf(f, "%s[%s]\n", i || (flags & ADAPT_SCHEMA_PRINT_HELP) ? "\n" : "",
                    k->section);
        if (flags & ADAPT_SCHEMA_PRINT_HELP) {
            schema_key_expect(k, expect, sizeof expect);
            fprintf(f, "# %s (%s; default %s)\n", k->help, expect, k->def[0] ? k->def : "empty");
        }
        key_format(obj, k, value, sizeof value);
        fprintf(f, "%s = %s\n", k->key, value);
    }
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *fam = &s->named[g];
        for (int i = 0; i < schema_citem_count(fam, obj); i++) {
            const struct adapt_schema_item *it = schema_citem_at(fam, obj, i);
            fprintf(f, "\n[%s %s]\n", fam->prefix, it->name);
            for (int r = 0; r < fam->n; r++) {
                const struct adapt_schema_key *k = &fam->keys[r];
                if (!it->set[r]) continue;
                if (flags & ADAPT_SCHEMA_PRINT_HELP) {
                    schema_key_expect(k, expect, sizeof expect);
                    fprintf(f, "# %s (%s)\n", k->help, expect);
                }
                key_format(it, k, value, sizeof value);
                fprintf(f, "%s = %s\n", k->key, value);
            }
        }
    }
    if (fflush(f) != 0 || ferror(f))
        return ADAPT_ERROR(ADAPT_EIO, "cannot write the configuration: %s", strerror(errno));
    return ADAPT_OK;
}

void adapt_schema_roff_text(FILE *f, const char *text)
{
    int bol = 1; /* at the beginning of an output line */
    for (const char *p = text; *p; p++) {
        if (bol && (*p == '.' || *p == '\'')) fputs("\\&", f);
        if (*p == '\\') fputs("\\e", f);
        else if (*p == '-') fputs("\\-", f);
        else fputc(*p, f);
        bol = *p == '\n';
    }
}

/* One key as a tagged paragraph; with_default: name the default (the keys of named sections
 * have none of their own to name: theirs may depend on other keys). */
static void key_man(FILE *f, const struct adapt_schema_key *k, int with_default)
{
    char expect[512];
    schema_key_expect(k, expect, sizeof expect);
    fputs(".TP\n.B ", f);
    adapt_schema_roff_text(f, k->key);
    fputs("\n", f);
    adapt_schema_roff_text(f, k->help ? k->help : "");
    fputs(".\nAccepts ", f);
    adapt_schema_roff_text(f, expect);
    if (with_default) {
        fputs("; default ", f);
        if (k->def[0]) {
            fputs("\\fB", f);
            adapt_schema_roff_text(f, k->def);
            fputs("\\fR", f);
        } else {
            fputs("empty", f);
        }
    }
    fputs(".\n", f);
}

enum adapt_status adapt_schema_print_man(const struct adapt_schema *s, FILE *f)
{
    for (int i = 0; i < s->n; i++) {
        const struct adapt_schema_key *k = &s->keys[i];
        if (i == 0 || strcmp(k->section, s->keys[i - 1].section)) {
            fputs(".SS \"[", f);
            adapt_schema_roff_text(f, k->section);
            fputs("]\"\n", f);
        }
        key_man(f, k, 1);
    }
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *fam = &s->named[g];
        fputs(".SS \"[", f);
        adapt_schema_roff_text(f, fam->prefix);
        fprintf(f, " NAME]\"\nAt most %d such sections; NAME is a letter or '_' followed by "
                "letters, digits and '_' (at most %d characters).\n",
                fam->max, ADAPT_SCHEMA_NAME_MAX - 1);
        for (int r = 0; r < fam->n; r++) key_man(f, &fam->keys[r], 0);
    }
    if (fflush(f) != 0 || ferror(f))
        return ADAPT_ERROR(ADAPT_EIO, "cannot write the key reference: %s", strerror(errno));
    return ADAPT_OK;
}

static json_t *key_json(const void *obj, const struct adapt_schema_key *k)
{
    const void *f = schema_field_cptr(obj, k);
    switch (k->type) {
    case ADAPT_SCHEMA_INT: return json_integer(*(const int *)f);
    case ADAPT_SCHEMA_I64: return json_integer((json_int_t) * (const int64_t *)f);
    case ADAPT_SCHEMA_DOUBLE: return json_real(*(const double *)f);
    case ADAPT_SCHEMA_BOOL: return json_boolean(*(const bool *)f);
    case ADAPT_SCHEMA_ENUM: return json_string(schema_enum_name(k, *(const int *)f));
    case ADAPT_SCHEMA_STRING: return json_string((const char *)f);
    case ADAPT_SCHEMA_INTS: {
        const struct adapt_schema_ints *l = f;
        json_t *a = json_array();
        for (int i = 0; a && i < l->n; i++)
            if (json_array_append_new(a, json_integer(l->v[i]))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    case ADAPT_SCHEMA_PAIRS: {
        const struct adapt_schema_pairs *p = f;
        json_t *a = json_array();
        for (int i = 0; a && i < p->n; i++)
            if (json_array_append_new(a, json_pack("[ii]", p->a[i], p->b[i]))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    }
    return NULL;
}

json_t *adapt_schema_to_json(const struct adapt_schema *s, const void *obj)
{
    json_t *root = json_object();
    if (!root) return NULL;
    for (int i = 0; i < s->n; i++) {
        const struct adapt_schema_key *k = &s->keys[i];
        json_t *sec = json_object_get(root, k->section);
        if (!sec) {
            sec = json_object();
            if (json_object_set_new(root, k->section, sec)) goto free_root;
        }
        if ((k->flags & ADAPT_SCHEMA_OMIT_DEFAULT) && k->type == ADAPT_SCHEMA_ENUM &&
            !strcmp(schema_enum_name(k, *(const int *)schema_field_cptr(obj, k)), k->def))
            continue;
        if ((k->flags & ADAPT_SCHEMA_OMIT_DEFAULT) && k->type == ADAPT_SCHEMA_STRING &&
            !strcmp((const char *)schema_field_cptr(obj, k), k->def))
            continue;
        if (json_object_set_new(sec, k->key, key_json(obj, k))) goto free_root;
    }
    /* a section whose every key was left out is left out too */
    const char *name;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(root, tmp, name, v) if (json_is_object(v) && json_object_size(v) == 0)
        json_object_del(root, name);
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *fam = &s->named[g];
        if (!schema_citem_count(fam, obj)) continue;
        json_t *sec = json_object();
        if (json_object_set_new(root, fam->prefix, sec)) goto free_root;
        for (int i = 0; i < schema_citem_count(fam, obj); i++) {
            const struct adapt_schema_item *it = schema_citem_at(fam, obj, i);
            json_t *o = json_object();
            if (json_object_set_new(sec, it->name, o)) goto free_root;
            for (int r = 0; r < fam->n; r++)
                if (it->set[r] &&
                    json_object_set_new(o, fam->keys[r].key, key_json(it, &fam->keys[r])))
                    goto free_root;
        }
    }
    return root;
free_root:
    json_decref(root);
    return NULL;
}
