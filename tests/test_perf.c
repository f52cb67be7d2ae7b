/* tests/test_perf.c: src/perfmodel/ (model table, analytical and calibrated costs, schedules,
 * reports, refusal of bad traces and tables). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/perfmodel/perf.h"
#include "src/net/net.h"
#include "src/trace/trace.h"
#include "tests/testutil.h"

static char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "perf"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* Relative closeness for hand-computed values that go through a few double
 * operations: 1e-12 is thousands of ulps, far below any formula mistake. */
#define ck_assert_close(a, b)                                                                      \
    ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(b)), "%s = %.17g, expected %.17g", #a, \
                  (double)(a), (double)(b))

/* ============================================================ synthetic trace
 *
 * A hand-sized model: conv c1 (1x4x4 -> 2x2x2, k3: 18 weights + 2 biases,
 * 2*2*2*1*3*3 = 72 MACs, unit 0, reads the input so 2 GEMM passes), tanh t1
 * (8 element operations), flatten, linear fc (8 -> 3: 24 weights + 3 biases,
 * 24 MACs, unit 1, 3 passes). 47 parameters. Training set of 10 samples in
 * batches of 4: 3 optimizer steps per epoch training 4, 4, 2 samples. */
static const struct adapt_trace_layer syn_layers[4] = {
    {"c1", "conv2d", 3, 3, {1, 4, 4, 0}, {2, 2, 2, 0}, 20, 72, 0, 0, 3, 1, 0, 1, 1, NULL, NULL,
     NULL, 0},
    {"t1", "tanh", 3, 3, {2, 2, 2, 0}, {2, 2, 2, 0}, 0, 0, 8, -1, 0, 0, 0, 1, 1, NULL, NULL, NULL,
     0},
    {"f", "flatten", 3, 3, {2, 2, 2, 0}, {8, 1, 1, 0}, 0, 0, 0, -1, 0, 0, 0, 1, 1, NULL, NULL, NULL,
     0},
    {"fc", "linear", 3, 3, {8, 1, 1, 0}, {3, 1, 1, 0}, 27, 24, 0, 1, 0, 0, 0, 1, 1, NULL, NULL,
     NULL, 0},
};
static const struct adapt_trace_unit syn_units[2] = {{"c1", 0, 18, 72}, {"fc", 3, 24, 24}};

/* Unit states per step: wl0, sparsity0, wl1, sparsity1 (lookback present, r 60 / 50). */
static const double syn_states[6][4] = {
    {8, 0.25, 16, 0.5},   {6, 0.375, 16, 0.5}, {6, 0.375, 16, 0.5},
    {6, 0.375, 12, 0.25}, {10, 0.125, 12, 0.25}, {10, 0.125, 12, 0.25},
};

struct syn_opts {
    int fp32;          /* all units 32 bits, no policy state */
    int log_every;     /* step lines every k steps */
    int last_step;     /* write step lines up to this step (6 = all) */
    double val[2];     /* validation accuracy of the two epochs */
    int batch;         /* config train.batch (0: leave the key out) */
    int unit1_macs;    /* header macs of unit 1 */
    const char *policy;      /* header policy (NULL: "adapt"; fp32 overrides) */
    const char *config_file; /* header config_file (NULL: none) */
    const char *compat;      /* config quantization.compat (NULL: key absent) */
    const struct adapt_trace_layer *layers; /* header layers (NULL: syn_layers) */
    const char *model_name;  /* header model.name (NULL: "tiny") */
    const char *unit0_name;  /* header units[0].name (NULL: "c1") */
    const char *run_name;    /* config run.name (NULL: key absent) */
};

static void syn_header(struct adapt_trace_header *h, json_t **cfg, int batch, int unit1_macs,
                       struct adapt_trace_unit *units)
{
    memset(h, 0, sizeof *h);
    *cfg = batch ? json_pack("{s:{s:i,s:i}}", "train", "batch", batch, "accumulation_steps", 1)
                 : json_pack("{s:{s:i}}", "train", "epochs", 2);
    h->seed = 7;
    h->threads = 1;
    h->policy = "adapt";
    h->config = *cfg;
    h->dataset.name = "synthetic";
    h->dataset.train = 10;
    h->dataset.val = 4;
    h->dataset.test = 4;
    h->dataset.classes = 3;
    h->model.name = "tiny";
    h->model.input[0] = 1;
    h->model.input[1] = h->model.input[2] = 4;
    h->model.classes = 3;
    h->model.params = 47;
    h->model.macs = 96;
    h->model.n_layers = 4;
    h->model.layers = syn_layers;
    memcpy(units, syn_units, sizeof syn_units);
    units[1].macs = unit1_macs;
    h->n_units = 2;
    h->units = units;
}

