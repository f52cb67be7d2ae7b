/* src/policy/precision.h: quantized training mechanics of a network (doc/numerics.md):
 * one number format per precision unit (conv or linear layer), the
 * quantized weight copies the layers compute with (FP32 master weights stay
 * in the parameters), rounding of unit inputs and of layer outputs (batch-norm,
 * pooling, activations and residual adds take the format of the unit they
 * follow, or, with a per-node plan, the unit the plan names), straight-through
 * backward, and gradient rounding. Policies decide the formats; this module
 * applies them.
 *
 * Random bits for stochastic rounding are keyed by (seed, stream, element):
 * stream = ADAPT_STREAM_QUANT | what << 8 | tensor << 16 | counter << 32 (what: precision.c's
 * enum what; 12 + c for copy c, enum adapt_mx_copy, of roles.mx_axis = gemm, tensor the unit),
 * with counter the micro-batch (activations) or optimizer step (weights,
 * gradients), so results do not depend on threads and a resumed run
 * continues with the same bits. Evaluation (training == 0) rounds
 * activations to nearest.
 *
 *   struct adapt_precision *p;
 *   adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_STOCHASTIC, seed);
 *   adapt_precision_set(p, u, &spec);          // per unit, from the policy
 *   adapt_precision_refresh_weights(p, step);  // after every update
 *   p->iter = micro_batch_index;               // before every forward
 *   ... forward / backward ...
 *   adapt_precision_quantize_grads(p, step);
 *   adapt_precision_free(p);
 *
 * Backward through a rounded output is straight-through (ADAPT_STE_PLAIN):
 * the gradient passes unchanged, also where the forward saturated at the
 * format's bounds. ADAPT_STE_SATURATING drops the gradient components of
 * saturated outputs that point further out of range (descent would move the
 * value where the forward cannot follow); those that point back in pass.
 * doc/numerics.md ("Saturation and the straight-through estimator") says why.
 *
 * Ownership: installs itself as the network's hooks; the network must
 * outlive it; free restores float32 computation.
 */
#ifndef ADAPT_PRECISION_H
#define ADAPT_PRECISION_H

#include <stdint.h>

#include "src/config/config.h"
#include "src/quant/quant.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"

enum adapt_qout {
    ADAPT_QOUT_NONE = 0, /* outputs stay float */
    ADAPT_QOUT_ALL,      /* every layer output, in the format of the unit it follows */
    ADAPT_QOUT_UNITS_POOLS, /* conv, linear and pooling outputs only (MuPPET) */
    ADAPT_QOUT_UNITS       /* conv and linear outputs only (AMP) */
};

enum adapt_ste {
    ADAPT_STE_PLAIN = 0,  /* gradient passes every rounding unchanged */
    ADAPT_STE_SATURATING  /* ... except outward at a saturated output */
};

struct adapt_unit_prec {
    int node;                /* network node of the unit */
    struct adapt_layer *layer;
    struct quant_spec spec;  /* current format (weights, activations, gradients) */
    int active;              /* 0: the unit computes in float32 */
    float *wq;               /* (weight numel) quantized weight copy */
    float *bq;               /* (bias numel) quantized bias copy, NULL without bias */
    float *qin; /* (n_max, input numel) rounded input; NULL unless inputs are rounded */
    int param[2];               /* net->param index of the weight and the bias (-1: none) */
    float *d_wq, *d_bq, *d_qin; /* the same on the GPU engine (adapt_precision_use_cuda) */
    int qin_first_only;      /* MuPPET: only the network input image is rounded */
    /* last weight rounding */
    double sparsity;         /* fraction of exact zeros in wq */
    uint64_t sat, flush;     /* saturated / flushed weights */
    /* rounded outputs of training forwards since the last adapt_precision_take_act_sat */
    uint64_t out_sat, out_n; /* saturated / all */
    /* adapt_precision_set_roles: each role's format as last resolved (the weight and gradient
     * roundings read them until a device list is flushed) and a host input copy for an input
     * role of a unit whose input is not rounded otherwise */
    struct quant_spec rspec[ADAPT_ROLE_N];
    float *role_qin;
};

/* The scale state of one tensor of a scaled role (adapt_precision_set_roles): the scale the
 * next rounding uses, the amax history (delayed scaling) and what the roundings did. */
struct adapt_role_state {
    float scale;       /* the next rounding's (delayed: 1 until an amax > 0 was seen) */
    float last_scale;  /* the last rounding's */
    float amax;        /* of the last tensor rounded */
    float *hist;       /* (amax_history) delayed: the amax values, most recent at hist_pos */
    int hist_n, hist_pos;
    uint64_t n, sat, flush; /* values rounded, saturated, flushed to zero */
    uint64_t sat_taken, flush_taken; /* of them, reported already (adapt_precision_take_scale) */
};

