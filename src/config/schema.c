/* src/config/schema.c: the typed key table engine: ranges, value parsing and printing, the
 * INI reader (inih fed line by line), "section.key=value" assignments, JSON and equality. */
#include "src/config/schema.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/fileio.h"

/* ---------------------------------------------------------------- helpers */

static void *field_ptr(void *obj, const struct adapt_schema_key *k)
{
    return (char *)obj + k->offset;
}

static const void *field_cptr(const void *obj, const struct adapt_schema_key *k)
{
    return (const char *)obj + k->offset;
}

static int section_known(const struct adapt_schema *s, const char *section)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i].section, section)) return 1;
    return 0;
}

int adapt_schema_find(const struct adapt_schema *s, const char *section, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i].section, section) && !strcmp(s->keys[i].key, key)) return i;
    return -1;
}

/* Appends with snprintf semantics, never overflowing. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void buf_add(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* "run, data, model, ..." */
static void section_list(const struct adapt_schema *s, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(s->keys[j].section, s->keys[i].section)) first = 0;
        if (first) buf_add(buf, size, "%s%s", i ? ", " : "", s->keys[i].section);
    }
    for (int f = 0; f < s->nnamed; f++) buf_add(buf, size, ", %s NAME", s->named[f].prefix);
}

/* "seed, out, threads, ...": the keys of `section` among n rows */
static void key_list(const struct adapt_schema_key *keys, int n, const char *section, char *buf,
                     size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i].section, section))
            buf_add(buf, size, "%s%s", buf[0] ? ", " : "", keys[i].key);
}

/* The name of value v of an enum key, NULL when it has none. */
static const char *enum_name(const struct adapt_schema_key *k, int v)
{
    return v >= 0 && v < k->choices->n ? k->choices->names[v] : NULL;
}

/* The i-th value of an enum key in listing order. */
static int enum_value_at(const struct adapt_schema_key *k, int i)
{
    return k->choices->order ? k->choices->order[i] : i;
}

/* A numeric range "[lo, hi]" with "(" / ")" for open ends. */
struct range {
    int lo_open, hi_open;
    double lo, hi;
    int64_t ilo, ihi;
};

static void range_parse(const char *s, int integer, struct range *r)
{
    char *end;
    ADAPT_ASSERT(s[0] == '[' || s[0] == '(');
    r->lo_open = s[0] == '(';
    errno = 0;
    if (integer) {
        r->ilo = strtoll(s + 1, &end, 10);
        r->lo = (double)r->ilo;
    } else {
        r->lo = strtod(s + 1, &end);
    }
    ADAPT_ASSERT(errno == 0 && end[0] == ',' && end[1] == ' ');
    s = end + 2;
    if (integer) {
        r->ihi = strtoll(s, &end, 10);
        r->hi = (double)r->ihi;
    } else {
        r->hi = strtod(s, &end);
    }
    ADAPT_ASSERT(errno == 0 && (end[0] == ']' || end[0] == ')') && end[1] == '\0');
    r->hi_open = end[0] == ')';
    ADAPT_ASSERT(!integer || (!r->lo_open && !r->hi_open));
}

static int range_has_int(const char *range, int64_t v)
{
    struct range r;
    if (!range) return 1;
    range_parse(range, 1, &r);
    return v >= r.ilo && v <= r.ihi;
}

static int range_has_double(const char *range, double v)
{
    struct range r;
    if (!range) return 1;
    range_parse(range, 0, &r);
    if (r.lo_open ? !(v > r.lo) : !(v >= r.lo)) return 0;
    if (r.hi_open ? !(v < r.hi) : !(v <= r.hi)) return 0;
    return 1;
}

