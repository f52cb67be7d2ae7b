/* src/train/adapt-train.c: the adapt-train program.
 *
 *   adapt-train --config FILE [--set section.key=value ...] [--out DIR]
 *               [--resume | --force] [--dry-run] [--init-from FILE] [--quiet]
 *   adapt-train --eval-only --init-from FILE [--config FILE] [--set ...] [--eval-json FILE]
 *               [--allow-plugin PATH ...]
 *   (without --config, --eval-only reads the config.ini of the run directory holding FILE)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <config.h>
#include "src/base/fileio.h"
#include "src/base/version.h"
#include "src/config/config.h"
#include "src/cuda/device.h"
#include "src/data/data.h"
#include "src/net/net.h"
#include "src/policy/policy.h"
#include "src/quant/gemm_int.h"
#include "src/train/train.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: adapt-train --config FILE [options]\n"
            "Trains a CNN with a precision policy and writes a trace and checkpoints.\n\n"
            "  --config FILE          INI configuration: a path, or the name of a shipped one\n"
            "                         (c100_alexnet.ini, reference/lenet_msgd_fp_mnist.ini),\n"
            "                         looked up in $ADAPT_DATA_PATH, the source tree's\n"
            "                         experiments/configs and the installed configurations\n"
            "                         (the .ini may be left out: --config quickstart)\n"
            "  --set SECTION.KEY=VAL  override one configuration value (repeatable)\n"
            "  --out DIR              output directory (default: run.out, or runs/<config stem>)\n"
            "  --resume               continue the run in the output directory\n"
            "  --force                replace the run files in an existing output directory\n"
            "  --dry-run              print the resolved configuration and the model, check the\n"
            "                         policy against the model and the data set (files, sizes),\n"
            "                         then stop; exit status 1 when something is missing\n"
            "  --estimate[=N]         with the dry run, time N optimizer steps (default 5) and\n"
            "                         one evaluation batch and estimate the whole run's time\n"
            "  --init-from FILE       start from the weights in a safetensors file (or a run\n"
            "                         directory: its model.safetensors)\n"
            "  --eval-only            score --init-from FILE on the test set (at the formats\n"
            "                         stored with it) and stop; without --config, under the\n"
            "                         config.ini of the run directory holding FILE\n"
            "  --eval-json FILE       with --eval-only: also write the result as JSON\n"
            "  --allow-plugin PATH    with --eval-only: let the checkpoint's stored formats load\n"
            "                         the rounding plugin in file PATH (PATH:NAME: only that\n"
            "                         function); repeatable. A checkpoint is data: a plugin it\n"
            "                         names is refused unless allowed here or named by the\n"
            "                         configuration's formats\n"
            "  --quiet                no progress output\n"
            "  --device cpu|cuda      where the training step runs (run.device; run.gpu picks\n"
            "                         the GPU); cuda needs a CUDA build and a GPU\n"
            "  --help, --version\n\n"
            "Configuration keys, their defaults and ranges: adapt-train --dry-run.\n");
}

/* The resolved --config and --init-from paths and the copy of argv (allocated), freed at exit
 * on every path out of main. */
static char *config_file, *init_file;
static char **orig;

static void free_paths(void)
{
    free(config_file);
    free(init_file);
    free(orig);
}

static int fail(const char *what)
{
    fprintf(stderr, "adapt-train: %s\n", what);
    return 1;
}

/* 1 when s ends in suffix. */
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* 1 when s is a non-empty run of decimal digits. */
static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* What the word left over after the options, args[at] (args: the arguments in the order given,
 * before getopt_long moved the words that are no options to the end), probably meant, written
 * to hint (empty when no guess fits): the value of --set or --estimate after a space instead
 * of '='; a configuration file given without --config (have_config: --config was given). */
