/* src/config/config.h: the run configuration (defaults, an INI file, --set overrides).
 *
 * One typed struct adapt_config for the whole engine, filled in three layers:
 * the schema defaults (adapt_config_init), one INI file (adapt_config_load)
 * and "section.key=value" overrides from the command line
 * (adapt_config_set); adapt_config_check then does the cross-field checks.
 * The keys are a single table in config.c (section, key, type, field offset,
 * default, range and help text) read by the schema engine of
 * src/config/schema.h, which does the parsing, printing, JSON and equality;
 * adding a key is one table row plus one field below. Every error is
 * reported once, naming the file and line (or "--set"), section.key and what
 * was expected; on error the struct is left unchanged.
 *
 * Accepted syntax (src/config/schema.h): "[section]" headers, "key = value"
 * (or "key: value"), full-line comments starting with ';' or '#', inline
 * comments after whitespace + ';', blank lines. Keys are lower case and
 * case-sensitive. Strings may be written bare or in double quotes. Booleans:
 * true/false (also yes/no, on/off, 1/0). Lists: "8,12,14,16"; pair lists:
 * "16:8,12:6". A key line may hold at most ADAPT_SCHEMA_LINE_MAX characters
 * (the line buffer of Debian's inih; comment lines may be longer), so very
 * long --set values (paths, per-unit lists) print lines that
 * adapt_config_load refuses with a clear message.
 *
 * Enumerations shared with other modules are defined once, in the lowest
 * module that needs them: the push-up strategy in src/trace/trace.h (it is
 * part of the trace), the rounding in src/quant/quant.h; the AdaPT
 * compatibility mode is defined here.
 *
 * Number formats can be defined in "[format NAME]" sections (struct
 * adapt_config_format; doc/numerics.md, "Formats defined in the configuration")
 * and named wherever a format is accepted: adapt_config_check registers them
 * with src/quant. They are printed after the fixed sections with the keys they
 * set, and written to JSON as {"format": {NAME: {key: value}}}.
 *
 * Non-goals: no layered config files (one file per run), no writing back of
 * comments, no knowledge of formats or models beyond their names (src/quant/
 * validates policy.format and the format sections, the data module the class
 * count).
 *
 *   struct adapt_config cfg;
 *   adapt_config_init(&cfg);
 *   if ((st = adapt_config_load(&cfg, "experiments/configs/lenet5.ini")) ||
 *       (st = adapt_config_set(&cfg, "train.epochs=3")) ||
 *       (st = adapt_config_check(&cfg))) {
 *       fprintf(stderr, "adapt-train: %s\n", adapt_error_message());
 *       return 1;
 *   }
 *   if (cfg.policy.name == ADAPT_CONFIG_POLICY_ADAPT) ...
 *   adapt_config_print(&cfg, stdout, ADAPT_CONFIG_PRINT_HELP);   // --dry-run
 *   json_t *j = adapt_config_to_json(&cfg);                      // trace header
 *
 * Ownership: the struct holds everything by value (fixed-size strings and
 * lists), so it can be copied with '=' and there is nothing to free.
 * adapt_config_to_json returns a new reference that the caller decrefs.
 */
#ifndef ADAPT_CONFIG_H
#define ADAPT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "src/base/status.h"
#include "src/config/schema.h"
#include "src/quant/quant.h"
#include "src/trace/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADAPT_CONFIG_STR_MAX 256     /* bytes of a string value, NUL included */
#define ADAPT_CONFIG_PATH_MAX 1024   /* bytes of a path value, NUL included */
#define ADAPT_CONFIG_OVERRIDES_MAX 32 /* --set arguments */
#define ADAPT_CONFIG_OVERRIDE_LEN (ADAPT_CONFIG_PATH_MAX + 64) /* bytes of one, NUL included */
#define ADAPT_CONFIG_KEYS_MAX 128    /* rows the schema may have */

/* Enumerations: the order matches the names accepted in the INI file. */
enum adapt_config_dataset {
    ADAPT_CONFIG_DATASET_MNIST,           /* "mnist" */
    ADAPT_CONFIG_DATASET_FASHION_MNIST,   /* "fashion-mnist" */
    ADAPT_CONFIG_DATASET_EMNIST_BALANCED, /* "emnist-balanced" */
    ADAPT_CONFIG_DATASET_CIFAR10,         /* "cifar10" */
    ADAPT_CONFIG_DATASET_CIFAR100         /* "cifar100" */
};
enum adapt_config_device { ADAPT_CONFIG_DEVICE_CPU = 0, ADAPT_CONFIG_DEVICE_CUDA };