/* What a key accepts, for messages and help. */
static void key_expect(const struct adapt_schema_key *k, char *buf, size_t size)
{
    buf[0] = '\0';
    switch (k->type) {
    case ADAPT_SCHEMA_INT:
    case ADAPT_SCHEMA_I64: buf_add(buf, size, "an integer in %s", k->range); break;
    case ADAPT_SCHEMA_DOUBLE: buf_add(buf, size, "a number in %s", k->range); break;
    case ADAPT_SCHEMA_BOOL: buf_add(buf, size, "true or false"); break;
    case ADAPT_SCHEMA_STRING:
        buf_add(buf, size, "a string of at most %zu characters", k->size - 1);
        break;
    case ADAPT_SCHEMA_ENUM: {
        int listed = 0;
        buf_add(buf, size, "one of ");
        for (int i = 0; i < k->choices->n; i++) {
            const char *name = enum_name(k, enum_value_at(k, i));
            if (name) buf_add(buf, size, "%s%s", listed++ ? ", " : "", name);
        }
        break;
    }
    case ADAPT_SCHEMA_INTS:
        buf_add(buf, size, "a comma-separated list of %sintegers in %s",
                (k->flags & ADAPT_SCHEMA_INCREASING) ? "increasing " : "", k->range);
        break;
    case ADAPT_SCHEMA_PAIRS:
        buf_add(buf, size, "a comma-separated list of %s:%s pairs with %s in %s and %s in %s",
                k->labels[0], k->labels[1], k->labels[0], k->range, k->labels[1], k->range2);
        break;
    }
}