struct adapt_precision {
    struct adapt_net *net;
    int nunits;
    struct adapt_unit_prec *u; /* (nunits) */
    int *node_unit;            /* (nnodes) unit whose format a node's output takes, -1 none
                                * (the rules: the unit it follows; or a per-node plan) */
    unsigned char *round_out;  /* (nnodes) 1: round the node's output; 2: its values are its
                                  input's, already rounded in the same format: rounded again
                                  only if the format does not keep subsets (MX, plugins) */
    unsigned char *round_in;   /* (nnodes) 1: round the node's input (units) */
    enum quant_rounding rounding;
    int sr_bits;               /* random bits per stochastic rounding, 32 (default) or 16 */
    uint64_t seed;
    long iter;                 /* micro-batch counter keying activation rounding */
    enum adapt_ste ste;        /* backward through saturated outputs (default plain) */
    /* adapt_precision_act_from: the format unit u's input and output activations take when no
     * role sets them: unit act_unit[u]'s current one, or act_fixed for -1. NULL: each its own. */
    int *act_unit;             /* (nunits) or NULL */
    struct quant_spec act_fixed;
    /* adapt_precision_node_from: a node outside the units (a pooling or batch-norm layer) that
     * rounds its input activation in place and its output in unit node_from[i]'s current
     * format; -1: not this way. NULL: none. */
    int *node_from; /* (nnodes) or NULL */
    /* Trainable parameters outside the units (batch-norm gamma and beta)
     * take the format of the last unit before them in parameter order. */
    int *param_unit;           /* (nparam) that unit for each parameter; -1: none or buffer */
    int round_attached;        /* 1: their values and gradients are rounded too */
    /* MuPPET (ADAPT_QOUT_UNITS_POOLS): the input image is rounded with one
     * scale per image, and the activation gradients conv, linear and pooling
     * layers pass back to their inputs are rounded to the format of their
     * unit (stochastic, one scale per batch tensor). */
    int per_image_input;
    /* adapt_precision_half_backward: a half-precision backward's stored gradients */
    int half_backward;
    float **acopy;             /* (nparam) rounded copies of those parameters, or NULL */
    /* run.device = cuda: the GPU engine the step runs on (adapt_precision_use_cuda), the
     * device copies of acopy, and the first failure of a device rounding */
    struct adapt_cuda_net *dev;
    uint64_t dev_arrays; /* adapt_cuda_net_id of the engine d_wq, d_bq, d_qin, d_acopy are on */
    float **d_acopy;
    uint64_t *dev_counts; /* (3 * 2 * nunits) the engine's rounding counts, read at each sync */
    int counts_pending;   /* the engine holds counts not yet taken (adapt_precision_sync) */
    enum adapt_status dev_st;
    struct adapt_arena arena;
    /* adapt_precision_set_roles */
    struct adapt_role_fmt *roles; /* (nunits * ADAPT_ROLE_N): unit u's role r at
                                     [u * ADAPT_ROLE_N + r]; NULL: every role auto */
    int amax_history, amax_most_recent, margin, scale_pow2;
    int replay; /* adapt_precision_refresh_again: scaled roundings repeat their last scale */
    int eval_round; /* an evaluation forward's rounding: scales, histories and counts untouched */
    struct adapt_role_state *rstate; /* (ADAPT_ROLE_N * nnodes): [role * nnodes + id], id the
                                        unit (weights, bias, their gradients, master) or the
                                        node (activations, error gradients) */
    struct adapt_mx_gemm *mxg;       /* (nunits) roles.mx_axis = gemm or channels
                                  (src/policy/mx_gemm.c): each unit's MX operands rounded per
                                  GEMM; NULL: along rows */
    int mx_channels;           /* roles.mx_axis = channels: as microxcaling's MX convolution */
    struct adapt_arith *arith; /* (nunits) arithmetic.accumulator (src/policy/arith.c): each
                                  unit's accumulator model and operand grids; NULL: float32 */
};

/* Options of scaled roles (the [roles] keys). */
struct adapt_roles_opts {
    int amax_history;  /* delayed: amax values remembered */
    int most_recent;   /* delayed: the scale from the most recent amax instead of the max */
    int margin;        /* scale = (largest finite / amax) / 2^margin */
    int pow2;          /* the scale rounded down to a power of two */
};

enum adapt_status adapt_precision_alloc(struct adapt_precision **out, struct adapt_net *net,
                                        int round_inputs, enum adapt_qout qout,
                                        enum quant_rounding rounding, uint64_t seed);
/* The same state with a per-node plan instead of the rules above (graph propagation,
 * src/policy/graphamp.h): node_unit[i] is the unit whose format node i's output takes (-1:
 * none, nothing rounded), round_out[i] rounds node i's output in it, round_in[i] rounds a
 * unit's input in its own format (units only: node_unit[i] must be the node's own unit).
 * As with the rules, a relu, max-pool or flatten whose input was rounded in the same format
 * is not rounded again. The arrays (nnodes each) are copied. */
