/* src/config/config.c: the run configuration's key table and its API (defaults, the INI
 * file, --set, cross-field checks, printing) on the schema engine of src/config/schema.h.
 *
 * Every key is one row of the table `keys` below: its type, the field it
 * fills, its default (written as in an INI file, and parsed by the same code
 * as a file value), its range ("[lo, hi]", "(" and ")" for open ends) and its
 * help text.
 */
#include "src/config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/log.h"

/* The names of each enum's values, indexed by value (the enums in config.h,
 * src/trace/trace.h and src/quant/quant.h). */
static const char *const dataset_names[] = {"mnist", "fashion-mnist", "emnist-balanced",
                                            "cifar10", "cifar100"};
static const char *const augment_names[] = {"auto", "on", "off"};
static const char *const resize_names[] = {[ADAPT_CONFIG_RESIZE_PAD] = "pad",
                                           [ADAPT_CONFIG_RESIZE_BILINEAR] = "bilinear"};
static const char *const schedule_names[] = {"constant", "multistep", "plateau"};
static const char *const policy_names[] = {"fp32", "fixed", "adapt", "muppet", "amp", "comp"};
static const char *const amp_names[] = {"fp16", "bf16"};
static const char *const compat_names[] = {[ADAPT_COMPAT_CORRECTED] = "corrected",
                                           [ADAPT_COMPAT_REFERENCE] = "reference"};
static const char *const rounding_names[] = {[QUANT_ROUND_NEAREST] = "nearest",
                                             [QUANT_ROUND_STOCHASTIC] = "stochastic"};
static const int rounding_order[] = {QUANT_ROUND_STOCHASTIC, QUANT_ROUND_NEAREST};
static const char *const sr_bits_names[] = {[ADAPT_CONFIG_SR_BITS_32] = "32",
                                            [ADAPT_CONFIG_SR_BITS_16] = "16"};
static const char *const round_layers_names[] = {"units", "all"};
static const char *const switch_names[] = {
    [ADAPT_SWITCH_AUTO] = "auto", [ADAPT_SWITCH_ON] = "on", [ADAPT_SWITCH_OFF] = "off"};
static const char *const lb_update_names[] = {[ADAPT_CONFIG_LB_UPDATE_STEP] = "step",
                                              [ADAPT_CONFIG_LB_UPDATE_WINDOW] = "window",
                                              [ADAPT_CONFIG_LB_UPDATE_AUTO] = "auto"};
static const char *const ste_names[] = {"auto", "plain", "saturating"};
static const char *const auto_bool_names[] = {"auto", "true", "false"};
static const char *const propagation_names[] = {[ADAPT_CONFIG_PROPAGATION_UNIT] = "unit",
                                                [ADAPT_CONFIG_PROPAGATION_GRAPH] = "graph"};
static const char *const graph_preset_names[] = {[ADAPT_CONFIG_GRAPH_CONSERVATIVE] = "conservative",
                                                 [ADAPT_CONFIG_GRAPH_DEFAULT] = "default",
                                                 [ADAPT_CONFIG_GRAPH_AGGRESSIVE] = "aggressive"};
static const char *const device_names[] = {[ADAPT_CONFIG_DEVICE_CPU] = "cpu",
                                           [ADAPT_CONFIG_DEVICE_CUDA] = "cuda"};
static const char *const wl_fl_labels[] = {"WL", "FL"};
static const char *const wl_epochs_labels[] = {"WL", "EPOCHS"};

static const char *const recipe_names[] = {
    [ADAPT_RECIPE_NONE] = "none", [ADAPT_RECIPE_FP8_HYBRID_DELAYED] = "fp8_hybrid_delayed",
    [ADAPT_RECIPE_FP8_CURRENT] = "fp8_current", [ADAPT_RECIPE_MXFP8] = "mxfp8",
    [ADAPT_RECIPE_BF16_SR_MASTER] = "bf16_sr_master", [ADAPT_RECIPE_W4A8] = "w4a8",
    [ADAPT_RECIPE_MXFP8_GEMM] = "mxfp8_gemm"};
static const char *const amax_compute_names[] = {[ADAPT_AMAX_MAX] = "max",
                                                 [ADAPT_AMAX_MOST_RECENT] = "most_recent"};
static const char *const scale_kind_names[] = {[ADAPT_SCALE_FLOAT32] = "float32",
                                               [ADAPT_SCALE_POW2] = "pow2"};
static const char *const mx_axis_names[] = {[ADAPT_MX_AXIS_ROWS] = "rows",
                                            [ADAPT_MX_AXIS_GEMM] = "gemm",
                                            [ADAPT_MX_AXIS_CHANNELS] = "channels"};

#define NAMES(a) {a, (int)(sizeof a / sizeof a[0]), NULL}
static const struct adapt_schema_enum recipe_enum = NAMES(recipe_names);
static const struct adapt_schema_enum amax_compute_enum = NAMES(amax_compute_names);
static const struct adapt_schema_enum scale_kind_enum = NAMES(scale_kind_names);
static const struct adapt_schema_enum mx_axis_enum = NAMES(mx_axis_names);
static const struct adapt_schema_enum dataset_enum = NAMES(dataset_names);
static const struct adapt_schema_enum augment_enum = NAMES(augment_names);
static const struct adapt_schema_enum resize_enum = NAMES(resize_names);
static const struct adapt_schema_enum schedule_enum = NAMES(schedule_names);
static const struct adapt_schema_enum policy_enum = NAMES(policy_names);
static const struct adapt_schema_enum amp_enum = NAMES(amp_names);
static const struct adapt_schema_enum strategy_enum = NAMES(adapt_trace_strategy_names);
static const struct adapt_schema_enum compat_enum = NAMES(compat_names);
static const struct adapt_schema_enum rounding_enum = {
    rounding_names, (int)(sizeof rounding_names / sizeof rounding_names[0]), rounding_order};
static const struct adapt_schema_enum sr_bits_enum = NAMES(sr_bits_names);
static const struct adapt_schema_enum round_layers_enum = NAMES(round_layers_names);
static const struct adapt_schema_enum lb_update_enum = NAMES(lb_update_names);
static const struct adapt_schema_enum switch_enum = NAMES(switch_names);
static const struct adapt_schema_enum ste_enum = NAMES(ste_names);
static const struct adapt_schema_enum auto_bool_enum = NAMES(auto_bool_names);
static const struct adapt_schema_enum propagation_enum = NAMES(propagation_names);
static const struct adapt_schema_enum graph_preset_enum = NAMES(graph_preset_names);
static const struct adapt_schema_enum device_enum = NAMES(device_names);

#define FIELD(f) ADAPT_SCHEMA_FIELD(struct adapt_config, f)
#define K_INT(s, k, f, def, range, help) \
    {s, k, ADAPT_SCHEMA_INT, FIELD(f), def, range, NULL, NULL, NULL, 0, help}
#define K_I64(s, k, f, def, range, help) \
    {s, k, ADAPT_SCHEMA_I64, FIELD(f), def, range, NULL, NULL, NULL, 0, help}
#define K_DBL(s, k, f, def, range, help) \
    {s, k, ADAPT_SCHEMA_DOUBLE, FIELD(f), def, range, NULL, NULL, NULL, 0, help}
