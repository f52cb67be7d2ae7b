/* src/net/cuda/conv_linear.cu: the GPU engine's convolutions and linear layers: cuDNN with
 * float32 multiply-adds (the algorithms timed once at the batch capacity and re-checked at
 * smaller batches), or im2col and cuBLAS without cuDNN; in fp16/bf16 on tensor cores for the
 * units a policy puts in half precision (adapt_cuda_net_half). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/cuda/engine.h"

namespace acu_net
{

#if ADAPT_HAVE_CUDNN
/* From cuDNN's heuristic ranking for the descriptors as they are (cudnnGet*Algorithm_v7), the
 * first algorithm with float32 math whose workspace fits in cap bytes. */
template <typename Perf, typename Algo>
int pick_fitting(const Perf *perf, int got, size_t cap, Algo *algo)
{
    for (int i = 0; i < got; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
            perf[i].memory <= cap) {
            *algo = perf[i].algo;
            return 1;
        }
    return 0;
}

/* The algorithms for a batch of n. cudnnFind* timed them at n_max; an algorithm that is
 * fastest there may not take a smaller batch, or may need more workspace for it (cuDNN then
 * fails the call with CUDNN_STATUS_BAD_PARAM), so at any other n each one is kept only when
 * cuDNN reports a workspace need for it at n within the engine's workspace, and is otherwise
 * replaced by cuDNN's own choice for n within that workspace. */
enum adapt_status conv_algos_for(struct adapt_cuda_net *d, struct dlayer *dl, int n)
{
    const struct adapt_layer *l = dl->l;
    dl->fwd = dl->fwd_max;
    dl->bwd_data = dl->bwd_data_max;
    dl->bwd_filter = dl->bwd_filter_max;
    if (n == d->n_max) return ADAPT_OK;
    size_t need = 0, cap = d->ws_bytes;
    int got = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(d->dnn, dl->xd, dl->wd, dl->cd, dl->yd, dl->fwd,
                                                &need) != CUDNN_STATUS_SUCCESS || need > cap) {
        cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(d->dnn, dl->xd, dl->wd, dl->cd, dl->yd,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp),
            "forward algorithm");
        if (!pick_fitting(fp, got, cap, &dl->fwd))
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: cuDNN has no float32 forward algorithm "
                               "for a batch of %d in %zu bytes", l->name, n, cap);
    }
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(d->dnn, dl->wd, dl->yd, dl->cd, dl->xd,
                                                     dl->bwd_data, &need) != CUDNN_STATUS_SUCCESS ||
        need > cap) {
        cudnnConvolutionBwdDataAlgoPerf_t bp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(d->dnn, dl->wd, dl->yd, dl->cd, dl->xd,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                        bp),
            "backward-data algorithm");
        if (!pick_fitting(bp, got, cap, &dl->bwd_data))
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: cuDNN has no float32 backward-data "
                               "algorithm for a batch of %d in %zu bytes", l->name, n, cap);
    }
    if (cudnnGetConvolutionBackwardFilterWorkspaceSize(d->dnn, dl->xd, dl->yd, dl->cd, dl->wd,
                                                       dl->bwd_filter, &need) !=
            CUDNN_STATUS_SUCCESS ||
        need > cap) {
        cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(d->dnn, dl->xd, dl->yd, dl->cd, dl->wd,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                          &got, wp),
            "backward-filter algorithm");
        if (!pick_fitting(wp, got, cap, &dl->bwd_filter))
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: cuDNN has no float32 backward-filter "
                               "algorithm for a batch of %d in %zu bytes", l->name, n, cap);
    }
    return ADAPT_OK;
}

/* The tensor descriptors and algorithms for a batch of n (d == NULL: the descriptors only, as
 * conv_setup needs them before any algorithm is known). */
enum adapt_status conv_describe(struct adapt_cuda_net *d, struct dlayer *dl, int n)
{
    const struct adapt_layer *l = dl->l;
    if (dl->desc_n == n) return ADAPT_OK;
    DNN(cudnnSetTensor4dDescriptor(dl->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, l->in_dim[0][0],
                                   l->in_dim[0][1], l->in_dim[0][2]),
        "input descriptor");
    DNN(cudnnSetTensor4dDescriptor(dl->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, l->out_dim[0],
                                   l->out_dim[1], l->out_dim[2]),
        "output descriptor");
    dl->desc_n = 0;
    if (d) {
        enum adapt_status st = conv_algos_for(d, dl, n);
        if (st != ADAPT_OK) return st;
    }
    dl->desc_n = n;
    return ADAPT_OK;
}