static void stray_hint(char *const *args, int at, int have_config, char *hint, size_t size)
{
    const char *word = args[at], *prev = at > 1 ? args[at - 1] : "";
    const char *prev2 = at > 2 ? args[at - 2] : "";
    struct stat sb;
    hint[0] = '\0';
    if (!strcmp(prev, "--estimate") && all_digits(word)) {
        snprintf(hint, size, "did you mean --estimate=%s? (its number follows '=')", word);
    } else if ((!strcmp(prev2, "--set") || !strcmp(prev2, "-s")) && !strchr(prev, '=')) {
        snprintf(hint, size, "did you mean --set %s=%s? (--set takes one word, "
                 "section.key=value)", prev, word);
    } else if (!strncmp(prev, "--set=", 6) && !strchr(prev + 6, '=')) {
        snprintf(hint, size, "did you mean --set %s=%s? (--set takes one word, "
                 "section.key=value)", prev + 6, word);
    } else if (!have_config && ends_with(word, ".ini") && stat(word, &sb) == 0 &&
               S_ISREG(sb.st_mode)) {
        snprintf(hint, size, "did you mean --config %s?", word);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"set", required_argument, 0, 's'},
                                         {"out", required_argument, 0, 'o'},
                                         {"resume", no_argument, 0, 'r'},
                                         {"force", no_argument, 0, 'f'},
                                         {"dry-run", no_argument, 0, 'n'},
                                         {"init-from", required_argument, 0, 'i'},
                                         {"eval-only", no_argument, 0, 'e'},
                                         {"eval-json", required_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"device", required_argument, 0, 'D'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {"estimate", optional_argument, 0, 'E'},
                                         {"allow-plugin", required_argument, 0, 'A'},
                                         /* not in --help: the build makes adapt-sim.ini(5) */
                                         {"print-schema", required_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    const char *config = NULL, *out = NULL, *init_from = NULL, *eval_json = NULL;
    const char *sets[64];
    const char *device = NULL;
    int nsets = 0, resume = 0, force = 0, dry = 0, eval_only = 0, quiet = 0, estimate = 0, c;
    static const char *allow_plugins[64]; /* --allow-plugin */
    int n_allow_plugins = 0;
    /* the arguments as given (getopt_long reorders argv), for the hints on a stray word */
    atexit(free_paths);
    orig = malloc(sizeof *orig * (size_t)(argc + 1));
    if (!orig) return fail("out of memory");
    memcpy(orig, argv, sizeof *orig * (size_t)(argc + 1));
    while ((c = getopt_long(argc, argv, "c:s:o:i:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 's':
            if (nsets == 64) return fail("too many --set options (at most 64)");
            sets[nsets++] = optarg;
            break;
        case 'o': out = optarg; break;
        case 'r': resume = 1; break;
        case 'f': force = 1; break;
        case 'n': dry = 1; break;
        case 'i': init_from = optarg; break;
        case 'E': {
            char *end = NULL;
            estimate = optarg ? (int)strtol(optarg, &end, 10) : 5;
            if (optarg && (*end || end == optarg || estimate < 1 || estimate > 1000))
                return fail("--estimate=N expects a number of steps in 1..1000");
            dry = 1;
            break;
        }
        case 'e': eval_only = 1; break;
        case 'j': eval_json = optarg; break;
        case 'A':
            if (n_allow_plugins == 64) return fail("too many --allow-plugin options (at most 64)");
            allow_plugins[n_allow_plugins++] = optarg;
            break;
        case 'q': quiet = 1; break;
        case 'D': device = optarg; break;
        case 'S':
            if (strcmp(optarg, "man")) return fail("--print-schema=man is the only form");
            return adapt_config_print_man(stdout, PACKAGE_VERSION) ? fail(adapt_error_message())
                                                                    : 0;
        case 'h': usage(stdout); return 0;
        case 'V':
            adapt_version_print(stdout, "adapt-train");
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        /* a likely slip gets its correction instead of the whole usage */
        char hint[512];
        int at = 1;
        while (at < argc && orig[at] != argv[optind]) at++;
        hint[0] = '\0';
        if (at < argc) stray_hint(orig, at, config != NULL, hint, sizeof hint);
        if (hint[0]) {
            fprintf(stderr, "adapt-train: unexpected argument '%s': %s\n", argv[optind], hint);
            return 2;
        }
        fprintf(stderr, "adapt-train: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!config && !eval_only) {
        fprintf(stderr, "adapt-train: --config FILE is required\n");
        usage(stderr);
        return 2;
    }
    if (resume && force) return fail("--resume and --force exclude each other");
    if (eval_only && !init_from) return fail("--eval-only needs --init-from FILE");
    if (eval_json && !eval_only) return fail("--eval-json FILE needs --eval-only");
    if (resume && init_from) return fail("--resume continues from the run's own checkpoint; "
                                         "--init-from cannot be combined with it");
    const char *isa_error = adapt_gemm_isa_env_error();
    if (isa_error) return fail(isa_error);

    /* --init-from a run directory: its weights */
    struct stat sb;
    if (init_from && stat(init_from, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!(init_file = adapt_path_join(init_from, "model.safetensors")))
            return fail("out of memory");
        init_from = init_file;
    }

    /* --eval-only without --config: the configuration the run directory holding the weights
     * was trained with (its config.ini), else the defaults */
    const char *config_what = "--config";
    if (eval_only && !config) {
        const char *slash = strrchr(init_from, '/'); /* a run directory's is joined above */
        int dlen = slash ? (int)(slash - init_from) : 1;
        const char *dir = slash ? init_from : ".";
        char *p = malloc((size_t)dlen + sizeof "/config.ini");
        if (!p) return fail("out of memory");
        sprintf(p, "%.*s/config.ini", dlen, dir);
        if (access(p, R_OK) == 0) {
            config_file = p;
            config = config_file;
            config_what = "the run's own, as no --config was given";
        } else {
            free(p);
        }
    }

    /* --config NAME: a path, or the name of a shipped configuration (adapt_find_file); a
     * NAME without .ini that is no file stands for NAME.ini, looked up the same way */
    static const char *const config_dirs[] = {"", "experiments/configs", NULL};
    if (config && !config_file) {
        struct stat cb;
        if (!ends_with(config, ".ini") && stat(config, &cb) != 0) {
            char *with_ini = malloc(strlen(config) + sizeof ".ini");
            if (!with_ini) return fail("out of memory");
            sprintf(with_ini, "%s.ini", config);
            if (adapt_find_file(with_ini, "configuration file", config_dirs, &config_file) ==
                    ADAPT_OK &&
                stat(config_file, &cb) != 0) { /* an explicit path is not looked up */
                free(config_file);
                config_file = NULL;
            }
            free(with_ini);
        }
        if (!config_file &&
            adapt_find_file(config, "configuration file", config_dirs, &config_file))
            return fail(adapt_error_message());
        config = config_file;
    }

    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    if (config && adapt_config_load(&cfg, config)) return fail(adapt_error_message());
    for (int i = 0; i < nsets; i++)
        if (adapt_config_set(&cfg, sets[i])) return fail(adapt_error_message());
    if (device) { /* --device NAME is --set run.device=NAME */
        char set[96];
        if (snprintf(set, sizeof set, "run.device=%s", device) >= (int)sizeof set ||
            adapt_config_set(&cfg, set))
            return fail(adapt_error_message());
    }
    if (adapt_config_check(&cfg)) return fail(adapt_error_message());

    /* --out is used as given; the default comes from the configuration */
    char default_out[ADAPT_CONFIG_PATH_MAX + 8];
    const char *out_dir = out;
    if (!out_dir) {
        if (adapt_config_out_dir(&cfg, default_out, sizeof default_out))
            return fail(adapt_error_message());
        out_dir = default_out;
    }

    if (dry) {
        printf("# adapt-sim %s: resolved configuration%s%s\n", PACKAGE_VERSION,
               config ? " of " : "", config ? config : "");
        if (adapt_config_print(&cfg, stdout, ADAPT_CONFIG_PRINT_HELP))
            return fail(adapt_error_message());
        const char *ds = adapt_config_enum_str(&cfg, "data", "dataset");
        int classes = cfg.model.classes ? cfg.model.classes : adapt_dataset_classes_of(ds);
        struct adapt_graph *g;
        if (adapt_graph_load(&g, adapt_config_model(&cfg), classes, cfg.model.args))
            return fail(adapt_error_message());
        printf("\n");
        adapt_graph_print(g, stdout);
        struct adapt_net *net = adapt_net_from_graph(g);
        if (!net) {
            adapt_graph_free(g);
            return fail(adapt_error_message());
        }
        /* the policy against the model (a per-unit list must name every unit) */
        struct adapt_policy *pol = NULL;
        enum adapt_status pst = adapt_net_finalize(net, 1); /* buffers for one sample */
        if (pst == ADAPT_OK) pst = adapt_policy_alloc(&pol, &cfg, net, (uint64_t)cfg.run.seed);
        if (pst == ADAPT_OK && pol->gamp) { /* graph propagation: the resolved layers */
            printf("\n");
            adapt_policy_print_layers(pol, stdout);
        }
        adapt_policy_free(pol);
        adapt_net_free(net);
        if (pst != ADAPT_OK) {
            adapt_graph_free(g);
            return fail(adapt_error_message());
        }
        char dev[256];
        int ngpu = adapt_cuda_device_count(dev, sizeof dev);
        printf("\noutput directory: %s\nCUDA: %d device(s): %s\n", out_dir, ngpu, dev);
        /* the data set and the training set-up, and the time estimate, with the description
         * resolved above */
        struct adapt_train_opts o = {
            .out_dir = out_dir, .init_from = init_from, .quiet = 1, .graph = g};
        enum adapt_status st = adapt_train_check(&cfg, &o, estimate);
        adapt_graph_free(g);
        if (st == ADAPT_ENOENT) {
            printf("data:   not available: %s\n", adapt_error_message());
            fprintf(stderr, "adapt-train: dry run: the data set is missing (see 'data:' above)\n");
            return 1;
        }
        if (st != ADAPT_OK) return fail(adapt_error_message());
        return 0;
    }

    if (eval_only)
        printf("configuration: %s (%s)\n", config ? config : "the defaults",
               config ? config_what : "no --config, and no config.ini beside the weights");
    struct adapt_train_opts o = {out_dir, resume, force, init_from, eval_only, eval_json, quiet,
                                 NULL, allow_plugins, n_allow_plugins};
    enum adapt_status st = adapt_train_run(&cfg, &o);
    if (st != ADAPT_OK) {
        fprintf(stderr, "adapt-train: %s\n", adapt_error_message());
        return st == ADAPT_EINTERRUPTED ? 130 : 1;
    }
    return 0;
}