enum adapt_config_augment {
    ADAPT_CONFIG_AUGMENT_AUTO,
    ADAPT_CONFIG_AUGMENT_ON,
    ADAPT_CONFIG_AUGMENT_OFF
};
/* data.resize: how 28x28 images become the 32x32 the models read */
enum adapt_config_resize { ADAPT_CONFIG_RESIZE_PAD, ADAPT_CONFIG_RESIZE_BILINEAR };
enum adapt_config_schedule {
    ADAPT_CONFIG_SCHEDULE_CONSTANT,
    ADAPT_CONFIG_SCHEDULE_MULTISTEP,
    ADAPT_CONFIG_SCHEDULE_PLATEAU
};
enum adapt_config_policy {
    ADAPT_CONFIG_POLICY_FP32,
    ADAPT_CONFIG_POLICY_FIXED,
    ADAPT_CONFIG_POLICY_ADAPT,
    ADAPT_CONFIG_POLICY_MUPPET,
    ADAPT_CONFIG_POLICY_AMP,
    ADAPT_CONFIG_POLICY_COMP
};
enum adapt_config_amp_type { ADAPT_CONFIG_AMP_FP16, ADAPT_CONFIG_AMP_BF16 };
/* quantization.compat: the corrected AdaPT algorithm or the published reference
 * implementation's behaviour (doc/algorithms.md); also read by src/policy/policy_core.h. */
enum adapt_compat {
    ADAPT_COMPAT_CORRECTED = 0, /* "corrected" */
    ADAPT_COMPAT_REFERENCE      /* "reference" */
};
enum adapt_config_round_layers { ADAPT_CONFIG_ROUND_LAYERS_UNITS, ADAPT_CONFIG_ROUND_LAYERS_ALL };
/* [reference]: the published AdaPT code's behaviours, one switch each (doc/algorithms.md,
 * "Reference switches"). auto follows quantization.compat: on under reference, off under
 * corrected; on and off set one switch alone. */
enum adapt_reference_switch {
    ADAPT_REF_KL_TEST = 0,  /* push-down test: stochastic rounding of w[0], histc, KLDivLoss > 0 */
    ADAPT_REF_PD_BISECT,    /* push-down bisection as the published loops run it */
    ADAPT_REF_PU_S2_ZERO,   /* push-up s2 bounded below by 0, not 1 */
    ADAPT_REF_LB_CEIL,      /* lookback rounded up after its EMA; window ends at n >= lb */
    ADAPT_REF_STRATEGY,     /* the published strategy rule and its loss */
    ADAPT_REF_BN_FORMAT,    /* batch-norm gamma and beta in the format of the unit before */
    ADAPT_REF_L1_QUANTIZED, /* the L1 term reads the quantized weight copies */
    ADAPT_REF_SOFTMAX_BEFORE_CE, /* the loss is the cross-entropy of softmax(logits) (LeNet-5) */
    ADAPT_REF_ACT_FORMATS,       /* activation formats as the published models index them */
    ADAPT_REF_LOSS_PENALTY,      /* mean WL/32 x non-zero fraction added to the strategy's loss */
    ADAPT_REF_POOL_ROUNDING, /* average pools round their input and output (published formats) */
    ADAPT_REF_BN_ROUNDING,   /* a ResNet's batch norms round their input and output likewise */
    ADAPT_REF_N
};
enum adapt_config_switch { ADAPT_SWITCH_AUTO = 0, ADAPT_SWITCH_ON, ADAPT_SWITCH_OFF };
/* quantization.lb_update: when AdaPT adapts lookback and resolution (doc/algorithms.md) */
enum adapt_config_lb_update {
    ADAPT_CONFIG_LB_UPDATE_STEP = 0, /* "step": every step, from the partial window's D */
    ADAPT_CONFIG_LB_UPDATE_WINDOW,   /* "window": once per window, from the full window's D */
    ADAPT_CONFIG_LB_UPDATE_AUTO      /* "auto": window under compat = corrected, step under
                                        reference (adapt_config_lb_window) */
};
enum adapt_config_ste {
    ADAPT_CONFIG_STE_AUTO,
    ADAPT_CONFIG_STE_PLAIN,
    ADAPT_CONFIG_STE_SATURATING
};
enum adapt_config_auto_bool { ADAPT_CONFIG_AUTO, ADAPT_CONFIG_TRUE, ADAPT_CONFIG_FALSE };
/* quantization.precision_propagation: which layers round, and in which format (doc/policies.md,
 * "Graph precision propagation"; src/policy/graphamp.h). */
