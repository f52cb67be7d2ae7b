/* src/config/config.c: the configuration schema, the INI reader (inih), --set and printing.
 *
 * Everything is driven by the table `keys` below: one row per key with its
 * type, the field it fills, its default (written as in an INI file, and parsed
 * by the same code as a file value), its range ("[lo, hi]", "(" and ")" for
 * open ends) and its help text.
 *
 * Line numbers: Debian's inih is built without INI_HANDLER_LINENO, so the
 * handler cannot be told the line. The file is read into memory and handed to
 * ini_parse_stream one line per reader call, which counts lines exactly as
 * inih does; the reader also removes leading blanks (inih would otherwise take
 * an indented line for the continuation of the previous value), catches lines
 * longer than inih's buffer and checks section names (inih reports sections
 * only through the keys in them, so an empty unknown section would pass).
 */
#include "src/config/config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum cfg_type { CFG_INT, CFG_I64, CFG_DOUBLE, CFG_BOOL, CFG_STRING, CFG_ENUM, CFG_INTS, CFG_PAIRS };

#define CFG_INCREASING 1u /* CFG_INTS: strictly increasing */

struct cfg_key {
    const char *section, *key;
    enum cfg_type type;
    size_t offset, size;      /* of the field in struct adapt_config */
    const char *def;          /* default, as written in an INI file */
    const char *range;        /* numbers, list entries, first of a pair; NULL = unbounded */
    const char *range2;       /* second of a pair */
    const char *const *names; /* CFG_ENUM: allowed values; CFG_PAIRS: the two labels */
    unsigned flags;
    const char *help;
};

static const char *const dataset_names[] = {"mnist", "fashion-mnist", "emnist-balanced",
                                            "cifar10", "cifar100", NULL};
static const char *const augment_names[] = {"auto", "on", "off", NULL};
static const char *const model_names[] = {"lenet5", "alexnet_cifar", "alexnet_mnist", "resnet20",
                                          NULL};
static const char *const schedule_names[] = {"constant", "multistep", "plateau", NULL};
static const char *const policy_names[] = {"fp32", "fixed", "adapt", "muppet", "amp", NULL};
static const char *const amp_names[] = {"fp16", "bf16", NULL};
static const char *const strategy_names[] = {"min", "mean", "max", NULL};
static const char *const compat_names[] = {"corrected", "reference", NULL};
static const char *const rounding_names[] = {"stochastic", "nearest", NULL};
static const char *const round_layers_names[] = {"units", "all", NULL};
static const char *const ste_names[] = {"auto", "plain", "saturating", NULL};
static const char *const auto_bool_names[] = {"auto", "true", "false", NULL};
static const char *const wl_fl_labels[] = {"WL", "FL"};
static const char *const wl_epochs_labels[] = {"WL", "EPOCHS"};

#define FIELD(f) offsetof(struct adapt_config, f), sizeof(((struct adapt_config *)0)->f)
#define K_INT(s, k, f, def, range, help) {s, k, CFG_INT, FIELD(f), def, range, NULL, NULL, 0, help}
#define K_I64(s, k, f, def, range, help) {s, k, CFG_I64, FIELD(f), def, range, NULL, NULL, 0, help}
#define K_DBL(s, k, f, def, range, help) \
    {s, k, CFG_DOUBLE, FIELD(f), def, range, NULL, NULL, 0, help}
#define K_BOOL(s, k, f, def, help) {s, k, CFG_BOOL, FIELD(f), def, NULL, NULL, NULL, 0, help}
#define K_STR(s, k, f, def, help) {s, k, CFG_STRING, FIELD(f), def, NULL, NULL, NULL, 0, help}
#define K_ENUM(s, k, f, def, names, help) \
    {s, k, CFG_ENUM, FIELD(f), def, NULL, NULL, names, 0, help}
#define K_INTS(s, k, f, def, range, flags, help) \
    {s, k, CFG_INTS, FIELD(f), def, range, NULL, NULL, flags, help}
#define K_PAIRS(s, k, f, def, range, range2, labels, help) \
    {s, k, CFG_PAIRS, FIELD(f), def, range, range2, labels, 0, help}