/* From cudnnFind*'s results, fastest first: the first that ran with float32 math (no TF32);
 * the workspace grows to what it needs. */
template <typename Perf, typename Algo>
enum adapt_status pick_fma(const Perf *perf, int got, const struct adapt_layer *l,
                           const char *direction, Algo *algo, size_t *ws_bytes)
{
    for (int i = 0; i < got; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].mathType != CUDNN_FMA_MATH) continue;
        *algo = perf[i].algo;
        if (perf[i].memory > *ws_bytes) *ws_bytes = perf[i].memory;
        return ADAPT_OK;
    }
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: cuDNN has no float32 %s algorithm", l->name,
                       direction);
}

enum adapt_status conv_setup(struct adapt_cuda_net *d, struct dlayer *dl, size_t *ws_bytes)
{
    const struct adapt_layer *l = dl->l;
    int g = conv_groups(l), dil = conv_dil(l);
    DNN(cudnnCreateTensorDescriptor(&dl->xd), "descriptor");
    DNN(cudnnCreateTensorDescriptor(&dl->yd), "descriptor");
    DNN(cudnnCreateFilterDescriptor(&dl->wd), "descriptor");
    DNN(cudnnCreateConvolutionDescriptor(&dl->cd), "descriptor");
    dl->desc_n = 0;
    DNN(cudnnSetFilter4dDescriptor(dl->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, l->out_dim[0],
                                   l->in_dim[0][0] / g, l->k, l->k),
        "filter descriptor");
    DNN(cudnnSetConvolution2dDescriptor(dl->cd, l->pad, l->pad, l->stride, l->stride, dil, dil,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "convolution descriptor");
    DNN(cudnnSetConvolutionGroupCount(dl->cd, g), "group count");
    DNN(cudnnSetConvolutionMathType(dl->cd, CUDNN_FMA_MATH), "math type");
    enum adapt_status st = conv_describe(NULL, dl, d->n_max);
    if (st != ADAPT_OK) return st;
    /* the fastest algorithm of each direction that has float32 math, timed at n_max on
     * scratch the size of the activations (cudnnFind* allocates its own workspace); or, with
     * ADAPT_CUDNN_ALGO=heuristic in the environment, cuDNN's heuristic ranking
     * (cudnnGet*Algorithm_v7), which runs nothing: the same algorithms from run to run, and
     * no timing runs for compute-sanitizer to report on (cudnnFind* times its candidates on
     * buffers it never fills) */
    const char *how = getenv("ADAPT_CUDNN_ALGO");
    int heuristic = how && !strcmp(how, "heuristic");
    if (how && *how && !heuristic && strcmp(how, "find"))
        return ADAPT_ERROR(ADAPT_EINVAL, "ADAPT_CUDNN_ALGO=%s: expected find or heuristic", how);
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (heuristic)
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(d->dnn, dl->xd, dl->wd, dl->cd, dl->yd,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp),
            "forward algorithm");
    else
        DNN(cudnnFindConvolutionForwardAlgorithm(d->dnn, dl->xd, dl->wd, dl->cd, dl->yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp),
            "find forward algorithm");
    if ((st = pick_fma(fp, got, l, "forward", &dl->fwd, ws_bytes))) return st;
    cudnnConvolutionBwdDataAlgoPerf_t bp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (heuristic)
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(d->dnn, dl->wd, dl->yd, dl->cd, dl->xd,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                        bp),
            "backward-data algorithm");
    else
        DNN(cudnnFindConvolutionBackwardDataAlgorithm(d->dnn, dl->wd, dl->yd, dl->cd, dl->xd,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                      bp),
            "find backward-data algorithm");
    if ((st = pick_fma(bp, got, l, "backward-data", &dl->bwd_data, ws_bytes))) return st;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (heuristic)
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                d->dnn, dl->xd, dl->yd, dl->cd, dl->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                &got, wp),
            "backward-filter algorithm");
    else
        DNN(cudnnFindConvolutionBackwardFilterAlgorithm(d->dnn, dl->xd, dl->yd, dl->cd, dl->wd,
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &got, wp),
            "find backward-filter algorithm");
    if ((st = pick_fma(wp, got, l, "backward-filter", &dl->bwd_filter, ws_bytes))) return st;
    dl->fwd_max = dl->fwd;
    dl->bwd_data_max = dl->bwd_data;
    dl->bwd_filter_max = dl->bwd_filter;
    return ADAPT_OK;
}
#endif

