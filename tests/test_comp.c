/* tests/test_comp.c: the comp policy's plan search (src/policy/comp.h).
 *
 * The expected plans are worked out by hand from the algorithm as doc/algorithms.md ("CoMP")
 * states it, after the CoMP paper's Algorithms 1 and 2: stage 1 enumerates every digit of the
 * tried units with the tensor-core units at format 0, a plan is safe when its epoch loss is
 * below loss_0 x tolerance, the cheapest safe plan wins; stage 2 enumerates the layers between
 * two units of different formats, each taking the left or the right unit's digit. The search
 * runs with a stub trainer whose losses and costs the tests set. The end-to-end test (skipped
 * without Fashion-MNIST) checks that training after the search is the run that trains with
 * the chosen plan from the start: the search restores the whole training state.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/perf.h"
#include "src/policy/comp.h"
#include "src/trace/trace.h"
#include "tests/testutil.h"

/* conv(u0) relu pool conv(u1) relu flatten linear(u2): LeNet-like, 7 layers */
static const int lenet_units[7] = {0, -1, -1, 1, -1, -1, 2};

static void make_space(struct adapt_comp_space *sp, int k, const char *tried)
{
    ck_assert_int_eq(adapt_comp_space_init(sp, 7, k, lenet_units), ADAPT_OK);
    for (int i = 0; i < 7; i++) sp->tried[i] = tried[i] == 't';
}

/* The block of n plans as one comma-separated string. */
static void join(const char *block, int n, int len, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        strncat(out, block + (size_t)i * (size_t)(len + 1), cap - strlen(out) - 1);
        if (i + 1 < n) strncat(out, ",", cap - strlen(out) - 1);
    }
}

START_TEST(test_context)
{
    struct adapt_comp_space sp;
    make_space(&sp, 1, "t--t--t");
    /* between two fp16 units: fp16; between fp16 and float32: float32 (stage-2 start);
     * after the last unit the loss is a float32 boundary */
    char p[] = "0xx0xx0", p2[] = "0xx1xx0";
    adapt_comp_fill_context(&sp, p);
    ck_assert_str_eq(p, "0000000");
    adapt_comp_fill_context(&sp, p2);
    ck_assert_str_eq(p2, "0111110");
    char q[] = "1xx0xx1";
    adapt_comp_fill_context(&sp, q);
    ck_assert_str_eq(q, "1110111");
    adapt_comp_space_free(&sp);
}
END_TEST

START_TEST(test_stage1_plans)
{
    struct adapt_comp_space sp;
    char *b = NULL, got[1024];
    int n = 0;
    /* units 0 and 2 tried, unit 1 (tensor-core shapes) fixed at 0: basis + 2^2 plans */
    make_space(&sp, 1, "t-----t");
    ck_assert_int_eq(adapt_comp_stage1_plans(&sp, 64, &b, &n), ADAPT_OK);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "1111111,0000000,0000111,1110000,1110111");
    free(b);
    /* every unit tried: the all-float32 combination is the basis, trained once */
    for (int i = 0; i < 7; i++) sp.tried[i] = lenet_units[i] >= 0;
    ck_assert_int_eq(adapt_comp_stage1_plans(&sp, 64, &b, &n), ADAPT_OK);
    ck_assert_int_eq(n, 8);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "1111111,0000000,0000111,0111110,0111111,1110000,1110111,1111110");
    free(b);
    ck_assert_int_eq(adapt_comp_stage1_plans(&sp, 7, &b, &n), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "comp_max_plans = 7"));
    adapt_comp_space_free(&sp);
    /* two candidates (digits 0, 1; 2 = float32), one unit tried: 1 + 3 plans */
    make_space(&sp, 2, "t------");
    ck_assert_int_eq(adapt_comp_stage1_plans(&sp, 64, &b, &n), ADAPT_OK);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "2222222,0000000,1220000,2220000");
    free(b);
    adapt_comp_space_free(&sp);
}
END_TEST

