/* src/bench/bench_train.c: adapt-bench train, training throughput in images/s.
 *
 * One step = forward, softmax cross-entropy, backward, SGD (momentum 0.9)
 * update, on synthetic batches of the model's input shape (a pool of four
 * pre-generated batches is cycled so data generation is not timed), the same
 * method as the project's PyTorch anchor script. After warm-up steps, each
 * sample times enough steps to last --min-sample-s (or --steps steps); the
 * table shows the median, minimum and maximum images/s over --repeats samples.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/rng.h"
#include "src/bench/bench.h"
#include "src/cuda/device.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/config/config.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: adapt-bench train [--model M[,M...]] [--policy P[,P...]] [--batch B]\n"
        "                         [--classes C] [--repeats R] [--warmup W] [--min-sample-s S] "
        "[--json]\n"
        "                         [--steps N] [--device cpu|cuda]\n"
        "  --model   lenet5, alexnet_cifar, alexnet_mnist, resnet20 (default: "
        "lenet5,alexnet_cifar,resnet20)\n"
        "  --policy  fp32, fixed, adapt, muppet, amp with their default settings (default: fp32),\n"
        "            or POLICY+RECIPE with a [roles] recipe (fixed+fp8_hybrid_delayed);\n"
        "            several are timed alternately and compared with the first\n"
        "  --batch   batch size (default 128)\n"
        "  --classes output classes (default 10)\n"
        "  --repeats timed samples per policy (default 7, at most 64)\n"
        "  --steps   steps per sample, for a run of known length (default 0: as many as last\n"
        "            --min-sample-s, default 0.5, judged from one step)\n"
        "  --device  cpu (default) or cuda: the whole step on GPU 0 (policies fp32, fixed,\n"
        "            adapt, muppet and amp; the batch goes up from pinned memory while the\n"
        "            previous step runs)\n");
}

struct bench_result {
    double median, min, max;
    int steps_per_sample;
};

/* One model under one policy: network, optimizer, policy and the synthetic
 * batches it cycles through. */
struct bench_setup {
    struct adapt_net *net;
    struct adapt_cuda_net *dev; /* --device cuda: the step runs there */
    struct adapt_sgd opt;
    struct adapt_policy *pol;
    struct adapt_config cfg;
    float *pool[4];
    int *labels[4];
    float *dlogits;
    int batch, classes;
    long it;
    double ips[64];
};

static void setup_free(struct bench_setup *b)
{
    for (int k = 0; k < 4; k++) {
        adapt_aligned_free(b->pool[k]);
        free(b->labels[k]);
    }
    free(b->dlogits);
    adapt_policy_free(b->pol);
    adapt_cuda_net_free(b->dev);
    if (b->opt.buf) adapt_sgd_free(&b->opt);
    adapt_net_free(b->net);
}

/* --policy's NAME[+PART...] into cfg: each PART a [roles] recipe, or a SECTION.KEY=VALUE
 * assignment (fixed+policy.wl=8+policy.fl=4+arithmetic.accumulator=exact); the message set on
 * error. */
static enum adapt_status policy_config(const char *policy, struct adapt_config *cfg)
{
    char set[160];
    size_t n = strcspn(policy, "+");
    adapt_config_init(cfg);
    snprintf(set, sizeof set, "policy.name=%.*s", (int)(n < 40 ? n : 40), policy);
    enum adapt_status st = adapt_config_set(cfg, set);
    for (const char *q = policy + n; !st && *q == '+';) {
        q++;
        size_t m = strcspn(q, "+");
        if (memchr(q, '=', m))
            snprintf(set, sizeof set, "%.*s", (int)(m < 150 ? m : 150), q);
        else
            snprintf(set, sizeof set, "roles.recipe=%.*s", (int)(m < 60 ? m : 60), q);
        st = adapt_config_set(cfg, set);
        q += m;
    }
    return st ? st : adapt_config_check(cfg);
}

/* The next name of a comma-separated list whose names may hold commas inside parentheses
 * (int(16, saturate)): NUL-terminated in place; NULL at the end. */
static char *next_name(char **s)
{
    char *b = *s;
    if (!b || !*b) return NULL;
    int depth = 0;
    char *e = b;
    for (; *e && !(*e == ',' && depth == 0); e++) depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
    *s = *e ? e + 1 : e;
    *e = '\0';
    return b;
}

