/* tests/testutil_net.c: see testutil_net.h. */
#include "tests/testutil_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/status.h"
#include "src/net/tensor.h"
#include <check.h>

static float *tu_zalloc(size_t nfloats)
{
    size_t bytes = (nfloats ? nfloats : 1) * sizeof(float);
    float *p = adapt_aligned_alloc(bytes);
    ADAPT_ASSERT(p != NULL);
    memset(p, 0, bytes);
    return p;
}

size_t tu_layer_in_len(const struct tu_layer *t, int i)
{
    return (size_t)t->n * adapt_layer_in_numel(t->l, i);
}

size_t tu_layer_out_len(const struct tu_layer *t)
{
    return (size_t)t->n * adapt_layer_out_numel(t->l);
}

void tu_layer_bind(struct tu_layer *t, struct adapt_layer *l, int n, int training)
{
    ADAPT_ASSERT(l != NULL);
    memset(t, 0, sizeof *t);
    t->l = l;
    t->n = n;
    for (int i = 0; i < l->nin; i++) {
        t->x[i] = tu_zalloc(tu_layer_in_len(t, i));
        t->dx[i] = tu_zalloc(tu_layer_in_len(t, i));
    }
    t->y = tu_zalloc(tu_layer_out_len(t));
    t->dy = tu_zalloc(tu_layer_out_len(t));
    for (int p = 0; p < l->nparam; p++) {
        struct adapt_param *pp = &l->param[p];
        pp->value.data = tu_zalloc(pp->value.numel);
        pp->grad.data = pp->role == ADAPT_PARAM_BUFFER ? NULL : tu_zalloc(pp->grad.numel);
        pp->use = pp->value.data;
    }
    size_t ws = l->ops->workspace ? l->ops->workspace(l, n) : 0;
    t->ws = ws ? tu_zalloc(ws) : NULL;
    size_t sv = l->ops->saved ? l->ops->saved(l, n) : 0;
    t->saved = sv ? tu_zalloc(sv) : NULL;
    l->saved = t->saved;
    if (l->counter) l->counter = &t->counter;
    t->ex.n = n;
    t->ex.training = training;
    t->ex.ws = t->ws;
}

void tu_layer_release(struct tu_layer *t)
{
    struct adapt_layer *l = t->l;
    if (!l) return;
    for (int p = 0; p < l->nparam; p++) {
        adapt_aligned_free(l->param[p].value.data);
        adapt_aligned_free(l->param[p].grad.data);
    }
    for (int i = 0; i < l->nin; i++) {
        adapt_aligned_free(t->x[i]);
        adapt_aligned_free(t->dx[i]);
    }
    adapt_aligned_free(t->y);
    adapt_aligned_free(t->dy);
    adapt_aligned_free(t->ws);
    adapt_aligned_free(t->saved);
    adapt_layer_free(l);
    memset(t, 0, sizeof *t);
}

void tu_layer_forward(struct tu_layer *t)
{
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int i = 0; i < t->l->nin; i++) xs[i] = t->x[i];
    t->l->ops->forward(t->l, &t->ex, xs, t->y);
}

void tu_layer_backward_sel(struct tu_layer *t, unsigned want_dx, unsigned acc)
{
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    float *dxs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int i = 0; i < t->l->nin; i++) {
        xs[i] = t->x[i];
        if (want_dx & (1u << i)) dxs[i] = t->dx[i];
    }
    t->l->ops->backward(t->l, &t->ex, xs, t->y, t->dy, dxs, acc);
}

void tu_layer_backward(struct tu_layer *t, unsigned acc) { tu_layer_backward_sel(t, ~0u, acc); }

void tu_layer_zero_grads(struct tu_layer *t)
{
    for (int p = 0; p < t->l->nparam; p++) {
        struct adapt_param *pp = &t->l->param[p];
        if (pp->grad.data) memset(pp->grad.data, 0, pp->grad.numel * sizeof(float));
    }
}

size_t tu_gradcheck(tu_loss_fn f, void *ctx, float *v, size_t n, const float *an,
                    const struct tu_fd_opts *o, struct tu_fd_result *r)
{
    struct tu_fd_result res;
    memset(&res, 0, sizeof res);
    size_t checks = (o->max_checks == 0 || o->max_checks > n) ? n : o->max_checks;
    for (size_t k = 0; k < checks; k++) {
        /* evenly spread indices, including the first and the last */
        size_t i = checks == n ? k
                               : (size_t)((double)k * (double)(n - 1) /
                                          (double)(checks - 1 ? checks - 1 : 1));
        float v0 = v[i];
        float vp = v0 + o->h, vm = v0 - o->h;
        v[i] = vp;
        double lp = f(ctx);
        v[i] = vm;
        double lm = f(ctx);
        v[i] = v0;
        double fd = (lp - lm) / ((double)vp - (double)vm);
        double tol = o->atol + o->rtol * fabs(fd);
        double err = fabs((double)an[i] - fd);
        double ratio = tol > 0.0 ? err / tol : (err > 0.0 ? INFINITY : 0.0);
        if (!(err <= tol)) res.failed++;
        if (k == 0 || !(ratio <= res.worst_ratio)) { /* NaN counts as worst */
            res.worst_ratio = ratio;
            res.worst = i;
            res.worst_an = an[i];
            res.worst_fd = fd;
        }
        res.checked++;
    }
    if (res.failed)
        fprintf(stderr,
                "gradcheck: %zu of %zu failed; worst index %zu: analytic %.9g, fd %.9g "
                "(%.3g x tol)\n",
                res.failed, res.checked, res.worst, res.worst_an, res.worst_fd, res.worst_ratio);
    if (r) *r = res;
    return res.failed;
}

struct adapt_net *small_lenet(int n)
{
    struct adapt_net *net = adapt_model_build("lenet5", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
    adapt_net_init_params(net, 2385, 0.5);
    return net;
}