START_TEST(test_stage2_plans)
{
    struct adapt_comp_space sp;
    make_space(&sp, 1, "t--t--t");
    char *b = NULL, got[1024];
    int n = 0;
    /* P_s1 = 0 | 11 | 1 | 11 | 0: segments (u0,u1) and (u1,u2) disagree, 2 layers each:
     * 4 - 1 new strings each (the all-float32 one is P_s1); the trailing segment (u2, loss)
     * is empty */
    ck_assert_int_eq(adapt_comp_stage2_plans(&sp, "0111110", 64, &b, &n), ADAPT_OK);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "0111110,0001110,0101110,0011110,0111010,0111100,0111000");
    free(b);
    ck_assert_int_eq(adapt_comp_stage2_plans(&sp, "0111110", 6, &b, &n), ADAPT_EINVAL);
    /* the float32 unit on the right: the last string of the run is P_s1 itself (written to
     * the spare slot, then dropped) */
    ck_assert_int_eq(adapt_comp_stage2_plans(&sp, "0000111", 64, &b, &n), ADAPT_OK);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "0000111,0000001,0000101,0000011");
    free(b);
    /* all units agree: only P_s1 */
    ck_assert_int_eq(adapt_comp_stage2_plans(&sp, "0000000", 64, &b, &n), ADAPT_OK);
    ck_assert_int_eq(n, 1);
    free(b);
    adapt_comp_space_free(&sp);
    /* with two candidates neither boundary is float32: all 2^2 strings are new */
    make_space(&sp, 2, "t--t--t");
    ck_assert_int_eq(adapt_comp_stage2_plans(&sp, "0221111", 64, &b, &n), ADAPT_OK);
    join(b, n, 7, got, sizeof got);
    ck_assert_str_eq(got, "0221111,0001111,0101111,0011111,0111111");
    free(b);
    adapt_comp_space_free(&sp);
}
END_TEST

START_TEST(test_check_and_layers)
{
    struct adapt_comp_space sp;
    make_space(&sp, 1, "t--t--t");
    const char *names[7] = {"c1", "r1", "p1", "c2", "r2", "f", "fc"};
    ck_assert_int_eq(adapt_comp_check_plan(&sp, "0101110", names), ADAPT_OK);
    ck_assert_int_eq(adapt_comp_check_plan(&sp, "010111", names), ADAPT_EINVAL);
    ck_assert_int_eq(adapt_comp_check_plan(&sp, "0101112", names), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "fc"));
    /* a 0 between two float32 units has no unit to take format 0 from */
    ck_assert_int_eq(adapt_comp_check_plan(&sp, "1101111", names), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "p1"));
    int gov[7], digit[3];
    adapt_comp_plan_layers(&sp, "0101100", gov, digit);
    const int want_gov[7] = {0, -1, 0, -1, -1, 2, 2};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(gov[i], want_gov[i]);
    ck_assert_int_eq(digit[0], 0);
    ck_assert_int_eq(digit[1], 1);
    ck_assert_int_eq(digit[2], 0);
    adapt_comp_space_free(&sp);
}
END_TEST

/* ---- the search with a stub trainer ---- */

struct stub {
    const char *const *plans; /* plan -> loss, cost */
    const double *epoch_loss, *batch_loss, *cost;
    int n;
    int epochs, batches;
};

static int stub_find(const struct stub *s, const char *plan)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plans[i], plan)) return i;
    ck_abort_msg("the search asked for plan %s, which the test did not expect", plan);
    return -1;
}

static enum adapt_status stub_epoch(void *ctx, const char *plan, double *loss, long *steps,
                                    long *samples)
{
    struct stub *s = ctx;
    *loss = s->epoch_loss[stub_find(s, plan)];
    *steps = 10;
    *samples = 1000;
    s->epochs++;
    return ADAPT_OK;
}

static enum adapt_status stub_batch(void *ctx, const char *plan, double *loss, long *samples)
{
    struct stub *s = ctx;
    *loss = s->batch_loss[stub_find(s, plan)];
    *samples = 100;
    s->batches++;
    return ADAPT_OK;
}

