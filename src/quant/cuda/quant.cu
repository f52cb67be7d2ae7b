/* src/quant/cuda/quant.cu: CUDA kernels and extern "C" launchers of src/quant/quant.h.
 *
 * The rounding is quant_grid_round / quant_fmt_round from src/quant/quant_impl.h, the same code the
 * CPU runs. Random bits: one thread per Philox block q (elements 4q .. 4q+3 of the global index),
 * curand_init(seed, subsequence = stream, offset = 4q) then curand4, which is exactly
 * adapt_rng_block(seed, stream, q) of src/base/rng.h. Threads walk the blocks grid-stride, so
 * the launch shape never changes the bits. With 16 random bits (plan.sr_bits) a thread takes
 * eight elements per Philox block, 8q .. 8q+7, split as quant_sr_bits_at does (round_part16).
 * bfp and muppet reduce their range on the device
 * (order keys with atomicMax/atomicMin, exact) and build the per-block grid there with the
 * shared quant_grid_bfp / quant_grid_muppet. MX block formats: one warp per 32-element block.
 */
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include "src/quant/quant.h"

namespace {

int g_threads = 0;
int g_blocks = 0;
/* Most blocks of a rounding launch by default (quant_cuda_set_launch may set another). */
constexpr uint64_t kRoundBlocks = 4096;

enum adapt_status cuda_status(cudaError_t e, const char *what)
{
    enum adapt_status st = e == cudaErrorMemoryAllocation ? ADAPT_ENOMEM
                           : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                               ? ADAPT_EUNSUPPORTED
                               : ADAPT_EIO;
    cudaGetLastError();
    return adapt_error_at(__FILE__, __LINE__, st, "quant cuda: %s: %s", what,
                          cudaGetErrorString(e));
}

/* keys[2r] = max key, keys[2r+1] = min key of the finite values of row r (rows of len cols). */
__global__ void range_kernel(const float *x, size_t rows, size_t cols, uint32_t *keys)
{
    for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
        uint32_t kmax = 0u, kmin = 0xffffffffu;
        const float *xr = x + r * cols;
        for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
             j += (size_t)gridDim.x * blockDim.x) {
            float v = xr[j];
            if (isfinite(v)) {
                uint32_t k = quant_order_key(__float_as_uint(v));
                kmax = max(kmax, k);
                kmin = min(kmin, k);
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            kmax = max(kmax, __shfl_down_sync(0xffffffffu, kmax, o));
            kmin = min(kmin, __shfl_down_sync(0xffffffffu, kmin, o));
        }
        if ((threadIdx.x & 31) == 0) {
            if (kmax) atomicMax(&keys[2 * r], kmax);
            if (kmin != 0xffffffffu) atomicMin(&keys[2 * r + 1], kmin);
        }
    }
}

__global__ void keys_init_kernel(uint32_t *keys, size_t rows)
{
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        keys[2 * r] = 0u;
        keys[2 * r + 1] = 0xffffffffu;
    }
}

/* One grid per row from its keys (format QUANT_FORMAT_BFP or QUANT_FORMAT_MUPPET). */
__global__ void grids_kernel(const uint32_t *keys, size_t rows, int format, int wl,
                             struct quant_grid *grids)
{
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        float vmax = -INFINITY, vmin = INFINITY, maxabs = 0.0f;
        if (keys[2 * r]) {
            vmax = __uint_as_float(quant_order_unkey(keys[2 * r]));
            vmin = __uint_as_float(quant_order_unkey(keys[2 * r + 1]));
            maxabs = fmaxf(fabsf(vmax), fabsf(vmin));
        }
        grids[r] = format == QUANT_FORMAT_BFP ? quant_grid_bfp(wl, maxabs)
                                              : quant_grid_muppet(wl, vmax, vmin);
    }
}

__device__ __forceinline__ unsigned long long warp_sum_ull(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v; /* in lane 0 */
}

/* Adds the block's saturated / flushed / zero counts to counts[0..2]: one atomic per counter
 * and block, so that a large tensor's blocks do not queue on the same three words. Every thread
 * of the block calls it (blockDim.x a multiple of 32); nothing happens when counts is NULL (the
 * same for all). */