#define K_BOOL(s, k, f, def, help) \
    {s, k, ADAPT_SCHEMA_BOOL, FIELD(f), def, NULL, NULL, NULL, NULL, 0, help}
#define K_STR(s, k, f, def, help) \
    {s, k, ADAPT_SCHEMA_STRING, FIELD(f), def, NULL, NULL, NULL, NULL, 0, help}
/* a key added after traces were written: left out of their JSON while it holds its default */
#define K_STR_NEW(s, k, f, def, help) \
    {s, k, ADAPT_SCHEMA_STRING, FIELD(f), def, NULL, NULL, NULL, NULL, \
     ADAPT_SCHEMA_OMIT_DEFAULT, help}
#define ROLE_KEY(r, k, help) \
    K_STR("roles", k, roles.role[r], "auto", \
          help ": auto (what the policy rounds), unit (the unit's format), float32 or a "    \
          "format, then optionally nearest or stochastic, and unscaled, current, delayed or "  \
          "rowwise (a scale per output channel or sample)")
#define K_ENUM(s, k, f, def, choices, help) \
    {s, k, ADAPT_SCHEMA_ENUM, FIELD(f), def, NULL, NULL, &choices, NULL, 0, help}
#define REF_KEY(which, k, help) \
    K_ENUM("reference", k, reference.sw[which], "auto", switch_enum, \
           help "; auto: on with quantization.compat = reference (doc/algorithms.md)")
#define K_INTS(s, k, f, def, range, flags, help) \
    {s, k, ADAPT_SCHEMA_INTS, FIELD(f), def, range, NULL, NULL, NULL, flags, help}
#define K_PAIRS(s, k, f, def, range, range2, labels, help) \
    {s, k, ADAPT_SCHEMA_PAIRS, FIELD(f), def, range, range2, NULL, labels, 0, help}