static void syn_write(const char *path, const struct syn_opts *o)
{
    struct adapt_trace_writer *w;
    struct adapt_trace_header h;
    struct adapt_trace_unit units[2];
    json_t *cfg;
    syn_header(&h, &cfg, o->batch, o->unit1_macs, units);
    if (o->layers) h.model.layers = o->layers;
    if (o->policy) h.policy = o->policy;
    if (o->fp32) h.policy = "fp32";
    h.config_file = o->config_file;
    if (o->model_name) h.model.name = o->model_name;
    if (o->unit0_name) units[0].name = o->unit0_name;
    json_object_set_new(cfg, "policy", json_pack("{s:i}", "muppet_r", 2));
    if (o->compat)
        json_object_set_new(cfg, "quantization", json_pack("{s:s}", "compat", o->compat));
    if (o->run_name) json_object_set_new(cfg, "run", json_pack("{s:s}", "name", o->run_name));
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    json_decref(cfg);
    for (int s = 1; s <= 6; s++) {
        if (s % o->log_every == 0 && s <= o->last_step) {
            struct adapt_trace_unit_state us[2];
            struct adapt_trace_event ev[1];
            struct adapt_trace_step st;
            memset(&st, 0, sizeof st);
            memset(ev, 0, sizeof ev);
            const double *x = syn_states[s - 1];
            for (int u = 0; u < 2; u++) {
                us[u].wl = o->fp32 ? 32 : (int)x[2 * u];
                us[u].fl = o->fp32 ? 0 : us[u].wl / 2;
                us[u].lb = o->fp32 ? NAN : 37.25;
                us[u].r = o->fp32 ? -1 : (u == 0 ? 60 : 50);
                us[u].sparsity = o->fp32 ? NAN : x[2 * u + 1];
                us[u].sat = us[u].flush = -1;
                us[u].act_sat = NAN;
            }
            st.step = s;
            st.epoch = (s - 1) / 3;
            st.lr = 0.01;
            st.loss = 2.385 / s;
            st.n_units = 2;
            st.units = us;
            st.accum = 1;
            if (!o->fp32 && s == 2) { /* PD of unit 0, whole tensor (sample 0 = 18) */
                ev[0] =
                    (struct adapt_trace_event){0, ADAPT_TRACE_EVENT_PD, {8, 4}, {6, 3}, 2, 2, 0, 0};
                st.n_events = 1;
            } else if (!o->fp32 && s == 4) { /* PD of unit 1, 16 sampled weights */
                ev[0] = (struct adapt_trace_event){
                    1, ADAPT_TRACE_EVENT_PD, {16, 8}, {12, 6}, 3, 3, 16, 0};
                st.n_events = 1;
            } else if (!o->fp32 && s == 5) { /* PU of unit 0 */
                ev[0] = (struct adapt_trace_event){
                    0, ADAPT_TRACE_EVENT_PU, {6, 3}, {10, 5}, 0, 0, 0, 2};
                st.n_events = 1;
            }
            st.events = ev;
            ck_assert_int_eq(adapt_trace_write_step(w, &st), ADAPT_OK);
        }
        if (s % 3 == 0) {
            struct adapt_trace_epoch e = {s / 3 - 1,         s,   0.01, 1.5, 0.6, 1.4,
                                          o->val[s / 3 - 1], 1.0, 100.0};
            ck_assert_int_eq(adapt_trace_write_epoch(w, &e), ADAPT_OK);
        }
    }
    struct adapt_trace_test tt = {2, 0.9, 0.8};
    ck_assert_int_eq(adapt_trace_write_test(w, &tt), ADAPT_OK);
    struct adapt_trace_end en = {ADAPT_TRACE_END_OK, 3.0};
    ck_assert_int_eq(adapt_trace_write_end(w, &en), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
}

static struct syn_opts syn_default(void)
{
    struct syn_opts o = {0, 1, 6, {0.8125, 0.83}, 4, 24, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    return o;
}

static struct perf_run *analyze_file(const char *path, const struct perf_params *p,
                                     const struct perf_hw *hw)
{
    struct adapt_trace *t;
    ck_assert_msg(adapt_trace_load(&t, path, 0) == ADAPT_OK, "%s", adapt_error_message());
    struct perf_run *r;
    enum adapt_status st = perf_run_analyze(&r, t, p, hw);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    adapt_trace_free(t);
    return r;
}

/* Hand computation of the synthetic run (comments give each term).
 * Per sample at FP32: compute 2*72 + 3*24 = 216; element-wise 2*8 = 16
 * (forward + backward tanh). Update per step 47 * 4 = 188.
 * Quantized compute per sample: the non-zero fraction nz discounts the GEMMs
 * that read the weights (forward, and backward-data for unit 1) but not the
 * weight gradient, so c1 costs 72*wl0/32*(nz0 + 1) and fc 24*wl1/32*(2*nz1 + 1):
 *   step 1    (8, .75 | 16, .5):  18*1.75   + 12*2   = 31.5    + 24   = 55.5;    ew 16*8/32 = 4
 *   steps 2,3 (6, .625| 16, .5):  13.5*1.625 + 24    = 21.9375 + 24   = 45.9375; ew 16*6/32 = 3
 *   step 4    (6, .625| 12, .75): 21.9375 + 9*2.5    = 21.9375 + 22.5 = 44.4375; ew 3
 *   steps 5,6 (10,.875| 12, .75): 22.5*1.875 + 22.5  = 42.1875 + 22.5 = 64.6875; ew 5
 * Samples per step 4, 4, 2, 4, 4, 2 (20 in all):
 *   Cq compute = 4*55.5 + 6*45.9375 + 4*44.4375 + 6*64.6875 = 1063.5
 *   Cq ew      = 16 + 12 + 6 + 12 + 20 + 10 = 76
 *   C32        = 20*216 + 20*16 + 6*188 = 4320 + 320 + 1128 = 5768
 * Overhead: PD step 2: 2 evals * 18 * (2 + 1) + 18 * 1 + 2 * 60 bins = 246;
 *           PD step 4: 3 * 16 * 3 + 16 + 3 * 50 = 310;
 *           accumulation: 6 steps * (18 + 24) weights * 2 = 504;   total 1060
 *   Cq = 1063.5 + 76 + 1128 + 1060 = 3327.5 */
#define SYN_C32 5768.0
#define SYN_CQ 3327.5

START_TEST(test_synthetic_costs)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "adapt.jsonl");
    struct syn_opts o = syn_default();
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_str_eq(r->name, "adapt");
    ck_assert_int_eq(r->steps, 6);
    ck_assert_int_eq(r->epochs, 2);
    ck_assert_close(r->samples, 20.0);
    ck_assert_close(r->c32_compute, 4320.0);
    ck_assert_close(r->cq_compute, 1063.5);
    ck_assert_close(r->c32_ew, 320.0);
    ck_assert_close(r->cq_ew, 76.0);
    ck_assert_close(r->update, 1128.0);
    ck_assert_close(r->overhead_pd, 246.0 + 310.0);
    ck_assert_close(r->overhead_acc, 504.0);
    ck_assert_close(r->c32, SYN_C32);
    ck_assert_close(r->cq, SYN_CQ);
    ck_assert_close(r->su1, SYN_C32 / SYN_CQ);
    ck_assert_close(r->su1_paper, 2 * SYN_C32 / (SYN_CQ + SYN_C32));
    ck_assert_close(r->overhead_share, 1060.0 / SYN_CQ);
    ck_assert_int_eq(r->n_pd, 2);
    ck_assert_int_eq(r->n_pu, 1);
    /* memory, b = 4: FP32 96*47 + 32*4*(16 input + 8 + 8 + 3 outputs) = 8992;
     * quantized 64*47 + 32*(47-42) + 18*2*wl0 + 24*2*wl1 + 4*(32*wl0 + 3*wl1)
     * + AdaPT's accumulated gradient G, 32*(18+24) = 1344,
     * = 4512 + 164 wl0 + 60 wl1, largest at (10, 12): 6872 */
    ck_assert_close(r->mem_rel, 6872.0 / 8992.0);
    /* size: (10*18*.875 + 12*24*.75) / (32*42) */
    ck_assert_close(r->model_size, 373.5 / 1344.0);
    /* inference: (72 + 24 + 8) / (72*.875*10/32 + 24*.75*12/32 + 8*10/32) */
    ck_assert_close(r->inference_su, 104.0 / 28.9375);
    /* sparsity over 42 weights: final (.125*18 + .25*24)/42; mean of the six steps */
    ck_assert_close(r->sparsity_final, 8.25 / 42.0);
    ck_assert_close(r->sparsity_mean, 83.25 / 252.0);
    /* per unit: c1 C32 20*144, Cq 4*31.5 + 10*21.9375 + 6*42.1875; fc 20*72, 10*24 + 10*22.5 */
    ck_assert_close(r->units[0].c32, 2880.0);
    ck_assert_close(r->units[0].cq, 598.5);
    ck_assert_close(r->units[1].c32, 1440.0);
    ck_assert_close(r->units[1].cq, 465.0);
    ck_assert_int_eq(r->units[0].passes, 2);
    ck_assert_int_eq(r->units[1].passes, 3);
    ck_assert_close(r->units[0].mean_wl, 46.0 / 6.0);
    ck_assert_close(r->units[1].mean_wl, 14.0);
    ck_assert_int_eq(r->units[0].final_wl, 10);
    ck_assert_int_eq(r->units[1].final_fl, 6);
    ck_assert_int_eq(r->units[0].n_pd, 1);
    ck_assert_int_eq(r->units[0].n_pu, 1);
    /* epoch marks: cumulative cost after steps 1-3: compute 222 + 183.75 + 91.875, ew 34,
     * update 564, overhead 246 + 3*84 */
    ck_assert_close(r->epoch_cq[0], 497.625 + 34 + 564 + 498);
    ck_assert_close(r->epoch_cq[1], SYN_CQ);
    ck_assert_close(r->points[2].epoch_x, 1.0);
    ck_assert_close(r->points[3].epoch_x, 1.0 + 1.0 / 3.0);
    perf_run_free(r);
}
END_TEST

/* SU2 against a float32 baseline of the same model (val 0.75, 0.82: best 0.82). */
/* Graph precision propagation recorded in the header: with tanh t1 float32 (precision_unit
 * -1) its element-wise work costs 16 per sample at every step (20 samples: 320, as C32),
 * instead of 76 at unit 0's word lengths; the stored activation of t1 (8 values) at 32 bits.
 * With t1 in unit 1's format (precision_unit 1) it follows unit 1's WL: 16, 16, 16, 12, 12, 12
 * bits for 4, 4, 2, 4, 4, 2 samples: 16/32 * (4 + 4 + 2) * 16 + 12/32 * 10 * 16 = 140. */