enum adapt_config_propagation {
    ADAPT_CONFIG_PROPAGATION_UNIT = 0, /* "unit": the round_layers rules */
    ADAPT_CONFIG_PROPAGATION_GRAPH     /* "graph": allow / infer / deny sets over the graph */
};
/* quantization.graph_preset: the layer kinds of each set (src/policy/graphamp.h) */
enum adapt_config_graph_preset {
    ADAPT_CONFIG_GRAPH_CONSERVATIVE = 0, /* "conservative" */
    ADAPT_CONFIG_GRAPH_DEFAULT,          /* "default" */
    ADAPT_CONFIG_GRAPH_AGGRESSIVE        /* "aggressive" */
};

/* [roles]: a number format, rounding and scaling per tensor role of every precision unit
 * (doc/numerics.md, "Tensor roles and scaling"; src/config/roles.c parses them,
 * src/policy/precision.h applies them). */
enum adapt_role {
    ADAPT_ROLE_WEIGHT = 0,  /* the weight copy the unit computes with */
    ADAPT_ROLE_BIAS,        /* the bias copy */
    ADAPT_ROLE_INPUT,       /* the unit's input activation */
    ADAPT_ROLE_OUTPUT,      /* its output activation (and the layers that take its format) */
    ADAPT_ROLE_GRAD_WEIGHT, /* the weight gradient */
    ADAPT_ROLE_GRAD_BIAS,   /* the bias gradient */
    ADAPT_ROLE_GRAD_OUTPUT, /* the error gradient the unit receives (w.r.t. its output) */
    ADAPT_ROLE_GRAD_INPUT,  /* the error gradient it sends back (w.r.t. its input) */
    ADAPT_ROLE_MASTER,      /* the master weights themselves, after every update */
    ADAPT_ROLE_N
};
enum adapt_role_kind {
    ADAPT_ROLE_AUTO = 0, /* what the policy rounds without roles (the default) */
    ADAPT_ROLE_UNIT,     /* the unit's current format (the policy's choice) */
    ADAPT_ROLE_FLOAT,    /* float32: not rounded */
    ADAPT_ROLE_FORMAT    /* a fixed format, spec */
};
enum adapt_role_scaling {
    ADAPT_SCALING_NONE = 0, /* values rounded as they are */
    ADAPT_SCALING_CURRENT,  /* x * s rounded, then * 1/s, s from this tensor's amax */
    ADAPT_SCALING_DELAYED,  /* s from the amax history of the earlier tensors of the role */
    ADAPT_SCALING_ROWWISE   /* current, one s per row: a weight's output channel (dim 0), an
                             * activation's or gradient's sample */
};
/* quantization.sr_bits: random bits per stochastic rounding, 32 (one Philox value per element)
 * or 16 (one value serves two elements; struct quant_spec's sr_bits, doc/numerics.md). */
enum adapt_config_sr_bits { ADAPT_CONFIG_SR_BITS_32 = 0, ADAPT_CONFIG_SR_BITS_16 };