/* The schema. Sections appear in the order of their first row. */
static const struct adapt_schema_key keys[] = {
    K_I64("run", "seed", run.seed, "1", "[0, 9223372036854775807]",
          "seed of every random stream (Philox key)"),
    K_STR("run", "out", run.out, "", "output directory; empty = runs/<config file stem>"),
    K_STR("run", "name", run.name, "",
          "the run's name in the tables and figures of adapt-perf, adapt-heatmap and "
          "experiments/report.py; empty = its configuration file's stem"),
    K_INT("run", "threads", run.threads, "0", "[0, 1024]", "OpenMP threads; 0 = OpenMP default"),
    K_INT("run", "log_every", run.log_every, "1", "[1, 1000000]",
          "optimizer steps between trace step lines"),
    K_INT("run", "checkpoint_every", run.checkpoint_every, "1", "[0, 1000000]",
          "epochs between checkpoints; 0 = only at the end"),
    K_ENUM("run", "device", run.device, "cpu", device_enum,
           "where the training step runs: cpu, or cuda (the GPU engine; policy fp32)"),
    K_INT("run", "gpu", run.gpu, "0", "[0, 63]", "CUDA device number when run.device = cuda"),

    K_ENUM("data", "dataset", data.dataset, "fashion-mnist", dataset_enum, "dataset"),
    K_STR("data", "path", data.path, "",
          "dataset directory (or a CIFAR .tar.gz); empty = the data set's own: "
          "/usr/share/datasets/fashion-mnist, data/mnist, data/emnist, or data for cifar10 and "
          "cifar100 (holding the extracted folder or the .tar.gz)"),
    K_INT("data", "val_size", data.val_size, "5000", "[0, 1000000]",
          "training samples held out for validation"),
    K_ENUM("data", "augment", data.augment, "auto", augment_enum,
           "random crop and flip; auto = on for CIFAR"),
    K_BOOL("data", "normalize", data.normalize, "true",
           "normalise inputs with the dataset mean and std"),
    K_INT("data", "train_limit", data.train_limit, "0", "[0, 1000000000]",
          "train on N samples; data.val_size more are held out for validation from the rest "
          "of the training file (refused when it is shorter); 0 = all"),
    K_INT("data", "test_limit", data.test_limit, "0", "[0, 1000000000]",
          "use only the first N test samples; 0 = all"),
    K_ENUM("data", "resize", data.resize, "pad", resize_enum,
           "how 28x28 MNIST-family images become the 32x32 the models read: pad (2 zero "
           "pixels each side) or bilinear (the AdaPT reference code's torchvision "
           "Resize((32, 32)): Pillow's 8-bit bilinear arithmetic, doc/running.md); CIFAR "
           "images are left as they are"),

    K_STR("model", "name", model.name, "lenet5",
          "built-in network, models/NAME.model (doc/models.md): lenet5, alexnet_mnist, "
          "alexnet_cifar, resnet20, resnet32, resnet56, ...; a trailing number sets the depth"),
    K_STR("model", "file", model.file, "",
          "a model description file (doc/model-format.md); when set it replaces model.name"),
    K_STR("model", "args", model.args, "",
          "values of the description's parameters, name=value[,name=value...]"),
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

    K_ENUM("schedule", "name", schedule.name, "constant", schedule_enum, "learning-rate schedule"),
    K_INTS("schedule", "milestones", schedule.milestones, "", "[1, 100000]",
           ADAPT_SCHEMA_INCREASING, "multistep: epochs after which lr *= gamma"),
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

    K_ENUM("policy", "name", policy.name, "fp32", policy_enum, "precision policy"),
    K_STR("policy", "format", policy.format, "fixed",
          "fixed: number format name (fixed, bfp, fp16, bf16, e4m3, e5m2, float(E,M), mxfp4, "
          "plugin(PATH), ..., or the NAME of a [format NAME] section)"),
    K_INT("policy", "wl", policy.wl, "16", "[1, 32]", "fixed: word length"),
    K_INT("policy", "fl", policy.fl, "8", "[0, 32]", "fixed: fractional length"),
    K_BOOL("policy", "allow_no_int_bits", policy.allow_no_int_bits, "false",
           "accept fixed-point formats with FL >= WL (policy.wl/fl, fixed(W,F), per_unit, "
           "[format] sections, quantization.start_wl/start_fl): no integer bit, all values "
           "below 2^(WL-1-FL) < 1 in magnitude; refused otherwise"),
    K_PAIRS("policy", "per_unit", policy.per_unit, "", "[1, 32]", "[0, 32]", wl_fl_labels,
            "fixed: WL:FL per precision unit, overriding wl and fl"),
    K_INTS("policy", "muppet_levels", policy.muppet_levels, "8,12,14,16", "[2, 32]",
           ADAPT_SCHEMA_INCREASING, "muppet: word lengths before float32"),
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
    K_ENUM("policy", "amp_type", policy.amp_type, "fp16", amp_enum, "amp: half-precision type"),
    K_DBL("policy", "amp_init_scale", policy.amp_init_scale, "65536", "(0, 1e30]",
          "amp: initial loss scale"),
    K_INT("policy", "amp_growth_interval", policy.amp_growth_interval, "2000", "[1, 1000000000]",
          "amp: clean steps before the loss scale doubles"),
    K_STR("policy", "comp_formats", policy.comp_formats, "fp16",
          "comp: candidate formats, comma-separated, lowest first; plan digit i is format i "
          "and the digit after the last is float32"),
    K_DBL("policy", "comp_tolerance", policy.comp_tolerance, "1.01", "[1, 100]",
          "comp: a stage-1 plan is safe when its epoch loss < float32's x this"),
    K_STR("policy", "comp_try", policy.comp_try, "",
          "comp: units (layer names) tried in stage 1; empty = the units that fail the "
          "tensor-core rule (comp_tc_multiple)"),
    K_INT("policy", "comp_tc_multiple", policy.comp_tc_multiple, "8", "[1, 1024]",
          "comp: a unit whose input and output channels (per group) are multiples of this is "
          "set to the first format without a trial"),
    K_INT("policy", "comp_max_plans", policy.comp_max_plans, "64", "[1, 100000]",
          "comp: refuse a search with more plans than this in either stage"),
    K_INT("policy", "comp_sample_steps", policy.comp_sample_steps, "0", "[0, 100000000]",
          "comp: optimizer steps of a stage-1 sample; 0 = one whole epoch"),
    K_STR("policy", "comp_plan", policy.comp_plan, "",
          "comp: a plan string (one digit per layer) to train with, skipping the search"),
    K_STR("policy", "comp_hw", policy.comp_hw, "",
          "comp: timing table (adapt-bench gemm) that prices plans; empty = analytical cost"),

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
    K_ENUM("quantization", "lb_update", quantization.lb_update, "auto", lb_update_enum,
           "adapt: when lookback and resolution are adapted: step (every step, from the "
           "gradients accumulated so far, as the published code), window (once per window, "
           "when n reaches the lookback, from the whole window, before its push-down: the "
           "paper's order) or auto (window under compat = corrected, step under reference)"),
    K_INT("quantization", "buffer_bits", quantization.buffer_bits, "4", "[0, 31]",
          "adapt: buffer bits added after a push-up"),
    K_ENUM("quantization", "strategy", quantization.strategy, "min", strategy_enum,
           "adapt: initial push-up strategy"),
    K_BOOL("quantization", "quant_inputs", quantization.quant_inputs, "true",
           "quantize the input activations of units"),
    K_BOOL("quantization", "quant_outputs", quantization.quant_outputs, "true",
           "quantize the outputs of units"),
    K_ENUM("quantization", "round_layers", quantization.round_layers, "units", round_layers_enum,
           "outputs rounded with quant_outputs: units (conv/linear) or all (also the batch-norm, "
           "pooling, activation and residual layers after a unit, in its format)"),
    K_ENUM("quantization", "ste", quantization.ste, "auto", ste_enum,
           "backward through rounded outputs: plain straight-through, saturating (no gradient "
           "pushing a saturated output further out), auto = saturating for adapt corrected, "
           "plain otherwise"),
    K_ENUM("quantization", "round_logits", quantization.round_logits, "auto", auto_bool_enum,
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
    K_ENUM("quantization", "compat", quantization.compat, "corrected", compat_enum,
           "adapt: corrected algorithm or the reference implementation's behaviour"),
    K_ENUM("quantization", "rounding", quantization.rounding, "stochastic", rounding_enum,
           "rounding of quantized weights, activations and gradients"),
    {"quantization", "sr_bits", ADAPT_SCHEMA_ENUM, FIELD(quantization.sr_bits), "32", NULL, NULL,
     &sr_bits_enum, NULL, ADAPT_SCHEMA_OMIT_DEFAULT,
     "random bits per stochastic rounding: 32 (a Philox value per element) or 16 (one value "
     "serves two elements: half the random-number work, a bias below 2^-16 of a step; "
     "doc/numerics.md)"},
    K_ENUM("quantization", "precision_propagation", quantization.precision_propagation, "unit",
           propagation_enum,
           "amp and fixed: which layers round their outputs: unit (every unit, and with "
           "round_layers = all the layers after it, in its format) or graph (allow / infer / "
           "deny sets of layer kinds propagated upstream over the model graph; doc/policies.md)"),
    K_ENUM("quantization", "graph_preset", quantization.graph_preset, "default", graph_preset_enum,
           "graph: the kinds of each set. conservative: only relu, relu6, maxpool2d, flatten "
           "and concat infer, the other non-unit kinds are denied; default: batchnorm2d "
           "denied, the other non-unit kinds infer; aggressive: every kind allowed but "
           "flatten and dropout (infer). conv2d and linear are allowed in every preset"),
    K_STR("quantization", "graph_allow", quantization.graph_allow, "",
          "graph: layer kinds moved into the allow set (low precision), e.g. add,avgpool2d"),
    K_STR("quantization", "graph_infer", quantization.graph_infer, "",
          "graph: layer kinds moved into the infer set (low precision when every consumer is)"),
    K_STR("quantization", "graph_deny", quantization.graph_deny, "",
          "graph: layer kinds moved into the deny set (float32; a denied unit is float32)"),
    K_STR("quantization", "graph_low", quantization.graph_low, "",
          "graph: layer names computed in low precision whatever their kind's set"),
    K_STR("quantization", "graph_float", quantization.graph_float, "",
          "graph: layer names kept float32 whatever their kind's set, e.g. 11 (LeNet-5's "
          "classifier)"),
    REF_KEY(ADAPT_REF_KL_TEST, "kl_test",
            "adapt push-down test: stochastic rounding of the weights' first slice w[0], "
            "histograms of their own range, lossy when the KL is above 0; off: the corrected "
            "test (nearest rounding of pd_sample weights, the noise threshold)"),
    REF_KEY(ADAPT_REF_PD_BISECT, "pd_bisect",
            "adapt push-down bisection as the published loops run it; off: the search over "
            "(lo - 1, hi]"),
    REF_KEY(ADAPT_REF_PU_S2_ZERO, "pu_s2_zero",
            "adapt push-up step s2 bounded below by 0; off: by 1, the paper's bound"),
    REF_KEY(ADAPT_REF_LB_CEIL, "lb_ceil",
            "adapt lookback rounded up after its smoothing, a window ending at n >= lb; off: "
            "real-valued, ending at n >= round(lb)"),
    REF_KEY(ADAPT_REF_STRATEGY, "strategy",
            "adapt push-up strategy from the last micro-batch's loss against the stored losses, "
            "k = int(mean lb) over parameter slots; off: the corrected rule"),
    REF_KEY(ADAPT_REF_BN_FORMAT, "bn_format",
            "adapt: batch-norm gamma and beta (values and gradients) in the format of the unit "
            "before them; off: float32"),
    REF_KEY(ADAPT_REF_L1_QUANTIZED, "l1_quantized",
            "adapt: the L1 term's sign from the quantized weight copies; off: from the float32 "
            "master"),
    REF_KEY(ADAPT_REF_SOFTMAX_BEFORE_CE, "softmax_before_ce",
            "the training and evaluation loss is the cross-entropy of softmax(logits), a second "
            "softmax, as the published LeNet-5 computes it (auto: only for model.name = lenet5); "
            "off: the cross-entropy of the logits. CPU engine only"),
    REF_KEY(ADAPT_REF_ACT_FORMATS, "act_formats",
            "adapt: unit activations (inputs, outputs) in the formats the published models "
            "index: lenet5's convs at start_wl/start_fl, its linears in the first conv's format; "
            "alexnet's unit k in unit k/2's; a resnet's block conv that is module m in the "
            "format of parameter m (auto: only for lenet5, alexnet_mnist, alexnet_cifar and the "
            "resnets); off: each unit's own format"),
    REF_KEY(ADAPT_REF_LOSS_PENALTY, "loss_penalty",
            "adapt: the loss the push-up strategy compares includes the published AlexNet's and "
            "ResNet's penalty, the mean over parameters of WL/32 x their non-zero fraction (auto: "
            "only for alexnet_mnist, alexnet_cifar and resnet models); off: the loss alone. CPU "
            "engine only"),
    REF_KEY(ADAPT_REF_POOL_ROUNDING, "pool_rounding",
            "adapt: average pools round their input (in place, so the activation before them "
            "reads it rounded too) and their output, stochastically, in the formats the "
            "published models give them: lenet5's both in the first conv's, a resnet's in the "
            "last block's (auto: only for lenet5 and the resnets); off: pools rounded only with "
            "round_layers = all, in the format of the unit before them. CPU engine only"),
    REF_KEY(ADAPT_REF_BN_ROUNDING, "bn_rounding",
            "adapt: a resnet's batch norms round their input and output likewise, in the format "
            "of the parameter their module number indexes (auto: only for the resnets); off: "
            "rounded only with round_layers = all, in their conv's format. CPU engine only"),
    K_ENUM("roles", "recipe", roles.recipe, "none", recipe_enum,
           "formats, rounding and scaling of the tensor roles together (doc/numerics.md, "
           "\"Recipes\"): fp8_hybrid_delayed (E4M3 weights and inputs, E5M2 output "
           "gradients, delayed scaling), fp8_current (the same, scaled from each tensor), "
           "mxfp8 (MXFP8 E4M3 operands), bf16_sr_master (bf16 everywhere, master weights "
           "rounded stochastically), w4a8 (4-bit weights, 8-bit inputs, integer grids scaled "
           "from each tensor), mxfp8_gemm (mxfp8 with roles.mx_axis = gemm); the role keys "
           "below override it"),
    ROLE_KEY(ADAPT_ROLE_WEIGHT, "weight", "the weight copy the unit computes with"),
    ROLE_KEY(ADAPT_ROLE_BIAS, "bias", "the bias copy"),
    ROLE_KEY(ADAPT_ROLE_INPUT, "input", "the unit's input activation"),
    ROLE_KEY(ADAPT_ROLE_OUTPUT, "output",
             "the unit's output activation and the layers after it that take its format"),
    ROLE_KEY(ADAPT_ROLE_GRAD_WEIGHT, "grad_weight", "the weight gradient"),
    ROLE_KEY(ADAPT_ROLE_GRAD_BIAS, "grad_bias", "the bias gradient"),
    ROLE_KEY(ADAPT_ROLE_GRAD_OUTPUT, "grad_output",
             "the error gradient the unit receives (w.r.t. its output), before its backward"),
    ROLE_KEY(ADAPT_ROLE_GRAD_INPUT, "grad_input",
             "the error gradient the unit sends back (w.r.t. its input)"),
    ROLE_KEY(ADAPT_ROLE_MASTER, "master",
             "the float32 master weights, rounded in place after every update (e.g. bf16 "
             "stochastic: a bf16 master updated with stochastic rounding)"),
    K_STR("roles", "units", roles.units, "",
          "per-unit overrides by layer name: NAME: role=value, role=value | NAME: ... (e.g. "
          "\"0: weight=fixed(8,4), input=float32 | 11: grad_output=float32\"); a value as "
          "for the role keys"),
    K_INT("roles", "amax_history", roles.amax_history, "1024", "[1, 1000000]",
          "delayed scaling: amax values remembered per tensor (Transformer Engine's "
          "amax_history_len)"),
    K_ENUM("roles", "amax_compute", roles.amax_compute, "max", amax_compute_enum,
           "delayed scaling: the amax a scale is computed from: the history's max or its "
           "most recent value"),
    K_INT("roles", "margin", roles.margin, "0", "[0, 64]",
          "scaling: scale = (largest finite value / amax) / 2^margin"),
    K_ENUM("roles", "scale", roles.scale, "float32", scale_kind_enum,
           "scaling: a float32 scale, or the power of two at or below it"),
    K_ENUM("roles", "mx_axis", roles.mx_axis, "rows", mx_axis_enum,
           "MX roles (weight, input, grad_output): blocks of 32 along each tensor's rows; "
           "gemm: along the reduction dimension of each of the unit's three GEMMs, the "
           "convolutions' lowered input included (each operand rounded once per GEMM; conv2d "
           "and linear units; recipe mxfp8_gemm sets gemm unless this key says otherwise); "
           "channels: as gemm, but a convolution's unlowered input and its weight along the "
           "input channels, and for the weight gradient its input and output gradient along "
           "the batch, as microxcaling's MX convolution"),
    K_STR_NEW("arithmetic", "accumulator", arithmetic.accumulator, "float32",
              "how the matrix products of every conv2d and linear unit multiply and sum, in their "
              "three GEMMs (forward, input gradient, weight gradient; doc/numerics.md, "
              "\"Accumulators\"): float32 (products and sums in float32), exact (integer products "
              "and sums of fixed-point operands, rounded once), int(BITS[, wrap|saturate[, FL[, "
              "floor|nearest]]]) (a BITS-bit two's-complement accumulator, binary point at the "
              "products' own or FL, a product's bits below FL floored or rounded to nearest), "
              "float(FORMAT[, K]) (each addition rounded to FORMAT, promoted to float32 every K "
              "products). exact and int apply to a GEMM whose two operands are on fixed-point "
              "grids; the others run float32. CPU engine only"),
    K_STR_NEW("arithmetic", "units", arithmetic.units, "",
              "per-unit accumulators by layer name: NAME: MODEL | NAME: MODEL (e.g. \"conv1: "
              "exact | fc3: int(16, saturate)\")"),
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* [format NAME] sections: one struct adapt_config_format each. */
static const char *const format_kind_names[] = {[ADAPT_CONFIG_FORMAT_FLOAT] = "float",
                                                [ADAPT_CONFIG_FORMAT_FIXED] = "fixed"};
static const char *const overflow_names[] = {[QUANT_OVERFLOW_SATURATE] = "saturate",
                                             [QUANT_OVERFLOW_INF] = "inf"};
static const char *const nan_names[] = {
    [QUANT_NAN_IEEE] = "ieee", [QUANT_NAN_FN] = "fn", [QUANT_NAN_NONE] = "none"};
static const struct adapt_schema_enum format_kind_enum = NAMES(format_kind_names);
static const struct adapt_schema_enum overflow_enum = NAMES(overflow_names);
static const struct adapt_schema_enum nan_enum = NAMES(nan_names);

#define FFIELD(f) ADAPT_SCHEMA_FIELD(struct adapt_config_format, f)
#define F_INT(k, f, def, range, help) \
    {"format", k, ADAPT_SCHEMA_INT, FFIELD(f), def, range, NULL, NULL, NULL, 0, help}
#define F_ENUM(k, f, def, choices, help) \
    {"format", k, ADAPT_SCHEMA_ENUM, FFIELD(f), def, NULL, NULL, &choices, NULL, 0, help}
enum { FK_KIND, FK_EXP_BITS, FK_MAN_BITS, FK_BIAS, FK_NAN, FK_SUBNORMALS, FK_OVERFLOW, FK_WL,
       FK_FL, FK_COUNT };
static const struct adapt_schema_key format_keys[FK_COUNT] = {
    F_ENUM("kind", kind, "float", format_kind_enum,
           "float (sign, exponent, mantissa) or fixed (two's complement <WL,FL>); required"),
    F_INT("exp_bits", exp_bits, "5", "[2, 8]", "float: exponent bits; required"),
    F_INT("man_bits", man_bits, "10", "[1, 23]", "float: mantissa bits; required"),
    F_INT("bias", bias, "0", "[-1000, 1000]",
          "float: exponent bias; unset = 2^(exp_bits-1) - 1. The values must fit float32: the "
          "largest below 2^128, the least step 2^(1-bias-man_bits) at least 2^-126 (or bias "
          "127)"),
    F_ENUM("nan", nan, "ieee", nan_enum,
           "float: the all-ones exponent holds inf and NaN (ieee), normals with only "
           "S.1..1.1..1 NaN and no inf (fn, as OCP E4M3), or normals only (none, every code "
           "finite)"),
    {"format", "subnormals", ADAPT_SCHEMA_BOOL, FFIELD(subnormals), "true", NULL, NULL, NULL,
     NULL, 0, "float: gradual underflow"},
    F_ENUM("overflow", overflow, "saturate", overflow_enum,
           "float: past the largest value: saturate, or inf (NaN with nan = fn; not with "
           "nan = none)"),
    F_INT("wl", wl, "8", "[1, 32]", "fixed: word length; required"),
    F_INT("fl", fl, "4", "[0, 32]", "fixed: fractional length; required"),
};
static const struct adapt_schema_named named_sections[] = {
    {"format", format_keys, FK_COUNT, sizeof(struct adapt_config_format),
     offsetof(struct adapt_config, formats.f), offsetof(struct adapt_config, formats.n),
     ADAPT_CONFIG_FORMATS_MAX}};

static const struct adapt_schema schema = {keys, NKEYS, sizeof(struct adapt_config),
                                           named_sections, 1};

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

void adapt_config_origin_str(const struct adapt_config *cfg, const char *section,
                             const char *key, char *buf, size_t size)
{
    int row = adapt_schema_find(&schema, section, key);
    if (row < 0) snprintf(buf, size, "%s.%s", section, key);
    else origin_text(cfg, row, buf, size);
}

void adapt_config_init(struct adapt_config *cfg)
{
    ADAPT_ASSERT(NKEYS <= ADAPT_CONFIG_KEYS_MAX);
    adapt_schema_init(&schema, cfg);
    for (int i = 0; i < NKEYS; i++) {
        cfg->origin[i].kind = ADAPT_CONFIG_FROM_DEFAULT;
        cfg->origin[i].line = 0;
    }
}

enum adapt_status adapt_config_load(struct adapt_config *cfg, const char *path)
{
    enum adapt_status st;
    int lines[NKEYS];
    if (cfg->file[0])
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: a configuration file (%s) is already loaded; one per run", path,
                           cfg->file);
    if (strlen(path) >= sizeof cfg->file)
        return ADAPT_ERROR(ADAPT_EINVAL, "%.64s...: configuration file path longer than %zu bytes",
                           path, sizeof cfg->file - 1);
    if ((st = adapt_schema_load(&schema, cfg, path, lines)) != ADAPT_OK) return st;
    strcpy(cfg->file, path);
    for (int i = 0; i < NKEYS; i++)
        if (lines[i]) {
            cfg->origin[i].kind = ADAPT_CONFIG_FROM_FILE;
            cfg->origin[i].line = lines[i];
        }
    return ADAPT_OK;
}

enum adapt_status adapt_config_set(struct adapt_config *cfg, const char *assignment)
{
    if (strlen(assignment) >= sizeof cfg->overrides[0])
        return ADAPT_ERROR(ADAPT_EINVAL, "--set %.64s...: longer than %zu characters", assignment,
                           sizeof cfg->overrides[0] - 1);
    if (cfg->n_overrides == ADAPT_CONFIG_OVERRIDES_MAX)
        return ADAPT_ERROR(ADAPT_EINVAL, "--set %s: more than %d overrides", assignment,
                           ADAPT_CONFIG_OVERRIDES_MAX);
    int row;
    enum adapt_status st = adapt_schema_set(&schema, cfg, "--set", assignment, &row);
    if (st != ADAPT_OK) return st;
    strcpy(cfg->overrides[cfg->n_overrides++], assignment);
    if (row >= 0) { /* a [format NAME] key (row -1) keeps its own record */
        cfg->origin[row].kind = ADAPT_CONFIG_FROM_SET;
        cfg->origin[row].line = cfg->n_overrides;
    }
    return ADAPT_OK;
}

/* Integer value of an INT key, by name. */
static int int_value(const struct adapt_config *cfg, const char *section, const char *key, int *row)
{
    *row = adapt_schema_find(&schema, section, key);
    ADAPT_ASSERT(*row >= 0 && keys[*row].type == ADAPT_SCHEMA_INT);
    return *(const int *)((const char *)cfg + keys[*row].offset);
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

/* precision_propagation = graph is what the amp and fixed policies offer; AdaPT and MuPPET
 * choose their formats per unit and would ignore it (fp32 has nothing to propagate). */
static enum adapt_status check_propagation(const struct adapt_config *cfg)
{
    if (cfg->quantization.precision_propagation != ADAPT_CONFIG_PROPAGATION_GRAPH ||
        (cfg->policy.name != ADAPT_CONFIG_POLICY_ADAPT &&
         cfg->policy.name != ADAPT_CONFIG_POLICY_MUPPET))
        return ADAPT_OK;
    char op[ADAPT_CONFIG_OVERRIDE_LEN + 16], o[ADAPT_CONFIG_OVERRIDE_LEN + 16];
    origin_text(cfg, adapt_schema_find(&schema, "quantization", "precision_propagation"), op,
                sizeof op);
    origin_text(cfg, adapt_schema_find(&schema, "policy", "name"), o, sizeof o);
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "%s: quantization.precision_propagation = graph needs policy.name = amp "
                       "or fixed, not %s (set at %s)",
                       op, adapt_config_enum_str(cfg, "policy", "name"), o);
}

/* Where key r of format section f was set ("x.ini:12", "--set format.NAME.KEY"), or, for
 * r = -1 or a key not set, where the section was ("x.ini:10", "--set format.NAME"). */
static void format_origin(const struct adapt_config *cfg, const struct adapt_config_format *f,
                          int r, char *buf, size_t size)
{
    if (r >= 0 && f->head.set[r] > 0)
        snprintf(buf, size, "%s:%d", cfg->file, f->head.set[r]);
    else if (r >= 0 && f->head.set[r])
        snprintf(buf, size, "--set format.%s.%s", f->head.name, format_keys[r].key);
    else if (f->head.line > 0)
        snprintf(buf, size, "%s:%d", cfg->file, f->head.line);
    else
        snprintf(buf, size, "--set format.%s", f->head.name);
}

enum adapt_status adapt_config_format_spec(const struct adapt_config *cfg,
                                           const struct adapt_config_format *f,
                                           struct quant_spec *out)
{
    static const int need[2][2] = {{FK_EXP_BITS, FK_MAN_BITS}, {FK_WL, FK_FL}};
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 64];
    const char *name = f->head.name;
    if (!f->head.set[FK_KIND]) {
        format_origin(cfg, f, -1, o, sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: [format %s] needs kind = float or fixed", o, name);
    }
    int fixed = f->kind == ADAPT_CONFIG_FORMAT_FIXED;
    for (int i = 0; i < 2; i++)
        if (!f->head.set[need[fixed][i]]) {
            format_origin(cfg, f, -1, o, sizeof o);
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: [format %s] (kind = %s) needs %s and %s; %s "
                               "is not set", o, name, format_kind_names[f->kind],
                               format_keys[need[fixed][0]].key, format_keys[need[fixed][1]].key,
                               format_keys[need[fixed][i]].key);
        }
    for (int r = FK_EXP_BITS; r < FK_COUNT; r++)
        if (f->head.set[r] && (r >= FK_WL) != fixed) {
            format_origin(cfg, f, r, o, sizeof o);
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s: format.%s.%s is a key of kind = %s, and [format %s] is "
                               "kind = %s",
                               o, name, format_keys[r].key, fixed ? "float" : "fixed", name,
                               format_kind_names[f->kind]);
        }
    struct quant_spec s;
    quant_spec_init(&s, fixed ? QUANT_FORMAT_FIXED : QUANT_FORMAT_FLOAT);
    if (fixed) {
        s.wl = f->wl;
        s.fl = f->fl;
    } else {
        s.exp_bits = f->exp_bits;
        s.man_bits = f->man_bits;
        if (f->head.set[FK_BIAS]) s.bias = f->bias;
        s.nan = f->nan;
        s.subnormals = f->subnormals;
        s.overflow = f->overflow;
    }
    enum adapt_status st = quant_spec_check(&s);
    if (st != ADAPT_OK) { /* the key most likely at fault: the bias, the overflow rule */
        int r = st == ADAPT_ERANGE ? (f->head.set[FK_BIAS] ? FK_BIAS : -1)
                : f->head.set[FK_OVERFLOW] ? FK_OVERFLOW
                                            : -1;
        format_origin(cfg, f, r, o, sizeof o);
        return ADAPT_ERROR(st, "%s: [format %s]: %s", o, name, adapt_error_message());
    }
    *out = s;
    return ADAPT_OK;
}

