/* src/policy/policy.h: precision policies as descriptors (like GSL's
 * gsl_rng_type): a table of struct adapt_policy_type with
 * initialise / observe / decide / epoch_end / free, driven explicitly by the
 * trainer. The decision rules themselves are pure functions in
 * src/policy/policy_core.h; the mechanics of quantized training (copies,
 * rounding hooks) are in src/policy/precision.h.
 *
 * Per optimizer step the trainer calls, after backward and after the
 * gradients were scaled (1/accumulation) and rounded:
 *   skip = observe(p, step, loss, last_in_epoch)  statistics; 1 = skip update
 *   st = decide(p, step)                          precision switches
 * then updates the master weights (unless skipped) and refreshes the
 * quantized copies; at the end of an epoch
 *   st = epoch_end(p, epoch, &lr, &stop)          epoch-level switching, lr
 * decide and epoch_end fail only when an event for the trace cannot be
 * recorded (ADAPT_ENOMEM).
 *
 *   struct adapt_policy *pol;
 *   adapt_policy_alloc(&pol, cfg, net, seed);     // by cfg->policy.name
 *   ...
 *   adapt_policy_free(pol);
 *
 * Policies: fp32 (no quantization), fixed (one format or one per unit),
 * adapt (AdaPT), muppet (MuPPET levels or a replayed schedule), amp (fp16 or
 * bf16 units with dynamic loss scaling). fixed and amp round by the unit rules
 * of src/policy/precision.h or, with quantization.precision_propagation =
 * graph, by the per-layer result of src/policy/graphamp.h (units it leaves in
 * float32 are inactive).
 *
 * Ownership: a policy borrows the configuration and the network it is
 * allocated with (cfg and net must outlive it; adapt_policy_free frees
 * neither); it owns its precision state, events and per-unit arrays.
 */
#ifndef ADAPT_POLICY_H
#define ADAPT_POLICY_H

#include <jansson.h>

#include "src/config/config.h"
#include "src/net/net.h"
#include "src/net/optim.h"
#include "src/policy/graphamp.h"
#include "src/policy/policy_core.h"
#include "src/policy/precision.h"
#include "src/base/safetensors.h"
#include "src/trace/trace.h"

struct adapt_policy;

struct adapt_policy_type {
    const char *name;
    enum adapt_status (*init)(struct adapt_policy *p);
    int (*observe)(struct adapt_policy *p, long step, double loss, int last_in_epoch);
    enum adapt_status (*decide)(struct adapt_policy *p, long step);
    /* *stop = 1: the policy ends training */
    enum adapt_status (*epoch_end)(struct adapt_policy *p, int epoch, double *lr, int *stop);
    /* checkpoint: scalars as JSON, tensors by name; load reverses save */
    json_t *(*save_json)(const struct adapt_policy *p);
    int (*save_tensors)(const struct adapt_policy *p, struct adapt_safetensors_tensor *t, int cap,
                        char (*names)[96]);
    enum adapt_status (*load)(struct adapt_policy *p, json_t *state,
                              const struct adapt_safetensors *f);
    void (*destroy)(struct adapt_policy *p);
    /* run.device = cuda (adapt_policy_use_cuda): to_device = 1 puts the policy's own state on
     * the engine p->dev (observe and decide then work there), 0 brings it back to the host (a
     * checkpoint). NULL: the policy does not run on the GPU engine. */
    enum adapt_status (*cuda)(struct adapt_policy *p, int to_device);
    /* 1: observe reads the step's loss, so a GPU step must wait for it before the policy's
     * step (adapt-bench train waits only then; 0 when left out of an initializer) */
    int reads_loss;
};

struct adapt_policy {
    const struct adapt_policy_type *type;
    const struct adapt_config *cfg; /* borrowed */
    struct adapt_net *net;          /* borrowed */
    struct adapt_precision *prec; /* NULL for fp32 */
    struct adapt_gamp *gamp;      /* precision_propagation = graph (amp, fixed): each layer's
                                     set and precision; NULL otherwise */
    uint64_t seed;
    void *state;                  /* the policy's own */
    /* what the last step did, for the trace */
    int n_events, cap_events;
    struct adapt_trace_event *events;
    enum adapt_trace_strategy strategy;
    double *lb;                   /* (nunits) or NULL */
    int *r;                       /* (nunits) or NULL */
    double loss_scale;            /* multiply d(loss)/d(logits) by this (AMP; 1 otherwise) */
    int overflow;                 /* the last step was skipped (AMP) */
    int epoch;                    /* the epoch being trained (set by the trainer) */
    double micro_loss;            /* the last micro-batch's loss (with the L1 term) divided by
                                     the accumulation steps (set by the trainer) */
    int l1_quantized;             /* the optimizer's L1 term reads the quantized copies */
    int l1_after_rounding;        /* observe adds the L1 term after its gradient rounding
                                     (adapt_policy_amp_observe); the step does otherwise */
    struct adapt_sgd *opt;        /* the optimizer, during adapt_policy_step; NULL otherwise */
    int l2_quantized;             /* and its L2 term */
    struct adapt_cuda_net *dev;   /* run.device = cuda: the engine the steps run on, or NULL */
    enum adapt_status dev_st;     /* the first failure of the policy's device work */
};

