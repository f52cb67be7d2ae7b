/* tests/test_config.c: src/config (defaults, INI files, --set, checks, printing, JSON) and its
 * schema engine on a table of its own. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/config/config.h"
#include "src/config/schema.h"
#include "tests/testutil.h"

/* A fresh temporary directory per test (Check forks each test). */
static char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "config"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

/* Writes text to <tmpdir>/<name>; returns the path (in path). */
static const char *write_file(char *path, size_t size, const char *name, const char *text)
{
    tu_write_text(tu_path(path, size, tmpdir, name), text);
    return path;
}

/* Loads text as a file; returns the status. */
static enum adapt_status load_text(struct adapt_config *cfg, const char *text)
{
    char path[256];
    write_file(path, sizeof path, "t.ini", text);
    return adapt_config_load(cfg, path);
}

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* Every default as listed in the configuration reference (the key table of the design). */
START_TEST(test_defaults)
{
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(c.run.seed, 1);
    ck_assert_str_eq(c.run.out, "");
    ck_assert_str_eq(c.run.name, "");
    ck_assert_int_eq(c.run.threads, 0);
    ck_assert_int_eq(c.run.log_every, 1);
    ck_assert_int_eq(c.run.checkpoint_every, 1);
    ck_assert_int_eq(c.data.dataset, ADAPT_CONFIG_DATASET_FASHION_MNIST);
    ck_assert_str_eq(c.data.path, "");
    ck_assert_int_eq(c.data.val_size, 5000);
    ck_assert_int_eq(c.data.augment, ADAPT_CONFIG_AUGMENT_AUTO);
    ck_assert(c.data.normalize);
    ck_assert_int_eq(c.data.train_limit, 0);
    ck_assert_int_eq(c.data.test_limit, 0);
    ck_assert_str_eq(c.model.name, "lenet5");
    ck_assert_int_eq(c.model.classes, 0);
    ck_assert(c.model.init_gain == 0.5);
    ck_assert_int_eq(c.train.epochs, 15);
    ck_assert_int_eq(c.train.batch, 256);
    ck_assert_int_eq(c.train.accumulation_steps, 1);
    ck_assert_int_eq(c.train.eval_batch, 1000);
    ck_assert(c.optim.lr == 0.01);
    ck_assert(c.optim.momentum == 0.9);
    ck_assert(c.optim.l2_decay == 0.0 && c.optim.l1_decay == 0.0);
    ck_assert(!c.optim.nesterov);
    ck_assert_int_eq(c.schedule.name, ADAPT_CONFIG_SCHEDULE_CONSTANT);
    ck_assert_int_eq(c.schedule.milestones.n, 0);
    ck_assert(c.schedule.gamma == 0.1 && c.schedule.factor == 0.1);
    ck_assert_int_eq(c.schedule.patience, 10);
    ck_assert(c.schedule.threshold == 1e-4 && c.schedule.min_lr == 0.0);
    ck_assert_int_eq(c.schedule.cooldown, 0);
    ck_assert_int_eq(c.policy.name, ADAPT_CONFIG_POLICY_FP32);
    ck_assert_str_eq(c.policy.format, "fixed");
    ck_assert_int_eq(c.policy.wl, 16);
    ck_assert_int_eq(c.policy.fl, 8);
    ck_assert_int_eq(c.policy.per_unit.n, 0);
    ck_assert_int_eq(c.policy.muppet_levels.n, 4);
    ck_assert_int_eq(c.policy.muppet_levels.v[0], 8);
    ck_assert_int_eq(c.policy.muppet_levels.v[1], 12);
    ck_assert_int_eq(c.policy.muppet_levels.v[2], 14);
    ck_assert_int_eq(c.policy.muppet_levels.v[3], 16);
    ck_assert_int_eq(c.policy.muppet_r, 3);
    ck_assert_int_eq(c.policy.muppet_patience, 2);
    ck_assert(c.policy.muppet_min_lr == 1e-5);
    ck_assert_int_eq(c.policy.muppet_decay_every, 15);
    ck_assert_int_eq(c.policy.muppet_schedule.n, 0);
    ck_assert_int_eq(c.policy.amp_type, ADAPT_CONFIG_AMP_FP16);
    ck_assert(c.policy.amp_init_scale == 65536.0);
    ck_assert_int_eq(c.policy.amp_growth_interval, 2000);
    ck_assert_int_eq(c.quantization.start_wl, 8);
    ck_assert_int_eq(c.quantization.start_fl, 4);
    ck_assert_int_eq(c.quantization.fl_min, 4);
    ck_assert_int_eq(c.quantization.r_lwr, 50);
    ck_assert_int_eq(c.quantization.r_upr, 150);
    ck_assert_int_eq(c.quantization.lb_lwr, 25);
    ck_assert_int_eq(c.quantization.lb_upr, 100);
    ck_assert(c.quantization.gamma == 0.33);
    ck_assert_int_eq(c.quantization.buffer_bits, 4);
    ck_assert_int_eq(c.quantization.strategy, ADAPT_TRACE_STRATEGY_MIN);
    ck_assert(c.quantization.quant_inputs && c.quantization.quant_outputs &&
              c.quantization.quant_grads);
    ck_assert(c.quantization.kl_eps == 0.0);
    ck_assert_int_eq(c.quantization.pd_sample, 4096);
    ck_assert(c.quantization.kl_noise == 1.0);
    ck_assert_int_eq(c.quantization.compat, ADAPT_COMPAT_CORRECTED);
    ck_assert_int_eq(c.quantization.rounding, QUANT_ROUND_STOCHASTIC);
    ck_assert_int_eq(c.quantization.precision_propagation, ADAPT_CONFIG_PROPAGATION_UNIT);
    ck_assert_int_eq(c.quantization.graph_preset, ADAPT_CONFIG_GRAPH_DEFAULT);
    ck_assert_str_eq(c.quantization.graph_allow, "");
    ck_assert_str_eq(c.quantization.graph_low, "");
    ck_assert_str_eq(c.file, "");
    ck_assert_int_eq(c.n_overrides, 0);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);

    /* resolvers */
    char buf[256];
    ck_assert_int_eq(adapt_config_data_path(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "/usr/share/datasets/fashion-mnist");
    ck_assert_int_eq(adapt_config_out_dir(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "runs/default");
    ck_assert(!adapt_config_augment_enabled(&c));
    ck_assert_str_eq(adapt_config_enum_str(&c, "data", "dataset"), "fashion-mnist");
    ck_assert_str_eq(adapt_config_enum_str(&c, "quantization", "compat"), "corrected");
    ck_assert_ptr_null(adapt_config_enum_str(&c, "train", "epochs"));
    ck_assert_ptr_null(adapt_config_enum_str(&c, "nope", "epochs"));
    c.data.dataset = ADAPT_CONFIG_DATASET_CIFAR100;
    ck_assert(adapt_config_augment_enabled(&c));
    ck_assert_int_eq(adapt_config_data_path(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "data/cifar100");
    ck_assert_int_eq(adapt_config_data_path(&c, buf, 5), ADAPT_ERANGE);
    c.data.augment = ADAPT_CONFIG_AUGMENT_OFF;
    ck_assert(!adapt_config_augment_enabled(&c));
}
END_TEST

static const char *full_ini =
    "; adapt-sim test configuration\n"
    "# with both comment styles\n"
    "\n"
    "[run]\n"
    "seed = 2385\n"
    "out = \"runs/exp 1\"\n"
    "threads = 3\n"
    "log_every = 7\n"
    "checkpoint_every = 0\n"
    "[data]\n"
    "dataset = cifar10\n"
    "  path = /srv/data/cifar-10-batches-bin   ; indented, inline comment\n"
    "val_size = 4321\n"
    "augment = off\n"
    "normalize = no\n"
    "train_limit = 12345\n"
    "test_limit = 987\n"
    "[model]\n"
    "name = resnet20\n"
    "classes = 10\n"
    "init_gain = 0.2385\n"
    "[train]\n"
    "epochs = 23\n"
    "batch = 128\n"
    "accumulation_steps = 4\n"
    "eval_batch = 500\n"
    "[optim]\n"
    "lr = 0.02385\n"
    "momentum = 0.875\n"
    "l2_decay = 5e-4\n"
    "l1_decay = 1.25e-5\n"
    "nesterov = true\n"
    "[schedule]\n"
    "name = multistep\n"
    "milestones = 5, 11,17\n"
    "gamma = 0.2\n"
    "factor = 0.3\n"
    "patience = 6\n"
    "threshold = 0.002\n"
    "min_lr = 1e-6\n"
    "cooldown = 2\n"
    "[policy]\n"
    "name = muppet\n"
    "format = float(5,10)\n"
    "wl = 12\n"
    "fl = 13\n"
    "per_unit = 16:8, 12:6,8:4\n"
    "muppet_levels = 6,10,20\n"
    "muppet_r = 4\n"
    "muppet_patience = 3\n"
    "muppet_min_lr = 2e-5\n"
    "muppet_decay_every = 9\n"
    "muppet_schedule = 8:16,12:10,14:14,16:14,32:45\n"
    "amp_type = bf16\n"
    "amp_init_scale = 1024\n"
    "amp_growth_interval = 1500\n"
    "[quantization]\n"
    "start_wl = 10\n"
    "start_fl = 6\n"
    "fl_min = 3\n"
    "r_lwr = 60\n"
    "r_upr = 160\n"
    "lb_lwr = 20\n"
    "lb_upr = 90\n"
    "gamma = 0.5\n"
    "buffer_bits = 2\n"
    "strategy = mean\n"
    "quant_inputs = false\n"
    "quant_outputs = off\n"
    "quant_grads = 0\n"
    "kl_eps = 0.001\n"
    "pd_sample = 4096\n"
    "kl_noise = 0\n"
    "compat = reference\n"
    "rounding = nearest\r\n";

START_TEST(test_full_file)
{
    struct adapt_config c;
    char path[256];
    adapt_config_init(&c);
    write_file(path, sizeof path, "exp-a.ini", full_ini);
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_OK);
    ck_assert_str_eq(c.file, path);
    ck_assert_int_eq(c.run.seed, 2385);
    ck_assert_str_eq(c.run.out, "runs/exp 1");
    ck_assert_int_eq(c.run.threads, 3);
    ck_assert_int_eq(c.run.log_every, 7);
    ck_assert_int_eq(c.run.checkpoint_every, 0);
    ck_assert_int_eq(c.data.dataset, ADAPT_CONFIG_DATASET_CIFAR10);
    ck_assert_str_eq(c.data.path, "/srv/data/cifar-10-batches-bin");
    ck_assert_int_eq(c.data.val_size, 4321);
    ck_assert_int_eq(c.data.augment, ADAPT_CONFIG_AUGMENT_OFF);
    ck_assert(!c.data.normalize);
    ck_assert_int_eq(c.data.train_limit, 12345);
    ck_assert_int_eq(c.data.test_limit, 987);
    ck_assert_str_eq(c.model.name, "resnet20");
    ck_assert_int_eq(c.model.classes, 10);
    ck_assert(c.model.init_gain == 0.2385);
    ck_assert_int_eq(c.train.epochs, 23);
    ck_assert_int_eq(c.train.batch, 128);
    ck_assert_int_eq(c.train.accumulation_steps, 4);
    ck_assert_int_eq(c.train.eval_batch, 500);
    ck_assert(c.optim.lr == 0.02385 && c.optim.momentum == 0.875);
    ck_assert(c.optim.l2_decay == 5e-4 && c.optim.l1_decay == 1.25e-5 && c.optim.nesterov);
    ck_assert_int_eq(c.schedule.name, ADAPT_CONFIG_SCHEDULE_MULTISTEP);
    ck_assert_int_eq(c.schedule.milestones.n, 3);
    ck_assert_int_eq(c.schedule.milestones.v[0], 5);
    ck_assert_int_eq(c.schedule.milestones.v[1], 11);
    ck_assert_int_eq(c.schedule.milestones.v[2], 17);
    ck_assert(c.schedule.gamma == 0.2 && c.schedule.factor == 0.3);
    ck_assert_int_eq(c.schedule.patience, 6);
    ck_assert(c.schedule.threshold == 0.002 && c.schedule.min_lr == 1e-6);
    ck_assert_int_eq(c.schedule.cooldown, 2);
    ck_assert_int_eq(c.policy.name, ADAPT_CONFIG_POLICY_MUPPET);
    ck_assert_str_eq(c.policy.format, "float(5,10)");
    ck_assert_int_eq(c.policy.wl, 12);
    ck_assert_int_eq(c.policy.fl, 13); /* FL may exceed WL - 1 (doc/numerics.md) */
    ck_assert_int_eq(c.policy.per_unit.n, 3);
    ck_assert_int_eq(c.policy.per_unit.a[1], 12);
    ck_assert_int_eq(c.policy.per_unit.b[1], 6);
    ck_assert_int_eq(c.policy.per_unit.a[2], 8);
    ck_assert_int_eq(c.policy.per_unit.b[2], 4);
    ck_assert_int_eq(c.policy.muppet_levels.n, 3);
    ck_assert_int_eq(c.policy.muppet_levels.v[2], 20);
    ck_assert_int_eq(c.policy.muppet_r, 4);
    ck_assert_int_eq(c.policy.muppet_patience, 3);
    ck_assert(c.policy.muppet_min_lr == 2e-5);
    ck_assert_int_eq(c.policy.muppet_decay_every, 9);
    /* MuPPET's CIFAR-10 AlexNet schedule (README, performance model) */
    ck_assert_int_eq(c.policy.muppet_schedule.n, 5);
    ck_assert_int_eq(c.policy.muppet_schedule.a[4], 32);
    ck_assert_int_eq(c.policy.muppet_schedule.b[4], 45);
    ck_assert_int_eq(c.policy.muppet_schedule.a[0], 8);
    ck_assert_int_eq(c.policy.muppet_schedule.b[0], 16);
    ck_assert_int_eq(c.policy.amp_type, ADAPT_CONFIG_AMP_BF16);
    ck_assert(c.policy.amp_init_scale == 1024.0);
    ck_assert_int_eq(c.policy.amp_growth_interval, 1500);
    ck_assert_int_eq(c.quantization.start_wl, 10);
    ck_assert_int_eq(c.quantization.start_fl, 6);
    ck_assert_int_eq(c.quantization.fl_min, 3);
    ck_assert_int_eq(c.quantization.r_lwr, 60);
    ck_assert_int_eq(c.quantization.r_upr, 160);
    ck_assert_int_eq(c.quantization.lb_lwr, 20);
    ck_assert_int_eq(c.quantization.lb_upr, 90);
    ck_assert(c.quantization.gamma == 0.5);
    ck_assert_int_eq(c.quantization.buffer_bits, 2);
    ck_assert_int_eq(c.quantization.strategy, ADAPT_TRACE_STRATEGY_MEAN);
    ck_assert(!c.quantization.quant_inputs && !c.quantization.quant_outputs &&
              !c.quantization.quant_grads);
    ck_assert(c.quantization.kl_eps == 0.001);
    ck_assert_int_eq(c.quantization.pd_sample, 4096);
    ck_assert(c.quantization.kl_noise == 0.0);
    ck_assert_int_eq(c.quantization.compat, ADAPT_COMPAT_REFERENCE);
    ck_assert_int_eq(c.quantization.rounding, QUANT_ROUND_NEAREST);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);

    char buf[256];
    ck_assert_int_eq(adapt_config_data_path(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "/srv/data/cifar-10-batches-bin");
    ck_assert_int_eq(adapt_config_out_dir(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "runs/exp 1");
    c.run.out[0] = '\0';
    ck_assert_int_eq(adapt_config_out_dir(&c, buf, sizeof buf), ADAPT_OK);
    ck_assert_str_eq(buf, "runs/exp-a"); /* stem of exp-a.ini */
    ck_assert_str_eq(adapt_config_enum_str(&c, "policy", "amp_type"), "bf16");
    /* origin of run.seed (row 0): line 5 of the file */
    ck_assert_int_eq(c.origin[0].kind, ADAPT_CONFIG_FROM_FILE);
    ck_assert_int_eq(c.origin[0].line, 5);

    /* a second file is refused and changes nothing */
    struct adapt_config before = c;
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_EINVAL);
    ck_assert_msg_has("already loaded");
    ck_assert(adapt_config_equal(&c, &before, NULL, 0));
}
END_TEST

/* One malformed file: status, and the message must name the file, the line and the key. */
struct bad_case {
    const char *text;
    enum adapt_status st;
    const char *line;     /* ":N:" */
    const char *needle1;  /* usually section.key */
    const char *needle2;  /* what was expected or what is wrong */
};

static const struct bad_case bad_cases[] = {
    {"[run]\nseed = 3\n[foo]\nx = 1\n", ADAPT_EINVAL, ":3:", "unknown section [foo]",
     "quantization"},
    {"[run]\nseed = 3\n[bar]\n", ADAPT_EINVAL, ":3:", "unknown section [bar]", "sections:"},
    {"[run]\n\nsed = 3\n", ADAPT_EINVAL, ":3:", "run.sed", "keys of [run]: seed, out"},
    {"[run]\nSeed = 3\n", ADAPT_EINVAL, ":2:", "unknown key run.Seed", "keys of [run]"},
    {"[RUN]\nseed = 3\n", ADAPT_EINVAL, ":1:", "unknown section [RUN]", "sections: run"},
    {"[run]\nseed = 3\n# again\nseed = 4\n", ADAPT_EINVAL, ":4:", "duplicate key run.seed",
     "first set on line 2"},
    {"[train]\nepochs = abc\n", ADAPT_EINVAL, ":2:", "train.epochs",
     "not an integer; expected an integer in [1, 100000]"},
    {"[train]\nepochs = 2.5\n", ADAPT_EINVAL, ":2:", "train.epochs", "not an integer"},
    {"[run]\nthreads = 1025\n", ADAPT_EINVAL, ":2:", "run.threads",
     "out of range; expected an integer in [0, 1024]"},
    {"[run]\nseed = -1\n", ADAPT_EINVAL, ":2:", "run.seed", "out of range"},
    {"[run]\nseed = 9223372036854775808\n", ADAPT_EINVAL, ":2:", "run.seed", "out of range"},
    {"[optim]\nmomentum = 1\n", ADAPT_EINVAL, ":2:", "optim.momentum", "a number in [0, 1)"},
    {"[optim]\nlr = 0\n", ADAPT_EINVAL, ":2:", "optim.lr", "a number in (0, 100]"},
    {"[optim]\nlr = fast\n", ADAPT_EINVAL, ":2:", "optim.lr", "not a number"},
    {"[optim]\nlr = nan\n", ADAPT_EINVAL, ":2:", "optim.lr", "out of range"},
    {"[optim]\nnesterov = maybe\n", ADAPT_EINVAL, ":2:", "optim.nesterov", "true or false"},
    {"[data]\ndataset = imagenet\n", ADAPT_EINVAL, ":2:", "data.dataset",
     "one of mnist, fashion-mnist, emnist-balanced, cifar10, cifar100"},
    {"[model]\nname = a123456789b123456789c123456789d123456789e123456789f123456789g1234\n",
     ADAPT_EINVAL, ":2:", "model.name", "at most 63 characters"},
    {"[schedule]\nmilestones = 5,5,9\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "not increasing"},
    {"[schedule]\nmilestones = 5,,9\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "entry 2 is empty"},
    {"[schedule]\nmilestones = 5,9,\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "entry 3 is empty"},
    {"[policy]\nmuppet_levels = 1,8\n", ADAPT_EINVAL, ":2:", "policy.muppet_levels",
     "out of range"},
    {"[policy]\nper_unit = 16:8,33:4\n", ADAPT_EINVAL, ":2:", "policy.per_unit", "pair 2 (33:4)"},
    {"[policy]\nper_unit = 16-8\n", ADAPT_EINVAL, ":2:", "policy.per_unit", "is not WL:FL"},
    {"[policy]\nmuppet_schedule = 8:0\n", ADAPT_EINVAL, ":2:", "policy.muppet_schedule",
     "EPOCHS in [1, 100000]"},
    {"[policy]\nformat = \"fixed\n", ADAPT_EINVAL, ":2:", "policy.format", "unterminated quote"},
    {"[policy]\nformat = fi\"xed\n", ADAPT_EINVAL, ":2:", "policy.format", "contains a '\"'"},
    /* a trace and config.ini are UTF-8: Latin-1 "café" is refused at its line */
    {"[data]\npath = /d/caf\xe9\n", ADAPT_EINVAL, ":2:", "data.path", "byte 7 is not UTF-8"},
    {"seed = 1\n[run]\n", ADAPT_EINVAL, ":1:", "\"seed\"", "before any [section]"},
    {"[run]\nseed 5\n", ADAPT_EFORMAT, ":2:", "malformed line \"seed 5\"", "key = value"},
    {"[run\nseed = 5\n", ADAPT_EFORMAT, ":1:", "malformed line \"[run\"", "[section]"},
    {"[run]\nseed = 1\nthreads = 0\nthreads 3\nseed = 2\n", ADAPT_EFORMAT, ":4:", "malformed line",
     "threads 3"},
    {"[run]\nseed = 1\n\nlog_every = 0\n", ADAPT_EINVAL, ":4:", "run.log_every", "[1, 1000000]"},
    /* [format NAME] sections: what the file itself gets wrong */
    {"[format f8]\nkind = float\nexp_bits = 4\nmantissa = 3\n", ADAPT_EINVAL, ":4:",
     "unknown key format.f8.mantissa", "keys of [format NAME]: kind, exp_bits, man_bits"},
    {"[format f8]\nkind = float\nnan = ocp\n", ADAPT_EINVAL, ":3:", "format.f8.nan = \"ocp\"",
     "expected one of ieee, fn, none"},
    {"[format f8]\nkind = posit\n", ADAPT_EINVAL, ":2:", "format.f8.kind", "one of float, fixed"},
    {"[format f8]\nexp_bits = 9\n", ADAPT_EINVAL, ":2:", "format.f8.exp_bits",
     "an integer in [2, 8]"},
    {"[format f8]\nkind = float\n[policy]\nname = fixed\n[format f8]\nkind = fixed\n",
     ADAPT_EINVAL, ":5:", "duplicate section [format f8]", "first on line 1"},
    {"[format f8]\nkind = float\nkind = fixed\n", ADAPT_EINVAL, ":3:",
     "duplicate key format.f8.kind", "first set on line 2"},
    {"[run]\n[format]\nkind = float\n", ADAPT_EINVAL, ":2:", "section [format] needs one name",
     "[format NAME]"},
    {"[format 8bit]\n", ADAPT_EINVAL, ":1:", "[format 8bit]", "a letter or '_'"},
    {"[format a b]\n", ADAPT_EINVAL, ":1:", "[format a b]", "needs one name"},
    {"[formats f8]\n", ADAPT_EINVAL, ":1:", "unknown section [formats f8]", "format NAME"},
    /* '#' after a value is part of the value (inih's inline comments start with ';') */
    {"[train]\nepochs = 2 # two\n", ADAPT_EINVAL, ":2:", "train.epochs = \"2 # two\": not an "
     "integer", "inline comments start with ';'"},
    {"[optim]\nlr = 0.1\t# lower later\n", ADAPT_EINVAL, ":2:", "not a number",
     "inline comments start with ';'"},
    {"[format f8]\nexp_bits = 4 # four\n", ADAPT_EINVAL, ":2:", "format.f8.exp_bits",
     "inline comments start with ';'"},
};

START_TEST(test_file_errors)
{
    const struct bad_case *b = &bad_cases[_i];
    struct adapt_config c, def;
    adapt_config_init(&c);
    adapt_config_init(&def);
    adapt_error_clear();
    enum adapt_status st = load_text(&c, b->text);
    ck_assert_msg(st == b->st, "case %d: status %d, expected %d (%s)", _i, st, b->st,
                  adapt_error_message());
    ck_assert_msg_has(tmpdir); /* the file name */
    ck_assert_msg_has("t.ini");
    ck_assert_msg_has(b->line);
    ck_assert_msg_has(b->needle1);
    ck_assert_msg_has(b->needle2);
    /* nothing applied, not even the valid lines before the error */
    ck_assert(adapt_config_equal(&c, &def, NULL, 0));
    ck_assert_str_eq(c.file, "");
}
END_TEST

START_TEST(test_file_access_errors)
{
    struct adapt_config c;
    char path[256];
    adapt_config_init(&c);

    tu_path(path, sizeof path, tmpdir, "missing.ini");
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_ENOENT);
    ck_assert_msg_has("missing.ini");
    ck_assert_msg_has("No such file");

    /* a directory opens but cannot be read as a file */
    ck_assert_int_eq(adapt_config_load(&c, tmpdir), ADAPT_EIO);
    ck_assert_msg_has(tmpdir);
    ck_assert_msg_has("directory");

    /* a NUL byte on line 2 */
    tu_write_file(tu_path(path, sizeof path, tmpdir, "bin.ini"), "[run]\nse\0ed = 1\n", 16);
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_EFORMAT);
    ck_assert_msg_has("bin.ini:2:");
    ck_assert_msg_has("NUL");

    /* a line longer than inih's buffer (200 bytes in Debian's build) */
    char text[512];
    snprintf(text, sizeof text, "[run]\nseed = 1\nout = %0300d\n", 7);
    ck_assert_int_eq(load_text(&c, text), ADAPT_EFORMAT);
    ck_assert_msg_has("t.ini:3:");
    ck_assert_msg_has("longer than");

    /* a long comment is fine: comments never reach the value parser */
    snprintf(text, sizeof text, "[run]\n# %0300d\nseed = 2385\n", 7);
    ck_assert_int_eq(load_text(&c, text), ADAPT_OK);
    ck_assert_int_eq(c.run.seed, 2385);
    adapt_config_init(&c);

    /* an empty file and a comment-only file are valid and change nothing */
    ck_assert_int_eq(load_text(&c, ""), ADAPT_OK);
    struct adapt_config d;
    adapt_config_init(&d);
    ck_assert_int_eq(load_text(&d, "; nothing\n# here\n\n"), ADAPT_OK);
    ck_assert(adapt_config_equal(&c, &d, NULL, 0));
}
END_TEST

START_TEST(test_set)
{
    struct adapt_config c, before;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "train.epochs=3"), ADAPT_OK);
    ck_assert_int_eq(c.train.epochs, 3);
    ck_assert_int_eq(adapt_config_set(&c, " optim.lr = 0.0625 "), ADAPT_OK);
    ck_assert(c.optim.lr == 0.0625);
    ck_assert_int_eq(adapt_config_set(&c, "run.out=runs/a b;c"), ADAPT_OK);
    ck_assert_str_eq(c.run.out, "runs/a b;c");
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit=8:4,10:6"), ADAPT_OK);
    ck_assert_int_eq(c.policy.per_unit.n, 2);
    ck_assert_int_eq(c.policy.per_unit.b[1], 6);
    ck_assert_int_eq(adapt_config_set(&c, "schedule.milestones="), ADAPT_OK);
    ck_assert_int_eq(c.schedule.milestones.n, 0);
    /* a later --set of the same key wins */
    ck_assert_int_eq(adapt_config_set(&c, "train.epochs=4"), ADAPT_OK);
    ck_assert_int_eq(c.train.epochs, 4);
    ck_assert_int_eq(c.n_overrides, 6);
    ck_assert_str_eq(c.overrides[0], "train.epochs=3");
    ck_assert_str_eq(c.overrides[1], " optim.lr = 0.0625 ");
    ck_assert_str_eq(c.overrides[5], "train.epochs=4");

    before = c;
    static const char *const bad[][3] = {
        {"train.epochs", "expected section.key=value", "\"train.epochs\""},
        {"epochs=3", "expected section.key=value", "epochs=3"},
        {"trian.epochs=3", "unknown section [trian]", "sections: run, data"},
        {"train.epoch=3", "unknown key train.epoch", "keys of [train]: epochs, batch"},
        {"train.epochs=three", "train.epochs = \"three\": not an integer", "[1, 100000]"},
        {"quantization.strategy=median", "quantization.strategy", "one of min, mean, max"},
        {"quantization.graph_preset=bold", "quantization.graph_preset",
         "one of conservative, default, aggressive"},
        {"quantization.precision_propagation=layer", "quantization.precision_propagation",
         "one of unit, graph"},
        {"run.out=a ;b", "run.out", "' ;'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        adapt_error_clear();
        ck_assert_int_eq(adapt_config_set(&c, bad[i][0]), ADAPT_EINVAL);
        ck_assert_msg_has("--set");
        ck_assert_msg_has(bad[i][1]);
        ck_assert_msg_has(bad[i][2]);
        ck_assert(adapt_config_equal(&c, &before, NULL, 0));
        ck_assert_int_eq(c.n_overrides, 6);
    }
}
END_TEST

START_TEST(test_cross_checks)
{
    struct adapt_config c;
    adapt_config_init(&c);
    /* r_upr below r_lwr, both from the file */
    ck_assert_int_eq(load_text(&c, "[quantization]\nr_lwr = 70\n\nr_upr = 60\n"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("t.ini:4:");
    ck_assert_msg_has("quantization.r_upr = 60 must be >= quantization.r_lwr = 70");
    ck_assert_msg_has("t.ini:2)");
    /* fixed by --set; the next check (lb) fails with the default lb_upr */
    ck_assert_int_eq(adapt_config_set(&c, "quantization.r_upr=71"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.lb_lwr=101"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("default: quantization.lb_upr = 100 must be >= quantization.lb_lwr = 101");
    ck_assert_msg_has("--set quantization.lb_lwr=101");
    ck_assert_int_eq(adapt_config_set(&c, "quantization.lb_upr=101"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    /* start_fl below fl_min leaves the push-down bisection range empty */
    ck_assert_int_eq(adapt_config_set(&c, "quantization.start_fl=3"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("quantization.start_fl = 3 must be >= quantization.fl_min = 4");
}
END_TEST

/* A fixed-point format with FL >= WL (no integer bit) is refused wherever it is configured,
 * naming the keys and values, unless policy.allow_no_int_bits; FL = WL - 1 passes. */
START_TEST(test_no_int_bits)
{
    static struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.name=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.wl=8"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.fl=10"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("--set policy.fl=10: policy.wl = 8, policy.fl = 10: fixed(8,10) has FL = "
                      "10 >= WL = 8, no integer bit");
    ck_assert_msg_has("policy.allow_no_int_bits = true");
    ck_assert_int_eq(adapt_config_set(&c, "policy.allow_no_int_bits=true"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.allow_no_int_bits=false"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.fl=7"), ADAPT_OK); /* a sign bit: warned */
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=fixed(32,32)"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("policy.format = fixed(32,32): fixed(32,32) has FL = 32 >= WL = 32");
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=fixed(32,28)"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit=8:4,6:6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("policy.per_unit entry 2 = 6:6: fixed(6,6) has FL = 6 >= WL = 6");
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit="), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.kind=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.wl=4"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.fl=5"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("format.q.wl = 4, format.q.fl = 5: fixed(4,5) has FL = 5 >= WL = 4");
    ck_assert_int_eq(adapt_config_set(&c, "format.q.fl=2"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.start_wl=6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.start_fl=6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("quantization.start_wl = 6, quantization.start_fl = 6: fixed(6,6) has FL");
}
END_TEST

/* [format NAME] sections: read from anywhere in the file (here after [policy], which names
 * one), resolved and registered by adapt_config_check, named by policy.format and by
 * quant_spec_parse, set by --set, printed and read back, in JSON, compared by name. */
static const char *formats_ini = "[policy]\n"
                                 "name = fixed\n"
                                 "format = myfp8\n"
                                 "\n"
                                 "[format myfp8]\n"
                                 "kind = float          ; float | fixed\n"
                                 "exp_bits = 4\n"
                                 "man_bits = 3\n"
                                 "bias = 7\n"
                                 "subnormals = true\n"
                                 "overflow = saturate\n"
                                 "nan = fn\n"
                                 "\n"
                                 "[format q8]\n"
                                 "kind = fixed\n"
                                 "wl = 8\n"
                                 "fl = 5\n"
                                 "[format _e2m1]\n"
                                 "kind = float\n"
                                 "exp_bits = 2\n"
                                 "man_bits = 1\n"
                                 "nan = none\n";

/* Prints c with flags to <tmpdir>/printed<flags>.ini and loads that into d, which must
 * equal c. */
static void print_and_reload(const struct adapt_config *c, struct adapt_config *d,
                             unsigned flags)
{
    char out[256], diff[64] = "?";
    snprintf(out, sizeof out, "%s/printed%u.ini", tmpdir, flags);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_config_print(c, f, flags), ADAPT_OK);
    fclose(f);
    adapt_config_init(d);
    ck_assert_msg(adapt_config_load(d, out) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_msg(adapt_config_equal(c, d, diff, sizeof diff), "differs at %s", diff);
}

START_TEST(test_format_sections)
{
    struct adapt_config c, d;
    char path[256], out[256], diff[64], buf[QUANT_SPEC_STR_MAX];
    struct quant_spec s;
    adapt_config_init(&c);
    write_file(path, sizeof path, "formats.ini", formats_ini);
    ck_assert_msg(adapt_config_load(&c, path) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(c.formats.n, 3);
    const struct adapt_config_format *f = &c.formats.f[0];
    ck_assert_str_eq(f->head.name, "myfp8");
    ck_assert_int_eq(f->head.line, 5);
    ck_assert_int_eq(f->kind, ADAPT_CONFIG_FORMAT_FLOAT);
    ck_assert(f->exp_bits == 4 && f->man_bits == 3 && f->bias == 7 && f->subnormals);
    ck_assert_int_eq(f->nan, QUANT_NAN_FN);
    ck_assert_int_eq(f->head.set[1], 7); /* exp_bits, line 7 */
    ck_assert_str_eq(c.formats.f[1].head.name, "q8");
    ck_assert_int_eq(c.formats.f[1].head.set[7], 16); /* wl, line 16 */
    ck_assert_int_eq(quant_spec_parse("myfp8", &s), ADAPT_EINVAL); /* not registered by load */
    ck_assert_msg(adapt_config_check(&c) == ADAPT_OK, "%s", adapt_error_message());
    /* the canonical texts (quant.h), parsed back to the same spec */
    static const char *const canon[][2] = {
        {"myfp8", "float(4,3,nan=fn)"}, {"q8", "fixed(8,5)"}, {"_e2m1", "float(2,1,nan=none)"}};
    for (int i = 0; i < 3; i++) {
        struct quant_spec t;
        ck_assert_int_eq(quant_spec_parse(canon[i][0], &s), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), canon[i][1]);
        ck_assert_int_eq(quant_spec_parse(buf, &t), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&t, out, sizeof out), canon[i][1]);
        ck_assert_int_eq(adapt_config_format_spec(&c, &c.formats.f[i], &t), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&t, out, sizeof out), canon[i][1]);
    }
    /* --set changes a key of a section and makes a new one */
    ck_assert_int_eq(adapt_config_set(&c, "format.myfp8.bias=8"), ADAPT_OK);
    ck_assert_int_eq(c.formats.f[0].bias, 8);
    ck_assert_int_eq(c.formats.f[0].head.set[3], -1);
    ck_assert_int_eq(adapt_config_set(&c, "format.q12.kind=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, " format . q12 . wl = 12"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q12.fl=6"), ADAPT_OK);
    ck_assert_int_eq(c.formats.n, 4);
    ck_assert_int_eq(c.formats.f[3].head.line, 0);
    ck_assert_int_eq(c.n_overrides, 4);
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=q12"), ADAPT_OK);
    ck_assert_msg(adapt_config_check(&c) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(quant_spec_parse("myfp8", &s), ADAPT_OK); /* redefined by the check */
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "float(4,3,bias=8,nan=fn)");
    ck_assert_int_eq(quant_spec_parse("q12", &s), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "fixed(12,6)");
    struct adapt_config before = c;
    static const char *const bad[][2] = {
        {"format.q12=1", "expected format.NAME.KEY=value"},
        {"format.q-1.kind=fixed", "a letter or '_'"},
        {"format.q12.size=3", "unknown key format.q12.size"},
        {"format.q12.wl=33", "format.q12.wl = \"33\": out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(adapt_config_set(&c, bad[i][0]), ADAPT_EINVAL);
        ck_assert_msg_has(bad[i][1]);
        ck_assert(adapt_config_equal(&c, &before, NULL, 0));
    }

    /* printed (the keys each section set), read back equal; with help, the resolved texts */
    for (unsigned flags = 0; flags <= ADAPT_CONFIG_PRINT_HELP; flags++) {
        print_and_reload(&c, &d, flags);
        ck_assert_msg(adapt_config_check(&d) == ADAPT_OK, "%s", adapt_error_message());
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    ck_assert_int_eq(adapt_config_print(&c, fp, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(fp);
    ck_assert_ptr_nonnull(strstr(text, "# format myfp8 = float(4,3,bias=8,nan=fn)\n"));
    ck_assert_ptr_nonnull(strstr(text, "# format q12 = fixed(12,6)\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n[format q8]\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkind = fixed\n# fixed: word length; required (an "
                                       "integer in [1, 32])\nwl = 8\n"));
    ck_assert_ptr_null(strstr(text, "\n[format q8]\n# float (sign, exponent, mantissa) or fixed "
                                    "(two's complement <WL,FL>); required (one of float, fixed)"
                                    "\nkind = fixed\n# float: exponent bits"));
    free(text);

    /* JSON: {"format": {NAME: {the keys set}}} */
    json_t *j = adapt_config_to_json(&c);
    ck_assert_int_eq(json_object_size(j), 10); /* the sections of test_json, and format */
    char *js = json_dumps(json_object_get(json_object_get(j, "format"), "q8"), JSON_COMPACT);
    ck_assert_str_eq(js, "{\"kind\":\"fixed\",\"wl\":8,\"fl\":5}");
    free(js);
    js = json_dumps(json_object_get(json_object_get(j, "format"), "myfp8"), JSON_COMPACT);
    ck_assert_str_eq(js, "{\"kind\":\"float\",\"exp_bits\":4,\"man_bits\":3,\"bias\":8,\"nan\":"
                         "\"fn\",\"subnormals\":true,\"overflow\":\"saturate\"}");
    free(js);
    json_decref(j);

    /* equality: by name whatever the order; a key set to its default differs from unset */
    d = c;
    d.formats.f[0] = c.formats.f[1];
    d.formats.f[1] = c.formats.f[0];
    ck_assert(adapt_config_equal(&c, &d, NULL, 0));
    d.formats.f[1].head.set[4] = 0; /* myfp8.nan unset */
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format.myfp8.nan");
    d = c;
    d.formats.n = 3;
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format.q12");
    d = c;
    d.formats.f[2].head.name[1] = 'x';
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format._e2m1");
}
END_TEST

/* Errors found when the sections are resolved and registered (adapt_config_check): each names
 * the file and line of the section, or of the key at fault. */
static const struct bad_case bad_formats[] = {
    {"[format f8]\nkind = float\nexp_bits = 4\n", ADAPT_EINVAL, ":1:",
     "[format f8] (kind = float) needs exp_bits and man_bits", "man_bits is not set"},
    {"[format f8]\nexp_bits = 4\nman_bits = 3\n", ADAPT_EINVAL, ":1:", "[format f8]",
     "needs kind = float or fixed"},
    {"[format q]\nkind = fixed\nfl = 3\n", ADAPT_EINVAL, ":1:", "needs wl and fl",
     "wl is not set"},
    {"[format e4m3]\nkind = float\nexp_bits = 4\nman_bits = 3\n", ADAPT_EINVAL, ":1:",
     "[format e4m3]", "taken by a built-in format"},
    {"[format float32]\nkind = fixed\nwl = 8\nfl = 4\n", ADAPT_EINVAL, ":1:", "[format float32]",
     "taken by a built-in format"},
    {"[format f8]\nkind = float\nexp_bits = 4\nman_bits = 3\n\nbias = -200\n", ADAPT_ERANGE,
     ":6:", "[format f8]: quant float(4,3) with bias -200",
     "a bias in -113..124 or 127 fits"},
    {"[format f8]\nkind = float\nexp_bits = 8\nman_bits = 7\nnan = fn\n", ADAPT_ERANGE, ":1:",
     "[format f8]", "no bias at all"},
    {"[format f8]\nkind = float\nexp_bits = 2\nman_bits = 1\nnan = none\noverflow = inf\n",
     ADAPT_EINVAL, ":6:", "[format f8]", "every code is finite"},
    {"[format q]\nkind = fixed\nwl = 8\nfl = 4\nnan = fn\n", ADAPT_EINVAL, ":5:",
     "format.q.nan is a key of kind = float", "[format q] is kind = fixed"},
    {"[format f8]\nkind = float\nexp_bits = 4\nman_bits = 3\nfl = 4\n", ADAPT_EINVAL, ":5:",
     "format.f8.fl is a key of kind = fixed", "kind = float"},
    {"[policy]\nname = fixed\nformat = f9\n[format f8]\nkind = fixed\nwl = 8\nfl = 4\n",
     ADAPT_EINVAL, ":3:", "policy.format = f9", "unknown"},
};

START_TEST(test_format_errors)
{
    const struct bad_case *b = &bad_formats[_i];
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_msg(load_text(&c, b->text) == ADAPT_OK, "case %d: %s", _i, adapt_error_message());
    adapt_error_clear();
    enum adapt_status st = adapt_config_check(&c);
    ck_assert_msg(st == b->st, "case %d: status %d, expected %d (%s)", _i, st, b->st,
                  adapt_error_message());
    ck_assert_msg_has("t.ini");
    ck_assert_msg_has(b->line);
    ck_assert_msg_has(b->needle1);
    ck_assert_msg_has(b->needle2);
}
END_TEST

/* Print, load back, compare: every value survives (doubles are printed to round-trip). */
START_TEST(test_print_roundtrip)
{
    struct adapt_config c, d, e;
    char path[256], out[256];
    adapt_config_init(&c);
    write_file(path, sizeof path, "full.ini", full_ini);
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "optim.lr=0.1"), ADAPT_OK); /* not exact in binary */
    ck_assert_int_eq(adapt_config_set(&c, "model.init_gain=0.30000000000000004"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.seed=9223372036854775807"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.out=a;b"), ADAPT_OK);

    for (unsigned flags = 0; flags <= ADAPT_CONFIG_PRINT_HELP; flags++) {
        print_and_reload(&c, &d, flags);
        ck_assert(d.model.init_gain == 0.30000000000000004);
    }
    /* defaults too */
    adapt_config_init(&c);
    snprintf(out, sizeof out, "%s/defaults.ini", tmpdir);
    FILE *f = fopen(out, "w");
    ck_assert_int_eq(adapt_config_print(&c, f, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(f);
    adapt_config_init(&e);
    ck_assert_int_eq(adapt_config_set(&e, "train.epochs=16"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_load(&e, out), ADAPT_OK);
    ck_assert(adapt_config_equal(&c, &e, NULL, 0));

    /* equal() reports the first differing key */
    char diff[64];
    e.quantization.buffer_bits = 5;
    ck_assert(!adapt_config_equal(&c, &e, diff, sizeof diff));
    ck_assert_str_eq(diff, "quantization.buffer_bits");
}
END_TEST

START_TEST(test_print_format)
{
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit=16:8,12:6"), ADAPT_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_config_print(&c, f, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "# --set policy.per_unit=16:8,12:6\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\n[run]\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nseed = 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nout = \"\"\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nlr = 0.01\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nthreshold = 0.0001\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nmuppet_levels = 8,12,14,16\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nper_unit = 16:8,12:6\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nmilestones = \n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nnesterov = false\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# learning rate (a number in (0, 100]; default 0.01)\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\n[quantization]\n"));
    free(buf);
}
END_TEST

START_TEST(test_json)
{
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.muppet_schedule=8:16,32:45"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.seed=2385"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.name=fixed8"), ADAPT_OK);
    ck_assert_str_eq(c.run.name, "fixed8");
    json_t *j = adapt_config_to_json(&c);
    ck_assert_ptr_nonnull(j);
    /* the run's name goes into the trace header's config like every key */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "run"), "name")),
                     "fixed8");
    ck_assert_int_eq(json_object_size(j),
                     9); /* run data model train optim schedule policy quantization roles */
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "run"), "seed")), 2385);
    json_t *optim = json_object_get(j, "optim");
    ck_assert(json_is_real(json_object_get(optim, "lr")));
    ck_assert(json_real_value(json_object_get(optim, "lr")) == 0.01);
    ck_assert(json_is_false(json_object_get(optim, "nesterov")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "data"), "dataset")),
                     "fashion-mnist");
    json_t *levels = json_object_get(json_object_get(j, "policy"), "muppet_levels");
    ck_assert_int_eq(json_array_size(levels), 4);
    ck_assert_int_eq(json_integer_value(json_array_get(levels, 3)), 16);
    json_t *sched = json_object_get(json_object_get(j, "policy"), "muppet_schedule");
    ck_assert_int_eq(json_array_size(sched), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(sched, 1), 0)), 32);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(sched, 1), 1)), 45);
    /* every [quantization] key of the schema table (28) */
    ck_assert_int_eq(json_object_size(json_object_get(j, "quantization")), 28);
    json_t *q = json_object_get(j, "quantization");
    ck_assert_str_eq(json_string_value(json_object_get(q, "precision_propagation")), "unit");
    ck_assert_str_eq(json_string_value(json_object_get(q, "graph_preset")), "default");
    ck_assert_str_eq(json_string_value(json_object_get(q, "graph_float")), "");
    char *s = json_dumps(json_object_get(j, "schedule"), JSON_COMPACT);
    ck_assert_str_eq(s, "{\"name\":\"constant\",\"milestones\":[],\"gamma\":0.10000000000000001,"
                        "\"factor\":0.10000000000000001,\"patience\":10,\"threshold\":0.0001,"
                        "\"min_lr\":0.0,\"cooldown\":0}");
    free(s);
    json_decref(j);
}
END_TEST