enum adapt_status adapt_precision_alloc_nodes(struct adapt_precision **out, struct adapt_net *net,
                                              const int *node_unit, const unsigned char *round_in,
                                              const unsigned char *round_out,
                                              enum quant_rounding rounding, uint64_t seed);
void adapt_precision_free(struct adapt_precision *p);

/* A format, rounding and scaling per tensor role (every unit alike; doc/numerics.md, "Tensor
 * roles and scaling"); roles left ADAPT_ROLE_AUTO round what they round without roles. Call
 * once, after alloc and before the first step (and before a GPU engine is attached, which
 * then rounds the roles on its device arrays). Each scaled rounding computes
 * y = Q(x s) * (1/s) in float32 with s from the tensor's amax (current) or from the amax
 * history of the role's earlier tensors (delayed: s = 1 until one had an amax > 0). */
enum adapt_status adapt_precision_set_roles(struct adapt_precision *p,
                                            const struct adapt_role_fmt roles[ADAPT_ROLE_N],
                                            const struct adapt_roles_opts *o);
/* roles.mx_axis = gemm (channels 0) or channels (1): the MX roles (weight, input, grad_output)
 * of conv2d and linear units rounded by their layers once per GEMM, blocks along its reduction
 * dimension, or for channels as microxcaling's MX convolution: the unlowered input and the
 * weight copy along the input channels (src/policy/mx_gemm.c). Call after the roles are set;
 * fails, naming `origin` (the key's file and line), where such a role is on a unit that cannot
 * (a grouped or dilated conv). */
enum adapt_status adapt_precision_set_mx_gemm(struct adapt_precision *p, const char *origin,
                                              int channels);
/* roles.mx_axis = channels: a convolution's weight copy (rows x cols = Cout x Cin k k) rounded
 * with s in blocks along the input channels at each (output channel, ky, kx); random-bit index
 * (o k k + t) Cin + c for element (o, c, t) of the copy, t = ky k + kx. Stats as quant_rows'. */
enum adapt_status adapt_mx_channels_weight(const struct quant_spec *s, const float *w, float *wq,
                                           int cout, int cin, int kk, struct quant_key key,
                                           struct quant_stats *st);
/* arithmetic.accumulator: unit u's GEMMs sum as acc[u] says (struct adapt_arith in
 * src/net/layer.h; src/policy/arith.c). Host engine only. A unit whose layer has no explicit
 * GEMMs (a grouped or dilated convolution) keeps float32, and *skipped counts them (may be
 * NULL). Call once, after the roles. */
enum adapt_status adapt_precision_set_arith(struct adapt_precision *p, const struct quant_acc *acc,
                                            int *skipped);
/* Unit u's accumulator model and, where the GEMM runs under it (1) or in float32 (0), for the
 * forward, input-gradient and weight-gradient GEMMs as the operand formats of its current
 * roles decide (the dry run's table; -1: the layer has no such GEMM). NULL when unit u sums in
 * float32. */
const struct quant_acc *adapt_precision_arith(const struct adapt_precision *p, int u,
                                              int gemm_on[3]);
/* Unit u's scale statistics of the GEMM operand roles for a step record: weight, input and
 * grad_output in trace order (scale 0 where the role is not scaled); the saturated and flushed
 * counts since the last call. */
void adapt_precision_take_scales(struct adapt_precision *p, int u,
                                 struct adapt_trace_role_scale out[ADAPT_TRACE_SCALED_ROLES]);
/* The weight copies of the last refresh made again (a resumed run, after its checkpoint's
 * state was restored): as adapt_precision_refresh_weights, but scaled roles round with the
 * scale they last used and leave their histories and counts alone. */
enum adapt_status adapt_precision_refresh_again(struct adapt_precision *p, long step);
/* The scale states of the scaled roles for a checkpoint: {"history": H, "tensors": [[role, id,
 * scale, hist_pos, hist_n, [H amax values] or [], last scale, saturated and
 * flushed values not reported yet], ...]} (NULL when no role is scaled, or
 * without memory), and their restoring from it; load fails naming `path` on a record that does
 * not fit this state (another history length, a role or tensor out of range). */
json_t *adapt_precision_scales_json(const struct adapt_precision *p);
enum adapt_status adapt_precision_scales_load(struct adapt_precision *p, const json_t *j,
                                              const char *path);
/* Unit u's role r from now on (roles.units: an override by name); after set_roles. */
enum adapt_status adapt_precision_set_unit_role(struct adapt_precision *p, int u,
                                                enum adapt_role r, const struct adapt_role_fmt *f);