/* Registers every [format NAME] (src/quant's table), then, for the fixed policy, checks that
 * policy.format names a format. */
static enum adapt_status check_formats(const struct adapt_config *cfg)
{
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 64];
    enum adapt_status st;
    for (int i = 0; i < cfg->formats.n; i++) {
        const struct adapt_config_format *f = &cfg->formats.f[i];
        struct quant_spec s;
        if ((st = adapt_config_format_spec(cfg, f, &s)) != ADAPT_OK) return st;
        if ((st = quant_format_define(f->head.name, &s)) != ADAPT_OK) {
            format_origin(cfg, f, -1, o, sizeof o);
            return ADAPT_ERROR(st, "%s: [format %s]: %s", o, f->head.name, adapt_error_message());
        }
    }
    if (cfg->policy.name != ADAPT_CONFIG_POLICY_FIXED) return ADAPT_OK;
    struct quant_spec s;
    if ((st = quant_spec_parse(cfg->policy.format, &s)) != ADAPT_OK) {
        origin_text(cfg, adapt_schema_find(&schema, "policy", "format"), o, sizeof o);
        return ADAPT_ERROR(st, "%s: policy.format = %s: %s", o, cfg->policy.format,
                           adapt_error_message());
    }
    return ADAPT_OK;
}

/* A fixed-point format <wl, fl> named by key `key` (row: where it was set; -1: say `where`):
 * FL >= WL leaves no integer bit (every value below 2^(WL-1-FL) <= 1/2 in magnitude) and
 * trains at chance, refused unless policy.allow_no_int_bits; FL = WL - 1 (a sign bit, values
 * in (-1, 1)) is warned about. */
