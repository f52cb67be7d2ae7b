/* src/net/cuda/net_cuda.cu: the training step on a CUDA GPU (src/net/net_cuda.h).
 *
 * Memory: one device block each for parameter values (net->param order, buffers included),
 * gradients, momentum buffers and quantized copies (made on first use), plus the activations,
 * their gradients, per-layer saved state and one workspace sized for the largest layer at the
 * batch capacity. Nothing is allocated per step.
 *
 * Streams: every kernel runs on `s`; batches go up on `up` from pinned staging buffers (two,
 * used in turn), and the step waits for its batch's event, so the next upload overlaps the
 * current step.
 *
 * Convolutions: cuDNN (legacy API) with CUDNN_FMA_MATH, i.e. float32 multiply-adds and no
 * TF32, the algorithms chosen once at the batch capacity by cudnnFind* (as PyTorch's
 * cudnn.benchmark); the workspace is the largest any chosen algorithm asks for. Without cuDNN:
 * per sample im2col (src/net/cuda/conv.cu) and a cuBLAS SGEMM per group, col2im for the
 * input gradient, as the CPU lowering in src/net/layers/conv2d.c. Linear layers: cuBLAS SGEMM
 * in CUBLAS_DEFAULT_MATH (float32). Everything else: src/net/cuda/kernels.h.
 */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#if ADAPT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/cuda/device.h"
#include "src/net/cuda/kernels.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/quant/quant_impl.h"

namespace
{

enum dkind {
    K_CONV = 0,
    K_LINEAR,
    K_ACT,
    K_MAXPOOL,
    K_AVGPOOL,
    K_BN,
    K_ADD,
    K_FLATTEN,
    K_DROPOUT,
    K_CONCAT
};

struct dlayer {
    int kind, act;
    int half; /* conv, linear: products in ACU_FP16 / ACU_BF16 on tensor cores (0: float32) */
    struct adapt_layer *l;
    int pidx[ADAPT_LAYER_MAX_PARAMS]; /* net->param index of each of the layer's parameters */
    float *saved;                     /* batch-norm: mean, invstd */
#if ADAPT_HAVE_CUDNN
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    /* the algorithms cudnnFind* picked at n_max; fwd, bwd_data and bwd_filter are those of
     * desc_n, re-checked at every other batch size (conv_describe) */
    cudnnConvolutionFwdAlgo_t fwd_max;
    cudnnConvolutionBwdDataAlgo_t bwd_data_max;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_max;
    int desc_n; /* batch size the tensor descriptors describe */
#endif
};

/* A list of tensors on the device for the one-launch reductions (acu_sumsq_list,
 * acu_normalize_acc_list): the host's pointers and counts it was made from, and its device
 * table. */
struct dlist {
    int k;
    float **x, **acc; /* acc: NULL when the list has no second pointers */
    size_t *n;
    struct acu_tensor *table; /* k + 1 entries */
    unsigned blocks;
};
/* lists kept per engine (a policy's step uses two or three, each the same every step) */
constexpr int kLists = 8;
void list_clear(struct dlist *l);

} // namespace

struct adapt_cuda_net {
    struct adapt_net *net;
    int gpu, n_max;
    char device[256];
    cudaStream_t s, up;
    cudaEvent_t ready[2], consumed[2];
    cublasHandle_t blas;
#if ADAPT_HAVE_CUDNN
    cudnnHandle_t dnn;
#endif
    float *vals, *grads, *bufs, *quants;
    size_t nvals, ngrads;
    float **pval, **pgrad, **pbuf, **puse;
    float **act, **dact;
    unsigned char *written;
    float *ws;
    size_t ws_bytes;
    float *dx_tmp; /* cuDNN: an input gradient to add into one already written */
    float *xin[2];
    int *yin[2];
    float *h_x[2];
    int *h_y[2];
    int slot, n, has_labels, pending_slot;
    double *d_stats, *h_stats;
    int step_stats; /* the last step computed the loss into h_stats (it had labels) */
    struct dlayer *L;
    long steps;
    /* quantized training (src/policy/precision.c) */
    struct adapt_cuda_hooks hooks;
    uint64_t id;   /* adapt_cuda_net_id */
    void **allocs; /* adapt_cuda_net_alloc's arrays */
    int nallocs;
    unsigned long long *counters, *h_counters; /* (3 * ncounters), on the device and pinned */
    int ncounters;
    void *qscratch; /* the rounding's scratch (reused in stream order) */
    size_t qscratch_bytes;
    double *d_sums, *h_sums; /* (2 * nsums) reductions */
    int nsums;
    unsigned long long *d_hist, *h_hist; /* (nhist) histogram counts */
    int nhist;
    uint32_t *d_keys, *h_keys; /* (2) a range's order keys, or an overflow flag */
    int nkeys;
    float loss_scale; /* d(loss)/d(logits) is multiplied by it (AMP) */
    /* half-precision units (adapt_cuda_net_half): their half copies and float32 scratch */
    void *hws;
    size_t hws_bytes;
    float *fws;
    size_t fws_bytes;
    struct dlist lists[kLists]; /* list_of's tables, replaced round-robin */
    int next_list;
};

namespace
{

enum adapt_status cu_fail(cudaError_t e, const char *what, const char *file, int line)
{
    enum adapt_status st = e == cudaErrorMemoryAllocation ? ADAPT_ENOMEM
                           : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                               ? ADAPT_EUNSUPPORTED
                               : ADAPT_EIO;
    cudaGetLastError();
    return adapt_error_at(file, line, st, "cuda: %s: %s", what, cudaGetErrorString(e));
}
#define CU(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return cu_fail(e_, what, __FILE__, __LINE__);                       \
    } while (0)