static enum adapt_status stub_cost(void *ctx, const char *plan, double *cost)
{
    struct stub *s = ctx;
    *cost = s->cost[stub_find(s, plan)];
    return ADAPT_OK;
}

START_TEST(test_search_stub)
{
    struct adapt_comp_space sp;
    make_space(&sp, 1, "t-----t"); /* unit 1 passes the tensor-core rule */
    static const char *const plans[] = {
        "1111111", "0000000", "0000111", "1110000", "1110111", /* stage 1 */
        "1010000", "1100000", "1000000",                       /* stage 2 from 1110000 */
    };
    /* loss_0 = 1.0: 0000000 (1.02) and 0000111 (1.01, not below 1.01) are unsafe although
     * cheapest; 1110000 (1.009) is the cheapest safe plan; 1110111 is safe but dearer */
    static const double epoch_loss[] = {1.0, 1.02, 1.01, 1.009, 0.99, NAN, NAN, NAN};
    /* stage 2 (layers 1-2 between the float32 unit 0 and the fp16 unit 1): 1100000 is the
     * cheapest but its batch diverged; 1010000 wins over P_s1 (70) and 1000000 (69) */
    static const double batch_loss[] = {NAN, NAN, NAN, 2.3, NAN, 2.3, INFINITY, 2.3};
    static const double cost[] = {100, 50, 55, 70, 90, 68, 60, 69};
    struct stub s = {plans, epoch_loss, batch_loss, cost, 8, 0, 0};
    struct adapt_comp_hooks h = {&s, stub_epoch, stub_batch, stub_cost};
    struct adapt_comp_result res;
    ck_assert_int_eq(adapt_comp_search(&sp, &h, 1.01, 64, &res), ADAPT_OK);
    ck_assert_str_eq(res.plan, "1010000");
    ck_assert_int_eq(s.epochs, 5);
    ck_assert_int_eq(s.batches, 4);
    ck_assert_int_eq(res.n_samples, 9);
    const int safe[9] = {1, 0, 0, 1, 1, 1, 1, 0, 1}, chosen[9] = {0, 0, 0, 1, 0, 0, 1, 0, 0};
    for (int i = 0; i < 9; i++) {
        ck_assert_int_eq(res.samples[i].stage, i < 5 ? 1 : 2);
        ck_assert_int_eq(res.samples[i].safe, safe[i]);
        ck_assert_int_eq(res.samples[i].chosen, chosen[i]);
    }
    ck_assert_str_eq(res.samples[5].plan, "1110000");
    adapt_comp_result_free(&res);

    /* a tolerance of 1.05 makes 0000000 safe: it is the cheapest, and stage 2 has nothing
     * to enumerate (every unit fp16) */
    struct stub s2 = {plans, epoch_loss, batch_loss, cost, 8, 0, 0};
    h.ctx = &s2;
    ck_assert_int_eq(adapt_comp_search(&sp, &h, 1.05, 64, &res), ADAPT_OK);
    ck_assert_str_eq(res.plan, "0000000");
    ck_assert_int_eq(s2.batches, 1);
    adapt_comp_result_free(&res);

    /* every plan but the basis unsafe: everything stays float32 */
    static const double bad_loss[] = {1.0, NAN, 2.0, 1.5, 1.2, NAN, NAN, NAN};
    static const double batch1[] = {2.3, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    struct stub s3 = {plans, bad_loss, batch1, cost, 8, 0, 0};
    h.ctx = &s3;
    ck_assert_int_eq(adapt_comp_search(&sp, &h, 1.01, 64, &res), ADAPT_OK);
    ck_assert_str_eq(res.plan, "1111111");
    adapt_comp_result_free(&res);
    adapt_comp_space_free(&sp);
}
END_TEST

/* ---- stage 2 with the performance model's prices and the conversions ---- */

struct priced {
    struct stub s; /* losses (its costs unused) */
    const struct adapt_comp_space *sp;
    const struct perf_model *m;
    struct perf_params pp;
    int casts; /* price the conversions (else as before they were priced) */
};

static enum adapt_status priced_epoch(void *ctx, const char *plan, double *loss, long *steps,
                                      long *samples)
{
    return stub_epoch(&((struct priced *)ctx)->s, plan, loss, steps, samples);
}

static enum adapt_status priced_batch(void *ctx, const char *plan, double *loss, long *samples)
{
    return stub_batch(&((struct priced *)ctx)->s, plan, loss, samples);
}

/* One step of one sample (batch 1), as the search's cost hook prices a plan. */
static enum adapt_status priced_cost(void *ctx, const char *plan, double *cost)
{
    struct priced *c = ctx;
    int wl[5], gov[12], digit[5], fmt[12];
    adapt_comp_plan_layers(c->sp, plan, gov, digit);
    for (int u = 0; u < 5; u++) wl[u] = digit[u] == c->sp->k ? 32 : 16;
    adapt_comp_plan_formats(c->sp, plan, fmt);
    return perf_price_plan(c->m, &c->pp, NULL, wl, gov, c->casts ? fmt : NULL, 1, 1.0, 1, 1,
                           cost, NULL);
}

/* LeNet-5 (conv1 tanh pool conv2 tanh pool conv3 tanh flatten fc1 tanh fc2), fp16 and float32
 * ('1'), only conv1 tried. Stage 1: 111111111111 (loss_0), 000000000000 (unsafe),
 * 111000000000 (safe, the winner). Stage 2 enumerates tanh1 and pool1 between the float32
 * conv1 and the fp16 conv2: 111000000000 (P_s1), 101000000000, 110000000000, 100000000000.
 * Only tanh1's and pool1's element-wise work and the conversions differ between them.
 *
 * Element-wise, per sample, forward and backward: tanh1 and pool1 read 6x28x28 = 4704
 * elements each (the pool reads every input once), 2 x 4704 = 9408 at 32 bits, 4704 at 16:
 *   111: 18816   100: 9408   110: 14112   101: 14112
 * so without conversions 100000000000 is cheapest: both layers go to fp16.
 *
 * Conversions (cast_ops 2 per element, cast_fixed_ops 4096 per conversion and micro-batch;
 * forward the activation, backward its gradient; conv1 reads the float32 input, and fc2's 10
 * fp16 logits pass to the float32 loss, 2 x 10 elements, in every plan):
 *   111: pool1 -> conv2, 6x14x14 = 1176: 2 x (2 x 1176 + 20) + 4 x 4096 = 21128
 *   100: conv1 -> tanh1, 4704:           2 x (2 x 4704 + 20) + 4 x 4096 = 35240
 *   110: tanh1 -> pool1, 4704:           35240
 *   101: conv1 -> tanh1 -> pool1 -> conv2: 2 x (2 x (4704 + 4704 + 1176) + 20) + 8 x 4096
 *        = 75144
 * With them: 111: 39944   100: 44648   110: 49352   101: 89256, and stage 2 keeps tanh1 and
 * pool1 in float32: converting pool1's output costs a quarter of converting conv1's. */
START_TEST(test_stage2_conversions)
{
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "lenet5", 10), ADAPT_OK);
    ck_assert_int_eq(m->n_layers, 12);
    static const int units[12] = {0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, 4};
    struct adapt_comp_space sp;
    ck_assert_int_eq(adapt_comp_space_init(&sp, 12, 1, units), ADAPT_OK);
    for (int i = 1; i < 12; i++) sp.tried[i] = 0;
    static const char *const plans[] = {"111111111111", "000000000000", "111000000000",
                                        "101000000000", "110000000000", "100000000000"};
    static const double epoch_loss[] = {1.0, 1.02, 1.005, NAN, NAN, NAN};
    static const double batch_loss[] = {NAN, NAN, 2.3, 2.3, 2.3, 2.3};
    struct priced c = {{plans, epoch_loss, batch_loss, NULL, 6, 0, 0}, &sp, m, {0}, 0};
    perf_params_init(&c.pp);
    struct adapt_comp_hooks h = {&c, priced_epoch, priced_batch, priced_cost};
    struct adapt_comp_result res;
    /* without the conversions: the plan with the most fp16 layers */
    ck_assert_int_eq(adapt_comp_search(&sp, &h, 1.01, 64, &res), ADAPT_OK);
    ck_assert_int_eq(c.s.epochs, 3);
    ck_assert_int_eq(c.s.batches, 4);
    ck_assert_str_eq(res.plan, "100000000000");
    double base[4];
    for (int i = 0; i < 4; i++) base[i] = res.samples[3 + i].cost;
    ck_assert_double_eq_tol(base[3] - base[0], 9408 - 18816, 1e-6);
    ck_assert_double_eq_tol(base[1] - base[0], 14112 - 18816, 1e-6);
    adapt_comp_result_free(&res);
    /* with them: tanh1 and pool1 stay float32 */
    c.casts = 1;
    ck_assert_int_eq(adapt_comp_search(&sp, &h, 1.01, 64, &res), ADAPT_OK);
    ck_assert_str_eq(res.plan, "111000000000");
    ck_assert_str_eq(res.samples[3].plan, "111000000000");
    ck_assert_int_eq(res.samples[3].chosen, 1);
    static const double casts[4] = {21128, 75144, 35240, 35240}; /* 111, 101, 110, 100 */
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq_tol(res.samples[3 + i].cost - base[i], casts[i], 1e-6);
    ck_assert_double_eq_tol(res.samples[6].cost - res.samples[3].cost, 44648 - 39944, 1e-6);
    ck_assert_double_eq_tol(res.samples[4].cost - res.samples[3].cost, 89256 - 39944, 1e-6);
    adapt_comp_result_free(&res);
    /* the conversion count: 111000000000 converts pool1's output and fc2's, each both ways */
    int fmt[12], n;
    adapt_comp_plan_formats(&sp, "111000000000", fmt);
    ck_assert_int_eq(fmt[0], -1);
    ck_assert_int_eq(fmt[3], 0);
    ck_assert_double_eq_tol(perf_price_casts(m, &c.pp, fmt, 1.0, 1.0, &n), 21128, 1e-6);
    ck_assert_int_eq(n, 4);
    /* all float32: nothing to convert */
    adapt_comp_plan_formats(&sp, "111111111111", fmt);
    ck_assert_double_eq(perf_price_casts(m, &c.pp, fmt, 64.0, 1.0, &n), 0);
    ck_assert_int_eq(n, 0);
    adapt_comp_space_free(&sp);
    perf_model_free(m);
}
END_TEST