static enum adapt_status check_fixed_bits(const struct adapt_config *cfg, const char *key, int row,
                                          const char *where, int wl, int fl)
{
    if (fl < wl - 1 || cfg->policy.allow_no_int_bits) return ADAPT_OK;
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 64];
    if (row >= 0)
        origin_text(cfg, row, o, sizeof o);
    else
        snprintf(o, sizeof o, "%s", where);
    if (fl == wl - 1) {
        adapt_log(ADAPT_LOG_WARN,
                  "%s: %s: fixed(%d,%d) has a sign bit and no integer bit: every value is "
                  "clamped to (-1, 1)",
                  o, key, wl, fl);
        return ADAPT_OK;
    }
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "%s: %s: fixed(%d,%d) has FL = %d >= WL = %d, no integer bit: every value "
                       "is clamped below 2^%d in magnitude and training stays at chance; use FL <= "
                       "WL - 2 = %d (FL = WL - 1 keeps only a sign bit), or set "
                       "policy.allow_no_int_bits = true",
                       o, key, wl, fl, fl, wl, wl - 1 - fl, wl - 2);
}

/* Every fixed-point format the configuration names, through check_fixed_bits. */
static enum adapt_status check_int_bits(const struct adapt_config *cfg)
{
    enum adapt_status st;
    char key[ADAPT_CONFIG_STR_MAX + 640];
    int fl_row = adapt_schema_find(&schema, "policy", "fl");
    for (int i = 0; i < cfg->formats.n; i++) {
        const struct adapt_config_format *f = &cfg->formats.f[i];
        char o[ADAPT_CONFIG_OVERRIDE_LEN + 64];
        if (f->kind != ADAPT_CONFIG_FORMAT_FIXED) continue;
        format_origin(cfg, f, -1, o, sizeof o);
        snprintf(key, sizeof key, "format.%s.wl = %d, format.%s.fl = %d", f->head.name, f->wl,
                 f->head.name, f->fl);
        if ((st = check_fixed_bits(cfg, key, -1, o, f->wl, f->fl))) return st;
    }
    if (cfg->policy.name == ADAPT_CONFIG_POLICY_ADAPT) {
        snprintf(key, sizeof key, "quantization.start_wl = %d, quantization.start_fl = %d",
                 cfg->quantization.start_wl, cfg->quantization.start_fl);
        return check_fixed_bits(cfg, key, adapt_schema_find(&schema, "quantization", "start_fl"),
                                NULL, cfg->quantization.start_wl, cfg->quantization.start_fl);
    }
    if (cfg->policy.name != ADAPT_CONFIG_POLICY_FIXED) return ADAPT_OK;
    const struct adapt_schema_pairs *pu = &cfg->policy.per_unit;
    for (int u = 0; u < pu->n; u++) {
        snprintf(key, sizeof key, "policy.per_unit entry %d = %d:%d", u + 1, pu->a[u], pu->b[u]);
        if ((st = check_fixed_bits(cfg, key, adapt_schema_find(&schema, "policy", "per_unit"),
                                   NULL, pu->a[u], pu->b[u])))
            return st;
    }
    if (pu->n) return ADAPT_OK;
    struct quant_spec s;
    if (quant_spec_parse(cfg->policy.format, &s) != ADAPT_OK || s.format != QUANT_FORMAT_FIXED)
        return ADAPT_OK;
    if (!strcmp(cfg->policy.format, "fixed")) { /* the bare name: policy.wl and policy.fl */
        snprintf(key, sizeof key, "policy.wl = %d, policy.fl = %d", cfg->policy.wl,
                 cfg->policy.fl);
        return check_fixed_bits(cfg, key, fl_row, NULL, cfg->policy.wl, cfg->policy.fl);
    }
    snprintf(key, sizeof key, "policy.format = %s", cfg->policy.format);
    return check_fixed_bits(cfg, key, adapt_schema_find(&schema, "policy", "format"), NULL, s.wl,
                            s.fl);
}

