/* src/net/layers/layers_impl.h: helpers shared by the CPU layer kinds (private to src/layers).
 *
 * Holds the constructor helpers (base fields, parameter naming), the
 * convolution geometry with its per-sample im2col / col2im kernels, the
 * single-threaded broadcast GEMM the convolutions run per sample (gemm.c),
 * the fully connected core used by linear and by convolutions that cover
 * their whole input (fc.c, OpenBLAS), and the threshold below which
 * element-wise loops stay serial.
 *
 * Non-goals: nothing here is part of the public layer interface (src/net/layer.h);
 * model code never includes this header.
 *
 *   struct adapt_layer *l = ...calloc'd kind struct...;
 *   if (adapt_layer_setup(l, &my_ops, name, 1, in_chw) != ADAPT_OK) goto fail;
 *   adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 2, dim, fan_in);
 *
 * Ownership: layers are calloc'd by their constructor and released by
 * adapt_layer_free(); parameter memory belongs to the network.
 */
#ifndef ADAPT_LAYERS_IMPL_H
#define ADAPT_LAYERS_IMPL_H

#include <stddef.h>

#include "src/base/status.h"
#include "src/net/layer.h"

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif

/* Element-wise loops over fewer floats than this run on one thread: below it
 * the OpenMP fork/join (a few microseconds) costs more than the loop. */
#define ADAPT_PAR_MIN 32768

/* Fills name, ops, nin and in_dim[0..nin-1] (all inputs get in_chw). Fails
 * with ADAPT_EINVAL when the name is too long for its parameter names or a
 * dimension is not positive. */
enum adapt_status adapt_layer_setup(struct adapt_layer *l, const struct adapt_layer_ops *ops,
                                    const char *name, int nin, const int in_chw[3]);

/* Appends parameter "<layer name>.<suffix>" with the given shape (value and
 * grad shaped, data NULL, use NULL). */
enum adapt_status adapt_layer_param_add(struct adapt_layer *l, const char *suffix,
                                        enum adapt_param_role role, int ndim, const int *dim,
                                        int fan_in);

/* What a kernel computes with; the network must have bound it. */
static inline const float *adapt_param_in_use(const struct adapt_param *p)
{
    ADAPT_ASSERT(p->use != NULL);
    return p->use;
}

/* Batch-norm defaults (gamma 1, beta 0, running mean 0, var 1, counter 0). */
void adapt_batchnorm2d_reset(struct adapt_layer *l);
extern const struct adapt_layer_ops adapt_batchnorm2d_ops;

/* ---- convolution geometry and lowering (im2col.c) ---- */

struct adapt_conv_geom {
    int cin, h, w; /* input plane */
    int k, stride, pad;
    int ho, wo;    /* output plane */
};

/* Lowers one sample x (cin, h, w) into col (cin*k*k, ldc): row
 * r = (c*k + ky)*k + kx, column oy*wo + ox; zero padding; columns P..ldc-1
 * are set to 0. scratch: adapt_im2col_scratch(g) floats. Serial. */
size_t adapt_im2col_scratch(const struct adapt_conv_geom *g);
void adapt_im2col_sample(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                         float *scratch);
/* The same into columns 0 .. P-1 only, the rest of each row untouched: one sample's block
 * of a matrix holding several side by side. */
void adapt_im2col_into(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                       float *scratch);

/* The adjoint: dx (cin, h, w) = (acc ? dx : 0) + the sum of the col entries
 * that read each input element. Serial. */
void adapt_col2im_sample(const struct adapt_conv_geom *g, const float *col, size_t ldc, float *dx,
                         int acc, float *scratch);

/* ---- explicit GEMMs of conv2d and linear (mx_gemm.c, arith_gemm.c) ---- */

/* out (cols, ldo) = in (rows, cols; rows ldi apart)^T */
void adapt_transpose(const float *in, size_t rows, size_t cols, size_t ldi, float *out, size_t ldo);
/* n floats (64-byte aligned) of the scratch s, grown as needed and kept between calls. */
float *adapt_gemm_scratch(struct adapt_mx_scratch *s, size_t n);