/* Unit u's role r (auto without roles). */
const struct adapt_role_fmt *adapt_precision_role(const struct adapt_precision *p, int u,
                                                  enum adapt_role r);
/* The state of role r's tensor id (unit or node, as rstate), NULL when no role is scaled. */
const struct adapt_role_state *adapt_precision_role_state(const struct adapt_precision *p,
                                                          enum adapt_role r, int id);

/* Random bits per stochastic rounding (struct quant_spec's sr_bits: 32, the default, or 16) of
 * every rounding the module makes from now on: the units' formats, the activations' and the
 * roles' take it. */
void adapt_precision_set_sr_bits(struct adapt_precision *p, int bits);

/* Unit u computes in `spec` from now on (the weight copy follows at the next
 * refresh). The rounding mode of spec (and its random bits) are replaced by the module's. */
void adapt_precision_set(struct adapt_precision *p, int u, const struct quant_spec *spec);
/* Unit u computes in float32. */
void adapt_precision_set_float(struct adapt_precision *p, int u);
/* Unit u's input and output activations (where no role sets them) in unit `from`'s current
 * format rather than its own, or, for from = -1, in `fixed` (its rounding replaced by the
 * module's) for good; u's weights keep its own. Whether they are rounded at all is unchanged
 * (quantization.quant_inputs, quant_outputs, round_logits). */
enum adapt_status adapt_precision_act_from(struct adapt_precision *p, int u, int from,
                                           const struct quant_spec *fixed);

/* From now on node `node` (not a unit's own node) rounds its input activation in place (the
 * array its producer wrote, so the producer's backward reads the rounded values too) and its
 * output, both in unit `from`'s current format (its weight format at each forward);
 * stochastically in training (with the precision's rounding), to nearest in evaluation. This
 * replaces the node's output rounding of ADAPT_QOUT_ALL. The published AdaPT models' pooling
 * and batch-norm modules (reference.pool_rounding, bn_rounding; doc/algorithms.md). CPU
 * engine only. */
enum adapt_status adapt_precision_node_from(struct adapt_precision *p, int node, int from);

/* Fraction of unit u's rounded outputs (and, with ADAPT_QOUT_ALL, of the
 * layers rounded in its format) that saturated in the training forwards since
 * the last call, or NaN when none were rounded; resets the count. */
double adapt_precision_take_act_sat(struct adapt_precision *p, int u);

/* From now on the backward of every active unit is the one a unit computing in its format
 * (fp16, bf16: AMP) performs: the gradient of the unit's output is rounded to nearest in the
 * unit's format before the unit's backward reads it, and the gradient it writes for its input
 * after (where that activation feeds two nodes, the sum so far, as with MuPPET). The products
 * of the unit's backward then have operands in its format, as on tensor cores. Call before
 * adapt_precision_use_cuda; not with ADAPT_QOUT_UNITS_POOLS (MuPPET's own gradient rounding). */
void adapt_precision_half_backward(struct adapt_precision *p);
/* The network's output (the logits the loss reads) stays float32 from now on. */
void adapt_precision_keep_logits_float(struct adapt_precision *p);
/* From now on the batch-norm parameters after a unit (param_unit) are
 * rounded to that unit's format: copies at every refresh, gradients with
 * the units' gradients. */
enum adapt_status adapt_precision_round_attached(struct adapt_precision *p);

/* wq = Q(w) (and the bias) for every active unit, keyed by `step`; points
 * the parameters' use at the copies (or at the master for float units) and
 * records sparsity and saturation. Fails only on a GPU engine (a kernel that did not run). */
enum adapt_status adapt_precision_refresh_weights(struct adapt_precision *p, long step);
/* Rounds the gradients of every active unit's weight and bias in place
 * (the module's rounding mode), keyed by `step`. Fails as refresh_weights. */
enum adapt_status adapt_precision_quantize_grads(struct adapt_precision *p, long step);

/* run.device = cuda: from now on the copies, the roundings and the hooks live on the GPU
 * engine d (src/net/net_cuda.h), with the same random bits as on the host: device copies
 * are allocated there (the engine owns them; it must outlive this state, or detach it with
 * d = NULL) and the engine's hooks installed. The rounding counts of the unit states
 * (sparsity, saturation) stay on the engine until they are read: adapt_precision_sync takes
 * them (adapt_policy_unit_state, take_act_sat, a change of format and detaching call it), so
 * a step that nobody reports does not wait for them. */
enum adapt_status adapt_precision_use_cuda(struct adapt_precision *p, struct adapt_cuda_net *d);
/* When the engine holds counts not yet taken: waits for it and adds them to the unit states
 * (sparsity and saturation of the last weight rounding, saturated outputs); nothing
 * otherwise, or without an engine. */
enum adapt_status adapt_precision_sync(struct adapt_precision *p);

#endif