/* Parses a whole decimal integer. 0 ok, 1 not an integer, 2 does not fit in 64 bits. */
static int parse_i64(const char *s, int64_t *v)
{
    char *end;
    if (!*s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return 1;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end) return 1;
    if (errno == ERANGE) return 2;
    *v = x;
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

/* One list entry: an integer in range. 0 ok, else writes the reason. */
static int parse_entry(const char *text, const char *range, int *out, char *why, size_t why_size)
{
    int64_t v;
    int r = parse_i64(text, &v);
    if (r == 1) {
        snprintf(why, why_size, "entry \"%.40s\" is not an integer", text);
        return 1;
    }
    if (r == 2 || !range_has_int(range, v)) {
        snprintf(why, why_size, "entry %.40s is out of range", text);
        return 1;
    }
    *out = (int)v;
    return 0;
}

/* Parses a list or pair list into field. 0 on success; otherwise why says what is wrong. */
static int parse_list(const struct adapt_schema_key *k, const char *text, void *field, char *why,
                      size_t why_size)
{
    char copy[4096];
    if (strlen(text) >= sizeof copy) {
        snprintf(why, why_size, "too long");
        return 1;
    }
    strcpy(copy, text);
    char *s = trim(copy);
    int n = 0;
    int *va = k->type == ADAPT_SCHEMA_INTS ? ((struct adapt_schema_ints *)field)->v
                                           : ((struct adapt_schema_pairs *)field)->a;
    int *vb = k->type == ADAPT_SCHEMA_PAIRS ? ((struct adapt_schema_pairs *)field)->b : NULL;
    while (*s) {
        char *comma = strchr(s, ',');
        if (comma) *comma = '\0';
        char *item = trim(s);
        if (!*item) {
            snprintf(why, why_size, "entry %d is empty", n + 1);
            return 1;
        }
        if (n == ADAPT_SCHEMA_LIST_MAX) {
            snprintf(why, why_size, "more than %d entries", ADAPT_SCHEMA_LIST_MAX);
            return 1;
        }
        if (k->type == ADAPT_SCHEMA_INTS) {
            if (parse_entry(item, k->range, &va[n], why, why_size)) return 1;
            if ((k->flags & ADAPT_SCHEMA_INCREASING) && n > 0 && va[n] <= va[n - 1]) {
                snprintf(why, why_size, "entries not increasing (%d after %d)", va[n],
                         va[n - 1]);
                return 1;
            }
        } else {
            char *colon = strchr(item, ':');
            if (!colon) {
                snprintf(why, why_size, "entry \"%.40s\" is not %s:%s", item, k->labels[0],
                         k->labels[1]);
                return 1;
            }
            *colon = '\0';
            char *a = trim(item), *b = trim(colon + 1);
            char sub[128];
            if (parse_entry(a, k->range, &va[n], sub, sizeof sub) ||
                parse_entry(b, k->range2, &vb[n], sub, sizeof sub)) {
                snprintf(why, why_size, "pair %d (%s:%s): %s", n + 1, a, b, sub);
                return 1;
            }
        }
        n++;
        if (!comma) break;
        s = comma + 1;
        if (!*trim(s)) {
            snprintf(why, why_size, "entry %d is empty", n + 1);
            return 1;
        }
    }
    if (k->type == ADAPT_SCHEMA_INTS)
        ((struct adapt_schema_ints *)field)->n = n;
    else
        ((struct adapt_schema_pairs *)field)->n = n;
    return 0;
}

/* What to add to the error of a value that holds " #": inih takes only ';' for a comment after
 * a value, so "epochs = 2 # two" hands "2 # two" to the value parser. "" otherwise. */
static const char *comment_hint(const char *value)
{
    for (const char *p = value; (p = strchr(p, '#')) != NULL; p++)
        if (p > value && (p[-1] == ' ' || p[-1] == '\t'))
            return "; inline comments start with ';' (inih): '#' starts a comment only at the "
                   "beginning of a line";
    return "";
}

/* Parses text into the field of key k. 0 on success; otherwise why says what is wrong. */
static int key_parse(const struct adapt_schema_key *k, const char *text, void *field, char *why,
                     size_t why_size)
{
    why[0] = '\0';
    switch (k->type) {
    case ADAPT_SCHEMA_INT:
    case ADAPT_SCHEMA_I64: {
        int64_t v;
        int r = parse_i64(text, &v);
        if (r == 1) {
            snprintf(why, why_size, "not an integer");
            return 1;
        }
        if (r == 2 || !range_has_int(k->range, v)) {
            snprintf(why, why_size, "out of range");
            return 1;
        }
        if (k->type == ADAPT_SCHEMA_INT) {
            ADAPT_ASSERT(k->size == sizeof(int));
            *(int *)field = (int)v;
        } else {
            ADAPT_ASSERT(k->size == sizeof(int64_t));
            *(int64_t *)field = v;
        }
        return 0;
    }
    case ADAPT_SCHEMA_DOUBLE: {
        char *end;
        errno = 0;
        double v = *text ? strtod(text, &end) : 0.0;
        if (!*text || *end || end == text) {
            snprintf(why, why_size, "not a number");
            return 1;
        }
        if (!isfinite(v) || !range_has_double(k->range, v)) {
            snprintf(why, why_size, "out of range");
            return 1;
        }
        ADAPT_ASSERT(k->size == sizeof(double));
        *(double *)field = v;
        return 0;
    }
    case ADAPT_SCHEMA_BOOL: {
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};
        ADAPT_ASSERT(k->size == sizeof(bool));
        for (int i = 0; i < 4; i++) {
            if (!strcmp(text, yes[i])) {
                *(bool *)field = true;
                return 0;
            }
            if (!strcmp(text, no[i])) {
                *(bool *)field = false;
                return 0;
            }
        }
        snprintf(why, why_size, "not a boolean");
        return 1;
    }
    case ADAPT_SCHEMA_ENUM:
        ADAPT_ASSERT(k->size == sizeof(int));
        for (int v = 0; v < k->choices->n; v++)
            if (k->choices->names[v] && !strcmp(text, k->choices->names[v])) {
                *(int *)field = v;
                return 0;
            }
        snprintf(why, why_size, "value not allowed");
        return 1;
    case ADAPT_SCHEMA_STRING: {
        size_t n = strlen(text);
        const char *s = text;
        if (n && text[0] == '"') {
            if (n < 2 || text[n - 1] != '"') {
                snprintf(why, why_size, "unterminated quote");
                return 1;
            }
            s = text + 1;
            n -= 2;
        }
        if (n >= k->size) {
            snprintf(why, why_size, "longer than %zu characters", k->size - 1);
            return 1;
        }
        long bad = adapt_utf8_invalid_at(s, n);
        if (bad >= 0) {
            snprintf(why, why_size, "byte %ld is not UTF-8", bad + 1);
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '"') {
                snprintf(why, why_size, "contains a '\"'");
                return 1;
            }
            if (c < 0x20 || c == 0x7f) {
                snprintf(why, why_size, "contains a control character");
                return 1;
            }
            if (c == ';' && i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) {
                snprintf(why, why_size, "contains ' ;', which starts an INI comment");
                return 1;
            }
        }
        memcpy(field, s, n);
        ((char *)field)[n] = '\0';
        return 0;
    }
    case ADAPT_SCHEMA_INTS:
    case ADAPT_SCHEMA_PAIRS: return parse_list(k, text, field, why, why_size);
    }
    ADAPT_ASSERT(0);
    return 1;
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
    const void *f = field_cptr(obj, k);
    buf[0] = '\0';
    switch (k->type) {
    case ADAPT_SCHEMA_INT: snprintf(buf, size, "%d", *(const int *)f); break;
    case ADAPT_SCHEMA_I64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)f); break;
    case ADAPT_SCHEMA_DOUBLE: format_double(*(const double *)f, buf, size); break;
    case ADAPT_SCHEMA_BOOL: snprintf(buf, size, "%s", *(const bool *)f ? "true" : "false"); break;
    case ADAPT_SCHEMA_ENUM: snprintf(buf, size, "%s", enum_name(k, *(const int *)f)); break;
    case ADAPT_SCHEMA_STRING: snprintf(buf, size, "\"%s\"", (const char *)f); break;
    case ADAPT_SCHEMA_INTS: {
        const struct adapt_schema_ints *l = f;
        for (int i = 0; i < l->n; i++) buf_add(buf, size, "%s%d", i ? "," : "", l->v[i]);
        break;
    }
    case ADAPT_SCHEMA_PAIRS: {
        const struct adapt_schema_pairs *p = f;
        for (int i = 0; i < p->n; i++)
            buf_add(buf, size, "%s%d:%d", i ? "," : "", p->a[i], p->b[i]);
        break;
    }
    }
}

