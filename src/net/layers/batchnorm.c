/* src/net/layers/batchnorm.c: batch normalisation over (N, H, W) per channel,
 * mirroring torch.nn.BatchNorm2d (affine, track_running_stats).
 *
 * Training (ex->training = 1): mean and biased variance of the batch
 * normalise, y = (x - mean) / sqrt(var + eps) * gamma + beta; the running
 * statistics move as running = (1 - momentum) running + momentum stat, with
 * the unbiased variance (var * M / (M - 1), M = N*H*W) for running_var, and
 * *counter (num_batches_tracked) grows by one. mean and 1/sqrt(var + eps) are
 * kept in l->saved (2C floats) for backward. Evaluation uses the running
 * statistics (read through param->use like every other parameter).
 *
 * Statistics take one pass over the data: per (sample, channel) plane, 16
 * float partial sums of x - s and (x - s)^2 with s the channel's first element
 * (shifting removes the cancellation of E[x^2] - E[x]^2 when |mean| >> std),
 * combined across planes in double. Work is parallel over channels, and
 * every reduction runs in a fixed order, so results do not depend on the
 * thread count. The normalisation of a channel follows its statistics while
 * its planes are still in cache.
 *
 * Backward (training), with xhat = (x - mean) * invstd:
 *   dbeta += sum dy, dgamma += sum dy xhat,
 *   dx = gamma * invstd * (dy - sum dy / M - xhat * sum(dy xhat) / M);
 * in evaluation mode dx = gamma * invstd_running * dy.
 *
 * Parameters: weight = gamma (role WEIGHT), bias = beta (role BIAS), both
 * with fan_in 0; running_mean, running_var (role BUFFER, no gradient). The
 * constructor points l->counter at an int64 inside the layer; a network may
 * rebind it. adapt_layer_reset_defaults() sets gamma 1, beta 0, mean 0,
 * var 1, counter 0 (PyTorch's initial values) once value.data is bound.
 * elementwise = one normalisation per element (per sample C*H*W). */
#include <math.h>
#include <stdlib.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

struct adapt_bn {
    struct adapt_layer base;
    float eps, momentum;
    int64_t num_batches_tracked; /* l->counter points here unless rebound */
};

enum { BN_GAMMA = 0, BN_BETA, BN_MEAN, BN_VAR };

/* sum (x - s) and sum (x - s)^2 over one plane */
ADAPT_HOT_CLONES static void plane_moments(const float *x, size_t n, float s, double *s1,
                                           double *s2)
{
    float a1[16] = {0}, a2[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < 16; v++) {
            float d = x[i + v] - s;
            a1[v] += d;
            a2[v] += d * d;
        }
    double t1 = 0.0, t2 = 0.0;
    for (int v = 0; v < 16; v++) {
        t1 += a1[v];
        t2 += a2[v];
    }
    for (; i < n; i++) {
        double d = (double)x[i] - s;
        t1 += d;
        t2 += d * d;
    }
    *s1 += t1;
    *s2 += t2;
}

/* sum dy and sum dy (x - m) over one plane */
ADAPT_HOT_CLONES static void plane_dmoments(const float *dy, const float *x, size_t n, float m,
                                            double *s1, double *s2)
{
    float a1[16] = {0}, a2[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < 16; v++) {
            a1[v] += dy[i + v];
            a2[v] += dy[i + v] * (x[i + v] - m);
        }
    double t1 = 0.0, t2 = 0.0;
    for (int v = 0; v < 16; v++) {
        t1 += a1[v];
        t2 += a2[v];
    }
    for (; i < n; i++) {
        t1 += dy[i];
        t2 += (double)dy[i] * ((double)x[i] - m);
    }
    *s1 += t1;
    *s2 += t2;
}

/* y = a x + b */
ADAPT_HOT_CLONES static void plane_affine(const float *x, float *y, size_t n, float a, float b)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * a + b;
}

/* dx (=|+=) a dy + b x + c */
ADAPT_HOT_CLONES static void plane_affine2(const float *dy, const float *x, float *dx, size_t n,
                                           float a, float b, float c, int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * a + (x[i] * b + c);
    else
        for (size_t i = 0; i < n; i++) dx[i] = dy[i] * a + (x[i] * b + c);
}