START_TEST(test_graph_precision_pricing)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "graph.jsonl");
    struct adapt_trace_layer ls[4];
    memcpy(ls, syn_layers, sizeof ls);
    static const char *const prec[4] = {"fixed(8,4)", "float32", "float32", "fixed(16,8)"};
    static const int pu[4] = {0, -1, -1, 1};
    for (int i = 0; i < 4; i++) {
        ls[i].graph_set = i == 0 || i == 3 ? "allow" : "deny";
        ls[i].graph_source = "preset";
        ls[i].precision = prec[i];
        ls[i].precision_unit = pu[i];
    }
    struct syn_opts o = syn_default();
    o.layers = ls;
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_close(r->cq_ew, 320.0);
    ck_assert_close(r->c32_ew, 320.0);
    ck_assert_close(r->cq_compute, 1063.5); /* the units' own costs are unchanged */
    perf_run_free(r);
    ls[1].precision = "fixed(16,8)";
    ls[1].precision_unit = 1;
    syn_write(path, &o);
    r = analyze_file(path, &p, NULL);
    ck_assert_close(r->cq_ew, 140.0);
    perf_run_free(r);
}
END_TEST

START_TEST(test_su2)
{
    char pa[128], pb[128];
    snprintf(pa, sizeof pa, "%s/adapt.jsonl", tmpdir);
    snprintf(pb, sizeof pb, "%s/fp32.jsonl", tmpdir);
    struct syn_opts o = syn_default();
    syn_write(pa, &o);
    struct syn_opts ob = syn_default();
    ob.fp32 = 1;
    ob.val[0] = 0.75;
    ob.val[1] = 0.82;
    syn_write(pb, &ob);
    struct perf_params p;
    perf_params_init(&p);
    p.target_tol = 0.01; /* target 0.81: the baseline reaches it in epoch 1, the run in epoch 0 */
    struct perf_run *r = analyze_file(pa, &p, NULL), *b = analyze_file(pb, &p, NULL);
    ck_assert_close(b->c32, SYN_C32);
    ck_assert_close(b->cq, SYN_C32); /* float32: priced as itself */
    ck_assert_int_eq(perf_run_set_baseline(r, b, &p), ADAPT_OK);
    ck_assert_close(r->target_acc, 0.82 - 0.01);
    ck_assert_int_eq(r->baseline_epoch, 1);
    ck_assert_int_eq(r->target_epoch, 0);
    double cq0 = 497.625 + 34 + 564 + 498; /* see test_synthetic_costs */
    ck_assert_close(r->su2, SYN_C32 / cq0);
    ck_assert_close(r->su2_paper, 2 * SYN_C32 / (cq0 + SYN_C32));
    perf_params_init(&p);
    p.target_acc = 0.9; /* nobody reaches it */
    ck_assert_int_eq(perf_run_set_baseline(r, b, &p), ADAPT_OK);
    ck_assert(isnan(r->su2));
    ck_assert_int_eq(r->target_epoch, -1);
    perf_run_free(r);
    perf_run_free(b);
}
END_TEST

/* Step lines every 2 steps, the last at step 4: the tail (steps 5, 6) is
 * priced at step 4's state; float32 cost does not depend on the states. */
START_TEST(test_log_every_and_tail)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "sparse.jsonl");
    struct syn_opts o = syn_default();
    o.log_every = 2;
    o.last_step = 4;
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_int_eq(r->steps, 6);
    ck_assert_int_eq(r->n_points, 3);
    ck_assert_close(r->c32, SYN_C32);
    /* Cq compute: steps 1-2 (8 samples) at step 2's 45.9375, steps 3-4 (6) and the
     * tail 5-6 (6) at step 4's 44.4375 */
    ck_assert_close(r->cq_compute, 8 * 45.9375 + 12 * 44.4375);
    /* epoch 0 ends inside the interval (2, 4]: 2 of its 6 samples count.
     * C32 per sample 232, update 2*188 per interval */
    ck_assert_close(r->epoch_c32[0], (8 * 232 + 376) + (6 * 232 + 376) / 3.0);
    perf_run_free(r);
}
END_TEST


static enum adapt_status try_analyze(const char *path);

/* A trace of the synthetic model trained one sample a step (dataset.train 1, batch 1, the given
 * accumulation): step records at steps[0..ns) with fixed formats (unit 0 at WL 8, unit 1 at
 * WL 16), then epoch records at epoch_steps[0..ne) (epochs 0, 1, ...). */
static void one_sample_write(const char *path, const int64_t *steps, int ns,
                             const int64_t *epoch_steps, int ne, int accumulation)
{
    struct adapt_trace_header h;
    struct adapt_trace_unit units[2];
    json_t *cfg;
    syn_header(&h, &cfg, 1, 24, units);
    json_object_set_new(json_object_get(cfg, "train"), "accumulation_steps",
                        json_integer(accumulation));
    h.dataset.train = 1;
    struct adapt_trace_writer *w;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    json_decref(cfg);
    for (int i = 0; i < ns; i++) {
        struct adapt_trace_unit_state us[2] = {{8, 4, NAN, -1, NAN, -1, -1, NAN},
                                              {16, 8, NAN, -1, NAN, -1, -1, NAN}};
        struct adapt_trace_step st = {steps[i], 0, 0.01, 1.0, ADAPT_TRACE_STRATEGY_NONE, 2, us,
                                      0, NULL, 1, 0};
        ck_assert_int_eq(adapt_trace_write_step(w, &st), ADAPT_OK);
    }
    for (int e = 0; e < ne; e++) {
        struct adapt_trace_epoch ep = {e, epoch_steps[e], 0.01, 1.0, 0.5, 1.0, 0.5, 1.0, 1.0};
        ck_assert_int_eq(adapt_trace_write_epoch(w, &ep), ADAPT_OK);
    }
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
}

/* Step numbers size nothing: a run of 2^53 steps (the most a trace may record) of one sample
 * each (dataset.train 1, so every step is an epoch) is priced from its two step records, in the
 * memory and time of any two-record trace. Every interval trains one sample a step at the same
 * formats, so each cost is proportional to the steps: the run costs 2^52 times the same trace
 * ending at step 2, and has its SU1. Its last step ends epoch 2^53 - 1 (0-based), at x = 2^53.
 * Before, the analysis allocated one epoch boundary per step (2^56 bytes) and failed. */
START_TEST(test_step_numbers_size_nothing)
{
    char big[128], small[128];
    tu_path(big, sizeof big, tmpdir, "big.jsonl");
    tu_path(small, sizeof small, tmpdir, "small.jsonl");
    const int64_t sb[2] = {1, ADAPT_TRACE_STEP_MAX}, ss[2] = {1, 2};
    one_sample_write(big, sb, 2, NULL, 0, 1);
    one_sample_write(small, ss, 2, NULL, 0, 1);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(big, &p, NULL), *r2 = analyze_file(small, &p, NULL);
    ck_assert_int_eq(r->steps, ADAPT_TRACE_STEP_MAX);
    ck_assert_close(r->samples, 0x1p53);
    ck_assert_int_eq(r->n_points, 2);
    ck_assert_close(r->points[1].epoch_x, 0x1p53);
    ck_assert_close(r->c32, r2->c32 * 0x1p52);
    ck_assert_close(r->cq, r2->cq * 0x1p52);
    ck_assert_close(r->su1, r2->su1);
    perf_run_free(r);
    perf_run_free(r2);
}
END_TEST

/* Counts multiplied from the file are checked: steps after the last step record (up to an epoch
 * record at 2^53) times accumulation_steps 2^31 - 1 do not fit 64 bits, and are refused naming
 * the field; a layer shape of 2^80 elements and parameters adding up past 2^63 are refused. */
START_TEST(test_counts_overflow)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "ovf.jsonl");
    const int64_t s1[1] = {1}, e1[1] = {ADAPT_TRACE_STEP_MAX};
    one_sample_write(path, s1, 1, e1, 1, 2147483647);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(path);
    ck_assert_msg_has(":1: config.train.accumulation_steps = 2147483647 times the "
                      "9007199254740991 steps after the last step record overflows");

    struct adapt_trace_layer ls[4];
    memcpy(ls, syn_layers, sizeof ls);
    ls[1].out[0] = ls[1].out[1] = (int64_t)1 << 40; /* the tanh's output: 2^81 elements */
    struct syn_opts o = syn_default();
    o.layers = ls;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(":1: model.layers[1] (\"t1\"): its in or out shape holds more elements "
                      "than a 64-bit count");
    memcpy(ls, syn_layers, sizeof ls);
    ls[1].params = ls[2].params = INT64_MAX / 2 + 1;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(":1: the layers' params or the units' weights add up to more than a "
                      "64-bit count");

    /* a schedule of 100000 epochs of 2^63 - 1 samples in batches of 1 */
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "lenet5", 10), ADAPT_OK);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = NULL;
    ck_assert_int_eq(perf_schedule_price(&r, "8:100000", m, 1, INT64_MAX, &p, NULL), ADAPT_EINVAL);
    ck_assert_msg_has("schedule: 100000 epochs of 9223372036854775807 steps (batch 1) are more "
                      "than 9007199254740992 optimizer steps");
    ck_assert_ptr_null(r);
    perf_model_free(m);
}
END_TEST

