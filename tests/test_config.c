/* tests/test_config.c: src/config (defaults, INI files, --set, checks, printing, JSON) and its
 * schema engine on a table of its own.
 *
 * This file: the shared helpers (tests/test_config.h), the defaults, a complete file, --set and
 * the cross-checks, and main. Malformed files are in test_config_errors.c, [format NAME]
 * sections in test_config_formats.c, printing and JSON in test_config_print.c, the schema
 * engine in test_config_schema.c. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/config/config.h"
#include "src/config/schema.h"
#include "tests/test_config.h"
#include "tests/testutil.h"

char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "config"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

/* tests/test_config.h */
const char *write_file(char *path, size_t size, const char *name, const char *text)
{
    tu_write_text(tu_path(path, size, tmpdir, name), text);
    return path;
}

/* tests/test_config.h */
enum adapt_status load_text(struct adapt_config *cfg, const char *text)
{
    char path[256];
    write_file(path, sizeof path, "t.ini", text);
    return adapt_config_load(cfg, path);
}

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
    ck_assert_int_eq(c.data.resize, ADAPT_CONFIG_RESIZE_PAD);
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
    ck_assert_int_eq(c.quantization.lb_update, ADAPT_CONFIG_LB_UPDATE_AUTO);
    ck_assert_int_eq(c.quantization.buffer_bits, 4);
    ck_assert_int_eq(c.quantization.strategy, ADAPT_TRACE_STRATEGY_MIN);
    ck_assert(c.quantization.quant_inputs && c.quantization.quant_outputs &&
              c.quantization.quant_grads);
    ck_assert(c.quantization.kl_eps == 0.0);
    ck_assert_int_eq(c.quantization.pd_sample, 4096);
    ck_assert(c.quantization.kl_noise == 1.0);
    ck_assert_int_eq(c.quantization.compat, ADAPT_COMPAT_CORRECTED);
    ck_assert_int_eq(c.quantization.rounding, QUANT_ROUND_STOCHASTIC);
    ck_assert_int_eq(c.quantization.sr_bits, ADAPT_CONFIG_SR_BITS_32);
    ck_assert_int_eq(adapt_config_sr_bits(&c), 32);
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

/* tests/test_config.h */
const char *full_ini =
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
    "lb_update = window\n"
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
    ck_assert_int_eq(c.quantization.lb_update, ADAPT_CONFIG_LB_UPDATE_WINDOW);
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
    ck_assert_int_eq(adapt_config_set(&c, "data.resize=bilinear"), ADAPT_OK);
    ck_assert_int_eq(c.data.resize, ADAPT_CONFIG_RESIZE_BILINEAR);
    /* a later --set of the same key wins */
    ck_assert_int_eq(adapt_config_set(&c, "train.epochs=4"), ADAPT_OK);
    ck_assert_int_eq(c.train.epochs, 4);
    ck_assert_int_eq(c.n_overrides, 7);
    ck_assert_str_eq(c.overrides[0], "train.epochs=3");
    ck_assert_str_eq(c.overrides[1], " optim.lr = 0.0625 ");
    ck_assert_str_eq(c.overrides[6], "train.epochs=4");

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
        {"data.resize=nearest", "data.resize", "one of pad, bilinear"},
        {"quantization.lb_update=epoch", "quantization.lb_update", "one of step, window, auto"},
        {"quantization.sr_bits=24", "quantization.sr_bits", "one of 32, 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        adapt_error_clear();
        ck_assert_int_eq(adapt_config_set(&c, bad[i][0]), ADAPT_EINVAL);
        ck_assert_msg_has("--set");
        ck_assert_msg_has(bad[i][1]);
        ck_assert_msg_has(bad[i][2]);
        ck_assert(adapt_config_equal(&c, &before, NULL, 0));
        ck_assert_int_eq(c.n_overrides, 7);
    }
}
END_TEST

/* quantization.sr_bits: 16 or 32 random bits per stochastic rounding; the configuration's JSON
 * (the trace header's "config") names it only when it is not the default 32, so that the traces
 * of runs that do not set it stay what they were. */
START_TEST(test_sr_bits)
{
    struct adapt_config c;
    adapt_config_init(&c);
    json_t *j = adapt_config_to_json(&c);
    ck_assert_ptr_nonnull(j);
    json_t *q = json_object_get(j, "quantization");
    ck_assert_ptr_nonnull(json_object_get(q, "rounding"));
    ck_assert_ptr_null(json_object_get(q, "sr_bits"));
    json_decref(j);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.sr_bits=16"), ADAPT_OK);
    ck_assert_int_eq(c.quantization.sr_bits, ADAPT_CONFIG_SR_BITS_16);
    ck_assert_int_eq(adapt_config_sr_bits(&c), 16);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    j = adapt_config_to_json(&c);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "quantization"),
                                                       "sr_bits")),
                     "16");
    json_decref(j);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.sr_bits=32"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_sr_bits(&c), 32);
}
END_TEST

/* [reference] switches: auto follows quantization.compat, on and off set one switch alone;
 * a value outside auto / on / off names the file, its line, the key and the choices. */