/* Every role parses; roles need a policy that quantizes; scaling only of formats without their
 * own scales. */
static enum adapt_status check_roles(const struct adapt_config *cfg)
{
    if (!adapt_config_roles_set(cfg)) return ADAPT_OK;
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
    if (cfg->policy.name == ADAPT_CONFIG_POLICY_FP32) {
        int row = adapt_schema_find(&schema, "policy", "name");
        origin_text(cfg, row, o, sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: policy.name = fp32 with [roles] set: tensor roles need a policy "
                           "that quantizes (fixed, adapt, muppet or amp)", o);
    }
    if (cfg->policy.name == ADAPT_CONFIG_POLICY_COMP) {
        origin_text(cfg, adapt_schema_find(&schema, "policy", "name"), o, sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: policy.name = comp with [roles] set: the plan search chooses "
                           "each layer's format itself; use fixed, adapt, muppet or amp", o);
    }
    for (int r = 0; r < ADAPT_ROLE_N; r++) {
        struct adapt_role_fmt f;
        enum adapt_status st = adapt_config_role(cfg, (enum adapt_role)r, &f);
        if (st) return st;
    }
    struct adapt_role_override ov[ADAPT_ROLE_OVERRIDES_MAX];
    int n;
    return adapt_config_role_overrides(cfg, ov, &n);
}

