/* src/policy/roles.h: scaled rounding of the tensor roles (src/policy/roles.c), shared by
 * precision.c. Private to src/policy. */
#ifndef ADAPT_POLICY_ROLES_H
#define ADAPT_POLICY_ROLES_H

#include "src/policy/precision.h"

/* y = Q(x s) * (1/s) over rows x cols values in format s (its rounding set), with the scale of
 * role r's tensor id as the role's scaling says (current: from this x; delayed: from the
 * history, which then takes this x's amax; rowwise: each of the srows rows of x, which divide
 * it evenly, from its own amax). Counts go to the tensor's state and to st (may be NULL). Host
 * arrays, or with a GPU engine attached its device arrays (the amax and the counts then wait for
 * the device). */
enum adapt_status adapt_role_round_scaled(struct adapt_precision *p, enum adapt_role r, int id,
                                          enum adapt_role_scaling sc, const struct quant_spec *s,
                                          const float *x, float *y, size_t rows, size_t cols,
                                          size_t srows, struct quant_key key,
                                          struct quant_stats *st);
/* Installs the backward hook on the error gradients (precision.c). */
void adapt_precision_install_grad_hook(struct adapt_precision *p);
/* The largest finite value of format s (its overflow set to saturate). */
float adapt_role_format_max(const struct quant_spec *s);
/* The scale for amax with the state's options: (fmax / amax) / 2^margin, a power of two at or
 * below it with pow2; 0 when amax is 0, inf or NaN (no scale from it). */
float adapt_role_scale_for(const struct adapt_precision *p, float fmax, float amax);

/* role_spec for role r of unit ui without an auto format (auto: 0, as float32). */
int adapt_precision_role_spec(const struct adapt_precision *p, int ui, enum adapt_role r,
                              int training, struct quant_spec *out, enum adapt_role_scaling *sc);
/* The random-bit key of MX copy `copy` (enum adapt_mx_copy) of unit `unit`'s operands. */
struct quant_key adapt_precision_mx_key(const struct adapt_precision *p, int copy, int unit,
                                        long counter);

/* roles.mx_axis = gemm (src/policy/mx_gemm.c). adapt_mx_gemm_input: called by the input hook;
 * on a forward sets the unit's MX operands on its layer; 1 when the layer rounds its input
 * itself (the hook leaves it unrounded, forward and backward). adapt_mx_gemm_takes_dy: 1 when
 * the layer of unit node `node` rounds its output gradient itself. */
int adapt_mx_gemm_input(struct adapt_precision *p, int node, int training, int backward);
int adapt_mx_gemm_takes_dy(const struct adapt_precision *p, int node);
void adapt_mx_gemm_free(struct adapt_precision *p);

/* arithmetic.accumulator (src/policy/arith.c): the fixed-point grid (fractional bits) of a
 * tensor rounded with s and scaling sc, -1 when that is not a plain fixed-point grid; the
 * hooks record it as unit ui's operand of role r (weight, input, grad_output; no-op without
 * accumulator models); the models' release. */
int adapt_arith_grid(const struct quant_spec *s, enum adapt_role_scaling sc);
void adapt_arith_set_grid(struct adapt_precision *p, int ui, enum adapt_role r, int fl);
void adapt_precision_arith_free(struct adapt_precision *p);
/* Role r of unit ui as the hooks resolve it, the policy's own rounding (auto) included: 1 with
 * its format and scaling, 0 when the tensor stays float32 (weight, input, grad_output). */
int adapt_precision_role_spec_auto(const struct adapt_precision *p, int ui, enum adapt_role r,
                                   struct quant_spec *out, enum adapt_role_scaling *sc);

#endif
