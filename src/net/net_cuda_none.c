/* src/net/net_cuda_none.c: the GPU engine's entry points in builds without CUDA. Creating a
 * device network reports that this build has no CUDA; nothing else can be reached. */
#include "src/net/net_cuda.h"

int adapt_cuda_net_built(void)
{
    return 0;
}

enum adapt_status adapt_cuda_net_create(struct adapt_net *net, int gpu, struct adapt_cuda_net **out)
{
    (void)net;
    (void)gpu;
    *out = NULL;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                       "this build has no CUDA (configure found no CUDA toolkit, or "
                       "--without-cuda): run.device = cuda is not available");
}

void adapt_cuda_net_free(struct adapt_cuda_net *d)
{
    (void)d;
}

#define NO_CUDA return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "this build has no CUDA")

enum adapt_status adapt_cuda_net_push_params(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}
enum adapt_status adapt_cuda_net_pull_params(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}
enum adapt_status adapt_cuda_net_pull_grads(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_push_sgd(struct adapt_cuda_net *d, const struct adapt_sgd *o)
{
    (void)d, (void)o;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_pull_sgd(struct adapt_cuda_net *d, struct adapt_sgd *o)
{
    (void)d, (void)o;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_upload(struct adapt_cuda_net *d, const float *x, const int *labels,
                                        int n)
{
    (void)d, (void)x, (void)labels, (void)n;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_step(struct adapt_cuda_net *d, int training, int backward)
{
    (void)d, (void)training, (void)backward;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_result(struct adapt_cuda_net *d, double *loss_sum, int *correct)
{
    (void)d, (void)loss_sum, (void)correct;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_sgd(struct adapt_cuda_net *d, double lr, double momentum,
                                     double l2, int nesterov, double grad_scale)
{
    (void)d, (void)lr, (void)momentum, (void)l2, (void)nesterov, (void)grad_scale;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_quantize(struct adapt_cuda_net *d, int p,
                                          const struct quant_spec *spec, struct quant_key key)
{
    (void)d, (void)p, (void)spec, (void)key;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_read(struct adapt_cuda_net *d, int which, int a, int n,
                                      float *host)
{
    (void)d, (void)which, (void)a, (void)n, (void)host;
    NO_CUDA;
}

const char *adapt_cuda_net_device(const struct adapt_cuda_net *d)
{
    (void)d;
    return "";
}

void adapt_cuda_net_set_hooks(struct adapt_cuda_net *d, const struct adapt_cuda_hooks *h)
{
    (void)d, (void)h;
}

enum adapt_status adapt_cuda_net_alloc(struct adapt_cuda_net *d, size_t floats, float **out)
{
    (void)d, (void)floats;
    *out = NULL;
    NO_CUDA;
}

void adapt_cuda_net_release(struct adapt_cuda_net *d, float *array)
{
    (void)d, (void)array;
}

int adapt_cuda_net_arrays(const struct adapt_cuda_net *d)
{
    (void)d;
    return 0;
}

uint64_t adapt_cuda_net_id(const struct adapt_cuda_net *d)
{
    (void)d;
    return 0;
}

enum adapt_status adapt_cuda_net_counters(struct adapt_cuda_net *d, int k)
{
    (void)d, (void)k;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_take_counters(struct adapt_cuda_net *d, uint64_t *host)
{
    (void)d, (void)host;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_round_list(struct adapt_cuda_net *d,
                                            const struct adapt_cuda_round *r, int k)
{
    (void)d, (void)r, (void)k;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_zero_counters(struct adapt_cuda_net *d, int first, int count)
{
    (void)d, (void)first, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_round(struct adapt_cuda_net *d, const struct quant_spec *s,
                                       const float *x, float *y, size_t rows, size_t cols,
                                       struct quant_key key, int slot)
{
    (void)d, (void)s, (void)x, (void)y, (void)rows, (void)cols, (void)key, (void)slot;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_ste_clip(struct adapt_cuda_net *d, const float *y, float *dy,
                                          size_t count, float lo, float hi)
{
    (void)d, (void)y, (void)dy, (void)count, (void)lo, (void)hi;
    NO_CUDA;
}

float *adapt_cuda_net_param(struct adapt_cuda_net *d, int p, enum adapt_cuda_array which)
{
    (void)d, (void)p, (void)which;
    return NULL;
}

void adapt_cuda_net_use(struct adapt_cuda_net *d, int p, const float *use)
{
    (void)d, (void)p, (void)use;
}

enum adapt_status adapt_cuda_net_sums(struct adapt_cuda_net *d, float *const *x, const size_t *n,
                                      int k, double *out)
{
    (void)d, (void)x, (void)n, (void)k, (void)out;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_normalize_acc(struct adapt_cuda_net *d, float *const *g,
                                               float *const *acc, const size_t *n, int k)
{
    (void)d, (void)g, (void)acc, (void)n, (void)k;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_get(struct adapt_cuda_net *d, const float *dev, float *host,
                                     size_t count)
{
    (void)d, (void)dev, (void)host, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_put(struct adapt_cuda_net *d, float *dev, const float *host,
                                     size_t count)
{
    (void)d, (void)dev, (void)host, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_gather(struct adapt_cuda_net *d, const float *src, size_t stride,
                                        float *dst, size_t count)
{
    (void)d, (void)src, (void)stride, (void)dst, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_range(struct adapt_cuda_net *d, const float *x, size_t count,
                                       double *lo, double *hi)
{
    (void)d, (void)x, (void)count, (void)lo, (void)hi;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_amax_rows(struct adapt_cuda_net *d, const float *x, size_t rows,
                                           size_t cols, float *amax)
{
    (void)d, (void)x, (void)rows, (void)cols, (void)amax;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_round_scaled(struct adapt_cuda_net *d, const struct quant_spec *s,
                                              const float *x, float *y, size_t rows, size_t cols,
                                              size_t srows, const float *scale,
                                              struct quant_key key, uint64_t counts[3])
{
    (void)d, (void)s, (void)x, (void)y, (void)rows, (void)cols, (void)srows, (void)scale;
    (void)key, (void)counts;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_hist(struct adapt_cuda_net *d, const float *x, size_t count,
                                      double lo, double hi, int bins, uint64_t *counts)
{
    (void)d, (void)x, (void)count, (void)lo, (void)hi, (void)bins, (void)counts;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_sgd_prepare(struct adapt_cuda_net *d, double grad_scale, double l1,
                                             int l1_quantized)
{
    (void)d, (void)grad_scale, (void)l1, (void)l1_quantized;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_sgd_update(struct adapt_cuda_net *d, const struct adapt_sgd *o)
{
    (void)d, (void)o;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_l1_norm(struct adapt_cuda_net *d, int l1_quantized, double *out)
{
    (void)d, (void)l1_quantized, (void)out;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_zero(struct adapt_cuda_net *d, float *x, size_t count)
{
    (void)d, (void)x, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_zero_grads(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_add_scaled(struct adapt_cuda_net *d, float *dst, const float *x,
                                            const float *w, float a, size_t count)
{
    (void)d, (void)dst, (void)x, (void)w, (void)a, (void)count;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_gd(struct adapt_cuda_net *d, float *const *ring, const size_t *n,
                                    int k, int r, double *out)
{
    (void)d, (void)ring, (void)n, (void)k, (void)r, (void)out;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_grads_finite(struct adapt_cuda_net *d, int *finite)
{
    (void)d, (void)finite;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_scale_grads(struct adapt_cuda_net *d, float scale)
{
    (void)d, (void)scale;
    NO_CUDA;
}

void adapt_cuda_net_loss_scale(struct adapt_cuda_net *d, double scale)
{
    (void)d, (void)scale;
}

enum adapt_status adapt_cuda_net_half(struct adapt_cuda_net *d, int node, enum adapt_cuda_half type)
{
    (void)d, (void)node, (void)type;
    NO_CUDA;
}