/* The schema. Sections appear in the order of their first row. */
static const struct cfg_key keys[] = {
    K_I64("run", "seed", run.seed, "1", "[0, 9223372036854775807]",
          "seed of every random stream (Philox key)"),
    K_STR("run", "out", run.out, "", "output directory; empty = runs/<config file stem>"),
    K_INT("run", "threads", run.threads, "0", "[0, 1024]", "OpenMP threads; 0 = OpenMP default"),
    K_INT("run", "log_every", run.log_every, "1", "[1, 1000000]",
          "optimizer steps between trace step lines"),
    K_INT("run", "checkpoint_every", run.checkpoint_every, "1", "[0, 1000000]",
          "epochs between checkpoints; 0 = only at the end"),

    K_ENUM("data", "dataset", data.dataset, "fashion-mnist", dataset_names, "dataset"),
    K_STR("data", "path", data.path, "",
          "dataset directory; empty = /usr/share/datasets/fashion-mnist for fashion-mnist, "
          "data/<dataset> otherwise"),
    K_INT("data", "val_size", data.val_size, "5000", "[0, 1000000]",
          "training samples held out for validation"),
    K_ENUM("data", "augment", data.augment, "auto", augment_names,
           "random crop and flip; auto = on for CIFAR"),
    K_BOOL("data", "normalize", data.normalize, "true",
           "normalise inputs with the dataset mean and std"),
    K_INT("data", "train_limit", data.train_limit, "0", "[0, 1000000000]",
          "use only the first N training samples; 0 = all"),
    K_INT("data", "test_limit", data.test_limit, "0", "[0, 1000000000]",
          "use only the first N test samples; 0 = all"),

    K_ENUM("model", "name", model.name, "lenet5", model_names, "network"),
    K_INT("model", "classes", model.classes, "0", "[0, 10000]",
          "output classes; 0 = from the dataset"),
    K_DBL("model", "init_gain", model.init_gain, "0.5", "(0, 100]",
          "variance-scaling gain of the truncated-normal weight initialisation"),

    K_INT("train", "epochs", train.epochs, "15", "[1, 100000]", "training epochs"),
    K_INT("train", "batch", train.batch, "256", "[1, 65536]", "micro-batch size"),
    K_INT("train", "accumulation_steps", train.accumulation_steps, "1", "[1, 1024]",
          "micro-batches per optimizer step"),
    K_INT("train", "eval_batch", train.eval_batch, "1000", "[1, 65536]",
          "batch size for evaluation"),

    K_DBL("optim", "lr", optim.lr, "0.01", "(0, 100]", "learning rate"),
    K_DBL("optim", "momentum", optim.momentum, "0.9", "[0, 1)", "SGD momentum"),
    K_DBL("optim", "l2_decay", optim.l2_decay, "0", "[0, 1]", "L2 weight decay"),
    K_DBL("optim", "l1_decay", optim.l1_decay, "0", "[0, 1]", "L1 penalty added to the loss"),
    K_BOOL("optim", "nesterov", optim.nesterov, "false", "Nesterov momentum"),

    K_ENUM("schedule", "name", schedule.name, "constant", schedule_names, "learning-rate schedule"),
    K_INTS("schedule", "milestones", schedule.milestones, "", "[1, 100000]", CFG_INCREASING,
           "multistep: epochs after which lr *= gamma"),
    K_DBL("schedule", "gamma", schedule.gamma, "0.1", "(0, 1]",
          "multistep: lr factor at a milestone"),
    K_DBL("schedule", "factor", schedule.factor, "0.1", "(0, 1)",
          "plateau: lr factor on a plateau"),
    K_INT("schedule", "patience", schedule.patience, "10", "[0, 1000000]",
          "plateau: epochs without improvement before reducing"),
    K_DBL("schedule", "threshold", schedule.threshold, "1e-4", "[0, 1]",
          "plateau: relative improvement that counts"),
    K_DBL("schedule", "min_lr", schedule.min_lr, "0", "[0, 100]", "plateau: lower bound of lr"),
    K_INT("schedule", "cooldown", schedule.cooldown, "0", "[0, 1000000]",
          "plateau: epochs to wait after a reduction"),

    K_ENUM("policy", "name", policy.name, "fp32", policy_names, "precision policy"),
    K_STR("policy", "format", policy.format, "fixed",
          "fixed: number format name (fixed, bfp, fp16, bf16, float(E,M), ...)"),
    K_INT("policy", "wl", policy.wl, "16", "[1, 32]", "fixed: word length"),
    K_INT("policy", "fl", policy.fl, "8", "[0, 32]", "fixed: fractional length"),
    K_PAIRS("policy", "per_unit", policy.per_unit, "", "[1, 32]", "[0, 32]", wl_fl_labels,
            "fixed: WL:FL per precision unit, overriding wl and fl"),
    K_INTS("policy", "muppet_levels", policy.muppet_levels, "8,12,14,16", "[2, 32]", CFG_INCREASING,
           "muppet: word lengths before float32"),
    K_INT("policy", "muppet_r", policy.muppet_r, "3", "[1, 1000]",
          "muppet: epochs between gradient-diversity checks"),
    K_INT("policy", "muppet_patience", policy.muppet_patience, "2", "[1, 1000]",
          "muppet: violations before switching level"),
    K_DBL("policy", "muppet_min_lr", policy.muppet_min_lr, "1e-5", "[0, 100]",
          "muppet: stop when lr falls below this in float32"),
    K_INT("policy", "muppet_decay_every", policy.muppet_decay_every, "15", "[1, 1000000]",
          "muppet: epochs between lr *= 0.1 in float32"),
    K_PAIRS("policy", "muppet_schedule", policy.muppet_schedule, "", "[2, 32]", "[1, 100000]",
            wl_epochs_labels, "muppet: fixed WL:EPOCHS replay (WL 32 = float32); empty = adaptive"),
    K_ENUM("policy", "amp_type", policy.amp_type, "fp16", amp_names, "amp: half-precision type"),
    K_DBL("policy", "amp_init_scale", policy.amp_init_scale, "65536", "(0, 1e30]",
          "amp: initial loss scale"),
    K_INT("policy", "amp_growth_interval", policy.amp_growth_interval, "2000", "[1, 1000000000]",
          "amp: clean steps before the loss scale doubles"),

    K_INT("quantization", "start_wl", quantization.start_wl, "8", "[2, 32]",
          "adapt: initial word length"),
    K_INT("quantization", "start_fl", quantization.start_fl, "4", "[0, 32]",
          "adapt: initial fractional length"),
    K_INT("quantization", "fl_min", quantization.fl_min, "4", "[0, 32]",
          "adapt: lower end of the push-down FL bisection"),
    K_INT("quantization", "r_lwr", quantization.r_lwr, "50", "[2, 100000]",
          "adapt: lower bound of the histogram resolution"),
    K_INT("quantization", "r_upr", quantization.r_upr, "150", "[2, 100000]",
          "adapt: upper bound of the histogram resolution (>= r_lwr)"),
    K_INT("quantization", "lb_lwr", quantization.lb_lwr, "25", "[1, 1000000]",
          "adapt: lower bound of the lookback"),
    K_INT("quantization", "lb_upr", quantization.lb_upr, "100", "[1, 1000000]",
          "adapt: upper bound of the lookback (>= lb_lwr)"),
    K_DBL("quantization", "gamma", quantization.gamma, "0.33", "[0, 1]",
          "adapt: lookback smoothing factor"),
    K_INT("quantization", "buffer_bits", quantization.buffer_bits, "4", "[0, 31]",
          "adapt: buffer bits added after a push-up"),
    K_ENUM("quantization", "strategy", quantization.strategy, "min", strategy_names,
           "adapt: initial push-up strategy"),
    K_BOOL("quantization", "quant_inputs", quantization.quant_inputs, "true",
           "quantize the input activations of units"),
    K_BOOL("quantization", "quant_outputs", quantization.quant_outputs, "true",
           "quantize the outputs of units"),
    K_ENUM("quantization", "round_layers", quantization.round_layers, "units", round_layers_names,
           "outputs rounded with quant_outputs: units (conv/linear) or all (also the batch-norm, "
           "pooling, activation and residual layers after a unit, in its format)"),
    K_ENUM("quantization", "ste", quantization.ste, "auto", ste_names,
           "backward through rounded outputs: plain straight-through, saturating (no gradient "
           "pushing a saturated output further out), auto = saturating for adapt corrected, "
           "plain otherwise"),
    K_ENUM("quantization", "round_logits", quantization.round_logits, "auto", auto_bool_names,
           "round the network's output (the logits) with quant_outputs; auto = false for adapt "
           "corrected, true otherwise"),
    K_BOOL("quantization", "quant_grads", quantization.quant_grads, "true",
           "quantize the gradients"),
    K_DBL("quantization", "kl_eps", quantization.kl_eps, "0", "[0, 1e9]",
          "adapt (corrected): KL divergence still counted as lossless, added to the noise term"),
    K_DBL("quantization", "kl_noise", quantization.kl_noise, "1", "[0, 1e9]",
          "adapt (corrected): also lossless: KL <= kl_noise * (r - 1) / (2 m), the sampling "
          "noise of an r-bin histogram of m values; 0 with kl_eps = 0: KL must be 0"),
    K_INT("quantization", "pd_sample", quantization.pd_sample, "4096", "[0, 1000000000]",
          "adapt (corrected): elements m sampled by push-down at a fixed stride; 0 = whole "
          "tensor"),
    K_ENUM("quantization", "compat", quantization.compat, "corrected", compat_names,
           "adapt: corrected algorithm or the reference implementation's behaviour"),
    K_ENUM("quantization", "rounding", quantization.rounding, "stochastic", rounding_names,
           "rounding of quantized weights, activations and gradients"),
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* ---------------------------------------------------------------- helpers */

static void *field_ptr(struct adapt_config *cfg, const struct cfg_key *k)
{
    return (char *)cfg + k->offset;
}

static const void *field_cptr(const struct adapt_config *cfg, const struct cfg_key *k)
{
    return (const char *)cfg + k->offset;
}

static int section_known(const char *section)
{
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) return 1;
    return 0;
}