/* The schema engine on a small table of its own, unrelated to adapt's keys: defaults, a
 * file with line numbers, an assignment with its own source name, an enum whose values
 * are listed out of value order and one value without a name, errors, printing read back,
 * JSON and equality. */
struct toy {
    int count;
    double ratio;
    bool loud;
    char name[8];
    int colour; /* 0 = (no name), 1 = red, 2 = blue; listed blue, red */
    struct adapt_schema_ints steps;
    struct adapt_schema_pairs sizes;
    int64_t big;
};
static const char *const toy_colours[] = {NULL, "red", "blue"};
static const int toy_colour_order[] = {2, 1, 0};
static const struct adapt_schema_enum toy_colour = {toy_colours, 3, toy_colour_order};
static const char *const toy_labels[] = {"W", "H"};
#define TOY(f) ADAPT_SCHEMA_FIELD(struct toy, f)
static const struct adapt_schema_key toy_keys[] = {
    {"a", "count", ADAPT_SCHEMA_INT, TOY(count), "3", "[1, 10]", .help = "how many"},
    {"a", "ratio", ADAPT_SCHEMA_DOUBLE, TOY(ratio), "0.5", "(0, 1]", .help = "share"},
    {"a", "loud", ADAPT_SCHEMA_BOOL, TOY(loud), "no", .help = "talk"},
    {"b", "name", ADAPT_SCHEMA_STRING, TOY(name), "toy", .help = "label"},
    {"b", "colour", ADAPT_SCHEMA_ENUM, TOY(colour), "red", .choices = &toy_colour,
     .help = "paint"},
    {"b", "steps", ADAPT_SCHEMA_INTS, TOY(steps), "1,2", "[0, 9]", .flags =
     ADAPT_SCHEMA_INCREASING, .help = "stairs"},
    {"b", "sizes", ADAPT_SCHEMA_PAIRS, TOY(sizes), "", "[1, 4]", "[5, 8]", .labels = toy_labels,
     .help = "boxes"},
    {"b", "big", ADAPT_SCHEMA_I64, TOY(big), "-1", "[-5, 5000000000]", .help = "wide"},
};
static const struct adapt_schema toy_schema = {toy_keys, 8, sizeof(struct toy), NULL, 0};

