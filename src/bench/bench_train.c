/* src/bench/bench_train.c: adapt-bench train, training throughput in images/s.
 *
 * One step = forward, softmax cross-entropy, backward, SGD (momentum 0.9)
 * update, on synthetic batches of the model's input shape (a pool of four
 * pre-generated batches is cycled so data generation is not timed), the same
 * method as the project's PyTorch anchor script. After warm-up steps, each
 * sample times enough steps to last --min-sample-s; the table shows the
 * median, minimum and maximum images/s over --repeats samples.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/rng.h"
#include "src/bench/bench.h"
#include "src/net.h"
#include "src/optim.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: adapt-bench train [--model M[,M...]] [--batch B] [--classes C]\n"
               "                         [--repeats R] [--warmup W] [--min-sample-s S] [--json]\n"
               "  --model   lenet5, alexnet_cifar, alexnet_mnist, resnet20 (default: lenet5,alexnet_cifar,resnet20)\n"
               "  --batch   batch size (default 128)\n"
               "  --classes output classes (default 10)\n");
}

struct bench_result {
    double median, min, max;
    int steps_per_sample;
};

static int bench_model(const char *model, int batch, int classes, int repeats, int warmup,
                       double min_s, struct bench_result *res)
{
    struct adapt_net *net = adapt_model_build(model, classes);
    if (!net || adapt_net_finalize(net, batch) != ADAPT_OK) {
        fprintf(stderr, "adapt-bench train: %s\n", adapt_error_message());
        adapt_net_free(net);
        return -1;
    }
    adapt_net_init_params(net, 1, 0.5);
    struct adapt_sgd opt;
    if (adapt_sgd_init(&opt, net, 0.01, 0.9, 0.0, 0.0, 0) != ADAPT_OK) {
        fprintf(stderr, "adapt-bench train: %s\n", adapt_error_message());
        adapt_net_free(net);
        return -1;
    }
    size_t in = net->act_numel[0] * (size_t)batch;
    float *pool[4];
    int *labels[4];
    float *dlogits = malloc(sizeof(float) * (size_t)batch * (size_t)classes);
    struct adapt_rng r;
    adapt_rng_init(&r, 7, 99);
    for (int k = 0; k < 4; k++) {
        pool[k] = adapt_aligned_alloc(in * sizeof(float));
        labels[k] = malloc(sizeof(int) * (size_t)batch);
        for (size_t i = 0; i < in; i++) {
            /* approximately standard normal: sum of 4 uniforms, scaled */
            double s = 0;
            for (int j = 0; j < 4; j++) s += adapt_rng_uniform(&r);
            pool[k][i] = (float)((s - 2.0) * sqrt(3.0));
        }
        for (int i = 0; i < batch; i++) labels[k][i] = (int)adapt_rng_below(&r, (uint32_t)classes);
    }
    int it = 0;
#define STEP()                                                                     \
    do {                                                                           \
        const float *lg = adapt_net_forward(net, pool[it & 3], batch, 1);          \
        adapt_softmax_xent(lg, labels[it & 3], batch, classes, dlogits, NULL);     \
        adapt_net_backward(net, dlogits, batch);                                   \
        adapt_sgd_step(&opt, 1.0);                                                 \
        it++;                                                                      \
    } while (0)
    for (int w = 0; w < warmup; w++) STEP();
    double t0 = adapt_bench_now();
    STEP();
    double one = adapt_bench_now() - t0;
    int steps = (int)ceil(min_s / (one > 1e-6 ? one : 1e-6));
    if (steps < 1) steps = 1;
    double *ips = malloc(sizeof(double) * (size_t)repeats);
    for (int rep = 0; rep < repeats; rep++) {
        t0 = adapt_bench_now();
        for (int s = 0; s < steps; s++) STEP();
        double dt = adapt_bench_now() - t0;
        ips[rep] = (double)batch * steps / dt;
    }
#undef STEP
    qsort(ips, (size_t)repeats, sizeof(double), cmp_double);
    res->median = repeats % 2 ? ips[repeats / 2] : 0.5 * (ips[repeats / 2 - 1] + ips[repeats / 2]);
    res->min = ips[0];
    res->max = ips[repeats - 1];
    res->steps_per_sample = steps;
    free(ips);
    for (int k = 0; k < 4; k++) {
        adapt_aligned_free(pool[k]);
        free(labels[k]);
    }
    free(dlogits);
    adapt_sgd_free(&opt);
    adapt_net_free(net);
    return 0;
}

int adapt_bench_train(int argc, char **argv)
{
    const char *models = "lenet5,alexnet_cifar,resnet20";
    int batch = 128, classes = 10, repeats = 7, warmup = 3, json = 0;
    double min_s = 0.5;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"classes", required_argument, 0, 'c'},
                                         {"repeats", required_argument, 0, 'r'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"min-sample-s", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:b:c:r:w:s:jh", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'm': models = optarg; break;
        case 'b': batch = (int)strtol(optarg, &end, 10); break;
        case 'c': classes = (int)strtol(optarg, &end, 10); break;
        case 'r': repeats = (int)strtol(optarg, &end, 10); break;
        case 'w': warmup = (int)strtol(optarg, &end, 10); break;
        case 's': min_s = strtod(optarg, &end); break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (end && (*end || end == optarg)) {
            fprintf(stderr, "adapt-bench train: expected a number, got '%s'\n", optarg);
            return 2;
        }
    }
    if (batch < 1 || classes < 2 || repeats < 1 || warmup < 0 || !(min_s > 0)) {
        fprintf(stderr, "adapt-bench train: need --batch >= 1, --classes >= 2, --repeats >= 1, "
                        "--warmup >= 0, --min-sample-s > 0\n");
        return 2;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (!json)
        printf("%-14s %6s %8s %12s %12s %12s\n", "model", "batch", "threads", "img/s median",
               "img/s min", "img/s max");
    char *list = strdup(models);
    int rc = 0;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        struct bench_result res;
        if (bench_model(m, batch, classes, repeats, warmup, min_s, &res) != 0) {
            rc = 1;
            break;
        }
        if (json)
            printf("{\"bench\":\"train\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d,"
                   "\"img_per_s_median\":%.1f,\"img_per_s_min\":%.1f,\"img_per_s_max\":%.1f,"
                   "\"steps_per_sample\":%d,\"repeats\":%d}\n",
                   m, batch, threads, res.median, res.min, res.max, res.steps_per_sample, repeats);
        else
            printf("%-14s %6d %8d %12.1f %12.1f %12.1f\n", m, batch, threads, res.median, res.min,
                   res.max);
        fflush(stdout);
    }
    free(list);
    return rc;
}