#define BLAS(call, what)                                                                           \
    do {                                                                                           \
        cublasStatus_t b_ = (call);                                                                \
        if (b_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return adapt_error_at(__FILE__, __LINE__, ADAPT_EIO, "cublas: %s: status %d", what,    \
                                  (int)b_);                                                        \
    } while (0)
#if ADAPT_HAVE_CUDNN
#define DNN(call, what)                                                                            \
    do {                                                                                           \
        cudnnStatus_t d_ = (call);                                                                 \
        if (d_ != CUDNN_STATUS_SUCCESS)                                                            \
            return adapt_error_at(__FILE__, __LINE__, ADAPT_EIO, "cudnn: %s: %s", what,            \
                                  cudnnGetErrorString(d_));                                        \
    } while (0)
#endif

int kind_of(const struct adapt_layer *l, int *act)
{
    const char *k = l->ops->kind;
    *act = -1;
    if (!strcmp(k, "conv2d")) return K_CONV;
    if (!strcmp(k, "linear")) return K_LINEAR;
    if (!strcmp(k, "relu")) return *act = ACU_RELU, K_ACT;
    if (!strcmp(k, "relu6")) return *act = ACU_RELU6, K_ACT;
    if (!strcmp(k, "tanh")) return *act = ACU_TANH, K_ACT;
    if (!strcmp(k, "sigmoid")) return *act = ACU_SIGMOID, K_ACT;
    if (!strcmp(k, "hardswish")) return *act = ACU_HARDSWISH, K_ACT;
    if (!strcmp(k, "gelu")) return *act = l->approximate ? ACU_GELU_TANH : ACU_GELU, K_ACT;
    if (!strcmp(k, "maxpool2d")) return K_MAXPOOL;
    if (!strcmp(k, "avgpool2d")) return K_AVGPOOL;
    if (!strcmp(k, "batchnorm2d")) return K_BN;
    if (!strcmp(k, "add")) return K_ADD;
    if (!strcmp(k, "flatten")) return K_FLATTEN;
    if (!strcmp(k, "dropout")) return K_DROPOUT;
    if (!strcmp(k, "concat")) return K_CONCAT;
    return -1;
}

int conv_groups(const struct adapt_layer *l)
{
    return l->groups > 0 ? l->groups : 1;
}
int conv_dil(const struct adapt_layer *l)
{
    return l->dilation > 0 ? l->dilation : 1;
}
int has_bias(const struct adapt_layer *l)
{
    return l->nparam > 1;
}

#if !ADAPT_HAVE_CUDNN
/* floats of scratch the im2col lowering needs for one sample: the column matrix */
size_t im2col_floats(const struct adapt_layer *l)
{
    int g = conv_groups(l);
    return (size_t)(l->in_dim[0][0] / g) * g * l->k * l->k * l->out_dim[1] * l->out_dim[2];
}
#endif

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
     * scratch the size of the activations (cudnnFind* allocates its own workspace) */
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DNN(cudnnFindConvolutionForwardAlgorithm(d->dnn, dl->xd, dl->wd, dl->cd, dl->yd,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp),
        "find forward algorithm");
    if ((st = pick_fma(fp, got, l, "forward", &dl->fwd, ws_bytes))) return st;
    cudnnConvolutionBwdDataAlgoPerf_t bp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    DNN(cudnnFindConvolutionBackwardDataAlgorithm(d->dnn, dl->wd, dl->yd, dl->cd, dl->xd,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, bp),
        "find backward-data algorithm");
    if ((st = pick_fma(bp, got, l, "backward-data", &dl->bwd_data, ws_bytes))) return st;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DNN(cudnnFindConvolutionBackwardFilterAlgorithm(d->dnn, dl->xd, dl->yd, dl->cd, dl->wd,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                    wp),
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

uint64_t dropout_stream(const struct adapt_layer *l, int64_t iter)
{
    return (uint64_t)ADAPT_STREAM_DROPOUT + ((uint64_t)(l->node & 0xffff) << 8) +
           ((uint64_t)iter << 24);
}

enum adapt_status node_compute(struct adapt_cuda_net *d, int i, const float *const *xs, int n,
                               int training);

enum adapt_status node_forward(struct adapt_cuda_net *d, int i, int n, int training)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int k = 0; k < l->nin; k++) xs[k] = d->act[nd->in[k]];
    if (d->hooks.in) {
        enum adapt_status st = d->hooks.in(d->hooks.ctx, i, xs, n, training, 0);
        if (st != ADAPT_OK) return st;
    }
    enum adapt_status st = node_compute(d, i, xs, n, training);
    if (st == ADAPT_OK && d->hooks.out)
        st = d->hooks.out(d->hooks.ctx, i, d->act[nd->out], n, training);
    return st;
}

enum adapt_status node_compute(struct adapt_cuda_net *d, int i, const float *const *xs, int n,
                               int training)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *x = xs[0];
    float *y = d->act[nd->out];
    size_t cnt = adapt_layer_out_numel(l) * (size_t)n;
    int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    switch (dl->kind) {
    case K_CONV: return conv_forward(d, dl, x, y, n);
    case K_LINEAR: return linear_forward(d, dl, x, y, n);
    case K_ACT: acu_act_forward(dl->act, x, y, cnt, d->s); break;
    case K_MAXPOOL: acu_maxpool_forward(x, y, n, c, h, w, l->k, l->stride, l->pad, d->s); break;
    case K_AVGPOOL:
        acu_avgpool_forward(x, y, n, c, h, w, l->global ? 0 : l->k, l->stride, l->pad,
                            l->count_include_pad, d->s);
        break;
    case K_BN:
        if (training) {
            acu_bn_forward_train(x, y, d->puse[dl->pidx[0]], d->puse[dl->pidx[1]],
                                 d->pval[dl->pidx[2]], d->pval[dl->pidx[3]], dl->saved, n, c, h * w,
                                 l->eps, l->momentum, d->s);
            if (l->counter) (*l->counter)++;
        } else {
            acu_bn_forward_eval(x, y, d->puse[dl->pidx[0]], d->puse[dl->pidx[1]],
                                d->pval[dl->pidx[2]], d->pval[dl->pidx[3]], n, c, h * w, l->eps,
                                d->s);
        }
        break;
    case K_ADD: acu_add(x, xs[1], y, cnt, d->s); break;
    case K_FLATTEN: acu_copy(x, y, cnt, 0, d->s); break;
    case K_DROPOUT:
        if (training && l->p > 0.0f)
            acu_dropout_forward(x, y, cnt, l->p, net->rng_seed, dropout_stream(l, net->rng_iter),
                                d->s);
        else
            acu_copy(x, y, cnt, 0, d->s);
        break;
    case K_CONCAT:
        for (int k = 0, c0 = 0; k < l->nin; c0 += l->in_dim[k][0], k++)
            acu_concat_forward(xs[k], y, n, c0, l->in_dim[k][0], l->out_dim[0], h * w, d->s);
        break;
    default: break;
    }
    return ADAPT_OK;
}

enum adapt_status node_gradients(struct adapt_cuda_net *d, int i, const float *const *xs,
                                 float *const *dxs, const int *acc, int any_dx, int n);

enum adapt_status node_backward(struct adapt_cuda_net *d, int i, int n)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    float *dxs[ADAPT_LAYER_MAX_IN] = {NULL};
    int acc[ADAPT_LAYER_MAX_IN] = {0};
    int any_dx = 0;
    for (int k = 0; k < l->nin; k++) {
        int a = nd->in[k];
        if (a == 0) continue; /* the input needs no gradient */
        dxs[k] = d->dact[a];
        acc[k] = d->written[a];
        d->written[a] = 1;
        any_dx = 1;
    }
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int k = 0; k < l->nin; k++) xs[k] = d->act[nd->in[k]];
    enum adapt_status st = ADAPT_OK;
    /* straight-through: the gradient of a rounded input goes to the activation unchanged, but
     * the layer sees what it computed with */
    if (d->hooks.in && (st = d->hooks.in(d->hooks.ctx, i, xs, n, 1, 1))) return st;
    if (d->hooks.dout &&
        (st = d->hooks.dout(d->hooks.ctx, i, d->act[nd->out], d->dact[nd->out], n)))
        return st;
    if ((st = node_gradients(d, i, xs, dxs, acc, any_dx, n))) return st;
    if (d->hooks.grad) st = d->hooks.grad(d->hooks.ctx, i, dxs, n);
    return st;
}

