/* src/bench/bench_arith.c: `adapt-bench arith`: what an accumulator model changes in one
 * training step of a model, against another model on the same weights, input and output
 * gradient (arithmetic.accumulator; doc/numerics.md, "Accumulators").
 *
 * Per model and fixed-point format <WL,FL> (every unit, its error gradients rounded to it too
 * through roles.grad_output, so that all three GEMMs of every conv2d and linear unit take
 * fixed-point operands), one training forward and backward with each model of --acc; each is
 * compared with the first: the logits, the gradients every layer sends back and the parameter
 * gradients, as the count of values that differ in any bit and the largest difference relative
 * to the largest magnitude of that tensor class. With --acc exact,int(64), two independent
 * paths of the exact sums (the integer kernels and a 64-bit register) must agree in every bit.
 * Also the register overflows of each model, and the step's time. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/bench/bench.h"
#include "src/config/config.h"
#include "src/net/net.h"
#include "src/policy/policy.h"
#include "src/policy/precision.h"
#include "src/quant/gemm_int.h"

struct step_out {
    float *v;       /* logits | activation gradients | parameter gradients */
    size_t n[3];    /* values of each class */
    uint64_t ovf;   /* register overflows, every unit and GEMM */
    double seconds; /* the step (forward + backward), best of 3 */
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: adapt-bench arith [--model M[,M...]] [--format WL,FL[;WL,FL...]]\n"
               "                         [--acc MODEL[;MODEL...]] [--batch B]\n"
               "  --model   lenet5, alexnet_mnist, alexnet_cifar, resnet20 (default:\n"
               "            lenet5,alexnet_cifar,resnet20)\n"
               "  --format  fixed-point formats of every unit and its error gradients\n"
               "            (default 8,4;16,8)\n"
               "  --acc     accumulator models, compared with the first (default\n"
               "            exact;float32;int(64))\n"
               "  --batch   samples (default 16)\n");
}

static int run_step(const char *model, int wl, int fl, const char *acc, int batch,
                    struct step_out *o)
{
    memset(o, 0, sizeof *o);
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    char set[256];
    int bad = 0;
    bad |= adapt_config_set(&cfg, "policy.name=fixed") != ADAPT_OK;
    snprintf(set, sizeof set, "policy.wl=%d", wl);
    bad |= adapt_config_set(&cfg, set) != ADAPT_OK;
    snprintf(set, sizeof set, "policy.fl=%d", fl);
    bad |= adapt_config_set(&cfg, set) != ADAPT_OK;
    snprintf(set, sizeof set, "roles.grad_output=fixed(%d,%d)", wl, fl);
    bad |= adapt_config_set(&cfg, set) != ADAPT_OK;
    snprintf(set, sizeof set, "arithmetic.accumulator=%s", acc);
    bad |= adapt_config_set(&cfg, set) != ADAPT_OK;
    if (bad || adapt_config_check(&cfg) != ADAPT_OK) {
        fprintf(stderr, "adapt-bench arith: %s\n", adapt_error_message());
        return -1;
    }
    struct adapt_net *net = adapt_model_build(model, 10);
    struct adapt_policy *pol = NULL;
    if (!net || adapt_net_finalize(net, batch) || adapt_policy_alloc(&pol, &cfg, net, 1)) {
        fprintf(stderr, "adapt-bench arith: %s: %s\n", model, adapt_error_message());
        adapt_net_free(net);
        return -1;
    }
    adapt_net_init_params(net, 1, 0.5);
    adapt_precision_refresh_weights(pol->prec, 1);
    size_t nx = net->act_numel[0] * (size_t)batch, nl = (size_t)batch * 10;
    float *x = malloc(sizeof(float) * nx), *dl = malloc(sizeof(float) * nl);
    struct adapt_rng r;
    adapt_rng_init(&r, 5, 1);
    for (size_t i = 0; i < nx; i++) x[i] = 4.0f * adapt_rng_uniform(&r) - 2.0f;
    for (size_t i = 0; i < nl; i++) dl[i] = (2.0f * adapt_rng_uniform(&r) - 1.0f) / (float)batch;
    o->seconds = INFINITY;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = adapt_bench_now();
        adapt_net_forward(net, x, batch, 1);
        adapt_net_zero_grad(net);
        adapt_net_backward(net, dl, batch);
        double t = adapt_bench_now() - t0;
        if (t < o->seconds) o->seconds = t;
    }
    o->n[0] = nl;
    for (int a = 2; a < net->nact; a++) o->n[1] += (size_t)batch * net->act_numel[a];
    for (int q = 0; q < net->nparam; q++)
        if (net->param[q]->grad.data) o->n[2] += net->param[q]->grad.numel;
    o->v = malloc(sizeof(float) * (o->n[0] + o->n[1] + o->n[2]));
    float *w = o->v;
    memcpy(w, net->act[net->nact - 1], sizeof(float) * nl);
    w += nl;
    for (int a = 2; a < net->nact; a++) {
        size_t m = (size_t)batch * net->act_numel[a];
        memcpy(w, net->dact[a], sizeof(float) * m);
        w += m;
    }
    for (int q = 0; q < net->nparam; q++)
        if (net->param[q]->grad.data) {
            memcpy(w, net->param[q]->grad.data, sizeof(float) * net->param[q]->grad.numel);
            w += net->param[q]->grad.numel;
        }
    /* three steps ran: the counts of one */
    for (int u = 0; pol->prec->arith && u < pol->prec->nunits; u++)
        for (int g = 0; g < 3; g++) o->ovf += pol->prec->arith[u].overflows[g];
    o->ovf /= 3;
    free(x);
    free(dl);
    adapt_policy_free(pol);
    adapt_net_free(net);
    return 0;
}