/* Sets section.key from text; `where` names the source for messages. On error
 * the message is written to msg and ADAPT_EINVAL returned (not yet reported). */
static enum adapt_status apply(const struct adapt_schema *s, void *obj, const char *where,
                               const char *section, const char *key, const char *value,
                               int *row_out, char *msg, size_t msg_size)
{
    char list[512], expect[512], why[256];
    if (!section_known(s, section)) {
        section_list(s, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown section [%s] (sections: %s)", where, section, list);
        return ADAPT_EINVAL;
    }
    int row = adapt_schema_find(s, section, key);
    if (row < 0) {
        key_list(s->keys, s->n, section, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown key %s.%s (keys of [%s]: %s)", where, section, key,
                 section, list);
        return ADAPT_EINVAL;
    }
    const struct adapt_schema_key *k = &s->keys[row];
    if (key_parse(k, value, field_ptr(obj, k), why, sizeof why)) {
        key_expect(k, expect, sizeof expect);
        snprintf(msg, msg_size, "%s: %s.%s = \"%.80s\": %s; expected %s%s", where, section, key,
                 value, why, expect, comment_hint(value));
        return ADAPT_EINVAL;
    }
    *row_out = row;
    return ADAPT_OK;
}

/* -------------------------------------------------------- named sections */

int adapt_schema_name_valid(const char *name)
{
    return adapt_identifier_valid(name, ADAPT_SCHEMA_NAME_MAX);
}

static int *item_count(const struct adapt_schema_named *f, void *obj)
{
    return (int *)((char *)obj + f->count_offset);
}

static struct adapt_schema_item *item_at(const struct adapt_schema_named *f, void *obj, int i)
{
    return (struct adapt_schema_item *)((char *)obj + f->offset + (size_t)i * f->item_size);
}

static const struct adapt_schema_item *citem_at(const struct adapt_schema_named *f,
                                                const void *obj, int i)
{
    return (const struct adapt_schema_item *)((const char *)obj + f->offset +
                                              (size_t)i * f->item_size);
}

static int citem_count(const struct adapt_schema_named *f, const void *obj)
{
    return *(const int *)((const char *)obj + f->count_offset);
}

/* The family with this prefix, NULL when there is none. */
static const struct adapt_schema_named *named_family(const struct adapt_schema *s,
                                                     const char *prefix)
{
    for (int i = 0; i < s->nnamed; i++)
        if (!strcmp(s->named[i].prefix, prefix)) return &s->named[i];
    return NULL;
}

/* "PREFIX NAME" (blanks around and between the words) into its two words, each cut to its
 * buffer; returns the number of words (0, 1, 2, or 3 for more). */
static int split_named(const char *section, char *prefix, size_t psize, char *name, size_t nsize)
{
    char *out[2] = {prefix, name};
    size_t size[2] = {psize, nsize};
    int words = 0;
    prefix[0] = name[0] = '\0';
    const char *p = section;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return words;
        size_t n = 0;
        while (p[n] && p[n] != ' ' && p[n] != '\t') n++;
        if (words == 2) return 3;
        size_t m = n < size[words] - 1 ? n : size[words] - 1;
        memcpy(out[words], p, m);
        out[words][m] = '\0';
        words++;
        p += n;
    }
}