/* adapt-sim.ini(5): the page frame, a heading per section and a paragraph per key, with the
 * key's default; text is escaped for roff */
START_TEST(test_print_man)
{
    char path[256];
    tu_path(path, sizeof path, tmpdir, "a.5");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_config_print_man(f, "9.9"), ADAPT_OK);
    fclose(f);
    char *text = (char *)tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, ".TH ADAPT\\-SIM.INI 5 \"\" \"adapt\\-sim 9.9\""));
    ck_assert_ptr_nonnull(strstr(text, ".SH KEYS\n.SS \"[run]\"\n.TP\n.B seed\n"));
    ck_assert_ptr_nonnull(strstr(text, ".SS \"[train]\"\n"));
    ck_assert_ptr_nonnull(strstr(text, ".TP\n.B epochs\n"));
    ck_assert_ptr_nonnull(strstr(text, ".SS \"[format NAME]\"\n"));
    ck_assert_ptr_nonnull(strstr(text, "default \\fBfashion\\-mnist\\fR."));
    /* no line starts with a character roff would take for a request, bar the requests */
    for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (*l == '\'') ck_abort_msg("a line starts with a quote: %.60s", l);
    free(text);
    /* the escaping on its own */
    tu_path(path, sizeof path, tmpdir, "t.roff");
    f = fopen(path, "w");
    adapt_schema_roff_text(f, ".a-b\\c\n'd");
    fclose(f);
    text = (char *)tu_read_file(path, NULL);
    ck_assert_str_eq(text, "\\&.a\\-b\\ec\n\\&'d");
    free(text);
}
END_TEST