static int setup_init(struct bench_setup *b, const char *model, const char *policy, int batch,
                      int classes, int cuda)
{
    memset(b, 0, sizeof *b);
    b->batch = batch;
    b->classes = classes;
    b->net = adapt_model_build(model, classes);
    if (!b->net || policy_config(policy, &b->cfg) || adapt_net_finalize(b->net, batch) ||
        adapt_sgd_init(&b->opt, b->net, 0.01, 0.9, 0.0, 0.0, 0))
        return -1;
    adapt_net_init_params(b->net, 1, 0.5);
    if (adapt_policy_alloc(&b->pol, &b->cfg, b->net, 1)) return -1;
    if (b->pol->prec) adapt_precision_refresh_weights(b->pol->prec, 0);
    if (cuda && (adapt_cuda_net_create(b->net, 0, &b->dev) != ADAPT_OK ||
                 adapt_policy_use_cuda(b->pol, b->dev, 0) != ADAPT_OK))
        return -1;
    size_t in = b->net->act_numel[0] * (size_t)batch;
    b->dlogits = malloc(sizeof(float) * (size_t)batch * (size_t)classes);
    struct adapt_rng r;
    adapt_rng_init(&r, 7, 99);
    for (int k = 0; k < 4; k++) {
        b->pool[k] = adapt_aligned_alloc(in * sizeof(float));
        b->labels[k] = malloc(sizeof(int) * (size_t)batch);
        if (!b->pool[k] || !b->labels[k] || !b->dlogits) {
            ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate benchmark batches");
            return -1;
        }
        for (size_t i = 0; i < in; i++) {
            /* approximately standard normal: sum of 4 uniforms, scaled */
            double s = 0;
            for (int j = 0; j < 4; j++) s += adapt_rng_uniform(&r);
            b->pool[k][i] = (float)((s - 2.0) * sqrt(3.0));
        }
        for (int i = 0; i < batch; i++)
            b->labels[k][i] = (int)adapt_rng_below(&r, (uint32_t)classes);
    }
    return 0;
}

/* The training step of src/train/train.c: forward, loss, backward, policy step. On the GPU:
 * upload (overlapping the previous step), forward, loss, backward and SGD on the device; the
 * host waits only at the end of a timed sample (setup_sync). */
static void setup_step(struct bench_setup *b)
{
    int k = (int)(b->it & 3);
    if (b->pol->prec) b->pol->prec->iter = b->it;
    if (b->dev) {
        /* a policy that reads the step's loss (AdaPT's strategy) waits for it, as the trainer
         * does; the others' steps queue without waiting (AMP's overflow check and MuPPET's
         * epoch-end statistics wait for their own results) */
        double loss = 0.0;
        enum adapt_status st = adapt_cuda_net_upload(b->dev, b->pool[k], b->labels[k], b->batch);
        if (st == ADAPT_OK) st = adapt_cuda_net_step(b->dev, 1, 1);
        if (st == ADAPT_OK && b->pol->type->reads_loss) {
            st = adapt_cuda_net_result(b->dev, &loss, NULL);
            loss /= b->batch;
        }
        b->it++;
        if (st == ADAPT_OK) st = adapt_policy_step(b->pol, &b->opt, b->it, loss, 1, 0, NULL);
        if (st != ADAPT_OK) {
            fprintf(stderr, "adapt-bench train: %s\n", adapt_error_message());
            exit(1);
        }
        adapt_policy_clear_events(b->pol);
        return;
    }
    const float *lg = adapt_net_forward(b->net, b->pool[k], b->batch, 1);
    double loss = adapt_softmax_xent(lg, b->labels[k], b->batch, b->classes, b->dlogits, NULL);
    if (b->pol->loss_scale != 1.0)
        for (size_t i = 0; i < (size_t)b->batch * b->classes; i++)
            b->dlogits[i] *= (float)b->pol->loss_scale;
    adapt_net_backward(b->net, b->dlogits, b->batch);
    b->it++;
    enum adapt_status st = adapt_policy_step(b->pol, &b->opt, b->it, loss, 1, 0, NULL);
    ADAPT_ASSERT(st == ADAPT_OK);
    adapt_policy_clear_events(b->pol);
}