static int item_find(const struct adapt_schema_named *f, const void *obj, const char *name)
{
    for (int i = 0; i < citem_count(f, obj); i++)
        if (!strcmp(citem_at(f, obj, i)->name, name)) return i;
    return -1;
}

static int named_row(const struct adapt_schema_named *f, const char *key)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i].key, key)) return i;
    return -1;
}

/* Item i holds name, every key at its default and none set. */
static void item_reset(const struct adapt_schema_named *f, struct adapt_schema_item *it,
                       const char *name, int line)
{
    ADAPT_ASSERT(f->n <= ADAPT_SCHEMA_ITEM_KEYS_MAX);
    memset(it, 0, f->item_size);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->line = line;
    for (int i = 0; i < f->n; i++) {
        char why[256];
        int bad = key_parse(&f->keys[i], f->keys[i].def, field_ptr(it, &f->keys[i]), why,
                            sizeof why);
        ADAPT_ASSERT(!bad); /* a default that does not parse is a bug in the table */
    }
}

/* The index of the item called name, made (with `line`) when there is none and room for it;
 * -1 with a message when the name is malformed or the array is full. */
static int item_get(const struct adapt_schema_named *f, void *obj, const char *where,
                    const char *name, int line, char *msg, size_t msg_size)
{
    if (!adapt_schema_name_valid(name)) {
        snprintf(msg, msg_size,
                 "%s: [%s %.40s]: a name is a letter or '_' followed by letters, digits or '_', "
                 "at most %d characters",
                 where, f->prefix, name, ADAPT_SCHEMA_NAME_MAX - 1);
        return -1;
    }
    int i = item_find(f, obj, name);
    if (i >= 0) return i;
    int *n = item_count(f, obj);
    if (*n == f->max) {
        snprintf(msg, msg_size, "%s: [%s %s]: more than %d [%s NAME] sections", where, f->prefix,
                 name, f->max, f->prefix);
        return -1;
    }
    item_reset(f, item_at(f, obj, *n), name, line);
    return (*n)++;
}

/* Sets key of item `it` from text; line: the file line, or -1 for an assignment. On error the
 * message is written to msg and ADAPT_EINVAL returned (not yet reported). */
static enum adapt_status apply_named(const struct adapt_schema_named *f,
                                     struct adapt_schema_item *it, const char *where,
                                     const char *key, const char *value, int line, char *msg,
                                     size_t msg_size)
{
    char list[512], expect[512], why[256];
    int row = named_row(f, key);
    if (row < 0) {
        key_list(f->keys, f->n, f->prefix, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown key %s.%s.%s (keys of [%s NAME]: %s)", where,
                 f->prefix, it->name, key, f->prefix, list);
        return ADAPT_EINVAL;
    }
    if (line > 0 && it->set[row] > 0) {
        snprintf(msg, msg_size, "%s: duplicate key %s.%s.%s (first set on line %d)", where,
                 f->prefix, it->name, key, it->set[row]);
        return ADAPT_EINVAL;
    }
    const struct adapt_schema_key *k = &f->keys[row];
    if (key_parse(k, value, field_ptr(it, k), why, sizeof why)) {
        key_expect(k, expect, sizeof expect);
        snprintf(msg, msg_size, "%s: %s.%s.%s = \"%.80s\": %s; expected %s%s", where,
                 f->prefix, it->name, key, value, why, expect, comment_hint(value));
        return ADAPT_EINVAL;
    }
    it->set[row] = line;
    return ADAPT_OK;
}