START_TEST(test_reference_switches)
{
    struct adapt_config c;
    adapt_config_init(&c);
    for (int k = 0; k < ADAPT_REF_N; k++) {
        ck_assert_int_eq(c.reference.sw[k], ADAPT_SWITCH_AUTO);
        ck_assert(!adapt_config_reference(&c, (enum adapt_reference_switch)k));
    }
    ck_assert_int_eq(adapt_config_set(&c, "quantization.compat=reference"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "reference.kl_test=off"), ADAPT_OK);
    /* lenet5 (the default model) has no loss penalty and no batch norm */
    for (int k = 0; k < ADAPT_REF_N; k++)
        ck_assert_int_eq(adapt_config_reference(&c, (enum adapt_reference_switch)k),
                         k != ADAPT_REF_KL_TEST && k != ADAPT_REF_LOSS_PENALTY &&
                             k != ADAPT_REF_BN_ROUNDING);
    ck_assert_int_eq(adapt_config_reference_mode(&c, ADAPT_REF_KL_TEST), ADAPT_COMPAT_CORRECTED);
    ck_assert_int_eq(adapt_config_reference_mode(&c, ADAPT_REF_LB_CEIL), ADAPT_COMPAT_REFERENCE);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.compat=corrected"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "reference.pu_s2_zero=on"), ADAPT_OK);
    for (int k = 0; k < ADAPT_REF_N; k++)
        ck_assert_int_eq(adapt_config_reference(&c, (enum adapt_reference_switch)k),
                         k == ADAPT_REF_PU_S2_ZERO);
    ck_assert_str_eq(adapt_config_enum_str(&c, "reference", "pu_s2_zero"), "on");
    /* softmax_before_ce: auto only for the published LeNet-5 (model.name = lenet5) */
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.compat=reference"), ADAPT_OK);
    ck_assert_str_eq(c.model.name, "lenet5");
    ck_assert(adapt_config_reference(&c, ADAPT_REF_SOFTMAX_BEFORE_CE));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=alexnet_mnist"), ADAPT_OK);
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_SOFTMAX_BEFORE_CE));
    ck_assert_int_eq(adapt_config_set(&c, "reference.softmax_before_ce=on"), ADAPT_OK);
    ck_assert(adapt_config_reference(&c, ADAPT_REF_SOFTMAX_BEFORE_CE));
    /* loss_penalty: auto for the AlexNets and ResNets; act_formats for LeNet-5, AlexNet and the
     * ResNets, not for a model described in a file (mobilenetv2) */
    ck_assert(adapt_config_reference(&c, ADAPT_REF_LOSS_PENALTY));
    ck_assert(adapt_config_reference(&c, ADAPT_REF_ACT_FORMATS));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=resnet20"), ADAPT_OK);
    ck_assert(adapt_config_reference(&c, ADAPT_REF_LOSS_PENALTY));
    ck_assert(adapt_config_reference(&c, ADAPT_REF_ACT_FORMATS));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=mobilenetv2"), ADAPT_OK);
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_ACT_FORMATS));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=lenet5"), ADAPT_OK);
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_LOSS_PENALTY));
    ck_assert(adapt_config_reference(&c, ADAPT_REF_ACT_FORMATS));
    /* pool_rounding: auto for LeNet-5 and the ResNets (the published AlexNets' pools are not
     * quantized modules); bn_rounding for the ResNets alone */
    ck_assert(adapt_config_reference(&c, ADAPT_REF_POOL_ROUNDING));
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_BN_ROUNDING));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=alexnet_mnist"), ADAPT_OK);
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_POOL_ROUNDING));
    ck_assert(!adapt_config_reference(&c, ADAPT_REF_BN_ROUNDING));
    ck_assert_int_eq(adapt_config_set(&c, "model.name=resnet56"), ADAPT_OK);
    ck_assert(adapt_config_reference(&c, ADAPT_REF_POOL_ROUNDING));
    ck_assert(adapt_config_reference(&c, ADAPT_REF_BN_ROUNDING));
    adapt_config_init(&c);
    adapt_error_clear();
    ck_assert_int_ne(load_text(&c, "[reference]\n\nbn_format = maybe\n"), ADAPT_OK);
    ck_assert_msg_has("t.ini:3");
    ck_assert_msg_has("reference.bn_format");
    ck_assert_msg_has("one of auto, on, off");
    adapt_config_init(&c);
    adapt_error_clear();
    ck_assert_int_ne(load_text(&c, "[reference]\nsoftmax = on\n"), ADAPT_OK);
    ck_assert_msg_has("t.ini:2");
    ck_assert_msg_has("reference.softmax");
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

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_full_file);
    tcase_add_test(tc, test_set);
    tcase_add_test(tc, test_sr_bits);
    tcase_add_test(tc, test_cross_checks);
    tcase_add_test(tc, test_reference_switches);
    test_config_add_errors(tc);
    test_config_add_formats(tc);
    test_config_add_print(tc);
    test_config_add_schema(tc);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