static void bn_forward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                       float *y)
{
    struct adapt_bn *bn = (struct adapt_bn *)l;
    const int C = l->in_dim[0][0], n = ex->n;
    const size_t hw = (size_t)l->in_dim[0][1] * l->in_dim[0][2];
    const size_t cs = (size_t)C * hw; /* sample stride */
    const float *gamma = adapt_param_in_use(&l->param[BN_GAMMA]);
    const float *beta = adapt_param_in_use(&l->param[BN_BETA]);
    const float *xs = x[0];
    const int par = (size_t)n * cs >= ADAPT_PAR_MIN;
    (void)par; /* unused without OpenMP */

    if (!ex->training) {
        const float *rm = adapt_param_in_use(&l->param[BN_MEAN]);
        const float *rv = adapt_param_in_use(&l->param[BN_VAR]);
        const long planes = (long)n * C;
#pragma omp parallel for if (par) schedule(static)
        for (long q = 0; q < planes; q++) {
            int c = (int)(q % C);
            float a = gamma[c] / sqrtf(rv[c] + bn->eps);
            plane_affine(xs + q * hw, y + q * hw, hw, a, beta[c] - rm[c] * a);
        }
        return;
    }

    const double M = (double)n * (double)hw;
    /* PyTorch refuses to train with one value per channel (unbiased variance undefined) */
    ADAPT_ASSERT(M > 1.0);
    float *mean = l->saved, *invstd = l->saved + C;
    float *run_mean = l->param[BN_MEAN].value.data, *run_var = l->param[BN_VAR].value.data;
    const float mom = bn->momentum;
    ADAPT_ASSERT(l->saved && run_mean && run_var);
#pragma omp parallel for if (par) schedule(static)
    for (int c = 0; c < C; c++) {
        const float s = xs[(size_t)c * hw];
        double s1 = 0.0, s2 = 0.0;
        for (int j = 0; j < n; j++) plane_moments(xs + j * cs + c * hw, hw, s, &s1, &s2);
        double d = s1 / M;
        double var = s2 / M - d * d;
        if (var < 0.0) var = 0.0;
        double mu = s + d;
        double is = 1.0 / sqrt(var + (double)bn->eps);
        mean[c] = (float)mu;
        invstd[c] = (float)is;
        run_mean[c] = (1.0f - mom) * run_mean[c] + mom * (float)mu;
        run_var[c] = (1.0f - mom) * run_var[c] + mom * (float)(var * M / (M - 1.0));
        float a = gamma[c] * (float)is;
        float b = beta[c] - (float)mu * a;
        for (int j = 0; j < n; j++)
            plane_affine(xs + j * cs + c * hw, y + j * cs + c * hw, hw, a, b);
    }
    if (l->counter) ++*l->counter;
}

static void bn_backward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                        const float *y, const float *dy, float *const *dx, unsigned acc)
{
    struct adapt_bn *bn = (struct adapt_bn *)l;
    const int C = l->in_dim[0][0], n = ex->n;
    const size_t hw = (size_t)l->in_dim[0][1] * l->in_dim[0][2];
    const size_t cs = (size_t)C * hw;
    const float *gamma = adapt_param_in_use(&l->param[BN_GAMMA]);
    float *dgamma = l->param[BN_GAMMA].grad.data, *dbeta = l->param[BN_BETA].grad.data;
    const float *xs = x[0];
    float *d = dx[0];
    const int a = acc & 1u;
    const double M = (double)n * (double)hw;
    const float *mean, *invstd;
    if (ex->training) {
        mean = l->saved;
        invstd = l->saved + C;
    } else {
        mean = adapt_param_in_use(&l->param[BN_MEAN]);
        invstd = NULL; /* from running_var below */
    }
    const float *rv = ex->training ? NULL : adapt_param_in_use(&l->param[BN_VAR]);
#pragma omp parallel for if ((size_t)n * cs >= ADAPT_PAR_MIN) schedule(static)
    for (int c = 0; c < C; c++) {
        const float m = mean[c];
        const double is = invstd ? (double)invstd[c] : 1.0 / sqrt((double)rv[c] + bn->eps);
        double s1 = 0.0, s2 = 0.0;
        for (int j = 0; j < n; j++)
            plane_dmoments(dy + j * cs + c * hw, xs + j * cs + c * hw, hw, m, &s1, &s2);
        if (dbeta) dbeta[c] += (float)s1;
        if (dgamma) dgamma[c] += (float)(s2 * is);
        if (!d) continue;
        double A = (double)gamma[c] * is, B = 0.0, K = 0.0;
        if (ex->training) {
            B = -A * is * is * s2 / M;
            K = -A * s1 / M - B * m;
        }
        for (int j = 0; j < n; j++)
            plane_affine2(dy + j * cs + c * hw, xs + j * cs + c * hw, d + j * cs + c * hw, hw,
                          (float)A, (float)B, (float)K, a);
    }
}

static size_t bn_saved(const struct adapt_layer *l, int n) { return 2 * (size_t)l->in_dim[0][0]; }

const struct adapt_layer_ops adapt_batchnorm2d_ops = {
    "batchnorm2d", bn_forward, bn_backward, NULL, bn_saved, NULL,
};

void adapt_batchnorm2d_reset(struct adapt_layer *l)
{
    const int C = l->in_dim[0][0];
    static const float init[4] = {1.0f, 0.0f, 0.0f, 1.0f}; /* gamma, beta, mean, var */
    for (int p = 0; p < 4; p++) {
        float *v = l->param[p].value.data;
        ADAPT_ASSERT(v != NULL);
        for (int c = 0; c < C; c++) v[c] = init[p];
    }
    if (l->counter) *l->counter = 0;
}

struct adapt_layer *adapt_batchnorm2d_create(const char *name, const int in_chw[3], float eps,
                                             float momentum)
{
    struct adapt_bn *bn = calloc(1, sizeof *bn);
    if (!bn) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a batchnorm2d layer", name ? name : "bn");
        return NULL;
    }
    struct adapt_layer *l = &bn->base;
    if (adapt_layer_setup(l, &adapt_batchnorm2d_ops, name, 1, in_chw) != ADAPT_OK) goto free_layer;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: eps %g must be > 0 and momentum %g in [0, 1]", name,
                    (double)eps, (double)momentum);
        goto free_layer;
    }
    bn->eps = l->eps = eps;
    bn->momentum = l->momentum = momentum;
    int c = in_chw[0];
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 1, &c, 0);
    adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &c, 0);
    adapt_layer_param_add(l, "running_mean", ADAPT_PARAM_BUFFER, 1, &c, 0);
    adapt_layer_param_add(l, "running_var", ADAPT_PARAM_BUFFER, 1, &c, 0);
    l->counter = &bn->num_batches_tracked;
    l->elementwise = (int64_t)adapt_layer_in_numel(l, 0);
    return l;
free_layer:
    free(bn);
    return NULL;
}