/* ---- end to end ---- */

#define FMNIST "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];
static char out_buf[1 << 16];
#define run(...) tu_run(out_buf, sizeof out_buf, __VA_ARGS__)

static const char *cfg_text =
    "[run]\nseed = 3\nthreads = 1\n[data]\ndataset = fashion-mnist\npath = " FMNIST "\n"
    "val_size = 200\ntrain_limit = 600\ntest_limit = 500\n"
    "[model]\nname = lenet5\n[train]\nepochs = 2\nbatch = 100\n[optim]\nlr = 0.05\n"
    "momentum = 0.9\n[policy]\nname = comp\ncomp_sample_steps = 3\n"
    "[quantization]\nrounding = nearest\n";

/* The trace's lines from the first step record on, wall times removed. */
static char *training_lines(const char *trace)
{
    char stripped[600];
    snprintf(stripped, sizeof stripped, "%s.stripped", trace);
    tu_strip_times(trace, stripped);
    size_t n;
    char *t = (char *)tu_read_file(stripped, &n);
    char *s = strstr(t, "{\"type\":\"step\"");
    ck_assert_ptr_nonnull(s);
    char *e = strstr(s, "{\"type\":\"end\"");
    if (e) *e = 0;
    char *copy = strdup(s);
    free(t);
    return copy;
}