__device__ __forceinline__ void block_add_counts(unsigned long long ns, unsigned long long nf,
                                                 unsigned long long nz, unsigned long long *counts)
{
    if (!counts) return;
    __shared__ unsigned long long sh[3][32];
    const unsigned lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    ns = warp_sum_ull(ns);
    nf = warp_sum_ull(nf);
    nz = warp_sum_ull(nz);
    if (lane == 0) {
        sh[0][wid] = ns;
        sh[1][wid] = nf;
        sh[2][wid] = nz;
    }
    __syncthreads();
    if (wid != 0) return;
    ns = warp_sum_ull(lane < nw ? sh[0][lane] : 0ull);
    nf = warp_sum_ull(lane < nw ? sh[1][lane] : 0ull);
    nz = warp_sum_ull(lane < nw ? sh[2][lane] : 0ull);
    if (lane == 0 && (ns | nf | nz)) {
        atomicAdd(&counts[0], ns);
        atomicAdd(&counts[1], nf);
        atomicAdd(&counts[2], nz);
    }
}

/* One element: x[j] = v rounded with random bits r; counts added to ns, nf, nz. */
template <int KIND, int MODE, bool PERROW>
__device__ __forceinline__ float round_one(const struct quant_plan &plan,
                                           const struct quant_grid *grids, size_t cols, size_t j,
                                           float v, uint32_t r, uint32_t *sat,
                                           unsigned long long &ns, unsigned long long &nf,
                                           unsigned long long &nz)
{
    float o;
    if (KIND == QUANT_KIND_GRID) {
        const struct quant_grid g = PERROW ? grids[j / cols] : plan.grid;
        o = quant_grid_round(g, MODE, quant_grid_split(g), v, r, sat);
    }
    else {
        o = quant_fmt_round(plan.fmt, MODE, plan.fmt.wide, v, r, sat);
    }
    ns += (unsigned long long)*sat;
    nz += o == 0.0f;
    nf += (o == 0.0f && v != 0.0f);
    return o;
}

/* Rounds Philox blocks t0, t0 + step, ... of n elements (x[j] takes random value number
 * index + j), adding the counts to ns, nf, nz: one thread's share of a rounding. When index is
 * a multiple of 4 and x and y are 16-byte aligned, block t is x[4t .. 4t+3], read and written
 * as one float4 (without a mask); otherwise element by element. */
/* round_part with 16 random bits per element (plan.sr_bits): Philox block q serves the eight
 * elements 8q .. 8q+7 (element 8q + l takes half l & 1 of its lane l / 2, quant_sr16_bits), so a
 * thread generates one block per eight elements. When index is a multiple of 8 and x and y are
 * 16-byte aligned, the eight are read and written as two float4 (without a mask). */