START_TEST(test_schema_engine)
{
    struct toy t, u, before;
    int lines[8];
    char path[256], out[256], diff[32];
    adapt_schema_init(&toy_schema, &t);
    ck_assert_int_eq(t.count, 3);
    ck_assert(t.ratio == 0.5 && !t.loud);
    ck_assert_str_eq(t.name, "toy");
    ck_assert_int_eq(t.colour, 1);
    ck_assert_int_eq(t.steps.n, 2);
    ck_assert_int_eq(t.steps.v[1], 2);
    ck_assert_int_eq(t.sizes.n, 0);
    ck_assert(t.big == -1);
    ck_assert_int_eq(adapt_schema_find(&toy_schema, "b", "colour"), 4);
    ck_assert_int_eq(adapt_schema_find(&toy_schema, "a", "colour"), -1);
    ck_assert_str_eq(adapt_schema_enum_str(&toy_schema, &t, "b", "colour"), "red");
    ck_assert_ptr_null(adapt_schema_enum_str(&toy_schema, &t, "a", "count"));

    write_file(path, sizeof path, "toy.ini",
               "; toy\n[b]\n  colour = blue\nsizes = 2:6, 4:8\n\n[a]\ncount: 7\n");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &t, path, lines), ADAPT_OK);
    ck_assert_int_eq(t.colour, 2);
    ck_assert_int_eq(t.sizes.n, 2);
    ck_assert_int_eq(t.sizes.b[1], 8);
    ck_assert_int_eq(t.count, 7);
    static const int want_lines[8] = {7, 0, 0, 0, 3, 0, 4, 0};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(lines[i], want_lines[i]);

    int row = -1;
    ck_assert_int_eq(adapt_schema_set(&toy_schema, &t, "--opt", " b.big = 4000000000 ", &row),
                     ADAPT_OK);
    ck_assert_int_eq(row, 7);
    ck_assert(t.big == 4000000000LL);

    /* errors leave the struct unchanged and name the source, the key and what it takes */
    before = t;
    static const char *const bad[][2] = {
        {"b.colour=green",
         "--opt: b.colour = \"green\": value not allowed; expected one of blue, red"},
        {"b.colour=", "value not allowed"},
        {"b.steps=1,5,3", "entries not increasing (3 after 5)"},
        {"b.sizes=2:6,5:6", "pair 2 (5:6): entry 5 is out of range; expected a comma-separated "
                            "list of W:H pairs with W in [1, 4] and H in [5, 8]"},
        {"a.ratio=0", "out of range; expected a number in (0, 1]"},
        {"b.name=toolonger", "longer than 7 characters"},
        {"c.x=1", "--opt: unknown section [c] (sections: a, b)"},
        {"a.size=1", "unknown key a.size (keys of [a]: count, ratio, loud)"},
        {"a.count", "--opt \"a.count\": expected section.key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(adapt_schema_set(&toy_schema, &t, "--opt", bad[i][0], &row),
                         ADAPT_EINVAL);
        ck_assert_msg_has(bad[i][1]);
        ck_assert(adapt_schema_equal(&toy_schema, &t, &before, NULL, 0));
    }
    write_file(path, sizeof path, "bad.ini", "[a]\ncount = 2\n[z]\n");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &t, path, lines), ADAPT_EINVAL);
    ck_assert_msg_has("bad.ini:3: unknown section [z] (sections: a, b)");
    ck_assert(adapt_schema_equal(&toy_schema, &t, &before, NULL, 0));

    /* printed with help, read back equal */
    snprintf(out, sizeof out, "%s/toy-printed.ini", tmpdir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_schema_print(&toy_schema, &t, f, ADAPT_SCHEMA_PRINT_HELP), ADAPT_OK);
    fclose(f);
    adapt_schema_init(&toy_schema, &u);
    ck_assert(!adapt_schema_equal(&toy_schema, &t, &u, diff, sizeof diff));
    ck_assert_str_eq(diff, "a.count");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &u, out, lines), ADAPT_OK);
    ck_assert_msg(adapt_schema_equal(&toy_schema, &t, &u, diff, sizeof diff), "differs at %s",
                  diff);
    char *buf = NULL;
    size_t len = 0;
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_schema_print(&toy_schema, &t, f, ADAPT_SCHEMA_PRINT_HELP), ADAPT_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "\n[b]\n# label (a string of at most 7 characters; "
                                      "default toy)\nname = \"toy\"\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# paint (one of blue, red; default red)\ncolour = blue\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# boxes (a comma-separated list of W:H pairs with W in "
                                      "[1, 4] and H in [5, 8]; default empty)\nsizes = 2:6,4:8\n"));
    free(buf);

    json_t *j = adapt_schema_to_json(&toy_schema, &t);
    ck_assert_ptr_nonnull(j);
    char *js = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(js, "{\"a\":{\"count\":7,\"ratio\":0.5,\"loud\":false},\"b\":{\"name\":"
                         "\"toy\",\"colour\":\"blue\",\"steps\":[1,2],\"sizes\":[[2,6],[4,8]],"
                         "\"big\":4000000000}}");
    free(js);
    json_decref(j);
}
END_TEST