/* ---- forward and backward of one node ---- */

/* ---- conv and linear in half precision (adapt_cuda_net_half) ----
 *
 * The half copies live in d->hws: the weights (cout x K per group, K = cin/g k k), then the
 * output gradient and the lowered input (or, for linear, the input). A convolution is lowered
 * for the whole batch at once (acu_im2col_half: rows ci k k, columns n Ho Wo), so each group is
 * one GEMM per direction with the batch in its long dimension: the output comes out as
 * (cout, n Ho Wo) and is swapped to (n, cout, Ho Wo), the output gradient is swapped the other
 * way on its way to half. Products of two half values are exact in float32 and cublasGemmEx
 * (CUBLAS_COMPUTE_32F) accumulates them in float32 into float32 results, so the values are the
 * float32 path's up to the order of the sums, given operands in the half format. */

cudaDataType_t half_type(int half)
{
    return half == ACU_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* start of each half copy in d->hws (2-byte elements, 256-byte aligned) */
struct half_bufs {
    void *w, *dy, *x;
};

size_t half_align(size_t elems)
{
    return (elems * 2 + 255) / 256 * 256;
}

/* bytes of half copies and floats of scratch a unit needs at batch n */
void half_needs(const struct adapt_layer *l, int kind, int n, size_t *hbytes, size_t *floats)
{
    size_t wn = l->param[0].value.numel, out = adapt_layer_out_numel(l) * (size_t)n;
    if (kind == K_LINEAR) {
        *hbytes = half_align(wn) + half_align(out) + half_align(adapt_layer_in_numel(l, 0) * n);
        *floats = 0;
        return;
    }
    size_t col = (size_t)l->in_dim[0][0] * l->k * l->k * l->out_dim[1] * l->out_dim[2] * n;
    *hbytes = half_align(wn) + half_align(out) + half_align(col);
    *floats = col > out ? col : out;
}

/* the element `i` half values past b */
const void *hat(const void *b, size_t i)
{
    return (const char *)b + 2 * i;
}

struct half_bufs half_carve(struct adapt_cuda_net *d, const struct adapt_layer *l, int n)
{
    size_t wn = l->param[0].value.numel, out = adapt_layer_out_numel(l) * (size_t)n;
    char *b = (char *)d->hws;
    struct half_bufs h = {b, b + half_align(wn), b + half_align(wn) + half_align(out)};
    return h;
}

#define GEMM_EX(tA, tB, m, nn, k, A, lda, B, ldb, beta, C, ldc, what)                              \
    BLAS(cublasGemmEx(d->blas, tA, tB, m, nn, k, &one, A, ht, lda, B, ht, ldb, beta, C,            \
                      CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),                   \
         what)

/* A half-precision convolution's shapes, with its weights and its batch's lowered input
 * already in the half copies (both directions start so). */
struct half_conv {
    int g, cin, cout, P, cog, K, nP;
    struct half_bufs h;
    cudaDataType_t ht;
};

struct half_conv half_conv_start(struct adapt_cuda_net *d, struct dlayer *dl, const float *x, int n)
{
    const struct adapt_layer *l = dl->l;
    struct half_conv c;
    c.g = conv_groups(l), c.cin = l->in_dim[0][0], c.cout = l->out_dim[0];
    c.P = l->out_dim[1] * l->out_dim[2];
    c.cog = c.cout / c.g, c.K = c.cin / c.g * l->k * l->k, c.nP = n * c.P;
    c.h = half_carve(d, l, n);
    c.ht = half_type(dl->half);
    acu_swap(d->puse[dl->pidx[0]], c.h.w, dl->half, l->param[0].value.numel, 1, 1, d->s);
    acu_im2col_half(x, c.h.x, dl->half, n, c.cin, l->in_dim[0][1], l->in_dim[0][2], l->k,
                    l->stride, l->pad, conv_dil(l), l->out_dim[1], l->out_dim[2], d->s);
    return c;
}

enum adapt_status conv_half_forward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                    float *y, int n)
{
    const struct adapt_layer *l = dl->l;
    struct half_conv c = half_conv_start(d, dl, x, n);
    cudaDataType_t ht = c.ht;
    const float one = 1.0f, zero = 0.0f;
    /* Y_g (cog x nP) = W_g (cog x K) col_g (K x nP): column-major Y_g^T = col_g^T W_g^T */
    for (int gi = 0; gi < c.g; gi++)
        GEMM_EX(CUBLAS_OP_N, CUBLAS_OP_N, c.nP, c.cog, c.K, hat(c.h.x, (size_t)gi * c.K * c.nP),
                c.nP, hat(c.h.w, (size_t)gi * c.cog * c.K), c.K, &zero,
                d->fws + (size_t)gi * c.cog * c.nP, c.nP, "conv forward (half)");
    acu_swap(d->fws, y, ACU_FLOAT, c.cout, n, c.P, d->s); /* (cout, n P) -> (n, cout, P) */
    if (has_bias(l)) acu_bias_add(y, d->puse[dl->pidx[1]], n, c.cout, c.P, d->s);
    return ADAPT_OK;
}