enum adapt_status node_gradients(struct adapt_cuda_net *d, int i, const float *const *xs,
                                 float *const *dxs, const int *acc, int any_dx, int n)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *x = xs[0], *y = d->act[nd->out], *dy = d->dact[nd->out];
    size_t cnt = adapt_layer_out_numel(l) * (size_t)n;
    int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    switch (dl->kind) {
    case K_CONV: return conv_backward(d, dl, x, dy, dxs[0], acc[0], n);
    case K_LINEAR: return linear_backward(d, dl, x, dy, dxs[0], acc[0], n);
    default: break;
    }
    if (!any_dx && dl->kind != K_BN) return ADAPT_OK;
    switch (dl->kind) {
    case K_ACT: acu_act_backward(dl->act, x, y, dy, dxs[0], cnt, acc[0], d->s); break;
    case K_MAXPOOL:
        acu_maxpool_backward(x, y, dy, dxs[0], n, c, h, w, l->k, l->stride, l->pad, acc[0], d->s);
        break;
    case K_AVGPOOL:
        acu_avgpool_backward(dy, dxs[0], n, c, h, w, l->global ? 0 : l->k, l->stride, l->pad,
                             l->count_include_pad, acc[0], d->s);
        break;
    case K_BN:
        acu_bn_backward(x, dy, d->puse[dl->pidx[0]], dl->saved, dxs[0], d->pgrad[dl->pidx[0]],
                        d->pgrad[dl->pidx[1]], n, c, h * w, acc[0], d->s);
        break;
    case K_ADD:
        if (dxs[0]) acu_copy(dy, dxs[0], cnt, acc[0], d->s);
        if (dxs[1]) acu_copy(dy, dxs[1], cnt, acc[1], d->s);
        break;
    case K_FLATTEN: acu_copy(dy, dxs[0], cnt, acc[0], d->s); break;
    case K_DROPOUT:
        if (l->p > 0.0f)
            acu_dropout_backward(dy, dxs[0], cnt, l->p, net->rng_seed,
                                 dropout_stream(l, net->rng_iter), acc[0], d->s);
        else
            acu_copy(dy, dxs[0], cnt, acc[0], d->s);
        break;
    case K_CONCAT:
        for (int k = 0, c0 = 0; k < l->nin; c0 += l->in_dim[k][0], k++)
            acu_concat_backward(dy, dxs[k], n, c0, l->in_dim[k][0], l->out_dim[0], h * w, acc[k],
                                d->s);
        break;
    default: break;
    }
    return ADAPT_OK;
}

size_t param_numel(const struct adapt_param *p)
{
    return p->value.numel;
}

} // namespace

extern "C" int adapt_cuda_net_built(void)
{
#if ADAPT_HAVE_CUDNN
    return 2;
#else
    return 1;
#endif
}

extern "C" const char *adapt_cuda_net_device(const struct adapt_cuda_net *d)
{
    return d ? d->device : "";
}

extern "C" void adapt_cuda_net_free(struct adapt_cuda_net *d)
{
    if (!d) return;
    if (d->s) cudaStreamSynchronize(d->s);
    if (d->up) cudaStreamSynchronize(d->up);
    if (d->L) {
        for (int i = 0; i < d->net->nnodes; i++) {
            struct dlayer *dl = &d->L[i];
            (void)dl;
#if ADAPT_HAVE_CUDNN
            if (dl->kind == K_CONV) {
                if (dl->xd) cudnnDestroyTensorDescriptor(dl->xd);
                if (dl->yd) cudnnDestroyTensorDescriptor(dl->yd);
                if (dl->wd) cudnnDestroyFilterDescriptor(dl->wd);
                if (dl->cd) cudnnDestroyConvolutionDescriptor(dl->cd);
            }
#endif
            if (dl->saved) cudaFree(dl->saved);
        }
        free(d->L);
    }
    if (d->act) {
        for (int a = 0; a < d->net->nact; a++) {
            if (a > 0 && d->act[a]) cudaFree(d->act[a]);
            if (d->dact[a]) cudaFree(d->dact[a]);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (d->xin[k]) cudaFree(d->xin[k]);
        if (d->yin[k]) cudaFree(d->yin[k]);
        if (d->h_x[k]) cudaFreeHost(d->h_x[k]);
        if (d->h_y[k]) cudaFreeHost(d->h_y[k]);
        if (d->ready[k]) cudaEventDestroy(d->ready[k]);
        if (d->consumed[k]) cudaEventDestroy(d->consumed[k]);
    }
    free(d->act);
    free(d->dact);
    free(d->written);
    if (d->vals) cudaFree(d->vals);
    if (d->grads) cudaFree(d->grads);
    if (d->bufs) cudaFree(d->bufs);
    if (d->quants) cudaFree(d->quants);
    if (d->ws) cudaFree(d->ws);
    if (d->dx_tmp) cudaFree(d->dx_tmp);
    if (d->d_stats) cudaFree(d->d_stats);
    if (d->h_stats) cudaFreeHost(d->h_stats);
    for (int k = 0; k < d->nallocs; k++) cudaFree(d->allocs[k]);
    free(d->allocs);
    if (d->counters) cudaFree(d->counters);
    if (d->h_counters) cudaFreeHost(d->h_counters);
    if (d->qscratch) cudaFree(d->qscratch);
    if (d->d_sums) cudaFree(d->d_sums);
    if (d->h_sums) cudaFreeHost(d->h_sums);
    if (d->d_hist) cudaFree(d->d_hist);
    if (d->h_hist) cudaFreeHost(d->h_hist);
    if (d->d_keys) cudaFree(d->d_keys);
    if (d->h_keys) cudaFreeHost(d->h_keys);
    if (d->hws) cudaFree(d->hws);
    if (d->fws) cudaFree(d->fws);
    for (int k = 0; k < kLists; k++) list_clear(&d->lists[k]);
    free(d->pval);
    free(d->pgrad);
    free(d->pbuf);
    free(d->puse);
    if (d->blas) cublasDestroy(d->blas);
#if ADAPT_HAVE_CUDNN
    if (d->dnn) cudnnDestroy(d->dnn);
#endif
    if (d->s) cudaStreamDestroy(d->s);
    if (d->up) cudaStreamDestroy(d->up);
    free(d);
}

namespace
{

enum adapt_status create(struct adapt_net *net, int gpu, struct adapt_cuda_net *d)
{
    d->net = net;
    d->gpu = gpu;
    d->n_max = net->n_max;
    static uint64_t serial; /* engines are made one at a time (adapt_cuda_net_create) */
    d->id = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    d->loss_scale = 1.0f;
    int ndev = adapt_cuda_device_count(d->device, sizeof d->device);
    if (ndev <= 0) return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s", d->device);
    if (gpu < 0 || gpu >= ndev)
        return ADAPT_ERROR(ADAPT_EINVAL, "run.gpu = %d, but this machine has %d CUDA device%s", gpu,
                           ndev, ndev == 1 ? "" : "s");
    CU(cudaSetDevice(gpu), "cudaSetDevice");
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, gpu) == cudaSuccess)
        snprintf(d->device, sizeof d->device, "%.200s (GPU %d, sm_%d%d)", prop.name, gpu,
                 prop.major, prop.minor);
    CU(cudaStreamCreateWithFlags(&d->s, cudaStreamNonBlocking), "stream");
    CU(cudaStreamCreateWithFlags(&d->up, cudaStreamNonBlocking), "stream");
    for (int k = 0; k < 2; k++) {
        CU(cudaEventCreateWithFlags(&d->ready[k], cudaEventDisableTiming), "event");
        CU(cudaEventCreateWithFlags(&d->consumed[k], cudaEventDisableTiming), "event");
    }
    BLAS(cublasCreate(&d->blas), "cublasCreate");
    BLAS(cublasSetStream(d->blas, d->s), "cublasSetStream");
    BLAS(cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
#if ADAPT_HAVE_CUDNN
    DNN(cudnnCreate(&d->dnn), "cudnnCreate");
    DNN(cudnnSetStream(d->dnn, d->s), "cudnnSetStream");
#endif
    /* parameters */
    int np = net->nparam;
    d->pval = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->pgrad = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->pbuf = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->puse = (float **)calloc((size_t)np + 1, sizeof(float *));
    if (!d->pval || !d->pgrad || !d->pbuf || !d->puse)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the device parameter table");
    for (int p = 0; p < np; p++) {
        d->nvals += param_numel(net->param[p]);
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) d->ngrads += param_numel(net->param[p]);
    }
    CU(cudaMalloc(&d->vals, (d->nvals + 1) * sizeof(float)), "parameters");
    CU(cudaMalloc(&d->grads, (d->ngrads + 1) * sizeof(float)), "gradients");
    CU(cudaMalloc(&d->bufs, (d->ngrads + 1) * sizeof(float)), "momentum buffers");
    CU(cudaMemsetAsync(d->grads, 0, (d->ngrads + 1) * sizeof(float), d->s), "memset");
    CU(cudaMemsetAsync(d->bufs, 0, (d->ngrads + 1) * sizeof(float), d->s), "memset");
    size_t ov = 0, og = 0;
    for (int p = 0; p < np; p++) {
        d->pval[p] = d->puse[p] = d->vals + ov;
        ov += param_numel(net->param[p]);
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) {
            d->pgrad[p] = d->grads + og;
            d->pbuf[p] = d->bufs + og;
            og += param_numel(net->param[p]);
        }
    }
    /* activations */
    d->act = (float **)calloc((size_t)net->nact, sizeof(float *));
    d->dact = (float **)calloc((size_t)net->nact, sizeof(float *));
    d->written = (unsigned char *)calloc((size_t)net->nact, 1);
    d->L = (struct dlayer *)calloc((size_t)net->nnodes, sizeof(struct dlayer));
    if (!d->act || !d->dact || !d->written || !d->L)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the device network's tables");
    for (int a = 1; a < net->nact; a++) {
        size_t bytes = net->act_numel[a] * (size_t)d->n_max * sizeof(float);
        CU(cudaMalloc(&d->act[a], bytes), "activations");
        CU(cudaMalloc(&d->dact[a], bytes), "activation gradients");
    }