/* values of class c that differ in any bit, and max |a - b| / max |b| */
static void compare(const struct step_out *a, const struct step_out *b, int c, size_t *diff,
                    double *rel)
{
    size_t off = 0;
    for (int k = 0; k < c; k++) off += a->n[k];
    double dmax = 0, vmax = 0;
    *diff = 0;
    for (size_t i = off; i < off + a->n[c]; i++) {
        if (memcmp(&a->v[i], &b->v[i], sizeof(float))) (*diff)++;
        double d = fabs((double)a->v[i] - b->v[i]);
        if (d > dmax || isnan(d)) dmax = d;
        if (fabs((double)b->v[i]) > vmax) vmax = fabs((double)b->v[i]);
    }
    *rel = vmax > 0 ? dmax / vmax : dmax;
}

int adapt_bench_arith(int argc, char **argv)
{
    const char *models = "lenet5,alexnet_cifar,resnet20", *formats = "8,4;16,8";
    const char *accs = "exact;float32;int(64)";
    int batch = 16;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"format", required_argument, 0, 'f'},
        {"acc", required_argument, 0, 'a'},   {"batch", required_argument, 0, 'b'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': models = optarg; break;
        case 'f': formats = optarg; break;
        case 'a': accs = optarg; break;
        case 'b': batch = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || batch < 1 || batch > 4096) {
        usage(stderr);
        return 2;
    }
    char acc[8][128];
    int na = 0;
    for (const char *s = accs; *s && na < 8;) {
        size_t n = strcspn(s, ";");
        snprintf(acc[na++], sizeof acc[0], "%.*s", (int)(n < 127 ? n : 127), s);
        s += n + (s[n] == ';');
    }
    printf("integer kernels: %s (%s)\n", adapt_gemm_isa_name(adapt_gemm_isa_best()),
           getenv("ADAPT_GEMM_ISA") && *getenv("ADAPT_GEMM_ISA") ? "ADAPT_GEMM_ISA"
                                                                 : "the best this CPU runs");
    printf("%-14s %-8s %-20s %10s %12s %12s %12s %12s %12s %12s %10s %9s\n", "model", "format",
           "accumulator", "step ms", "logits diff", "rel", "act-grad diff", "rel",
           "param-grad diff", "rel", "overflows", "vs first");
    int rc = 0;
    for (const char *m = models; *m && !rc;) {
        size_t mn = strcspn(m, ",");
        char model[64];
        snprintf(model, sizeof model, "%.*s", (int)(mn < 63 ? mn : 63), m);
        m += mn + (m[mn] == ',');
        for (const char *f = formats; *f && !rc;) {
            int wl, fl;
            size_t fn = strcspn(f, ";");
            if (sscanf(f, "%d,%d", &wl, &fl) != 2) {
                fprintf(stderr, "adapt-bench arith: --format: \"%.*s\": expected WL,FL\n", (int)fn,
                        f);
                return 2;
            }
            f += fn + (f[fn] == ';');
            struct step_out first = {0};
            for (int a = 0; a < na && !rc; a++) {
                struct step_out o;
                if (run_step(model, wl, fl, acc[a], batch, &o)) {
                    rc = 1;
                    break;
                }
                char fmt[16];
                snprintf(fmt, sizeof fmt, "<%d,%d>", wl, fl);
                printf("%-14s %-8s %-20s %10.2f", model, fmt, acc[a], 1e3 * o.seconds);
                for (int k = 0; k < 3; k++) {
                    size_t d = 0;
                    double rel = 0;
                    if (a) compare(&o, &first, k, &d, &rel);
                    if (a)
                        printf(" %12zu %12.3g", d, rel);
                    else
                        printf(" %12s %12s", "-", "-");
                }
                printf(" %10llu %8.2fx\n", (unsigned long long)o.ovf,
                       a ? o.seconds / first.seconds : 1.0);
                if (a)
                    free(o.v);
                else
                    first = o;
            }
            if (na) free(first.v);
        }
    }
    return rc;
}