enum adapt_status conv_half_backward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                     const float *dy, float *dx, int acc, int n)
{
    const struct adapt_layer *l = dl->l;
    struct half_conv c = half_conv_start(d, dl, x, n);
    cudaDataType_t ht = c.ht;
    const float one = 1.0f, zero = 0.0f;
    float *dw = d->pgrad[dl->pidx[0]];
    acu_swap(dy, c.h.dy, dl->half, n, c.cout, c.P, d->s); /* (n, cout, P) -> (cout, n P) */
    for (int gi = 0; gi < c.g; gi++) {
        const void *colg = hat(c.h.x, (size_t)gi * c.K * c.nP);
        const void *dyg = hat(c.h.dy, (size_t)gi * c.cog * c.nP);
        /* dW_g (cog x K) += dY_g (cog x nP) col_g^T: column-major dW_g^T += col_g^T^T dY_g^T */
        GEMM_EX(CUBLAS_OP_T, CUBLAS_OP_N, c.K, c.cog, c.nP, colg, c.nP, dyg, c.nP, &one,
                dw + (size_t)gi * c.cog * c.K, c.K, "conv weight gradient (half)");
        /* dcol_g (K x nP) = W_g^T dY_g: column-major dcol_g^T = dY_g^T W_g */
        if (dx)
            GEMM_EX(CUBLAS_OP_N, CUBLAS_OP_T, c.nP, c.K, c.cog, dyg, c.nP,
                    hat(c.h.w, (size_t)gi * c.cog * c.K), c.K, &zero,
                    d->fws + (size_t)gi * c.K * c.nP, c.nP, "conv data gradient (half)");
    }
    if (dx) {
        if (!acc) acu_zero(dx, adapt_layer_in_numel(l, 0) * (size_t)n, d->s);
        acu_col2im_batch(d->fws, dx, n, c.cin, l->in_dim[0][1], l->in_dim[0][2], l->k, l->stride,
                         l->pad, conv_dil(l), l->out_dim[1], l->out_dim[2], d->s);
    }
    if (has_bias(l)) acu_bias_grad(dy, d->pgrad[dl->pidx[1]], n, c.cout, c.P, d->s);
    return ADAPT_OK;
}