struct adapt_role_fmt {
    enum adapt_role_kind kind;
    struct quant_spec spec; /* ADAPT_ROLE_FORMAT */
    int rounding;           /* -1: quantization.rounding; else an enum quant_rounding */
    enum adapt_role_scaling scaling;
};
enum adapt_config_recipe {
    ADAPT_RECIPE_NONE = 0,
    ADAPT_RECIPE_FP8_HYBRID_DELAYED,
    ADAPT_RECIPE_FP8_CURRENT,
    ADAPT_RECIPE_MXFP8,
    ADAPT_RECIPE_BF16_SR_MASTER,
    ADAPT_RECIPE_W4A8,
    ADAPT_RECIPE_MXFP8_GEMM
};
enum adapt_config_amax_compute { ADAPT_AMAX_MAX = 0, ADAPT_AMAX_MOST_RECENT };
enum adapt_config_scale_kind { ADAPT_SCALE_FLOAT32 = 0, ADAPT_SCALE_POW2 };
/* roles.mx_axis: MX blocks along each tensor's rows, along each GEMM's reduction dimension, or
 * along the channels of the convolutions' unlowered tensors (and the batch for the weight
 * gradient), as microxcaling's MX convolution */
enum adapt_config_mx_axis { ADAPT_MX_AXIS_ROWS = 0, ADAPT_MX_AXIS_GEMM, ADAPT_MX_AXIS_CHANNELS };
extern const char *const adapt_role_names[ADAPT_ROLE_N];

/* Where a value came from (for messages): a line of the loaded file, a --set, or the default. */
/* [format NAME] sections: number formats defined in the configuration (doc/numerics.md,
 * "Formats defined in the configuration"). */
#define ADAPT_CONFIG_FORMATS_MAX 16
enum adapt_config_format_kind { ADAPT_CONFIG_FORMAT_FLOAT = 0, ADAPT_CONFIG_FORMAT_FIXED };
struct adapt_config_format {
    struct adapt_schema_item head;       /* NAME, the header's line, which keys were set */
    enum adapt_config_format_kind kind;  /* kind: float or fixed (required) */
    int exp_bits, man_bits;              /* float (required) */
    int bias;                            /* float; unset: 2^(exp_bits-1) - 1 */
    enum quant_nan nan;                  /* float: ieee, fn or none */
    bool subnormals;                     /* float */
    enum quant_overflow overflow;        /* float: saturate or inf */
    int wl, fl;                          /* fixed (required) */
};

enum adapt_config_origin_kind {
    ADAPT_CONFIG_FROM_DEFAULT = 0,
    ADAPT_CONFIG_FROM_FILE,
    ADAPT_CONFIG_FROM_SET
};
struct adapt_config_origin {
    enum adapt_config_origin_kind kind;
    int line; /* FROM_FILE: 1-based line; FROM_SET: 1-based index into overrides */
};

