/* src/config/schema.c: the typed key table engine's values: fields, ranges, value parsing,
 * defaults, equality. The named sections are in schema_named.c, INI files, assignments and the
 * INI, man page and JSON output in schema_io.c. */
#include "src/config/schema.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/config/internal.h"

/* ---------------------------------------------------------------- helpers */

void *schema_field_ptr(void *obj, const struct adapt_schema_key *k)
{
    return (char *)obj + k->offset;
}

const void *schema_field_cptr(const void *obj, const struct adapt_schema_key *k)
{
    return (const char *)obj + k->offset;
}

int schema_section_known(const struct adapt_schema *s, const char *section)
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
void schema_buf_add(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* "run, data, model, ..." */
void schema_section_list(const struct adapt_schema *s, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(s->keys[j].section, s->keys[i].section)) first = 0;
        if (first) schema_buf_add(buf, size, "%s%s", i ? ", " : "", s->keys[i].section);
    }
    for (int f = 0; f < s->nnamed; f++) schema_buf_add(buf, size, ", %s NAME", s->named[f].prefix);
}

/* "seed, out, threads, ...": the keys of `section` among n rows */
void schema_key_list(const struct adapt_schema_key *keys, int n, const char *section, char *buf,
                     size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i].section, section))
            schema_buf_add(buf, size, "%s%s", buf[0] ? ", " : "", keys[i].key);
}

/* The name of value v of an enum key, NULL when it has none. */
const char *schema_enum_name(const struct adapt_schema_key *k, int v)
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
void schema_key_expect(const struct adapt_schema_key *k, char *buf, size_t size)
{
    buf[0] = '\0';
    switch (k->type) {
    case ADAPT_SCHEMA_INT:
    case ADAPT_SCHEMA_I64: schema_buf_add(buf, size, "an integer in %s", k->range); break;
    case ADAPT_SCHEMA_DOUBLE: schema_buf_add(buf, size, "a number in %s", k->range); break;
    case ADAPT_SCHEMA_BOOL: schema_buf_add(buf, size, "true or false"); break;
    case ADAPT_SCHEMA_STRING:
        schema_buf_add(buf, size, "a string of at most %zu characters", k->size - 1);
        break;
    case ADAPT_SCHEMA_ENUM: {
        int listed = 0;
        schema_buf_add(buf, size, "one of ");
        for (int i = 0; i < k->choices->n; i++) {
            const char *name = schema_enum_name(k, enum_value_at(k, i));
            if (name) schema_buf_add(buf, size, "%s%s", listed++ ? ", " : "", name);
        }
        break;
    }
    case ADAPT_SCHEMA_INTS:
        schema_buf_add(buf, size, "a comma-separated list of %sintegers in %s",
                       (k->flags & ADAPT_SCHEMA_INCREASING) ? "increasing " : "", k->range);
        break;
    case ADAPT_SCHEMA_PAIRS:
        schema_buf_add(buf, size,
                       "a comma-separated list of %s:%s pairs with %s in %s and %s in %s",
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

char *schema_trim(char *s)
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
    char *s = schema_trim(copy);
    int n = 0;
    int *va = k->type == ADAPT_SCHEMA_INTS ? ((struct adapt_schema_ints *)field)->v
                                           : ((struct adapt_schema_pairs *)field)->a;
    int *vb = k->type == ADAPT_SCHEMA_PAIRS ? ((struct adapt_schema_pairs *)field)->b : NULL;
    while (*s) {
        char *comma = strchr(s, ',');
        if (comma) *comma = '\0';
        char *item = schema_trim(s);
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
            char *a = schema_trim(item), *b = schema_trim(colon + 1);
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
        if (!*schema_trim(s)) {
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
const char *schema_comment_hint(const char *value)
{
    for (const char *p = value; (p = strchr(p, '#')) != NULL; p++)
        if (p > value && (p[-1] == ' ' || p[-1] == '\t'))
            return "; inline comments start with ';' (inih): '#' starts a comment only at the "
                   "beginning of a line";
    return "";
}

/* Parses text into the field of key k. 0 on success; otherwise why says what is wrong. */
int schema_key_parse(const struct adapt_schema_key *k, const char *text, void *field, char *why,
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

/* ------------------------------------------------------------- defaults */

void adapt_schema_init(const struct adapt_schema *s, void *obj)
{
    memset(obj, 0, s->size);
    for (int i = 0; i < s->n; i++) {
        char why[256];
        /* A default that does not parse is a bug in the table. */
        int bad = schema_key_parse(&s->keys[i], s->keys[i].def, schema_field_ptr(obj, &s->keys[i]),
                                   why, sizeof why);
        ADAPT_ASSERT(!bad);
    }
}

/* ------------------------------------------------------------ comparison */

/* 1 when key k has the same value in objects a and b. */
static int same_value(const struct adapt_schema_key *k, const void *a, const void *b)
{
    const void *fa = schema_field_cptr(a, k), *fb = schema_field_cptr(b, k);
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
            for (int i = 0; i < schema_citem_count(f, x); i++) {
                const struct adapt_schema_item *ix = schema_citem_at(f, x, i);
                int j = schema_item_find(f, y, ix->name);
                if (j < 0) {
                    if (diff) snprintf(diff, diff_size, "%s.%s", f->prefix, ix->name);
                    return 0;
                }
                const struct adapt_schema_item *iy = schema_citem_at(f, y, j);
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
    return schema_enum_name(&s->keys[row], *(const int *)schema_field_cptr(obj, &s->keys[row]));
}
