/* src/graph/expr.c: integer expressions of model descriptions (doc/model-format.md).
 *
 * C's integer operators on int64 values, by C's precedence: ?: || && == !=
 * < <= > >= << >> + - * / % and unary - + !; parentheses; decimal literals;
 * names of parameters, `let` values and loop variables. Division and
 * remainder by zero, shifts outside 0..62 and overflow are errors.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "src/graph/internal.h"

struct parser {
    const char *s, *p;
    const struct graph_vars *vars;
    char err[160];
};

static void skip_ws(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t') ps->p++;
}

static int fail(struct parser *ps, const char *what)
{
    if (!ps->err[0]) snprintf(ps->err, sizeof ps->err, "%s", what);
    return 0;
}

static int accept(struct parser *ps, const char *op)
{
    skip_ws(ps);
    size_t n = strlen(op);
    if (strncmp(ps->p, op, n)) return 0;
    /* "<" must not match "<<" or "<=", "!" not "!=" and so on */
    if (n == 1 && strchr("<>!=&|", op[0]) && ps->p[1] && strchr("<>=&|", ps->p[1])) return 0;
    ps->p += n;
    return 1;
}

static int ternary(struct parser *ps, int64_t *v);

static int overflow_check(struct parser *ps, __int128 r, int64_t *v)
{
    if (r > INT64_MAX || r < INT64_MIN) return fail(ps, "integer overflow");
    *v = (int64_t)r;
    return 1;
}

static int primary(struct parser *ps, int64_t *v)
{
    skip_ws(ps);
    const char *p = ps->p;
    if (*p == '(') {
        ps->p++;
        if (!ternary(ps, v)) return 0;
        if (!accept(ps, ")")) return fail(ps, "expected ')'");
        return 1;
    }
    if (accept(ps, "-")) {
        if (!primary(ps, v)) return 0;
        if (*v == INT64_MIN) return fail(ps, "integer overflow");
        *v = -*v;
        return 1;
    }
    if (accept(ps, "+")) return primary(ps, v);
    if (accept(ps, "!")) {
        if (!primary(ps, v)) return 0;
        *v = !*v;
        return 1;
    }
    if (isdigit((unsigned char)*p)) {
        __int128 r = 0;
        while (isdigit((unsigned char)*p)) {
            r = r * 10 + (*p++ - '0');
            if (r > INT64_MAX) return fail(ps, "integer literal too large");
        }
        if (isalpha((unsigned char)*p) || *p == '_' || *p == '.')
            return fail(ps, "expected an integer (no fractions or suffixes)");
        ps->p = p;
        *v = (int64_t)r;
        return 1;
    }
    if (isalpha((unsigned char)*p) || *p == '_') {
        char name[ADAPT_GRAPH_NAME_MAX];
        size_t n = 0;
        while ((isalnum((unsigned char)*p) || *p == '_') && n + 1 < sizeof name) name[n++] = *p++;
        name[n] = 0;
        ps->p = p;
        if (!graph_vars_get(ps->vars, name, v)) {
            snprintf(ps->err, sizeof ps->err, "unknown name '%s'", name);
            return 0;
        }
        return 1;
    }
    return fail(ps, *p ? "expected a number, a name or '('" : "expression ends too early");
}

static int mul(struct parser *ps, int64_t *v)
{
    if (!primary(ps, v)) return 0;
    for (;;) {
        int op = accept(ps, "*") ? '*' : accept(ps, "/") ? '/' : accept(ps, "%") ? '%' : 0;
        if (!op) return 1;
        int64_t r;
        if (!primary(ps, &r)) return 0;
        if (op == '*') {
            if (!overflow_check(ps, (__int128)*v * r, v)) return 0;
        } else {
            if (r == 0) return fail(ps, "division by zero");
            if (*v == INT64_MIN && r == -1) return fail(ps, "integer overflow");
            *v = op == '/' ? *v / r : *v % r;
        }
    }
}

static int add(struct parser *ps, int64_t *v)
{
    if (!mul(ps, v)) return 0;
    for (;;) {
        int op = accept(ps, "+") ? '+' : accept(ps, "-") ? '-' : 0;
        if (!op) return 1;
        int64_t r;
        if (!mul(ps, &r)) return 0;
        if (!overflow_check(ps, op == '+' ? (__int128)*v + r : (__int128)*v - r, v)) return 0;
    }
}

static int shift(struct parser *ps, int64_t *v)
{
    if (!add(ps, v)) return 0;
    for (;;) {
        int op = accept(ps, "<<") ? 'l' : accept(ps, ">>") ? 'r' : 0;
        if (!op) return 1;
        int64_t r;
        if (!add(ps, &r)) return 0;
        if (r < 0 || r > 62) return fail(ps, "shift count outside 0..62");
        if (op == 'l') {
            if (!overflow_check(ps, (__int128)*v * ((int64_t)1 << r), v)) return 0;
        } else {
            *v >>= r;
        }
    }
}

static int compare(struct parser *ps, int64_t *v)
{
    if (!shift(ps, v)) return 0;
    for (;;) {
        int op = accept(ps, "<=") ? 'l' : accept(ps, ">=") ? 'g' : accept(ps, "<") ? '<'
                 : accept(ps, ">") ? '>' : 0;
        if (!op) return 1;
        int64_t r;
        if (!shift(ps, &r)) return 0;
        *v = op == 'l' ? *v <= r : op == 'g' ? *v >= r : op == '<' ? *v < r : *v > r;
    }
}

static int equality(struct parser *ps, int64_t *v)
{
    if (!compare(ps, v)) return 0;
    for (;;) {
        int op = accept(ps, "==") ? '=' : accept(ps, "!=") ? '!' : 0;
        if (!op) return 1;
        int64_t r;
        if (!compare(ps, &r)) return 0;
        *v = op == '=' ? *v == r : *v != r;
    }
}

static int land(struct parser *ps, int64_t *v)
{
    if (!equality(ps, v)) return 0;
    while (accept(ps, "&&")) {
        int64_t r;
        if (!equality(ps, &r)) return 0;
        *v = *v && r;
    }
    return 1;
}

static int lor(struct parser *ps, int64_t *v)
{
    if (!land(ps, v)) return 0;
    while (accept(ps, "||")) {
        int64_t r;
        if (!land(ps, &r)) return 0;
        *v = *v || r;
    }
    return 1;
}

static int ternary(struct parser *ps, int64_t *v)
{
    if (!lor(ps, v)) return 0;
    if (!accept(ps, "?")) return 1;
    int64_t a, b;
    if (!ternary(ps, &a)) return 0;
    if (!accept(ps, ":")) return fail(ps, "expected ':' of '?:'");
    if (!ternary(ps, &b)) return 0;
    *v = *v ? a : b;
    return 1;
}

int graph_eval(const char *s, const struct graph_vars *vars, int64_t *v, char *err, size_t cap)
{
    struct parser ps = {s, s, vars, ""};
    int ok = ternary(&ps, v);
    if (ok) {
        skip_ws(&ps);
        if (*ps.p) ok = fail(&ps, "unexpected text after the expression");
    }
    if (!ok) snprintf(err, cap, "in '%s': %s", s, ps.err);
    return ok;
}
