/* src/net/layers/fc.c: the fully connected core shared by linear.c and by
 * convolutions whose kernel covers the whole (unpadded) input, mirroring
 * torch.nn.functional.linear: y = x W^T + b with W (out, in). One OpenBLAS
 * GEMM per product, called from serial code. */
#include <cblas.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

ADAPT_HOT_CLONES double adapt_sum_f32(const float *x, size_t n)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < 16; v++) acc[v] += x[i + v];
    double s = 0.0;
    for (int v = 0; v < 16; v++) s += acc[v];
    for (; i < n; i++) s += x[i];
    return s;
}

void adapt_fc_forward(int n, int in, int out, const float *x, const float *w, const float *b,
                      float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f, y,
                out);
    if (!b) return;
    for (int i = 0; i < n; i++) {
        float *yi = y + (size_t)i * out;
        for (int j = 0; j < out; j++) yi[j] += b[j];
    }
}

void adapt_fc_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                       float *dw, float *db, float *dx, int acc)
{
    /* dW (out, in) += dy^T (out, n) x (n, in) */
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                    dw, in);
    if (db) {
        for (int j = 0; j < out; j++) {
            double s = 0.0;
            for (int i = 0; i < n; i++) s += dy[(size_t)i * out + j];
            db[j] += (float)s;
        }
    }
    /* dx (n, in) = dy (n, out) W (out, in) */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    acc ? 1.0f : 0.0f, dx, in);
}
