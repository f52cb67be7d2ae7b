/* tests/bench_layers.c: per-layer forward and forward+backward time of the
 * CPU layer kinds at the shapes of LeNet-5, AlexNet-CIFAR and ResNet-20
 * (doc/models.md), batch 128 by default. Not a test: built on demand with
 * `make tests/bench_layers`.
 *
 *   tests/bench_layers [lenet|alexnet|resnet|mobilenet|vgg ...] [-n batch] [-t seconds] [-c]
 *
 * -c times by process CPU time (meaningful with OMP_NUM_THREADS=1 on a
 * shared host); otherwise wall time, discarding samples during which other
 * processes used the CPU.
 * Prints one line per layer: median milliseconds of forward alone and of
 * forward + backward (training mode, input gradient requested except for a
 * model's first layer), over repeats lasting about -t seconds each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "src/net/layer.h"
#include "tests/testutil_net.h"

enum kind { CONV, LIN, RELU, TANH, MAXP, AVGP, BN, ADD, DWCONV };

struct spec {
    const char *label;
    enum kind kind;
    int c, h, w;
    int out, k, s, p, bias; /* conv/linear/pool parameters */
    int no_dx;              /* first layer of its model */
    int count;              /* occurrences in the model (for the total) */
};

static const struct spec lenet[] = {
    {"conv1 1x32x32->6 k5", CONV, 1, 32, 32, 6, 5, 1, 0, 1, 1, 1},
    {"tanh 6x28x28", TANH, 6, 28, 28, 0, 0, 0, 0, 0, 0, 1},
    {"avgpool 6x28x28", AVGP, 6, 28, 28, 0, 2, 2, 0, 0, 0, 1},
    {"conv2 6x14x14->16 k5", CONV, 6, 14, 14, 16, 5, 1, 0, 1, 0, 1},
    {"tanh 16x10x10", TANH, 16, 10, 10, 0, 0, 0, 0, 0, 0, 1},
    {"avgpool 16x10x10", AVGP, 16, 10, 10, 0, 2, 2, 0, 0, 0, 1},
    {"conv3 16x5x5->120 k5", CONV, 16, 5, 5, 120, 5, 1, 0, 1, 0, 1},
    {"tanh 120", TANH, 120, 1, 1, 0, 0, 0, 0, 0, 0, 1},
    {"fc 120->84", LIN, 120, 1, 1, 84, 0, 0, 0, 1, 0, 1},
    {"tanh 84", TANH, 84, 1, 1, 0, 0, 0, 0, 0, 0, 1},
    {"fc 84->10", LIN, 84, 1, 1, 10, 0, 0, 0, 1, 0, 1},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

static const struct spec alexnet[] = {
    {"conv1 3x32x32->64 k11 s4 p5", CONV, 3, 32, 32, 64, 11, 4, 5, 1, 1, 1},
    {"relu 64x8x8", RELU, 64, 8, 8, 0, 0, 0, 0, 0, 0, 1},
    {"maxpool 64x8x8", MAXP, 64, 8, 8, 0, 2, 2, 0, 0, 0, 1},
    {"conv2 64x4x4->192 k5 p2", CONV, 64, 4, 4, 192, 5, 1, 2, 1, 0, 1},
    {"relu 192x4x4", RELU, 192, 4, 4, 0, 0, 0, 0, 0, 0, 1},
    {"maxpool 192x4x4", MAXP, 192, 4, 4, 0, 2, 2, 0, 0, 0, 1},
    {"conv3 192x2x2->384 k3 p1", CONV, 192, 2, 2, 384, 3, 1, 1, 1, 0, 1},
    {"relu 384x2x2", RELU, 384, 2, 2, 0, 0, 0, 0, 0, 0, 1},
    {"conv4 384x2x2->256 k3 p1", CONV, 384, 2, 2, 256, 3, 1, 1, 1, 0, 1},
    {"relu 256x2x2", RELU, 256, 2, 2, 0, 0, 0, 0, 0, 0, 2},
    {"conv5 256x2x2->256 k3 p1", CONV, 256, 2, 2, 256, 3, 1, 1, 1, 0, 1},
    {"maxpool 256x2x2", MAXP, 256, 2, 2, 0, 2, 2, 0, 0, 0, 1},
    {"fc 256->100", LIN, 256, 1, 1, 100, 0, 0, 0, 1, 0, 1},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

static const struct spec resnet[] = {
    {"conv 3x32x32->16 k3 p1", CONV, 3, 32, 32, 16, 3, 1, 1, 0, 1, 1},
    {"conv 16x32x32->16 k3 p1", CONV, 16, 32, 32, 16, 3, 1, 1, 0, 0, 6},
    {"conv 16x32x32->32 k3 s2 p1", CONV, 16, 32, 32, 32, 3, 2, 1, 0, 0, 1},
    {"conv 16x32x32->32 k1 s2", CONV, 16, 32, 32, 32, 1, 2, 0, 0, 0, 1},
    {"conv 32x16x16->32 k3 p1", CONV, 32, 16, 16, 32, 3, 1, 1, 0, 0, 5},
    {"conv 32x16x16->64 k3 s2 p1", CONV, 32, 16, 16, 64, 3, 2, 1, 0, 0, 1},
    {"conv 32x16x16->64 k1 s2", CONV, 32, 16, 16, 64, 1, 2, 0, 0, 0, 1},
    {"conv 64x8x8->64 k3 p1", CONV, 64, 8, 8, 64, 3, 1, 1, 0, 0, 5},
    {"bn 16x32x32", BN, 16, 32, 32, 0, 0, 0, 0, 0, 0, 7},
    {"bn 32x16x16", BN, 32, 16, 16, 0, 0, 0, 0, 0, 0, 7},
    {"bn 64x8x8", BN, 64, 8, 8, 0, 0, 0, 0, 0, 0, 7},
    {"relu 16x32x32", RELU, 16, 32, 32, 0, 0, 0, 0, 0, 0, 7},
    {"relu 32x16x16", RELU, 32, 16, 16, 0, 0, 0, 0, 0, 0, 6},
    {"relu 64x8x8", RELU, 64, 8, 8, 0, 0, 0, 0, 0, 0, 6},
    {"add 16x32x32", ADD, 16, 32, 32, 0, 0, 0, 0, 0, 0, 3},
    {"add 32x16x16", ADD, 32, 16, 16, 0, 0, 0, 0, 0, 0, 3},
    {"add 64x8x8", ADD, 64, 8, 8, 0, 0, 0, 0, 0, 0, 3},
    {"gap 64x8x8", AVGP, 64, 8, 8, 0, 0, 0, 0, 0, 0, 1},
    {"fc 64->10", LIN, 64, 1, 1, 10, 0, 0, 0, 1, 0, 1},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

/* MobileNet-v2 (CIFAR): its depthwise 3x3 convolutions (groups = channels, no bias) */
static const struct spec mobilenet[] = {
    {"dw 32x32x32 k3 p1", DWCONV, 32, 32, 32, 32, 3, 1, 1, 0, 0, 1},
    {"dw 96x32x32 k3 p1", DWCONV, 96, 32, 32, 96, 3, 1, 1, 0, 0, 1},
    {"dw 144x32x32 k3 p1", DWCONV, 144, 32, 32, 144, 3, 1, 1, 0, 0, 1},
    {"dw 144x32x32 k3 s2 p1", DWCONV, 144, 32, 32, 144, 3, 2, 1, 0, 0, 1},
    {"dw 192x16x16 k3 p1", DWCONV, 192, 16, 16, 192, 3, 1, 1, 0, 0, 2},
    {"dw 192x16x16 k3 s2 p1", DWCONV, 192, 16, 16, 192, 3, 2, 1, 0, 0, 1},
    {"dw 384x8x8 k3 p1", DWCONV, 384, 8, 8, 384, 3, 1, 1, 0, 0, 4},
    {"dw 576x8x8 k3 p1", DWCONV, 576, 8, 8, 576, 3, 1, 1, 0, 0, 2},
    {"dw 576x8x8 k3 s2 p1", DWCONV, 576, 8, 8, 576, 3, 2, 1, 0, 0, 1},
    {"dw 960x4x4 k3 p1", DWCONV, 960, 4, 4, 960, 3, 1, 1, 0, 0, 3},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

/* VGG-11 (CIFAR, batch norm): its 3x3 convolutions (with bias) and batch norms */
static const struct spec vgg11[] = {
    {"conv 3x32x32->64 k3 p1", CONV, 3, 32, 32, 64, 3, 1, 1, 1, 1, 1},
    {"conv 64x16x16->128 k3 p1", CONV, 64, 16, 16, 128, 3, 1, 1, 1, 0, 1},
    {"conv 128x8x8->256 k3 p1", CONV, 128, 8, 8, 256, 3, 1, 1, 1, 0, 1},
    {"conv 256x8x8->256 k3 p1", CONV, 256, 8, 8, 256, 3, 1, 1, 1, 0, 1},
    {"conv 256x4x4->512 k3 p1", CONV, 256, 4, 4, 512, 3, 1, 1, 1, 0, 1},
    {"conv 512x4x4->512 k3 p1", CONV, 512, 4, 4, 512, 3, 1, 1, 1, 0, 1},
    {"conv 512x2x2->512 k3 p1", CONV, 512, 2, 2, 512, 3, 1, 1, 1, 0, 2},
    {"bn 64x32x32", BN, 64, 32, 32, 0, 0, 0, 0, 0, 0, 1},
    {"bn 128x16x16", BN, 128, 16, 16, 0, 0, 0, 0, 0, 0, 1},
    {"bn 256x8x8", BN, 256, 8, 8, 0, 0, 0, 0, 0, 0, 2},
    {"bn 512x4x4", BN, 512, 4, 4, 0, 0, 0, 0, 0, 0, 2},
    {"bn 512x2x2", BN, 512, 2, 2, 0, 0, 0, 0, 0, 0, 2},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

/* -c: time by this process's CPU time instead of wall time (with one thread
 * this is the work done, whatever else the host runs) */
static int use_cpu_clock;

static double now(void)
{
    struct timespec t;
    clock_gettime(use_cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* CPU seconds used by every process (from /proc/stat) and by this one: a
 * sample during which other processes used more than 10% of a core is
 * discarded (the host is shared), as in shared/bench/torch_train_step.py. */
static double sys_busy(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f) return 0.0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) != 8)
        v[0] = 0;
    fclose(f);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + 1e-6 * r.ru_utime.tv_usec + (double)r.ru_stime.tv_sec +
           1e-6 * r.ru_stime.tv_usec;
}

static int dirty_samples;

/* median over 5 clean samples (at most 30 tried; the fastest samples when
 * fewer are clean) of the mean time of one call, in ms */
static double time_ms(void (*f)(struct tu_layer *, int), struct tu_layer *t, int no_dx, double sec)
{
    for (int i = 0; i < 2; i++) f(t, no_dx);
    double t0 = now();
    f(t, no_dx);
    double one = now() - t0;
    int it = (int)(sec / (one > 1e-6 ? one : 1e-6)) + 1;
    double clean[5], all[30];
    int nc = 0, na = 0;
    while (nc < 5 && na < 30) {
        double b0 = sys_busy(), s0 = self_cpu();
        t0 = now();
        for (int i = 0; i < it; i++) f(t, no_dx);
        double wall = now() - t0;
        double foreign = ((sys_busy() - b0) - (self_cpu() - s0)) / wall;
        all[na++] = wall / it * 1e3;
        if (foreign <= 0.10 || use_cpu_clock)
            clean[nc++] = wall / it * 1e3;
        else
            dirty_samples++;
    }
    if (nc < 5) {
        qsort(all, (size_t)na, sizeof all[0], cmp);
        return all[0];
    }
    qsort(clean, 5, sizeof clean[0], cmp);
    return clean[2];
}

static void fwd(struct tu_layer *t, int no_dx) { tu_layer_forward(t); }

static void fwdbwd(struct tu_layer *t, int no_dx)
{
    tu_layer_forward(t);
    tu_layer_backward_sel(t, no_dx ? 0u : ~0u, 0);
}

static struct adapt_layer *make(const struct spec *s)
{
    int chw[3] = {s->c, s->h, s->w};
    switch (s->kind) {
    case CONV: return adapt_conv2d_create("conv", chw, s->out, s->k, s->s, s->p, s->bias);
    case DWCONV: return adapt_gconv2d_create("dw", chw, s->c, s->k, s->s, s->p, s->c, 1, s->bias);
    case LIN: return adapt_linear_create("fc", chw, s->out, s->bias);
    case RELU: return adapt_relu_create("relu", chw);
    case TANH: return adapt_tanh_create("tanh", chw);
    case MAXP: return adapt_maxpool2d_create("pool", chw, s->k, s->s);
    case AVGP: return adapt_avgpool2d_create("pool", chw, s->k, s->s);
    case BN: return adapt_batchnorm2d_create("bn", chw, 1e-5f, 0.1f);
    case ADD: return adapt_add_create("add", chw);
    }
    return NULL;
}

static void run(const char *model, const struct spec *sp, int n, double sec)
{
    printf("# %s, batch %d\n", model, n);
    double tot_f = 0.0, tot_fb = 0.0;
    for (; sp->label; sp++) {
        struct tu_layer t;
        struct adapt_layer *l = make(sp);
        if (!l) {
            fprintf(stderr, "bench_layers: %s\n", adapt_error_message());
            exit(1);
        }
        tu_layer_bind(&t, l, n, 1);
        for (int i = 0; i < l->nin; i++)
            tu_fill_uniform(t.x[i], tu_layer_in_len(&t, i), 1 + i, -1.0f, 1.0f);
        tu_fill_uniform(t.dy, tu_layer_out_len(&t), 3, -1.0f, 1.0f);
        for (int p = 0; p < l->nparam; p++)
            tu_fill_uniform(l->param[p].value.data, l->param[p].value.numel, 4 + p, 0.5f, 1.0f);
        double f = time_ms(fwd, &t, sp->no_dx, sec);
        double fb = time_ms(fwdbwd, &t, sp->no_dx, sec);
        printf("%-30s x%d  fwd %8.3f  fwd+bwd %8.3f ms\n", sp->label, sp->count, f, fb);
        tot_f += sp->count * f;
        tot_fb += sp->count * fb;
        tu_layer_release(&t);
    }
    printf("%-30s     fwd %8.3f  fwd+bwd %8.3f ms (sum over the model's layers; %d samples "
           "discarded for foreign CPU use)\n",
           "total", tot_f, tot_fb, dirty_samples);
    dirty_samples = 0;
}

int main(int argc, char **argv)
{
    int n = 128;
    double sec = 0.1;
    int any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            sec = atof(argv[++i]);
        else if (!strcmp(argv[i], "-c"))
            use_cpu_clock = 1;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-t")) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "-c")) continue;
        any = 1;
        if (!strcmp(argv[i], "lenet")) run("lenet5", lenet, n, sec);
        else if (!strcmp(argv[i], "alexnet")) run("alexnet_cifar", alexnet, n, sec);
        else if (!strcmp(argv[i], "resnet")) run("resnet20", resnet, n, sec);
        else if (!strcmp(argv[i], "mobilenet")) run("mobilenetv2 (depthwise)", mobilenet, n, sec);
        else if (!strcmp(argv[i], "vgg")) run("vgg11 (convolutions, batch norm)", vgg11, n, sec);
        else {
            fprintf(stderr, "bench_layers: unknown model '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!any) {
        run("lenet5", lenet, n, sec);
        run("alexnet_cifar", alexnet, n, sec);
        run("resnet20", resnet, n, sec);
    }
    return 0;
}
