/* tests/test_perf.c: src/perfmodel/ (model table, analytical and calibrated costs, schedules,
 * reports, refusal of bad traces and tables).
 *
 * This file: the synthetic trace and the costs of its run worked out by hand (tests/test_perf.h),
 * and main. The model table, schedules and the hardware table are in test_perf_models.c,
 * refused and extreme traces in test_perf_errors.c, the reports and run labels in
 * test_perf_report.c. */
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
#include "tests/test_perf.h"
#include "tests/testutil.h"

char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "perf"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

/* ============================================================ synthetic trace
 *
 * A hand-sized model: conv c1 (1x4x4 -> 2x2x2, k3: 18 weights + 2 biases,
 * 2*2*2*1*3*3 = 72 MACs, unit 0, reads the input so 2 GEMM passes), tanh t1
 * (8 element operations), flatten, linear fc (8 -> 3: 24 weights + 3 biases,
 * 24 MACs, unit 1, 3 passes). 47 parameters. Training set of 10 samples in
 * batches of 4: 3 optimizer steps per epoch training 4, 4, 2 samples. */
const struct adapt_trace_layer syn_layers[4] = {
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

/* tests/test_perf.h */
void syn_header(struct adapt_trace_header *h, json_t **cfg, int batch, int unit1_macs,
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

void syn_write(const char *path, const struct syn_opts *o);

/* Tensor roles (the header's "roles": weight 8 bits, input 4, grad_output float32, the rest the
 * units' own): each GEMM at its wider operand, f = max(x, w) nz + max(g, x) for c1 (no
 * backward-data), + max(g, w) nz for fc, times F / 32 (src/perfmodel/price.c):
 *   c1: 72/32 (8 nz0 + 32);  fc: 24/32 (8 nz1 + 32 + 32 nz1) = 24/32 (40 nz1 + 32)
 *   step 1 (nz .75 | .5):     85.5  + 39   = 124.5
 *   steps 2,3 (.625 | .5):    83.25 + 39   = 122.25
 *   step 4 (.625 | .75):      83.25 + 46.5 = 129.75
 *   steps 5,6 (.875 | .75):   87.75 + 46.5 = 134.25
 *   samples 4, 6, 4, 6: 498 + 733.5 + 519 + 805.5 = 2556; the element-wise layers keep the
 * units' WL (76), and the reader gives back the bits written. */
START_TEST(test_role_pricing)
{
    char path[300];
    snprintf(path, sizeof path, "%s/roles.jsonl", tmpdir);
    static const int bits[ADAPT_TRACE_ROLES] = {8, -1, 4, -1, -1, -1, 32, -1, -1};
    struct syn_opts o = syn_default();
    o.role_bits = bits;
    syn_write(path, &o);
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->header.has_roles, 1);
    ck_assert_mem_eq(t->header.role_bits, bits, sizeof bits);
    adapt_trace_free(t);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_close(r->cq_compute, 2556.0);
    ck_assert_close(r->cq_ew, 76.0);
    /* memory (src/perfmodel/price.c role_memory_bits), P = 47 parameters of which 42 are the
     * units' weights (18 + 24), batch 4, input 16 and stored activations 8 + 8 + 3 per sample:
     * momentum and masters 64 x 47 = 3008; the 5 other gradients 32 x 5 = 160; the weight
     * gradients at the units' WL, peak at step 1 (8 | 16): 18 x 8 + 24 x 16 = 528; the 8-bit
     * weight copies 42 x 8 = 336; activations at the input role's 4 bits: 4 x 35 x 4 = 560;
     * AdaPT's state 1344 (test_policy_memory); 5936 in all against float32's
     * 96 x 47 + 32 x 35 x 4 = 8992 */
    ck_assert_msg(fabs(r->mem_rel - 5936.0 / 8992.0) < 1e-12, "mem_rel %.17g", r->mem_rel);
    /* model size at the weight role's 8 bits, the final step's non-zero fractions .875 | .75:
     * (8 x 18 x .875 + 8 x 24 x .75) / (32 x 42) = 270 / 1344 */
    ck_assert_msg(fabs(r->model_size - 270.0 / 1344.0) < 1e-12, "model_size %.17g",
                  r->model_size);
    perf_run_free(r);
    /* a bf16 master (16 bits) with the same 8-bit copies: 5936 - 16 x 42 = 5264 */
    static const int bits16[ADAPT_TRACE_ROLES] = {8, -1, 4, -1, -1, -1, 32, -1, 16};
    o.role_bits = bits16;
    syn_write(path, &o);
    r = analyze_file(path, &p, NULL);
    ck_assert_msg(fabs(r->mem_rel - 5264.0 / 8992.0) < 1e-12, "mem_rel %.17g", r->mem_rel);
    perf_run_free(r);
}
END_TEST

void syn_write(const char *path, const struct syn_opts *o)
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
    if (o->role_bits) {
        h.has_roles = 1;
        memcpy(h.role_bits, o->role_bits, sizeof h.role_bits);
    }
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    json_decref(cfg);
    for (int s = 1; s <= 6; s++) {
        if (s % o->log_every == 0 && s <= o->last_step) {
            struct adapt_trace_unit_state us[2];
            memset(us, 0, sizeof us); /* no scale statistics */
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

struct syn_opts syn_default(void)
{
    struct syn_opts o = {0, 1, 6, {0.8125, 0.83}, 4, 24, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                         NULL};
    return o;
}

struct perf_run *analyze_file(const char *path, const struct perf_params *p,
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

/* SYN_C32 and SYN_CQ, the costs of the synthetic run, are worked out in tests/test_perf.h. */
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

/* SU2 with the reference analysis' index arithmetic, by hand. perf_su2_index over the
 * accuracies {0.50, 0.70, 0.72, 0.71} (n = 4), SU1 paper 1.5: target 0.70 is first met at
 * index i = 1, fraction 1/4, SU2 = 1.5 / 0.25 = 6; target 0.72 at i = 2: 1.5 * 4/2 = 3;
 * target 0.8 is never met: the fraction stays 1, SU2 = 1.5; target 0.5 is met at i = 0: the
 * reference divides by zero, NaN. The conservative perf_su2_reference for target 0.70 is
 * 1.5 * 4 / (1 + 1) = 3. Through the synthetic trace (epoch accuracies 0.8125, 0.83, so
 * n = 2): target 0.82 is met at i = 1, SU2 ref i/n = SU1 paper * 2 / 1, where the
 * conservative SU2 ref = SU1 paper * 2 / 2; target 0.81 at i = 0: NaN (SU2 ref = 2 SU1 paper);
 * target 0.9: SU2 ref i/n = SU1 paper (SU2 ref NaN). */
START_TEST(test_su2_index)
{
    static const double acc[4] = {0.50, 0.70, 0.72, 0.71};
    ck_assert_close(perf_su2_index(1.5, acc, 4, 0.70), 6.0);
    ck_assert_close(perf_su2_index(1.5, acc, 4, 0.72), 3.0);
    ck_assert_close(perf_su2_index(1.5, acc, 4, 0.8), 1.5);
    ck_assert(isnan(perf_su2_index(1.5, acc, 4, 0.5)));
    ck_assert(isnan(perf_su2_index(1.5, acc, 0, 0.7)));
    ck_assert_close(perf_su2_reference(1.5, 1, 4), 3.0);
    char path[128];
    tu_path(path, sizeof path, tmpdir, "su2idx.jsonl");
    struct syn_opts o = syn_default();
    syn_write(path, &o);
    static const double target[3] = {0.82, 0.81, 0.9};
    for (int k = 0; k < 3; k++) {
        struct perf_params p;
        perf_params_init(&p);
        p.target_acc = target[k];
        struct perf_run *r = analyze_file(path, &p, NULL);
        const double sp = 2.0 * SYN_C32 / (SYN_CQ + SYN_C32);
        ck_assert_close(r->su1_paper, sp);
        if (k == 0) {
            ck_assert_close(r->su2_ref_index, 2.0 * sp);
            ck_assert_close(r->su2_ref, sp);
        } else if (k == 1) {
            ck_assert(isnan(r->su2_ref_index));
            ck_assert_close(r->su2_ref, 2.0 * sp);
        } else {
            ck_assert_close(r->su2_ref_index, sp);
            ck_assert(isnan(r->su2_ref));
        }
        perf_run_free(r);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("perf");
    TCase *tc = tcase_create("cost");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_synthetic_costs);
    tcase_add_test(tc, test_graph_precision_pricing);
    tcase_add_test(tc, test_role_pricing);
    tcase_add_test(tc, test_su2);
    tcase_add_test(tc, test_log_every_and_tail);
    tcase_add_test(tc, test_policy_memory);
    tcase_add_test(tc, test_sparsity_weight_gradient);
    tcase_add_test(tc, test_su3_su2_reference);
    tcase_add_test(tc, test_su2_index);
    TCase *tm = tcase_create("models");
    test_perf_add_models(tc, tm);
    test_perf_add_errors(tc);
    test_perf_add_report(tc);
    suite_add_tcase(s, tc);
    tcase_set_timeout(tm, 20);
    suite_add_tcase(s, tm);
    return tu_run_suite(s, CK_FORK_GETENV);
}