const struct adapt_policy_type *adapt_policy_find(const char *name);

/* MuPPET: the mean gradient diversity S of its last check (NAN before the
 * first one or for other policies). */
double adapt_muppet_last_gd(const struct adapt_policy *p);

/* A policy by cfg->policy.name for net. cfg and net are borrowed: they must
 * outlive the policy, which keeps pointers to both. */
enum adapt_status adapt_policy_alloc(struct adapt_policy **out, const struct adapt_config *cfg,
                                     struct adapt_net *net, uint64_t seed);
/* Frees the policy and what it owns (not cfg or net); NULL is a no-op. */
void adapt_policy_free(struct adapt_policy *p);

/* Applies quantization.sr_bits (random bits per stochastic rounding), quantization.ste (the
 * backward rule through saturated outputs) and quantization.round_logits to the policy's
 * precision state; `auto` means
 * saturating and float32 logits for AdaPT in corrected mode, plain and
 * rounded logits otherwise. */
void adapt_policy_apply_output_rules(struct adapt_policy *p, int adapt_corrected);
/* p->prec from the configuration's [quantization] section (quant_inputs,
 * quant_outputs with round_layers, rounding), then the output rules above. */
enum adapt_status adapt_policy_alloc_precision(struct adapt_policy *p, int adapt_corrected);
/* Layer (network node) i's precision under graph propagation, written into buf: "float32"
 * or the format it rounds to ("fp16", "fixed(16,8)"); NULL with unit propagation. */
const char *adapt_policy_layer_precision(const struct adapt_policy *p, int node, char *buf,
                                         size_t size);
/* With graph propagation, one line per layer (name, kind, set, where the set came from,
 * precision) and a summary to f; nothing otherwise. */
void adapt_policy_print_layers(const struct adapt_policy *p, FILE *f);
/* The trace's view of unit u after the last step; takes (resets) its output
 * saturation count. */
void adapt_policy_unit_state(const struct adapt_policy *p, int u,
                             struct adapt_trace_unit_state *s);
/* Appends an event for the trace (kept until adapt_policy_clear_events).
 * ADAPT_ENOMEM when it cannot be stored. */
enum adapt_status adapt_policy_add_event(struct adapt_policy *p, const struct adapt_trace_event *e);
void adapt_policy_clear_events(struct adapt_policy *p);

/* AMP's observe, for the policies that use it (amp, comp): rounds the unit gradients to their
 * formats (what a half-precision backward stores), then adds the scaled L1 term in float32
 * (p->opt's, during adapt_policy_step: it is not part of that backward, so it cannot overflow
 * the format), skips the step on inf/NaN (returns 1) and updates the dynamic loss scale, else
 * unscales the gradients. */
int adapt_policy_amp_observe(struct adapt_policy *p, struct adapt_amp_scaler *scaler, long step);

/* One optimizer step after `micro` accumulated micro-batches (doc/numerics.md,
 * 2, steps 2-6): gradient scale 1/micro and the L1 term, the policy's
 * rounding, normalisation and statistics (observe), its precision switch
 * (decide), the FP32 master update (unless the policy skips the step), and
 * fresh quantized copies. *skipped (when not NULL) is set to 1 when the
 * update was skipped. Fails only as decide does. */
enum adapt_status adapt_policy_step(struct adapt_policy *p, struct adapt_sgd *opt, long step,
                                    double loss, int micro, int last_in_epoch, int *skipped);

/* run.device = cuda: from now on the steps run on the GPU engine d (src/net/net_cuda.h, made
 * for p->net): the precision state's copies and hooks and the policy's own state move there,
 * and the weight copies of `step` are made there. d = NULL detaches. ADAPT_EUNSUPPORTED for a
 * policy that does not run on the GPU (its message names it). adapt_policy_step then runs the
 * whole step on the device: the gradient scale and the L1 term, observe, decide, the update
 * (opt's hyper-parameters and step count; its buffers stay on the device) and the copies. */
enum adapt_status adapt_policy_use_cuda(struct adapt_policy *p, struct adapt_cuda_net *d,
                                        long step);
/* Whether the configured policy runs on the GPU engine: ADAPT_EUNSUPPORTED, with a message that
 * names the setting, for one that does not (CoMP: its type has no cuda function).
 * adapt_policy_use_cuda checks it; a trainer can check it before reading any data. */
enum adapt_status adapt_policy_cuda_check(const struct adapt_config *cfg);
/* The policy's device state back to the host (before a checkpoint); nothing without an
 * engine. */
enum adapt_status adapt_policy_pull_cuda(struct adapt_policy *p);

#endif
