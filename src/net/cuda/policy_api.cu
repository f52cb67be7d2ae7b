/* src/net/cuda/policy_api.cu: what the precision policies build on in the GPU engine
 * (src/net/net_cuda.h): device arrays, rounding counters, rounding launches, the one-launch
 * reductions over tensor lists, histograms and ranges, the optimizer's state. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/cuda/engine.h"

using namespace acu_net;

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

} // namespace

namespace acu_net
{

void list_clear(struct dlist *l)
{
    if (l->table) cudaFree(l->table);
    free(l->x);
    free(l->acc);
    free(l->n);
    memset(l, 0, sizeof *l);
}

} // namespace acu_net

namespace
{


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

extern "C" enum adapt_status adapt_cuda_net_amax_rows(struct adapt_cuda_net *d, const float *x,
                                                      size_t rows, size_t cols, float *amax)
{
    if (rows == 0) return ADAPT_OK;
    if (rows > (size_t)INT_MAX) return ADAPT_ERROR(ADAPT_EINVAL, "amax of %zu rows", rows);
    enum adapt_status st = room(d, (void **)&d->d_amax, (void **)&d->h_amax, &d->namax,
                                (int)rows, sizeof(unsigned), "amax");
    if (st != ADAPT_OK) return st;
    acu_amax_rows(x, rows, cols, d->d_amax, d->s);
    CU(cudaGetLastError(), "amax launch");
    CU(cudaMemcpyAsync(d->h_amax, d->d_amax, rows * sizeof(unsigned), cudaMemcpyDeviceToHost,
                       d->s),
       "amax to the host");
    CU(cudaStreamSynchronize(d->s), "amax");
    for (size_t r = 0; r < rows; r++) amax[r] = quant_amax_of_bits(d->h_amax[r]);
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_round_scaled(struct adapt_cuda_net *d,
                                                         const struct quant_spec *s,
                                                         const float *x, float *y, size_t rows,
                                                         size_t cols, size_t srows,
                                                         const float *scale,
                                                         struct quant_key key, uint64_t counts[3])
{
    const size_t n = rows * cols;
    if (n == 0) return ADAPT_OK;
    if (srows == 0 || n % srows || 2 * srows > (size_t)INT_MAX)
        return ADAPT_ERROR(ADAPT_EINVAL, "scaled rounding: %zu values in %zu scaled rows", n,
                           srows);
    enum adapt_status st = room(d, (void **)&d->d_rsc, (void **)&d->h_rsc, &d->nrsc,
                                (int)(2 * srows), sizeof(float), "scales");
    if (st == ADAPT_OK)
        st = room(d, (void **)&d->d_rcnt, (void **)&d->h_rcnt, &d->nrcnt, 3,
                  sizeof(unsigned long long), "rounding counts");
    if (st == ADAPT_OK)
        st = grow(d, &d->qscratch, &d->qscratch_bytes, quant_cuda_scratch_bytes(s, rows, cols),
                  "rounding scratch");
    if (st != ADAPT_OK) return st;
    for (size_t r = 0; r < srows; r++) { /* the CPU's factors: scale and 1.0f / scale */
        d->h_rsc[r] = scale[r];
        d->h_rsc[srows + r] = 1.0f / scale[r];
    }
    CU(cudaMemcpyAsync(d->d_rsc, d->h_rsc, 2 * srows * sizeof(float), cudaMemcpyHostToDevice,
                       d->s),
       "scales to the device");
    CU(cudaMemsetAsync(d->d_rcnt, 0, 3 * sizeof(unsigned long long), d->s), "rounding counts");
    const size_t c = n / srows;
    acu_scale_rows(x, y, n, c, d->d_rsc, d->s);
    CU(cudaGetLastError(), "scale launch");
    st = quant_cuda_rows_on(s, y, y, rows, cols, key, NULL, d->d_rcnt, d->qscratch,
                            d->qscratch_bytes, d->s);
    if (st != ADAPT_OK) return st;
    acu_scale_rows(y, y, n, c, d->d_rsc + srows, d->s);
    CU(cudaGetLastError(), "scale launch");
    CU(cudaMemcpyAsync(d->h_rcnt, d->d_rcnt, 3 * sizeof(unsigned long long),
                       cudaMemcpyDeviceToHost, d->s),
       "rounding counts to the host");
    CU(cudaStreamSynchronize(d->s), "scaled rounding");
    for (int k = 0; k < 3; k++) counts[k] += (uint64_t)d->h_rcnt[k];
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