struct adapt_config {
    struct {
        int64_t seed;                   /* [0, 2^63) */
        char out[ADAPT_CONFIG_PATH_MAX]; /* "" = runs/<config file stem> (adapt_config_out_dir) */
        char name[128];                 /* the run's name in tables and figures; "" = named by
                                           adapt-perf / adapt-heatmap (config file stem) */
        int threads;                    /* 0 = OpenMP default */
        int log_every;                  /* optimizer steps between trace step lines */
        int checkpoint_every;           /* epochs; 0 = only at the end */
        enum adapt_config_device device; /* where the training step runs */
        int gpu;                        /* CUDA device number with device = cuda */
    } run;
    struct {
        enum adapt_config_dataset dataset;
        char path[ADAPT_CONFIG_PATH_MAX]; /* "" = dataset default (adapt_config_data_path) */
        int val_size;                   /* held-out validation samples */
        enum adapt_config_augment augment; /* auto = on for CIFAR (adapt_config_augment_enabled) */
        bool normalize;
        int train_limit;                /* 0 = all */
        int test_limit;                 /* 0 = all */
        enum adapt_config_resize resize; /* pad (zeros) or bilinear (Pillow's arithmetic) */
    } data;
    struct {
        char name[64];                  /* built-in model: models/NAME.model (src/graph) */
        char file[ADAPT_CONFIG_PATH_MAX]; /* a model description; "" = model.name */
        char args[256];                 /* the description's parameters: "depth=56,..." */
        int classes;                    /* 0 = from the dataset */
        double init_gain;
    } model;
    struct {
        int epochs;
        int batch;
        int accumulation_steps;
        int eval_batch;
    } train;
    struct {
        double lr;
        double momentum;
        double l2_decay;
        double l1_decay;
        bool nesterov;
    } optim;
    struct {
        enum adapt_config_schedule name;
        struct adapt_schema_ints milestones; /* epochs, increasing */
        double gamma;
        double factor;
        int patience;
        double threshold;
        double min_lr;
        int cooldown;
    } schedule;
    struct {
        enum adapt_config_policy name;
        char format[ADAPT_CONFIG_STR_MAX]; /* quant format name, validated by src/quant/ */
        int wl, fl;
        bool allow_no_int_bits; /* accept fixed formats with FL >= WL (checked otherwise) */
        struct adapt_schema_pairs per_unit; /* a = WL, b = FL per precision unit */
        struct adapt_schema_ints muppet_levels; /* increasing word lengths */
        int muppet_r;
        int muppet_patience;
        double muppet_min_lr;
        int muppet_decay_every;
        struct adapt_schema_pairs muppet_schedule; /* a = WL (32 = float32), b = epochs */
        enum adapt_config_amp_type amp_type;
        double amp_init_scale;
        int amp_growth_interval;
        char comp_formats[ADAPT_CONFIG_STR_MAX]; /* comma-separated format names */
        double comp_tolerance;
        char comp_try[ADAPT_CONFIG_STR_MAX];     /* comma-separated layer names */
        int comp_tc_multiple;
        int comp_max_plans;
        int comp_sample_steps;                   /* 0 = one epoch */
        char comp_plan[ADAPT_CONFIG_STR_MAX];    /* "" = search */
        char comp_hw[ADAPT_CONFIG_PATH_MAX];
    } policy;
    struct {
        int start_wl, start_fl;
        int fl_min;
        int r_lwr, r_upr;
        int lb_lwr, lb_upr;
        double gamma;
        enum adapt_config_lb_update lb_update;
        int buffer_bits;
        enum adapt_trace_strategy strategy; /* MIN, MEAN or MAX */
        bool quant_inputs, quant_outputs, quant_grads;
        enum adapt_config_round_layers round_layers;
        enum adapt_config_ste ste;
        enum adapt_config_auto_bool round_logits;
        double kl_eps;
        double kl_noise;
        int pd_sample;                  /* 0 = whole tensor */
        enum adapt_compat compat;
        enum quant_rounding rounding;
        enum adapt_config_sr_bits sr_bits; /* random bits per stochastic rounding */
        enum adapt_config_propagation precision_propagation;
        enum adapt_config_graph_preset graph_preset;
        /* graph propagation overrides: comma-separated layer kinds moved into a set, and
         * layer names forced to low precision or float32; "" = none */
        char graph_allow[ADAPT_CONFIG_STR_MAX], graph_infer[ADAPT_CONFIG_STR_MAX],
            graph_deny[ADAPT_CONFIG_STR_MAX];
        char graph_low[ADAPT_CONFIG_STR_MAX], graph_float[ADAPT_CONFIG_STR_MAX];
    } quantization;
    struct {
        enum adapt_config_switch sw[ADAPT_REF_N]; /* by enum adapt_reference_switch */
    } reference;
    struct {
        enum adapt_config_recipe recipe;
        /* per role: "auto", "unit", "float32" or a format, then optionally a rounding
         * (nearest, stochastic) and a scaling (unscaled, current, delayed); "" = auto */
        char role[ADAPT_ROLE_N][ADAPT_CONFIG_STR_MAX];
        /* per-unit overrides: "NAME: role=value, role=value | NAME: ..."; "" = none */
        char units[ADAPT_CONFIG_PATH_MAX];
        int amax_history;                      /* delayed scaling: tensors remembered */
        enum adapt_config_amax_compute amax_compute;
        int margin;                            /* scale / 2^margin */
        enum adapt_config_scale_kind scale;    /* float32 or a power of two */
        enum adapt_config_mx_axis mx_axis;     /* MX blocks (adapt_config_mx_axis) */
    } roles;
    struct {
        /* [arithmetic]: how the units' matrix products multiply and sum (doc/numerics.md,
         * "Accumulators"; quant_acc_parse's grammar): the default of every unit, then per-unit
         * overrides "NAME: MODEL | NAME: MODEL"; "" = none */
        char accumulator[ADAPT_CONFIG_STR_MAX];
        char units[ADAPT_CONFIG_PATH_MAX];
    } arithmetic;

    struct {
        int n;
        struct adapt_config_format f[ADAPT_CONFIG_FORMATS_MAX]; /* (n) in file order */
    } formats;