#if ADAPT_HAVE_CUDNN
    size_t most = 0;
    for (int a = 1; a < net->nact; a++)
        if (net->act_numel[a] > most) most = net->act_numel[a];
    CU(cudaMalloc(&d->dx_tmp, most * (size_t)d->n_max * sizeof(float)), "gradient scratch");
#endif
    size_t in_bytes = net->act_numel[0] * (size_t)d->n_max * sizeof(float);
    for (int k = 0; k < 2; k++) {
        CU(cudaMalloc(&d->xin[k], in_bytes), "input batch");
        CU(cudaMalloc(&d->yin[k], (size_t)d->n_max * sizeof(int)), "labels");
        CU(cudaHostAlloc(&d->h_x[k], in_bytes, cudaHostAllocDefault), "pinned input");
        CU(cudaHostAlloc(&d->h_y[k], (size_t)d->n_max * sizeof(int), cudaHostAllocDefault),
           "pinned labels");
    }
    d->act[0] = d->xin[0];
    CU(cudaMalloc(&d->d_stats, 2 * sizeof(double)), "loss");
    CU(cudaHostAlloc(&d->h_stats, 2 * sizeof(double), cudaHostAllocDefault), "pinned loss");
    /* layers */
    size_t ws_bytes = 0;
    for (int i = 0; i < net->nnodes; i++) {
        struct dlayer *dl = &d->L[i];
        struct adapt_layer *l = net->nodes[i].layer;
        dl->l = l;
        dl->kind = kind_of(l, &dl->act);
        if (dl->kind < 0)
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: layer kind %s has no GPU version", l->name,
                               l->ops->kind);
        for (int k = 0; k < l->nparam; k++) {
            dl->pidx[k] = -1;
            for (int p = 0; p < np; p++)
                if (net->param[p] == &l->param[k]) dl->pidx[k] = p;
            if (dl->pidx[k] < 0)
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: parameter %s not bound to the network",
                                   l->name, l->param[k].name);
        }
        if (dl->kind == K_BN)
            CU(cudaMalloc(&dl->saved, 2 * (size_t)l->in_dim[0][0] * sizeof(float)),
               "batch-norm state");
#if !ADAPT_HAVE_CUDNN
        if (dl->kind == K_CONV && im2col_floats(l) * sizeof(float) > ws_bytes)
            ws_bytes = im2col_floats(l) * sizeof(float);
#endif
    }
#if ADAPT_HAVE_CUDNN
    /* the algorithm search runs convolutions: give it real buffers (activations) */
    for (int i = 0; i < net->nnodes; i++) {
        if (d->L[i].kind != K_CONV) continue;
        enum adapt_status st = conv_setup(d, &d->L[i], &ws_bytes);
        if (st != ADAPT_OK) return st;
    }
#endif
    d->ws_bytes = ws_bytes;
    if (ws_bytes) CU(cudaMalloc(&d->ws, ws_bytes), "workspace");
    return adapt_cuda_net_push_params(d);
}

} // namespace