static int key_find(const char *section, const char *key)
{
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key)) return i;
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
static void section_list(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(keys[j].section, keys[i].section)) first = 0;
        if (first) buf_add(buf, size, "%s%s", i ? ", " : "", keys[i].section);
    }
}

/* "seed, out, threads, ..." */
static void key_list(const char *section, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section))
            buf_add(buf, size, "%s%s", buf[0] ? ", " : "", keys[i].key);
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
static void key_expect(const struct cfg_key *k, char *buf, size_t size)
{
    buf[0] = '\0';
    switch (k->type) {
    case CFG_INT:
    case CFG_I64: buf_add(buf, size, "an integer in %s", k->range); break;
    case CFG_DOUBLE: buf_add(buf, size, "a number in %s", k->range); break;
    case CFG_BOOL: buf_add(buf, size, "true or false"); break;
    case CFG_STRING:
        buf_add(buf, size, "a string of at most %zu characters", k->size - 1);
        break;
    case CFG_ENUM:
        buf_add(buf, size, "one of ");
        for (int i = 0; k->names[i]; i++) buf_add(buf, size, "%s%s", i ? ", " : "", k->names[i]);
        break;
    case CFG_INTS:
        buf_add(buf, size, "a comma-separated list of %sintegers in %s",
                (k->flags & CFG_INCREASING) ? "increasing " : "", k->range);
        break;
    case CFG_PAIRS:
        buf_add(buf, size, "a comma-separated list of %s:%s pairs with %s in %s and %s in %s",
                k->names[0], k->names[1], k->names[0], k->range, k->names[1], k->range2);
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

/* Parses text into the field of key k. 0 on success; otherwise why says what is wrong. */
static int key_parse(const struct cfg_key *k, const char *text, void *field, char *why,
                     size_t why_size)
{
    why[0] = '\0';
    switch (k->type) {
    case CFG_INT:
    case CFG_I64: {
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
        if (k->type == CFG_INT) {
            ADAPT_ASSERT(k->size == sizeof(int));
            *(int *)field = (int)v;
        } else {
            ADAPT_ASSERT(k->size == sizeof(int64_t));
            *(int64_t *)field = v;
        }
        return 0;
    }
    case CFG_DOUBLE: {
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
    case CFG_BOOL: {
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
    case CFG_ENUM:
        ADAPT_ASSERT(k->size == sizeof(int));
        for (int i = 0; k->names[i]; i++)
            if (!strcmp(text, k->names[i])) {
                *(int *)field = i;
                return 0;
            }
        snprintf(why, why_size, "value not allowed");
        return 1;
    case CFG_STRING: {
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
    case CFG_INTS:
    case CFG_PAIRS: {
        char copy[4096];
        if (strlen(text) >= sizeof copy) {
            snprintf(why, why_size, "too long");
            return 1;
        }
        strcpy(copy, text);
        char *s = trim(copy);
        int n = 0;
        int *va = k->type == CFG_INTS ? ((struct adapt_config_ints *)field)->v
                                      : ((struct adapt_config_pairs *)field)->a;
        int *vb = k->type == CFG_PAIRS ? ((struct adapt_config_pairs *)field)->b : NULL;
        while (*s) {
            char *comma = strchr(s, ',');
            if (comma) *comma = '\0';
            char *item = trim(s);
            if (!*item) {
                snprintf(why, why_size, "entry %d is empty", n + 1);
                return 1;
            }
            if (n == ADAPT_CONFIG_LIST_MAX) {
                snprintf(why, why_size, "more than %d entries", ADAPT_CONFIG_LIST_MAX);
                return 1;
            }
            if (k->type == CFG_INTS) {
                if (parse_entry(item, k->range, &va[n], why, why_size)) return 1;
                if ((k->flags & CFG_INCREASING) && n > 0 && va[n] <= va[n - 1]) {
                    snprintf(why, why_size, "entries not increasing (%d after %d)", va[n],
                             va[n - 1]);
                    return 1;
                }
            } else {
                char *colon = strchr(item, ':');
                if (!colon) {
                    snprintf(why, why_size, "entry \"%.40s\" is not %s:%s", item, k->names[0],
                             k->names[1]);
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
        if (k->type == CFG_INTS)
            ((struct adapt_config_ints *)field)->n = n;
        else
            ((struct adapt_config_pairs *)field)->n = n;
        return 0;
    }
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
static void key_format(const struct adapt_config *cfg, const struct cfg_key *k, char *buf,
                       size_t size)
{
    const void *f = field_cptr(cfg, k);
    buf[0] = '\0';
    switch (k->type) {
    case CFG_INT: snprintf(buf, size, "%d", *(const int *)f); break;
    case CFG_I64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)f); break;
    case CFG_DOUBLE: format_double(*(const double *)f, buf, size); break;
    case CFG_BOOL: snprintf(buf, size, "%s", *(const bool *)f ? "true" : "false"); break;
    case CFG_ENUM: snprintf(buf, size, "%s", k->names[*(const int *)f]); break;
    case CFG_STRING: snprintf(buf, size, "\"%s\"", (const char *)f); break;
    case CFG_INTS: {
        const struct adapt_config_ints *l = f;
        for (int i = 0; i < l->n; i++) buf_add(buf, size, "%s%d", i ? "," : "", l->v[i]);
        break;
    }
    case CFG_PAIRS: {
        const struct adapt_config_pairs *p = f;
        for (int i = 0; i < p->n; i++)
            buf_add(buf, size, "%s%d:%d", i ? "," : "", p->a[i], p->b[i]);
        break;
    }
    }
}

/* "x.ini:12", "--set train.epochs=3" or "default". */
static void origin_text(const struct adapt_config *cfg, int row, char *buf, size_t size)
{
    const struct adapt_config_origin *o = &cfg->origin[row];
    switch (o->kind) {
    case ADAPT_CONFIG_FROM_FILE: snprintf(buf, size, "%s:%d", cfg->file, o->line); break;
    case ADAPT_CONFIG_FROM_SET: snprintf(buf, size, "--set %s", cfg->overrides[o->line - 1]); break;
    default: snprintf(buf, size, "default"); break;
    }
}

/* Sets section.key from text; `where` names the source for messages. On error
 * the message is written to msg and ADAPT_EINVAL returned (not yet reported). */
static enum adapt_status apply(struct adapt_config *cfg, const char *where, const char *section,
                               const char *key, const char *value, int *row_out, char *msg,
                               size_t msg_size)
{
    char list[512], expect[512], why[256];
    if (!section_known(section)) {
        section_list(list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown section [%s] (sections: %s)", where, section, list);
        return ADAPT_EINVAL;
    }
    int row = key_find(section, key);
    if (row < 0) {
        key_list(section, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown key %s.%s (keys of [%s]: %s)", where, section, key,
                 section, list);
        return ADAPT_EINVAL;
    }
    const struct cfg_key *k = &keys[row];
    if (key_parse(k, value, field_ptr(cfg, k), why, sizeof why)) {
        key_expect(k, expect, sizeof expect);
        snprintf(msg, msg_size, "%s: %s.%s = \"%.80s\": %s; expected %s", where, section, key,
                 value, why, expect);
        return ADAPT_EINVAL;
    }
    *row_out = row;
    return ADAPT_OK;
}

/* ------------------------------------------------------------- public API */

void adapt_config_init(struct adapt_config *cfg)
{
    ADAPT_ASSERT(NKEYS <= ADAPT_CONFIG_KEYS_MAX);
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < NKEYS; i++) {
        char why[256];
        /* A default that does not parse is a bug in the table. */
        int bad = key_parse(&keys[i], keys[i].def, field_ptr(cfg, &keys[i]), why, sizeof why);
        ADAPT_ASSERT(!bad);
        cfg->origin[i].kind = ADAPT_CONFIG_FROM_DEFAULT;
        cfg->origin[i].line = 0;
    }
}

/* State shared by the inih reader and handler while loading a file. */
struct load_state {
    struct adapt_config *cfg;
    const char *path;
    const char *buf;
    size_t len, pos;
    int line;                       /* lines handed to inih so far */
    int seen[ADAPT_CONFIG_KEYS_MAX]; /* line where each key was set in this file, 0 = not yet */
    enum adapt_status st;           /* first error found by the reader or handler */
    int err_line;
    char msg[2048];
};

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
            if (!section_known(name)) {
                char list[512];
                section_list(list, sizeof list);
                ls->st = ADAPT_EINVAL;
                ls->err_line = ls->line;
                snprintf(ls->msg, sizeof ls->msg, "%s:%d: unknown section [%s] (sections: %s)",
                         ls->path, ls->line, name, list);
                return NULL;
            }
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
    char where[ADAPT_CONFIG_PATH_MAX + 32];
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
    } else if ((row = key_find(section, name)) >= 0 && ls->seen[row]) {
        ls->st = ADAPT_EINVAL;
        snprintf(ls->msg, sizeof ls->msg, "%s: duplicate key %s.%s (first set on line %d)", where,
                 section, name, ls->seen[row]);
    } else {
        ls->st = apply(ls->cfg, where, section, name, value, &row, ls->msg, sizeof ls->msg);
        if (ls->st == ADAPT_OK) {
            ls->seen[row] = ls->line;
            ls->cfg->origin[row].kind = ADAPT_CONFIG_FROM_FILE;
            ls->cfg->origin[row].line = ls->line;
        }
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

enum adapt_status adapt_config_load(struct adapt_config *cfg, const char *path)
{
    enum adapt_status st;
    char *text = NULL;
    size_t len = 0;
    if (cfg->file[0])
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: a configuration file (%s) is already loaded; one per run", path,
                           cfg->file);
    if (strlen(path) >= sizeof cfg->file)
        return ADAPT_ERROR(ADAPT_EINVAL, "%.64s...: configuration file path longer than %zu bytes",
                           path, sizeof cfg->file - 1);
    if ((st = read_text(path, &text, &len)) != ADAPT_OK) return st;

    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++) line += *p == '\n';
        free(text);
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%d: NUL byte: not a text file", path, line);
    }

    struct adapt_config *tmp = malloc(sizeof *tmp);
    struct load_state *ls = calloc(1, sizeof *ls);
    if (!tmp || !ls) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory loading the configuration", path);
        goto free_state;
    }
    *tmp = *cfg;
    strcpy(tmp->file, path);
    ls->cfg = tmp;
    ls->path = path;
    ls->buf = text;
    ls->len = len;

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
        *cfg = *tmp;
        st = ADAPT_OK;
    }
free_state:
    free(ls);
    free(tmp);
    free(text);
    return st;
}

enum adapt_status adapt_config_set(struct adapt_config *cfg, const char *assignment)
{
    char copy[ADAPT_CONFIG_OVERRIDE_LEN], msg[2048];
    if (strlen(assignment) >= sizeof copy)
        return ADAPT_ERROR(ADAPT_EINVAL, "--set %.64s...: longer than %zu characters", assignment,
                           sizeof copy - 1);
    if (cfg->n_overrides == ADAPT_CONFIG_OVERRIDES_MAX)
        return ADAPT_ERROR(ADAPT_EINVAL, "--set %s: more than %d overrides", assignment,
                           ADAPT_CONFIG_OVERRIDES_MAX);
    strcpy(copy, assignment);
    char *eq = strchr(copy, '=');
    char *dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
    if (!eq || !dot)
        return ADAPT_ERROR(ADAPT_EINVAL, "--set \"%s\": expected section.key=value", assignment);
    *eq = '\0';
    *dot = '\0';
    char *section = trim(copy), *key = trim(dot + 1), *value = trim(eq + 1);

    struct adapt_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return ADAPT_ERROR(ADAPT_ENOMEM, "--set %s: out of memory", assignment);
    *tmp = *cfg;
    int row;
    enum adapt_status st = apply(tmp, "--set", section, key, value, &row, msg, sizeof msg);
    if (st != ADAPT_OK) {
        free(tmp);
        return ADAPT_ERROR(st, "%s", msg);
    }
    strcpy(tmp->overrides[tmp->n_overrides++], assignment);
    tmp->origin[row].kind = ADAPT_CONFIG_FROM_SET;
    tmp->origin[row].line = tmp->n_overrides;
    *cfg = *tmp;
    free(tmp);
    return ADAPT_OK;
}

/* Integer value of an INT key, by name. */
static int int_value(const struct adapt_config *cfg, const char *section, const char *key, int *row)
{
    *row = key_find(section, key);
    ADAPT_ASSERT(*row >= 0 && keys[*row].type == CFG_INT);
    return *(const int *)field_cptr(cfg, &keys[*row]);
}

/* section.a >= section.b, or an error naming both and where they were set. */
static enum adapt_status check_ge(const struct adapt_config *cfg, const char *section,
                                  const char *a, const char *b)
{
    int ra, rb;
    int va = int_value(cfg, section, a, &ra), vb = int_value(cfg, section, b, &rb);
    if (va >= vb) return ADAPT_OK;
    char oa[ADAPT_CONFIG_OVERRIDE_LEN + 16], ob[ADAPT_CONFIG_OVERRIDE_LEN + 16];
    origin_text(cfg, ra, oa, sizeof oa);
    origin_text(cfg, rb, ob, sizeof ob);
    return ADAPT_ERROR(ADAPT_EINVAL, "%s: %s.%s = %d must be >= %s.%s = %d (set at %s)", oa,
                       section, a, va, section, b, vb, ob);
}

enum adapt_status adapt_config_check(const struct adapt_config *cfg)
{
    enum adapt_status st;
    if ((st = check_ge(cfg, "quantization", "r_upr", "r_lwr")) != ADAPT_OK) return st;
    if ((st = check_ge(cfg, "quantization", "lb_upr", "lb_lwr")) != ADAPT_OK) return st;
    if ((st = check_ge(cfg, "quantization", "start_fl", "fl_min")) != ADAPT_OK) return st;
    return ADAPT_OK;
}

enum adapt_status adapt_config_print(const struct adapt_config *cfg, FILE *f, unsigned flags)
{
    char value[ADAPT_CONFIG_LIST_MAX * 12 + ADAPT_CONFIG_PATH_MAX], expect[512];
    if (flags & ADAPT_CONFIG_PRINT_HELP) {
        fprintf(f, "# adapt-sim configuration\n");
        if (cfg->file[0]) fprintf(f, "# file: %s\n", cfg->file);
        for (int i = 0; i < cfg->n_overrides; i++) fprintf(f, "# --set %s\n", cfg->overrides[i]);
    }
    for (int i = 0; i < NKEYS; i++) {
        const struct cfg_key *k = &keys[i];
        if (i == 0 || strcmp(k->section, keys[i - 1].section))
            fprintf(f, "%s[%s]\n", i || (flags & ADAPT_CONFIG_PRINT_HELP) ? "\n" : "", k->section);
        if (flags & ADAPT_CONFIG_PRINT_HELP) {
            key_expect(k, expect, sizeof expect);
            fprintf(f, "# %s (%s; default %s)\n", k->help, expect, k->def[0] ? k->def : "empty");
        }
        key_format(cfg, k, value, sizeof value);
        fprintf(f, "%s = %s\n", k->key, value);
    }
    if (fflush(f) != 0 || ferror(f))
        return ADAPT_ERROR(ADAPT_EIO, "cannot write the configuration: %s", strerror(errno));
    return ADAPT_OK;
}

static json_t *key_json(const struct adapt_config *cfg, const struct cfg_key *k)
{
    const void *f = field_cptr(cfg, k);
    switch (k->type) {
    case CFG_INT: return json_integer(*(const int *)f);
    case CFG_I64: return json_integer((json_int_t) * (const int64_t *)f);
    case CFG_DOUBLE: return json_real(*(const double *)f);
    case CFG_BOOL: return json_boolean(*(const bool *)f);
    case CFG_ENUM: return json_string(k->names[*(const int *)f]);
    case CFG_STRING: return json_string((const char *)f);
    case CFG_INTS: {
        const struct adapt_config_ints *l = f;
        json_t *a = json_array();
        for (int i = 0; a && i < l->n; i++)
            if (json_array_append_new(a, json_integer(l->v[i]))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    case CFG_PAIRS: {
        const struct adapt_config_pairs *p = f;
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

json_t *adapt_config_to_json(const struct adapt_config *cfg)
{
    json_t *root = json_object();
    if (!root) return NULL;
    for (int i = 0; i < NKEYS; i++) {
        const struct cfg_key *k = &keys[i];
        json_t *sec = json_object_get(root, k->section);
        if (!sec) {
            sec = json_object();
            if (json_object_set_new(root, k->section, sec)) goto fail;
        }
        if (json_object_set_new(sec, k->key, key_json(cfg, k))) goto fail;
    }
    return root;
fail:
    json_decref(root);
    return NULL;
}

int adapt_config_equal(const struct adapt_config *a, const struct adapt_config *b, char *diff,
                       size_t diff_size)
{
    for (int i = 0; i < NKEYS; i++) {
        const struct cfg_key *k = &keys[i];
        const void *fa = field_cptr(a, k), *fb = field_cptr(b, k);
        int same;
        switch (k->type) {
        case CFG_STRING: same = !strcmp(fa, fb); break;
        case CFG_INTS: {
            const struct adapt_config_ints *la = fa, *lb = fb;
            same = la->n == lb->n && !memcmp(la->v, lb->v, (size_t)la->n * sizeof la->v[0]);
            break;
        }
        case CFG_PAIRS: {
            const struct adapt_config_pairs *pa = fa, *pb = fb;
            same = pa->n == pb->n && !memcmp(pa->a, pb->a, (size_t)pa->n * sizeof pa->a[0]) &&
                   !memcmp(pa->b, pb->b, (size_t)pa->n * sizeof pa->b[0]);
            break;
        }
        case CFG_BOOL: same = *(const bool *)fa == *(const bool *)fb; break;
        default: same = !memcmp(fa, fb, k->size); break;
        }
        if (!same) {
            if (diff) snprintf(diff, diff_size, "%s.%s", k->section, k->key);
            return 0;
        }
    }
    if (diff && diff_size) diff[0] = '\0';
    return 1;
}

const char *adapt_config_enum_str(const struct adapt_config *cfg, const char *section,
                                  const char *key)
{
    int row = key_find(section, key);
    if (row < 0 || keys[row].type != CFG_ENUM) return NULL;
    return keys[row].names[*(const int *)field_cptr(cfg, &keys[row])];
}

static enum adapt_status copy_out(const char *what, const char *s, char *buf, size_t size)
{
    if (strlen(s) >= size)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s \"%s\" does not fit in %zu bytes", what, s, size);
    strcpy(buf, s);
    return ADAPT_OK;
}

enum adapt_status adapt_config_data_path(const struct adapt_config *cfg, char *buf, size_t size)
{
    char def[ADAPT_CONFIG_PATH_MAX];
    if (cfg->data.path[0]) return copy_out("data.path", cfg->data.path, buf, size);
    if (cfg->data.dataset == ADAPT_CONFIG_DATASET_FASHION_MNIST)
        snprintf(def, sizeof def, "/usr/share/datasets/fashion-mnist");
    else
        snprintf(def, sizeof def, "data/%s", dataset_names[cfg->data.dataset]);
    return copy_out("dataset path", def, buf, size);
}

enum adapt_status adapt_config_out_dir(const struct adapt_config *cfg, char *buf, size_t size)
{
    char def[ADAPT_CONFIG_PATH_MAX + 8];
    if (cfg->run.out[0]) return copy_out("run.out", cfg->run.out, buf, size);
    if (!cfg->file[0]) return copy_out("output directory", "runs/default", buf, size);
    const char *base = strrchr(cfg->file, '/');
    base = base ? base + 1 : cfg->file;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    snprintf(def, sizeof def, "runs/%.*s", (int)n, base);
    return copy_out("output directory", def, buf, size);
}

bool adapt_config_augment_enabled(const struct adapt_config *cfg)
{
    switch (cfg->data.augment) {
    case ADAPT_CONFIG_AUGMENT_ON: return true;
    case ADAPT_CONFIG_AUGMENT_OFF: return false;
    default:
        return cfg->data.dataset == ADAPT_CONFIG_DATASET_CIFAR10 ||
               cfg->data.dataset == ADAPT_CONFIG_DATASET_CIFAR100;
    }
}