/* [arithmetic] parses; its models need a policy whose units round (not fp32 or comp) */
static enum adapt_status check_arith(const struct adapt_config *cfg)
{
    struct quant_acc def;
    struct adapt_arith_override ov[ADAPT_ARITH_OVERRIDES_MAX];
    int n;
    enum adapt_status st = adapt_config_arith(cfg, &def, ov, &n);
    if (st || !adapt_config_arith_set(cfg)) return st;
    if (cfg->policy.name == ADAPT_CONFIG_POLICY_FP32 ||
        cfg->policy.name == ADAPT_CONFIG_POLICY_COMP) {
        char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
        origin_text(cfg, adapt_schema_find(&schema, "policy", "name"), o, sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: policy.name = %s with [arithmetic] set: accumulator models need "
                           "a policy with precision units (fixed, adapt, muppet or amp)",
                           o, adapt_config_enum_str(cfg, "policy", "name"));
    }
    if (adapt_config_mx_axis(cfg) != ADAPT_MX_AXIS_ROWS) {
        char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
        adapt_config_origin_str(cfg, "arithmetic",
                                def.kind != QUANT_ACC_FLOAT32 ? "accumulator" : "units", o,
                                sizeof o);
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: [arithmetic] with MX blocks along each GEMM (roles.mx_axis = gemm "
                           "or channels, or roles.recipe = mxfp8_gemm): the two are not combined; "
                           "expected roles.mx_axis = rows or arithmetic.accumulator = float32",
                           o);
    }
    return ADAPT_OK;
}

enum adapt_status adapt_config_check(const struct adapt_config *cfg)
{
    enum adapt_status st;
    if ((st = check_ge(cfg, "quantization", "r_upr", "r_lwr")) != ADAPT_OK) return st;
    if ((st = check_ge(cfg, "quantization", "lb_upr", "lb_lwr")) != ADAPT_OK) return st;
    if ((st = check_ge(cfg, "quantization", "start_fl", "fl_min")) != ADAPT_OK) return st;
    if ((st = check_propagation(cfg)) != ADAPT_OK) return st;
    if ((st = check_formats(cfg)) != ADAPT_OK) return st;
    if ((st = check_roles(cfg)) != ADAPT_OK) return st;
    if ((st = check_arith(cfg)) != ADAPT_OK) return st;
    return check_int_bits(cfg);
}

enum adapt_status adapt_config_print(const struct adapt_config *cfg, FILE *f, unsigned flags)
{
    if (flags & ADAPT_CONFIG_PRINT_HELP) {
        fprintf(f, "# adapt-sim configuration\n");
        if (cfg->file[0]) fprintf(f, "# file: %s\n", cfg->file);
        for (int i = 0; i < cfg->n_overrides; i++) fprintf(f, "# --set %s\n", cfg->overrides[i]);
        for (int i = 0; i < cfg->formats.n; i++) { /* what traces and checkpoints will say */
            struct quant_spec s;
            char txt[QUANT_SPEC_STR_MAX];
            if (adapt_config_format_spec(cfg, &cfg->formats.f[i], &s) == ADAPT_OK)
                fprintf(f, "# format %s = %s\n", cfg->formats.f[i].head.name,
                        quant_spec_str(&s, txt, sizeof txt));
        }
    }
    return adapt_schema_print(&schema, cfg, f,
                              flags & ADAPT_CONFIG_PRINT_HELP ? ADAPT_SCHEMA_PRINT_HELP : 0);
}