enum adapt_status conv_forward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                               float *y, int n)
{
    const struct adapt_layer *l = dl->l;
    const float *w = d->puse[dl->pidx[0]];
    if (dl->half) return conv_half_forward(d, dl, x, y, n);
#if ADAPT_HAVE_CUDNN
    enum adapt_status st = conv_describe(d, dl, n);
    if (st != ADAPT_OK) return st;
    const float one = 1.0f, zero = 0.0f;
    DNN(cudnnConvolutionForward(d->dnn, &one, dl->xd, x, dl->wd, w, dl->cd, dl->fwd, d->ws,
                                d->ws_bytes, &zero, dl->yd, y),
        "convolution forward");
#else
    int g = conv_groups(l), cin = l->in_dim[0][0], cout = l->out_dim[0];
    int cig = cin / g, cog = cout / g, kk = l->k * l->k, P = l->out_dim[1] * l->out_dim[2];
    size_t xs = adapt_layer_in_numel(l, 0), ys = adapt_layer_out_numel(l);
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < n; i++) {
        acu_im2col(x + (size_t)i * xs, d->ws, cin, l->in_dim[0][1], l->in_dim[0][2], l->k,
                   l->stride, l->pad, conv_dil(l), l->out_dim[1], l->out_dim[2], d->s);
        /* y_g (cog x P, row-major) = W_g (cog x cig*kk) col_g (cig*kk x P): column-major
         * y_g^T (P x cog) = col_g^T (P x cig*kk) W_g^T */
        for (int gi = 0; gi < g; gi++)
            BLAS(cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, P, cog, cig * kk, &one,
                             d->ws + (size_t)gi * cig * kk * P, P, w + (size_t)gi * cog * cig * kk,
                             cig * kk, &zero, y + (size_t)i * ys + (size_t)gi * cog * P, P),
                 "conv forward sgemm");
    }
#endif
    if (has_bias(l))
        acu_bias_add(y, d->puse[dl->pidx[1]], n, l->out_dim[0], l->out_dim[1] * l->out_dim[2],
                     d->s);
    return ADAPT_OK;
}

enum adapt_status conv_backward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                const float *dy, float *dx, int acc, int n)
{
    const struct adapt_layer *l = dl->l;
    const float *w = d->puse[dl->pidx[0]];
    float *dw = d->pgrad[dl->pidx[0]];
    const float one = 1.0f, zero = 0.0f;
    if (dl->half) return conv_half_backward(d, dl, x, dy, dx, acc, n);
#if ADAPT_HAVE_CUDNN
    enum adapt_status st = conv_describe(d, dl, n);
    if (st != ADAPT_OK) return st;
    DNN(cudnnConvolutionBackwardFilter(d->dnn, &one, dl->xd, x, dl->yd, dy, dl->cd, dl->bwd_filter,
                                       d->ws, d->ws_bytes, &one, dl->wd, dw),
        "convolution backward filter");
    /* an input gradient that adds to another goes through scratch and one add: not every
     * cuDNN algorithm honours beta = 1 */
    if (dx) {
        DNN(cudnnConvolutionBackwardData(d->dnn, &one, dl->wd, w, dl->yd, dy, dl->cd, dl->bwd_data,
                                         d->ws, d->ws_bytes, &zero, dl->xd, acc ? d->dx_tmp : dx),
            "convolution backward data");
        if (acc) acu_copy(d->dx_tmp, dx, adapt_layer_in_numel(l, 0) * (size_t)n, 1, d->s);
    }
#else
    int g = conv_groups(l), cin = l->in_dim[0][0], cout = l->out_dim[0];
    int cig = cin / g, cog = cout / g, kk = l->k * l->k, P = l->out_dim[1] * l->out_dim[2];
    size_t xs = adapt_layer_in_numel(l, 0), ys = adapt_layer_out_numel(l);
    if (dx && !acc) acu_zero(dx, xs * (size_t)n, d->s);
    for (int i = 0; i < n; i++) {
        acu_im2col(x + (size_t)i * xs, d->ws, cin, l->in_dim[0][1], l->in_dim[0][2], l->k,
                   l->stride, l->pad, conv_dil(l), l->out_dim[1], l->out_dim[2], d->s);
        for (int gi = 0; gi < g; gi++) {
            const float *dyg = dy + (size_t)i * ys + (size_t)gi * cog * P;
            /* dW_g (cog x cig*kk) += dy_g (cog x P) col_g^T: column-major
             * dW_g^T (cig*kk x cog) += col_g^T^T ... = col_g (as P x cig*kk col-major)^T dy_g^T */
            BLAS(cublasSgemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, cig * kk, cog, P, &one,
                             d->ws + (size_t)gi * cig * kk * P, P, dyg, P, &one,
                             dw + (size_t)gi * cog * cig * kk, cig * kk),
                 "conv weight-gradient sgemm");
        }
        if (dx) {
            /* dcol_g (cig*kk x P) = W_g^T dy_g: column-major dcol_g^T (P x cig*kk) =
             * dy_g^T (P x cog) W_g (cog x cig*kk) */
            for (int gi = 0; gi < g; gi++)
                BLAS(cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_T, P, cig * kk, cog, &one,
                                 dy + (size_t)i * ys + (size_t)gi * cog * P, P,
                                 w + (size_t)gi * cog * cig * kk, cig * kk, &zero,
                                 d->ws + (size_t)gi * cig * kk * P, P),
                     "conv data-gradient sgemm");
            acu_col2im(d->ws, dx + (size_t)i * xs, cin, l->in_dim[0][1], l->in_dim[0][2], l->k,
                       l->stride, l->pad, conv_dil(l), l->out_dim[1], l->out_dim[2], d->s);
        }
    }