/* Training memory holds each policy's own state (the same synthetic states,
 * b = 4; see test_synthetic_costs for the common terms, 3168 + 164 wl0 +
 * 60 wl1 over 8992 for float32):
 *   adapt:  + G, 32 x 42 unit weights = 1344           -> peak at (10, 12): 6872
 *   muppet: + the kept gradients of muppet_r = 2 epochs (the trace's config),
 *           32 x 2 x 42 = 2688                          -> 3168 + 2688 + 2360 = 8216
 *   amp:    weight gradients float32, copies at WL: 18 (32 + wl0) + 24 (32 + wl1)
 *           in place of 2 x 18 wl0 + 2 x 24 wl1, so 3168 + 1344 + 146 wl0 + 36 wl1
 *                                                       -> at (10, 12): 6404
 *   fixed:  no state -> 3168 + 2360 = 5528
 * Before the policy's state was priced every policy gave 5528 / 8992. */
START_TEST(test_policy_memory)
{
    static const char *const pol[4] = {"adapt", "muppet", "amp", "fixed"};
    static const double want[4] = {6872.0, 8216.0, 6404.0, 5528.0};
    for (int k = 0; k < 4; k++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.jsonl", tmpdir, pol[k]);
        struct syn_opts o = syn_default();
        o.policy = pol[k];
        syn_write(path, &o);
        struct perf_params p;
        perf_params_init(&p);
        struct perf_run *r = analyze_file(path, &p, NULL);
        ck_assert_msg(fabs(r->mem_rel - want[k] / 8992.0) < 1e-12, "%s: mem_rel %.17g, want %.17g",
                      pol[k], r->mem_rel, want[k] / 8992.0);
        perf_run_free(r);
    }
    int g = -1;
    ck_assert_close(perf_policy_state_bits("adapt", 42, 3, &g), 1344.0);
    ck_assert_int_eq(g, 0);
    ck_assert_close(perf_policy_state_bits("muppet", 42, 3, &g), 4032.0);
    ck_assert_close(perf_policy_state_bits("amp", 42, 3, &g), 0.0);
    ck_assert_int_eq(g, 1);
    ck_assert_close(perf_policy_state_bits("fp32", 42, 3, NULL), 0.0);
}
END_TEST

/* Weight sparsity does not cheapen the weight-gradient GEMM: a unit whose
 * weights are all zero still pays dW. Synthetic c1 (2 passes, 72 MACs) at
 * WL 8 and sparsity 1 costs 72 * 8/32 * (0 + 1) = 18 per sample, not 0;
 * fc (3 passes, 24 MACs) at WL 16 and sparsity 0.5 costs 24 * 16/32 * (2 * 0.5
 * + 1) = 24, not 3 * 24 * 0.5 * 0.5 = 18 (test_synthetic_costs prices whole
 * runs this way). Inference (forward only) keeps the discount. */
START_TEST(test_sparsity_weight_gradient)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "sparse1.jsonl");
    struct syn_opts o = syn_default();
    o.last_step = 1; /* every step priced at step 1's state, then overridden below */
    syn_write(path, &o);
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    t->steps[0].units[0].sparsity = 1.0;
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r;
    ck_assert_int_eq(perf_run_analyze(&r, t, &p, NULL), ADAPT_OK);
    /* 20 samples at (18 + 24) per sample */
    ck_assert_close(r->cq_compute, 20.0 * (18.0 + 24.0));
    ck_assert_close(r->units[0].cq, 20.0 * 18.0);
    /* inference: c1 free, fc 24 * .5 * 16/32, tanh 8 * 8/32; float32 104 */
    ck_assert_close(r->inference_su, 104.0 / (6.0 + 2.0));
    perf_run_free(r);
    adapt_trace_free(t);
}
END_TEST

/* SU3 (the AdaPT reference analysis' rescaling to MuPPET's float32
 * baseline) recomputes the AdaPT paper's table 2 from its SU1 column: with
 * C32 = 1, SU1 paper = 2 / (Cq + 1) gives Cq = 2 / SU1 - 1, and
 * SU3 = 150/E * 2 / (Cq + bs / accumulation), bs = 128 / 512 on CIFAR:
 *   C10 AlexNet  SU1 1.42, E 100, accum 4: Cq = 0.40845, 3 / 0.47095 = 6.37 (table: 6.42)
 *   C100 AlexNet SU1 1.32, E 100, accum 4: Cq = 0.51515, 3 / 0.57765 = 5.19 (table: 5.23)
 *   C10 ResNet   SU1 1.20, E 100, accum 4: Cq = 0.66667, 3 / 0.72917 = 4.11 (table: 4.01)
 *   C100 ResNet  SU1 1.26, E 100, accum 2: Cq = 0.58730, 3 / 0.71230 = 4.21 (table: 3.36)
 * and on the MNIST family (bs 1) E 15, accum 4, SU1 1.49: Cq = 0.34228,
 * 10 * 2 / 0.59228 = 33.77. SU2 in the reference convention: SU1 paper over
 * the fraction of epochs trained when the target is first reached. */
START_TEST(test_su3_su2_reference)
{
    static const double su1[4] = {1.42, 1.32, 1.20, 1.26};
    static const int accum[4] = {4, 4, 4, 2};
    static const char *const want[4] = {"6.37", "5.19", "4.11", "4.21"};
    for (int k = 0; k < 4; k++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%.2f", perf_su3(1.0, 2.0 / su1[k] - 1.0, 100, accum[k], 512, 1));
        ck_assert_str_eq(buf, want[k]);
    }
    ck_assert_close(perf_su3(1.0, 0.5, 100, 4, 512, 1), 1.5 * 2.0 / (0.5 + 0.0625));
    ck_assert_close(perf_su3(1.0, 0.5, 15, 4, 256, 0), 10.0 * 2.0 / (0.5 + 0.25));
    ck_assert(isnan(perf_su3(1.0, 0.5, 0, 4, 256, 0)));
    /* SU2 reference: 1.49 x 15 / 3 when the target is first met in epoch index 2 */
    ck_assert_close(perf_su2_reference(1.49, 2, 15), 1.49 * 15.0 / 3.0);
    ck_assert(isnan(perf_su2_reference(1.49, -1, 15)));
    /* through a run: target 0.81 met in epoch 0 of 2; E 2, accum 1, batch 4, not CIFAR */
    char path[128];
    tu_path(path, sizeof path, tmpdir, "adapt.jsonl");
    struct syn_opts o = syn_default();
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    p.target_acc = 0.81;
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_int_eq(r->target_epoch, 0);
    ck_assert_close(r->su2_ref, r->su1_paper * 2.0);
    ck_assert_close(r->su3, 75.0 * 2.0 * SYN_C32 / (SYN_CQ + SYN_C32));
    perf_run_free(r);
    /* MuPPET's ResNet schedule as the reference analysis lists it,
     * 8:22,12:22,14:10,16:15,32:45 (every epoch the same cost, no update
     * priced): Cq / C32 = (22*8 + 22*12 + 10*14 + 15*16 + 45*32) / (32*114)
     * = 2260 / 3648, SU1 paper = 2 / (1 + 2260/3648) = 1.235 (the paper's
     * table 2 prints 1.25); a schedule's SU3 is its SU1 paper. */
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "resnet20", 10), ADAPT_OK);
    perf_params_init(&p);
    p.update_ops = p.accum_ops = 0;
    ck_assert_int_eq(perf_schedule_price(&r, "8:22,12:22,14:10,16:15,32:45", m, 128, 45000, &p,
                                         NULL),
                     ADAPT_OK);
    ck_assert_close(r->su1_paper, 2.0 / (1.0 + 2260.0 / 3648.0));
    ck_assert_close(r->su3, r->su1_paper);
    char buf[16];
    snprintf(buf, sizeof buf, "%.3f", r->su3);
    ck_assert_str_eq(buf, "1.235");
    perf_run_free(r);
    perf_model_free(m);
}
END_TEST