    /* Provenance (not configuration values; for the trace header and messages). */
    char file[ADAPT_CONFIG_PATH_MAX];   /* the loaded INI file, "" when none */
    int n_overrides;
    char overrides[ADAPT_CONFIG_OVERRIDES_MAX]
                  [ADAPT_CONFIG_OVERRIDE_LEN]; /* "section.key=value" as given */
    struct adapt_config_origin origin[ADAPT_CONFIG_KEYS_MAX]; /* per schema row */
};

/* Every key at its default; no file, no overrides. */
void adapt_config_init(struct adapt_config *cfg);

/* Applies an INI file on top of cfg. Errors: ADAPT_ENOENT (no such file),
 * ADAPT_EIO (unreadable), ADAPT_EFORMAT (malformed line, NUL byte, line too
 * long), ADAPT_EINVAL (unknown section or key, duplicate key, bad value,
 * a second file). cfg is unchanged on error. */
enum adapt_status adapt_config_load(struct adapt_config *cfg, const char *path);

/* Applies one override "section.key=value" (the argument of --set) and
 * appends it to cfg->overrides. ADAPT_EINVAL on error; cfg is then unchanged. */
enum adapt_status adapt_config_set(struct adapt_config *cfg, const char *assignment);

/* Cross-field checks after loading (r_upr >= r_lwr, lb_upr >= lb_lwr,
 * start_fl >= fl_min; precision_propagation = graph not with the adapt and muppet
 * policies); ADAPT_EINVAL naming both keys and where they were set. The kind and layer names
 * of the graph_* keys are checked where the model is known (src/policy/graphamp.h).
 * Then the [format NAME] sections: each is resolved to a quant spec (required keys, keys of the
 * other kind, the range the kernels accept: messages name the file and line of the section or
 * key) and registered under its NAME in the process-wide table of src/quant
 * (quant_format_define, which refuses built-in names), so that every later quant_spec_parse
 * reads it; with policy.name = fixed, policy.format is parsed here too (the error names where
 * it was set). */
enum adapt_status adapt_config_check(const struct adapt_config *cfg);
/* The resolved role r of every unit (the recipe, then the [roles] keys): *out; fails with a
 * message naming roles.KEY on a value that does not parse (formats of [format NAME] sections
 * must be registered: adapt_config_check does it). */
enum adapt_status adapt_config_role(const struct adapt_config *cfg, enum adapt_role r,
                                    struct adapt_role_fmt *out);
/* Where section.key's value came from: "FILE:LINE", "--set k=v" or "default". */
void adapt_config_origin_str(const struct adapt_config *cfg, const char *section,
                             const char *key, char *buf, size_t size);
/* roles.units, one override: unit (layer) name, role and its value. */
struct adapt_role_override {
    char unit[64];
    enum adapt_role role;
    struct adapt_role_fmt fmt;
};
#define ADAPT_ROLE_OVERRIDES_MAX 64
/* Parses roles.units into out (at most ADAPT_ROLE_OVERRIDES_MAX), *n of them; fails with a
 * message naming roles.units and the piece that does not parse. */
enum adapt_status adapt_config_role_overrides(const struct adapt_config *cfg,
                                              struct adapt_role_override *out, int *n);
/* [arithmetic]: the accumulator model of every unit (arithmetic.accumulator) and the per-unit
 * overrides of arithmetic.units ("NAME: MODEL | NAME: MODEL"), parsed (src/config/arith.c);
 * fails with a message naming the key, its origin and the piece that does not parse. */
struct adapt_arith_override {
    char unit[64];
    struct quant_acc acc;
};
#define ADAPT_ARITH_OVERRIDES_MAX 64
enum adapt_status adapt_config_arith(const struct adapt_config *cfg, struct quant_acc *def,
                                     struct adapt_arith_override *out, int *n);
/* 1 when arithmetic.accumulator or arithmetic.units asks for something other than float32. */
int adapt_config_arith_set(const struct adapt_config *cfg);
/* 1 when reference switch s is on: set on, or auto with quantization.compat = reference (for
 * softmax_before_ce also model.name = lenet5, the published model that has it; for
 * act_formats lenet5, alexnet_mnist or alexnet_cifar, whose indexing is known; for
 * loss_penalty the AlexNets and ResNets, the published models that add it; for pool_rounding
 * lenet5 and the ResNets, whose pools are quantized modules; for bn_rounding the ResNets). */