#endif
    if (has_bias(l))
        acu_bias_grad(dy, d->pgrad[dl->pidx[1]], n, l->out_dim[0], l->out_dim[1] * l->out_dim[2],
                      d->s);
    return ADAPT_OK;
}

enum adapt_status linear_forward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                 float *y, int n)
{
    const struct adapt_layer *l = dl->l;
    int in = (int)adapt_layer_in_numel(l, 0), out = l->out_dim[0];
    const float one = 1.0f, zero = 0.0f;
    /* y (n x out, row-major) = x (n x in) W^T: column-major y^T (out x n) = W (in x out)^T x^T */
    if (dl->half) {
        struct half_bufs h = half_carve(d, l, n);
        cudaDataType_t ht = half_type(dl->half);
        acu_swap(d->puse[dl->pidx[0]], h.w, dl->half, (size_t)out * in, 1, 1, d->s);
        acu_swap(x, h.x, dl->half, (size_t)n * in, 1, 1, d->s);
        GEMM_EX(CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, h.w, in, h.x, in, &zero, y, out,
                "linear forward (half)");
    } else {
        BLAS(cublasSgemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one,
                         d->puse[dl->pidx[0]], in, x, in, &zero, y, out),
             "linear forward sgemm");
    }
    if (has_bias(l)) acu_bias_add(y, d->puse[dl->pidx[1]], n, out, 1, d->s);
    return ADAPT_OK;
}

enum adapt_status linear_backward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                  const float *dy, float *dx, int acc, int n)
{
    const struct adapt_layer *l = dl->l;
    int in = (int)adapt_layer_in_numel(l, 0), out = l->out_dim[0];
    const float one = 1.0f, zero = 0.0f;
    float *dw = d->pgrad[dl->pidx[0]];
    /* dW (out x in) += dy^T x: column-major dW^T (in x out) += x^T (in x n) dy (n x out);
     * dx (n x in) = dy W: column-major dx^T (in x n) = W^T-as-(in x out) dy^T (out x n) */
    if (dl->half) {
        struct half_bufs h = half_carve(d, l, n);
        cudaDataType_t ht = half_type(dl->half);
        acu_swap(d->puse[dl->pidx[0]], h.w, dl->half, (size_t)out * in, 1, 1, d->s);
        acu_swap(x, h.x, dl->half, (size_t)n * in, 1, 1, d->s);
        acu_swap(dy, h.dy, dl->half, (size_t)n * out, 1, 1, d->s);
        GEMM_EX(CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, h.x, in, h.dy, out, &one, dw, in,
                "linear weight gradient (half)");
        if (dx)
            GEMM_EX(CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, h.w, in, h.dy, out, acc ? &one : &zero,
                    dx, in, "linear data gradient (half)");
    } else {
        BLAS(cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out,
                         &one, dw, in),
             "linear weight-gradient sgemm");
        if (dx)
            BLAS(cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one,
                             d->puse[dl->pidx[0]], in, dy, out, acc ? &one : &zero, dx, in),
                 "linear data-gradient sgemm");
    }
    if (has_bias(l)) acu_bias_grad(dy, d->pgrad[dl->pidx[1]], n, out, 1, d->s);
    return ADAPT_OK;
}

#undef GEMM_EX


} // namespace acu_net