/* ---- accumulator models in the three GEMMs (arith_gemm.c) ----
 * A conv2d (g its geometry, K = Cin*k*k) or linear (g NULL, K = in) layer's forward and
 * backward when l->arith is set, with the operands of adapt_mx_gemm_forward/_backward (w the
 * weight copy in use). adapt_arith_forward returns 0 (computing nothing) when the forward GEMM
 * runs in float32, adapt_arith_backward when neither backward GEMM runs under the model: the
 * layer's own kernels then compute it. */
int adapt_arith_forward(struct adapt_arith *ar, const struct adapt_conv_geom *g, int n, int K,
                        int cout, const float *x, const float *w, const float *b, float *y);
int adapt_arith_backward(struct adapt_arith *ar, const struct adapt_conv_geom *g, int n, int K,
                         int cout, const float *x, const float *w, const float *dy, float *dw,
                         float *db, float *dx, int acc);

/* ---- MX blocks along each GEMM's reduction dimension (mx_gemm.c) ----
 * A conv2d (g its geometry, K = Cin*k*k) or linear (g NULL, K = in) layer's forward and
 * backward when l->mx is set: w the unit's weight copy (cout, K) (forward, and the input
 * gradient where mx->w is 0), w_master the float32 master (the input gradient's copy where
 * mx->w is 1), dw and db accumulated, dx (may be NULL) written or added to (acc). */
void adapt_mx_gemm_forward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n,
                           int K, int cout, const float *x, const float *w, const float *b,
                           float *y);
void adapt_mx_gemm_backward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g,
                            int n, int K, int cout, const float *x, const float *w_master,
                            const float *w_use, const float *dy, float *dw, float *db, float *dx,
                            int acc);
/* mx->channels: a convolution's forward input, n samples of x, rounded in blocks along Cin at
 * each input pixel (copy ADAPT_MX_X_FWD) into the scratch; x itself where mx->x is 0. The
 * forward then runs in the layer's own kernels. Outside a parallel region. */
const float *adapt_mx_channels_input(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g,
                                     int n, const float *x);
/* mx->channels: a convolution's backward operands in the scratch: xw and dyw, its input and
 * output gradient in blocks along the batch (the weight gradient's), dyd the output gradient
 * in blocks along Cout at each output pixel and wd (cout, K) the master in blocks along Cout
 * (the input gradient's); each the tensor itself (wd: w_use) where its role is not rounded.
 * Outside a parallel region. */
struct adapt_mx_channels_ops {
    const float *xw, *dyw, *dyd, *wd;
};
void adapt_mx_channels_operands(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n,
                                int K, int cout, const float *x, const float *w_master,
                                const float *w_use, const float *dy,
                                struct adapt_mx_channels_ops *o);

/* ---- broadcast GEMM (gemm.c) ----
 * C (M x N) = init + A (M x K) B (K x N), single-threaded: A[i][k] is read
 * at A[i*ars + k*acs] (any strides: a transposed or strided operand), B and C
 * by rows (ldb, ldc). N must be a multiple of 16; B and C rows are accessed
 * in whole vectors of 16 floats. init: ADAPT_GEMM_ZERO (C = AB),
 * ADAPT_GEMM_ACC (C += AB) or ADAPT_GEMM_BIAS (C = AB + bias[i] per row). */
enum { ADAPT_GEMM_ZERO = 0, ADAPT_GEMM_ACC, ADAPT_GEMM_BIAS };
void adapt_gemm_bcast(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int init,
                      const float *bias);

/* ---- fully connected core (fc.c): y (n, out) = x (n, in) W^T + b ---- */

void adapt_fc_forward(int n, int in, int out, const float *x, const float *w, const float *b,
                      float *y);
/* dW (out, in) += dy^T x when dw != NULL; db (out) += column sums of dy (db may be NULL);
 * dx (n, in) = (acc ? dx : 0) + dy W when dx != NULL. */
void adapt_fc_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                       float *dw, float *db, float *dx, int acc);

/* Sum of n floats, 16 float partial sums combined in double (deterministic:
 * independent of the thread count). */
double adapt_sum_f32(const float *x, size_t n);

#endif