/* Runs are named by their configuration file, with the AdaPT compat mode
 * when it is "reference" and the seed when it is not 1 (the synthetic
 * trace's seed is 7); the paper-compat table names both conventions and
 * adds SU2 ref and SU3. */
START_TEST(test_report_names)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "trace.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "experiments/configs/reference/lenet_msgd_fp_fmnist.ini";
    o.compat = "reference";
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_str_eq(r->name, "lenet_msgd_fp_fmnist [reference] seed 7");
    ck_assert_str_eq(r->compat, "reference");
    perf_run_free(r);
    o.compat = NULL; /* corrected by default */
    syn_write(path, &o);
    r = analyze_file(path, &p, NULL);
    ck_assert_str_eq(r->name, "lenet_msgd_fp_fmnist seed 7");
    ck_assert_str_eq(r->compat, "corrected");
    p.paper_compat = 1;
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    struct perf_run *rows[1] = {r};
    ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_TEXT, rows, 1, &p, 0), ADAPT_OK);
    fclose(f);
    static const char *const heads[] = {"SU1 paper", "SU2 paper", "SU2 ref", "SU3", "compat",
                                        "corrected", "lenet_msgd_fp_fmnist seed 7"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        ck_assert_msg(strstr(txt, heads[i]) != NULL, "lacks '%s':\n%s", heads[i], txt);
    free(txt);
    perf_run_free(r);
}
END_TEST

/* A synthetic run of experiments/configs/fmnist_lenet5.ini (run.name `name`, NULL: none) at
 * tmpdir/DIR/trace.jsonl; its path in `path`. */
static void labelled_write(char *path, size_t cap, const char *dir, const char *name)
{
    char out[512], d[256];
    tu_path(d, sizeof d, tmpdir, dir);
    ck_assert_int_eq(tu_run(out, sizeof out, "mkdir -p '%s'", d), 0);
    tu_path(path, cap, d, "trace.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "experiments/configs/fmnist_lenet5.ini";
    o.run_name = name;
    syn_write(path, &o);
}

/* adapt-perf on two runs of one configuration file in runs/long/adapt and runs/my/adapt:
 * each row is named with the end of its path that tells them apart; a run.name names its
 * row. */
START_TEST(test_run_labels_cli)
{
    if (!tu_have_program("./adapt-perf")) return;
    char a[256], b[256], out[8192];
    labelled_write(a, sizeof a, "runs/long/adapt", NULL);
    labelled_write(b, sizeof b, "runs/my/adapt", NULL);
    char da[256], db[256];
    snprintf(da, sizeof da, "%.*s", (int)(strrchr(a, '/') - a), a);
    snprintf(db, sizeof db, "%.*s", (int)(strrchr(b, '/') - b), b);
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format csv %s %s", da, db) == 0, "%s",
                  out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7 (long/adapt),"), "%s", out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7 (my/adapt),"), "%s", out);
    /* a run.name wins: the named run is "mxfp8", the other keeps its stem */
    labelled_write(b, sizeof b, "runs/my/adapt", "mxfp8");
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format csv %s %s", da, db) == 0, "%s",
                  out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7,"), "%s", out);
    ck_assert_msg(strstr(out, "\nmxfp8,"), "%s", out);
    /* markdown and text tables name them alike */
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format markdown %s %s", da, db) == 0,
                  "%s", out);
    ck_assert_msg(strstr(out, "\n| mxfp8 | adapt |"), "%s", out);
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf %s %s", da, db) == 0, "%s", out);
    ck_assert_msg(strstr(out, "mxfp8 "), "%s", out);
}
END_TEST

/* perf_runs_label: runs of one name get the fewest trailing path components that tell them
 * apart (the folder alone when it does, as before); unique names, and runs.name, are kept. */
START_TEST(test_run_labels)
{
    static const struct {
        const char *dir[3], *name[3], *want[3];
    } cases[] = {
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (long/adapt)", "fmnist_lenet5 seed 7 (my/adapt)", NULL}},
        /* the folder alone tells them apart: today's labels */
        {{"runs/fixed8", "runs/mxfp8", NULL}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (fixed8)", "fmnist_lenet5 seed 7 (mxfp8)", NULL}},
        /* a run.name wins; names that differ get nothing appended */
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {"fixed8", "mxfp8", NULL},
         {"fixed8", "mxfp8", NULL}},
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {NULL, "mxfp8", NULL},
         {"fmnist_lenet5 seed 7", "mxfp8", NULL}},
        /* each run the fewest components: a/x and b/x need two, c/y one */
        {{"a/x", "b/x", "c/y"}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (a/x)", "fmnist_lenet5 seed 7 (b/x)", "fmnist_lenet5 seed 7 (y)"}},
        /* one run.name twice: told apart by the path as well */
        {{"p/q/r", "s/q/r", NULL}, {"same", "same", NULL}, {"same (p/q/r)", "same (s/q/r)", NULL}},
    };
    struct perf_params p;
    perf_params_init(&p);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct perf_run *r[3] = {NULL, NULL, NULL};
        int n = 0;
        char path[256];
        for (; n < 3 && cases[c].dir[n]; n++) {
            char dir[64];
            snprintf(dir, sizeof dir, "c%zu/%s", c, cases[c].dir[n]);
            labelled_write(path, sizeof path, dir, cases[c].name[n]);
            r[n] = analyze_file(path, &p, NULL);
        }
        ck_assert_int_eq(perf_runs_label(r, n), ADAPT_OK);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(!strcmp(r[i]->name, cases[c].want[i]), "case %zu run %d: \"%s\", not "
                          "\"%s\"", c, i, r[i]->name, cases[c].want[i]);
            perf_run_free(r[i]);
        }
    }
    ck_assert_int_eq(perf_runs_label(NULL, 0), ADAPT_OK);
}
END_TEST

/* ==================================================================== models */

/* LeNet-5 MACs per layer (doc/models.md / the reference repository):
 * conv 1->6 k5 on 32x32: 28*28*6*25 = 117600; conv 6->16 k5 on 14x14:
 * 10*10*16*150 = 240000; conv 16->120 k5 on 5x5: 120*400 = 48000;
 * fc 120*84 = 10080; fc 84*10 = 840; 416520 in all; 61706 parameters. */
START_TEST(test_lenet5_table)
{
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "lenet5", 10), ADAPT_OK);
    static const int64_t macs[5] = {117600, 240000, 48000, 10080, 840};
    static const int64_t weights[5] = {150, 2400, 48000, 10080, 840};
    static const char *const names[5] = {"0", "3", "6", "9", "11"};
    ck_assert_int_eq(m->n_units, 5);
    for (int u = 0; u < 5; u++) {
        ck_assert_int_eq(m->units[u].macs, macs[u]);
        ck_assert_int_eq(m->units[u].weights, weights[u]);
        ck_assert_str_eq(m->units[u].name, names[u]);
    }
    ck_assert_int_eq(m->macs, 416520);
    ck_assert_int_eq(m->params, 61706);
    /* conv 3's GEMMs at batch 256: Cout 16, 10*10 outputs, Cin*K*K 150 */
    struct perf_gemm g[3];
    ck_assert_int_eq(perf_model_unit_gemms(m, 1, 256, g), 3);
    ck_assert_int_eq(g[0].m, 16);
    ck_assert_int_eq(g[0].n, 25600);
    ck_assert_int_eq(g[0].k, 150);
    ck_assert_int_eq(g[1].m, 150);
    ck_assert_int_eq(g[2].k, 25600);
    ck_assert_int_eq(perf_model_unit_gemms(m, 0, 256, g), 2); /* reads the input */
    perf_model_free(m);
    /* totals of the other models (doc/models.md) */
    ck_assert_int_eq(perf_model_alloc(&m, "alexnet_cifar", 10), ADAPT_OK);
    ck_assert_int_eq(m->macs, 14957056);
    ck_assert_int_eq(m->params, 2472266);
    perf_model_free(m);
    ck_assert_int_eq(perf_model_alloc(&m, "resnet20", 10), ADAPT_OK);
    ck_assert_int_eq(m->macs, 40813184);
    ck_assert_int_eq(m->params, 272474);
    ck_assert_int_eq(m->n_units, 22);
    perf_model_free(m);
    ck_assert_int_eq(perf_model_alloc(&m, "nosuchnet", 10), ADAPT_ENOENT);
    ck_assert_msg_has("nosuchnet.model: no such model description");
}
END_TEST

