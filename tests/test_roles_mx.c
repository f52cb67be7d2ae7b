/* tests/test_roles_mx.c: roles.mx_axis = gemm and channels (src/policy/mx_gemm.c,
 * src/net/layers/mx_gemm.c):
 * each MX operand of a conv2d or linear unit is rounded once per GEMM, with its blocks of 32
 * along that GEMM's reduction dimension (doc/numerics.md, "Block formats: OCP Microscaling
 * (MX)"). The cases are built so that blocking along rows and along the GEMMs differ.
 *
 * The arithmetic every expected value below uses (MXFP8 E4M3, OCP MX v1.0): a block's scale is
 * X = 2^(floor(log2 amax) - 8); each v / X is rounded to E4M3, whose normal numbers start at
 * 2^-6 and whose subnormals are multiples of 2^-9. So in a block holding 256 (X = 1) a value
 * 2^-12 is 2^-12 / 2^-9 = 1/8 of the smallest subnormal and rounds to 0 (flushed); in a block
 * whose amax is 2^-12 (X = 2^-20) it is 2^8, exact; 1 beside 256 (1 / 1 = 2^0, normal) and
 * 2^-12 beside 1 (X = 2^-8: 2^-4, normal) are exact too. Every sum below is exact in float32. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/net.h"
#include "src/policy/precision.h"
#include "src/policy/roles.h"
#include "tests/testutil_net.h"

#define T12 (1.0f / 4096.0f) /* 2^-12 */

/* The roles of `recipe` (mxfp8, mxfp8_gemm, or mxfp8_channels: mxfp8 with roles.mx_axis =
 * channels) on net: the precision state as the policy makes it (the roles, then the MX axis),
 * one training forward of x and a backward of dy. */