template <int KIND, bool MASK, bool PERROW>
__device__ __forceinline__ void round_part16(const float *x, float *y, uint8_t *mask, size_t n,
                                             uint64_t index, const struct quant_plan &plan,
                                             const struct quant_grid *grids, size_t cols,
                                             uint64_t t0, uint64_t step, unsigned long long &ns,
                                             unsigned long long &nf, unsigned long long &nz)
{
    constexpr int M = QUANT_MODE_STOCHASTIC;
    const uint64_t q0 = index >> 3, nq = ((index + n - 1) >> 3) - q0 + 1;
    const bool vec = !MASK && (index & 7) == 0 && (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
    for (uint64_t t = t0; t < nq; t += step) {
        const uint64_t q = q0 + t;
        curandStatePhilox4_32_10_t st;
        curand_init(plan.seed, plan.stream, 4 * q, &st);
        const uint4 v = curand4(&st);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint32_t r[8];
#pragma unroll
        for (int l = 0; l < 8; l++) r[l] = quant_sr16_bits(w[l >> 1], (uint64_t)l);
        uint32_t sat;
        if (vec && 8 * t + 8 <= n) { /* elements 8t .. 8t+7, all in range */
            const float4 a = reinterpret_cast<const float4 *>(x)[2 * t];
            const float4 b = reinterpret_cast<const float4 *>(x)[2 * t + 1];
            const float in[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
            float o[8];
#pragma unroll
            for (int l = 0; l < 8; l++)
                o[l] = round_one<KIND, M, PERROW>(plan, grids, cols, 8 * t + l, in[l], r[l], &sat,
                                                  ns, nf, nz);
            reinterpret_cast<float4 *>(y)[2 * t] = make_float4(o[0], o[1], o[2], o[3]);
            reinterpret_cast<float4 *>(y)[2 * t + 1] = make_float4(o[4], o[5], o[6], o[7]);
            continue;
        }
#pragma unroll
        for (int l = 0; l < 8; l++) {
            const uint64_t gi = 8 * q + l;
            if (gi < index || gi >= index + n) continue;
            const size_t j = (size_t)(gi - index);
            y[j] = round_one<KIND, M, PERROW>(plan, grids, cols, j, x[j], r[l], &sat, ns, nf, nz);
            if (MASK) mask[j] = (uint8_t)sat;
        }
    }
}

template <int KIND, int MODE, bool MASK, bool PERROW>
__device__ __forceinline__ void round_part(const float *x, float *y, uint8_t *mask, size_t n,
                                           uint64_t index, const struct quant_plan &plan,
                                           const struct quant_grid *grids, size_t cols, uint64_t t0,
                                           uint64_t step, unsigned long long &ns,
                                           unsigned long long &nf, unsigned long long &nz)
{
    if (MODE == QUANT_MODE_STOCHASTIC && plan.sr_bits == QUANT_SR_BITS_16) {
        round_part16<KIND, MASK, PERROW>(x, y, mask, n, index, plan, grids, cols, t0, step, ns, nf,
                                         nz);
        return;
    }
    const uint64_t q0 = index >> 2, nq = ((index + n - 1) >> 2) - q0 + 1;
    const bool vec = !MASK && (index & 3) == 0 && (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
    for (uint64_t t = t0; t < nq; t += step) {
        const uint64_t q = q0 + t;
        uint32_t r[4] = {0u, 0u, 0u, 0u};
        if (MODE == QUANT_MODE_STOCHASTIC) {
            curandStatePhilox4_32_10_t st;
            curand_init(plan.seed, plan.stream, 4 * q, &st);
            uint4 v = curand4(&st);
            r[0] = v.x;
            r[1] = v.y;
            r[2] = v.z;
            r[3] = v.w;
        }
        uint32_t sat;
        if (vec && 4 * t + 4 <= n) { /* elements 4t .. 4t+3, all in range */
            const float4 v4 = reinterpret_cast<const float4 *>(x)[t];
            const float v[4] = {v4.x, v4.y, v4.z, v4.w};
            float o[4];
#pragma unroll
            for (int l = 0; l < 4; l++)
                o[l] = round_one<KIND, MODE, PERROW>(plan, grids, cols, 4 * t + l, v[l], r[l],
                                                     &sat, ns, nf, nz);
            reinterpret_cast<float4 *>(y)[t] = make_float4(o[0], o[1], o[2], o[3]);
            continue;
        }
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t gi = 4 * q + l;
            if (gi < index || gi >= index + n) continue;
            const size_t j = (size_t)(gi - index);
            y[j] = round_one<KIND, MODE, PERROW>(plan, grids, cols, j, x[j], r[l], &sat, ns, nf,
                                                 nz);
            if (MASK) mask[j] = (uint8_t)sat;
        }
    }
}

template <int KIND, int MODE, bool MASK, bool PERROW>
__global__ void round_kernel(const float *x, float *y, uint8_t *mask, size_t n, uint64_t index,
                             const __grid_constant__ struct quant_plan plan,
                             const struct quant_grid *grids, size_t cols,
                             unsigned long long *counts)
{
    /* plan is read where it lies (__grid_constant__): round_part takes it by reference */
    unsigned long long ns = 0, nf = 0, nz = 0;
    round_part<KIND, MODE, MASK, PERROW>(x, y, mask, n, index, plan, grids, cols,
                                         (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                                         (uint64_t)gridDim.x * blockDim.x, ns, nf, nz);
    block_add_counts(ns, nf, nz, counts);
}

/* ---- several roundings in one launch (quant_cuda_list_on) */

/* Entries per launch: the arguments travel as one kernel parameter. CUDA 12.1 and later take up
 * to 32 KB of parameters on sm_70 and later (64 entries: 8.7 KB); earlier toolkits, and drivers
 * before R530, take 4 KB (30 entries). */
#if CUDART_VERSION >= 12010
constexpr int kListMax = 64;
#else
constexpr int kListMax = 30;
#endif

struct list_item {
    const float *x;
    float *y;
    unsigned long long *counts;
    uint64_t n, index;
    struct quant_plan plan;
    unsigned first; /* the item's first block; its blocks end at the next item's first */
};

struct list_args {
    int k;
    unsigned blocks; /* in all */
    list_item it[kListMax];
};
static_assert(CUDART_VERSION >= 12010 || sizeof(list_args) <= 4096,
              "the list's kernel parameter exceeds 4 KB, the limit before CUDA 12.1");

/* Blocks of one rounding of n elements from index: a thread per Philox block, at most
 * kListBlocks (grid-stride beyond). */
constexpr uint64_t kListBlocks = 1024;
unsigned list_blocks(uint64_t n, uint64_t index, int threads)
{
    const uint64_t nq = ((index + n - 1) >> 2) - (index >> 2) + 1;
    const uint64_t b = (nq + (uint64_t)threads - 1) / (uint64_t)threads;
    return (unsigned)(b < kListBlocks ? b : kListBlocks);
}

/* round_part over an item's share, with the item's rounding mode as a template argument */
template <int KIND>
__device__ __forceinline__ void list_part(const list_item &it, uint64_t t0, uint64_t step,
                                          unsigned long long &ns, unsigned long long &nf,
                                          unsigned long long &nz)
{
    if (it.plan.mode == QUANT_MODE_STOCHASTIC)
        round_part<KIND, QUANT_MODE_STOCHASTIC, false, false>(it.x, it.y, NULL, it.n, it.index,
                                                               it.plan, NULL, 1, t0, step, ns, nf,
                                                               nz);
    else if (it.plan.mode == QUANT_MODE_NEAREST_AWAY)
        round_part<KIND, QUANT_MODE_NEAREST_AWAY, false, false>(it.x, it.y, NULL, it.n, it.index,
                                                                 it.plan, NULL, 1, t0, step, ns,
                                                                 nf, nz);
    else
        round_part<KIND, QUANT_MODE_NEAREST_EVEN, false, false>(it.x, it.y, NULL, it.n, it.index,
                                                                 it.plan, NULL, 1, t0, step, ns,
                                                                 nf, nz);
}

/* Each block finds its item (the last whose first block is at or before it) and rounds its
 * share of it as round_kernel would; kind and mode are the item's (the same for the block). */
__global__ void round_list_kernel(const __grid_constant__ list_args a)
{
    int lo = 0, hi = a.k - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (a.it[mid].first <= blockIdx.x)
            lo = mid;
        else
            hi = mid - 1;
    }
    const list_item &it = a.it[lo];
    const unsigned end = lo + 1 < a.k ? a.it[lo + 1].first : a.blocks;
    const uint64_t t0 = (uint64_t)(blockIdx.x - it.first) * blockDim.x + threadIdx.x;
    const uint64_t step = (uint64_t)(end - it.first) * blockDim.x;
    unsigned long long ns = 0, nf = 0, nz = 0;
    if (it.plan.kind == QUANT_KIND_GRID)
        list_part<QUANT_KIND_GRID>(it, t0, step, ns, nf, nz);
    else
        list_part<QUANT_KIND_FMT>(it, t0, step, ns, nf, nz);
    block_add_counts(ns, nf, nz, it.counts);
}

template <int KIND, int MODE>
void launch_mode(bool want_mask, bool perrow, int blocks, int threads, const float *x, float *y,
                 uint8_t *mask, size_t n, uint64_t index, const struct quant_plan &p,
                 const struct quant_grid *grids, size_t cols, unsigned long long *counts,
                 cudaStream_t cs)
{
    if (want_mask && perrow)
        round_kernel<KIND, MODE, true, true>
            <<<blocks, threads, 0, cs>>>(x, y, mask, n, index, p, grids, cols, counts);
    else if (want_mask)
        round_kernel<KIND, MODE, true, false>
            <<<blocks, threads, 0, cs>>>(x, y, mask, n, index, p, grids, cols, counts);
    else if (perrow)
        round_kernel<KIND, MODE, false, true>
            <<<blocks, threads, 0, cs>>>(x, y, mask, n, index, p, grids, cols, counts);
    else
        round_kernel<KIND, MODE, false, false>
            <<<blocks, threads, 0, cs>>>(x, y, mask, n, index, p, grids, cols, counts);
}

template <int KIND>
void launch_kind(bool want_mask, bool perrow, int blocks, int threads, const float *x, float *y,
                 uint8_t *mask, size_t n, uint64_t index, const struct quant_plan &p,
                 const struct quant_grid *grids, size_t cols, unsigned long long *counts,
                 cudaStream_t cs)
{
    switch (p.mode) {
    case QUANT_MODE_STOCHASTIC:
        launch_mode<KIND, QUANT_MODE_STOCHASTIC>(want_mask, perrow, blocks, threads, x, y, mask, n,
                                                 index, p, grids, cols, counts, cs);
        break;
    case QUANT_MODE_NEAREST_AWAY:
        launch_mode<KIND, QUANT_MODE_NEAREST_AWAY>(want_mask, perrow, blocks, threads, x, y, mask,
                                                   n, index, p, grids, cols, counts, cs);
        break;
    default:
        launch_mode<KIND, QUANT_MODE_NEAREST_EVEN>(want_mask, perrow, blocks, threads, x, y, mask,
                                                   n, index, p, grids, cols, counts, cs);
        break;
    }
}

/* MX block formats: one warp per block of QUANT_MX_BLOCK elements (blocks restart at every row),
 * grid-stride over the blocks; the warp reduces the largest magnitude with shuffles, then every
 * lane rounds its element with the shared routines of src/quant/quant_impl.h. Random bits:
 * curand_init(seed, stream, element index) + curand, the value adapt_rng_u32_at gives (16 bits:
 * value index / 2, split as quant_sr_bits_at). */
template <int MODE, bool MASK, bool INT>
__global__ void mx_kernel(const float *x, float *y, uint8_t *mask, size_t rows, size_t cols,
                          uint64_t index, struct quant_plan plan, unsigned long long *counts)
{
    const size_t nb = (cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK, total = rows * nb;
    const size_t lane = threadIdx.x & 31;
    unsigned long long ns = 0, nf = 0, nz = 0;
    for (size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < total;
         w += ((size_t)gridDim.x * blockDim.x) >> 5) {
        const size_t row = w / nb, c = (w % nb) * QUANT_MX_BLOCK + lane;
        const bool in = c < cols;
        const size_t j = row * cols + c;
        const float v = in ? x[j] : 0.0f;
        uint32_t a = __float_as_uint(v) & 0x7fffffffu;
        for (int o = 16; o > 0; o >>= 1) a = max(a, __shfl_xor_sync(0xffffffffu, a, o));
        uint32_t r = 0u;
        if (MODE == QUANT_MODE_STOCHASTIC && in) {
            const uint64_t gi = index + j;
            const bool b16 = plan.sr_bits == QUANT_SR_BITS_16;
            curandStatePhilox4_32_10_t st;
            curand_init(plan.seed, plan.stream, b16 ? gi >> 1 : gi, &st);
            r = curand(&st);
            if (b16) r = quant_sr16_bits(r, gi);
        }
        uint32_t sat;
        float o;
        if (a >= 0x7f800000u) {
            o = quant_mx_poison(v, &sat);
        } else {
            const int s = quant_mx_scale(a, plan.mx.emax);
            if (INT)
                o = quant_grid_round(quant_mx_int_grid(s), MODE, 1, v, r, &sat);
            else
                o = quant_fmt_round(plan.fmt, MODE, 0, v * quant_pow2f(-s), r, &sat) *
                    quant_pow2f(s);
        }
        if (in) {
            y[j] = o;
            if (MASK) mask[j] = (uint8_t)sat;
            ns += (unsigned long long)sat;
            nz += o == 0.0f;
            nf += (o == 0.0f && v != 0.0f);
        }
    }
    block_add_counts(ns, nf, nz, counts);
}

template <int MODE>
void launch_mx_mode(bool want_mask, int blocks, int threads, const float *x, float *y,
                    uint8_t *mask, size_t rows, size_t cols, uint64_t index,
                    const struct quant_plan &p, unsigned long long *counts, cudaStream_t cs)
{
    if (want_mask && p.mx.integer)
        mx_kernel<MODE, true, true><<<blocks, threads, 0, cs>>>(x, y, mask, rows, cols, index, p, counts);
    else if (want_mask)
        mx_kernel<MODE, true, false><<<blocks, threads, 0, cs>>>(x, y, mask, rows, cols, index, p, counts);
    else if (p.mx.integer)
        mx_kernel<MODE, false, true><<<blocks, threads, 0, cs>>>(x, y, mask, rows, cols, index, p, counts);
    else
        mx_kernel<MODE, false, false>
            <<<blocks, threads, 0, cs>>>(x, y, mask, rows, cols, index, p, counts);
}

void launch_mx(bool want_mask, int blocks, int threads, const float *x, float *y, uint8_t *mask,
               size_t rows, size_t cols, uint64_t index, const struct quant_plan &p,
               unsigned long long *counts, cudaStream_t cs)
{
    switch (p.mode) {
    case QUANT_MODE_STOCHASTIC:
        launch_mx_mode<QUANT_MODE_STOCHASTIC>(want_mask, blocks, threads, x, y, mask, rows, cols,
                                              index, p, counts, cs);
        break;
    case QUANT_MODE_NEAREST_AWAY:
        launch_mx_mode<QUANT_MODE_NEAREST_AWAY>(want_mask, blocks, threads, x, y, mask, rows,
                                                cols, index, p, counts, cs);
        break;
    default:
        launch_mx_mode<QUANT_MODE_NEAREST_EVEN>(want_mask, blocks, threads, x, y, mask, rows, cols,
                                                index, p, counts, cs);
        break;
    }
}

} // namespace

extern "C" int quant_cuda_built(void) { return 1; }

extern "C" void quant_cuda_set_launch(int threads, int blocks)
{
    /* whole warps: the reductions shuffle over all 32 lanes */
    g_threads = threads > 0 ? (threads + 31) / 32 * 32 : 0;
    if (g_threads > 1024) g_threads = 1024;
    g_blocks = blocks > 0 ? blocks : 0;
}

namespace {

/* Bytes of scratch quant_cuda_rows_on needs: three counters' room (quant_cuda_rows keeps its
 * counts there), and for formats whose grid follows a range (bfp, muppet) the range keys and
 * one grid per block. */
size_t scratch_for(const struct quant_spec *s, size_t rows, bool *perrow, size_t *nblk)
{
    const struct quant_type *t = quant_type_of(s->format);
    *perrow = t->needs_range;
    *nblk = (t->needs_range && s->block == QUANT_BLOCK_DIM0) ? rows : 1;
    return 3 * sizeof(unsigned long long) +
           (*perrow ? *nblk * (2 * sizeof(uint32_t) + sizeof(struct quant_grid)) : 0);
}

} // namespace

extern "C" enum adapt_status quant_cuda_range_on(const float *d_x, size_t n, uint32_t *d_keys,
                                                 void *stream)
{
    cudaStream_t cs = (cudaStream_t)stream;
    keys_init_kernel<<<1, 32, 0, cs>>>(d_keys, 1);
    if (n) {
        size_t bx = (n + 255) / 256;
        range_kernel<<<(unsigned)(bx < 1024 ? bx : 1024), 256, 0, cs>>>(d_x, 1, n, d_keys);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? ADAPT_OK : cuda_status(e, "range kernel");
}

extern "C" size_t quant_cuda_scratch_bytes(const struct quant_spec *s, size_t rows, size_t cols)
{
    (void)cols;
    bool perrow;
    size_t nblk;
    return scratch_for(s, rows, &perrow, &nblk);
}

extern "C" enum adapt_status quant_cuda_rows_on(const struct quant_spec *s, const float *d_x,
                                                float *d_y, size_t rows, size_t cols,
                                                struct quant_key key, uint8_t *d_mask,
                                                unsigned long long *d_counts, void *scratch,
                                                size_t scratch_bytes, void *stream)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    if (s->format == QUANT_FORMAT_PLUGIN)
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "quant cuda: plugin(%s) is a CPU rounding plugin; plugins do not run "
                           "on CUDA devices",
                           quant_plugin_text(s->plugin));
    size_t n = rows * cols;
    if (n == 0) return ADAPT_OK;
    if (!d_x || !d_y) return ADAPT_ERROR(ADAPT_EINVAL, "quant cuda: NULL array");
    bool perrow;
    size_t nblk;
    size_t need = scratch_for(s, rows, &perrow, &nblk);
    if (!scratch || scratch_bytes < need)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant cuda: %zu bytes of scratch for %zu needed",
                           scratch_bytes, need);
    size_t blen = n / nblk;
    struct quant_plan p;
    if (perrow) {
        /* the device fills the grids; the plan carries mode, seed and stream */
        struct quant_range r0 = {0.0f, 0.0f, 0.0f};
        st = quant_plan_init(s, &r0, key, &p);
    } else {
        st = quant_plan_init(s, NULL, key, &p);
    }
    if (st != ADAPT_OK) return st;

    cudaStream_t cs = (cudaStream_t)stream;
    const int threads = g_threads ? g_threads : 256;
    /* the scratch's first three words are left to quant_cuda_rows' counts */
    uint32_t *keys = (uint32_t *)((unsigned long long *)scratch + 3);
    struct quant_grid *grids = perrow ? (struct quant_grid *)(keys + 2 * nblk) : NULL;
    if (perrow) {
        int b = (int)((nblk + 255) / 256 < 4096 ? (nblk + 255) / 256 : 4096);
        keys_init_kernel<<<b, 256, 0, cs>>>(keys, nblk);
        size_t bx = (blen + 255) / 256;
        dim3 rg((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(nblk < 65535 ? nblk : 65535));
        range_kernel<<<rg, 256, 0, cs>>>(d_x, nblk, blen, keys);
        grids_kernel<<<b, 256, 0, cs>>>(keys, nblk, (int)s->format, s->wl, grids);
    }
    uint64_t nq = ((key.index + n - 1) >> 2) - (key.index >> 2) + 1;
    if (p.kind == QUANT_KIND_MX) /* one warp per block */
        nq = (uint64_t)rows * ((cols + QUANT_MX_BLOCK - 1) / QUANT_MX_BLOCK) * 32;
    uint64_t want = (nq + threads - 1) / threads;
    /* at most kRoundBlocks: a grid-stride walk of a few waves, and few count atomics */
    int blocks = g_blocks ? g_blocks : (int)(want < kRoundBlocks ? want : kRoundBlocks);
    if (p.kind == QUANT_KIND_MX)
        launch_mx(d_mask != NULL, blocks, threads, d_x, d_y, d_mask, rows, cols, key.index, p,
                  d_counts, cs);
    else if (p.kind == QUANT_KIND_GRID)
        launch_kind<QUANT_KIND_GRID>(d_mask != NULL, perrow, blocks, threads, d_x, d_y, d_mask, n,
                                     key.index, p, grids, blen, d_counts, cs);
    else
        launch_kind<QUANT_KIND_FMT>(d_mask != NULL, perrow, blocks, threads, d_x, d_y, d_mask, n,
                                    key.index, p, grids, blen, d_counts, cs);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(e, "kernel launch");
    return ADAPT_OK;
}

/* A job of a list: a format that rounds in a list, arrays where there are elements, and its
 * plan (into *plan) when it has elements. */
static enum adapt_status list_job_plan(const struct quant_cuda_job *j, struct quant_plan *plan)
{
    if (!quant_cuda_list_fits(j->s)) {
        enum adapt_status st = quant_spec_check(j->s);
        return st != ADAPT_OK ? st
                              : ADAPT_ERROR(ADAPT_EINVAL,
                                            "quant cuda: %s takes its scale from the data or "
                                            "blocks; it does not round in a list",
                                            quant_type_of(j->s->format)->name);
    }
    if (j->n == 0) return ADAPT_OK;
    if (!j->x || !j->y) return ADAPT_ERROR(ADAPT_EINVAL, "quant cuda: NULL array");
    return quant_plan_init(j->s, NULL, j->key, plan);
}

extern "C" enum adapt_status quant_cuda_list_on(const struct quant_cuda_job *jobs, int k,
                                                void *stream)
{
    cudaStream_t cs = (cudaStream_t)stream;
    const int threads = g_threads ? g_threads : 256;
    /* every job checked before the first launch: a bad one rounds nothing */
    for (int i = 0; i < k; i++) {
        struct quant_plan plan;
        enum adapt_status st = list_job_plan(&jobs[i], &plan);
        if (st != ADAPT_OK) return st;
    }
    list_args a;
    a.k = 0;
    a.blocks = 0;
    for (int i = 0; i <= k; i++) {
        if (a.k == kListMax || (i == k && a.k > 0)) { /* launch what is gathered */
            round_list_kernel<<<a.blocks, threads, 0, cs>>>(a);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) return cuda_status(e, "kernel launch");
            a.k = 0;
            a.blocks = 0;
        }
        if (i == k) break;
        const struct quant_cuda_job *j = &jobs[i];
        if (j->n == 0) continue;
        list_item &it = a.it[a.k];
        enum adapt_status st = list_job_plan(j, &it.plan);
        if (st != ADAPT_OK) return st;
        it.x = j->x;
        it.y = j->y;
        it.counts = j->counts;
        it.n = j->n;
        it.index = j->key.index;
        it.first = a.blocks;
        a.blocks += list_blocks(j->n, j->key.index, threads);
        a.k++;
    }
    return ADAPT_OK;
}