/* A grouped conv is priced as one GEMM per group (Cout/G x N x (Cin/G) K K, count G), so
 * its GEMMs hold exactly its MACs; every unit of MobileNet-v2 and of a dense network obeys
 * sum count m n k = batch MACs. Expected shape from the description: MobileNet-v2's first
 * block's depthwise conv (layers.0.conv2, 32 channels, 3x3, 32x32 plane) at batch 8: 32
 * GEMMs of 1 x 8192 x 9. */
START_TEST(test_grouped_gemms)
{
    static const char *const models[2] = {"mobilenetv2", "resnet20"};
    for (int mi = 0; mi < 2; mi++) {
        struct perf_model *m;
        ck_assert_int_eq(perf_model_alloc(&m, models[mi], 10), ADAPT_OK);
        int depthwise = 0;
        for (int u = 0; u < m->n_units; u++) {
            struct perf_gemm g[3];
            perf_model_unit_gemms(m, u, 8, g);
            const struct adapt_trace_layer *l = &m->layers[m->units[u].layer];
            ck_assert_int_eq(g[0].count, l->groups);
            ck_assert_int_eq(g[0].count * g[0].m * g[0].n * g[0].k, 8 * m->units[u].macs);
            ck_assert_int_eq(g[2].count * g[2].m * g[2].n * g[2].k, 8 * m->units[u].macs);
            if (!strcmp(m->units[u].name, "layers.0.conv2")) {
                depthwise = 1;
                ck_assert_int_eq(g[0].count, 32);
                ck_assert_int_eq(g[0].m, 1);
                ck_assert_int_eq(g[0].n, 8192);
                ck_assert_int_eq(g[0].k, 9);
            }
        }
        ck_assert_int_eq(depthwise, mi == 0);
        perf_model_free(m);
    }
}
END_TEST

/* The performance model's table of a model (a built-in name or a description file) against
 * the engine's layers, field by field. */
static void table_matches_engine(const char *model, int classes)
{
    struct adapt_net *net = adapt_model_build(model, classes);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK); /* counts units and totals */
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, model, classes), ADAPT_OK);
    ck_assert_int_eq(m->n_layers, net->nnodes);
    ck_assert_int_eq(m->n_units, net->nunits);
    ck_assert_int_eq(m->macs, net->macs);
    ck_assert_int_eq(m->params, net->nparams_trainable);
    for (int d = 0; d < 3; d++) ck_assert_int_eq(m->input[d], net->in_chw[d]);
    int u = 0;
    for (int i = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        const struct adapt_trace_layer *t = &m->layers[i];
        ck_assert_str_eq(t->name, l->name);
        ck_assert_str_eq(t->kind, l->ops->kind);
        for (int d = 0; d < 3; d++) {
            ck_assert_int_eq(t->in[d], l->in_dim[0][d]);
            ck_assert_int_eq(t->out[d], l->out_dim[d]);
        }
        int64_t params = 0;
        for (int p = 0; p < l->nparam; p++)
            if (l->param[p].role != ADAPT_PARAM_BUFFER)
                params += (int64_t)l->param[p].value.numel;
        ck_assert_int_eq(t->params, params);
        ck_assert_int_eq(t->macs, l->macs);
        ck_assert_int_eq(t->elementwise, l->elementwise);
        ck_assert_int_eq(t->unit, l->is_unit ? u : -1);
        ck_assert_int_eq(t->k, l->k);
        ck_assert_int_eq(t->stride, l->stride);
        ck_assert_int_eq(t->pad, l->pad);
        if (l->is_unit) {
            ck_assert_int_eq(m->units[u].layer, i);
            ck_assert_int_eq(m->units[u].weights, (int64_t)l->param[0].value.numel);
            ck_assert_int_eq(net->unit_node[u], i);
            u++;
        }
    }
    perf_model_free(m);
    adapt_net_free(net);
}

/* The built-in table equals what the engine builds, layer by layer. */
START_TEST(test_table_matches_engine)
{
    static const char *const models[4] = {"lenet5", "alexnet_cifar", "alexnet_mnist", "resnet20"};
    static const int classes[2] = {10, 47};
    for (int mi = 0; mi < 4; mi++)
        for (int ci = 0; ci < 2; ci++) table_matches_engine(models[mi], classes[ci]);
    /* the newer kinds: gelu, a concat of three, pools with padding (their cost counts the
     * input cells read) */
    char dir[256], path[300];
    tu_tmpdir_make(dir, sizeof dir, "perf");
    snprintf(path, sizeof path, "%s/kinds.model", dir);
    tu_write_text(path, "input 3 12 12\n"
                        "conv2d stem out=8 k=3 pad=1\n"
                        "gelu act0 approximate=tanh\n"
                        "maxpool2d pool0 k=3 stride=2 pad=1\n"
                        "conv2d b1 out=4 k=1\n"
                        "avgpool2d b3 in=pool0 k=3 stride=1 pad=1 count_include_pad=0\n"
                        "concat mix in=b1,b3,pool0\n"
                        "avgpool2d pool1 k=2 stride=2 pad=1\n"
                        "flatten f\n"
                        "linear fc out=classes\n");
    table_matches_engine(path, 10);
    tu_tmpdir_remove(dir);
}
END_TEST

/* ================================================================ schedules */

/* MuPPET's CIFAR-10 AlexNet schedule: Cq/C32 = (8*16 + 12*10 + 14*14 + 16*14
 * + 32*45) / (32*99) = 2108/3168 when only WL-scaled work counts (update and
 * accumulation priced at 0), so SU = 2 / (1 + 2108/3168) = 1.2009...; the
 * AdaPT paper's table 2 prints 1.20. With the FP32 update priced the ratio
 * moves in the fourth digit and still prints 1.20. */
START_TEST(test_schedule_muppet)
{
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "alexnet_cifar", 10), ADAPT_OK);
    struct perf_params p;
    perf_params_init(&p);
    p.update_ops = p.accum_ops = 0;
    struct perf_run *r;
    ck_assert_int_eq(
        perf_schedule_price(&r, "8:16,12:10,14:14,16:14,32:45", m, 128, 45000, &p, NULL), ADAPT_OK);
    ck_assert_close(r->cq / r->c32, 2108.0 / 3168.0);
    ck_assert_close(r->su1_paper, 2.0 / (1.0 + 2108.0 / 3168.0));
    ck_assert_int_eq(r->epochs, 99);
    ck_assert_int_eq(r->steps, 99 * 352); /* ceil(45000 / 128) steps per epoch */
    perf_run_free(r);
    perf_params_init(&p);
    p.paper_compat = 1;
    ck_assert_int_eq(
        perf_schedule_price(&r, "8:16,12:10,14:14,16:14,32:45", m, 128, 45000, &p, NULL), ADAPT_OK);
    char buf[16];
    snprintf(buf, sizeof buf, "%.2f", r->su1_paper);
    ck_assert_str_eq(buf, "1.20");
    /* the report prints it in the SU1 column */
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    struct perf_run *rows[1] = {r};
    ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_CSV, rows, 1, &p, 0), ADAPT_OK);
    fclose(f);
    ck_assert_msg(strstr(txt, ",1.20") != NULL, "csv: %s", txt);
    free(txt);
    perf_run_free(r);
    /* malformed schedules */
    static const char *const bad[] = {"", "8", "8:", "8:0", "33:4", "8:4,", "8:4;16:2", "x:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(perf_schedule_price(&r, bad[i], m, 128, 45000, &p, NULL), ADAPT_EINVAL);
        ck_assert_msg_has("WL:EPOCHS");
    }
    perf_model_free(m);
}
END_TEST