extern "C" enum adapt_status adapt_cuda_net_create(struct adapt_net *net, int gpu,
                                                   struct adapt_cuda_net **out)
{
    *out = NULL;
    if (!net || !net->finalized)
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_create: the network is not finalized");
    struct adapt_cuda_net *d = (struct adapt_cuda_net *)calloc(1, sizeof *d);
    if (!d) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate a device network");
    enum adapt_status st = create(net, gpu, d);
    if (st != ADAPT_OK) {
        adapt_cuda_net_free(d);
        return st;
    }
    *out = d;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_push_params(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        CU(cudaMemcpyAsync(d->pval[p], d->net->param[p]->value.data,
                           param_numel(d->net->param[p]) * sizeof(float), cudaMemcpyHostToDevice,
                           d->s),
           "parameters to the device");
    CU(cudaStreamSynchronize(d->s), "parameters to the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_pull_params(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        CU(cudaMemcpyAsync(d->net->param[p]->value.data, d->pval[p],
                           param_numel(d->net->param[p]) * sizeof(float), cudaMemcpyDeviceToHost,
                           d->s),
           "parameters from the device");
    CU(cudaStreamSynchronize(d->s), "parameters from the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_pull_grads(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        if (d->pgrad[p] && d->net->param[p]->grad.data)
            CU(cudaMemcpyAsync(d->net->param[p]->grad.data, d->pgrad[p],
                               param_numel(d->net->param[p]) * sizeof(float),
                               cudaMemcpyDeviceToHost, d->s),
               "gradients from the device");
    CU(cudaStreamSynchronize(d->s), "gradients from the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_upload(struct adapt_cuda_net *d, const float *x,
                                                   const int *labels, int n)
{
    if (n < 1 || n > d->n_max)
        return ADAPT_ERROR(ADAPT_EINVAL, "batch of %d samples; the device network holds 1..%d", n,
                           d->n_max);
    int k = d->slot ^ 1;
    /* the step that last read this slot must be done with it before it is overwritten */
    CU(cudaEventSynchronize(d->consumed[k]), "waiting for a staging buffer");
    size_t in = d->net->act_numel[0] * (size_t)n;
    memcpy(d->h_x[k], x, in * sizeof(float));
    if (labels) memcpy(d->h_y[k], labels, (size_t)n * sizeof(int));
    CU(cudaMemcpyAsync(d->xin[k], d->h_x[k], in * sizeof(float), cudaMemcpyHostToDevice, d->up),
       "batch upload");
    if (labels)
        CU(cudaMemcpyAsync(d->yin[k], d->h_y[k], (size_t)n * sizeof(int), cudaMemcpyHostToDevice,
                           d->up),
           "label upload");
    CU(cudaEventRecord(d->ready[k], d->up), "event");
    d->slot = k;
    d->n = n;
    d->has_labels = labels != NULL;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_step(struct adapt_cuda_net *d, int training,
                                                 int backward)
{
    struct adapt_net *net = d->net;
    int n = d->n, k = d->slot;
    if (n < 1) return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_step: no batch uploaded");
    CU(cudaStreamWaitEvent(d->s, d->ready[k], 0), "waiting for the batch");
    d->act[0] = d->xin[k];
    for (int i = 0; i < net->nnodes; i++) {
        enum adapt_status st = node_forward(d, i, n, training);
        if (st != ADAPT_OK) return st;
    }
    int last = net->nact - 1;
    d->step_stats = d->has_labels; /* what adapt_cuda_net_result reads of this step */
    if (d->has_labels) {
        acu_softmax_xent(d->act[last], d->yin[k], n, net->classes, backward ? d->dact[last] : NULL,
                         d->d_stats, d->s);
        if (backward && d->loss_scale != 1.0f) /* as the trainer scales the CPU's */
            acu_scale_acc(d->dact[last], NULL, (size_t)n * (size_t)net->classes, d->loss_scale,
                          d->s);
        CU(cudaMemcpyAsync(d->h_stats, d->d_stats, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                           d->s),
           "loss to the host");
    } else if (backward) {
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_step: backward needs labels");
    }
    if (backward) {
        memset(d->written, 0, (size_t)net->nact);
        d->written[last] = 1;
        for (int i = net->nnodes - 1; i >= 0; i--) {
            enum adapt_status st = node_backward(d, i, n);
            if (st != ADAPT_OK) return st;
        }
    }
    CU(cudaEventRecord(d->consumed[k], d->s), "event");
    CU(cudaGetLastError(), "kernel launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_result(struct adapt_cuda_net *d, double *loss_sum,
                                                   int *correct)
{
    CU(cudaStreamSynchronize(d->s), "step");
    /* a step without labels computed no loss: NaN and 0, never an earlier step's */
    if (loss_sum) *loss_sum = d->step_stats ? d->h_stats[0] : NAN;
    if (correct) *correct = d->step_stats ? (int)d->h_stats[1] : 0;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_sgd(struct adapt_cuda_net *d, double lr,
                                                double momentum, double l2, int nesterov,
                                                double grad_scale)
{
    struct adapt_net *net = d->net;
    for (int p = 0; p < net->nparam; p++) {
        if (!d->pgrad[p]) continue;
        acu_sgd_update(d->pval[p], d->pgrad[p], d->pbuf[p], d->pval[p], d->pval[p],
                       param_numel(net->param[p]), (float)lr, (float)momentum, (float)l2, 0.0f,
                       (float)grad_scale, nesterov, d->steps == 0, d->s);
    }
    d->steps++;
    CU(cudaGetLastError(), "sgd launch");
    return ADAPT_OK;
}

/* ---- what the precision policies build on ---- */

extern "C" void adapt_cuda_net_set_hooks(struct adapt_cuda_net *d, const struct adapt_cuda_hooks *h)
{
    if (h)
        d->hooks = *h;
    else
        memset(&d->hooks, 0, sizeof d->hooks);
}

extern "C" enum adapt_status adapt_cuda_net_alloc(struct adapt_cuda_net *d, size_t floats,
                                                  float **out)
{
    *out = NULL;
    void **a = (void **)realloc(d->allocs, ((size_t)d->nallocs + 1) * sizeof *a);
    if (!a) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the device array table");
    d->allocs = a;
    void *m = NULL;
    CU(cudaMalloc(&m, (floats + 1) * sizeof(float)), "policy arrays");
    d->allocs[d->nallocs++] = m;
    CU(cudaMemsetAsync(m, 0, (floats + 1) * sizeof(float), d->s), "memset");
    *out = (float *)m;
    return ADAPT_OK;
}

extern "C" void adapt_cuda_net_release(struct adapt_cuda_net *d, float *array)
{
    if (!d || !array) return;
    for (int k = 0; k < d->nallocs; k++) {
        if (d->allocs[k] != (void *)array) continue;
        cudaStreamSynchronize(d->s); /* work queued on it may still read it */
        cudaFree(array);
        d->allocs[k] = d->allocs[--d->nallocs];
        return;
    }
}

extern "C" int adapt_cuda_net_arrays(const struct adapt_cuda_net *d)
{
    return d ? d->nallocs : 0;
}

extern "C" uint64_t adapt_cuda_net_id(const struct adapt_cuda_net *d)
{
    return d ? d->id : 0;
}

extern "C" enum adapt_status adapt_cuda_net_counters(struct adapt_cuda_net *d, int k)
{
    if (k < 0) return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_counters: %d slots", k);
    CU(cudaStreamSynchronize(d->s), "step");
    if (d->counters) cudaFree(d->counters);
    if (d->h_counters) cudaFreeHost(d->h_counters);
    d->counters = d->h_counters = NULL;
    d->ncounters = 0;
    size_t bytes = (3 * (size_t)k + 1) * sizeof(unsigned long long);
    CU(cudaMalloc(&d->counters, bytes), "counters");
    CU(cudaHostAlloc(&d->h_counters, bytes, cudaHostAllocDefault), "pinned counters");
    CU(cudaMemsetAsync(d->counters, 0, bytes, d->s), "memset");
    d->ncounters = k;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_take_counters(struct adapt_cuda_net *d, uint64_t *host)
{
    size_t m = 3 * (size_t)d->ncounters;
    if (m == 0) return ADAPT_OK;
    unsigned long long *h = d->h_counters;
    CU(cudaMemcpyAsync(h, d->counters, m * sizeof *h, cudaMemcpyDeviceToHost, d->s),
       "counters from the device");
    CU(cudaMemsetAsync(d->counters, 0, m * sizeof *h, d->s), "memset");
    CU(cudaStreamSynchronize(d->s), "counters from the device");
    for (size_t i = 0; i < m; i++) host[i] += (uint64_t)h[i];
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_zero_counters(struct adapt_cuda_net *d, int first,
                                                          int count)
{
    if (first < 0 || count < 0 || count > d->ncounters - first)
        return ADAPT_ERROR(ADAPT_EINVAL, "counter slots %d to %d of %d", first, first + count - 1,
                           d->ncounters);
    if (count)
        CU(cudaMemsetAsync(d->counters + 3 * (size_t)first, 0,
                           3 * (size_t)count * sizeof *d->counters, d->s),
           "memset");
    return ADAPT_OK;
}

namespace
{

/* A device scratch buffer of at least `want` bytes; grown (after the queued work that may
 * read the old one) when *bytes is smaller. */
enum adapt_status grow(struct adapt_cuda_net *d, void **buf, size_t *bytes, size_t want,
                       const char *what)
{
    if (want <= *bytes) return ADAPT_OK;
    CU(cudaStreamSynchronize(d->s), "step");
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *bytes = 0;
    CU(cudaMalloc(buf, want), what);
    *bytes = want;
    return ADAPT_OK;
}

} // namespace

extern "C" enum adapt_status adapt_cuda_net_round(struct adapt_cuda_net *d,
                                                  const struct quant_spec *s, const float *x,
                                                  float *y, size_t rows, size_t cols,
                                                  struct quant_key key, int slot)
{
    if (slot >= d->ncounters)
        return ADAPT_ERROR(ADAPT_EINVAL, "counter slot %d of %d", slot, d->ncounters);
    enum adapt_status st = grow(d, &d->qscratch, &d->qscratch_bytes,
                                quant_cuda_scratch_bytes(s, rows, cols), "rounding scratch");
    if (st != ADAPT_OK) return st;
    return quant_cuda_rows_on(s, x, y, rows, cols, key, NULL,
                              slot >= 0 ? d->counters + 3 * (size_t)slot : NULL, d->qscratch,
                              d->qscratch_bytes, d->s);
}

extern "C" enum adapt_status adapt_cuda_net_round_list(struct adapt_cuda_net *d,
                                                       const struct adapt_cuda_round *r, int k)
{
    struct quant_cuda_job jobs[64];
    for (int i0 = 0; i0 < k; i0 += 64) {
        const int m = k - i0 < 64 ? k - i0 : 64;
        for (int i = 0; i < m; i++) {
            const struct adapt_cuda_round *ri = &r[i0 + i];
            if (ri->slot >= d->ncounters)
                return ADAPT_ERROR(ADAPT_EINVAL, "counter slot %d of %d", ri->slot, d->ncounters);
            jobs[i].s = ri->s;
            jobs[i].x = ri->x;
            jobs[i].y = ri->y;
            jobs[i].n = ri->n;
            jobs[i].key = ri->key;
            jobs[i].counts = ri->slot >= 0 ? d->counters + 3 * (size_t)ri->slot : NULL;
        }
        enum adapt_status st = quant_cuda_list_on(jobs, m, d->s);
        if (st != ADAPT_OK) return st;
    }
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_ste_clip(struct adapt_cuda_net *d, const float *y,
                                                     float *dy, size_t count, float lo, float hi)
{
    acu_ste_clip(y, dy, count, lo, hi, d->s);
    CU(cudaGetLastError(), "straight-through launch");
    return ADAPT_OK;
}

extern "C" float *adapt_cuda_net_param(struct adapt_cuda_net *d, int p, enum adapt_cuda_array which)
{
    if (p < 0 || p >= d->net->nparam) return NULL;
    return which == ADAPT_CUDA_VALUE  ? d->pval[p]
           : which == ADAPT_CUDA_GRAD ? d->pgrad[p]
                                      : d->puse[p];
}

extern "C" void adapt_cuda_net_use(struct adapt_cuda_net *d, int p, const float *use)
{
    if (p >= 0 && p < d->net->nparam) d->puse[p] = use ? (float *)use : d->pval[p];
}

namespace
{

/* A device buffer and its pinned host twin of at least `want` elements of `elem` bytes; grown
 * (after the queued work that may read the old one) when *have is smaller. */
enum adapt_status room(struct adapt_cuda_net *d, void **dev, void **host, int *have, int want,
                       size_t elem, const char *what)
{
    if (want <= *have) return ADAPT_OK;
    CU(cudaStreamSynchronize(d->s), "step");
    if (*dev) cudaFree(*dev);
    if (*host) cudaFreeHost(*host);
    *dev = *host = NULL;
    *have = 0;
    CU(cudaMalloc(dev, (size_t)want * elem), what);
    CU(cudaHostAlloc(host, (size_t)want * elem, cudaHostAllocDefault), what);
    *have = want;
    return ADAPT_OK;
}

void list_clear(struct dlist *l)
{
    if (l->table) cudaFree(l->table);
    free(l->x);
    free(l->acc);
    free(l->n);
    memset(l, 0, sizeof *l);
}

bool list_is(const struct dlist *l, float *const *x, float *const *acc, const size_t *n, int k)
{
    if (l->k != k || !l->table || !l->acc != !acc) return false;
    for (int i = 0; i < k; i++)
        if (l->x[i] != x[i] || l->n[i] != n[i] || (acc && l->acc[i] != acc[i])) return false;
    return true;
}

/* The device table of the k tensors x[i] (with acc[i] when acc is not NULL) of n[i] floats:
 * one of the engine's kept lists when the same pointers came before, else made (this once a
 * wait, for the oldest kept list's queued readers, and an upload). */
enum adapt_status list_of(struct adapt_cuda_net *d, float *const *x, float *const *acc,
                          const size_t *n, int k, const struct dlist **out)
{
    for (int j = 0; j < kLists; j++)
        if (list_is(&d->lists[j], x, acc, n, k)) {
            *out = &d->lists[j];
            return ADAPT_OK;
        }
    struct dlist *l = &d->lists[d->next_list];
    d->next_list = (d->next_list + 1) % kLists;
    CU(cudaStreamSynchronize(d->s), "step");
    list_clear(l);
    struct acu_tensor *h = (struct acu_tensor *)calloc((size_t)k + 1, sizeof *h);
    l->x = (float **)calloc((size_t)k + 1, sizeof *l->x);
    l->acc = acc ? (float **)calloc((size_t)k + 1, sizeof *l->acc) : NULL;
    l->n = (size_t *)calloc((size_t)k + 1, sizeof *l->n);
    if (!h || !l->x || (acc && !l->acc) || !l->n) {
        free(h);
        list_clear(l);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate a table of %d tensors", k);
    }
    unsigned blocks = 0;
    for (int i = 0; i < k; i++) {
        l->x[i] = x[i];
        if (acc) l->acc[i] = acc[i];
        l->n[i] = n[i];
        h[i].x = x[i];
        h[i].acc = acc ? acc[i] : NULL;
        h[i].count = n[i];
        h[i].first = blocks;
        blocks += acu_list_blocks(x[i], n[i]);
    }
    h[k].first = blocks;
    cudaError_t e = cudaMalloc(&l->table, ((size_t)k + 1) * sizeof *h);
    /* on the engine's stream, which does not wait for the legacy stream a plain cudaMemcpy
     * would use: the readers queued next on d->s see the table; a pageable source is staged
     * before the call returns, so h may be freed at once */
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(l->table, h, ((size_t)k + 1) * sizeof *h, cudaMemcpyHostToDevice,
                            d->s);
    free(h);
    if (e != cudaSuccess) {
        list_clear(l);
        CU(e, "tensor table");
    }
    l->k = k; /* a list without second pointers (acc NULL) matches only such calls */
    l->blocks = blocks;
    *out = l;
    return ADAPT_OK;
}

/* The sums of squares and of absolute values of the k tensors x[i] (the list with acc[i] when
 * acc is not NULL) queued into d_sums, grown to k pairs; *l: the list's device table. */
enum adapt_status sumsq_list(struct adapt_cuda_net *d, float *const *x, float *const *acc,
                             const size_t *n, int k, const struct dlist **l)
{
    enum adapt_status st = room(d, (void **)&d->d_sums, (void **)&d->h_sums, &d->nsums, k,
                                2 * sizeof(double), "sums");
    if (st == ADAPT_OK) st = list_of(d, x, acc, n, k, l);
    if (st == ADAPT_OK) acu_sumsq_list((*l)->table, k, (*l)->blocks, d->d_sums, d->s);
    return st;
}

/* The k pairs of reductions in d_sums to out (waits). */
enum adapt_status sums_back(struct adapt_cuda_net *d, int k, double *out)
{
    CU(cudaGetLastError(), "reduction launch");
    CU(cudaMemcpyAsync(d->h_sums, d->d_sums, 2 * (size_t)k * sizeof(double), cudaMemcpyDeviceToHost,
                       d->s),
       "sums to the host");
    CU(cudaStreamSynchronize(d->s), "sums");
    memcpy(out, d->h_sums, 2 * (size_t)k * sizeof(double));
    return ADAPT_OK;
}

} // namespace

extern "C" enum adapt_status adapt_cuda_net_sums(struct adapt_cuda_net *d, float *const *x,
                                                 const size_t *n, int k, double *out)
{
    if (k <= 0) return ADAPT_OK;
    const struct dlist *l = NULL;
    enum adapt_status st = sumsq_list(d, x, NULL, n, k, &l);
    return st != ADAPT_OK ? st : sums_back(d, k, out);
}

extern "C" enum adapt_status adapt_cuda_net_gd(struct adapt_cuda_net *d, float *const *ring,
                                               const size_t *n, int k, int r, double *out)
{
    if (k <= 0) return ADAPT_OK;
    enum adapt_status st = room(d, (void **)&d->d_sums, (void **)&d->h_sums, &d->nsums, k,
                                2 * sizeof(double), "sums");
    if (st != ADAPT_OK) return st;
    for (int i = 0; i < k; i++) acu_gd(ring[i], r, n[i], d->d_sums + 2 * i, d->s);
    return sums_back(d, k, out);
}

extern "C" enum adapt_status adapt_cuda_net_add_scaled(struct adapt_cuda_net *d, float *dst,
                                                       const float *x, const float *w, float a,
                                                       size_t count)
{
    acu_add_scaled(dst, x, w, a, count, d->s);
    CU(cudaGetLastError(), "add launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_grads_finite(struct adapt_cuda_net *d, int *finite)
{
    enum adapt_status st =
        room(d, (void **)&d->d_keys, (void **)&d->h_keys, &d->nkeys, 2, sizeof(uint32_t), "flag");
    if (st != ADAPT_OK) return st;
    CU(cudaMemsetAsync(d->d_keys, 0, sizeof(uint32_t), d->s), "flag");
    acu_nonfinite(d->grads, d->ngrads, d->d_keys, d->s); /* every trainable gradient */
    CU(cudaGetLastError(), "overflow check launch");
    CU(cudaMemcpyAsync(d->h_keys, d->d_keys, sizeof(uint32_t), cudaMemcpyDeviceToHost, d->s),
       "flag to the host");
    CU(cudaStreamSynchronize(d->s), "overflow check");
    *finite = d->h_keys[0] == 0u;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_scale_grads(struct adapt_cuda_net *d, float scale)
{
    acu_scale_acc(d->grads, NULL, d->ngrads, scale, d->s);
    CU(cudaGetLastError(), "gradient scale launch");
    return ADAPT_OK;
}

extern "C" void adapt_cuda_net_loss_scale(struct adapt_cuda_net *d, double scale)
{
    d->loss_scale = (float)scale;
}

static_assert((int)ADAPT_CUDA_FP16 == (int)ACU_FP16 && (int)ADAPT_CUDA_BF16 == (int)ACU_BF16 &&
                  (int)ADAPT_CUDA_FLOAT == (int)ACU_FLOAT,
              "one numbering of the half types");

extern "C" enum adapt_status adapt_cuda_net_half(struct adapt_cuda_net *d, int node,
                                                 enum adapt_cuda_half type)
{
    ADAPT_ASSERT(node >= 0 && node < d->net->nnodes);
    struct dlayer *dl = &d->L[node];
    if (type != ADAPT_CUDA_FLOAT && dl->kind != K_CONV && dl->kind != K_LINEAR)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: only conv2d and linear layers compute in half precision",
                           dl->l->name);
    if (type != ADAPT_CUDA_FLOAT) {
        size_t hbytes, floats;
        half_needs(dl->l, dl->kind, d->n_max, &hbytes, &floats);
        enum adapt_status st = grow(d, &d->hws, &d->hws_bytes, hbytes, "half-precision copies");
        if (st == ADAPT_OK)
            st = grow(d, (void **)&d->fws, &d->fws_bytes, floats * sizeof(float),
                      "half-precision scratch");
        if (st != ADAPT_OK) return st;
    }
    dl->half = (int)type;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_normalize_acc(struct adapt_cuda_net *d,
                                                          float *const *g, float *const *acc,
                                                          const size_t *n, int k)
{
    if (k <= 0) return ADAPT_OK;
    const struct dlist *l = NULL;
    enum adapt_status st = sumsq_list(d, g, acc, n, k, &l);
    if (st != ADAPT_OK) return st;
    acu_normalize_acc_list(l->table, k, l->blocks, d->d_sums, d->s);
    CU(cudaGetLastError(), "normalisation launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_get(struct adapt_cuda_net *d, const float *dev,
                                                float *host, size_t count)
{
    if (!count) return ADAPT_OK;
    CU(cudaMemcpyAsync(host, dev, count * sizeof(float), cudaMemcpyDeviceToHost, d->s),
       "array to the host");
    CU(cudaStreamSynchronize(d->s), "array to the host");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_put(struct adapt_cuda_net *d, float *dev,
                                                const float *host, size_t count)
{
    if (!count) return ADAPT_OK;
    CU(cudaMemcpyAsync(dev, host, count * sizeof(float), cudaMemcpyHostToDevice, d->s),
       "array to the device");
    CU(cudaStreamSynchronize(d->s), "array to the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_gather(struct adapt_cuda_net *d, const float *src,
                                                   size_t stride, float *dst, size_t count)
{
    if (stride < 1) return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_gather: stride 0");
    acu_gather(src, stride, dst, count, d->s);
    CU(cudaGetLastError(), "gather launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_range(struct adapt_cuda_net *d, const float *x,
                                                  size_t count, double *lo, double *hi)
{
    enum adapt_status st = room(d, (void **)&d->d_keys, (void **)&d->h_keys, &d->nkeys, 2,
                                sizeof(uint32_t), "range keys");
    if (st != ADAPT_OK) return st;
    st = quant_cuda_range_on(x, count, d->d_keys, d->s);
    if (st != ADAPT_OK) return st;
    CU(cudaMemcpyAsync(d->h_keys, d->d_keys, 2 * sizeof(uint32_t), cudaMemcpyDeviceToHost, d->s),
       "range to the host");
    CU(cudaStreamSynchronize(d->s), "range");
    if (d->h_keys[0] == 0u) { /* no finite value */
        *lo = 1.0;
        *hi = 0.0;
        return ADAPT_OK;
    }
    *hi = quant_u2f(quant_order_unkey(d->h_keys[0]));
    *lo = quant_u2f(quant_order_unkey(d->h_keys[1]));
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_hist(struct adapt_cuda_net *d, const float *x,
                                                 size_t count, double lo, double hi, int bins,
                                                 uint64_t *counts)
{
    if (bins < 1 || !(lo <= hi))
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_hist: %d bins over [%g, %g]", bins, lo,
                           hi);
    if (lo == hi) { /* widened as quant_hist does */
        lo -= 1.0;
        hi += 1.0;
    }
    enum adapt_status st = room(d, (void **)&d->d_hist, (void **)&d->h_hist, &d->nhist, bins,
                                sizeof(unsigned long long), "histogram");
    if (st != ADAPT_OK) return st;
    acu_hist(x, count, lo, hi, bins, d->d_hist, d->s);
    CU(cudaGetLastError(), "histogram launch"); /* the copy and the wait do not report it */
    CU(cudaMemcpyAsync(d->h_hist, d->d_hist, (size_t)bins * sizeof(unsigned long long),
                       cudaMemcpyDeviceToHost, d->s),
       "histogram to the host");
    CU(cudaStreamSynchronize(d->s), "histogram");
    for (int b = 0; b < bins; b++) counts[b] = (uint64_t)d->h_hist[b];
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_sgd_prepare(struct adapt_cuda_net *d, double grad_scale,
                                                        double l1, int l1_quantized)
{
    struct adapt_net *net = d->net;
    for (int p = 0; p < net->nparam; p++) {
        if (!d->pgrad[p]) continue;
        acu_sgd_prepare(d->pgrad[p], l1_quantized ? d->puse[p] : d->pval[p],
                        param_numel(net->param[p]), (float)grad_scale, (float)l1, d->s);
    }
    CU(cudaGetLastError(), "gradient scale launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_sgd_update(struct adapt_cuda_net *d,
                                                       const struct adapt_sgd *o)
{
    struct adapt_net *net = d->net;
    for (int p = 0; p < net->nparam; p++) {
        if (!d->pgrad[p]) continue;
        acu_sgd_update(d->pval[p], d->pgrad[p], d->pbuf[p], d->pval[p],
                       o->l2_quantized ? d->puse[p] : d->pval[p], param_numel(net->param[p]),
                       (float)o->lr, (float)o->momentum, (float)o->l2, 0.0f, 1.0f, o->nesterov,
                       d->steps == 0, d->s);
    }
    d->steps++;
    CU(cudaGetLastError(), "sgd launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_l1_norm(struct adapt_cuda_net *d, int l1_quantized,
                                                    double *out)
{
    struct adapt_net *net = d->net;
    int k = 0;
    float **x = (float **)calloc((size_t)net->nparam + 1, sizeof *x);
    size_t *n = (size_t *)calloc((size_t)net->nparam + 1, sizeof *n);
    double *sums = (double *)calloc(2 * (size_t)net->nparam + 2, sizeof *sums);
    enum adapt_status st = ADAPT_OK;
    if (!x || !n || !sums) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the L1 norm's table");
    } else {
        for (int p = 0; p < net->nparam; p++) {
            if (!d->pgrad[p]) continue;
            x[k] = l1_quantized ? d->puse[p] : d->pval[p];
            n[k++] = param_numel(net->param[p]);
        }
        st = adapt_cuda_net_sums(d, x, n, k, sums);
        *out = 0.0;
        for (int i = 0; st == ADAPT_OK && i < k; i++) *out += sums[2 * i + 1];
    }
    free(x);
    free(n);
    free(sums);
    return st;
}

extern "C" enum adapt_status adapt_cuda_net_zero_grads(struct adapt_cuda_net *d)
{
    CU(cudaMemsetAsync(d->grads, 0, (d->ngrads + 1) * sizeof(float), d->s), "zero gradients");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_zero(struct adapt_cuda_net *d, float *x, size_t count)
{
    if (count) CU(cudaMemsetAsync(x, 0, count * sizeof(float), d->s), "zero");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_quantize(struct adapt_cuda_net *d, int p,
                                                     const struct quant_spec *spec,
                                                     struct quant_key key)
{
    struct adapt_net *net = d->net;
    if (p < 0 || p >= net->nparam)
        return ADAPT_ERROR(ADAPT_EINVAL, "parameter %d of %d", p, net->nparam);
    if (!spec) {
        d->puse[p] = d->pval[p];
        return ADAPT_OK;
    }
    if (!d->quants) {
        CU(cudaMalloc(&d->quants, (d->nvals + 1) * sizeof(float)), "quantized copies");
    }
    float *q = d->quants + (d->pval[p] - d->vals);
    const struct adapt_param *pp = net->param[p];
    size_t rows = (size_t)pp->value.dim[0], cols = param_numel(pp) / (rows ? rows : 1);
    enum adapt_status st = adapt_cuda_net_round(d, spec, d->pval[p], q, rows, cols, key, -1);
    if (st != ADAPT_OK) return st;
    d->puse[p] = q;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_read(struct adapt_cuda_net *d, int which, int a, int n,
                                                 float *host)
{
    struct adapt_net *net = d->net;
    if (a < 0 || a >= net->nact || n < 1 || n > d->n_max || (which && a == 0))
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_read: activation %d, %d samples", a, n);
    const float *src = which ? d->dact[a] : d->act[a];
    CU(cudaMemcpyAsync(host, src, net->act_numel[a] * (size_t)n * sizeof(float),
                       cudaMemcpyDeviceToHost, d->s),
       "activation to the host");
    CU(cudaStreamSynchronize(d->s), "activation to the host");
    return ADAPT_OK;
}

namespace
{

/* momentum buffers and the step count between the device and an optimizer made for the same
 * network (to_device: host -> device) */
enum adapt_status sgd_state(struct adapt_cuda_net *d, struct adapt_sgd *o, bool to_device)
{
    for (int k = 0; k < o->nbuf; k++) {
        int p = 0;
        while (p < d->net->nparam && d->net->param[p] != o->par[k]) p++;
        if (p == d->net->nparam || !d->pbuf[p])
            return ADAPT_ERROR(ADAPT_EINVAL, "optimizer buffer %d belongs to no parameter", k);
        size_t bytes = param_numel(o->par[k]) * sizeof(float);
        CU(to_device ? cudaMemcpyAsync(d->pbuf[p], o->buf[k], bytes, cudaMemcpyHostToDevice, d->s)
                     : cudaMemcpyAsync(o->buf[k], d->pbuf[p], bytes, cudaMemcpyDeviceToHost, d->s),
           "momentum buffers");
    }
    if (to_device)
        d->steps = o->steps;
    else
        o->steps = d->steps;
    CU(cudaStreamSynchronize(d->s), "momentum buffers");
    return ADAPT_OK;
}

} // namespace

extern "C" enum adapt_status adapt_cuda_net_push_sgd(struct adapt_cuda_net *d,
                                                     const struct adapt_sgd *o)
{
    return sgd_state(d, (struct adapt_sgd *)o, true); /* read only in this direction */
}

extern "C" enum adapt_status adapt_cuda_net_pull_sgd(struct adapt_cuda_net *d, struct adapt_sgd *o)
{
    return sgd_state(d, o, false);
}