/* Named sections in the engine, on a toy table: "[box NAME]" items with two keys. */
struct toy_box {
    struct adapt_schema_item head;
    int size;
    char label[8];
};
struct toy2 {
    int count;
    int nbox;
    struct toy_box box[2];
};
#define TOY2(f) ADAPT_SCHEMA_FIELD(struct toy2, f)
#define BOX(f) ADAPT_SCHEMA_FIELD(struct toy_box, f)
static const struct adapt_schema_key toy2_keys[] = {
    {"a", "count", ADAPT_SCHEMA_INT, TOY2(count), "3", "[1, 10]", .help = "how many"}};
static const struct adapt_schema_key box_keys[] = {
    {"box", "size", ADAPT_SCHEMA_INT, BOX(size), "1", "[1, 9]", .help = "edge"},
    {"box", "label", ADAPT_SCHEMA_STRING, BOX(label), "", .help = "tag"}};
static const struct adapt_schema_named toy2_named[] = {
    {"box", box_keys, 2, sizeof(struct toy_box), offsetof(struct toy2, box),
     offsetof(struct toy2, nbox), 2}};
static const struct adapt_schema toy2_schema = {toy2_keys, 1, sizeof(struct toy2), toy2_named, 1};

START_TEST(test_schema_named)
{
    struct toy2 t, u;
    int lines[1], row = 0;
    char path[256], diff[32];
    adapt_schema_init(&toy2_schema, &t);
    ck_assert_int_eq(t.nbox, 0);
    /* an assignment makes an item; a file's section then defines it whole */
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b1.label=old", &row),
                     ADAPT_OK);
    ck_assert_int_eq(row, -1);
    ck_assert_int_eq(t.nbox, 1);
    ck_assert_int_eq(t.box[0].head.line, 0);
    ck_assert_int_eq(t.box[0].head.set[1], -1);
    write_file(path, sizeof path, "boxes.ini",
               "[box b2]\nsize = 4\n[a]\ncount = 2\n[ box   b1 ]\nsize: 3\n");
    ck_assert_msg(adapt_schema_load(&toy2_schema, &t, path, lines) == ADAPT_OK, "%s",
                  adapt_error_message());
    ck_assert_int_eq(t.nbox, 2);
    ck_assert_str_eq(t.box[0].head.name, "b1");
    ck_assert_int_eq(t.box[0].head.line, 5);
    ck_assert_int_eq(t.box[0].size, 3);
    ck_assert_str_eq(t.box[0].label, ""); /* reset by the section */
    ck_assert_int_eq(t.box[0].head.set[1], 0);
    ck_assert_int_eq(t.box[1].head.set[0], 2);
    ck_assert_int_eq(lines[0], 4);
    /* errors: a third item, a duplicate, an unknown key; the struct unchanged */
    u = t;
    write_file(path, sizeof path, "more.ini", "[box b3]\n");
    ck_assert_int_eq(adapt_schema_load(&toy2_schema, &t, path, lines), ADAPT_EINVAL);
    ck_assert_msg_has("more.ini:1: [box b3]: more than 2 [box NAME] sections");
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b3.size=2", &row),
                     ADAPT_EINVAL);
    ck_assert_msg_has("more than 2");
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b1.depth=2", &row),
                     ADAPT_EINVAL);
    ck_assert_msg_has("unknown key box.b1.depth (keys of [box NAME]: size, label)");
    ck_assert(adapt_schema_equal(&toy2_schema, &t, &u, NULL, 0));
    /* printed and read back (keys set only), JSON */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_schema_print(&toy2_schema, &t, f, 0), ADAPT_OK);
    fclose(f);
    ck_assert_str_eq(buf, "[a]\ncount = 2\n\n[box b1]\nsize = 3\n\n[box b2]\nsize = 4\n");
    write_file(path, sizeof path, "back.ini", buf);
    free(buf);
    adapt_schema_init(&toy2_schema, &u);
    ck_assert_int_eq(adapt_schema_load(&toy2_schema, &u, path, lines), ADAPT_OK);
    ck_assert_msg(adapt_schema_equal(&toy2_schema, &t, &u, diff, sizeof diff), "%s", diff);
    u.box[1].head.set[1] = 9; /* b2.label now counts as set, to its default "" */
    ck_assert(!adapt_schema_equal(&toy2_schema, &t, &u, diff, sizeof diff));
    ck_assert_str_eq(diff, "box.b2.label");
    json_t *j = adapt_schema_to_json(&toy2_schema, &t);
    char *js = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(js, "{\"a\":{\"count\":2},\"box\":{\"b1\":{\"size\":3},\"b2\":{\"size\":4}}}");
    free(js);
    json_decref(j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_full_file);
    tcase_add_loop_test(tc, test_file_errors, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_file_access_errors);
    tcase_add_test(tc, test_set);
    tcase_add_test(tc, test_format_sections);
    tcase_add_test(tc, test_no_int_bits);
    tcase_add_loop_test(tc, test_format_errors, 0,
                        (int)(sizeof bad_formats / sizeof bad_formats[0]));
    tcase_add_test(tc, test_cross_checks);
    tcase_add_test(tc, test_print_roundtrip);
    tcase_add_test(tc, test_print_format);
    tcase_add_test(tc, test_json);
    tcase_add_test(tc, test_print_man);
    tcase_add_test(tc, test_schema_engine);
    tcase_add_test(tc, test_schema_named);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