START_TEST(test_search_restores_state)
{
    if (!tu_have_data(FMNIST "/train-images-idx3-ubyte.gz")) return;
    char path[512], a[600], b[600];
    tu_write_text(tu_path(path, sizeof path, tmpdir, "comp.ini"), cfg_text);
    int rc = run("./adapt-train --config %s --out %s/a --quiet", path, tmpdir);
    ck_assert_msg(rc == 0, "comp run failed: %s", out_buf);
    snprintf(a, sizeof a, "%s/a/trace.jsonl", tmpdir);
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, a, 0), ADAPT_OK);
    /* LeNet-5: 5 units, conv3 (16 -> 120) passes the tensor-core rule; 4 tried: 1 + 2^4
     * stage-1 samples, then stage 2 */
    int n1 = 0, n2 = 0, chosen = -1;
    for (int i = 0; i < t->n_samples; i++) {
        n1 += t->samples[i].stage == 1;
        n2 += t->samples[i].stage == 2;
        if (t->samples[i].stage == 2 && t->samples[i].chosen) chosen = i;
        ck_assert_int_eq(t->samples[i].steps, t->samples[i].stage == 1 ? 3 : 0);
    }
    ck_assert_int_eq(n1, 17);
    ck_assert_int_ge(n2, 1);
    ck_assert_int_ge(chosen, 0);
    char plan[64];
    snprintf(plan, sizeof plan, "%s", t->samples[chosen].plan);
    /* the header's per-layer precision is the chosen plan's */
    for (int i = 0; i < t->header.model.n_layers; i++)
        ck_assert_int_eq(t->header.model.layers[i].precision_unit, t->samples[chosen].gov[i]);
    /* the search is priced as overhead */
    struct perf_params pp;
    perf_params_init(&pp);
    struct perf_run *pr;
    ck_assert_int_eq(perf_run_analyze(&pr, t, &pp, NULL), ADAPT_OK);
    ck_assert_int_eq(pr->search_epochs, 17);
    ck_assert(pr->overhead_search > 0 && pr->overhead >= pr->overhead_search);
    perf_run_free(pr);
    adapt_trace_free(t);
    /* training with that plan from the start gives the same steps, epochs and test */
    rc = run("./adapt-train --config %s --out %s/b --quiet --set policy.comp_plan=%s", path,
             tmpdir, plan);
    ck_assert_msg(rc == 0, "comp_plan run failed: %s", out_buf);
    snprintf(b, sizeof b, "%s/b/trace.jsonl", tmpdir);
    char *la = training_lines(a), *lb = training_lines(b);
    ck_assert_msg(!strcmp(la, lb), "training after the search differs from the plan's run");
    free(la);
    free(lb);
    /* a search over too many plans is refused by the dry run: 1 + 3^4 > 64 */
    rc = run("./adapt-train --config %s --out %s/d --dry-run --set policy.comp_formats=e4m3,fp16",
             path, tmpdir);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(strstr(out_buf, "stage 1 would train 82 plans"));
    /* a bad plan is refused before anything is written */
    rc = run("./adapt-train --config %s --out %s/c --quiet --set policy.comp_plan=0101", path,
             tmpdir);
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_nonnull(strstr(out_buf, "policy.comp_plan"));
}
END_TEST

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "comp"); }
static void teardown(void) { tu_tmpdir_remove(tmpdir); }

int main(void)
{
    Suite *s = suite_create("comp");
    TCase *tc = tcase_create("search");
    tcase_add_test(tc, test_context);
    tcase_add_test(tc, test_stage1_plans);
    tcase_add_test(tc, test_stage2_plans);
    tcase_add_test(tc, test_check_and_layers);
    tcase_add_test(tc, test_search_stub);
    tcase_add_test(tc, test_stage2_conversions);
    suite_add_tcase(s, tc);
    TCase *e2e = tcase_create("end to end");
    tcase_add_checked_fixture(e2e, setup, teardown);
    tcase_set_timeout(e2e, 300);
    tcase_add_test(e2e, test_search_restores_state);
    suite_add_tcase(s, e2e);
    return tu_run_suite(s, CK_FORK);
}