int adapt_config_reference(const struct adapt_config *cfg, enum adapt_reference_switch s);
/* The [reference] key of switch s ("kl_test", ...); NULL for no such switch. */
const char *adapt_config_reference_key(enum adapt_reference_switch s);
/* 1 when AdaPT adapts lookback and resolution once per window (quantization.lb_update = window,
 * or auto under compat = corrected), 0 when every step (step, or auto under reference). */
int adapt_config_lb_window(const struct adapt_config *cfg);
/* ADAPT_COMPAT_REFERENCE when switch s is on, else ADAPT_COMPAT_CORRECTED: the mode to give the
 * rules of src/policy/policy_core.h that s governs. */
enum adapt_compat adapt_config_reference_mode(const struct adapt_config *cfg,
                                              enum adapt_reference_switch s);
/* 1 when some role is not auto (a recipe or a [roles] key). */
/* The MX blocking in force: roles.mx_axis where set to other than rows, else gemm under recipe
 * mxfp8_gemm, else rows. */
enum adapt_config_mx_axis adapt_config_mx_axis(const struct adapt_config *cfg);
int adapt_config_roles_set(const struct adapt_config *cfg);
/* "e4m3 nearest delayed", "unit", "float32", "auto": the canonical text of f. */
const char *adapt_role_fmt_str(const struct adapt_role_fmt *f, char *buf, size_t n);

/* The quant spec of format section f (what adapt_config_check registers). ADAPT_EINVAL or
 * ADAPT_ERANGE with a message naming where the offending key was set. */
enum adapt_status adapt_config_format_spec(const struct adapt_config *cfg,
                                           const struct adapt_config_format *f,
                                           struct quant_spec *s);

/* Writes the configuration as an INI file that adapt_config_load reads back
 * to the same values. With ADAPT_CONFIG_PRINT_HELP each key is preceded by
 * a comment with its help text, default and range. ADAPT_EIO on write error. */
#define ADAPT_CONFIG_PRINT_HELP 1u
enum adapt_status adapt_config_print(const struct adapt_config *cfg, FILE *f, unsigned flags);

/* Writes the man page adapt-sim.ini(5) (roff): the file syntax, then every key of the schema
 * table with its help text, what it accepts and its default, and the [format NAME] sections.
 * version goes into the page's footer. ADAPT_EIO on write error. */
enum adapt_status adapt_config_print_man(FILE *f, const char *version);

/* {"run":{"seed":1,...},"data":{...},...}: integers, reals, booleans,
 * strings (enums by name), lists as arrays, pair lists as arrays of [a, b].
 * NULL only when out of memory. */
json_t *adapt_config_to_json(const struct adapt_config *cfg);
/* 32 or 16: the random bits per stochastic rounding quantization.sr_bits names. */
int adapt_config_sr_bits(const struct adapt_config *cfg);

/* 1 when every configuration value is equal (provenance is ignored);
 * otherwise 0 and, when diff is not NULL, the first differing "section.key". */
int adapt_config_equal(const struct adapt_config *a, const struct adapt_config *b,
                       char *diff, size_t diff_size);

/* The name of an enum key's current value ("fashion-mnist"), NULL when
 * section.key is not an enum key. */
/* The model to build: model.file when set, else model.name (for adapt_graph_load). */
const char *adapt_config_model(const struct adapt_config *cfg);
const char *adapt_config_enum_str(const struct adapt_config *cfg, const char *section,
                                  const char *key);

/* data.path, or the dataset default when empty: /usr/share/datasets/fashion-mnist
 * for fashion-mnist, data/<dataset name> otherwise. ADAPT_ERANGE if buf is too small. */
enum adapt_status adapt_config_data_path(const struct adapt_config *cfg, char *buf, size_t size);
/* run.out, or runs/<stem of the config file> when empty (runs/default without a file). */
enum adapt_status adapt_config_out_dir(const struct adapt_config *cfg, char *buf, size_t size);
/* data.augment resolved: auto means on for CIFAR-10/100, off otherwise. */
bool adapt_config_augment_enabled(const struct adapt_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