extern "C" enum adapt_status quant_cuda_rows(const struct quant_spec *s, const float *d_x,
                                             float *d_y, size_t rows, size_t cols,
                                             struct quant_key key, uint8_t *d_mask,
                                             struct quant_stats *stats)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    if (rows * cols == 0 && s->format != QUANT_FORMAT_PLUGIN) return ADAPT_OK;
    size_t scratch = quant_cuda_scratch_bytes(s, rows, cols);
    void *mem = NULL;
    cudaError_t e = cudaMalloc(&mem, scratch);
    if (e != cudaSuccess) return cuda_status(e, "scratch allocation");
    unsigned long long *counts = (unsigned long long *)mem;
    e = cudaMemset(counts, 0, 3 * sizeof(unsigned long long));
    if (e != cudaSuccess) {
        cudaFree(mem);
        return cuda_status(e, "scratch");
    }
    st = quant_cuda_rows_on(s, d_x, d_y, rows, cols, key, d_mask, counts, mem, scratch, NULL);
    unsigned long long c[3] = {0, 0, 0};
    if (st == ADAPT_OK && (e = cudaMemcpy(c, counts, sizeof c, cudaMemcpyDeviceToHost)) !=
                              cudaSuccess)
        st = cuda_status(e, "kernel");
    cudaFree(mem);
    if (st != ADAPT_OK) return st;
    if (stats) {
        stats->saturated += c[0];
        stats->flushed += c[1];
        stats->zeros += c[2];
    }
    return ADAPT_OK;
}

