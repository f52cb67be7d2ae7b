/* src/net/layers/xent.c: softmax cross-entropy over rows of logits, mirroring
 * torch.nn.functional.cross_entropy (reduction "mean", no weights, no label
 * smoothing): loss_i = logsumexp(z_i) - z_i[label_i], computed as
 * max + log(sum exp(z - max)) so no exponent overflows, with the sum and the
 * logarithm in double. d(mean loss)/dz_ij = (softmax_ij - [j == label_i]) / n.
 * "correct" counts rows whose first arg-max (torch.argmax picks the first of
 * equal maxima) equals the label. */
#include <math.h>

#include "src/net/layers/layers_impl.h"

/* The first index of z's largest value (c >= 1), the value in *m. */
static int arg_max(const float *z, int c, float *m)
{
    int am = 0;
    *m = z[0];
    for (int j = 1; j < c; j++)
        if (z[j] > *m) {
            *m = z[j];
            am = j;
        }
    return am;
}

double adapt_softmax_xent(const float *logits, const int *labels, int n, int c, float *dlogits,
                          int *correct)
{
    ADAPT_ASSERT(n > 0 && c > 0);
    double loss = 0.0;
    int ok = 0;
    const float inv_n = 1.0f / (float)n;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * c;
        const int y = labels[i];
        ADAPT_ASSERT(y >= 0 && y < c);
        float m;
        ok += arg_max(z, c, &m) == y;
        double se = 0.0;
        if (dlogits) {
            float *d = dlogits + (size_t)i * c;
            for (int j = 0; j < c; j++) {
                d[j] = expf(z[j] - m);
                se += d[j];
            }
            const float inv = (float)(1.0 / se);
            for (int j = 0; j < c; j++) d[j] = d[j] * inv * inv_n;
            d[y] -= inv_n;
        } else {
            for (int j = 0; j < c; j++) se += expf(z[j] - m);
        }
        loss += (double)m + log(se) - (double)z[y];
    }
    if (correct) *correct = ok;
    return loss / n;
}

/* The cross-entropy of p = softmax(z) taken as logits (torch: F.cross_entropy(F.softmax(z, 1),
 * y), LeNet-5's loss in the published AdaPT code): loss_i = logsumexp(p_i) - p_i[y_i], with
 * p_i in [0, 1] so no shift is needed. Gradient: g = d(mean loss)/dp = (softmax(p) -
 * onehot) / n, then through the first softmax dz_j = p_j (g_j - sum_k g_k p_k). The arg-max
 * is z's (the same as p's, first of equal maxima). */
double adapt_softmax2_xent(const float *logits, const int *labels, int n, int c, float *dlogits,
                           int *correct)
{
    ADAPT_ASSERT(n > 0 && c > 0);
    double loss = 0.0;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * c;
        const int y = labels[i];
        ADAPT_ASSERT(y >= 0 && y < c);
        float mf;
        ok += arg_max(z, c, &mf) == y;
        const double m = mf;
        double se = 0.0, se2 = 0.0;
        for (int j = 0; j < c; j++) se += exp((double)z[j] - m);
        for (int j = 0; j < c; j++) se2 += exp(exp((double)z[j] - m) / se);
        loss += log(se2) - exp((double)z[y] - m) / se;
        if (dlogits) {
            float *d = dlogits + (size_t)i * c;
            double gp = 0.0;
            for (int j = 0; j < c; j++) {
                double p = exp((double)z[j] - m) / se;
                double g = (exp(p) / se2 - (j == y)) / n;
                gp += g * p;
            }
            for (int j = 0; j < c; j++) {
                double p = exp((double)z[j] - m) / se;
                double g = (exp(p) / se2 - (j == y)) / n;
                d[j] = (float)(p * (g - gp));
            }
        }
    }
    if (correct) *correct = ok;
    return loss / n;
}