/* ------------------------------------------------------------- defaults */

void adapt_schema_init(const struct adapt_schema *s, void *obj)
{
    memset(obj, 0, s->size);
    for (int i = 0; i < s->n; i++) {
        char why[256];
        /* A default that does not parse is a bug in the table. */
        int bad = key_parse(&s->keys[i], s->keys[i].def, field_ptr(obj, &s->keys[i]), why,
                            sizeof why);
        ADAPT_ASSERT(!bad);
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
    int words = split_named(section, prefix, sizeof prefix, name, sizeof name);
    if (words >= 1) f = named_family(ls->schema, prefix);
    ls->st = ADAPT_EINVAL;
    ls->err_line = ls->line;
    if (!f) {
        section_list(ls->schema, list, sizeof list);
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
    int i = item_get(f, ls->obj, where, name, ls->line, ls->msg, sizeof ls->msg);
    if (i < 0) return 0;
    int *first = &ls->headers[ls->named_base[f - ls->schema->named] + i];
    if (*first) {
        snprintf(ls->msg, sizeof ls->msg, "%s: duplicate section [%s %s] (first on line %d)",
                 where, f->prefix, name, *first);
        return 0;
    }
    *first = ls->line;
    item_reset(f, item_at(f, ls->obj, i), name, ls->line); /* the section defines it whole */
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
            if (!section_known(ls->schema, name) && !named_header(ls, name)) return NULL;
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
    } else if (!section_known(ls->schema, section)) { /* [PREFIX NAME]: named_header made it */
        char prefix[64], iname[128];
        split_named(section, prefix, sizeof prefix, iname, sizeof iname);
        const struct adapt_schema_named *f = named_family(ls->schema, prefix);
        int i = f ? item_find(f, ls->obj, iname) : -1;
        ADAPT_ASSERT(i >= 0);
        ls->st = apply_named(f, item_at(f, ls->obj, i), where, name, value, ls->line, ls->msg,
                             sizeof ls->msg);
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
    char *section = trim(copy), *key = trim(dot + 1), *value = trim(eq + 1);
    memcpy(tmp, obj, s->size);
    const struct adapt_schema_named *f = section_known(s, section) ? NULL
                                                                   : named_family(s, section);
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
        char *name = trim(key);
        key = trim(dot2 + 1);
        int i = item_get(f, tmp, src, name, 0, msg, sizeof msg);
        st = i < 0 ? ADAPT_EINVAL
                   : apply_named(f, item_at(f, tmp, i), src, key, value, -1, msg, sizeof msg);
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
            key_expect(k, expect, sizeof expect);
            fprintf(f, "# %s (%s; default %s)\n", k->help, expect, k->def[0] ? k->def : "empty");
        }
        key_format(obj, k, value, sizeof value);
        fprintf(f, "%s = %s\n", k->key, value);
    }
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *fam = &s->named[g];
        for (int i = 0; i < citem_count(fam, obj); i++) {
            const struct adapt_schema_item *it = citem_at(fam, obj, i);
            fprintf(f, "\n[%s %s]\n", fam->prefix, it->name);
            for (int r = 0; r < fam->n; r++) {
                const struct adapt_schema_key *k = &fam->keys[r];
                if (!it->set[r]) continue;
                if (flags & ADAPT_SCHEMA_PRINT_HELP) {
                    key_expect(k, expect, sizeof expect);
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
    key_expect(k, expect, sizeof expect);
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
    const void *f = field_cptr(obj, k);
    switch (k->type) {
    case ADAPT_SCHEMA_INT: return json_integer(*(const int *)f);
    case ADAPT_SCHEMA_I64: return json_integer((json_int_t) * (const int64_t *)f);
    case ADAPT_SCHEMA_DOUBLE: return json_real(*(const double *)f);
    case ADAPT_SCHEMA_BOOL: return json_boolean(*(const bool *)f);
    case ADAPT_SCHEMA_ENUM: return json_string(enum_name(k, *(const int *)f));
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
        if (json_object_set_new(sec, k->key, key_json(obj, k))) goto free_root;
    }
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *fam = &s->named[g];
        if (!citem_count(fam, obj)) continue;
        json_t *sec = json_object();
        if (json_object_set_new(root, fam->prefix, sec)) goto free_root;
        for (int i = 0; i < citem_count(fam, obj); i++) {
            const struct adapt_schema_item *it = citem_at(fam, obj, i);
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

/* ------------------------------------------------------------ comparison */

/* 1 when key k has the same value in objects a and b. */
static int same_value(const struct adapt_schema_key *k, const void *a, const void *b)
{
    const void *fa = field_cptr(a, k), *fb = field_cptr(b, k);
    switch (k->type) {
    case ADAPT_SCHEMA_STRING: return !strcmp(fa, fb);
    case ADAPT_SCHEMA_INTS: {
        const struct adapt_schema_ints *la = fa, *lb = fb;
        return la->n == lb->n && !memcmp(la->v, lb->v, (size_t)la->n * sizeof la->v[0]);
    }
    case ADAPT_SCHEMA_PAIRS: {
        const struct adapt_schema_pairs *pa = fa, *pb = fb;
        return pa->n == pb->n && !memcmp(pa->a, pb->a, (size_t)pa->n * sizeof pa->a[0]) &&
               !memcmp(pa->b, pb->b, (size_t)pa->n * sizeof pa->b[0]);
    }
    case ADAPT_SCHEMA_BOOL: return *(const bool *)fa == *(const bool *)fb;
    default: return !memcmp(fa, fb, k->size);
    }
}

/* The named sections of a and b: the same names, the same keys set, the same values. */
static int named_equal(const struct adapt_schema *s, const void *a, const void *b, char *diff,
                       size_t diff_size)
{
    for (int g = 0; g < s->nnamed; g++) {
        const struct adapt_schema_named *f = &s->named[g];
        for (int pass = 0; pass < 2; pass++) { /* a's items in b, then b's in a */
            const void *x = pass ? b : a, *y = pass ? a : b;
            for (int i = 0; i < citem_count(f, x); i++) {
                const struct adapt_schema_item *ix = citem_at(f, x, i);
                int j = item_find(f, y, ix->name);
                if (j < 0) {
                    if (diff) snprintf(diff, diff_size, "%s.%s", f->prefix, ix->name);
                    return 0;
                }
                const struct adapt_schema_item *iy = citem_at(f, y, j);
                for (int r = 0; r < f->n; r++)
                    if (!ix->set[r] != !iy->set[r] ||
                        (ix->set[r] && !same_value(&f->keys[r], ix, iy))) {
                        if (diff)
                            snprintf(diff, diff_size, "%s.%s.%s", f->prefix, ix->name,
                                     f->keys[r].key);
                        return 0;
                    }
            }
        }
    }
    return 1;
}

int adapt_schema_equal(const struct adapt_schema *s, const void *a, const void *b, char *diff,
                       size_t diff_size)
{
    for (int i = 0; i < s->n; i++) {
        const struct adapt_schema_key *k = &s->keys[i];
        if (!same_value(k, a, b)) {
            if (diff) snprintf(diff, diff_size, "%s.%s", k->section, k->key);
            return 0;
        }
    }
    if (!named_equal(s, a, b, diff, diff_size)) return 0;
    if (diff && diff_size) diff[0] = '\0';
    return 1;
}

const char *adapt_schema_enum_str(const struct adapt_schema *s, const void *obj,
                                  const char *section, const char *key)
{
    int row = adapt_schema_find(s, section, key);
    if (row < 0 || s->keys[row].type != ADAPT_SCHEMA_ENUM) return NULL;
    return enum_name(&s->keys[row], *(const int *)field_cptr(obj, &s->keys[row]));
}