extern "C" enum adapt_status quant_cuda_rows_host(const struct quant_spec *s, const float *x,
                                                  float *y, size_t rows, size_t cols,
                                                  struct quant_key key, uint8_t *mask,
                                                  struct quant_stats *stats)
{
    size_t n = rows * cols;
    if (n == 0) return quant_spec_check(s);
    float *dx = NULL, *dy = NULL;
    uint8_t *dm = NULL;
    enum adapt_status st = ADAPT_OK;
    cudaError_t e = cudaMalloc((void **)&dx, n * sizeof(float));
    if (e != cudaSuccess) return cuda_status(e, "allocation");
    if (x != y && (e = cudaMalloc((void **)&dy, n * sizeof(float))) != cudaSuccess) {
        st = cuda_status(e, "allocation");
        goto free_x;
    }
    if (mask && (e = cudaMalloc((void **)&dm, n)) != cudaSuccess) {
        st = cuda_status(e, "allocation");
        goto free_y;
    }
    if ((e = cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) {
        st = cuda_status(e, "copy to device");
        goto free_mask;
    }
    if ((st = quant_cuda_rows(s, dx, dy ? dy : dx, rows, cols, key, dm, stats)) != ADAPT_OK)
        goto free_mask;
    if ((e = cudaMemcpy(y, dy ? dy : dx, n * sizeof(float), cudaMemcpyDeviceToHost)) !=
            cudaSuccess ||
        (mask && (e = cudaMemcpy(mask, dm, n, cudaMemcpyDeviceToHost)) != cudaSuccess))
        st = cuda_status(e, "copy to host");
free_mask:
    cudaFree(dm);
free_y:
    cudaFree(dy);
free_x:
    cudaFree(dx);
    return st;
}

extern "C" enum adapt_status quant_cuda_list_host(const struct quant_cuda_job *jobs, int k,
                                                  struct quant_stats *stats)
{
    size_t total = 0;
    for (int i = 0; i < k; i++) total += jobs[i].n;
    struct quant_cuda_job *dj = (struct quant_cuda_job *)calloc((size_t)k + 1, sizeof *dj);
    float *d = NULL;
    unsigned long long *dc = NULL;
    unsigned long long *hc = (unsigned long long *)calloc(3 * (size_t)k + 1, sizeof *hc);
    enum adapt_status st = ADAPT_OK;
    cudaError_t e = cudaSuccess;
    if (!dj || !hc) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "quant cuda: cannot allocate %d jobs", k);
        goto out;
    }
    /* each job's x, then its y (in place when the host arrays are one) */
    if ((e = cudaMalloc((void **)&d, (2 * total + 1) * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc((void **)&dc, (3 * (size_t)k + 1) * sizeof *dc)) != cudaSuccess ||
        (e = cudaMemset(dc, 0, (3 * (size_t)k + 1) * sizeof *dc)) != cudaSuccess) {
        st = cuda_status(e, "allocation");
        goto out;
    }
    {
        size_t off = 0;
        for (int i = 0; i < k; i++) {
            dj[i] = jobs[i];
            dj[i].x = jobs[i].x ? d + off : NULL;
            dj[i].y = !jobs[i].y ? NULL : jobs[i].y == jobs[i].x ? d + off : d + off + jobs[i].n;
            dj[i].counts = dc + 3 * (size_t)i;
            if (jobs[i].n && jobs[i].x &&
                (e = cudaMemcpy(d + off, jobs[i].x, jobs[i].n * sizeof(float),
                                cudaMemcpyHostToDevice)) != cudaSuccess) {
                st = cuda_status(e, "copy to device");
                goto out;
            }
            off += 2 * jobs[i].n;
        }
    }
    if ((st = quant_cuda_list_on(dj, k, NULL)) != ADAPT_OK) goto out;
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        st = cuda_status(e, "kernel");
        goto out;
    }
    for (int i = 0; i < k; i++)
        if (jobs[i].n && jobs[i].y &&
            (e = cudaMemcpy(jobs[i].y, dj[i].y, jobs[i].n * sizeof(float),
                            cudaMemcpyDeviceToHost)) != cudaSuccess) {
            st = cuda_status(e, "copy to host");
            goto out;
        }
    if ((e = cudaMemcpy(hc, dc, 3 * (size_t)k * sizeof *hc, cudaMemcpyDeviceToHost)) !=
        cudaSuccess) {
        st = cuda_status(e, "copy to host");
        goto out;
    }
    for (int i = 0; stats && i < k; i++) {
        stats[i].saturated += hc[3 * i];
        stats[i].flushed += hc[3 * i + 1];
        stats[i].zeros += hc[3 * i + 2];
    }
out:
    cudaFree(d);
    cudaFree(dc);
    free(dj);
    free(hc);
    return st;
}