/* =========================================================== hardware table */

/* fp32 GEMMs at 1 GOP/s (2*10^3 operations in 2 us), int8 at 4; element-wise
 * fp32 at 1e9 per second, int8 at 4e9. */
static const char *const hw_table =
    "{\"schema\": 1, \"device\": \"cpu\", \"machine\": \"test\", \"date\": \"2024-01-01\",\n"
    " \"gemm\": [{\"type\": \"fp32\", \"m\": 10, \"n\": 10, \"k\": 10, \"seconds\": 2e-6},\n"
    "          {\"type\": \"int8\", \"m\": 10, \"n\": 10, \"k\": 10, \"seconds\": 5e-7},\n"
    "          {\"type\": \"int8\", \"m\": 10, \"n\": 10, \"k\": 10, \"seconds\": 1e-6}],\n"
    " \"elementwise\": [{\"type\": \"fp32\", \"elements\": 1000000, \"seconds\": 1e-3},\n"
    "                 {\"type\": \"int8\", \"elements\": 1000000, \"seconds\": 2.5e-4}]}\n";

START_TEST(test_hw_calibrated)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "hw.json");
    tu_write_text(path, hw_table);
    struct perf_hw *hw;
    ck_assert_int_eq(perf_hw_load(&hw, path), ADAPT_OK);
    ck_assert_int_eq(perf_hw_set_map(hw, "8:int8,32:fp32"), ADAPT_OK);
    ck_assert_str_eq(perf_hw_type_for(hw, 7), "int8");
    ck_assert_str_eq(perf_hw_type_for(hw, 9), "fp32");
    /* a shape not in the table runs at its nearest entry's throughput;
     * the faster of two int8 entries counts: 2*20*30*40 / 4e9 */
    struct perf_gemm g = {20, 30, 40, 1};
    double s;
    ck_assert_int_eq(perf_hw_gemm_seconds(hw, "int8", &g, &s), ADAPT_OK);
    ck_assert_close(s, 2.0 * 20 * 30 * 40 / 4e9);
    ck_assert_int_eq(perf_hw_gemm_seconds(hw, "fp16", &g, &s), ADAPT_ENOENT);
    /* schedule 32:1,8:1 on the synthetic model, batch 4, 10 samples per epoch
     * (2.5 micro-batches, 3 steps). One micro-batch at fp32: GEMMs
     * 2*4*(2*72 + 3*24) = 1728 operations, element-wise 2*8*4 = 64 -> 1.792 us;
     * at int8 a quarter, 0.448 us. Update 3 steps * 188 operations at fp32.
     * t32 = 2 * (2.5*1.792 + 0.564) us; tq = (2.5*1.792 + 0.564) + (2.5*0.448 + 0.564) us. */
    struct adapt_trace_header h;
    struct adapt_trace_unit units[2];
    json_t *cfg;
    syn_header(&h, &cfg, 4, 24, units);
    struct perf_model *m;
    ck_assert_int_eq(perf_model_from_header(&m, &h, "synthetic"), ADAPT_OK);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r;
    ck_assert_int_eq(perf_schedule_price(&r, "32:1,8:1", m, 4, 10, &p, hw), ADAPT_OK);
    double e32 = (2.5 * 1.792 + 0.564) * 1e-6, e8 = (2.5 * 0.448 + 0.564) * 1e-6;
    ck_assert(r->has_hw);
    ck_assert_msg(fabs(r->t32_s - 2 * e32) <= 1e-12 * 2 * e32, "t32 %.17g", r->t32_s);
    ck_assert_msg(fabs(r->tq_s - (e32 + e8)) <= 1e-12 * (e32 + e8), "tq %.17g", r->tq_s);
    ck_assert_close(r->su1_hw, 2 * e32 / (e32 + e8));
    /* inference at the final int8: forward GEMMs 2*4*(72 + 24) and element-wise 8*4, all 4x
     * faster */
    ck_assert_close(r->inference_su_hw, 4.0);
    perf_run_free(r);
    perf_model_free(m);
    json_decref(cfg);
    /* map errors */
    ck_assert_int_eq(perf_hw_set_map(hw, "8:int8,16:fp16,32:fp32"), ADAPT_EINVAL);
    ck_assert_msg_has("fp16");
    ck_assert_int_eq(perf_hw_set_map(hw, "8:int8"), ADAPT_EINVAL);
    ck_assert_msg_has("32");
    ck_assert_int_eq(perf_hw_set_map(hw, "16:int8,8:fp32"), ADAPT_EINVAL);
    perf_hw_free(hw);
    /* malformed tables name the file and the entry */
    tu_write_text(path, "{\"schema\": 1, \"device\": \"cpu\", \"gemm\": [{\"type\": \"fp32\", "
                        "\"m\": 1, \"n\": 1, \"k\": 1, \"seconds\": 1}, {\"type\": \"fp32\", "
                        "\"m\": 0}], \"elementwise\": [{\"type\": \"fp32\", \"elements\": 1, "
                        "\"seconds\": 1}]}\n");
    ck_assert_int_eq(perf_hw_load(&hw, path), ADAPT_EFORMAT);
    ck_assert_msg_has(path);
    ck_assert_msg_has("gemm[1]");
    tu_write_text(path, "{\"schema\": 1, \"device\": \"tpu\"}\n");
    ck_assert_int_eq(perf_hw_load(&hw, path), ADAPT_EFORMAT);
    ck_assert_msg_has("device");
    tu_write_text(path, "{\"schema\": 1,\n \"device\": }\n");
    ck_assert_int_eq(perf_hw_load(&hw, path), ADAPT_EFORMAT);
    ck_assert_msg_has(":2:");
}
END_TEST

/* ==================================================================== errors */

/* Replaces line `n` (1-based) of a file by `text` (NULL: drops the newline of
 * the last line, i.e. truncates it). */
static void edit_line(const char *path, int n, const char *text)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *lines[64], *line = NULL;
    size_t cap = 0;
    int nl = 0;
    while (getline(&line, &cap, f) > 0 && nl < 64) lines[nl++] = strdup(line);
    free(line);
    fclose(f);
    f = fopen(path, "w");
    for (int i = 0; i < nl; i++) {
        if (i == n - 1 && text) fputs(text, f);
        else if (!text && i == nl - 1) fwrite(lines[i], 1, strlen(lines[i]) - 1, f);
        else fputs(lines[i], f);
        free(lines[i]);
    }
    fclose(f);
}

static enum adapt_status try_analyze(const char *path)
{
    struct adapt_trace *t;
    enum adapt_status st = adapt_trace_load(&t, path, 0);
    if (st != ADAPT_OK) return st;
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = NULL;
    st = perf_run_analyze(&r, t, &p, NULL);
    perf_run_free(r);
    adapt_trace_free(t);
    return st;
}