/* Waits for the device's queued steps (nothing on the CPU). */
static void setup_sync(struct bench_setup *b)
{
    if (b->dev && adapt_cuda_net_result(b->dev, NULL, NULL) != ADAPT_OK) {
        fprintf(stderr, "adapt-bench train: %s\n", adapt_error_message());
        exit(1);
    }
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Times every policy on one model, alternating policies sample by sample so
 * they see the same machine conditions. */
static int bench_model(const char *model, char **policies, int npol, int batch, int classes,
                       int repeats, int warmup, double min_s, int fixed_steps, int cuda,
                       struct bench_result *res)
{
    struct bench_setup *b = calloc((size_t)npol, sizeof *b);
    int rc = 0, steps = 1;
    if (!b) return -1;
    for (int q = 0; q < npol && rc == 0; q++) {
        if (setup_init(&b[q], model, policies[q], batch, classes, cuda) != 0) {
            fprintf(stderr, "adapt-bench train: %s\n", adapt_error_message());
            rc = -1;
        }
    }
    if (rc == 0) {
        double slowest = 0;
        for (int q = 0; q < npol; q++) {
            for (int w = 0; w < warmup; w++) setup_step(&b[q]);
            setup_sync(&b[q]);
            if (fixed_steps) continue;
            double t0 = adapt_bench_now();
            setup_step(&b[q]);
            setup_sync(&b[q]);
            double one = adapt_bench_now() - t0;
            if (one > slowest) slowest = one;
        }
        steps = fixed_steps ? fixed_steps : (int)ceil(min_s / (slowest > 1e-6 ? slowest : 1e-6));
        if (steps < 1) steps = 1;
        for (int rep = 0; rep < repeats; rep++)
            for (int q = 0; q < npol; q++) {
                double t0 = adapt_bench_now();
                for (int s = 0; s < steps; s++) setup_step(&b[q]);
                setup_sync(&b[q]);
                b[q].ips[rep] = (double)batch * steps / (adapt_bench_now() - t0);
            }
        for (int q = 0; q < npol; q++) {
            res[q].median = median_of(b[q].ips, repeats);
            res[q].min = b[q].ips[0];
            res[q].max = b[q].ips[repeats - 1];
            res[q].steps_per_sample = steps;
        }
    }
    for (int q = 0; q < npol; q++) setup_free(&b[q]);
    free(b);
    return rc;
}

int adapt_bench_train(int argc, char **argv)
{
    const char *models = "lenet5,alexnet_cifar,resnet20", *policies = "fp32", *device = "cpu";
    int batch = 128, classes = 10, repeats = 7, warmup = 3, json = 0, fixed_steps = 0;
    double min_s = 0.5;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"policy", required_argument, 0, 'p'},
                                         {"classes", required_argument, 0, 'c'},
                                         {"repeats", required_argument, 0, 'r'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"min-sample-s", required_argument, 0, 's'},
                                         {"steps", required_argument, 0, 'n'},
                                         {"json", no_argument, 0, 'j'},
                                         {"device", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:p:b:c:r:w:s:n:d:jh", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'm': models = optarg; break;
        case 'p': policies = optarg; break;
        case 'b': batch = (int)strtol(optarg, &end, 10); break;
        case 'c': classes = (int)strtol(optarg, &end, 10); break;
        case 'r': repeats = (int)strtol(optarg, &end, 10); break;
        case 'w': warmup = (int)strtol(optarg, &end, 10); break;
        case 's': min_s = strtod(optarg, &end); break;
        case 'n': fixed_steps = (int)strtol(optarg, &end, 10); break;
        case 'j': json = 1; break;
        case 'd': device = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (end && (*end || end == optarg)) {
            fprintf(stderr, "adapt-bench train: expected a number, got '%s'\n", optarg);
            return 2;
        }
    }
    if (batch < 1 || classes < 2 || repeats < 1 || repeats > 64 || warmup < 0 || !(min_s > 0) ||
        fixed_steps < 0) {
        fprintf(stderr, "adapt-bench train: need --batch >= 1, --classes >= 2, --repeats 1..64, "
                        "--warmup >= 0, --min-sample-s > 0, --steps >= 0\n");
        return 2;
    }
    int cuda = !strcmp(device, "cuda");
    if (!cuda && strcmp(device, "cpu")) {
        fprintf(stderr, "adapt-bench train: --device expects cpu or cuda, got '%s'\n", device);
        return 2;
    }
    char gpu[256] = "";
    if (cuda && (!adapt_cuda_net_built() || adapt_cuda_device_count(gpu, sizeof gpu) == 0)) {
        fprintf(stderr, "adapt-bench train: --device cuda: %s\n",
                adapt_cuda_net_built() ? gpu : "this build has no CUDA");
        return 1;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char *plist = strdup(policies), *pol[16];
    char *list = strdup(models);
    int npol = 0, rc = 0;
    if (!plist || !list) {
        fprintf(stderr, "adapt-bench train: out of memory\n");
        rc = 2;
        goto done;
    }
    /* every name is checked before anything is printed or timed */
    for (char *save = plist, *q = next_name(&save); q; q = next_name(&save)) {
        struct adapt_config cfg;
        if (npol == 16) {
            fprintf(stderr, "adapt-bench train: --policy: at most 16 policies\n");
            rc = 2;
            goto done;
        }
        if (strlen(q) > 150 || policy_config(q, &cfg) != ADAPT_OK) {
            fprintf(stderr, "adapt-bench train: --policy: %s\n", adapt_error_message());
            rc = 2;
            goto done;
        }
        if (cuda && adapt_policy_cuda_check(&cfg) != ADAPT_OK) {
            fprintf(stderr, "adapt-bench train: --device cuda: %s\n", adapt_error_message());
            rc = 2;
            goto done;
        }
        pol[npol++] = q;
    }
    for (const char *m = list; *m;) {
        size_t n = strcspn(m, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), m);
        struct adapt_graph *g = NULL;
        if (n >= sizeof name || adapt_graph_load(&g, name, 10, NULL) != ADAPT_OK) {
            fprintf(stderr, "adapt-bench train: --model: %s\n",
                    n >= sizeof name ? "model name too long" : adapt_error_message());
            rc = 2;
            goto done;
        }
        adapt_graph_free(g);
        m += n + (m[n] == ',');
    }
    if (npol == 0 || !list[0]) {
        fprintf(stderr, "adapt-bench train: --model and --policy need at least one name\n");
        rc = 2;
        goto done;
    }
    if (cuda && !json) printf("device: %s\n", gpu);
    int pw = 7; /* the policy column: as wide as the longest name (fixed+fp8_hybrid_delayed) */
    for (int q = 0; q < npol; q++)
        if ((int)strlen(pol[q]) > pw) pw = (int)strlen(pol[q]);
    if (!json)
        printf("%-14s %-*s %6s %8s %12s %12s %12s %10s\n", "model", pw, "policy", "batch",
               "threads", "img/s median", "img/s min", "img/s max", "step cost");
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        struct bench_result res[16];
        if (bench_model(m, pol, npol, batch, classes, repeats, warmup, min_s, fixed_steps, cuda,
                        res) != 0) {
            rc = 1;
            break;
        }
        for (int q = 0; q < npol; q++) {
            /* step time relative to the first policy's, medians of the same run */
            double cost = res[0].median / res[q].median;
            if (json) {
                char key[64];
                snprintf(key, sizeof key, "step_cost_vs_%s", pol[0]);
                json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:i,s:i}",
                                      "bench", "train", "device", device, "gpu", gpu, "model", m,
                                      "policy", pol[q], "batch", batch,
                                      "threads", threads, "img_per_s_median", res[q].median,
                                      "img_per_s_min", res[q].min, "img_per_s_max", res[q].max,
                                      key, cost, "steps_per_sample", res[q].steps_per_sample,
                                      "repeats", repeats);
                char *line = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
                json_decref(o);
                if (!line) {
                    fprintf(stderr, "adapt-bench train: out of memory\n");
                    rc = 1;
                    goto done;
                }
                printf("%s\n", line);
                free(line);
            }
            else
                printf("%-14s %-*s %6d %8d %12.1f %12.1f %12.1f %9.3fx\n", m, pw, pol[q],
                       batch, threads, res[q].median, res[q].min, res[q].max, cost);
        }
        fflush(stdout);
    }
done:
    free(plist);
    free(list);
    return rc;
}