static struct adapt_precision *run_step(struct adapt_net *net, const char *recipe, const float *x,
                                        const float *dy, int n)
{
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(16,8)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    char a[64];
    const int chan = !strcmp(recipe, "mxfp8_channels");
    snprintf(a, sizeof a, "roles.recipe=%s", chan ? "mxfp8" : recipe);
    ck_assert_int_eq(adapt_config_set(&cfg, a), ADAPT_OK);
    if (chan) ck_assert_int_eq(adapt_config_set(&cfg, "roles.mx_axis=channels"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_OK);
    struct adapt_role_fmt roles[ADAPT_ROLE_N];
    for (int r = 0; r < ADAPT_ROLE_N; r++)
        ck_assert_int_eq(adapt_config_role(&cfg, (enum adapt_role)r, &roles[r]), ADAPT_OK);
    struct adapt_roles_opts o = {16, 0, 0, 0};
    ck_assert_int_eq(adapt_precision_set_roles(p, roles, &o), ADAPT_OK);
    if (adapt_config_mx_axis(&cfg) != ADAPT_MX_AXIS_ROWS)
        ck_assert_int_eq(adapt_precision_set_mx_gemm(p, "test", chan), ADAPT_OK);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    adapt_net_forward(net, x, n, 1);
    adapt_net_zero_grad(net);
    adapt_net_backward(net, dy, n);
    return p;
}

static struct adapt_net *linear_net(void)
{
    const int in[3] = {32, 1, 1};
    struct adapt_net *net = adapt_net_alloc("lin", in, 2);
    /* a relu first (identity on these positive inputs): the network input takes no gradient */
    ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", in), 0, -1), 1);
    ck_assert_int_eq(adapt_net_add(net, adapt_linear_create("fc", in, 2, 1), 1, -1), 2);
    ck_assert_int_eq(adapt_net_finalize(net, 2), ADAPT_OK);
    memset(net->param[1]->value.data, 0, 2 * sizeof(float)); /* bias 0 */
    return net;
}

/* Linear, 2 samples x 32 inputs -> 2 outputs, W and x with the same pattern:
 *   W[0] = x[0] = (256, 2^-12 x 31), W[1] = x[1] = (2^-12 x 32), dy = 1.
 * Forward (blocks along K, rows of W and x, in both modes): row 0 -> (256, 0 x 31), row 1
 * exact; y[0] = (256 * 256, 256 * 2^-12) = (65536, 2^-4), y[1] = (2^-4, 32 * 2^-24 = 2^-19).
 * Input gradient dx = dy W: gemm rounds W along the outputs (column k of W is a block of 2):
 * column 0 (256, 2^-12) -> (256, 0), columns 1.. exact, so dx[j] = (256, 2^-11 x 31); rows
 * reuses the forward copy: dx[j] = (256 + 2^-12, 2^-12 x 31).
 * Weight gradient dW = dy^T x: gemm rounds x along the batch (column k of x a block of 2),
 * the same way, so dW[o] = (256, 2^-11 x 31); rows reuses the forward copy of x: dW[o] =
 * (256 + 2^-12, 2^-12 x 31). */
START_TEST(test_mx_gemm_linear)
{
    float x[64], dy[4] = {1, 1, 1, 1};
    for (int i = 0; i < 64; i++) x[i] = T12;
    x[0] = 256.0f;
    for (int mode = 0; mode < 2; mode++) {
        struct adapt_net *net = linear_net();
        memcpy(net->param[0]->value.data, x, sizeof x);
        struct adapt_precision *p = run_step(net, mode ? "mxfp8_gemm" : "mxfp8", x, dy, 2);
        const float *y = net->act[2], *dx = net->dact[1], *dw = net->param[0]->grad.data;
        ck_assert_float_eq(y[0], 65536.0f);
        ck_assert_float_eq(y[1], 0.0625f);
        ck_assert_float_eq(y[2], 0.0625f);
        ck_assert_float_eq(y[3], ldexpf(1.0f, -19));
        for (int j = 0; j < 2; j++) {
            ck_assert_float_eq(dx[j * 32], mode ? 256.0f : 256.0f + T12);
            for (int k = 1; k < 32; k++) ck_assert_float_eq(dx[j * 32 + k], mode ? 2 * T12 : T12);
        }
        for (int o = 0; o < 2; o++) {
            ck_assert_float_eq(dw[o * 32], mode ? 256.0f : 256.0f + T12);
            for (int k = 1; k < 32; k++) ck_assert_float_eq(dw[o * 32 + k], mode ? 2 * T12 : T12);
        }
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* Linear, the output gradient's two blockings: W = x = 1 (exact however blocked),
 *   dy = ((256, 2^-12), (2^-12, 2^-12)).
 * Input gradient (blocks along the outputs, a sample's row of dy): row 0 -> (256, 0), row 1
 * exact, so dx[0][k] = 256 and dx[1][k] = 2^-11 in both modes (rows blocks dy the same way).
 * Weight gradient (gemm: blocks along the batch, a column of dy): column 0 (256, 2^-12) ->
 * (256, 0), column 1 exact, so dW[0][k] = 256, dW[1][k] = 2^-11; rows reuses the per-sample
 * copy: dW[0][k] = 256 + 2^-12, dW[1][k] = 0 + 2^-12. The bias gradient sums the float32 dy
 * under gemm (no GEMM): db = (256 + 2^-12, 2^-11). */
START_TEST(test_mx_gemm_linear_dy)
{
    float x[64], w[64], dy[4] = {256.0f, T12, T12, T12};
    for (int i = 0; i < 64; i++) x[i] = w[i] = 1.0f;
    for (int mode = 0; mode < 2; mode++) {
        struct adapt_net *net = linear_net();
        memcpy(net->param[0]->value.data, w, sizeof w);
        struct adapt_precision *p = run_step(net, mode ? "mxfp8_gemm" : "mxfp8", x, dy, 2);
        const float *dx = net->dact[1], *dw = net->param[0]->grad.data;
        for (int k = 0; k < 32; k++) {
            ck_assert_float_eq(dx[k], 256.0f);
            ck_assert_float_eq(dx[32 + k], 2 * T12);
            ck_assert_float_eq(dw[k], mode ? 256.0f : 256.0f + T12);
            ck_assert_float_eq(dw[32 + k], mode ? 2 * T12 : T12);
        }
        if (mode) {
            ck_assert_float_eq(net->param[1]->grad.data[0], 256.0f + T12);
            ck_assert_float_eq(net->param[1]->grad.data[1], 2 * T12);
        }
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* conv2d, 1 sample of 2 x 4 x 5, kernel 4, 2 output channels, no bias: 2 output pixels
 * (ox = 0, 1), K = 2 * 4 * 4 = 32, lowered row k = (c*4 + ky)*4 + kx reads x[c][ky][kx + ox].
 * x = 2^-12 everywhere but x[0][0][0] = 256; W[0] = (256, 1 x 31), W[1] = (2^-12, 1 x 31);
 * dy = 1.
 * Forward, gemm: the column of pixel 0 holds 256, its other 31 values flush to 0; pixel 1's
 * column does not read x[0][0][0] and is exact (32 x 2^-12). The weight rows (blocks along K)
 * are exact. y[1] (channel 1) = (2^-12 * 256, 2^-12 * 2^-12 + 31 * 2^-12)
 * = (2^-4, 2^-24 + 31 * 2^-12). Rows blocks the input tensor along W, H, C: flat 0..31 (all
 * of channel 0 and channel 1's first 12 values) hold 256, so those 2^-12 flush, flat 32..39
 * (x[1][2][2..4], x[1][3][0..4]) are exact; pixel 0 reads 6 of these, so y[1][0] = 2^-4 +
 * 6 * 2^-12.
 * Weight gradient (gemm: blocks along the N*P = 2 pixels, a row of the lowered input): row 0
 * (256, x[0][0][1] = 2^-12) -> (256, 0), every other row (2^-12, 2^-12) exact; dW[o] = (256,
 * 2^-11 x 31).
 * Input gradient (gemm: W^T blocks along the 2 output channels): column 0 (256, 2^-12) ->
 * (256, 0), the others exact; x[0][0][0] is read by pixel 0's k = 0 only, so dx[0][0][0] = 256
 * (rows: the forward copy, 256 + 2^-12); x[0][0][1] by pixel 0's k = 1 and pixel 1's k = 0:
 * 1 + 1 + 256 + 0 = 258. */
/* The network of the conv cases below: a relu (the identity on their inputs), then the conv2d
 * 2 x 4 x 5 -> 2 channels, kernel 4, no bias, with weights w; x = 2^-12 everywhere but
 * x[0][0][0] = 256. */
static struct adapt_net *conv_case(const float w[64], float x[40])
{
    const int in[3] = {2, 4, 5};
    for (int i = 0; i < 40; i++) x[i] = T12;
    x[0] = 256.0f;
    struct adapt_net *net = adapt_net_alloc("conv", in, 4);
    ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", in), 0, -1), 1);
    ck_assert_int_eq(adapt_net_add(net, adapt_conv2d_create("c", in, 2, 4, 1, 0, 0), 1, -1), 2);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    memcpy(net->param[0]->value.data, w, 64 * sizeof(float));
    return net;
}

START_TEST(test_mx_gemm_conv)
{
    float x[40], w[64], dy[4] = {1, 1, 1, 1};
    for (int i = 0; i < 64; i++) w[i] = 1.0f;
    w[0] = 256.0f;
    w[32] = T12;
    for (int mode = 0; mode < 2; mode++) {
        struct adapt_net *net = conv_case(w, x);
        struct adapt_precision *p = run_step(net, mode ? "mxfp8_gemm" : "mxfp8", x, dy, 1);
        const float *y = net->act[2], *dx = net->dact[1], *dw = net->param[0]->grad.data;
        ck_assert_float_eq(y[2], mode ? 0.0625f : 0.0625f + 6 * T12);
        if (mode) {
            ck_assert_float_eq(y[0], 65536.0f);
            ck_assert_float_eq(y[1], 256 * T12 + 31 * T12);
            ck_assert_float_eq(y[3], T12 * T12 + 31 * T12);
            for (int o = 0; o < 2; o++) {
                ck_assert_float_eq(dw[o * 32], 256.0f);
                for (int k = 1; k < 32; k++) ck_assert_float_eq(dw[o * 32 + k], 2 * T12);
            }
            ck_assert_float_eq(dx[1], 258.0f);
        }
        ck_assert_float_eq(dx[0], mode ? 256.0f : 256.0f + T12);
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* roles.mx_axis = channels, the conv of test_mx_gemm_conv with W[0][0][0][1] = 2^-12 too:
 * w = 1 everywhere but w[0] = 256, w[1] = w[32] = 2^-12; K index k = (c*4 + ky)*4 + kx.
 * Weight copy, blocks along Cin at each (o, ky, kx): (w[0], w[16]) = (256, 1), (w[1], w[17]) =
 * (2^-12, 1) (X = 2^-8: 2^-4, normal) and (w[32], w[48]) = (2^-12, 1) are exact, so the copy is
 * w; the gemm copy's row 0 (blocks along K, amax 256) flushes w[1] to 0.
 * Input, blocks along Cin at each input pixel: (x[0][0][0], x[1][0][0]) = (256, 2^-12) flushes
 * x[1][0][0]; every other pixel's pair (2^-12, 2^-12) is exact. So, summed over c, ky, kx:
 *   y[0][1] = 256 x 2^-12 + 2^-12 x 2^-12 + 30 x 2^-12 = 286 x 2^-12 + 2^-24 (gemm: w[1] is 0,
 *            286 x 2^-12)
 *   y[1][0] = 2^-12 x 256 + 15 x 2^-12 (channel 0) + 15 x 2^-12 (channel 1, x[1][0][0] = 0)
 *           = 286 x 2^-12 (gemm: pixel 0's lowered column holds 256, the rest flush: 2^-4)
 *   y[1][1] = 2^-24 + 31 x 2^-12
 * Weight gradient, blocks along the batch (1 sample: each value its own block, exact):
 * dW[o][0] = x[0][0][0] + x[0][0][1] = 256 + 2^-12 (gemm: the row (256, 2^-12) of the lowered
 * input flushes to (256, 0)), dW[o][k > 0] = 2 x 2^-12.
 * Input gradient, as gemm (W^T blocks along Cout from the master): column 0 (256, 2^-12) ->
 * (256, 0), column 1 (2^-12, 1) exact: dx[0][0][0] = 256, dx[0][0][1] = (2^-12 + 1) + 256. */
START_TEST(test_mx_channels_conv)
{
    float x[40], w[64], dy[4] = {1, 1, 1, 1};
    for (int i = 0; i < 64; i++) w[i] = 1.0f;
    w[0] = 256.0f;
    w[1] = w[32] = T12;
    for (int mode = 0; mode < 2; mode++) { /* 0 gemm, 1 channels */
        struct adapt_net *net = conv_case(w, x);
        struct adapt_precision *p = run_step(net, mode ? "mxfp8_channels" : "mxfp8_gemm", x, dy, 1);
        const float *y = net->act[2], *dx = net->dact[1], *dw = net->param[0]->grad.data;
        const float *wq = net->param[0]->use;
        ck_assert_float_eq(wq[1], mode ? T12 : 0.0f);
        ck_assert_float_eq(wq[32], T12);
        ck_assert_float_eq(y[1], mode ? 286 * T12 + T12 * T12 : 286 * T12);
        ck_assert_float_eq(y[2], mode ? 286 * T12 : 0.0625f);
        ck_assert_float_eq(y[3], T12 * T12 + 31 * T12);
        for (int o = 0; o < 2; o++) {
            ck_assert_float_eq(dw[o * 32], mode ? 256.0f + T12 : 256.0f);
            for (int k = 1; k < 32; k++) ck_assert_float_eq(dw[o * 32 + k], 2 * T12);
        }
        ck_assert_float_eq(dx[0], 256.0f);
        ck_assert_float_eq(dx[1], 257.0f + T12);
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The layers' per-GEMM copies against a plain recomputation from the definitions in
 * src/net/layers/mx_gemm.c: the lowered input built by loops, each copy one quant_rows call over
 * the whole row-major matrix with its key (stochastic rounding, so a wrong element index or
 * block shows as flipped values), the products summed in double. A conv2d with padding and
 * stride whose P is not a multiple of 32 (weight-gradient blocks across samples), and a linear
 * layer. Tolerance: float32 summation, 1e-5 of the sum of |terms|. With chan (roles.mx_axis =
 * channels) the convolution's copies follow microxcaling's MX convolution instead: the
 * unlowered input along Cin at each input pixel for the forward, and along the batch at each
 * element for the weight gradient, dY along the batch, the weight copy along Cin at each
 * (o, ky, kx); the lowered input is then built from those copies. */
struct ref_geom {
    int cin, h, w, k, stride, pad, cout, n; /* k = 0: linear, cin * h * w inputs */
};

/* Xcol (K, N*P) of the input xs by loops: element (k, j*P + p) */
static void ref_lower(const struct ref_geom *G, int wo, size_t P, size_t K, const float *xs,
                      double *xc)
{
    const size_t N = (size_t)G->n, NP = N * P, in = (size_t)G->cin * G->h * G->w;
    for (size_t j = 0; j < N; j++)
        for (size_t k = 0; k < K; k++)
            for (size_t p = 0; p < P; p++) {
                float v;
                if (!G->k) {
                    v = xs[j * in + k];
                } else {
                    int c = (int)k / (G->k * G->k), ky = (int)k / G->k % G->k, kx = (int)k % G->k;
                    int iy = (int)p / wo * G->stride - G->pad + ky;
                    int ix = (int)p % wo * G->stride - G->pad + kx;
                    v = iy < 0 || iy >= G->h || ix < 0 || ix >= G->w
                            ? 0.0f
                            : xs[j * in + ((size_t)c * G->h + iy) * G->w + ix];
                }
                xc[k * NP + j * P + p] = v;
            }
}

static void check_close(const float *got, const double *want, const double *mag, size_t n,
                        const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-30, "%s[%zu]: %g, expected %g",
                      what, i, got[i], want[i]);
}

static void mx_reference_case(const struct ref_geom *G, int chan)
{
    const int conv = G->k > 0;
    const int ch = chan && conv; /* linear layers: channels is gemm */
    const int in_chw[3] = {G->cin, G->h, G->w};
    const int ho = conv ? (G->h + 2 * G->pad - G->k) / G->stride + 1 : 1;
    const int wo = conv ? (G->w + 2 * G->pad - G->k) / G->stride + 1 : 1;
    const size_t P = (size_t)ho * wo,
                 K = conv ? (size_t)G->cin * G->k * G->k : (size_t)G->cin * G->h * G->w;
    const size_t N = (size_t)G->n, NP = N * P, C = (size_t)G->cout;
    const size_t in = (size_t)G->cin * G->h * G->w;
    struct tu_layer t;
    struct adapt_layer *l =
        conv ? adapt_conv2d_create("c", in_chw, G->cout, G->k, G->stride, G->pad, 1)
             : adapt_linear_create("f", in_chw, G->cout, 1);
    ck_assert_ptr_nonnull(l);
    tu_layer_bind(&t, l, G->n, 1);
    float *w = l->param[0].value.data, *b = l->param[1].value.data;
    for (size_t i = 0; i < C * K; i++) w[i] = (float)sin(0.71 * i + 0.3) * (i % 7 ? 1.0f : 40.0f);
    for (size_t i = 0; i < C; i++) b[i] = 0.1f * (float)i;
    for (size_t i = 0; i < N * in; i++) t.x[0][i] = (float)cos(0.37 * i) * (i % 11 ? 0.01f : 3.0f);
    for (size_t i = 0; i < NP * C; i++)
        t.dy[i] = (float)sin(0.53 * i + 1.0) * (i % 5 ? 1.0f : 0.001f);
    struct adapt_mx_gemm m;
    struct adapt_mx_scratch scr = {NULL, 0};
    memset(&m, 0, sizeof m);
    m.scratch = &scr;
    m.w = m.x = m.dy = 1;
    m.channels = chan;
    ck_assert_int_eq(quant_spec_parse("mxfp8_e4m3", &m.xs), ADAPT_OK);
    m.xs.rounding = QUANT_ROUND_STOCHASTIC;
    m.ws = m.dys = m.xs;
    for (int c = 0; c < ADAPT_MX_COPIES; c++)
        m.key[c] = (struct quant_key){5, 100 + (uint64_t)c, 0};
    l->mx = &m;
    /* the unit's weight copy (rows along K, or under channels along Cin at each (o, ky, kx)),
     * as the precision state makes it */
    float *wq = malloc(sizeof(float) * C * K);
    const struct quant_key wkey = {5, 99, 0};
    if (ch) {
        const size_t kk = (size_t)G->k * G->k, cin = (size_t)G->cin;
        ck_assert_int_eq(
            adapt_mx_channels_weight(&m.ws, w, wq, G->cout, G->cin, (int)kk, wkey, NULL), ADAPT_OK);
        float *t = malloc(sizeof(float) * C * K);
        for (size_t o = 0; o < C; o++)
            for (size_t c = 0; c < cin; c++)
                for (size_t q = 0; q < kk; q++)
                    t[(o * kk + q) * cin + c] = w[(o * cin + c) * kk + q];
        ck_assert_int_eq(quant_rows(&m.ws, t, t, C * kk, cin, wkey, NULL, NULL), ADAPT_OK);
        for (size_t o = 0; o < C; o++)
            for (size_t c = 0; c < cin; c++)
                for (size_t q = 0; q < kk; q++)
                    ck_assert_msg(wq[(o * cin + c) * kk + q] == t[(o * kk + q) * cin + c],
                                  "weight copy (%zu, %zu, %zu)", o, c, q);
        free(t);
    } else {
        ck_assert_int_eq(quant_rows(&m.ws, w, wq, C, K, wkey, NULL, NULL), ADAPT_OK);
    }
    l->param[0].use = wq;
    tu_layer_zero_grads(&t);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);

    /* channels: the unlowered copies, x^T per pixel (N*HW, Cin), x^T (in, N), dY^T (C*P, N) */
    const size_t HW = (size_t)G->h * G->w, cin = (size_t)G->cin;
    float *xf = malloc(sizeof(float) * N * in), *xw = malloc(sizeof(float) * N * in);
    float *dyw = malloc(sizeof(float) * NP * C), *tt = malloc(sizeof(float) * N * in);
    memcpy(xf, t.x[0], sizeof(float) * N * in);
    memcpy(xw, t.x[0], sizeof(float) * N * in);
    memcpy(dyw, t.dy, sizeof(float) * NP * C);
    if (ch) {
        for (size_t j = 0; j < N; j++)
            for (size_t c = 0; c < cin; c++)
                for (size_t q = 0; q < HW; q++)
                    tt[(j * HW + q) * cin + c] = xf[j * in + c * HW + q];
        ck_assert_int_eq(quant_rows(&m.xs, tt, tt, N * HW, cin, m.key[ADAPT_MX_X_FWD], NULL, NULL),
                         0);
        for (size_t j = 0; j < N; j++)
            for (size_t c = 0; c < cin; c++)
                for (size_t q = 0; q < HW; q++)
                    xf[j * in + c * HW + q] = tt[(j * HW + q) * cin + c];
        for (size_t j = 0; j < N; j++)
            for (size_t e = 0; e < in; e++) tt[e * N + j] = xw[j * in + e];
        ck_assert_int_eq(quant_rows(&m.xs, tt, tt, in, N, m.key[ADAPT_MX_X_WGRAD], NULL, NULL), 0);
        for (size_t j = 0; j < N; j++)
            for (size_t e = 0; e < in; e++) xw[j * in + e] = tt[e * N + j];
        float *td = malloc(sizeof(float) * NP * C);
        for (size_t j = 0; j < N; j++)
            for (size_t e = 0; e < C * P; e++) td[e * N + j] = dyw[j * C * P + e];
        ck_assert_int_eq(quant_rows(&m.dys, td, td, C * P, N, m.key[ADAPT_MX_DY_WGRAD], NULL, NULL),
                         0);
        for (size_t j = 0; j < N; j++)
            for (size_t e = 0; e < C * P; e++) dyw[j * C * P + e] = td[e * N + j];
        free(td);
    }
    /* Xcol (K, N*P) by loops, of the forward's input and of the weight gradient's */
    double *xc = calloc(K * NP, sizeof *xc), *xcw = calloc(K * NP, sizeof *xcw);
    ref_lower(G, wo, P, K, xf, xc);
    ref_lower(G, wo, P, K, xw, xcw);
    float *xt = malloc(sizeof(float) * NP * K), *xn = malloc(sizeof(float) * NP * K);
    float *dyt = malloc(sizeof(float) * NP * C), *dyn = malloc(sizeof(float) * NP * C);
    float *wt = malloc(sizeof(float) * K * C);
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < NP; i++) {
            xt[i * K + k] = (float)xc[k * NP + i];
            xn[k * NP + i] = (float)xcw[k * NP + i];
        }
    double db[64] = {0};
    for (size_t j = 0; j < N; j++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < P; p++) {
                size_t i = j * P + p;
                dyt[i * C + o] = t.dy[(j * C + o) * P + p];
                dyn[o * NP + i] = dyw[(j * C + o) * P + p];
                db[o] += t.dy[(j * C + o) * P + p];
            }
    for (size_t o = 0; o < C; o++)
        for (size_t k = 0; k < K; k++) wt[k * C + o] = w[o * K + k];
    if (!ch) {
        ck_assert_int_eq(quant_rows(&m.xs, xt, xt, NP, K, m.key[ADAPT_MX_X_FWD], NULL, NULL), 0);
        ck_assert_int_eq(quant_rows(&m.xs, xn, xn, K, NP, m.key[ADAPT_MX_X_WGRAD], NULL, NULL), 0);
        ck_assert_int_eq(quant_rows(&m.dys, dyn, dyn, C, NP, m.key[ADAPT_MX_DY_WGRAD], NULL, NULL),
                         0);
    }
    ck_assert_int_eq(quant_rows(&m.ws, wt, wt, K, C, m.key[ADAPT_MX_W_DGRAD], NULL, NULL), 0);
    ck_assert_int_eq(quant_rows(&m.dys, dyt, dyt, NP, C, m.key[ADAPT_MX_DY_DGRAD], NULL, NULL), 0);
    double *y = calloc(NP * C, sizeof *y), *ym = calloc(NP * C, sizeof *ym);
    double *dw = calloc(C * K, sizeof *dw), *dwm = calloc(C * K, sizeof *dwm);
    double *dx = calloc(N * in, sizeof *dx), *dxm = calloc(N * in, sizeof *dxm);
    for (size_t j = 0; j < N; j++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < P; p++) {
                size_t i = j * P + p, yi = (j * C + o) * P + p;
                y[yi] = ym[yi] = b[o];
                for (size_t k = 0; k < K; k++) {
                    y[yi] += (double)wq[o * K + k] * xt[i * K + k];
                    ym[yi] += fabs((double)wq[o * K + k] * xt[i * K + k]);
                }
            }
    for (size_t o = 0; o < C; o++)
        for (size_t k = 0; k < K; k++)
            for (size_t i = 0; i < NP; i++) {
                dw[o * K + k] += (double)dyn[o * NP + i] * xn[k * NP + i];
                dwm[o * K + k] += fabs((double)dyn[o * NP + i] * xn[k * NP + i]);
            }
    for (size_t j = 0; j < N; j++)
        for (size_t k = 0; k < K; k++)
            for (size_t p = 0; p < P; p++) {
                double s = 0, sm = 0;
                for (size_t o = 0; o < C; o++) {
                    s += (double)wt[k * C + o] * dyt[(j * P + p) * C + o];
                    sm += fabs((double)wt[k * C + o] * dyt[(j * P + p) * C + o]);
                }
                size_t xi;
                if (!conv) {
                    xi = j * in + k;
                } else {
                    int c = (int)k / (G->k * G->k), ky = (int)k / G->k % G->k, kx = (int)k % G->k;
                    int iy = (int)p / wo * G->stride - G->pad + ky;
                    int ix = (int)p % wo * G->stride - G->pad + kx;
                    if (iy < 0 || iy >= G->h || ix < 0 || ix >= G->w) continue;
                    xi = j * in + ((size_t)c * G->h + iy) * G->w + ix;
                }
                dx[xi] += s;
                dxm[xi] += sm;
            }
    check_close(t.y, y, ym, NP * C, "y");
    check_close(l->param[0].grad.data, dw, dwm, C * K, "dW");
    check_close(t.dx[0], dx, dxm, N * in, "dx");
    double dbm[64];
    for (size_t o = 0; o < C; o++) dbm[o] = fabs(db[o]) + 1.0;
    check_close(l->param[1].grad.data, db, dbm, C, "db");
    l->mx = NULL;
    free(scr.buf);
    l->param[0].use = w;
    free(wq), free(xc), free(xcw), free(xt), free(xn), free(dyt), free(dyn), free(wt);
    free(xf), free(xw), free(dyw), free(tt);
    free(y), free(ym), free(dw), free(dwm), free(dx), free(dxm);
    tu_layer_release(&t);
}

START_TEST(test_mx_gemm_reference)
{
    static const struct ref_geom cases[] = {
        {3, 9, 7, 3, 2, 1, 5, 3},    /* P = 5 x 4 = 20 */
        {2, 6, 6, 3, 1, 1, 40, 2},   /* P = 36, Cout 40: blocks of 32 and 8 along Cout */
        {70, 1, 1, 0, 1, 0, 33, 37}, /* linear 70 -> 33, batch 37 */
        {40, 3, 3, 3, 1, 1, 5, 34},  /* Cin 40, batch 34: channel and batch blocks of 32 and 8, 2 */
        {16, 3, 3, 3, 1, 1, 6, 33},  /* conv2d.c's dense mode (H W <= k^2, Cin H W % 16 = 0) */
        {3, 4, 4, 4, 1, 0, 7, 5},    /* its fully connected mode (kernel = input, no padding) */
        {2, 8, 8, 3, 1, 1, 3, 3},    /* P = 64: weight-gradient blocks inside each sample */
        {4, 3, 3, 3, 2, 1, 5, 35},   /* stride 2 on a small plane: 4 of 9 taps inside, per pixel */
        {2, 2, 2, 2, 1, 2, 3, 3},    /* padding wider than the kernel: pixels with no tap inside */
    };
    for (int chan = 0; chan < 2; chan++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            mx_reference_case(&cases[i], chan);
}
END_TEST

/* Bad values of the key, and a grouped convolution with an MX role under gemm, are refused
 * naming the key and what is expected. */
START_TEST(test_mx_axis_errors)
{
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_ne(adapt_config_set(&cfg, "roles.mx_axis=columns"), ADAPT_OK);
    ck_assert_msg(strstr(adapt_error_message(), "mx_axis") &&
                      strstr(adapt_error_message(), "rows") &&
                      strstr(adapt_error_message(), "gemm"),
                  "%s", adapt_error_message());
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.mx_axis=gemm"), ADAPT_OK);
    ck_assert_int_eq(cfg.roles.mx_axis, ADAPT_MX_AXIS_GEMM);
    /* the axis in force: the key where set, else gemm under recipe mxfp8_gemm */
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_mx_axis(&cfg), ADAPT_MX_AXIS_ROWS);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.recipe=mxfp8_gemm"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_mx_axis(&cfg), ADAPT_MX_AXIS_GEMM);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.mx_axis=channels"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_mx_axis(&cfg), ADAPT_MX_AXIS_CHANNELS);
    ck_assert_int_ne(adapt_config_set(&cfg, "roles.mx_axis=batch"), ADAPT_OK);
    ck_assert_msg(strstr(adapt_error_message(), "channels"), "%s", adapt_error_message());

    const int in[3] = {4, 6, 6};
    struct adapt_net *net = adapt_net_alloc("g", in, 4 * 6 * 6);
    ck_assert_int_ge(adapt_net_add(net, adapt_gconv2d_create("dw", in, 4, 3, 1, 1, 4, 1, 0), 0, -1),
                     0);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.recipe=mxfp8_gemm"), ADAPT_OK);
    struct adapt_role_fmt roles[ADAPT_ROLE_N];
    for (int r = 0; r < ADAPT_ROLE_N; r++)
        ck_assert_int_eq(adapt_config_role(&cfg, (enum adapt_role)r, &roles[r]), ADAPT_OK);
    struct adapt_roles_opts o = {16, 0, 0, 0};
    ck_assert_int_eq(adapt_precision_set_roles(p, roles, &o), ADAPT_OK);
    ck_assert_int_eq(adapt_precision_set_mx_gemm(p, "cfg.ini:3", 0), ADAPT_EINVAL);
    ck_assert_msg(strstr(adapt_error_message(), "cfg.ini:3: roles.mx_axis = gemm: unit dw") &&
                      strstr(adapt_error_message(), "expected roles.mx_axis = rows"),
                  "%s", adapt_error_message());
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("roles_mx");
    TCase *c = tcase_create("roles_mx");
    tcase_add_test(c, test_mx_gemm_linear);
    tcase_add_test(c, test_mx_gemm_linear_dy);
    tcase_add_test(c, test_mx_gemm_conv);
    tcase_add_test(c, test_mx_channels_conv);
    tcase_add_test(c, test_mx_gemm_reference);
    tcase_add_test(c, test_mx_axis_errors);
    suite_add_tcase(s, c);
    return tu_run_suite(s, CK_FORK_GETENV);
}