START_TEST(test_bad_traces)
{
    char path[128], msg[256];
    tu_path(path, sizeof path, tmpdir, "bad.jsonl");
    struct syn_opts o = syn_default();
    /* truncated: the end record lost its newline (line 11: header, 6 steps,
     * 2 epochs, test, end) */
    syn_write(path, &o);
    edit_line(path, 0, NULL);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:11: truncated", path);
    ck_assert_msg_has(msg);
    /* malformed JSON on line 3 */
    syn_write(path, &o);
    edit_line(path, 3, "{\"type\":\"step\",\"step\":2,\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:3: malformed JSON", path);
    ck_assert_msg_has(msg);
    /* a word length of 40 in the step on line 3 (step 2) */
    syn_write(path, &o);
    edit_line(
        path, 3,
        "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"lr\":0.01,\"loss\":1.2,\"strategy\":"
        "null,\"units\":[{\"wl\":8,\"fl\":4},{\"wl\":40,\"fl\":4}],\"events\":[],\"accum\":1}\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:3: step record: field \"wl\" = 40 is out of range [1, 32]",
             path);
    ck_assert_msg_has(msg);
    /* steps out of order: line 4 repeats step 2 */
    syn_write(path, &o);
    edit_line(
        path, 4,
        "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"lr\":0.01,\"loss\":1.2,\"strategy\":"
        "null,\"units\":[{\"wl\":8,\"fl\":4},{\"wl\":8,\"fl\":4}],\"events\":[],\"accum\":1}\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:4: step record: step 2 does not follow step 2 (line 3)",
             path);
    ck_assert_msg_has(msg);
    /* header: unit 1's MACs disagree with its layer */
    o.unit1_macs = 25;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:1: units[1] (\"fc\")", path);
    ck_assert_msg_has(msg);
    /* header without config.train.batch */
    o = syn_default();
    o.batch = 0;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has("config.train.batch");
    /* no step records */
    o = syn_default();
    o.last_step = 0;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has("no step records");
    /* missing file */
    tu_path(path, sizeof path, tmpdir, "none.jsonl");
    ck_assert_int_eq(try_analyze(path), ADAPT_ENOENT);
    ck_assert_msg_has(path);
}
END_TEST

/* ==================================================================== report */

START_TEST(test_report_formats)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "adapt.jsonl");
    struct syn_opts o = syn_default();
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    struct perf_run *rows[1] = {r};
    /* with per-unit tables; CSV then holds only the table of one row per run and unit */
    static const char *const want[4] = {"SU1", "run,unit,macs,", "\"su1\": 1.7334", "| SU1 |"};
    for (int fi = 0; fi < 4; fi++) {
        char *txt = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&txt, &len);
        ck_assert_int_eq(perf_report_write(f, (enum perf_format)fi, rows, 1, &p, 1), ADAPT_OK);
        fclose(f);
        ck_assert_msg(strstr(txt, want[fi]) != NULL, "format %d lacks %s:\n%s", fi, want[fi], txt);
        ck_assert_msg(strstr(txt, "c1") != NULL, "format %d lacks the unit table", fi);
        if (fi == PERF_FORMAT_CSV) {
            ck_assert_msg(!strncmp(txt, "run,unit,", 9) && !strstr(txt, "su1"),
                          "csv --per-unit is not one unit table:\n%s", txt);
            free(txt);
            f = open_memstream(&txt, &len);
            ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_CSV, rows, 1, &p, 0), ADAPT_OK);
            fclose(f);
            ck_assert_msg(strstr(txt, "su1,su2") && !strstr(txt, "run,unit,"),
                          "csv without per-unit:\n%s", txt);
        }
        if (fi == PERF_FORMAT_JSON) {
            json_error_t err;
            json_t *j = json_loads(txt, 0, &err);
            ck_assert_msg(j != NULL, "json: %s", err.text);
            json_t *r0 = json_array_get(json_object_get(j, "runs"), 0);
            /* 5768 / 3327.5, see test_synthetic_costs; the JSON carries 12 significant digits */
            double su1 = json_real_value(json_object_get(r0, "su1"));
            ck_assert_msg(fabs(su1 - SYN_C32 / SYN_CQ) < 1e-11, "su1 %.17g", su1);
            ck_assert(json_is_null(json_object_get(r0, "su2")));
            json_decref(j);
        }
        free(txt);
    }
    enum perf_format fmt;
    ck_assert_int_eq(perf_format_parse("markdown", &fmt), ADAPT_OK);
    ck_assert_int_eq(fmt, PERF_FORMAT_MARKDOWN);
    ck_assert_int_eq(perf_format_parse("html", &fmt), ADAPT_EINVAL);
    ck_assert_msg_has("html");
    perf_run_free(r);
}
END_TEST

/* The table cells of line (Markdown): its '|' not escaped by a backslash, less one. */
static int md_cells(const char *line, size_t n)
{
    int pipes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < i && line[i - 1 - k] == '\\') k++;
        if (line[i] == '|' && k % 2 == 0) pipes++;
    }
    return pipes - 1;
}

/* Names from a trace cannot break adapt-perf's Markdown or carry HTML: a run (its configuration
 * file's stem), model and unit named with '|', '<', '>', '&', '`', '\\' and a line break come out
 * escaped (cells keep their count; entities, backslashes, a space for the line break), in the
 * tables, the per-unit heading and the note on an incomplete run. */
START_TEST(test_report_markdown_escapes)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "md.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "cfg/a|b<script>&`x`\\\n.ini";
    o.model_name = "m|<b>";
    o.unit0_name = "c|1";
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    r->complete = 0;
    struct perf_run *rows[1] = {r};
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_MARKDOWN, rows, 1, &p, 1), ADAPT_OK);
    fclose(f);
    const char *name = "a\\|b&lt;script&gt;&amp;\\`x\\`\\\\  seed 7";
    char want[512];
    snprintf(want, sizeof want, "\n| %s | adapt | m\\|&lt;b&gt; | synthetic | corrected | 2 |",
             name);
    ck_assert_msg(strstr(txt, want), "no row \"%s\" in:\n%s", want, txt);
    snprintf(want, sizeof want, "\n#### %s: per unit\n", name);
    ck_assert_msg(strstr(txt, want), "no heading \"%s\" in:\n%s", want, txt);
    ck_assert_msg(strstr(txt, "\n| c\\|1 | 72 | 18 |"), "no unit row in:\n%s", txt);
    snprintf(want, sizeof want, "\n- %s: the trace has no end record", name);
    ck_assert_msg(strstr(txt, want), "no note \"%s\" in:\n%s", want, txt);
    ck_assert_msg(!strchr(txt, '<'), "HTML in:\n%s", txt);
    /* every table line has as many cells as its header line */
    int cells = -1, tables = 0;
    for (const char *l = txt; *l; l += strcspn(l, "\n") + 1) {
        size_t n = strcspn(l, "\n");
        int c = n && l[0] == '|' ? md_cells(l, n) : -1;
        if (c >= 0 && cells < 0) tables++; /* a table's first line */
        else if (c >= 0) ck_assert_msg(c == cells, "%d cells, not %d: %.*s", c, cells, (int)n, l);
        cells = c;
        if (!l[n]) break;
    }
    ck_assert_int_eq(tables, 2);
    free(txt);
    perf_run_free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("perf");
    TCase *tc = tcase_create("cost");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_synthetic_costs);
    tcase_add_test(tc, test_graph_precision_pricing);
    tcase_add_test(tc, test_su2);
    tcase_add_test(tc, test_log_every_and_tail);
    tcase_add_test(tc, test_policy_memory);
    tcase_add_test(tc, test_sparsity_weight_gradient);
    tcase_add_test(tc, test_su3_su2_reference);
    tcase_add_test(tc, test_report_names);
    tcase_add_test(tc, test_run_labels_cli);
    tcase_add_test(tc, test_run_labels);
    tcase_add_test(tc, test_schedule_muppet);
    tcase_add_test(tc, test_hw_calibrated);
    tcase_add_test(tc, test_bad_traces);
    tcase_add_test(tc, test_step_numbers_size_nothing);
    tcase_add_test(tc, test_counts_overflow);
    tcase_add_test(tc, test_report_formats);
    tcase_add_test(tc, test_report_markdown_escapes);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("models");
    tcase_add_test(tm, test_lenet5_table);
    tcase_add_test(tm, test_grouped_gemms);
    tcase_add_test(tm, test_table_matches_engine);
    tcase_set_timeout(tm, 20);
    suite_add_tcase(s, tm);
    return tu_run_suite(s, CK_FORK_GETENV);
}