enum adapt_status adapt_config_print_man(FILE *f, const char *version)
{
    fputs(".TH ADAPT\\-SIM.INI 5 \"\" \"adapt\\-sim ", f);
    adapt_schema_roff_text(f, version);
    fputs("\" \"File Formats\"\n"
          ".SH NAME\n"
          "adapt\\-sim.ini \\- the run configuration of adapt\\-train\n"
          ".SH SYNOPSIS\n"
          ".B adapt\\-train \\-\\-config\n"
          ".I FILE\n"
          "[\\fB\\-\\-set\\fR \\fISECTION\\fR.\\fIKEY\\fR=\\fIVALUE\\fR ...]\n"
          ".SH DESCRIPTION\n"
          "A configuration is an INI file:\n"
          ".B [section]\n"
          "headers, then\n"
          ".I key\n"
          "=\n"
          ".I value\n"
          "lines (or \\fIkey\\fR: \\fIvalue\\fR). A line that starts with ';' or '#' is a\n"
          "comment, and so is the rest of a line after a ';' that follows a blank; a '#'\n"
          "after a value is part of the value. Keys are lower case; each may be set once\n"
          "per file. A key line holds at most \n",
          f);
    fprintf(f, "%d characters.\n", ADAPT_SCHEMA_LINE_MAX);
    fputs(".PP\n"
          "Every key has a default, so a file names only what it changes. Each\n"
          "\\fB\\-\\-set\\fR \\fIsection\\fR.\\fIkey\\fR=\\fIvalue\\fR of\n"
          ".BR adapt\\-train (1)\n"
          "overrides one key of the file;\n"
          ".B adapt\\-train \\-\\-dry\\-run\n"
          "prints the resolved configuration with the help of every key, and a run\n"
          "directory keeps it as \\fIconfig.ini\\fR.\n"
          ".PP\n"
          "Values: integers and reals within the range given (\"[\" and \"]\" include the\n"
          "end, \"(\" and \")\" exclude it); booleans true or false (also yes/no, on/off,\n"
          "1/0); strings bare or in double quotes; names from the list given; lists\n"
          "such as 8,12,14,16; pair lists such as 16:8,12:6.\n"
          ".SH KEYS\n",
          f);
    enum adapt_status st = adapt_schema_print_man(&schema, f);
    if (st != ADAPT_OK) return st;
    fputs(".SH EXAMPLE\n"
          ".nf\n"
          "; LeNet\\-5 on Fashion\\-MNIST under AdaPT\n"
          "[data]\n"
          "dataset = fashion\\-mnist\n"
          "[model]\n"
          "name = lenet5\n"
          "[train]\n"
          "epochs = 15   ; a comment after a value starts with ';'\n"
          "batch = 256\n"
          "[policy]\n"
          "name = adapt\n"
          ".fi\n"
          ".SH ENVIRONMENT\n"
          ".TP\n"
          ".B ADAPT_DATA_PATH\n"
          "Colon\\-separated folders searched first for a configuration named without a\n"
          "folder (\\fB\\-\\-config NAME\\fR: \\fIexperiments/configs/NAME.ini\\fR) and for\n"
          "the model description of \\fBmodel.file\\fR (\\fImodels/NAME.model\\fR). After it\n"
          "come the source tree and the installed data folder.\n"
          ".SH FILES\n"
          ".TP\n"
          ".I experiments/configs/*.ini\n"
          "The shipped configurations, found by name (\\fB\\-\\-config quickstart\\fR) in\n"
          "$ADAPT_DATA_PATH, the source tree and the installed data folder.\n"
          ".TP\n"
          ".I models/*.model\n"
          "The built\\-in networks' descriptions (\\fBmodel.name\\fR), and the form of\n"
          "\\fBmodel.file\\fR (doc/model\\-format.md).\n"
          ".TP\n"
          ".IR RUN /config.ini\n"
          "The resolved configuration a run writes into its folder; \\fB\\-\\-resume\\fR and\n"
          "\\fB\\-\\-eval\\-only \\-\\-init\\-from\\fR RUN read it back.\n"
          ".SH SEE ALSO\n"
          ".BR adapt\\-train (1),\n"
          ".BR adapt\\-perf (1),\n"
          ".BR adapt\\-heatmap (1),\n"
          ".BR adapt\\-report (1);\n"
          "doc/running.md and doc/numerics.md in the source tree.\n",
          f);
    if (fflush(f) != 0 || ferror(f))
        return ADAPT_ERROR(ADAPT_EIO, "cannot write the man page: %s", strerror(errno));
    return ADAPT_OK;
}

int adapt_config_sr_bits(const struct adapt_config *cfg)
{
    return cfg->quantization.sr_bits == ADAPT_CONFIG_SR_BITS_16 ? QUANT_SR_BITS_16
                                                                 : QUANT_SR_BITS_32;
}

json_t *adapt_config_to_json(const struct adapt_config *cfg)
{
    return adapt_schema_to_json(&schema, cfg);
}

int adapt_config_equal(const struct adapt_config *a, const struct adapt_config *b, char *diff,
                       size_t diff_size)
{
    return adapt_schema_equal(&schema, a, b, diff, diff_size);
}

const char *adapt_config_model(const struct adapt_config *cfg)
{
    return cfg->model.file[0] ? cfg->model.file : cfg->model.name;
}

int adapt_config_reference(const struct adapt_config *cfg, enum adapt_reference_switch s)
{
    if ((unsigned)s >= ADAPT_REF_N) return 0; /* no such switch */
    enum adapt_config_switch v = cfg->reference.sw[s];
    if (v != ADAPT_SWITCH_AUTO) return v == ADAPT_SWITCH_ON;
    if (cfg->quantization.compat != ADAPT_COMPAT_REFERENCE) return 0;
    /* the published code's LeNet-5 alone ends in a softmax */
    if (s == ADAPT_REF_SOFTMAX_BEFORE_CE)
        return !cfg->model.file[0] && !strcmp(cfg->model.name, "lenet5");
    /* the published indexing is known for these built-in models */
    if (s == ADAPT_REF_ACT_FORMATS)
        return !cfg->model.file[0] &&
               (!strcmp(cfg->model.name, "lenet5") || !strcmp(cfg->model.name, "alexnet_mnist") ||
                !strcmp(cfg->model.name, "alexnet_cifar") ||
                !strncmp(cfg->model.name, "resnet", 6));
    if (s == ADAPT_REF_POOL_ROUNDING)
        return !cfg->model.file[0] &&
               (!strcmp(cfg->model.name, "lenet5") || !strncmp(cfg->model.name, "resnet", 6));
    if (s == ADAPT_REF_BN_ROUNDING)
        return !cfg->model.file[0] && !strncmp(cfg->model.name, "resnet", 6);
    if (s == ADAPT_REF_LOSS_PENALTY)
        return !cfg->model.file[0] && (!strcmp(cfg->model.name, "alexnet_mnist") ||
                                       !strcmp(cfg->model.name, "alexnet_cifar") ||
                                       !strncmp(cfg->model.name, "resnet", 6));
    return 1;
}

const char *adapt_config_reference_key(enum adapt_reference_switch s)
{
    if ((unsigned)s >= ADAPT_REF_N) return NULL;
    const size_t off = offsetof(struct adapt_config, reference.sw[0]) +
                       (size_t)s * sizeof(enum adapt_config_switch);
    for (int i = 0; i < NKEYS; i++)
        if (keys[i].offset == off && !strcmp(keys[i].section, "reference")) return keys[i].key;
    return NULL;
}

int adapt_config_lb_window(const struct adapt_config *cfg)
{
    if (cfg->quantization.lb_update != ADAPT_CONFIG_LB_UPDATE_AUTO)
        return cfg->quantization.lb_update == ADAPT_CONFIG_LB_UPDATE_WINDOW;
    return cfg->quantization.compat == ADAPT_COMPAT_CORRECTED;
}

enum adapt_compat adapt_config_reference_mode(const struct adapt_config *cfg,
                                              enum adapt_reference_switch s)
{
    return adapt_config_reference(cfg, s) ? ADAPT_COMPAT_REFERENCE : ADAPT_COMPAT_CORRECTED;
}

const char *adapt_config_enum_str(const struct adapt_config *cfg, const char *section,
                                  const char *key)
{
    return adapt_schema_enum_str(&schema, cfg, section, key);
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
