/* src/net/optim.h: SGD with momentum, L2 and L1 decay (PyTorch torch.optim.SGD
 * semantics, dampening 0), and the learning-rate schedules (doc/models.md)
 * (constant; MultiStepLR; ReduceLROnPlateau, mode min, relative threshold).
 *
 * The optimizer owns one arena of momentum buffers, one per trainable
 * parameter, in the network's parameter order.
 *
 *   struct adapt_sgd opt;
 *   adapt_sgd_init(&opt, net, 0.01, 0.9, 5e-4, 0.0, 0);
 *   ... forward/backward (gradients accumulate) ...
 *   adapt_sgd_step(&opt, net, 1.0 / accumulation_steps);  // update, zero grads
 *   adapt_sgd_free(&opt);
 *
 * Non-goals: other optimizers; per-parameter-group settings.
 */
#ifndef ADAPT_OPTIM_H
#define ADAPT_OPTIM_H

#include "src/net/net.h"

struct adapt_sgd {
    double lr, momentum, l2, l1;
    int nesterov;
    int nbuf;
    float **buf;              /* momentum buffer of each trainable parameter (same shape) */
    struct adapt_param **par; /* the parameter each buffer belongs to */
    struct adapt_arena a_buf;
    long steps;               /* updates done */
    int l1_quantized;         /* 1: the L1 term reads what the layers compute with (param->use,
                                 the quantized copies), not the FP32 master (doc/algorithms.md) */
    int l2_quantized;         /* 1: likewise the L2 term: d = g + l2 * param->use */
};

enum adapt_status adapt_sgd_init(struct adapt_sgd *o, struct adapt_net *net, double lr,
                                 double momentum, double l2, double l1, int nesterov);
void adapt_sgd_free(struct adapt_sgd *o);

/* Scales every gradient by grad_scale and adds the L1 term loss_scale * l1 *
 * sign(w) (d/dw of l1 * sum |w| as part of a loss multiplied by loss_scale,
 * so that unscaling the gradients later leaves l1 * sign(w); 1 without loss
 * scaling). Separate from the update so gradient processing (quantization,
 * normalisation) can run in between. */
void adapt_sgd_prepare(struct adapt_sgd *o, double grad_scale, double loss_scale);
/* Its two halves: every gradient times grad_scale; then, in float32, g += loss_scale * l1 *
 * sign(w) (nothing when l1 is 0). AMP runs the second after rounding the gradients of its
 * half-precision backward, as the L1 term is not part of that backward (PyTorch: float32
 * parameters keep float32 gradients, which the L1 term's float32 gradient adds to). */
void adapt_sgd_scale_grads(struct adapt_sgd *o, double grad_scale);
void adapt_sgd_add_l1(struct adapt_sgd *o, double loss_scale);
/* d = g + l2 * w (w: the master, or param->use with l2_quantized);
 * b = m * b + d; w -= lr * (nesterov ? d + m * b : b);
 * then zeroes the gradients. */
void adapt_sgd_update(struct adapt_sgd *o);
/* prepare + update. */
void adapt_sgd_step(struct adapt_sgd *o, double grad_scale);
/* sum |w| over trainable parameters (for the L1 term of the loss; the
 * copies in use with l1_quantized). */
double adapt_sgd_l1_norm(const struct adapt_sgd *o);

enum adapt_sched_kind { ADAPT_SCHED_CONSTANT = 0, ADAPT_SCHED_MULTISTEP, ADAPT_SCHED_PLATEAU };

struct adapt_sched {
    enum adapt_sched_kind kind;
    double base_lr, lr;
    /* multistep */
    int nmilestones;
    int milestones[32];
    double gamma;
    /* plateau */
    double factor, threshold, min_lr, best;
    int patience, cooldown, num_bad, cooldown_counter;
    int last_epoch; /* epochs completed */
};

void adapt_sched_init(struct adapt_sched *s, enum adapt_sched_kind kind, double base_lr);
/* Called once at the end of every epoch with the validation loss (plateau
 * mode); returns the learning rate for the next epoch. */
double adapt_sched_step(struct adapt_sched *s, double val_loss);

#endif
