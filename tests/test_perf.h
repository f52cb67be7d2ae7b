/* tests/test_perf.h: what the source files of tests/test_perf share: the test's temporary
 * directory, message and closeness assertions, the synthetic trace (a hand-sized model whose
 * costs tests/test_perf.c works out by hand) and the functions by which each file adds its tests
 * to the program's test cases (created in tests/test_perf.c). */
#ifndef ADAPT_TESTS_TEST_PERF_H
#define ADAPT_TESTS_TEST_PERF_H

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "src/base/status.h"
#include "src/perfmodel/perf.h"
#include "src/trace/trace.h"

/* the running test's temporary directory (made and removed by the "cost" test case's fixture) */
extern char tmpdir[64];

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* Relative closeness for hand-computed values that go through a few double
 * operations: 1e-12 is thousands of ulps, far below any formula mistake. */
#define ck_assert_close(a, b)                                                                      \
    ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(b)), "%s = %.17g, expected %.17g", #a, \
                  (double)(a), (double)(b))

/* ---- the synthetic trace (tests/test_perf.c) ---- */

extern const struct adapt_trace_layer syn_layers[4];

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
    const int *role_bits;    /* header roles' operand bits (NULL: no roles) */
};

/* the header of the synthetic run (batch: config train.batch, 0 leaves the key out), its units
 * in units[2] and its config in *cfg (the caller's to json_decref) */
void syn_header(struct adapt_trace_header *h, json_t **cfg, int batch, int unit1_macs,
                struct adapt_trace_unit *units);
/* writes the synthetic trace as o says to path */
void syn_write(const char *path, const struct syn_opts *o);
/* the options of the default run: every step logged, both epochs, batch 4 */
struct syn_opts syn_default(void);
/* loads and analyzes the trace at path (Check failures otherwise) */
struct perf_run *analyze_file(const char *path, const struct perf_params *p,
                              const struct perf_hw *hw);

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

void test_perf_add_models(TCase *cost, TCase *models); /* test_perf_models.c */
void test_perf_add_errors(TCase *cost);                /* test_perf_errors.c */
void test_perf_add_report(TCase *cost);                /* test_perf_report.c */

#endif
